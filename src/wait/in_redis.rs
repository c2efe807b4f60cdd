//! The wait in Redis: attempts, and sleeps on the lock's channel in between.
//!
//! One acquisition's wait runs in phases, each a method of [`InRedis`], which
//! carries what they share (the owner's slot, the watchdog registration, a fair
//! waiter's place in line, the failure count):
//!
//! ```text
//! hold_back / early subscription ─▶ first attempt ─▶ acquired ─▶ hold
//!                                        │ busy
//!                  spin lock? ── yes ─▶ spin: back off, attempt, repeat
//!                                        │ no
//!                  listen: subscribe, then loop:
//!                    arm wake-up ─▶ step (pause first, or attempt) ─▶ settle
//!                    the outcome (acquired, pause, retry, fail) ─▶ sleep
//! ```
//!
//! Every way out but success gives the queue place back (`give_up`, `fail`),
//! and a dropped future gives it back from the client's thread.

use std::sync::Arc;

use tokio::time::Instant;

use super::attempts::{queue_place, within, Attempts, Failure, Step};
use super::pause::{Pause, Sleeper};
use super::{Hold, Terms};
use crate::cleanup::OnDrop;
use crate::client::ClientInner;
use crate::contract::{Acquirer, Between, Drawn, Wait, Waits};
use crate::error::{Error, Result};
use crate::ledger::Slot;
use crate::line::{HeldHere, Turn};
use crate::lock::BackOff;
use crate::pubsub::{Class, Subscription};
use crate::scripts::BusyTtl;
use crate::validity::{Drift, Validity};
use crate::watchdog::Registration;

/// The wait in Redis. `listening`: a subscription made while parked in the
/// local line; `head`: its turn at the head of the line (it says there by when
/// it acts next, counts it among the lock's waiters, and tells whether the task
/// before left holding the lock).
pub(super) async fn wait_in_redis(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    terms: Terms,
    (wait, deadline): (Wait, Option<Instant>),
    listening: Option<Subscription>,
    head: Option<&Turn>,
) -> Result<Option<Hold>> {
    // Kept here, and lent to each phase: a phase that took it by value would
    // make this future carry it twice (a moved-from local keeps its space).
    let mut waiter = InRedis::new(client, acquirer, terms, (wait, deadline), head);
    let hold_back = waiter.hold_back();
    let early = waiter.early_subscription(listening);
    if let Some(early) = &early {
        if within(deadline, Box::pin(early.ready())).await.is_none() {
            // Out of time before joining the line: there is no place to leave.
            waiter.place.disarm();
            return Ok(None);
        }
    }
    // The connection as the first attempt goes out: a subscription made early
    // missed nothing if no reconnect came between.
    let epoch = client.pubsub.connection_epoch();
    let first_ttl = match waiter.first_attempt(hold_back).await {
        Ok(ttl) => ttl,
        Err(done) => return done,
    };
    if waiter.expired() {
        return waiter.give_up().await;
    }
    match waiter.waits.between {
        Between::Spins(backoff) => waiter.spin(backoff).await,
        Between::Listens | Between::Queues { .. } => {
            waiter.listen((early, epoch), first_ttl, hold_back).await
        }
    }
}

/// One acquisition's wait in Redis, between its phases.
struct InRedis<'a> {
    client: &'a Arc<ClientInner>,
    acquirer: &'a Arc<dyn Acquirer>,
    /// How the kind's waiters wait, asked once.
    waits: Waits,
    terms: Terms,
    wait: Wait,
    deadline: Option<Instant>,
    head: Option<&'a Turn>,
    /// The task before in the local line left holding the lock.
    after_holder: Option<HeldHere>,
    slot: Arc<Slot>,
    /// The watchdog's registration, activated by the hold it renews.
    registration: Option<Registration>,
    /// A fair waiter's place in line, left on every way out but success.
    place: OnDrop,
    /// Transient failures in a row.
    failures: u32,
}

/// What the first attempt leaves to do: the busy TTL it saw (none after a
/// transient failure or a hold-back), or, as the error, the wait's end.
type FirstOutcome = std::result::Result<Option<BusyTtl>, Result<Option<Hold>>>;

