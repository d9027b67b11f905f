//! GCRA (`CL.THROTTLE`): the generic cell rate algorithm, a drop-in replacement for
//! redis-cell's `CL.THROTTLE key max_burst count period [quantity]`.
//!
//! # The algorithm
//!
//! GCRA allows `count` requests per `period` (whole **seconds**), with a burst tolerance of
//! `max_burst` extra requests. Its terms:
//!
//! * **Emission interval** `T = period / count`: the spacing of requests in the nominal,
//!   equally spaced schedule (the time one permit takes to come back).
//! * **Delay variation tolerance** `τ = T · (max_burst + 1)`: how far ahead of that schedule
//!   a client may run — the bucket size, in time. `limit = max_burst + 1` requests fit in it.
//! * **Theoretical arrival time** (TAT): the instant the schedule would have caught up with
//!   every request admitted so far. It is the whole state of the limiter. A fresh limiter has
//!   `TAT ≤ now`.
//!
//! A request of `quantity` q at `now` moves the TAT to `new_tat = max(TAT, now) + q·T`; it is
//! admitted iff `new_tat − τ ≤ now` (a conforming request may arrive no earlier than
//! `TAT − τ`), i.e. iff the *debt* `d = max(0, TAT − now)` satisfies `d + q·T ≤ τ`. In permits,
//! `d / T` permits are in use and `limit − d / T` are available.
//!
//! Replies (the `RL.*` layout in ms, [`Decision`]; redis-cell's layout via [`throttle_reply`]):
//! * `remaining`: admitted: `⌊limit − q − d/T⌋`; limited: `⌊limit − d/T⌋` clamped at 0
//!   (what is left as the limiter stands; for a fresh key and q > limit that is `limit`).
//! * `retry_after`: admitted: 0 (`-1` in redis-cell's layout); limited: `⌈d + q·T − τ⌉ms`,
//!   or `-1` when `q > limit` (the request can never pass).
//! * `reset_after`: admitted: `⌈d + q·T⌉ms` (until the new TAT); limited: `⌈d⌉ms`.
//!
//! # Exact arithmetic
//!
//! `T = period_ms / count` is a rational number of ms; every instant the algorithm produces
//! is `now + k·period_ms / count` for integers `k`. So the TAT is stored exactly as whole ms
//! plus a fraction in units of `1/count` ms (`tat_ms + tat_frac / count`), and all
//! computations are on "scaled" integers in `1/count` ms, where `T = period_ms` and
//! `τ = limit · period_ms` are integers. No floats, no ns approximation. The key expires at
//! `⌈TAT⌉` ms, the instant the limiter is back in its initial state.
//!
//! # Time and parameter changes
//!
//! * `now' = max(now, updated_ms)`: an `AT` or clock earlier than the last admitted call counts
//!   as no time having passed (it never frees permits); every reply time is measured from
//!   `now'`.
//! * Parameters come with every call. The TAT is an absolute instant, so nothing needs
//!   bringing up to `now'`; the debt `d = TAT − now'` is then re-judged under the call's
//!   parameters. As redis-cell does, the TAT is kept where it is (the same debt in time)
//!   — **unless** that would give more permits than the stored parameters had at `now'`
//!   (a larger `max_burst`, or a slower rate, makes the same debt worth fewer permits). Then
//!   the TAT moves later, just enough that the available permits are exactly what they were
//!   (README, "Keys, time, persistence, replication": a parameter change never tops up, never
//!   gives more permits than before it). The converted TAT is rounded up to the new
//!   `1/count` ms grid (toward fewer permits).
//!
//! # Deliberate differences from redis-cell
//!
//! For the same sequence of calls (parameters, quantities, instants in whole ms) the replies
//! are redis-cell's, except:
//!
//! 1. **Rounding to seconds.** redis-cell drops the sub-millisecond part of `retry_after` and
//!    `reset_after` before rounding up to whole seconds (`⌈⌊x⌋ms / 1000⌉`), so with rates that
//!    do not divide a second evenly (e.g. 3 per second) its `retry_after` can be one second
//!    short: waiting it is refused. We round the exact rational value up:
//!    `⌈x / 1000⌉` seconds (= `⌈⌈x⌉ms / 1000⌉`). Identical whenever `T` is a whole number of ms.
//! 2. **No floating-point / ns artefacts.** redis-cell computes `T` as `f64` ns truncated to
//!    an integer, `remaining` from microseconds truncated and divided in `f64`, and the reply
//!    seconds from `f64`. Its rounded `T` makes the TAT drift (by up to 1 ns per permit),
//!    which over large bursts can move a decision across a boundary, and shifts `remaining`
//!    by one at exact boundaries. We use the exact rationals.
//! 3. **Ranges and overflow.** redis-cell accepts any `i64` (negative `quantity` refunds
//!    permits; a negative `max_burst` or a zero `count`/`period` gives nonsense or an error)
//!    and overflows `i64` ns for long periods (`T·(max_burst+1)` beyond ~292 years wraps). We
//!    accept `max_burst` 0 … 10^12, `count` 1 … 10^12, `period` 1 … 315360000 s,
//!    `quantity` 0 … 10^12, and refuse only a tolerance `τ` no Redis expiry can hold.
//! 4. **Parameter changes** that would free permits (larger `max_burst`, slower rate) move
//!    the TAT later instead of keeping it (above). Changes that tighten the limit behave as in
//!    redis-cell.
//! 5. **Time going backwards** (`AT` or clock earlier than the last admitted call): redis-cell
//!    measures the debt from the earlier `now` (a larger debt); we measure from `now'`.
//! 6. **Expiry and peeks.** The key expires at `⌈TAT⌉` ms (redis-cell: `now` + the TTL
//!    truncated to ms). `quantity 0` stores nothing (redis-cell rewrites the same TAT; the
//!    replies are the same).
//! 7. **Errors** (non-UTF-8 arguments panic redis-cell; we reply with an `ERR`), replication
//!    (rewritten with `AT`, not verbatim) and `DRYRUN`/`AT` are handled by the command shell.

