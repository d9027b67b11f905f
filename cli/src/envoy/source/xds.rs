//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the config as `RateLimitConfig` resources
//! (`type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig`) from an xDS server
//! over the aggregated stream (`StreamAggregatedResources`, state of the world), as Envoy
//! Gateway serves it. Each response is the whole config: loaded like a set of files (one
//! resource, one file) and ACKed, or NACKed with the error while the last good config stays.
//! A broken stream is opened again after a backoff; the service waits for the first response
//! before serving unless `FORCE_START_WITHOUT_INITIAL_CONFIG=true`.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{value::Kind, Any, Struct, Value};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use envoy_types::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;
use serde_json::{json, Map, Value as Json};
use tokio::sync::{mpsc, oneshot};
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::{ConfigSource, Updates};
use crate::envoy::config::{Config, ConfigError};
use crate::envoy::settings::{SettingError, XdsSettings};

/// The resource type the service subscribes to.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// `google.rpc.Code.INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;

/// The xDS server and how to reach it.
pub struct Xds {
    settings: XdsSettings,
    endpoint: Endpoint,
    headers: Vec<(MetadataKey<tonic::metadata::Ascii>, MetadataValue<tonic::metadata::Ascii>)>,
    merge_domains: bool,
    force_start: bool,
}

impl Xds {
    /// Checks the settings (URL, TLS files, headers) now, so a bad one stops the service at
    /// start naming its variable.
    pub fn new(
        settings: XdsSettings,
        merge_domains: bool,
        force_start: bool,
    ) -> Result<Xds, SettingError> {
        let scheme = if settings.tls.is_some() { "https" } else { "http" };
        let url = if settings.server_url.contains("://") {
            settings.server_url.clone()
        } else {
            format!("{scheme}://{}", settings.server_url)
        };
        let bad_url = |e: String| {
            SettingError(format!("CONFIG_GRPC_XDS_SERVER_URL={:?}: {e}", settings.server_url))
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| bad_url(e.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        if let Some(tls) = &settings.tls {
            let read = |name: &str, path: &str| {
                std::fs::read(path).map_err(|e| SettingError(format!("{name}={path:?}: {e}")))
            };
            let mut config = ClientTlsConfig::new();
            if tls.server_ca.is_empty() {
                config = config.with_native_roots();
            } else {
                let ca = read("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", &tls.server_ca)?;
                config = config.ca_certificate(Certificate::from_pem(ca));
            }
            if !tls.client_cert.is_empty() && !tls.client_key.is_empty() {
                config = config.identity(Identity::from_pem(
                    read("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", &tls.client_cert)?,
                    read("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", &tls.client_key)?,
                ));
            }
            if !tls.server_san.is_empty() {
                config = config.domain_name(tls.server_san.clone());
            }
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| SettingError(format!("CONFIG_GRPC_XDS_SERVER_USE_TLS: {e}")))?;
        }
        let mut headers = Vec::new();
        for (name, value) in &settings.headers {
            let bad = || {
                SettingError(format!(
                    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: {name:?}: not a valid gRPC header"
                ))
            };
            let key =
                MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes()).map_err(|_| bad())?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|_| bad())?;
            headers.push((key, value));
        }
        Ok(Xds { settings, endpoint, headers, merge_domains, force_start })
    }

    /// The node the service presents (`CONFIG_GRPC_XDS_NODE_ID`, `_NODE_METADATA`).
    fn node(&self) -> Node {
        let fields = self
            .settings
            .node_metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value { kind: Some(Kind::StringValue(v.clone())) }))
            .collect();
        Node {
            id: self.settings.node_id.clone(),
            metadata: Some(Struct { fields }),
            ..Default::default()
        }
    }

    /// One stream: subscribes, then loads and ACKs (or NACKs) every response until the
    /// stream ends. `first` is told after the first response.
    async fn stream(
        &self,
        channel: Channel,
        updates: &Updates,
        first: &mut Option<oneshot::Sender<()>>,
        got_one: &mut bool,
    ) -> Result<(), String> {
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        if self.settings.max_message_bytes > 0 {
            client = client.max_decoding_message_size(self.settings.max_message_bytes);
        }
        let node = self.node();
        let (tx, rx) = mpsc::channel(4);
        let subscribe = DiscoveryRequest {
            node: Some(node.clone()),
            type_url: TYPE_URL.into(),
            ..Default::default()
        };
        tx.send(subscribe).await.map_err(|e| e.to_string())?;
        let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        for (key, value) in &self.headers {
            request.metadata_mut().insert(key.clone(), value.clone());
        }
        let mut responses = client
            .stream_aggregated_resources(request)
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let mut acked_version = String::new();
        while let Some(response) = responses.message().await.map_err(|e| e.to_string())? {
            if response.type_url != TYPE_URL {
                continue;
            }
            *got_one = true;
            let loaded = load(&response, self.merge_domains);
            let error_detail = match updates.apply(loaded) {
                Ok(()) => {
                    acked_version = response.version_info.clone();
                    tracing::info!(version = %response.version_info, "xDS config applied");
                    None
                }
                Err(e) => {
                    Some(RpcStatus { code: INVALID_ARGUMENT, message: e.0, details: Vec::new() })
                }
            };
            let answer = DiscoveryRequest {
                version_info: acked_version.clone(),
                node: Some(node.clone()),
                type_url: TYPE_URL.into(),
                response_nonce: response.nonce.clone(),
                error_detail,
                ..Default::default()
            };
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
            tx.send(answer).await.map_err(|e| e.to_string())?;
        }
        Err("the xDS server closed the stream".into())
    }

    /// Connects and streams for ever, waiting `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`
    /// after a failed connection and a doubling backoff (`XDS_CLIENT_BACKOFF_*`) after a
    /// broken stream (back to the start once a stream delivered a config).
    async fn run(self, updates: Updates, mut first: Option<oneshot::Sender<()>>) {
        let mut backoff = self.settings.backoff_initial;
        loop {
            tracing::info!(url = %self.settings.server_url, "connecting to the xDS server");
            let channel = match self.endpoint.connect().await {
                Ok(channel) => channel,
                Err(e) => {
                    tracing::error!(url = %self.settings.server_url, "xDS server unreachable: {e}");
                    tokio::time::sleep(self.settings.connect_retry).await;
                    continue;
                }
            };
            let mut got_one = false;
            if let Err(e) = self.stream(channel, &updates, &mut first, &mut got_one).await {
                tracing::error!("xDS stream: {e}");
            }
            if got_one {
                backoff = self.settings.backoff_initial;
            }
            tokio::time::sleep(backoff).await;
            backoff =
                (backoff * 2).min(self.settings.backoff_max.max(self.settings.backoff_initial));
        }
    }
}

