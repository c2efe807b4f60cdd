//! `RFairSemaphore`: a semaphore that serves its waiters strictly in arrival
//! order, with leased permits the watchdog renews. Redisson has none; its
//! layout follows Redisson's naming style and the fair lock's queue shape
//! (see `lua/fsem_common.lua`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::settle::{check_permits, settled_acquire, SettleTerms, Took};
use super::waiting::{wait_for, Attempt, Waiting};
use crate::config::duration_to_millis;
use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{BoxFuture, RenewKind, Wait};
use crate::engine::validity::{Drift, Validity};
use crate::engine::watchdog::Renewal;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, HoldMeter, Kind, Labels};
use crate::transport::pubsub::Class;
use crate::transport::scripts::{
    self, FairAsk, FairSemaphoreKeys, PermitsChange, PermitsTaken, Turn,
};

/// The fair semaphore's kind, as its measurements name it.
const FAIR_SEMAPHORE: Kind = kind!("fair_semaphore");

/// The longest a waiter's place in line outlives its last attempt: a waiter
/// that vanished (a killed process, a lost connection) holds back the line
/// for this long at most. A live waiter tries again (and so keeps its place)
/// every third of it, whatever else wakes it.
const PLACE_WINDOW: Duration = Duration::from_secs(10);

/// A distributed semaphore that serves its waiters strictly first come, first
/// served: `java.util.concurrent.Semaphore(permits, true)` across processes.
/// Redisson has no such object.
///
/// - **Order.** Permits go to the first waiter in line only. A first in line
///   that asks for more permits than are available holds back the smaller
///   requests behind it, as Java's fair semaphore does; so no request
///   starves behind a stream of smaller ones.
/// - **Barging.** [`try_acquire`](RFairSemaphore::try_acquire) with a zero
///   wait takes permits that are available now even while others wait, as
///   Java's `tryAcquire()` does on a fair semaphore; with a wait, it queues.
/// - **Leases.** Every acquisition's permits are leased for
///   [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) and
///   renewed by the client's watchdog while the [`FairPermits`] live; a
///   holder that dies gives them back when its lease ends. Leases and places
///   in line are timed by the server's clock (`TIME`), so clients whose
///   clocks differ agree on them.
/// - **Vanished waiters.** A waiter keeps its place by trying again every
///   few seconds; one that vanished (a killed process) is removed when it
///   comes first in line, 10 s after its last try at most, and holds back
///   the line that long.
/// - **Wake-ups.** Each waiter sleeps on a channel of its own, told only when
///   it is first in line and what it asks for is available: a release wakes
///   one waiter, never a herd.
///
/// Layout: a hash at the name (`permits`, and each hold's and waiter's
/// count), the holds' leases `redisson_fair_semaphore_leases:{name}`, the line
/// `redisson_fair_semaphore_queue:{name}` with its deadlines
/// `redisson_fair_semaphore_timeout:{name}`, and the waiters' channels
/// `redisson_fair_semaphore__channel:{name}:<waiter>`. A Redisson
/// `RSemaphore` of the same name keeps a string there: each side refuses the
/// other's key with `WRONGTYPE` (see PORTING.md). A lock of the same name is
/// a hash too, and is not told apart: give each object a name of its own.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let pool = client.get_fair_semaphore("connections")?;
/// pool.try_set_permits(4).await?;
/// let permits = pool.acquire(1).await?;
/// // ... use the connection; the lease follows ...
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RFairSemaphore {
    client: Arc<Engine>,
    keys: FairSemaphoreKeys,
}

