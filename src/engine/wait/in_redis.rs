//! The wait in Redis, the one loop every kind waits in: locks, the spin lock,
//! the semaphores and the latch. A kind brings its attempts ([`Tries`]) and
//! how its waiters wait ([`Waits`]); what an owner keeps around an attempt (its
//! gate, its settle, the hold's validity and renewal) wraps
//! the attempt (`wait/lock.rs`), not this loop.
//!
//! One wait runs in phases, each a method of [`InRedis`], which carries what
//! they share (the local line's turn, a queue place, the failure count):
//!
//! ```text
//! hold_back / early subscription ─▶ first attempt ─▶ got it ─▶ done
//!                                        │ busy
//!                  listen (no channel for the spin lock), then loop:
//!                    arm wake-up ─▶ step (pause first, or attempt) ─▶ settle
//!                    the outcome (got it, pause, retry, fail) ─▶ sleep until
//!                    woken, the pause (TTL, hint, back-off) or the deadline
//! ```
//!
//! Every way out but success runs `leave` (a fair waiter's queue place), and
//! a dropped future runs it from the client's thread.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::pause::{Pause, Sleeper};
use super::step::{within, Failure, Step, Tried, Tries};
use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{Between, Wait, Waits};
use crate::engine::line::{HeldHere, Turn};
use crate::engine::successor::Successor;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::pubsub::{Class, Subscription, WakeToken};

/// How many parked heirs' channels a fair head subscribes with its own while
/// its client's waiters alternate with other clients' (see
/// [`InRedis::subscribe`]): one SUBSCRIBE for every four heads, and at most
/// three channels a lock kept for waiters that do not listen yet.
const LISTEN_AHEAD: usize = 3;

/// How long a fair head behind a hold of its own client's sleeps without
/// listening on its channel, at most (see [`InRedis::defers_listening`]):
/// that hold's release grants it the lock or tells it to try, and under
/// short holds (one client's tasks taking turns) that comes first, with no
/// SUBSCRIBE. Anything else that frees the lock meanwhile (a force, a lost
/// key) is found when it then subscribes and tries: this late at most.
const DEFER_LISTENING_AT_MOST: Duration = Duration::from_millis(20);

/// Notified by nobody: what a waiter on no channel (a spin lock's) is woken by.
/// Static, so that it costs a waiter nothing.
static NEVER: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// One wait in Redis, between its phases.
pub(crate) struct InRedis<'a> {
    client: &'a Arc<Engine>,
    /// The object's name: waiters of one name and client share a subscription.
    name: &'a Arc<str>,
    /// The channel whose messages say that trying again may succeed.
    channel: &'a str,
    /// How the kind's waiters wait, asked once.
    waits: Waits,
    wait: Wait,
    deadline: Option<Instant>,
    head: Option<&'a Turn>,
    /// A fair head offered as the heir of this client's releases: what a
    /// release tells it wakes it, and a grant is taken without a command.
    heir: Option<&'a Arc<Successor>>,
    /// A fair head behind a hold of its own client's does not listen yet
    /// (see [`InRedis::defers_listening`]), for its first sleep only.
    deferring: bool,
    /// The task before in the local line left holding the lock.
    after_holder: Option<HeldHere>,
    /// What a waiter undoes on every way out but success (a fair waiter's
    /// place in line).
    leave: OnDrop,
    /// Transient failures in a row.
    failures: u32,
    /// Busy replies so far, for a spin lock's back-off.
    spins: u32,
}

/// What the first attempt leaves to do: the pause its busy reply asks for
/// (none after a transient failure or a hold-back), or, as the error, the
/// wait's end.
type FirstOutcome<T> = std::result::Result<Option<Pause>, Result<Option<T>>>;

/// A subscription a wait begins with: made while parked in the local line,
/// or before a fair waiter's join.
pub(crate) struct Listening {
    pub(crate) subscription: Subscription,
    /// The fair waiter's join went out with this subscription confirmed: it
    /// was the attempt a new subscription must be followed by.
    pub(crate) joined: Option<JoinedListening>,
}

