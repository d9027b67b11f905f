use super::*;
use crate::grammar::args::MAX_AT_MS;
use crate::testing::{self, check_against_model, clocked};
use proptest::prelude::*;

const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
/// 2024-01-01T00:00:00Z in unix ms.
const JAN1: i64 = 1_704_067_200_000;

fn params(limit: u64, period_ms: u64, align: Option<i64>) -> PeriodParams {
    PeriodParams::new(limit, period_ms, align).unwrap()
}

/// Drives the limiter like the shell does: stores `next`, returns the decision.
type Sim = crate::testing::Sim<PeriodWindow>;

fn reply(d: Decision) -> (bool, u64, i64, i64) {
    (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms)
}

// ---------------------------------------------------------------------------------------
// Unit tests with simulated time
// ---------------------------------------------------------------------------------------

#[test]
fn state_fits_in_56_bytes() {
    assert!(std::mem::size_of::<PeriodWindow>() <= 56, "{}", std::mem::size_of::<PeriodWindow>());
}

#[test]
fn unaligned_window_starts_at_first_admitted_call() {
    let p = params(3, 1000, None);
    let mut sim = Sim::new();
    assert_eq!(reply(sim.call(&p, 5_000, 1)), (true, 2, 0, 1000));
    assert_eq!(reply(sim.call(&p, 5_400, 1)), (true, 1, 0, 600));
    assert_eq!(reply(sim.call(&p, 5_999, 1)), (true, 0, 0, 1));
    let s = sim.state.unwrap();
    assert_eq!(
        (s.used, s.window_start_ms, s.window_end_ms, s.updated_ms),
        (3, 5_000, 6_000, 5_999)
    );
    assert_eq!(reply(sim.call(&p, 5_999, 1)), (false, 0, 1, 1));
    // The window [5000, 6000) has ended: the next admitted call opens [6500, 7500).
    assert_eq!(reply(sim.call(&p, 6_500, 2)), (true, 1, 0, 1000));
    assert_eq!(sim.state.unwrap().window_start_ms, 6_500);
}

#[test]
fn retry_after_is_exact() {
    let p = params(2, 700, None);
    let mut sim = Sim::new();
    sim.call(&p, 100, 2);
    let d = sim.call(&p, 350, 1);
    assert_eq!(reply(d), (false, 0, 450, 450));
    assert!(!evaluate(sim.state.as_ref(), &p, 350 + 449, 1).decision.allowed);
    assert!(evaluate(sim.state.as_ref(), &p, 350 + 450, 1).decision.allowed);
}

#[test]
fn reset_after_is_exact() {
    let p = params(5, 1000, None);
    let e = evaluate(None, &p, 0, 2);
    let s = e.next.unwrap();
    assert_eq!(e.decision.reset_after_ms, 1000);
    assert_eq!(s.reset_at_ms(), 1000);
    assert!(live(Some(&s), 999).is_some());
    assert!(live(Some(&s), 1000).is_none());
    // At the reset instant the limiter is exactly a fresh one.
    assert_eq!(evaluate(Some(&s), &p, 1000, 5), evaluate(None, &p, 1000, 5));
}

#[test]
fn aligned_calendar_day_in_utc_plus_8() {
    // RL.PERIOD sms:+15551234 5 1d ALIGN 8h: the day starts at 16:00 UTC.
    let p = params(5, DAY, Some(8 * HOUR as i64));
    let now = JAN1 + 20 * HOUR as i64; // 04:00 on Jan 2 in UTC+8
    let e = evaluate(None, &p, now, 1);
    let s = e.next.unwrap();
    assert_eq!(s.window_start_ms, JAN1 + 16 * HOUR as i64);
    assert_eq!(s.window_end_ms, JAN1 + 40 * HOUR as i64);
    assert_eq!(reply(e.decision), (true, 4, 0, 20 * HOUR as i64));
    // One ms before local midnight the day is still in force, at midnight it is over.
    let mut sim = Sim { state: Some(s) };
    sim.call(&p, now, 4);
    let last = JAN1 + 40 * HOUR as i64 - 1;
    assert_eq!(reply(sim.call(&p, last, 1)), (false, 0, 1, 1));
    assert_eq!(reply(sim.call(&p, last + 1, 1)), (true, 4, 0, DAY as i64));
}

