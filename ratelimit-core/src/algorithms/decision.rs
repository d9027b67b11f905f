//! The answer every limiting command gives: the five-field reply (README, "Reply").

/// What a limiter decided for one request, in the `RL.*` reply layout.
///
/// All times are whole milliseconds measured from `now'` (the evaluation instant, never earlier
/// than the limiter's last admitted call), rounded up from the exact rational values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// The configured maximum (capacity or limit).
    pub limit: u64,
    /// Whole permits left after this request, `0..=limit`, rounded down.
    pub remaining: u64,
    /// Limited: ms until the same request would be admitted, or -1 if it never can
    /// (cost above the limit). Admitted: 0, except the leaky bucket's delay mode, where it is
    /// the delay the caller must wait before acting.
    pub retry_after_ms: i64,
    /// Ms until the limiter is back in its initial state (0 when it is in it).
    pub reset_after_ms: i64,
}

impl Decision {
    /// The reply as the five integers clients receive.
    pub fn to_reply(&self) -> [i64; 5] {
        [
            i64::from(self.allowed),
            saturate_i64(u128::from(self.limit)),
            saturate_i64(u128::from(self.remaining)),
            self.retry_after_ms,
            self.reset_after_ms,
        ]
    }
}

/// The outcome of evaluating one request against a limiter.
///
/// `next` is the state to store: `Some` only when the request is admitted and consumes
/// something (cost > 0). A limited request, a zero-cost request and a dry run change nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided<S> {
    pub decision: Decision,
    pub next: Option<S>,
}

/// Converts an exact non-negative quantity to `i64`, saturating (never reached for accepted
/// parameters, which keep every time below 100 years).
pub fn saturate_i64(v: u128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
