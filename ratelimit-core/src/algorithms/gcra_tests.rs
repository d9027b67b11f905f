use super::*;
use crate::grammar::args::MAX_DURATION_MS;
use crate::testing::{self, check_against_model, clocked};
use proptest::prelude::*;
use std::cmp::Ordering;

const T0: i64 = 1_700_000_000_000;

fn params(max_burst: u64, count: u64, period_s: u64) -> GcraParams {
    GcraParams::new(max_burst, count, period_s).unwrap()
}

/// A limiter driven through `evaluate` the way the command shell does (no DRYRUN);
/// `throttle` gives the replies `CL.THROTTLE` gives.
type Sim = crate::testing::Sim<GcraState>;

// ---------------------------------------------------------------------------------------------
// Hand-worked cases against redis-cell's documented semantics and its own tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn readme_example() {
    // `CL.THROTTLE user123 15 30 60 1` on a fresh key → 0 16 15 -1 2 (T = 2 s, τ = 32 s).
    let p = params(15, 30, 60);
    let e = evaluate(None, &p, T0, 1);
    assert_eq!(throttle_reply(&e.decision), [0, 16, 15, -1, 2]);
    assert_eq!(e.decision.to_reply(), [1, 16, 15, 0, 2000]);
    let next = e.next.unwrap();
    assert_eq!((next.tat_ms, next.tat_frac, next.updated_ms), (T0 + 2000, 0, T0));
    assert_eq!(next.reset_at_ms(), T0 + 2000);
}

#[test]
fn readme_burst_is_exhausted_then_refills() {
    let p = params(15, 30, 60);
    let mut h = Sim::new();
    for i in 1..=16i64 {
        assert_eq!(h.throttle(&p, T0, 1), [0, 16, 16 - i, -1, 2 * i], "call {i}");
    }
    // 17th: limited; one permit comes back after T = 2 s; full after τ = 32 s.
    assert_eq!(h.call(&p, T0, 1).to_reply(), [0, 16, 0, 2000, 32_000]);
    assert_eq!(h.throttle(&p, T0, 1), [1, 16, 0, 2, 32]);
    // 1 ms before the retry instant: still limited, 1 ms to go (a whole second in redis-cell's
    // layout); reset 30.001 s → 31 s.
    assert_eq!(h.call(&p, T0 + 1999, 1).to_reply(), [0, 16, 0, 1, 30_001]);
    assert_eq!(h.throttle(&p, T0 + 1999, 1), [1, 16, 0, 1, 31]);
    // At the retry instant: admitted, and the limiter is again 32 s from full.
    assert_eq!(h.throttle(&p, T0 + 2000, 1), [0, 16, 0, -1, 32]);
    // 10 s later 5 permits are back: one is taken, 4 remain; 24 s until full.
    assert_eq!(h.throttle(&p, T0 + 12_000, 1), [0, 16, 4, -1, 24]);
    // A peek shows the same state without taking anything.
    assert_eq!(h.throttle(&p, T0 + 12_000, 0), [0, 16, 4, -1, 24]);
    // After 24 s more the key is back in its initial state (gone).
    let state = h.state.unwrap();
    assert_eq!(state.reset_at_ms(), T0 + 36_000);
    assert!(live(Some(&state), T0 + 35_999).is_some());
    assert!(live(Some(&state), T0 + 36_000).is_none());
    assert_eq!(h.throttle(&p, T0 + 36_000, 0), [0, 16, 16, -1, 0]);
}

/// redis-cell's own `it_rate_limits` table (limit 5, 1 per second), case by case:
/// (offset ms, quantity, limited, remaining, reset_after, retry_after) with times in ms as
/// the test states them; redis-cell's retry_after is -1 s when allowed.
#[test]
fn redis_cell_rate_limit_table() {
    let p = params(4, 1, 1);
    let cases: [(i64, u64, bool, u64, i64, i64); 15] = [
        (0, 6, true, 5, 0, -1),
        (0, 1, false, 4, 1000, -1),
        (0, 1, false, 3, 2000, -1),
        (0, 1, false, 2, 3000, -1),
        (0, 1, false, 1, 4000, -1),
        (0, 1, false, 0, 5000, -1),
        (0, 1, true, 0, 5000, 1000),
        (3000, 1, false, 2, 3000, -1),
        (3100, 1, false, 1, 3900, -1),
        (4000, 1, false, 1, 4000, -1),
        (8000, 1, false, 4, 1000, -1),
        (9500, 1, false, 4, 1000, -1),
        (9500, 0, false, 4, 1000, -1),
        (9500, 2, false, 2, 3000, -1),
        (9500, 5, true, 2, 3000, 3000),
    ];
    let mut h = Sim::new();
    for (i, (offset, q, limited, remaining, reset, retry)) in cases.into_iter().enumerate() {
        let d = h.call(&p, T0 + offset, q);
        assert_eq!(d.allowed, !limited, "case {i}");
        assert_eq!(d.limit, 5, "case {i}");
        assert_eq!(d.remaining, remaining, "case {i}");
        assert_eq!(d.reset_after_ms, reset, "case {i}");
        let expected_retry_ms = if limited { retry } else { 0 };
        assert_eq!(d.retry_after_ms, expected_retry_ms, "case {i}");
        let s = |ms: i64| if ms < 0 { -1 } else { (ms + 999) / 1000 };
        let expected = [i64::from(limited), 5, remaining as i64, s(retry), s(reset)];
        assert_eq!(throttle_reply(&d), expected, "case {i}");
    }
}

