//! The commands: parse arguments, load the key, run the pure algorithm, store, expire,
//! replicate, reply.
//!
//! Every state-changing call is propagated so that replicas and AOF replay reach the
//! identical state and expiry whatever their clocks say: verbatim when that is exact (the caller
//! gave `AT`, or nothing consumes propagation: `propagation.rs`); else a single-key limiting
//! call as the state it left (`RL.RESTORE key payload`), and the other commands rewritten with
//! `AT <the ms it used>`. Limited calls, dry runs, zero-cost calls and peeks store, expire and
//! propagate nothing.

use std::ffi::CStr;
use std::os::raw::{c_int, c_longlong};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::api::{api, bytes, Api};
use super::config::slide_log_max;
use super::datatype::RESTORE_COMMAND;
use super::key::{Contents, Key, Mode};
use super::reply::{self, FieldValue};
use super::stats::{self, Outcome, Tally};
use super::values::Slot;
use super::{leases, propagation, wait};
use ratelimit_core::args::MAX_AT_MS;
use ratelimit_core::codec;
use ratelimit_core::error::ArgError;
use ratelimit_core::held::Held;
use ratelimit_core::inspect::{describe_key, peek_key};
use ratelimit_core::judge::{judge_all, judge_key, value_expiry, Change, KeyError, Verdict};
use ratelimit_core::refund::{try_refund_key, RefundChange};
use ratelimit_core::request::{AllRequest, Command, RefundRequest, Request};

/// Most arguments any valid call can have (each option at most once); more is refused
/// before any parsing, so arguments fit a stack array.
pub(super) const MAX_ARGS: usize = 16;
/// Most arguments a valid `RL.ALL` can have: name, `numkeys`, 16 keys, 16 groups of at most 8
/// (`LEAKY c r p COST n DELAY d`), `DRYRUN`, `AT ms`.
const MAX_ALL_ARGS: usize = 2 + 16 + 16 * 8 + 3;

/// Why a command failed; rendered as one error reply.
#[derive(Debug)]
pub enum CommandError {
    Arg(ArgError),
    Key(KeyError),
    /// A complete error text, starting with its code.
    Text(String),
}

impl From<ArgError> for CommandError {
    fn from(e: ArgError) -> Self {
        CommandError::Arg(e)
    }
}

impl From<KeyError> for CommandError {
    fn from(e: KeyError) -> Self {
        CommandError::Key(e)
    }
}

impl CommandError {
    pub(super) fn render(&self, command: &CStr) -> String {
        match self {
            CommandError::Arg(ArgError::WrongArity) => {
                format!("ERR wrong number of arguments for '{}' command", command.to_string_lossy())
            }
            CommandError::Arg(e) => e.to_string(),
            CommandError::Key(e) => e.to_string(),
            CommandError::Text(t) => t.clone(),
        }
    }
}

/// One invocation: the server context, the command's name and its arguments (or, for a
/// waiter judged again from a timer, the timer's context and the waiter's held arguments).
pub struct Call<'a> {
    pub(super) api: &'static Api,
    pub(super) ctx: *mut RedisModuleCtx,
    pub(super) name: &'static CStr,
    pub(super) argv: &'a [*mut RedisModuleString],
    /// The arguments as bytes (the command's name, index 0, left empty).
    pub(super) args: &'a [&'a [u8]],
    /// Made by a client's command (so its own arguments can be propagated verbatim), not by a
    /// timer judging a waiter.
    pub(super) from_client: bool,
}

