//! The forms a limiter takes outside a call: the versioned binary encoding for RDB, `DUMP` and
//! the AOF (`codec`), the value held inline in a key's 64-bit value word (`inline`), the
//! 48-byte packed box (`packed`), and the one trait a key's limiter is judged through, wherever
//! it is held (`held`). `packed` and the sliding log's buffer (`algorithms::slide::log`) are
//! the crate's only `unsafe` code.

pub mod codec;
pub mod held;
pub mod inline;
pub mod packed;
