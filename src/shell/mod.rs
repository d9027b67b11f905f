//! The thin Redis layer: argument access, keys, the data type, replication, replies.
//! All rate-limiting logic lives in the `ratelimit-core` crate.

pub mod api;
pub mod call;
pub mod commands;
pub mod config;
pub mod datatype;
pub mod key;
pub mod leases;
pub mod limiting;
pub mod persist;
pub mod policies;
pub mod propagation;
pub mod registry;
pub mod reply;
pub mod slots;
pub mod specs;
pub mod stats;
pub mod top;
pub mod values;
pub mod version;
pub mod wait;

use redis_module::{raw, Context, RedisString, Status};

/// Module initialisation, after the data type and configuration are registered: resolves the
/// API (refusing servers older than 7.0.5), sets module options, registers the commands.
pub fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    let api = match api::resolve() {
        Ok(api) => api,
        Err(missing) => {
            ctx.log_warning(&format!(
                "ratelimit: this server lacks {missing}; Redis >= 7.0.5 is required"
            ));
            return Status::Err;
        }
    };
    // I/O errors are handled (rdb_load checks them), so replicas may load diskless; async
    // loading (`repl-diskless-load swapdb`) is handled: the one state outside keys, the policy
    // table, is staged while a sync loads and kept if it aborts (`persist.rs`); keys are
    // signalled as modified only when an admitted call changed them.
    let options = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD
        | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED;
    // Valkey ≥ 9: atomic slot migration is declared (and its event heard): `slots.rs`.
    let options = options as i32 | slots::declares_atomic_slot_migration(api, ctx.ctx);
    unsafe { (api.set_module_options)(ctx.ctx, options) };
    // Waiters are judged again when their key may have gained room: deleted, expired, evicted.
    let events = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    let subscribe = api.subscribe_to_keyspace_events;
    unsafe { subscribe(ctx.ctx, events, Some(wait::on_keyspace_event)) };
    values::init();
    if let Err(e) = propagation::init(api, ctx.ctx) {
        ctx.log_warning(&format!("ratelimit: {e}"));
        return Status::Err;
    }
    if let Err(e) = persist::init(ctx.ctx) {
        ctx.log_warning(&format!("ratelimit: {e}"));
        return Status::Err;
    }
    let acl_category = registry::add_acl_category(ctx.ctx);
    for spec in specs::COMMANDS {
        if let Err(e) = registry::register(ctx.ctx, spec, acl_category) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
    }
    for container in specs::CONTAINERS {
        if let Err(e) = registry::register_container(ctx.ctx, container, acl_category) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
    }
    Status::Ok
}
