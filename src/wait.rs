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
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::cleanup::OnDrop;
use crate::client::ClientInner;
use crate::config::{duration_to_millis, MAX_DURATION};
use crate::contract::{Acquirer, Lease, Wait};
use crate::error::{Error, Result};
use crate::ledger::{release_one, settle, Gate, Gated, Slot};
use crate::line::{Entry, HeldHere, Turn};
use crate::pubsub::{Class, PollTurn, Subscription};
use crate::scripts::BusyTtl;
use crate::validity::{Drift, Validity};
use crate::watchdog::{Registration, Renewal};

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
    /// The owner's slot in the client's ledger: releases go through its gate.
    pub(crate) slot: Arc<Slot>,
    /// The connection epoch when the acquire that took it was sent: replica sync
    /// must WAIT on that same connection.
    pub(crate) epoch: u64,
}

/// Acquires with `acquirer`, waiting as `wait` says, then (with replica sync on)
/// makes sure a replica has the hold. `Ok(None)`: not acquired in time.
/// `new_owner`: the owner was made for this acquisition alone (it may wait in the
/// client's local line).
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
    new_owner: bool,
) -> Result<Option<Hold>> {
    let Some(hold) = acquire_on_primary(client, acquirer, lease, wait, new_owner).await? else {
        return Ok(None);
    };
    if client.replica_sync == 0 {
        return Ok(Some(hold));
    }
    // Boxed: a waiter's future is as large as its largest state, and this one
    // comes only after the wait.
    Box::pin(confirm_on_replicas(client, acquirer, hold)).await
}

