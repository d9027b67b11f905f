//! Master + replica: admitted calls propagate rewritten with `AT <ms used>`, so the replica
//! reaches the identical state and expiry whatever its clock says.

mod common;
use common::*;

/// Freezes the master's key set (with active expiry off only our reads delete, and replicate
/// `DEL`; a replica never expires keys itself), waits for the replica and asserts both
/// datasets have the same `DEBUG DIGEST`. Returns a connection to the replica.
fn same_dataset(master: &Server, replica: &Server) -> Connection {
    let mut mc = master.conn();
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg("0").query(&mut mc).unwrap();
    wait_in_sync(master, replica);
    let mut rc = replica.conn();
    let md: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut mc).unwrap();
    let rd: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut rc).unwrap();
    assert_eq!(md, rd);
    rc
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// The key's `RL.INFO` and `PEXPIRETIME` are equal on master and replica. The periods here
/// are milliseconds long, so a key may expire between the two reads: then the replica's
/// `RL.INFO` is nil (a limiter past its reset instant counts as missing) and its key is either
/// hidden (Redis) or still there with the master's expiry (Valkey keeps it until the master's
/// `DEL`), and that expiry lies before the end of the reads; or the replica's `RL.INFO` still
/// equals the master's and the key expired before its `PEXPIRETIME` (-2). Anything else is a
/// divergence.
fn same_on_replica(mc: &mut Connection, rc: &mut Connection, key: &str) {
    let (m, m_expiry) = (stored_state(mc, key), pexpiretime(mc, key));
    let (r, r_expiry) = (stored_state(rc, key), pexpiretime(rc, key));
    let read_done = now_ms();
    if (&m, m_expiry) == (&r, r_expiry) {
        return;
    }
    let expired_between = m_expiry <= read_done
        && ((r.is_empty() && (r_expiry == -2 || r_expiry == m_expiry))
            || (r == m && r_expiry == -2));
    assert!(expired_between, "{key}: master {m:?} {m_expiry}, replica {r:?} {r_expiry}");
}

#[test]
fn replica_state_equals_master_without_at() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let keys: Vec<String> = (0..20).map(|i| format!("user:{i}")).collect();
    let mut admitted = 0;
    for i in 0..2000usize {
        let key = &keys[(i * 7) % keys.len()];
        let capacity = ["5", "10", "3"][i % 3];
        let cost = ["1", "2", "0", "4"][i % 4];
        // Each key keeps one algorithm: key index mod 4.
        let mut args = match (i * 7) % keys.len() % 5 {
            0 => vec!["RL.TOKEN", key.as_str(), capacity, "3", "7", "COST", cost],
            1 => vec!["RL.PERIOD", key.as_str(), capacity, "50", "COST", cost],
            2 => vec!["RL.LEAKY", key.as_str(), capacity, "3", "7", "COST", cost],
            3 => vec!["RL.SLIDE", key.as_str(), capacity, "40", "COST", cost],
            _ => vec!["CL.THROTTLE", key.as_str(), capacity, "30", "1", cost],
        };
        if i % 3 == 0 && args[0] == "RL.SLIDE" {
            args.extend(["BUCKETS", "4"]);
        }
        if i % 5 == 0 && args[0] == "RL.TOKEN" {
            args.push("STEP");
        }
        if i % 5 == 0 && args[0] == "RL.PERIOD" {
            args.push("ALIGN");
        }
        if i % 5 == 0 && args[0] == "RL.LEAKY" {
            args.push("NODELAY");
        }
        if i % 11 == 0 {
            args.push("DRYRUN");
        }
        let reply = ints(&mut mc, &args);
        admitted += if args[0] == "CL.THROTTLE" { 1 - reply[0] } else { reply[0] };
        if i % 13 == 0 {
            let _ = run(&mut mc, &["RL.PEEK", key]);
        }
    }
    assert!(admitted > 250, "{admitted}");
    let mut rc = same_dataset(&master, &replica);
    for key in &keys {
        same_on_replica(&mut mc, &mut rc, key);
    }
    // Peeks run on the replica (read-only command).
    let peek: redis::RedisResult<Value> = redis::cmd("RL.PEEK").arg(&keys[0]).query(&mut rc);
    assert!(peek.is_ok(), "{peek:?}");
    // Limiting commands are writes: refused on a read-only replica.
    assert!(run(&mut rc, &["RL.TOKEN", "x", "1", "1", "1"]).is_err());
    master.assert_alive();
    replica.assert_alive();
}

