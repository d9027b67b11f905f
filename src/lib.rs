//! redis-ratelimit: native, atomic, integer-exact rate limiting for Redis.
//!
//! The algorithms, argument parsing and the per-key judgement live in the pure
//! `ratelimit-core` crate (no Redis dependency); this crate is the thin Redis layer `shell`:
//! key access, the data type, replication, replies, registration, INFO.

#![deny(clippy::undocumented_unsafe_blocks)]
// Never panic in a command path: no unwrap/expect/panic outside tests (a panic aborts the
// user's redis-server).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg_attr(test, allow(dead_code))]
mod shell;

#[cfg(not(test))]
mod module {
    use redis_module::configuration::ConfigurationFlags;
    use redis_module::{redis_module, InfoContext, RedisResult};

    use crate::shell::features::persist::POLICIES_IN_RDB;
    use crate::shell::server::config::{
        LEASE_MAX, LEASE_MAX_DEFAULT, LEASE_MAX_LIMIT, POLICY_MAX, POLICY_MAX_DEFAULT,
        POLICY_MAX_LIMIT, SLIDE_LOG_MAX, SLIDE_LOG_MAX_DEFAULT, SLIDE_LOG_MAX_LIMIT, TOP_K,
        TOP_K_DEFAULT, TOP_K_LIMIT, TOP_WINDOW, TOP_WINDOW_DEFAULT, TOP_WINDOW_LIMIT,
    };
    use crate::shell::server::datatype::LIMITER_TYPE;
    use crate::shell::{info::add_info, init};

    redis_module! {
        name: "ratelimit",
        version: crate::shell::server::version::MODULE_VERSION,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [LIMITER_TYPE],
        init: init,
        info: add_info,
        configurations: [
            i64: [
                ["slide-log-max", &SLIDE_LOG_MAX, SLIDE_LOG_MAX_DEFAULT, 1, SLIDE_LOG_MAX_LIMIT, ConfigurationFlags::DEFAULT, None],
                ["lease-max", &LEASE_MAX, LEASE_MAX_DEFAULT, 1, LEASE_MAX_LIMIT, ConfigurationFlags::DEFAULT, None],
                ["policy-max", &POLICY_MAX, POLICY_MAX_DEFAULT, 0, POLICY_MAX_LIMIT, ConfigurationFlags::DEFAULT, None],
                ["top-k", &TOP_K, TOP_K_DEFAULT, 0, TOP_K_LIMIT, ConfigurationFlags::DEFAULT, None],
                ["top-window", &TOP_WINDOW, TOP_WINDOW_DEFAULT, 1, TOP_WINDOW_LIMIT, ConfigurationFlags::DEFAULT, None],
            ],
            string: [],
            bool: [
                ["policies-in-rdb", &POLICIES_IN_RDB, false, ConfigurationFlags::IMMUTABLE, None],
            ],
            enum: [],
            module_args_as_configuration: true,
        ]
    }
}