impl<'a> InRedis<'a> {
    fn new(
        client: &'a Arc<ClientInner>,
        acquirer: &'a Arc<dyn Acquirer>,
        terms: Terms,
        (wait, deadline): (Wait, Option<Instant>),
        head: Option<&'a Turn>,
    ) -> Self {
        let (field, kind) = acquirer.renewal();
        let slot = client.ledger.slot(&acquirer.target().name, field);
        let registration = terms
            .renewed
            .then(|| client.watchdog.register(acquirer.name(), field, kind));
        let waits = acquirer.waits();
        let keeps_trying = !matches!(wait, Wait::Once);
        // A fair waiter may hold a place in line from its first attempt on.
        let place = queue_place(client, acquirer, keeps_trying && waits.queues());
        InRedis {
            client,
            acquirer,
            waits,
            terms,
            wait,
            deadline,
            head,
            after_holder: head.and_then(Turn::held_here_until),
            slot,
            registration,
            place,
            failures: 0,
        }
    }

    fn lock_name(&self) -> &'a Arc<str> {
        &self.acquirer.target().name
    }

    /// Does this wait try more than once (so that a fair waiter joins the
    /// queue)? Not the kind's `waits.queues()`: whether the kind has a queue.
    fn keeps_trying(&self) -> bool {
        !matches!(self.wait, Wait::Once)
    }

    fn attempts(&self) -> Attempts<'a> {
        Attempts {
            client: self.client,
            acquirer: self.acquirer,
            slot: self.slot.clone(),
            lease_ms: self.terms.lease_ms,
        }
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// At the head of the local line: say by when this waiter acts next, so a
    /// future no longer polled is noticed (`Lines::supervise`).
    fn due(&self, by: Instant) {
        if let Some(head) = self.head {
            head.due(by);
        }
    }

    /// Until when not to try at all: a release by this client just woke a
    /// waiter of this (non-fair) lock, so do not barge past it; or the task
    /// before in the local line holds it, so wait for its release's message
    /// (see `line.rs`). A wait shorter than that makes its one attempt instead.
    fn hold_back(&self) -> Option<Instant> {
        let behind_hand_off = || {
            // Exclusive waiters only: a reader shares the lock with whoever the
            // release woke.
            (self.keeps_trying() && self.waits.barges())
                .then(|| match self.head {
                    Some(head) => head.hold_back_until(),
                    None => self.client.lines.hold_back_until(self.lock_name()),
                })
                .flatten()
        };
        self.after_holder
            .as_ref()
            .map(|held| held.until)
            .or_else(behind_hand_off)
            .filter(|until| self.deadline.is_none_or(|d| d > *until))
    }

    /// The subscription to listen on before the first attempt: the one made
    /// while parked, or, for a fair waiter with others of this client already
    /// in line (it will wait too), a new one, so that nothing can be missed
    /// between its first attempt (which joins the line) and its sleep.
    fn early_subscription(&self, listening: Option<Subscription>) -> Option<Subscription> {
        listening.or_else(|| {
            let fair_behind_others = self.keeps_trying()
                && self.waits.queues()
                && self.client.lines.waiting(self.lock_name()) > 0;
            fair_behind_others.then(|| self.subscribe())
        })
    }

    fn subscribe(&self) -> Subscription {
        self.client
            .pubsub
            .subscribe(self.acquirer.channel(), self.lock_name(), self.waits.class)
    }

    /// The uncontended path: one attempt, no subscription. However short the
    /// wait, this first attempt is made (bounded by the response timeout), as
    /// Redisson does; a one-off try waits that long at most for another attempt
    /// of its owner. Held back, it is not made (the wait starts asleep).
    async fn first_attempt(&mut self, hold_back: Option<Instant>) -> FirstOutcome {
        if hold_back.is_some() {
            return Ok(Some(0));
        }
        let first_deadline = self.deadline.or_else(|| {
            matches!(self.wait, Wait::Once).then(|| Instant::now() + self.client.config.timeout)
        });
        let (sent, epoch) = (Instant::now(), self.client.pubsub.connection_epoch());
        // Boxed here and below: a waiter's future is as large as its largest
        // state, and an attempt in flight is large but brief; boxing it keeps a
        // sleeping waiter small (many thousands may sleep at once).
        let outcome = Box::pin(self.attempts().send(self.keeps_trying(), first_deadline)).await;
        match outcome {
            None => Err(self.give_up().await),
            Some(Ok(Ok(drawn))) => Err(Ok(Some(self.acquired(sent, epoch, drawn)))),
            Some(Ok(Err(ttl))) if self.keeps_trying() => Ok(Some(ttl)),
            Some(Ok(Err(_busy))) => Err(Ok(None)),
            Some(Err(e)) if self.keeps_trying() && e.is_transient() => {
                // Surely not run, or being settled: try again after a pause.
                self.failures += 1;
                Ok(None)
            }
            Some(Err(e)) => Err(self.fail(e).await),
        }
    }

    /// A spin lock: no subscription, no message; back off and retry.
    async fn spin(&mut self, backoff: BackOff) -> Result<Option<Hold>> {
        let mut retry = 0u32;
        loop {
            let pause_until = Instant::now() + backoff.pause(retry);
            retry = retry.saturating_add(1);
            let until = self.deadline.map_or(pause_until, |d| pause_until.min(d));
            tokio::time::sleep_until(until).await;
            if self.expired() {
                break;
            }
            let (sent, epoch) = (Instant::now(), self.client.pubsub.connection_epoch());
            let attempts = self.attempts();
            match within(self.deadline, Box::pin(attempts.send(true, None))).await {
                None => break,
                Some(Some(Ok(Ok(drawn)))) => return Ok(Some(self.acquired(sent, epoch, drawn))),
                Some(Some(Ok(Err(_busy)))) => self.failures = 0,
                Some(Some(Err(e))) if e.is_transient() && self.may_retry() => self.failures += 1,
                Some(Some(Err(e))) => return self.fail(e).await,
                Some(None) => {}
            }
        }
        self.give_up().await
    }

    /// Waits on the lock's channel: attempts, and sleeps until woken (or the
    /// lock's TTL, or the deadline) in between.
    async fn listen(
        &mut self,
        (early, epoch): (Option<Subscription>, u64),
        first_ttl: Option<BusyTtl>,
        hold_back: Option<Instant>,
    ) -> Result<Option<Hold>> {
        let lock_name = self.lock_name();
        // Counted as waiting already if it came through the local line.
        let _waiting = self
            .head
            .is_none()
            .then(|| self.client.lines.join(lock_name));
        let subscribed_early = early.is_some();
        let subscription = early.unwrap_or_else(|| self.subscribe());
        let mut sleep_first = match hold_back {
            // Held back behind a hand-off: sleep until woken or the window closes.
            Some(until) => Some(Pause::For(until.saturating_duration_since(Instant::now()))),
            None => self.sleep_first(&subscription, subscribed_early, epoch, first_ttl),
        };
        let mut sleeper = Sleeper::new();
        loop {
            // Armed before the attempt: an unlock published between the attempt's
            // reply and the sleep below still wakes this waiter.
            let mut woken = std::pin::pin!(subscription.notified());
            woken.as_mut().enable();
            let (sent, epoch) = (Instant::now(), self.client.pubsub.connection_epoch());
            self.due(sent + self.client.config.timeout);
            let pause_first = sleep_first
                .take()
                .filter(|_| self.trusts_hold_back(&subscription, hold_back));
            let step = Box::pin(self.step(&subscription, pause_first, sent));
            let pause = match within(self.deadline, step).await {
                None => break,
                Some(Ok(Step::Acquired(sent, drawn))) => {
                    self.client.lines.taken(lock_name);
                    return Ok(Some(self.acquired(sent, epoch, drawn)));
                }
                Some(outcome) => match self.after_step(outcome) {
                    Ok(pause) => pause,
                    Err(e) => return self.fail(e).await,
                },
            };
            let slept = sleeper
                .sleep(pause, &subscription, woken, self.deadline, |by| {
                    self.due(by)
                })
                .await;
            if slept.woken && self.wants_wake_jitter(slept.at) {
                crate::line::wake_jitter().await;
            }
            if self.expired() {
                break;
            }
        }
        self.give_up().await
    }

    /// Whether to sleep before the second attempt. Joining other waiters of
    /// this client that already listen for this lock (a channel can carry two
    /// locks), right after a failed attempt, nothing can have been missed: an
    /// unlock published since went to one of them (or left a permit for the
    /// next to listen), and that one retries. So sleep first and skip the
    /// immediate second attempt; on a new subscription the attempt must follow
    /// it, or that unlock would be lost. Not for shared waiters: a "wake all"
    /// (write release) that reached the others before this one joined would
    /// leave it asleep on a lock it could share. Subscribed early, nothing can
    /// have been missed if the subscription stood before the attempt and no
    /// reconnect came in between.
    fn sleep_first(
        &self,
        subscription: &Subscription,
        subscribed_early: bool,
        epoch: u64,
        first_ttl: Option<BusyTtl>,
    ) -> Option<Pause> {
        let ready = subscription.is_ready();
        let stood_before =
            subscribed_early && ready && self.client.pubsub.connection_epoch() == epoch;
        let joined_others =
            ready && subscription.joined_others() && self.waits.class == Class::Exclusive;
        first_ttl
            .filter(|_| crate::heuristics::heuristics().sleep_first)
            .filter(|_| stood_before || joined_others)
            .map(|ttl| Pause::after(ttl, self.waits.max_sleep()))
    }

    /// A hold-back behind the local holder is trusted only while the
    /// subscription is the one that holder saw confirmed: after a reconnect, or
    /// the channel left and subscribed again, its release's message may have
    /// been missed, so try instead.
    fn trusts_hold_back(&self, subscription: &Subscription, hold_back: Option<Instant>) -> bool {
        self.after_holder
            .as_ref()
            .filter(|_| hold_back.is_some())
            .is_none_or(|held| subscription.still(&held.mark))
    }

    /// One step of the loop: the pause to take first, if any, or an attempt
    /// once the subscription is confirmed.
    async fn step(
        &self,
        subscription: &Subscription,
        pause_first: Option<Pause>,
        sent: Instant,
    ) -> std::result::Result<Step, Failure> {
        if let Some(pause) = pause_first {
            return Ok(Step::Pause(pause));
        }
        subscription.ready().await.map_err(Failure::Subscribe)?;
        match self.attempts().send(true, None).await {
            Some(Ok(Ok(drawn))) => Ok(Step::Acquired(sent, drawn)),
            Some(Ok(Err(ttl))) => Ok(Step::Busy(Pause::after(ttl, self.waits.max_sleep()))),
            Some(Err(e)) => Err(Failure::Attempt(e)),
            None => Err(Failure::Attempt(Error::unexpected(
                "lock attempt",
                "the owner's gate closed",
            ))),
        }
    }

    /// What a step that did not acquire comes to: the pause before the next,
    /// or the error that ends the wait. A transient failure is retried after a
    /// pause drawn with full jitter up to `retry_interval`, so waiters that
    /// failed together retry apart.
    fn after_step(&mut self, outcome: std::result::Result<Step, Failure>) -> Result<Pause> {
        match outcome {
            Ok(Step::Busy(pause)) => {
                self.failures = 0;
                Ok(pause)
            }
            Ok(Step::Pause(pause)) => Ok(pause),
            Ok(Step::Acquired(..)) => Err(Error::unexpected("lock wait", "acquired twice")),
            Err(failure) if self.may_retry() => {
                if let Some(e) = failure.fatal() {
                    return Err(e);
                }
                self.failures += 1;
                let retry = self.client.config.retry_interval;
                Ok(Pause::For(crate::retry::jitter(retry)))
            }
            Err(failure) => Err(failure.into_error()),
        }
    }

    /// Woken by another client's release (at `slept_at` or later): so was one
    /// waiter of every client listening, and the message reached them in the
    /// order they subscribed, so the same clients would win every race. A random
    /// pause of a few round trips' worth evens the odds (see `line.rs`). Not
    /// after this client's own release: then this waiter is the one the
    /// hand-off is for.
    fn wants_wake_jitter(&self, slept_at: Instant) -> bool {
        crate::heuristics::heuristics().wake_jitter
            && self.waits.barges()
            && !self.client.lines.released_since(self.lock_name(), slept_at)
    }

    fn may_retry(&self) -> bool {
        self.failures < self.client.config.retry_attempts
    }

    /// The hold the attempt sent at `sent` (on connection `epoch`) took, and
    /// what it drew.
    fn acquired(&mut self, sent: Instant, epoch: u64, drawn: Drawn) -> Hold {
        self.place.disarm();
        let drift = Drift {
            factor: self.client.config.clock_drift_factor,
        };
        let validity = Arc::new(Validity::new(sent, self.terms.lease, drift));
        Hold {
            renewal: self
                .registration
                .take()
                .map(|r| r.activate(validity.clone())),
            validity,
            lease_ms: self.terms.lease_ms,
            slot: self.slot.clone(),
            epoch,
            drawn,
        }
    }

    /// Out of time (or of turns): leave the queue place, if any.
    async fn give_up(&mut self) -> Result<Option<Hold>> {
        self.place.run_now().await;
        Ok(None)
    }

    /// Ended by `e`: leave the queue place, if any.
    async fn fail(&mut self, e: Error) -> Result<Option<Hold>> {
        self.place.run_now().await;
        Err(e)
    }
}
