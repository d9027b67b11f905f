//! The Redis module API functions the shell calls, resolved once at load time.
//!
//! The crate exposes each API as an `Option<fn>` static that is `None` on servers that lack
//! it. Resolving them all in `OnLoad` lets the module refuse to load with a clear log line on
//! a server that is too old (e.g. `SetAbsExpire` needs Redis ≥ 7.0.5), and lets command paths
//! call them without any `unwrap` that could abort the server.

use std::os::raw::{c_char, c_int, c_long, c_longlong, c_void};
use std::sync::OnceLock;

use redis_module::raw;
use redis_module::raw::{
    RedisModuleCallReply, RedisModuleCtx, RedisModuleDigest, RedisModuleIO, RedisModuleKey,
    RedisModuleString, RedisModuleType,
};

/// Resolved API entry points.
pub struct Api {
    pub milliseconds: unsafe extern "C" fn() -> c_longlong,
    pub open_key: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        *mut RedisModuleString,
        c_int,
    ) -> *mut RedisModuleKey,
    pub close_key: unsafe extern "C" fn(*mut RedisModuleKey),
    pub delete_key: unsafe extern "C" fn(*mut RedisModuleKey) -> c_int,
    pub key_type: unsafe extern "C" fn(*mut RedisModuleKey) -> c_int,
    pub module_type_get_type: unsafe extern "C" fn(*mut RedisModuleKey) -> *mut RedisModuleType,
    pub module_type_get_value: unsafe extern "C" fn(*mut RedisModuleKey) -> *mut c_void,
    pub module_type_set_value:
        unsafe extern "C" fn(*mut RedisModuleKey, *mut RedisModuleType, *mut c_void) -> c_int,
    pub set_abs_expire: unsafe extern "C" fn(*mut RedisModuleKey, c_longlong) -> c_int,
    pub get_abs_expire: unsafe extern "C" fn(*mut RedisModuleKey) -> c_longlong,
    pub replicate:
        unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char, *const c_char, ...) -> c_int,
    pub replicate_verbatim: unsafe extern "C" fn(*mut RedisModuleCtx) -> c_int,
    pub signal_modified_key:
        unsafe extern "C" fn(*mut RedisModuleCtx, *mut RedisModuleString) -> c_int,
    pub string_ptr_len: unsafe extern "C" fn(*const RedisModuleString, *mut usize) -> *const c_char,
    pub reply_with_array: unsafe extern "C" fn(*mut RedisModuleCtx, c_long) -> c_int,
    pub reply_with_map: unsafe extern "C" fn(*mut RedisModuleCtx, c_long) -> c_int,
    pub reply_with_long_long: unsafe extern "C" fn(*mut RedisModuleCtx, c_longlong) -> c_int,
    pub reply_with_simple_string: unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char) -> c_int,
    pub reply_with_string_buffer:
        unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char, usize) -> c_int,
    pub reply_with_error: unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char) -> c_int,
    pub reply_with_null: unsafe extern "C" fn(*mut RedisModuleCtx) -> c_int,
    pub call: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        *const c_char,
        *const c_char,
        ...
    ) -> *mut RedisModuleCallReply,
    pub call_reply_string_ptr:
        unsafe extern "C" fn(*mut RedisModuleCallReply, *mut usize) -> *const c_char,
    pub free_call_reply: unsafe extern "C" fn(*mut RedisModuleCallReply),
    pub save_string_buffer: unsafe extern "C" fn(*mut RedisModuleIO, *const c_char, usize),
    pub load_string_buffer: unsafe extern "C" fn(*mut RedisModuleIO, *mut usize) -> *mut c_char,
    pub is_io_error: unsafe extern "C" fn(*mut RedisModuleIO) -> c_int,
    pub free: unsafe extern "C" fn(*mut c_void),
    pub emit_aof: unsafe extern "C" fn(*mut RedisModuleIO, *const c_char, *const c_char, ...),
    pub digest_add_string_buffer:
        unsafe extern "C" fn(*mut RedisModuleDigest, *const c_char, usize),
    pub digest_end_sequence: unsafe extern "C" fn(*mut RedisModuleDigest),
    pub set_module_options: unsafe extern "C" fn(*mut RedisModuleCtx, c_int),
    pub create_string_from_long_long:
        unsafe extern "C" fn(*mut RedisModuleCtx, c_longlong) -> *mut RedisModuleString,
    pub free_string: unsafe extern "C" fn(*mut RedisModuleCtx, *mut RedisModuleString),
    pub notify_keyspace_event: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        c_int,
        *const c_char,
        *mut RedisModuleString,
    ) -> c_int,
    pub is_keys_position_request: unsafe extern "C" fn(*mut RedisModuleCtx) -> c_int,
    pub key_at_pos_with_flags: unsafe extern "C" fn(*mut RedisModuleCtx, c_int, c_int),
    pub block_client: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        raw::RedisModuleCmdFunc,
        raw::RedisModuleCmdFunc,
        Option<unsafe extern "C" fn(*mut RedisModuleCtx, *mut c_void)>,
        c_longlong,
    ) -> *mut raw::RedisModuleBlockedClient,
    pub unblock_client:
        unsafe extern "C" fn(*mut raw::RedisModuleBlockedClient, *mut c_void) -> c_int,
    pub set_disconnect_callback:
        unsafe extern "C" fn(*mut raw::RedisModuleBlockedClient, raw::RedisModuleDisconnectFunc),
    pub get_blocked_client_private_data: unsafe extern "C" fn(*mut RedisModuleCtx) -> *mut c_void,
    pub create_timer: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        raw::mstime_t,
        raw::RedisModuleTimerProc,
        *mut c_void,
    ) -> raw::RedisModuleTimerID,
    pub stop_timer: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        raw::RedisModuleTimerID,
        *mut *mut c_void,
    ) -> c_int,
    pub get_context_flags: unsafe extern "C" fn(*mut RedisModuleCtx) -> c_int,
    pub subscribe_to_server_event: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        raw::RedisModuleEvent,
        raw::RedisModuleEventCallback,
    ) -> c_int,
    pub get_server_info: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        *const c_char,
    ) -> *mut raw::RedisModuleServerInfoData,
    pub free_server_info:
        unsafe extern "C" fn(*mut RedisModuleCtx, *mut raw::RedisModuleServerInfoData),
    pub server_info_get_field_c:
        unsafe extern "C" fn(*mut raw::RedisModuleServerInfoData, *const c_char) -> *const c_char,
    pub server_info_get_field_signed: unsafe extern "C" fn(
        *mut raw::RedisModuleServerInfoData,
        *const c_char,
        *mut c_int,
    ) -> c_longlong,
    pub module_type_replace_value: unsafe extern "C" fn(
        *mut RedisModuleKey,
        *mut RedisModuleType,
        *mut c_void,
        *mut *mut c_void,
    ) -> c_int,
    pub subscribe_to_keyspace_events:
        unsafe extern "C" fn(*mut RedisModuleCtx, c_int, raw::RedisModuleNotificationFunc) -> c_int,
    pub select_db: unsafe extern "C" fn(*mut RedisModuleCtx, c_int) -> c_int,
    pub get_selected_db: unsafe extern "C" fn(*mut RedisModuleCtx) -> c_int,
    pub hold_string:
        unsafe extern "C" fn(*mut RedisModuleCtx, *mut RedisModuleString) -> *mut RedisModuleString,
    /// The string `AT`, created once at load and never freed (appended to every propagated
    /// call that had no `AT` of its own).
    pub at_keyword: StaticString,

    // Registration and persistence: data types, commands, RDB/AOF I/O (`server::registry`,
    // `server::datatype`, `server::snapshot`, `server::rdb`).
    pub create_string:
        unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char, usize) -> *mut RedisModuleString,
    pub create_data_type: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        *const c_char,
        c_int,
        *mut raw::RedisModuleTypeMethods,
    ) -> *mut RedisModuleType,
    pub create_command: unsafe extern "C" fn(
        *mut RedisModuleCtx,
        *const c_char,
        raw::RedisModuleCmdFunc,
        *const c_char,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub create_subcommand: unsafe extern "C" fn(
        *mut raw::RedisModuleCommand,
        *const c_char,
        raw::RedisModuleCmdFunc,
        *const c_char,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub get_command:
        unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char) -> *mut raw::RedisModuleCommand,
    pub set_command_info: unsafe extern "C" fn(
        *mut raw::RedisModuleCommand,
        *const raw::RedisModuleCommandInfo,
    ) -> c_int,
    /// Redis 7.2+ and Valkey only (`None` on Redis 7.0).
    pub set_command_acl_categories:
        Option<unsafe extern "C" fn(*mut raw::RedisModuleCommand, *const c_char) -> c_int>,
    /// Redis 7.2+ and Valkey only (`None` on Redis 7.0).
    pub add_acl_category: Option<unsafe extern "C" fn(*mut RedisModuleCtx, *const c_char) -> c_int>,
    /// `None` where the server has no active defragmentation API.
    pub defrag_alloc:
        Option<unsafe extern "C" fn(*mut raw::RedisModuleDefragCtx, *mut c_void) -> *mut c_void>,
}

