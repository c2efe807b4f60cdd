//! How long a waiter sleeps between two attempts, and the sleep itself: until
//! woken by the lock's channel, the busy TTL or the deadline; for a lock held
//! without expiry (no TTL to sleep out, no message when a foreign writer deletes
//! it), one waiter per lock and client polls with a growing pause while the
//! others wait for a message or their turn to poll.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::MAX_DURATION;
use crate::transport::pubsub::{PollTurn, Subscription};
use crate::transport::scripts::{Busy, BusyTtl};

/// How long a waiter that a release made first in its lock's order of clients
/// sleeps, at most, before it tries: the turn the next release names it for
/// comes with a message, but if the client named before it never came, its
/// turn ends (`lock/client_order.rs`'s `TURN`) with nobody trying and no message;
/// a little longer than a turn, so that it finds that turn over.
const NEXT_IN_TURN_AT_MOST: Duration = Duration::from_millis(25);

/// The first pause when a lock is held without expiry; it doubles up to
/// [`NO_TTL_POLL_MAX`].
const NO_TTL_POLL_FIRST: Duration = Duration::from_millis(50);

/// The longest pause between two polls of a lock held without expiry: a client's
/// one poller notices within this that such a hold was deleted (no unlock message
/// announces it).
const NO_TTL_POLL_MAX: Duration = Duration::from_millis(500);

/// How long to pause after a busy reply.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pause {
    /// At most this long (until woken).
    For(Duration),
    /// The holder set no expiry: one waiter per lock and client polls, with
    /// backoff from [`NO_TTL_POLL_FIRST`] to [`NO_TTL_POLL_MAX`]; the others wait
    /// for an unlock message or for their turn to poll.
    NoTtl,
    /// At most `most`, in the lock's order of clients with `ahead` clients
    /// before this one's (the attempt went out at `sent`): each release names
    /// the first for its turn and publishes one unlock message (`"0"`; a write
    /// release a `"1"` before it), so the releases before this client's turn
    /// are slept through, and the one after which it is first makes it try
    /// within [`NEXT_IN_TURN_AT_MOST`] (see `behind`). Only while
    /// its channel stands confirmed since before `sent` (every message since
    /// reached this client); otherwise a message makes it try, as any
    /// waiter.
    Behind {
        most: Duration,
        ahead: u32,
        sent: Instant,
    },
}

impl Pause {
    /// After a busy reply with `ttl` (`-1`: no expiry, `-2`: gone meanwhile), at
    /// most `cap` if the lock kind has one.
    pub(super) fn after(ttl: BusyTtl, cap: Option<Duration>) -> Pause {
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

    /// After a `busy` reply to an attempt sent at `sent`: [`Pause::after`],
    /// or, with a place in the lock's order, behind the clients ahead.
    pub(super) fn after_busy(busy: Busy, cap: Option<Duration>, sent: Instant) -> Pause {
        match (Pause::after(busy.ttl, cap), busy.ahead) {
            (Pause::For(most), Some(ahead)) => Pause::Behind { most, ahead, sent },
            (pause, _) => pause,
        }
    }

    /// This pause for a waiter that is not its client's one waiter in Redis
    /// for the lock (it shares the messages with others): never behind.
    pub(super) fn shared(self) -> Pause {
        match self {
            Pause::Behind { most, .. } => Pause::For(most),
            other => other,
        }
    }
}

/// How a sleep ended: woken by a message (else its time ran out, or the turn
/// to poll came), and when it began.
pub(super) struct Slept {
    pub(super) woken: bool,
    pub(super) at: Instant,
}

/// One sleep of a waiter: for a known length, or until a message or the turn
/// to poll (a lock held without expiry that another waiter of this client
/// polls).
enum Nap<'s> {
    For(Duration),
    UntilPollTurn(&'s Subscription),
    Behind(Duration, u32, Instant, &'s Subscription),
}

/// One waiter's sleeps: its turn to poll a lock held without expiry, the
/// pause before its next poll, and the longest it sleeps at all.
pub(super) struct Sleeper {
    poll_turn: Option<PollTurn>,
    poll_backoff: Duration,
    /// No sleep lasts longer (`Config::recheck_interval`): a freeing that no
    /// message announces (a `DEL`, a message lost with a connection or a
    /// server's push) costs at most this, not the lease the pause came from.
    recheck: Duration,
    /// The unlock messages its channel had carried when the attempt before
    /// this sleep was sent ([`attempt_sent`](Sleeper::attempt_sent)): a
    /// waiter behind clients counts the releases since.
    heard_before: u64,
}

impl Sleeper {
    pub(super) fn new(recheck: Duration) -> Self {
        Sleeper {
            poll_turn: None,
            poll_backoff: NO_TTL_POLL_FIRST,
            recheck,
            heard_before: 0,
        }
    }

    /// An attempt is about to be sent, listening on `subscription`: the
    /// releases a waiter behind clients counts are those after this.
    pub(super) fn attempt_sent(&mut self, subscription: Option<&Subscription>) {
        self.heard_before = subscription.map_or(0, Subscription::unlocks_heard);
    }

    /// How to sleep after `pause`: for a known length, or, while another
    /// waiter of this client polls, until a message or the turn to poll. A
    /// waiter on no channel (a spin lock's) has no poll turn to share: it polls
    /// at the slowest pace.
    fn nap<'s>(&mut self, pause: Pause, subscription: Option<&'s Subscription>) -> Nap<'s> {
        match (pause, subscription) {
            (Pause::Behind { most, ahead, sent }, Some(subscription)) => {
                self.poll_turn = None;
                self.poll_backoff = NO_TTL_POLL_FIRST;
                Nap::Behind(most, ahead, sent, subscription)
            }
            (Pause::For(sleep) | Pause::Behind { most: sleep, .. }, _) => {
                self.poll_turn = None;
                self.poll_backoff = NO_TTL_POLL_FIRST;
                Nap::For(sleep)
            }
            (Pause::NoTtl, None) => Nap::For(NO_TTL_POLL_MAX),
            (Pause::NoTtl, Some(subscription)) => {
                if self.poll_turn.is_none() {
                    self.poll_turn = subscription.try_poll();
                }
                if self.poll_turn.is_none() {
                    return Nap::UntilPollTurn(subscription);
                }
                let sleep = self.poll_backoff;
                self.poll_backoff = (self.poll_backoff * 2).min(NO_TTL_POLL_MAX);
                Nap::For(sleep)
            }
        }
    }