impl RFairSemaphore {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RFairSemaphore {
            keys: FairSemaphoreKeys::new(name.into()),
            client,
        }
    }

    /// The semaphore's name, its key.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// assert_eq!(client.get_fair_semaphore("connections")?.name(), "connections");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.keys.semaphore
    }

    /// Takes `permits` in turn, waiting as long as it takes.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let pool = client.get_fair_semaphore("connections")?;
    /// let two = pool.acquire(2).await?;
    /// assert_eq!(two.permits(), 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for zero permits or more than `i32::MAX`;
    /// [`Error::Redis`] when Redis fails more than `retry_attempts` times in a
    /// row, or a reply does not come (permits the attempt may have taken are
    /// given back from the background); `WRONGTYPE` when the name holds
    /// something else (a Redisson `RSemaphore`).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no permit taken, no place in
    /// line, no renewal and no subscription.
    pub async fn acquire(&self, permits: u32) -> Result<FairPermits> {
        self.take(permits, Wait::Forever)
            .await?
            .ok_or_else(|| Error::unexpected("acquire", "gave up without a wait limit"))
    }

    /// Takes `permits`, waiting in line at most `wait`; `None` when they did
    /// not come in time. A zero wait barges: it takes permits available now
    /// even while others wait (Java's `tryAcquire()` on a fair semaphore),
    /// and never queues.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let pool = client.get_fair_semaphore("connections")?;
    /// if let Some(one) = pool.try_acquire(1, Duration::from_secs(5)).await? {
    ///     one.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](RFairSemaphore::acquire), and
    /// [`Error::InvalidArgument`] for a wait over [`MAX_DURATION`](crate::MAX_DURATION).
    ///
    /// # Cancel safety
    /// As [`acquire`](RFairSemaphore::acquire).
    pub async fn try_acquire(&self, permits: u32, wait: Duration) -> Result<Option<FairPermits>> {
        self.take(permits, Wait::For(wait)).await
    }

    /// Sets the number of permits, only if it was never set; `true` when this
    /// call set it. Calls the first waiter when it can now be served.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// client.get_fair_semaphore("connections")?.try_set_permits(4).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits;
    /// [`Error::Redis`] when the command fails.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        Ok(self.permits(PermitsChange::TrySet(permits)).await? == 1)
    }

    /// Adds `change` permits, or removes them when negative (the count may go
    /// below zero: holds given back later bring it up again); the permits
    /// available after. Calls the first waiter when it can now be served.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let available = client.get_fair_semaphore("connections")?.add_permits(2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn add_permits(&self, change: i32) -> Result<i64> {
        self.permits(PermitsChange::Add(change)).await
    }

    /// The permits available now, once every hold whose lease ended is back.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// println!("{} free", client.get_fair_semaphore("connections")?.available_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn available_permits(&self) -> Result<i64> {
        self.permits(PermitsChange::Available).await
    }

    /// Takes every permit available now, for good (no hold, no lease: add
    /// them back with [`add_permits`](RFairSemaphore::add_permits)); how many.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let taken = client.get_fair_semaphore("connections")?.drain_permits().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn drain_permits(&self) -> Result<i64> {
        self.permits(PermitsChange::Drain).await
    }

    async fn permits(&self, change: PermitsChange) -> Result<i64> {
        let mut conn = self.client.conn.clone();
        scripts::fsem_permits(&mut conn, &self.keys, change).await
    }

    /// Takes `permits` as `wait` says: one waiter, one place in line, left on
    /// every way out but success.
    async fn take(&self, permits: u32, wait: Wait) -> Result<Option<FairPermits>> {
        if permits == 0 {
            return Err(Error::invalid(
                "a fair semaphore's acquire takes at least one permit",
            ));
        }
        check_permits(permits)?;
        wait.start()?;
        let lease = self.client.config.lock_watchdog_timeout;
        let lease_ms = duration_to_millis("watchdog timeout", lease)?;
        let turn = match wait.is_one_off() {
            true => Turn::Barge,
            false => Turn::InLine,
        };
        let waiter = uuid::Uuid::new_v4().simple().to_string();
        let channel = self.keys.waiter_channel(&waiter);
        let mut place = match turn {
            Turn::Barge => OnDrop::disarmed(),
            Turn::InLine => {
                let (keys, waiter) = (self.keys.clone(), waiter.clone());
                let terms = SettleTerms::of(&self.client.config);
                OnDrop::armed_lazily(&self.client.conn, move |conn| {
                    let conn = conn.clone();
                    async move {
                        // Retried until the server answers: a place left
                        // behind would hold back the line when it came first.
                        let what = format!(
                            "fair semaphore {:?} (leaving the line, waiter {waiter})",
                            keys.semaphore
                        );
                        super::settle::settle_retrying(terms, &what, || {
                            let (mut conn, keys, waiter) = (conn.clone(), &keys, &waiter);
                            async move { scripts::fsem_leave(&mut conn, keys, waiter).await.map(drop) }
                        })
                        .await;
                    }
                })
            }
        };
        let waiting = Waiting {
            client: &self.client,
            name: &self.keys.semaphore,
            channel: &channel,
            class: Class::All,
            local_line: false,
            kind: FAIR_SEMAPHORE,
        };
        let attempt = || self.attempt(&waiter, permits, (turn, lease, lease_ms));
        let taken = wait_for(waiting, wait, attempt).await;
        match &taken {
            // The script took it out of the line as it served it.
            Ok(Some(_)) => place.disarm(),
            // Refused before it ran (the keys are not a fair semaphore's):
            // no place was taken.
            Err(e) if e.is_wrong_type() || e.is_invalid_argument() => place.disarm(),
            _ => place.run_now().await,
        }
        taken
    }

    /// One attempt, under a hold id of its own: the [`FairPermits`], renewed
    /// by the watchdog, the moment it succeeds. If its future is dropped after
    /// the script ran, or its outcome is unknown, the hold is given back by
    /// its id (a release of an id that took nothing changes nothing).
    async fn attempt(
        &self,
        waiter: &str,
        permits: u32,
        (turn, lease, lease_ms): (Turn, Duration, u64),
    ) -> Result<Attempt<FairPermits>> {
        let hold = uuid::Uuid::new_v4().simple().to_string();
        let sent = Instant::now();
        let ask = FairAsk {
            hold: &hold,
            waiter,
            permits,
            lease_ms,
            turn,
            window_ms: PLACE_WINDOW.as_millis() as u64,
        };
        let call: BoxFuture<Result<Option<PermitsTaken>>> = {
            let (mut conn, keys) = (self.client.conn.clone(), self.keys.clone());
            let (hold, waiter) = (hold.clone(), waiter.to_owned());
            Box::pin(async move {
                let ask = FairAsk {
                    hold: &hold,
                    waiter: &waiter,
                    ..ask
                };
                Ok(Some(scripts::fsem_acquire(&mut conn, &keys, ask).await?))
            })
        };
        let labels = self.labels();
        let outcome =
            settled_acquire(&self.client.conn, call, self.give_back(&hold), labels).await?;
        match outcome {
            Some(PermitsTaken::Taken) => Ok(Attempt::Done(
                self.permits_taken(hold, permits, sent, lease),
            )),
            // Back within a third of the place's window, to keep it.
            Some(PermitsTaken::Busy(hint)) => Ok(Attempt::NotYet(Some(
                hint.map_or(PLACE_WINDOW / 3, |h| h.min(PLACE_WINDOW / 3)),
            ))),
            None => Ok(Attempt::NotYet(Some(PLACE_WINDOW / 3))),
        }
    }

    /// The hold `hold` of `permits`, taken by an attempt sent at `sent`, its
    /// lease renewed from now on.
    fn permits_taken(
        &self,
        hold: String,
        permits: u32,
        sent: Instant,
        lease: Duration,
    ) -> FairPermits {
        let config = &self.client.config;
        let drift = Drift {
            factor: config.clock_drift_factor,
        };
        let term_end = config.max_hold.map(|limit| sent + limit);
        let validity = Validity::new(sent, lease, drift)
            .with_term(term_end)
            .measured(HoldMeter::start(&self.labels()));
        let validity = Arc::new(validity);
        let renewal = self.client.watchdog.activate(
            &self.keys.semaphore,
            &hold,
            RenewKind::FairPermits,
            validity.clone(),
        );
        FairPermits {
            semaphore: self.clone(),
            hold,
            permits,
            renewal: Some(renewal),
            validity,
        }
    }

    fn labels(&self) -> Labels {
        Labels::new(FAIR_SEMAPHORE, &self.keys.semaphore, &self.client.config)
    }

    /// Gives back what an attempt under `hold` may have taken (from a task:
    /// the caller is gone), retrying until the server answers.
    fn give_back(
        &self,
        hold: &str,
    ) -> impl FnOnce(Took<PermitsTaken>) -> BoxFuture<()> + Send + 'static {
        let (conn, keys, hold) = (self.client.conn.clone(), self.keys.clone(), hold.to_owned());
        let terms = SettleTerms::of(&self.client.config);
        move |took| {
            Box::pin(async move {
                if let Took::Surely(PermitsTaken::Busy(_)) = took {
                    return;
                }
                let what = format!("fair semaphore {:?} (hold {hold})", keys.semaphore);
                super::settle::settle_retrying(terms, &what, || {
                    let (mut conn, keys, hold) = (conn.clone(), &keys, &hold);
                    async move { scripts::fsem_release(&mut conn, keys, hold).await.map(drop) }
                })
                .await;
            })
        }
    }

    /// Gives back the permits held under `hold`; `false` when they were no
    /// longer out.
    async fn release_hold(&self, hold: &str) -> Result<bool> {
        let send = {
            let (conn, keys, hold) = (self.client.conn.clone(), self.keys.clone(), hold.to_owned());
            move |first_may_have_run: bool| {
                let (mut conn, keys, hold) = (conn.clone(), keys.clone(), hold.clone());
                async move {
                    let released = scripts::fsem_release(&mut conn, &keys, &hold).await?;
                    // Sent again after a first send that may have run: "not
                    // out" may be that send's doing.
                    Ok(released || first_may_have_run)
                }
            }
        };
        let call: BoxFuture<Result<bool>> = Box::pin(send(false));
        super::settle::settled_release(
            &self.client.conn,
            call,
            send,
            SettleTerms::of(&self.client.config),
            self.labels(),
        )
        .await
    }
}

