//! Leaky bucket (`RL.LEAKY`), as a queue (delay mode) or as a meter (`NODELAY`).
//!
//! A bucket of size `capacity` holds **water**: each admitted request pours in its cost, and
//! the bucket **drains** continuously at `rate / period` units per ms (the drain rate). A new
//! bucket is empty. A request of cost `c` is admitted iff `L + c ≤ capacity`, where `L` is the
//! level at that instant, and then `L += c`.
//!
//! The level is kept exactly as `level + fraction / period_ms` units, so a drain such as
//! 3 units per 7 ms loses nothing to rounding: in units of `1/period_ms` the bucket drains by
//! exactly `rate` per ms.
//!
//! * `retry_after` of a limited request = `⌈(L + c − capacity)·period/rate⌉` ms (the time
//!   until enough water has drained), -1 if `c > capacity`.
//! * `reset_after` = the time until the bucket is empty, `⌈L·period/rate⌉` ms after the
//!   request.
//! * **Delay mode** (default, `d = 0`; `DELAY d` for `0 ≤ d ≤ capacity`): the bucket is a
//!   queue and the water ahead of a request must drain before it proceeds, except for `d`
//!   units tolerated at once (nginx `limit_req` `burst`/`delay`). An admitted request gets
//!   `retry_after = ⌈max(0, L − d)·period/rate⌉` ms with `L` the level before it, so with
//!   `d = 0` the admitted requests start exactly at the drain rate. A request of cost 0 is
//!   admitted, pours nothing, and reports the delay a request would get now.
//! * **`NODELAY`**: admitted requests proceed at once (`retry_after` 0); the bucket still
//!   fills and drains, so it limits the average rate with a burst of `capacity` (a meter).
//!
//! # Shaping guarantee (delay mode)
//!
//! Under one parameter set with `DELAY d`, let request `k` be admitted at `a_k` with cost
//! `c_k` and level `L_k` before it. Its exact start is `S_k = a_k + max(0, L_k − d)·P/r`
//! and the reply tells it to start at `s_k = a_k + retry_after_k = ⌈S_k⌉`. For any admitted
//! `i < j`, with `C = c_i + … + c_(j−1)` the units that started from `S_i` up to (not
//! including) `S_j`:
//!
//! * `C ≤ d + (r/P)·(S_j − S_i)`: started work never outruns the drain by more than the `d`
//!   units tolerated (on the reported whole ms: `(C − d)·P < r·(s_j − s_i + 1)`), and starts
//!   are in admission order;
//! * with `d = 0`, while there is water ahead of every request `i+1 … j`,
//!   `S_j − S_i = C·P/r` exactly: a queue flows out at exactly the drain rate, no slower.
//!
//! (The level before `j` is at least `L_i + C − (r/P)(a_j − a_i)`, with equality while the
//! bucket never runs empty; substitute into `S_j`.) The tests check both against the model.
//!
//! # Parameter changes
//!
//! The stored bucket is first drained up to `now' = max(now, updated_ms)` under its stored
//! rate and period. Its level is then re-expressed in units of `1/period_ms` of the call's
//! period, rounded **up** (a higher level means fewer permits), and clamped to the call's
//! capacity. A change of rate alone keeps the level exactly; a change of mode (`NODELAY`,
//! `DELAY d`) keeps the level and only changes the delay reported.
//!
//! Only an admitted call (cost > 0) stores the new parameters. A limited or zero-cost call
//! stores nothing, so the stored bucket goes on draining at its own rate: such a call is
//! judged (and its `remaining` and delay computed) under the call's parameters, but its
//! `retry_after` and `reset_after` are the exact times at which the stored bucket admits the
//! same request under the call's parameters and becomes empty. Waiting exactly `retry_after`
//! is thus admitted, and one ms less is not, across a parameter change as well.

use crate::algorithms::arith::{add_ms, ceil_div, elapsed_ms, floor_div, saturate_u64};
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::state::{
    debt_fits, info_int, live, Charged, CorruptState, Refunded, Stored,
};
use crate::grammar::args::{MAX_AT_MS, MAX_COUNT, MAX_DURATION_MS, MAX_RESET_MS};
use crate::grammar::error::ArgError;

