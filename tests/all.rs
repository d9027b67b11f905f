//! `RL.ALL` against a real server: replies, all-or-nothing updates, errors that change
//! nothing, dry runs, propagation counts, command metadata and INFO counters.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

/// The whole reply: six integers, then one five-integer array per key.
fn all(con: &mut Connection, command: &str) -> (Vec<i64>, Vec<Vec<i64>>) {
    let words: Vec<&str> = command.split_whitespace().collect();
    let reply = run(con, &words).unwrap_or_else(|e| panic!("{command}: {e}"));
    let Value::Array(items) = reply else { panic!("{command}: not an array: {reply:?}") };
    assert_eq!(items.len(), 7, "{items:?}");
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    };
    let head: Vec<i64> = items[..6].iter().map(int).collect();
    let Value::Array(details) = &items[6] else { panic!("details not an array: {items:?}") };
    let details = details
        .iter()
        .map(|d| match d {
            Value::Array(v) => v.iter().map(int).collect(),
            other => panic!("detail not an array: {other:?}"),
        })
        .collect();
    (head, details)
}

fn dump(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(con).expect("DUMP")
}

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

#[test]
fn all_admits_only_when_every_limit_admits() {
    let server = Server::start();
    let mut con = server.conn();
    // 2 per second per user and 3 per second per tenant.
    let call = |at: i64| format!("RL.ALL 2 {{t1}}:u1 {{t1}}:t TOKEN 2 2 1s PERIOD 3 1s AT {at}");
    let (head, details) = all(&mut con, &call(T));
    assert_eq!(head, vec![1, 2, 1, 0, 500, 1]);
    assert_eq!(details, vec![vec![1, 2, 1, 0, 500], vec![1, 3, 2, 0, 1000]]);
    let (head, _) = all(&mut con, &call(T));
    assert_eq!(head, vec![1, 2, 0, 0, 1000, 1]);
    // The bucket is empty: refused by limit 1, and the window is not charged.
    let window_before = stored_state(&mut con, "{t1}:t");
    let dump_before = (dump(&mut con, "{t1}:u1"), dump(&mut con, "{t1}:t"));
    let expiry_before = (pexpiretime(&mut con, "{t1}:u1"), pexpiretime(&mut con, "{t1}:t"));
    let changes_before = changes(&mut con);
    let (head, details) = all(&mut con, &call(T + 1));
    assert_eq!(head, vec![0, 2, 0, 499, 999, 1]);
    assert_eq!(details[1][0], 1, "the window alone would admit");
    assert_eq!(stored_state(&mut con, "{t1}:t"), window_before);
    assert_eq!((dump(&mut con, "{t1}:u1"), dump(&mut con, "{t1}:t")), dump_before);
    assert_eq!((pexpiretime(&mut con, "{t1}:u1"), pexpiretime(&mut con, "{t1}:t")), expiry_before);
    assert_eq!(changes(&mut con), changes_before, "a refused call changes nothing");
    // After exactly the retry, admitted; each key updated as its single command would.
    let (head, _) = all(&mut con, &call(T + 500));
    assert_eq!(head[0], 1);
    assert_eq!(changes(&mut con), changes_before + 1, "one change per admitted call");
    assert_eq!(
        line(&mut con, &format!("RL.PERIOD {{t1}}:t 3 1s DRYRUN AT {}", T + 500)),
        [0, 3, 0, 500, 500]
    );
    assert_eq!(pexpiretime(&mut con, "{t1}:t"), T + 1000);
}

#[test]
fn all_keys_end_as_their_single_commands_leave_them() {
    let server = Server::start();
    let mut con = server.conn();
    let groups = [
        "TOKEN 10 3 7 COST 2",
        "PERIOD 5 100 ALIGN 30 COST 2",
        "SLIDE 4 250 COST 1",
        "SLIDE 20 200 BUCKETS 10 COST 4",
        "LEAKY 9 2 5 DELAY 2 COST 2",
    ];
    let singles = ["RL.TOKEN", "RL.PERIOD", "RL.SLIDE", "RL.SLIDE", "RL.LEAKY"];
    let mut admitted = 0;
    for round in 0..12 {
        let at = T + round * 40;
        let keys: Vec<String> = (0..groups.len()).map(|i| format!("all:{i}")).collect();
        let command =
            format!("RL.ALL {} {} {} AT {at}", keys.len(), keys.join(" "), groups.join(" "));
        let (head, details) = all(&mut con, &command);
        for (i, group) in groups.iter().enumerate() {
            let args = group.split_once(' ').unwrap().1;
            let single = format!("{} single:{i} {args} AT {at}", singles[i]);
            // Each detail is the single command's dry-run reply.
            assert_eq!(line(&mut con, &format!("{single} DRYRUN")), details[i], "round {round}");
            if head[0] == 1 {
                line(&mut con, &single);
            }
        }
        admitted += head[0];
    }
    assert!((2..12).contains(&admitted), "{admitted} of 12 admitted: both paths taken");
    for i in 0..groups.len() {
        let (a, b) = (format!("all:{i}"), format!("single:{i}"));
        assert_eq!(stored_state(&mut con, &a), stored_state(&mut con, &b), "{a}");
        assert_eq!(pexpiretime(&mut con, &a), pexpiretime(&mut con, &b), "{a}");
    }
}