#[tonic::async_trait]
impl ConfigSource for Xds {
    async fn start(self: Box<Self>, updates: Updates) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        let force_start = self.force_start;
        tokio::spawn(self.run(updates, Some(tx)));
        if !force_start {
            tracing::info!("waiting for the first config from the xDS server");
            let _ = rx.await;
        }
        Ok(())
    }
}

/// A response's resources as a config: each `RateLimitConfig` a file named by its `name`.
pub fn load(response: &DiscoveryResponse, merge_domains: bool) -> Result<Config, ConfigError> {
    let mut files = Vec::with_capacity(response.resources.len());
    for resource in &response.resources {
        let config = decode(resource)?;
        let name = if config.name.is_empty() { "xds".to_string() } else { config.name.clone() };
        files.push((name, to_yaml(&config).to_string()));
    }
    Config::load(&files, merge_domains)
}

fn decode(resource: &Any) -> Result<RateLimitConfig, ConfigError> {
    if resource.type_url != TYPE_URL {
        return Err(ConfigError(format!(
            "xDS resource of type {:?}, expected {TYPE_URL}",
            resource.type_url
        )));
    }
    RateLimitConfig::decode(resource.value.as_slice())
        .map_err(|e| ConfigError(format!("xDS resource: not a RateLimitConfig: {e}")))
}

/// The config file (as JSON, which the YAML loader reads) a resource stands for: the fields
/// envoyproxy/ratelimit reads from it, empty ones left out as a file leaves them out.
pub fn to_yaml(config: &RateLimitConfig) -> Json {
    json!({"domain": config.domain, "descriptors": descriptors(&config.descriptors)})
}

fn descriptors(list: &[RateLimitDescriptor]) -> Json {
    Json::Array(
        list.iter()
            .map(|d| {
                let mut out = Map::new();
                out.insert("key".into(), json!(d.key));
                if !d.value.is_empty() {
                    out.insert("value".into(), json!(d.value));
                }
                if let Some(policy) = &d.rate_limit {
                    out.insert("rate_limit".into(), rate_limit(policy));
                }
                if !d.descriptors.is_empty() {
                    out.insert("descriptors".into(), descriptors(&d.descriptors));
                }
                for (name, set) in [
                    ("shadow_mode", d.shadow_mode),
                    ("detailed_metric", d.detailed_metric),
                    ("quota_mode", d.quota_mode),
                ] {
                    if set {
                        out.insert(name.into(), json!(true));
                    }
                }
                Json::Object(out)
            })
            .collect(),
    )
}

