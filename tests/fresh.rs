//! `FRESH` against a real server: a request judged against a fresh limiter, exactly as on a
//! missing key — replacing the state of every algorithm and mode, clearing a ban, deleting
//! the key at `COST 0`, changing nothing when refused or dry, `WRONGTYPE` for other
//! algorithms and types, errors with `WAIT`/`RL.ALL`/`CL.THROTTLE`, waiters woken, and
//! replicas and the AOF reaching the identical state.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

fn exists(con: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

fn dump(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(con).unwrap()
}

/// The calls of every algorithm and mode that take `FRESH` (arguments after the key): some
/// traffic on `key`, then the `FRESH` call, whose arguments are `fresh` without `FRESH`.
const CASES: [(&str, &str, &str); 8] = [
    ("RL.TOKEN", "10 1 1m COST 7", "10 2 1m COST 3"),
    ("RL.TOKEN", "10 1 1m STEP COST 7", "10 1 1m STEP COST 4"),
    ("RL.PERIOD", "5 1h COST 4", "5 10m COST 2"),
    ("RL.PERIOD", "5 1d ALIGN 8h COST 4", "6 1d ALIGN 8h COST 1"),
    ("RL.SLIDE", "5 1m COST 4", "5 1m COST 2"),
    ("RL.SLIDE", "50 1m BUCKETS 10 COST 30", "50 2m BUCKETS 4 COST 20"),
    ("RL.LEAKY", "10 1 1m COST 6", "10 1 1m COST 2"),
    ("RL.LEAKY", "10 1 1m NODELAY COST 6", "10 1 1m DELAY 3 COST 9"),
];

fn words(command: &str, key: &str, args: &str, extra: &[String]) -> Vec<String> {
    let mut out = vec![command.to_string(), key.to_string()];
    out.extend(args.split_whitespace().map(str::to_string));
    out.extend(extra.iter().cloned());
    out
}

fn call(con: &mut Connection, words: &[String]) -> Vec<i64> {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    ints(con, &refs)
}

#[test]
fn fresh_is_the_same_call_on_a_missing_key_for_every_algorithm() {
    let s = Server::start();
    let mut c = s.conn();
    for (i, (command, traffic, fresh)) in CASES.iter().enumerate() {
        let (key, twin) = (format!("k{i}"), format!("twin{i}"));
        for k in 0..3 {
            call(&mut c, &words(command, &key, traffic, &["AT".into(), (T + 100 * k).to_string()]));
        }
        // Judged at the call's own instant, even before the stored `updated_ms`.
        for at in [T + 1000, T + 50] {
            let at = at.to_string();
            let mut probe = words(command, &key, fresh, &["FRESH".into(), "AT".into(), at.clone()]);
            probe.push("DRYRUN".into());
            let on_missing =
                call(&mut c, &words(command, &twin, fresh, &["AT".into(), at.clone()]));
            assert_eq!(call(&mut c, &probe), on_missing, "{command} {fresh} dry");
            let before = changes(&mut c);
            let with_fresh = words(command, &key, fresh, &["FRESH".into(), "AT".into(), at]);
            assert_eq!(call(&mut c, &with_fresh), on_missing, "{command} {fresh}");
            assert_eq!(changes(&mut c), before + 1);
            // The key now holds exactly what the same call leaves on a missing key.
            let (a, b) = (snapshot(&mut c, &key), snapshot(&mut c, &twin));
            assert!(!a.0.is_empty(), "{command} {fresh}");
            assert_eq!(a, b, "{command} {fresh}");
            let _: i64 = redis::cmd("DEL").arg(&twin).query(&mut c).unwrap();
        }
    }
    s.assert_alive();
}

#[test]
fn fresh_clears_a_ban() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..4 {
        line(&mut c, &format!("RL.SLIDE login 3 15m BAN 1h AT {}", T + i));
    }
    assert_eq!(
        line(&mut c, &format!("RL.SLIDE login 3 15m AT {}", T + 10)),
        [0, 3, 0, 3_599_993, 3_599_993]
    );
    let state = stored_state(&mut c, "login");
    assert!(state.iter().any(|(k, _)| k == "banned_until_ms"), "{state:?}");
    assert_eq!(
        line(&mut c, &format!("RL.SLIDE login 3 15m FRESH AT {}", T + 20)),
        [1, 3, 2, 0, 900_000]
    );
    let state = stored_state(&mut c, "login");
    assert!(!state.iter().any(|(k, _)| k == "banned_until_ms"), "{state:?}");
    assert_eq!(pexpiretime(&mut c, "login"), T + 20 + 900_000);
    assert_eq!(line(&mut c, &format!("RL.SLIDE login 3 15m AT {}", T + 30)), [1, 3, 1, 0, 900_000]);
}

