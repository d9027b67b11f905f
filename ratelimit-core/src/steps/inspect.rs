//! Reading a key without changing it: `RL.PEEK` (the answer a `DRYRUN COST 1` request with
//! the stored parameters would get) and `RL.INFO` (the stored parameters and state).

use crate::algorithms::lease;
use crate::algorithms::limiter::{Algorithm, Limiter};
use crate::algorithms::slide::WindowAt;
use crate::steps::judge::{dry_answer, Standing};
use crate::store::held::Held;

/// `RL.PEEK`: the reply a `DRYRUN COST 1` request with the stored parameters would get now
/// (a ban in force included), or `None` when the key holds nothing live.
pub fn peek_key<H: Held>(held: Option<&H>, now_ms: i64) -> Option<[i64; 5]> {
    let packed = held?;
    let ban = packed.ban();
    packed.view(|limiter| {
        let standing = Standing::of(limiter, ban, now_ms);
        standing.live().then(|| {
            let decision = match limiter {
                Limiter::Token(s) => dry_answer(s, standing, now_ms, 1),
                Limiter::Period(s) => dry_answer(s, standing, now_ms, 1),
                Limiter::Slide(s) => dry_answer(s, standing, now_ms, 1),
                Limiter::Leaky(s) => dry_answer(s, standing, now_ms, 1),
                Limiter::Gcra(s) => dry_answer(s, standing, now_ms, 1),
                // Leases are never banned: a `DRYRUN` acquisition without `ID`.
                Limiter::Lease(s) => {
                    lease::acquire(standing.counts.then_some(s), &s.params(), now_ms, None, false)
                        .decision
                }
            };
            decision.to_reply()
        })
    })
}

/// What `RL.INFO` shows of a live key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub algorithm: Algorithm,
    /// Parameters and state (see [`crate::algorithms::state::Stored::info_fields`]), then
    /// `banned_until_ms` when a ban is stored.
    pub fields: Vec<(&'static str, i64)>,
    /// The last change: an admitted call, a refund, a release, or the start of a ban.
    pub updated_ms: i64,
    /// Leases only: the `leases` field, `(id, expires_ms)` pairs by expiry (then id), as of
    /// `updated_ms` (some may have lapsed since); `None` for other algorithms.
    pub leases: Option<Vec<(Vec<u8>, i64)>>,
    /// `now_ms`: the instant `now' = max(now, updated_ms)` the fields below are computed at.
    pub now_ms: i64,
    /// Sliding windows only: the window at `now_ms` (`window_used`, `window_oldest_ms`, and
    /// for `BUCKETS` `window_counts` and `window_start_ms`).
    pub window: Option<WindowAt>,
}

/// `RL.INFO`: the stored parameters and state, or `None` when the key holds nothing live.
pub fn describe_key<H: Held>(held: Option<&H>, now_ms: i64) -> Option<Description> {
    let packed = held?;
    let ban = packed.ban();
    packed.view(|limiter| {
        let standing = Standing::of(limiter, ban, now_ms);
        standing.live().then(|| {
            // A limiter cleared by its ban (`BAN d CLEAR`, or refunded back to its initial
            // state during one) is in its initial state, whatever the value still holds.
            let cleared = ban.is_some_and(|b| b.limiter_fresh);
            let mut fields = if cleared { limiter.describe_initial() } else { limiter.describe() };
            fields.extend(ban.map(|b| ("banned_until_ms", b.until_ms)));
            let updated_ms = limiter.updated_ms().max(ban.map_or(i64::MIN, |b| b.since_ms));
            let leases = match limiter {
                Limiter::Lease(s) => Some(s.leases().map(|(id, at)| (id.to_vec(), at)).collect()),
                _ => None,
            };
            let now_ms = now_ms.max(updated_ms);
            let window = match limiter {
                Limiter::Slide(s) => Some(s.window_at(now_ms, standing.counts)),
                _ => None,
            };
            Description {
                algorithm: limiter.algorithm(),
                fields,
                updated_ms,
                leases,
                now_ms,
                window,
            }
        })
    })
}
