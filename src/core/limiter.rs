//! The stored limiter: one value per key, whatever the algorithm.

use std::fmt;

use super::token::TokenBucket;

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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every allocation-size class counts toward memory per key (SPEC §5): the whole value
    /// must fit jemalloc's 64-byte class.
    #[test]
    fn limiter_fits_in_64_bytes() {
        assert!(std::mem::size_of::<Limiter>() <= 64, "{}", std::mem::size_of::<Limiter>());
    }
}
