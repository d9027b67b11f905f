//! `redis-ratelimit envoy` deployed as Envoy Gateway deploys envoyproxy/ratelimit: its config
//! from an xDS server over TLS (client certificate, `CONFIG_TYPE=GRPC_XDS_SOTW`), TLS on its gRPC
//! port (Envoy connects with a client certificate), and the Redis shapes and connections a
//! deployment uses: TLS and AUTH to Redis, Sentinel. Real processes on free loopback ports: a
//! redis-server with the module, Sentinel (`redis-server --sentinel`), Envoy, and an ADS
//! server in the test (tonic) serving `RateLimitConfig` resources. Certificates come from the
//! `openssl` command.

mod common;
#[path = "envoy/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// A CA and one certificate it signed, for `localhost`, `127.0.0.1` and `envoy-ratelimit`,
/// good for a server and a client (Envoy Gateway mounts one such pair for both roles).
struct Certs {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn certs(dir: &Path, name: &str) -> Certs {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&[
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(&dir, &ca);
    let mut csr = vec!["req"];
    csr.extend_from_slice(&ec);
    csr.extend_from_slice(&[
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
        "-subj",
        "/CN=envoy-ratelimit",
    ]);
    openssl(&dir, &csr);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,DNS:envoy-ratelimit,IP:127.0.0.1\n\
         extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "tls.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    Certs { ca: dir.join("ca.crt"), cert: dir.join("tls.crt"), key: dir.join("tls.key") }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Envoy's TLS to the rate-limit service: trusts `ca`, presents `cert` when given.
fn upstream_tls(ca: &Path, client: Option<&Certs>) -> String {
    let identity = client.map_or(String::new(), |c| {
        format!(
            "\n          tls_certificates: [{{certificate_chain: {{filename: {}}}, private_key: {{filename: {}}}}}]",
            path(&c.cert),
            path(&c.key)
        )
    });
    format!(
        r#"
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          alpn_protocols: [h2]
          validation_context: {{trusted_ca: {{filename: {}}}, match_typed_subject_alt_names: [{{san_type: DNS, matcher: {{exact: localhost}}}}]}}{identity}"#,
        path(ca)
    )
}

/// The xDS server Envoy Gateway runs for the rate-limit service, reduced to what the service
/// uses: one ADS stream per client, the current snapshot sent on subscription and on every
/// change, and every request the client sent (subscription, ACKs, NACKs) kept for the test.
#[derive(Clone)]
struct Ads {
    snapshot: watch::Receiver<(String, Vec<RateLimitConfig>)>,
    /// Every change ends the streams open then (the server drops its clients).
    drop_streams: watch::Receiver<u32>,
    seen: Arc<Mutex<Vec<DiscoveryRequest>>>,
    headers: Arc<Mutex<Vec<String>>>,
}

impl Ads {
    /// How many streams subscribed (requests without a nonce).
    fn subscriptions(&self) -> usize {
        self.seen.lock().unwrap().iter().filter(|r| r.response_nonce.is_empty()).count()
    }

    /// Whether `version` was ACKed.
    fn acked(&self, version: &str) -> bool {
        self.seen.lock().unwrap().iter().any(|r| {
            r.version_info == version && r.error_detail.is_none() && !r.response_nonce.is_empty()
        })
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;
    type DeltaAggregatedResourcesStream = ReceiverStream<Result<DeltaDiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        if let Some(token) = request.metadata().get("x-eg-token") {
            self.headers.lock().unwrap().push(token.to_str().unwrap_or_default().to_string());
        }
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(4);
        let (mut snapshot, seen) = (self.snapshot.clone(), self.seen.clone());
        let mut drop_streams = self.drop_streams.clone();
        drop_streams.mark_unchanged();
        tokio::spawn(async move {
            let Ok(Some(subscribe)) = inbound.message().await else { return };
            seen.lock().unwrap().push(subscribe);
            snapshot.mark_changed();
            let mut nonce = 0;
            loop {
                tokio::select! {
                    changed = snapshot.changed() => {
                        if changed.is_err() { return; }
                        let (version, configs) = snapshot.borrow_and_update().clone();
                        nonce += 1;
                        let resources = configs
                            .iter()
                            .map(|c| Any { type_url: TYPE_URL.into(), value: c.encode_to_vec() })
                            .collect();
                        let response = DiscoveryResponse {
                            version_info: version,
                            resources,
                            type_url: TYPE_URL.into(),
                            nonce: nonce.to_string(),
                            ..Default::default()
                        };
                        if tx.send(Ok(response)).await.is_err() { return; }
                    }
                    _ = drop_streams.changed() => return,
                    message = inbound.message() => match message {
                        Ok(Some(m)) => seen.lock().unwrap().push(m),
                        _ => return,
                    },
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("SotW only"))
    }
}

/// `domain` with one descriptor `user` (any value) at `per_hour`.
fn users_config(name: &str, domain: &str, per_hour: u32) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            key: "user".into(),
            rate_limit: Some(RateLimitPolicy {
                unit: RateLimitUnit::Hour as i32,
                requests_per_unit: per_hour,
                ..Default::default()
            }),
            ..Default::default()
        }],
    }
}

/// A running ADS server: its port, what it serves, and what it saw.
struct AdsServer {
    port: u16,
    snapshot: watch::Sender<(String, Vec<RateLimitConfig>)>,
    drop_streams: watch::Sender<u32>,
    ads: Ads,
}

/// The ADS server over TLS (its certificate from `certs`, client certificates required),
/// serving `initial` as version 1.
fn start_ads(
    runtime: &tokio::runtime::Runtime,
    certs: &Certs,
    initial: Vec<RateLimitConfig>,
) -> AdsServer {
    let (snapshot, rx) = watch::channel(("1".to_string(), initial));
    let (drop_streams, drop_rx) = watch::channel(0);
    let ads =
        Ads { snapshot: rx, drop_streams: drop_rx, seen: Arc::default(), headers: Arc::default() };
    let read = |p: &Path| std::fs::read(p).unwrap();
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(read(&certs.cert), read(&certs.key)))
        .client_ca_root(tonic::transport::Certificate::from_pem(read(&certs.ca)));
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(AggregatedDiscoveryServiceServer::new(ads.clone()));
    runtime
        .spawn(server.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
    AdsServer { port, snapshot, drop_streams, ads }
}

/// The settings Envoy Gateway gives the rate-limit deployment (its
/// `internal/infrastructure/kubernetes/ratelimit`), with the certificates of `certs` at
/// `/certs/{tls.crt,tls.key,ca.crt}` and the xDS server at `xds_port`.
fn envoy_gateway_env(certs: &Certs, xds_port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RUNTIME_IGNOREDOTFILES", "true".into()),
        ("USE_STATSD", "true".into()),
        ("STATSD_PORT", "9125".into()),
        ("CONFIG_TYPE", "GRPC_XDS_SOTW".into()),
        ("CONFIG_GRPC_XDS_SERVER_URL", format!("localhost:{xds_port}")),
        ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit".into()),
        ("GRPC_SERVER_USE_TLS", "true".into()),
        ("GRPC_SERVER_TLS_CERT", path(&certs.cert)),
        ("GRPC_SERVER_TLS_KEY", path(&certs.key)),
        ("GRPC_SERVER_TLS_CA_CERT", path(&certs.ca)),
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true".into()),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", path(&certs.cert)),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", path(&certs.key)),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", path(&certs.ca)),
        ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true".into()),
    ]
}

