//! The client examples in `examples/` (and quoted in the README) run against a real server:
//! Python (redis-py, its cluster client on a 3-master cluster, and a small HTTP service with the
//! IETF RateLimit headers over real loopback HTTP), Node (ioredis) and Rust (the `redis`
//! crate). `make examples` (a prerequisite of `make test`) installs redis-py into
//! `target/pyenv`, ioredis into `examples/node/node_modules` and builds the Rust example.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The interpreter with redis-py: `$RL_PYTHON`, else the venv `make examples` creates.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("RL_PYTHON") {
        return p.into();
    }
    let venv = root().join("target/pyenv/bin/python3");
    assert!(venv.exists(), "{} is missing: run `make examples` first", venv.display());
    venv
}

/// Runs `command` to completion within `secs` (killing it after that) and returns its stdout;
/// fails the test, with stderr, unless it exits successfully.
fn output_within(mut command: Command, secs: u64) -> String {
    let what = format!("{command:?}");
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    assert!(status.success(), "{what} failed ({status}):\n{out}\n{err}");
    out
}

/// The output every token example prints: 5 of 7 admitted by a bucket of 5 (+1 per minute).
fn check_token_output(out: &str) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 8, "unexpected output:\n{out}");
    for i in 1..=5 {
        assert_eq!(lines[i - 1], format!("{i} allowed remaining={} limit=5", 5 - i), "{out}");
    }
    for i in 6..=7 {
        let retry = lines[i - 1]
            .strip_prefix(&format!("{i} limited retry_after_ms="))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("line {i} is not a limited reply:\n{out}"));
        assert!(retry > 0 && retry <= 60_000, "retry_after_ms {retry}:\n{out}");
    }
    assert_eq!(lines[7], "admitted 5 of 7");
}

#[test]
fn python_token_example() {
    let server = Server::start();
    let mut c = Command::new(python());
    c.arg(root().join("examples/python/quickstart.py")).arg(server.addr());
    check_token_output(&output_within(c, 120));
}

#[test]
fn node_token_example() {
    let dir = root().join("examples/node");
    assert!(
        dir.join("node_modules/ioredis").exists(),
        "ioredis is not installed: run `make examples` first"
    );
    let server = Server::start();
    let mut c = Command::new("node");
    c.arg(dir.join("token.js")).arg(server.addr());
    check_token_output(&output_within(c, 120));
}

#[test]
fn rust_token_example() {
    let server = Server::start();
    let mut c = cargo();
    // Built as `make examples` builds it: release, in the workspace's target directory.
    c.args(["run", "--quiet", "--locked", "--release", "--manifest-path"])
        .arg(root().join("examples/rust/Cargo.toml"))
        .arg("--target-dir")
        .arg(root().join("target"))
        .arg("--")
        .arg(server.addr());
    // The first run may build the crate.
    check_token_output(&output_within(c, 900));
}

