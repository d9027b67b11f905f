//! Exact mode: the log of admitted requests.
//!
//! The state is the log of admitted requests as `(ts, cost)` entries with strictly increasing
//! `ts` (requests in the same ms are merged into one entry). `used(t)` is the sum of the costs
//! of the entries with `ts > t − P`. Since every entry has cost ≥ 1 and an admitted call
//! leaves `used ≤ limit`, and the entries are distinct ms inside the window, a stored log never
//! holds more than `min(limit, P)` entries.
//! `retry_after` is the wait until enough of the oldest entries have left;
//! `reset_after` = `newest ts + P − now'`.
//!
//! # Encoding
//! The newest entry lives in the state itself: its `ts` is `updated_ms` (every admitted call
//! adds or merges an entry at `now'`) and its cost is the [`SlideBuffer`]'s inline word, so a
//! one-entry log needs no heap allocation. Older entries live in one heap buffer: a 64-byte
//! header — the 24-byte [`Header`] (timestamp of the oldest entry, their total cost, first and
//! end offsets) and 40 bytes for the state's own fields ([`HOLDER`], written only by
//! [`SlideState::into_log_buffer`], so that the module keeps a log with older entries as this
//! buffer alone: one allocation, no box beside it) — and, per entry,
//! `varint(cost) varint(gap to the next newer entry)` (see `varint.rs`). Typical entries
//! (cost < 128, gaps < 16 s) take 2–3 bytes. The buffer's size follows jemalloc's size classes
//! (see `alloc_size.rs`) with 1/8 headroom when it grows, and it is shrunk when more than 1/4
//! of it is unused, so [`SlideState::heap_bytes`] stays within about 1.6 × (64 + encoded
//! entries): with typical entries at most 16 bytes per entry for every log (the inline entry
//! counting as one) beside 48 for the state's fields (the box they replace), and 4–5 bytes per
//! entry for long logs. Expired entries are consumed from
//! the front by moving an offset; the buffer is compacted only when its end is reached, so
//! every operation is amortized O(1) per entry.
//!
//! Exact mode is refused when that bound, `min(limit, P)`, is above the module configuration
//! `ratelimit.slide-log-max`; `BUCKETS` has no such bound.

use super::alloc_size::size_class;
use super::varint::{decode_entry, gap_i64, put_entry, varint_len};
use super::{ms_until, verdict, window_i64, SlideBuffer, SlideMode, SlideState};
use crate::algorithms::decision::Decision;
use crate::algorithms::state::{CorruptState, Refunded};

/// Bytes of the header's own fields (see [`Header`]).
const FIELDS: usize = 24;
/// Where the state's own fields start in the older-entries buffer: just after the header's.
const STATE_AT: usize = FIELDS;
/// Bytes after the header's fields for the state's own fields, so that a log with older entries
/// can be kept as its buffer alone ([`SlideState::into_log_buffer`]: one allocation per log):
/// `limit`, `window_ms`, `updated_ms`, the newest entry's cost and the buffer's length, each a
/// little-endian `u64`. Written only there; the log never reads them otherwise, keeps them
/// while it updates its buffer in place, and starts a new buffer with them zero.
pub const HOLDER: usize = 40;
/// Bytes of the header of the older-entries buffer: its fields and the state's; the entries
/// start here.
pub(super) const HEADER: usize = FIELDS + HOLDER;
/// Largest older-entries buffer; offsets are stored as `u32`. Beyond it, new requests are
/// merged into the newest entry (moved forward in time: conservative).
const MAX_HEAP: usize = u32::MAX as usize;

/// Header of the older-entries buffer (little-endian: `oldest_ms` i64, `used` u64, `head` and
/// `end` u32 offsets into the buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    /// Timestamp of the entry at `head`.
    pub(super) oldest_ms: i64,
    /// Sum of the costs of the entries in `head..end`.
    pub(super) used: u64,
    /// Offset of the oldest entry still in the log (entries before it have been consumed).
    pub(super) head: usize,
    /// Offset just past the newest older entry.
    pub(super) end: usize,
}

fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

fn read_u32(buf: &[u8], at: usize) -> Option<usize> {
    let v = u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?);
    usize::try_from(v).ok()
}

/// The buffer's header, if it has one with offsets inside the buffer.
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

