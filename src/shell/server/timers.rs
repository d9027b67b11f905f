//! Module timers (`RM_CreateTimer`, `RM_StopTimer`) behind a safe handle: a [`Timer<T>`]
//! carries a `T` to a plain Rust function that the server calls once, on its main thread,
//! when the timer fires. The waiting room (`features::wait`) keeps one per waited key.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleTimerID};

use super::api::{api, Api, Ctx};

/// What a timer runs when it fires: the server's API, the timer's context, and its data.
pub type Fired<T> = fn(api: &'static Api, ctx: Ctx, data: T);

/// What the server holds for a timer: the function to run and its data, boxed.
struct Armed<T> {
    fired: Fired<T>,
    data: T,
}

/// A module timer that carries a `T` to a [`Fired<T>`] function.
///
/// Ownership: [`Timer::start`] boxes the function and its data and hands the box to the server;
/// from then on exactly one of two things frees it, once: the timer fires (the trampoline takes
/// the box back and passes the data, by value, to the function), or [`Timer::stop`] stops it
/// before it fires (the server hands the box back and the data is returned). A timer that has
/// fired is gone: stopping its handle afterwards finds nothing and returns `None`. Dropping a
/// handle neither stops the timer nor frees its data (the timer still fires). The function runs
/// on the server's main thread, from its event loop, never inside a command.
#[derive(Debug)]
pub struct Timer<T> {
    id: RedisModuleTimerID,
    data: PhantomData<fn(T)>,
}

impl<T: 'static> Timer<T> {
    /// Starts a timer that calls `fired` with `data` after `delay_ms` (0 or less: at the next
    /// turn of the event loop).
    pub fn start(api: &Api, ctx: Ctx, delay_ms: i64, data: T, fired: Fired<T>) -> Self {
        let armed = Box::into_raw(Box::new(Armed { fired, data })).cast::<c_void>();
        // SAFETY: `ctx` is a live context; `armed` is a boxed `Armed<T>` that the server keeps
        // until `on_fire::<T>` takes it back (the timer fired) or `stop` does (stopped first).
        let id = unsafe { (api.create_timer)(ctx, delay_ms.max(0), Some(on_fire::<T>), armed) };
        Timer { id, data: PhantomData }
    }

    /// Stops the timer before it fires, returning its data; `None` if it has already fired.
    pub fn stop(self, api: &Api, ctx: Ctx) -> Option<T> {
        let mut armed: *mut c_void = ptr::null_mut();
        // SAFETY: `ctx` is a live context; `self.id` is a timer `start` created (the handle is
        // consumed, so it is stopped at most once through it).
        let status = unsafe { (api.stop_timer)(ctx, self.id, &mut armed) };
        if status != raw::REDISMODULE_OK as c_int || armed.is_null() {
            return None;
        }
        // SAFETY: the timer was stopped before firing, so the server handed back the boxed
        // `Armed<T>` that `start` gave it, once; it is freed here.
        let armed = unsafe { Box::from_raw(armed.cast::<Armed<T>>()) };
        Some(armed.data)
    }
}

/// The timer callback: takes back the box `start` gave the server and runs its function.
unsafe extern "C" fn on_fire<T>(ctx: *mut RedisModuleCtx, armed: *mut c_void) {
    if armed.is_null() {
        return;
    }
    // SAFETY: `armed` is the boxed `Armed<T>` `Timer::start` gave this timer (this callback is
    // instantiated for the same `T`); a fired timer is never stopped, so it comes back once.
    let armed = unsafe { Box::from_raw(armed.cast::<Armed<T>>()) };
    let Some(api) = api() else {
        return;
    };
    (armed.fired)(api, ctx, armed.data);
}
