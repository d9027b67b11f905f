//! The grammar of `RL.TOP [COUNT n] [POLICY name [CANDIDATE]]` and `RL.TOP RESET`. What a
//! policy selects (its tags) is `features::top`'s: [`TopPolicy`] only names it.

use crate::grammar::args::parse_count;
use crate::grammar::arity::TOP;
use crate::grammar::error::ArgError;

/// Rows `RL.TOP` answers without `COUNT`.
pub const DEFAULT_COUNT: u64 = 10;
/// Most rows `COUNT` asks for: what two windows of the largest summary hold
/// (`2 × features::top::MAX_K`, which its tests check).
pub const MAX_ROWS: u64 = 20_000;

/// The policy an `RL.TOP` reads: its refusals (and its `SHADOW` would-be refusals) or, with
/// `CANDIDATE`, its candidate's would-be refusals (`features::top::selector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopPolicy<'a> {
    pub name: &'a [u8],
    pub candidate: bool,
}

/// A parsed `RL.TOP` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopRequest<'a> {
    /// `RL.TOP [COUNT n] [POLICY name [CANDIDATE]]`: the `count` most refused keys, of one
    /// policy or of all (real refusals only).
    Read { count: usize, policy: Option<TopPolicy<'a>> },
    /// `RL.TOP RESET`: forget every refusal.
    Reset,
}

impl<'a> TopRequest<'a> {
    /// Parses the call's arguments, the command's name first (its bytes unread): `RESET`
    /// alone, or `COUNT n` (1 to [`MAX_ROWS`]), `POLICY name` and `CANDIDATE` (with `POLICY`),
    /// each at most once, in any order; keywords in any case.
    pub fn parse(args: &[&'a [u8]]) -> Result<TopRequest<'a>, ArgError> {
        TOP.check(args.len())?;
        let args = args.get(1..).unwrap_or(&[]);
        if let [only] = args {
            if only.eq_ignore_ascii_case(b"RESET") {
                return Ok(TopRequest::Reset);
            }
        }
        let (mut count, mut policy, mut candidate) = (None, None, false);
        let mut rest = args.iter();
        while let Some(word) = rest.next() {
            if word.eq_ignore_ascii_case(b"COUNT") {
                if count.is_some() {
                    return Err(ArgError::RepeatedOption("COUNT"));
                }
                let value = rest.next().ok_or(ArgError::MissingValue("COUNT"))?;
                count = Some(parse_count("COUNT", value, 1, MAX_ROWS)?);
            } else if word.eq_ignore_ascii_case(b"POLICY") {
                if policy.is_some() {
                    return Err(ArgError::RepeatedOption("POLICY"));
                }
                policy = Some(*rest.next().ok_or(ArgError::MissingValue("POLICY"))?);
            } else if word.eq_ignore_ascii_case(b"CANDIDATE") {
                if candidate {
                    return Err(ArgError::RepeatedOption("CANDIDATE"));
                }
                candidate = true;
            } else {
                return Err(ArgError::UnknownOption(word.to_vec()));
            }
        }
        let count = usize::try_from(count.unwrap_or(DEFAULT_COUNT)).unwrap_or(usize::MAX);
        if candidate && policy.is_none() {
            return Err(ArgError::Invalid("syntax error: CANDIDATE needs POLICY name".into()));
        }
        let policy = policy.map(|name| TopPolicy { name, candidate });
        Ok(TopRequest::Read { count, policy })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<'a>(args: &[&'a [u8]]) -> Result<TopRequest<'a>, ArgError> {
        let mut call: Vec<&[u8]> = vec![b"RL.TOP"];
        call.extend_from_slice(args);
        TopRequest::parse(&call)
    }

    #[test]
    fn the_grammar() {
        assert_eq!(parse(&[]), Ok(TopRequest::Read { count: 10, policy: None }));
        assert_eq!(parse(&[b"reset"]), Ok(TopRequest::Reset));
        let api = Some(TopPolicy { name: b"api\xff", candidate: false });
        assert_eq!(
            parse(&[b"policy", b"api\xff", b"COUNT", b"3"]),
            Ok(TopRequest::Read { count: 3, policy: api })
        );
        assert_eq!(
            parse(&[b"COUNT", b"20000"]),
            Ok(TopRequest::Read { count: 20000, policy: None })
        );
        let candidate = Some(TopPolicy { name: b"free", candidate: true });
        assert_eq!(
            parse(&[b"CANDIDATE", b"POLICY", b"free"]),
            Ok(TopRequest::Read { count: 10, policy: candidate })
        );
        assert_eq!(TopRequest::parse(&[]), Err(ArgError::WrongArity));
    }

    #[test]
    fn every_bad_call_is_refused_by_name() {
        let err = |args: &[&[u8]]| parse(args).unwrap_err().to_string();
        assert_eq!(err(&[b"COUNT"]), "ERR syntax error: COUNT needs a value");
        assert_eq!(err(&[b"COUNT", b"0"]), "ERR COUNT must be an integer between 1 and 20000");
        assert_eq!(err(&[b"COUNT", b"20001"]), "ERR COUNT must be an integer between 1 and 20000");
        assert_eq!(
            err(&[b"COUNT", b"1", b"COUNT", b"2"]),
            "ERR syntax error: option COUNT given more than once"
        );
        assert_eq!(err(&[b"POLICY"]), "ERR syntax error: POLICY needs a value");
        assert_eq!(
            err(&[b"POLICY", b"a", b"POLICY", b"b"]),
            "ERR syntax error: option POLICY given more than once"
        );
        assert_eq!(err(&[b"CANDIDATE"]), "ERR syntax error: CANDIDATE needs POLICY name");
        assert_eq!(
            err(&[b"POLICY", b"p", b"CANDIDATE", b"CANDIDATE"]),
            "ERR syntax error: option CANDIDATE given more than once"
        );
        assert_eq!(err(&[b"RESET", b"COUNT", b"1"]), "ERR syntax error: unknown option 'RESET'");
        assert_eq!(err(&[b"COUNT", b"1", b"RESET"]), "ERR syntax error: unknown option 'RESET'");
        assert_eq!(err(&[b"\xff"]), "ERR syntax error: unknown option '\\xff'");
        for bad in [&[b"COUNT".as_slice(), b"-1"][..], &[b"COUNT", b"x"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
