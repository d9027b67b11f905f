//! `make deps` installs what is missing with apt and must never stop a server it did not start
//! (issue 31, defect 12: it ran `pkill -x redis-server` after any install, which killed every
//! redis-server on the host). Debian's redis-server package starts a server as it installs; the
//! Makefile keeps that from happening with a policy-rc.d that forbids service starts while apt
//! runs (scripts/apt-install.sh), and puts back whatever policy-rc.d was there before.
//!
//! The test runs the real `make deps` with a PATH that lacks redis-server and redis-cli and in
//! which `apt-get`, `sudo`, `pkill` and `killall` are stand-ins that write down how they were
//! called; the stand-in apt-get asks the policy-rc.d in force whether `redis-server start` may
//! run, as invoke-rc.d does. Nothing is installed and no process is signalled.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script(path: &Path, body: &str) {
    fs::write(path, format!("#!/bin/bash\n{body}\n")).expect("write a stand-in");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod a stand-in");
}

/// Where a tool is on the test's own PATH.
fn which(tool: &str) -> PathBuf {
    let out = Command::new("/bin/bash")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .expect("bash");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!path.is_empty(), "{tool} is not on PATH");
    PathBuf::from(path)
}

/// Runs `make deps` in a sandboxed PATH; returns the log the stand-ins wrote and make's output.
fn make_deps(dir: &Path, policy: &Path) -> (String, String) {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).expect("mkdir bin");
    // The real tools the Makefile and scripts/apt-install.sh use; redis-server and redis-cli
    // are left out, so make deps finds them missing.
    for tool in [
        "bash", "id", "ls", "sed", "head", "tee", "chmod", "mv", "rm", "env", "cat", "dirname",
        "make",
    ] {
        std::os::unix::fs::symlink(which(tool), bin.join(tool)).expect("symlink a tool");
    }
    let log = dir.join("log");
    let log_s = log.display();
    let policy_s = policy.display();
    script(&bin.join("cc"), "exit 0");
    script(&bin.join("c++"), "exit 0");
    script(&bin.join("sudo"), r#"exec "$@""#);
    script(&bin.join("pkill"), &format!(r#"echo "pkill $*" >> {log_s}"#));
    script(&bin.join("killall"), &format!(r#"echo "killall $*" >> {log_s}"#));
    script(
        &bin.join("apt-get"),
        &format!(
            r#"echo "apt-get $*" >> {log_s}
if [ "$1" = install ]; then
  if [ -x {policy_s} ]; then {policy_s} redis-server start; echo "policy-rc.d redis-server start: $?" >> {log_s}
  else echo "policy-rc.d redis-server start: none" >> {log_s}; fi
fi"#
        ),
    );
    let out = Command::new(bin.join("make"))
        .args(["--no-print-directory", "-C"])
        .arg(root())
        .arg("deps")
        .arg(format!("POLICY_RC_D={}", policy.display()))
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", dir)
        .env("LIBCLANG_PATH", dir)
        .output()
        .expect("run make deps");
    let output =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "make deps failed:\n{output}");
    (fs::read_to_string(&log).unwrap_or_default(), output)
}

fn sandbox(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-make-deps-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("mkdir sandbox");
    dir
}

#[test]
fn make_deps_keeps_the_service_from_starting_and_stops_nothing() {
    let dir = sandbox("fresh");
    let policy = dir.join("policy-rc.d");
    let (log, output) = make_deps(&dir, &policy);
    assert!(log.contains("apt-get install"), "make deps installed nothing:\n{log}\n{output}");
    assert!(log.contains("redis-server") && log.contains("redis-tools"), "{log}");
    assert!(
        log.contains("policy-rc.d redis-server start: 101"),
        "while apt installs, service starts must be forbidden (policy-rc.d answering 101):\n{log}"
    );
    assert!(
        !log.contains("pkill") && !log.contains("killall"),
        "make deps stops servers by name:\n{log}"
    );
    assert!(!policy.exists(), "the policy-rc.d make deps put in place is left behind");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn make_deps_puts_back_the_policy_that_was_there() {
    let dir = sandbox("kept");
    let policy = dir.join("policy-rc.d");
    let mine = "#!/bin/sh\n# the host's own policy\nexit 0\n";
    fs::write(&policy, mine).expect("write policy");
    fs::set_permissions(&policy, fs::Permissions::from_mode(0o755)).expect("chmod policy");
    let (log, _) = make_deps(&dir, &policy);
    assert!(log.contains("policy-rc.d redis-server start: 101"), "{log}");
    assert!(!log.contains("pkill") && !log.contains("killall"), "{log}");
    assert_eq!(fs::read_to_string(&policy).expect("the policy is back"), mine);
    let _ = fs::remove_dir_all(&dir);
}
