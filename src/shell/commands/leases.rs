//! The lease commands' frames: `RL.ACQUIRE` (with `WAIT`, through the waiting room) and
//! `RL.RELEASE`, judged and applied by `execution::leases`.

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::features::stats::Counted;
use crate::shell::server::config::lease_max;
use crate::shell::server::reply::{self};
use crate::shell::{execution::leases, features::top, features::wait};
use ratelimit_core::grammar::request::{AcquireRequest, ReleaseRequest};
/// `RL.ACQUIRE key limit lease [ID id] [WAIT timeout] [DRYRUN] [AT ms]` (`execution::leases`; with
/// `WAIT`, the waiting room).
pub fn acquire(call: &Call) -> Result<Counted, CommandError> {
    let mut request = AcquireRequest::parse_call(call.args, lease_max())?;
    call.check_deadline(request.deadline_ms)?;
    request.wait_ms = call.wait_within_deadline(request.wait_ms, request.deadline_ms);
    if request.wait_ms.is_some() && wait::can_block(call) {
        return wait::acquire_or_block(call, request);
    }
    let judged = leases::acquire_and_apply(call, &request)?;
    if judged.changed {
        wait::key_changed(call);
    }
    let verdict = judged.verdict;
    reply::lease(call.api, call.ctx, &verdict.reply, verdict.id.as_deref());
    if verdict.allowed {
        return Ok(Counted::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Counted::Limited)
}

/// `RL.RELEASE key id [AT ms]`: `1` and the lease is gone (its key's waiters judged again), or
/// `0`.
pub fn release(call: &Call) -> Result<Counted, CommandError> {
    let request = ReleaseRequest::parse_call(call.args)?;
    let released = leases::release_and_apply(call, &request)?;
    if released {
        wait::key_changed(call);
    }
    reply::long(call.api, call.ctx, i64::from(released));
    Ok(Counted::Answered)
}
