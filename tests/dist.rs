//! The release artifact (`make dist`, `scripts/dist.sh`): the tarball holds exactly the
//! stripped module, LICENSE, README.md, CHANGELOG.md, a redis.conf line and SHA256SUMS; the
//! sums verify; and the module unpacked from it loads into a fresh server, which reports the
//! crate's version in `MODULE LIST` and `INFO ratelimit` and limits.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh temporary directory for this test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-dist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The module's `MODULE LIST` entry as (name, ver).
fn module_list(c: &mut Connection) -> Vec<(String, i64)> {
    let modules: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(c).expect("MODULE LIST");
    modules
        .into_iter()
        .map(|fields| {
            let mut name = String::new();
            let mut ver = -1;
            for pair in fields.chunks(2) {
                match (&pair[0], &pair[1]) {
                    (Value::BulkString(k), Value::BulkString(v)) if k == b"name" => {
                        name = String::from_utf8_lossy(v).into_owned();
                    }
                    (Value::SimpleString(k), Value::BulkString(v)) if k == "name" => {
                        name = String::from_utf8_lossy(v).into_owned();
                    }
                    (Value::BulkString(k), Value::Int(v)) if k == b"ver" => ver = *v,
                    (Value::SimpleString(k), Value::Int(v)) if k == "ver" => ver = *v,
                    _ => {}
                }
            }
            (name, ver)
        })
        .collect()
}

#[test]
fn the_release_tarball_unpacks_verifies_and_loads() {
    let version = env!("CARGO_PKG_VERSION");
    let parts: Vec<i64> = version.split('.').map(|p| p.parse().expect("version part")).collect();
    let ver = parts[0] * 10_000 + parts[1] * 100 + parts[2];
    let out = temp_dir("out");
    let tarball = run_ok(
        Command::new("bash")
            .arg(root().join("scripts/dist.sh"))
            .env("MODULE", module_path())
            .env("DIST_DIR", &out),
    );
    let tarball = PathBuf::from(tarball.trim());
    let arch = run_ok(Command::new("uname").arg("-m"));
    let name = format!("redis-ratelimit-{version}-linux-{}", arch.trim());
    assert_eq!(tarball, out.join(format!("{name}.tar.gz")));
    // The checksum file beside the tarball verifies it.
    run_ok(
        Command::new("sha256sum").arg("-c").arg(format!("{name}.tar.gz.sha256")).current_dir(&out),
    );

    let listing = run_ok(Command::new("tar").arg("tzf").arg(&tarball));
    let mut files: Vec<&str> = listing.lines().filter(|l| !l.ends_with('/')).collect();
    files.sort_unstable();
    let expected: Vec<String> = [
        "CHANGELOG.md",
        "LICENSE",
        "README.md",
        "SHA256SUMS",
        "libredis_ratelimit.so",
        "redis.conf",
    ]
    .iter()
    .map(|f| format!("{name}/{f}"))
    .collect();
    assert_eq!(files, expected);

    let unpacked = temp_dir("unpacked");
    run_ok(Command::new("tar").arg("xzf").arg(&tarball).arg("-C").arg(&unpacked));
    let dir = unpacked.join(&name);
    run_ok(Command::new("sha256sum").arg("-c").arg("SHA256SUMS").current_dir(&dir));
    let so = dir.join("libredis_ratelimit.so");
    assert!(
        std::fs::metadata(&so).expect("module").len()
            < std::fs::metadata(module_path()).expect("built module").len(),
        "the packaged module is stripped"
    );
    let conf = std::fs::read_to_string(dir.join("redis.conf")).expect("redis.conf");
    assert!(conf
        .lines()
        .any(|l| l.starts_with("loadmodule ") && l.ends_with("libredis_ratelimit.so")));
    assert_eq!(
        std::fs::read(dir.join("LICENSE")).expect("LICENSE"),
        std::fs::read(root().join("LICENSE")).expect("LICENSE")
    );

    // The unpacked module, not the build, is what the server loads.
    let s = Server::start_module(Path::new(&so), &[], &[]);
    let mut c = s.conn();
    assert!(module_list(&mut c).contains(&("ratelimit".to_string(), ver)), "{version} → {ver}");
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_version"), version);
    let path: String = redis::cmd("MODULE")
        .arg("LIST")
        .query::<Vec<Vec<Value>>>(&mut c)
        .map(|m| format!("{m:?}"))
        .expect("MODULE LIST");
    assert!(path.contains(&name), "the server loaded the unpacked module: {path}");
    assert_eq!(ints(&mut c, &["RL.TOKEN", "k", "10", "1", "1s"])[..3], [1, 10, 9]);
    s.assert_alive();
    drop(s);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&unpacked);
}
