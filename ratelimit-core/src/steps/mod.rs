//! The per-key steps a command takes: judge a request against whatever the key holds
//! (`judge`: the limiting commands and `RL.ALL`), give permits back (`refund`), take them past
//! the limit (`charge`), acquire and release leases (`lease_key`), read without changing
//! (`inspect`: `RL.PEEK`, `RL.INFO`). Each returns the answer and the change to apply.

pub mod at_most;
pub mod charge;
pub mod inspect;
pub mod judge;
pub mod lease_key;
pub mod refund;