/// A module string that lives as long as the module.
pub struct StaticString(pub *mut RedisModuleString);

// SAFETY: created once in `OnLoad`, never freed or mutated; Redis runs commands on one thread.
unsafe impl Send for StaticString {}
// SAFETY: as for `Send`: shared only to be read (appended to propagated calls).
unsafe impl Sync for StaticString {}

static API: OnceLock<Api> = OnceLock::new();

impl Api {
    /// The server's clock: unix time in ms (`RM_Milliseconds`, cached per command by the
    /// server).
    pub fn now_ms(&self) -> i64 {
        // SAFETY: `RM_Milliseconds` takes no arguments and may be called from any context of
        // the main thread; the pointer was resolved from the server at load.
        unsafe { (self.milliseconds)() }
    }

    /// The bytes of one of the strings of a call's argument vector, borrowed for as long as
    /// the vector (the server keeps its strings alive for the whole call).
    pub fn arg_bytes<'a>(&self, arg: &'a *mut RedisModuleString) -> &'a [u8] {
        // SAFETY: `arg` is an element of the argument vector the server passed this call (or
        // that a waiter holds, `HoldString`), whose strings live as long as the vector.
        unsafe { bytes(self, *arg) }
    }

    /// Whether the server asks only for this call's key positions (`COMMAND GETKEYS`,
    /// cluster routing) rather than running it.
    pub fn is_keys_position_request(&self, ctx: *mut RedisModuleCtx) -> bool {
        // SAFETY: `ctx` is the live context the server passed to the command callback.
        unsafe { (self.is_keys_position_request)(ctx) != 0 }
    }

    /// Answers a key-position request: argument `position` is a key, with `flags`.
    pub fn key_at(&self, ctx: *mut RedisModuleCtx, position: c_int, flags: c_int) {
        // SAFETY: as in `is_keys_position_request`.
        unsafe { (self.key_at_pos_with_flags)(ctx, position, flags) };
    }
}

