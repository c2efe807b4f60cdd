//! `RLock`: the handle of the reentrant and the fair lock, which share the hash
//! layout and every method; only their scripts differ.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::guard::{release, LockGuard};
use super::kind::LockKind;
use super::RemainingTtl;
use crate::config::{duration_to_millis, OwnerMode};
use crate::engine::contract::{Acquirer, Lease, Wait};
use crate::engine::long_wait::{watched, LongWait};
use crate::engine::owner::{owner_field, OwnerId};
use crate::engine::self_wait::{guard_wait, Request};
use crate::engine::wait::{self};
use crate::engine::Engine;
use crate::error::{Error, Result};

/// A reentrant distributed lock: Redisson's `RLock`, on the same keys.
///
/// [`Client::get_lock`](crate::Client::get_lock) hands out whoever asks first after
/// a release; [`Client::get_fair_lock`](crate::Client::get_fair_lock) hands the lock
/// out strictly in arrival order (Redisson's `RFairLock`, which is an `RLock` too).
///
/// The lock is a Redis hash named after the lock, with one field per owner
/// (`<client-uuid>:<id>`) counting its holds. The same owner may acquire it again
/// (the count grows) and the lock is free once every hold is released.
///
/// # Who the owner is
/// Re-entry is for code that runs *inside* a hold: run it in the hold's scope,
/// with [`RLock::with`] or [`LockGuard::scope`], and every acquisition of the same
/// lock in there (through any handle of this client, however deeply nested)
/// re-enters. Everything else is a separate owner: futures that one task polls side
/// by side (`join!`, `select!`, `buffer_unordered`, `FuturesUnordered`) never
/// share a hold, they take turns, as separate tasks do.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_lock("order:42")?;
/// lock.with(|| async {
///     // Nested: re-enters (hold count 2), whatever function this is in.
///     let inner = lock.lock().await?;
///     inner.unlock().await
/// })
/// .await??;
/// # Ok(()) }
/// ```
///
/// Outside a scope a second `lock()` waits for the first hold, like a second
/// `lock()` of a `tokio::sync::Mutex`; in one sequential piece of code that is a
/// deadlock, so nest through the scope. Such a *self-wait* is named: a warning
/// after [`Config::self_wait_warning`](crate::Config::self_wait_warning), or an
/// immediate [`Error::WouldDeadlock`] with
/// [`SelfWait::Refuse`](crate::SelfWait::Refuse). Two other modes exist
/// ([`Config::owner_mode`](crate::Config::owner_mode) sets the second for every
/// handle of a client):
/// [`with_owner_id`](RLock::with_owner_id) names an explicit owner (work handed
/// between tasks, or acting for a Java thread), and
/// [`with_task_owner`](RLock::with_task_owner) makes the calling task the owner,
/// as a thread is in Redisson, for code ported line by line (with the hazard that
/// sibling futures of one task then share holds).
///
/// Waiting tasks sleep on the lock's unlock channel and never poll; each sleep is
/// bounded by the lock's remaining lease, so a lost message costs at most one lease.
///
/// A handle is cheap to clone and does no I/O until a method is called.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// use std::time::Duration;
///
/// let lock = client.get_lock("inventory")?;
/// let outer = lock.lock().await?; // renewed by the watchdog while held
/// outer
///     .scope(async {
///         let inner = lock.lock().await?; // inside the hold's scope: re-enters
///         assert_eq!(lock.hold_count().await?, 2);
///         inner.unlock().await
///     })
///     .await?;
/// outer.unlock().await?;
///
/// if let Some(guard) = lock.try_lock_wait(Duration::from_secs(1)).await? {
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RLock {
    client: Arc<Engine>,
    name: Arc<str>,
    kind: Arc<dyn LockKind>,
    owner: OwnerId,
    /// This handle's term limit; `None`: the client's `Config::max_hold`.
    max_hold: Option<Duration>,
}

