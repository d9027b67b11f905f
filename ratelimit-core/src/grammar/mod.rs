//! Every command's argument grammar, as the module's replies name it: the shared option
//! keywords, counts and durations (`args`), one parsed request per command (`request`), the
//! errors with their exact reply texts (`error`), and the fixed inline lists that hold
//! `RL.ALL`'s per-key parts (`bounded`).

pub mod args;
pub mod bounded;
pub mod error;
pub mod request;
