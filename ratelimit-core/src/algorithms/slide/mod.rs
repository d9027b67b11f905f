//! Sliding window (`RL.SLIDE`): at most `limit` permits in any interval of `window` ms.
//!
//! # Terms
//! * **window** `P` (ms): the length of the sliding interval. A request admitted at instant `ts`
//!   (whole unix ms) *counts* at every instant `t` with `ts ≤ t < ts + P`, i.e. while
//!   `ts ∈ (t − P, t]`; it *leaves* the window at `ts + P`.
//! * **used(t)**: the permits that count at `t`. A request of cost `c` at `t` is admitted iff
//!   `used(t) + c ≤ limit`; a request of cost 0 is always admitted (README, Arguments:
//!   `COST n`).
//! * **mode** ([`SlideMode`]): how `used(t)` is kept. *Exact* (the default) keeps the log of
//!   admitted requests and is exact (`log.rs`); `BUCKETS b` keeps one counter per sub-window of
//!   `window / b` ms and estimates (`ring.rs`, which also proves its worst case), on the
//!   epoch's grid or, with `ANCHOR`, on one from the first admitted call, comparing the
//!   estimate rounded down with `FLOOR`. Either way the
//!   variable-size part is one [`SlideBuffer`]: an inline word and one heap buffer.
//!
//! # Parameter changes
//! (README, "Keys, time, persistence, replication": parameter changes never grant permits.)
//! The stored state is first brought up to `now'` under its own parameters (entries or
//! sub-windows that have left are dropped). Then:
//! * Same mode, same window, other `limit`: the log / counters are kept whole and judged
//!   against the new limit (`remaining = max(0, limit − used)`). No request is admitted while
//!   `used` exceeds the new limit, so a stored log never exceeds the new limit's bound.
//! * Any other change (window, exact ↔ `BUCKETS`, another `b`) goes through a list of events
//!   `(ts, cost)`: exact entries as they are; a sub-window's count as one event at the
//!   sub-window's last ms, or at `now'` for the current sub-window (the estimate counts a
//!   sub-window until its last ms has left, so the event must count that long too). Events
//!   that fall outside the new window (`ts ≤ now' − P_new`) are dropped (a shorter window
//!   drops entries; a longer one never brings back entries that had already left). Exact
//!   mode takes the events as its log. `BUCKETS b` puts each event into sub-window
//!   `⌈ts / w⌉` (the first sub-window starting at or after it, so it counts in full for at
//!   least as long as the event itself would), capped at the current sub-window.
//!
//!   So at the conversion instant `used` never decreases and no permit is gained (exact →
//!   buckets: equal; buckets → exact: the partly counted oldest sub-window counts in full),
//!   and every carried count stays in the window at least as long as before, except counts
//!   of the current sub-window, which an exact log can only date at `now'`.
//!
//! # Time
//! `now' = max(now, updated_ms)`; all reply times are measured from `now'`. A limited request,
//! `COST 0` and a dry run change nothing.
//!
//! # Cost per call
//! [`evaluate`] returns the new state as a copy of the log (O(log size) per admitted call);
//! [`evaluate_in_place`] gives the same decisions and states for unchanged parameters while
//! updating the stored value in place: amortized O(1) for exact mode, and O(1) plus vectorized
//! block sums over at most `b + 1` counters for bucketed mode.

mod alloc_size;
mod log;
mod ring;
mod varint;

use std::num::NonZeroU16;

use self::log::ExactView;
pub use self::log::{SlideEntries, HOLDER};
use self::ring::{BucketView, Grid};
use crate::algorithms::decision::{saturate_i64, Decided, Decision};
use crate::algorithms::state::{info_int, live, CorruptState, Refunded, Stored};
use crate::grammar::args::{MAX_AT_MS, MAX_BUCKETS, MAX_COUNT, MAX_DURATION_MS};
use crate::grammar::error::ArgError;

/// Default of the module configuration `ratelimit.slide-log-max`: the most entries an exact
/// sliding window's log may come to hold (see [`log_entries_bound`]). A log this long takes
/// about 2–5 MB (typical entries of 2–5 bytes; 16 bytes per entry at worst).
pub const DEFAULT_LOG_MAX: u64 = 1_000_000;

