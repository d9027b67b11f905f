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
//!
//! **No FFI here.** The type is a `server::snapshot::BlobType` (its values are the encoded
//! table's bytes, owned by the server layer); its callbacks read and write through
//! `server::rdb`'s reader and writers; the carrier key is put and removed by
//! `server::snapshot::Registered`; the events arrive typed (`Persistence`, `Loading`,
//! `AsyncLoad`) through `server::events`.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::sync::atomic::AtomicBool;
use std::sync::OnceLock;

use redis_module::logging::{log_notice, log_warning};

use crate::shell::features::policies;
use crate::shell::server::api::api;
use crate::shell::server::events::{self, AsyncLoad, EventContext, Loading, Persistence};
use crate::shell::server::rdb::{AofWriter, RdbReader, RdbWriter};
use crate::shell::server::snapshot::{self, BlobType, Put, Registered};
use ratelimit_core::features::policy::PolicyTable;

/// The type's name (Redis requires exactly 9 characters).
const TYPE_NAME: &CStr = c"rl-policy";
/// Its encoding version (the payload carries its own format version too).
const ENCODING_VERSION: i32 = 1;
/// The carrier key's name (db 0). It exists only in snapshots and while they load.
const CARRIER_KEY: &[u8] = b"__ratelimit_policy_table__";

/// `ratelimit.policies-in-rdb`: accepted for configurations written for earlier builds (it was
/// Redis 7.0's opt-in); ignored, policies are always saved.
pub static POLICIES_IN_RDB: AtomicBool = AtomicBool::new(false);

/// The registered type (set by `init`).
static POLICY_TYPE: OnceLock<Registered> = OnceLock::new();

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

/// Registers the `rl-policy` type and the server events it hears (module load), on every
/// server.
pub fn init(ctx: *mut EventContext) -> Result<(), String> {
    let api = api().ok_or("the module API is not resolved")?;
    events::on(api, ctx, events::PERSISTENCE_EVENT, on_persistence)?;
    events::on(api, ctx, events::LOADING_EVENT, on_loading)?;
    events::on(api, ctx, events::ASYNC_LOAD_EVENT, on_async_load)?;
    let registered = snapshot::register::<PolicyType>(api, ctx)?;
    // A second `init` (never: one module load) keeps the first registration.
    let _ = POLICY_TYPE.set(registered);
    Ok(())
}

/// Whether an RDB file needs the carrier key: where the server has no `aux_save2` (Redis 7.0).
fn rdb_needs_carrier() -> bool {
    api().is_some_and(|api| !snapshot::has_aux_save2(api))
}

/// A `PERSISTENCE` server event. A save starts: when the snapshot needs the carrier key
/// (Redis 7.0's RDB files, any AOF rewrite), put it in — in the fork child, or in the server
/// for a synchronous save, then taken out as the save ends.
fn on_persistence(ctx: *mut EventContext, subevent: u64) {
    let Some(event) = Persistence::of(subevent) else {
        return;
    };
    match event {
        // In a fork child: its copy of the data only.
        Persistence::AofStart => {
            put_carrier(ctx);
        }
        Persistence::RdbStart if rdb_needs_carrier() => {
            put_carrier(ctx);
        }
        // In the server: taken out again as the save ends.
        Persistence::SyncAofStart => CARRIER_IN_SERVER.set(put_carrier(ctx)),
        Persistence::SyncRdbStart if rdb_needs_carrier() => {
            CARRIER_IN_SERVER.set(put_carrier(ctx));
        }
        Persistence::Ended | Persistence::Failed if CARRIER_IN_SERVER.replace(false) => {
            remove_carrier(ctx);
        }
        _ => {}
    }
}

