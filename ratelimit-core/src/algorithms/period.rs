//! Fixed window counter (`RL.PERIOD`), optionally aligned to calendar boundaries.
//!
//! Time is cut into **windows** of `period` ms; each window admits at most `limit` units. A
//! request of cost `c` is admitted iff `used + c ≤ limit`, where `used` is what the current
//! window has admitted so far, and then `used += c`. When a window ends its count is forgotten
//! at once: the limiter is back in its initial state (the key expires at the window's end).
//!
//! * **Unaligned** (default): a window `[t0, t0 + period)` starts at the first admitted call
//!   of a fresh limiter; the next admitted call after it ends starts a new window.
//! * **Aligned** (`ALIGN [utc-offset]`): windows start at every instant `t` with
//!   `(t + offset) mod period = 0` — local calendar boundaries for that UTC offset
//!   (`ALIGN 8h` with a `1d` period = calendar days in UTC+8). `|offset| < period`.
//!
//! `retry_after` of a limited request and `reset_after` are the time to the end of the window
//! in force (`reset_after` is 0 while nothing is used; `retry_after` is -1 when the cost
//! exceeds the limit, which no window can admit).
//!
//! # Parameter changes
//!
//! The window's count is kept whole and judged against the call's limit
//! (`remaining = max(0, limit − used)`); a request of cost 0 is still admitted. A change of
//! the **period or the alignment** (`ALIGN` on/off, another offset) never ends the window in
//! force early, so it never grants more permits than the stored parameters would have:
//!
//! * The count stays in force until the **later** of the current window's end and the end
//!   of the window the call's parameters put around the count:
//!   - aligned call: the end of the aligned window that contains now;
//!   - unaligned call: the current window's start + the new period.
//! * The window keeps its start (the instant its count began).
//!
//! So lengthening a window (`1h` → `1d`, or switching to a `1d` calendar window) makes the
//! units already counted count toward the longer window, as a user of the new setting
//! expects; shortening it (`1d` → `1h`) keeps the count until the old window's end, after
//! which windows follow the new parameters. The carried window is only stored by an admitted
//! call; a limited or zero-cost call under new parameters reports the stored window's end,
//! which is exactly when the stored limiter resets (so if every call under the new parameters
//! is limited until then, the stored window simply ends). A window's end is never more than one
//! maximal period (10 years) after its last admitted call.
//!
//! # Keeping the stored period (`KEEPPERIOD`)
//!
//! A call with `KEEPPERIOD` is not a change of period: while a window is in force, the call is
//! judged with the stored period and alignment (and its own limit), so the window keeps its
//! bounds and an admitted call stores the stored period. With no window in force (a missing
//! key, one past its reset instant, or `FRESH`) the call's period starts the window, as
//! without `KEEPPERIOD`. This is rate-limiter-flexible's per-call duration: its counter's TTL
//! is set only when the counter is created.

use crate::algorithms::arith::{elapsed_ms, saturate_u64};
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::state::{
    debt_fits, info_int, live, Charged, CorruptState, Refunded, Stored, MAX_DEBT,
};
use crate::grammar::args::{MAX_AT_MS, MAX_COUNT, MAX_DURATION_MS};
use crate::grammar::error::ArgError;

/// The stored `align_offset_ms` of an unaligned limiter (no `ALIGN`). A real offset is always
/// shorter than the period (at most 10 years), so it never equals this value.
pub const UNALIGNED: i64 = i64::MIN;

/// The parameters of one `RL.PERIOD` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodParams {
    /// Most units admitted per window.
    pub limit: u64,
    /// The window length in ms.
    pub period_ms: u64,
    /// `None`: windows start at the first admitted call of a fresh limiter. `Some(offset)`:
    /// windows start at every `t` with `(t + offset) mod period_ms = 0` (`ALIGN offset`).
    pub align: Option<i64>,
    /// `KEEPPERIOD`: a window in force is judged with its stored period and alignment; only a
    /// new window takes `period_ms` (a request option, never stored: see the module docs).
    pub keep_period: bool,
}

/// A fixed-window limiter as stored in a key: the parameters of its last admitted call and
/// the window in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodWindow {
    pub limit: u64,
    pub period_ms: u64,
    /// The `ALIGN` offset in ms, or [`UNALIGNED`].
    pub align_offset_ms: i64,
    /// Units admitted in the window in force (1 ..= `limit`).
    pub used: u64,
    /// The instant the window in force began (absolute unix ms; may be before the first call
    /// of an aligned window, and negative for windows aligned before the epoch).
    pub window_start_ms: i64,
    /// The instant the window in force ends: the limiter's reset instant (key expiry).
    pub window_end_ms: i64,
    /// The instant of the last admitted call (absolute unix ms).
    pub updated_ms: i64,
}

