//! Persistence round trips: every path that serialises a limiter must give back the identical
//! state (`RL.INFO`), absolute expiry (`PEXPIRETIME`) and value digest (`DEBUG DIGEST-VALUE`).

mod common;
use common::*;

const T0: i64 = 4_000_000_000_000;

/// Keys of every algorithm and mode, in states with fractions and offsets.
fn populate(c: &mut Connection) -> Vec<String> {
    let calls = [
        "RL.TOKEN smooth 10 3 7 COST 4 AT {0}",
        "RL.TOKEN smooth 10 3 7 COST 2 AT {5}",
        "RL.TOKEN step 5 2 1s STEP COST 3 AT {0}",
        "RL.TOKEN step 5 2 1s STEP COST 1 AT {1500}",
        "RL.TOKEN big 1000000000000 1000000000000 1 COST 999999999999 AT {0}",
        "RL.TOKEN slow 1 1 3650d AT {0}",
        "RL.PERIOD window 10 1m COST 3 AT {0}",
        "RL.PERIOD aligned 10 1d ALIGN -5h COST 3 AT {0}",
        "RL.LEAKY queue 10 3 7 COST 4 AT {0}",
        "RL.LEAKY meter 10 3 7 NODELAY COST 4 AT {1}",
        "RL.LEAKY delayed 10 3 7 DELAY 2 COST 4 AT {1}",
        "CL.THROTTLE cell 15 30 60 3 AT {0}",
        "CL.THROTTLE thirds 5 3 1 2 AT {1}",
        "RL.SLIDE log 10 1m COST 2 AT {0}",
        "RL.SLIDE log 10 1m COST 1 AT {7}",
        "RL.SLIDE log 10 1m COST 3 AT {300}",
        "RL.SLIDE log 10 1m COST 1 AT {999}",
        "RL.SLIDE buckets 10 1m BUCKETS 6 COST 2 AT {0}",
        "RL.SLIDE buckets 10 1m BUCKETS 6 COST 1 AT {7}",
        "RL.SLIDE buckets 10 1m BUCKETS 6 COST 3 AT {300}",
        "RL.SLIDE buckets 10 1m BUCKETS 6 COST 1 AT {999}",
        // ANCHOR and FLOOR (format version 3): the grid origin is part of the state.
        "RL.SLIDE anchored 10 1m BUCKETS 6 ANCHOR COST 2 AT {3}",
        "RL.SLIDE anchored 10 1m BUCKETS 6 ANCHOR COST 1 AT {700}",
        "RL.SLIDE floored 10 1m BUCKETS 1 ANCHOR FLOOR COST 4 AT {5}",
        "RL.SLIDE floored 10 1m BUCKETS 1 ANCHOR FLOOR COST 3 AT {900}",
        "RL.SLIDE floor-only 10 1m BUCKETS 3 FLOOR COST 4 AT {5}",
        // Under a ban (format version 4).
        "RL.SLIDE anchored-lock 2 1m BUCKETS 2 ANCHOR FLOOR AT {0}",
        "RL.SLIDE anchored-lock 2 1m BUCKETS 2 ANCHOR FLOOR AT {1}",
        "RL.SLIDE anchored-lock 2 1m BUCKETS 2 ANCHOR FLOOR BAN 1h AT {2}",
        // A lock-out in force (format version 2), and one whose limiter was refunded away
        // during the ban.
        "RL.SLIDE login 2 15m AT {0}",
        "RL.SLIDE login 2 15m AT {1}",
        "RL.SLIDE login 2 15m BAN 1h AT {2}",
        "RL.TOKEN locked 2 1 1s COST 2 AT {0}",
        "RL.TOKEN locked 2 1 1s BAN 1h AT {1}",
        "RL.REFUND locked 5 AT {2}",
    ];
    let mut keys: Vec<String> = Vec::new();
    for call in calls {
        // `{dt}` is an instant dt ms after T0.
        let (head, dt) = call.split_once('{').unwrap();
        let dt: i64 = dt.trim_end_matches('}').parse().unwrap();
        line(c, &format!("{head}{}", T0 + dt));
        let key = call.split_whitespace().nth(1).unwrap().to_string();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

type Snapshot = Vec<(Vec<(String, String)>, i64, String)>;

fn snapshots(c: &mut Connection, keys: &[String]) -> Snapshot {
    keys.iter().map(|k| snapshot(c, k)).collect()
}

fn assert_same_after(s: &mut Server, action: impl FnOnce(&mut Server)) {
    let mut c = s.conn();
    let keys = populate(&mut c);
    let before = snapshots(&mut c, &keys);
    assert!(before.iter().all(|(state, exp, _)| !state.is_empty() && *exp > T0));
    drop(c);
    action(s);
    let mut c = s.conn();
    assert_eq!(snapshots(&mut c, &keys), before);
    // And the limiters still work from where they were.
    assert_eq!(
        ints(&mut c, &["RL.TOKEN", "smooth", "10", "3", "7", "COST", "0", "AT", &T0.to_string()]),
        [1, 10, 6, 0, 9] // now' = T0+5 (updated_ms): 6 tokens + 1/7; 27/7 missing → 9 ms
    );
    s.assert_alive();
}

#[test]
fn debug_reload() {
    let mut s = Server::start();
    assert_same_after(&mut s, |s| {
        let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut s.conn()).unwrap();
    });
}

#[test]
fn save_and_restart_from_rdb() {
    let mut s = Server::start();
    assert_same_after(&mut s, |s| {
        let _: () = redis::cmd("SAVE").query(&mut s.conn()).unwrap();
        s.restart();
    });
}

#[test]
fn aof_always_and_restart() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    assert_same_after(&mut s, |s| s.restart());
}

