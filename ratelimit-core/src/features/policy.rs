//! Policies: limits the server holds by name (`RL.POLICY`), so that a tier is changed, one
//! tenant overridden or a stricter limit tried in shadow without redeploying any caller
//! (`RL.HIT name key`).
//!
//! - A **definition** is a limit in `RL.ALL`'s group grammar without `COST` (`TOKEN c r p
//!   [STEP]`, `PERIOD l p [ALIGN [o] | KEEPPERIOD]`, `SLIDE l w [BUCKETS b [ANCHOR] [FLOOR]]`,
//!   `LEAKY c r p [NODELAY | DELAY d]`), optionally `BAN d [CLEAR]` and `SHADOW`. It is parsed
//!   by the policies' grammar (`grammar::policy::ParsedDefinition`, the limit by the commands'
//!   own parser, `Request::parse_group`) and kept with the arguments it was parsed from, which
//!   are what persistence and replication carry.
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

use crate::algorithms::limiter::Algorithm;
use crate::algorithms::slide::SlideMode;
use crate::grammar::args::MAX_COUNT;
use crate::grammar::error::{escape, ArgError};
use crate::grammar::policy::{hit_options, ParsedDefinition};
pub use crate::grammar::policy::{SetTarget, Target};
use crate::grammar::request::{Limit, Request};
use crate::steps::judge::{judge_key, Change};
use crate::store::held::Expanded;

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

