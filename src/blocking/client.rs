//! The blocking client handle.

use super::lock::{RFencedLock, RLock, RReadWriteLock};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::lock::BackOff;

/// The blocking face of a [`Client`](crate::Client): the same connection, locks
/// and background thread, with blocking methods (Redisson's `RedissonClient`).
///
/// Cheap to clone (it is the async client inside) and usable from any thread.
/// Converting either way is free: [`from_async`](Client::from_async),
/// [`as_async`](Client::as_async).
///
/// ```no_run
/// use redisson_locks::blocking::Client;
/// use redisson_locks::Config;
///
/// # fn demo() -> Result<(), redisson_locks::Error> {
/// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?)?;
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let lock = client.get_lock("orders:42").unwrap();
///         std::thread::spawn(move || {
///             let guard = lock.lock()?; // each thread is its own owner
///             guard.unlock()
///         })
///     })
///     .collect();
/// for worker in workers {
///     worker.join().unwrap()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    client: crate::Client,
}

impl Client {
    /// Connects as [`Client::connect`](crate::Client::connect) does, from any
    /// thread: no tokio runtime is needed.
    ///
    /// The async connect must be driven by a runtime, so a small current-thread
    /// runtime is made for it on a thread of its own (where it can be built, run
    /// and dropped whatever the calling thread is inside of) and dropped once
    /// connected. A current-thread runtime is never a connection's home, so the
    /// client then runs everything on its own background thread.
    ///
    /// ```no_run
    /// use redisson_locks::blocking::Client;
    /// use redisson_locks::Config;
    ///
    /// # fn demo() -> Result<(), redisson_locks::Error> {
    /// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::connect`](crate::Client::connect).
    ///
    /// # Blocking
    /// Blocks until connected or refused, at most about
    /// [`Config::connect_timeout`] plus the commands sent at connect.
    pub fn connect(config: Config) -> Result<Client> {
        let connecting = std::thread::Builder::new()
            .name("redisson-locks-connect".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Error::unexpected("start a runtime to connect", e))?;
                let client = runtime.block_on(crate::Client::connect(config));
                // Nothing of the client lives on it: gone before `connect` returns.
                drop(runtime);
                client
            })
            .map_err(|e| Error::unexpected("start a thread to connect", e))?;
        // The connecting thread depends on no runtime: a plain wait is safe
        // anywhere.
        let client = connecting
            .join()
            .map_err(|_| Error::unexpected("connect", "the connecting thread panicked"))??;
        Ok(Client { client })
    }

    /// The blocking face of an async client: both share one connection, one
    /// background thread and the same holds (but owners differ: threads here,
    /// acquisitions or tasks there).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::{blocking, Client, Config};
    ///
    /// let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?).await?;
    /// let blocking = blocking::Client::from_async(client.clone());
    /// tokio::task::spawn_blocking(move || {
    ///     let guard = blocking.get_lock("report")?.lock()?;
    ///     guard.unlock()
    /// })
    /// .await
    /// .unwrap()?;
    /// # Ok(()) }
    /// ```
    pub fn from_async(client: crate::Client) -> Client {
        Client { client }
    }

    /// The async client inside, for its other methods (`id()`, `warnings()`,
    /// `subscribed_channels()`, ...) or for async code.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) {
    /// for warning in client.as_async().warnings() {
    ///     eprintln!("redis: {warning}");
    /// }
    /// # }
    /// ```
    pub fn as_async(&self) -> &crate::Client {
        &self.client
    }

    /// The async client inside, by value.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) {
    /// let client: redisson_locks::Client = client.into_async();
    /// # }
    /// ```
    pub fn into_async(self) -> crate::Client {
        self.client
    }

    /// What lives under `name`, read at one instant: blocking
    /// [`Client::inspect`](crate::Client::inspect).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let snapshot = client.inspect("orders:42")?;
    /// println!("{}: {} holder(s)", snapshot.kind.label(), snapshot.holders.len());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::inspect`](crate::Client::inspect).
    pub fn inspect(&self, name: &str) -> Result<crate::inspect::Snapshot> {
        let client = self.client.clone();
        let owned = name.to_owned();
        super::run(self.client.inner(), name, async move {
            client.inspect(&owned).await
        })
    }

    /// Every lock-family object under `pattern`: blocking
    /// [`Client::scan`](crate::Client::scan).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// for object in client.scan("orders:*")?.objects {
    ///     println!("{}", object.name);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::scan`](crate::Client::scan).
    pub fn scan(&self, pattern: &str) -> Result<crate::inspect::Scanned> {
        let client = self.client.clone();
        let owned = pattern.to_owned();
        super::run(self.client.inner(), pattern, async move {
            client.scan(&owned).await
        })
    }

    /// Frees `name` whoever holds it: blocking
    /// [`Client::force_unlock`](crate::Client::force_unlock).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let (before, freed) = client.force_unlock("orders:42")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::force_unlock`](crate::Client::force_unlock).
    pub fn force_unlock(&self, name: &str) -> Result<(crate::inspect::Snapshot, bool)> {
        let client = self.client.clone();
        let owned = name.to_owned();
        super::run(self.client.inner(), name, async move {
            client.force_unlock(&owned).await
        })
    }

    /// A reentrant lock (Redisson `getLock`) named `name`. No I/O happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.client.get_lock(name).map(RLock::new)
    }

    /// A fair lock (Redisson `getFairLock`): handed out strictly in the order
    /// threads asked for it. No I/O happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_fair_lock("queue:print")?;
    /// let guard = lock.lock()?; // after every thread that asked before
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_fair_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.client.get_fair_lock(name).map(RLock::new)
    }

    /// A fenced lock (Redisson `getFencedLock`): every acquisition draws a fencing
    /// token (see [`RFencedLock`]). No I/O happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_fenced_lock("ledger")?;
    /// let (guard, token) = lock.lock_and_get_token()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_fenced_lock(&self, name: impl Into<String>) -> Result<RFencedLock> {
        self.client.get_fenced_lock(name).map(RFencedLock::new)
    }

    /// A spin lock (Redisson `getSpinLock`) with Redisson's default back-off:
    /// no channel, waiters back off and retry (see
    /// [`Client::get_spin_lock`](crate::Client::get_spin_lock)). No I/O happens
    /// here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_spin_lock("no-channels")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_spin_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.client.get_spin_lock(name).map(RLock::new)
    }

    /// A spin lock with the given back-off (Redisson `getSpinLock(name, backOff)`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::BackOff;
    ///
    /// let lock = client.get_spin_lock_with_backoff(
    ///     "no-channels",
    ///     BackOff::Constant(Duration::from_millis(20)),
    /// )?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_spin_lock_with_backoff`](crate::Client::get_spin_lock_with_backoff).
    pub fn get_spin_lock_with_backoff(
        &self,
        name: impl Into<String>,
        backoff: BackOff,
    ) -> Result<RLock> {
        self.client
            .get_spin_lock_with_backoff(name, backoff)
            .map(RLock::new)
    }

    /// A non-reentrant lock (Redisson `getNonReentrantLock`): a thread asking
    /// again while it holds it is refused with
    /// [`Error::AlreadyHeld`](crate::Error::AlreadyHeld). No I/O happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_non_reentrant_lock("once")?;
    /// let guard = lock.lock()?;
    /// assert!(lock.lock().unwrap_err().is_already_held()); // the same thread
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_non_reentrant_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.client.get_non_reentrant_lock(name).map(RLock::new)
    }

    /// A non-reentrant fair lock (Redisson `getNonReentrantFairLock`). No I/O
    /// happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_non_reentrant_fair_lock("once-in-order")?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_non_reentrant_fair_lock(&self, name: impl Into<String>) -> Result<RLock> {
        self.client
            .get_non_reentrant_fair_lock(name)
            .map(RLock::new)
    }

    /// A read-write lock (Redisson `getReadWriteLock`): shared readers, one
    /// exclusive writer. No I/O happens here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let reading = rw.read_lock().lock()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_lock`](crate::Client::get_lock).
    pub fn get_read_write_lock(&self, name: impl Into<String>) -> Result<RReadWriteLock> {
        self.client
            .get_read_write_lock(name)
            .map(RReadWriteLock::new)
    }

    /// Redisson's single-hash multi-lock (`getMultiLock(group, values)`): all of
    /// the `values` of `group` or none, in one script (see
    /// [`Client::get_multi_lock`](crate::Client::get_multi_lock)). No I/O happens
    /// here.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let seats = client.get_multi_lock("flight:LH400", ["12A", "12B"])?;
    /// let guard = seats.lock()?; // both seats, or wait
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::get_multi_lock`](crate::Client::get_multi_lock).
    pub fn get_multi_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> Result<RLock> {
        self.client.get_multi_lock(group, values).map(RLock::new)
    }
}

impl From<crate::Client> for Client {
    fn from(client: crate::Client) -> Client {
        Client::from_async(client)
    }
}