use crate::algorithms::arith::{add_ms, ceil_div, div_rem, saturate_u64};
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::state::{
    debt_fits, info_int, live, Charged, CorruptState, Refunded, Stored,
};
use crate::grammar::args::{parse_count, parse_options, Keyword, Options, MAX_AT_MS, MAX_COUNT};
use crate::grammar::error::ArgError;

/// Longest `period` `CL.THROTTLE` accepts: 10 years of 365 days, in seconds.
pub const MAX_PERIOD_S: u64 = 3650 * 86_400;
/// Longest full reset `τ` of a `CL.THROTTLE` limiter: an absolute expiry `now + τ` must fit a
/// Redis expiry (`i64` unix ms) from the latest instant `AT` accepts.
pub const MAX_THROTTLE_RESET_MS: u128 = (i64::MAX - MAX_AT_MS) as u128;

/// The parameters of one `CL.THROTTLE` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraParams {
    /// Requests allowed on top of the steady rate in a burst; `limit = max_burst + 1`.
    pub max_burst: u64,
    /// Requests allowed per period (the steady rate).
    pub count: u64,
    /// The period in whole seconds (redis-cell's unit).
    pub period_s: u64,
}

/// A GCRA limiter as stored in a key: the parameters of its last admitted call and its
/// theoretical arrival time `tat_ms + tat_frac / count` (absolute unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraState {
    pub max_burst: u64,
    pub count: u64,
    pub period_s: u64,
    /// Whole ms of the theoretical arrival time (rounded down).
    pub tat_ms: i64,
    /// The fraction of a ms beyond `tat_ms`, in units of `1/count` ms (`< count`).
    pub tat_frac: u64,
    /// The instant of the last admitted call (absolute unix ms).
    pub updated_ms: i64,
}

