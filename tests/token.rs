//! `RL.TOKEN`, `RL.PEEK`, `RL.INFO` against a real redis-server: replies, expiry, errors,
//! wrong types, metadata, counters.

mod common;
use common::*;

/// A fixed instant in the future (2096), so keys written with `AT` do not expire mid-test.
const T0: i64 = 4_000_000_000_000;

fn at(t: i64) -> String {
    t.to_string()
}

#[test]
fn readme_example_without_at() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ints(&mut c, &["RL.TOKEN", "user:1", "10", "1", "1s"]), [1, 10, 9, 0, 1000]);
    s.assert_alive();
}

#[test]
fn scripted_scenario_with_at() {
    let s = Server::start();
    let mut c = s.conn();
    let t = |c: &mut Connection, dt: i64, extra: &[&str]| {
        let when = at(T0 + dt);
        let mut args = vec!["RL.TOKEN", "k", "3", "1", "1s"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["AT", &when]);
        ints(c, &args)
    };
    assert_eq!(t(&mut c, 0, &[]), [1, 3, 2, 0, 1000]);
    assert_eq!(t(&mut c, 0, &["COST", "2"]), [1, 3, 0, 0, 3000]);
    assert_eq!(t(&mut c, 0, &[]), [0, 3, 0, 1000, 3000]);
    assert_eq!(t(&mut c, 400, &[]), [0, 3, 0, 600, 2600]);
    assert_eq!(t(&mut c, 1000, &[]), [1, 3, 0, 0, 3000]);
    assert_eq!(t(&mut c, 1000, &["COST", "4"]), [0, 3, 0, -1, 3000]);
    assert_eq!(t(&mut c, 2500, &["COST", "0"]), [1, 3, 1, 0, 1500]);
    // STEP on a fresh key: 2 tokens at once every second.
    let step = |c: &mut Connection, dt: i64, cost: &str| {
        ints(c, &["RL.TOKEN", "s", "4", "2", "1s", "STEP", "COST", cost, "AT", &at(T0 + dt)])
    };
    assert_eq!(step(&mut c, 0, "4"), [1, 4, 0, 0, 2000]);
    assert_eq!(step(&mut c, 999, "1"), [0, 4, 0, 1, 1001]);
    assert_eq!(step(&mut c, 1000, "1"), [1, 4, 1, 0, 2000]); // +2 at 1 s; 3 missing = 2 steps
    s.assert_alive();
}

#[test]
fn retry_after_is_exact() {
    let s = Server::start();
    let mut c = s.conn();
    // 3 tokens per 7 ms: fractional refill.
    let call = |c: &mut Connection, t: i64, cost: &str| {
        ints(c, &["RL.TOKEN", "r", "5", "3", "7", "COST", cost, "DRYRUN", "AT", &at(t)])
    };
    ints(&mut c, &["RL.TOKEN", "r", "5", "3", "7", "COST", "5", "AT", &at(T0)]);
    for cost in ["1", "2", "4", "5"] {
        let reply = call(&mut c, T0, cost);
        assert_eq!(reply[0], 0);
        let retry = reply[3];
        assert!(retry > 0);
        assert_eq!(call(&mut c, T0 + retry, cost)[0], 1, "cost {cost} at +{retry}");
        assert_eq!(call(&mut c, T0 + retry - 1, cost)[0], 0, "cost {cost} at +{}", retry - 1);
    }
    s.assert_alive();
}

#[test]
fn expiry_is_the_reset_instant() {
    let s = Server::start();
    let mut c = s.conn();
    let reply = ints(&mut c, &["RL.TOKEN", "e", "10", "1", "1s", "COST", "4", "AT", &at(T0)]);
    assert_eq!(reply[4], 4000);
    assert_eq!(pexpiretime(&mut c, "e"), T0 + 4000);
    // Without AT: expiry = the server's now + reset_after_ms, within the call's window.
    let before = unix_ms();
    let reply = ints(&mut c, &["RL.TOKEN", "live", "10", "1", "1s", "COST", "3"]);
    let after = unix_ms();
    let expiry = pexpiretime(&mut c, "live");
    assert!((before + reply[4]..=after + reply[4]).contains(&expiry), "{before} {expiry} {after}");
    // An AT in the past gives an expiry in the past: the key is gone at once.
    ints(&mut c, &["RL.TOKEN", "old", "10", "1", "1s", "AT", "1000"]);
    let exists: i64 = redis::cmd("EXISTS").arg("old").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    s.assert_alive();
}

#[test]
fn cost_zero_creates_no_key() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ints(&mut c, &["RL.TOKEN", "z", "10", "1", "1s", "COST", "0"]), [1, 10, 10, 0, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("z").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), "0");
    s.assert_alive();
}

