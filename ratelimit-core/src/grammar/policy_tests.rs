//! `policy.rs`: every `RL.POLICY` subcommand and `RL.HIT` against good input, too few and too
//! many arguments, unknown subcommands and targets.

use super::*;

fn words(text: &str) -> Vec<&[u8]> {
    text.split(' ').map(str::as_bytes).collect()
}

fn parse(text: &'static str) -> Result<PolicyRequest<'static>, ArgError> {
    PolicyRequest::parse(Vec::leak(words(text)))
}

#[test]
fn every_subcommand_parses() {
    let limit: &[&[u8]] = &[b"TOKEN", b"10", b"1", b"1s", b"FOR", b"k"];
    assert_eq!(
        parse("rl.policy set api TOKEN 10 1 1s FOR k"),
        Ok(PolicyRequest::Set { name: b"api", definition: limit })
    );
    assert_eq!(
        parse("rl.policy Get api"),
        Ok(PolicyRequest::Get { name: b"api", target: Target::Policy })
    );
    assert_eq!(
        parse("rl.policy GET api for k"),
        Ok(PolicyRequest::Get { name: b"api", target: Target::Override(b"k") })
    );
    assert_eq!(
        parse("rl.policy del api candidate"),
        Ok(PolicyRequest::Del { name: b"api", target: Target::Candidate })
    );
    assert_eq!(parse("rl.policy PROMOTE api"), Ok(PolicyRequest::Promote { name: b"api" }));
    assert_eq!(parse("rl.policy LIST"), Ok(PolicyRequest::List { name: None }));
    assert_eq!(parse("rl.policy list api"), Ok(PolicyRequest::List { name: Some(b"api") }));
    assert_eq!(parse("rl.policy STATS api"), Ok(PolicyRequest::Stats { name: b"api" }));
    assert_eq!(parse("rl.policy resetstat"), Ok(PolicyRequest::ResetStat));
    assert_eq!(parse("rl.policy HELP"), Ok(PolicyRequest::Help));
}

#[test]
fn a_wrong_count_is_an_arity_error() {
    for text in [
        "rl.policy",
        "rl.policy SET",
        "rl.policy SET api",
        "rl.policy GET",
        "rl.policy GET api FOR",
        "rl.policy GET api FOR k x",
        "rl.policy DEL",
        "rl.policy DEL api CANDIDATE x",
        "rl.policy PROMOTE",
        "rl.policy PROMOTE api x",
        "rl.policy LIST api x",
        "rl.policy STATS",
        "rl.policy STATS api x",
        "rl.policy RESETSTAT x",
        "rl.policy HELP x",
    ] {
        assert_eq!(parse(text), Err(ArgError::WrongArity), "{text}");
    }
}

#[test]
fn unknown_subcommands_and_targets_are_named() {
    assert_eq!(
        parse("rl.policy FROB api").unwrap_err().to_string(),
        "ERR unknown subcommand 'FROB'. Try RL.POLICY HELP."
    );
    assert_eq!(parse("rl.policy GET api WHO k"), Err(ArgError::UnknownOption(b"WHO".to_vec())));
    assert_eq!(
        parse("rl.policy DEL api FOO").unwrap_err().to_string(),
        "ERR syntax error: unknown option 'FOO'"
    );
}

#[test]
fn a_hit_takes_a_name_a_key_and_options() {
    let args = words("rl.hit api k COST 2 DRYRUN");
    let options: &[&[u8]] = &[b"COST", b"2", b"DRYRUN"];
    assert_eq!(HitRequest::parse(&args), Ok(HitRequest { name: b"api", key: b"k", options }));
    let args = words("rl.hit api k");
    assert_eq!(HitRequest::parse(&args), Ok(HitRequest { name: b"api", key: b"k", options: &[] }));
    for n in 0..3 {
        assert_eq!(HitRequest::parse(&args[..n]), Err(ArgError::WrongArity));
    }
}

#[test]
fn a_definition_keeps_the_limit_and_names_its_target() {
    let args = words("token 10 1 1s BAN 1m SHADOW FOR user:1");
    let parsed = ParsedDefinition::parse(&args, 100).unwrap();
    let limit: Vec<&[u8]> = words("token 10 1 1s BAN 1m");
    assert_eq!(parsed.words, limit);
    assert!(parsed.shadow);
    assert_eq!(parsed.target, Some(SetTarget::Override(b"user:1".to_vec())));
    assert_eq!(parsed.request.ban_ms, Some(60_000));
    assert_eq!(SetTarget::target(&parsed.target), Target::Override(b"user:1"));
    let candidate = ParsedDefinition::parse(&words("PERIOD 5 1s CANDIDATE"), 100).unwrap();
    assert_eq!(candidate.target, Some(SetTarget::Candidate));
    assert!(!candidate.shadow);
}

#[test]
fn a_definition_refuses_call_options_and_two_targets() {
    let err = |text: &str| ParsedDefinition::parse(&words(text), 100).unwrap_err().to_string();
    assert_eq!(
        err("TOKEN 1 1 1s COST 2"),
        "ERR syntax error: a policy holds no COST (give it to RL.HIT)"
    );
    assert_eq!(
        err("TOKEN 1 1 1s FOR a CANDIDATE"),
        "ERR syntax error: FOR and CANDIDATE cannot be combined"
    );
    assert_eq!(
        err("TOKEN 1 1 1s FOR a FOR b"),
        "ERR syntax error: option FOR given more than once"
    );
    assert_eq!(
        err("TOKEN 1 1 1s SHADOW SHADOW"),
        "ERR syntax error: option SHADOW given more than once"
    );
    assert_eq!(err("TOKEN 1 1 1s FOR"), "ERR syntax error: FOR needs a value");
    assert_eq!(ParsedDefinition::parse(&[], 100), Err(ArgError::WrongArity));
}

#[test]
fn a_hit_takes_only_call_options() {
    let options = hit_options(&words("COST 2 DRYRUN AT 5 DEADLINE 9")).unwrap();
    assert_eq!((options.cost, options.dry_run, options.at_ms), (2, true, Some(5)));
    assert_eq!(options.deadline_ms, Some(9));
    assert_eq!(hit_options(&words("WAIT 1s")).unwrap().wait_ms, Some(1000));
    assert!(hit_options(&words("FRESH")).is_err());
    assert!(hit_options(&words("BAN 1s")).is_err());
}