// --- Safe wrappers for one call (`execution::call`) and for module load (`shell::init`).

impl Api {
    /// Whether the call replays what was already judged: a replica applying its master's
    /// stream (`REPLICATED`) or a server loading its AOF (`LOADING`).
    #[inline]
    pub fn is_replayed(&self, ctx: *mut RedisModuleCtx) -> bool {
        let flags = self.context_flags(ctx);
        flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
    }

    /// Announces a change of `key` as a keyspace event named `event` in the module class
    /// (`notify-keyspace-events` flag `d`). Free when notifications are off.
    #[inline]
    pub fn notify_module_event(
        &self,
        ctx: *mut RedisModuleCtx,
        event: &std::ffi::CStr,
        key: *mut RedisModuleString,
    ) {
        let class = raw::REDISMODULE_NOTIFY_MODULE as c_int;
        // SAFETY: `ctx` is the call's live context, `key` one of its live strings (or one the
        // module holds), the event name NUL-terminated; the server copies what it keeps.
        unsafe { (self.notify_keyspace_event)(ctx, class, event.as_ptr(), key) };
    }

    /// Sets the module's options (`REDISMODULE_OPTIONS_*` bits), at load.
    pub fn set_options(&self, ctx: *mut RedisModuleCtx, options: c_int) {
        // SAFETY: `ctx` is the `OnLoad` context; the call only stores the bits.
        unsafe { (self.set_module_options)(ctx, options) };
    }
}

