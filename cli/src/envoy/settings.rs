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
    pub redis_socket_type: SocketType,
    pub redis_type: RedisType,
    pub redis_url: String,
    pub redis_auth: String,
    pub redis_tls: bool,
    pub redis_pool_size: usize,
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
    /// `REDIS_PERSECOND=true`: the settings of the Redis for per-second limits
    /// (`REDIS_PERSECOND_URL`, `_SOCKET_TYPE`, `_TYPE`, `_AUTH`, `_TLS`, `_POOL_SIZE`,
    /// `_TIMEOUT` as their `REDIS_` counterparts).
    pub per_second: Option<Box<Settings>>,
}

/// The `REDIS_PERSECOND_*` variables as the `REDIS_*` ones (unset ones take their own
/// defaults: a unix socket at `/var/run/nutcracker/ratelimitpersecond.sock`).
fn per_second_vars(vars: &HashMap<String, String>) -> HashMap<String, String> {
    let mut out = vars.clone();
    out.remove("REDIS_PERSECOND");
    for suffix in
        ["URL", "SOCKET_TYPE", "TYPE", "AUTH", "TLS", "POOL_SIZE", "TIMEOUT", "PIPELINE_WINDOW"]
    {
        let main = format!("REDIS_{suffix}");
        match vars.get(&format!("REDIS_PERSECOND_{suffix}")) {
            Some(value) => out.insert(main, value.clone()),
            None => out.remove(&main),
        };
    }
    out.entry("REDIS_URL".into())
        .or_insert_with(|| "/var/run/nutcracker/ratelimitpersecond.sock".into());
    out
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
        let config_type = env.string("CONFIG_TYPE", "FILE");
        if !config_type.eq_ignore_ascii_case("FILE") {
            return Err(SettingError(format!(
                "CONFIG_TYPE={config_type:?}: only FILE is supported (config files under RUNTIME_ROOT)"
            )));
        }
        let backend = env.string("BACKEND_TYPE", "redis");
        if !backend.eq_ignore_ascii_case("redis") {
            return Err(SettingError(format!(
                "BACKEND_TYPE={backend:?}: only redis is supported (the module decides every limit)"
            )));
        }
        let raw_type = env.string("REDIS_TYPE", "SINGLE");
        let redis_type = match raw_type.to_ascii_uppercase().as_str() {
            "SINGLE" => RedisType::Single,
            "CLUSTER" => RedisType::Cluster,
            "SENTINEL" => {
                return Err(SettingError(format!(
                    "REDIS_TYPE={raw_type:?}: Sentinel is not supported (use SINGLE or CLUSTER)"
                )))
            }
            _ => {
                return Err(SettingError(format!("REDIS_TYPE={raw_type:?}: use SINGLE or CLUSTER")))
            }
        };
        let redis_socket_type =
            match env.string("REDIS_SOCKET_TYPE", "unix").to_ascii_lowercase().as_str() {
                "unix" => SocketType::Unix,
                "tcp" => SocketType::Tcp,
                other => {
                    return Err(SettingError(format!(
                        "REDIS_SOCKET_TYPE={other:?}: use unix or tcp"
                    )))
                }
            };
        if redis_type == RedisType::Cluster && redis_socket_type == SocketType::Unix {
            return Err(SettingError(
                "REDIS_TYPE=CLUSTER needs REDIS_SOCKET_TYPE=tcp (cluster nodes are host:port)"
                    .into(),
            ));
        }
        let per_second = if env.bool("REDIS_PERSECOND", false)? {
            let second = Settings::from_map(&per_second_vars(vars)).map_err(|e| {
                SettingError(format!("REDIS_PERSECOND=true: {e} (read from REDIS_PERSECOND_*)"))
            })?;
            Some(Box::new(second))
        } else {
            None
        };
        if !env.string("GRPC_UDS", "").is_empty() {
            return Err(SettingError(
                "GRPC_UDS: serving gRPC on a unix socket is not supported (use GRPC_HOST/GRPC_PORT)"
                    .into(),
            ));
        }
        if env.bool("GRPC_SERVER_USE_TLS", false)? {
            return Err(SettingError(
                "GRPC_SERVER_USE_TLS=true: not supported (terminate TLS in front of the service)"
                    .into(),
            ));
        }
        if env.bool("QUOTA_MODE", false)? {
            return Err(SettingError(
                "QUOTA_MODE=true: not supported globally; set quota_mode: true on the descriptors"
                    .into(),
            ));
        }
        let redis_pool_size: usize = env.int("REDIS_POOL_SIZE", 10, "a positive integer")?;
        if redis_pool_size == 0 {
            return Err(SettingError("REDIS_POOL_SIZE=0: must be at least 1".into()));
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
        let redis_url = env.string("REDIS_URL", "/var/run/nutcracker/ratelimit.sock");
        if redis_url.trim().is_empty() {
            return Err(SettingError("REDIS_URL is empty".into()));
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
            redis_socket_type,
            redis_type,
            redis_url,
            redis_auth: env.string("REDIS_AUTH", ""),
            redis_tls: env.bool("REDIS_TLS", false)?,
            redis_pool_size,
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
            per_second,
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
        assert_eq!(s.redis_type, RedisType::Single);
        assert_eq!(s.redis_socket_type, SocketType::Unix);
        assert_eq!(s.redis_timeout, Duration::from_secs(10));
        assert_eq!(s.config_dir(), PathBuf::from("/srv/runtime_data/current/config"));
        assert_eq!(s.header_limit, "RateLimit-Limit");
        assert!((s.near_limit_ratio - 0.8).abs() < 1e-9);
    }

    #[test]
    fn every_bad_setting_is_named() {
        for (name, value) in [
            ("PORT", "http"),
            ("GRPC_PORT", "70000"),
            ("REDIS_TYPE", "ring"),
            ("REDIS_TYPE", "sentinel"),
            ("REDIS_SOCKET_TYPE", "udp"),
            ("REDIS_POOL_SIZE", "0"),
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
        let error = settings(&[("REDIS_TYPE", "CLUSTER")]).unwrap_err();
        assert!(error.0.contains("REDIS_SOCKET_TYPE=tcp"), "{error}");
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
    fn per_second_redis_has_its_own_settings() {
        let s = settings(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "localhost:7813"),
            ("REDIS_AUTH", "main"),
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
            ("REDIS_PERSECOND_URL", "localhost:7810"),
        ])
        .unwrap();
        let second = s.per_second.expect("per-second settings");
        assert_eq!(
            (second.redis_url.as_str(), second.redis_socket_type),
            ("localhost:7810", SocketType::Tcp)
        );
        assert_eq!(second.redis_auth, "", "REDIS_AUTH is the main Redis's only");
        assert!(second.per_second.is_none());
        let unix = settings(&[("REDIS_PERSECOND", "true")]).unwrap().per_second.unwrap();
        assert_eq!(unix.redis_url, "/var/run/nutcracker/ratelimitpersecond.sock");
        let error =
            settings(&[("REDIS_PERSECOND", "true"), ("REDIS_PERSECOND_TYPE", "ring")]).unwrap_err();
        assert!(error.0.starts_with("REDIS_PERSECOND") && error.0.contains("ring"), "{error}");
        assert!(settings(&[("REDIS_PERSECOND", "false")]).unwrap().per_second.is_none());
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
