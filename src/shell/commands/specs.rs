//! What `COMMAND INFO` and `COMMAND DOCS` say about every command: flags, arity, key layout,
//! summary, complexity and every argument with its own summary — static data, registered once
//! at load (`server::registry`), nothing allocated.

use std::ffi::CStr;

use crate::shell::commands::table::{
    cl_throttle, rl_acquire, rl_all, rl_charge, rl_hit, rl_info, rl_leaky, rl_peek, rl_period,
    rl_policy, rl_refund, rl_release, rl_restore, rl_slide, rl_token, rl_top,
};
use crate::shell::server::registry::{
    ArgKind, ArgSpec, CommandSpec, Container, KeyLayout, Subcommand,
};

const KEY: ArgSpec = ArgSpec::new(c"key", ArgKind::Key).doc(c"the limiter's key");
const COST: ArgSpec = ArgSpec::option(c"COST", c"n", ArgKind::Integer)
    .doc(c"permits this request takes, 0 to 10^12 (default 1; 0 peeks)");
const DRYRUN: ArgSpec = ArgSpec::option(c"DRYRUN", c"dryrun", ArgKind::PureToken)
    .doc(c"evaluate and reply exactly as if made, change nothing");
const AT: ArgSpec = ArgSpec::option(c"AT", c"unix-ms", ArgKind::UnixTime)
    .doc(c"evaluate at this unix time in ms instead of the server clock");
const DEADLINE: ArgSpec = ArgSpec::option(c"DEADLINE", c"unix-ms", ArgKind::UnixTime).doc(
    c"the caller gives up at this unix time in ms: a call the server runs later changes nothing and is refused",
);
const BAN_ARGS: &[ArgSpec] = &[
    ArgSpec::new(c"duration", ArgKind::String).doc(c"how long the ban lasts (1ms to 10 years)"),
    ArgSpec::option(c"CLEAR", c"clear", ArgKind::PureToken)
        .doc(c"the request that starts the ban also clears the limiter: fresh when the ban ends"),
];
const BAN: ArgSpec = ArgSpec::option(c"BAN", c"ban", ArgKind::Block(BAN_ARGS))
    .doc(c"a refusal by the algorithm locks the key out for this long (1ms to 10 years)");
const FRESH: ArgSpec = ArgSpec::option(c"FRESH", c"fresh", ArgKind::PureToken)
    .doc(c"judge against a fresh limiter, as if the key were missing; admitted, replace its state and ban (COST 0: delete it)");
const CAPACITY: ArgSpec =
    ArgSpec::new(c"capacity", ArgKind::Integer).doc(c"most permits held at once, 1 to 10^12");
const RATE: ArgSpec =
    ArgSpec::new(c"rate", ArgKind::Integer).doc(c"permits gained (or drained) per period");
const PERIOD: ArgSpec = ArgSpec::new(c"period", ArgKind::String)
    .doc(c"a duration: integer with optional unit ms, s, m, h, d (1ms to 10 years)");
const LIMIT: ArgSpec =
    ArgSpec::new(c"limit", ArgKind::Integer).doc(c"most permits per window, 1 to 10^12");
const WINDOW: ArgSpec =
    ArgSpec::new(c"window", ArgKind::String).doc(c"the sliding window's length, a duration");
const STEP: ArgSpec = ArgSpec::option(c"STEP", c"step", ArgKind::PureToken)
    .doc(c"RATE tokens arrive at once at each period boundary instead of continuously");
const ALIGN_OFFSET: &[ArgSpec] = &[ArgSpec::new(c"utc-offset", ArgKind::String)
    .optional()
    .doc(c"UTC offset of the calendar, e.g. 8h or -5h (default 0)")];
const ALIGN: ArgSpec = ArgSpec::option(c"ALIGN", c"align", ArgKind::Block(ALIGN_OFFSET))
    .doc(c"windows start on calendar boundaries of the period");
