use super::*;
use crate::grammar::args::{MAX_AT_MS, MAX_COUNT, MAX_DURATION_MS};
use crate::testing::{self, check_against_model, clocked};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;

fn smooth(capacity: u64, rate: u64, period_ms: u64) -> TokenParams {
    TokenParams::new(capacity, rate, period_ms, false).unwrap()
}

fn step(capacity: u64, rate: u64, period_ms: u64) -> TokenParams {
    TokenParams::new(capacity, rate, period_ms, true).unwrap()
}

/// Drives the limiter like the shell does: stores `next`, returns the decision.
type Sim = crate::testing::Sim<TokenBucket>;

#[test]
fn readme_example_first_call() {
    let mut s = Sim::new();
    assert_eq!(s.reply(&smooth(10, 1, 1000), T0, 1), [1, 10, 9, 0, 1000]);
}

#[test]
fn smooth_refill_scenario() {
    let p = smooth(3, 1, 1000);
    let mut s = Sim::new();
    assert_eq!(s.reply(&p, T0, 1), [1, 3, 2, 0, 1000]);
    assert_eq!(s.reply(&p, T0, 1), [1, 3, 1, 0, 2000]);
    assert_eq!(s.reply(&p, T0, 1), [1, 3, 0, 0, 3000]);
    assert_eq!(s.reply(&p, T0, 1), [0, 3, 0, 1000, 3000]);
    assert_eq!(s.reply(&p, T0 + 999, 1), [0, 3, 0, 1, 2001]);
    assert_eq!(s.reply(&p, T0 + 1000, 1), [1, 3, 0, 0, 3000]);
    assert_eq!(s.reply(&p, T0 + 1500, 2), [0, 3, 0, 1500, 2500]);
    assert_eq!(s.reply(&p, T0 + 1500, 4), [0, 3, 0, -1, 2500]);
}

#[test]
fn exact_fractions_three_per_seven_ms() {
    // 3 tokens per 7 ms: after 1 ms a token is 3/7 refilled.
    let p = smooth(1, 3, 7);
    let mut s = Sim::new();
    assert_eq!(s.reply(&p, T0, 1), [1, 1, 0, 0, 3]); // ⌈7/3⌉ = 3
    assert_eq!(s.reply(&p, T0 + 2, 1), [0, 1, 0, 1, 1]); // 6/7 there, 1/7 missing
    assert_eq!(s.reply(&p, T0 + 3, 1), [1, 1, 0, 0, 3]);
}

#[test]
fn step_refill_follows_the_grid() {
    let p = step(5, 2, 1000);
    let mut s = Sim::new();
    assert_eq!(s.reply(&p, T0, 5), [1, 5, 0, 0, 3000]); // grid at T0: +2,+2,+2
    assert_eq!(s.reply(&p, T0 + 999, 1), [0, 5, 0, 1, 2001]);
    assert_eq!(s.reply(&p, T0 + 1000, 1), [1, 5, 1, 0, 2000]);
    assert_eq!(s.reply(&p, T0 + 1500, 4), [0, 5, 1, 1500, 1500]);
    // Full again at T0 + 3000: back to the initial state; a new grid starts at the next call.
    assert_eq!(s.reply(&p, T0 + 3500, 1), [1, 5, 4, 0, 1000]);
    assert_eq!(s.state.unwrap().refill, Refill::Step { origin_ms: T0 + 3500 });
}

#[test]
fn cost_zero_is_a_peek_and_stores_nothing() {
    let p = smooth(10, 1, 1000);
    let e = evaluate(None, &p, T0, 0);
    assert_eq!(e.decision.to_reply(), [1, 10, 10, 0, 0]);
    assert!(e.next.is_none());
}

#[test]
fn limited_requests_store_nothing() {
    let p = smooth(1, 1, 1000);
    let mut s = Sim::new();
    s.reply(&p, T0, 1);
    let e = evaluate(s.state.as_ref(), &p, T0 + 10, 1);
    assert!(!e.decision.allowed);
    assert!(e.next.is_none());
}

#[test]
fn time_going_backwards_grants_nothing() {
    let p = smooth(10, 1, 1000);
    let mut s = Sim::new();
    s.reply(&p, T0, 10);
    // An hour earlier: counts as no time passed since T0.
    assert_eq!(s.reply(&p, T0 - 3_600_000, 1), [0, 10, 0, 1000, 10_000]);
    assert_eq!(s.reply(&p, T0 + 1000, 1), [1, 10, 0, 0, 10_000]);
    assert_eq!(s.state.unwrap().updated_ms, T0 + 1000);
    // An admitted call at an earlier clock keeps updated_ms (never moves back).
    assert_eq!(s.reply(&p, 5, 0), [1, 10, 0, 0, 10_000]);
}