/// redis-cell's end-to-end test: `CL.THROTTLE user123 0 1 2 1` three times, the last after
/// waiting the advertised retry time.
#[test]
fn redis_cell_end_to_end() {
    let p = params(0, 1, 2);
    let mut h = Sim::new();
    assert_eq!(h.throttle(&p, T0, 1), [0, 1, 0, -1, 2]);
    assert_eq!(h.throttle(&p, T0 + 1, 1), [1, 1, 0, 2, 2]);
    assert_eq!(h.throttle(&p, T0 + 2000, 1), [0, 1, 0, -1, 2]);
}

#[test]
fn quantity_above_limit_never_passes() {
    let p = params(4, 1, 1);
    let mut h = Sim::new();
    // Fresh key: limited, remaining = limit, nothing to reset.
    assert_eq!(h.call(&p, T0, 6).to_reply(), [0, 5, 5, -1, 0]);
    assert_eq!(h.throttle(&p, T0, 6), [1, 5, 5, -1, 0]);
    assert!(h.state.is_none());
    // With debt: still -1, remaining and reset as the limiter stands.
    h.call(&p, T0, 2);
    assert_eq!(h.call(&p, T0 + 500, 1_000_000_000_000).to_reply(), [0, 5, 3, -1, 1500]);
    // Exactly the limit passes on a fresh key.
    assert_eq!(Sim::new().throttle(&p, T0, 5), [0, 5, 0, -1, 5]);
}

#[test]
fn quantity_zero_peeks_and_stores_nothing() {
    let p = params(2, 3, 1);
    let e = evaluate(None, &p, T0, 0);
    assert_eq!(e.decision.to_reply(), [1, 3, 3, 0, 0]);
    assert_eq!(throttle_reply(&e.decision), [0, 3, 3, -1, 0]);
    assert!(e.next.is_none());
    let mut h = Sim::new();
    h.call(&p, T0, 3);
    let before = h.state;
    assert_eq!(h.call(&p, T0, 0).to_reply(), [1, 3, 0, 0, 1000]);
    assert_eq!(h.state, before);
}

/// 3 per second with no burst: T = 333⅓ ms, kept exactly.
#[test]
fn fractional_emission_interval_is_exact() {
    let p = params(0, 3, 1);
    let mut h = Sim::new();
    assert_eq!(h.call(&p, T0, 1).to_reply(), [1, 1, 0, 0, 334]);
    let s = h.state.unwrap();
    assert_eq!((s.tat_ms, s.tat_frac), (T0 + 333, 1));
    assert_eq!(h.call(&p, T0, 1).to_reply(), [0, 1, 0, 334, 334]);
    assert_eq!(h.call(&p, T0 + 333, 1).to_reply(), [0, 1, 0, 1, 1]);
    // TAT = T0 + 333⅓ has passed: a fresh limiter again.
    assert_eq!(h.call(&p, T0 + 334, 1).to_reply(), [1, 1, 0, 0, 334]);
    // 3 per second with a burst of 2 (τ = 1 s): every second exactly 3 requests pass and a
    // 4th is refused, for 1000 seconds — the exact TAT never drifts.
    let p = params(2, 3, 1);
    let mut h = Sim::new();
    for s in 0..1000i64 {
        let at = T0 + s * 1000;
        for left in [2, 1, 0] {
            assert_eq!(
                h.call(&p, at, 1).to_reply(),
                [1, 3, left, 0, 1000 - 333 * left],
                "second {s}"
            );
        }
        assert_eq!(h.call(&p, at, 1).to_reply(), [0, 3, 0, 334, 1000], "second {s}");
    }
}

/// The deliberate rounding difference: redis-cell drops the sub-ms part of a time before
/// rounding to seconds; we round the exact value up.
#[test]
fn retry_rounds_up_the_exact_value_not_its_whole_ms() {
    // 3 per second, burst 3 (L = 4, τ = 1333⅓ ms). Four requests at T0: TAT = T0 + 1333⅓.
    let p = params(3, 3, 1);
    let mut h = Sim::new();
    for _ in 0..4 {
        assert!(h.call(&p, T0, 1).allowed);
    }
    // At T0 + 333 ms, 4 more need the debt (1000⅓ ms) to drain: retry 1000⅓ ms.
    // redis-cell replies retry 1 s and reset 1 s (its ns arithmetic gives 1.000333332 s, sub-ms
    // part dropped) — and a caller retrying after 1 s is refused again. We reply 2 s.
    let d = h.call(&p, T0 + 333, 4);
    assert_eq!(d.to_reply(), [0, 4, 0, 1001, 1001]);
    assert_eq!(throttle_reply(&d), [1, 4, 0, 2, 2]);
    assert!(!h.call(&p, T0 + 1333, 4).allowed);
    assert!(h.call(&p, T0 + 1334, 4).allowed);
}

