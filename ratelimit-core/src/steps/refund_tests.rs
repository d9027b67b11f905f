//! `RL.REFUND` models, for every algorithm (README, "RL.REFUND").
//!
//! The central property is model-free and exact: taking `c` permits and then giving `k ≤ c`
//! back at the same instant leaves a limiter that answers every later request exactly as one
//! that took `c − k` (or nothing, if `k = c`) — for every algorithm, mode and traffic history.
//! Around it: a refund never makes a limiter more generous than a fresh one, a refund of
//! everything is a fresh limiter, and the sliding log gives back its newest permits first,
//! splitting an entry where needed.

use std::fmt::Debug;

use proptest::prelude::*;

use crate::algorithms::gcra::{GcraParams, GcraState};
use crate::algorithms::leaky::{LeakMode, LeakyBucket, LeakyParams};
use crate::algorithms::limiter::{Limiter, Variant};
use crate::algorithms::period::{PeriodParams, PeriodWindow};
use crate::algorithms::slide::{SlideParams, SlideState};
use crate::algorithms::state::{live, Refunded, Stored};
use crate::algorithms::token::{TokenBucket, TokenParams};
use crate::store::codec::{decode, encode};
use crate::store::packed::PackedLimiter;

const T0: i64 = 1_700_000_000_000;

/// The state after admitting `cost` at `now` (unchanged if refused or free).
fn take<V: Variant + Clone>(s: Option<&V>, p: &V::Params, now: i64, cost: u64) -> Option<V> {
    V::evaluate(s, p, now, cost).next.or_else(|| s.cloned())
}

/// The state after `RL.REFUND count` at `now`, as the key would hold it.
fn give<V: Variant + Clone + Debug>(s: Option<&V>, now: i64, count: u64) -> Option<V> {
    let s = live(s, now)?;
    match s.refund(now, count) {
        Refunded::Nothing => Some(s.clone()),
        Refunded::Fresh => None,
        Refunded::To(next) => {
            assert_eq!(next.validate(), Ok(()), "{next:?}");
            assert!(next.reset_at_ms() > now, "a refunded state is live: {next:?}");
            assert!(next.reset_at_ms() <= s.reset_at_ms(), "the expiry only moves earlier");
            // Stored and persisted like any other state.
            let limiter = next.clone().into_limiter();
            assert_eq!(decode(&encode(&limiter)).as_ref(), Ok(&limiter));
            assert_eq!(PackedLimiter::new(limiter.clone()).view(Limiter::clone), limiter);
            Some(next)
        }
    }
}

/// Every request of cost `0 ..= limit + 1` at instants from `now` on gets the same decision
/// from both limiters.
fn same_future<V: Variant + Debug>(
    a: Option<&V>,
    b: Option<&V>,
    p: &V::Params,
    limit: u64,
    now: i64,
    span: i64,
) -> Result<(), TestCaseError> {
    for dt in (0..span).step_by(usize::try_from(span / 40).unwrap_or(1).max(1)).chain([span]) {
        for cost in 0..=limit + 1 {
            let (x, y) = (V::evaluate(a, p, now + dt, cost), V::evaluate(b, p, now + dt, cost));
            prop_assert_eq!(x.decision, y.decision, "at +{} cost {}: {:?} vs {:?}", dt, cost, a, b);
        }
    }
    Ok(())
}

/// Runs `traffic` (gaps and costs), then checks the refund properties at the next instant.
fn check<V: Variant + Clone + Debug + PartialEq>(
    p: &V::Params,
    limit: u64,
    span: i64,
    traffic: &[(i64, u64)],
    (gap, c, k): (i64, u64, u64),
) -> Result<(), TestCaseError> {
    let mut state: Option<V> = None;
    let mut now = T0;
    for &(dt, cost) in traffic {
        now += dt;
        state = take(state.as_ref(), p, now, cost);
    }
    now += gap;
    let k = k.min(c);
    // Take c, give k back ≡ take c − k.
    let taken = take(state.as_ref(), p, now, c);
    if V::evaluate(state.as_ref(), p, now, c).decision.allowed {
        let refunded = give(taken.as_ref(), now, k);
        let expected = take(state.as_ref(), p, now, c - k);
        let later = now.max(state.as_ref().map_or(now, |s| s.updated_ms()));
        same_future(refunded.as_ref(), expected.as_ref(), p, limit, later, span)?;
    }
    // Never more generous than a fresh limiter; everything back is a fresh limiter.
    if let Some(after) = give(state.as_ref(), now, k) {
        for cost in 0..=limit + 1 {
            let fresh = V::evaluate(None, p, now, cost).decision;
            let got = V::evaluate(Some(&after), p, now, cost).decision;
            prop_assert!(
                got.allowed <= fresh.allowed,
                "cost {}: {:?} vs fresh {:?}",
                cost,
                got,
                fresh
            );
            if got.allowed {
                prop_assert!(
                    got.remaining <= fresh.remaining,
                    "cost {}: {:?} vs {:?}",
                    cost,
                    got,
                    fresh
                );
            }
        }
    }
    let all_back = give(state.as_ref(), now, u64::MAX / 4);
    same_future(
        all_back.as_ref(),
        None,
        p,
        limit,
        now.max(state.map_or(now, |s| s.updated_ms())),
        span,
    )
}

