//! Sliding window (`RL.SLIDE`): at most `limit` permits in any interval of `window` ms.
//!
//! # Terms
//! * **window** `P` (ms): the length of the sliding interval. A request admitted at instant `ts`
//!   (whole unix ms) *counts* at every instant `t` with `ts ≤ t < ts + P`, i.e. while
//!   `ts ∈ (t − P, t]`; it *leaves* the window at `ts + P`.
//! * **used(t)**: the permits that count at `t`. A request of cost `c` at `t` is admitted iff
//!   `used(t) + c ≤ limit`; a request of cost 0 is always admitted (SPEC §2 `COST 0`).
//!
//! # Exact mode (default)
//! The state is the log of admitted requests as `(ts, cost)` entries with strictly increasing
//! `ts` (requests in the same ms are merged into one entry). `used(t)` is the sum of the costs
//! of the entries with `ts > t − P`. Since every entry has cost ≥ 1 and an admitted call
//! leaves `used ≤ limit`, a stored log never holds more than `limit` entries.
//! `retry_after` is the wait until enough of the oldest entries have left;
//! `reset_after` = `newest ts + P − now'`.
//!
//! *Encoding.* The newest entry lives in the state itself: its `ts` is `updated_ms` (every
//! admitted call adds or merges an entry at `now'`) and its cost is stored inline, so a
//! one-entry log needs no heap allocation. Older entries live in one heap buffer: a 24-byte
//! header (timestamp of the oldest entry, their total cost, first and end offsets) and, per
//! entry, `varint(cost) varint(gap to the next newer entry)` (LEB128). Typical entries (cost
//! < 128, gaps < 16 s) take 2–3 bytes. The buffer's size follows jemalloc's size classes
//! (16-byte steps up to 128, then 4 classes per doubling) with 1/8 headroom when it grows, and
//! it is shrunk when more than 1/4 of it is unused, so [`SlideState::heap_bytes`] stays within
//! about 1.6 × (24 + encoded entries): with typical entries at most 16 bytes per entry for
//! every log (the inline entry counting as one), and 4–5 bytes per entry for long logs.
//! Expired entries are consumed from the front by moving an offset; the buffer is compacted
//! only when its end is reached, so every operation is amortized O(1) per entry.
//!
//! A `limit` above the module configuration `ratelimit.slide-log-max` is refused for exact
//! mode (the log could grow to `limit` entries); `BUCKETS` has no such bound.
//!
//! # Bucketed mode (`BUCKETS b`)
//! The window is cut into `b` aligned sub-windows of `w = P / b` ms: sub-window `j` is
//! `[j·w, (j+1)·w)` (aligned to the unix epoch), and the state is one counter per sub-window.
//! At `t = i·w + r` (`0 ≤ r < w`) the interval `(t − P, t]` covers sub-windows `i−b+1 … i` in
//! full and the last `w − r − 1` ms of sub-window `i − b`, so
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
//! the oldest sub-window's weight is small enough); `reset_after` is the instant the newest non-empty
//! sub-window `j` has fully left: `(j+1)·w − 1 + P`. The `b + 1` counters (sub-windows
//! `i−b … i`) are stored as a ring in one heap buffer, each counter 1, 2, 4 or 8 bytes wide as
//! the limit requires (widened on demand).
//!
//! ## Worst-case over-admission of `BUCKETS b`
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
//!
//! # Parameter changes (SPEC §2)
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
//! [`evaluate_in_place`] gives the same decisions and states while updating the stored value
//! in place: amortized O(1) for exact mode, and O(1) plus vectorized block sums over at most
//! `b + 1` counters for bucketed mode.

use super::args::{MAX_AT_MS, MAX_BUCKETS, MAX_COUNT, MAX_DURATION_MS};
use super::decision::{saturate_i64, Decision, Evaluation};
use super::error::ArgError;
use super::state::{info_int, live, CorruptState, Stored};

/// Default of the module configuration `ratelimit.slide-log-max`: the largest `limit` an
/// exact sliding window accepts.
pub const DEFAULT_LOG_MAX: u64 = 100_000;

/// Bytes of the header of the older-entries buffer (exact mode).
const HEADER: usize = 24;
/// Largest older-entries buffer; offsets are stored as `u32`. Beyond it, new requests are
/// merged into the newest entry (moved forward in time: conservative).
const MAX_HEAP: usize = u32::MAX as usize;

/// The parameters of one `RL.SLIDE` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlideParams {
    /// Most permits admitted in any interval of `window_ms`.
    pub limit: u64,
    /// The window length `P` in ms.
    pub window_ms: u64,
    /// Number of sub-windows `b` (`BUCKETS b`), or 0 for the exact log.
    pub buckets: u16,
}