/// How an admitted request proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeakMode {
    /// Delay mode: an admitted request waits until the water ahead of it has drained down
    /// to `d` units (`DELAY d`; plain delay mode is `Delay(0)`).
    Delay(u64),
    /// Meter mode (`NODELAY`): admitted requests proceed at once.
    NoDelay,
}

/// The stored `delay` of a bucket in `NODELAY` mode. A real `DELAY d` is at most the
/// capacity (10^12), so it never equals this value.
pub const NO_DELAY: u64 = u64::MAX;

impl LeakMode {
    /// The mode as stored in [`LeakyBucket::delay`].
    fn encode(self) -> u64 {
        match self {
            LeakMode::Delay(d) => d,
            LeakMode::NoDelay => NO_DELAY,
        }
    }

    /// The mode a stored [`LeakyBucket::delay`] stands for.
    fn decode(delay: u64) -> Self {
        if delay == NO_DELAY {
            LeakMode::NoDelay
        } else {
            LeakMode::Delay(delay)
        }
    }
}

/// The parameters of one `RL.LEAKY` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyParams {
    /// Most water the bucket holds (the burst it absorbs).
    pub capacity: u64,
    /// Units drained per period.
    pub rate: u64,
    /// The drain period in ms.
    pub period_ms: u64,
    /// Delay (queue) or no-delay (meter) mode.
    pub mode: LeakMode,
}

/// A leaky bucket as stored in a key: the parameters of its last admitted call and its level
/// at `updated_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    pub capacity: u64,
    pub rate: u64,
    pub period_ms: u64,
    /// `DELAY d` (0 for plain delay mode), or [`NO_DELAY`] for `NODELAY`.
    pub delay: u64,
    /// Whole units of water in the bucket at `updated_ms`.
    pub level: u64,
    /// The part of a unit of water beyond `level`, in units of 1/`period_ms` (always
    /// `< period_ms`).
    pub fraction: u64,
    /// The instant of the last admitted call (absolute unix ms).
    pub updated_ms: i64,
}

impl LeakyParams {
    /// Validates a parameter set: counts in 1 … 10^12, a period of 1 ms … 10 years, a
    /// `DELAY` of at most the capacity, and a full drain (full to empty) within 100 years.
    ///
    /// Inline: every call builds one, and a call here would cost more than the checks.
    #[inline]
    pub fn new(capacity: u64, rate: u64, period_ms: u64, mode: LeakMode) -> Result<Self, ArgError> {
        for (name, value) in [("capacity", capacity), ("rate", rate)] {
            if !(1..=MAX_COUNT).contains(&value) {
                return Err(ArgError::Integer { name, min: 1, max: i128::from(MAX_COUNT) });
            }
        }
        if !(1..=MAX_DURATION_MS).contains(&period_ms) {
            return Err(ArgError::DurationRange {
                name: "period",
                min_ms: 1,
                max_ms: i128::from(MAX_DURATION_MS),
            });
        }
        if let LeakMode::Delay(d) = mode {
            if d > capacity {
                return Err(ArgError::Invalid(format!(
                    "DELAY must be an integer between 0 and the capacity ({capacity})"
                )));
            }
        }
        let params = LeakyParams { capacity, rate, period_ms, mode };
        // The drain time is at most capacity × period: only beyond the bound is it computed.
        if params.capacity_units() > MAX_RESET_MS && params.full_drain_ms() > MAX_RESET_MS {
            return Err(ArgError::ResetTooLong { formula: "capacity × period / rate" });
        }
        Ok(params)
    }

    /// Time for a full bucket to drain completely.
    fn full_drain_ms(&self) -> u128 {
        ceil_div(self.capacity_units(), u128::from(self.rate))
    }

    /// The capacity in units of 1/`period_ms`.
    fn capacity_units(&self) -> u128 {
        u128::from(self.capacity) * u128::from(self.period_ms)
    }
}

/// A bucket brought up to an instant, in working form: its water in units of
/// 1/`params.period_ms` of a unit (it drains by exactly `params.rate` of those per ms).
#[derive(Debug, Clone, Copy)]
struct Water {
    params: LeakyParams,
    units: u128,
    at_ms: i64,
}

impl Water {
    fn empty(params: LeakyParams, at_ms: i64) -> Self {
        Water { params, units: 0, at_ms }
    }

