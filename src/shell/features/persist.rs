//! Policies in RDB files: the table is module aux data of a type of its own, `rl-policy`,
//! which holds no keys — saved before the keyspace (`REDISMODULE_AUX_BEFORE_RDB`) in the
//! policy codec's format, loaded back whole.
//!
//! **Compatibility with the previous releases** (0.1.0 and 0.2.0 have no aux loader, and Redis
//! exits loading an RDB with aux data no loaded module can read): on servers with `aux_save2`
//! (Redis 7.2+, Valkey) an empty table writes nothing at all, so an RDB without policies is
//! byte-for-byte what those releases read. Redis 7.0 has only `aux_save`, which writes a record
//! into every RDB even when empty: there the type is registered only when the module is loaded
//! with `ratelimit.policies-in-rdb yes` (then every RDB carries the record); otherwise policies
//! live in the AOF and the replication stream only, and `RL.POLICY SET` logs a warning.
//!
//! Loading replaces the table: every load (restart, `DEBUG RELOAD`, a replica's full sync, an
//! AOF) starts from an empty table (`loading_started`), since an RDB without the record holds
//! no policies.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleIO, RedisModuleString};

use crate::shell::features::policies;
use crate::shell::server::api::api;
use ratelimit_core::features::policy::PolicyTable;

/// The aux type's name (Redis requires exactly 9 characters).
const TYPE_NAME: &std::ffi::CStr = c"rl-policy";
/// Its encoding version (the payload carries its own format version too).
const ENCODING_VERSION: c_int = 1;

/// `ratelimit.policies-in-rdb` (load time; matters on Redis 7.0 only, see the module docs).
pub static POLICIES_IN_RDB: AtomicBool = AtomicBool::new(false);

/// Whether the table is saved in RDB files on this server (set once at load).
static SAVED_IN_RDB: AtomicBool = AtomicBool::new(false);

/// Whether policies reach RDB files here (`false` on Redis 7.0 without
/// `ratelimit.policies-in-rdb yes`).
pub fn saved_in_rdb() -> bool {
    SAVED_IN_RDB.load(Ordering::Relaxed)
}

/// Registers the aux type (module load). Servers with `RedisModule_SetCommandACLCategories`
/// (7.2+, Valkey) also have `aux_save2`.
pub fn init(ctx: *mut RedisModuleCtx) -> Result<(), String> {
    let has_aux_save2 = unsafe { raw::RedisModule_SetCommandACLCategories }.is_some();
    if !has_aux_save2 && !POLICIES_IN_RDB.load(Ordering::Relaxed) {
        return Ok(());
    }
    let create =
        unsafe { raw::RedisModule_CreateDataType }.ok_or("RedisModule_CreateDataType missing")?;
    let mut methods = raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(no_key_load),
        rdb_save: Some(no_key_save),
        aof_rewrite: Some(no_key_rewrite),
        mem_usage: None,
        digest: None,
        free: Some(no_key_free),
        aux_load: Some(aux_load),
        // With both, a server that has `aux_save2` calls it (and writes nothing for an empty
        // table); 7.0 reads only the fields up to `aux_save`.
        aux_save: Some(aux_save),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: if has_aux_save2 { Some(aux_save) } else { None },
    };
    let created = unsafe { create(ctx, TYPE_NAME.as_ptr(), ENCODING_VERSION, &raw mut methods) };
    if created.is_null() {
        return Err("could not create the rl-policy aux type".into());
    }
    SAVED_IN_RDB.store(true, Ordering::Relaxed);
    Ok(())
}

/// A load starts (restart, `DEBUG RELOAD`, a full sync, an AOF): the table it brings, or
/// none, replaces this one.
pub fn loading_started() {
    policies::replace_table(PolicyTable::new());
}

