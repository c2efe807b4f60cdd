#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod background;
mod cleanup;
mod client;
mod config;
mod conn;
mod connect;
mod error;
mod home;
mod keys;
mod ledger;
mod lock;
mod lua;
mod owner;
mod pubsub;
mod replication;
mod scripts;
#[cfg(feature = "sentinel")]
mod sentinel_conn;
mod sync;
mod trace;
mod validity;
mod wait;
mod watchdog;

pub use client::Client;
pub use config::{Config, TlsConfig, MAX_DURATION, MAX_RETRY_ATTEMPTS};
pub use error::{Error, RedisErrorKind, RedisFailure, Result};
pub use keys::MAX_NAME_LEN;
pub use lock::{
    BackOff, LockGuard, MultiGuard, MultiLock, RFencedLock, RLock, RReadWriteLock, RedGuard,
    RedLock, RemainingTtl,
};
pub use owner::current_id;
pub use sync::{PermitId, RCountDownLatch, RPermitExpirableSemaphore, RSemaphore};