/// The most entries the exact log of `limit` per `window_ms` can ever hold: every entry has
/// cost ≥ 1 and the entries in the window add up to at most `limit`, and entries are distinct
/// milliseconds inside the window (same-ms requests are merged), so
/// `min(limit, window_ms)`. `ratelimit.slide-log-max` bounds this, not `limit`: a million per
/// 2 s logs at most 2 000 entries.
pub fn log_entries_bound(limit: u64, window_ms: u64) -> u64 {
    limit.min(window_ms)
}

/// How a sliding window counts the permits in its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlideMode {
    /// The exact log of admitted requests (no `BUCKETS`).
    Exact,
    /// `BUCKETS b [ANCHOR] [FLOOR]`: `b` sub-windows of `window / b` ms, one counter each, the
    /// oldest weighted by the share of it still inside the window.
    Buckets(Buckets),
}

/// The options of a bucketed window (`BUCKETS b [ANCHOR] [FLOOR]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    /// `b`: sub-windows per window, 1 … 1000.
    pub count: NonZeroU16,
    /// `ANCHOR`: the sub-window grid starts at the first admitted call of a fresh limiter
    /// (its *origin*, kept in the state) instead of at multiples of `w` since the epoch.
    pub anchor: bool,
    /// `FLOOR`: the estimate is rounded down to whole permits before it is compared.
    pub floor: bool,
}

impl Buckets {
    /// `BUCKETS b` without options.
    pub fn plain(count: NonZeroU16) -> Buckets {
        Buckets { count, anchor: false, floor: false }
    }
}

impl SlideMode {
    /// The mode from its number as stored (RDB payload, packed form): `b`, or 0 for exact;
    /// with the `ANCHOR` and `FLOOR` flags (ignored for exact).
    pub fn from_parts(buckets: u16, anchor: bool, floor: bool) -> SlideMode {
        NonZeroU16::new(buckets)
            .map_or(SlideMode::Exact, |count| SlideMode::Buckets(Buckets { count, anchor, floor }))
    }

    /// The mode from its number: `BUCKETS b` without options, or exact for 0.
    pub fn from_buckets(buckets: u16) -> SlideMode {
        SlideMode::from_parts(buckets, false, false)
    }

    /// The mode as a number, as stored and as `RL.INFO` shows it: `b`, or 0 for exact.
    pub fn buckets(self) -> u16 {
        match self {
            SlideMode::Exact => 0,
            SlideMode::Buckets(b) => b.count.get(),
        }
    }

    /// `ANCHOR` is in force.
    pub fn anchored(self) -> bool {
        matches!(self, SlideMode::Buckets(Buckets { anchor: true, .. }))
    }

    /// `FLOOR` is in force.
    pub fn floored(self) -> bool {
        matches!(self, SlideMode::Buckets(Buckets { floor: true, .. }))
    }

    /// The mode without `FLOOR`: what shapes the stored state (a log, or counters on a grid).
    fn grid(self) -> SlideMode {
        match self {
            SlideMode::Buckets(b) => SlideMode::Buckets(Buckets { floor: false, ..b }),
            exact => exact,
        }
    }
}

/// The parameters of one `RL.SLIDE` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlideParams {
    /// Most permits admitted in any interval of `window_ms`.
    pub limit: u64,
    /// The window length `P` in ms.
    pub window_ms: u64,
    /// The exact log, or `BUCKETS b`.
    pub mode: SlideMode,
}

