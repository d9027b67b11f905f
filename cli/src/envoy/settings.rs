//! The service's settings: envoyproxy/ratelimit's environment variables, the same names, the
//! same defaults and the same value syntax (Go's `strconv.ParseBool`, integers and
//! `time.ParseDuration` strings). Every bad value is an error naming the variable; settings
//! that only make sense for envoyproxy's own backends (statsd, memcache, xDS, per-second Redis)
//! are read, checked where they would change behaviour, and otherwise ignored.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How the service reaches Redis: `REDIS_TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisType {
    /// One server (`SINGLE`, the default).
    Single,
    /// Redis Cluster (`CLUSTER`): `REDIS_URL` lists seed nodes, comma-separated.
    Cluster,
    /// Redis Sentinel (`SENTINEL`): `REDIS_URL` is `master-name,host:port,host:port…`, the
    /// master's name then the Sentinels that name its address.
    Sentinel,
}

/// One Redis the service reaches: the main one (`REDIS_*`) or the per-second one
/// (`REDIS_PERSECOND_*`), each with its own shape, address, credentials and pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTarget {
    /// The variables' prefix (`REDIS` or `REDIS_PERSECOND`), to name them in errors.
    pub prefix: &'static str,
    pub socket_type: SocketType,
    pub kind: RedisType,
    pub url: String,
    /// `_AUTH`: `password` or `username:password` for the Redis servers.
    pub auth: String,
    /// `_SENTINEL_AUTH`: the password of the Sentinels themselves (not of the master).
    pub sentinel_auth: String,
    /// `_TLS`: connect with TLS (the files are [`RedisTlsFiles`], shared by both targets).
    pub tls: bool,
    pub pool_size: usize,
    /// `_PIPELINE_WINDOW`, `_PIPELINE_LIMIT`: how concurrent calls share writes
    /// ([`super::pipeline`]).
    pub pipelining: Pipelining,
}

/// Implicit pipelining of one server's calls (`{prefix}_PIPELINE_WINDOW`,
/// `{prefix}_PIPELINE_LIMIT`): see [`super::pipeline`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pipelining {
    /// How long a call waits for others to share its write (0: it is written at once, with
    /// whatever is queued on its connection then).
    pub window: Duration,
    /// The most calls one connection pipelines at a time (0: no bound).
    pub limit: usize,
}

/// `REDIS_TLS_CLIENT_CERT`/`_KEY` (a client certificate, sent when both are set),
/// `REDIS_TLS_CACERT` (the CA Redis's certificate must chain to; the system's roots when
/// empty) and `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`. Shared by `REDIS_TLS` and
/// `REDIS_PERSECOND_TLS`, as envoyproxy/ratelimit shares them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisTlsFiles {
    pub client_cert: String,
    pub client_key: String,
    pub ca_cert: String,
    pub skip_hostname_verification: bool,
}

/// `REDIS_SOCKET_TYPE`: `unix` (the default, `REDIS_URL` is a socket path) or `tcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketType {
    Unix,
    Tcp,
}

/// `LOG_FORMAT`: `text` (the default) or `json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `GRPC_SERVER_USE_TLS=true`: the gRPC port's certificate and key (PEM files), and for
/// mutual TLS the CA client certificates must chain to and the name they must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcServerTls {
    /// `GRPC_SERVER_TLS_CERT`
    pub cert: String,
    /// `GRPC_SERVER_TLS_KEY`
    pub key: String,
    /// `GRPC_CLIENT_TLS_CACERT`: when set, clients must present a certificate it signed.
    pub client_ca: String,
    /// `GRPC_CLIENT_TLS_SAN`: when set (with the CA), the client certificate's name.
    pub client_san: String,
}

/// Where the rate-limit config comes from: `CONFIG_TYPE`.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigType {
    /// `FILE` (the default): the YAML files under the runtime directory, reloaded on change.
    File,
    /// `GRPC_XDS_SOTW`: `RateLimitConfig` resources from an xDS server (state of the world,
    /// aggregated stream), as Envoy Gateway serves them.
    Xds(Box<XdsSettings>),
}

