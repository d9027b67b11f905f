//! The policy table's durability: it survives every load Redis does — a restart from an RDB
//! file or an AOF (with or without the RDB preamble), `DEBUG RELOAD`, a replica's full sync
//! (disk or diskless, `swapdb` too) — by default, on every server, Redis 7.0 included.
//!
//! **Two carriers, one type.** The table travels as the module type `rl-policy` (encoding
//! version 1, the policy codec's bytes, `PolicyTable::encode`):
//! - **RDB aux data** on servers with `aux_save2` (Redis 7.2+, Valkey), written before the
//!   keyspace, and nothing at all for an empty table;
//! - a **carrier key** (`CARRIER_KEY` in db 0, a value of the same type) wherever aux data
//!   cannot do it: Redis 7.0 has only `aux_save`, which writes a record into *every* RDB even
//!   when empty (so an RDB without policies could no longer be read by 0.2.0), and module aux
//!   data never reaches an AOF rewritten without the RDB preamble. The key exists only in the
//!   snapshot: it is put into db 0 when a save starts (`PERSISTENCE` event: in the fork child
//!   for `BGSAVE`, a full sync and `BGREWRITEAOF`, so the server itself never holds it; for a
//!   synchronous `SAVE`/`DEBUG RELOAD`/shutdown in the server, then removed as the save ends),
//!   only when the table is not empty. Its `rdb_save` writes the table, its `aof_rewrite`
//!   writes the `RL.POLICY SET` commands that make it, and its `rdb_load` (accepted only while
//!   the server loads, so a crafted `RESTORE` payload is refused) reads the table back; the
//!   key is deleted as the load ends, before any client can see it.
//!
//! Every server registers the type with `aux_load`, so every RDB any earlier 0.3.0 wrote loads
//! (with or without the old opt-in `ratelimit.policies-in-rdb`, which is now accepted and
//! ignored). Nothing is propagated when a save or an AOF rewrite starts.
//!
//! **The table follows the keyspace.** A load starts from an empty table (an RDB or AOF
//! without policies holds none); the table it brings replaces this one; a failed load empties
//! it with the keys. A replica loading with `repl-diskless-load swapdb` loads into a staged
//! table instead (`REPL_ASYNC_LOAD` events): Redis keeps the replica's own keys and functions
//! if the load is aborted, and the replica keeps its own table too; on completion the staged
//! table replaces it. Each load logs how many policies it brought and from where.

use std::cell::{Cell, RefCell};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use redis_module::logging::{log_notice, log_warning};
use redis_module::raw::{self, RedisModuleCtx, RedisModuleIO, RedisModuleString, RedisModuleType};

use crate::shell::features::policies;
use crate::shell::server::api::{api, Api};
use crate::shell::server::events;
use ratelimit_core::features::policy::PolicyTable;

/// The type's name (Redis requires exactly 9 characters).
const TYPE_NAME: &std::ffi::CStr = c"rl-policy";
/// Its encoding version (the payload carries its own format version too).
const ENCODING_VERSION: c_int = 1;
/// The carrier key's name (db 0). It exists only in snapshots and while they load.
const CARRIER_KEY: &[u8] = b"__ratelimit_policy_table__";

/// `ratelimit.policies-in-rdb`: accepted for configurations written for earlier builds (it was
/// Redis 7.0's opt-in); ignored, policies are always saved.
pub static POLICIES_IN_RDB: AtomicBool = AtomicBool::new(false);

/// The registered type (null until `init`).
static POLICY_TYPE: AtomicPtr<RedisModuleType> = AtomicPtr::new(ptr::null_mut());

/// Where a load reads from, for the log.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Source {
    RdbFile,
    Aof,
    Master,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::RdbFile => "the RDB file",
            Source::Aof => "the AOF",
            Source::Master => "the master (full sync)",
        }
    }
}

/// A `repl-diskless-load swapdb` full sync: its table is staged until Redis swaps the loaded
/// data in (`COMPLETED`) or drops it (`ABORTED`). The load's own end (`LOADING` `ENDED`/`FAILED`)
/// comes before that event on Redis 7.x and after it on Redis 8 (RDB channel): the state lasts
/// until both were heard.
struct SwapdbLoad {
    /// The sync's table (`None` once swapped in or dropped).
    staged: Option<PolicyTable>,
    /// `COMPLETED` or `ABORTED` was heard.
    decided: bool,
    /// The load's end was heard.
    load_ended: bool,
}

