//! One hot key hammered by 1000 concurrent connections per algorithm: the total admitted is
//! exactly the limiter's bound, no call errors, and every connection is released afterwards.

mod common;
use common::*;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 1000;
const THREADS: usize = 50;
const CALLS_PER_CONNECTION: usize = 3;
/// All calls at one instant, so the bound is exact and independent of scheduling.
const AT: &str = "4000000000000";

/// Sends `CALLS_PER_CONNECTION` calls of `args` on each of `CONNECTIONS` open connections and
/// returns how many were admitted (per `admitted(reply)`).
fn hammer(s: &Server, args: &[&str], admitted: Admitted) -> i64 {
    let total = Arc::new(AtomicI64::new(0));
    let per_thread = CONNECTIONS / THREADS;
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    // Open every connection first, so all 1000 are connected at once.
    let pools: Vec<Vec<Connection>> =
        (0..THREADS).map(|_| (0..per_thread).map(|_| s.conn()).collect()).collect();
    let mut probe = s.conn();
    let clients: usize = info_field(&mut probe, "clients", "connected_clients").parse().unwrap();
    assert!(clients > CONNECTIONS, "{clients} clients connected");
    let handles: Vec<_> = pools
        .into_iter()
        .map(|mut pool| {
            let total = Arc::clone(&total);
            let args = args.clone();
            std::thread::spawn(move || {
                for _ in 0..CALLS_PER_CONNECTION {
                    for con in pool.iter_mut() {
                        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                        let reply: Vec<i64> = cmd(&refs).query(con).expect("no call may fail");
                        if admitted(&reply) {
                            total.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("client thread");
    }
    total.load(Ordering::Relaxed)
}

/// Whether a reply admits the request (the layouts differ: RL.* vs redis-cell).
type Admitted = fn(&[i64]) -> bool;

/// (name, command, how to read admission, exact number admitted)
type Case<'a> = (&'a str, Vec<&'a str>, Admitted, i64);

fn rl_admitted(reply: &[i64]) -> bool {
    reply[0] == 1
}

fn cell_admitted(reply: &[i64]) -> bool {
    reply[0] == 0
}

fn assert_connections_released(s: &Server) {
    let mut c = s.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients: usize = info_field(&mut c, "clients", "connected_clients").parse().unwrap();
        if clients == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "{clients} connections still open");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hot_key_admits_exactly_the_bound() {
    let s = Server::start_with(&["--maxclients", "4000"]);
    let cases: [Case; 7] = [
        ("token", vec!["RL.TOKEN", "hot:t", "500", "1", "1d", "AT", AT], rl_admitted, 500),
        ("period", vec!["RL.PERIOD", "hot:p", "700", "1d", "AT", AT], rl_admitted, 700),
        ("leaky", vec!["RL.LEAKY", "hot:l", "300", "1", "1d", "AT", AT], rl_admitted, 300),
        (
            "leaky cost 3",
            vec!["RL.LEAKY", "hot:l3", "300", "1", "1d", "COST", "3", "AT", AT],
            rl_admitted,
            100,
        ),
        ("gcra", vec!["CL.THROTTLE", "hot:g", "249", "1", "86400", "AT", AT], cell_admitted, 250),
        ("slide", vec!["RL.SLIDE", "hot:s", "400", "1d", "AT", AT], rl_admitted, 400),
        (
            "slide buckets",
            vec!["RL.SLIDE", "hot:b", "400", "1d", "BUCKETS", "24", "AT", AT],
            rl_admitted,
            400,
        ),
    ];
    let started = Instant::now();
    for (name, args, admitted, bound) in cases {
        let total = hammer(&s, &args, admitted);
        assert_eq!(total, bound, "{name}");
        assert_connections_released(&s);
    }
    eprintln!(
        "load: {} algorithms × {CONNECTIONS} connections × {CALLS_PER_CONNECTION} calls in {:?}",
        7,
        started.elapsed()
    );
    s.assert_alive();
}
