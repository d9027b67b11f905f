//! `WAIT timeout` against a real server: blocked clients admitted in arrival order, never
//! before the instant the algorithm allows, timeouts, wake-ups on refunds and `DEL`,
//! disconnected waiters, `MULTI`, replication, and 1000 clients on one hot key.
//! Wall-clock assertions are about order and "not before" only: a loaded machine may answer
//! late, never early.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// Sends a command without waiting for its reply.
fn send(con: &mut Connection, words: &[&str]) {
    let bytes: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    con.send_packed_command(&cmd(&bytes).get_packed_command()).expect("send");
}

fn receive(con: &mut Connection) -> Vec<i64> {
    let v: Value = con.recv_response().expect("a reply");
    redis::from_redis_value(&v).expect("integers")
}

/// Sends a blocking call and waits until the server counts it as waiting.
fn send_and_wait_queued(
    probe: &mut Connection,
    con: &mut Connection,
    words: &[&str],
    waiting: usize,
) {
    send(con, words);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(probe, "ratelimit", "ratelimit_waiting").parse::<usize>().unwrap() < waiting {
        assert!(Instant::now() < deadline, "the call never queued");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn waiters_are_admitted_in_arrival_order_never_early() {
    let s = Server::start();
    let mut probe = s.conn();
    // One token per 300 ms; the bucket starts empty.
    line(&mut probe, "RL.TOKEN q 1 1 300");
    let start = Instant::now();
    let mut clients: Vec<Connection> = (0..4).map(|_| s.conn()).collect();
    for (i, con) in clients.iter_mut().enumerate() {
        send_and_wait_queued(
            &mut probe,
            con,
            &["RL.TOKEN", "q", "1", "1", "300", "WAIT", "20s"],
            i + 1,
        );
    }
    // Read replies in arrival order: each is admitted, and not before its token exists.
    let mut done = Vec::new();
    for (i, con) in clients.iter_mut().enumerate() {
        let reply = receive(con);
        assert_eq!(reply[0], 1, "client {i}: {reply:?}");
        done.push(start.elapsed());
        assert!(
            start.elapsed() >= Duration::from_millis(300 * (i as u64 + 1) - 5),
            "client {i} early"
        );
    }
    assert_eq!(info_field(&mut probe, "ratelimit", "ratelimit_wait_admitted"), "4");
    assert_eq!(info_field(&mut probe, "ratelimit", "ratelimit_waiting"), "0");
    s.assert_alive();
}

#[test]
fn a_larger_earlier_waiter_is_never_overtaken() {
    let s = Server::start();
    let mut probe = s.conn();
    line(&mut probe, "RL.TOKEN q 3 1 200 COST 3");
    let (mut big, mut small) = (s.conn(), s.conn());
    send_and_wait_queued(
        &mut probe,
        &mut big,
        &["RL.TOKEN", "q", "3", "1", "200", "COST", "3", "WAIT", "20s"],
        1,
    );
    send_and_wait_queued(
        &mut probe,
        &mut small,
        &["RL.TOKEN", "q", "3", "1", "200", "WAIT", "20s"],
        2,
    );
    // The small request fits after 200 ms, but waits behind the big one (600 ms).
    let start = Instant::now();
    assert_eq!(receive(&mut big)[0], 1);
    let reply = receive(&mut small);
    assert_eq!(reply[0], 1);
    assert!(start.elapsed() >= Duration::from_millis(700), "overtaken: {:?}", start.elapsed());
}

#[test]
fn timeouts_answer_refused_and_wait_0_waits_without_limit() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, "RL.PERIOD w 1 1h");
    let start = Instant::now();
    let reply = line(&mut c, "RL.PERIOD w 1 1h WAIT 150");
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert_eq!(reply[..3], [0, 1, 0]);
    assert!(reply[3] > 3_500_000, "{reply:?}");
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_wait_timeouts"), "1");
    // A request that can never be admitted answers at once.
    let start = Instant::now();
    assert_eq!(line(&mut c, "RL.PERIOD w 1 1h COST 2 WAIT 0")[3], -1);
    assert!(start.elapsed() < Duration::from_secs(30));
    // WAIT 0 waits without limit: released here by a refund.
    let mut waiter = s.conn();
    send_and_wait_queued(&mut c, &mut waiter, &["RL.PERIOD", "w", "1", "1h", "WAIT", "0"], 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_waiting"), "1", "still waiting");
    let _: Value = run(&mut c, &["RL.REFUND", "w", "1"]).unwrap();
    assert_eq!(receive(&mut waiter)[0], 1);
}

#[test]
fn refund_and_del_wake_the_head_at_once() {
    let s = Server::start();
    let mut c = s.conn();
    for key in ["r", "d"] {
        line(&mut c, &format!("RL.TOKEN {key} 1 1 1h"));
        let mut waiter = s.conn();
        send_and_wait_queued(
            &mut c,
            &mut waiter,
            &["RL.TOKEN", key, "1", "1", "1h", "WAIT", "1m"],
            1,
        );
        let start = Instant::now();
        if key == "r" {
            let _: Value = run(&mut c, &["RL.REFUND", key, "1"]).unwrap();
        } else {
            let _: i64 = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
        }
        assert_eq!(receive(&mut waiter)[0], 1, "{key}");
        // The token would have come back only after an hour.
        assert!(start.elapsed() < Duration::from_secs(50), "{key}: {:?}", start.elapsed());
    }
}

#[test]
fn a_disconnected_waiter_leaves_the_queue() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, "RL.TOKEN k 1 1 1h");
    let mut gone = s.conn();
    send_and_wait_queued(&mut c, &mut gone, &["RL.TOKEN", "k", "1", "1", "1h", "WAIT", "1m"], 1);
    let mut next = s.conn();
    send_and_wait_queued(&mut c, &mut next, &["RL.TOKEN", "k", "1", "1", "1h", "WAIT", "1m"], 2);
    drop(gone);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut c, "ratelimit", "ratelimit_waiting") != "1" {
        assert!(Instant::now() < deadline, "the disconnected waiter stayed queued");
        std::thread::sleep(Duration::from_millis(5));
    }
    let _: Value = run(&mut c, &["RL.REFUND", "k", "1"]).unwrap();
    assert_eq!(receive(&mut next)[0], 1);
    s.assert_alive();
}

