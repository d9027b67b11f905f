//! Policies are node state like Redis Functions, durable by default on every server (Redis 7.0
//! included): they survive a restart (RDB, AOF with and without the RDB preamble), `DEBUG
//! RELOAD`, `FLUSHALL`, reach replicas (stream and full sync, disk and diskless), a promoted
//! replica keeps them, and `RL.HIT` propagates the state it left, so replicas reach the same
//! state without looking policies up. An aborted `swapdb` full sync leaves the replica's own
//! table; an AOF rewrite propagates nothing; no `policies-in-rdb` setting stops a start.

mod common;
use common::*;

fn ok(con: &mut Connection, command: &str) {
    let words: Vec<&str> = command.split_whitespace().collect();
    let reply = run(con, &words).unwrap_or_else(|e| panic!("{command}: {e}"));
    assert_eq!(reply, Value::Okay, "{command}");
}

fn del(con: &mut Connection, command: &str) {
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(run(con, &words).unwrap_or_else(|e| panic!("{command}: {e}")), Value::Int(1));
}

fn names(con: &mut Connection) -> Vec<String> {
    redis::cmd("RL.POLICY").arg("LIST").query(con).expect("RL.POLICY LIST")
}

fn define(con: &mut Connection) {
    ok(con, "RL.POLICY SET free TOKEN 5 1 1s BAN 1m");
    ok(con, "RL.POLICY SET free PERIOD 100 1h FOR vip");
    ok(con, "RL.POLICY SET pro SLIDE 50 1m BUCKETS 6 SHADOW");
}

/// What `define` made, read back.
fn defined(con: &mut Connection) {
    assert_eq!(names(con), ["free", "pro"]);
    let vip: Vec<Value> =
        redis::cmd("RL.POLICY").arg(&["GET", "free", "FOR", "vip"]).query(con).unwrap();
    assert!(format!("{vip:?}").contains("period"), "{vip:?}");
    assert_eq!(line(con, "RL.HIT free user")[..3], [1, 5, 4]);
    assert_eq!(line(con, "RL.HIT pro user2")[..3], [1, 50, 49]);
}

fn save(con: &mut Connection) {
    let _: () = redis::cmd("SAVE").query(con).expect("SAVE");
}

