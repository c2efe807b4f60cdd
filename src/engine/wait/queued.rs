//! The fair lock's local line: one waiter per client and lock waits in
//! Redis, and the others are parked with their own entries in Redis's queue
//! and nothing else (no subscription, no wait engine, no renewal
//! registration).
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
use super::lock::{join_line, wait_in_redis, Joined};
use super::step::within;
use crate::engine::contract::{Acquirer, Wait};
use crate::engine::line::{Entry, HeldHere, Parked, Turn};
use crate::engine::successor::Successor;
use crate::engine::Engine;
use crate::error::Result;

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
    terms: Terms,
    (wait, deadline): (Wait, Option<Instant>),
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    async move {
        let on_its_own =
            async |wait| Box::pin(wait_in_redis(client, acquirer, terms, wait, None, None)).await;
        if matches!(wait, Wait::Once) {
            return on_its_own((wait, deadline)).await;
        }
        // Nothing of the entry, nor of how the parked wait ended, is kept
        // across an await but the turn.
        let parked = match client.lines.enter(&acquirer.target().name, true) {
            Entry::Park(parked) => parked,
            // A fair waiter always parks first; a stalled line is passed by.
            // (A queued entry is never a turn.)
            passed @ (Entry::Turn(_) | Entry::Bypass) => {
                drop(passed);
                return on_its_own((wait, deadline)).await;
            }
        };
        // Not boxed on its own: this future is (see `wait::acquire_on_primary`).
        // `Err(last)`: it waits in Redis on its own, `last` when out of time
        // before its turn to join (one last attempt).
        let next = match parked_in_line(client, acquirer, terms, deadline, parked).await {
            Unparked::Done(got) => return got,
            Unparked::Head(head) => Ok(head),
            Unparked::OnItsOwn => Err(false),
            Unparked::LastAttempt => Err(true),
        };
        let head = match next {
            Ok(head) => head,
            Err(false) => return on_its_own((wait, deadline)).await,
            Err(true) => {
                let last = on_its_own((Wait::Once, None)).await;
                return super::in_line::last_attempt(last);
            }
        };
        let got = Box::pin(wait_in_redis(
            client,
            acquirer,
            terms,
            (wait, deadline),
            None,
            Some(&head),
        ))
        .await;
        // Only while this client's releases do grant (not when its waiters
        // alternate with other clients').
        let hints = crate::engine::heuristics::heuristics().held_here
            && client.lines.grants(&acquirer.target().name);
        if matches!(got, Ok(Some(_))) && head.heir().is_some() && hints {
            // The next head need not listen until this hold's release, which
            // grants it the lock or tells it to try.
            head.acquired(HeldHere {
                until: Instant::now() + terms.lease,
                mark: None,
            });
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
    /// Its turn at the head of the line: it waits in Redis, its entry in place.
    Head(Turn),
    /// It waits in Redis on its own, outside the line: the line's head
    /// stalled, or its join's outcome was unknown (settled, so the place is
    /// left) and it joins again at the tail.
    OnItsOwn,
    /// Out of time before its turn to join: it makes the one attempt every
    /// wait makes, without queueing.
    LastAttempt,
}

/// A parked fair waiter: joins Redis's queue when its ticket's turn comes,
/// then waits, sending nothing, to be the line's head.
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
    terms: Terms,
    deadline: Option<Instant>,
    mut parked: Parked,
) -> impl Future<Output = Unparked> + Send + 'a {
    async move {
        let mut ticket = parked.join_ticket();
        if let Some(ticket) = &ticket {
            let patience = client.lines.patience();
            // Boxed, as the join below: a parked waiter carries neither.
            match Box::pin(within(deadline, ticket.turn(patience))).await {
                Some(true) => {}
                // The line does not move (an earlier waiter is not polled).
                Some(false) => return Unparked::OnItsOwn,
                None => return Unparked::LastAttempt,
            }
        }
        // Boxed: an attempt in flight is large but brief, and a parked waiter
        // should not carry its room for as long as it is parked.
        match Box::pin(join_line(client, acquirer, terms, deadline)).await {
            Ok(Joined::InLine) => {}
            Ok(Joined::Held(hold)) => return Unparked::Done(Ok(Some(hold))),
            Ok(Joined::OutOfTime) => return Unparked::Done(Ok(None)),
            Err(e) if e.is_transient() => return Unparked::OnItsOwn,
            Err(e) => return Unparked::Done(Err(e)),
        }
        // Offered as heir from now on, so a release made before its turn comes
        // can grant it the lock; from here its place is left (and a grant given
        // back) on every way out but the turn.
        let heir = heir(acquirer, terms);
        let mut place = queue_place(client, acquirer, true, heir.clone());
        // In the local line's queue (the turn's first poll) before the next
        // may join, so that the local order is Redis's. The first poll comes
        // even when out of time: a timeout polls its future before its clock.
        let mut turn = Box::pin(parked.turn(heir.clone()));
        let in_line = std::future::poll_fn(|cx| {
            let polled = turn.as_mut().poll(cx);
            ticket.take();
            polled
        });
        let next = within(deadline, in_line).await;
        match next {
            None => {
                place.run_now().await;
                Unparked::Done(Ok(None))
            }
            Some(None)
                if heir
                    .as_ref()
                    .is_some_and(|heir| !heir.leave_unless_granted()) =>
            {
                // Granted while parked, and the line closed: given back, it
                // joins again at the tail.
                place.run_now().await;
                Unparked::OnItsOwn
            }
            Some(Some(head)) => {
                place.disarm();
                Unparked::Head(head)
            }
            Some(None) => {
                place.disarm();
                Unparked::OnItsOwn
            }
        }
    }
}
