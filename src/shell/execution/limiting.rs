//! The limiting room: a limiting request judged on its key (or keys) at one instant, the change
//! applied, propagated and announced — everything but the reply and the waiters, which the
//! command table (`commands::table`) and the waiting room (`features::wait`) handle above this room.
//! `RL.TOKEN`, `RL.PERIOD`, `RL.SLIDE`, `RL.LEAKY`, `CL.THROTTLE` (`judge_and_apply`; with
//! `ATMOST n`, `judge_at_most_and_apply`),
//! `RL.ALL` (`judge_all_and_apply`), `RL.REFUND` (`refund_and_apply`) and `RL.CHARGE`
//! (`charge_and_apply`).

use redis_module::raw::RedisModuleString;

use crate::shell::execution::call::{apply, held, Applied, Call, CommandError};
use crate::shell::server::key::{Contents, Key, Mode};
use crate::shell::server::values::Slot;
use ratelimit_core::grammar::arity;
use ratelimit_core::grammar::request::{AllRequest, PerKey, RefundRequest, Request};
use ratelimit_core::steps::at_most::resolve_at_most;
use ratelimit_core::steps::charge::{try_charge_key, ChargeChange};
use ratelimit_core::steps::judge::{
    judge_all_into, judge_key, AllVerdict, Change, KeyError, Verdict,
};
use ratelimit_core::steps::refund::{try_refund_key, RefundChange};
use ratelimit_core::store::codec;
use ratelimit_core::store::held::Held;

/// Most arguments a valid `RL.ALL` can have: name, `numkeys`, 16 keys, 16 groups of at most 9
/// (`SLIDE l w COST n BUCKETS b ANCHOR FLOOR`), `DRYRUN`, `AT ms`, `DEADLINE unix-ms`.
pub const MAX_ALL_ARGS: usize = 2 + 16 + 16 * 9 + 3 + 2;

/// Opens the call's key, judges the request (core) at its `AT` or the server clock, applies
/// the change and propagates it.
///
/// The clock is read after the key is opened: opening may delete a key whose expiry Redis
/// has seen pass, and the instant judged must never be earlier than that (or the deleted
/// limiter would count as fresh a moment too soon — which matters to a timer that judges
/// waiters one after another).
///
/// `by` says whose limit the request carries (see [`JudgedBy`]).
#[inline]
pub fn judge_and_apply(
    call: &Call,
    request: &Request,
    by: JudgedBy,
) -> Result<Applied<Verdict>, CommandError> {
    judge_and_apply_as(call, request, by, false).map(|(judged, _)| judged)
}

/// Whose limit a limiting request carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum JudgedBy {
    /// The caller's own (`RL.TOKEN`, `RL.PERIOD`, …): a key holding a live limiter of another
    /// algorithm is a `WRONGTYPE` error, and a call with `AT` reaches replicas verbatim.
    Command,
    /// A server-held policy's (`RL.HIT`): a key holding a live limiter of another algorithm
    /// (the policy changed algorithm) starts over under the policy's algorithm; and the call
    /// itself is never propagated where anything consumes it (replicas and the AOF need not
    /// hold the policy): the state it left is.
    Policy,
}

/// [`judge_and_apply`] for an `ATMOST n` request: resolved (core) into the plain request of
/// what is left, up to `n`, on the key as it stands, then judged and applied as that one.
/// Returns also the permits it took (0 when refused).
#[cold]
#[inline(never)]
pub fn judge_at_most_and_apply(
    call: &Call,
    request: &Request,
) -> Result<(Applied<Verdict>, u64), CommandError> {
    judge_and_apply_as(call, request, JudgedBy::Command, true)
}

