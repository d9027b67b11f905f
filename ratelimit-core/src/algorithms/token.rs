//! Token bucket (`RL.TOKEN`), with lazy refill.
//!
//! A bucket holds up to `capacity` tokens and starts full. Every `period` it gains `rate`
//! tokens, never more than `capacity`. A request of cost `c` is admitted iff the bucket holds
//! at least `c` tokens, and then takes them.
//!
//! * **Smooth refill** (default): tokens flow in continuously at `rate / period` tokens per ms.
//!   The level is kept exactly as `tokens + fraction / period_ms`, so rates such as 3 tokens per
//!   7 ms lose nothing to rounding.
//! * **Step refill** (`STEP`): `rate` whole tokens arrive at once at each instant
//!   `origin + k·period` (k = 1, 2, …), where `origin` is the first admitted call of a fresh
//!   bucket. A bucket that has refilled to full is back in its initial state, so the next
//!   request starts a new grid.
//!
//! Nothing is stored for time passing: the refill is computed from `updated_ms` whenever the
//! bucket is next used.
//!
//! **Debt** (`RL.CHARGE`): a charge may take the bucket below empty (negative `tokens`). The
//! refill then pays the debt before it adds tokens, so every request is refused until the
//! debt is paid and the key expires only when the bucket is full again. Buckets in debt take
//! a cold path (`Debt`, `evaluate_in_debt`): the hot path never sees a negative level.

use crate::algorithms::arith::{ceil_div, div_rem, elapsed_ms, floor_div, saturate_u64};
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::state::{
    debt_fits, info_int, live, Charged, CorruptState, Refunded, Stored, MAX_DEBT,
};
use crate::grammar::args::{MAX_COUNT, MAX_DURATION_MS, MAX_RESET_MS};
use crate::grammar::error::ArgError;

/// The parameters of one `RL.TOKEN` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenParams {
    /// Most tokens the bucket holds (its burst size).
    pub capacity: u64,
    /// Tokens added per period.
    pub rate: u64,
    /// The refill period in ms.
    pub period_ms: u64,
    /// Step refill (`STEP`) instead of smooth refill.
    pub step: bool,
}

/// How the stored bucket refills, with the state that refill needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refill {
    /// Continuous refill; `fraction` is the part of a token accrued beyond `tokens`, in units
    /// of 1/`period_ms` of a token (always `< period_ms`).
    Smooth { fraction: u64 },
    /// Refill of `rate` whole tokens at each `origin_ms + k·period_ms`.
    Step { origin_ms: i64 },
}

/// A token bucket as stored in a key: the parameters of its last admitted call and its level
/// at `updated_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    pub capacity: u64,
    pub rate: u64,
    pub period_ms: u64,
    /// Whole tokens in the bucket at `updated_ms`; below zero only in debt (`RL.CHARGE`): the
    /// level is then `tokens + fraction / period_ms` (smooth refill: the fraction still counts
    /// up from there), and the bucket refuses everything until the refill has paid it back.
    pub tokens: i64,
    pub refill: Refill,
    /// The instant of the last admitted call (absolute unix ms).
    pub updated_ms: i64,
}

impl TokenParams {
    /// Validates a parameter set: counts in 1 … 10^12, a period of 1 ms … 10 years, and a full
    /// refill (empty to full) within 100 years.
    ///
    /// Inline: every call builds one, and a call here would cost more than the checks.
    #[inline]
    pub fn new(capacity: u64, rate: u64, period_ms: u64, step: bool) -> Result<Self, ArgError> {
        let params = TokenParams { capacity, rate, period_ms, step };
        let in_range = (1..=MAX_COUNT).contains(&capacity)
            && (1..=MAX_COUNT).contains(&rate)
            && (1..=MAX_DURATION_MS).contains(&period_ms);
        if !in_range {
            return Err(ArgError::Invalid("token bucket parameters out of range".into()));
        }
        // The refill time is at most capacity × period: only beyond the bound is it computed.
        let (capacity, _, period) = params.wide();
        if capacity * period > MAX_RESET_MS && params.full_refill_ms() > MAX_RESET_MS {
            return Err(ArgError::ResetTooLong {
                formula: if step {
                    "⌈capacity / rate⌉ × period"
                } else {
                    "capacity × period / rate"
                },
            });
        }
        Ok(params)
    }

