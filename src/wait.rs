//! The one wait engine every lock kind uses.
//!
//! ```text
//! register renewal (watchdog holds) ─▶ attempt ─▶ acquired? ── yes ─▶ hold
//!                                        │ no (ttl)
//!                  subscribe to the kind's channel, then loop:
//!                    arm wake-up ─▶ wait for the subscription ─▶ attempt
//!                    ─▶ sleep until woken, at most min(ttl, time left) ─▶ loop
//! ```
//!
//! An attempt dropped while in flight (the caller's future was dropped) is not
//! abandoned: it is finished in a task of its own and whatever it got is undone (a
//! hold released, a queue place left), so a cancelled `lock()` never leaves
//! anything behind, even when its script runs on the server after the caller left.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use tokio::time::Instant;

use crate::client::ClientInner;
use crate::config::{duration_to_millis, MAX_DURATION};
use crate::error::{Error, Result};
use crate::pubsub::Class;
use crate::scripts::{BusyTtl, Released};
use crate::validity::{Drift, Validity};
use crate::watchdog::{Registration, RenewKind, Renewal};

/// A boxed future, as the lock kinds return from [`Acquirer`].
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How long a waiter sleeps when the lock reports no usable TTL (`-1`: no expiry,
/// `-2`: gone). Every sleep is bounded, even then.
const NO_TTL_SLEEP: Duration = Duration::from_millis(100);

/// What one acquisition is about: which lock, for which owner, and the channel
/// whose messages announce that trying again may succeed.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    /// The owner field, `<client-uuid>:<id>`.
    pub(crate) owner: String,
    pub(crate) channel: String,
}

/// The lock-kind specific half of acquiring: the scripts, the channel to wait on.
pub(crate) trait Acquirer: std::fmt::Debug + Send + Sync + 'static {
    /// The lock, owner and channel.
    fn target(&self) -> &Target;
    /// The lock's name, for watchdog registration.
    fn name(&self) -> &str {
        &self.target().name
    }
    /// The owner field acquiring.
    fn owner(&self) -> &str {
        &self.target().owner
    }
    /// The hash field that counts this owner's holds, and how the watchdog renews
    /// them.
    fn renewal(&self) -> (&str, RenewKind) {
        (self.owner(), RenewKind::HashField)
    }
    /// The channel whose messages announce that trying again may succeed.
    fn channel(&self) -> &str {
        &self.target().channel
    }
    /// Whether this waiter wants a shared hold (a read) or an exclusive one.
    fn class(&self) -> Class {
        Class::Exclusive
    }
    /// One atomic attempt: `Ok(None)` acquired, `Ok(Some(ttl))` busy. With
    /// `queue`, a fair lock keeps (or takes) the caller's place in line.
    fn attempt(
        self: Arc<Self>,
        conn: Conn,
        lease_ms: u64,
        queue: bool,
    ) -> BoxFuture<Result<Option<BusyTtl>>>;
    /// Releases one hold of this owner, restarting the lease of any that remain
    /// with `lease_ms` (never shortening it).
    fn release(self: Arc<Self>, conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>>;
    /// Does a busy attempt leave state behind (a queue place) that a waiter
    /// giving up must remove with [`abandon`](Acquirer::abandon)?
    fn queues(&self) -> bool {
        false
    }
    /// Leaves the queue. Only called when [`queues`](Acquirer::queues) is true.
    fn abandon(self: Arc<Self>, _conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async { Ok(()) })
    }
    /// The longest a waiter may sleep between attempts, whatever the TTL says.
    fn max_sleep(&self) -> Option<Duration> {
        None
    }
}

/// How long a hold lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lease {
    /// The watchdog timeout, renewed while held.
    Watchdog,
    /// Exactly this long; never renewed.
    Fixed(Duration),
}

/// How long to keep trying.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt; never queues.
    Once,
    /// Until this much time has passed.
    For(Duration),
    /// Until acquired.
    Forever,
}

/// A hold just acquired: how it is kept alive and how its loss is noticed.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The watchdog's renewal, for holds without an explicit lease.
    pub(crate) renewal: Option<Renewal>,
    /// Until when the hold is surely valid on this client's clock: from the
    /// instant the acquire was sent, extended by each confirmed renewal.
    pub(crate) validity: Arc<Validity>,
    /// The lease in milliseconds, restarted on the holds that remain when this one
    /// is released.
    pub(crate) lease_ms: u64,
}

/// Checks a wait time before any I/O.
pub(crate) fn validate_wait(wait: Duration) -> Result<()> {
    if wait > MAX_DURATION {
        return Err(Error::invalid(format!(
            "wait time of {wait:?} exceeds the maximum of {} s",
            MAX_DURATION.as_secs()
        )));
    }
    Ok(())
}

