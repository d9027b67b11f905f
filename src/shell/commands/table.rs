//! The command table: the `extern "C"` entry point of every command the server calls
//! (`specs` registers them), and the frame they share (`dispatch`): the arguments as byte
//! slices (no copies), the handler of the command's family (`limit`, `leases`, `inspect`,
//! `policy`, `top`), the error reply, the `INFO` counters. A handler parses its request (core
//! grammar), sends one that must wait to the waiting room (`features::wait`), has
//! `execution::limiting` or `execution::leases` judge and apply it, and replies. Limited
//! calls, dry runs, zero-cost calls and peeks store, expire and propagate nothing.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::shell::commands::{inspect, leases, limit, policy, top};
use crate::shell::execution::call::{arguments, Call, CommandError, MAX_ARGS};
use crate::shell::execution::limiting::MAX_ALL_ARGS;
use crate::shell::features::stats::{self, Counted, Tally};
use crate::shell::server::api::api;
use crate::shell::server::reply::{self};
use ratelimit_core::grammar::arity::check_most;
type Handler = fn(&Call) -> Result<Counted, CommandError>;

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
    let result = match check_most(argv.len(), N) {
        Err(e) => Err(CommandError::Arg(e)),
        Ok(()) => {
            // The command's name (argument 0) is known: it stays empty.
            let mut buffer: [&[u8]; N] = [&[]; N];
            if let (Some(slots), Some(strings)) = (buffer.get_mut(1..), argv.get(1..)) {
                for (slot, s) in slots.iter_mut().zip(strings) {
                    *slot = api.arg_bytes(s);
                }
            }
            let args = buffer.get(..argv.len()).unwrap_or(&[]);
            handler(&Call { api, ctx, name, argv, args, from_client: true, not_after_ms: None })
        }
    };
    match result {
        Ok(outcome) => stats::record(tally, outcome),
        Err(e) => {
            stats::record(tally, Counted::Error);
            reply::error(api, ctx, &e.render(name));
        }
    }
    raw::REDISMODULE_OK as c_int
}

pub(super) extern "C" fn rl_all(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> c_int {
    if let Some(api) = api() {
        if api.is_keys_position_request(ctx) {
            limit::all_key_positions(api, ctx, arguments(argv, argc));
            return raw::REDISMODULE_OK as c_int;
        }
    }
    // The argument buffer sized to the call: a few keys fit the small one, whose setting up
    // costs a fifth of the largest's.
    if argc <= SMALL_ALL_ARGS as c_int {
        dispatch::<SMALL_ALL_ARGS>(ctx, argv, argc, c"rl.all", Tally::All, limit::all)
    } else {
        dispatch::<MAX_ALL_ARGS>(ctx, argv, argc, c"rl.all", Tally::All, limit::all)
    }
}

/// The argument buffer of an `RL.ALL` call with a few keys (up to six `TOKEN`/`PERIOD`
/// groups without options).
const SMALL_ALL_ARGS: usize = 32;

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

command!(rl_token, c"rl.token", Tally::Token, limit::token);
command!(rl_period, c"rl.period", Tally::Period, limit::period);
command!(rl_slide, c"rl.slide", Tally::Slide, limit::slide);
command!(rl_leaky, c"rl.leaky", Tally::Leaky, limit::leaky);
command!(cl_throttle, c"cl.throttle", Tally::Throttle, limit::throttle);
command!(rl_refund, c"rl.refund", Tally::Refund, limit::refund);
command!(rl_charge, c"rl.charge", Tally::Charge, limit::charge);
command!(rl_acquire, c"rl.acquire", Tally::Acquire, leases::acquire);
command!(rl_release, c"rl.release", Tally::Release, leases::release);
command!(rl_peek, c"rl.peek", Tally::Peek, inspect::peek);
command!(rl_info, c"rl.info", Tally::Info, inspect::info);
command!(rl_restore, c"rl.restore", Tally::Restore, inspect::restore);
command!(rl_top, c"rl.top", Tally::Top, top::command);
command!(rl_hit, c"rl.hit", Tally::Hit, policy::hit);

/// Most arguments a valid `RL.POLICY SET` can have: `RL.POLICY SET name`, a group of at most
/// 9, `BAN d CLEAR`, `SHADOW`, `FOR key` (or `CANDIDATE`).
const MAX_POLICY_ARGS: usize = 3 + 9 + 3 + 1 + 2;

/// `RL.POLICY`'s entry point, registered for every subcommand: the core tells them apart
/// (`policy::command`).
pub(super) extern "C" fn rl_policy(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> c_int {
    dispatch::<MAX_POLICY_ARGS>(ctx, argv, argc, c"rl.policy", Tally::Policy, policy::command)
}
