//! Policies: limits the server holds by name (`RL.POLICY`), so that a tier is changed, one
//! tenant overridden or a stricter limit tried in shadow without redeploying any caller
//! (`RL.HIT name key`).
//!
//! - A **definition** is a limit in `RL.ALL`'s group grammar without `COST` (`TOKEN c r p
//!   [STEP]`, `PERIOD l p [ALIGN [o] | KEEPPERIOD]`, `SLIDE l w [BUCKETS b [ANCHOR] [FLOOR]]`,
//!   `LEAKY c r p [NODELAY | DELAY d]`), optionally `BAN d [CLEAR]` and `SHADOW`. It is parsed
//!   by the commands' own parser ([`Request::parse_group`]) and kept with the arguments it was
//!   parsed from, which are what persistence and replication carry.
//! - A **policy** is a named definition, its **overrides** (`FOR key`: another definition for
//!   one key) and its **counters** (`calls`, `admitted`, `limited`, `shadow_limited`,
//!   `near_limit`): counters live here, per policy, never per key.
//! - **Resolution** of `name` + `key` is one hash lookup of the name (and one more of the key
//!   only when the policy has overrides).
//! - The table is bounded: policies plus overrides at most `ratelimit.policy-max`.
//!
//! Nothing here touches Redis: the shell keeps one table per server and persists it with
//! [`PolicyTable::encode`] / [`PolicyTable::decode`].

use std::collections::HashMap;
use std::fmt;

use super::args::{parse_options, Keyword, MAX_COUNT};
use super::error::{escape, ArgError};
use super::limiter::Algorithm;
use super::request::{Limit, Request};
use super::slide::SlideMode;

/// Longest policy name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Default bound of policies plus overrides (`ratelimit.policy-max`).
pub const POLICY_MAX_DEFAULT: i64 = 100_000;
/// Largest `ratelimit.policy-max`.
pub const POLICY_MAX_LIMIT: i64 = 10_000_000;

/// Whether `name` is a valid policy name: 1 to 64 bytes of `A-Z a-z 0-9 _ - .` (so it is one
/// word in `INFO` and in every log).
pub fn valid_name(name: &[u8]) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A policy's (or an override's) limit: what `RL.HIT` judges a key with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The algorithm and its parameters.
    pub limit: Limit,
    /// `BAN d`: a refusal by the algorithm locks the key out this long (ms).
    pub ban_ms: Option<u64>,
    /// `CLEAR` (with `BAN`): the ban also clears the limiter.
    pub clear: bool,
    /// `SHADOW`: a would-be refusal is answered `allowed = 1`, changes nothing, and is counted
    /// as `shadow_limited`.
    pub shadow: bool,
    /// The arguments it was parsed from (the limit and its options, `SHADOW`; never `FOR
    /// key`): what persistence and replication carry, parsed again on load.
    args: Vec<Vec<u8>>,
}

/// Per-call options a definition never holds: `RL.HIT` takes `COST`, `DRYRUN`, `AT`, `WAIT`;
/// `FRESH` stays a direct-command option.
const CALL_OPTIONS: [Keyword; 5] =
    [Keyword::Cost, Keyword::DryRun, Keyword::At, Keyword::Wait, Keyword::Fresh];

/// The options `RL.HIT` takes after `name key`.
const HIT_OPTIONS: &[Keyword] = &[Keyword::Cost, Keyword::DryRun, Keyword::At, Keyword::Wait];

