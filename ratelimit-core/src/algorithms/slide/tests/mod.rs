use super::log::{write_header, Header, HEADER};

/// What a log's buffer holds beyond its entries for the state's own fields ([`HOLDER`]), as
/// the allocator rounds it: the 48 bytes of the box it replaces.
const STATE_BYTES: usize = 48;
use super::*;
use crate::testing::{self, check_against_model, clocked, Model as _};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_000;

mod anchor;
mod properties;

fn exact(limit: u64, window: u64) -> SlideParams {
    SlideParams::new(limit, window, None, MAX_COUNT).unwrap()
}

fn bucketed(limit: u64, window: u64, b: u64) -> SlideParams {
    SlideParams::new(limit, window, Some(b), MAX_COUNT).unwrap()
}

/// A bucketed window with the `ANCHOR` / `FLOOR` options.
fn with(limit: u64, window: u64, b: u64, anchor: bool, floor: bool) -> SlideParams {
    bucketed(limit, window, b).with_options(anchor, floor).unwrap()
}

fn nz(b: u16) -> NonZeroU16 {
    NonZeroU16::new(b).unwrap()
}

fn plain(b: u16) -> Buckets {
    Buckets::plain(nz(b))
}

fn reply(d: &Decision) -> [i64; 5] {
    d.to_reply()
}

/// A stored limiter driven through `evaluate`, checked against `evaluate_in_place` and
/// `validate` at every step (see [`crate::testing::Sim`]).
type Sim = crate::testing::Sim<SlideState>;

// ---------------------------------------------------------------------------------------------
// Brute-force reference models (explicit event lists, ms-by-ms scans)

/// Exact sliding window: every admitted request kept explicitly.
#[derive(Debug, Clone, Default)]
struct ExactModel {
    window: i64,
    events: Vec<(i64, u64)>,
    updated: i64,
}

fn count_in(events: &[(i64, u64)], window: i64, t: i64) -> u64 {
    events.iter().filter(|(ts, _)| *ts <= t && *ts > t - window).map(|e| e.1).sum()
}

impl testing::Model<SlideState> for ExactModel {
    fn decide(&mut self, p: &SlideParams, now: i64, cost: u64) -> Decision {
        let (limit, window) = (p.limit, p.window_ms as i64);
        let live = self.events.iter().any(|e| e.0 + self.window > now);
        let (t, view): (i64, Vec<(i64, u64)>) = if live {
            let t = now.max(self.updated);
            let stored_window = self.window;
            let view = self
                .events
                .iter()
                .copied()
                .filter(|(ts, _)| *ts > t - stored_window && *ts > t - window)
                .collect();
            (t, view)
        } else {
            (now, Vec::new())
        };
        let used = count_in(&view, window, t);
        let allowed = cost == 0 || used + cost <= limit;
        let remaining =
            if allowed { limit.saturating_sub(used + cost) } else { limit.saturating_sub(used) };
        let retry = if allowed {
            0
        } else if cost > limit {
            -1
        } else {
            (1..).find(|d| count_in(&view, window, t + d) + cost <= limit).unwrap()
        };
        let mut after = view;
        if allowed && cost > 0 {
            after.push((t, cost));
        }
        let reset = (0..).find(|d| count_in(&after, window, t + d) == 0).unwrap();
        if allowed && cost > 0 {
            self.events = after;
            self.window = window;
            self.updated = t;
        }
        Decision { allowed, limit, remaining, retry_after_ms: retry, reset_after_ms: reset }
    }
}

/// Bucketed estimate: every admitted request kept explicitly, weighted by its sub-window.
///
/// The grid is the epoch's, or with `ANCHOR` starts at the first admitted call `o` of a fresh
/// limiter: sub-window `j ≥ 0` is `(o + j·w, o + (j+1)·w]`, with `o` itself in sub-window 0.
/// `FLOOR` compares `⌊used⌋`. A limiter is live until its newest sub-window has fully left.
#[derive(Debug, Clone, Default)]
struct BucketModel {
    b: i64,
    w: i64,
    anchor: bool,
    /// `ANCHOR`: the origin of the live limiter's grid.
    origin: Option<i64>,
    events: Vec<(i64, u64)>,
    updated: i64,
}

impl BucketModel {
    fn new(window: u64, b: u64) -> Self {
        BucketModel { b: b as i64, w: (window / b) as i64, ..BucketModel::default() }
    }

    fn anchored(window: u64, b: u64) -> Self {
        BucketModel { anchor: true, ..BucketModel::new(window, b) }
    }

    /// The sub-window of `t` on the grid from `origin` (the epoch's without `ANCHOR`).
    fn index(&self, origin: Option<i64>, t: i64) -> i64 {
        match origin.filter(|_| self.anchor) {
            Some(o) => (t - o - 1).div_euclid(self.w).max(0),
            None => t.div_euclid(self.w),
        }
    }

