//! Module configuration (`CONFIG GET/SET ratelimit.*`, or load-time arguments).

use std::sync::atomic::{AtomicI64, Ordering};

/// Default of `ratelimit.slide-log-max`.
pub const SLIDE_LOG_MAX_DEFAULT: i64 = 100_000;
/// Largest value `ratelimit.slide-log-max` accepts (an exact log of this many entries takes
/// ~1.6 GB per key).
pub const SLIDE_LOG_MAX_LIMIT: i64 = 100_000_000;

/// `ratelimit.slide-log-max`: the largest `limit` an exact `RL.SLIDE` log accepts.
pub static SLIDE_LOG_MAX: AtomicI64 = AtomicI64::new(SLIDE_LOG_MAX_DEFAULT);

/// The current `ratelimit.slide-log-max`.
pub fn slide_log_max() -> u64 {
    u64::try_from(SLIDE_LOG_MAX.load(Ordering::Relaxed)).unwrap_or(0)
}
