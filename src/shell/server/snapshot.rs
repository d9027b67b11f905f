//! State kept beside the keyspace, saved into snapshots: a module data type whose values are
//! opaque bytes (a [`BlobType`]), with module aux data, registered from plain Rust functions
//! (the `extern "C"` callbacks are here); the one key of such a type a save may put into db 0
//! and a load takes out ([`Registered::put`], [`Registered::remove`]).
//! The server events of saves and loads arrive typed from `server::events`.
//!
//! The layers above implement [`BlobType`] and register their handlers for the events with
//! `server::events::on`; this file names no layer above it.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use redis_module::raw::{
    self, RedisModuleCtx, RedisModuleIO, RedisModuleKey, RedisModuleString, RedisModuleType,
};

use super::api::Api;
use super::events::EventContext;
use super::rdb::{AofWriter, RdbReader, RdbWriter};

/// Whether this server calls `aux_save2` (Redis 7.2+, Valkey: those with
/// `SetCommandACLCategories`, which came in the same release); then a type's aux data may
/// write nothing at all. Redis 7.0 has only `aux_save`, which writes a record into every RDB.
pub fn has_aux_save2(api: &Api) -> bool {
    api.set_command_acl_categories.is_some()
}

/// A module data type whose values are opaque bytes (a `Vec<u8>` the server layer owns) and
/// which carries module aux data, written before the keyspace. The implementor supplies plain
/// functions; [`register`] makes the server's callbacks from them.
///
/// **Ownership**: a value is a `Box<Vec<u8>>` made here, owned by the server from the moment
/// it is stored in a key (or returned by a load) and freed here by the type's `free` callback;
/// an implementor never sees the pointer.
pub trait BlobType: 'static {
    /// The type's name (the server requires exactly 9 characters).
    const NAME: &'static CStr;
    /// The encoding version the server writes before each value and each aux record.
    const ENCODING_VERSION: i32;

    /// A value read from an RDB, `DUMP` payload or sync (written with the version `encver`):
    /// its bytes, or `None` to refuse it (the load or `RESTORE` then fails).
    fn load_value(rdb: &mut RdbReader, encver: i32) -> Option<Vec<u8>>;

    /// Appends the commands that rebuild a value of these `bytes` to a rewritten AOF.
    fn rewrite_value(aof: &mut AofWriter, bytes: &[u8]);

    /// Reads the aux record written with the version `encver`; `false` fails the load.
    fn load_aux(rdb: &mut RdbReader, encver: i32) -> bool;

    /// Writes the aux record, or nothing (then no record at all is in the file). Called only
    /// where the server has `aux_save2` ([`has_aux_save2`]).
    fn save_aux(rdb: &mut RdbWriter);
}

/// A registered [`BlobType`]: what puts its values into keys.
#[derive(Clone, Copy)]
pub struct Registered {
    raw_type: *mut RedisModuleType,
}

// SAFETY: the type pointer is created once at load, never freed or changed by the server; it
// is only compared and passed back to the server on its main thread.
unsafe impl Send for Registered {}
// SAFETY: as for `Send`.
unsafe impl Sync for Registered {}

/// Registers the type `T` (module load), its aux data written before the keyspace where the
/// server has `aux_save2`, and never with `aux_save` (see [`has_aux_save2`]).
pub fn register<T: BlobType>(api: &Api, ctx: *mut RedisModuleCtx) -> Result<Registered, String> {
    let mut methods = raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: None,
        digest: None,
        free: Some(free),
        aux_load: Some(aux_load::<T>),
        // Never `aux_save`: on Redis 7.0 it would write a record into every RDB. 7.0 reads the
        // method struct up to its version 4, which ends before `aux_save2`.
        aux_save: None,
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: if has_aux_save2(api) { Some(aux_save2::<T>) } else { None },
    };
    // SAFETY: called from `OnLoad` with its context; the name is a static NUL-terminated
    // string and `methods` outlives the call (the server copies the fields it reads).
    let created =
        unsafe { (api.create_data_type)(ctx, T::NAME.as_ptr(), T::ENCODING_VERSION, &mut methods) };
    if created.is_null() {
        return Err(format!("could not create the {} type", T::NAME.to_string_lossy()));
    }
    Ok(Registered { raw_type: created })
}

/// What [`Registered::put`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Put {
    /// The key holds the bytes.
    Stored,
    /// The key holds a value of another type (a user's key of that name), left alone.
    Foreign,
    /// The server could not open the key or store the value.
    Failed,
}

impl Registered {
    /// Stores `bytes` as the value of the key `name` in db 0 (selecting db 0 on `ctx`),
    /// replacing a value of this type; a key of another type is left alone.
    ///
    /// `ctx` must be the live context of the server event being handled.
    pub fn put(&self, api: &Api, ctx: *mut EventContext, name: &[u8], bytes: Vec<u8>) -> Put {
        let Some(key) = Db0Key::open(api, ctx, name) else {
            return Put::Failed;
        };
        if !key.is_empty_or(self.raw_type) {
            return Put::Foreign;
        }
        let value = Box::into_raw(Box::new(bytes)).cast::<c_void>();
        // SAFETY: the key is open for writing; the server owns `value` from here and frees it
        // through this type's `free`.
        let status = unsafe { (api.module_type_set_value)(key.raw, self.raw_type, value) };
        if status == raw::REDISMODULE_OK as c_int {
            Put::Stored
        } else {
            Put::Failed
        }
    }

