//! The grammar of `RL.POLICY`'s subcommands and of `RL.HIT`: which subcommand, the policy's
//! name, what within the policy it names ([`Target`]: the policy, one key's override, its
//! candidate) and, for `SET`, the definition's words, which `features::policy::Definition`
//! parses with the limiting commands' own group grammar (`Request::parse_group`). Each parser
//! takes the call's arguments as the server passed them, the command's name first (its bytes
//! unread; for `RL.POLICY`, then the subcommand's), and refuses any other count
//! ([`arity`](crate::grammar::arity)).

use crate::grammar::arity::{
    Arity, HIT, POLICY_DEL, POLICY_GET, POLICY_HELP, POLICY_LIST, POLICY_PROMOTE, POLICY_RESETSTAT,
    POLICY_SET, POLICY_STATS,
};
use crate::grammar::error::{escape, ArgError};

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
