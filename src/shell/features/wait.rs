//! `WAIT timeout`: fair waiting on the server.
//!
//! A request that must wait blocks its client (`server::blocking`, no Redis timeout) and joins
//! the key's first-come-first-served queue (`ratelimit_core::features::waiters`). One module
//! timer per key (`server::timers`) fires at the head's retry instant or the earliest
//! deadline, whichever is first; a change that may give room (an admitted call, `RL.REFUND`,
//! `DEL`, expiry) fires it at once. The timer judges the head again exactly as the command would (`limiting::judge_and_apply`,
//! which propagates the admission as the command without `WAIT`, with `AT` = the instant of
//! admission), answers it and moves on to the next head; it answers timed-out waiters with a
//! refused reply. Waiters live in this process' memory: they are answered or dropped, never
//! persisted. Everything here runs on Redis' main thread.
//!
//! No FFI here: the server layer owns the blocked clients' answers, the timers' data and the
//! held arguments (`BlockedClient`, `Timer`, `HeldArgs`); this room hands it plain functions
//! (`WaitingRoom`'s `Blocking` impl, `on_timer`, `key_named_changed` as the keyspace listener).
//!
//! In a cluster, a waiter whose key left this node (classic resharding's `MIGRATE`, the end of
//! an atomic slot migration) is answered with the redirect its client would get now
//! (`-ASK`/`-MOVED`), never judged against the missing key; while an atomic slot migration
//! exports its key's slot it is held, unjudged (`server::slots`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::execution::leases::acquire_and_apply;
use crate::shell::execution::limiting::{judge_and_apply, JudgedBy};
use crate::shell::features::stats::{self, Counted, Tally};
use crate::shell::features::top;
use crate::shell::server::api::{api, Api, Ctx, ServerString};
use crate::shell::server::blocking::{self, BlockedClient, Blocking, ClientId, HeldArgs};
use crate::shell::server::key::{Contents, Key, Mode};
use crate::shell::server::reply;
use crate::shell::server::slots::{self, Served};
use crate::shell::server::timers::Timer;
use ratelimit_core::algorithms::lease::LeaseId;
use ratelimit_core::features::waiters::{WaitQueue, Waiter};
use ratelimit_core::grammar::request::{AcquireRequest, Request};

/// A key, by database and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct KeyId {
    db: i32,
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
                // `RL.HIT`'s waiters are judged as `RL.HIT` is (`JudgedBy::Policy`), with the
                // policy's parameters as they were when the call was made.
                let by =
                    if origin == Origin::Policy { JudgedBy::Policy } else { JudgedBy::Command };
                let judged = judge_and_apply(call, &request, by)?;
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
    client: BlockedClient<WaitingRoom>,
    pending: Pending,
    name: &'static CStr,
    origin: Origin,
    /// The command's arguments, name first, held until the waiter is done (shared with a
    /// judgement in progress, which must not borrow the queue).
    args: Rc<HeldArgs>,
}

/// One key's waiters and its timer.
#[derive(Default)]
struct KeyWaits {
    queue: WaitQueue<Blocked>,
    /// The armed timer (carrying the key) and the instant it fires.
    timer: Option<(Timer<KeyId>, i64)>,
    /// The head's ticket and the instant its last judgement's `retry_after` named. Every
    /// change that may give room judges the head again, so until its deadline this is when
    /// it can be admitted at the earliest (see [`serve_heads`]).
    head_retry: Option<(u64, i64)>,
}

#[derive(Default)]
struct Waits {
    keys: HashMap<KeyId, KeyWaits>,
    /// Where each blocked client waits (for disconnections): client → (key, ticket).
    clients: HashMap<ClientId, (KeyId, u64)>,
    next_ticket: u64,
}

/// The waiting room as the server layer's blocked clients see it: a waiter's answer, written
/// by [`send`], and disconnections, which leave the queue ([`client_gone`]).
struct WaitingRoom;

impl Blocking for WaitingRoom {
    type Answer = WaiterReply;

    fn reply(api: &'static Api, ctx: Ctx, answer: &WaiterReply) {
        send(api, ctx, answer);
    }