/// Permits of an [`RFairSemaphore`], held while this value lives; the
/// client's watchdog renews their lease.
///
/// # Validity
/// As a [`LockGuard`](crate::LockGuard)'s: the permits are surely held until
/// the instant their last confirmed acquire or renewal was sent, plus the
/// lease, minus the clock-drift margin. The server times the lease from when
/// it ran the script, after that send, by its own clock.
///
/// # Drop
/// Dropping it stops the renewal and sends the release from the client's own
/// background thread; call [`release`](FairPermits::release) to see errors.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let permits = client.get_fair_semaphore("connections")?.acquire(1).await?;
/// assert!(permits.valid_for().is_some());
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the permits releases them at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct FairPermits {
    semaphore: RFairSemaphore,
    hold: String,
    permits: u32,
    /// The watchdog's renewal; taken when the hold ends.
    renewal: Option<Renewal>,
    validity: Arc<Validity>,
}

impl FairPermits {
    /// How many permits this holds.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// How much longer the permits are surely held; `None` once lost.
    pub fn valid_for(&self) -> Option<Duration> {
        self.validity.valid_for()
    }

    /// Whether the permits are lost: a renewal found them gone, or their
    /// validity ran out without a confirmed renewal.
    pub fn is_lease_lost(&self) -> bool {
        self.validity.is_lost()
    }