impl SlideParams {
    /// Validates a parameter set: `limit` 1 … 10^12, `window` 1 ms … 10 years, `BUCKETS b`
    /// 1 … 1000 dividing the window; without `BUCKETS`, the log's worst case
    /// `min(limit, window_ms) ≤ log_max` (`ratelimit.slide-log-max`, see
    /// [`log_entries_bound`]). The 100-year reset rule always holds: a limiter resets at
    /// most `2·window` after its last admitted call.
    pub fn new(
        limit: u64,
        window_ms: u64,
        buckets: Option<u64>,
        log_max: u64,
    ) -> Result<Self, ArgError> {
        if !(1..=MAX_COUNT).contains(&limit) {
            return Err(ArgError::Integer { name: "limit", min: 1, max: i128::from(MAX_COUNT) });
        }
        if !(1..=MAX_DURATION_MS).contains(&window_ms) {
            return Err(ArgError::DurationRange {
                name: "window",
                min_ms: 1,
                max_ms: i128::from(MAX_DURATION_MS),
            });
        }
        let mode = match buckets {
            None => {
                let entries = log_entries_bound(limit, window_ms);
                if entries > log_max {
                    return Err(ArgError::Invalid(format!(
                        "an exact sliding window of {limit} per {window_ms}ms can log {entries} \
                         entries (one per ms, at most the limit), above ratelimit.slide-log-max \
                         ({log_max}); use BUCKETS b for a bucketed window, or raise \
                         ratelimit.slide-log-max"
                    )));
                }
                SlideMode::Exact
            }
            Some(b) => {
                let range =
                    ArgError::Integer { name: "BUCKETS", min: 1, max: i128::from(MAX_BUCKETS) };
                if !(1..=MAX_BUCKETS).contains(&b) {
                    return Err(range);
                }
                if !window_ms.is_multiple_of(b) {
                    return Err(ArgError::Invalid(format!(
                        "BUCKETS {b} does not divide the window ({window_ms}ms) into whole \
                         milliseconds"
                    )));
                }
                let b = u16::try_from(b).ok().and_then(NonZeroU16::new).ok_or(range)?;
                SlideMode::Buckets(Buckets::plain(b))
            }
        };
        Ok(SlideParams { limit, window_ms, mode })
    }

    /// The same parameters with `ANCHOR` and `FLOOR` as given: both need `BUCKETS`.
    pub fn with_options(self, anchor: bool, floor: bool) -> Result<Self, ArgError> {
        match self.mode {
            SlideMode::Buckets(b) => {
                Ok(SlideParams { mode: SlideMode::Buckets(Buckets { anchor, floor, ..b }), ..self })
            }
            SlideMode::Exact if anchor || floor => {
                let option = if anchor { "ANCHOR" } else { "FLOOR" };
                Err(ArgError::Invalid(format!(
                    "syntax error: {option} needs BUCKETS b (it is an option of the bucketed \
                     sliding window)"
                )))
            }
            SlideMode::Exact => Ok(self),
        }
    }
}

/// A sliding window as stored in a key: the parameters of its last admitted call, the log or
/// the sub-window counters (see [`SlideBuffer`]), and `updated_ms`, the instant of the last
/// admitted call (in exact mode also the timestamp of the newest log entry).
#[derive(Debug, Clone)]
pub struct SlideState {
    pub limit: u64,
    pub window_ms: u64,
    pub mode: SlideMode,
    pub updated_ms: i64,
    /// The variable-size part, behind one pointer. Read it with [`SlideState::entries`] /
    /// [`SlideState::counters`], rebuild with [`SlideState::from_entries`] /
    /// [`SlideState::from_counters`].
    pub buffer: SlideBuffer,
}

/// The variable-size part of a [`SlideState`]: one inline word and one heap buffer.
///
/// Exact mode: `word` is the cost of the newest entry (at `updated_ms`), `heap` the older
/// entries (empty when there are none; layout in `log.rs`). Bucketed mode: `word` is the sum of
/// the counters, `heap` the ring of `b + 1` counters, sub-window `j` in slot `j mod (b+1)`
/// (layout in `ring.rs`).
#[derive(Debug, Clone, Default)]
pub struct SlideBuffer {
    word: u64,
    heap: Box<[u8]>,
}

impl SlideBuffer {
    /// Splits the buffer into its inline word and its heap buffer (pointer and length), for
    /// compact storage ([`crate::store::packed`]). The heap buffer must come back through
    /// [`SlideBuffer::from_raw_parts`] exactly once, or it leaks.
    pub fn into_raw_parts(self) -> (u64, *mut u8, usize) {
        let len = self.heap.len();
        let ptr = Box::into_raw(self.heap).cast::<u8>();
        (self.word, ptr, len)
    }

    /// The parts [`SlideBuffer::into_raw_parts`] would return, without giving up the heap
    /// buffer.
    pub fn raw_parts(&self) -> (u64, *mut u8, usize) {
        (self.word, self.heap.as_ptr().cast_mut(), self.heap.len())
    }

    /// A buffer of the inline word alone, with no heap buffer (no allocation). In exact mode
    /// this is a log of one entry whose cost is `word` ([`crate::store::inline`]).
    pub fn from_word(word: u64) -> SlideBuffer {
        SlideBuffer { word, heap: Box::default() }
    }

