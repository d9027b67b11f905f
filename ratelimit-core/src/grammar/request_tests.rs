//! Unit tests of `grammar::request`: every limiting command's grammar, `RL.ALL`'s, the
//! lease commands' and `RL.REFUND`'s, against good and bad input.

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
    for command in [Command::Token, Command::Period, Command::Slide, Command::Leaky] {
        let positional: &[&str] = match command {
            Command::Token | Command::Leaky => &["10", "1", "1s"],
            _ => &["10", "1s"],
        };
        assert!(!parse(command, positional).unwrap().fresh, "{command:?}");
        let fresh = [positional, &["fresh", "BAN", "1m", "DRYRUN"]].concat();
        assert!(parse(command, &fresh).unwrap().fresh, "{command:?}");
    }
    assert_eq!(
        parse(Command::Throttle, &["15", "30", "60", "1", "FRESH"]).map(|r| r.fresh),
        Err(ArgError::UnknownOption(b"FRESH".to_vec()))
    );
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
fn keep_period_is_a_fixed_window_option() {
    let period = |args: &[&str]| match parse(Command::Period, args) {
        Ok(Request { limit: Limit::Period(p), .. }) => Ok(p),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e),
    };
    assert!(!period(&["5", "1m"]).unwrap().keep_period);
    for args in [
        &["5", "1m", "KEEPPERIOD"][..],
        &["5", "1m", "keepperiod", "COST", "2"],
        &["5", "1m", "FRESH", "BAN", "1h", "DRYRUN", "AT", "5", "KeepPeriod"],
        &["5", "1m", "WAIT", "1s", "KEEPPERIOD"],
    ] {
        let p = period(args).unwrap();
        assert!(p.keep_period && p.align.is_none(), "{args:?}");
    }
    let conflict = Err(ArgError::Conflict("KEEPPERIOD", "ALIGN"));
    assert_eq!(period(&["5", "1d", "ALIGN", "8h", "KEEPPERIOD"]), conflict);
    assert_eq!(period(&["5", "1d", "KEEPPERIOD", "ALIGN"]), conflict);
    assert_eq!(
        ArgError::Conflict("KEEPPERIOD", "ALIGN").to_string(),
        "ERR syntax error: KEEPPERIOD and ALIGN cannot be combined"
    );
    assert_eq!(
        period(&["5", "1m", "KEEPPERIOD", "KEEPPERIOD"]),
        Err(ArgError::RepeatedOption("KEEPPERIOD"))
    );
    for (command, positional) in [
        (Command::Token, &["10", "1", "1s"][..]),
        (Command::Slide, &["10", "1s"]),
        (Command::Leaky, &["10", "1", "1s"]),
        (Command::Throttle, &["10", "1", "1"]),
    ] {
        let args = [positional, &["KEEPPERIOD"]].concat();
        assert_eq!(
            parse(command, &args),
            Err(ArgError::UnknownOption(b"KEEPPERIOD".to_vec())),
            "{command:?}"
        );
    }
    // RL.ALL's PERIOD groups take it too; other groups do not.
    let all = parse_all("2 a b PERIOD 5 1m KEEPPERIOD COST 2 TOKEN 1 1 1").unwrap();
    assert!(matches!(all.limits[0].limit, Limit::Period(p) if p.keep_period));
    assert_eq!(
        parse_all("1 a PERIOD 5 1d ALIGN KEEPPERIOD"),
        Err(ArgError::Conflict("KEEPPERIOD", "ALIGN"))
    );
    assert_eq!(
        parse_all("1 a SLIDE 5 1m KEEPPERIOD"),
        Err(ArgError::UnknownOption(b"KEEPPERIOD".to_vec()))
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

fn parse_all(args: &str) -> Result<AllRequest, ArgError> {
    let bytes: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
    AllRequest::parse(&bytes, 100_000)
}

/// A group keyword in any case starts a group; nothing else does, however close (every
/// byte that folds onto a keyword's letter under `& 0xDF` but is not that letter in one
/// case or the other, other lengths, the empty token).
#[test]
fn group_keywords_match_in_any_case_and_nothing_else() {
    for keyword in ["TOKEN", "PERIOD", "SLIDE", "LEAKY", "POLICY"] {
        let lower = keyword.to_ascii_lowercase();
        let mixed: String = keyword
            .chars()
            .enumerate()
            .map(|(i, c)| if i % 2 == 0 { c } else { c.to_ascii_lowercase() })
            .collect();
        for spelling in [keyword, lower.as_str(), mixed.as_str()] {
            assert!(group_start(spelling.as_bytes()).is_some(), "{spelling}");
        }
        for i in 0..keyword.len() {
            for byte in 0..=255u8 {
                let mut near = keyword.as_bytes().to_vec();
                let letter = near[i];
                if byte == letter || byte == letter.to_ascii_lowercase() {
                    continue;
                }
                near[i] = byte;
                assert!(group_start(&near).is_none(), "{near:?}");
            }
        }
        assert!(group_start(&keyword.as_bytes()[1..]).is_none());
        assert!(group_start(format!("{keyword}S").as_bytes()).is_none());
    }
    assert!(group_start(b"").is_none() && group_start(b"10000").is_none());
    assert_eq!(group_command(b"Period"), Some(Command::Period));
    assert_eq!(group_command(b"POLICY"), None);
}

#[test]
fn all_parses_groups_with_their_own_options_in_any_order() {
    let all = parse_all(
        "3 a b c TOKEN 10 1 1s COST 2 STEP period 5 1d ALIGN Slide 4 1m COST 0 BUCKETS 2 AT 9",
    )
    .unwrap();
    assert_eq!(all.key_count, 3);
    assert_eq!(all.at_ms, Some(9));
    assert!(!all.dry_run);
    let costs: Vec<u64> = all.limits.iter().map(|l| l.cost).collect();
    assert_eq!(costs, [2, 1, 0]);
    assert!(all.limits.iter().all(|l| l.at_ms == Some(9) && !l.dry_run));
    assert!(matches!(all.limits[1].limit, Limit::Period(p) if p.align.is_some()));
    let dry = parse_all("2 a b LEAKY 5 1 1s DRYRUN NODELAY TOKEN 1 1 1").unwrap();
    assert!(dry.dry_run && dry.limits.iter().all(|l| l.dry_run));
}

/// `n` distinct key names.
fn abc(n: usize) -> String {
    (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn all_groups_may_say_shadow() {
    let all = parse_all("3 a b c TOKEN 10 1 1s shadow COST 2 PERIOD 5 1d SHADOW ALIGN SLIDE 4 1m")
        .unwrap();
    assert_eq!(all.shadow, 0b011);
    assert!(all.is_shadow(0) && all.is_shadow(1) && !all.is_shadow(2));
    assert_eq!(all.limits.get(0).map(|l| l.cost), Some(2));
    assert!(matches!(all.limits.get(1).map(|l| &l.limit), Some(Limit::Period(_))));
    assert_eq!(parse_all("1 a TOKEN 1 1 1").unwrap().shadow, 0);
    assert_eq!(parse_all("1 a TOKEN 1 1 1 SHADOW SHADOW"), Err(ArgError::RepeatedOption("SHADOW")));
    // Not an option of the single commands.
    assert_eq!(
        parse(Command::Token, &["1", "1", "1", "SHADOW"]),
        Err(ArgError::UnknownOption(b"SHADOW".to_vec()))
    );
}

#[test]
fn all_refuses_bad_shapes() {
    let invalid = |text: &str| Err(ArgError::Invalid(text.into()));
    let numkeys = Err(ArgError::Integer { name: "numkeys", min: 1, max: 16 });
    for n in ["0", "17", "-1", "x", ""] {
        assert_eq!(parse_all(&format!("{n} a TOKEN 1 1 1")), numkeys, "{n}");
    }
    assert_eq!(parse_all("2 a a TOKEN 1 1 1 TOKEN 1 1 1"), invalid("RL.ALL keys must be distinct"));
    assert_eq!(
        parse_all("2 a b TOKEN 1 1 1"),
        invalid("RL.ALL needs one limit per key (2 keys, 1 limits)")
    );
    assert_eq!(
        parse_all("1 a TOKEN 1 1 1 PERIOD 1 1"),
        invalid("RL.ALL needs one limit per key (1 keys, 2 limits)")
    );
    // More groups than a call keeps (16) are still counted, and still parsed.
    let many = format!("16 {} {}", abc(16), "TOKEN 1 1 1 ".repeat(17));
    assert_eq!(
        parse_all(many.trim_end()),
        invalid("RL.ALL needs one limit per key (16 keys, 17 limits)")
    );
    let bad_17th = format!("16 {} {}TOKEN 1 1 1 DRYRUN DRYRUN", abc(16), "TOKEN 1 1 1 ".repeat(16));
    assert_eq!(parse_all(&bad_17th), Err(ArgError::RepeatedOption("DRYRUN")));
    let full = format!("16 {} {}", abc(16), "TOKEN 1 1 1 ".repeat(16));
    assert_eq!(parse_all(full.trim_end()).map(|all| all.limits.len()), Ok(16));
    assert_eq!(parse_all("3 a b"), Err(ArgError::WrongArity));
    assert_eq!(
        parse_all("1 a GCRA 1 1 1"),
        invalid("syntax error: unknown limit 'GCRA' (use TOKEN, PERIOD, SLIDE or LEAKY)")
    );
    assert_eq!(parse_all("1 a TOKEN 1 1 1 COST 1 COST 2"), Err(ArgError::RepeatedOption("COST")));
    assert_eq!(
        parse_all("1 a TOKEN 1 1 1 BUCKETS 2"),
        Err(ArgError::UnknownOption(b"BUCKETS".to_vec()))
    );
    for group in ["TOKEN 1 1 1", "PERIOD 1 1", "SLIDE 1 1", "LEAKY 1 1 1"] {
        assert_eq!(
            parse_all(&format!("1 a {group} FRESH")),
            Err(ArgError::UnknownOption(b"FRESH".to_vec())),
            "{group}"
        );
    }
    assert_eq!(
        parse_all("2 a b TOKEN 1 1 1 DRYRUN PERIOD 1 1 DRYRUN"),
        Err(ArgError::RepeatedOption("DRYRUN"))
    );
    assert_eq!(
        parse_all("2 a b TOKEN 1 1 1 AT 1 PERIOD 1 1 AT 2"),
        Err(ArgError::RepeatedOption("AT"))
    );
    assert!(parse_all("1 a SLIDE 10 1s BUCKETS 3").is_err(), "window not divisible");
    assert!(parse_all("1 a PERIOD 10 1h ALIGN 2h").is_err(), "offset above the period");
    assert!(parse_all("1 a LEAKY 10 1 1s DELAY 11").is_err(), "delay above the capacity");
    let non_utf8: [&[u8]; 6] = [b"1", b"\xff", b"TOKEN", b"1", b"1", b"1"];
    assert!(AllRequest::parse(&non_utf8, 100_000).is_ok(), "keys are binary safe");
    let bad: [&[u8]; 6] = [b"1", b"a", b"TOKEN", b"1", b"\xff", b"1"];
    assert_eq!(
        AllRequest::parse(&bad, 100_000),
        Err(ArgError::Integer { name: "rate", min: 1, max: 1_000_000_000_000 })
    );
}

#[test]
fn refund_takes_a_count_and_at() {
    let parse = |args: &[&[u8]]| RefundRequest::parse(args);
    assert_eq!(parse(&[b"5"]), Ok(RefundRequest { count: 5, at_ms: None }));
    assert_eq!(parse(&[b"5", b"at", b"9"]), Ok(RefundRequest { count: 5, at_ms: Some(9) }));
    let count = Err(ArgError::Integer { name: "count", min: 1, max: 1_000_000_000_000 });
    for bad in [&b"0"[..], b"1000000000001", b"-1", b"x", b"\xff"] {
        assert_eq!(parse(&[bad]), count);
    }
    assert_eq!(parse(&[]), Err(ArgError::WrongArity));
    assert_eq!(parse(&[b"1", b"COST", b"1"]), Err(ArgError::UnknownOption(b"COST".to_vec())));
    assert_eq!(parse(&[b"1", b"DRYRUN"]), Err(ArgError::UnknownOption(b"DRYRUN".to_vec())));
}
