//! The compact form a limiter takes in a key: 48 bytes, jemalloc's 48-byte size class.
//!
//! A [`Limiter`] is 64 bytes in memory (an enum of `u64`/`i64` fields), but no field needs 64
//! bits: counts are ≤ 10^12 (40 bits), durations ≤ 10 years (39 bits), instants ≤ year 9999
//! (49 bits with an offset that admits the few negative ones). Packed to their widths, every
//! algorithm fits six words with its tag — including a sliding log's heap buffer, carried as a
//! raw pointer and length (a sliding window's fields, few enough, each take a whole word but
//! the first: see `slide_head`). Each key thus costs 16 bytes less (every allocation size class
//! counts toward the memory a key costs).
//!
//! Correctness never depends on the widths: a value that does not fit (it cannot happen for
//! states the algorithms produce, but the format must not assume it) is stored **wide** — the
//! words then hold a pointer to a boxed `Wide` value. A limiter under a [`Ban`] is always
//! stored wide, so limiters without one never grow. Leases ([`crate::algorithms::lease`]) are always
//! stored wide.
//!
//! Access is by [`PackedLimiter::view`] (read) and [`PackedLimiter::update`] (read and
//! write, repacked afterwards); both unpack into a temporary `Limiter`, which costs a few dozen
//! instructions and never copies a sliding log's buffer.

#![allow(unsafe_code)]

use std::mem::ManuallyDrop;

use crate::algorithms::ban::Ban;
use crate::algorithms::gcra::GcraState;
use crate::algorithms::leaky::{LeakyBucket, NO_DELAY};
use crate::algorithms::limiter::Limiter;
use crate::algorithms::period::{PeriodWindow, UNALIGNED};
use crate::algorithms::slide::{SlideBuffer, SlideMode, SlideState};
use crate::algorithms::token::{Refill, TokenBucket};

const WORDS: usize = 6;

const TAG_BITS: u32 = 3;
const TAG_TOKEN: u64 = 1;
const TAG_PERIOD: u64 = 2;
const TAG_SLIDE: u64 = 3;
const TAG_LEAKY: u64 = 4;
const TAG_GCRA: u64 = 5;
const TAG_WIDE: u64 = 7;

/// Counts (limit, capacity, rate, cost totals): ≤ 10^12 < 2^40.
const COUNT: u32 = 40;
/// Durations in ms: ≤ 3650 days < 2^39.
const DURATION: u32 = 39;
/// Instants in unix ms, stored as `t + TIME_OFFSET`: covers −2^40 … 2^49 − 2^40 ms
/// (years −32 … 19 800), a superset of every instant a state can hold.
const TIME: u32 = 49;
const TIME_OFFSET: i64 = 1 << 40;
/// A signed offset with |offset| < 2^39, stored as `offset + 2^39`.
const OFFSET: u32 = 40;
const OFFSET_BIAS: i64 = 1 << 39;

/// A limiter in 48 bytes. Owns what it points to (a sliding log's buffer, or a wide box).
pub struct PackedLimiter {
    words: [u64; WORDS],
}

/// Writes fields of given widths into the words, low bits first; fails if a value is too
/// wide or the words are full.
struct Writer {
    words: [u64; WORDS],
    bit: u32,
}

impl Writer {
    fn new(tag: u64) -> Writer {
        let mut w = Writer { words: [0; WORDS], bit: 0 };
        // The tag always fits.
        let _ = w.put(tag, TAG_BITS);
        w
    }

    fn put(&mut self, value: u64, bits: u32) -> Option<()> {
        if bits < 64 && value >> bits != 0 {
            return None;
        }
        let (word, shift) = ((self.bit / 64) as usize, self.bit % 64);
        if self.bit + bits > (WORDS as u32) * 64 {
            return None;
        }
        *self.words.get_mut(word)? |= value << shift;
        if shift + bits > 64 {
            *self.words.get_mut(word + 1)? |= value >> (64 - shift);
        }
        self.bit += bits;
        Some(())
    }

    fn flag(&mut self, value: bool) -> Option<()> {
        self.put(u64::from(value), 1)
    }

    fn time(&mut self, t: i64) -> Option<()> {
        let biased = t.checked_add(TIME_OFFSET)?;
        self.put(u64::try_from(biased).ok()?, TIME)
    }

    fn signed(&mut self, v: i64, bias: i64, bits: u32) -> Option<()> {
        let biased = v.checked_add(bias)?;
        self.put(u64::try_from(biased).ok()?, bits)
    }
}

/// Reads fields back in the order they were written.
struct Reader<'a> {
    words: &'a [u64; WORDS],
    bit: u32,
}

