//! Limiters stored inline in the key's value word (the table of interned parameter sets):
//! every way a value is created, copied, moved, freed and reloaded keeps the table's counts
//! right and every limiter exact; when the table is full, limiters fall back to their box.

mod common;
use common::*;
use redis::ConnectionLike;

fn entries(c: &mut Connection) -> i64 {
    info_field(c, "ratelimit", "ratelimit_inline_entries").parse().unwrap()
}

fn memory_usage(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY").arg("USAGE").arg(key).arg("SAMPLES").arg("0").query(c).unwrap()
}

/// Sends every command of `commands` pipelined; fails on any error reply.
fn pipelined(c: &mut Connection, commands: &[Vec<String>]) {
    for chunk in commands.chunks(5000) {
        let mut pipe = redis::pipe();
        for command in chunk {
            let refs: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
            pipe.add_command(cmd(&refs));
        }
        let replies = c.req_packed_commands(&pipe.get_packed_pipeline(), 0, chunk.len()).unwrap();
        let error = replies.iter().find(|r| matches!(r, Value::ServerError(_)));
        assert!(error.is_none(), "{error:?}");
    }
}

/// Keys of one parameter set share one entry; each distinct set has its own; deleting keys,
/// `FLUSHALL` (synchronous or on a background thread) and expiry give the entries back.
#[test]
fn entries_are_shared_counted_and_given_back() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(entries(&mut c), 0);
    for key in ["a", "b", "c"] {
        assert_eq!(line(&mut c, &format!("RL.TOKEN {key} 10 1 1h"))[0], 1);
    }
    assert_eq!(entries(&mut c), 1, "one parameter set, one entry");
    line(&mut c, "RL.PERIOD p 5 1h");
    line(&mut c, "CL.THROTTLE g 9 1 60");
    line(&mut c, "RL.LEAKY l 5 1 1h NODELAY");
    line(&mut c, "RL.SLIDE s 5 1h");
    assert_eq!(entries(&mut c), 5);
    // An inline value costs nothing beyond Redis' own objects; a boxed one its 48 bytes more.
    let _: Value = run(&mut c, &["RL.ACQUIRE", "lease", "5", "1h"]).unwrap();
    assert!(memory_usage(&mut c, "a") + 48 <= memory_usage(&mut c, "lease"));
    let _: () = redis::cmd("DEL").arg("lease").query(&mut c).unwrap();
    let _: () = redis::cmd("DEL").arg("a").arg("b").query(&mut c).unwrap();
    assert_eq!(entries(&mut c), 5, "c still refers to the token entry");
    let _: () = redis::cmd("DEL").arg("c").query(&mut c).unwrap();
    assert_eq!(entries(&mut c), 4);
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut c).unwrap();
    assert_eq!(entries(&mut c), 0);
    // FLUSHALL ASYNC frees the values on a background thread.
    let commands: Vec<Vec<String>> = (0..20_000)
        .map(|i| {
            vec![
                "RL.TOKEN".into(),
                format!("k{i}"),
                format!("{}", 1 + i % 50),
                "1".into(),
                "1h".into(),
            ]
        })
        .collect();
    pipelined(&mut c, &commands);
    assert_eq!(entries(&mut c), 50);
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    wait_for("the background flush to release every entry", || entries(&mut c) == 0);
    // Expiry frees them too.
    line(&mut c, "RL.TOKEN short 1 1 50");
    assert_eq!(entries(&mut c), 1);
    wait_for("the limiter to expire", || {
        let _: Value = run(&mut c, &["EXISTS", "short"]).unwrap();
        entries(&mut c) == 0
    });
    s.assert_alive();
}

