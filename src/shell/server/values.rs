//! The value word of a key of our type: a limiter **inline** in the word itself (an entry of
//! the module-wide table of parameter sets and the per-key state, see
//! `ratelimit_core::store::inline`); an exact sliding log of more than one entry as a pointer to its
//! own buffer, which carries the state's fields ([`Value::Log`]: one allocation per log); or a
//! pointer to a boxed [`PackedLimiter`] for what has no such form (bans, leases, bucketed
//! windows, step refill, a full table).
//!
//! The table lives here, once per module. Everything but releasing runs on the main thread
//! (commands, the type callbacks, loading) or in a forked child reading its copy (`rdb_save`,
//! `aof_rewrite`): no lock. Releasing — the free callback — may run on a background thread
//! (`FLUSHALL ASYNC`), and only touches the table's atomic counts through its [`Releaser`].

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use ratelimit_core::algorithms::ban::Ban;
use ratelimit_core::algorithms::limiter::Limiter;
use ratelimit_core::algorithms::slide::SlideState;
use ratelimit_core::store::held::{Expanded, Held};
use ratelimit_core::store::inline::{is_inline, Encoded, InlineTable, Releaser, INDEX_BITS};
use ratelimit_core::store::packed::PackedLimiter;

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

/// What a value word is.
#[derive(Clone, Copy)]
pub enum Value {
    /// A limiter inline in the word.
    Inline(u64),
    /// A 16-byte box holding an inline word and the extra field its shape needs (a `STEP`
    /// bucket's grid origin); the pointer carries [`PAIR_TAG`].
    Pair(*mut [u64; 2]),
    /// An exact sliding log with older entries kept as its buffer alone
    /// (`SlideState::into_log_buffer`); the pointer carries [`LOG_TAG`].
    Log(*mut u8),
    /// A boxed [`PackedLimiter`].
    Packed(*mut PackedLimiter),
    Null,
}

/// The tag of a pair pointer (boxes are 8-aligned, so bits 0–2 of a pointer are free; bit 0
/// marks inline words).
const PAIR_TAG: usize = 2;
/// The tag of a log pointer (a log's buffer is at least 80 bytes: 16-aligned; checked).
const LOG_TAG: usize = 4;

impl Value {
    /// Reads a value word.
    pub fn of(value: *const c_void) -> Value {
        let bits = value as usize;
        if value.is_null() {
            Value::Null
        } else if is_inline(bits as u64) {
            Value::Inline(bits as u64)
        } else if bits & PAIR_TAG != 0 {
            Value::Pair((bits & !PAIR_TAG) as *mut [u64; 2])
        } else if bits & LOG_TAG != 0 {
            Value::Log((bits & !LOG_TAG) as *mut u8)
        } else {
            Value::Packed(value.cast_mut().cast())
        }
    }

    /// The inline word (the entry reference) of an inline or pair value.
    pub fn inline_word(self) -> Option<u64> {
        match self {
            Value::Inline(word) => Some(word),
            // SAFETY: a pair pointer is a live `Box<[u64; 2]>` while its key holds it.
            Value::Pair(pair) => unsafe { pair.as_ref() }.map(|p| p[0]),
            _ => None,
        }
    }
}

fn pair_value(word: u64, extra: u64) -> *mut c_void {
    let pair = Box::into_raw(Box::new([word, extra]));
    (pair as usize | PAIR_TAG) as *mut c_void
}

/// The value word of an encoded limiter: the inline word itself, or a pair box when the shape
/// has an extra field.
fn encoded_value(e: Encoded) -> *mut c_void {
    match e.extra {
        None => e.word as usize as *mut c_void,
        Some(extra) => pair_value(e.word, extra),
    }
}

/// The log a log value holds, as an owning limiter sharing the key's buffer (the two-owner
/// rule: `server::key::ExpandedLog`, the type that settles it; [`with_value`] and
/// [`copy_value`] never drop theirs).
///
/// # Safety
/// `buffer` must be a live log value's buffer.
pub unsafe fn expand_log(buffer: *mut u8) -> Limiter {
    // SAFETY: by the caller's contract.
    Limiter::Slide(unsafe { SlideState::from_log_buffer(buffer) })
}

/// The log value of `limiter` (the buffer now belongs to the value), or the limiter back when
/// it is not an exact log with older entries.
fn log_value(limiter: Limiter) -> Result<*mut c_void, Limiter> {
    let Limiter::Slide(state) = limiter else {
        return Err(limiter);
    };
    let buffer = state.into_log_buffer().map_err(Limiter::Slide)?;
    if buffer as usize & 7 != 0 {
        // Not 8-aligned (never from jemalloc): no room for the tag, so a box instead.
        // SAFETY: the buffer `into_log_buffer` just gave up, owned by nothing else.
        return Err(Limiter::Slide(unsafe { SlideState::from_log_buffer(buffer) }));
    }
    Ok((buffer as usize | LOG_TAG) as *mut c_void)
}