#[test]
fn parameter_changes_never_top_up() {
    let mut s = Sim::new();
    s.reply(&smooth(10, 1, 1000), T0, 5); // 5 left
                                          // Larger capacity: still 5, not topped up.
    assert_eq!(s.reply(&smooth(100, 1, 1000), T0, 1), [1, 100, 4, 0, 96_000]);
    // Smaller capacity clamps.
    assert_eq!(s.reply(&smooth(2, 1, 1000), T0, 1), [1, 2, 1, 0, 1000]);
}

#[test]
fn period_change_rounds_fractions_down() {
    let mut s = Sim::new();
    s.reply(&smooth(2, 1, 3), T0, 2); // empty
                                      // 1 ms later: 1/3 token. Under period 2 that is floor(1/3 * 2)/2 = 0 of a token.
    let e = evaluate(s.state.as_ref(), &smooth(2, 1, 2), T0 + 1, 1);
    assert_eq!(e.decision.to_reply(), [0, 2, 0, 2, 4]);
}

#[test]
fn mode_switch_is_conservative() {
    let mut s = Sim::new();
    s.reply(&smooth(10, 1, 1000), T0, 10);
    // 2.5 tokens accrued; switching to STEP keeps 2 and restarts the grid now.
    let e = evaluate(s.state.as_ref(), &step(10, 1, 1000), T0 + 2500, 1);
    assert_eq!(e.decision.to_reply(), [1, 10, 1, 0, 9000]);
    assert_eq!(e.next.unwrap().refill, Refill::Step { origin_ms: T0 + 2500 });
}

#[test]
fn expired_state_counts_as_missing() {
    let mut s = Sim::new();
    s.reply(&smooth(10, 1, 1000), T0, 3);
    let stored = s.state.unwrap();
    assert_eq!(stored.reset_at_ms(), T0 + 3000);
    // At the reset instant, a larger capacity starts full (as a missing key would).
    let e = evaluate(Some(&stored), &smooth(20, 1, 1000), T0 + 3000, 1);
    assert_eq!(e.decision.remaining, 19);
    let e = evaluate(Some(&stored), &smooth(20, 1, 1000), T0 + 2999, 1);
    assert_eq!(e.decision.remaining, 8); // 9.999 tokens, minus 1
}

#[test]
fn hundred_year_rule() {
    assert!(TokenParams::new(MAX_COUNT, 1, 1, false).is_ok()); // 10^12 ms ≈ 31.7 years
    assert!(matches!(
        TokenParams::new(MAX_COUNT, 1, 10, false),
        Err(ArgError::ResetTooLong { .. })
    ));
    assert!(TokenParams::new(1, 1, MAX_DURATION_MS, true).is_ok());
    assert!(matches!(
        TokenParams::new(11, 1, MAX_DURATION_MS, true),
        Err(ArgError::ResetTooLong { .. })
    ));
}

#[test]
fn extreme_parameters_are_exact() {
    // 1 token per 10 years.
    let p = smooth(1, 1, MAX_DURATION_MS);
    let mut s = Sim::new();
    assert_eq!(s.reply(&p, 0, 1)[4], MAX_DURATION_MS as i64);
    assert_eq!(s.reply(&p, MAX_DURATION_MS as i64 - 1, 1)[3], 1);
    // 10^12 per ms, cost 10^12.
    let p = smooth(MAX_COUNT, MAX_COUNT, 1);
    let mut s = Sim::new();
    assert_eq!(s.reply(&p, MAX_AT_MS, MAX_COUNT), [1, MAX_COUNT as i64, 0, 0, 1]);
    assert_eq!(s.reply(&p, MAX_AT_MS, 1), [0, MAX_COUNT as i64, 0, 1, 1]);
}

#[test]
fn validate_accepts_produced_states_and_refuses_corrupt_ones() {
    let mut s = Sim::new();
    s.reply(&smooth(10, 3, 7), T0, 4);
    let good = s.state.unwrap();
    assert_eq!(good.validate(), Ok(()));
    let corrupt = [
        TokenBucket { tokens: 11, ..good },
        TokenBucket { capacity: 0, ..good },
        TokenBucket { refill: Refill::Smooth { fraction: 7 }, ..good },
        TokenBucket { updated_ms: -1, ..good },
        TokenBucket { refill: Refill::Step { origin_ms: T0 + 1 }, ..good },
        TokenBucket { period_ms: 0, ..good },
    ];
    for c in corrupt {
        assert!(c.validate().is_err(), "{c:?}");
        // Even unvalidated, evaluating a corrupt state never panics.
        let _ = evaluate(Some(&c), &smooth(10, 3, 7), T0 + 5, 1);
        let _ = c.reset_at_ms();
    }
}

