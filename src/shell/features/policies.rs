//! The server's one policy table (`ratelimit_core::features::policy`) and its candidates'
//! shadow states: what `RL.POLICY` changes and `RL.HIT` and `RL.ALL`'s `POLICY` groups resolve
//! (the commands are `commands::policy`), the counters they record, its `INFO` lines. The
//! table is saved with every RDB and AOF by its storage beside it (`features::persist`).
//!
//! Policies are node state, like Redis Functions: `RL.POLICY SET/DEL` propagate verbatim to
//! replicas and the AOF. Everything here runs on Redis' main thread (or in a forked child
//! reading its copy).

use std::cell::RefCell;

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::features::stats::Counted;
use crate::shell::features::top;
use ratelimit_core::features::policy::{CandidateStates, PolicyError, PolicyTable, Resolved};
use ratelimit_core::features::top::candidate_tag;
use ratelimit_core::grammar::request::{Limit, Request};

thread_local! {
    /// The table. Redis runs commands, callbacks and persistence on its main thread (a
    /// `BGSAVE` child is a copy of it).
    static TABLE: RefCell<PolicyTable> = RefCell::new(PolicyTable::new());
}
impl From<PolicyError> for CommandError {
    fn from(e: PolicyError) -> Self {
        CommandError::Text(e.to_string())
    }
}

/// Runs `f` on the table. Never nested (nothing inside `f` calls back into this module's
/// table); were it ever, the call fails with an error instead of aborting the server.
pub fn with_table<R>(
    f: impl FnOnce(&mut PolicyTable) -> Result<R, CommandError>,
) -> Result<R, CommandError> {
    TABLE.with(|t| match t.try_borrow_mut() {
        Ok(mut table) => f(&mut table),
        Err(_) => Err(CommandError::Text("ERR the policy table is busy".into())),
    })
}

/// Replaces the whole table (a load starts, or RDB aux data was read); the candidates' states
/// start afresh.
pub fn replace_table(table: PolicyTable) {
    forget_candidates(None);
    TABLE.with(|t| {
        if let Ok(mut current) = t.try_borrow_mut() {
            *current = table;
        }
    });
}

/// The instant a refusal counts at in `RL.TOP`: when it was judged, or the server clock when
/// the caller gave `AT` (see `top::call_refused`).
pub fn top_clock(call: &Call, request: &Request, judged_ms: i64) -> i64 {
    if request.at_ms.is_some() {
        call.clock_ms()
    } else {
        judged_ms
    }
}

thread_local! {
    /// The candidates' limiter states (node memory, see `CandidateStates`).
    static CANDIDATES: RefCell<CandidateStates> = RefCell::new(CandidateStates::new());
}

/// Judges the call again under the policy's candidate, if it has one (and the key no
/// override), in shadow: its counters record the verdict, `RL.TOP POLICY name CANDIDATE` its
/// would-be refusals. Nothing in the keyspace changes.
pub fn judge_candidate(
    call: &Call,
    resolved: &mut Resolved<'_>,
    name: &[u8],
    key: &[u8],
    request: &Request,
    judged_ms: i64,
) {
    let Some(candidate) = resolved.candidate else {
        return;
    };
    let reply = CANDIDATES.with(|states| match states.try_borrow_mut() {
        Ok(mut states) => {
            Some(states.judge(name, key, candidate, request.cost, request.dry_run, judged_ms))
        }
        Err(_) => None,
    });
    let Some(reply) = reply else {
        return;
    };
    resolved.record_candidate(&reply);
    if reply[0] == 0 && !request.dry_run {
        top::refused(key, &candidate_tag(name), top_clock(call, request, judged_ms));
    }
}

/// Forgets the candidate states of `name` (its candidate changed, was promoted or deleted),
/// or of every policy.
pub fn forget_candidates(name: Option<&[u8]>) {
    CANDIDATES.with(|states| {
        if let Ok(mut states) = states.try_borrow_mut() {
            match name {
                Some(name) => states.forget(name),
                None => states.clear(),
            }
        }
    });
}

/// The limit `RL.ALL`'s group `POLICY name` judges `key` with (the key's override's, else the
/// policy's) and whether the policy is in shadow; `None`: no such policy.
pub fn limit_for(name: &[u8], key: &[u8]) -> Option<(Limit, bool)> {
    with_table(|table| {
        Ok(table.resolve(name, key).map(|r| (r.definition.limit.clone(), r.definition.shadow)))
    })
    .ok()
    .flatten()
}

/// Counts an `RL.ALL` group judged under a policy in the policy's (and the key's override's)
/// counters: a call; admitted when the whole call was; refused (or, in shadow,
/// `shadow_limited`) when its own limit refused; neither when another group refused it.
pub fn record_all_group(name: &[u8], key: &[u8], detail: &[i64; 5], call_admitted: bool) {
    let _ = with_table(|table| {
        if let Some(mut resolved) = table.resolve(name, key) {
            let shadow = resolved.definition.shadow;
            if call_admitted || detail[0] == 0 {
                resolved.record(detail, shadow);
            } else {
                resolved.record_outcome(false, false);
            }
        }
        Ok(())
    });
}

/// Counts how a `RL.HIT` that waited ended, in its policy's (and its key's override's)
/// `admitted` or `limited` (its call was counted when it blocked; a policy deleted meanwhile
/// counts nothing).
pub fn record_late(name: &[u8], key: &[u8], outcome: Counted) {
    let _ = with_table(|table| {
        if let Some(mut resolved) = table.resolve(name, key) {
            let (admitted, limited) = (outcome == Counted::Admitted, outcome == Counted::Limited);
            resolved.record_late(admitted, limited);
        }
        Ok(())
    });
}

/// Named integer fields of an INFO section or line.
pub type InfoFields = Vec<(&'static str, i64)>;

/// The prefix of every per-policy `INFO` line (`policy_stats_<name>`): no other field of
/// `INFO ratelimit` starts with it, so no policy name collides with one.
pub const INFO_POLICY_PREFIX: &str = "policy_stats_";

/// The `policies` INFO section's lines: `policies`, `policy_entries`, `policy_bytes`,
/// `policy_candidate_states`, then one `policy_stats_<name>` line per policy
/// (`calls=…,admitted=…,…,overrides=…`, and `candidate_calls=…,…` with a candidate).
pub fn info_lines() -> (InfoFields, Vec<(String, InfoFields)>) {
    let int = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    let candidate_states = CANDIDATES.with(|s| s.try_borrow().map(|s| s.len()).unwrap_or_default());
    with_table(|table| {
        let all = table.all_stats();
        let totals = vec![
            ("policies", int(all.len())),
            ("policy_entries", int(table.entries())),
            ("policy_bytes", int(table.bytes())),
            ("policy_candidate_states", int(candidate_states)),
        ];
        let lines = all
            .into_iter()
            .map(|summary| {
                let to_int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                let mut fields: InfoFields =
                    summary.stats.fields().into_iter().map(|(k, v)| (k, to_int(v))).collect();
                fields.push(("overrides", int(summary.overrides)));
                if let Some(candidate) = summary.candidate_stats {
                    fields.extend(
                        candidate.candidate_fields().into_iter().map(|(k, v)| (k, to_int(v))),
                    );
                }
                let name = String::from_utf8_lossy(summary.name);
                (format!("{INFO_POLICY_PREFIX}{name}"), fields)
            })
            .collect();
        Ok((totals, lines))
    })
    .unwrap_or_default()
}
