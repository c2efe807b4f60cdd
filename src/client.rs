//! The cloneable client handle.

use std::sync::Arc;

use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::lock::{
    BackOff, Fair, GroupMembers, NonReentrant, NonReentrantFair, RFencedLock, RLock,
    RReadWriteLock, Reentrant, Spin,
};
use crate::transport::keys::{validate_cluster_name, validate_name};

/// A connection to Redis and the lock machinery around it: a cheap, cloneable handle.
///
/// One client owns one multiplexed connection (commands and unlock messages, as
/// RESP3 pushes), one renewal task and one subscriber, whatever the number of locks
/// and waiting tasks. It has its own random UUID, the first half of every owner
/// field it writes, so two clients (even in one process) are two owners, as two
/// Redisson instances are.
///
/// Everything a client does in the background (the connection's driver and
/// re-dials, renewals, unlock messages, the releases of dropped guards) runs on a
/// thread of its own with its own small runtime, so a client keeps working when
/// the runtime that connected it is gone or idle, and is usable from any runtime.
///
/// The client lives as long as any handle, lock or guard of it. When the last
/// goes, holds still registered (detached guards) are released, and queued
/// releases are sent from the client's thread, for at most [`Config::timeout`]
/// (plus a little). [`close`](Client::close) waits for that; a drop never blocks
/// inside a runtime (the runtime's shutdown waits for it instead) and waits on a
/// plain thread, so a client closed or dropped before a process exits leaves no
/// hold behind. A process that is killed leaves its holds to their leases.
///
/// ```no_run
/// use redisson_locks::{Client, Config};
///
/// # async fn demo() -> Result<(), redisson_locks::Error> {
/// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
/// let lock = client.get_lock("orders:42")?;
/// let guard = lock.lock().await?;
/// // ... the critical section ...
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Engine>,
}

impl Client {
    /// The shared state, for the blocking facade.
    #[cfg(feature = "blocking")]
    pub(crate) fn inner(&self) -> &Arc<Engine> {
        &self.inner
    }
}

impl Client {
    /// Ends this handle and waits, without blocking the thread, for what the
    /// client still has to send. When this is the client's last handle (no clone,
    /// lock, guard or synchronizer of it left), that is the whole client: its
    /// detached holds are released, the releases queued by dropped guards go out
    /// (for at most [`Config::timeout`] plus a little), its renewals, subscriber
    /// and connection stop, and its thread ends before this returns. Otherwise
    /// the client lives on with the other handles, and this waits only for the
    /// releases queued so far.
    ///
    /// Dropping the last handle does the same without waiting: the client's own
    /// thread finishes the work, and a runtime that shuts down (the end of
    /// `#[tokio::main]`) waits for it; on a plain thread the drop waits. So call
    /// `close` where the process must know that every release has been sent
    /// before it goes on, for example before it exits from a `LocalSet`.
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// drop(guard); // its release is queued on the client's thread
    /// drop(lock);
    /// client.close().await; // sent, and the client is gone
    /// # Ok(()) }
    /// ```
    pub async fn close(self) {
        Engine::close(self.inner).await;
    }

    /// Validates `config`, starts the client's background thread, connects, and
    /// starts its renewal and subscriber tasks there. Must be called inside a tokio
    /// runtime (with its time driver); the client can then be used from any.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_locks::{Client, Config};
    ///
    /// #[tokio::main]
    /// async fn main() -> Result<(), redisson_locks::Error> {
    ///     let mut config = Config::from_url("redis://127.0.0.1:6379")?;
    ///     config.connect_timeout = Duration::from_secs(2);
    ///     let client = Client::connect(config).await?;
    ///     // Cheap to clone: hand a copy to every task that takes locks.
    ///     let worker = client.clone();
    ///     tokio::spawn(async move {
    ///         let guard = worker.get_lock("orders:42")?.lock().await?;
    ///         guard.unlock().await
    ///     })
    ///     .await
    ///     .expect("the task panicked")?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] for a bad configuration; [`Error::Redis`] when the server
    /// cannot be reached within `connect_timeout` or refuses the credentials.
    pub async fn connect(config: Config) -> Result<Client> {
        let engine = Engine::start(config).await?;
        engine
            .deadlocks
            .set_walker(Box::new(crate::inspect::GraphWalker));
        Ok(Client {
            inner: Arc::new(engine),
        })
    }