impl Definition {
    /// Parses `limit [BAN d [CLEAR]] [SHADOW] [FOR key]` (`RL.POLICY SET name` …): the
    /// definition and the key of `FOR`, if any. A bad definition is refused whole.
    pub fn parse(
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<(Definition, Option<Vec<u8>>), ArgError> {
        let mut kept: Vec<&[u8]> = Vec::with_capacity(args.len());
        let mut shadow = false;
        let mut key = None;
        let mut rest = args.iter();
        while let Some(token) = rest.next() {
            if token.eq_ignore_ascii_case(b"FOR") {
                if key.is_some() {
                    return Err(ArgError::RepeatedOption("FOR"));
                }
                key = Some(rest.next().ok_or(ArgError::MissingValue("FOR"))?.to_vec());
            } else if token.eq_ignore_ascii_case(b"SHADOW") {
                if shadow {
                    return Err(ArgError::RepeatedOption("SHADOW"));
                }
                shadow = true;
            } else if let Some(option) =
                CALL_OPTIONS.iter().find(|k| token.eq_ignore_ascii_case(k.name().as_bytes()))
            {
                return Err(ArgError::Invalid(format!(
                    "syntax error: a policy holds no {} (give it to RL.HIT)",
                    option.name()
                )));
            } else {
                kept.push(token);
            }
        }
        let request = Request::parse_group(&kept, slide_log_max)?;
        let mut stored: Vec<Vec<u8>> = kept.iter().map(|a| a.to_vec()).collect();
        if shadow {
            stored.push(b"SHADOW".to_vec());
        }
        let definition = Definition {
            limit: request.limit,
            ban_ms: request.ban_ms,
            clear: request.clear,
            shadow,
            args: stored,
        };
        Ok((definition, key))
    }

    /// The arguments it was parsed from (without `FOR key`).
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        match self.limit {
            Limit::Token(_) => Algorithm::Token,
            Limit::Period(_) => Algorithm::Period,
            Limit::Slide(_) => Algorithm::Slide,
            Limit::Leaky(_) => Algorithm::Leaky,
            Limit::Throttle(_) => Algorithm::Gcra,
        }
    }

    /// The request `RL.HIT name key [COST n] [DRYRUN] [AT ms] [WAIT t]` makes: the definition's
    /// limit and ban with the call's options (`options`: the arguments after the key). In
    /// shadow, a refusal must change nothing: no ban, and no waiting (a would-be refusal is
    /// answered at once).
    pub fn request(&self, options: &[&[u8]]) -> Result<Request, ArgError> {
        let options = parse_options(options, HIT_OPTIONS)?;
        Ok(Request {
            limit: self.limit.clone(),
            cost: options.cost,
            dry_run: options.dry_run,
            at_ms: options.at_ms,
            ban_ms: self.ban_ms.filter(|_| !self.shadow),
            clear: self.clear && !self.shadow,
            wait_ms: options.wait_ms.filter(|_| !self.shadow),
            fresh: false,
            at_most: false,
        })
    }

    /// `RL.POLICY GET`'s fields after `algorithm`: the parameters under `RL.INFO`'s names,
    /// then `ban_ms` (0 when none), `clear` and `shadow` (0/1).
    pub fn fields(&self) -> Vec<(&'static str, i64)> {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut fields = match &self.limit {
            Limit::Token(p) => vec![
                ("capacity", int(p.capacity)),
                ("rate", int(p.rate)),
                ("period_ms", int(p.period_ms)),
                ("step", i64::from(p.step)),
            ],
            Limit::Period(p) => {
                let mut f = vec![("limit", int(p.limit)), ("period_ms", int(p.period_ms))];
                match p.align {
                    Some(offset) => f.extend([("align", 1), ("utc_offset_ms", offset)]),
                    None => f.push(("align", 0)),
                }
                f.push(("keepperiod", i64::from(p.keep_period)));
                f
            }
            Limit::Slide(p) => {
                let mode: SlideMode = p.mode;
                vec![
                    ("limit", int(p.limit)),
                    ("window_ms", int(p.window_ms)),
                    ("buckets", i64::from(mode.buckets())),
                    ("anchor", i64::from(mode.anchored())),
                    ("floor", i64::from(mode.floored())),
                ]
            }
            Limit::Leaky(p) => {
                let mut f = vec![
                    ("capacity", int(p.capacity)),
                    ("rate", int(p.rate)),
                    ("period_ms", int(p.period_ms)),
                ];
                match p.mode {
                    super::leaky::LeakMode::NoDelay => f.push(("nodelay", 1)),
                    super::leaky::LeakMode::Delay(d) => {
                        f.extend([("nodelay", 0), ("delay", int(d))])
                    }
                }
                f
            }
            Limit::Throttle(_) => Vec::new(),
        };
        fields.extend([
            ("ban_ms", self.ban_ms.map_or(0, int)),
            ("clear", i64::from(self.clear)),
            ("shadow", i64::from(self.shadow)),
        ]);
        fields
    }
}

