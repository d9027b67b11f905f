//! Limiters stored *inside* a key's value pointer: no allocation per key.
//!
//! # Why
//!
//! A Redis module value is one pointer per key, and Redis never dereferences it: only the
//! module's own callbacks do. The boxed form ([`crate::store::packed::PackedLimiter`], 48 bytes in
//! jemalloc's 48-byte class) is thus the largest part of what a key costs beyond Redis's own
//! bookkeeping. Most keys of a deployment share a handful of parameter sets (every key of
//! `RL.TOKEN user:* 100 1 1h` has capacity 100, rate 1, period 1 h), and their per-key state is
//! a few small counters and one or two instants close to now. So the parameters go into a
//! module-wide table of interned entries, and the per-key state fits the 64 bits of the value
//! pointer itself: an **inline word**.
//!
//! # Layout
//!
//! ```text
//!  63                                    17 16            1   0
//! +---------------------------------------+----------------+---+
//! |  payload (63 − INDEX_BITS = 47 bits)   | entry index    | 1 |
//! +---------------------------------------+----------------+---+
//!   payload = time offset | f1 | f0   (f0 in the low bits)
//! ```
//!
//! Real pointers are 8-aligned, so their low bit is 0: bit 0 tells an inline word
//! ([`is_inline`]) from a boxed value. The index selects an entry of the [`InlineTable`]: an
//! algorithm with its parameters (the *shape*), a time base, and the field widths computed
//! once from the shape (so [`InlineTable::expand`] and [`InlineTable::encode`] are a few shifts
//! and masks). The payload holds, per algorithm (every other case has no inline form and stays
//! boxed):
//!
//! | algorithm | f0 | f1 | time offset (from the base) |
//! |---|---|---|---|
//! | token, smooth refill | `tokens` ≤ capacity | `fraction` < period | `updated_ms` |
//! | token, step refill (extra field: `origin_ms`) | `tokens` ≤ capacity | — | `updated_ms` |
//! | period (`end = start + period`) | `used` ≤ limit | `updated − start` < period | `window_start_ms` |
//! | leaky | `level` ≤ capacity | `fraction` < period | `updated_ms` |
//! | gcra | `tat_frac` < count | `tat − updated` ≤ ⌈(max_burst+1)·period/count⌉ ms | `updated_ms` |
//! | slide, exact, one log entry | its cost ≤ limit | — | `updated_ms` |
//!
//! f0 and f1 take the bits their maxima need; the time offset takes the rest of the 47 bits,
//! and a shape leaving it fewer than 12 bits (4 s) keeps f1 in the extra field (below), or,
//! if f0 alone leaves fewer, is not stored inline. Offsets are unsigned:
//! an entry covers instants `base ≤ t < base + 2^time_bits`. A new entry's base is a quarter of
//! that span before the instant it is created for, so states of other keys slightly older than
//! it fit too (`RL.TOKEN k 100 1 1h` keeps 18 bits: about 262 s per entry, 65 s of it before
//! the first instant). When a key's instants leave its entry's span, the next encode moves it
//! to the shape's current entry, or to a new one (a new time base) that becomes current; old
//! entries live on while keys still refer to them. Decoding is exact: `expand(encode(x)) == x`
//! field for field, parameters included (with the extra field, where the shape has one).
//!
//! Some shapes also need one **extra field**: a raw 64-bit value the caller stores beside the
//! word ([`Encoded::extra`]; the shell keeps the two in one 16-byte allocation), given back to
//! [`InlineTable::expand`]. A step-refill token bucket has one, its `origin_ms` (as the
//! two's-complement `origin_ms as u64`: exact for any value, however far in the past;
//! its word has no f1, so `RL.TOKEN k 100 1 1h STEP` keeps 40 time bits). So does a shape
//! whose f0 and f1 together leave fewer than 12 time bits but f0 alone does not — a daily quota
//! of a million (`RL.PERIOD k 1000000 1d`: 20 bits of count and 27 of `updated − start`): its
//! f1 moves to the extra field and the word keeps f0 and the time offset
//! (`Layout::f1_extra`).
//! [`InlineTable::needs_extra`] tells which words need it, and `expand` refuses a word whose
//! extra field is missing (or present for a shape without one). The extra field does not affect the
//! word's entry or its reference count.
//!
//! # Reference counts and threading
//!
//! Every inline word held by a key holds one reference to its entry. [`InlineTable::encode`]
//! returns a word with one new reference (the caller releases the key's old word), and
//! [`InlineTable::retain`] adds one (`COPY`). Releasing is [`Releaser::release`]: the counts are
//! atomics behind an `Arc`, allocated once at full capacity, because Redis may free values from
//! a background thread (`FLUSHALL ASYNC`, `UNLINK`). Everything else — encoding, expanding,
//! retaining and reclaiming entries — runs on the main thread only, so a count of 0 can only
//! rise again by the main thread's own doing: an entry at 0 can be reclaimed without a race.
//! Counts never go below 0 (a bogus extra release does nothing) and saturate at `u32::MAX`,
//! which pins the entry forever instead of wrapping.
//!
//! A new entry takes a never-used slot while there is one; then [`InlineTable::encode`] probes
//! at most 64 slots from a rotating cursor for a count of 0 and reuses the first it finds
//! (forgetting it as its shape's current entry). If none is free the limiter stays boxed
//! (`None`): the table never costs more than those 64 probes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::algorithms::gcra::GcraState;
use crate::algorithms::leaky::LeakyBucket;
use crate::algorithms::limiter::Limiter;
use crate::algorithms::period::PeriodWindow;
use crate::algorithms::slide::{SlideBuffer, SlideMode, SlideState};
use crate::algorithms::token::{Refill, TokenBucket};

