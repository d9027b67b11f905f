//! Cluster slots: which slot a key hashes to, whether this node still serves a key (and if
//! not, the redirect a client would get for it), and Valkey 9's atomic slot migration.
//!
//! **Where a key is served.** A `WAIT` queue lives on the node that owned its key when the
//! request came in. When the key leaves the node — classic resharding's `MIGRATE` (the key is
//! deleted here while its slot is `MIGRATING`), or the end of an atomic slot migration (the
//! slot changes owner and the source deletes its keys) — a waiter must never be judged
//! against the now missing key: that is a fresh limiter, and a permit granted twice. Instead it
//! gets the redirect the client would get if it sent its command now: `-ASK slot host:port`
//! while the slot is migrating, `-MOVED slot host:port` once another node owns it,
//! `-CLUSTERDOWN` when nobody does ([`served_here`]). The check reads `CLUSTER NODES`, so it is
//! made only when it can matter: in cluster mode, for a key that no longer exists here.
//!
//! **Atomic slot migration (Valkey ≥ 9: `CLUSTER MIGRATESLOTS`).** The server refuses it
//! unless every loaded module declares the option flag
//! `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION`; it then moves a slot's keys as the
//! type's AOF rewrite (`RL.RESTORE key payload` + `PEXPIREAT`: the exact value and absolute
//! expiry) and streams what is propagated for the slot meanwhile, then pauses writes and hands
//! the slot over. What the module does for it:
//! - declares the flag, only on Valkey ≥ 9 ([`declares_atomic_slot_migration`]): Redis stores
//!   whatever option bits it is given, and Redis 8.4 numbers its own migration events
//!   differently, so neither the flag nor Valkey's event is ever given to another server.
//!   Redis ≥ 8.4's own atomic migration (`CLUSTER MIGRATION IMPORT`, pulled by the destination
//!   as an RDB snapshot of the slots, no opt-in) is heard through its event the same way —
//!   written from Redis' header, untested (no 8.4 binary was reachable);
//! - while a slot is exported, every change is propagated with its instant (`RL.RESTORE` or
//!   `AT`), never verbatim: the target must not judge a call again at its own clock
//!   (`server::propagation` asks [`exporting_any`]);
//! - waiters on keys of an exported slot are **held**: no timer admits them while the slot
//!   moves (a module timer still runs while the server pauses client writes for the hand-over,
//!   and an admission there could miss the stream). When the export completes they are answered
//!   with `-MOVED` to the new owner; when it is cancelled or fails they are judged again here
//!   (`features::wait`). Their timeouts still answer them, refused, without starting a ban.
//!
//! The migration events are subscribed and their data decoded (the step, the slot ranges) by
//! `server::events`, the one owner of server events; this file gives it its handler.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use redis_module::raw::{self, RedisModuleCtx};

use crate::shell::server::api::Api;
use crate::shell::server::events::{self, MigrationEvent, MigrationStep};

/// The number of hash slots of a Redis / Valkey cluster.
pub const SLOTS: usize = 16384;

/// The option flag that declares support for atomic slot migration (Valkey ≥ 9.0).
pub const OPTION_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// The slot a key hashes to: CRC16 (XMODEM) of the key, or of its `{hash tag}` when it has a
/// non-empty one, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = key.get(open + 1..)?;
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| rest.get(..close)).flatten()
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS as u16
}

/// Slots this node is exporting (atomic slot migration), one bit each.
static EXPORTING: [AtomicU64; SLOTS / 64] = [const { AtomicU64::new(0) }; SLOTS / 64];
/// How many slots are being exported (0 in the common case: one load says so).
static EXPORTING_COUNT: AtomicUsize = AtomicUsize::new(0);

/// What a layer above does when an export ends (the waiting room: `features/wait.rs`),
/// given once at load by the module's entry point — the server layer names no layer above it.
pub struct ExportEnd {
    /// The slots moved away (their waiters get `-MOVED`).
    pub left: fn(*mut RedisModuleCtx, &[(u16, u16)]),
    /// The slots stayed: the export was cancelled or failed (their waiters are judged again).
    pub stayed: fn(*mut RedisModuleCtx, &[(u16, u16)]),
}

