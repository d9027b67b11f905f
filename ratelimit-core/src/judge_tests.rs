use proptest::prelude::*;

use super::*;
use crate::request::Command;

const T0: i64 = 1_700_000_000_000;

fn request(command: Command, args: &str) -> Request {
    let bytes: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
    Request::parse(command, &bytes, 100_000).expect("valid test request")
}

/// Requests of every algorithm, some sharing an algorithm with other parameters.
fn requests() -> Vec<Request> {
    [
        (Command::Token, "5 1 100"),
        (Command::Token, "5 2 100 STEP"),
        (Command::Period, "4 300"),
        (Command::Period, "4 300 ALIGN 100"),
        (Command::Slide, "4 250"),
        (Command::Slide, "4 250 BUCKETS 5"),
        (Command::Leaky, "4 1 100"),
        (Command::Leaky, "4 1 100 NODELAY"),
        (Command::Throttle, "3 1 1"),
    ]
    .into_iter()
    .map(|(c, a)| request(c, a))
    .collect()
}

/// The reference: the copying evaluation (`judge` on an unpacked state, the new state replacing
/// the old), with the key's rules written out plainly.
fn reference(
    stored: &mut Option<Limiter>,
    request: &Request,
    now: i64,
) -> Result<(bool, Option<i64>), KeyError> {
    fn step<V: Variant>(
        stored: &mut Option<Limiter>,
        params: &V::Params,
        now: i64,
        cost: u64,
        commit: bool,
    ) -> Result<(bool, Option<i64>), KeyError> {
        let live = stored.as_ref().filter(|l| l.reset_at_ms() > now);
        if let Some(l) = live.filter(|l| V::from_limiter(l).is_none()) {
            return Err(KeyError::WrongAlgorithm { held: l.algorithm(), wanted: V::ALGORITHM });
        }
        let own = stored.as_ref().and_then(V::from_limiter);
        let e = judge::<V>(own, params, now, cost);
        let mut expiry = None;
        if let Some(next) = e.next.filter(|_| commit) {
            // The old shell's formula: `reset_after_ms` after the new state's last update.
            let at = next.updated_ms().saturating_add(e.decision.reset_after_ms);
            assert_eq!(at, next.reset_at_ms(), "reset instant and reply disagree");
            expiry = Some(at);
            *stored = Some(next.into_limiter());
        }
        Ok((e.decision.allowed, expiry))
    }
    let (cost, commit) = (request.cost, !request.dry_run);
    match &request.limit {
        Limit::Token(p) => step::<TokenBucket>(stored, p, now, cost, commit),
        Limit::Period(p) => step::<PeriodWindow>(stored, p, now, cost, commit),
        Limit::Slide(p) => step::<SlideState>(stored, p, now, cost, commit),
        Limit::Leaky(p) => step::<LeakyBucket>(stored, p, now, cost, commit),
        Limit::Throttle(p) => step::<GcraState>(stored, p, now, cost, commit),
    }
}

/// Runs one request through `judge_key` on a packed slot, applying the change as the shell does.
fn run(slot: &mut Option<PackedLimiter>, request: &Request, now: i64) -> Result<Verdict, KeyError> {
    let verdict = judge_key(slot.as_mut(), request, now)?;
    if let Change::Created { limiter, .. } = &verdict.change {
        *slot = Some(PackedLimiter::new(limiter.clone()));
    }
    Ok(verdict)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// On random traffic mixing algorithms and parameters on one key, `judge_key` (packed,
    /// in place) agrees with the reference on every decision, error, change and expiry, and
    /// leaves the same state.
    #[test]
    fn judge_key_agrees_with_the_reference(
        ops in prop::collection::vec((0usize..9, 0u64..4, any::<bool>(), -50i64..400), 1..60)
    ) {
        let requests = requests();
        let (mut slot, mut stored, mut now) = (None::<PackedLimiter>, None::<Limiter>, T0);
        for (which, cost, dry_run, gap) in ops {
            now += gap;
            let mut request = requests[which].clone();
            request.cost = cost;
            request.dry_run = dry_run && cost % 2 == 0;
            let expected = reference(&mut stored, &request, now);
            let got = run(&mut slot, &request, now);
            match (expected, got) {
                (Err(e), Err(g)) => prop_assert_eq!(e, g),
                (Ok((allowed, expiry)), Ok(verdict)) => {
                    prop_assert_eq!(allowed, verdict.allowed);
                    let got_expiry = match verdict.change {
                        Change::Unchanged => None,
                        Change::Updated { expire_at_ms } | Change::Created { expire_at_ms, .. } => {
                            Some(expire_at_ms)
                        }
                    };
                    prop_assert_eq!(expiry, got_expiry);
                }
                (e, g) => prop_assert!(false, "reference {e:?}, judge_key {g:?}"),
            }
            let held = slot.as_ref().map(|p| p.view(Limiter::clone));
            prop_assert_eq!(&held, &stored);
        }
    }
}

