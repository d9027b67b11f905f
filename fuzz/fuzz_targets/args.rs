//! Command arguments: the input is split on 0x00 bytes into arguments (an empty input is no
//! argument at all) and fed to the one real parser of every limiting command
//! (`Request::parse` for `RL.TOKEN`, `RL.PERIOD`, `RL.SLIDE`, `RL.LEAKY`, `CL.THROTTLE`: the
//! arguments after the key) and to `parse_options` with every keyword. Properties: nothing
//! panics, parsed options stay within their bounds (`COST` ≤ 10^12, `AT` in
//! `0..=MAX_AT_MS`), `RL.ALL`'s grammar (`AllRequest::parse`) likewise, and a request the
//! parser accepts can be judged on a fresh key and again
//! on the key it left (as the module does), giving a state that validates and round-trips
//! through the codec; a policy definition (`RL.POLICY SET`) likewise, and the policy table's
//! codec round-trips; the parsers of whole calls (`RL.POLICY`, `RL.HIT`, `RL.TOP`, `RL.PEEK`,
//! `RL.INFO`, `RL.RESTORE`) accept only counts their arity allows. Mirrors `fuzz_argument_parsing` in `ratelimit-core/src/testing/fuzz_tests.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelimit_core::algorithms::leaky::{LeakMode, LeakyParams};
use ratelimit_core::algorithms::period::PeriodParams;
use ratelimit_core::algorithms::slide::SlideParams;
use ratelimit_core::algorithms::token::TokenParams;
use ratelimit_core::features::policy::{Definition, PolicyTable, SetTarget, Target};
use ratelimit_core::grammar::args::{
    parse_duration, parse_options, Keyword, Options, MAX_AT_MS, MAX_COUNT,
};
use ratelimit_core::grammar::arity::{self, Arity};
use ratelimit_core::grammar::inspect::{KeyRequest, RestoreRequest};
use ratelimit_core::grammar::policy::{hit_options, HitRequest, PolicyRequest};
use ratelimit_core::grammar::request::{
    AcquireRequest, AllRequest, Command, RefundRequest, ReleaseRequest, Request,
};
use ratelimit_core::grammar::top::{TopRequest, MAX_ROWS};
use ratelimit_core::steps::inspect::peek_key;
use ratelimit_core::steps::judge::{judge_all, judge_key, Change, Verdict};
use ratelimit_core::steps::lease_key::{acquire_key, release_id, ReleaseChange};
use ratelimit_core::steps::refund::refund_key;
use ratelimit_core::store::codec::{decode, encode};
use ratelimit_core::store::packed::PackedLimiter;

/// `ratelimit.slide-log-max` at its default.
const SLIDE_LOG_MAX: u64 = 1_000_000;
/// The instant a call without `AT` is evaluated at.
const NOW_MS: i64 = 1_700_000_000_000;

fuzz_target!(|data: &[u8]| {
    let args: Vec<&[u8]> =
        if data.is_empty() { Vec::new() } else { data.split(|b| *b == 0).collect() };

    // Every keyword allowed: the option grammar on its own.
    if let Ok(o) = parse_options(&args, &Keyword::ALL) {
        check_options(&o);
        // Parameter constructors are total on whatever the parser lets through.
        let p = parse_duration("period", args.first().copied().unwrap_or(b"1")).unwrap_or(1000);
        let _ = TokenParams::new(o.cost.max(1), 1, p, o.step);
        let _ = PeriodParams::new(o.cost.max(1), p, o.align_offset_ms);
        let _ = SlideParams::new(o.cost.max(1), p, o.buckets, SLIDE_LOG_MAX);
        let _ = LeakyParams::new(o.cost.max(1), 1, p, LeakMode::Delay(o.delay.unwrap_or(0)));
    }

    // Each command's own grammar, through the parser the module runs.
    for command in Command::ALL {
        if let Ok(request) = Request::parse(command, &args, SLIDE_LOG_MAX) {
            run(&request);
        }
    }
    // `RL.REFUND`'s grammar, and a refund of what it names on a limiter every command left.
    if let Ok(refund) = RefundRequest::parse(&args) {
        assert!((1..=MAX_COUNT).contains(&refund.count), "{refund:?}");
        for command in Command::ALL {
            let positional: &[&[u8]] = match command {
                Command::Period | Command::Slide => &[b"5", b"7"],
                _ => &[b"5", b"2", b"7"],
            };
            let Ok(parsed) = Request::parse(command, positional, SLIDE_LOG_MAX) else {
                panic!("a valid reservation for {command:?}")
            };
            let reservation = Request { cost: 3, ..parsed };
            let now = refund.at_ms.unwrap_or(NOW_MS);
            if let Ok(Verdict { change: Change::Created { limiter, .. }, .. }) =
                judge_key(None::<&mut PackedLimiter>, &reservation, now)
            {
                let mut packed = PackedLimiter::new(limiter);
                let verdict = refund_key(Some(&mut packed), refund.count, now);
                assert!(verdict.reply.is_some_and(|r| r[2] <= r[1]), "{verdict:?}");
                packed.view(|l| assert_eq!(l.validate(), Ok(())));
            }
        }
    }
    // `RL.ACQUIRE` / `RL.RELEASE`: what parses is judged on a fresh key and released again.
    if let Ok(acquire) = AcquireRequest::parse(&args, 10_000) {
        let now = acquire.at_ms.unwrap_or(NOW_MS);
        let verdict = acquire_key(None::<&mut PackedLimiter>, &acquire, now).expect("an empty key");
        if let (Change::Created { limiter, .. }, Some(id)) = (verdict.change, verdict.id) {
            assert_eq!(limiter.validate(), Ok(()));
            let mut packed = PackedLimiter::new(limiter);
            assert_eq!(release_id(Some(&mut packed), &id, now), Ok(ReleaseChange::Deleted));
        }
    }
    if let Ok(release) = ReleaseRequest::parse(&args) {
        assert!((1..=64).contains(&release.id.len()), "{release:?}");
    }
    // `RL.ALL`'s grammar (everything after the command name).
    if let Ok(all) = AllRequest::parse(&args, SLIDE_LOG_MAX) {
        run_all(&all);
    }
    // `RL.POLICY SET name …`'s definition: what parses is judged by `RL.HIT`, and a table
    // holding it round-trips through the persistence codec.
    if let Ok((definition, key)) = Definition::parse(&args, SLIDE_LOG_MAX) {
        if let Ok(request) = definition.request(&[]) {
            run(&request);
        }
        let mut table = PolicyTable::new();
        let target = SetTarget::target(&key);
        if table.set(b"p", Target::Policy, definition.clone(), 10).is_ok()
            && (target == Target::Policy || table.set(b"p", target, definition, 10).is_ok())
        {
            assert_eq!(PolicyTable::decode(&table.encode()).as_ref(), Ok(&table));
        }
    }
    // The parsers of whole calls (the command's name first): `RL.POLICY`'s subcommands,
    // `RL.HIT`, `RL.TOP`, `RL.PEEK`, `RL.INFO`, `RL.RESTORE`, each within its arity.
    check_calls(&args);
    // RDB aux data: whatever decodes encodes back to a table that decodes the same.
    if let Ok(table) = PolicyTable::decode(data) {
        assert_eq!(PolicyTable::decode(&table.encode()).as_ref(), Ok(&table));
    }
});

