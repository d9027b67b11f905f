//! Where a call's propagation goes, and so which form it needs.
//!
//! Replicas and AOF replay must judge a call at the master's instant, so a call is normally
//! propagated rewritten: its arguments plus `AT <ms>` (`execution::call`). That rewrite is a third
//! of what a call costs. When propagation provably goes nowhere — no AOF, this server is a
//! master with no replica and no replication backlog — nothing will ever re-judge the call,
//! and the call is propagated **verbatim** instead (`RM_ReplicateVerbatim`: still counted as a
//! change, so `save` points and `rdb_changes_since_last_save` work as before; propagation is
//! never skipped).
//!
//! The proof has two parts:
//! - per call, from the context flags: AOF off, not a replica, not loading, and a call made by
//!   a client (not a timer);
//! - the **alone** flag: set only after `INFO replication` showed `role:master`,
//!   `connected_slaves:0` and `repl_backlog_active:0`, checked at most once a second while the
//!   flag is down; put down on module load and by every server event that can give the
//!   stream a consumer: a fork (a replica's snapshot or an AOF rewrite starts from a fork, and
//!   from then on the stream after the fork is what it replays), a replication role change,
//!   a replica change and loading.
//!
//! While an atomic slot migration exports a slot (`server::slots`), the target replays what is
//! propagated: no call is verbatim until the export ends, whatever the flag says. (The export's
//! snapshot is a fork, which puts the flag down, and no call rechecks it while the export runs.)
//!
//! A replica that connects while the flag is up first gets a backlog (verbatim calls go into
//! it) and then a snapshot taken by a fork; the fork puts the flag down before any call after
//! the snapshot is propagated, and no replica can ask the backlog for anything before its
//! snapshot. So every call a replica or an AOF replays was propagated rewritten.
//!
//! The forms themselves are performed here too ([`verbatim`], [`restore`], [`delete`],
//! [`acquire`], [`rewritten`] with the cached [`at_string`]); `execution::call` picks one.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use crate::shell::server::api::Api;
use crate::shell::server::datatype::RESTORE_COMMAND;

/// The alone flag (see the module docs). Only the main thread writes it.
static ALONE: AtomicBool = AtomicBool::new(false);
/// When the flag was last put down or checked (unix ms; `i64::MIN`: never).
static LAST_DOUBT_MS: AtomicI64 = AtomicI64::new(i64::MIN);

/// How long the flag stays down after a doubt before `INFO replication` is read again.
const RECHECK_MS: i64 = 1000;

/// Context flags under which propagation may have a consumer.
const CONSUMED: u32 = raw::REDISMODULE_CTX_FLAGS_AOF
    | raw::REDISMODULE_CTX_FLAGS_SLAVE
    | raw::REDISMODULE_CTX_FLAGS_LOADING
    | raw::REDISMODULE_CTX_FLAGS_ASYNC_LOADING;

/// Whether this call's propagation provably goes nowhere (so verbatim is exact). `now_ms` is
/// the call's clock reading, used to pace the `INFO` check.
pub fn goes_nowhere(api: &Api, ctx: *mut RedisModuleCtx, now_ms: i64) -> bool {
    // SAFETY: `ctx` is the live context the server passed to this call or callback.
    let flags = unsafe { (api.get_context_flags)(ctx) } as u32;
    if flags & CONSUMED != 0 {
        return false;
    }
    // An atomic slot migration streams what is propagated for the slot to its target.
    if crate::shell::server::slots::exporting_any() {
        return false;
    }
    if ALONE.load(Ordering::Relaxed) {
        return true;
    }
    let last = LAST_DOUBT_MS.load(Ordering::Relaxed);
    if last != i64::MIN && now_ms.saturating_sub(last) < RECHECK_MS && now_ms >= last {
        return false;
    }
    LAST_DOUBT_MS.store(now_ms, Ordering::Relaxed);
    let alone = replication_is_alone(api, ctx);
    ALONE.store(alone, Ordering::Relaxed);
    alone
}

/// Whether verbatim propagation is on now (`INFO ratelimit`).
pub fn verbatim_now() -> bool {
    ALONE.load(Ordering::Relaxed)
}

/// Puts the flag down (the next check waits a second from now).
fn doubt(api: &Api) {
    ALONE.store(false, Ordering::Relaxed);
    let now = api.now_ms();
    LAST_DOUBT_MS.store(now, Ordering::Relaxed);
}

/// `INFO replication`: a master with no replica and no backlog.
fn replication_is_alone(api: &Api, ctx: *mut RedisModuleCtx) -> bool {
    // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
    // freed once at the end; a field is a NUL-terminated string it owns.
    let info = unsafe { (api.get_server_info)(ctx, c"replication".as_ptr()) };
    if info.is_null() {
        return false;
    }
    // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
    // freed once at the end; a field is a NUL-terminated string it owns.
    let role = unsafe { (api.server_info_get_field_c)(info, c"role".as_ptr()) };
    let is_master =
        // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
        // freed once at the end; a field is a NUL-terminated string it owns.
        !role.is_null() && unsafe { std::ffi::CStr::from_ptr(role) }.to_bytes() == b"master";
    let zero = |field: &std::ffi::CStr| {
        let mut err: c_int = 0;
        // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
        // freed once at the end; a field is a NUL-terminated string it owns.
        let value = unsafe { (api.server_info_get_field_signed)(info, field.as_ptr(), &mut err) };
        err == 0 && value == 0
    };
    let alone = is_master && zero(c"connected_slaves") && zero(c"repl_backlog_active");
    // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
    // freed once at the end; a field is a NUL-terminated string it owns.
    unsafe { (api.free_server_info)(ctx, info) };
    alone
}

