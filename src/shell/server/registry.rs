//! Command registration with full `COMMAND INFO` / `COMMAND DOCS` metadata on Redis 7.0.
//!
//! The crate's `#[command]` attribute needs `RedisModule_SetCommandACLCategories` (Redis 7.2),
//! so commands are created with the raw `CreateCommand` and then described with
//! `SetCommandInfo` (7.0+): arity (enforced by Redis), key spec, summary, complexity, tips.
//! Every server function it calls comes from the API table (`server::api`); the optional
//! ones (`AddACLCategory`, `SetCommandACLCategories`: Redis 7.2+, Valkey) are `None` on 7.0.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::commands::{get_redis_key_spec, BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::api::{api, Api};

/// A raw command handler.
pub type Handler = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

/// One argument as `COMMAND DOCS` describes it (all strings static, so nothing is allocated).
pub struct ArgSpec {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword that introduces it (`COST`, `AT`, …), if any.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// May be repeated (`key [key ...]`).
    pub multiple: bool,
    /// One line for `COMMAND DOCS`.
    pub summary: Option<&'static CStr>,
}

/// What an argument is.
pub enum ArgKind {
    Key,
    Integer,
    String,
    UnixTime,
    /// A keyword alone (`DRYRUN`).
    PureToken,
    /// Exactly one of the sub-arguments.
    OneOf(&'static [ArgSpec]),
    /// All the sub-arguments, in order.
    Block(&'static [ArgSpec]),
}

impl ArgSpec {
    pub const fn new(name: &'static CStr, kind: ArgKind) -> ArgSpec {
        ArgSpec { name, kind, token: None, optional: false, multiple: false, summary: None }
    }
    /// An optional argument introduced by `token`.
    pub const fn option(token: &'static CStr, name: &'static CStr, kind: ArgKind) -> ArgSpec {
        ArgSpec { name, kind, token: Some(token), optional: true, multiple: false, summary: None }
    }
    /// A required argument introduced by `token` (an alternative inside a one-of).
    pub const fn keyword(token: &'static CStr, name: &'static CStr, kind: ArgKind) -> ArgSpec {
        ArgSpec { name, kind, token: Some(token), optional: false, multiple: false, summary: None }
    }
    pub const fn optional(self) -> ArgSpec {
        ArgSpec { optional: true, ..self }
    }
    pub const fn multiple(self) -> ArgSpec {
        ArgSpec { multiple: true, ..self }
    }
    pub const fn doc(self, summary: &'static CStr) -> ArgSpec {
        ArgSpec { summary: Some(summary), ..self }
    }
}

/// The zero-terminated raw argument array for `args`; nested arrays are kept in `keep` until
/// Redis has copied them.
fn raw_args(
    args: &[ArgSpec],
    keep: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let (type_, subargs) = match &a.kind {
                ArgKind::Key => (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY, None),
                ArgKind::Integer => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER, None)
                }
                ArgKind::String => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING, None)
                }
                ArgKind::UnixTime => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME, None)
                }
                ArgKind::PureToken => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN, None)
                }
                ArgKind::OneOf(sub) => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF, Some(*sub))
                }
                ArgKind::Block(sub) => {
                    (raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK, Some(*sub))
                }
            };
            raw::RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_,
                key_spec_index: if matches!(a.kind, ArgKind::Key) { 0 } else { -1 },
                token: a.token.map_or(ptr::null(), CStr::as_ptr),
                summary: a.summary.map_or(ptr::null(), CStr::as_ptr),
                since: ptr::null(),
                flags: {
                    let optional = if a.optional { raw::REDISMODULE_CMD_ARG_OPTIONAL } else { 0 };
                    let multiple = if a.multiple { raw::REDISMODULE_CMD_ARG_MULTIPLE } else { 0 };
                    (optional | multiple) as c_int
                },
                deprecated_since: ptr::null(),
                subargs: subargs.map_or(ptr::null_mut(), |sub| raw_args(sub, keep)),
                display_text: ptr::null(),
            }
        })
        .collect();
    // SAFETY: an all-zero `RedisModuleCommandArg` (null pointers, zero ints) ends the array.
    out.push(unsafe { std::mem::zeroed() });
    let ptr = out.as_mut_ptr();
    keep.push(out);
    ptr
}