/// The argument vector the server passed a command, as a slice (empty if malformed).
#[inline]
pub fn arguments<'a>(
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> &'a [*mut RedisModuleString] {
    match usize::try_from(argc) {
        // SAFETY: the server passes `argc` valid strings at `argv` that outlive the command
        // call (the caller's `'a`).
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    }
}

// --- End of the wrappers for one call and for module load.

/// The resolved API; `None` only if `resolve` has not succeeded (the module would not have
/// loaded), so callers reply with an error instead of panicking.
pub fn api() -> Option<&'static Api> {
    API.get()
}

macro_rules! resolve {
    ($name:ident) => {
        // Copy the `Option<fn>` out of the static before inspecting it.
        // SAFETY: the server filled the API statics in `OnLoad` before `init` runs, on this
        // (main) thread; nothing writes them afterwards, so reading one is a plain copy.
        match unsafe { raw::$name } {
            Some(f) => f,
            None => return Err(stringify!($name)),
        }
    };
}

/// An API function some supported servers lack: `None` there.
macro_rules! resolve_optional {
    ($name:ident) => {
        // SAFETY: as in `resolve!`: a plain copy of a static the server filled in `OnLoad`.
        unsafe { raw::$name }
    };
}

/// Resolves every API function; on failure names the first one the server lacks.
pub fn resolve() -> Result<&'static Api, &'static str> {
    let api = Api {
        milliseconds: resolve!(RedisModule_Milliseconds),
        open_key: resolve!(RedisModule_OpenKey),
        close_key: resolve!(RedisModule_CloseKey),
        delete_key: resolve!(RedisModule_DeleteKey),
        key_type: resolve!(RedisModule_KeyType),
        module_type_get_type: resolve!(RedisModule_ModuleTypeGetType),
        module_type_get_value: resolve!(RedisModule_ModuleTypeGetValue),
        module_type_set_value: resolve!(RedisModule_ModuleTypeSetValue),
        set_abs_expire: resolve!(RedisModule_SetAbsExpire),
        get_abs_expire: resolve!(RedisModule_GetAbsExpire),
        replicate: resolve!(RedisModule_Replicate),
        replicate_verbatim: resolve!(RedisModule_ReplicateVerbatim),
        signal_modified_key: resolve!(RedisModule_SignalModifiedKey),
        string_ptr_len: resolve!(RedisModule_StringPtrLen),
        reply_with_array: resolve!(RedisModule_ReplyWithArray),
        reply_with_map: resolve!(RedisModule_ReplyWithMap),
        reply_with_long_long: resolve!(RedisModule_ReplyWithLongLong),
        reply_with_simple_string: resolve!(RedisModule_ReplyWithSimpleString),
        reply_with_string_buffer: resolve!(RedisModule_ReplyWithStringBuffer),
        reply_with_error: resolve!(RedisModule_ReplyWithError),
        reply_with_null: resolve!(RedisModule_ReplyWithNull),
        call: resolve!(RedisModule_Call),
        call_reply_string_ptr: resolve!(RedisModule_CallReplyStringPtr),
        free_call_reply: resolve!(RedisModule_FreeCallReply),
        save_string_buffer: resolve!(RedisModule_SaveStringBuffer),
        load_string_buffer: resolve!(RedisModule_LoadStringBuffer),
        is_io_error: resolve!(RedisModule_IsIOError),
        free: resolve!(RedisModule_Free),
        emit_aof: resolve!(RedisModule_EmitAOF),
        digest_add_string_buffer: resolve!(RedisModule_DigestAddStringBuffer),
        digest_end_sequence: resolve!(RedisModule_DigestEndSequence),
        set_module_options: resolve!(RedisModule_SetModuleOptions),
        create_string_from_long_long: resolve!(RedisModule_CreateStringFromLongLong),
        free_string: resolve!(RedisModule_FreeString),
        notify_keyspace_event: resolve!(RedisModule_NotifyKeyspaceEvent),
        is_keys_position_request: resolve!(RedisModule_IsKeysPositionRequest),
        key_at_pos_with_flags: resolve!(RedisModule_KeyAtPosWithFlags),
        block_client: resolve!(RedisModule_BlockClient),
        unblock_client: resolve!(RedisModule_UnblockClient),
        set_disconnect_callback: resolve!(RedisModule_SetDisconnectCallback),
        get_blocked_client_private_data: resolve!(RedisModule_GetBlockedClientPrivateData),
        create_timer: resolve!(RedisModule_CreateTimer),
        stop_timer: resolve!(RedisModule_StopTimer),
        get_context_flags: resolve!(RedisModule_GetContextFlags),
        subscribe_to_server_event: resolve!(RedisModule_SubscribeToServerEvent),
        get_server_info: resolve!(RedisModule_GetServerInfo),
        free_server_info: resolve!(RedisModule_FreeServerInfo),
        server_info_get_field_c: resolve!(RedisModule_ServerInfoGetFieldC),
        server_info_get_field_signed: resolve!(RedisModule_ServerInfoGetFieldSigned),
        module_type_replace_value: resolve!(RedisModule_ModuleTypeReplaceValue),
        subscribe_to_keyspace_events: resolve!(RedisModule_SubscribeToKeyspaceEvents),
        select_db: resolve!(RedisModule_SelectDb),
        get_selected_db: resolve!(RedisModule_GetSelectedDb),
        hold_string: resolve!(RedisModule_HoldString),
        at_keyword: {
            let create = resolve!(RedisModule_CreateString);
            // A NULL context: the string is not auto-freed with any command's context.
            // SAFETY: `create` was just resolved; the text is a NUL-terminated static of 2 bytes.
            let at = unsafe { create(std::ptr::null_mut(), c"AT".as_ptr(), 2) };
            if at.is_null() {
                return Err("RedisModule_CreateString");
            }
            StaticString(at)
        },

        create_string: resolve!(RedisModule_CreateString),
        create_data_type: resolve!(RedisModule_CreateDataType),
        create_command: resolve!(RedisModule_CreateCommand),
        create_subcommand: resolve!(RedisModule_CreateSubcommand),
        get_command: resolve!(RedisModule_GetCommand),
        set_command_info: resolve!(RedisModule_SetCommandInfo),
        set_command_acl_categories: resolve_optional!(RedisModule_SetCommandACLCategories),
        add_acl_category: resolve_optional!(RedisModule_AddACLCategory),
        defrag_alloc: resolve_optional!(RedisModule_DefragAlloc),
    };
    Ok(API.get_or_init(|| api))
}

