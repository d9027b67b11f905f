//! Redis, as the service reaches it: one server (`REDIS_TYPE=SINGLE`: `REDIS_POOL_SIZE`
//! multiplexed connections, each reconnecting by itself) or a cluster (`CLUSTER`: commands
//! routed to the master of the slot their keys hash to). Every call is bounded by
//! `REDIS_TIMEOUT`, so a Redis outage answers an error fast and Envoy's `failure_mode_deny`
//! decides. Connections are made on first use: the service starts while Redis is down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{ConnectionAddr, ConnectionInfo, RedisConnectionInfo, Value};
use tokio::sync::OnceCell;

use super::settings::{RedisType, SettingError, Settings, SocketType};

/// A failed call: whether Redis could not be reached in time (`Unavailable`) or answered an
/// error (`Refused`: a module error such as an unknown policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    Unavailable(String),
    Refused(String),
}

enum Kind {
    Single { client: redis::Client, pool: Vec<OnceCell<ConnectionManager>>, next: AtomicUsize },
    Cluster { client: ClusterClient, connection: OnceCell<ClusterConnection> },
}

/// The Redis the service decides on.
pub struct Backend {
    kind: Kind,
    timeout: Duration,
}

/// `REDIS_AUTH`: `password` or `username:password`.
fn credentials(auth: &str) -> (Option<String>, Option<String>) {
    if auth.is_empty() {
        return (None, None);
    }
    match auth.split_once(':') {
        Some((user, password)) => (Some(user.to_string()), Some(password.to_string())),
        None => (None, Some(auth.to_string())),
    }
}

