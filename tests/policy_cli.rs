//! `redis-ratelimit policy apply|diff|export` (the binary, built from `cli/`) against real
//! servers: one node, and a 3-master cluster to which a fourth primary is added. The commands
//! shown in docs/policies.md ("Policies as code") and docs/operations.md ("Adding a node: its
//! policies") are read from the docs and run as written, with the test's addresses in place
//! of the docs' (`# exit N` in a line's comment is the exit code it must give; 0 otherwise).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `redis-ratelimit` binary of this build profile, built once per test run (the root
/// package's tests do not build the workspace's other binaries).
fn cli() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let mut build = cargo();
        // The whole workspace, as `make build` builds it: the same feature set, so no dependency
        // is built a second time for a narrower selection.
        build.args(["build", "-q", "--workspace", "--bin", "redis-ratelimit"]);
        build.arg("--manifest-path").arg(root().join("Cargo.toml"));
        if release {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build -p redis-ratelimit-cli failed");
        let bin = profile_dir.join("redis-ratelimit");
        assert!(bin.exists(), "{} missing", bin.display());
        bin
    })
}

/// What one run of the binary gave.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_cli(dir: &Path, args: &[&str]) -> Ran {
    let out = Command::new(cli())
        .args(args)
        .current_dir(dir)
        .env_remove("REDIS_URL")
        .output()
        .expect("run redis-ratelimit");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn url(server: &Server) -> String {
    format!("redis://{}", server.addr())
}

/// A fresh directory for files.
fn scratch(server: &Server, name: &str) -> PathBuf {
    let dir = server.dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The lines of a doc's section (from its heading to the next heading of the same level or
/// higher).
fn section(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(root().join(doc)).expect(doc);
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with('#') && !line.starts_with("#!") {
            let this = line.chars().take_while(|c| *c == '#').count();
            if inside && this <= level {
                break;
            }
            if line == heading {
                inside = true;
                continue;
            }
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "no section {heading} in {doc}");
    out
}

/// The fenced blocks of a given language in a text.
fn blocks(text: &str, language: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<(bool, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            fence = match fence.take() {
                Some((wanted, block)) => {
                    if wanted {
                        out.push(block);
                    }
                    None
                }
                None => Some((rest.trim() == language, String::new())),
            };
            continue;
        }
        if let Some((_, block)) = fence.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    out
}

/// One shell line of a doc: its words (comment dropped), the file its stdout goes to, and the
/// exit code its comment gives (`# exit N`, else 0).
struct DocLine {
    text: String,
    words: Vec<String>,
    stdout_to: Option<String>,
    exit: i32,
}

fn doc_lines(block: &str, replace: &[(&str, &str)]) -> Vec<DocLine> {
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (command, comment) = line.split_once(" #").unwrap_or((line, ""));
            let exit = comment
                .trim()
                .strip_prefix("exit ")
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let mut command = command.trim().to_string();
            for (from, to) in replace {
                command = command.replace(from, to);
            }
            let (command, stdout_to) = match command.split_once(" > ") {
                Some((c, file)) => (c.to_string(), Some(file.trim().to_string())),
                None => (command, None),
            };
            let words = command.split_whitespace().map(str::to_string).collect();
            DocLine { text: line.to_string(), words, stdout_to, exit }
        })
        .collect()
}

