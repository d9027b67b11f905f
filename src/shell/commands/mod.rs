//! The command layer, the highest: the command table (`table`: each command's frame, from the
//! arguments Redis passes to the reply) and the command metadata registered with the server
//! (`specs`, data read by `server::registry`).
//!
//! Imports every layer below; nothing imports it but the module's entry points.

pub mod policy;
pub mod specs;
pub mod table;