/// `host:port` (or `redis://host:port`) as host and port.
fn host_port(text: &str) -> Result<(String, u16), SettingError> {
    let bare = text.trim().trim_start_matches("redis://").trim_end_matches('/');
    let bare = bare.rsplit_once('@').map_or(bare, |(_, hp)| hp);
    let (host, port) = bare
        .rsplit_once(':')
        .ok_or_else(|| SettingError(format!("REDIS_URL={text:?}: use host:port")))?;
    let port = port.parse().map_err(|_| SettingError(format!("REDIS_URL={text:?}: bad port")))?;
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

impl Backend {
    /// The backend the settings describe (nothing is connected yet).
    pub fn new(settings: &Settings) -> Result<Backend, SettingError> {
        if settings.redis_tls {
            return Err(SettingError(
                "REDIS_TLS=true: TLS to Redis is not built into this service; reach Redis over a \
                 TLS tunnel (stunnel, a sidecar) and set REDIS_TLS=false"
                    .into(),
            ));
        }
        let (username, password) = credentials(&settings.redis_auth);
        let kind = match settings.redis_type {
            RedisType::Single => {
                let addr = match settings.redis_socket_type {
                    SocketType::Unix => ConnectionAddr::Unix(settings.redis_url.clone().into()),
                    SocketType::Tcp => {
                        let (host, port) = host_port(&settings.redis_url)?;
                        ConnectionAddr::Tcp(host, port)
                    }
                };
                let info = ConnectionInfo {
                    addr,
                    redis: RedisConnectionInfo { username, password, ..Default::default() },
                };
                let client = redis::Client::open(info).map_err(|e| {
                    SettingError(format!("REDIS_URL={:?}: {e}", settings.redis_url))
                })?;
                let pool = (0..settings.redis_pool_size).map(|_| OnceCell::new()).collect();
                Kind::Single { client, pool, next: AtomicUsize::new(0) }
            }
            RedisType::Cluster => {
                let mut nodes = Vec::new();
                for node in settings.redis_url.split(',').filter(|n| !n.trim().is_empty()) {
                    let (host, port) = host_port(node)?;
                    nodes.push(format!("redis://{host}:{port}"));
                }
                let mut builder = ClusterClient::builder(nodes)
                    .connection_timeout(settings.redis_timeout)
                    .response_timeout(settings.redis_timeout)
                    .retries(1);
                if let Some(user) = username {
                    builder = builder.username(user);
                }
                if let Some(password) = password {
                    builder = builder.password(password);
                }
                let client = builder.build().map_err(|e| {
                    SettingError(format!("REDIS_URL={:?}: {e}", settings.redis_url))
                })?;
                Kind::Cluster { client, connection: OnceCell::new() }
            }
        };
        Ok(Backend { kind, timeout: settings.redis_timeout })
    }

    /// `REDIS_TIMEOUT` in ms (the calls' `DEADLINE` is now + this).
    pub fn timeout_ms(&self) -> i64 {
        i64::try_from(self.timeout.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether keys live in slots (so a request's keys may need several calls).
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster { .. })
    }

    /// Opens the connections ahead of the first request (Envoy's rate-limit filter waits 20 ms
    /// by default); a Redis that is down now is simply tried again on use.
    pub async fn warm_up(&self) {
        let ping = ["PING".to_string()];
        let count = match &self.kind {
            Kind::Single { pool, .. } => pool.len(),
            Kind::Cluster { .. } => 1,
        };
        for _ in 0..count {
            if let Err(e) = self.call(0, &ping).await {
                tracing::warn!("Redis not reachable yet: {e:?}");
                return;
            }
        }
    }

    /// Runs one command whose keys hash to `slot` (ignored on a single server), within
    /// `REDIS_TIMEOUT`.
    pub async fn call(&self, slot: u16, args: &[String]) -> Result<Value, CallError> {
        let mut cmd = redis::Cmd::new();
        for arg in args {
            cmd.arg(arg);
        }
        match tokio::time::timeout(self.timeout, self.call_inner(slot, &cmd)).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Unavailable(format!(
                "Redis did not answer within REDIS_TIMEOUT ({} ms)",
                self.timeout.as_millis()
            ))),
        }
    }

    async fn call_inner(&self, slot: u16, cmd: &redis::Cmd) -> Result<Value, CallError> {
        let classify = |e: redis::RedisError| {
            // `-DEADLINE …`: the call came too late to count; as a timeout.
            if e.code() == Some("DEADLINE") {
                CallError::Unavailable(e.to_string())
            } else if e.kind() == redis::ErrorKind::ResponseError
                || e.kind() == redis::ErrorKind::ExtensionError
                || e.kind() == redis::ErrorKind::TypeError
            {
                CallError::Refused(e.to_string())
            } else {
                CallError::Unavailable(e.to_string())
            }
        };
        match &self.kind {
            Kind::Single { client, pool, next } => {
                let i = next.fetch_add(1, Ordering::Relaxed) % pool.len().max(1);
                let cell =
                    pool.get(i).ok_or_else(|| CallError::Unavailable("empty pool".into()))?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(self.timeout)
                    .set_response_timeout(self.timeout)
                    .set_number_of_retries(1)
                    .set_max_delay(self.timeout.as_millis().try_into().unwrap_or(u64::MAX));
                let manager = cell
                    .get_or_try_init(|| ConnectionManager::new_with_config(client.clone(), config))
                    .await
                    .map_err(|e| CallError::Unavailable(e.to_string()))?;
                let mut connection = manager.clone();
                cmd.query_async(&mut connection).await.map_err(classify)
            }
            Kind::Cluster { client, connection } => {
                let connection = connection
                    .get_or_try_init(|| client.get_async_connection())
                    .await
                    .map_err(|e| CallError::Unavailable(e.to_string()))?;
                let mut connection = connection.clone();
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::new(slot, SlotAddr::Master),
                ));
                connection.route_command(cmd, route).await.map_err(classify)
            }
        }
    }
}

/// The cluster slot of a key (hash tags honoured).
pub fn slot(key: &str) -> u16 {
    redis::cluster_routing::get_slot(key.as_bytes())
}
