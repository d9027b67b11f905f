//! The versioned binary encoding of a stored limiter, used for RDB (and so `DUMP`/`RESTORE`,
//! replication full syncs, `DEBUG RELOAD`), the AOF rewrite (`RL.RESTORE key <payload>`) and
//! `DEBUG DIGEST`.
//!
//! Layout: one byte format version ([`FORMAT_VERSION`]), one byte algorithm tag, then the
//! algorithm's fields as 8-byte big-endian integers (variable-length parts prefixed by their
//! count). Decoding checks the length exactly and validates every field, so a corrupt or
//! unknown payload is refused with an error, never accepted or crashed on.

use super::limiter::{CorruptState, Limiter};
use super::token::{Refill, TokenBucket};

/// The encoding this build writes. Older versions it can still read are listed in
/// [`decode`].
pub const FORMAT_VERSION: u8 = 1;

const TAG_TOKEN: u8 = 1;

/// Appends fixed-width fields to a buffer.
#[derive(Default)]
pub struct Writer(Vec<u8>);

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
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(CorruptState("payload truncated"))?;
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
    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<(), CorruptState> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(CorruptState("trailing bytes after payload"))
        }
    }
}

/// Encodes a limiter in the current format.
pub fn encode(limiter: &Limiter) -> Vec<u8> {
    let mut w = Writer::default();
    w.u8(FORMAT_VERSION);
    match limiter {
        Limiter::Token(b) => {
            w.u8(TAG_TOKEN);
            encode_token(&mut w, b);
        }
    }
    w.into_bytes()
}

/// Decodes and validates a payload written by [`encode`] (any supported format version).
pub fn decode(bytes: &[u8]) -> Result<Limiter, CorruptState> {
    let mut r = Reader::new(bytes);
    let version = r.u8()?;
    if version != FORMAT_VERSION {
        return Err(CorruptState("unknown encoding version"));
    }
    let limiter = match r.u8()? {
        TAG_TOKEN => Limiter::Token(decode_token(&mut r)?),
        _ => return Err(CorruptState("unknown algorithm tag")),
    };
    r.finish()?;
    limiter.validate()?;
    Ok(limiter)
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
        1 => Refill::Step {
            origin_ms: r.i64()?,
        },
        _ => return Err(CorruptState("unknown token refill mode")),
    };
    let updated_ms = r.i64()?;
    Ok(TokenBucket {
        capacity,
        rate,
        period_ms,
        tokens,
        refill,
        updated_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::token::{evaluate, TokenParams};
    use proptest::prelude::*;

    fn sample() -> Limiter {
        let p = TokenParams::new(10, 3, 7, false).unwrap();
        Limiter::Token(evaluate(None, &p, 1_700_000_000_000, 4).next.unwrap())
    }

    #[test]
    fn round_trips() {
        let l = sample();
        assert_eq!(decode(&encode(&l)), Ok(l));
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
        fn bit_flips_are_refused_or_valid(bit in 0usize..(8 * 59)) {
            let mut bytes = encode(&sample());
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
