//! `RL.PERIOD`, `RL.LEAKY`, `CL.THROTTLE` (and cross-algorithm rules) against a real
//! redis-server: scripted scenarios with `AT`, expiry, errors, wrong types.

mod common;
use common::*;

/// 2100-01-01T00:00:00Z: a UTC midnight far enough ahead that keys do not expire mid-test.
const DAY0: i64 = 4_102_444_800_000;
const HOUR: i64 = 3_600_000;

fn t(ms: i64) -> String {
    ms.to_string()
}

#[test]
fn fixed_window_scenario() {
    let s = Server::start();
    let mut c = s.conn();
    let p = |c: &mut Connection, at: i64, cost: &str| {
        ints(c, &["RL.PERIOD", "w", "3", "1s", "COST", cost, "AT", &t(DAY0 + at)])
    };
    assert_eq!(p(&mut c, 0, "0"), [1, 3, 3, 0, 0]);
    assert_eq!(p(&mut c, 10, "1"), [1, 3, 2, 0, 1000]); // the window starts at the first admission
    assert_eq!(p(&mut c, 110, "2"), [1, 3, 0, 0, 900]);
    assert_eq!(p(&mut c, 210, "1"), [0, 3, 0, 800, 800]);
    assert_eq!(p(&mut c, 210, "4"), [0, 3, 0, -1, 800]);
    assert_eq!(p(&mut c, 1009, "1"), [0, 3, 0, 1, 1]);
    assert_eq!(p(&mut c, 1010, "1"), [1, 3, 2, 0, 1000]); // a new window
    assert_eq!(pexpiretime(&mut c, "w"), DAY0 + 2010);
    s.assert_alive();
}

#[test]
fn aligned_windows_follow_the_local_calendar() {
    let s = Server::start();
    let mut c = s.conn();
    // 5 per calendar day in UTC+8: at 00:00Z it is 08:00 local, so the day ends at 16:00Z.
    let r = ints(&mut c, &["RL.PERIOD", "sms:+8", "5", "1d", "ALIGN", "8h", "AT", &t(DAY0)]);
    assert_eq!(r, [1, 5, 4, 0, 16 * HOUR]);
    assert_eq!(pexpiretime(&mut c, "sms:+8"), DAY0 + 16 * HOUR);
    // UTC-5: at 00:00Z it is 19:00 local the day before; the day ends at 05:00Z.
    let r = ints(&mut c, &["RL.PERIOD", "sms:-5", "5", "1d", "ALIGN", "-5h", "AT", &t(DAY0)]);
    assert_eq!(r, [1, 5, 4, 0, 5 * HOUR]);
    // Bare ALIGN means UTC, and may be followed by options.
    let r = ints(
        &mut c,
        &["RL.PERIOD", "utc", "5", "1h", "ALIGN", "COST", "2", "AT", &t(DAY0 + 90_000)],
    );
    assert_eq!(r, [1, 5, 3, 0, HOUR - 90_000]);
    // Exhausted until the next local midnight, then a fresh day.
    ints(
        &mut c,
        &["RL.PERIOD", "sms:+8", "5", "1d", "ALIGN", "8h", "COST", "4", "AT", &t(DAY0 + HOUR)],
    );
    let r =
        ints(&mut c, &["RL.PERIOD", "sms:+8", "5", "1d", "ALIGN", "8h", "AT", &t(DAY0 + 2 * HOUR)]);
    assert_eq!(r, [0, 5, 0, 14 * HOUR, 14 * HOUR]);
    let r = ints(
        &mut c,
        &["RL.PERIOD", "sms:+8", "5", "1d", "ALIGN", "8h", "AT", &t(DAY0 + 16 * HOUR)],
    );
    assert_eq!(r, [1, 5, 4, 0, 24 * HOUR]);
    s.assert_alive();
}