fn rate_limit(policy: &RateLimitPolicy) -> Json {
    let mut out = Map::new();
    out.insert("requests_per_unit".into(), json!(policy.requests_per_unit));
    match RateLimitUnit::try_from(policy.unit) {
        Ok(RateLimitUnit::Unknown) => {}
        Ok(unit) => {
            out.insert("unit".into(), json!(unit.as_str_name()));
        }
        Err(_) => {
            out.insert("unit".into(), json!(format!("UNIT_{}", policy.unit)));
        }
    }
    if policy.unlimited {
        out.insert("unlimited".into(), json!(true));
    }
    if !policy.name.is_empty() {
        out.insert("name".into(), json!(policy.name));
    }
    if !policy.replaces.is_empty() {
        let replaces: Vec<Json> = policy.replaces.iter().map(|r| json!({"name": r.name})).collect();
        out.insert("replaces".into(), Json::Array(replaces));
    }
    Json::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::ratelimit::config::ratelimit::v3::RateLimitReplace;

    fn resource(config: &RateLimitConfig) -> Any {
        Any { type_url: TYPE_URL.into(), value: config.encode_to_vec() }
    }

    fn limit(unit: RateLimitUnit, n: u32) -> Option<RateLimitPolicy> {
        Some(RateLimitPolicy { unit: unit as i32, requests_per_unit: n, ..Default::default() })
    }

    #[test]
    fn a_response_loads_like_files() {
        let config = RateLimitConfig {
            name: "basic".into(),
            domain: "basic".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    key: "key1".into(),
                    rate_limit: limit(RateLimitUnit::Second, 50),
                    ..Default::default()
                },
                RateLimitDescriptor {
                    key: "one_per_minute".into(),
                    value: "v".into(),
                    rate_limit: Some(RateLimitPolicy {
                        unit: RateLimitUnit::Minute as i32,
                        requests_per_unit: 1,
                        name: "a".into(),
                        replaces: vec![RateLimitReplace { name: "b".into() }],
                        ..Default::default()
                    }),
                    shadow_mode: true,
                    ..Default::default()
                },
                RateLimitDescriptor {
                    key: "free".into(),
                    rate_limit: Some(RateLimitPolicy { unlimited: true, ..Default::default() }),
                    ..Default::default()
                },
            ],
        };
        let response = DiscoveryResponse {
            version_info: "1".into(),
            resources: vec![resource(&config)],
            type_url: TYPE_URL.into(),
            nonce: "n".into(),
            ..Default::default()
        };
        let loaded = load(&response, false).unwrap();
        let rule = loaded.lookup("basic", &[("key1", "x")]).unwrap().rule;
        assert_eq!(
            (rule.requests_per_unit, rule.unit),
            (50, Some(crate::envoy::config::Unit::Second))
        );
        let rule = loaded.lookup("basic", &[("one_per_minute", "v")]).unwrap().rule;
        assert!(rule.shadow);
        assert_eq!((rule.name.as_str(), rule.replaces.clone()), ("a", vec!["b".to_string()]));
        assert!(loaded.lookup("basic", &[("free", "x")]).unwrap().rule.unlimited);
        assert_eq!(loaded.files[0].0, "basic");
    }

    /// Every config a file would be refused for is refused from xDS too (so it is NACKed),
    /// as is a resource of another type or one that does not decode.
    #[test]
    fn bad_resources_are_refused() {
        let respond = |resources: Vec<Any>| DiscoveryResponse { resources, ..Default::default() };
        let empty_domain = RateLimitConfig { name: "x".into(), ..Default::default() };
        assert!(load(&respond(vec![resource(&empty_domain)]), false).is_err());
        let no_unit = RateLimitConfig {
            domain: "d".into(),
            descriptors: vec![RateLimitDescriptor {
                key: "k".into(),
                rate_limit: limit(RateLimitUnit::Unknown, 5),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(load(&respond(vec![resource(&no_unit)]), false).is_err());
        let twice = RateLimitConfig { domain: "d".into(), ..Default::default() };
        let both = respond(vec![resource(&twice), resource(&twice)]);
        assert!(load(&both, false).unwrap_err().0.contains("duplicate domain"));
        assert!(load(&both, true).is_ok());
        let other = Any { type_url: "type.googleapis.com/x".into(), value: vec![] };
        assert!(load(&respond(vec![other]), false).is_err());
        let garbage = Any { type_url: TYPE_URL.into(), value: vec![0xff, 0xff] };
        assert!(load(&respond(vec![garbage]), false).is_err());
        // No resource at all: an empty config, as theirs.
        assert!(load(&respond(vec![]), false).unwrap().is_empty());
    }
}
