//! The guard every lock kind hands out.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::contract::Acquirer;
use crate::engine::detached::DetachedHold;
use crate::engine::ledger::{release_one, Slot};
use crate::engine::release::Releaser;
use crate::engine::self_wait::HeldMark;
use crate::engine::wait::Hold;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::scripts::Released;

/// One hold of a lock, released by [`unlock`](LockGuard::unlock) or by dropping it.
///
/// The guard remembers the owner that acquired it, so it releases correctly from
/// any task. Nested acquisitions by one owner each get their own guard; the lock is
/// free once the last is released.
///
/// # Validity
/// The guard knows from this machine's monotonic clock until when its hold is
/// surely valid: the instant its last confirmed acquire or renewal was sent, plus
/// the lease, minus a margin for clock drift
/// ([`Config::clock_drift_factor`](crate::Config::clock_drift_factor)). Check
/// [`valid_for`](LockGuard::valid_for) before a side effect that must not happen
/// without the lock; [`is_lease_lost`](LockGuard::is_lease_lost) and
/// [`lease_lost`](LockGuard::lease_lost) report the loss as soon as that instant
/// passes, whatever the network or the watchdog is doing.
///
/// # Drop
/// Dropping a guard stops its watchdog renewal at once and sends the release from
/// the client's own background thread, so a `?` or a panic inside the critical
/// section does not leave the lock held until its lease runs out. This works
/// wherever the guard is dropped: in a task, while its runtime shuts down, at the
/// end of `block_on`, or on a plain thread. That release's errors cannot be
/// reported: call [`unlock`](LockGuard::unlock) to see them. A process that exits
/// before the release is sent (close the client first:
/// [`Client::close`](crate::Client::close) waits for queued releases) or is
/// killed leaves the hold to its lease.
///
/// So a guard must be bound for as long as the hold is wanted:
/// `let _ = lock.lock().await?;` drops it in the same statement (`_` binds
/// nothing), releasing the lock at once, and `#[must_use]` cannot flag that.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_lock("orders:42")?;
/// {
///     let _guard = lock.lock().await?; // held until the end of this block
///     // ... the critical section; a `?` here still releases the lock ...
/// }
/// let guard = lock.lock().await?; // or released explicitly, errors reported
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
#[derive(Debug)]
pub struct LockGuard {
    client: Arc<Engine>,
    ops: Arc<dyn Acquirer>,
    owner_id: u64,
    lease_ms: u64,
    /// The fencing token the acquisition drew (the fenced lock only).
    token: Option<u64>,
    hold: Option<Hold>,
    /// This hold in the client's record of who holds what, for telling
    /// self-waits (see `self_wait.rs`); gone with the guard, or kept by the
    /// client when the guard is detached.
    recorded: Option<HeldMark>,
    /// Its owner was made for this acquisition alone (a default handle outside
    /// any scope): once detached, no handle can release it.
    single_acquisition: bool,
}

impl LockGuard {
    pub(crate) fn new(
        client: Arc<Engine>,
        ops: Arc<dyn Acquirer>,
        owner_id: u64,
        hold: Hold,
        recorded: HeldMark,
        single_acquisition: bool,
    ) -> Self {
        LockGuard {
            client,
            ops,
            owner_id,
            lease_ms: hold.lease_ms,
            token: hold.drawn.token,
            hold: Some(hold),
            recorded: Some(recorded),
            single_acquisition,
        }
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock().await?;
    /// assert_eq!(guard.name(), "orders:42");
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.ops.name()
    }

    /// The fencing token this hold drew, for a lock from
    /// [`Client::get_fenced_lock`](crate::Client::get_fenced_lock): greater than
    /// every token drawn before for this lock name. `None` for other kinds.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_fenced_lock("ledger")?.lock().await?;
    /// let token = guard.token().expect("a fenced lock's guard has a token");
    /// // ... send `token` with every write to the store ...
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner field this hold lives under in the lock's hash.
    pub(crate) fn owner_field(&self) -> &str {
        self.ops.owner()
    }

