use super::*;
use crate::grammar::args::MAX_AT_MS;
use crate::testing::{self, check_against_model, clocked};
use proptest::prelude::*;

fn params(capacity: u64, rate: u64, period_ms: u64, mode: LeakMode) -> LeakyParams {
    LeakyParams::new(capacity, rate, period_ms, mode).unwrap()
}

const QUEUE: LeakMode = LeakMode::Delay(0);

/// Drives the limiter like the shell does: stores `next`, returns the decision.
type Sim = crate::testing::Sim<LeakyBucket>;

fn reply(d: Decision) -> (bool, u64, i64, i64) {
    (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms)
}

// ---------------------------------------------------------------------------------------
// Unit tests with simulated time
// ---------------------------------------------------------------------------------------

#[test]
fn state_fits_in_56_bytes() {
    assert!(std::mem::size_of::<LeakyBucket>() <= 56, "{}", std::mem::size_of::<LeakyBucket>());
}

#[test]
fn delay_mode_queues_a_burst_at_the_drain_rate() {
    let p = params(5, 1, 1000, QUEUE);
    let mut sim = Sim::new();
    for k in 0..5i64 {
        // The k-th request waits for the k units ahead of it.
        assert_eq!(reply(sim.call(&p, 10_000, 1)), (true, 4 - k as u64, k * 1000, (k + 1) * 1000));
    }
    assert_eq!(reply(sim.call(&p, 10_000, 1)), (false, 0, 1000, 5000));
    // Half a unit drained: still full for a whole request.
    assert_eq!(reply(sim.call(&p, 10_500, 1)), (false, 0, 500, 4500));
    assert_eq!(reply(sim.call(&p, 11_000, 1)), (true, 0, 4000, 5000));
}

#[test]
fn nodelay_is_a_meter() {
    let p = params(5, 1, 1000, LeakMode::NoDelay);
    let mut sim = Sim::new();
    for k in 0..5i64 {
        assert_eq!(reply(sim.call(&p, 0, 1)), (true, 4 - k as u64, 0, (k + 1) * 1000));
    }
    assert_eq!(reply(sim.call(&p, 999, 1)), (false, 0, 1, 4001));
    assert_eq!(reply(sim.call(&p, 1000, 1)), (true, 0, 0, 5000));
}

#[test]
fn delay_d_tolerates_water_ahead() {
    let p = params(5, 1, 1000, LeakMode::Delay(2));
    let mut sim = Sim::new();
    let retries: Vec<i64> = (0..5).map(|_| sim.call(&p, 0, 1).retry_after_ms).collect();
    assert_eq!(retries, [0, 0, 0, 1000, 2000]);
    // DELAY capacity behaves like NODELAY.
    let p = params(5, 1, 1000, LeakMode::Delay(5));
    let mut sim = Sim::new();
    assert!((0..5).all(|_| sim.call(&p, 0, 1).retry_after_ms == 0));
}

#[test]
fn exact_fractions_three_per_seven_ms() {
    let p = params(10, 3, 7, LeakMode::NoDelay);
    let mut sim = Sim::new();
    assert_eq!(reply(sim.call(&p, 0, 10)), (true, 0, 0, 24)); // 70/3 = 23.33 ms
    let d = sim.call(&p, 0, 1);
    assert_eq!(reply(d), (false, 0, 3, 24)); // one unit drains in 7/3 ms
    assert!(!sim.call(&p, 2, 1).allowed);
    // Level 10 − 9/7 + 1 = 68/7 = 9 + 5/7: 9 whole units and 5/7; empty after
    // (68/7)·(7/3) = 68/3 = 22.67 ms.
    assert_eq!(reply(sim.call(&p, 3, 1)), (true, 0, 0, 23));
    let s = sim.state.unwrap();
    assert_eq!((s.level, s.fraction), (9, 5));
    assert!(live(Some(&s), 3 + 22).is_some());
    assert!(live(Some(&s), 3 + 23).is_none());
}

