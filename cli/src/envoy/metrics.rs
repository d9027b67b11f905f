//! Prometheus metrics with envoyproxy/ratelimit's stat names as labelled counters
//! (`ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//! with `domain`, `key1`, `key2` — the labels of their Prometheus mapping), plus the service's
//! own counters (config loads, Redis errors, global shadow mode).

use prometheus::{Encoder, IntCounter, IntCounterVec, Opts, Registry, TextEncoder};

use super::decide::Stats;

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    total_hits: IntCounterVec,
    over_limit: IntCounterVec,
    near_limit: IntCounterVec,
    within_limit: IntCounterVec,
    shadow_mode: IntCounterVec,
    pub config_load_success: IntCounter,
    pub config_load_error: IntCounter,
    pub redis_error: IntCounter,
    pub service_error: IntCounter,
    pub global_shadow_mode: IntCounter,
}

fn counter_vec(registry: &Registry, name: &str, help: &str) -> IntCounterVec {
    let vec = IntCounterVec::new(Opts::new(name, help), &["domain", "key1", "key2"])
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    registry.register(Box::new(vec.clone())).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    vec
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    registry.register(Box::new(c.clone())).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    c
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let p = "ratelimit_service_rate_limit_";
        Metrics {
            total_hits: counter_vec(
                &registry,
                &format!("{p}total_hits"),
                "Hits of a limited descriptor (hits_addend summed).",
            ),
            over_limit: counter_vec(
                &registry,
                &format!("{p}over_limit"),
                "Hits over the descriptor's limit.",
            ),
            near_limit: counter_vec(
                &registry,
                &format!("{p}near_limit"),
                "Hits within the limit above NEAR_LIMIT_RATIO of it.",
            ),
            within_limit: counter_vec(
                &registry,
                &format!("{p}within_limit"),
                "Hits within the descriptor's limit.",
            ),
            shadow_mode: counter_vec(
                &registry,
                &format!("{p}shadow_mode"),
                "Hits over a shadow-mode limit (answered OK).",
            ),
            config_load_success: counter(
                &registry,
                "ratelimit_service_config_load_success",
                "Config loads that succeeded.",
            ),
            config_load_error: counter(
                &registry,
                "ratelimit_service_config_load_error",
                "Config loads refused (the last good config stays).",
            ),
            redis_error: counter(
                &registry,
                "ratelimit_service_should_rate_limit_redis_error",
                "Requests answered with an error because Redis failed or timed out.",
            ),
            service_error: counter(
                &registry,
                "ratelimit_service_should_rate_limit_service_error",
                "Requests refused as invalid (no domain, no descriptor, no config).",
            ),
            global_shadow_mode: counter(
                &registry,
                "ratelimit_service_global_shadow_mode",
                "Refusals answered OK because of SHADOW_MODE.",
            ),
            registry,
        }
    }

    /// Adds one decision's counters. `stats_key` is `domain.key1[.key2…]`.
    pub fn record(&self, domain: &str, stats_key: &str, stats: &Stats) {
        let rest = stats_key.strip_prefix(domain).unwrap_or(stats_key).trim_start_matches('.');
        let mut parts = rest.splitn(3, '.');
        let key1 = parts.next().unwrap_or("");
        let key2 = parts.next().unwrap_or("");
        let labels = [domain, key1, key2];
        for (vec, n) in [
            (&self.total_hits, stats.total_hits),
            (&self.over_limit, stats.over_limit),
            (&self.near_limit, stats.near_limit),
            (&self.within_limit, stats.within_limit),
            (&self.shadow_mode, stats.shadow_mode),
        ] {
            // Touch every series (a zero shows the descriptor was seen).
            vec.with_label_values(&labels).inc_by(n);
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
