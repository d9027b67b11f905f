//! `WAIT timeout`: fair waiting on the server.
//!
//! A request that must wait blocks its client (`BlockClient`, no Redis timeout) and joins the
//! key's first-come-first-served queue (`ratelimit_core::features::waiters`). One module timer per key
//! fires at the head's retry instant or the earliest deadline, whichever is first; a change
//! that may give room (an admitted call, `RL.REFUND`, `DEL`, expiry) fires it at once. The
//! timer judges the head again exactly as the command would (`limiting::judge_and_apply`,
//! which propagates the admission as the command without `WAIT`, with `AT` = the instant of
//! admission), answers it and moves on to the next head; it answers timed-out waiters with a
//! refused reply. Waiters live in this process' memory: they are answered or dropped, never
//! persisted. Everything here runs on Redis' main thread.
//!
//! In a cluster, a waiter whose key left this node (classic resharding's `MIGRATE`, the end of
//! an atomic slot migration) is answered with the redirect its client would get now
//! (`-ASK`/`-MOVED`), never judged against the missing key; while an atomic slot migration
//! exports its key's slot it is held, unjudged (`server::slots`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis_module::raw::{self, RedisModuleBlockedClient, RedisModuleCtx, RedisModuleString};

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::execution::leases::acquire_and_apply;
use crate::shell::execution::limiting::judge_and_apply;
use crate::shell::features::stats::{self, Counted, Tally};
use crate::shell::features::top;
use crate::shell::server::api::{api, bytes, Api};
use crate::shell::server::key::{Contents, Key, Mode};
use crate::shell::server::reply;
use crate::shell::server::slots::{self, Served};
use ratelimit_core::algorithms::lease::LeaseId;
use ratelimit_core::features::waiters::{WaitQueue, Waiter};
use ratelimit_core::grammar::request::{AcquireRequest, Request};

/// A key, by database and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct KeyId {
    db: c_int,
    name: Vec<u8>,
}

/// A request that waits: a limiting call, or `RL.ACQUIRE`.
#[derive(Debug, Clone)]
enum Pending {
    Limit(Request),
    Acquire(AcquireRequest),
}

/// What judging a pending request gave, and the instant used.
struct PendingVerdict {
    allowed: bool,
    reply: [i64; 5],
    /// `RL.ACQUIRE`'s lease id (nil when refused).
    id: Option<LeaseId>,
    now: i64,
}

impl Pending {
    fn wait_ms(&self) -> Option<u64> {
        match self {
            Pending::Limit(r) => r.wait_ms,
            Pending::Acquire(r) => r.wait_ms,
        }
    }

    fn dry_run(&self) -> bool {
        match self {
            Pending::Limit(r) => r.dry_run,
            Pending::Acquire(r) => r.dry_run,
        }
    }

    fn given_at(&self) -> bool {
        match self {
            Pending::Limit(r) => r.at_ms.is_some(),
            Pending::Acquire(r) => r.at_ms.is_some(),
        }
    }

    fn has_ban(&self) -> bool {
        matches!(self, Pending::Limit(r) if r.ban_ms.is_some())
    }

    /// Judges (and applies, unless `dry`) the request on the call's key; a `BAN` counts only
    /// with `with_ban` (a waiting request's refusals are not final).
    fn judge(
        &self,
        call: &Call,
        origin: Origin,
        dry: bool,
        with_ban: bool,
    ) -> Result<PendingVerdict, CommandError> {
        match self {
            Pending::Limit(r) => {
                let ban_ms = r.ban_ms.filter(|_| with_ban);
                let request = Request { dry_run: dry, ban_ms, ..r.clone() };
                // `RL.HIT`'s waiters are judged as `RL.HIT` is (`execution::limiting`, `BY_POLICY`),
                // with the policy's parameters as they were when the call was made.
                let judged = if origin == Origin::Policy {
                    judge_and_apply::<true>(call, &request)?
                } else {
                    judge_and_apply::<false>(call, &request)?
                };
                let (v, now) = (judged.verdict, judged.now);
                Ok(PendingVerdict { allowed: v.allowed, reply: v.reply, id: None, now })
            }
            Pending::Acquire(r) => {
                let request = AcquireRequest { dry_run: dry, ..r.clone() };
                let judged = acquire_and_apply(call, &request)?;
                let (v, now) = (judged.verdict, judged.now);
                Ok(PendingVerdict { allowed: v.allowed, reply: v.reply, id: v.id, now })
            }
        }
    }