    /// Problems with the server's configuration found at connect, in words. Today
    /// one check: a `maxmemory-policy` other than `noeviction` lets Redis evict lock
    /// keys under memory pressure, which silently releases locks. A server that
    /// refuses `CONFIG GET` (an ACL, a managed service) is not checked.
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
    /// for warning in client.warnings() {
    ///     // Worth an operator's attention, not a reason to stop.
    ///     eprintln!("redis: {warning}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// How many script calls found their script gone from the server's cache
    /// (NOSCRIPT: after a restart, a failover, SCRIPT FLUSH, or an eviction
    /// from the EVAL cache of Redis 7.4 and newer) and were sent again with
    /// the script's text; each such miss also loads every script again. The
    /// client loads (pins) its scripts when it connects, so on a healthy
    /// server this stays at 0; the metrics feature counts the same as
    /// `redisson_locks_script_fallbacks_total`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) {
    /// if client.script_fallbacks() > 0 {
    ///     eprintln!("the server lost this client's scripts {} times", client.script_fallbacks());
    /// }
    /// # }
    /// ```
    pub fn script_fallbacks(&self) -> u64 {
        self.inner.conn.scripts().fallbacks()
    }

    /// This client's id: a random UUID v4, the first half of its owner fields.
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo(config: Config) -> Result<(), redisson_locks::Error> {
    /// let a = Client::connect(config.clone()).await?;
    /// let b = Client::connect(config).await?;
    /// // Two clients are two owners, as two Redisson instances are.
    /// assert_ne!(a.id(), b.id());
    /// // A lock's hash names its holder `<client id>:<owner id>` (see it with
    /// // `HGETALL <name>` in redis-cli): log the id to tell which process that is.
    /// eprintln!("lock owner fields of this process start with {}:", a.id());
    /// # Ok(()) }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The configuration this client was made with.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) {
    /// let config = client.config();
    /// // A hold taken without a lease lasts this long unless the watchdog renews it.
    /// let lease = config.lock_watchdog_timeout;
    /// let (address, db) = (&config.address, config.database);
    /// eprintln!("locks on {address} (db {db}), renewed leases of {lease:?}");
    /// # }
    /// ```
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// A reentrant lock (Redisson's `RLock`) named `name`. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// // ... the critical section ...
    /// guard.unlock().await?;
    ///
    /// // The name is checked here, before any I/O.
    /// assert!(client.get_lock("").unwrap_err().is_invalid_argument());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty name, one longer than
    /// [`MAX_NAME_LEN`](crate::MAX_NAME_LEN), or, in a cluster, one with an
    /// unbalanced or empty `{` (its keys would land in different slots).
    pub fn get_lock(&self, name: impl Into<String>) -> Result<RLock> {
        let name = self.checked_name(name.into())?;
        Ok(RLock::new(self.inner.clone(), name, Arc::new(Reentrant)))
    }

    /// A fair lock (Redisson's `getFairLock`) named `name`: an [`RLock`] that hands
    /// the lock out strictly in the order waiters asked for it. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let printer = client.get_fair_lock("printer")?;
    /// assert!(printer.is_fair());
    /// // Waiters, in this process or any other, get in in the order they asked:
    /// // none is overtaken by a later one.
    /// let guard = printer.lock().await?;
    /// // ... print ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Result<RLock> {
        let name = self.checked_name(name.into())?;
        Ok(RLock::new(self.inner.clone(), name, Arc::new(Fair)))
    }