impl GcraParams {
    /// Validates a parameter set: `max_burst` 0 … 10^12, `count` 1 … 10^12, `period` 1 s …
    /// 10 years, and a delay variation tolerance `τ = (max_burst + 1) × period / count` (the
    /// time a full burst takes to come back) that a Redis expiry can hold from any instant
    /// `AT` accepts ([`MAX_THROTTLE_RESET_MS`]): every call redis-cell accepts whose key can
    /// expire at all. (The `RL.*` commands keep their 100-year bound.)
    pub fn new(max_burst: u64, count: u64, period_s: u64) -> Result<Self, ArgError> {
        let in_range = max_burst <= MAX_COUNT
            && (1..=MAX_COUNT).contains(&count)
            && (1..=MAX_PERIOD_S).contains(&period_s);
        if !in_range {
            return Err(ArgError::Invalid("throttle parameters out of range".into()));
        }
        let params = GcraParams { max_burst, count, period_s };
        // ⌈τ / count⌉ ≤ τ: only a τ beyond the bound needs the division.
        let tolerance = params.tolerance();
        if tolerance > MAX_THROTTLE_RESET_MS
            && ceil_div(tolerance, u128::from(count)) > MAX_THROTTLE_RESET_MS
        {
            return Err(ArgError::Invalid(
                "parameters give a full reset time ((max_burst + 1) × period / count) beyond \
                 any Redis expiry"
                    .into(),
            ));
        }
        Ok(params)
    }

    /// The most requests a burst may hold: `max_burst + 1`.
    pub fn limit(&self) -> u64 {
        self.max_burst.saturating_add(1)
    }

    /// The period in ms.
    pub fn period_ms(&self) -> u64 {
        self.period_s.saturating_mul(1000)
    }

    /// The emission interval `T` in scaled units (`1/count` ms): `period_ms`.
    fn interval(&self) -> u128 {
        u128::from(self.period_ms())
    }

    /// The delay variation tolerance `τ = limit · T` in scaled units (`1/count` ms).
    fn tolerance(&self) -> u128 {
        u128::from(self.limit()).saturating_mul(self.interval())
    }

    fn scale(&self) -> u128 {
        u128::from(self.count)
    }
}

impl GcraState {
    /// `RL.REFUND`: `TAT := max(now', TAT − count·T)`, `T` the emission interval.
    pub fn refund(&self, now_ms: i64, count: u64) -> Refunded<GcraState> {
        let now = now_ms.max(self.updated_ms);
        let debt = self.debt_at(now);
        if debt == 0 {
            return Refunded::Nothing;
        }
        let params = self.params();
        let debt = debt.saturating_sub(u128::from(count).saturating_mul(params.interval()));
        if debt == 0 {
            return Refunded::Fresh;
        }
        let scale = params.scale().max(1);
        Refunded::To(GcraState {
            tat_ms: add_ms(now, div_rem(debt, scale).0),
            tat_frac: saturate_u64(div_rem(debt, scale).1),
            updated_ms: now,
            ..*self
        })
    }

    /// `RL.CHARGE`: `TAT := max(TAT, now') + count·T` whatever the tolerance `τ`: beyond it
    /// the limiter is in debt, and refuses every request until the TAT is back within `τ`
    /// of the clock (the debt paid at one permit per emission interval).
    pub fn charge(&self, now_ms: i64, count: u64) -> Charged<GcraState> {
        let now = now_ms.max(self.updated_ms);
        let params = self.params();
        let debt =
            self.debt_at(now).saturating_add(u128::from(count).saturating_mul(params.interval()));
        let scale = params.scale().max(1);
        let next = GcraState {
            tat_ms: add_ms(now, div_rem(debt, scale).0),
            tat_frac: saturate_u64(div_rem(debt, scale).1),
            updated_ms: now,
            ..*self
        };
        // Permits in use: ⌈debt / T⌉.
        debt_fits(next, ceil_div(debt, params.interval().max(1)), params.limit(), now)
    }

    /// Whether the limiter uses more than its limit as of its last update (a TAT beyond the
    /// tolerance `τ`): only `RL.CHARGE` makes such a state.
    pub fn in_debt(&self) -> bool {
        self.debt_at(self.updated_ms) > self.params().tolerance()
    }

    /// The parameters this limiter was last admitted with.
    pub fn params(&self) -> GcraParams {
        GcraParams { max_burst: self.max_burst, count: self.count, period_s: self.period_s }
    }

