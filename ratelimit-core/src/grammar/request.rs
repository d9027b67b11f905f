//! One limiting request, parsed from a command's arguments: which algorithm with which
//! parameters, how much it costs, and how it is to be evaluated (`DRYRUN`, `AT`).
//!
//! Every limiting command's argument grammar lives here, so the module, the fuzz targets and
//! the property tests all run the one real parser. Arguments arrive as raw byte strings
//! (binary safe, possibly invalid UTF-8); nothing here panics on any input.

use crate::algorithms::gcra::{parse_throttle_args, GcraParams};
use crate::algorithms::leaky::{LeakMode, LeakyParams};
use crate::algorithms::period::PeriodParams;
use crate::algorithms::slide::SlideParams;
use crate::algorithms::token::TokenParams;
use crate::grammar::args::{
    parse_count, parse_duration, parse_options, Keyword, Options, MAX_COUNT,
};
use crate::grammar::arity::{self, Arity};
use crate::grammar::bounded::Bounded;
use crate::grammar::error::ArgError;

/// The limiting commands, by what their arguments mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `RL.TOKEN key capacity rate period [COST n] [STEP] [DRYRUN] [AT ms]`
    Token,
    /// `RL.PERIOD key limit period [COST n] [ALIGN [utc-offset] | KEEPPERIOD] [DRYRUN] [AT ms]`
    Period,
    /// `RL.SLIDE key limit window [COST n] [BUCKETS b [ANCHOR] [FLOOR]] [DRYRUN] [AT ms]`
    Slide,
    /// `RL.LEAKY key capacity rate period [COST n] [NODELAY | DELAY d] [DRYRUN] [AT ms]`
    Leaky,
    /// `CL.THROTTLE key max_burst count period [quantity] [DRYRUN] [AT ms]` (redis-cell)
    Throttle,
}

impl Command {
    /// Every limiting command, in a fixed order.
    pub const ALL: [Command; 5] =
        [Command::Token, Command::Period, Command::Slide, Command::Leaky, Command::Throttle];

    /// How many arguments the command takes (`grammar::arity`).
    pub const fn arity(self) -> Arity {
        match self {
            Command::Token => arity::TOKEN,
            Command::Period => arity::PERIOD,
            Command::Slide => arity::SLIDE,
            Command::Leaky => arity::LEAKY,
            Command::Throttle => arity::THROTTLE,
        }
    }
}

/// The algorithm and parameters of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    Token(TokenParams),
    Period(PeriodParams),
    Slide(SlideParams),
    Leaky(LeakyParams),
    /// `CL.THROTTLE`: GCRA, answered in redis-cell's reply layout.
    Throttle(GcraParams),
}

/// One parsed limiting request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub limit: Limit,
    /// Permits the request takes (`COST`, or `CL.THROTTLE`'s `quantity`): 0 … 10^12.
    pub cost: u64,
    /// `DRYRUN`: evaluate and reply, change nothing.
    pub dry_run: bool,
    /// `AT unix-ms`: the instant to evaluate at instead of the server clock.
    pub at_ms: Option<i64>,
    /// `BAN duration` (ms): a refusal by the algorithm locks the key out this long.
    pub ban_ms: Option<u64>,
    /// `CLEAR` (with `BAN`): the request that starts a ban also clears the limiter — the key
    /// holds the limiter in its initial state under the ban, and a fresh one after it.
    pub clear: bool,
    /// `WAIT timeout` (ms, 0 = no limit): wait on the server until admitted.
    pub wait_ms: Option<u64>,
    /// `FRESH`: judged against a fresh limiter with these parameters, as if the key were
    /// missing; admitted, it replaces whatever the key holds for this algorithm.
    pub fresh: bool,
    /// `DEADLINE unix-ms`: past this instant on the server's clock the call changes nothing
    /// (checked by the shell with [`crate::grammar::args::check_deadline`] before judging).
    pub deadline_ms: Option<i64>,
    /// `ATMOST n` (direct commands only): `cost` is the most the request takes; it takes what
    /// is left up to that, resolved against the key by [`crate::steps::at_most::resolve_at_most`].
    pub at_most: bool,
}

