//! The transport: one connection to Redis and what travels over it.
//!
//! Where the connection runs (`background`, `home`), how it is made and kept
//! (`conn`, `connect`, `sentinel`, `silence`), the unlock messages it receives and whom they wake (`pubsub`, `wake`),
//! the Lua scripts it sends (`lua`, `script_cache`, `scripts`), the replicas it
//! waits for (`replication`), and the names of the keys and channels on the wire
//! (`keys`). Nothing here names the engine, a kind or a face type other than the
//! configuration and the one error enum.

pub(crate) mod background;
pub(crate) mod conn;
pub(crate) mod connect;
pub(crate) mod durability;
pub(crate) mod home;
pub(crate) mod keys;
pub(crate) mod lua;
pub(crate) mod pubsub;
pub(crate) mod replication;
pub(crate) mod script_cache;
pub(crate) mod scripts;
#[cfg(feature = "sentinel")]
pub(crate) mod sentinel;
pub(crate) mod silence;
pub(crate) mod wake;