impl SlideParams {
    /// Validates a parameter set: `limit` 1 … 10^12, `window` 1 ms … 10 years, `BUCKETS b`
    /// 1 … 1000 dividing the window; without `BUCKETS`, `limit ≤ log_max`
    /// (`ratelimit.slide-log-max`). The 100-year reset rule always holds: a limiter resets at
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
        let buckets = match buckets {
            None => {
                if limit > log_max {
                    return Err(ArgError::Invalid(format!(
                        "limit {limit} is above ratelimit.slide-log-max ({log_max}) for an exact \
                         sliding window; use BUCKETS b for a bucketed window, or raise \
                         ratelimit.slide-log-max"
                    )));
                }
                0
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
                u16::try_from(b).map_err(|_| range)?
            }
        };
        Ok(SlideParams { limit, window_ms, buckets })
    }

    /// Exact log (no `BUCKETS`).
    pub fn is_exact(&self) -> bool {
        self.buckets == 0
    }
}

/// A sliding window as stored in a key: the parameters of its last admitted call, the log or
/// the sub-window counters (see [`SlideLog`]), and `updated_ms`, the instant of the last
/// admitted call (in exact mode also the timestamp of the newest log entry).
#[derive(Debug, Clone)]
pub struct SlideState {
    pub limit: u64,
    pub window_ms: u64,
    /// Sub-windows `b`, or 0 for the exact log.
    pub buckets: u16,
    pub updated_ms: i64,
    /// The variable-size part, behind one pointer. Read it with [`SlideState::entries`] /
    /// [`SlideState::counters`], rebuild with [`SlideState::from_entries`] /
    /// [`SlideState::from_counters`].
    pub log: SlideLog,
}

/// The variable-size part of a [`SlideState`].
///
/// Exact mode: `word` is the cost of the newest entry (at `updated_ms`), `heap` the older
/// entries (empty when there are none). Bucketed mode: `word` is the sum of the counters,
/// `heap` the ring of `b + 1` counters, sub-window `j` in slot `j mod (b+1)`.
#[derive(Debug, Clone, Default)]
pub struct SlideLog {
    word: u64,
    heap: Box<[u8]>,
}

impl SlideLog {
    /// Splits the log into its inline word and its heap buffer (pointer and length), for
    /// compact storage ([`crate::packed`]). The buffer must come back through
    /// [`SlideLog::from_raw_parts`] exactly once, or it leaks.
    pub fn into_raw_parts(self) -> (u64, *mut u8, usize) {
        let len = self.heap.len();
        let ptr = Box::into_raw(self.heap).cast::<u8>();
        (self.word, ptr, len)
    }

    /// The parts [`SlideLog::into_raw_parts`] would return, without giving up the buffer.
    pub fn raw_parts(&self) -> (u64, *mut u8, usize) {
        (self.word, self.heap.as_ptr().cast_mut(), self.heap.len())
    }

    /// Rebuilds a log from [`SlideLog::into_raw_parts`].
    ///
    /// # Safety
    /// `ptr` and `len` must come from `into_raw_parts`, and the buffer must not be owned by
    /// any other live `SlideLog`.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_parts(word: u64, ptr: *mut u8, len: usize) -> SlideLog {
        let heap = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
        SlideLog { word, heap }
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

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
        _ => super::arith::floor_div(a, b),
    }
}

fn wide(v: i64) -> u128 {
    u128::try_from(v).unwrap_or(0)
}

/// jemalloc's size class for a request of `n` bytes (16-byte steps up to 128, then four
/// classes per doubling), so that the buffer's length is also what the allocator uses.
fn size_class(n: usize) -> usize {
    if n <= 128 {
        return n.div_ceil(16).max(1).saturating_mul(16);
    }
    let k = usize::BITS - 1 - (n - 1).leading_zeros(); // 2^k < n ≤ 2^(k+1), k ≥ 7
    let step = 1usize << (k - 2);
    n.div_ceil(step).saturating_mul(step)
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes `v` as LEB128 at `pos` (bytes beyond `buf` are dropped); returns the end position.
fn put_varint(buf: &mut [u8], mut pos: usize, mut v: u64) -> usize {
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if let Some(slot) = buf.get_mut(pos) {
            *slot = if v == 0 { low } else { low | 0x80 };
        }
        pos = pos.saturating_add(1);
        if v == 0 {
            return pos;
        }
    }
}

/// Writes one log entry `varint(cost) varint(gap)` at `pos`; returns the end position.
fn put_entry(buf: &mut [u8], pos: usize, cost: u64, gap: u64) -> usize {
    let pos = put_varint(buf, pos, cost);
    put_varint(buf, pos, gap)
}

fn get_varint(buf: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(pos)?;
        pos += 1;
        let part = u64::from(byte & 0x7f);
        if shift > 63 || (shift == 63 && part > 1) {
            return None;
        }
        v |= part << shift;
        if byte & 0x80 == 0 {
            return Some((v, pos));
        }
        shift += 7;
    }
}

/// Decodes the entry at `pos` (before `end`): `(cost, gap to the next newer entry, next pos)`.
fn decode_entry(buf: &[u8], pos: usize, end: usize) -> Option<(u64, u64, usize)> {
    let (cost, pos) = get_varint(buf, pos)?;
    let (gap, pos) = get_varint(buf, pos)?;
    (pos <= end).then_some((cost, gap, pos))
}

