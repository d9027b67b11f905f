//! The stored limiter: one value per key, whatever the algorithm.

use std::fmt;

use super::decision::Decision;
use super::token::{self, Refill, TokenBucket};

/// A decoded limiter that fails validation (corrupt RDB payload, hand-made RESTORE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorruptState(pub &'static str);

impl fmt::Display for CorruptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "corrupt limiter state: {}", self.0)
    }
}

/// What every stored algorithm state can tell about time.
pub trait Stored {
    /// The instant of the last admitted call (absolute unix ms).
    fn updated_ms(&self) -> i64;
    /// The instant the limiter is back in its initial state if nothing else happens; the key
    /// expires then.
    fn reset_at_ms(&self) -> i64;
}

/// The stored state if it is still live at `now_ms`: a limiter whose reset instant has passed
/// is treated exactly like a missing key, whether or not Redis has removed it yet.
pub fn live<S: Stored>(stored: Option<&S>, now_ms: i64) -> Option<&S> {
    stored.filter(|s| s.reset_at_ms() > now_ms)
}

/// The algorithms, by the names users see in errors and `RL.INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Token,
    Period,
    Slide,
    Leaky,
    Gcra,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Token => "token",
            Algorithm::Period => "period",
            Algorithm::Slide => "slide",
            Algorithm::Leaky => "leaky",
            Algorithm::Gcra => "gcra",
        }
    }
}

/// Links an algorithm's stored state to its variant of [`Limiter`].
pub trait Variant: Stored + Sized {
    const ALGORITHM: Algorithm;
    /// This algorithm's state, if `limiter` holds one.
    fn from_limiter(limiter: &Limiter) -> Option<&Self>;
    fn into_limiter(self) -> Limiter;
}

impl Variant for TokenBucket {
    const ALGORITHM: Algorithm = Algorithm::Token;
    fn from_limiter(limiter: &Limiter) -> Option<&Self> {
        match limiter {
            Limiter::Token(b) => Some(b),
        }
    }
    fn into_limiter(self) -> Limiter {
        Limiter::Token(self)
    }
}

/// The value stored in a limiter key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limiter {
    Token(TokenBucket),
}

impl Limiter {
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Limiter::Token(_) => Algorithm::Token,
        }
    }

    pub fn validate(&self) -> Result<(), CorruptState> {
        match self {
            Limiter::Token(b) => b.validate(),
        }
    }

    fn stored(&self) -> &dyn Stored {
        match self {
            Limiter::Token(b) => b,
        }
    }

    pub fn updated_ms(&self) -> i64 {
        self.stored().updated_ms()
    }

    pub fn reset_at_ms(&self) -> i64 {
        self.stored().reset_at_ms()
    }

    /// The reply a `DRYRUN COST 1` request with the stored parameters would get at `now_ms`
    /// (what `RL.PEEK` shows).
    pub fn peek(&self, now_ms: i64) -> Decision {
        match self {
            Limiter::Token(b) => token::evaluate(Some(b), &b.params(), now_ms, 1).decision,
        }
    }

    /// Heap bytes owned beyond the value itself (a sliding log, bucket counters).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Limiter::Token(_) => 0,
        }
    }

    /// The stored parameters and state as `RL.INFO` shows them (after `algorithm`, before
    /// `updated_ms` and `ttl_ms`): parameters under their argument names, durations in ms
    /// with a `_ms` suffix, flags as 0/1.
    pub fn describe(&self) -> Vec<(&'static str, i64)> {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        match self {
            Limiter::Token(b) => {
                let mut fields = vec![
                    ("capacity", int(b.capacity)),
                    ("rate", int(b.rate)),
                    ("period_ms", int(b.period_ms)),
                ];
                match b.refill {
                    Refill::Smooth { fraction } => fields.extend([
                        ("step", 0),
                        ("tokens", int(b.tokens)),
                        ("fraction", int(fraction)),
                    ]),
                    Refill::Step { origin_ms } => fields.extend([
                        ("step", 1),
                        ("tokens", int(b.tokens)),
                        ("origin_ms", origin_ms),
                    ]),
                }
                fields
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every allocation-size class counts toward memory per key (SPEC §5): the whole value
    /// must fit jemalloc's 64-byte class.
    #[test]
    fn limiter_fits_in_64_bytes() {
        assert!(
            std::mem::size_of::<Limiter>() <= 64,
            "{}",
            std::mem::size_of::<Limiter>()
        );
    }
}
