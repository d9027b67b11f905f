//! The command table: each command's frame, from the arguments Redis passes to the reply. It
//! parses the request (core), sends a request that must wait to the waiting room (`features::wait`),
//! has the limiting or lease room (`execution::limiting`, `execution::leases`) judge and apply it, tells the
//! waiting room when a key may have gained room, and replies. Dispatch runs one way:
//! this table → the waiting room → the limiting and lease rooms → the call room (`execution::call`).
//! Limited calls, dry runs, zero-cost calls and peeks store, expire and propagate nothing.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::shell::commands::policy;
use crate::shell::execution::call::{arguments, held, Call, CommandError, MAX_ARGS};
use crate::shell::execution::limiting::{self, MAX_ALL_ARGS};
use crate::shell::features::stats::{self, Outcome, Tally};
use crate::shell::server::api::{api, Api};
use crate::shell::server::config::{lease_max, slide_log_max};
use crate::shell::server::key::{Contents, Mode};
use crate::shell::server::reply::{self, FieldValue};
use crate::shell::{execution::leases, features::policies, features::top, features::wait};
use ratelimit_core::grammar::error::ArgError;
use ratelimit_core::grammar::request::{
    AcquireRequest, AllRequest, Command, PerKey, RefundRequest, ReleaseRequest, Request,
};
use ratelimit_core::steps::inspect::{describe_key, peek_key};
use ratelimit_core::steps::judge::{value_expiry, AllVerdict, KeyError};
use ratelimit_core::store::codec;

type Handler = fn(&Call) -> Result<Outcome, CommandError>;

