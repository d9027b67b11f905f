//! One limiting request, parsed from a command's arguments: which algorithm with which
//! parameters, how much it costs, and how it is to be evaluated (`DRYRUN`, `AT`).
//!
//! Every limiting command's argument grammar lives here, so the module, the fuzz targets and
//! the property tests all run the one real parser. Arguments arrive as raw byte strings
//! (binary safe, possibly invalid UTF-8); nothing here panics on any input.

use super::args::{parse_count, parse_duration, parse_options, Keyword, Options, MAX_COUNT};
use super::error::ArgError;
use super::gcra::{parse_throttle_args, GcraParams};
use super::leaky::{LeakMode, LeakyParams};
use super::period::PeriodParams;
use super::slide::SlideParams;
use super::token::TokenParams;

/// The limiting commands, by what their arguments mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `RL.TOKEN key capacity rate period [COST n] [STEP] [DRYRUN] [AT ms]`
    Token,
    /// `RL.PERIOD key limit period [COST n] [ALIGN [utc-offset]] [DRYRUN] [AT ms]`
    Period,
    /// `RL.SLIDE key limit window [COST n] [BUCKETS b] [DRYRUN] [AT ms]`
    Slide,
    /// `RL.LEAKY key capacity rate period [COST n] [NODELAY | DELAY d] [DRYRUN] [AT ms]`
    Leaky,
    /// `CL.THROTTLE key max_burst count period [quantity] [DRYRUN] [AT ms]` (redis-cell)
    Throttle,
}

impl Command {
    /// Every limiting command, in a fixed order.
    pub const ALL: [Command; 5] =
        [Command::Token, Command::Period, Command::Slide, Command::Leaky, Command::Throttle];
}

/// The algorithm and parameters of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    Token(TokenParams),
    Period(PeriodParams),
    Slide(SlideParams),
    Leaky(LeakyParams),
    /// `CL.THROTTLE`: GCRA, answered in redis-cell's reply layout.
    Throttle(GcraParams),
}

/// One parsed limiting request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub limit: Limit,
    /// Permits the request takes (`COST`, or `CL.THROTTLE`'s `quantity`): 0 … 10^12.
    pub cost: u64,
    /// `DRYRUN`: evaluate and reply, change nothing.
    pub dry_run: bool,
    /// `AT unix-ms`: the instant to evaluate at instead of the server clock.
    pub at_ms: Option<i64>,
}

impl Request {
    /// Parses a limiting command's arguments after the key. `slide_log_max` is the largest
    /// `limit` an exact sliding log accepts (`ratelimit.slide-log-max`).
    pub fn parse(
        command: Command,
        args: &[&[u8]],
        slide_log_max: u64,
    ) -> Result<Request, ArgError> {
        match command {
            Command::Token => {
                let [capacity, rate, period, rest @ ..] = args else {
                    return Err(ArgError::WrongArity);
                };
                let capacity = parse_count("capacity", capacity, 1, MAX_COUNT)?;
                let rate = parse_count("rate", rate, 1, MAX_COUNT)?;
                let period_ms = parse_duration("period", period)?;
                let allowed = [Keyword::Cost, Keyword::Step, Keyword::DryRun, Keyword::At];
                let options = parse_options(rest, &allowed)?;
                let params = TokenParams::new(capacity, rate, period_ms, options.step)?;
                Ok(Request::with(Limit::Token(params), &options))
            }
            Command::Period => {
                let [limit, period, rest @ ..] = args else {
                    return Err(ArgError::WrongArity);
                };
                let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
                let period_ms = parse_duration("period", period)?;
                let allowed = [Keyword::Cost, Keyword::Align, Keyword::DryRun, Keyword::At];
                let options = parse_options(rest, &allowed)?;
                let params = PeriodParams::new(limit, period_ms, options.align_offset_ms)?;
                Ok(Request::with(Limit::Period(params), &options))
            }
            Command::Slide => {
                let [limit, window, rest @ ..] = args else {
                    return Err(ArgError::WrongArity);
                };
                let limit = parse_count("limit", limit, 1, MAX_COUNT)?;
                let window_ms = parse_duration("window", window)?;
                let allowed = [Keyword::Cost, Keyword::Buckets, Keyword::DryRun, Keyword::At];
                let options = parse_options(rest, &allowed)?;
                let params = SlideParams::new(limit, window_ms, options.buckets, slide_log_max)?;
                Ok(Request::with(Limit::Slide(params), &options))
            }
            Command::Leaky => {
                let [capacity, rate, period, rest @ ..] = args else {
                    return Err(ArgError::WrongArity);
                };
                let capacity = parse_count("capacity", capacity, 1, MAX_COUNT)?;
                let rate = parse_count("rate", rate, 1, MAX_COUNT)?;
                let period_ms = parse_duration("period", period)?;
                let allowed =
                    [Keyword::Cost, Keyword::NoDelay, Keyword::Delay, Keyword::DryRun, Keyword::At];
                let options = parse_options(rest, &allowed)?;
                let mode = if options.no_delay {
                    LeakMode::NoDelay
                } else {
                    LeakMode::Delay(options.delay.unwrap_or(0))
                };
                let params = LeakyParams::new(capacity, rate, period_ms, mode)?;
                Ok(Request::with(Limit::Leaky(params), &options))
            }
            Command::Throttle => {
                let parsed = parse_throttle_args(args)?;
                Ok(Request {
                    limit: Limit::Throttle(parsed.params),
                    cost: parsed.quantity,
                    dry_run: parsed.options.dry_run,
                    at_ms: parsed.options.at_ms,
                })
            }
        }
    }