    /// Exact mode: whether the heap buffer holds older entries, and so has room for the
    /// state's own fields ([`HOLDER`]).
    fn has_holder(&self) -> bool {
        self.heap.len() >= log::HEADER
    }

    /// The inline word, when there is no heap buffer (exact mode: a log of one entry of that
    /// cost); `None` when the buffer owns heap memory.
    pub fn word_only(&self) -> Option<u64> {
        self.heap.is_empty().then_some(self.word)
    }

    /// Rebuilds a buffer from [`SlideBuffer::into_raw_parts`].
    ///
    /// # Safety
    /// `ptr` and `len` must come from `into_raw_parts`, and the heap buffer must not be owned
    /// by any other live `SlideBuffer`.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_parts(word: u64, ptr: *mut u8, len: usize) -> SlideBuffer {
        // SAFETY: by the caller's contract, `(ptr, len)` is a `Box<[u8]>` leaked by
        // `into_raw_parts` and owned by nothing else.
        let heap = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
        SlideBuffer { word, heap }
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers (shared by `log.rs` and `ring.rs`)

fn window_i64(window_ms: u64) -> i64 {
    i64::try_from(window_ms).unwrap_or(i64::MAX).max(1)
}

fn to_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// A non-negative time difference `a − b` as a reply field (0 if negative).
fn ms_until(a: i128, b: i128) -> i64 {
    saturate_i64(u128::try_from(a - b).unwrap_or(0))
}

/// `⌊a / b⌋` (`u128::MAX` for `b = 0`), with a 64-bit division when both fit.
fn div(a: u128, b: u128) -> u128 {
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) if b > 0 => u128::from(a / b),
        _ => crate::algorithms::arith::floor_div(a, b),
    }
}

fn wide(v: i64) -> u128 {
    u128::try_from(v).unwrap_or(0)
}

/// The decision on a request of `cost` when `scaled_used` is `used(t)·scale` (the exact log
/// counts whole permits, scale 1; `BUCKETS` counts in `1/w` permits, scale `w`): admitted iff
/// `used + cost ≤ limit`, exactly — or, with `floor` (`FLOOR`), iff `⌊used⌋ + cost ≤ limit`,
/// i.e. `used·scale + cost·scale ≤ limit·scale + scale − 1`. `remaining` is what is left after
/// the request (without it when refused), rounded down: `⌊limit − used⌋ − cost`, or
/// `limit − ⌊used⌋ − cost` with `floor`. `retry` is the wait for a limited request the limit
/// can hold; `reset` the wait until the window is empty, after (`true`) or without the request.
fn verdict(
    limit: u64,
    cost: u64,
    (scaled_used, scale, floor): (u128, u128, bool),
    retry: impl FnOnce() -> i64,
    reset: impl FnOnce(bool) -> i64,
) -> Decision {
    let slack = if floor { scale - 1 } else { 0 };
    let cap = scale * u128::from(limit) + slack;
    let need = scale * u128::from(cost);
    let allowed = cost == 0 || scaled_used.saturating_add(need) <= cap;
    let left = if allowed {
        cap.saturating_sub(scaled_used.saturating_add(need))
    } else {
        cap.saturating_sub(scaled_used)
    };
    let retry_after_ms = if allowed {
        0
    } else if cost > limit {
        -1
    } else {
        retry()
    };
    Decision {
        allowed,
        limit,
        remaining: crate::algorithms::arith::saturate_u64(div(left, scale)),
        retry_after_ms,
        reset_after_ms: reset(allowed && cost > 0),
    }
}

// ---------------------------------------------------------------------------------------------
// Deciding and applying

/// How an admitted request is applied to the state it was judged on.
#[derive(Debug, Clone, Copy)]
enum Plan {
    Exact(ExactView),
    Buckets(BucketView),
}

/// Judges a request of `cost` at `t` (≥ `updated_ms`) against `s` under the call's `limit`
/// and `FLOOR`, in the state's own window and grid (`params` has the same shape).
fn decide(s: &SlideState, params: &SlideParams, t: i64, cost: u64) -> (Decision, Plan) {
    match s.mode {
        SlideMode::Exact => {
            let (d, v) = log::decide_exact(s, params.limit, t, cost);
            (d, Plan::Exact(v))
        }
        SlideMode::Buckets(b) => {
            let floor = params.mode.floored();
            let (d, v) = ring::decide_buckets(s, b, params.limit, floor, t, cost);
            (d, Plan::Buckets(v))
        }
    }
}