/// A fork was born. When it is an AOF rewrite, the new base file may not carry the table (module
/// aux data reaches only an RDB preamble, and Redis 7.0 without `policies-in-rdb` writes none):
/// the table goes into the new incremental file instead, which the rewrite opened just before
/// the fork — as the `RL.POLICY SET` commands that make it, propagated now (replicas get them
/// too; they change nothing there). So a rewrite with or without the preamble keeps policies.
pub fn fork_born(ctx: *mut RedisModuleCtx) {
    let Some(api) = api() else {
        return;
    };
    let Some(create) = (unsafe { raw::RedisModule_CreateString }) else {
        return;
    };
    if !aof_rewrite_in_progress(ctx) {
        return;
    }
    let Ok(commands) = policies::with_table(|t| {
        Ok(t.set_commands()
            .into_iter()
            .map(|c| c.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>())
            .collect::<Vec<_>>())
    }) else {
        return;
    };
    for command in commands {
        let strings: Vec<*mut RedisModuleString> = std::iter::once(&b"SET"[..])
            .chain(command.iter().map(Vec::as_slice))
            .map(|a| unsafe { create(ctx, a.as_ptr().cast::<c_char>(), a.len()) })
            .collect();
        unsafe {
            (api.replicate)(
                ctx,
                c"rl.policy".as_ptr(),
                c"v".as_ptr(),
                strings.as_ptr(),
                strings.len(),
            )
        };
        for s in strings {
            unsafe { (api.free_string)(ctx, s) };
        }
    }
}

/// `INFO persistence`'s `aof_rewrite_in_progress` is 1.
fn aof_rewrite_in_progress(ctx: *mut RedisModuleCtx) -> bool {
    let Some(api) = api() else {
        return false;
    };
    let info = unsafe { (api.get_server_info)(ctx, c"persistence".as_ptr()) };
    if info.is_null() {
        return false;
    }
    let mut err: c_int = 0;
    let field = c"aof_rewrite_in_progress";
    let value = unsafe { (api.server_info_get_field_signed)(info, field.as_ptr(), &mut err) };
    unsafe { (api.free_server_info)(ctx, info) };
    err == 0 && value == 1
}

unsafe extern "C" fn aux_save(rdb: *mut RedisModuleIO, _when: c_int) {
    let Some(api) = api() else {
        return;
    };
    let Ok(bytes) = policies::with_table(|t| Ok((!t.is_empty()).then(|| t.encode()))) else {
        return;
    };
    // Redis 7.0's `aux_save` has written the record's header already: write an empty table.
    let bytes = bytes.unwrap_or_else(|| PolicyTable::new().encode());
    if bytes.len() > 1 || !saved_with_aux_save2() {
        unsafe { (api.save_string_buffer)(rdb, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
    }
}

/// Whether this server calls `aux_save2` (then saving nothing writes no record).
fn saved_with_aux_save2() -> bool {
    unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
}

unsafe extern "C" fn aux_load(rdb: *mut RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    if encver != ENCODING_VERSION {
        redis_module::logging::log_warning(format!(
            "ratelimit: refusing policies with unknown encoding version {encver}"
        ));
        return raw::REDISMODULE_ERR as c_int;
    }
    let mut len = 0usize;
    let buffer = unsafe { (api.load_string_buffer)(rdb, &mut len) };
    if unsafe { (api.is_io_error)(rdb) } != 0 || buffer.is_null() {
        return raw::REDISMODULE_ERR as c_int;
    }
    let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) };
    let decoded = PolicyTable::decode(bytes);
    unsafe { (api.free)(buffer.cast()) };
    match decoded {
        Ok(table) => {
            policies::replace_table(table);
            raw::REDISMODULE_OK as c_int
        }
        Err(e) => {
            redis_module::logging::log_warning(format!("ratelimit: refusing policies: {e}"));
            raw::REDISMODULE_ERR as c_int
        }
    }
}

// The type holds no keys: these are never called, and do nothing if they were.

unsafe extern "C" fn no_key_load(_rdb: *mut RedisModuleIO, _encver: c_int) -> *mut c_void {
    ptr::null_mut()
}

unsafe extern "C" fn no_key_save(_rdb: *mut RedisModuleIO, _value: *mut c_void) {}

unsafe extern "C" fn no_key_rewrite(
    _aof: *mut RedisModuleIO,
    _key: *mut RedisModuleString,
    _value: *mut c_void,
) {
}

unsafe extern "C" fn no_key_free(_value: *mut c_void) {}