/// The common frame of every command: argument access, error replies, counters.
fn dispatch<const N: usize>(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
    name: &'static CStr,
    tally: Tally,
    handler: Handler,
) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    let argv = arguments(argv, argc);
    let result = if argv.len() > N {
        Err(CommandError::Arg(ArgError::Invalid("syntax error: too many arguments".into())))
    } else {
        // The command's name (argument 0) is known: it stays empty.
        let mut buffer: [&[u8]; N] = [&[]; N];
        if let (Some(slots), Some(strings)) = (buffer.get_mut(1..), argv.get(1..)) {
            for (slot, s) in slots.iter_mut().zip(strings) {
                *slot = api.arg_bytes(s);
            }
        }
        let args = buffer.get(..argv.len()).unwrap_or(&[]);
        handler(&Call { api, ctx, name, argv, args, from_client: true })
    };
    match result {
        Ok(outcome) => stats::record(tally, outcome),
        Err(e) => {
            stats::record(tally, Outcome::Error);
            reply::error(api, ctx, &e.render(name));
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// The flow of every limiting command: parse (core) → judge and apply (`execution::limiting`) → wake
/// the key's waiters if it changed → reply. With `WAIT`, a client that can block goes to the
/// waiting room instead.
fn limit(call: &Call, command: Command) -> Result<Outcome, CommandError> {
    let mut request = Request::parse(command, call.args.get(2..).unwrap_or(&[]), slide_log_max())?;
    call.check_deadline(request.deadline_ms)?;
    request.wait_ms = call.wait_within_deadline(request.wait_ms, request.deadline_ms);
    if request.wait_ms.is_some() && wait::can_block(call) {
        return wait::limit_or_block(call, request);
    }
    if request.at_most {
        return limit_at_most(call, &request);
    }
    let judged = limiting::judge_and_apply::<false>(call, &request)?;
    if judged.changed {
        wait::key_changed(call);
    }
    reply::integers(call.api, call.ctx, &judged.verdict.reply);
    if judged.verdict.allowed {
        return Ok(Outcome::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Outcome::Limited)
}

/// A limiting command with `ATMOST n`: takes what is left, up to `n` (`execution::limiting`), and
/// replies with the five integers and the permits it took.
#[cold]
#[inline(never)]
fn limit_at_most(call: &Call, request: &Request) -> Result<Outcome, CommandError> {
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
        return Ok(Outcome::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Outcome::Limited)
}

/// `RL.ALL numkeys key [key ...] limit [limit ...] [DRYRUN] [AT ms]`: all or nothing
/// (`execution::limiting`); a limit may be `POLICY name [COST n]` (`features::policies`); every changed key's
/// waiters are judged again.
fn all(call: &Call) -> Result<Outcome, CommandError> {
    let args = call.args.get(1..).unwrap_or(&[]);
    let mut all = AllRequest::new();
    // The groups judged under a policy, by key (counted in the policy's counters).
    let mut by_policy: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    all.parse_into(args, slide_log_max(), &mut |name, key| {
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
            wait::key_named_changed(call, *name);
        }
    }
    reply::all(call.api, call.ctx, &verdict.head, &verdict.details);
    if !by_policy.is_empty() {
        record_policy_groups(call, &all, &verdict, &by_policy);
    }
    if verdict.allowed {
        return Ok(Outcome::Admitted);
    }
    if !all.dry_run {
        all_refused(call, &all, &verdict.details);
    }
    Ok(Outcome::Limited)
}

/// Counts each `RL.ALL` group judged under a policy in the policy's counters, by its key's
/// answer and the call's.
#[cold]
#[inline(never)]
fn record_policy_groups(
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
fn all_refused(call: &Call, all: &AllRequest, details: &PerKey<[i64; 5]>) {
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
fn all_key_positions(api: &Api, ctx: *mut RedisModuleCtx, args: &[*mut RedisModuleString]) {
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

fn token(call: &Call) -> Result<Outcome, CommandError> {
    limit(call, Command::Token)
}

fn period(call: &Call) -> Result<Outcome, CommandError> {
    limit(call, Command::Period)
}

fn slide(call: &Call) -> Result<Outcome, CommandError> {
    limit(call, Command::Slide)
}

fn leaky(call: &Call) -> Result<Outcome, CommandError> {
    limit(call, Command::Leaky)
}

fn throttle(call: &Call) -> Result<Outcome, CommandError> {
    limit(call, Command::Throttle)
}

/// `RL.REFUND key count [AT ms]`: gives permits back (`execution::limiting`); the key's waiters are
/// judged again when something was given back.
fn refund(call: &Call) -> Result<Outcome, CommandError> {
    let request = RefundRequest::parse(call.args.get(2..).unwrap_or(&[]))?;
    let (values, changed) = limiting::refund_and_apply(call, &request)?;
    if changed {
        wait::key_changed(call);
    }
    match values {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Outcome::Answered)
}

/// `RL.CHARGE key count [AT ms]`: bills an overrun past the limit as a debt (`execution::limiting`).
/// A charge only takes permits, so no waiter can pass because of it.
fn charge(call: &Call) -> Result<Outcome, CommandError> {
    let request = RefundRequest::parse(call.args.get(2..).unwrap_or(&[]))?;
    match limiting::charge_and_apply(call, &request)? {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Outcome::Answered)
}

/// `RL.ACQUIRE key limit lease [ID id] [WAIT timeout] [DRYRUN] [AT ms]` (`execution::leases`; with
/// `WAIT`, the waiting room).
fn acquire(call: &Call) -> Result<Outcome, CommandError> {
    let mut request = AcquireRequest::parse(call.args.get(2..).unwrap_or(&[]), lease_max())?;
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
        return Ok(Outcome::Admitted);
    }
    if !request.dry_run {
        top::call_refused(call, b"", request.at_ms.is_some(), judged.now);
    }
    Ok(Outcome::Limited)
}

/// `RL.RELEASE key id [AT ms]`: `1` and the lease is gone (its key's waiters judged again), or
/// `0`.
fn release(call: &Call) -> Result<Outcome, CommandError> {
    let request = ReleaseRequest::parse(call.args.get(2..).unwrap_or(&[]))?;
    let released = leases::release_and_apply(call, &request)?;
    if released {
        wait::key_changed(call);
    }
    reply::long(call.api, call.ctx, i64::from(released));
    Ok(Outcome::Answered)
}

/// `RL.PEEK key`: the reply a `DRYRUN COST 1` request with the stored parameters would get.
fn peek(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let now = call.clock_ms();
    let mut key = call.open(Mode::Read)?;
    let reply = peek_key(held(&mut key)?.as_ref(), now);
    drop(key);
    match reply {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Outcome::Answered)
}

/// `RL.INFO key`: the stored parameters and state, as field/value pairs.
fn info(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let now = call.clock_ms();
    let mut key = call.open(Mode::Read)?;
    let ttl_ms = key.expire_at_ms().map_or(-1, |at| at.saturating_sub(now).max(0));
    let described = describe_key(held(&mut key)?.as_ref(), now);
    drop(key);
    let Some(info) = described else {
        reply::null(call.api, call.ctx);
        return Ok(Outcome::Answered);
    };
    let mut fields = vec![("algorithm", FieldValue::Text(info.algorithm.name()))];
    fields.extend(info.fields.into_iter().map(|(k, v)| (k, FieldValue::Int(v))));
    if let Some(leases) = &info.leases {
        fields.push(("leases", FieldValue::Leases(leases)));
    }
    fields.push(("updated_ms", FieldValue::Int(info.updated_ms)));
    fields.push(("ttl_ms", FieldValue::Int(ttl_ms)));
    // The now-dependent fields, computed at `now_ms` under the stored parameters.
    fields.push(("now_ms", FieldValue::Int(info.now_ms)));
    if let Some(window) = &info.window {
        let used = i64::try_from(window.used).unwrap_or(i64::MAX);
        fields.push(("window_used", FieldValue::Int(used)));
        fields.push(("window_oldest_ms", FieldValue::Int(window.oldest_ms.unwrap_or(-1))));
        if let Some((counts, start_ms)) = &window.buckets {
            fields.push(("window_counts", FieldValue::Counts(counts)));
            fields.push(("window_start_ms", FieldValue::Int(*start_ms)));
        }
    }
    reply::fields(call.api, call.ctx, &fields);
    Ok(Outcome::Answered)
}

/// `RL.RESTORE key payload`: sets a key to an encoded limiter and its ban, if any (what the
/// AOF rewrite emits); the key expires at the limiter's reset instant or the ban's end.
fn restore(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _, payload] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let (limiter, ban) = codec::decode_value(payload)
        .map_err(|e| CommandError::Text(format!("ERR invalid RL.RESTORE payload: {e}")))?;
    let expire_at = value_expiry(&limiter, ban);
    let mut key = call.open(Mode::Write)?;
    if let Contents::Foreign(held) = key.contents() {
        return Err(KeyError::Foreign(held).into());
    }
    key.store(limiter, ban, expire_at).map_err(|e| CommandError::Text(e.into()))?;
    call.replicate_verbatim();
    call.notify_changed();
    drop(key);
    reply::ok(call.api, call.ctx);
    Ok(Outcome::Answered)
}

macro_rules! command {
    ($fn_name:ident, $name:literal, $tally:expr, $handler:path) => {
        pub(super) extern "C" fn $fn_name(
            ctx: *mut RedisModuleCtx,
            argv: *mut *mut RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch::<MAX_ARGS>(ctx, argv, argc, $name, $tally, $handler)
        }
    };
}

pub(super) extern "C" fn rl_all(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> c_int {
    if let Some(api) = api() {
        if api.is_keys_position_request(ctx) {
            all_key_positions(api, ctx, arguments(argv, argc));
            return raw::REDISMODULE_OK as c_int;
        }
    }
    // The argument buffer sized to the call: a few keys fit the small one, whose setting up
    // costs a fifth of the largest's.
    if argc <= SMALL_ALL_ARGS as c_int {
        dispatch::<SMALL_ALL_ARGS>(ctx, argv, argc, c"rl.all", Tally::All, all)
    } else {
        dispatch::<MAX_ALL_ARGS>(ctx, argv, argc, c"rl.all", Tally::All, all)
    }
}

/// The argument buffer of an `RL.ALL` call with a few keys (up to six `TOKEN`/`PERIOD`
/// groups without options).
const SMALL_ALL_ARGS: usize = 32;

command!(rl_token, c"rl.token", Tally::Token, token);
command!(rl_period, c"rl.period", Tally::Period, period);
command!(rl_slide, c"rl.slide", Tally::Slide, slide);
command!(rl_leaky, c"rl.leaky", Tally::Leaky, leaky);
command!(cl_throttle, c"cl.throttle", Tally::Throttle, throttle);
command!(rl_refund, c"rl.refund", Tally::Refund, refund);
command!(rl_charge, c"rl.charge", Tally::Charge, charge);
command!(rl_acquire, c"rl.acquire", Tally::Acquire, acquire);
command!(rl_release, c"rl.release", Tally::Release, release);
command!(rl_peek, c"rl.peek", Tally::Peek, peek);
command!(rl_info, c"rl.info", Tally::Info, info);
command!(rl_restore, c"rl.restore", Tally::Restore, restore);
command!(rl_top, c"rl.top", Tally::Top, top::command);
command!(rl_hit, c"rl.hit", Tally::Hit, policy::hit);

/// Most arguments a valid `RL.POLICY SET` can have: `RL.POLICY SET name`, a group of at most
/// 9, `BAN d CLEAR`, `SHADOW`, `FOR key` (or `CANDIDATE`).
const MAX_POLICY_ARGS: usize = 3 + 9 + 3 + 1 + 2;

macro_rules! subcommand {
    ($fn_name:ident, $handler:path) => {
        pub(super) extern "C" fn $fn_name(
            ctx: *mut RedisModuleCtx,
            argv: *mut *mut RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch::<MAX_POLICY_ARGS>(ctx, argv, argc, c"rl.policy", Tally::Policy, $handler)
        }
    };
}

subcommand!(rl_policy_set, policy::set);
subcommand!(rl_policy_get, policy::get);
subcommand!(rl_policy_del, policy::delete);
subcommand!(rl_policy_list, policy::list);
subcommand!(rl_policy_stats, policy::stats);
subcommand!(rl_policy_resetstat, policy::reset_stats);
subcommand!(rl_policy_promote, policy::promote);
subcommand!(rl_policy_help, policy::help);