    /// Completes when the permits are lost (see
    /// [`is_lease_lost`](FairPermits::is_lease_lost)). Lost is for good.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn lease_lost(&self) {
        self.validity.wait_lost().await
    }

    /// Gives the permits back, reporting errors (dropping them does the same,
    /// silently), and calls the first waiter when it can now be served.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the permits were no longer held (their lease
    /// ended); [`Error::Redis`] when the command fails.
    ///
    /// # Cancel safety
    /// The renewal stops at the first poll; dropped while the release is in
    /// flight, the release is finished (and sent again if it failed in
    /// transit) from the client's thread.
    pub async fn release(mut self) -> Result<()> {
        let releasing = self.end();
        releasing.await
    }

    /// The one way a hold ends (release or drop): the renewal stops before
    /// the release is sent, so no renewal outlives it.
    fn end(&mut self) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        drop(self.renewal.take());
        let (semaphore, hold) = (self.semaphore.clone(), self.hold.clone());
        async move {
            if semaphore.release_hold(&hold).await? {
                Ok(())
            } else {
                Err(Error::NotHeld {
                    name: semaphore.name().to_owned(),
                    owner: format!("hold {hold}"),
                })
            }
        }
    }
}

impl Drop for FairPermits {
    fn drop(&mut self) {
        if self.renewal.is_none() {
            return; // released already
        }
        let releasing = self.end();
        let name = self.semaphore.keys.semaphore.clone();
        self.semaphore.client.conn.spawn_cleanup(async move {
            if let Err(e) = releasing.await {
                if !e.is_not_held() {
                    crate::trace::warn_event!(
                        "fair semaphore {name:?}: releasing dropped permits failed (they end with their lease): {e}"
                    );
                }
            }
        });
    }
}
