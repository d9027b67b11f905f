//! Test support shared by every algorithm's tests: a simulated-clock driver ([`Sim`]) that
//! stores state the way the command shell does and checks, at every call, what every
//! algorithm promises; and a model-check harness ([`check_against_model`]) that runs an
//! algorithm and a brute-force reference ([`Model`]) over the same calls and compares every
//! reply field and stored state.

mod fuzz_tests;

use std::fmt::Debug;

use proptest::prelude::{prop_assert_eq, TestCaseError};

use crate::algorithms::decision::Decision;
use crate::algorithms::gcra::{throttle_reply, GcraState};
use crate::algorithms::limiter::{Limiter, Variant};
use crate::algorithms::state::live;

/// Drives a limiter with simulated time like the shell does: evaluates each call against the
/// stored state and stores `next`. Every call checks that
/// * a new state comes exactly with an admitted call of cost > 0, validates, has
///   `updated_ms = now'` (`max(now, updated_ms)` of the live stored state), and resets exactly
///   `reset_after_ms` after `now'`;
/// * where the algorithm updates a stored state in place ([`Variant::evaluate_in_place`]), the
///   in-place path gives the same decision, and the same state (unchanged for a dry run).
#[derive(Debug)]
pub struct Sim<V: Variant> {
    pub state: Option<V>,
}

impl<V: Variant> Default for Sim<V> {
    fn default() -> Self {
        Sim { state: None }
    }
}

impl<V> Sim<V>
where
    V: Variant + Clone + PartialEq + Debug,
{
    pub fn new() -> Self {
        Self::default()
    }

    /// `now'` for a call at `now`: never earlier than the live stored state's last admitted
    /// call.
    pub fn now2(&self, now: i64) -> i64 {
        live(self.state.as_ref(), now).map_or(now, |s| now.max(s.updated_ms()))
    }

    /// One call: evaluates, checks (see [`Sim`]), stores `next`, returns the decision.
    pub fn call(&mut self, p: &V::Params, now: i64, cost: u64) -> Decision {
        let e = V::evaluate(self.state.as_ref(), p, now, cost);
        assert_eq!(e.next.is_some(), e.decision.allowed && cost > 0, "{:?}", e.decision);
        if let Some(s) = &self.state {
            let mut copy = s.clone();
            if let Some((d, changed)) = copy.evaluate_in_place(p, now, cost, false) {
                assert_eq!(d, e.decision);
                assert!(!changed);
                assert_eq!(&copy, s);
                let Some((d, changed)) = copy.evaluate_in_place(p, now, cost, true) else {
                    panic!("the in-place path answered the dry run but not the call");
                };
                assert_eq!(d, e.decision);
                assert_eq!(changed, e.next.is_some());
                if let Some(n) = &e.next {
                    assert_eq!(&copy, n);
                }
            }
        }
        if let Some(n) = e.next {
            n.validate().unwrap_or_else(|err| panic!("{err}: {n:?}"));
            let t = self.now2(now);
            assert_eq!(n.updated_ms(), t);
            assert_eq!(
                i128::from(n.reset_at_ms()) - i128::from(t),
                i128::from(e.decision.reset_after_ms)
            );
            self.state = Some(n);
        }
        e.decision
    }

    /// [`Sim::call`] as the five integers of the `RL.*` reply.
    pub fn reply(&mut self, p: &V::Params, now: i64, cost: u64) -> [i64; 5] {
        self.call(p, now, cost).to_reply()
    }

    /// The decision a call would get, storing nothing (a dry run).
    pub fn peek(&self, p: &V::Params, now: i64, cost: u64) -> Decision {
        V::evaluate(self.state.as_ref(), p, now, cost).decision
    }
}

impl Sim<GcraState> {
    /// [`Sim::call`] as `CL.THROTTLE` replies (redis-cell's layout).
    pub fn throttle(&mut self, p: &<GcraState as Variant>::Params, now: i64, q: u64) -> [i64; 5] {
        throttle_reply(&self.call(p, now, q))
    }
}

/// A brute-force reference for one algorithm: the same calls answered by explicit
/// enumeration (event lists, ms-by-ms scans, exact rationals) rather than the algorithm's
/// closed forms. Each algorithm's tests keep their own model.
pub trait Model<V: Variant> {
    /// Answers one call, updating the reference's own state as the algorithm's would be.
    fn decide(&mut self, p: &V::Params, now: i64, cost: u64) -> Decision;

    /// Compares the algorithm's stored state after a call with the reference's (by default
    /// the reference keeps nothing comparable).
    fn check_state(&self, _stored: Option<&V>) -> Result<(), TestCaseError> {
        Ok(())
    }
}

/// One call of a checked sequence.
#[derive(Debug, Clone, Copy)]
pub struct Call<P> {
    pub params: P,
    pub now: i64,
    pub cost: u64,
}

/// Calls at absolute instants from `(params, gap, cost)` steps: the clock starts at `start`
/// and moves by each gap (negative: the clock goes back), never below 0.
pub fn clocked<P>(
    start: i64,
    steps: impl IntoIterator<Item = (P, i64, u64)>,
) -> impl Iterator<Item = Call<P>> {
    steps.into_iter().scan(start, |now, (params, gap, cost)| {
        *now = (*now + gap).max(0);
        Some(Call { params, now: *now, cost })
    })
}

