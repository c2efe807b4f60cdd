//! What this client believes each owner holds, kept exact.
//!
//! An attempt whose outcome is unknown (its reply timed out, its connection broke
//! mid-request) may or may not have run on the server, and may run later still (a
//! paused server runs it when the pause ends). If it ran and nobody settles it, its
//! owner has one hold more on the server than guards in hand: a later re-entry
//! adds to it, every release leaves it behind with a fresh lease, and the lock is
//! never free again while the owner keeps cycling. The same goes for a release of
//! unknown outcome, the other way round.
//!
//! So each (lock, owner field) of this client has a [`Slot`]: a count of the holds
//! its guards stand for, behind an async mutex, the *gate*. Every attempt and every
//! release of that owner is sent with the gate held. An attempt or release of
//! unknown outcome keeps the gate and hands it to [`settle`], which (in the
//! background if need be) asks the server for the owner's count on the same
//! connection (so after the doubtful command, if that ever runs) and releases
//! whatever exceeds the believed count. Until then no other attempt or release of
//! that owner goes out, so a hold count never exceeds the guards the owner
//! actually has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use crate::engine::cleanup::{FinishOnDrop, Orphaned};
use crate::engine::contract::{Acquirer, BoxFuture};
use crate::engine::release::Releaser;
use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::scripts::Released;

/// An owner's gate, held: exclusive use of its server-side count, and the number
/// of holds its guards stand for.
pub(crate) type Gate = OwnedMutexGuard<u32>;

/// Every slot of one client.
#[derive(Debug)]
pub(crate) struct Ledger {
    slots: Arc<Mutex<Slots>>,
    settling: Settling,
}

/// (lock name, owner field).
type SlotKey = (Arc<str>, Arc<str>);

#[derive(Debug, Default)]
struct Slots {
    /// Weak, so an entry lives exactly as long as something holds its gate (a
    /// guard's slot, an attempt, a settle in the background).
    by_owner: HashMap<SlotKey, Weak<AsyncMutex<u32>>>,
    /// Dead entries are swept when the map grows past this. (The last slot of
    /// an owner takes its entry with it; a gate a settle kept outlives it.)
    sweep_at: usize,
}

impl Slots {
    fn locked(slots: &Mutex<Slots>) -> std::sync::MutexGuard<'_, Slots> {
        // Each critical section is one map update; poisoning leaves nothing
        // half done.
        slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How settling retries: every `retry`, for the lease of the doubtful command
/// plus `budget`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settling {
    pub(crate) retry: Duration,
    pub(crate) budget: Duration,
    /// How many settle attempts a caller's release waits for before it reports
    /// the failure (the settle goes on in the background): Redisson's
    /// `retryAttempts`.
    pub(crate) caller_attempts: u32,
}

/// One owner's holds of one lock, as this client knows them.
#[derive(Debug)]
pub(crate) struct Slot {
    gate: Arc<AsyncMutex<u32>>,
    settling: Settling,
    /// Its entry in the ledger, taken out when the last slot of the owner
    /// goes: most owners are made for one acquisition, and a parked waiter's
    /// slot goes with its join, so that entries of owners gone do not pile
    /// up until a sweep.
    key: SlotKey,
    slots: Arc<Mutex<Slots>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Under the map's lock, where a gate is upgraded: nobody else can
        // take this gate up meanwhile. Another reference (a gate held by an
        // attempt or a settle in flight) leaves the entry to the sweep.
        let mut slots = Slots::locked(&self.slots);
        if Arc::strong_count(&self.gate) == 1
            && slots
                .by_owner
                .get(&self.key)
                .is_some_and(|gate| std::ptr::eq(gate.as_ptr(), Arc::as_ptr(&self.gate)))
        {
            slots.by_owner.remove(&self.key);
        }
    }
}

impl Ledger {
    pub(crate) fn new(settling: Settling) -> Self {
        Ledger {
            slots: Arc::default(),
            settling,
        }
    }

    /// Lock `name` was forced open: no owner holds it any more, so every
    /// owner's count of it is 0. A gate busy with a command of its owner keeps
    /// its count; that command's outcome is settled against it, as any other.
    pub(crate) fn forget_lock(&self, name: &str) {
        let gates: Vec<Arc<AsyncMutex<u32>>> = {
            let slots = Slots::locked(&self.slots);
            slots
                .by_owner
                .iter()
                .filter(|((lock, _), _)| &**lock == name)
                .filter_map(|(_, gate)| gate.upgrade())
                .collect()
        };
        for gate in gates {
            if let Ok(mut count) = gate.try_lock() {
                *count = 0;
            }
        }
    }

    /// The slot of `field`'s holds of lock `name`.
    pub(crate) fn slot(&self, name: &Arc<str>, field: &str) -> Arc<Slot> {
        let mut slots = Slots::locked(&self.slots);
        let key: SlotKey = (name.clone(), Arc::from(field));
        let gate = match slots.by_owner.get(&key).and_then(Weak::upgrade) {
            Some(gate) => gate,
            None => {
                let gate = Arc::new(AsyncMutex::new(0));
                slots.by_owner.insert(key.clone(), Arc::downgrade(&gate));
                if slots.by_owner.len() > slots.sweep_at {
                    slots.by_owner.retain(|_, gate| gate.strong_count() > 0);
                    slots.sweep_at = (slots.by_owner.len() * 2).max(64);
                }
                gate
            }
        };
        Arc::new(Slot {
            gate,
            settling: self.settling,
            key,
            slots: self.slots.clone(),
        })
    }
}

