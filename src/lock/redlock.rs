//! RedLock (Redisson `getRedLock`, the Redlock algorithm): one lock on each of N
//! independent servers (N clients), held when a quorum (N/2 + 1) of them is.
//!
//! A round asks every server at once, once each (Redlock's advice: no waiting
//! on a server, or contenders each holding a minority wait on each other), with
//! a small timeout (a frozen server must not eat the lease). With a quorum in hand, the hold is
//! valid until fewer than a quorum of its holds are surely valid, each measured
//! as any hold is (from the instant its acquire was sent, minus the drift margin;
//! see `validity.rs`); for a fixed lease that is at least Redlock's
//! `lease - elapsed - drift`. A round that misses the quorum, or whose validity
//! is already too short, releases everything it took, pauses at random and
//! tries again until the wait is spent.
//!
//! What it does not do (see TOPOLOGY.md): it cannot stop a holder paused past its
//! validity, and it trusts the servers' clocks not to jump; a fenced lock and a
//! store that checks tokens answer the first.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::guard::{unlock_all, LockGuard};
use super::rlock::RLock;
use super::{jitter, ROUND_PAUSE};
use crate::error::{Error, Result};

/// A round that leaves less than this of validity counts as missed.
const MIN_VALIDITY: Duration = Duration::from_millis(1);

/// The Redlock algorithm over one lock per independent server (Redisson's
/// `RedissonRedLock`, deprecated there but the algorithm is what matters).
///
/// ```no_run
/// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
/// use std::time::Duration;
/// use redisson_locks::RedLock;
///
/// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
/// let red = RedLock::new(locks)?;
/// if let Some(guard) = red.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
///     // Act only while `guard.valid_for()` says there is time left.
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedLock {
    locks: Vec<RLock>,
}

/// A RedLock hold: the guards of the servers that granted it (at least a quorum).
#[must_use = "dropping the guard releases every hold at once"]
#[derive(Debug)]
pub struct RedGuard {
    guards: Vec<LockGuard>,
    quorum: usize,
}

impl RedLock {
    /// A RedLock over `locks`, one per independent server.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::RedLock;
    ///
    /// // One client per independent server (three or five, say).
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no locks.
    pub fn new(locks: Vec<RLock>) -> Result<RedLock> {
        if locks.is_empty() {
            return Err(Error::invalid("a RedLock needs at least one lock"));
        }
        Ok(RedLock { locks })
    }

    /// How many servers must grant the lock: N/2 + 1.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::RedLock;
    ///
    /// assert_eq!(servers.len(), 5);
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(RedLock::new(locks)?.quorum(), 3);
    /// # Ok(()) }
    /// ```
    pub fn quorum(&self) -> usize {
        self.locks.len() / 2 + 1
    }

    /// Tries for up to `wait` to hold a quorum with `lease` on each; `None` when
    /// the wait ran out, with nothing held. Keep the guard bound: `Some(_)`
    /// releases at once.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let wait = Duration::from_secs(1);
    /// if let Some(guard) = red.try_lock_with_lease(wait, Duration::from_secs(10)).await? {
    ///     // ... act only while `guard.valid_for()` leaves time ...
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad wait or lease, a lease that the
    /// clock-drift margin eats whole included (it could never be surely valid).
    /// A server that fails counts as a missing vote, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe: every attempt in flight is settled and every hold taken is
    /// released.
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedGuard>> {
        crate::engine::contract::validate_wait(wait)?;
        crate::config::duration_to_millis("lease", lease)?;
        self.check_lease_leaves_validity(lease)?;
        let deadline = Instant::now() + wait;
        // Each server's answer is awaited for a slice of the wait, and never more
        // than a tenth of the lease: a slow or frozen server must not eat the
        // validity.
        let n = u32::try_from(self.locks.len()).unwrap_or(u32::MAX);
        let slice = (wait / n).max(Duration::from_millis(5)).min(lease / 10);
        loop {
            if let Some(guard) = self.round(slice, lease).await {
                return Ok(Some(guard));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep_until((Instant::now() + jitter(ROUND_PAUSE)).min(deadline)).await;
        }
    }

    /// As [`try_lock_with_lease`](RedLock::try_lock_with_lease), waiting as long
    /// as it takes. Keep the guard bound: `let _ = ...` releases at once.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
    /// // ... act only while `guard.valid_for()` leaves time ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`try_lock_with_lease`](RedLock::try_lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`try_lock_with_lease`](RedLock::try_lock_with_lease).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<RedGuard> {
        loop {
            if let Some(guard) = self.try_lock_with_lease(lease, lease).await? {
                return Ok(guard);
            }
        }
    }