/// The limiter an inline or pair value holds (`None` for a boxed one, or a bad word).
pub fn expand(value: Value) -> Option<Limiter> {
    match value {
        Value::Inline(word) => with_table(|t| t.expand(word, None)),
        // SAFETY: as in `Value::inline_word`.
        Value::Pair(pair) => {
            // SAFETY: a pair value's pointer is a live pair box this module made (`Value::of`
            // untagged it).
            let [word, extra] = *unsafe { pair.as_ref() }?;
            with_table(|t| t.expand(word, Some(extra)))
        }
        _ => None,
    }
}

/// Table entries in use (`INFO ratelimit`).
pub fn live_entries() -> usize {
    with_table(|t| Some(t.live_entries())).unwrap_or(0)
}

/// A value word for `limiter` under `ban`: inline when it has an inline form, a pair when its
/// shape needs the extra field, else a packed box. The caller gives up any previous value
/// separately ([`free_value`]).
pub fn into_value(limiter: Limiter, ban: Option<Ban>) -> *mut c_void {
    if ban.is_some() {
        return boxed(limiter, ban);
    }
    if let Some(encoded) = with_table(|t| t.encode(&limiter, None)) {
        return encoded_value(encoded);
    }
    unboxed_or_boxed(limiter)
}

/// The log value of a limiter with no inline form, else its box.
fn unboxed_or_boxed(limiter: Limiter) -> *mut c_void {
    log_value(limiter).unwrap_or_else(|limiter| boxed(limiter, None))
}

/// The value word of a boxed limiter (never inline).
fn boxed(limiter: Limiter, ban: Option<Ban>) -> *mut c_void {
    Box::into_raw(Box::new(PackedLimiter::with_ban(limiter, ban))).cast()
}

/// The key's value word while a rewrite decides what becomes of it: it owns what the word
/// owns (its entry reference, its pair or packed box). A rewrite can answer only by consuming
/// it — [`OldValue::keep`], [`OldValue::hand_on_to`] or [`OldValue::free_after`] — so whether
/// the old word is freed is said by the method that built the [`Rewrite`], never left to
/// whoever applies it; and dropped, it frees the word.
pub struct OldValue(*mut c_void);

impl OldValue {
    /// The key's live value word, owned from now on (dropping the result frees it).
    ///
    /// # Safety
    /// `value` must be the live value word of the key being written (not a log value: a log
    /// expanded for the command owns its buffer, see `values::rewrite_log`), made by this
    /// module; the key holds it until a [`Rewrite`] is applied.
    pub unsafe fn of_key(value: *mut c_void) -> OldValue {
        OldValue(value)
    }

    /// The key keeps this word (unchanged, or its pair box rewritten in place): nothing freed.
    fn keep(self) -> Rewrite {
        std::mem::forget(self);
        Rewrite { new: None }
    }

    /// The key takes `new`, which carries the old word's entry reference on (the same entry,
    /// a moved instant — the common case): nothing freed.
    fn hand_on_to(self, new: *mut c_void) -> Rewrite {
        std::mem::forget(self);
        Rewrite { new: Some((new, None)) }
    }

    /// The key takes `new`, which holds references of its own; the old word is freed once it
    /// is replaced.
    fn free_after(self, new: *mut c_void) -> Rewrite {
        Rewrite { new: Some((new, Some(self))) }
    }
}

impl Drop for OldValue {
    fn drop(&mut self) {
        // SAFETY: the word was the key's (`OldValue::of_key`), which no longer holds it: a
        // `Rewrite` drops it only after the key took the new word.
        unsafe { free_value(self.0) }
    }
}

/// What writing a changed limiter back asks of the key: nothing, or a new value word in
/// place of the old, which is then freed when it still owns anything ([`OldValue`]).
#[must_use]
pub struct Rewrite {
    new: Option<(*mut c_void, Option<OldValue>)>,
}

impl Rewrite {
    /// Puts the new word in the key with `replace` (which says whether the key took it), then
    /// frees the old word when it still owns anything. Should the key refuse `new`, it keeps
    /// its old word, and `new` is freed when it holds references of its own.
    pub fn apply(self, replace: impl FnOnce(*mut c_void) -> bool) {
        let Some((new, old)) = self.new else {
            return;
        };
        if replace(new) {
            drop(old);
        } else if let Some(old) = old {
            std::mem::forget(old);
            // SAFETY: `new` was made for the key, which did not take it: owned here alone.
            unsafe { free_value(new) };
        }
    }
}

