//! The grammar of `RL.POLICY`'s subcommands and of `RL.HIT`: which subcommand, the policy's
//! name, what within the policy it names ([`Target`]: the policy, one key's override, its
//! candidate), a definition ([`ParsedDefinition`]: the limit in the limiting commands' own
//! group grammar, `Request::parse_group`, with `SHADOW` and `FOR key | CANDIDATE`; kept by
//! `features::policy::Definition`) and `RL.HIT`'s per-call options ([`hit_options`]). The
//! call parsers take the call's arguments as the server passed them, the command's name first
//! (its bytes unread; for `RL.POLICY`, then the subcommand's), and refuse any other count
//! ([`arity`](crate::grammar::arity)).

use crate::grammar::args::{parse_options, Keyword, Options};
use crate::grammar::arity::{
    Arity, HIT, POLICY_DEL, POLICY_GET, POLICY_HELP, POLICY_LIST, POLICY_PROMOTE, POLICY_RESETSTAT,
    POLICY_SET, POLICY_STATS,
};
use crate::grammar::error::{escape, ArgError};
use crate::grammar::request::Request;

/// What a `SET`, `GET` or `DEL` names within a policy: the policy's own definition, one key's
/// override (`FOR key`), or the policy's candidate (`CANDIDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    Policy,
    Override(&'a [u8]),
    Candidate,
}

impl<'a> Target<'a> {
    /// `[FOR key | CANDIDATE]` after a policy's name (`GET`, `DEL`).
    pub fn parse(rest: &[&'a [u8]]) -> Result<Target<'a>, ArgError> {
        match rest {
            [] => Ok(Target::Policy),
            [keyword] if keyword.eq_ignore_ascii_case(b"CANDIDATE") => Ok(Target::Candidate),
            [keyword, key] if keyword.eq_ignore_ascii_case(b"FOR") => Ok(Target::Override(key)),
            [keyword, ..]
                if !keyword.eq_ignore_ascii_case(b"FOR")
                    && !keyword.eq_ignore_ascii_case(b"CANDIDATE") =>
            {
                Err(ArgError::UnknownOption(keyword.to_vec()))
            }
            _ => Err(ArgError::WrongArity),
        }
    }
}

/// What an `RL.POLICY SET` defines besides the policy itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetTarget {
    /// `FOR key`: one key's override.
    Override(Vec<u8>),
    /// `CANDIDATE`: the policy's candidate, judged in shadow beside it.
    Candidate,
}

impl SetTarget {
    /// As a [`Target`] of the table.
    pub fn target(target: &Option<SetTarget>) -> Target<'_> {
        match target {
            None => Target::Policy,
            Some(SetTarget::Override(key)) => Target::Override(key),
            Some(SetTarget::Candidate) => Target::Candidate,
        }
    }
}

/// Per-call options a definition never holds: `RL.HIT` takes `COST`, `DRYRUN`, `AT`, `WAIT`,
/// `DEADLINE`; `FRESH` stays a direct-command option.
const CALL_OPTIONS: [Keyword; 6] =
    [Keyword::Cost, Keyword::DryRun, Keyword::At, Keyword::Wait, Keyword::Fresh, Keyword::Deadline];

/// The options `RL.HIT` takes after `name key`.
const HIT_OPTIONS: &[Keyword] =
    &[Keyword::Cost, Keyword::DryRun, Keyword::At, Keyword::Wait, Keyword::Deadline];

/// A policy's definition as `RL.POLICY SET name` takes it (and persistence and the policy file
/// carry it): `limit [BAN d [CLEAR]] [SHADOW] [FOR key | CANDIDATE]`, the limit in `RL.ALL`'s
/// group grammar without `COST`; `features::policy::Definition` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDefinition<'a> {
    /// The limit and its ban, as the limiting commands' group grammar parses them.
    pub request: Request,
    /// The words of the limit and its options (without `SHADOW`, `FOR key`, `CANDIDATE`).
    pub words: Vec<&'a [u8]>,
    /// `SHADOW`.
    pub shadow: bool,
    /// `FOR key` or `CANDIDATE`; `None`: the policy itself.
    pub target: Option<SetTarget>,
}

