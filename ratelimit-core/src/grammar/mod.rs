//! Every command's argument grammar, as the module's replies name it: how many arguments each
//! command takes (`arity`), the shared option keywords, counts and durations (`args`), the
//! limiting, `RL.ALL`, refund and lease requests (`request`), the key-reading commands
//! (`inspect`: `RL.PEEK`, `RL.INFO`, `RL.RESTORE`), `RL.POLICY`'s subcommands and `RL.HIT`
//! (`policy`), `RL.TOP` (`top`), the errors with their exact reply texts (`error`), and the fixed inline lists
//! that hold `RL.ALL`'s per-key parts (`bounded`). The shell's handlers call these parsers and
//! act on their typed results; none counts or walks arguments itself.

pub mod args;
pub mod arity;
pub mod bounded;
pub mod error;
pub mod inspect;
pub mod policy;
pub mod request;
pub mod top;