    /// Time for an empty bucket to refill completely.
    fn full_refill_ms(&self) -> u128 {
        let (capacity, rate, period) = self.wide();
        if self.step {
            ceil_div(capacity, rate).saturating_mul(period)
        } else {
            ceil_div(capacity * period, rate)
        }
    }

    fn wide(&self) -> (u128, u128, u128) {
        (u128::from(self.capacity), u128::from(self.rate), u128::from(self.period_ms))
    }

    /// Level units per whole token: `period_ms` for smooth refill (levels are exact fractions
    /// with that denominator), 1 for step refill (levels are whole tokens).
    fn scale(&self) -> u128 {
        if self.step {
            1
        } else {
            u128::from(self.period_ms)
        }
    }
}

/// A bucket brought up to an instant, in working form: its level in `params.scale()` units.
#[derive(Debug, Clone, Copy)]
struct Level {
    params: TokenParams,
    level: u128,
    /// Grid origin (step refill only).
    origin_ms: i64,
    at_ms: i64,
}

impl Level {
    fn full(params: TokenParams, at_ms: i64) -> Self {
        Level {
            params,
            level: u128::from(params.capacity) * params.scale(),
            origin_ms: at_ms,
            at_ms,
        }
    }

    fn from_bucket(b: &TokenBucket) -> Self {
        let step = matches!(b.refill, Refill::Step { .. });
        let params =
            TokenParams { capacity: b.capacity, rate: b.rate, period_ms: b.period_ms, step };
        let (level, origin_ms) = match b.refill {
            Refill::Smooth { fraction } => (
                u128::from(b.tokens.unsigned_abs()) * params.scale() + u128::from(fraction),
                b.updated_ms,
            ),
            Refill::Step { origin_ms } => (u128::from(b.tokens.unsigned_abs()), origin_ms),
        };
        Level { params, level, origin_ms, at_ms: b.updated_ms }
    }

    fn capacity_level(&self) -> u128 {
        u128::from(self.params.capacity) * self.params.scale()
    }

    /// Periods completed since the grid origin at `t` (step refill).
    fn periods_at(&self, t: i64) -> u128 {
        div_rem(elapsed_ms(self.origin_ms, t), u128::from(self.params.period_ms)).0
    }

    /// Refills from `at_ms` to `t` (≥ `at_ms`) under this level's own parameters.
    fn advance_to(mut self, t: i64) -> Self {
        let gained = self.gained_by(t);
        self.level = self.level.saturating_add(gained).min(self.capacity_level());
        self.at_ms = t;
        self
    }

    /// Units the refill adds from `at_ms` to `t` (uncapped).
    fn gained_by(&self, t: i64) -> u128 {
        let (_, rate, _) = self.params.wide();
        if self.params.step {
            (self.periods_at(t) - self.periods_at(self.at_ms)) * rate
        } else {
            elapsed_ms(self.at_ms, t) * rate
        }
    }

    /// Re-expresses the level under new parameters at its own instant, never granting more
    /// whole permits than before: fractions round down, the level is clamped to the new
    /// capacity (no top-up), and a step grid restarts at this instant when the period changes.
    fn convert(self, params: TokenParams) -> Self {
        let old = self.params;
        let whole_tokens = div_rem(self.level, old.scale()).0;
        let (level, origin_ms) = match (old.step, params.step) {
            (false, false) => (
                floor_div(self.level * u128::from(params.period_ms), u128::from(old.period_ms)),
                self.at_ms,
            ),
            (false, true) => (whole_tokens, self.at_ms),
            (true, false) => (whole_tokens * params.scale(), self.at_ms),
            (true, true) if old.period_ms == params.period_ms => (self.level, self.origin_ms),
            (true, true) => (self.level, self.at_ms),
        };
        let converted = Level { params, level, origin_ms, at_ms: self.at_ms };
        Level { level: level.min(converted.capacity_level()), ..converted }
    }

