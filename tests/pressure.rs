//! Memory pressure (`docs/operations.md`, "Memory pressure"): under `maxmemory` with
//! `noeviction` every limiting call gets Redis' `OOM` and nothing is written — no state, no
//! expiry, no propagation — while reads, refunds and releases (which only give back) still
//! work; with an eviction policy a limiter key is evicted like any other key and an evicted
//! limiter is a reset one (its next call is judged as on a fresh limiter); `volatile-*` policies
//! pick limiters first (every limiter key has a TTL); waiters on an evicted key are judged again
//! at once, and an evicted lease key forgets its leases.

mod common;
use common::*;

use std::time::Duration;

const AT: &str = "4000000000000";

fn config_set(c: &mut Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(c).expect("CONFIG SET");
}

fn used_memory(c: &mut Connection) -> i64 {
    info_field(c, "memory", "used_memory").parse().expect("used_memory")
}

fn dirty(c: &mut Connection) -> i64 {
    info_field(c, "persistence", "rdb_changes_since_last_save").parse().expect("dirty counter")
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).expect("EXISTS") == 1
}

/// Sets `maxmemory` just above what is used now under `policy`, then writes ballast strings
/// (4 KB, no TTL) until Redis refuses one with `OOM` (nothing left it may evict) or has
/// evicted `evictions` keys. Returns how many ballast strings were written. Under `noeviction`
/// the limit goes below what is used, so every `deny-oom` command is refused.
fn squeeze(c: &mut Connection, policy: &str, evictions: i64) -> usize {
    config_set(c, "maxmemory-policy", policy);
    if policy == "noeviction" {
        // Nothing can be evicted: any limit below what is used keeps memory over it, without
        // the drift of client buffers that a limit just above it would see.
        config_set(c, "maxmemory", "1");
        return 0;
    }
    let limit = used_memory(c) + 64 * 1024;
    config_set(c, "maxmemory", &limit.to_string());
    for i in 0..100_000 {
        let evicted: i64 = info_field(c, "stats", "evicted_keys").parse().expect("evicted_keys");
        if evictions > 0 && evicted >= evictions {
            return i;
        }
        let r = redis::cmd("SET").arg(format!("ballast:{i}")).arg(vec![b'x'; 4096]).query::<()>(c);
        match r {
            Ok(()) => {}
            Err(e) if e.code() == Some("OOM") => return i,
            Err(e) => panic!("SET ballast: {e}"),
        }
    }
    panic!("memory never ran out");
}

