//! `RL.TOP`: the keys refused most often now, on this node (the summary is
//! `ratelimit_core::features::top::TopKeys`; this file keeps it and answers the command).
//!
//! The summary is fed only on the refusal path: a limiting call answered `allowed = 0` that is
//! not a dry run ([`refused`], out of line, so the admitted path does not change). It lives in
//! this node's memory only: not persisted and not replicated. Refusals change no key and are
//! never propagated, so a replica's summary would be empty anyway — each node answers for the
//! refusals it made; after a restart or a failover the summary starts empty, and fills again
//! within a window under the same traffic. `CONFIG SET ratelimit.top-k` or
//! `ratelimit.top-window` clears it (the next refusal or read starts a summary with the new
//! settings); `ratelimit.top-k 0` turns it off.

use std::cell::RefCell;

use crate::shell::execution::call::Call;
use crate::shell::server::config::{top_k, top_window_ms};
use ratelimit_core::features::top::{TopKeys, TopStats};

thread_local! {
    /// Redis runs commands, timers and callbacks on its main thread only.
    static TOP: RefCell<Option<TopKeys>> = const { RefCell::new(None) };
}

/// Forgets the summary (`RL.TOP RESET`): the next refusal or read starts a new one.
pub fn reset() {
    TOP.with(|t| t.try_borrow_mut().map(|mut t| *t = None).ok());
}

/// Runs `f` on the summary with the configured settings (a new one when they changed), or not
/// at all when the summary is off (`ratelimit.top-k 0`) or already borrowed.
pub fn with_top<R>(f: impl FnOnce(&mut TopKeys) -> R) -> Option<R> {
    let k = top_k();
    if k == 0 {
        TOP.with(|t| t.try_borrow_mut().map(|mut t| *t = None).ok());
        return None;
    }
    let window_ms = top_window_ms();
    TOP.with(|t| {
        let mut t = t.try_borrow_mut().ok()?;
        if !t.as_ref().is_some_and(|top| top.has_settings(k, window_ms)) {
            *t = Some(TopKeys::new(k, window_ms));
        }
        t.as_mut().map(f)
    })
}

/// Counts one refusal of `key` under the policy `tag` (empty for the direct commands) at
/// `now_ms` (the server clock).
#[cold]
#[inline(never)]
pub fn refused(key: &[u8], tag: &[u8], now_ms: i64) {
    with_top(|top| top.record(tag, key, now_ms));
}

/// Counts one refusal of the call's key (argument 1) under the policy `tag`, at the instant it
/// was judged at — or the server clock when the caller gave `AT`: an instant of the caller's
/// choosing must not move the windows.
#[cold]
#[inline(never)]
pub fn call_refused(call: &Call, tag: &[u8], given_at: bool, judged_ms: i64) {
    let now_ms = if given_at { call.clock_ms() } else { judged_ms };
    if let Some(key) = call.args.get(1) {
        refused(key, tag, now_ms);
    } else if let Some(key) = call.key_bytes() {
        // A waiter judged from a timer has its arguments as strings only.
        refused(key, tag, now_ms);
    }
}

/// What `INFO ratelimit` shows of the summary now.
pub fn stats(now_ms: i64) -> TopStats {
    TOP.with(|t| {
        t.try_borrow()
            .ok()
            .and_then(|t| t.as_ref().map(|top| top.stats(now_ms)))
            .unwrap_or_default()
    })
}
