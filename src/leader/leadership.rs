//! A won election: the fenced lock's guard, seen as a term of leadership.
//! Everything a leader may ask (is it still surely leading, for how long,
//! stop work the moment it is not) is the hold's belief (`validity.rs`), so
//! leadership ends exactly when the hold is no longer surely valid.

use std::time::Duration;

use crate::error::Result;
use crate::lock::LockGuard;

/// This participant's term as leader, won by
/// [`LeaderElection::campaign`](crate::LeaderElection::campaign).
///
/// It is a hold of the election's fenced lock, renewed by the watchdog, with
/// the fencing token it drew as its [`epoch`](Leadership::epoch). Leadership
/// is *surely valid* while the hold is (see [`LockGuard`], "Validity"):
/// [`lost`](Leadership::lost) completes and [`is_lost`](Leadership::is_lost)
/// turns true the moment that ends on this machine's clock (a process frozen
/// past its lease learns it as soon as it runs again), or a renewal found the
/// hold gone. Send the epoch with every write to a store that keeps the
/// highest epoch seen and refuses lower ones: a leader paused past its term
/// is then refused, whatever it believes.
///
/// # Campaigning again while leading
/// Every [`campaign`](crate::LeaderElection::campaign) is a participant of its
/// own, so one made while this term lasts (inside its
/// [`run`](Leadership::run) too) waits for this term to end: a leader that
/// awaits its own next campaign inside its term waits for ever.
///
/// # Drop
/// Dropping it resigns, as a dropped [`LockGuard`] releases: renewal stops at
/// once and the release is sent from the client's own thread. Call
/// [`resign`](Leadership::resign) to see the release's errors.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let election = client.get_leader_election("scheduler")?;
/// let leadership = election.campaign().await?;
/// let epoch = leadership.epoch(); // send with every write
/// # let _ = epoch;
/// match leadership.run(async { /* lead: schedule jobs */ }).await {
///     Ok(()) => leadership.resign().await?,
///     Err(e) if e.is_lease_lost() => eprintln!("no longer the leader; work stopped"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping the leadership resigns at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct Leadership {
    guard: LockGuard,
    epoch: u64,
    since_ms: u64,
}

impl Leadership {
    pub(super) fn new(guard: LockGuard, epoch: u64, since_ms: u64) -> Self {
        Leadership {
            guard,
            epoch,
            since_ms,
        }
    }

    /// The election's name.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// assert_eq!(leadership.name(), "scheduler");
    /// // For a process that leads several elections: say which term this is.
    /// println!("leading {} in epoch {}", leadership.name(), leadership.epoch());
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// The fencing token drawn when this term was won: greater than every
    /// earlier leader's epoch (and every token of the name's fenced lock,
    /// Java's `RFencedLock` included).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// println!("leading in epoch {}", leadership.epoch());
    /// # Ok(()) }
    /// ```
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// When the term was won, in epoch milliseconds on the server's clock (as
    /// [`Leader::since_ms`](crate::Leader::since_ms) reports it to everyone).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let election = client.get_leader_election("scheduler")?;
    /// let leadership = election.campaign().await?;
    /// println!("leading since {} ms after the epoch", leadership.since_ms());
    /// // What anyone reading the election sees of this term.
    /// let leader = election.leader().await?.expect("this participant leads");
    /// assert_eq!(leader.since_ms, Some(leadership.since_ms()));
    /// # Ok(()) }
    /// ```
    pub fn since_ms(&self) -> u64 {
        self.since_ms
    }

    /// Completes the moment leadership is no longer surely valid (the hold's
    /// [`lease_lost`](LockGuard::lease_lost)).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// leadership.lost().await;
    /// eprintln!("lost leadership of epoch {}", leadership.epoch());
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.guard.lease_lost().await;
    }

    /// Is leadership lost (see [`lost`](Leadership::lost))? Once true, it
    /// stays true.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// for job in 0..100 {
    ///     if leadership.is_lost() {
    ///         break; // another participant may lead now: schedule nothing more
    ///     }
    ///     // ... schedule `job` ...
    /// #   let _ = job;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.guard.is_lease_lost()
    }

    /// How much longer leadership is surely valid on this machine's clock;
    /// `None` once lost. Check it before a side effect only a leader may cause.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// match leadership.valid_for() {
    ///     // Time enough for the side effect to finish within the term.
    ///     Some(left) if left > Duration::from_secs(2) => { /* start the nightly job */ }
    ///     _ => { /* too close to the end, or lost: leave it to the next leader */ }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn valid_for(&self) -> Option<Duration> {
        self.guard.valid_for()
    }

    /// Runs `work` and drops it the moment leadership is lost, as
    /// [`LockGuard::run`] does.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// let epoch = leadership.epoch();
    /// let led = leadership
    ///     .run(async move {
    ///         // Lead for an hour, sending `epoch` with every write.
    ///         tokio::time::sleep(Duration::from_secs(3600)).await;
    ///         epoch
    ///     })
    ///     .await;
    /// match led {
    ///     Ok(_) => leadership.resign().await?, // a planned hand-over
    ///     Err(e) if e.is_lease_lost() => eprintln!("lost leadership: work stopped"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::LeaseLost`](crate::Error::LeaseLost) when leadership was lost
    /// first.
    ///
    /// # Cancel safety
    /// Dropping the call drops `work` where it stands.
    pub async fn run<F: std::future::Future>(&self, work: F) -> Result<F::Output> {
        self.guard.run(work).await
    }

    /// Resigns: releases the hold, so another participant may win (its waiters
    /// are woken by the release's message).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// // ... lead; then, at shutdown, hand over at once rather than leave the
    /// // others to wait out the lease ...
    /// match leadership.resign().await {
    ///     Ok(()) => {}
    ///     Err(e) if e.is_not_held() => eprintln!("had already lost leadership: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`LockGuard::unlock`]: [`Error::NotHeld`](crate::Error::NotHeld)
    /// when leadership had already been lost on the server.
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`]: renewal stops either way, so the term ends
    /// with its lease at the latest.
    pub async fn resign(self) -> Result<()> {
        self.guard.unlock().await
    }
}