/// The options each limiting command accepts (any order, each at most once).
const TOKEN_OPTIONS: &[Keyword] = &[
    Keyword::Cost,
    Keyword::Step,
    Keyword::Ban,
    Keyword::Clear,
    Keyword::Wait,
    Keyword::DryRun,
    Keyword::At,
    Keyword::Fresh,
    Keyword::Deadline,
    Keyword::AtMost,
];
const PERIOD_OPTIONS: &[Keyword] = &[
    Keyword::Cost,
    Keyword::Align,
    Keyword::KeepPeriod,
    Keyword::Ban,
    Keyword::Clear,
    Keyword::Wait,
    Keyword::DryRun,
    Keyword::At,
    Keyword::Fresh,
    Keyword::Deadline,
    Keyword::AtMost,
];
const SLIDE_OPTIONS: &[Keyword] = &[
    Keyword::Cost,
    Keyword::Buckets,
    Keyword::Anchor,
    Keyword::Floor,
    Keyword::Ban,
    Keyword::Clear,
    Keyword::Wait,
    Keyword::DryRun,
    Keyword::At,
    Keyword::Fresh,
    Keyword::Deadline,
    Keyword::AtMost,
];
const LEAKY_OPTIONS: &[Keyword] = &[
    Keyword::Cost,
    Keyword::NoDelay,
    Keyword::Delay,
    Keyword::Ban,
    Keyword::Clear,
    Keyword::Wait,
    Keyword::DryRun,
    Keyword::At,
    Keyword::Fresh,
    Keyword::Deadline,
    Keyword::AtMost,
];

/// A command's arguments after the key.
type Args<'a, 'b> = &'a [&'b [u8]];

/// `capacity rate period` (token and leaky buckets), then the options.
fn bucket_arguments<'a, 'b>(args: Args<'a, 'b>) -> Result<(u64, u64, u64, Args<'a, 'b>), ArgError> {
    let [capacity, rate, period, rest @ ..] = args else {
        return Err(ArgError::WrongArity);
    };
    let capacity = parse_count("capacity", capacity, 1, MAX_COUNT)?;
    let rate = parse_count("rate", rate, 1, MAX_COUNT)?;
    Ok((capacity, rate, parse_duration("period", period)?, rest))
}

/// `limit <duration>` (fixed and sliding windows; the duration named `name`), then the options.
fn window_arguments<'a, 'b>(
    args: Args<'a, 'b>,
    name: &'static str,
) -> Result<(u64, u64, Args<'a, 'b>), ArgError> {
    let [limit, duration, rest @ ..] = args else {
        return Err(ArgError::WrongArity);
    };
    let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
    Ok((limit, parse_duration(name, duration)?, rest))
}

