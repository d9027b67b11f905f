//! The penalty box (`BAN duration` on `RL.TOKEN`, `RL.PERIOD`, `RL.SLIDE`, `RL.LEAKY`): a
//! request that the algorithm itself refuses, and that could be admitted some day, locks the
//! key out for `duration` ("5 failed logins per 15 minutes, then locked out for an hour").
//!
//! Terms:
//! * **since** — the instant the ban started (`now'` of the refused request);
//! * **until** (`banned_until_ms`) — `since + duration`: the ban is **active** at `t` while
//!   `max(t, since) < until`.
//!
//! While a ban is active every request of cost ≥ 1 on the key is refused with `remaining 0`
//! and `retry_after = max(until, t_a) − now'`, where `t_a` is when the algorithm itself would
//! admit it (so repeating after exactly `retry_after` is admitted); `reset_after =
//! max(until, reset instant) − now'`. A refused request never starts or extends a ban.
//! `COST 0` stays admitted: `[1, limit, 0, 0, reset_after]`. A ban is stored beside the
//! limiter (limiters without one keep their compact form) and the key expires at
//! `max(reset instant, until)`.

use crate::algorithms::decision::{saturate_i64, Decision};
use crate::algorithms::state::CorruptState;
use crate::grammar::args::{MAX_AT_MS, MAX_DURATION_MS};

/// A ban stored with a limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ban {
    /// The instant the ban started (unix ms).
    pub since_ms: i64,
    /// The instant it ends (unix ms): `since_ms` + the `BAN` duration.
    pub until_ms: i64,
    /// The limiter was refunded back to its initial state during the ban: it counts as missing
    /// (the key lives on for the ban alone).
    pub limiter_fresh: bool,
}

impl Ban {
    /// A ban starting at `since_ms` for `duration_ms`.
    pub fn start(since_ms: i64, duration_ms: u64) -> Ban {
        let until_ms = since_ms.saturating_add(i64::try_from(duration_ms).unwrap_or(i64::MAX));
        Ban { since_ms, until_ms, limiter_fresh: false }
    }

    /// `now'` for a request at `now_ms` on a key under this ban: never before the ban started,
    /// nor before `updated_ms` (the limiter's last change, if it counts).
    pub fn now(&self, now_ms: i64, updated_ms: Option<i64>) -> i64 {
        now_ms.max(self.since_ms).max(updated_ms.unwrap_or(i64::MIN))
    }

    /// Whether the ban is in force at `now'`.
    pub fn active_at(&self, now2: i64) -> bool {
        now2 < self.until_ms
    }

    /// The reply to a request at `now2` (the ban's `now'`) while the ban is active, from what
    /// the algorithm alone decided at its own `now'` (`alg_now`, never after `now2`) and the
    /// stored limiter's reset instant (`reset_at`; `now2` if it counts as missing).
    pub fn refusal(
        &self,
        alone: &Decision,
        alg_now: i64,
        now2: i64,
        reset_at: i64,
        cost: u64,
    ) -> Decision {
        let since =
            |t: i64| saturate_i64(u128::try_from(i128::from(t) - i128::from(now2)).unwrap_or(0));
        let reset_after_ms = since(reset_at.max(self.until_ms));
        if cost == 0 {
            return Decision {
                allowed: true,
                remaining: 0,
                retry_after_ms: 0,
                reset_after_ms,
                ..*alone
            };
        }
        let retry_after_ms = if alone.retry_after_ms < 0 {
            -1
        } else {
            let admits_at =
                if alone.allowed { alg_now } else { alg_now.saturating_add(alone.retry_after_ms) };
            since(admits_at.max(self.until_ms))
        };
        Decision { allowed: false, remaining: 0, retry_after_ms, reset_after_ms, ..*alone }
    }

    /// Checks a decoded ban: instants within range, a duration of 1 ms … 10 years.
    pub fn validate(&self) -> Result<(), CorruptState> {
        let duration = i128::from(self.until_ms) - i128::from(self.since_ms);
        if !(0..=MAX_AT_MS).contains(&self.since_ms)
            || !(1..=i128::from(MAX_DURATION_MS)).contains(&duration)
        {
            return Err(CorruptState("ban out of range"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_700_000_000_000;

    fn alone(allowed: bool, retry: i64, reset: i64) -> Decision {
        Decision { allowed, limit: 5, remaining: 3, retry_after_ms: retry, reset_after_ms: reset }
    }

    #[test]
    fn a_ban_refuses_until_both_it_and_the_algorithm_admit() {
        let ban = Ban::start(T, 60_000);
        assert!(ban.active_at(T + 59_999) && !ban.active_at(T + 60_000));
        // The algorithm admits now: wait for the ban.
        let d = ban.refusal(&alone(true, 0, 100), T + 10, T + 10, T + 100, 1);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 59_990, 59_990)
        );
        // The algorithm admits only after the ban: wait for the algorithm.
        let d = ban.refusal(&alone(false, 90_000, 95_000), T + 10, T + 10, T + 95_010, 2);
        assert_eq!((d.retry_after_ms, d.reset_after_ms), (90_000, 95_000));
        // Never admissible: -1.
        assert_eq!(ban.refusal(&alone(false, -1, 0), T, T, T, 9).retry_after_ms, -1);
        // COST 0 peeks are admitted and see the ban.
        let d = ban.refusal(&alone(true, 0, 0), T, T, T, 0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (true, 0, 0, 60_000)
        );
    }

    #[test]
    fn now_never_goes_before_the_ban() {
        let ban = Ban::start(T, 1000);
        assert_eq!(ban.now(T - 500, None), T);
        assert_eq!(ban.now(T - 500, Some(T + 7)), T + 7);
        assert_eq!(ban.now(T + 9, Some(T + 7)), T + 9);
    }

    #[test]
    fn validate_refuses_impossible_bans() {
        assert_eq!(Ban::start(T, 1).validate(), Ok(()));
        assert_eq!(Ban::start(T, MAX_DURATION_MS).validate(), Ok(()));
        assert!(Ban { until_ms: T, ..Ban::start(T, 1) }.validate().is_err());
        assert!(Ban::start(T, MAX_DURATION_MS + 1).validate().is_err());
        assert!(Ban::start(-1, 5).validate().is_err());
        assert!(Ban::start(MAX_AT_MS + 1, 5).validate().is_err());
    }
}