    /// Ms from `at_ms` until the level reaches `target` (in level units), or 0 if it has.
    fn time_until(&self, target: u128) -> u128 {
        let (_, rate, period) = self.params.wide();
        if self.level >= target {
            return 0;
        }
        if self.params.step {
            let steps = ceil_div(target - self.level, rate);
            let boundary = (self.periods_at(self.at_ms) + steps) * period;
            boundary.saturating_sub(elapsed_ms(self.origin_ms, self.at_ms))
        } else {
            ceil_div(target - self.level, rate)
        }
    }

    /// The bucket `debt` units below empty at `at_ms` (an empty level), as stored: tokens
    /// rounded down below zero, the smooth fraction counting up from there.
    fn into_bucket_in_debt(self, debt: u128) -> TokenBucket {
        let scale = self.params.scale();
        let whole = ceil_div(debt, scale);
        let refill = if self.params.step {
            Refill::Step { origin_ms: self.origin_ms }
        } else {
            Refill::Smooth { fraction: saturate_u64(whole * scale - debt) }
        };
        TokenBucket {
            tokens: -i64::try_from(whole).unwrap_or(i64::MAX),
            refill,
            ..Level { level: 0, ..self }.into_bucket()
        }
    }

    fn into_bucket(self) -> TokenBucket {
        let scale = self.params.scale();
        let refill = if self.params.step {
            Refill::Step { origin_ms: self.origin_ms }
        } else {
            Refill::Smooth { fraction: saturate_u64(div_rem(self.level, scale).1) }
        };
        TokenBucket {
            capacity: self.params.capacity,
            rate: self.params.rate,
            period_ms: self.params.period_ms,
            tokens: i64::try_from(div_rem(self.level, scale).0).unwrap_or(i64::MAX),
            refill,
            updated_ms: self.at_ms,
        }
    }
}

/// A bucket below empty brought up to an instant: an empty level at that instant (its
/// parameters, grid origin and instant) and the units still owed.
#[derive(Debug, Clone, Copy)]
struct Debt {
    empty: Level,
    owed: u128,
}

impl Debt {
    /// The stored bucket in debt (`tokens < 0`) at `t ≥ updated_ms`: still in debt, or back
    /// to a level once the refill has paid it.
    fn bring(b: &TokenBucket, t: i64) -> Result<Debt, Level> {
        let empty = Level { level: 0, ..Level::from_bucket(b) };
        let scale = empty.params.scale();
        let fraction = match b.refill {
            Refill::Smooth { fraction } => u128::from(fraction),
            Refill::Step { .. } => 0,
        };
        let owed = (u128::from(b.tokens.unsigned_abs()) * scale).saturating_sub(fraction);
        let gained = empty.gained_by(t);
        let empty = Level { at_ms: t, ..empty };
        if gained >= owed {
            let level = (gained - owed).min(empty.capacity_level());
            Err(Level { level, ..empty })
        } else {
            Ok(Debt { empty, owed: owed - gained })
        }
    }

    /// Tokens in use, for the bounds of a debt.
    fn in_use(&self) -> u128 {
        let scale = self.empty.params.scale();
        u128::from(self.empty.params.capacity).saturating_add(ceil_div(self.owed, scale))
    }

    /// The debt under other parameters (a call that changes them), rounded toward more debt.
    fn convert(self, params: TokenParams) -> Debt {
        let old = self.empty.params;
        let owed = match (old.step, params.step) {
            (false, false) => ceil_div(
                self.owed.saturating_mul(u128::from(params.period_ms)),
                u128::from(old.period_ms),
            ),
            (false, true) => ceil_div(self.owed, old.scale()),
            (true, false) => self.owed.saturating_mul(params.scale()),
            (true, true) => self.owed,
        };
        Debt { empty: self.empty.convert(params), owed }
    }

    /// The wait until the level reaches `target` units above empty.
    fn time_until(&self, target: u128) -> u128 {
        self.empty.time_until(target.saturating_add(self.owed))
    }
}