fn gap_i64(gap: u64) -> i64 {
    i64::try_from(gap).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Exact mode: the older-entries buffer

/// Header of the older-entries buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    /// Timestamp of the entry at `head`.
    oldest_ms: i64,
    /// Sum of the costs of the entries in `head..end`.
    used: u64,
    head: usize,
    end: usize,
}

fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

fn read_u32(buf: &[u8], at: usize) -> Option<usize> {
    let v = u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?);
    usize::try_from(v).ok()
}

fn read_header(buf: &[u8]) -> Option<Header> {
    let oldest_ms = i64::from_le_bytes(buf.get(0..8)?.try_into().ok()?);
    let used = read_u64(buf, 8)?;
    let head = read_u32(buf, 16)?;
    let end = read_u32(buf, 20)?;
    (HEADER <= head && head <= end && end <= buf.len()).then_some(Header {
        oldest_ms,
        used,
        head,
        end,
    })
}

fn write_header(buf: &mut [u8], h: &Header) {
    let mut out = [0u8; HEADER];
    let offset = |v: usize| u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes();
    for (dst, src) in out.iter_mut().zip(
        h.oldest_ms
            .to_le_bytes()
            .into_iter()
            .chain(h.used.to_le_bytes())
            .chain(offset(h.head))
            .chain(offset(h.end)),
    ) {
        *dst = src;
    }
    if let Some(dst) = buf.get_mut(..HEADER) {
        dst.copy_from_slice(&out);
    }
}

/// An entry to append to the older-entries buffer.
#[derive(Debug, Clone, Copy)]
struct Push {
    ts: i64,
    cost: u64,
    gap: u64,
}

/// Writes back the older entries after expiry (`live`: the entries still in the window, or
/// `None` when none are) and appends `push` if given. Returns false when `push` did not fit
/// (the buffer is at [`MAX_HEAP`]); the expiry is committed either way.
fn commit_older(heap: &mut Box<[u8]>, live: Option<Header>, push: Option<Push>) -> bool {
    let mut h = match (live, push) {
        (None, None) => {
            *heap = Box::default();
            return true;
        }
        (Some(h), _) => h,
        (None, Some(p)) => Header { oldest_ms: p.ts, used: 0, head: HEADER, end: HEADER },
    };
    let mut enc = [0u8; 20];
    let n = push.map_or(0, |p| put_entry(&mut enc, 0, p.cost, p.gap));
    let kept = h.end - h.head;
    let cap = heap.len();
    let need = HEADER + kept + n;
    let pushed = push.filter(|_| need <= MAX_HEAP);
    let need = if pushed.is_some() { need } else { HEADER + kept };
    let n = if pushed.is_some() { n } else { 0 };
    if need > cap || cap > size_class(need + need / 4) {
        let mut fresh = vec![0u8; size_class(need + need / 8)];
        if let (Some(dst), Some(src)) =
            (fresh.get_mut(HEADER..HEADER + kept), heap.get(h.head..h.end))
        {
            dst.copy_from_slice(src);
        }
        h.head = HEADER;
        h.end = HEADER + kept;
        *heap = fresh.into_boxed_slice();
    } else if h.end + n > cap && h.end <= cap {
        heap.copy_within(h.head..h.end, HEADER);
        h.head = HEADER;
        h.end = HEADER + kept;
    }
    if let Some(p) = pushed {
        if let (Some(dst), Some(src)) = (heap.get_mut(h.end..h.end + n), enc.get(..n)) {
            dst.copy_from_slice(src);
        }
        h.end += n;
        h.used = h.used.saturating_add(p.cost);
    }
    write_header(heap, &h);
    push.is_none() || pushed.is_some()
}

/// The exact log brought up to an instant `t` without changing it: which older entries are
/// still in the window, and `used(t)`.
#[derive(Debug, Clone, Copy)]
struct ExactView {
    older: Option<Header>,
    newest_alive: bool,
    used: u64,
}

fn exact_view(s: &SlideState, window: i64, t: i64) -> ExactView {
    let cutoff = t.saturating_sub(window); // entries with ts ≤ cutoff have left
    let heap = &s.log.heap;
    let mut older = read_header(heap);
    if let Some(h) = older.as_mut() {
        while h.head < h.end && h.oldest_ms <= cutoff {
            match decode_entry(heap, h.head, h.end) {
                Some((cost, gap, next)) => {
                    h.used = h.used.saturating_sub(cost);
                    h.oldest_ms = h.oldest_ms.saturating_add(gap_i64(gap));
                    h.head = next;
                }
                None => h.head = h.end,
            }
        }
    }
    let older = older.filter(|h| h.head < h.end);
    let newest_alive = s.updated_ms > cutoff;
    let newest = if newest_alive { s.log.word } else { 0 };
    let used = older.map_or(0, |h| h.used).saturating_add(newest);
    ExactView { older, newest_alive, used }
}