impl Definition {
    /// Parses `limit [BAN d [CLEAR]] [SHADOW] [FOR key | CANDIDATE]` (`RL.POLICY SET name`
    /// …) with the policies' grammar ([`ParsedDefinition`]): the definition and what it is for
    /// (`None`: the policy itself). A bad definition is refused whole.
    pub fn parse(
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<(Definition, Option<SetTarget>), ArgError> {
        let ParsedDefinition { request, words, shadow, target } =
            ParsedDefinition::parse(args, slide_log_max)?;
        let mut stored: Vec<Vec<u8>> = words.iter().map(|a| a.to_vec()).collect();
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
        Ok((definition, target))
    }

    /// The arguments it was parsed from (without `FOR key` or `CANDIDATE`).
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// The definition as text, exactly what `RL.POLICY SET name` took after the name (less
    /// `FOR key` / `CANDIDATE`): its arguments joined by single spaces. `RL.POLICY GET`'s
    /// `definition` field, and what `redis-ratelimit policy export` writes.
    pub fn text(&self) -> String {
        let words: Vec<String> =
            self.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        words.join(" ")
    }

    /// Whether two definitions judge alike: the same limit, ban, `CLEAR` and `SHADOW`, however
    /// they were written (`token 10 1 1s` and `TOKEN 10 1 1000ms` are alike).
    pub fn judges_as(&self, other: &Definition) -> bool {
        self.limit == other.limit
            && self.ban_ms == other.ban_ms
            && self.clear == other.clear
            && self.shadow == other.shadow
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
        let options = hit_options(options)?;
        Ok(Request {
            limit: self.limit.clone(),
            cost: options.cost,
            dry_run: options.dry_run,
            at_ms: options.at_ms,
            ban_ms: self.ban_ms.filter(|_| !self.shadow),
            clear: self.clear && !self.shadow,
            wait_ms: options.wait_ms.filter(|_| !self.shadow),
            fresh: false,
            deadline_ms: options.deadline_ms,
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
                    crate::algorithms::leaky::LeakMode::NoDelay => f.push(("nodelay", 1)),
                    crate::algorithms::leaky::LeakMode::Delay(d) => {
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

    /// A candidate's counters by name, as `RL.POLICY STATS` adds them after the policy's:
    /// its would-be refusals are `candidate_limited`.
    pub fn candidate_fields(&self) -> [(&'static str, u64); 4] {
        [
            ("candidate_calls", self.calls),
            ("candidate_admitted", self.admitted),
            ("candidate_limited", self.shadow_limited.saturating_add(self.limited)),
            ("candidate_near_limit", self.near_limit),
        ]
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

/// One key's override: its definition and its own counters (also counted in the policy's).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Override {
    definition: Definition,
    stats: PolicyStats,
}

/// One policy: its definition, its candidate, its per-key overrides, its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    definition: Definition,
    /// A second definition judged in shadow beside the enforced one, for the keys without an
    /// override (`RL.POLICY SET name … CANDIDATE`), until promoted or deleted.
    candidate: Option<Definition>,
    overrides: HashMap<Vec<u8>, Override>,
    stats: PolicyStats,
    /// The candidate's counters: a refusal it would have made is `shadow_limited` (what
    /// `STATS` calls `candidate_limited`).
    candidate_stats: PolicyStats,
}

/// What `RL.HIT name key` is judged by: the enforced definition (the key's override's, else
/// the policy's), the candidate to judge in shadow beside it (only for a key without an
/// override), and the counters both record into.
pub struct Resolved<'a> {
    pub definition: &'a Definition,
    pub candidate: Option<&'a Definition>,
    stats: &'a mut PolicyStats,
    override_stats: Option<&'a mut PolicyStats>,
    candidate_stats: &'a mut PolicyStats,
}

impl Resolved<'_> {
    /// Counts one judged call by its reply in the policy's counters and, for an override, in
    /// the override's ([`PolicyStats::record`]).
    pub fn record(&mut self, reply: &[i64; 5], shadow: bool) {
        self.stats.record(reply, shadow);
        if let Some(stats) = self.override_stats.as_deref_mut() {
            stats.record(reply, shadow);
        }
    }

    /// Counts a call that may wait by its immediate outcome ([`PolicyStats::record_outcome`]).
    pub fn record_outcome(&mut self, admitted: bool, limited: bool) {
        self.stats.record_outcome(admitted, limited);
        if let Some(stats) = self.override_stats.as_deref_mut() {
            stats.record_outcome(admitted, limited);
        }
    }

    /// Counts how a call that waited ended ([`PolicyStats::record_late`]).
    pub fn record_late(&mut self, admitted: bool, limited: bool) {
        self.stats.record_late(admitted, limited);
        if let Some(stats) = self.override_stats.as_deref_mut() {
            stats.record_late(admitted, limited);
        }
    }

    /// Counts the candidate's verdict on the same call (its refusals as `shadow_limited`).
    pub fn record_candidate(&mut self, reply: &[i64; 5]) {
        self.candidate_stats.record(reply, true);
    }
}

/// One override as `RL.POLICY LIST name` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideEntry<'a> {
    pub key: &'a [u8],
    pub definition: &'a Definition,
    pub stats: PolicyStats,
}

/// One policy's line in `INFO`: its name, counters, candidate counters (when it has a
/// candidate) and number of overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySummary<'a> {
    pub name: &'a [u8],
    pub stats: PolicyStats,
    pub candidate_stats: Option<PolicyStats>,
    pub overrides: usize,
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

    /// Policies plus overrides (what `ratelimit.policy-max` bounds; a candidate is part of its
    /// policy's entry).
    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// `RL.POLICY SET name … [FOR key | CANDIDATE]`: defines (or replaces, whole) the policy,
    /// one key's override, or the policy's candidate. A new entry needs room under `max`; an
    /// override or a candidate needs its policy. A replaced policy keeps its overrides,
    /// candidate and counters; a new or replaced candidate starts its counters at 0.
    pub fn set(
        &mut self,
        name: &[u8],
        target: Target<'_>,
        definition: Definition,
        max: usize,
    ) -> Result<(), PolicyError> {
        if !valid_name(name) {
            return Err(PolicyError::BadName(name.to_vec()));
        }
        let full = self.entries >= max;
        let target = match target {
            Target::Override(key) if key == CANDIDATE_KEY => Target::Candidate,
            other => other,
        };
        match target {
            Target::Policy => match self.policies.get_mut(name) {
                Some(policy) => policy.definition = definition,
                None if full => return Err(PolicyError::Full { max }),
                None => {
                    let policy = Policy {
                        definition,
                        candidate: None,
                        overrides: HashMap::new(),
                        stats: PolicyStats::default(),
                        candidate_stats: PolicyStats::default(),
                    };
                    self.policies.insert(name.to_vec(), policy);
                    self.entries += 1;
                }
            },
            Target::Candidate => {
                let policy = self
                    .policies
                    .get_mut(name)
                    .ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
                policy.candidate = Some(definition);
                policy.candidate_stats = PolicyStats::default();
            }
            Target::Override(key) => {
                let policy = self
                    .policies
                    .get_mut(name)
                    .ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
                match policy.overrides.get_mut(key) {
                    Some(existing) => existing.definition = definition,
                    None if full => return Err(PolicyError::Full { max }),
                    None => {
                        let entry = Override { definition, stats: PolicyStats::default() };
                        policy.overrides.insert(key.to_vec(), entry);
                        self.entries += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// `RL.POLICY GET name [FOR key | CANDIDATE]`: the policy's definition, the key's
    /// override, or the candidate.
    pub fn get(&self, name: &[u8], target: Target<'_>) -> Option<&Definition> {
        let policy = self.policies.get(name)?;
        match target {
            Target::Policy => Some(&policy.definition),
            Target::Override(key) => policy.overrides.get(key).map(|o| &o.definition),
            Target::Candidate => policy.candidate.as_ref(),
        }
    }

    /// `RL.POLICY DEL name [FOR key | CANDIDATE]`: removes the policy with all its overrides
    /// and its candidate, one override, or the candidate. Whether there was something to
    /// remove.
    pub fn delete(&mut self, name: &[u8], target: Target<'_>) -> bool {
        match target {
            Target::Policy => match self.policies.remove(name) {
                Some(policy) => {
                    self.entries = self.entries.saturating_sub(1 + policy.overrides.len());
                    true
                }
                None => false,
            },
            Target::Override(key) => {
                let removed =
                    self.policies.get_mut(name).and_then(|p| p.overrides.remove(key)).is_some();
                if removed {
                    self.entries = self.entries.saturating_sub(1);
                }
                removed
            }
            Target::Candidate => {
                let policy = self.policies.get_mut(name);
                policy.is_some_and(|p| {
                    p.candidate_stats = PolicyStats::default();
                    p.candidate.take().is_some()
                })
            }
        }
    }

    /// `RL.POLICY PROMOTE name`: the candidate becomes the policy's definition (its counters
    /// go on; the candidate's are dropped). `Ok(false)`: the policy has no candidate.
    pub fn promote(&mut self, name: &[u8]) -> Result<bool, PolicyError> {
        let policy =
            self.policies.get_mut(name).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
        let Some(candidate) = policy.candidate.take() else {
            return Ok(false);
        };
        policy.definition = candidate;
        policy.candidate_stats = PolicyStats::default();
        Ok(true)
    }

    /// `RL.POLICY LIST`: the names, sorted bytewise.
    pub fn names(&self) -> Vec<&[u8]> {
        let mut names: Vec<&[u8]> = self.policies.keys().map(Vec::as_slice).collect();
        names.sort_unstable();
        names
    }

    /// `RL.POLICY LIST name`: the policy's overrides, by key (sorted bytewise), with their
    /// definitions and counters; `None` when there is no such policy.
    pub fn overrides(&self, name: &[u8]) -> Option<Vec<OverrideEntry<'_>>> {
        let policy = self.policies.get(name)?;
        let mut entries: Vec<OverrideEntry<'_>> = policy
            .overrides
            .iter()
            .map(|(key, o)| OverrideEntry {
                key: key.as_slice(),
                definition: &o.definition,
                stats: o.stats,
            })
            .collect();
        entries.sort_unstable_by(|a, b| a.key.cmp(b.key));
        Some(entries)
    }

    /// What `RL.HIT name key` judges `key` by (the key's override, else the policy's
    /// definition and its candidate) and the counters to record into; `None` when there is
    /// no such policy.
    #[inline]
    pub fn resolve(&mut self, name: &[u8], key: &[u8]) -> Option<Resolved<'_>> {
        let Policy { definition, candidate, overrides, stats, candidate_stats } =
            self.policies.get_mut(name)?;
        let found = if overrides.is_empty() { None } else { overrides.get_mut(key) };
        Some(match found {
            Some(o) => Resolved {
                definition: &o.definition,
                candidate: None,
                stats,
                override_stats: Some(&mut o.stats),
                candidate_stats,
            },
            None => Resolved {
                definition: &*definition,
                candidate: candidate.as_ref(),
                stats,
                override_stats: None,
                candidate_stats,
            },
        })
    }

    /// `RL.POLICY STATS name`: the policy's counters and its candidate's (`None` without a
    /// candidate).
    pub fn stats(&self, name: &[u8]) -> Option<(PolicyStats, Option<PolicyStats>)> {
        self.policies.get(name).map(|p| (p.stats, p.candidate.as_ref().map(|_| p.candidate_stats)))
    }

    /// Every policy's counters, by name (sorted), for `INFO`.
    pub fn all_stats(&self) -> Vec<PolicySummary<'_>> {
        let mut all: Vec<_> = self
            .policies
            .iter()
            .map(|(name, p)| PolicySummary {
                name: name.as_slice(),
                stats: p.stats,
                candidate_stats: p.candidate.as_ref().map(|_| p.candidate_stats),
                overrides: p.overrides.len(),
            })
            .collect();
        all.sort_unstable_by(|a, b| a.name.cmp(b.name));
        all
    }

    /// `RL.POLICY RESETSTAT`: zeroes every counter (policies, candidates, overrides).
    pub fn reset_stats(&mut self) {
        for policy in self.policies.values_mut() {
            policy.stats = PolicyStats::default();
            policy.candidate_stats = PolicyStats::default();
            for o in policy.overrides.values_mut() {
                o.stats = PolicyStats::default();
            }
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
                    + p.candidate.as_ref().map_or(0, definition)
                    + p.overrides
                        .iter()
                        .map(|(k, o)| k.len() + definition(&o.definition))
                        .sum::<usize>()
            })
            .sum()
    }

    /// Every entry as the arguments of the `RL.POLICY SET` that makes it — policies by name,
    /// each followed by its candidate (`name args… CANDIDATE`) and its overrides by key
    /// (`name args… FOR key`) — for the AOF rewrite and replication.
    pub fn set_commands(&self) -> Vec<Vec<&[u8]>> {
        self.entries_as(b"CANDIDATE", None)
    }

    /// The entries as `SET` arguments, the candidate written as `candidate_tail` (and, when
    /// given, `FOR candidate_key`).
    fn entries_as<'a>(
        &'a self,
        candidate_tail: &'a [u8],
        candidate_key: Option<&'a [u8]>,
    ) -> Vec<Vec<&'a [u8]>> {
        let mut out = Vec::with_capacity(self.entries);
        for (name, policy) in self.sorted() {
            let mut command = vec![name];
            command.extend(policy.definition.args.iter().map(Vec::as_slice));
            out.push(command);
            if let Some(candidate) = &policy.candidate {
                let mut command = vec![name];
                command.extend(candidate.args.iter().map(Vec::as_slice));
                match candidate_key {
                    Some(key) => command.extend([&b"FOR"[..], key]),
                    None => command.push(candidate_tail),
                }
                out.push(command);
            }
            let mut keys: Vec<_> = policy.overrides.iter().collect();
            keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, o) in keys {
                let mut command = vec![name];
                command.extend(o.definition.args.iter().map(Vec::as_slice));
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
    /// entry as a count of arguments and the arguments, each a 32-bit little-endian length
    /// and its bytes: `name args… [FOR key]`, as [`PolicyTable::set_commands`] but with a
    /// candidate written as an override of the reserved key [`CANDIDATE_KEY`]. So the format
    /// stays version 1, and a release without candidates (0.3.0) loads such a table: it keeps
    /// every policy and override and holds the candidate as an override of a key no caller
    /// uses (its own rewrite writes it back, so a later upgrade finds the candidate again).
    /// Counters are not persisted.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        for command in self.entries_as(b"", Some(CANDIDATE_KEY)) {
            put_u32(&mut out, command.len());
            for arg in command {
                put_u32(&mut out, arg.len());
                out.extend_from_slice(arg);
            }
        }
        out
    }

    /// Reads [`PolicyTable::encode`]'s format (every version written so far: version 1, with
    /// or without candidates): every entry parsed again by the commands' own parser (a
    /// sliding log's bound is not applied: what was accepted once loads). Refuses an unknown
    /// version, truncated data or an entry that does not parse.
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
            let (definition, target) = Definition::parse(definition, MAX_COUNT)
                .map_err(|e| format!("policy '{}': {e}", escape(name)))?;
            let target = match &target {
                Some(SetTarget::Override(key)) if key.as_slice() == CANDIDATE_KEY => {
                    Target::Candidate
                }
                other => SetTarget::target(other),
            };
            table
                .set(name, target, definition, usize::MAX)
                .map_err(|e| format!("policy '{}': {e}", escape(name)))?;
        }
        Ok(table)
    }
}

