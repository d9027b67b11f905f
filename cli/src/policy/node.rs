//! The nodes a URL reaches, and each node's policy table: read back with `RL.POLICY LIST`,
//! `GET … definition`, `LIST name` and `GET … CANDIDATE`; changed with `RL.POLICY SET/DEL`.
//!
//! Given one node of a cluster (`cluster_enabled:1`), every primary is found with
//! `CLUSTER SHARDS` (Redis 7.0+, Valkey), or `CLUSTER NODES` where that is missing, and
//! reached with the URL's scheme, credentials and database: policies are per node, so each
//! primary holds its own table (replicas copy their primary's).

use std::collections::BTreeMap;
use std::fmt;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use super::file::PolicyFile;
use super::plan::Change;

/// One node: where it is and a connection to it.
pub struct Node {
    pub address: String,
    connection: redis::Connection,
}

/// Why a command failed: the text to print.
#[derive(Debug)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<redis::RedisError> for Failure {
    fn from(e: redis::RedisError) -> Self {
        Failure(e.to_string())
    }
}

fn connect(info: ConnectionInfo) -> Result<Node, Failure> {
    let address = match &info.addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
    };
    let client = redis::Client::open(info)?;
    let connection = client
        .get_connection_with_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| Failure(format!("{address}: {e}")))?;
    connection
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .map_err(|e| Failure(format!("{address}: {e}")))?;
    Ok(Node { address, connection })
}

/// The primaries `url` reaches: the node itself when it is no cluster node, else every
/// primary of its cluster (sorted by address).
pub fn primaries(url: &str) -> Result<Vec<Node>, Failure> {
    let info = url.into_connection_info().map_err(|e| Failure(format!("--url {url}: {e}")))?;
    let mut first = connect(info.clone())?;
    let server: String = redis::cmd("INFO").arg("cluster").query(&mut first.connection)?;
    if !server.lines().any(|l| l.trim() == "cluster_enabled:1") {
        return Ok(vec![first]);
    }
    let tls = matches!(info.addr, ConnectionAddr::TcpTls { .. });
    let mut addresses = shard_primaries(&mut first.connection, tls)
        .or_else(|_| nodes_primaries(&mut first.connection))?;
    addresses.sort();
    addresses.dedup();
    if addresses.is_empty() {
        return Err(Failure(format!("{}: the cluster has no primary", first.address)));
    }
    addresses
        .into_iter()
        .map(|(host, port)| {
            let mut info = info.clone();
            info.addr = match info.addr {
                ConnectionAddr::TcpTls { insecure, tls_params, .. } => {
                    ConnectionAddr::TcpTls { host, port, insecure, tls_params }
                }
                _ => ConnectionAddr::Tcp(host, port),
            };
            connect(info)
        })
        .collect()
}

/// Text of a reply value.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A field/value reply (RESP2 flat array or RESP3 map) as pairs of values.
fn pairs(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Map(items) => items.iter().filter_map(|(k, v)| Some((text(k)?, v))).collect(),
        Value::Array(items) => {
            items.chunks(2).filter_map(|p| Some((text(p.first()?)?, p.get(1)?))).collect()
        }
        _ => Vec::new(),
    }
}

/// `CLUSTER SHARDS`: each shard's primary, with the TLS port when the URL is `rediss://`.
fn shard_primaries(c: &mut redis::Connection, tls: bool) -> Result<Vec<(String, u16)>, Failure> {
    let shards: Value = redis::cmd("CLUSTER").arg("SHARDS").query(c)?;
    let Value::Array(shards) = shards else {
        return Err(Failure("CLUSTER SHARDS: unexpected reply".into()));
    };
    let mut out = Vec::new();
    for shard in &shards {
        let Some((_, Value::Array(nodes))) = pairs(shard).into_iter().find(|(k, _)| k == "nodes")
        else {
            continue;
        };
        for node in nodes {
            let fields: BTreeMap<String, Option<String>> =
                pairs(node).into_iter().map(|(k, v)| (k, text(v))).collect();
            let field = |k: &str| fields.get(k).cloned().flatten();
            if field("role").as_deref() != Some("master")
                || field("health").as_deref() == Some("fail")
            {
                continue;
            }
            let host = field("ip").or_else(|| field("endpoint")).unwrap_or_default();
            let port =
                if tls { field("tls-port").or_else(|| field("port")) } else { field("port") };
            if let Some(port) = port.and_then(|p| p.parse().ok()) {
                out.push((host, port));
            }
        }
    }
    Ok(out)
}