impl Call<'_> {
    /// The key argument (index 1; arity guarantees it exists).
    pub(super) fn key(&self) -> Result<*mut RedisModuleString, CommandError> {
        match self.argv.get(1) {
            Some(key) => Ok(*key),
            None => Err(CommandError::Arg(ArgError::WrongArity)),
        }
    }

    /// The server clock in unix ms, read once per call, clamped to the range `AT` accepts.
    pub(super) fn clock_ms(&self) -> i64 {
        let now = unsafe { (self.api.milliseconds)() };
        now.clamp(0, MAX_AT_MS)
    }

    pub(super) fn open(&self, mode: Mode) -> Result<Key, CommandError> {
        Ok(Key::open(self.api, self.ctx, self.key()?, mode))
    }

    /// Announces an admitted change of the key as a keyspace event named after the command
    /// (`rl.token`, …) in the module class (`notify-keyspace-events` flag `d`). Free when
    /// notifications are off.
    pub(super) fn notify_changed(&self) {
        if let Ok(key) = self.key() {
            self.notify_changed_key(key);
        }
    }

    fn notify_changed_key(&self, key: *mut RedisModuleString) {
        let class = raw::REDISMODULE_NOTIFY_MODULE as c_int;
        unsafe { (self.api.notify_keyspace_event)(self.ctx, class, self.name.as_ptr(), key) };
    }

    /// Whether propagating this call verbatim is exact: the caller gave `AT` (which excludes
    /// `WAIT`), or propagation goes nowhere (`propagation.rs`; a client's own call only: a
    /// timer judging a waiter has no arguments of its own).
    pub(super) fn verbatim_is_exact(&self, given_at: bool, now_ms: i64) -> bool {
        given_at || (self.from_client && propagation::goes_nowhere(self.api, self.ctx, now_ms))
    }

    /// Propagates the state this call left in its key: `RL.RESTORE key payload` (the key's
    /// limiter and ban in the codec's format; `RL.RESTORE` sets the same expiry). Cheaper for
    /// Redis than the rewritten call (fewer, shorter arguments to build and feed to every
    /// replica), and exact whatever the replica's clock.
    pub(super) fn replicate_state(&self, payload: &[u8]) {
        let Ok(key) = self.key() else {
            return;
        };
        unsafe {
            (self.api.replicate)(
                self.ctx,
                RESTORE_COMMAND.as_ptr(),
                c"sb".as_ptr(),
                key,
                payload.as_ptr().cast::<std::os::raw::c_char>(),
                payload.len(),
            )
        };
    }

    /// Propagates this call so that replicas and the AOF evaluate it at `now_ms`: rewritten
    /// with `AT <now>` and without `WAIT` (a replica never waits), or verbatim when the caller
    /// gave `AT` (which excludes `WAIT`) or when propagation goes nowhere (`propagation.rs`).
    pub(super) fn replicate_at<const N: usize>(&self, given_at: bool, now_ms: i64) {
        if self.verbatim_is_exact(given_at, now_ms) {
            unsafe { (self.api.replicate_verbatim)(self.ctx) };
            return;
        }
        // One vector: the call's arguments after its name (less `WAIT timeout`), then `AT`.
        let mut vector: [*mut RedisModuleString; N] = [std::ptr::null_mut(); N];
        let rest = self.argv.get(1..).unwrap_or(&[]);
        // `WAIT` is never a positional argument; the key (index 0 here) may be named so.
        let wait = rest
            .iter()
            .skip(1)
            .position(|s| unsafe { bytes(self.api, *s) }.eq_ignore_ascii_case(b"WAIT"));
        let kept = rest
            .iter()
            .enumerate()
            .filter(|(i, _)| wait.is_none_or(|w| *i != w + 1 && *i != w + 2));
        let now = at_string(self.api, now_ms);
        let mut len = 0;
        for (slot, s) in
            vector.iter_mut().zip(kept.map(|(_, s)| *s).chain([self.api.at_keyword.0, now]))
        {
            *slot = s;
            len += 1;
        }
        unsafe {
            (self.api.replicate)(self.ctx, self.name.as_ptr(), c"v".as_ptr(), vector.as_ptr(), len)
        };
    }
}

type Handler = fn(&Call) -> Result<Outcome, CommandError>;

thread_local! {
    /// The `AT` value of the current millisecond, as a module string kept across calls (calls
    /// in the same ms propagate the same string; `RM_Replicate` copies what it is given).
    static AT_NOW: std::cell::Cell<(i64, *mut RedisModuleString)> =
        const { std::cell::Cell::new((i64::MIN, std::ptr::null_mut())) };
}

/// The string for `now_ms`, created once per ms (with no context, so no call frees it; the
/// previous ms' string is freed when the next one is made).
fn at_string(api: &Api, now_ms: i64) -> *mut RedisModuleString {
    AT_NOW.with(|cell| {
        let (ms, string) = cell.get();
        if ms == now_ms && !string.is_null() {
            return string;
        }
        let fresh = unsafe {
            (api.create_string_from_long_long)(std::ptr::null_mut(), now_ms as c_longlong)
        };
        if !string.is_null() {
            unsafe { (api.free_string)(std::ptr::null_mut(), string) };
        }
        cell.set((now_ms, fresh));
        fresh
    })
}

