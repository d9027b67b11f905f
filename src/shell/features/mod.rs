//! The features layer: what the module keeps beside the keys. Waiting on the server (`wait`),
//! the policy table (`policies`) and its RDB storage (`persist`), `RL.TOP`'s summary of refused
//! keys (`top`), the `INFO ratelimit` counters (`stats`).
//!
//! Imports the execution and server layers, never the command layer.

pub mod persist;
pub mod policies;
pub mod stats;
pub mod top;
pub mod wait;