impl Request {
    /// Parses a limiting call whole, as the server passed it (the command's name first, its
    /// bytes unread): the command's arity, then [`Request::parse`] after the key.
    #[inline]
    pub fn parse_call(
        command: Command,
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<Request, ArgError> {
        command.arity().check(args.len())?;
        Request::parse(command, args.get(2..).unwrap_or(&[]), slide_log_max)
    }

    /// Parses a limiting command's arguments after the key. `slide_log_max` is the most
    /// entries an exact sliding log may come to hold (`ratelimit.slide-log-max`).
    pub fn parse(
        command: Command,
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<Request, ArgError> {
        let request = Request::parse_limit(command, args, slide_log_max)?;
        if request.clear && request.ban_ms.is_none() {
            return Err(ArgError::Invalid(
                "syntax error: CLEAR needs BAN d (the ban that clears the limiter when it starts)"
                    .into(),
            ));
        }
        Ok(request)
    }

    /// [`Request::parse`] without the checks across options that `RL.ALL` groups refuse as
    /// unknown options anyway (`CLEAR` without `BAN`). Inlined into both callers, so that
    /// [`Request::parse`] builds its result in place instead of copying a returned one.
    #[inline(always)]
    fn parse_limit(
        command: Command,
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<Request, ArgError> {
        match command {
            Command::Token => {
                let (capacity, rate, period_ms, rest) = bucket_arguments(args)?;
                let options = parse_options(rest, TOKEN_OPTIONS)?;
                let params = TokenParams::new(capacity, rate, period_ms, options.step)?;
                Ok(Request::with(Limit::Token(params), &options))
            }
            Command::Period => {
                let (limit, period_ms, rest) = window_arguments(args, "period")?;
                let options = parse_options(rest, PERIOD_OPTIONS)?;
                let params = PeriodParams::new(limit, period_ms, options.align_offset_ms)?
                    .keeping_period(options.keep_period);
                Ok(Request::with(Limit::Period(params), &options))
            }
            Command::Slide => {
                let (limit, window_ms, rest) = window_arguments(args, "window")?;
                let options = parse_options(rest, SLIDE_OPTIONS)?;
                let params = SlideParams::new(limit, window_ms, options.buckets, slide_log_max)?
                    .with_options(options.anchor, options.floor)?;
                Ok(Request::with(Limit::Slide(params), &options))
            }
            Command::Leaky => {
                let (capacity, rate, period_ms, rest) = bucket_arguments(args)?;
                let options = parse_options(rest, LEAKY_OPTIONS)?;
                let mode = if options.no_delay {
                    LeakMode::NoDelay
                } else {
                    LeakMode::Delay(options.delay.unwrap_or(0))
                };
                let params = LeakyParams::new(capacity, rate, period_ms, mode)?;
                Ok(Request::with(Limit::Leaky(params), &options))
            }
            Command::Throttle => {
                let parsed = parse_throttle_args(args)?;
                Ok(Request {
                    limit: Limit::Throttle(parsed.params),
                    cost: parsed.quantity,
                    dry_run: parsed.options.dry_run,
                    at_ms: parsed.options.at_ms,
                    ban_ms: None,
                    clear: false,
                    wait_ms: None,
                    fresh: false,
                    deadline_ms: parsed.options.deadline_ms,
                    at_most: false,
                })
            }
        }
    }

    fn with(limit: Limit, options: &Options) -> Request {
        Request {
            limit,
            cost: options.cost,
            dry_run: options.dry_run,
            at_ms: options.at_ms,
            ban_ms: options.ban_ms,
            clear: options.clear,
            wait_ms: options.wait_ms,
            fresh: options.fresh,
            deadline_ms: options.deadline_ms,
            at_most: options.at_most,
        }
    }
}

/// `RL.REFUND key count [AT ms]`: give `count` permits back (arguments after the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundRequest {
    /// Permits to give back: 1 … 10^12.
    pub count: u64,
    pub at_ms: Option<i64>,
}

impl RefundRequest {
    /// Parses an `RL.REFUND` or `RL.CHARGE` call whole (name first) under its `arity`.
    pub fn parse_call(arity: Arity, args: &[&[u8]]) -> Result<RefundRequest, ArgError> {
        arity.check(args.len())?;
        RefundRequest::parse(args.get(2..).unwrap_or(&[]))
    }

    /// Parses the arguments after the key: `count [AT ms]`.
    pub fn parse(args: &[&[u8]]) -> Result<RefundRequest, ArgError> {
        let [count, rest @ ..] = args else {
            return Err(ArgError::WrongArity);
        };
        let count = parse_count("count", count, 1, MAX_COUNT)?;
        let options = parse_options(rest, &[Keyword::At])?;
        Ok(RefundRequest { count, at_ms: options.at_ms })
    }
}

/// Most keys one `RL.ALL` call may judge.
pub const MAX_ALL_KEYS: u64 = 16;

/// One item per key of an `RL.ALL` call, kept inline (no heap allocation on its hot path).
pub type PerKey<T> = Bounded<T, { MAX_ALL_KEYS as usize }>;

/// `RL.ALL numkeys key [key ...] limit [limit ...] [DRYRUN] [AT ms]`: several limits judged
/// together, all or nothing.
///
/// ```text
/// limit := TOKEN capacity rate period [STEP] [COST n]
///        | PERIOD limit period [ALIGN [utc-offset] | KEEPPERIOD] [COST n]
///        | SLIDE limit window [BUCKETS b [ANCHOR] [FLOOR]] [COST n]
///        | LEAKY capacity rate period [NODELAY | DELAY d] [COST n]
/// ```
///
/// Any group may also say `SHADOW`: it is judged and answered like the others but never
/// refuses the call; it takes its cost when it admits and the call is admitted, and is left
/// unchanged when it refuses.
///
/// A group runs from its keyword to the next group keyword; its options come in any order,
/// each at most once. `DRYRUN` and `AT` belong to the whole call: they may follow any group,
/// once per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllRequest {
    /// The number of keys: they are the `key_count` arguments after `numkeys`.
    pub key_count: usize,
    /// The i-th key's limit; `dry_run` and `at_ms` of each are the call's.
    pub limits: PerKey<Request>,
    pub dry_run: bool,
    pub at_ms: Option<i64>,
    /// `DEADLINE unix-ms` (once per call, after any group): see [`Request::deadline_ms`].
    pub deadline_ms: Option<i64>,
    /// A group is `POLICY name`: the call's arguments alone do not say what was judged, so it
    /// must reach replicas and the AOF as the states it left, never as itself.
    pub by_policy: bool,
    /// Bit `i` set: the `i`-th group said `SHADOW` (see [`AllRequest::is_shadow`]).
    pub shadow: u32,
}

/// `SHADOW`, a group option of `RL.ALL` only (no single command takes it).
const SHADOW: &[u8] = b"SHADOW";

/// A group's arguments, borrowed, or copied without a `SHADOW` word.
type GroupArgs<'a, 'b> = std::borrow::Cow<'a, [&'b [u8]]>;

