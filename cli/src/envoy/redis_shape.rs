//! The shapes a Redis takes, behind one seam ([`Shape`]): one server (`SINGLE`: a pool of
//! multiplexed connections, each reconnecting by itself, calls pipelined on them:
//! [`super::pipeline`]), a cluster (`CLUSTER`: each command
//! routed to the master of its keys' slot) and Sentinel (`SENTINEL`: the master the Sentinels
//! name, asked again when it stops answering or turns replica). TLS and credentials are how
//! any shape connects ([`Connect`]), not shapes of their own. The decision code sees only
//! [`super::backend::Backend`].

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{ConnectionAddr, ConnectionInfo, RedisConnectionInfo, TlsCertificates, Value};
use tokio::sync::{OnceCell, RwLock};

use super::backend::CallError;
use super::pipeline::Pool;
use super::settings::{RedisTarget, RedisTlsFiles, RedisType, SettingError, SocketType};

/// One shape of Redis: runs a command whose keys hash to `slot`.
#[tonic::async_trait]
pub trait Shape: Send + Sync {
    /// Runs `cmd` (its keys in `slot`; ignored but by a cluster).
    async fn query(&self, slot: u16, cmd: &redis::Cmd) -> Result<Value, CallError>;

    /// Whether keys live in slots (so a request's keys may need several calls).
    fn is_cluster(&self) -> bool {
        false
    }

    /// Opens the connections calls will use (a `PING` on each).
    async fn warm_up(&self) -> Result<(), CallError> {
        let ping = redis::cmd("PING");
        self.query(0, &ping).await.map(|_| ())
    }
}

/// The shape `target` describes (nothing is connected yet).
pub fn build(
    target: &RedisTarget,
    tls_files: &RedisTlsFiles,
    timeout: Duration,
) -> Result<Box<dyn Shape>, SettingError> {
    let connect = Connect::new(target, tls_files)?;
    let url_error =
        |e: String| SettingError(format!("{}_URL={:?}: {e}", target.prefix, target.url));
    Ok(match target.kind {
        RedisType::Single => {
            let addr = match target.socket_type {
                SocketType::Unix => Address::Unix(target.url.clone()),
                SocketType::Tcp => host_port(&target.url).map_err(url_error)?,
            };
            Box::new(Single::new(&connect, addr, target, timeout).map_err(url_error)?)
        }
        RedisType::Cluster => Box::new(cluster(&connect, &target.url, timeout).map_err(url_error)?),
        RedisType::Sentinel => {
            let mut parts = target.url.split(',').map(str::trim).filter(|p| !p.is_empty());
            let master = parts.next().unwrap_or_default().to_string();
            let sentinel_connect =
                Connect { credentials: credentials(&target.sentinel_auth), ..connect.clone() };
            let mut sentinels = Vec::new();
            for part in parts {
                let addr = host_port(part).map_err(url_error)?;
                sentinels.push(sentinel_connect.client(&addr).map_err(url_error)?);
            }
            Box::new(Sentinel {
                master,
                sentinels,
                connect,
                target: target.clone(),
                timeout,
                current: RwLock::new(None),
            })
        }
    })
}

/// Where one server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Address {
    Unix(String),
    Tcp(String, u16),
}