/// A call on a bucket in debt (the cold path of [`evaluate`]): refused, even at `COST 0`, with
/// the exact wait; or judged as usual once the refill has paid the debt.
#[cold]
fn evaluate_in_debt(
    bucket: &TokenBucket,
    params: &TokenParams,
    now_ms: i64,
    cost: u64,
) -> Decided<TokenBucket> {
    let now = now_ms.max(bucket.updated_ms);
    let debt = match Debt::bring(bucket, now) {
        Err(level) => return judge_level(level.convert(*params), params, cost),
        Ok(debt) => debt.convert(*params),
    };
    let needed = u128::from(cost) * params.scale();
    let retry_after_ms =
        if cost > params.capacity { -1 } else { saturate_i64(debt.time_until(needed)) };
    let decision = Decision {
        allowed: false,
        limit: params.capacity,
        remaining: 0,
        retry_after_ms,
        reset_after_ms: saturate_i64(debt.time_until(debt.empty.capacity_level())),
    };
    Decided { decision, next: None }
}

impl TokenBucket {
    /// `RL.CHARGE`: takes `count` tokens at `now'` whatever the level: below empty the bucket
    /// is in debt (negative `tokens`), refuses every request until the refill has paid it back,
    /// and is full again only after that.
    pub fn charge(&self, now_ms: i64, count: u64) -> Charged<TokenBucket> {
        let now = now_ms.max(self.updated_ms);
        let brought = if self.in_debt() {
            Debt::bring(self, now)
        } else {
            Err(Level::from_bucket(self).advance_to(now))
        };
        let units = u128::from(count).saturating_mul(self.params().scale());
        let debt = match brought {
            Err(level) if level.level >= units => {
                let next = Level { level: level.level - units, ..level };
                let in_use = u128::from(self.capacity)
                    .saturating_sub(div_rem(next.level, next.params.scale()).0);
                return debt_fits(next.into_bucket(), in_use, self.capacity, now);
            }
            Err(level) => Debt { empty: Level { level: 0, ..level }, owed: units - level.level },
            Ok(debt) => Debt { owed: debt.owed.saturating_add(units), ..debt },
        };
        debt_fits(debt.empty.into_bucket_in_debt(debt.owed), debt.in_use(), self.capacity, now)
    }

    /// Whether the bucket is below empty (only `RL.CHARGE` makes such a state).
    pub fn in_debt(&self) -> bool {
        self.tokens < 0
    }

    /// `RL.REFUND`: `tokens := min(capacity, tokens + count)` at `now'`, exactly (the
    /// fraction of a token is kept).
    pub fn refund(&self, now_ms: i64, count: u64) -> Refunded<TokenBucket> {
        let now = now_ms.max(self.updated_ms);
        let level = if self.in_debt() {
            match Debt::bring(self, now) {
                Err(level) => level,
                Ok(debt) => {
                    let units = u128::from(count).saturating_mul(self.params().scale());
                    if units < debt.owed {
                        return Refunded::To(debt.empty.into_bucket_in_debt(debt.owed - units));
                    }
                    let full = debt.empty.capacity_level();
                    let level = (units - debt.owed).min(full);
                    return if level >= full {
                        Refunded::Fresh
                    } else {
                        Refunded::To(Level { level, ..debt.empty }.into_bucket())
                    };
                }
            }
        } else {
            Level::from_bucket(self).advance_to(now)
        };
        let full = level.capacity_level();
        if level.level >= full {
            return Refunded::Nothing;
        }
        let added = u128::from(count).saturating_mul(level.params.scale());
        let level = Level { level: level.level.saturating_add(added).min(full), ..level };
        if level.level >= full {
            Refunded::Fresh
        } else {
            Refunded::To(level.into_bucket())
        }
    }

    /// The parameters this bucket was last admitted with.
    pub fn params(&self) -> TokenParams {
        Level::from_bucket(self).params
    }

