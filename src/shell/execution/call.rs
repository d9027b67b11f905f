//! The room every command call goes through, below the command table (`commands::table`), the
//! limiting and lease rooms (`execution::limiting`, `execution::leases`) and the waiting room (`features::wait`):
//! one invocation (`Call`: context, name, arguments), its errors, how a judged change is applied
//! to the key, and how the call reaches replicas, the AOF and keyspace listeners.
//!
//! Every state-changing call is propagated so that replicas and AOF replay reach the identical
//! state and expiry whatever their clocks say: verbatim when that is exact (the caller gave
//! `AT`, or nothing consumes propagation: `server::propagation`); else a single-key limiting call as
//! the state it left (`RL.RESTORE key payload`, or `DEL key` when it deleted the key), and the
//! other commands rewritten with `AT <the ms it used>`. This file picks the form;
//! `server::propagation` performs it, and the server layer's safe wrappers (`server::api`) do
//! the rest: this file makes no raw FFI call.

use std::ffi::CStr;

use redis_module::{RedisModuleCtx, RedisModuleString};

pub use crate::shell::server::api::arguments;
use crate::shell::server::api::Api;
use crate::shell::server::key::{Contents, Key, Mode};
use crate::shell::server::propagation;
use crate::shell::server::values::Slot;
use ratelimit_core::grammar::args::{check_deadline, wait_within_deadline, MAX_AT_MS};
use ratelimit_core::grammar::arity;
use ratelimit_core::grammar::error::ArgError;
use ratelimit_core::steps::judge::{Change, KeyError};

/// Most arguments any valid call can have (each option at most once); more is refused
/// before any parsing, so arguments fit a stack array.
pub const MAX_ARGS: usize = 18;
/// A judged call: its verdict (reply values), the instant used, and whether it changed its
/// key (then waiters on the key may have gained room).
pub struct Applied<V> {
    pub verdict: V,
    pub now: i64,
    pub changed: bool,
}

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
    pub fn render(&self, command: &CStr) -> String {
        match self {
            CommandError::Arg(e) => e.reply_for(&command.to_string_lossy()),
            CommandError::Key(e) => e.to_string(),
            CommandError::Text(t) => t.clone(),
        }
    }
}

/// One invocation: the server context, the command's name and its arguments (or, for a
/// waiter judged again from a timer, the timer's context and the waiter's held arguments).
pub struct Call<'a> {
    pub api: &'static Api,
    pub ctx: *mut RedisModuleCtx,
    pub name: &'static CStr,
    pub argv: &'a [*mut RedisModuleString],
    /// The arguments as bytes (the command's name, index 0, left empty).
    pub args: &'a [&'a [u8]],
    /// Made by a client's command (so its own arguments can be propagated verbatim), not by a
    /// timer judging a waiter.
    pub from_client: bool,
    /// A waiter judged from a timer: the latest instant it is judged at, its `WAIT` deadline.
    /// A module timer fires in the ms it was armed for or later (whole ms, after the event
    /// loop's turn), so a waiter whose deadline has passed is judged at its deadline, the
    /// instant its timeout names, never after. `None`: the server clock.
    pub not_after_ms: Option<i64>,
}