/// Runs `calls` through a fresh [`Sim`] (with all its checks) and through `model`: every
/// decision must equal the model's field for field, and every stored state pass
/// [`Model::check_state`]. After each call `each` checks the test's own properties (it sees
/// the simulator, the model, the call and its decision). Returns the simulator.
pub fn check_against_model<V, M>(
    model: &mut M,
    calls: impl IntoIterator<Item = Call<V::Params>>,
    mut each: impl FnMut(&Sim<V>, &M, &Call<V::Params>, &Decision) -> Result<(), TestCaseError>,
) -> Result<Sim<V>, TestCaseError>
where
    V: Variant + Clone + PartialEq + Debug,
    V::Params: Debug,
    M: Model<V>,
{
    let mut sim = Sim::new();
    for call in calls {
        let got = sim.call(&call.params, call.now, call.cost);
        let want = model.decide(&call.params, call.now, call.cost);
        prop_assert_eq!(got, want, "{:?}", call);
        model.check_state(sim.state.as_ref())?;
        each(&sim, model, &call, &got)?;
    }
    Ok(sim)
}

/// One step of a settle sequence: a call of a cost (with the sequence's parameters), or
/// `RL.CHARGE` / `RL.REFUND` of a count on the stored limiter.
#[derive(Debug, Clone, Copy)]
pub enum Settle {
    Call(u64),
    Charge(u64),
    Refund(u64),
}

/// Settle steps from generated `(gap, n, kind)` triples: kinds 0 and 1 charge `n` (at least
/// 1), 2 refunds `n` (at least 1), others call with cost `n` (at most `max_cost`).
pub fn settle_steps(raw: Vec<(i64, u64, u8)>, max_cost: u64) -> Vec<(i64, Settle)> {
    raw.into_iter()
        .map(|(gap, n, kind)| {
            let step = match kind {
                0 | 1 => Settle::Charge(n.max(1)),
                2 => Settle::Refund(n.max(1)),
                _ => Settle::Call(n.min(max_cost)),
            };
            (gap, step)
        })
        .collect()
}

/// A reference [`Model`] that also settles: takes permits whatever the limit (a debt) and
/// gives them back, as `RL.CHARGE` and `RL.REFUND` do, on a live limiter only.
pub trait Settling<V: Variant>: Model<V> {
    /// Takes `count` permits at `now` whatever the limit; `false` (nothing done) when the
    /// reference holds nothing live.
    fn charge(&mut self, now: i64, count: u64) -> bool;
    /// Gives `count` permits back at `now`, never beyond a fresh limiter (which it forgets).
    fn refund(&mut self, now: i64, count: u64);
    /// Whether the reference holds a limiter at `t` that is not back in its initial state.
    fn live_at(&self, t: i64) -> bool;
}

/// Runs `steps` (time gaps and [`Settle`] steps, all with parameters `p`) from `start` through
/// the algorithm and the reference: every call's decision equal field for field, every
/// charge taken exactly when the reference holds a live limiter, every stored state passing
/// [`Model::check_state`], every charged state valid, persisted by the codec (in a debt
/// version when in debt) and the packed form, and — the key's expiry — a live stored state
/// reset exactly when the reference is back in its initial state (never while in debt).
pub fn check_settling_against_model<V, M>(
    model: &mut M,
    p: &V::Params,
    start: i64,
    steps: impl IntoIterator<Item = (i64, Settle)>,
) -> Result<(), TestCaseError>
where
    V: Variant + Clone + PartialEq + Debug,
    V::Params: Debug,
    M: Settling<V>,
{
    use crate::algorithms::state::{Charged, Refunded};
    use crate::store::codec::{decode_value, encode_value, IN_DEBT};
    use crate::store::packed::PackedLimiter;
    use proptest::prelude::prop_assert;

    let mut sim = Sim::<V>::new();
    let mut now = start;
    for (gap, step) in steps {
        now = (now + gap).max(0);
        let held = live(sim.state.as_ref(), now).cloned();
        match step {
            Settle::Call(cost) => {
                let got = sim.call(p, now, cost);
                prop_assert_eq!(got, model.decide(p, now, cost), "call {} at {}", cost, now);
            }
            Settle::Charge(count) => {
                prop_assert_eq!(held.is_some(), model.charge(now, count), "charge at {}", now);
                if let Some(s) = held {
                    let Charged::To(next) = s.charge(now, count) else {
                        return Err(TestCaseError::fail(format!("not charged: {s:?}")));
                    };
                    prop_assert_eq!(next.validate(), Ok(()), "{:?}", next);
                    prop_assert_eq!(next.updated_ms(), now.max(s.updated_ms()));
                    prop_assert!(next.reset_at_ms() >= s.reset_at_ms(), "expiry only later");
                    let limiter = next.clone().into_limiter();
                    let bytes = encode_value(&limiter, None);
                    prop_assert_eq!(bytes[0] == IN_DEBT, limiter.in_debt());
                    prop_assert_eq!(decode_value(&bytes), Ok((limiter.clone(), None)));
                    prop_assert_eq!(
                        PackedLimiter::new(limiter.clone()).view(Limiter::clone),
                        limiter.clone()
                    );
                    // Held inline when its fields fit the shape's widths: exactly.
                    let mut table = crate::store::inline::InlineTable::new(4);
                    if let Some(e) = table.encode(&limiter, None) {
                        prop_assert_eq!(table.expand(e.word, e.extra), Some(limiter));
                    }
                    sim.state = Some(next);
                }
            }
            Settle::Refund(count) => {
                model.refund(now, count);
                if let Some(s) = held {
                    match s.refund(now, count) {
                        Refunded::Nothing => {}
                        Refunded::Fresh => sim.state = None,
                        Refunded::To(next) => sim.state = Some(next),
                    }
                }
            }
        }
        model.check_state(sim.state.as_ref())?;
        if let Some(s) = live(sim.state.as_ref(), now) {
            let reset = s.reset_at_ms();
            prop_assert!(model.live_at(reset - 1), "expires before its debt is paid: {:?}", s);
            prop_assert!(!model.live_at(reset), "expires late: {:?}", s);
        }
    }
    Ok(())
}