    /// A fenced lock (Redisson `getFencedLock`) named `name`: the reentrant lock,
    /// plus a fencing token with every acquisition, greater than every token
    /// drawn before for this name (see [`RFencedLock`]). No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_fenced_lock("ledger")?;
    /// let (guard, token) = lock.lock_and_get_token().await?;
    /// // Send `token` with every write: the store refuses one lower than the highest
    /// // it has seen, so a holder paused past its lease cannot overwrite.
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> Result<RFencedLock> {
        let name = self.checked_name(name.into())?;
        Ok(RFencedLock::new(self.inner.clone(), name))
    }

    /// A leader election named `name`, on the keys of the fenced lock `name`
    /// (see [`LeaderElection`](crate::LeaderElection)): the leader holds that
    /// lock and leads in the epoch of the token it drew, so a Java service
    /// holding Redisson's `RFencedLock(name)` leads too. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let election = client.get_leader_election("scheduler")?;
    /// let leadership = election.campaign().await?;
    /// println!("leading in epoch {}", leadership.epoch());
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_leader_election(&self, name: impl Into<String>) -> Result<crate::LeaderElection> {
        let name = self.checked_name(name.into())?;
        Ok(crate::LeaderElection::new(self.inner.clone(), name))
    }

    /// A spin lock (Redisson `getSpinLock`) named `name`, with Redisson's default
    /// back-off ([`BackOff::default`]): the reentrant lock's layout with no
    /// channel and no message; waiters back off and retry. For deployments whose
    /// ACLs forbid channels; it polls, so prefer [`get_lock`](Client::get_lock)
    /// where channels are allowed. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// // For a user whose ACL grants no pub/sub channel.
    /// let lock = client.get_spin_lock("batch")?;
    /// let guard = lock.lock().await?; // retries with back-off while another holds it
    /// guard.unlock().await?; // publishes no unlock message
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_spin_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.get_spin_lock_with_backoff(name, BackOff::default())
    }

    /// A spin lock with the given back-off (Redisson `getSpinLock(name, backOff)`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::BackOff;
    ///
    /// // A fixed pause between attempts, for a lock held only for moments.
    /// let every_20ms = BackOff::Constant(Duration::from_millis(20));
    /// let lock = client.get_spin_lock_with_backoff("batch", every_20ms)?;
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    ///
    /// // The back-off is checked here, before any I/O.
    /// let never = BackOff::Constant(Duration::ZERO);
    /// let err = client.get_spin_lock_with_backoff("batch", never).unwrap_err();
    /// assert!(err.is_invalid_argument());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock); [`Error::InvalidArgument`] for a zero
    /// pause, a multiplier of 0, or a maximum below the first pause.
    pub fn get_spin_lock_with_backoff(
        &self,
        name: impl Into<String>,
        backoff: BackOff,
    ) -> Result<RLock> {
        backoff.validate()?;
        let name = self.checked_name(name.into())?;
        Ok(RLock::new(
            self.inner.clone(),
            name,
            Arc::new(Spin { backoff }),
        ))
    }

    /// A non-reentrant lock (Redisson `getNonReentrantLock`) named `name`: the
    /// reentrant lock's layout, but an owner asking again for it while it holds it
    /// is refused at once with [`Error::AlreadyHeld`], as Redisson refuses it.
    /// Other owners wait as usual. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_non_reentrant_lock("once")?;
    /// let guard = lock.lock().await?;
    /// let again = guard.scope(lock.lock()).await; // the same owner asks again
    /// assert!(again.unwrap_err().is_already_held());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> Result<RLock> {
        let name = self.checked_name(name.into())?;
        Ok(RLock::new(self.inner.clone(), name, Arc::new(NonReentrant)))
    }

    /// A non-reentrant fair lock (Redisson `getNonReentrantFairLock`): the fair
    /// lock's layout and order, refusing an owner's second hold as
    /// [`get_non_reentrant_lock`](Client::get_non_reentrant_lock) does. No I/O
    /// happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_non_reentrant_fair_lock("migration")?;
    /// assert!(lock.is_fair()); // waiters get in in arrival order
    /// let guard = lock.lock().await?;
    /// let again = guard.scope(lock.lock()).await; // the same owner asks again
    /// assert!(again.unwrap_err().is_already_held());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> Result<RLock> {
        let name = self.checked_name(name.into())?;
        Ok(RLock::new(
            self.inner.clone(),
            name,
            Arc::new(NonReentrantFair),
        ))
    }

    /// A read-write lock (Redisson's `getReadWriteLock`) named `name`: shared
    /// readers, one exclusive writer. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let reading = rw.read_lock().lock().await?;
    /// let other_reader = rw.read_lock().lock().await?; // readers share it
    /// assert!(rw.write_lock().try_lock().await?.is_none()); // a writer must wait
    /// other_reader.unlock().await?;
    /// reading.unlock().await?;
    ///
    /// let writing = rw.write_lock().lock().await?; // alone
    /// writing.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> Result<RReadWriteLock> {
        let name = self.checked_name(name.into())?;
        Ok(RReadWriteLock::new(self.inner.clone(), name))
    }

    /// Redisson's single-hash multi-lock (`getMultiLock(group, values)`): all of
    /// the `values` of `group`, or none, taken by one script on one hash named
    /// `group`, so it is faster than a [`MultiLock`](crate::MultiLock) of
    /// separate locks and has no partial holds to undo. Reentrant, renewed by the
    /// watchdog, waiting on the group's unlock channel; an [`RLock`] like the
    /// others. Two group locks of one group exclude each other when they share a
    /// value. No I/O happens here.
    ///
    /// Each value is given as the bytes Redisson's codec makes of it (Redisson
    /// hashes the encoded value): for a Java side on `StringCodec`, a string's
    /// UTF-8 bytes, which is what `&str` values are.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let seats = client.get_multi_lock("flight:LH400", ["12A", "12B"])?;
    /// let guard = seats.lock().await?; // both seats, or wait
    /// // ... book them ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock) for `group`; [`Error::InvalidArgument`]
    /// for no values.
    pub fn get_multi_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> Result<RLock> {
        let group = self.checked_name(group.into())?;
        let ids: Vec<String> = values
            .into_iter()
            .map(|v| crate::transport::keys::group_member_id(v.as_ref()))
            .collect();
        if ids.is_empty() {
            return Err(Error::invalid(format!(
                "multi-lock of group {group:?} over no values"
            )));
        }
        Ok(RLock::new(
            self.inner.clone(),
            group,
            Arc::new(GroupMembers::new(ids)),
        ))
    }

    /// Checks a lock name before any I/O: not empty, not too long, and in a cluster
    /// one whose keys share a slot.
    fn checked_name(&self, name: String) -> Result<String> {
        validate_name(&name)?;
        if self.inner.conn.is_cluster() {
            validate_cluster_name(&name)?;
        }
        Ok(name)
    }

    /// How many replicas must acknowledge each acquire (see
    /// [`Config::replica_sync`]); 0 when none must (under
    /// [`Durability::Aof`](crate::Durability::Aof) the primary's own file is
    /// still waited for: see [`durability`](Client::durability)).
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// // The default (`None`): one replica when the server had any at connect time.
    /// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
    /// if client.replica_sync() == 0 {
    ///     eprintln!("no replica acknowledges acquires: a failover may lose a hold");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn replica_sync(&self) -> u32 {
        self.inner.replica_links.replicas()
    }

    /// The durability mode in force now (see [`Durability`](crate::Durability)):
    /// `None` when acquires wait for nothing beyond the primary's memory
    /// (replica sync off, or turned off because the server refuses `WAIT`).
    /// The server is asked again after each change of connection, so this can
    /// change over the client's life.
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config, Durability};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let mut config = Config::from_url("redis://127.0.0.1:6379")?;
    /// config.durability = Durability::Aof;
    /// // Refused at connect, with the reason, when the server has no WAITAOF
    /// // (before Redis 7.2) or no usable append-only file.
    /// let client = Client::connect(config).await?;
    /// assert_eq!(client.durability(), Some(Durability::Aof));
    /// # Ok(()) }
    /// ```
    pub fn durability(&self) -> Option<crate::Durability> {
        self.inner.replica_links.durability()
    }

    /// How many pub/sub channels this client is subscribed to right now: one per
    /// lock with waiting tasks, however many tasks wait.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// let waiters: Vec<_> = (0..10)
    ///     .map(|_| {
    ///         let lock = lock.clone();
    ///         tokio::spawn(async move { lock.lock().await?.unlock().await })
    ///     })
    ///     .collect();
    /// // While they wait: one channel for the ten of them.
    /// eprintln!("subscribed to {} channel(s)", client.subscribed_channels());
    /// guard.unlock().await?;
    /// for waiter in waiters {
    ///     waiter.await.expect("the task panicked")?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn subscribed_channels(&self) -> usize {
        self.inner.pubsub.channel_count()
    }

    /// How many of this client's tasks wait for the lock or synchronizer `name`
    /// right now: every task in this client's line for it (the kinds that keep
    /// one; see [`RLock::lock`](crate::RLock::lock)), the one at its head
    /// included from its first attempt on, and every other task past its first
    /// attempt, sleeping on the object's channel (a spin lock's: backing off).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// let waiter = {
    ///     let lock = lock.clone();
    ///     tokio::spawn(async move { lock.lock().await?.unlock().await })
    /// };
    /// while client.waiting_for("orders:42") == 0 {
    ///     tokio::task::yield_now().await;
    /// }
    /// guard.unlock().await?;
    /// waiter.await.expect("the task panicked")?;
    /// # Ok(()) }
    /// ```
    ///
    /// Self-waits (waits behind a hold of the waiter's own task, see
    /// [`Config::self_wait`](crate::Config::self_wait)) are counted here like
    /// any wait, and on their own by [`self_waits_for`](Client::self_waits_for).
    pub fn waiting_for(&self, name: &str) -> usize {
        self.inner.lines.waiting(name)
    }

    /// How many of this client's waits for the lock `name` are self-waits right
    /// now: waits that began behind a hold of the waiter's own task (or thread)
    /// outside that hold's scope, which is still held, so that only a sibling
    /// future's release can let them in. A nested `lock()` or a read-write
    /// downgrade ported literally from Java shows here (and in a warning after
    /// [`Config::self_wait_warning`](crate::Config::self_wait_warning)).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// let outer = lock.lock().await?;
    /// // Java's nested lock(), outside the hold's scope: waits for itself.
    /// let nested = lock.try_lock_wait(Duration::from_millis(200));
    /// let (gave_up, counted) = tokio::join!(nested, async {
    ///     tokio::time::sleep(Duration::from_millis(100)).await;
    ///     client.self_waits_for("orders:42")
    /// });
    /// assert!(gave_up?.is_none());
    /// assert_eq!(counted, 1);
    /// outer.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn self_waits_for(&self, name: &str) -> usize {
        self.inner.holdings.self_waits_for(name)
    }

    /// The deadlocks across processes this client's waits are on right now:
    /// cycles of waits, each waiter waiting for a lock the next one's task
    /// holds, found by waits that lasted past
    /// [`Config::deadlock_threshold`](crate::Config::deadlock_threshold) (each
    /// looks again every threshold while it waits, so a cycle that resolved
    /// itself leaves this list). Each cycle once. See `DESIGN.md`, "Deadlocks
    /// named across processes".
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) {
    /// for cycle in client.deadlocks() {
    ///     eprintln!("{cycle}");
    ///     let victim = cycle.victim().map(|step| step.waiter.clone());
    ///     eprintln!("OnDeadlock::Refuse would break it at {victim:?}");
    /// }
    /// # }
    /// ```
    pub fn deadlocks(&self) -> Vec<crate::Deadlock> {
        self.inner.deadlocks.found()
    }

    /// Every deadlock across processes the server shows, whoever waits on it:
    /// a walk of the wait-for graph from every recorded wait whose cycle has a
    /// lock matching `pattern` (a glob, as [`scan`](Client::scan) takes). What
    /// the tool's `deadlocks` command prints.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let found = client.find_deadlocks("*").await?;
    /// for cycle in &found.cycles {
    ///     println!("{cycle}");
    /// }
    /// println!("{} waits recorded, {} holders whose wait is unknown", found.waits, found.dead_ends);
    /// # Ok(()) }
    /// ```
    ///
    /// Java waiters are seen only as entries in a fair lock's queue, and only
    /// from a recorded wait whose task holds that fair lock; a holder whose
    /// wait is unknown is a dead end ([`DeadlockScan::dead_ends`](crate::inspect::DeadlockScan::dead_ends)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty pattern; [`Error::Redis`] when a
    /// read fails.
    pub async fn find_deadlocks(&self, pattern: &str) -> Result<crate::inspect::DeadlockScan> {
        if pattern.is_empty() {
            return Err(crate::Error::InvalidArgument(
                "the pattern must not be empty (\"*\" matches every lock)".into(),
            ));
        }
        crate::inspect::find_deadlocks(&self.inner, pattern).await
    }

    /// Checks the servers behind this client for what in their setup breaks
    /// locks, and says how to fix each: keys with a TTL evicted under memory
    /// pressure, the durability of [`Config::durability`](crate::Config::durability)
    /// and [`Config::replica_sync`](crate::Config::replica_sync) against what
    /// the server supports, the scripts, keys and channels the ACL allows, a
    /// cluster's state and slot coverage, sharded pub/sub, the replicas' lag,
    /// the round trip and server versions with behaviour locks notice. Every
    /// primary of a cluster is checked. The tool's `redisson-locks doctor`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let checkup = client.checkup().await?;
    /// for problem in checkup.problems() {
    ///     eprintln!("{}: {} ({})", problem.node, problem.detail, problem.fix.as_deref().unwrap_or(""));
    /// }
    /// assert!(checkup.is_healthy(), "the lock server needs fixing");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when a server cannot be reached;
    /// a refusal is a finding, not an error.
    pub async fn checkup(&self) -> Result<crate::inspect::Checkup> {
        let config = &self.inner.config;
        self.checkup_for(config.durability, config.replica_sync)
            .await
    }

    /// [`checkup`](Client::checkup), the durability checked being
    /// `durability` with `replica_sync` replicas rather than the client's
    /// own: the tool connects without asking for any, so that a server that
    /// cannot give it is a finding, not a refused connection.
    ///
    /// ```no_run
    /// use redisson_locks::Durability;
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let checkup = client.checkup_for(Durability::Aof, Some(1)).await?;
    /// println!("{}", checkup.is_healthy());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`checkup`](Client::checkup).
    pub async fn checkup_for(
        &self,
        durability: crate::Durability,
        replica_sync: Option<u32>,
    ) -> Result<crate::inspect::Checkup> {
        let wish = crate::inspect::Wish {
            durability,
            replica_sync,
            timeout: std::time::Duration::from_millis(
                self.inner.config.effective_replica_sync_timeout_ms(),
            ),
        };
        crate::inspect::checkup(&self.inner.conn, wish).await
    }

    /// How many holds the watchdog is renewing right now.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let before = client.renewed_holds();
    /// let lock = client.get_lock("orders:42")?;
    /// let renewed = lock.lock().await?; // no lease: the watchdog keeps it alive
    /// assert_eq!(client.renewed_holds(), before + 1);
    /// renewed.unlock().await?;
    ///
    /// let leased = lock.lock_with_lease(Duration::from_secs(10)).await?; // ends by itself
    /// assert_eq!(client.renewed_holds(), before);
    /// leased.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn renewed_holds(&self) -> usize {
        self.inner.watchdog.active_holds()
    }

    /// What lives under `name`, read at one instant: its kind (told from the
    /// layout, whoever wrote it: this crate or Java Redisson), every holder
    /// with its hold count, mode and lease left, a read-write lock's read
    /// leases, a fair lock's queue with each waiter's deadline, a semaphore's
    /// permits and each expirable permit's lease, a latch's count, a fenced
    /// lock's last token, and which of these are this client's. Owners of
    /// clients that announced themselves ([`Config::announce`]) carry their
    /// host, process id and name. One script reads it all; nothing is written.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let snapshot = client.inspect("orders:42").await?;
    /// for holder in &snapshot.holders {
    ///     let who = holder.owner.identity.as_ref().map_or("a Java client?".to_owned(), |i| {
    ///         format!("pid {} on {}", i.pid, i.host)
    ///     });
    ///     println!(
    ///         "{} held {}x by {} ({who}), lease left {:?}",
    ///         snapshot.kind.label(),
    ///         holder.holds,
    ///         holder.owner.field,
    ///         holder.lease_left
    ///     );
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name; [`Error::Redis`] when the
    /// server cannot be reached; [`Error::UnexpectedReply`] for a reply of
    /// another shape.
    pub async fn inspect(&self, name: &str) -> Result<crate::inspect::Snapshot> {
        crate::inspect::inspect(&self.inner, name, &mut Default::default()).await
    }

    /// Every lock-family object whose name matches the glob `pattern` (Redis's
    /// `MATCH` syntax: `orders:*`), inspected as [`inspect`](Client::inspect)
    /// does, sorted by name. The names are found with `SCAN ... COUNT ... TYPE`,
    /// never `KEYS`, on every primary of a cluster, so the server never blocks
    /// for the keyspace; at most [`MAX_SCAN`](crate::inspect::MAX_SCAN) names
    /// are read ([`Scanned::complete`](crate::inspect::Scanned::complete) says
    /// when more matched). Each object is read consistently; the list is not
    /// one instant. A fair lock whose queue outlived its holder (a dead head
    /// waiter, until its deadline) is listed too. A number stored by someone
    /// else reads as a [`Kind::Counter`](crate::inspect::Kind::Counter): a
    /// semaphore's permits look the same.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// for object in client.scan("orders:*").await?.objects {
    ///     println!("{} ({}): {} holder(s)", object.name, object.kind.label(), object.holders.len());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Keys no lock could be named (empty, longer than a name may be, or a
    /// name a cluster refuses) are passed over. The names are read in
    /// batches sent at once, and each owner's identity is looked up once.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty pattern; otherwise as
    /// [`inspect`](Client::inspect) for the first name whose reading fails
    /// (a command error, an unexpected reply), which ends the scan.
    pub async fn scan(&self, pattern: &str) -> Result<crate::inspect::Scanned> {
        crate::inspect::scan(&self.inner, pattern).await
    }

    /// A live view of `name`: each [`next`](crate::inspect::Watch::next) is a
    /// fresh snapshot, as soon as the object's channel carries a message and
    /// at the latest after `every`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let mut watch = client.watch("orders:42", Duration::from_millis(500))?;
    /// for _ in 0..10 {
    ///     let now = watch.next().await?;
    ///     println!("{} holder(s), {} queued", now.holders.len(), now.queue_len);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad name or a zero interval.
    pub fn watch(&self, name: &str, every: std::time::Duration) -> Result<crate::inspect::Watch> {
        crate::inspect::Watch::new(self.inner.clone(), name.to_owned(), every)
    }

    /// Frees `name` whoever holds it, through its kind's force script (as
    /// Redisson's `forceUnlock`), and returns what held it just before, with
    /// whether anything was freed. For an operator with a stuck lock: the
    /// holders learn they lost it at their next renewal or check.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let (before, freed) = client.force_unlock("orders:42").await?;
    /// if freed {
    ///     println!("freed {} hold(s) of {}", before.holders.len(), before.name);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `name` is a semaphore, a latch or not a
    /// lock at all (nothing is changed); as [`inspect`](Client::inspect).
    pub async fn force_unlock(&self, name: &str) -> Result<(crate::inspect::Snapshot, bool)> {
        crate::inspect::force_unlock(&self.inner, name).await
    }

    /// Who this client says it is on the server (see [`Config::announce`]).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) {
    /// let me = client.identity();
    /// eprintln!("client {} is pid {} on {}", me.client_id, me.pid, me.host);
    /// # }
    /// ```
    pub fn identity(&self) -> &crate::inspect::Identity {
        &self.inner.identity
    }

    /// The identity another client announced, found by its id (the first part
    /// of its owner fields); `None` when it announced none (a Java client, a
    /// client with [`Config::announce`] off) or has been gone for a watchdog
    /// lease.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let me = client.identity_of(client.id()).await?;
    /// assert_eq!(me.as_ref(), Some(client.identity()));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the server cannot be reached.
    pub async fn identity_of(&self, client_id: &str) -> Result<Option<crate::inspect::Identity>> {
        crate::engine::identity::look_up(&mut self.inner.conn.clone(), client_id).await
    }

    /// A semaphore (Redisson `getSemaphore(name)`) named `name`: permits that
    /// Java and Rust processes take and give back on the same key. No I/O
    /// happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// slots.try_set_permits(3).await?;
    /// slots.acquire().await?;
    /// slots.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_semaphore(&self, name: impl Into<String>) -> Result<crate::RSemaphore> {
        let name = self.checked_name(name.into())?;
        Ok(crate::RSemaphore::new(self.inner.clone(), name))
    }

    /// A value in Redis that only a newer fencing token may overwrite: the
    /// store side of [`get_fenced_lock`](Client::get_fenced_lock)'s tokens (see
    /// [`FencedStore`](crate::FencedStore)). No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let store = client.get_fenced_store("account:7:balance")?;
    /// let (guard, token) = client.get_fenced_lock("account:7")?.lock_and_get_token().await?;
    /// store.write(token, b"100").await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_fenced_store(&self, key: impl Into<String>) -> Result<crate::FencedStore> {
        let key = self.checked_name(key.into())?;
        Ok(crate::FencedStore::new(self.inner.clone(), key))
    }

    /// A semaphore whose permits have ids and leases (Redisson
    /// `getPermitExpirableSemaphore(name)`): a permit whose holder vanished comes
    /// back when its lease ends. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let workers = client.get_permit_expirable_semaphore("workers")?;
    /// workers.try_set_permits(2).await?;
    /// let permit = workers.acquire(Duration::from_secs(30)).await?;
    /// workers.release(&permit).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_permit_expirable_semaphore(
        &self,
        name: impl Into<String>,
    ) -> Result<crate::RPermitExpirableSemaphore> {
        let name = self.checked_name(name.into())?;
        Ok(crate::RPermitExpirableSemaphore::new(
            self.inner.clone(),
            name,
        ))
    }

    /// A semaphore that serves its waiters strictly in arrival order, with
    /// leased permits the watchdog renews (see [`RFairSemaphore`](crate::RFairSemaphore);
    /// Redisson has none). No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let pool = client.get_fair_semaphore("connections")?;
    /// pool.try_set_permits(4).await?;
    /// let permits = pool.acquire(1).await?;
    /// permits.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock).
    pub fn get_fair_semaphore(&self, name: impl Into<String>) -> Result<crate::RFairSemaphore> {
        let name = self.checked_name(name.into())?;
        Ok(crate::RFairSemaphore::new(self.inner.clone(), name))
    }

    /// A count-down latch (Redisson `getCountDownLatch(name)`): tasks anywhere
    /// wait until others have counted it down to zero. No I/O happens here.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// ready.try_set_count(1).await?;
    /// ready.count_down().await?;
    /// ready.wait().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get_lock`](Client::get_lock); in a cluster also for a name with a
    /// `{` (Redisson wraps the whole name in braces for the latch's channel, so
    /// the channel of such a name lives in another slot than its key).
    pub fn get_count_down_latch(&self, name: impl Into<String>) -> Result<crate::RCountDownLatch> {
        let name = self.checked_name(name.into())?;
        if self.inner.conn.is_cluster() && name.contains('{') {
            return Err(Error::invalid(format!(
                "latch name '{name}' carries a hash tag: in a cluster its channel would land in \
                 another slot than its key"
            )));
        }
        Ok(crate::RCountDownLatch::new(self.inner.clone(), name))
    }
}
