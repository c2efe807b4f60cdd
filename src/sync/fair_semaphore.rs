//! `RFairSemaphore`: a semaphore that serves its waiters strictly in arrival
//! order, with leased permits the watchdog renews. Redisson has none; its
//! layout follows Redisson's naming style and the fair lock's queue shape
//! (see `lua/fsem_common.lua`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::settle::{check_permits, settled_acquire, SettleTerms, Took};
use crate::config::duration_to_millis;
use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{BoxFuture, RenewKind, Wait};
use crate::engine::fair_line::SeatGuard;
use crate::engine::validity::{Drift, Validity};
use crate::engine::wait::within;
use crate::engine::watchdog::Renewal;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, HoldMeter, Kind, Labels};
use crate::transport::conn::Conn;
use crate::transport::pubsub::{Class, Subscription};
use crate::transport::scripts::{self, FairAsk, FairSemaphoreKeys, FairTaken, PermitsChange, Turn};

/// The fair semaphore's kind, as its measurements name it.
const FAIR_SEMAPHORE: Kind = kind!("fair_semaphore");

/// The longest a client's places in line outlive its last attempt: waiters
/// that vanished with their client (a killed process, a lost connection) hold
/// back the line for this long at most.
const PLACE_WINDOW: Duration = Duration::from_secs(10);

/// How often the head of a client's line keeps the client's places when no
/// attempt of its did (a keep: its deadline moved ahead, nothing taken, nobody
/// called): three times a window.
const KEEP_EVERY: Duration = Duration::from_millis(PLACE_WINDOW.as_millis() as u64 / 3);

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
    /// Its name; its keys are named when a call needs them (a handle, and
    /// each of thousands of waiters, carries the name alone).
    name: Arc<str>,
}

impl RFairSemaphore {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RFairSemaphore {
            name: name.into(),
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
        &self.name
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
        scripts::fsem_permits(&mut conn, &self.keys(), change).await
    }