/// A group's arguments without its `SHADOW` word, and whether it had one (twice is an error).
/// Borrows the group as it is unless it says `SHADOW` (the common case allocates nothing).
fn take_shadow<'a, 'b>(group: &'a [&'b [u8]]) -> Result<(GroupArgs<'a, 'b>, bool), ArgError> {
    let is_shadow = |t: &&[u8]| t.eq_ignore_ascii_case(SHADOW);
    match group.iter().filter(|t| is_shadow(t)).count() {
        0 => Ok((std::borrow::Cow::Borrowed(group), false)),
        1 => Ok((
            std::borrow::Cow::Owned(group.iter().copied().filter(|t| !is_shadow(t)).collect()),
            true,
        )),
        _ => Err(ArgError::RepeatedOption("SHADOW")),
    }
}

/// What starts an `RL.ALL` group: a limit's keyword, or `POLICY`.
#[derive(Clone, Copy)]
enum GroupStart {
    Limit(Command),
    Policy,
}

/// `token` as a group keyword, if it is one (any case). Every argument of a call is tried,
/// numbers mostly: their length rules them out at once, and a keyword compares as one word.
#[inline]
fn group_start(token: &[u8]) -> Option<GroupStart> {
    /// Up to 8 bytes as one little-endian word, ASCII letters folded to upper case where the
    /// word is compared with an upper-case keyword: `b & 0xDF` equals an upper-case letter
    /// only for that letter in either case.
    const fn word(bytes: &[u8]) -> u64 {
        let mut word = 0u64;
        let mut i = 0;
        while i < bytes.len() && i < 8 {
            word |= (bytes[i] as u64) << (8 * i);
            i += 1;
        }
        word
    }
    const FOLD: u64 = 0xDFDF_DFDF_DFDF_DFDF;
    const TOKEN: u64 = word(b"TOKEN");
    const PERIOD: u64 = word(b"PERIOD");
    const SLIDE: u64 = word(b"SLIDE");
    const LEAKY: u64 = word(b"LEAKY");
    const POLICY: u64 = word(b"POLICY");
    if !(5..=6).contains(&token.len()) {
        return None;
    }
    match word(token) & FOLD {
        TOKEN => Some(GroupStart::Limit(Command::Token)),
        PERIOD => Some(GroupStart::Limit(Command::Period)),
        SLIDE => Some(GroupStart::Limit(Command::Slide)),
        LEAKY => Some(GroupStart::Limit(Command::Leaky)),
        POLICY => Some(GroupStart::Policy),
        _ => None,
    }
}