/// The entries of an exact log, oldest first, as `(ts, cost)`.
#[derive(Debug, Clone)]
pub struct SlideEntries<'a> {
    heap: &'a [u8],
    pos: usize,
    end: usize,
    ts: i64,
    newest: Option<(i64, u64)>,
}

impl Iterator for SlideEntries<'_> {
    type Item = (i64, u64);

    fn next(&mut self) -> Option<(i64, u64)> {
        if self.pos < self.end {
            if let Some((cost, gap, next)) = decode_entry(self.heap, self.pos, self.end) {
                let ts = self.ts;
                self.ts = ts.saturating_add(gap_i64(gap));
                self.pos = next;
                return Some((ts, cost));
            }
            self.pos = self.end;
        }
        self.newest.take()
    }
}

fn entries_of<'a>(
    s: &'a SlideState,
    older: Option<Header>,
    newest_alive: bool,
) -> SlideEntries<'a> {
    let h = older.unwrap_or(Header { oldest_ms: 0, used: 0, head: 0, end: 0 });
    SlideEntries {
        heap: &s.log.heap,
        pos: h.head,
        end: h.end,
        ts: h.oldest_ms,
        newest: newest_alive.then_some((s.updated_ms, s.log.word)),
    }
}

/// Builds an exact log from events sorted by time (events at the same or an earlier instant
/// than their predecessor are merged into it, which only moves cost later). `None` if the
/// events do not fit the buffer bound.
fn build_exact(limit: u64, window_ms: u64, events: &[(i64, u64)]) -> Option<SlideState> {
    let mut merged: Vec<(i64, u64)> = Vec::with_capacity(events.len());
    for &(ts, cost) in events {
        match merged.last_mut() {
            Some(last) if ts <= last.0 => last.1 = last.1.saturating_add(cost),
            _ => merged.push((ts, cost)),
        }
    }
    let (&(newest_ts, newest_cost), older) = merged.split_last()?;
    let mut heap: Box<[u8]> = Box::default();
    if let Some(&(oldest_ms, _)) = older.first() {
        let gaps = older.iter().zip(merged.iter().skip(1)).map(|(&(ts, cost), &(next, _))| {
            (cost, u64::try_from(next.saturating_sub(ts)).unwrap_or(0))
        });
        let bytes: usize = gaps.clone().map(|(c, g)| varint_len(c) + varint_len(g)).sum();
        let need = HEADER.checked_add(bytes).filter(|n| *n <= MAX_HEAP)?;
        let mut buf = vec![0u8; size_class(need + need / 8)];
        let mut pos = HEADER;
        let mut used = 0u64;
        for (cost, gap) in gaps {
            pos = put_entry(&mut buf, pos, cost, gap);
            used = used.saturating_add(cost);
        }
        write_header(&mut buf, &Header { oldest_ms, used, head: HEADER, end: pos });
        heap = buf.into_boxed_slice();
    }
    Some(SlideState {
        limit,
        window_ms,
        buckets: 0,
        updated_ms: newest_ts,
        log: SlideLog { word: newest_cost, heap },
    })
}

// ---------------------------------------------------------------------------------------------
// Bucketed mode: the counter ring

/// Sub-window geometry: `b` sub-windows of `w` ms in a window of `p` ms. `anchor` is a
/// sub-window whose ring slot `anchor_slot` is known, so that slots near it are found without
/// a division.
#[derive(Debug, Clone, Copy)]
struct Grid {
    b: i64,
    w: i64,
    p: i64,
    anchor: i64,
    anchor_slot: i64,
}

impl Grid {
    fn new(window_ms: u64, buckets: u16) -> Grid {
        let p = window_i64(window_ms);
        let b = i64::from(buckets.max(1));
        Grid { b, w: (p / b).max(1), p, anchor: 0, anchor_slot: 0 }
    }

    /// The same grid, anchored at sub-window `j`.
    fn anchored(self, j: i64) -> Grid {
        Grid { anchor: j, anchor_slot: j.rem_euclid(self.b + 1), ..self }
    }

    /// The sub-window holding instant `t`.
    fn index(&self, t: i64) -> i64 {
        t.div_euclid(self.w)
    }

    fn slots(&self) -> usize {
        usize::try_from(self.b + 1).unwrap_or(1)
    }