#[test]
fn cost_zero_and_cost_above_capacity() {
    let p = params(4, 1, 100, QUEUE);
    let e = evaluate(None, &p, 0, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 4, 0, 0), None));
    let e = evaluate(None, &p, 0, 5);
    assert_eq!((reply(e.decision), e.next), ((false, 4, -1, 0), None));
    let mut sim = Sim::new();
    sim.call(&p, 0, 3);
    // COST 0 reports the delay a request would get now, and consumes nothing.
    let e = evaluate(sim.state.as_ref(), &p, 50, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 1, 250, 250), None));
    let nodelay = params(4, 1, 100, LeakMode::NoDelay);
    let e = evaluate(sim.state.as_ref(), &nodelay, 50, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 1, 0, 250), None));
    let e = evaluate(sim.state.as_ref(), &p, 50, 5);
    assert_eq!((reply(e.decision), e.next), ((false, 1, -1, 250), None));
}

#[test]
fn reset_after_is_exact() {
    let p = params(7, 2, 9, QUEUE);
    let e = evaluate(None, &p, 100, 5);
    let s = e.next.unwrap();
    assert_eq!(e.decision.reset_after_ms, 23); // 5·9/2 = 22.5
    assert_eq!(s.reset_at_ms(), 123);
    assert!(live(Some(&s), 122).is_some());
    assert_eq!(evaluate(Some(&s), &p, 123, 7), evaluate(None, &p, 123, 7));
}

#[test]
fn time_going_backwards_drains_nothing() {
    let p = params(3, 1, 1000, QUEUE);
    let mut sim = Sim::new();
    sim.call(&p, 50_000, 3);
    assert_eq!(reply(sim.call(&p, 1_000, 1)), (false, 0, 1000, 3000));
    assert_eq!(reply(sim.call(&p, 51_000, 1)), (true, 0, 2000, 3000));
    assert_eq!(reply(sim.call(&p, 40_000, 0)), (true, 0, 3000, 3000));
    assert_eq!(sim.state.unwrap().updated_ms, 51_000);
}

#[test]
fn period_change_rounds_the_level_up() {
    // Level 4/3 under period 3 becomes ⌈4·2/3⌉/2 = 3/2 under period 2.
    let old = LeakyBucket {
        capacity: 5,
        rate: 1,
        period_ms: 3,
        delay: 0,
        level: 1,
        fraction: 1,
        updated_ms: 0,
    };
    old.validate().unwrap();
    let new = params(5, 1, 2, QUEUE);
    let w = Water::from_bucket(&old).convert(new);
    assert_eq!(w.units, 3);
    let e = evaluate(Some(&old), &new, 0, 1);
    let s = e.next.unwrap();
    assert_eq!((s.level, s.fraction, s.period_ms), (2, 1, 2));
    assert_eq!(e.decision.retry_after_ms, 3); // 3/2 units ahead at 1 per 2 ms
    assert_eq!(e.decision.remaining, 2);
}

#[test]
fn capacity_change_clamps_the_level() {
    let p = params(10, 1, 100, LeakMode::NoDelay);
    let mut sim = Sim::new();
    sim.call(&p, 0, 8);
    let small = params(5, 1, 100, QUEUE);
    // Judged with the level clamped to 5, but a limited call stores nothing: the stored
    // bucket (level 8) admits one unit under capacity 5 once it has drained to 4, and is
    // empty after 800 ms.
    assert_eq!(reply(sim.call(&small, 0, 1)), (false, 0, 400, 800));
    assert!(!sim.call(&small, 399, 1).allowed);
    assert_eq!(reply(sim.call(&small, 400, 1)), (true, 0, 400, 500));
    // An admitted call stores the clamp: level 5 at 400.
    let mut sim = Sim::new();
    sim.call(&p, 0, 8);
    assert_eq!(reply(sim.call(&small, 0, 0)), (true, 0, 500, 800));
    let mut sim = Sim::new();
    sim.call(&p, 0, 4);
    assert_eq!(reply(sim.call(&params(2, 1, 100, QUEUE), 0, 0)), (true, 0, 200, 400));
    // A larger capacity keeps the level and adds room.
    let big = params(20, 1, 100, QUEUE);
    assert_eq!(reply(sim.call(&big, 100, 1)), (true, 16, 300, 400));
}