/// The limit a group keyword introduces, if `token` is one.
fn group_command(token: &[u8]) -> Option<Command> {
    match group_start(token) {
        Some(GroupStart::Limit(command)) => Some(command),
        _ => None,
    }
}

impl Default for AllRequest {
    fn default() -> Self {
        Self::new()
    }
}

/// How `RL.ALL` finds a policy's limit for a key: `(name, key)` → the limit and whether the
/// policy is in shadow, or `None` when there is no such policy.
pub type PolicyLookup<'a> = dyn FnMut(&[u8], &[u8]) -> Option<(Limit, bool)> + 'a;

/// The error for a token where a group keyword (`TOKEN`, `PERIOD`, `SLIDE`, `LEAKY`) belongs.
fn unknown_limit(keyword: &[u8]) -> ArgError {
    ArgError::Invalid(format!(
        "syntax error: unknown limit '{}' (use TOKEN, PERIOD, SLIDE or LEAKY)",
        crate::grammar::error::escape(keyword)
    ))
}

impl Request {
    /// A limit in `RL.ALL`'s group grammar — `TOKEN c r p [STEP]`, `PERIOD l p [ALIGN [o] |
    /// KEEPPERIOD]`, `SLIDE l w [BUCKETS b [ANCHOR] [FLOOR]]`, `LEAKY c r p [NODELAY | DELAY
    /// d]` — followed by any option of that command (`BAN d [CLEAR]`, …), parsed exactly as the
    /// command parses it: what a policy holds (`crate::features::policy`, which refuses the per-call
    /// options).
    pub fn parse_group(args: &[&[u8]], slide_log_max: u64) -> Result<Request, ArgError> {
        let (keyword, rest) = args.split_first().ok_or(ArgError::WrongArity)?;
        let command = group_command(keyword).ok_or_else(|| unknown_limit(keyword))?;
        let request = Request::parse(command, rest, slide_log_max)?;
        if request.at_most {
            return Err(ArgError::UnknownOption(Keyword::AtMost.name().as_bytes().to_vec()));
        }
        Ok(request)
    }
}

impl AllRequest {
    /// Parses `RL.ALL`'s arguments after the command name (`numkeys`, the keys, the limits,
    /// the call's options). Keys are compared as bytes: they must be distinct.
    pub fn parse(args: &[&[u8]], slide_log_max: u64) -> Result<AllRequest, ArgError> {
        AllRequest::parse_with_policies(args, slide_log_max, &mut |_, _| None)
    }

    /// [`AllRequest::parse`] where a group may also be `POLICY name [COST n]`: the limit the
    /// policy holds for the group's key, from `policy(name, key)` (`None`: no such policy).
    /// A policy's ban does not apply (`RL.ALL` has none); a `SHADOW` policy never refuses
    /// here: its group is judged as `COST 0` (it takes nothing and changes nothing).
    pub fn parse_with_policies(
        args: &[&[u8]],
        slide_log_max: u64,
        policy: &mut PolicyLookup<'_>,
    ) -> Result<AllRequest, ArgError> {
        let mut all = AllRequest::new();
        all.parse_into(args, slide_log_max, policy)?;
        Ok(all)
    }

    /// A request with no key yet, for [`AllRequest::parse_into`] (also its `Default`).
    pub fn new() -> AllRequest {
        AllRequest {
            key_count: 0,
            limits: PerKey::new(),
            dry_run: false,
            at_ms: None,
            deadline_ms: None,
            by_policy: false,
            shadow: 0,
        }
    }

    /// Whether the `index`-th group (0-based) said `SHADOW`: judged, never refusing the call.
    pub fn is_shadow(&self, index: usize) -> bool {
        index < 32 && self.shadow & (1 << index) != 0
    }

