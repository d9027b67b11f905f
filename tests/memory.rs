//! Memory: idle limiters disappear by themselves, and what a key costs.

mod common;
use common::*;
use redis::ConnectionLike;
use std::time::{Duration, Instant};

const KEYS: usize = 100_000;
const BATCH: usize = 5_000;

fn used_memory(c: &mut Connection) -> i64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

/// Creates `KEYS` limiters with one admitted call each, `template` with `{}` for the index.
fn create_keys(c: &mut Connection, template: &[&str]) {
    for start in (0..KEYS).step_by(BATCH) {
        let mut pipe = redis::pipe();
        for i in start..start + BATCH {
            let args: Vec<String> = template
                .iter()
                .map(|a| a.replace("{}", &i.to_string()))
                .collect();
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            pipe.add_command(cmd(&refs));
        }
        let replies = c
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, BATCH)
            .unwrap();
        assert!(replies.iter().all(|r| !matches!(r, Value::ServerError(_))));
    }
}

#[test]
fn idle_limiters_expire_by_themselves() {
    let s = Server::start_with(&["--hz", "100"]);
    let mut c = s.conn();
    let start_memory = used_memory(&mut c);
    let started = Instant::now();
    create_keys(
        &mut c,
        &["RL.TOKEN", "user:{}", "10", "1", "3s", "COST", "1"],
    );
    let size: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, KEYS);
    let peak = used_memory(&mut c);
    assert!(
        peak - start_memory > 100 * KEYS as i64 / 2,
        "{start_memory} → {peak}"
    );
    // Nobody touches the keys again: Redis' active expiry must remove them all.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let size: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if size == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{size} limiters still alive");
        std::thread::sleep(Duration::from_millis(100));
    }
    let end_memory = used_memory(&mut c);
    // Back near the start (allocator slack and the main dict's table may remain).
    assert!(
        end_memory - start_memory < (peak - start_memory) / 4,
        "start {start_memory}, peak {peak}, end {end_memory}"
    );
    eprintln!(
        "memory hygiene: {KEYS} limiters gone in {:?}; used_memory {start_memory} → {peak} → {end_memory}",
        started.elapsed()
    );
    s.assert_alive();
}