/// The module handles I/O errors, so a replica may load the full sync diskless (straight from
/// the socket); the server would otherwise skip diskless load and write the payload to a file
/// in its directory first (renamed to `dump.rdb` once loaded).
#[test]
fn full_sync_carries_existing_limiters() {
    let master = Server::start();
    let mut mc = master.conn();
    for i in 0..50 {
        ints(&mut mc, &["RL.TOKEN", &format!("k{i}"), "10", "1", "1s", "COST", "3"]);
    }
    let replica = replica_of(&master, &["--repl-diskless-load", "swapdb"]);
    let mut rc = replica.conn();
    wait_in_sync(&master, &replica);
    let rdb_files: Vec<_> = std::fs::read_dir(&replica.dir)
        .expect("replica dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.ends_with(".rdb"))
        .collect();
    assert!(
        rdb_files.is_empty(),
        "loaded from disk, not diskless: {rdb_files:?}\n{}",
        replica.log()
    );
    for i in 0..50 {
        let key = format!("k{i}");
        assert_eq!(stored_state(&mut mc, &key), stored_state(&mut rc, &key));
        assert_eq!(pexpiretime(&mut mc, &key), pexpiretime(&mut rc, &key));
    }
    master.assert_alive();
    replica.assert_alive();
}

#[test]
fn transactions_and_scripts_replicate_exactly() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    for round in 0..30 {
        let key = format!("tx:{}", round % 4);
        let _: Value = redis::pipe()
            .atomic()
            .cmd("RL.TOKEN")
            .arg(&key)
            .arg(10)
            .arg(3)
            .arg("7s")
            .arg("COST")
            .arg(2)
            .cmd("RL.LEAKY")
            .arg(format!("{key}:q"))
            .arg(10)
            .arg(3)
            .arg("7s")
            .cmd("RL.TOKEN")
            .arg(&key)
            .arg(10)
            .arg(3)
            .arg("7s")
            .arg("DRYRUN")
            .query(&mut mc)
            .unwrap();
        let _: Value = redis::cmd("EVAL")
            .arg(
                "redis.call('RL.TOKEN', KEYS[1], 10, 3, '7s'); \
                 redis.call('CL.THROTTLE', KEYS[2], 5, 3, 10); \
                 return redis.call('RL.PERIOD', KEYS[3], 4, '50s')",
            )
            .arg(3)
            .arg(&key)
            .arg(format!("{key}:cell"))
            .arg(format!("{key}:window"))
            .query(&mut mc)
            .unwrap();
    }
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut mc).unwrap();
    assert!(keys.len() >= 12, "{keys:?}");
    for key in &keys {
        assert_eq!(stored_state(&mut mc, key), stored_state(&mut rc, key), "{key}");
        assert_eq!(pexpiretime(&mut mc, key), pexpiretime(&mut rc, key), "{key}");
    }
    let md: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut mc).unwrap();
    let rd: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut rc).unwrap();
    assert_eq!(md, rd);
    master.assert_alive();
    replica.assert_alive();
}

/// `RL.ALL` propagates once, rewritten with `AT`, only when every limit admitted,
/// `RL.REFUND` only when it gave something back, and a `BAN` refusal when it started a ban:
/// after random multi-key traffic, bans and refunds without `AT` (refusals, dry runs, zero costs, mixed algorithms), the replica holds the
/// identical keys, states and expiries.
#[test]
fn all_ban_and_refund_replicate_exactly_without_at() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let groups = [
        "TOKEN 5 3 7 COST 2",
        "PERIOD 4 60 COST 1",
        "SLIDE 6 45 COST 2",
        "SLIDE 9 40 BUCKETS 4 COST 3",
        "LEAKY 8 3 7 NODELAY COST 2",
        "TOKEN 7 1 30 STEP COST 0",
    ];
    let (mut admitted, mut banned) = (0, 0);
    for i in 0..1500usize {
        let n = 2 + i % 3;
        let keys: Vec<String> = (0..n).map(|j| format!("{{u{}}}:{}", i % 7, (i + j) % 6)).collect();
        // Each key name keeps one algorithm: its suffix picks the group.
        let limits: Vec<&str> = (0..n).map(|j| groups[(i + j) % 6]).collect();
        let mut command = format!("RL.ALL {n} {} {}", keys.join(" "), limits.join(" "));
        if i % 17 == 0 {
            command.push_str(" DRYRUN");
        }
        let words: Vec<&str> = command.split_whitespace().collect();
        let reply = run(&mut mc, &words).unwrap_or_else(|e| panic!("{command}: {e}"));
        if let Value::Array(items) = reply {
            admitted += i64::from(items.first() == Some(&Value::Int(1)));
        }
        // Time passes (limiters refill) whatever the machine's speed.
        if i % 5 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The first key's single command with BAN: refusals start bans, which propagate.
        if i % 3 == 0 {
            let (kind, rest) = limits[0].split_once(' ').unwrap();
            let single = format!("RL.{kind} {} {rest} BAN 25", keys[0]);
            let words: Vec<&str> = single.split_whitespace().collect();
            let reply = ints(&mut mc, &words);
            // A refusal that waits at least the ban: a ban started or in force.
            banned += i64::from(reply[0] == 0 && reply[2] == 0 && reply[3] >= 25);
        }
        // Refunds (some emptying a limiter, which deletes its key) propagate with AT too.
        if i % 4 == 0 {
            let count = (1 + i % 5).to_string();
            let _: Value = run(&mut mc, &["RL.REFUND", &keys[i % n], &count]).unwrap();
        }
    }
    assert!(admitted > 100, "{admitted}");
    assert!(banned > 10, "{banned}");
    let mut rc = same_dataset(&master, &replica);
    let keys: i64 = redis::cmd("DBSIZE").query(&mut mc).unwrap();
    assert!(keys > 0, "nothing left to compare");
    for u in 0..7 {
        for s in 0..6 {
            same_on_replica(&mut mc, &mut rc, &format!("{{u{u}}}:{s}"));
        }
    }
    master.assert_alive();
    replica.assert_alive();
}
