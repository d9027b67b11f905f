//! The one step every limiting command takes on its key: judge a [`Request`] against whatever
//! the key holds — nothing, a live limiter of this or another algorithm, or one past its reset
//! instant — and say what to reply and what to store.
//!
//! The shell around it only opens the key, calls [`judge_key`], applies the [`Change`]
//! (store or update the value, set the key's expiry), propagates and replies. `RL.PEEK` and
//! `RL.INFO` read through [`peek_key`] and [`describe_key`].
//!
//! Rules (README, "Keys, state and expiry"):
//! * A limiter past its reset instant counts as a missing key, whatever its algorithm.
//! * A live limiter of another algorithm refuses the call ([`KeyError::WrongAlgorithm`]).
//! * Only an admitted request that takes something (cost > 0, not `DRYRUN`) changes the key;
//!   the key then expires exactly at the new limiter's reset instant.

use std::fmt;

use super::decision::Decision;
use super::gcra::{self, GcraState};
use super::leaky::LeakyBucket;
use super::limiter::{judge, Algorithm, Limiter, Variant};
use super::packed::PackedLimiter;
use super::period::PeriodWindow;
use super::request::{AllRequest, Limit, Request};
use super::slide::SlideState;
use super::state::Refunded;
use super::token::TokenBucket;

