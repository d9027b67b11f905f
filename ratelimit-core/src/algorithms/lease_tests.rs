//! Leases against a brute-force reference (a list of `(id, expires)` scanned ms by ms), id
//! generation across lifetimes and replicas, exact retry/reset, parsing, validation, codec and
//! packed round trips.

use proptest::prelude::*;

use super::*;
use crate::algorithms::limiter::Limiter;
use crate::grammar::error::ArgError;
use crate::grammar::request::{AcquireRequest, ReleaseRequest};
use crate::store::codec::{decode, encode};
use crate::store::packed::PackedLimiter;

const T0: i64 = 1_700_000_000_000;

fn params(limit: u64, lease_ms: u64) -> LeaseParams {
    LeaseParams::new(limit, lease_ms, DEFAULT_LEASE_MAX).unwrap()
}

/// Drives a key like the shell: stores what an admitted call returns, deletes on an emptied
/// release. Every acquisition runs both the copying and the in-place path and checks they
/// agree; every stored state validates and round-trips through the codec and packed form.
#[derive(Debug, Default)]
struct Key {
    state: Option<LeaseState>,
}

impl Key {
    fn acquire(
        &mut self,
        p: &LeaseParams,
        now: i64,
        id: Option<&[u8]>,
        commit: bool,
    ) -> AcquireOutcome {
        let out = acquire(self.state.as_ref(), p, now, id, commit);
        assert_eq!(out.next.is_some(), out.decision.allowed && commit);
        assert_eq!(out.id.is_some(), out.next.is_some());
        if let Some(s) = &self.state {
            let mut copy = s.clone();
            let (d, id2, changed) = acquire_in_place(&mut copy, p, now, id, commit);
            assert_eq!(d, out.decision);
            assert_eq!(id2, out.id);
            assert_eq!(changed, out.next.is_some());
            match &out.next {
                Some(n) => assert_eq!(&copy, n),
                None => assert_eq!(&copy, s),
            }
        }
        if let Some(n) = &out.next {
            check_stored(n);
            let now2 = crate::algorithms::state::live(self.state.as_ref(), now)
                .map_or(now, |s| now.max(s.updated_ms));
            assert_eq!(n.updated_ms, now2);
            assert_eq!(n.reset_at_ms() - now2, out.decision.reset_after_ms);
            self.state = Some(n.clone());
        }
        out
    }

    fn release(&mut self, now: i64, id: &[u8]) -> bool {
        let Some(s) = &self.state else {
            return false;
        };
        match release(s, now, id) {
            Release::NotHeld => false,
            Release::Released(next) => {
                if let Some(n) = &next {
                    check_stored(n);
                }
                self.state = next;
                true
            }
        }
    }
}

fn check_stored(s: &LeaseState) {
    s.validate().unwrap_or_else(|e| panic!("{e}: {s:?}"));
    let limiter = Limiter::Lease(s.clone());
    assert_eq!(decode(&encode(&limiter)), Ok(limiter.clone()));
    let packed = PackedLimiter::new(limiter.clone());
    assert_eq!(packed.view(Limiter::clone), limiter);
    assert_eq!(packed.clone().into_limiter(), limiter);
}

/// The reference: leases as a plain list, every time found by scanning.
#[derive(Debug, Clone, Default)]
struct Model {
    /// `(id, expires)`, unordered.
    leases: Vec<(Vec<u8>, i64)>,
    created: i64,
    seq: u64,
    limit: u64,
    lease_ms: u64,
    updated: i64,
}

fn model_live(m: &Option<Model>, now: i64) -> Option<&Model> {
    m.as_ref().filter(|m| m.leases.iter().any(|l| l.1 > now))
}