/// With replica sync on: makes sure a replica has the `hold` just granted, or
/// gives it back.
async fn confirm_on_replicas(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    hold: Hold,
) -> Result<Option<Hold>> {
    let replicas = client.replica_sync;
    // Given back if this future is dropped while waiting for the replicas.
    let mut unconfirmed = {
        let (slot, acquirer, releaser, lease_ms) = (
            hold.slot.clone(),
            acquirer.clone(),
            client.releaser.clone(),
            hold.lease_ms,
        );
        OnDrop::armed(&client.conn, async move {
            if let Err(e) = release_one(&slot, &acquirer, &releaser, lease_ms).await {
                crate::trace::warn_event!(
                    "lock {:?}: giving back a hold no replica confirmed failed (it ends with its lease): {e}",
                    acquirer.name()
                );
            }
        })
    };
    let acked = crate::replication::wait_for_replicas(
        &client.conn,
        replicas,
        client.config.effective_replica_sync_timeout_ms(),
    )
    .await;
    // WAIT counts the writes of the connection it runs on: if the connection was
    // replaced since the acquire (a reconnect, a Sentinel switch), its answer says
    // nothing about the acquire.
    let same_connection = client.pubsub.connection_epoch() == hold.epoch;
    if same_connection && matches!(acked, Ok(n) if n >= replicas) {
        unconfirmed.disarm();
        return Ok(Some(hold));
    }
    // Unconfirmed: stop renewing, give it back (from a task of its own, so that
    // dropping this future cannot cut the release short), report why.
    let (lease_ms, slot) = (hold.lease_ms, hold.slot.clone());
    drop(hold);
    unconfirmed.disarm();
    let (giver, releaser) = (acquirer.clone(), client.releaser.clone());
    let given_back = client
        .conn
        .spawner()
        .run(async move { release_one(&slot, &giver, &releaser, lease_ms).await })
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

/// [`acquire`] up to the point the primary granted the hold: through this
/// client's local line for the lock first, if its kind keeps one and the owner
/// is `new_owner` (made for this acquisition; see
/// [`Lines::enter`](crate::line::Lines::enter)).
///
/// A parked waiter is small (its place in the line and its subscription); the
/// wait in Redis, with its attempts, renewal registration and owner slot, is
/// built (boxed) only when the turn comes. 100,000 waiters of one client over
/// 10,000 locks are then 10,000 waits in Redis and 90,000 places in line.
async fn acquire_on_primary(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    wait_lease: Lease,
    wait: Wait,
    new_owner: bool,
) -> Result<Option<Hold>> {
    let terms = Terms::new(client, wait_lease)?;
    let (wait, deadline) = wait.start()?;
    let lock_name = &acquirer.target().name;
    // Only an owner made for this acquisition: any other may hold the lock
    // already or be waiting for it elsewhere (a task's sibling futures, one
    // explicit id on two tasks), and must not wait behind waiters that wait
    // for it. Never a one-off try (it never waits).
    let in_line = new_owner && acquirer.local_line() && !matches!(wait, Wait::Once);
    let (mut turn, mut listening) = (None, None);
    let parked = match in_line.then(|| client.lines.enter(lock_name)) {
        Some(Entry::Turn(first)) => {
            turn = Some(first);
            None
        }
        Some(Entry::Park(parked)) => Some(parked),
        Some(Entry::Bypass) | None => None,
    };
    if let Some(parked) = parked {
        // Listening while parked keeps the channel subscribed from one head
        // of the line to the next.
        listening = Some(
            client
                .pubsub
                .subscribe(acquirer.channel(), lock_name, acquirer.class()),
        );
        // Not `within`: this state is what a parked waiter weighs, and a timer
        // (boxed, for the timed waits only) would double it.
        let next = match deadline {
            Some(deadline) => Box::pin(tokio::time::timeout_at(deadline, parked.turn()))
                .await
                .ok(),
            None => Some(parked.turn().await),
        };
        match next {
            Some(Some(head)) => turn = Some(head),
            // The head stalled: wait in Redis, as every waiter used to.
            Some(None) => {}
            None => {
                // Out of time in the line: every wait makes at least one attempt
                // (as Redisson's first), so this one makes it on its way out. A
                // transient failure of it is only a wait that ran out, as it would
                // be in Redis (where transient failures are retried until then).
                drop(listening);
                let last = Box::pin(wait_in_redis(
                    client,
                    acquirer,
                    terms,
                    (Wait::Once, None),
                    None,
                    None,
                ))
                .await;
                return match last {
                    Err(e) if e.is_transient() => Ok(None),
                    other => other,
                };
            }
        }
    }
    let hold = Box::pin(wait_in_redis(
        client,
        acquirer,
        terms,
        (wait, deadline),
        listening,
        turn.as_ref(),
    ))
    .await;
    if let (Some(turn), Ok(Some(_))) = (turn, &hold) {
        // Tell the next in line it need not try before this hold's release,
        // whose message it will hear: only if the channel is confirmed now, so
        // the release (sent later) publishes after the subscription.
        if let Some(mark) = client.pubsub.mark(acquirer.channel()) {
            turn.acquired(HeldHere {
                until: Instant::now() + terms.lease,
                mark,
            });
        }
    }
    hold
}

/// A hold's lease as one acquisition asks for it.
#[derive(Debug, Clone, Copy)]
struct Terms {
    lease: Duration,
    lease_ms: u64,
    /// Renewed by the watchdog (no explicit lease).
    renewed: bool,
}

impl Terms {
    fn new(client: &ClientInner, lease: Lease) -> Result<Terms> {
        Ok(match lease {
            Lease::Watchdog => {
                let lease = client.config.lock_watchdog_timeout;
                Terms {
                    lease,
                    lease_ms: duration_to_millis("watchdog timeout", lease)?,
                    renewed: true,
                }
            }
            Lease::Fixed(lease) => Terms {
                lease,
                lease_ms: duration_to_millis("lease", lease)?,
                renewed: false,
            },
        })
    }
}

/// The wait in Redis: attempts, and sleeps on the unlock channel in between.
/// `listening`: a subscription made while parked in the local line; `head`:
/// its turn at the head of the line (it says there by when it acts next, counts
/// it among the lock's waiters, and tells whether the task before left holding
/// the lock).
async fn wait_in_redis(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    terms: Terms,
    (wait, deadline): (Wait, Option<Instant>),
    listening: Option<Subscription>,
    head: Option<&Turn>,
) -> Result<Option<Hold>> {
    let after_holder = head.and_then(Turn::held_here_until);
    let Terms {
        lease,
        lease_ms,
        renewed,
    } = terms;
    let drift = Drift {
        factor: client.config.clock_drift_factor,
    };
    let (field, kind) = acquirer.renewal();
    let slot = client.ledger.slot(&acquirer.target().name, field);
    let registration = renewed.then(|| client.watchdog.register(acquirer.name(), field, kind));
    let acquired = |registration: Option<Registration>, sent: Instant, epoch: u64| {
        let validity = Arc::new(Validity::new(sent, lease, drift));
        Hold {
            renewal: registration.map(|r| r.activate(validity.clone())),
            validity,
            lease_ms,
            slot: slot.clone(),
            epoch,
        }
    };
    let queue = !matches!(wait, Wait::Once);
    // A fair waiter may hold a place in line from its first attempt on: leave it
    // on every way out but success (a dropped future leaves it from a task).
    let mut place = queue_place(client, acquirer, queue);
    let attempts = Attempts {
        client,
        acquirer,
        slot: &slot,
        lease_ms,
    };

    // The uncontended path: one attempt, no subscription. However short the wait,
    // this first attempt is made (bounded by the response timeout), as Redisson does;
    // a one-off try waits that long at most for another attempt of its owner.
    let first_deadline = deadline
        .or_else(|| matches!(wait, Wait::Once).then(|| Instant::now() + client.config.timeout));
    let lock_name = &acquirer.target().name;
    // A release by this client just woke a waiter of this (non-fair) lock: do
    // not barge past it; wait behind it instead (see `line.rs`). Or the task
    // before in the local line holds it: wait for its release's message.
    // A wait shorter than that makes its one attempt instead.
    let hold_back = after_holder
        .as_ref()
        .map(|held| held.until)
        .or_else(|| {
            (queue && acquirer.backoff().is_none() && !acquirer.queues())
                .then(|| match head {
                    Some(head) => head.hold_back_until(),
                    None => client.lines.hold_back_until(lock_name),
                })
                .flatten()
        })
        .filter(|until| deadline.is_none_or(|d| d > *until));
    // A fair waiter with others of this client already in line will wait too:
    // it listens before its first attempt (which joins the line), so nothing
    // can be missed in between and no second attempt is needed.
    let early_subscription = listening.or_else(|| {
        (queue && acquirer.queues() && client.lines.waiting(lock_name) > 0).then(|| {
            client
                .pubsub
                .subscribe(acquirer.channel(), lock_name, acquirer.class())
        })
    });
    if let Some(early) = &early_subscription {
        if within(deadline, Box::pin(early.ready())).await.is_none() {
            // Out of time before joining the line: there is no place to leave.
            place.disarm();
            return Ok(None);
        }
    }
    let sent = Instant::now();
    let epoch = client.pubsub.connection_epoch();
    let mut failures = 0;
    // At the head of the local line: say by when this waiter acts next, so a
    // future no longer polled is noticed (`Lines::supervise`).
    let due = |by: Instant| {
        if let Some(head) = head {
            head.due(by);
        }
    };
    // (Due by the first attempt's reply timeout since it got the turn.)
    let first = match hold_back {
        Some(_) => Some(Ok(Some(0))),
        // Boxed here and below: a waiter's future is as large as its largest
        // state, and an attempt in flight is large but brief; boxing it keeps a
        // sleeping waiter small (many thousands may sleep at once).
        None => Box::pin(attempts.send(queue, first_deadline)).await,
    };
    let first_ttl = match first {
        None => {
            place.run_now().await;
            return Ok(None);
        }
        Some(Ok(None)) => {
            place.disarm();
            return Ok(Some(acquired(registration, sent, epoch)));
        }
        Some(Ok(Some(ttl))) if queue => Some(ttl),
        Some(Ok(Some(_busy))) => return Ok(None),
        Some(Err(e)) if queue && e.is_transient() => {
            // Surely not run, or being settled: try again after a pause.
            failures += 1;
            None
        }
        Some(Err(e)) => {
            place.run_now().await;
            return Err(e);
        }
    };
    if deadline.is_some_and(|d| Instant::now() >= d) {
        place.run_now().await;
        return Ok(None);
    }

    if let Some(backoff) = acquirer.backoff() {
        // A spin lock: no subscription, no message; back off and retry.
        let mut retry = 0u32;
        loop {
            let pause_until = Instant::now() + backoff.pause(retry);
            retry = retry.saturating_add(1);
            tokio::time::sleep_until(deadline.map_or(pause_until, |d| pause_until.min(d))).await;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let sent = Instant::now();
            let epoch = client.pubsub.connection_epoch();
            match within(deadline, Box::pin(attempts.send(true, None))).await {
                None => break,
                Some(Some(Ok(None))) => {
                    place.disarm();
                    return Ok(Some(acquired(registration, sent, epoch)));
                }
                Some(Some(Ok(Some(_busy)))) => failures = 0,
                Some(Some(Err(e)))
                    if e.is_transient() && failures < client.config.retry_attempts =>
                {
                    failures += 1;
                }
                Some(Some(Err(e))) => {
                    place.run_now().await;
                    return Err(e);
                }
                Some(None) => {}
            }
        }
        place.run_now().await;
        return Ok(None);
    }

    // Counted as waiting already if it came through the local line.
    let _waiting = head.is_none().then(|| client.lines.join(lock_name));
    let subscribed_early = early_subscription.is_some();
    let subscription = early_subscription.unwrap_or_else(|| {
        client
            .pubsub
            .subscribe(acquirer.channel(), lock_name, acquirer.class())
    });
    // Joining other waiters of this client that already listen for this lock (a
    // channel can carry two locks), right after a failed attempt, nothing can have
    // been missed: an unlock published since went to one of them (or left a permit
    // for the next to listen), and that one retries. So sleep first and skip the
    // immediate second attempt; on a new subscription the attempt must follow it,
    // or that unlock would be lost.
    // Not for shared waiters: a "wake all" (write release) that reached the others
    // before this one joined would leave it asleep on a lock it could share.
    let mut sleep_first = first_ttl
        .filter(|_| {
            // Early: nothing can have been missed if the subscription stood
            // before the attempt and no reconnect came in between.
            (subscribed_early
                && subscription.is_ready()
                && client.pubsub.connection_epoch() == epoch)
                || (subscription.is_ready()
                    && subscription.joined_others()
                    && acquirer.class() == Class::Exclusive)
        })
        .map(|ttl| Pause::after(ttl, acquirer.max_sleep()));
    // Held back behind a hand-off: sleep until woken or the window closes.
    if let Some(until) = hold_back {
        sleep_first = Some(Pause::For(until.saturating_duration_since(Instant::now())));
    }
    // This waiter's turn to poll a lock held without expiry (see `Pause`).
    let mut poll_turn: Option<PollTurn> = None;
    let mut poll_backoff = NO_TTL_POLL_FIRST;
    loop {
        // Armed before the attempt: an unlock published between the attempt's reply
        // and the sleep below still wakes this waiter.
        let mut woken = std::pin::pin!(subscription.notified());
        woken.as_mut().enable();
        let sent = Instant::now();
        let epoch = client.pubsub.connection_epoch();
        due(sent + client.config.timeout);
        let step = Box::pin(async {
            // If the subscription changed since the local holder took the lock
            // (a reconnect, or the channel left and subscribed again), its
            // release's message may have been missed: try instead.
            let trusted = after_holder
                .as_ref()
                .filter(|_| hold_back.is_some())
                .is_none_or(|held| subscription.still(&held.mark));
            if let Some(pause) = sleep_first.take().filter(|_| trusted) {
                return Ok(Step::Pause(pause));
            }
            subscription.ready().await.map_err(Failure::Subscribe)?;
            match attempts.send(true, None).await {
                Some(Ok(None)) => Ok(Step::Acquired(sent)),
                Some(Ok(Some(ttl))) => Ok(Step::Busy(Pause::after(ttl, acquirer.max_sleep()))),
                Some(Err(e)) => Err(Failure::Attempt(e)),
                None => Err(Failure::Attempt(Error::unexpected(
                    "lock attempt",
                    "the owner's gate closed",
                ))),
            }
        });
        let pause = match within(deadline, step).await {
            None => break,
            Some(Ok(Step::Acquired(sent))) => {
                place.disarm();
                client.lines.taken(lock_name);
                return Ok(Some(acquired(registration, sent, epoch)));
            }
            Some(Ok(Step::Busy(pause))) => {
                failures = 0;
                pause
            }
            Some(Ok(Step::Pause(pause))) => pause,
            Some(Err(failure)) if failures < client.config.retry_attempts => {
                if let Some(e) = failure.fatal() {
                    place.run_now().await;
                    return Err(e);
                }
                failures += 1;
                // Full jitter: waiters that failed together retry apart.
                Pause::For(crate::lock::jitter(client.config.retry_interval))
            }
            Some(Err(failure)) => {
                place.run_now().await;
                return Err(failure.into_error());
            }
        };
        let sleep = match pause {
            Pause::For(sleep) => {
                poll_turn = None;
                poll_backoff = NO_TTL_POLL_FIRST;
                Some(sleep)
            }
            Pause::NoTtl => {
                if poll_turn.is_none() {
                    poll_turn = subscription.try_poll();
                }
                poll_turn.is_some().then(|| {
                    let sleep = poll_backoff;
                    poll_backoff = (poll_backoff * 2).min(NO_TTL_POLL_MAX);
                    sleep
                })
            }
        };
        let until = |sleep: Duration| {
            let until = Instant::now() + sleep;
            deadline.map_or(until, |deadline| until.min(deadline))
        };
        match sleep {
            // Woken or timed out, the next step is the same: try again.
            Some(sleep) => {
                let slept_at = Instant::now();
                let until = until(sleep);
                due(until);
                let was_woken = tokio::time::timeout_at(until, woken).await.is_ok();
                // Woken by another client's release: so was one waiter of every
                // client listening, and the message reached them in the order
                // they subscribed, so the same clients would win every race. A
                // random pause of a few round trips' worth evens the odds (see
                // `line.rs`). Not after this client's own release: then this
                // waiter is the one the hand-off is for.
                if was_woken
                    && !acquirer.queues()
                    && acquirer.class() == Class::Exclusive
                    && !client.lines.released_since(lock_name, slept_at)
                {
                    crate::line::wake_jitter().await;
                }
            }
            // Another waiter of this client polls: wait for a message, or for
            // the turn to poll, or for the deadline.
            None => {
                let until = until(MAX_DURATION);
                due(until);
                tokio::select! {
                    _ = woken => {}
                    turn = subscription.poll_turn() => poll_turn = Some(turn),
                    _ = tokio::time::sleep_until(until) => {}
                }
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    place.run_now().await;
    Ok(None)
}

/// The first pause when a lock is held without expiry; it doubles up to
/// [`NO_TTL_POLL_MAX`].
const NO_TTL_POLL_FIRST: Duration = Duration::from_millis(50);

/// The longest pause between two polls of a lock held without expiry: a client's
/// one poller notices within this that such a hold was deleted (no unlock message
/// announces it).
const NO_TTL_POLL_MAX: Duration = Duration::from_millis(500);

/// How long to pause after a busy reply.
#[derive(Debug, Clone, Copy)]
enum Pause {
    /// At most this long (until woken).
    For(Duration),
    /// The holder set no expiry: one waiter per lock and client polls, with
    /// backoff from [`NO_TTL_POLL_FIRST`] to [`NO_TTL_POLL_MAX`]; the others wait
    /// for an unlock message or for their turn to poll.
    NoTtl,
}

impl Pause {
    /// After a busy reply with `ttl` (`-1`: no expiry, `-2`: gone meanwhile), at
    /// most `cap` if the lock kind has one.
    fn after(ttl: BusyTtl, cap: Option<Duration>) -> Pause {
        let capped = |bound: Duration| cap.map_or(bound, |cap| bound.min(cap));
        match ttl {
            ms if ms > 0 => Pause::For(capped(Duration::from_millis(ms.unsigned_abs()))),
            // Expiring now, or gone since the attempt: try again soon.
            0 | -2 => Pause::For(capped(NO_TTL_POLL_FIRST)),
            // A fair waiter's own bound (its place in line) still applies.
            _ if cap.is_some() => Pause::For(capped(NO_TTL_POLL_MAX)),
            _ => Pause::NoTtl,
        }
    }
}

/// Sends the attempts of one acquisition through its owner's gate.
struct Attempts<'a> {
    client: &'a Arc<ClientInner>,
    acquirer: &'a Arc<dyn Acquirer>,
    slot: &'a Arc<Slot>,
    lease_ms: u64,
}

impl Attempts<'_> {
    /// One attempt, sent with the owner's gate held: a success is counted; an
    /// outcome that is unknown is settled from a task of its own, which keeps the
    /// gate until it is done (the error is returned). `None` when the gate did not
    /// open before `gate_deadline`.
    async fn send(
        &self,
        queue: bool,
        gate_deadline: Option<Instant>,
    ) -> Option<Result<Option<BusyTtl>>> {
        let gate = self.slot.enter(gate_deadline).await?;
        let (outcome, mut gate) =
            attempt(self.client, self.acquirer, self.lease_ms, queue, gate).await;
        match &outcome {
            Ok(None) => *gate += 1,
            Ok(Some(_)) => {}
            Err(e) if e.is_surely_not_executed() || e.is_definite_refusal() => {}
            Err(_) => {
                let (acquirer, releaser) = (self.acquirer.clone(), self.client.releaser.clone());
                let (lease_ms, settling) = (self.lease_ms, self.slot.settling());
                self.client.conn.spawn_cleanup(async move {
                    settle(acquirer, releaser, gate, lease_ms, settling).await;
                });
            }
        }
        Some(outcome)
    }
}

/// Runs `step`, giving up at `deadline` (if any): `None` when the deadline came first.
pub(crate) async fn within<T>(
    deadline: Option<Instant>,
    step: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, step).await.ok(),
        None => Some(step.await),
    }
}