/// Why a key cannot be judged. `Display` renders the full error reply text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The key holds a live limiter of another algorithm.
    WrongAlgorithm { held: Algorithm, wanted: Algorithm },
    /// The key holds a value of another type (its `TYPE` name).
    Foreign(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::WrongAlgorithm { held, wanted } => write!(
                f,
                "WRONGTYPE key holds a {} limiter, not a {} limiter",
                held.name(),
                wanted.name()
            ),
            KeyError::Foreign(held) => {
                write!(f, "WRONGTYPE key holds a {held} value, not a rate limiter")
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// What judging did to the key.
#[derive(Debug)]
pub enum Change {
    /// Nothing (limited, `DRYRUN`, zero cost): store, expire and propagate nothing.
    Unchanged,
    /// The held limiter was updated in place; the key now expires at `expire_at_ms`.
    Updated { expire_at_ms: i64 },
    /// The key held nothing: store `limiter`, expiring at `expire_at_ms`.
    Created { limiter: Limiter, expire_at_ms: i64 },
}

/// The answer to one request.
#[derive(Debug)]
pub struct Verdict {
    pub allowed: bool,
    /// The five integers of the reply, in the command's layout (`RL.*` or redis-cell's).
    pub reply: [i64; 5],
    pub change: Change,
}

impl Verdict {
    /// Whether the key changed (and so must be propagated).
    pub fn changed(&self) -> bool {
        !matches!(self.change, Change::Unchanged)
    }
}

/// Judges `request` at `now_ms` against the limiter the key holds (`None`: the key is empty),
/// updating it in place when the request is admitted and committed.
pub fn judge_key(
    held: Option<&mut PackedLimiter>,
    request: &Request,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    judge_limit(held, &request.limit, request.cost, !request.dry_run, now_ms)
}

/// [`judge_key`] with the request's parts: stores only when `commit`.
fn judge_limit(
    held: Option<&mut PackedLimiter>,
    limit: &Limit,
    cost: u64,
    commit: bool,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    let (decision, change) = match limit {
        Limit::Token(p) => judge_variant::<TokenBucket>(held, p, now_ms, cost, commit)?,
        Limit::Period(p) => judge_variant::<PeriodWindow>(held, p, now_ms, cost, commit)?,
        Limit::Slide(p) => judge_variant::<SlideState>(held, p, now_ms, cost, commit)?,
        Limit::Leaky(p) => judge_variant::<LeakyBucket>(held, p, now_ms, cost, commit)?,
        Limit::Throttle(p) => {
            let (decision, change) = judge_variant::<GcraState>(held, p, now_ms, cost, commit)?;
            let reply = gcra::throttle_reply(&decision);
            return Ok(Verdict { allowed: decision.allowed, reply, change });
        }
    };
    Ok(Verdict { allowed: decision.allowed, reply: decision.to_reply(), change })
}

fn judge_variant<V: Variant>(
    held: Option<&mut PackedLimiter>,
    params: &V::Params,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Result<(Decision, Change), KeyError> {
    match held {
        None => {
            let evaluation = judge::<V>(None, params, now_ms, cost);
            Ok(match evaluation.next.filter(|_| commit) {
                Some(next) => {
                    let expire_at_ms = next.reset_at_ms();
                    let limiter = next.into_limiter();
                    (evaluation.decision, Change::Created { limiter, expire_at_ms })
                }
                None => (evaluation.decision, Change::Unchanged),
            })
        }
        Some(packed) => {
            let (decision, expiry) =
                packed.update(|limiter| judge_held::<V>(limiter, params, now_ms, cost, commit))?;
            let change = match expiry {
                Some(expire_at_ms) => Change::Updated { expire_at_ms },
                None => Change::Unchanged,
            };
            Ok((decision, change))
        }
    }
}

/// Judges a request against the limiter a key holds, updating it when the request is admitted
/// and committed. Returns the decision and, if the limiter changed, its new reset instant.
fn judge_held<V: Variant>(
    held: &mut Limiter,
    params: &V::Params,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Result<(Decision, Option<i64>), KeyError> {
    // Another algorithm's limiter: a missing key once its reset instant has passed.
    if V::from_limiter(held).is_none() && held.reset_at_ms() > now_ms {
        return Err(KeyError::WrongAlgorithm { held: held.algorithm(), wanted: V::ALGORITHM });
    }
    let evaluation = match V::from_limiter_mut(held) {
        None => judge::<V>(None, params, now_ms, cost),
        Some(state) => {
            if let Some((decision, changed)) = state.evaluate_in_place(params, now_ms, cost, commit)
            {
                return Ok((decision, changed.then(|| state.reset_at_ms())));
            }
            judge(Some(state), params, now_ms, cost)
        }
    };
    Ok(match evaluation.next.filter(|_| commit) {
        Some(next) => {
            let expire_at_ms = next.reset_at_ms();
            *held = next.into_limiter();
            (evaluation.decision, Some(expire_at_ms))
        }
        None => (evaluation.decision, None),
    })
}

/// The answer to an `RL.ALL` call.
#[derive(Debug)]
pub struct AllVerdict {
    pub allowed: bool,
    /// The first six fields of the reply: `allowed`, then the binding limit's `limit`,
    /// `remaining`, the call's `retry_after_ms`, the binding limit's `reset_after_ms`, and its
    /// 1-based index.
    pub head: [i64; 6],
    /// Per key, in order: the reply its single command with `DRYRUN` would give now.
    pub details: Vec<[i64; 5]>,
    /// Per key, in order: what to apply (all `Unchanged` unless every limit admitted, the call
    /// is not a dry run and something was taken).
    pub changes: Vec<Change>,
}

impl AllVerdict {
    /// Whether any key changed (and so the call must be propagated).
    pub fn changed(&self) -> bool {
        self.changes.iter().any(|c| !matches!(c, Change::Unchanged))
    }
}

/// Judges every limit of an `RL.ALL` call against its key (`held[i]` for `all.limits[i]`) at
/// one instant, all or nothing: each key is judged exactly as its single command would judge
/// it; only when every limit admits (and the call is not a dry run) is each key updated as
/// that command would update it. A [`KeyError`] on any key changes nothing.
pub fn judge_all(
    held: &mut [Option<&mut PackedLimiter>],
    all: &AllRequest,
    now_ms: i64,
) -> Result<AllVerdict, KeyError> {
    let mut details = Vec::with_capacity(all.limits.len());
    let mut allowed = true;
    for (slot, limit) in held.iter_mut().zip(&all.limits) {
        let verdict = judge_limit(slot.as_deref_mut(), &limit.limit, limit.cost, false, now_ms)?;
        allowed &= verdict.allowed;
        details.push(verdict.reply);
    }
    let mut changes = Vec::with_capacity(all.limits.len());
    for (slot, limit) in held.iter_mut().zip(&all.limits) {
        let change = if allowed && !all.dry_run {
            judge_limit(slot.as_deref_mut(), &limit.limit, limit.cost, true, now_ms)?.change
        } else {
            Change::Unchanged
        };
        changes.push(change);
    }
    let (index, retry_after_ms) = binding(&details, allowed);
    let bound = details.get(index).copied().unwrap_or_default();
    let head = [
        i64::from(allowed),
        bound[1],
        bound[2],
        retry_after_ms,
        bound[4],
        i64::try_from(index).map_or(i64::MAX, |i| i + 1),
    ];
    Ok(AllVerdict { allowed, head, details, changes })
}

/// The binding limit (0-based) among the per-key dry-run replies, and the call's
/// `retry_after_ms`.
///
/// Refused: the refusing limit with the largest `retry_after` (`-1`, never, counts as
/// largest; ties: lowest index), whose wait is the exact wait until every limit admits
/// (waiting never removes permits). Admitted: the limit with the fewest `remaining` (ties:
/// lowest index); the retry is the largest admitted `retry_after` (a leaky bucket's delay).
fn binding(details: &[[i64; 5]], allowed: bool) -> (usize, i64) {
    let wait = |d: &[i64; 5]| if d[3] < 0 { i64::MAX } else { d[3] };
    let mut best: Option<(usize, &[i64; 5])> = None;
    for (i, d) in details.iter().enumerate() {
        let better = match best {
            None => allowed || d[0] == 0,
            Some((_, b)) if allowed => d[2] < b[2],
            Some((_, b)) => d[0] == 0 && wait(d) > wait(b),
        };
        if better {
            best = Some((i, d));
        }
    }
    let index = best.map_or(0, |(i, _)| i);
    let retry = if allowed {
        details.iter().map(|d| d[3]).max().unwrap_or(0)
    } else {
        best.map_or(0, |(_, d)| d[3])
    };
    (index, retry)
}

/// What `RL.REFUND` did to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundChange {
    /// Nothing was given back (no live limiter, or already as full as a fresh one).
    Unchanged,
    /// Permits given back in place; the key now expires at `expire_at_ms` (earlier).
    Updated { expire_at_ms: i64 },
    /// Back in its initial state: delete the key.
    Deleted,
}

/// The answer to `RL.REFUND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundVerdict {
    /// What a `DRYRUN COST 1` request with the stored parameters gets right after the refund
    /// (a fresh limiter's answer when it is back in its initial state); `None` (nil) when the
    /// key holds no live limiter.
    pub reply: Option<[i64; 5]>,
    pub change: RefundChange,
}

/// `RL.REFUND key count`: gives `count` permits back to the live limiter the key holds, under
/// its stored parameters at `now'`, never beyond a fresh limiter (see each algorithm's
/// `refund`). Works for every algorithm.
pub fn refund_key(held: Option<&mut PackedLimiter>, count: u64, now_ms: i64) -> RefundVerdict {
    let nothing = RefundVerdict { reply: None, change: RefundChange::Unchanged };
    let Some(packed) = held else {
        return nothing;
    };
    packed.update(|limiter| {
        if limiter.reset_at_ms() <= now_ms {
            return nothing;
        }
        match limiter {
            Limiter::Token(s) => refund_state(s, count, now_ms),
            Limiter::Period(s) => refund_state(s, count, now_ms),
            Limiter::Slide(s) => refund_state(s, count, now_ms),
            Limiter::Leaky(s) => refund_state(s, count, now_ms),
            Limiter::Gcra(s) => refund_state(s, count, now_ms),
        }
    })
}

fn refund_state<V: Variant>(state: &mut V, count: u64, now_ms: i64) -> RefundVerdict {
    let peek = |s: Option<&V>, params: &V::Params| V::evaluate(s, params, now_ms, 1).decision;
    let (decision, change) = match state.refund(now_ms, count) {
        Refunded::Nothing => (peek(Some(state), &state.params()), RefundChange::Unchanged),
        Refunded::Fresh => (peek(None, &state.params()), RefundChange::Deleted),
        Refunded::To(next) => {
            *state = next;
            let change = RefundChange::Updated { expire_at_ms: state.reset_at_ms() };
            (peek(Some(state), &state.params()), change)
        }
    };
    RefundVerdict { reply: Some(decision.to_reply()), change }
}

/// The limiter a key holds if it is live at `now_ms` (not past its reset instant).
fn live_view<R>(
    held: Option<&PackedLimiter>,
    now_ms: i64,
    f: impl FnOnce(&Limiter) -> R,
) -> Option<R> {
    held?.view(|limiter| (limiter.reset_at_ms() > now_ms).then(|| f(limiter)))
}

/// `RL.PEEK`: the reply a `DRYRUN COST 1` request with the stored parameters would get, or
/// `None` when the key holds no live limiter.
pub fn peek_key(held: Option<&PackedLimiter>, now_ms: i64) -> Option<[i64; 5]> {
    live_view(held, now_ms, |limiter| limiter.peek(now_ms).to_reply())
}

/// What `RL.INFO` shows of a live limiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub algorithm: Algorithm,
    /// Parameters and state (see [`crate::state::Stored::info_fields`]).
    pub fields: Vec<(&'static str, i64)>,
    pub updated_ms: i64,
}

/// `RL.INFO`: the stored parameters and state, or `None` when the key holds no live limiter.
pub fn describe_key(held: Option<&PackedLimiter>, now_ms: i64) -> Option<Description> {
    live_view(held, now_ms, |limiter| Description {
        algorithm: limiter.algorithm(),
        fields: limiter.describe(),
        updated_ms: limiter.updated_ms(),
    })
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