#[test]
fn aligned_with_negative_offset_and_zero() {
    let p = params(1, DAY, Some(-5 * HOUR as i64)); // UTC-5: the day starts at 05:00 UTC
    let e = evaluate(None, &p, JAN1 + 3 * HOUR as i64, 1);
    assert_eq!(e.next.unwrap().window_start_ms, JAN1 - 19 * HOUR as i64);
    assert_eq!(e.decision.reset_after_ms, 2 * HOUR as i64);
    let utc = params(1, DAY, Some(0));
    let e = evaluate(None, &utc, JAN1, 1);
    assert_eq!(e.next.unwrap().window_start_ms, JAN1);
    assert_eq!(e.decision.reset_after_ms, DAY as i64);
    // Windows aligned before the epoch start at a negative instant.
    let e = evaluate(None, &params(1, 10, Some(3)), 0, 1);
    assert_eq!((e.next.unwrap().window_start_ms, e.decision.reset_after_ms), (-3, 7));
}

#[test]
fn parameters_are_checked() {
    assert_eq!(
        PeriodParams::new(0, 1000, None),
        Err(ArgError::Integer { name: "limit", min: 1, max: 1_000_000_000_000 })
    );
    assert!(PeriodParams::new(MAX_COUNT + 1, 1000, None).is_err());
    assert!(matches!(
        PeriodParams::new(1, 0, None),
        Err(ArgError::DurationRange { name: "period", .. })
    ));
    assert!(PeriodParams::new(1, MAX_DURATION_MS + 1, None).is_err());
    assert!(PeriodParams::new(1, MAX_DURATION_MS, None).is_ok());
    for bad in [1000, -1000, 5000, i64::MIN, i64::MAX] {
        let err = PeriodParams::new(1, 1000, Some(bad)).unwrap_err();
        assert!(matches!(&err, ArgError::Invalid(t) if t.starts_with("utc-offset")), "{err}");
        assert!(err.to_string().contains("999ms"), "{err}");
    }
    for good in [999, -999, 0] {
        assert!(PeriodParams::new(1, 1000, Some(good)).is_ok());
    }
    assert!(PeriodParams::new(1, 1, Some(0)).is_ok());
    assert!(PeriodParams::new(1, 1, Some(1)).is_err());
}

#[test]
fn cost_zero_and_cost_above_limit() {
    let p = params(3, 1000, None);
    let e = evaluate(None, &p, 10, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 3, 0, 0), None));
    let e = evaluate(None, &p, 10, 4);
    assert_eq!((reply(e.decision), e.next), ((false, 3, -1, 0), None));
    let mut sim = Sim::new();
    sim.call(&p, 10, 1);
    let e = evaluate(sim.state.as_ref(), &p, 500, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 2, 0, 510), None));
    let e = evaluate(sim.state.as_ref(), &p, 500, 4);
    assert_eq!((reply(e.decision), e.next), ((false, 2, -1, 510), None));
    // COST 10^12 against a limit of 10^12 fits exactly.
    let big = params(MAX_COUNT, 1000, None);
    let e = evaluate(None, &big, 0, MAX_COUNT);
    assert_eq!(reply(e.decision), (true, 0, 0, 1000));
    let e = evaluate(e.next.as_ref(), &big, 1, 1);
    assert_eq!(reply(e.decision), (false, 0, 999, 999));
}

#[test]
fn a_lower_limit_keeps_the_count_whole() {
    let p10 = params(10, 1000, None);
    let mut sim = Sim::new();
    sim.call(&p10, 0, 5);
    let p3 = params(3, 1000, None);
    assert_eq!(reply(sim.call(&p3, 100, 1)), (false, 0, 900, 900));
    let e = evaluate(sim.state.as_ref(), &p3, 100, 0);
    assert_eq!((reply(e.decision), e.next), ((true, 0, 0, 900), None));
    let p20 = params(20, 1000, None);
    assert_eq!(reply(sim.call(&p20, 200, 1)), (true, 14, 0, 800));
    assert_eq!(sim.state.unwrap().limit, 20);
}