#[test]
fn cost_zero_deletes_a_live_key_and_leaves_a_missing_one() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 10 1 1s COST 4 AT {T}"));
    let before = changes(&mut c);
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN k 10 1 1s COST 0 FRESH AT {}", T + 10)),
        [1, 10, 10, 0, 0]
    );
    assert!(!exists(&mut c, "k"));
    assert_eq!(changes(&mut c), before + 1);
    // A missing key stays missing: nothing changes, nothing propagates.
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN k 10 1 1s COST 0 FRESH AT {}", T + 20)),
        [1, 10, 10, 0, 0]
    );
    assert!(!exists(&mut c, "k"));
    assert_eq!(changes(&mut c), before + 1);
    // So does one past its reset instant (it counts as missing).
    line(&mut c, &format!("RL.PERIOD p 5 100 AT {T}"));
    let before = changes(&mut c);
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD p 5 100 COST 0 FRESH AT {}", T + 100)),
        [1, 5, 5, 0, 0]
    );
    assert_eq!(changes(&mut c), before);
}

#[test]
fn refused_and_dry_runs_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.LEAKY k 10 1 1s COST 6 BAN 1h AT {T}"));
    line(&mut c, &format!("RL.LEAKY k 10 1 1s COST 6 BAN 1h AT {T}"));
    let (image, expiry, before) = (dump(&mut c, "k"), pexpiretime(&mut c, "k"), changes(&mut c));
    assert!(stored_state(&mut c, "k").iter().any(|(k, _)| k == "banned_until_ms"));
    // Only a cost above the limit is refused by a fresh limiter: retry -1, no ban.
    assert_eq!(
        line(&mut c, &format!("RL.LEAKY k 10 1 1s COST 11 BAN 1h FRESH AT {}", T + 5)),
        [0, 10, 10, -1, 0]
    );
    assert_eq!(
        line(&mut c, &format!("RL.LEAKY k 10 1 1s COST 10 FRESH DRYRUN AT {}", T + 5)),
        [1, 10, 0, 0, 10_000]
    );
    assert_eq!(
        line(&mut c, &format!("RL.LEAKY k 10 1 1s COST 0 FRESH DRYRUN AT {}", T + 5)),
        [1, 10, 10, 0, 0]
    );
    assert_eq!(
        (dump(&mut c, "k"), pexpiretime(&mut c, "k"), changes(&mut c)),
        (image, expiry, before)
    );
}

#[test]
fn errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let err = |c: &mut Connection, text: &str| {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        error_text(c, &words)
    };
    let wait = err(&mut c, "RL.TOKEN k 10 1 1s FRESH WAIT 1s");
    assert!(wait.starts_with("ERR syntax error: WAIT cannot be combined with FRESH"), "{wait}");
    assert_eq!(
        err(&mut c, "RL.PERIOD k 10 1s fresh Fresh"),
        "ERR syntax error: option FRESH given more than once"
    );
    assert_eq!(
        err(&mut c, "RL.ALL 1 k PERIOD 10 1s FRESH"),
        "ERR syntax error: unknown option 'FRESH'"
    );
    assert_eq!(
        err(&mut c, "CL.THROTTLE k 10 1 1 1 FRESH"),
        "ERR syntax error: unknown option 'FRESH'"
    );
    assert!(!exists(&mut c, "k"));
    // Another algorithm's live limiter, or another type: WRONGTYPE, untouched.
    line(&mut c, &format!("RL.TOKEN tok 10 1 1s AT {T}"));
    let image = dump(&mut c, "tok");
    assert_eq!(
        err(&mut c, &format!("RL.PERIOD tok 10 1s FRESH AT {T}")),
        "WRONGTYPE key holds a token limiter, not a period limiter"
    );
    assert_eq!(dump(&mut c, "tok"), image);
    let _: () = redis::cmd("SET").arg("str").arg("x").query(&mut c).unwrap();
    assert_eq!(
        err(&mut c, "RL.SLIDE str 10 1s FRESH COST 0"),
        "WRONGTYPE key holds a string value, not a rate limiter"
    );
    let value: String = redis::cmd("GET").arg("str").query(&mut c).unwrap();
    assert_eq!(value, "x");
    // Once the other limiter has reset, FRESH replaces it like any call would.
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD tok 10 1s FRESH AT {}", T + 1000)),
        [1, 10, 9, 0, 1000]
    );
}

