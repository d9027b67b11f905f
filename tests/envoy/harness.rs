//! The Envoy harness: a real Envoy 1.40 (`make envoy` fetches it; `$ENVOY_BIN` overrides) in
//! front of `redis-ratelimit envoy` (the binary cargo built next to the module) in front of
//! Redis with the module. Each test starts its own three processes on free loopback ports,
//! waits for each with a deadline, and stops them by their PID on drop.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{module_path, Server};

const DEADLINE: Duration = Duration::from_secs(30);

pub use super::common::free_port;

/// The service binary: `target/<profile>/redis-ratelimit`, next to the module.
pub fn service_bin() -> PathBuf {
    let module = module_path();
    let dir = module.parent().expect("module dir");
    let bin = [dir.join("redis-ratelimit"), dir.join("../redis-ratelimit")]
        .into_iter()
        .find(|b| b.exists())
        .unwrap_or_else(|| dir.join("redis-ratelimit"));
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build -p redis-ratelimit-cli`, make integration does)",
        bin.display()
    );
    bin
}

/// The Envoy binary: `$ENVOY_BIN`, else the one `make envoy` unpacked under target/envoy.
pub fn envoy_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ENVOY_BIN").filter(|b| !b.is_empty()) {
        return bin.into();
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/envoy/envoy/_bin/envoy");
    assert!(bin.exists(), "{} is missing: run `make envoy` (or set ENVOY_BIN)", bin.display());
    bin
}

/// One HTTP answer: status and headers (names in lower case).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// `GET path` on `127.0.0.1:port` with `headers`, HTTP/1.1, one connection per request.
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer { status, headers, body: body.to_string() }
}

/// A child process stopped (SIGTERM, then SIGKILL) by its PID on drop, its output in `log`.
/// `POST path` with a JSON body: the status and the body.
pub fn post(port: u16, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (status, body)
}

pub struct Process {
    pub child: Option<Child>,
    pub log: PathBuf,
    pub name: &'static str,
}

impl Process {
    fn spawn(name: &'static str, mut command: Command, log: PathBuf) -> Process {
        let file = std::fs::File::create(&log).expect("log file");
        command.stdout(Stdio::from(file.try_clone().expect("clone"))).stderr(Stdio::from(file));
        let child = command.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Process { child: Some(child), log, name }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait up to `within` for the exit; `Some(code)` if it exited.
    pub fn terminate(&mut self, within: Duration) -> Option<i32> {
        let child = self.child.as_mut()?;
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn assert_running(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{} exited ({status}):\n{}", self.name, self.log_text());
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until `ok()`, or panics after the deadline.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "{what} did not happen within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `ok()` or panics after the deadline with `what` and the process's log.
fn wait_until(process: &mut Process, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        process.assert_running();
        assert!(
            Instant::now() < deadline,
            "{what} not ready within {DEADLINE:?}:\n{}",
            process.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `GET path` on the port answers `status`.
fn answers(port: u16, path: &str, status: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).starts_with(&format!("HTTP/1.1 {status}"))
}

/// The rate-limit service, configured only through envoyproxy/ratelimit's variables.
pub struct Service {
    pub process: Process,
    pub grpc_port: u16,
    pub http_port: u16,
    pub prometheus_port: u16,
    /// `$RUNTIME_ROOT/ratelimit/config`: where config files go.
    pub config_dir: PathBuf,
    pub env: Vec<(String, String)>,
}

/// Starts the service on Redis at `redis` (its unix socket) with `config` as `config.yaml`
/// and extra variables (`name=value`).
pub fn start_service(
    dir: &Path,
    redis_sock: &Path,
    config: &str,
    extra: &[(&str, &str)],
) -> Service {
    let sock = redis_sock.display().to_string();
    let mut vars = vec![("REDIS_SOCKET_TYPE", "unix"), ("REDIS_URL", sock.as_str())];
    vars.extend_from_slice(extra);
    start_service_with(dir, config, &vars)
}

/// Starts the service with `config` and these variables (Redis's among them).
pub fn start_service_with(dir: &Path, config: &str, extra: &[(&str, &str)]) -> Service {
    let runtime = dir.join("runtime");
    let config_dir = runtime.join("ratelimit").join("config");
    std::fs::create_dir_all(&config_dir).expect("config dir");
    std::fs::write(config_dir.join("config.yaml"), config).expect("write config");
    // A free port can be taken by someone else before the service binds it (another test's
    // server, an outgoing connection): the service then exits naming it, and is started again
    // on fresh ports.
    for attempt in 1.. {
        let (grpc_port, http_port, prometheus_port) = (free_port(), free_port(), free_port());
        let env = service_env(&runtime, grpc_port, http_port, prometheus_port, extra);
        let mut command = Command::new(service_bin());
        command.arg("envoy").env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        let mut process = Process::spawn("redis-ratelimit envoy", command, dir.join("service.log"));
        let deadline = Instant::now() + DEADLINE;
        while !answers(http_port, "/healthcheck", 200) {
            let exited = process.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some()
                && attempt < 5
                && process.log_text().contains("Address already in use")
            {
                break;
            }
            process.assert_running();
            assert!(
                Instant::now() < deadline,
                "the service's /healthcheck not ready within {DEADLINE:?}:\n{}",
                process.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if answers(http_port, "/healthcheck", 200) {
            return Service { process, grpc_port, http_port, prometheus_port, config_dir, env };
        }
    }
    unreachable!("the loop returns or panics")
}

/// The service's environment: the harness's settings, then `extra` over them.
fn service_env(
    runtime: &Path,
    grpc_port: u16,
    http_port: u16,
    prometheus_port: u16,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("GRPC_HOST", "127.0.0.1".to_string()),
        ("GRPC_PORT", grpc_port.to_string()),
        ("HOST", "127.0.0.1".to_string()),
        ("PORT", http_port.to_string()),
        ("REDIS_TIMEOUT", "1s".to_string()),
        ("RUNTIME_ROOT", runtime.display().to_string()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".to_string()),
        ("RUNTIME_WATCH_ROOT", "false".to_string()),
        ("USE_PROMETHEUS", "true".to_string()),
        ("PROMETHEUS_ADDR", format!("127.0.0.1:{prometheus_port}")),
        ("LOG_LEVEL", "info".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in extra {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v.to_string()));
    }
    env
}

impl Service {
    /// The Prometheus text.
    pub fn metrics(&self) -> String {
        get(self.prometheus_port, "/metrics", &[]).body
    }

    /// The value of one series (`name{labels}` as printed), 0 when absent.
    pub fn metric(&self, series: &str) -> u64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or(0)
    }
}

/// The route's rate-limit actions every test's Envoy sends (a descriptor per entry; a
/// request-header descriptor is sent only when its header is present).
const ACTIONS: &str = r#"
                  - actions:
                    - request_headers: {header_name: x-user, descriptor_key: user}
                  - actions:
                    - remote_address: {}
                  - actions:
                    - generic_key: {descriptor_value: global}
                    - request_headers: {header_name: x-global, descriptor_key: scope}
                  - actions:
                    - request_headers: {header_name: x-tenant, descriptor_key: tenant}
                    - request_headers: {header_name: x-plan, descriptor_key: plan}
                  - actions:
                    - request_headers: {header_name: x-path, descriptor_key: path}
                  - actions:
                    - request_headers: {header_name: x-vip, descriptor_key: vip}
                  - actions:
                    - request_headers: {header_name: x-shadow, descriptor_key: shadow}
                  - actions:
                    - request_headers: {header_name: x-free, descriptor_key: free}
                  - actions:
                    - request_headers: {header_name: x-alg, descriptor_key: alg}
                  - actions:
                    - request_headers: {header_name: x-bulk, descriptor_key: bulk}
"#;

/// Envoy: a listener whose one route goes to the service's own `/healthcheck` (an upstream
/// that answers 200) through `envoy.filters.http.ratelimit` on domain `edge`.
pub struct Envoy {
    pub process: Process,
    pub port: u16,
    pub admin_port: u16,
}

pub fn start_envoy(dir: &Path, service: &Service, failure_mode_deny: bool) -> Envoy {
    start_envoy_with(dir, service, failure_mode_deny, "")
}

/// [`start_envoy`] with `ratelimit_transport` (YAML at the cluster's level, e.g. a TLS
/// `transport_socket`) added to the rate-limit service's cluster.
pub fn start_envoy_with(
    dir: &Path,
    service: &Service,
    failure_mode_deny: bool,
    ratelimit_transport: &str,
) -> Envoy {
    let (port, admin_port) = (free_port(), free_port());
    let cluster = |name: &str, port: u16, grpc: bool| {
        let h2 = if grpc {
            r#"
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}"#
        } else {
            ""
        };
        format!(
            r#"
  - name: {name}
    type: STATIC
    connect_timeout: 1s{h2}
    load_assignment:
      cluster_name: {name}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}}}]}}]"#
        )
    };
    let config = format!(
        r#"
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin_port}}}}}
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route:
                  cluster: backend
                  prefix_rewrite: "/healthcheck"
                  rate_limits:{ACTIONS}
          http_filters:
          - name: envoy.filters.http.set_filter_state
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.set_filter_state.v3.Config
              on_request_headers:
              - object_key: envoy.ratelimit.hits_addend
                skip_if_empty: true
                format_string:
                  omit_empty_values: true
                  text_format_source: {{inline_string: "%REQ(x-cost)%"}}
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: edge
              failure_mode_deny: {failure_mode_deny}
              timeout: 3s
              enable_x_ratelimit_headers: DRAFT_VERSION_03
              rate_limit_service:
                transport_api_version: V3
                grpc_service:
                  envoy_grpc: {{cluster_name: ratelimit}}
                  timeout: 3s
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:{backend}{ratelimit}
"#,
        backend = cluster("backend", service.http_port, false),
        ratelimit = cluster("ratelimit", service.grpc_port, true) + ratelimit_transport,
    );
    run_envoy(dir, &config, port, admin_port)
}

/// Envoy with this config (listening on `port`, admin on `admin_port`).
pub fn run_envoy(dir: &Path, config: &str, port: u16, admin_port: u16) -> Envoy {
    let path = dir.join("envoy.yaml");
    std::fs::write(&path, config).expect("write envoy config");
    let mut command = Command::new(envoy_bin());
    command
        .args(["-c", &path.display().to_string(), "--concurrency", "1", "--disable-hot-restart"])
        .args([
            "--log-level",
            "info",
            "--file-flush-interval-msec",
            "20",
            "--log-path",
            &dir.join("envoy.log").display().to_string(),
        ]);
    let mut process = Process::spawn("envoy", command, dir.join("envoy.out"));
    wait_until(&mut process, "Envoy", || {
        answers(admin_port, "/ready", 200) && TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Envoy { process, port, admin_port }
}

/// Redis with the module, the service and Envoy, for one test.
pub struct Stack {
    pub envoy: Envoy,
    pub service: Service,
    pub redis: Server,
}

impl Stack {
    pub fn start(config: &str, extra: &[(&str, &str)]) -> Stack {
        let redis = Server::start();
        let service = start_service(&redis.dir, &redis.sock, config, extra);
        let envoy = start_envoy(&redis.dir, &service, true);
        Stack { envoy, service, redis }
    }

    /// The service's and Envoy's logs (for failure messages).
    pub fn logs(&self) -> String {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let envoy = std::fs::read_to_string(self.redis.dir.join("envoy.log")).unwrap_or_default();
        format!("--- service:\n{}\n--- envoy:\n{envoy}", self.service.process.log_text())
    }

    /// `GET /` through Envoy with these headers.
    pub fn get(&self, headers: &[(&str, &str)]) -> Answer {
        get(self.envoy.port, "/", headers)
    }

    /// The statuses of `n` requests with these headers.
    pub fn statuses(&self, n: usize, headers: &[(&str, &str)]) -> Vec<u16> {
        (0..n).map(|_| self.get(headers).status).collect()
    }
}
