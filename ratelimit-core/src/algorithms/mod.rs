//! The algorithms, each a pure function `(state, params, now_ms, cost) -> (decision, new
//! state)` with its own parameters and stored state: `token` (`RL.TOKEN`), `period`
//! (`RL.PERIOD`), `slide` (`RL.SLIDE`: an exact log or bucketed counters), `leaky`
//! (`RL.LEAKY`), `gcra` (`CL.THROTTLE`), `lease` (`RL.ACQUIRE` / `RL.RELEASE`), `ban` (the
//! penalty box beside any of them); and what they share: `limiter` (the enum of all stored
//! limiters and the parameter-change rule), `state` (instants, expiry as missing, refunds,
//! charges, debts), `decision` (the five-field answer), `arith` (exact integer helpers).

pub mod arith;
pub mod ban;
pub mod decision;
pub mod gcra;
pub mod leaky;
pub mod lease;
pub mod limiter;
pub mod period;
pub mod slide;
pub mod state;
pub mod token;
