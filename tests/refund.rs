//! `RL.REFUND` against a real server: every algorithm, the reply, the expiry moving earlier,
//! deletion at the initial state, nil, errors that change nothing, propagation counts.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

fn refund(con: &mut Connection, key: &str, count: u64, at: i64) -> Option<Vec<i64>> {
    redis::cmd("RL.REFUND").arg(key).arg(count).arg("AT").arg(at).query(con).unwrap()
}

fn exists(con: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

#[test]
fn refund_gives_permits_back_and_moves_the_expiry_earlier() {
    let s = Server::start();
    let mut c = s.conn();
    // Reserve 8 of 10 tokens (1 per second back), settle at 3: refund 5.
    line(&mut c, &format!("RL.TOKEN llm:u1 10 1 1s COST 8 AT {T}"));
    assert_eq!(pexpiretime(&mut c, "llm:u1"), T + 8000);
    let before = changes(&mut c);
    assert_eq!(refund(&mut c, "llm:u1", 5, T + 500), Some(vec![1, 10, 6, 0, 3500]));
    assert_eq!(changes(&mut c), before + 1);
    assert_eq!(pexpiretime(&mut c, "llm:u1"), T + 3000);
    let state = stored_state(&mut c, "llm:u1");
    assert!(state.contains(&("tokens".into(), "7".into())), "{state:?}");
    assert!(state.contains(&("updated_ms".into(), (T + 500).to_string())), "{state:?}");
    // More than was taken: capped at a fresh limiter, whose answer it replies; key deleted.
    assert_eq!(refund(&mut c, "llm:u1", 1000, T + 600), Some(vec![1, 10, 9, 0, 1000]));
    assert!(!exists(&mut c, "llm:u1"));
    // Missing key: nil, nothing changes.
    let before = changes(&mut c);
    assert_eq!(refund(&mut c, "llm:u1", 1, T + 700), None);
    assert_eq!(changes(&mut c), before);
}

#[test]
fn refund_works_for_every_algorithm() {
    let s = Server::start();
    let mut c = s.conn();
    let cases = [
        // (the reservation, refund count, reply right after the refund)
        (format!("RL.PERIOD p 10 1s COST 7 AT {T}"), 4, vec![1, 10, 6, 0, 1000]),
        (format!("RL.SLIDE s 10 1s COST 7 AT {T}"), 4, vec![1, 10, 6, 0, 1000]),
        (format!("RL.SLIDE b 10 1s BUCKETS 10 COST 7 AT {T}"), 4, vec![1, 10, 6, 0, 1099]),
        (format!("RL.LEAKY l 10 1 1s NODELAY COST 7 AT {T}"), 4, vec![1, 10, 6, 0, 4000]),
        (format!("CL.THROTTLE g 9 1 1 7 AT {T}"), 4, vec![1, 10, 6, 0, 4000]),
    ];
    for (reservation, count, expected) in cases {
        let key = reservation.split(' ').nth(1).unwrap().to_string();
        line(&mut c, &reservation);
        assert_eq!(refund(&mut c, &key, count, T), Some(expected), "{reservation}");
        // Everything back: the key is gone.
        refund(&mut c, &key, 100, T).unwrap();
        assert!(!exists(&mut c, &key), "{reservation}");
    }
    // An exact sliding log gives back its newest permits first, splitting an entry.
    line(&mut c, &format!("RL.SLIDE log 10 1s COST 2 AT {T}"));
    line(&mut c, &format!("RL.SLIDE log 10 1s COST 3 AT {}", T + 100));
    refund(&mut c, "log", 4, T + 200).unwrap();
    assert_eq!(pexpiretime(&mut c, "log"), T + 1000, "dated by its newest remaining entry");
    assert_eq!(line(&mut c, "RL.PEEK log")[2], 8);
}

#[test]
fn a_full_limiter_has_nothing_to_give_back() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 10 1 1s AT {T}"));
    let (before, dump) = (changes(&mut c), redis::cmd("DUMP").arg("k").query::<Vec<u8>>(&mut c));
    // Full again at T + 1000: nil (the limiter has reset, nothing to refund).
    assert_eq!(refund(&mut c, "k", 1, T + 1000), None);
    assert_eq!(changes(&mut c), before);
    assert_eq!(redis::cmd("DUMP").arg("k").query::<Vec<u8>>(&mut c), dump);
}

#[test]
fn refund_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.TOKEN k 10 1 1s COST 5 AT {T}"));
    let _: () = redis::cmd("SET").arg("str").arg("x").query(&mut c).unwrap();
    let before = (changes(&mut c), pexpiretime(&mut c, "k"));
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"RL.REFUND", b"k", b"0"], "ERR count must be an integer between 1 and 1000000000000"),
        (&[b"RL.REFUND", b"k", b"1000000000001"], "ERR count must be an integer between 1"),
        (&[b"RL.REFUND", b"k", b"-1"], "ERR count must be an integer"),
        (&[b"RL.REFUND", b"k", b"x"], "ERR count must be an integer"),
        (&[b"RL.REFUND", b"k", b"\xff"], "ERR count must be an integer"),
        (&[b"RL.REFUND", b"k", b"1", b"COST", b"1"], "ERR syntax error: unknown option 'COST'"),
        (&[b"RL.REFUND", b"k", b"1", b"AT"], "ERR syntax error: AT needs a value"),
        (&[b"RL.REFUND", b"k", b"1", b"AT", b"-5"], "ERR AT must be an integer"),
        (&[b"RL.REFUND", b"k"], "ERR wrong number of arguments"),
        (&[b"RL.REFUND", b"str", b"1"], "WRONGTYPE key holds a string value, not a rate limiter"),
    ];
    for (args, expected) in cases {
        let text = error_text(&mut c, args);
        assert!(text.starts_with(expected), "{args:?}: {text}");
    }
    assert_eq!((changes(&mut c), pexpiretime(&mut c, "k")), before);
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_refund_errors"), "9");
}
