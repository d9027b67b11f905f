//! Argument parsing shared by every command: counts, durations, and the option keywords.
//!
//! Arguments arrive as raw byte strings (binary safe, possibly invalid UTF-8); nothing here
//! panics on any input. Bounds are the README's ("Arguments").

use crate::grammar::error::ArgError;

/// Largest count (`limit`, `capacity`, `rate`, `COST`, …): 10^12.
pub const MAX_COUNT: u64 = 1_000_000_000_000;
/// Longest period or window: 10 years of 365 days, in ms.
pub const MAX_DURATION_MS: u64 = 3650 * DAY_MS;
/// Latest instant `AT` accepts: 9999-12-31T23:59:59.999Z in unix ms.
pub const MAX_AT_MS: i64 = 253_402_300_799_999;
/// Longest full reset time a parameter combination may have: 100 years of 365 days, in ms.
pub const MAX_RESET_MS: u128 = 36_500 * DAY_MS as u128;
/// Most sub-windows `BUCKETS` accepts.
pub const MAX_BUCKETS: u64 = 1000;

const SECOND_MS: u64 = 1000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

/// Parses a strict decimal integer: an optional `-` or `+` and 1 to 30 ASCII digits.
pub fn parse_int(bytes: &[u8]) -> Option<i128> {
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 30 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i128, |acc, d| acc * 10 + i128::from(d - b'0'));
    Some(if negative { -magnitude } else { magnitude })
}

/// Parses an integer argument named `name` that must lie in `min..=max`.
#[inline]
pub fn parse_count(name: &'static str, bytes: &[u8], min: u64, max: u64) -> Result<u64, ArgError> {
    // The common case, plain digits in range, without 128-bit arithmetic: 19 digits fit a u64.
    if !bytes.is_empty() && bytes.len() <= 19 {
        let mut value: u64 = 0;
        let mut digits = true;
        for &b in bytes {
            let digit = b.wrapping_sub(b'0');
            digits &= digit <= 9;
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
        }
        if digits && (min..=max).contains(&value) {
            return Ok(value);
        }
    }
    let range_error = || ArgError::Integer { name, min: i128::from(min), max: i128::from(max) };
    let value = parse_int(bytes).ok_or_else(range_error)?;
    u64::try_from(value).ok().filter(|v| (min..=max).contains(v)).ok_or_else(range_error)
}

/// Parses a signed duration `[+|-]<integer>[ms|s|m|h|d]` (unit case-insensitive, bare = ms)
/// into milliseconds, without range checks beyond what fits in `i128`.
pub fn parse_signed_duration(name: &'static str, bytes: &[u8]) -> Result<i128, ArgError> {
    let invalid = || ArgError::InvalidDuration { name, value: bytes.to_vec() };
    let digits_end = bytes
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'-' || *b == b'+'))
        .unwrap_or(bytes.len());
    let (number, unit) = bytes.split_at(digits_end);
    const UNITS: [(&[u8], u64); 6] = [
        (b"", 1),
        (b"ms", 1),
        (b"s", SECOND_MS),
        (b"m", MINUTE_MS),
        (b"h", HOUR_MS),
        (b"d", DAY_MS),
    ];
    let multiplier = UNITS
        .iter()
        .find(|(name, _)| unit.eq_ignore_ascii_case(name))
        .map(|(_, ms)| *ms)
        .ok_or_else(invalid)?;
    let value = parse_int(number).ok_or_else(invalid)?;
    value.checked_mul(i128::from(multiplier)).ok_or_else(invalid)
}

/// The common case of a duration, in 64-bit arithmetic: 1 to 15 plain digits and a unit
/// (`None` for anything else, which [`parse_signed_duration`] then judges).
#[inline]
fn plain_duration(bytes: &[u8]) -> Option<u64> {
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 15 {
        return None;
    }
    let (number, unit) = bytes.split_at(digits);
    let multiplier = match unit {
        b"" => 1,
        [m, s] if m.eq_ignore_ascii_case(&b'm') && s.eq_ignore_ascii_case(&b's') => 1,
        [u] => match u.to_ascii_lowercase() {
            b's' => SECOND_MS,
            b'm' => MINUTE_MS,
            b'h' => HOUR_MS,
            b'd' => DAY_MS,
            _ => return None,
        },
        _ => return None,
    };
    let value = number.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    value.checked_mul(multiplier)
}