/// The argument vector Redis passed, as a slice (empty if malformed).
fn arguments<'a>(argv: *mut *mut RedisModuleString, argc: c_int) -> &'a [*mut RedisModuleString] {
    match usize::try_from(argc) {
        // SAFETY: Redis passes `argc` valid strings that outlive the command call.
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    }
}

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
                *slot = unsafe { bytes(api, *s) };
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

/// The flow of every limiting command: parse (core) → open the key → judge (core) → store and
/// expire → propagate → reply. With `WAIT`, a request that must wait is queued instead
/// (`wait.rs`).
fn limit(call: &Call, command: Command) -> Result<Outcome, CommandError> {
    let request = Request::parse(command, call.args.get(2..).unwrap_or(&[]), slide_log_max())?;
    if request.wait_ms.is_some() && wait::can_block(call) {
        return wait::limit_or_block(call, request);
    }
    let (verdict, _) = judge_and_apply(call, &request)?;
    reply::integers(call.api, call.ctx, &verdict.reply);
    Ok(if verdict.allowed { Outcome::Admitted } else { Outcome::Limited })
}

/// Opens the call's key, judges the request (core) at its `AT` or the server clock, applies
/// the change, propagates it and wakes the key's waiters. Everything but the reply. Returns
/// the verdict and the instant used.
///
/// The clock is read after the key is opened: opening may delete a key whose expiry Redis
/// has seen pass, and the instant judged must never be earlier than that (or the deleted
/// limiter would count as fresh a moment too soon — which matters to a timer that judges
/// waiters one after another).
pub(super) fn judge_and_apply(
    call: &Call,
    request: &Request,
) -> Result<(Verdict, i64), CommandError> {
    let mut key = call.open(Mode::Write)?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut held = match key.contents() {
        Contents::Foreign(held) => return Err(KeyError::Foreign(held).into()),
        Contents::Empty => None,
        Contents::Limiter(slot) => Some(slot),
    };
    let mut verdict = judge_key(held.as_mut(), request, now)?;
    let changed = verdict.changed();
    // Replicas and the AOF get the call verbatim when that is exact (its own `AT`, or no
    // consumer at all), else the state it left (`RL.RESTORE key payload`), encoded here
    // while the judged limiter is at hand.
    let verbatim = changed && call.verbatim_is_exact(request.at_ms.is_some(), now);
    let state = if changed && !verbatim {
        match (&verdict.change, &held) {
            (Change::Created { limiter, .. }, _) => Some(codec::encode_value(limiter, None)),
            (_, Some(slot)) => Some(slot.view(|limiter| codec::encode_value(limiter, slot.ban()))),
            _ => None,
        }
    } else {
        None
    };
    apply(&mut key, std::mem::replace(&mut verdict.change, Change::Unchanged))?;
    drop(key);
    if changed {
        match state {
            Some(payload) => call.replicate_state(&payload),
            None => unsafe {
                (call.api.replicate_verbatim)(call.ctx);
            },
        }
        call.notify_changed();
        wait::key_changed(call);
    }
    Ok((verdict, now))
}

/// Applies what judging did to the key: store a new limiter or record an in-place update,
/// with the key's new expiry.
pub(super) fn apply(key: &mut Key, change: Change) -> Result<(), CommandError> {
    match change {
        Change::Unchanged => Ok(()),
        Change::Updated { expire_at_ms, expiry_may_stay } => {
            key.changed(expire_at_ms, expiry_may_stay);
            Ok(())
        }
        Change::Created { limiter, expire_at_ms } => {
            key.store(limiter, None, expire_at_ms).map_err(|e| CommandError::Text(e.into()))
        }
    }
}

/// `RL.ALL numkeys key [key ...] limit [limit ...] [DRYRUN] [AT ms]`: every key judged at one
/// instant (core), all keys updated or none, one propagation.
fn all(call: &Call) -> Result<Outcome, CommandError> {
    let all = AllRequest::parse(call.args.get(1..).unwrap_or(&[]), slide_log_max())?;
    let now = all.at_ms.unwrap_or_else(|| call.clock_ms());
    let names = call.argv.get(2..2 + all.key_count).ok_or(ArgError::WrongArity)?;
    let mut keys: Vec<Key> =
        names.iter().map(|name| Key::open(call.api, call.ctx, *name, Mode::Write)).collect();
    let mut slots = Vec::with_capacity(keys.len());
    for key in &mut keys {
        slots.push(match key.contents() {
            Contents::Foreign(held) => return Err(KeyError::Foreign(held).into()),
            Contents::Empty => None,
            Contents::Limiter(slot) => Some(slot),
        });
    }
    let mut held: Vec<_> = slots.iter_mut().map(Option::as_mut).collect();
    let verdict = judge_all(&mut held, &all, now)?;
    drop(held);
    drop(slots);
    let changed = verdict.changed();
    let mut touched = Vec::new();
    for ((key, change), name) in keys.iter_mut().zip(verdict.changes).zip(names) {
        if !matches!(change, Change::Unchanged) {
            touched.push(*name);
        }
        apply(key, change)?;
    }
    drop(keys);
    for name in touched {
        call.notify_changed_key(name);
        wait::key_named_changed(call, name);
    }
    if changed {
        call.replicate_at::<{ MAX_ALL_ARGS + 1 }>(all.at_ms.is_some(), now);
    }
    reply::all(call.api, call.ctx, &verdict.head, &verdict.details);
    Ok(if verdict.allowed { Outcome::Admitted } else { Outcome::Limited })
}