/// Acquires with `acquirer`, waiting as `wait` says, then (with replica sync on)
/// makes sure a replica has the hold. `Ok(None)`: not acquired in time.
///
/// # Cancel safety
/// Cancel safe at every await: the subscription, the watchdog registration, a queue
/// place and any hold a detached attempt obtained are all given back when this
/// future is dropped, and so is a hold whose replication was still awaited.
pub(crate) async fn acquire(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    lease: Lease,
    wait: Wait,
) -> Result<Option<Hold>> {
    let epoch = client.pubsub.connection_epoch();
    let Some(hold) = acquire_on_primary(client, acquirer, lease, wait).await? else {
        return Ok(None);
    };
    let replicas = client.replica_sync;
    if replicas == 0 {
        return Ok(Some(hold));
    }
    // Given back if this future is dropped while waiting for the replicas.
    let mut unconfirmed = UndoOnDrop {
        undo: Some((acquirer.clone(), client.conn.clone(), hold.lease_ms)),
    };
    let acked = crate::replication::wait_for_replicas(client, replicas).await;
    // WAIT counts the writes of the connection it runs on: if the connection was
    // replaced since the acquire (a reconnect, a Sentinel switch), its answer says
    // nothing about the acquire.
    let same_connection = client.pubsub.connection_epoch() == epoch;
    if same_connection && matches!(acked, Ok(n) if n >= replicas) {
        unconfirmed.undo = None;
        return Ok(Some(hold));
    }
    // Unconfirmed: stop renewing, give it back (from a task of its own, so that
    // dropping this future cannot cut the release short), report why.
    let lease_ms = hold.lease_ms;
    drop(hold);
    unconfirmed.undo = None;
    let (giver, conn) = (acquirer.clone(), client.conn.clone());
    let spawner = conn.spawner().clone();
    let given_back = spawner
        .run(async move { giver.release(conn, lease_ms).await })
        .await;
    match (acked, given_back) {
        (_, Ok(Err(e)) | Err(e)) => Err(e),
        (Err(e), _) => Err(e),
        _ => Err(Error::NotReplicated {
            name: acquirer.name().to_owned(),
            replicas,
        }),
    }
}

/// Releases one hold from a spawned task if dropped while armed.
struct UndoOnDrop {
    undo: Option<(Arc<dyn Acquirer>, Conn, u64)>,
}

impl Drop for UndoOnDrop {
    fn drop(&mut self) {
        if let Some((acquirer, conn, lease_ms)) = self.undo.take() {
            conn.clone().spawn_cleanup(async move {
                let _ = acquirer.release(conn, lease_ms).await;
            });
        }
    }
}

