//! The one step every limiting command takes on its key: judge a [`Request`] against whatever
//! the key holds — nothing, a live limiter of this or another algorithm, or one past its reset
//! instant — and say what to reply and what to store.
//!
//! The shell around it only opens the key, calls [`judge_key`], applies the [`Change`]
//! (store or update the value, set the key's expiry), propagates and replies. `RL.PEEK` and
//! `RL.INFO` read through [`peek_key`](super::inspect::peek_key) and
//! [`describe_key`](super::inspect::describe_key).
//!
//! Rules (README, "Keys, state and expiry"):
//! * A limiter past its reset instant counts as a missing key, whatever its algorithm.
//! * A live limiter of another algorithm refuses the call ([`KeyError::WrongAlgorithm`]).
//! * Only an admitted request that takes something (cost > 0, not `DRYRUN`) changes the key;
//!   the key then expires exactly at the new limiter's reset instant.
//! * `FRESH` judges the request against a fresh limiter with the call's parameters, exactly as
//!   if the key were missing. Admitted with cost > 0 (not `DRYRUN`), it replaces whatever the
//!   key holds for this algorithm (state, log, ban); admitted with cost 0 it leaves the key as
//!   a fresh limiter with nothing used is — no key at all — so a live key is deleted. A live
//!   limiter of another algorithm is still refused.

use std::fmt;

use crate::algorithms::ban::Ban;
use crate::algorithms::decision::Decision;
use crate::algorithms::gcra::{self, GcraState};
use crate::algorithms::leaky::LeakyBucket;
use crate::algorithms::limiter::{judge, Algorithm, Limiter, Variant};
use crate::algorithms::period::PeriodWindow;
use crate::algorithms::slide::SlideState;
use crate::algorithms::state::Stored;
use crate::algorithms::token::TokenBucket;
use crate::grammar::request::{AllRequest, Limit, PerKey, Request};
use crate::store::held::{Expanded, Held};

/// Why a key cannot be judged. `Display` renders the full error reply text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The key holds a live limiter of another algorithm.
    WrongAlgorithm { held: Algorithm, wanted: Algorithm },
    /// The key holds a value of another type (its `TYPE` name).
    Foreign(String),
    /// `RL.REFUND` on a key holding live leases: leases are given back by `RL.RELEASE`.
    NotRefundable { held: Algorithm },
    /// `RL.CHARGE` on a live limiter of an algorithm that takes no debt.
    NoDebt { held: Algorithm },
    /// `RL.CHARGE` beyond the bounds of a debt (`state::debt_fits`).
    DebtTooLarge,
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
            KeyError::NotRefundable { held } => write!(
                f,
                "WRONGTYPE key holds a {} limiter, which RL.REFUND cannot refund (use RL.RELEASE)",
                held.name()
            ),
            KeyError::NoDebt { held } => write!(
                f,
                "WRONGTYPE key holds a {} limiter, which takes no debt (RL.CHARGE works on \
                 token bucket, GCRA, leaky bucket and fixed window limiters)",
                held.name()
            ),
            KeyError::DebtTooLarge => f.write_str(
                "ERR the charge would leave a debt beyond 10^12 permits or 100 years of refill",
            ),
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
    /// `expiry_may_stay`: that instant may well be the key's expiry already (a fixed window
    /// inside its window, a ban, leases), so the shell reads the expiry before setting it;
    /// otherwise it sets it at once (setting an unchanged expiry is merely a wasted write).
    Updated { expire_at_ms: i64, expiry_may_stay: bool },
    /// The key held nothing: store `limiter`, expiring at `expire_at_ms`.
    Created { limiter: Limiter, expire_at_ms: i64 },
    /// The key is back in its initial state, which holds no key (`FRESH` with `COST 0` on a
    /// live key): delete it.
    Deleted,
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
pub fn judge_key<H: Held>(
    held: Option<&mut H>,
    request: &Request,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    let how = How {
        cost: request.cost,
        commit: !request.dry_run,
        ban_ms: request.ban_ms,
        clear: request.clear,
        fresh: request.fresh,
    };
    judge_limit(held, &request.limit, how, now_ms)
}

