//! `BAN duration` against a real server: the login lock-out end to end (the ban-starting
//! refusal is the one change a refused call makes), `RL.PEEK`/`RL.INFO`, dry runs, refunds
//! under a ban, errors, and the memory a ban costs.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;
const HOUR: i64 = 3_600_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

fn info(con: &mut Connection, key: &str, field: &str) -> Option<String> {
    stored_state(con, key).into_iter().find(|(k, _)| k == field).map(|(_, v)| v)
}

#[test]
fn login_lock_out() {
    let s = Server::start();
    let mut c = s.conn();
    let attempt = |c: &mut Connection, at: i64| {
        line(c, &format!("RL.SLIDE login:alice 5 15m BAN 1h AT {at}"))
    };
    for i in 0..5 {
        assert_eq!(attempt(&mut c, T + i)[0], 1);
    }
    let before = changes(&mut c);
    // The sixth failure within 15 minutes: refused by the algorithm, which starts the ban.
    assert_eq!(attempt(&mut c, T + 10), [0, 5, 0, HOUR, HOUR]);
    assert_eq!(changes(&mut c), before + 1, "starting a ban is a change");
    assert_eq!(pexpiretime(&mut c, "login:alice"), T + 10 + HOUR);
    assert_eq!(info(&mut c, "login:alice", "banned_until_ms"), Some((T + 10 + HOUR).to_string()));
    assert_eq!(info(&mut c, "login:alice", "updated_ms"), Some((T + 10).to_string()));
    // Attempts during the ban are refused and change nothing (not even after the window).
    let dump: Vec<u8> = redis::cmd("DUMP").arg("login:alice").query(&mut c).unwrap();
    for at in [T + 11, T + 20 * 60_000, T + HOUR] {
        let reply = attempt(&mut c, at);
        assert_eq!(reply[..3], [0, 5, 0]);
        assert_eq!(reply[3], T + 10 + HOUR - at, "exact wait until the ban ends");
    }
    assert_eq!(changes(&mut c), before + 1, "never extended");
    assert_eq!(redis::cmd("DUMP").arg("login:alice").query::<Vec<u8>>(&mut c).unwrap(), dump);
    assert_eq!(pexpiretime(&mut c, "login:alice"), T + 10 + HOUR);
    // A COST 0 peek is admitted and sees the ban; so does RL.PEEK (at the server clock, which
    // is before T: now' is the ban's start).
    let peek = line(&mut c, &format!("RL.SLIDE login:alice 5 15m COST 0 AT {}", T + 20 * 60_000));
    assert_eq!(peek, [1, 5, 0, 0, 10 + HOUR - 20 * 60_000]);
    assert_eq!(line(&mut c, "RL.PEEK login:alice"), [0, 5, 0, HOUR, HOUR]);
    // Free at exactly the end of the ban; the ban is forgotten.
    assert_eq!(attempt(&mut c, T + 10 + HOUR - 1)[0], 0);
    assert_eq!(attempt(&mut c, T + 10 + HOUR)[0], 1);
    assert_eq!(info(&mut c, "login:alice", "banned_until_ms"), None);
    s.assert_alive();
}

#[test]
fn dry_runs_report_a_ban_and_other_requests_never_start_one() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 3 1 1s COST 3 AT {T}"));
    let before = changes(&mut c);
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN k 3 1 1s BAN 1m DRYRUN AT {T}")),
        [0, 3, 0, 60_000, 60_000]
    );
    // Could never be admitted (COST above the capacity): a client bug, never a ban.
    assert_eq!(line(&mut c, &format!("RL.TOKEN k 3 1 1s COST 4 BAN 1m AT {T}"))[3], -1);
    // Refused without BAN: no ban either.
    assert_eq!(line(&mut c, &format!("RL.TOKEN k 3 1 1s AT {T}"))[0], 0);
    assert_eq!(changes(&mut c), before);
    assert_eq!(info(&mut c, "k", "banned_until_ms"), None);
    // RL.ALL keys under a ban refuse like their single commands.
    line(&mut c, &format!("RL.TOKEN k 3 1 1s BAN 1m AT {T}"));
    let reply =
        run(&mut c, &["RL.ALL", "1", "k", "TOKEN", "3", "1", "1s", "AT", &(T + 5000).to_string()]);
    let Ok(Value::Array(items)) = reply else { panic!("{reply:?}") };
    assert_eq!(items[..4], [Value::Int(0), Value::Int(3), Value::Int(0), Value::Int(55_000)]);
}