impl RLock {
    pub(crate) fn new(client: Arc<Engine>, name: String, kind: Arc<dyn LockKind>) -> Self {
        let owner = match client.config.owner_mode {
            OwnerMode::Scoped => OwnerId::Scoped,
            OwnerMode::Task => OwnerId::Task,
        };
        RLock {
            client,
            name: name.into(),
            kind,
            owner,
            max_hold: None,
        }
    }

    pub(crate) fn client(&self) -> &Arc<Engine> {
        &self.client
    }

    /// The lock's name (Redisson `getName()`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// assert_eq!(lock.name(), "orders:42");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Is this the fair lock (handed out in arrival order)?
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// assert!(client.get_fair_lock("queue")?.is_fair());
    /// assert!(!client.get_lock("queue")?.is_fair());
    /// # Ok(()) }
    /// ```
    pub fn is_fair(&self) -> bool {
        self.kind.is_fair()
    }

    /// A handle for the same lock that acts for owner `id`: for work that is
    /// handed between tasks, or to act for a Java thread id. Every acquisition
    /// through it re-enters the holds of `id`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let job = client.get_lock("job:7")?.with_owner_id(7);
    /// job.lock().await?.detach(); // held by owner 7, renewed by the watchdog
    ///
    /// // Later, in another task: owner 7 releases it.
    /// let handle = job.clone();
    /// tokio::spawn(async move { handle.unlock().await }).await.unwrap()?;
    /// # Ok(()) }
    /// ```
    pub fn with_owner_id(&self, id: u64) -> RLock {
        RLock {
            owner: OwnerId::Explicit(id),
            ..self.clone()
        }
    }

