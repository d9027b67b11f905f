//! `RL.CHARGE` against a real server: a debt past the limit refused until paid with an exact
//! `retry_after_ms`, the expiry moving to when it is paid, every algorithm (debt or a
//! refusal that changes nothing), nil for nothing live, persistence of a value in debt,
//! propagation to a replica, and bad arguments.

mod common;
use common::*;

const T: i64 = 4_000_000_000_000;

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().unwrap()
}

fn charge(con: &mut Connection, key: &str, count: u64, at: i64) -> Option<Vec<i64>> {
    redis::cmd("RL.CHARGE").arg(key).arg(count).arg("AT").arg(at).query(con).unwrap()
}

fn exists(con: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

fn dump(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(con).unwrap()
}

#[test]
fn a_charge_past_the_limit_is_a_debt_paid_at_the_refill_rate() {
    let s = Server::start();
    let mut c = s.conn();
    // 5 permits, one back per second: reserve all 5, then the call used 7.
    line(&mut c, &format!("CL.THROTTLE g 4 1 1 5 AT {T}"));
    let before = changes(&mut c);
    assert_eq!(charge(&mut c, "g", 2, T), Some(vec![0, 5, 0, 3000, 7000]));
    assert_eq!(changes(&mut c), before + 1);
    assert_eq!(pexpiretime(&mut c, "g"), T + 7000, "the key lives until the debt is paid");
    // Refused exactly until the debt and one permit are paid back.
    assert_eq!(line(&mut c, &format!("CL.THROTTLE g 4 1 1 1 AT {}", T + 2999))[0], 1);
    assert_eq!(line(&mut c, &format!("CL.THROTTLE g 4 1 1 1 AT {}", T + 3000))[0], 0);
    // A refund after a charge gives back from the debt first.
    // TAT T + 8000, charged 4 more: 9 s of debt at T + 3000, 4 s beyond the burst.
    assert_eq!(charge(&mut c, "g", 4, T + 3000), Some(vec![0, 5, 0, 5000, 9000]));
    assert_eq!(pexpiretime(&mut c, "g"), T + 12000);
    let refunded: Vec<i64> =
        redis::cmd("RL.REFUND").arg("g").arg(3).arg("AT").arg(T + 3000).query(&mut c).unwrap();
    assert_eq!(refunded, vec![0, 5, 0, 2000, 6000]);
    assert_eq!(pexpiretime(&mut c, "g"), T + 9000);
}

#[test]
fn debt_on_every_algorithm_that_takes_it() {
    let s = Server::start();
    let mut c = s.conn();
    // Token bucket: 2 tokens below empty, 1 token back per second (RL.INFO shows -2).
    line(&mut c, &format!("RL.TOKEN t 10 1 1s COST 10 AT {T}"));
    assert_eq!(charge(&mut c, "t", 2, T), Some(vec![0, 10, 0, 3000, 12000]));
    assert_eq!(pexpiretime(&mut c, "t"), T + 12000);
    assert!(stored_state(&mut c, "t").contains(&("tokens".into(), "-2".into())));
    assert_eq!(line(&mut c, &format!("RL.TOKEN t 10 1 1s AT {}", T + 2999))[0], 0);
    assert_eq!(line(&mut c, &format!("RL.TOKEN t 10 1 1s AT {}", T + 3000))[0], 1);
    // Step refill: 5 tokens every 10 s; 3 below empty wait for the next step.
    line(&mut c, &format!("RL.TOKEN ts 5 5 10s STEP COST 5 AT {T}"));
    assert_eq!(charge(&mut c, "ts", 3, T + 1000), Some(vec![0, 5, 0, 9000, 19000]));
    // Fixed window: over the limit for the rest of the window, forgotten when it ends.
    line(&mut c, &format!("RL.PERIOD p 10 1s COST 10 AT {T}"));
    assert_eq!(charge(&mut c, "p", 5, T + 200), Some(vec![0, 10, 0, 800, 800]));
    assert_eq!(pexpiretime(&mut c, "p"), T + 1000);
    // Leaky bucket: 12 units in a bucket of 10 draining 1 per second.
    line(&mut c, &format!("RL.LEAKY l 10 1 1s NODELAY COST 10 AT {T}"));
    assert_eq!(charge(&mut c, "l", 2, T), Some(vec![0, 10, 0, 3000, 12000]));
    assert_eq!(pexpiretime(&mut c, "l"), T + 12000);
    let refused = line(&mut c, &format!("RL.LEAKY l 10 1 1s NODELAY AT {}", T + 2999));
    assert_eq!(refused[0], 0);
    assert_eq!(line(&mut c, &format!("RL.LEAKY l 10 1 1s NODELAY AT {}", T + 3000))[0], 1);
    // A value in debt persists (DUMP/RESTORE: the codec's debt version) with its expiry.
    line(&mut c, &format!("CL.THROTTLE g 0 1 60 AT {T}"));
    charge(&mut c, "g", 10, T).unwrap();
    let (payload, expiry) = (dump(&mut c, "g"), pexpiretime(&mut c, "g"));
    assert_eq!(expiry, T + 11 * 60_000);
    let _: () = redis::cmd("DEL").arg("g").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("g")
        .arg(expiry)
        .arg(&payload)
        .arg("ABSTTL")
        .query(&mut c)
        .unwrap();
    assert_eq!(dump(&mut c, "g"), payload);
    // (The server clock is before T: no time has passed for the limiter.)
    assert_eq!(line(&mut c, "RL.PEEK g"), vec![0, 1, 0, 660_000, 660_000]);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(dump(&mut c, "g"), payload);
    assert_eq!(pexpiretime(&mut c, "g"), expiry);
}

#[test]
fn algorithms_without_debt_and_keys_without_a_limiter_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("RL.SLIDE s 10 1s COST 10 AT {T}"));
    line(&mut c, &format!("RL.SLIDE b 10 1s BUCKETS 10 COST 10 AT {T}"));
    let before = (changes(&mut c), dump(&mut c, "b"), dump(&mut c, "s"));
    for key in ["s", "b"] {
        let text = error_text(&mut c, &[b"RL.CHARGE", key.as_bytes(), b"1"]);
        let expected = "WRONGTYPE key holds a slide limiter, which takes no debt";
        assert!(text.starts_with(expected), "{text}");
    }
    assert_eq!((changes(&mut c), dump(&mut c, "b"), dump(&mut c, "s")), before);
    // Missing, or expired: nil, nothing created (no stored parameters to charge under).
    assert_eq!(charge(&mut c, "missing", 3, T), None);
    line(&mut c, &format!("RL.PERIOD p 10 1s AT {T}"));
    assert_eq!(charge(&mut c, "p", 3, T + 1000), None);
    assert!(!exists(&mut c, "missing"));
    assert_eq!(changes(&mut c), before.0 + 1, "only the RL.PERIOD call");
}