    fn with(limit: Limit, options: &Options) -> Request {
        Request { limit, cost: options.cost, dry_run: options.dry_run, at_ms: options.at_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(command: Command, args: &[&str]) -> Result<Request, ArgError> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        Request::parse(command, &bytes, 100_000)
    }

    #[test]
    fn every_command_parses_its_grammar() {
        let token = parse(Command::Token, &["10", "1", "1s", "COST", "3", "DRYRUN"]).unwrap();
        assert_eq!(token.cost, 3);
        assert!(token.dry_run);
        assert!(matches!(token.limit, Limit::Token(_)));
        let period = parse(Command::Period, &["5", "1d", "ALIGN", "8h", "AT", "7"]).unwrap();
        assert_eq!(period.at_ms, Some(7));
        assert!(matches!(period.limit, Limit::Period(_)));
        let slide = parse(Command::Slide, &["100", "1m", "BUCKETS", "60"]).unwrap();
        assert!(matches!(slide.limit, Limit::Slide(_)));
        let leaky = parse(Command::Leaky, &["100", "20", "1s", "DELAY", "5"]).unwrap();
        assert!(matches!(leaky.limit, Limit::Leaky(_)));
        let throttle = parse(Command::Throttle, &["15", "30", "60", "4"]).unwrap();
        assert_eq!(throttle.cost, 4);
        assert!(matches!(throttle.limit, Limit::Throttle(_)));
    }

    #[test]
    fn options_belong_to_their_command() {
        assert_eq!(
            parse(Command::Token, &["10", "1", "1s", "BUCKETS", "2"]),
            Err(ArgError::UnknownOption(b"BUCKETS".to_vec()))
        );
        assert_eq!(
            parse(Command::Slide, &["10", "1s", "STEP"]),
            Err(ArgError::UnknownOption(b"STEP".to_vec()))
        );
        assert_eq!(
            parse(Command::Leaky, &["10", "1", "1s", "NODELAY", "DELAY", "1"]),
            Err(ArgError::Conflict("NODELAY", "DELAY"))
        );
    }

    #[test]
    fn too_few_arguments_is_an_arity_error() {
        for command in Command::ALL {
            assert_eq!(parse(command, &["1"]), Err(ArgError::WrongArity), "{command:?}");
        }
    }

    #[test]
    fn the_sliding_log_bound_is_the_callers() {
        assert!(parse(Command::Slide, &["100", "1s"]).is_ok());
        let bytes: Vec<&[u8]> = vec![b"100", b"1s"];
        assert!(Request::parse(Command::Slide, &bytes, 99).is_err());
    }
}