    /// The debt `max(0, TAT − t)` in scaled units (`1/count` ms), saturating on corrupt fields.
    fn debt_at(&self, t: i64) -> u128 {
        let whole = i128::from(self.tat_ms) - i128::from(t);
        let scaled =
            whole.saturating_mul(i128::from(self.count)).saturating_add(i128::from(self.tat_frac));
        u128::try_from(scaled).unwrap_or(0)
    }

    /// Checks a decoded limiter for consistency (RDB, RESTORE): valid parameters, a fraction
    /// below one ms, an update instant within `AT`'s range, and a TAT that an admitted call
    /// produces: after `updated_ms`, by at most the tolerance `τ` — or, in debt (`RL.CHARGE`),
    /// by at most the tolerance plus [`MAX_DEBT`](crate::algorithms::state::MAX_DEBT) intervals and
    /// [`MAX_RESET_MS`](crate::grammar::args::MAX_RESET_MS).
    pub fn validate(&self) -> Result<(), CorruptState> {
        let params = GcraParams::new(self.max_burst, self.count, self.period_s)
            .map_err(|_| CorruptState("gcra parameters out of range"))?;
        if self.tat_frac >= self.count {
            return Err(CorruptState("gcra arrival time fraction out of range"));
        }
        if !(0..=MAX_AT_MS).contains(&self.updated_ms) {
            return Err(CorruptState("gcra update time out of range"));
        }
        let debt = self.debt_at(self.updated_ms);
        if debt == 0 {
            return Err(CorruptState("gcra arrival time out of range"));
        }
        if debt > params.tolerance() {
            let in_use = ceil_div(debt, params.interval().max(1));
            if !matches!(debt_fits(*self, in_use, params.limit(), self.updated_ms), Charged::To(_))
            {
                return Err(CorruptState("gcra debt out of range"));
            }
        }
        Ok(())
    }
}

impl Stored for GcraState {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    /// `⌈TAT⌉`: the limiter is back in its initial state once the TAT is not in the future.
    fn reset_at_ms(&self) -> i64 {
        add_ms(self.tat_ms, ceil_div(u128::from(self.tat_frac), u128::from(self.count)))
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("max_burst", info_int(self.max_burst)),
            ("count", info_int(self.count)),
            ("period_ms", info_int(self.period_s.saturating_mul(1000))),
            ("tat_ms", self.tat_ms),
            ("tat_frac", info_int(self.tat_frac)),
        ]
    }
}

/// Re-expresses a debt of `debt` (in `1/old.count` ms) under `new` parameters, in
/// `1/new.count` ms: the same TAT (rounded up to the new grid), moved later if needed so that
/// the permits available, `limit − debt / period_ms`, do not exceed the old ones.
fn convert(old: &GcraParams, debt: u128, new: &GcraParams) -> u128 {
    if old == new {
        return debt;
    }
    let same_instant = ceil_div(debt.saturating_mul(new.scale()), old.scale());
    // Permits in use under `old`: debt / P_old. Under `new` they must be at least
    // L_new − (L_old − debt / P_old), i.e. a debt of P_new · (L_new·P_old + debt − L_old·P_old) / P_old.
    let (p_old, p_new) = (old.interval(), new.interval());
    let plus = u128::from(new.limit()).saturating_mul(p_old).saturating_add(debt);
    let minus = u128::from(old.limit()).saturating_mul(p_old);
    let same_permits =
        plus.checked_sub(minus).map_or(0, |excess| ceil_div(excess.saturating_mul(p_new), p_old));
    same_instant.max(same_permits)
}