/// A `LOADING` server event: a load starts (the table it brings, or none, replaces this one;
/// a `swapdb` sync loads into its staged table), ends (the carrier key goes; the table is
/// logged) or fails (the table is emptied with the keys, unless it is a `swapdb` sync's).
fn on_loading(ctx: *mut EventContext, subevent: u64) {
    let Some(event) = Loading::of(subevent) else {
        return;
    };
    let source = match event {
        Loading::RdbStart => Some(Source::RdbFile),
        Loading::AofStart => Some(Source::Aof),
        Loading::ReplStart => Some(Source::Master),
        Loading::Ended | Loading::Failed => None,
    };
    if let Some(source) = source {
        LOADING.set(Some(source));
        if !swapdb_under_way() {
            policies::replace_table(PolicyTable::new());
        }
        return;
    }
    let ended = event == Loading::Ended;
    let source = LOADING.take();
    remove_carrier(ctx);
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
fn on_async_load(ctx: *mut EventContext, subevent: u64) {
    let completed = match AsyncLoad::of(subevent) {
        Some(AsyncLoad::Started) => {
            let load =
                SwapdbLoad { staged: Some(PolicyTable::new()), decided: false, load_ended: false };
            SWAPDB.with(|s| *s.borrow_mut() = Some(load));
            return;
        }
        Some(AsyncLoad::Completed) => true,
        Some(AsyncLoad::Aborted) => false,
        None => return,
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
        remove_carrier(ctx);
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

/// The live table's encoding, or `None` when it is empty (nothing is saved then).
fn encoded_table() -> Option<Vec<u8>> {
    policies::with_table(|t| Ok((!t.is_empty()).then(|| t.encode()))).ok().flatten()
}

/// Puts the table into the carrier key (nothing for an empty table). Whether it did.
fn put_carrier(ctx: *mut EventContext) -> bool {
    let Some(encoded) = encoded_table() else {
        return false;
    };
    let (Some(api), Some(policy_type)) = (api(), POLICY_TYPE.get()) else {
        return false;
    };
    match policy_type.put(api, ctx, CARRIER_KEY, encoded) {
        Put::Stored => true,
        Put::Foreign => {
            log_warning(format!(
                "ratelimit: db 0 has a key named {} of another type: policies are not in this \
                 snapshot",
                String::from_utf8_lossy(CARRIER_KEY)
            ));
            false
        }
        Put::Failed => false,
    }
}

/// Deletes the carrier key, if db 0 holds one.
fn remove_carrier(ctx: *mut EventContext) {
    if let (Some(api), Some(policy_type)) = (api(), POLICY_TYPE.get()) {
        policy_type.remove(api, ctx, CARRIER_KEY);
    }
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

/// The `rl-policy` type: its aux record and its carrier key's value are both the encoded
/// table (one string).
struct PolicyType;

impl BlobType for PolicyType {
    const NAME: &'static CStr = TYPE_NAME;
    const ENCODING_VERSION: i32 = ENCODING_VERSION;

    /// The carrier key's value, loaded: the table it holds replaces the table (staged during
    /// a `swapdb` sync). Refused outside a load (a `RESTORE` payload).
    fn load_value(rdb: &mut RdbReader, encver: i32) -> Option<Vec<u8>> {
        if encver != ENCODING_VERSION {
            return None;
        }
        if LOADING.get().is_none() {
            log_warning("ratelimit: refusing a policy table outside a load (a RESTORE payload)");
            return None;
        }
        let encoded = rdb.load_bytes().ok()?;
        loaded(decode(&encoded)?);
        Some(encoded)
    }

    /// An AOF rewritten without the RDB preamble gets the table as the `RL.POLICY SET`
    /// commands that make it.
    fn rewrite_value(aof: &mut AofWriter, bytes: &[u8]) {
        let Ok(table) = PolicyTable::decode(bytes) else {
            return;
        };
        for command in table.set_commands() {
            let args: Vec<&[u8]> =
                std::iter::once(&b"SET"[..]).chain(command.iter().copied()).collect();
            aof.emit(c"RL.POLICY", &args);
        }
    }

    fn load_aux(rdb: &mut RdbReader, encver: i32) -> bool {
        if encver != ENCODING_VERSION {
            log_warning(format!(
                "ratelimit: refusing policies with unknown encoding version {encver}"
            ));
            return false;
        }
        match rdb.load_bytes().ok().as_deref().and_then(decode) {
            Some(table) => {
                loaded(table);
                true
            }
            None => false,
        }
    }

    fn save_aux(rdb: &mut RdbWriter) {
        if let Some(bytes) = encoded_table() {
            // An I/O error is the server's to report: it fails the save.
            let _ = rdb.save_bytes(&bytes);
        }
    }
}
