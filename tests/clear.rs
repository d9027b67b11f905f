//! `BAN d CLEAR` against a real server: the request that starts a ban also clears the limiter,
//! so the key is refused until exactly `banned_until` and then answers as a fresh limiter (the
//! NestJS throttler's block); for every algorithm and mode; `RL.PEEK`/`RL.INFO`, dry runs,
//! refunds, a waiter whose timeout starts the ban, errors, and replicas and the AOF reaching the
//! identical state.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

fn field(con: &mut Connection, key: &str, name: &str) -> Option<String> {
    stored_state(con, key).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// NestJS' block with `blockDuration` (300 ms) shorter than `ttl` (1 s): limit → ban →
/// refused → admitted as a fresh limiter right at `banned_until`.
#[test]
fn a_clearing_ban_ends_with_a_fresh_window() {
    let s = Server::start();
    let mut c = s.conn();
    let hit =
        |c: &mut Connection, at: i64| line(c, &format!("RL.PERIOD k 2 1s BAN 300 CLEAR AT {at}"));
    assert_eq!(hit(&mut c, T), [1, 2, 1, 0, 1000]);
    assert_eq!(hit(&mut c, T + 10), [1, 2, 0, 0, 990]);
    let before = changes(&mut c);
    // The third hit: refused by the window, which starts the ban and clears the window.
    assert_eq!(hit(&mut c, T + 20), [0, 2, 0, 300, 300]);
    assert_eq!(changes(&mut c), before + 1, "starting a ban is a change");
    assert_eq!(pexpiretime(&mut c, "k"), T + 320, "the key lives as long as the ban");
    assert_eq!(field(&mut c, "k", "banned_until_ms"), Some((T + 320).to_string()));
    assert_eq!(field(&mut c, "k", "used"), Some("0".into()), "the cleared window");
    assert_eq!(field(&mut c, "k", "updated_ms"), Some((T + 20).to_string()));
    // Refused until exactly the ban's end, with or without BAN; nothing changes.
    let image: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut c).unwrap();
    for at in [T + 21, T + 200, T + 319] {
        assert_eq!(hit(&mut c, at), [0, 2, 0, T + 320 - at, T + 320 - at]);
        assert_eq!(line(&mut c, &format!("RL.PERIOD k 2 1s AT {at}"))[3], T + 320 - at);
    }
    assert_eq!(changes(&mut c), before + 1, "never extended");
    assert_eq!(redis::cmd("DUMP").arg("k").query::<Vec<u8>>(&mut c).unwrap(), image);
    // COST 0 and RL.PEEK see the ban (RL.PEEK at the server clock, before T: now' is the
    // ban's start); RL.REFUND has nothing to give back.
    assert_eq!(line(&mut c, &format!("RL.PERIOD k 2 1s COST 0 AT {}", T + 100)), [1, 2, 0, 0, 220]);
    assert_eq!(line(&mut c, "RL.PEEK k"), [0, 2, 0, 300, 300]);
    let refund: Vec<i64> =
        redis::cmd("RL.REFUND").arg("k").arg(1).arg("AT").arg(T + 100).query(&mut c).unwrap();
    assert_eq!(refund, [0, 2, 0, 220, 220]);
    assert_eq!(changes(&mut c), before + 1);
    // At the ban's end: hit 1 of a new window, a full second from now (a plain BAN would refuse
    // until the old window's end, T + 1000).
    assert_eq!(hit(&mut c, T + 320), [1, 2, 1, 0, 1000]);
    assert_eq!(field(&mut c, "k", "banned_until_ms"), None);
    assert_eq!(pexpiretime(&mut c, "k"), T + 1320);
    line(&mut c, &format!("RL.PERIOD plain 2 1s BAN 300 AT {T}"));
    line(&mut c, &format!("RL.PERIOD plain 2 1s BAN 300 AT {}", T + 10));
    line(&mut c, &format!("RL.PERIOD plain 2 1s BAN 300 AT {}", T + 20));
    assert_eq!(line(&mut c, &format!("RL.PERIOD plain 2 1s AT {}", T + 320)), [0, 2, 0, 680, 680]);
    s.assert_alive();
}

/// Every algorithm and mode that takes `BAN`: traffic that fills the limiter, then the
/// clearing ban; at its end the key answers exactly as a missing key (a twin) does.
const CASES: [(&str, &str); 8] = [
    ("RL.TOKEN", "3 1 1m"),
    ("RL.TOKEN", "3 1 1m STEP"),
    ("RL.PERIOD", "3 1h"),
    ("RL.PERIOD", "3 1d ALIGN 8h"),
    ("RL.SLIDE", "3 1m"),
    ("RL.SLIDE", "3 1m BUCKETS 6 ANCHOR FLOOR"),
    ("RL.LEAKY", "3 1 1m"),
    ("RL.LEAKY", "3 1 1m NODELAY"),
];

fn call(con: &mut Connection, command: &str, key: &str, args: &str, extra: &str) -> Vec<i64> {
    let text = format!("{command} {key} {args} {extra}");
    let words: Vec<&str> = text.split_whitespace().collect();
    ints(con, &words)
}