fn model_acquire(
    m: &mut Option<Model>,
    p: &LeaseParams,
    now: i64,
    id: Option<&[u8]>,
    commit: bool,
) -> (Decision, Option<Vec<u8>>) {
    let live = model_live(m, now).cloned();
    let now2 = live.as_ref().map_or(now, |s| now.max(s.updated));
    let held: Vec<(Vec<u8>, i64)> =
        live.as_ref().map_or(vec![], |s| s.leases.iter().filter(|l| l.1 > now2).cloned().collect());
    let count_at = |t: i64| held.iter().filter(|l| l.1 > t).count() as u64;
    let renew = id.is_some_and(|id| held.iter().any(|l| l.0 == id));
    let last = held.iter().map(|l| l.1).max().unwrap_or(now2);
    if !renew && held.len() as u64 >= p.limit {
        let mut t = now2;
        while count_at(t) >= p.limit {
            t += 1;
        }
        let d = Decision {
            allowed: false,
            limit: p.limit,
            remaining: 0,
            retry_after_ms: t - now2,
            reset_after_ms: last - now2,
        };
        return (d, None);
    }
    let (created, seq) = live.as_ref().map_or((now2, 0), |s| (s.created, s.seq));
    let (new_id, new_seq) = match id {
        None => (format!("{created}-{}", seq + 1).into_bytes(), seq + 1),
        Some(id) => {
            let text = String::from_utf8_lossy(id).to_string();
            let n = text
                .strip_prefix(&format!("{created}-"))
                .and_then(|rest| rest.parse::<u64>().ok())
                .filter(|n| format!("{created}-{n}").as_bytes() == id);
            (id.to_vec(), n.map_or(seq, |n| n.max(seq)))
        }
    };
    let expires = now2 + p.lease_ms as i64;
    let mut leases: Vec<_> = held.iter().filter(|l| Some(l.0.as_slice()) != id).cloned().collect();
    leases.push((new_id.clone(), expires));
    let reset = leases.iter().map(|l| l.1).max().unwrap() - now2;
    let d = Decision {
        allowed: true,
        limit: p.limit,
        remaining: p.limit.saturating_sub(leases.len() as u64),
        retry_after_ms: 0,
        reset_after_ms: reset,
    };
    if !commit {
        return (d, None);
    }
    *m = Some(Model {
        leases,
        created,
        seq: new_seq,
        limit: p.limit,
        lease_ms: p.lease_ms,
        updated: now2,
    });
    (d, Some(new_id))
}

fn model_release(m: &mut Option<Model>, now: i64, id: &[u8]) -> bool {
    let Some(live) = model_live(m, now).cloned() else {
        return false;
    };
    let now2 = now.max(live.updated);
    if !live.leases.iter().any(|l| l.0 == id && l.1 > now2) {
        return false;
    }
    let leases: Vec<_> = live.leases.into_iter().filter(|l| l.0 != id && l.1 > now2).collect();
    *m = (!leases.is_empty()).then_some(Model { leases, updated: now2, ..live });
    true
}

fn same_state(got: Option<&LeaseState>, want: &Option<Model>) -> Result<(), TestCaseError> {
    match (got, want) {
        (None, None) => Ok(()),
        (Some(g), Some(w)) => {
            let mut a: Vec<(Vec<u8>, i64)> = g.leases().map(|(id, at)| (id.to_vec(), at)).collect();
            let mut b = w.leases.clone();
            a.sort();
            b.sort();
            prop_assert_eq!(a, b);
            prop_assert_eq!(
                (g.created_ms, g.seq, g.limit, g.lease_ms, g.updated_ms),
                (w.created, w.seq, w.limit, w.lease_ms, w.updated)
            );
            Ok(())
        }
        (g, w) => Err(TestCaseError::fail(format!("state {g:?} vs model {w:?}"))),
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `id`: 0 none, 1..=3 fixed names, 4.. `<created>-<k>` for this lifetime.
    Acquire {
        limit: u64,
        lease_ms: u64,
        id: u8,
        dry: bool,
    },
    Release {
        id: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..5, 1u64..60, 0u8..9, prop::bool::weighted(0.15))
            .prop_map(|(limit, lease_ms, id, dry)| Op::Acquire { limit, lease_ms, id, dry }),
        1 => (1u8..9).prop_map(|id| Op::Release { id }),
    ]
}