/// The body of [`judge_and_apply`] (`at_most`: of [`judge_at_most_and_apply`]).
#[inline(always)]
fn judge_and_apply_as(
    call: &Call,
    request: &Request,
    by: JudgedBy,
    at_most: bool,
) -> Result<(Applied<Verdict>, u64), CommandError> {
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut held = held(&mut key)?;
    let resolved;
    let request = if at_most {
        resolved = resolve_at_most(held.as_mut(), request, now)?;
        &resolved
    } else {
        request
    };
    let mut verdict = match judge_key(held.as_mut(), request, now) {
        Err(KeyError::WrongAlgorithm { .. }) if by == JudgedBy::Policy => {
            held = None;
            judge_key::<Slot>(None, request, now)?
        }
        judged => judged?,
    };
    let changed = verdict.changed();
    // How replicas and the AOF get a change: the call verbatim when that is exact (its own
    // `AT`, or no consumer at all); else the state it left (`RL.RESTORE key payload`), encoded
    // here while the judged limiter is at hand; a deleted key (`FRESH COST 0`) has no state to
    // send: `DEL key`, which every release (and a replica of the previous one) replays.
    let propagation = if !changed {
        None
    } else if call.verbatim_is_exact(by == JudgedBy::Command && request.at_ms.is_some(), now) {
        Some(Propagation::Verbatim)
    } else {
        Some(match (&verdict.change, &held) {
            (Change::Created { limiter, .. }, _) => {
                Propagation::State(codec::encode_value(limiter, None))
            }
            (Change::Deleted, _) => Propagation::Deleted,
            (_, Some(slot)) => {
                Propagation::State(slot.view(|limiter| codec::encode_value(limiter, slot.ban())))
            }
            (_, None) => Propagation::Verbatim,
        })
    };
    apply(&mut key, std::mem::replace(&mut verdict.change, Change::Unchanged))?;
    drop(key);
    if let Some(propagation) = propagation {
        match propagation {
            Propagation::Verbatim => call.replicate_verbatim(),
            Propagation::State(payload) => call.replicate_state(&payload),
            Propagation::Deleted => call.replicate_delete(),
        }
        call.notify_changed();
    }
    let taken = if verdict.allowed { request.cost } else { 0 };
    Ok((Applied { verdict, now, changed }, taken))
}

/// How a changed key reaches replicas and the AOF (see [`judge_and_apply`]).
enum Propagation {
    /// The call as the client sent it.
    Verbatim,
    /// `RL.RESTORE key payload`: the state the call left.
    State(Vec<u8>),
    /// `DEL key`: the call deleted the key.
    Deleted,
}

/// `RL.ALL`: every key opened once and judged once at one instant (core), all keys updated or
/// none, one propagation; no heap allocation unless a `POLICY` group's states must be
/// propagated. Fills `verdict` (new) and returns the keys it changed, as a bit set (bit `i`:
/// the `i`-th key).
pub fn judge_all_and_apply(
    call: &Call,
    all: &AllRequest,
    verdict: &mut AllVerdict,
) -> Result<u32, CommandError> {
    let now = all.at_ms.unwrap_or_else(|| call.clock_ms());
    let names = arity::arguments(call.argv, 2..2 + all.key_count)?;
    let (touched, states) = judge_all_keys(call, all, names, now, verdict)?;
    for (i, name) in names.iter().enumerate() {
        if touched & (1 << i) != 0 {
            call.notify_changed_key(*name);
        }
    }
    match states {
        _ if touched == 0 => {}
        Some(states) => {
            for (name, state) in names.iter().zip(&states) {
                if let Some(payload) = state {
                    call.replicate_state_of(*name, payload);
                }
            }
        }
        None if all.by_policy => {
            call.replicate_verbatim();
        }
        None => call.replicate_at::<{ MAX_ALL_ARGS + 1 }>(all.at_ms.is_some(), now),
    }
    Ok(touched)
}