    /// The first ms of sub-window `j` (for an anchored grid: the one after `o + j·w`).
    fn first_ms(&self, origin: Option<i64>, j: i64) -> i64 {
        match origin.filter(|_| self.anchor) {
            Some(o) => o + 1 + j * self.w,
            None => j * self.w,
        }
    }

    /// The earliest instant of sub-window `j`: its first ms, or the origin itself for an
    /// anchored grid's sub-window 0.
    fn earliest_ms(&self, origin: Option<i64>, j: i64) -> i64 {
        match origin.filter(|_| self.anchor && j == 0) {
            Some(o) => o,
            None => self.first_ms(origin, j),
        }
    }

    /// `used(t) · w` on the grid from `origin`, by brute force: every event weighted by its
    /// sub-window's share of milliseconds still inside `(t − P, t]`.
    fn used_w_on(&self, origin: Option<i64>, events: &[(i64, u64)], t: i64) -> u128 {
        let (b, w) = (self.b, self.w);
        let i = self.index(origin, t);
        let r = (t - self.first_ms(origin, i)).clamp(0, w - 1);
        let mut sum = 0u128;
        for &(ts, c) in events.iter().filter(|e| e.0 <= t) {
            let j = self.index(origin, ts);
            if j > i - b {
                sum += w as u128 * c as u128;
            } else if j == i - b {
                sum += (w - r - 1) as u128 * c as u128;
            }
        }
        sum
    }

    fn used_w(&self, events: &[(i64, u64)], t: i64) -> u128 {
        self.used_w_on(self.origin, events, t)
    }

    /// Whether the stored limiter is live at `now`: until its newest sub-window (that of the
    /// last admitted call) has fully left the window.
    fn live(&self, now: i64) -> bool {
        let newest = self.index(self.origin, self.updated);
        let gone = self.first_ms(self.origin, newest + 1) - 1 + self.b * self.w;
        !self.events.is_empty() && now < gone
    }
}

impl testing::Model<SlideState> for BucketModel {
    fn decide(&mut self, p: &SlideParams, now: i64, cost: u64) -> Decision {
        let (limit, floor) = (p.limit, p.mode.floored());
        let live = self.live(now);
        // A dead limiter is judged as a fresh one (nothing changes unless admitted); under
        // `ANCHOR` its grid would start at this call.
        let view = if live { self.events.clone() } else { Vec::new() };
        let t = if live { now.max(self.updated) } else { now };
        let origin = if live { self.origin } else { Some(t) };
        let w = self.w as u128;
        let cap = w * limit as u128 + if floor { w - 1 } else { 0 };
        let est = self.used_w_on(origin, &view, t);
        let allowed = cost == 0 || est + w * cost as u128 <= cap;
        let taken = if allowed { w * cost as u128 } else { 0 };
        let remaining = cap.saturating_sub(est + taken) / w;
        let retry = if allowed {
            0
        } else if cost > limit {
            -1
        } else {
            (1..).find(|d| self.used_w_on(origin, &view, t + d) + w * cost as u128 <= cap).unwrap()
        };
        let mut after = view;
        if allowed && cost > 0 {
            after.push((t, cost));
        }
        let reset = (0..).find(|d| self.used_w_on(origin, &after, t + d) == 0).unwrap();
        if allowed && cost > 0 {
            self.events = after;
            self.updated = t;
            self.origin = origin;
        }
        let remaining = remaining as u64;
        Decision { allowed, limit, remaining, retry_after_ms: retry, reset_after_ms: reset }
    }
}

#[derive(Debug, Clone)]
enum Model {
    Exact(ExactModel),
    Buckets(BucketModel),
}

impl Model {
    /// A reference model holding exactly what `s` holds.
    fn of(s: &SlideState) -> Model {
        if s.mode == SlideMode::Exact {
            Model::Exact(ExactModel {
                window: s.window_ms as i64,
                events: s.entries().collect(),
                updated: s.updated_ms,
            })
        } else {
            let (window, b) = (s.window_ms, u64::from(s.mode.buckets()));
            let mut m = if s.mode.anchored() {
                BucketModel::anchored(window, b)
            } else {
                BucketModel::new(window, b)
            };
            m.origin = s.origin_ms();
            let first = m.index(m.origin, s.updated_ms) - m.b;
            m.events = s
                .counters()
                .enumerate()
                .filter(|(_, c)| *c > 0)
                .map(|(k, c)| (m.earliest_ms(m.origin, first + k as i64), c))
                .collect();
            m.updated = s.updated_ms;
            Model::Buckets(m)
        }
    }

    fn decide(&mut self, p: &SlideParams, now: i64, cost: u64) -> Decision {
        match self {
            Model::Exact(m) => m.decide(p, now, cost),
            Model::Buckets(m) => m.decide(p, now, cost),
        }
    }
}

