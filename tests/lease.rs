//! `RL.ACQUIRE` / `RL.RELEASE` against a real server: leases that lapse by themselves,
//! renewal by `ID`, generated ids, errors, persistence, replication (identical ids, a promoted
//! replica continues the sequence) and waiting for a lease.

mod common;
use common::*;
use std::time::{Duration, Instant};

const T: i64 = 4_000_000_000_000;

/// The six-element reply: five integers and the id (None for nil).
fn acquire(con: &mut Connection, args: &[&str]) -> (Vec<i64>, Option<String>) {
    let mut words = vec!["RL.ACQUIRE"];
    words.extend_from_slice(args);
    let reply = run(con, &words).unwrap_or_else(|e| panic!("{words:?}: {e}"));
    let Value::Array(items) = reply else { panic!("not an array: {reply:?}") };
    assert_eq!(items.len(), 6, "{items:?}");
    let ints = items[..5].iter().map(|v| redis::from_redis_value(v).unwrap()).collect();
    let id = match &items[5] {
        Value::Nil => None,
        v => Some(redis::from_redis_value(v).unwrap()),
    };
    (ints, id)
}

fn release(con: &mut Connection, key: &str, id: &str, at: i64) -> i64 {
    redis::cmd("RL.RELEASE").arg(key).arg(id).arg("AT").arg(at).query(con).unwrap()
}

#[test]
fn leases_are_taken_renewed_released_and_lapse() {
    let s = Server::start();
    let mut c = s.conn();
    let at = |dt: i64| (T + dt).to_string();
    // Two exports at most, each lease 30 s.
    let (reply, id1) = acquire(&mut c, &["ex", "2", "30s", "AT", &at(0)]);
    assert_eq!((reply, id1.as_deref()), (vec![1, 2, 1, 0, 30_000], Some(&*format!("{T}-1"))));
    let (reply, id2) = acquire(&mut c, &["ex", "2", "30s", "AT", &at(10)]);
    assert_eq!((reply, id2.clone()), (vec![1, 2, 0, 0, 30_000], Some(format!("{T}-2"))));
    // Full: refused until the earliest lease lapses, no id.
    let (reply, id) = acquire(&mut c, &["ex", "2", "30s", "AT", &at(20)]);
    assert_eq!((reply, id), (vec![0, 2, 0, 29_980, 29_990], None));
    // A heartbeat renews a held lease, whatever the count.
    let (reply, id) =
        acquire(&mut c, &["ex", "2", "30s", "ID", &format!("{T}-1"), "AT", &at(25_000)]);
    assert_eq!((reply[0], id), (1, Some(format!("{T}-1"))));
    assert_eq!(pexpiretime(&mut c, "ex"), T + 55_000);
    let state = stored_state(&mut c, "ex");
    for field in [("algorithm", "lease"), ("limit", "2"), ("lease_ms", "30000"), ("held", "2")] {
        assert!(state.contains(&(field.0.into(), field.1.into())), "{field:?} in {state:?}");
    }
    // The second lease lapses at T + 30 010: then a new one is admitted.
    assert_eq!(acquire(&mut c, &["ex", "2", "30s", "AT", &at(30_009)]).0[0], 0);
    let (reply, id3) = acquire(&mut c, &["ex", "2", "30s", "AT", &at(30_010)]);
    assert_eq!((reply[0], id3), (1, Some(format!("{T}-3"))));
    // Releases: 1 while held, 0 otherwise; the last one deletes the key.
    assert_eq!(release(&mut c, "ex", &id2.unwrap(), T + 30_011), 0, "already lapsed");
    assert_eq!(release(&mut c, "ex", &format!("{T}-1"), T + 30_012), 1);
    assert_eq!(release(&mut c, "ex", &format!("{T}-1"), T + 30_013), 0);
    assert_eq!(release(&mut c, "ex", &format!("{T}-3"), T + 30_014), 1);
    let exists: i64 = redis::cmd("EXISTS").arg("ex").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    // Any binary id of 1 … 64 bytes.
    let id = b"\xff\x00worker";
    let reply: Value =
        cmd(&[b"RL.ACQUIRE", b"bin", b"1", b"1m", b"ID", id, b"AT", at(0).as_bytes()])
            .query(&mut c)
            .unwrap();
    let Value::Array(items) = reply else { panic!() };
    assert_eq!(items[5], Value::BulkString(id.to_vec()));
}