/// Every limiting call, on existing keys of each kind and on new keys, is refused with `OOM`;
/// nothing changes (state, expiry, digest, dirty counter); reads, `RL.REFUND`, `RL.RELEASE`
/// and `DEL` still work; once memory is available again the limiters go on from where they
/// were.
#[test]
fn noeviction_refuses_every_limiting_call_and_writes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let setup: [&[&str]; 8] = [
        &["RL.TOKEN", "token", "10", "1", "1s", "AT", AT],
        &["RL.PERIOD", "period", "10", "1m", "AT", AT],
        &["RL.SLIDE", "slide", "10", "1m", "AT", AT],
        &["RL.SLIDE", "slide", "10", "1m", "AT", "4000000000005"],
        &["RL.LEAKY", "leaky", "10", "1", "1s", "AT", AT],
        &["CL.THROTTLE", "gcra", "9", "1", "60", "AT", AT],
        &["RL.SLIDE", "banned", "1", "1m", "BAN", "1h", "AT", AT],
        &["RL.SLIDE", "banned", "1", "1m", "BAN", "1h", "AT", AT],
    ];
    for args in setup {
        ints(&mut c, args);
    }
    let leased: Vec<Value> = redis::cmd("RL.ACQUIRE")
        .arg(&["lease", "5", "1h", "ID", "worker-1", "AT", AT])
        .query(&mut c)
        .expect("RL.ACQUIRE");
    assert_eq!(leased.len(), 6);
    let keys = ["token", "period", "slide", "leaky", "gcra", "banned", "lease"];
    let before: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    let digest_before: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).expect("DIGEST");

    squeeze(&mut c, "noeviction", 0);
    let dirty_before = dirty(&mut c);
    let refused: [&[&str]; 14] = [
        &["RL.TOKEN", "token", "10", "1", "1s", "AT", AT],
        &["RL.TOKEN", "new", "10", "1", "1s"],
        &["RL.PERIOD", "period", "10", "1m", "AT", AT],
        &["RL.SLIDE", "slide", "10", "1m", "AT", "4000000000009"],
        &["RL.SLIDE", "new", "10", "1m", "BUCKETS", "10"],
        &["RL.LEAKY", "leaky", "10", "1", "1s", "AT", AT],
        &["CL.THROTTLE", "gcra", "9", "1", "60", "AT", AT],
        &["RL.SLIDE", "banned", "1", "1m", "BAN", "1h", "AT", AT],
        &["RL.ALL", "2", "token", "period", "TOKEN", "10", "1", "1s", "PERIOD", "10", "1m"],
        &["RL.ACQUIRE", "lease", "5", "1h", "AT", AT],
        &["RL.ACQUIRE", "lease", "5", "1h", "ID", "worker-1", "AT", AT],
        &["RL.TOKEN", "token", "10", "1", "1s", "WAIT", "1s"],
        &["RL.TOKEN", "token", "10", "1", "1s", "DRYRUN"],
        &["RL.RESTORE", "copy", "anything"],
    ];
    for args in refused {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let e = error_text(&mut c, &bytes);
        assert!(e.starts_with("OOM"), "{args:?}: {e}");
    }
    assert_eq!(dirty(&mut c), dirty_before, "a refused call wrote something");
    let digest_after: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).expect("DIGEST");
    let after: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    assert_eq!(after, before);
    assert!(!exists(&mut c, "new") && !exists(&mut c, "copy"));
    assert_eq!(digest_after, digest_before, "the dataset changed");

    // Reads and give-backs work under pressure.
    squeeze(&mut c, "noeviction", 0);
    assert_eq!(ints(&mut c, &["RL.PEEK", "token"])[..2], [1, 10]);
    assert_eq!(stored_state(&mut c, "period"), before[1].0);
    let refunded: Vec<i64> =
        redis::cmd("RL.REFUND").arg(&["token", "1", "AT", AT]).query(&mut c).expect("RL.REFUND");
    assert_eq!(refunded[2], 9, "a refund is allowed under OOM (it only gives back)");
    let released: i64 = redis::cmd("RL.RELEASE")
        .arg(&["lease", "worker-1", "AT", AT])
        .query(&mut c)
        .expect("RL.RELEASE");
    assert_eq!(released, 1);
    assert!(!exists(&mut c, "lease"), "the last lease released deletes the key");
    let deleted: i64 = redis::cmd("DEL").arg("period").query(&mut c).expect("DEL");
    assert_eq!(deleted, 1);

    // With memory again, the limiters go on from their stored state.
    config_set(&mut c, "maxmemory", "0");
    assert_eq!(
        ints(&mut c, &["RL.SLIDE", "slide", "10", "1m", "AT", "4000000000009"]),
        [1, 10, 7, 0, 60000]
    );
    assert_eq!(ints(&mut c, &["RL.SLIDE", "banned", "1", "1m", "AT", AT])[..3], [0, 1, 0]);
    s.assert_alive();
}

/// Creates `n` exhausted token buckets `lim:<i>` (capacity 1, one token per day): each refuses
/// its next call until evicted.
fn exhausted_limiters(c: &mut Connection, n: usize) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("RL.TOKEN").arg(format!("lim:{i}")).arg(&["1", "1", "1d"]);
    }
    let _: Vec<Value> = pipe.query(c).expect("pipeline");
}

/// The limiter keys that are gone, and a check that every gone one is judged as fresh while
/// every remaining one still refuses.
fn evicted_limiters_are_reset(c: &mut Connection, n: usize) -> usize {
    let mut gone = 0;
    for i in 0..n {
        let key = format!("lim:{i}");
        let present = exists(c, &key);
        let reply = ints(c, &["RL.TOKEN", &key, "1", "1", "1d"]);
        if present {
            assert_eq!(reply[0], 0, "{key} survived and still refuses");
        } else {
            gone += 1;
            assert_eq!(reply[..3], [1, 1, 0], "{key} was evicted: its next call is a fresh one");
        }
    }
    gone
}