/// The bytes of a module string, borrowed (binary safe; no copy).
///
/// # Safety
/// `s` must be a valid `RedisModuleString` that outlives the returned slice.
pub unsafe fn bytes<'a>(api: &Api, s: *const RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `s` is a live string (the caller's contract); the server returns its buffer and
    // length.
    let ptr = unsafe { (api.string_ptr_len)(s, &mut len) };
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: the server gave `len` bytes at the non-NULL `ptr`, live as long as the string or
    // reply they belong to.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

// Safe wrappers for the layers above that hold a context or a string only to pass it back
// (the waiting room: `server::blocking`, `server::timers`, `server::events`).

/// The server's context for a command, callback or timer, as the layers above hold it: only
/// passed back to the server (and its wrappers here), never dereferenced.
pub type Ctx = *mut RedisModuleCtx;

/// A server string (an argument, or one the module holds), as the layers above hold it: only
/// passed back to the server (and its wrappers here), never dereferenced.
pub type ServerString = *mut RedisModuleString;

impl Api {
    /// The database the context has selected (`RM_GetSelectedDb`).
    pub fn selected_db(&self, ctx: Ctx) -> i32 {
        // SAFETY: `ctx` is the live context the server passed to this call, callback or timer.
        unsafe { (self.get_selected_db)(ctx) }
    }

    /// Selects database `db` in the context (`RM_SelectDb`), as a timer does before opening a
    /// waiter's key; a database that does not exist leaves the selection unchanged.
    pub fn switch_db(&self, ctx: Ctx, db: i32) {
        // SAFETY: `ctx` is the live context the server passed to this call, callback or timer.
        unsafe { (self.select_db)(ctx, db) };
    }

    /// The context's flags (`RM_GetContextFlags`, `REDISMODULE_CTX_FLAGS_*`).
    pub fn context_flags(&self, ctx: Ctx) -> u32 {
        // SAFETY: `ctx` is the live context the server passed to this call, callback or timer.
        unsafe { (self.get_context_flags)(ctx) as u32 }
    }
}