#[test]
fn time_going_backwards_reopens_nothing() {
    let p = params(2, 1000, None);
    let mut sim = Sim::new();
    sim.call(&p, 10_000, 1);
    sim.call(&p, 10_800, 1);
    // An AT earlier than the last admitted call counts as "no time has passed".
    assert_eq!(reply(sim.call(&p, 3_000, 1)), (false, 0, 200, 200));
    assert_eq!(reply(sim.call(&p, 0, 0)), (true, 0, 0, 200));
    // Even earlier than the window's start: same answer, measured from updated_ms.
    let mut sim = Sim::new();
    sim.call(&p, 10_000, 1);
    sim.call(&p, 10_500, 1);
    sim.call(&p, 2_000, 0);
    assert_eq!(sim.state.unwrap().updated_ms, 10_500);
    // An admitted call at an earlier AT keeps updated_ms.
    let mut sim = Sim::new();
    sim.call(&p, 10_000, 1);
    assert_eq!(reply(sim.call(&p, 9_000, 1)), (true, 0, 0, 1000));
    assert_eq!(sim.state.unwrap().updated_ms, 10_000);
}

#[test]
fn longer_period_extends_the_window_from_its_start() {
    let mut sim = Sim::new();
    sim.call(&params(5, HOUR, None), 0, 3);
    let day = params(5, DAY, None);
    assert_eq!(reply(sim.call(&day, 1_000, 1)), (true, 1, 0, DAY as i64 - 1_000));
    let s = sim.state.unwrap();
    assert_eq!((s.used, s.window_start_ms, s.window_end_ms), (4, 0, DAY as i64));
}

#[test]
fn shorter_period_keeps_the_window_end() {
    let mut sim = Sim::new();
    sim.call(&params(5, DAY, None), 0, 3);
    let hour = params(5, HOUR, None);
    let at = 2 * HOUR as i64;
    assert_eq!(reply(sim.call(&hour, at, 1)), (true, 1, 0, DAY as i64 - at));
    assert_eq!(sim.state.unwrap().window_end_ms, DAY as i64);
    // From now on the stored period is 1h, but the count stays until the old end.
    let later = at + 2 * HOUR as i64;
    assert_eq!(
        reply(sim.call(&hour, later, 2)),
        (false, 1, DAY as i64 - later, DAY as i64 - later)
    );
    // After it, hourly windows.
    assert_eq!(reply(sim.call(&hour, DAY as i64 + 5, 5)), (true, 0, 0, HOUR as i64));
}

#[test]
fn switching_to_calendar_alignment_counts_toward_the_day() {
    let mut sim = Sim::new();
    let start = JAN1 + 10 * HOUR as i64;
    sim.call(&params(5, HOUR, None), start, 3);
    let daily = params(5, DAY, Some(0));
    let d = sim.call(&daily, start + 1_000, 1);
    let s = sim.state.unwrap();
    assert_eq!((s.used, s.window_start_ms, s.window_end_ms), (4, start, JAN1 + DAY as i64));
    assert_eq!(d.reset_after_ms, (JAN1 + DAY as i64) - (start + 1_000));
    // An aligned window that ends after the old one is used; one that ends before is not.
    let mut sim = Sim::new();
    sim.call(&params(5, DAY, Some(0)), JAN1 + HOUR as i64, 1);
    let hourly = params(5, HOUR, Some(0));
    sim.call(&hourly, JAN1 + 90 * 60_000, 1);
    assert_eq!(sim.state.unwrap().window_end_ms, JAN1 + DAY as i64);
}