/// Low bit of an inline word.
pub const INLINE_TAG: u64 = 1;

/// Bits of the table index in an inline word; the payload has the other `63 − INDEX_BITS`.
pub const INDEX_BITS: u32 = 16;

/// The payload starts above the tag and the index.
const PAYLOAD_SHIFT: u32 = 1 + INDEX_BITS;
const PAYLOAD_BITS: u32 = 63 - INDEX_BITS;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// Most entries a table can hold (every index fits `INDEX_BITS`).
const MAX_ENTRIES: usize = 1 << INDEX_BITS;
/// Fewest bits a shape must leave for its time offset to be stored inline.
const MIN_TIME_BITS: u32 = 12;
/// Most slots one [`InlineTable::encode`] probes for a reclaimable entry.
const RECLAIM_PROBES: usize = 64;
/// A saturated count: the entry is pinned (never released nor reclaimed).
const PINNED: u32 = u32::MAX;

/// Whether `word` is an inline word (as opposed to a pointer, whose low bit is 0).
pub fn is_inline(word: u64) -> bool {
    word & INLINE_TAG == INLINE_TAG
}

/// The entry index of an inline word.
fn index_of(word: u64) -> Option<usize> {
    // The index has INDEX_BITS (16) bits: it fits any usize.
    is_inline(word).then_some(((word >> 1) & INDEX_MASK) as usize)
}

/// Bits needed to write `v`.
fn bits(v: u64) -> u32 {
    u64::BITS - v.leading_zeros()
}

/// The low `w` bits set (`w` < 64).
fn mask(w: u32) -> u64 {
    (1u64 << w) - 1
}

/// The algorithm and parameters an entry stands for: everything of a state that does not
/// vary from key to key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shape {
    /// A token bucket with smooth refill.
    Token {
        capacity: u64,
        rate: u64,
        period_ms: u64,
    },
    /// A token bucket with step refill; its `origin_ms` is the extra field.
    TokenStep {
        capacity: u64,
        rate: u64,
        period_ms: u64,
    },
    Period {
        limit: u64,
        period_ms: u64,
        align_offset_ms: i64,
    },
    Leaky {
        capacity: u64,
        rate: u64,
        period_ms: u64,
        delay: u64,
    },
    Gcra {
        max_burst: u64,
        count: u64,
        period_s: u64,
    },
    /// An exact sliding window.
    Slide {
        limit: u64,
        window_ms: u64,
    },
}

/// Where the fields sit in a payload: f0 in the low `w0` bits, f1 in the next `w1`, the time
/// offset in the top `time` bits (`w0 + w1 + time = PAYLOAD_BITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    w0: u32,
    w1: u32,
    time: u32,
    /// Largest valid f0 and f1 (the widths may allow more).
    max0: u64,
    max1: u64,
    /// f1 lives in the extra field, not in the word (`w1` is then 0): the shape's f0 and f1
    /// together leave fewer than `MIN_TIME_BITS` for the time offset (a daily window of a
    /// million, say), but f0 alone does not.
    f1_extra: bool,
}

impl Shape {
    /// Whether a state of this shape has an extra field beside its word.
    fn has_extra(&self) -> bool {
        matches!(self, Shape::TokenStep { .. })
    }