#[test]
fn limited_and_dry_run_calls_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ints(&mut c, &["RL.TOKEN", "d", "2", "1", "1s", "COST", "2", "AT", &at(T0)]);
    let dump = |c: &mut Connection| -> Vec<u8> { redis::cmd("DUMP").arg("d").query(c).unwrap() };
    let (dump0, exp0) = (dump(&mut c), pexpiretime(&mut c, "d"));
    let dirty0 = info_field(&mut c, "persistence", "rdb_changes_since_last_save");
    let offset0 = info_field(&mut c, "replication", "master_repl_offset");
    // Limited.
    assert_eq!(ints(&mut c, &["RL.TOKEN", "d", "2", "1", "1s", "AT", &at(T0 + 10)])[0], 0);
    // Dry runs, admitted and not, with other parameters.
    assert_eq!(
        ints(&mut c, &["RL.TOKEN", "d", "2", "1", "1s", "DRYRUN", "AT", &at(T0 + 5000)])[0],
        1
    );
    assert_eq!(
        ints(&mut c, &["RL.TOKEN", "d", "9", "9", "1s", "DRYRUN", "AT", &at(T0 + 10)])[0],
        0
    );
    // Peeks.
    let _: Value = redis::cmd("RL.PEEK").arg("d").query(&mut c).unwrap();
    let _: Value = redis::cmd("RL.INFO").arg("d").query(&mut c).unwrap();
    assert_eq!(dump(&mut c), dump0);
    assert_eq!(pexpiretime(&mut c, "d"), exp0);
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), dirty0);
    assert_eq!(info_field(&mut c, "replication", "master_repl_offset"), offset0);
    s.assert_alive();
}

#[test]
fn each_admitted_request_is_one_change() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..5 {
        ints(&mut c, &["RL.TOKEN", "n", "100", "1", "1s", "AT", &at(T0 + i)]);
    }
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), "5");
    s.assert_alive();
}

#[test]
fn time_going_backwards_grants_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ints(&mut c, &["RL.TOKEN", "b", "5", "1", "1s", "COST", "5", "AT", &at(T0)]);
    // An hour earlier counts as no time passed.
    assert_eq!(
        ints(&mut c, &["RL.TOKEN", "b", "5", "1", "1s", "AT", &at(T0 - 3_600_000)]),
        [0, 5, 0, 1000, 5000]
    );
    // The server clock (far behind T0) likewise.
    assert_eq!(ints(&mut c, &["RL.TOKEN", "b", "5", "1", "1s"]), [0, 5, 0, 1000, 5000]);
    s.assert_alive();
}

#[test]
fn peek_and_info() {
    let s = Server::start();
    let mut c = s.conn();
    let nil: Value = redis::cmd("RL.PEEK").arg("none").query(&mut c).unwrap();
    assert_eq!(nil, Value::Nil);
    let nil: Value = redis::cmd("RL.INFO").arg("none").query(&mut c).unwrap();
    assert_eq!(nil, Value::Nil);
    ints(&mut c, &["RL.TOKEN", "p", "10", "3", "7", "COST", "4", "AT", &at(T0)]);
    // The server clock is before T0, so now' = T0: peek = DRYRUN COST 1 at T0.
    let peek: Vec<i64> = redis::cmd("RL.PEEK").arg("p").query(&mut c).unwrap();
    assert_eq!(peek, [1, 10, 5, 0, 12]); // 6 tokens, 1 taken → 5; 5 missing → ⌈5·7/3⌉ = 12 ms
    let state = stored_state(&mut c, "p");
    let expect = [
        ("algorithm", "token"),
        ("capacity", "10"),
        ("rate", "3"),
        ("period_ms", "7"),
        ("step", "0"),
        ("tokens", "6"),
        ("fraction", "0"),
        ("updated_ms", "4000000000000"),
    ];
    let expect: Vec<(String, String)> =
        expect.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(state, expect);
    s.assert_alive();
}

#[test]
fn info_is_a_map_in_resp3() {
    let s = Server::start();
    let mut c = s.conn_resp3();
    ints(&mut c, &["RL.TOKEN", "m", "10", "1", "1s", "AT", &at(T0)]);
    let v: Value = redis::cmd("RL.INFO").arg("m").query(&mut c).unwrap();
    let Value::Map(pairs) = v else { panic!("expected a map, got {v:?}") };
    assert_eq!(pairs[0].0, Value::BulkString(b"algorithm".to_vec()));
    assert!(pairs.iter().any(|(k, _)| *k == Value::BulkString(b"ttl_ms".to_vec())));
    // The limiting reply is the same five integers in RESP3.
    assert_eq!(
        ints(&mut c, &["RL.TOKEN", "m", "10", "1", "1s", "AT", &at(T0)]),
        [1, 10, 8, 0, 2000]
    );
    s.assert_alive();
}

