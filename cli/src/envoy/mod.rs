//! `redis-ratelimit envoy`: the rate-limit service Envoy calls
//! (`envoy.service.ratelimit.v3.RateLimitService`), a drop-in for envoyproxy/ratelimit
//! configured by the same environment variables ([`settings`]) and the same YAML files
//! ([`config`]), deciding every descriptor of a request with one module call ([`service`],
//! [`decide`]). Also: `/healthcheck` and `/json` on `PORT`, gRPC health, Prometheus metrics
//! ([`metrics`]), config reload on change keeping the last good config, graceful shutdown.
//! docs/envoy.md is the user's guide.

mod backend;
mod config;
mod decide;
mod json;
mod local_cache;
mod metadata;
mod metrics;
mod pipeline;
mod redis_shape;
mod service;
mod settings;
mod source;
mod tls;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::State as AxumState;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::sync::watch;

use settings::{LogFormat, Settings};

/// Arguments of `redis-ratelimit envoy` (its settings come from envoyproxy/ratelimit's
/// environment variables; see docs/envoy.md).
#[derive(clap::Args)]
pub struct Args {}

/// What the HTTP port answers from.
#[derive(Clone)]
struct Http {
    state: Arc<service::State>,
    healthy: Arc<AtomicBool>,
    settings: Arc<Settings>,
}

/// Serves until SIGTERM / SIGINT; exit code 2 for a bad setting or config at start.
pub fn run(_args: Args) -> ExitCode {
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("redis-ratelimit envoy: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&settings);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("redis-ratelimit envoy: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("redis-ratelimit envoy: {e}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(settings: &Settings) {
    let builder =
        tracing_subscriber::fmt().with_max_level(settings.log_level).with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn bind(what: &str, addr: &str) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{what}: cannot listen on {addr}: {e}"))
}

/// The gRPC connections: every accepted socket with `TCP_NODELAY`. Without it, each answer
/// (HEADERS, DATA and trailers written separately) waited for the client's delayed ACK:
/// ~44 ms per call to a Go gRPC client.
fn grpc_incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

async fn serve(settings: Settings) -> Result<(), String> {
    let settings = Arc::new(settings);
    let source = source::from_settings(&settings).map_err(|e| e.0)?;
    let backend = backend::Backend::new(&settings).map_err(|e| e.0)?;
    let per_second =
        backend::Backend::per_second(&settings).map_err(|e| format!("REDIS_PERSECOND: {}", e.0))?;
    let options = decide::Options {
        cache_key_prefix: settings.cache_key_prefix.clone(),
        near_limit_ratio: settings.near_limit_ratio,
        global_shadow_mode: settings.global_shadow_mode,
        refused_requests_count: settings.refused_requests_count,
        dynamic_metadata: settings.response_dynamic_metadata,
        headers: settings.response_headers_enabled.then(|| {
            (
                settings.header_limit.clone(),
                settings.header_remaining.clone(),
                settings.header_reset.clone(),
            )
        }),
    };
    let state = Arc::new(service::State {
        config: RwLock::new(None),
        backend,
        per_second,
        options,
        metrics: metrics::Metrics::new(),
        local_cache: local_cache::LocalCache::new(settings.local_cache_size),
    });

    let healthy = Arc::new(AtomicBool::new(true));
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let set_health = {
        let healthy = healthy.clone();
        let state = state.clone();
        let settings = settings.clone();
        let reporter = health_reporter.clone();
        move |up: bool| {
            let up = up
                && !(settings.healthy_with_config && state.config().is_none_or(|c| c.is_empty()));
            healthy.store(up, Ordering::SeqCst);
            let reporter = reporter.clone();
            tokio::spawn(async move {
                let status = if up {
                    tonic_health::ServingStatus::Serving
                } else {
                    tonic_health::ServingStatus::NotServing
                };
                reporter.set_service_status("", status).await;
                reporter.set_service_status("ratelimit", status).await;
            });
        }
    };
    let set_health: Arc<dyn Fn(bool) + Send + Sync> = Arc::new(set_health);
    source.start(source::Updates::new(state.clone(), set_health.clone())).await?;
    set_health(true);

    let (stop_tx, stop_rx) = watch::channel(false);
    let grpc_addr: SocketAddr = settings::listen_addr(&settings.grpc_host, settings.grpc_port)
        .parse()
        .map_err(|e| format!("GRPC_HOST/GRPC_PORT: {e}"))?;
    let grpc_listener = bind("GRPC_PORT", &grpc_addr.to_string()).await?;
    let http_listener = bind("PORT", &settings::listen_addr(&settings.host, settings.port)).await?;
    let prometheus_listener = if settings.use_prometheus {
        let addr = settings::prometheus_listen_addr(&settings.prometheus_addr).map_err(|e| e.0)?;
        Some(bind("PROMETHEUS_ADDR", &addr).await?)
    } else {
        None
    };

    {
        let state = state.clone();
        tokio::spawn(async move {
            state.backend.warm_up().await;
            if let Some(per_second) = &state.per_second {
                per_second.warm_up().await;
            }
        });
    }

    let http = Http { state: state.clone(), healthy: healthy.clone(), settings: settings.clone() };
    let router = axum::Router::new()
        .route("/healthcheck", get(healthcheck))
        .route("/json", get(json).post(json_request))
        .with_state(http.clone());
    let mut tasks = tokio::task::JoinSet::new();
    let mut rx = stop_rx.clone();
    tasks.spawn(async move {
        axum::serve(http_listener, router)
            .with_graceful_shutdown(async move {
                let _ = rx.wait_for(|s| *s).await;
            })
            .await
            .map_err(|e| format!("PORT: {e}"))
    });
    if let Some(listener) = prometheus_listener {
        let path = settings.prometheus_path.clone();
        let router = axum::Router::new().route(&path, get(prometheus)).with_state(http.clone());
        let mut rx = stop_rx.clone();
        tasks.spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|s| *s).await;
                })
                .await
                .map_err(|e| format!("PROMETHEUS_ADDR: {e}"))
        });
    }
    let mut rx = stop_rx.clone();
    let grpc_state = state.clone();
    let grpc_tls =
        settings.grpc_server_tls.as_ref().map(tls::acceptor).transpose().map_err(|e| e.0)?;
    tasks.spawn(async move {
        let router = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(RateLimitServiceServer::new(service::Service { state: grpc_state }));
        let shutdown = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        match grpc_tls {
            Some(acceptor) => {
                let incoming = tls::incoming(grpc_listener, acceptor);
                router.serve_with_incoming_shutdown(incoming, shutdown).await
            }
            None => {
                let incoming = grpc_incoming(grpc_listener);
                router.serve_with_incoming_shutdown(incoming, shutdown).await
            }
        }
        .map_err(|e| format!("GRPC_PORT: {e}"))
    });
    tracing::warn!(grpc = %grpc_addr, http = settings.port, "redis-ratelimit envoy serving");

    shutdown_signal().await;
    tracing::warn!("stopping: draining requests in flight");
    set_health(false);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(result) = tasks.join_next().await {
            if let Ok(Err(e)) = result {
                tracing::error!("{e}");
            }
        }
    })
    .await;
    if drained.is_err() {
        tracing::error!("requests still in flight after 20 s; exiting");
    }
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