/// `used(t)·scale` and `scale` of a stored state judged under its own parameters, by the
/// reference formulas.
fn reference_used(s: &SlideState, t: i64) -> (u128, u128) {
    match Model::of(s) {
        Model::Exact(m) => (count_in(&m.events, m.window, t) as u128, 1),
        Model::Buckets(m) => (m.used_w(&m.events, t), m.w as u128),
    }
}

/// Waiting exactly the advertised `retry_after_ms` admits the same call; one ms less does not.
fn retry_is_exact(
    d: &Sim,
    c: &testing::Call<SlideParams>,
    got: &Decision,
) -> Result<(), TestCaseError> {
    if !got.allowed && got.retry_after_ms > 0 {
        let t = c.now.max(d.state.as_ref().map_or(c.now, |s| s.updated_ms));
        prop_assert!(d.peek(&c.params, t + got.retry_after_ms, c.cost).allowed);
        prop_assert!(!d.peek(&c.params, t + got.retry_after_ms - 1, c.cost).allowed);
    }
    Ok(())
}

/// The largest total admitted in any interval of `window` ms.
fn max_in_window(admitted: &[(i64, u64)], window: i64) -> u64 {
    admitted.iter().map(|&(end, _)| count_in(admitted, window, end)).max().unwrap_or(0)
}

/// The documented worst case of `BUCKETS b`: `2·limit − ⌈limit·b / window⌉`.
fn bucket_bound(limit: u64, window: u64, b: u64) -> u64 {
    2 * limit - (limit * b).div_ceil(window)
}

// ---------------------------------------------------------------------------------------------
// Unit tests

#[test]
fn state_fits_in_56_bytes() {
    assert!(std::mem::size_of::<SlideState>() <= 56, "{}", std::mem::size_of::<SlideState>());
}

#[test]
fn params_are_checked() {
    assert_eq!(exact(10, 1000), SlideParams { limit: 10, window_ms: 1000, mode: SlideMode::Exact });
    assert_eq!(bucketed(10, 1000, 10).mode.buckets(), 10);
    let over =
        SlideParams::new(2_000_000, 86_400_000, None, DEFAULT_LOG_MAX).unwrap_err().to_string();
    assert!(
        over.starts_with("ERR ")
            && over.contains("ratelimit.slide-log-max")
            && over.contains("BUCKETS"),
        "{over}"
    );
    assert!(SlideParams::new(DEFAULT_LOG_MAX, 86_400_000, None, DEFAULT_LOG_MAX).is_ok());
    assert!(SlideParams::new(MAX_COUNT, 1000, Some(1), DEFAULT_LOG_MAX).is_ok());
    let indivisible = SlideParams::new(10, 1000, Some(3), DEFAULT_LOG_MAX).unwrap_err().to_string();
    assert!(indivisible.starts_with("ERR BUCKETS"), "{indivisible}");
    for b in [0, 1001] {
        let e = SlideParams::new(10, 3_000_000, Some(b), DEFAULT_LOG_MAX).unwrap_err();
        assert_eq!(e.to_string(), "ERR BUCKETS must be an integer between 1 and 1000");
    }
    assert!(SlideParams::new(0, 1000, None, DEFAULT_LOG_MAX).is_err());
    assert!(SlideParams::new(MAX_COUNT + 1, 1000, Some(1), DEFAULT_LOG_MAX).is_err());
    assert!(SlideParams::new(1, 0, None, DEFAULT_LOG_MAX).is_err());
    assert!(SlideParams::new(1, MAX_DURATION_MS + 1, None, DEFAULT_LOG_MAX).is_err());
    assert!(SlideParams::new(1, MAX_DURATION_MS, Some(1000), DEFAULT_LOG_MAX).is_ok());
}

#[test]
fn the_log_max_bounds_the_entries_a_log_can_hold_not_the_limit() {
    assert_eq!(log_entries_bound(1_000_000, 2000), 2000);
    assert_eq!(log_entries_bound(5, 86_400_000), 5);
    // limits' own `1000000 per 2 seconds` and `200000 per day` fit the default; a log that can
    // really grow past it does not, nor a window longer than the maximum with a limit above it.
    assert!(SlideParams::new(1_000_000, 2000, None, DEFAULT_LOG_MAX).is_ok());
    assert!(SlideParams::new(200_000, 86_400_000, None, DEFAULT_LOG_MAX).is_ok());
    assert!(SlideParams::new(MAX_COUNT, 1000, None, DEFAULT_LOG_MAX).is_ok());
    let huge = SlideParams::new(DEFAULT_LOG_MAX + 1, DEFAULT_LOG_MAX + 1, None, DEFAULT_LOG_MAX);
    assert!(huge.unwrap_err().to_string().contains("ratelimit.slide-log-max"));
    // Either side at the maximum is enough; both above it is refused.
    assert!(SlideParams::new(50, 1000, None, 50).is_ok());
    assert!(SlideParams::new(1000, 50, None, 50).is_ok());
    assert!(SlideParams::new(51, 51, None, 50).is_err());
    assert!(SlideParams::new(51, 51, Some(1), 50).is_ok());
}