/// `BGREWRITEAOF`, waited for.
fn rewrite_aof(con: &mut Connection) {
    wait_for("no AOF rewrite in progress", || {
        info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
    });
    let _: String = redis::cmd("BGREWRITEAOF").query(con).expect("BGREWRITEAOF");
    wait_for("the AOF rewrite", || {
        info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(con, "persistence", "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(info_field(con, "persistence", "aof_last_bgrewrite_status"), "ok");
}

/// `pro`'s candidate (`RL.POLICY SET pro TOKEN 3 1 1s CANDIDATE`) came back.
fn assert_candidate(con: &mut Connection) {
    let candidate: Value =
        redis::cmd("RL.POLICY").arg(&["GET", "pro", "CANDIDATE"]).query(con).unwrap();
    assert!(format!("{candidate:?}").contains("token"), "{candidate:?}");
}

/// The key that carries the table in Redis 7.0's snapshots exists in none once loaded.
fn assert_no_carrier(con: &mut Connection) {
    let exists: i64 =
        redis::cmd("EXISTS").arg("__ratelimit_policy_table__").query(con).expect("EXISTS");
    assert_eq!(exists, 0);
}

/// The server's log says how many policies a load brought, and from where.
fn assert_logged(server: &Server, line: &str) {
    let log = server.log();
    assert!(log.contains(line), "no `{line}` in the log:\n{log}");
}

#[test]
fn policies_survive_a_restart_from_rdb_and_debug_reload() {
    let mut server = Server::start();
    let mut c = server.conn();
    define(&mut c);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    defined(&mut c);
    ok(&mut c, "RL.POLICY SET gone TOKEN 1 1 1s");
    ok(&mut c, "RL.POLICY SET pro TOKEN 3 1 1s CANDIDATE");
    save(&mut c);
    del(&mut c, "RL.POLICY DEL gone");
    server.restart();
    let mut c = server.conn();
    assert_eq!(
        names(&mut c),
        ["free", "gone", "pro"],
        "the RDB's table replaces the one in memory"
    );
    assert_logged(&server, "loaded the policy table from the RDB file: 3 policies, 1 overrides");
    assert_candidate(&mut c);
    // The keyspace is what it was: the keys `defined` hit, no carrier key.
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 2);
    assert_no_carrier(&mut c);
    // A BGSAVE (a fork child's snapshot) carries them too.
    ok(&mut c, "RL.POLICY SET forked LEAKY 3 1 1s");
    let _: String = redis::cmd("BGSAVE").query(&mut c).expect("BGSAVE");
    wait_for("the BGSAVE", || {
        info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == "0"
            && info_field(&mut c, "persistence", "rdb_last_bgsave_status") == "ok"
            && info_field(&mut c, "persistence", "rdb_changes_since_last_save") == "0"
    });
    del(&mut c, "RL.POLICY DEL forked");
    server.restart();
    let mut c = server.conn();
    assert_eq!(names(&mut c), ["forked", "free", "gone", "pro"]);
    assert_no_carrier(&mut c);
    del(&mut c, "RL.POLICY DEL forked");
    // FLUSHALL keeps policies, as it keeps functions.
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(names(&mut c).len(), 3);
    // A load without policies leaves none.
    del(&mut c, "RL.POLICY DEL free");
    del(&mut c, "RL.POLICY DEL pro");
    del(&mut c, "RL.POLICY DEL gone");
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert!(names(&mut c).is_empty());
}

/// `ratelimit.policies-in-rdb` (the old Redis 7.0 opt-in) is accepted and changes nothing: an
/// RDB saved with it loads without it and the other way round (it stopped Redis 7.0 from
/// starting: "no matching module 'rl-policy'").
#[test]
fn no_policies_in_rdb_setting_stops_a_start() {
    for (save_with, load_with) in
        [(&["policies-in-rdb", "yes"][..], &[][..]), (&[], &["policies-in-rdb", "yes"])]
    {
        let saver = Server::start_full(&[], save_with);
        let mut c = saver.conn();
        define(&mut c);
        save(&mut c);
        let mut loader = Server::start_full(&[], load_with);
        loader.stop();
        std::fs::copy(saver.path("dump.rdb"), loader.path("dump.rdb")).expect("copy dump.rdb");
        loader.try_restart().unwrap_or_else(|e| panic!("saved with {save_with:?}: {e}"));
        defined(&mut loader.conn());
    }
}

#[test]
fn policies_survive_aof_restarts_and_rewrites() {
    for preamble in ["yes", "no"] {
        let mut server =
            Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        let mut c = server.conn();
        define(&mut c);
        ok(&mut c, "RL.POLICY SET pro TOKEN 3 1 1s CANDIDATE");
        server.restart();
        let mut c = server.conn();
        defined(&mut c);
        assert_logged(&server, "loaded the policy table from the AOF: 2 policies, 1 overrides");
        rewrite_aof(&mut c);
        ok(&mut c, "RL.POLICY SET late PERIOD 1 1s");
        server.restart();
        let mut c = server.conn();
        let expected = vec!["free", "late", "pro"];
        assert_eq!(names(&mut c), expected, "preamble {preamble}");
        assert_candidate(&mut c);
        assert_eq!(line(&mut c, "RL.HIT free fresh-user")[..3], [1, 5, 4]);
        // The keys `defined` and this call hit, no carrier key.
        assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 3);
        assert_no_carrier(&mut c);
        // A second rewrite, from a table that came back from the incremental file.
        rewrite_aof(&mut c);
        server.restart();
        assert_eq!(names(&mut server.conn()), expected, "preamble {preamble}, twice");
        assert_candidate(&mut server.conn());
    }
}

/// The AOF files of `server`, concatenated.
fn aof_text(server: &Server) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(server.path("appendonlydir")).expect("appendonlydir").flatten() {
        text.push_str(&String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap_or_default()));
    }
    text
}

