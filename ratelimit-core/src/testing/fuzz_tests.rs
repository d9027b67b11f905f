//! Fuzzers for the two places untrusted bytes enter: command arguments and the state decoder
//! (RDB, `RESTORE`, `RL.RESTORE`). These are proptest-driven and run in `cargo test`: random
//! and mutated inputs, 10 000 cases each by default (`PROPTEST_CASES=1000000 cargo test fuzz`
//! for a long run). The coverage-guided libFuzzer targets for the same two entry points, with
//! the same properties, live in `fuzz/` (built on the stable toolchain by `fuzz/run.sh`; run by
//! `make fuzz`, part of `make test`; cargo-fuzz can run them too). Properties: nothing panics;
//! whatever decodes validates, re-encodes byte for byte, and can be evaluated, peeked and
//! described at any instant.

use proptest::prelude::*;

use crate::algorithms::gcra::{self, parse_throttle_args};
use crate::algorithms::leaky::{self, LeakMode, LeakyParams};
use crate::algorithms::limiter::Limiter;
use crate::algorithms::period::{self, PeriodParams};
use crate::algorithms::slide::{self, SlideParams};
use crate::algorithms::token::{self, TokenParams};
use crate::grammar::args::{parse_duration, parse_options, Keyword, MAX_AT_MS, MAX_COUNT};
use crate::grammar::request::{AllRequest, Command, Request};
use crate::steps::inspect::peek_key;
use crate::steps::judge::{judge_all, judge_key, Change};
use crate::steps::refund::refund_key;
use crate::store::codec::{decode, decode_value, encode, encode_value};
use crate::store::packed::PackedLimiter;

const ALL_KEYWORDS: [Keyword; Keyword::ALL.len()] = Keyword::ALL;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

/// Tokens that steer the parser into its interesting branches, mixed with random bytes.
fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "COST", "cost", "DRYRUN", "AT", "STEP", "ALIGN", "BUCKETS", "NODELAY", "DELAY", "0",
            "1", "-1", "+8h", "-5h", "1000000000000", "1000000000001", "253402300799999", "1s",
            "3650d", "3651d", "1.5", "", "\u{ff}", "TOKEN", "PERIOD", "SLIDE", "LEAKY", "2", "10", "ID", "WAIT", "FRESH", "fresh", "BAN", "ANCHOR", "FLOOR", "floor", "KEEPPERIOD", "keepperiod", "CLEAR", "clear",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
        1 => (0u64..=u64::MAX).prop_map(|n| n.to_string().into_bytes()),
    ]
}

/// One admitted state of every algorithm and mode, to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let t = 1_700_000_000_000;
    let mut out = Vec::new();
    for step in [false, true] {
        let p = TokenParams::new(10, 3, 7, step).unwrap();
        out.push(Limiter::Token(token::evaluate(None, &p, t, 4).next.unwrap()));
    }
    for align in [None, Some(-5 * 3_600_000)] {
        let p = PeriodParams::new(5, 86_400_000, align).unwrap();
        out.push(Limiter::Period(period::evaluate(None, &p, t, 2).next.unwrap()));
    }
    for mode in [LeakMode::Delay(2), LeakMode::NoDelay] {
        let p = LeakyParams::new(10, 3, 7, mode).unwrap();
        out.push(Limiter::Leaky(leaky::evaluate(None, &p, t, 4).next.unwrap()));
    }
    let g = gcra::GcraParams::new(15, 30, 60).unwrap();
    out.push(Limiter::Gcra(gcra::evaluate(None, &g, t, 3).next.unwrap()));
    for (buckets, anchor, floor) in [
        (None, false, false),
        (Some(10), false, false),
        (Some(4), true, true),
        (Some(4), false, true),
    ] {
        let p =
            SlideParams::new(10, 1000, buckets, 100).unwrap().with_options(anchor, floor).unwrap();
        let mut state = None;
        for (dt, cost) in [(0, 2), (5, 1), (300, 3), (999, 1)] {
            if let Some(next) = slide::evaluate(state.as_ref(), &p, t + dt, cost).next {
                state = Some(next);
            }
        }
        out.push(Limiter::Slide(state.unwrap()));
    }
    // Leases: a server id, a binary id, a renewal with another lease duration.
    let lp = crate::algorithms::lease::LeaseParams::new(3, 100, 10).unwrap();
    let mut leases = crate::algorithms::lease::acquire(None, &lp, t, None, true).next.unwrap();
    for (dt, id) in [(5, &b"b\x00\xff"[..]), (9, b"b\x00\xff")] {
        let p = crate::algorithms::lease::LeaseParams { lease_ms: 80 + dt as u64, ..lp };
        leases = crate::algorithms::lease::acquire(Some(&leases), &p, t + dt, Some(id), true)
            .next
            .unwrap();
    }
    out.push(Limiter::Lease(leases));
    let mut encoded: Vec<Vec<u8>> = out.iter().map(encode).collect();
    // A banned limiter, and one refunded away during its ban (format version 2).
    let ban = crate::algorithms::ban::Ban::start(t, 3_600_000);
    encoded.push(encode_value(&out[0], Some(ban)));
    encoded.push(encode_value(
        &out[1],
        Some(crate::algorithms::ban::Ban { limiter_fresh: true, ..ban }),
    ));
    encoded
}