#[test]
fn earlier_instant_counts_as_no_time_passed() {
    let p = params(0, 1, 2);
    let mut h = Sim::new();
    h.call(&p, T0, 1);
    // An AT 5 s before the last admitted call: measured from T0, nothing refilled.
    assert_eq!(h.call(&p, T0 - 5000, 1).to_reply(), [0, 1, 0, 2000, 2000]);
    assert_eq!(h.call(&p, T0 - 5000, 0).to_reply(), [1, 1, 0, 0, 2000]);
    // An admitted call at an earlier AT is judged and stored at T0: `updated_ms` never moves
    // back, and the TAT grows from where it was.
    let p = params(1, 1, 2);
    let first = evaluate(None, &p, T0, 1).next.unwrap();
    let e = evaluate(Some(&first), &p, T0 - 1000, 1);
    assert_eq!(e.decision.to_reply(), [1, 2, 0, 0, 4000]);
    let next = e.next.unwrap();
    assert_eq!((next.updated_ms, next.tat_ms), (T0, T0 + 4000));
}

#[test]
fn tightening_keeps_the_tat_like_redis_cell() {
    let p = params(15, 30, 60);
    let mut h = Sim::new();
    for _ in 0..10 {
        h.call(&p, T0, 1);
    }
    // Debt 20 s; a burst of 5 (τ = 12 s) is exceeded by 8 s: retry 10 s, reset 20 s.
    let tight = params(5, 30, 60);
    assert_eq!(h.call(&tight, T0, 1).to_reply(), [0, 6, 0, 10_000, 20_000]);
    assert_eq!(h.throttle(&tight, T0 + 10_000, 1), [0, 6, 0, -1, 12]);
    // The same T and limit written differently (30/60 s = 1/2 s) changes nothing.
    let mut a = Sim::new();
    let mut b = Sim::new();
    let same = params(15, 1, 2);
    for (k, at) in [0, 0, 0, 700, 2500, 2501, 9000].into_iter().enumerate() {
        let (pa, pb) = if k % 2 == 0 { (p, same) } else { (same, p) };
        assert_eq!(a.call(&pa, T0 + at, 2), b.call(&pb, T0 + at, 2), "step {k}");
    }
}

#[test]
fn loosening_never_grants_permits_at_once() {
    let p = params(15, 30, 60);
    let mut h = Sim::new();
    for _ in 0..10 {
        h.call(&p, T0, 1);
    }
    // 6 of 16 permits available. A burst of 30 (L = 31) keeps those 6 (redis-cell would offer
    // 21): the debt becomes 25 permits = 50 s.
    let loose = params(30, 30, 60);
    assert_eq!(h.call(&loose, T0, 0).to_reply(), [1, 31, 6, 0, 50_000]);
    assert_eq!(h.throttle(&loose, T0, 1), [0, 31, 5, -1, 52]);

    // A slower rate makes the same debt worth fewer permits: 10 used at 1/s stay 10 used at
    // 1 per 10 s (debt 100 s), where redis-cell would count 1 used.
    let fast = params(9, 1, 1);
    let slow = params(9, 1, 10);
    let mut h = Sim::new();
    for _ in 0..10 {
        h.call(&fast, T0, 1);
    }
    assert_eq!(h.call(&slow, T0, 1).to_reply(), [0, 10, 0, 10_000, 100_000]);
}

#[test]
fn extreme_parameters() {
    // 1 per 10 years with a burst of 9: τ = 100 years. Longer ones are accepted as long as a
    // Redis expiry can hold them (redis-cell accepts them), up to MAX_THROTTLE_RESET_MS.
    let p = params(9, 1, MAX_PERIOD_S);
    assert!(GcraParams::new(10, 1, MAX_PERIOD_S).is_ok());
    let beyond = Err(ArgError::Invalid(
        "parameters give a full reset time ((max_burst + 1) × period / count) beyond any Redis \
         expiry"
            .into(),
    ));
    assert_eq!(GcraParams::new(MAX_COUNT, 1, MAX_PERIOD_S), beyond);
    let mut h = Sim::new();
    let now = MAX_AT_MS;
    for i in 1..=10u64 {
        let d = h.call(&p, now, 1);
        assert!(d.allowed);
        assert_eq!(d.remaining, 10 - i);
        assert_eq!(d.reset_after_ms as u64, i * MAX_DURATION_MS);
    }
    let d = h.call(&p, now, 1);
    assert_eq!(d.to_reply(), [0, 10, 0, MAX_DURATION_MS as i64, 10 * MAX_DURATION_MS as i64]);
    assert_eq!(throttle_reply(&d), [1, 10, 0, 315_360_000, 3_153_600_000]);

    // 10^12 per second with a burst of 10^12: τ just above 1 s.
    let p = params(MAX_COUNT, MAX_COUNT, 1);
    let e = evaluate(None, &p, MAX_AT_MS, MAX_COUNT);
    assert_eq!(e.decision.to_reply(), [1, MAX_COUNT as i64 + 1, 1, 0, 1000]);
    let next = e.next.unwrap();
    next.validate().unwrap();
    assert_eq!(next.reset_at_ms(), MAX_AT_MS + 1000);
    let e = evaluate(Some(&next), &p, MAX_AT_MS, 2);
    assert_eq!(e.decision.to_reply(), [0, MAX_COUNT as i64 + 1, 1, 1, 1000]);
    let e = evaluate(Some(&next), &p, 0, MAX_COUNT);
    assert_eq!(e.decision.retry_after_ms, 1000);

    // Largest rational everything: 10^12 burst, 10^12 per 10 years.
    let p = params(MAX_COUNT, MAX_COUNT, MAX_PERIOD_S);
    let e = evaluate(None, &p, 0, MAX_COUNT);
    assert!(e.decision.allowed);
    e.next.unwrap().validate().unwrap();

    // A burst of 10^12 per second: τ ≈ 31 700 years, an expiry Redis holds.
    assert!(GcraParams::new(MAX_COUNT, 1, 1).is_ok());
    assert!(GcraParams::new(0, 0, 1).is_err());
    assert!(GcraParams::new(0, 1, 0).is_err());
    assert!(GcraParams::new(0, 1, MAX_PERIOD_S + 1).is_err());
    assert!(GcraParams::new(MAX_COUNT + 1, MAX_COUNT, 1).is_err());
    assert!(GcraParams::new(0, MAX_COUNT + 1, 1).is_err());
}