/// A busy join sent with the subscription confirmed (see [`FirstSent`]),
/// asking for `pause`.
pub(crate) struct JoinedListening {
    pub(crate) sent: FirstSent,
    pub(crate) pause: Pause,
}

/// When a wait's first attempt (or the join that was it) went out, and on
/// which connection: a busy reply to it may skip the attempt that must
/// follow a new subscription only if the channel was confirmed before it
/// went out, and no reconnect came since (see [`InRedis::sleep_first`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstSent {
    pub(crate) epoch: u64,
    pub(crate) at: Instant,
}

impl FirstSent {
    /// Now, on `client`'s current connection.
    pub(crate) fn now(client: &Engine) -> FirstSent {
        FirstSent {
            epoch: client.pubsub.connection_epoch(),
            at: Instant::now(),
        }
    }
}

impl From<Subscription> for Listening {
    fn from(subscription: Subscription) -> Self {
        Listening {
            subscription,
            joined: None,
        }
    }
}

/// Where a wait waits and how long: the object, and the wait's bounds.
pub(crate) struct Place<'a> {
    pub(crate) client: &'a Arc<Engine>,
    pub(crate) name: &'a Arc<str>,
    pub(crate) channel: &'a str,
    pub(crate) waits: Waits,
    /// The wait and its deadline, as [`Wait::start`] gave them.
    pub(crate) wait: (Wait, Option<Instant>),
}

impl<'a> InRedis<'a> {
    /// A wait at `place`. `head`: its turn at the head of the local line (it
    /// says there by when it acts next, counts it among the lock's waiters, and
    /// tells whether the task before left holding the lock). `leave`: run on
    /// every way out but success.
    pub(crate) fn new(place: Place<'a>, head: Option<&'a Turn>, leave: OnDrop) -> Self {
        let Place {
            client,
            name,
            channel,
            waits,
            wait: (wait, deadline),
        } = place;
        InRedis {
            client,
            name,
            channel,
            waits,
            wait,
            deadline,
            head,
            after_holder: head.and_then(Turn::held_here_until),
            heir: head.and_then(Turn::heir),
            deferring: false,
            leave,
            failures: 0,
            spins: 0,
        }
    }

