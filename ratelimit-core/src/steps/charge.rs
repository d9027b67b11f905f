//! `RL.CHARGE key count`: takes permits from the limiter a key holds *whatever its limit*,
//! under its stored parameters at `now'` — the other half of settling a reservation
//! (`RL.REFUND` gives back what was not used; `RL.CHARGE` bills an overrun). Past the limit
//! the limiter is in debt: it refuses every request until the debt is paid back at its refill
//! rate (see each algorithm's `charge`). Token buckets, GCRA, leaky buckets and fixed windows
//! take debt; sliding windows and leases do not ([`KeyError::NoDebt`]).
//!
//! Like a refund, a charge acts only on a limiter that is live: a missing or expired key (or
//! one refunded back to its initial state during a ban) has no stored parameters to charge
//! under, so nothing is created (nil). A charge never changes a ban.

use crate::algorithms::ban::Ban;
use crate::algorithms::limiter::{Limiter, Variant};
use crate::algorithms::state::Charged;
use crate::steps::judge::{dry_answer, KeyError, Standing};
use crate::store::held::Held;

/// What `RL.CHARGE` did to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeChange {
    /// Nothing was charged (nothing live).
    Unchanged,
    /// Permits taken in place; the key now expires at `expire_at_ms` (later: when the
    /// limiter is back in its initial state, its debt paid).
    Updated { expire_at_ms: i64 },
}

/// The answer to `RL.CHARGE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChargeVerdict {
    /// What a `DRYRUN COST 1` request with the stored parameters gets right after the charge;
    /// `None` (nil) when the key holds nothing live.
    pub reply: Option<[i64; 5]>,
    pub change: ChargeChange,
}

/// `RL.CHARGE key count` at `now_ms` on what the key holds. Errors (nothing changed):
/// [`KeyError::NoDebt`] for a live limiter of an algorithm that takes no debt,
/// [`KeyError::DebtTooLarge`] for a charge beyond the bounds of a debt
/// ([`crate::algorithms::state::debt_fits`]).
pub fn try_charge_key<H: Held>(
    held: Option<&mut H>,
    count: u64,
    now_ms: i64,
) -> Result<ChargeVerdict, KeyError> {
    let unchanged = ChargeVerdict { reply: None, change: ChargeChange::Unchanged };
    let Some(packed) = held else {
        return Ok(unchanged);
    };
    let ban = packed.ban();
    packed.update(|limiter| {
        let standing = Standing::of(limiter, ban, now_ms);
        match limiter {
            Limiter::Token(s) => charge_state(s, standing, count, now_ms),
            Limiter::Period(s) => charge_state(s, standing, count, now_ms),
            Limiter::Leaky(s) => charge_state(s, standing, count, now_ms),
            Limiter::Gcra(s) => charge_state(s, standing, count, now_ms),
            Limiter::Slide(_) | Limiter::Lease(_) if standing.live() => {
                Err(KeyError::NoDebt { held: limiter.algorithm() })
            }
            Limiter::Slide(_) | Limiter::Lease(_) => Ok(unchanged),
        }
    })
}

fn charge_state<V: Variant>(
    state: &mut V,
    standing: Standing,
    count: u64,
    now_ms: i64,
) -> Result<ChargeVerdict, KeyError> {
    let answer =
        |state: &V, standing: Standing| Some(dry_answer(state, standing, now_ms, 1).to_reply());
    if !standing.counts {
        // Nothing to charge under; a ban in force still answers.
        let reply = standing.live().then(|| answer(state, standing)).flatten();
        return Ok(ChargeVerdict { reply, change: ChargeChange::Unchanged });
    }
    match state.charge(now_ms, count) {
        Charged::NoDebt => Err(KeyError::NoDebt { held: V::ALGORITHM }),
        Charged::TooLarge => Err(KeyError::DebtTooLarge),
        Charged::To(next) => {
            *state = next;
            let until = standing.ban.map_or(i64::MIN, |b: Ban| b.until_ms);
            let change = ChargeChange::Updated { expire_at_ms: state.reset_at_ms().max(until) };
            Ok(ChargeVerdict { reply: answer(state, standing), change })
        }
    }
}

#[cfg(test)]
#[path = "charge_tests.rs"]
mod tests;
