//! The execution layer: one call (`call`: its arguments, errors, clock, how a judged change is
//! applied to its key and propagated), and the requests judged and applied on their keys
//! (`limiting`: the limiting commands, `RL.ALL`, `RL.REFUND`, `RL.CHARGE`; `leases`:
//! `RL.ACQUIRE`, `RL.RELEASE`). Everything but the reply and the waiters.
//!
//! Imports only the server layer.

pub mod call;
pub mod leases;
pub mod limiting;