#[test]
fn leaky_bucket_shapes_and_meters() {
    let s = Server::start();
    let mut c = s.conn();
    let q = |c: &mut Connection, key: &str, at: i64, extra: &[&str]| {
        let when = t(DAY0 + at);
        let mut args = vec!["RL.LEAKY", key, "3", "1", "1s"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["AT", &when]);
        ints(c, &args)
    };
    // Delay mode: each admitted request waits for the water ahead of it.
    assert_eq!(q(&mut c, "queue", 0, &[]), [1, 3, 2, 0, 1000]);
    assert_eq!(q(&mut c, "queue", 0, &[]), [1, 3, 1, 1000, 2000]);
    assert_eq!(q(&mut c, "queue", 0, &[]), [1, 3, 0, 2000, 3000]);
    assert_eq!(q(&mut c, "queue", 0, &[]), [0, 3, 0, 1000, 3000]);
    assert_eq!(q(&mut c, "queue", 1000, &["COST", "0"]), [1, 3, 1, 2000, 2000]);
    assert_eq!(q(&mut c, "queue", 1000, &[]), [1, 3, 0, 2000, 3000]);
    assert_eq!(pexpiretime(&mut c, "queue"), DAY0 + 4000);
    // NODELAY: a meter; admitted requests go at once.
    assert_eq!(q(&mut c, "meter", 0, &["NODELAY"]), [1, 3, 2, 0, 1000]);
    assert_eq!(q(&mut c, "meter", 0, &["NODELAY", "COST", "2"]), [1, 3, 0, 0, 3000]);
    assert_eq!(q(&mut c, "meter", 500, &["NODELAY"]), [0, 3, 0, 500, 2500]);
    // DELAY 1: one unit of water ahead is tolerated without delay.
    assert_eq!(q(&mut c, "burst", 0, &["DELAY", "1"]), [1, 3, 2, 0, 1000]);
    assert_eq!(q(&mut c, "burst", 0, &["DELAY", "1"]), [1, 3, 1, 0, 2000]);
    assert_eq!(q(&mut c, "burst", 0, &["DELAY", "1"]), [1, 3, 0, 1000, 3000]);
    s.assert_alive();
}

#[test]
fn throttle_matches_redis_cell() {
    let s = Server::start();
    let mut c = s.conn();
    let cell = |c: &mut Connection, at: i64, extra: &[&str]| {
        let when = t(DAY0 + at);
        let mut args = vec!["CL.THROTTLE", "user123", "15", "30", "60"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["AT", &when]);
        ints(c, &args)
    };
    // redis-cell's README example: 30 per minute (one per 2 s), burst 15.
    assert_eq!(cell(&mut c, 0, &["1"]), [0, 16, 15, -1, 2]);
    for _ in 0..15 {
        assert_eq!(cell(&mut c, 0, &[])[0], 0);
    }
    assert_eq!(cell(&mut c, 0, &[]), [1, 16, 0, 2, 32]);
    assert_eq!(cell(&mut c, 0, &["17"]), [1, 16, 0, -1, 32]);
    assert_eq!(cell(&mut c, 1999, &[]), [1, 16, 0, 1, 31]);
    assert_eq!(cell(&mut c, 2000, &[]), [0, 16, 0, -1, 32]);
    assert_eq!(cell(&mut c, 2000, &["0"]), [0, 16, 0, -1, 32]);
    // The key expires at the theoretical arrival time.
    assert_eq!(pexpiretime(&mut c, "user123"), DAY0 + 2000 + 32_000);
    // RL.PEEK shows a gcra key in the RL layout, in ms.
    let peek: Vec<i64> = redis::cmd("RL.PEEK").arg("user123").query(&mut c).unwrap();
    assert_eq!(peek, [0, 16, 0, 2000, 32_000]);
    s.assert_alive();
}