#[test]
fn all_dry_runs_and_zero_costs_change_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    let before = changes(&mut con);
    let (head, _) = all(&mut con, &format!("RL.ALL 2 a b TOKEN 5 1 1s PERIOD 5 1s DRYRUN AT {T}"));
    assert_eq!(head, vec![1, 5, 4, 0, 1000, 1]);
    let (head, _) =
        all(&mut con, &format!("RL.ALL 2 a b TOKEN 5 1 1s COST 0 PERIOD 5 1s COST 0 AT {T}"));
    assert_eq!(head[0], 1);
    let exists: i64 = redis::cmd("EXISTS").arg("a").arg("b").query(&mut con).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(changes(&mut con), before);
    // A leaky queue's delay is the call's retry when admitted.
    let queue = format!("RL.ALL 2 q r LEAKY 5 1 1s COST 2 TOKEN 9 1 1s AT {T}");
    assert_eq!(all(&mut con, &queue).0, vec![1, 5, 3, 0, 2000, 1]);
    assert_eq!(all(&mut con, &queue).0, vec![1, 5, 1, 2000, 4000, 1]);
}

#[test]
fn all_errors_change_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    line(&mut con, &format!("RL.TOKEN tok 5 1 1s AT {T}"));
    redis::cmd("SET").arg("str").arg("x").query::<()>(&mut con).unwrap();
    let before = (dump(&mut con, "tok"), changes(&mut con));
    let cases: &[(&str, &str)] = &[
        ("RL.ALL 0 a TOKEN 1 1 1", "ERR numkeys must be an integer between 1 and 16"),
        ("RL.ALL 17 a TOKEN 1 1 1", "ERR numkeys must be an integer between 1 and 16"),
        ("RL.ALL -1 a TOKEN 1 1 1", "ERR numkeys must be an integer between 1 and 16"),
        ("RL.ALL x a TOKEN 1 1 1", "ERR numkeys must be an integer between 1 and 16"),
        ("RL.ALL 2 a b TOKEN 1 1 1", "ERR RL.ALL needs one limit per key (2 keys, 1 limits)"),
        (
            "RL.ALL 1 a TOKEN 1 1 1 PERIOD 1 1",
            "ERR RL.ALL needs one limit per key (1 keys, 2 limits)",
        ),
        ("RL.ALL 2 a a TOKEN 1 1 1 TOKEN 1 1 1", "ERR RL.ALL keys must be distinct"),
        (
            "RL.ALL 1 a GCRA 1 1 1",
            "ERR syntax error: unknown limit 'GCRA' (use TOKEN, PERIOD, SLIDE or LEAKY)",
        ),
        (
            "RL.ALL 1 a TOKEN 1 1 1 COST 1 COST 1",
            "ERR syntax error: option COST given more than once",
        ),
        ("RL.ALL 1 a TOKEN 1 1 1 BUCKETS 2", "ERR syntax error: unknown option 'BUCKETS'"),
        ("RL.ALL 1 a TOKEN 1 1 1 BAN 1s", "ERR syntax error: unknown option 'BAN'"),
        ("RL.ALL 1 a TOKEN 1 1 1 WAIT 1s", "ERR syntax error: unknown option 'WAIT'"),
        ("RL.ALL 1 a PERIOD 1 1h ALIGN 2h", "ERR"),
        ("RL.ALL 1 a SLIDE 1 1s BUCKETS 3", "ERR"),
        ("RL.ALL 1 a LEAKY 1 1 1 DELAY 2", "ERR"),
        ("RL.ALL 2 tok str TOKEN 5 1 1s TOKEN 1 1 1", "WRONGTYPE key holds a string value"),
        ("RL.ALL 2 b tok TOKEN 5 1 1s PERIOD 1 1s", "WRONGTYPE key holds a token limiter"),
    ];
    for (command, expected) in cases {
        let words: Vec<&[u8]> = command.split(' ').map(str::as_bytes).collect();
        let text = error_text(&mut con, &words);
        assert!(text.starts_with(expected), "{command}: {text}");
    }
    let non_utf8: [&[u8]; 7] = [b"RL.ALL", b"1", b"a", b"TOKEN", b"\xff", b"1", b"1"];
    assert!(error_text(&mut con, &non_utf8).starts_with("ERR capacity"));
    let arity: [&[u8]; 3] = [b"RL.ALL", b"1", b"a"];
    assert!(error_text(&mut con, &arity).starts_with("ERR wrong number of arguments"));
    assert_eq!((dump(&mut con, "tok"), changes(&mut con)), before);
    let exists: i64 = redis::cmd("EXISTS").arg("a").arg("b").query(&mut con).unwrap();
    assert_eq!(exists, 0, "no error creates a key");
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_all_errors"), "18");
}

