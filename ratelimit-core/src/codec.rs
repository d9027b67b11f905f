//! The versioned binary encoding of a stored limiter, used for RDB (and so `DUMP`/`RESTORE`,
//! replication full syncs, `DEBUG RELOAD`), the AOF rewrite (`RL.RESTORE key <payload>`) and
//! `DEBUG DIGEST`.
//!
//! Layout: one byte format version, one byte algorithm tag, then the algorithm's fields as
//! 8-byte big-endian integers (variable-length parts prefixed by their count; a lease id by
//! its length in one byte, then its bytes). Version 1 is a
//! limiter alone; version 2 ([`FORMAT_VERSION`]) follows the same fields with a ban (`since`,
//! `until`, a flags byte) and is written only for a limiter under a ban, so every other key
//! encodes exactly as before. Decoding checks the length exactly and validates every field,
//! so a corrupt or unknown payload is refused with an error, never accepted or crashed on.

use super::ban::Ban;
use super::gcra::GcraState;
use super::leaky::LeakyBucket;
use super::lease::{LeaseState, MAX_ID_LEN};
use super::limiter::Limiter;
use super::period::PeriodWindow;
use super::slide::{SlideMode, SlideState};
use super::state::CorruptState;
use super::token::{Refill, TokenBucket};

/// The newest encoding this build writes (for limiters under a ban; others are written as
/// [`LIMITER_ONLY`]). [`decode_value`] reads every version.
pub const FORMAT_VERSION: u8 = 2;
/// The encoding of a limiter without a ban (the only one before bans existed).
pub const LIMITER_ONLY: u8 = 1;

const TAG_TOKEN: u8 = 1;
const TAG_PERIOD: u8 = 2;
const TAG_SLIDE: u8 = 3;
const TAG_LEAKY: u8 = 4;
const TAG_GCRA: u8 = 5;
const TAG_LEASE: u8 = 6;

/// Appends fixed-width fields to a buffer.
pub struct Writer(Vec<u8>);

impl Default for Writer {
    /// Room for any fixed-size limiter with a ban (one allocation on the hot path).
    fn default() -> Self {
        Writer(Vec::with_capacity(96))
    }
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// Reads fixed-width fields, refusing truncated input.
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N], CorruptState> {
        let (head, tail) =
            self.rest.split_first_chunk::<N>().ok_or(CorruptState("payload truncated"))?;
        self.rest = tail;
        Ok(*head)
    }
    pub fn u8(&mut self) -> Result<u8, CorruptState> {
        Ok(self.take::<1>()?[0])
    }
    pub fn u64(&mut self) -> Result<u64, CorruptState> {
        Ok(u64::from_be_bytes(self.take()?))
    }
    pub fn i64(&mut self) -> Result<i64, CorruptState> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    /// The next `n` bytes as they are.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], CorruptState> {
        if n > self.rest.len() {
            return Err(CorruptState("payload truncated"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    /// How many `size`-byte items the rest of the input can hold at most (bounds allocations
    /// driven by a count read from untrusted input).
    pub fn room_for(&self, size: usize) -> usize {
        self.rest.len() / size.max(1)
    }
    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<(), CorruptState> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(CorruptState("trailing bytes after payload"))
        }
    }
}

/// Encodes a limiter (without a ban).
pub fn encode(limiter: &Limiter) -> Vec<u8> {
    encode_value(limiter, None)
}

/// Encodes what a key holds: a limiter and the ban it is under, if any.
pub fn encode_value(limiter: &Limiter, ban: Option<Ban>) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(if ban.is_some() { FORMAT_VERSION } else { LIMITER_ONLY });
    match limiter {
        Limiter::Token(b) => {
            w.u8(TAG_TOKEN);
            encode_token(&mut w, b);
        }
        Limiter::Period(p) => {
            w.u8(TAG_PERIOD);
            w.u64(p.limit);
            w.u64(p.period_ms);
            w.i64(p.align_offset_ms);
            w.u64(p.used);
            w.i64(p.window_start_ms);
            w.i64(p.window_end_ms);
            w.i64(p.updated_ms);
        }
        Limiter::Slide(state) => {
            w.u8(TAG_SLIDE);
            w.u64(state.limit);
            w.u64(state.window_ms);
            w.u64(u64::from(state.mode.buckets()));
            w.i64(state.updated_ms);
            if state.mode == SlideMode::Exact {
                let entries: Vec<(i64, u64)> = state.entries().collect();
                w.u64(entries.len() as u64);
                for (ts, cost) in entries {
                    w.i64(ts);
                    w.u64(cost);
                }
            } else {
                let counters: Vec<u64> = state.counters().collect();
                w.u64(counters.len() as u64);
                for c in counters {
                    w.u64(c);
                }
            }
        }
        Limiter::Leaky(b) => {
            w.u8(TAG_LEAKY);
            w.u64(b.capacity);
            w.u64(b.rate);
            w.u64(b.period_ms);
            w.u64(b.delay);
            w.u64(b.level);
            w.u64(b.fraction);
            w.i64(b.updated_ms);
        }
        Limiter::Gcra(g) => {
            w.u8(TAG_GCRA);
            w.u64(g.max_burst);
            w.u64(g.count);
            w.u64(g.period_s);
            w.i64(g.tat_ms);
            w.u64(g.tat_frac);
            w.i64(g.updated_ms);
        }
        Limiter::Lease(state) => {
            w.u8(TAG_LEASE);
            w.u64(state.limit);
            w.u64(state.lease_ms);
            w.i64(state.created_ms);
            w.u64(state.seq);
            w.i64(state.updated_ms);
            w.u64(state.leases().len() as u64);
            for (id, expires_ms) in state.leases() {
                w.i64(expires_ms);
                w.u8(u8::try_from(id.len()).unwrap_or(u8::MAX));
                w.bytes(id);
            }
        }
    }
    if let Some(ban) = ban {
        w.i64(ban.since_ms);
        w.i64(ban.until_ms);
        w.u8(u8::from(ban.limiter_fresh));
    }
    w.into_bytes()
}