const KEEPPERIOD: ArgSpec = ArgSpec::option(c"KEEPPERIOD", c"keepperiod", ArgKind::PureToken)
    .doc(c"a window in force keeps its stored period and alignment; the call's period starts only a new window (not with ALIGN)");
const BUCKETS: ArgSpec = ArgSpec::option(c"BUCKETS", c"b", ArgKind::Integer)
    .doc(c"approximate with b sub-window counters (1 to 1000) instead of an exact log");
const ANCHOR: ArgSpec = ArgSpec::option(c"ANCHOR", c"anchor", ArgKind::PureToken)
    .doc(c"with BUCKETS: the sub-window grid starts at the first admitted call, not at the epoch");
const FLOOR: ArgSpec = ArgSpec::option(c"FLOOR", c"floor", ArgKind::PureToken)
    .doc(c"with BUCKETS: round the estimate down to whole permits before comparing");
const LEAK_MODE: &[ArgSpec] = &[
    ArgSpec::keyword(c"NODELAY", c"nodelay", ArgKind::PureToken)
        .doc(c"a meter: admitted requests proceed at once"),
    ArgSpec::keyword(c"DELAY", c"d", ArgKind::Integer)
        .doc(c"tolerate d units of water ahead without delay (0 to capacity)"),
];
const MODE: ArgSpec = ArgSpec::new(c"mode", ArgKind::OneOf(LEAK_MODE))
    .optional()
    .doc(c"delay mode by default: each admitted request is told how long to wait");

const TOKEN_ARGS: &[ArgSpec] =
    &[KEY, CAPACITY, RATE, PERIOD, COST, STEP, BAN, WAIT, DRYRUN, AT, FRESH, DEADLINE];
const PERIOD_ARGS: &[ArgSpec] =
    &[KEY, LIMIT, PERIOD, COST, ALIGN, KEEPPERIOD, BAN, WAIT, DRYRUN, AT, FRESH, DEADLINE];
const SLIDE_ARGS: &[ArgSpec] =
    &[KEY, LIMIT, WINDOW, COST, BUCKETS, ANCHOR, FLOOR, BAN, WAIT, DRYRUN, AT, FRESH, DEADLINE];
const LEAKY_ARGS: &[ArgSpec] =
    &[KEY, CAPACITY, RATE, PERIOD, COST, MODE, BAN, WAIT, DRYRUN, AT, FRESH, DEADLINE];
const THROTTLE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::new(c"max_burst", ArgKind::Integer).doc(c"burst tolerance: max_burst + 1 at once"),
    ArgSpec::new(c"count", ArgKind::Integer).doc(c"requests per period"),
    ArgSpec::new(c"period", ArgKind::Integer).doc(c"the period in whole seconds"),
    ArgSpec::new(c"quantity", ArgKind::Integer)
        .optional()
        .doc(c"requests this call takes (default 1; 0 peeks)"),
    DRYRUN,
    AT,
    DEADLINE,
];
const ALL_LIMITS: &[ArgSpec] = &[
    ArgSpec::keyword(c"TOKEN", c"token", ArgKind::Block(&[CAPACITY, RATE, PERIOD, STEP, COST]))
        .doc(c"a token bucket, as RL.TOKEN"),
    ArgSpec::keyword(
        c"PERIOD",
        c"fixed-window",
        ArgKind::Block(&[LIMIT, PERIOD, ALIGN, KEEPPERIOD, COST]),
    )
    .doc(c"a fixed window, as RL.PERIOD"),
    ArgSpec::keyword(
        c"SLIDE",
        c"sliding-window",
        ArgKind::Block(&[LIMIT, WINDOW, BUCKETS, ANCHOR, FLOOR, COST]),
    )
    .doc(c"a sliding window, as RL.SLIDE"),
    ArgSpec::keyword(c"LEAKY", c"leaky", ArgKind::Block(&[CAPACITY, RATE, PERIOD, MODE, COST]))
        .doc(c"a leaky bucket, as RL.LEAKY"),
    ArgSpec::keyword(c"POLICY", c"policy", ArgKind::Block(&[POLICY_NAME, COST]))
        .doc(c"the limit a policy (RL.POLICY) holds for the key"),
];
const ALL_ARGS: &[ArgSpec] = &[
    ArgSpec::new(c"numkeys", ArgKind::Integer).doc(c"how many keys follow, 1 to 16"),
    KEY.multiple(),
    ArgSpec::new(c"limit", ArgKind::OneOf(ALL_LIMITS))
        .multiple()
        .doc(c"one limit per key, in the keys' order"),
    DRYRUN,
    AT,
    DEADLINE,
];
const REFUND_ARGS: &[ArgSpec] =
    &[KEY, ArgSpec::new(c"count", ArgKind::Integer).doc(c"permits to give back, 1 to 10^12"), AT];