thread_local! {
    /// The load under way, if any (the main thread's; a fork child never loads).
    static LOADING: Cell<Option<Source>> = const { Cell::new(None) };
    /// A `swapdb` full sync under way, if any.
    static SWAPDB: RefCell<Option<SwapdbLoad>> = const { RefCell::new(None) };
    /// Whether a synchronous save put the carrier key into this process's db 0.
    static CARRIER_IN_SERVER: Cell<bool> = const { Cell::new(false) };
}

/// Whether this server calls `aux_save2` (Redis 7.2+, Valkey: those with
/// `RedisModule_SetCommandACLCategories`); then an empty table writes no aux record.
fn has_aux_save2() -> bool {
    // SAFETY: reads (copies) an `Option<fn>` the crate set at load; no call is made.
    unsafe { raw::RedisModule_SetCommandACLCategories }.is_some()
}

/// Registers the `rl-policy` type and the server events it hears (module load), on every
/// server.
pub fn init(ctx: *mut RedisModuleCtx) -> Result<(), String> {
    let api = api().ok_or("the module API is not resolved")?;
    events::on(api, ctx, raw::REDISMODULE_EVENT_PERSISTENCE, on_persistence)?;
    events::on(api, ctx, raw::REDISMODULE_EVENT_LOADING, on_loading)?;
    events::on(api, ctx, raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD, on_async_load)?;
    // SAFETY: copies an `Option<fn>` the crate set at load.
    let create =
        unsafe { raw::RedisModule_CreateDataType }.ok_or("RedisModule_CreateDataType missing")?;
    let mut methods = raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(carrier_load),
        rdb_save: Some(carrier_save),
        aof_rewrite: Some(carrier_rewrite),
        mem_usage: None,
        digest: None,
        free: Some(carrier_free),
        aux_load: Some(aux_load),
        // Never `aux_save`: on Redis 7.0 it would write a record into every RDB (the carrier
        // key does the job there). 7.0 reads the method struct up to its version 4, which
        // ends before `aux_save2`.
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
        aux_save2: if has_aux_save2() { Some(aux_save2) } else { None },
    };
    // SAFETY: called from `OnLoad` with its context; `methods` outlives the call (Redis copies
    // the fields it reads).
    let created = unsafe { create(ctx, TYPE_NAME.as_ptr(), ENCODING_VERSION, &raw mut methods) };
    if created.is_null() {
        return Err("could not create the rl-policy type".into());
    }
    POLICY_TYPE.store(created, Ordering::Relaxed);
    Ok(())
}

/// A `PERSISTENCE` server event. A save starts: when the snapshot needs the carrier key
/// (Redis 7.0's RDB files, any AOF rewrite), put it in — in the fork child, or in the server
/// for a synchronous save, then taken out as the save ends.
fn on_persistence(ctx: *mut RedisModuleCtx, subevent: u64) {
    let Some(api) = api() else {
        return;
    };
    use raw::{
        REDISMODULE_SUBEVENT_PERSISTENCE_AOF_START as AOF_START,
        REDISMODULE_SUBEVENT_PERSISTENCE_ENDED as ENDED,
        REDISMODULE_SUBEVENT_PERSISTENCE_FAILED as FAILED,
        REDISMODULE_SUBEVENT_PERSISTENCE_RDB_START as RDB_START,
        REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_AOF_START as SYNC_AOF_START,
        REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_RDB_START as SYNC_RDB_START,
    };
    let rdb_needs_carrier = !has_aux_save2();
    match subevent {
        // In a fork child: its copy of the data only.
        AOF_START => {
            put_carrier(api, ctx);
        }
        RDB_START if rdb_needs_carrier => {
            put_carrier(api, ctx);
        }
        // In the server: taken out again as the save ends.
        SYNC_AOF_START => CARRIER_IN_SERVER.set(put_carrier(api, ctx)),
        SYNC_RDB_START if rdb_needs_carrier => CARRIER_IN_SERVER.set(put_carrier(api, ctx)),
        ENDED | FAILED if CARRIER_IN_SERVER.replace(false) => remove_carrier(api, ctx),
        _ => {}
    }
}

