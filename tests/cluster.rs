//! Redis Cluster: a 3-master cluster on loopback, every command driven through a
//! cluster-aware client over thousands of keys spread across slots; slots resharded to another
//! master mid-traffic (keys move with MIGRATE, i.e. DUMP/RESTORE of our type); then replicas
//! added and a master failed over. Every limiter's state and expiry must survive each step.

mod common;
use common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: usize = 3000;
const AT: &str = "4000000000000";

fn redis_cli(args: &[&str]) -> String {
    let cli = cli_bin();
    let out = Command::new(&cli).args(args).output().unwrap_or_else(|e| panic!("run {cli}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cli} {args:?} failed:\n{text}");
    text
}

/// Polls `ok` until it holds or `secs` pass; tells which.
fn wait_until(secs: u64, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

fn wait_for(what: &str, secs: u64, ok: impl FnMut() -> bool) {
    assert!(wait_until(secs, ok), "timed out waiting for {what}");
}

/// Whether `observer` sees node `id` as a replica of `master_id` (CLUSTER NODES fields:
/// id, address, flags, master id, ...).
fn sees_replica_of(observer: &Server, id: &str, master_id: &str) -> bool {
    let nodes: String =
        redis::cmd("CLUSTER").arg("NODES").query(&mut observer.conn()).unwrap_or_default();
    nodes.lines().any(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        fields.len() > 3
            && fields[0] == id
            && fields[2].split(',').any(|f| f == "slave")
            && fields[3] == master_id
    })
}

/// A manual `CLUSTER FAILOVER` on `replica`. The masters vote only for a node they already
/// know as a replica of the failing master, so first wait until every node's view of the
/// cluster says so. Redis aborts a manual failover that has not won its election within 5 s
/// (and a master votes once per 2 × node-timeout for one shard), so retry a few times.
fn fail_over(replica: &Server, master_id: &str, all: &[&Server]) {
    let id = node_id(replica);
    for n in all {
        wait_for("every node to know the replica", 30, || sees_replica_of(n, &id, master_id));
    }
    let mut rc = replica.conn();
    for attempt in 1..=5 {
        // The last attempt skips the handshake with the master (nothing writes meanwhile).
        let mode: &[&str] = if attempt == 5 { &["FAILOVER", "FORCE"] } else { &["FAILOVER"] };
        let _: () = redis::cmd("CLUSTER").arg(mode).query(&mut rc).unwrap();
        if wait_until(15, || info_field(&mut rc, "replication", "role") == "master") {
            return;
        }
        eprintln!("cluster: manual failover attempt {attempt} did not complete, retrying");
    }
    let log = replica.log();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    panic!("no failover after 5 attempts; replica log, newest first:\n{}", tail.join("\n"));
}

fn node_id(s: &Server) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(&mut s.conn()).unwrap()
}

fn cluster_ok(nodes: &[&Server]) {
    for n in nodes {
        let mut c = n.conn();
        wait_for("cluster_state:ok", 30, || info_of(&mut c).contains("cluster_state:ok"));
    }
}

fn info_of(c: &mut Connection) -> String {
    redis::cmd("CLUSTER").arg("INFO").query(c).unwrap_or_default()
}

/// The key for limiter `i` and the command that creates / updates it.
fn command_for(i: usize, extra_cost: &str) -> Vec<String> {
    let key = format!("user:{i}");
    let args: Vec<&str> = match i % 6 {
        5 => vec!["RL.SLIDE", &key, "10", "1m", "COST", extra_cost],
        0 => vec!["RL.TOKEN", &key, "10", "3", "7s", "COST", extra_cost],
        1 => vec!["RL.PERIOD", &key, "10", "1d", "ALIGN", "8h", "COST", extra_cost],
        2 => vec!["RL.LEAKY", &key, "10", "3", "7s", "COST", extra_cost],
        3 => vec!["CL.THROTTLE", &key, "9", "3", "10", extra_cost],
        _ => vec!["RL.TOKEN", &key, "5", "1", "1m", "STEP", "COST", extra_cost],
    };
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend(["AT".to_string(), AT.to_string()]);
    args
}