#[test]
fn a_log_never_holds_more_than_its_entries_bound() {
    // One request per ms, for ten windows: a large limit over a short window ...
    let (limit, window) = (1_000_000, 50);
    let mut d = Sim::new();
    for k in 0..500 {
        assert!(d.call(&exact(limit, window), T0 + k, 1).allowed);
        let count = d.state.as_ref().unwrap().entry_count();
        assert!(count as u64 <= log_entries_bound(limit, window), "{count} at {k}");
    }
    assert_eq!(d.state.as_ref().unwrap().entry_count(), 50);
    // ... and a small limit over a long one.
    let (limit, window) = (7, 86_400_000);
    let mut d = Sim::new();
    for k in 0..500 {
        d.call(&exact(limit, window), T0 + k, 1);
        let count = d.state.as_ref().unwrap().entry_count();
        assert!(count as u64 <= log_entries_bound(limit, window), "{count} at {k}");
    }
    assert_eq!(d.state.as_ref().unwrap().entry_count(), 7);
}

#[test]
fn reset_never_exceeds_100_years() {
    let p = bucketed(1, MAX_DURATION_MS, 1);
    let e = evaluate(None, &p, crate::grammar::args::MAX_AT_MS, 1);
    assert!((e.decision.reset_after_ms as u128) < crate::grammar::args::MAX_RESET_MS);
    assert_eq!(
        e.decision.reset_after_ms as u64,
        2 * MAX_DURATION_MS - 1 - (crate::grammar::args::MAX_AT_MS as u64 % MAX_DURATION_MS)
    );
}

#[test]
fn exact_slides() {
    let p = exact(3, 1000);
    let mut d = Sim::new();
    assert_eq!(reply(&d.call(&p, T0, 1)), [1, 3, 2, 0, 1000]);
    assert_eq!(reply(&d.call(&p, T0 + 100, 1)), [1, 3, 1, 0, 1000]);
    assert_eq!(reply(&d.call(&p, T0 + 200, 1)), [1, 3, 0, 0, 1000]);
    // Full: the first entry leaves at T0 + 1000.
    assert_eq!(reply(&d.call(&p, T0 + 500, 1)), [0, 3, 0, 500, 700]);
    assert_eq!(reply(&d.call(&p, T0 + 999, 1)), [0, 3, 0, 1, 201]);
    assert_eq!(reply(&d.call(&p, T0 + 1000, 1)), [1, 3, 0, 0, 1000]);
    // Needs two to leave: T0+100 and T0+200.
    assert_eq!(reply(&d.call(&p, T0 + 1000, 2)), [0, 3, 0, 200, 1000]);
    assert_eq!(reply(&d.call(&p, T0 + 1200, 2)), [1, 3, 0, 0, 1000]);
    assert_eq!(
        d.state.as_ref().unwrap().entries().collect::<Vec<_>>(),
        vec![(T0 + 1000, 1), (T0 + 1200, 2)]
    );
    // Cost above the limit never passes; cost 0 always does and changes nothing.
    assert_eq!(reply(&d.call(&p, T0 + 1300, 4)), [0, 3, 0, -1, 900]);
    assert_eq!(reply(&d.call(&p, T0 + 1300, 0)), [1, 3, 0, 0, 900]);
}

#[test]
fn same_ms_requests_merge() {
    let p = exact(100, 1000);
    let mut d = Sim::new();
    for _ in 0..10 {
        assert!(d.call(&p, T0, 3).allowed);
    }
    d.call(&p, T0 + 5, 1);
    d.call(&p, T0 + 5, 1);
    let s = d.state.unwrap();
    assert_eq!(s.entries().collect::<Vec<_>>(), vec![(T0, 30), (T0 + 5, 2)]);
    assert_eq!(s.entry_count(), 2);
    assert_eq!(s.stored_total(), 32);
}

#[test]
fn one_entry_log_needs_no_heap() {
    let p = exact(10, 60_000);
    let e = evaluate(None, &p, T0, 1);
    assert_eq!(e.next.as_ref().unwrap().heap_bytes(), 0);
    let e2 = evaluate(e.next.as_ref(), &p, T0, 4);
    assert_eq!(e2.next.unwrap().heap_bytes(), 0);
}