const CHARGE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::new(c"count", ArgKind::Integer).doc(c"permits to take whatever the limit, 1 to 10^12"),
    AT,
];
const WAIT: ArgSpec = ArgSpec::option(c"WAIT", c"timeout", ArgKind::String)
    .doc(c"block until admitted, in arrival order, at most this long (0: no limit)");
const LEASE_ID: ArgSpec = ArgSpec::option(c"ID", c"id", ArgKind::String)
    .doc(c"the lease's id, 1 to 64 bytes (renews it if held); default: a server id");
const ACQUIRE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::new(c"limit", ArgKind::Integer)
        .doc(c"most leases held at once, 1 to ratelimit.lease-max"),
    ArgSpec::new(c"lease", ArgKind::String)
        .doc(c"how long a lease lasts unless renewed or released"),
    LEASE_ID,
    WAIT,
    DRYRUN,
    AT,
    DEADLINE,
];
const RELEASE_ARGS: &[ArgSpec] =
    &[KEY, ArgSpec::new(c"id", ArgKind::String).doc(c"the lease to give back"), AT];
const KEY_ONLY: &[ArgSpec] = &[KEY];
const RESTORE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::new(c"payload", ArgKind::String).doc(c"an encoded limiter, as the AOF rewrite emits"),
];
const TOP_READ: &[ArgSpec] = &[
    ArgSpec::option(c"COUNT", c"n", ArgKind::Integer)
        .doc(c"how many keys to answer, 1 to 20000 (default 10)"),
    ArgSpec::option(c"POLICY", c"name", ArgKind::String)
        .doc(c"only refusals made through this policy (RL.HIT), a SHADOW policy's would-be refusals included"),
    ArgSpec::option(c"CANDIDATE", c"candidate", ArgKind::PureToken)
        .doc(c"with POLICY: the would-be refusals of the policy's candidate instead"),
];
const TOP_FORMS: &[ArgSpec] = &[
    ArgSpec::keyword(c"RESET", c"reset", ArgKind::PureToken)
        .doc(c"forget every refusal counted on this node"),
    ArgSpec::new(c"read", ArgKind::Block(TOP_READ)).doc(c"the most refused keys"),
];
const TOP_ARGS: &[ArgSpec] = &[ArgSpec::new(c"form", ArgKind::OneOf(TOP_FORMS)).optional()];

const POLICY_NAME: ArgSpec =
    ArgSpec::new(c"name", ArgKind::String).doc(c"the policy's name: 1 to 64 of A-Z a-z 0-9 _ - .");
const FOR_OR_CANDIDATE: &[ArgSpec] = &[
    ArgSpec::keyword(c"FOR", c"key", ArgKind::String)
        .doc(c"one key's override of the policy (a key name, not accessed)"),
    ArgSpec::keyword(c"CANDIDATE", c"candidate", ArgKind::PureToken)
        .doc(c"the policy's candidate: a second limit judged in shadow beside the enforced one"),
];
const TARGET: ArgSpec = ArgSpec::new(c"target", ArgKind::OneOf(FOR_OR_CANDIDATE))
    .optional()
    .doc(c"what within the policy (default: the policy itself)");