    /// Sleeps as `pause` says, never past `deadline`, until `woken` (armed
    /// before the attempt) completes; tells `due` by when it acts next.
    pub(super) async fn sleep<F: Future>(
        &mut self,
        pause: Pause,
        subscription: Option<&Subscription>,
        woken: Pin<&mut F>,
        deadline: Option<Instant>,
        due: impl Fn(Instant),
    ) -> Slept {
        let at = Instant::now();
        let recheck = self.recheck;
        let until = |sleep: Duration| {
            let until = at + sleep.min(recheck);
            deadline.map_or(until, |deadline| until.min(deadline))
        };
        match self.nap(pause, subscription) {
            // Woken or timed out, the next step is the same: try again.
            Nap::For(sleep) => {
                let until = until(sleep);
                due(until);
                let woken = tokio::time::timeout_at(until, woken).await.is_ok();
                Slept { woken, at }
            }
            Nap::UntilPollTurn(subscription) => {
                let until = until(MAX_DURATION);
                due(until);
                tokio::select! {
                    _ = woken => {}
                    turn = subscription.poll_turn() => self.poll_turn = Some(turn),
                    _ = tokio::time::sleep_until(until) => {}
                }
                Slept { woken: false, at }
            }
            Nap::Behind(most, ahead, sent, subscription) => {
                let until = until(most);
                due(until);
                if tokio::time::timeout_at(until, woken).await.is_err() {
                    return Slept { woken: false, at };
                }
                let woken =
                    behind(ahead, (self.heard_before, sent), subscription, until, due).await;
                Slept { woken, at }
            }
        }
    }
}

/// A waiter `ahead` places behind in its lock's order of clients (its
/// attempt sent at `sent`, when its channel had carried `heard_before` unlock
/// messages), just woken by a message: sleeps through the releases before
/// its client's turn, until `until` at most. `true` when a message makes it
/// try, `false` when the time does.
///
/// A release is one unlock message (`"0"`), counted on the channel (a write
/// release's `"1"` before it is not a release, and wake-ups merged by the
/// notifier are not lost to the count), and it named the first client in
/// the order: one fewer ahead. Once `ahead` came, this client is first: the
/// next makes it try, or [`NEXT_IN_TURN_AT_MOST`] does; one before that,
/// twice that does (two clients ahead that vanished, each named by a release
/// and never coming, would otherwise leave the lock free with no release to
/// come: a chain of three or more costs a re-check). Counting is trusted
/// only while the channel stands confirmed since before the attempt (no
/// reconnect, no new SUBSCRIBE since: every message reached this client); a
/// message after that makes it try. A client ahead that gives up publishes
/// as it leaves (`lock_leave_order.lua`), so the count stays one per client
/// ahead. A count that is off costs little: too low (a release processed
/// before the attempt and heard after it; a reader's release), an attempt
/// that finds the lock taken and tells the place again; too high by one (a
/// client ahead took the lock out of its turn), the wait for the next
/// release, and [`NEXT_IN_TURN_AT_MOST`] once it counts itself first.
async fn behind(
    ahead: u32,
    (heard_before, sent): (u64, Instant),
    subscription: &Subscription,
    mut until: Instant,
    due: impl Fn(Instant),
) -> bool {
    // The count at which the last try-by bound was set.
    let mut bounded_at = None;
    loop {
        // Armed before anything is decided: a wake-all (a reconnect) between
        // two messages is not missed.
        let mut next = std::pin::pin!(subscription.notified());
        next.as_mut().enable();
        if ahead == 0 || !subscription.confirmed_before(sent) {
            return true;
        }
        let heard = subscription.unlocks_heard().saturating_sub(heard_before);
        let Some(still_ahead) = u64::from(ahead).checked_sub(heard) else {
            // Its own turn's release came.
            return true;
        };
        // First now (or second): if the client named (or the one before
        // this one) never comes, no release follows; this one tries once
        // that turn (or those two) would be over.
        if still_ahead <= 1 && bounded_at != Some(heard) {
            bounded_at = Some(heard);
            let turns = u32::try_from(still_ahead + 1).unwrap_or(2);
            until = until.min(Instant::now() + NEXT_IN_TURN_AT_MOST * turns);
            due(until);
        }
        if tokio::time::timeout_at(until, next).await.is_err() {
            return false;
        }
    }
}
