//! An open Redis key holding (or about to hold) a limiter: a small RAII wrapper over the raw
//! key API, because the crate's `RedisKeyWritable` hides the raw pointer that absolute expiry
//! (`SetAbsExpire`) needs.

use std::mem::ManuallyDrop;
use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleKey, RedisModuleString, RedisModuleType};

use crate::shell::server::api::Api;
use crate::shell::server::datatype::limiter_type;
use crate::shell::server::values::{self, Slot, Value};
use ratelimit_core::algorithms::ban::Ban;
use ratelimit_core::algorithms::limiter::Limiter;
use ratelimit_core::store::held::Expanded;

/// How a key is opened: limiting commands write, `RL.PEEK`/`RL.INFO` only read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

/// What an open key holds.
pub enum Contents<'k> {
    /// Nothing (missing or logically expired).
    Empty,
    /// One of our limiters.
    Limiter(Slot<'k>),
    /// A value of another type, by the name `TYPE` reports.
    Foreign(String),
}

/// An open key, closed on drop.
pub struct Key {
    api: &'static Api,
    ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    raw: *mut RedisModuleKey,
    /// The limiter of an inline or log value word, expanded for this command (written back by
    /// [`Key::changed`]). A log's is an [`ExpandedLog`], which writes itself back when dropped:
    /// storing, deleting, expanding another word and closing (`drop`) all drop it first.
    expansion: Option<Expansion>,
}

/// A value word expanded into its limiter for one command.
enum Expansion {
    /// An inline (or pair) value's limiter, and that word: the word keeps its entry reference
    /// and owns nothing of the limiter, so the expansion may simply be dropped (nothing changed).
    Inline { expanded: Expanded, word: *mut std::ffi::c_void },
    /// A log value's.
    Log(ExpandedLog),
}

impl Expansion {
    /// The value word it was expanded from.
    fn word(&self) -> *mut std::ffi::c_void {
        match self {
            Expansion::Inline { word, .. } => *word,
            Expansion::Log(log) => log.word,
        }
    }

    fn expanded(&mut self) -> &mut Expanded {
        match self {
            Expansion::Inline { expanded, .. } => expanded,
            Expansion::Log(log) => &mut log.expanded,
        }
    }
}

/// A log value expanded for one command: **the two-owner rule of a log value**, enforced by
/// this type. The buffer is owned by the key's value word *and* by the `SlideState` expanded
/// from it (`values::expand_log`), which may free or move it while it is judged; so while the
/// guard lives the word is never read (the guard has it), and the guard has one way out, its
/// `drop`, which settles it: writes the limiter back over the key's word
/// (`values::rewrite_log`: the same word, a new log value, an inline word or a box). `Key`
/// holds it in `expansion` and drops it before it closes the key. The core's round trip
/// (`a_log_kept_as_its_buffer_round_trips_with_one_owner_at_a_time`, `scripts/memcheck.sh`)
/// checks the protocol under Miri; through the module, `tests/algorithms.rs`
/// (`sliding_log_is_exact`, `a_log_key_settles_on_every_way_out`) and `tests/memory.rs`.
struct ExpandedLog {
    expanded: ManuallyDrop<Expanded>,
    word: *mut std::ffi::c_void,
    api: &'static Api,
    raw: *mut RedisModuleKey,
}

impl ExpandedLog {
    /// The log of the log value `word`, whose buffer it shares until it is dropped.
    ///
    /// # Safety
    /// `word` must be the live log value (its untagged `buffer`) of the open key `raw`, which
    /// stays open until the guard is dropped.
    unsafe fn new(
        api: &'static Api,
        raw: *mut RedisModuleKey,
        word: *mut std::ffi::c_void,
        buffer: *mut u8,
    ) -> ExpandedLog {
        // SAFETY: the caller's contract; the guard settles the shared buffer when dropped.
        let limiter = unsafe { values::expand_log(buffer) };
        let expanded = ManuallyDrop::new(Expanded { limiter, ban: None });
        ExpandedLog { expanded, word, api, raw }
    }
}

