//! The fair lock's local line: one waiter per client and lock waits in
//! Redis, and the others are parked with their own entries in Redis's queue
//! and nothing else (no subscription, no wait engine, no owner slot).
//!
//! Only one entry per task can be first in Redis's line, and a client's
//! entries stand there in the order of its local line (its waiters join in
//! ticket order, see `join_order.rs`), so only the client's earliest waiter,
//! the line's head, can be granted next: it alone needs to listen and try.
//! Every waiter parks first, even in an empty line: the head too must come in
//! ticket order, or a newcomer could overtake waiters still joining. When the
//! head leaves (holding the lock, or giving up), the next parked one is head
//! and waits in Redis as every fair waiter did before, its entry already in
//! place. Fairness across clients is Redis's queue, as before: every task
//! still has its own entry, joined when it arrived.
//!
//! A waiter alone in its line, for a lock its client found busy in the last
//! second, subscribes before it joins: its join is then the attempt a new
//! subscription must be followed by, and as head it sleeps at once.
//!
//! ```text
//! enter the line (a ticket) ─▶ the ticket's turn ─▶ join (one attempt that
//!   queues) ─▶ the lock was free and nobody in line? ─▶ hold
//!        │ in line
//!  take a place in the line's queue, then let the next ticket join
//!        │
//!  parked (its entry left if dropped or out of time) ─▶ head ─▶ waits in Redis
//! ```

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::attempts::queue_place;
use super::hold::{Hold, Terms};
use super::in_redis::{FirstSent, JoinedListening, Listening};
use super::lock::{join_line, wait_in_redis, Joined};
use super::step::{within, within_boxed};
use crate::engine::contract::{Acquirer, Wait};
use crate::engine::join_order::JoinTicket;
use crate::engine::line::{Entry, HeldHere, LineSpot, Parked, Turn};
use crate::engine::successor::Successor;
use crate::engine::Engine;
use crate::error::Result;
use crate::transport::pubsub::Subscription;

/// A fair waiter's way to its hold: through this client's line for the lock
/// (unless it tries once), then the wait in Redis. The head of the line is
/// offered as the heir of this client's releases; when it leaves holding the
/// lock, the next head learns that its release will grant it the lock or tell
/// it to try (see `successor.rs`).
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
pub(super) fn through_the_queue<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    terms: &'a Terms,
    (wait, deadline): (Wait, Option<Instant>),
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    async move {
        // One wait in Redis, however the line was left, so that what is kept
        // across it (the turn, when at the head) has one place in this future,
        // shared with the parked wait's.
        let parked = match wait {
            Wait::Once => None,
            _ => match client.lines.enter(&acquirer.target().name, true) {
                Entry::Park(parked) => Some(parked),
                // A fair waiter always parks first; a stalled line is passed by.
                // (A queued entry is never a turn.)
                passed @ (Entry::Turn(_) | Entry::Bypass) => {
                    drop(passed);
                    None
                }
            },
        };
        // Not boxed on its own: this future is (see `wait::acquire_on_primary`).
        // `last`: out of time before its turn to join, it makes one last attempt.
        let (head, listening, in_redis, last) =
            match parked_in_line(client, acquirer, terms, deadline, parked).await {
                Unparked::Done(got) => return got,
                Unparked::Head(head, listening) => {
                    (Some(head), listening.map(|l| *l), (wait, deadline), false)
                }
                Unparked::OnItsOwn => (None, None, (wait, deadline), false),
                Unparked::LastAttempt => (None, None, (Wait::Once, None), true),
            };
        let got = Box::pin(wait_in_redis(
            client,
            acquirer,
            *terms,
            in_redis,
            listening,
            head.as_ref(),
        ))
        .await;
        if last {
            return super::in_line::last_attempt(got);
        }
        if let Some(head) = head.filter(|head| head.heir().is_some()) {
            if matches!(got, Ok(Some(_))) && crate::engine::heuristics::heuristics().held_here {
                // The next head need not try until this hold's release, which
                // grants it the lock or tells it what to do (nor listen, while
                // this client's releases grant; see `InRedis::defers_listening`).
                head.acquired(HeldHere {
                    until: Instant::now() + terms.lease,
                    mark: None,
                });
            }
        }
        got
    }
}

/// The heir a head of the line is offered as, when releases grant (see
/// `successor.rs`).
fn heir(acquirer: &Arc<dyn Acquirer>, terms: Terms) -> Option<Arc<Successor>> {
    crate::engine::heuristics::heuristics()
        .release_grant
        .then(|| Successor::new(acquirer, terms.lease_ms))
}

/// Where a parked fair waiter goes next.
enum Unparked {
    /// Its wait ended while parked: with a hold (its join found the lock
    /// free and nobody in line), out of time (its place left), or an error.
    Done(Result<Option<Hold>>),
    /// Its turn at the head of the line: it waits in Redis, its entry in
    /// place, listening already if it subscribed before its join (boxed: a
    /// parked waiter carries the room for it across its wait).
    Head(Turn, Option<Box<Listening>>),
    /// It waits in Redis on its own, outside the line: the line's head
    /// stalled, or its join's outcome was unknown (settled, so the place is
    /// left) and it joins again at the tail.
    OnItsOwn,
    /// Out of time before its turn to join: it makes the one attempt every
    /// wait makes, without queueing.
    LastAttempt,
}