impl Reader<'_> {
    fn get(&mut self, bits: u32) -> u64 {
        let (word, shift) = ((self.bit / 64) as usize, self.bit % 64);
        let low = self.words.get(word).copied().unwrap_or(0) >> shift;
        let high = if shift + bits > 64 && shift > 0 {
            self.words.get(word + 1).copied().unwrap_or(0) << (64 - shift)
        } else {
            0
        };
        self.bit += bits;
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        (low | high) & mask
    }

    fn flag(&mut self) -> bool {
        self.get(1) == 1
    }

    fn time(&mut self) -> i64 {
        self.get(TIME) as i64 - TIME_OFFSET
    }

    fn signed(&mut self, bias: i64, bits: u32) -> i64 {
        self.get(bits) as i64 - bias
    }
}

/// The boxed form of a value that does not fit six words, or carries a ban.
struct Wide {
    limiter: Limiter,
    ban: Option<Ban>,
}

impl PackedLimiter {
    /// Packs a limiter (taking ownership of a sliding log's buffer).
    pub fn new(limiter: Limiter) -> PackedLimiter {
        PackedLimiter::with_ban(limiter, None)
    }

    /// Packs a limiter and the ban it is under, if any.
    pub fn with_ban(limiter: Limiter, ban: Option<Ban>) -> PackedLimiter {
        match compact(&limiter).filter(|_| ban.is_none()) {
            Some(words) => {
                // The buffer now belongs to the words: do not free it with `limiter`.
                if let Limiter::Slide(state) = limiter {
                    let _ = state.buffer.into_raw_parts();
                }
                PackedLimiter { words }
            }
            None => {
                let mut words = [0u64; WORDS];
                words[0] = TAG_WIDE;
                words[1] = Box::into_raw(Box::new(Wide { limiter, ban })) as usize as u64;
                PackedLimiter { words }
            }
        }
    }

    /// The ban the limiter is under (active or past), if one is stored.
    pub fn ban(&self) -> Option<Ban> {
        // SAFETY: written by `with_ban` from `Box::into_raw`, alive until `free_wide_box`.
        self.wide_box().and_then(|boxed| unsafe { (*boxed).ban })
    }

    /// Stores `ban` with the limiter (or removes it), repacking as needed.
    pub fn set_ban(&mut self, ban: Option<Ban>) {
        if self.ban() != ban {
            self.repack(|_| {}, Some(ban));
        }
    }

    /// Unpacks, giving up ownership to the returned limiter.
    pub fn into_limiter(self) -> Limiter {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the limiter is the only owner; a wide box's
        // allocation is freed here without dropping the limiter moved out of it.
        let limiter = unsafe { this.read() };
        this.free_wide_box();
        limiter
    }

    /// The boxed value of a wide value.
    fn wide_box(&self) -> Option<*mut Wide> {
        (self.words[0] & tag_mask() == TAG_WIDE).then_some(self.words[1] as usize as *mut Wide)
    }

    /// Frees a wide value's box without dropping the limiter in it (which `read` copied out).
    fn free_wide_box(&self) {
        if let Some(boxed) = self.wide_box() {
            // SAFETY: written by `with_ban` from `Box::into_raw`; `ManuallyDrop` has the same
            // layout and does not drop its content (a `Ban` owns nothing).
            drop(unsafe { Box::from_raw(boxed.cast::<ManuallyDrop<Wide>>()) });
        }
    }

    /// Runs `f` on the limiter without copying it.
    pub fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R {
        // SAFETY: the temporary shares our buffers but is never dropped, and `f` only reads.
        let limiter = ManuallyDrop::new(unsafe { self.read() });
        f(&limiter)
    }

    /// Runs `f` on the limiter with write access, then repacks what it left (with its ban).
    /// A wide value that stays wide (a lease list, a ban) is updated in its box, without
    /// unpacking, freeing and allocating it again.
    pub fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R {
        if let Some(boxed) = self.wide_box() {
            // SAFETY: written by `with_ban` from `Box::into_raw`, alive until `free_wide_box`;
            // `&mut self` makes this the only reference while `f` runs.
            let wide = unsafe { &mut *boxed };
            let result = f(&mut wide.limiter);
            if wide.ban.is_none() && compact(&wide.limiter).is_some() {
                // It fits the words again: unpack it from the box (`repack` with no change).
                self.repack(|_| {}, None);
            }
            return result;
        }
        self.repack(f, None)
    }

