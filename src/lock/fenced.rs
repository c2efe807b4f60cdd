//! The fenced lock (Redisson `getFencedLock`): the reentrant lock, plus a fencing
//! token drawn atomically with every acquisition (re-entries included) from a
//! counter that only grows, `redisson_lock_token:{name}`.
//!
//! A lease-based lock cannot stop a holder that was paused past its lease (a GC
//! pause, a frozen VM) from acting on a belief it no longer has; the token lets
//! the *resource* refuse it. A holder sends its token with every write; the store
//! keeps the highest token it has seen and refuses (atomically, in the same step
//! as the write) any write with a lower one. Then a late write from a holder whose
//! lease ended, and whose successor already wrote, is refused rather than applied.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::guard::LockGuard;
use super::kind::LockKind;
use super::reentrant::{Reentrant, ReentrantOps};
use super::rlock::RLock;
use crate::engine::contract::{Acquirer, BoxFuture, Drawn, Outcome, Target, Wait, Waits};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, Kind};
use crate::transport::conn::Conn;
use crate::transport::keys::fenced_token;
use crate::transport::scripts::{self, Reentry, Released};

/// The fenced lock's kind.
#[derive(Debug)]
pub(crate) struct Fenced;

impl LockKind for Fenced {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        Arc::new(FencedOps {
            counter: fenced_token(name),
            reentrant: Arc::new(ReentrantOps::new(
                name.clone(),
                owner,
                Reentry::Allowed,
                labels,
            )),
        })
    }

    fn kind(&self) -> Kind {
        kind!("fenced")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Reentrant.force_unlock(client, name)
    }
}

/// The fenced lock's scripts for one acquisition: the reentrant lock's, but the
/// acquire that also draws a token, which its attempt returns with the hold.
#[derive(Debug)]
struct FencedOps {
    /// The layout is the reentrant lock's: its target and its release.
    reentrant: Arc<ReentrantOps>,
    counter: String,
}

impl Acquirer for FencedOps {
    fn target(&self) -> &Target {
        self.reentrant.target()
    }

    fn attempt(
        self: Arc<Self>,
        mut conn: Conn,
        lease_ms: u64,
        _queue: bool,
    ) -> BoxFuture<Result<Outcome>> {
        Box::pin(async move {
            let reply = scripts::fenced_acquire(
                &mut conn,
                self.name(),
                &self.counter,
                lease_ms,
                self.owner(),
            )
            .await?;
            Ok(reply
                .map(|token| Drawn { token: Some(token) })
                .map_err(Into::into))
        })
    }

    fn release(self: Arc<Self>, conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>> {
        self.reentrant.clone().release(conn, lease_ms)
    }

    fn waits(&self) -> Waits {
        self.reentrant.waits()
    }
}

/// A fenced lock (Redisson's `RFencedLock`): an [`RLock`] (every method, through
/// `Deref`) whose every acquisition draws a fencing token, greater than every
/// token drawn before for this name, from any client, Java ones included.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_fenced_lock("ledger")?;
/// let (guard, token) = lock.lock_and_get_token().await?;
/// // Send `token` with every write; the store refuses writes with a token lower
/// // than the highest it has seen (compare and write in one atomic step).
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RFencedLock {
    lock: RLock,
}

impl std::ops::Deref for RFencedLock {
    type Target = RLock;

    fn deref(&self) -> &RLock {
        &self.lock
    }
}

impl RFencedLock {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RFencedLock {
            lock: RLock::new(client, name, Arc::new(Fenced)),
        }
    }

    /// This fenced lock acting for owner `id` (as [`RLock::with_owner_id`]),
    /// still fenced.
    pub(crate) fn for_owner(&self, id: u64) -> RFencedLock {
        RFencedLock {
            lock: self.lock.with_owner_id(id),
        }
    }

    /// Acquires the lock as [`RLock::lock`] does, and returns the token it drew
    /// with the guard (Redisson `lockAndGetToken()`). Keep the guard bound:
    /// `let (_, token) = ...` releases the lock at once; use `(_guard, token)`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_fenced_lock("ledger")?;
    /// let (guard, token) = lock.lock_and_get_token().await?;
    /// // Every write carries `token`; the store keeps the highest it has seen and
    /// // refuses lower ones, so a holder paused past its lease cannot overwrite.
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RLock::lock`].
    ///
    /// # Cancel safety
    /// As [`RLock::lock`].
    pub async fn lock_and_get_token(&self) -> Result<(LockGuard, u64)> {
        let guard = self.lock.lock().await?;
        with_token(guard)
    }

    /// Tries for up to `wait`, with `lease` (or the watchdog when `None`), and
    /// returns the token with the guard (Redisson `tryLockAndGetToken(wait,
    /// lease, unit)`); `None` when the wait ran out.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_fenced_lock("ledger")?;
    /// let wait = Duration::from_secs(1);
    /// if let Some((guard, token)) = lock.try_lock_and_get_token(wait, None).await? {
    ///     // ... writes carrying `token`; the watchdog renews the hold ...
    /// #   let _ = token;
    ///     guard.unlock().await?;
    /// }
    /// let lease = Some(Duration::from_secs(10)); // or a fixed lease, not renewed
    /// if let Some((guard, _token)) = lock.try_lock_and_get_token(wait, lease).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RLock::try_lock_with_lease`].
    ///
    /// # Cancel safety
    /// As [`RLock::lock`].
    pub async fn try_lock_and_get_token(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<(LockGuard, u64)>> {
        let guard = match lease {
            Some(lease) => self.lock.try_lock_with_lease(wait, lease).await?,
            None => self.lock.try_lock_wait(wait).await?,
        };
        guard.map(with_token).transpose()
    }

    /// The last token drawn for this lock, by anyone (Redisson `getToken()`);
    /// `None` before the first acquisition.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_fenced_lock("ledger")?;
    /// let (guard, token) = lock.lock_and_get_token().await?;
    /// assert!(lock.get_token().await? >= Some(token)); // others may have drawn since
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn get_token(&self) -> Result<Option<u64>> {
        let mut conn = self.lock.client().conn.clone();
        conn.get(fenced_token(self.lock.name()))
            .await
            .map_err(|e| Error::from_redis(self.lock.name(), e))
    }
}

fn with_token(guard: LockGuard) -> Result<(LockGuard, u64)> {
    match guard.token() {
        Some(token) => Ok((guard, token)),
        None => Err(Error::unexpected("fenced lock acquire", "no token drawn")),
    }
}