/// The keys of [`judge_all_and_apply`], opened, judged and updated (or not), and closed again
/// on return (in place: they are kept inline, about 2 KB). Returns the keys changed (bit set)
/// and, when a `POLICY` group's call must reach replicas and the AOF as states, the state each
/// changed key was left in.
#[allow(clippy::type_complexity)]
fn judge_all_keys(
    call: &Call,
    all: &AllRequest,
    names: &[*mut RedisModuleString],
    now: i64,
    verdict: &mut AllVerdict,
) -> Result<(u32, Option<Vec<Option<Vec<u8>>>>), CommandError> {
    let mut keys: PerKey<Key> = PerKey::new();
    for name in names {
        let _ = keys.push(Key::open(call.api, call.ctx, *name, Mode::Write));
    }
    let mut slots: PerKey<Option<Slot>> = PerKey::new();
    for key in keys.iter_mut() {
        let _ = slots.push(match key.contents() {
            Contents::Foreign(held) => return Err(KeyError::Foreign(held).into()),
            Contents::Empty => None,
            Contents::Limiter(slot) => Some(slot),
        });
    }
    judge_all_into(slots.iter_mut().map(Option::as_mut), all, now, verdict)?;
    // With a `POLICY` group, replicas and the AOF get the state each changed key was left in
    // (`RL.RESTORE`), encoded here while the judged limiters are at hand — unless nothing
    // consumes propagation.
    let states =
        (all.by_policy && verdict.changed() && !call.verbatim_is_exact(false, now)).then(|| {
            verdict
                .changes
                .iter()
                .zip(slots.iter())
                .map(|(change, slot)| match (change, slot) {
                    (Change::Unchanged | Change::Deleted, _) => None,
                    (Change::Created { limiter, .. }, _) => {
                        Some(codec::encode_value(limiter, None))
                    }
                    (Change::Updated { .. }, Some(slot)) => {
                        Some(slot.view(|limiter| codec::encode_value(limiter, slot.ban())))
                    }
                    (Change::Updated { .. }, None) => None,
                })
                .collect()
        });
    let mut touched = 0u32;
    for (i, (key, change)) in keys.iter_mut().zip(verdict.changes.drain()).enumerate() {
        if !matches!(change, Change::Unchanged) {
            touched |= 1 << i;
        }
        apply(key, change)?;
    }
    Ok((touched, states))
}

/// `RL.REFUND`: gives permits back (core), moves the expiry earlier or deletes a limiter back
/// in its initial state, propagates with `AT` when something changed. Returns the reply
/// values (`None`: nothing to refund) and whether the key changed.
pub fn refund_and_apply(
    call: &Call,
    request: &RefundRequest,
) -> Result<(Option<[i64; 5]>, bool), CommandError> {
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut key = call.open(Mode::Write)?;
    let verdict = try_refund_key(held(&mut key)?.as_mut(), request.count, now)?;
    match verdict.change {
        RefundChange::Unchanged => {}
        RefundChange::Updated { expire_at_ms } => key.changed(expire_at_ms, true),
        RefundChange::Deleted => key.delete(),
    }
    drop(key);
    let changed = verdict.change != RefundChange::Unchanged;
    if changed {
        call.replicate_at::<{ crate::shell::execution::call::MAX_ARGS + 1 }>(
            request.at_ms.is_some(),
            now,
        );
        call.notify_changed();
    }
    Ok((verdict.reply, changed))
}

/// `RL.CHARGE`: takes permits whatever the limit (core), moves the expiry to when the debt is
/// paid, propagates with `AT` like `RL.REFUND` when something changed. Returns the reply
/// values (`None`: nothing live to charge).
pub fn charge_and_apply(
    call: &Call,
    request: &RefundRequest,
) -> Result<Option<[i64; 5]>, CommandError> {
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut key = call.open(Mode::Write)?;
    let verdict = try_charge_key(held(&mut key)?.as_mut(), request.count, now)?;
    if let ChargeChange::Updated { expire_at_ms } = verdict.change {
        key.changed(expire_at_ms, false);
        drop(key);
        call.replicate_at::<{ crate::shell::execution::call::MAX_ARGS + 1 }>(
            request.at_ms.is_some(),
            now,
        );
        call.notify_changed();
    }
    Ok(verdict.reply)
}