    /// Checks a decoded bucket for consistency (RDB, RESTORE): every field within what an
    /// admitted call can produce.
    pub fn validate(&self) -> Result<(), CorruptState> {
        let params = TokenParams::new(
            self.capacity,
            self.rate,
            self.period_ms,
            matches!(self.refill, Refill::Step { .. }),
        )
        .map_err(|_| CorruptState("token bucket parameters out of range"))?;
        if i128::from(self.tokens) > i128::from(params.capacity) {
            return Err(CorruptState("token bucket holds more than its capacity"));
        }
        if i128::from(self.tokens) < -i128::from(MAX_DEBT) {
            return Err(CorruptState("token bucket debt out of range"));
        }
        match self.refill {
            Refill::Smooth { fraction } => {
                let full = i128::from(self.tokens) == i128::from(self.capacity);
                if fraction >= self.period_ms || (full && fraction != 0) {
                    return Err(CorruptState("token bucket fraction out of range"));
                }
            }
            Refill::Step { origin_ms } => {
                if origin_ms > self.updated_ms || origin_ms < 0 {
                    return Err(CorruptState("token bucket grid origin after its update"));
                }
            }
        }
        if !(0..=crate::grammar::args::MAX_AT_MS).contains(&self.updated_ms) {
            return Err(CorruptState("token bucket update time out of range"));
        }
        if self.in_debt() {
            let in_use = Debt::bring(self, self.updated_ms).map_or(0, |d| d.in_use());
            let fits = debt_fits(*self, in_use, self.capacity, self.updated_ms);
            if !matches!(fits, Charged::To(_)) {
                return Err(CorruptState("token bucket debt out of range"));
            }
        }
        Ok(())
    }
}

impl Stored for TokenBucket {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    fn reset_at_ms(&self) -> i64 {
        if self.in_debt() {
            let wait = Debt::bring(self, self.updated_ms)
                .map_or(0, |d| d.time_until(d.empty.capacity_level()));
            return crate::algorithms::arith::add_ms(self.updated_ms, wait);
        }
        let level = Level::from_bucket(self);
        let wait = level.time_until(level.capacity_level());
        crate::algorithms::arith::add_ms(self.updated_ms, wait)
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        let mut fields = vec![
            ("capacity", info_int(self.capacity)),
            ("rate", info_int(self.rate)),
            ("period_ms", info_int(self.period_ms)),
        ];
        match self.refill {
            Refill::Smooth { fraction } => fields.extend([
                ("step", 0),
                ("tokens", self.tokens),
                ("fraction", info_int(fraction)),
            ]),
            Refill::Step { origin_ms } => {
                fields.extend([("step", 1), ("tokens", self.tokens), ("origin_ms", origin_ms)])
            }
        }
        fields
    }
}

/// Evaluates one request of `cost` tokens at `now_ms` against the stored bucket (if any).
///
/// The stored bucket is first refilled up to `now' = max(now_ms, updated_ms)` under its own
/// parameters, then converted to `params` (see `Level::convert`) and judged. A bucket whose
/// reset instant has passed counts as missing, so it starts over full under `params`.
pub fn evaluate(
    stored: Option<&TokenBucket>,
    params: &TokenParams,
    now_ms: i64,
    cost: u64,
) -> Decided<TokenBucket> {
    let current = match live(stored, now_ms) {
        None => Level::full(*params, now_ms),
        Some(bucket) if bucket.in_debt() => return evaluate_in_debt(bucket, params, now_ms, cost),
        Some(bucket) => {
            let now = now_ms.max(bucket.updated_ms);
            Level::from_bucket(bucket).advance_to(now).convert(*params)
        }
    };
    judge_level(current, params, cost)
}

/// Judges a request of `cost` against the bucket's level under the call's parameters.
#[inline(always)]
fn judge_level(current: Level, params: &TokenParams, cost: u64) -> Decided<TokenBucket> {
    let scale = params.scale();
    let needed = u128::from(cost) * scale;
    let allowed = current.level >= needed;
    let after = if allowed { Level { level: current.level - needed, ..current } } else { current };
    let retry_after_ms = if allowed {
        0
    } else if cost > params.capacity {
        -1
    } else {
        saturate_i64(current.time_until(needed))
    };
    let decision = Decision {
        allowed,
        limit: params.capacity,
        remaining: saturate_u64(div_rem(after.level, scale).0),
        retry_after_ms,
        reset_after_ms: saturate_i64(after.time_until(after.capacity_level())),
    };
    let next = (allowed && cost > 0).then(|| after.into_bucket());
    Decided { decision, next }
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
