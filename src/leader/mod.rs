//! Leader election without ZooKeeper, on the fenced lock's keys.
//!
//! Why the fenced lock: a leader is one holder of a lock whose lease the
//! watchdog renews, and the fencing token it drew when it won is its epoch,
//! strictly greater than every earlier leader's. Because the keys are
//! Redisson's (`name`, `redisson_lock_token:{name}`, the unlock channel), a
//! Java service holding `RFencedLock(name)` *is* the leader to this crate's
//! participants, which wait for it like any other holder, and the epochs of
//! both languages are one sequence. What Redisson's layout lacks, "since
//! when", is a small record of this crate's own (`record.rs`).
//!
//! - `leadership.rs`: a won term, the fenced lock's guard seen as leadership.
//! - `current.rs`: who leads now, for anyone (the inspector, plus the record).
//! - `observe.rs`: changes of leadership, in order, woken by pub/sub, bounded
//!   by a re-read every third of a lease.
//! - `record.rs`: the record key and the script that writes it.

mod current;
mod leadership;
mod observe;
mod record;

use std::sync::Arc;
use std::time::Duration;

pub use current::Leader;
pub use leadership::Leadership;
pub use observe::{LeaderChange, Observer};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::lock::{LockGuard, RFencedLock};

/// A leader election named `name`
/// ([`Client::get_leader_election`](crate::Client::get_leader_election)):
/// participants [`campaign`](LeaderElection::campaign) until they lead, and
/// anyone may ask [`leader`](LeaderElection::leader) or
/// [`observe`](LeaderElection::observe) the changes.
///
/// It lives on the keys of the fenced lock `name`
/// ([`Client::get_fenced_lock`](crate::Client::get_fenced_lock)): the leader
/// holds that lock (renewed by the watchdog) and its epoch is the token it
/// drew. A Java service holding Redisson's `RFencedLock(name)` therefore leads
/// too, and is waited for. No I/O happens until a method is called.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let election = client.get_leader_election("scheduler")?;
/// let leadership = election.campaign().await?; // waits until this one leads
/// println!("leading in epoch {}", leadership.epoch());
/// leadership
///     .run(async { /* lead; stopped the moment leadership is lost */ })
///     .await
///     .ok();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    client: Arc<Engine>,
    lock: RFencedLock,
}