/// How a request is judged: what it takes, whether it may change the key, the ban a refusal
/// by the algorithm starts (and whether it clears the limiter: `CLEAR`), and whether it is
/// judged against a fresh limiter (`FRESH`).
#[derive(Debug, Clone, Copy)]
struct How {
    cost: u64,
    commit: bool,
    ban_ms: Option<u64>,
    clear: bool,
    fresh: bool,
}

/// [`judge_key`] with the request's parts.
fn judge_limit<H: Held>(
    held: Option<&mut H>,
    limit: &Limit,
    how: How,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    if how.fresh {
        judge_limit_fresh(held, limit, how, now_ms)
    } else {
        judge_limit_as::<H, false>(held, limit, how, now_ms)
    }
}

/// [`judge_limit`] with `FRESH`: its own copy, out of line, so that the calls without the
/// option (nearly all) carry none of its code.
#[inline(never)]
fn judge_limit_fresh<H: Held>(
    held: Option<&mut H>,
    limit: &Limit,
    how: How,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    judge_limit_as::<H, true>(held, limit, how, now_ms)
}

/// [`judge_limit`] for the algorithm of `limit`, against a fresh limiter when `FRESH`.
fn judge_limit_as<H: Held, const FRESH: bool>(
    held: Option<&mut H>,
    limit: &Limit,
    how: How,
    now_ms: i64,
) -> Result<Verdict, KeyError> {
    let (decision, change) = match limit {
        Limit::Token(p) => judge_variant::<TokenBucket, H, FRESH>(held, p, now_ms, how)?,
        Limit::Period(p) => judge_variant::<PeriodWindow, H, FRESH>(held, p, now_ms, how)?,
        Limit::Slide(p) => judge_variant::<SlideState, H, FRESH>(held, p, now_ms, how)?,
        Limit::Leaky(p) => judge_variant::<LeakyBucket, H, FRESH>(held, p, now_ms, how)?,
        Limit::Throttle(p) => {
            let (decision, change) = judge_variant::<GcraState, H, FRESH>(held, p, now_ms, how)?;
            let reply = gcra::throttle_reply(&decision);
            return Ok(Verdict { allowed: decision.allowed, reply, change });
        }
    };
    Ok(Verdict { allowed: decision.allowed, reply: decision.to_reply(), change })
}

fn judge_variant<V: Variant, H: Held, const FRESH: bool>(
    held: Option<&mut H>,
    params: &V::Params,
    now_ms: i64,
    how: How,
) -> Result<(Decision, Change), KeyError> {
    if FRESH {
        return judge_fresh::<V, H>(held, params, now_ms, how);
    }
    match held {
        // A fresh limiter refuses only what it can never admit, which starts no ban.
        None => {
            let evaluation = judge::<V>(None, params, now_ms, how.cost);
            Ok(match evaluation.next.filter(|_| how.commit) {
                Some(next) => {
                    let expire_at_ms = next.reset_at_ms();
                    let limiter = next.into_limiter();
                    (evaluation.decision, Change::Created { limiter, expire_at_ms })
                }
                None => (evaluation.decision, Change::Unchanged),
            })
        }
        Some(packed) => {
            let ban = packed.ban();
            let judged =
                packed.update(|limiter| judge_held::<V>(limiter, ban, params, now_ms, how))?;
            if judged.ban != ban {
                packed.set_ban(judged.ban);
            }
            let change = match judged.expiry {
                Some(expire_at_ms) => Change::Updated {
                    expire_at_ms,
                    expiry_may_stay: V::ALGORITHM == Algorithm::Period || judged.ban.is_some(),
                },
                None => Change::Unchanged,
            };
            Ok((judged.decision, change))
        }
    }
}