#[test]
fn another_algorithms_live_limiter_is_refused_until_it_resets() {
    let token = request(Command::Token, "5 1 100");
    let period = request(Command::Period, "4 300");
    let mut slot = None;
    assert!(run(&mut slot, &token, T0).unwrap().changed());
    let err = run(&mut slot, &period, T0 + 99).unwrap_err();
    assert_eq!(err, KeyError::WrongAlgorithm { held: Algorithm::Token, wanted: Algorithm::Period });
    assert_eq!(err.to_string(), "WRONGTYPE key holds a token limiter, not a period limiter");
    // The bucket is full again at T0 + 100: the key counts as empty.
    let verdict = run(&mut slot, &period, T0 + 100).unwrap();
    assert!(matches!(verdict.change, Change::Updated { expire_at_ms } if expire_at_ms == T0 + 400));
}

#[test]
fn dry_runs_and_zero_costs_change_nothing() {
    let mut dry = request(Command::Token, "5 1 100 DRYRUN");
    let mut slot = None;
    assert!(!run(&mut slot, &dry, T0).unwrap().changed());
    assert!(slot.is_none());
    dry.dry_run = false;
    dry.cost = 0;
    assert!(!run(&mut slot, &dry, T0).unwrap().changed());
    assert!(slot.is_none());
}

#[test]
fn peek_and_describe_see_only_live_limiters() {
    let mut slot = None;
    run(&mut slot, &request(Command::Period, "4 300"), T0).unwrap();
    assert_eq!(peek_key(slot.as_ref(), T0 + 1), Some([1, 4, 2, 0, 299]));
    let info = describe_key(slot.as_ref(), T0 + 1).unwrap();
    assert_eq!(info.algorithm, Algorithm::Period);
    assert_eq!(info.updated_ms, T0);
    assert!(info.fields.contains(&("used", 1)));
    assert_eq!(peek_key(slot.as_ref(), T0 + 300), None);
    assert_eq!(describe_key(slot.as_ref(), T0 + 300), None);
    assert_eq!(peek_key(None, T0), None);
}

#[test]
fn throttle_answers_in_redis_cells_layout() {
    // redis-cell's README example.
    let mut slot = None;
    let verdict = run(&mut slot, &request(Command::Throttle, "15 30 60 1"), T0).unwrap();
    assert_eq!(verdict.reply, [0, 16, 15, -1, 2]);
}

fn copy(slots: &[Option<PackedLimiter>]) -> Vec<Option<PackedLimiter>> {
    slots.iter().map(|s| s.as_ref().map(|p| PackedLimiter::new(p.view(Limiter::clone)))).collect()
}

fn all_of(limits: Vec<Request>, dry_run: bool) -> AllRequest {
    AllRequest { key_count: limits.len(), limits, dry_run, at_ms: None }
}

/// Runs `RL.ALL` on packed slots, applying the changes as the shell does.
fn run_all(
    slots: &mut [Option<PackedLimiter>],
    all: &AllRequest,
    now: i64,
) -> Result<AllVerdict, KeyError> {
    let mut held: Vec<Option<&mut PackedLimiter>> = slots.iter_mut().map(Option::as_mut).collect();
    let mut verdict = judge_all(&mut held, all, now)?;
    for (slot, change) in slots.iter_mut().zip(&mut verdict.changes) {
        if let Change::Created { limiter, .. } = change {
            *slot = Some(PackedLimiter::new(limiter.clone()));
        }
    }
    Ok(verdict)
}