/// Answers a key-position request for `RL.ALL` (`COMMAND GETKEYS`, cluster routing): the
/// `numkeys` arguments after `numkeys`, as many as there are.
fn all_key_positions(api: &Api, ctx: *mut RedisModuleCtx, args: &[*mut RedisModuleString]) {
    let count = args
        .get(1)
        .and_then(|n| AllRequest::key_count(unsafe { bytes(api, *n) }).ok())
        .unwrap_or(0)
        .min(args.len().saturating_sub(2));
    let flags = (raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE) as c_int;
    for position in 2..2 + count {
        let position = c_int::try_from(position).unwrap_or(c_int::MAX);
        unsafe { (api.key_at_pos_with_flags)(ctx, position, flags) };
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

/// `RL.REFUND key count [AT ms]`: gives permits back (core), moves the expiry earlier or
/// deletes a limiter back in its initial state, propagates with `AT` when something changed.
fn refund(call: &Call) -> Result<Outcome, CommandError> {
    let request = RefundRequest::parse(call.args.get(2..).unwrap_or(&[]))?;
    let now = request.at_ms.unwrap_or_else(|| call.clock_ms());
    let mut key = call.open(Mode::Write)?;
    let mut held = match key.contents() {
        Contents::Foreign(held) => return Err(KeyError::Foreign(held).into()),
        Contents::Empty => None,
        Contents::Limiter(slot) => Some(slot),
    };
    let verdict = try_refund_key(held.as_mut(), request.count, now)?;
    match verdict.change {
        RefundChange::Unchanged => {}
        RefundChange::Updated { expire_at_ms } => key.changed(expire_at_ms, true),
        RefundChange::Deleted => key.delete(),
    }
    drop(key);
    if verdict.change != RefundChange::Unchanged {
        call.replicate_at::<{ MAX_ARGS + 1 }>(request.at_ms.is_some(), now);
        call.notify_changed();
        wait::key_changed(call);
    }
    match verdict.reply {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Outcome::Answered)
}

/// The limiter a key opened for reading holds, if any (a live one or not: the core decides).
fn held(key: &mut Key) -> Result<Option<Slot<'_>>, CommandError> {
    match key.contents() {
        Contents::Empty => Ok(None),
        Contents::Limiter(slot) => Ok(Some(slot)),
        Contents::Foreign(held) => Err(KeyError::Foreign(held).into()),
    }
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
    unsafe { (call.api.replicate_verbatim)(call.ctx) };
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
        if unsafe { (api.is_keys_position_request)(ctx) } != 0 {
            all_key_positions(api, ctx, arguments(argv, argc));
            return raw::REDISMODULE_OK as c_int;
        }
    }
    dispatch::<MAX_ALL_ARGS>(ctx, argv, argc, c"rl.all", Tally::All, all)
}

command!(rl_token, c"rl.token", Tally::Token, token);
command!(rl_period, c"rl.period", Tally::Period, period);
command!(rl_slide, c"rl.slide", Tally::Slide, slide);
command!(rl_leaky, c"rl.leaky", Tally::Leaky, leaky);
command!(cl_throttle, c"cl.throttle", Tally::Throttle, throttle);
command!(rl_refund, c"rl.refund", Tally::Refund, refund);
command!(rl_acquire, c"rl.acquire", Tally::Acquire, leases::acquire);
command!(rl_release, c"rl.release", Tally::Release, leases::release);
command!(rl_peek, c"rl.peek", Tally::Peek, peek);
command!(rl_info, c"rl.info", Tally::Info, info);
command!(rl_restore, c"rl.restore", Tally::Restore, restore);