const POLICY_LIMITS: &[ArgSpec] = &[
    ArgSpec::keyword(c"TOKEN", c"token", ArgKind::Block(&[CAPACITY, RATE, PERIOD, STEP]))
        .doc(c"a token bucket, as RL.TOKEN"),
    ArgSpec::keyword(
        c"PERIOD",
        c"fixed-window",
        ArgKind::Block(&[LIMIT, PERIOD, ALIGN, KEEPPERIOD]),
    )
    .doc(c"a fixed window, as RL.PERIOD"),
    ArgSpec::keyword(
        c"SLIDE",
        c"sliding-window",
        ArgKind::Block(&[LIMIT, WINDOW, BUCKETS, ANCHOR, FLOOR]),
    )
    .doc(c"a sliding window, as RL.SLIDE"),
    ArgSpec::keyword(c"LEAKY", c"leaky", ArgKind::Block(&[CAPACITY, RATE, PERIOD, MODE]))
        .doc(c"a leaky bucket, as RL.LEAKY"),
];
const POLICY_SET_ARGS: &[ArgSpec] = &[
    POLICY_NAME,
    ArgSpec::new(c"limit", ArgKind::OneOf(POLICY_LIMITS))
        .doc(c"the limit, in RL.ALL's grammar without COST"),
    BAN,
    ArgSpec::option(c"SHADOW", c"shadow", ArgKind::PureToken).doc(
        c"answer would-be refusals allowed, change nothing for them, count them as shadow_limited",
    ),
    TARGET,
];
const POLICY_NAME_FOR: &[ArgSpec] = &[POLICY_NAME, TARGET];
const POLICY_NAME_OPTIONAL: &[ArgSpec] = &[ArgSpec::new(c"name", ArgKind::String)
    .optional()
    .doc(c"a policy: list its overrides (key, definition, counters) instead of the names")];
const POLICY_NAME_ONLY: &[ArgSpec] = &[POLICY_NAME];
const HIT_ARGS: &[ArgSpec] = &[POLICY_NAME, KEY, COST, DRYRUN, AT, WAIT, DEADLINE];

const LIMITING: &CStr = c"write deny-oom fast";
const READING: &CStr = c"readonly fast";

