//! Distributed locks over Redis for tokio, wire-compatible with the Java library
//! [Redisson].
//!
//! The locks live on the same keys, hash fields, channels and unlock messages as
//! Redisson's, so a Java service and a Rust service can contend on one lock while a
//! system migrates from one to the other. Waiters sleep on Redis pub/sub instead of
//! polling, holds taken without a lease are renewed by a watchdog, every guard knows
//! until when its hold is surely valid, and every waiting call is cancel safe.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use redisson_locks::{Client, Config};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), redisson_locks::Error> {
//!     let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
//!     let lock = client.get_lock("orders:42")?;
//!
//!     // Wait as long as it takes; the watchdog renews the hold while it is held.
//!     // Keep the guard in a variable: `let _ = lock.lock().await?` would drop it,
//!     // and so release the lock, on the spot.
//!     let guard = lock.lock().await?;
//!     // ... the critical section ...
//!     guard.unlock().await?;
//!
//!     // The closure form: acquire, run the section inside the hold's scope
//!     // (where this lock re-enters), release.
//!     lock.with(|| async { /* the critical section */ }).await?;
//!
//!     // Try for up to a second; hold for at most ten, without renewal.
//!     if let Some(guard) = lock
//!         .try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10))
//!         .await?
//!     {
//!         guard.unlock().await?;
//!     }
//!     Ok(())
//! }
//! ```
//!
//! A [`Client`] is one multiplexed connection plus the lock machinery around it
//! (one subscriber, one renewal task, its own background thread); it is cheap to
//! clone, and every lock handle it hands out does no I/O until a method is called.
//! A lock call returns a [`LockGuard`]: [`unlock`](LockGuard::unlock) releases the
//! hold and reports errors, and dropping the guard releases it too (see the guard's
//! `Drop` section).
//!
//! # Lock kinds
//!
//! | Kind | Get it with | Redisson |
//! |---|---|---|
//! | Reentrant lock | [`Client::get_lock`] → [`RLock`] | `getLock` |
//! | Fair lock: strictly first come, first served | [`Client::get_fair_lock`] → [`RLock`] | `getFairLock` |
//! | Fenced lock: a growing fencing token per acquisition | [`Client::get_fenced_lock`] → [`RFencedLock`] | `getFencedLock` |
//! | Spin lock: no pub/sub, waiters back off ([`BackOff`]) | [`Client::get_spin_lock`], [`Client::get_spin_lock_with_backoff`] → [`RLock`] | `getSpinLock` |
//! | Non-reentrant lock, plain or fair | [`Client::get_non_reentrant_lock`], [`Client::get_non_reentrant_fair_lock`] → [`RLock`] | `getNonReentrantLock`, `getNonReentrantFairLock` |
//! | Read-write lock: shared readers, one writer | [`Client::get_read_write_lock`] → [`RReadWriteLock`] | `getReadWriteLock` |
//! | Multi-lock: all of several locks (any clients) or none | [`MultiLock::new`] → [`MultiGuard`] | `getMultiLock(locks...)` |
//! | Single-hash multi-lock: several values of one group | [`Client::get_multi_lock`] → [`RLock`] | `getMultiLock(group, values)` |
//! | RedLock: a quorum of independent servers | [`RedLock::new`] → [`RedGuard`] | `getRedLock` |
//! | Leader election on a fenced lock's keys: epochs, loss, changes | [`Client::get_leader_election`] → [`LeaderElection`] → [`Leadership`] | none (`RFencedLock` holders lead) |
//!
//! Every single-name kind is an [`RLock`] (the fenced lock through `Deref`), so the
//! acquiring methods ([`lock`](RLock::lock), [`try_lock`](RLock::try_lock),
//! [`try_lock_wait`](RLock::try_lock_wait), the `_with_lease` forms), the queries
//! and [`force_unlock`](RLock::force_unlock) are the same everywhere; only the
//! scripts behind them differ.
//!
//! Beyond Redisson: a term limit for any hold ([`Config::max_hold`],
//! [`RLock::with_max_hold`]), expirable permits the watchdog renews
//! ([`RPermitExpirableSemaphore::acquire_renewed`] → [`Permit`]), and a store
//! that refuses a stale fencing token's write ([`Client::get_fenced_store`] →
//! [`FencedStore`]).
//!
//! Re-entry is explicit: acquisitions run inside a hold's scope
//! ([`RLock::with`], [`LockGuard::scope`]) re-enter it, while other futures, even
//! sibling futures of the same task, are separate owners and take turns.
//! [`RLock::with_task_owner`] gives Redisson's owner-is-the-thread rule for code
//! ported line by line, and [`RLock::with_owner_id`] names an owner explicitly;
//! [`Config::owner_mode`] = [`OwnerMode::Task`] gives Java's rule to every handle
//! of a client. A wait for a hold of the waiter's own task outside its scope (a
//! Java nested `lock()` or downgrade ported literally) is a *self-wait*: warned
//! about after [`Config::self_wait_warning`], or refused at once with
//! [`Error::WouldDeadlock`] under [`SelfWait::Refuse`]. See `PORTING.md`, "First
//! choose who owns a hold".
//!
//! # Synchronizers
//!
//! | Kind | Get it with | Redisson |
//! |---|---|---|
//! | Semaphore | [`Client::get_semaphore`] → [`RSemaphore`] | `getSemaphore` |
//! | Permit-expirable semaphore: permits with ids and leases | [`Client::get_permit_expirable_semaphore`] → [`RPermitExpirableSemaphore`] | `getPermitExpirableSemaphore` |
//! | Count-down latch | [`Client::get_count_down_latch`] → [`RCountDownLatch`] | `getCountDownLatch` |
//!
//! # Who holds what
//!
//! [`Client::inspect`] reads everything under one name in one read-only script:
//! its kind (told from the layout, whoever wrote it: this crate or Java
//! Redisson), every holder with its client, thread, hold count, mode and lease
//! left, a read-write lock's read leases, a fair lock's queue with deadlines, a
//! semaphore's permits and leases, a latch's count, a fenced lock's token, and
//! which are this client's. Each client of this crate says who it is on the
//! server ([`Config::announce`], [`Config::client_name`]), so a holder carries
//! its host and process id ([`inspect::Identity`]). [`Client::scan`] lists a
//! pattern's objects (SCAN, on every primary), [`Client::watch`] is a live view,
//! [`Client::force_unlock`] frees a stuck name of any lock kind. The
//! `redisson-locks` tool (feature `cli`) does the same at a shell, and the
//! `metrics` feature measures waits, holds, timeouts and lost leases through the
//! [`metrics`](https://docs.rs/metrics) facade (the repository's
//! `docs/operating.md` has the table, and `docs/cli.md` the tool).
//!
//! # Configuration
//!
//! [`Config::new`] takes an address, [`Config::cluster`] a cluster's seed nodes,
//! [`Config::sentinel`] a primary's name and its Sentinels; the settings most
//! services need are chainable ([`Config::with_password`],
//! [`Config::with_timeout`], [`Config::with_lock_watchdog_timeout`], ...), and
//! the rest are public fields with Redisson's defaults. A configuration also
//! loads from a URL ([`Config::from_url`]), from Redisson's JSON layout
//! ([`Config::from_json`]) and, with the `yaml` feature, from its YAML file
//! (`Config::from_yaml`, with `${VAR:-default}` substitution). Every failure
//! is one [`Error`] enum with `is_*` predicates.
//!
//! # Feature flags
//!
//! | Feature | Default | What it adds |
//! |---|---|---|
//! | `cluster` | yes | Redis Cluster (`Config::cluster_nodes`), with sharded pub/sub on Redis 7+. |
//! | `sentinel` | yes | Redis Sentinel (`Config::sentinel_addresses`), following failovers. |
//! | `tracing` | yes | Events and spans through the [`tracing`](https://docs.rs/tracing) crate. |
//! | `tls` | no | `rediss://` addresses through rustls, with certificates from `Config::tls`. |
//! | `blocking` | no | A blocking API for thread-based code (`redisson_locks::blocking`): one owner per OS thread, as in Java. |
//! | `yaml` | no | `Config::from_yaml`, reading Redisson's YAML config file. |
//! | `serde` | no | `serde::Deserialize` for `Config`, to embed it in a service's own config. |
//! | `metrics` | no | Wait and hold histograms, counters and gauges through the [`metrics`](https://docs.rs/metrics) facade. |
//! | `cli` | no | The `redisson-locks` command-line tool: `list`, `show`, `watch`, `deadlocks`, `doctor`, `force-unlock`, `run`, `run-permit`, `elect` (with `yaml` and `tls`). |
//! | `test-util` | no | `redisson_locks::testing`: a throwaway server for your own tests, and faults aimed at your locks. |
//! | `measure-heuristics` | no | A measuring hook, not for production: `REDISSON_LOCKS_WITHOUT=name,...` switches engine heuristics off (the repository's `BENCHMARKS.md`). |
//!
//! # Requirements
//!
//! Redis 6.2 or newer, or Valkey (the client speaks RESP3); the suite runs on
//! Redis 6.2, 7.0 and 8.2 and Valkey 8.1 and 9.1 (the repository's
//! `TOPOLOGY.md`, "Servers tested"). Sharded pub/sub in a cluster needs 7.0. Run the server with
//! `maxmemory-policy noeviction`: an evicted lock key is a released lock
//! ([`Client::warnings`] says so at connect time when it is not set).
//!
//! # Where to go next
//!
//! - [`Client`] to connect, and [`RLock`] for the methods every lock shares, each
//!   with an example and its `# Cancel safety` and `# Errors` sections.
//! - [`LockGuard`] for what a hold knows about itself: its validity
//!   ([`valid_for`](LockGuard::valid_for), [`lease_lost`](LockGuard::lease_lost)),
//!   its scope, and what dropping it does.
//! - [`porting`]: every Java `RLock` method and its Rust form, and where the
//!   semantics differ from Redisson's.
//! - `testing` (feature `test-util`): a throwaway server for your own tests,
//!   and faults aimed at your locks (a lease ended now, a pause, cut
//!   connections), with a complete example test.
//! - The repository's `DESIGN.md` (key schema, script contracts, the wait loop and
//!   the watchdog), `TOPOLOGY.md` (cluster, Sentinel, replicas, RedLock) and
//!   `BENCHMARKS.md`, and its `examples/` (`demo`, `fencing`, `lockbench`).
//!
//! [Redisson]: https://github.com/redisson/redisson
#![forbid(unsafe_code)]

