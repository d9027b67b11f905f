//! The features the module keeps beside its keys, as pure structures the shell drives with
//! the clock: named policies (`policy`), `RL.TOP`'s summary of refused keys (`top`), a key's
//! queue of waiters (`waiters`).

pub mod policy;
pub mod top;
pub mod waiters;