/// A `LOADING` server event: a load starts (the table it brings, or none, replaces this one;
/// a `swapdb` sync loads into its staged table), ends (the carrier key goes; the table is
/// logged) or fails (the table is emptied with the keys, unless it is a `swapdb` sync's).
fn on_loading(ctx: *mut RedisModuleCtx, subevent: u64) {
    let source = match subevent {
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START => Some(Source::RdbFile),
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START => Some(Source::Aof),
        raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => Some(Source::Master),
        _ => None,
    };
    if let Some(source) = source {
        LOADING.set(Some(source));
        if !swapdb_under_way() {
            policies::replace_table(PolicyTable::new());
        }
        return;
    }
    let ended = match subevent {
        raw::REDISMODULE_SUBEVENT_LOADING_ENDED => true,
        raw::REDISMODULE_SUBEVENT_LOADING_FAILED => false,
        _ => return,
    };
    let source = LOADING.take();
    if let Some(api) = api() {
        remove_carrier(api, ctx);
    }
    // A `swapdb` sync: its own events settle the table.
    let swapdb = SWAPDB.with(|s| {
        let mut state = s.borrow_mut();
        let Some(load) = state.as_mut() else {
            return false;
        };
        load.load_ended = true;
        if load.decided {
            *state = None;
        }
        true
    });
    if swapdb {
        return;
    }
    if ended {
        log_table(&format!(
            "loaded the policy table from {}",
            source.map_or("a load", Source::describe)
        ));
    } else {
        policies::replace_table(PolicyTable::new());
        log_warning("ratelimit: the load failed: the policy table is emptied with the keys");
    }
}

/// A `REPL_ASYNC_LOAD` server event (`repl-diskless-load swapdb`): the sync's table is staged
/// while it loads; an aborted sync drops it (the replica keeps its own, as Redis keeps its
/// keys and functions), a completed one swaps it in.
fn on_async_load(ctx: *mut RedisModuleCtx, subevent: u64) {
    if subevent == raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_STARTED {
        let load =
            SwapdbLoad { staged: Some(PolicyTable::new()), decided: false, load_ended: false };
        SWAPDB.with(|s| *s.borrow_mut() = Some(load));
        return;
    }
    let completed = match subevent {
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED => true,
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED => false,
        _ => return,
    };
    let staged = SWAPDB.with(|s| {
        let mut state = s.borrow_mut();
        let load = state.as_mut()?;
        load.decided = true;
        let staged = load.staged.take();
        if load.load_ended {
            *state = None;
        }
        staged
    });
    if completed {
        if let Some(table) = staged {
            policies::replace_table(table);
        }
        // The loaded data was swapped in, carrier key included.
        if let Some(api) = api() {
            remove_carrier(api, ctx);
        }
        log_table("loaded the policy table from the master (full sync, swapdb)");
    } else {
        log_table("the full sync was aborted: kept its own policy table");
    }
}

/// Whether a `swapdb` sync is loading into its staged table.
fn swapdb_under_way() -> bool {
    SWAPDB.with(|s| s.borrow().as_ref().is_some_and(|load| load.staged.is_some()))
}

/// Logs `what` and the live table's size.
fn log_table(what: &str) {
    let (policies, overrides) = counts_live();
    log_notice(format!("ratelimit: {what}: {policies} policies, {overrides} overrides"));
}

/// Policies and overrides in the live table.
fn counts_live() -> (usize, usize) {
    policies::with_table(|t| {
        let policies = t.names().len();
        Ok((policies, t.entries().saturating_sub(policies)))
    })
    .unwrap_or((0, 0))
}

/// A table read from a file or a sync: into the staged table during a `swapdb` sync, else
/// live.
fn loaded(table: PolicyTable) {
    let live = SWAPDB.with(|s| match s.borrow_mut().as_mut().and_then(|l| l.staged.as_mut()) {
        Some(staged) => {
            *staged = table;
            None
        }
        None => Some(table),
    });
    if let Some(table) = live {
        policies::replace_table(table);
    }
}

/// The carrier key's value: the encoded table.
struct Carrier {
    encoded: Vec<u8>,
}

