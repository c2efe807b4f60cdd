//! The blocking lock handles: the async handles, acting for the calling thread.

use std::time::Duration;

use super::guard::LockGuard;
use super::{current_thread_id, run};
use crate::error::{Error, Result};
use crate::lock::RemainingTtl;

/// A distributed lock with blocking methods (Redisson's `RLock`), whose owner is
/// the calling thread. Every kind the [`Client`](super::Client) hands out is one:
/// reentrant, fair, spin, non-reentrant, single-hash multi-lock, and each side of
/// a read-write lock.
///
/// Each call acts for the thread making it: `lock()` twice on one thread
/// re-enters (hold count 2); another thread waits, and its `unlock()` is
/// [`Error::NotHeld`]. A handle is cheap to clone and may be shared by threads or
/// sent between them: the owner is whoever calls.
///
/// ```no_run
/// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
/// use std::time::Duration;
///
/// let lock = client.get_lock("inventory")?;
/// let outer = lock.lock()?;
/// let inner = lock.lock()?; // the same thread: re-enters
/// assert_eq!(lock.hold_count()?, 2);
/// inner.unlock()?;
/// outer.unlock()?;
///
/// if let Some(guard) = lock.try_lock_wait(Duration::from_secs(1))? {
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RLock {
    /// The async handle; each call acts for the caller through `with_owner_id`.
    lock: crate::RLock,
}

impl RLock {
    pub(super) fn new(lock: crate::RLock) -> Self {
        RLock { lock }
    }

    /// The async handle acting for the calling thread, fixed before the call
    /// moves to the client's thread.
    fn for_this_thread(&self) -> crate::RLock {
        self.lock.with_owner_id(current_thread_id())
    }

