//! The watchdog: one renewal task per client keeps every hold taken without an
//! explicit lease alive, many holds per script call.
//!
//! A hold becomes renewable the moment its acquire's reply says it exists
//! ([`Watchdog::activate`]: its lease counts from the send, and the next tick
//! comes within a third of it); it stops being renewed *before* its release is
//! sent ([`Renewal`] is dropped or released first). So a renewal never outlives
//! an unlock. A waiter has no entry: only holds are known here. A renewal that finds the hold gone marks it lost, wakes its holder and
//! forgets it; a renewal that fails (connection trouble) is simply tried again on
//! the next tick, a third of the lease later. A hold whose term
//! (`Config::max_hold`) is over is not renewed again: it ends with its lease.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::transport::conn::Conn;
use crate::transport::keys::{cluster_slot, Slot};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::contract::RenewKind;
use crate::engine::validity::Validity;
use crate::transport::replication::ReplicaSync;
use crate::transport::scripts;

/// Renewal script calls a tick has outstanding at once (pipelined on the
/// multiplexed connection).
const RENEWALS_IN_FLIGHT: usize = 32;

/// (lock name, hash field, kind).
type HoldKey = (String, String, RenewKind);

/// Holds due for renewal, each with the newest generation a renewal covers.
type Due = Vec<(HoldKey, u64)>;

/// The holds one owner has on one lock, as this client knows them.
#[derive(Debug, Default)]
struct Entry {
    /// Holds acquired and renewed, in activation order.
    holds: Vec<ActiveHold>,
}

#[derive(Debug)]
struct ActiveHold {
    /// Activation order, over the whole client (so an entry made again after
    /// its last hold went never reuses a number a renewal still in flight may
    /// answer for): a "gone" verdict covers the holds activated before the
    /// renewal that found it, never a newer one.
    generation: u64,
    validity: Arc<Validity>,
}

impl Entry {
    /// The newest hold a renewal now would cover: the newest still within its
    /// term (a hold past it is renewed no more; it ends with its lease).
    fn due(&self, now: Instant) -> Option<u64> {
        let hold = self
            .holds
            .iter()
            .rev()
            .find(|h| !h.validity.term_over(now))?;
        Some(hold.generation)
    }

    fn is_unused(&self) -> bool {
        self.holds.is_empty()
    }

    /// Marks lost, and forgets, every hold activated up to `generation`.
    fn lose_up_to(&mut self, generation: u64) {
        self.holds.retain(|hold| {
            let lost = hold.generation <= generation;
            if lost {
                hold.validity.mark_lost();
            }
            !lost
        });
    }

    /// A renewal sent at `sent` restarted `lease` on every hold activated up to
    /// `generation`: extends their validity. One that had already run out on this
    /// client's clock stays lost and is forgotten.
    fn confirm_up_to(&mut self, generation: u64, sent: Instant, lease: Duration) {
        self.holds
            .retain(|hold| hold.generation > generation || hold.validity.confirm(sent, lease));
    }
}

#[derive(Debug, Default)]
struct Registry {
    holds: Mutex<HashMap<HoldKey, Entry>>,
    /// The next activation's generation.
    next_generation: AtomicU64,
}

impl Registry {
    fn holds(&self) -> MutexGuard<'_, HashMap<HoldKey, Entry>> {
        // Critical sections are single map updates; a poisoned lock holds no
        // half-done state.
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Renews the hold `validity` stands for, of `key`, from now on.
    fn activate(self: &Arc<Self>, key: HoldKey, validity: Arc<Validity>) -> Renewal {
        let mut holds = self.holds();
        // Under the map's lock: activations of one key are numbered in order.
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        holds
            .entry(key.clone())
            .or_default()
            .holds
            .push(ActiveHold {
                generation,
                validity,
            });
        drop(holds);
        Renewal {
            registry: self.clone(),
            key,
            generation,
            active: true,
        }
    }

