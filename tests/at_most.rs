//! `ATMOST n` against a real server: what is left up to `n`, taken atomically (redis_rate's
//! `AllowAtMost`) — the six-integer reply, the expiry, what a refusal leaves (nothing), the
//! state reaching a replica, and the option's errors.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

#[test]
fn at_most_takes_what_is_left_and_says_how_much() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(line(&mut c, &format!("RL.TOKEN t 10 10 1s COST 3 AT {T}")), [1, 10, 7, 0, 300]);
    // More asked than left: the 7 left are taken (sixth integer), the bucket is empty.
    let before = changes(&mut c);
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN t 10 10 1s ATMOST 10 AT {T}")),
        [1, 10, 0, 0, 1000, 7]
    );
    assert_eq!(changes(&mut c), before + 1);
    assert_eq!(pexpiretime(&mut c, "t"), T + 1000);
    // Nothing left: refused, retry when one permit is back, nothing changed.
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN t 10 10 1s ATMOST 5 AT {}", T + 40)),
        [0, 10, 0, 60, 960, 0]
    );
    assert_eq!(changes(&mut c), before + 1);
    // Less asked than left: exactly that, as COST would.
    assert_eq!(
        line(&mut c, &format!("RL.TOKEN t 10 10 1s ATMOST 2 AT {}", T + 500)),
        [1, 10, 3, 0, 700, 2]
    );
    // Every limiting RL.* command takes it; DRYRUN answers and changes nothing.
    assert_eq!(line(&mut c, &format!("RL.PERIOD p 4 1m COST 3 AT {T}")), [1, 4, 1, 0, 60000]);
    assert_eq!(
        line(&mut c, &format!("RL.PERIOD p 4 1m ATMOST 9 DRYRUN AT {T}")),
        [1, 4, 0, 0, 60000, 1]
    );
    assert_eq!(line(&mut c, &format!("RL.SLIDE s 4 1m ATMOST 9 AT {T}")), [1, 4, 0, 0, 60000, 4]);
    assert_eq!(
        line(&mut c, &format!("RL.LEAKY l 4 1 1s NODELAY ATMOST 9 AT {T}")),
        [1, 4, 0, 0, 4000, 4]
    );
    assert_eq!(line(&mut c, &format!("RL.PERIOD p 4 1m ATMOST 9 AT {T}")), [1, 4, 0, 0, 60000, 1]);
}

#[test]
fn at_most_reaches_a_replica_as_the_state_it_left() {
    let (master, replica) = master_and_replica();
    let mut m = master.conn();
    line(&mut m, "RL.TOKEN r 10 1 1s COST 6");
    let reply = line(&mut m, "RL.TOKEN r 10 1 1s ATMOST 100");
    assert_eq!((reply[0], reply[2], reply[5]), (1, 0, 4));
    wait_in_sync(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(stored_state(&mut r, "r"), stored_state(&mut m, "r"));
    assert_eq!(pexpiretime(&mut r, "r"), pexpiretime(&mut m, "r"));
}

#[test]
fn at_most_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    for (args, text) in [
        (
            &["RL.TOKEN", "e", "10", "1", "1s", "ATMOST", "2", "COST", "1"][..],
            "ERR syntax error: ATMOST and COST cannot be combined",
        ),
        (
            &["RL.TOKEN", "e", "10", "1", "1s", "WAIT", "1s", "ATMOST", "2"],
            "ERR syntax error: ATMOST and WAIT cannot be combined",
        ),
        (
            &["RL.TOKEN", "e", "10", "1", "1s", "ATMOST", "-1"],
            "ERR ATMOST must be an integer between 0 and 1000000000000",
        ),
        (
            &["CL.THROTTLE", "e", "10", "1", "1", "1", "ATMOST", "2"],
            "ERR syntax error: unknown option 'ATMOST'",
        ),
        (
            &["RL.ALL", "1", "e", "TOKEN", "10", "1", "1s", "ATMOST", "2"],
            "ERR syntax error: unknown option 'ATMOST'",
        ),
    ] {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(error_text(&mut c, &bytes), text, "{args:?}");
    }
    assert_eq!(redis::cmd("EXISTS").arg("e").query::<i64>(&mut c).unwrap(), 0);
}