/// Opens the carrier key in db 0 for writing (the caller closes it); null on failure.
fn open_carrier(api: &Api, ctx: *mut RedisModuleCtx) -> *mut raw::RedisModuleKey {
    // SAFETY: copies an `Option<fn>` the crate set at load.
    let Some(create) = (unsafe { raw::RedisModule_CreateString }) else {
        return ptr::null_mut();
    };
    // SAFETY: `ctx` is the server event's context; the name is a static byte string.
    let name = unsafe { create(ctx, CARRIER_KEY.as_ptr().cast::<c_char>(), CARRIER_KEY.len()) };
    if name.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `ctx` is valid for the event; db 0 always exists.
    unsafe { (api.select_db)(ctx, 0) };
    let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
    // SAFETY: `ctx` and `name` are valid; the key is closed by the caller.
    let key = unsafe { (api.open_key)(ctx, name, mode) };
    // SAFETY: the key keeps its own reference to the name.
    unsafe { (api.free_string)(ctx, name) };
    key
}

/// Whether the open `key` is empty or already a carrier (anything else is a user's key of
/// the same name, left alone).
fn is_ours_or_empty(api: &Api, key: *mut raw::RedisModuleKey) -> bool {
    // SAFETY: `key` is an open key.
    let kind = unsafe { (api.key_type)(key) };
    if kind == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
        return true;
    }
    // SAFETY: `key` is an open key holding a module value.
    kind == raw::REDISMODULE_KEYTYPE_MODULE as c_int
        && unsafe { (api.module_type_get_type)(key) } == POLICY_TYPE.load(Ordering::Relaxed)
}

/// Puts the table into the carrier key (nothing for an empty table). Whether it did.
fn put_carrier(api: &Api, ctx: *mut RedisModuleCtx) -> bool {
    let encoded = policies::with_table(|t| Ok((!t.is_empty()).then(|| t.encode())));
    let Ok(Some(encoded)) = encoded else {
        return false;
    };
    let policy_type = POLICY_TYPE.load(Ordering::Relaxed);
    let key = open_carrier(api, ctx);
    if key.is_null() || policy_type.is_null() {
        return false;
    }
    let put = if is_ours_or_empty(api, key) {
        let value = Box::into_raw(Box::new(Carrier { encoded })).cast::<c_void>();
        // SAFETY: `key` is open for writing; Redis owns `value` from here and frees it through
        // `carrier_free`.
        unsafe {
            (api.module_type_set_value)(key, policy_type, value) == raw::REDISMODULE_OK as c_int
        }
    } else {
        log_warning(format!(
            "ratelimit: db 0 has a key named {} of another type: policies are not in this \
             snapshot",
            String::from_utf8_lossy(CARRIER_KEY)
        ));
        false
    };
    // SAFETY: `key` was opened above.
    unsafe { (api.close_key)(key) };
    put
}

/// Deletes the carrier key, if db 0 holds one.
fn remove_carrier(api: &Api, ctx: *mut RedisModuleCtx) {
    let key = open_carrier(api, ctx);
    if key.is_null() {
        return;
    }
    // SAFETY: `key` is an open key.
    let kind = unsafe { (api.key_type)(key) };
    if kind != raw::REDISMODULE_KEYTYPE_EMPTY as c_int && is_ours_or_empty(api, key) {
        // SAFETY: `key` is open for writing.
        unsafe { (api.delete_key)(key) };
    }
    // SAFETY: `key` was opened above.
    unsafe { (api.close_key)(key) };
}

/// Reads one string buffer (the encoded table) from `io`; `None` on an I/O error.
fn load_bytes(api: &Api, io: *mut RedisModuleIO) -> Option<Vec<u8>> {
    let mut len = 0usize;
    // SAFETY: `io` is the loading context Redis passed to the callback.
    let buffer = unsafe { (api.load_string_buffer)(io, &mut len) };
    // SAFETY: as above.
    if unsafe { (api.is_io_error)(io) } != 0 || buffer.is_null() {
        return None;
    }
    // SAFETY: Redis returned `len` readable bytes at `buffer`, freed right after the copy.
    let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) }.to_vec();
    // SAFETY: `buffer` came from `load_string_buffer`.
    unsafe { (api.free)(buffer.cast()) };
    Some(bytes)
}

/// Decodes a table read from a file or a sync; logs and refuses what does not decode.
fn decode(bytes: &[u8]) -> Option<PolicyTable> {
    match PolicyTable::decode(bytes) {
        Ok(table) => Some(table),
        Err(e) => {
            log_warning(format!("ratelimit: refusing policies: {e}"));
            None
        }
    }
}