/// An ADS server serving domain `edge`, `user` at `per_hour` (version 1), and the service on
/// `redis` with Envoy Gateway's settings and `extra` (which win).
fn gateway_service(
    redis: &common::Server,
    runtime: &tokio::runtime::Runtime,
    per_hour: u32,
    extra: Vec<(&'static str, String)>,
) -> (Certs, AdsServer, harness::Service) {
    let certs = certs(&redis.dir, "certs");
    let server = start_ads(runtime, &certs, vec![users_config("edge", "edge", per_hour)]);
    let mut env = envoy_gateway_env(&certs, server.port);
    env.push(("REDIS_SOCKET_TYPE", "unix".into()));
    env.push(("REDIS_URL", path(&redis.sock)));
    env.extend(extra);
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let service = harness::start_service_with(&redis.dir, "", &vars);
    (certs, server, service)
}

/// docs/envoy.md's Envoy Gateway deployment, run: the config comes from an xDS server over
/// TLS (the service presenting its client certificate), Envoy reaches the service over TLS,
/// and every decision follows the config the server serves now: a new snapshot is ACKed and
/// decides the next requests, a bad one is NACKed and the last good one stays.
#[test]
fn envoy_gateway_xds_and_tls() {
    let redis = common::Server::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let headers = ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x-eg-token:secret".to_string());
    let (certs, server, service) = gateway_service(&redis, &runtime, 2, vec![headers]);
    let (snapshot, ads) = (&server.snapshot, &server.ads);
    harness::wait_for("the first xDS config", || {
        service.metric("ratelimit_service_config_load_success") >= 1
    });
    let envoy = harness::start_envoy_with(
        &redis.dir,
        &service,
        true,
        &upstream_tls(&certs.ca, Some(&certs)),
    );
    let statuses = |n: usize, user: &str| -> Vec<u16> {
        (0..n).map(|_| harness::get(envoy.port, "/", &[("x-user", user)]).status).collect()
    };
    let logs = || service.process.log_text();
    assert_eq!(statuses(3, "alice"), vec![200, 200, 429], "{}", logs());
    {
        let seen = ads.seen.lock().unwrap();
        let node = seen[0].node.as_ref().expect("the subscription names its node");
        assert_eq!(node.id, "envoy-ratelimit");
        assert_eq!(seen[0].type_url, TYPE_URL);
        assert!(seen.iter().any(|r| r.version_info == "1" && r.error_detail.is_none()));
    }
    assert_eq!(*ads.headers.lock().unwrap(), vec!["secret".to_string()]);

    // A new snapshot: ACKed, and it decides the next requests (bob gets 4).
    snapshot.send(("2".into(), vec![users_config("edge", "edge", 4)])).unwrap();
    harness::wait_for("version 2 ACKed", || ads.acked("2"));
    assert_eq!(statuses(5, "bob"), vec![200, 200, 200, 200, 429], "{}", logs());

    // A snapshot the loader refuses (no domain): NACKed with the reason, version 2 stays.
    snapshot.send(("3".into(), vec![users_config("broken", "", 1)])).unwrap();
    harness::wait_for("version 3 NACKed", || {
        ads.seen.lock().unwrap().iter().any(|r| {
            r.version_info == "2"
                && r.error_detail.as_ref().is_some_and(|e| e.message.contains("empty domain"))
        })
    });
    assert!(service.metric("ratelimit_service_config_load_error") >= 1);
    assert_eq!(statuses(5, "carol"), vec![200, 200, 200, 200, 429], "{}", logs());
}

/// The xDS server drops the stream (a restart, a redeploy): the service subscribes again
/// after `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`, keeping the config it had meanwhile, and
/// takes what the server serves by then.
#[test]
fn a_dropped_xds_stream_is_opened_again() {
    let redis = common::Server::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let extra = [
        ("GRPC_SERVER_USE_TLS", "false"),
        ("FORCE_START_WITHOUT_INITIAL_CONFIG", "false"),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "300ms"),
    ];
    // Without FORCE_START_WITHOUT_INITIAL_CONFIG the service listens once it has a config.
    let (_certs, server, service) =
        gateway_service(&redis, &runtime, 1, extra.map(|(k, v)| (k, v.to_string())).to_vec());
    assert_eq!(service.metric("ratelimit_service_config_load_success"), 1);
    let envoy = harness::start_envoy(&redis.dir, &service, true);
    let statuses = |n: usize, user: &str| -> Vec<u16> {
        (0..n).map(|_| harness::get(envoy.port, "/", &[("x-user", user)]).status).collect()
    };
    assert_eq!(statuses(2, "ivy"), vec![200, 429], "{}", service.process.log_text());
    harness::wait_for("version 1 ACKed", || server.ads.acked("1"));

    server.drop_streams.send(1).unwrap();
    server.snapshot.send(("2".into(), vec![users_config("edge", "edge", 3)])).unwrap();
    harness::wait_for("a second subscription", || server.ads.subscriptions() == 2);
    harness::wait_for("version 2 ACKed", || server.ads.acked("2"));
    assert_eq!(statuses(4, "jo"), vec![200, 200, 200, 429], "{}", service.process.log_text());
}