/// At most 16 bytes per entry (the inline one counting as one) beside the 48 bytes of the
/// state's own fields ([`HOLDER`], rounded to the allocator's classes) that let the module keep
/// a log as its buffer alone, in place of a 48-byte box (`src/shell/server/values.rs`).
#[test]
fn log_memory_stays_within_16_bytes_per_entry() {
    fn admit(state: &mut Option<SlideState>, p: &SlideParams, t: i64) {
        match state {
            Some(s) => assert!(evaluate_in_place(s, p, t, 1, true).expect("in place").0.allowed),
            None => *state = evaluate(None, p, t, 1).next,
        }
    }
    // Typical entries: cost 1, gaps under 16 s.
    let p = exact(100_000, 36_000_000);
    let mut state = None;
    let mut t = T0;
    for n in 1..=5000u64 {
        t += (n * 7919) as i64 % 1500 + 1;
        admit(&mut state, &p, t);
        let s = state.as_ref().unwrap();
        let log = s.heap_bytes().saturating_sub(STATE_BYTES);
        assert!(log as u64 <= 16 * n, "{n} entries: {} bytes", s.heap_bytes());
    }
    let s = state.as_ref().unwrap();
    s.validate().unwrap();
    assert_eq!(s.entry_count(), 5000);
    let per_entry = s.heap_bytes() as f64 / 5000.0;
    assert!(per_entry < 5.0, "{per_entry}");
    // Steady state: entries leave as new ones come, the buffer does not creep.
    let p = exact(2000, 10_000);
    let mut state = None;
    let mut most = 0;
    for k in 0..20_000i64 {
        admit(&mut state, &p, T0 + k * 10 + k % 3);
        most = most.max(state.as_ref().unwrap().heap_bytes());
    }
    let s = state.as_ref().unwrap();
    s.validate().unwrap();
    let n = s.entry_count();
    assert!(most <= 4 * n, "{n} entries, {most} bytes at most");
    // After a burst, the buffer shrinks as entries leave.
    let p = exact(1000, 1000);
    let mut state = None;
    for k in 0..1000 {
        admit(&mut state, &p, T0 + k);
    }
    let big = state.as_ref().unwrap().heap_bytes();
    admit(&mut state, &p, T0 + 1995);
    let s = state.as_ref().unwrap();
    s.validate().unwrap();
    assert_eq!(s.entry_count(), 5);
    assert!(
        s.heap_bytes() <= 16 * 5 + STATE_BYTES && s.heap_bytes() < big,
        "{} {big}",
        s.heap_bytes()
    );
}

#[test]
fn retry_and_reset_are_exact() {
    let p = exact(5, 777);
    let mut d = Sim::new();
    for (gap, cost) in [(0, 2), (13, 1), (100, 2)] {
        assert!(d.call(&p, T0 + gap, cost).allowed);
    }
    let at = T0 + 300;
    let limited = d.peek(&p, at, 3);
    assert!(!limited.allowed);
    let r = limited.retry_after_ms;
    assert!(d.peek(&p, at + r, 3).allowed);
    assert!(!d.peek(&p, at + r - 1, 3).allowed);
    let reset = d.peek(&p, at, 0).reset_after_ms;
    assert_eq!(at + reset, T0 + 100 + 777);
    assert_eq!(reply(&d.peek(&p, at + reset, 5)), [1, 5, 0, 0, 777]);
    assert!(!d.peek(&p, at + reset - 1, 5).allowed);
    assert!(live(d.state.as_ref(), at + reset).is_none());
    assert!(live(d.state.as_ref(), at + reset - 1).is_some());
}

#[test]
fn time_going_backwards_counts_as_no_time_passing() {
    let p = exact(2, 1000);
    let mut d = Sim::new();
    d.call(&p, T0, 1);
    d.call(&p, T0 + 500, 1);
    // An AT before the last admitted call: judged at T0 + 500.
    assert_eq!(reply(&d.call(&p, T0 - 10_000, 1)), [0, 2, 0, 500, 1000]);
    assert_eq!(reply(&d.call(&p, T0 + 200, 0)), [1, 2, 0, 0, 1000]);
    assert_eq!(d.state.as_ref().unwrap().updated_ms, T0 + 500);
    // Admitted at now' = updated_ms: merged into the newest entry.
    let p3 = exact(3, 1000);
    assert_eq!(reply(&d.call(&p3, T0, 1)), [1, 3, 0, 0, 1000]);
    assert_eq!(
        d.state.as_ref().unwrap().entries().collect::<Vec<_>>(),
        vec![(T0, 1), (T0 + 500, 2)]
    );
    let b = bucketed(2, 1000, 4);
    let mut d = Sim::new();
    d.call(&b, T0 + 600, 2);
    assert_eq!(reply(&d.call(&b, T0, 1)), [0, 2, 0, 1024, 1149]);
}