#[test]
fn state_fits_in_56_bytes() {
    assert!(std::mem::size_of::<GcraState>() <= 56, "{}", std::mem::size_of::<GcraState>());
}

#[test]
fn validate_rejects_impossible_states() {
    let good = evaluate(None, &params(2, 3, 1), T0, 1).next.unwrap();
    good.validate().unwrap();
    let bad = [
        GcraState { count: 0, ..good },
        GcraState { period_s: 0, ..good },
        GcraState { max_burst: MAX_COUNT + 1, ..good },
        GcraState { tat_frac: 3, ..good },
        GcraState { updated_ms: -1, ..good },
        GcraState { updated_ms: MAX_AT_MS + 1, ..good },
        // TAT not after the update.
        GcraState { tat_ms: T0, tat_frac: 0, ..good },
        GcraState { tat_ms: T0 - 1, tat_frac: 2, ..good },
        // TAT beyond any debt RL.CHARGE makes (10^12 permits, 100 years).
        GcraState { tat_ms: i64::MAX, ..good },
    ];
    for s in bad {
        assert!(s.validate().is_err(), "{s:?}");
    }
    GcraState { tat_ms: T0 + 1000, tat_frac: 0, ..good }.validate().unwrap();
    // TAT beyond the tolerance (τ = 1000 ms): a debt (RL.CHARGE), valid but only in the
    // codec's debt versions.
    let debt = GcraState { tat_ms: T0 + 1000, tat_frac: 1, ..good };
    assert_eq!(debt.validate(), Ok(()));
    assert!(debt.in_debt() && !good.in_debt());
}

#[test]
fn throttle_reply_rounds_up_to_seconds() {
    let d = |allowed, retry, reset| Decision {
        allowed,
        limit: 7,
        remaining: 3,
        retry_after_ms: retry,
        reset_after_ms: reset,
    };
    assert_eq!(throttle_reply(&d(true, 0, 0)), [0, 7, 3, -1, 0]);
    assert_eq!(throttle_reply(&d(true, 0, 1)), [0, 7, 3, -1, 1]);
    assert_eq!(throttle_reply(&d(true, 0, 1000)), [0, 7, 3, -1, 1]);
    assert_eq!(throttle_reply(&d(true, 0, 1001)), [0, 7, 3, -1, 2]);
    assert_eq!(throttle_reply(&d(false, 1, 1999)), [1, 7, 3, 1, 2]);
    assert_eq!(throttle_reply(&d(false, 2000, 2000)), [1, 7, 3, 2, 2]);
    assert_eq!(throttle_reply(&d(false, -1, 5)), [1, 7, 3, -1, 1]);
    assert_eq!(throttle_reply(&d(false, i64::MAX, i64::MAX))[3], i64::MAX / 1000 + 1);
}

