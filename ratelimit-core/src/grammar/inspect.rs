//! The grammar of the commands that read or restore a key whole: `RL.PEEK key`, `RL.INFO key`
//! and `RL.RESTORE key payload`. Each parser takes the call's arguments as the server passed
//! them, the command's name first (its bytes unread), and refuses any other count
//! ([`arity`](crate::grammar::arity)).

use crate::grammar::arity::{Arity, INFO, PEEK, RESTORE};
use crate::grammar::error::ArgError;

/// `RL.PEEK key` or `RL.INFO key`: the key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRequest<'a> {
    pub key: &'a [u8],
}

impl<'a> KeyRequest<'a> {
    /// `RL.PEEK key`.
    pub fn parse_peek(args: &[&'a [u8]]) -> Result<KeyRequest<'a>, ArgError> {
        KeyRequest::parse(args, PEEK)
    }

    /// `RL.INFO key`.
    pub fn parse_info(args: &[&'a [u8]]) -> Result<KeyRequest<'a>, ArgError> {
        KeyRequest::parse(args, INFO)
    }

    fn parse(args: &[&'a [u8]], arity: Arity) -> Result<KeyRequest<'a>, ArgError> {
        arity.check(args.len())?;
        match args {
            [_, key] => Ok(KeyRequest { key }),
            _ => Err(ArgError::WrongArity),
        }
    }
}

/// `RL.RESTORE key payload`: the key and the encoded limiter (with its ban) to set it to,
/// decoded by `store::codec::decode_value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreRequest<'a> {
    pub key: &'a [u8],
    pub payload: &'a [u8],
}

impl<'a> RestoreRequest<'a> {
    pub fn parse(args: &[&'a [u8]]) -> Result<RestoreRequest<'a>, ArgError> {
        RESTORE.check(args.len())?;
        match args {
            [_, key, payload] => Ok(RestoreRequest { key, payload }),
            _ => Err(ArgError::WrongArity),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_alone() {
        let args: [&[u8]; 2] = [b"", b"k"];
        assert_eq!(KeyRequest::parse_peek(&args), Ok(KeyRequest { key: b"k" }));
        assert_eq!(KeyRequest::parse_info(&args), Ok(KeyRequest { key: b"k" }));
        for bad in [&[][..], &[&b""[..]][..], &[&b""[..], b"k", b"x"][..]] {
            assert_eq!(KeyRequest::parse_peek(bad), Err(ArgError::WrongArity));
            assert_eq!(KeyRequest::parse_info(bad), Err(ArgError::WrongArity));
        }
    }

    #[test]
    fn restore_takes_a_key_and_a_payload() {
        let args: [&[u8]; 3] = [b"", b"k", b"\x01\x02"];
        assert_eq!(
            RestoreRequest::parse(&args),
            Ok(RestoreRequest { key: b"k", payload: b"\x01\x02" })
        );
        for n in [0, 1, 2] {
            assert_eq!(RestoreRequest::parse(&args[..n]), Err(ArgError::WrongArity));
        }
        let extra: [&[u8]; 4] = [b"", b"k", b"p", b"x"];
        assert_eq!(RestoreRequest::parse(&extra), Err(ArgError::WrongArity));
    }
}