#[test]
fn sliding_log_is_exact() {
    let s = Server::start();
    let mut c = s.conn();
    let w = |c: &mut Connection, at: i64, cost: &str| {
        ints(c, &["RL.SLIDE", "log", "3", "1s", "COST", cost, "AT", &t(DAY0 + at)])
    };
    assert_eq!(w(&mut c, 0, "1"), [1, 3, 2, 0, 1000]);
    assert_eq!(w(&mut c, 100, "1"), [1, 3, 1, 0, 1000]);
    assert_eq!(w(&mut c, 200, "1"), [1, 3, 0, 0, 1000]);
    assert_eq!(w(&mut c, 300, "1"), [0, 3, 0, 700, 900]); // the entry at 0 leaves at 1000
    assert_eq!(w(&mut c, 300, "2"), [0, 3, 0, 800, 900]); // and the one at 100 at 1100
    assert_eq!(w(&mut c, 300, "4"), [0, 3, 0, -1, 900]);
    assert_eq!(w(&mut c, 999, "1"), [0, 3, 0, 1, 201]);
    assert_eq!(w(&mut c, 1000, "1"), [1, 3, 0, 0, 1000]);
    assert_eq!(pexpiretime(&mut c, "log"), DAY0 + 2000);
    // Same-ms requests merge into one entry.
    ints(&mut c, &["RL.SLIDE", "merge", "10", "1s", "AT", &t(DAY0)]);
    ints(&mut c, &["RL.SLIDE", "merge", "10", "1s", "COST", "3", "AT", &t(DAY0)]);
    let state = stored_state(&mut c, "merge");
    assert!(state.contains(&("entries".to_string(), "1".to_string())), "{state:?}");
    assert!(state.contains(&("used".to_string(), "4".to_string())), "{state:?}");
    s.assert_alive();
}

#[test]
fn sliding_buckets_estimate() {
    let s = Server::start();
    let mut c = s.conn();
    let b = |c: &mut Connection, at: i64, cost: &str| {
        ints(c, &["RL.SLIDE", "est", "10", "1s", "BUCKETS", "1", "COST", cost, "AT", &t(DAY0 + at)])
    };
    // Two-counter estimate: 10 in the previous second, weighted by the part still inside.
    // Sub-windows are aligned seconds; the key resets when its newest second has fully left.
    assert_eq!(b(&mut c, 0, "10"), [1, 10, 0, 0, 1999]);
    // 499 ms into the next second, (1000 − 499 − 1)/1000 of the previous 10 still count: 5.
    assert_eq!(b(&mut c, 1499, "5"), [1, 10, 0, 0, 1500]);
    // One more fits once the old second weighs ≤ 4: 10·(999 − r)/1000 ≤ 4 ⇔ r ≥ 599.
    assert_eq!(b(&mut c, 1499, "1"), [0, 10, 0, 100, 1500]);
    assert_eq!(b(&mut c, 1598, "1")[0], 0);
    assert_eq!(b(&mut c, 1599, "1"), [1, 10, 0, 0, 1400]);
    s.assert_alive();
}

/// The worst case the README states for `BUCKETS b`: `limit` admitted at the last ms of a
/// sub-window, then `limit − ⌈limit / w⌉` more `window − 1` ms later, i.e.
/// `2·limit − ⌈limit·b/window⌉` inside one window.
#[test]
fn buckets_over_admission_reaches_the_documented_bound() {
    let s = Server::start();
    let mut c = s.conn();
    let (limit, window, b) = (10i64, 1000i64, 10i64);
    let w = window / b;
    let first = DAY0 + w - 1; // last ms of sub-window 0
    let a = ints(
        &mut c,
        &["RL.SLIDE", "edge", "10", "1s", "BUCKETS", "10", "COST", "10", "AT", &t(first)],
    );
    assert_eq!(a[0], 1);
    let mut more = 0;
    let second = first + window - 1; // second-to-last ms of the sub-window b later
    while ints(&mut c, &["RL.SLIDE", "edge", "10", "1s", "BUCKETS", "10", "AT", &t(second)])[0] == 1
    {
        more += 1;
    }
    let bound = 2 * limit - (limit * b + window - 1) / window;
    assert_eq!(limit + more, bound, "admitted within {} ms", second - first + 1);
    assert!(second - first < window);
    // The exact log never exceeds the limit in the same pattern.
    ints(&mut c, &["RL.SLIDE", "exact", "10", "1s", "COST", "10", "AT", &t(first)]);
    assert_eq!(ints(&mut c, &["RL.SLIDE", "exact", "10", "1s", "AT", &t(second)])[0], 0);
    s.assert_alive();
}

