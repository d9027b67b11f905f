//! Integration-test harness: every test starts its own server (`redis-server`, or `$RL_SERVER`)
//! with the module loaded, on a unix socket in a fresh directory (plus a free loopback TCP
//! port, for replication), waits for it with a deadline, and kills it and removes its
//! directory on drop.
//!
//! The module is the `cdylib` cargo builds next to the test binary (`target/<profile>/deps`).
//! Tests never link the module crate itself (its global allocator needs a running Redis).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use redis::{Connection, Value};

const STARTUP_DEADLINE: Duration = Duration::from_secs(15);

/// The server binary: `$RL_SERVER` (e.g. a Valkey or newer Redis build, see `make compat`),
/// `redis-server` on the PATH by default.
pub fn server_bin() -> String {
    std::env::var("RL_SERVER").ok().filter(|s| !s.is_empty()).unwrap_or("redis-server".into())
}

/// The matching command-line client (`--cluster` commands): `$RL_CLI`, `redis-cli` by default.
pub fn cli_bin() -> String {
    std::env::var("RL_CLI").ok().filter(|s| !s.is_empty()).unwrap_or("redis-cli".into())
}

/// A `cargo` command for a nested build (the CLI, the Rust example) that builds exactly what
/// `make build` and `make examples` build. `cargo test` runs a test with the environment of the
/// crate under test (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...); a nested cargo would inherit it,
/// and a dependency whose build script watches one of them (`ring` reruns on
/// `CARGO_MANIFEST_DIR`) would be rebuilt with everything above it, then rebuilt back by the
/// next outer `cargo build`: about a minute of CPU per test run (issue 38). Cargo's own settings
/// (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`, `CARGO_PROFILE_*`, ...) are kept.
pub fn cargo() -> Command {
    const SET_FOR_THE_CRATE: [&str; 9] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if SET_FOR_THE_CRATE.contains(&name.as_ref())
            || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_BIN_EXE_")
        {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The module built for this test run.
pub fn module_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().expect("test executable directory");
    for candidate in [dir.join("libredis_ratelimit.so"), dir.join("../libredis_ratelimit.so")] {
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("libredis_ratelimit.so not found next to {}", exe.display());
}

/// Fixed ports in the ephemeral range that host suites running beside the matrix in `make
/// compat` start servers on (limits' Sentinel with a password, Flask-Limiter's Redis:
/// ../shared/peers/README-python.md): never taken here, as a port or as a cluster bus port.
const HOST_SUITES_PORTS: [u16; 2] = [36_379, 46_379];

/// A free loopback port whose cluster bus port (+10000) is free too.
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = listener.local_addr().expect("local addr").port();
        let reserved = HOST_SUITES_PORTS.iter().any(|&p| p == port || p == port + 10_000);
        if port <= 55_535 && !reserved && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

fn fresh_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("redis-ratelimit-tests")
        .join(format!("{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// A running `redis-server` with the module loaded.
pub struct Server {
    child: Option<Child>,
    pub dir: PathBuf,
    pub sock: PathBuf,
    pub port: u16,
    args: Vec<String>,
}

impl Server {
    /// A server with default settings (no persistence).
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (`--name value` pairs); module arguments
    /// go through `start_with_module_args`.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::start_full(extra, &[])
    }

    pub fn start_full(extra: &[&str], module_args: &[&str]) -> Server {
        Server::start_module(&module_path(), extra, module_args)
    }

    /// A server loading the module at `module` (e.g. one unpacked from a release tarball).
    pub fn start_module(module: &std::path::Path, extra: &[&str], module_args: &[&str]) -> Server {
        let dir = fresh_dir();
        let sock = dir.join("redis.sock");
        let port = free_port();
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--unixsocket".into(),
            sock.display().to_string(),
            "--dir".into(),
            dir.display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--enable-debug-command".into(),
            "local".into(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut load = vec!["--loadmodule".to_string(), module.display().to_string()];
        load.extend(module_args.iter().map(|s| s.to_string()));
        args.extend(load);
        let mut server = Server { child: None, dir, sock, port, args };
        // The port was free when `free_port` asked, but the OS may hand it to another
        // connection's local end (tests run in parallel) before the server binds it: a server
        // that exits for that reason is started again on another free port.
        for _ in 0..4 {
            match server.try_spawn() {
                Err(log) if log.contains("Address already in use") => server.move_to(free_port()),
                Err(log) => panic!("{log}"),
                Ok(()) => return server,
            }
        }
        server.spawn();
        server
    }

    /// Points the server's arguments at `port` (before it starts).
    fn move_to(&mut self, port: u16) {
        let at = self.args.iter().position(|a| a == "--port").map(|i| i + 1);
        if let Some(value) = at.and_then(|i| self.args.get_mut(i)) {
            *value = port.to_string();
        }
        self.port = port;
    }

    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            panic!("{e}");
        }
    }

    /// Starts the process and waits until it answers; `Err` with the log if it exits first.
    fn try_spawn(&mut self) -> Result<(), String> {
        let _ = std::fs::remove_file(&self.sock);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("open server log");
        let bin = server_bin();
        let child = Command::new(&bin)
            .args(&self.args)
            .stdout(Stdio::from(log.try_clone().expect("clone log")))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin} ({e}; is it installed? run `make deps`)"));
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "redis-server exited at startup ({status}):\n{}",
                        self.log()
                    ));
                }
            }
            if self.sock.exists() {
                if let Ok(mut con) = self.try_conn() {
                    let loading: Result<String, _> = redis::cmd("PING").query(&mut con);
                    if loading.is_ok() {
                        return Ok(());
                    }
                }
            }
            if Instant::now() > deadline {
                panic!("redis-server did not start within {STARTUP_DEADLINE:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn try_conn(&self) -> redis::RedisResult<Connection> {
        redis::Client::open(format!("redis+unix://{}", self.sock.display()))?.get_connection()
    }

    /// A RESP2 connection.
    pub fn conn(&self) -> Connection {
        self.try_conn().expect("connect to test server")
    }

    /// A RESP3 connection.
    pub fn conn_resp3(&self) -> Connection {
        redis::Client::open(format!("redis+unix://{}?protocol=resp3", self.sock.display()))
            .and_then(|c| c.get_connection())
            .expect("connect with RESP3")
    }

    /// Stops the server without saving and starts it again on the same directory and
    /// arguments (so it reloads whatever RDB/AOF files are there).
    pub fn restart(&mut self) {
        if let Err(e) = self.try_restart() {
            panic!("{e}");
        }
    }

    /// [`Server::restart`], with `Err` (and the log) if the server exits while starting, e.g.
    /// because it refuses the files it loads.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.stop();
        self.try_spawn()
    }

    /// Stops the server without saving (until a restart), e.g. to put files in its directory.
    pub fn stop(&mut self) {
        let asked = self.try_conn().map(|mut con| {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
        });
        if let Some(mut child) = self.child.take() {
            if asked.is_err() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }

    /// Whether the server process has exited by itself (e.g. a replica that refused what its
    /// master sent).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Kills the server at once (SIGKILL: no save, no goodbye to replicas or clients), as a
    /// crashed host would; its directory stays until drop.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Fails the test unless the server still answers (a panic in the module kills it).
    pub fn assert_alive(&self) {
        let mut con =
            self.try_conn().unwrap_or_else(|e| panic!("server gone ({e}):\n{}", self.log()));
        let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
        assert_eq!(pong, "PONG");
    }

    /// `host:port` of this server.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        Path::new(&self.dir).join(name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a command given as byte-string arguments.
pub fn cmd(args: &[&[u8]]) -> redis::Cmd {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs a command given as string arguments and returns the raw reply.
pub fn run(con: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let bytes: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    cmd(&bytes).query(con)
}

/// Runs a limiting command and returns its integer reply.
pub fn ints(con: &mut Connection, args: &[&str]) -> Vec<i64> {
    let bytes: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    cmd(&bytes).query(con).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a limiting command written as one line of space-separated words (no word may contain
/// a space) and returns its integer reply.
pub fn line(con: &mut Connection, command: &str) -> Vec<i64> {
    let words: Vec<&str> = command.split_whitespace().collect();
    ints(con, &words)
}

/// The full error text of a failing command (`CODE detail`).
pub fn error_text(con: &mut Connection, args: &[&[u8]]) -> String {
    match cmd(args).query::<Value>(con) {
        Ok(v) => panic!("expected an error from {args:?}, got {v:?}"),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        },
    }
}

pub fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).expect("PEXPIRETIME")
}

/// `RL.INFO` as (field, value) pairs, without the now-dependent fields (`ttl_ms` and those
/// after it: `now_ms`, a sliding window's `window_*`).
pub fn stored_state(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    let v: Value = redis::cmd("RL.INFO").arg(key).query(con).expect("RL.INFO");
    let items = match v {
        Value::Array(items) => items,
        Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        Value::Nil => return Vec::new(),
        other => panic!("unexpected RL.INFO reply {other:?}"),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    items
        .chunks(2)
        .map(|pair| (text(&pair[0]), text(&pair[1])))
        .take_while(|(k, _)| k != "ttl_ms")
        .collect()
}

/// Everything that must survive persistence and replication for one key: the stored state,
/// the absolute expiry and the value digest.
pub fn snapshot(con: &mut Connection, key: &str) -> (Vec<(String, String)>, i64, String) {
    let digest: String = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query::<Vec<String>>(con)
        .map(|mut v| v.pop().unwrap_or_default())
        .expect("DEBUG DIGEST-VALUE");
    (stored_state(con, key), pexpiretime(con, key), digest)
}

/// An `INFO` field as text.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .to_string()
}

/// The current unix time in ms (for computing expectations near the server clock).
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Redis' DUMP checksum: CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9, init 0).
pub fn crc64(bytes: &[u8]) -> u64 {
    const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY_REFLECTED } else { crc >> 1 };
        }
    }
    crc
}

