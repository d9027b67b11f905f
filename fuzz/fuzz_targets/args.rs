//! Command arguments: the input is split on 0x00 bytes into arguments (an empty input is no
//! argument at all) and fed to every parser the commands use: `parse_options` with every
//! keyword, `parse_duration`, the `RL.TOKEN` / `RL.PERIOD` / `RL.SLIDE` / `RL.LEAKY`
//! positional arguments and option sets, `CL.THROTTLE`'s `parse_throttle_args`, and the
//! parameter constructors. Properties: nothing panics, parsed options stay within their
//! bounds (`COST` ≤ 10^12, `AT` in `0..=MAX_AT_MS`), and a parameter set the parsers accept
//! can be evaluated on a fresh limiter, giving a state that validates and round-trips
//! through the codec. Mirrors `fuzz_argument_parsing` in `src/core/fuzz_tests.rs`.

#![no_main]


use libfuzzer_sys::fuzz_target;
use ratelimit_core::args::{
    parse_count, parse_duration, parse_options, Keyword, Options, MAX_AT_MS, MAX_COUNT,
};
use ratelimit_core::codec::{decode, encode};
use ratelimit_core::error::ArgError;
use ratelimit_core::gcra::{parse_throttle_args, GcraState};
use ratelimit_core::leaky::{LeakMode, LeakyBucket, LeakyParams};
use ratelimit_core::limiter::{judge, Variant};
use ratelimit_core::period::{PeriodParams, PeriodWindow};
use ratelimit_core::slide::{SlideParams, SlideState};
use ratelimit_core::token::{TokenBucket, TokenParams};

/// `ratelimit.slide-log-max` at its default.
const SLIDE_LOG_MAX: u64 = 100_000;
/// The instant a call without `AT` is evaluated at.
const NOW_MS: i64 = 1_700_000_000_000;

fuzz_target!(|data: &[u8]| {
    let args: Vec<&[u8]> =
        if data.is_empty() { Vec::new() } else { data.split(|b| *b == 0).collect() };

    // As `fuzz_argument_parsing`: every keyword allowed.
    if let Ok(o) = parse_options(&args, &Keyword::ALL) {
        check_options(&o);
        // Parameter constructors are total on whatever the parser lets through.
        let p = parse_duration("period", args.first().copied().unwrap_or(b"1")).unwrap_or(1000);
        let _ = TokenParams::new(o.cost.max(1), 1, p, o.step);
        let _ = PeriodParams::new(o.cost.max(1), p, o.align_offset_ms);
        let _ = SlideParams::new(o.cost.max(1), p, o.buckets, SLIDE_LOG_MAX);
        let _ = LeakyParams::new(o.cost.max(1), 1, p, LeakMode::Delay(o.delay.unwrap_or(0)));
    }

    // Each command's own parsing (the arguments after the key), as `src/shell/commands.rs`.
    let _ = token(&args);
    let _ = period(&args);
    let _ = slide(&args);
    let _ = leaky(&args);
    if let Ok(t) = parse_throttle_args(&args) {
        check_options(&t.options);
        assert!(t.quantity <= MAX_COUNT);
        run::<GcraState>(&t.params, &Options { cost: t.quantity, ..t.options });
    }
});

fn check_options(o: &Options) {
    assert!(o.cost <= MAX_COUNT, "{o:?}");
    assert!(o.at_ms.is_none_or(|t| (0..=MAX_AT_MS).contains(&t)), "{o:?}");
    assert!(!(o.no_delay && o.delay.is_some()), "{o:?}");
}