#[test]
fn argument_errors_of_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (vec![b"RL.PERIOD", b"k", b"5"], "ERR wrong number of arguments for 'rl.period' command"),
        (vec![b"RL.PERIOD", b"k", b"0", b"1s"], "ERR limit must be an integer between 1 and 1000000000000"),
        (vec![b"RL.PERIOD", b"k", b"\xff", b"1s"], "ERR limit must be an integer between 1 and 1000000000000"),
        (vec![b"RL.PERIOD", b"k", b"5", b"1y"], "ERR invalid duration '1y' for period (use an integer with an optional unit ms, s, m, h or d)"),
        (vec![b"RL.PERIOD", b"k", b"5", b"1d", b"ALIGN", b"1d"], "ERR utc-offset must be shorter than the period: a duration between -86399999ms and 86399999ms"),
        (vec![b"RL.PERIOD", b"k", b"5", b"1d", b"ALIGN", b"8x"], "ERR invalid duration '8x' for utc-offset (use an integer with an optional unit ms, s, m, h or d)"),
        (vec![b"RL.PERIOD", b"k", b"5", b"1d", b"ALIGN", b"ALIGN"], "ERR syntax error: option ALIGN given more than once"),
        (vec![b"RL.PERIOD", b"k", b"5", b"1d", b"STEP"], "ERR syntax error: unknown option 'STEP'"),
        (vec![b"RL.SLIDE", b"k", b"5"], "ERR wrong number of arguments for 'rl.slide' command"),
        (vec![b"RL.SLIDE", b"k", b"0", b"1s"], "ERR limit must be an integer between 1 and 1000000000000"),
        (vec![b"RL.SLIDE", b"k", b"5", b"0"], "ERR window must be a duration between 1ms and 315360000000ms"),
        (vec![b"RL.SLIDE", b"k", b"1000001", b"1d"], "ERR an exact sliding window of 1000001 per 86400000ms can log 1000001 entries (one per ms, at most the limit), above ratelimit.slide-log-max (1000000); use BUCKETS b for a bucketed window, or raise ratelimit.slide-log-max"),
        (vec![b"RL.SLIDE", b"k", b"5", b"1s", b"BUCKETS", b"3"], "ERR BUCKETS 3 does not divide the window (1000ms) into whole milliseconds"),
        (vec![b"RL.SLIDE", b"k", b"5", b"1s", b"BUCKETS", b"1001"], "ERR BUCKETS must be an integer between 1 and 1000"),
        (vec![b"RL.SLIDE", b"k", b"5", b"1s", b"BUCKETS"], "ERR syntax error: BUCKETS needs a value"),
        (vec![b"RL.SLIDE", b"k", b"5", b"1s", b"STEP"], "ERR syntax error: unknown option 'STEP'"),
        (vec![b"RL.LEAKY", b"k", b"5", b"1"], "ERR wrong number of arguments for 'rl.leaky' command"),
        (vec![b"RL.LEAKY", b"k", b"5", b"1", b"1s", b"DELAY", b"6"], "ERR DELAY must be an integer between 0 and the capacity (5)"),
        (vec![b"RL.LEAKY", b"k", b"5", b"1", b"1s", b"DELAY", b"-1"], "ERR DELAY must be an integer between 0 and 1000000000000"),
        (vec![b"RL.LEAKY", b"k", b"5", b"1", b"1s", b"DELAY"], "ERR syntax error: DELAY needs a value"),
        (vec![b"RL.LEAKY", b"k", b"5", b"1", b"1s", b"NODELAY", b"DELAY", b"1"], "ERR syntax error: NODELAY and DELAY cannot be combined"),
        (vec![b"RL.LEAKY", b"k", b"1000000000000", b"1", b"1d"], "ERR parameters give a full reset time (capacity × period / rate) above 100 years"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"2"], "ERR wrong number of arguments for 'cl.throttle' command"),
        (vec![b"CL.THROTTLE", b"k", b"-1", b"30", b"60"], "ERR max_burst must be an integer between 0 and 1000000000000"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"0", b"60"], "ERR count must be an integer between 1 and 1000000000000"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"30", b"1s"], "ERR period must be an integer between 1 and 315360000"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"30", b"60", b"-1"], "ERR quantity must be an integer between 0 and 1000000000000"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"30", b"60", b"\xff\xfe"], "ERR quantity must be an integer between 0 and 1000000000000"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"30", b"60", b"1", b"COST", b"1"], "ERR syntax error: unknown option 'COST'"),
        (vec![b"CL.THROTTLE", b"k", b"1", b"30", b"60", b"1", b"2"], "ERR syntax error: unknown option '2'"),
        (vec![b"CL.THROTTLE", b"k", b"1000000000000", b"1", b"315360000"], "ERR parameters give a full reset time ((max_burst + 1) × period / count) beyond any Redis expiry"),
    ];
    for (args, want) in cases {
        assert_eq!(error_text(&mut c, &args), want, "{args:?}");
    }
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 0);
    s.assert_alive();
}