    /// Takes `permits` as `wait` says: one waiter, one place in line, left on
    /// every way out but success (with any grant made to it meanwhile).
    // Not an `async fn`, which would keep each argument twice for the whole
    // wait; each layer below moves in what it keeps.
    #[allow(clippy::manual_async_fn)]
    fn take(
        &self,
        permits: u32,
        wait: Wait,
    ) -> impl std::future::Future<Output = Result<Option<FairPermits>>> + Send + '_ {
        async move {
            if permits == 0 {
                return Err(Error::invalid(
                    "a fair semaphore's acquire takes at least one permit",
                ));
            }
            check_permits(permits)?;
            let (wait, deadline) = wait.start()?;
            let lease = self.client.config.lock_watchdog_timeout;
            let terms = (lease, duration_to_millis("watchdog timeout", lease)?);
            let waiter: Arc<str> =
                format!("{}:{}", self.client.id, uuid::Uuid::new_v4().simple()).into();
            let labels = self.labels();
            if wait.is_one_off() {
                return crate::metrics::metered(&labels, true, || {
                    Box::pin(self.barge(waiter, permits, terms))
                })
                .await;
            }
            crate::metrics::metered(&labels, false, || {
                self.in_line(waiter, permits, terms, deadline)
            })
            .await
        }
    }

    /// Waits in line as waiter `waiter` (see [`wait_in_line`](Self::wait_in_line)),
    /// leaving the line on every way out but success.
    #[allow(clippy::manual_async_fn)]
    fn in_line(
        &self,
        waiter: Arc<str>,
        permits: u32,
        terms: (Duration, u64),
        deadline: Option<Instant>,
    ) -> impl std::future::Future<Output = Result<Option<FairPermits>>> + Send + '_ {
        async move {
            let mut place = self.place_left_on_drop(&waiter);
            let given_up = match self.wait_in_line(&waiter, permits, terms, deadline).await {
                // Served: out of the line already.
                Ok(Some(permits)) => {
                    place.disarm();
                    return Ok(Some(permits));
                }
                // Refused before it ran (the keys are not a fair semaphore's):
                // no place was taken.
                Err(e) if e.is_wrong_type() || e.is_invalid_argument() => {
                    place.disarm();
                    return Err(e);
                }
                // Kept small across the leave below: a waiting future's
                // size is its largest state's.
                Ok(None) => None,
                Err(e) => Some(e),
            };
            place.run_now().await;
            given_up.map_or(Ok(None), Err)
        }
    }

    /// Leaves the line as waiter `waiter` when dropped armed (giving back any
    /// grant made to it), retried until the server answers: a place left
    /// behind would hold back the line when it came first. What it sends is
    /// made only if it runs.
    fn place_left_on_drop(&self, waiter: &Arc<str>) -> OnDrop {
        let (name, waiter) = (self.name.clone(), waiter.clone());
        let terms = SettleTerms::of(&self.client.config);
        OnDrop::armed_lazily(&self.client.conn, move |conn| {
            leave(conn.clone(), FairSemaphoreKeys::new(name), waiter, terms)
        })
    }

    /// Waiter `waiter` leaving the line (and giving back any grant), retried
    /// until the server answers.
    fn leave(&self, waiter: &Arc<str>) -> impl std::future::Future<Output = ()> + Send + 'static {
        let terms = SettleTerms::of(&self.client.config);
        leave(self.client.conn.clone(), self.keys(), waiter.clone(), terms)
    }

    /// Its keys, named.
    fn keys(&self) -> FairSemaphoreKeys {
        FairSemaphoreKeys::new(self.name.clone())
    }

    /// A try with no wait: one attempt that barges, never queues.
    async fn barge(
        &self,
        waiter: Arc<str>,
        permits: u32,
        (lease, lease_ms): (Duration, u64),
    ) -> Result<Option<FairPermits>> {
        let sent = Instant::now();
        match self
            .attempt(&waiter, permits, Turn::Barge, lease_ms)
            .await?
        {
            FairTaken::Taken => Ok(Some(self.permits_taken(&waiter, permits, sent, lease))),
            FairTaken::Busy { .. } => Ok(None),
        }
    }

    /// Waits in line as waiter `waiter` until served, granted, out of time
    /// (`None`) or failed. Its first attempt joins Redis's line; then it
    /// sleeps, on its client's channel for `name` (one subscription per
    /// client, however many wait: a message names the waiter it calls), and
    /// tries again only when a message names it, when it is told to (its
    /// place may be lost, see `fair_line.rs`), or, as the head of its
    /// client's line, when a re-check is due. A grant by a release of its own
    /// client needs no command at all.
    // Not an `async fn`, which would keep each argument twice (as the
    // argument and as the body's local) for the whole wait.
    #[allow(clippy::manual_async_fn)]
    fn wait_in_line<'a>(
        &'a self,
        waiter: &'a Arc<str>,
        permits: u32,
        (lease, lease_ms): (Duration, u64),
        deadline: Option<Instant>,
    ) -> impl std::future::Future<Output = Result<Option<FairPermits>>> + Send + 'a {
        async move {
            let client = &self.client;
            let seat = client.fair_lines.seat(&self.name, waiter.clone());
            let channel = || self.keys().client_channel(&client.id);
            // Listening before the first attempt when another waiter of this
            // client listens already (no SUBSCRIBE: the channel is shared), so
            // that a call right after its join finds it. Alone, it tries
            // first: an acquire that is served at once sends one command.
            let mut subscription = client.pubsub.mark(&channel()).map(|_| {
                client
                    .pubsub
                    .subscribe(&channel(), waiter, Class::Addressed)
            });
            let recheck = client.config.recheck_interval;
            let mut schedule = Schedule {
                next: Some(Turn::InLine),
                ..Schedule::default()
            };
            loop {
                if std::mem::take(&mut schedule.listen) && subscription.is_none() {
                    let own = client
                        .pubsub
                        .subscribe(&channel(), waiter, Class::Addressed);
                    subscription = Some(own);
                }
                let mut woken = std::pin::pin!(subscription.as_ref().map(Subscription::notified));
                if let Some(woken) = woken.as_mut().as_pin_mut() {
                    woken.enable();
                }
                let mut told = std::pin::pin!(seat.told());
                told.as_mut().enable();
                if let Some(sent) = seat.take_grant() {
                    return Ok(Some(self.permits_taken(waiter, permits, sent, lease)));
                }
                if seat.take_try_again() {
                    schedule.next = Some(Turn::InLine);
                }
                if let Some(turn) = schedule.next.take() {
                    // Boxed: a parked waiter carries no attempt's state.
                    let sending =
                        self.send_in_line(waiter, permits, (turn, lease_ms), &subscription);
                    let Some(tried) = Box::pin(within(deadline, sending)).await else {
                        // Out of time with the attempt in flight: whatever it
                        // or a grant took is given back by the leave (a grant
                        // taken here could be given back under the holder by
                        // the dropped attempt's own settle).
                        return Ok(None);
                    };
                    let listening = subscription.as_ref();
                    match self.after_attempt(tried, (turn, &seat, listening), &mut schedule)? {
                        AfterAttempt::Taken(sent) => {
                            return Ok(Some(self.permits_taken(waiter, permits, sent, lease)));
                        }
                        AfterAttempt::Again => continue,
                        AfterAttempt::Sleep => {}
                    }
                }
                let until = schedule.until(&seat, recheck, deadline);
                let woke = sleep_until_woken(woken.as_mut(), told.as_mut(), until).await;
                if !schedule.woke(woke, &seat, recheck, deadline) {
                    break;
                }
            }
            // Out of time: a grant that came meanwhile is taken all the same.
            Ok(seat
                .take_grant()
                .map(|sent| self.permits_taken(waiter, permits, sent, lease)))
        }
    }

    /// One attempt (or keep) in line as waiter `waiter`, once its
    /// subscription (if any) is confirmed: when it was sent, on which
    /// connection, and what it came to.
    async fn send_in_line(
        &self,
        waiter: &Arc<str>,
        permits: u32,
        (turn, lease_ms): (Turn, u64),
        subscription: &Option<Subscription>,
    ) -> Result<(Instant, u64, FairTaken)> {
        if let Some(subscription) = subscription {
            subscription.ready().await?;
        }
        let sent = Instant::now();
        if turn == Turn::InLine {
            self.client.fair_lines.attempted(&self.name, sent);
        }
        let epoch = self.client.pubsub.connection_epoch();
        let taken = self.attempt(waiter, permits, turn, lease_ms).await?;
        Ok((sent, epoch, taken))
    }

    /// What a waiter in line does after an attempt of `turn` that `tried`
    /// (sent when, on which connection, to what end), as `seat`, listening
    /// on `subscription`; its `schedule` is set for the next step.
    fn after_attempt(
        &self,
        tried: Result<(Instant, u64, FairTaken)>,
        (turn, seat, subscription): (Turn, &SeatGuard, Option<&Subscription>),
        schedule: &mut Schedule,
    ) -> Result<AfterAttempt> {
        let (client, name) = (&self.client, &self.name);
        match tried {
            Ok((sent, _, FairTaken::Taken)) => Ok(AfterAttempt::Taken(sent)),
            // A keep that found no place: the client's places were lost (the
            // keys went, a failover, its deadline passed), so every waiter of
            // it tries, and joins again.
            Ok((_, _, FairTaken::Busy { epoch: None, .. })) if turn == Turn::Keep => {
                client.fair_lines.tell_all_to_try(name);
                Ok(AfterAttempt::Again)
            }
            Ok((
                sent,
                epoch,
                FairTaken::Busy {
                    hint,
                    epoch: places,
                },
            )) => {
                schedule.failures = 0;
                // It moved the client's deadline ahead (a taking attempt does
                // not: its waiter leaves the line).
                client.fair_lines.kept(name, sent);
                client.fair_lines.busy(name, seat, places.as_deref());
                if turn == Turn::InLine {
                    schedule.changes_at = hint.map(|hint| sent + hint);
                }
                // Listening since before this attempt went out, on the same
                // connection: a call after it reaches this waiter. Else it
                // listens, and tries once confirmed.
                let listened = subscription.is_some_and(|subscription| {
                    subscription.confirmed_before(sent) && client.pubsub.connection_epoch() == epoch
                });
                if listened {
                    return Ok(AfterAttempt::Sleep);
                }
                (schedule.listen, schedule.next) = (true, Some(Turn::InLine));
                Ok(AfterAttempt::Again)
            }
            Err(e) if e.is_transient() && schedule.failures < client.config.retry_attempts => {
                // Tried again after a pause drawn with full jitter, so that
                // waiters that failed together retry apart.
                schedule.failures += 1;
                let pause = crate::engine::retry::jitter(client.config.retry_interval);
                schedule.retry_at = Some(Instant::now() + pause);
                Ok(AfterAttempt::Sleep)
            }
            Err(e) => Err(e),
        }
    }

    /// One attempt as waiter `waiter`, whose id is also the hold's: the
    /// reply, settled if the caller is gone. An outcome that stays unknown
    /// is settled by the waiter itself: its next attempt finds what it took
    /// (the hold has its id), its leave gives it back; a barge's is given
    /// back from the client's thread.
    async fn attempt(
        &self,
        waiter: &Arc<str>,
        permits: u32,
        turn: Turn,
        lease_ms: u64,
    ) -> Result<FairTaken> {
        let call: BoxFuture<Result<Option<FairTaken>>> = {
            let (mut conn, keys, waiter) = (self.client.conn.clone(), self.keys(), waiter.clone());
            Box::pin(async move {
                let ask = FairAsk {
                    waiter: &waiter,
                    permits,
                    lease_ms,
                    turn,
                    window_ms: PLACE_WINDOW.as_millis() as u64,
                };
                Ok(Some(scripts::fsem_acquire(&mut conn, &keys, ask).await?))
            })
        };
        // Whether the caller is gone when the undo is made: it is made at
        // once for an error the caller hears (then the caller settles the
        // attempt itself: its next attempt finds what it took, its leave gives
        // it back), and later, from the client's thread, for an attempt whose
        // caller was dropped (then the undo leaves the line whatever the
        // attempt did: one that ran after the caller's own leave would stand
        // there for good, its place kept alive by its client's others).
        let caller = CallerGone::default();
        let gone = caller.0.clone();
        let leave = self.leave(waiter);
        let undo = move |took: Took<FairTaken>| -> BoxFuture<()> {
            let caller_gone = gone.load(std::sync::atomic::Ordering::SeqCst);
            match (took, turn) {
                (Took::Surely(FairTaken::Taken), _) | (Took::Maybe, Turn::Barge) => Box::pin(leave),
                _ if caller_gone => Box::pin(leave),
                _ => Box::pin(async {}),
            }
        };
        let outcome = settled_acquire(&self.client.conn, call, undo, self.labels()).await;
        drop(caller);
        outcome?.ok_or_else(|| Error::unexpected("fair semaphore acquire", "no reply"))
    }

    /// The hold `hold` of `permits`, taken by an attempt sent at `sent`, its
    /// lease renewed from now on.
    fn permits_taken(
        &self,
        hold: &Arc<str>,
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
            &self.name,
            hold,
            RenewKind::FairPermits,
            validity.clone(),
        );
        FairPermits {
            semaphore: self.clone(),
            hold: hold.to_string(),
            permits,
            renewal: Some(renewal),
            validity,
        }
    }

    fn labels(&self) -> Labels {
        Labels::new(FAIR_SEMAPHORE, &self.name, &self.client.config)
    }

    /// Gives back the permits held under `hold`; `false` when they were no
    /// longer out. What that frees goes at once to this client's waiters
    /// while they are first in line (release-and-grant: their permits in the
    /// same round trip, handed over in process). Sent again when it fails in transit; a send
    /// that may have run unheard may have granted too, so every waiter here
    /// then tries once, and one granted finds its grant.
    async fn release_hold(&self, hold: &str) -> Result<bool> {
        let lease_ms =
            duration_to_millis("watchdog timeout", self.client.config.lock_watchdog_timeout)?;
        let send = {
            let (conn, keys, hold) = (self.client.conn.clone(), self.keys(), hold.to_owned());
            let (lines, client) = (self.client.fair_lines.clone(), self.client.id.clone());
            // A send before this one may have run unheard (and granted).
            let unheard = Arc::new(std::sync::atomic::AtomicBool::new(false));
            move |first_may_have_run: bool| {
                let (mut conn, keys, hold) = (conn.clone(), keys.clone(), hold.clone());
                let (lines, client, unheard) = (lines.clone(), client.clone(), unheard.clone());
                async move {
                    use std::sync::atomic::Ordering::SeqCst;
                    if first_may_have_run {
                        unheard.store(true, SeqCst);
                    }
                    let sent = Instant::now();
                    let grant_to = Some((&*client, lease_ms));
                    let released =
                        match scripts::fsem_release(&mut conn, &keys, &hold, grant_to).await {
                            Ok(released) => released,
                            Err(e) => {
                                // It may have granted, and nobody will hear
                                // of it: every waiter here tries, and one
                                // granted finds its grant.
                                if super::settle::may_have_run(&e) {
                                    unheard.store(true, SeqCst);
                                    lines.tell_all_to_try(&keys.semaphore);
                                }
                                return Err(e);
                            }
                        };
                    // A waiter that left meanwhile gives the grant back with
                    // its own leave, sent after it left this client's line: a
                    // release that ran before that leave granted to it, and
                    // one after it could not. (Not the releaser: the waiter
                    // may have taken the grant by its own attempt, and left
                    // holding it.)
                    for waiter in &released.granted {
                        lines.grant(&keys.semaphore, waiter, sent);
                    }
                    let unheard = unheard.load(SeqCst);
                    if unheard {
                        lines.tell_all_to_try(&keys.semaphore);
                    }
                    // After a send that may have run, "not out" may be that
                    // send's doing.
                    Ok(released.released || unheard)
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

/// Set when the attempt's caller is gone (its future dropped), read by the
/// attempt's settle (see [`RFairSemaphore::attempt`]).
#[derive(Default)]
struct CallerGone(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CallerGone {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Waiter `waiter` leaving the line of the semaphore at `keys` (and giving
/// back any grant made to it), retried until the server answers.
async fn leave(conn: Conn, keys: FairSemaphoreKeys, waiter: Arc<str>, terms: SettleTerms) {
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

/// When a waiter in line acts next, as its last attempt and sleep left it.
#[derive(Debug, Default)]
struct Schedule {
    /// What to send next, if anything.
    next: Option<Turn>,
    /// It must listen first (and try once confirmed).
    listen: bool,
    /// Transient failures in a row.
    failures: u32,
    /// When something changes by itself (a lease ends, the first in line is
    /// taken for gone), if known: the head tries then.
    changes_at: Option<Instant>,
    /// When to try again after a transient failure.
    retry_at: Option<Instant>,
}

impl Schedule {
    /// Until when to sleep if nothing wakes the waiter of `seat`: as its
    /// client's head, a re-check, a keep or a change by itself; a retry; its
    /// deadline.
    fn until(
        &self,
        seat: &SeatGuard,
        recheck: Duration,
        deadline: Option<Instant>,
    ) -> Option<Instant> {
        let head = seat.head_dues(recheck, KEEP_EVERY);
        let head = head.map_or([None; 3], |dues| {
            [Some(dues.recheck), Some(dues.keep), self.changes_at]
        });
        head.into_iter()
            .chain([self.retry_at, deadline])
            .flatten()
            .min()
    }

    /// What the waiter of `seat` does after its sleep ended as `woke`;
    /// `false` when it is out of time.
    fn woke(
        &mut self,
        woke: Woke,
        seat: &SeatGuard,
        recheck: Duration,
        deadline: Option<Instant>,
    ) -> bool {
        match woke {
            Woke::Called => (self.next, self.retry_at) = (Some(Turn::InLine), None),
            Woke::Told => {}
            Woke::Due => {
                let now = Instant::now();
                if deadline.is_some_and(|deadline| now >= deadline) {
                    return false;
                }
                // A re-check, unless another waiter of this client sent an
                // attempt meanwhile (the head's due moved on); else a keep of
                // the client's places, unless one went out.
                let due = |at: Option<Instant>| at.is_some_and(|at| at <= now);
                let head = seat.head_dues(recheck, KEEP_EVERY);
                if due(head.map(|dues| dues.recheck)) || due(self.changes_at) || due(self.retry_at)
                {
                    self.next = Some(Turn::InLine);
                    (self.changes_at, self.retry_at) = (None, None);
                } else if due(head.map(|dues| dues.keep)) {
                    self.next = Some(Turn::Keep);
                }
            }
        }
        true
    }
}

/// What a waiter in line does after an attempt.
enum AfterAttempt {
    /// It has the permits, taken by the attempt sent then.
    Taken(Instant),
    /// It goes round at once (to listen, to try once confirmed, or because
    /// its places were lost).
    Again,
    /// It sleeps until woken or due.
    Sleep,
}

/// What ended a waiter's sleep.
enum Woke {
    /// A message named it (or the subscription was lost: every waiter tries).
    Called,
    /// Its client's line told it something: a grant, a reason to try, or
    /// that it is the head now.
    Told,
    /// Its re-check, a lease's end or its deadline is due.
    Due,
}

/// Sleeps until `woken` (a message naming the waiter, if it listens),
/// `told` (its seat), or `until`. The timer is boxed and made only when
/// there is something to time: a parked waiter without a deadline, one of
/// thousands, carries none.
async fn sleep_until_woken(
    mut woken: std::pin::Pin<&mut Option<tokio::sync::futures::Notified<'_>>>,
    mut told: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    until: Option<Instant>,
) -> Woke {
    use std::future::Future;
    use std::task::Poll;
    let mut timer = until.map(|until| Box::pin(tokio::time::sleep_until(until)));
    std::future::poll_fn(|cx| {
        if told.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Woke::Told);
        }
        if let Some(woken) = woken.as_mut().as_pin_mut() {
            if woken.poll(cx).is_ready() {
                return Poll::Ready(Woke::Called);
            }
        }
        match timer.as_mut().map(|timer| timer.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Woke::Due),
            _ => Poll::Pending,
        }
    })
    .await
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

    /// The id they are held under on the server (the semaphore's hash field
    /// `hold:<id>`, and its lease's member), as the inspector shows it.
    pub fn hold_id(&self) -> &str {
        &self.hold
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
            // Boxed: a task that holds permits, and will release them, does
            // not carry the release's state all along.
            if Box::pin(semaphore.release_hold(&hold)).await? {
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
        let name = self.semaphore.name.clone();
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