/// Runs a doc line: `redis-ratelimit …` with the built binary, `redis-cli …` with the test's
/// client. Checks its exit code; returns what it printed.
fn run_doc_line(dir: &Path, line: &DocLine) -> Ran {
    let (program, args) = line.words.split_first().expect("a command");
    let ran = match program.as_str() {
        "redis-ratelimit" => {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_cli(dir, &args)
        }
        "redis-cli" => {
            let out = Command::new(cli_bin()).args(args).current_dir(dir).output().unwrap();
            Ran {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        other => panic!("a doc line runs {other}: {}", line.text),
    };
    assert_eq!(
        ran.code, line.exit,
        "{}\nstdout:\n{}\nstderr:\n{}",
        line.text, ran.stdout, ran.stderr
    );
    if let Some(file) = &line.stdout_to {
        std::fs::write(dir.join(file), &ran.stdout).unwrap();
    }
    ran
}

const POLICIES_DOC: &str = "docs/policies.md";
const AS_CODE: &str = "## Policies as code: one file, every primary";
const DOC_URL: &str = "redis://127.0.0.1:6379";

/// The doc's example file, written as `policies.yaml` into `dir`.
fn write_doc_file(dir: &Path) -> String {
    let yaml = blocks(&section(POLICIES_DOC, AS_CODE), "yaml").remove(0);
    std::fs::write(dir.join("policies.yaml"), &yaml).unwrap();
    yaml
}

/// `RL.POLICY GET name [FOR key | CANDIDATE]`'s definition text, or None.
fn definition(c: &mut Connection, args: &[&str]) -> Option<String> {
    let mut all = vec!["RL.POLICY", "GET"];
    all.extend_from_slice(args);
    let v = run(c, &all).unwrap();
    let items = match v {
        Value::Nil => return None,
        Value::Array(items) => items,
        Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        other => panic!("{other:?}"),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    };
    items.chunks(2).find(|p| text(&p[0]) == "definition").map(|p| text(&p[1]))
}

fn names(c: &mut Connection) -> Vec<String> {
    redis::cmd("RL.POLICY").arg("LIST").query(c).unwrap()
}

#[test]
fn the_policies_doc_runs_as_written_on_a_node() {
    let server = Server::start();
    let dir = scratch(&server, "doc");
    write_doc_file(&dir);
    let address = url(&server);
    let lines =
        doc_lines(&blocks(&section(POLICIES_DOC, AS_CODE), "sh")[0], &[(DOC_URL, &address)]);
    assert!(lines.len() >= 7, "the doc shows apply, diff, export");
    let mut c = server.conn();
    for line in &lines {
        let before = names(&mut c);
        let ran = run_doc_line(&dir, line);
        if line.words.contains(&"--dry-run".to_string()) {
            assert_eq!(names(&mut c), before, "--dry-run changed nothing");
            assert!(ran.stdout.contains("+ policy free: TOKEN 100 10 1s"), "{}", ran.stdout);
            assert!(ran.stdout.contains("dry run: nothing changed"), "{}", ran.stdout);
        }
    }
    // The file is the table now.
    assert_eq!(names(&mut c), ["free", "pro"]);
    assert_eq!(definition(&mut c, &["free"]).as_deref(), Some("TOKEN 100 10 1s"));
    assert_eq!(definition(&mut c, &["pro"]).as_deref(), Some("PERIOD 10000 1h BAN 1m"));
    assert_eq!(definition(&mut c, &["free", "FOR", "api:t2"]).as_deref(), Some("PERIOD 50 1m"));
    assert_eq!(definition(&mut c, &["free", "CANDIDATE"]).as_deref(), Some("TOKEN 60 6 1s"));
    // The export is a file apply maps back to no change.
    let exported = std::fs::read_to_string(dir.join("exported.yaml")).unwrap();
    assert!(exported.contains("api:t2"), "{exported}");
    let again = run_cli(&dir, &["policy", "apply", "exported.yaml", "--url", &address]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("0 to add, 0 to change, 0 to remove"), "{}", again.stdout);
    assert!(again.stdout.contains("applied 0 change(s)"), "{}", again.stdout);
}

#[test]
fn apply_plans_adds_changes_removes_and_changes_nothing_twice() {
    let server = Server::start();
    let mut c = server.conn();
    for command in [
        "RL.POLICY SET free token 100 10 1000ms",
        "RL.POLICY SET old PERIOD 1 1s",
        "RL.POLICY SET free PERIOD 1 1s FOR gone",
        "RL.POLICY SET free PERIOD 9 1s CANDIDATE",
        "RL.POLICY SET pro PERIOD 5 1h",
    ] {
        let words: Vec<&str> = command.split_whitespace().collect();
        run(&mut c, &words).unwrap();
    }
    let dir = scratch(&server, "apply");
    write_doc_file(&dir);
    let address = url(&server);
    let plan = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &address, "--dry-run"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let expected = [
        format!("{}: 1 to add, 2 to change, 2 to remove", server.addr()),
        "  ~ policy pro: PERIOD 5 1h -> PERIOD 10000 1h BAN 1m".into(),
        "  + override free FOR \"api:t2\": PERIOD 50 1m".into(),
        "  ~ candidate free: PERIOD 9 1s -> TOKEN 60 6 1s".into(),
        "  - override free FOR \"gone\": PERIOD 1 1s".into(),
        "  - policy old: PERIOD 1 1s".into(),
        "dry run: nothing changed".into(),
    ];
    // `free` is spelled otherwise on the server but judges alike: no change.
    let lines: Vec<&str> = plan.stdout.lines().collect();
    assert_eq!(lines, expected, "{}", plan.stdout);
    assert_eq!(names(&mut c), ["free", "old", "pro"], "--dry-run changed nothing");
    let applied = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &address]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    assert!(applied.stdout.contains("applied 5 change(s)"), "{}", applied.stdout);
    assert_eq!(names(&mut c), ["free", "pro"], "a policy absent from the file is deleted");
    assert_eq!(definition(&mut c, &["free", "FOR", "gone"]), None);
    assert_eq!(definition(&mut c, &["free"]).as_deref(), Some("token 100 10 1000ms"));
    let twice = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &address]);
    assert!(twice.stdout.contains("0 to add, 0 to change, 0 to remove"), "{}", twice.stdout);
    assert!(twice.stdout.contains("applied 0 change(s)"), "{}", twice.stdout);
    let diff = run_cli(&dir, &["policy", "diff", "policies.yaml", "--url", &address]);
    assert_eq!((diff.code, diff.stdout.trim()), (0, format!("{}: equal", server.addr()).as_str()));
    // An empty file removes every policy.
    std::fs::write(dir.join("empty.yaml"), "policies: {}\n").unwrap();
    let diff = run_cli(&dir, &["policy", "diff", "empty.yaml", "--url", &address]);
    assert_eq!(diff.code, 1);
    assert!(diff.stdout.contains(&format!("{} disagrees with empty.yaml", server.addr())));
    assert_eq!(run_cli(&dir, &["policy", "apply", "empty.yaml", "--url", &address]).code, 0);
    assert!(names(&mut c).is_empty());
}