#[test]
fn a_crashed_holders_lease_lapses_on_time() {
    let s = Server::start();
    let mut c = s.conn();
    let started = Instant::now();
    assert_eq!(acquire(&mut c, &["job", "1", "300"]).0[0], 1);
    assert_eq!(acquire(&mut c, &["job", "1", "300"]).0[0], 0, "held by the 'crashed' worker");
    std::thread::sleep(Duration::from_millis(350));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(acquire(&mut c, &["job", "1", "300"]).0[0], 1, "the lease lapsed by itself");
}

#[test]
fn lease_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN tok 5 1 1s AT {T}"));
    acquire(&mut c, &["ls", "2", "1m", "AT", &T.to_string()]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.lease-max")
        .arg("100")
        .query(&mut c)
        .unwrap();
    let long_id = vec![b'x'; 65];
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (vec![b"RL.ACQUIRE", b"k", b"0", b"1m"], "ERR limit must be an integer between 1 and 100"),
        (vec![b"RL.ACQUIRE", b"k", b"101", b"1m"], "ERR limit"),
        (vec![b"RL.ACQUIRE", b"k", b"1", b"0"], "ERR lease must be a duration between 1ms"),
        (vec![b"RL.ACQUIRE", b"k", b"1", b"3651d"], "ERR lease must be a duration"),
        (vec![b"RL.ACQUIRE", b"k", b"1", b"1m", b"ID", b""], "ERR ID must be 1 to 64 bytes"),
        (vec![b"RL.ACQUIRE", b"k", b"1", b"1m", b"ID", &long_id], "ERR ID must be 1 to 64 bytes"),
        (vec![b"RL.ACQUIRE", b"k", b"1", b"1m", b"WAIT", b"-1"], "ERR WAIT"),
        (
            vec![b"RL.ACQUIRE", b"k", b"1", b"1m", b"WAIT", b"1s", b"AT", b"5"],
            "ERR syntax error: WAIT cannot be combined with AT or DRYRUN",
        ),
        (vec![b"RL.ACQUIRE", b"k", b"\xff", b"1m"], "ERR limit must be an integer"),
        (
            vec![b"RL.ACQUIRE", b"tok", b"1", b"1m"],
            "WRONGTYPE key holds a token limiter, not a lease limiter",
        ),
        (
            vec![b"RL.RELEASE", b"tok", b"x"],
            "WRONGTYPE key holds a token limiter, not a lease limiter",
        ),
        (
            vec![b"RL.TOKEN", b"ls", b"1", b"1", b"1s"],
            "WRONGTYPE key holds a lease limiter, not a token limiter",
        ),
        (
            vec![b"RL.REFUND", b"ls", b"1"],
            "WRONGTYPE key holds a lease limiter, which RL.REFUND cannot refund",
        ),
        (vec![b"RL.RELEASE", b"ls", b""], "ERR ID must be 1 to 64 bytes"),
        (vec![b"RL.RELEASE", b"ls"], "ERR wrong number of arguments"),
    ];
    let before = (stored_state(&mut c, "ls"), stored_state(&mut c, "tok"));
    for (args, expected) in &cases {
        let text = error_text(&mut c, args);
        assert!(text.starts_with(expected), "{args:?}: {text}");
    }
    assert_eq!((stored_state(&mut c, "ls"), stored_state(&mut c, "tok")), before);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut c).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn leases_survive_reload_dump_restore_and_aof_rewrite() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut c = s.conn();
    for (dt, id) in [(0, None), (5, Some("w\u{e9}rker")), (9, None)] {
        let at = (T + dt).to_string();
        let mut args = vec!["pool", "5", "1h", "AT", &at];
        if let Some(id) = id {
            args.extend(["ID", id]);
        }
        acquire(&mut c, &args);
    }
    let before = snapshot(&mut c, "pool");
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(snapshot(&mut c, "pool"), before, "DEBUG RELOAD");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("pool").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE").arg("copy").arg(0).arg(&dump).query(&mut c).unwrap();
    assert_eq!(stored_state(&mut c, "copy"), before.0, "DUMP/RESTORE");
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut c, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(&mut c, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "AOF rewrite");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(snapshot(&mut c, "pool"), before, "AOF rewrite and restart");
    // The sequence goes on where it was.
    let (_, id) = acquire(&mut c, &["pool", "5", "1h", "AT", &(T + 20).to_string()]);
    assert_eq!(id, Some(format!("{T}-3")));
}