    /// The id (task, thread, explicit, or one of its own for a default handle
    /// outside any scope) of the owner holding this guard.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// let guard = lock.with_owner_id(7).lock().await?;
    /// assert_eq!(guard.owner_id(), 7);
    /// assert!(lock.is_held_by(7).await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn owner_id(&self) -> u64 {
        self.owner_id
    }

    /// Runs `section` inside this hold's scope: every acquisition of this lock
    /// (same client and name, read and write sides alike) awaited inside it
    /// re-enters as this guard's owner. Futures outside the scope, siblings polled
    /// by the same task included, are other owners and wait their turn.
    ///
    /// ```no_run
    /// # async fn f(lock: redisson_locks::RLock) -> Result<(), redisson_locks::Error> {
    /// let guard = lock.lock().await?;
    /// guard
    ///     .scope(async {
    ///         let nested = lock.lock().await?; // re-enters: hold count 2
    ///         nested.unlock().await
    ///     })
    ///     .await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As cancel safe as `section`.
    pub async fn scope<F: std::future::Future>(&self, section: F) -> F::Output {
        crate::engine::owner::in_scope(
            self.client.id.clone(),
            self.ops.target().name.clone(),
            self.owner_id,
            section,
        )
        .await
    }

    /// Runs the critical section `section` inside this hold's scope (as
    /// [`scope`](LockGuard::scope)) and drops it the moment the hold is no
    /// longer surely valid: its validity ran out on this client's clock, a
    /// renewal found it gone, it was forced open, or its term ended. So the
    /// section's side effects stop before another holder can get in (the
    /// validity ends before the lease does, by the drift margin).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock().await?;
    /// match guard.run(async { /* the critical section */ 42 }).await {
    ///     Ok(answer) => println!("done: {answer}"),
    ///     Err(e) if e.is_lease_lost() => eprintln!("stopped: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when the hold was lost
    /// first (a lost hold wins a tie: the section's result is not trusted).
    ///
    /// The section is stopped between two of its steps: one that computes
    /// without yielding to the runtime runs on until it yields.
    ///
    /// # Cancel safety
    /// Dropping the call drops the section where it stands, as the loss does.
    pub async fn run<F: std::future::Future>(&self, section: F) -> crate::Result<F::Output> {
        crate::engine::validity::while_held(
            self.scope(section),
            || self.is_lease_lost(),
            self.lease_lost(),
        )
        .await
        .ok_or_else(|| crate::Error::LeaseLost {
            name: self.ops.name().to_owned(),
        })
    }

    /// Releases this hold.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock().await?;
    /// // ... the critical section ...
    /// if let Err(e) = guard.unlock().await {
    ///     // The hold was lost before the release (lease expired, forced open):
    ///     // the critical section may have overlapped another holder's.
    ///     eprintln!("orders:42: {e}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the hold was already gone (its lease expired, or the
    /// lock was force-unlocked); [`Error::Redis`] when the release could not be sent.
    /// Either way the watchdog no longer renews this hold.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped call may or may not have released
    /// the hold; it is renewed no more either way, so it ends with its lease at the latest.
    // Not an `async fn`, which would keep the guard twice (as the argument and
    // as the body's local), in every task that waits to release it.
    #[allow(clippy::manual_async_fn)]
    pub fn unlock(mut self) -> impl std::future::Future<Output = Result<()>> + Send {
        async move {
            // Stop renewing before the release is sent, so no renewal outlives
            // it (the hold goes here, and no room is kept for it).
            let Some(slot) = self.hold.take().map(|hold| hold.slot.clone()) else {
                return Ok(());
            };
            // Boxed: a task is as large as its largest await, and many tasks
            // that wait for a lock will release it; the release's future is
            // brief.
            Box::pin(release(
                &self.client.releaser,
                &slot,
                &self.ops,
                self.lease_ms,
            ))
            .await
        }
    }

    /// Keeps the hold but lets go of the guard: dropping no longer releases it, and
    /// the watchdog keeps renewing it. Release it later through the lock handle's
    /// `unlock()` from the same owner, as Java code does: a task-owner or
    /// explicit-owner handle ([`RLock::with_task_owner`](crate::RLock::with_task_owner),
    /// [`RLock::with_owner_id`](crate::RLock::with_owner_id)), since a default
    /// handle outside any scope owns nothing.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?.with_task_owner();
    /// lock.lock().await?.detach(); // Java: lock.lock();
    /// // ... no guard to carry around ...
    /// lock.unlock().await?;        // Java: lock.unlock();
    /// # Ok(()) }
    /// ```
    pub fn detach(mut self) {
        if let Some(hold) = self.hold.take() {
            // Its count stays in the ledger, its renewal with the watchdog and
            // its record (a wait behind it is still a self-wait) until
            // `RLock::unlock` ends it: one record holds all three.
            if self.single_acquisition {
                crate::trace::warn_event!(
                    "lock {:?}: a hold of a default handle outside any scope was detached; no \
                     handle can release it but `force_unlock()` (its owner was this one \
                     acquisition), so it is renewed until the client closes. Keep the guard \
                     and call `guard.unlock()`, or, for Java's lock()/unlock() pairs, make the \
                     task the owner: `with_task_owner()` or `Config::owner_mode = \
                     OwnerMode::Task`",
                    self.ops.name()
                );
            }
            self.client.detached.keep(DetachedHold::new(
                self.ops.clone(),
                self.lease_ms,
                hold.slot,
                hold.renewal,
                self.recorded.take(),
            ));
        }
    }

    /// Has this hold been lost? True once the hold is no longer surely valid on
    /// this client's clock (see [`valid_for`](LockGuard::valid_for)), or a renewal
    /// found it gone on the server (expired while the connection was down,
    /// force-unlocked, ...), or the guard was consumed. Once true, it stays true.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("import")?.lock().await?;
    /// for batch in 0..100 {
    ///     if guard.is_lease_lost() {
    ///         break; // someone else may hold the lock now: stop writing
    ///     }
    ///     // ... import `batch` ...
    /// #   let _ = batch;
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.hold
            .as_ref()
            .is_none_or(|hold| hold.validity.is_lost())
    }

    /// How much longer this hold is surely valid, measured on this machine's
    /// monotonic clock; `None` once it is lost. Renewed holds move this forward
    /// with each confirmed renewal; a hold with an explicit lease only counts down.
    ///
    /// Redlock calls this the validity time. Check it right before a side effect
    /// that must not happen without the lock, and give the side effect no longer
    /// than this to complete; when the store can check it, a fenced token is the
    /// stronger answer to a holder paused past its lease.
    ///
    /// ```no_run
    /// # async fn f(lock: redisson_locks::RLock) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let guard = lock.lock().await?;
    /// match guard.valid_for() {
    ///     Some(left) if left > Duration::from_millis(500) => { /* write */ }
    ///     _ => { /* too close to the end: do not start the write */ }
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        self.hold.as_ref()?.validity.valid_for()
    }

    /// Completes when this hold is lost (see [`is_lease_lost`]): at the latest
    /// when its validity runs out on this client's clock, or as soon as a renewal
    /// finds it gone. For example, to abort work that must not continue without
    /// the lock:
    ///
    /// ```no_run
    /// # async fn f(lock: redisson_locks::RLock) -> Result<(), redisson_locks::Error> {
    /// let guard = lock.lock().await?;
    /// tokio::select! {
    ///     _ = guard.lease_lost() => eprintln!("lost the lock; work abandoned"),
    ///     _ = async { /* the critical section */ } => guard.unlock().await?,
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    ///
    /// [`is_lease_lost`]: LockGuard::is_lease_lost
    pub async fn lease_lost(&self) {
        if let Some(hold) = &self.hold {
            hold.validity.wait_lost().await;
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        let slot = hold.slot.clone();
        drop(hold);
        // The same release as `unlock()`'s, from the client's thread; only
        // its errors cannot reach anyone.
        let (ops, releaser, lease_ms) = (
            self.ops.clone(),
            self.client.releaser.clone(),
            self.lease_ms,
        );
        self.client.conn.spawn_cleanup(async move {
            if let Err(e) = release(&releaser, &slot, &ops, lease_ms).await {
                if !e.is_not_held() {
                    crate::trace::warn_event!(
                        "lock {:?}: releasing a dropped guard failed (the hold ends with its lease): {e}",
                        ops.name()
                    );
                }
            }
        });
    }
}

/// Releases every guard (a multi-lock's, a RedLock's), reporting the first error;
/// the others are released all the same.
pub(crate) async fn unlock_all(guards: Vec<LockGuard>) -> Result<()> {
    let mut first = None;
    for guard in guards {
        if let Err(e) = guard.unlock().await {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Releases one hold of `ops`' owner through its gate (`slot`), as every path
/// does (see `release.rs`); the not-held reply becomes [`Error::NotHeld`].
pub(crate) async fn release(
    releaser: &Releaser,
    slot: &Slot,
    ops: &Arc<dyn Acquirer>,
    lease_ms: u64,
) -> Result<()> {
    let released = release_one(slot, ops, releaser, lease_ms).await?;
    match released {
        Released::NotHeld => Err(Error::NotHeld {
            name: ops.name().to_owned(),
            owner: ops.owner().to_owned(),
        }),
        Released::StillHeld
        | Released::Freed
        | Released::FreedAndWoke { .. }
        | Released::Granted => Ok(()),
    }
}