/// `FRESH`: the request judged against a fresh limiter with the call's parameters at `now_ms`
/// (the key's stored `updated_ms` plays no part), and the key made exactly that fresh limiter:
/// the new state when admitted with cost > 0; no key at all when admitted with cost 0 (a live
/// key is deleted; a missing or dead one stays as it is); unchanged when refused (a fresh
/// limiter refuses only a cost above its limit, which never bans) or on a dry run. A live
/// limiter of another algorithm is refused, as without `FRESH`.
fn judge_fresh<V: Variant, H: Held>(
    held: Option<&mut H>,
    params: &V::Params,
    now_ms: i64,
    how: How,
) -> Result<(Decision, Change), KeyError> {
    let evaluation = judge::<V>(None, params, now_ms, how.cost);
    let decision = evaluation.decision;
    let Some(packed) = held else {
        let change = match evaluation.next.filter(|_| how.commit) {
            Some(next) => {
                let expire_at_ms = next.reset_at_ms();
                Change::Created { limiter: next.into_limiter(), expire_at_ms }
            }
            None => Change::Unchanged,
        };
        return Ok((decision, change));
    };
    let ban = packed.ban();
    let (standing, other) = packed
        .view(|limiter| (Standing::of(limiter, ban, now_ms), V::from_limiter(limiter).is_none()));
    if standing.counts && other {
        let held = packed.view(Limiter::algorithm);
        return Err(KeyError::WrongAlgorithm { held, wanted: V::ALGORITHM });
    }
    if !how.commit || !decision.allowed {
        return Ok((decision, Change::Unchanged));
    }
    let change = match evaluation.next {
        Some(next) => {
            let expire_at_ms = next.reset_at_ms();
            packed.set_ban(None);
            packed.update(|limiter| *limiter = next.into_limiter());
            Change::Updated { expire_at_ms, expiry_may_stay: false }
        }
        None if standing.live() => Change::Deleted,
        None => Change::Unchanged,
    };
    Ok((decision, change))
}

/// What judging did to a held limiter.
struct HeldDecision {
    decision: Decision,
    /// The key's new expiry, if it changed.
    expiry: Option<i64>,
    /// The ban to store with the limiter.
    ban: Option<Ban>,
}

/// Judges a request against the limiter a key holds (and the ban it is under), updating it
/// when the request is admitted and committed, or starting a ban when the algorithm refuses a
/// request that carries `BAN`.
fn judge_held<V: Variant>(
    held: &mut Limiter,
    ban: Option<Ban>,
    params: &V::Params,
    now_ms: i64,
    how: How,
) -> Result<HeldDecision, KeyError> {
    // Without a ban, this algorithm's own limiter needs no standing (the algorithm treats a
    // state past its reset instant as missing by itself): the hot path computes nothing more.
    let other = V::from_limiter(held).is_none();
    let (counts, in_force) = match ban {
        None => (!other || held.reset_at_ms() > now_ms, None),
        Some(_) => {
            let standing = Standing::of(held, ban, now_ms);
            (standing.counts, standing.ban)
        }
    };
    if counts && other {
        return Err(KeyError::WrongAlgorithm { held: held.algorithm(), wanted: V::ALGORITHM });
    }
    if let Some(b) = in_force {
        let own = V::from_limiter(held).filter(|_| counts);
        let now2 = b.now(now_ms, own.map(Stored::updated_ms));
        let alone = judge::<V>(own, params, now_ms, how.cost).decision;
        let alg_now = own.map_or(now_ms, |s| now_ms.max(s.updated_ms()));
        let reset_at = own.map_or(now2, Stored::reset_at_ms);
        let decision = b.refusal(&alone, alg_now, now2, reset_at, how.cost);
        return Ok(HeldDecision { decision, expiry: None, ban });
    }
    let (decision, expiry) = evaluate_held::<V>(held, counts, params, now_ms, how);
    if expiry.is_some() {
        // An admitted change: any past ban is forgotten.
        return Ok(HeldDecision { decision, expiry, ban: None });
    }
    let starts = how.ban_ms.filter(|_| !decision.allowed && decision.retry_after_ms >= 0);
    match (starts, V::from_limiter(held).filter(|_| counts)) {
        (Some(duration), Some(stored)) if how.clear => {
            let since = now_ms.max(stored.updated_ms());
            Ok(start_clearing_ban::<V>(held, ban, params, since, duration, how))
        }
        (Some(duration), Some(stored)) => {
            let since = now_ms.max(stored.updated_ms());
            let new_ban = Ban::start(since, duration);
            let decision = new_ban.refusal(&decision, since, since, stored.reset_at_ms(), how.cost);
            if !how.commit {
                return Ok(HeldDecision { decision, expiry: None, ban });
            }
            let expiry = Some(stored.reset_at_ms().max(new_ban.until_ms));
            Ok(HeldDecision { decision, expiry, ban: Some(new_ban) })
        }
        _ => Ok(HeldDecision { decision, expiry: None, ban }),
    }
}

