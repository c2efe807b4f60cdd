//! The multi-lock (Redisson `getMultiLock(locks...)`): all of N locks or none,
//! whatever clients and servers they live on.
//!
//! The locks are taken in one canonical order (by name, then server), whatever
//! order they were given in, so callers whose sets overlap queue on their first
//! common lock rather than each holding one the other needs. A round tries the
//! locks in that order, each for at most what is left of
//! the round's budget. When one cannot be had, the locks taken in this round are
//! released and, after a short random pause (so two callers taking the same locks
//! in opposite orders stop meeting head on), a new round starts from the first:
//! nobody ever waits for one lock while holding another for longer than a round,
//! so opposite orders cannot deadlock. As Redisson: `lock()` runs rounds of
//! `1.5 s × N` until one succeeds; `try_lock_wait(wait)` runs rounds until `wait`
//! is spent.

use std::time::Duration;

use tokio::time::Instant;

use super::guard::{unlock_all, LockGuard};
use super::rlock::RLock;
use super::{jitter, ROUND_PAUSE};
use crate::error::{Error, Result};

/// The budget of one round of `lock()`, per lock (Redisson's `1500 ms × N`).
const ROUND_PER_LOCK: Duration = Duration::from_millis(1500);

/// All of several locks, or none (Redisson's `RedissonMultiLock`). The locks may
/// come from different clients, so from different servers.
///
/// ```no_run
/// # async fn demo(a: redisson_locks::Client, b: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// use redisson_locks::MultiLock;
///
/// let both = MultiLock::new(vec![a.get_lock("account:1")?, b.get_lock("account:2")?])?;
/// let guard = both.lock().await?; // holds both, or waits
/// guard.unlock().await?;          // releases both
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLock {
    locks: Vec<RLock>,
}

/// The holds of a [`MultiLock`]: one guard per lock. Dropping it drops (and so
/// releases) every hold.
#[must_use = "dropping the guard releases every lock at once"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

/// How one round went.
enum Round {
    Held(Vec<LockGuard>),
    /// One lock could not be had in time; what was taken has been dropped.
    Missed,
}

