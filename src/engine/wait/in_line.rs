//! The local line in front of the wait in Redis: one waiter per client and
//! object waits in Redis, the others are parked, sending nothing (see
//! [`Lines::enter`](crate::engine::line::Lines::enter)). The locks and the
//! one-permit semaphores pass through it alike.

use std::sync::Arc;

use tokio::time::Instant;

use crate::engine::contract::Wait;
use crate::engine::line::{Entry, Turn};
use crate::engine::Engine;
use crate::error::Result;
use crate::transport::pubsub::{Class, Subscription};

/// Where the local line leaves a waiter.
enum Lined {
    /// Wait in Redis: with the turn at the head of the line (none when the
    /// line was not entered, or its head stalled), and the subscription made
    /// while parked, if it was.
    InRedis(Option<Turn>, Option<Subscription>),
    /// Out of time while parked: every wait makes at least one attempt (as
    /// Redisson's first), so make it on the way out.
    OutOfTime,
}

/// What a waiter waits for: the object, its channel and its waiter class.
pub(crate) struct Object<'a> {
    pub(crate) name: &'a Arc<str>,
    pub(crate) channel: &'a str,
    pub(crate) class: Class,
}

/// The one way into the wait loop, for every kind: a place in this client's
/// local line for `object` when `in_line` (never for a one-off try), then
/// `in_redis`, the kind's wait in Redis, with how long it may wait, the
/// subscription made while parked and the turn at the head of the line. A
/// waiter whose time ran out while parked makes its one attempt on the way out
/// (`in_redis` once, with [`Wait::Once`]). Also returns the turn, which passes
/// on when dropped.
///
/// The wait in Redis is boxed: a parked waiter keeps only its place.
pub(crate) async fn through_the_line<T, F>(
    client: &Arc<Engine>,
    object: Object<'_>,
    in_line: bool,
    (wait, deadline): (Wait, Option<Instant>),
    in_redis: F,
) -> (Result<Option<T>>, Option<Turn>)
where
    F: AsyncFnOnce(
        (Wait, Option<Instant>),
        Option<Subscription>,
        Option<&Turn>,
    ) -> Result<Option<T>>,
{
    let in_line = in_line && !matches!(wait, Wait::Once);
    match line_up(client, object, in_line, deadline).await {
        Lined::OutOfTime => {
            let last = Box::pin(in_redis((Wait::Once, None), None, None)).await;
            (last_attempt(last), None)
        }
        Lined::InRedis(turn, listening) => {
            let got = Box::pin(in_redis((wait, deadline), listening, turn.as_ref())).await;
            (got, turn)
        }
    }
}

/// Waits in this client's local line for `object` when `in_line` (see
/// [`through_line`]); else goes straight to the wait in Redis. The line's state
/// is boxed: only a parked waiter keeps it, and inline it would make every
/// waiter's future that large.
async fn line_up(
    client: &Arc<Engine>,
    object: Object<'_>,
    in_line: bool,
    deadline: Option<Instant>,
) -> Lined {
    if !in_line {
        return Lined::InRedis(None, None);
    }
    Box::pin(through_line(client, object, deadline)).await
}

/// What the one attempt made on the way out of the line (out of time while
/// parked) comes to: a transient failure of it is only a wait that ran out,
/// as it would be in Redis (where transient failures are retried until then).
pub(super) fn last_attempt<T>(last: Result<Option<T>>) -> Result<Option<T>> {
    match last {
        Err(e) if e.is_transient() => Ok(None),
        other => other,
    }
}

/// Takes a place in this client's local line for `object` and waits there,
/// until `deadline`, for the turn to wait in Redis.
///
/// A parked waiter is small (its place in the line and its subscription); the
/// wait in Redis, with its attempts (and, for a lock, its owner slot), is
/// built only when the turn comes.
///
/// # Cancel safety
/// Cancel safe: a dropped wait leaves the line and its subscription.
async fn through_line(
    client: &Arc<Engine>,
    object: Object<'_>,
    deadline: Option<Instant>,
) -> Lined {
    let parked = match client.lines.enter(object.name, false) {
        Entry::Turn(first) => return Lined::InRedis(Some(first), None),
        Entry::Park(parked) => parked,
        Entry::Bypass => return Lined::InRedis(None, None),
    };
    // Listening while parked keeps the channel subscribed from one head of the
    // line to the next.
    let listening = client
        .pubsub
        .subscribe(object.channel, object.name, object.class);
    // Not `within`: this state is what a parked waiter weighs, and a timer
    // (boxed, for the timed waits only) would double it.
    let next = match deadline {
        Some(deadline) => Box::pin(tokio::time::timeout_at(deadline, parked.turn(None)))
            .await
            .ok(),
        None => Some(parked.turn(None).await),
    };
    match next {
        Some(head) => Lined::InRedis(head, Some(listening)),
        None => Lined::OutOfTime,
    }
}
