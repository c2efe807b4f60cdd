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
use crate::transport::scripts::BusyTtl;

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
}

impl Sleeper {
    pub(super) fn new(recheck: Duration) -> Self {
        Sleeper {
            poll_turn: None,
            poll_backoff: NO_TTL_POLL_FIRST,
            recheck,
        }
    }

    /// How to sleep after `pause`: for a known length, or, while another
    /// waiter of this client polls, until a message or the turn to poll. A
    /// waiter on no channel (a spin lock's) has no poll turn to share: it polls
    /// at the slowest pace.
    fn nap<'s>(&mut self, pause: Pause, subscription: Option<&'s Subscription>) -> Nap<'s> {
        match (pause, subscription) {
            (Pause::For(sleep), _) => {
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
        }
    }
}