/// [`acquire`] up to the point the primary granted the hold.
async fn acquire_on_primary(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    wait_lease: Lease,
    wait: Wait,
) -> Result<Option<Hold>> {
    let (lease, lease_ms) = match wait_lease {
        Lease::Watchdog => {
            let lease = client.config.lock_watchdog_timeout;
            (lease, duration_to_millis("watchdog timeout", lease)?)
        }
        Lease::Fixed(fixed) => (fixed, duration_to_millis("lease", fixed)?),
    };
    let renewed = matches!(wait_lease, Lease::Watchdog);
    let drift = Drift {
        factor: client.config.clock_drift_factor,
    };
    // A zero wait is one try (Java's `tryLock(0, ...)`), and never queues.
    let wait = match wait {
        Wait::For(limit) if limit.is_zero() => Wait::Once,
        other => other,
    };
    let deadline = match wait {
        Wait::Once | Wait::Forever => None,
        Wait::For(wait) => {
            validate_wait(wait)?;
            Some(Instant::now() + wait)
        }
    };
    let registration = renewed.then(|| {
        let (field, kind) = acquirer.renewal();
        client.watchdog.register(acquirer.name(), field, kind)
    });
    let acquired = |registration: Option<Registration>, sent: Instant| {
        let validity = Arc::new(Validity::new(sent, lease, drift));
        Hold {
            renewal: registration.map(|r| r.activate(validity.clone())),
            validity,
            lease_ms,
        }
    };
    let queue = !matches!(wait, Wait::Once);
    // A fair waiter may hold a place in line from its first attempt on: leave it
    // on every way out but success (a dropped future leaves it from a task).
    let mut place = QueuePlace::new(client, acquirer, queue);

    // The uncontended path: one attempt, no subscription. However short the wait,
    // this first attempt is made (bounded by the response timeout), as Redisson does.
    let sent = Instant::now();
    let mut failures = 0;
    let first_ttl = match attempt(client, acquirer, lease_ms, queue).await {
        Ok(None) => {
            place.keep();
            return Ok(Some(acquired(registration, sent)));
        }
        Ok(Some(ttl)) if queue => Some(ttl),
        Ok(Some(_busy)) => return Ok(None),
        Err(e) if queue && e.is_surely_not_executed() => {
            failures += 1;
            None
        }
        Err(e) => {
            place.leave().await;
            return Err(e);
        }
    };
    if deadline.is_some_and(|d| Instant::now() >= d) {
        place.leave().await;
        return Ok(None);
    }
    // A busy reply proves the owner held no hold here. From then on an attempt
    // whose outcome is unknown (a timeout, a connection cut mid-request) can be
    // settled by asking whether the owner holds the lock now, rather than repeated
    // (which could count a hold twice) or given up (a server restart would then
    // fail every waiter).
    let mut seen_busy = first_ttl.is_some();
    let mut unsettled: Option<Instant> = None;

    let subscription = client
        .pubsub
        .subscribe(acquirer.channel(), acquirer.class());
    // Joining a channel other waiters of this client already listen on, right
    // after a failed attempt, nothing can have been missed: an unlock published
    // since went to one of them (or left a permit for the next to listen), and that
    // one retries. So sleep first and skip the immediate second attempt; on a new
    // subscription the attempt must follow it, or that unlock would be lost.
    // Not for shared waiters: a "wake all" (write release) that reached the others
    // before this one joined would leave it asleep on a lock it could share.
    let mut sleep_first = first_ttl
        .filter(|_| subscription.is_ready() && acquirer.class() == Class::Exclusive)
        .map(|ttl| sleep_bound(ttl, acquirer.max_sleep()));
    loop {
        // Armed before the attempt: an unlock published between the attempt's reply
        // and the sleep below still wakes this waiter.
        let mut woken = std::pin::pin!(subscription.notified());
        woken.as_mut().enable();
        let sent = Instant::now();
        let step = async {
            if let Some(sleep) = sleep_first.take() {
                return Ok(Step::Sleep(sleep));
            }
            if let Some(sent_then) = unsettled {
                if holds_now(client, acquirer).await.map_err(Failure::Settle)? {
                    return Ok(Step::Acquired(sent_then));
                }
                unsettled = None;
            }
            subscription.ready().await.map_err(Failure::Subscribe)?;
            match attempt(client, acquirer, lease_ms, true).await {
                Ok(None) => Ok(Step::Acquired(sent)),
                Ok(Some(ttl)) => Ok(Step::Busy(sleep_bound(ttl, acquirer.max_sleep()))),
                Err(e) => Err(Failure::Attempt(e)),
            }
        };
        let sleep = match within(deadline, step).await {
            None => break,
            Some(Ok(Step::Acquired(sent))) => {
                place.keep();
                return Ok(Some(acquired(registration, sent)));
            }
            Some(Ok(Step::Busy(sleep))) => {
                seen_busy = true;
                failures = 0;
                sleep
            }
            Some(Ok(Step::Sleep(sleep))) => sleep,
            Some(Err(failure)) if failures < client.config.retry_attempts => {
                match failure.retry(seen_busy) {
                    Retry::No(e) => {
                        place.leave().await;
                        return Err(e);
                    }
                    Retry::Settle => unsettled = Some(sent),
                    Retry::Yes => {}
                }
                failures += 1;
                client.config.retry_interval
            }
            Some(Err(failure)) => {
                place.leave().await;
                return Err(failure.into_error());
            }
        };
        let sleep = match deadline {
            Some(deadline) => sleep.min(deadline.saturating_duration_since(Instant::now())),
            None => sleep,
        };
        // Woken or timed out, the next step is the same: try again.
        let _ = tokio::time::timeout(sleep, woken).await;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    place.leave().await;
    Ok(None)
}

/// Runs `step`, giving up at `deadline` (if any): `None` when the deadline came first.
async fn within<T>(deadline: Option<Instant>, step: impl Future<Output = T>) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, step).await.ok(),
        None => Some(step.await),
    }
}

/// What one wait-loop step came to.
enum Step {
    /// Acquired, by the attempt sent at this instant.
    Acquired(Instant),
    /// Busy: sleep at most this long.
    Busy(Duration),
    /// Nothing tried yet: sleep at most this long first.
    Sleep(Duration),
}

/// What went wrong in one wait-loop step.
enum Failure {
    Subscribe(Error),
    Attempt(Error),
    /// Asking whether an unsettled attempt took the lock failed.
    Settle(Error),
}

/// What to do about a failed step.
enum Retry {
    Yes,
    /// Yes, after finding out whether the failed attempt took the lock.
    Settle,
    No(Error),
}

