//! What every algorithm's stored state shares: the instants it reports, the rule that an
//! expired state counts as missing, and the error a corrupt state gives. The algorithms depend
//! on this module; `limiter.rs` (the enum over all algorithms) depends on them, so nothing
//! imports in a circle.

use std::fmt;

/// A decoded limiter that fails validation (corrupt RDB payload, hand-made RESTORE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorruptState(pub &'static str);

impl fmt::Display for CorruptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt limiter state: {}", self.0)
    }
}

/// What every stored algorithm state can tell about time.
pub trait Stored {
    /// The instant of the last admitted call (absolute unix ms).
    fn updated_ms(&self) -> i64;
    /// The instant the limiter is back in its initial state if nothing else happens; the key
    /// expires then.
    fn reset_at_ms(&self) -> i64;
    /// The stored parameters and state as `RL.INFO` shows them (after `algorithm`, before
    /// `updated_ms` and `ttl_ms`): parameters under their argument names, durations in ms
    /// with a `_ms` suffix, flags as 0/1, state as of `updated_ms`.
    fn info_fields(&self) -> Vec<(&'static str, i64)>;
}

/// A count as an `RL.INFO` integer (saturating; counts are ≤ 10^12 for accepted parameters).
pub fn info_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The stored state if it is still live at `now_ms`: a limiter whose reset instant has passed
/// is treated exactly like a missing key, whether or not Redis has removed it yet.
pub fn live<S: Stored>(stored: Option<&S>, now_ms: i64) -> Option<&S> {
    stored.filter(|s| s.reset_at_ms() > now_ms)
}

/// What giving permits back (`RL.REFUND`) did to a stored state, at `now' = max(now,
/// updated_ms)` under its own parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refunded<S> {
    /// Nothing to give back: the limiter is already as full as a fresh one.
    Nothing,
    /// Back in its initial state: the key is deleted.
    Fresh,
    /// Permits given back: the new state (`updated_ms` = `now'`, except a sliding log, whose
    /// newest remaining entry keeps dating it).
    To(S),
}

/// What charging an overrun (`RL.CHARGE`) did to a stored state, at `now' = max(now,
/// updated_ms)` under its own parameters: the permits are taken whatever the limit, so the
/// limiter may end up *in debt* — using more than its limit — and refuses every request until
/// the debt is paid back at its refill rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charged<S> {
    /// The algorithm takes no debt (see `docs/commands.md`, RL.CHARGE).
    NoDebt,
    /// The debt would go beyond [`MAX_DEBT`] permits or [`crate::grammar::args::MAX_RESET_MS`] of
    /// repayment time: nothing charged.
    TooLarge,
    /// Permits taken: the new state (`updated_ms` = `now'`).
    To(S),
}

/// Most permits a limiter may use beyond its limit (its debt): 10^12, the largest cost.
pub const MAX_DEBT: u64 = crate::grammar::args::MAX_COUNT;

/// Whether a charged state is within the bounds of a debt: at most [`MAX_DEBT`] permits
/// beyond `limit`, and back in its initial state at most
/// [`MAX_RESET_MS`](crate::grammar::args::MAX_RESET_MS) after `now`.
pub fn debt_fits<S: Stored>(state: S, in_use: u128, limit: u64, now: i64) -> Charged<S> {
    let permits = in_use <= u128::from(limit) + u128::from(MAX_DEBT);
    let ahead = i128::from(state.reset_at_ms()) - i128::from(now);
    let time = u128::try_from(ahead).is_ok_and(|t| t <= crate::grammar::args::MAX_RESET_MS);
    if permits && time {
        Charged::To(state)
    } else {
        Charged::TooLarge
    }
}