    /// [`AllRequest::parse_into`] of a whole `RL.ALL` call, as the server passed it (the
    /// command's name first, its bytes unread).
    #[inline]
    pub fn parse_call_into(
        &mut self,
        args: &[&[u8]],
        slide_log_max: u64,
        policy: &mut PolicyLookup<'_>,
    ) -> Result<(), ArgError> {
        // `parse_into` checks the arity (it counts the name it is not given).
        self.parse_into(args.get(1..).unwrap_or(&[]), slide_log_max, policy)
    }

    /// [`AllRequest::parse_with_policies`] into `self` (new from [`AllRequest::new`]): the
    /// command path builds the request where it stays instead of moving it (its limits are
    /// kept inline, about 2 KB).
    pub fn parse_into(
        &mut self,
        args: &[&[u8]],
        slide_log_max: u64,
        policy: &mut PolicyLookup<'_>,
    ) -> Result<(), ArgError> {
        let all = self;
        // `args` follow the command's name, which the arity counts.
        arity::ALL.check(args.len() + 1)?;
        let (numkeys, rest) = args.split_first().ok_or(ArgError::WrongArity)?;
        let key_count = AllRequest::key_count(numkeys)?;
        let keys = rest.get(..key_count).ok_or(ArgError::WrongArity)?;
        let groups = rest.get(key_count..).unwrap_or(&[]);
        for (i, key) in keys.iter().enumerate() {
            if keys.get(i + 1..).unwrap_or(&[]).contains(key) {
                return Err(ArgError::Invalid("RL.ALL keys must be distinct".into()));
            }
        }
        all.key_count = key_count;
        // Groups past the 16th are still parsed (and counted for the error), never kept.
        let mut group_count = 0usize;
        let mut rest = groups;
        while let Some((keyword, tail)) = rest.split_first() {
            let index = group_count;
            group_count += 1;
            let starts_group = |t: &&[u8]| group_start(t).is_some();
            let start = group_start(keyword);
            if let Some(GroupStart::Policy) = start {
                let (name, options) = tail.split_first().ok_or(ArgError::MissingValue("POLICY"))?;
                let end = options.iter().position(starts_group).unwrap_or(options.len());
                let (group, next) = options.split_at(end);
                let (group, shadow) = take_shadow(group)?;
                all.mark_shadow(index, shadow);
                let key = keys.get(index).copied().unwrap_or(&[]);
                let (limit, shadow) = policy(name, key).ok_or_else(|| {
                    ArgError::Invalid(format!(
                        "no such policy '{}'",
                        crate::grammar::error::escape(name)
                    ))
                })?;
                let options = parse_options(
                    &group,
                    &[Keyword::Cost, Keyword::DryRun, Keyword::At, Keyword::Deadline],
                )?;
                all.by_policy = true;
                all.push_group(Request {
                    limit,
                    cost: if shadow { 0 } else { options.cost },
                    dry_run: options.dry_run,
                    at_ms: options.at_ms,
                    ban_ms: None,
                    clear: false,
                    wait_ms: None,
                    fresh: false,
                    deadline_ms: options.deadline_ms,
                    at_most: false,
                })?;
                rest = next;
                continue;
            }
            let Some(GroupStart::Limit(command)) = start else {
                return Err(unknown_limit(keyword));
            };
            let end = tail.iter().position(starts_group).unwrap_or(tail.len());
            let (group, next) = tail.split_at(end);
            let (group, shadow) = take_shadow(group)?;
            all.mark_shadow(index, shadow);
            let limit = Request::parse_limit(command, &group, slide_log_max)?;
            all.push_group(limit)?;
            rest = next;
        }
        if group_count != key_count {
            return Err(ArgError::Invalid(format!(
                "RL.ALL needs one limit per key ({key_count} keys, {group_count} limits)"
            )));
        }
        for limit in all.limits.iter_mut() {
            limit.dry_run = all.dry_run;
            limit.at_ms = all.at_ms;
        }
        Ok(())
    }