#[test]
fn charge_errors_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, &format!("CL.THROTTLE k 9 1 1 5 AT {T}"));
    let _: () = redis::cmd("SET").arg("str").arg("x").query(&mut c).unwrap();
    let before = (changes(&mut c), pexpiretime(&mut c, "k"), dump(&mut c, "k"));
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"RL.CHARGE", b"k", b"0"], "ERR count must be an integer between 1 and 1000000000000"),
        (&[b"RL.CHARGE", b"k", b"1000000000001"], "ERR count must be an integer between 1"),
        (&[b"RL.CHARGE", b"k", b"-1"], "ERR count must be an integer"),
        (&[b"RL.CHARGE", b"k", b"\xff\xfe"], "ERR count must be an integer"),
        (&[b"RL.CHARGE", b"k", b"1", b"\xff"], "ERR syntax error"),
        (&[b"RL.CHARGE", b"k", b"1", b"COST", b"1"], "ERR syntax error: unknown option 'COST'"),
        (&[b"RL.CHARGE", b"k", b"1", b"AT"], "ERR syntax error: AT needs a value"),
        (&[b"RL.CHARGE", b"k"], "ERR wrong number of arguments"),
        (&[b"RL.CHARGE", b"str", b"1"], "WRONGTYPE key holds a string value, not a rate limiter"),
        // 10^12 permits of debt at most (and 100 years to pay it).
        (&[b"RL.CHARGE", b"k", b"1000000000000"], "ERR the charge would leave a debt beyond"),
    ];
    for (args, expected) in cases {
        let text = error_text(&mut c, args);
        assert!(text.starts_with(expected), "{args:?}: {text}");
    }
    assert_eq!((changes(&mut c), pexpiretime(&mut c, "k"), dump(&mut c, "k")), before);
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_charge_errors"), "9");
}

