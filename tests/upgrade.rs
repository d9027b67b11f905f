//! Upgrades and downgrades against the previous release's module, built from this
//! repository's history (`scripts/old-module.sh`, once, cached in `target/upgrade-0.1.0/`):
//! 0.1.0's RDB, AOF and `DUMP` payloads load here with identical `RL.INFO`, expiry and
//! digests; an old master feeds a new replica; a new master feeds an old replica (the
//! rolling-upgrade window after a failover) as long as no value uses a feature added since
//! 0.1.0 — and what happens when one does; the downgrade procedure of
//! `docs/operations.md#upgrades`. And 0.2.0 reads everything this version writes.
//!
//! 0.1.0 is commit a1fb5ec: the last one before the 0.2.0 work (CHANGELOG: the client hooks
//! and the one-way dispatch that follow it are 0.2.0's; d2edb34 bumps the version). 0.2.0 is
//! 5377d08, the tip of main before the 0.3.0 work. In a shallow clone without those commits
//! the tests say so and skip.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The last commit of 0.1.0.
const RELEASE_0_1_0: &str = "a1fb5ec60ecb6a4ca48710acb4f07c6c47db9ea6";
/// The last commit of 0.2.0 (the tip of main before the 0.3.0 work).
const RELEASE_0_2_0: &str = "5377d08618e8ccd3af2a66d54e4592bd056fcae2";

const T0: i64 = 4_000_000_000_000;

/// 0.1.0's module (see [`release_module`]).
fn old_module() -> Option<PathBuf> {
    static MODULE: OnceLock<Option<PathBuf>> = OnceLock::new();
    MODULE.get_or_init(|| release_module("0.1.0", RELEASE_0_1_0)).clone()
}

/// 0.2.0's module (see [`release_module`]).
fn module_0_2_0() -> Option<PathBuf> {
    static MODULE: OnceLock<Option<PathBuf>> = OnceLock::new();
    MODULE.get_or_init(|| release_module("0.2.0", RELEASE_0_2_0)).clone()
}

/// A release's module, built once per clone into `target/upgrade-<version>/` (every test
/// binary and server of `make compat` shares it); `None`, with a message, when this clone
/// lacks the commit.
fn release_module(version: &str, commit: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("scripts/old-module.sh"))
        .arg(commit)
        .arg(root.join(format!("target/upgrade-{version}")))
        .output()
        .expect("run scripts/old-module.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())),
        Some(3) => {
            eprintln!("SKIPPED: the upgrade tests need {version}'s commit: {stderr}");
            None
        }
        _ => panic!("building {version}'s module failed ({}):\n{stderr}", out.status),
    }
}