#[test]
fn extreme_parameters_do_not_overflow() {
    let max_at = crate::grammar::args::MAX_AT_MS;
    // 1 per 10 years.
    let p = exact(1, MAX_DURATION_MS);
    let mut d = Sim::new();
    assert!(d.call(&p, 0, 1).allowed);
    assert_eq!(
        reply(&d.call(&p, 5, 1)),
        [0, 1, 0, MAX_DURATION_MS as i64 - 5, MAX_DURATION_MS as i64 - 5]
    );
    assert!(d.call(&p, MAX_DURATION_MS as i64, 1).allowed);
    // 10^12 per ms, cost 10^12, at the end of time.
    for p in
        [exact(MAX_COUNT, 1), bucketed(MAX_COUNT, 1, 1), bucketed(MAX_COUNT, MAX_DURATION_MS, 1000)]
    {
        let mut d = Sim::new();
        assert!(d.call(&p, max_at - 1, MAX_COUNT).allowed);
        assert!(!d.call(&p, max_at - 1, 1).allowed);
        assert_eq!(d.call(&p, max_at, MAX_COUNT + 1).retry_after_ms, -1);
        let _ = d.call(&p, max_at, MAX_COUNT);
        let _ = d.call(&exact(MAX_COUNT, MAX_DURATION_MS), max_at, MAX_COUNT);
        let _ = d.call(&bucketed(1, 1000, 1000), max_at, 1);
    }
    // Many distinct large entries.
    let p = exact(MAX_COUNT, MAX_DURATION_MS);
    let mut d = Sim::new();
    for k in 0..100i64 {
        assert!(d.call(&p, k * 3_000_000_000, 9_000_000_000).allowed);
    }
    assert!(d.state.as_ref().unwrap().heap_bytes() <= 16 * 100);
}

#[test]
fn buckets_two_counter_estimate() {
    // b = 1: 10 per 1000 ms; 8 in [0, 1000), then at 1250 the previous counts 8·(1000−250−1)/1000.
    let p = bucketed(10, 1000, 1);
    let mut d = Sim::new();
    assert_eq!(reply(&d.call(&p, T0 - T0 % 1000 + 900, 8)), [1, 10, 2, 0, 1099]);
    let base = T0 - T0 % 1000;
    // At base+1250: used = 8·749/1000 = 5.992 → remaining ⌊4.008⌋ = 4.
    assert_eq!(reply(&d.peek(&p, base + 1250, 0)), [1, 10, 4, 0, 749]);
    assert_eq!(reply(&d.call(&p, base + 1250, 4)), [1, 10, 0, 0, 1749]);
    // 1 more needs used ≤ 9 − ... : 8·(999−r)/1000 + 4 ≤ 9 → r ≥ 374.
    let limited = d.call(&p, base + 1250, 1);
    assert_eq!(reply(&limited), [0, 10, 0, 124, 1749]);
    assert!(d.peek(&p, base + 1374, 1).allowed);
    assert!(!d.peek(&p, base + 1373, 1).allowed);
    // 6 more: the old counter must be gone (r = 999), and then still 4 + 6 ≤ 10.
    assert_eq!(d.peek(&p, base + 1250, 6).retry_after_ms, 749);
    // 7 more: the current 4 must leave too: across a sub-window boundary.
    let r = d.peek(&p, base + 1250, 7).retry_after_ms;
    assert!(d.peek(&p, base + 1250 + r, 7).allowed);
    assert!(!d.peek(&p, base + 1250 + r - 1, 7).allowed);
}

#[test]
fn buckets_over_admission_bound_is_reached() {
    for limit in [1u64, 2, 3, 5, 10, 100, 1001] {
        for b in [1u64, 2, 3, 5] {
            for w in [1u64, 2, 3, 7, 100, 1000] {
                let window = b * w;
                let p = bucketed(limit, window, b);
                let w = w as i64;
                let m = T0.div_euclid(w) + 1;
                let first = (m + 1) * w - 1;
                let mut d = Sim::new();
                assert!(d.call(&p, first, limit).allowed);
                let extra = limit - limit.div_ceil(w as u64);
                let mut admitted = vec![(first, limit)];
                if w >= 2 {
                    let second = (m + b as i64 + 1) * w - 2;
                    assert_eq!(second - first, window as i64 - 1);
                    if extra > 0 {
                        assert!(d.call(&p, second, extra).allowed);
                        admitted.push((second, extra));
                    }
                    assert!(!d.peek(&p, second, 1).allowed);
                }
                let most = max_in_window(&admitted, window as i64);
                assert_eq!(most, bucket_bound(limit, window, b), "limit {limit} b {b} w {w}");
            }
        }
    }
}

