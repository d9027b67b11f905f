use proptest::prelude::*;

use super::*;
use crate::grammar::request::Command;
use crate::steps::inspect::{describe_key, peek_key};
use crate::store::packed::PackedLimiter;

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
    match &verdict.change {
        Change::Created { limiter, .. } => *slot = Some(PackedLimiter::new(limiter.clone())),
        Change::Deleted => *slot = None,
        Change::Unchanged | Change::Updated { .. } => {}
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
                        Change::Unchanged | Change::Deleted => None,
                        Change::Updated { expire_at_ms, .. } | Change::Created { expire_at_ms, .. } => {
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
    assert!(
        matches!(verdict.change, Change::Updated { expire_at_ms, .. } if expire_at_ms == T0 + 400)
    );
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
    assert_eq!(peek_key(None::<&PackedLimiter>, T0), None);
}

#[test]
fn throttle_answers_in_redis_cells_layout() {
    // redis-cell's README example.
    let mut slot = None;
    let verdict = run(&mut slot, &request(Command::Throttle, "15 30 60 1"), T0).unwrap();
    assert_eq!(verdict.reply, [0, 16, 15, -1, 2]);
}

fn copy(slots: &[Option<PackedLimiter>]) -> Vec<Option<PackedLimiter>> {
    slots.to_vec()
}

fn all_of(limits: Vec<Request>, dry_run: bool) -> AllRequest {
    AllRequest {
        key_count: limits.len(),
        limits: limits.into_iter().collect(),
        dry_run,
        at_ms: None,
        deadline_ms: None,
        by_policy: false,
        shadow: 0,
    }
}

/// Runs `RL.ALL` on packed slots, applying the changes as the shell does.
fn run_all(
    slots: &mut [Option<PackedLimiter>],
    all: &AllRequest,
    now: i64,
) -> Result<AllVerdict, KeyError> {
    let mut verdict = judge_all(slots.iter_mut().map(Option::as_mut), all, now)?;
    for (slot, change) in slots.iter_mut().zip(verdict.changes.iter_mut()) {
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
                        Change::Unchanged | Change::Deleted => None,
                        Change::Updated { expire_at_ms, .. } | Change::Created { expire_at_ms, .. } => {
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
    assert_eq!(v.details.to_vec(), vec![[1, 2, 1, 0, 1000], [1, 4, 3, 0, 1000]]);
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

/// Requests of every algorithm that takes `BAN`, each with a short ban.
fn banning_requests() -> Vec<Request> {
    [
        (Command::Token, "3 1 100 BAN 250"),
        (Command::Period, "3 300 BAN 500"),
        (Command::Slide, "3 250 BAN 400"),
        (Command::Slide, "3 250 BUCKETS 5 BAN 400"),
        (Command::Leaky, "3 1 100 NODELAY BAN 300"),
    ]
    .into_iter()
    .map(|(c, a)| request(c, a))
    .collect()
}

/// `now'` of a call at `now` on a slot (what every reply time is measured from).
fn now2(slot: &Option<PackedLimiter>, now: i64) -> i64 {
    describe_key(slot.as_ref(), now).map_or(now, |d| now.max(d.updated_ms))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Bans on random traffic: a ban starts only when the algorithm itself refuses a request
    /// carrying `BAN` that it could admit some day; it is never extended; while it is in force
    /// every request of cost ≥ 1 is refused with nothing remaining, and its retry is exact
    /// (admitted after exactly `retry_after`, refused one ms earlier); the key expires at
    /// `max(reset instant, until)`.
    #[test]
    fn bans_start_only_on_refusal_and_are_never_extended(
        which in 0usize..5,
        ops in prop::collection::vec((0u64..3, any::<bool>(), any::<bool>(), -20i64..120), 1..60)
    ) {
        let banning = banning_requests()[which].clone();
        let plain = Request { ban_ms: None, ..banning.clone() };
        let mut slot: Option<PackedLimiter> = None;
        let mut now = T0;
        for (cost, with_ban, dry_run, gap) in ops {
            now += gap;
            let base = if with_ban { &banning } else { &plain };
            let request = Request { cost, dry_run, ..base.clone() };
            let ban_before = slot.as_ref().and_then(PackedLimiter::ban);
            let t2 = now2(&slot, now);
            let in_force = ban_before.filter(|b| b.active_at(b.now(now, None).max(t2)));
            // What the algorithm alone says: the same request without BAN on a copy whose ban
            // is lifted.
            let mut unbanned = copy(std::slice::from_ref(&slot));
            if let Some(p) = unbanned[0].as_mut() {
                p.set_ban(None);
            }
            let alone = judge_key(unbanned[0].as_mut(), &Request { dry_run: true, ban_ms: None, ..request.clone() }, now).unwrap();
            let verdict = run(&mut slot, &request, now).unwrap();
            let ban_after = slot.as_ref().and_then(PackedLimiter::ban);
            if let Some(b) = in_force {
                prop_assert_eq!(ban_after, ban_before, "never extended or lifted by a request");
                if cost > 0 {
                    prop_assert_eq!(verdict.reply[0], 0);
                    prop_assert_eq!(verdict.reply[2], 0);
                    prop_assert!(!verdict.changed());
                    let retry = verdict.reply[3];
                    if retry >= 0 {
                        let probe = Request { dry_run: true, ban_ms: None, ..request.clone() };
                        let mut later = copy(std::slice::from_ref(&slot));
                        let at = t2.max(b.since_ms) + retry;
                        prop_assert_eq!(judge_key(later[0].as_mut(), &probe, at).unwrap().reply[0], 1);
                        if retry > 0 {
                            prop_assert_eq!(judge_key(later[0].as_mut(), &probe, at - 1).unwrap().reply[0], 0);
                        }
                    }
                } else {
                    prop_assert_eq!(verdict.reply[0], 1);
                }
                continue;
            }
            let starts = with_ban && !dry_run && cost > 0 && !alone.allowed && alone.reply[3] >= 0;
            if starts {
                let b = ban_after.expect("a refusal with BAN starts a ban");
                prop_assert_eq!(b.until_ms - b.since_ms, i64::try_from(banning.ban_ms.unwrap()).unwrap());
                prop_assert_eq!(verdict.reply[2], 0);
                let expiry = match verdict.change {
                    Change::Updated { expire_at_ms, .. } => expire_at_ms,
                    other => panic!("a ban is a change: {other:?}"),
                };
                let reset = slot.as_ref().unwrap().view(Limiter::reset_at_ms);
                prop_assert_eq!(expiry, reset.max(b.until_ms));
            } else {
                prop_assert_eq!(verdict.allowed, alone.allowed);
                if verdict.allowed && verdict.changed() {
                    prop_assert_eq!(ban_after, None, "an admitted change forgets a past ban");
                } else {
                    prop_assert_eq!(ban_after, ban_before);
                }
            }
        }
    }
}

/// The login lock-out: 3 failures within 15 minutes lock the account for an hour; the
/// fourth attempt is refused by the algorithm and starts the ban, reported at once; the ban
/// survives the window's reset and is not extended by attempts during it.
#[test]
fn login_lock_out() {
    let attempt = request(Command::Slide, "3 15m BAN 1h");
    let mut slot = None;
    for i in 0..3 {
        assert_eq!(run(&mut slot, &attempt, T0 + i).unwrap().reply[0], 1);
    }
    let start = run(&mut slot, &attempt, T0 + 10).unwrap();
    assert_eq!(start.reply, [0, 3, 0, 3_600_000, 3_600_000]);
    let ban = slot.as_ref().and_then(PackedLimiter::ban).unwrap();
    assert_eq!((ban.since_ms, ban.until_ms), (T0 + 10, T0 + 10 + 3_600_000));
    // 20 minutes later the window is empty, the ban is not; attempts do not extend it.
    let later = run(&mut slot, &attempt, T0 + 1_200_000).unwrap();
    assert_eq!(later.reply, [0, 3, 0, 2_400_010, 2_400_010]);
    assert!(!later.changed());
    assert_eq!(peek_key(slot.as_ref(), T0 + 1_200_000), Some([0, 3, 0, 2_400_010, 2_400_010]));
    let info = describe_key(slot.as_ref(), T0 + 1_200_000).unwrap();
    assert!(info.fields.contains(&("banned_until_ms", T0 + 3_600_010)));
    // Free again at exactly the end of the ban.
    assert_eq!(run(&mut slot, &attempt, T0 + 3_600_009).unwrap().reply[0], 0);
    assert_eq!(run(&mut slot, &attempt, T0 + 3_600_010).unwrap().reply[0], 1);
    assert_eq!(slot.as_ref().and_then(PackedLimiter::ban), None);
}

/// A request that could never be admitted (cost above the limit) is a client bug, not an
/// attack: it never bans. A dry run only reports the ban.
#[test]
fn impossible_and_dry_requests_never_ban() {
    let mut slot = None;
    let take = request(Command::Token, "3 1 1s COST 3");
    run(&mut slot, &take, T0).unwrap();
    let huge = request(Command::Token, "3 1 1s COST 4 BAN 1m");
    assert_eq!(run(&mut slot, &huge, T0).unwrap().reply[3], -1);
    assert_eq!(slot.as_ref().and_then(PackedLimiter::ban), None);
    let dry = request(Command::Token, "3 1 1s BAN 1m DRYRUN");
    let verdict = run(&mut slot, &dry, T0).unwrap();
    assert_eq!(verdict.reply, [0, 3, 0, 60_000, 60_000]);
    assert!(!verdict.changed());
    assert_eq!(slot.as_ref().and_then(PackedLimiter::ban), None);
}

/// A key's value as the shell holds it: inline (an entry of the table, its word and extra
/// field), or boxed (the packed form, for what has no inline form or carries a ban).
enum Value {
    Inline(crate::store::inline::Encoded),
    Boxed(PackedLimiter),
}

/// One request through the inline path, as the shell runs it: expand the word, judge the
/// expanded limiter, encode the result again (hinted by the old word) or box it.
fn run_inline(
    table: &mut crate::store::inline::InlineTable,
    value: &mut Option<Value>,
    request: &Request,
    now: i64,
) -> Result<Verdict, KeyError> {
    use crate::store::held::Expanded;
    let into_value =
        |table: &mut crate::store::inline::InlineTable, e: Expanded, hint: Option<u64>| match e
            .ban
            .is_none()
            .then(|| table.encode(&e.limiter, hint))
            .flatten()
        {
            Some(encoded) => Value::Inline(encoded),
            None => Value::Boxed(PackedLimiter::with_ban(e.limiter, e.ban)),
        };
    match value.take() {
        None => {
            let verdict = judge_key(None::<&mut Expanded>, request, now);
            if let Ok(Verdict { change: Change::Created { limiter, .. }, .. }) = &verdict {
                let e = Expanded { limiter: limiter.clone(), ban: None };
                *value = Some(into_value(table, e, None));
            }
            verdict
        }
        Some(Value::Inline(encoded)) => {
            let limiter = table.expand(encoded.word, encoded.extra).expect("a live word");
            let mut e = Expanded { limiter, ban: None };
            let verdict = judge_key(Some(&mut e), request, now);
            if !matches!(verdict, Ok(Verdict { change: Change::Deleted, .. })) {
                *value = Some(into_value(table, e, Some(encoded.word)));
            }
            table.releaser().release(encoded.word);
            verdict
        }
        Some(Value::Boxed(mut packed)) => {
            let verdict = judge_key(Some(&mut packed), request, now);
            if !matches!(verdict, Ok(Verdict { change: Change::Deleted, .. })) {
                *value = Some(Value::Boxed(packed));
            }
            verdict
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The inline path (expand, judge, encode again; boxed under a ban) agrees with the packed
    /// path on every verdict and leaves the same limiter, over random traffic mixing
    /// algorithms, parameters, bans (clearing ones too) and clock jumps on one key (keys fall back to their box
    /// while banned and return inline).
    #[test]
    fn the_inline_path_agrees_with_the_packed_path(
        ops in prop::collection::vec((0usize..9, 0u64..4, any::<bool>(), -50i64..400, any::<bool>(), 0u8..8), 1..60)
    ) {
        let requests = requests();
        let mut table = crate::store::inline::InlineTable::new(4);
        let (mut packed, mut value, mut now) = (None::<PackedLimiter>, None::<Value>, T0);
        for (which, cost, dry_run, gap, ban, fresh) in ops {
            now += gap;
            let mut request = requests[which].clone();
            request.cost = cost;
            request.dry_run = dry_run && cost % 2 == 0;
            if ban && which != 8 {
                request.ban_ms = Some(150);
                request.clear = fresh % 3 == 1;
            }
            request.fresh = fresh == 0 && which != 8;
            let expected = run(&mut packed, &request, now);
            let got = run_inline(&mut table, &mut value, &request, now);
            match (&expected, &got) {
                (Ok(e), Ok(g)) => {
                    prop_assert_eq!(e.allowed, g.allowed);
                    prop_assert_eq!(e.reply, g.reply);
                }
                (e, g) => prop_assert_eq!(e.as_ref().err(), g.as_ref().err()),
            }
            let want = packed.as_ref().map(|p| (p.view(Limiter::clone), p.ban()));
            let held = match &value {
                None => None,
                Some(Value::Inline(e)) => Some((table.expand(e.word, e.extra).expect("live"), None)),
                Some(Value::Boxed(p)) => Some((p.view(Limiter::clone), p.ban())),
            };
            prop_assert_eq!(held, want);
        }
    }
}

/// Every request that takes `FRESH` (every algorithm and mode but `CL.THROTTLE`), with and
/// without a ban.
fn fresh_requests() -> Vec<Request> {
    let mut all: Vec<Request> = requests().into_iter().take(8).collect();
    all.extend(banning_requests());
    all
}

/// What a key holds, comparably: its limiter and ban.
fn held_value(
    slot: &Option<PackedLimiter>,
) -> Option<(Limiter, Option<crate::algorithms::ban::Ban>)> {
    slot.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `FRESH` is judging on a missing key, for every algorithm and mode: after random traffic
    /// (bans included) on one key, a `FRESH` request gets exactly the reply the same request
    /// gets on an empty key, and leaves the key exactly as that request leaves an empty key —
    /// the new limiter with its expiry (no ban) when admitted with cost > 0, no key when
    /// admitted with cost 0 (a live key is deleted), the key untouched when refused or dry.
    /// A live limiter of another algorithm is still an error that changes nothing.
    #[test]
    fn fresh_is_judging_a_missing_key(
        ops in prop::collection::vec((0usize..13, 0u64..4, any::<bool>(), -50i64..400), 0..40),
        which in 0usize..13,
        cost in prop_oneof![0u64..5, Just(4), Just(1000)],
        dry_run in any::<bool>(),
        gap in -200i64..600,
    ) {
        let (mut slot, mut now) = (None::<PackedLimiter>, T0);
        let traffic = fresh_requests();
        for (which, cost, ban, gap) in ops {
            now += gap;
            let base = &traffic[which % traffic.len()];
            let request = Request { cost, ban_ms: base.ban_ms.filter(|_| ban), ..base.clone() };
            let _ = run(&mut slot, &request, now);
        }
        now += gap;
        let plain = Request { cost, dry_run, ..fresh_requests()[which].clone() };
        let fresh = Request { fresh: true, ..plain.clone() };
        let before = held_value(&slot);
        let live = slot.as_ref().is_some_and(|p| {
            p.view(|l| crate::steps::judge::Standing::of(l, p.ban(), now).live())
        });
        let mut empty = None;
        let expected = run(&mut empty, &plain, now).expect("an empty key is never an error");
        let got = run(&mut slot, &fresh, now);
        let wanted = match &plain.limit {
            Limit::Token(_) => Algorithm::Token,
            Limit::Period(_) => Algorithm::Period,
            Limit::Slide(_) => Algorithm::Slide,
            Limit::Leaky(_) => Algorithm::Leaky,
            Limit::Throttle(_) => Algorithm::Gcra,
        };
        let counting_other = before.as_ref().filter(|(l, ban)| {
            l.algorithm() != wanted && crate::steps::judge::Standing::of(l, *ban, now).counts
        });
        if let Some((l, _)) = counting_other {
            prop_assert_eq!(got.unwrap_err(), KeyError::WrongAlgorithm { held: l.algorithm(), wanted });
            prop_assert_eq!(held_value(&slot), before);
            return Ok(());
        }
        let got = got.unwrap();
        prop_assert_eq!(got.reply, expected.reply);
        prop_assert_eq!(got.allowed, expected.allowed);
        match (&expected.change, &got.change) {
            (Change::Created { limiter, expire_at_ms }, Change::Created { expire_at_ms: e, .. })
            | (Change::Created { limiter, expire_at_ms }, Change::Updated { expire_at_ms: e, .. }) => {
                prop_assert_eq!(expire_at_ms, e);
                prop_assert_eq!(held_value(&slot), Some((limiter.clone(), None)));
            }
            (Change::Unchanged, change) => {
                let admitted_zero = expected.allowed && cost == 0 && !dry_run;
                if admitted_zero && live {
                    prop_assert!(matches!(change, Change::Deleted), "{change:?}");
                    prop_assert!(slot.is_none());
                } else {
                    prop_assert!(matches!(change, Change::Unchanged), "{change:?}");
                    prop_assert_eq!(held_value(&slot), before);
                }
            }
            (e, g) => prop_assert!(false, "on an empty key {e:?}, with FRESH {g:?}"),
        }
    }
}

#[test]
fn fresh_replaces_state_and_ban_and_cost_zero_deletes() {
    // A full window under a ban.
    let attempt = request(Command::Slide, "3 15m BAN 1h");
    let mut slot = None;
    for i in 0..4 {
        run(&mut slot, &attempt, T0 + i).unwrap();
    }
    assert!(slot.as_ref().and_then(PackedLimiter::ban).is_some());
    // FRESH: a new window holding exactly this request, no ban; `now'` is the call's own
    // instant even before the stored `updated_ms`.
    let fresh = request(Command::Slide, "3 15m COST 2 FRESH");
    let verdict = run(&mut slot, &fresh, T0 - 5).unwrap();
    assert_eq!(verdict.reply, [1, 3, 1, 0, 900_000]);
    assert!(
        matches!(verdict.change, Change::Updated { expire_at_ms, .. } if expire_at_ms == T0 - 5 + 900_000)
    );
    assert_eq!(slot.as_ref().and_then(PackedLimiter::ban), None);
    let info = describe_key(slot.as_ref(), T0).unwrap();
    assert_eq!(info.updated_ms, T0 - 5);
    assert!(info.fields.contains(&("used", 2)), "{:?}", info.fields);
    // Refused (cost above the limit) and dry runs change nothing.
    let before = held_value(&slot);
    let refused = run(&mut slot, &request(Command::Slide, "3 15m COST 4 FRESH"), T0).unwrap();
    assert_eq!(refused.reply, [0, 3, 3, -1, 0]);
    assert!(!refused.changed());
    let dry = run(&mut slot, &request(Command::Slide, "3 15m COST 3 FRESH DRYRUN"), T0).unwrap();
    assert_eq!(dry.reply, [1, 3, 0, 0, 900_000]);
    assert!(!dry.changed());
    assert_eq!(held_value(&slot), before);
    // COST 0: the fresh limiter with nothing used is no key.
    let zero = run(&mut slot, &request(Command::Slide, "3 15m COST 0 FRESH"), T0).unwrap();
    assert_eq!(zero.reply, [1, 3, 3, 0, 0]);
    assert!(matches!(zero.change, Change::Deleted));
    assert!(slot.is_none());
    let again = run(&mut slot, &request(Command::Slide, "3 15m COST 0 FRESH"), T0).unwrap();
    assert!(matches!(again.change, Change::Unchanged));
    // Another algorithm's live limiter is still refused, and untouched.
    run(&mut slot, &request(Command::Token, "5 1 100"), T0).unwrap();
    let err = run(&mut slot, &request(Command::Period, "5 1s FRESH"), T0).unwrap_err();
    assert_eq!(err, KeyError::WrongAlgorithm { held: Algorithm::Token, wanted: Algorithm::Period });
    // rate-limiter-flexible's `set(key, points, secDuration)`: an unbounded counter holding
    // exactly `points`, with a new window from now.
    let mut slot = None;
    let set = request(Command::Period, "1000000000000 60000 COST 7 FRESH");
    run(&mut slot, &request(Command::Period, "1000000000000 60000 COST 30"), T0).unwrap();
    let verdict = run(&mut slot, &set, T0 + 10_000).unwrap();
    assert_eq!(verdict.reply, [1, 1_000_000_000_000, 999_999_999_993, 0, 60_000]);
    let info = describe_key(slot.as_ref(), T0 + 10_000).unwrap();
    assert!(info.fields.contains(&("used", 7)));
    assert!(info.fields.contains(&("window_start_ms", T0 + 10_000)));
}

#[test]
fn describe_reports_the_window_at_now() {
    // Every limiter: `now_ms` = max(now, updated_ms); only sliding windows have a window.
    let mut slot = None;
    run(&mut slot, &request(Command::Token, "5 1 100"), T0).unwrap();
    let info = describe_key(slot.as_ref(), T0 - 7).unwrap();
    assert_eq!((info.now_ms, info.window), (T0, None));
    assert_eq!(describe_key(slot.as_ref(), T0 + 7).unwrap().now_ms, T0 + 7);
    // An exact log: what counts at now'.
    let mut slot = None;
    let log = request(Command::Slide, "5 100");
    run(&mut slot, &log, T0).unwrap();
    run(&mut slot, &Request { cost: 2, ..log.clone() }, T0 + 40).unwrap();
    let window = describe_key(slot.as_ref(), T0 + 100).unwrap().window.unwrap();
    assert_eq!(
        window,
        crate::algorithms::slide::WindowAt { used: 2, oldest_ms: Some(T0 + 40), buckets: None }
    );
    // Refunded back to its initial state during a ban: the key lives on, its window is empty.
    let mut slot = None;
    let banning = request(Command::Slide, "2 1000 BUCKETS 4 BAN 5000");
    for k in 0..3 {
        run(&mut slot, &banning, T0 + k).unwrap();
    }
    assert!(slot.as_ref().and_then(PackedLimiter::ban).is_some());
    let _ = crate::steps::refund::refund_key(slot.as_mut(), 10, T0 + 3);
    let info = describe_key(slot.as_ref(), T0 + 10).unwrap();
    // Its stored fields show the initial state too (as under a clearing ban).
    assert!(info.fields.contains(&("used", 0)) && info.fields.contains(&("entries", 0)));
    let window = info.window.unwrap();
    assert_eq!((window.used, window.oldest_ms), (0, None));
    let (counts, start) = window.buckets.unwrap();
    assert_eq!(counts, vec![0; 5]);
    assert_eq!(start, (T0 + 10).div_euclid(250) * 250 - 1000);
}

// ---------------------------------------------------------------------------------------
// BAN d CLEAR: the ban that clears the limiter
// ---------------------------------------------------------------------------------------

/// Requests of every algorithm and mode that takes `BAN`, each with a short clearing ban.
fn clearing_requests() -> Vec<Request> {
    [
        (Command::Token, "3 1 100 BAN 250 CLEAR"),
        (Command::Token, "3 2 100 STEP BAN 250 CLEAR"),
        (Command::Period, "3 300 BAN 500 CLEAR"),
        (Command::Period, "3 300 ALIGN 100 BAN 500 CLEAR"),
        (Command::Slide, "3 250 BAN 400 CLEAR"),
        (Command::Slide, "3 250 BUCKETS 5 ANCHOR BAN 400 CLEAR"),
        (Command::Leaky, "3 1 100 BAN 300 CLEAR"),
        (Command::Leaky, "3 1 100 NODELAY BAN 300 CLEAR"),
    ]
    .into_iter()
    .map(|(c, a)| request(c, a))
    .collect()
}

/// The limit a request's reply reports (its capacity or limit).
fn limit_of(request: &Request) -> i64 {
    run(&mut None, &Request { cost: 0, dry_run: true, ..request.clone() }, T0).unwrap().reply[1]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `BAN d CLEAR` on random traffic (clearing, plain and dry requests of one algorithm and
    /// mode): while a clearing ban is in force every request of cost ≥ 1 is refused with
    /// exactly `banned_until − now'` (or -1 for a cost no fresh limiter admits) and changes
    /// nothing; once it has ended, every request gets exactly the reply the same request gets
    /// on a missing key and leaves the key as that request leaves a missing key (a fresh
    /// limiter). The request that starts one replies `[0, limit, 0, d, d]` and the key expires
    /// at the ban's end.
    #[test]
    fn a_clearing_ban_refuses_until_it_ends_then_the_limiter_is_fresh(
        which in 0usize..8,
        ops in prop::collection::vec((0u64..5, any::<bool>(), any::<bool>(), -20i64..200), 1..60),
    ) {
        let clearing = clearing_requests()[which].clone();
        let duration = i64::try_from(clearing.ban_ms.unwrap()).unwrap();
        let limit = limit_of(&clearing);
        let mut slot: Option<PackedLimiter> = None;
        let mut now = T0;
        for (cost, with_ban, dry_run, gap) in ops {
            now += gap;
            let request = if with_ban {
                Request { cost, dry_run, ..clearing.clone() }
            } else {
                Request { cost, dry_run, ban_ms: None, clear: false, ..clearing.clone() }
            };
            let before = held_value(&slot);
            let cleared = before.as_ref().and_then(|(_, b)| *b).filter(|b| b.limiter_fresh);
            let on_missing = run(&mut None, &request, now).unwrap();
            let verdict = run(&mut slot, &request, now).unwrap();
            match cleared {
                Some(b) if b.active_at(now.max(b.since_ms)) => {
                    let now2 = now.max(b.since_ms);
                    let left = b.until_ms - now2;
                    let expected = match (cost, on_missing.reply[3]) {
                        (0, _) => [1, limit, 0, 0, left],
                        (_, -1) => [0, limit, 0, -1, left],
                        _ => [0, limit, 0, left, left],
                    };
                    prop_assert_eq!(verdict.reply, expected);
                    prop_assert!(!verdict.changed());
                    prop_assert_eq!(&held_value(&slot), &before);
                    prop_assert_eq!(peek_key(slot.as_ref(), now), Some([0, limit, 0, left, left]));
                }
                Some(_) => {
                    // Ended: a fresh limiter, exactly.
                    prop_assert_eq!(verdict.reply, on_missing.reply);
                    match on_missing.change {
                        Change::Created { limiter, expire_at_ms } => {
                            prop_assert!(
                                matches!(verdict.change, Change::Updated { expire_at_ms: e, .. } if e == expire_at_ms),
                                "{:?}", verdict.change
                            );
                            prop_assert_eq!(held_value(&slot), Some((limiter, None)));
                        }
                        _ => {
                            prop_assert!(!verdict.changed());
                            prop_assert_eq!(&held_value(&slot), &before);
                        }
                    }
                }
                None => {
                    let after = slot.as_ref().and_then(PackedLimiter::ban);
                    let started = after.filter(|b| b.limiter_fresh && Some(*b) != before.as_ref().and_then(|(_, b)| *b));
                    if let Some(b) = started {
                        prop_assert!(with_ban && !dry_run && cost > 0);
                        prop_assert_eq!(verdict.reply, [0, limit, 0, duration, duration]);
                        prop_assert_eq!(b.until_ms - b.since_ms, duration);
                        prop_assert!(
                            matches!(verdict.change, Change::Updated { expire_at_ms, .. } if expire_at_ms == b.until_ms),
                            "{:?}", verdict.change
                        );
                        prop_assert_eq!(value_expiry(&slot.as_ref().unwrap().view(Limiter::clone), after), b.until_ms);
                    }
                }
            }
        }
    }
}

/// NestJS' block: 2 hits per second, then blocked for 300 ms, after which the first hit starts
/// a new window (not at the old window's end, as a plain `BAN` would have it).
#[test]
fn a_clearing_ban_ends_with_a_fresh_window() {
    let hit = request(Command::Period, "2 1000 BAN 300 CLEAR");
    let mut slot = None;
    assert_eq!(run(&mut slot, &hit, T0).unwrap().reply, [1, 2, 1, 0, 1000]);
    assert_eq!(run(&mut slot, &hit, T0 + 10).unwrap().reply, [1, 2, 0, 0, 990]);
    let start = run(&mut slot, &hit, T0 + 20).unwrap();
    assert_eq!(start.reply, [0, 2, 0, 300, 300]);
    assert!(
        matches!(start.change, Change::Updated { expire_at_ms, .. } if expire_at_ms == T0 + 320)
    );
    let ban = slot.as_ref().and_then(PackedLimiter::ban).unwrap();
    assert_eq!((ban.since_ms, ban.until_ms, ban.limiter_fresh), (T0 + 20, T0 + 320, true));
    // During the ban: refused until its end, with or without BAN, never extended; a COST 0
    // peek is admitted; RL.PEEK and RL.INFO see the ban and the cleared limiter.
    let plain = request(Command::Period, "2 1000");
    assert_eq!(run(&mut slot, &plain, T0 + 100).unwrap().reply, [0, 2, 0, 220, 220]);
    let again = run(&mut slot, &hit, T0 + 319).unwrap();
    assert_eq!((again.reply, again.changed()), ([0, 2, 0, 1, 1], false));
    let peek = Request { cost: 0, ..plain.clone() };
    assert_eq!(run(&mut slot, &peek, T0 + 100).unwrap().reply, [1, 2, 0, 0, 220]);
    assert_eq!(peek_key(slot.as_ref(), T0 + 100), Some([0, 2, 0, 220, 220]));
    let info = describe_key(slot.as_ref(), T0 + 100).unwrap();
    for field in [
        ("limit", 2),
        ("period_ms", 1000),
        ("used", 0),
        ("window_start_ms", T0 + 20),
        ("window_end_ms", T0 + 20),
        ("banned_until_ms", T0 + 320),
    ] {
        assert!(info.fields.contains(&field), "{field:?} in {:?}", info.fields);
    }
    assert_eq!(info.updated_ms, T0 + 20);
    // Nothing to refund: the limiter is cleared; the refund answers with the ban.
    let refund = crate::steps::refund::refund_key(slot.as_mut(), 5, T0 + 100);
    assert_eq!(refund.reply, Some([0, 2, 0, 220, 220]));
    assert_eq!(refund.change, crate::steps::refund::RefundChange::Unchanged);
    // At the ban's end, a fresh window of its own: hit 1 of 2, a full second from now.
    assert_eq!(run(&mut slot, &hit, T0 + 320).unwrap().reply, [1, 2, 1, 0, 1000]);
    assert_eq!(slot.as_ref().and_then(PackedLimiter::ban), None);
    // A plain BAN would have kept refusing until the window's end, T0 + 1000.
    let mut slot = None;
    let banned = request(Command::Period, "2 1000 BAN 300");
    for t in [0, 10, 20] {
        run(&mut slot, &banned, T0 + t).unwrap();
    }
    assert_eq!(run(&mut slot, &banned, T0 + 320).unwrap().reply, [0, 2, 0, 680, 680]);
}

/// The call's parameters are the cleared limiter's; the rules of `BAN` hold: a cost no
/// limiter admits never bans, a dry run only reports, `CLEAR` needs `BAN` and is not an
/// `RL.ALL` option, and a limiter cleared while another algorithm calls is fresh for it.
#[test]
fn clear_follows_the_ban_rules() {
    let mut slot = None;
    run(&mut slot, &request(Command::Token, "3 1 1s COST 3"), T0).unwrap();
    let huge = run(&mut slot, &request(Command::Token, "3 1 1s COST 4 BAN 1m CLEAR"), T0).unwrap();
    assert_eq!((huge.reply[3], huge.changed()), (-1, false));
    let before = held_value(&slot);
    let dry = run(&mut slot, &request(Command::Token, "5 1 1s BAN 1m CLEAR DRYRUN"), T0).unwrap();
    assert_eq!((dry.reply, dry.changed()), ([0, 5, 0, 60_000, 60_000], false));
    assert_eq!(held_value(&slot), before);
    // Started with other parameters: the key holds the call's, in their initial state.
    run(&mut slot, &request(Command::Token, "5 1 1s BAN 1m CLEAR"), T0 + 1).unwrap();
    let info = describe_key(slot.as_ref(), T0 + 2).unwrap();
    for field in [("capacity", 5), ("tokens", 5), ("fraction", 0), ("banned_until_ms", T0 + 60_001)]
    {
        assert!(info.fields.contains(&field), "{field:?} in {:?}", info.fields);
    }
    assert_eq!(peek_key(slot.as_ref(), T0 + 2), Some([0, 5, 0, 59_999, 59_999]));
    // After it: a full bucket of the cleared limiter's capacity.
    assert_eq!(
        run(&mut slot, &request(Command::Token, "5 1 1s COST 5"), T0 + 60_001).unwrap().reply,
        [1, 5, 0, 0, 5000]
    );
    // Parsing.
    let parse = |command: Command, args: &str| {
        let bytes: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
        Request::parse(command, &bytes, 100_000)
    };
    let needs_ban = parse(Command::Slide, "3 1m CLEAR").unwrap_err().to_string();
    assert!(needs_ban.starts_with("ERR syntax error: CLEAR needs BAN d"), "{needs_ban}");
    assert!(parse(Command::Leaky, "3 1 1s clear BAN 1s").unwrap().clear);
    assert_eq!(
        parse(Command::Token, "3 1 1s BAN 1s CLEAR CLEAR"),
        Err(crate::grammar::error::ArgError::RepeatedOption("CLEAR"))
    );
    assert_eq!(
        parse(Command::Throttle, "3 1 1 1 CLEAR"),
        Err(crate::grammar::error::ArgError::UnknownOption(b"CLEAR".to_vec()))
    );
    for group in ["PERIOD 3 1m CLEAR", "TOKEN 1 1 1 CLEAR"] {
        let bytes: Vec<Vec<u8>> =
            format!("1 a {group}").split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
        assert_eq!(
            AllRequest::parse(&refs, 100_000),
            Err(crate::grammar::error::ArgError::UnknownOption(b"CLEAR".to_vec())),
            "{group}"
        );
    }
}

/// `RL.ALL` on a key its single command banned: refused while the ban is in force (nothing
/// changes, on that key or the other); once the ban is over, the key ends exactly as its single
/// command leaves it — its state, and its past ban forgotten on an admitted change — since the
/// staged copy carries the ban with the limiter.
#[test]
fn all_on_banned_keys_is_the_single_command() {
    for banning in banning_requests() {
        let plain = Request { ban_ms: None, ..banning.clone() };
        let other = request(Command::Token, "5 1 100");
        let limits = vec![plain.clone(), other];
        let mut slots: Vec<Option<PackedLimiter>> = vec![None, None];
        let mut now = T0;
        while slots[0].as_ref().and_then(PackedLimiter::ban).is_none() {
            let verdict = judge_key(slots[0].as_mut(), &banning, now).unwrap();
            if let Change::Created { limiter, .. } = verdict.change {
                slots[0] = Some(PackedLimiter::new(limiter));
            }
            now += 1;
            assert!(now < T0 + 100, "{banning:?} never bans");
        }
        let ban = slots[0].as_ref().and_then(PackedLimiter::ban).unwrap();
        let before: Vec<_> =
            slots.iter().map(|s| s.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))).collect();
        let refused = run_all(&mut slots, &all_of(limits.clone(), false), now).unwrap();
        assert!(!refused.allowed && refused.head[5] == 1, "{banning:?}: {refused:?}");
        let after: Vec<_> =
            slots.iter().map(|s| s.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))).collect();
        assert_eq!(before, after, "{banning:?}: a refused call changes nothing");
        for later in [ban.until_ms, ban.until_ms + 1_000] {
            let mut reference = copy(&slots);
            let single = judge_key(reference[0].as_mut(), &plain, later).unwrap();
            let mut judged = copy(&slots);
            let all = run_all(&mut judged, &all_of(limits.clone(), false), later).unwrap();
            assert_eq!(all.details.get(0), Some(&single.reply), "{banning:?} at {later}");
            if all.allowed {
                if let Change::Created { limiter, .. } = single.change {
                    reference[0] = Some(PackedLimiter::new(limiter));
                }
                let state = |s: &Option<PackedLimiter>| {
                    s.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))
                };
                assert_eq!(state(&judged[0]), state(&reference[0]), "{banning:?} at {later}");
            }
        }
    }
}

/// Runs `RL.ALL` as the shell does on inline values: each key's limiter expanded into a
/// detached working copy ([`Held::detached`]), judged in place, and written back only when its
/// change is not `Unchanged`.
fn run_all_detached(
    slots: &mut [Option<PackedLimiter>],
    all: &AllRequest,
    now: i64,
) -> Result<AllVerdict, KeyError> {
    use crate::store::held::Expanded;
    let mut copies: Vec<Option<Expanded>> = slots
        .iter()
        .map(|s| s.as_ref().map(|p| Expanded { limiter: p.view(Limiter::clone), ban: p.ban() }))
        .collect();
    let verdict = judge_all(copies.iter_mut().map(Option::as_mut), all, now)?;
    for ((slot, copy), change) in slots.iter_mut().zip(copies).zip(verdict.changes.iter()) {
        match change {
            Change::Unchanged => {}
            Change::Created { limiter, .. } => *slot = Some(PackedLimiter::new(limiter.clone())),
            Change::Updated { .. } => {
                if let (Some(packed), Some(copy)) = (slot.as_mut(), copy) {
                    packed.update(|limiter| *limiter = copy.limiter);
                    packed.set_ban(copy.ban);
                }
            }
            Change::Deleted => *slot = None,
        }
    }
    Ok(verdict)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Detached holders (inline values, judged in place and written back only when changed)
    /// and staged ones (boxes) give the same verdicts and leave the same keys, refusals
    /// included — a refused call leaves neither changed.
    #[test]
    fn all_on_detached_holders_is_all_on_staged_ones(
        keys in 2usize..=4,
        ops in prop::collection::vec(
            (prop::collection::vec((0usize..8, 0u64..4), 4), any::<bool>(), -50i64..400),
            1..40,
        )
    ) {
        let requests = requests();
        let mut staged: Vec<Option<PackedLimiter>> = (0..keys).map(|_| None).collect();
        let mut detached = copy(&staged);
        let mut now = T0;
        let state = |slots: &[Option<PackedLimiter>]| -> Vec<_> {
            slots.iter().map(|s| s.as_ref().map(|p| (p.view(Limiter::clone), p.ban()))).collect()
        };
        for (groups, dry_run, gap) in ops {
            now += gap;
            let limits: Vec<Request> = groups[..keys]
                .iter()
                .map(|(which, cost)| Request { cost: *cost, ..requests[*which].clone() })
                .collect();
            let all = all_of(limits, dry_run);
            let a = run_all(&mut staged, &all, now);
            let b = run_all_detached(&mut detached, &all, now);
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    prop_assert_eq!(a.head, b.head);
                    prop_assert_eq!(a.details.to_vec(), b.details.to_vec());
                }
                (a, b) => prop_assert_eq!(a.err(), b.err()),
            }
            prop_assert_eq!(state(&staged), state(&detached));
        }
    }
}