    /// The field widths of this shape, or `None` if it has no inline form.
    fn layout(&self) -> Option<Layout> {
        let (max0, max1) = match *self {
            Shape::Token { capacity, period_ms, .. } | Shape::Leaky { capacity, period_ms, .. } => {
                (capacity, period_ms.checked_sub(1)?)
            }
            Shape::Period { limit, period_ms, .. } => {
                // Expanding computes `start + period` in i64.
                i64::try_from(period_ms).ok()?;
                (limit, period_ms.checked_sub(1)?)
            }
            Shape::Gcra { max_burst, count, period_s } => {
                // An admitted state's debt is at most τ = (max_burst + 1)·period_ms in 1/count
                // ms, so TAT − updated ≤ ⌈τ / count⌉ ms.
                let tau = (u128::from(max_burst) + 1)
                    .saturating_mul(u128::from(period_s))
                    .saturating_mul(1000);
                let count_max = count.checked_sub(1)?;
                let ahead = tau.div_ceil(u128::from(count));
                (count_max, u64::try_from(ahead).ok()?)
            }
            Shape::TokenStep { capacity, .. } => (capacity, 0),
            Shape::Slide { limit, .. } => (limit, 0),
        };
        let (w0, w1) = (bits(max0), bits(max1));
        if let Some(time) = PAYLOAD_BITS.checked_sub(w0 + w1).filter(|t| *t >= MIN_TIME_BITS) {
            return Some(Layout { w0, w1, time, max0, max1, f1_extra: false });
        }
        // Too wide for one word: f1 goes beside it (a step bucket already has its extra).
        if self.has_extra() {
            return None;
        }
        let time = PAYLOAD_BITS.checked_sub(w0).filter(|t| *t >= MIN_TIME_BITS)?;
        Some(Layout { w0, w1: 0, time, max0, max1, f1_extra: true })
    }
}

/// A state taken apart: its shape, its two small fields, its time-base instant, and its extra
/// field (for the shapes that have one: see [`Shape::has_extra`]).
#[derive(Debug, Clone, Copy)]
struct Fields {
    shape: Shape,
    f0: u64,
    f1: u64,
    t: i64,
    extra: Option<u64>,
}

/// The shape and fields of a limiter with an inline form (see the module docs), or `None`.
/// The fields are not yet checked against the shape's widths.
fn fields(limiter: &Limiter) -> Option<Fields> {
    match limiter {
        Limiter::Token(b) => {
            let (capacity, rate, period_ms) = (b.capacity, b.rate, b.period_ms);
            Some(match b.refill {
                Refill::Smooth { fraction } => Fields {
                    shape: Shape::Token { capacity, rate, period_ms },
                    f0: u64::try_from(b.tokens).ok()?,
                    f1: fraction,
                    t: b.updated_ms,
                    extra: None,
                },
                // The raw two's complement: `as i64` gives it back exactly.
                Refill::Step { origin_ms } => Fields {
                    shape: Shape::TokenStep { capacity, rate, period_ms },
                    f0: u64::try_from(b.tokens).ok()?,
                    f1: 0,
                    t: b.updated_ms,
                    extra: Some(origin_ms as u64),
                },
            })
        }
        Limiter::Period(p) => {
            let period = i64::try_from(p.period_ms).ok()?;
            if p.window_start_ms.checked_add(period)? != p.window_end_ms {
                return None;
            }
            let into = u64::try_from(p.updated_ms.checked_sub(p.window_start_ms)?).ok()?;
            let shape = Shape::Period {
                limit: p.limit,
                period_ms: p.period_ms,
                align_offset_ms: p.align_offset_ms,
            };
            Some(Fields { shape, f0: p.used, f1: into, t: p.window_start_ms, extra: None })
        }
        Limiter::Leaky(b) => {
            let shape = Shape::Leaky {
                capacity: b.capacity,
                rate: b.rate,
                period_ms: b.period_ms,
                delay: b.delay,
            };
            Some(Fields { shape, f0: b.level, f1: b.fraction, t: b.updated_ms, extra: None })
        }
        Limiter::Gcra(g) => {
            let ahead = u64::try_from(g.tat_ms.checked_sub(g.updated_ms)?).ok()?;
            let shape =
                Shape::Gcra { max_burst: g.max_burst, count: g.count, period_s: g.period_s };
            Some(Fields { shape, f0: g.tat_frac, f1: ahead, t: g.updated_ms, extra: None })
        }
        Limiter::Slide(s) => {
            if s.mode != SlideMode::Exact {
                return None;
            }
            let cost = s.buffer.word_only()?;
            let shape = Shape::Slide { limit: s.limit, window_ms: s.window_ms };
            Some(Fields { shape, f0: cost, f1: 0, t: s.updated_ms, extra: None })
        }
        Limiter::Lease(_) => None,
    }
}

