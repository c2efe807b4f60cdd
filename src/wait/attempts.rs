//! One attempt of a wait, sent through its owner's gate, and what a step of
//! the wait loop can come to.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::pause::Pause;
use crate::cleanup::OnDrop;
use crate::client::ClientInner;
use crate::contract::{Acquirer, Drawn, Outcome};
use crate::error::{Error, Result};
use crate::ledger::{settle, Gate, Gated, Slot};

/// Sends the attempts of one acquisition through its owner's gate.
pub(super) struct Attempts<'a> {
    pub(super) client: &'a Arc<ClientInner>,
    pub(super) acquirer: &'a Arc<dyn Acquirer>,
    pub(super) slot: Arc<Slot>,
    pub(super) lease_ms: u64,
}

impl Attempts<'_> {
    /// One attempt, sent with the owner's gate held: a success is counted; an
    /// outcome that is unknown is settled from a task of its own, which keeps the
    /// gate until it is done (the error is returned). `None` when the gate did not
    /// open before `gate_deadline`.
    pub(super) async fn send(
        &self,
        queue: bool,
        gate_deadline: Option<Instant>,
    ) -> Option<Result<Outcome>> {
        let gate = self.slot.enter(gate_deadline).await?;
        let (outcome, mut gate) =
            attempt(self.client, self.acquirer, self.lease_ms, queue, gate).await;
        match &outcome {
            Ok(Ok(_)) => *gate += 1,
            Ok(Err(_busy)) => {}
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
pub(super) enum Step {
    /// Acquired, by the attempt sent at this instant, with what it drew.
    Acquired(Instant, Drawn),
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

/// A fair waiter's place in line (`queued`: the kind queues and this wait
/// tries more than once), left on every way out but success: disarmed when
/// acquired (the acquire consumed it), run now on any other way out, and left
/// from the client's thread by a dropped future. A failure to leave leaves the
/// place to expire at its deadline, when the queue skips it.
pub(super) fn queue_place(
    client: &ClientInner,
    acquirer: &Arc<dyn Acquirer>,
    queued: bool,
) -> OnDrop {
    if !queued {
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
) -> Gated<Outcome> {
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