/// A parked fair waiter: joins Redis's queue when its ticket's turn comes,
/// then waits, sending nothing, to be the line's head. `None` (one try, or a
/// line passed by) is not parked: it waits in Redis on its own.
///
/// # Cancel safety
/// Cancel safe: a join in flight is finished and settled (the place left, a
/// hold it took given back) by the owner's gate; once joined, its place is
/// left when this future is dropped or its time runs out.
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
fn parked_in_line<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    terms: &'a Terms,
    deadline: Option<Instant>,
    parked: Option<Parked>,
) -> impl Future<Output = Unparked> + Send + 'a {
    // Its turn to join, and the join, in one box, made here: brief states,
    // whose room (and a second place for the entry, as this future's capture)
    // a parked waiter should not carry.
    let joining =
        parked.map(|parked| Box::pin(join_in_order(client, acquirer, terms, deadline, parked)));
    async move {
        let Some(joining) = joining else {
            return Unparked::OnItsOwn;
        };
        let (mut ticket, spot, listening) = match joining.await {
            Ok(joined) => joined,
            Err(unparked) => return unparked,
        };
        // Offered as heir from now on, so a release made before its turn comes
        // can grant it the lock; from here its place is left (and a grant given
        // back) on every way out but the turn.
        let heir = heir(acquirer, *terms);
        let mut place = queue_place(client, acquirer, true, heir.clone());
        // In the local line's queue (the turn's first poll) before the next
        // may join, so that the local order is Redis's: the turn is polled
        // first, even when out of time.
        let mut turn = Box::pin(spot.turn(heir.clone()));
        let in_line = std::future::poll_fn(|cx| {
            let polled = turn.as_mut().poll(cx);
            ticket.take();
            polled
        });
        let out_of_time = {
            let next = within_boxed(deadline, in_line).await;
            // Decided in a block of its own, so that nothing of `next` (as large
            // as a turn) is kept across the await that leaves the place.
            match next {
                Some(Some(head)) => {
                    place.disarm();
                    return Unparked::Head(head, listening);
                }
                None => true,
                // Granted while parked, and the line closed: given back, it joins
                // again at the tail.
                Some(None)
                    if heir
                        .as_ref()
                        .is_some_and(|heir| !heir.leave_unless_granted()) =>
                {
                    false
                }
                Some(None) => {
                    place.disarm();
                    return Unparked::OnItsOwn;
                }
            }
        };
        // Boxed: a way out taken once, whose room a parked waiter should not
        // carry.
        Box::pin(place.run_now()).await;
        match out_of_time {
            true => Unparked::Done(Ok(None)),
            false => Unparked::OnItsOwn,
        }
    }
}

/// A parked waiter's join, in its ticket's order: `Ok` with its ticket (done
/// at the turn's first poll), its spot in the line once it is in Redis's
/// queue, and what it listens on if it subscribed before joining; `Err` where
/// it goes instead.
async fn join_in_order(
    client: &Arc<Engine>,
    acquirer: &Arc<dyn Acquirer>,
    terms: &Terms,
    deadline: Option<Instant>,
    parked: Parked,
) -> Result<(Option<JoinTicket>, LineSpot, Option<Box<Listening>>), Unparked> {
    let expects_wait = parked.expects_wait();
    let (ticket, spot) = parked.join_ticket();
    if let Some(ticket) = &ticket {
        let patience = client.lines.patience();
        match within(deadline, ticket.turn(patience)).await {
            Some(true) => {}
            // The line does not move (an earlier waiter is not polled).
            Some(false) => return Err(Unparked::OnItsOwn),
            None => return Err(Unparked::LastAttempt),
        }
    }
    let listening = match expects_wait {
        true => listen_before_joining(client, acquirer, deadline).await,
        false => None,
    };
    let sent = FirstSent::now(client);
    match join_line(client, acquirer, *terms, deadline).await {
        Ok(Joined::InLine(pause)) => {
            client.lines.queued_behind_others(&acquirer.target().name);
            let joined = JoinedListening { sent, pause };
            let listening = listening.map(|subscription| {
                Box::new(Listening {
                    subscription,
                    joined: Some(joined),
                })
            });
            Ok((ticket, spot, listening))
        }
        Ok(Joined::Held(hold)) => Err(Unparked::Done(Ok(Some(hold)))),
        Ok(Joined::OutOfTime) => Err(Unparked::Done(Ok(None))),
        Err(e) if e.is_transient() => Err(Unparked::OnItsOwn),
        Err(e) => Err(Unparked::Done(Err(e))),
    }
}

/// A waiter that comes alone to a line whose waiters lately joined a busy
/// lock will be its head and wait in Redis: it subscribes first, so that its
/// join is the attempt a new subscription must be followed by (one command
/// fewer: a head that subscribes after joining tries once more). `None` when
/// the subscription failed or the deadline came first: it joins without, and
/// subscribes as its head, as any other does.
async fn listen_before_joining(
    client: &Engine,
    acquirer: &Arc<dyn Acquirer>,
    deadline: Option<Instant>,
) -> Option<Subscription> {
    let target = acquirer.target();
    let class = acquirer.waits().class;
    let subscription = client
        .pubsub
        .subscribe(target.channel(), &target.name, class);
    match within(deadline, Box::pin(subscription.ready())).await {
        Some(Ok(())) => Some(subscription),
        Some(Err(_)) | None => None,
    }
}