    fn slot(&self, j: i64) -> usize {
        let n = self.b + 1;
        let near = j.checked_sub(self.anchor).filter(|d| (-n..=n).contains(d));
        let slot = match near {
            Some(d) => {
                let s = self.anchor_slot + d;
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
        j.saturating_mul(self.w)
    }

    /// The last ms of sub-window `j`.
    fn last_ms(&self, j: i64) -> i64 {
        j.saturating_add(1).saturating_mul(self.w).saturating_sub(1)
    }

    /// The instant sub-window `j` has fully left the window.
    fn gone_at(&self, j: i64) -> i128 {
        i128::from(self.last_ms(j)) + i128::from(self.p)
    }
}

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
}

impl Ring<'_> {
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

fn encode_ring(values: &[u64], width: usize) -> Box<[u8]> {
    let mut out = Vec::with_capacity(values.len().saturating_mul(width));
    for v in values {
        out.extend_from_slice(v.to_le_bytes().get(..width).unwrap_or(&[]));
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
        *heap = encode_ring(&values, width);
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
struct BucketView {
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

fn bucket_view(s: &SlideState, t: i64) -> BucketView {
    let grid = Grid::new(s.window_ms, s.buckets);
    let i = grid.index(t);
    let grid = grid.anchored(i);
    let ring = Ring::of(&s.log.heap, &grid);
    let iu = grid.index(s.updated_ms).min(i);
    let mut view = BucketView { grid, i, iu, r: t - grid.start(i), old: 0, total: s.log.word };
    if i > iu {
        let (lo, hi) = view.dropped();
        view.total = view.total.saturating_sub(ring.range_sum(&grid, lo, hi));
    }
    view.old = view.count(&ring, i.saturating_sub(grid.b));
    view
}

/// Builds a bucketed state at `t` from events at the latest instants they can have happened:
/// each goes into the first sub-window starting at or after it, capped at the current one.
fn build_buckets(params: &SlideParams, events: &[(i64, u64)], t: i64) -> SlideState {
    let grid = Grid::new(params.window_ms, params.buckets);
    let i = grid.index(t);
    let mut counters = vec![0u64; grid.slots()];
    for &(ts, cost) in events {
        let j = ts.saturating_add(grid.w - 1).div_euclid(grid.w);
        let j = j.min(i).max(i.saturating_sub(grid.b).saturating_add(1));
        if let Some(c) = counters.get_mut(grid.slot(j)) {
            *c = c.saturating_add(cost);
        }
    }
    let total = counters.iter().fold(0u64, |a, c| a.saturating_add(*c));
    let widest = counters.iter().copied().max().unwrap_or(0).max(params.limit);
    SlideState {
        limit: params.limit,
        window_ms: params.window_ms,
        buckets: params.buckets,
        updated_ms: t,
        log: SlideLog { word: total, heap: encode_ring(&counters, width_for(widest)) },
    }
}

// ---------------------------------------------------------------------------------------------
// Judging and applying

/// How an admitted request is applied to the state it was judged on.
#[derive(Debug, Clone, Copy)]
enum Plan {
    Exact(ExactView),
    Buckets(BucketView),
}

fn judge(s: &SlideState, limit: u64, t: i64, cost: u64) -> (Decision, Plan) {
    if s.buckets == 0 {
        let (d, v) = judge_exact(s, limit, t, cost);
        (d, Plan::Exact(v))
    } else {
        let (d, v) = judge_buckets(s, limit, t, cost);
        (d, Plan::Buckets(v))
    }
}

fn judge_exact(s: &SlideState, limit: u64, t: i64, cost: u64) -> (Decision, ExactView) {
    let p = window_i64(s.window_ms);
    let view = exact_view(s, p, t);
    let used = u128::from(view.used);
    let (limit_w, cost_w) = (u128::from(limit), u128::from(cost));
    let allowed = cost == 0 || used + cost_w <= limit_w;
    let remaining =
        if allowed { limit_w.saturating_sub(used + cost_w) } else { limit_w.saturating_sub(used) };
    let retry_after_ms = if allowed {
        0
    } else if cost > limit {
        -1
    } else {
        // Wait until the oldest entries whose costs add up to `need` have left.
        let need = used + cost_w - limit_w;
        let mut acc = 0u128;
        let mut retry = ms_until(i128::from(s.updated_ms) + i128::from(p), i128::from(t));
        for (ts, c) in entries_of(s, view.older, view.newest_alive) {
            acc += u128::from(c);
            if acc >= need {
                retry = ms_until(i128::from(ts) + i128::from(p), i128::from(t));
                break;
            }
        }
        retry
    };
    let reset_after_ms = if allowed && cost > 0 {
        p
    } else if view.newest_alive {
        ms_until(i128::from(s.updated_ms) + i128::from(p), i128::from(t))
    } else {
        0
    };
    let decision = Decision {
        allowed,
        limit,
        remaining: super::arith::saturate_u64(remaining),
        retry_after_ms,
        reset_after_ms,
    };
    (decision, view)
}

fn judge_buckets(s: &SlideState, limit: u64, t: i64, cost: u64) -> (Decision, BucketView) {
    let view = bucket_view(s, t);
    let ring = Ring::of(&s.log.heap, &view.grid);
    let grid = view.grid;
    let w = wide(grid.w);
    let est = view.estimate();
    let cap = w * u128::from(limit);
    let need = w * u128::from(cost);
    let allowed = cost == 0 || est.saturating_add(need) <= cap;
    let left = if allowed {
        cap.saturating_sub(est.saturating_add(need))
    } else {
        cap.saturating_sub(est)
    };
    let remaining = div(left, w);
    let retry_after_ms = if allowed {
        0
    } else if cost > limit {
        -1
    } else {
        bucket_retry(&ring, &view, limit, cost, t)
    };
    let reset_after_ms = if allowed && cost > 0 {
        ms_until(grid.gone_at(view.i), i128::from(t))
    } else {
        // The newest non-empty sub-window still (partly) in the window.
        let newest =
            (0..=grid.b).map(|k| view.iu.saturating_sub(k)).find(|&j| view.count(&ring, j) > 0);
        newest.map_or(0, |j| ms_until(grid.gone_at(j), i128::from(t)))
    };
    let decision = Decision {
        allowed,
        limit,
        remaining: super::arith::saturate_u64(remaining),
        retry_after_ms,
        reset_after_ms,
    };
    (decision, view)
}

/// The earliest instant ≥ `t` at which the estimate admits `cost` (≤ `limit`), as ms from `t`.
///
/// Without new admissions the estimate never rises. In sub-window `k ≥ i` it is
/// `C[k−b]·(w−r−1)/w + S_k` with `S_k = Σ C[k−b+1 … i]`, so the request first fits in the
/// first `k` with `S_k + cost ≤ limit` — the current one, or `j + b` for the first `j` at which
/// the oldest counters add up to `S_i + cost − limit` — at the first `r` (from `r_now` in the
/// current sub-window) with `C[k−b]·(w−r−1) ≤ w·(limit − S_k − cost)`.
fn bucket_retry(ring: &Ring, view: &BucketView, limit: u64, cost: u64, t: i64) -> i64 {
    let grid = view.grid;
    let w = wide(grid.w);
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
    let room = w * limit.saturating_sub(newer + cost);
    let r_need = if old == 0 { 0 } else { (w - 1).saturating_sub(div(room, old)) };
    let at = i128::from(grid.start(k)) + i128::try_from(r_start.max(r_need)).unwrap_or(i128::MAX);
    ms_until(at, i128::from(t))
}

/// Applies an admitted request of `cost ≥ 1` at `t` to the state it was judged on.
fn apply(s: &mut SlideState, limit: u64, plan: Plan, t: i64, cost: u64) {
    s.limit = limit;
    match plan {
        Plan::Exact(view) => {
            if !view.newest_alive {
                s.log = SlideLog { word: cost, heap: Box::default() };
            } else if t <= s.updated_ms {
                commit_older(&mut s.log.heap, view.older, None);
                s.log.word = s.log.word.saturating_add(cost);
            } else {
                let gap = u64::try_from(i128::from(t) - i128::from(s.updated_ms)).unwrap_or(0);
                let push = Push { ts: s.updated_ms, cost: s.log.word, gap };
                if commit_older(&mut s.log.heap, view.older, Some(push)) {
                    s.log.word = cost;
                } else {
                    // Buffer full: merge into the newest entry, moved forward to `t`.
                    s.log.word = s.log.word.saturating_add(cost);
                }
            }
        }
        Plan::Buckets(view) => {
            let grid = view.grid;
            let (lo, hi) = view.dropped();
            ring_clear(&mut s.log.heap, &grid, lo, hi);
            let slot = grid.slot(view.i);
            let current = Ring::of(&s.log.heap, &grid).get(slot);
            ring_set(&mut s.log.heap, &grid, slot, current.saturating_add(cost));
            s.log.word = view.total.saturating_add(cost);
        }
    }
    s.updated_ms = s.updated_ms.max(t);
}

/// The state's counted requests at `t` (under its own parameters) as events, oldest first:
/// exact entries as they are, a sub-window's count at its last ms (at most `t`), so that it
/// counts as long as the estimate counts any part of it.
fn events_at(s: &SlideState, t: i64) -> Vec<(i64, u64)> {
    if s.buckets == 0 {
        let view = exact_view(s, window_i64(s.window_ms), t);
        return entries_of(s, view.older, view.newest_alive).collect();
    }
    let view = bucket_view(s, t);
    let ring = Ring::of(&s.log.heap, &view.grid);
    let grid = view.grid;
    (0..=grid.b)
        .map(|k| view.iu.saturating_sub(grid.b).saturating_add(k))
        .filter_map(|j| {
            let c = view.count(&ring, j);
            (c > 0 && grid.gone_at(j) > i128::from(t)).then(|| (grid.last_ms(j).min(t), c))
        })
        .collect()
}

/// Converts a live state, brought up to `t`, to other parameters (see the module docs).
/// `None` when nothing of it is in the new window.
fn convert(s: &SlideState, params: &SlideParams, t: i64) -> Option<SlideState> {
    let cutoff = t.saturating_sub(window_i64(params.window_ms));
    let events: Vec<(i64, u64)> =
        events_at(s, t).into_iter().filter(|&(ts, _)| ts > cutoff).collect();
    let newest = *events.last()?;
    if !params.is_exact() {
        return Some(build_buckets(params, &events, t));
    }
    build_exact(params.limit, params.window_ms, &events).or_else(|| {
        // Too many entries for the buffer: everything at the newest instant (conservative).
        let total = events.iter().fold(0u64, |a, e| a.saturating_add(e.1));
        build_exact(params.limit, params.window_ms, &[(newest.0, total)])
    })
}

fn single(params: &SlideParams, t: i64, cost: u64) -> SlideState {
    if params.is_exact() {
        SlideState {
            limit: params.limit,
            window_ms: params.window_ms,
            buckets: 0,
            updated_ms: t,
            log: SlideLog { word: cost, heap: Box::default() },
        }
    } else {
        build_buckets(params, &[(t, cost)], t)
    }
}

fn fresh(params: &SlideParams, t: i64, cost: u64) -> Evaluation<SlideState> {
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
    Evaluation { decision, next }
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
) -> Evaluation<SlideState> {
    let Some(s) = live(stored, now_ms) else {
        return fresh(params, now_ms, cost);
    };
    let t = now_ms.max(s.updated_ms);
    if s.same_shape(params) {
        let (decision, plan) = judge(s, params.limit, t, cost);
        let next = (decision.allowed && cost > 0).then(|| {
            let mut next = s.clone();
            apply(&mut next, params.limit, plan, t, cost);
            next
        });
        return Evaluation { decision, next };
    }
    match convert(s, params, t) {
        None => fresh(params, t, cost),
        Some(mut converted) => {
            let (decision, plan) = judge(&converted, params.limit, t, cost);
            let next = (decision.allowed && cost > 0).then(|| {
                apply(&mut converted, params.limit, plan, t, cost);
                converted
            });
            Evaluation { decision, next }
        }
    }
}

/// [`evaluate`] on a stored state that is updated in place: when the request is admitted with
/// `cost > 0` and `commit` is true (not a dry run), `state` becomes the new state and the
/// second value is true. Same decisions and resulting states as [`evaluate`], without copying
/// the log when the parameters are unchanged.
pub fn evaluate_in_place(
    state: &mut SlideState,
    params: &SlideParams,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> (Decision, bool) {
    let fast = state.same_shape(params) && state.reset_at_ms() > now_ms;
    if !fast {
        let e = evaluate(Some(state), params, now_ms, cost);
        return match e.next {
            Some(next) if commit => {
                *state = next;
                (e.decision, true)
            }
            _ => (e.decision, false),
        };
    }
    let t = now_ms.max(state.updated_ms);
    let (decision, plan) = judge(state, params.limit, t, cost);
    let change = decision.allowed && cost > 0 && commit;
    if change {
        apply(state, params.limit, plan, t, cost);
    }
    (decision, change)
}

// ---------------------------------------------------------------------------------------------
// The stored state

impl SlideState {
    /// The parameters this window was last admitted with.
    pub fn params(&self) -> SlideParams {
        SlideParams { limit: self.limit, window_ms: self.window_ms, buckets: self.buckets }
    }

    fn same_shape(&self, params: &SlideParams) -> bool {
        self.window_ms == params.window_ms && self.buckets == params.buckets
    }

    /// Bytes allocated on the heap for the log or counters (add the size of the value itself
    /// for `MEMORY USAGE`). Buffer lengths follow jemalloc's size classes.
    pub fn heap_bytes(&self) -> usize {
        self.log.heap.len()
    }

    /// Exact mode: the log entries `(ts, cost)`, oldest first, the last one at `updated_ms`.
    /// Empty in bucketed mode.
    pub fn entries(&self) -> SlideEntries<'_> {
        if self.buckets != 0 {
            return SlideEntries { heap: &[], pos: 0, end: 0, ts: 0, newest: None };
        }
        entries_of(self, read_header(&self.log.heap).filter(|h| h.head < h.end), true)
    }

    /// Bucketed mode: the `b + 1` counters of sub-windows `i − b … i`, oldest first, where `i`
    /// is the sub-window of `updated_ms`. Empty in exact mode.
    pub fn counters(&self) -> impl Iterator<Item = u64> + '_ {
        let grid = Grid::new(self.window_ms, self.buckets);
        let ring = Ring::of(&self.log.heap, &grid);
        let first = grid.index(self.updated_ms).saturating_sub(grid.b);
        let n = if self.buckets == 0 { 0 } else { grid.b + 1 };
        (0..n).map(move |k| ring.get(grid.slot(first.saturating_add(k))))
    }

    /// Number of log entries (exact) or non-empty sub-windows (bucketed).
    pub fn entry_count(&self) -> usize {
        if self.buckets == 0 {
            self.entries().count()
        } else {
            self.counters().filter(|c| *c > 0).count()
        }
    }

    /// Permits counted at `updated_ms` before weighting: the sum of the log's costs (exact) or
    /// of the counters (bucketed).
    pub fn stored_total(&self) -> u64 {
        if self.buckets == 0 {
            self.entries().fold(0u64, |a, e| a.saturating_add(e.1))
        } else {
            self.log.word
        }
    }

    /// Rebuilds an exact window from its entries (RDB load, RESTORE): strictly increasing
    /// timestamps, costs ≥ 1, the last at `updated_ms`; the result is validated.
    pub fn from_entries(
        limit: u64,
        window_ms: u64,
        updated_ms: i64,
        entries: &[(i64, u64)],
    ) -> Result<SlideState, CorruptState> {
        let increasing = entries.windows(2).all(|p| matches!(p, [a, b] if a.0 < b.0));
        if !increasing || entries.iter().any(|e| e.1 == 0) {
            return Err(CorruptState("slide log entries out of order or empty"));
        }
        if entries.last().map(|e| e.0) != Some(updated_ms) {
            return Err(CorruptState("slide log does not end at its update time"));
        }
        let state =
            build_exact(limit, window_ms, entries).ok_or(CorruptState("slide log too large"))?;
        state.validate()?;
        Ok(state)
    }

    /// Rebuilds a bucketed window from its `b + 1` counters as [`SlideState::counters`] lists
    /// them; the result is validated.
    pub fn from_counters(
        limit: u64,
        window_ms: u64,
        buckets: u16,
        updated_ms: i64,
        counters: &[u64],
    ) -> Result<SlideState, CorruptState> {
        let grid = Grid::new(window_ms, buckets);
        if buckets == 0 || counters.len() != grid.slots() {
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
            buckets,
            updated_ms,
            log: SlideLog { word: total, heap: encode_ring(&by_slot, width_for(widest)) },
        };
        state.validate()?;
        Ok(state)
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
        if self.buckets == 0 {
            return self.validate_exact();
        }
        let b = u64::from(self.buckets);
        if b > MAX_BUCKETS || !self.window_ms.is_multiple_of(b) {
            return Err(CorruptState("slide BUCKETS out of range"));
        }
        self.validate_buckets()
    }

    fn validate_exact(&self) -> Result<(), CorruptState> {
        let p = i128::from(window_i64(self.window_ms));
        let updated = i128::from(self.updated_ms);
        if self.log.word == 0 {
            return Err(CorruptState("slide log entry of cost 0"));
        }
        let mut total = u128::from(self.log.word);
        if !self.log.heap.is_empty() {
            let heap = &self.log.heap;
            let h = read_header(heap).ok_or(CorruptState("slide log header corrupt"))?;
            if h.head >= h.end {
                return Err(CorruptState("slide log buffer without entries"));
            }
            let oldest = i128::from(h.oldest_ms);
            if oldest < 0 || oldest <= updated - p {
                return Err(CorruptState("slide log entry outside the window"));
            }
            let (mut pos, mut ts, mut sum) = (h.head, oldest, 0u128);
            while pos < h.end {
                let (cost, gap, next) = decode_entry(heap, pos, h.end)
                    .ok_or(CorruptState("slide log entry corrupt"))?;
                if cost == 0 || gap == 0 {
                    return Err(CorruptState("slide log entry of cost 0 or out of order"));
                }
                sum += u128::from(cost);
                ts += i128::from(gap);
                pos = next;
            }
            if sum != u128::from(h.used) || ts != updated {
                return Err(CorruptState("slide log totals inconsistent"));
            }
            total += sum;
        }
        if total > u128::from(self.limit) {
            return Err(CorruptState("slide log holds more than its limit"));
        }
        Ok(())
    }

    fn validate_buckets(&self) -> Result<(), CorruptState> {
        let grid = Grid::new(self.window_ms, self.buckets);
        let ring = Ring::of(&self.log.heap, &grid);
        if ring.width == 0 {
            return Err(CorruptState("slide counters corrupt"));
        }
        let slots = grid.slots();
        let sum = ring.slots_sum(0, slots);
        let widest = ring.width == 8;
        let sum_ok = if widest {
            (0..slots).map(|s| u128::from(ring.get(s))).sum::<u128>() == u128::from(self.log.word)
        } else {
            sum == self.log.word
        };
        if !sum_ok {
            return Err(CorruptState("slide counter total inconsistent"));
        }
        let view = bucket_view(self, self.updated_ms);
        if view.count(&ring, view.i) == 0 {
            return Err(CorruptState("slide newest sub-window empty"));
        }
        if view.estimate() > wide(grid.w) * u128::from(self.limit) {
            return Err(CorruptState("slide counters above the limit"));
        }
        Ok(())
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
        if self.buckets == 0 {
            self.updated_ms.saturating_add(window_i64(self.window_ms))
        } else {
            let grid = Grid::new(self.window_ms, self.buckets);
            to_i64(grid.gone_at(grid.index(self.updated_ms)))
        }
    }

    fn info_fields(&self) -> Vec<(&'static str, i64)> {
        vec![
            ("limit", info_int(self.limit)),
            ("window_ms", info_int(self.window_ms)),
            ("buckets", i64::from(self.buckets)),
            ("used", info_int(self.stored_total())),
            ("entries", i64::try_from(self.entry_count()).unwrap_or(i64::MAX)),
        ]
    }
}

#[cfg(test)]
#[path = "../slide_tests.rs"]
mod tests;