/// `COPY`, `RENAME`, `MOVE`, `DUMP`/`RESTORE`, `DEBUG RELOAD` and an AOF rewrite keep every
/// inline limiter exact, and the counts right.
#[test]
fn copies_moves_and_reloads_keep_limiters_exact() {
    let s = Server::start_with(&["--appendonly", "yes", "--enable-debug-command", "yes"]);
    let mut c = s.conn();
    let at = &(unix_ms() + 60_000).to_string();
    for command in [
        format!("RL.TOKEN t 10 1 1s COST 3 AT {at}"),
        format!("RL.PERIOD p 5 1h COST 2 AT {at}"),
        format!("RL.SLIDE s 5 1h COST 2 AT {at}"),
        format!("RL.LEAKY l 5 1 1h DELAY 2 AT {at}"),
        format!("CL.THROTTLE g 9 1 60 3 AT {at}"),
        // Pairs: a step bucket's grid origin, a daily quota's second field beside the word.
        format!("RL.TOKEN st 10 1 1h STEP COST 3 AT {at}"),
        format!("RL.PERIOD q 1000000 1d COST 5 AT {at}"),
    ] {
        line(&mut c, &command);
    }
    // A second call rewrites each value in place (a pair's box included).
    let later = (at.parse::<i64>().unwrap() + 7).to_string();
    assert_eq!(line(&mut c, &format!("RL.TOKEN st 10 1 1h STEP AT {later}"))[..3], [1, 10, 6]);
    let quota = line(&mut c, &format!("RL.PERIOD q 1000000 1d COST 2 AT {later}"));
    assert_eq!(quota[..3], [1, 1_000_000, 999_993]);
    let keys = ["t", "p", "s", "l", "g", "st", "q"];
    let before: Vec<_> = keys.iter().map(|k| stored_state(&mut c, k)).collect();
    for k in keys {
        let _: () = redis::cmd("COPY").arg(k).arg(format!("{k}:copy")).query(&mut c).unwrap();
    }
    assert_eq!(entries(&mut c), 7, "copies share their entries");
    let _: () = redis::cmd("DEL").arg("t").query(&mut c).unwrap();
    assert_eq!(stored_state(&mut c, "t:copy"), before[0], "the copy outlives the original");
    let _: () = redis::cmd("RENAME").arg("t:copy").arg("t").query(&mut c).unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg("p").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE").arg("p:restored").arg(0).arg(dump).query(&mut c).unwrap();
    assert_eq!(stored_state(&mut c, "p:restored"), before[1]);
    let _: () = redis::cmd("MOVE").arg("s:copy").arg(1).query(&mut c).unwrap();
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    let after_reload: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(after_reload, digest);
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_for("the AOF rewrite", || {
        info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled") == "0"
    });
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(&mut c).unwrap();
    let after_aof: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(after_aof, digest);
    for (k, state) in keys.iter().zip(&before) {
        assert_eq!(&stored_state(&mut c, k), state, "{k}");
    }
    // Seven shapes (the one-entry log and the two pairs included) plus nothing else.
    assert_eq!(entries(&mut c), 7);
    let st = stored_state(&mut c, "st");
    assert!(st.contains(&("origin_ms".to_string(), at.to_string())), "{st:?}");
    s.assert_alive();
}

/// A limiter moves between its inline form and its box as its state requires (a ban, a
/// longer log), answering the same throughout.
#[test]
fn forms_change_with_the_state() {
    let s = Server::start();
    let mut c = s.conn();
    let t0 = unix_ms() + 60_000;
    let at = |d: i64| (t0 + d).to_string();
    // A ban: boxed while it is stored, inline again once a call clears it.
    assert_eq!(ints(&mut c, &["RL.TOKEN", "b", "2", "1", "1s", "COST", "2", "AT", &at(0)])[0], 1);
    let inline_usage = memory_usage(&mut c, "b");
    let refused = ints(&mut c, &["RL.TOKEN", "b", "2", "1", "1s", "BAN", "5s", "AT", &at(1)]);
    assert_eq!(refused[0], 0);
    assert!(memory_usage(&mut c, "b") > inline_usage, "a banned limiter is boxed");
    assert!(stored_state(&mut c, "b").iter().any(|(k, _)| k == "banned_until_ms"));
    assert_eq!(ints(&mut c, &["RL.TOKEN", "b", "2", "1", "1s", "AT", &at(6_000)])[0], 1);
    assert_eq!(memory_usage(&mut c, "b"), inline_usage, "inline again");
    // A sliding log: one entry inline, two boxed, and the answers of an exact log throughout.
    assert_eq!(ints(&mut c, &["RL.SLIDE", "s", "3", "1s", "AT", &at(0)]), [1, 3, 2, 0, 1000]);
    let one = memory_usage(&mut c, "s");
    // The newest entry decides when the log is empty again: 1 s after it.
    assert_eq!(ints(&mut c, &["RL.SLIDE", "s", "3", "1s", "AT", &at(400)]), [1, 3, 1, 0, 1000]);
    assert!(memory_usage(&mut c, "s") > one);
    assert_eq!(ints(&mut c, &["RL.SLIDE", "s", "3", "1s", "AT", &at(1_500)]), [1, 3, 2, 0, 1000]);
    assert_eq!(memory_usage(&mut c, "s"), one, "one entry again: inline again");
    s.assert_alive();
}

/// More distinct parameter sets than the table holds: the rest are boxed, every limiter stays
/// exact, and once the keys are gone the table serves new keys again.
#[test]
fn a_full_table_falls_back_to_boxes() {
    const KEYS: usize = 70_000;
    let s = Server::start();
    let mut c = s.conn();
    let at = &(unix_ms() + 60_000).to_string();
    let commands: Vec<Vec<String>> = (0..KEYS)
        .map(|i| {
            // Distinct periods: distinct parameter sets, each narrow enough to be inline.
            ["RL.PERIOD", &format!("k{i}"), "5", &format!("{}ms", 1000 + i), "AT", at]
                .map(String::from)
                .to_vec()
        })
        .collect();
    pipelined(&mut c, &commands);
    assert_eq!(entries(&mut c), 65_536, "the table is full");
    for i in [0, 1, 65_535, 65_536, 69_999] {
        let key = format!("k{i}");
        let period = format!("{}ms", 1000 + i);
        let reply = ints(&mut c, &["RL.PERIOD", &key, "5", &period, "AT", at]);
        let ms = 1000 + i as i64;
        assert_eq!(reply, [1, 5, 3, 0, ms], "{key}");
    }
    let _: () = redis::cmd("FLUSHALL").arg("SYNC").query(&mut c).unwrap();
    assert_eq!(entries(&mut c), 0);
    line(&mut c, "RL.PERIOD fresh 3 1h");
    assert_eq!(entries(&mut c), 1);
    s.assert_alive();
}
