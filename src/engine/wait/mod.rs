//! The one wait engine: every kind waits in [`InRedis`] (the locks, the spin
//! lock, the semaphores and the latch); a lock's acquire (here) puts the local
//! line in front of it, an owner's bookkeeping around it (`lock.rs`) and
//! replica confirmation after it.
//!
//! ```text
//! attempt ─▶ acquired? ── yes ─▶ hold (renewed by the watchdog)
//!              │ no (ttl)
//!   subscribe to the kind's channel, then loop:
//!     arm wake-up ─▶ wait for the subscription ─▶ attempt
//!     ─▶ sleep until woken, at most min(ttl, time left) ─▶ loop
//! ```
//!
//! An attempt dropped while in flight (the caller's future was dropped) is not
//! abandoned: it is finished in a task of its own and whatever it got is undone (a
//! hold released, a queue place left), so a cancelled `lock()` never leaves
//! anything behind, even when its script runs on the server after the caller left.

mod attempts;
mod hold;
mod in_line;
mod in_redis;
mod lock;
mod pause;
mod queued;
mod step;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{Acquirer, Lease, Wait};
use crate::engine::ledger::release_one;
use crate::engine::line::HeldHere;
use crate::engine::Engine;
use crate::error::{Error, Result};

pub(crate) use hold::Hold;
use hold::Terms;
pub(crate) use in_line::{through_the_line, Object};
pub(crate) use in_redis::{InRedis, Place};
use lock::wait_in_redis;
pub(crate) use pause::Pause;
pub(crate) use step::within;
pub(crate) use step::{Tried, Tries};

/// Acquires with `acquirer`, waiting as `wait` says, then (with replica sync on)
/// makes sure a replica has the hold. `Ok(None)`: not acquired in time.
/// `new_owner`: the owner was made for this acquisition alone (it may wait in the
/// client's local line).
///
/// Measured here (feature `metrics`, see `metrics.rs`), the one entry every lock
/// kind acquires through: from the call to the hold, the local line, the wait
/// in Redis and the replicas' confirmation included.
///
/// # Cancel safety
/// Cancel safe at every await: the subscription, a queue place, the hold's
/// renewal and any hold a detached attempt obtained are all given back when this
/// future is dropped, and so is a hold whose replication was still awaited.
// Not an `async fn`, nor a future of its own around `acquire_confirmed`'s:
// every layer keeps its arguments for the whole wait, in every waiting future.
pub(crate) fn acquire<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    (lease, max_hold): (Lease, Option<Duration>),
    wait: Wait,
    new_owner: bool,
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    let labels = &acquirer.target().labels;
    let terms = Terms::new(client, lease, max_hold);
    let acquiring = move || acquire_confirmed(client, acquirer, terms, wait, new_owner);
    crate::metrics::metered(labels, wait.is_one_off(), acquiring)
}

/// [`acquire`], unmeasured, on `terms` (or their error).
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
fn acquire_confirmed<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    terms: Result<Terms>,
    wait: Wait,
    new_owner: bool,
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    async move {
        let terms = &terms.as_ref().map_err(Error::clone)?;
        let primary = acquire_on_primary(client, acquirer, terms, wait, new_owner);
        let Some(hold) = primary.await? else {
            return Ok(None);
        };
        if !client.replica_links.is_on() {
            return Ok(Some(hold));
        }
        // Boxed: a waiter's future is as large as its largest state, and this one
        // comes only after the wait.
        Box::pin(confirm_on_replicas(client, acquirer, hold)).await
    }
}

