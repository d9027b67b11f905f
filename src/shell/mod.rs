//! The thin Redis layer, in four layers whose imports run one way (top to bottom):
//!
//! - `commands/`: the command table and each command's frame, from arguments to reply, and
//!   the command metadata registered with the server;
//! - `features/`: waiting (`WAIT`), the policy table and its RDB storage, `RL.TOP`'s summary,
//!   the `INFO` counters;
//! - `execution/`: one call (its arguments, errors, clock), a judged change applied to its key
//!   and propagated; the limiting and lease requests judged and applied;
//! - `server/`: the server's API table, keys, value words, the data type, replies,
//!   configuration, the version, propagation's form, command registration.
//!
//! `tests/layers.rs` fails when a file imports from a layer above its own. All rate-limiting
//! logic lives in the `ratelimit-core` crate.

pub mod commands;
pub mod execution;
pub mod features;
pub mod info;
pub mod server;

use redis_module::{raw, Context, RedisString, Status};

/// Module initialisation, after the data type and configuration are registered: resolves the
/// API (refusing servers older than 7.0.5), sets module options, registers the commands.
pub fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    let api = match server::api::resolve() {
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
    // table, is staged while a sync loads and kept if it aborts (`features::persist`); keys are
    // signalled as modified only when an admitted call changed them.
    let options = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD
        | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED;
    // Valkey ≥ 9: atomic slot migration is declared (and its event heard): `server::events`.
    let options = options as i32 | server::events::declares_atomic_slot_migration(api, ctx.ctx);
    unsafe { (api.set_module_options)(ctx.ctx, options) };
    server::values::init();
    let listeners = server::events::Listeners {
        persistence: features::persist::on_persistence,
        async_load: features::persist::on_async_load,
        loading: features::persist::on_loading,
        slots_left: features::wait::slots_left,
        slots_stayed: features::wait::slots_stayed,
        key_gone: features::wait::key_gone,
    };
    if let Err(e) = server::events::init(api, ctx.ctx, listeners) {
        ctx.log_warning(&format!("ratelimit: {e}"));
        return Status::Err;
    }
    if let Err(e) = features::persist::init(ctx.ctx) {
        ctx.log_warning(&format!("ratelimit: {e}"));
        return Status::Err;
    }
    let acl_category = server::registry::add_acl_category(ctx.ctx);
    for spec in commands::specs::COMMANDS {
        if let Err(e) = server::registry::register(ctx.ctx, spec, acl_category) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
    }
    for container in commands::specs::CONTAINERS {
        if let Err(e) = server::registry::register_container(ctx.ctx, container, acl_category) {
            ctx.log_warning(&format!("ratelimit: {e}"));
            return Status::Err;
        }
    }
    Status::Ok
}