#[test]
fn rate_change_keeps_the_level_exactly() {
    let mut sim = Sim::new();
    sim.call(&params(10, 3, 7, QUEUE), 0, 4);
    let s = sim.state.unwrap();
    let faster = params(10, 7, 7, QUEUE);
    // 4 − 6/7 = 22/7 units left after 2 ms at 3/7 per ms. A request now would wait
    // ⌈22/7⌉ ms at the new 1 unit per ms; the stored bucket, still draining at 3/7 per ms,
    // is empty after ⌈22/3⌉ ms.
    let e = evaluate(Some(&s), &faster, 2, 0);
    assert_eq!((e.decision.retry_after_ms, e.decision.reset_after_ms), (4, 8));
    // An admitted call stores the new rate: 29/7 units drain in ⌈29/7⌉ ms.
    let e = evaluate(Some(&s), &faster, 2, 1);
    assert_eq!((e.decision.retry_after_ms, e.decision.reset_after_ms), (4, 5));
    assert_eq!((e.next.unwrap().level, e.next.unwrap().fraction), (4, 1));
}

#[test]
fn parameters_are_checked() {
    assert_eq!(
        LeakyParams::new(0, 1, 1, QUEUE),
        Err(ArgError::Integer { name: "capacity", min: 1, max: 1_000_000_000_000 })
    );
    assert!(matches!(
        LeakyParams::new(1, 0, 1, QUEUE),
        Err(ArgError::Integer { name: "rate", .. })
    ));
    assert!(matches!(
        LeakyParams::new(1, 1, 0, QUEUE),
        Err(ArgError::DurationRange { name: "period", .. })
    ));
    let err = LeakyParams::new(5, 1, 1, LeakMode::Delay(6)).unwrap_err();
    assert!(matches!(&err, ArgError::Invalid(t) if t.starts_with("DELAY")), "{err}");
    assert!(LeakyParams::new(5, 1, 1, LeakMode::Delay(5)).is_ok());
    // Full drain = capacity × period / rate ≤ 100 years.
    assert!(LeakyParams::new(10, 1, MAX_DURATION_MS, QUEUE).is_ok());
    assert_eq!(
        LeakyParams::new(11, 1, MAX_DURATION_MS, QUEUE),
        Err(ArgError::ResetTooLong { formula: "capacity × period / rate" })
    );
    assert!(LeakyParams::new(MAX_COUNT, 1, 3, QUEUE).is_ok());
    assert!(LeakyParams::new(MAX_COUNT, 1, 4, QUEUE).is_err());
    assert!(LeakyParams::new(MAX_COUNT, MAX_COUNT, MAX_DURATION_MS, LeakMode::NoDelay).is_ok());
}

#[test]
fn validate_accepts_produced_states_and_rejects_corrupt_ones() {
    let p = params(10, 3, 7, LeakMode::Delay(4));
    let good = evaluate(None, &p, 1_000, 3).next.unwrap();
    assert_eq!(good.validate(), Ok(()));
    assert_eq!(good.params(), p);
    let nodelay = evaluate(None, &params(10, 3, 7, LeakMode::NoDelay), 1_000, 3).next.unwrap();
    assert_eq!(nodelay.delay, NO_DELAY);
    assert_eq!(nodelay.mode(), LeakMode::NoDelay);
    let corrupt = [
        LeakyBucket { capacity: 0, ..good },
        LeakyBucket { rate: 0, ..good },
        LeakyBucket { period_ms: 0, ..good },
        LeakyBucket { capacity: MAX_COUNT, rate: 1, period_ms: MAX_DURATION_MS, ..good },
        LeakyBucket { delay: 11, ..good },
        LeakyBucket { level: 0, fraction: 0, ..good },
        LeakyBucket { level: 10 + MAX_COUNT + 1, ..good },
        LeakyBucket { fraction: 7, ..good },
        LeakyBucket { updated_ms: -1, ..good },
        LeakyBucket { updated_ms: MAX_AT_MS + 1, ..good },
    ];
    for c in corrupt {
        assert!(c.validate().is_err(), "{c:?}");
    }
    // Above the capacity: a debt (RL.CHARGE), valid but only in the codec's debt versions.
    for debt in [LeakyBucket { level: 11, ..good }, LeakyBucket { level: 10, fraction: 1, ..good }]
    {
        assert_eq!(debt.validate(), Ok(()));
        assert!(debt.in_debt());
    }
    // Less than one unit of water: only a refund leaves it (RL.REFUND).
    assert_eq!(LeakyBucket { level: 0, fraction: 3, ..good }.validate(), Ok(()));
}