    fn from_bucket(b: &LeakyBucket) -> Self {
        let params = b.params();
        let units =
            (u128::from(b.level) * u128::from(b.period_ms)).saturating_add(u128::from(b.fraction));
        Water { params, units, at_ms: b.updated_ms }
    }

    /// Drains from `at_ms` to `t` (≥ `at_ms`) under this water's own parameters.
    fn advance_to(mut self, t: i64) -> Self {
        let drained = elapsed_ms(self.at_ms, t).saturating_mul(u128::from(self.params.rate));
        self.units = self.units.saturating_sub(drained);
        self.at_ms = t;
        self
    }

    /// Re-expresses the water under new parameters at its own instant, never granting more
    /// permits: the level is rounded up to the new period's fraction unit and clamped to the
    /// new capacity.
    fn convert(self, params: LeakyParams) -> Self {
        let units = if params.period_ms == self.params.period_ms {
            self.units
        } else {
            ceil_div(
                self.units.saturating_mul(u128::from(params.period_ms)),
                u128::from(self.params.period_ms),
            )
        };
        Water { params, units: units.min(params.capacity_units()), at_ms: self.at_ms }
    }

    /// Ms from `at_ms` until the water has drained down to `target` units, 0 if it has.
    fn drain_ms(&self, target: u128) -> u128 {
        ceil_div(self.units.saturating_sub(target), u128::from(self.params.rate))
    }

    fn into_bucket(self) -> LeakyBucket {
        let period = u128::from(self.params.period_ms);
        LeakyBucket {
            capacity: self.params.capacity,
            rate: self.params.rate,
            period_ms: self.params.period_ms,
            delay: self.params.mode.encode(),
            level: saturate_u64(floor_div(self.units, period)),
            fraction: saturate_u64(self.units.checked_rem(period).unwrap_or(0)),
            updated_ms: self.at_ms,
        }
    }
}

impl LeakyBucket {
    /// `RL.REFUND`: `level := max(0, level − count)` at `now'` (the water drained so far
    /// first, exactly).
    pub fn refund(&self, now_ms: i64, count: u64) -> Refunded<LeakyBucket> {
        let water = Water::from_bucket(self).advance_to(now_ms.max(self.updated_ms));
        if water.units == 0 {
            return Refunded::Nothing;
        }
        let taken = u128::from(count).saturating_mul(u128::from(self.period_ms));
        let water = Water { units: water.units.saturating_sub(taken), ..water };
        if water.units == 0 {
            Refunded::Fresh
        } else {
            Refunded::To(water.into_bucket())
        }
    }

    /// The delay mode this bucket was last admitted with.
    /// `RL.CHARGE`: pours `count` units of water at `now'` whatever the capacity: above it the
    /// bucket is in debt, and refuses every request until it has drained back below its
    /// capacity at the leak rate.
    pub fn charge(&self, now_ms: i64, count: u64) -> Charged<LeakyBucket> {
        let now = now_ms.max(self.updated_ms);
        let water = Water::from_bucket(self).advance_to(now);
        let poured = u128::from(count).saturating_mul(u128::from(self.period_ms));
        let water = Water { units: water.units.saturating_add(poured), ..water };
        let in_use = ceil_div(water.units, u128::from(self.period_ms.max(1)));
        debt_fits(water.into_bucket(), in_use, self.capacity, now)
    }

    /// Whether the bucket holds more than its capacity (only `RL.CHARGE` makes such a state).
    pub fn in_debt(&self) -> bool {
        self.level > self.capacity || (self.level == self.capacity && self.fraction != 0)
    }

    pub fn mode(&self) -> LeakMode {
        LeakMode::decode(self.delay)
    }

    /// The parameters this bucket was last admitted with.
    pub fn params(&self) -> LeakyParams {
        LeakyParams {
            capacity: self.capacity,
            rate: self.rate,
            period_ms: self.period_ms,
            mode: self.mode(),
        }
    }