/// mTLS on the gRPC port (`GRPC_CLIENT_TLS_CACERT`): Envoy without a client certificate is
/// refused (Envoy's `failure_mode_deny` answers 500), with one it is served; and
/// `GRPC_CLIENT_TLS_SAN` refuses a certificate that is not for that name.
#[test]
fn grpc_mtls_requires_a_client_certificate_for_the_name() {
    let redis = common::Server::start();
    let certs = certs(&redis.dir, "certs");
    let config = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";
    let tls_vars = |san: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("REDIS_SOCKET_TYPE", "unix".into()),
            ("REDIS_URL", path(&redis.sock)),
            ("GRPC_SERVER_USE_TLS", "true".into()),
            ("GRPC_SERVER_TLS_CERT", path(&certs.cert)),
            ("GRPC_SERVER_TLS_KEY", path(&certs.key)),
            ("GRPC_CLIENT_TLS_CACERT", path(&certs.ca)),
            ("GRPC_CLIENT_TLS_SAN", san.into()),
        ]
    };
    // The service requiring a client certificate for `san`, and an Envoy presenting one.
    let start = |name: &str, san: &'static str| {
        let dir = redis.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let vars = tls_vars(san);
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let service = harness::start_service_with(&dir, config, &vars);
        let tls = upstream_tls(&certs.ca, Some(&certs));
        let envoy = harness::start_envoy_with(&dir, &service, true, &tls);
        (service, envoy)
    };
    let status = |envoy: &harness::Envoy, user: &str| {
        harness::get(envoy.port, "/", &[("x-user", user)]).status
    };
    let (service, with_cert) = start("a", "envoy-ratelimit");
    assert_eq!(status(&with_cert, "dan"), 200, "{}", service.process.log_text());
    assert_eq!(status(&with_cert, "dan"), 429);
    let dir = redis.dir.join("b");
    std::fs::create_dir_all(&dir).unwrap();
    let without_cert =
        harness::start_envoy_with(&dir, &service, true, &upstream_tls(&certs.ca, None));
    assert_eq!(status(&without_cert, "erin"), 500);

    let (other, envoy) = start("c", "someone-else");
    assert_eq!(status(&envoy, "fay"), 500, "{}", other.process.log_text());
}