#[test]
fn wait_is_ignored_inside_multi_and_refused_with_at_or_dryrun() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, "RL.TOKEN k 1 1 1h");
    let start = Instant::now();
    let replies: Vec<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("RL.TOKEN")
        .arg(&["k", "1", "1", "1h", "WAIT", "10s"])
        .query(&mut c)
        .unwrap();
    assert_eq!(replies[0][0], 0, "answered at once, refused");
    assert!(start.elapsed() < Duration::from_secs(9));
    let script: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RL.TOKEN', KEYS[1], 1, 1, '1h', 'WAIT', '10s')")
        .arg(1)
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(script[0], 0);
    for (args, expected) in [
        (
            &[&b"RL.TOKEN"[..], b"k", b"1", b"1", b"1h", b"WAIT", b"1s", b"AT", b"5"][..],
            "ERR syntax error: WAIT cannot be combined with AT or DRYRUN",
        ),
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1h", b"DRYRUN", b"WAIT", b"1s"],
            "ERR syntax error: WAIT cannot be combined with AT or DRYRUN",
        ),
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1h", b"WAIT", b"-1"],
            "ERR WAIT must be a duration between 0ms",
        ),
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1h", b"WAIT", b"soon"],
            "ERR invalid duration 'soon' for WAIT",
        ),
        (
            &[b"RL.TOKEN", b"k", b"1", b"1", b"1h", b"WAIT", b"\xff"],
            "ERR invalid duration '\\xff' for WAIT",
        ),
        (&[b"RL.TOKEN", b"k", b"1", b"1", b"1h", b"WAIT"], "ERR syntax error: WAIT needs a value"),
        (
            &[b"CL.THROTTLE", b"k2", b"1", b"1", b"1", b"WAIT", b"1s"],
            "ERR syntax error: unknown option 'WAIT'",
        ),
    ] {
        let text = error_text(&mut c, args);
        assert!(text.starts_with(expected), "{args:?}: {text}");
    }
}

