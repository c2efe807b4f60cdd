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
use crate::engine::successor::Successor;
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
    /// A fair head offered as the heir of this client's releases: a grant
    /// made to it is taken instead of an attempt.
    pub(super) heir: Option<Arc<Successor>>,
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
        if let Some(taken) = self.take_grant(start_by).await? {
            return Some(Ok(Tried::Got(taken)));
        }
        let (sent, epoch) = (Instant::now(), self.client.pubsub.connection_epoch());
        let outcome = self.send(queue, start_by).await?;
        Some(outcome.map(|outcome| match outcome {
            Ok(drawn) => {
                if let Some(heir) = &self.heir {
                    heir.acquired();
                }
                Tried::Got(Taken { sent, epoch, drawn })
            }
            Err(busy) => Tried::Busy(Pause::after_busy(busy, self.max_sleep, sent)),
        }))
    }
}

impl Attempts<'_> {
    /// A grant made to this heir by its client's release, taken with the
    /// owner's gate held and counted there, as a successful attempt is: its
    /// hold counts from the release's send. `Some(None)`: no grant waits;
    /// `None`: the gate did not open before `gate_deadline`.
    async fn take_grant(&self, gate_deadline: Option<Instant>) -> Option<Option<Taken>> {
        let Some(heir) = self.heir.as_ref().filter(|heir| heir.has_grant()) else {
            return Some(None);
        };
        let mut gate = self.slot.enter(gate_deadline).await?;
        let Some((sent, epoch)) = heir.take() else {
            // Put in doubt meanwhile: the attempt tells.
            return Some(None);
        };
        *gate += 1;
        let drawn = Default::default();
        Some(Some(Taken { sent, epoch, drawn }))
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
///
/// A head offered as `heir` of this client's releases gives back, as it
/// leaves, a grant made (or perhaps made) to it that it did not take.
pub(super) fn queue_place(
    client: &Engine,
    acquirer: &Arc<dyn Acquirer>,
    queued: bool,
    heir: Option<Arc<Successor>>,
) -> OnDrop {
    if !queued {
        return OnDrop::disarmed();
    }
    let acquirer = acquirer.clone();
    // Made if it runs: a parked waiter keeps its place for its whole wait.
    OnDrop::armed_lazily(&client.conn, move |conn| {
        let conn = conn.clone();
        async move {
            if let Some(heir) = heir.filter(|heir| heir.leave()) {
                heir.give_back(conn.clone()).await;
            }
            if let Err(e) = acquirer.clone().abandon(conn).await {
                crate::trace::warn_event!(
                    "lock {:?}: leaving its line of waiters failed (the place expires): {e}",
                    acquirer.name()
                );
            }
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