#[test]
fn parses_throttle_arguments() {
    let parse = |args: &[&str]| {
        let bytes: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        parse_throttle_args(&bytes)
    };
    let a = parse(&["15", "30", "60"]).unwrap();
    assert_eq!((a.params, a.quantity, a.options.dry_run), (params(15, 30, 60), 1, false));
    let a = parse(&["0", "1", "2", "0", "dryrun", "AT", "5"]).unwrap();
    assert_eq!((a.quantity, a.options.dry_run, a.options.at_ms), (0, true, Some(5)));
    let a = parse(&["0", "1", "2", "At", "5"]).unwrap();
    assert_eq!((a.quantity, a.options.at_ms), (1, Some(5)));
    assert_eq!(parse(&["1", "2"]), Err(ArgError::WrongArity));
    assert!(matches!(parse(&["-1", "1", "1"]), Err(ArgError::Integer { name: "max_burst", .. })));
    assert!(matches!(parse(&["0", "0", "1"]), Err(ArgError::Integer { name: "count", .. })));
    assert!(matches!(parse(&["0", "1", "1s"]), Err(ArgError::Integer { name: "period", .. })));
    assert!(matches!(
        parse(&["0", "1", "315360001"]),
        Err(ArgError::Integer { name: "period", .. })
    ));
    assert!(matches!(
        parse(&["0", "1", "1", "x"]),
        Err(ArgError::Integer { name: "quantity", .. })
    ));
    assert!(matches!(parse(&["0", "1", "1", "1", "2"]), Err(ArgError::UnknownOption(_))));
    assert!(matches!(parse(&["0", "1", "1", "COST", "2"]), Err(ArgError::UnknownOption(_))));
    assert!(parse(&["10", "1", "315360000"]).is_ok(), "110 years: redis-cell accepts it");
    let invalid: [&[u8]; 4] = [b"\xff\xfe", b"1", b"1", b"\xc3"];
    assert!(matches!(
        parse_throttle_args(&invalid),
        Err(ArgError::Integer { name: "max_burst", .. })
    ));
    let invalid: [&[u8]; 4] = [b"1", b"1", b"1", b"\xc3"];
    assert!(matches!(
        parse_throttle_args(&invalid),
        Err(ArgError::Integer { name: "quantity", .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Brute-force reference: GCRA seen as a continuous bucket of permits, with exact rationals.
// ---------------------------------------------------------------------------------------------

/// An exact rational `n / d` (d > 0), reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Q {
    n: i128,
    d: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

impl Q {
    fn new(n: i128, d: i128) -> Q {
        assert!(d != 0);
        let g = gcd(n, d).max(1);
        let s = if d < 0 { -1 } else { 1 };
        Q { n: s * n / g, d: s * d / g }
    }
    fn int(n: i128) -> Q {
        Q { n, d: 1 }
    }
    fn add(self, o: Q) -> Q {
        Q::new(self.n * o.d + o.n * self.d, self.d * o.d)
    }
    fn sub(self, o: Q) -> Q {
        Q::new(self.n * o.d - o.n * self.d, self.d * o.d)
    }
    fn mul(self, o: Q) -> Q {
        Q::new(self.n * o.n, self.d * o.d)
    }
    fn div(self, o: Q) -> Q {
        Q::new(self.n * o.d, self.d * o.n)
    }
    fn floor(self) -> i128 {
        self.n.div_euclid(self.d)
    }
    fn ceil(self) -> i128 {
        -(-self.n).div_euclid(self.d)
    }
    fn min(self, o: Q) -> Q {
        if self <= o {
            self
        } else {
            o
        }
    }
}

impl PartialOrd for Q {
    fn partial_cmp(&self, o: &Q) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Q {
    fn cmp(&self, o: &Q) -> Ordering {
        (self.n * o.d).cmp(&(o.n * self.d))
    }
}

/// The model's view of parameters: `limit` permits, one permit back every `t` ms.
fn limit_of(p: &GcraParams) -> Q {
    Q::int(i128::from(p.max_burst) + 1)
}
fn interval_of(p: &GcraParams) -> Q {
    Q::new(i128::from(p.period_s) * 1000, i128::from(p.count))
}

/// A bucket of permits (rational) that starts full at `limit`, regains one permit per
/// emission interval up to `limit`, and admits a request iff it holds at least its quantity.
/// Parameter changes: the permits held become the smaller of what they were and what the
/// same debt (time until full) is worth under the new parameters, rounded down to a
/// multiple of 1/period_ms.
#[derive(Debug, Clone, Default)]
struct Model {
    stored: Option<(GcraParams, Q, i64)>,
    /// The judgement of the last call.
    last: Option<ModelDecision>,
}

/// What the model decides for one request, in exact values.
#[derive(Debug, Clone)]
struct ModelDecision {
    now: i64,
    /// Permits held before the request, under the call's parameters.
    held: Q,
    admitted: bool,
    /// Permits held after the request.
    after: Q,
}

impl Model {
    /// Permits held at `t` by the stored bucket under its own parameters.
    fn refilled(&self, t: i64) -> Option<(GcraParams, Q, i64)> {
        let (sp, tokens, at) = self.stored?;
        let now = t.max(at);
        let gained = Q::int(i128::from(now - at)).div(interval_of(&sp));
        let held = tokens.add(gained).min(limit_of(&sp));
        (held < limit_of(&sp)).then_some((sp, held, now))
    }

    fn judge(&self, p: &GcraParams, t: i64, q: u64) -> ModelDecision {
        let (now, held) = match self.refilled(t) {
            None => (t, limit_of(p)),
            Some((sp, held, now)) if sp == *p => (now, held),
            Some((sp, held, now)) => {
                let debt_ms = limit_of(&sp).sub(held).mul(interval_of(&sp));
                let same_debt = limit_of(p).sub(debt_ms.div(interval_of(p)));
                let unit = i128::from(p.period_s) * 1000;
                let h = held.min(same_debt);
                (now, Q::new(h.mul(Q::int(unit)).floor(), unit))
            }
        };
        let qq = Q::int(i128::from(q));
        let admitted = held >= qq;
        let after = if admitted { held.sub(qq) } else { held };
        ModelDecision { now, held, admitted, after }
    }

    fn call(&mut self, p: &GcraParams, t: i64, q: u64) -> ModelDecision {
        let j = self.judge(p, t, q);
        if j.admitted && q > 0 {
            self.stored = Some((*p, j.after, j.now));
        }
        j
    }
}

impl ModelDecision {
    /// The reply in whole ms: retry and reset are the first whole ms at which the request
    /// fits, or the bucket is full, by the exact rational refill.
    fn decision(&self, p: &GcraParams, q: u64) -> Decision {
        let (limit, qq) = (limit_of(p), Q::int(i128::from(q)));
        let retry_after_ms = if self.admitted {
            0
        } else if qq > limit {
            -1
        } else {
            qq.sub(self.held).mul(interval_of(p)).ceil() as i64
        };
        Decision {
            allowed: self.admitted,
            limit: p.max_burst + 1,
            remaining: self.after.floor().max(0) as u64,
            retry_after_ms,
            reset_after_ms: limit.sub(self.after).mul(interval_of(p)).ceil() as i64,
        }
    }
}

impl testing::Model<GcraState> for Model {
    fn decide(&mut self, p: &GcraParams, now: i64, q: u64) -> Decision {
        let j = self.call(p, now, q);
        let decision = j.decision(p, q);
        self.last = Some(j);
        decision
    }
}

/// Permits held `m` ms after the judged instant, on the call's parameters (no traffic).
fn held_after(p: &GcraParams, held: Q, m: i64) -> Q {
    held.add(Q::int(i128::from(m)).div(interval_of(p))).min(limit_of(p))
}

/// Checks one decision against the model's judgement, with the exactness rules checked by
/// the model's own predicates.
fn check(p: &GcraParams, q: u64, d: &Decision, j: &ModelDecision) -> Result<(), TestCaseError> {
    let limit = limit_of(p);
    let qq = Q::int(i128::from(q));
    prop_assert_eq!(d.allowed, j.admitted);
    prop_assert_eq!(d.limit, p.max_burst + 1);
    prop_assert_eq!(i128::from(d.remaining), j.after.floor().max(0));
    // Retry: the same request admitted exactly `retry` ms later, not one ms earlier.
    if d.allowed {
        prop_assert_eq!(d.retry_after_ms, 0);
    } else if qq > limit {
        prop_assert_eq!(d.retry_after_ms, -1);
    } else {
        let r = d.retry_after_ms;
        prop_assert!(r >= 1);
        prop_assert!(held_after(p, j.held, r) >= qq);
        prop_assert!(held_after(p, j.held, r - 1) < qq);
    }
    // Reset: full exactly `reset` ms later, not one ms earlier.
    let reset = d.reset_after_ms;
    prop_assert!(reset >= 0);
    prop_assert!(held_after(p, j.after, reset) == limit);
    if reset > 0 {
        prop_assert!(held_after(p, j.after, reset - 1) < limit);
    }
    // redis-cell's layout: seconds rounded up from the exact rational times.
    let secs = |ms: Q| ms.div(Q::int(1000)).ceil() as i64;
    let retry_s =
        if d.allowed || qq > limit { -1 } else { secs(qq.sub(j.held).mul(interval_of(p))) };
    let reset_s = secs(limit.sub(j.after).mul(interval_of(p)));
    let expected = [i64::from(!d.allowed), d.limit as i64, d.remaining as i64, retry_s, reset_s];
    prop_assert_eq!(throttle_reply(d), expected);
    Ok(())
}

fn small_params() -> impl Strategy<Value = GcraParams> {
    (0u64..=4, 1u64..=12, 1u64..=4).prop_map(|(b, c, s)| params(b, c, s))
}

/// One call: which of the parameter sets, time step (may go backwards), quantity.
fn step() -> impl Strategy<Value = (usize, i64, u64)> {
    (0usize..3, -3000i64..=6000, prop_oneof![Just(0u64), Just(1), 0u64..=7])
}

proptest! {
    #[test]
    fn matches_the_reference_model(
        sets in proptest::collection::vec(small_params(), 3),
        steps in proptest::collection::vec(step(), 1..30),
        stable in any::<bool>(),
    ) {
        // (The clock stays far above 0: T0 minus at most 30 × 3000 ms.)
        let calls = clocked(T0, steps.into_iter().map(|(k, gap, q)| {
            (if stable { sets[0] } else { sets[k] }, gap, q)
        }));
        check_against_model(&mut Model::default(), calls, |h, model, c, d| {
            let j = model.last.as_ref().unwrap();
            check(&c.params, c.cost, d, j)?;
            prop_assert_eq!(d.allowed && c.cost > 0, j.admitted && c.cost > 0);
            if let Some(next) = h.state.filter(|_| j.admitted && c.cost > 0) {
                prop_assert_eq!(next.updated_ms, j.now);
                // The key expires when the limiter is back in its initial state.
                prop_assert_eq!(next.reset_at_ms() - j.now, d.reset_after_ms);
                prop_assert!(live(Some(&next), next.reset_at_ms() - 1).is_some());
                prop_assert!(live(Some(&next), next.reset_at_ms()).is_none());
            }
            Ok(())
        })?;
    }

    /// Retry and reset found by linear search over ms in the reference model, for the whole
    /// sequence's last call.
    #[test]
    fn retry_and_reset_by_linear_search(
        p in (0u64..=3, 1u64..=6, 1u64..=2).prop_map(|(b, c, s)| params(b, c, s)),
        steps in proptest::collection::vec((0i64..=700, 0u64..=4), 1..12),
    ) {
        let mut model = Model::default();
        let mut last = None;
        let calls = clocked(T0, steps.into_iter().map(|(gap, q)| (p, gap, q)));
        check_against_model(&mut model, calls, |_, m, c, d| {
            last = Some((*d, c.cost, m.last.clone().unwrap()));
            Ok(())
        })?;
        let (d, q, j) = last.unwrap();
        // `model` is now the limiter after the last call (a limited call changed nothing).
        if !d.allowed && q <= p.max_burst + 1 {
            let first = (1..).find(|m| model.judge(&p, j.now + m, q).admitted).unwrap();
            prop_assert_eq!(d.retry_after_ms, first);
        }
        let full = (0..).find(|m| model.refilled(j.now + m).is_none()).unwrap();
        prop_assert_eq!(d.reset_after_ms, full);
    }

    /// With a whole-ms emission interval, replies equal redis-cell's for any sequence of calls
    /// with fixed parameters and a clock that does not go backwards.
    #[test]
    fn matches_redis_cell_when_the_interval_is_whole_ms(
        burst in 0u64..=6,
        period_s in 1u64..=6,
        pick in any::<prop::sample::Index>(),
        steps in proptest::collection::vec((0i64..=4000, prop_oneof![Just(1u64), 0u64..=9]), 1..30),
    ) {
        let divisors: Vec<u64> = (1..=period_s * 1000).filter(|c| period_s * 1000 % c == 0).collect();
        let count = divisors[pick.index(divisors.len())];
        let p = params(burst, count, period_s);
        let mut cell = CellModel::new(burst, count, period_s);
        let mut h = Sim::new();
        let mut clock = T0;
        for (gap, q) in steps {
            clock += gap;
            prop_assert_eq!(h.throttle(&p, clock, q), cell.throttle(clock, q));
        }
    }

    /// Whatever a decoded state holds, validation and evaluation never panic.
    #[test]
    fn corrupt_states_never_panic(
        fields in (any::<u64>(), any::<u64>(), any::<u64>(), any::<i64>(), any::<u64>(), any::<i64>()),
        p in small_params(),
        now in 0i64..=MAX_AT_MS,
        q in 0u64..=MAX_COUNT,
    ) {
        let (max_burst, count, period_s, tat_ms, tat_frac, updated_ms) = fields;
        let s = GcraState { max_burst, count, period_s, tat_ms, tat_frac, updated_ms };
        let _ = s.validate();
        let _ = s.reset_at_ms();
        let e = evaluate(Some(&s), &p, now, q);
        prop_assert!(e.decision.remaining <= e.decision.limit);
        if let Some(next) = e.next {
            prop_assert!(next.validate().is_ok());
        }
        let near = GcraState { tat_ms: now.saturating_add(tat_ms % 1_000_000), updated_ms: now, ..s };
        let _ = evaluate(Some(&near), &p, now, q);
    }

    /// Extreme parameters, quantities and instants: no panic, and the exactness rules hold,
    /// checked by evaluating at the advertised instants.
    #[test]
    fn extreme_parameters_are_exact(
        sets in proptest::collection::vec((
            prop_oneof![Just(0u64), Just(MAX_COUNT), 0..=MAX_COUNT],
            prop_oneof![Just(1u64), Just(MAX_COUNT), 1..=MAX_COUNT],
            prop_oneof![Just(1u64), Just(MAX_PERIOD_S), 1..=MAX_PERIOD_S],
        ), 2),
        steps in proptest::collection::vec((
            any::<bool>(),
            prop_oneof![Just(0i64), Just(MAX_AT_MS), 0..=MAX_AT_MS],
            prop_oneof![Just(0u64), Just(1), Just(MAX_COUNT), 0..=MAX_COUNT],
        ), 1..8),
    ) {
        let sets: Vec<GcraParams> = sets
            .into_iter()
            .map(|(b, c, s)| GcraParams::new(b, c, s).unwrap_or_else(|_| params(b.min(c), c, 1)))
            .collect();
        let mut h = Sim::new();
        for (which, now, q) in steps {
            let p = if which { sets[0] } else { sets[1] };
            let e = evaluate(h.state.as_ref(), &p, now, q);
            let d = e.decision;
            let now2 = h.state.map_or(now, |s| if live(Some(&s), now).is_some() { now.max(s.updated_ms) } else { now });
            prop_assert!(d.remaining <= d.limit);
            prop_assert!(d.reset_after_ms >= 0);
            prop_assert!(d.reset_after_ms as u128 <= MAX_THROTTLE_RESET_MS);
            let _ = throttle_reply(&d);
            // Exactness holds on the stored parameters' own timeline (a parameter change is
            // converted again at each later instant).
            let same = h.state.is_none_or(|s| s.params() == p || live(Some(&s), now).is_none());
            if same && !d.allowed && d.retry_after_ms > 0 {
                let r = d.retry_after_ms;
                prop_assert!(evaluate(h.state.as_ref(), &p, now2 + r, q).decision.allowed);
                prop_assert!(!evaluate(h.state.as_ref(), &p, now2 + r - 1, q).decision.allowed);
            }
            if let Some(next) = e.next {
                prop_assert!(next.validate().is_ok());
                prop_assert_eq!(next.reset_at_ms() - now2, d.reset_after_ms);
                h.state = Some(next);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A model of redis-cell's semantics (as read from its source, in integer ms, valid when the
// emission interval is a whole number of ms so that its ns arithmetic is exact).
// ---------------------------------------------------------------------------------------------

struct CellModel {
    interval_ms: i64,
    tolerance_ms: i64,
    limit: i64,
    /// The stored TAT and the instant the key expires (Redis keeps a key until `now > when`).
    key: Option<(i64, i64)>,
}

impl CellModel {
    fn new(burst: u64, count: u64, period_s: u64) -> Self {
        let interval_ms = (period_s * 1000 / count) as i64;
        let limit = burst as i64 + 1;
        CellModel { interval_ms, tolerance_ms: interval_ms * limit, limit, key: None }
    }

    fn throttle(&mut self, now: i64, quantity: u64) -> [i64; 5] {
        let stored = self.key.filter(|&(_, expires)| now <= expires).map(|(tat, _)| tat);
        let tat = stored.unwrap_or(now);
        let increment = self.interval_ms * quantity as i64;
        let new_tat = tat.max(now) + increment;
        let diff = now - (new_tat - self.tolerance_ms);
        let (limited, retry, ttl) = if diff < 0 {
            let retry = if increment <= self.tolerance_ms { -diff } else { -1000 };
            (true, retry, tat - now)
        } else {
            self.key = Some((new_tat, now + (new_tat - now)));
            (false, -1000, new_tat - now)
        };
        let next = self.tolerance_ms - ttl;
        let remaining = if next > -self.interval_ms { next / self.interval_ms } else { 0 };
        // Whole seconds truncated, plus one if a whole-ms part of a second remains.
        let secs = |ms: i64| ms / 1000 + i64::from(ms % 1000 > 0);
        [i64::from(limited), self.limit, remaining, secs(retry), secs(ttl)]
    }
}

/// redis-cell drop-in: `CL.THROTTLE k 1000000 1 3600` (a burst of a million, one per hour:
/// τ ≈ 114 years) is accepted, stored exactly (in the wide form where instants outgrow the
/// compact one) and expires where a Redis expiry can hold it, even from the latest `AT`.
#[test]
fn bursts_longer_than_a_century_are_accepted_like_redis_cell() {
    let p = params(1_000_000, 1, 3600);
    let tau_ms = 1_000_001i64 * 3_600_000;
    for now in [T0, MAX_AT_MS] {
        let e = evaluate(None, &p, now, 1_000_001);
        assert!(e.decision.allowed);
        let state = e.next.unwrap();
        state.validate().unwrap();
        assert_eq!(state.reset_at_ms(), now + tau_ms);
        let limiter = crate::algorithms::limiter::Limiter::Gcra(state);
        let packed = crate::store::packed::PackedLimiter::new(limiter.clone());
        assert_eq!(packed.view(crate::algorithms::limiter::Limiter::clone), limiter);
        assert_eq!(
            crate::store::codec::decode(&crate::store::codec::encode(&limiter)),
            Ok(limiter)
        );
    }
}

impl testing::Settling<GcraState> for Model {
    /// The permits held at `now'` minus `count`, below zero if need be (a debt).
    fn charge(&mut self, now: i64, count: u64) -> bool {
        let Some((sp, held, at)) = self.refilled(now) else {
            return false;
        };
        self.stored = Some((sp, held.sub(Q::int(i128::from(count))), at));
        true
    }

    fn refund(&mut self, now: i64, count: u64) {
        if let Some((sp, held, at)) = self.refilled(now) {
            let held = held.add(Q::int(i128::from(count)));
            self.stored = (held < limit_of(&sp)).then_some((sp, held, at));
        }
    }

    fn live_at(&self, t: i64) -> bool {
        self.refilled(t).is_some()
    }
}

fn settle_step() -> impl Strategy<Value = (i64, testing::Settle)> {
    use testing::Settle;
    let step = prop_oneof![
        3 => (0u64..=6).prop_map(Settle::Call),
        2 => (1u64..=9).prop_map(Settle::Charge),
        1 => (1u64..=6).prop_map(Settle::Refund),
    ];
    (-2000i64..=5000, step)
}

proptest! {
    /// `RL.CHARGE` takes the TAT past the tolerance (a debt) and `RL.REFUND` gives back
    /// after it: every reply equals the rational bucket's, whose permits go below zero, and
    /// the key expires exactly when that bucket is full again.
    #[test]
    fn charges_and_refunds_match_the_reference_model(
        p in small_params(),
        steps in proptest::collection::vec(settle_step(), 1..30),
    ) {
        testing::check_settling_against_model::<GcraState, _>(&mut Model::default(), &p, T0, steps)?;
    }
}

/// A debt of `d` permits past the limit refuses a request of 1 until `d + 1` intervals have
/// passed, exactly; the key lives until the whole debt and the burst are paid.
#[test]
fn debt_is_paid_at_the_emission_interval() {
    use crate::algorithms::state::{Charged, Stored};
    let p = params(4, 1, 1); // 5 permits, one back per second
    let full = evaluate(None, &p, T0, 5).next.unwrap();
    let Charged::To(s) = full.charge(T0, 3) else { panic!() };
    assert!(s.in_debt());
    let d = evaluate(Some(&s), &p, T0, 1).decision;
    assert!(!d.allowed);
    assert_eq!((d.remaining, d.retry_after_ms, d.reset_after_ms), (0, 4000, 8000));
    assert!(!evaluate(Some(&s), &p, T0 + 3999, 1).decision.allowed);
    assert!(evaluate(Some(&s), &p, T0 + 4000, 1).decision.allowed);
    assert_eq!(s.reset_at_ms(), T0 + 8000);
    assert_eq!(s.validate(), Ok(()));
    // Bounded: 10^12 permits of debt at most.
    assert_eq!(s.charge(T0, crate::grammar::args::MAX_COUNT), Charged::TooLarge);
}