#[test]
fn a_timed_out_request_with_ban_starts_the_ban() {
    let s = Server::start();
    let mut c = s.conn();
    line(&mut c, "RL.TOKEN k 1 1 1h");
    // While it waits, no ban; when it times out, its refusal starts one.
    let reply = line(&mut c, "RL.TOKEN k 1 1 1h BAN 2h WAIT 100");
    assert_eq!(reply[..3], [0, 1, 0]);
    assert!(reply[3] > 7_000_000, "the ban's wait: {reply:?}");
    let state = stored_state(&mut c, "k");
    assert!(state.iter().any(|(k, _)| k == "banned_until_ms"), "{state:?}");
}

/// The commands of an AOF file (RESP arrays of bulk strings, binary safe).
fn aof_commands(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn number(bytes: &[u8], at: &mut usize) -> usize {
        let end = *at + bytes[*at..].windows(2).position(|w| w == b"\r\n").expect("a line");
        let n = std::str::from_utf8(&bytes[*at + 1..end]).unwrap().parse().unwrap();
        *at = end + 2;
        n
    }
    let (mut at, mut commands) = (0, Vec::new());
    while at < bytes.len() {
        assert_eq!(bytes[at], b'*', "an array at {at}");
        let argc = number(bytes, &mut at);
        let mut args = Vec::new();
        for _ in 0..argc {
            let len = number(bytes, &mut at);
            args.push(bytes[at..at + len].to_vec());
            at += len + 2;
        }
        commands.push(args);
    }
    commands
}

/// Admissions after waiting propagate as the state they left (the judgement at the instant of
/// admission, never the waiting): the replica ends identical.
#[test]
fn replicas_follow_admissions_after_waiting() {
    let (master, replica) = master_and_replica();
    let mut rc = replica.conn();
    let mut mc = master.conn();
    line(&mut mc, "RL.TOKEN q 2 1 100 COST 2");
    let mut clients: Vec<Connection> = (0..5).map(|_| master.conn()).collect();
    for con in clients.iter_mut() {
        send(con, &["RL.SLIDE", "s", "1", "50", "WAIT", "10s"]);
        send(con, &["RL.TOKEN", "q", "2", "1", "100", "WAIT", "10s"]);
    }
    for con in clients.iter_mut() {
        assert_eq!(receive(con)[0], 1);
        assert_eq!(receive(con)[0], 1);
    }
    wait_in_sync(&master, &replica);
    for key in ["q", "s"] {
        assert_eq!(stored_state(&mut mc, key), stored_state(&mut rc, key), "{key}");
        assert_eq!(pexpiretime(&mut mc, key), pexpiretime(&mut rc, key), "{key}");
    }
    master.assert_alive();
    replica.assert_alive();
}

