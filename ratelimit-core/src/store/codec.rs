//! The versioned binary encoding of a stored limiter, used for RDB (and so `DUMP`/`RESTORE`,
//! replication full syncs, `DEBUG RELOAD`), the AOF rewrite (`RL.RESTORE key <payload>`) and
//! `DEBUG DIGEST`.
//!
//! Layout: one byte format version, one byte algorithm tag, then the algorithm's fields as
//! 8-byte big-endian integers (variable-length parts prefixed by their count; a lease id by
//! its length in one byte, then its bytes). Version 1 is a
//! limiter alone; version 2 follows the same fields with a ban (`since`, `until`, a flags
//! byte) and is written only for a limiter under a ban. Versions 3 and 4 are versions 1 and 2
//! for a bucketed sliding window with `ANCHOR` or `FLOOR`: after its `buckets` field come an
//! options byte (bit 0 `ANCHOR`, bit 1 `FLOOR`) and, with `ANCHOR`, the grid origin. Each
//! value is written in the lowest version that holds it, so every other key encodes exactly
//! as before, and decoding refuses a higher version than the value needs (one value, one
//! encoding). Decoding checks the length exactly and validates every field, so a corrupt or
//! unknown payload is refused with an error, never accepted or crashed on.
//!
//! Versions 5 and 6 are versions 1 and 2 for a limiter *in debt* (using more than its limit,
//! which only `RL.CHARGE` makes: [`Limiter::in_debt`]): the same fields, with values an
//! admitted call never produces, so a release that predates debt refuses them by their
//! version rather than by a validation error. A limiter leaves debt by itself as time passes,
//! and the next write then takes version 1 or 2 again.
//!
//! Which release reads what: 0.1.0 decodes versions 1 and 2, 0.2.0 versions 1 to 4, 0.3.0 all
//! six. So a
//! value that uses no feature added since 0.1.0 (a sliding window's `ANCHOR`/`FLOOR`) is
//! written in a version 0.1.0 reads — what lets an old replica follow a new master, and a
//! downgrade keep such values (`docs/operations.md#upgrades`). A new stored feature gets a new
//! version written only for the values that use it; the RDB envelope (`src/shell/server/datatype.rs`)
//! never changes for it.

use crate::algorithms::ban::Ban;
use crate::algorithms::gcra::GcraState;
use crate::algorithms::leaky::LeakyBucket;
use crate::algorithms::lease::{LeaseState, MAX_ID_LEN};
use crate::algorithms::limiter::Limiter;
use crate::algorithms::period::PeriodWindow;
use crate::algorithms::slide::{SlideMode, SlideState};
use crate::algorithms::state::CorruptState;
use crate::algorithms::token::{Refill, TokenBucket};

/// The newest encoding this build writes: a limiter in debt under a ban. [`decode_value`] reads
/// every version.
pub const FORMAT_VERSION: u8 = 6;
/// The encoding of a limiter without a ban (the only one before bans existed).
pub const LIMITER_ONLY: u8 = 1;
/// A limiter and its ban.
pub const WITH_BAN: u8 = 2;
/// [`LIMITER_ONLY`] with a sliding window's `ANCHOR`/`FLOOR` options.
pub const SLIDE_OPTIONS: u8 = 3;
/// [`WITH_BAN`] with a sliding window's `ANCHOR`/`FLOOR` options.
pub const SLIDE_OPTIONS_WITH_BAN: u8 = 4;

/// [`LIMITER_ONLY`] for a limiter in debt (`RL.CHARGE`).
pub const IN_DEBT: u8 = 5;
/// [`WITH_BAN`] for a limiter in debt (`RL.CHARGE`).
pub const IN_DEBT_WITH_BAN: u8 = 6;

/// Whether format `version` carries a ban's fields (versions 2, 4 and 6).
fn carries_ban(version: u8) -> bool {
    matches!(version, WITH_BAN | SLIDE_OPTIONS_WITH_BAN | IN_DEBT_WITH_BAN)
}