/// `CONFIG_GRPC_XDS_*` and `XDS_CLIENT_*`: the xDS server the config comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct XdsSettings {
    /// `CONFIG_GRPC_XDS_SERVER_URL`: `host:port`.
    pub server_url: String,
    /// `CONFIG_GRPC_XDS_NODE_ID`: the node the server keeps snapshots for.
    pub node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `key=value,key=value` (string fields of the node).
    pub node_metadata: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: `name:value,name:value`, sent with the
    /// stream (e.g. an authorization header).
    pub headers: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`: between connection attempts.
    pub connect_retry: Duration,
    /// `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` / `_MAX_INTERVAL`: after a broken stream.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES` (0: gRPC's default, 4 MiB).
    pub max_message_bytes: usize,
    /// `CONFIG_GRPC_XDS_SERVER_USE_TLS=true`: TLS to the server.
    pub tls: Option<XdsTls>,
}

/// TLS to the xDS server: `CONFIG_GRPC_XDS_CLIENT_TLS_CERT`/`_KEY` (a client certificate),
/// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` (the server's CA; the system's roots when empty),
/// `CONFIG_GRPC_XDS_SERVER_TLS_SAN` (the name to verify, instead of the URL's host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdsTls {
    pub client_cert: String,
    pub client_key: String,
    pub server_ca: String,
    pub server_san: String,
}

/// Every setting the service uses.
#[derive(Debug, Clone)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub grpc_host: String,
    pub grpc_port: u16,
    pub log_level: tracing::Level,
    pub log_format: LogFormat,
    pub runtime_root: PathBuf,
    pub runtime_subdirectory: String,
    pub runtime_app_directory: String,
    pub runtime_watch_root: bool,
    pub runtime_ignore_dot_files: bool,
    pub merge_domain_config: bool,
    /// The Redis every limit is decided on (`REDIS_*`).
    pub redis: RedisTarget,
    /// `REDIS_PERSECOND=true`: the Redis per-second limits are decided on.
    pub redis_per_second: Option<RedisTarget>,
    pub redis_tls_files: RedisTlsFiles,
    /// `GRPC_SERVER_USE_TLS=true`: TLS (and mTLS) on the gRPC port.
    pub grpc_server_tls: Option<GrpcServerTls>,
    pub config_type: ConfigType,
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG`: serve before the first xDS config arrived.
    pub force_start_without_initial_config: bool,
    /// `REDIS_TIMEOUT`: the most one module call may take (connect, send, answer).
    pub redis_timeout: Duration,
    pub cache_key_prefix: String,
    pub near_limit_ratio: f64,
    pub response_headers_enabled: bool,
    pub header_limit: String,
    pub header_remaining: String,
    pub header_reset: String,
    pub use_prometheus: bool,
    pub prometheus_addr: String,
    pub prometheus_path: String,
    /// `SHADOW_MODE`: every refusal is answered `OK` (and counted in `shadow_mode`).
    pub global_shadow_mode: bool,
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: unhealthy until a domain is loaded.
    pub healthy_with_config: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false` given explicitly: a refused request
    /// still counts against its other descriptors (envoyproxy's counting). Unset (or `true`):
    /// a refused request counts nothing — this service's default.
    pub refused_requests_count: bool,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: the memory for keys known over their limit (0: none).
    pub local_cache_size: usize,
    /// `RESPONSE_DYNAMIC_METADATA`: the request goes back as the response's dynamic metadata.
    pub response_dynamic_metadata: bool,
}

/// A bad setting: the variable, its value and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError(pub String);

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads the environment as a map (tests pass their own).
struct Env<'a> {
    vars: &'a HashMap<String, String>,
}

impl Env<'_> {
    fn raw(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    fn string(&self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or(default).to_string()
    }

    fn bool(&self, name: &str, default: bool) -> Result<bool, SettingError> {
        match self.raw(name) {
            None | Some("") => Ok(default),
            Some(v) => parse_bool(v).ok_or_else(|| {
                SettingError(format!("{name}={v:?}: not a boolean (use true or false)"))
            }),
        }
    }

    fn int<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
        what: &str,
    ) -> Result<T, SettingError> {
        match self.raw(name) {
            None | Some("") => Ok(default),
            Some(v) => {
                v.trim().parse().map_err(|_| SettingError(format!("{name}={v:?}: not {what}")))
            }
        }
    }

    fn duration(&self, name: &str, default: Duration) -> Result<Duration, SettingError> {
        match self.raw(name) {
            None | Some("") => Ok(default),
            Some(v) => parse_go_duration(v).ok_or_else(|| {
                SettingError(format!("{name}={v:?}: not a duration (e.g. 500ms, 10s, 1m30s)"))
            }),
        }
    }
}

