//! The limiting commands' frames, from parsed arguments to reply: `RL.TOKEN`, `RL.PERIOD`,
//! `RL.SLIDE`, `RL.LEAKY`, `CL.THROTTLE` (with `WAIT`, through the waiting room), `RL.ALL`
//! (its `POLICY` groups resolved in the policy table), `RL.REFUND` and `RL.CHARGE`. Each
//! request is judged and applied by `execution::limiting`; limited calls, dry runs and
//! zero-cost calls store, expire and propagate nothing.

use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::execution::limiting;
use crate::shell::features::stats::{Counted, Tally};
use crate::shell::features::wait::{self, Origin};
use crate::shell::features::{policies, top};
use crate::shell::server::api::Api;
use crate::shell::server::config::slide_log_max;
use crate::shell::server::reply;
use ratelimit_core::grammar::arity;
use ratelimit_core::grammar::request::{AllRequest, Command, PerKey, RefundRequest, Request};
use ratelimit_core::steps::judge::AllVerdict;
/// The flow of every limiting command: parse (core) → judge and apply (`execution::limiting`) → wake
/// the key's waiters if it changed → reply. With `WAIT`, a client that can block goes to the
/// waiting room instead.
pub fn limit(call: &Call, command: Command) -> Result<Counted, CommandError> {
    let mut request = Request::parse_call(command, call.args, slide_log_max())?;
    call.check_deadline(request.deadline_ms)?;
    request.wait_ms = call.wait_within_deadline(request.wait_ms, request.deadline_ms);
    if request.wait_ms.is_some() && wait::can_block(call) {
        return wait::limit_or_block(call, request, Origin::Command(tally_of(command)));
    }
    if request.at_most {
        return limit_at_most(call, &request);
    }
    let judged = limiting::judge_and_apply(call, &request, limiting::JudgedBy::Command)?;
    if judged.changed {
        wait::key_changed(call);
    }
    reply::integers(call.api, call.ctx, &judged.verdict.reply);
    if judged.verdict.allowed {
        return Ok(Counted::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Counted::Limited)
}

/// The `INFO` counter of a limiting command.
fn tally_of(command: Command) -> Tally {
    match command {
        Command::Token => Tally::Token,
        Command::Period => Tally::Period,
        Command::Slide => Tally::Slide,
        Command::Leaky => Tally::Leaky,
        Command::Throttle => Tally::Throttle,
    }
}

/// A limiting command with `ATMOST n`: takes what is left, up to `n` (`execution::limiting`), and
/// replies with the five integers and the permits it took.
#[cold]
#[inline(never)]
pub fn limit_at_most(call: &Call, request: &Request) -> Result<Counted, CommandError> {
    let (judged, taken) = limiting::judge_at_most_and_apply(call, request)?;
    if judged.changed {
        wait::key_changed(call);
    }
    let [allowed, limit, remaining, retry_after, reset_after] = judged.verdict.reply;
    let taken = i64::try_from(taken).unwrap_or(i64::MAX);
    reply::integers(
        call.api,
        call.ctx,
        &[allowed, limit, remaining, retry_after, reset_after, taken],
    );
    if judged.verdict.allowed {
        return Ok(Counted::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Counted::Limited)
}

/// `RL.ALL numkeys key [key ...] limit [limit ...] [DRYRUN] [AT ms]`: all or nothing
/// (`execution::limiting`); a limit may be `POLICY name [COST n]` (`features::policies`); every changed key's
/// waiters are judged again.
pub fn all(call: &Call) -> Result<Counted, CommandError> {
    let mut all = AllRequest::new();
    // The groups judged under a policy, by key (counted in the policy's counters).
    let mut by_policy: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    all.parse_call_into(call.args, slide_log_max(), &mut |name, key| {
        let found = policies::limit_for(name, key);
        if found.is_some() {
            by_policy.push((name.to_vec(), key.to_vec()));
        }
        found
    })?;
    call.check_deadline(all.deadline_ms)?;
    let mut verdict = AllVerdict::new();
    let touched = limiting::judge_all_and_apply(call, &all, &mut verdict)?;
    let names = call.argv.get(2..).unwrap_or(&[]);
    for (i, name) in names.iter().take(all.key_count).enumerate() {
        if touched & (1 << i) != 0 {
            wait::key_named_changed(call.api, call.ctx, *name);
        }
    }
    reply::all(call.api, call.ctx, &verdict.head, &verdict.details);
    if !by_policy.is_empty() {
        record_policy_groups(call, &all, &verdict, &by_policy);
    }
    if verdict.allowed {
        return Ok(Counted::Admitted);
    }
    if !all.dry_run {
        all_refused(call, &all, &verdict.details);
    }
    Ok(Counted::Limited)
}

/// Counts each `RL.ALL` group judged under a policy in the policy's counters, by its key's
/// answer and the call's.
#[cold]
#[inline(never)]
pub fn record_policy_groups(
    call: &Call,
    all: &AllRequest,
    verdict: &AllVerdict,
    by_policy: &[(Vec<u8>, Vec<u8>)],
) {
    let keys = call.args.get(2..).unwrap_or(&[]);
    for (name, key) in by_policy {
        let index = keys.iter().take(all.key_count).position(|k| *k == key.as_slice());
        if let Some(detail) = index.and_then(|i| verdict.details.get(i)) {
            policies::record_all_group(name, key, detail, verdict.allowed);
        }
    }
}

/// Counts a refused `RL.ALL` in `RL.TOP`: each key whose own limit refused, once.
#[cold]
#[inline(never)]
pub fn all_refused(call: &Call, all: &AllRequest, details: &PerKey<[i64; 5]>) {
    let now = call.clock_ms();
    let keys = call.args.get(2..).unwrap_or(&[]);
    for (key, detail) in keys.iter().zip(details.iter()).take(all.key_count) {
        if detail.first() == Some(&0) {
            top::refused(key, b"", now);
        }
    }
}

/// Answers a key-position request for `RL.ALL` (`COMMAND GETKEYS`, cluster routing): the
/// `numkeys` arguments after `numkeys`, as many as there are.
pub fn all_key_positions(api: &Api, ctx: *mut RedisModuleCtx, args: &[*mut RedisModuleString]) {
    let count = args
        .get(1)
        .and_then(|n| AllRequest::key_count(api.arg_bytes(n)).ok())
        .unwrap_or(0)
        .min(args.len().saturating_sub(2));
    let flags = (raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE) as c_int;
    for position in 2..2 + count {
        let position = c_int::try_from(position).unwrap_or(c_int::MAX);
        api.key_at(ctx, position, flags);
    }
}

pub fn token(call: &Call) -> Result<Counted, CommandError> {
    limit(call, Command::Token)
}

pub fn period(call: &Call) -> Result<Counted, CommandError> {
    limit(call, Command::Period)
}

pub fn slide(call: &Call) -> Result<Counted, CommandError> {
    limit(call, Command::Slide)
}

pub fn leaky(call: &Call) -> Result<Counted, CommandError> {
    limit(call, Command::Leaky)
}

pub fn throttle(call: &Call) -> Result<Counted, CommandError> {
    limit(call, Command::Throttle)
}

/// `RL.REFUND key count [AT ms]`: gives permits back (`execution::limiting`); the key's waiters are
/// judged again when something was given back.
pub fn refund(call: &Call) -> Result<Counted, CommandError> {
    let request = RefundRequest::parse_call(arity::REFUND, call.args)?;
    let (values, changed) = limiting::refund_and_apply(call, &request)?;
    if changed {
        wait::key_changed(call);
    }
    match values {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Counted::Answered)
}

/// `RL.CHARGE key count [AT ms]`: bills an overrun past the limit as a debt (`execution::limiting`).
/// A charge only takes permits, so no waiter can pass because of it.
pub fn charge(call: &Call) -> Result<Counted, CommandError> {
    let request = RefundRequest::parse_call(arity::CHARGE, call.args)?;
    match limiting::charge_and_apply(call, &request)? {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Counted::Answered)
}