/// `BAN d CLEAR`: the refused request starts a ban at `since` (its `now'`) and clears the
/// limiter. The key then holds the call's limiter in its initial state — stored as a state with
/// the call's parameters that counts as missing ([`Ban::limiter_fresh`]: no new stored field)
/// — under the ban, and expires when the ban ends, a fresh limiter. The reply is the ban's over
/// a fresh limiter: `[0, limit, 0, d, d]`. A dry run (`!how.commit`) only replies (the key
/// keeps `current`, the past ban it may hold).
fn start_clearing_ban<V: Variant>(
    held: &mut Limiter,
    current: Option<Ban>,
    params: &V::Params,
    since: i64,
    duration: u64,
    how: How,
) -> HeldDecision {
    let ban = Ban { limiter_fresh: true, ..Ban::start(since, duration) };
    let fresh = judge::<V>(None, params, since, how.cost);
    let decision = ban.refusal(&fresh.decision, since, since, since, how.cost);
    if !how.commit {
        return HeldDecision { decision, expiry: None, ban: current };
    }
    // The parameters the fresh limiter has: any state they admit (a fresh limiter admits one
    // unit, limits being at least 1), which counts as missing under the ban.
    if let Some(state) = V::evaluate(None, params, since, 1).next {
        *held = state.into_limiter();
    }
    HeldDecision { decision, expiry: Some(ban.until_ms), ban: Some(ban) }
}

/// The algorithm on the held limiter (`counts`: whether it is this key's state at all),
/// updating it when admitted and committed. Returns the decision and, if the limiter changed,
/// its new reset instant.
fn evaluate_held<V: Variant>(
    held: &mut Limiter,
    counts: bool,
    params: &V::Params,
    now_ms: i64,
    how: How,
) -> (Decision, Option<i64>) {
    let (cost, commit) = (how.cost, how.commit);
    let evaluation = match V::from_limiter_mut(held).filter(|_| counts) {
        None => judge::<V>(None, params, now_ms, cost),
        Some(state) => {
            if let Some((decision, changed)) = state.evaluate_in_place(params, now_ms, cost, commit)
            {
                return (decision, changed.then(|| state.reset_at_ms()));
            }
            judge(Some(state), params, now_ms, cost)
        }
    };
    match evaluation.next.filter(|_| commit) {
        Some(next) => {
            let expire_at_ms = next.reset_at_ms();
            *held = next.into_limiter();
            (evaluation.decision, Some(expire_at_ms))
        }
        None => (evaluation.decision, None),
    }
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
    pub details: PerKey<[i64; 5]>,
    /// Per key, in order: what to apply (all `Unchanged` unless every limit admitted, the call
    /// is not a dry run and something was taken).
    pub changes: PerKey<Change>,
}

impl Default for AllVerdict {
    fn default() -> Self {
        Self::new()
    }
}

impl AllVerdict {
    /// A verdict with no key yet, for [`judge_all_into`].
    pub fn new() -> AllVerdict {
        AllVerdict { allowed: false, head: [0; 6], details: PerKey::new(), changes: PerKey::new() }
    }

    /// Whether any key changed (and so the call must be propagated).
    pub fn changed(&self) -> bool {
        self.changes.iter().any(|c| !matches!(c, Change::Unchanged))
    }
}

/// A held limiter judged by `RL.ALL`: what judging writes goes to a copy (`pending`, made on
/// the first write), and reaches the key only if every key of the call admits
/// ([`Staged::commit`]). So each key is judged once, as its single command would judge it,
/// and all or none are changed.
struct Staged<'h, H: Held> {
    held: &'h mut H,
    pending: Option<Expanded>,
}