/// Judges an `RL.ALL` request on fresh keys, then again on the keys it left.
fn run_all(all: &AllRequest) {
    assert!((1..=16).contains(&all.key_count) && all.limits.len() == all.key_count, "{all:?}");
    let now = all.at_ms.unwrap_or(NOW_MS);
    let mut slots: Vec<Option<PackedLimiter>> = (0..all.key_count).map(|_| None).collect();
    for _ in 0..2 {
        let held: Vec<Option<&mut PackedLimiter>> = slots.iter_mut().map(Option::as_mut).collect();
        let verdict = judge_all(held, all, now).expect("every key holds its own limit");
        assert!((1..=all.key_count as i64).contains(&verdict.head[5]), "{verdict:?}");
        assert_eq!(verdict.details.len(), all.key_count);
        for (slot, change) in slots.iter_mut().zip(&verdict.changes) {
            if let Change::Created { limiter, .. } = change {
                assert_eq!(limiter.validate(), Ok(()));
                *slot = Some(PackedLimiter::new(limiter.clone()));
            }
        }
    }
}

/// What a whole-call parser accepts has the count its arity allows and bounded values.
fn check_calls(args: &[&[u8]]) {
    let fits = |arity: Arity| arity.check(args.len()).is_ok();
    if let Ok(request) = PolicyRequest::parse(args) {
        assert!(args.len() >= 2, "{request:?}");
    }
    if let Ok(hit) = HitRequest::parse(args) {
        assert!(fits(arity::HIT));
        if let Ok(options) = hit_options(hit.options) {
            check_options(&options);
        }
    }
    if let Ok(TopRequest::Read { count, .. }) = TopRequest::parse(args) {
        assert!((1..=MAX_ROWS as usize).contains(&count), "{count}");
    }
    if KeyRequest::parse_peek(args).is_ok() || KeyRequest::parse_info(args).is_ok() {
        assert!(fits(arity::PEEK) && fits(arity::INFO));
    }
    if RestoreRequest::parse(args).is_ok() {
        assert!(fits(arity::RESTORE));
    }
}

fn check_options(o: &Options) {
    assert!(o.cost <= MAX_COUNT, "{o:?}");
    assert!(o.at_ms.is_none_or(|t| (0..=MAX_AT_MS).contains(&t)), "{o:?}");
    assert!(!(o.no_delay && o.delay.is_some()), "{o:?}");
}

/// Judges the request on a fresh key, then again (same instant) on the key it left: an
/// admitted call's state must validate and round-trip through the codec.
fn run(request: &Request) {
    assert!(request.cost <= MAX_COUNT, "{request:?}");
    assert!(request.at_ms.is_none_or(|t| (0..=MAX_AT_MS).contains(&t)), "{request:?}");
    let now = request.at_ms.unwrap_or(NOW_MS);
    let Ok(first) = judge_key(None::<&mut PackedLimiter>, request, now) else {
        panic!("an empty key refused")
    };
    let Change::Created { limiter, .. } = first.change else { return };
    assert_eq!(limiter.validate(), Ok(()));
    assert_eq!(decode(&encode(&limiter)).as_ref(), Ok(&limiter));
    let mut packed = PackedLimiter::new(limiter);
    let peek = peek_key(Some(&packed), now);
    assert!(peek.is_none_or(|r| r[2] <= r[1]), "{peek:?}");
    let second = judge_key(Some(&mut packed), request, now).expect("same algorithm");
    assert!(second.reply.iter().all(|v| *v >= -1), "{second:?}");
    packed.view(|l| assert_eq!(l.validate(), Ok(())));
}
