//! Bucketed mode (`BUCKETS b`): one counter per sub-window, kept in a ring.
//!
//! The window is cut into `b` aligned *sub-windows* of `w = P / b` ms: sub-window `j` is
//! `[j·w, (j+1)·w)` (aligned to the unix epoch), and the state is one counter `C[j]` per
//! sub-window. At `t = i·w + r` (`0 ≤ r < w`) the interval `(t − P, t]` covers sub-windows
//! `i−b+1 … i` in full and the last `w − r − 1` ms of sub-window `i − b`, so
//!
//! ```text
//! used(t) = C[i−b] · (w − r − 1) / w  +  Σ C[j] for j = i−b+1 … i
//! ```
//!
//! the oldest sub-window weighted by the fraction of its milliseconds still inside (`b = 1` is
//! the two-counter weighted estimate of Cloudflare's sliding counter; `w = 1` is exact). The
//! comparison `used(t) + c ≤ limit` is done exactly (`C·(w−r−1) + w·(S + c) ≤ w·limit`);
//! `remaining` is `⌊limit − used⌋`. `retry_after` is the earliest instant the estimate admits
//! the request (it only falls while no request is admitted: the first sub-window whose newer
//! counters leave room, found with block sums over the ring, then the first ms in it at which
//! the oldest sub-window's weight is small enough); `reset_after` is the instant the newest
//! non-empty sub-window `j` has fully left: `(j+1)·w − 1 + P`.
//!
//! # `ANCHOR` and `FLOOR`
//! With `ANCHOR` the grid starts at the first admitted call `o` of a fresh limiter instead of
//! the epoch (see [`Grid`]): sub-window `j ≥ 0` is `(o + j·w, o + (j+1)·w]`, which is the
//! formula above on `base = o + 1`; `o` is kept after the counters in the ring. With `FLOOR`
//! the comparison is `⌊used(t)⌋ + c ≤ limit`, i.e. `C·(w−r−1) + w·(S + c) ≤ w·limit + w − 1`.
//! `BUCKETS 1 ANCHOR FLOOR` is limits' sliding window counter, decision for decision.
//!
//! # The ring
//! The `b + 1` counters (sub-windows `i−b … i`) are stored as a *ring* in one heap buffer:
//! sub-window `j` in slot `j mod (b+1)`, so that moving on in time only clears the slots of the
//! sub-windows that have left. Every counter is 1, 2, 4 or 8 bytes wide (little-endian), as
//! the limit requires (widened on demand); the [`SlideBuffer`]'s inline word holds their sum.
//!
//! # Worst-case over-admission of `BUCKETS b`
//! With fixed parameters, any interval of `window` ms holds at most
//!
//! ```text
//! 2·limit − ⌈limit·b / window⌉   (= limit + ⌊limit·(window − b) / window⌋)
//! ```
//!
//! admitted permits, i.e. the over-admission beyond `limit` is at most
//! `limit − ⌈limit / w⌉` with `w = window / b`, and this bound is reached: `limit` admitted at
//! the last ms of a sub-window, then, `b` sub-windows later at the second-to-last ms of that
//! sub-window (`window − 1` ms after the first burst), `limit − ⌈limit / w⌉` more. So
//! `BUCKETS b` admits up to almost twice the limit whenever `w ≥ limit`, and is exact when
//! `w = 1` (`b = window`). *Proof sketch:* an interval of `P` ms starting `q` ms into
//! sub-window `m` (`0 ≤ q < w`) covers the tail of `m`, sub-windows `m+1 … m+b−1` (total `M`)
//! and the first `q` ms of `m+b`. At the last admission in `m+b` (at `r ≤ q − 1`) the estimate
//! gives `C[m]·(w−q)/w + M + B ≤ limit`, and `C[m] ≤ limit` (it was counted in full while
//! current), so the interval holds at most `C[m] + M + B ≤ limit + ⌊limit·q/w⌋`, maximal at
//! `q = w − 1`. (For changing parameters the bound applies between changes.) The tests check
//! the bound on random traffic and that the sequence above reaches it exactly.