/// `allkeys-lru`: limiters are evicted like any key, and an evicted limiter is a reset one.
#[test]
fn allkeys_eviction_resets_the_limiters_it_evicts() {
    let s = Server::start();
    let mut c = s.conn();
    exhausted_limiters(&mut c, 2000);
    // The least recently used keys are the limiters, untouched since they were made.
    squeeze(&mut c, "allkeys-lru", 500);
    config_set(&mut c, "maxmemory", "0");
    let gone = evicted_limiters_are_reset(&mut c, 2000);
    assert!(gone > 0, "allkeys-lru evicted no limiter");
    s.assert_alive();
}

/// `volatile-lru` with other data that has no TTL: the limiters (every one has a TTL) are the
/// only candidates, so they go first and the other data stays; `noeviction` evicts nothing.
#[test]
fn volatile_policies_evict_limiters_before_data_without_a_ttl() {
    for policy in ["volatile-lru", "volatile-ttl"] {
        let s = Server::start();
        let mut c = s.conn();
        exhausted_limiters(&mut c, 2000);
        let written = squeeze(&mut c, policy, 0);
        assert!(written > 0, "{policy}: no data could be written");
        config_set(&mut c, "maxmemory", "0");
        let evicted: i64 = info_field(&mut c, "stats", "evicted_keys").parse().expect("evicted");
        assert!(evicted > 0, "{policy}: nothing evicted");
        for i in 0..written {
            let key = format!("ballast:{i}");
            assert!(exists(&mut c, &key), "{policy}: {key}, without a TTL, was evicted");
        }
        let gone = evicted_limiters_are_reset(&mut c, 2000);
        assert_eq!(gone as i64, evicted, "{policy}: only limiters were evicted");
        s.assert_alive();
    }
    let s = Server::start();
    let mut c = s.conn();
    exhausted_limiters(&mut c, 200);
    squeeze(&mut c, "noeviction", 0);
    let e = error_text(&mut c, &[b"SET", b"data", b"x"]);
    assert!(e.starts_with("OOM"), "{e}");
    config_set(&mut c, "maxmemory", "0");
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), "0");
    assert_eq!(evicted_limiters_are_reset(&mut c, 200), 0);
}

/// A client waiting (`WAIT`) on a key that is evicted is judged again at once: the key is now a
/// fresh limiter, so it is admitted long before the instant it was told to wait for (a day).
/// A lease key that is evicted forgets its leases: a new holder is admitted beyond the limit
/// the old ones counted on, and the old holder's release finds nothing.
#[test]
fn eviction_wakes_waiters_and_forgets_leases() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ints(&mut c, &["RL.TOKEN", "q", "1", "1", "1d"])[0], 1);
    let leased: Vec<Value> =
        redis::cmd("RL.ACQUIRE").arg(&["jobs", "1", "1d", "ID", "old"]).query(&mut c).expect("acq");
    assert_eq!(leased.first(), Some(&Value::Int(1)));
    // Another client waits on the exhausted bucket (next token in a day; timeout 30 s).
    let addr = s.addr();
    let waiter = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}")).expect("client");
        let mut w = client.get_connection().expect("connection");
        let started = std::time::Instant::now();
        let reply: Vec<i64> = redis::cmd("RL.TOKEN")
            .arg(&["q", "1", "1", "1d", "WAIT", "30s"])
            .query(&mut w)
            .expect("RL.TOKEN WAIT");
        (reply, started.elapsed())
    });
    wait_for("the waiter to block", || info_field(&mut c, "ratelimit", "ratelimit_waiting") == "1");
    // volatile-ttl with only the two limiter keys volatile: both are evicted.
    squeeze(&mut c, "volatile-ttl", 2);
    let (reply, waited) = waiter.join().expect("waiter thread");
    assert_eq!(reply[..3], [1, 1, 0], "the waiter was admitted on the reset limiter");
    assert!(waited < Duration::from_secs(30), "admitted by the eviction, not by a timeout");
    config_set(&mut c, "maxmemory", "0");
    assert!(!exists(&mut c, "jobs"), "the lease key was evicted");
    let second: Vec<Value> =
        redis::cmd("RL.ACQUIRE").arg(&["jobs", "1", "1d", "ID", "new"]).query(&mut c).expect("acq");
    assert_eq!(second.first(), Some(&Value::Int(1)), "the evicted lease no longer counts");
    let released: i64 =
        redis::cmd("RL.RELEASE").arg(&["jobs", "old"]).query(&mut c).expect("RL.RELEASE");
    assert_eq!(released, 0, "the old holder's lease went with the key");
    s.assert_alive();
}
