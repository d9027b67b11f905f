//! The command layer, the highest: the command table (`table`: the entry points and the frame
//! every command shares), one file per command family — `limit` (the limiting commands,
//! `RL.ALL`, `RL.REFUND`, `RL.CHARGE`), `leases` (`RL.ACQUIRE`, `RL.RELEASE`), `inspect`
//! (`RL.PEEK`, `RL.INFO`, `RL.RESTORE`), `policy` (`RL.POLICY`, `RL.HIT`), `top` (`RL.TOP`) —
//! and the command metadata registered with the server (`specs`, read by `server::registry`).
//! No `unsafe` here: replies, arguments and propagation go through `server::reply`, `Api`
//! and `Call`.
//!
//! Imports every layer below; nothing imports it but the module's entry points.

pub mod inspect;
pub mod leases;
pub mod limit;
pub mod policy;
pub mod specs;
pub mod table;
pub mod top;