/// A policy's counters, for every key judged under it (overrides included).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PolicyStats {
    /// Calls judged (errors excluded).
    pub calls: u64,
    /// Calls admitted.
    pub admitted: u64,
    /// Calls refused.
    pub limited: u64,
    /// Calls a `SHADOW` policy would have refused (answered allowed; not in `admitted`).
    pub shadow_limited: u64,
    /// Admitted calls that left at most 20 % of the limit (Envoy's default near-limit ratio).
    pub near_limit: u64,
}

impl PolicyStats {
    /// Counts one judged call by its reply (`allowed, limit, remaining, retry_after, reset`)
    /// before any shadow rewriting: a refusal under `shadow` is `shadow_limited`.
    pub fn record(&mut self, reply: &[i64; 5], shadow: bool) {
        let [allowed, limit, remaining, _, _] = *reply;
        self.calls = self.calls.saturating_add(1);
        let counter = if allowed == 1 {
            if i128::from(remaining) * 5 <= i128::from(limit) {
                self.near_limit = self.near_limit.saturating_add(1);
            }
            &mut self.admitted
        } else if shadow {
            &mut self.shadow_limited
        } else {
            &mut self.limited
        };
        *counter = counter.saturating_add(1);
    }

    /// Counts a call that may wait (`WAIT`) by its immediate outcome: admitted, refused, or
    /// neither (it waits: [`PolicyStats::record_late`] counts how it ends).
    pub fn record_outcome(&mut self, admitted: bool, limited: bool) {
        self.calls = self.calls.saturating_add(1);
        self.record_late(admitted, limited);
    }

    /// Counts how a call that waited ended (its call was counted when it began waiting).
    pub fn record_late(&mut self, admitted: bool, limited: bool) {
        if admitted {
            self.admitted = self.admitted.saturating_add(1);
        } else if limited {
            self.limited = self.limited.saturating_add(1);
        }
    }

    /// The counters by name, in `RL.POLICY STATS` order.
    pub fn fields(&self) -> [(&'static str, u64); 5] {
        [
            ("calls", self.calls),
            ("admitted", self.admitted),
            ("limited", self.limited),
            ("shadow_limited", self.shadow_limited),
            ("near_limit", self.near_limit),
        ]
    }
}

/// One policy: its definition, its per-key overrides, its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    definition: Definition,
    overrides: HashMap<Vec<u8>, Definition>,
    stats: PolicyStats,
}

/// Why a change to the table was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// An invalid policy name.
    BadName(Vec<u8>),
    /// `FOR key` on a policy that does not exist, or `RL.HIT` / `STATS` of a missing policy.
    NoSuchPolicy(Vec<u8>),
    /// The table holds `max` policies and overrides already.
    Full { max: usize },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::BadName(name) => write!(
                f,
                "ERR invalid policy name '{}' (1 to {MAX_NAME_LEN} bytes of A-Z a-z 0-9 _ - .)",
                escape(name)
            ),
            PolicyError::NoSuchPolicy(name) => write!(f, "ERR no such policy '{}'", escape(name)),
            PolicyError::Full { max } => write!(
                f,
                "ERR the policy table is full ({max} policies and overrides: ratelimit.policy-max)"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

/// Every policy of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyTable {
    policies: HashMap<Vec<u8>, Policy>,
    /// Policies plus overrides.
    entries: usize,
}