    /// Records that the `index`-th group said `SHADOW` (groups past the 16th are refused by
    /// the group count anyway).
    fn mark_shadow(&mut self, index: usize, shadow: bool) {
        if shadow && index < 32 {
            self.shadow |= 1 << index;
        }
    }

    /// Adds one group's request: options only a direct command takes are refused; `DRYRUN`,
    /// `AT` and `DEADLINE` move to the call (once per call).
    fn push_group(&mut self, mut limit: Request) -> Result<(), ArgError> {
        for (given, keyword) in [
            (limit.ban_ms.is_some(), Keyword::Ban),
            (limit.clear, Keyword::Clear),
            (limit.wait_ms.is_some(), Keyword::Wait),
            (limit.fresh, Keyword::Fresh),
            (limit.at_most, Keyword::AtMost),
        ] {
            if given {
                return Err(ArgError::UnknownOption(keyword.name().as_bytes().to_vec()));
            }
        }
        if limit.dry_run {
            if self.dry_run {
                return Err(ArgError::RepeatedOption(Keyword::DryRun.name()));
            }
            self.dry_run = true;
        }
        if let Some(at) = limit.at_ms.take() {
            if self.at_ms.is_some() {
                return Err(ArgError::RepeatedOption(Keyword::At.name()));
            }
            self.at_ms = Some(at);
        }
        if let Some(deadline) = limit.deadline_ms.take() {
            if self.deadline_ms.is_some() {
                return Err(ArgError::RepeatedOption(Keyword::Deadline.name()));
            }
            self.deadline_ms = Some(deadline);
        }
        limit.dry_run = false;
        // Full only past 16 groups, which the group count refuses.
        let _ = self.limits.push(limit);
        Ok(())
    }

    /// `numkeys`: 1 … 16.
    pub fn key_count(numkeys: &[u8]) -> Result<usize, ArgError> {
        let n = parse_count("numkeys", numkeys, 1, MAX_ALL_KEYS)?;
        usize::try_from(n).map_err(|_| ArgError::WrongArity)
    }
}

/// `RL.ACQUIRE key limit lease [ID id] [WAIT timeout] [DRYRUN] [AT ms]` (arguments after the
/// key): take a concurrency lease (see [`crate::algorithms::lease`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireRequest {
    /// `limit` (1 … `ratelimit.lease-max`) and `lease` (1 ms … 10 years).
    pub params: crate::algorithms::lease::LeaseParams,
    /// `ID id`: the lease's id, 1 … 64 bytes, binary safe (`None`: the server assigns one).
    pub id: Option<crate::algorithms::lease::LeaseId>,
    /// `WAIT timeout` (ms, 0 … 10 years; `0` waits without limit): a refused call waits for a
    /// lease to lapse or be released instead of answering at once.
    pub wait_ms: Option<u64>,
    /// `DRYRUN`: evaluate and reply, change nothing.
    pub dry_run: bool,
    /// `AT unix-ms`: the instant to evaluate at instead of the server clock.
    pub at_ms: Option<i64>,
    /// `DEADLINE unix-ms`: see [`Request::deadline_ms`].
    pub deadline_ms: Option<i64>,
}

/// The options `RL.ACQUIRE` takes after `limit lease` (its own, so [`Keyword`] stays shared
/// by the limiting commands).
const ACQUIRE_OPTIONS: [&str; 5] = ["ID", "WAIT", "DRYRUN", "AT", "DEADLINE"];

/// A lease id argument: 1 … 64 bytes.
fn parse_lease_id(bytes: &[u8]) -> Result<crate::algorithms::lease::LeaseId, ArgError> {
    crate::algorithms::lease::LeaseId::new(bytes).ok_or_else(|| {
        ArgError::Invalid(format!("ID must be 1 to {} bytes", crate::algorithms::lease::MAX_ID_LEN))
    })
}

