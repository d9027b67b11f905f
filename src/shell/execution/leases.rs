//! The lease room: `RL.ACQUIRE` and `RL.RELEASE` judged on their key — concurrency limits with
//! leases that lapse by themselves. The rules live in `ratelimit_core::algorithms::lease` / `lease_key`;
//! this is the thin frame below the command table and the waiting room: open, judge, apply,
//! propagate (with the lease's `ID` and `AT`, so replicas and AOF replay hold the same ids and
//! continue the same sequence; verbatim when propagation provably goes nowhere, as for the
//! limiting commands). Replies and waiters are the callers'.

use crate::shell::execution::call::{apply, held, Applied, Call, CommandError, MAX_ARGS};
use crate::shell::server::key::Mode;
use ratelimit_core::grammar::request::{AcquireRequest, ReleaseRequest};
use ratelimit_core::steps::judge::Change;
use ratelimit_core::steps::lease_key::{acquire_key, release_key, AcquireVerdict, ReleaseChange};

/// Opens the key, acquires (core) at `AT` or the server clock read after opening, applies and
/// propagates as `RL.ACQUIRE key limit lease ID <id> AT <ms>` (verbatim when nothing replays it).
pub fn acquire_and_apply(
    call: &Call,
    request: &AcquireRequest,
) -> Result<Applied<AcquireVerdict>, CommandError> {
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut verdict = acquire_key(held(&mut key)?.as_mut(), request, now)?;
    let changed = verdict.changed();
    match std::mem::replace(&mut verdict.change, Change::Unchanged) {
        // Leases have no inline form: no check for one.
        Change::Updated { expire_at_ms, expiry_may_stay } => {
            key.changed_no_inline(expire_at_ms, expiry_may_stay)
        }
        change => apply(&mut key, change)?,
    }
    drop(key);
    if changed {
        if call.verbatim_is_exact(false, now) {
            // Nothing will ever replay it (`server::propagation`): the call as sent.
            call.replicate_verbatim();
        } else if let Some(id) = verdict.id.as_deref() {
            call.replicate_acquire(id, now);
        }
        call.notify_changed();
    }
    Ok(Applied { verdict, now, changed })
}

/// Opens the key and releases the lease (core): `true` and the lease is gone (the key deleted
/// with its last lease; propagated with `AT`), or `false` when no such lease is held.
pub fn release_and_apply(call: &Call, request: &ReleaseRequest) -> Result<bool, CommandError> {
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let change = release_key(held(&mut key)?.as_mut(), request, now)?;
    match change {
        ReleaseChange::Unchanged => {}
        ReleaseChange::Updated { expire_at_ms, expiry_may_stay } => {
            key.changed_no_inline(expire_at_ms, expiry_may_stay)
        }
        ReleaseChange::Deleted => key.delete(),
    }
    drop(key);
    if change.released() {
        call.replicate_at::<{ MAX_ARGS + 1 }>(request.at_ms.is_some(), now);
        call.notify_changed();
    }
    Ok(change.released())
}
