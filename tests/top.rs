//! `RL.TOP` against a real server: only refusals count (not admitted calls, not dry runs), most
//! refused first, binary and long keys, `COUNT`, `POLICY`, `RESET`, refusals of `RL.ALL`,
//! `RL.ACQUIRE` and `WAIT`, the settings `ratelimit.top-k` / `ratelimit.top-window`, `INFO`,
//! a replica's own (empty) summary, and bad arguments.

mod common;
use common::*;

/// `RL.TOP …` as `(key, refused, last_refused_ms)` rows.
fn top(con: &mut Connection, args: &[&[u8]]) -> Vec<(Vec<u8>, i64, i64)> {
    let mut all: Vec<&[u8]> = vec![b"RL.TOP"];
    all.extend_from_slice(args);
    cmd(&all).query(con).unwrap_or_else(|e| panic!("RL.TOP {args:?}: {e}"))
}

fn keys(rows: &[(Vec<u8>, i64, i64)]) -> Vec<(Vec<u8>, i64)> {
    rows.iter().map(|(k, n, _)| (k.clone(), *n)).collect()
}

/// Refuses `key` `times` times (a token bucket of 1, spent first; the spending call is
/// admitted and does not count).
fn refuse(con: &mut Connection, key: &[u8], times: usize) {
    let admitted: Vec<i64> =
        cmd(&[b"RL.TOKEN", key, b"1", b"1", b"1h"]).query(con).expect("RL.TOKEN");
    assert_eq!(admitted[0], 1);
    for _ in 0..times {
        let refused: Vec<i64> =
            cmd(&[b"RL.TOKEN", key, b"1", b"1", b"1h"]).query(con).expect("RL.TOKEN");
        assert_eq!(refused[0], 0);
    }
}

#[test]
fn refused_keys_most_refused_first() {
    let s = Server::start();
    let mut c = s.conn();
    assert!(top(&mut c, &[]).is_empty());
    let before = unix_ms();
    refuse(&mut c, b"a", 3);
    refuse(&mut c, b"b", 1);
    refuse(&mut c, b"c", 5);
    // Admitted calls and dry runs are no refusals.
    line(&mut c, "RL.TOKEN d 10 1 1h");
    assert_eq!(line(&mut c, "RL.TOKEN a 1 1 1h DRYRUN")[0], 0);
    let after = unix_ms();
    let rows = top(&mut c, &[]);
    assert_eq!(keys(&rows), [(b"c".to_vec(), 5), (b"a".to_vec(), 3), (b"b".to_vec(), 1)]);
    for (_, _, last) in &rows {
        assert!(before <= *last && *last <= after, "{before} <= {last} <= {after}");
    }
    // COUNT keeps the first rows.
    assert_eq!(keys(&top(&mut c, &[b"COUNT", b"2"])), [(b"c".to_vec(), 5), (b"a".to_vec(), 3)]);
    assert_eq!(top(&mut c, &[b"count", b"1"]).len(), 1);
    // Every limiting command counts; CL.THROTTLE as the others.
    line(&mut c, "CL.THROTTLE g 0 1 3600");
    line(&mut c, "CL.THROTTLE g 0 1 3600");
    assert!(keys(&top(&mut c, &[])).contains(&(b"g".to_vec(), 1)));
    // AT does not move the windows: a refusal far in the past still shows now.
    let past = unix_ms() - 3_600_000;
    line(&mut c, &format!("RL.PERIOD old 1 1d AT {past}"));
    assert_eq!(line(&mut c, &format!("RL.PERIOD old 1 1d AT {}", past + 1))[0], 0);
    assert!(keys(&top(&mut c, &[])).contains(&(b"old".to_vec(), 1)));
    // RESET forgets them all.
    assert_eq!(run(&mut c, &["RL.TOP", "RESET"]).unwrap(), Value::Okay);
    assert!(top(&mut c, &[]).is_empty());
    assert_eq!(line(&mut c, "RL.TOKEN a 1 1 1h")[0], 0);
    assert_eq!(keys(&top(&mut c, &[])), [(b"a".to_vec(), 1)]);
}