impl Drop for ExpandedLog {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.expanded` is not used again.
        let Expanded { limiter, ban } = unsafe { ManuallyDrop::take(&mut self.expanded) };
        // SAFETY: `self.word` is the key's live log value the limiter was expanded from (the
        // key is still open: `ExpandedLog::new`'s contract).
        if let Some(new) = unsafe { values::rewrite_log(self.word, limiter, ban) } {
            // Nothing to free: the old word's buffer was the limiter's. Should the key refuse
            // `new`, it keeps its old word, the log's buffer with it.
            // SAFETY: as above.
            let _ = unsafe { put_value(self.api, self.raw, new) };
        }
    }
}

/// Puts `value` in place of the open key `raw`'s value word (keeping its expiry); the old word,
/// which the caller frees or not, when the key took `value`.
///
/// # Safety
/// `raw` must be an open key of our type, not closed yet.
unsafe fn put_value(
    api: &Api,
    raw: *mut RedisModuleKey,
    value: *mut std::ffi::c_void,
) -> Option<*mut std::ffi::c_void> {
    let mut old: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    let status = unsafe { (api.module_type_replace_value)(raw, limiter_type(), value, &mut old) };
    (status == raw::REDISMODULE_OK as c_int).then_some(old)
}

impl Key {
    pub fn open(
        api: &'static Api,
        ctx: *mut RedisModuleCtx,
        name: *mut RedisModuleString,
        mode: Mode,
    ) -> Key {
        let flags = match mode {
            Mode::Read => raw::REDISMODULE_READ,
            Mode::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
        };
        // A read-mode open of a missing key returns NULL; every use below checks for it.
        // SAFETY: `ctx` is the call's live context and `name` one of its live strings; the key is
        // closed by `drop`.
        let raw = unsafe { (api.open_key)(ctx, name, flags as c_int) };
        Key { api, ctx, name, raw, expansion: None }
    }

    fn our_type() -> *mut RedisModuleType {
        limiter_type()
    }

    /// What the key holds.
    pub fn contents(&mut self) -> Contents<'_> {
        if self.raw.is_null() {
            return Contents::Empty;
        }
        // Ours, the common case, first: one call says so.
        let ours = Self::our_type();
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        if !ours.is_null() && unsafe { (self.api.module_type_get_type)(self.raw) } == ours {
            // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed
            // only in `drop`).
            let value = unsafe { (self.api.module_type_get_value)(self.raw) };
            return self.slot(value);
        }
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        let key_type = unsafe { (self.api.key_type)(self.raw) };
        let name = match key_type as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => return Contents::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => "string",
            raw::REDISMODULE_KEYTYPE_LIST => "list",
            raw::REDISMODULE_KEYTYPE_HASH => "hash",
            raw::REDISMODULE_KEYTYPE_SET => "set",
            raw::REDISMODULE_KEYTYPE_ZSET => "zset",
            raw::REDISMODULE_KEYTYPE_STREAM => "stream",
            // Another module's type (ours was recognised above).
            raw::REDISMODULE_KEYTYPE_MODULE => return Contents::Foreign(self.foreign_type_name()),
            _ => "unknown",
        };
        Contents::Foreign(name.to_string())
    }

    /// Our value as a slot: an inline word or a log expanded once per key (a second look
    /// returns the same expansion, changes included), or the box.
    fn slot(&mut self, value: *mut std::ffi::c_void) -> Contents<'_> {
        let fresh = !matches!(&self.expansion, Some(e) if e.word() == value);
        match Value::of(value) {
            Value::Packed(packed) => {
                // SAFETY: a live `Box<PackedLimiter>` (`server::values`); the reference lives no
                // longer than `self`.
                return match unsafe { packed.as_mut() } {
                    Some(limiter) => Contents::Limiter(Slot::Boxed(limiter)),
                    None => Contents::Empty,
                };
            }
            Value::Null => return Contents::Empty,
            Value::Log(buffer) if fresh => {
                // Settles any other expansion first (dropped).
                self.expansion = None;
                // SAFETY: the key's live log value; the key stays open while it holds the guard
                // (it drops `expansion` before closing).
                let log = unsafe { ExpandedLog::new(self.api, self.raw, value, buffer) };
                self.expansion = Some(Expansion::Log(log));
            }
            inline if fresh => {
                self.expansion = None;
                // A word whose entry is gone cannot be (the word holds a reference to it).
                let Some(limiter) = values::expand(inline) else {
                    return Contents::Empty;
                };
                let expanded = Expanded { limiter, ban: None };
                self.expansion = Some(Expansion::Inline { expanded, word: value });
            }
            _ => {}
        }
        match self.expansion.as_mut() {
            Some(expansion) => Contents::Limiter(Slot::Inline(expansion.expanded())),
            None => Contents::Empty,
        }
    }

    /// The type name another module's value reports through `TYPE` (error path only).
    fn foreign_type_name(&self) -> String {
        let fallback = || "module".to_string();
        let reply =
            // SAFETY: `ctx` is the call's live context, `name` a live string of it; the reply is
            // freed below.
            unsafe { (self.api.call)(self.ctx, c"TYPE".as_ptr(), c"s".as_ptr(), self.name) };
        if reply.is_null() {
            return fallback();
        }
        let mut len = 0usize;
        // SAFETY: `reply` is the non-NULL reply of `RM_Call` above, freed once, after its string is
        // copied.
        let ptr = unsafe { (self.api.call_reply_string_ptr)(reply, &mut len) };
        let name = if ptr.is_null() {
            fallback()
        } else {
            // SAFETY: the server gave `len` bytes at the non-NULL `ptr`, live as long as the string
            // or reply they belong to.
            let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        // SAFETY: `reply` is the non-NULL reply of `RM_Call` above, freed once, after its string is
        // copied.
        unsafe { (self.api.free_call_reply)(reply) };
        name
    }

    /// Stores `limiter` under `ban` (replacing a limiter, or creating the key) and sets the
    /// key's absolute expiry. The caller has checked that the key is empty or holds a limiter.
    pub fn store(
        &mut self,
        limiter: Limiter,
        ban: Option<Ban>,
        expire_at_ms: i64,
    ) -> Result<(), &'static str> {
        if self.raw.is_null() {
            return Err("ERR key not open for writing");
        }
        let ours = Self::our_type();
        if ours.is_null() {
            return Err("ERR ratelimit data type not registered");
        }
        let replace = match self.contents() {
            Contents::Limiter(_) => true,
            Contents::Empty => false,
            Contents::Foreign(_) => return Err("WRONGTYPE key holds another type"),
        };
        // A log's expansion settles as it is dropped.
        self.expansion = None;
        let value = values::into_value(limiter, ban);
        if replace {
            self.replace_value(value);
        } else {
            // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed
            // only in `drop`).
            let status = unsafe { (self.api.module_type_set_value)(self.raw, ours, value) };
            if status != raw::REDISMODULE_OK as c_int {
                // SAFETY: Redis did not take ownership.
                unsafe { values::free_value(value) };
                return Err("ERR could not store the limiter");
            }
        }
        self.set_expiry(expire_at_ms, false);
        Ok(())
    }

    /// Puts `value` in place of the key's value word (keeping its expiry) and frees the old
    /// one.
    fn replace_value(&mut self, value: *mut std::ffi::c_void) {
        let freed = self.put_value(value).unwrap_or(value);
        // SAFETY: the old word the key gave back, or `value` it did not take: a value word this
        // module made that the key no longer holds, freed once, here.
        unsafe { values::free_value(freed) };
    }

    /// Puts `value` in place of the key's value word (keeping its expiry); the old word, which
    /// the caller frees or not, when the key took `value`.
    fn put_value(&mut self, value: *mut std::ffi::c_void) -> Option<*mut std::ffi::c_void> {
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`), of our type.
        unsafe { put_value(self.api, self.raw, value) }
    }

    /// Writes the limiter changed in place back into the value word: an expanded inline or log
    /// value is encoded again (inline again when it can be, else a log value or boxed); a boxed
    /// one becomes inline when it now can (its ban over and gone).
    #[inline]
    fn write_back(&mut self) {
        match self.expansion.take() {
            // Settles as it is dropped.
            Some(Expansion::Log(log)) => drop(log),
            Some(Expansion::Inline { expanded, word }) => {
                // SAFETY: `word` is the key's live value word (read in `slot`, unchanged since),
                // held by the key until the rewrite is applied.
                let old = unsafe { values::OldValue::of_key(word) };
                values::rewrite(old, expanded.limiter, expanded.ban)
                    .apply(|new| self.put_value(new).is_some());
            }
            None => self.inline_form_of_box(),
        }
    }

    /// A boxed limiter that can be inline again (its ban over and gone) becomes so.
    #[inline]
    fn inline_form_of_box(&mut self) {
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        let value = unsafe { (self.api.module_type_get_value)(self.raw) };
        let Value::Packed(packed) = Value::of(value) else {
            return;
        };
        // SAFETY: a live `Box<PackedLimiter>`.
        if let Some(inline) = unsafe { packed.as_ref() }.and_then(values::inline_form) {
            self.replace_value(inline);
        }
    }

    /// Records that the value (changed in place) now resets at `expire_at_ms`: sets the
    /// absolute expiry and signals the key as modified (WATCH, client-side caching). When
    /// the expiry `may_stay` unchanged (a fixed window inside its window), it is read first:
    /// reading is cheaper than setting it again; otherwise it is set at once.
    pub fn changed(&mut self, expire_at_ms: i64, may_stay: bool) {
        if self.raw.is_null() {
            return;
        }
        self.write_back();
        self.set_expiry(expire_at_ms, may_stay);
    }

    /// [`Key::changed`] for a value that has no inline form (leases): an expanded inline
    /// value is still written back (it became a lease), a box is not checked for an inline
    /// form it cannot have.
    pub fn changed_no_inline(&mut self, expire_at_ms: i64, may_stay: bool) {
        if self.raw.is_null() {
            return;
        }
        if self.expansion.is_some() {
            self.write_back();
        }
        self.set_expiry(expire_at_ms, may_stay);
    }

    /// Sets the absolute expiry (read first when it `may_stay`) and signals the key.
    fn set_expiry(&mut self, expire_at_ms: i64, may_stay: bool) {
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        if !may_stay || unsafe { (self.api.get_abs_expire)(self.raw) } != expire_at_ms {
            // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed
            // only in `drop`).
            unsafe { (self.api.set_abs_expire)(self.raw, expire_at_ms) };
        }
        // SAFETY: `ctx` is the call's live context and `name` the live name of the key it opened.
        unsafe { (self.api.signal_modified_key)(self.ctx, self.name) };
    }

    /// Deletes the key (a limiter back in its initial state) and signals it as modified.
    pub fn delete(&mut self) {
        if self.raw.is_null() {
            return;
        }
        // A log's expansion settles as it is dropped.
        self.expansion = None;
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        unsafe { (self.api.delete_key)(self.raw) };
        // SAFETY: `ctx` is the call's live context and `name` the live name of the key it opened.
        unsafe { (self.api.signal_modified_key)(self.ctx, self.name) };
    }

    /// The key's absolute expiry in unix ms, if it has one.
    pub fn expire_at_ms(&self) -> Option<i64> {
        if self.raw.is_null() {
            return None;
        }
        // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed only in
        // `drop`).
        let at = unsafe { (self.api.get_abs_expire)(self.raw) };
        (at >= 0).then_some(at)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // The expansion first, while the key is open: a log's writes itself back.
        self.expansion = None;
        if !self.raw.is_null() {
            // SAFETY: `self.raw` is the key this handle opened and has not closed (it is closed
            // only in `drop`).
            unsafe { (self.api.close_key)(self.raw) };
        }
    }
}