    /// The answer a judged request gets.
    fn answer(&self, judged: PendingVerdict) -> WaiterReply {
        match self {
            Pending::Limit(_) => WaiterReply::Ints(judged.reply),
            Pending::Acquire(_) => WaiterReply::Lease(judged.reply, judged.id),
        }
    }
}

/// Where a waiting request came from, by type: a direct command, counted under its own
/// `INFO` counter, or `RL.HIT` under a policy (judged as `RL.HIT` is, counted in the policy's
/// counters; its held arguments start at the policy's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `RL.TOKEN`, `RL.PERIOD`, `RL.SLIDE`, `RL.LEAKY`, `RL.ACQUIRE` with `WAIT`.
    Command(Tally),
    /// `RL.HIT name key … WAIT t`.
    Policy,
}

impl Origin {
    /// The `INFO` counter the request counts under.
    fn tally(self) -> Tally {
        match self {
            Origin::Command(tally) => tally,
            Origin::Policy => Tally::Hit,
        }
    }

    /// What its refusals count under in `RL.TOP`: the policy's name (the call's first
    /// argument, as the limiting room sees an `RL.HIT`), or nothing for a direct command.
    fn policy_tag(self, first: Option<&[u8]>) -> &[u8] {
        match (self, first) {
            (Origin::Policy, Some(name)) => name,
            _ => b"",
        }
    }
}

/// A blocked request: its client, the request, and its arguments (held until answered).
struct Blocked {
    bc: *mut RedisModuleBlockedClient,
    pending: Pending,
    name: &'static CStr,
    origin: Origin,
    /// The command's arguments, name first, held (`HoldString`) until the waiter is done.
    argv: Vec<*mut RedisModuleString>,
}

/// One key's waiters and its timer.
#[derive(Default)]
struct KeyWaits {
    queue: WaitQueue<Blocked>,
    /// The armed timer and the instant it fires.
    timer: Option<(raw::RedisModuleTimerID, i64)>,
}

#[derive(Default)]
struct Waits {
    keys: HashMap<KeyId, KeyWaits>,
    /// Where each blocked client waits (for disconnections): client → (key, ticket).
    clients: HashMap<usize, (KeyId, u64)>,
    next_ticket: u64,
}

thread_local! {
    /// Redis runs commands, timers and callbacks on its main thread only.
    static WAITS: RefCell<Waits> = RefCell::new(Waits::default());
}

/// Runs `f` on the waits. Never called while another borrow is alive (no Redis API that can
/// call back into this module runs inside `f`); were it ever, `f` is skipped and the default
/// returned rather than aborting the server.
fn with<R: Default>(f: impl FnOnce(&mut Waits) -> R) -> R {
    WAITS.with(|w| {
        w.try_borrow_mut()
            .map(|mut w| {
                let result = f(&mut w);
                KEYS_WAITED_ON.store(w.keys.len(), Ordering::Relaxed);
                result
            })
            .unwrap_or_default()
    })
}

/// How many keys have waiters or a timer (`Waits::keys.len()` after the last change): the
/// common case, none, is one load for every admitted call.
static KEYS_WAITED_ON: AtomicUsize = AtomicUsize::new(0);

fn no_waits() -> bool {
    KEYS_WAITED_ON.load(Ordering::Relaxed) == 0
}

/// What a blocked client is answered with.
enum WaiterReply {
    Ints([i64; 5]),
    Lease([i64; 5], Option<LeaseId>),
    Error(String),
}