#[test]
fn binary_and_long_keys() {
    let s = Server::start();
    let mut c = s.conn();
    let binary: &[u8] = b"\x00\xff\r\nkey \x80";
    refuse(&mut c, binary, 2);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let long_a = vec![b'x'; 200];
    let mut long_b = long_a.clone();
    long_b[150] = b'y';
    refuse(&mut c, &long_a, 1);
    refuse(&mut c, &long_b, 1);
    let rows = keys(&top(&mut c, &[]));
    // Keys are kept to their first 128 bytes: the two long keys count as one. Equal counts:
    // the most recently refused first.
    assert_eq!(rows, [(vec![b'x'; 128], 2), (binary.to_vec(), 2)]);
}

#[test]
fn all_acquire_and_wait_refusals_count() {
    let s = Server::start();
    let mut c = s.conn();
    // RL.ALL: only the key whose own limit refused.
    run(&mut c, &["RL.ALL", "2", "{u}:s", "{u}:d", "TOKEN", "1", "1", "1h", "PERIOD", "100", "1d"])
        .unwrap();
    let refused: Value = run(
        &mut c,
        &["RL.ALL", "2", "{u}:s", "{u}:d", "TOKEN", "1", "1", "1h", "PERIOD", "100", "1d"],
    )
    .unwrap();
    let Value::Array(head) = refused else { panic!("{refused:?}") };
    assert_eq!(head[0], Value::Int(0));
    assert_eq!(keys(&top(&mut c, &[])), [(b"{u}:s".to_vec(), 1)]);
    // A dry run of RL.ALL counts nothing.
    run(&mut c, &["RL.ALL", "1", "{u}:s", "TOKEN", "1", "1", "1h", "DRYRUN"]).unwrap();
    assert_eq!(keys(&top(&mut c, &[])), [(b"{u}:s".to_vec(), 1)]);
    // RL.ACQUIRE refused.
    run(&mut c, &["RL.ACQUIRE", "pool", "1", "1h"]).unwrap();
    run(&mut c, &["RL.ACQUIRE", "pool", "1", "1h"]).unwrap();
    // A WAIT that times out is refused when it does.
    line(&mut c, "RL.TOKEN w 1 1 1h");
    assert_eq!(line(&mut c, "RL.TOKEN w 1 1 1h WAIT 50ms")[0], 0);
    // A request that can never be admitted is refused at once, waiting or not.
    assert_eq!(line(&mut c, "RL.TOKEN w 1 1 1h COST 5 WAIT 1s")[0], 0);
    let rows = keys(&top(&mut c, &[]));
    assert!(rows.contains(&(b"pool".to_vec(), 1)), "{rows:?}");
    assert!(rows.contains(&(b"w".to_vec(), 2)), "{rows:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
}

#[test]
fn policy_filters() {
    let s = Server::start();
    let mut c = s.conn();
    run(&mut c, &["RL.POLICY", "SET", "api", "TOKEN", "1", "1", "1h"]).unwrap();
    run(&mut c, &["RL.POLICY", "SET", "login", "PERIOD", "1", "1h"]).unwrap();
    run(&mut c, &["RL.POLICY", "SET", "dark", "PERIOD", "1", "1h", "SHADOW"]).unwrap();
    refuse(&mut c, b"direct", 2);
    for (policy, key, calls) in
        [("api", "u1", 3), ("api", "u2", 2), ("login", "u1", 4), ("dark", "u3", 3)]
    {
        for _ in 0..calls {
            run(&mut c, &["RL.HIT", policy, key]).unwrap();
        }
    }
    // A dry run through a policy counts nothing.
    assert_eq!(line(&mut c, "RL.HIT api u2 DRYRUN")[0], 0);
    assert_eq!(
        keys(&top(&mut c, &[b"POLICY", b"api"])),
        [(b"u1".to_vec(), 2), (b"u2".to_vec(), 1)]
    );
    assert_eq!(keys(&top(&mut c, &[b"POLICY", b"login"])), [(b"u1".to_vec(), 3)]);
    // Shadow refusals are answered allowed = 1, and read under their policy only (issue 31:
    // "which tenants would the new limit refuse?").
    assert_eq!(keys(&top(&mut c, &[b"POLICY", b"dark"])), [(b"u3".to_vec(), 2)]);
    assert!(top(&mut c, &[b"POLICY", b"none", b"COUNT", b"5"]).is_empty());
    // Without POLICY, a key's refusals under every policy (or none) add up.
    assert_eq!(
        keys(&top(&mut c, &[])),
        [(b"u1".to_vec(), 5), (b"direct".to_vec(), 2), (b"u2".to_vec(), 1)]
    );
    // A waiting RL.HIT that times out counts under its policy.
    assert_eq!(line(&mut c, "RL.HIT api u2 WAIT 30ms")[0], 0);
    // (Equal counts: the most recently refused first.)
    assert_eq!(
        keys(&top(&mut c, &[b"POLICY", b"api"])),
        [(b"u2".to_vec(), 2), (b"u1".to_vec(), 2)]
    );
}

#[test]
fn settings_size_and_window() {
    let s = Server::start_with(&["--ratelimit.top-k", "2", "--ratelimit.top-window", "1"]);
    let mut c = s.conn();
    let get = |c: &mut Connection, name: &str| -> Vec<String> {
        redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap()
    };
    assert_eq!(get(&mut c, "ratelimit.top-k"), ["ratelimit.top-k", "2"]);
    assert_eq!(get(&mut c, "ratelimit.top-window"), ["ratelimit.top-window", "1"]);
    // Two counters: a third key takes over the least one (count 1 + 1).
    refuse(&mut c, b"a", 3);
    refuse(&mut c, b"b", 1);
    refuse(&mut c, b"c", 1);
    assert_eq!(keys(&top(&mut c, &[])), [(b"a".to_vec(), 3), (b"c".to_vec(), 2)]);
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_top_refusals"), "5");
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_top_tracked"), "2");
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_top_error_bound"), "1");
    // Refusals older than two windows are gone (1 s windows: 2 s later at the latest).
    let last = top(&mut c, &[])[0].2;
    while unix_ms() < (last / 1000 + 2) * 1000 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(top(&mut c, &[]).is_empty());
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_top_refusals"), "0");
    // Changing a setting clears the summary; top-k 0 turns it off.
    refuse(&mut c, b"d", 1);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.top-window")
        .arg("60")
        .query::<()>(&mut c)
        .unwrap();
    assert!(top(&mut c, &[]).is_empty());
    redis::cmd("CONFIG").arg("SET").arg("ratelimit.top-k").arg("0").query::<()>(&mut c).unwrap();
    refuse(&mut c, b"e", 1);
    assert!(top(&mut c, &[]).is_empty());
    for (name, bad) in
        [("ratelimit.top-k", "-1"), ("ratelimit.top-k", "10001"), ("ratelimit.top-window", "0")]
    {
        assert!(redis::cmd("CONFIG").arg("SET").arg(name).arg(bad).query::<()>(&mut c).is_err());
    }
}

#[test]
fn a_replica_has_its_own_summary() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let mut rc = replica.conn();
    refuse(&mut mc, b"a", 2);
    wait_in_sync(&master, &replica);
    assert_eq!(keys(&top(&mut mc, &[])), [(b"a".to_vec(), 2)]);
    // Refusals are neither replicated nor persisted: the replica counted none. RL.TOP and
    // RL.TOP RESET run on a read-only replica.
    assert!(top(&mut rc, &[]).is_empty());
    assert_eq!(run(&mut rc, &["RL.TOP", "RESET"]).unwrap(), Value::Okay);
    assert_eq!(keys(&top(&mut mc, &[])), [(b"a".to_vec(), 2)]);
}

#[test]
fn bad_arguments() {
    let s = Server::start();
    let mut c = s.conn();
    for args in [
        &[&b"RL.TOP"[..], b"COUNT"][..],
        &[b"RL.TOP", b"COUNT", b"0"],
        &[b"RL.TOP", b"COUNT", b"-3"],
        &[b"RL.TOP", b"COUNT", b"ten"],
        &[b"RL.TOP", b"COUNT", b"20001"],
        &[b"RL.TOP", b"COUNT", b"1", b"COUNT", b"1"],
        &[b"RL.TOP", b"POLICY"],
        &[b"RL.TOP", b"RESET", b"COUNT", b"1"],
        &[b"RL.TOP", b"RESET", b"RESET"],
        &[b"RL.TOP", b"\xff\x00"],
    ] {
        assert!(error_text(&mut c, args).starts_with("ERR"), "{args:?}");
    }
    s.assert_alive();
    // A keyless, read-only command.
    let info = format!("{:?}", run(&mut c, &["COMMAND", "INFO", "RL.TOP"]).unwrap());
    assert!(info.contains("readonly"), "{info}");
}
