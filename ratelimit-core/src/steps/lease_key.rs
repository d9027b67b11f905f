//! The step `RL.ACQUIRE` and `RL.RELEASE` take on their key (what [`crate::steps::judge`] is for the
//! limiting commands): judge against whatever the key holds — nothing, live leases, leases
//! past their last expiry (a missing key), or a live limiter of another algorithm — and say
//! what to reply, what to store and what to propagate.
//!
//! The shell opens the key, calls [`acquire_key`] / [`release_key`], applies the change (the
//! same [`Change`] as the limiting commands for `RL.ACQUIRE`; [`ReleaseChange`] for
//! `RL.RELEASE`), propagates and replies.

use crate::algorithms::lease::{self, LeaseId, LeaseParams};
use crate::algorithms::limiter::{Algorithm, Limiter};
use crate::algorithms::state::Stored;
use crate::grammar::request::{AcquireRequest, ReleaseRequest};
use crate::steps::judge::{Change, KeyError, Standing};
use crate::store::held::Held;
#[cfg(test)]
use crate::store::packed::PackedLimiter;

/// The answer to `RL.ACQUIRE`.
#[derive(Debug)]
pub struct AcquireVerdict {
    pub allowed: bool,
    /// The first five fields of the reply (`RL.*` layout).
    pub reply: [i64; 5],
    /// The sixth field: the admitted lease's id (the call's `ID` or the server id), `None`
    /// (nil) when refused or under `DRYRUN`. When the key changed, the call propagates as
    /// `RL.ACQUIRE key limit lease ID <this id> AT <ms>`.
    pub id: Option<LeaseId>,
    /// What to do to the key (never `Unchanged` for an admitted committed call: even a
    /// renewal moves the expiry).
    pub change: Change,
}

impl AcquireVerdict {
    /// Whether the key changed (and so must be propagated).
    pub fn changed(&self) -> bool {
        !matches!(self.change, Change::Unchanged)
    }
}

/// `RL.ACQUIRE` at `now_ms` on what the key holds (`None`: the key is empty), updating the
/// held leases in place when admitted and not a dry run. A key holding a live limiter of
/// another algorithm (or a ban in force) is [`KeyError::WrongAlgorithm`], nothing changed; a
/// key whose value counts as missing is replaced by a new lifetime's leases.
pub fn acquire_key<H: Held>(
    held: Option<&mut H>,
    request: &AcquireRequest,
    now_ms: i64,
) -> Result<AcquireVerdict, KeyError> {
    acquire_parts(held, &request.params, request.id.as_deref(), !request.dry_run, now_ms)
}

/// [`acquire_key`] with the request's parts (`commit`: not a dry run).
pub fn acquire_parts<H: Held>(
    held: Option<&mut H>,
    params: &LeaseParams,
    id: Option<&[u8]>,
    commit: bool,
    now_ms: i64,
) -> Result<AcquireVerdict, KeyError> {
    let Some(packed) = held else {
        let outcome = lease::acquire(None, params, now_ms, id, commit);
        let change = match outcome.next {
            Some(next) => {
                let expire_at_ms = next.reset_at_ms();
                Change::Created { limiter: Limiter::Lease(next), expire_at_ms }
            }
            None => Change::Unchanged,
        };
        let decision = outcome.decision;
        return Ok(AcquireVerdict {
            allowed: decision.allowed,
            reply: decision.to_reply(),
            id: outcome.id,
            change,
        });
    };
    let ban = packed.ban();
    let (decision, admitted_id, expiry) = packed.update(|limiter| match limiter {
        Limiter::Lease(state) => {
            let before = state.reset_at_ms();
            let (decision, id, changed) =
                lease::acquire_in_place(state, params, now_ms, id, commit);
            Ok((decision, id, changed.then(|| (state.reset_at_ms(), before))))
        }
        other if Standing::of(other, ban, now_ms).live() => {
            Err(KeyError::WrongAlgorithm { held: other.algorithm(), wanted: Algorithm::Lease })
        }
        other => {
            let outcome = lease::acquire(None, params, now_ms, id, commit);
            let before = other.reset_at_ms();
            let expiry = outcome.next.map(|next| {
                let at = next.reset_at_ms();
                *other = Limiter::Lease(next);
                (at, before)
            });
            Ok((outcome.decision, outcome.id, expiry))
        }
    })?;
    if expiry.is_some() && ban.is_some() {
        // A past ban of the value this replaced.
        packed.set_ban(None);
    }
    // The key's expiry is the state's reset instant: when that moved, it is set without
    // being read first; when it did not, it is read and set only if it differs.
    let change = match expiry {
        Some((expire_at_ms, before)) => {
            Change::Updated { expire_at_ms, expiry_may_stay: expire_at_ms == before }
        }
        None => Change::Unchanged,
    };
    Ok(AcquireVerdict {
        allowed: decision.allowed,
        reply: decision.to_reply(),
        id: admitted_id,
        change,
    })
}

