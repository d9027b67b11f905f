//! `RL.POLICY`'s subcommands (`SET`, `GET`, `DEL`, `PROMOTE`, `LIST`, `STATS`, `RESETSTATS`,
//! `HELP`, all through `command`) and `RL.HIT name key`, which judges the key through the limiting room exactly as the
//! direct command with the policy's parameters would. The table they read and change is
//! `features::policies`. The core parses every call (`grammar::policy`; a definition with
//! `features::policy::Definition`), arity included.
//!
//! `RL.POLICY SET/DEL/PROMOTE` propagate verbatim to replicas and the AOF. `RL.HIT` itself
//! never propagates where anything consumes propagation: the state it left does
//! (`RL.RESTORE`), so a replica or an AOF replay reaches the same state without the table.

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::execution::limiting;
use crate::shell::features::stats::Counted;
use crate::shell::features::top;
use crate::shell::features::wait;
use crate::shell::server::config::{policy_max, slide_log_max};
use crate::shell::server::reply::{self, FieldValue};
use ratelimit_core::features::policy::{Definition, PolicyError, SetTarget};
use ratelimit_core::features::top::shadow_tag;
use ratelimit_core::grammar::policy::{HitRequest, PolicyRequest, Target};

use crate::shell::features::policies::{forget_candidates, judge_candidate, top_clock, with_table};

/// `RL.HIT name key [COST n] [DRYRUN] [AT ms] [WAIT t] [DEADLINE ms]`: the key judged with the
/// policy's (or the key's override's) parameters through the limiting room; the policy's (and
/// the override's) counters record it. Under `SHADOW`, a refusal is answered `allowed = 1`
/// and counted as `shadow_limited` (nothing changed: a shadow policy's request carries no ban
/// and never waits). A policy's candidate judges the same call in shadow beside it.
pub fn hit(call: &Call) -> Result<Counted, CommandError> {
    let HitRequest { name, key, options } = HitRequest::parse(call.args)?;
    // The limiting room finds its key at argument 1: it sees the call from the name on.
    let judged_call = Call {
        argv: call.argv.get(1..).unwrap_or(&[]),
        args: call.args.get(1..).unwrap_or(&[]),
        ..*call
    };
    with_table(|table| {
        let mut resolved =
            table.resolve(name, key).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
        let shadow = resolved.definition.shadow;
        let mut request = resolved.definition.request(options)?;
        call.check_deadline(request.deadline_ms)?;
        request.wait_ms = call.wait_within_deadline(request.wait_ms, request.deadline_ms);
        if request.wait_ms.is_some() && wait::can_block(call) {
            let outcome =
                wait::limit_or_block(&judged_call, request.clone(), wait::Origin::Policy)?;
            resolved.record_outcome(outcome == Counted::Admitted, outcome == Counted::Limited);
            judge_candidate(call, &mut resolved, name, key, &request, call.clock_ms());
            return Ok(outcome);
        }
        let judged = limiting::judge_and_apply(&judged_call, &request, limiting::JudgedBy::Policy)?;
        if judged.changed {
            wait::key_changed(&judged_call);
        }
        let mut values = judged.verdict.reply;
        resolved.record(&values, shadow);
        judge_candidate(call, &mut resolved, name, key, &request, judged.now);
        if shadow {
            if values[0] == 0 && !request.dry_run {
                top::refused(key, &shadow_tag(name), top_clock(call, &request, judged.now));
            }
            values[0] = 1;
        }
        reply::integers(call.api, call.ctx, &values);
        if values[0] == 1 {
            return Ok(Counted::Admitted);
        }
        if !request.dry_run {
            top::call_refused(&judged_call, name, request.at_ms.is_some(), judged.now);
        }
        Ok(Counted::Limited)
    })
}