/// Evaluates one call on a fresh limiter: an admitted call's state must validate and
/// round-trip through the codec, and the next call (same instant) must stay consistent.
fn run<V: Variant>(params: &V::Params, o: &Options) {
    let now = o.at_ms.unwrap_or(NOW_MS);
    let first = judge::<V>(None, params, now, o.cost);
    assert!(first.decision.remaining <= first.decision.limit, "{:?}", first.decision);
    let Some(state) = first.next else { return };
    let limiter = state.into_limiter();
    assert_eq!(limiter.validate(), Ok(()));
    assert_eq!(decode(&encode(&limiter)).as_ref(), Ok(&limiter));
    let peek = limiter.peek(now);
    assert!(peek.remaining <= peek.limit, "{peek:?}");
    let state = V::from_limiter(&limiter).expect("same algorithm");
    let second = judge::<V>(Some(state), params, now, o.cost);
    assert!(second.decision.remaining <= second.decision.limit, "{:?}", second.decision);
    if let Some(next) = second.next {
        assert_eq!(next.validate(), Ok(()));
    }
}

/// `RL.TOKEN key capacity rate period [COST n] [STEP] [DRYRUN] [AT ms]`
fn token(args: &[&[u8]]) -> Result<(), ArgError> {
    let [capacity, rate, period, rest @ ..] = args else { return Err(ArgError::WrongArity) };
    let capacity = parse_count("capacity", capacity, 1, MAX_COUNT)?;
    let rate = parse_count("rate", rate, 1, MAX_COUNT)?;
    let period_ms = parse_duration("period", period)?;
    let options =
        parse_options(rest, &[Keyword::Cost, Keyword::Step, Keyword::DryRun, Keyword::At])?;
    check_options(&options);
    let params = TokenParams::new(capacity, rate, period_ms, options.step)?;
    run::<TokenBucket>(&params, &options);
    Ok(())
}

/// `RL.PERIOD key limit period [COST n] [ALIGN [utc-offset]] [DRYRUN] [AT ms]`
fn period(args: &[&[u8]]) -> Result<(), ArgError> {
    let [limit, period, rest @ ..] = args else { return Err(ArgError::WrongArity) };
    let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
    let period_ms = parse_duration("period", period)?;
    let options =
        parse_options(rest, &[Keyword::Cost, Keyword::Align, Keyword::DryRun, Keyword::At])?;
    check_options(&options);
    let params = PeriodParams::new(limit, period_ms, options.align_offset_ms)?;
    run::<PeriodWindow>(&params, &options);
    Ok(())
}

/// `RL.SLIDE key limit window [COST n] [BUCKETS b] [DRYRUN] [AT ms]`
fn slide(args: &[&[u8]]) -> Result<(), ArgError> {
    let [limit, window, rest @ ..] = args else { return Err(ArgError::WrongArity) };
    let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
    let window_ms = parse_duration("window", window)?;
    let options =
        parse_options(rest, &[Keyword::Cost, Keyword::Buckets, Keyword::DryRun, Keyword::At])?;
    check_options(&options);
    let params = SlideParams::new(limit, window_ms, options.buckets, SLIDE_LOG_MAX)?;
    run::<SlideState>(&params, &options);
    Ok(())
}

/// `RL.LEAKY key capacity rate period [COST n] [NODELAY | DELAY d] [DRYRUN] [AT ms]`
fn leaky(args: &[&[u8]]) -> Result<(), ArgError> {
    let [capacity, rate, period, rest @ ..] = args else { return Err(ArgError::WrongArity) };
    let capacity = parse_count("capacity", capacity, 1, MAX_COUNT)?;
    let rate = parse_count("rate", rate, 1, MAX_COUNT)?;
    let period_ms = parse_duration("period", period)?;
    let allowed = [Keyword::Cost, Keyword::NoDelay, Keyword::Delay, Keyword::DryRun, Keyword::At];
    let options = parse_options(rest, &allowed)?;
    check_options(&options);
    let mode = if options.no_delay {
        LeakMode::NoDelay
    } else {
        LeakMode::Delay(options.delay.unwrap_or(0))
    };
    let params = LeakyParams::new(capacity, rate, period_ms, mode)?;
    run::<LeakyBucket>(&params, &options);
    Ok(())
}
