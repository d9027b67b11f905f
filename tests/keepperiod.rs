//! `RL.PERIOD … KEEPPERIOD` against a real server: a later call with another period leaves the
//! window in force (its end, the key's `PEXPIRETIME` and the stored period) as it is; once the
//! window has ended the call's period starts the next one; the stored alignment is kept;
//! options combine with it (`FRESH`, `BAN`, `DRYRUN`, `RL.ALL`), `ALIGN` does not; and replicas
//! and the AOF reach the identical state.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

fn field(con: &mut Connection, key: &str, name: &str) -> Option<String> {
    stored_state(con, key).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

#[test]
fn a_later_period_leaves_the_window_in_force() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(line(&mut c, &format!("RL.PERIOD k 5 1m KEEPPERIOD AT {T}")), [1, 5, 4, 0, MINUTE]);
    assert_eq!(pexpiretime(&mut c, "k"), T + MINUTE);
    // Another period on the live window: judged in it, which keeps its end.
    let at = T + 10_000;
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 5 1h KEEPPERIOD AT {at}")),
        [1, 5, 3, 0, MINUTE - 10_000]
    );
    assert_eq!(pexpiretime(&mut c, "k"), T + MINUTE);
    assert_eq!(field(&mut c, "k", "period_ms"), Some(MINUTE.to_string()));
    assert_eq!(field(&mut c, "k", "window_end_ms"), Some((T + MINUTE).to_string()));
    assert_eq!(field(&mut c, "k", "used"), Some("2".into()));
    // Without KEEPPERIOD the same call moves the end (a parameter change): a twin shows it.
    line(&mut c, &format!("RL.PERIOD twin 5 1m AT {T}"));
    line(&mut c, &format!("RL.PERIOD twin 5 1h AT {at}"));
    assert_eq!(pexpiretime(&mut c, "twin"), T + HOUR);
    // Refused in the window in force: the wait runs to its end, and exactly then it admits.
    line(&mut c, &format!("RL.PERIOD k 5 1h KEEPPERIOD COST 3 AT {at}"));
    let late = T + 30_000;
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 5 1d KEEPPERIOD AT {late}")),
        [0, 5, 0, 30_000, 30_000]
    );
    // The call's limit applies in the kept window.
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 9 1d KEEPPERIOD COST 4 AT {late}")),
        [1, 9, 0, 0, 30_000]
    );
    assert_eq!(pexpiretime(&mut c, "k"), T + MINUTE);
    // The window has ended: the call's period starts the next one.
    let next = T + MINUTE;
    assert_eq!(line(&mut c, &format!("RL.PERIOD k 5 1h KEEPPERIOD AT {next}")), [1, 5, 4, 0, HOUR]);
    assert_eq!(pexpiretime(&mut c, "k"), next + HOUR);
    assert_eq!(field(&mut c, "k", "period_ms"), Some(HOUR.to_string()));
    s.assert_alive();
}

#[test]
fn the_stored_alignment_is_kept() {
    let s = Server::start();
    let mut c = s.conn();
    // The UTC+8 day ends at 16:00 UTC.
    line(&mut c, &format!("RL.PERIOD k 5 1d ALIGN 8h AT {T}"));
    let end = pexpiretime(&mut c, "k");
    assert_eq!((end + 8 * HOUR) % DAY, 0);
    assert_eq!(line(&mut c, &format!("RL.PERIOD k 5 1h KEEPPERIOD AT {}", T + 1))[..3], [1, 5, 3]);
    assert_eq!(pexpiretime(&mut c, "k"), end);
    assert_eq!(field(&mut c, "k", "align"), Some("1".into()));
    assert_eq!(field(&mut c, "k", "utc_offset_ms"), Some((8 * HOUR).to_string()));
    assert_eq!(field(&mut c, "k", "period_ms"), Some(DAY.to_string()));
}