/// rate-limiter-flexible's `set(key, points, secDuration)` as its Node adapter sends it: an
/// unbounded counter (limit 10^12) that holds exactly `points`, in a new window from now.
#[test]
fn an_unbounded_counter_set_to_exactly_n() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.PERIOD rlf 1000000000000 60000 COST 42 AT {T}"));
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD rlf 1000000000000 60000 COST 5 FRESH AT {}", T + 30_000)),
        [1, 1_000_000_000_000, 999_999_999_995, 0, 60_000]
    );
    let state = stored_state(&mut c, "rlf");
    for (field, value) in
        [("used", 5), ("window_start_ms", T + 30_000), ("window_end_ms", T + 90_000)]
    {
        assert!(state.contains(&(field.to_string(), value.to_string())), "{state:?}");
    }
    assert_eq!(pexpiretime(&mut c, "rlf"), T + 90_000);
}

/// Waiters queued on the key are judged again after an admitted `FRESH`: deleting a full
/// bucket (`COST 0`) admits the waiter, which would otherwise wait an hour for its token.
#[test]
fn waiters_are_woken_by_fresh() {
    let s = Server::start();
    let mut probe = s.conn();
    line(&mut probe, "RL.TOKEN q 1 1 1h");
    let mut waiter = s.conn();
    let command = cmd(&[b"RL.TOKEN", b"q", b"1", b"1", b"1h", b"WAIT", b"30s"]);
    waiter.send_packed_command(&command.get_packed_command()).unwrap();
    wait_for("the waiter to queue", || {
        info_field(&mut probe, "ratelimit", "ratelimit_waiting") == "1"
    });
    assert_eq!(line(&mut probe, "RL.TOKEN q 1 1 1h COST 0 FRESH"), [1, 1, 1, 0, 0]);
    let reply: Vec<i64> = redis::from_redis_value(&waiter.recv_response().unwrap()).unwrap();
    assert_eq!(reply[..3], [1, 1, 0]);
    assert_eq!(info_field(&mut probe, "ratelimit", "ratelimit_wait_admitted"), "1");
}

/// Calls with and without `FRESH` (no `AT`: the master propagates the state they leave, or
/// the rewritten call for a deletion) on several keys.
fn fresh_traffic(c: &mut Connection) -> Vec<String> {
    let mut keys = Vec::new();
    for (i, (command, traffic, fresh)) in CASES.iter().enumerate() {
        let key = format!("k{i}");
        for n in 0..12 {
            let args = match n % 4 {
                0 | 1 => words(command, &key, traffic, &[]),
                2 => words(command, &key, fresh, &["FRESH".into()]),
                _ => words(command, &key, fresh, &["FRESH".into(), "BAN".into(), "1h".into()]),
            };
            call(c, &args);
        }
        keys.push(key);
    }
    for k in 0..5 {
        line(c, "RL.TOKEN gone 10 1 1h COST 3");
        if k % 2 == 0 {
            line(c, "RL.TOKEN gone 10 1 1h COST 0 FRESH");
        }
    }
    keys.push("gone".into());
    keys
}

#[test]
fn replicas_reach_the_identical_state() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let keys = fresh_traffic(&mut mc);
    line(&mut mc, "RL.PERIOD deleted 5 1h COST 2");
    line(&mut mc, "RL.PERIOD deleted 5 1h COST 0 FRESH");
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    for key in &keys {
        assert_eq!(snapshot(&mut mc, key), snapshot(&mut rc, key), "{key}");
    }
    assert!(!exists(&mut rc, "deleted"));
    replica.assert_alive();
}

#[test]
fn the_aof_replays_the_identical_state() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = fresh_traffic(&mut c);
    line(&mut c, "RL.LEAKY deleted 5 1 1h COST 2");
    line(&mut c, "RL.LEAKY deleted 5 1 1h COST 0 FRESH");
    let before: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    assert_eq!(after, before);
    assert!(!exists(&mut c, "deleted"));
}

#[test]
fn command_docs_list_fresh() {
    let s = Server::start();
    let mut c = s.conn();
    for command in ["rl.token", "rl.period", "rl.slide", "rl.leaky"] {
        let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", command]).unwrap());
        assert!(
            docs.contains("\"FRESH\"") && docs.contains("as if the key were missing"),
            "{docs}"
        );
    }
    for command in ["cl.throttle", "rl.all"] {
        let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", command]).unwrap());
        assert!(!docs.contains("FRESH"), "{command}: {docs}");
    }
}