/// Issue 32 defect 3: a rewrite re-sent the table at the fork inside the triggering command's
/// `MULTI`, so the new incremental file (and every replica) got `BGREWRITEAOF` itself.
#[test]
fn an_aof_rewrite_propagates_nothing() {
    for preamble in ["yes", "no"] {
        let mut master =
            Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        let replica = replica_of(&master, &[]);
        let mut mc = master.conn();
        define(&mut mc);
        rewrite_aof(&mut mc);
        ok(&mut mc, "RL.POLICY SET after PERIOD 1 1s");
        wait_in_sync(&master, &replica);
        let text = aof_text(&master).to_ascii_lowercase();
        assert!(!text.contains("bgrewriteaof"), "preamble {preamble}: {text}");
        let mut rc = replica.conn();
        let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut rc).unwrap();
        assert!(!stats.contains("bgrewriteaof"), "preamble {preamble}: {stats}");
        assert!(!replica.path("appendonlydir").exists(), "the replica rewrote an AOF");
        assert_eq!(names(&mut rc), ["after", "free", "pro"]);
        master.restart();
        assert_eq!(names(&mut master.conn()), ["after", "free", "pro"], "preamble {preamble}");
    }
}

#[test]
fn replicas_get_policies_and_the_state_hit_left() {
    let master = Server::start();
    let mut mc = master.conn();
    define(&mut mc);
    // A full sync carries the table.
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut rc = replica.conn();
    wait_for("replication link", || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    assert_eq!(names(&mut rc), ["free", "pro"]);
    assert_logged(
        &replica,
        "loaded the policy table from the master (full sync): 2 policies, 1 overrides",
    );
    // The stream carries SET and DEL.
    ok(&mut mc, "RL.POLICY SET extra LEAKY 10 1 1s");
    let t = unix_ms() + 1000;
    for i in 0..7 {
        ints(&mut mc, &["RL.HIT", "free", "k", "AT", &(t + i).to_string()]);
        ints(&mut mc, &["RL.HIT", "free", "vip"]);
        ints(&mut mc, &["RL.HIT", "extra", "e", "COST", "2"]);
    }
    // RL.ALL with a policy group reaches the replica as the states it left.
    for _ in 0..3 {
        let _: Value = redis::cmd("RL.ALL")
            .arg(&["2", "{a}1", "{a}2", "POLICY", "extra", "COST", "3", "TOKEN", "9", "1", "1s"])
            .query(&mut mc)
            .unwrap();
    }
    del(&mut mc, "RL.POLICY DEL pro");
    wait_in_sync(&master, &replica);
    assert_eq!(names(&mut rc), ["extra", "free"]);
    let stats: String = redis::cmd("INFO").arg("commandstats").query(&mut rc).unwrap();
    assert!(stats.contains("cmdstat_rl.restore"), "{stats}");
    assert!(!stats.contains("cmdstat_rl.hit") && !stats.contains("cmdstat_rl.all"), "{stats}");
    for key in ["k", "vip", "e", "{a}1", "{a}2"] {
        assert_eq!(stored_state(&mut mc, key), stored_state(&mut rc, key), "{key}");
        assert_eq!(pexpiretime(&mut mc, key), pexpiretime(&mut rc, key), "{key}");
    }
    // A replica refuses changes; it answers reads.
    let e = error_text(&mut rc, &[b"RL.POLICY", b"SET", b"x", b"TOKEN", b"1", b"1", b"1"]);
    assert!(e.starts_with("READONLY"), "{e}");
    let e = error_text(&mut rc, &[b"RL.POLICY", b"DEL", b"free"]);
    assert!(e.starts_with("READONLY"), "{e}");
    // Failover: the promoted replica holds the table and judges by it.
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut rc).unwrap();
    let before = stored_state(&mut rc, "k");
    let reply = ints(&mut rc, &["RL.HIT", "free", "k", "AT", &(t + 120_000).to_string()]);
    assert_eq!(reply[..2], [1, 5]);
    assert_ne!(stored_state(&mut rc, "k"), before);
    ok(&mut rc, "RL.POLICY SET free TOKEN 7 1 1s");
    master.assert_alive();
}