/// A server event that can give the stream a consumer (`init` names them) is a doubt.
fn on_server_event(_ctx: *mut RedisModuleCtx, _subevent: u64) {
    if let Some(api) = super::api::api() {
        doubt(api);
    }
}

/// Subscribes to the events that can give propagation a consumer; puts the flag down. Fails
/// (so the module refuses to load) if the server refuses a subscription: without the events
/// verbatim propagation would not be provably safe.
pub fn init(api: &Api, ctx: *mut RedisModuleCtx) -> Result<(), String> {
    doubt(api);
    let events = [
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
    ];
    for id in events {
        super::events::on(api, ctx, id, on_server_event)?;
    }
    Ok(())
}

/// Propagates the running command as it came (`RM_ReplicateVerbatim`).
#[inline]
pub fn verbatim(api: &Api, ctx: *mut RedisModuleCtx) {
    // SAFETY: `ctx` is the live context of the command being propagated.
    unsafe { (api.replicate_verbatim)(ctx) };
}

/// Propagates the state a call left in `key`: `RL.RESTORE key payload` (the key's limiter and
/// ban in the codec's format; `RL.RESTORE` sets the same expiry).
#[inline]
pub fn restore(api: &Api, ctx: *mut RedisModuleCtx, key: *mut RedisModuleString, payload: &[u8]) {
    // SAFETY: `ctx` is the live context of the command being propagated; the format and the
    // strings are live for the call, and the server copies the `payload.len()` bytes given.
    unsafe {
        (api.replicate)(
            ctx,
            RESTORE_COMMAND.as_ptr(),
            c"sb".as_ptr(),
            key,
            payload.as_ptr().cast::<c_char>(),
            payload.len(),
        )
    };
}

/// Propagates the deletion of `key`: `DEL key`.
#[inline]
pub fn delete(api: &Api, ctx: *mut RedisModuleCtx, key: *mut RedisModuleString) {
    // SAFETY: `ctx` is the live context of the command being propagated; the format and the
    // string are live for the call.
    unsafe { (api.replicate)(ctx, c"DEL".as_ptr(), c"s".as_ptr(), key) };
}

/// Propagates an admitted `RL.ACQUIRE key limit lease` with its lease's `ID id` and `AT now`.
pub fn acquire(
    api: &Api,
    ctx: *mut RedisModuleCtx,
    [key, limit, lease]: [*mut RedisModuleString; 3],
    id: &[u8],
    now_ms: i64,
) {
    // SAFETY: `ctx` is the live context of the command being propagated; the format and the
    // strings are live for the call, and the server copies the `id.len()` bytes given.
    unsafe {
        (api.replicate)(
            ctx,
            c"rl.acquire".as_ptr(),
            c"ssscbcl".as_ptr(),
            key,
            limit,
            lease,
            c"ID".as_ptr(),
            id.as_ptr().cast::<c_char>(),
            id.len(),
            c"AT".as_ptr(),
            now_ms as c_longlong,
        );
    }
}

/// Propagates the command `name` with the arguments `args` (after the name).
#[inline]
pub fn rewritten(
    api: &Api,
    ctx: *mut RedisModuleCtx,
    name: &CStr,
    args: &[*mut RedisModuleString],
) {
    // SAFETY: `ctx` is the live context of the command being propagated; the name and format
    // are NUL-terminated, the `args.len()` strings at `args` live for the call (the server
    // copies what it keeps).
    unsafe { (api.replicate)(ctx, name.as_ptr(), c"v".as_ptr(), args.as_ptr(), args.len()) };
}

thread_local! {
    /// The `AT` value of the current millisecond, as a module string kept across calls (calls
    /// in the same ms propagate the same string; `RM_Replicate` copies what it is given).
    static AT_NOW: Cell<(i64, *mut RedisModuleString)> =
        const { Cell::new((i64::MIN, std::ptr::null_mut())) };
}

/// The string for `now_ms`, created once per ms (with no context, so no call frees it; the
/// previous ms' string is freed when the next one is made). Live until the next ms' call.
pub fn at_string(api: &Api, now_ms: i64) -> *mut RedisModuleString {
    AT_NOW.with(|cell| {
        let (ms, string) = cell.get();
        if ms == now_ms && !string.is_null() {
            return string;
        }
        // SAFETY: a NULL context makes a string the module owns (freed below when replaced); no
        // other argument is a pointer.
        let fresh = unsafe {
            (api.create_string_from_long_long)(std::ptr::null_mut(), now_ms as c_longlong)
        };
        if !string.is_null() {
            // SAFETY: `string` is the previous cached `AT` string, made with a NULL context by
            // this function and held nowhere else now: freed once.
            unsafe { (api.free_string)(std::ptr::null_mut(), string) };
        }
        cell.set((now_ms, fresh));
        fresh
    })
}