impl MultiLock {
    /// A multi-lock over `locks`, taken in this order. The locks may be of
    /// any kinds and any clients.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let transfer = MultiLock::new(vec![
    ///     client.get_lock("account:1")?,
    ///     client.get_fair_lock("account:2")?,
    /// ])?;
    /// assert!(MultiLock::new(vec![]).unwrap_err().is_invalid_argument());
    /// # Ok(()) }
    /// ```
    ///
    /// The locks are taken in one canonical order, by name and then by server,
    /// whatever order they are given in: callers whose sets overlap then meet
    /// on their first common lock and queue there, instead of each holding a
    /// lock the other needs until its round runs out.
    ///
    /// The same lock given twice (the same client, name and kind) is taken
    /// once. Two handles of one lock whose holds exclude each other (the
    /// reentrant and the fair handle of one name, a read-write lock's write side
    /// beside its read side, overlapping members of one group) could never both
    /// be held by one multi-lock, so they are refused.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let lock = client.get_lock("account:1")?;
    /// let once = MultiLock::new(vec![lock.clone(), lock.clone()])?;
    /// assert_eq!(once.locks().len(), 1);
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let refused = MultiLock::new(vec![rw.read_lock(), rw.write_lock()]);
    /// assert!(refused.unwrap_err().is_invalid_argument());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no locks at all, or for two handles of one
    /// lock that exclude each other.
    pub fn new(locks: Vec<RLock>) -> Result<MultiLock> {
        if locks.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one lock"));
        }
        let mut distinct: Vec<RLock> = Vec::with_capacity(locks.len());
        for lock in locks {
            match distinct.iter().find_map(|taken| taken.overlap(&lock)) {
                Some(true) => {} // the same lock again: taken once
                Some(false) => {
                    return Err(Error::invalid(format!(
                        "a multi-lock names lock '{}' twice in ways that exclude each other \
                         (it would wait for itself for ever)",
                        lock.name()
                    )))
                }
                None => distinct.push(lock),
            }
        }
        // One order for every caller: overlapping sets never meet head on.
        distinct.sort_by(|a, b| a.canonical_key().cmp(&b.canonical_key()));
        Ok(MultiLock { locks: distinct })
    }

    /// The locks, in the order they are taken: by name, then server (see
    /// [`new`](MultiLock::new)), not the order given.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let names: Vec<&str> = both.locks().iter().map(|lock| lock.name()).collect();
    /// assert_eq!(names, ["account:1", "account:2"]);
    /// # Ok(()) }
    /// ```
    pub fn locks(&self) -> &[RLock] {
        &self.locks
    }

    /// Takes every lock, waiting as long as it takes; the watchdog renews each
    /// (Redisson `lock()`). Keep the guard bound: `let _ = both.lock().await?;`
    /// releases every lock at once; use `let _guard` or `let guard`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock().await?; // both held, or still waiting
    /// // ... move money from one account to the other ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first error of a lock (a refused command, Redis down past the retry
    /// budget); the locks already taken are released.
    ///
    /// # Cancel safety
    /// Cancel safe: the holds taken so far are released, and the lock being
    /// waited for leaves nothing (as [`RLock::lock`]).
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.run(None, None)
            .await?
            .ok_or_else(|| Error::unexpected("multi-lock", "gave up without a wait limit"))
    }

    /// As [`lock`](MultiLock::lock), every hold with `lease` and no renewal.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock_with_lease(Duration::from_secs(5)).await?;
    /// // ... at most five seconds of work ...
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](MultiLock::lock); [`Error::InvalidArgument`] for a bad lease.
    ///
    /// # Cancel safety
    /// As [`lock`](MultiLock::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        self.run(None, Some(lease))
            .await?
            .ok_or_else(|| Error::unexpected("multi-lock", "gave up without a wait limit"))
    }

    /// Tries once: every lock free right now, or none taken (Redisson
    /// `tryLock()`). `None` when any of them is busy.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// if let Some(guard) = both.try_lock().await? {
    ///     // ... both held ...
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](MultiLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](MultiLock::lock).
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        match self.round(Duration::ZERO, None).await? {
            Round::Held(guards) => Ok(Some(MultiGuard { guards })),
            Round::Missed => Ok(None),
        }
    }

    /// Tries for up to `wait` (Redisson `tryLock(waitTime, unit)`); `None` when it
    /// ran out, with nothing held.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// match both.try_lock_wait(Duration::from_secs(3)).await? {
    ///     Some(guard) => guard.unlock().await?,
    ///     None => eprintln!("the accounts stayed busy for 3 s"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock`](MultiLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](MultiLock::lock).
    pub async fn try_lock_wait(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.run(Some(wait), None).await
    }

    /// Tries for up to `wait`, every hold with `lease` (Redisson `tryLock(waitTime,
    /// leaseTime, unit)`). The holds are taken one after the other, so the first
    /// ends first: the guard's [`valid_for`](MultiGuard::valid_for) is the least.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let wait = Duration::from_secs(3);
    /// if let Some(guard) = both.try_lock_with_lease(wait, Duration::from_secs(10)).await? {
    ///     // ... at most ten seconds of work ...
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`lock_with_lease`](MultiLock::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](MultiLock::lock).
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.run(Some(wait), Some(lease)).await
    }

    /// Rounds until one succeeds or `wait` (if any) is spent.
    async fn run(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        if let Some(wait) = wait {
            crate::engine::contract::validate_wait(wait)?;
        }
        let deadline = wait.map(|wait| Instant::now() + wait);
        let per_round =
            ROUND_PER_LOCK.saturating_mul(u32::try_from(self.locks.len()).unwrap_or(u32::MAX));
        loop {
            let now = Instant::now();
            let budget = match deadline {
                Some(deadline) => deadline.saturating_duration_since(now),
                None => per_round,
            };
            match self.round(budget, lease).await? {
                Round::Held(guards) => return Ok(Some(MultiGuard { guards })),
                Round::Missed => {}
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            // A short random pause: two callers that met head on (opposite
            // orders) do not start their next rounds together.
            let until = Instant::now() + jitter(ROUND_PAUSE);
            tokio::time::sleep_until(deadline.map_or(until, |d| until.min(d))).await;
        }
    }

    /// One round: each lock in order, each for at most what is left of `budget`
    /// (a zero budget tries each once).
    async fn round(&self, budget: Duration, lease: Option<Duration>) -> Result<Round> {
        let end = Instant::now() + budget;
        let mut guards = Vec::with_capacity(self.locks.len());
        for lock in &self.locks {
            let left = end.saturating_duration_since(Instant::now());
            let got = match (left.is_zero(), lease) {
                (true, None) => lock.try_lock().await,
                (true, Some(lease)) => lock.try_lock_with_lease(Duration::ZERO, lease).await,
                (false, None) => lock.try_lock_wait(left).await,
                (false, Some(lease)) => lock.try_lock_with_lease(left, lease).await,
            };
            let missed = match got {
                Ok(Some(guard)) => {
                    guards.push(guard);
                    continue;
                }
                // Missed: busy, or its server failing for the whole budget (a
                // timed try rides out failures). Ask once, so a server that is
                // down fails the multi-lock rather than every round missing.
                Ok(None) => match lock.is_locked().await {
                    Err(e) => Err(e),
                    Ok(_) => Ok(Round::Missed),
                },
                Err(e) => Err(e),
            };
            // Give back what this round took before anything else, so the next
            // round (ours or a contender's) starts from free locks. A hold whose
            // release fails here ends with its lease; the round's outcome is what
            // the caller needs to know.
            if let Err(e) = unlock_all(guards).await {
                crate::trace::warn_event!(
                    "multi-lock: releasing a partial round failed (those holds end with their leases): {e}"
                );
            }
            return missed;
        }
        Ok(Round::Held(guards))
    }
}

