//! An open Redis key holding (or about to hold) a limiter: a small RAII wrapper over the raw
//! key API, because the crate's `RedisKeyWritable` hides the raw pointer that absolute expiry
//! (`SetAbsExpire`) needs.

use std::os::raw::c_int;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleKey, RedisModuleString, RedisModuleType};

use super::api::Api;
use super::datatype::limiter_type;
use ratelimit_core::packed::PackedLimiter;

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
    Limiter(&'k mut PackedLimiter),
    /// A value of another type, by the name `TYPE` reports.
    Foreign(String),
}

/// An open key, closed on drop.
pub struct Key {
    api: &'static Api,
    ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    raw: *mut RedisModuleKey,
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
        let raw = unsafe { (api.open_key)(ctx, name, flags as c_int) };
        Key { api, ctx, name, raw }
    }

    fn our_type() -> *mut RedisModuleType {
        limiter_type()
    }

    /// What the key holds.
    pub fn contents(&mut self) -> Contents<'_> {
        if self.raw.is_null() {
            return Contents::Empty;
        }
        let key_type = unsafe { (self.api.key_type)(self.raw) };
        let name = match key_type as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => return Contents::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => "string",
            raw::REDISMODULE_KEYTYPE_LIST => "list",
            raw::REDISMODULE_KEYTYPE_HASH => "hash",
            raw::REDISMODULE_KEYTYPE_SET => "set",
            raw::REDISMODULE_KEYTYPE_ZSET => "zset",
            raw::REDISMODULE_KEYTYPE_STREAM => "stream",
            raw::REDISMODULE_KEYTYPE_MODULE => {
                let ours = Self::our_type();
                if !ours.is_null() && unsafe { (self.api.module_type_get_type)(self.raw) } == ours {
                    let value = unsafe { (self.api.module_type_get_value)(self.raw) }
                        .cast::<PackedLimiter>();
                    // SAFETY: values of our type are always `Box<PackedLimiter>` pointers (set in
                    // `store`, `rdb_load`, `copy`); the reference lives no longer than `self`.
                    return match unsafe { value.as_mut() } {
                        Some(limiter) => Contents::Limiter(limiter),
                        None => Contents::Empty,
                    };
                }
                return Contents::Foreign(self.foreign_type_name());
            }
            _ => "unknown",
        };
        Contents::Foreign(name.to_string())
    }

    /// The type name another module's value reports through `TYPE` (error path only).
    fn foreign_type_name(&self) -> String {
        let fallback = || "module".to_string();
        let reply =
            unsafe { (self.api.call)(self.ctx, c"TYPE".as_ptr(), c"s".as_ptr(), self.name) };
        if reply.is_null() {
            return fallback();
        }
        let mut len = 0usize;
        let ptr = unsafe { (self.api.call_reply_string_ptr)(reply, &mut len) };
        let name = if ptr.is_null() {
            fallback()
        } else {
            let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
            String::from_utf8_lossy(bytes).into_owned()
        };
        unsafe { (self.api.free_call_reply)(reply) };
        name
    }

    /// Stores `value` (replacing a limiter in place, or creating the key) and sets the key's
    /// absolute expiry. The caller has checked that the key is empty or holds a limiter.
    pub fn store(&mut self, value: PackedLimiter, expire_at_ms: i64) -> Result<(), &'static str> {
        if self.raw.is_null() {
            return Err("ERR key not open for writing");
        }
        match self.contents() {
            Contents::Limiter(existing) => *existing = value,
            Contents::Empty => {
                let ours = Self::our_type();
                if ours.is_null() {
                    return Err("ERR ratelimit data type not registered");
                }
                let boxed = Box::into_raw(Box::new(value));
                let status =
                    unsafe { (self.api.module_type_set_value)(self.raw, ours, boxed.cast()) };
                if status != raw::REDISMODULE_OK as c_int {
                    // SAFETY: Redis did not take ownership; reclaim and drop the box.
                    drop(unsafe { Box::from_raw(boxed) });
                    return Err("ERR could not store the limiter");
                }
            }
            Contents::Foreign(_) => return Err("WRONGTYPE key holds another type"),
        }
        self.changed(expire_at_ms);
        Ok(())
    }

    /// Records that the value (changed in place) now resets at `expire_at_ms`: sets the
    /// absolute expiry and signals the key as modified (WATCH, client-side caching).
    pub fn changed(&mut self, expire_at_ms: i64) {
        if self.raw.is_null() {
            return;
        }
        // A fixed window keeps its end while calls are admitted inside it: reading the expiry
        // is cheaper than setting it again.
        if unsafe { (self.api.get_abs_expire)(self.raw) } != expire_at_ms {
            unsafe { (self.api.set_abs_expire)(self.raw, expire_at_ms) };
        }
        unsafe { (self.api.signal_modified_key)(self.ctx, self.name) };
    }

    /// Deletes the key (a limiter back in its initial state) and signals it as modified.
    pub fn delete(&mut self) {
        if self.raw.is_null() {
            return;
        }
        unsafe { (self.api.delete_key)(self.raw) };
        unsafe { (self.api.signal_modified_key)(self.ctx, self.name) };
    }

    /// The key's absolute expiry in unix ms, if it has one.
    pub fn expire_at_ms(&self) -> Option<i64> {
        if self.raw.is_null() {
            return None;
        }
        let at = unsafe { (self.api.get_abs_expire)(self.raw) };
        (at >= 0).then_some(at)
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            unsafe { (self.api.close_key)(self.raw) };
        }
    }
}
