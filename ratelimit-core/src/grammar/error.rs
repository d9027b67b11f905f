//! Argument and parameter errors, with the exact reply texts users see.
//!
//! Every message starts with an upper-case error code (`ERR`), names the offending argument
//! and, for numbers, the accepted range. User bytes echoed back are escaped so that a reply
//! never carries control characters or invalid UTF-8.

use std::fmt;

/// Why a command's arguments were refused. `Display` renders the full error reply text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// Too few or too many positional arguments; [`ArgError::reply_for`] names the command.
    WrongArity,
    /// A token where an option keyword was expected that is not one of the command's options.
    UnknownOption(Vec<u8>),
    /// An option given twice.
    RepeatedOption(&'static str),
    /// An option keyword at the end of the arguments, without its value.
    MissingValue(&'static str),
    /// Two options that exclude each other.
    Conflict(&'static str, &'static str),
    /// A number that is malformed or outside `min..=max`.
    Integer { name: &'static str, min: i128, max: i128 },
    /// A duration that does not parse (`<integer>[ms|s|m|h|d]`).
    InvalidDuration { name: &'static str, value: Vec<u8> },
    /// A well-formed duration outside `min_ms..=max_ms`.
    DurationRange { name: &'static str, min_ms: i128, max_ms: i128 },
    /// A parameter combination whose full reset time exceeds 100 years.
    ResetTooLong { formula: &'static str },
    /// Any other specific refusal; the text follows `ERR `.
    Invalid(String),
}

/// Renders user bytes for an error message: printable ASCII as is, everything else as `\xNN`,
/// at most 64 input bytes.
pub fn escape(bytes: &[u8]) -> String {
    const MAX: usize = 64;
    let mut out = String::new();
    for &b in bytes.iter().take(MAX) {
        match b {
            b'\\' | b'\'' => {
                out.push('\\');
                out.push(char::from(b));
            }
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > MAX {
        out.push_str("...");
    }
    out
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::WrongArity => write!(f, "ERR wrong number of arguments"),
            ArgError::UnknownOption(token) => {
                write!(f, "ERR syntax error: unknown option '{}'", escape(token))
            }
            ArgError::RepeatedOption(name) => {
                write!(f, "ERR syntax error: option {name} given more than once")
            }
            ArgError::MissingValue(name) => write!(f, "ERR syntax error: {name} needs a value"),
            ArgError::Conflict(a, b) => {
                write!(f, "ERR syntax error: {a} and {b} cannot be combined")
            }
            ArgError::Integer { name, min, max } => {
                write!(f, "ERR {name} must be an integer between {min} and {max}")
            }
            ArgError::InvalidDuration { name, value } => write!(
                f,
                "ERR invalid duration '{}' for {name} (use an integer with an optional unit ms, s, m, h or d)",
                escape(value)
            ),
            ArgError::DurationRange { name, min_ms, max_ms } => {
                write!(f, "ERR {name} must be a duration between {min_ms}ms and {max_ms}ms")
            }
            ArgError::ResetTooLong { formula } => write!(
                f,
                "ERR parameters give a full reset time ({formula}) above 100 years"
            ),
            ArgError::Invalid(text) => write!(f, "ERR {text}"),
        }
    }
}

impl ArgError {
    /// The reply text of this error in a call of `command` (its lower-case name): the arity
    /// error names the command, as the server's own does; every other error is its `Display`.
    pub fn reply_for(&self, command: &str) -> String {
        match self {
            ArgError::WrongArity => {
                format!("ERR wrong number of arguments for '{command}' command")
            }
            other => other.to_string(),
        }
    }
}

impl std::error::Error for ArgError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_printable_and_hexes_the_rest() {
        assert_eq!(escape(b"abc"), "abc");
        assert_eq!(escape(b"a\xffb\r\n"), "a\\xffb\\x0d\\x0a");
        assert_eq!(escape(b"it's"), "it\\'s");
        assert_eq!(escape(&[b'x'; 70]).len(), 67);
    }

    #[test]
    fn the_arity_error_names_the_command() {
        assert_eq!(
            ArgError::WrongArity.reply_for("rl.policy"),
            "ERR wrong number of arguments for 'rl.policy' command"
        );
        assert_eq!(
            ArgError::MissingValue("AT").reply_for("rl.token"),
            "ERR syntax error: AT needs a value"
        );
    }

    #[test]
    fn messages_start_with_an_error_code() {
        let all = [
            ArgError::WrongArity,
            ArgError::UnknownOption(b"FOO".to_vec()),
            ArgError::RepeatedOption("COST"),
            ArgError::MissingValue("AT"),
            ArgError::Conflict("NODELAY", "DELAY"),
            ArgError::Integer { name: "capacity", min: 1, max: 1_000_000_000_000 },
            ArgError::InvalidDuration { name: "period", value: b"abc".to_vec() },
            ArgError::DurationRange { name: "period", min_ms: 1, max_ms: 5 },
            ArgError::ResetTooLong { formula: "capacity × period / rate" },
            ArgError::Invalid("x".into()),
        ];
        for e in all {
            assert!(e.to_string().starts_with("ERR "), "{e}");
        }
        assert_eq!(
            ArgError::Integer { name: "capacity", min: 1, max: 1_000_000_000_000 }.to_string(),
            "ERR capacity must be an integer between 1 and 1000000000000"
        );
    }
}