fn id_of(code: u8, created: i64) -> Option<Vec<u8>> {
    match code {
        0 => None,
        1 => Some(b"a".to_vec()),
        2 => Some(b"b\x00\xff".to_vec()),
        3 => Some(format!("{created}-07").into_bytes()),
        k => Some(format!("{created}-{}", u64::from(k) - 3).into_bytes()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Every reply, id and state equals the reference over random traffic: with and without
    /// ids, renewals, releases, lapses, parameter changes and the clock going backwards; every
    /// refusal's retry is exact (admitted then, refused one ms earlier).
    #[test]
    fn matches_the_reference(steps in proptest::collection::vec((op(), -30i64..40), 1..60)) {
        let mut key = Key::default();
        let mut model: Option<Model> = None;
        let mut now = T0;
        for (op, gap) in steps {
            now = (now + gap).max(0);
            let created = model_live(&model, now).map_or(now, |m| m.created);
            match op {
                Op::Acquire { limit, lease_ms, id, dry } => {
                    let p = params(limit, lease_ms);
                    let id = id_of(id, created);
                    let got = key.acquire(&p, now, id.as_deref(), !dry);
                    let (d, want_id) = model_acquire(&mut model, &p, now, id.as_deref(), !dry);
                    prop_assert_eq!(got.decision, d);
                    prop_assert_eq!(got.id.map(|i| i.to_vec()), want_id);
                    if !d.allowed {
                        let now2 = key.state.as_ref().map_or(now, |s| now.max(s.updated_ms));
                        let at = |t| acquire(key.state.as_ref(), &p, t, id.as_deref(), false).decision.allowed;
                        prop_assert!(at(now2 + d.retry_after_ms));
                        prop_assert!(!at(now2 + d.retry_after_ms - 1));
                    }
                }
                Op::Release { id } => {
                    let id = id_of(id, created).unwrap();
                    prop_assert_eq!(key.release(now, &id), model_release(&mut model, now, &id));
                }
            }
            same_state(key.state.as_ref().filter(|s| s.reset_at_ms() > now), &model_live(&model, now).cloned())?;
            if let Some(s) = &key.state {
                let peek = s.peek(now);
                prop_assert!(peek.remaining <= peek.limit);
            }
        }
    }

    /// Generated ids are unique within a lifetime, whatever explicit ids come in between.
    #[test]
    fn server_ids_are_unique_within_a_lifetime(steps in proptest::collection::vec((0u8..9, 0i64..5), 1..80)) {
        let p = params(100, 1_000_000);
        let mut key = Key::default();
        let mut seen = std::collections::HashSet::new();
        let mut now = T0;
        for (code, gap) in steps {
            now += gap;
            let created = key.state.as_ref().map_or(now, |s| s.created_ms);
            let id = id_of(code, created);
            let out = key.acquire(&p, now, id.as_deref(), true);
            if id.is_none() {
                if let Some(new) = out.id {
                    prop_assert!(seen.insert(new), "reissued {:?}", String::from_utf8_lossy(&new));
                }
            } else if let Some(given) = out.id {
                seen.insert(given);
            }
        }
    }
}

#[test]
fn server_ids_across_lifetimes() {
    let p = params(3, 100);
    let mut key = Key::default();
    let ids: Vec<Vec<u8>> =
        (0..3).map(|i| key.acquire(&p, T0 + i, None, true).id.unwrap().to_vec()).collect();
    assert_eq!(
        ids,
        [format!("{T0}-1"), format!("{T0}-2"), format!("{T0}-3")].map(String::into_bytes)
    );
    assert!(!key.acquire(&p, T0 + 3, None, true).decision.allowed);
    for id in &ids {
        assert!(key.release(T0 + 5, id));
    }
    assert!(key.state.is_none());
    // A new lifetime, a new prefix.
    assert_eq!(
        key.acquire(&p, T0 + 7, None, true).id.unwrap(),
        format!("{}-1", T0 + 7).into_bytes()
    );
    // Lapsing ends a lifetime too.
    assert_eq!(
        key.acquire(&p, T0 + 7 + 100, None, true).id.unwrap(),
        format!("{}-1", T0 + 107).into_bytes()
    );
}

#[test]
fn explicit_ids_of_the_server_form_advance_the_sequence() {
    let p = params(10, 100);
    let mut key = Key::default();
    key.acquire(&p, T0, None, true);
    // Non-canonical forms and other prefixes do not count.
    for id in [format!("{T0}-07"), format!("{T0}-+9"), format!("{}-9", T0 + 1), format!("{T0}-0")] {
        key.acquire(&p, T0, Some(id.as_bytes()), true);
    }
    assert_eq!(key.state.as_ref().unwrap().seq, 1);
    key.acquire(&p, T0, Some(format!("{T0}-7").as_bytes()), true);
    assert_eq!(key.acquire(&p, T0, None, true).id.unwrap(), format!("{T0}-8").into_bytes());
    // A lower one changes nothing.
    key.acquire(&p, T0, Some(format!("{T0}-3").as_bytes()), true);
    assert_eq!(key.acquire(&p, T0, None, true).id.unwrap(), format!("{T0}-9").into_bytes());
}

/// A replica (or an AOF replay) sees every admitted call with its id and `AT now'`: it reaches
/// the primary's exact state, and a promoted replica continues the sequence.
#[test]
fn replicas_replaying_explicit_ids_continue_the_sequence() {
    let p = params(4, 50);
    let mut primary = Key::default();
    let mut replica = Key::default();
    let mut now = T0;
    for step in 0..200i64 {
        now += [3, 0, 17, -5, 40][(step % 5) as usize];
        if step % 7 == 3 {
            if let Some(id) =
                primary.state.as_ref().and_then(|s| s.leases().next().map(|(id, _)| id.to_vec()))
            {
                let at = primary.state.as_ref().map_or(now, |s| now.max(s.updated_ms));
                if primary.release(now, &id) {
                    assert!(replica.release(at, &id));
                }
            }
        } else {
            let at = primary
                .state
                .as_ref()
                .filter(|s| s.reset_at_ms() > now)
                .map_or(now, |s| now.max(s.updated_ms));
            let out = primary.acquire(&p, now, None, true);
            if let Some(id) = out.id {
                let copy = replica.acquire(&p, at, Some(&id), true);
                assert_eq!(copy.decision, out.decision);
            }
        }
        assert_eq!(primary.state, replica.state, "step {step}");
    }
    // Promoted: the replica issues the next id the primary would have.
    let a = primary.acquire(&p, now + 1, None, true);
    let b = replica.acquire(&p, now + 1, None, true);
    assert_eq!(a.id, b.id);
}

#[test]
fn renewal_is_admitted_over_the_limit_and_retry_follows_a_lowered_limit() {
    let mut key = Key::default();
    for (i, id) in [b"a", b"b", b"c", b"d", b"e"].iter().enumerate() {
        assert!(key.acquire(&params(5, 100), T0 + i as i64 * 10, Some(*id), true).decision.allowed);
    }
    // Expiries T0+100, 110, 120, 130, 140; limit lowered to 2 at T0+50: 5 held, the 4th
    // earliest lapse (T0+130) brings held to 1 < 2.
    let refused = key.acquire(&params(2, 100), T0 + 50, None, true).decision;
    assert_eq!(
        (refused.allowed, refused.remaining, refused.retry_after_ms, refused.reset_after_ms),
        (false, 0, 80, 90)
    );
    let renew = key.acquire(&params(2, 10), T0 + 50, Some(b"a"), true).decision;
    assert_eq!((renew.allowed, renew.remaining, renew.reset_after_ms), (true, 0, 90));
    // The shorter lease applies to the renewal only: a lapses at T0+60.
    let s = key.state.as_ref().unwrap();
    assert_eq!(s.leases().next(), Some((&b"a"[..], T0 + 60)));
    assert_eq!(s.info_fields(), vec![("limit", 2), ("lease_ms", 10), ("held", 5)]);
    let now = T0 + 60;
    let d = key.acquire(&params(2, 10), now, None, false).decision;
    assert_eq!(d.retry_after_ms, 130 - 60);
    assert!(!key.acquire(&params(2, 10), T0 + 129, None, false).decision.allowed);
    assert!(key.acquire(&params(2, 10), T0 + 130, None, false).decision.allowed);
}

#[test]
fn time_going_backwards_counts_as_no_time_passed() {
    let p = params(1, 100);
    let mut key = Key::default();
    key.acquire(&p, T0 + 50, Some(b"x"), true);
    let d = key.acquire(&p, T0, None, true).decision;
    assert_eq!((d.allowed, d.retry_after_ms, d.reset_after_ms), (false, 100, 100));
    // A renewal from the past renews from now' = updated_ms.
    key.acquire(&p, T0, Some(b"x"), true);
    assert_eq!(key.state.as_ref().unwrap().leases().next(), Some((&b"x"[..], T0 + 150)));
    // A release from the past keeps updated_ms.
    key.acquire(&params(2, 100), T0 + 60, Some(b"y"), true);
    assert!(key.release(T0, b"y"));
    assert_eq!(key.state.as_ref().unwrap().updated_ms, T0 + 60);
}

#[test]
fn an_exhausted_sequence_waits_for_the_next_lifetime() {
    let p = params(5, 100);
    let mut key = Key::default();
    let max = format!("{T0}-{}", u64::MAX);
    assert!(key.acquire(&p, T0, Some(max.as_bytes()), true).decision.allowed);
    assert_eq!(key.state.as_ref().unwrap().seq, u64::MAX);
    let d = key.acquire(&p, T0 + 10, None, true).decision;
    assert_eq!((d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms), (false, 4, 90, 90));
    assert!(key.acquire(&p, T0 + 10, Some(b"mine"), true).decision.allowed);
    assert_eq!(
        key.acquire(&p, T0 + 110, None, true).id.unwrap(),
        format!("{}-1", T0 + 110).into_bytes()
    );
}

#[test]
fn dry_runs_and_refusals_change_nothing() {
    let p = params(1, 100);
    let mut key = Key::default();
    let dry = key.acquire(&p, T0, None, false);
    assert_eq!((dry.decision.to_reply(), dry.id), ([1, 1, 0, 0, 100], None));
    assert!(key.state.is_none());
    key.acquire(&p, T0, None, true);
    let before = key.state.clone();
    let refused = key.acquire(&params(1, 5), T0 + 1, Some(b"other"), true);
    assert_eq!(refused.decision.to_reply(), [0, 1, 0, 99, 99]);
    assert_eq!(key.state, before);
    assert!(!key.release(T0 + 1, b"other"));
    assert_eq!(key.state.as_ref().unwrap().peek(T0 + 1).to_reply(), [0, 1, 0, 99, 99]);
    // Invalid ids are refused, never stored.
    assert_eq!(acquire(None, &p, T0, Some(b""), true).decision.retry_after_ms, -1);
    assert!(acquire(None, &p, T0, Some(&[b'x'; 65]), true).next.is_none());
}

#[test]
fn parameters_are_checked() {
    assert!(LeaseParams::new(10_000, 1, DEFAULT_LEASE_MAX).is_ok());
    assert_eq!(
        LeaseParams::new(10_001, 1, DEFAULT_LEASE_MAX).unwrap_err().to_string(),
        "ERR limit 10001 is above ratelimit.lease-max (10000) for leases"
    );
    assert!(LeaseParams::new(1_000_000, 1, u64::MAX).is_ok());
    assert!(LeaseParams::new(1_000_001, 1, u64::MAX).is_err());
    assert!(LeaseParams::new(0, 1, DEFAULT_LEASE_MAX).is_err());
    assert!(LeaseParams::new(1, 0, DEFAULT_LEASE_MAX).is_err());
    assert!(
        LeaseParams::new(1, crate::grammar::args::MAX_DURATION_MS + 1, DEFAULT_LEASE_MAX).is_err()
    );
}

fn parse_acquire(args: &[&[u8]]) -> Result<AcquireRequest, ArgError> {
    AcquireRequest::parse(args, DEFAULT_LEASE_MAX)
}

#[test]
fn acquire_arguments_parse() {
    let r = parse_acquire(&[b"10", b"30s", b"id", b"job\x00\xff", b"dryrun", b"At", b"5"]).unwrap();
    assert_eq!(r.params, params(10, 30_000));
    assert_eq!(r.id.as_deref(), Some(&b"job\x00\xff"[..]));
    assert!(r.dry_run);
    assert_eq!((r.at_ms, r.wait_ms), (Some(5), None));
    let r = parse_acquire(&[b"1", b"1", b"WAIT", b"0"]).unwrap();
    assert_eq!(r.wait_ms, Some(0));
    assert_eq!(parse_acquire(&[b"1", b"1", b"wait", b"2s"]).unwrap().wait_ms, Some(2000));
    let err = |args: &[&[u8]]| parse_acquire(args).unwrap_err().to_string();
    assert_eq!(err(&[b"1"]), "ERR wrong number of arguments");
    assert_eq!(err(&[b"1", b"1", b"ID", b""]), "ERR ID must be 1 to 64 bytes");
    assert_eq!(err(&[b"1", b"1", b"ID", &[b'x'; 65]]), "ERR ID must be 1 to 64 bytes");
    assert!(parse_acquire(&[b"1", b"1", b"ID", &[b'x'; 64]]).is_ok());
    assert_eq!(err(&[b"1", b"1", b"ID"]), "ERR syntax error: ID needs a value");
    assert_eq!(
        err(&[b"1", b"1", b"ID", b"a", b"id", b"b"]),
        "ERR syntax error: option ID given more than once"
    );
    assert_eq!(err(&[b"1", b"1", b"COST", b"1"]), "ERR syntax error: unknown option 'COST'");
    let wait_at: [&[u8]; 6] = [b"1", b"1", b"WAIT", b"1", b"AT", b"1"];
    let wait_dry: [&[u8]; 5] = [b"1", b"1", b"DRYRUN", b"WAIT", b"1"];
    for bad in [&wait_at[..], &wait_dry[..]] {
        assert_eq!(err(bad), "ERR syntax error: WAIT cannot be combined with AT or DRYRUN");
    }
    assert_eq!(
        err(&[b"1", b"1", b"WAIT", b"-1"]),
        "ERR WAIT must be a duration between 0ms and 315360000000ms"
    );
    assert!(err(&[b"1", b"1", b"WAIT", b"x"]).starts_with("ERR invalid duration 'x' for WAIT"));
    assert_eq!(err(&[b"0", b"1"]), "ERR limit must be an integer between 1 and 1000000000000");
    assert!(err(&[b"1", b"0"]).starts_with("ERR lease must be a duration"));
    assert!(err(&[b"20000", b"1"]).contains("ratelimit.lease-max"));
}

#[test]
fn release_arguments_parse() {
    assert_eq!(
        ReleaseRequest::parse(&[b"x", b"AT", b"7"]),
        Ok(ReleaseRequest { id: LeaseId::new(b"x").unwrap(), at_ms: Some(7) })
    );
    assert_eq!(ReleaseRequest::parse(&[]), Err(ArgError::WrongArity));
    assert_eq!(
        ReleaseRequest::parse(&[b""]).unwrap_err().to_string(),
        "ERR ID must be 1 to 64 bytes"
    );
    assert!(ReleaseRequest::parse(&[b"x", b"DRYRUN"]).is_err());
}

proptest! {
    #[test]
    fn parsers_never_panic(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..70), 0..8)) {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        if let Ok(r) = parse_acquire(&refs) {
            prop_assert!(r.id.as_deref().is_none_or(valid_id));
            prop_assert!(r.wait_ms.is_none() || (!r.dry_run && r.at_ms.is_none()));
        }
        if let Ok(r) = ReleaseRequest::parse(&refs) {
            prop_assert!(valid_id(&r.id));
        }
    }
}