#[test]
fn a_charge_reaches_the_replica_as_the_same_value() {
    let (master, replica) = master_and_replica();
    let mut m = master.conn();
    let now = unix_ms();
    line(&mut m, "CL.THROTTLE g 4 1 60 5");
    line(&mut m, "RL.LEAKY l 10 1 1m COST 10");
    line(&mut m, "RL.PERIOD p 10 1h COST 10");
    line(&mut m, "RL.TOKEN t 10 1 1m COST 10");
    for key in ["g", "l", "p", "t"] {
        let reply = redis::cmd("RL.CHARGE").arg(key).arg(3).query::<Vec<i64>>(&mut m).unwrap();
        assert_eq!(reply[0], 0, "{key} in debt refuses");
    }
    wait_in_sync(&master, &replica);
    let mut r = replica.conn();
    for key in ["g", "l", "p", "t"] {
        let digest = |con: &mut Connection| -> Vec<String> {
            redis::cmd("DEBUG").arg("DIGEST-VALUE").arg(key).query(con).unwrap()
        };
        assert_eq!(digest(&mut r), digest(&mut m), "{key}");
        assert_eq!(pexpiretime(&mut r, key), pexpiretime(&mut m, key), "{key}");
        assert!(pexpiretime(&mut m, key) > now, "{key}");
    }
    // On the replica the command is refused like any write.
    let text = error_text(&mut r, &[b"RL.CHARGE", b"g", b"1"]);
    assert!(text.starts_with("READONLY"), "{text}");
}

/// The LLM-gateway example of docs/policies.md, "Settle": reserve by policy, refund, charge.
#[test]
fn settle_by_policy_both_ways() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("RL.POLICY")
        .arg(&["SET", "llm", "TOKEN", "100000", "100000", "1m"])
        .query(&mut c)
        .unwrap();
    let hit = |c: &mut Connection, cost: u64, at: i64| -> Vec<i64> {
        let args = ["RL.HIT", "llm", "llm:u42", "COST", &cost.to_string(), "AT", &at.to_string()];
        ints(c, &args)
    };
    assert_eq!(hit(&mut c, 4096, T)[0], 1);
    let refunded: Vec<i64> =
        redis::cmd("RL.REFUND").arg("llm:u42").arg(2886).arg("AT").arg(T).query(&mut c).unwrap();
    assert_eq!(refunded[2], 100_000 - 1210 - 1, "what a request of 1 would leave");
    // Reserve nearly everything, then the call used 6 000 more than that: past the limit.
    assert_eq!(hit(&mut c, 98_790, T)[0], 1);
    let charged = charge(&mut c, "llm:u42", 6000, T).unwrap();
    // 6 000 tokens below empty, 100 000 back a minute (0.6 ms per token): one token is
    // free again after 6 001 have come back.
    assert_eq!(charged, vec![0, 100_000, 0, 3601, 63_600]);
    assert_eq!(hit(&mut c, 1, T + 3600)[0], 0);
    assert_eq!(hit(&mut c, 1, T + 3601)[0], 1);
}