#[test]
fn every_algorithm_is_fresh_when_its_clearing_ban_ends() {
    let s = Server::start();
    let mut c = s.conn();
    for (i, (command, args)) in CASES.iter().enumerate() {
        let (key, twin) = (format!("k{i}"), format!("twin{i}"));
        call(&mut c, command, &key, args, &format!("COST 3 AT {T}"));
        let start = call(&mut c, command, &key, args, &format!("BAN 5s CLEAR AT {}", T + 7));
        assert_eq!(start, [0, 3, 0, 5000, 5000], "{command} {args}");
        assert_eq!(pexpiretime(&mut c, &key), T + 5007, "{command} {args}");
        assert_eq!(
            call(&mut c, command, &key, args, &format!("COST 2 AT {}", T + 5006)),
            [0, 3, 0, 1, 1],
            "{command} {args}"
        );
        let at = format!("COST 2 AT {}", T + 5007);
        let on_missing = call(&mut c, command, &twin, args, &at);
        assert_eq!(call(&mut c, command, &key, args, &at), on_missing, "{command} {args}");
        assert_eq!(snapshot(&mut c, &key), snapshot(&mut c, &twin), "{command} {args}");
    }
    s.assert_alive();
}

#[test]
fn dry_runs_report_and_the_calls_parameters_are_kept() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 3 1 1s COST 3 AT {T}"));
    let dump = |c: &mut Connection| redis::cmd("DUMP").arg("k").query::<Vec<u8>>(c).unwrap();
    let (before, image) = (changes(&mut c), dump(&mut c));
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN k 3 1 1s BAN 1m CLEAR DRYRUN AT {T}")),
        [0, 3, 0, 60_000, 60_000]
    );
    // A cost no bucket holds never bans.
    assert_eq!(line(&mut c, &format!("RL.TOKEN k 3 1 1s COST 4 BAN 1m CLEAR AT {T}"))[3], -1);
    assert_eq!(changes(&mut c), before);
    assert_eq!(dump(&mut c), image);
    // Started with other parameters: the key holds the call's, in their initial state.
    line(&mut c, &format!("RL.TOKEN k 5 1 1s BAN 1m CLEAR AT {}", T + 1));
    for (name, value) in [("capacity", "5"), ("tokens", "5"), ("fraction", "0")] {
        assert_eq!(field(&mut c, "k", name), Some(value.into()), "{name}");
    }
    assert_eq!(field(&mut c, "k", "banned_until_ms"), Some((T + 60_001).to_string()));
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN k 5 1 1s COST 5 AT {}", T + 60_001)),
        [1, 5, 0, 0, 5000]
    );
}

/// A waiter's refusal counts only when it times out (as for `BAN`): then it starts the
/// clearing ban.
#[test]
fn a_waiter_that_times_out_starts_the_clearing_ban() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, "RL.PERIOD q 1 1h");
    let reply = line(&mut c, "RL.PERIOD q 1 1h WAIT 100 BAN 2s CLEAR");
    assert_eq!(reply, [0, 1, 0, 2000, 2000]);
    assert_eq!(field(&mut c, "q", "used"), Some("0".into()));
    assert!(field(&mut c, "q", "banned_until_ms").is_some());
    let ttl: i64 = redis::cmd("PTTL").arg("q").query(&mut c).unwrap();
    assert!(ttl > 0 && ttl <= 2000, "{ttl}");
}

#[test]
fn clear_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let err = |c: &mut Connection, text: &str| {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        error_text(c, &words)
    };
    for text in
        ["RL.TOKEN k 1 1 1s CLEAR", "RL.SLIDE k 1 1s CLEAR COST 1", "RL.LEAKY k 1 1 1s clear"]
    {
        let e = err(&mut c, text);
        assert!(e.starts_with("ERR syntax error: CLEAR needs BAN d"), "{text}: {e}");
    }
    assert_eq!(
        err(&mut c, "RL.PERIOD k 1 1s BAN 1s CLEAR Clear"),
        "ERR syntax error: option CLEAR given more than once"
    );
    for text in ["RL.ALL 1 k PERIOD 1 1s CLEAR", "CL.THROTTLE k 1 1 1 CLEAR"] {
        assert_eq!(err(&mut c, text), "ERR syntax error: unknown option 'CLEAR'", "{text}");
    }
    assert_eq!(redis::cmd("EXISTS").arg("k").query::<i64>(&mut c).unwrap(), 0);
    for command in ["rl.token", "rl.period", "rl.slide", "rl.leaky"] {
        let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", command]).unwrap());
        assert!(docs.contains("\"CLEAR\"") && docs.contains("clears the limiter"), "{docs}");
    }
}

/// Clearing bans started and ended, without `AT` (the master propagates the state they
/// leave) and with it (the call itself, judged again downstream).
fn traffic(c: &mut Connection) -> Vec<String> {
    let start = unix_ms();
    let mut keys = Vec::new();
    for (i, (command, args)) in CASES.iter().enumerate() {
        let key = format!("k{i}");
        for n in 0..8i64 {
            let at = if i % 2 == 0 { format!("AT {}", start + 100 * n) } else { String::new() };
            call(c, command, &key, args, &format!("COST 2 BAN 1h CLEAR {at}"));
        }
        keys.push(key);
    }
    keys
}

#[test]
fn replicas_reach_the_identical_state() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let keys = traffic(&mut mc);
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    for key in &keys {
        let snap = snapshot(&mut mc, key);
        assert!(snap.0.iter().any(|(k, _)| k == "banned_until_ms"), "{key}: {snap:?}");
        assert_eq!(snap, snapshot(&mut rc, key), "{key}");
    }
    replica.assert_alive();
}

#[test]
fn the_aof_replays_the_identical_state() {
    let mut s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let keys = traffic(&mut c);
    let before: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    drop(c);
    s.restart();
    let mut c = s.conn();
    let after: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    assert_eq!(after, before);
    // And through an AOF rewrite (RL.RESTORE of the cleared limiter and its ban).
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_for("the AOF rewrite", || {
        info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled") == "0"
    });
    drop(c);
    s.restart();
    let mut c = s.conn();
    let rewritten: Vec<_> = keys.iter().map(|k| snapshot(&mut c, k)).collect();
    assert_eq!(rewritten, before);
}