#[test]
fn wrong_algorithm_is_named_and_nothing_changes() {
    let s = Server::start();
    let mut c = s.conn();
    let when = t(DAY0);
    let create: [(&str, Vec<&str>); 4] = [
        ("token", vec!["RL.TOKEN", "token", "5", "1", "1s", "AT", &when]),
        ("period", vec!["RL.PERIOD", "period", "5", "1s", "AT", &when]),
        ("leaky", vec!["RL.LEAKY", "leaky", "5", "1", "1s", "AT", &when]),
        ("gcra", vec!["CL.THROTTLE", "gcra", "5", "1", "1", "AT", &when]),
    ];
    for (_, args) in &create {
        ints(&mut c, args);
    }
    let use_as = |key: &str| -> Vec<(&'static str, Vec<String>)> {
        let k = key.to_string();
        vec![
            ("token", vec!["RL.TOKEN".into(), k.clone(), "5".into(), "1".into(), "1s".into()]),
            ("period", vec!["RL.PERIOD".into(), k.clone(), "5".into(), "1s".into()]),
            ("leaky", vec!["RL.LEAKY".into(), k.clone(), "5".into(), "1".into(), "1s".into()]),
            ("gcra", vec!["CL.THROTTLE".into(), k, "5".into(), "1".into(), "1".into()]),
        ]
    };
    for (held, _) in &create {
        let before = snapshot(&mut c, held);
        for (wanted, args) in use_as(held) {
            if wanted == *held {
                continue;
            }
            let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            assert_eq!(
                error_text(&mut c, &bytes),
                format!("WRONGTYPE key holds a {held} limiter, not a {wanted} limiter")
            );
        }
        assert_eq!(snapshot(&mut c, held), before);
        // Peek and info work for every algorithm.
        let peek: Vec<i64> = redis::cmd("RL.PEEK").arg(*held).query(&mut c).unwrap();
        assert_eq!(peek.len(), 5);
        assert_eq!(stored_state(&mut c, held)[0], ("algorithm".to_string(), held.to_string()));
    }
    s.assert_alive();
}

#[test]
fn an_expired_limiter_of_another_algorithm_is_a_missing_key() {
    let s = Server::start();
    let mut c = s.conn();
    // Reset instant DAY0 + 1000; at that instant the key counts as missing.
    ints(&mut c, &["RL.TOKEN", "x", "5", "1", "1s", "AT", &t(DAY0)]);
    let r = ints(&mut c, &["RL.PERIOD", "x", "2", "1s", "AT", &t(DAY0 + 1000)]);
    assert_eq!(r, [1, 2, 1, 0, 1000]);
    assert_eq!(stored_state(&mut c, "x")[0].1, "period");
    s.assert_alive();
}

