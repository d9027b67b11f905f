//! Slots moving between cluster nodes with the module loaded.
//!
//! - **Classic resharding** (`CLUSTER SETSLOT … MIGRATING/IMPORTING` + `MIGRATE`, every
//!   server): a client blocked with `WAIT` (or `RL.ACQUIRE … WAIT`) on a key that `MIGRATE`
//!   moves away is answered with the `-ASK` its client would get, never admitted against the
//!   missing key (a fresh limiter: a permit granted twice).
//! - **Atomic slot migration** (`CLUSTER MIGRATESLOTS`, Valkey ≥ 9; skipped with a printed
//!   reason elsewhere): every value form reaches the target with identical `RL.INFO`,
//!   absolute expiry and `DEBUG DIGEST-VALUE`; calls made during the migration are counted
//!   once; waiters on keys of the moving slot get `-MOVED`; a cancelled migration leaves the
//!   source intact and the target clean; a target killed midway leaves the source serving;
//!   replicas on both sides follow.

mod common;
use common::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T: i64 = 4_000_000_000_000;

fn node_id(s: &Server) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(&mut s.conn()).unwrap()
}

fn cluster_info_ok(s: &Server) -> bool {
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut s.conn()).unwrap_or_default();
    info.contains("cluster_state:ok")
}