/// Every kind of full sync carries the table: the master's snapshot on disk or streamed
/// (`repl-diskless-sync`), loaded by the replica from disk or from the socket
/// (`repl-diskless-load`, `swapdb` too); the keyspace is the master's.
#[test]
fn every_kind_of_full_sync_carries_policies() {
    for (sync, load) in
        [("no", "disabled"), ("yes", "disabled"), ("yes", "on-empty-db"), ("yes", "swapdb")]
    {
        let master = Server::start_with(&["--repl-diskless-sync", sync]);
        let mut mc = master.conn();
        define(&mut mc);
        ints(&mut mc, &["RL.TOKEN", "k", "5", "1", "1h"]);
        let replica = replica_of(&master, &["--repl-diskless-load", load]);
        wait_in_sync(&master, &replica);
        let mut rc = replica.conn();
        defined_read_only(&mut rc, &format!("sync {sync}, load {load}"));
        assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut rc).unwrap(), 1);
        assert_no_carrier(&mut rc);
        assert_eq!(digest(&mut rc), digest(&mut mc));
    }
}

/// What `define` made, read on a replica (which refuses `RL.HIT`).
fn defined_read_only(con: &mut Connection, context: &str) {
    assert_eq!(names(con), ["free", "pro"], "{context}");
    let vip: Value =
        redis::cmd("RL.POLICY").arg(&["GET", "free", "FOR", "vip"]).query(con).unwrap();
    assert!(format!("{vip:?}").contains("period"), "{context}: {vip:?}");
}

fn digest(con: &mut Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).expect("DEBUG DIGEST")
}

/// A master whose full sync streams slowly (`rdb-key-save-delay`), with the policies `shared`
/// (a token bucket) and `master_only` and 2 000 keys, and a server with its own table
/// (`shared` as a fixed window, `replica_only`) about to become its replica with
/// `repl-diskless-load load`; the replica has 10 keys of its own when `own_keys`.
fn slow_sync(load: &str, own_keys: bool) -> (Server, Server) {
    let master = Server::start_with(&["--repl-diskless-sync", "yes"]);
    let mut mc = master.conn();
    ok(&mut mc, "RL.POLICY SET shared TOKEN 5 1 1s");
    ok(&mut mc, "RL.POLICY SET master_only TOKEN 5 1 1s");
    let _: () = redis::cmd("DEBUG").arg(&["POPULATE", "2000", "m"]).query(&mut mc).unwrap();
    let _: () =
        redis::cmd("CONFIG").arg(&["SET", "rdb-key-save-delay", "2000"]).query(&mut mc).unwrap();
    // It answers INFO while it loads (every KB) instead of only at the end (every 2 MB).
    let replica = Server::start_with(&[
        "--repl-diskless-load",
        load,
        "--loading-process-events-interval-bytes",
        "1024",
    ]);
    let mut rc = replica.conn();
    ok(&mut rc, "RL.POLICY SET shared PERIOD 9 1m");
    ok(&mut rc, "RL.POLICY SET replica_only PERIOD 9 1m");
    if own_keys {
        let _: () = redis::cmd("DEBUG").arg(&["POPULATE", "10", "r"]).query(&mut rc).unwrap();
    }
    (master, replica)
}

/// Attaches `replica` to `master`, waits until it loads the streamed snapshot, then kills the
/// master and its snapshot child (SIGKILL) so the load fails midway.
fn abort_sync(master: &mut Server, replica: &Server) {
    let mut rc = replica.conn();
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port).query(&mut rc).unwrap();
    wait_for("the replica to load", || {
        info_field(&mut rc, "persistence", "loading") == "1"
            || info_field(&mut rc, "persistence", "async_loading") == "1"
    });
    // The policies come first (RDB aux data before the keyspace): let them arrive.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The snapshot's fork child goes too: with Redis 8's RDB channel it writes to the
    // replica's socket itself and would finish the sync without its parent.
    let pid = info_field(&mut master.conn(), "server", "process_id");
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    master.kill();
    for child in children.unwrap_or_default().split_whitespace() {
        let _ = std::process::Command::new("kill").args(["-9", child]).status();
    }
    wait_for("the load to end", || {
        info_field(&mut rc, "persistence", "loading") == "0"
            && info_field(&mut rc, "persistence", "async_loading") == "0"
    });
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut rc).unwrap();
}