#[test]
fn extreme_parameters_do_not_panic() {
    let cases = [
        (1, 1, MAX_DURATION_MS),   // 1 per 10 years
        (10, 1, MAX_DURATION_MS),  // 100 years to drain
        (MAX_COUNT, MAX_COUNT, 1), // 10^12 per ms
        (MAX_COUNT, 1, 3),         // 10^12 units at 1 per 3 ms: 95 years
        (MAX_COUNT, MAX_COUNT, MAX_DURATION_MS),
    ];
    for (capacity, rate, period) in cases {
        for mode in [QUEUE, LeakMode::Delay(capacity), LeakMode::NoDelay] {
            let p = params(capacity, rate, period, mode);
            for now in [0, MAX_AT_MS] {
                let mut sim = Sim::new();
                for cost in [MAX_COUNT, 1, 0, capacity, 1] {
                    let d = sim.call(&p, now, cost);
                    assert!(
                        d.remaining <= capacity && d.retry_after_ms >= -1 && d.reset_after_ms >= 0
                    );
                }
                let d = sim.call(&p, MAX_AT_MS, 1);
                assert!(d.reset_after_ms >= 0);
            }
        }
    }
    // 10 units per 10 years, full: 100 years to reset, exactly.
    let p = params(10, 1, MAX_DURATION_MS, QUEUE);
    let e = evaluate(None, &p, 0, 10);
    assert_eq!(e.decision.reset_after_ms as u128, MAX_RESET_MS);
    assert_eq!(e.next.unwrap().reset_at_ms() as u128, MAX_RESET_MS);
}

// ---------------------------------------------------------------------------------------
// Brute-force reference model
// ---------------------------------------------------------------------------------------

/// The model's bucket: water in units of 1/period_ms, drained one ms at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ModelBucket {
    params: LeakyParams,
    water: u128,
    at: i64,
}

#[derive(Debug, Clone, Default)]
struct Model {
    bucket: Option<ModelBucket>,
}

/// Drains `b` ms by ms up to `t`; `None` once empty (an empty bucket is a missing one).
fn drain_until(b: ModelBucket, t: i64) -> Option<ModelBucket> {
    let mut water = b.water;
    let mut at = b.at;
    while at < t && water > 0 {
        water = water.saturating_sub(u128::from(b.params.rate));
        at += 1;
    }
    (water > 0).then_some(ModelBucket { water, at: t.max(b.at), ..b })
}

impl Model {
    /// The water (in the call's units) a call at `now` sees, and `now'`.
    fn current(&self, p: &LeakyParams, now: i64) -> (u128, i64) {
        let Some(b) = self.bucket else {
            return (0, now);
        };
        let now2 = now.max(b.at);
        let Some(b) = drain_until(b, now2) else {
            return (0, now2);
        };
        // Smallest water x under the new period whose level x/P_new is at least the old
        // level w/P_old, found by search from below.
        let (w, old_p, new_p) = (b.water, u128::from(b.params.period_ms), u128::from(p.period_ms));
        let mut x = w * new_p / old_p;
        while x * old_p < w * new_p {
            x += 1;
        }
        (x.min(u128::from(p.capacity) * new_p), now2)
    }

    /// One call: (allowed, now', water before, water after).
    fn call(&mut self, p: &LeakyParams, now: i64, cost: u64) -> (bool, i64, u128, u128) {
        let (water, now2) = self.current(p, now);
        let poured = u128::from(cost) * u128::from(p.period_ms);
        let allowed =
            cost == 0 || water + poured <= u128::from(p.capacity) * u128::from(p.period_ms);
        let after = if allowed { water + poured } else { water };
        if allowed && cost > 0 {
            self.bucket = Some(ModelBucket { params: *p, water: after, at: now2 });
        }
        (allowed, now2, water, after)
    }
}