/// Everything Redis needs to know about one command.
pub struct CommandSpec {
    pub name: &'static CStr,
    pub handler: Handler,
    /// Redis command flags, e.g. `write deny-oom fast`.
    pub flags: &'static CStr,
    /// Redis arity: positive = exact, negative = at least that many (command name included).
    pub arity: c_int,
    /// Whether the keys are only read (`RO access`) rather than updated (`RW access update`).
    pub read_only: bool,
    /// Where the keys are.
    pub keys: KeyLayout,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The arguments after the command name, for `COMMAND DOCS`.
    pub args: &'static [ArgSpec],
}

/// Where a command's keys are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyLayout {
    /// No key (`RL.POLICY`'s subcommands, `RL.TOP`: node state, like `FUNCTION`).
    None,
    /// One key, argument 1.
    One,
    /// One key, argument 2 (`RL.HIT name key`).
    Second,
    /// `numkeys key [key ...]`: the count at argument 1, the keys after it. Such commands
    /// carry the `getkeys-api` flag and answer key-position requests, because Redis Cluster
    /// routes movable-key module commands only that way (key specs serve `COMMAND` and ACLs).
    Counted,
}

static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// The module's own ACL category, `@ratelimit`, on servers that have the API (Redis 7.2+,
/// Valkey); it can only be added while the module loads. Whether it was added.
pub fn add_acl_category(ctx: *mut RedisModuleCtx) -> bool {
    let Some(add) = api().and_then(|api| api.add_acl_category) else {
        return false;
    };
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    unsafe { add(ctx, c"ratelimit".as_ptr()) == raw::REDISMODULE_OK as c_int }
}

/// The ACL categories of a command: `@write` or `@read`, `@fast` unless it is `O(N)` in its
/// keys, and `@ratelimit` where the server has it.
fn acl_categories(spec: &CommandSpec, with_module_category: bool) -> &'static CStr {
    let fast = spec.flags.to_bytes().split(|b| *b == b' ').any(|w| w == b"fast");
    match (spec.read_only, fast, with_module_category) {
        (true, true, true) => c"read fast ratelimit",
        (true, true, false) => c"read fast",
        (true, false, true) => c"read ratelimit",
        (true, false, false) => c"read",
        (false, true, true) => c"write fast ratelimit",
        (false, true, false) => c"write fast",
        (false, false, true) => c"write ratelimit",
        (false, false, false) => c"write",
    }
}

/// Creates the command and attaches its metadata. On servers with ACL categories for module
/// commands (Redis 7.2+, Valkey) it also gets its categories; on 7.0 it has none.
pub fn register(
    ctx: *mut RedisModuleCtx,
    spec: &CommandSpec,
    with_module_category: bool,
) -> Result<(), String> {
    let name = spec.name.to_string_lossy();
    let api = api().ok_or("the module API is not resolved")?;
    let (create, get) = (api.create_command, api.get_command);
    let (first, last, step) = key_range(spec.keys);
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    let created = unsafe {
        create(ctx, spec.name.as_ptr(), Some(spec.handler), spec.flags.as_ptr(), first, last, step)
    };
    if created != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not create command {name}"));
    }
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    let command = unsafe { get(ctx, spec.name.as_ptr()) };
    if command.is_null() {
        return Err(format!("could not find command {name}"));
    }
    describe(api, command, spec, acl_categories(spec, with_module_category))
}

/// The legacy `firstkey, lastkey, keystep` of a key layout.
fn key_range(keys: KeyLayout) -> (c_int, c_int, c_int) {
    match keys {
        KeyLayout::None | KeyLayout::Counted => (0, 0, 0),
        KeyLayout::One => (1, 1, 1),
        KeyLayout::Second => (2, 2, 1),
    }
}