/// `GRPC_SERVER_TLS_CERT`/`_KEY` renamed over by a renewed pair (from another CA): new
/// connections are served with the new pair — an Envoy that trusts only the new CA is
/// refused before (500 through `failure_mode_deny`) and served after; a pair that does not
/// load is not taken (the last good one stays).
#[test]
fn a_renewed_grpc_certificate_is_served_without_a_restart() {
    let redis = common::Server::start();
    let (old, new) = (certs(&redis.dir, "old"), certs(&redis.dir, "new"));
    let live = redis.dir.join("live");
    std::fs::create_dir_all(&live).unwrap();
    let (cert, key) = (live.join("tls.crt"), live.join("tls.key"));
    std::fs::copy(&old.cert, &cert).unwrap();
    std::fs::copy(&old.key, &key).unwrap();
    let config = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 100}\n";
    let service = harness::start_service_with(
        &redis.dir,
        config,
        &[
            ("REDIS_SOCKET_TYPE", "unix"),
            ("REDIS_URL", &path(&redis.sock)),
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &path(&cert)),
            ("GRPC_SERVER_TLS_KEY", &path(&key)),
        ],
    );
    let envoy_at = |name: &str, ca: &Path| {
        let dir = redis.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        harness::start_envoy_with(&dir, &service, true, &upstream_tls(ca, None))
    };
    let (trusts_old, trusts_new) = (envoy_at("envoy-old", &old.ca), envoy_at("envoy-new", &new.ca));
    let status =
        |envoy: &harness::Envoy| harness::get(envoy.port, "/", &[("x-user", "hal")]).status;
    assert_eq!((status(&trusts_old), status(&trusts_new)), (200, 500));

    // A half-written pair (the key does not match) is not taken.
    std::fs::write(&cert, std::fs::read(&new.cert).unwrap()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(status(&trusts_new), 500, "{}", service.process.log_text());
    assert!(service.process.log_text().contains("not reloaded"), "{}", service.process.log_text());

    // The renewed pair, renamed over the old files as a secret mount swaps them.
    for (from, to) in [(&new.key, &key), (&new.cert, &cert)] {
        let tmp = live.join("incoming");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
    harness::wait_for("the renewed certificate to be served", || status(&trusts_new) == 200);
}

/// A TLS listener of the test's own in front of `upstream_port` (every server of the
/// compatibility matrix, some built without TLS, is reached the same way): TLS with the
/// certificate of `certs`, then plain TCP to the server. Returns its port.
fn tls_terminator(runtime: &tokio::runtime::Runtime, certs: &Certs, upstream_port: u16) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&certs.cert).unwrap().map(Result::unwrap).collect();
    let key = PrivateKeyDer::from_pem_file(&certs.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else { return };
                let Ok(mut plain) =
                    tokio::net::TcpStream::connect(("127.0.0.1", upstream_port)).await
                else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

/// `REDIS_TLS` with `REDIS_TLS_CACERT`, and `REDIS_AUTH` (`password` or `user:password`):
/// decisions made on a Redis reached only through TLS that wants a password; a wrong password
/// answers an error (500 through `failure_mode_deny`), never a decision.
#[test]
fn redis_tls_and_auth() {
    let redis = common::Server::start();
    let certs = certs(&redis.dir, "certs");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tls_port = tls_terminator(&runtime, &certs, redis.port).to_string();
    let mut con = redis.conn();
    common::run(&mut con, &["ACL", "SETUSER", "limiter", "on", ">s3cret", "~*", "+@all"]).unwrap();
    common::run(&mut con, &["CONFIG", "SET", "requirepass", "pw"]).unwrap();
    let config = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";
    // `localhost`: the name the certificate is for.
    let url = format!("localhost:{tls_port}");
    // The CA given (REDIS_TLS_CACERT), or trusted by the system (SSL_CERT_FILE stands for the
    // system's store, as their CI adds the CA to it).
    for (n, auth, ca_variable, expected) in [
        (0, "pw", "REDIS_TLS_CACERT", vec![200, 200, 429]),
        (1, "limiter:s3cret", "REDIS_TLS_CACERT", vec![200, 200, 429]),
        (2, "limiter:wrong", "REDIS_TLS_CACERT", vec![500]),
        (4, "pw", "SSL_CERT_FILE", vec![200, 200, 429]),
    ] {
        let at = redis.dir.join(format!("s{n}"));
        std::fs::create_dir_all(&at).unwrap();
        let vars = [
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", url.as_str()),
            ("REDIS_TLS", "true"),
            (ca_variable, &path(&certs.ca)),
            ("REDIS_AUTH", auth),
        ]
        .map(|(k, v)| (k, v.to_string()));
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let service = harness::start_service_with(&at, config, &vars);
        let envoy = harness::start_envoy(&at, &service, true);
        let user = format!("u{n}");
        let got: Vec<u16> = (0..expected.len())
            .map(|_| harness::get(envoy.port, "/", &[("x-user", &user)]).status)
            .collect();
        assert_eq!(got, expected, "REDIS_AUTH={auth}: {}", service.process.log_text());
    }
    // Without REDIS_TLS the TLS port answers nothing the service can read: an error.
    let at = redis.dir.join("clear");
    std::fs::create_dir_all(&at).unwrap();
    let service = harness::start_service_with(
        &at,
        config,
        &[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &url),
            ("REDIS_AUTH", "pw"),
            ("REDIS_TIMEOUT", "300ms"),
        ],
    );
    let envoy = harness::start_envoy(&at, &service, true);
    assert_eq!(harness::get(envoy.port, "/", &[("x-user", "u3")]).status, 500);
    common::run(&mut con, &["AUTH", "pw"]).unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("edge_user_u*").query(&mut con).unwrap();
    keys.sort();
    assert_eq!(keys, ["edge_user_u0_", "edge_user_u1_", "edge_user_u4_"].map(String::from));
}