/// Evaluates one request of `quantity` at `now_ms` against the stored limiter (if any),
/// filling the `RL.*` layout in ms (what `RL.PEEK` shows); [`throttle_reply`] turns it into
/// redis-cell's reply.
///
/// A stored limiter whose TAT has passed counts as missing. Otherwise its debt at
/// `now' = max(now_ms, updated_ms)` is converted to `params` (see the module docs) and judged.
pub fn evaluate(
    stored: Option<&GcraState>,
    params: &GcraParams,
    now_ms: i64,
    quantity: u64,
) -> Decided<GcraState> {
    let (now, debt) = match live(stored, now_ms) {
        None => (now_ms, 0),
        Some(state) => {
            let now = now_ms.max(state.updated_ms);
            (now, convert(&state.params(), state.debt_at(now), params))
        }
    };
    let interval = params.interval();
    let tolerance = params.tolerance();
    let scale = params.scale();
    let need = debt.saturating_add(u128::from(quantity).saturating_mul(interval));
    let allowed = need <= tolerance;
    let (after, retry_after_ms) = if allowed {
        (need, 0)
    } else if quantity > params.limit() {
        (debt, -1)
    } else {
        (debt, saturate_i64(ceil_div(need.saturating_sub(tolerance), scale)))
    };
    let decision = Decision {
        allowed,
        limit: params.limit(),
        remaining: saturate_u64(div_rem(tolerance.saturating_sub(after), interval).0),
        retry_after_ms,
        reset_after_ms: saturate_i64(ceil_div(after, scale)),
    };
    let next = (allowed && quantity > 0).then(|| GcraState {
        max_burst: params.max_burst,
        count: params.count,
        period_s: params.period_s,
        tat_ms: add_ms(now, div_rem(after, scale).0),
        tat_frac: saturate_u64(div_rem(after, scale).1),
        updated_ms: now,
    });
    Decided { decision, next }
}

/// Converts a decision to redis-cell's reply: `[limited (0|1), limit, remaining,
/// retry_after_s, reset_after_s]`, where `retry_after_s` is -1 when admitted or when the
/// quantity exceeds the limit, and times are whole seconds rounded up. Since the decision's
/// times are the exact values rounded up to ms, `⌈⌈x⌉ms / 1000⌉ = ⌈x / 1000⌉` is exact.
pub fn throttle_reply(d: &Decision) -> [i64; 5] {
    let seconds = |ms: i64| saturate_i64(ceil_div(u128::try_from(ms).unwrap_or(0), 1000));
    let retry = if d.allowed || d.retry_after_ms < 0 { -1 } else { seconds(d.retry_after_ms) };
    [
        i64::from(!d.allowed),
        saturate_i64(u128::from(d.limit)),
        saturate_i64(u128::from(d.remaining)),
        retry,
        seconds(d.reset_after_ms),
    ]
}

/// The arguments of `CL.THROTTLE` after the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleArgs {
    pub params: GcraParams,
    /// `quantity` (default 1; 0 peeks).
    pub quantity: u64,
    /// `DRYRUN` and `AT` (this module's extensions); `cost` is left at its default.
    pub options: Options,
}

/// Parses `max_burst count period [quantity] [DRYRUN] [AT ms]` (everything after the key).
/// `period` is a bare integer number of seconds, as in redis-cell. A fourth argument that is
/// an option keyword starts the options; anything else must be the quantity.
pub fn parse_throttle_args(args: &[&[u8]]) -> Result<ThrottleArgs, ArgError> {
    let (positional, rest) = match args {
        [burst, count, period, rest @ ..] => ([*burst, *count, *period], rest),
        _ => return Err(ArgError::WrongArity),
    };
    let [burst, count, period] = positional;
    let max_burst = parse_count("max_burst", burst, 0, MAX_COUNT)?;
    let count = parse_count("count", count, 1, MAX_COUNT)?;
    let period_s = parse_count("period", period, 1, MAX_PERIOD_S)?;
    let (quantity, rest) = match rest.split_first() {
        Some((first, tail)) if Keyword::recognize(first).is_none() => {
            (parse_count("quantity", first, 0, MAX_COUNT)?, tail)
        }
        _ => (1, rest),
    };
    let options = parse_options(rest, &[Keyword::DryRun, Keyword::At, Keyword::Deadline])?;
    let params = GcraParams::new(max_burst, count, period_s)?;
    Ok(ThrottleArgs { params, quantity, options })
}

#[cfg(test)]
#[path = "gcra_tests.rs"]
mod tests;