/// Applies an admitted request of `cost ≥ 1` at `t` to the state it was judged on; the
/// call's parameters (of the same shape) become the stored ones.
fn apply(s: &mut SlideState, params: &SlideParams, plan: Plan, t: i64, cost: u64) {
    s.limit = params.limit;
    s.mode = params.mode;
    match plan {
        Plan::Exact(view) => log::apply_exact(s, view, t, cost),
        Plan::Buckets(view) => ring::apply_buckets(s, view, cost),
    }
    s.updated_ms = s.updated_ms.max(t);
}

/// The state's counted requests at `t` (under its own parameters) as events, oldest first:
/// exact entries as they are, a sub-window's count at its last ms (at most `t`), so that it
/// counts as long as the estimate counts any part of it.
fn events_at(s: &SlideState, t: i64) -> Vec<(i64, u64)> {
    match s.mode {
        SlideMode::Exact => log::entries_at(s, t),
        SlideMode::Buckets(b) => ring::counter_events_at(s, b, t),
    }
}

/// Converts a live state, brought up to `t`, to other parameters (see the module docs).
/// `None` when nothing of it is in the new window.
fn convert(s: &SlideState, params: &SlideParams, t: i64) -> Option<SlideState> {
    let cutoff = t.saturating_sub(window_i64(params.window_ms));
    let events: Vec<(i64, u64)> =
        events_at(s, t).into_iter().filter(|&(ts, _)| ts > cutoff).collect();
    let newest = *events.last()?;
    if let SlideMode::Buckets(b) = params.mode {
        return Some(ring::build_buckets(params, b, &events, t));
    }
    log::build_exact(params.limit, params.window_ms, &events).or_else(|| {
        // Too many entries for the buffer: everything at the newest instant (conservative).
        let total = events.iter().fold(0u64, |a, e| a.saturating_add(e.1));
        log::build_exact(params.limit, params.window_ms, &[(newest.0, total)])
    })
}

/// The state after a first admitted request of `cost` at `t`.
fn single(params: &SlideParams, t: i64, cost: u64) -> SlideState {
    match params.mode {
        SlideMode::Exact => SlideState {
            limit: params.limit,
            window_ms: params.window_ms,
            mode: SlideMode::Exact,
            updated_ms: t,
            buffer: SlideBuffer { word: cost, heap: Box::default() },
        },
        SlideMode::Buckets(b) => ring::build_buckets(params, b, &[(t, cost)], t),
    }
}

/// A request against no (live) stored window.
fn fresh(params: &SlideParams, t: i64, cost: u64) -> Decided<SlideState> {
    let allowed = cost <= params.limit;
    let next = (allowed && cost > 0).then(|| single(params, t, cost));
    let decision = Decision {
        allowed,
        limit: params.limit,
        remaining: if allowed { params.limit - cost } else { params.limit },
        retry_after_ms: if allowed { 0 } else { -1 },
        reset_after_ms: next
            .as_ref()
            .map_or(0, |n| ms_until(i128::from(n.reset_at_ms()), i128::from(t))),
    };
    Decided { decision, next }
}

/// Evaluates one request of `cost` permits at `now_ms` against the stored window (if any).
///
/// The stored state is brought up to `now' = max(now_ms, updated_ms)` under its own
/// parameters, converted to `params` if they differ (see the module docs), and judged. A
/// state whose reset instant has passed counts as missing. `next` is a new state (a copy of
/// the log) when the request is admitted with `cost > 0`; [`evaluate_in_place`] avoids the
/// copy.
pub fn evaluate(
    stored: Option<&SlideState>,
    params: &SlideParams,
    now_ms: i64,
    cost: u64,
) -> Decided<SlideState> {
    let Some(s) = live(stored, now_ms) else {
        return fresh(params, now_ms, cost);
    };
    let t = now_ms.max(s.updated_ms);
    if s.same_shape(params) {
        let (decision, plan) = decide(s, params, t, cost);
        let next = (decision.allowed && cost > 0).then(|| {
            let mut next = s.clone();
            apply(&mut next, params, plan, t, cost);
            next
        });
        return Decided { decision, next };
    }
    match convert(s, params, t) {
        None => fresh(params, t, cost),
        Some(mut converted) => {
            let (decision, plan) = decide(&converted, params, t, cost);
            let next = (decision.allowed && cost > 0).then(|| {
                apply(&mut converted, params, plan, t, cost);
                converted
            });
            Decided { decision, next }
        }
    }
}

