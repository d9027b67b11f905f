//! The server events the module hears, in one place. Redis keeps one callback per module and
//! event, so each event is subscribed once, here, and fanned out to the handlers the layers
//! register at load (`on`): propagation's doubt (`propagation.rs`), the policy table's storage
//! (`features::persist`: loads, saves, `swapdb` syncs). A layer above registers its handler
//! with this file; this file names no layer above it.
//!
//! Everything here runs on Redis' main thread (or, for the events a fork child fires, on the
//! child's copy of it).

use std::cell::RefCell;
use std::ffi::c_void;
use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleEvent};

use super::api::Api;

/// A handler: the event's context and subevent.
pub type Handler = fn(ctx: *mut RedisModuleCtx, subevent: u64);

thread_local! {
    /// `(event id, handler)`, in registration order.
    static HANDLERS: RefCell<Vec<(u64, Handler)>> = const { RefCell::new(Vec::new()) };
}

/// Registers `handler` for the server event `id` (module load), subscribing to the event the
/// first time it is named. Fails if the server refuses the subscription.
pub fn on(api: &Api, ctx: *mut RedisModuleCtx, id: u64, handler: Handler) -> Result<(), String> {
    let first = HANDLERS.with(|h| {
        let mut handlers = h.borrow_mut();
        let first = !handlers.iter().any(|(event, _)| *event == id);
        handlers.push((id, handler));
        first
    });
    if !first {
        return Ok(());
    }
    let event = RedisModuleEvent { id, dataver: 1 };
    // SAFETY: called from `OnLoad` with its context; `dispatch` lives as long as the module.
    let status = unsafe { (api.subscribe_to_server_event)(ctx, event, Some(dispatch)) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not subscribe to server event {id}"));
    }
    Ok(())
}

/// The one callback of every event: calls its handlers in registration order.
unsafe extern "C" fn dispatch(
    ctx: *mut RedisModuleCtx,
    event: RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    // Copied out first: a handler may cause another event.
    let handlers: Vec<Handler> = HANDLERS
        .with(|h| h.borrow().iter().filter(|(id, _)| *id == event.id).map(|(_, f)| *f).collect());
    for handler in handlers {
        handler(ctx, subevent);
    }
}