pub(super) fn write_header(buf: &mut [u8], h: &Header) {
    // Field by field into a fixed array (no iterator chain: this runs on every admitted call).
    let offset = |v: usize| u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes();
    let mut out = [0u8; FIELDS];
    out[0..8].copy_from_slice(&h.oldest_ms.to_le_bytes());
    out[8..16].copy_from_slice(&h.used.to_le_bytes());
    out[16..20].copy_from_slice(&offset(h.head));
    out[20..24].copy_from_slice(&offset(h.end));
    if let Some(dst) = buf.get_mut(..FIELDS) {
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
        (None, Some(p)) => {
            *heap = first_older(p);
            return true;
        }
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

/// The older-entries buffer of one entry, `p` (a log's first older entry: its second entry
/// arrives, or every older one has left): what [`commit_older`] builds for it —
/// `size_class(need + need / 8)` bytes, 80 or 96 (an entry takes at most 20) — written straight
/// into its allocation.
fn first_older(p: Push) -> Box<[u8]> {
    let need = HEADER + varint_len(p.cost) + varint_len(p.gap);
    if size_class(need + need / 8) <= 80 {
        older_buffer::<80>(p)
    } else {
        older_buffer::<96>(p)
    }
}

/// [`first_older`] in a buffer of `N` bytes.
fn older_buffer<const N: usize>(p: Push) -> Box<[u8]> {
    let mut buf = Box::new([0u8; N]);
    let end = put_entry(&mut buf[..], HEADER, p.cost, p.gap);
    write_header(&mut buf[..], &Header { oldest_ms: p.ts, used: p.cost, head: HEADER, end });
    buf
}

/// The exact log brought up to an instant `t` without changing it: which older entries are
/// still in the window, and `used(t)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExactView {
    older: Option<Header>,
    newest_alive: bool,
    used: u64,
}

fn exact_view(s: &SlideState, window: i64, t: i64) -> ExactView {
    let cutoff = t.saturating_sub(window); // entries with ts ≤ cutoff have left
    let heap = &s.buffer.heap;
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
    let newest = if newest_alive { s.buffer.word } else { 0 };
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
        heap: &s.buffer.heap,
        pos: h.head,
        end: h.end,
        ts: h.oldest_ms,
        newest: newest_alive.then_some((s.updated_ms, s.buffer.word)),
    }
}

/// `used(t)` and the timestamp of the oldest entry still in the window at `t` (`None` when no
/// entry is), in O(entries that have left since `updated_ms`).
pub(super) fn window_at(s: &SlideState, t: i64) -> (u64, Option<i64>) {
    let view = exact_view(s, window_i64(s.window_ms), t);
    let oldest = match view.older {
        Some(h) => Some(h.oldest_ms),
        None => view.newest_alive.then_some(s.updated_ms),
    };
    (view.used, oldest)
}

/// The log's entries still in its window at `t`, oldest first.
pub(super) fn entries_at(s: &SlideState, t: i64) -> Vec<(i64, u64)> {
    let view = exact_view(s, window_i64(s.window_ms), t);
    entries_of(s, view.older, view.newest_alive).collect()
}

/// [`SlideState::refund`] for exact mode at `t` (≥ `updated_ms`).
pub(super) fn refund_exact(s: &SlideState, t: i64, count: u64) -> Refunded<SlideState> {
    let mut entries = entries_at(s, t);
    if entries.is_empty() {
        return Refunded::Nothing;
    }
    let mut left = count;
    while left > 0 {
        match entries.last_mut() {
            None => break,
            Some(newest) if newest.1 <= left => {
                left -= newest.1;
                entries.pop();
            }
            Some(newest) => {
                newest.1 -= left;
                left = 0;
            }
        }
    }
    match entries.last() {
        None => Refunded::Fresh,
        Some(&(newest, _)) => SlideState::from_entries(s.limit, s.window_ms, newest, &entries)
            .map_or(Refunded::Nothing, Refunded::To),
    }
}

/// Builds an exact log from events sorted by time (events at the same or an earlier instant
/// than their predecessor are merged into it, which only moves cost later). `None` if the
/// events do not fit the buffer bound.
pub(super) fn build_exact(limit: u64, window_ms: u64, events: &[(i64, u64)]) -> Option<SlideState> {
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
        mode: SlideMode::Exact,
        updated_ms: newest_ts,
        buffer: SlideBuffer { word: newest_cost, heap },
    })
}

