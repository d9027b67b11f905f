//! The value word of a key of our type: a limiter **inline** in the word itself (an entry of
//! the module-wide table of parameter sets and the per-key state, see
//! `ratelimit_core::inline`), or a pointer to a boxed [`PackedLimiter`] for what has no inline
//! form (bans, leases, sliding logs of more than one entry, step refill, a full table).
//!
//! The table lives here, once per module. Everything but releasing runs on the main thread
//! (commands, the type callbacks, loading) or in a forked child reading its copy (`rdb_save`,
//! `aof_rewrite`): no lock. Releasing — the free callback — may run on a background thread
//! (`FLUSHALL ASYNC`), and only touches the table's atomic counts through its [`Releaser`].

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::OnceLock;

use ratelimit_core::ban::Ban;
use ratelimit_core::held::{Expanded, Held};
use ratelimit_core::inline::{is_inline, InlineTable, Releaser, INDEX_BITS};
use ratelimit_core::limiter::Limiter;
use ratelimit_core::packed::PackedLimiter;

/// The table, touched by the main thread only (see the module docs).
struct MainThreadOnly(UnsafeCell<Option<InlineTable>>);

// SAFETY: only the main thread (or a forked child, single-threaded) reaches the table; the
// one off-thread operation, releasing, goes through `RELEASER`'s atomics instead.
unsafe impl Sync for MainThreadOnly {}

static TABLE: MainThreadOnly = MainThreadOnly(UnsafeCell::new(None));
static RELEASER: OnceLock<Releaser> = OnceLock::new();

/// Creates the table (module load).
pub fn init() {
    with_table_slot(|slot| {
        if slot.is_none() {
            let table = InlineTable::new(1 << INDEX_BITS);
            let _ = RELEASER.set(table.releaser());
            *slot = Some(table);
        }
    });
}

fn with_table_slot<R>(f: impl FnOnce(&mut Option<InlineTable>) -> R) -> R {
    // SAFETY: main thread only, and `f` never calls back into Redis or into this module, so
    // no second reference to the table exists while it runs.
    f(unsafe { &mut *TABLE.0.get() })
}

fn with_table<R>(f: impl FnOnce(&mut InlineTable) -> Option<R>) -> Option<R> {
    with_table_slot(|slot| slot.as_mut().and_then(f))
}

/// The limiter an inline word holds.
pub fn expand(word: u64) -> Option<Limiter> {
    with_table(|t| t.expand(word))
}

/// Table entries in use (`INFO ratelimit`).
pub fn live_entries() -> usize {
    with_table(|t| Some(t.live_entries())).unwrap_or(0)
}

/// A value word for `limiter` under `ban`: inline when it has an inline form (reusing the
/// entry of `hint`, the key's previous inline word, when it can), else a new box. The caller
/// gives up any previous value separately ([`free_value`]).
pub fn into_value(limiter: Limiter, ban: Option<Ban>, hint: Option<u64>) -> *mut c_void {
    if ban.is_none() {
        if let Some(word) = with_table(|t| t.encode(&limiter, hint)) {
            return word as usize as *mut c_void;
        }
    }
    Box::into_raw(Box::new(PackedLimiter::with_ban(limiter, ban))).cast()
}

/// The inline word a boxed limiter can become (no ban, an inline form), if any.
pub fn inline_form(packed: &PackedLimiter) -> Option<*mut c_void> {
    if packed.ban().is_some() {
        return None;
    }
    let word = packed.view(|limiter| with_table(|t| t.encode(limiter, None)))?;
    Some(word as usize as *mut c_void)
}

/// Frees a value word: releases an inline word's reference or drops the box.
///
/// # Safety
/// `value` must be a value word this module made (`into_value`, `inline_form`, `copy`), not
/// used afterwards. May run on any thread.
pub unsafe fn free_value(value: *mut c_void) {
    let word = value as usize as u64;
    if is_inline(word) {
        if let Some(releaser) = RELEASER.get() {
            releaser.release(word);
        }
    } else if !value.is_null() {
        // SAFETY: a non-inline value word is a `Box<PackedLimiter>` (the caller's contract).
        drop(unsafe { Box::from_raw(value.cast::<PackedLimiter>()) });
    }
}

/// A second reference to the same value (`COPY`): the same inline word, or a new box.
///
/// # Safety
/// As for [`free_value`], except that `value` stays valid.
pub unsafe fn copy_value(value: *const c_void) -> *mut c_void {
    let word = value as usize as u64;
    if is_inline(word) {
        let retained = with_table(|t| {
            t.retain(word);
            Some(())
        });
        return if retained.is_some() { value.cast_mut() } else { std::ptr::null_mut() };
    }
    match unsafe { value.cast::<PackedLimiter>().as_ref() } {
        Some(p) => Box::into_raw(Box::new(p.clone())).cast(),
        None => std::ptr::null_mut(),
    }
}

/// Runs `f` on the limiter and ban a value word holds (`None` for NULL or a bad word).
///
/// # Safety
/// As for [`copy_value`].
pub unsafe fn with_value<R>(
    value: *const c_void,
    f: impl FnOnce(&Limiter, Option<Ban>) -> R,
) -> Option<R> {
    let word = value as usize as u64;
    if is_inline(word) {
        let limiter = expand(word)?;
        return Some(f(&limiter, None));
    }
    let packed = unsafe { value.cast::<PackedLimiter>().as_ref() }?;
    Some(packed.view(|limiter| f(limiter, packed.ban())))
}

/// Whether a value word is inline.
pub fn is_inline_value(value: *const c_void) -> bool {
    is_inline(value as usize as u64)
}

/// A limiter as a key holds it for one command: its box, or its inline word expanded.
pub enum Slot<'k> {
    Boxed(&'k mut PackedLimiter),
    Inline(&'k mut Expanded),
}

impl Held for Slot<'_> {
    fn ban(&self) -> Option<Ban> {
        match self {
            Slot::Boxed(p) => p.ban(),
            Slot::Inline(e) => e.ban,
        }
    }
    fn set_ban(&mut self, ban: Option<Ban>) {
        match self {
            Slot::Boxed(p) => p.set_ban(ban),
            Slot::Inline(e) => e.ban = ban,
        }
    }
    fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R {
        match self {
            Slot::Boxed(p) => p.view(f),
            Slot::Inline(e) => f(&e.limiter),
        }
    }
    fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R {
        match self {
            Slot::Boxed(p) => p.update(f),
            Slot::Inline(e) => f(&mut e.limiter),
        }
    }
}