/// Whether format `version` carries a sliding window's options byte (versions 3 and 4).
fn carries_options(version: u8) -> bool {
    matches!(version, SLIDE_OPTIONS | SLIDE_OPTIONS_WITH_BAN)
}

/// Options byte of versions 3 and 4: `ANCHOR`.
const OPTION_ANCHOR: u8 = 1;
/// Options byte of versions 3 and 4: `FLOOR`.
const OPTION_FLOOR: u8 = 2;

/// Whether a value uses a sliding window's `ANCHOR`/`FLOOR` (only versions 3 and 4 hold them).
fn has_slide_options(limiter: &Limiter) -> bool {
    matches!(limiter, Limiter::Slide(s) if s.mode.anchored() || s.mode.floored())
}

/// Whether format `version` can hold this value: versions 2, 4 and 6 carry a ban's fields (and
/// only a value under a ban has them), versions 3 and 4 a sliding window's options byte, and
/// versions 5 and 6 a limiter in debt (and only those).
pub fn holds(version: u8, limiter: &Limiter, ban: Option<Ban>) -> bool {
    let in_debt = matches!(version, IN_DEBT | IN_DEBT_WITH_BAN);
    (LIMITER_ONLY..=FORMAT_VERSION).contains(&version)
        && carries_ban(version) == ban.is_some()
        && (carries_options(version) || !has_slide_options(limiter))
        && in_debt == limiter.in_debt()
}

/// The version a value is written in: the lowest that holds it ([`holds`]), so a value that
/// uses no feature of a later release stays readable by the earlier one.
pub fn version_for(limiter: &Limiter, ban: Option<Ban>) -> u8 {
    // Sliding windows take no debt: the two never meet.
    if limiter.in_debt() {
        return if ban.is_some() { IN_DEBT_WITH_BAN } else { IN_DEBT };
    }
    match (has_slide_options(limiter), ban.is_some()) {
        (false, false) => LIMITER_ONLY,
        (false, true) => WITH_BAN,
        (true, false) => SLIDE_OPTIONS,
        (true, true) => SLIDE_OPTIONS_WITH_BAN,
    }
}

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

/// Encodes what a key holds: a limiter and the ban it is under, if any, in the lowest version
/// that holds it ([`version_for`]).
pub fn encode_value(limiter: &Limiter, ban: Option<Ban>) -> Vec<u8> {
    write(limiter, ban, version_for(limiter, ban))
}

/// Encodes a value in a given format `version`, or `None` if that version cannot hold it
/// ([`holds`]). The decoder accepts only the lowest version that holds a value; the others
/// exist for tests of that rule.
pub fn encode_in(limiter: &Limiter, ban: Option<Ban>, version: u8) -> Option<Vec<u8>> {
    holds(version, limiter, ban).then(|| write(limiter, ban, version))
}

/// The encoding in `version`, which holds the value ([`holds`]).
fn write(limiter: &Limiter, ban: Option<Ban>, version: u8) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(version);
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
            if carries_options(version) {
                let anchor = if state.mode.anchored() { OPTION_ANCHOR } else { 0 };
                w.u8(anchor | if state.mode.floored() { OPTION_FLOOR } else { 0 });
                if let Some(origin) = state.origin_ms() {
                    w.i64(origin);
                }
            }
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
    if !(LIMITER_ONLY..=FORMAT_VERSION).contains(&version) {
        return Err(CorruptState("unknown encoding version"));
    }
    let options = carries_options(version);
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
        TAG_SLIDE => Limiter::Slide(decode_slide(&mut r, options)?),
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
    let ban = if carries_ban(version) {
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
    if version_for(&limiter, ban) != version {
        return Err(CorruptState("a value in another encoding version than it needs"));
    }
    Ok((limiter, ban))
}