/// Runs `calls` (one command per line; `{dt}` is the instant `T0 + dt`) and returns the keys
/// they name, in order.
fn populate(c: &mut Connection, calls: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for call in calls {
        let text = match call.split_once('{') {
            Some((head, dt)) => {
                let dt: i64 = dt.trim_end_matches('}').parse().expect("offset");
                format!("{head}{}", T0 + dt)
            }
            None => call.to_string(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        run(c, &words).unwrap_or_else(|e| panic!("{text}: {e}"));
        let named: Vec<String> = if words[0] == "RL.ALL" {
            let n: usize = words[1].parse().expect("numkeys");
            words[2..2 + n].iter().map(|k| k.to_string()).collect()
        } else {
            vec![words[1].to_string()]
        };
        for key in named {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// What 0.1.0 could store: every algorithm and mode, fractions and offsets, bans (one whose
/// limiter was refunded away), leases (named and server ids), `RL.ALL`.
const OLD_FEATURES: &[&str] = &[
    "RL.TOKEN smooth 10 3 7 COST 4 AT {0}",
    "RL.TOKEN smooth 10 3 7 COST 2 AT {5}",
    "RL.TOKEN step 5 2 1s STEP COST 3 AT {0}",
    "RL.TOKEN step 5 2 1s STEP COST 1 AT {1500}",
    "RL.PERIOD window 10 1m COST 3 AT {0}",
    "RL.PERIOD aligned 10 1d ALIGN -5h COST 3 AT {0}",
    "RL.LEAKY queue 10 3 7 COST 4 AT {0}",
    "RL.LEAKY meter 10 3 7 NODELAY COST 4 AT {1}",
    "RL.LEAKY delayed 10 3 7 DELAY 2 COST 4 AT {1}",
    "CL.THROTTLE cell 15 30 60 3 AT {0}",
    "RL.SLIDE log 10 1m COST 2 AT {0}",
    "RL.SLIDE log 10 1m COST 3 AT {300}",
    "RL.SLIDE buckets 10 1m BUCKETS 6 COST 2 AT {0}",
    "RL.SLIDE buckets 10 1m BUCKETS 6 COST 3 AT {300}",
    "RL.SLIDE login 2 15m AT {0}",
    "RL.SLIDE login 2 15m AT {1}",
    "RL.SLIDE login 2 15m BAN 1h AT {2}",
    "RL.TOKEN locked 2 1 1s COST 2 AT {0}",
    "RL.TOKEN locked 2 1 1s BAN 1h AT {1}",
    "RL.REFUND locked 5 AT {2}",
    "RL.ACQUIRE workers 3 1h ID job-7 AT {0}",
    "RL.ACQUIRE workers 3 1h AT {10}",
    "RL.ALL 2 user:1 ip:1 TOKEN 5 1 1s PERIOD 20 1h COST 2 AT {20}",
];

/// What only this version stores: sliding windows with `ANCHOR`/`FLOOR` (0.2.0), one under
/// a ban.
const NEW_FEATURES: &[&str] = &[
    "RL.SLIDE anchored 10 1m BUCKETS 6 ANCHOR COST 2 AT {3}",
    "RL.SLIDE floored 10 1m BUCKETS 3 FLOOR COST 4 AT {5}",
    "RL.SLIDE anchored-lock 1 1m BUCKETS 2 ANCHOR FLOOR AT {0}",
    "RL.SLIDE anchored-lock 1 1m BUCKETS 2 ANCHOR FLOOR BAN 1h AT {1}",
];

/// One key as both versions must agree on it: `RL.INFO` up to `ttl_ms`, `PEXPIRETIME` and
/// `DEBUG DIGEST-VALUE` (the stored bytes). Two differences of `RL.INFO` since 0.1.0 are left
/// out: the `anchor 0`/`floor 0` this version adds for a bucketed window that uses neither,
/// and the tokens of the keys in [`FRESH_UNDER_BAN`] — since 0.2.0 `RL.INFO` reports a limiter
/// that counts as fresh under its ban (refunded back to its initial state, or cleared by
/// `BAN d CLEAR`) as that initial state, 0.1.0 the stored counts; the stored value (digest) is
/// the same.
type Seen = (Vec<(String, String)>, i64, String);

/// The token buckets of these tests that count as fresh under their ban (with or without a
/// `:copy` suffix).
const FRESH_UNDER_BAN: [&str; 2] = ["locked", "cleared"];

fn seen(c: &mut Connection, key: &str) -> Seen {
    let (state, expiry, digest) = snapshot(c, key);
    let fresh = FRESH_UNDER_BAN.iter().any(|k| key.split(':').next() == Some(*k));
    let left_out = |(k, v): &(String, String)| {
        ((k == "anchor" || k == "floor") && v == "0")
            || (fresh && (k == "tokens" || k == "fraction"))
    };
    (state.into_iter().filter(|f| !left_out(f)).collect(), expiry, digest)
}

fn all_seen(c: &mut Connection, keys: &[String]) -> Vec<Seen> {
    keys.iter().map(|k| seen(c, k)).collect()
}

/// `DEBUG DIGEST`: the whole dataset.
fn digest(c: &mut Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(c).expect("DEBUG DIGEST")
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).expect("EXISTS") == 1
}

/// A server loading `module` on the persistence files `from` left: its directory's
/// `dump.rdb` and `appendonlydir`, copied while it is stopped, then a restart (`Err`: it
/// exited while loading).
fn load_files(module: &Path, extra: &[&str], from: &Server) -> (Server, Result<(), String>) {
    let mut s = Server::start_module(module, extra, &[]);
    s.stop();
    let rdb = from.path("dump.rdb");
    if rdb.exists() {
        std::fs::copy(&rdb, s.path("dump.rdb")).expect("copy dump.rdb");
    }
    let aof = from.path("appendonlydir");
    if aof.exists() {
        let _ = std::fs::remove_dir_all(s.path("appendonlydir"));
        std::fs::create_dir_all(s.path("appendonlydir")).expect("appendonlydir");
        for entry in std::fs::read_dir(&aof).expect("read appendonlydir").flatten() {
            std::fs::copy(entry.path(), s.path("appendonlydir").join(entry.file_name()))
                .expect("copy an AOF file");
        }
    }
    let loaded = s.try_restart();
    (s, loaded)
}

fn save(s: &Server) {
    let _: () = redis::cmd("SAVE").query(&mut s.conn()).expect("SAVE");
}

/// `BGREWRITEAOF`, waited for.
fn rewrite_aof(s: &Server) {
    let mut c = s.conn();
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
    wait_for("the AOF rewrite", || {
        info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(info_field(&mut c, "persistence", "aof_last_bgrewrite_status"), "ok");
}

/// The limiters 0.1.0 left keep working here from where they were: the smooth bucket at
/// `T0 + 5` holds 6 tokens and 1/7, the lease set takes its third and last lease.
fn still_limits(c: &mut Connection) {
    let at = T0.to_string();
    assert_eq!(
        ints(c, &["RL.TOKEN", "smooth", "10", "3", "7", "COST", "0", "AT", &at]),
        [1, 10, 6, 0, 9]
    );
    let third: Value = run(c, &["RL.ACQUIRE", "workers", "3", "1h", "AT", &(T0 + 20).to_string()])
        .expect("RL.ACQUIRE");
    let Value::Array(fields) = third else { panic!("{third:?}") };
    assert_eq!(fields[..3], [Value::Int(1), Value::Int(3), Value::Int(0)]);
}

/// RDB and AOF files 0.1.0 wrote load here: the same keys, state, expiry and digests.
#[test]
fn files_of_0_1_0_load() {
    let Some(old) = old_module() else { return };
    for (name, extra) in [
        ("rdb", &[][..]),
        ("aof", &["--appendonly", "yes", "--appendfsync", "always"][..]),
        ("aof rewritten", &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"][..]),
        ("aof with rdb preamble", &["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"][..]),
    ] {
        let s = Server::start_module(&old, extra, &[]);
        let mut oc = s.conn();
        let keys = populate(&mut oc, OLD_FEATURES);
        let before = all_seen(&mut oc, &keys);
        let whole = digest(&mut oc);
        if name == "rdb" {
            save(&s);
        } else if name != "aof" {
            rewrite_aof(&s);
        }
        let (new, loaded) = load_files(&module_path(), extra, &s);
        loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut nc = new.conn();
        assert_eq!(all_seen(&mut nc, &keys), before, "{name}");
        assert_eq!(digest(&mut nc), whole, "{name}");
        still_limits(&mut nc);
    }
}

/// `DUMP` payloads of 0.1.0 `RESTORE` here, and this version's `RESTORE` there — except a value
/// that uses a newer feature, which 0.1.0 refuses with an error (and stays up).
#[test]
fn dump_payloads_cross_both_ways() {
    let Some(old) = old_module() else { return };
    let (o, n) = (Server::start_module(&old, &[], &[]), Server::start());
    let (mut oc, mut nc) = (o.conn(), n.conn());
    let keys = populate(&mut oc, OLD_FEATURES);
    assert_eq!(populate(&mut nc, OLD_FEATURES), keys);
    let new_keys = populate(&mut nc, NEW_FEATURES);
    for (from, to, direction) in [(&o, &n, "0.1.0 → this"), (&n, &o, "back")] {
        let (from, to) = (&mut from.conn(), &mut to.conn());
        for key in &keys {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(from).expect("DUMP");
            let expiry = pexpiretime(from, key);
            let copy = format!("{key}:copy");
            let _: () = redis::cmd("RESTORE")
                .arg(&copy)
                .arg(expiry)
                .arg(payload)
                .arg("ABSTTL")
                .query(to)
                .unwrap_or_else(|e| panic!("{direction} {key}: {e}"));
            assert_eq!(seen(to, &copy), seen(from, key), "{direction} {key}");
        }
    }
    for key in &new_keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut nc).expect("DUMP");
        let r: redis::RedisResult<()> =
            redis::cmd("RESTORE").arg(key).arg(0).arg(payload).query(&mut oc);
        assert!(r.is_err(), "0.1.0 restored {key}");
        assert!(!exists(&mut oc, key));
    }
    o.assert_alive();
}

/// An old master with a new replica (the first step of a rolling upgrade): the full sync and
/// the stream after it leave the replica digest-equal.
#[test]
fn old_master_new_replica() {
    let Some(old) = old_module() else { return };
    let master = Server::start_module(&old, &[], &[]);
    let mut mc = master.conn();
    let mut keys = populate(&mut mc, OLD_FEATURES);
    let replica = replica_of(&master, &[]);
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    // The stream: calls without AT (each key's state as RL.RESTORE), with AT, RL.ALL, leases.
    keys.extend(populate(
        &mut mc,
        &[
            "RL.TOKEN live 10 1 1h COST 3",
            "RL.PERIOD window 10 1m COST 2 AT {100}",
            "RL.SLIDE live-log 10 1h COST 2",
            "RL.ALL 2 user:2 ip:2 LEAKY 5 1 1h SLIDE 9 1h BUCKETS 3",
            "RL.ACQUIRE workers 3 1h",
            "RL.RELEASE workers job-7",
            "CL.THROTTLE cell 15 30 60 1",
            "RL.TOKEN ban-live 1 1 1h",
            "RL.TOKEN ban-live 1 1 1h BAN 1h",
        ],
    ));
    wait_in_sync(&master, &replica);
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
    replica.assert_alive();
}

/// A new master with an old replica (after the failover of a rolling upgrade), on data that
/// uses no feature added since 0.1.0: the full sync and the stream leave the old replica
/// digest-equal — also for this version's options that store nothing new (`FRESH`,
/// `KEEPPERIOD`, `BAN d CLEAR`) on a single key without `AT`, whose calls reach replicas as
/// the state they left (or `DEL`). A value that needs a newer encoding, or a call with a newer option
/// that reaches replicas as itself, is refused by the old replica, which keeps running without
/// that key; the rest stays equal.
#[test]
fn new_master_old_replica() {
    let Some(old) = old_module() else { return };
    let master = Server::start();
    let mut mc = master.conn();
    let mut keys = populate(&mut mc, OLD_FEATURES);
    let replica = replica_with_module(&master, &old, &[]);
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
    keys.extend(populate(
        &mut mc,
        &[
            "RL.TOKEN live 10 1 1h COST 3",
            "RL.TOKEN live 10 1 1h COST 1 FRESH",
            "RL.PERIOD kept 10 1h COST 2",
            "RL.PERIOD kept 10 1d KEEPPERIOD",
            "RL.TOKEN cleared 1 1 1h",
            "RL.TOKEN cleared 1 1 1h BAN 1h CLEAR",
            "RL.TOKEN gone 10 1 1h COST 3",
            "RL.TOKEN gone 10 1 1h COST 0 FRESH",
            "RL.SLIDE live-log 10 1h COST 2",
            "RL.ALL 2 user:2 ip:2 LEAKY 5 1 1h SLIDE 9 1h BUCKETS 3",
            "RL.ACQUIRE workers 3 1h",
            "RL.RELEASE workers job-7",
        ],
    ));
    wait_in_sync(&master, &replica);
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
    assert!(!exists(&mut rc, "gone"), "a FRESH COST 0 deletion reaches replicas as DEL");
    // What the old replica refuses (and logs), staying up without those keys: a sliding
    // window with ANCHOR (its state needs format version 3), and calls that reach replicas as
    // the call itself with an option 0.1.0 lacks — one with its own AT (verbatim), RL.ALL.
    let refused = populate(
        &mut mc,
        &[
            "RL.SLIDE anchored-live 10 1h BUCKETS 6 ANCHOR",
            "RL.PERIOD kept-at 10 1h KEEPPERIOD AT {0}",
            "RL.ALL 2 all:a all:b TOKEN 5 1 1h SLIDE 9 1h BUCKETS 3 FLOOR",
        ],
    );
    line(&mut mc, "RL.TOKEN after 10 1 1h");
    wait_in_sync(&master, &replica);
    replica.assert_alive();
    assert_eq!(refused.len(), 4);
    for key in &refused {
        assert!(exists(&mut mc, key) && !exists(&mut rc, key), "{key}");
    }
    keys.push("after".into());
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
}

/// A new master whose data uses a newer feature: an old replica's full sync fails and the old
/// server exits (Redis stops on a value it cannot load) — every time it retries. Once those
/// keys are gone (the downgrade procedure's first step), it syncs digest-equal.
#[test]
fn new_feature_stops_an_old_replica_until_dropped() {
    let Some(old) = old_module() else { return };
    let master = Server::start();
    let mut mc = master.conn();
    let keys = populate(&mut mc, OLD_FEATURES);
    let new_keys = populate(&mut mc, NEW_FEATURES);
    let mut replica = attached(&master, &old);
    wait_for("the old replica to exit", || replica.has_exited());
    master.assert_alive();
    let mut new_keys = new_keys;
    new_keys.sort();
    assert_eq!(dropped_new_features(&mut mc), new_keys);
    let replica = replica_with_module(&master, &old, &[]);
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
}

/// A server on `module` told to replicate `master` (`REPLICAOF`), not waited for: it may exit
/// on the full sync.
fn attached(master: &Server, module: &Path) -> Server {
    let replica = Server::start_module(module, &[], &[]);
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut replica.conn())
        .expect("REPLICAOF");
    replica
}

/// The downgrade procedure's first step (`docs/operations.md#upgrades`): every key whose
/// `RL.INFO` shows a feature 0.1.0 lacks (`anchor 1` or `floor 1`) deleted. Returns them.
fn dropped_new_features(c: &mut Connection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("TYPE")
        .arg("ratelimit")
        .clone()
        .iter(c)
        .expect("SCAN")
        .collect();
    keys.sort();
    let mut dropped = Vec::new();
    for key in keys {
        let state = stored_state(c, &key);
        if state.iter().any(|(k, v)| (k == "anchor" || k == "floor") && v == "1") {
            let _: i64 = redis::cmd("DEL").arg(&key).query(c).expect("DEL");
            dropped.push(key);
        }
    }
    dropped
}

/// Going back to 0.1.0 from this version's files. With a value that uses a newer feature,
/// 0.1.0 refuses to start on an RDB file (or an AOF with an RDB preamble), and starts without
/// those keys on an AOF of commands (Redis logs each refused `RL.RESTORE` and goes on). After
/// the keys that use one are dropped and the files written again (`SAVE`, `BGREWRITEAOF`),
/// 0.1.0 loads them with identical state, expiry and digests.
#[test]
fn downgrade_to_0_1_0() {
    let Some(old) = old_module() else { return };
    for (name, extra) in [
        ("rdb", &[][..]),
        ("aof with rdb preamble", &["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"][..]),
        ("aof", &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"][..]),
    ] {
        let s = Server::start_with(extra);
        let mut c = s.conn();
        let keys = populate(&mut c, OLD_FEATURES);
        let mut new_keys = populate(&mut c, NEW_FEATURES);
        let write = |s: &Server| if name == "rdb" { save(s) } else { rewrite_aof(s) };
        write(&s);
        let (mut refused, loaded) = load_files(&old, extra, &s);
        if name == "aof" {
            loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut rc = refused.conn();
            assert!(new_keys.iter().all(|k| !exists(&mut rc, k)), "{name}");
            assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut c, &keys), "{name}");
        } else {
            assert!(loaded.is_err(), "{name}: 0.1.0 loaded values it cannot hold");
            assert!(refused.has_exited());
        }
        new_keys.sort();
        assert_eq!(dropped_new_features(&mut c), new_keys, "{name}");
        let before = all_seen(&mut c, &keys);
        let whole = digest(&mut c);
        write(&s);
        let (back, loaded) = load_files(&old, extra, &s);
        loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut bc = back.conn();
        assert_eq!(all_seen(&mut bc, &keys), before, "{name}");
        assert_eq!(digest(&mut bc), whole, "{name}");
    }
}

/// 0.2.0 reads everything this version writes, the newer features included: its RDB and
/// rewritten AOF load there, a 0.2.0 replica of a new master follows the full sync and the
/// stream, and `DUMP` payloads restore — with identical state, expiry and digests. (And an
/// RDB 0.2.0 wrote, RDB encoding version 3 before every value, loads here.)
#[test]
fn this_version_goes_back_to_0_2_0() {
    let Some(previous) = module_0_2_0() else { return };
    let mut calls = OLD_FEATURES.to_vec();
    calls.extend_from_slice(NEW_FEATURES);
    let s = Server::start_module(&previous, &[], &[]);
    let mut c = s.conn();
    let keys = populate(&mut c, &calls);
    save(&s);
    let (new, loaded) = load_files(&module_path(), &[], &s);
    loaded.unwrap_or_else(|e| panic!("0.2.0's RDB: {e}"));
    let mut nc = new.conn();
    assert_eq!(all_seen(&mut nc, &keys), all_seen(&mut c, &keys));
    assert_eq!(digest(&mut nc), digest(&mut c));
    for (name, extra) in
        [("rdb", &[][..]), ("aof", &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"][..])]
    {
        let s = Server::start_with(extra);
        let mut c = s.conn();
        let keys = populate(&mut c, &calls);
        if name == "rdb" {
            save(&s);
        } else {
            rewrite_aof(&s);
        }
        let (back, loaded) = load_files(&previous, extra, &s);
        loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut bc = back.conn();
        assert_eq!(all_seen(&mut bc, &keys), all_seen(&mut c, &keys), "{name}");
        assert_eq!(digest(&mut bc), digest(&mut c), "{name}");
    }
    let master = Server::start();
    let mut mc = master.conn();
    let mut keys = populate(&mut mc, &calls);
    let replica = replica_with_module(&master, &previous, &[]);
    keys.extend(populate(
        &mut mc,
        &[
            "RL.SLIDE anchored-live 10 1h BUCKETS 6 ANCHOR FLOOR",
            "RL.TOKEN gone 10 1 1h COST 3",
            "RL.TOKEN gone 10 1 1h COST 0 FRESH",
            "RL.ALL 2 all:a all:b TOKEN 5 1 1h SLIDE 9 1h BUCKETS 3 FLOOR",
        ],
    ));
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
    let standalone = Server::start_module(&previous, &[], &[]);
    let mut pc = standalone.conn();
    let mut new_keys: Vec<&str> =
        NEW_FEATURES.iter().filter_map(|c| c.split_whitespace().nth(1)).collect();
    new_keys.dedup();
    for key in new_keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut mc).expect("DUMP");
        let copy = format!("{key}:copy");
        let _: () = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(pexpiretime(&mut mc, key))
            .arg(payload)
            .arg("ABSTTL")
            .query(&mut pc)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(seen(&mut pc, &copy), seen(&mut mc, key), "{key}");
    }
}

/// Policies (`RL.POLICY`, 0.3.0) travel in RDB files as the type `rl-policy` (aux data, or a
/// carrier key on Redis 7.0), which 0.2.0 cannot load: a 0.2.0 replica of a master with a
/// policy exits on its full sync, on every server; once every policy is deleted, it syncs
/// digest-equal.
#[test]
fn policies_stop_a_0_2_0_replica_until_deleted() {
    let Some(previous) = module_0_2_0() else { return };
    let master = Server::start();
    let mut mc = master.conn();
    let keys = populate(&mut mc, OLD_FEATURES);
    run(&mut mc, &["RL.POLICY", "SET", "free", "TOKEN", "100", "10", "1s"]).expect("RL.POLICY");
    let mut replica = attached(&master, &previous);
    wait_for("the 0.2.0 replica to exit", || replica.has_exited());
    master.assert_alive();
    run(&mut mc, &["RL.POLICY", "DEL", "free"]).expect("RL.POLICY DEL");
    let replica = replica_with_module(&master, &previous, &[]);
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    assert_eq!(all_seen(&mut rc, &keys), all_seen(&mut mc, &keys));
    assert_eq!(digest(&mut rc), digest(&mut mc));
}
