//! `RL.SLIDE … BUCKETS b ANCHOR [FLOOR]` against a real server — limits' sliding window
//! counter: the grid starts at the first hit, a new grid after the limiter resets, `FLOOR`
//! admits what limits admits at the boundaries, `RL.INFO` (`anchor`, `floor`, `origin_ms`, the
//! window fields from which limits' `get_sliding_window` follows), `RL.ALL` groups, errors,
//! replicas and `DUMP`/`RESTORE` identical.
//!
//! `RL.INFO` computes its window fields at `max(server clock, updated_ms)`: the calls here use
//! `AT` an hour ahead, so those fields are computed at the last call's instant, exactly.

mod common;
use common::*;

fn ahead() -> i64 {
    unix_ms() + 3_600_000
}

/// A reply value as text; an array (`window_counts`) as its items joined with commas.
fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        other => format!("{other:?}"),
    }
}

/// `RL.INFO` as (field, value) pairs.
fn info(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    let v: Value = redis::cmd("RL.INFO").arg(key).query(con).expect("RL.INFO");
    let Value::Array(items) = v else { panic!("{v:?}") };
    items.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
}

fn field(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("{name} in {fields:?}"))
}

#[test]
fn the_grid_starts_at_the_first_hit() {
    let s = Server::start();
    let mut c = s.conn();
    let o = ahead() + 123;
    // 4 sub-windows of 250 ms from o: (o, o + 250], (o + 250, o + 500], …
    assert_eq!(
        line(&mut c, &format!("RL.SLIDE k 10 1s BUCKETS 4 ANCHOR COST 6 AT {o}")),
        [1, 10, 4, 0, 1250]
    );
    let fields = info(&mut c, "k");
    for (name, value) in [
        ("buckets", "4".to_string()),
        ("anchor", "1".into()),
        ("floor", "0".into()),
        ("origin_ms", o.to_string()),
    ] {
        assert_eq!(field(&fields, name), value, "{fields:?}");
    }
    assert_eq!(field(&fields, "window_counts"), "0,0,0,0,6");
    assert_eq!(field(&fields, "window_start_ms"), (o - 1000).to_string());
    assert_eq!(field(&fields, "window_oldest_ms"), o.to_string());
    // o + 250 is still the first sub-window; o + 251 the second.
    line(&mut c, &format!("RL.SLIDE k 10 1s BUCKETS 4 ANCHOR AT {}", o + 250));
    assert_eq!(field(&info(&mut c, "k"), "window_counts"), "0,0,0,0,7");
    line(&mut c, &format!("RL.SLIDE k 10 1s BUCKETS 4 ANCHOR AT {}", o + 251));
    let fields = info(&mut c, "k");
    assert_eq!(field(&fields, "window_counts"), "0,0,0,7,1");
    assert_eq!(field(&fields, "window_start_ms"), (o - 750).to_string());
    assert_eq!(pexpiretime(&mut c, "k"), o + 500 + 1000);
    // The same calls on the epoch's grid count differently: o is 123 ms into a sub-window.
    line(&mut c, &format!("RL.SLIDE e 10 1s BUCKETS 4 COST 6 AT {o}"));
    let fields = info(&mut c, "e");
    assert_eq!(field(&fields, "anchor"), "0");
    assert!(!fields.iter().any(|(k, _)| k == "origin_ms"));
    assert_eq!(field(&fields, "window_start_ms"), (o.div_euclid(250) * 250 - 1000).to_string());
}

#[test]
fn a_new_grid_starts_after_the_limiter_resets() {
    let s = Server::start();
    let mut c = s.conn();
    let o = ahead();
    line(&mut c, &format!("RL.SLIDE k 5 100 BUCKETS 1 ANCHOR COST 2 AT {o}"));
    line(&mut c, &format!("RL.SLIDE k 5 100 BUCKETS 1 ANCHOR AT {}", o + 150));
    assert_eq!(field(&info(&mut c, "k"), "origin_ms"), o.to_string());
    assert_eq!(pexpiretime(&mut c, "k"), o + 300);
    // Idle past the reset (o + 2P after the last window with a hit): a new origin.
    line(&mut c, &format!("RL.SLIDE k 5 100 BUCKETS 1 ANCHOR AT {}", o + 300));
    let fields = info(&mut c, "k");
    assert_eq!(field(&fields, "origin_ms"), (o + 300).to_string());
    assert_eq!(field(&fields, "window_counts"), "0,1");
}