/// Brute-force reference: the level advances one millisecond at a time.
#[derive(Debug, Clone)]
struct Model {
    params: TokenParams,
    /// Smooth: in 1/period_ms tokens. Step: whole tokens. Below zero: a debt (RL.CHARGE).
    level: i128,
    origin: i64,
    at: i64,
}

impl Model {
    fn scale(p: &TokenParams) -> i128 {
        if p.step {
            1
        } else {
            i128::from(p.period_ms)
        }
    }

    fn cap(&self) -> i128 {
        i128::from(self.params.capacity) * Self::scale(&self.params)
    }

    fn tick_to(&mut self, t: i64) {
        while self.at < t {
            self.at += 1;
            let on_grid = (self.at - self.origin) % self.params.period_ms as i64 == 0;
            let gain = if !self.params.step || on_grid { i128::from(self.params.rate) } else { 0 };
            self.level = (self.level + gain).min(self.cap());
        }
    }

    fn full(&self) -> bool {
        self.level == self.cap()
    }

    /// First ms offset at which the level reaches `target` (searching forward).
    fn wait_for(&self, target: i128) -> i64 {
        let mut m = self.clone();
        let start = m.at;
        while m.level < target {
            m.tick_to(m.at + 1);
        }
        m.at - start
    }
}

/// The model's view of one request: `(decision, state after)`.
fn model_call(
    state: &Option<Model>,
    p: &TokenParams,
    now: i64,
    cost: u64,
) -> (Decision, Option<Model>) {
    let mut live = state.clone().and_then(|mut m| {
        let probe_at = now.max(m.at);
        let mut probe = m.clone();
        probe.tick_to(now.max(probe.at));
        if now >= m.at && probe.full() {
            return None;
        }
        m.tick_to(probe_at);
        Some(m)
    });
    let m = match live.take() {
        None => Model {
            params: *p,
            level: i128::from(p.capacity) * Model::scale(p),
            origin: now,
            at: now,
        },
        Some(old) => {
            let whole = old.level.div_euclid(Model::scale(&old.params));
            let (level, origin) = match (old.params.step, p.step) {
                (false, false) => {
                    let (n, d) =
                        (old.level * i128::from(p.period_ms), i128::from(old.params.period_ms));
                    (if n >= 0 { n / d } else { -((-n + d - 1) / d) }, old.at)
                }
                (false, true) => (whole, old.at),
                (true, false) => (whole * i128::from(p.period_ms), old.at),
                (true, true) if old.params.period_ms == p.period_ms => (old.level, old.origin),
                (true, true) => (old.level, old.at),
            };
            let mut m = Model { params: *p, level, origin, at: old.at };
            m.level = m.level.min(m.cap());
            m
        }
    };
    let need = i128::from(cost) * Model::scale(p);
    let allowed = m.level >= need && m.level >= 0;
    let mut after = m.clone();
    if allowed {
        after.level -= need;
    }
    let retry = if allowed {
        0
    } else if cost > p.capacity {
        -1
    } else {
        m.wait_for(need)
    };
    let reply = Decision {
        allowed,
        limit: p.capacity,
        remaining: after.level.max(0).div_euclid(Model::scale(p)) as u64,
        retry_after_ms: retry,
        reset_after_ms: after.wait_for(after.cap()),
    };
    let next =
        if allowed && cost > 0 { Some(after) } else { state.clone().map(|_| m).filter(|_| false) };
    let kept = next.or_else(|| state.clone());
    (reply, kept)
}

/// The model's bucket (`None` before the first admitted call).
impl testing::Model<TokenBucket> for Option<Model> {
    fn decide(&mut self, p: &TokenParams, now: i64, cost: u64) -> Decision {
        let (decision, next) = model_call(self, p, now, cost);
        *self = next;
        decision
    }
}

