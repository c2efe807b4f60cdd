//! A lock's wait: the shared wait in Redis ([`InRedis`]), with an owner's
//! bookkeeping around each attempt (its slot and gate in the ledger, the
//! settle of an attempt whose outcome is unknown) and around the wait (a fair
//! waiter's queue place), and the hold it ends with (its validity, counted
//! from the instant the winning attempt was sent, and its renewal).

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::attempts::{queue_place, Attempts, Taken};
use super::hold::{Hold, Terms};
use super::in_redis::{InRedis, Listening, Place};
use super::pause::Pause;
use super::step::{Tried, Tries};
use crate::engine::contract::{Acquirer, Wait};
use crate::engine::line::Turn;
use crate::engine::validity::{Drift, Validity};
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::HoldMeter;

/// The wait in Redis for a hold. `listening`: a subscription made while parked
/// in the local line or before a fair waiter's join; `head`: its turn at the
/// head of the line.
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): the head of a line carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
pub(super) fn wait_in_redis<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    terms: Terms,
    (wait, deadline): (Wait, Option<Instant>),
    listening: Option<Listening>,
    head: Option<&'a Turn>,
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    async move {
        let (field, _) = acquirer.renewal();
        let target = acquirer.target();
        let waits = acquirer.waits();
        let attempts = Attempts {
            client,
            acquirer,
            slot: client.ledger.slot(&target.name, field),
            lease_ms: terms.lease_ms,
            max_sleep: waits.max_sleep(),
            heir: head.and_then(Turn::heir).cloned(),
        };
        // A fair waiter may hold a place in line from its first attempt on,
        // and a reentrant lock's in its order of clients.
        let keeps_trying = !matches!(wait, Wait::Once);
        let place = queue_place(
            client,
            acquirer,
            keeps_trying && waits.leaves_a_place(),
            attempts.heir.clone(),
        );
        let place_in_redis = Place {
            client,
            name: &target.name,
            channel: target.channel(),
            waits,
            wait: (wait, deadline),
        };
        let mut waiter = InRedis::new(place_in_redis, head, place);
        let Some(taken) = waiter.run(&attempts, listening).await? else {
            return Ok(None);
        };
        Ok(Some(hold_of(client, &attempts, terms, taken)))
    }
}

/// Where a parked fair waiter's join left it.
pub(super) enum Joined {
    /// The lock was free and nobody in line: taken.
    Held(Hold),
    /// In Redis's queue, behind the waiter before it; the busy reply asked
    /// for this pause.
    InLine(Pause),
    /// The owner's gate did not open before the deadline: nothing was sent.
    OutOfTime,
}

/// A parked fair waiter's join: one attempt that queues the owner (or takes a
/// free lock nobody waits for), sent through the owner's gate, with nothing
/// else of a wait (no subscription; a renewal only if it took the lock). An outcome that is unknown is settled as any attempt's is (the
/// place left), and returned as the error.
pub(super) async fn join_line(
    client: &Arc<Engine>,
    acquirer: &Arc<dyn Acquirer>,
    terms: Terms,
    deadline: Option<Instant>,
) -> Result<Joined> {
    let (field, _) = acquirer.renewal();
    let name = &acquirer.target().name;
    let attempts = Attempts {
        client,
        acquirer,
        slot: client.ledger.slot(name, field),
        lease_ms: terms.lease_ms,
        max_sleep: acquirer.waits().max_sleep(),
        heir: None,
    };
    match attempts.attempt(true, deadline).await {
        None => Ok(Joined::OutOfTime),
        Some(Ok(Tried::Busy(pause))) => Ok(Joined::InLine(pause)),
        Some(Ok(Tried::Got(taken))) => Ok(Joined::Held(hold_of(client, &attempts, terms, taken))),
        Some(Err(e)) => Err(e),
    }
}

/// The hold a successful attempt `taken` of `attempts` comes to: its validity
/// counted from the attempt's send, its renewal (if its terms renew it)
/// started.
fn hold_of(
    client: &Engine,
    attempts: &Attempts<'_>,
    terms: Terms,
    Taken { sent, epoch, drawn }: Taken,
) -> Hold {
    let target = attempts.acquirer.target();
    let drift = Drift {
        factor: client.config.clock_drift_factor,
    };
    // Measured from the grant (the reply), until released or lost.
    let meter = HoldMeter::start(&target.labels);
    // The term runs from the send, as the lease does: the earliest the hold
    // can have begun on the server.
    let term_end = terms.max_hold.map(|limit| sent + limit);
    let validity = Validity::new(sent, terms.lease, drift).with_term(term_end);
    let validity = Arc::new(validity.measured(meter));
    Hold {
        renewal: terms.renewed.then(|| {
            let (field, kind) = attempts.acquirer.renewal();
            client
                .watchdog
                .activate(&target.name, field, kind, validity.clone())
        }),
        validity,
        lease_ms: terms.lease_ms,
        slot: attempts.slot.clone(),
        epoch,
        drawn,
    }
}
