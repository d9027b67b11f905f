//! `ATMOST n`: a request that takes what is left, up to `n` permits, in one atomic call
//! (redis_rate's `AllowAtMost`; `RL.TOKEN`, `RL.PERIOD`, `RL.SLIDE`, `RL.LEAKY`).
//!
//! The request is resolved against the key as it stands at the call's instant into an
//! ordinary request of a fixed cost, which is then judged, applied, propagated and answered
//! like any other: `left` is the whole permits left (the `remaining` a `COST 0` dry run
//! answers, 0 under a ban), and the request becomes `COST min(n, left)` when at least one
//! permit is left, else `COST 1` — refused, its `retry_after` the wait until one permit is
//! back. So it is admitted iff `left ≥ 1` (also for `n = 0`, which then takes nothing), and a
//! refusal is an ordinary refusal (it may start a `BAN`). The reply adds a sixth integer,
//! the permits taken.

use crate::grammar::request::Request;
use crate::steps::judge::{judge_key, KeyError};
use crate::store::held::Held;

/// The fixed-cost request an `ATMOST n` request (`request.cost` = `n`) makes on the key at
/// `now_ms` (see the module docs); the key is not changed. A request without `ATMOST` comes
/// back as it is.
pub fn resolve_at_most<H: Held>(
    held: Option<&mut H>,
    request: &Request,
    now_ms: i64,
) -> Result<Request, KeyError> {
    if !request.at_most {
        return Ok(request.clone());
    }
    let probe = Request {
        cost: 0,
        dry_run: true,
        ban_ms: None,
        clear: false,
        wait_ms: None,
        at_most: false,
        ..request.clone()
    };
    let [_, _, remaining, _, _] = judge_key(held, &probe, now_ms)?.reply;
    let left = u64::try_from(remaining).unwrap_or(0);
    let cost = if left == 0 { 1 } else { request.cost.min(left) };
    Ok(Request { cost, at_most: false, ..request.clone() })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::algorithms::limiter::Limiter;
    use crate::grammar::request::Command;
    use crate::steps::judge::{Change, Verdict};
    use crate::store::packed::PackedLimiter;

    const T0: i64 = 1_700_000_000_000;

    fn request(command: Command, args: &str) -> Request {
        let bytes: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
        Request::parse(command, &bytes, 100_000).expect("valid test request")
    }

    /// Small limits of every algorithm that takes `ATMOST`, with and without a ban.
    fn limits() -> Vec<Request> {
        [
            (Command::Token, "5 1 100"),
            (Command::Token, "10 10 1s"),
            (Command::Token, "5 2 100 STEP"),
            (Command::Period, "4 300"),
            (Command::Period, "4 300 ALIGN 100"),
            (Command::Slide, "4 250"),
            (Command::Slide, "4 250 BUCKETS 5"),
            (Command::Slide, "4 250 BUCKETS 1 ANCHOR FLOOR"),
            (Command::Leaky, "4 1 100"),
            (Command::Leaky, "4 1 100 NODELAY"),
            (Command::Token, "3 1 100 BAN 250"),
            (Command::Period, "3 300 BAN 500"),
        ]
        .into_iter()
        .map(|(c, a)| request(c, a))
        .collect()
    }

    /// Judges `request` on `slot` and applies the change as the shell does.
    fn run(slot: &mut Option<PackedLimiter>, request: &Request, now: i64) -> Verdict {
        let verdict = judge_key(slot.as_mut(), request, now).expect("one algorithm per key");
        match &verdict.change {
            Change::Created { limiter, .. } => *slot = Some(PackedLimiter::new(limiter.clone())),
            Change::Deleted => *slot = None,
            Change::Unchanged | Change::Updated { .. } => {}
        }
        verdict
    }

    fn held(
        slot: &Option<PackedLimiter>,
    ) -> Option<(Limiter, Option<crate::algorithms::ban::Ban>)> {
        slot.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))
    }

    /// The brute-force model: the most permits a request could take now is the largest
    /// cost a dry run admits (searched over every cost up to the limit); `ATMOST n` is the
    /// plain request of cost `min(n, that)`, or of cost 1 when it is 0.
    fn model(slot: &Option<PackedLimiter>, request: &Request, now: i64) -> Request {
        let mut scratch = slot.clone();
        let dry = |cost| Request { cost, dry_run: true, at_most: false, ..request.clone() };
        let limit = run(&mut scratch, &dry(0), now).reply[1];
        let left = (0..=limit as u64)
            .rev()
            .find(|cost| run(&mut scratch, &dry(*cost), now).allowed && *cost > 0)
            .unwrap_or(0);
        let cost = if left == 0 { 1 } else { request.cost.min(left) };
        Request { cost, at_most: false, ..request.clone() }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// On random traffic (plain requests and `ATMOST n` ones, dry or not), `ATMOST n`
        /// answers, changes and leaves the key exactly as the model's plain request does,
        /// and never takes more than `n` nor more than is left.
        #[test]
        fn at_most_is_the_plain_request_of_what_is_left(
            which in 0usize..12,
            ops in prop::collection::vec((any::<bool>(), 0u64..7, any::<bool>(), -20i64..200), 1..50)
        ) {
            let base = limits()[which].clone();
            let (mut slot, mut twin, mut now) = (None::<PackedLimiter>, None::<PackedLimiter>, T0);
            for (at_most, n, dry_run, gap) in ops {
                now += gap;
                let request = Request { cost: n, at_most, dry_run, ..base.clone() };
                let plain = model(&twin, &request, now);
                let resolved = resolve_at_most(slot.as_mut(), &request, now).unwrap();
                prop_assert!(!resolved.at_most);
                if at_most {
                    prop_assert_eq!(&resolved, &plain);
                } else {
                    prop_assert_eq!(&resolved, &request);
                }
                let got = run(&mut slot, &resolved, now);
                let expected = run(&mut twin, if at_most { &plain } else { &request }, now);
                prop_assert_eq!(got.reply, expected.reply);
                prop_assert_eq!(got.allowed, expected.allowed);
                prop_assert_eq!(held(&slot), held(&twin));
                if at_most && got.allowed {
                    prop_assert!(resolved.cost <= n);
                }
            }
        }
    }

    /// redis_rate's `AllowAtMost` walk-through at 10 per second, burst 10.
    #[test]
    fn allow_at_most_takes_what_is_left() {
        let token = request(Command::Token, "10 10 1s");
        let at_most = |n| Request { cost: n, at_most: true, ..token.clone() };
        let mut slot = None;
        let step = |slot: &mut Option<PackedLimiter>, r: &Request, now| {
            let resolved = resolve_at_most(slot.as_mut(), r, now).unwrap();
            let verdict = run(slot, &resolved, now);
            (resolved.cost, verdict.reply)
        };
        assert_eq!(
            step(&mut slot, &Request { cost: 3, ..token.clone() }, T0).1,
            [1, 10, 7, 0, 300]
        );
        assert_eq!(step(&mut slot, &at_most(0), T0), (0, [1, 10, 7, 0, 300]));
        assert_eq!(step(&mut slot, &at_most(10), T0), (7, [1, 10, 0, 0, 1000]));
        // Nothing left: refused, retry when one permit is back, nothing taken.
        assert_eq!(step(&mut slot, &at_most(1000), T0 + 1), (1, [0, 10, 0, 99, 999]));
        assert_eq!(step(&mut slot, &at_most(0), T0 + 1), (1, [0, 10, 0, 99, 999]));
        // A fraction of a permit back is not a permit.
        assert_eq!(step(&mut slot, &at_most(5), T0 + 250), (2, [1, 10, 0, 0, 950]));
    }

    #[test]
    fn at_most_is_a_direct_command_option() {
        let parse = |command, args: &str| {
            let bytes: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
            Request::parse(command, &bytes, 100_000)
        };
        use crate::grammar::error::ArgError;
        let token = parse(Command::Token, "10 10 1s ATMOST 5").unwrap();
        assert!(token.at_most && token.cost == 5);
        assert!(parse(Command::Period, "10 1s atmost 0 DRYRUN").unwrap().at_most);
        assert!(parse(Command::Slide, "10 1s ATMOST 1000000000000").unwrap().at_most);
        assert!(parse(Command::Leaky, "10 1 1s NODELAY ATMOST 2 BAN 1m").unwrap().at_most);
        assert!(!parse(Command::Token, "10 10 1s COST 5").unwrap().at_most);
        assert_eq!(
            parse(Command::Token, "10 10 1s ATMOST 5 COST 1"),
            Err(ArgError::Conflict("ATMOST", "COST"))
        );
        assert_eq!(
            parse(Command::Token, "10 10 1s COST 1 ATMOST 5"),
            Err(ArgError::Conflict("ATMOST", "COST"))
        );
        assert_eq!(
            parse(Command::Token, "10 10 1s WAIT 1s ATMOST 5"),
            Err(ArgError::Conflict("ATMOST", "WAIT"))
        );
        assert_eq!(parse(Command::Token, "10 10 1s ATMOST"), Err(ArgError::MissingValue("ATMOST")));
        assert!(matches!(
            parse(Command::Token, "10 10 1s ATMOST -1"),
            Err(ArgError::Integer { name: "ATMOST", .. })
        ));
        assert_eq!(
            parse(Command::Throttle, "10 1 1 1 ATMOST 5"),
            Err(ArgError::UnknownOption(b"ATMOST".to_vec()))
        );
        let unknown = Err(ArgError::UnknownOption(b"ATMOST".to_vec()));
        let group: Vec<&[u8]> = "TOKEN 10 1 1s ATMOST 2".split(' ').map(str::as_bytes).collect();
        assert_eq!(Request::parse_group(&group, 100_000), unknown);
        let all: Vec<&[u8]> = "1 k TOKEN 10 1 1s ATMOST 2".split(' ').map(str::as_bytes).collect();
        assert_eq!(
            crate::grammar::request::AllRequest::parse(&all, 100_000).map(|_| ()),
            unknown.map(|_: Request| ())
        );
    }
}