    /// Checks a decoded bucket for consistency (RDB, RESTORE): every field within what an
    /// admitted call or a refund can produce (a stored bucket is never empty: an admitted call
    /// pours at least one whole unit, and a refund that empties it deletes the key).
    pub fn validate(&self) -> Result<(), CorruptState> {
        LeakyParams::new(self.capacity, self.rate, self.period_ms, self.mode())
            .map_err(|_| CorruptState("leaky bucket parameters out of range"))?;
        if self.level == 0 && self.fraction == 0 {
            return Err(CorruptState("leaky bucket level out of range"));
        }
        if self.fraction >= self.period_ms {
            return Err(CorruptState("leaky bucket fraction out of range"));
        }
        if !(0..=MAX_AT_MS).contains(&self.updated_ms) {
            return Err(CorruptState("leaky bucket update time out of range"));
        }
        let in_use = ceil_div(
            u128::from(self.level) * u128::from(self.period_ms) + u128::from(self.fraction),
            u128::from(self.period_ms),
        );
        if self.in_debt()
            && !matches!(debt_fits(*self, in_use, self.capacity, self.updated_ms), Charged::To(_))
        {
            return Err(CorruptState("leaky bucket debt out of range"));
        }
        Ok(())
    }
}

impl Stored for LeakyBucket {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    fn reset_at_ms(&self) -> i64 {
        add_ms(self.updated_ms, Water::from_bucket(self).drain_ms(0))
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        let mut fields = vec![
            ("capacity", info_int(self.capacity)),
            ("rate", info_int(self.rate)),
            ("period_ms", info_int(self.period_ms)),
        ];
        match self.mode() {
            LeakMode::NoDelay => fields.push(("nodelay", 1)),
            LeakMode::Delay(d) => fields.extend([("nodelay", 0), ("delay", info_int(d))]),
        }
        fields.extend([("level", info_int(self.level)), ("fraction", info_int(self.fraction))]);
        fields
    }
}

/// Evaluates one request of `cost` units at `now_ms` against the stored bucket (if any).
///
/// The stored bucket is first drained up to `now' = max(now_ms, updated_ms)` under its own
/// parameters, then converted to `params` (see the module docs) and judged. A bucket whose
/// reset instant has passed is empty, exactly like a missing one.
pub fn evaluate(
    stored: Option<&LeakyBucket>,
    params: &LeakyParams,
    now_ms: i64,
    cost: u64,
) -> Decided<LeakyBucket> {
    // `drained`: the stored bucket at now' under its own parameters (it keeps draining at its
    // own rate until an admitted call stores new ones); `current`: the same water under the
    // call's parameters, as the call is judged.
    let drained = match live(stored, now_ms) {
        None => Water::empty(*params, now_ms),
        Some(bucket) => Water::from_bucket(bucket).advance_to(now_ms.max(bucket.updated_ms)),
    };
    let current = drained.convert(*params);
    let period = u128::from(params.period_ms);
    let capacity = params.capacity_units();
    let poured = u128::from(cost) * period;
    let allowed = cost == 0 || current.units.saturating_add(poured) <= capacity;
    let after = if allowed {
        Water { units: current.units.saturating_add(poured), ..current }
    } else {
        current
    };
    let retry_after_ms = if allowed {
        match params.mode {
            LeakMode::NoDelay => 0,
            LeakMode::Delay(d) => saturate_i64(current.drain_ms(u128::from(d) * period)),
        }
    } else if cost > params.capacity {
        -1
    } else {
        // Admitted at t iff ⌈W(t)·P/P_old⌉ + c·P ≤ capacity·P, i.e. iff the stored water
        // W(t), draining at its own rate, is at most (capacity − c)·P_old.
        let threshold =
            u128::from(params.capacity.saturating_sub(cost)) * u128::from(drained.params.period_ms);
        saturate_i64(drained.drain_ms(threshold))
    };
    // A call that stores nothing leaves the stored bucket draining under its own parameters.
    let reset_after_ms = if allowed && cost > 0 { after.drain_ms(0) } else { drained.drain_ms(0) };
    let remaining =
        floor_div(capacity.saturating_sub(after.units), period).min(u128::from(params.capacity));
    let decision = Decision {
        allowed,
        limit: params.capacity,
        remaining: saturate_u64(remaining),
        retry_after_ms,
        reset_after_ms: saturate_i64(reset_after_ms),
    };
    let next = (allowed && cost > 0).then(|| after.into_bucket());
    Decided { decision, next }
}

#[cfg(test)]
#[path = "leaky_tests.rs"]
mod tests;
