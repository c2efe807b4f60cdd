//! One attempt of a wait, sent through its owner's gate, and what a step of
//! the wait loop can come to.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::pause::Pause;
use super::step::{Tried, Tries};
use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{Acquirer, Drawn, Outcome};
use crate::engine::ledger::{gated, settle, Gate, Gated, Slot};
use crate::engine::Engine;
use crate::error::Result;

/// Sends the attempts of one acquisition through its owner's gate.
pub(super) struct Attempts<'a> {
    pub(super) client: &'a Arc<Engine>,
    pub(super) acquirer: &'a Arc<dyn Acquirer>,
    pub(super) slot: Arc<Slot>,
    pub(super) lease_ms: u64,
    /// The longest pause after a busy reply, whatever its TTL says (the fair
    /// lock's).
    pub(super) max_sleep: Option<Duration>,
}

/// What a lock's successful attempt hands the wait: when it was sent and on
/// which connection (the hold's validity counts from then, and replica sync
/// WAITs on that connection), and what it drew.
pub(super) struct Taken {
    pub(super) sent: Instant,
    pub(super) epoch: u64,
    pub(super) drawn: Drawn,
}

impl Tries for Attempts<'_> {
    type Got = Taken;

    async fn attempt(
        &self,
        queue: bool,
        start_by: Option<Instant>,
    ) -> Option<Result<Tried<Taken>>> {
        let (sent, epoch) = (Instant::now(), self.client.pubsub.connection_epoch());
        let outcome = self.send(queue, start_by).await?;
        Some(outcome.map(|outcome| match outcome {
            Ok(drawn) => Tried::Got(Taken { sent, epoch, drawn }),
            Err(ttl) => Tried::Busy(Pause::after(ttl, self.max_sleep)),
        }))
    }
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

/// A fair waiter's place in line (`queued`: the kind queues and this wait
/// tries more than once), left on every way out but success: disarmed when
/// acquired (the acquire consumed it), run now on any other way out, and left
/// from the client's thread by a dropped future. A failure to leave leaves the
/// place to expire at its deadline, when the queue skips it.
pub(super) fn queue_place(client: &Engine, acquirer: &Arc<dyn Acquirer>, queued: bool) -> OnDrop {
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
    client: &Arc<Engine>,
    acquirer: &Arc<dyn Acquirer>,
    lease_ms: u64,
    queue: bool,
    gate: Gate,
) -> Gated<Outcome> {
    gated(
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