#[test]
fn changing_the_offset_keeps_the_later_end() {
    let mut sim = Sim::new();
    let utc8 = params(3, DAY, Some(8 * HOUR as i64));
    let utc = params(3, DAY, Some(0));
    sim.call(&utc8, JAN1 + 10 * HOUR as i64, 2); // UTC+8 day ends at 16:00 UTC
    sim.call(&utc, JAN1 + 11 * HOUR as i64, 1);
    assert_eq!(sim.state.unwrap().window_end_ms, JAN1 + DAY as i64);
    let mut sim = Sim::new();
    sim.call(&utc, JAN1 + 10 * HOUR as i64, 2);
    sim.call(&utc8, JAN1 + 11 * HOUR as i64, 1);
    assert_eq!(sim.state.unwrap().window_end_ms, JAN1 + DAY as i64);
    // Aligned -> unaligned: start + new period, or the old end if later.
    let mut sim = Sim::new();
    sim.call(&utc, JAN1 + 10 * HOUR as i64, 1);
    sim.call(&params(3, 2 * DAY, None), JAN1 + 11 * HOUR as i64, 1);
    assert_eq!(sim.state.unwrap().window_end_ms, JAN1 + 2 * DAY as i64);
}

#[test]
fn a_limited_call_under_new_parameters_reports_the_stored_window() {
    let mut sim = Sim::new();
    sim.call(&params(2, 1000, None), 0, 2);
    // Under a 1-day period the count would be kept for a day, but only an admitted call
    // stores the change: the stored window resets at 1000.
    let d = sim.call(&params(2, DAY, None), 100, 1);
    assert_eq!(reply(d), (false, 0, 900, 900));
    assert!(sim.call(&params(2, DAY, None), 1000, 1).allowed);
}

// ---------------------------------------------------------------------------------------
// KEEPPERIOD: a window in force keeps its stored period and alignment
// ---------------------------------------------------------------------------------------

fn keeping(limit: u64, period_ms: u64) -> PeriodParams {
    params(limit, period_ms, None).keeping_period(true)
}

#[test]
fn keep_period_judges_a_window_in_force_with_its_own_period() {
    let mut sim = Sim::new();
    sim.call(&params(5, HOUR, None), 0, 2);
    // A 1-day KEEPPERIOD call 10 minutes in: judged in the 1-hour window, which keeps its end.
    let at = 10 * 60_000;
    assert_eq!(reply(sim.call(&keeping(5, DAY), at, 1)), (true, 2, 0, HOUR as i64 - at));
    let s = sim.state.unwrap();
    assert_eq!(
        (s.used, s.period_ms, s.window_start_ms, s.window_end_ms, s.updated_ms),
        (3, HOUR, 0, HOUR as i64, at)
    );
    // Without KEEPPERIOD the same call is a parameter change: the window's end moves.
    let mut plain = Sim::new();
    plain.call(&params(5, HOUR, None), 0, 2);
    plain.call(&params(5, DAY, None), at, 1);
    assert_eq!(plain.state.unwrap().window_end_ms, DAY as i64);
    // Refused in the window in force: the wait is to its end, and nothing is stored.
    sim.call(&keeping(5, DAY), at + 1, 2);
    let d = sim.call(&keeping(5, DAY), at + 2, 1);
    assert_eq!(reply(d), (false, 0, HOUR as i64 - at - 2, HOUR as i64 - at - 2));
    // Once it has ended, the call's period starts the next window.
    let later = HOUR as i64 + 7;
    assert_eq!(reply(sim.call(&keeping(5, DAY), later, 1)), (true, 4, 0, DAY as i64));
    let s = sim.state.unwrap();
    assert_eq!((s.period_ms, s.window_start_ms, s.window_end_ms), (DAY, later, later + DAY as i64));
}

#[test]
fn keep_period_starts_a_missing_window_with_the_calls_period() {
    let e = evaluate(None, &keeping(3, 1000), 50, 1);
    let s = e.next.unwrap();
    assert_eq!((reply(e.decision), s.period_ms, s.window_end_ms), ((true, 2, 0, 1000), 1000, 1050));
    assert_eq!(
        evaluate(None, &keeping(3, 1000), 50, 1),
        evaluate(None, &params(3, 1000, None), 50, 1)
    );
}