/// Writes a changed limiter back over the key's value word `old`, reusing `old`'s entry
/// reference (and its pair box) when the limiter still fits `old`'s entry.
pub fn rewrite(old: OldValue, limiter: Limiter, ban: Option<Ban>) -> Rewrite {
    let before = Value::of(old.0);
    // A sliding window with a heap buffer never has an inline form.
    let heap = matches!(&limiter, Limiter::Slide(s) if s.buffer.word_only().is_none());
    let reencoded = match (ban, before.inline_word()) {
        (None, Some(_)) if heap => None,
        (None, Some(word)) => with_table(|t| t.reencode(&limiter, word)),
        (None, None) => return old.free_after(into_value(limiter, None)),
        (Some(_), _) => None,
    };
    let Some((encoded, kept)) = reencoded else {
        // No inline form now (a ban, or the state outgrew the word — a sliding log's second
        // entry: its own buffer), or no entry for it (the table is full: `into_value` would
        // find none either), without trying the table again.
        if ban.is_some() {
            return old.free_after(boxed(limiter, ban));
        }
        return old.free_after(unboxed_or_boxed(limiter));
    };
    if !kept {
        // A new reference, to another entry; freeing `old` releases its own.
        return old.free_after(encoded_value(encoded));
    }
    match (before, encoded.extra) {
        (Value::Inline(word), None) if word == encoded.word => old.keep(),
        (Value::Inline(_), None) => old.hand_on_to(encoded_value(encoded)),
        (Value::Pair(pair), Some(extra)) => {
            // SAFETY: the key's live pair box, rewritten in place; its reference carries over.
            unsafe { *pair = [encoded.word, extra] };
            old.keep()
        }
        // The same entry cannot change whether it has an extra field.
        _ => {
            with_table(|t| {
                t.retain(encoded.word);
                Some(())
            });
            old.free_after(encoded_value(encoded))
        }
    }
}

/// Writes a log changed in place back over the key's log value `old`: the value word the key
/// must hold now (`None`: `old` again, the log stayed in its buffer) — its buffer, a one-entry
/// log's inline word, or a box (a ban). `old` owns nothing to free: its buffer was the
/// limiter's (which may have moved or freed it), and passes to the new word.
///
/// # Safety
/// `old` must be the key's live log value, which `limiter` was expanded from with
/// [`expand_log`]; `limiter` owns the buffer from now on (it may have freed it).
pub unsafe fn rewrite_log(
    old: *mut c_void,
    limiter: Limiter,
    ban: Option<Ban>,
) -> Option<*mut c_void> {
    if ban.is_some() {
        return Some(boxed(limiter, ban));
    }
    match log_value(limiter) {
        Ok(value) if value == old => None,
        Ok(value) => Some(value),
        Err(limiter) => Some(into_value(limiter, None)),
    }
}

/// The inline (or pair) value a boxed limiter can become (no ban, an inline form), if any.
pub fn inline_form(packed: &PackedLimiter) -> Option<*mut c_void> {
    if packed.ban().is_some() {
        return None;
    }
    let encoded = packed.view(|limiter| with_table(|t| t.encode(limiter, None)))?;
    Some(encoded_value(encoded))
}

fn release(word: u64) {
    if let Some(releaser) = RELEASER.get() {
        releaser.release(word);
    }
}

/// Frees a value word: releases its entry reference, drops its box.
///
/// # Safety
/// `value` must be a value word this module made (`into_value`, `rewrite`, `inline_form`,
/// `copy_value`), not used afterwards. May run on any thread.
pub unsafe fn free_value(value: *mut c_void) {
    match Value::of(value) {
        Value::Inline(word) => release(word),
        Value::Pair(pair) => {
            // SAFETY: a pair pointer is a `Box<[u64; 2]>` (the caller's contract).
            let [word, _] = *unsafe { Box::from_raw(pair) };
            release(word);
        }
        // SAFETY: as above, a `Box<PackedLimiter>`.
        Value::Packed(packed) => drop(unsafe { Box::from_raw(packed) }),
        // SAFETY: a log value's buffer (the caller's contract), owned by the value alone.
        Value::Log(buffer) => drop(unsafe { SlideState::from_log_buffer(buffer) }),
        Value::Null => {}
    }
}