    /// Unpacks, runs `f` on the limiter, and packs it again with `ban` (`None`: the ban it
    /// had).
    fn repack<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R, ban: Option<Option<Ban>>) -> R {
        let ban = ban.unwrap_or_else(|| self.ban());
        // SAFETY: ownership moves to `limiter` here and back into `self` below; the old
        // words are overwritten without being dropped.
        let mut limiter = unsafe { self.read() };
        self.free_wide_box();
        let result = f(&mut limiter);
        let repacked = ManuallyDrop::new(PackedLimiter::with_ban(limiter, ban));
        self.words = repacked.words;
        result
    }

    /// Bytes of heap this value owns beyond its 48 bytes.
    pub fn heap_bytes(&self) -> usize {
        let extra =
            if self.words[0] & tag_mask() == TAG_WIDE { std::mem::size_of::<Wide>() } else { 0 };
        extra + self.view(Limiter::heap_bytes)
    }

    /// The limiter these words describe, sharing their buffers.
    ///
    /// # Safety
    /// The result co-owns any heap buffer with `self`: exactly one of them may be dropped.
    unsafe fn read(&self) -> Limiter {
        let w = &self.words;
        let mut r = Reader { words: w, bit: 0 };
        match r.get(TAG_BITS) {
            TAG_TOKEN => {
                let capacity = r.get(COUNT);
                let rate = r.get(COUNT);
                let period_ms = r.get(DURATION);
                let step = r.flag();
                // 40 bits: exact as an i64 (a bucket in debt is stored wide).
                let tokens = r.get(COUNT) as i64;
                let refill = if step {
                    Refill::Step { origin_ms: r.time() }
                } else {
                    Refill::Smooth { fraction: r.get(DURATION) }
                };
                let updated_ms = r.time();
                Limiter::Token(TokenBucket {
                    capacity,
                    rate,
                    period_ms,
                    tokens,
                    refill,
                    updated_ms,
                })
            }
            TAG_PERIOD => {
                let limit = r.get(COUNT);
                let period_ms = r.get(DURATION);
                let aligned = r.flag();
                let offset = r.signed(OFFSET_BIAS, OFFSET);
                Limiter::Period(PeriodWindow {
                    limit,
                    period_ms,
                    align_offset_ms: if aligned { offset } else { UNALIGNED },
                    used: r.get(COUNT),
                    window_start_ms: r.time(),
                    window_end_ms: r.time(),
                    updated_ms: r.time(),
                })
            }
            TAG_LEAKY => {
                let capacity = r.get(COUNT);
                let rate = r.get(COUNT);
                let period_ms = r.get(DURATION);
                let no_delay = r.flag();
                let delay = r.get(COUNT);
                Limiter::Leaky(LeakyBucket {
                    capacity,
                    rate,
                    period_ms,
                    delay: if no_delay { NO_DELAY } else { delay },
                    level: r.get(COUNT),
                    fraction: r.get(DURATION),
                    updated_ms: r.time(),
                })
            }
            TAG_GCRA => Limiter::Gcra(GcraState {
                max_burst: r.get(COUNT),
                count: r.get(COUNT),
                period_s: r.get(DURATION),
                tat_ms: r.time(),
                tat_frac: r.get(COUNT),
                updated_ms: r.time(),
            }),
            TAG_SLIDE => {
                let (mode, limit) = slide_head(w[0]);
                let (window_ms, updated_ms) = (w[1], w[2] as i64);
                let (word, len, ptr) = (w[3], w[4] as usize, w[5] as usize as *mut u8);
                // SAFETY: written by `compact` from `SlideBuffer::into_raw_parts`.
                let buffer = unsafe { SlideBuffer::from_raw_parts(word, ptr, len) };
                Limiter::Slide(SlideState { limit, window_ms, mode, updated_ms, buffer })
            }
            _ => {
                // TAG_WIDE: the words hold a `Box<Wide>` pointer; copy the limiter out and
                // leave the allocation to `free_wide_box` / `drop`.
                let boxed = w[1] as usize as *const Wide;
                // SAFETY: written by `with_ban` from `Box::into_raw`, freed only by
                // `free_wide_box`.
                unsafe { std::ptr::read(&raw const (*boxed).limiter) }
            }
        }
    }
}

fn tag_mask() -> u64 {
    (1 << TAG_BITS) - 1
}

/// A sliding window's first word: the tag, `limit` (`COUNT` bits), `BUCKETS b` (16 bits) and
/// the `ANCHOR` and `FLOOR` flags. Its other five words are `window_ms`, `updated_ms` (two's
/// complement), the buffer's inline word, its heap buffer's length and pointer: each a whole
/// word, so packing and unpacking are a few shifts.
const SLIDE_BUCKETS_SHIFT: u32 = TAG_BITS + COUNT;
const SLIDE_ANCHOR_BIT: u32 = SLIDE_BUCKETS_SHIFT + 16;
const SLIDE_FLOOR_BIT: u32 = SLIDE_ANCHOR_BIT + 1;