/// `CLUSTER NODES`: `id ip:port@cport[,hostname] flags …`, the primaries (`master`, not
/// `fail`) with slots.
fn nodes_primaries(c: &mut redis::Connection) -> Result<Vec<(String, u16)>, Failure> {
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(c)?;
    let mut out = Vec::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else { continue };
        if !flags.split(',').any(|f| f == "master") || flags.split(',').any(|f| f == "fail") {
            continue;
        }
        let address = address.split(['@', ',']).next().unwrap_or_default();
        if let Some((host, port)) = address.rsplit_once(':') {
            if let Ok(port) = port.parse() {
                out.push((host.to_string(), port));
            }
        }
    }
    Ok(out)
}

impl Node {
    fn query(&mut self, args: &[&str]) -> Result<Value, Failure> {
        let mut command = redis::cmd(args.first().copied().unwrap_or_default());
        for arg in args.iter().skip(1) {
            command.arg(*arg);
        }
        command.query(&mut self.connection).map_err(|e| Failure(format!("{}: {e}", self.address)))
    }

    /// The `definition` field of an `RL.POLICY GET` reply (`None`: nil).
    fn definition(&mut self, args: &[&str]) -> Result<Option<String>, Failure> {
        let reply = self.query(args)?;
        if reply == Value::Nil {
            return Ok(None);
        }
        let found = pairs(&reply).into_iter().find(|(k, _)| k == "definition");
        match found.and_then(|(_, v)| text(v)) {
            Some(definition) => Ok(Some(definition)),
            None => Err(Failure(format!(
                "{}: RL.POLICY GET has no definition field: the module is older than this \
                 command (0.3.0 with RL.POLICY LIST name and GET's definition is needed)",
                self.address
            ))),
        }
    }

    /// The node's whole table.
    pub fn table(&mut self) -> Result<PolicyFile, Failure> {
        let mut table = PolicyFile::default();
        let Value::Array(names) = self.query(&["RL.POLICY", "LIST"])? else {
            return Err(Failure(format!("{}: RL.POLICY LIST: unexpected reply", self.address)));
        };
        for name in names.iter().filter_map(text) {
            let Some(definition) = self.definition(&["RL.POLICY", "GET", &name])? else {
                continue; // deleted meanwhile
            };
            table.policies.insert(name.clone(), definition);
            if let Some(candidate) = self.definition(&["RL.POLICY", "GET", &name, "CANDIDATE"])? {
                table.candidates.insert(name.clone(), candidate);
            }
            let Value::Array(overrides) = self.query(&["RL.POLICY", "LIST", &name])? else {
                continue;
            };
            for entry in &overrides {
                let fields: BTreeMap<String, &Value> = pairs(entry).into_iter().collect();
                let (Some(key), Some(definition)) = (fields.get("key"), fields.get("definition"))
                else {
                    continue;
                };
                let key = match key {
                    Value::BulkString(bytes) => String::from_utf8(bytes.clone()).map_err(|_| {
                        Failure(format!(
                            "{}: policy {name}: the override of a key that is not UTF-8 ({bytes:?}) \
                             cannot be written in a policy file",
                            self.address
                        ))
                    })?,
                    other => text(other).unwrap_or_default(),
                };
                if let Some(definition) = text(definition) {
                    table.overrides.entry(name.clone()).or_default().insert(key, definition);
                }
            }
        }
        Ok(table)
    }

    /// Sends one change.
    pub fn apply(&mut self, change: &Change) -> Result<(), Failure> {
        let command = change.command();
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        self.query(&args).map(|_| ())
    }
}
