//! The server events the module hears, in one place: the only file that subscribes to them.
//! Redis keeps one callback per module and event, so each event is subscribed once, here, and
//! fanned out to the handlers the layers register at load: propagation's doubt
//! (`propagation.rs`), the policy table's storage (`features::persist`: loads, saves, `swapdb`
//! syncs) with [`on`]; the atomic slot migration (`slots.rs`) with [`on_slot_migration`], whose
//! handler gets the event's data decoded (the step and the slot ranges); and the keyspace
//! events the waiting room hears (`features::wait`, given as a plain `fn` by the module's entry
//! point) with [`on_keyspace`]. A layer above registers its handler with this file; this file
//! names no layer above it.
//!
//! Valkey's atomic slot migration event (`VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION`) and its
//! data are not in the `redis-module` crate's header; their values are Valkey's
//! (`valkeymodule.h`, 9.0). Redis' (`REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION`, ≥ 8.4) are, and
//! come from the crate's bindings. The two servers number these events differently (Redis' 19
//! is its trim event), so the decoding is chosen when the handler is registered, never by id.
//!
//! Everything here runs on Redis' main thread (or, for the events a fork child fires, on the
//! child's copy of it).

use std::cell::RefCell;
use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

use redis_module::raw::{self, RedisModuleCtx, RedisModuleEvent, RedisModuleString};

use super::api::{api, Api, Ctx, ServerString};

/// A handler: the event's context and subevent.
pub type Handler = fn(ctx: *mut RedisModuleCtx, subevent: u64);

/// A step of an atomic slot migration, as either server names it (Valkey's `EXPORT_*` are
/// Redis' `MIGRATE_*`: the source's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationStep {
    ImportStarted,
    ImportAborted,
    ImportCompleted,
    ExportStarted,
    ExportAborted,
    ExportCompleted,
}

/// Whose atomic slot migration event is heard: its id, subevent numbers and data differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationEvent {
    /// Valkey ≥ 9 (`CLUSTER MIGRATESLOTS`): event 19, `ValkeyModuleAtomicSlotMigrationInfo`.
    Valkey,
    /// Redis ≥ 8.4 (`CLUSTER MIGRATION IMPORT`): event 18, `RedisModuleClusterSlotMigrationInfo`.
    Redis,
}

/// A slot migration handler: the event's context, its step and the slot ranges it moves (both
/// ends included, each within `0..16384`; empty when the event gave none).
pub type SlotMigrationHandler = fn(ctx: *mut RedisModuleCtx, MigrationStep, &[(u16, u16)]);

/// A keyspace listener: the API, the notification's context and the key's name (live for the
/// call).
pub type KeyListener = fn(api: &'static Api, ctx: Ctx, key: ServerString);

// The save and load events as types (their handlers: `features::persist`).

/// The context a server event's handler is given (`server::events::Handler`).
pub type EventContext = RedisModuleCtx;

/// The `PERSISTENCE` server event's id: a save starts or ends.
pub const PERSISTENCE_EVENT: u64 = raw::REDISMODULE_EVENT_PERSISTENCE;
/// The `LOADING` server event's id: a load starts or ends.
pub const LOADING_EVENT: u64 = raw::REDISMODULE_EVENT_LOADING;
/// The `REPL_ASYNC_LOAD` server event's id: a `repl-diskless-load swapdb` sync.
pub const ASYNC_LOAD_EVENT: u64 = raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD;

/// A `PERSISTENCE` subevent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Persistence {
    /// An RDB save starts in a fork child (`BGSAVE`, a full sync).
    RdbStart,
    /// An AOF rewrite starts in a fork child (`BGREWRITEAOF`).
    AofStart,
    /// A synchronous RDB save starts in the server (`SAVE`, `DEBUG RELOAD`, shutdown).
    SyncRdbStart,
    /// A synchronous AOF rewrite starts in the server.
    SyncAofStart,
    /// A save ended.
    Ended,
    /// A save failed.
    Failed,
}

impl Persistence {
    /// The subevent's kind; `None` for one this build does not know.
    pub fn of(subevent: u64) -> Option<Self> {
        Some(match subevent {
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_RDB_START => Persistence::RdbStart,
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_AOF_START => Persistence::AofStart,
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_RDB_START => Persistence::SyncRdbStart,
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_AOF_START => Persistence::SyncAofStart,
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_ENDED => Persistence::Ended,
            raw::REDISMODULE_SUBEVENT_PERSISTENCE_FAILED => Persistence::Failed,
            _ => return None,
        })
    }
}