#[test]
fn keep_period_keeps_the_stored_alignment_and_takes_the_calls_limit() {
    let mut sim = Sim::new();
    let daily_utc8 = params(5, DAY, Some(8 * HOUR as i64));
    let start = JAN1 + 20 * HOUR as i64; // in the UTC+8 day [JAN1 + 16h, JAN1 + 40h)
    sim.call(&daily_utc8, start, 3);
    let d = sim.call(&keeping(10, HOUR), start + 1000, 4);
    let end = JAN1 + 40 * HOUR as i64;
    assert_eq!(reply(d), (true, 3, 0, end - start - 1000));
    let s = sim.state.unwrap();
    assert_eq!(
        (s.limit, s.period_ms, s.align(), s.used, s.window_end_ms),
        (10, DAY, Some(8 * HOUR as i64), 7, end)
    );
    // A lower limit refuses what the count no longer fits; judge's retry is the window's end.
    let stored = sim.state.unwrap();
    let e = crate::algorithms::limiter::judge(Some(&stored), &keeping(7, HOUR), start + 2000, 1);
    assert_eq!(reply(e.decision), (false, 0, end - start - 2000, end - start - 2000));
    assert!(e.next.is_none());
}

#[test]
fn keep_period_is_a_request_option_never_stored() {
    let p = keeping(5, HOUR);
    assert!(p.keep_period);
    assert_eq!(p.in_force(None), params(5, HOUR, None));
    let s = evaluate(None, &p, 0, 1).next.unwrap();
    assert!(!s.params().keep_period);
    assert_eq!(p.in_force(Some(&s)), params(5, HOUR, None));
    let other = keeping(9, DAY);
    assert_eq!(other.in_force(Some(&s)), params(9, HOUR, None));
    assert_eq!(params(9, DAY, None).in_force(Some(&s)), params(9, DAY, None));
}

#[test]
fn validate_accepts_produced_states_and_rejects_corrupt_ones() {
    let p = params(5, 1000, Some(-300));
    let good = evaluate(None, &p, 12_345, 2).next.unwrap();
    assert_eq!(good.validate(), Ok(()));
    assert_eq!(good.params(), p);
    assert_eq!(good.align(), Some(-300));
    let unaligned = evaluate(None, &params(5, 1000, None), 12_345, 2).next.unwrap();
    assert_eq!(unaligned.align_offset_ms, UNALIGNED);
    assert_eq!(unaligned.params().align, None);
    let corrupt = [
        PeriodWindow { limit: 0, ..good },
        PeriodWindow { period_ms: 0, ..good },
        PeriodWindow { period_ms: MAX_DURATION_MS + 1, ..good },
        PeriodWindow { align_offset_ms: 1000, ..good },
        PeriodWindow { used: 0, ..good },
        PeriodWindow { used: 5 + MAX_COUNT + 1, ..good },
        PeriodWindow { updated_ms: -1, window_start_ms: -5, ..good },
        PeriodWindow { updated_ms: MAX_AT_MS + 1, window_end_ms: MAX_AT_MS + 5, ..good },
        PeriodWindow { window_start_ms: good.updated_ms + 1, ..good },
        PeriodWindow { window_end_ms: good.updated_ms, ..good },
        PeriodWindow { window_end_ms: good.updated_ms + MAX_DURATION_MS as i64 + 1, ..good },
        PeriodWindow { window_start_ms: -(MAX_DURATION_MS as i64) - 1, ..good },
    ];
    for c in corrupt {
        assert!(c.validate().is_err(), "{c:?}");
    }
    // Above the limit: a debt (RL.CHARGE), valid but only in the codec's debt versions.
    let debt = PeriodWindow { used: 6, ..good };
    assert_eq!(debt.validate(), Ok(()));
    assert!(debt.in_debt() && !good.in_debt());
}