/// Issue 32 defect 2: an aborted `swapdb` load keeps the replica's keys and functions (Redis
/// restores them) — and now its own policy table too, not the dead master's.
#[test]
fn an_aborted_swapdb_sync_keeps_the_replicas_own_table() {
    let (mut master, replica) = slow_sync("swapdb", true);
    abort_sync(&mut master, &replica);
    let mut rc = replica.conn();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut rc).unwrap(), 10, "its own keys");
    assert_eq!(names(&mut rc), ["replica_only", "shared"]);
    let shared: Value = redis::cmd("RL.POLICY").arg(&["GET", "shared"]).query(&mut rc).unwrap();
    assert!(format!("{shared:?}").contains("period"), "{shared:?}");
    assert_logged(&replica, "kept its own policy table");
}

/// With `on-empty-db` a failed load empties the keys and functions: the table follows them.
#[test]
fn an_aborted_on_empty_db_sync_empties_the_table_with_the_keys() {
    let (mut master, replica) = slow_sync("on-empty-db", false);
    abort_sync(&mut master, &replica);
    let mut rc = replica.conn();
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut rc).unwrap(), 0);
    assert!(names(&mut rc).is_empty(), "{:?}", names(&mut rc));
}

/// The previous releases have no `rl-policy` type: an RDB written without policies must carry
/// no trace of them (no aux record, no key), so they can still load it.
#[test]
fn an_rdb_without_policies_carries_no_record() {
    let server = Server::start();
    let mut c = server.conn();
    ints(&mut c, &["RL.TOKEN", "k", "5", "1", "1s"]);
    save(&mut c);
    let empty = std::fs::read(server.path("dump.rdb")).unwrap();
    ok(&mut c, "RL.POLICY SET p TOKEN 5 1 1s");
    del(&mut c, "RL.POLICY DEL p");
    save(&mut c);
    let after = std::fs::read(server.path("dump.rdb")).unwrap();
    // Same size: no record (the bytes differ only in timestamps).
    assert_eq!(empty.len(), after.len());
    ok(&mut c, "RL.POLICY SET p TOKEN 5 1 1s");
    save(&mut c);
    let with = std::fs::read(server.path("dump.rdb")).unwrap();
    assert!(with.len() > after.len(), "a table is saved");
}

/// 0.2.0's module, built by `scripts/old-module.sh` (shared with `tests/upgrade.rs`); `None`
/// when this clone lacks the release's commit.
fn module_0_2_0() -> Option<std::path::PathBuf> {
    module_at("0.2.0", "5377d08618e8ccd3af2a66d54e4592bd056fcae2", "upgrade-0.2.0")
}

/// The unreleased 0.3.0 as main held it before policies were durable everywhere (policies as
/// aux data only where `aux_save2` exists; on Redis 7.0 only with `policies-in-rdb yes`).
fn module_0_3_0_earlier() -> Option<std::path::PathBuf> {
    module_at("0.3.0 (earlier)", "956678dd18065b79ee85b4c4c6f1d39ce1abaf96", "upgrade-0.3.0-pre")
}

