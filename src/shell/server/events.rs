//! Every event the server tells the module about, in one place: the server events (loading,
//! saving, forks, replication, `swapdb` syncs, Valkey 9's atomic slot migration) and the
//! keyspace events (a key deleted, expired or evicted). This file subscribes to all of them and
//! fans each out: to the server layer's own rooms (propagation doubts it is alone, `slots`
//! marks exported slots), and to the [`Listeners`] the features registered at load (the policy
//! table's storage, the waiting room). It names no feature: the shell's `init` hands it the
//! listeners, so the server layer imports nothing above it.

use std::ffi::{c_char, c_void};
use std::os::raw::c_int;
use std::sync::OnceLock;

use redis_module::raw::{self, RedisModuleCtx, RedisModuleEvent, RedisModuleString};

use crate::shell::server::api::{self, Api};
use crate::shell::server::propagation;
use crate::shell::server::slots::{
    atomic_migration, mark_exporting, ranges_of, redis_ranges_of, AtomicMigration,
    EVENT_ATOMIC_SLOT_MIGRATION, EXPORT_ABORTED, EXPORT_COMPLETED, EXPORT_STARTED, IMPORT_ABORTED,
    IMPORT_COMPLETED, IMPORT_STARTED, OPTION_HANDLE_ATOMIC_SLOT_MIGRATION,
};

/// What the features do on an event, registered once at load (`shell::init`).
pub struct Listeners {
    /// A save started, ended or failed (`REDISMODULE_EVENT_PERSISTENCE`'s subevent).
    pub persistence: fn(*mut RedisModuleCtx, u64),
    /// A `repl-diskless-load swapdb` sync started, aborted or completed.
    pub async_load: fn(*mut RedisModuleCtx, u64),
    /// A load (RDB, AOF, replication) started, ended or failed.
    pub loading: fn(*mut RedisModuleCtx, u64),
    /// These slot ranges were handed to another node (an atomic slot migration's export ended).
    pub slots_left: fn(*mut RedisModuleCtx, &[(u16, u16)]),
    /// These slot ranges stay here (the export was cancelled or failed).
    pub slots_stayed: fn(*mut RedisModuleCtx, &[(u16, u16)]),
    /// A key was deleted, expired or evicted: it may have room for its waiters.
    pub key_gone: fn(*mut RedisModuleCtx, *mut RedisModuleString),
}

static LISTENERS: OnceLock<Listeners> = OnceLock::new();