/// Polls `ok` every 20 ms until it holds; fails the test after `secs` seconds.
fn wait_secs(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` masters on loopback, the slots split evenly in order (node 0 has the lowest), met and
/// agreeing (`cluster_state:ok` everywhere, every node knowing every slot's owner).
fn masters(n: usize) -> Vec<Server> {
    let nodes: Vec<Server> = (0..n).map(|_| cluster_node()).collect();
    let per = 16384 / n;
    for (i, node) in nodes.iter().enumerate() {
        let start = i * per;
        let end = if i + 1 == n { 16383 } else { start + per - 1 };
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(start)
            .arg(end)
            .query(&mut node.conn())
            .unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg(&["SET-CONFIG-EPOCH", &(i + 1).to_string()])
            .query(&mut node.conn())
            .unwrap();
    }
    for node in &nodes[1..] {
        let _: () = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(nodes[0].port)
            .query(&mut node.conn())
            .unwrap();
    }
    for node in &nodes {
        wait_secs("cluster_state:ok", 30, || cluster_info_ok(node));
    }
    for node in &nodes {
        wait_secs("every node known", 30, || {
            let known: String =
                redis::cmd("CLUSTER").arg("NODES").query(&mut node.conn()).unwrap_or_default();
            known.lines().filter(|l| l.contains("connected")).count() == n
        });
    }
    nodes
}

/// A replica of `master` joined to its cluster, in sync.
fn cluster_replica(master: &Server) -> Server {
    let replica = cluster_node();
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut replica.conn())
        .unwrap();
    let id = node_id(master);
    wait_secs("the replica to know its master", 30, || {
        let nodes: String =
            redis::cmd("CLUSTER").arg("NODES").query(&mut replica.conn()).unwrap_or_default();
        nodes.contains(&id)
    });
    let _: () = redis::cmd("CLUSTER").arg("REPLICATE").arg(&id).query(&mut replica.conn()).unwrap();
    let mut rc = replica.conn();
    wait_secs("the replica's link", 30, || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    replica
}

fn key_slot(s: &Server, key: &str) -> i64 {
    redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut s.conn()).unwrap()
}

/// The first `{prefix<i>}` hash tag whose slot is in `range`.
fn tag_in(s: &Server, prefix: &str, range: std::ops::RangeInclusive<i64>) -> String {
    (0..100_000)
        .map(|i| format!("{{{prefix}{i}}}"))
        .find(|tag| range.contains(&key_slot(s, tag)))
        .expect("a tag in the range")
}

fn count_in_slot(s: &Server, slot: i64) -> i64 {
    redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot).query(&mut s.conn()).unwrap()
}

fn waiting(s: &Server) -> i64 {
    info_field(&mut s.conn(), "ratelimit", "ratelimit_waiting").parse().unwrap()
}

/// A blocked call, run on its own connection to `node`.
fn blocked(node: &Server, args: &[&str]) -> std::thread::JoinHandle<redis::RedisResult<Value>> {
    let mut con = node.conn();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    std::thread::spawn(move || {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut con, &words)
    })
}

/// Defect: a client blocked with `WAIT` on a key that classic resharding moves away was
/// judged again against the missing key (the `del` event of `MIGRATE`) and admitted on the
/// old node, while the target held the bucket at 0. It must get the `-ASK` its client would
/// get (the slot is migrating and the key is not here), and the key must exist once, on the
/// target. The same for `RL.ACQUIRE … WAIT` (a second lease for a limit of 1).
#[test]
fn a_waiter_whose_key_migrates_gets_the_redirect() {
    let nodes = masters(2);
    let (a, b) = (&nodes[0], &nodes[1]);
    let (a_id, b_id) = (node_id(a), node_id(b));
    let cases = [
        (tag_in(a, "hot", 0..=8191), "RL.TOKEN", vec!["1", "1", "1h"]),
        (tag_in(a, "lease", 0..=8191), "RL.ACQUIRE", vec!["1", "1h"]),
    ];
    for (key, command, params) in &cases {
        let mut first = vec![*command, key.as_str()];
        first.extend(params.iter().copied());
        let reply = run(&mut a.conn(), &first).unwrap();
        assert!(
            matches!(&reply, Value::Array(v) if v.first() == Some(&Value::Int(1))),
            "{reply:?}"
        );
        let mut waits = first.clone();
        waits.extend(["WAIT", "20s"]);
        let waiter = blocked(a, &waits);
        wait_secs("the waiter to block", 10, || waiting(a) == 1);

        let slot = key_slot(a, key).to_string();
        let _: () = redis::cmd("CLUSTER")
            .arg(&["SETSLOT", &slot, "IMPORTING", &a_id])
            .query(&mut b.conn())
            .unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg(&["SETSLOT", &slot, "MIGRATING", &b_id])
            .query(&mut a.conn())
            .unwrap();
        let migrated: Value = redis::cmd("MIGRATE")
            .arg(&["127.0.0.1", &b.port.to_string(), "", "0", "5000", "KEYS", key])
            .query(&mut a.conn())
            .unwrap();
        assert_eq!(migrated, Value::Okay);

        let answer = waiter.join().expect("waiter thread");
        let e = answer.expect_err("the waiter must not be judged against the missing key");
        assert_eq!(e.code(), Some("ASK"), "{command}: {e}");
        assert!(e.to_string().contains(&format!("127.0.0.1:{}", b.port)), "{e}");
        assert_eq!(waiting(a), 0);

        // The key lives once, on the target, with its state: the bucket / lease still taken.
        let slot_n: i64 = slot.parse().unwrap();
        assert_eq!(count_in_slot(a, slot_n), 0);
        let mut bc = b.conn();
        let _: () = redis::cmd("ASKING").query(&mut bc).unwrap();
        let again: Vec<Value> = {
            let mut dry = first.clone();
            dry.push("DRYRUN");
            let bytes: Vec<&[u8]> = dry.iter().map(|s| s.as_bytes()).collect();
            cmd(&bytes).query(&mut bc).unwrap()
        };
        assert_eq!(again.first(), Some(&Value::Int(0)), "{command} on the target: {again:?}");
        for node in [a, b] {
            let _: () = redis::cmd("CLUSTER")
                .arg(&["SETSLOT", &slot, "NODE", &b_id])
                .query(&mut node.conn())
                .unwrap();
        }
        let e = run(&mut a.conn(), &first).expect_err("the slot is B's now");
        assert_eq!(e.code(), Some("MOVED"), "{e}");
    }
    a.assert_alive();
    b.assert_alive();
}

/// A `WAIT` on a key whose slot is merely `MIGRATING` (the key still here) is served here as
/// usual: the redirect is only for keys that left.
#[test]
fn a_waiter_on_a_key_still_here_is_served_while_its_slot_migrates() {
    let nodes = masters(2);
    let (a, b) = (&nodes[0], &nodes[1]);
    let key = tag_in(a, "stay", 0..=8191);
    let slot = key_slot(a, &key).to_string();
    // The bucket is emptied; the waiter is admitted by the first token back, which leaves the
    // key in place (a full bucket would expire it: then the key is gone, and `-ASK` is right).
    let args = ["RL.TOKEN", key.as_str(), "2", "1", "300ms", "COST", "2"];
    let first = run(&mut a.conn(), &args).unwrap();
    assert!(matches!(&first, Value::Array(v) if v.first() == Some(&Value::Int(1))), "{first:?}");
    let waiter = blocked(a, &["RL.TOKEN", &key, "2", "1", "300ms", "WAIT", "10s"]);
    wait_secs("the waiter to block", 10, || waiting(a) == 1);
    let _: () = redis::cmd("CLUSTER")
        .arg(&["SETSLOT", &slot, "MIGRATING", &node_id(b)])
        .query(&mut a.conn())
        .unwrap();
    let reply = waiter.join().unwrap().expect("admitted here once the bucket refills");
    assert!(matches!(&reply, Value::Array(v) if v.first() == Some(&Value::Int(1))), "{reply:?}");
}

// ---- Atomic slot migration (Valkey ≥ 9) ----

/// Whether the server under test has atomic slot migration; prints why a test is skipped.
fn has_atomic_slot_migration(test: &str) -> bool {
    let s = Server::start();
    let info: String = redis::cmd("INFO").arg("server").query(&mut s.conn()).unwrap();
    let field = |name: &str| {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).map(|v| v.trim().to_string())
    };
    let major = field("valkey_version")
        .and_then(|v| v.split('.').next().and_then(|m| m.parse::<u32>().ok()))
        .unwrap_or(0);
    if field("server_name").as_deref() == Some("valkey") && major >= 9 {
        return true;
    }
    let server = field("valkey_version").or(field("redis_version")).unwrap_or_default();
    // Written to the process' stderr, not through the test harness' capture: a skip is
    // printed in every run, never a silent pass.
    let line = format!(
        "SKIPPED {test}: {} {server} has no atomic slot migration (CLUSTER MIGRATESLOTS, Valkey >= 9)\n",
        field("server_name").unwrap_or_else(|| "redis".into())
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

/// `CLUSTER GETSLOTMIGRATIONS` on `node`: (operation, state) of each job, newest first.
fn migrations(node: &Server) -> Vec<(String, String)> {
    let jobs: Value =
        redis::cmd("CLUSTER").arg("GETSLOTMIGRATIONS").query(&mut node.conn()).unwrap();
    let Value::Array(jobs) = jobs else { return Vec::new() };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    jobs.iter()
        .map(|job| {
            let pairs: Vec<(String, String)> = match job {
                Value::Array(items) => {
                    items.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
                }
                Value::Map(items) => items.iter().map(|(k, v)| (text(k), text(v))).collect(),
                _ => Vec::new(),
            };
            let get = |k: &str| pairs.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
            (get("operation").unwrap_or_default(), get("state").unwrap_or_default())
        })
        .collect()
}

/// Starts `CLUSTER MIGRATESLOTS SLOTSRANGE slot slot NODE target` on `source`.
fn migrate_slot(source: &Server, slot: i64, target: &Server) {
    let slot = slot.to_string();
    let reply = run(
        &mut source.conn(),
        &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", &slot, &slot, "NODE", &node_id(target)],
    );
    assert_eq!(reply, Ok(Value::Okay), "MIGRATESLOTS: {reply:?}");
}

/// Waits until `node`'s newest migration job is in a final state; returns it.
fn finished(node: &Server) -> String {
    let mut state = String::new();
    wait_secs("the migration to finish", 60, || {
        state = migrations(node).first().map(|(_, s)| s.clone()).unwrap_or_default();
        matches!(state.as_str(), "success" | "failed" | "cancelled")
    });
    state
}

/// Every value form, created on keys of one hash tag (one slot): (key, commands making it).
fn forms(tag: &str) -> Vec<(String, Vec<String>)> {
    let k = |name: &str| format!("{tag}:{name}");
    let at = |ms: i64| format!("AT {}", T + ms);
    let calls: Vec<(&str, Vec<String>)> = vec![
        ("token", vec![format!("RL.TOKEN {} 10 3 7s COST 4 {}", k("token"), at(0))]),
        ("token-step", vec![format!("RL.TOKEN {} 5 1 1m STEP COST 2 {}", k("token-step"), at(0))]),
        ("period", vec![format!("RL.PERIOD {} 10 1d ALIGN 8h COST 3 {}", k("period"), at(0))]),
        ("leaky", vec![format!("RL.LEAKY {} 10 3 7s COST 2 {}", k("leaky"), at(0))]),
        ("leaky-delay", vec![format!("RL.LEAKY {} 10 3 7s DELAY 4 {}", k("leaky-delay"), at(0))]),
        ("gcra", vec![format!("CL.THROTTLE {} 9 3 10 2 {}", k("gcra"), at(0))]),
        ("slide-one", vec![format!("RL.SLIDE {} 10 1m {}", k("slide-one"), at(0))]),
        (
            "slide-log",
            (0..6).map(|i| format!("RL.SLIDE {} 10 1m {}", k("slide-log"), at(i * 700))).collect(),
        ),
        (
            "slide-buckets",
            (0..5)
                .map(|i| {
                    format!(
                        "RL.SLIDE {} 100 1h BUCKETS 4 COST 3 {}",
                        k("slide-buckets"),
                        at(i * 60_000)
                    )
                })
                .collect(),
        ),
        ("lease", (0..2).map(|i| format!("RL.ACQUIRE {} 3 1h {}", k("lease"), at(i))).collect()),
        (
            "debt",
            vec![
                format!("CL.THROTTLE {} 4 1 1 5 {}", k("debt"), at(0)),
                format!("RL.CHARGE {} 2 {}", k("debt"), at(0)),
            ],
        ),
        (
            "ban",
            (0..3).map(|i| format!("RL.TOKEN {} 2 1 1h BAN 10m {}", k("ban"), at(i))).collect(),
        ),
        (
            "wide",
            vec![format!(
                "RL.TOKEN {} 1000000000000 999999999999 9d COST 123456789 {}",
                k("wide"),
                at(0)
            )],
        ),
    ];
    calls.into_iter().map(|(name, cmds)| (k(name), cmds)).collect()
}

fn make_forms(node: &Server, tag: &str) -> Vec<String> {
    let mut con = node.conn();
    forms(tag)
        .into_iter()
        .map(|(key, commands)| {
            for command in &commands {
                let words: Vec<&str> = command.split_whitespace().collect();
                run(&mut con, &words).unwrap_or_else(|e| panic!("{command}: {e}"));
            }
            key
        })
        .collect()
}

type Snapshot = (Vec<(String, String)>, i64, String);

fn snapshots(node: &Server, keys: &[String]) -> Vec<(String, Snapshot)> {
    let mut con = node.conn();
    keys.iter().map(|k| (k.clone(), snapshot(&mut con, k))).collect()
}

fn inline_entries(node: &Server) -> i64 {
    info_field(&mut node.conn(), "ratelimit", "ratelimit_inline_entries").parse().unwrap()
}

/// Every value form moves unchanged (state, absolute expiry, digest) to the target and its
/// replica; the source keeps nothing (keys, inline table entries); waiters on the slot's keys
/// get `-MOVED` to the target; calls made on the slot during the migration through a cluster
/// client (following `MOVED`) are counted exactly once.
#[test]
fn atomic_slot_migration_moves_every_form_and_counts_traffic_once() {
    if !has_atomic_slot_migration("atomic_slot_migration_moves_every_form_and_counts_traffic_once")
    {
        return;
    }
    let nodes = masters(3);
    let (source, target) = (&nodes[0], &nodes[1]);
    let target_replica = cluster_replica(target);
    let source_replica = cluster_replica(source);
    let tag = tag_in(source, "asm", 0..=5000);
    let slot = key_slot(source, &tag);
    let keys = make_forms(source, &tag);
    let before = snapshots(source, &keys);
    assert!(before.iter().all(|(_, (state, _, _))| !state.is_empty()), "{before:?}");
    assert_eq!(inline_entries(target), 0);

    // A waiter on one of the slot's keys (a bucket that refills in an hour).
    let full = format!("{tag}:full");
    run(&mut source.conn(), &["RL.TOKEN", &full, "1", "1", "1h", "AT", &T.to_string()]).unwrap();
    let waiter = blocked(source, &["RL.TOKEN", &full, "1", "1", "1h", "WAIT", "30s"]);
    wait_secs("the waiter to block", 10, || waiting(source) == 1);

    // Traffic on the slot's keys through a cluster client, during the migration.
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(AtomicU64::new(0));
    let client =
        redis::cluster::ClusterClient::new(vec![format!("redis://{}", source.addr())]).unwrap();
    let traffic = {
        let (stop, admitted) = (Arc::clone(&stop), Arc::clone(&admitted));
        let mut c = client.get_connection().unwrap();
        let key = format!("{tag}:traffic");
        let (a, b) = (format!("{tag}:all-a"), format!("{tag}:all-b"));
        std::thread::spawn(move || {
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                // One RL.PERIOD and one RL.ALL on two keys per round, each admitted or not as
                // a whole.
                let reply: redis::RedisResult<Vec<i64>> =
                    redis::cmd("RL.PERIOD").arg(&key).arg(&["1000000", "1d"]).query(&mut c);
                let all: redis::RedisResult<Value> = redis::cmd("RL.ALL")
                    .arg(&["2", &a, &b, "PERIOD", "1000000", "1d", "PERIOD", "1000000", "1d"])
                    .query(&mut c);
                match (reply, all) {
                    (Ok(r), Ok(Value::Array(all)))
                        if r.first() == Some(&1) && all.first() == Some(&Value::Int(1)) =>
                    {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    (r, all) => errors.push(format!("{r:?} {all:?}")),
                }
            }
            errors
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    migrate_slot(source, slot, target);
    assert_eq!(finished(source), "success", "{:?}", migrations(source));
    wait_secs("the source to drop the slot's keys", 20, || count_in_slot(source, slot) == 0);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let errors = traffic.join().expect("traffic thread");
    assert!(errors.is_empty(), "{} traffic errors, first: {:?}", errors.len(), errors.first());

    // The module heard the migration (the server event): the source's log says so.
    let log = source.log();
    let completed =
        format!("ratelimit: atomic slot migration export completed: slots {slot}-{slot}");
    assert!(log.contains(&completed), "{log}");
    assert!(target.log().contains("ratelimit: atomic slot migration import completed"));

    // The waiter: the redirect its client would get, to the new owner.
    let e = waiter.join().unwrap().expect_err("the waiter's slot moved");
    assert_eq!(e.code(), Some("MOVED"), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{}", target.port)), "{e}");
    assert_eq!(waiting(source), 0);
    // Granted nowhere: the bucket it waited on is still empty on the target.
    let dry = ["RL.TOKEN", &full, "1", "1", "1h", "DRYRUN"];
    let reply = run(&mut target.conn(), &dry).unwrap();
    assert!(matches!(&reply, Value::Array(v) if v.first() == Some(&Value::Int(0))), "{reply:?}");

    // Every form, on the target and its replica, exactly as it was.
    assert_eq!(snapshots(target, &keys), before);
    wait_in_sync(target, &target_replica);
    let mut rc = target_replica.conn();
    let _: () = redis::cmd("READONLY").query(&mut rc).unwrap();
    for (key, snap) in &before {
        assert_eq!(&snapshot(&mut rc, key), snap, "{key} on the target's replica");
    }
    // Calls during the migration counted once: the bucket is down by exactly the admissions.
    let mut c = client.get_connection().unwrap();
    let info: Vec<i64> = redis::cmd("RL.PERIOD")
        .arg(format!("{tag}:traffic"))
        .arg(&["1000000", "1d", "DRYRUN"])
        .query(&mut c)
        .unwrap();
    let n = admitted.load(Ordering::Relaxed) as i64;
    assert!(n > 0, "no traffic ran");
    // `remaining` after a dry run of cost 1 is what is left minus one.
    assert_eq!(info[2], 1_000_000 - n - 1, "{n} admitted calls, {info:?}");
    for key in [format!("{tag}:all-a"), format!("{tag}:all-b")] {
        let info: Vec<i64> = redis::cmd("RL.PERIOD")
            .arg(&key)
            .arg(&["1000000", "1d", "DRYRUN"])
            .query(&mut c)
            .unwrap();
        assert_eq!(info[2], 1_000_000 - n - 1, "RL.ALL on {key}: {n} admitted calls, {info:?}");
    }

    // The source keeps nothing of the slot: keys, inline entries, its replica's keys.
    assert_eq!(count_in_slot(source, slot), 0);
    assert!(inline_entries(target) > 0, "some forms are inline");
    wait_secs("the source's inline entries released", 10, || inline_entries(source) == 0);
    wait_in_sync(source, &source_replica);
    assert_eq!(count_in_slot(&source_replica, slot), 0);
    for n in nodes.iter().chain([&target_replica, &source_replica]) {
        n.assert_alive();
    }
}

/// Sets Valkey's debug switch that keeps an export streaming (never pausing for the
/// hand-over), so a test can act while a migration runs.
fn prevent_pause(source: &Server, on: bool) {
    let flag = if on { "1" } else { "0" };
    let _: () = redis::cmd("DEBUG")
        .arg(&["SLOTMIGRATION", "PREVENT-PAUSE", flag])
        .query(&mut source.conn())
        .unwrap();
}

/// Waits until the target has the snapshot (its import job waits for the pause).
fn streaming(target: &Server) {
    wait_secs("the target to receive the snapshot", 30, || {
        migrations(target)
            .first()
            .is_some_and(|(op, state)| op == "IMPORT" && state == "waiting-for-paused")
    });
}

fn is_admitted(reply: &redis::RedisResult<Value>) -> bool {
    matches!(reply, Ok(Value::Array(v)) if v.first() == Some(&Value::Int(1)))
}

/// A cancelled migration (`CLUSTER CANCELSLOTMIGRATIONS` on the source) leaves the source
/// intact (every form, calls made while it streamed) and the target and its replica clean
/// (no key of the slot, no inline table entry); a waiter held while the slot was exported is
/// judged again on the source and admitted there. Retried, the migration moves everything,
/// and a key that expired while it streamed is not brought back.
#[test]
fn a_cancelled_migration_leaves_the_source_intact_and_the_target_clean() {
    if !has_atomic_slot_migration(
        "a_cancelled_migration_leaves_the_source_intact_and_the_target_clean",
    ) {
        return;
    }
    let nodes = masters(3);
    let (source, target) = (&nodes[0], &nodes[1]);
    let target_replica = cluster_replica(target);
    let tag = tag_in(source, "cancel", 0..=5000);
    let slot = key_slot(source, &tag);
    let keys = make_forms(source, &tag);
    let short = format!("{tag}:short");
    run(&mut source.conn(), &["RL.TOKEN", &short, "1", "1", "1500ms"]).unwrap();
    let before = snapshots(source, &keys);
    // Alone (no replica, no backlog), the source propagates calls verbatim…
    let verbatim =
        |s: &Server| info_field(&mut s.conn(), "ratelimit", "ratelimit_propagation_verbatim");
    let counter = format!("{tag}:counter");
    wait_secs("verbatim propagation", 10, || {
        run(&mut source.conn(), &["RL.PERIOD", &counter, "100", "1d", "DRYRUN"]).unwrap();
        verbatim(source) == "1"
    });

    prevent_pause(source, true);
    migrate_slot(source, slot, target);
    streaming(target);
    assert!(inline_entries(target) > 0, "the snapshot arrived (hidden, importing)");
    let dbsize: i64 = redis::cmd("DBSIZE").query(&mut target.conn()).unwrap();
    assert_eq!(dbsize, 0, "importing keys are hidden from DBSIZE");

    // Calls while the slot streams are served by the source — also through a policy the
    // target does not have (`RL.HIT` propagates the state it left, never itself).
    for _ in 0..5 {
        let r = run(&mut source.conn(), &["RL.PERIOD", &counter, "100", "1d"]);
        assert!(is_admitted(&r), "{r:?}");
    }
    let set = ["RL.POLICY", "SET", "api", "TOKEN", "10", "1", "1m"];
    assert_eq!(run(&mut source.conn(), &set).unwrap(), Value::Okay);
    let hit = format!("{tag}:hit");
    for at in ["", "AT"] {
        let mut args = vec!["RL.HIT", "api", hit.as_str()];
        let t = T.to_string();
        if !at.is_empty() {
            args.extend([at, t.as_str()]);
        }
        let r = run(&mut source.conn(), &args);
        assert!(is_admitted(&r), "{r:?}");
    }
    // A waiter on a key of the exported slot is held: its bucket refills after 1 s, but no
    // timer admits it while the export runs.
    let full = format!("{tag}:full");
    run(&mut source.conn(), &["RL.TOKEN", &full, "1", "1", "1s"]).unwrap();
    let waiter = blocked(source, &["RL.TOKEN", &full, "1", "1", "1s", "WAIT", "30s"]);
    wait_secs("the waiter to block", 10, || waiting(source) == 1);
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(waiting(source), 1, "held while its slot is exported");
    // …but never while a slot is exported: the target replays what is propagated (a call
    // more than a second after the snapshot's fork would otherwise have put the flag back up).
    let elsewhere = format!("{}:x", tag_in(source, "other", 5001..=5400));
    run(&mut source.conn(), &["RL.PERIOD", &elsewhere, "100", "1d"]).unwrap();
    assert_eq!(verbatim(source), "0");
    assert_eq!(run(&mut source.conn(), &["EXISTS", &short]).unwrap(), Value::Int(0));

    let _: () =
        redis::cmd("CLUSTER").arg("CANCELSLOTMIGRATIONS").query(&mut source.conn()).unwrap();
    assert_eq!(finished(source), "cancelled");
    // The waiter is judged again, here, and admitted (its bucket has refilled).
    let reply = waiter.join().unwrap();
    assert!(is_admitted(&reply), "{reply:?}");
    // The target (and its replica) drop the half-imported slot.
    wait_secs("the target to clean up", 30, || inline_entries(target) == 0);
    assert_eq!(count_in_slot(target, slot), 0);
    wait_in_sync(target, &target_replica);
    assert_eq!(count_in_slot(&target_replica, slot), 0);
    assert_eq!(inline_entries(&target_replica), 0);
    // The source still owns the slot and every form as it was.
    assert_eq!(snapshots(source, &keys), before);
    let hit_before = snapshot(&mut source.conn(), &hit);
    let r = run(&mut source.conn(), &["RL.PERIOD", &counter, "100", "1d", "DRYRUN"]).unwrap();
    assert!(matches!(&r, Value::Array(v) if v.get(2) == Some(&Value::Int(100 - 5 - 1))), "{r:?}");

    // Retried without the debug switch: everything moves, the expired key stays gone.
    prevent_pause(source, false);
    migrate_slot(source, slot, target);
    assert_eq!(finished(source), "success", "{:?}", migrations(source));
    assert_eq!(snapshots(target, &keys), before);
    let mut tc = target.conn();
    assert_eq!(snapshot(&mut tc, &hit), hit_before, "a policy's key moves without the policy");
    assert_eq!(run(&mut tc, &["EXISTS", &short]).unwrap(), Value::Int(0));
    let r = run(&mut tc, &["RL.PERIOD", &counter, "100", "1d", "DRYRUN"]).unwrap();
    assert!(matches!(&r, Value::Array(v) if v.get(2) == Some(&Value::Int(100 - 5 - 1))), "{r:?}");
    for n in nodes.iter().chain([&target_replica]) {
        n.assert_alive();
    }
}

/// The target killed midway (SIGKILL while the slot streams): the source's job fails, the
/// source keeps serving every key of the slot unchanged, and a held waiter is judged again
/// there; the source's replica never loses a key.
#[test]
fn a_target_killed_midway_leaves_the_source_serving() {
    if !has_atomic_slot_migration("a_target_killed_midway_leaves_the_source_serving") {
        return;
    }
    let mut nodes = masters(3);
    let source_replica = cluster_replica(&nodes[0]);
    let (source, target) = (&nodes[0], &nodes[1]);
    let tag = tag_in(source, "kill", 0..=5000);
    let slot = key_slot(source, &tag);
    let keys = make_forms(source, &tag);
    let before = snapshots(source, &keys);
    let full = format!("{tag}:full");
    run(&mut source.conn(), &["RL.TOKEN", &full, "1", "1", "1s"]).unwrap();

    prevent_pause(source, true);
    migrate_slot(source, slot, target);
    streaming(target);
    let waiter = blocked(source, &["RL.TOKEN", &full, "1", "1", "1s", "WAIT", "30s"]);
    wait_secs("the waiter to block", 10, || waiting(source) == 1);
    nodes[1].kill();
    let source = &nodes[0];
    assert_eq!(finished(source), "failed", "{:?}", migrations(source));
    let reply = waiter.join().unwrap();
    assert!(is_admitted(&reply), "judged again on the source: {reply:?}");
    assert_eq!(snapshots(source, &keys), before);
    let r = run(&mut source.conn(), &["RL.TOKEN", &format!("{tag}:token"), "10", "3", "7s"]);
    assert!(r.is_ok(), "the source still serves the slot: {r:?}");
    wait_in_sync(source, &source_replica);
    let mut rc = source_replica.conn();
    let _: () = redis::cmd("READONLY").query(&mut rc).unwrap();
    for (key, snap) in &before[1..] {
        assert_eq!(&snapshot(&mut rc, key), snap, "{key} on the source's replica");
    }
    source.assert_alive();
}
