//! Redis, as the service reaches it: the main Redis (`REDIS_*`) and, with
//! `REDIS_PERSECOND=true`, the per-second one (`REDIS_PERSECOND_*`), each whatever shape its
//! settings give it ([`super::redis_shape`]: one server, a cluster, Sentinel; with TLS and
//! credentials). Every call is bounded by `REDIS_TIMEOUT`, so a Redis outage answers an error
//! fast and Envoy's `failure_mode_deny` decides. Connections are made on first use: the
//! service starts while Redis is down.

use std::time::Duration;

use redis::Value;

use super::redis_shape::{self, Shape};
use super::settings::{RedisTarget, SettingError, Settings};

/// A failed call: whether Redis could not be reached in time (`Unavailable`) or answered an
/// error (`Refused`: a module error such as an unknown policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    Unavailable(String),
    Refused(String),
}

/// One Redis the service decides on.
pub struct Backend {
    shape: Box<dyn Shape>,
    timeout: Duration,
}

impl Backend {
    /// The main Redis the settings describe (nothing is connected yet).
    pub fn new(settings: &Settings) -> Result<Backend, SettingError> {
        Backend::for_target(&settings.redis, settings)
    }

    /// `REDIS_PERSECOND=true`: the Redis per-second limits are decided on.
    pub fn per_second(settings: &Settings) -> Result<Option<Backend>, SettingError> {
        settings.redis_per_second.as_ref().map(|t| Backend::for_target(t, settings)).transpose()
    }

    fn for_target(target: &RedisTarget, settings: &Settings) -> Result<Backend, SettingError> {
        let shape = redis_shape::build(target, &settings.redis_tls_files, settings.redis_timeout)?;
        Ok(Backend { shape, timeout: settings.redis_timeout })
    }

    /// `REDIS_TIMEOUT` in ms (the calls' `DEADLINE` is now + this).
    pub fn timeout_ms(&self) -> i64 {
        i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether keys live in slots (so a request's keys may need several calls).
    pub fn is_cluster(&self) -> bool {
        self.shape.is_cluster()
    }

    /// Opens the connections ahead of the first request (Envoy's rate-limit filter waits 20 ms
    /// by default); a Redis that is down now is simply tried again on use.
    pub async fn warm_up(&self) {
        match tokio::time::timeout(self.timeout, self.shape.warm_up()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("Redis not reachable yet: {e:?}"),
            Err(_) => tracing::warn!("Redis not reachable yet: no answer within REDIS_TIMEOUT"),
        }
    }

    /// Runs one command whose keys hash to `slot` (ignored but on a cluster), within
    /// `REDIS_TIMEOUT`.
    pub async fn call(&self, slot: u16, args: &[String]) -> Result<Value, CallError> {
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(arg);
        }
        match tokio::time::timeout(self.timeout, self.shape.query(slot, &cmd)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Unavailable(format!(
                "Redis did not answer within REDIS_TIMEOUT ({} ms)",
                self.timeout.as_millis()
            ))),
        }
    }
}

/// The cluster slot of a key (hash tags honoured).
pub fn slot(key: &str) -> u16 {
    redis::cluster_routing::get_slot(key.as_bytes())
}