#[test]
fn every_argument_error() {
    let s = Server::start();
    let mut c = s.conn();
    let count = |name: &str| format!("ERR {name} must be an integer between 1 and 1000000000000");
    let period_range = "ERR period must be a duration between 1ms and 315360000000ms".to_string();
    let invalid = |v: &str| {
        format!("ERR invalid duration '{v}' for period (use an integer with an optional unit ms, s, m, h or d)")
    };
    let cases: Vec<(Vec<&[u8]>, String)> = vec![
        (vec![b"RL.TOKEN"], "ERR wrong number of arguments for 'rl.token' command".into()),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1"],
            "ERR wrong number of arguments for 'rl.token' command".into(),
        ),
        (vec![b"RL.TOKEN", b"k", b"0", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"-1", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"1000000000001", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"1.5", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"\xff\xfe", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"99999999999999999999999999", b"1", b"1"], count("capacity")),
        (vec![b"RL.TOKEN", b"k", b"1", b"0", b"1"], count("rate")),
        (vec![b"RL.TOKEN", b"k", b"1", b"x", b"1"], count("rate")),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"abc"], invalid("abc")),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"1.5s"], invalid("1.5s")),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"\xff"], invalid("\\xff")),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"0"], period_range.clone()),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"-5s"], period_range.clone()),
        (vec![b"RL.TOKEN", b"k", b"1", b"1", b"3651d"], period_range),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"FOO"],
            "ERR syntax error: unknown option 'FOO'".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"\xc3\x28"],
            "ERR syntax error: unknown option '\\xc3('".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"ALIGN"],
            "ERR syntax error: unknown option 'ALIGN'".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"COST"],
            "ERR syntax error: COST needs a value".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"COST", b"1", b"cost", b"1"],
            "ERR syntax error: option COST given more than once".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"DRYRUN", b"dryrun"],
            "ERR syntax error: option DRYRUN given more than once".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"COST", b"-1"],
            "ERR COST must be an integer between 0 and 1000000000000".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"AT", b"-1"],
            "ERR AT must be an integer between 0 and 253402300799999".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1", b"1", b"1", b"AT", b"253402300800000"],
            "ERR AT must be an integer between 0 and 253402300799999".into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"1000000000000", b"1", b"10"],
            "ERR parameters give a full reset time (capacity × period / rate) above 100 years"
                .into(),
        ),
        (
            vec![b"RL.TOKEN", b"k", b"11", b"1", b"3650d", b"STEP"],
            "ERR parameters give a full reset time (⌈capacity / rate⌉ × period) above 100 years"
                .into(),
        ),
        (
            vec![
                b"RL.TOKEN",
                b"k",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
                b"1",
            ],
            "ERR syntax error: too many arguments".into(),
        ),
        (vec![b"RL.PEEK"], "ERR wrong number of arguments for 'rl.peek' command".into()),
        (
            vec![b"RL.PEEK", b"a", b"b"],
            "ERR wrong number of arguments for 'rl.peek' command".into(),
        ),
        (
            vec![b"RL.INFO", b"a", b"b"],
            "ERR wrong number of arguments for 'rl.info' command".into(),
        ),
        (
            vec![b"RL.RESTORE", b"a", b"garbage"],
            "ERR invalid RL.RESTORE payload: corrupt limiter state: unknown encoding version"
                .into(),
        ),
    ];
    for (args, want) in cases {
        assert_eq!(error_text(&mut c, &args), want, "{args:?}");
    }
    // None of them created anything.
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 0);
    // Every error is counted, and the code shows in errorstats as ERR.
    let errors: i64 = info_field(&mut c, "ratelimit", "ratelimit_token_errors").parse().unwrap();
    assert!(errors >= 25, "{errors}");
    assert!(info_field(&mut c, "errorstats", "errorstat_ERR").starts_with("count="));
    s.assert_alive();
}

#[test]
fn binary_keys_work() {
    let s = Server::start();
    let mut c = s.conn();
    let key: &[u8] = b"\xff\x00\xfe key\r\n";
    let reply: Vec<i64> =
        cmd(&[b"RL.TOKEN", key, b"5", b"1", b"1s", b"AT", b"4000000000000"]).query(&mut c).unwrap();
    assert_eq!(reply, [1, 5, 4, 0, 1000]);
    let peek: Vec<i64> = cmd(&[b"RL.PEEK", key]).query(&mut c).unwrap();
    assert_eq!(peek, [1, 5, 3, 0, 2000]);
    s.assert_alive();
}

