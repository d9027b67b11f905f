//! The stored limiter: one value per key, whatever the algorithm, and the rules every
//! algorithm shares (expired state counts as missing; calls that change parameters but store
//! nothing answer for the limiter that stays stored).

use crate::algorithms::arith::elapsed_ms;
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::gcra::{self, GcraParams, GcraState};
use crate::algorithms::leaky::{self, LeakyBucket, LeakyParams};
use crate::algorithms::lease::LeaseState;
use crate::algorithms::period::{self, PeriodParams, PeriodWindow};
use crate::algorithms::slide::{self, SlideParams, SlideState};
use crate::algorithms::state::{live, Charged, CorruptState, Refunded, Stored};
use crate::algorithms::token::{self, TokenBucket, TokenParams};

/// The algorithms, by the names users see in errors and `RL.INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Token,
    Period,
    Slide,
    Leaky,
    Gcra,
    /// Concurrency leases (`RL.ACQUIRE`); not a [`Variant`]: it takes an id, not a cost.
    Lease,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Token => "token",
            Algorithm::Period => "period",
            Algorithm::Slide => "slide",
            Algorithm::Leaky => "leaky",
            Algorithm::Gcra => "gcra",
            Algorithm::Lease => "lease",
        }
    }
}

/// One algorithm's stored state: how it sits in a [`Limiter`], its parameters, and its pure
/// evaluation function.
pub trait Variant: Stored + Sized {
    const ALGORITHM: Algorithm;
    type Params: PartialEq;
    /// This algorithm's state, if `limiter` holds one.
    fn from_limiter(limiter: &Limiter) -> Option<&Self>;
    fn from_limiter_mut(limiter: &mut Limiter) -> Option<&mut Self>;
    fn into_limiter(self) -> Limiter;
    /// The parameters of the last admitted call.
    fn params(&self) -> Self::Params;
    /// Whether a call with `params` judges this (live) state under other parameters than the
    /// stored ones — a parameter change, whose limited answers [`judge`] searches for.
    fn judged_otherwise(&self, params: &Self::Params) -> bool {
        self.params() != *params
    }
    /// Checks the state is one admitted calls can produce.
    fn validate(&self) -> Result<(), CorruptState>;
    /// `RL.REFUND`: gives `count` permits back at `now' = max(now_ms, updated_ms)` under the
    /// stored parameters, never beyond a fresh limiter (see each module).
    fn refund(&self, now_ms: i64, count: u64) -> Refunded<Self>;
    /// `RL.CHARGE`: takes `count` permits at `now' = max(now_ms, updated_ms)` under the stored
    /// parameters whatever the limit, leaving the limiter in debt past it (see each module);
    /// [`Charged::NoDebt`] for an algorithm that takes no debt.
    fn charge(&self, _now_ms: i64, _count: u64) -> Charged<Self> {
        Charged::NoDebt
    }
    /// The algorithm itself (see each module).
    fn evaluate(
        stored: Option<&Self>,
        params: &Self::Params,
        now_ms: i64,
        cost: u64,
    ) -> Decided<Self>;
    /// Evaluates against this live stored state, updating it in place when admitted (and
    /// `commit`), for algorithms whose state is costly to copy. Returns the decision and
    /// whether the state changed, or `None` to use [`judge`] instead.
    fn evaluate_in_place(
        &mut self,
        _params: &Self::Params,
        _now_ms: i64,
        _cost: u64,
        _commit: bool,
    ) -> Option<(Decision, bool)> {
        None
    }
}

macro_rules! variant {
    ($state:ty, $params:ty, $variant:ident, $module:ident $(, $in_place:item)* $(; $own:item)*) => {
        impl Variant for $state {
            const ALGORITHM: Algorithm = Algorithm::$variant;
            type Params = $params;
            fn from_limiter(limiter: &Limiter) -> Option<&Self> {
                match limiter {
                    Limiter::$variant(s) => Some(s),
                    _ => None,
                }
            }
            fn from_limiter_mut(limiter: &mut Limiter) -> Option<&mut Self> {
                match limiter {
                    Limiter::$variant(s) => Some(s),
                    _ => None,
                }
            }
            fn into_limiter(self) -> Limiter {
                Limiter::$variant(self)
            }
            fn params(&self) -> $params {
                <$state>::params(self)
            }
            fn validate(&self) -> Result<(), CorruptState> {
                <$state>::validate(self)
            }
            fn refund(&self, now_ms: i64, count: u64) -> Refunded<Self> {
                <$state>::refund(self, now_ms, count)
            }
            fn evaluate(
                stored: Option<&Self>,
                params: &$params,
                now_ms: i64,
                cost: u64,
            ) -> Decided<Self> {
                $module::evaluate(stored, params, now_ms, cost)
            }
            $($in_place)*
            $($own)*
        }
    };
}