/// The Sentinels' own password (`REDIS_SENTINEL_AUTH`).
const SENTINEL_PASSWORD: &str = "sentinel-pw";

fn sentinel_url(port: u16) -> String {
    format!("redis://:{SENTINEL_PASSWORD}@127.0.0.1:{port}")
}

/// A `redis-server --sentinel` on a free port watching `master` as `mymaster`, with a
/// password of its own.
struct SentinelProcess {
    child: std::process::Child,
    port: u16,
}

impl SentinelProcess {
    fn start(dir: &Path, master: &common::Server) -> SentinelProcess {
        let port = harness::free_port();
        let conf = dir.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nrequirepass {SENTINEL_PASSWORD}\n\
                 sentinel monitor mymaster 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n",
                path(dir),
                master.port
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join(format!("sentinel-{port}.log"))).unwrap();
        let child = Command::new(common::server_bin())
            .arg(path(&conf))
            .arg("--sentinel")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let sentinel = SentinelProcess { child, port };
        harness::wait_for("Sentinel to know the master", || {
            let Ok(client) = redis::Client::open(sentinel_url(port)) else {
                return false;
            };
            let Ok(mut con) = client.get_connection() else { return false };
            let addr: redis::RedisResult<Option<(String, u16)>> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg("mymaster")
                .query(&mut con);
            matches!(addr, Ok(Some(_)))
        });
        sentinel
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `REDIS_TYPE=SENTINEL` (`REDIS_URL=mymaster,host:port`, `REDIS_SENTINEL_AUTH` for the
/// Sentinel's password): decisions go to the master the
/// Sentinel names; after a failover the service asks again and decides on the new master,
/// where the counts the replica received carry on.
#[test]
fn sentinel_names_the_master_and_failover_is_followed() {
    let master = common::Server::start();
    let replica = common::replica_of(&master, &["--replica-priority", "10"]);
    let sentinel = SentinelProcess::start(&master.dir, &master);
    let config = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n";
    let url = format!("mymaster,127.0.0.1:{}", sentinel.port);
    let service = harness::start_service_with(
        &master.dir,
        config,
        &[
            ("REDIS_TYPE", "SENTINEL"),
            ("REDIS_URL", &url),
            ("REDIS_SOCKET_TYPE", "unix"),
            ("REDIS_SENTINEL_AUTH", SENTINEL_PASSWORD),
        ],
    );
    let envoy = harness::start_envoy(&master.dir, &service, true);
    let get = || harness::get(envoy.port, "/", &[("x-user", "gus")]).status;
    assert_eq!([get(), get()], [200, 200], "{}", service.process.log_text());
    let mut on_master = master.conn();
    assert_eq!(
        common::run(&mut on_master, &["EXISTS", "edge_user_gus_"]).unwrap(),
        redis::Value::Int(1)
    );
    common::wait_in_sync(&master, &replica);

    let mut sentinel_con =
        redis::Client::open(sentinel_url(sentinel.port)).unwrap().get_connection().unwrap();
    let _: () =
        redis::cmd("SENTINEL").arg("FAILOVER").arg("mymaster").query(&mut sentinel_con).unwrap();
    let replica_port = replica.port;
    harness::wait_for("the Sentinel to name the replica", || {
        let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg("mymaster")
            .query(&mut sentinel_con)
            .unwrap_or(None);
        addr.is_some_and(|(_, port)| port == replica_port)
    });
    harness::wait_for("the replica to take writes", || {
        common::info_field(&mut replica.conn(), "replication", "role") == "master"
    });
    // The first call may still reach the old master (now a replica: READONLY) and answer an
    // error; the service then asks the Sentinel again. Requests that are answered are decided
    // on the new master, where gus has 2 of 3 already.
    let mut answered = Vec::new();
    harness::wait_for("a decision on the new master", || {
        let status = get();
        if status != 500 {
            answered.push(status);
        }
        !answered.is_empty()
    });
    answered.push(get());
    assert_eq!(answered, vec![200, 429], "{}", service.process.log_text());
}
