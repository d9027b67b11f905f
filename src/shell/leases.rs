//! `RL.ACQUIRE key limit lease [ID id] [WAIT timeout] [DRYRUN] [AT ms]` and
//! `RL.RELEASE key id [AT ms]`: concurrency limits with leases that lapse by themselves. The
//! rules live in `ratelimit_core::lease` / `lease_key`; this is the thin frame: parse, open,
//! judge, apply, propagate (always with the lease's `ID` and `AT`, so replicas and AOF
//! replay hold the same ids and continue the same sequence), wake waiters, reply.

use std::os::raw::{c_char, c_longlong};

use super::commands::{apply, Call, CommandError, MAX_ARGS};
use super::config::lease_max;
use super::key::{Contents, Key, Mode};
use super::reply;
use super::stats::Outcome;
use super::values::Slot;
use super::wait;
use ratelimit_core::judge::KeyError;
use ratelimit_core::lease_key::{acquire_key, release_key, AcquireVerdict, ReleaseChange};
use ratelimit_core::request::{AcquireRequest, ReleaseRequest};

/// `RL.ACQUIRE`.
pub fn acquire(call: &Call) -> Result<Outcome, CommandError> {
    let request = AcquireRequest::parse(call.args.get(2..).unwrap_or(&[]), lease_max())?;
    if request.wait_ms.is_some() && wait::can_block(call) {
        return wait::acquire_or_block(call, request);
    }
    let (verdict, _) = acquire_and_apply(call, &request)?;
    reply::lease(call.api, call.ctx, &verdict.reply, verdict.id.as_deref());
    Ok(if verdict.allowed { Outcome::Admitted } else { Outcome::Limited })
}

fn held(key: &mut Key) -> Result<Option<Slot<'_>>, CommandError> {
    match key.contents() {
        Contents::Foreign(held) => Err(KeyError::Foreign(held).into()),
        Contents::Empty => Ok(None),
        Contents::Limiter(slot) => Ok(Some(slot)),
    }
}

/// Opens the key, acquires (core) at `AT` or the server clock read after opening, applies,
/// propagates as `RL.ACQUIRE key limit lease ID <id> AT <ms>` and wakes waiters. Returns the
/// verdict and the instant used.
pub(super) fn acquire_and_apply(
    call: &Call,
    request: &AcquireRequest,
) -> Result<(AcquireVerdict, i64), CommandError> {
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut verdict = acquire_key(held(&mut key)?.as_mut(), request, now)?;
    let changed = verdict.changed();
    apply(
        &mut key,
        std::mem::replace(&mut verdict.change, ratelimit_core::judge::Change::Unchanged),
    )?;
    drop(key);
    if changed {
        if let Some(id) = verdict.id.as_deref() {
            replicate_acquire(call, id, now);
        }
        call.notify_changed();
        wait::key_changed(call);
    }
    Ok((verdict, now))
}

fn replicate_acquire(call: &Call, id: &[u8], now: i64) {
    let ([_, key, limit, lease, ..], Some(replicate)) = (call.argv, Some(call.api.replicate))
    else {
        return;
    };
    unsafe {
        replicate(
            call.ctx,
            c"rl.acquire".as_ptr(),
            c"ssscbcl".as_ptr(),
            *key,
            *limit,
            *lease,
            c"ID".as_ptr(),
            id.as_ptr().cast::<c_char>(),
            id.len(),
            c"AT".as_ptr(),
            now as c_longlong,
        );
    }
}

/// `RL.RELEASE`: `1` and the lease is gone (the key deleted with its last lease), or `0`.
pub fn release(call: &Call) -> Result<Outcome, CommandError> {
    let request = ReleaseRequest::parse(call.args.get(2..).unwrap_or(&[]))?;
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let change = release_key(held(&mut key)?.as_mut(), &request, now)?;
    match change {
        ReleaseChange::Unchanged => {}
        ReleaseChange::Updated { expire_at_ms } => key.changed(expire_at_ms, true),
        ReleaseChange::Deleted => key.delete(),
    }
    drop(key);
    if change.released() {
        call.replicate_at::<{ MAX_ARGS + 1 }>(request.at_ms.is_some(), now);
        call.notify_changed();
        wait::key_changed(call);
    }
    unsafe { (call.api.reply_with_long_long)(call.ctx, i64::from(change.released())) };
    Ok(Outcome::Answered)
}