/// A window in working form.
#[derive(Debug, Clone, Copy)]
struct Window {
    used: u64,
    start: i64,
    end: i64,
}

/// Narrows an exact instant to `i64`, saturating.
fn to_instant(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

impl PeriodParams {
    /// Validates a parameter set: a limit of 1 … 10^12, a period of 1 ms … 10 years, and an
    /// `ALIGN` offset shorter than the period. The full reset time is at most one period, so
    /// the 100-year rule always holds.
    ///
    /// Inline: every call builds one, and a call here would cost more than the checks.
    #[inline]
    pub fn new(limit: u64, period_ms: u64, align_offset_ms: Option<i64>) -> Result<Self, ArgError> {
        if !(1..=MAX_COUNT).contains(&limit) {
            return Err(ArgError::Integer { name: "limit", min: 1, max: i128::from(MAX_COUNT) });
        }
        if !(1..=MAX_DURATION_MS).contains(&period_ms) {
            return Err(ArgError::DurationRange {
                name: "period",
                min_ms: 1,
                max_ms: i128::from(MAX_DURATION_MS),
            });
        }
        if let Some(offset) = align_offset_ms {
            if offset.unsigned_abs() >= period_ms {
                let max = period_ms.saturating_sub(1);
                return Err(ArgError::Invalid(format!(
                    "utc-offset must be shorter than the period: a duration between -{max}ms and {max}ms"
                )));
            }
        }
        Ok(PeriodParams { limit, period_ms, align: align_offset_ms, keep_period: false })
    }

    /// These parameters with `KEEPPERIOD` on or off.
    pub fn keeping_period(self, keep_period: bool) -> Self {
        PeriodParams { keep_period, ..self }
    }

    /// The parameters a call is judged with when `window` is the window in force (`None`:
    /// none is): with `KEEPPERIOD` and a window in force, the stored period and alignment with
    /// the call's limit; otherwise the call's own parameters. Never `KEEPPERIOD` itself.
    pub fn in_force(&self, window: Option<&PeriodWindow>) -> PeriodParams {
        match window.filter(|_| self.keep_period) {
            Some(w) => PeriodParams {
                limit: self.limit,
                period_ms: w.period_ms,
                align: w.align(),
                keep_period: false,
            },
            None => PeriodParams { keep_period: false, ..*self },
        }
    }

    /// The window these parameters put around instant `t` for a fresh limiter (nothing used):
    /// `[t, t + period)` unaligned, the aligned window containing `t` otherwise.
    fn fresh_window(&self, t: i64) -> Window {
        let period = i128::from(self.period_ms);
        let t_wide = i128::from(t);
        let start = match self.align {
            None => t_wide,
            Some(offset) => {
                let phase = (t_wide + i128::from(offset)).checked_rem_euclid(period).unwrap_or(0);
                t_wide - phase
            }
        };
        Window { used: 0, start: to_instant(start), end: to_instant(start + period) }
    }
}

impl Window {
    fn from_state(state: &PeriodWindow) -> Self {
        Window { used: state.used, start: state.window_start_ms, end: state.window_end_ms }
    }

    /// The window in force once `params` are stored at `now` (see the module docs on
    /// parameter changes): unchanged when the period and the alignment are, otherwise kept
    /// until the later of its own end and the end the new parameters give it.
    fn carry(self, stored: &PeriodWindow, params: &PeriodParams, now: i64) -> Self {
        if stored.period_ms == params.period_ms && stored.align() == params.align {
            return self;
        }
        let new_end = match params.align {
            Some(_) => params.fresh_window(now).end,
            None => to_instant(i128::from(self.start) + i128::from(params.period_ms)),
        };
        Window { end: self.end.max(new_end), ..self }
    }
}

impl PeriodWindow {
    /// `RL.REFUND`: `used := max(0, used − count)` in the window in force at `now'` (an
    /// ended window has nothing to give back; the caller only refunds live limiters).
    pub fn refund(&self, now_ms: i64, count: u64) -> Refunded<PeriodWindow> {
        let now = now_ms.max(self.updated_ms);
        if self.used == 0 || now >= self.window_end_ms {
            return Refunded::Nothing;
        }
        match self.used.saturating_sub(count) {
            0 => Refunded::Fresh,
            used => Refunded::To(PeriodWindow { used, updated_ms: now, ..*self }),
        }
    }

    /// The `ALIGN` offset, or `None` for an unaligned limiter.
    /// `RL.CHARGE`: counts `count` more permits in the window in force whatever the limit:
    /// above it the window is in debt and refuses every request until it ends. A fixed window
    /// forgets its count when it ends, so the debt is "paid" then, not carried on.
    pub fn charge(&self, now_ms: i64, count: u64) -> Charged<PeriodWindow> {
        let now = now_ms.max(self.updated_ms);
        let used = u128::from(self.used) + u128::from(count);
        let next = PeriodWindow { used: saturate_u64(used), updated_ms: now, ..*self };
        debt_fits(next, used, self.limit, now)
    }

    /// Whether the window counts more than its limit (only `RL.CHARGE` makes such a state).
    pub fn in_debt(&self) -> bool {
        self.used > self.limit
    }

    pub fn align(&self) -> Option<i64> {
        (self.align_offset_ms != UNALIGNED).then_some(self.align_offset_ms)
    }

    /// The parameters this limiter was last admitted with.
    pub fn params(&self) -> PeriodParams {
        PeriodParams {
            limit: self.limit,
            period_ms: self.period_ms,
            align: self.align(),
            keep_period: false,
        }
    }

    /// Checks a decoded limiter for consistency (RDB, RESTORE): every field within what an
    /// admitted call can produce.
    pub fn validate(&self) -> Result<(), CorruptState> {
        PeriodParams::new(self.limit, self.period_ms, self.align())
            .map_err(|_| CorruptState("period limiter parameters out of range"))?;
        if self.used == 0 || u128::from(self.used) > u128::from(self.limit) + u128::from(MAX_DEBT) {
            return Err(CorruptState("period limiter count out of range"));
        }
        if !(0..=MAX_AT_MS).contains(&self.updated_ms) {
            return Err(CorruptState("period limiter update time out of range"));
        }
        if !(self.window_start_ms <= self.updated_ms && self.updated_ms < self.window_end_ms) {
            return Err(CorruptState("period limiter window does not contain its last update"));
        }
        let max = i128::from(MAX_DURATION_MS);
        let ahead = i128::from(self.window_end_ms) - i128::from(self.updated_ms);
        if ahead > max || i128::from(self.window_start_ms) < -max {
            return Err(CorruptState("period limiter window out of range"));
        }
        Ok(())
    }
}

impl Stored for PeriodWindow {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    fn reset_at_ms(&self) -> i64 {
        self.window_end_ms
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        let mut fields =
            vec![("limit", info_int(self.limit)), ("period_ms", info_int(self.period_ms))];
        match self.align() {
            Some(offset) => fields.extend([("align", 1), ("utc_offset_ms", offset)]),
            None => fields.push(("align", 0)),
        }
        fields.extend([
            ("used", info_int(self.used)),
            ("window_start_ms", self.window_start_ms),
            ("window_end_ms", self.window_end_ms),
        ]);
        fields
    }
}

/// Evaluates one request of `cost` units at `now_ms` against the stored window (if any).
///
/// A window that has ended counts as missing: the request opens a fresh window under
/// `params`. Otherwise, at `now' = max(now_ms, updated_ms)`, the window's count is judged
/// against `params.limit`; an admitted request stores the window as carried to `params`
/// (see the module docs). With `KEEPPERIOD`, a window in force is judged with its own period
/// and alignment ([`PeriodParams::in_force`]).
pub fn evaluate(
    stored: Option<&PeriodWindow>,
    params: &PeriodParams,
    now_ms: i64,
    cost: u64,
) -> Decided<PeriodWindow> {
    let in_force = live(stored, now_ms);
    let resolved;
    let params = if params.keep_period {
        resolved = params.in_force(in_force);
        &resolved
    } else {
        params
    };
    let (now, current, carried) = match in_force {
        None => {
            let fresh = params.fresh_window(now_ms);
            (now_ms, fresh, fresh)
        }
        Some(state) => {
            let now = now_ms.max(state.updated_ms);
            let current = Window::from_state(state);
            (now, current, current.carry(state, params, now))
        }
    };
    let used_with_cost = u128::from(current.used) + u128::from(cost);
    let allowed = cost == 0 || used_with_cost <= u128::from(params.limit);
    let stores = allowed && cost > 0;
    let used_after = if allowed { used_with_cost } else { u128::from(current.used) };
    let window_after = if stores { carried } else { current };
    let retry_after_ms = if allowed {
        0
    } else if cost > params.limit {
        -1
    } else {
        saturate_i64(elapsed_ms(now, current.end))
    };
    let reset_after_ms =
        if used_after == 0 { 0 } else { saturate_i64(elapsed_ms(now, window_after.end)) };
    let decision = Decision {
        allowed,
        limit: params.limit,
        remaining: saturate_u64(u128::from(params.limit).saturating_sub(used_after)),
        retry_after_ms,
        reset_after_ms,
    };
    let next = stores.then(|| PeriodWindow {
        limit: params.limit,
        period_ms: params.period_ms,
        align_offset_ms: params.align.unwrap_or(UNALIGNED),
        used: saturate_u64(used_after),
        window_start_ms: carried.start,
        window_end_ms: carried.end,
        updated_ms: now,
    });
    Decided { decision, next }
}

#[cfg(test)]
#[path = "period_tests.rs"]
mod tests;