impl MultiGuard {
    /// Releases every hold (Redisson `unlock()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock().await?;
    /// guard.unlock().await?; // both released, or the first error
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The first release that failed ([`Error::NotHeld`] for a hold already
    /// lost); the others are released all the same.
    ///
    /// # Cancel safety
    /// Dropping the call drops the holds not yet released, which releases them
    /// (see [`LockGuard`]'s `Drop`); the release in flight may or may not have
    /// happened, and that hold is renewed no more either way.
    pub async fn unlock(self) -> Result<()> {
        unlock_all(self.guards).await
    }

    /// The guards, one per lock, in the multi-lock's order.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock().await?;
    /// for hold in guard.guards() {
    ///     println!("{} held by owner {}", hold.name(), hold.owner_id());
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// How much longer every hold is surely valid: the least of the holds'
    /// [`LockGuard::valid_for`]; `None` once any is lost.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock().await?;
    /// if guard.valid_for().is_some_and(|left| left > Duration::from_secs(1)) {
    ///     // ... write to both accounts ...
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        self.guards
            .iter()
            .map(LockGuard::valid_for)
            .try_fold(Duration::MAX, |least, left| {
                left.map(|left| least.min(left))
            })
    }

    /// Has any hold been lost?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::MultiLock;
    ///
    /// let both = MultiLock::new(vec![client.get_lock("account:1")?, client.get_lock("account:2")?])?;
    /// let guard = both.lock().await?;
    /// // ... a long computation ...
    /// if guard.is_lease_lost() {
    ///     return Ok(()); // do not write: another owner may hold one of the locks
    /// }
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lease_lost)
    }
}