/// The keyspace events subscribed to in [`init`].
unsafe extern "C" fn on_keyspace_event(
    ctx: *mut RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut RedisModuleString,
) -> c_int {
    if let Some(listeners) = LISTENERS.get() {
        if !key.is_null() {
            (listeners.key_gone)(ctx, key);
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// The server events this module hears (a module has one callback per event): every event
/// that can give propagation a consumer is a doubt; loads, saves and `swapdb` syncs also go to
/// the listeners (the policy table's storage).
unsafe extern "C" fn on_server_event(
    ctx: *mut RedisModuleCtx,
    event: RedisModuleEvent,
    subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    let Some(listeners) = LISTENERS.get() else {
        return;
    };
    match event.id {
        raw::REDISMODULE_EVENT_PERSISTENCE => (listeners.persistence)(ctx, subevent),
        raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD => (listeners.async_load)(ctx, subevent),
        id => {
            if let Some(api) = api::api() {
                propagation::doubt(api);
            }
            if id == raw::REDISMODULE_EVENT_LOADING {
                (listeners.loading)(ctx, subevent);
            }
        }
    }
}

/// Subscribes to every server event the module hears and keeps `listeners` for them; puts
/// propagation's flag down. Fails (so the module refuses to load) if the server refuses a
/// subscription: without the events verbatim propagation would not be provably safe.
pub fn init(api: &Api, ctx: *mut RedisModuleCtx, listeners: Listeners) -> Result<(), String> {
    if LISTENERS.set(listeners).is_err() {
        return Err("server events subscribed twice".to_string());
    }
    propagation::doubt(api);
    // Waiters are judged again when their key may have gained room: deleted, expired, evicted.
    let keyspace = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    // SAFETY: the load context; the callback lives as long as the module.
    unsafe { (api.subscribe_to_keyspace_events)(ctx, keyspace, Some(on_keyspace_event)) };
    let events = [
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
        raw::REDISMODULE_EVENT_PERSISTENCE,
        raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
    ];
    for id in events {
        let event = RedisModuleEvent { id, dataver: 1 };
        // SAFETY: the load context; the callback lives as long as the module.
        let status = unsafe { (api.subscribe_to_server_event)(ctx, event, Some(on_server_event)) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not subscribe to server event {id}"));
        }
    }
    Ok(())
}

/// The module options to add for atomic slot migration, and the migration events heard:
/// - Valkey ≥ 9: the option flag, and its event (19); a server that refuses the subscription
///   gets no flag (a migration would then go unheard);
/// - Redis ≥ 8.4: no flag exists (its migration needs no opt-in); its event
///   (`REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION`, 18) is heard the same way. **Untested**: no
///   Redis 8.4+ binary was reachable when this was written (`docs/operations.md`).
///
/// Elsewhere nothing: Redis stores whatever option bits it is given, and the two servers
/// number these events differently (Redis' 19 is its trim event).
pub fn declares_atomic_slot_migration(api: &Api, ctx: *mut RedisModuleCtx) -> c_int {
    let (id, callback, option): (u64, raw::RedisModuleEventCallback, c_int) =
        match atomic_migration(api, ctx) {
            AtomicMigration::None => return 0,
            AtomicMigration::Valkey => (
                EVENT_ATOMIC_SLOT_MIGRATION,
                Some(on_atomic_slot_migration),
                OPTION_HANDLE_ATOMIC_SLOT_MIGRATION,
            ),
            AtomicMigration::Redis => {
                (raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION, Some(on_redis_slot_migration), 0)
            }
        };
    let event = RedisModuleEvent { id, dataver: 1 };
    // SAFETY: the load context; the callback lives as long as the module.
    let status = unsafe { (api.subscribe_to_server_event)(ctx, event, callback) };
    if status != raw::REDISMODULE_OK as c_int {
        redis_module::logging::log_warning(
            "ratelimit: the server refused its slot migration event; not declaring support",
        );
        return 0;
    }
    option
}

/// The atomic slot migration event (Valkey ≥ 9).
unsafe extern "C" fn on_atomic_slot_migration(
    ctx: *mut RedisModuleCtx,
    event: RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    // SAFETY: the server passes this event's data.
    let ranges = unsafe { ranges_of(data) };
    migration_event(ctx, event, subevent, &ranges);
}

/// A migration's step (Valkey's subevent numbers), on the slots it moves.
fn migration_event(
    ctx: *mut RedisModuleCtx,
    _event: RedisModuleEvent,
    subevent: u64,
    ranges: &[(u16, u16)],
) {
    let what = match subevent {
        EXPORT_STARTED => {
            mark_exporting(ranges, true);
            propagation::doubt_now();
            "export started"
        }
        EXPORT_COMPLETED => {
            mark_exporting(ranges, false);
            if let Some(listeners) = LISTENERS.get() {
                (listeners.slots_left)(ctx, ranges);
            }
            "export completed"
        }
        EXPORT_ABORTED => {
            mark_exporting(ranges, false);
            if let Some(listeners) = LISTENERS.get() {
                (listeners.slots_stayed)(ctx, ranges);
            }
            "export aborted"
        }
        IMPORT_STARTED => "import started",
        IMPORT_COMPLETED => "import completed",
        IMPORT_ABORTED => "import aborted",
        _ => return,
    };
    let listed: Vec<String> = ranges.iter().map(|(s, e)| format!("{s}-{e}")).collect();
    redis_module::logging::log_notice(format!(
        "ratelimit: atomic slot migration {what}: slots {}",
        listed.join(" ")
    ));
}

/// Redis ≥ 8.4's slot migration event: the source's `MIGRATE_*` subevents are what Valkey's
/// `EXPORT_*` are (untested, see [`declares_atomic_slot_migration`]).
unsafe extern "C" fn on_redis_slot_migration(
    ctx: *mut RedisModuleCtx,
    event: RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let as_valkey = match subevent {
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_STARTED => EXPORT_STARTED,
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_FAILED => EXPORT_ABORTED,
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_COMPLETED => EXPORT_COMPLETED,
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_STARTED => IMPORT_STARTED,
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_FAILED => IMPORT_ABORTED,
        raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_COMPLETED => IMPORT_COMPLETED,
        _ => return,
    };
    // SAFETY: the server passes this event's data.
    let ranges = unsafe { redis_ranges_of(data) };
    migration_event(ctx, event, as_valkey, &ranges);
}