    /// Waits until `tries` gets what it tries for: `Ok(None)` when the time ran
    /// out (or, for a one-off try, at the first busy reply). `listening`: a
    /// subscription made while parked in the local line, or before a fair
    /// waiter's join (which was then its first attempt).
    // Not an `async fn`, which would keep `listening` twice (as the argument
    // and as the body's local) for the whole wait.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn run<'s, T: Tries>(
        &'s mut self,
        tries: &'s T,
        listening: Option<Listening>,
    ) -> impl Future<Output = Result<Option<T::Got>>> + 's + use<'s, 'a, T> {
        async move {
            let hold_back = self.hold_back();
            self.deferring = self.defers_listening(hold_back, listening.is_some());
            let (early, joined) = match listening {
                Some(Listening {
                    subscription,
                    joined,
                }) => (self.early_subscription(Some(subscription)), joined),
                None => (self.early_subscription(None), None),
            };
            // Held back, it makes no first attempt, so nothing waits for the
            // subscription's confirmation: it sleeps at once, on its channel
            // (once confirmed) and on its client's release (a fair head), and
            // a grant is taken without waiting for a SUBSCRIBE's round trip.
            let confirm_first = early.as_ref().filter(|_| hold_back.is_none());
            if let Some(early) = confirm_first {
                if within(self.deadline, Box::pin(self.confirmed(early)))
                    .await
                    .is_none()
                {
                    // Out of time before the first attempt: a fair head joined
                    // while parked, and leaves its place; any other waiter has
                    // no place yet.
                    if self.head.is_some() {
                        return self.give_up().await;
                    }
                    self.leave.disarm();
                    return Ok(None);
                }
            }
            // When and on which connection the first attempt goes out (see
            // `sleep_first`). A join made with the subscription confirmed was
            // that attempt.
            let sent;
            let first_pause = match joined.filter(|_| early.is_some() && hold_back.is_none()) {
                Some(joined) => {
                    sent = joined.sent;
                    Some(joined.pause)
                }
                None => {
                    sent = FirstSent::now(self.client);
                    match self.first_attempt(tries, hold_back).await {
                        Ok(pause) => pause,
                        Err(done) => return done,
                    }
                }
            };
            if self.expired() {
                return self.give_up().await;
            }
            self.listen(tries, (early, sent), first_pause, hold_back)
                .await
        }
    }

    /// Does this wait try more than once (so that a fair waiter joins the
    /// queue)? Not the kind's `waits.queues()`: whether the kind has a queue.
    fn keeps_trying(&self) -> bool {
        !matches!(self.wait, Wait::Once)
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
                .then(|| self.client.handoffs.hold_back_until(self.name))
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
        if self.deferring || self.granted() {
            return listening;
        }
        listening.or_else(|| {
            // Behind others of this client, or a head of its fair line (whose
            // entry is in line already: it joined while parked).
            let in_line_already = self.head.is_some();
            let ahead = in_line_already || self.client.lines.waiting(self.name) > 0;
            let fair_will_wait = self.keeps_trying() && self.waits.queues() && ahead;
            fair_will_wait.then(|| self.subscribe())
        })
    }

    /// A fair head behind a hold of this client's own, with no subscription
    /// yet: that hold's release grants it the lock or tells it to try (see
    /// `successor.rs`), so under short holds it need not subscribe at all.
    /// It defers its SUBSCRIBE for its first sleep, at most
    /// [`DEFER_LISTENING_AT_MOST`]; then it subscribes, and tries once
    /// confirmed, so that a freeing its client's release did not make (a
    /// force, a lost key) costs that much, never the hold's lease. (It once
    /// deferred for the whole lease, deaf to anything but its client's
    /// release: a force-unlock's message reached nobody, 29.4 s.)
    ///
    /// Not when it listens already (subscribed before it joined, or ahead for
    /// it while parked): that subscription is kept, and a release that passes
    /// it over leaves it asleep on it. Not while this client's releases pass
    /// their heirs over (its waiters alternate in Redis's line with other
    /// clients'): then it listens at once, so that such a release finds it
    /// listening and the next message to it is its turn's.
    fn defers_listening(&self, hold_back: Option<Instant>, listening: bool) -> bool {
        hold_back.is_some()
            && !listening
            && self.heir.is_some_and(|heir| !heir.has_listening_ahead())
            && self.after_holder.is_some()
            && self.client.handoffs.grants(self.name)
    }

    /// Whether a grant waits for this head (then no command is needed).
    fn granted(&self) -> bool {
        self.heir.is_some_and(|heir| heir.has_grant())
    }

    /// This waiter's subscription: a fair head's made for it while it was
    /// parked, if any; otherwise a new one. While its client's releases pass
    /// their heirs over, a fair head subscribes the next few parked heirs'
    /// channels with its own, in one SUBSCRIBE: each of them is head in turn,
    /// and would otherwise send its own.
    fn subscribe(&self) -> Subscription {
        if let Some(ahead) = self.heir.and_then(|heir| heir.take_listening_ahead()) {
            return ahead;
        }
        let pubsub = &self.client.pubsub;
        let own = pubsub.subscribe(self.channel, self.name, self.waits.class);
        let alternating = self.heir.is_some() && !self.client.handoffs.grants(self.name);
        if alternating && crate::engine::heuristics::heuristics().listen_ahead {
            for heir in self
                .client
                .lines
                .heirs_to_listen_ahead(self.name, LISTEN_AHEAD)
            {
                let target = heir.target();
                heir.listen_ahead(pubsub.subscribe(target.channel(), self.name, self.waits.class));
            }
        }
        own
    }

    /// Waits for `subscription` to be confirmed.
    async fn confirmed(&self, subscription: &Subscription) -> Result<()> {
        // A head leaves word while its server has yet to confirm, and is due a
        // reply timeout from the confirmation: 10,000 heads subscribing behind
        // a burst of joins wait longer than that, and looked unpolled to
        // `Lines::supervise`, which sent their lines' parked waiters to wait
        // in Redis on their own (twice the memory each).
        let pending = self.head.filter(|_| !subscription.is_ready());
        if let Some(head) = pending {
            head.confirming(subscription.confirming());
        }
        let confirmed = subscription.ready().await;
        if let Some(head) = pending {
            head.confirmed(Instant::now() + self.client.config.timeout);
        }
        confirmed
    }

    /// The uncontended path: one attempt, no subscription. However short the
    /// wait, this first attempt is made (bounded by the response timeout), as
    /// Redisson does; a one-off try waits that long at most for another attempt
    /// of its owner. Held back, it is not made (the wait starts asleep).
    async fn first_attempt<T: Tries>(
        &mut self,
        tries: &T,
        hold_back: Option<Instant>,
    ) -> FirstOutcome<T::Got> {
        if hold_back.is_some() {
            return Ok(None);
        }
        let first_deadline = self.deadline.or_else(|| {
            matches!(self.wait, Wait::Once).then(|| Instant::now() + self.client.config.timeout)
        });
        // Boxed here and below: a waiter's future is as large as its largest
        // state, and an attempt in flight is large but brief; boxing it keeps a
        // sleeping waiter small (many thousands may sleep at once).
        let outcome = Box::pin(tries.attempt(self.keeps_trying(), first_deadline)).await;
        match outcome {
            None => Err(self.give_up().await),
            Some(Ok(Tried::Got(got))) => Err(Ok(Some(self.got(got)))),
            Some(Ok(Tried::Busy(pause))) if self.keeps_trying() => Ok(Some(self.in_order(pause))),
            Some(Ok(Tried::Busy(_))) => Err(Ok(None)),
            Some(Err(e)) if self.keeps_trying() && e.is_transient() => {
                // Surely not run, or being settled: try again after a pause.
                self.attempt_failed(&e);
                self.failures += 1;
                Ok(None)
            }
            Some(Err(e)) => Err(self.fail(e).await),
        }
    }

    /// Waits on the kind's channel (a spin lock: on its back-off alone):
    /// attempts, and sleeps until woken (or the pause the busy reply asked for,
    /// or the deadline, or the re-check interval) in between.
    async fn listen<T: Tries>(
        &mut self,
        tries: &T,
        (early, sent): (Option<Subscription>, FirstSent),
        first_pause: Option<Pause>,
        hold_back: Option<Instant>,
    ) -> Result<Option<T::Got>> {
        // Counted as waiting already if it came through the local line.
        let _waiting = self
            .head
            .is_none()
            .then(|| self.client.lines.join(self.name));
        // A spin lock's waiters listen on no channel: its back-off wakes them.
        let spins = matches!(self.waits.between, Between::Spins(_));
        let mut subscription = early;
        // The first pass's pause, decided once its wake-up is armed.
        let mut first = Some(first_pause);
        // A wake-up this waiter took and has not acted on yet: passed on to
        // another waiter of this client if it never does.
        let mut unused_wake: Option<WakeToken> = None;
        let mut sleeper = Sleeper::new(self.client.config.recheck_interval);
        loop {
            // Listening from the start, unless a grant waits (a fair head
            // granted before it came to its turn takes it without one) or it
            // defers its first sleep's.
            if subscription.is_none() && !spins && !self.deferring && !self.granted() {
                subscription = Some(self.subscribe());
            }
            if let (Some(heir), Some(subscription)) = (self.heir, &subscription) {
                // A release that names it reads from the subscription itself
                // whether every later message to it reaches it.
                heir.listens_on(subscription);
            }
            // Armed before the attempt: a message published between the
            // attempt's reply and the sleep below still wakes this waiter.
            let mut woken = std::pin::pin!(match &subscription {
                Some(subscription) => subscription.notified(),
                None => NEVER.notified(),
            });
            woken.as_mut().enable();
            sleeper.attempt_sent(subscription.as_ref());
            let mut told = std::pin::pin!(self.heir.map(|heir| heir.notified()));
            if let Some(told) = told.as_mut().as_pin_mut() {
                told.enable();
            }
            let word = std::sync::atomic::AtomicBool::new(false);
            let woken = std::pin::pin!(woken_or_told(woken, told, &word));
            self.due(Instant::now() + self.client.config.timeout);
            let pause_first = first.take().and_then(|first_pause| {
                self.first_pause(subscription.as_ref(), sent, first_pause, hold_back)
            });
            let step = Box::pin(self.step(tries, subscription.as_ref(), pause_first));
            let stepped = within(self.deadline, step).await;
            // An attempt went out (or the wait ended): a wake-up it took is used.
            if let Some(used) = unused_wake.take().filter(|_| stepped.is_some()) {
                used.used();
            }
            let pause = match stepped {
                None => break,
                Some(Ok(Step::Got(got))) => {
                    self.client.handoffs.taken(self.name);
                    return Ok(Some(self.got(got)));
                }
                Some(outcome) => match self.after_step(outcome) {
                    Ok(pause) => pause,
                    Err(e) => return self.fail(e).await,
                },
            };
            // In its lock's order of clients, it tries when its client's turn
            // comes: no jitter then (it is the one the release named).
            let in_order = matches!(pause, Pause::Behind { .. });
            let slept = sleeper
                .sleep(pause, subscription.as_ref(), woken, self.deadline, |by| {
                    self.due(by)
                })
                .await;
            let told = word.load(std::sync::atomic::Ordering::Relaxed);
            // A deferred subscription is made for the next pass, which tries
            // once it is confirmed.
            self.deferring = false;
            // A message's wake-up goes to one waiter of this client (a
            // `notify_one`): if this one leaves before its next attempt (out of
            // time now, dropped in the jitter), another must have it.
            unused_wake = subscription
                .as_ref()
                .filter(|_| slept.woken && !told)
                .map(Subscription::wake_token);
            if slept.woken && !in_order && self.wants_wake_jitter(slept.at) {
                crate::engine::handoff::wake_jitter().await;
            }
            if self.expired() {
                break;
            }
        }
        drop(unused_wake);
        self.give_up().await
    }

    /// What the first pass does before any attempt: sleep behind a hand-off
    /// or a hold of this client's (`hold_back`), or after a busy first
    /// attempt since which nothing can have been missed ([`Self::sleep_first`]).
    /// Decided with the wake-up armed, so that a reconnect after it wakes
    /// this waiter, and one before it shows in the connection epoch.
    fn first_pause(
        &mut self,
        subscription: Option<&Subscription>,
        sent: FirstSent,
        first_pause: Option<Pause>,
        hold_back: Option<Instant>,
    ) -> Option<Pause> {
        let pause = match (hold_back, subscription) {
            // Held back behind a hand-off or a hold: sleep until woken or the
            // window closes (a fair head: at most its longest sleep, so that
            // it keeps its place in line fresh).
            (Some(until), _) => {
                let left = until.saturating_duration_since(Instant::now());
                let left = self.waits.max_sleep().map_or(left, |most| left.min(most));
                Some(Pause::For(match self.deferring {
                    true => left.min(DEFER_LISTENING_AT_MOST),
                    false => left,
                }))
            }
            (None, Some(subscription)) => self.sleep_first(subscription, sent, first_pause),
            (None, None) => first_pause.map(|pause| self.spun(pause)),
        };
        pause.filter(|_| self.trusts_hold_back(subscription, hold_back))
    }

    /// Whether to sleep before the second attempt, after the busy first one
    /// that went out as `sent` says. On a new subscription the attempt must
    /// follow its confirmation, or a release in between would be lost. But if
    /// the channel was confirmed before the first attempt went out (subscribed
    /// early by this waiter, or by others of this client: a channel is shared)
    /// and no reconnect came since, every release after that attempt published
    /// to this client, and its message wakes one waiter of the lock here or
    /// leaves a wake-up for the next to listen, which then tries: nothing can
    /// have been missed, so sleep first and skip the immediate second attempt.
    ///
    /// Subscribed, or ready now, is not enough: a release that ran between the
    /// attempt and the confirmation published to nobody, and a waiter asleep
    /// on it slept out the holder's whole lease.
    ///
    /// Only for a waiter whose wake-up is kept for it: an exclusive waiter's
    /// (a message wakes one waiter, or is kept for the next to listen, and
    /// only one could use it), or a counted one's at the head of its client's
    /// line (a one-permit semaphore: the client's one waiter in Redis). Not a
    /// shared waiter's (a "wake all", a write release, wakes only those already
    /// listening), nor a counted waiter's among others of its client (several
    /// permits freed before they listen leave one wake-up between them).
    fn sleep_first(
        &self,
        subscription: &Subscription,
        sent: FirstSent,
        first_pause: Option<Pause>,
    ) -> Option<Pause> {
        let kept_for_it = match self.waits.class {
            Class::Exclusive => true,
            Class::Counted => self.head.is_some(),
            Class::Shared | Class::All | Class::Addressed => false,
        };
        let missed_nothing = kept_for_it
            && subscription.confirmed_before(sent.at)
            && self.client.pubsub.connection_epoch() == sent.epoch;
        first_pause
            .filter(|_| crate::engine::heuristics::heuristics().sleep_first)
            .filter(|_| missed_nothing)
    }

    /// A hold-back behind the local holder is trusted only while the
    /// subscription is the one that holder saw confirmed: after a reconnect, or
    /// the channel left and subscribed again, its release's message may have
    /// been missed, so try instead.
    fn trusts_hold_back(
        &self,
        subscription: Option<&Subscription>,
        hold_back: Option<Instant>,
    ) -> bool {
        self.after_holder
            .as_ref()
            .filter(|_| hold_back.is_some())
            .is_none_or(|held| match &held.mark {
                Some(mark) => subscription.is_some_and(|s| s.still(mark)),
                // A fair head: the holder's release grants it the lock or
                // tells it to try, whatever became of any subscription.
                None => self.heir.is_some(),
            })
    }

    /// One step of the loop: the pause to take first, if any, or an attempt
    /// once the subscription (if any) is confirmed.
    async fn step<T: Tries>(
        &self,
        tries: &T,
        subscription: Option<&Subscription>,
        pause_first: Option<Pause>,
    ) -> std::result::Result<Step<T::Got>, Failure> {
        if let Some(pause) = pause_first {
            return Ok(Step::Pause(pause));
        }
        if let Some(subscription) = subscription {
            if !self.granted() {
                self.confirmed(subscription)
                    .await
                    .map_err(Failure::Subscribe)?;
            }
        }
        match tries.attempt(true, None).await {
            Some(Ok(Tried::Got(got))) => Ok(Step::Got(got)),
            Some(Ok(Tried::Busy(pause))) => Ok(Step::Busy(pause)),
            Some(Err(e)) => Err(Failure::Attempt(e)),
            None => Err(Failure::Attempt(Error::unexpected(
                "wait attempt",
                "the owner's gate closed",
            ))),
        }
    }

    /// What a step that did not succeed comes to: the pause before the next,
    /// or the error that ends the wait. A transient failure is retried after a
    /// pause drawn with full jitter up to `retry_interval`, so waiters that
    /// failed together retry apart.
    fn after_step<G>(&mut self, outcome: std::result::Result<Step<G>, Failure>) -> Result<Pause> {
        match outcome {
            Ok(Step::Busy(pause)) => {
                self.failures = 0;
                Ok(self.spun(self.in_order(pause)))
            }
            Ok(Step::Pause(pause)) => Ok(pause),
            Ok(Step::Got(_)) => Err(Error::unexpected("wait", "succeeded twice")),
            Err(failure) if self.may_retry() => {
                if let Failure::Attempt(e) = &failure {
                    self.attempt_failed(e);
                }
                if let Some(e) = failure.fatal() {
                    return Err(e);
                }
                self.failures += 1;
                let retry = self.client.config.retry_interval;
                Ok(Pause::For(crate::engine::retry::jitter(retry)))
            }
            Err(failure) => Err(failure.into_error()),
        }
    }

    /// A busy reply's pause behind the clients ahead in the lock's order is
    /// kept only by its client's one waiter in Redis for the lock (the head of
    /// its local line): it alone hears every message. Any other shares them,
    /// and tries on each.
    fn in_order(&self, pause: Pause) -> Pause {
        match self.head {
            Some(_) => pause,
            None => pause.shared(),
        }
    }

    /// The pause after a busy reply: as the reply asked, or, for a spin lock,
    /// its back-off's next.
    fn spun(&mut self, pause: Pause) -> Pause {
        match self.waits.between {
            Between::Spins(backoff) => {
                let next = backoff.pause(self.spins);
                self.spins = self.spins.saturating_add(1);
                Pause::For(next)
            }
            Between::Listens | Between::Queues { .. } => pause,
        }
    }

    /// Woken by another client's release (at `slept_at` or later): so was one
    /// waiter of every client listening, and the message reached them in the
    /// order they subscribed, so the same clients would win every race. A random
    /// pause of a few round trips' worth evens the odds (see `line.rs`). Not
    /// after this client's own release: then this waiter is the one the
    /// hand-off is for.
    fn wants_wake_jitter(&self, slept_at: Instant) -> bool {
        crate::engine::heuristics::heuristics().wake_jitter
            && self.waits.barges()
            && !self.client.handoffs.released_since(self.name, slept_at)
    }

    /// An attempt failed with `e`: if its outcome is unknown, it is being
    /// settled, which leaves a fair waiter's place in line; a head of a fair
    /// line then no longer stands ahead of its parked waiters in Redis, so the
    /// line lets them wait on their own (see [`Turn::lost_place`]).
    fn attempt_failed(&self, e: &Error) {
        let settled = !e.is_surely_not_executed() && !e.is_definite_refusal();
        if let Some(head) = self.head.filter(|_| settled && self.waits.queues()) {
            head.lost_place();
        }
    }

    fn may_retry(&self) -> bool {
        self.failures < self.client.config.retry_attempts
    }

    /// Got it: nothing to leave.
    fn got<G>(&mut self, got: G) -> G {
        self.leave.disarm();
        got
    }

    /// Out of time (or of turns): leave the queue place, if any.
    async fn give_up<G>(&mut self) -> Result<Option<G>> {
        self.leave.run_now().await;
        Ok(None)
    }

    /// Ended by `e`: leave the queue place, if any.
    async fn fail<G>(&mut self, e: Error) -> Result<Option<G>> {
        self.leave.run_now().await;
        Err(e)
    }
}

/// Completes when a sleeping waiter is woken: by a message (`woken`), or by
/// word from its client's release (`told`, a fair head offered as heir),
/// which it records in `word`.
fn woken_or_told<'p, A: Future, B: Future>(
    mut woken: std::pin::Pin<&'p mut A>,
    mut told: std::pin::Pin<&'p mut Option<B>>,
    word: &'p std::sync::atomic::AtomicBool,
) -> impl Future<Output = ()> + 'p {
    std::future::poll_fn(move |cx| {
        if woken.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(());
        }
        let told = told.as_mut().as_pin_mut();
        if told.is_some_and(|told| told.poll(cx).is_ready()) {
            word.store(true, std::sync::atomic::Ordering::Relaxed);
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    })
}