impl testing::Model<LeakyBucket> for Model {
    /// The full reply, with every time found by linear search.
    fn decide(&mut self, p: &LeakyParams, now: i64, cost: u64) -> Decision {
        let before = self.clone();
        let (allowed, now2, water, after) = self.call(p, now, cost);
        let stand_in = ModelBucket { params: *p, water, at: now2 };
        let retry_after_ms = match (allowed, p.mode) {
            (true, LeakMode::NoDelay) => 0,
            (true, LeakMode::Delay(d)) => {
                let tolerated = u128::from(d) * u128::from(p.period_ms);
                (0..=SEARCH)
                    .find(|k| drain_until(stand_in, now2 + k).map_or(0, |b| b.water) <= tolerated)
                    .unwrap()
            }
            (false, _) => {
                (1..=SEARCH).find(|k| before.clone().call(p, now2 + k, cost).0).unwrap_or(-1)
            }
        };
        // Back in the initial state: the bucket the model holds after the call is empty.
        let reset_after_ms = (0..=SEARCH)
            .find(|k| self.bucket.and_then(|b| drain_until(b, now2 + k)).is_none())
            .unwrap();
        let free = u128::from(p.capacity) * u128::from(p.period_ms) - after;
        Decision {
            allowed,
            limit: p.capacity,
            remaining: (free / u128::from(p.period_ms)) as u64,
            retry_after_ms,
            reset_after_ms,
        }
    }

    /// The stored level, in 1/period_ms units, equals the model's water.
    fn check_state(&self, stored: Option<&LeakyBucket>) -> Result<(), TestCaseError> {
        let stored = stored.map(|s| {
            let water = u128::from(s.level) * u128::from(s.period_ms) + u128::from(s.fraction);
            (s.params(), water, s.updated_ms)
        });
        prop_assert_eq!(stored, self.bucket.map(|b| (b.params, b.water, b.at)));
        Ok(())
    }
}

/// Longest search the model needs: capacity · period / rate ≤ 11 · 30 ms here.
const SEARCH: i64 = 400;

fn arb_mode(capacity: u64) -> impl Strategy<Value = LeakMode> {
    prop_oneof![
        2 => Just(LeakMode::Delay(0)),
        1 => Just(LeakMode::NoDelay),
        1 => (0..=capacity).prop_map(LeakMode::Delay),
    ]
}

fn arb_params() -> impl Strategy<Value = LeakyParams> {
    (1u64..12, 1u64..5, 1u64..30)
        .prop_flat_map(|(c, r, p)| (Just(c), Just(r), Just(p), arb_mode(c)))
        .prop_map(|(c, r, p, mode)| params(c, r, p, mode))
}

/// A call: which parameter set, the time step (negative = clock going back), the cost.
fn arb_ops() -> impl Strategy<Value = Vec<(usize, i64, u64)>> {
    proptest::collection::vec(
        (0usize..3, -20i64..40, prop_oneof![4 => 0u64..4, 1 => 0u64..14]),
        1..40,
    )
}