    /// A lease no longer than the clock-drift margin can never be surely valid:
    /// every round would miss, for ever. Refused instead, naming the least lease.
    fn check_lease_leaves_validity(&self, lease: Duration) -> Result<()> {
        let factor = self
            .locks
            .iter()
            .map(|lock| lock.client().config.clock_drift_factor)
            .fold(0.0, f64::max);
        let drift = crate::engine::validity::Drift { factor };
        if drift.trusted(lease).is_zero() {
            return Err(Error::invalid(format!(
                "a RedLock lease of {lease:?} is all clock-drift margin (lease × {factor} + \
                 {:?}): no hold could ever be surely valid; give a lease of well over {:?}",
                crate::engine::validity::DRIFT_FLOOR,
                crate::engine::validity::DRIFT_FLOOR.mul_f64(1.0 / (1.0 - factor.min(0.5)))
            )));
        }
        Ok(())
    }

    /// One round: every server at once, each tried once, its answer awaited for
    /// at most `slice`.
    async fn round(&self, slice: Duration, lease: Duration) -> Option<RedGuard> {
        let mut asks = JoinSet::new();
        for lock in &self.locks {
            let lock = lock.clone();
            asks.spawn(async move {
                match tokio::time::timeout(slice, lock.try_lock_with_lease(Duration::ZERO, lease))
                    .await
                {
                    Ok(Ok(Some(guard))) => Some(guard),
                    // Busy, failing, or too slow: a missing vote.
                    _ => None,
                }
            });
        }
        let mut guards = Vec::with_capacity(self.locks.len());
        while let Some(answer) = asks.join_next().await {
            if let Ok(Some(guard)) = answer {
                guards.push(guard);
            }
        }
        let held = RedGuard {
            guards,
            quorum: self.quorum(),
        };
        match held.valid_for() {
            Some(left) if left >= MIN_VALIDITY => Some(held),
            _ => {
                if let Err(e) = held.unlock().await {
                    crate::trace::warn_event!(
                        "RedLock: releasing a minority hold failed (it ends with its lease): {e}"
                    );
                }
                None
            }
        }
    }
}

impl RedGuard {
    /// How much longer a quorum of the holds is surely valid; `None` once fewer
    /// than a quorum are. Never more than the lease.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
    /// match guard.valid_for() {
    ///     Some(left) if left > Duration::from_secs(2) => { /* the side effect */ }
    ///     _ => { /* too little time left: do not start */ }
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        let mut left: Vec<Duration> = self
            .guards
            .iter()
            .filter_map(LockGuard::valid_for)
            .collect();
        if left.len() < self.quorum {
            return None;
        }
        left.sort_unstable_by(|a, b| b.cmp(a));
        left.get(self.quorum - 1).copied()
    }

    /// Has the hold lost its quorum (or run out of validity)?
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
    /// // ... a long computation ...
    /// if !guard.is_lease_lost() {
    ///     // ... still the holder: publish the result ...
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.valid_for().is_none()
    }

    /// How many servers granted it (at least the quorum).
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
    /// assert!(guard.granted() >= red.quorum());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn granted(&self) -> usize {
        self.guards.len()
    }

    /// Releases the hold on every server that granted it.
    ///
    /// ```no_run
    /// # async fn demo(servers: Vec<redisson_locks::Client>) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::RedLock;
    ///
    /// let locks = servers.iter().map(|c| c.get_lock("job:7")).collect::<Result<Vec<_>, _>>()?;
    /// let red = RedLock::new(locks)?;
    /// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
    /// guard.unlock().await?; // every server's hold, or the first error
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first release that failed; the others are released all the same.
    ///
    /// # Cancel safety
    /// Dropping the call drops the holds not yet released, which releases them
    /// (see [`LockGuard`]'s `Drop`); the release in flight may or may not have
    /// happened, and that hold is renewed no more either way.
    pub async fn unlock(self) -> Result<()> {
        unlock_all(self.guards).await
    }
}