#[test]
fn a_refund_never_lifts_a_ban() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 2 1 1s COST 2 AT {T}"));
    line(&mut c, &format!("RL.TOKEN k 2 1 1s BAN 1h AT {T}"));
    // Everything back: the limiter is fresh again, but the key lives on for the ban.
    let reply: Vec<i64> =
        redis::cmd("RL.REFUND").arg("k").arg(5).arg("AT").arg(T + 1).query(&mut c).unwrap();
    assert_eq!(reply, [0, 2, 0, HOUR - 1, HOUR - 1]);
    assert_eq!(pexpiretime(&mut c, "k"), T + HOUR);
    assert_eq!(line(&mut c, &format!("RL.TOKEN k 2 1 1s AT {}", T + 2))[0], 0);
    // After the ban, a fresh bucket.
    assert_eq!(line(&mut c, &format!("RL.TOKEN k 2 1 1s COST 2 AT {}", T + HOUR))[0], 1);
}

#[test]
fn ban_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: &[(&[&[u8]], &str)] = &[
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1s", b"BAN", b"0"],
            "ERR BAN must be a duration between 1ms and 315360000000ms",
        ),
        (&[b"RL.TOKEN", b"k", b"1", b"1", b"1s", b"BAN", b"3651d"], "ERR BAN must be a duration"),
        (&[b"RL.PERIOD", b"k", b"1", b"1s", b"BAN", b"x"], "ERR invalid duration 'x' for BAN"),
        (
            &[b"RL.SLIDE", b"k", b"1", b"1s", b"BAN", b"\xff"],
            "ERR invalid duration '\\xff' for BAN",
        ),
        (&[b"RL.LEAKY", b"k", b"1", b"1", b"1s", b"BAN"], "ERR syntax error: BAN needs a value"),
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1s", b"BAN", b"1s", b"BAN", b"1s"],
            "ERR syntax error: option BAN given more than once",
        ),
        (
            &[b"CL.THROTTLE", b"k", b"1", b"1", b"1", b"BAN", b"1s"],
            "ERR syntax error: unknown option 'BAN'",
        ),
    ];
    for (args, expected) in cases {
        let text = error_text(&mut c, args);
        assert!(text.starts_with(expected), "{args:?}: {text}");
    }
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut c).unwrap();
    assert_eq!(exists, 0);
}

/// A ban is stored beside the limiter (the value goes from the 48-byte compact form to a boxed
/// one) only while it exists; limiters without one keep their size.
#[test]
fn a_ban_costs_memory_only_while_it_exists() {
    let s = Server::start();
    let mut c = s.conn();
    let usage = |c: &mut Connection, key: &str| -> i64 {
        redis::cmd("MEMORY").arg("USAGE").arg(key).query(c).unwrap()
    };
    line(&mut c, &format!("RL.TOKEN plain1 1 1 1m AT {T}"));
    line(&mut c, &format!("RL.TOKEN banned 1 1 1m AT {T}"));
    let plain = usage(&mut c, "plain1");
    line(&mut c, &format!("RL.TOKEN banned 1 1 1m BAN 1h AT {T}"));
    let banned = usage(&mut c, "banned");
    assert!(banned > plain, "{banned} vs {plain}");
    // After the ban and an admitted call, the value is compact again.
    line(&mut c, &format!("RL.TOKEN banned 1 1 1m AT {}", T + HOUR));
    assert_eq!(usage(&mut c, "banned"), plain);
}
