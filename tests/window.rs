//! `RL.INFO`'s now-dependent fields against a real server: `now_ms` for every limiter, and a
//! sliding window's `window_used`, `window_oldest_ms` (exact log and counters) and
//! `window_counts`, `window_start_ms` (counters), in RESP2 and RESP3. The limiters are filled
//! with `AT` in the recent past; `RL.INFO` reads the server clock, so expectations are derived
//! from the `now_ms` it reports (never earlier than the test's own clock reading).

mod common;
use common::*;

const MINUTE: i64 = 60_000;

/// `RL.INFO` as (field, value) pairs, every field (`window_counts` as its integers).
fn info(con: &mut Connection, key: &str) -> Vec<(String, Value)> {
    let v: Value = redis::cmd("RL.INFO").arg(key).query(con).expect("RL.INFO");
    let items = match v {
        Value::Array(items) => items,
        Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        other => panic!("unexpected RL.INFO reply {other:?}"),
    };
    items
        .chunks(2)
        .map(|pair| match &pair[0] {
            Value::BulkString(b) => (String::from_utf8_lossy(b).into_owned(), pair[1].clone()),
            other => panic!("field name {other:?}"),
        })
        .collect()
}

fn int(fields: &[(String, Value)], name: &str) -> i64 {
    match fields.iter().find(|(k, _)| k == name) {
        Some((_, Value::Int(v))) => *v,
        other => panic!("{name}: {other:?} in {fields:?}"),
    }
}

fn counts(fields: &[(String, Value)]) -> Vec<i64> {
    match fields.iter().find(|(k, _)| k == "window_counts") {
        Some((_, Value::Array(items))) => items
            .iter()
            .map(|v| match v {
                Value::Int(i) => *i,
                other => panic!("count {other:?}"),
            })
            .collect(),
        other => panic!("window_counts: {other:?} in {fields:?}"),
    }
}

fn names(fields: &[(String, Value)]) -> Vec<&str> {
    fields.iter().map(|(k, _)| k.as_str()).collect()
}

/// The names after `ttl_ms`: the now-dependent fields.
fn now_dependent(fields: &[(String, Value)]) -> Vec<&str> {
    let all = names(fields);
    let at = all.iter().position(|k| *k == "ttl_ms").expect("ttl_ms");
    all[at + 1..].to_vec()
}

#[test]
fn every_limiter_reports_now_ms() {
    let s = Server::start();
    let mut c = s.conn();
    let t = unix_ms();
    for command in [
        format!("RL.TOKEN tok 10 1 1h AT {t}"),
        format!("RL.PERIOD per 10 1h AT {t}"),
        format!("RL.LEAKY lk 10 1 1h AT {t}"),
        format!("CL.THROTTLE gc 10 1 60 1 AT {t}"),
    ] {
        line(&mut c, &command);
    }
    let _: Value = run(&mut c, &["RL.ACQUIRE", "ls", "2", "1h"]).unwrap();
    for key in ["tok", "per", "lk", "gc", "ls"] {
        let before = unix_ms();
        let fields = info(&mut c, key);
        assert_eq!(now_dependent(&fields), ["now_ms"], "{key}");
        assert!(int(&fields, "now_ms") >= before, "{key}: {fields:?}");
    }
    // An `AT` in the future: `now_ms` is the stored `updated_ms`, not the clock.
    let future = unix_ms() + 3_600_000;
    line(&mut c, &format!("RL.TOKEN ahead 10 1 1h AT {future}"));
    assert_eq!(int(&info(&mut c, "ahead"), "now_ms"), future);
}