/// Judges a request of `cost` at `t` (≥ `updated_ms`) against the log under `limit`.
pub(super) fn decide_exact(s: &SlideState, limit: u64, t: i64, cost: u64) -> (Decision, ExactView) {
    let p = window_i64(s.window_ms);
    let view = exact_view(s, p, t);
    let used = u128::from(view.used);
    let retry = || {
        // Wait until the oldest entries whose costs add up to `need` have left.
        let need = used + u128::from(cost) - u128::from(limit);
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
    let reset = |admitted: bool| {
        if admitted {
            p
        } else if view.newest_alive {
            ms_until(i128::from(s.updated_ms) + i128::from(p), i128::from(t))
        } else {
            0
        }
    };
    let decision = verdict(limit, cost, (used, 1, false), retry, reset);
    (decision, view)
}

/// Adds an admitted request of `cost ≥ 1` at `t` to the log it was judged on (`view`),
/// dropping the entries that have left. `updated_ms` is moved by the caller.
pub(super) fn apply_exact(s: &mut SlideState, view: ExactView, t: i64, cost: u64) {
    let buffer = &mut s.buffer;
    if !view.newest_alive {
        *buffer = SlideBuffer { word: cost, heap: Box::default() };
    } else if t <= s.updated_ms {
        commit_older(&mut buffer.heap, view.older, None);
        buffer.word = buffer.word.saturating_add(cost);
    } else {
        let gap = u64::try_from(i128::from(t) - i128::from(s.updated_ms)).unwrap_or(0);
        let push = Push { ts: s.updated_ms, cost: buffer.word, gap };
        if commit_older(&mut buffer.heap, view.older, Some(push)) {
            buffer.word = cost;
        } else {
            // Buffer full: merge into the newest entry, moved forward to `t`.
            buffer.word = buffer.word.saturating_add(cost);
        }
    }
}

/// The sum of the stored log's costs (the newest entry and the older ones' header total), in
/// O(1).
pub(super) fn stored_total(s: &SlideState) -> u64 {
    let older = read_header(&s.buffer.heap).filter(|h| h.head < h.end).map_or(0, |h| h.used);
    older.saturating_add(s.buffer.word)
}

impl SlideState {
    /// Keeps an exact log with older entries as its buffer alone: writes the state's own
    /// fields into the buffer ([`HOLDER`]) and gives up the buffer, whose pointer comes back.
    /// The state back for other states (one entry, no heap buffer; bucketed mode).
    pub fn into_log_buffer(self) -> Result<*mut u8, SlideState> {
        let mut state = self;
        if state.mode != SlideMode::Exact || !state.buffer.has_holder() {
            return Err(state);
        }
        let (word, _, len) = state.buffer.raw_parts();
        let fields = [state.limit, state.window_ms, state.updated_ms as u64, word, len as u64];
        if let Some(area) = state.buffer.heap.get_mut(STATE_AT..HEADER) {
            for (dst, v) in area.chunks_exact_mut(8).zip(fields) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        let (_, ptr, _) = state.buffer.into_raw_parts();
        Ok(ptr)
    }

    /// The state kept as `buffer` alone ([`SlideState::into_log_buffer`]), owning the buffer.
    ///
    /// # Safety
    /// `buffer` must come from `into_log_buffer` and not be freed; the result shares it with
    /// whoever holds the pointer: exactly one of them may free it.
    #[allow(unsafe_code)]
    pub unsafe fn from_log_buffer(buffer: *mut u8) -> SlideState {
        // SAFETY: the buffer is at least `HEADER` bytes (`has_holder`); unaligned reads.
        let field =
            |i: usize| unsafe { buffer.add(STATE_AT + 8 * i).cast::<u64>().read_unaligned() };
        let len = usize::try_from(field(4)).unwrap_or(0);
        SlideState {
            limit: field(0),
            window_ms: field(1),
            mode: SlideMode::Exact,
            updated_ms: field(2) as i64,
            // SAFETY: the buffer `into_log_buffer` gave up, with its length.
            buffer: unsafe { SlideBuffer::from_raw_parts(field(3), buffer, len) },
        }
    }

    /// The length of a buffer [`SlideState::into_log_buffer`] gave up.
    ///
    /// # Safety
    /// As for [`SlideState::from_log_buffer`].
    #[allow(unsafe_code)]
    pub unsafe fn log_buffer_len(buffer: *const u8) -> usize {
        // SAFETY: as in `from_log_buffer`.
        let len = unsafe { buffer.add(STATE_AT + 32).cast::<u64>().read_unaligned() };
        usize::try_from(len).unwrap_or(0)
    }

    /// Exact mode: the log entries `(ts, cost)`, oldest first, the last one at `updated_ms`.
    /// Empty in bucketed mode.
    pub fn entries(&self) -> SlideEntries<'_> {
        if self.mode != SlideMode::Exact {
            return SlideEntries { heap: &[], pos: 0, end: 0, ts: 0, newest: None };
        }
        entries_of(self, read_header(&self.buffer.heap).filter(|h| h.head < h.end), true)
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

    /// [`SlideState::validate`] for exact mode: a readable buffer whose entries are in order,
    /// inside the window, add up to its header's total, and end at `updated_ms`; at most
    /// `limit` permits in all.
    pub(super) fn validate_exact(&self) -> Result<(), CorruptState> {
        let p = i128::from(window_i64(self.window_ms));
        let updated = i128::from(self.updated_ms);
        if self.buffer.word == 0 {
            return Err(CorruptState("slide log entry of cost 0"));
        }
        let mut total = u128::from(self.buffer.word);
        if !self.buffer.heap.is_empty() {
            let heap = &self.buffer.heap;
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
}