/// A state's leases as `(id, expires_ms)` pairs.
type Parts = Vec<(Vec<u8>, i64)>;

fn sample() -> LeaseState {
    let mut key = Key::default();
    key.acquire(&params(3, 100), T0, None, true);
    key.acquire(&params(3, 100), T0 + 5, Some(b"b\x00\xff"), true);
    key.acquire(&params(3, 80), T0 + 9, None, true);
    key.state.unwrap()
}

#[test]
fn validation_refuses_what_no_call_produces() {
    let s = sample();
    assert_eq!(s.validate(), Ok(()));
    let parts = |s: &LeaseState| -> Vec<(Vec<u8>, i64)> {
        s.leases().map(|(id, at)| (id.to_vec(), at)).collect()
    };
    let rebuilt = |f: &dyn Fn(&mut Parts)| {
        let mut l = parts(&s);
        f(&mut l);
        LeaseState::from_parts(s.limit, s.lease_ms, s.created_ms, s.seq, s.updated_ms, l)
    };
    assert_eq!(rebuilt(&|_| {}), s);
    assert!(rebuilt(&|l| l.reverse()).validate().is_err());
    assert!(rebuilt(&|l| l[1].0 = l[0].0.clone()).validate().is_err());
    assert!(rebuilt(&|l| l.clear()).validate().is_err());
    assert!(rebuilt(&|l| l[0].0 = vec![]).validate().is_err());
    assert!(rebuilt(&|l| l[0].1 = s.updated_ms).validate().is_err());
    assert!(rebuilt(&|l| l[2].0 = format!("{T0}-3").into_bytes()).validate().is_err());
    let with = |limit, seq, created| {
        LeaseState::from_parts(limit, s.lease_ms, created, seq, s.updated_ms, parts(&s))
    };
    assert!(with(0, s.seq, s.created_ms).validate().is_err());
    assert!(with(MAX_LEASE_MAX + 1, s.seq, s.created_ms).validate().is_err());
    assert!(with(s.limit, 1, s.created_ms).validate().is_err());
    assert!(with(s.limit, s.seq, s.updated_ms + 1).validate().is_err());
    assert_eq!(s.heap_bytes(), 3 * 24 + 15 + 3 + 15);
}