/// Every command the module registers.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: c"rl.token",
        handler: rl_token,
        flags: LIMITING,
        arity: -5,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Token bucket: admits a request if the bucket holds COST tokens, refilled RATE per PERIOD",
        complexity: c"O(1)",
        args: TOKEN_ARGS,
    },
    CommandSpec {
        name: c"rl.period",
        handler: rl_period,
        flags: LIMITING,
        arity: -4,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Fixed window: at most LIMIT per PERIOD, optionally aligned to calendar boundaries",
        complexity: c"O(1)",
        args: PERIOD_ARGS,
    },
    CommandSpec {
        name: c"rl.slide",
        handler: rl_slide,
        flags: LIMITING,
        arity: -4,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Sliding window: at most LIMIT in any WINDOW, as an exact log or BUCKETS counters",
        complexity: c"O(1) amortized (O(b) with BUCKETS b)",
        args: SLIDE_ARGS,
    },
    CommandSpec {
        name: c"rl.leaky",
        handler: rl_leaky,
        flags: LIMITING,
        arity: -5,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Leaky bucket: a queue that drains RATE per PERIOD (delay mode) or a meter (NODELAY)",
        complexity: c"O(1)",
        args: LEAKY_ARGS,
    },
    CommandSpec {
        name: c"cl.throttle",
        handler: cl_throttle,
        flags: LIMITING,
        arity: -5,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"GCRA, redis-cell compatible: COUNT per PERIOD seconds with burst MAX_BURST",
        complexity: c"O(1)",
        args: THROTTLE_ARGS,
    },
    CommandSpec {
        name: c"rl.all",
        handler: rl_all,
        flags: c"write deny-oom fast getkeys-api",
        arity: -5,
        read_only: false,
        keys: KeyLayout::Counted,
        summary: c"Several limits, all or nothing: admits a request only if every key's limit admits it, then updates them all",
        complexity: c"O(N) in the number of keys",
        args: ALL_ARGS,
    },
    CommandSpec {
        name: c"rl.refund",
        handler: rl_refund,
        flags: c"write fast",
        arity: -3,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Give COUNT permits back to a limiter (reserve-then-settle), never beyond a fresh limiter",
        complexity: c"O(1) (O(n) in the entries given back of an exact sliding log)",
        args: REFUND_ARGS,
    },
    CommandSpec {
        name: c"rl.charge",
        handler: rl_charge,
        flags: c"write fast",
        arity: -3,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Take COUNT permits from a limiter whatever its limit (settle an overrun): past it, a debt later requests wait out",
        complexity: c"O(1)",
        args: CHARGE_ARGS,
    },
    CommandSpec {
        name: c"rl.acquire",
        handler: rl_acquire,
        flags: c"write deny-oom fast",
        arity: -4,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Concurrency limit: take one of LIMIT leases that lapses after LEASE unless renewed (by ID) or released",
        complexity: c"O(log N) in the leases held (O(N) when leases lapse or are renewed)",
        args: ACQUIRE_ARGS,
    },
    CommandSpec {
        name: c"rl.release",
        handler: rl_release,
        flags: c"write fast",
        arity: -3,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Give a lease back: 1 if it was held, 0 otherwise",
        complexity: c"O(N) in the leases held",
        args: RELEASE_ARGS,
    },
    CommandSpec {
        name: c"rl.peek",
        handler: rl_peek,
        flags: READING,
        arity: 2,
        read_only: true,
        keys: KeyLayout::One,
        summary: c"Reply a DRYRUN COST 1 request with the stored parameters would get, without changing anything",
        complexity: c"O(1) (O(log n) for an exact sliding log)",
        args: KEY_ONLY,
    },
    CommandSpec {
        name: c"rl.info",
        handler: rl_info,
        flags: READING,
        arity: 2,
        read_only: true,
        keys: KeyLayout::One,
        summary: c"Stored parameters and state of a limiter",
        complexity: c"O(1)",
        args: KEY_ONLY,
    },
    CommandSpec {
        name: c"rl.hit",
        handler: rl_hit,
        flags: LIMITING,
        arity: -3,
        read_only: false,
        keys: KeyLayout::Second,
        summary: c"Judge a key by a named policy (RL.POLICY): exactly as the direct command with the policy's, or the key's override's, parameters",
        complexity: c"O(1) (as the policy's algorithm)",
        args: HIT_ARGS,
    },
    CommandSpec {
        name: c"rl.restore",
        handler: rl_restore,
        flags: c"write deny-oom",
        arity: 3,
        read_only: false,
        keys: KeyLayout::One,
        summary: c"Internal: set a limiter from its encoded state (emitted by the AOF rewrite)",
        complexity: c"O(n) in the payload size",
        args: RESTORE_ARGS,
    },
    CommandSpec {
        name: c"rl.top",
        handler: rl_top,
        flags: c"readonly",
        arity: -1,
        read_only: true,
        keys: KeyLayout::None,
        summary: c"The keys refused most often in the last one to two ratelimit.top-window windows on this node, most refused first: key, refusals, last refusal (unix ms); RESET forgets them",
        complexity: c"O(k log k) in ratelimit.top-k",
        args: TOP_ARGS,
    },
];

/// A subcommand of `RL.POLICY`: no keys (node state, like `FUNCTION`); one entry point for
/// all (`table::rl_policy`: the core's grammar tells them apart).
const fn policy_subcommand(
    name: &'static CStr,
    flags: &'static CStr,
    arity: std::os::raw::c_int,
    admin: bool,
    summary: &'static CStr,
    args: &'static [ArgSpec],
) -> Subcommand {
    Subcommand {
        spec: CommandSpec {
            name,
            handler: rl_policy,
            flags,
            arity,
            read_only: !admin,
            keys: KeyLayout::None,
            summary,
            complexity: c"O(1) (LIST: O(N log N) in the policies)",
            args,
        },
        admin,
    }
}