/// A `LOADING` subevent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Loading {
    /// A load of the RDB file starts.
    RdbStart,
    /// A load of the AOF starts.
    AofStart,
    /// A load of a full sync from the master starts.
    ReplStart,
    /// The load ended.
    Ended,
    /// The load failed.
    Failed,
}

impl Loading {
    /// The subevent's kind; `None` for one this build does not know.
    pub fn of(subevent: u64) -> Option<Self> {
        Some(match subevent {
            raw::REDISMODULE_SUBEVENT_LOADING_RDB_START => Loading::RdbStart,
            raw::REDISMODULE_SUBEVENT_LOADING_AOF_START => Loading::AofStart,
            raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => Loading::ReplStart,
            raw::REDISMODULE_SUBEVENT_LOADING_ENDED => Loading::Ended,
            raw::REDISMODULE_SUBEVENT_LOADING_FAILED => Loading::Failed,
            _ => return None,
        })
    }
}

/// A `REPL_ASYNC_LOAD` subevent (`repl-diskless-load swapdb`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AsyncLoad {
    /// The sync starts loading beside the replica's own data.
    Started,
    /// The loaded data was swapped in.
    Completed,
    /// The sync was aborted; the replica keeps its own data.
    Aborted,
}

impl AsyncLoad {
    /// The subevent's kind; `None` for one this build does not know.
    pub fn of(subevent: u64) -> Option<Self> {
        Some(match subevent {
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_STARTED => AsyncLoad::Started,
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED => AsyncLoad::Completed,
            raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED => AsyncLoad::Aborted,
            _ => return None,
        })
    }
}

/// What a registered handler is given.
#[derive(Clone, Copy)]
enum Listener {
    Plain(Handler),
    SlotMigration(MigrationEvent, SlotMigrationHandler),
}

thread_local! {
    /// `(event id, listener)`, in registration order.
    static HANDLERS: RefCell<Vec<(u64, Listener)>> = const { RefCell::new(Vec::new()) };
    /// The keyspace listeners, in registration order (one subscription serves them all).
    static KEYSPACE: RefCell<Vec<KeyListener>> = const { RefCell::new(Vec::new()) };
}

/// Registers `handler` for the server event `id` (module load), subscribing to the event the
/// first time it is named. Fails if the server refuses the subscription.
pub fn on(api: &Api, ctx: *mut RedisModuleCtx, id: u64, handler: Handler) -> Result<(), String> {
    listen(api, ctx, id, Listener::Plain(handler))
}

/// Registers `handler` for the atomic slot migration event of `server` (module load). Fails if
/// the server refuses the subscription (the caller then declares no support).
pub fn on_slot_migration(
    api: &Api,
    ctx: *mut RedisModuleCtx,
    server: MigrationEvent,
    handler: SlotMigrationHandler,
) -> Result<(), String> {
    let id = match server {
        MigrationEvent::Valkey => VALKEY_ATOMIC_SLOT_MIGRATION,
        MigrationEvent::Redis => raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION,
    };
    listen(api, ctx, id, Listener::SlotMigration(server, handler))
}

/// Registers `listener` for the event `id`, subscribing the first time it is named.
fn listen(api: &Api, ctx: *mut RedisModuleCtx, id: u64, listener: Listener) -> Result<(), String> {
    let first = HANDLERS.with(|h| !h.borrow().iter().any(|(event, _)| *event == id));
    if first {
        let event = RedisModuleEvent { id, dataver: 1 };
        // SAFETY: called from `OnLoad` with its context; `dispatch` lives as long as the module.
        let status = unsafe { (api.subscribe_to_server_event)(ctx, event, Some(dispatch)) };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not subscribe to server event {id}"));
        }
    }
    HANDLERS.with(|h| h.borrow_mut().push((id, listener)));
    Ok(())
}

/// Registers `listener` for the keyspace events of the classes `types` (`REDISMODULE_NOTIFY_*`
/// bits; module load), subscribing the first time (a later listener hears the first one's
/// classes). Best effort, as a listener only hastens what timers do anyway: the server's
/// status is not checked.
pub fn on_keyspace(api: &Api, ctx: Ctx, types: c_int, listener: KeyListener) {
    let first = KEYSPACE.with(|k| k.borrow().is_empty());
    KEYSPACE.with(|k| k.borrow_mut().push(listener));
    if first {
        // SAFETY: called from `OnLoad` with its context; `on_keyspace_event` lives as long as
        // the module.
        unsafe { (api.subscribe_to_keyspace_events)(ctx, types, Some(on_keyspace_event)) };
    }
}