proptest! {
    /// The implementation agrees with the brute-force model on every reply field and every
    /// stored level, through random gaps, costs, parameter and mode changes, and backward
    /// time. The model's linear searches make retry and reset exact by construction.
    #[test]
    fn matches_brute_force_model(
        pool in proptest::collection::vec(arb_params(), 3),
        start in 0i64..100,
        ops in arb_ops(),
    ) {
        let calls = clocked(start, ops.into_iter().map(|(i, gap, cost)| (pool[i], gap, cost)));
        check_against_model(&mut Model::default(), calls, |_, _, _, _| Ok(()))?;
    }

    /// The shaping guarantee of delay mode (`DELAY d`, one parameter set). Request k is
    /// admitted at a_k with cost c_k and level L_k before it; its exact start is
    /// S_k = a_k + max(0, L_k − d)·P/r and the reported start is s_k = a_k + retry_k = ⌈S_k⌉.
    /// For admitted i < j with C = c_i + … + c_(j−1) (the units started before j since i):
    ///
    /// 1. C ≤ d + (r/P)·(S_j − S_i): what starts never outruns the drain, beyond the d units
    ///    tolerated (exactly; and C·P − d·P < r·(s_j − s_i + 1) on the reported whole ms);
    /// 2. with d = 0 and water ahead of every request i+1 … j, S_j − S_i = C·P/r: a queue
    ///    flows out at exactly the drain rate, not slower.
    #[test]
    fn delay_mode_starts_requests_at_the_drain_rate(
        capacity in 1u64..12,
        rate in 1u64..5,
        period in 1u64..30,
        delay_pick in any::<u64>(),
        no_tolerance in any::<bool>(),
        ops in proptest::collection::vec((0i64..25, 1u64..6), 1..40),
    ) {
        let d = if no_tolerance { 0 } else { delay_pick % (capacity + 1) };
        let p = params(capacity, rate, period, LeakMode::Delay(d));
        let (pw, rw, dw) = (i128::from(period), i128::from(rate), i128::from(d));
        let mut sim = Sim::new();
        let mut t = 0i64;
        // (a_k, c_k, water before in 1/P units, reported start)
        let mut admitted: Vec<(i128, i128, i128, i128)> = Vec::new();
        for (gap, cost) in ops {
            t += gap;
            let water = sim.state.map_or(0, |s| {
                Water::from_bucket(&s).advance_to(t).convert(p).units
            });
            let dec = sim.call(&p, t, cost);
            if dec.allowed {
                admitted.push((i128::from(t), i128::from(cost), water as i128, i128::from(t + dec.retry_after_ms)));
            }
        }
        // Exact start times as a common-denominator numerator: S_k·r = a_k·r + max(0, w_k − d·P).
        let start_r = |k: &(i128, i128, i128, i128)| k.0 * rw + (k.2 - dw * pw).max(0);
        for i in 0..admitted.len() {
            let mut units_before = 0i128;
            let mut queued = true;
            for j in (i + 1)..admitted.len() {
                units_before += admitted[j - 1].1;
                queued &= admitted[j].2 > 0;
                let (si, sj) = (start_r(&admitted[i]), start_r(&admitted[j]));
                prop_assert!((units_before - dw) * pw <= sj - si, "exact: {:?}", (i, j, &admitted));
                let (ri, rj) = (admitted[i].3, admitted[j].3);
                prop_assert!((units_before - dw) * pw < rw * (rj - ri + 1), "reported: {:?}", (i, j, &admitted));
                prop_assert!(rj >= ri);
                if d == 0 && queued {
                    prop_assert_eq!(units_before * pw, sj - si);
                }
            }
            // Reported starts are the exact ones rounded up.
            let (a, _, w, s) = admitted[i];
            prop_assert_eq!(s, a + ((w - dw * pw).max(0) + rw - 1) / rw);
        }
    }

    /// Conversion between parameter sets never grants permits: the converted level is at
    /// least the drained level (or the new capacity), and less than one 1/P_new unit above.
    #[test]
    fn conversion_rounds_toward_fewer_permits(
        a in arb_params(),
        b in arb_params(),
        cost in 1u64..12,
        gap in 0i64..400,
    ) {
        let Some(s) = evaluate(None, &a, 0, cost.min(a.capacity)).next else { return Ok(()) };
        let drained = Water::from_bucket(&s).advance_to(gap);
        let converted = drained.convert(b);
        let (w, pa, pb) = (drained.units, u128::from(a.period_ms), u128::from(b.period_ms));
        let cap_b = u128::from(b.capacity) * pb;
        if converted.units < cap_b {
            prop_assert!(converted.units * pa >= w * pb);
            prop_assert!((converted.units.saturating_sub(1)) * pa < w * pb || converted.units == 0);
        } else {
            prop_assert_eq!(converted.units, cap_b);
        }
    }

    /// Any stored fields at all (a corrupt payload, validation skipped): no panic anywhere.
    #[test]
    fn corrupt_states_never_panic(
        fields in (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<i64>()),
        p in arb_params(),
        now in prop_oneof![0i64..1000, 0i64..=MAX_AT_MS],
        cost in prop_oneof![0u64..10, any::<u64>()],
    ) {
        let (capacity, rate, period_ms, delay, level, fraction, updated_ms) = fields;
        let s = LeakyBucket { capacity, rate, period_ms, delay, level, fraction, updated_ms };
        let _ = s.validate();
        let _ = s.reset_at_ms();
        let _ = s.params();
        let e = evaluate(Some(&s), &p, now, cost);
        prop_assert!(e.decision.remaining <= p.capacity);
    }

    /// Retry and reset exactness at arbitrary scales, checked directly: waiting exactly
    /// retry_after admits, one ms less does not; the bucket is empty exactly at reset_after.
    #[test]
    fn retry_and_reset_are_exact_at_any_scale(
        capacity_frac in 0u64..=1000,
        rate in prop_oneof![1u64..10, 1u64..=MAX_COUNT],
        period in 1u64..=MAX_DURATION_MS,
        fill in 1u64..=MAX_COUNT,
        cost in 1u64..=MAX_COUNT,
        now in 0i64..=MAX_AT_MS / 2,
        gap_frac in 0u64..=1000,
    ) {
        // A capacity within the 100-year rule for this rate and period.
        let max_capacity = (MAX_RESET_MS * u128::from(rate) / u128::from(period)).min(u128::from(MAX_COUNT));
        let capacity = (max_capacity * u128::from(capacity_frac) / 1000).max(1) as u64;
        let p = params(capacity, rate, period, LeakMode::NoDelay);
        let fill = fill.min(capacity);
        let cost = cost.min(capacity);
        let e = evaluate(None, &p, now, fill);
        let s = e.next.unwrap();
        prop_assert_eq!(s.validate(), Ok(()));
        let reset = e.decision.reset_after_ms;
        prop_assert!(live(Some(&s), now + reset - 1).is_some());
        prop_assert!(live(Some(&s), now + reset).is_none());
        let at = now + ((reset - 1) as i128 * i128::from(gap_frac) / 1000) as i64;
        let d = evaluate(Some(&s), &p, at, cost).decision;
        if !d.allowed {
            prop_assert!(d.retry_after_ms >= 1);
            prop_assert!(!evaluate(Some(&s), &p, at + d.retry_after_ms - 1, cost).decision.allowed);
            prop_assert!(evaluate(Some(&s), &p, at + d.retry_after_ms, cost).decision.allowed);
        }
    }
}