#[test]
fn python_cluster_example() {
    let nodes: Vec<Server> = (0..3).map(|_| cluster_node()).collect();
    let addrs: Vec<String> = nodes.iter().map(Server::addr).collect();
    let mut create = Command::new(cli_bin());
    create.args(["--cluster", "create"]).args(&addrs);
    create.args(["--cluster-replicas", "0", "--cluster-yes"]);
    output_within(create, 120);
    let deadline = Instant::now() + Duration::from_secs(60);
    for n in &nodes {
        let state_ok = || {
            let info: String =
                redis::cmd("CLUSTER").arg("INFO").query(&mut n.conn()).unwrap_or_default();
            info.lines().any(|l| l.trim() == "cluster_state:ok")
        };
        while !state_ok() {
            assert!(Instant::now() < deadline, "the cluster did not become ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut c = Command::new(python());
    c.arg(root().join("examples/python/cluster.py")).arg(&addrs[0]);
    let out = output_within(c, 120);
    // 20 users: 10 of 12 API calls and 3 of 4 login attempts each; the users' hash tags fall
    // in all three masters' slot ranges.
    assert_eq!(out.trim(), "users=20 masters_used=3 api_admitted=200 login_admitted=60");
}

/// A running `examples/python/http_service.py`, killed on drop.
struct HttpService {
    child: Child,
    addr: String,
}

impl HttpService {
    fn start(redis_addr: &str, extra: &[&str]) -> HttpService {
        let mut child = Command::new(python())
            .arg(root().join("examples/python/http_service.py"))
            .args(["--redis", redis_addr, "--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn http_service.py");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("http_service.py did not start: {line:?}");
        };
        HttpService { addr: addr.to_string(), child }
    }

    /// One `GET` as client `key`: the status code and the headers (names lower-cased).
    fn get(&self, key: &str) -> (u16, Vec<(String, String)>) {
        let mut s = TcpStream::connect(&self.addr).expect("connect to the HTTP service");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        write!(s, "GET /hello HTTP/1.1\r\nHost: {}\r\nX-Api-Key: {key}\r\n", self.addr)
            .and_then(|_| s.write_all(b"Connection: close\r\n\r\n"))
            .expect("send request");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("read reply");
        let head = reply.split("\r\n\r\n").next().unwrap_or_default();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad HTTP reply {reply:?}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers)
    }
}

impl Drop for HttpService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `"default";r=<r>;t=<t>` → (r, t).
fn ratelimit_fields(value: &str) -> (i64, i64) {
    let field = |name: &str| {
        value
            .split(';')
            .find_map(|p| p.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in RateLimit: {value}"))
    };
    assert!(value.starts_with("\"default\";"), "RateLimit: {value}");
    (field("r="), field("t="))
}

#[test]
fn http_service_answers_429_with_ratelimit_headers() {
    let server = Server::start();
    let service = HttpService::start(&server.addr(), &[]);
    for i in 1..=100 {
        let (status, headers) = service.get("alice");
        assert_eq!(status, 200, "request {i}: {headers:?}");
        assert_eq!(header(&headers, "ratelimit-policy"), Some("\"default\";q=100;w=60"));
        let (r, t) = ratelimit_fields(header(&headers, "ratelimit").expect("RateLimit header"));
        assert_eq!(r, 100 - i, "{headers:?}");
        assert!((1..=60).contains(&t), "{headers:?}");
        assert_eq!(header(&headers, "retry-after"), None);
    }
    for _ in 0..2 {
        let (status, headers) = service.get("alice");
        assert_eq!(status, 429, "{headers:?}");
        assert_eq!(header(&headers, "ratelimit-policy"), Some("\"default\";q=100;w=60"));
        let (r, t) = ratelimit_fields(header(&headers, "ratelimit").expect("RateLimit header"));
        assert_eq!(r, 0);
        let retry: i64 =
            header(&headers, "retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
        assert!((1..=60).contains(&retry) && retry <= t, "{headers:?}");
    }
    // Another client has its own window.
    let (status, headers) = service.get("bob");
    assert_eq!(status, 200);
    assert_eq!(ratelimit_fields(header(&headers, "ratelimit").expect("RateLimit")).0, 99);
}

/// The README or a page of `docs/` quotes each example's `readme-begin` … `readme-end` part
/// verbatim.
#[test]
fn readme_quotes_the_examples() {
    let mut readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let path = entry.expect("docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            readme.push_str(&std::fs::read_to_string(&path).expect("docs page"));
        }
    }
    for file in [
        "examples/python/quickstart.py",
        "examples/python/cluster.py",
        "examples/python/http_service.py",
        "examples/node/token.js",
        "examples/rust/src/main.rs",
    ] {
        let text = std::fs::read_to_string(root().join(file)).expect("example");
        let lines: Vec<&str> = text.lines().collect();
        let begin = lines.iter().position(|l| l.trim_end().ends_with("readme-begin"));
        let end = lines.iter().position(|l| l.trim_end().ends_with("readme-end"));
        let (Some(begin), Some(end)) = (begin, end) else {
            panic!("{file} has no readme-begin/readme-end markers");
        };
        let part = &lines[begin + 1..end];
        let indent = part
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap_or(0);
        let quoted: String =
            part.iter().map(|l| format!("{}\n", l.get(indent..).unwrap_or(""))).collect();
        assert!(
            readme.contains(&quoted),
            "neither README.md nor docs/ quotes {file} exactly:\n{quoted}"
        );
    }
}
