//! Policies are node state like Redis Functions: they survive a restart (RDB, AOF with and
//! without the RDB preamble), `DEBUG RELOAD`, `FLUSHALL`, reach replicas (stream and full
//! sync), a promoted replica keeps them, and `RL.HIT` propagates the state it left, so
//! replicas reach the same state without looking policies up.

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

/// Whether the server has `aux_save2` (Redis 7.2+, Valkey): then policies reach RDB files
/// without `ratelimit.policies-in-rdb yes`.
fn rdb_by_default(con: &mut Connection) -> bool {
    let info = format!("{:?}", run(con, &["COMMAND", "INFO", "rl.hit"]).unwrap());
    info.contains("@ratelimit")
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

#[test]
fn policies_survive_a_restart_from_rdb_and_debug_reload() {
    let mut server = Server::start_full(&[], &["policies-in-rdb", "yes"]);
    let mut c = server.conn();
    define(&mut c);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    defined(&mut c);
    ok(&mut c, "RL.POLICY SET gone TOKEN 1 1 1s");
    save(&mut c);
    del(&mut c, "RL.POLICY DEL gone");
    server.restart();
    let mut c = server.conn();
    assert_eq!(
        names(&mut c),
        ["free", "gone", "pro"],
        "the RDB's table replaces the one in memory"
    );
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

#[test]
fn without_the_option_policies_reach_rdb_only_where_aux_save2_exists() {
    let mut server = Server::start();
    let mut c = server.conn();
    define(&mut c);
    save(&mut c);
    server.restart();
    let mut c = server.conn();
    if rdb_by_default(&mut c) {
        defined(&mut c);
    } else {
        assert!(names(&mut c).is_empty(), "Redis 7.0: not in the RDB without policies-in-rdb");
    }
}

#[test]
fn policies_survive_aof_restarts_and_rewrites() {
    for preamble in ["yes", "no"] {
        let mut server =
            Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
        let mut c = server.conn();
        define(&mut c);
        server.restart();
        let mut c = server.conn();
        defined(&mut c);
        rewrite_aof(&mut c);
        ok(&mut c, "RL.POLICY SET late PERIOD 1 1s");
        server.restart();
        let mut c = server.conn();
        let expected = vec!["free", "late", "pro"];
        assert_eq!(names(&mut c), expected, "preamble {preamble}");
        assert_eq!(line(&mut c, "RL.HIT free fresh-user")[..3], [1, 5, 4]);
        // A second rewrite, from a table that came back from the incremental file.
        rewrite_aof(&mut c);
        server.restart();
        assert_eq!(names(&mut server.conn()), expected, "preamble {preamble}, twice");
    }
}

#[test]
fn replicas_get_policies_and_the_state_hit_left() {
    let master = Server::start_full(&[], &["policies-in-rdb", "yes"]);
    let mut mc = master.conn();
    define(&mut mc);
    // A full sync carries the table.
    let replica = Server::start_full(
        &["--replicaof", "127.0.0.1", &master.port.to_string()],
        &["policies-in-rdb", "yes"],
    );
    let mut rc = replica.conn();
    wait_for("replication link", || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    assert_eq!(names(&mut rc), ["free", "pro"]);
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

/// The previous releases have no aux loader: an RDB written without policies must carry no
/// aux record (on servers with `aux_save2`), so they can still load it.
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
    // Same size: no aux record (the bytes differ only in timestamps).
    assert_eq!(empty.len(), after.len());
    ok(&mut c, "RL.POLICY SET p TOKEN 5 1 1s");
    save(&mut c);
    let with = std::fs::read(server.path("dump.rdb")).unwrap();
    if rdb_by_default(&mut c) {
        assert!(with.len() > after.len(), "a table is saved");
    } else {
        assert_eq!(with.len(), after.len(), "Redis 7.0 without the option saves none");
    }
}

/// 0.2.0's module, built by `scripts/old-module.sh` (shared with `tests/upgrade.rs`); `None`
/// when this clone lacks the release's commit.
fn module_0_2_0() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/old-module.sh"))
        .arg("5377d08618e8ccd3af2a66d54e4592bd056fcae2")
        .arg(root.join("target/upgrade-0.2.0"))
        .output()
        .expect("run scripts/old-module.sh");
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).trim().into()),
        Some(3) => {
            eprintln!("SKIPPED: needs 0.2.0's commit");
            None
        }
        _ => panic!("building 0.2.0 failed: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// 0.2.0 started on the RDB file `from` saved (`Err`: it exited while loading).
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
    if rdb_by_default(&mut c) {
        let (_s, loaded) = load_with(&old, &server);
        assert!(loaded.is_err(), "0.2.0 cannot load policies (documented)");
    }
    for name in ["free", "pro"] {
        del(&mut c, &format!("RL.POLICY DEL {name}"));
    }
    save(&mut c);
    let (s, loaded) = load_with(&old, &server);
    loaded.expect("0.2.0 loads an RDB without policies");
    assert_eq!(stored_state(&mut s.conn(), "k"), stored_state(&mut c, "k"));
}