static EXPORT_END: std::sync::OnceLock<ExportEnd> = std::sync::OnceLock::new();

/// Sets what happens when an export ends (once, at load).
pub fn on_export_end(hooks: ExportEnd) {
    let _ = EXPORT_END.set(hooks);
}

/// Whether any slot is being exported now.
pub fn exporting_any() -> bool {
    EXPORTING_COUNT.load(Ordering::Relaxed) != 0
}

/// Whether `slot` is being exported now.
pub fn exporting(slot: u16) -> bool {
    exporting_any()
        && EXPORTING
            .get(usize::from(slot) / 64)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (slot % 64)) != 0)
}

fn mark_exporting(ranges: &[(u16, u16)], on: bool) {
    for &(start, end) in ranges {
        for slot in start..=end {
            let Some(word) = EXPORTING.get(usize::from(slot) / 64) else {
                continue;
            };
            let bit = 1u64 << (slot % 64);
            let before = if on {
                word.fetch_or(bit, Ordering::Relaxed)
            } else {
                word.fetch_and(!bit, Ordering::Relaxed)
            };
            let was = before & bit != 0;
            if on && !was {
                EXPORTING_COUNT.fetch_add(1, Ordering::Relaxed);
            } else if !on && was {
                EXPORTING_COUNT.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Which atomic slot migration the server has, from `INFO server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtomicMigration {
    /// None (Redis < 8.4, Valkey < 9).
    None,
    /// Valkey ≥ 9: `CLUSTER MIGRATESLOTS`, pushed by the source; modules opt in.
    Valkey,
    /// Redis ≥ 8.4: `CLUSTER MIGRATION IMPORT`, pulled by the destination; no opt-in.
    Redis,
}

/// `major.minor` of a version string.
fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The server's atomic slot migration (`INFO server`: `server_name:valkey` and
/// `valkey_version` on Valkey, `redis_version` on Redis).
fn atomic_migration(api: &Api, ctx: *mut RedisModuleCtx) -> AtomicMigration {
    // SAFETY: `ctx` is the module's load context; the info data is freed below.
    let info = unsafe { (api.get_server_info)(ctx, c"server".as_ptr()) };
    if info.is_null() {
        return AtomicMigration::None;
    }
    let field = |name: &CStr| {
        // SAFETY: `info` is live; a returned field is a NUL-terminated string owned by it.
        let value = unsafe { (api.server_info_get_field_c)(info, name.as_ptr()) };
        // SAFETY: `ctx` is a live context; `info` is the non-NULL data `get_server_info` returned,
        // freed once at the end; a field is a NUL-terminated string it owns.
        (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
    };
    let valkey = field(c"server_name").is_some_and(|n| n == "valkey");
    let version = if valkey { field(c"valkey_version") } else { field(c"redis_version") };
    let version = major_minor(&version.unwrap_or_default());
    // SAFETY: `info` came from `get_server_info` and is freed once.
    unsafe { (api.free_server_info)(ctx, info) };
    match (valkey, version) {
        (true, v) if v >= (9, 0) => AtomicMigration::Valkey,
        (false, v) if v >= (8, 4) => AtomicMigration::Redis,
        _ => AtomicMigration::None,
    }
}

/// The module options to add for atomic slot migration, and the migration events heard
/// (`server::events` subscribes and decodes them):
/// - Valkey ≥ 9: the option flag, and its event (19); a server that refuses the subscription
///   gets no flag (a migration would then go unheard);
/// - Redis ≥ 8.4: no flag exists (its migration needs no opt-in); its event
///   (`REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION`, 18) is heard the same way. **Untested**: no
///   Redis 8.4+ binary was reachable when this was written (`docs/operations.md`).
///
/// Elsewhere nothing: Redis stores whatever option bits it is given, and the two servers
/// number these events differently (Redis' 19 is its trim event).
pub fn declares_atomic_slot_migration(api: &Api, ctx: *mut RedisModuleCtx) -> c_int {
    let (server, option) = match atomic_migration(api, ctx) {
        AtomicMigration::None => return 0,
        AtomicMigration::Valkey => (MigrationEvent::Valkey, OPTION_HANDLE_ATOMIC_SLOT_MIGRATION),
        AtomicMigration::Redis => (MigrationEvent::Redis, 0),
    };
    if events::on_slot_migration(api, ctx, server, migration_event).is_err() {
        redis_module::logging::log_warning(
            "ratelimit: the server refused its slot migration event; not declaring support",
        );
        return 0;
    }
    option
}

/// A migration's step, on the slots it moves (Redis' `MIGRATE_*` are Valkey's `EXPORT_*`).
fn migration_event(ctx: *mut RedisModuleCtx, step: MigrationStep, ranges: &[(u16, u16)]) {
    let what = match step {
        MigrationStep::ExportStarted => {
            mark_exporting(ranges, true);
            "export started"
        }
        MigrationStep::ExportCompleted => {
            mark_exporting(ranges, false);
            if let Some(hooks) = EXPORT_END.get() {
                (hooks.left)(ctx, ranges);
            }
            "export completed"
        }
        MigrationStep::ExportAborted => {
            mark_exporting(ranges, false);
            if let Some(hooks) = EXPORT_END.get() {
                (hooks.stayed)(ctx, ranges);
            }
            "export aborted"
        }
        MigrationStep::ImportStarted => "import started",
        MigrationStep::ImportCompleted => "import completed",
        MigrationStep::ImportAborted => "import aborted",
    };
    let listed: Vec<String> = ranges.iter().map(|(s, e)| format!("{s}-{e}")).collect();
    redis_module::logging::log_notice(format!(
        "ratelimit: atomic slot migration {what}: slots {}",
        listed.join(" ")
    ));
}

/// Where a key is served, for a waiter on it.
#[derive(Debug, PartialEq, Eq)]
pub enum Served {
    /// Here: judge it.
    Here,
    /// Here, but its slot is being exported: hold it (no write) until the export ends.
    Held,
    /// Not here: the error a client sending the command now would get.
    Elsewhere(String),
}

/// Where the key `name` (which a waiter waits on) is served. Outside cluster mode, and for a
/// key that exists here (`exists`, asked only in cluster mode) and is not being exported,
/// [`Served::Here`] without any lookup.
pub fn served_here(
    api: &Api,
    ctx: *mut RedisModuleCtx,
    name: &[u8],
    exists: impl FnOnce() -> bool,
) -> Served {
    // SAFETY: a live context (a timer's or a command's).
    let flags = unsafe { (api.get_context_flags)(ctx) } as u32;
    if flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER == 0 {
        return Served::Here;
    }
    let slot = key_slot(name);
    if exporting(slot) {
        return Served::Held;
    }
    if exists() {
        return Served::Here;
    }
    match cluster_nodes(api, ctx) {
        Some(nodes) => redirect(&nodes, slot).map_or(Served::Here, Served::Elsewhere),
        None => Served::Here,
    }
}

/// `CLUSTER NODES` as text (`None` if the call fails).
pub fn cluster_nodes(api: &Api, ctx: *mut RedisModuleCtx) -> Option<String> {
    // SAFETY: a live context; the reply is freed below.
    let reply = unsafe { (api.call)(ctx, c"CLUSTER".as_ptr(), c"c".as_ptr(), c"NODES".as_ptr()) };
    if reply.is_null() {
        return None;
    }
    let mut len = 0usize;
    // SAFETY: `reply` is live; a non-NULL pointer has `len` bytes owned by it.
    let ptr = unsafe { (api.call_reply_string_ptr)(reply, &mut len) };
    let text = (!ptr.is_null()).then(|| {
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
        String::from_utf8_lossy(bytes).into_owned()
    });
    // SAFETY: freed once.
    unsafe { (api.free_call_reply)(reply) };
    text
}

/// The redirect for a key of `slot` that is not here, from `CLUSTER NODES` as this node sees
/// it: `None` when this node serves the slot and does not migrate it (the key simply does
/// not exist); `ASK slot addr` when it migrates the slot (`[slot->-target]`); `MOVED slot
/// addr` when another node owns it; `CLUSTERDOWN …` when no node does.
pub fn redirect(nodes: &str, slot: u16) -> Option<String> {
    let lines: Vec<Vec<&str>> = nodes
        .lines()
        .map(|l| l.split(' ').collect())
        .filter(|f: &Vec<&str>| f.len() >= 8)
        .collect();
    let address = |id: &str| {
        lines.iter().find(|f| f.first() == Some(&id)).and_then(|f| f.get(1)).map(|a| {
            // `ip:port@cport[,hostname]`
            a.split(['@', ',']).next().unwrap_or(a).to_string()
        })
    };
    let owns = |fields: &Vec<&str>| {
        fields.iter().skip(8).any(|range| {
            if range.starts_with('[') {
                return false;
            }
            let (start, end) = range.split_once('-').unwrap_or((range, range));
            match (start.parse::<u16>(), end.parse::<u16>()) {
                (Ok(s), Ok(e)) => (s..=e).contains(&slot),
                _ => false,
            }
        })
    };
    let is_myself = |fields: &Vec<&str>| {
        fields.get(2).is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    };
    if let Some(me) = lines.iter().find(|f| is_myself(f)) {
        if owns(me) {
            let migrating = format!("[{slot}->-");
            let target = me
                .iter()
                .skip(8)
                .find_map(|r| r.strip_prefix(migrating.as_str()).and_then(|t| t.strip_suffix(']')));
            return target.map(|id| match address(id) {
                Some(addr) => format!("ASK {slot} {addr}"),
                None => "TRYAGAIN the key's slot is being migrated".to_string(),
            });
        }
    }
    let owner = lines.iter().find(|f| !is_myself(f) && owns(f));
    Some(match owner.and_then(|f| f.get(1)) {
        Some(addr) => format!("MOVED {slot} {}", addr.split(['@', ',']).next().unwrap_or(addr)),
        None => "CLUSTERDOWN Hash slot not served".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_match_the_cluster_specification() {
        // Values from `CLUSTER KEYSLOT` on a real server.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b""), 0);
    }

    const NODES: &str = "\
aaaa 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-100 [50->-bbbb] [200-<-cccc]
bbbb 127.0.0.1:7001@17001,host-b master - 0 0 2 connected 101-200
cccc 127.0.0.1:7002@17002 master - 0 0 3 connected 201-300 400
";

    #[test]
    fn redirects_are_the_ones_a_client_would_get() {
        assert_eq!(redirect(NODES, 10), None);
        assert_eq!(redirect(NODES, 50).as_deref(), Some("ASK 50 127.0.0.1:7001"));
        assert_eq!(redirect(NODES, 150).as_deref(), Some("MOVED 150 127.0.0.1:7001"));
        assert_eq!(redirect(NODES, 400).as_deref(), Some("MOVED 400 127.0.0.1:7002"));
        // Importing here is not owning: the owner still answers for it.
        assert_eq!(redirect(NODES, 200).as_deref(), Some("MOVED 200 127.0.0.1:7001"));
        assert_eq!(redirect(NODES, 9000).as_deref(), Some("CLUSTERDOWN Hash slot not served"));
    }

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert_eq!(major_minor("9.1.2"), (9, 1));
        assert_eq!(major_minor("8.4.0"), (8, 4));
        assert!(major_minor("8.10.1") >= (8, 4));
        assert!(major_minor("8.2.3") < (8, 4));
        assert_eq!(major_minor(""), (0, 0));
    }

    #[test]
    fn exporting_slots_are_counted_once() {
        mark_exporting(&[(5, 7), (6, 9)], true);
        assert!(exporting(5) && exporting(9) && !exporting(10));
        assert_eq!(EXPORTING_COUNT.load(Ordering::Relaxed), 5);
        mark_exporting(&[(5, 9)], false);
        assert!(!exporting_any());
    }
}