impl Env<'_> {
    /// One Redis target: `{prefix}_TYPE`, `_SOCKET_TYPE`, `_URL`, `_AUTH`, `_SENTINEL_AUTH`,
    /// `_TLS`, `_POOL_SIZE`, `_PIPELINE_WINDOW`, `_PIPELINE_LIMIT`, with envoyproxy/ratelimit's
    /// defaults.
    fn redis_target(
        &self,
        prefix: &'static str,
        default_url: &str,
    ) -> Result<RedisTarget, SettingError> {
        let name = |suffix: &str| format!("{prefix}_{suffix}");
        let raw_type = self.string(&name("TYPE"), "SINGLE");
        let kind = match raw_type.to_ascii_uppercase().as_str() {
            "SINGLE" => RedisType::Single,
            "CLUSTER" => RedisType::Cluster,
            "SENTINEL" => RedisType::Sentinel,
            _ => {
                return Err(SettingError(format!(
                    "{}={raw_type:?}: use SINGLE, CLUSTER or SENTINEL",
                    name("TYPE")
                )))
            }
        };
        let raw_socket = self.string(&name("SOCKET_TYPE"), "unix");
        let socket_type = match raw_socket.to_ascii_lowercase().as_str() {
            "unix" => SocketType::Unix,
            "tcp" => SocketType::Tcp,
            _ => {
                return Err(SettingError(format!(
                    "{}={raw_socket:?}: use unix or tcp",
                    name("SOCKET_TYPE")
                )))
            }
        };
        let url = self.string(&name("URL"), default_url);
        if url.trim().is_empty() {
            return Err(SettingError(format!("{} is empty", name("URL"))));
        }
        if kind == RedisType::Sentinel
            && url.split(',').filter(|p| !p.trim().is_empty()).count() < 2
        {
            return Err(SettingError(format!(
                "{}={url:?}: REDIS_TYPE=SENTINEL needs the master's name then the Sentinels: \
                 <redis master name>,<sentinel1>,...,<sentineln>",
                name("URL")
            )));
        }
        let pool_size: usize = self.int(&name("POOL_SIZE"), 10, "a positive integer")?;
        if pool_size == 0 {
            return Err(SettingError(format!("{}=0: must be at least 1", name("POOL_SIZE"))));
        }
        Ok(RedisTarget {
            prefix,
            socket_type,
            kind,
            url,
            auth: self.string(&name("AUTH"), ""),
            sentinel_auth: self.string(&name("SENTINEL_AUTH"), ""),
            tls: self.bool(&name("TLS"), false)?,
            pool_size,
            pipelining: Pipelining {
                window: self.duration(&name("PIPELINE_WINDOW"), Duration::ZERO)?,
                limit: self.int(&name("PIPELINE_LIMIT"), 0, "a non-negative integer")?,
            },
        })
    }
}

impl Env<'_> {
    /// `CONFIG_GRPC_XDS_*`, with envoyproxy/ratelimit's defaults.
    fn xds(&self) -> Result<XdsSettings, SettingError> {
        let tls = if self.bool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)? {
            Some(XdsTls {
                client_cert: self.string("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""),
                client_key: self.string("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""),
                server_ca: self.string("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""),
                server_san: self.string("CONFIG_GRPC_XDS_SERVER_TLS_SAN", ""),
            })
        } else {
            None
        };
        let server_url = self.string("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000");
        if server_url.trim().is_empty() {
            return Err(SettingError("CONFIG_GRPC_XDS_SERVER_URL is empty".into()));
        }
        Ok(XdsSettings {
            server_url,
            node_id: self.string("CONFIG_GRPC_XDS_NODE_ID", "default"),
            node_metadata: pairs(&self.string("CONFIG_GRPC_XDS_NODE_METADATA", ""), '='),
            headers: self.map("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS")?,
            connect_retry: self.duration(
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                Duration::from_secs(3),
            )?,
            backoff_initial: self
                .duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", Duration::from_secs(10))?,
            backoff_max: self
                .duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", Duration::from_secs(60))?,
            max_message_bytes: self.int(
                "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                0,
                "a size in bytes",
            )?,
            tls,
        })
    }

    /// An envconfig map: `key:value,key:value` (a pair without `:` is an error, as theirs).
    fn map(&self, name: &str) -> Result<Vec<(String, String)>, SettingError> {
        let text = self.string(name, "");
        let mut out = Vec::new();
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once(':').ok_or_else(|| {
                SettingError(format!("{name}={text:?}: use name:value,name:value"))
            })?;
            out.push((key.to_string(), value.to_string()));
        }
        Ok(out)
    }
}