#[test]
fn a_shadow_group_never_refuses_and_takes_only_when_it_admits() {
    // Key 0: 2 per second (enforced). Key 1: 1 per second, SHADOW.
    let limits = vec![request(Command::Period, "2 1s"), request(Command::Period, "1 1s")];
    let shadow = AllRequest { shadow: 0b10, ..all_of(limits, false) };
    for detached in [false, true] {
        let mut slots = vec![None, None];
        let go = |slots: &mut Vec<Option<PackedLimiter>>| {
            if detached {
                run_all_detached(slots, &shadow, T0).unwrap()
            } else {
                run_all(slots, &shadow, T0).unwrap()
            }
        };
        // First call: both admit and both take.
        let v = go(&mut slots);
        assert_eq!(v.details.to_vec(), vec![[1, 2, 1, 0, 1000], [1, 1, 0, 0, 1000]]);
        assert_eq!(v.head[0], 1);
        // Second: the shadow key refuses, the call is admitted, the shadow key unchanged and
        // never binding (index 1 is the enforced key).
        let v = go(&mut slots);
        assert_eq!(v.head, [1, 2, 0, 0, 1000, 1]);
        assert_eq!(v.details.get(1).copied(), Some([0, 1, 0, 1000, 1000]));
        assert!(matches!(v.changes.get(1), Some(Change::Unchanged)));
        let used = describe_key(slots[1].as_ref(), T0).unwrap().fields;
        assert!(used.contains(&("used", 1)), "{used:?}");
        // Third: the enforced key refuses; nothing changes.
        let v = go(&mut slots);
        assert_eq!(v.head, [0, 2, 0, 1000, 1000, 1]);
        assert!(!v.changed());
    }
}

#[test]
fn every_group_shadow_is_always_admitted() {
    let limits = vec![request(Command::Token, "1 1 1s")];
    let all = AllRequest { shadow: 1, ..all_of(limits, false) };
    let mut slots = vec![None];
    assert_eq!(run_all(&mut slots, &all, T0).unwrap().head[0], 1);
    let v = run_all(&mut slots, &all, T0).unwrap();
    assert_eq!(v.head[0], 1);
    assert_eq!(v.details.get(0).map(|d| d[0]), Some(0));
}