/// A seed with random byte edits, insertions and truncation.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let edits = proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 0..6);
    (0..seeds().len(), edits, any::<usize>()).prop_map(|(i, edits, cut)| {
        let mut bytes = seeds().swap_remove(i);
        for (pos, byte, kind) in edits {
            let at = pos % (bytes.len() + 1);
            match kind {
                0 if at < bytes.len() => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => {}
            }
        }
        if cut % 4 == 0 {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        bytes
    })
}

fn exercise(limiter: &Limiter, now: i64) {
    assert_eq!(limiter.validate(), Ok(()));
    assert_eq!(decode(&encode(limiter)).as_ref(), Ok(limiter));
    let d = limiter.peek(now);
    assert!(d.remaining <= d.limit);
    let _ = limiter.describe();
    let _ = limiter.reset_at_ms();
    let _ = limiter.heap_bytes();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_argument_parsing(args in proptest::collection::vec(token(), 0..10)) {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        if let Ok(o) = parse_options(&refs, &ALL_KEYWORDS) {
            prop_assert!(o.cost <= MAX_COUNT);
            prop_assert!(o.at_ms.is_none_or(|t| (0..=MAX_AT_MS).contains(&t)));
            // Parameter constructors are total on whatever the parser lets through.
            let p = parse_duration("period", refs.first().copied().unwrap_or(b"1")).unwrap_or(1000);
            let _ = TokenParams::new(o.cost.max(1), 1, p, o.step);
            let _ = PeriodParams::new(o.cost.max(1), p, o.align_offset_ms);
            let _ = SlideParams::new(o.cost.max(1), p, o.buckets, 100_000);
            let _ = LeakyParams::new(o.cost.max(1), 1, p, LeakMode::Delay(o.delay.unwrap_or(0)));
        }
        let _ = parse_throttle_args(&refs);
        // Every command's real grammar: what parses can be judged on a fresh key and again
        // on the key it left.
        for command in Command::ALL {
            if let Ok(request) = Request::parse(command, &refs, 100_000) {
                prop_assert!(request.cost <= MAX_COUNT);
                let now = request.at_ms.unwrap_or(1_700_000_000_000);
                let first = judge_key(None::<&mut crate::store::packed::PackedLimiter>, &request, now).unwrap();
                if let Change::Created { limiter, .. } = first.change {
                    exercise(&limiter, now);
                    let mut packed = PackedLimiter::new(limiter);
                    prop_assert!(judge_key(Some(&mut packed), &request, now).is_ok());
                }
            }
        }
        if let Ok(acquire) = crate::grammar::request::AcquireRequest::parse(&refs, 10_000) {
            let now = acquire.at_ms.unwrap_or(1_700_000_000_000);
            let first = crate::steps::lease_key::acquire_key(None::<&mut crate::store::packed::PackedLimiter>, &acquire, now).unwrap();
            if let Change::Created { limiter, .. } = first.change {
                exercise(&limiter, now);
                let mut packed = PackedLimiter::new(limiter);
                prop_assert!(crate::steps::lease_key::acquire_key(Some(&mut packed), &acquire, now).is_ok());
            }
        }
        if let Ok(release) = crate::grammar::request::ReleaseRequest::parse(&refs) {
            prop_assert!(crate::algorithms::lease::valid_id(&release.id));
        }
        if let Ok((definition, _)) = crate::features::policy::Definition::parse(&refs, 100_000) {
            let request = definition.request(&[]).unwrap();
            let now = 1_700_000_000_000;
            let first = judge_key(None::<&mut crate::store::packed::PackedLimiter>, &request, now).unwrap();
            if let Change::Created { limiter, .. } = first.change {
                exercise(&limiter, now);
            }
            let mut table = crate::features::policy::PolicyTable::new();
            table.set(b"p", crate::features::policy::Target::Policy, definition, 1).unwrap();
            prop_assert_eq!(crate::features::policy::PolicyTable::decode(&table.encode()), Ok(table));
        }
        if let Ok(all) = AllRequest::parse(&refs, 100_000) {
            prop_assert_eq!(all.limits.len(), all.key_count);
            let held = (0..all.key_count).map(|_| None::<&mut PackedLimiter>);
            let verdict = judge_all(held, &all, all.at_ms.unwrap_or(1_700_000_000_000)).unwrap();
            prop_assert_eq!(verdict.details.len(), all.key_count);
        }
    }

    #[test]
    fn fuzz_decoder_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..120), now in 0i64..=MAX_AT_MS) {
        if let Ok((limiter, ban)) = decode_value(&bytes) {
            prop_assert_eq!(encode_value(&limiter, ban), bytes);
            exercise(&limiter, now);
        }
    }

    #[test]
    fn fuzz_decoder_on_mutated_states(bytes in mutated(), now in 0i64..=MAX_AT_MS) {
        if let Ok((limiter, ban)) = decode_value(&bytes) {
            prop_assert_eq!(encode_value(&limiter, ban), bytes);
            exercise(&limiter, now);
            let mut packed = PackedLimiter::with_ban(limiter, ban);
            let _ = peek_key(Some(&packed), now);
            let _ = refund_key(Some(&mut packed), 1, now);
            let lp = crate::algorithms::lease::LeaseParams::new(2, 50, 10).unwrap();
            let _ = crate::steps::lease_key::acquire_parts(Some(&mut packed), &lp, None, true, now);
            let _ = crate::steps::lease_key::release_id(Some(&mut packed), b"b\x00\xff", now);
        }
    }
}