/// `RL.POLICY subcommand ...`: every subcommand's entry point runs this; the core parses the
/// call (`grammar::policy`: which subcommand, its arguments, their count) and the subcommand's
/// handler acts on the result.
pub fn command(call: &Call) -> Result<Counted, CommandError> {
    match PolicyRequest::parse(call.args)? {
        PolicyRequest::Set { name, definition } => set(call, name, definition),
        PolicyRequest::Get { name, target } => get(call, name, target),
        PolicyRequest::Del { name, target } => delete(call, name, target),
        PolicyRequest::Promote { name } => promote(call, name),
        PolicyRequest::List { name: None } => list_names(call),
        PolicyRequest::List { name: Some(name) } => list_overrides(call, name),
        PolicyRequest::Stats { name } => stats(call, name),
        PolicyRequest::ResetStat => reset_stats(call),
        PolicyRequest::Help => help(call),
    }
}

/// `RL.POLICY SET name limit [BAN d [CLEAR]] [SHADOW] [FOR key | CANDIDATE]`: defines or
/// replaces (whole) a policy, one key's override, or the policy's candidate; propagated
/// verbatim.
fn set(call: &Call, name: &[u8], definition: &[&[u8]]) -> Result<Counted, CommandError> {
    let (definition, target) = Definition::parse(definition, slide_log_max())?;
    let target = SetTarget::target(&target);
    with_table(|table| Ok(table.set(name, target, definition, policy_max())?))?;
    if target == Target::Candidate {
        forget_candidates(Some(name));
    }
    call.replicate_verbatim();
    reply::ok(call.api, call.ctx);
    Ok(Counted::Answered)
}

/// `RL.POLICY GET name [FOR key | CANDIDATE]`: `algorithm`, the parameters under `RL.INFO`'s
/// names, `ban_ms`, `clear`, `shadow`, then `definition` (the limit as `SET` took it); nil
/// when there is no such policy (or override, or candidate).
fn get(call: &Call, name: &[u8], target: Target) -> Result<Counted, CommandError> {
    let found = with_table(|table| {
        Ok(table.get(name, target).map(|d| (d.algorithm().name(), d.fields(), d.text())))
    })?;
    match found {
        Some((algorithm, fields, text)) => {
            let mut pairs = vec![("algorithm", FieldValue::Text(algorithm))];
            pairs.extend(fields.into_iter().map(|(k, v)| (k, FieldValue::Int(v))));
            pairs.push(("definition", FieldValue::Text(&text)));
            reply::fields(call.api, call.ctx, &pairs);
        }
        None => reply::null(call.api, call.ctx),
    }
    Ok(Counted::Answered)
}

/// `RL.POLICY DEL name [FOR key | CANDIDATE]`: `1` (removed: the policy with all its overrides
/// and its candidate, the override, or the candidate; propagated verbatim) or `0`.
fn delete(call: &Call, name: &[u8], target: Target) -> Result<Counted, CommandError> {
    let removed = with_table(|table| Ok(table.delete(name, target)))?;
    if removed {
        if matches!(target, Target::Policy | Target::Candidate) {
            forget_candidates(Some(name));
        }
        call.replicate_verbatim();
    }
    reply::long(call.api, call.ctx, i64::from(removed));
    Ok(Counted::Answered)
}

/// `RL.POLICY PROMOTE name`: the policy's candidate becomes its definition (`1`, propagated
/// verbatim), or `0` when it has none; an error naming an unknown policy.
fn promote(call: &Call, name: &[u8]) -> Result<Counted, CommandError> {
    let promoted = with_table(|table| Ok(table.promote(name)?))?;
    if promoted {
        forget_candidates(Some(name));
        call.replicate_verbatim();
    }
    reply::long(call.api, call.ctx, i64::from(promoted));
    Ok(Counted::Answered)
}

/// `RL.POLICY LIST`: the policy names, sorted.
fn list_names(call: &Call) -> Result<Counted, CommandError> {
    with_table(|table| {
        let names = table.names();
        reply::array(call.api, call.ctx, names.len());
        for name in names {
            reply::bulk(call.api, call.ctx, name);
        }
        Ok(())
    })?;
    Ok(Counted::Answered)
}