use std::num::NonZeroU16;

use super::{
    div, ms_until, verdict, wide, window_i64, Buckets, SlideBuffer, SlideMode, SlideParams,
    SlideState,
};
use crate::algorithms::decision::Decision;
use crate::algorithms::state::{CorruptState, Refunded};

/// Bytes after the counters of an `ANCHOR` ring: the grid's origin, an `i64` (little-endian).
const ORIGIN_BYTES: usize = 8;

/// Sub-window geometry: `b` sub-windows of `w` ms in a window of `p` ms, starting at `base`
/// (sub-window `j` is `[base + j·w, base + (j+1)·w)`). `pivot` is a sub-window whose ring slot
/// `pivot_slot` is known, so that slots near it are found without a division.
///
/// Without `ANCHOR` the grid is the epoch's (`base` 0). With `ANCHOR` it starts at the origin
/// `o`, the first admitted call of a fresh limiter, as limits' sliding window counter does: its
/// counter pair shifts when the current counter's TTL (set to `2P` at `o`) drops below `P`,
/// i.e. at `o + P + 1`, so its windows are `(o + k·P, o + (k+1)·P]` and `o` itself belongs to
/// the first. Here: `base = o + 1`, sub-windows never go below 0, and `o` is in sub-window 0
/// (whose documented start, [`Grid::boundary`], is `o`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Grid {
    b: i64,
    w: i64,
    p: i64,
    /// `ANCHOR`: the origin `o`.
    origin: Option<i64>,
    base: i64,
    pivot: i64,
    pivot_slot: i64,
}

impl Grid {
    /// The grid of `b` sub-windows for a window of `window_ms`, from the origin `o` with
    /// `ANCHOR` (`Some(o)`), or the epoch's.
    pub(super) fn new(window_ms: u64, count: NonZeroU16, origin: Option<i64>) -> Grid {
        let p = window_i64(window_ms);
        let b = i64::from(count.get());
        let base = origin.map_or(0, |o| o.saturating_add(1));
        Grid { b, w: (p / b).max(1), p, origin, base, pivot: 0, pivot_slot: 0 }
    }

    /// The grid a stored bucketed state lives on (its origin read from the ring).
    pub(super) fn of(s: &SlideState, buckets: Buckets) -> Grid {
        Grid::new(s.window_ms, buckets.count, origin(s, buckets))
    }

    /// The same grid, with the ring slot of sub-window `j` at hand.
    fn pivoted(self, j: i64) -> Grid {
        Grid { pivot: j, pivot_slot: j.rem_euclid(self.b + 1), ..self }
    }

    /// The sub-window holding instant `t` (never below 0 on an anchored grid, whose instants
    /// are never before its origin).
    pub(super) fn index(&self, t: i64) -> i64 {
        let j = t.saturating_sub(self.base).div_euclid(self.w);
        if self.origin.is_some() {
            j.max(0)
        } else {
            j
        }
    }

    /// The start of sub-window `j` as documented (`RL.INFO`): its first ms on the epoch's grid;
    /// on an anchored grid `o + j·w`, the instant its `(o + j·w, o + (j+1)·w]` follows.
    pub(super) fn boundary(&self, j: i64) -> i64 {
        self.start(j).saturating_sub(i64::from(self.origin.is_some()))
    }

    /// Bytes of the ring after its counters.
    fn trailer(&self) -> usize {
        if self.origin.is_some() {
            ORIGIN_BYTES
        } else {
            0
        }
    }

    fn slots(&self) -> usize {
        usize::try_from(self.b + 1).unwrap_or(1)
    }

    /// The ring slot of sub-window `j`.
    fn slot(&self, j: i64) -> usize {
        let n = self.b + 1;
        let near = j.checked_sub(self.pivot).filter(|d| (-n..=n).contains(d));
        let slot = match near {
            Some(d) => {
                let s = self.pivot_slot + d;
                if s < 0 {
                    s + n
                } else if s >= n {
                    s - n
                } else {
                    s
                }
            }
            None => j.rem_euclid(n),
        };
        usize::try_from(slot).unwrap_or(0)
    }