/// `key=value,key=value` pairs (entries without the separator are skipped, as theirs).
fn pairs(text: &str, separator: char) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|entry| entry.split_once(separator))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `time.ParseDuration` for non-negative durations: a sequence of decimal numbers, each
/// with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), or `0`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim().strip_prefix('+').unwrap_or(text.trim());
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total_ns: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end =
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return None;
        }
        let unit_end = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
        let mut ns = whole.checked_mul(unit_ns)?;
        let mut scale = unit_ns;
        for digit in fraction.bytes() {
            scale /= 10;
            ns = ns.checked_add(u128::from(digit - b'0') * scale)?;
        }
        total_ns = total_ns.checked_add(ns)?;
        rest = next;
    }
    let secs = u64::try_from(total_ns / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (total_ns % 1_000_000_000) as u32))
}

impl Settings {
    /// The settings from the process environment.
    pub fn from_env() -> Result<Settings, SettingError> {
        Settings::from_map(&std::env::vars().collect())
    }

    /// The settings from `vars` (a copy of an environment).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Settings, SettingError> {
        let env = Env { vars };
        let port = |name: &str, default: u16| env.int(name, default, "a port (0-65535)");
        let raw_level = env.string("LOG_LEVEL", "WARN");
        let log_level = match raw_level.to_ascii_uppercase().as_str() {
            "TRACE" => tracing::Level::TRACE,
            "DEBUG" => tracing::Level::DEBUG,
            "INFO" => tracing::Level::INFO,
            "WARN" | "WARNING" => tracing::Level::WARN,
            "ERROR" | "FATAL" | "PANIC" => tracing::Level::ERROR,
            _ => {
                return Err(SettingError(format!(
                    "LOG_LEVEL={raw_level:?}: not a level (use debug, info, warn or error)"
                )))
            }
        };
        let log_format = match env.string("LOG_FORMAT", "text").to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(SettingError(format!("LOG_FORMAT={other:?}: use text or json"))),
        };
        let raw_config_type = env.string("CONFIG_TYPE", "FILE");
        let config_type = match raw_config_type.to_ascii_uppercase().as_str() {
            "FILE" => ConfigType::File,
            "GRPC_XDS_SOTW" => ConfigType::Xds(Box::new(env.xds()?)),
            _ => {
                return Err(SettingError(format!(
                    "CONFIG_TYPE={raw_config_type:?}: use FILE or GRPC_XDS_SOTW"
                )))
            }
        };
        let backend = env.string("BACKEND_TYPE", "redis");
        if !backend.eq_ignore_ascii_case("redis") {
            return Err(SettingError(format!(
                "BACKEND_TYPE={backend:?}: only redis is supported (the module decides every limit)"
            )));
        }
        let redis = env.redis_target("REDIS", "/var/run/nutcracker/ratelimit.sock")?;
        let redis_per_second = if env.bool("REDIS_PERSECOND", false)? {
            Some(
                env.redis_target("REDIS_PERSECOND", "/var/run/nutcracker/ratelimitpersecond.sock")?,
            )
        } else {
            None
        };
        if !env.string("GRPC_UDS", "").is_empty() {
            return Err(SettingError(
                "GRPC_UDS: serving gRPC on a unix socket is not supported (use GRPC_HOST/GRPC_PORT)"
                    .into(),
            ));
        }
        let grpc_server_tls = if env.bool("GRPC_SERVER_USE_TLS", false)? {
            let tls = GrpcServerTls {
                cert: env.string("GRPC_SERVER_TLS_CERT", ""),
                key: env.string("GRPC_SERVER_TLS_KEY", ""),
                client_ca: env.string("GRPC_CLIENT_TLS_CACERT", ""),
                client_san: env.string("GRPC_CLIENT_TLS_SAN", ""),
            };
            if tls.cert.is_empty() || tls.key.is_empty() {
                return Err(SettingError(
                    "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY \
                     (PEM files)"
                        .into(),
                ));
            }
            Some(tls)
        } else {
            None
        };
        if env.bool("QUOTA_MODE", false)? {
            return Err(SettingError(
                "QUOTA_MODE=true: not supported globally; set quota_mode: true on the descriptors"
                    .into(),
            ));
        }
        let redis_timeout = env.duration("REDIS_TIMEOUT", Duration::from_secs(10))?;
        if redis_timeout.is_zero() {
            return Err(SettingError("REDIS_TIMEOUT=0: must be above 0 (e.g. 200ms)".into()));
        }
        let near_limit_ratio: f64 = env.int("NEAR_LIMIT_RATIO", 0.8, "a number")?;
        if !(0.0..=1.0).contains(&near_limit_ratio) {
            return Err(SettingError(format!(
                "NEAR_LIMIT_RATIO={near_limit_ratio}: must be between 0 and 1"
            )));
        }
        // Read (and so checked) for drop-in manifests; these knobs have no counterpart here.
        for name in ["EXPIRATION_JITTER_MAX_SECONDS", "STATSD_PORT", "DEBUG_PORT"] {
            env.int::<i64>(name, 0, "an integer")?;
        }
        let refused_requests_count = env.raw("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT").is_some()
            && !env.bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", true)?;
        for name in ["USE_STATSD", "DISABLE_STATS"] {
            env.bool(name, false)?;
        }
        Ok(Settings {
            host: env.string("HOST", "0.0.0.0"),
            port: port("PORT", 8080)?,
            grpc_host: env.string("GRPC_HOST", "0.0.0.0"),
            grpc_port: port("GRPC_PORT", 8081)?,
            log_level,
            log_format,
            runtime_root: PathBuf::from(env.string("RUNTIME_ROOT", "/srv/runtime_data/current")),
            runtime_subdirectory: env.string("RUNTIME_SUBDIRECTORY", ""),
            runtime_app_directory: env.string("RUNTIME_APPDIRECTORY", "config"),
            runtime_watch_root: env.bool("RUNTIME_WATCH_ROOT", true)?,
            runtime_ignore_dot_files: env.bool("RUNTIME_IGNOREDOTFILES", false)?,
            merge_domain_config: env.bool("MERGE_DOMAIN_CONFIG", false)?,
            redis,
            redis_per_second,
            redis_tls_files: RedisTlsFiles {
                client_cert: env.string("REDIS_TLS_CLIENT_CERT", ""),
                client_key: env.string("REDIS_TLS_CLIENT_KEY", ""),
                ca_cert: env.string("REDIS_TLS_CACERT", ""),
                skip_hostname_verification: env
                    .bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?,
            },
            grpc_server_tls,
            config_type,
            force_start_without_initial_config: env
                .bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            redis_timeout,
            cache_key_prefix: env.string("CACHE_KEY_PREFIX", ""),
            near_limit_ratio,
            response_headers_enabled: env.bool("LIMIT_RESPONSE_HEADERS_ENABLED", false)?,
            header_limit: env.string("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
            header_remaining: env.string("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
            header_reset: env.string("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            use_prometheus: env.bool("USE_PROMETHEUS", false)?,
            prometheus_addr: env.string("PROMETHEUS_ADDR", ":9090"),
            prometheus_path: env.string("PROMETHEUS_PATH", "/metrics"),
            global_shadow_mode: env.bool("SHADOW_MODE", false)?,
            healthy_with_config: env.bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)?,
            refused_requests_count,
            response_dynamic_metadata: env.bool("RESPONSE_DYNAMIC_METADATA", false)?,
            local_cache_size: env.int("LOCAL_CACHE_SIZE_IN_BYTES", 0, "a size in bytes")?,
        })
    }

    /// The directory holding the config files:
    /// `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`.
    pub fn config_dir(&self) -> PathBuf {
        let mut dir = self.runtime_root.clone();
        if !self.runtime_subdirectory.is_empty() {
            dir.push(&self.runtime_subdirectory);
        }
        dir.push(&self.runtime_app_directory);
        dir
    }

    /// The directory watched for changes: the runtime root (`RUNTIME_WATCH_ROOT=true`, which
    /// sees a symlink swap of the whole tree) or the config directory itself.
    pub fn watch_dir(&self) -> PathBuf {
        if self.runtime_watch_root {
            self.runtime_root.clone()
        } else {
            self.config_dir()
        }
    }
}

