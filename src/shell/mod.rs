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
/// API (refusing servers older than 7.0.5), sets module options, hands the server layer the
/// features' event handlers (plain `fn`s: `server::events`, `server::slots`), registers the
/// commands. Every server call here goes through the server layer (no raw FFI).
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
    // Valkey ≥ 9: atomic slot migration is declared (and its event heard): `server::slots`.
    server::slots::on_export_end(server::slots::ExportEnd {
        left: features::wait::slots_left,
        stayed: features::wait::slots_stayed,
    });
    let options = options as i32 | server::slots::declares_atomic_slot_migration(api, ctx.ctx);
    api.set_options(ctx.ctx, options);
    // Waiters are judged again when their key may have gained room: deleted, expired, evicted.
    let events = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    server::events::on_keyspace(api, ctx.ctx, events, features::wait::key_named_changed);
    server::values::init();
    if let Err(e) = server::propagation::init(api, ctx.ctx) {
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