/// One interned shape with its time base.
#[derive(Debug, Clone, Copy)]
struct Entry {
    shape: Shape,
    base: i64,
    layout: Layout,
}

impl Entry {
    /// Whether words of this entry come with an extra field.
    fn has_extra(&self) -> bool {
        self.layout.f1_extra || self.shape.has_extra()
    }

    /// The extra field of `f` in this entry.
    fn extra(&self, f: &Fields) -> Option<u64> {
        if self.layout.f1_extra {
            Some(f.f1)
        } else {
            f.extra
        }
    }

    /// The payload of `f` (of this entry's shape), if its fields fit.
    fn pack(&self, f: &Fields) -> Option<u64> {
        let l = &self.layout;
        if f.f0 > l.max0 || f.f1 > l.max1 {
            return None;
        }
        let offset = u64::try_from(f.t.checked_sub(self.base)?).ok()?;
        if offset >> l.time != 0 {
            return None;
        }
        let f1 = if l.f1_extra { 0 } else { f.f1 };
        Some(f.f0 | f1 << l.w0 | offset << (l.w0 + l.w1))
    }

    /// The fields `(f0, f1, t)` of a payload (f1 from `extra` when it lives there), if they
    /// are ones [`Entry::pack`] writes.
    fn unpack(&self, payload: u64, extra: Option<u64>) -> Option<(u64, u64, i64)> {
        let l = &self.layout;
        let f0 = payload & mask(l.w0);
        let f1 = if l.f1_extra { extra? } else { (payload >> l.w0) & mask(l.w1) };
        if f0 > l.max0 || f1 > l.max1 {
            return None;
        }
        // Below 2^PAYLOAD_BITS: fits an i64.
        let offset = (payload >> (l.w0 + l.w1)) as i64;
        Some((f0, f1, self.base.checked_add(offset)?))
    }
}

/// The inline word of a payload in entry `index` (< 2^INDEX_BITS).
fn inline_word(index: usize, payload: u64) -> u64 {
    INLINE_TAG | (index as u64 & INDEX_MASK) << 1 | payload << PAYLOAD_SHIFT
}

/// What [`InlineTable::encode`] gives back: the value word, and for shapes that need it one
/// extra 64-bit field the caller stores beside the word (a step bucket's `origin_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoded {
    /// The inline word (holds one reference to its entry).
    pub word: u64,
    /// The extra field: `Some` exactly when [`InlineTable::needs_extra`] holds for `word`.
    pub extra: Option<u64>,
}

/// Decrements the count of a word's entry: never below 0, and not at all once pinned.
fn release_in(refs: &[AtomicU32], word: u64) {
    if let Some(count) = index_of(word).and_then(|i| refs.get(i)) {
        let _ = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
            (c != 0 && c != PINNED).then(|| c - 1)
        });
    }
}

/// Reference counts, shareable with other threads (Redis may free values from a background
/// thread: `FLUSHALL ASYNC`). Only [`Releaser::release`] is called off the main thread.
#[derive(Debug, Clone)]
pub struct Releaser {
    refs: Arc<[AtomicU32]>,
}

impl Releaser {
    /// Gives up the reference an inline word holds (ignores words that are not inline or whose
    /// index is out of range, and counts already at 0).
    pub fn release(&self, word: u64) {
        release_in(&self.refs, word);
    }
}

/// The module-wide table of interned entries (see the module docs).
#[derive(Debug)]
pub struct InlineTable {
    entries: Vec<Entry>,
    /// Each shape's current entry: the one new keys of that shape go to.
    current: HashMap<Shape, usize>,
    /// One count per slot, allocated at full capacity up front (the `Arc` never reallocates).
    refs: Arc<[AtomicU32]>,
    /// Where the next reclaim probe starts.
    cursor: usize,
}

impl InlineTable {
    /// A table of up to `capacity` entries (clamped to 1 ..= 2^INDEX_BITS).
    pub fn new(capacity: usize) -> InlineTable {
        let capacity = capacity.clamp(1, MAX_ENTRIES);
        let refs: Arc<[AtomicU32]> = (0..capacity).map(|_| AtomicU32::new(0)).collect();
        InlineTable { entries: Vec::new(), current: HashMap::new(), refs, cursor: 0 }
    }

