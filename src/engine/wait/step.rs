//! What the wait loop asks of a kind (its [`Tries`]), and what an attempt and
//! a step of the loop come to.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio::time::Instant;

use super::pause::Pause;
use crate::error::{Error, Result};

/// A kind's attempts, as the wait loop makes them.
pub(crate) trait Tries: Sync {
    /// What a successful attempt hands back.
    type Got: Send;

    /// One attempt. `queue`: a fair waiter takes (or keeps) its place in line.
    /// `None`: the attempt could not start before `start_by` (an owner's gate
    /// stayed shut).
    fn attempt(
        &self,
        queue: bool,
        start_by: Option<Instant>,
    ) -> impl Future<Output = Option<Result<Tried<Self::Got>>>> + Send;
}

/// What one attempt came to.
#[derive(Debug)]
pub(crate) enum Tried<T> {
    /// The wait is over.
    Got(T),
    /// Not yet: pause like this at most before trying again (until woken).
    Busy(Pause),
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

/// [`within`], for a long wait such as a parked one: the deadline's timer is
/// boxed and made only when there is a deadline, so that an untimed wait
/// (`lock()`) carries no room for it. `step` is polled first, even when out of
/// time, as a timeout polls its future before its clock.
pub(super) fn within_boxed<T>(
    deadline: Option<Instant>,
    mut step: impl Future<Output = T> + Unpin,
) -> impl Future<Output = Option<T>> {
    let mut timer = deadline.map(|deadline| Box::pin(tokio::time::sleep_until(deadline)));
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(done) = Pin::new(&mut step).poll(cx) {
            return Poll::Ready(Some(done));
        }
        match &mut timer {
            Some(timer) => timer.as_mut().poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    })
}

/// What one wait-loop step came to.
pub(super) enum Step<G> {
    /// Got it (a lock: acquired, by the attempt sent at some instant, with
    /// what it drew).
    Got(G),
    /// Busy: pause like this.
    Busy(Pause),
    /// Nothing tried yet: pause like this first.
    Pause(Pause),
}

/// What went wrong in one wait-loop step.
pub(super) enum Failure {
    Subscribe(Error),
    Attempt(Error),
}

impl Failure {
    /// The error that ends the wait, if this failure is not worth retrying. A
    /// subscription can always be asked again after a transport failure, and so
    /// can an acquire: one that surely did not run may simply be repeated, and one
    /// that may have run is being settled (its owner's next attempt waits for
    /// that), so repeating it cannot count a hold twice.
    pub(super) fn fatal(self) -> Option<Error> {
        match self {
            Failure::Subscribe(e) | Failure::Attempt(e) if e.is_transient() => None,
            other => Some(other.into_error()),
        }
    }

    pub(super) fn into_error(self) -> Error {
        match self {
            Failure::Subscribe(e) | Failure::Attempt(e) => e,
        }
    }
}