#[cfg(feature = "blocking")]
pub mod blocking;
mod client;
mod config;
mod engine;
mod entry;
mod error;
pub mod inspect;
mod leader;
mod lock;
mod metrics;
mod numeral;
mod sync;
#[cfg(feature = "test-util")]
pub mod testing;
mod trace;
mod transport;

pub use client::Client;
pub use config::{
    redact_address, Config, Durability, OnDeadlock, OwnerMode, SelfWait, TlsConfig, MAX_DURATION,
    MAX_RETRY_ATTEMPTS,
};
pub use engine::deadlock::{Deadlock, WaitStep};
pub use entry::{CollectionLocks, CollectionType, EntryKey};
pub use error::{Error, RedisErrorKind, RedisFailure, Result};

pub use engine::owner::current_id;
pub use leader::{Leader, LeaderChange, LeaderElection, Leadership, Observer};
pub use lock::{
    BackOff, FencedStore, FencedWrite, LockGuard, MultiGuard, MultiLock, RFencedLock, RLock,
    RReadWriteLock, RedGuard, RedLock, RemainingTtl,
};
pub use sync::{
    FairPermits, Permit, PermitId, RCountDownLatch, RFairSemaphore, RPermitExpirableSemaphore,
    RSemaphore,
};
pub use transport::keys::MAX_NAME_LEN;

#[doc = include_str!("../PORTING.md")]
pub mod porting {}

// The README's examples, compiled (and run where not `no_run`) as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
