//! Module configuration (`CONFIG GET/SET ratelimit.*`, or load-time arguments).

use std::sync::atomic::{AtomicI64, Ordering};

/// Default of `ratelimit.slide-log-max`.
pub const SLIDE_LOG_MAX_DEFAULT: i64 = ratelimit_core::algorithms::slide::DEFAULT_LOG_MAX as i64;
/// Largest value `ratelimit.slide-log-max` accepts (an exact log of this many entries takes
/// ~1.6 GB per key).
pub const SLIDE_LOG_MAX_LIMIT: i64 = 100_000_000;

/// `ratelimit.slide-log-max`: the most entries an exact `RL.SLIDE` log may come to hold,
/// `min(limit, window in ms)` (see `ratelimit_core::algorithms::slide::log_entries_bound`).
pub static SLIDE_LOG_MAX: AtomicI64 = AtomicI64::new(SLIDE_LOG_MAX_DEFAULT);

/// The current `ratelimit.slide-log-max`.
pub fn slide_log_max() -> u64 {
    u64::try_from(SLIDE_LOG_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.lease-max`.
pub const LEASE_MAX_DEFAULT: i64 = ratelimit_core::algorithms::lease::DEFAULT_LEASE_MAX as i64;
/// Largest value `ratelimit.lease-max` accepts.
pub const LEASE_MAX_LIMIT: i64 = ratelimit_core::algorithms::lease::MAX_LEASE_MAX as i64;

/// `ratelimit.lease-max`: the largest `limit` `RL.ACQUIRE` accepts.
pub static LEASE_MAX: AtomicI64 = AtomicI64::new(LEASE_MAX_DEFAULT);

/// The current `ratelimit.lease-max`.
pub fn lease_max() -> u64 {
    u64::try_from(LEASE_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.policy-max`.
pub const POLICY_MAX_DEFAULT: i64 = ratelimit_core::features::policy::POLICY_MAX_DEFAULT;
/// Largest value `ratelimit.policy-max` accepts.
pub const POLICY_MAX_LIMIT: i64 = ratelimit_core::features::policy::POLICY_MAX_LIMIT;

/// `ratelimit.policy-max`: the most policies plus overrides `RL.POLICY SET` creates (loading
/// never drops any: a table loaded above a lowered bound only refuses new entries).
pub static POLICY_MAX: AtomicI64 = AtomicI64::new(POLICY_MAX_DEFAULT);

/// The current `ratelimit.policy-max`.
pub fn policy_max() -> usize {
    usize::try_from(POLICY_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.top-k`.
pub const TOP_K_DEFAULT: i64 = ratelimit_core::features::top::DEFAULT_K as i64;
/// Largest value `ratelimit.top-k` accepts.
pub const TOP_K_LIMIT: i64 = ratelimit_core::features::top::MAX_K as i64;

/// `ratelimit.top-k`: the counters of `RL.TOP`'s summary per window (0 turns it off).
pub static TOP_K: AtomicI64 = AtomicI64::new(TOP_K_DEFAULT);

/// The current `ratelimit.top-k`.
pub fn top_k() -> usize {
    usize::try_from(TOP_K.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.top-window`, in seconds.
pub const TOP_WINDOW_DEFAULT: i64 = ratelimit_core::features::top::DEFAULT_WINDOW_MS / 1000;
/// Largest value `ratelimit.top-window` accepts: a day.
pub const TOP_WINDOW_LIMIT: i64 = 86_400;

/// `ratelimit.top-window`: the length of `RL.TOP`'s windows in seconds (a read covers the
/// last one to two windows).
pub static TOP_WINDOW: AtomicI64 = AtomicI64::new(TOP_WINDOW_DEFAULT);

/// The current `ratelimit.top-window`, in ms.
pub fn top_window_ms() -> i64 {
    TOP_WINDOW.load(Ordering::Relaxed).clamp(1, TOP_WINDOW_LIMIT) * 1000
}