#[test]
fn exact_to_buckets_and_back() {
    let e = exact(10, 1000);
    let mut d = Sim::new();
    let base = T0 - T0 % 1000;
    d.call(&e, base + 100, 2);
    d.call(&e, base + 250, 3);
    d.call(&e, base + 600, 1);
    // To 4 buckets of 250 ms at base+900: events go to ⌈ts/250⌉ → sub-windows 1, 1, 3 (capped).
    let b4 = bucketed(10, 1000, 4);
    let dec = d.peek(&b4, base + 900, 0);
    assert_eq!(dec.remaining, 4);
    let conv = convert(d.state.as_ref().unwrap(), &b4, base + 900).unwrap();
    let i = (base + 900) / 250;
    assert_eq!(conv.counters().collect::<Vec<_>>(), vec![0, 0, 5, 0, 1]);
    assert_eq!(conv.updated_ms, base + 900);
    assert_eq!(i % 5, (conv.updated_ms / 250) % 5);
    assert!(d.call(&b4, base + 900, 1).allowed);
    // Back to exact: each sub-window at its last ms, the current one at now'.
    let conv = convert(d.state.as_ref().unwrap(), &e, base + 950).unwrap();
    assert_eq!(conv.entries().collect::<Vec<_>>(), vec![(base + 499, 5), (base + 950, 2)]);
    // Shorter window: drops what falls outside.
    let short = exact(10, 300);
    let conv = convert(d.state.as_ref().unwrap(), &short, base + 950).unwrap();
    assert_eq!(conv.entries().collect::<Vec<_>>(), vec![(base + 950, 2)]);
    assert_eq!(reply(&d.call(&exact(10, 40), base + 950, 1)), [1, 10, 7, 0, 40]);
    // Nothing left: judged as a fresh limiter at now'.
    let mut d = Sim::new();
    d.call(&e, base + 100, 2);
    assert!(convert(d.state.as_ref().unwrap(), &exact(10, 40), base + 950).is_none());
    assert_eq!(reply(&d.call(&exact(10, 40), base + 950, 1)), [1, 10, 9, 0, 40]);
}

#[test]
fn limit_change_keeps_the_log_whole() {
    let big = exact(10, 1000);
    let mut d = Sim::new();
    for k in 0..8 {
        d.call(&big, T0 + k * 10, 1);
    }
    let small = exact(3, 1000);
    // 8 used against a limit of 3: remaining 0, wait until 6 have left.
    assert_eq!(reply(&d.call(&small, T0 + 100, 1)), [0, 3, 0, 950, 970]);
    assert_eq!(reply(&d.call(&small, T0 + 1050, 1)), [1, 3, 0, 0, 1000]);
    assert_eq!(d.state.as_ref().unwrap().entry_count(), 3);
    // Larger limit: no top-up beyond what the log allows.
    assert_eq!(d.call(&exact(100, 1000), T0 + 1050, 0).remaining, 97);
}

#[test]
fn round_trip_through_entries_and_counters() {
    let p = exact(50, 10_000);
    let mut d = Sim::new();
    for k in 0..30i64 {
        d.call(&p, T0 + k * k * 7, (k % 3 + 1) as u64);
    }
    let s = d.state.unwrap();
    let entries: Vec<_> = s.entries().collect();
    let back = SlideState::from_entries(s.limit, s.window_ms, s.updated_ms, &entries).unwrap();
    assert_eq!(back, s);
    let p = bucketed(50, 10_000, 10);
    let mut d = Sim::new();
    for k in 0..30i64 {
        d.call(&p, T0 + k * k * 7, (k % 3 + 1) as u64);
    }
    let s = d.state.unwrap();
    let counters: Vec<_> = s.counters().collect();
    assert_eq!(counters.len(), 11);
    let back = SlideState::from_counters(
        s.limit,
        s.window_ms,
        plain(s.mode.buckets()),
        None,
        s.updated_ms,
        &counters,
    )
    .unwrap();
    assert_eq!(back, s);
}

#[test]
fn from_entries_refuses_impossible_logs() {
    let ok = [(T0, 1), (T0 + 5, 2)];
    assert!(SlideState::from_entries(3, 100, T0 + 5, &ok).is_ok());
    assert!(SlideState::from_entries(2, 100, T0 + 5, &ok).is_err(), "above the limit");
    assert!(SlideState::from_entries(3, 5, T0 + 5, &ok).is_err(), "outside the window");
    assert!(SlideState::from_entries(3, 100, T0 + 6, &ok).is_err(), "not ending at updated");
    assert!(SlideState::from_entries(3, 100, T0 + 5, &[(T0 + 5, 1), (T0 + 5, 1)]).is_err());
    assert!(SlideState::from_entries(3, 100, T0 + 5, &[(T0, 0), (T0 + 5, 1)]).is_err());
    assert!(SlideState::from_entries(3, 100, T0, &[]).is_err());
    assert!(SlideState::from_entries(3, 100, -5, &[(-5, 1)]).is_err());
    assert!(SlideState::from_counters(3, 100, plain(4), None, T0, &[0, 0, 0, 0, 1]).is_ok());
    assert!(
        SlideState::from_counters(3, 100, plain(4), None, T0, &[0, 0, 0, 1]).is_err(),
        "b + 1 counters"
    );
    assert!(
        SlideState::from_counters(3, 100, plain(4), None, T0, &[0, 0, 0, 1, 0]).is_err(),
        "newest empty"
    );
    assert!(
        SlideState::from_counters(3, 100, plain(4), None, T0, &[0, 2, 0, 0, 2]).is_err(),
        "above the limit"
    );
    assert!(
        SlideState::from_counters(3, 100, plain(3), None, T0, &[0, 0, 0, 1]).is_err(),
        "indivisible"
    );
    assert!(SlideState::from_counters(3, 100, plain(4), None, T0, &[u64::MAX, 0, 0, 0, 1]).is_err());
}