#[test]
fn keepperiod_combines_with_the_other_options() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.PERIOD k 3 1m AT {T}"));
    let (expiry, before) = (pexpiretime(&mut c, "k"), changes(&mut c));
    // DRYRUN: the reply in the kept window, nothing changed.
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 3 1h KEEPPERIOD DRYRUN AT {}", T + 1000)),
        [1, 3, 1, 0, MINUTE - 1000]
    );
    assert_eq!((pexpiretime(&mut c, "k"), changes(&mut c)), (expiry, before));
    // BAN: the refusal in the kept window starts the ban.
    line(&mut c, &format!("RL.PERIOD k 3 1h KEEPPERIOD COST 2 AT {}", T + 1000));
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 3 1h KEEPPERIOD BAN 2m AT {}", T + 2000)),
        [0, 3, 0, 2 * MINUTE, 2 * MINUTE]
    );
    assert_eq!(pexpiretime(&mut c, "k"), T + 2000 + 2 * MINUTE);
    // FRESH: no window in force, so the call's period starts the window (and the ban goes).
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD k 3 1h KEEPPERIOD FRESH AT {}", T + 3000)),
        [1, 3, 2, 0, HOUR]
    );
    assert_eq!(pexpiretime(&mut c, "k"), T + 3000 + HOUR);
    // RL.ALL: a PERIOD group takes KEEPPERIOD.
    line(&mut c, &format!("RL.PERIOD {{a}}p 5 1m AT {T}"));
    let reply = run(
        &mut c,
        &[
            "RL.ALL",
            "2",
            "{a}p",
            "{a}t",
            "PERIOD",
            "5",
            "1d",
            "KEEPPERIOD",
            "TOKEN",
            "5",
            "1",
            "1s",
        ],
    );
    assert!(matches!(reply, Ok(Value::Array(ref items)) if items[0] == Value::Int(1)), "{reply:?}");
    assert_eq!(pexpiretime(&mut c, "{a}p"), T + MINUTE);
    // Errors, nothing changed.
    let err = |c: &mut Connection, text: &str| {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        error_text(c, &words)
    };
    for text in ["RL.PERIOD n 5 1d ALIGN 8h KEEPPERIOD", "RL.PERIOD n 5 1d KEEPPERIOD ALIGN"] {
        assert_eq!(err(&mut c, text), "ERR syntax error: KEEPPERIOD and ALIGN cannot be combined");
    }
    assert_eq!(
        err(&mut c, "RL.PERIOD n 5 1d keepperiod KeepPeriod"),
        "ERR syntax error: option KEEPPERIOD given more than once"
    );
    for text in ["RL.TOKEN n 5 1 1s KEEPPERIOD", "RL.ALL 1 n SLIDE 5 1s KEEPPERIOD"] {
        assert_eq!(err(&mut c, text), "ERR syntax error: unknown option 'KEEPPERIOD'");
    }
    assert_eq!(redis::cmd("EXISTS").arg("n").query::<i64>(&mut c).unwrap(), 0);
    let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", "rl.period"]).unwrap());
    assert!(docs.contains("\"KEEPPERIOD\""), "{docs}");
}

/// Calls with and without `KEEPPERIOD`, other periods included; without `AT` (the master
/// propagates the state they leave) and with it (the call itself, judged again downstream).
fn traffic(c: &mut Connection) -> Vec<String> {
    let periods = ["1m", "1h", "2s", "1d"];
    let start = unix_ms();
    let mut keys = Vec::new();
    for k in 0..4 {
        let key = format!("k{k}");
        for n in 0..10 {
            let period = periods[(k + n) % periods.len()];
            let keep = if n % 3 == 2 { "" } else { " KEEPPERIOD" };
            let at =
                if n % 2 == 0 { format!(" AT {}", start + 100 * n as i64) } else { String::new() };
            line(c, &format!("RL.PERIOD {key} 20 {period}{keep}{at}"));
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
        assert_eq!(snapshot(&mut mc, key), snapshot(&mut rc, key), "{key}");
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
}