    /// A handle that releases references from any thread.
    pub fn releaser(&self) -> Releaser {
        Releaser { refs: Arc::clone(&self.refs) }
    }

    /// Encodes `limiter` inline, returning a word that holds ONE new reference to its entry
    /// (the caller releases any old word separately). `hint`: the key's previous inline word,
    /// whose entry is tried first (the common case: same parameters, times still in range);
    /// then the shape's current entry; then a new entry (a new time base). `None` when the
    /// limiter has no inline form or the table is full. The extra field, if the shape has one,
    /// comes with the word ([`Encoded::extra`]); it plays no part in the entry or its count.
    pub fn encode(&mut self, limiter: &Limiter, hint: Option<u64>) -> Option<Encoded> {
        self.encode_with(&fields(limiter)?, hint)
    }

    /// Encodes `limiter` again for the key whose word is `old` (which holds one reference):
    /// `(encoded, true)` when it fits `old`'s own entry — `old`'s reference then passes to the
    /// new word, no count changes (the common case: one key updated in place); else
    /// `(encoded, false)` as [`InlineTable::encode`] with `old` as the hint, and the caller
    /// releases `old`.
    pub fn reencode(&mut self, limiter: &Limiter, old: u64) -> Option<(Encoded, bool)> {
        let f = fields(limiter)?;
        let same = index_of(old).and_then(|i| {
            let entry = self.entries.get(i).filter(|e| e.shape == f.shape)?;
            let word = inline_word(i, entry.pack(&f)?);
            Some(Encoded { word, extra: entry.extra(&f) })
        });
        if let Some(encoded) = same {
            return Some((encoded, true));
        }
        Some((self.encode_with(&f, Some(old))?, false))
    }

    /// The word of `f` with its extra field (see [`InlineTable::encode`]).
    fn encode_with(&mut self, f: &Fields, hint: Option<u64>) -> Option<Encoded> {
        let word = self.encode_fields(f, hint)?;
        let entry = index_of(word).and_then(|i| self.entries.get(i))?;
        Some(Encoded { word, extra: entry.extra(f) })
    }

    /// The word of `f` (see [`InlineTable::encode`]).
    fn encode_fields(&mut self, f: &Fields, hint: Option<u64>) -> Option<u64> {
        let hinted = hint.and_then(index_of);
        if let Some(word) = hinted.and_then(|i| self.take(i, f)) {
            return Some(word);
        }
        if let Some(&i) = self.current.get(&f.shape) {
            if Some(i) != hinted {
                if let Some(word) = self.take(i, f) {
                    return Some(word);
                }
            }
        }
        self.create(f)
    }

    /// The word of `f` in entry `index` with a new reference, if the entry has its shape and
    /// its fields fit.
    fn take(&self, index: usize, f: &Fields) -> Option<u64> {
        let entry = self.entries.get(index).filter(|e| e.shape == f.shape)?;
        let payload = entry.pack(f)?;
        self.add_ref(index);
        Some(inline_word(index, payload))
    }