/// 1000 clients wait on one hot key admitting one request per ms: every one is admitted and
/// none is lost; none is early — each admission is propagated with the instant it used, and
/// the AOF shows them at least 1 ms apart (one token per ms, a bucket of one).
#[test]
fn a_thousand_waiters_on_one_hot_key() {
    const CLIENTS: usize = 1000;
    let s = Server::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut probe = s.conn();
    line(&mut probe, "RL.TOKEN hot 1 1 1 COST 1");
    let mut clients: Vec<Connection> = (0..CLIENTS).map(|_| s.conn()).collect();
    for con in clients.iter_mut() {
        send(con, &["RL.TOKEN", "hot", "1", "1", "1", "WAIT", "2m"]);
    }
    let mut groups: Vec<Vec<Connection>> = (0..20).map(|_| Vec::new()).collect();
    for (i, con) in clients.into_iter().enumerate() {
        groups[i % 20].push(con);
    }
    let threads: Vec<_> = groups
        .into_iter()
        .map(|mut group| {
            std::thread::spawn(move || {
                group.iter_mut().map(|con| receive(con)[0]).collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<i64> = threads.into_iter().flat_map(|t| t.join().expect("reader")).collect();
    assert_eq!(answers.len(), CLIENTS);
    assert!(answers.iter().all(|admitted| *admitted == 1), "all admitted");
    assert_eq!(info_field(&mut probe, "ratelimit", "ratelimit_waiting"), "0");
    // The AOF: every admission as the state it left (`RL.RESTORE hot <payload>`), whose
    // `updated_ms` is the instant it was admitted at.
    let dir = s.path("appendonlydir");
    let mut instants: Vec<i64> = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the AOF directory") {
        let path = entry.expect("an AOF file").path();
        if path.extension().is_some_and(|e| e == "aof") {
            for command in aof_commands(&std::fs::read(&path).unwrap()) {
                if command.first().is_some_and(|n| n.eq_ignore_ascii_case(b"rl.restore")) {
                    let (limiter, _) = ratelimit_core::store::codec::decode_value(&command[2])
                        .expect("an RL.RESTORE payload");
                    let ratelimit_core::algorithms::limiter::Limiter::Token(bucket) = limiter
                    else {
                        panic!("not a token bucket: {limiter:?}");
                    };
                    instants.push(bucket.updated_ms);
                }
            }
        }
    }
    assert_eq!(instants.len(), CLIENTS + 1, "every admission propagated once");
    for pair in instants.windows(2) {
        assert!(pair[1] > pair[0], "two admissions within one ms: {pair:?}");
    }
    s.assert_alive();
}

/// The first five integers of a limiting reply or an `RL.ACQUIRE` reply (which ends with the
/// lease id, nil when refused).
fn verdict_of(reply: &Value) -> Vec<i64> {
    let Value::Array(items) = reply else {
        panic!("not an array: {reply:?}");
    };
    items.iter().take(5).map(|v| redis::from_redis_value(v).expect("an integer")).collect()
}

/// Each `(set-up, waiting call)` pair, with `{k}` replaced by a key of its own, sent `runs`
/// times at once, each run on its own connection as one write, so that both calls of a run
/// usually run in the same ms: the waiting call is then refused with `retry_after_ms` = the
/// wait its `WAIT` names (1 s), exactly. Returns every waiting call's verdict, by pair.
fn set_up_and_wait(s: &Server, pairs: &[(&str, &str)], runs: usize) -> Vec<Vec<Vec<i64>>> {
    let mut sent = Vec::new();
    for (p, (set_up, waiting)) in pairs.iter().enumerate() {
        for run in 0..runs {
            let key = format!("b{p}:{run}");
            let mut con = s.conn();
            let mut pipe = redis::pipe();
            for command in [set_up, waiting] {
                let words: Vec<String> =
                    command.split_whitespace().map(|w| w.replace("{k}", &key)).collect();
                pipe.add_command(redis::cmd(&words[0]).arg(&words[1..]).clone());
            }
            con.send_packed_command(&pipe.get_packed_pipeline()).expect("send");
            sent.push((p, con));
        }
    }
    let mut verdicts = vec![Vec::new(); pairs.len()];
    for (p, mut con) in sent {
        let set_up: Value = con.recv_response().expect("the set-up's reply");
        assert_eq!(verdict_of(&set_up)[0], 1, "{}: {set_up:?}", pairs[p].0);
        let waited: Value = con.recv_response().expect("the waiting call's reply");
        verdicts[p].push(verdict_of(&waited));
    }
    verdicts
}

/// Every call that takes `WAIT`, on a key whose room the set-up used up, and the
/// `retry_after_ms` the call gets in the ms of the set-up.
const AT_THE_INSTANT: [(&str, &str, u64); 8] = [
    ("RL.TOKEN {k} 1 1 1s", "RL.TOKEN {k} 1 1 1s", 1000),
    ("RL.PERIOD {k} 1 1s", "RL.PERIOD {k} 1 1s", 1000),
    ("RL.SLIDE {k} 1 1s", "RL.SLIDE {k} 1 1s", 1000),
    ("RL.SLIDE {k} 1 1s BUCKETS 4 ANCHOR", "RL.SLIDE {k} 1 1s BUCKETS 4 ANCHOR", 1250),
    ("RL.LEAKY {k} 1 1 1s", "RL.LEAKY {k} 1 1 1s", 1000),
    ("RL.LEAKY {k} 1 1 1s NODELAY", "RL.LEAKY {k} 1 1 1s NODELAY", 1000),
    ("RL.ACQUIRE {k} 1 1s", "RL.ACQUIRE {k} 1 1s", 1000),
    ("RL.HIT one {k}", "RL.HIT one {k}", 1000),
];

/// [`AT_THE_INSTANT`]'s pairs, the call waiting `retry_after_ms` less `short` ms.
fn waiting_for(short: u64) -> Vec<(String, String)> {
    AT_THE_INSTANT
        .iter()
        .map(|(set_up, call, retry)| {
            (set_up.to_string(), format!("{call} WAIT {}ms", retry - short))
        })
        .collect()
}

/// Runs [`waiting_for`]`(short)` 20 times each, at once, on a fresh server with the policy
/// `RL.HIT` uses; returns each waiting call and its verdicts.
fn wait_at_the_boundary(short: u64) -> Vec<(String, Vec<Vec<i64>>)> {
    let s = Server::start();
    let mut c = s.conn();
    let _: Value = run(&mut c, &["RL.POLICY", "SET", "one", "TOKEN", "1", "1", "1s"]).unwrap();
    let owned = waiting_for(short);
    let pairs: Vec<(&str, &str)> = owned.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let verdicts = set_up_and_wait(&s, &pairs, 20);
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_waiting"), "0");
    s.assert_alive();
    owned.into_iter().map(|(_, waiting)| waiting).zip(verdicts).collect()
}

/// Issue 39: `WAIT` of exactly the `retry_after_ms` the call would be refused with ends
/// admitted, for every algorithm, `RL.ACQUIRE` and `RL.HIT`: the timeout instant is judged
/// like any other, and the module timer (whole ms, often a ms late) does not turn it into a
/// refusal with `retry_after_ms` 0. Twenty runs of each at once (a late timer is random).
#[test]
fn a_wait_of_exactly_retry_after_is_admitted() {
    for (waiting, verdicts) in wait_at_the_boundary(0) {
        for verdict in verdicts {
            assert_eq!(verdict[0], 1, "{waiting}: {verdict:?}");
        }
    }
}

/// The other side of the instant: a wait one ms shorter than `retry_after_ms` ends refused
/// with the `retry_after_ms` of its timeout instant, 1 — never 0, and never admitted however
/// late the timer fires. A run whose two calls straddle a ms boundary waits exactly its
/// `retry_after` and is admitted (with a debug build, many do); some runs must not.
#[test]
fn a_wait_one_ms_short_is_refused_with_retry_after_1() {
    for (waiting, verdicts) in wait_at_the_boundary(1) {
        let refused: Vec<&Vec<i64>> = verdicts.iter().filter(|v| v[0] == 0).collect();
        for verdict in &refused {
            assert_eq!(verdict[3], 1, "{waiting}: {verdict:?}");
        }
        assert!(!refused.is_empty(), "{waiting}: no run in one ms: {verdicts:?}");
    }
}