impl<'a> ParsedDefinition<'a> {
    /// Parses a definition; a per-call option (`COST`, `DRYRUN`, `AT`, `WAIT`, `FRESH`,
    /// `DEADLINE`) is refused by name, `FOR` and `CANDIDATE` exclude each other.
    pub fn parse(args: &[&'a [u8]], slide_log_max: u64) -> Result<ParsedDefinition<'a>, ArgError> {
        let mut words: Vec<&[u8]> = Vec::with_capacity(args.len());
        let mut shadow = false;
        let mut target = None;
        let mut rest = args.iter();
        while let Some(token) = rest.next() {
            if token.eq_ignore_ascii_case(b"FOR") {
                match target {
                    Some(SetTarget::Override(_)) => return Err(ArgError::RepeatedOption("FOR")),
                    Some(SetTarget::Candidate) => {
                        return Err(ArgError::Conflict("FOR", "CANDIDATE"))
                    }
                    None => {}
                }
                let key = rest.next().ok_or(ArgError::MissingValue("FOR"))?;
                target = Some(SetTarget::Override(key.to_vec()));
            } else if token.eq_ignore_ascii_case(b"CANDIDATE") {
                match target {
                    Some(SetTarget::Candidate) => {
                        return Err(ArgError::RepeatedOption("CANDIDATE"))
                    }
                    Some(SetTarget::Override(_)) => {
                        return Err(ArgError::Conflict("FOR", "CANDIDATE"))
                    }
                    None => target = Some(SetTarget::Candidate),
                }
            } else if token.eq_ignore_ascii_case(b"SHADOW") {
                if shadow {
                    return Err(ArgError::RepeatedOption("SHADOW"));
                }
                shadow = true;
            } else if let Some(option) =
                CALL_OPTIONS.iter().find(|k| token.eq_ignore_ascii_case(k.name().as_bytes()))
            {
                return Err(ArgError::Invalid(format!(
                    "syntax error: a policy holds no {} (give it to RL.HIT)",
                    option.name()
                )));
            } else {
                words.push(token);
            }
        }
        let request = Request::parse_group(&words, slide_log_max)?;
        Ok(ParsedDefinition { request, words, shadow, target })
    }
}

/// `RL.HIT`'s options after `name key`: `COST`, `DRYRUN`, `AT`, `WAIT`, `DEADLINE`.
pub fn hit_options(options: &[&[u8]]) -> Result<Options, ArgError> {
    parse_options(options, HIT_OPTIONS)
}

/// One `RL.POLICY` call, by subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRequest<'a> {
    /// `SET name limit [BAN d [CLEAR]] [SHADOW] [FOR key | CANDIDATE]`: `definition` is
    /// everything after the name.
    Set { name: &'a [u8], definition: &'a [&'a [u8]] },
    /// `GET name [FOR key | CANDIDATE]`.
    Get { name: &'a [u8], target: Target<'a> },
    /// `DEL name [FOR key | CANDIDATE]`.
    Del { name: &'a [u8], target: Target<'a> },
    /// `PROMOTE name`.
    Promote { name: &'a [u8] },
    /// `LIST` (the names) or `LIST name` (the policy's overrides).
    List { name: Option<&'a [u8]> },
    /// `STATS name`.
    Stats { name: &'a [u8] },
    /// `RESETSTAT`.
    ResetStat,
    /// `HELP`.
    Help,
}

/// The subcommands, by name, with their arities.
const SUBCOMMANDS: [(&[u8], Arity); 8] = [
    (b"SET", POLICY_SET),
    (b"GET", POLICY_GET),
    (b"DEL", POLICY_DEL),
    (b"PROMOTE", POLICY_PROMOTE),
    (b"LIST", POLICY_LIST),
    (b"STATS", POLICY_STATS),
    (b"RESETSTAT", POLICY_RESETSTAT),
    (b"HELP", POLICY_HELP),
];

impl<'a> PolicyRequest<'a> {
    /// `RL.POLICY subcommand ...` (`args[1]`, any case, the subcommand).
    pub fn parse(args: &'a [&'a [u8]]) -> Result<PolicyRequest<'a>, ArgError> {
        let subcommand = *args.get(1).ok_or(ArgError::WrongArity)?;
        let (word, arity) = SUBCOMMANDS
            .iter()
            .find(|(word, _)| subcommand.eq_ignore_ascii_case(word))
            .ok_or_else(|| {
                ArgError::Invalid(format!(
                    "unknown subcommand '{}'. Try RL.POLICY HELP.",
                    escape(subcommand)
                ))
            })?;
        arity.check(args.len())?;
        let rest = args.get(2..).unwrap_or(&[]);
        let request = match (*word, rest) {
            (b"SET", [name, definition @ ..]) => PolicyRequest::Set { name, definition },
            (b"GET", [name, target @ ..]) => {
                PolicyRequest::Get { name, target: Target::parse(target)? }
            }
            (b"DEL", [name, target @ ..]) => {
                PolicyRequest::Del { name, target: Target::parse(target)? }
            }
            (b"PROMOTE", [name]) => PolicyRequest::Promote { name },
            (b"LIST", []) => PolicyRequest::List { name: None },
            (b"LIST", [name]) => PolicyRequest::List { name: Some(name) },
            (b"STATS", [name]) => PolicyRequest::Stats { name },
            (b"RESETSTAT", []) => PolicyRequest::ResetStat,
            (b"HELP", []) => PolicyRequest::Help,
            _ => return Err(ArgError::WrongArity),
        };
        Ok(request)
    }
}

/// `RL.HIT name key [COST n] [DRYRUN] [AT ms] [WAIT t] [DEADLINE ms]`: the policy's name, the
/// key, and the per-call options, which `Definition::request` parses with the policy's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HitRequest<'a> {
    pub name: &'a [u8],
    pub key: &'a [u8],
    pub options: &'a [&'a [u8]],
}

impl<'a> HitRequest<'a> {
    pub fn parse(args: &'a [&'a [u8]]) -> Result<HitRequest<'a>, ArgError> {
        HIT.check(args.len())?;
        match args {
            [_, name, key, options @ ..] => Ok(HitRequest { name, key, options }),
            _ => Err(ArgError::WrongArity),
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