fn call(c: &mut ClusterConnection, args: &[String]) -> Vec<i64> {
    let mut command = redis::cmd(&args[0]);
    for a in &args[1..] {
        command.arg(a);
    }
    command.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

type State = (Value, i64);

/// `RL.INFO` (without the now-dependent `ttl_ms` and the fields after it) and `PEXPIRETIME` of
/// every key.
fn states(c: &mut ClusterConnection) -> BTreeMap<String, State> {
    (0..KEYS)
        .map(|i| {
            let key = format!("user:{i}");
            let info: Value = redis::cmd("RL.INFO").arg(&key).query(c).unwrap();
            let info = match info {
                Value::Array(items) => {
                    let ttl = Value::BulkString(b"ttl_ms".to_vec());
                    let end = items.iter().position(|v| *v == ttl).unwrap_or(items.len());
                    Value::Array(items[..end].to_vec())
                }
                other => panic!("{key}: {other:?}"),
            };
            let expiry: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(c).unwrap();
            (key, (info, expiry))
        })
        .collect()
}

/// Compares two snapshots: states must be identical and each expiry may move only within
/// `drift_ms`. Redis' MIGRATE carries a TTL as relative ms, so a moved key's expiry lands
/// later by its time in transit: never earlier, and never by more than the reshard took. The
/// limiter's own reset instant comes from its state, which must not change at all.
fn assert_same(
    before: &BTreeMap<String, State>,
    after: &BTreeMap<String, State>,
    drift_ms: std::ops::RangeInclusive<i64>,
    step: &str,
) {
    let mut diffs = Vec::new();
    for (key, (info, expiry)) in before {
        match after.get(key) {
            Some((i, e)) if i == info && drift_ms.contains(&(e - expiry)) => {}
            other => diffs.push(format!("{key}: {info:?} {expiry} → {other:?}")),
        }
    }
    assert!(
        diffs.is_empty(),
        "{step}: {} keys differ, e.g. {:?}",
        diffs.len(),
        &diffs[..diffs.len().min(3)]
    );
}

/// A 3-master cluster without replicas, slots spread evenly; the nodes and their addresses.
fn three_masters() -> (Vec<Server>, Vec<String>) {
    let masters: Vec<Server> = (0..3).map(|_| cluster_node()).collect();
    let addrs: Vec<String> = masters.iter().map(Server::addr).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(addrs.iter().map(String::as_str));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    redis_cli(&create);
    cluster_ok(&masters.iter().collect::<Vec<_>>());
    (masters, addrs)
}

/// `RL.ALL` is routed by its keys (getkeys-api): keys in one slot (hash tags) run on the node
/// that owns it and get `MOVED` elsewhere; keys in different slots get `CROSSSLOT` on every
/// node. A cluster client runs hash-tagged sets.
#[test]
fn all_is_routed_by_its_keys() {
    let (masters, addrs) = three_masters();
    let tagged = ["RL.ALL", "2", "{user42}:s", "{user42}:d", "TOKEN", "10", "10", "1s"];
    let tagged: Vec<&str> = tagged.into_iter().chain(["PERIOD", "1000", "1d", "AT", AT]).collect();
    let (mut ran, mut moved) = (0, 0);
    for m in &masters {
        match run(&mut m.conn(), &tagged) {
            Ok(Value::Array(items)) => {
                assert_eq!(items.first(), Some(&Value::Int(1)));
                ran += 1;
            }
            Err(e) if e.code() == Some("MOVED") => moved += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((ran, moved), (1, 2));
    let spread = ["RL.ALL", "2", "a", "b", "TOKEN", "1", "1", "1", "TOKEN", "1", "1", "1"];
    for m in &masters {
        let e = run(&mut m.conn(), &spread).expect_err("keys in two slots");
        assert_eq!(e.code(), Some("CROSSSLOT"), "{e}");
    }
    let client = ClusterClient::new(vec![format!("redis://{}", addrs[0])]).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..50 {
        let (a, b) = (format!("{{t{i}}}:per-second"), format!("{{t{i}}}:per-day"));
        let reply: Value = redis::cmd("RL.ALL")
            .arg(&["2", &a, &b, "TOKEN", "5", "5", "1s", "PERIOD", "100", "1d", "AT", AT])
            .query(&mut c)
            .expect("a hash-tagged RL.ALL through the cluster client");
        assert!(matches!(reply, Value::Array(ref items) if items.len() == 7), "{reply:?}");
        let info: Value = redis::cmd("RL.INFO").arg(&b).query(&mut c).unwrap();
        assert_ne!(info, Value::Nil, "{b} was updated");
    }
}

#[test]
fn limiters_survive_resharding_and_failover() {
    let started = Instant::now();
    let (masters, addrs) = three_masters();

    let client = ClusterClient::new(vec![format!("redis://{}", addrs[0])]).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..KEYS {
        call(&mut c, &command_for(i, "2"));
    }
    // Keys are spread over every master.
    for m in &masters {
        let n: usize = redis::cmd("DBSIZE").query(&mut m.conn()).unwrap();
        assert!(n > KEYS / 5, "a master holds only {n} keys");
    }
    let before = states(&mut c);

    // Reshard 1000 slots from master 0 to master 1 while other keys take traffic.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic_calls = Arc::new(AtomicUsize::new(0));
    let traffic = {
        let (stop, calls) = (Arc::clone(&stop), Arc::clone(&traffic_calls));
        let client = client.clone();
        std::thread::spawn(move || {
            let mut c = client.get_connection().unwrap();
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("traffic:{}", i % 500);
                let _: Vec<i64> = redis::cmd("RL.TOKEN")
                    .arg(&key)
                    .arg(&["100", "1", "1s", "AT", AT])
                    .query(&mut c)
                    .expect("traffic during resharding");
                calls.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        })
    };
    let (from, to) = (node_id(&masters[0]), node_id(&masters[1]));
    let reshard_started = Instant::now();
    redis_cli(&[
        "--cluster",
        "reshard",
        &addrs[0],
        "--cluster-from",
        &from,
        "--cluster-to",
        &to,
        "--cluster-slots",
        "1000",
        "--cluster-yes",
        "--cluster-pipeline",
        "100",
    ]);
    let reshard_ms = i64::try_from(reshard_started.elapsed().as_millis()).unwrap();
    stop.store(true, Ordering::Relaxed);
    traffic.join().expect("traffic thread");
    let moved_to: usize = redis::cmd("DBSIZE").query(&mut masters[1].conn()).unwrap();
    let mut c = client.get_connection().unwrap();
    let after_reshard = states(&mut c);
    assert_same(&before, &after_reshard, 0..=reshard_ms, "resharding");

    // Add a replica to every master, then fail master 1 over to its replica.
    let replicas: Vec<Server> = (0..3).map(|_| cluster_node()).collect();
    for (replica, master) in replicas.iter().zip(&masters) {
        let id = node_id(master);
        redis_cli(&[
            "--cluster",
            "add-node",
            &replica.addr(),
            &master.addr(),
            "--cluster-slave",
            "--cluster-master-id",
            &id,
        ]);
    }
    let all: Vec<&Server> = masters.iter().chain(&replicas).collect();
    cluster_ok(&all);
    let promoted = &replicas[1];
    let mut pc = promoted.conn();
    wait_for("replica in sync", 30, || {
        info_field(&mut pc, "replication", "master_link_status") == "up"
            && info_field(&mut pc, "replication", "master_sync_in_progress") == "0"
    });
    fail_over(promoted, &node_id(&masters[1]), &all);
    cluster_ok(&all);
    let client = ClusterClient::new(vec![format!("redis://{}", promoted.addr())]).unwrap();
    let mut c = client.get_connection().unwrap();
    let mut after = states(&mut c);
    // The cluster client may still route a few reads to the old master until it refreshes.
    for _ in 0..20 {
        if after == after_reshard {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        c = client.get_connection().unwrap();
        after = states(&mut c);
    }
    // Replication carries absolute expiries: exact equality across the failover.
    assert_same(&after_reshard, &after, 0..=0, "failover");
    // Limiters keep working on the new master from where they were.
    let reply = call(&mut c, &command_for(1, "0"));
    assert_eq!(reply[..3], [1, 10, 8]);
    for n in &all {
        n.assert_alive();
    }
    eprintln!(
        "cluster: {KEYS} limiters, 1000 slots ({moved_to} keys on the target after) resharded under {} traffic calls, failover; {:?}",
        traffic_calls.load(Ordering::Relaxed),
        started.elapsed()
    );
}

/// The first of `key0, key1, …` this node owns (the others answer `MOVED` before the command
/// runs), and the reply it gave for `RL.HIT policy key`.
fn hit_on_owned_key(node: &Server, policy: &str) -> (String, redis::RedisResult<Value>) {
    for i in 0..1000 {
        let key = format!("key{i}");
        let reply = run(&mut node.conn(), &["RL.HIT", policy, &key, "AT", AT]);
        match &reply {
            Err(e) if e.code() == Some("MOVED") => continue,
            _ => return (key, reply),
        }
    }
    panic!("no key of key0…key999 is owned by {}", node.addr());
}

/// Policies are node state, as Redis Functions are: `RL.POLICY SET` on one master defines the
/// policy there only — a key owned by another master gets the unknown-policy error on its
/// node (never a silent allow), and `RL.POLICY LIST` there is empty; once every primary has
/// it (what the client packages' `setPolicy`/`set_policy` do on a cluster client), every key
/// is judged.
#[test]
fn policies_are_per_node() {
    let (masters, _addrs) = three_masters();
    let set = ["RL.POLICY", "SET", "api", "TOKEN", "2", "1", "1s"];
    assert_eq!(run(&mut masters[0].conn(), &set).unwrap(), Value::Okay);
    let (_, on_first) = hit_on_owned_key(&masters[0], "api");
    assert!(
        matches!(on_first, Ok(Value::Array(ref a)) if a.first() == Some(&Value::Int(1))),
        "{on_first:?}"
    );
    for m in &masters[1..] {
        let (key, reply) = hit_on_owned_key(m, "api");
        let e = reply.expect_err("the policy is not defined on this node");
        assert!(e.to_string().contains("api"), "the error names the policy: {e}");
        assert_eq!(run(&mut m.conn(), &["EXISTS", &key]).unwrap(), Value::Int(0));
        assert_eq!(run(&mut m.conn(), &["RL.POLICY", "LIST"]).unwrap(), Value::Array(vec![]));
    }
    for m in &masters[1..] {
        assert_eq!(run(&mut m.conn(), &set).unwrap(), Value::Okay);
    }
    for m in &masters {
        let (_, reply) = hit_on_owned_key(m, "api");
        assert!(matches!(reply, Ok(Value::Array(ref a)) if a.len() == 5), "{reply:?}");
    }
}