impl Call<'_> {
    /// The key argument (index 1; arity guarantees it exists).
    #[inline]
    pub fn key(&self) -> Result<*mut RedisModuleString, CommandError> {
        Ok(*arity::argument(self.argv, 1)?)
    }

    /// The bytes of the call's key (argument 1) as the server passed it, for a call made from
    /// strings only (a waiter judged from a timer).
    pub fn key_bytes(&self) -> Option<&[u8]> {
        self.argv.get(1).map(|key| self.api.arg_bytes(key))
    }

    /// Propagates an admitted `RL.ACQUIRE` with its lease's `ID` and `AT`, so that replicas and
    /// AOF replay hold the same id and continue the same sequence.
    pub fn replicate_acquire(&self, id: &[u8], now: i64) {
        let [_, key, limit, lease, ..] = self.argv else {
            return;
        };
        propagation::acquire(self.api, self.ctx, [*key, *limit, *lease], id, now);
    }

    /// Propagates this call as it came (`RM_ReplicateVerbatim`).
    pub fn replicate_verbatim(&self) {
        propagation::verbatim(self.api, self.ctx);
    }

    /// The server clock in unix ms, read once per call, clamped to the range `AT` accepts.
    pub fn clock_ms(&self) -> i64 {
        let now = self.api.now_ms();
        let now = match self.not_after_ms {
            Some(deadline) => now.min(deadline),
            None => now,
        };
        now.clamp(0, MAX_AT_MS)
    }

    pub fn open(&self, mode: Mode) -> Result<Key, CommandError> {
        Ok(Key::open(self.api, self.ctx, self.key()?, mode))
    }

    /// Announces an admitted change of the key as a keyspace event named after the command
    /// (`rl.token`, …) in the module class (`notify-keyspace-events` flag `d`). Free when
    /// notifications are off. Always inline: a call and a key check on every admitted call.
    #[inline(always)]
    pub fn notify_changed(&self) {
        if let Ok(key) = self.key() {
            self.notify_changed_key(key);
        }
    }

    #[inline]
    pub fn notify_changed_key(&self, key: *mut RedisModuleString) {
        self.api.notify_module_event(self.ctx, self.name, key);
    }

    /// Refuses a call whose `DEADLINE` passed on the server's clock before it ran (it then
    /// changes nothing). Only a client's own call is judged: a replica applying its master's
    /// stream or a server loading its AOF runs what the master already judged.
    #[inline]
    pub fn check_deadline(&self, deadline_ms: Option<i64>) -> Result<(), CommandError> {
        if deadline_ms.is_none() {
            return Ok(());
        }
        if self.api.is_replayed(self.ctx) {
            return Ok(());
        }
        check_deadline(deadline_ms, self.clock_ms())
            .map_err(|passed| CommandError::Text(passed.to_string()))
    }

    /// A call's `WAIT` bounded by its `DEADLINE` (see [`wait_within_deadline`]): `None` when it
    /// may not wait.
    pub fn wait_within_deadline(
        &self,
        wait_ms: Option<u64>,
        deadline_ms: Option<i64>,
    ) -> Option<u64> {
        match (wait_ms, deadline_ms) {
            (Some(wait), Some(_)) => wait_within_deadline(wait, deadline_ms, self.clock_ms()),
            (wait, _) => wait,
        }
    }

    /// Whether propagating this call verbatim is exact: the caller gave `AT` (which excludes
    /// `WAIT`), or propagation goes nowhere (`server::propagation`; a client's own call only: a
    /// timer judging a waiter has no arguments of its own).
    #[inline]
    pub fn verbatim_is_exact(&self, given_at: bool, now_ms: i64) -> bool {
        given_at || (self.from_client && propagation::goes_nowhere(self.api, self.ctx, now_ms))
    }

    /// Propagates the state this call left in its key: `RL.RESTORE key payload` (the key's
    /// limiter and ban in the codec's format; `RL.RESTORE` sets the same expiry). Cheaper for
    /// Redis than the rewritten call (fewer, shorter arguments to build and feed to every
    /// replica), and exact whatever the replica's clock.
    pub fn replicate_state(&self, payload: &[u8]) {
        if let Ok(key) = self.key() {
            self.replicate_state_of(key, payload);
        }
    }

    /// [`Call::replicate_state`] for a key given by name (`RL.ALL`'s keys).
    pub fn replicate_state_of(&self, key: *mut RedisModuleString, payload: &[u8]) {
        propagation::restore(self.api, self.ctx, key, payload);
    }

    /// Propagates the deletion of this call's key: `DEL key`, exact whatever the replica's
    /// clock and read by every release.
    pub fn replicate_delete(&self) {
        if let Ok(key) = self.key() {
            propagation::delete(self.api, self.ctx, key);
        }
    }

    /// Propagates this call so that replicas and the AOF evaluate it at `now_ms`: rewritten
    /// with `AT <now>` and without `WAIT` (a replica never waits), or verbatim when the caller
    /// gave `AT` (which excludes `WAIT`) or when propagation goes nowhere (`server::propagation`).
    pub fn replicate_at<const N: usize>(&self, given_at: bool, now_ms: i64) {
        if self.verbatim_is_exact(given_at, now_ms) {
            propagation::verbatim(self.api, self.ctx);
            return;
        }
        // One vector: the call's arguments after its name (less `WAIT timeout` and `DEADLINE
        // unix-ms`: a replica neither waits nor judges its master's deadline), then `AT`.
        let mut vector: [*mut RedisModuleString; N] = [std::ptr::null_mut(); N];
        let rest = self.argv.get(1..).unwrap_or(&[]);
        // Neither is ever a positional argument; the key (index 0 here) may be named so.
        let position = |keyword: &[u8]| {
            rest.iter().skip(1).position(|s| self.api.arg_bytes(s).eq_ignore_ascii_case(keyword))
        };
        let (wait, deadline) = (position(b"WAIT"), position(b"DEADLINE"));
        let dropped = |i: usize, at: Option<usize>| at.is_some_and(|w| i == w + 1 || i == w + 2);
        let kept =
            rest.iter().enumerate().filter(|(i, _)| !dropped(*i, wait) && !dropped(*i, deadline));
        let now = propagation::at_string(self.api, now_ms);
        let mut len = 0;
        for (slot, s) in
            vector.iter_mut().zip(kept.map(|(_, s)| *s).chain([self.api.at_keyword.0, now]))
        {
            *slot = s;
            len += 1;
        }
        propagation::rewritten(self.api, self.ctx, self.name, vector.get(..len).unwrap_or(&[]));
    }
}

/// Applies what judging did to the key: store a new limiter or record an in-place update,
/// with the key's new expiry, or delete a key back in its initial state.
pub fn apply(key: &mut Key, change: Change) -> Result<(), CommandError> {
    match change {
        Change::Unchanged => Ok(()),
        Change::Deleted => {
            key.delete();
            Ok(())
        }
        Change::Updated { expire_at_ms, expiry_may_stay } => {
            key.changed(expire_at_ms, expiry_may_stay);
            Ok(())
        }
        Change::Created { limiter, expire_at_ms } => {
            key.store(limiter, None, expire_at_ms).map_err(|e| CommandError::Text(e.into()))
        }
    }
}

/// The limiter a key opened for reading holds, if any (a live one or not: the core decides).
pub fn held(key: &mut Key) -> Result<Option<Slot<'_>>, CommandError> {
    match key.contents() {
        Contents::Empty => Ok(None),
        Contents::Limiter(slot) => Ok(Some(slot)),
        Contents::Foreign(held) => Err(KeyError::Foreign(held).into()),
    }
}