fn small_params() -> impl Strategy<Value = TokenParams> {
    (1u64..=6, 1u64..=4, 1u64..=40, any::<bool>())
        .prop_filter_map("valid", |(c, r, p, s)| TokenParams::new(c, r, p, s).ok())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Every reply field equals the brute-force model, across random gaps (including time
    /// going backwards), costs (including 0 and above capacity) and parameter changes.
    #[test]
    fn matches_brute_force_model(
        steps in proptest::collection::vec((-60i64..120, 0usize..3, 0u64..=8), 1..40),
        params in proptest::collection::vec(small_params(), 3),
    ) {
        // (The clock stays far above 0: T0 minus at most 40 × 60 ms.)
        let calls = clocked(T0, steps.into_iter().map(|(gap, which, cost)| (params[which], gap, cost)));
        check_against_model(&mut None::<Model>, calls, |_, _, _, _| Ok(()))?;
    }

    /// Waiting exactly `retry_after_ms` admits the same request; one ms earlier does not.
    #[test]
    fn retry_after_is_exact(
        p in small_params(),
        first in 1u64..=6,
        gap in 0i64..100,
        cost in 1u64..=6,
    ) {
        let mut sim = Sim::new();
        sim.reply(&p, T0, first.min(p.capacity));
        let e = evaluate(sim.state.as_ref(), &p, T0 + gap, cost);
        if !e.decision.allowed && e.decision.retry_after_ms > 0 {
            let now = T0 + gap;
            let at = now + e.decision.retry_after_ms;
            prop_assert!(evaluate(sim.state.as_ref(), &p, at, cost).decision.allowed);
            prop_assert!(!evaluate(sim.state.as_ref(), &p, at - 1, cost).decision.allowed);
        }
    }

    /// The stored reset instant is exactly when the bucket is full again: a full-capacity
    /// request is admitted then, and not one ms earlier.
    #[test]
    fn reset_after_is_exact(p in small_params(), cost in 1u64..=6, gap in 0i64..50) {
        let mut sim = Sim::new();
        sim.reply(&p, T0, cost.min(p.capacity));
        let e = evaluate(sim.state.as_ref(), &p, T0 + gap, 0);
        let reset = e.decision.reset_after_ms;
        prop_assert!(reset > 0 || gap > 0);
        let at = (T0 + gap).max(T0) + reset;
        prop_assert!(evaluate(sim.state.as_ref(), &p, at, p.capacity).decision.allowed);
        if reset > 0 {
            prop_assert!(!evaluate(sim.state.as_ref(), &p, at - 1, p.capacity).decision.allowed);
        }
    }

    /// No panic and sane fields for any in-range parameters and instants.
    #[test]
    fn total_on_extreme_inputs(
        c in 1u64..=MAX_COUNT, r in 1u64..=MAX_COUNT, per in 1u64..=MAX_DURATION_MS,
        st in any::<bool>(), t1 in 0i64..=MAX_AT_MS, t2 in 0i64..=MAX_AT_MS, cost in 0u64..=MAX_COUNT,
    ) {
        if let Ok(p) = TokenParams::new(c, r, per, st) {
            let mut s = Sim::new();
            s.reply(&p, t1, cost);
            let reply = s.reply(&p, t2, cost);
            prop_assert!(reply[2] >= 0 && reply[2] as u64 <= c);
            prop_assert!(reply[3] >= -1 && reply[4] >= 0);
            prop_assert!(reply[4] as u128 <= crate::grammar::args::MAX_RESET_MS);
        }
    }
}

impl testing::Settling<TokenBucket> for Option<Model> {
    /// The level at `now'` minus `count` tokens, below zero if need be (a debt).
    fn charge(&mut self, now: i64, count: u64) -> bool {
        let Some(mut m) = self.clone().filter(|m| live_model(m, now)) else {
            return false;
        };
        m.tick_to(now.max(m.at));
        m.level -= i128::from(count) * Model::scale(&m.params);
        *self = Some(m);
        true
    }

    fn refund(&mut self, now: i64, count: u64) {
        if let Some(mut m) = self.clone().filter(|m| live_model(m, now)) {
            m.tick_to(now.max(m.at));
            m.level = (m.level + i128::from(count) * Model::scale(&m.params)).min(m.cap());
            *self = (!m.full()).then_some(m);
        }
    }

    fn live_at(&self, t: i64) -> bool {
        self.as_ref().is_some_and(|m| live_model(m, t))
    }
}

/// Whether the model's bucket is not yet full again at `t` (ms by ms).
fn live_model(m: &Model, t: i64) -> bool {
    let mut probe = m.clone();
    probe.tick_to(t.max(probe.at));
    !probe.full()
}

proptest! {
    /// `RL.CHARGE` takes the level below empty (a debt) and `RL.REFUND` gives back after it,
    /// in both refill modes: every reply equals the ms-by-ms model's, whose level goes below
    /// zero, and the key expires exactly when that bucket is full again.
    #[test]
    fn charges_and_refunds_match_brute_force_model(
        p in small_params(),
        steps in proptest::collection::vec((-20i64..60, 0u64..7, 0u8..6), 1..16),
    ) {
        let steps = testing::settle_steps(steps, u64::MAX);
        testing::check_settling_against_model::<TokenBucket, _>(&mut None, &p, 1000, steps)?;
    }
}