variant!(
    TokenBucket,
    TokenParams,
    Token,
    token;
    /// Debt: see the module's `charge`.
    fn charge(&self, now_ms: i64, count: u64) -> Charged<Self> {
        <TokenBucket>::charge(self, now_ms, count)
    }
);
variant!(
    PeriodWindow,
    PeriodParams,
    Period,
    period;
    /// `KEEPPERIOD` judges a window in force with its own period: only the limit can differ.
    fn judged_otherwise(&self, params: &PeriodParams) -> bool {
        self.params() != params.in_force(Some(self))
    };
    /// Debt: see the module's `charge`.
    fn charge(&self, now_ms: i64, count: u64) -> Charged<Self> {
        <PeriodWindow>::charge(self, now_ms, count)
    }
);
variant!(
    LeakyBucket,
    LeakyParams,
    Leaky,
    leaky;
    /// Debt: see the module's `charge`.
    fn charge(&self, now_ms: i64, count: u64) -> Charged<Self> {
        <LeakyBucket>::charge(self, now_ms, count)
    }
);
variant!(
    GcraState,
    GcraParams,
    Gcra,
    gcra;
    /// Debt: see the module's `charge`.
    fn charge(&self, now_ms: i64, count: u64) -> Charged<Self> {
        <GcraState>::charge(self, now_ms, count)
    }
);
variant!(
    SlideState,
    SlideParams,
    Slide,
    slide,
    /// With unchanged parameters the log is judged and appended to in place (no copy).
    fn evaluate_in_place(
        &mut self,
        params: &SlideParams,
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Option<(Decision, bool)> {
        slide::evaluate_in_place(self, params, now_ms, cost, commit)
    }
);

/// Evaluates a request the way a command does.
///
/// When the call brings parameters other than the stored ones and stores nothing (limited,
/// `COST 0`), the key keeps its stored limiter, which goes on under its stored parameters.
/// The reply then answers for that limiter: `reset_after_ms` is its own reset instant (the
/// key's expiry), and `retry_after_ms` is the first instant at which the same call would
/// really be admitted — found by bisection over the algorithm itself, which is monotone in
/// time (waiting never removes permits). With unchanged parameters this is exactly what the
/// algorithm computes, so nothing is searched on the hot path.
pub fn judge<V: Variant>(
    stored: Option<&V>,
    params: &V::Params,
    now_ms: i64,
    cost: u64,
) -> Decided<V> {
    let mut evaluation = V::evaluate(stored, params, now_ms, cost);
    // Checked cheapest first: most calls store something or keep their parameters.
    if evaluation.next.is_some() {
        return evaluation;
    }
    let Some(held) = stored.filter(|s| s.judged_otherwise(params)) else {
        return evaluation;
    };
    let Some(held) = live(Some(held), now_ms) else {
        return evaluation;
    };
    let now = now_ms.max(held.updated_ms());
    let reset_at = held.reset_at_ms();
    evaluation.decision.reset_after_ms = saturate_i64(elapsed_ms(now, reset_at));
    if !evaluation.decision.allowed && evaluation.decision.retry_after_ms >= 0 {
        let admitted = |t: i64| V::evaluate(stored, params, t, cost).decision.allowed;
        // Not admitted at `now`; admitted at the reset instant (a fresh limiter under the
        // call's parameters admits any cost within its limit).
        let (mut lo, mut hi) = (now, reset_at);
        if admitted(hi) {
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if admitted(mid) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            evaluation.decision.retry_after_ms = saturate_i64(elapsed_ms(now, hi));
        } else {
            evaluation.decision.retry_after_ms = -1;
        }
    }
    evaluation
}

/// The value stored in a limiter key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limiter {
    Token(TokenBucket),
    Period(PeriodWindow),
    Slide(SlideState),
    Leaky(LeakyBucket),
    Gcra(GcraState),
    Lease(LeaseState),
}

