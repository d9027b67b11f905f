//! The policy room: the server's one policy table (`ratelimit_core::policy`), `RL.POLICY`'s
//! subcommands, and `RL.HIT name key`, which judges the key through the limiting room exactly
//! as the direct command with the policy's parameters would.
//!
//! Policies are node state, like Redis Functions: `RL.POLICY SET/DEL` propagate verbatim to
//! replicas and the AOF; the table is saved with every RDB and AOF (`persist.rs`). `RL.HIT` itself
//! never propagates where anything consumes propagation: the state it left does
//! (`RL.RESTORE`), so a replica or an AOF replay reaches the same state without the table.
//! Everything here runs on Redis' main thread (or in a forked child reading its copy).

use std::cell::RefCell;
use std::os::raw::{c_char, c_long};

use super::call::{Call, CommandError};
use super::config::{policy_max, slide_log_max};
use super::limiting;
use super::reply::{self, FieldValue};
use super::stats::Outcome;
use super::top;
use super::wait;
use ratelimit_core::error::ArgError;
use ratelimit_core::policy::{Definition, PolicyError, PolicyTable};
use ratelimit_core::request::Limit;

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

/// Replaces the whole table (a load starts, or RDB aux data was read).
pub fn replace_table(table: PolicyTable) {
    TABLE.with(|t| {
        if let Ok(mut current) = t.try_borrow_mut() {
            *current = table;
        }
    });
}

/// `RL.HIT name key [COST n] [DRYRUN] [AT ms] [WAIT t]`: the key judged with the policy's (or
/// the key's override's) parameters through the limiting room; the policy's counters record
/// it. Under `SHADOW`, a refusal is answered `allowed = 1` and counted as `shadow_limited`
/// (nothing changed: a shadow policy's request carries no ban and never waits).
pub fn hit(call: &Call) -> Result<Outcome, CommandError> {
    let [_, name, key, options @ ..] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    // The limiting room finds its key at argument 1: it sees the call from the name on.
    let judged_call = Call {
        argv: call.argv.get(1..).unwrap_or(&[]),
        args: call.args.get(1..).unwrap_or(&[]),
        ..*call
    };
    with_table(|table| {
        let (definition, stats) =
            table.resolve(name, key).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()))?;
        let shadow = definition.shadow;
        let request = definition.request(options)?;
        if request.wait_ms.is_some() && wait::can_block(call) {
            let outcome = wait::limit_or_block(&judged_call, request)?;
            stats.record_outcome(outcome == Outcome::Admitted, outcome == Outcome::Limited);
            return Ok(outcome);
        }
        let judged = limiting::judge_and_apply::<true>(&judged_call, &request)?;
        if judged.changed {
            wait::key_changed(&judged_call);
        }
        let mut values = judged.verdict.reply;
        stats.record(&values, shadow);
        if shadow {
            values[0] = 1;
        }
        reply::integers(call.api, call.ctx, &values);
        if values[0] == 1 {
            return Ok(Outcome::Admitted);
        }
        if !request.dry_run {
            top::call_refused(&judged_call, name, request.at_ms.is_some(), judged.now);
        }
        Ok(Outcome::Limited)
    })
}

/// The limit `RL.ALL`'s group `POLICY name` judges `key` with (the key's override's, else the
/// policy's) and whether the policy is in shadow; `None`: no such policy.
pub fn limit_for(name: &[u8], key: &[u8]) -> Option<(Limit, bool)> {
    with_table(|table| Ok(table.resolve(name, key).map(|(d, _)| (d.limit.clone(), d.shadow))))
        .ok()
        .flatten()
}

/// Counts how a `RL.HIT` that waited ended, in its policy's `admitted` or `limited` (its call
/// was counted when it blocked; a policy deleted meanwhile counts nothing).
pub fn record_late(name: &[u8], outcome: Outcome) {
    let _ = with_table(|table| {
        if let Some((_, stats)) = table.resolve(name, b"") {
            stats.record_late(outcome == Outcome::Admitted, outcome == Outcome::Limited);
        }
        Ok(())
    });
}

/// `[FOR key]` after a policy name.
fn for_key<'a>(rest: &[&'a [u8]]) -> Result<Option<&'a [u8]>, ArgError> {
    match rest {
        [] => Ok(None),
        [keyword, key] if keyword.eq_ignore_ascii_case(b"FOR") => Ok(Some(key)),
        [keyword, ..] if !keyword.eq_ignore_ascii_case(b"FOR") => {
            Err(ArgError::UnknownOption(keyword.to_vec()))
        }
        _ => Err(ArgError::WrongArity),
    }
}