    fn disconnected(api: &'static Api, ctx: Ctx, client: ClientId) {
        client_gone(api, ctx, client);
    }
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
    blocking::may_block(call.api, call.ctx)
}

/// The key `name` (an argument of the running call or notification) in the context's database.
fn key_id(api: &Api, ctx: Ctx, name: ServerString) -> KeyId {
    KeyId { db: api.selected_db(ctx), name: api.arg_bytes(&name).to_vec() }
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
    let Some(client) = BlockedClient::block(api, call.ctx) else {
        return false;
    };
    let client_id = client.id();
    let args = Rc::new(HeldArgs::hold(api, call.argv));
    let deadline_ms = pending
        .wait_ms()
        .filter(|w| *w > 0)
        .map(|w| now.saturating_add(i64::try_from(w).unwrap_or(i64::MAX)));
    let blocked = Blocked { client, pending, name: call.name, origin, args };
    let wake = with(|w| {
        w.next_ticket += 1;
        let ticket = w.next_ticket;
        w.clients.insert(client_id, (id.clone(), ticket));
        let key = w.keys.entry(id.clone()).or_default();
        key.queue.push(Waiter { ticket, deadline_ms, data: blocked });
        if let Some(at) = retry_at {
            // Judged on a key without waiters: it is the head.
            key.head_retry = Some((ticket, at));
        }
        stats::waiting_changed(1);
        key.queue.wake_at(retry_at)
    });
    if let Some(at) = wake {
        arm(api, call.ctx, &id, at, now);
    }
    true
}

