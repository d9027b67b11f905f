//! Keyspace notifications (`RM_SubscribeToKeyspaceEvents`) delivered to a plain Rust function:
//! the waiting room (`features::wait`) hears deletions, expiries and evictions of waited keys.

use std::os::raw::{c_char, c_int};
use std::sync::OnceLock;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::api::{api, Api, Ctx, ServerString};

/// A keyspace listener: the API, the notification's context and the key's name (live for the
/// call).
pub type KeyListener = fn(api: &'static Api, ctx: Ctx, key: ServerString);

/// The listener, set once at load.
static LISTENER: OnceLock<KeyListener> = OnceLock::new();

/// Subscribes `listener` to the keyspace events in `events` (`REDISMODULE_NOTIFY_*`), once, at
/// load (a second listener is ignored). Best effort, as a listener only hastens what timers
/// do anyway: the server's status is not checked.
pub fn subscribe(api: &Api, ctx: Ctx, events: c_int, listener: KeyListener) {
    if LISTENER.set(listener).is_err() {
        return;
    }
    // SAFETY: called from `OnLoad` with its context; the callback is a `'static` function.
    unsafe { (api.subscribe_to_keyspace_events)(ctx, events, Some(notify)) };
}

/// The notification callback: passes the key to the listener.
unsafe extern "C" fn notify(
    ctx: *mut RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut RedisModuleString,
) -> c_int {
    if let (Some(api), Some(listener)) = (api(), LISTENER.get()) {
        if !key.is_null() {
            listener(api, ctx, key);
        }
    }
    raw::REDISMODULE_OK as c_int
}