#[test]
fn codec_round_trips_and_refuses_damage() {
    let limiter = Limiter::Lease(sample());
    let bytes = encode(&limiter);
    assert_eq!(decode(&bytes), Ok(limiter.clone()));
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "truncated at {n}");
    }
    let banned = crate::store::codec::encode_value(
        &limiter,
        Some(crate::algorithms::ban::Ban::start(T0, 10)),
    );
    assert!(decode(&banned).is_err());
    assert!(crate::store::codec::decode_value(&banned).is_err());
    let packed = PackedLimiter::new(limiter.clone());
    assert!(packed.heap_bytes() > sample().heap_bytes());
    assert_eq!(packed.into_limiter(), limiter);
}

#[test]
fn limiter_reports_leases() {
    let s = sample();
    let limiter = Limiter::Lease(s.clone());
    assert_eq!(limiter.algorithm().name(), "lease");
    assert_eq!(limiter.reset_at_ms(), T0 + 105);
    assert_eq!(limiter.peek(T0 + 9).to_reply(), [0, 3, 0, 80, 96]);
    assert_eq!(limiter.peek(T0 + 100).to_reply(), [1, 3, 1, 0, 80]);
    let described =
        crate::steps::inspect::describe_key(Some(&PackedLimiter::new(limiter.clone())), T0 + 50)
            .unwrap();
    assert_eq!(described.leases.unwrap().len(), 3);
    assert_eq!(crate::steps::inspect::peek_key(Some(&PackedLimiter::new(limiter)), T0 + 200), None);
}