/// What one wait-loop step came to.
enum Step {
    /// Acquired, by the attempt sent at this instant.
    Acquired(Instant),
    /// Busy: pause like this.
    Busy(Pause),
    /// Nothing tried yet: pause like this first.
    Pause(Pause),
}

/// What went wrong in one wait-loop step.
enum Failure {
    Subscribe(Error),
    Attempt(Error),
}

impl Failure {
    /// The error that ends the wait, if this failure is not worth retrying. A
    /// subscription can always be asked again after a transport failure, and so
    /// can an acquire: one that surely did not run may simply be repeated, and one
    /// that may have run is being settled (its owner's next attempt waits for
    /// that), so repeating it cannot count a hold twice.
    fn fatal(self) -> Option<Error> {
        match self {
            Failure::Subscribe(e) | Failure::Attempt(e) if e.is_transient() => None,
            other => Some(other.into_error()),
        }
    }

    fn into_error(self) -> Error {
        match self {
            Failure::Subscribe(e) | Failure::Attempt(e) => e,
        }
    }
}

/// A fair waiter's place in line, left on every way out but success: `keep()`
/// (acquired: the acquire consumed it) disarms it, `leave()` leaves now, and a
/// dropped future leaves from the client's thread. A failure to leave leaves the
/// place to expire at its deadline, when the queue skips it.
fn queue_place(client: &ClientInner, acquirer: &Arc<dyn Acquirer>, queued: bool) -> OnDrop {
    if !(queued && acquirer.queues()) {
        return OnDrop::disarmed();
    }
    let (acquirer, conn) = (acquirer.clone(), client.conn.clone());
    OnDrop::armed(&client.conn, async move {
        if let Err(e) = acquirer.clone().abandon(conn).await {
            crate::trace::warn_event!(
                "fair lock {:?}: leaving the queue failed (the place expires at its deadline): {e}",
                acquirer.name()
            );
        }
    })
}

/// Runs one attempt with the owner's `gate` held; hands the gate back with the
/// outcome. If this future is dropped while the attempt is in flight, the attempt
/// is finished in a task of its own, which keeps the gate and then settles the
/// owner's count (releasing a hold it took, leaving a queue place it may have
/// taken), since nobody is left to receive it.
fn attempt(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    lease_ms: u64,
    queue: bool,
    gate: Gate,
) -> Gated<Option<BusyTtl>> {
    Gated::new(
        acquirer
            .clone()
            .attempt(client.conn.clone(), lease_ms, queue),
        gate,
        acquirer,
        &client.releaser,
        lease_ms,
        client.ledger.settling(),
    )
}