#[test]
fn an_exact_log_reports_what_counts_now() {
    let s = Server::start();
    let mut c = s.conn();
    // A 300 ms window: an entry 200 ms before another, then 150 ms of waiting: the first has
    // left (it counted when the second was admitted), the second still counts.
    let t = unix_ms();
    line(&mut c, &format!("RL.SLIDE log 10 300 COST 4 AT {}", t - 200));
    line(&mut c, &format!("RL.SLIDE log 10 300 COST 3 AT {t}"));
    std::thread::sleep(std::time::Duration::from_millis(150));
    let v: Value = redis::cmd("RL.INFO").arg("log").query(&mut c).unwrap();
    if v == Value::Nil {
        return; // a slow machine: the second entry has left too (300 ms), nothing to see
    }
    let fields = info(&mut c, "log");
    assert_eq!(now_dependent(&fields), ["now_ms", "window_used", "window_oldest_ms"]);
    let now = int(&fields, "now_ms");
    assert!(now >= t + 100, "{now} {t}");
    if now >= t + 300 {
        return;
    }
    // Stored (as of updated_ms): both entries; now: only the second.
    assert_eq!(int(&fields, "used"), 7);
    assert_eq!(int(&fields, "window_used"), 3);
    assert_eq!(int(&fields, "window_oldest_ms"), t);
    // Before the clock reaches the newest entry (an `AT` ahead), now' is its instant.
    let ahead = unix_ms() + 60_000;
    line(&mut c, &format!("RL.SLIDE log2 10 1m COST 2 AT {}", ahead - 30_000));
    line(&mut c, &format!("RL.SLIDE log2 10 1m COST 5 AT {ahead}"));
    let fields = info(&mut c, "log2");
    assert_eq!(int(&fields, "now_ms"), ahead);
    assert_eq!(int(&fields, "window_used"), 7);
    assert_eq!(int(&fields, "window_oldest_ms"), ahead - 30_000);
}

#[test]
fn counters_report_the_sub_windows_at_now() {
    let s = Server::start();
    let mut c = s.conn();
    let w = 10 * MINUTE;
    let t = unix_ms();
    let events = [(55, 2), (25, 3), (1, 1)];
    for (ago, cost) in events {
        line(&mut c, &format!("RL.SLIDE ring 10 1h BUCKETS 6 COST {cost} AT {}", t - ago * MINUTE));
    }
    for resp3 in [false, true] {
        let mut con = if resp3 { s.conn_resp3() } else { s.conn() };
        let fields = info(&mut con, "ring");
        assert_eq!(
            now_dependent(&fields),
            ["now_ms", "window_used", "window_oldest_ms", "window_counts", "window_start_ms"]
        );
        let now = int(&fields, "now_ms");
        assert!(now >= t);
        let i = now.div_euclid(w);
        let r = now - i * w;
        let start = (i - 6) * w;
        assert_eq!(int(&fields, "window_start_ms"), start);
        let mut expected = vec![0i64; 7];
        for (ago, cost) in events {
            let j = (t - ago * MINUTE).div_euclid(w) - (i - 6);
            if (0..7).contains(&j) {
                expected[j as usize] += cost;
            }
        }
        assert_eq!(counts(&fields), expected, "resp3 {resp3}");
        let used = (expected[0] * (w - r - 1) + w * expected[1..].iter().sum::<i64>()) / w;
        assert_eq!(int(&fields, "window_used"), used);
        let oldest = expected
            .iter()
            .enumerate()
            .find(|(k, c)| **c > 0 && (*k > 0 || w - r - 1 > 0))
            .map_or(-1, |(k, _)| start + k as i64 * w);
        assert_eq!(int(&fields, "window_oldest_ms"), oldest);
    }
}

/// `BUCKETS 1` gives limits' two-counter view: `[previous, current]` and the previous window's
/// start, from which the previous and current counters' remaining lives follow.
#[test]
fn one_bucket_gives_previous_and_current() {
    let s = Server::start();
    let mut c = s.conn();
    let p = 10 * MINUTE;
    let t = unix_ms();
    let current_start = t.div_euclid(p) * p;
    line(&mut c, &format!("RL.SLIDE two 100 10m BUCKETS 1 COST 7 AT {}", current_start - p / 2));
    line(&mut c, &format!("RL.SLIDE two 100 10m BUCKETS 1 COST 4 AT {current_start}"));
    let fields = info(&mut c, "two");
    let now = int(&fields, "now_ms");
    if now >= current_start + p {
        return; // the clock crossed a 10-minute boundary between the calls: nothing to check
    }
    assert_eq!(counts(&fields), [7, 4]);
    assert_eq!(int(&fields, "window_start_ms"), current_start - p);
    let r = now - current_start;
    assert_eq!(int(&fields, "window_used"), (7 * (p - r - 1) + 4 * p) / p);
}