#[test]
fn errors_change_nothing_and_exit_2() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("requirepass").arg("s3cret").query(&mut c).unwrap();
    run(&mut c, &["RL.POLICY", "SET", "keep", "TOKEN", "1", "1", "1s"]).unwrap();
    let dir = scratch(&server, "errors");
    write_doc_file(&dir);
    let with_auth = format!("redis://:s3cret@{}", server.addr());
    for (file, text, expected) in [
        ("bad.yaml", "policies:\n  free: \"TOKEN 0 1 1s\"\n", "bad.yaml: policies: free: capacity"),
        ("bad2.yaml", "policies:\n  free: [1]\n", "bad2.yaml:"),
        ("bad3.yaml", "policies: {}\noverrides:\n  free:\n    k: TOKEN 1 1 1s\n", "no such policy"),
    ] {
        std::fs::write(dir.join(file), text).unwrap();
        for command in ["apply", "diff"] {
            let ran = run_cli(&dir, &["policy", command, file, "--url", &with_auth]);
            assert_eq!(ran.code, 2, "{command} {file}: {}", ran.stdout);
            assert!(ran.stderr.contains(expected), "{}", ran.stderr);
        }
    }
    let missing = run_cli(&dir, &["policy", "apply", "nope.yaml", "--url", &with_auth]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nope.yaml"), "{}", missing.stderr);
    let no_auth = run_cli(&dir, &["policy", "diff", "policies.yaml", "--url", &url(&server)]);
    assert_eq!(no_auth.code, 2, "{}", no_auth.stdout);
    assert!(
        no_auth.stderr.contains("NOAUTH") || no_auth.stderr.contains("auth"),
        "{}",
        no_auth.stderr
    );
    let bad_url = run_cli(&dir, &["policy", "export", "--url", "http://x"]);
    assert_eq!(bad_url.code, 2);
    assert_eq!(names(&mut c), ["keep"], "nothing changed");
    // With the password in the URL everything works.
    let ok = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &with_auth]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(names(&mut c), ["free", "pro"]);
    let exported = run_cli(&dir, &["policy", "export", "--url", &with_auth]);
    assert_eq!(exported.code, 0);
    assert!(exported.stdout.starts_with("policies:\n"), "{}", exported.stdout);
    // A server refusing a command (a replica: READONLY) is an error naming the change.
    let replica = replica_of(&server, &["--masterauth", "s3cret"]);
    let to_replica = url(&replica);
    std::fs::write(dir.join("other.yaml"), "policies:\n  x: TOKEN 1 1 1s\n").unwrap();
    let refused = run_cli(&dir, &["policy", "apply", "other.yaml", "--url", &to_replica]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(refused.stderr.to_lowercase().contains("read only"), "{}", refused.stderr);
}