    fn start(&self, j: i64) -> i64 {
        self.base.saturating_add(j.saturating_mul(self.w))
    }

    /// The last ms of sub-window `j`.
    fn last_ms(&self, j: i64) -> i64 {
        self.start(j.saturating_add(1)).saturating_sub(1)
    }

    /// The instant sub-window `j` has fully left the window.
    pub(super) fn gone_at(&self, j: i64) -> i128 {
        i128::from(self.last_ms(j)) + i128::from(self.p)
    }
}

/// `ANCHOR`: the grid origin kept after the counters in the ring; `None` without `ANCHOR` (or
/// for a ring too short to hold one, which fails validation).
pub(super) fn origin(s: &SlideState, buckets: Buckets) -> Option<i64> {
    if !buckets.anchor {
        return None;
    }
    let heap = &s.buffer.heap;
    let at = heap.len().checked_sub(ORIGIN_BYTES)?;
    Some(i64::from_le_bytes(heap.get(at..)?.try_into().ok()?))
}

/// Bytes a counter needs to hold `v`.
fn width_for(v: u64) -> usize {
    if v <= 0xff {
        1
    } else if v <= 0xffff {
        2
    } else if v <= 0xffff_ffff {
        4
    } else {
        8
    }
}

/// Read access to the counter ring; `width` 0 means a corrupt buffer (all counters read 0).
#[derive(Debug, Clone, Copy)]
struct Ring<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl<'a> Ring<'a> {
    fn of(heap: &'a [u8], grid: &Grid) -> Ring<'a> {
        let heap = heap.get(..heap.len().saturating_sub(grid.trailer())).unwrap_or(&[]);
        let (slots, len) = (grid.slots(), heap.len());
        let width =
            [1, 2, 4, 8].into_iter().find(|w| slots.checked_mul(*w) == Some(len)).unwrap_or(0);
        Ring { bytes: heap, width }
    }

    fn get(&self, slot: usize) -> u64 {
        fn read<const N: usize>(bytes: &[u8], start: usize) -> Option<[u8; N]> {
            bytes.get(start..start.checked_add(N)?)?.try_into().ok()
        }
        let start = slot.saturating_mul(self.width);
        let value = match self.width {
            1 => read::<1>(self.bytes, start).map(|[b]| u64::from(b)),
            2 => read::<2>(self.bytes, start).map(|b| u64::from(u16::from_le_bytes(b))),
            4 => read::<4>(self.bytes, start).map(|b| u64::from(u32::from_le_bytes(b))),
            8 => read::<8>(self.bytes, start).map(u64::from_le_bytes),
            _ => None,
        };
        value.unwrap_or(0)
    }

    /// Sum of the counters in the contiguous slots `lo..hi` (loops the compiler vectorizes).
    fn slots_sum(&self, lo: usize, hi: usize) -> u64 {
        let w = self.width;
        let Some(bytes) = self.bytes.get(lo.saturating_mul(w)..hi.saturating_mul(w)) else {
            return 0;
        };
        match w {
            // At most 1001 counters: 8- and 16-bit sums fit in u32.
            1 => u64::from(bytes.iter().fold(0u32, |a, &b| a.wrapping_add(u32::from(b)))),
            2 => u64::from(bytes.chunks_exact(2).fold(0u32, |a, c| {
                a.wrapping_add(u32::from(u16::from_le_bytes(c.try_into().unwrap_or([0; 2]))))
            })),
            4 => bytes
                .chunks_exact(4)
                .map(|c| u64::from(u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
                .sum(),
            8 => bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .fold(0, u64::saturating_add),
            _ => 0,
        }
    }

    /// Sum of `C[j]` for `j` in `lo..=hi` as the ring stores them (at most `b + 1` slots).
    fn range_sum(&self, grid: &Grid, lo: i64, hi: i64) -> u64 {
        slot_ranges(grid, lo, hi)
            .iter()
            .fold(0u64, |acc, &(a, b)| acc.saturating_add(self.slots_sum(a, b)))
    }

    /// The first `j` in `lo..=hi` at which `Σ C[lo..=j]` reaches `need`, and that sum.
    /// Blocks of 64 counters are summed at once; the block that reaches `need` is narrowed
    /// down by blocks of 8, then single counters.
    fn first_reaching(&self, grid: &Grid, lo: i64, hi: i64, need: u128) -> Option<(i64, u128)> {
        const BLOCK: usize = 64;
        let mut acc = 0u128;
        let mut j = lo;
        for (a, b) in slot_ranges(grid, lo, hi) {
            let (mut s, mut size) = (a, BLOCK);
            while s < b {
                let e = b.min(s.saturating_add(size));
                let sum = u128::from(self.slots_sum(s, e));
                if acc + sum >= need {
                    if e - s == 1 {
                        return Some((j, acc + sum));
                    }
                    size = (size / 8).max(1);
                    continue;
                }
                acc += sum;
                j = j.saturating_add(i64::try_from(e - s).unwrap_or(i64::MAX));
                s = e;
            }
        }
        None
    }
}

/// The (at most two) contiguous slot ranges `[a, b)` holding sub-windows `lo..=hi`.
fn slot_ranges(grid: &Grid, lo: i64, hi: i64) -> [(usize, usize); 2] {
    if hi < lo {
        return [(0, 0); 2];
    }
    let slots = grid.slots();
    let n = usize::try_from(hi.saturating_sub(lo).saturating_add(1)).unwrap_or(slots).min(slots);
    let a = grid.slot(lo);
    let first_end = a.saturating_add(n).min(slots);
    [(a, first_end), (0, n - (first_end - a))]
}

/// Sets the counters of sub-windows `lo..=hi` to 0.
fn ring_clear(heap: &mut [u8], grid: &Grid, lo: i64, hi: i64) {
    let w = Ring::of(heap, grid).width;
    for (a, b) in slot_ranges(grid, lo, hi) {
        if let Some(bytes) = heap.get_mut(a.saturating_mul(w)..b.saturating_mul(w)) {
            bytes.fill(0);
        }
    }
}

/// The ring of `values` (by slot), each `width` bytes, then the grid's origin if it has one.
fn encode_ring(values: &[u64], width: usize, grid: &Grid) -> Box<[u8]> {
    let mut out = Vec::with_capacity(values.len().saturating_mul(width) + grid.trailer());
    for v in values {
        out.extend_from_slice(v.to_le_bytes().get(..width).unwrap_or(&[]));
    }
    if let Some(origin) = grid.origin {
        out.extend_from_slice(&origin.to_le_bytes());
    }
    out.into_boxed_slice()
}

/// Sets the counter in `slot`, widening every counter when the value needs more bytes.
fn ring_set(heap: &mut Box<[u8]>, grid: &Grid, slot: usize, value: u64) {
    let mut width = Ring::of(heap, grid).width;
    if width_for(value) > width {
        let old = Ring::of(heap, grid);
        let values: Vec<u64> = (0..grid.slots()).map(|s| old.get(s)).collect();
        width = width_for(value);
        *heap = encode_ring(&values, width, grid);
    }
    let start = slot.saturating_mul(width);
    if let (Some(dst), Some(src)) =
        (heap.get_mut(start..start.saturating_add(width)), value.to_le_bytes().get(..width))
    {
        dst.copy_from_slice(src);
    }
}

/// The counters brought up to an instant `t` without changing them.
#[derive(Debug, Clone, Copy)]
pub(super) struct BucketView {
    grid: Grid,
    /// Sub-window of `t`.
    i: i64,
    /// Sub-window of `updated_ms` (the ring holds `iu − b … iu`).
    iu: i64,
    /// `t − i·w`.
    r: i64,
    /// `C[i − b]`, the partly counted oldest sub-window.
    old: u64,
    /// Sum of the counters of `i − b … i`.
    total: u64,
}

impl BucketView {
    /// `C[j]` as of `t` (0 outside `i − b … i` and for sub-windows after `iu`).
    fn count(&self, ring: &Ring, j: i64) -> u64 {
        let b = self.grid.b;
        if j > self.iu
            || j > self.i
            || j < self.i.saturating_sub(b)
            || j < self.iu.saturating_sub(b)
        {
            0
        } else {
            ring.get(self.grid.slot(j))
        }
    }

    /// The sub-windows `lo..=hi` that are in the ring but no longer in the window at `t`.
    fn dropped(&self) -> (i64, i64) {
        let lo = self.iu.saturating_sub(self.grid.b);
        let hi = self.iu.min(self.i.saturating_sub(self.grid.b).saturating_sub(1));
        (lo, hi)
    }

    /// `used(t) · w`.
    fn estimate(&self) -> u128 {
        let weight = wide(self.grid.w - self.r - 1);
        let newer = u128::from(self.total.saturating_sub(self.old));
        // Saturating: only a corrupt state (window or counters near 2^64) could overflow.
        (u128::from(self.old) * weight).saturating_add(wide(self.grid.w) * newer)
    }
}

fn bucket_view(s: &SlideState, buckets: Buckets, t: i64) -> BucketView {
    let grid = Grid::of(s, buckets);
    let i = grid.index(t);
    let grid = grid.pivoted(i);
    let ring = Ring::of(&s.buffer.heap, &grid);
    let iu = grid.index(s.updated_ms).min(i);
    // `t − start(i)`: 0 … w − 1 (an anchored grid's origin itself is counted at the start of
    // sub-window 0).
    let r = t.saturating_sub(grid.start(i)).clamp(0, grid.w - 1);
    let mut view = BucketView { grid, i, iu, r, old: 0, total: s.buffer.word };
    if i > iu {
        let (lo, hi) = view.dropped();
        view.total = view.total.saturating_sub(ring.range_sum(&grid, lo, hi));
    }
    view.old = view.count(&ring, i.saturating_sub(grid.b));
    view
}

/// Builds a bucketed state at `t` from events at the latest instants they can have happened:
/// each goes into the first sub-window starting at or after it, capped at the current one.
/// With `ANCHOR` the grid starts at `t` (a new grid): every event goes into its first
/// sub-window.
pub(super) fn build_buckets(
    params: &SlideParams,
    buckets: Buckets,
    events: &[(i64, u64)],
    t: i64,
) -> SlideState {
    let grid = Grid::new(params.window_ms, buckets.count, buckets.anchor.then_some(t));
    let i = grid.index(t);
    let lowest = if buckets.anchor { 0 } else { i64::MIN };
    let mut counters = vec![0u64; grid.slots()];
    for &(ts, cost) in events {
        let j = ts.saturating_sub(grid.base).saturating_add(grid.w - 1).div_euclid(grid.w);
        let j = j.min(i).max(i.saturating_sub(grid.b).saturating_add(1)).max(lowest);
        if let Some(c) = counters.get_mut(grid.slot(j)) {
            *c = c.saturating_add(cost);
        }
    }
    let total = counters.iter().fold(0u64, |a, c| a.saturating_add(*c));
    let widest = counters.iter().copied().max().unwrap_or(0).max(params.limit);
    SlideState {
        limit: params.limit,
        window_ms: params.window_ms,
        mode: SlideMode::Buckets(buckets),
        updated_ms: t,
        buffer: SlideBuffer { word: total, heap: encode_ring(&counters, width_for(widest), &grid) },
    }
}

/// Judges a request of `cost` at `t` (≥ `updated_ms`) against the counters under `limit`,
/// with the estimate rounded down first when `floor` (`FLOOR`).
pub(super) fn decide_buckets(
    s: &SlideState,
    buckets: Buckets,
    limit: u64,
    floor: bool,
    t: i64,
    cost: u64,
) -> (Decision, BucketView) {
    let view = bucket_view(s, buckets, t);
    let ring = Ring::of(&s.buffer.heap, &view.grid);
    let grid = view.grid;
    let retry = || bucket_retry(&ring, &view, (limit, floor), cost, t);
    let reset = |admitted: bool| {
        if admitted {
            ms_until(grid.gone_at(view.i), i128::from(t))
        } else {
            // The newest non-empty sub-window still (partly) in the window.
            let newest =
                (0..=grid.b).map(|k| view.iu.saturating_sub(k)).find(|&j| view.count(&ring, j) > 0);
            newest.map_or(0, |j| ms_until(grid.gone_at(j), i128::from(t)))
        }
    };
    let decision = verdict(limit, cost, (view.estimate(), wide(grid.w), floor), retry, reset);
    (decision, view)
}

/// The earliest instant ≥ `t` at which the estimate admits `cost` (≤ `limit`), as ms from `t`.
///
/// Without new admissions the estimate never rises. In sub-window `k ≥ i` it is
/// `C[k−b]·(w−r−1)/w + S_k` with `S_k = Σ C[k−b+1 … i]`, so the request first fits in the
/// first `k` with `S_k + cost ≤ limit` — the current one, or `j + b` for the first `j` at which
/// the oldest counters add up to `S_i + cost − limit` — at the first `r` (from `r_now` in the
/// current sub-window) with `C[k−b]·(w−r−1) ≤ w·(limit − S_k − cost)`, plus `w − 1` with
/// `FLOOR` (`⌊C[k−b]·(w−r−1)/w⌋ ≤ limit − S_k − cost`; `S_k` is whole either way).
fn bucket_retry(
    ring: &Ring,
    view: &BucketView,
    (limit, floor): (u64, bool),
    cost: u64,
    t: i64,
) -> i64 {
    let grid = view.grid;
    let w = wide(grid.w);
    let slack = if floor { w - 1 } else { 0 };
    let (limit, cost) = (u128::from(limit), u128::from(cost));
    let newer = u128::from(view.total.saturating_sub(view.old));
    let found = if newer + cost <= limit {
        Some((view.i, u128::from(view.old), newer, wide(view.r)))
    } else {
        let lo = view.i.saturating_sub(grid.b).saturating_add(1);
        ring.first_reaching(&grid, lo, view.iu, newer + cost - limit).map(|(j, gone)| {
            let old = u128::from(ring.get(grid.slot(j)));
            (j.saturating_add(grid.b), old, newer.saturating_sub(gone), 0)
        })
    };
    let Some((k, old, newer, r_start)) = found else {
        // Not reached for a consistent state: fall back to the full reset.
        return ms_until(grid.gone_at(view.iu), i128::from(t));
    };
    let room = w * limit.saturating_sub(newer + cost) + slack;
    let r_need = if old == 0 { 0 } else { (w - 1).saturating_sub(div(room, old)) };
    let at = i128::from(grid.start(k)) + i128::try_from(r_start.max(r_need)).unwrap_or(i128::MAX);
    ms_until(at, i128::from(t))
}

/// Counts an admitted request of `cost ≥ 1` in the current sub-window of the view it was
/// judged on, clearing the sub-windows that have left. `updated_ms` is moved by the caller.
pub(super) fn apply_buckets(s: &mut SlideState, view: BucketView, cost: u64) {
    let grid = view.grid;
    let (lo, hi) = view.dropped();
    let heap = &mut s.buffer.heap;
    ring_clear(heap, &grid, lo, hi);
    let slot = grid.slot(view.i);
    let current = Ring::of(heap, &grid).get(slot);
    ring_set(heap, &grid, slot, current.saturating_add(cost));
    s.buffer.word = view.total.saturating_add(cost);
}

/// [`SlideState::refund`] for bucketed mode at `t` (≥ `updated_ms`): takes from the newest
/// counters of sub-windows still (partly) counted at `t`. When the newest sub-window empties,
/// the state is re-dated to the last ms of the newest non-empty one (the ring moves back with
/// it). A state that admitted calls cannot produce (only a limit lowered below what is stored)
/// is left as it is.
pub(super) fn refund_buckets(
    s: &SlideState,
    buckets: Buckets,
    t: i64,
    count: u64,
) -> Refunded<SlideState> {
    let grid = Grid::of(s, buckets);
    let newest = grid.index(s.updated_ms);
    let first = newest.saturating_sub(grid.b);
    // Sub-window `first + k` for every `k`, with its counter.
    let mut counters: Vec<(i64, u64)> = (first..).zip(s.counters()).collect();
    let counted = |j: i64| grid.gone_at(j) > i128::from(t);
    let mut left = count;
    let mut given = false;
    for (j, c) in counters.iter_mut().rev() {
        if left == 0 || !counted(*j) {
            break;
        }
        let take = (*c).min(left);
        given |= take > 0;
        *c -= take;
        left -= take;
    }
    if !given {
        return Refunded::Nothing;
    }
    let Some(&(j, _)) = counters.iter().rev().find(|(j, c)| *c > 0 && counted(*j)) else {
        return Refunded::Fresh;
    };
    let updated = if j == newest { s.updated_ms } else { grid.last_ms(j) };
    let ring: Vec<u64> = (j.saturating_sub(grid.b)..=j)
        .map(|k| counters.iter().find(|(at, _)| *at == k).map_or(0, |(_, c)| *c))
        .collect();
    SlideState::from_counters(s.limit, s.window_ms, buckets, grid.origin, updated, &ring)
        .map_or(Refunded::Nothing, Refunded::To)
}

/// The counters at `t` (≥ `updated_ms`) as `RL.INFO` shows them: those of sub-windows
/// `i − b … i` (`i` the sub-window of `t`), oldest first, and the start of sub-window `i − b`;
/// `used(t)` rounded down; and the start of the oldest sub-window still (partly) counted with
/// a non-zero count, if any.
/// With `counts` false (a limiter refunded back to its initial state during a ban), every
/// counter reads 0.
pub(super) fn window_at(s: &SlideState, buckets: Buckets, t: i64, counts: bool) -> BucketWindow {
    let view = bucket_view(s, buckets, t);
    let ring = Ring::of(&s.buffer.heap, &view.grid);
    let grid = view.grid;
    let first = view.i.saturating_sub(grid.b);
    let counts: Vec<u64> = (0..=grid.b)
        .map(|k| if counts { view.count(&ring, first.saturating_add(k)) } else { 0 })
        .collect();
    // The oldest sub-window (k = 0) counts while at least one of its ms is inside the window.
    let oldest_weighs = grid.w - view.r - 1 > 0;
    let oldest = (0i64..)
        .zip(&counts)
        .find(|&(k, &c)| c > 0 && (k > 0 || oldest_weighs))
        .map(|(k, _)| grid.boundary(first.saturating_add(k)));
    let estimate = if counts.iter().any(|c| *c > 0) { view.estimate() } else { 0 };
    let used = crate::algorithms::arith::saturate_u64(div(estimate, wide(grid.w)));
    BucketWindow { counts, start_ms: grid.boundary(first), used, oldest_ms: oldest }
}

/// A bucketed window at an instant (see [`window_at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BucketWindow {
    pub(super) counts: Vec<u64>,
    pub(super) start_ms: i64,
    pub(super) used: u64,
    pub(super) oldest_ms: Option<i64>,
}

/// The counted sub-windows at `t` as events, oldest first: each count at its sub-window's last
/// ms (at most `t`), so that it counts as long as the estimate counts any part of it.
pub(super) fn counter_events_at(s: &SlideState, buckets: Buckets, t: i64) -> Vec<(i64, u64)> {
    let view = bucket_view(s, buckets, t);
    let ring = Ring::of(&s.buffer.heap, &view.grid);
    let grid = view.grid;
    (0..=grid.b)
        .map(|k| view.iu.saturating_sub(grid.b).saturating_add(k))
        .filter_map(|j| {
            let c = view.count(&ring, j);
            (c > 0 && grid.gone_at(j) > i128::from(t)).then(|| (grid.last_ms(j).min(t), c))
        })
        .collect()
}

impl SlideState {
    /// Bucketed mode: the `b + 1` counters of sub-windows `i − b … i`, oldest first, where `i`
    /// is the sub-window of `updated_ms`. Empty in exact mode.
    pub fn counters(&self) -> impl Iterator<Item = u64> + '_ {
        let grid = match self.mode {
            SlideMode::Exact => None,
            SlideMode::Buckets(b) => Some(Grid::of(self, b)),
        };
        grid.into_iter().flat_map(move |grid| {
            let ring = Ring::of(&self.buffer.heap, &grid);
            let first = grid.index(self.updated_ms).saturating_sub(grid.b);
            (0..=grid.b).map(move |k| ring.get(grid.slot(first.saturating_add(k))))
        })
    }

    /// Rebuilds a bucketed window from its `b + 1` counters as [`SlideState::counters`] lists
    /// them, with its grid origin under `ANCHOR` (and only then); the result is validated.
    pub fn from_counters(
        limit: u64,
        window_ms: u64,
        buckets: Buckets,
        origin_ms: Option<i64>,
        updated_ms: i64,
        counters: &[u64],
    ) -> Result<SlideState, CorruptState> {
        if origin_ms.is_some() != buckets.anchor {
            return Err(CorruptState("slide grid origin without ANCHOR, or ANCHOR without one"));
        }
        let grid = Grid::new(window_ms, buckets.count, origin_ms);
        if counters.len() != grid.slots() {
            return Err(CorruptState("slide counters do not match BUCKETS"));
        }
        let first = grid.index(updated_ms).saturating_sub(grid.b);
        let mut by_slot = vec![0u64; grid.slots()];
        let mut total = 0u64;
        for (k, &c) in (0i64..).zip(counters) {
            if let Some(v) = by_slot.get_mut(grid.slot(first.saturating_add(k))) {
                *v = c;
            }
            total = total.checked_add(c).ok_or(CorruptState("slide counters overflow"))?;
        }
        let widest = counters.iter().copied().max().unwrap_or(0).max(limit);
        let state = SlideState {
            limit,
            window_ms,
            mode: SlideMode::Buckets(buckets),
            updated_ms,
            buffer: SlideBuffer {
                word: total,
                heap: encode_ring(&by_slot, width_for(widest), &grid),
            },
        };
        state.validate()?;
        Ok(state)
    }

    /// [`SlideState::validate`] for bucketed mode: a ring of `b + 1` counters of one width
    /// (then the origin, with `ANCHOR`, at most `updated_ms`, and no count before it) whose
    /// sum is the inline word, a non-empty newest sub-window, and an estimate within `limit`
    /// at `updated_ms` (its floor within `limit` under `FLOOR`).
    pub(super) fn validate_buckets(&self, buckets: Buckets) -> Result<(), CorruptState> {
        let grid = Grid::of(self, buckets);
        let ring = Ring::of(&self.buffer.heap, &grid);
        if ring.width == 0 {
            return Err(CorruptState("slide counters corrupt"));
        }
        if let Some(origin) = grid.origin {
            if !(0..=self.updated_ms).contains(&origin) {
                return Err(CorruptState("slide grid origin out of range"));
            }
            let first = grid.index(self.updated_ms).saturating_sub(grid.b);
            let before_origin = (first..0).map(|j| ring.get(grid.slot(j))).any(|c| c > 0);
            if before_origin {
                return Err(CorruptState("slide counters before the grid origin"));
            }
        }
        let slots = grid.slots();
        let sum = ring.slots_sum(0, slots);
        let widest = ring.width == 8;
        let sum_ok = if widest {
            (0..slots).map(|s| u128::from(ring.get(s))).sum::<u128>()
                == u128::from(self.buffer.word)
        } else {
            sum == self.buffer.word
        };
        if !sum_ok {
            return Err(CorruptState("slide counter total inconsistent"));
        }
        let view = bucket_view(self, buckets, self.updated_ms);
        if view.count(&ring, view.i) == 0 {
            return Err(CorruptState("slide newest sub-window empty"));
        }
        // Under `FLOOR` the estimate may exceed the limit by less than one permit.
        let slack = if buckets.floor { wide(grid.w) - 1 } else { 0 };
        if view.estimate() > wide(grid.w) * u128::from(self.limit) + slack {
            return Err(CorruptState("slide counters above the limit"));
        }
        Ok(())
    }
}