/// Parses a period or window: a duration of 1 ms … 10 years.
pub fn parse_duration(name: &'static str, bytes: &[u8]) -> Result<u64, ArgError> {
    if let Some(ms) = plain_duration(bytes).filter(|v| (1..=MAX_DURATION_MS).contains(v)) {
        return Ok(ms);
    }
    let ms = parse_signed_duration(name, bytes)?;
    u64::try_from(ms).ok().filter(|v| (1..=MAX_DURATION_MS).contains(v)).ok_or_else(|| {
        ArgError::DurationRange { name, min_ms: 1, max_ms: i128::from(MAX_DURATION_MS) }
    })
}

/// Parses a timeout: a duration of 0 ms … 10 years (0: no limit).
pub fn parse_timeout(name: &'static str, bytes: &[u8]) -> Result<u64, ArgError> {
    if let Some(ms) = plain_duration(bytes).filter(|v| *v <= MAX_DURATION_MS) {
        return Ok(ms);
    }
    let ms = parse_signed_duration(name, bytes)?;
    u64::try_from(ms).ok().filter(|v| *v <= MAX_DURATION_MS).ok_or_else(|| {
        ArgError::DurationRange { name, min_ms: 0, max_ms: i128::from(MAX_DURATION_MS) }
    })
}

/// Parses an `AT` instant: unix ms in `0..=MAX_AT_MS`.
pub fn parse_instant(name: &'static str, bytes: &[u8]) -> Result<i64, ArgError> {
    let error = || ArgError::Integer { name, min: 0, max: i128::from(MAX_AT_MS) };
    let value = parse_int(bytes).ok_or_else(error)?;
    i64::try_from(value).ok().filter(|v| (0..=MAX_AT_MS).contains(v)).ok_or_else(error)
}

/// A call whose `DEADLINE` had passed when the server ran it: it changed nothing. Rendered as
/// the error `DEADLINE the caller gave up <n> ms ago; nothing was counted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlinePassed {
    /// How long before the server ran the call its deadline passed, in ms (at least 1).
    pub late_ms: i64,
}

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DEADLINE the caller gave up {} ms ago; nothing was counted", self.late_ms)
    }
}

/// Judges a call's `DEADLINE` against the server's clock `server_now_ms` (never `AT`: the
/// deadline is about when the call runs, not the instant it is evaluated at). A call runs
/// while the clock is at or before its deadline; past it, it must change nothing.
#[inline]
pub fn check_deadline(deadline_ms: Option<i64>, server_now_ms: i64) -> Result<(), DeadlinePassed> {
    match deadline_ms {
        Some(deadline) if server_now_ms > deadline => {
            Err(DeadlinePassed { late_ms: server_now_ms.saturating_sub(deadline) })
        }
        _ => Ok(()),
    }
}

/// How long a call that may wait (`WAIT timeout`, ms, 0 = no limit) may wait at most given its
/// deadline, at `server_now_ms` (the deadline not yet passed): a waiter never outlives its
/// caller. `None`: it may not wait at all (the deadline is now).
pub fn wait_within_deadline(
    wait_ms: u64,
    deadline_ms: Option<i64>,
    server_now_ms: i64,
) -> Option<u64> {
    let Some(deadline) = deadline_ms else {
        return Some(wait_ms);
    };
    let left = u64::try_from(deadline.saturating_sub(server_now_ms)).unwrap_or(0);
    match (wait_ms, left) {
        (_, 0) => None,
        (0, left) => Some(left),
        (wait, left) => Some(wait.min(left)),
    }
}

