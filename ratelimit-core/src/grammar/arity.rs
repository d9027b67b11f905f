//! How many arguments each command takes — its **arity**, counted as Redis counts it: the
//! command's name included (and a subcommand's: `RL.POLICY SET name limit` is 4), exactly `n`
//! or at least `n`.
//!
//! The module declares these numbers to the server in `COMMAND INFO` (`commands::specs`,
//! whose test checks that they agree with [`ARITIES`]), so the server refuses a call with too
//! few (or, when exact, too many) arguments before the module runs. Every parser in `grammar`
//! still refuses any other count itself with [`ArgError::WrongArity`] (which the shell renders
//! `ERR wrong number of arguments for '<command>' command`), so no handler counts arguments;
//! `arity_tests.rs` runs each parser one argument short of its arity (and one past an exact
//! one).

use crate::grammar::error::ArgError;

/// A command's arity, its name (and a subcommand's name) included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many arguments.
    Exactly(usize),
    /// This many or more.
    AtLeast(usize),
}

impl Arity {
    /// As `COMMAND INFO`'s `arity`: `n` for exactly `n`, `-n` for at least `n`.
    pub const fn redis(self) -> i32 {
        match self {
            Arity::Exactly(n) => n as i32,
            Arity::AtLeast(n) => -(n as i32),
        }
    }

    /// `Ok` when `count` arguments (the name included) fit, else [`ArgError::WrongArity`].
    #[inline]
    pub fn check(self, count: usize) -> Result<(), ArgError> {
        let fits = match self {
            Arity::Exactly(n) => count == n,
            Arity::AtLeast(n) => count >= n,
        };
        if fits {
            Ok(())
        } else {
            Err(ArgError::WrongArity)
        }
    }
}

/// The argument at `index`, which the command's arity guarantees (the key at 1), or the arity
/// error.
#[inline]
pub fn argument<T>(args: &[T], index: usize) -> Result<&T, ArgError> {
    args.get(index).ok_or(ArgError::WrongArity)
}

/// The arguments in `range`, which the parsed request guarantees (`RL.ALL`'s keys), or the
/// arity error.
#[inline]
pub fn arguments<T>(args: &[T], range: std::ops::Range<usize>) -> Result<&[T], ArgError> {
    args.get(range).ok_or(ArgError::WrongArity)
}

/// Refuses a call of more than `most` arguments (its name included) before any parsing: the
/// shell's fixed argument buffer holds `most`, more than any valid call of the command has.
#[inline]
pub fn check_most(count: usize, most: usize) -> Result<(), ArgError> {
    if count > most {
        return Err(ArgError::Invalid("syntax error: too many arguments".into()));
    }
    Ok(())
}

/// `RL.TOKEN key capacity rate period [option ...]`.
pub const TOKEN: Arity = Arity::AtLeast(5);
/// `RL.PERIOD key limit period [option ...]`.
pub const PERIOD: Arity = Arity::AtLeast(4);
/// `RL.SLIDE key limit window [option ...]`.
pub const SLIDE: Arity = Arity::AtLeast(4);
/// `RL.LEAKY key capacity rate period [option ...]`.
pub const LEAKY: Arity = Arity::AtLeast(5);
/// `CL.THROTTLE key max_burst count period [quantity] [option ...]`.
pub const THROTTLE: Arity = Arity::AtLeast(5);
/// `RL.ALL numkeys key [key ...] limit [limit ...] [option ...]`: the shortest call is one key
/// under a policy, `RL.ALL 1 k POLICY p`.
pub const ALL: Arity = Arity::AtLeast(5);
/// `RL.REFUND key count [AT ms]`.
pub const REFUND: Arity = Arity::AtLeast(3);
/// `RL.CHARGE key count [AT ms]`.
pub const CHARGE: Arity = Arity::AtLeast(3);
/// `RL.ACQUIRE key limit lease [option ...]`.
pub const ACQUIRE: Arity = Arity::AtLeast(4);
/// `RL.RELEASE key id [AT ms]`.
pub const RELEASE: Arity = Arity::AtLeast(3);
/// `RL.PEEK key`.
pub const PEEK: Arity = Arity::Exactly(2);
/// `RL.INFO key`.
pub const INFO: Arity = Arity::Exactly(2);
/// `RL.RESTORE key payload`.
pub const RESTORE: Arity = Arity::Exactly(3);
/// `RL.HIT name key [option ...]`.
pub const HIT: Arity = Arity::AtLeast(3);
/// `RL.TOP [option ...]`.
pub const TOP: Arity = Arity::AtLeast(1);
/// `RL.POLICY SET name limit [option ...]`.
pub const POLICY_SET: Arity = Arity::AtLeast(4);
/// `RL.POLICY GET name [FOR key | CANDIDATE]`.
pub const POLICY_GET: Arity = Arity::AtLeast(3);
/// `RL.POLICY DEL name [FOR key | CANDIDATE]`.
pub const POLICY_DEL: Arity = Arity::AtLeast(3);
/// `RL.POLICY LIST [name]`.
pub const POLICY_LIST: Arity = Arity::AtLeast(2);
/// `RL.POLICY PROMOTE name`.
pub const POLICY_PROMOTE: Arity = Arity::Exactly(3);
/// `RL.POLICY HELP`.
pub const POLICY_HELP: Arity = Arity::Exactly(2);
/// `RL.POLICY STATS name`.
pub const POLICY_STATS: Arity = Arity::Exactly(3);
/// `RL.POLICY RESETSTAT`.
pub const POLICY_RESETSTAT: Arity = Arity::Exactly(2);

/// Every command's arity by its lower-case name (a subcommand as `container|sub`, as
/// `COMMAND INFO` names it).
pub const ARITIES: &[(&str, Arity)] = &[
    ("rl.token", TOKEN),
    ("rl.period", PERIOD),
    ("rl.slide", SLIDE),
    ("rl.leaky", LEAKY),
    ("cl.throttle", THROTTLE),
    ("rl.all", ALL),
    ("rl.refund", REFUND),
    ("rl.charge", CHARGE),
    ("rl.acquire", ACQUIRE),
    ("rl.release", RELEASE),
    ("rl.peek", PEEK),
    ("rl.info", INFO),
    ("rl.restore", RESTORE),
    ("rl.hit", HIT),
    ("rl.top", TOP),
    ("rl.policy|set", POLICY_SET),
    ("rl.policy|get", POLICY_GET),
    ("rl.policy|del", POLICY_DEL),
    ("rl.policy|list", POLICY_LIST),
    ("rl.policy|promote", POLICY_PROMOTE),
    ("rl.policy|help", POLICY_HELP),
    ("rl.policy|stats", POLICY_STATS),
    ("rl.policy|resetstat", POLICY_RESETSTAT),
];

/// The arity of the command named `name` (lower case; a subcommand as `container|sub`).
pub fn arity_of(name: &str) -> Option<Arity> {
    ARITIES.iter().find(|(n, _)| *n == name).map(|(_, arity)| *arity)
}

#[cfg(test)]
#[path = "arity_tests.rs"]
mod tests;