/// redis-cell drop-in: a burst whose reset takes more than a century is accepted, and the key
/// expires exactly at its theoretical arrival time.
#[test]
fn throttle_accepts_what_redis_cell_accepts() {
    let s = Server::start();
    let mut c = s.conn();
    let at = 4_000_000_000_000i64;
    let reply = line(&mut c, &format!("CL.THROTTLE k 1000000 1 3600 1000001 AT {at}"));
    assert_eq!(reply, [0, 1_000_001, 0, -1, 3_600_003_600]);
    assert_eq!(pexpiretime(&mut c, "k"), at + 1_000_001 * 3_600_000);
    s.assert_alive();
}

/// A log value (an exact sliding log of more than one entry, kept as its own buffer) is
/// expanded for each command and settled back over the key on every way out
/// (`server::key::ExpandedLog`): closed unchanged (a refusal), closed changed, banned (it
/// becomes a box), deleted (`COST 0 FRESH`) and replaced by another algorithm (a policy that
/// changed algorithm). The log reads back whole after each, and the server stays up.
#[test]
fn a_log_key_settles_on_every_way_out() {
    let s = Server::start();
    let mut c = s.conn();
    let slide = |c: &mut Connection, key: &str, at: i64, more: &[&str]| {
        let at = t(DAY0 + at);
        let mut args = vec!["RL.SLIDE", key, "3", "1s"];
        args.extend_from_slice(more);
        args.extend_from_slice(&["AT", &at]);
        ints(c, &args)
    };
    let ok = |c: &mut Connection, command: &str| {
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(run(c, &words).unwrap(), Value::Okay, "{command}");
    };
    let field = |c: &mut Connection, key: &str, name: &str| {
        stored_state(c, key).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    };
    for (i, at) in [0, 100, 200].into_iter().enumerate() {
        assert_eq!(slide(&mut c, "log", at, &[])[2], 2 - i as i64);
    }
    // Refused: nothing changed, the log closed as it was.
    assert_eq!(slide(&mut c, "log", 300, &[]), [0, 3, 0, 700, 900]);
    assert_eq!(field(&mut c, "log", "entries").as_deref(), Some("3"));
    // Admitted as the oldest entry leaves: changed in its buffer.
    assert_eq!(slide(&mut c, "log", 1000, &[]), [1, 3, 0, 0, 1000]);
    assert_eq!(field(&mut c, "log", "entries").as_deref(), Some("3"));
    assert_eq!(field(&mut c, "log", "updated_ms"), Some(t(DAY0 + 1000)));
    // Banned: the log becomes a box, entries and all.
    assert_eq!(slide(&mut c, "log", 1050, &["BAN", "1m"]), [0, 3, 0, 60_000, 60_000]);
    assert_eq!(field(&mut c, "log", "entries").as_deref(), Some("3"));
    assert_eq!(field(&mut c, "log", "banned_until_ms"), Some(t(DAY0 + 61_050)));
    // Deleted: a request judged fresh with nothing to keep.
    for at in [0, 100] {
        slide(&mut c, "gone", at, &[]);
    }
    assert_eq!(field(&mut c, "gone", "entries").as_deref(), Some("2"));
    assert_eq!(slide(&mut c, "gone", 200, &["COST", "0", "FRESH"]), [1, 3, 3, 0, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("gone").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    // Replaced: the policy's algorithm changed, the key starts over under the new one.
    ok(&mut c, "RL.POLICY SET p SLIDE 3 1s");
    for at in [0, 100] {
        ints(&mut c, &["RL.HIT", "p", "plog", "AT", &t(DAY0 + at)]);
    }
    assert_eq!(field(&mut c, "plog", "entries").as_deref(), Some("2"));
    ok(&mut c, "RL.POLICY SET p TOKEN 3 1 1s");
    assert_eq!(ints(&mut c, &["RL.HIT", "p", "plog", "AT", &t(DAY0 + 200)]), [1, 3, 2, 0, 1000]);
    assert_eq!(field(&mut c, "plog", "algorithm").as_deref(), Some("token"));
    s.assert_alive();
}