    /// Runs a call of `lock` for the calling thread on the client's thread.
    fn call<T, F>(&self, call: impl FnOnce(crate::RLock) -> F) -> Result<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        run(
            self.lock.client(),
            self.lock.name(),
            call(self.for_this_thread()),
        )
    }

    /// The blocking guard of a hold this lock's call took.
    fn wrap(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard::new(guard, self.lock.client().clone())
    }

    /// The lock's name (Redisson `getName()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// assert_eq!(client.get_lock("orders:42")?.name(), "orders:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Is this a fair lock (handed out in arrival order)?
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// assert!(client.get_fair_lock("queue")?.is_fair());
    /// # Ok(()) }
    /// ```
    pub fn is_fair(&self) -> bool {
        self.lock.is_fair()
    }

    /// Acquires the lock for the calling thread, waiting as long as it takes; the
    /// watchdog renews it while held (Redisson `lock()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock()?;
    /// // ... the critical section ...
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::RLock::lock`]; [`Error::InvalidArgument`] when called on the
    /// client's own thread.
    ///
    /// # Blocking
    /// Until the lock is acquired. Each sleep is bounded by the lock's lease, so a
    /// lost unlock message costs at most one lease.
    pub fn lock(&self) -> Result<LockGuard> {
        let guard = self.call(|lock| async move { lock.lock().await })?;
        Ok(self.wrap(guard))
    }

    /// Acquires the lock for `lease`, waiting as long as it takes; it is not
    /// renewed (Redisson `lock(leaseTime, unit)`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let guard = client.get_lock("report")?.lock_with_lease(Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::RLock::lock_with_lease`]; [`Error::InvalidArgument`] when
    /// called on the client's own thread.
    ///
    /// # Blocking
    /// As [`lock`](RLock::lock).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let guard = self.call(move |lock| async move { lock.lock_with_lease(lease).await })?;
        Ok(self.wrap(guard))
    }

    /// Tries once, without waiting (Redisson `tryLock()`); `None` when another
    /// owner holds it.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// match client.get_lock("cron:nightly")?.try_lock()? {
    ///     Some(guard) => { /* this thread runs the job */ }
    ///     None => { /* someone else does */ }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](RLock::lock).
    ///
    /// # Blocking
    /// For one round trip.
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        let guard = self.call(|lock| async move { lock.try_lock().await })?;
        Ok(guard.map(|guard| self.wrap(guard)))
    }

    /// Tries for up to `wait` (Redisson `tryLock(waitTime, unit)`); the watchdog
    /// renews the hold. `None` when the wait ran out.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// if let Some(guard) = lock.try_lock_wait(Duration::from_secs(2))? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::RLock::try_lock_wait`]; [`Error::InvalidArgument`] when called
    /// on the client's own thread.
    ///
    /// # Blocking
    /// For about `wait` at most: the first attempt always runs (bounded by
    /// [`Config::timeout`](crate::Config::timeout)), every step after it is cut
    /// at the deadline.
    pub fn try_lock_wait(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let guard = self.call(move |lock| async move { lock.try_lock_wait(wait).await })?;
        Ok(guard.map(|guard| self.wrap(guard)))
    }

    /// Tries for up to `wait` and holds for `lease` without renewal (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock_with_lease`](RLock::lock_with_lease) and
    /// [`try_lock_wait`](RLock::try_lock_wait).
    ///
    /// # Blocking
    /// As [`try_lock_wait`](RLock::try_lock_wait).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        let guard =
            self.call(move |lock| async move { lock.try_lock_with_lease(wait, lease).await })?;
        Ok(guard.map(|guard| self.wrap(guard)))
    }

    /// Releases one hold of the calling thread (Redisson `unlock()`): for holds
    /// whose guard was [`detach`](LockGuard::detach)ed, Java style. A guard that
    /// is neither detached nor unlocked releases its hold when dropped, so do not
    /// mix the two for one hold: an extra `unlock()` releases another hold.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// lock.lock()?.detach(); // Java: lock.lock();
    /// // ...
    /// lock.unlock()?; // Java: lock.unlock();
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the calling thread holds no hold (Java's
    /// `IllegalMonitorStateException`); [`Error::Redis`] when the release could
    /// not be sent; [`Error::InvalidArgument`] when called on the client's own
    /// thread.
    ///
    /// # Blocking
    /// For the release's round trip.
    pub fn unlock(&self) -> Result<()> {
        self.call(|lock| async move { lock.unlock().await })
    }

    /// Releases the lock whoever holds it, however many holds (Redisson
    /// `forceUnlock()`); `true` when it was held.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let freed = client.get_lock("stuck")?.force_unlock()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails; [`Error::InvalidArgument`] when
    /// called on the client's own thread.
    ///
    /// # Blocking
    /// For one round trip.
    pub fn force_unlock(&self) -> Result<bool> {
        self.call(|lock| async move { lock.force_unlock().await })
    }

    /// Is the lock held by anyone (Redisson `isLocked()`)? For the sides of a
    /// read-write lock, as [`crate::RLock::is_locked`] answers.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let busy = client.get_lock("orders:42")?.is_locked()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`force_unlock`](RLock::force_unlock).
    ///
    /// # Blocking
    /// For one round trip.
    pub fn is_locked(&self) -> Result<bool> {
        self.call(|lock| async move { lock.is_locked().await })
    }

    /// Does the calling thread hold it (Redisson `isHeldByCurrentThread()`)?
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::RLock::is_held_by_current_task`]; [`Error::InvalidArgument`]
    /// when called on the client's own thread.
    ///
    /// # Blocking
    /// For one round trip.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.call(|lock| async move { lock.is_held_by_current_task().await })
    }

    /// Does thread `id` (its [`current_thread_id`](super::current_thread_id)) of
    /// this client hold it (Redisson `isHeldByThread(threadId)`)?
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let other = lock.clone();
    /// let holder = std::thread::spawn(move || {
    ///     other.lock()?.detach(); // held on after this thread ends
    ///     Ok::<_, redisson_locks::Error>(redisson_locks::blocking::current_thread_id())
    /// })
    /// .join()
    /// .unwrap()?;
    /// assert!(lock.is_held_by_thread(holder)?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`is_held_by_current_thread`](RLock::is_held_by_current_thread).
    ///
    /// # Blocking
    /// For one round trip.
    pub fn is_held_by_thread(&self, id: u64) -> Result<bool> {
        self.call(move |lock| async move { lock.is_held_by(id).await })
    }

    /// How many holds the calling thread has (Redisson `getHoldCount()`); 0 when
    /// none.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// assert_eq!(lock.hold_count()?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`is_held_by_current_thread`](RLock::is_held_by_current_thread).
    ///
    /// # Blocking
    /// For one round trip.
    pub fn hold_count(&self) -> Result<u64> {
        self.call(|lock| async move { lock.hold_count().await })
    }

    /// The lock's remaining time to live (Redisson `remainTimeToLive()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::RemainingTtl;
    ///
    /// match client.get_lock("orders:42")?.remain_time_to_live()? {
    ///     RemainingTtl::Expires(left) => println!("held for {left:?} more"),
    ///     _ => println!("free, or held with no expiry"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`force_unlock`](RLock::force_unlock).
    ///
    /// # Blocking
    /// For one round trip.
    pub fn remain_time_to_live(&self) -> Result<RemainingTtl> {
        self.call(|lock| async move { lock.remain_time_to_live().await })
    }
}