    /// A handle for the same lock whose every hold lasts at most `limit`,
    /// counted from the instant its acquire was sent (overriding
    /// [`Config::max_hold`](crate::Config::max_hold)). At the term the watchdog
    /// stops renewing the hold and its guard reports the lease lost
    /// ([`LockGuard::is_lease_lost`], [`LockGuard::lease_lost`],
    /// [`LockGuard::run`] ends with [`Error::LeaseLost`](crate::Error::LeaseLost));
    /// the key ends with its last lease, at most one watchdog timeout later,
    /// unless the guard is released first. Nothing changes on the wire: a Java
    /// client sees a hold that stopped being renewed.
    ///
    /// An explicit lease is bounded the same way: the guard's validity is the
    /// sooner of the lease's end and the term's, while the key keeps the lease
    /// it was given (a term never shortens what the server was asked for).
    ///
    /// A limit of zero or over [`MAX_DURATION`](crate::MAX_DURATION) is refused
    /// by the acquisition with [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let lock = client.get_lock("report")?.with_max_hold(Duration::from_secs(60));
    /// let guard = lock.lock().await?;
    /// // A section that overruns its minute is cut short, not left holding the lock.
    /// match guard.run(async { /* the work */ }).await {
    ///     Ok(()) => guard.unlock().await?,
    ///     Err(e) => assert!(e.is_lease_lost()),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_max_hold(&self, limit: Duration) -> RLock {
        RLock {
            max_hold: Some(limit),
            ..self.clone()
        }
    }

    /// A handle for the same lock whose owner is the calling tokio task (or
    /// thread, outside a task), looked up at each call: Redisson's rule, where the
    /// owner is the calling thread, for code ported line by line.
    ///
    /// **Hazard:** a task is not a sequential context. Futures that one task
    /// polls side by side (`join!`, `select!`, `buffer_unordered`,
    /// `FuturesUnordered`) are one owner here, so they all enter the lock at once.
    /// Prefer the default handle and [`RLock::with`] / [`LockGuard::scope`] for
    /// nesting.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// // Java: lock.lock(); lock.lock(); ... lock.unlock(); lock.unlock();
    /// let lock = client.get_lock("inventory")?.with_task_owner();
    /// let outer = lock.lock().await?;
    /// let inner = lock.lock().await?; // the same task: re-enters
    /// assert_eq!(lock.hold_count().await?, 2);
    /// inner.unlock().await?;
    /// outer.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_task_owner(&self) -> RLock {
        RLock {
            owner: OwnerId::Task,
            ..self.clone()
        }
    }

    /// Acquires the lock (as [`lock`](RLock::lock)), runs `section` inside the
    /// hold's scope, where acquisitions of this lock re-enter, then releases it.
    /// Returns what `section` returned.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("inventory")?;
    /// let count = lock
    ///     .with(|| async {
    ///         let nested = lock.lock().await?; // re-enters
    ///         let count = lock.hold_count().await?;
    ///         nested.unlock().await?;
    ///         Ok::<_, redisson_locks::Error>(count)
    ///     })
    ///     .await??;
    /// assert_eq!(count, 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](RLock::lock), and as [`LockGuard::unlock`] for the release
    /// (then `section`'s result is lost: the lease was lost while it ran).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting, nothing is left; dropped while
    /// `section` runs, the guard is dropped, which releases the hold.
    pub async fn with<F, Fut, T>(&self, section: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let guard = self.lock().await?;
        let output = guard.scope(section()).await;
        guard.unlock().await?;
        Ok(output)
    }

    /// As [`with`](RLock::with), with the section bounded by the hold
    /// ([`LockGuard::run`]): acquires (waiting as long as it takes), runs the
    /// section inside the hold's scope, drops it the moment the hold is no
    /// longer surely valid, and releases.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("nightly-report")?;
    /// match lock.run(|| async { /* write the report */ }).await {
    ///     Ok(()) => {}
    ///     Err(e) if e.is_lease_lost() => eprintln!("report abandoned: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](RLock::lock); [`Error::LeaseLost`](crate::Error::LeaseLost)
    /// when the hold was lost first (the release is still tried, and its
    /// "not held" is not reported over the loss).
    ///
    /// # Cancel safety
    /// As [`with`](RLock::with).
    pub async fn run<F, Fut, T>(&self, section: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let guard = self.lock().await?;
        let output = guard.run(section()).await;
        let released = guard.unlock().await;
        let output = output?;
        released?;
        Ok(output)
    }

    /// Acquires the lock, waiting as long as it takes; the watchdog renews it while
    /// held (Redisson `lock()`).
    ///
    /// Waiters of one client for one reentrant, non-reentrant or fenced lock
    /// wait in a line of that client: the first waits in Redis (attempts, and
    /// sleeps on the unlock channel), the others are parked behind it and send
    /// nothing until their turn, which comes in the order they arrived. Among
    /// clients it is still first come, first served only with
    /// [`get_fair_lock`](crate::Client::get_fair_lock). Only the default owner
    /// outside any scope of the lock waits in the line: a re-entry, a task owner
    /// ([`with_task_owner`](RLock::with_task_owner)) or an explicit id never does.
    ///
    /// The returned guard *is* the hold: keep it in a named variable for as long
    /// as the critical section runs. `let _ = lock.lock().await?;` drops the guard
    /// on the spot (`_` binds nothing), so the lock is released again at once.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    ///
    /// // Release explicitly, and see the release's errors:
    /// let guard = lock.lock().await?;
    /// // ... the critical section ...
    /// guard.unlock().await?;
    ///
    /// // Or hold it to the end of the block; the drop releases it:
    /// {
    ///     let _guard = lock.lock().await?;
    ///     // ... the critical section ...
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when Redis fails more than `retry_attempts` times in a row;
    /// [`Error::WrongType`] when the key holds something else.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no hold, no subscription and no
    /// renewal behind, even if the acquire had already run on the server.
    pub async fn lock(&self) -> Result<LockGuard> {
        self.acquire(Lease::Watchdog, Wait::Forever)
            .await?
            .ok_or_else(|| Error::unexpected("lock", "gave up without a wait limit"))
    }

    /// Acquires the lock for `lease`, waiting as long as it takes; it is not renewed
    /// (Redisson `lock(leaseTime, unit)`). Keep the guard bound, as for
    /// [`lock`](RLock::lock): `let _ = ...` releases at once.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("report")?;
    /// let guard = lock.lock_with_lease(Duration::from_secs(10)).await?;
    /// // ... at most ten seconds of work: then the lock frees itself ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero lease or one over
    /// [`MAX_DURATION`](crate::MAX_DURATION); otherwise as [`lock`](RLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire(Lease::Fixed(lease), Wait::Forever)
            .await?
            .ok_or_else(|| Error::unexpected("lock", "gave up without a wait limit"))
    }

    /// Tries once, without waiting (Redisson `tryLock()`); `None` when another owner
    /// holds the lock. Keep the guard bound, as for [`lock`](RLock::lock):
    /// `if let Some(_) = ...` releases at once, `if let Some(_guard) = ...` does not.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("nightly-cleanup")?;
    /// match lock.try_lock().await? {
    ///     Some(guard) => {
    ///         // ... clean up ...
    ///         guard.unlock().await?;
    ///     }
    ///     None => { /* another instance is at it: skip */ }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](RLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(Lease::Watchdog, Wait::Once).await
    }

    /// Tries for up to `wait` (Redisson `tryLock(waitTime, unit)`); the watchdog
    /// renews the hold. `None` when the wait ran out. Keep the guard bound, as for
    /// [`lock`](RLock::lock).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// let Some(guard) = lock.try_lock_wait(Duration::from_secs(2)).await? else {
    ///     return Ok(()); // busy for two seconds: give up
    /// };
    /// // ... the critical section ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wait over [`MAX_DURATION`](crate::MAX_DURATION);
    /// otherwise as [`lock`](RLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    pub async fn try_lock_wait(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Lease::Watchdog, Wait::For(wait)).await
    }

    /// Tries for up to `wait`, and holds for `lease` without renewal (Redisson
    /// `tryLock(waitTime, leaseTime, unit)`); `None` when the wait ran out. Keep
    /// the guard bound, as for [`lock`](RLock::lock).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// if let Some(guard) = lock
    ///     .try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10))
    ///     .await?
    /// {
    ///     // ... at most ten seconds of work ...
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock_with_lease`](RLock::lock_with_lease) and
    /// [`try_lock_wait`](RLock::try_lock_wait).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Lease::Fixed(lease), Wait::For(wait)).await
    }

    /// Releases one hold of the calling owner (Redisson `unlock()`), for holds
    /// whose guard was [`detach`](LockGuard::detach)ed. Prefer
    /// [`LockGuard::unlock`].
    ///
    /// The calling owner is the handle's: a task-owner or explicit-owner handle
    /// ([`with_task_owner`](RLock::with_task_owner),
    /// [`with_owner_id`](RLock::with_owner_id)), or the enclosing hold's scope; a
    /// default handle outside any scope owns nothing and gets [`Error::NotHeld`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?.with_task_owner();
    /// lock.lock().await?.detach(); // Java: lock.lock();
    /// // ...
    /// lock.unlock().await?;        // Java: lock.unlock();
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the calling owner holds no hold
    /// (Java's `IllegalMonitorStateException`).
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped call may or may not have
    /// released the hold; once polled, the hold is renewed no more either way, so
    /// it ends with its lease at the latest.
    pub async fn unlock(&self) -> Result<()> {
        let owner = self.query_owner();
        let ops = self.ops(owner, Wait::Forever);
        let (field, kind) = ops.renewal();
        // The newest detached hold of this owner: renewed no more from here,
        // and gone with its record (count, renewal, self-wait record) once the
        // release is answered, or this call dropped.
        let mut detached = self.client.detached.take_newest(&self.name, field, kind);
        if let Some(hold) = detached.as_mut() {
            hold.stop_renewing();
        }
        let slot = self.client.ledger.slot(&self.name, field);
        let released = release(
            &self.client.releaser,
            &slot,
            &ops,
            self.watchdog_lease_ms()?,
        )
        .await;
        drop(detached);
        released
    }

    /// Releases the lock whoever holds it, however many holds (Redisson
    /// `forceUnlock()`). `true` when it was held. Holders in this client see
    /// [`LockGuard::is_lease_lost`]; holders elsewhere find out at their next
    /// renewal or unlock.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// // An operator's tool: free a lock left behind by a stuck process.
    /// let lock = client.get_lock("orders:42")?;
    /// if lock.force_unlock().await? {
    ///     println!("orders:42 was held; it is free now");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    ///
    /// # Cancel safety
    /// A dropped call may or may not have freed the lock (the script runs whole or
    /// not at all); if it did, this client's holders learn it at their next
    /// renewal rather than at once.
    pub async fn force_unlock(&self) -> Result<bool> {
        let freed = self
            .kind
            .force_unlock(self.client.clone(), self.name.clone())
            .await?;
        // Only a lock that was deleted takes this client's holds with it (forcing
        // the read side of a lock in write mode deletes nothing).
        if freed {
            self.client.forced_open(&self.name);
        }
        Ok(freed)
    }

    /// The hash field counting owner `id`'s holds on this side.
    fn field(&self, id: u64) -> String {
        self.kind.field(owner_field(&self.client.id, id))
    }

    /// Is the lock held by anyone (Redisson `isLocked()`)? For the write side of a
    /// read-write lock: is it in write mode? For the read side: is any read hold
    /// taken, in read mode or by a writer on its way to a downgrade (write mode
    /// with read holds), as Redisson answers.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_locked().await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn is_locked(&self) -> Result<bool> {
        self.kind
            .is_locked(self.client.clone(), self.name.clone())
            .await
    }

    /// Does the calling owner hold it (Redisson `isHeldByCurrentThread()`)? For a
    /// default handle the calling owner is the enclosing hold's scope (outside any
    /// scope: nobody, so `false`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// assert!(guard.scope(lock.is_held_by_current_task()).await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails; [`Error::WrongType`] when the key is
    /// not a hash.
    pub async fn is_held_by_current_task(&self) -> Result<bool> {
        self.is_held_by(self.query_owner()).await
    }

    /// Does owner `id` of this client hold it (Redisson `isHeldByThread(id)`)?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_held_by(guard.owner_id()).await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`is_held_by_current_task`](RLock::is_held_by_current_task).
    pub async fn is_held_by(&self, id: u64) -> Result<bool> {
        let mut conn = self.client.conn.clone();
        conn.hexists(&*self.name, self.field(id))
            .await
            .map_err(|e| Error::from_redis(&self.name, e))
    }

    /// How many holds the calling owner has (Redisson `getHoldCount()`); 0 when
    /// none. For a default handle the calling owner is the enclosing hold's scope
    /// (outside any scope: nobody, so 0).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// lock.with(|| async {
    ///     assert_eq!(lock.hold_count().await?, 1);
    ///     let nested = lock.lock().await?;
    ///     assert_eq!(lock.hold_count().await?, 2);
    ///     nested.unlock().await
    /// })
    /// .await??;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`is_held_by_current_task`](RLock::is_held_by_current_task).
    pub async fn hold_count(&self) -> Result<u64> {
        let mut conn = self.client.conn.clone();
        let count: Option<u64> = conn
            .hget(&*self.name, self.field(self.query_owner()))
            .await
            .map_err(|e| Error::from_redis(&self.name, e))?;
        Ok(count.unwrap_or(0))
    }

    /// The lock's remaining time to live (Redisson `remainTimeToLive()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::RemainingTtl;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.remain_time_to_live().await? {
    ///     RemainingTtl::NotLocked => println!("free"),
    ///     RemainingTtl::Expires(left) => println!("held for {left:?} more, unless renewed"),
    ///     _ => println!("held with no expiry"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn remain_time_to_live(&self) -> Result<RemainingTtl> {
        let mut conn = self.client.conn.clone();
        let pttl: i64 = conn
            .pttl(&*self.name)
            .await
            .map_err(|e| Error::from_redis(&self.name, e))?;
        Ok(RemainingTtl::from_pttl(pttl))
    }

    /// The scripts for one acquisition (or release) by owner `id`.
    fn ops(&self, id: u64, wait: Wait) -> Arc<dyn Acquirer> {
        let owner = owner_field(&self.client.id, id);
        self.kind.acquirer(&self.client, &self.name, owner, wait)
    }

    fn watchdog_lease_ms(&self) -> Result<u64> {
        duration_to_millis("watchdog timeout", self.client.config.lock_watchdog_timeout)
    }

    // Not an `async fn`, which would keep each argument twice (as the argument
    // and as the body's local): a waiting future carries both for its whole wait.
    #[allow(clippy::manual_async_fn)]
    fn acquire(
        &self,
        lease: Lease,
        wait: Wait,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send + '_ {
        async move {
            if let Lease::Fixed(lease) = lease {
                duration_to_millis("lease", lease)?;
            }
            let (owner, new_owner) = self.owner.for_acquisition(&self.client.id, &self.name);
            let ops = self.ops(owner, wait);
            // The owner's one place in this future (as `request.owner`).
            let request = Request {
                context: self.owner.context(),
                owner,
                claim: self.kind.claim(),
            };
            let started = tokio::time::Instant::now();
            // Made where it is awaited, not before: a future moved in sits in two
            // places of the `lock()` future (see `long_wait::watched`).
            let acquiring =
                || wait::acquire(&self.client, &ops, (lease, self.max_hold), wait, new_owner);
            let hold = crate::trace::in_acquire_span(&self.name, self.kind.kind().name(), async {
                match wait {
                    // One try never waits, so it never waits for itself.
                    Wait::Once => acquiring().await,
                    _ => {
                        // Made by the watch when it needs it: a parked waiter
                        // keeps no room for it.
                        let request = &request;
                        let long = || LongWait {
                            lock: self.name.clone(),
                            kind: self.kind.kind().name(),
                            owner: request.owner,
                            context: request.context,
                        };
                        // Each maker passed by reference, and capturing little:
                        // what a layer keeps for its whole wait.
                        let guarded = || {
                            let (client, name) = (&self.client, &self.name);
                            let policy = client.self_wait_policy();
                            guard_wait(&client.holdings, policy, name, request, &acquiring)
                        };
                        watched(&self.client, (request.context, long), &guarded).await
                    }
                }
            })
            .await;
            crate::trace::debug_event!(
                "lock {:?} ({}): acquire {} after {:?}",
                self.name,
                self.kind.kind().name(),
                match &hold {
                    Ok(Some(_)) => "granted",
                    Ok(None) => "gave up",
                    Err(_) => "failed",
                },
                started.elapsed()
            );
            Ok(hold?.map(|hold| {
                let (validity, owner) = (hold.validity.clone(), request.owner);
                let mark = self.client.holdings.record(&self.name, request, validity);
                LockGuard::new(self.client.clone(), ops, owner, hold, mark, new_owner)
            }))
        }
    }

    /// How this handle and `other` share a lock in one multi-lock: `Some(true)`
    /// when they are the same lock (same client, name, kind and owner rule: one
    /// of them is enough), `Some(false)` when they are two handles of one lock
    /// whose holds would exclude each other (the multi-lock's second would wait
    /// for its first for ever), `None` when they are independent.
    pub(crate) fn overlap(&self, other: &RLock) -> Option<bool> {
        if !Arc::ptr_eq(&self.client, &other.client) || self.name != other.name {
            return None;
        }
        let (mine, theirs) = (self.kind.claim(), other.kind.claim());
        if self.kind.kind().name() == other.kind.kind().name()
            && mine == theirs
            && self.owner == other.owner
        {
            return Some(true);
        }
        // Two acquisitions of one multi-lock are two owners (outside a scope).
        mine.excludes(1, &theirs, 2).then_some(false)
    }

    /// Where this lock sorts in a multi-lock: by name, then by the server (as its
    /// client's config names it) and database. Every caller that takes the same
    /// locks then takes them in the same order, so two callers never hold one
    /// each of a pair while waiting for the other.
    pub(crate) fn canonical_key(&self) -> (&str, &str, i64) {
        let config = &self.client.config;
        let server = config
            .cluster_nodes
            .first()
            .or(config.sentinel_master_name.as_ref())
            .unwrap_or(&config.address);
        (&self.name, server, config.database)
    }

    /// The owner that queries and [`unlock`](RLock::unlock) act for.
    fn query_owner(&self) -> u64 {
        self.owner.for_query(&self.client.id, &self.name)
    }
}