/// A module built from `commit` into `target/<dir>` once per clone; `None` when this clone
/// lacks the commit.
fn module_at(version: &str, commit: &str, dir: &str) -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/old-module.sh"))
        .arg(commit)
        .arg(root.join("target").join(dir))
        .output()
        .expect("run scripts/old-module.sh");
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).trim().into()),
        Some(3) => {
            eprintln!("SKIPPED: needs {version}'s commit");
            None
        }
        _ => panic!("building {version} failed: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// Whether the server has `aux_save2` (Redis 7.2+, every Valkey, which reports 7.2.4 or
/// later).
fn has_aux_save2(c: &mut Connection) -> bool {
    let version = info_field(c, "server", "redis_version");
    let parts: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.get(..2).is_some_and(|v| (v[0], v[1]) >= (7, 2))
}

/// What the earlier 0.3.0 build saved (aux data; on Redis 7.0 with its opt-in) loads here,
/// and what it reads back of ours: on 7.2+ and Valkey every RDB (the same aux data); on Redis
/// 7.0 an RDB with policies stops it (it has no loader for the carrier key), one without
/// loads.
#[test]
fn an_earlier_0_3_0_build_and_this_one_read_each_others_rdb_files() {
    let Some(earlier) = module_0_3_0_earlier() else { return };
    let saver = Server::start_module(&earlier, &[], &["policies-in-rdb", "yes"]);
    let mut c = saver.conn();
    define(&mut c);
    save(&mut c);
    let (mut here, loaded) = load_with(&module_path(), &saver);
    loaded.expect("this build loads the earlier build's RDB");
    defined(&mut here.conn());
    // And back.
    let mut hc = here.conn();
    save(&mut hc);
    let (back, loaded) = load_with(&earlier, &here);
    if has_aux_save2(&mut hc) {
        loaded.expect("the earlier build loads this build's aux data");
        defined_read_only(&mut back.conn(), "read back by the earlier build");
    } else {
        assert!(loaded.is_err(), "Redis 7.0: the earlier build cannot load the carrier key");
    }
    for name in ["free", "pro"] {
        del(&mut hc, &format!("RL.POLICY DEL {name}"));
    }
    save(&mut hc);
    let (_back, loaded) = load_with(&earlier, &here);
    loaded.expect("the earlier build loads an RDB without policies");
    here.stop();
}

/// A server loading `module` started on the RDB file `from` saved (`Err`: it exited while
/// loading).
fn load_with(module: &std::path::Path, from: &Server) -> (Server, Result<(), String>) {
    let mut s = Server::start_module(module, &[], &[]);
    s.stop();
    std::fs::copy(from.path("dump.rdb"), s.path("dump.rdb")).expect("copy dump.rdb");
    let loaded = s.try_restart();
    (s, loaded)
}

#[test]
fn the_previous_release_loads_an_rdb_once_policies_are_gone() {
    let Some(old) = module_0_2_0() else { return };
    let server = Server::start();
    let mut c = server.conn();
    ints(&mut c, &["RL.TOKEN", "k", "5", "1", "1h"]);
    define(&mut c);
    save(&mut c);
    let (_s, loaded) = load_with(&old, &server);
    assert!(loaded.is_err(), "0.2.0 cannot load policies (documented)");
    for name in ["free", "pro"] {
        del(&mut c, &format!("RL.POLICY DEL {name}"));
    }
    save(&mut c);
    let (s, loaded) = load_with(&old, &server);
    loaded.expect("0.2.0 loads an RDB without policies");
    assert_eq!(stored_state(&mut s.conn(), "k"), stored_state(&mut c, "k"));
}

/// The downgrade procedure of docs/operations.md for an AOF: `RL.POLICY SET` commands in it
/// stop 0.2.0 (an unknown command in an AOF is fatal), deleting the policies is not enough;
/// a rewrite after deleting them leaves files 0.2.0 starts on.
#[test]
fn the_previous_release_loads_an_aof_once_policies_are_gone_and_rewritten() {
    let Some(old) = module_0_2_0() else { return };
    let server = Server::start_with(&["--appendonly", "yes"]);
    let mut c = server.conn();
    ints(&mut c, &["RL.TOKEN", "k", "5", "1", "1h"]);
    define(&mut c);
    for name in ["free", "pro"] {
        del(&mut c, &format!("RL.POLICY DEL {name}"));
    }
    let (_s, loaded) = load_aof_with(&old, &server);
    assert!(loaded.is_err(), "0.2.0 refuses RL.POLICY in the AOF");
    rewrite_aof(&mut c);
    let (s, loaded) = load_aof_with(&old, &server);
    loaded.expect("0.2.0 loads the rewritten AOF");
    assert_eq!(stored_state(&mut s.conn(), "k"), stored_state(&mut c, "k"));
}

/// 0.2.0 started with `appendonly yes` on a copy of the AOF files `from` wrote (`Err`: it
/// exited while loading).
fn load_aof_with(module: &std::path::Path, from: &Server) -> (Server, Result<(), String>) {
    let mut s = Server::start_module(module, &["--appendonly", "yes"], &[]);
    s.stop();
    let _ = std::fs::remove_dir_all(s.path("appendonlydir"));
    std::fs::create_dir_all(s.path("appendonlydir")).expect("appendonlydir");
    for entry in std::fs::read_dir(from.path("appendonlydir")).expect("appendonlydir").flatten() {
        std::fs::copy(entry.path(), s.path("appendonlydir").join(entry.file_name()))
            .expect("copy an AOF file");
    }
    let loaded = s.try_restart();
    (s, loaded)
}

/// A cluster node restarts with its policies, and the snapshot's carrier key (Redis 7.0) is
/// gone before the node checks its keys against its slots: a node that owns no slot claims
/// none.
#[test]
fn a_cluster_node_restarts_with_its_policies_and_claims_no_slot() {
    let mut node = cluster_node();
    let mut c = node.conn();
    ok(&mut c, "RL.POLICY SET free TOKEN 5 1 1s");
    save(&mut c);
    node.restart();
    let mut c = node.conn();
    assert_eq!(names(&mut c), ["free"]);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0, "no carrier key");
    assert_eq!(info_field_of(&mut c, "CLUSTER", "INFO", "cluster_slots_assigned"), "0");
}

