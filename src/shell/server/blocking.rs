//! Blocked clients (`RM_BlockClient`, `RM_UnblockClient`) behind a safe handle, and the
//! arguments a blocked call keeps until it is answered (`RM_HoldString`). The waiting room
//! (`features::wait`) blocks a client per waiting request and answers it later from a timer.
//!
//! The feature above describes itself with a [`Blocking`] implementation (what its answer is,
//! how it is written as the reply, what happens when a blocked client goes away); the
//! `extern "C"` callbacks the server calls are instantiated here for it, so this file names no
//! layer above it.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr::{self, NonNull};

use redis_module::raw::{self, RedisModuleBlockedClient, RedisModuleCtx, RedisModuleString};

use super::api::{api, bytes, Api, Ctx, ServerString};

/// What a feature that blocks clients gives the server layer: its answer type and the two
/// callbacks, as plain functions.
pub trait Blocking: 'static {
    /// What a blocked client is answered with.
    type Answer: 'static;

    /// Writes `answer` as the unblocked client's reply (from the server's reply callback,
    /// with its context).
    fn reply(api: &'static Api, ctx: Ctx, answer: &Self::Answer);

    /// The blocked client `client` disconnected while blocked: the feature finds the
    /// [`BlockedClient`] it holds for it (if it has not answered it yet) and unblocks it.
    fn disconnected(api: &'static Api, ctx: Ctx, client: ClientId);
}

/// A blocked client's identity, for the feature's own bookkeeping (which waiter it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(usize);

/// A client the server keeps blocked until it is answered ([`BlockedClient::unblock`]).
///
/// Ownership: the handle is the one way to unblock its client, and `unblock` consumes it, so a
/// client is unblocked at most once. The answer given to `unblock` is boxed and handed to the
/// server; the reply callback (`reply_to::<B>`, on the main thread's event loop, after
/// `unblock`) reads it and writes [`Blocking::reply`]; then the free callback (`free_answer::<B>`)
/// frees it, once — also when the client disconnected before its reply could be written.
/// A handle dropped without `unblock` leaves its client blocked until it disconnects (then
/// [`Blocking::disconnected`] is told, and the feature must unblock it with the handle it
/// holds). Not `Send`: blocked clients are made and answered on the main thread only.
#[derive(Debug)]
pub struct BlockedClient<B: Blocking> {
    client: NonNull<RedisModuleBlockedClient>,
    feature: PhantomData<B>,
}

impl<B: Blocking> BlockedClient<B> {
    /// Blocks the calling client (no server timeout: the feature answers it); `None` when the
    /// server would not block it.
    pub fn block(api: &Api, ctx: Ctx) -> Option<Self> {
        let client =
            // SAFETY: `ctx` is the live context of the call being answered (a command's, or a
            // reply callback's); the callbacks are `'static` functions instantiated for `B`.
            unsafe { (api.block_client)(ctx, Some(reply_to::<B>), None, Some(free_answer::<B>), 0) };
        let client = NonNull::new(client)?;
        // SAFETY: `client` is the blocked client just made; the callback is a `'static` function.
        unsafe { (api.set_disconnect_callback)(client.as_ptr(), Some(on_disconnect::<B>)) };
        Some(BlockedClient { client, feature: PhantomData })
    }

    /// This client's identity (the one [`Blocking::disconnected`] is given).
    pub fn id(&self) -> ClientId {
        ClientId(self.client.as_ptr() as usize)
    }

    /// Unblocks the client: with an answer, the reply callback writes it; with none (the client
    /// has gone away), nothing is written.
    pub fn unblock(self, api: &Api, answer: Option<B::Answer>) {
        let data = match answer {
            Some(answer) => Box::into_raw(Box::new(answer)).cast::<c_void>(),
            None => ptr::null_mut(),
        };
        // SAFETY: `self.client` is a blocked client `block` made, unblocked once (the handle is
        // consumed); `data` is NULL or a boxed `B::Answer` the reply callback reads and
        // `free_answer::<B>` frees.
        unsafe { (api.unblock_client)(self.client.as_ptr(), data) };
    }
}

/// Whether the calling client can block: not inside `MULTI`/`EXEC` or a script, not a
/// client the server forbids to block, not the replication stream or a load.
pub fn may_block(api: &Api, ctx: Ctx) -> bool {
    let forbid = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
        | raw::REDISMODULE_CTX_FLAGS_REPLICATED
        | raw::REDISMODULE_CTX_FLAGS_LOADING;
    api.context_flags(ctx) & forbid == 0
}

/// Replies to an unblocked client (the server calls it from its event loop).
unsafe extern "C" fn reply_to<B: Blocking>(
    ctx: *mut RedisModuleCtx,
    _argv: *mut *mut RedisModuleString,
    _argc: c_int,
) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: `ctx` is the reply callback's live context.
    let data = unsafe { (api.get_blocked_client_private_data)(ctx) }.cast::<B::Answer>();
    // SAFETY: `data` is NULL or the live boxed `B::Answer` `unblock` gave the server (freed only
    // by `free_answer::<B>`, after this callback).
    match unsafe { data.as_ref() } {
        Some(answer) => B::reply(api, ctx, answer),
        None => super::reply::null(api, ctx),
    }
    raw::REDISMODULE_OK as c_int
}

/// Frees an answer after its reply callback ran (or its client went away).
unsafe extern "C" fn free_answer<B: Blocking>(_ctx: *mut RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: `data` is the boxed `B::Answer` `unblock` gave the server; the server hands it
        // to this free callback once.
        drop(unsafe { Box::from_raw(data.cast::<B::Answer>()) });
    }
}

/// A blocked client went away: the feature is told which.
unsafe extern "C" fn on_disconnect<B: Blocking>(
    ctx: *mut RedisModuleCtx,
    client: *mut RedisModuleBlockedClient,
) {
    let Some(api) = api() else {
        return;
    };
    B::disconnected(api, ctx, ClientId(client as usize));
}

/// A call's arguments (name first), held past the call (`RM_HoldString`) until dropped.
///
/// Ownership: each string is retained once when held and released once when this is dropped,
/// so the strings (and the byte slices and pointers borrowed from them) live as long as it.
/// Share it (`Rc`) rather than hold the strings again.
pub struct HeldArgs {
    api: &'static Api,
    strings: Vec<ServerString>,
}

impl HeldArgs {
    /// Holds every string of `argv`, the vector the server passed the running call.
    pub fn hold(api: &'static Api, argv: &[ServerString]) -> Self {
        let strings = argv
            .iter()
            // SAFETY: every `argv` string is live for the running call; held, it outlives the
            // call until `drop` releases it.
            .map(|s| unsafe { (api.hold_string)(ptr::null_mut(), *s) })
            .collect();
        HeldArgs { api, strings }
    }

    /// The held strings, as an argument vector (for judging the call again).
    pub fn argv(&self) -> &[ServerString] {
        &self.strings
    }

    /// The bytes of argument `index` (0 is the command's name), if there is one.
    pub fn bytes(&self, index: usize) -> Option<&[u8]> {
        let s = *self.strings.get(index)?;
        // SAFETY: `s` is held until `self` is dropped, so it outlives the borrow.
        Some(unsafe { bytes(self.api, s) })
    }
}

impl Drop for HeldArgs {
    fn drop(&mut self) {
        for s in self.strings.drain(..) {
            // SAFETY: `s` was retained by `hold_string` in `hold`; released once, here.
            unsafe { (self.api.free_string)(ptr::null_mut(), s) };
        }
    }
}