/// The option keywords a command may accept after its positional arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    /// `COST n`: permits this request takes (0 … 10^12, default 1).
    Cost,
    /// `DRYRUN`: evaluate and reply, change nothing.
    DryRun,
    /// `AT unix-ms`: evaluate at this instant instead of the server clock.
    At,
    /// `STEP`: token bucket refills `rate` tokens at once at each period boundary.
    Step,
    /// `ALIGN [utc-offset]`: fixed windows aligned to calendar boundaries.
    Align,
    /// `BUCKETS b`: sliding window approximated with `b` sub-window counters.
    Buckets,
    /// `NODELAY`: leaky bucket as a meter; admitted requests proceed at once.
    NoDelay,
    /// `DELAY d`: leaky bucket tolerates `d` units of water ahead without delay.
    Delay,
    /// `BAN duration`: a request the algorithm refuses locks the key out for `duration`.
    Ban,
    /// `WAIT timeout`: block until admitted, in arrival order, at most `timeout` (0: no limit).
    Wait,
    /// `FRESH`: judge the request against a fresh limiter with the call's parameters, as if the
    /// key were missing; an admitted request replaces whatever the key holds for this
    /// algorithm (state, log, ban).
    Fresh,
    /// `ANCHOR`: with `BUCKETS`, the sub-window grid starts at the first admitted call.
    Anchor,
    /// `FLOOR`: with `BUCKETS`, the estimate is rounded down before it is compared.
    Floor,
    /// `KEEPPERIOD` (fixed window): while a window is in force, the call is judged with the
    /// stored period and alignment; the call's period only starts a new window.
    KeepPeriod,
    /// `CLEAR` (with `BAN d`): the request that starts a ban also clears the limiter, which is
    /// fresh when the ban ends.
    Clear,
    /// `DEADLINE unix-ms`: the instant (the caller's clock) after which the caller no longer
    /// waits for the answer; a call the server runs later changes nothing and is refused
    /// ([`check_deadline`]).
    Deadline,
    /// `ATMOST n` (instead of `COST n`): take what is left, up to `n` permits — admitted when
    /// at least one permit is left (redis_rate's `AllowAtMost`).
    AtMost,
}

impl Keyword {
    /// Every keyword, in a fixed order.
    pub const ALL: [Keyword; 17] = [
        Keyword::Cost,
        Keyword::DryRun,
        Keyword::At,
        Keyword::Step,
        Keyword::Align,
        Keyword::Buckets,
        Keyword::NoDelay,
        Keyword::Delay,
        Keyword::Ban,
        Keyword::Wait,
        Keyword::Fresh,
        Keyword::Anchor,
        Keyword::Floor,
        Keyword::KeepPeriod,
        Keyword::Clear,
        Keyword::Deadline,
        Keyword::AtMost,
    ];

    /// The keyword as users write it (matched case-insensitively).
    pub fn name(self) -> &'static str {
        match self {
            Keyword::Cost => "COST",
            Keyword::DryRun => "DRYRUN",
            Keyword::At => "AT",
            Keyword::Step => "STEP",
            Keyword::Align => "ALIGN",
            Keyword::Buckets => "BUCKETS",
            Keyword::NoDelay => "NODELAY",
            Keyword::Delay => "DELAY",
            Keyword::Ban => "BAN",
            Keyword::Wait => "WAIT",
            Keyword::Fresh => "FRESH",
            Keyword::Anchor => "ANCHOR",
            Keyword::Floor => "FLOOR",
            Keyword::KeepPeriod => "KEEPPERIOD",
            Keyword::Clear => "CLEAR",
            Keyword::Deadline => "DEADLINE",
            Keyword::AtMost => "ATMOST",
        }
    }

    /// The keyword `token` spells, if any.
    pub fn recognize(token: &[u8]) -> Option<Keyword> {
        Self::ALL.into_iter().find(|k| token.eq_ignore_ascii_case(k.name().as_bytes()))
    }
}