/// The one callback of every server event: calls its handlers in registration order.
unsafe extern "C" fn dispatch(
    ctx: *mut RedisModuleCtx,
    event: RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    // Copied out first: a handler may cause another event.
    let listeners: Vec<Listener> = HANDLERS
        .with(|h| h.borrow().iter().filter(|(id, _)| *id == event.id).map(|(_, l)| *l).collect());
    for listener in listeners {
        match listener {
            Listener::Plain(handler) => handler(ctx, subevent),
            Listener::SlotMigration(server, handler) => {
                // SAFETY: the server passes this event's data (the registration chose `server`
                // by the server's kind, so the id is this server's migration event), live for
                // the callback.
                if let Some((step, ranges)) = unsafe { slot_migration(server, subevent, data) } {
                    handler(ctx, step, &ranges);
                }
            }
        }
    }
}

/// The one callback of the keyspace events: calls the listeners with the key.
unsafe extern "C" fn on_keyspace_event(
    ctx: *mut RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut RedisModuleString,
) -> c_int {
    let Some(api) = api() else {
        return raw::REDISMODULE_OK as c_int;
    };
    if key.is_null() {
        return raw::REDISMODULE_OK as c_int;
    }
    // Copied out first: a listener may cause another event.
    let listeners: Vec<KeyListener> = KEYSPACE.with(|k| k.borrow().clone());
    for listener in listeners {
        listener(api, ctx, key);
    }
    raw::REDISMODULE_OK as c_int
}

/// Valkey's server event for atomic slot migration, and its subevents.
const VALKEY_ATOMIC_SLOT_MIGRATION: u64 = 19;
const VALKEY_IMPORT_STARTED: u64 = 0;
const VALKEY_EXPORT_STARTED: u64 = 1;
const VALKEY_IMPORT_ABORTED: u64 = 2;
const VALKEY_EXPORT_ABORTED: u64 = 3;
const VALKEY_IMPORT_COMPLETED: u64 = 4;
const VALKEY_EXPORT_COMPLETED: u64 = 5;

/// The last hash slot of a cluster.
const LAST_SLOT: u16 = 16383;

/// One range of slots, both ends included, as Valkey's event data gives it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct ValkeySlotRange {
    start: c_int,
    end: c_int,
}

/// Valkey's event data (`ValkeyModuleAtomicSlotMigrationInfo`, version 1).
#[repr(C)]
struct ValkeyMigrationInfo {
    version: u64,
    job_name: [c_char; 41],
    slot_ranges: *const ValkeySlotRange,
    num_slot_ranges: u32,
}

/// The step and slot ranges of a migration event (`None`: a subevent that is no step).
///
/// # Safety
/// `data` is NULL or `server`'s migration event data, live for the call.
unsafe fn slot_migration(
    server: MigrationEvent,
    subevent: u64,
    data: *mut c_void,
) -> Option<(MigrationStep, Vec<(u16, u16)>)> {
    use MigrationStep::*;
    let step = match server {
        MigrationEvent::Valkey => match subevent {
            VALKEY_IMPORT_STARTED => ImportStarted,
            VALKEY_EXPORT_STARTED => ExportStarted,
            VALKEY_IMPORT_ABORTED => ImportAborted,
            VALKEY_EXPORT_ABORTED => ExportAborted,
            VALKEY_IMPORT_COMPLETED => ImportCompleted,
            VALKEY_EXPORT_COMPLETED => ExportCompleted,
            _ => return None,
        },
        MigrationEvent::Redis => match subevent {
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_STARTED => ImportStarted,
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_FAILED => ImportAborted,
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_IMPORT_COMPLETED => ImportCompleted,
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_STARTED => ExportStarted,
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_FAILED => ExportAborted,
            raw::REDISMODULE_SUBEVENT_CLUSTER_SLOT_MIGRATION_MIGRATE_COMPLETED => ExportCompleted,
            _ => return None,
        },
    };
    let ranges = match server {
        // SAFETY: the caller's contract.
        MigrationEvent::Valkey => unsafe { valkey_ranges(data) },
        // SAFETY: the caller's contract.
        MigrationEvent::Redis => unsafe { redis_ranges(data) },
    };
    Some((step, ranges))
}