/// Whether `observer` lists the node at `address` (`host:port`) as a connected primary.
fn knows(observer: &Server, address: &str) -> bool {
    let nodes: String =
        redis::cmd("CLUSTER").arg("NODES").query(&mut observer.conn()).unwrap_or_default();
    nodes.lines().any(|l| {
        let fields: Vec<&str> = l.split_whitespace().collect();
        fields.get(1).is_some_and(|a| a.starts_with(&format!("{address}@")))
            && fields.get(2).is_some_and(|f| f.contains("master") && !f.contains("handshake"))
            && fields.get(7) == Some(&"connected")
    })
}

fn cluster_ok(node: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String =
            redis::cmd("CLUSTER").arg("INFO").query(&mut node.conn()).unwrap_or_default();
        if info.contains("cluster_state:ok") {
            return;
        }
        assert!(Instant::now() < deadline, "cluster_state:ok: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn three_masters() -> Vec<Server> {
    let masters: Vec<Server> = (0..3).map(|_| cluster_node()).collect();
    let mut create = vec!["--cluster".to_string(), "create".to_string()];
    create.extend(masters.iter().map(Server::addr));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let out = Command::new(cli_bin()).args(&create).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    for m in &masters {
        cluster_ok(m);
    }
    masters
}

#[test]
fn a_cluster_gets_the_file_on_every_primary_and_a_new_node_is_told_and_repaired() {
    let masters = three_masters();
    let newcomer = cluster_node();
    let dir = scratch(&masters[0], "cluster");
    write_doc_file(&dir);
    let address = url(&masters[1]);
    // Any node's URL reaches every primary.
    let applied = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &address]);
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    for m in &masters {
        assert_eq!(names(&mut m.conn()), ["free", "pro"], "{}", m.addr());
        assert!(applied.stdout.contains(&format!("{}: 4 to add", m.addr())), "{}", applied.stdout);
    }
    // A primary that drifted is named.
    run(&mut masters[2].conn(), &["RL.POLICY", "SET", "free", "TOKEN", "1", "1", "1s"]).unwrap();
    let diff = run_cli(&dir, &["policy", "diff", "policies.yaml", "--url", &address]);
    assert_eq!(diff.code, 1, "{}", diff.stdout);
    assert!(diff.stdout.contains(&format!("{} disagrees", masters[2].addr())), "{}", diff.stdout);
    assert!(diff.stdout.contains(&format!("{}: equal", masters[0].addr())), "{}", diff.stdout);
    let export = run_cli(&dir, &["policy", "export", "--url", &address]);
    assert_eq!(export.code, 1, "the primaries disagree");
    assert!(export.stderr.contains(&masters[2].addr()), "{}", export.stderr);
    assert_eq!(run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &address]).code, 0);
    // docs/operations.md, "Adding a node", as written.
    let doc = section("docs/operations.md", "### Adding a node: its policies");
    let (first, fourth) = (masters[0].addr(), newcomer.addr());
    let lines = doc_lines(
        &blocks(&doc, "sh")[0],
        &[("127.0.0.1:7000", &first), ("127.0.0.1:7003", &fourth)],
    );
    assert_eq!(lines.len(), 5);
    for line in &lines {
        if line.words.get(2).is_some_and(|w| w == "rebalance") {
            // As the doc says: once every node lists the newcomer (gossip has spread it).
            let deadline = Instant::now() + Duration::from_secs(30);
            let all: Vec<&Server> = masters.iter().chain([&newcomer]).collect();
            while !all.iter().all(|a| all.iter().all(|b| knows(a, &b.addr()))) {
                assert!(Instant::now() < deadline, "the nodes never all knew each other");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let ran = run_doc_line(&dir, line);
        if line.words.get(1).is_some_and(|w| w == "--cluster") && line.words[2] == "add-node" {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !knows(&masters[0], &fourth) {
                assert!(Instant::now() < deadline, "{first} never listed {fourth}");
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(names(&mut newcomer.conn()).is_empty(), "a new node has no policies");
        }
        if line.exit == 1 {
            assert!(ran.stdout.contains(&format!("{fourth} disagrees")), "{}", ran.stdout);
        }
    }
    assert_eq!(names(&mut newcomer.conn()), ["free", "pro"]);
    cluster_ok(&newcomer);
    // It took slots: RL.HIT on a key it owns is judged by the copied policy.
    let slots: Vec<Value> =
        redis::cmd("CLUSTER").arg("SHARDS").query(&mut newcomer.conn()).unwrap();
    assert!(!slots.is_empty());
    let owned = (0..100_000)
        .map(|i| format!("api:t{i}"))
        .find(|key| {
            let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut newcomer.conn()).unwrap();
            let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut newcomer.conn()).unwrap();
            nodes.lines().any(|l| {
                l.contains("myself")
                    && l.split_whitespace().skip(8).any(|range| {
                        let (a, b) = range.split_once('-').unwrap_or((range, range));
                        matches!((a.parse::<i64>(), b.parse::<i64>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
                    })
            })
        })
        .expect("the new node owns some slot");
    let hit = run(&mut newcomer.conn(), &["RL.HIT", "free", &owned]).unwrap();
    assert!(matches!(hit, Value::Array(_)), "{hit:?}");
}

/// `rediss://` reaches a server over TLS (`#insecure`: a self-signed certificate). Skipped,
/// saying so, where the server was built without TLS or `openssl` is missing.
#[test]
fn rediss_urls_reach_a_tls_server() {
    let certs = std::env::temp_dir().join(format!("rl-policy-tls-{}", std::process::id()));
    std::fs::create_dir_all(&certs).unwrap();
    let (cert, key) = (certs.join("cert.pem"), certs.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj"])
        .arg("/CN=127.0.0.1")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED rediss_urls_reach_a_tls_server: no openssl to make a certificate");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let port_text = port.to_string();
    let args = [
        "--tls-port",
        port_text.as_str(),
        "--tls-cert-file",
        cert.as_str(),
        "--tls-key-file",
        key.as_str(),
        "--tls-ca-cert-file",
        cert.as_str(),
        "--tls-auth-clients",
        "no",
    ];
    let started = std::panic::catch_unwind(|| Server::start_with(&args));
    let Ok(server) = started else {
        eprintln!("SKIPPED rediss_urls_reach_a_tls_server: this server does not start with TLS");
        return;
    };
    let dir = scratch(&server, "tls");
    write_doc_file(&dir);
    let tls_url = format!("rediss://127.0.0.1:{port}/#insecure");
    let applied = run_cli(&dir, &["policy", "apply", "policies.yaml", "--url", &tls_url]);
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    assert!(applied.stdout.contains(&format!("127.0.0.1:{port}: 4 to add")), "{}", applied.stdout);
    assert_eq!(names(&mut server.conn()), ["free", "pro"]);
    let diff = run_cli(&dir, &["policy", "diff", "policies.yaml", "--url", &tls_url]);
    assert_eq!(diff.code, 0, "{}{}", diff.stdout, diff.stderr);
    // The certificate is checked unless told otherwise.
    let checked = format!("rediss://127.0.0.1:{port}");
    assert_eq!(run_cli(&dir, &["policy", "export", "--url", &checked]).code, 2);
    let _ = std::fs::remove_dir_all(&certs);
}
