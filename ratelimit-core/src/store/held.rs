//! Where a key's limiter is while a command judges it: packed in its box
//! ([`PackedLimiter`]), or expanded from a value held inline in the key's value word
//! ([`Expanded`], see `inline.rs`). The per-key steps (`judge`, `refund`, `inspect`,
//! `lease_key`) read and change a limiter only through this trait, so they never care which.

use crate::algorithms::ban::Ban;
use crate::algorithms::limiter::Limiter;
use crate::store::packed::PackedLimiter;

/// A limiter held by a key, with the ban it is under.
pub trait Held {
    /// The ban the limiter is under (active or past), if one is stored.
    fn ban(&self) -> Option<Ban>;
    /// Stores `ban` with the limiter (or removes it).
    fn set_ban(&mut self, ban: Option<Ban>);
    /// Runs `f` on the limiter.
    fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R;
    /// Runs `f` on the limiter with write access.
    fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R;
    /// Whether this limiter is a working copy that reaches the key only when its caller writes
    /// it back after a change (an inline value expanded for one command): `RL.ALL` then judges
    /// it in place, as a staged copy of its own, and a refused call leaves the key untouched
    /// because nothing is written back.
    fn detached(&self) -> bool {
        false
    }
}

impl Held for PackedLimiter {
    fn ban(&self) -> Option<Ban> {
        PackedLimiter::ban(self)
    }
    fn set_ban(&mut self, ban: Option<Ban>) {
        PackedLimiter::set_ban(self, ban)
    }
    fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R {
        PackedLimiter::view(self, f)
    }
    fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R {
        PackedLimiter::update(self, f)
    }
}

/// A limiter in its working form (unpacked), with its ban: what an inline value expands to
/// for the length of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub limiter: Limiter,
    pub ban: Option<Ban>,
}

impl Held for Expanded {
    fn ban(&self) -> Option<Ban> {
        self.ban
    }
    fn set_ban(&mut self, ban: Option<Ban>) {
        self.ban = ban;
    }
    fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R {
        f(&self.limiter)
    }
    fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R {
        f(&mut self.limiter)
    }
    fn detached(&self) -> bool {
        true
    }
}