/// `host:port` (or `redis://host:port`, `[v6]:port`) as an address.
fn host_port(text: &str) -> Result<Address, String> {
    let bare = text.trim();
    let bare = ["redis://", "rediss://"].iter().fold(bare, |t, p| t.trim_start_matches(p));
    let bare = bare.trim_end_matches('/');
    let bare = bare.rsplit_once('@').map_or(bare, |(_, hp)| hp);
    let (host, port) = bare.rsplit_once(':').ok_or_else(|| format!("{text:?}: use host:port"))?;
    let port = port.parse().map_err(|_| format!("{text:?}: bad port"))?;
    Ok(Address::Tcp(host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

/// `_AUTH`: `password` or `username:password` (as theirs: split at the first `:`).
fn credentials(auth: &str) -> (Option<String>, Option<String>) {
    if auth.is_empty() {
        return (None, None);
    }
    match auth.split_once(':') {
        Some((user, password)) => (Some(user.to_string()), Some(password.to_string())),
        None => (None, Some(auth.to_string())),
    }
}

/// How every connection of a target is made: credentials, and TLS with its certificates
/// (read once, at start: a missing or bad file stops the service naming the variable).
#[derive(Clone)]
struct Connect {
    credentials: (Option<String>, Option<String>),
    /// `Some` with TLS: the certificates, and whether the server's certificate is not checked.
    tls: Option<(TlsCertificates, bool)>,
}

impl Connect {
    fn new(target: &RedisTarget, files: &RedisTlsFiles) -> Result<Connect, SettingError> {
        let read = |name: &str, path: &str| {
            std::fs::read(path).map_err(|e| SettingError(format!("{name}={path:?}: {e}")))
        };
        let tls = if target.tls {
            let client_tls = if files.client_cert.is_empty() || files.client_key.is_empty() {
                None
            } else {
                Some(redis::ClientTlsConfig {
                    client_cert: read("REDIS_TLS_CLIENT_CERT", &files.client_cert)?,
                    client_key: read("REDIS_TLS_CLIENT_KEY", &files.client_key)?,
                })
            };
            let root_cert = if files.ca_cert.is_empty() {
                None
            } else {
                Some(read("REDIS_TLS_CACERT", &files.ca_cert)?)
            };
            Some((TlsCertificates { client_tls, root_cert }, files.skip_hostname_verification))
        } else {
            None
        };
        let connect = Connect { credentials: credentials(&target.auth), tls };
        // The certificates are parsed here too, so a bad PEM stops the service at start.
        if connect.tls.is_some() {
            connect.client(&Address::Tcp("localhost".into(), 6379)).map_err(|e| {
                SettingError(format!(
                    "REDIS_TLS_CLIENT_CERT/REDIS_TLS_CLIENT_KEY/REDIS_TLS_CACERT: {e}"
                ))
            })?;
        }
        Ok(connect)
    }

    /// A client for the server at `addr`.
    fn client(&self, addr: &Address) -> Result<redis::Client, String> {
        let (username, password) = self.credentials.clone();
        let redis = RedisConnectionInfo { username, password, ..Default::default() };
        let addr = match (addr, &self.tls) {
            (Address::Unix(path), _) => ConnectionAddr::Unix(path.into()),
            (Address::Tcp(host, port), None) => ConnectionAddr::Tcp(host.clone(), *port),
            (Address::Tcp(host, port), Some((_, insecure))) => ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: *insecure,
                tls_params: None,
            },
        };
        let info = ConnectionInfo { addr, redis };
        match &self.tls {
            Some((certificates, _)) if matches!(info.addr, ConnectionAddr::TcpTls { .. }) => {
                redis::Client::build_with_tls(info, certificates.clone())
            }
            _ => redis::Client::open(info),
        }
        .map_err(|e| e.to_string())
    }
}

/// `-DEADLINE …` (the call came too late to count) and connection trouble are `Unavailable`;
/// an error the module answered is `Refused`.
pub fn classify(e: redis::RedisError) -> CallError {
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
}

/// One server: `pool_size` multiplexed connections, calls pipelined on them
/// ([`super::pipeline`]).
struct Single {
    pool: Arc<Pool>,
}

impl Single {
    fn new(
        connect: &Connect,
        addr: Address,
        target: &RedisTarget,
        timeout: Duration,
    ) -> Result<Single, String> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(timeout)
            .set_response_timeout(timeout)
            .set_number_of_retries(1)
            .set_max_delay(timeout.as_millis().try_into().unwrap_or(u64::MAX));
        let client = connect.client(&addr)?;
        Ok(Single {
            pool: Arc::new(Pool::new(client, config, target.pool_size, target.pipelining)),
        })
    }
}

#[tonic::async_trait]
impl Shape for Single {
    async fn query(&self, _slot: u16, cmd: &redis::Cmd) -> Result<Value, CallError> {
        self.pool.query(cmd).await
    }

    async fn warm_up(&self) -> Result<(), CallError> {
        self.pool.warm_up().await
    }
}

/// A Redis Cluster: one cluster connection routing each command to its slot's master.
struct Cluster {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
}

fn cluster(connect: &Connect, url: &str, timeout: Duration) -> Result<Cluster, String> {
    let mut nodes = Vec::new();
    for node in url.split(',').filter(|n| !n.trim().is_empty()) {
        if let Address::Tcp(host, port) = host_port(node)? {
            nodes.push(ConnectionAddr::Tcp(host, port));
        }
    }
    let infos: Vec<ConnectionInfo> = nodes
        .into_iter()
        .map(|addr| ConnectionInfo { addr, redis: RedisConnectionInfo::default() })
        .collect();
    let mut builder = ClusterClient::builder(infos)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(1);
    let (username, password) = connect.credentials.clone();
    if let Some(user) = username {
        builder = builder.username(user);
    }
    if let Some(password) = password {
        builder = builder.password(password);
    }
    if let Some((certificates, insecure)) = &connect.tls {
        let mode = if *insecure { redis::TlsMode::Insecure } else { redis::TlsMode::Secure };
        builder = builder.tls(mode).certs(certificates.clone());
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    Ok(Cluster { client, connection: OnceCell::new() })
}

#[tonic::async_trait]
impl Shape for Cluster {
    async fn query(&self, slot: u16, cmd: &redis::Cmd) -> Result<Value, CallError> {
        let connection = self
            .connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .map_err(|e| CallError::Unavailable(e.to_string()))?;
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            slot,
            SlotAddr::Master,
        )));
        connection.clone().route_command(cmd, route).await.map_err(classify)
    }

    fn is_cluster(&self) -> bool {
        true
    }
}