/// [`evaluate`] on a stored state that is updated in place, for a call with the stored
/// parameters while the state is live; `None` otherwise (then [`evaluate`], or
/// [`crate::algorithms::limiter::judge`] for a command, answers).
///
/// When the request is admitted with `cost > 0` and `commit` is true (not a dry run), `state`
/// becomes the new state and the second value is true. Same decision and resulting state as
/// [`evaluate`], without copying the log.
pub fn evaluate_in_place(
    state: &mut SlideState,
    params: &SlideParams,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Option<(Decision, bool)> {
    if state.params() != *params || state.reset_at_ms() <= now_ms {
        return None;
    }
    let t = now_ms.max(state.updated_ms);
    if state.mode == SlideMode::Exact {
        // The exact log's hot path, without the plan of either mode (the parameters are the
        // stored ones: only the log and `updated_ms` change).
        let (decision, view) = log::decide_exact(state, params.limit, t, cost);
        let change = decision.allowed && cost > 0 && commit;
        if change {
            log::apply_exact(state, view, t, cost);
            state.updated_ms = state.updated_ms.max(t);
        }
        return Some((decision, change));
    }
    let (decision, plan) = decide(state, params, t, cost);
    let change = decision.allowed && cost > 0 && commit;
    if change {
        apply(state, params, plan, t, cost);
    }
    Some((decision, change))
}

// ---------------------------------------------------------------------------------------------
// The stored state

/// A sliding window as it stands at an instant, under its stored parameters: what `RL.INFO`
/// shows after `ttl_ms` (the now-dependent fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowAt {
    /// `window_used`: the permits counted at the instant — exact: the costs of the log entries
    /// still inside the window; bucketed: the estimate rounded down.
    pub used: u64,
    /// `window_oldest_ms`: exact, the timestamp of the oldest entry still inside the window;
    /// bucketed, the start of the oldest non-empty sub-window still (partly) counted. `None`
    /// when nothing is counted.
    pub oldest_ms: Option<i64>,
    /// Bucketed only: `window_counts`, the counters of the `b + 1` sub-windows `i − b … i`
    /// (`i` the sub-window of the instant), oldest first — the partly counted oldest one first,
    /// the current one last — and `window_start_ms`, the start of sub-window `i − b`.
    pub buckets: Option<(Vec<u64>, i64)>,
}

impl SlideState {
    /// The window at `now' = max(now_ms, updated_ms)` (see [`WindowAt`]). `counts` false: the
    /// limiter counts for nothing (refunded back to its initial state during a ban), so the
    /// window is empty. Costs O(entries that have left the window) for an exact log, O(b) for
    /// counters: nothing is copied.
    pub fn window_at(&self, now_ms: i64, counts: bool) -> WindowAt {
        let t = now_ms.max(self.updated_ms);
        match self.mode {
            SlideMode::Exact => {
                let (used, oldest_ms) = if counts { log::window_at(self, t) } else { (0, None) };
                WindowAt { used, oldest_ms, buckets: None }
            }
            SlideMode::Buckets(b) => {
                let w = ring::window_at(self, b, t, counts);
                WindowAt {
                    used: w.used,
                    oldest_ms: w.oldest_ms,
                    buckets: Some((w.counts, w.start_ms)),
                }
            }
        }
    }

    /// `RL.REFUND`: gives back `count` permits at `now'` from the newest permits still in the
    /// window — exact: the newest log entries first, splitting one where needed; bucketed: the
    /// newest counted sub-windows first. The state stays dated by its newest remaining permit
    /// (an entry's instant, or the last ms of the newest non-empty sub-window), so its reset
    /// instant moves earlier; nothing remaining is a fresh limiter.
    pub fn refund(&self, now_ms: i64, count: u64) -> Refunded<SlideState> {
        let now = now_ms.max(self.updated_ms);
        match self.mode {
            SlideMode::Exact => log::refund_exact(self, now, count),
            SlideMode::Buckets(b) => ring::refund_buckets(self, b, now, count),
        }
    }