/// limits' own numbers: 10 per second; 8 at o; at o + P + 1 its previous counter weighs
/// 999/1000: ⌊8·0.999⌋ = 7, so 3 more fit under FLOOR (2 without), and the retry is exact.
#[test]
fn floor_admits_what_limits_admits_at_the_boundaries() {
    let s = Server::start();
    let mut c = s.conn();
    let o = ahead();
    for (key, floor, fits) in [("f", "FLOOR", 3), ("p", "", 2)] {
        let call = |c: &mut Connection, cost: u64, at: i64, dry: bool| {
            let dry = if dry { "DRYRUN" } else { "" };
            line(
                c,
                &format!("RL.SLIDE {key} 10 1s BUCKETS 1 ANCHOR {floor} COST {cost} {dry} AT {at}"),
            )
        };
        call(&mut c, 8, o, false);
        assert_eq!(call(&mut c, 3, o + 1000, true)[0], 0, "still the first window at o + P");
        assert_eq!(call(&mut c, fits, o + 1001, true)[0], 1, "{key}");
        assert_eq!(call(&mut c, fits + 1, o + 1001, true)[0], 0, "{key}");
    }
    assert_eq!(
        line(&mut c, &format!("RL.SLIDE f 10 1s BUCKETS 1 ANCHOR FLOOR COST 3 AT {}", o + 1001)),
        [1, 10, 0, 0, 1999]
    );
    let refused = line(&mut c, &format!("RL.SLIDE f 10 1s BUCKETS 1 ANCHOR FLOOR AT {}", o + 1001));
    assert_eq!(refused, [0, 10, 0, 125, 1999]);
    let at = |t: i64| format!("RL.SLIDE f 10 1s BUCKETS 1 ANCHOR FLOOR DRYRUN AT {t}");
    assert_eq!(line(&mut c, &at(o + 1001 + 124))[0], 0);
    assert_eq!(line(&mut c, &at(o + 1001 + 125))[0], 1);
    // RL.INFO at o + 1001: [previous, current] = [8, 3]; limits' previous PTTL
    // = window_start_ms + 2P − now = 999, its current PTTL = + 3P − now = 1999.
    let fields = info(&mut c, "f");
    assert_eq!(field(&fields, "floor"), "1");
    assert_eq!(field(&fields, "window_counts"), "8,3");
    let start: i64 = field(&fields, "window_start_ms").parse().unwrap();
    let now: i64 = field(&fields, "now_ms").parse().unwrap();
    assert_eq!((now, start + 2000 - now, start + 3000 - now), (o + 1001, 999, 1999));
    assert_eq!(field(&fields, "window_used"), "10"); // ⌊8·999/1000⌋ + 3
}

#[test]
fn all_groups_take_anchor_and_floor() {
    let s = Server::start();
    let mut c = s.conn();
    let o = ahead();
    let single = |c: &mut Connection, key: &str, cost: u64, at: i64| {
        line(c, &format!("RL.SLIDE {key} 10 1s BUCKETS 2 ANCHOR FLOOR COST {cost} AT {at}"))
    };
    let all = |c: &mut Connection, cost: u64, at: i64| -> Vec<Value> {
        let text = format!("RL.ALL 2 {{u}}a {{u}}b SLIDE 10 1s BUCKETS 2 ANCHOR FLOOR COST {cost} TOKEN 100 1 1s AT {at}");
        let words: Vec<&str> = text.split_whitespace().collect();
        match run(c, &words).unwrap() {
            Value::Array(items) => items,
            other => panic!("{other:?}"),
        }
    };
    for (cost, dt) in [(6, 0), (3, 400), (4, 1100), (2, 1300)] {
        let expected = single(&mut c, "twin", cost, o + dt);
        let reply = all(&mut c, cost, o + dt);
        assert_eq!(reply[0], Value::Int(expected[0]), "cost {cost} at +{dt}");
        let Value::Array(details) = &reply[6] else { panic!() };
        assert_eq!(details[0], Value::Array(expected.iter().map(|v| Value::Int(*v)).collect()));
    }
    let mut a = stored_state(&mut c, "{u}a");
    let mut twin = stored_state(&mut c, "twin");
    a.retain(|(k, _)| k != "updated_ms");
    twin.retain(|(k, _)| k != "updated_ms");
    assert_eq!(a, twin);
}