/// `RL.POLICY SET name limit [BAN d [CLEAR]] [SHADOW] [FOR key]`: defines or replaces (whole)
/// a policy or one key's override; propagated verbatim.
pub fn set(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _, name, definition @ ..] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let (definition, key) = Definition::parse(definition, slide_log_max())?;
    with_table(|table| Ok(table.set(name, key.as_deref(), definition, policy_max())?))?;
    unsafe { (call.api.replicate_verbatim)(call.ctx) };
    reply::ok(call.api, call.ctx);
    Ok(Outcome::Answered)
}

/// `RL.POLICY GET name [FOR key]`: `algorithm`, the parameters under `RL.INFO`'s names,
/// `ban_ms`, `clear`, `shadow`; nil when there is no such policy (or override).
pub fn get(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _, name, rest @ ..] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let key = for_key(rest)?;
    let found =
        with_table(|table| Ok(table.get(name, key).map(|d| (d.algorithm().name(), d.fields()))))?;
    match found {
        Some((algorithm, fields)) => {
            let mut pairs = vec![("algorithm", FieldValue::Text(algorithm))];
            pairs.extend(fields.into_iter().map(|(k, v)| (k, FieldValue::Int(v))));
            reply::fields(call.api, call.ctx, &pairs);
        }
        None => reply::null(call.api, call.ctx),
    }
    Ok(Outcome::Answered)
}

/// `RL.POLICY DEL name [FOR key]`: `1` (removed: the policy with all its overrides, or the
/// override; propagated verbatim) or `0`.
pub fn delete(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _, name, rest @ ..] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let key = for_key(rest)?;
    let removed = with_table(|table| Ok(table.delete(name, key)))?;
    if removed {
        unsafe { (call.api.replicate_verbatim)(call.ctx) };
    }
    unsafe { (call.api.reply_with_long_long)(call.ctx, i64::from(removed)) };
    Ok(Outcome::Answered)
}

/// `RL.POLICY LIST`: the policy names, sorted.
pub fn list(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    with_table(|table| {
        let names = table.names();
        unsafe { (call.api.reply_with_array)(call.ctx, names.len() as c_long) };
        for name in names {
            unsafe {
                (call.api.reply_with_string_buffer)(
                    call.ctx,
                    name.as_ptr().cast::<c_char>(),
                    name.len(),
                )
            };
        }
        Ok(())
    })?;
    Ok(Outcome::Answered)
}

/// `RL.POLICY STATS name`: the policy's counters; an error naming an unknown policy.
pub fn stats(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _, name] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    let stats = with_table(|table| {
        table.stats(name).ok_or_else(|| PolicyError::NoSuchPolicy(name.to_vec()).into())
    })?;
    let pairs: Vec<(&str, FieldValue)> = stats
        .fields()
        .into_iter()
        .map(|(k, v)| (k, FieldValue::Int(i64::try_from(v).unwrap_or(i64::MAX))))
        .collect();
    reply::fields(call.api, call.ctx, &pairs);
    Ok(Outcome::Answered)
}

/// `RL.POLICY RESETSTAT`: zeroes every policy's counters (this node's; not propagated).
pub fn reset_stats(call: &Call) -> Result<Outcome, CommandError> {
    let [_, _] = call.args else {
        return Err(ArgError::WrongArity.into());
    };
    with_table(|table| {
        table.reset_stats();
        Ok(())
    })?;
    reply::ok(call.api, call.ctx);
    Ok(Outcome::Answered)
}

/// Named integer fields of an INFO section or line.
pub type InfoFields = Vec<(&'static str, i64)>;

/// The `policies` INFO section's lines: `policies`, `policy_entries`, `policy_bytes`, then one
/// `policy_<name>` line per policy (`calls=…,admitted=…,…,overrides=…`).
pub fn info_lines() -> (InfoFields, Vec<(String, InfoFields)>) {
    let int = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    with_table(|table| {
        let all = table.all_stats();
        let totals = vec![
            ("policies", int(all.len())),
            ("policy_entries", int(table.entries())),
            ("policy_bytes", int(table.bytes())),
        ];
        let lines = all
            .into_iter()
            .map(|(name, stats, overrides)| {
                let mut fields: InfoFields = stats
                    .fields()
                    .into_iter()
                    .map(|(k, v)| (k, i64::try_from(v).unwrap_or(i64::MAX)))
                    .collect();
                fields.push(("overrides", int(overrides)));
                (format!("policy_{}", String::from_utf8_lossy(name)), fields)
            })
            .collect();
        Ok((totals, lines))
    })
    .unwrap_or_default()
}