#[test]
fn aof_rewrite_without_rdb_preamble_and_restart() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    assert_same_after(&mut s, |s| {
        let mut c = s.conn();
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while info_field(&mut c, "persistence", "aof_rewrite_in_progress") != "0"
            || info_field(&mut c, "persistence", "aof_rewrite_scheduled") != "0"
        {
            assert!(std::time::Instant::now() < deadline, "rewrite did not finish");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(info_field(&mut c, "persistence", "aof_last_bgrewrite_status"), "ok");
        // The base file holds the rebuilding commands, not an RDB preamble.
        let base = std::fs::read_dir(s.path("appendonlydir"))
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().contains(".base.aof"))
            .expect("base AOF file");
        let text = std::fs::read(base.path()).unwrap();
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains("rl.restore") && text.contains("PEXPIREAT"), "{text}");
        drop(c);
        s.restart();
    });
}

#[test]
fn dump_restore_copy_rename() {
    let s = Server::start();
    let mut c = s.conn();
    let keys = populate(&mut c);
    for key in &keys {
        let before = snapshot(&mut c, key);
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        let restored = format!("{key}:restored");
        let _: () = redis::cmd("RESTORE")
            .arg(&restored)
            .arg(before.1)
            .arg(&dump)
            .arg("ABSTTL")
            .query(&mut c)
            .unwrap();
        assert_eq!(snapshot(&mut c, &restored), before);

        let copy = format!("{key}:copy");
        let copied: i64 = redis::cmd("COPY").arg(key).arg(&copy).query(&mut c).unwrap();
        assert_eq!(copied, 1);
        assert_eq!(snapshot(&mut c, &copy), before);

        let renamed = format!("{key}:renamed");
        let _: () = redis::cmd("RENAME").arg(key).arg(&renamed).query(&mut c).unwrap();
        assert_eq!(snapshot(&mut c, &renamed), before);
        // The copy owns its value: deleting it leaves the original intact.
        let _: i64 = redis::cmd("DEL").arg(&copy).query(&mut c).unwrap();
        assert_eq!(snapshot(&mut c, &renamed), before);
    }
    s.assert_alive();
}

#[test]
fn corrupt_payloads_are_refused_without_crashing() {
    let s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("smooth").query(&mut c).unwrap();
    let mut refused = 0;
    let mut payloads: Vec<Vec<u8>> = (0..dump.len()).map(|n| dump[..n].to_vec()).collect();
    for bit in 0..dump.len() * 8 {
        let mut flipped = dump.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        payloads.push(flipped);
    }
    payloads.push(b"garbage".to_vec());
    for p in &payloads {
        let r: redis::RedisResult<()> =
            redis::cmd("RESTORE").arg("victim").arg(0).arg(p).arg("REPLACE").query(&mut c);
        if r.is_err() {
            refused += 1;
        }
    }
    // DUMP has a CRC: almost every change is refused by Redis itself or by our decoder.
    assert!(refused >= payloads.len() - 2, "{refused}/{}", payloads.len());
    // RL.RESTORE has no CRC: our validation is all that stands between bad bytes and state.
    for n in 0..80usize {
        let payload: Vec<u8> = [1u8, 1].into_iter().chain(std::iter::repeat_n(0xffu8, n)).collect();
        let r: redis::RedisResult<Value> =
            cmd(&[b"RL.RESTORE", b"victim2", &payload]).query(&mut c);
        assert!(r.is_err(), "{payload:?}");
    }
    let exists: i64 = redis::cmd("EXISTS").arg("victim2").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    s.assert_alive();
}

/// This build writes RDB encoding version 1 (the one every release loads; the payload carries
/// its own version), and values written by older builds still load: a `DUMP` of a limiter
/// without a ban or sliding window options, re-labelled as RDB encoding version 2 (0.1.0's) or
/// 3 (0.2.0's) — the module id's low 10 bits — with a valid checksum, restores to the
/// identical limiter; an unknown newer version is refused. (`tests/upgrade.rs` runs 0.1.0
/// itself.)
#[test]
fn older_encoding_versions_still_load() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN old 10 3 7 COST 4 AT {T0}"));
    let dump: Vec<u8> = redis::cmd("DUMP").arg("old").query(&mut c).unwrap();
    // RDB type (module, 7), then the 64-bit module id as 0x81 + 8 bytes big-endian.
    assert_eq!(dump[..2], [7, 0x81]);
    let id = u64::from_be_bytes(dump[2..10].try_into().unwrap());
    assert_eq!(id & 1023, 1, "this build writes encoding version 1");
    let body_len = dump.len() - 10;
    let relabelled = |version: u64| {
        let mut payload = dump[..body_len].to_vec();
        payload[2..10].copy_from_slice(&((id & !1023) | version).to_be_bytes());
        payload.extend_from_slice(&dump[body_len..body_len + 2]);
        payload.extend_from_slice(&crc64(&payload).to_le_bytes());
        payload
    };
    for version in [2, 3] {
        let key = format!("restored{version}");
        let _: () =
            redis::cmd("RESTORE").arg(&key).arg(0).arg(relabelled(version)).query(&mut c).unwrap();
        assert_eq!(stored_state(&mut c, &key), stored_state(&mut c, "old"));
    }
    let r: redis::RedisResult<()> =
        redis::cmd("RESTORE").arg("newer").arg(0).arg(relabelled(4)).query(&mut c);
    assert!(r.is_err());
}
