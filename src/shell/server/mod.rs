//! The server layer, the lowest: everything that speaks to Redis or Valkey directly. The
//! module API table resolved once (`api`), replies (`reply`), the RAII key (`key`), value
//! words and the module's one table of interned parameter sets (`values`), the data type's
//! callbacks (`datatype`), the server and keyspace events, subscribed only there and fanned
//! out to each layer's handlers with their data decoded (`events`), cluster slots and atomic
//! slot migration (`slots`), configuration (`config`), the version (`version`), which
//! propagation form is exact and performing it (`propagation`), command registration
//! (`registry`); blocked clients and their held arguments (`blocking`), module timers
//! (`timers`); the RDB/AOF I/O of the data types' callbacks (`rdb`), state saved beside the
//! keyspace: a bytes-valued type with aux data, the save and load events (`snapshot`).
//!
//! Imports nothing from the layers above (`execution`, `features`, `commands`).

pub mod api;
pub mod blocking;
pub mod config;
pub mod datatype;
pub mod events;
pub mod key;
pub mod propagation;
pub mod rdb;
pub mod registry;
pub mod reply;
pub mod slots;
pub mod snapshot;
pub mod timers;
pub mod values;
pub mod version;