async fn healthcheck(AxumState(http): AxumState<Http>) -> impl IntoResponse {
    if http.healthy.load(Ordering::SeqCst) {
        (StatusCode::OK, "OK")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "NOT OK")
    }
}

async fn json(AxumState(http): AxumState<Http>) -> impl IntoResponse {
    let files: Vec<serde_json::Value> = http
        .state
        .config()
        .map(|c| {
            c.files
                .iter()
                .map(|(name, config)| serde_json::json!({"file": name, "config": config}))
                .collect()
        })
        .unwrap_or_default();
    let body = serde_json::json!({
        "config_dir": http.settings.config_dir().display().to_string(),
        "files": files,
    });
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
}

/// `POST /json`: one request in proto3 JSON, answered in proto3 JSON (envoyproxy's HTTP API).
async fn json_request(
    AxumState(http): AxumState<Http>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let bad = |message: String| {
        tracing::warn!("POST /json: {message}");
        (StatusCode::BAD_REQUEST, "Bad Request\n").into_response()
    };
    let request = match json::parse_request(&body) {
        Ok(request) => request,
        Err(e) => return bad(e),
    };
    let response = match http.state.answer(request).await {
        Ok(response) => response,
        Err(status) => return bad(status.message().to_string()),
    };
    let (code, body) = json::render_response(&response);
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
        .into_response()
}

async fn prometheus(AxumState(http): AxumState<Http>) -> impl IntoResponse {
    if let Some(cache) = &http.state.local_cache {
        http.state.metrics.set_local_cache(&cache.stats());
    }
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], http.state.metrics.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    #[tokio::test]
    async fn accepted_grpc_sockets_have_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = grpc_incoming(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let accepted = incoming.next().await.unwrap().unwrap();
        assert!(accepted.nodelay().unwrap(), "an accepted gRPC socket without TCP_NODELAY");
    }
}