/// Attaches a created command's metadata (`SetCommandInfo`) and, where the server has them,
/// its ACL categories.
fn describe(
    api: &Api,
    command: *mut raw::RedisModuleCommand,
    spec: &CommandSpec,
    categories: &CStr,
) -> Result<(), String> {
    let name = spec.name.to_string_lossy();
    let set_info = api.set_command_info;
    let flags = if spec.read_only {
        KeySpecFlags::READ_ONLY | KeySpecFlags::ACCESS
    } else {
        KeySpecFlags::READ_WRITE | KeySpecFlags::ACCESS | KeySpecFlags::UPDATE
    };
    // (No notes: the crate would leak their C string.)
    let key_spec = match spec.keys {
        KeyLayout::None => None,
        // One key, at argument 1.
        KeyLayout::One => Some((1, FindKeys::new_range(0, 1, 0))),
        // One key, at argument 2.
        KeyLayout::Second => Some((2, FindKeys::new_range(0, 1, 0))),
        // The count at argument 1 (index 0 from there), keys from the next argument on.
        KeyLayout::Counted => Some((1, FindKeys::new_keys_num(0, 1, 1))),
    };
    let key_specs = get_redis_key_spec(
        key_spec
            .map(|(at, find)| KeySpec::new(None, flags, BeginSearch::new_index(at), find))
            .into_iter()
            .collect(),
    );
    let tips = if spec.read_only { c"" } else { c"nondeterministic_output" };
    let mut keep = Vec::new();
    let args = raw_args(spec.args, &mut keep);
    let mut info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: spec.summary.as_ptr(),
        complexity: spec.complexity.as_ptr(),
        since: c"0.1.0".as_ptr(),
        history: ptr::null_mut(),
        tips: if tips.is_empty() { ptr::null() } else { tips.as_ptr() },
        arity: spec.arity,
        key_specs: key_specs.as_ptr().cast_mut(),
        args,
    };
    // Redis copies everything it is given.
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    let status = unsafe { set_info(command, &raw mut info) };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not set command info of {name}"));
    }
    if let Some(set_categories) = api.set_command_acl_categories {
        // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated
        // and outlives the call (statics, or kept in the command table).
        if unsafe { set_categories(command, categories.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not set the ACL categories of {name}"));
        }
    }
    Ok(())
}

/// A container command (`RL.POLICY`) and its subcommands, each with its own handler, flags,
/// arity, `COMMAND DOCS` and ACL categories, so that ACL rules can tell them apart
/// (`+rl.policy|get`; on 7.2+ by category).
pub struct Container {
    pub name: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The subcommands; each spec's `name` is the subcommand alone (`get`).
    pub subcommands: &'static [Subcommand],
}

/// A subcommand and whether it is administrative: an administrative one (it changes what
/// every caller is limited by) is in `@admin` and `@dangerous`, never in `@ratelimit`, so an
/// application user granted `+@ratelimit` cannot run it.
pub struct Subcommand {
    pub spec: CommandSpec,
    pub admin: bool,
}

/// Creates a container command and its subcommands.
pub fn register_container(
    ctx: *mut RedisModuleCtx,
    container: &Container,
    with_module_category: bool,
) -> Result<(), String> {
    let name = container.name.to_string_lossy();
    let api = api().ok_or("the module API is not resolved")?;
    let (create, get) = (api.create_command, api.get_command);
    let (create_sub, set_info) = (api.create_subcommand, api.set_command_info);
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    let created = unsafe { create(ctx, container.name.as_ptr(), None, c"".as_ptr(), 0, 0, 0) };
    if created != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not create command {name}"));
    }
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    let parent = unsafe { get(ctx, container.name.as_ptr()) };
    if parent.is_null() {
        return Err(format!("could not find command {name}"));
    }
    let mut info = raw::RedisModuleCommandInfo {
        version: &INFO_VERSION,
        summary: container.summary.as_ptr(),
        complexity: container.complexity.as_ptr(),
        since: c"0.3.0".as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: -2,
        key_specs: ptr::null_mut(),
        args: ptr::null_mut(),
    };
    // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated and
    // outlives the call (statics, or kept in the command table).
    if unsafe { set_info(parent, &raw mut info) } != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not set command info of {name}"));
    }
    for sub in container.subcommands {
        let spec = &sub.spec;
        let (first, last, step) = key_range(spec.keys);
        // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated
        // and outlives the call (statics, or kept in the command table).
        let status = unsafe {
            create_sub(
                parent,
                spec.name.as_ptr(),
                Some(spec.handler),
                spec.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        let full = format!("{name}|{}", spec.name.to_string_lossy());
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("could not create subcommand {full}"));
        }
        let full_c = std::ffi::CString::new(full.clone()).map_err(|e| e.to_string())?;
        // SAFETY: called from `OnLoad` with its context; every name and string is NUL-terminated
        // and outlives the call (statics, or kept in the command table).
        let command = unsafe { get(ctx, full_c.as_ptr()) };
        if command.is_null() {
            return Err(format!("could not find subcommand {full}"));
        }
        let categories = if sub.admin {
            c"admin dangerous write"
        } else {
            acl_categories(spec, with_module_category)
        };
        describe(api, command, spec, categories)?;
    }
    Ok(())
}