impl LeaderElection {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        LeaderElection {
            lock: RFencedLock::new(client.clone(), name),
            client,
        }
    }

    /// The election's name (its fenced lock's).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let election = client.get_leader_election("scheduler")?;
    /// assert_eq!(election.name(), "scheduler");
    /// // The fenced lock a Java participant holds to lead: the same keys.
    /// // Java: redisson.getFencedLock("scheduler")
    /// let lock = client.get_fenced_lock(election.name())?;
    /// # drop(lock);
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Waits, as long as it takes, until this participant leads; its term
    /// is the returned [`Leadership`]. Each call is a participant of its
    /// own (an owner made for this campaign, whatever the owner mode or
    /// scope), so two campaigns of one client take turns like two processes,
    /// and a campaign never re-enters a term already won.
    ///
    /// The win is the fenced lock's acquisition (queued behind the current
    /// leader, woken by its release, bounded by its lease when it dies), then
    /// the record of the win, written only if the hold still stands.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let leadership = client.get_leader_election("scheduler")?.campaign().await?;
    /// leadership.lost().await; // lead until this completes
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`RLock::lock`](crate::RLock::lock); [`Error::Redis`] when the
    /// record could not be written (the hold is released again);
    /// [`Error::LeaseLost`] when the hold was lost before its win was recorded.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped campaign leaves no hold, waiter or subscription
    /// (a win it had already drawn is released as a dropped guard is).
    pub async fn campaign(&self) -> Result<Leadership> {
        let (guard, epoch) = self.participant().lock_and_get_token().await?;
        self.recorded(guard, epoch).await
    }

    /// The fenced lock acting for an owner made for one campaign, whatever the
    /// client's owner mode or the caller's scope: a campaign never re-enters a
    /// term (which would draw a new epoch for a leader already leading, and
    /// leave its first handle's epoch stale while it still believes it leads).
    fn participant(&self) -> RFencedLock {
        self.lock
            .for_owner(crate::engine::owner::new_acquisition_id())
    }

    /// As [`campaign`](LeaderElection::campaign), waiting at most `wait`;
    /// `None` when another led all that time.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let election = client.get_leader_election("scheduler")?;
    /// match election.try_campaign(Duration::from_secs(1)).await? {
    ///     Some(leadership) => leadership.resign().await?,
    ///     None => println!("someone else leads"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`campaign`](LeaderElection::campaign), and
    /// [`Error::InvalidArgument`] for a wait too long for Redis.
    ///
    /// # Cancel safety
    /// As [`campaign`](LeaderElection::campaign).
    pub async fn try_campaign(&self, wait: Duration) -> Result<Option<Leadership>> {
        match self
            .participant()
            .try_lock_and_get_token(wait, None)
            .await?
        {
            Some((guard, epoch)) => self.recorded(guard, epoch).await.map(Some),
            None => Ok(None),
        }
    }

    /// Records the win of `guard`, drawn as `epoch`, and makes it a term. The
    /// record's script checks the win still stands and may run twice (it
    /// writes the same), so a transient failure is retried as the client's
    /// commands are; a win that is over by the server's state or by this
    /// client's clock is no term. On any failure the guard is dropped here,
    /// which releases the hold.
    async fn recorded(&self, guard: LockGuard, epoch: u64) -> Result<Leadership> {
        let lost = || Error::LeaseLost {
            name: self.name().to_owned(),
        };
        let mut conn = self.client.conn.clone();
        let config = &self.client.config;
        let mut attempt = 0;
        let since_ms = loop {
            match record::write(&mut conn, self.name(), guard.owner_field(), epoch).await {
                Ok(Some(since_ms)) => break since_ms,
                Ok(None) => return Err(lost()),
                Err(e) if e.is_transient() && attempt < config.retry_attempts => {
                    attempt += 1;
                    tokio::time::sleep(config.retry_interval.min(config.timeout)).await;
                }
                Err(e) => return Err(e),
            }
            if guard.is_lease_lost() {
                return Err(lost());
            }
        };
        if guard.is_lease_lost() {
            return Err(lost());
        }
        Ok(Leadership::new(guard, epoch, since_ms))
    }

    /// Who leads now, read by anyone (participant or not, of this crate or
    /// not): the fenced lock's holder, its epoch (the current token) and,
    /// when a participant of this crate won, since when (its record). A Java
    /// `RFencedLock` holder reads as the leader, with no identity and no
    /// `since_ms`. `None` when nobody leads.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// match client.get_leader_election("scheduler")?.leader().await? {
    ///     Some(leader) => println!("{} leads in epoch {}", leader.owner.field, leader.epoch),
    ///     None => println!("nobody leads"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] when the name holds another kind than a fenced
    /// (or plain) lock; as [`Client::inspect`](crate::Client::inspect).
    pub async fn leader(&self) -> Result<Option<Leader>> {
        current::read(&self.client, self.name()).await
    }

    /// The changes of leadership, in order (see [`Observer::next`]): woken by
    /// the lock's releases and this crate's wins at once, and re-read every
    /// `lock_watchdog_timeout / 3`, so a change nothing announces (a leader
    /// that died, a Java win) is seen within a third of a lease.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let mut changes = client.get_leader_election("scheduler")?.observe();
    /// let now = changes.next().await?; // who leads now, at once
    /// # let _ = now;
    /// # Ok(()) }
    /// ```
    pub fn observe(&self) -> Observer {
        Observer::new(self.client.clone(), self.name().to_owned())
    }
}