/// The mode and limit of a sliding window's first word (see [`SLIDE_BUCKETS_SHIFT`]).
fn slide_head(head: u64) -> (SlideMode, u64) {
    let limit = (head >> TAG_BITS) & ((1 << COUNT) - 1);
    let buckets = (head >> SLIDE_BUCKETS_SHIFT) as u16;
    let flag = |bit: u32| (head >> bit) & 1 == 1;
    (SlideMode::from_parts(buckets, flag(SLIDE_ANCHOR_BIT), flag(SLIDE_FLOOR_BIT)), limit)
}

/// The six words of a limiter whose every field fits its width, or `None`. For a sliding
/// log the words include its buffer's raw parts (read without taking ownership).
fn compact(limiter: &Limiter) -> Option<[u64; WORDS]> {
    let w = match limiter {
        Limiter::Token(b) => {
            let mut w = Writer::new(TAG_TOKEN);
            w.put(b.capacity, COUNT)?;
            w.put(b.rate, COUNT)?;
            w.put(b.period_ms, DURATION)?;
            match b.refill {
                Refill::Step { origin_ms } => {
                    w.flag(true)?;
                    w.put(u64::try_from(b.tokens).ok()?, COUNT)?;
                    w.time(origin_ms)?;
                }
                Refill::Smooth { fraction } => {
                    w.flag(false)?;
                    w.put(u64::try_from(b.tokens).ok()?, COUNT)?;
                    w.put(fraction, DURATION)?;
                }
            }
            w.time(b.updated_ms)?;
            w
        }
        Limiter::Period(p) => {
            let mut w = Writer::new(TAG_PERIOD);
            w.put(p.limit, COUNT)?;
            w.put(p.period_ms, DURATION)?;
            let aligned = p.align_offset_ms != UNALIGNED;
            w.flag(aligned)?;
            w.signed(if aligned { p.align_offset_ms } else { 0 }, OFFSET_BIAS, OFFSET)?;
            w.put(p.used, COUNT)?;
            w.time(p.window_start_ms)?;
            w.time(p.window_end_ms)?;
            w.time(p.updated_ms)?;
            w
        }
        Limiter::Leaky(b) => {
            let mut w = Writer::new(TAG_LEAKY);
            w.put(b.capacity, COUNT)?;
            w.put(b.rate, COUNT)?;
            w.put(b.period_ms, DURATION)?;
            let no_delay = b.delay == NO_DELAY;
            w.flag(no_delay)?;
            w.put(if no_delay { 0 } else { b.delay }, COUNT)?;
            w.put(b.level, COUNT)?;
            w.put(b.fraction, DURATION)?;
            w.time(b.updated_ms)?;
            w
        }
        Limiter::Gcra(g) => {
            let mut w = Writer::new(TAG_GCRA);
            w.put(g.max_burst, COUNT)?;
            w.put(g.count, COUNT)?;
            w.put(g.period_s, DURATION)?;
            w.time(g.tat_ms)?;
            w.put(g.tat_frac, COUNT)?;
            w.time(g.updated_ms)?;
            w
        }
        // A sliding window's words are whole fields (see `slide_head`): no bit packing on
        // its hot path, which repacks on every call once its log is on the heap.
        Limiter::Slide(s) => {
            if s.limit >> COUNT != 0 {
                return None;
            }
            let (word, ptr, len) = s.buffer.raw_parts();
            let head = TAG_SLIDE
                | s.limit << TAG_BITS
                | u64::from(s.mode.buckets()) << SLIDE_BUCKETS_SHIFT
                | u64::from(s.mode.anchored()) << SLIDE_ANCHOR_BIT
                | u64::from(s.mode.floored()) << SLIDE_FLOOR_BIT;
            return Some([
                head,
                s.window_ms,
                s.updated_ms as u64,
                word,
                len as u64,
                ptr as usize as u64,
            ]);
        }
        // Leases own a variable-size array of ids: always stored wide.
        Limiter::Lease(_) => return None,
    };
    Some(w.words)
}

impl Drop for PackedLimiter {
    fn drop(&mut self) {
        // SAFETY: this is the words' last use; the limiter takes and frees their buffers.
        drop(unsafe { self.read() });
        self.free_wide_box();
    }
}

impl Clone for PackedLimiter {
    fn clone(&self) -> Self {
        PackedLimiter::with_ban(self.view(Limiter::clone), self.ban())
    }
}

impl std::fmt::Debug for PackedLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view(|l| l.fmt(f))?;
        match self.ban() {
            Some(ban) => write!(f, " under {ban:?}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "packed_tests.rs"]
mod tests;