/// Most keys whose candidate state a node keeps ([`CandidateStates`]).
pub const CANDIDATE_STATES_MAX: usize = 100_000;

/// The candidates' limiter states, per policy and key: node memory only (never stored in a
/// key, persisted or replicated — a candidate is an estimate beside the enforced limit, and
/// starts fresh after a restart or a failover). Bounded by [`CANDIDATE_STATES_MAX`]: states
/// past their reset instant are dropped; a key that finds no room is judged against a fresh
/// limiter and not kept (counted in `untracked`).
#[derive(Debug, Default)]
pub struct CandidateStates {
    states: HashMap<(Vec<u8>, Vec<u8>), (Expanded, i64)>,
    /// When expired states were last swept (unix ms).
    last_sweep_ms: i64,
    /// Judgements made against a fresh limiter because the states were full.
    pub untracked: u64,
}

impl CandidateStates {
    pub fn new() -> CandidateStates {
        CandidateStates::default()
    }

    /// States held now.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Judges `key` under `policy`'s candidate `definition` at `now_ms` with `cost` (nothing
    /// kept under `dry_run`): the reply the candidate would have given, never a ban, never a
    /// wait.
    pub fn judge(
        &mut self,
        policy: &[u8],
        key: &[u8],
        definition: &Definition,
        cost: u64,
        dry_run: bool,
        now_ms: i64,
    ) -> [i64; 5] {
        let request = Request {
            limit: definition.limit.clone(),
            cost,
            dry_run,
            at_ms: None,
            ban_ms: None,
            clear: false,
            wait_ms: None,
            fresh: false,
            deadline_ms: None,
            at_most: false,
        };
        let id = (policy.to_vec(), key.to_vec());
        if self.states.get(&id).is_some_and(|(_, expire_at)| *expire_at <= now_ms) {
            self.states.remove(&id);
        }
        let judged = match self.states.get_mut(&id) {
            Some((held, _)) => judge_key(Some(held), &request, now_ms),
            None => judge_key(None::<&mut Expanded>, &request, now_ms),
        };
        let verdict = match judged {
            Ok(verdict) => verdict,
            // A state the candidate cannot read (it changed algorithm): start afresh.
            Err(_) => {
                self.states.remove(&id);
                match judge_key(None::<&mut Expanded>, &request, now_ms) {
                    Ok(verdict) => verdict,
                    Err(_) => return [1, 0, 0, 0, 0],
                }
            }
        };
        match verdict.change {
            Change::Unchanged => {}
            Change::Updated { expire_at_ms, .. } => {
                if let Some(entry) = self.states.get_mut(&id) {
                    entry.1 = expire_at_ms;
                }
            }
            Change::Created { limiter, expire_at_ms } => {
                if self.states.len() >= CANDIDATE_STATES_MAX {
                    self.sweep(now_ms);
                }
                if self.states.len() < CANDIDATE_STATES_MAX {
                    self.states.insert(id, (Expanded { limiter, ban: None }, expire_at_ms));
                } else {
                    self.untracked = self.untracked.saturating_add(1);
                }
            }
            Change::Deleted => {
                self.states.remove(&id);
            }
        }
        verdict.reply
    }

    /// Drops the states past their reset instant, at most once a second.
    fn sweep(&mut self, now_ms: i64) {
        if now_ms.saturating_sub(self.last_sweep_ms) < 1000 && now_ms >= self.last_sweep_ms {
            return;
        }
        self.last_sweep_ms = now_ms;
        self.states.retain(|_, (_, expire_at)| *expire_at > now_ms);
    }

    /// Forgets every state of `policy`'s candidate (it was replaced, promoted or deleted).
    pub fn forget(&mut self, policy: &[u8]) {
        self.states.retain(|(name, _), _| name.as_slice() != policy);
    }

    /// Forgets every state (a new table was loaded).
    pub fn clear(&mut self) {
        self.states.clear();
    }
}

/// The reserved key a candidate is persisted under (see [`PolicyTable::encode`]); `SET … FOR`
/// refuses it.
pub const CANDIDATE_KEY: &[u8] = b"\x00rl:candidate";

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