/// A second reference to the same value (`COPY`): the same inline word, a new pair box, or a
/// new packed box.
///
/// # Safety
/// As for [`free_value`], except that `value` stays valid.
pub unsafe fn copy_value(value: *const c_void) -> *mut c_void {
    let retain = |word: u64| {
        with_table(|t| {
            t.retain(word);
            Some(())
        })
    };
    match Value::of(value) {
        Value::Inline(word) => match retain(word) {
            Some(()) => value.cast_mut(),
            None => std::ptr::null_mut(),
        },
        // SAFETY: a live pair box.
        Value::Pair(pair) => match unsafe { pair.as_ref() }.copied() {
            Some([word, extra]) if retain(word).is_some() => pair_value(word, extra),
            _ => std::ptr::null_mut(),
        },
        // SAFETY: a live packed box.
        Value::Packed(packed) => match unsafe { packed.as_ref() } {
            Some(p) => Box::into_raw(Box::new(p.clone())).cast(),
            None => std::ptr::null_mut(),
        },
        Value::Log(buffer) => {
            // SAFETY: a live log value; the shared limiter is never dropped.
            let log = ManuallyDrop::new(unsafe { expand_log(buffer) });
            into_value(Limiter::clone(&log), None)
        }
        Value::Null => std::ptr::null_mut(),
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
    match Value::of(value) {
        // SAFETY: a live packed box.
        Value::Packed(packed) => {
            // SAFETY: a packed value's pointer is this module's live `PackedLimiter` box.
            let packed = unsafe { packed.as_ref() }?;
            Some(packed.view(|limiter| f(limiter, packed.ban())))
        }
        Value::Log(buffer) => {
            // SAFETY: a live log value; the shared limiter is never dropped.
            let log = ManuallyDrop::new(unsafe { expand_log(buffer) });
            Some(f(&log, None))
        }
        other => expand(other).map(|limiter| f(&limiter, None)),
    }
}

/// Bytes a value word owns beyond the word itself (`MEMORY USAGE`).
///
/// # Safety
/// As for [`copy_value`].
pub unsafe fn heap_bytes(value: *const c_void) -> usize {
    match Value::of(value) {
        Value::Inline(_) | Value::Null => 0,
        Value::Pair(_) => std::mem::size_of::<[u64; 2]>(),
        // SAFETY: a live log value: its buffer is all it owns.
        Value::Log(buffer) => unsafe { SlideState::log_buffer_len(buffer) },
        // SAFETY: a live packed box.
        Value::Packed(packed) => unsafe { packed.as_ref() }
            .map_or(0, |p| std::mem::size_of::<PackedLimiter>() + p.heap_bytes()),
    }
}

/// Moves a value's box to where the allocator suggests (`activedefrag`), keeping its tag;
/// inline words have nothing to move.
///
/// # Safety
/// `value` must point to a key's live value word; `alloc` is `RedisModule_DefragAlloc`.
pub unsafe fn defrag_value(
    value: *mut *mut c_void,
    alloc: impl FnOnce(*mut c_void) -> *mut c_void,
) {
    // SAFETY: `value` points to the key's live value word (the caller's contract); `moved` is where
    // the allocator moved the same allocation.
    match Value::of(unsafe { *value }) {
        Value::Pair(pair) => {
            let moved = alloc(pair.cast());
            if !moved.is_null() {
                // SAFETY: `value` points to the key's live value word (the caller's contract);
                // `moved` is where the allocator moved the same allocation.
                unsafe { *value = (moved as usize | PAIR_TAG) as *mut c_void };
            }
        }
        Value::Packed(packed) => {
            let moved = alloc(packed.cast());
            if !moved.is_null() {
                // SAFETY: `value` points to the key's live value word (the caller's contract);
                // `moved` is where the allocator moved the same allocation.
                unsafe { *value = moved };
            }
        }
        // The buffer holds no pointer to itself: moving its bytes is all it takes.
        Value::Log(buffer) => {
            let moved = alloc(buffer.cast());
            if !moved.is_null() {
                // SAFETY: `value` points to the key's live value word (the caller's contract);
                // `moved` is where the allocator moved the same allocation.
                unsafe { *value = (moved as usize | LOG_TAG) as *mut c_void };
            }
        }
        Value::Inline(_) | Value::Null => {}
    }
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
    /// An inline value is expanded for the command and encoded back into the key's value word
    /// only by `Key::changed`, after a change — except a sliding log, whose expansion may share
    /// the key's own log buffer (a log value), so that judging it in place changes the key.
    fn detached(&self) -> bool {
        matches!(self, Slot::Inline(e) if !matches!(e.limiter, Limiter::Slide(_)))
    }
}