#[test]
fn options_need_buckets() {
    let s = Server::start();
    let mut c = s.conn();
    for (text, expected) in [
        ("RL.SLIDE k 10 1s ANCHOR", "ERR syntax error: ANCHOR needs BUCKETS b"),
        ("RL.SLIDE k 10 1s FLOOR COST 2", "ERR syntax error: FLOOR needs BUCKETS b"),
        ("RL.ALL 1 k SLIDE 10 1s FLOOR", "ERR syntax error: FLOOR needs BUCKETS b"),
        (
            "RL.SLIDE k 10 1s BUCKETS 2 ANCHOR anchor",
            "ERR syntax error: option ANCHOR given more than once",
        ),
        ("RL.TOKEN k 10 1 1s ANCHOR", "ERR syntax error: unknown option 'ANCHOR'"),
        ("RL.ALL 1 k PERIOD 10 1s FLOOR", "ERR syntax error: unknown option 'FLOOR'"),
    ] {
        let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
        let got = error_text(&mut c, &words);
        assert!(got.starts_with(expected), "{text}: {got}");
    }
    // The longest valid calls fit the argument bounds.
    let o = ahead();
    line(
        &mut c,
        &format!("RL.SLIDE k 10 1s COST 1 BUCKETS 2 ANCHOR FLOOR BAN 1m DRYRUN AT {o} FRESH"),
    );
    let groups = " SLIDE 10 1s COST 1 BUCKETS 2 ANCHOR FLOOR".repeat(16);
    let keys: String = (0..16).map(|i| format!(" {{t}}k{i}")).collect();
    let text = format!("RL.ALL 16{keys}{groups} DRYRUN AT {o}");
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(matches!(run(&mut c, &words), Ok(Value::Array(_))));
    let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", "rl.slide"]).unwrap());
    assert!(docs.contains("\"ANCHOR\"") && docs.contains("\"FLOOR\""), "{docs}");
}

/// Calls without `AT` (the master propagates the state they leave), anchored and floored,
/// with a ban: replicas and a `DUMP`/`RESTORE` copy hold the identical state.
#[test]
fn replicas_and_copies_are_identical() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    for i in 0..40 {
        let cost = 1 + i % 3;
        line(&mut mc, &format!("RL.SLIDE a 20 1m BUCKETS 6 ANCHOR COST {cost}"));
        line(&mut mc, &format!("RL.SLIDE f 20 1m BUCKETS 1 ANCHOR FLOOR COST {cost} BAN 1h"));
        line(&mut mc, &format!("RL.SLIDE g 20 1m BUCKETS 3 FLOOR COST {cost}"));
    }
    wait_in_sync(&master, &replica);
    let mut rc = replica.conn();
    for key in ["a", "f", "g"] {
        let snap = snapshot(&mut mc, key);
        assert!(!snap.0.is_empty(), "{key}");
        assert_eq!(snap, snapshot(&mut rc, key), "{key}");
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut mc).unwrap();
        let copy = format!("{key}-copy");
        let _: () = redis::cmd("RESTORE").arg(&copy).arg(0).arg(&dump).query(&mut mc).unwrap();
        assert_eq!(stored_state(&mut mc, &copy), snap.0, "{key}");
    }
    assert!(stored_state(&mut mc, "f").iter().any(|(k, _)| k == "banned_until_ms"));
}