    /// Applies `change` to the entry of `key`, removing it once it is unused.
    fn update<T>(&self, key: &HoldKey, change: impl FnOnce(&mut Entry) -> T) -> Option<T> {
        let mut holds = self.holds();
        let entry = holds.get_mut(key)?;
        let result = change(entry);
        if entry.is_unused() {
            holds.remove(key);
        }
        Some(result)
    }
}

/// The client's watchdog. Dropping it stops the renewal task.
#[derive(Debug)]
pub(crate) struct Watchdog {
    registry: Arc<Registry>,
    _stop: oneshot::Sender<()>,
}

impl Watchdog {
    /// Starts the renewal task on the client's background runtime: every
    /// `lease / 3`, restart `lease` on every active hold. (The client's
    /// identity is refreshed at the same pace by a task of its own, see
    /// `identity.rs`, so that a slow or refused refresh never delays a renewal.)
    /// `batch` holds at most per script call (Redisson's
    /// `lockWatchdogBatchSize`: [`Config::lock_watchdog_batch_size`](crate::Config::lock_watchdog_batch_size)).
    pub(crate) fn start(conn: Conn, lease: Duration, batch: usize, sync: ReplicaSync) -> Self {
        let registry = Arc::new(Registry::default());
        let (stop, stopped) = oneshot::channel();
        let spawner = conn.spawner().clone();
        spawner.spawn(run_renewals(
            registry.clone(),
            conn,
            (lease, batch),
            sync,
            stopped,
        ));
        Watchdog {
            registry,
            _stop: stop,
        }
    }

    /// Renews, from now on, a hold just acquired on `name` (counted in hash
    /// field `field`), extending `validity` with each confirmed renewal.
    /// Nothing is registered before the hold exists: a waiter keeps no entry.
    pub(crate) fn activate(
        &self,
        name: &str,
        field: &str,
        kind: RenewKind,
        validity: Arc<Validity>,
    ) -> Renewal {
        self.registry
            .activate((name.to_owned(), field.to_owned(), kind), validity)
    }

    /// Stops renewing every hold on `name`, whoever owns it (force unlock), and
    /// reports them lost.
    pub(crate) fn forget_lock(&self, name: &str) {
        self.registry.holds().retain(|(lock, _, _), entry| {
            if lock == name {
                entry.lose_up_to(u64::MAX);
            }
            !entry.is_unused()
        });
    }

    /// How many (lock, owner) pairs have renewed holds right now.
    pub(crate) fn active_holds(&self) -> usize {
        // A hold past its term is renewed no more: it does not count.
        let now = Instant::now();
        self.registry
            .holds()
            .values()
            .filter(|e| e.due(now).is_some())
            .count()
    }
}

/// One renewed hold; dropping it stops renewing it.
#[derive(Debug)]
pub(crate) struct Renewal {
    registry: Arc<Registry>,
    key: HoldKey,
    generation: u64,
    active: bool,
}

impl Drop for Renewal {
    fn drop(&mut self) {
        if std::mem::take(&mut self.active) {
            let generation = self.generation;
            self.registry.update(&self.key, |entry| {
                entry.holds.retain(|hold| hold.generation != generation);
            });
        }
    }
}

async fn run_renewals(
    registry: Arc<Registry>,
    mut conn: Conn,
    (lease, batch): (Duration, usize),
    sync: ReplicaSync,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate; nothing is due yet
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = ticks.tick() => {
                if renew_all(&registry, &mut conn, lease, batch).await {
                    sync.quietly().await;
                }
            }
        }
    }
}