/// Polls `ok` every 10 ms until it holds; fails the test after 20 s.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A replica of `master` with extra arguments, linked (`master_link_status:up`).
pub fn replica_of(master: &Server, extra: &[&str]) -> Server {
    replica_with_module(master, &module_path(), extra)
}

/// [`replica_of`] loading the module at `module` (e.g. an earlier release's).
pub fn replica_with_module(master: &Server, module: &Path, extra: &[&str]) -> Server {
    let port = master.port.to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", &port];
    args.extend_from_slice(extra);
    let replica = Server::start_module(module, &args, &[]);
    let mut rc = replica.conn();
    wait_for("replication link", || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    replica
}

/// Starts a master and a replica of it, linked and in sync.
pub fn master_and_replica() -> (Server, Server) {
    let master = Server::start();
    let replica = replica_of(&master, &[]);
    (master, replica)
}

/// Waits until the replica has processed everything the master has sent so far.
pub fn wait_in_sync(master: &Server, replica: &Server) {
    let mut mc = master.conn();
    let mut rc = replica.conn();
    let offset: i64 = info_field(&mut mc, "replication", "master_repl_offset").parse().unwrap();
    // The master may add PINGs meanwhile, so the replica can pass this offset.
    wait_for("replica offset", || {
        let at: i64 = info_field(&mut rc, "replication", "slave_repl_offset").parse().unwrap_or(-1);
        at >= offset
    });
}

/// A node for a Redis Cluster on loopback (cluster bus on port + 10000).
pub fn cluster_node() -> Server {
    Server::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "3000",
    ])
}