#[test]
fn wrong_types_are_named_and_untouched() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("RPUSH").arg("list").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("HSET").arg("hash").arg("f").arg("v").query(&mut c).unwrap();
    let _: () = redis::cmd("ZADD").arg("zset").arg(1).arg("v").query(&mut c).unwrap();
    for (key, kind) in [("str", "string"), ("list", "list"), ("hash", "hash"), ("zset", "zset")] {
        let want = format!("WRONGTYPE key holds a {kind} value, not a rate limiter");
        for command in [
            vec![b"RL.TOKEN".as_slice(), key.as_bytes(), b"1", b"1", b"1"],
            vec![b"RL.TOKEN", key.as_bytes(), b"1", b"1", b"1", b"DRYRUN"],
            vec![b"RL.PEEK", key.as_bytes()],
            vec![b"RL.INFO", key.as_bytes()],
        ] {
            assert_eq!(error_text(&mut c, &command), want);
        }
    }
    let v: String = redis::cmd("GET").arg("str").query(&mut c).unwrap();
    assert_eq!(v, "v");
    assert_eq!(redis::cmd("TYPE").arg("str").query::<String>(&mut c).unwrap(), "string");
    // A minute-long period: the key must not expire before TYPE reads it on a loaded machine.
    ints(&mut c, &["RL.TOKEN", "rl", "1", "1", "1m"]);
    assert_eq!(redis::cmd("TYPE").arg("rl").query::<String>(&mut c).unwrap(), "ratelimit");
    s.assert_alive();
}

#[test]
fn command_metadata() {
    let s = Server::start();
    let mut c = s.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.TOKEN")
        .arg("k")
        .arg("10")
        .arg("1")
        .arg("1s")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["k"]);
    let info = format!("{:?}", run(&mut c, &["COMMAND", "INFO", "rl.token", "rl.peek"]).unwrap());
    for expected in [
        "rl.token", "int(-5)", "write", "denyoom", "fast", "update", "rl.peek", "int(2)",
        "readonly",
    ] {
        assert!(info.contains(expected), "{expected} missing in {info}");
    }
    let flags =
        format!("{:?}", run(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "RL.PEEK", "k"]).unwrap());
    assert!(flags.contains("RO") && !flags.contains("RW"), "{flags}");
    let flags = format!(
        "{:?}",
        run(&mut c, &["COMMAND", "GETKEYSANDFLAGS", "RL.TOKEN", "k", "1", "1", "1"]).unwrap()
    );
    assert!(flags.contains("RW") && flags.contains("update"), "{flags}");
    let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", "rl.token"]).unwrap());
    assert!(docs.contains("Token bucket"), "{docs}");
    for expected in ["capacity", "\"COST\"", "\"STEP\"", "\"DRYRUN\"", "unix-time", "optional"] {
        assert!(docs.contains(expected), "{expected} missing in {docs}");
    }
    // Every argument says what it is.
    for summary in ["most permits held at once", "permits this request takes", "locks the key out"]
    {
        assert!(docs.contains(summary), "{summary} missing in {docs}");
    }
    let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", "rl.leaky"]).unwrap());
    assert!(
        docs.contains("oneof") && docs.contains("\"NODELAY\"") && docs.contains("\"DELAY\""),
        "{docs}"
    );
    s.assert_alive();
}

#[test]
fn info_section_counts_calls() {
    let s = Server::start();
    let mut c = s.conn();
    ints(&mut c, &["RL.TOKEN", "i", "1", "1", "1s", "AT", &at(T0)]);
    ints(&mut c, &["RL.TOKEN", "i", "1", "1", "1s", "AT", &at(T0)]);
    let _ = run(&mut c, &["RL.TOKEN", "i", "x", "1", "1s"]);
    let _ = run(&mut c, &["RL.PEEK", "i"]);
    let field = |c: &mut Connection, f: &str| info_field(c, "ratelimit", &format!("ratelimit_{f}"));
    assert_eq!(field(&mut c, "token_calls"), "3");
    assert_eq!(field(&mut c, "token_admitted"), "1");
    assert_eq!(field(&mut c, "token_limited"), "1");
    assert_eq!(field(&mut c, "token_errors"), "1");
    assert_eq!(field(&mut c, "peek_calls"), "1");
    s.assert_alive();
}

