//! Module configuration (`CONFIG GET/SET ratelimit.*`, or load-time arguments).

use std::sync::atomic::{AtomicI64, Ordering};

/// Default of `ratelimit.slide-log-max`.
pub const SLIDE_LOG_MAX_DEFAULT: i64 = ratelimit_core::slide::DEFAULT_LOG_MAX as i64;
/// Largest value `ratelimit.slide-log-max` accepts (an exact log of this many entries takes
/// ~1.6 GB per key).
pub const SLIDE_LOG_MAX_LIMIT: i64 = 100_000_000;

/// `ratelimit.slide-log-max`: the most entries an exact `RL.SLIDE` log may come to hold,
/// `min(limit, window in ms)` (see `ratelimit_core::slide::log_entries_bound`).
pub static SLIDE_LOG_MAX: AtomicI64 = AtomicI64::new(SLIDE_LOG_MAX_DEFAULT);

/// The current `ratelimit.slide-log-max`.
pub fn slide_log_max() -> u64 {
    u64::try_from(SLIDE_LOG_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.lease-max`.
pub const LEASE_MAX_DEFAULT: i64 = ratelimit_core::lease::DEFAULT_LEASE_MAX as i64;
/// Largest value `ratelimit.lease-max` accepts.
pub const LEASE_MAX_LIMIT: i64 = ratelimit_core::lease::MAX_LEASE_MAX as i64;

/// `ratelimit.lease-max`: the largest `limit` `RL.ACQUIRE` accepts.
pub static LEASE_MAX: AtomicI64 = AtomicI64::new(LEASE_MAX_DEFAULT);

/// The current `ratelimit.lease-max`.
pub fn lease_max() -> u64 {
    u64::try_from(LEASE_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Default of `ratelimit.policy-max`.
pub const POLICY_MAX_DEFAULT: i64 = ratelimit_core::policy::POLICY_MAX_DEFAULT;
/// Largest value `ratelimit.policy-max` accepts.
pub const POLICY_MAX_LIMIT: i64 = ratelimit_core::policy::POLICY_MAX_LIMIT;

/// `ratelimit.policy-max`: the most policies plus overrides `RL.POLICY SET` creates (loading
/// never drops any: a table loaded above a lowered bound only refuses new entries).
pub static POLICY_MAX: AtomicI64 = AtomicI64::new(POLICY_MAX_DEFAULT);

/// The current `ratelimit.policy-max`.
pub fn policy_max() -> usize {
    usize::try_from(POLICY_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}