/// Generated ids propagate explicitly: the replica holds the same leases, and once promoted
/// it continues the sequence instead of issuing an id again.
#[test]
fn replicas_hold_the_same_ids_and_continue_the_sequence() {
    let (master, replica) = master_and_replica();
    let mut rc = replica.conn();
    let mut mc = master.conn();
    let mut ids = Vec::new();
    for i in 0..20 {
        let (reply, id) = acquire(&mut mc, &["pool", "30", "10m"]);
        assert_eq!(reply[0], 1);
        ids.push(id.unwrap());
        if i % 3 == 2 {
            let id = ids.remove(0);
            let released: i64 =
                redis::cmd("RL.RELEASE").arg("pool").arg(&id).query(&mut mc).unwrap();
            assert_eq!(released, 1);
        }
    }
    wait_in_sync(&master, &replica);
    assert_eq!(stored_state(&mut mc, "pool"), stored_state(&mut rc, "pool"));
    assert_eq!(pexpiretime(&mut mc, "pool"), pexpiretime(&mut rc, "pool"));
    // Promote the replica: its next id is the master's next one, never one already issued.
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut rc).unwrap();
    let (reply, id) = acquire(&mut rc, &["pool", "30", "10m"]);
    assert_eq!(reply[0], 1);
    let id = id.unwrap();
    let n: u64 = id.rsplit('-').next().unwrap().parse().unwrap();
    assert_eq!(n, 21, "ids 1 … 20 were issued by the master (6 released since)");
    master.assert_alive();
    replica.assert_alive();
}

#[test]
fn a_release_wakes_a_waiting_acquire() {
    let s = Server::start();
    let mut c = s.conn();
    let (_, id) = acquire(&mut c, &["slot", "1", "1h"]);
    let mut waiter = s.conn();
    let bytes: Vec<&[u8]> = vec![b"RL.ACQUIRE", b"slot", b"1", b"1h", b"WAIT", b"1m"];
    waiter.send_packed_command(&cmd(&bytes).get_packed_command()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut c, "ratelimit", "ratelimit_waiting") != "1" {
        assert!(Instant::now() < deadline, "the acquire never queued");
        std::thread::sleep(Duration::from_millis(2));
    }
    let start = Instant::now();
    let released: i64 =
        redis::cmd("RL.RELEASE").arg("slot").arg(id.unwrap()).query(&mut c).unwrap();
    assert_eq!(released, 1);
    let reply: Value = waiter.recv_response().unwrap();
    let Value::Array(items) = reply else { panic!("{reply:?}") };
    assert_eq!(items[0], Value::Int(1));
    assert!(matches!(items[5], Value::BulkString(_)), "an id: {items:?}");
    assert!(start.elapsed() < Duration::from_secs(50), "the lease would lapse only after an hour");
}