/// A `WAIT` timeout: a duration of 0 … 10 years (0: no limit).
fn parse_wait(bytes: &[u8]) -> Result<u64, ArgError> {
    let ms = crate::grammar::args::parse_signed_duration("WAIT", bytes)?;
    u64::try_from(ms).ok().filter(|v| *v <= crate::grammar::args::MAX_DURATION_MS).ok_or(
        ArgError::DurationRange {
            name: "WAIT",
            min_ms: 0,
            max_ms: i128::from(crate::grammar::args::MAX_DURATION_MS),
        },
    )
}

impl AcquireRequest {
    /// Parses `RL.ACQUIRE`'s arguments after the key. `lease_max` is the largest `limit`
    /// (`ratelimit.lease-max`). Options are case-insensitive, in any order, each at most
    /// once; `WAIT` cannot be combined with `AT` or `DRYRUN`.
    /// Parses an `RL.ACQUIRE` call whole (name first).
    pub fn parse_call(args: &[&[u8]], lease_max: u64) -> Result<AcquireRequest, ArgError> {
        arity::ACQUIRE.check(args.len())?;
        AcquireRequest::parse(args.get(2..).unwrap_or(&[]), lease_max)
    }

    pub fn parse(args: &[&[u8]], lease_max: u64) -> Result<AcquireRequest, ArgError> {
        let [limit, lease, rest @ ..] = args else {
            return Err(ArgError::WrongArity);
        };
        let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
        let lease_ms = parse_duration("lease", lease)?;
        let params = crate::algorithms::lease::LeaseParams::new(limit, lease_ms, lease_max)?;
        let mut request = AcquireRequest {
            params,
            id: None,
            wait_ms: None,
            dry_run: false,
            at_ms: None,
            deadline_ms: None,
        };
        let mut seen = [false; ACQUIRE_OPTIONS.len()];
        let mut rest = rest.iter();
        while let Some(token) = rest.next() {
            let (index, name) = ACQUIRE_OPTIONS
                .iter()
                .enumerate()
                .find(|(_, name)| token.eq_ignore_ascii_case(name.as_bytes()))
                .ok_or_else(|| ArgError::UnknownOption(token.to_vec()))?;
            let seen = seen.get_mut(index).ok_or(ArgError::RepeatedOption(name))?;
            if *seen {
                return Err(ArgError::RepeatedOption(name));
            }
            *seen = true;
            let mut value = || rest.next().ok_or(ArgError::MissingValue(name));
            match index {
                0 => request.id = Some(parse_lease_id(value()?)?),
                1 => request.wait_ms = Some(parse_wait(value()?)?),
                2 => request.dry_run = true,
                3 => request.at_ms = Some(crate::grammar::args::parse_instant("AT", value()?)?),
                _ => {
                    request.deadline_ms =
                        Some(crate::grammar::args::parse_instant("DEADLINE", value()?)?)
                }
            }
        }
        if request.wait_ms.is_some() && (request.dry_run || request.at_ms.is_some()) {
            return Err(ArgError::Invalid(
                "syntax error: WAIT cannot be combined with AT or DRYRUN".into(),
            ));
        }
        Ok(request)
    }
}

/// `RL.RELEASE key id [AT ms]` (arguments after the key): give a lease back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRequest {
    /// The lease's id, 1 … 64 bytes.
    pub id: crate::algorithms::lease::LeaseId,
    pub at_ms: Option<i64>,
}

impl ReleaseRequest {
    /// Parses an `RL.RELEASE` call whole (name first).
    pub fn parse_call(args: &[&[u8]]) -> Result<ReleaseRequest, ArgError> {
        arity::RELEASE.check(args.len())?;
        ReleaseRequest::parse(args.get(2..).unwrap_or(&[]))
    }

    /// Parses the arguments after the key: `id [AT ms]`.
    pub fn parse(args: &[&[u8]]) -> Result<ReleaseRequest, ArgError> {
        let [id, rest @ ..] = args else {
            return Err(ArgError::WrongArity);
        };
        let id = parse_lease_id(id)?;
        let options = parse_options(rest, &[Keyword::At])?;
        Ok(ReleaseRequest { id, at_ms: options.at_ms })
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