/// Redis Sentinel: the Sentinels are asked, in order, for the master's address
/// (`SENTINEL GET-MASTER-ADDR-BY-NAME`); commands go to that master as to one server. When it
/// stops answering, or answers `READONLY` (a failover made it a replica), the Sentinels are
/// asked again on the next call.
struct Sentinel {
    master: String,
    sentinels: Vec<redis::Client>,
    connect: Connect,
    /// The master's connections are made as this target says (pool, pipelining).
    target: RedisTarget,
    timeout: Duration,
    /// The master in use and its connections.
    current: RwLock<Option<Arc<Single>>>,
}

impl Sentinel {
    /// The master's address, from the first Sentinel that knows it.
    async fn resolve(&self) -> Result<Address, CallError> {
        let mut last = format!("no Sentinel knows the master {:?}", self.master);
        for sentinel in &self.sentinels {
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(self.timeout)
                .set_response_timeout(self.timeout);
            let answer: redis::RedisResult<Option<(String, u16)>> = async {
                let mut connection =
                    sentinel.get_multiplexed_async_connection_with_config(&config).await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.master)
                    .query_async(&mut connection)
                    .await
            }
            .await;
            match answer {
                Ok(Some((host, port))) => return Ok(Address::Tcp(host, port)),
                Ok(None) => {}
                Err(e) => last = format!("Sentinel {:?}: {e}", sentinel.get_connection_info().addr),
            }
        }
        Err(CallError::Unavailable(last))
    }

    async fn master(&self) -> Result<Arc<Single>, CallError> {
        if let Some(single) = self.current.read().await.as_ref() {
            return Ok(single.clone());
        }
        let mut current = self.current.write().await;
        if let Some(single) = current.as_ref() {
            return Ok(single.clone());
        }
        let addr = self.resolve().await?;
        tracing::warn!(master = %self.master, ?addr, "Redis master from Sentinel");
        let single = Arc::new(
            Single::new(&self.connect, addr, &self.target, self.timeout)
                .map_err(CallError::Unavailable)?,
        );
        *current = Some(single.clone());
        Ok(single)
    }
}

#[tonic::async_trait]
impl Shape for Sentinel {
    async fn query(&self, slot: u16, cmd: &redis::Cmd) -> Result<Value, CallError> {
        let single = self.master().await?;
        let result = single.query(slot, cmd).await;
        let stale = match &result {
            Err(CallError::Unavailable(_)) => true,
            Err(CallError::Refused(message)) => message.contains("READONLY"),
            Ok(_) => false,
        };
        if stale {
            let mut current = self.current.write().await;
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &single)) {
                *current = None;
            }
        }
        result
    }

    async fn warm_up(&self) -> Result<(), CallError> {
        self.master().await?.warm_up().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_credentials() {
        assert_eq!(host_port("localhost:6379"), Ok(Address::Tcp("localhost".into(), 6379)));
        assert_eq!(host_port("redis://u:p@h:1/"), Ok(Address::Tcp("h".into(), 1)));
        assert_eq!(host_port("rediss://h:2"), Ok(Address::Tcp("h".into(), 2)));
        assert_eq!(host_port("[::1]:7"), Ok(Address::Tcp("::1".into(), 7)));
        assert!(host_port("localhost").is_err());
        assert!(host_port("h:port").is_err());
        assert_eq!(credentials(""), (None, None));
        assert_eq!(credentials("pw"), (None, Some("pw".into())));
        assert_eq!(credentials("user:p:w"), (Some("user".into()), Some("p:w".into())));
    }
}