/// The options of one call, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub cost: u64,
    pub dry_run: bool,
    pub at_ms: Option<i64>,
    pub step: bool,
    /// `Some(offset_ms)` when `ALIGN` was given (a bare `ALIGN` means offset 0).
    pub align_offset_ms: Option<i64>,
    pub buckets: Option<u64>,
    pub no_delay: bool,
    pub delay: Option<u64>,
    /// `BAN duration` in ms (1 ms … 10 years).
    pub ban_ms: Option<u64>,
    /// `WAIT timeout` in ms (0 … 10 years; 0 waits without limit).
    pub wait_ms: Option<u64>,
    /// `FRESH`: judge against a fresh limiter, replacing what the key holds when admitted.
    pub fresh: bool,
    /// `ANCHOR` (with `BUCKETS`): the grid starts at the first admitted call.
    pub anchor: bool,
    /// `FLOOR` (with `BUCKETS`): the estimate is rounded down before it is compared.
    pub floor: bool,
    /// `KEEPPERIOD`: a window in force keeps its stored period and alignment.
    pub keep_period: bool,
    /// `CLEAR`: a ban this request starts also clears the limiter (needs `BAN`; checked by the
    /// command's parser, so that `RL.ALL` can refuse it as an unknown option).
    pub clear: bool,
    /// `DEADLINE unix-ms`: the caller gives up on the answer after this instant.
    pub deadline_ms: Option<i64>,
    /// `ATMOST n`: `cost` holds `n`, the most the request takes; it takes what is left up to
    /// that (see `judge::resolve_at_most`).
    pub at_most: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cost: 1,
            dry_run: false,
            at_ms: None,
            step: false,
            align_offset_ms: None,
            buckets: None,
            no_delay: false,
            delay: None,
            ban_ms: None,
            wait_ms: None,
            fresh: false,
            anchor: false,
            floor: false,
            keep_period: false,
            clear: false,
            deadline_ms: None,
            at_most: false,
        }
    }
}

/// Parses the option keywords after a command's positional arguments. Keywords are
/// case-insensitive, may come in any order, each at most once; only those in `allowed` are
/// accepted. Range checks that depend on other parameters (an `ALIGN` offset shorter than
/// the period, `DELAY` at most the capacity) are left to the algorithm's parameter checks.
///
/// Inline: most calls carry no option, and they then cost no call.
#[inline]
pub fn parse_options(args: &[&[u8]], allowed: &[Keyword]) -> Result<Options, ArgError> {
    if args.is_empty() {
        return Ok(Options::default());
    }
    parse_given_options(args, allowed)
}

/// [`parse_options`] when there are arguments.
fn parse_given_options(args: &[&[u8]], allowed: &[Keyword]) -> Result<Options, ArgError> {
    let mut options = Options::default();
    // Keywords seen so far, one bit each (no allocation on the hot path).
    let mut seen: u32 = 0;
    let mut rest = args.iter();
    while let Some(token) = rest.next() {
        let keyword = Keyword::recognize(token)
            .filter(|k| allowed.contains(k))
            .ok_or_else(|| ArgError::UnknownOption(token.to_vec()))?;
        let bit = 1u32 << (keyword as u32);
        if seen & bit != 0 {
            return Err(ArgError::RepeatedOption(keyword.name()));
        }
        seen |= bit;
        let mut value = || rest.next().ok_or_else(|| ArgError::MissingValue(keyword.name()));
        match keyword {
            Keyword::Cost => options.cost = parse_count("COST", value()?, 0, MAX_COUNT)?,
            Keyword::DryRun => options.dry_run = true,
            Keyword::At => options.at_ms = Some(parse_instant("AT", value()?)?),
            Keyword::Step => options.step = true,
            Keyword::Buckets => {
                options.buckets = Some(parse_count("BUCKETS", value()?, 1, MAX_BUCKETS)?)
            }
            Keyword::NoDelay => options.no_delay = true,
            Keyword::Delay => options.delay = Some(parse_count("DELAY", value()?, 0, MAX_COUNT)?),
            Keyword::Ban => options.ban_ms = Some(parse_duration("BAN", value()?)?),
            Keyword::Wait => options.wait_ms = Some(parse_timeout("WAIT", value()?)?),
            Keyword::Fresh => options.fresh = true,
            Keyword::Anchor => options.anchor = true,
            Keyword::Floor => options.floor = true,
            Keyword::KeepPeriod => options.keep_period = true,
            Keyword::Clear => options.clear = true,
            Keyword::Deadline => options.deadline_ms = Some(parse_instant("DEADLINE", value()?)?),
            Keyword::AtMost => {
                options.cost = parse_count("ATMOST", value()?, 0, MAX_COUNT)?;
                options.at_most = true;
            }
            Keyword::Align => {
                // The offset is optional: a following keyword starts the next option.
                let offset = match rest.as_slice().first() {
                    Some(next) if Keyword::recognize(next).is_none() => {
                        rest.next();
                        parse_align_offset(next)?
                    }
                    _ => 0,
                };
                options.align_offset_ms = Some(offset);
            }
        }
    }
    if options.no_delay && options.delay.is_some() {
        return Err(ArgError::Conflict("NODELAY", "DELAY"));
    }
    if options.keep_period && options.align_offset_ms.is_some() {
        return Err(ArgError::Conflict("KEEPPERIOD", "ALIGN"));
    }
    if options.at_most {
        if seen & (1 << (Keyword::Cost as u16)) != 0 {
            return Err(ArgError::Conflict("ATMOST", "COST"));
        }
        if options.wait_ms.is_some() {
            return Err(ArgError::Conflict("ATMOST", "WAIT"));
        }
    }
    if options.wait_ms.is_some() && (options.at_ms.is_some() || options.dry_run) {
        return Err(ArgError::Invalid(
            "syntax error: WAIT cannot be combined with AT or DRYRUN".into(),
        ));
    }
    if options.wait_ms.is_some() && options.fresh {
        return Err(ArgError::Invalid(
            "syntax error: WAIT cannot be combined with FRESH (a fresh limiter admits a request \
             at once or never)"
                .into(),
        ));
    }
    Ok(options)
}