/// `ratelimit.slide-log-max` bounds the entries an exact log can come to hold, `min(limit,
/// window in ms)`, not the limit: limits' `1000000 per 2 seconds` and `200000 per day` work on
/// a module loaded without arguments, a log that can really grow past the maximum does not.
#[test]
fn slide_log_max_bounds_the_log_entries_not_the_limit() {
    let s = Server::start();
    let mut c = s.conn();
    let v: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("ratelimit.slide-log-max").query(&mut c).unwrap();
    assert_eq!(v, ["ratelimit.slide-log-max", "1000000"]);
    for (limit, window) in [("1000000", "2s"), ("200000", "1d"), ("1000000000000", "1000s")] {
        let d = run(&mut c, &["RL.SLIDE", "ok", limit, window]);
        assert!(
            matches!(&d, Ok(redis::Value::Array(v)) if v.len() == 5),
            "{limit} per {window}: {d:?}"
        );
    }
    let huge = run(&mut c, &["RL.SLIDE", "huge", "2000000", "1d"]).unwrap_err();
    assert!(format!("{huge:?}").contains("ratelimit.slide-log-max"), "{huge:?}");
    assert!(run(&mut c, &["RL.SLIDE", "huge", "2000000", "1d", "BUCKETS", "24"]).is_ok());
    // A full log of a million per 2 s holds at most one entry per ms: filled as fast as the
    // client can send, it stays within 2 000 entries and keeps admitting.
    let mut pipe = redis::pipe();
    for _ in 0..5000 {
        pipe.cmd("RL.SLIDE").arg("fill").arg(1_000_000).arg("2s");
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut c).unwrap();
    assert!(replies.iter().all(|r| r.first() == Some(&1)));
    let entries: u64 = stored_state(&mut c, "fill")
        .into_iter()
        .find_map(|(k, v)| (k == "entries").then(|| v.parse().unwrap()))
        .unwrap();
    assert!((1..=2000).contains(&entries), "{entries}");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.slide-log-max")
        .arg("1000")
        .query(&mut c)
        .unwrap();
    assert!(run(&mut c, &["RL.SLIDE", "k", "5000", "1s"]).is_ok());
    assert!(run(&mut c, &["RL.SLIDE", "k", "1000", "1d"]).is_ok());
    assert!(run(&mut c, &["RL.SLIDE", "k", "1001", "1001ms"]).is_err());
    s.assert_alive();
}

#[test]
fn slide_log_max_is_configurable() {
    let s = Server::start_full(&[], &["slide-log-max", "50000"]);
    let mut c = s.conn();
    let v: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("ratelimit.slide-log-max").query(&mut c).unwrap();
    assert_eq!(v, ["ratelimit.slide-log-max", "50000"]);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.slide-log-max")
        .arg("7")
        .query(&mut c)
        .unwrap();
    let v: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("ratelimit.slide-log-max").query(&mut c).unwrap();
    assert_eq!(v[1], "7");
    assert!(run(&mut c, &["CONFIG", "SET", "ratelimit.slide-log-max", "0"]).is_err());
    drop(c);
    let s2 = Server::start_with(&["--ratelimit.slide-log-max", "123"]);
    let mut c2 = s2.conn();
    let v: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("ratelimit.slide-log-max").query(&mut c2).unwrap();
    assert_eq!(v[1], "123");
    s.assert_alive();
    s2.assert_alive();
}

/// Admitted changes are announced as keyspace events named after the command (module class
/// `d`); limited calls, dry runs and peeks announce nothing.
#[test]
fn admitted_changes_are_keyspace_events() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () =
        redis::cmd("CONFIG").arg(&["SET", "notify-keyspace-events", "Kd"]).query(&mut c).unwrap();
    let mut listener = s.conn();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").unwrap();
    pubsub.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
    line(&mut c, &format!("RL.TOKEN ev 1 1 1s AT {T0}"));
    line(&mut c, &format!("RL.TOKEN ev 1 1 1s AT {T0}")); // limited
    line(&mut c, &format!("RL.TOKEN ev 1 1 1s DRYRUN AT {}", T0 + 5000));
    let _: Value = redis::cmd("RL.PEEK").arg("ev").query(&mut c).unwrap();
    line(&mut c, &format!("CL.THROTTLE ev2 1 1 1 AT {T0}"));
    let mut events = Vec::new();
    while let Ok(msg) = pubsub.get_message() {
        let payload: String = msg.get_payload().unwrap();
        events.push((msg.get_channel_name().to_string(), payload));
    }
    assert_eq!(
        events,
        [
            ("__keyspace@0__:ev".to_string(), "rl.token".to_string()),
            ("__keyspace@0__:ev2".to_string(), "cl.throttle".to_string()),
        ]
    );
    s.assert_alive();
}
