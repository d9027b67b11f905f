//! redis-ratelimit: native, atomic, integer-exact rate limiting for Redis.
//!
//! `core` holds the algorithms as pure functions; `shell` is the thin Redis layer.

pub mod core;