impl Limiter {
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Limiter::Token(_) => Algorithm::Token,
            Limiter::Period(_) => Algorithm::Period,
            Limiter::Slide(_) => Algorithm::Slide,
            Limiter::Leaky(_) => Algorithm::Leaky,
            Limiter::Gcra(_) => Algorithm::Gcra,
            Limiter::Lease(_) => Algorithm::Lease,
        }
    }

    pub fn validate(&self) -> Result<(), CorruptState> {
        match self {
            Limiter::Token(s) => s.validate(),
            Limiter::Period(s) => s.validate(),
            Limiter::Slide(s) => s.validate(),
            Limiter::Leaky(s) => s.validate(),
            Limiter::Gcra(s) => s.validate(),
            Limiter::Lease(s) => s.validate(),
        }
    }

    fn stored(&self) -> &dyn Stored {
        match self {
            Limiter::Token(s) => s,
            Limiter::Period(s) => s,
            Limiter::Slide(s) => s,
            Limiter::Leaky(s) => s,
            Limiter::Gcra(s) => s,
            Limiter::Lease(s) => s,
        }
    }

    /// Whether the limiter uses more than its limit: a debt only `RL.CHARGE` makes (and only
    /// token buckets, GCRA, leaky buckets and fixed windows take).
    pub fn in_debt(&self) -> bool {
        match self {
            Limiter::Token(s) => s.in_debt(),
            Limiter::Period(s) => s.in_debt(),
            Limiter::Leaky(s) => s.in_debt(),
            Limiter::Gcra(s) => s.in_debt(),
            Limiter::Slide(_) | Limiter::Lease(_) => false,
        }
    }

    pub fn updated_ms(&self) -> i64 {
        self.stored().updated_ms()
    }

    pub fn reset_at_ms(&self) -> i64 {
        self.stored().reset_at_ms()
    }

    /// The reply a `DRYRUN COST 1` request with the stored parameters would get at `now_ms`
    /// (what `RL.PEEK` shows), in the `RL.*` layout for every algorithm (for leases: a
    /// `DRYRUN` acquisition without `ID`).
    pub fn peek(&self, now_ms: i64) -> Decision {
        fn own<V: Variant>(s: &V, now_ms: i64) -> Decision {
            V::evaluate(Some(s), &s.params(), now_ms, 1).decision
        }
        match self {
            Limiter::Token(s) => own(s, now_ms),
            Limiter::Period(s) => own(s, now_ms),
            Limiter::Slide(s) => own(s, now_ms),
            Limiter::Leaky(s) => own(s, now_ms),
            Limiter::Gcra(s) => own(s, now_ms),
            Limiter::Lease(s) => s.peek(now_ms),
        }
    }

    /// Heap bytes owned beyond the value itself (a sliding log, bucket counters, leases).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Limiter::Slide(s) => s.heap_bytes(),
            Limiter::Lease(s) => s.heap_bytes(),
            _ => 0,
        }
    }

    /// The stored parameters and state as `RL.INFO` shows them (see [`Stored::info_fields`]).
    pub fn describe(&self) -> Vec<(&'static str, i64)> {
        self.stored().info_fields()
    }

    /// `RL.INFO`'s fields for the stored parameters with the limiter in its initial state
    /// (nothing used: a full bucket, an empty window, log or bucket), as of `updated_ms`: what
    /// a key cleared by a ban (`BAN d CLEAR`), or refunded back to its initial state during a
    /// ban, holds. A fixed window shows no window in force (`window_start_ms` =
    /// `window_end_ms` = `updated_ms`); an anchored grid or `STEP` origin is the one the next
    /// admitted call replaces.
    pub fn describe_initial(&self) -> Vec<(&'static str, i64)> {
        let full = match self {
            Limiter::Token(s) => crate::algorithms::state::info_int(s.capacity),
            _ => 0,
        };
        let updated = self.updated_ms();
        self.describe()
            .into_iter()
            .map(|(name, value)| match name {
                "tokens" => (name, full),
                "fraction" | "used" | "entries" | "level" => (name, 0),
                "window_start_ms" | "window_end_ms" => (name, updated),
                _ => (name, value),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every allocation-size class counts toward memory per key (README, "Benchmarks"): the whole value
    /// must fit jemalloc's 64-byte class.
    #[test]
    fn limiter_fits_in_64_bytes() {
        assert!(std::mem::size_of::<Limiter>() <= 64, "{}", std::mem::size_of::<Limiter>());
    }

    const T0: i64 = 1_700_000_000_000;

    /// A limited call with a new rate answers for the stored bucket: waiting exactly its
    /// `retry_after_ms` admits the call, one ms earlier does not.
    #[test]
    fn retry_after_a_rate_change_is_exact() {
        let old = TokenParams::new(10, 1, 1000, false).unwrap();
        let new = TokenParams::new(10, 10, 1000, false).unwrap();
        let stored = token::evaluate(None, &old, T0, 10).next.unwrap();
        let e = judge(Some(&stored), &new, T0, 5);
        assert!(!e.decision.allowed);
        assert!(e.next.is_none());
        let retry = e.decision.retry_after_ms;
        assert_eq!(retry, 5000); // the stored bucket refills at 1/s
        assert!(judge(Some(&stored), &new, T0 + retry, 5).decision.allowed);
        assert!(!judge(Some(&stored), &new, T0 + retry - 1, 5).decision.allowed);
        assert_eq!(e.decision.reset_after_ms, stored.reset_at_ms() - T0);
    }

    /// A cost the stored (smaller) bucket can never hold is admitted once it has reset.
    #[test]
    fn retry_waits_for_the_reset_when_the_stored_capacity_is_too_small() {
        let old = TokenParams::new(5, 1, 1000, false).unwrap();
        let new = TokenParams::new(10, 1, 1000, false).unwrap();
        let stored = token::evaluate(None, &old, T0, 1).next.unwrap();
        let e = judge(Some(&stored), &new, T0, 8);
        assert_eq!(e.decision.retry_after_ms, 1000);
        assert!(judge(Some(&stored), &new, T0 + 1000, 8).decision.allowed);
    }

    #[test]
    fn unchanged_parameters_are_not_searched() {
        let p = TokenParams::new(10, 3, 7, false).unwrap();
        let stored = token::evaluate(None, &p, T0, 10).next.unwrap();
        assert_eq!(judge(Some(&stored), &p, T0, 4), token::evaluate(Some(&stored), &p, T0, 4));
    }
}