#[test]
fn lease_ids_are_held_by_value() {
    for (created, n) in [(0, 1), (T0, 7), (i64::MAX, u64::MAX), (-5, 10), (i64::MIN, 1)] {
        let id = LeaseId::server(created, n);
        assert_eq!(&*id, format!("{created}-{n}").as_bytes());
        assert_eq!(sequence_number(created, &id), Some(n));
    }
    assert_eq!(sequence_number(T0, format!("{}-3", T0 + 1).as_bytes()), None);
    assert_eq!(sequence_number(10, b"1-3"), None);
    assert!(LeaseId::new(b"").is_none());
    assert!(LeaseId::new(&[7; MAX_ID_LEN + 1]).is_none());
    let long = LeaseId::new(&[0xff; MAX_ID_LEN]).unwrap();
    assert_eq!(&*long, &[0xff; MAX_ID_LEN][..]);
    assert_eq!(LeaseId::new(b"job\x00").unwrap(), b"job\x00".to_vec());
}

/// The lease array grows by doubling and gives memory back once three quarters are unused;
/// `heap_bytes` (`MEMORY USAGE`) counts what is allocated.
#[test]
fn lease_capacity_is_amortized_and_counted() {
    let p = params(1000, 1_000_000);
    let mut state = acquire(None, &p, T0, Some(b"a"), true).next.unwrap();
    let ids: Vec<Vec<u8>> = (0..100).map(|i| format!("w{i}").into_bytes()).collect();
    let mut grows = 0;
    for (i, id) in ids.iter().enumerate() {
        let before = state.leases.capacity();
        acquire_in_place(&mut state, &p, T0 + i as i64, Some(id), true);
        grows += usize::from(state.leases.capacity() != before);
        assert!(state.leases.capacity() >= state.leases.len());
    }
    assert!(grows <= 8, "{grows} reallocations for 100 acquisitions");
    let ids_bytes: usize = state.leases().map(|(id, _)| id.len()).sum();
    assert_eq!(state.heap_bytes(), state.leases.capacity() * 24 + ids_bytes);
    let full = state.leases.capacity();
    // Acquiring and releasing one lease again and again moves no memory.
    for i in 0..10 {
        acquire_in_place(&mut state, &p, T0 + 200 + i, Some(b"x"), true);
        assert_eq!(release_in_place(&mut state, T0 + 200 + i, b"x"), ReleaseChange::Released);
        assert_eq!(state.leases.capacity(), full);
    }
    for (i, id) in ids.iter().enumerate().skip(1) {
        assert_eq!(release_in_place(&mut state, T0 + 300 + i as i64, id), ReleaseChange::Released);
        assert!(state.leases.len() * 4 > state.leases.capacity() || state.leases.capacity() <= 2);
    }
    assert!(state.leases.capacity() <= 4);
    check_stored(&state);
}

/// `find_id` finds every lease at its index whatever the count (whole chunks of four and the
/// remainder), and nothing for an id not held, of the same length or not.
#[test]
fn find_id_finds_every_position() {
    for n in 0..11 {
        let leases: Vec<Lease> = (0..n)
            .map(|i| Lease {
                expires_ms: T0 + i as i64,
                id: format!("id{i:02}").into_bytes().into(),
            })
            .collect();
        for (i, lease) in leases.iter().enumerate() {
            assert_eq!(find_id(&leases, &lease.id), Some(i), "{n} leases");
        }
        assert_eq!(find_id(&leases, b"id99"), None);
        assert_eq!(find_id(&leases, b"id0"), None);
    }
}