#[test]
fn extreme_parameters_do_not_panic() {
    let max_d = MAX_DURATION_MS as i64;
    for align in [None, Some(0), Some(max_d - 1), Some(-(max_d - 1))] {
        for (limit, period) in
            [(1, MAX_DURATION_MS), (MAX_COUNT, 1), (MAX_COUNT, MAX_DURATION_MS), (1, 1)]
        {
            let align = align.filter(|o: &i64| o.unsigned_abs() < period);
            let p = params(limit, period, align);
            for now in [0, 1, MAX_AT_MS - 1, MAX_AT_MS] {
                for cost in [0, 1, MAX_COUNT] {
                    let e = evaluate(None, &p, now, cost);
                    if let Some(s) = e.next {
                        assert_eq!(s.validate(), Ok(()));
                        let again = evaluate(Some(&s), &p, now, cost);
                        assert!(again.decision.remaining <= limit);
                        let later = evaluate(Some(&s), &p, MAX_AT_MS, 1);
                        assert!(later.decision.reset_after_ms >= 0);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Brute-force reference model
// ---------------------------------------------------------------------------------------

/// The window the model keeps: explicit start and end instants found by stepping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ModelWindow {
    params: PeriodParams,
    used: u64,
    start: i64,
    end: i64,
    updated: i64,
}

#[derive(Debug, Clone, Default)]
struct Model {
    window: Option<ModelWindow>,
}

/// Whether `t` is a window boundary of aligned parameters.
fn is_boundary(t: i64, p: &PeriodParams) -> bool {
    let offset = p.align.unwrap_or(0);
    (t + offset).rem_euclid(p.period_ms as i64) == 0
}

/// The window `p` puts around `t` for a fresh limiter, found ms by ms.
fn model_window_around(p: &PeriodParams, t: i64) -> (i64, i64) {
    match p.align {
        None => (t, t + p.period_ms as i64),
        Some(_) => {
            let mut start = t;
            while !is_boundary(start, p) {
                start -= 1;
            }
            let mut end = t + 1;
            while !is_boundary(end, p) {
                end += 1;
            }
            (start, end)
        }
    }
}

impl Model {
    fn live(&self, now: i64) -> Option<ModelWindow> {
        self.window.filter(|w| now < w.end)
    }

    /// One call; returns (allowed, now', used after, whether it stored).
    fn call(&mut self, p: &PeriodParams, now: i64, cost: u64) -> (bool, i64, u64) {
        let (now2, used, start, end) = match self.live(now) {
            None => {
                let (s, e) = model_window_around(p, now);
                (now, 0, s, e)
            }
            Some(w) => {
                let now2 = now.max(w.updated);
                let same = w.params.period_ms == p.period_ms && w.params.align == p.align;
                let end = if same {
                    w.end
                } else {
                    let candidate = match p.align {
                        Some(_) => model_window_around(p, now2).1,
                        None => w.start + p.period_ms as i64,
                    };
                    w.end.max(candidate)
                };
                (now2, w.used, w.start, end)
            }
        };
        let allowed = cost == 0 || used + cost <= p.limit;
        if allowed && cost > 0 {
            self.window =
                Some(ModelWindow { params: *p, used: used + cost, start, end, updated: now2 });
        }
        (allowed, now2, if allowed { used + cost } else { used })
    }
}

impl testing::Model<PeriodWindow> for Model {
    /// The full reply, with retry_after and reset_after found by linear search.
    fn decide(&mut self, p: &PeriodParams, now: i64, cost: u64) -> Decision {
        let before = self.clone();
        let (allowed, now2, used_after) = self.call(p, now, cost);
        let retry_after_ms = if allowed {
            0
        } else {
            (1..=SEARCH).find(|k| before.clone().call(p, now2 + k, cost).0).unwrap_or(-1)
        };
        let reset_after_ms = (0..=SEARCH).find(|k| self.live(now2 + k).is_none()).unwrap();
        Decision {
            allowed,
            limit: p.limit,
            remaining: p.limit.saturating_sub(used_after),
            retry_after_ms,
            reset_after_ms,
        }
    }

    /// The stored window equals the model's.
    fn check_state(&self, stored: Option<&PeriodWindow>) -> Result<(), TestCaseError> {
        prop_assert_eq!(
            stored.map(|s| (s.params(), s.used, s.window_start_ms, s.window_end_ms, s.updated_ms)),
            self.window.map(|m| (m.params, m.used, m.start, m.end, m.updated))
        );
        Ok(())
    }
}

/// Longest search the model needs: windows are at most two periods ahead in these tests.
const SEARCH: i64 = 400;

fn arb_params() -> impl Strategy<Value = PeriodParams> {
    (1u64..6, 1u64..40, proptest::option::of(any::<i64>())).prop_map(|(limit, period, offset)| {
        params(limit, period, offset.map(|o| o % period as i64))
    })
}

/// A call: which parameter set, the time step (negative = clock going back), the cost.
fn arb_ops() -> impl Strategy<Value = Vec<(usize, i64, u64)>> {
    proptest::collection::vec(
        (0usize..3, -30i64..60, prop_oneof![4 => 0u64..4, 1 => 0u64..9]),
        1..40,
    )
}

proptest! {
    /// The implementation agrees with the brute-force model on every reply field and every
    /// stored window, through random gaps, costs, parameter changes and backward time.
    #[test]
    fn matches_brute_force_model(
        pool in proptest::collection::vec(arb_params(), 3),
        start in 0i64..100,
        ops in arb_ops(),
    ) {
        let calls = clocked(start, ops.into_iter().map(|(i, gap, cost)| (pool[i], gap, cost)));
        check_against_model(&mut Model::default(), calls, |_, _, _, _| Ok(()))?;
    }

    /// Never more permits than before a change: once parameters B replace A while A's window
    /// (count U, end e) is in force at t1, calls under B admit at most max(0, L_B − U) units
    /// before e. If the first B call is admitted, the bound holds until the later of e and
    /// the end B gives the window (the aligned B window containing t1, or start + P_B).
    #[test]
    fn parameter_changes_never_grant_more_permits(
        a in arb_params(),
        b in arb_params(),
        start in 0i64..100,
        before in proptest::collection::vec((0i64..30, 1u64..4), 1..6),
        after in proptest::collection::vec((0i64..30, 0u64..4), 1..30),
    ) {
        let mut sim = Sim::new();
        let mut t = start;
        for (gap, cost) in before {
            t += gap;
            sim.call(&a, t, cost);
        }
        let Some(s) = sim.state.filter(|s| s.reset_at_ms() > t) else { return Ok(()) };
        let t1 = t;
        let (used, e) = (s.used, s.window_end_ms);
        let bound = b.limit.saturating_sub(used);
        let carried_end = match b.align {
            Some(_) => model_window_around(&b, t1).1.max(e),
            None => (s.window_start_ms + b.period_ms as i64).max(e),
        };
        let mut first_admitted = None;
        let (mut before_e, mut before_carried) = (0u64, 0u64);
        for (k, (gap, cost)) in after.into_iter().enumerate() {
            if k > 0 {
                t += gap;
            }
            let d = sim.call(&b, t, cost);
            if k == 0 {
                first_admitted = Some(d.allowed && cost > 0);
            }
            if d.allowed {
                if t < e {
                    before_e += cost;
                }
                if t < carried_end {
                    before_carried += cost;
                }
            }
        }
        prop_assert!(before_e <= bound, "{} > {}", before_e, bound);
        if first_admitted == Some(true) {
            prop_assert!(before_carried <= bound, "{} > {}", before_carried, bound);
        }
    }

    /// `KEEPPERIOD` is judging with the stored period and alignment (and the call's limit)
    /// whenever a window is in force, and the plain call otherwise (no window, one that has
    /// ended): through random histories of plain and `KEEPPERIOD` calls, parameter changes,
    /// backward time, and `judge`'s search for a limited call's retry.
    #[test]
    fn keep_period_is_the_stored_period_while_a_window_is_in_force(
        pool in proptest::collection::vec(arb_params(), 3),
        start in 0i64..100,
        ops in proptest::collection::vec(
            (0usize..3, -30i64..60, prop_oneof![4 => 0u64..4, 1 => 0u64..9], any::<bool>()),
            1..40,
        ),
    ) {
        let mut state: Option<PeriodWindow> = None;
        let mut t = start;
        for (i, gap, cost, keep) in ops {
            t = (t + gap).max(0);
            let call = PeriodParams { align: if keep { None } else { pool[i].align }, ..pool[i] };
            let kept = call.keeping_period(true);
            let expected_params = match live(state.as_ref(), t) {
                Some(s) => PeriodParams { limit: call.limit, ..s.params() },
                None => call,
            };
            let got = crate::algorithms::limiter::judge(state.as_ref(), &kept, t, cost);
            let expected = crate::algorithms::limiter::judge(state.as_ref(), &expected_params, t, cost);
            prop_assert_eq!(&got, &expected);
            let applied = if keep { got } else { crate::algorithms::limiter::judge(state.as_ref(), &call, t, cost) };
            if let Some(next) = applied.next {
                prop_assert_eq!(next.validate(), Ok(()));
                prop_assert!(!next.params().keep_period);
                state = Some(next);
            }
        }
    }

    /// Any stored fields at all (a corrupt payload, validation skipped): no panic anywhere.
    #[test]
    fn corrupt_states_never_panic(
        fields in (any::<u64>(), any::<u64>(), any::<i64>(), any::<u64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        p in arb_params(),
        now in prop_oneof![0i64..1000, 0i64..=MAX_AT_MS],
        cost in prop_oneof![0u64..10, any::<u64>()],
    ) {
        let (limit, period_ms, align_offset_ms, used, window_start_ms, window_end_ms, updated_ms) = fields;
        let s = PeriodWindow { limit, period_ms, align_offset_ms, used, window_start_ms, window_end_ms, updated_ms };
        let _ = s.validate();
        let _ = s.reset_at_ms();
        let _ = s.params();
        let e = evaluate(Some(&s), &p, now, cost);
        prop_assert!(e.decision.remaining <= p.limit);
    }

    /// Retry and reset exactness at arbitrary scales (large periods and limits), checked
    /// directly rather than through the model.
    #[test]
    fn retry_and_reset_are_exact_at_any_scale(
        limit in 1u64..=MAX_COUNT,
        period in 1u64..=MAX_DURATION_MS,
        offset in any::<i64>(),
        aligned in any::<bool>(),
        now in 0i64..=MAX_AT_MS,
        frac in 0u64..=1000,
    ) {
        let p = params(limit, period, aligned.then(|| offset % period as i64));
        let e = evaluate(None, &p, now, limit);
        let s = e.next.unwrap();
        prop_assert_eq!(s.validate(), Ok(()));
        let reset = e.decision.reset_after_ms;
        prop_assert!(reset >= 1 && reset as u64 <= period);
        prop_assert!(live(Some(&s), now + reset - 1).is_some());
        prop_assert!(live(Some(&s), now + reset).is_none());
        let later = now + ((reset - 1) as i128 * i128::from(frac) / 1000) as i64;
        let d = evaluate(Some(&s), &p, later, 1).decision;
        prop_assert!(!d.allowed);
        prop_assert_eq!(d.retry_after_ms, now + reset - later);
        prop_assert!(!evaluate(Some(&s), &p, later + d.retry_after_ms - 1, 1).decision.allowed);
        prop_assert!(evaluate(Some(&s), &p, later + d.retry_after_ms, 1).decision.allowed);
    }
}

impl testing::Settling<PeriodWindow> for Model {
    /// Counts `count` more in the window in force, beyond the limit if need be (a debt
    /// forgotten when the window ends).
    fn charge(&mut self, now: i64, count: u64) -> bool {
        let Some(w) = self.live(now) else {
            return false;
        };
        self.window = Some(ModelWindow { used: w.used + count, updated: now.max(w.updated), ..w });
        true
    }

    fn refund(&mut self, now: i64, count: u64) {
        if let Some(w) = self.live(now) {
            let used = w.used.saturating_sub(count);
            let updated = now.max(w.updated);
            self.window = (used > 0).then_some(ModelWindow { used, updated, ..w });
        }
    }

    fn live_at(&self, t: i64) -> bool {
        self.live(t).is_some()
    }
}

proptest! {
    /// `RL.CHARGE` counts past the limit (a debt until the window ends) and `RL.REFUND`
    /// gives back after it: every reply and stored window equals the model's, and the key
    /// expires exactly when the model's window ends.
    #[test]
    fn charges_and_refunds_match_brute_force_model(
        p in arb_params(),
        steps in proptest::collection::vec((-30i64..60, 0u64..6, 0u8..6), 1..30),
    ) {
        let steps = testing::settle_steps(steps, u64::MAX);
        testing::check_settling_against_model::<PeriodWindow, _>(
            &mut Model::default(), &p, 1000, steps,
        )?;
    }
}