/// A fenced lock with blocking methods (Redisson's `RFencedLock`): an [`RLock`]
/// (every method, through `Deref`) whose every acquisition draws a fencing token,
/// greater than every token drawn before for this name.
///
/// ```no_run
/// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_fenced_lock("ledger")?;
/// let (guard, token) = lock.lock_and_get_token()?;
/// // Send `token` with every write; the store refuses lower ones.
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RFencedLock {
    lock: RLock,
    fenced: crate::RFencedLock,
}

impl std::ops::Deref for RFencedLock {
    type Target = RLock;

    fn deref(&self) -> &RLock {
        &self.lock
    }
}

impl RFencedLock {
    pub(super) fn new(fenced: crate::RFencedLock) -> Self {
        RFencedLock {
            lock: RLock::new((*fenced).clone()),
            fenced,
        }
    }

    /// Acquires the lock as [`RLock::lock`] does, and returns the token it drew
    /// with the guard (Redisson `lockAndGetToken()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let (guard, token) = client.get_fenced_lock("ledger")?.lock_and_get_token()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RLock::lock`].
    ///
    /// # Blocking
    /// As [`RLock::lock`].
    pub fn lock_and_get_token(&self) -> Result<(LockGuard, u64)> {
        with_token(self.lock.lock()?)
    }

    /// Tries for up to `wait`, with `lease` (or the watchdog when `None`), and
    /// returns the token with the guard (Redisson `tryLockAndGetToken(wait,
    /// lease, unit)`); `None` when the wait ran out.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_fenced_lock("ledger")?;
    /// if let Some((guard, token)) = lock.try_lock_and_get_token(Duration::from_secs(1), None)? {
    ///     guard.unlock()?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RLock::try_lock_with_lease`].
    ///
    /// # Blocking
    /// As [`RLock::try_lock_wait`].
    pub fn try_lock_and_get_token(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<(LockGuard, u64)>> {
        let guard = match lease {
            Some(lease) => self.lock.try_lock_with_lease(wait, lease)?,
            None => self.lock.try_lock_wait(wait)?,
        };
        guard.map(with_token).transpose()
    }

    /// The last token drawn for this lock, by anyone (Redisson `getToken()`);
    /// `None` before the first acquisition.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let last = client.get_fenced_lock("ledger")?.get_token()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails; [`Error::InvalidArgument`] when
    /// called on the client's own thread.
    ///
    /// # Blocking
    /// For one round trip.
    pub fn get_token(&self) -> Result<Option<u64>> {
        let fenced = self.fenced.clone();
        run(self.lock.lock.client(), self.name(), async move {
            fenced.get_token().await
        })
    }
}

fn with_token(guard: LockGuard) -> Result<(LockGuard, u64)> {
    match guard.token() {
        Some(token) => Ok((guard, token)),
        None => Err(Error::unexpected("fenced lock acquire", "no token drawn")),
    }
}

/// A read-write lock with blocking methods (Redisson's `RReadWriteLock`): any
/// number of reader threads, or one writer thread. Both sides are [`RLock`]s,
/// reentrant per thread; a writer thread may take the read side too and then
/// release the write side (a downgrade), a reader cannot upgrade (see
/// [`crate::RReadWriteLock`]).
///
/// ```no_run
/// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
/// let rw = client.get_read_write_lock("catalog")?;
/// let reading = rw.read_lock().lock()?; // shared with other reader threads
/// reading.unlock()?;
/// let writing = rw.write_lock().lock()?; // alone
/// writing.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RReadWriteLock {
    rw: crate::RReadWriteLock,
}

impl RReadWriteLock {
    pub(super) fn new(rw: crate::RReadWriteLock) -> Self {
        RReadWriteLock { rw }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// assert_eq!(client.get_read_write_lock("catalog")?.name(), "catalog");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.rw.name()
    }

    /// The shared side (Redisson `readLock()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let reading = client.get_read_write_lock("catalog")?.read_lock().lock()?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self) -> RLock {
        RLock::new(self.rw.read_lock())
    }

    /// The exclusive side (Redisson `writeLock()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let writing = client.get_read_write_lock("catalog")?.write_lock().lock()?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self) -> RLock {
        RLock::new(self.rw.write_lock())
    }
}