impl testing::Settling<LeakyBucket> for Model {
    /// Pours `count` units at `now'` above the capacity if need be (a debt).
    fn charge(&mut self, now: i64, count: u64) -> bool {
        let Some(b) = self.bucket.and_then(|b| drain_until(b, now.max(b.at))) else {
            return false;
        };
        let poured = u128::from(count) * u128::from(b.params.period_ms);
        self.bucket = Some(ModelBucket { water: b.water + poured, ..b });
        true
    }

    fn refund(&mut self, now: i64, count: u64) {
        if let Some(b) = self.bucket.and_then(|b| drain_until(b, now.max(b.at))) {
            let taken = u128::from(count) * u128::from(b.params.period_ms);
            let water = b.water.saturating_sub(taken);
            self.bucket = (water > 0).then_some(ModelBucket { water, ..b });
        }
    }

    fn live_at(&self, t: i64) -> bool {
        self.bucket.and_then(|b| drain_until(b, t)).is_some()
    }
}

proptest! {
    /// `RL.CHARGE` fills the bucket above its capacity (a debt) and `RL.REFUND` drains it
    /// after: every reply and stored level equals the ms-by-ms model's, and the key expires
    /// exactly when the model's bucket is empty.
    #[test]
    fn charges_and_refunds_match_brute_force_model(
        p in (1u64..6, 1u64..4, 1u64..7, any::<bool>()).prop_map(|(c, r, p, nodelay)| {
            params(c, r, p, if nodelay { LeakMode::NoDelay } else { LeakMode::Delay(0) })
        }),
        // At most (5 + 12 · 5) · 6 ms of water: within the model's SEARCH.
        steps in proptest::collection::vec((-10i64..30, 0u64..6, 0u8..6), 1..12),
    ) {
        let steps = testing::settle_steps(steps, p.capacity);
        testing::check_settling_against_model::<LeakyBucket, _>(
            &mut Model::default(), &p, 1000, steps,
        )?;
    }
}