/// Decodes and validates a limiter without a ban (format version 1).
pub fn decode(bytes: &[u8]) -> Result<Limiter, CorruptState> {
    match decode_value(bytes)? {
        (limiter, None) => Ok(limiter),
        (_, Some(_)) => Err(CorruptState("a ban where a limiter alone was expected")),
    }
}

/// Decodes and validates a payload written by [`encode_value`] (any supported version).
pub fn decode_value(bytes: &[u8]) -> Result<(Limiter, Option<Ban>), CorruptState> {
    let mut r = Reader::new(bytes);
    let version = r.u8()?;
    if version != LIMITER_ONLY && version != FORMAT_VERSION {
        return Err(CorruptState("unknown encoding version"));
    }
    let limiter = match r.u8()? {
        TAG_TOKEN => Limiter::Token(decode_token(&mut r)?),
        TAG_PERIOD => Limiter::Period(PeriodWindow {
            limit: r.u64()?,
            period_ms: r.u64()?,
            align_offset_ms: r.i64()?,
            used: r.u64()?,
            window_start_ms: r.i64()?,
            window_end_ms: r.i64()?,
            updated_ms: r.i64()?,
        }),
        TAG_SLIDE => Limiter::Slide(decode_slide(&mut r)?),
        TAG_LEAKY => Limiter::Leaky(LeakyBucket {
            capacity: r.u64()?,
            rate: r.u64()?,
            period_ms: r.u64()?,
            delay: r.u64()?,
            level: r.u64()?,
            fraction: r.u64()?,
            updated_ms: r.i64()?,
        }),
        TAG_GCRA => Limiter::Gcra(GcraState {
            max_burst: r.u64()?,
            count: r.u64()?,
            period_s: r.u64()?,
            tat_ms: r.i64()?,
            tat_frac: r.u64()?,
            updated_ms: r.i64()?,
        }),
        TAG_LEASE => Limiter::Lease(decode_lease(&mut r)?),
        _ => return Err(CorruptState("unknown algorithm tag")),
    };
    let ban = if version == FORMAT_VERSION {
        let (since_ms, until_ms) = (r.i64()?, r.i64()?);
        let limiter_fresh = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(CorruptState("unknown ban flags")),
        };
        let ban = Ban { since_ms, until_ms, limiter_fresh };
        if matches!(limiter, Limiter::Lease(_)) {
            return Err(CorruptState("a ban on leases"));
        }
        ban.validate()?;
        Some(ban)
    } else {
        None
    };
    r.finish()?;
    limiter.validate()?;
    Ok((limiter, ban))
}

fn decode_slide(r: &mut Reader<'_>) -> Result<SlideState, CorruptState> {
    let limit = r.u64()?;
    let window_ms = r.u64()?;
    let buckets =
        u16::try_from(r.u64()?).map_err(|_| CorruptState("slide buckets out of range"))?;
    let updated_ms = r.i64()?;
    let count = usize::try_from(r.u64()?).map_err(|_| CorruptState("slide count out of range"))?;
    match SlideMode::from_buckets(buckets) {
        SlideMode::Exact => {
            if count > r.room_for(16) {
                return Err(CorruptState("payload truncated"));
            }
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push((r.i64()?, r.u64()?));
            }
            SlideState::from_entries(limit, window_ms, updated_ms, &entries)
        }
        SlideMode::Buckets(buckets) => {
            if count > r.room_for(8) {
                return Err(CorruptState("payload truncated"));
            }
            let mut counters = Vec::with_capacity(count);
            for _ in 0..count {
                counters.push(r.u64()?);
            }
            SlideState::from_counters(limit, window_ms, buckets, updated_ms, &counters)
        }
    }
}

