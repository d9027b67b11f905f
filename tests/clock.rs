//! Clock trouble: `AT` jumping back hours and forward years, and a replica promoted while its
//! clock disagrees with the old master's. Never more permits than the limiter allows, never a
//! crash.

mod common;
use common::*;

const T0: i64 = 4_000_000_000_000;
const HOUR: i64 = 3_600_000;
const YEAR: i64 = 365 * 24 * HOUR;

/// (a call that takes all 5 permits, a 1-permit probe, how to read admission)
type Case = (Vec<String>, Vec<String>, fn(&[i64]) -> bool);

/// One exhausting call and one probe per algorithm and mode.
fn commands(key: &str) -> Vec<Case> {
    let k = key.to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let rl = |r: &[i64]| r[0] == 1;
    let cell = |r: &[i64]| r[0] == 0;
    vec![
        (
            v(&["RL.TOKEN", &format!("{k}:t"), "5", "1", "1h", "COST", "5"]),
            v(&["RL.TOKEN", &format!("{k}:t"), "5", "1", "1h"]),
            rl,
        ),
        (
            v(&["RL.PERIOD", &format!("{k}:p"), "5", "1h", "COST", "5"]),
            v(&["RL.PERIOD", &format!("{k}:p"), "5", "1h"]),
            rl,
        ),
        (
            v(&["RL.SLIDE", &format!("{k}:s"), "5", "1h", "COST", "5"]),
            v(&["RL.SLIDE", &format!("{k}:s"), "5", "1h"]),
            rl,
        ),
        (
            v(&["RL.SLIDE", &format!("{k}:b"), "5", "1h", "BUCKETS", "6", "COST", "5"]),
            v(&["RL.SLIDE", &format!("{k}:b"), "5", "1h", "BUCKETS", "6"]),
            rl,
        ),
        (
            v(&["RL.LEAKY", &format!("{k}:l"), "5", "1", "1h", "COST", "5"]),
            v(&["RL.LEAKY", &format!("{k}:l"), "5", "1", "1h"]),
            rl,
        ),
        (
            v(&["CL.THROTTLE", &format!("{k}:g"), "4", "1", "3600", "5"]),
            v(&["CL.THROTTLE", &format!("{k}:g"), "4", "1", "3600"]),
            cell,
        ),
    ]
}

fn at(c: &mut Connection, args: &[String], when: i64) -> Vec<i64> {
    let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
    let when = when.to_string();
    full.extend(["AT", &when]);
    ints(c, &full)
}

#[test]
fn at_jumping_back_and_forward() {
    let s = Server::start();
    let mut c = s.conn();
    for (exhaust, probe, admitted) in commands("clock") {
        assert!(admitted(&at(&mut c, &exhaust, T0)), "{exhaust:?}");
        // Hours or days back: no time has passed since T0, nothing is granted.
        for back in [1, HOUR, 5 * HOUR, 1000 * HOUR, T0] {
            let reply = at(&mut c, &probe, T0 - back);
            assert!(!admitted(&reply), "{probe:?} at T0-{back}: {reply:?}");
        }
        // Forward years: back in the initial state.
        assert!(admitted(&at(&mut c, &probe, T0 + 3 * YEAR)), "{probe:?}");
        // And back again from there: still nothing extra.
        let reply = at(&mut c, &probe, T0);
        assert!(reply.len() == 5, "{reply:?}");
    }
    s.assert_alive();
}

/// A replica promoted while its clock is behind the old master's: the limiter state came with
/// `updated_ms` from the master, so calls at the new master's earlier clock grant nothing.
#[test]
fn promoted_replica_with_a_clock_behind() {
    let master = Server::start();
    let port = master.port.to_string();
    let replica = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let mut rc = replica.conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while info_field(&mut rc, "replication", "master_link_status") != "up" {
        assert!(std::time::Instant::now() < deadline, "replica link");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut mc = master.conn();
    let cmds = commands("failover");
    for (exhaust, _, admitted) in &cmds {
        assert!(admitted(&at(&mut mc, exhaust, T0)));
    }
    let offset: i64 = info_field(&mut mc, "replication", "master_repl_offset").parse().unwrap();
    while info_field(&mut rc, "replication", "slave_repl_offset").parse::<i64>().unwrap_or(0)
        < offset
    {
        assert!(std::time::Instant::now() < deadline, "replica offset");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(master);
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut rc).unwrap();
    // The promoted node's clock "disagrees": 10 minutes behind, then the real (far earlier) clock.
    for (_, probe, admitted) in &cmds {
        let reply = at(&mut rc, probe, T0 - 600_000);
        assert!(!admitted(&reply), "{probe:?}: {reply:?}");
        let plain: Vec<&str> = probe.iter().map(String::as_str).collect();
        let reply = ints(&mut rc, &plain);
        assert!(!admitted(&reply), "{probe:?} on the server clock: {reply:?}");
    }
    replica.assert_alive();
}
