//! RL.TOKEN from Rust with the `redis` crate.
//!
//!     cargo run --manifest-path examples/rust/Cargo.toml -- 127.0.0.1:6379
//!
//! Seven requests against a bucket of 5 tokens refilled 1 per minute: 5 admitted, 2 limited.
//! tests/examples.rs runs it against a real server and checks the output.

fn main() -> redis::RedisResult<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:6379".into());
    let mut con = redis::Client::open(format!("redis://{addr}"))?.get_connection()?;
    let mut admitted = 0;
    // readme-begin
    for i in 1..=7 {
        let (allowed, limit, remaining, retry_ms, _reset_ms): (i64, i64, i64, i64, i64) =
            redis::cmd("RL.TOKEN")
                .arg("api:key42")
                .arg(5) // bucket of 5,
                .arg(1) // +1 token
                .arg("1m") // per minute
                .query(&mut con)?;
        if allowed == 0 {
            println!("{i} limited retry_after_ms={retry_ms}"); // HTTP 429, Retry-After
            continue;
        }
        admitted += 1;
        println!("{i} allowed remaining={remaining} limit={limit}");
    }
    // readme-end
    println!("admitted {admitted} of 7");
    Ok(())
}