/// `host:port` for a listener; Go's `:9090` (empty host) means every interface.
pub fn listen_addr(host: &str, port: u16) -> String {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `PROMETHEUS_ADDR` (`host:port`, `:port` for every interface) as a listen address.
pub fn prometheus_listen_addr(addr: &str) -> Result<String, SettingError> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| SettingError(format!("PROMETHEUS_ADDR={addr:?}: use host:port or :port")))?;
    let port: u16 =
        port.parse().map_err(|_| SettingError(format!("PROMETHEUS_ADDR={addr:?}: bad port")))?;
    Ok(listen_addr(host.trim_start_matches('[').trim_end_matches(']'), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, SettingError> {
        Settings::from_map(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn defaults_are_envoyproxys() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.port, s.grpc_port), (8080, 8081));
        assert_eq!(s.redis.kind, RedisType::Single);
        assert_eq!(s.redis.socket_type, SocketType::Unix);
        assert_eq!(s.redis.url, "/var/run/nutcracker/ratelimit.sock");
        assert_eq!((s.redis.pool_size, s.redis.tls), (10, false));
        assert_eq!(s.redis_per_second, None);
        let per_second =
            settings(&[("REDIS_PERSECOND", "true"), ("REDIS_PERSECOND_SOCKET_TYPE", "tcp")])
                .unwrap()
                .redis_per_second
                .unwrap();
        assert_eq!(
            (per_second.prefix, per_second.socket_type),
            ("REDIS_PERSECOND", SocketType::Tcp)
        );
        assert_eq!(per_second.url, "/var/run/nutcracker/ratelimitpersecond.sock");
        assert_eq!(s.redis_timeout, Duration::from_secs(10));
        assert_eq!(s.config_dir(), PathBuf::from("/srv/runtime_data/current/config"));
        assert_eq!(s.header_limit, "RateLimit-Limit");
        assert!((s.near_limit_ratio - 0.8).abs() < 1e-9);
        assert_eq!(s.redis.pipelining, Pipelining { window: Duration::ZERO, limit: 0 });
        let s = settings(&[
            ("REDIS_PIPELINE_WINDOW", "150us"),
            ("REDIS_PIPELINE_LIMIT", "8"),
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_PIPELINE_WINDOW", "2ms"),
        ])
        .unwrap();
        assert_eq!(s.redis.pipelining, Pipelining { window: Duration::from_micros(150), limit: 8 });
        let per_second = s.redis_per_second.unwrap().pipelining;
        assert_eq!(per_second, Pipelining { window: Duration::from_millis(2), limit: 0 });
    }

    #[test]
    fn every_bad_setting_is_named() {
        for (name, value) in [
            ("PORT", "http"),
            ("GRPC_PORT", "70000"),
            ("REDIS_TYPE", "ring"),
            ("REDIS_SOCKET_TYPE", "udp"),
            ("REDIS_POOL_SIZE", "0"),
            ("REDIS_PIPELINE_WINDOW", "150"),
            ("REDIS_PIPELINE_LIMIT", "-1"),
            ("REDIS_TIMEOUT", "10"),
            ("REDIS_TIMEOUT", "0"),
            ("REDIS_TLS", "yes"),
            ("NEAR_LIMIT_RATIO", "2"),
            ("LOG_LEVEL", "loud"),
            ("LOG_FORMAT", "xml"),
            ("CONFIG_TYPE", "GRPC_XDS"),
            ("BACKEND_TYPE", "memcache"),
            ("USE_PROMETHEUS", "maybe"),
            ("QUOTA_MODE", "true"),
            ("GRPC_UDS", "/tmp/rl.sock"),
            ("GRPC_SERVER_USE_TLS", "true"),
        ] {
            let error = settings(&[(name, value)]).unwrap_err();
            assert!(error.0.starts_with(name), "{name}={value}: {error}");
        }
        for name in
            ["REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_PIPELINE_WINDOW"]
        {
            let error = settings(&[("REDIS_PERSECOND", "true"), (name, "x")]).unwrap_err();
            assert!(error.0.starts_with(name), "{error}");
        }
        // Sentinel needs the master's name and at least one Sentinel.
        let error = settings(&[("REDIS_TYPE", "sentinel"), ("REDIS_URL", "mymaster")]).unwrap_err();
        assert!(error.0.starts_with("REDIS_URL=") && error.0.contains("master name"), "{error}");
    }

    /// Their shapes: a cluster or Sentinel ignores REDIS_SOCKET_TYPE (theirs dials TCP), so
    /// the default `unix` is no reason to refuse; the per-second target reads its own prefix.
    #[test]
    fn redis_shapes_and_the_per_second_target() {
        let s = settings(&[("REDIS_TYPE", "CLUSTER"), ("REDIS_URL", "a:1,b:2")]).unwrap();
        assert_eq!(s.redis.kind, RedisType::Cluster);
        let s = settings(&[
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_URL", "mymaster,localhost:26379"),
            ("REDIS_AUTH", "user:pw"),
            ("REDIS_SENTINEL_AUTH", "spw"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CACERT", "/ca.pem"),
            ("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ])
        .unwrap();
        assert_eq!(s.redis.kind, RedisType::Sentinel);
        assert_eq!((s.redis.auth.as_str(), s.redis.sentinel_auth.as_str()), ("user:pw", "spw"));
        assert!(s.redis.tls);
        assert_eq!(s.redis_tls_files.ca_cert, "/ca.pem");
        assert!(s.redis_tls_files.skip_hostname_verification);
    }

    #[test]
    fn xds_settings() {
        let s = settings(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"),
            ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,bad,b=c=d"),
            ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "authorization:Bearer t,x-a:1"),
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"),
        ])
        .unwrap();
        let ConfigType::Xds(xds) = s.config_type else { panic!("{:?}", s.config_type) };
        assert_eq!(xds.server_url, "envoy-gateway:18001");
        assert_eq!(xds.node_id, "envoy-ratelimit");
        let owned = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
        };
        assert_eq!(xds.node_metadata, owned(&[("zone", "a"), ("b", "c=d")]));
        assert_eq!(xds.headers, owned(&[("authorization", "Bearer t"), ("x-a", "1")]));
        assert_eq!(xds.tls.unwrap().server_ca, "/certs/ca.crt");
        assert_eq!(xds.connect_retry, Duration::from_secs(3));
        let error = settings(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x"),
        ])
        .unwrap_err();
        assert!(error.0.starts_with("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"), "{error}");
    }

    #[test]
    fn only_an_explicit_false_counts_refused_requests() {
        let count = |pairs: &[(&str, &str)]| settings(pairs).unwrap().refused_requests_count;
        assert!(!count(&[]));
        assert!(!count(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "")]));
        assert!(!count(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")]));
        assert!(count(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false")]));
        assert!(count(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "0")]));
        assert!(settings(&[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "no")]).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "10", "s", "1x", "-1s", "1.s2"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn paths_and_addresses() {
        let s = settings(&[
            ("RUNTIME_ROOT", "/r"),
            ("RUNTIME_SUBDIRECTORY", "rl"),
            ("RUNTIME_WATCH_ROOT", "false"),
        ])
        .unwrap();
        assert_eq!(s.config_dir(), PathBuf::from("/r/rl/config"));
        assert_eq!(s.watch_dir(), PathBuf::from("/r/rl/config"));
        assert_eq!(prometheus_listen_addr(":9090").unwrap(), "0.0.0.0:9090");
        assert_eq!(prometheus_listen_addr("127.0.0.1:9").unwrap(), "127.0.0.1:9");
        assert!(prometheus_listen_addr("9090").is_err());
    }
}