/// An `ALIGN` UTC offset: a signed duration within ±10 years (the algorithm further requires
/// |offset| < period).
fn parse_align_offset(bytes: &[u8]) -> Result<i64, ArgError> {
    let max = i128::from(MAX_DURATION_MS);
    let ms = parse_signed_duration("utc-offset", bytes)?;
    if !(-max..=max).contains(&ms) {
        return Err(ArgError::DurationRange { name: "utc-offset", min_ms: -max, max_ms: max });
    }
    i64::try_from(ms).map_err(|_| ArgError::DurationRange {
        name: "utc-offset",
        min_ms: -max,
        max_ms: max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: &[Keyword] = &Keyword::ALL;

    fn opts(args: &[&str]) -> Result<Options, ArgError> {
        let bytes: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        parse_options(&bytes, ALL)
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-12"), Some(-12));
        assert_eq!(parse_int(b"+7"), Some(7));
        assert_eq!(parse_int(b"007"), Some(7));
        for bad in [&b""[..], b"-", b"1.5", b" 1", b"1 ", b"1e3", b"0x10", b"\xff", b"--1"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(parse_int(&[b'9'; 31]), None);
    }

    #[test]
    fn counts_check_their_range() {
        assert_eq!(parse_count("capacity", b"10", 1, MAX_COUNT), Ok(10));
        assert_eq!(parse_count("capacity", b"1000000000000", 1, MAX_COUNT), Ok(MAX_COUNT));
        let err = ArgError::Integer { name: "capacity", min: 1, max: 1_000_000_000_000 };
        for bad in [
            &b"0"[..],
            b"-1",
            b"1000000000001",
            b"abc",
            b"\xfe\xff",
            b"",
            b"99999999999999999999999999",
        ] {
            assert_eq!(parse_count("capacity", bad, 1, MAX_COUNT), Err(err.clone()));
        }
    }

    #[test]
    fn durations_take_units() {
        for (text, ms) in [
            ("1500", 1500u64),
            ("1500ms", 1500),
            ("1500MS", 1500),
            ("2s", 2000),
            ("1m", 60_000),
            ("24h", 86_400_000),
            ("1d", 86_400_000),
            ("1D", 86_400_000),
            ("3650d", MAX_DURATION_MS),
        ] {
            assert_eq!(parse_duration("period", text.as_bytes()), Ok(ms), "{text}");
        }
        for bad in ["abc", "1x", "s", "1.5s", "1 s", "", "1ms2", "1sm", "ms"] {
            assert_eq!(
                parse_duration("period", bad.as_bytes()),
                Err(ArgError::InvalidDuration { name: "period", value: bad.as_bytes().to_vec() }),
                "{bad}"
            );
        }
        let range = ArgError::DurationRange { name: "period", min_ms: 1, max_ms: 315_360_000_000 };
        for out in ["0", "-1s", "3651d", "315360000001", "99999999999999999999d"] {
            let got = parse_duration("period", out.as_bytes());
            assert!(
                got == Err(range.clone()) || matches!(got, Err(ArgError::InvalidDuration { .. })),
                "{out}: {got:?}"
            );
        }
        assert_eq!(parse_duration("period", b"0"), Err(range));
    }

    #[test]
    fn deadline_is_an_instant_judged_on_the_server_clock() {
        let o = opts(&["DEADLINE", "1000", "at", "5"]).unwrap();
        assert_eq!((o.deadline_ms, o.at_ms), (Some(1000), Some(5)));
        assert_eq!(opts(&["DEADLINE"]), Err(ArgError::MissingValue("DEADLINE")));
        assert_eq!(
            opts(&["deadline", "1", "DEADLINE", "2"]),
            Err(ArgError::RepeatedOption("DEADLINE"))
        );
        for bad in ["-1", "x", "1.5", "253402300800000", ""] {
            assert_eq!(
                opts(&["DEADLINE", bad]),
                Err(ArgError::Integer { name: "DEADLINE", min: 0, max: i128::from(MAX_AT_MS) }),
                "{bad}"
            );
        }
        assert_eq!(check_deadline(None, 5), Ok(()));
        assert_eq!(check_deadline(Some(1000), 999), Ok(()));
        assert_eq!(check_deadline(Some(1000), 1000), Ok(()));
        assert_eq!(check_deadline(Some(1000), 1001), Err(DeadlinePassed { late_ms: 1 }));
        let late = check_deadline(Some(1000), 11_000).unwrap_err();
        assert_eq!(
            late.to_string(),
            "DEADLINE the caller gave up 10000 ms ago; nothing was counted"
        );
        assert_eq!(wait_within_deadline(500, None, 0), Some(500));
        assert_eq!(wait_within_deadline(0, None, 0), Some(0));
        assert_eq!(wait_within_deadline(500, Some(1200), 1000), Some(200));
        assert_eq!(wait_within_deadline(100, Some(1200), 1000), Some(100));
        assert_eq!(wait_within_deadline(0, Some(1200), 1000), Some(200));
        assert_eq!(wait_within_deadline(100, Some(1000), 1000), None);
    }

    #[test]
    fn instants_are_bounded() {
        assert_eq!(parse_instant("AT", b"0"), Ok(0));
        assert_eq!(parse_instant("AT", b"253402300799999"), Ok(MAX_AT_MS));
        assert!(parse_instant("AT", b"253402300800000").is_err());
        assert!(parse_instant("AT", b"-1").is_err());
    }

    #[test]
    fn options_any_order_case_insensitive() {
        let o = opts(&["dryrun", "at", "123", "Cost", "5", "STEP", "Fresh", "floor", "Anchor"])
            .unwrap();
        assert_eq!(o.cost, 5);
        assert!(o.dry_run && o.step && o.fresh && o.anchor && o.floor);
        assert_eq!(o.at_ms, Some(123));
        assert_eq!(opts(&[]).unwrap(), Options::default());
    }

    #[test]
    fn options_refuse_unknown_repeated_and_missing() {
        assert_eq!(opts(&["FOO"]), Err(ArgError::UnknownOption(b"FOO".to_vec())));
        assert_eq!(opts(&["COST", "1", "cost", "2"]), Err(ArgError::RepeatedOption("COST")));
        assert_eq!(opts(&["DRYRUN", "DRYRUN"]), Err(ArgError::RepeatedOption("DRYRUN")));
        assert_eq!(opts(&["COST"]), Err(ArgError::MissingValue("COST")));
        assert_eq!(opts(&["AT"]), Err(ArgError::MissingValue("AT")));
        assert_eq!(opts(&["NODELAY", "DELAY", "1"]), Err(ArgError::Conflict("NODELAY", "DELAY")));
        assert_eq!(opts(&["FRESH", "fresh"]), Err(ArgError::RepeatedOption("FRESH")));
        let wait_fresh = opts(&["WAIT", "1s", "FRESH"]).unwrap_err().to_string();
        assert!(wait_fresh.starts_with("ERR syntax error: WAIT cannot be combined with FRESH"));
        assert_eq!(opts(&["FRESH", "WAIT", "0"]).unwrap_err().to_string(), wait_fresh);
        let only_cost = parse_options(&[b"STEP".as_slice()], &[Keyword::Cost]);
        assert_eq!(only_cost, Err(ArgError::UnknownOption(b"STEP".to_vec())));
    }

    #[test]
    fn align_offset_is_optional() {
        assert_eq!(opts(&["ALIGN"]).unwrap().align_offset_ms, Some(0));
        assert_eq!(opts(&["ALIGN", "8h"]).unwrap().align_offset_ms, Some(8 * 3_600_000));
        assert_eq!(opts(&["ALIGN", "+8h"]).unwrap().align_offset_ms, Some(8 * 3_600_000));
        assert_eq!(opts(&["ALIGN", "-5h"]).unwrap().align_offset_ms, Some(-5 * 3_600_000));
        let o = opts(&["ALIGN", "DRYRUN", "COST", "2"]).unwrap();
        assert_eq!((o.align_offset_ms, o.dry_run, o.cost), (Some(0), true, 2));
        assert!(matches!(opts(&["ALIGN", "x"]), Err(ArgError::InvalidDuration { .. })));
    }

    #[test]
    fn option_values_check_ranges() {
        assert!(matches!(opts(&["COST", "-1"]), Err(ArgError::Integer { name: "COST", .. })));
        assert!(matches!(opts(&["BUCKETS", "0"]), Err(ArgError::Integer { name: "BUCKETS", .. })));
        assert!(matches!(opts(&["BUCKETS", "1001"]), Err(ArgError::Integer { .. })));
        assert_eq!(opts(&["COST", "0"]).unwrap().cost, 0);
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..8)) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let _ = parse_options(&refs, ALL);
            for a in &refs {
                let _ = parse_duration("period", a);
                let _ = parse_count("capacity", a, 1, MAX_COUNT);
                let _ = parse_instant("AT", a);
            }
        }

        /// The 64-bit fast paths answer exactly as the general parsers (plain digits, signs,
        /// units in any case, 16+ digits, junk).
        #[test]
        fn fast_paths_agree_with_the_general_parsers(
            digits in "[+-]?[0-9]{0,22}",
            unit in "(|ms|MS|mS|s|S|m|M|h|H|d|D|x|sm|msx)",
            min in 0u64..3,
        ) {
            let text = format!("{digits}{unit}");
            let bytes = text.as_bytes();
            let general = parse_signed_duration("period", bytes).ok().and_then(|ms| u64::try_from(ms).ok());
            let expected_duration = general.filter(|v| (1..=MAX_DURATION_MS).contains(v));
            prop_assert_eq!(parse_duration("period", bytes).ok(), expected_duration);
            prop_assert_eq!(parse_timeout("t", bytes).ok(), general.filter(|v| *v <= MAX_DURATION_MS));
            let count = parse_int(bytes).and_then(|v| u64::try_from(v).ok()).filter(|v| (min..=MAX_COUNT).contains(v));
            prop_assert_eq!(parse_count("c", bytes, min, MAX_COUNT).ok(), count);
        }

        #[test]
        fn counts_round_trip(v in 0u64..=MAX_COUNT) {
            prop_assert_eq!(parse_count("cost", v.to_string().as_bytes(), 0, MAX_COUNT), Ok(v));
        }
    }
}
