//! The pure core of redis-ratelimit: rate-limiting algorithms as pure functions
//! `(stored state, params, now_ms, cost) -> (decision, new state)`.
//!
//! This crate has no Redis dependency (its `Cargo.toml` lists none): time comes in as
//! an argument, so every algorithm is tested with simulated time. All state is integers in
//! absolute unix milliseconds; results are exact rational arithmetic on those integers.
//!
//! The modules are grouped by what they are: `algorithms/` (each algorithm and what they
//! share), `store/` (the forms a limiter is stored in), `grammar/` (every command's arguments),
//! `steps/` (what a command does to its key), `features/` (policies, `RL.TOP`, waiters).
//! Tests of `foo.rs` live beside it in `foo_tests.rs` (`#[path]`), of a folder module in its
//! `tests.rs`; `testing/` holds the shared test support and the crate-wide property fuzzers.

#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
// Never panic in a command path: no unwrap/expect/panic outside tests (a panic aborts the
// user's redis-server).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod algorithms;
pub mod features;
pub mod grammar;
pub mod steps;
pub mod store;

#[cfg(test)]
mod testing;

// The names a caller of the core meets first, at the root: a request parsed from arguments,
// the limiter a key holds, judging it, and the stored forms. Everything else by its path.
pub use algorithms::decision::{Decided, Decision};
pub use algorithms::limiter::Limiter;
pub use grammar::error::ArgError;
pub use grammar::request::{AcquireRequest, AllRequest, Command, Limit, Request};
pub use steps::judge::{judge_key, AllVerdict, Change, KeyError, Verdict};
pub use store::codec::{decode_value, encode_value};
pub use store::held::Held;
pub use store::packed::PackedLimiter;