/// With replica sync on: makes sure a replica has the `hold` just granted, or
/// gives it back.
async fn confirm_on_replicas(
    client: &Arc<Engine>,
    acquirer: &Arc<dyn Acquirer>,
    hold: Hold,
) -> Result<Option<Hold>> {
    // Given back if this future is dropped while waiting for the replicas.
    let mut unconfirmed = {
        let (slot, acquirer, releaser, lease_ms) = (
            hold.slot.clone(),
            acquirer.clone(),
            client.releaser.clone(),
            hold.lease_ms,
        );
        OnDrop::armed(&client.conn, async move {
            if let Err(e) = release_one(&slot, &acquirer, &releaser, lease_ms).await {
                crate::trace::warn_event!(
                    "lock {:?}: giving back a hold no replica confirmed failed (it ends with its lease): {e}",
                    acquirer.name()
                );
            }
        })
    };
    // On a connection of its own (see `replication.rs`): the client's other
    // commands do not wait behind this WAIT.
    let confirmed = client
        .replica_links
        .confirm_hold(acquirer.name(), acquirer.count_field())
        .await;
    // Strict: if the client's connection was replaced since the acquire (a
    // reconnect, a Sentinel switch), the hold is not taken as confirmed.
    let same_connection = client.pubsub.connection_epoch() == hold.epoch;
    if same_connection && matches!(confirmed, Ok(true)) {
        unconfirmed.disarm();
        return Ok(Some(hold));
    }
    // Unconfirmed: stop renewing, give it back (from a task of its own, so that
    // dropping this future cannot cut the release short), report why.
    let (lease_ms, slot) = (hold.lease_ms, hold.slot.clone());
    drop(hold);
    unconfirmed.disarm();
    let (giver, releaser) = (acquirer.clone(), client.releaser.clone());
    let given_back = client
        .conn
        .spawner()
        .run(async move { release_one(&slot, &giver, &releaser, lease_ms).await })
        .await;
    match (confirmed, given_back) {
        (_, Ok(Err(e)) | Err(e)) => Err(e),
        (Err(e), _) => Err(e),
        _ => Err(Error::NotReplicated {
            name: acquirer.name().to_owned(),
            replicas: client.replica_links.replicas(),
        }),
    }
}

/// [`acquire`] up to the point the primary granted the hold: through this
/// client's local line for the lock first, if its kind keeps one and the owner
/// is `new_owner` (made for this acquisition; see
/// [`Lines::enter`](crate::engine::line::Lines::enter)).
///
/// A parked waiter is small (its place in the line and its subscription); the
/// wait in Redis, with its attempts and owner slot, is built (boxed) only
/// when the turn comes. 100,000 waiters of one client over
/// 10,000 locks are then 10,000 waits in Redis and 90,000 places in line.
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
fn acquire_on_primary<'a>(
    client: &'a Arc<Engine>,
    acquirer: &'a Arc<dyn Acquirer>,
    terms: &'a Terms,
    wait: Wait,
    new_owner: bool,
) -> impl Future<Output = Result<Option<Hold>>> + Send + 'a {
    async move {
        let started = wait.start()?;
        // Only an owner made for this acquisition: any other may hold the lock
        // already or be waiting for it elsewhere (a task's sibling futures, one
        // explicit id on two tasks), and must not wait behind waiters that wait
        // for it.
        // Before the other kinds' locals, which would otherwise be kept across
        // this await too (48 bytes in every kind's `lock()` future); boxed, so
        // that the other kinds' futures need not carry the fair line's.
        if new_owner
            && acquirer.waits().queues()
            && crate::engine::heuristics::heuristics().fair_line
        {
            return Box::pin(queued::through_the_queue(client, acquirer, terms, started)).await;
        }
        let waits = acquirer.waits();
        let object = Object {
            name: &acquirer.target().name,
            channel: acquirer.channel(),
            class: waits.class,
        };
        let in_line = new_owner && waits.local_line;
        // Boxed: the local line and the wait in Redis are the largest states of
        // an acquisition, and every kind's `lock()` future would otherwise carry
        // their room (a parked fair waiter too, which never uses it).
        let (hold, turn) = Box::pin(through_the_line(
            client,
            object,
            in_line,
            started,
            async |wait, listening, turn| {
                let listening = listening.map(Into::into);
                wait_in_redis(client, acquirer, *terms, wait, listening, turn).await
            },
        ))
        .await;
        if let (Some(turn), Ok(Some(_))) = (turn, &hold) {
            // Tell the next in line it need not try before this hold's release,
            // whose message it will hear: only if the channel is confirmed now, so
            // the release (sent later) publishes after the subscription.
            let mark = crate::engine::heuristics::heuristics()
                .held_here
                .then(|| client.pubsub.mark(acquirer.channel()))
                .flatten();
            if let Some(mark) = mark {
                turn.acquired(HeldHere {
                    until: Instant::now() + terms.lease,
                    mark: Some(mark),
                });
            }
        }
        hold
    }
}