/// What `RL.RELEASE` did to the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseChange {
    /// No such lease held: reply `0`; store, expire and propagate nothing.
    Unchanged,
    /// The lease is gone, others remain: reply `1`; the key now expires at `expire_at_ms`
    /// (propagate `RL.RELEASE key id AT <ms>`; waiters may be admitted now). `expiry_may_stay`:
    /// the state's reset instant did not move (the key's expiry is read before it is set).
    Updated { expire_at_ms: i64, expiry_may_stay: bool },
    /// The last lease is gone: reply `1`; delete the key (and propagate as above).
    Deleted,
}

impl ReleaseChange {
    /// The reply: `1` when a lease was released.
    pub fn released(self) -> bool {
        self != ReleaseChange::Unchanged
    }
}

/// `RL.RELEASE key id` at `now_ms` on what the key holds. A key holding a live limiter of
/// another algorithm is [`KeyError::WrongAlgorithm`]; an empty key, or leases past their last
/// expiry, hold no lease (`Unchanged`).
pub fn release_key<H: Held>(
    held: Option<&mut H>,
    request: &ReleaseRequest,
    now_ms: i64,
) -> Result<ReleaseChange, KeyError> {
    release_id(held, &request.id, now_ms)
}

/// [`release_key`] with the request's parts.
pub fn release_id<H: Held>(
    held: Option<&mut H>,
    id: &[u8],
    now_ms: i64,
) -> Result<ReleaseChange, KeyError> {
    let Some(packed) = held else {
        return Ok(ReleaseChange::Unchanged);
    };
    let ban = packed.ban();
    // One pass: a live limiter of another algorithm is refused; the lease list is searched
    // once, and updated in place (a lease key's box is not repacked).
    packed.update(|limiter| match limiter {
        Limiter::Lease(state) => {
            let before = state.reset_at_ms();
            Ok(match lease::release_in_place(state, now_ms, id) {
                lease::ReleaseChange::NotHeld => ReleaseChange::Unchanged,
                lease::ReleaseChange::Emptied => ReleaseChange::Deleted,
                lease::ReleaseChange::Released => {
                    let expire_at_ms = state.reset_at_ms();
                    ReleaseChange::Updated { expire_at_ms, expiry_may_stay: expire_at_ms == before }
                }
            })
        }
        other if Standing::of(other, ban, now_ms).live() => {
            Err(KeyError::WrongAlgorithm { held: other.algorithm(), wanted: Algorithm::Lease })
        }
        _ => Ok(ReleaseChange::Unchanged),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn params(limit: u64, lease_ms: u64) -> LeaseParams {
        LeaseParams::new(limit, lease_ms, 10_000).unwrap()
    }

    #[test]
    fn acquire_creates_renews_and_release_deletes() {
        let p = params(2, 1000);
        let first = acquire_parts(None::<&mut PackedLimiter>, &p, None, true, T0).unwrap();
        assert_eq!(first.reply, [1, 2, 1, 0, 1000]);
        assert_eq!(first.id.as_deref(), Some(format!("{T0}-1").as_bytes()));
        let Change::Created { limiter, expire_at_ms } = first.change else { panic!() };
        assert_eq!(expire_at_ms, T0 + 1000);
        let mut packed = PackedLimiter::new(limiter);
        let second = acquire_parts(Some(&mut packed), &p, Some(b"w"), true, T0 + 10).unwrap();
        assert_eq!(second.reply, [1, 2, 0, 0, 1000]);
        assert!(
            matches!(second.change, Change::Updated { expire_at_ms, .. } if expire_at_ms == T0 + 1010)
        );
        let third = acquire_parts(Some(&mut packed), &p, None, true, T0 + 20).unwrap();
        assert_eq!(third.reply, [0, 2, 0, 980, 990]);
        assert_eq!(third.id, None);
        assert!(!third.changed());
        // A dry-run renewal is admitted without an id.
        let dry = acquire_parts(Some(&mut packed), &p, Some(b"w"), false, T0 + 20).unwrap();
        assert!(!dry.changed());
        assert_eq!((dry.reply, dry.id), ([1, 2, 0, 0, 1000], None));
        let id1 = format!("{T0}-1");
        assert_eq!(release_id(Some(&mut packed), b"nope", T0 + 30), Ok(ReleaseChange::Unchanged));
        assert_eq!(
            release_id(Some(&mut packed), id1.as_bytes(), T0 + 30),
            Ok(ReleaseChange::Updated { expire_at_ms: T0 + 1010, expiry_may_stay: true })
        );
        assert_eq!(release_id(Some(&mut packed), b"w", T0 + 30), Ok(ReleaseChange::Deleted));
        assert_eq!(release_id(None::<&mut PackedLimiter>, b"w", T0), Ok(ReleaseChange::Unchanged));
    }

    #[test]
    fn other_algorithms_are_wrongtype_both_ways() {
        use crate::grammar::request::{Command, Request};
        use crate::steps::judge::judge_key;
        let args: [&[u8]; 3] = [b"10", b"1", b"1s"];
        let token = Request::parse(Command::Token, &args, 100).unwrap();
        let Change::Created { limiter, .. } =
            judge_key(None::<&mut PackedLimiter>, &token, T0).unwrap().change
        else {
            panic!()
        };
        let mut packed = PackedLimiter::new(limiter);
        let err = acquire_parts(Some(&mut packed), &params(1, 10), None, true, T0).unwrap_err();
        assert_eq!(err.to_string(), "WRONGTYPE key holds a token limiter, not a lease limiter");
        assert!(release_id(Some(&mut packed), b"x", T0).is_err());
        // Once the token bucket has reset, the key counts as missing: leases replace it.
        let later = acquire_parts(Some(&mut packed), &params(1, 10), None, true, T0 + 5000);
        assert!(matches!(later.unwrap().change, Change::Updated { .. }));
        let err = judge_key(Some(&mut packed), &token, T0 + 5001).unwrap_err();
        assert_eq!(err.to_string(), "WRONGTYPE key holds a lease limiter, not a token limiter");
        let refused =
            crate::steps::refund::try_refund_key(Some(&mut packed), 1, T0 + 5001).unwrap_err();
        assert_eq!(refused, KeyError::NotRefundable { held: Algorithm::Lease });
        assert!(refused.to_string().starts_with("WRONGTYPE "));
        // Lapsed leases: a missing key for RL.REFUND and RL.RELEASE.
        let lapsed = crate::steps::refund::try_refund_key(Some(&mut packed), 1, T0 + 5010).unwrap();
        assert_eq!(lapsed.reply, None);
        assert_eq!(release_id(Some(&mut packed), b"x", T0 + 5010), Ok(ReleaseChange::Unchanged));
    }
}