impl Slot {
    /// Waits for the gate (an attempt, release or settle of this owner in
    /// progress); `None` when `deadline` came first.
    pub(crate) async fn enter(&self, deadline: Option<Instant>) -> Option<Gate> {
        let entering = self.gate.clone().lock_owned();
        match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, entering).await.ok(),
            None => Some(entering.await),
        }
    }

    pub(crate) fn settling(&self) -> Settling {
        self.settling
    }
}

impl Ledger {
    pub(crate) fn settling(&self) -> Settling {
        self.settling
    }
}

/// Releases one hold that a guard stood for, through its owner's gate. The count
/// drops before the release is sent; a release that failed (whether or not it
/// ran), or whose caller went away while it was in flight, is settled from a task
/// of its own, so the hold does not outlive its guard.
///
/// A release that failed on the way (a cut connection, a refused one, a
/// timeout: it may or may not have run) is settled before the caller hears of
/// it: the settle asks the server, on the connection as it is now (a reconnect
/// included), how many holds the owner has, and releases the one this release
/// was for if it is still there. Once that answers, the hold is surely gone,
/// and the caller gets the release's outcome, not the failure of its first
/// try; only when the settle cannot reach the server within Redisson's
/// `retryAttempts` does the caller get the error (and the settle goes on).
///
/// A release that ends in an error, or finds no hold (`NotHeld`), is counted
/// here (feature `metrics`): every release of a hold comes this way.
pub(crate) async fn release_one(
    slot: &Slot,
    acquirer: &Arc<dyn Acquirer>,
    releaser: &Releaser,
    lease_ms: u64,
) -> Result<Released> {
    let released = release_gated(slot, acquirer, releaser, lease_ms).await;
    if !matches!(
        released,
        Ok(Released::StillHeld
            | Released::Freed
            | Released::FreedAndWoke { .. }
            | Released::Granted)
    ) {
        acquirer.target().labels.release_failed();
    }
    released
}

/// [`release_one`], unmeasured.
async fn release_gated(
    slot: &Slot,
    acquirer: &Arc<dyn Acquirer>,
    releaser: &Releaser,
    lease_ms: u64,
) -> Result<Released> {
    let Some(mut gate) = slot.enter(None).await else {
        return Err(Error::unexpected("release", "gate closed"));
    };
    *gate = gate.saturating_sub(1);
    let release = {
        let (releaser, acquirer) = (releaser.clone(), acquirer.clone());
        Box::pin(async move { releaser.send(&acquirer, lease_ms).await })
    };
    let (outcome, gate) = gated(release, gate, acquirer, releaser, lease_ms, slot.settling).await;
    let Err(failure) = outcome else {
        return outcome;
    };
    let (acquirer, releaser2, settling) = (acquirer.clone(), releaser.clone(), slot.settling);
    if !failure.is_transient() {
        releaser.conn().spawn_cleanup(async move {
            settle(acquirer, releaser2, gate, lease_ms, settling).await;
        });
        return Err(failure);
    }
    // From a task of its own, so that a caller who stops waiting cannot cut the
    // settle short; the caller hears as soon as it is done, or given up on.
    let (settled, outcome) = tokio::sync::oneshot::channel();
    let believed = *gate;
    releaser.conn().spawn_cleanup(async move {
        settle_telling(acquirer, releaser2, gate, lease_ms, settling, Some(settled)).await;
    });
    match outcome.await {
        // The owner's holds are what its guards stand for: this one is gone.
        Ok(true) if believed == 0 => Ok(Released::Freed),
        Ok(true) => Ok(Released::StillHeld),
        _ => Err(failure),
    }
}

/// A command of an owner on its way to the server, sent with the owner's gate
/// held; completes with its outcome and the gate. Dropped while in flight, it is
/// finished in a task of its own that keeps the gate and then settles the owner's
/// count, since nobody is left to receive the outcome.
pub(crate) type Gated<T> = FinishOnDrop<T, Gate>;

/// `command`, sent with `gate` held, as a [`Gated`] future.
pub(crate) fn gated<T: Send + 'static>(
    command: BoxFuture<Result<T>>,
    gate: Gate,
    acquirer: &Arc<dyn Acquirer>,
    releaser: &Releaser,
    lease_ms: u64,
    settling: Settling,
) -> Gated<T> {
    let (acquirer, settler) = (acquirer.clone(), releaser.clone());
    let orphaned: Orphaned<T, Gate> =
        Box::new(move |_, gate| Box::pin(settle(acquirer, settler, gate, lease_ms, settling)));
    FinishOnDrop::new(releaser.conn(), command, gate, orphaned)
}