    /// The parameters this window was last admitted with.
    pub fn params(&self) -> SlideParams {
        SlideParams { limit: self.limit, window_ms: self.window_ms, mode: self.mode }
    }

    /// Same window and grid (exact log, or the same `b` and `ANCHOR`): the state is judged
    /// as it stands, whatever the limit and `FLOOR`.
    fn same_shape(&self, params: &SlideParams) -> bool {
        self.window_ms == params.window_ms && self.mode.grid() == params.mode.grid()
    }

    /// `ANCHOR`: the origin of the sub-window grid (the first admitted call of the fresh
    /// limiter the grid started with); `None` for other modes.
    pub fn origin_ms(&self) -> Option<i64> {
        match self.mode {
            SlideMode::Buckets(b) => ring::origin(self, b),
            SlideMode::Exact => None,
        }
    }

    /// Bytes allocated on the heap for the log or counters (add the size of the value itself
    /// for `MEMORY USAGE`). Buffer lengths follow jemalloc's size classes.
    pub fn heap_bytes(&self) -> usize {
        self.buffer.heap.len()
    }

    /// Number of log entries (exact) or non-empty sub-windows (bucketed).
    pub fn entry_count(&self) -> usize {
        match self.mode {
            SlideMode::Exact => self.entries().count(),
            SlideMode::Buckets(_) => self.counters().filter(|c| *c > 0).count(),
        }
    }

    /// Permits counted at `updated_ms` before weighting: the sum of the log's costs (exact) or
    /// of the counters (bucketed).
    pub fn stored_total(&self) -> u64 {
        match self.mode {
            SlideMode::Exact => log::stored_total(self),
            SlideMode::Buckets(_) => self.buffer.word,
        }
    }

    /// Checks a decoded window for consistency (RDB, RESTORE): parameters in range, and a log
    /// or counters that admitted calls can produce. Never panics.
    pub fn validate(&self) -> Result<(), CorruptState> {
        if !(1..=MAX_COUNT).contains(&self.limit)
            || !(1..=MAX_DURATION_MS).contains(&self.window_ms)
        {
            return Err(CorruptState("slide parameters out of range"));
        }
        if !(0..=MAX_AT_MS).contains(&self.updated_ms) {
            return Err(CorruptState("slide update time out of range"));
        }
        let SlideMode::Buckets(buckets) = self.mode else {
            return self.validate_exact();
        };
        let b = u64::from(buckets.count.get());
        if b > MAX_BUCKETS || !self.window_ms.is_multiple_of(b) {
            return Err(CorruptState("slide BUCKETS out of range"));
        }
        self.validate_buckets(buckets)
    }
}

/// Logical equality: same parameters, `updated_ms`, and log entries or counters (whatever the
/// buffer's spare capacity).
impl PartialEq for SlideState {
    fn eq(&self, other: &Self) -> bool {
        self.params() == other.params()
            && self.updated_ms == other.updated_ms
            && self.entries().eq(other.entries())
            && self.counters().eq(other.counters())
    }
}

impl Eq for SlideState {}

impl Stored for SlideState {
    fn updated_ms(&self) -> i64 {
        self.updated_ms
    }

    /// Exact: the newest entry (at `updated_ms`) leaves. Bucketed: the sub-window of
    /// `updated_ms` (the newest non-empty one) has fully left.
    fn reset_at_ms(&self) -> i64 {
        match self.mode {
            SlideMode::Exact => self.updated_ms.saturating_add(window_i64(self.window_ms)),
            SlideMode::Buckets(b) => {
                let grid = Grid::of(self, b);
                to_i64(grid.gone_at(grid.index(self.updated_ms)))
            }
        }
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        let mut fields = vec![
            ("limit", info_int(self.limit)),
            ("window_ms", info_int(self.window_ms)),
            ("buckets", i64::from(self.mode.buckets())),
            ("anchor", i64::from(self.mode.anchored())),
            ("floor", i64::from(self.mode.floored())),
        ];
        fields.extend(self.origin_ms().map(|o| ("origin_ms", o)));
        fields.push(("used", info_int(self.stored_total())));
        fields.push(("entries", i64::try_from(self.entry_count()).unwrap_or(i64::MAX)));
        fields
    }
}

#[cfg(test)]
mod tests;
