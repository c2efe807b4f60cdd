//! The blocking guard: the async guard, released from a blocking `unlock`.

use std::sync::Arc;
use std::time::Duration;

use super::run;
use crate::engine::Engine;
use crate::error::Result;

/// One hold of a lock, released by [`unlock`](LockGuard::unlock) or by dropping
/// it.
///
/// The guard remembers the thread that acquired it and releases that thread's
/// hold, so it may be sent to and dropped or unlocked on any thread.
///
/// # Drop
/// Dropping the guard stops its renewal at once and queues the release on the
/// client's own thread, without blocking the dropping thread: a `?`, an early
/// `return` or a panic in the critical section does not leave the lock held until
/// its lease runs out. The release's errors cannot be reported there: call
/// [`unlock`](LockGuard::unlock) to see them. Dropping the client afterwards waits
/// for queued releases to be sent; a process killed first leaves the hold to its
/// lease.
///
/// ```no_run
/// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
/// let guard = client.get_lock("orders:42")?.lock()?;
/// std::thread::spawn(move || {
///     // ... the critical section, on another thread ...
///     drop(guard); // released
/// });
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct LockGuard {
    // Dropped in this order: the guard queues its release on the client's thread
    // first, then this handle, perhaps the client's last, whose drop sees that
    // release sent (waiting for it on a plain thread).
    guard: crate::LockGuard,
    client: Arc<Engine>,
}

impl LockGuard {
    pub(super) fn new(guard: crate::LockGuard, client: Arc<Engine>) -> Self {
        LockGuard { guard, client }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock()?;
    /// assert_eq!(guard.name(), "orders:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The fencing token this hold drew, for a lock from
    /// [`Client::get_fenced_lock`](super::Client::get_fenced_lock); `None` for
    /// other kinds.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_fenced_lock("ledger")?.lock()?;
    /// let token = guard.token().expect("fenced locks draw a token");
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> Option<u64> {
        self.guard.token()
    }

    /// The owner holding this guard: the id of the thread that acquired it
    /// ([`current_thread_id`](super::current_thread_id) there).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock()?;
    /// assert_eq!(guard.owner_id(), redisson_locks::blocking::current_thread_id());
    /// # Ok(()) }
    /// ```
    pub fn owner_id(&self) -> u64 {
        self.guard.owner_id()
    }

    /// Releases this hold, from whichever thread calls.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock()?;
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::LockGuard::unlock`]: [`Error::NotHeld`](crate::Error::NotHeld)
    /// when the hold was already gone (its lease expired, a force unlock),
    /// [`Error::Redis`](crate::Error::Redis) when the release could not be sent;
    /// either way it is renewed no more. On the client's own thread,
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), and the guard
    /// is dropped, which releases it in the background.
    ///
    /// # Blocking
    /// For the release's round trip.
    pub fn unlock(self) -> Result<()> {
        let LockGuard { guard, client } = self;
        let name = guard.name().to_owned();
        run(&client, &name, guard.unlock())
    }

    /// Keeps the hold but lets go of the guard: dropping no longer releases it and
    /// the watchdog keeps renewing it. Release it later with
    /// [`RLock::unlock`](super::RLock::unlock) from the thread that acquired it,
    /// as Java code does.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// lock.lock()?.detach(); // Java: lock.lock();
    /// lock.unlock()?; // Java: lock.unlock();
    /// # Ok(()) }
    /// ```
    pub fn detach(self) {
        self.guard.detach();
    }

    /// Has this hold been lost? True once it is no longer surely valid on this
    /// client's clock (see [`valid_for`](LockGuard::valid_for)) or a renewal
    /// found it gone on the server. Once true, it stays true.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock()?;
    /// for step in 0..10 {
    ///     if guard.is_lease_lost() {
    ///         break; // another owner may hold it now: stop
    ///     }
    ///     // ... one step of the work ...
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.guard.is_lease_lost()
    }

    /// How much longer this hold is surely valid, on this machine's monotonic
    /// clock; `None` once it is lost (see [`crate::LockGuard::valid_for`]). Check
    /// it right before a side effect that must not happen without the lock.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::blocking::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let guard = client.get_lock("orders:42")?.lock()?;
    /// match guard.valid_for() {
    ///     Some(left) if left > Duration::from_millis(500) => { /* write */ }
    ///     _ => { /* too close to the end: do not start the write */ }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        self.guard.valid_for()
    }
}