fn decode_lease(r: &mut Reader<'_>) -> Result<LeaseState, CorruptState> {
    let limit = r.u64()?;
    let lease_ms = r.u64()?;
    let created_ms = r.i64()?;
    let seq = r.u64()?;
    let updated_ms = r.i64()?;
    let count = usize::try_from(r.u64()?).map_err(|_| CorruptState("lease count out of range"))?;
    // Each lease takes at least 10 bytes (expiry, length, one id byte).
    if count > r.room_for(10) {
        return Err(CorruptState("payload truncated"));
    }
    let mut leases = Vec::with_capacity(count);
    for _ in 0..count {
        let expires_ms = r.i64()?;
        let len = usize::from(r.u8()?);
        if !(1..=MAX_ID_LEN).contains(&len) {
            return Err(CorruptState("lease id length out of range"));
        }
        leases.push((r.bytes(len)?.to_vec(), expires_ms));
    }
    Ok(LeaseState::from_parts(limit, lease_ms, created_ms, seq, updated_ms, leases))
}

fn encode_token(w: &mut Writer, b: &TokenBucket) {
    w.u64(b.capacity);
    w.u64(b.rate);
    w.u64(b.period_ms);
    w.u64(b.tokens);
    match b.refill {
        Refill::Smooth { fraction } => {
            w.u8(0);
            w.u64(fraction);
        }
        Refill::Step { origin_ms } => {
            w.u8(1);
            w.i64(origin_ms);
        }
    }
    w.i64(b.updated_ms);
}

fn decode_token(r: &mut Reader<'_>) -> Result<TokenBucket, CorruptState> {
    let capacity = r.u64()?;
    let rate = r.u64()?;
    let period_ms = r.u64()?;
    let tokens = r.u64()?;
    let refill = match r.u8()? {
        0 => Refill::Smooth { fraction: r.u64()? },
        1 => Refill::Step { origin_ms: r.i64()? },
        _ => return Err(CorruptState("unknown token refill mode")),
    };
    let updated_ms = r.i64()?;
    Ok(TokenBucket { capacity, rate, period_ms, tokens, refill, updated_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::{evaluate, TokenParams};
    use proptest::prelude::*;

    const T0: i64 = 1_700_000_000_000;

    fn sample() -> Limiter {
        let p = TokenParams::new(10, 3, 7, false).unwrap();
        Limiter::Token(evaluate(None, &p, T0, 4).next.unwrap())
    }

    /// One admitted state of every algorithm and mode.
    fn samples() -> Vec<Limiter> {
        use crate::{gcra, leaky, period};
        let step = TokenParams::new(5, 2, 1000, true).unwrap();
        let aligned = period::PeriodParams::new(5, 86_400_000, Some(-5 * 3_600_000)).unwrap();
        let plain = period::PeriodParams::new(5, 1000, None).unwrap();
        let delay = leaky::LeakyParams::new(10, 3, 7, leaky::LeakMode::Delay(2)).unwrap();
        let nodelay = leaky::LeakyParams::new(10, 3, 7, leaky::LeakMode::NoDelay).unwrap();
        let g = gcra::GcraParams::new(15, 30, 60).unwrap();
        vec![
            sample(),
            Limiter::Token(evaluate(None, &step, T0, 3).next.unwrap()),
            Limiter::Period(period::evaluate(None, &aligned, T0, 2).next.unwrap()),
            Limiter::Period(period::evaluate(None, &plain, T0, 2).next.unwrap()),
            Limiter::Leaky(leaky::evaluate(None, &delay, T0, 4).next.unwrap()),
            Limiter::Leaky(leaky::evaluate(None, &nodelay, T0, 4).next.unwrap()),
            Limiter::Gcra(gcra::evaluate(None, &g, T0, 3).next.unwrap()),
            slide_sample(None),
            slide_sample(Some(10)),
        ]
    }

    /// A sliding window after a few admissions at different instants.
    fn slide_sample(buckets: Option<u64>) -> Limiter {
        use crate::slide;
        let p = slide::SlideParams::new(10, 1000, buckets, 100).unwrap();
        let mut state = None;
        for (dt, cost) in [(0, 2), (5, 1), (300, 3), (999, 1)] {
            if let Some(next) = slide::evaluate(state.as_ref(), &p, T0 + dt, cost).next {
                state = Some(next);
            }
        }
        Limiter::Slide(state.unwrap())
    }

    #[test]
    fn round_trips() {
        for l in samples() {
            assert_eq!(decode(&encode(&l)), Ok(l.clone()), "{l:?}");
        }
    }

    #[test]
    fn refuses_truncated_trailing_and_unknown() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err(), "truncated at {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long).is_err());
        let mut version = bytes.clone();
        version[0] = 99;
        assert!(decode(&version).is_err());
        let mut tag = bytes;
        tag[1] = 99;
        assert!(decode(&tag).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(l) = decode(&bytes) {
                prop_assert_eq!(l.validate(), Ok(()));
            }
        }

        #[test]
        fn bit_flips_are_refused_or_valid(which in 0usize..9, bit in 0usize..(8 * 59)) {
            let mut bytes = encode(&samples()[which]);
            let (i, b) = (bit / 8, bit % 8);
            if let Some(byte) = bytes.get_mut(i) {
                *byte ^= 1 << b;
            }
            if let Ok(l) = decode(&bytes) {
                prop_assert_eq!(l.validate(), Ok(()));
            }
        }
    }
}