/// Whether the calling client can block: not inside `MULTI`/`EXEC` or a script, and not a
/// client Redis forbids to block. Otherwise `WAIT` is ignored, as `BLPOP` does.
pub fn can_block(call: &Call) -> bool {
    // SAFETY: `ctx` is the live context the server passed to this call or callback.
    let flags = unsafe { (call.api.get_context_flags)(call.ctx) };
    let forbid = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
        | raw::REDISMODULE_CTX_FLAGS_REPLICATED
        | raw::REDISMODULE_CTX_FLAGS_LOADING;
    flags & forbid as c_int == 0
}

fn key_id(api: &Api, ctx: *mut RedisModuleCtx, name: *mut RedisModuleString) -> KeyId {
    // SAFETY: `ctx` is the live context the server passed to this call or callback.
    let db = unsafe { (api.get_selected_db)(ctx) };
    // SAFETY: the string is one the server passed for this call (or one the module holds), live
    // while the slice is used.
    KeyId { db, name: unsafe { bytes(api, name) }.to_vec() }
}

/// A limiting request with `WAIT` from a client that can block: answered at once when the key
/// has no waiters and the request is admitted, or can never be; otherwise queued.
pub fn limit_or_block(
    call: &Call,
    request: Request,
    origin: Origin,
) -> Result<Counted, CommandError> {
    answer_or_block(call, Pending::Limit(request), origin)
}

/// `RL.ACQUIRE … WAIT timeout`, as [`limit_or_block`].
pub fn acquire_or_block(call: &Call, request: AcquireRequest) -> Result<Counted, CommandError> {
    answer_or_block(call, Pending::Acquire(request), Origin::Command(Tally::Acquire))
}

fn answer_or_block(call: &Call, pending: Pending, origin: Origin) -> Result<Counted, CommandError> {
    // Most calls meet no waiter anywhere: then nothing is looked up (and nothing copied).
    let queued = !no_waits() && {
        let id = key_id(call.api, call.ctx, call.key()?);
        with(|w| w.keys.get(&id).is_some_and(|k| !k.queue.is_empty()))
    };
    // Never overtake a waiter: with a queue, judge without taking anything (to answer errors
    // and requests that can never be admitted at once). While waiting, a refusal is not final:
    // it starts no ban (only a timeout does).
    let judged = pending.judge(call, origin, queued, false)?;
    if (!queued && judged.allowed) || judged.reply[3] < 0 {
        let (allowed, now) = (judged.allowed, judged.now);
        send(call.api, call.ctx, &pending.answer(judged));
        if allowed {
            return Ok(Counted::Admitted);
        }
        note_refused(call, &pending, origin, now);
        return Ok(Counted::Limited);
    }
    let retry_at = (!queued).then(|| judged.now.saturating_add(judged.reply[3]));
    let id = key_id(call.api, call.ctx, call.key()?);
    let (now, reply) = (judged.now, judged.reply);
    if block(call, id, pending.clone(), origin, now, retry_at) {
        return Ok(Counted::Blocked);
    }
    // Redis would not block this client: answer as without WAIT.
    send(
        call.api,
        call.ctx,
        &pending.answer(PendingVerdict { allowed: false, reply, id: None, now }),
    );
    note_refused(call, &pending, origin, now);
    Ok(Counted::Limited)
}

/// A refusal answered at once (not a dry run) counts in `RL.TOP`.
fn note_refused(call: &Call, pending: &Pending, origin: Origin, now: i64) {
    if !pending.dry_run() {
        let policy = origin.policy_tag(call.args.first().copied());
        top::call_refused(call, policy, pending.given_at(), now);
    }
}