fn traffic() -> impl Strategy<Value = Vec<(i64, u64)>> {
    prop::collection::vec((-5i64..40, 0u64..5), 0..25)
}

fn last() -> impl Strategy<Value = (i64, u64, u64)> {
    (0i64..30, 1u64..6, 1u64..7)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn token_refund(cap in 1u64..8, rate in 1u64..4, period in 1u64..30, step: bool,
                    t in traffic(), l in last()) {
        let p = TokenParams::new(cap, rate, period, step).unwrap();
        check::<TokenBucket>(&p, cap, 200, &t, l)?;
    }

    #[test]
    fn period_refund(limit in 1u64..8, period in 1u64..80, align in prop::option::of(0i64..3),
                     t in traffic(), l in last()) {
        let p = PeriodParams::new(limit, period, align.map(|a| a % period as i64)).unwrap();
        check::<PeriodWindow>(&p, limit, 200, &t, l)?;
    }

    #[test]
    fn slide_refund(limit in 1u64..8, window in 1u64..60, buckets in prop::option::of(1u64..5),
                    t in traffic(), l in last()) {
        let window = buckets.map_or(window, |b| window * b);
        let p = SlideParams::new(limit, window, buckets, 1000).unwrap();
        check::<SlideState>(&p, limit, 400, &t, l)?;
    }

    #[test]
    fn leaky_refund(cap in 1u64..8, rate in 1u64..4, period in 1u64..30, nodelay: bool,
                    t in traffic(), l in last()) {
        let mode = if nodelay { LeakMode::NoDelay } else { LeakMode::Delay(0) };
        let p = LeakyParams::new(cap, rate, period, mode).unwrap();
        check::<LeakyBucket>(&p, cap, 300, &t, l)?;
    }

    #[test]
    fn gcra_refund(burst in 0u64..6, count in 1u64..4, period in 1u64..3,
                   t in traffic(), l in last()) {
        let p = GcraParams::new(burst, count, period).unwrap();
        check::<GcraState>(&p, burst + 1, 4000, &t, l)?;
    }
}

/// The exact log gives back its newest permits first, splitting the entry where the refund
/// ends; older entries and their instants stay as they were.
#[test]
fn sliding_log_refunds_newest_first_and_splits() {
    let p = SlideParams::new(10, 100, None, 1000).unwrap();
    let mut s: Option<SlideState> = None;
    for (dt, cost) in [(0, 2), (10, 3), (20, 4)] {
        s = take(s.as_ref(), &p, T0 + dt, cost);
    }
    let after = give(s.as_ref(), T0 + 30, 5).unwrap();
    assert_eq!(after.entries().collect::<Vec<_>>(), [(T0, 2), (T0 + 10, 2)]);
    assert_eq!(after.reset_at_ms(), T0 + 110, "dated by its newest remaining entry");
    // Entries that have left the window give nothing back.
    let late = give(s.as_ref(), T0 + 105, 100);
    assert!(late.is_none(), "the last live entries back: a fresh limiter");
    let just = give(s.as_ref(), T0 + 105, 3).unwrap();
    assert_eq!(just.entries().collect::<Vec<_>>(), [(T0 + 10, 3), (T0 + 20, 1)]);
}

/// Bucketed windows give back from the newest counted sub-window first; an emptied newest
/// sub-window re-dates the state to the newest non-empty one.
#[test]
fn bucketed_refunds_newest_sub_windows_first() {
    let p = SlideParams::new(10, 100, Some(4), 1000).unwrap();
    let mut s: Option<SlideState> = None;
    for (dt, cost) in [(0, 2), (30, 3), (55, 1)] {
        s = take(s.as_ref(), &p, T0 + dt, cost);
    }
    let s = s.unwrap();
    assert_eq!(s.counters().collect::<Vec<_>>(), [0, 0, 2, 3, 1]);
    let after = give(Some(&s), T0 + 60, 2).unwrap();
    assert_eq!(after.counters().collect::<Vec<_>>(), [0, 0, 0, 2, 2]);
    assert_eq!(after.updated_ms(), T0 + 49, "the last ms of the newest non-empty sub-window");
    assert!(give(Some(&s), T0 + 60, 6).is_none());
}

/// A full limiter has nothing to give back; a refund is never more than a fresh limiter.
#[test]
fn refunds_stop_at_a_fresh_limiter() {
    let p = TokenParams::new(5, 1, 1000, false).unwrap();
    let s: TokenBucket = take(None, &p, T0, 3).unwrap();
    assert_eq!(s.refund(T0 + 3000, 1), Refunded::Nothing);
    assert!(
        matches!(s.refund(T0 + 500, 1), Refunded::To(b) if b.tokens == 3 && b.updated_ms == T0 + 500)
    );
    assert_eq!(s.refund(T0, 3), Refunded::Fresh);
    let g = GcraParams::new(2, 1, 1).unwrap();
    let gs: GcraState = take(None, &g, T0, 2).unwrap();
    assert!(matches!(gs.refund(T0, 1), Refunded::To(s) if s.tat_ms == T0 + 1000));
    assert_eq!(gs.refund(T0, 2), Refunded::Fresh);
}
