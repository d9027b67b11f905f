//! `arity.rs`: each command's parser, given the shortest call its arity allows, accepts it;
//! with fewer arguments (its name always there) or, for an exact arity, one more, refuses with
//! `WrongArity` — so [`ARITIES`], what `COMMAND INFO` declares (`commands::specs` checks it),
//! and the parsers agree.

use super::*;
use crate::algorithms::token::TokenParams;
use crate::grammar::inspect::{KeyRequest, RestoreRequest};
use crate::grammar::policy::{HitRequest, PolicyRequest};
use crate::grammar::request::{
    AcquireRequest, AllRequest, Command, Limit, RefundRequest, ReleaseRequest, Request,
};
use crate::grammar::top::TopRequest;

/// The shortest valid call of every command, name first.
const SHORTEST: &[(&str, &str)] = &[
    ("rl.token", "RL.TOKEN k 10 1 1s"),
    ("rl.period", "RL.PERIOD k 10 1s"),
    ("rl.slide", "RL.SLIDE k 10 1s"),
    ("rl.leaky", "RL.LEAKY k 10 1 1s"),
    ("cl.throttle", "CL.THROTTLE k 10 1 1"),
    ("rl.all", "RL.ALL 1 k POLICY api"),
    ("rl.refund", "RL.REFUND k 1"),
    ("rl.charge", "RL.CHARGE k 1"),
    ("rl.acquire", "RL.ACQUIRE k 2 1s"),
    ("rl.release", "RL.RELEASE k id"),
    ("rl.peek", "RL.PEEK k"),
    ("rl.info", "RL.INFO k"),
    ("rl.restore", "RL.RESTORE k payload"),
    ("rl.hit", "RL.HIT api k"),
    ("rl.top", "RL.TOP"),
    ("rl.policy|set", "RL.POLICY SET api TOKEN"),
    ("rl.policy|get", "RL.POLICY GET api"),
    ("rl.policy|del", "RL.POLICY DEL api"),
    ("rl.policy|list", "RL.POLICY LIST"),
    ("rl.policy|promote", "RL.POLICY PROMOTE api"),
    ("rl.policy|help", "RL.POLICY HELP"),
    ("rl.policy|stats", "RL.POLICY STATS api"),
    ("rl.policy|resetstat", "RL.POLICY RESETSTAT"),
];

/// Runs the parser the module's handler for `name` runs on the call's arguments (name first).
fn parse(name: &str, args: &[&[u8]]) -> Result<(), ArgError> {
    let limiting = |command| Request::parse_call(command, args, 100_000).map(drop);
    match name {
        "rl.token" => limiting(Command::Token),
        "rl.period" => limiting(Command::Period),
        "rl.slide" => limiting(Command::Slide),
        "rl.leaky" => limiting(Command::Leaky),
        "cl.throttle" => limiting(Command::Throttle),
        "rl.all" => {
            let limit = Limit::Token(TokenParams::new(1, 1, 1000, false).unwrap());
            let mut policy = |_: &[u8], _: &[u8]| Some((limit.clone(), false));
            AllRequest::new().parse_call_into(args, 100_000, &mut policy)
        }
        "rl.refund" => RefundRequest::parse_call(REFUND, args).map(drop),
        "rl.charge" => RefundRequest::parse_call(CHARGE, args).map(drop),
        "rl.acquire" => AcquireRequest::parse_call(args, 100).map(drop),
        "rl.release" => ReleaseRequest::parse_call(args).map(drop),
        "rl.peek" => KeyRequest::parse_peek(args).map(drop),
        "rl.info" => KeyRequest::parse_info(args).map(drop),
        "rl.restore" => RestoreRequest::parse(args).map(drop),
        "rl.hit" => HitRequest::parse(args).map(drop),
        "rl.top" => TopRequest::parse(args).map(drop),
        _ => {
            let (container, sub) = name.split_once('|').ok_or(ArgError::WrongArity)?;
            assert_eq!(container, "rl.policy");
            let request = PolicyRequest::parse(args)?;
            let parsed = format!("{request:?}").to_ascii_lowercase();
            assert!(parsed.starts_with(sub), "{parsed}");
            Ok(())
        }
    }
}

#[test]
fn every_command_has_its_shortest_call() {
    let names: Vec<&str> = SHORTEST.iter().map(|(name, _)| *name).collect();
    let declared: Vec<&str> = ARITIES.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, declared);
}

#[test]
fn each_parser_refuses_what_its_arity_refuses() {
    for (name, call) in SHORTEST {
        let arity = arity_of(name).unwrap();
        let args: Vec<&[u8]> = call.split(' ').map(str::as_bytes).collect();
        let (Arity::Exactly(n) | Arity::AtLeast(n)) = arity;
        assert_eq!(args.len(), n, "{name}: the shortest call has the arity's count");
        assert_eq!(parse(name, &args), Ok(()), "{name}: {call}");
        assert_eq!(arity.check(args.len()), Ok(()));
        for short in 1..n {
            assert_eq!(parse(name, &args[..short]), Err(ArgError::WrongArity), "{name} {short}");
            assert_eq!(arity.check(short), Err(ArgError::WrongArity));
        }
        if let Arity::Exactly(_) = arity {
            let mut long = args.clone();
            long.push(b"extra");
            assert_eq!(parse(name, &long), Err(ArgError::WrongArity), "{name}: one too many");
            assert_eq!(arity.check(long.len()), Err(ArgError::WrongArity));
        }
    }
}

#[test]
fn guaranteed_arguments_or_the_arity_error() {
    let args = [1, 2, 3];
    assert_eq!(argument(&args, 1), Ok(&2));
    assert_eq!(argument(&args, 3), Err(ArgError::WrongArity));
    assert_eq!(arguments(&args, 1..3), Ok(&args[1..]));
    assert_eq!(arguments(&args, 2..4), Err(ArgError::WrongArity));
}

#[test]
fn more_than_the_buffer_holds_is_refused_by_name() {
    assert_eq!(check_most(18, 18), Ok(()));
    assert_eq!(check_most(0, 18), Ok(()));
    assert_eq!(check_most(19, 18).unwrap_err().to_string(), "ERR syntax error: too many arguments");
}

#[test]
fn redis_arity_is_negative_for_at_least() {
    assert_eq!(Arity::Exactly(2).redis(), 2);
    assert_eq!(Arity::AtLeast(5).redis(), -5);
    assert_eq!(arity_of("rl.policy|set"), Some(Arity::AtLeast(4)));
    assert_eq!(arity_of("rl.nope"), None);
}
