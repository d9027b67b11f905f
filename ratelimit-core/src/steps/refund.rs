//! `RL.REFUND key count`: gives permits back to the limiter a key holds, under its stored
//! parameters at `now'`, never beyond a fresh limiter (see each algorithm's `refund`). Works
//! for every algorithm; a refund never changes a ban, and a key under a ban in force is never
//! deleted by one.

use crate::algorithms::ban::Ban;
use crate::algorithms::limiter::{Limiter, Variant};
use crate::algorithms::state::Refunded;
use crate::steps::judge::{dry_answer, KeyError, Standing};
use crate::store::held::Held;

/// What `RL.REFUND` did to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundChange {
    /// Nothing was given back (nothing live, or already as full as a fresh limiter).
    Unchanged,
    /// Permits given back in place; the key now expires at `expire_at_ms` (earlier).
    Updated { expire_at_ms: i64 },
    /// Back in its initial state: delete the key.
    Deleted,
}

/// The answer to `RL.REFUND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundVerdict {
    /// What a `DRYRUN COST 1` request with the stored parameters gets right after the refund
    /// (a fresh limiter's answer when it is back in its initial state); `None` (nil) when the
    /// key holds nothing live.
    pub reply: Option<[i64; 5]>,
    pub change: RefundChange,
}

/// `RL.REFUND key count` at `now_ms` on what the key holds; a key holding live leases answers
/// like a missing one (nil, unchanged). Prefer [`try_refund_key`], which refuses it.
pub fn refund_key<H: Held>(held: Option<&mut H>, count: u64, now_ms: i64) -> RefundVerdict {
    try_refund_key(held, count, now_ms)
        .unwrap_or(RefundVerdict { reply: None, change: RefundChange::Unchanged })
}

/// `RL.REFUND key count` at `now_ms` on what the key holds, or
/// [`KeyError::NotRefundable`] (nothing changed) when it holds live leases — they are given
/// back by `RL.RELEASE`. Leases past their last expiry count as a missing key (nil).
pub fn try_refund_key<H: Held>(
    held: Option<&mut H>,
    count: u64,
    now_ms: i64,
) -> Result<RefundVerdict, KeyError> {
    let Some(packed) = held else {
        return Ok(RefundVerdict { reply: None, change: RefundChange::Unchanged });
    };
    let ban = packed.ban();
    let refusal = packed.view(|limiter| {
        let leases = matches!(limiter, Limiter::Lease(_));
        (leases && Standing::of(limiter, ban, now_ms).live())
            .then(|| KeyError::NotRefundable { held: limiter.algorithm() })
    });
    if let Some(error) = refusal {
        return Err(error);
    }
    let (verdict, ban_after) = packed.update(|limiter| {
        let standing = Standing::of(limiter, ban, now_ms);
        match limiter {
            Limiter::Token(s) => refund_state(s, standing, ban, count, now_ms),
            Limiter::Period(s) => refund_state(s, standing, ban, count, now_ms),
            Limiter::Slide(s) => refund_state(s, standing, ban, count, now_ms),
            Limiter::Leaky(s) => refund_state(s, standing, ban, count, now_ms),
            Limiter::Gcra(s) => refund_state(s, standing, ban, count, now_ms),
            // Lapsed leases (live ones were refused above): nothing to give back.
            Limiter::Lease(_) => {
                (RefundVerdict { reply: None, change: RefundChange::Unchanged }, ban)
            }
        }
    });
    if ban_after != ban {
        packed.set_ban(ban_after);
    }
    Ok(verdict)
}

fn refund_state<V: Variant>(
    state: &mut V,
    standing: Standing,
    ban: Option<Ban>,
    count: u64,
    now_ms: i64,
) -> (RefundVerdict, Option<Ban>) {
    let answer =
        |state: &V, standing: Standing| Some(dry_answer(state, standing, now_ms, 1).to_reply());
    let unchanged = |reply| (RefundVerdict { reply, change: RefundChange::Unchanged }, ban);
    if !standing.counts {
        // Nothing to give back; a ban in force still answers.
        return unchanged(standing.live().then(|| answer(state, standing)).flatten());
    }
    match (state.refund(now_ms, count), standing.ban) {
        (Refunded::Nothing, _) => unchanged(answer(state, standing)),
        (Refunded::Fresh, None) => {
            let fresh = Standing { counts: false, ban: None };
            (RefundVerdict { reply: answer(state, fresh), change: RefundChange::Deleted }, ban)
        }
        // Back to its initial state under a ban in force: the key lives on for the ban.
        (Refunded::Fresh, Some(b)) => {
            let b = Ban { limiter_fresh: true, ..b };
            let after = Standing { counts: false, ban: Some(b) };
            let change = RefundChange::Updated { expire_at_ms: b.until_ms };
            (RefundVerdict { reply: answer(state, after), change }, Some(b))
        }
        (Refunded::To(next), in_force) => {
            *state = next;
            let until = in_force.map_or(i64::MIN, |b| b.until_ms);
            let change = RefundChange::Updated { expire_at_ms: state.reset_at_ms().max(until) };
            let after = Standing { counts: true, ban: in_force };
            (RefundVerdict { reply: answer(state, after), change }, ban)
        }
    }
}

#[cfg(test)]
#[path = "refund_tests.rs"]
mod tests;