impl<H: Held> Staged<'_, H> {
    fn pending(&mut self) -> &mut Expanded {
        let held = &*self.held;
        self.pending
            .get_or_insert_with(|| Expanded { limiter: held.view(Limiter::clone), ban: held.ban() })
    }

    /// Writes what judging left into the key.
    fn commit(self) {
        if let Some(Expanded { limiter, ban }) = self.pending {
            self.held.update(|held| *held = limiter);
            if self.held.ban() != ban {
                self.held.set_ban(ban);
            }
        }
    }
}

impl<H: Held> Held for Staged<'_, H> {
    fn ban(&self) -> Option<Ban> {
        match &self.pending {
            Some(pending) => pending.ban,
            None => self.held.ban(),
        }
    }
    fn set_ban(&mut self, ban: Option<Ban>) {
        self.pending().ban = ban;
    }
    fn view<R>(&self, f: impl FnOnce(&Limiter) -> R) -> R {
        match &self.pending {
            Some(pending) => f(&pending.limiter),
            None => self.held.view(f),
        }
    }
    fn update<R>(&mut self, f: impl FnOnce(&mut Limiter) -> R) -> R {
        f(&mut self.pending().limiter)
    }
}

/// Judges every limit of an `RL.ALL` call against its key (the i-th of `held` for
/// `all.limits[i]`, `None` for an empty key) at
/// one instant, all or nothing: each key is judged once, exactly as its single command would
/// judge it (on a staged copy, `Staged`, or in place when the holder is [`Held::detached`]);
/// only when every limit admits (and the call is not a dry run) is each key updated as that
/// command would update it. A detached holder may be left changed whatever the verdict: its
/// caller writes it back only for a change other than `Unchanged`, as for any call. A
/// [`KeyError`] on any key changes nothing.
pub fn judge_all<'h, H: Held + 'h>(
    held: impl IntoIterator<Item = Option<&'h mut H>>,
    all: &AllRequest,
    now_ms: i64,
) -> Result<AllVerdict, KeyError> {
    let mut verdict = AllVerdict::new();
    judge_all_into(held, all, now_ms, &mut verdict)?;
    Ok(verdict)
}

/// [`judge_all`] into `verdict` (new from [`AllVerdict::new`]): the command path keeps the
/// verdict where it is built instead of moving it (its per-key parts are kept inline).
pub fn judge_all_into<'h, H: Held + 'h>(
    held: impl IntoIterator<Item = Option<&'h mut H>>,
    all: &AllRequest,
    now_ms: i64,
    verdict: &mut AllVerdict,
) -> Result<(), KeyError> {
    let mut staged: PerKey<Option<Staged<'h, H>>> = PerKey::new();
    let mut allowed = true;
    for (index, (slot, limit)) in held.into_iter().zip(&all.limits).enumerate() {
        let how = How {
            cost: limit.cost,
            commit: !all.dry_run,
            ban_ms: None,
            clear: false,
            fresh: false,
        };
        // A detached holder is a staged copy already: judged in place, kept by the caller
        // only if the call changes it.
        let (judged, stage) = match slot {
            Some(held) if held.detached() => {
                (judge_limit(Some(held), &limit.limit, how, now_ms)?, None)
            }
            slot => {
                let mut stage = slot.map(|held| Staged { held, pending: None });
                (judge_limit(stage.as_mut(), &limit.limit, how, now_ms)?, stage)
            }
        };
        // A `SHADOW` group never refuses the call: refusing, it is left as it is.
        let (change, stage) = if !all.is_shadow(index) {
            allowed &= judged.allowed;
            (judged.change, stage)
        } else if judged.allowed {
            (judged.change, stage)
        } else {
            (Change::Unchanged, None)
        };
        // At most 16 of each (one per limit, and a call has at most 16).
        let _ = verdict.details.push(judged.reply);
        let _ = verdict.changes.push(change);
        let _ = staged.push(stage);
    }
    if !allowed || all.dry_run {
        // Nothing reaches the keys: the staged copies and created limiters are dropped.
        for change in verdict.changes.iter_mut() {
            *change = Change::Unchanged;
        }
    } else {
        for (stage, change) in staged.drain().zip(verdict.changes.iter()) {
            if let (Some(stage), Change::Updated { .. }) = (stage, change) {
                stage.commit();
            }
        }
    }
    let (index, retry_after_ms) = binding(&verdict.details, allowed, |i| all.is_shadow(i));
    let bound = verdict.details.get(index).copied().unwrap_or_default();
    verdict.allowed = allowed;
    verdict.head = [
        i64::from(allowed),
        bound[1],
        bound[2],
        retry_after_ms,
        bound[4],
        i64::try_from(index).map_or(i64::MAX, |i| i + 1),
    ];
    Ok(())
}