/// One `field:value` line of a command's text reply (`CLUSTER INFO`).
fn info_field_of(con: &mut Connection, command: &str, arg: &str, field: &str) -> String {
    let text: String = redis::cmd(command).arg(arg).query(con).expect(command);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A `DUMP` payload of the snapshot's carrier key type (`rl-policy`), holding the policy table
/// `bytes` (the policy codec's format), for a `RESTORE` by hand.
fn carrier_payload(table: &[u8]) -> Vec<u8> {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id: u64 = 0;
    for c in b"rl-policy" {
        let position = CHARSET.iter().position(|x| x == c).expect("type name charset");
        id = (id << 6) | position as u64;
    }
    id = (id << 10) | 1; // encoding version 1
    let mut p = vec![7u8, 0x81]; // a module value (v2), its 64-bit type id
    p.extend_from_slice(&id.to_be_bytes());
    p.push(5); // a string field
    assert!(table.len() < 16_384);
    p.extend_from_slice(&(0x4000u16 | table.len() as u16).to_be_bytes());
    p.extend_from_slice(table);
    p.push(0); // the value's end
    p.extend_from_slice(&10u16.to_le_bytes()); // RDB version 10 (Redis 7.0): every server reads it
    p.extend_from_slice(&crc64(&p).to_le_bytes());
    p
}

/// The carrier key's loader replaces the table only while the server loads: a `RESTORE` of a
/// payload of its type (made by hand: the key is never visible) is refused and changes no
/// policy.
#[test]
fn a_restored_payload_never_replaces_the_table() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET mine TOKEN 5 1 1s");
    let mut table = vec![1u8];
    let entry: [&[u8]; 5] = [b"evil", b"TOKEN", b"1", b"1", b"1s"];
    table.extend_from_slice(&(entry.len() as u32).to_le_bytes());
    for arg in entry {
        table.extend_from_slice(&(arg.len() as u32).to_le_bytes());
        table.extend_from_slice(arg);
    }
    let refused: redis::RedisResult<()> =
        redis::cmd("RESTORE").arg("k").arg(0).arg(carrier_payload(&table)).query(&mut c);
    let e = refused.expect_err("RESTORE refused");
    assert!(format!("{e}").contains("Bad data format"), "{e}");
    assert_eq!(names(&mut c), ["mine"]);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 0);
    assert_logged(&server, "refusing a policy table outside a load");
}