impl PolicyTable {
    pub fn new() -> PolicyTable {
        PolicyTable::default()
    }

    /// Policies plus overrides (what `ratelimit.policy-max` bounds).
    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// `RL.POLICY SET name … [FOR key]`: defines (or replaces, whole) the policy or one key's
    /// override. A new entry needs room under `max`; an override needs its policy. A replaced
    /// policy keeps its overrides and counters.
    pub fn set(
        &mut self,
        name: &[u8],
        key: Option<&[u8]>,
        definition: Definition,
        max: usize,
    ) -> Result<(), PolicyError> {
        if !valid_name(name) {
            return Err(PolicyError::BadName(name.to_vec()));
        }
        let full = self.entries >= max;
        match key {
            None => match self.policies.get_mut(name) {
                Some(policy) => policy.definition = definition,
                None if full => return Err(PolicyError::Full { max }),
                None => {
                    let policy = Policy {
                        definition,
                        overrides: HashMap::new(),
                        stats: PolicyStats::default(),
                    };
                    self.policies.insert(name.to_vec(), policy);
                    self.entries += 1;
                }
            },
            Some(key) => {
                let policy = self
                    .policies
                    .get_mut(name)
                    .ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
                match policy.overrides.get_mut(key) {
                    Some(existing) => *existing = definition,
                    None if full => return Err(PolicyError::Full { max }),
                    None => {
                        policy.overrides.insert(key.to_vec(), definition);
                        self.entries += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// `RL.POLICY GET name [FOR key]`: the policy's definition, or the key's override.
    pub fn get(&self, name: &[u8], key: Option<&[u8]>) -> Option<&Definition> {
        let policy = self.policies.get(name)?;
        match key {
            None => Some(&policy.definition),
            Some(key) => policy.overrides.get(key),
        }
    }

    /// `RL.POLICY DEL name [FOR key]`: removes the policy with all its overrides, or one
    /// override. Whether there was something to remove.
    pub fn delete(&mut self, name: &[u8], key: Option<&[u8]>) -> bool {
        match key {
            None => match self.policies.remove(name) {
                Some(policy) => {
                    self.entries = self.entries.saturating_sub(1 + policy.overrides.len());
                    true
                }
                None => false,
            },
            Some(key) => {
                let removed =
                    self.policies.get_mut(name).and_then(|p| p.overrides.remove(key)).is_some();
                if removed {
                    self.entries = self.entries.saturating_sub(1);
                }
                removed
            }
        }
    }

    /// `RL.POLICY LIST`: the names, sorted bytewise.
    pub fn names(&self) -> Vec<&[u8]> {
        let mut names: Vec<&[u8]> = self.policies.keys().map(Vec::as_slice).collect();
        names.sort_unstable();
        names
    }

    /// The definition `RL.HIT name key` judges `key` with (the key's override, else the
    /// policy's) and the policy's counters; `None` when there is no such policy.
    #[inline]
    pub fn resolve(&mut self, name: &[u8], key: &[u8]) -> Option<(&Definition, &mut PolicyStats)> {
        let Policy { definition, overrides, stats } = self.policies.get_mut(name)?;
        let definition = if overrides.is_empty() {
            &*definition
        } else {
            overrides.get(key).unwrap_or(definition)
        };
        Some((definition, stats))
    }

    /// `RL.POLICY STATS name`.
    pub fn stats(&self, name: &[u8]) -> Option<PolicyStats> {
        self.policies.get(name).map(|p| p.stats)
    }

    /// Every policy's counters, by name (sorted), for `INFO`.
    pub fn all_stats(&self) -> Vec<(&[u8], PolicyStats, usize)> {
        let mut all: Vec<_> = self
            .policies
            .iter()
            .map(|(name, p)| (name.as_slice(), p.stats, p.overrides.len()))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// `RL.POLICY RESETSTAT`: zeroes every policy's counters.
    pub fn reset_stats(&mut self) {
        for policy in self.policies.values_mut() {
            policy.stats = PolicyStats::default();
        }
    }

    /// An estimate of the table's heap bytes (names, keys, arguments, and a fixed overhead per
    /// entry), for `INFO`.
    pub fn bytes(&self) -> usize {
        const ENTRY_OVERHEAD: usize = 160;
        let definition =
            |d: &Definition| d.args.iter().map(|a| a.len() + 24).sum::<usize>() + ENTRY_OVERHEAD;
        self.policies
            .iter()
            .map(|(name, p)| {
                name.len()
                    + definition(&p.definition)
                    + p.overrides.iter().map(|(k, d)| k.len() + definition(d)).sum::<usize>()
            })
            .sum()
    }

    /// Every entry as the arguments of the `RL.POLICY SET` that makes it — policies by name,
    /// each followed by its overrides by key: `name args… [FOR key]` — for the AOF rewrite
    /// and replication.
    pub fn set_commands(&self) -> Vec<Vec<&[u8]>> {
        let mut out = Vec::with_capacity(self.entries);
        for (name, policy) in self.sorted() {
            let mut command = vec![name];
            command.extend(policy.definition.args.iter().map(Vec::as_slice));
            out.push(command);
            let mut keys: Vec<_> = policy.overrides.iter().collect();
            keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, definition) in keys {
                let mut command = vec![name];
                command.extend(definition.args.iter().map(Vec::as_slice));
                command.extend([&b"FOR"[..], key.as_slice()]);
                out.push(command);
            }
        }
        out
    }

    fn sorted(&self) -> Vec<(&[u8], &Policy)> {
        let mut all: Vec<_> = self.policies.iter().map(|(n, p)| (n.as_slice(), p)).collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// The table in the persistence format (RDB aux data): a format version byte, then every
    /// entry of [`PolicyTable::set_commands`] as a count of arguments and the arguments, each
    /// a 32-bit little-endian length and its bytes. Counters are not persisted.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        for command in self.set_commands() {
            put_u32(&mut out, command.len());
            for arg in command {
                put_u32(&mut out, arg.len());
                out.extend_from_slice(arg);
            }
        }
        out
    }

    /// Reads [`PolicyTable::encode`]'s format: every entry parsed again by the commands' own
    /// parser (a sliding log's bound is not applied: what was accepted once loads). Refuses an
    /// unknown version, truncated data or an entry that does not parse.
    pub fn decode(bytes: &[u8]) -> Result<PolicyTable, String> {
        let (version, mut rest) = bytes.split_first().ok_or("empty policy data")?;
        if *version != FORMAT_VERSION {
            return Err(format!("unknown policy format version {version}"));
        }
        let mut table = PolicyTable::new();
        while !rest.is_empty() {
            let (count, tail) = take_u32(rest)?;
            rest = tail;
            let mut args: Vec<&[u8]> = Vec::with_capacity(count.min(64));
            for _ in 0..count {
                let (len, tail) = take_u32(rest)?;
                let arg = tail.get(..len).ok_or("truncated policy data")?;
                args.push(arg);
                rest = tail.get(len..).unwrap_or(&[]);
            }
            let (name, definition) = args.split_first().ok_or("an empty policy entry")?;
            let (definition, key) = Definition::parse(definition, MAX_COUNT)
                .map_err(|e| format!("policy '{}': {e}", escape(name)))?;
            table
                .set(name, key.as_deref(), definition, usize::MAX)
                .map_err(|e| format!("policy '{}': {e}", escape(name)))?;
        }
        Ok(table)
    }
}

/// The persistence format's version.
const FORMAT_VERSION: u8 = 1;

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn take_u32(bytes: &[u8]) -> Result<(usize, &[u8]), String> {
    let (head, tail) = bytes.split_first_chunk::<4>().ok_or("truncated policy data")?;
    let n = usize::try_from(u32::from_le_bytes(*head)).map_err(|_| "policy data too long")?;
    Ok((n, tail))
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