/// The binding limit (0-based) among the per-key dry-run replies, and the call's
/// `retry_after_ms`.
///
/// Refused: the refusing limit with the largest `retry_after` (`-1`, never, counts as
/// largest; ties: lowest index), whose wait is the exact wait until every limit admits
/// (waiting never removes permits). Admitted: the limit with the fewest `remaining` (ties:
/// lowest index); the retry is the largest admitted `retry_after` (a leaky bucket's delay).
/// `SHADOW` groups are never binding, unless every group is one.
fn binding(
    details: &PerKey<[i64; 5]>,
    allowed: bool,
    shadow: impl Fn(usize) -> bool,
) -> (usize, i64) {
    let wait = |d: &[i64; 5]| if d[3] < 0 { i64::MAX } else { d[3] };
    let all_shadow = (0..details.len()).all(&shadow);
    let mut best: Option<(usize, &[i64; 5])> = None;
    for (i, d) in details.iter().enumerate() {
        if shadow(i) && !all_shadow {
            continue;
        }
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
        let counted = |(i, _): &(usize, &[i64; 5])| all_shadow || !shadow(*i);
        details.iter().enumerate().filter(counted).map(|(_, d)| d[3]).max().unwrap_or(0)
    } else {
        best.map_or(0, |(_, d)| d[3])
    };
    (index, retry)
}

/// What a key's value means at an instant: whether its limiter counts (not past its reset
/// instant, nor refunded back to its initial state during a ban) and the ban in force, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Standing {
    pub counts: bool,
    pub ban: Option<Ban>,
}

impl Standing {
    pub fn of(limiter: &Limiter, ban: Option<Ban>, now_ms: i64) -> Standing {
        let counts = limiter.reset_at_ms() > now_ms && !ban.is_some_and(|b| b.limiter_fresh);
        let updated = counts.then(|| limiter.updated_ms());
        let ban = ban.filter(|b| b.active_at(b.now(now_ms, updated)));
        Standing { counts, ban }
    }

    /// Whether the key holds anything at all: a limiter that counts, or a ban in force.
    pub fn live(&self) -> bool {
        self.counts || self.ban.is_some()
    }
}

/// When a key holding `limiter` under `ban` expires: at the limiter's reset instant, or at the
/// end of the ban if that is later (and only then if the limiter was refunded away during it).
pub fn value_expiry(limiter: &Limiter, ban: Option<Ban>) -> i64 {
    match ban {
        None => limiter.reset_at_ms(),
        Some(b) if b.limiter_fresh => b.until_ms,
        Some(b) => limiter.reset_at_ms().max(b.until_ms),
    }
}

/// The reply a request of `cost` with the stored parameters gets from a limiter of one
/// algorithm in the given standing (what `RL.PEEK` and `RL.REFUND` answer, with `cost` 1).
pub(crate) fn dry_answer<V: Variant>(
    state: &V,
    standing: Standing,
    now_ms: i64,
    cost: u64,
) -> Decision {
    let own = standing.counts.then_some(state);
    let alone = V::evaluate(own, &state.params(), now_ms, cost).decision;
    match standing.ban {
        None => alone,
        Some(b) => {
            let now2 = b.now(now_ms, own.map(Stored::updated_ms));
            let alg_now = own.map_or(now_ms, |s| now_ms.max(s.updated_ms()));
            b.refusal(&alone, alg_now, now2, own.map_or(now2, Stored::reset_at_ms), cost)
        }
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