/// The slot ranges of Valkey's migration event data (empty if there is none).
///
/// # Safety
/// `data` is NULL or the event's `ValkeyModuleAtomicSlotMigrationInfo`, live for the call.
unsafe fn valkey_ranges(data: *mut c_void) -> Vec<(u16, u16)> {
    // SAFETY: per the contract, a non-NULL `data` is the event's info structure.
    let Some(info) = (unsafe { data.cast::<ValkeyMigrationInfo>().as_ref() }) else {
        return Vec::new();
    };
    if info.slot_ranges.is_null() || info.version < 1 {
        return Vec::new();
    }
    let count = usize::try_from(info.num_slot_ranges).unwrap_or(0);
    // SAFETY: the server gives `num_slot_ranges` ranges at `slot_ranges`.
    let ranges = unsafe { std::slice::from_raw_parts(info.slot_ranges, count) };
    ranges
        .iter()
        .filter_map(|r| Some((u16::try_from(r.start).ok()?, u16::try_from(r.end).ok()?)))
        .filter(|&(start, end)| start <= end && end <= LAST_SLOT)
        .collect()
}

/// The slot ranges of Redis' migration event data (empty if there is none).
///
/// # Safety
/// `data` is NULL or the event's `RedisModuleClusterSlotMigrationInfo`, live for the call.
unsafe fn redis_ranges(data: *mut c_void) -> Vec<(u16, u16)> {
    // SAFETY: per the contract; the layout is the crate's binding of Redis' header.
    let Some(info) = (unsafe { data.cast::<raw::RedisModuleClusterSlotMigrationInfo>().as_ref() })
    else {
        return Vec::new();
    };
    // SAFETY: `slots` is NULL or the info's live range array.
    let Some(array) = (unsafe { info.slots.as_ref() }) else {
        return Vec::new();
    };
    let count = usize::try_from(array.num_ranges).unwrap_or(0);
    // SAFETY: the array holds `num_ranges` ranges.
    let ranges = unsafe { array.ranges.as_slice(count) };
    ranges
        .iter()
        .filter(|r| r.start <= r.end && r.end <= LAST_SLOT)
        .map(|r| (r.start, r.end))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valkey_slot_ranges_are_decoded_and_bad_ones_dropped() {
        let ranges = [
            ValkeySlotRange { start: 0, end: 100 },
            ValkeySlotRange { start: 200, end: 100 },
            ValkeySlotRange { start: -1, end: 5 },
            ValkeySlotRange { start: 16000, end: 16384 },
            ValkeySlotRange { start: 16383, end: 16383 },
        ];
        let mut info = ValkeyMigrationInfo {
            version: 1,
            job_name: [0; 41],
            slot_ranges: ranges.as_ptr(),
            num_slot_ranges: ranges.len() as u32,
        };
        let data = (&mut info as *mut ValkeyMigrationInfo).cast::<c_void>();
        // SAFETY: `data` is a live info structure with `num_slot_ranges` ranges.
        let decoded = unsafe { slot_migration(MigrationEvent::Valkey, 5, data) };
        assert_eq!(decoded, Some((MigrationStep::ExportCompleted, vec![(0, 100), (16383, 16383)])));
        // SAFETY: NULL data is allowed.
        let empty = unsafe { slot_migration(MigrationEvent::Valkey, 1, std::ptr::null_mut()) };
        assert_eq!(empty, Some((MigrationStep::ExportStarted, Vec::new())));
        // SAFETY: as above.
        assert_eq!(unsafe { slot_migration(MigrationEvent::Valkey, 6, data) }, None);
    }

    #[test]
    fn redis_subevents_are_named_as_steps() {
        let step = |subevent| {
            // SAFETY: NULL data is allowed.
            unsafe { slot_migration(MigrationEvent::Redis, subevent, std::ptr::null_mut()) }
                .map(|(step, _)| step)
        };
        assert_eq!(step(3), Some(MigrationStep::ExportStarted));
        assert_eq!(step(4), Some(MigrationStep::ExportAborted));
        assert_eq!(step(5), Some(MigrationStep::ExportCompleted));
        assert_eq!(step(0), Some(MigrationStep::ImportStarted));
        assert_eq!(step(6), None);
    }
}