/// Makes the server agree with the gate's count: releases the holds of the owner
/// beyond it and leaves a queue place, retrying every `settling.retry` for a
/// lease plus `settling.budget` at most (by then a hold the doubtful command
/// took, unrenewed, has ended anyway unless the server ran it even later). Runs with the gate held, so nothing of this owner
/// interleaves; gives it up when done.
pub(crate) async fn settle(
    acquirer: Arc<dyn Acquirer>,
    releaser: Releaser,
    gate: Gate,
    lease_ms: u64,
    settling: Settling,
) {
    settle_telling(acquirer, releaser, gate, lease_ms, settling, None).await;
}

/// [`settle`], telling `caller` (a release waiting to answer its own caller)
/// `true` as soon as the server agrees, or `false` once
/// `settling.caller_attempts` tries in a row have failed or the settle gave up;
/// the settle itself goes on for its whole budget either way.
async fn settle_telling(
    acquirer: Arc<dyn Acquirer>,
    releaser: Releaser,
    gate: Gate,
    lease_ms: u64,
    settling: Settling,
    mut caller: Option<tokio::sync::oneshot::Sender<bool>>,
) {
    let mut tell = |settled: bool| {
        if let Some(caller) = caller.take() {
            let _ = caller.send(settled);
        }
    };
    // Every settle of a lock's attempt or release comes this way.
    acquirer.target().labels.settled();
    let deadline = Instant::now() + Duration::from_millis(lease_ms) + settling.budget;
    let believed = *gate;
    let settled = crate::engine::retry::until_settled(
        deadline,
        settling.retry,
        || settle_once(&acquirer, &releaser, believed, lease_ms),
        |failed| {
            if failed > settling.caller_attempts {
                tell(false);
            }
        },
    )
    .await;
    match settled {
        Ok(()) => tell(true),
        // Out of budget (or refused for good): a hold that did land was never
        // renewed and ends with its lease.
        Err(e) => {
            tell(false);
            crate::trace::warn_event!(
                "lock {:?}: settling an operation of unknown outcome gave up (a hold it \
                 took ends with its lease): {e}",
                acquirer.name()
            );
        }
    }
    drop(gate);
}

async fn settle_once(
    acquirer: &Arc<dyn Acquirer>,
    releaser: &Releaser,
    believed: u32,
    lease_ms: u64,
) -> Result<()> {
    // A grant made to this owner by its client's release is counted on the
    // server as a hold of it: given back below like any other, so it is no
    // longer the heir's to take.
    releaser.doubt_heir(acquirer);
    let held = held_on_server(acquirer, releaser.conn()).await?;
    for _ in believed..held {
        if releaser.send(acquirer, lease_ms).await? == Released::NotHeld {
            break;
        }
    }
    if acquirer.waits().leaves_a_place() {
        acquirer.clone().abandon(releaser.conn().clone()).await?;
    }
    Ok(())
}

/// How many holds the server counts for the acquirer's owner (asked on the
/// client's connection, so after any command of this owner sent before).
pub(crate) async fn held_on_server(acquirer: &Arc<dyn Acquirer>, conn: &Conn) -> Result<u32> {
    let field = acquirer.count_field();
    let count: Option<i64> = redis::cmd("HGET")
        .arg(acquirer.name())
        .arg(field)
        .query_async(&mut conn.clone())
        .await
        .map_err(|e| Error::from_redis(acquirer.name(), e))?;
    Ok(count.map_or(0, |n| u32::try_from(n.max(0)).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        Ledger::new(Settling {
            retry: Duration::from_millis(10),
            budget: Duration::from_millis(10),
            caller_attempts: 1,
        })
    }

    fn entries(ledger: &Ledger) -> usize {
        Slots::locked(&ledger.slots).by_owner.len()
    }

    #[test]
    fn the_last_slot_of_an_owner_takes_its_entry_with_it() {
        let ledger = ledger();
        let name: Arc<str> = Arc::from("orders");
        let first = ledger.slot(&name, "owner:1");
        let again = ledger.slot(&name, "owner:1");
        let other = ledger.slot(&name, "owner:2");
        assert!(Arc::ptr_eq(&first.gate, &again.gate), "one gate per owner");
        assert_eq!(entries(&ledger), 2);
        drop(first);
        assert_eq!(entries(&ledger), 2, "a slot of the owner is left");
        drop(again);
        assert_eq!(entries(&ledger), 1);
        drop(other);
        assert_eq!(entries(&ledger), 0);
    }

    #[tokio::test]
    async fn a_gate_held_past_its_slot_leaves_the_entry_to_the_sweep() {
        let ledger = ledger();
        let name: Arc<str> = Arc::from("orders");
        let slot = ledger.slot(&name, "owner:1");
        let gate = slot.enter(None).await;
        drop(slot);
        assert_eq!(entries(&ledger), 1);
        // The owner comes back while its gate is still held: the same gate.
        let back = ledger.slot(&name, "owner:1");
        drop(gate);
        assert!(back.enter(None).await.is_some());
        drop(back);
        assert_eq!(entries(&ledger), 0);
    }
}
