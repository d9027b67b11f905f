//! Prometheus metrics with envoyproxy/ratelimit's stat names as labelled counters
//! (`ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//! with `domain`, `key1`, `key2` — the labels of their Prometheus mapping), plus the service's
//! own counters (config loads, Redis errors, global shadow mode). With a local cache, its
//! gauges (`ratelimit_localcache_hitCount`, …) and each descriptor's
//! `…_over_limit_with_local_cache` under its flat name (their Prometheus mapping leaves that
//! stat unmapped: `ratelimit_service_rate_limit_<domain>_<key>_over_limit_with_local_cache`).

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

use super::decide::Stats;
use super::local_cache::CacheStats;

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
    /// `…_over_limit_with_local_cache` per stats key, made on first use.
    local_over_limit: Mutex<HashMap<String, IntCounter>>,
    /// The local cache's gauges, made on first use.
    local_cache: Mutex<Vec<IntGauge>>,
}

/// A stats key as a metric name's part: what Prometheus does not allow becomes `_`.
fn metric_part(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
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
            local_over_limit: Mutex::new(HashMap::new()),
            local_cache: Mutex::new(Vec::new()),
            registry,
        }
    }

    /// The local cache's counters, as envoyproxy's `ratelimit.localcache.*` gauges.
    pub fn set_local_cache(&self, stats: &CacheStats) {
        let mut gauges = self.local_cache.lock().unwrap_or_else(|p| p.into_inner());
        let values = [
            ("hitCount", stats.hit_count),
            ("missCount", stats.miss_count),
            ("lookupCount", stats.lookup_count),
            ("entryCount", stats.entry_count),
            ("expiredCount", stats.expired_count),
            ("evacuateCount", stats.evacuate_count),
            ("overwriteCount", stats.overwrite_count),
            ("averageAccessTime", 0),
        ];
        if gauges.is_empty() {
            for (name, _) in values {
                let name = format!("ratelimit_localcache_{name}");
                let help = "The local cache of keys over their limit (LOCAL_CACHE_SIZE_IN_BYTES).";
                let Ok(gauge) = IntGauge::new(name, help) else { return };
                if self.registry.register(Box::new(gauge.clone())).is_err() {
                    return;
                }
                gauges.push(gauge);
            }
        }
        for (gauge, (_, value)) in gauges.iter().zip(values) {
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        }
    }

    fn count_local_over_limit(&self, stats_key: &str, n: u64) {
        let mut counters = self.local_over_limit.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(counter) = counters.get(stats_key) {
            counter.inc_by(n);
            return;
        }
        let name = format!(
            "ratelimit_service_rate_limit_{}_over_limit_with_local_cache",
            metric_part(stats_key)
        );
        let help = "Hits refused by the local cache (a key known over its limit).";
        let Ok(counter) = IntCounter::new(name, help) else { return };
        if self.registry.register(Box::new(counter.clone())).is_ok() {
            counter.inc_by(n);
            counters.insert(stats_key.to_string(), counter);
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
        if stats.over_limit_with_local_cache > 0 {
            self.count_local_over_limit(stats_key, stats.over_limit_with_local_cache);
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}
