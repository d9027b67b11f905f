//! The `ratelimit` module data type: one value word per key — a limiter inline in the word,
//! or a `Box<PackedLimiter>` (48 bytes) for what has no inline form (`server::values`) — and the
//! callbacks Redis calls for persistence (RDB, AOF rewrite), `COPY`, `MEMORY USAGE`,
//! `DEBUG DIGEST`, freeing and defragmentation. The files hold each key's limiter in full
//! (the codec's format), never a table index: RDB and AOF stay per key and self-contained.
//!
//! Every callback goes through the pure codec (`ratelimit_core::store::codec`), which validates what it reads:
//! a corrupt or unknown payload makes `rdb_load` return NULL, which Redis turns into an error
//! (e.g. `RESTORE` answers "Bad data format"), never a crash.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use redis_module::native_types::RedisType;
use redis_module::raw::{
    self, RedisModuleDigest, RedisModuleIO, RedisModuleString, RedisModuleType,
};

use crate::shell::server::api::api;
use crate::shell::server::rdb::{AofWriter, RdbReader, RdbWriter};
use crate::shell::server::values;
use ratelimit_core::store::codec;

/// The RDB encoding version registered with Redis, which Redis writes before **every** value
/// of the type (in RDB files, `DUMP` payloads and a replica's full sync): 1, the version every
/// release loads. What a value holds is told by the payload's own format version (`codec`),
/// the lowest that holds it, so a release before a feature refuses only the values that use
/// it, and a replica of the previous release can follow this one. 0.1.0 registered 2 (it
/// loads 1 and 2) and 0.2.0 registered 3 (it loads 1 … 3): this version is never raised again.
pub const ENCODING_VERSION: i32 = 1;
/// The newest RDB encoding version this build loads: 3, written by 0.2.0.
///
/// The same rule holds for module aux data (`aux_save`): 0.1.0 and 0.2.0 have no `aux_load`,
/// and Redis exits loading an RDB (or a full sync) with aux data for a type whose module
/// cannot load it — so aux data written into every RDB makes every file unreadable by them.
/// Write it only when there is something to save (`aux_save2` skips an empty one), and say so
/// in `docs/operations.md#upgrades`; `tests/upgrade.rs` runs 0.1.0 on this build's files.
pub const NEWEST_ENCODING_VERSION: i32 = 3;

/// The name `TYPE` reports (Redis requires exactly 9 characters).
pub const TYPE_NAME: &str = "ratelimit";

/// The internal command the AOF rewrite emits to rebuild a key.
pub const RESTORE_COMMAND: &std::ffi::CStr = c"rl.restore";

pub static LIMITER_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: Some(defrag),
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

/// The registered type pointer (NULL before registration), read without any panic path.
pub fn limiter_type() -> *mut RedisModuleType {
    LIMITER_TYPE.raw_type.try_borrow().map(|t| *t).unwrap_or(ptr::null_mut())
}

/// The value's encoding (RDB, AOF, digest), or `None` for NULL.
///
/// # Safety
/// `value` must be a value word this module stored (`server::values`), or NULL.
unsafe fn encoded(value: *const c_void) -> Option<Vec<u8>> {
    // SAFETY: per `encoded`'s contract, `value` is a value word this module stored, or NULL.
    unsafe { values::with_value(value, codec::encode_value) }
}

unsafe extern "C" fn rdb_load(rdb: *mut RedisModuleIO, encver: c_int) -> *mut c_void {
    let Some(api) = api() else {
        return ptr::null_mut();
    };
    if !(ENCODING_VERSION..=NEWEST_ENCODING_VERSION).contains(&encver) {
        redis_module::logging::log_warning(format!(
            "ratelimit: refusing a value with unknown encoding version {encver}"
        ));
        return ptr::null_mut();
    }
    // SAFETY: `rdb` is the live loading handle the server passed this callback; the reader
    // does not outlive it.
    let Ok(decoded) = (unsafe { RdbReader::new(api, rdb) }).with_bytes(codec::decode_value) else {
        return ptr::null_mut();
    };
    match decoded {
        Ok((limiter, ban)) => values::into_value(limiter, ban),
        Err(e) => {
            redis_module::logging::log_warning(format!("ratelimit: refusing a value: {e}"));
            ptr::null_mut()
        }
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes this callback a value word of this type, which this module stored.
    let (Some(api), Some(bytes)) = (api(), unsafe { encoded(value) }) else {
        return;
    };
    // SAFETY: `rdb` is the live saving handle the server passed this callback; the writer does
    // not outlive it.
    let mut writer = unsafe { RdbWriter::new(api, rdb) };
    // An I/O error is the server's to report: it fails the save.
    let _ = writer.save_bytes(&bytes);
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut RedisModuleIO,
    key: *mut RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the server passes this callback a value word of this type, which this module stored.
    let (Some(api), Some(bytes)) = (api(), unsafe { encoded(value) }) else {
        return;
    };
    // SAFETY: `aof` is the live rewrite handle the server passed this callback; the writer does
    // not outlive it.
    let mut writer = unsafe { AofWriter::new(api, aof) };
    // Redis appends `PEXPIREAT key <expiry>` itself after the value's commands.
    // SAFETY: `key` is the key name the server passed this callback, live for it.
    unsafe { writer.emit_key_bytes(RESTORE_COMMAND, key, &bytes) };
}

/// An inline value costs nothing beyond the word Redis keeps anyway; a box its size.
unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: `value` is a value word this module stored.
    unsafe { values::heap_bytes(value) }
}

unsafe extern "C" fn digest(md: *mut RedisModuleDigest, value: *mut c_void) {
    // SAFETY: the server passes this callback a value word of this type, which this module stored.
    let (Some(api), Some(bytes)) = (api(), unsafe { encoded(value) }) else {
        return;
    };
    // SAFETY: `rdb`/`aof`/`digest` is the live I/O handle the server passed this callback; the
    // bytes are live for the call.
    unsafe {
        (api.digest_add_string_buffer)(md, bytes.as_ptr().cast::<c_char>(), bytes.len());
        (api.digest_end_sequence)(md);
    }
}

/// May run on a background thread (`FLUSHALL ASYNC`): `values::free_value` only drops a box
/// or releases a table reference atomically.
unsafe extern "C" fn free(value: *mut c_void) {
    // SAFETY: Redis frees each value word it holds exactly once.
    unsafe { values::free_value(value) };
}

unsafe extern "C" fn copy(
    _from: *mut RedisModuleString,
    _to: *mut RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: `value` is a value word this module stored.
    unsafe { values::copy_value(value) }
}

/// Active defragmentation (`activedefrag yes`): moves a value's box (48-byte packed, or
/// 16-byte pair) to a better place when the allocator suggests one. A box holds no pointer to
/// itself, so moving its bytes is all it takes; its own buffers (a sliding log, a boxed wide
/// value) stay where they are. Inline values have nothing to move.
unsafe extern "C" fn defrag(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    let Some(defrag_alloc) = api().and_then(|api| api.defrag_alloc) else {
        return 0;
    };
    if value.is_null() {
        return 0;
    }
    // SAFETY: `*value` is the key's live value word; DefragAlloc copies a box allocated through
    // `RedisModule_Alloc` and frees the old allocation, or returns NULL if it stays.
    unsafe { values::defrag_value(value, |ptr| defrag_alloc(ctx, ptr)) };
    0
}