#[test]
fn validate_catches_corrupt_buffers() {
    let p = exact(50, 10_000);
    let mut d = Sim::new();
    for k in 0..5i64 {
        d.call(&p, T0 + k * 10, 1);
    }
    let s = d.state.unwrap();
    assert!(s.validate().is_ok());
    let mut bad = s.clone();
    bad.buffer.word = 0;
    assert!(bad.validate().is_err());
    let mut bad = s.clone();
    bad.updated_ms += 1;
    assert!(bad.validate().is_err());
    let mut bad = s.clone();
    bad.limit = 4;
    assert!(bad.validate().is_err());
    for at in 0..s.buffer.heap.len() {
        let mut bad = s.clone();
        let mut heap = bad.buffer.heap.to_vec();
        heap[at] ^= 0x41;
        bad.buffer.heap = heap.into_boxed_slice();
        let _ = bad.validate();
        let _ = evaluate(Some(&bad), &p, T0 + 20, 1);
    }
    let mut bad = s.clone();
    bad.mode = SlideMode::from_buckets(1);
    assert!(bad.validate().is_err());
}

// ---------------------------------------------------------------------------------------------
// The call sequences the property tests draw (here and in `properties`, `anchor`)

#[derive(Debug, Clone)]
struct Call {
    gap: i64,
    cost: u64,
}

fn calls(max_gap: i64, max_cost: u64, n: usize) -> impl Strategy<Value = Vec<Call>> {
    proptest::collection::vec(
        (
            -max_gap / 4..=max_gap,
            prop_oneof![3 => 1..=max_cost, 1 => Just(0u64), 1 => 1..=max_cost * 2],
        )
            .prop_map(|(gap, cost)| Call { gap, cost }),
        1..n,
    )
}

/// The two-owner protocol of a log kept as its buffer alone, round trip after round trip:
/// the key's pointer ([`SlideState::into_log_buffer`]) and the state expanded from it
/// ([`SlideState::from_log_buffer`]) share one buffer; the state is judged, then settled back
/// into a pointer (the old pointer is then dead) — never dropped while the pointer lives, and
/// the pointer never read while the state owns the buffer — and freed exactly once, by the
/// last state. Run under Miri (`make miri`), which fails on a
/// double free, a use after free or a leak.
#[test]
#[allow(unsafe_code)]
fn a_log_kept_as_its_buffer_round_trips_with_one_owner_at_a_time() {
    let p = exact(1000, 60_000);
    let mut state = evaluate(None, &p, T0, 1).next.expect("admitted");
    for k in 1..40 {
        assert!(
            evaluate_in_place(&mut state, &p, T0 + k * 7, 1, true).expect("in place").0.allowed
        );
    }
    let before: Vec<_> = state.entries().collect();
    let mut pointer = state.into_log_buffer().expect("a log with older entries has a holder");
    for k in 40..80 {
        // SAFETY: `pointer` came from `into_log_buffer`; nothing else frees it. Read before
        // the buffer is expanded: while a state owns it, the pointer is not used at all.
        let len = unsafe { SlideState::log_buffer_len(pointer) };
        // SAFETY: as above; the state is settled again below before it could be dropped: one
        // owner at a time.
        let mut expanded = unsafe { SlideState::from_log_buffer(pointer) };
        assert_eq!(len, expanded.heap_bytes());
        assert!(
            evaluate_in_place(&mut expanded, &p, T0 + k * 7, 1, true).expect("in place").0.allowed
        );
        expanded.validate().expect("valid");
        pointer = expanded.into_log_buffer().expect("still a log with a holder");
    }
    // SAFETY: the last owner: the state takes the buffer and frees it when dropped.
    let last = unsafe { SlideState::from_log_buffer(pointer) };
    let after: Vec<_> = last.entries().collect();
    assert_eq!(after.len(), 80);
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(last.stored_total(), 80);
}
