//! The pure core of redis-ratelimit: rate-limiting algorithms as pure functions
//! `(stored state, params, now_ms, cost) -> (decision, new state)`.
//!
//! This crate has no Redis dependency (its `Cargo.toml` lists none): time comes in as
//! an argument, so every algorithm is tested with simulated time. All state is integers in
//! absolute unix milliseconds; results are exact rational arithmetic on those integers.

#![deny(unsafe_code)]

pub mod args;
pub mod arith;
pub mod at_most;
pub mod ban;
pub mod bounded;
pub mod charge;
pub mod codec;
pub mod decision;
pub mod error;
pub mod gcra;
pub mod held;
pub mod inline;
pub mod inspect;
pub mod judge;
pub mod leaky;
pub mod lease;
pub mod lease_key;
pub mod limiter;
pub mod packed;
pub mod period;
pub mod policy;
pub mod refund;
pub mod request;
pub mod slide;
pub mod state;
pub mod token;
pub mod top;
pub mod waiters;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod refund_tests;
#[cfg(test)]
mod testing;