    /// Adds a reference to slot `index` (saturating: a count reaching `u32::MAX` stays there).
    fn add_ref(&self, index: usize) {
        if let Some(count) = self.refs.get(index) {
            // Other threads only decrement: a count below PINNED here stays below it.
            if count.load(Ordering::Acquire) != PINNED {
                count.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// A new entry for `f`'s shape, based just before `f`'s instant, made the shape's current
    /// one; returns `f`'s word in it with one reference.
    fn create(&mut self, f: &Fields) -> Option<u64> {
        let layout = f.shape.layout()?;
        let base = f.t.saturating_sub(1i64 << (layout.time - 2));
        let entry = Entry { shape: f.shape, base, layout };
        let payload = entry.pack(f)?;
        let index = self.free_slot()?;
        let count = self.refs.get(index)?;
        match self.entries.get_mut(index) {
            Some(slot) => {
                let old = std::mem::replace(slot, entry);
                if self.current.get(&old.shape) == Some(&index) {
                    self.current.remove(&old.shape);
                }
            }
            None => self.entries.push(entry),
        }
        // A free slot's count is 0, and other threads never raise it.
        count.store(1, Ordering::Release);
        self.current.insert(f.shape, index);
        Some(inline_word(index, payload))
    }

    /// A slot for a new entry: the next never-used one, else one of at most
    /// [`RECLAIM_PROBES`] slots from the cursor whose count is 0.
    fn free_slot(&mut self) -> Option<usize> {
        let used = self.entries.len();
        if used < self.refs.len() {
            return Some(used);
        }
        for _ in 0..RECLAIM_PROBES.min(used) {
            let i = self.cursor % used;
            self.cursor = (i + 1) % used;
            if self.refs.get(i).is_some_and(|c| c.load(Ordering::Acquire) == 0) {
                return Some(i);
            }
        }
        None
    }

    /// The limiter an inline word holds, with the extra field stored beside it (`None` for
    /// shapes without one). `None` for a word that is not inline, or whose entry is gone (never
    /// created, or no reference left) or whose fields are out of range; and when `extra` does
    /// not match the shape: a step bucket's word without its extra field, or another shape's
    /// word with one, is refused (not ignored), as a sign that the caller mixed up its values.
    pub fn expand(&self, word: u64, extra: Option<u64>) -> Option<Limiter> {
        let index = index_of(word)?;
        let entry = self.entries.get(index)?;
        if self.refs.get(index)?.load(Ordering::Acquire) == 0 {
            return None;
        }
        if entry.has_extra() != extra.is_some() {
            return None;
        }
        let (f0, f1, t) = entry.unpack(word >> PAYLOAD_SHIFT, extra)?;
        // f1 ≤ max1 < 2^PAYLOAD_BITS: fits an i64.
        let f1_ms = f1 as i64;
        Some(match entry.shape {
            Shape::Token { capacity, rate, period_ms } => Limiter::Token(TokenBucket {
                capacity,
                rate,
                period_ms,
                tokens: i64::try_from(f0).ok()?,
                refill: Refill::Smooth { fraction: f1 },
                updated_ms: t,
            }),
            Shape::TokenStep { capacity, rate, period_ms } => Limiter::Token(TokenBucket {
                capacity,
                rate,
                period_ms,
                tokens: i64::try_from(f0).ok()?,
                // The raw two's complement `encode` wrote: exact for any i64.
                refill: Refill::Step { origin_ms: extra? as i64 },
                updated_ms: t,
            }),
            Shape::Period { limit, period_ms, align_offset_ms } => Limiter::Period(PeriodWindow {
                limit,
                period_ms,
                align_offset_ms,
                used: f0,
                window_start_ms: t,
                window_end_ms: t.checked_add(i64::try_from(period_ms).ok()?)?,
                updated_ms: t.checked_add(f1_ms)?,
            }),
            Shape::Leaky { capacity, rate, period_ms, delay } => Limiter::Leaky(LeakyBucket {
                capacity,
                rate,
                period_ms,
                delay,
                level: f0,
                fraction: f1,
                updated_ms: t,
            }),
            Shape::Gcra { max_burst, count, period_s } => Limiter::Gcra(GcraState {
                max_burst,
                count,
                period_s,
                tat_ms: t.checked_add(f1_ms)?,
                tat_frac: f0,
                updated_ms: t,
            }),
            Shape::Slide { limit, window_ms } => Limiter::Slide(SlideState {
                limit,
                window_ms,
                mode: SlideMode::Exact,
                updated_ms: t,
                buffer: SlideBuffer::from_word(f0),
            }),
        })
    }

    /// Whether the entry of this inline word needs the extra field (a step bucket's
    /// `origin_ms`): `false` for a word that is not inline or whose slot was never used. This
    /// reads the entry as it stands, so ask on the main thread while the word still holds its
    /// reference (before releasing it): an entry at count 0 may be reclaimed for another shape.
    pub fn needs_extra(&self, word: u64) -> bool {
        index_of(word).and_then(|i| self.entries.get(i)).is_some_and(Entry::has_extra)
    }

    /// Adds a reference to a word's entry (`COPY` of a key duplicates the word). Ignores words
    /// that are not inline or whose entry is gone.
    pub fn retain(&self, word: u64) {
        let Some(index) = index_of(word).filter(|i| *i < self.entries.len()) else {
            return;
        };
        // Only this thread raises counts: a count seen above 0 is still a live entry.
        if self.refs.get(index).is_some_and(|c| c.load(Ordering::Acquire) != 0) {
            self.add_ref(index);
        }
    }

    /// Entries with a nonzero count (for `INFO`).
    pub fn live_entries(&self) -> usize {
        self.refs.iter().take(self.entries.len()).filter(|c| c.load(Ordering::Relaxed) != 0).count()
    }

    /// Most entries the table holds.
    pub fn capacity(&self) -> usize {
        self.refs.len()
    }
}

#[cfg(test)]
#[path = "inline_tests.rs"]
mod tests;