/// Blocks the calling client and queues its request; `false` if Redis would not block it.
fn block(
    call: &Call,
    id: KeyId,
    pending: Pending,
    origin: Origin,
    now: i64,
    retry_at: Option<i64>,
) -> bool {
    let api = call.api;
    let bc =
        // SAFETY: `ctx` is the live context of the call being answered (a command's, or a blocked
        // client's reply callback's); the server copies what it is given.
        unsafe { (api.block_client)(call.ctx, Some(reply_callback), None, Some(free_answer), 0) };
    if bc.is_null() {
        return false;
    }
    // SAFETY: `bc` is the blocked client just made; the callback is a `'static` function.
    unsafe { (api.set_disconnect_callback)(bc, Some(on_disconnect)) };
    let argv: Vec<*mut RedisModuleString> =
        // SAFETY: every `argv` string is live for this call; held, it outlives it until
        // `release_args` frees it.
        call.argv.iter().map(|s| unsafe { (api.hold_string)(ptr::null_mut(), *s) }).collect();
    let deadline_ms = pending
        .wait_ms()
        .filter(|w| *w > 0)
        .map(|w| now.saturating_add(i64::try_from(w).unwrap_or(i64::MAX)));
    let blocked = Blocked { bc, pending, name: call.name, origin, argv };
    let wake = with(|w| {
        w.next_ticket += 1;
        let ticket = w.next_ticket;
        w.clients.insert(bc as usize, (id.clone(), ticket));
        let key = w.keys.entry(id.clone()).or_default();
        key.queue.push(Waiter { ticket, deadline_ms, data: blocked });
        stats::waiting_changed(1);
        key.queue.wake_at(retry_at)
    });
    if let Some(at) = wake {
        arm(api, call.ctx, &id, at, now);
    }
    true
}

/// Makes sure the key's timer fires no later than `at`.
fn arm(api: &Api, ctx: *mut RedisModuleCtx, id: &KeyId, at: i64, now: i64) {
    let stale = with(|w| {
        let key = w.keys.get_mut(id)?;
        match key.timer {
            Some((_, fires)) if fires <= at => None,
            other => {
                key.timer = None;
                Some(other)
            }
        }
    });
    let Some(previous) = stale else {
        return;
    };
    if let Some((timer, _)) = previous {
        stop_timer(api, ctx, timer);
    }
    let delay = at.saturating_sub(now).max(0);
    let data = Box::into_raw(Box::new(id.clone())).cast::<c_void>();
    // SAFETY: `ctx` is a live context; `data` a boxed `KeyId` the timer owns until it fires or is
    // stopped.
    let timer = unsafe { (api.create_timer)(ctx, delay, Some(on_timer), data) };
    with(|w| {
        if let Some(key) = w.keys.get_mut(id) {
            key.timer = Some((timer, now.saturating_add(delay)));
        }
    });
}

/// Stops a key's timer before it fires, and frees the key id it carried.
fn stop_timer(api: &Api, ctx: *mut RedisModuleCtx, timer: raw::RedisModuleTimerID) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: `timer` was created by `arm` with a boxed `KeyId` as its data; a stopped timer
    // hands that data back exactly once, and it is freed here (a fired one freed its own).
    if unsafe { (api.stop_timer)(ctx, timer, &mut data) } == raw::REDISMODULE_OK as c_int
        && !data.is_null()
    {
        // SAFETY: `data` is the boxed `KeyId` `arm` gave the timer; it comes back once (fired, or
        // stopped), and is freed here.
        drop(unsafe { Box::from_raw(data.cast::<KeyId>()) });
    }
}

/// The call's key may have gained room: judge its head waiter at once.
#[inline]
pub fn key_changed(call: &Call) {
    if no_waits() {
        return;
    }
    if let Ok(name) = call.key() {
        key_named_changed(call.api, call.ctx, name);
    }
}

/// As [`key_changed`], for a key given by name.
pub fn key_named_changed(api: &Api, ctx: *mut RedisModuleCtx, name: *mut RedisModuleString) {
    if no_waits() {
        return;
    }
    let id = key_id(api, ctx, name);
    if with(|w| w.keys.contains_key(&id)) {
        let now = api.now_ms();
        arm(api, ctx, &id, now, now);
    }
}