fn states(slots: &[Option<PackedLimiter>]) -> Vec<Option<Limiter>> {
    slots.iter().map(|s| s.as_ref().map(|p| p.view(Limiter::clone))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// RL.ALL against the single-key reference: when every limit admits, every key ends as its
    /// single command would have left it (same decisions, states, expiries); when any refuses
    /// or errs, nothing changes. The binding index and retry follow the rules, and the retry is
    /// exact: the same call is admitted after exactly `retry_after_ms`, not one ms earlier.
    #[test]
    fn all_is_the_single_commands_all_or_nothing(
        keys in 2usize..=4,
        ops in prop::collection::vec(
            (prop::collection::vec((0usize..8, 0u64..4), 4), any::<bool>(), -50i64..400),
            1..40,
        )
    ) {
        let requests = requests();
        let mut slots: Vec<Option<PackedLimiter>> = (0..keys).map(|_| None).collect();
        let mut now = T0;
        for (groups, dry_run, gap) in ops {
            now += gap;
            let limits: Vec<Request> = groups[..keys]
                .iter()
                .map(|(which, cost)| Request { cost: *cost, ..requests[*which].clone() })
                .collect();
            let all = all_of(limits.clone(), dry_run);
            let before = states(&slots);

            // The reference: each key's single command, dry, then committed if all admit.
            let mut reference_states = before.clone();
            let mut dry = Vec::new();
            for (state, limit) in reference_states.iter_mut().zip(&limits) {
                let mut scratch = state.clone();
                dry.push(reference(&mut scratch, &Request { dry_run: true, ..limit.clone() }, now));
            }
            let got = run_all(&mut slots, &all, now);
            if let Some(Err(e)) = dry.iter().find(|d| d.is_err()) {
                prop_assert_eq!(got.unwrap_err(), e.clone());
                prop_assert_eq!(states(&slots), before);
                continue;
            }
            let verdict = got.unwrap();
            let admitted: Vec<bool> = dry.iter().map(|d| d.as_ref().unwrap().0).collect();
            let allowed = admitted.iter().all(|a| *a);
            prop_assert_eq!(verdict.allowed, allowed);
            if allowed && !dry_run {
                for (i, (state, limit)) in reference_states.iter_mut().zip(&limits).enumerate() {
                    let (_, expiry) = reference(state, limit, now).unwrap();
                    let got_expiry = match &verdict.changes[i] {
                        Change::Unchanged => None,
                        Change::Updated { expire_at_ms } | Change::Created { expire_at_ms, .. } => {
                            Some(*expire_at_ms)
                        }
                    };
                    prop_assert_eq!(expiry, got_expiry);
                }
            } else {
                prop_assert!(!verdict.changed());
            }
            prop_assert_eq!(states(&slots), reference_states);

            // Each detail is the single command's DRYRUN reply on the key as it was.
            for (i, limit) in limits.iter().enumerate() {
                let mut probe = before[i].clone().map(PackedLimiter::new);
                let dry = Request { dry_run: true, ..limit.clone() };
                prop_assert_eq!(judge_key(probe.as_mut(), &dry, now).unwrap().reply, verdict.details[i]);
            }
            let mut scratch = copy(&slots);

            // Binding index and retry.
            let index = usize::try_from(verdict.head[5] - 1).unwrap();
            let bound = verdict.details[index];
            prop_assert_eq!(&verdict.head[1..3], &bound[1..3]);
            prop_assert_eq!(verdict.head[4], bound[4]);
            let wait = |d: &[i64; 5]| if d[3] < 0 { i64::MAX } else { d[3] };
            for (j, d) in verdict.details.iter().enumerate() {
                if allowed {
                    prop_assert!(d[2] > bound[2] || (d[2] == bound[2] && j >= index));
                    prop_assert!(d[3] <= verdict.head[3]);
                } else if d[0] == 0 {
                    prop_assert_eq!(bound[0], 0);
                    prop_assert!(wait(d) < wait(&bound) || (wait(d) == wait(&bound) && j >= index));
                }
            }
            if !allowed {
                prop_assert_eq!(verdict.head[3], bound[3]);
                let retry = verdict.head[3];
                // Times are measured from each key's `now' = max(now, updated_ms)`: check
                // exactness when the clock has not gone back behind any key.
                let forward = before.iter().flatten().all(|l| l.updated_ms() <= now);
                if retry >= 0 && forward {
                    let dry_all = all_of(limits.clone(), true);
                    prop_assert!(run_all(&mut scratch, &dry_all, now + retry).unwrap().allowed);
                    if retry > 0 {
                        prop_assert!(!run_all(&mut scratch, &dry_all, now + retry - 1).unwrap().allowed);
                    }
                }
            }
        }
    }
}

#[test]
fn all_reports_the_binding_limit() {
    // Key 1 admits with 1 left; key 2 admits with 3 left: key 1 binds.
    let limits = vec![request(Command::Token, "2 1 1s"), request(Command::Period, "4 1s")];
    let mut slots = vec![None, None];
    let v = run_all(&mut slots, &all_of(limits.clone(), false), T0).unwrap();
    assert_eq!(v.head, [1, 2, 1, 0, 1000, 1]);
    assert_eq!(v.details, vec![[1, 2, 1, 0, 1000], [1, 4, 3, 0, 1000]]);
    assert!(v.changed());
    // Second call: the bucket admits its last token; the third is refused by the bucket, and
    // nothing is taken from the window.
    run_all(&mut slots, &all_of(limits.clone(), false), T0).unwrap();
    let v = run_all(&mut slots, &all_of(limits, false), T0).unwrap();
    assert_eq!(v.head, [0, 2, 0, 1000, 2000, 1]);
    assert!(!v.changed());
    let used = describe_key(slots[1].as_ref(), T0).unwrap().fields;
    assert!(used.contains(&("used", 2)), "{used:?}");
}