/// A sliding window's fields; `options`: the `ANCHOR`/`FLOOR` byte (and the origin) follow
/// `buckets` (versions 3 and 4).
fn decode_slide(r: &mut Reader<'_>, options: bool) -> Result<SlideState, CorruptState> {
    let limit = r.u64()?;
    let window_ms = r.u64()?;
    let buckets =
        u16::try_from(r.u64()?).map_err(|_| CorruptState("slide buckets out of range"))?;
    let (anchor, floor) = if options {
        let flags = r.u8()?;
        if flags & !(OPTION_ANCHOR | OPTION_FLOOR) != 0 {
            return Err(CorruptState("unknown slide options"));
        }
        (flags & OPTION_ANCHOR != 0, flags & OPTION_FLOOR != 0)
    } else {
        (false, false)
    };
    let origin_ms = if anchor { Some(r.i64()?) } else { None };
    let updated_ms = r.i64()?;
    let count = usize::try_from(r.u64()?).map_err(|_| CorruptState("slide count out of range"))?;
    match SlideMode::from_parts(buckets, anchor, floor) {
        SlideMode::Exact if anchor || floor => Err(CorruptState("slide options without BUCKETS")),
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
            SlideState::from_counters(limit, window_ms, buckets, origin_ms, updated_ms, &counters)
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
    w.i64(b.tokens);
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
    let tokens = r.i64()?;
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
    use crate::algorithms::token::{evaluate, TokenParams};
    use proptest::prelude::*;

    const T0: i64 = 1_700_000_000_000;

    fn sample() -> Limiter {
        let p = TokenParams::new(10, 3, 7, false).unwrap();
        Limiter::Token(evaluate(None, &p, T0, 4).next.unwrap())
    }

    /// One admitted state of every algorithm and mode.
    fn samples() -> Vec<Limiter> {
        use crate::{algorithms::gcra, algorithms::leaky, algorithms::period};
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
            slide_options(true, false),
            slide_options(false, true),
            slide_options(true, true),
        ]
    }

    /// A sliding window after a few admissions at different instants.
    fn slide_sample(buckets: Option<u64>) -> Limiter {
        sliding(crate::algorithms::slide::SlideParams::new(10, 1000, buckets, 100).unwrap())
    }

    /// A bucketed sliding window with `ANCHOR` and/or `FLOOR`.
    fn slide_options(anchor: bool, floor: bool) -> Limiter {
        let p = crate::algorithms::slide::SlideParams::new(10, 1000, Some(4), 100).unwrap();
        sliding(p.with_options(anchor, floor).unwrap())
    }

    fn sliding(p: crate::algorithms::slide::SlideParams) -> Limiter {
        use crate::algorithms::slide;
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
            let ban = Ban::start(T0 + 999, 60_000);
            assert_eq!(decode_value(&encode_value(&l, Some(ban))), Ok((l.clone(), Some(ban))));
        }
    }

    /// The committed decoder seeds of the sliding window options and of a cleared limiter under
    /// its ban (`BAN d CLEAR`: the ban's flags byte, no new field) decode (and re-encode).
    #[test]
    fn option_seeds_decode() {
        for name in ["slide-anchored-floor", "slide-anchored-banned", "period-banned-clear"] {
            let path = format!("{}/../fuzz/seeds/decoder/{name}", env!("CARGO_MANIFEST_DIR"));
            let bytes = std::fs::read(&path).unwrap();
            let (limiter, ban) = decode_value(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(encode_value(&limiter, ban), bytes, "{name}");
        }
    }

    /// Each value in the lowest version that holds it: versions 3 and 4 only for a sliding
    /// window with `ANCHOR` or `FLOOR`, whose options byte and origin follow `buckets`; a value
    /// in a higher version than it needs, or options without `BUCKETS`, is refused.
    #[test]
    fn slide_options_take_versions_3_and_4() {
        let ban = Some(Ban::start(T0 + 999, 60_000));
        assert_eq!(encode(&slide_sample(Some(10)))[0], LIMITER_ONLY);
        assert_eq!(encode_value(&slide_sample(Some(10)), ban)[0], WITH_BAN);
        let anchored = slide_options(true, false);
        let bytes = encode(&anchored);
        assert_eq!((bytes[0], bytes[26]), (SLIDE_OPTIONS, OPTION_ANCHOR));
        let Limiter::Slide(s) = &anchored else { panic!() };
        assert_eq!(bytes[27..35], s.origin_ms().unwrap().to_be_bytes());
        assert_eq!(encode_value(&anchored, ban)[0], SLIDE_OPTIONS_WITH_BAN);
        let floored = encode(&slide_options(false, true));
        assert_eq!((floored[0], floored[26]), (SLIDE_OPTIONS, OPTION_FLOOR));
        assert_eq!(floored.len() + 8, bytes.len(), "no origin without ANCHOR");
        // A version-3 payload of a value that needs version 1: options byte 0.
        let plain = encode(&slide_sample(Some(10)));
        let mut upgraded = plain.clone();
        upgraded[0] = SLIDE_OPTIONS;
        upgraded.insert(26, 0);
        assert!(decode(&upgraded).is_err());
        // Unknown option bits, options on an exact log.
        let mut unknown = floored.clone();
        unknown[26] |= 4;
        assert!(decode(&unknown).is_err());
        let mut exact = encode(&slide_sample(None));
        exact[0] = SLIDE_OPTIONS;
        exact.insert(26, OPTION_FLOOR);
        assert!(decode(&exact).is_err());
        // An origin after the last update is refused.
        let mut late = bytes.clone();
        late[27..35].copy_from_slice(&(T0 + 2000).to_be_bytes());
        assert!(decode(&late).is_err());
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

    /// A value some calls left behind: one of every algorithm and mode (`kind`), driven by
    /// `calls` (ms after the previous call, cost) from [`T0`]; `None` if no call was admitted.
    fn driven(kind: u8, size: u64, calls: &[(i64, u64)]) -> Option<Limiter> {
        use crate::{
            algorithms::gcra, algorithms::leaky, algorithms::lease, algorithms::period,
            algorithms::slide,
        };
        let mut now = T0;
        let mut last: Option<Limiter> = None;
        for &(dt, cost) in calls {
            now += dt;
            let next = match (kind, &last) {
                (0 | 1, l) => {
                    let p = TokenParams::new(size, 3, 700, kind == 1).ok()?;
                    let s = match l {
                        Some(Limiter::Token(s)) => Some(s),
                        _ => None,
                    };
                    evaluate(s, &p, now, cost).next.map(Limiter::Token)
                }
                (2 | 3, l) => {
                    let align = (kind == 3).then_some(-3_600_000);
                    let p = period::PeriodParams::new(size, 1000, align).ok()?;
                    let s = match l {
                        Some(Limiter::Period(s)) => Some(s),
                        _ => None,
                    };
                    period::evaluate(s, &p, now, cost).next.map(Limiter::Period)
                }
                (4..=8, l) => {
                    let buckets = (kind != 4).then_some(4);
                    let p = slide::SlideParams::new(size, 1000, buckets, 100).ok()?;
                    let p = p.with_options(kind == 6 || kind == 8, kind == 7 || kind == 8).ok()?;
                    let s = match l {
                        Some(Limiter::Slide(s)) => Some(s),
                        _ => None,
                    };
                    slide::evaluate(s, &p, now, cost).next.map(Limiter::Slide)
                }
                (9 | 10, l) => {
                    let mode = if kind == 9 {
                        leaky::LeakMode::Delay(1)
                    } else {
                        leaky::LeakMode::NoDelay
                    };
                    let p = leaky::LeakyParams::new(size, 3, 700, mode).ok()?;
                    let s = match l {
                        Some(Limiter::Leaky(s)) => Some(s),
                        _ => None,
                    };
                    leaky::evaluate(s, &p, now, cost).next.map(Limiter::Leaky)
                }
                (11, l) => {
                    let p = gcra::GcraParams::new(size, 30, 60).ok()?;
                    let s = match l {
                        Some(Limiter::Gcra(s)) => Some(s),
                        _ => None,
                    };
                    gcra::evaluate(s, &p, now, cost).next.map(Limiter::Gcra)
                }
                (_, l) => {
                    let p = lease::LeaseParams::new(size, 1500, 1000).ok()?;
                    let s = match l {
                        Some(Limiter::Lease(s)) => Some(s),
                        _ => None,
                    };
                    let id = (cost % 2 == 0).then_some(b"worker".as_slice());
                    lease::acquire(s, &p, now, id, true).next.map(Limiter::Lease)
                }
            };
            if next.is_some() {
                last = next;
            }
        }
        last
    }

    /// `RL.CHARGE count` on a limiter at its last update, for the algorithms taking debt.
    fn charged(limiter: Limiter, count: u64) -> Limiter {
        use crate::algorithms::limiter::Variant;
        use crate::algorithms::state::Charged;
        fn on<V: Variant>(s: &V, count: u64) -> Option<Limiter> {
            match s.charge(s.updated_ms(), count) {
                Charged::To(next) => Some(next.into_limiter()),
                _ => None,
            }
        }
        let next = match &limiter {
            Limiter::Token(s) => on(s, count),
            Limiter::Gcra(s) => on(s, count),
            Limiter::Leaky(s) => on(s, count),
            Limiter::Period(s) => on(s, count),
            _ => None,
        };
        next.unwrap_or(limiter)
    }

    /// Any value a key can hold: a [`driven`] limiter, maybe charged into debt, under a ban or
    /// not (never on leases).
    fn arb_value() -> impl Strategy<Value = (Limiter, Option<Ban>)> {
        let calls = proptest::collection::vec((0i64..900, 1u64..4), 1..12);
        let ban = proptest::option::of((0i64..2000, 1u64..100_000, any::<bool>()));
        let debt = proptest::option::of(1u64..40);
        (0u8..13, 3u64..20, calls, ban, debt).prop_filter_map(
            "no call admitted",
            |(k, n, c, ban, debt)| {
                let limiter = driven(k, n, &c)?;
                let limiter = debt.map_or(limiter.clone(), |d| charged(limiter, d));
                let ban = ban.filter(|_| !matches!(limiter, Limiter::Lease(_))).map(
                    |(since, duration, limiter_fresh)| Ban {
                        limiter_fresh,
                        ..Ban::start(limiter.updated_ms() + since, duration)
                    },
                );
                Some((limiter, ban))
            },
        )
    }

    proptest! {
        /// Every value round-trips, in the version [`version_for`] chose; that version holds
        /// it and no lower one could (the oldest encoding, so the oldest release that reads
        /// it); every higher version that could hold it is refused by the decoder (one value,
        /// one encoding); and only a sliding window's `ANCHOR`/`FLOOR` needs more than
        /// 0.1.0's versions 1 and 2.
        #[test]
        fn each_value_takes_the_oldest_version_that_holds_it((limiter, ban) in arb_value()) {
            let bytes = encode_value(&limiter, ban);
            let chosen = bytes[0];
            prop_assert_eq!(chosen, version_for(&limiter, ban));
            prop_assert_eq!(decode_value(&bytes), Ok((limiter.clone(), ban)));
            prop_assert_eq!(encode_in(&limiter, ban, chosen), Some(bytes.clone()));
            for older in LIMITER_ONLY..chosen {
                prop_assert_eq!(encode_in(&limiter, ban, older), None, "version {}", older);
            }
            for newer in chosen + 1..=FORMAT_VERSION {
                if let Some(other) = encode_in(&limiter, ban, newer) {
                    prop_assert!(decode_value(&other).is_err(), "version {}", newer);
                }
            }
            prop_assert_eq!(carries_options(chosen), has_slide_options(&limiter));
            prop_assert_eq!(chosen >= IN_DEBT, limiter.in_debt());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(l) = decode(&bytes) {
                prop_assert_eq!(l.validate(), Ok(()));
            }
        }

        #[test]
        fn bit_flips_are_refused_or_valid(which in 0usize..12, bit in 0usize..(8 * 80)) {
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