/// Administrative subcommands change every caller's limit: writes (READONLY on a replica),
/// propagated, refused under OOM.
const POLICY_WRITE: &CStr = c"write deny-oom";

/// Every container command the module registers, with its subcommands.
pub const CONTAINERS: &[Container] = &[Container {
    name: c"rl.policy",
    summary:
        c"Named limits the server holds (tiers, per-key overrides, shadow mode), judged by RL.HIT",
    complexity: c"Depends on the subcommand",
    subcommands: &[
        policy_subcommand(
            c"set",
            POLICY_WRITE,
            -4,
            true,
            c"Define or replace (whole) a policy, one key's override (FOR key), or its candidate (CANDIDATE)",
            POLICY_SET_ARGS,
        ),
        policy_subcommand(
            c"get",
            READING,
            -3,
            false,
            c"A policy's (or override's, or candidate's) algorithm, parameters, ban_ms, shadow and definition; nil if none",
            POLICY_NAME_FOR,
        ),
        policy_subcommand(
            c"del",
            c"write",
            -3,
            true,
            c"Remove a policy with all its overrides, or one override (FOR key), or its candidate: 1, or 0 if none",
            POLICY_NAME_FOR,
        ),
        policy_subcommand(
            c"list",
            READING,
            -2,
            false,
            c"The policy names, sorted; with a name, its overrides: key, definition, counters",
            POLICY_NAME_OPTIONAL,
        ),
        policy_subcommand(
            c"promote",
            POLICY_WRITE,
            3,
            true,
            c"The policy's candidate becomes its definition: 1, or 0 when it has none",
            POLICY_NAME_ONLY,
        ),
        policy_subcommand(
            c"help",
            c"readonly allow-loading allow-stale",
            2,
            false,
            c"The subcommands of RL.POLICY",
            &[],
        ),
        policy_subcommand(
            c"stats",
            READING,
            3,
            false,
            c"A policy's counters: calls, admitted, limited, shadow_limited, near_limit (and its candidate's)",
            POLICY_NAME_ONLY,
        ),
        policy_subcommand(
            c"resetstat",
            c"write",
            2,
            true,
            c"Zero every policy's counters on this node",
            &[],
        ),
    ],
}];

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::grammar::arity::{arity_of, ARITIES};

    /// Every registered command (and subcommand, as `container|sub`) with its declared arity.
    fn declared() -> Vec<(String, i32)> {
        let mut declared: Vec<(String, i32)> = COMMANDS
            .iter()
            .map(|spec| (spec.name.to_string_lossy().into_owned(), spec.arity))
            .collect();
        for container in CONTAINERS {
            for sub in container.subcommands {
                let name = format!(
                    "{}|{}",
                    container.name.to_string_lossy(),
                    sub.spec.name.to_string_lossy()
                );
                declared.push((name, sub.spec.arity));
            }
        }
        declared
    }

    /// What `COMMAND INFO` declares is what the core's parsers refuse below (`grammar::arity`,
    /// whose tests run each parser one argument short): the server and the module agree.
    #[test]
    fn declared_arities_are_the_grammars() {
        for (name, arity) in declared() {
            assert_eq!(arity_of(&name).map(|a| a.redis()), Some(arity), "{name}");
        }
    }

    /// Every command the grammar knows is registered, and nothing else.
    #[test]
    fn every_command_of_the_grammar_is_registered() {
        let mut registered: Vec<String> = declared().into_iter().map(|(name, _)| name).collect();
        let mut known: Vec<String> = ARITIES.iter().map(|(name, _)| name.to_string()).collect();
        registered.sort();
        known.sort();
        assert_eq!(registered, known);
    }
}