#[test]
fn all_declares_its_keys() {
    let server = Server::start();
    let mut con = server.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.ALL")
        .arg("2")
        .arg("k1")
        .arg("k2")
        .arg("TOKEN")
        .arg("1")
        .arg("1")
        .arg("1")
        .arg("PERIOD")
        .arg("1")
        .arg("1")
        .query(&mut con)
        .unwrap();
    assert_eq!(keys, ["k1", "k2"]);
    let info = format!("{:?}", run(&mut con, &["COMMAND", "INFO", "rl.all"]).unwrap());
    assert!(info.contains("movablekeys"), "{info}");
    assert!(info.contains("keynum"), "{info}");
    let docs = format!("{:?}", run(&mut con, &["COMMAND", "DOCS", "rl.all"]).unwrap());
    for word in ["numkeys", "TOKEN", "PERIOD", "SLIDE", "LEAKY", "multiple"] {
        assert!(docs.contains(word), "{word} missing from {docs}");
    }
    all(&mut con, &format!("RL.ALL 1 x TOKEN 1 1 1s AT {T}"));
    all(&mut con, &format!("RL.ALL 1 x TOKEN 1 1 1s AT {T}"));
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_all_calls"), "2");
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_all_admitted"), "1");
    assert_eq!(info_field(&mut con, "ratelimit", "ratelimit_all_limited"), "1");
}

/// Calls of every size use the argument buffer that fits them: 32 arguments (six keys with
/// plain groups), 33 (the same with `DRYRUN`, the next size up), and sixteen keys — all judged
/// alike, all or nothing.
#[test]
fn all_calls_of_every_size() {
    let server = Server::start();
    let mut con = server.conn();
    let call = |n: usize, last_limit: u32, extra: &str| {
        let keys: Vec<String> = (0..n).map(|i| format!("{{s{n}}}:k{i}")).collect();
        let groups: Vec<String> = (0..n)
            .map(|i| format!("TOKEN {} 1 1h", if i + 1 == n { last_limit } else { 5 }))
            .collect();
        format!("RL.ALL {n} {} {} {extra}", keys.join(" "), groups.join(" "))
    };
    assert_eq!(call(6, 5, "").split_whitespace().count(), 32);
    assert_eq!(call(6, 5, "DRYRUN").split_whitespace().count(), 33);
    for n in [6, 16] {
        let (head, details) = all(&mut con, &call(n, 1, "DRYRUN"));
        assert_eq!((head[0], details.len()), (1, n), "{n} keys, dry run");
        let (head, details) = all(&mut con, &call(n, 1, ""));
        assert_eq!((head[0], head[5], details.len()), (1, n as i64, n), "{n} keys: the last binds");
        let dumps: Vec<_> = (0..n).map(|i| dump(&mut con, &format!("{{s{n}}}:k{i}"))).collect();
        let (head, details) = all(&mut con, &call(n, 1, ""));
        assert_eq!((head[0], head[5]), (0, n as i64), "{n} keys: the last refuses");
        assert_eq!(details[0][0], 1, "the first alone would admit");
        let after: Vec<_> = (0..n).map(|i| dump(&mut con, &format!("{{s{n}}}:k{i}"))).collect();
        assert_eq!(dumps, after, "{n} keys: a refused call changes nothing");
    }
}