/// Makes sure the key's timer fires no later than `at`.
fn arm(api: &Api, ctx: Ctx, id: &KeyId, at: i64, now: i64) {
    let stale = with(|w| {
        let key = w.keys.get_mut(id)?;
        match key.timer {
            Some((_, fires)) if fires <= at => None,
            _ => Some(key.timer.take()),
        }
    });
    let Some(previous) = stale else {
        return;
    };
    if let Some((timer, _)) = previous {
        // Stopped before it fired: the key id it carried is dropped with it.
        timer.stop(api, ctx);
    }
    let delay = at.saturating_sub(now).max(0);
    let timer = Timer::start(api, ctx, delay, id.clone(), on_timer);
    with(|w| {
        if let Some(key) = w.keys.get_mut(id) {
            key.timer = Some((timer, now.saturating_add(delay)));
        }
    });
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
///
/// Also the keyspace listener (`server::events::on_keyspace`): `DEL`, expiry, eviction, … of a key with
/// waiters judge its head at once.
pub fn key_named_changed(api: &Api, ctx: Ctx, name: ServerString) {
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
fn on_timer(api: &'static Api, ctx: Ctx, id: KeyId) {
    with(|w| {
        if let Some(key) = w.keys.get_mut(&id) {
            key.timer = None;
        }
    });
    api.switch_db(ctx, id.db);
    serve(api, ctx, &id);
}

fn serve(api: &'static Api, ctx: Ctx, id: &KeyId) {
    let served = where_served(api, ctx, id);
    if let Served::Elsewhere(error) = served {
        redirect_all(api, ctx, id, &error);
        return;
    }
    let now = api.now_ms();
    if served != Served::Here {
        // The key's slot is being exported: nothing that may write is judged; waiters whose
        // timeout ran out are answered.
        let timed_out =
            with(|w| w.keys.get_mut(id).map(|k| k.queue.take_timed_out(now)).unwrap_or_default());
        for waiter in timed_out {
            time_out(api, ctx, waiter, false, None);
        }
        hold(api, ctx, id, now);
        return;
    }
    let Some((retry_at, now)) = serve_heads(api, ctx, id) else {
        with(|w| {
            if w.keys.get(id).is_some_and(|k| k.queue.is_empty() && k.timer.is_none()) {
                w.keys.remove(id);
            }
        });
        return;
    };
    // The head must wait until `retry_at`: the waiters behind it whose timeout ran out lost
    // their turn.
    let timed_out =
        with(|w| w.keys.get_mut(id).map(|k| k.queue.take_timed_out(now)).unwrap_or_default());
    for waiter in timed_out {
        time_out(api, ctx, waiter, true, Some(retry_at));
    }
    let wake = with(|w| w.keys.get(id).and_then(|k| k.queue.wake_at(Some(retry_at))));
    if let Some(at) = wake {
        arm(api, ctx, id, at, now);
    }
}

/// Judges heads, oldest first, each at the server clock but never after its deadline (its
/// timeout instant is judged like any other: admitted if the algorithm admits it then):
/// answers those admitted, those that can never be, and those refused at their deadline,
/// until a head must wait. Returns the instant that head's `retry_after` names and the clock
/// it was judged at; `None` when no waiter is left.
///
/// A timer fires in the ms it was armed for or later. When it fires after a head's deadline,
/// the key may have expired in between (Redis deletes it when opened): judged at the deadline,
/// it would look fresh. So a head whose last judgement named a retry instant after its
/// deadline times out without being judged for admission (nothing gave room since: every
/// change judges the head again).
fn serve_heads(api: &'static Api, ctx: Ctx, id: &KeyId) -> Option<(i64, i64)> {
    loop {
        // Copy what judging the head needs: no borrow lives across Redis calls.
        let (ticket, pending, name, origin, args, deadline, known_retry) = with(|w| {
            let key = w.keys.get(id)?;
            key.queue.head().map(|h| {
                let b = &h.data;
                let retry = key.head_retry.filter(|(t, _)| *t == h.ticket).map(|(_, at)| at);
                let args = Rc::clone(&b.args);
                (h.ticket, b.pending.clone(), b.name, b.origin, args, h.deadline_ms, retry)
            })
        })?;
        if let (Some(due), Some(retry_at)) = (deadline, known_retry) {
            if retry_at > due && due < api.now_ms() {
                let waiter = with(|w| w.keys.get_mut(id).and_then(|k| k.queue.pop_head()))?;
                time_out(api, ctx, waiter, true, Some(retry_at));
                continue;
            }
        }
        let call = Call {
            api,
            ctx,
            name,
            argv: args.argv(),
            args: &[],
            from_client: false,
            not_after_ms: deadline,
        };
        let answer = match pending.judge(&call, origin, false, false) {
            Ok(j) if j.allowed || j.reply[3] < 0 => {
                let allowed = j.allowed;
                Some((pending.answer(j), allowed))
            }
            // Refused at its deadline: its timeout ran out.
            Ok(j) if deadline.is_some_and(|d| d <= j.now) => None,
            Ok(j) => {
                let retry_at = j.now.saturating_add(j.reply[3]);
                with(|w| w.keys.get_mut(id).map(|k| k.head_retry = Some((ticket, retry_at))));
                return Some((retry_at, j.now));
            }
            Err(e) => Some((WaiterReply::Error(e.render(name)), false)),
        };
        let waiter = with(|w| w.keys.get_mut(id).and_then(|k| k.queue.pop_head()))?;
        debug_assert_eq!(waiter.ticket, ticket);
        match answer {
            None => time_out(api, ctx, waiter, true, None),
            Some((answer, admitted)) => {
                if admitted {
                    stats::wait_admitted();
                }
                let outcome = if admitted { Counted::Admitted } else { Counted::Limited };
                finish(api, waiter, answer, outcome);
            }
        }
    }
}

/// A waiter whose timeout ran out: the reply a refused call gets at its deadline (the
/// instant its timeout names, even when the timer fired later). A waiter the algorithm
/// would admit then lost its turn to earlier waiters (or its key expired after its deadline,
/// see [`serve_heads`]): refused, with the `retry_after` of the instant the queue moves next
/// (`queue_moves_at`, the head's retry instant; at least 1 ms: a refusal never says "now"). With `BAN`, a refusal by the algorithm starts the ban —
/// unless the key may not be written (`may_write`: its slot is being exported), when the
/// refusal is answered without a ban.
fn time_out(
    api: &'static Api,
    ctx: Ctx,
    waiter: Waiter<Blocked>,
    may_write: bool,
    queue_moves_at: Option<i64>,
) {
    let blocked = &waiter.data;
    let pending = &blocked.pending;
    let call = Call {
        api,
        ctx,
        name: blocked.name,
        argv: blocked.args.argv(),
        args: &[],
        from_client: false,
        not_after_ms: waiter.deadline_ms,
    };
    let answer = match pending.judge(&call, blocked.origin, true, false) {
        Ok(j) if j.allowed => {
            let [_, limit, remaining, _, reset] = j.reply;
            let retry = queue_moves_at.map_or(1, |at| at.saturating_sub(j.now).max(1));
            pending.answer(PendingVerdict {
                allowed: false,
                reply: [0, limit, remaining, retry, reset],
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
fn where_served(api: &'static Api, ctx: Ctx, id: &KeyId) -> Served {
    let Some(args) =
        with(|w| w.keys.get(id).and_then(|k| k.queue.head()).map(|h| Rc::clone(&h.data.args)))
    else {
        return Served::Here;
    };
    let Some(&key) = args.argv().get(1) else {
        return Served::Here;
    };
    slots::served_here(api, ctx, &id.name, || {
        // Selecting the waiter's database before opening its key.
        api.switch_db(ctx, id.db);
        let mut open = Key::open(api, ctx, key, Mode::Read);
        !matches!(open.contents(), Contents::Empty)
    })
}

/// The key's slot is being exported: nothing is judged (a judgement may write); the timer
/// is armed for the next deadline only.
fn hold(api: &Api, ctx: Ctx, id: &KeyId, now: i64) {
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
fn redirect_all(api: &Api, ctx: Ctx, id: &KeyId, error: &str) {
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
        // Stopped before it fired: the key id it carried is dropped with it.
        timer.stop(api, ctx);
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
pub fn slots_left(ctx: Ctx, ranges: &[(u16, u16)]) {
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
pub fn slots_stayed(ctx: Ctx, ranges: &[(u16, u16)]) {
    let Some(api) = api() else {
        return;
    };
    // SAFETY: reads the server clock.
    let now = api.now_ms();
    for id in keys_in(ranges) {
        arm(api, ctx, &id, now, now);
    }
}

/// Hands the answer to the blocked client and forgets the waiter (its held arguments are
/// released with it).
fn finish(api: &Api, waiter: Waiter<Blocked>, answer: WaiterReply, outcome: Counted) {
    let blocked = waiter.data;
    let args = &blocked.args;
    // A waiter refused for good (its timeout ran out, or it can never be admitted) counts in
    // `RL.TOP`; an error does not.
    if outcome == Counted::Limited
        && !matches!(answer, WaiterReply::Error(_))
        && !blocked.pending.dry_run()
    {
        if let Some(key) = args.bytes(1) {
            let now = api.now_ms();
            top::refused(key, blocked.origin.policy_tag(args.bytes(0)), now);
        }
    }
    with(|w| w.clients.remove(&blocked.client.id()));
    stats::waiting_changed(-1);
    stats::record_late(blocked.origin.tally(), outcome);
    if blocked.origin == Origin::Policy {
        // `RL.HIT`'s held arguments start at the policy's name.
        if let (Some(name), Some(key)) = (args.bytes(0), args.bytes(1)) {
            crate::shell::features::policies::record_late(name, key, outcome);
        }
    }
    blocked.client.unblock(api, Some(answer));
}

/// Writes an answer as the reply.
fn send(api: &Api, ctx: Ctx, answer: &WaiterReply) {
    match answer {
        WaiterReply::Ints(values) => reply::integers(api, ctx, values),
        WaiterReply::Lease(values, id) => reply::lease(api, ctx, values, id.as_deref()),
        WaiterReply::Error(text) => reply::error(api, ctx, text),
    }
}

/// A blocked client went away: it leaves the queue (idempotent: it may already be answered).
fn client_gone(api: &'static Api, ctx: Ctx, client: ClientId) {
    let gone = with(|w| {
        let (id, ticket) = w.clients.remove(&client)?;
        let key = w.keys.get_mut(&id)?;
        let waiter = key.queue.remove(ticket)?;
        Some((id, waiter))
    });
    let Some((id, waiter)) = gone else {
        return;
    };
    stats::waiting_changed(-1);
    // It leaves the queue here, so it is unblocked once; its held arguments are released.
    waiter.data.client.unblock(api, None);
    // The next waiter may now be the head.
    let now = api.now_ms();
    arm(api, ctx, &id, now, now);
}
