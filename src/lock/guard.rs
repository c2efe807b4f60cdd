//! The guard every lock kind hands out.

use std::sync::Arc;

use tokio::time::Instant;

use crate::client::ClientInner;
use crate::error::{Error, Result};
use crate::scripts::Released;
use crate::wait::{Acquirer, Hold};

/// One hold of a lock, released by [`unlock`](LockGuard::unlock) or by dropping it.
///
/// The guard remembers the owner that acquired it, so it releases correctly from
/// any task. Nested acquisitions by one owner each get their own guard; the lock is
/// free once the last is released.
///
/// # Drop
/// Dropping a guard stops its watchdog renewal at once and sends the release from a
/// spawned task, so a `?` or a panic inside the critical section does not leave the
/// lock held until its lease runs out. That release's errors cannot be reported:
/// call [`unlock`](LockGuard::unlock) to see them. Dropped outside a tokio runtime,
/// the hold is left to expire with its lease.
#[must_use = "dropping the guard releases the lock at once"]
#[derive(Debug)]
pub struct LockGuard {
    client: Arc<ClientInner>,
    ops: Arc<dyn Acquirer>,
    owner_id: u64,
    lease_ms: u64,
    hold: Option<Hold>,
}

impl LockGuard {
    pub(crate) fn new(
        client: Arc<ClientInner>,
        ops: Arc<dyn Acquirer>,
        owner_id: u64,
        hold: Hold,
    ) -> Self {
        LockGuard {
            client,
            ops,
            owner_id,
            lease_ms: hold.lease_ms,
            hold: Some(hold),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.ops.name()
    }

    /// The id (task, thread or explicit) of the owner holding this guard.
    pub fn owner_id(&self) -> u64 {
        self.owner_id
    }

    /// Releases this hold.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the hold was already gone (its lease expired, or the
    /// lock was force-unlocked); [`Error::Redis`] when the release could not be sent.
    /// Either way the watchdog no longer renews this hold.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped call may or may not have released
    /// the hold; it is renewed no more either way, so it ends with its lease at the latest.
    pub async fn unlock(mut self) -> Result<()> {
        let Some(hold) = self.hold.take() else {
            return Ok(());
        };
        // Stop renewing before the release is sent, so no renewal outlives it.
        drop(hold);
        release(&self.client, &self.ops, self.lease_ms).await
    }

    /// Keeps the hold but lets go of the guard: dropping no longer releases it, and
    /// the watchdog keeps renewing it. Release it later through the lock handle's
    /// `unlock()` from the same owner, as Java code does.
    pub fn detach(mut self) {
        if let Some(hold) = self.hold.take() {
            if let Some(renewal) = hold.renewal {
                renewal.detach();
            }
        }
    }

    /// Has this hold's lease been lost? For a hold renewed by the watchdog: a renewal
    /// found it gone (expired while the connection was down, force-unlocked, ...).
    /// For an explicit lease: the lease has run out.
    pub fn is_lease_lost(&self) -> bool {
        let Some(hold) = &self.hold else {
            return true;
        };
        match (hold.state(), hold.lease_deadline) {
            (Some(state), _) => state.is_lost(),
            (None, Some(deadline)) => Instant::now() >= deadline,
            (None, None) => false,
        }
    }

    /// Completes when this hold's lease is lost (see [`is_lease_lost`]); for
    /// example, to abort work that must not continue without the lock:
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
        let Some(hold) = &self.hold else {
            return;
        };
        match (hold.state(), hold.lease_deadline) {
            (Some(state), _) => state.wait_lost().await,
            (None, Some(deadline)) => tokio::time::sleep_until(deadline).await,
            (None, None) => std::future::pending().await,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        drop(hold);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let ops = self.ops.clone();
            let conn = self.client.conn.clone();
            let lease_ms = self.lease_ms;
            runtime.spawn(async move {
                let _ = ops.release(conn, lease_ms).await;
            });
        }
    }
}

/// Releases one hold of `ops`' owner; the not-held reply becomes [`Error::NotHeld`].
pub(crate) async fn release(
    client: &Arc<ClientInner>,
    ops: &Arc<dyn Acquirer>,
    lease_ms: u64,
) -> Result<()> {
    let released = ops.clone().release(client.conn.clone(), lease_ms).await?;
    client.quiet_sync().run(&mut client.conn.clone()).await;
    match released {
        Released::NotHeld => Err(Error::NotHeld {
            name: ops.name().to_owned(),
            owner: ops.owner().to_owned(),
        }),
        Released::StillHeld | Released::Freed => Ok(()),
    }
}