unsafe extern "C" fn aux_save2(rdb: *mut RedisModuleIO, _when: c_int) {
    let Some(api) = api() else {
        return;
    };
    let Ok(Some(bytes)) = policies::with_table(|t| Ok((!t.is_empty()).then(|| t.encode()))) else {
        return;
    };
    // SAFETY: `rdb` is the saving context Redis passed; the bytes live across the call.
    unsafe { (api.save_string_buffer)(rdb, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

unsafe extern "C" fn aux_load(rdb: *mut RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    if encver != ENCODING_VERSION {
        log_warning(format!("ratelimit: refusing policies with unknown encoding version {encver}"));
        return raw::REDISMODULE_ERR as c_int;
    }
    match load_bytes(api, rdb).as_deref().and_then(decode) {
        Some(table) => {
            loaded(table);
            raw::REDISMODULE_OK as c_int
        }
        None => raw::REDISMODULE_ERR as c_int,
    }
}

/// The carrier key's value, loaded: the table it holds replaces the table (staged during a
/// `swapdb` sync). Refused outside a load (a `RESTORE` payload).
unsafe extern "C" fn carrier_load(rdb: *mut RedisModuleIO, encver: c_int) -> *mut c_void {
    let Some(api) = api() else {
        return ptr::null_mut();
    };
    if encver != ENCODING_VERSION {
        return ptr::null_mut();
    }
    if LOADING.get().is_none() {
        log_warning("ratelimit: refusing a policy table outside a load (a RESTORE payload)");
        return ptr::null_mut();
    }
    let Some(encoded) = load_bytes(api, rdb) else {
        return ptr::null_mut();
    };
    let Some(table) = decode(&encoded) else {
        return ptr::null_mut();
    };
    loaded(table);
    Box::into_raw(Box::new(Carrier { encoded })).cast::<c_void>()
}

/// The carrier key's value as an `&Carrier`.
///
/// # Safety
/// `value` must be a value this type stored (a `Box<Carrier>` pointer).
unsafe fn carrier<'a>(value: *mut c_void) -> Option<&'a Carrier> {
    // SAFETY: per the function's contract.
    unsafe { value.cast::<Carrier>().as_ref() }
}

unsafe extern "C" fn carrier_save(rdb: *mut RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis passes a value of this type.
    let (Some(api), Some(carrier)) = (api(), unsafe { carrier(value) }) else {
        return;
    };
    let bytes = &carrier.encoded;
    // SAFETY: `rdb` is the saving context Redis passed; the bytes live across the call.
    unsafe { (api.save_string_buffer)(rdb, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

/// An AOF rewritten without the RDB preamble gets the table as the `RL.POLICY SET` commands
/// that make it.
unsafe extern "C" fn carrier_rewrite(
    aof: *mut RedisModuleIO,
    _key: *mut RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: Redis passes a value of this type.
    let (Some(api), Some(carrier)) = (api(), unsafe { carrier(value) }) else {
        return;
    };
    // SAFETY: copies an `Option<fn>` the crate set at load.
    let Some(create) = (unsafe { raw::RedisModule_CreateString }) else {
        return;
    };
    let Ok(table) = PolicyTable::decode(&carrier.encoded) else {
        return;
    };
    for command in table.set_commands() {
        let strings: Vec<*mut RedisModuleString> = std::iter::once(&b"SET"[..])
            .chain(command.iter().copied())
            // SAFETY: a NULL context makes a string this function frees below.
            .map(|a| unsafe { create(ptr::null_mut(), a.as_ptr().cast::<c_char>(), a.len()) })
            .collect();
        if strings.iter().all(|s| !s.is_null()) {
            // SAFETY: `aof` is the rewrite's context; "v" takes the array and its length.
            unsafe {
                (api.emit_aof)(
                    aof,
                    c"RL.POLICY".as_ptr(),
                    c"v".as_ptr(),
                    strings.as_ptr(),
                    strings.len(),
                )
            };
        }
        for s in strings.into_iter().filter(|s| !s.is_null()) {
            // SAFETY: made above with a NULL context, freed once.
            unsafe { (api.free_string)(ptr::null_mut(), s) };
        }
    }
}

unsafe extern "C" fn carrier_free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: every value of this type is a `Box<Carrier>` made by this module.
        drop(unsafe { Box::from_raw(value.cast::<Carrier>()) });
    }
}