/// The key's timer: answers timed-out waiters, then judges heads until one must wait.
unsafe extern "C" fn on_timer(ctx: *mut RedisModuleCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the boxed `KeyId` `arm` gave the timer; it comes back once (fired, or
    // stopped), and is freed here.
    let id = *unsafe { Box::from_raw(data.cast::<KeyId>()) };
    let Some(api) = api() else {
        return;
    };
    with(|w| {
        if let Some(key) = w.keys.get_mut(&id) {
            key.timer = None;
        }
    });
    // SAFETY: `ctx` is the live context the server passed to this call or callback.
    unsafe { (api.select_db)(ctx, id.db) };
    serve(api, ctx, &id);
}

fn serve(api: &'static Api, ctx: *mut RedisModuleCtx, id: &KeyId) {
    let served = where_served(api, ctx, id);
    if let Served::Elsewhere(error) = served {
        redirect_all(api, ctx, id, &error);
        return;
    }
    let now = api.now_ms();
    let timed_out =
        with(|w| w.keys.get_mut(id).map(|k| k.queue.take_timed_out(now)).unwrap_or_default());
    let may_write = served == Served::Here;
    for waiter in timed_out {
        time_out(api, ctx, waiter, may_write);
    }
    if !may_write {
        hold(api, ctx, id, now);
        return;
    }
    loop {
        // Copy what judging the head needs: no borrow lives across Redis calls.
        let head = with(|w| {
            w.keys.get(id).and_then(|k| k.queue.head()).map(|h| {
                let b = &h.data;
                (h.ticket, b.pending.clone(), b.name, b.origin, b.argv.clone())
            })
        });
        let Some((ticket, pending, name, origin, argv)) = head else {
            with(|w| {
                if w.keys.get(id).is_some_and(|k| k.queue.is_empty() && k.timer.is_none()) {
                    w.keys.remove(id);
                }
            });
            return;
        };
        let call = Call { api, ctx, name, argv: &argv, args: &[], from_client: false };
        let answer = match pending.judge(&call, origin, false, false) {
            Ok(j) if j.allowed || j.reply[3] < 0 => {
                let allowed = j.allowed;
                Some((pending.answer(j), allowed))
            }
            Ok(j) => {
                let (now, retry) = (j.now, j.reply[3]);
                let retry_at = now.saturating_add(retry);
                let wake = with(|w| w.keys.get(id).and_then(|k| k.queue.wake_at(Some(retry_at))));
                if let Some(at) = wake {
                    arm(api, ctx, id, at, now);
                }
                None
            }
            Err(e) => Some((WaiterReply::Error(e.render(name)), false)),
        };
        let Some((answer, admitted)) = answer else {
            return;
        };
        let Some(waiter) = with(|w| w.keys.get_mut(id).and_then(|k| k.queue.pop_head())) else {
            return;
        };
        debug_assert_eq!(waiter.ticket, ticket);
        if admitted {
            stats::wait_admitted();
        }
        finish(api, waiter, answer, if admitted { Counted::Admitted } else { Counted::Limited });
    }
}

/// A waiter whose timeout ran out: the reply a refused call gets now. It lost its turn to
/// earlier waiters even if the algorithm would admit it now; with `BAN`, a refusal by the
/// algorithm starts the ban now — unless the key may not be written (`may_write`: its slot is
/// being exported), when the refusal is answered without a ban.
fn time_out(api: &'static Api, ctx: *mut RedisModuleCtx, waiter: Waiter<Blocked>, may_write: bool) {
    let blocked = &waiter.data;
    let pending = &blocked.pending;
    let call =
        Call { api, ctx, name: blocked.name, argv: &blocked.argv, args: &[], from_client: false };
    let answer = match pending.judge(&call, blocked.origin, true, false) {
        Ok(j) if j.allowed => {
            let [_, limit, remaining, _, reset] = j.reply;
            pending.answer(PendingVerdict {
                allowed: false,
                reply: [0, limit, remaining, 0, reset],
                id: None,
                ..j
            })
        }
        Ok(j) if pending.has_ban() && may_write => {
            match pending.judge(&call, blocked.origin, false, true) {
                Ok(banned) => pending.answer(banned),
                Err(_) => pending.answer(j),
            }
        }
        Ok(j) => pending.answer(j),
        Err(e) => WaiterReply::Error(e.render(blocked.name)),
    };
    stats::wait_timed_out();
    finish(api, waiter, answer, Counted::Limited);
}

/// Where the key of a queue is served: [`slots::served_here`], which opens the key only in
/// cluster mode.
fn where_served(api: &'static Api, ctx: *mut RedisModuleCtx, id: &KeyId) -> Served {
    let Some(key) = with(|w| {
        w.keys.get(id).and_then(|k| k.queue.head()).and_then(|h| h.data.argv.get(1).copied())
    }) else {
        return Served::Here;
    };
    slots::served_here(api, ctx, &id.name, || {
        // SAFETY: a live context; selecting the waiter's database before opening its key.
        unsafe { (api.select_db)(ctx, id.db) };
        let mut open = Key::open(api, ctx, key, Mode::Read);
        !matches!(open.contents(), Contents::Empty)
    })
}

/// The key's slot is being exported: nothing is judged (a judgement may write); the timer
/// is armed for the next deadline only.
fn hold(api: &Api, ctx: *mut RedisModuleCtx, id: &KeyId, now: i64) {
    let next = with(|w| match w.keys.get(id) {
        Some(k) if k.queue.is_empty() && k.timer.is_none() => {
            w.keys.remove(id);
            None
        }
        Some(k) => k.queue.next_deadline(),
        None => None,
    });
    if let Some(at) = next {
        arm(api, ctx, id, at, now);
    }
}

/// The key left this node: every waiter on it gets `error`, the redirect its client would get
/// now (never a judgement against the missing key, which would be a fresh limiter).
fn redirect_all(api: &Api, ctx: *mut RedisModuleCtx, id: &KeyId, error: &str) {
    let (waiters, timer) = with(|w| match w.keys.remove(id) {
        Some(mut k) => {
            let mut all = Vec::new();
            while let Some(waiter) = k.queue.pop_head() {
                all.push(waiter);
            }
            (all, k.timer)
        }
        None => (Vec::new(), None),
    });
    if let Some((timer, _)) = timer {
        stop_timer(api, ctx, timer);
    }
    for waiter in waiters {
        finish(api, waiter, WaiterReply::Error(error.to_string()), Counted::Error);
    }
}

/// The waited keys whose slot is in one of `ranges`.
fn keys_in(ranges: &[(u16, u16)]) -> Vec<KeyId> {
    if no_waits() {
        return Vec::new();
    }
    with(|w| {
        w.keys
            .keys()
            .filter(|id| {
                let slot = slots::key_slot(&id.name);
                ranges.iter().any(|&(start, end)| (start..=end).contains(&slot))
            })
            .cloned()
            .collect()
    })
}

/// An atomic slot migration moved `ranges` away: their waiters get the redirect a client
/// would get now (`-MOVED` to the new owner), read from `CLUSTER NODES` once.
pub fn slots_left(ctx: *mut RedisModuleCtx, ranges: &[(u16, u16)]) {
    let Some(api) = api() else {
        return;
    };
    let ids = keys_in(ranges);
    if ids.is_empty() {
        return;
    }
    let nodes = slots::cluster_nodes(api, ctx).unwrap_or_default();
    // SAFETY: reads the server clock.
    let now = api.now_ms();
    for id in ids {
        match slots::redirect(&nodes, slots::key_slot(&id.name)) {
            Some(error) => redirect_all(api, ctx, &id, &error),
            // Still served here (the view has not changed yet): judge them again.
            None => arm(api, ctx, &id, now, now),
        }
    }
}

/// An atomic slot migration of `ranges` was cancelled or failed: their waiters, held while
/// it ran, are judged again here.
pub fn slots_stayed(ctx: *mut RedisModuleCtx, ranges: &[(u16, u16)]) {
    let Some(api) = api() else {
        return;
    };
    // SAFETY: reads the server clock.
    let now = api.now_ms();
    for id in keys_in(ranges) {
        arm(api, ctx, &id, now, now);
    }
}

/// Hands the answer to the blocked client and forgets the waiter.
fn finish(api: &Api, waiter: Waiter<Blocked>, answer: WaiterReply, outcome: Counted) {
    let blocked = waiter.data;
    // A waiter refused for good (its timeout ran out, or it can never be admitted) counts in
    // `RL.TOP`; an error does not.
    if outcome == Counted::Limited
        && !matches!(answer, WaiterReply::Error(_))
        && !blocked.pending.dry_run()
    {
        if let Some(key) = blocked.argv.get(1) {
            let now = api.now_ms();
            // SAFETY: the string is one the server passed for this call (or one the module holds),
            // live while the slice is used.
            let first = blocked.argv.first().map(|s| unsafe { bytes(api, *s) });
            // SAFETY: the string is one the server passed for this call (or one the module holds),
            // live while the slice is used.
            top::refused(unsafe { bytes(api, *key) }, blocked.origin.policy_tag(first), now);
        }
    }
    with(|w| w.clients.remove(&(blocked.bc as usize)));
    stats::waiting_changed(-1);
    stats::record_late(blocked.origin.tally(), outcome);
    if blocked.origin == Origin::Policy {
        // `RL.HIT`'s held arguments start at the policy's name.
        if let (Some(name), Some(key)) = (blocked.argv.first(), blocked.argv.get(1)) {
            // SAFETY: the string is one the server passed for this call (or one the module holds),
            // live while the slice is used.
            let (name, key) = unsafe { (bytes(api, *name), bytes(api, *key)) };
            crate::shell::features::policies::record_late(name, key, outcome);
        }
    }
    let data = Box::into_raw(Box::new(answer)).cast::<c_void>();
    // SAFETY: `blocked.bc` is this waiter's blocked client, unblocked once; `data` is a boxed
    // `WaiterReply` the reply callback reads and `free_answer` frees.
    unsafe { (api.unblock_client)(blocked.bc, data) };
    release_args(api, blocked.argv);
}

fn release_args(api: &Api, argv: Vec<*mut RedisModuleString>) {
    for s in argv {
        // SAFETY: `s` was retained by `hold_string` when the client blocked; released once, here.
        unsafe { (api.free_string)(ptr::null_mut(), s) };
    }
}

/// Writes an answer as the reply.
fn send(api: &Api, ctx: *mut RedisModuleCtx, answer: &WaiterReply) {
    match answer {
        WaiterReply::Ints(values) => reply::integers(api, ctx, values),
        WaiterReply::Lease(values, id) => reply::lease(api, ctx, values, id.as_deref()),
        WaiterReply::Error(text) => reply::error(api, ctx, text),
    }
}

/// Replies to an unblocked client (Redis calls it from its event loop).
unsafe extern "C" fn reply_callback(
    ctx: *mut RedisModuleCtx,
    _argv: *mut *mut RedisModuleString,
    _argc: c_int,
) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: `ctx` is the reply callback's live context.
    let data = unsafe { (api.get_blocked_client_private_data)(ctx) }.cast::<WaiterReply>();
    // SAFETY: `data` is NULL or the live boxed `WaiterReply` `finish` gave `unblock_client` (freed only
    // by `free_answer`, after this callback).
    match unsafe { data.as_ref() } {
        Some(answer) => send(api, ctx, answer),
        None => reply::null(api, ctx),
    }
    raw::REDISMODULE_OK as c_int
}

unsafe extern "C" fn free_answer(_ctx: *mut RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: `data` is the boxed `WaiterReply` `finish` gave `unblock_client`; the server hands it
        // to this free callback once.
        drop(unsafe { Box::from_raw(data.cast::<WaiterReply>()) });
    }
}

/// A blocked client went away: it leaves the queue (idempotent: it may already be answered).
unsafe extern "C" fn on_disconnect(ctx: *mut RedisModuleCtx, bc: *mut RedisModuleBlockedClient) {
    let Some(api) = api() else {
        return;
    };
    let gone = with(|w| {
        let (id, ticket) = w.clients.remove(&(bc as usize))?;
        let key = w.keys.get_mut(&id)?;
        let waiter = key.queue.remove(ticket)?;
        Some((id, waiter))
    });
    let Some((id, waiter)) = gone else {
        return;
    };
    stats::waiting_changed(-1);
    // SAFETY: `bc` is the blocked client this waiter holds, unblocked once (it leaves the queue
    // here).
    unsafe { (api.unblock_client)(bc, ptr::null_mut()) };
    release_args(api, waiter.data.argv);
    // The next waiter may now be the head.
    let now = api.now_ms();
    arm(api, ctx, &id, now, now);
}