/// One renewal round over every active hold, batched per kind, `batch` holds
/// at most per call. Returns whether any hold was due (and so a write may have
/// been made).
async fn renew_all(registry: &Registry, conn: &mut Conn, lease: Duration, batch: usize) -> bool {
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let now = Instant::now();
    let due: Due = registry
        .holds()
        .iter()
        .filter_map(|(key, entry)| Some((key.clone(), entry.due(now)?)))
        .collect();
    let any_due = !due.is_empty();
    // One script call touches keys of one slot only in a cluster: group by kind
    // and, there, by slot.
    let mut groups: HashMap<(RenewKind, Option<Slot>), Due> = HashMap::new();
    for hold in due {
        let slot = conn.is_cluster().then(|| cluster_slot(&hold.0 .0));
        groups.entry((hold.0 .2, slot)).or_default().push(hold);
    }
    // The batches go out together, at most RENEWALS_IN_FLIGHT at a time on
    // the multiplexed connection: sent one after the other, holds spread over
    // thousands of a cluster's slots (one call per slot) took longer per tick
    // than a lease, and expired while being renewed.
    let mut batches = Vec::new();
    for ((kind, _), mut holds) in groups {
        while !holds.is_empty() {
            let rest = holds.split_off(holds.len().min(batch));
            batches.push(renew_batch(conn.clone(), kind, holds, lease_ms));
            holds = rest;
        }
    }
    let mut answered = futures_util::StreamExt::buffer_unordered(
        futures_util::stream::iter(batches),
        RENEWALS_IN_FLIGHT,
    );
    while let Some((batch, sent, renewed)) = futures_util::StreamExt::next(&mut answered).await {
        // An error leaves every hold registered: the next tick tries again,
        // well within the lease (three ticks per lease).
        let renewed = match renewed {
            Ok(renewed) => renewed,
            Err(e) => {
                crate::trace::warn_event!(
                    "renewing {} hold(s) failed (retried next tick, a third of a lease on): {e}",
                    batch.len()
                );
                continue;
            }
        };
        for ((key, newest), still_held) in batch.iter().zip(renewed) {
            if still_held {
                registry.update(key, |entry| entry.confirm_up_to(*newest, sent, lease));
            } else {
                // Gone on the server: every hold this round covered is lost. A
                // hold activated since (a re-entry on a freed key) is not.
                crate::trace::warn_event!(
                    "{:?}: lease lost (renewal found the hold or permit gone: expired, forced, released elsewhere or taken over)",
                    key.0
                );
                registry.update(key, |entry| entry.lose_up_to(*newest));
            }
        }
    }
    any_due
}

/// One renewal script call for `batch` (holds of one kind, and in a cluster of
/// one slot); with when it was sent, for the holds' validity.
async fn renew_batch(
    mut conn: Conn,
    kind: RenewKind,
    batch: Due,
    lease_ms: u64,
) -> (Due, Instant, crate::Result<Vec<bool>>) {
    let holds: Vec<(&str, &str)> = batch
        .iter()
        .map(|((name, field, _), _)| (name.as_str(), field.as_str()))
        .collect();
    let sent = Instant::now();
    let renewed = match kind {
        RenewKind::HashField => scripts::lock_renew(&mut conn, &holds, lease_ms).await,
        RenewKind::ReadHolds => scripts::read_renew(&mut conn, &holds, lease_ms).await,
        RenewKind::GroupMembers => scripts::group_renew(&mut conn, &holds, lease_ms).await,
        RenewKind::Permit => scripts::pes_renew(&mut conn, &holds, lease_ms).await,
        RenewKind::FairPermits => scripts::fsem_renew(&mut conn, &holds, lease_ms).await,
    };
    drop(holds);
    (batch, sent, renewed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::validity::Drift;

    fn validity() -> Arc<Validity> {
        let drift = Drift { factor: 0.01 };
        Arc::new(Validity::new(
            Instant::now(),
            Duration::from_secs(30),
            drift,
        ))
    }

    #[test]
    fn a_verdict_on_a_hold_gone_never_covers_a_later_hold_of_its_owner() {
        let registry = Arc::new(Registry::default());
        let key: HoldKey = ("orders".into(), "owner:1".into(), RenewKind::HashField);
        let first = registry.activate(key.clone(), validity());
        // A renewal of the first hold is in flight when it is released (its
        // entry goes with it), and the owner takes the lock again.
        let in_flight = first.generation;
        drop(first);
        assert!(registry.holds().is_empty());
        let again = validity();
        let _second = registry.activate(key.clone(), again.clone());
        // The renewal answers "gone" for the hold it was sent for.
        registry.update(&key, |entry| entry.lose_up_to(in_flight));
        assert!(
            !again.is_lost(),
            "the later hold is not the one the renewal found gone"
        );
    }
}