/// `RL.POLICY LIST name`: the policy's overrides, sorted by key, each a map (RESP3) / flat
/// pairs of `key`, `definition` (the limit as `SET` took it) and the override's own counters
/// (`calls`, `admitted`, `limited`, `shadow_limited`, `near_limit`); an error naming an
/// unknown policy.
fn list_overrides(call: &Call, name: &[u8]) -> Result<Counted, CommandError> {
    with_table(|table| {
        let entries =
            table.overrides(name).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
        reply::array(call.api, call.ctx, entries.len());
        for entry in entries {
            let text = entry.definition.text();
            let mut pairs = vec![("key", FieldValue::Bytes(entry.key))];
            pairs.push(("definition", FieldValue::Text(&text)));
            pairs.extend(entry.stats.fields().into_iter().map(|(k, v)| (k, int_field(v))));
            reply::fields(call.api, call.ctx, &pairs);
        }
        Ok(())
    })?;
    Ok(Counted::Answered)
}

fn int_field(v: u64) -> FieldValue<'static> {
    FieldValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// `RL.POLICY STATS name`: the policy's counters, then its candidate's (`candidate_calls`,
/// `candidate_admitted`, `candidate_limited`, `candidate_near_limit`) when it has one; an
/// error naming an unknown policy.
fn stats(call: &Call, name: &[u8]) -> Result<Counted, CommandError> {
    let (stats, candidate) = with_table(|table| {
        table.stats(name).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()).into())
    })?;
    let mut pairs: Vec<(&str, FieldValue)> =
        stats.fields().into_iter().map(|(k, v)| (k, int_field(v))).collect();
    if let Some(candidate) = candidate {
        pairs.extend(candidate.candidate_fields().into_iter().map(|(k, v)| (k, int_field(v))));
    }
    reply::fields(call.api, call.ctx, &pairs);
    Ok(Counted::Answered)
}

/// `RL.POLICY RESETSTAT`: zeroes every policy's counters (this node's; not propagated).
fn reset_stats(call: &Call) -> Result<Counted, CommandError> {
    with_table(|table| {
        table.reset_stats();
        Ok(())
    })?;
    reply::ok(call.api, call.ctx);
    Ok(Counted::Answered)
}

/// `RL.POLICY HELP`'s lines.
const HELP: &[&str] = &[
    "RL.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <name> <limit> [BAN <d> [CLEAR]] [SHADOW] [FOR <key> | CANDIDATE]",
    "    Define or replace (whole) a policy, one key's override, or the policy's candidate",
    "    (a second limit judged in shadow beside the enforced one). <limit> is RL.ALL's",
    "    grammar without COST: TOKEN c r p [STEP] | PERIOD l p [ALIGN [o] | KEEPPERIOD] |",
    "    SLIDE l w [BUCKETS b [ANCHOR] [FLOOR]] | LEAKY c r p [NODELAY | DELAY d].",
    "GET <name> [FOR <key> | CANDIDATE]",
    "    The definition's algorithm, parameters, ban_ms, clear, shadow and text; nil if none.",
    "DEL <name> [FOR <key> | CANDIDATE]",
    "    Remove a policy (with its overrides and candidate), one override, or the candidate.",
    "PROMOTE <name>",
    "    The candidate becomes the policy's definition: 1, or 0 when there is none.",
    "LIST [<name>]",
    "    The policy names; with <name>, its overrides: key, definition and counters.",
    "STATS <name>",
    "    The policy's counters (and its candidate's): calls, admitted, limited, ...",
    "RESETSTAT",
    "    Zero every policy's counters on this node.",
    "HELP",
    "    Print this help.",
];

/// `RL.POLICY HELP`: the subcommands, one line each (as Redis' own `HELP` subcommands).
fn help(call: &Call) -> Result<Counted, CommandError> {
    reply::array(call.api, call.ctx, HELP.len());
    for line in HELP {
        reply::bulk(call.api, call.ctx, line.as_bytes());
    }
    Ok(Counted::Answered)
}