impl Failure {
    /// A subscription (or a question) can always be asked again after a
    /// transport failure. An acquire that surely did not run may simply be
    /// repeated; one that may have run (a timeout, a connection cut mid-request)
    /// is settled first when the owner is known to have held nothing before, and
    /// otherwise ends the wait, since repeating it could count a hold twice.
    fn retry(self, seen_busy: bool) -> Retry {
        match self {
            Failure::Subscribe(e) | Failure::Settle(e) if e.is_transient() => Retry::Yes,
            Failure::Attempt(e) if e.is_surely_not_executed() => Retry::Yes,
            Failure::Attempt(e) if seen_busy && e.is_transient() => Retry::Settle,
            other => Retry::No(other.into_error()),
        }
    }

    fn into_error(self) -> Error {
        match self {
            Failure::Subscribe(e) | Failure::Attempt(e) | Failure::Settle(e) => e,
        }
    }
}

/// Does the owner hold the lock now (its hold counter field exists)?
async fn holds_now(client: &ClientInner, acquirer: &Arc<dyn Acquirer>) -> Result<bool> {
    let (field, _) = acquirer.renewal();
    let mut conn = client.conn.clone();
    redis::cmd("HEXISTS")
        .arg(acquirer.name())
        .arg(field)
        .query_async(&mut conn)
        .await
        .map_err(|e| Error::from_redis(acquirer.name(), e))
}

fn sleep_bound(ttl: BusyTtl, cap: Option<Duration>) -> Duration {
    let bound = match u64::try_from(ttl) {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => NO_TTL_SLEEP,
    };
    cap.map_or(bound, |cap| bound.min(cap))
}

/// A fair waiter's place in line, left on every way out but success; dropped
/// without [`keep`](QueuePlace::keep) or [`leave`](QueuePlace::leave) (the caller's
/// future was dropped), it leaves from a spawned task.
struct QueuePlace {
    leave: Option<(Arc<dyn Acquirer>, Conn)>,
}

impl QueuePlace {
    fn new(client: &ClientInner, acquirer: &Arc<dyn Acquirer>, queued: bool) -> Self {
        QueuePlace {
            leave: (queued && acquirer.queues()).then(|| (acquirer.clone(), client.conn.clone())),
        }
    }

    /// Acquired: the place was consumed by the acquire itself.
    fn keep(&mut self) {
        self.leave = None;
    }

    /// Leaves the line now. A failure leaves the place to expire at its deadline,
    /// when the queue skips it.
    async fn leave(&mut self) {
        if let Some((acquirer, conn)) = self.leave.take() {
            let _ = acquirer.abandon(conn).await;
        }
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        if let Some((acquirer, conn)) = self.leave.take() {
            conn.clone().spawn_cleanup(async move {
                let _ = acquirer.abandon(conn).await;
            });
        }
    }
}

/// Runs one attempt. If this future is dropped while the attempt is in flight,
/// the attempt is finished in a task of its own and its outcome undone (see the
/// module docs for why).
fn attempt(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    lease_ms: u64,
    queue: bool,
) -> InFlight {
    InFlight {
        attempt: Some(
            acquirer
                .clone()
                .attempt(client.conn.clone(), lease_ms, queue),
        ),
        acquirer: acquirer.clone(),
        conn: client.conn.clone(),
        lease_ms,
    }
}

/// An attempt on its way to the server.
struct InFlight {
    attempt: Option<BoxFuture<Result<Option<BusyTtl>>>>,
    acquirer: Arc<dyn Acquirer>,
    conn: Conn,
    lease_ms: u64,
}

impl Future for InFlight {
    type Output = Result<Option<BusyTtl>>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(attempt) = self.attempt.as_mut() else {
            return std::task::Poll::Ready(Err(Error::unexpected("lock attempt", "polled again")));
        };
        let outcome = std::task::ready!(attempt.as_mut().poll(cx));
        self.attempt = None;
        std::task::Poll::Ready(outcome)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Dropped mid-flight: the script may yet run. Finish it elsewhere and undo
        // whatever it got, since nobody is left to receive it.
        if let Some(attempt) = self.attempt.take() {
            let (acquirer, conn, lease_ms) =
                (self.acquirer.clone(), self.conn.clone(), self.lease_ms);
            self.conn.spawn_cleanup(async move {
                let outcome = attempt.await;
                undo(acquirer, conn, lease_ms, outcome).await;
            });
        }
    }
}

/// Undoes an attempt's outcome that nobody will receive: releases a hold it took,
/// leaves a queue place it may have taken.
async fn undo(
    acquirer: Arc<dyn Acquirer>,
    conn: Conn,
    lease_ms: u64,
    outcome: Result<Option<BusyTtl>>,
) {
    match outcome {
        Ok(None) => {
            // Failing this, the hold expires with its lease (the watchdog never
            // renewed it).
            let _ = acquirer.release(conn, lease_ms).await;
        }
        Ok(Some(_)) | Err(_) if acquirer.queues() => {
            let _ = acquirer.abandon(conn).await;
        }
        _ => {}
    }
}