    /// Deletes the key `name` in db 0 (selecting db 0 on `ctx`) if it holds a value of this
    /// type.
    ///
    /// `ctx` must be the live context of the server event being handled.
    pub fn remove(&self, api: &Api, ctx: *mut EventContext, name: &[u8]) {
        let Some(key) = Db0Key::open(api, ctx, name) else {
            return;
        };
        if !key.is_empty() && key.is_empty_or(self.raw_type) {
            // SAFETY: the key is open for writing.
            unsafe { (api.delete_key)(key.raw) };
        }
    }
}

/// A key of db 0 open for writing, closed on drop.
struct Db0Key<'a> {
    api: &'a Api,
    raw: *mut RedisModuleKey,
}

impl<'a> Db0Key<'a> {
    /// Selects db 0 on the event's `ctx` and opens `name` there; `None` on failure.
    fn open(api: &'a Api, ctx: *mut EventContext, name: &[u8]) -> Option<Self> {
        // SAFETY: `ctx` is the event's live context; the name's bytes live across the call.
        let name_string =
            unsafe { (api.create_string)(ctx, name.as_ptr().cast::<c_char>(), name.len()) };
        if name_string.is_null() {
            return None;
        }
        // SAFETY: `ctx` is the event's live context; db 0 always exists.
        unsafe { (api.select_db)(ctx, 0) };
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: `ctx` and `name_string` are live; the key is closed by `drop`.
        let key = unsafe { (api.open_key)(ctx, name_string, mode) };
        // SAFETY: made above; the key keeps its own reference to the name.
        unsafe { (api.free_string)(ctx, name_string) };
        (!key.is_null()).then_some(Db0Key { api, raw: key })
    }

    fn kind(&self) -> c_int {
        // SAFETY: the key is open.
        unsafe { (self.api.key_type)(self.raw) }
    }

    fn is_empty(&self) -> bool {
        self.kind() == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
    }

    /// Whether the key is empty or holds a value of `module_type`.
    fn is_empty_or(&self, module_type: *mut RedisModuleType) -> bool {
        let kind = self.kind();
        kind == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
            || (kind == raw::REDISMODULE_KEYTYPE_MODULE as c_int
                // SAFETY: the key is open and holds a module value.
                && unsafe { (self.api.module_type_get_type)(self.raw) } == module_type)
    }
}

impl Drop for Db0Key<'_> {
    fn drop(&mut self) {
        // SAFETY: opened in `open`, closed once.
        unsafe { (self.api.close_key)(self.raw) };
    }
}

/// A value of a [`BlobType`] as its bytes.
///
/// # Safety
/// `value` must be a value of a [`BlobType`] (a `Box<Vec<u8>>` made here) or NULL, live for
/// `'a`.
unsafe fn blob<'a>(value: *const c_void) -> Option<&'a [u8]> {
    // SAFETY: per the function's contract.
    unsafe { value.cast::<Vec<u8>>().as_ref() }.map(Vec::as_slice)
}

unsafe extern "C" fn rdb_load<T: BlobType>(rdb: *mut RedisModuleIO, encver: c_int) -> *mut c_void {
    let Some(api) = super::api::api() else {
        return std::ptr::null_mut();
    };
    // SAFETY: `rdb` is the live loading handle of this callback; the reader does not outlive it.
    let mut reader = unsafe { RdbReader::new(api, rdb) };
    match T::load_value(&mut reader, encver) {
        Some(bytes) => Box::into_raw(Box::new(bytes)).cast::<c_void>(),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server passes a value of this type.
    let (Some(api), Some(bytes)) = (super::api::api(), unsafe { blob(value) }) else {
        return;
    };
    // SAFETY: `rdb` is the live saving handle of this callback; the writer does not outlive it.
    let mut writer = unsafe { RdbWriter::new(api, rdb) };
    // An I/O error is the server's to report: it fails the save.
    let _ = writer.save_bytes(bytes);
}

unsafe extern "C" fn aof_rewrite<T: BlobType>(
    aof: *mut RedisModuleIO,
    _key: *mut RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: the server passes a value of this type.
    let (Some(api), Some(bytes)) = (super::api::api(), unsafe { blob(value) }) else {
        return;
    };
    // SAFETY: `aof` is the live rewrite handle of this callback; the writer does not outlive it.
    let mut writer = unsafe { AofWriter::new(api, aof) };
    T::rewrite_value(&mut writer, bytes);
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: every value of a blob type is a `Box<Vec<u8>>` made here; the server frees
        // each once.
        drop(unsafe { Box::from_raw(value.cast::<Vec<u8>>()) });
    }
}

unsafe extern "C" fn aux_load<T: BlobType>(
    rdb: *mut RedisModuleIO,
    encver: c_int,
    _when: c_int,
) -> c_int {
    let Some(api) = super::api::api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: `rdb` is the live loading handle of this callback; the reader does not outlive it.
    let mut reader = unsafe { RdbReader::new(api, rdb) };
    if T::load_aux(&mut reader, encver) {
        raw::REDISMODULE_OK as c_int
    } else {
        raw::REDISMODULE_ERR as c_int
    }
}

unsafe extern "C" fn aux_save2<T: BlobType>(rdb: *mut RedisModuleIO, _when: c_int) {
    let Some(api) = super::api::api() else {
        return;
    };
    // SAFETY: `rdb` is the live saving handle of this callback; the writer does not outlive it.
    let mut writer = unsafe { RdbWriter::new(api, rdb) };
    T::save_aux(&mut writer);
}
