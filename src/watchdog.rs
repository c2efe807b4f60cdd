//! The watchdog: one renewal task per client keeps every hold taken without an
//! explicit lease alive, many holds per script call.
//!
//! A hold is registered *before* its acquire is sent ([`Watchdog::register`]) and
//! becomes renewable once the acquire succeeds ([`Registration::activate`]); it
//! stops being renewed *before* its release is sent ([`Renewal`] is dropped or
//! released first). So a hold never exists unrenewed, and a renewal never outlives
//! an unlock. A renewal that finds the hold gone marks it lost, wakes its holder and
//! forgets it; a renewal that fails (connection trouble) is simply tried again on
//! the next tick, a third of the lease later.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::{oneshot, Notify};

use crate::scripts;

/// Holds renewed per script call, as Redisson does.
pub(crate) const RENEW_BATCH: usize = 100;

/// Shared between a holder and the watchdog: whether the hold was found lost.
#[derive(Debug, Default)]
pub(crate) struct HoldState {
    lost: AtomicBool,
    lost_signal: Notify,
}

impl HoldState {
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Completes once the watchdog has found the hold lost.
    pub(crate) async fn wait_lost(&self) {
        loop {
            let notified = self.lost_signal.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            notified.await;
        }
    }

    fn mark_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.lost_signal.notify_waiters();
    }
}

type HoldKey = (String, String);

#[derive(Debug)]
struct Entry {
    /// Holds acquired and renewable.
    active: u32,
    /// Acquires sent (or about to be) whose outcome is not known yet.
    pending: u32,
    /// Bumped on every activation, so a "gone" verdict about an older hold does not
    /// cancel a newer one of the same owner.
    generation: u64,
    state: Arc<HoldState>,
}

#[derive(Debug, Default)]
struct Registry {
    holds: Mutex<HashMap<HoldKey, Entry>>,
}

impl Registry {
    fn holds(&self) -> MutexGuard<'_, HashMap<HoldKey, Entry>> {
        // Critical sections are single map updates; a poisoned lock holds no
        // half-done state.
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `change` to the entry of `key` (only while it still carries `state`,
    /// when one is given) and removes it once nothing is active or pending.
    fn update(
        &self,
        key: &HoldKey,
        state: Option<&Arc<HoldState>>,
        change: impl FnOnce(&mut Entry),
    ) {
        let mut holds = self.holds();
        if let Some(entry) = holds.get_mut(key) {
            if state.is_none_or(|s| Arc::ptr_eq(&entry.state, s)) {
                change(entry);
                if entry.active == 0 && entry.pending == 0 {
                    holds.remove(key);
                }
            }
        }
    }

    /// The active holds of `key` are gone: tell their holders and stop renewing
    /// them. Pending acquires of the same owner keep the entry, with a fresh state.
    fn mark_lost(holds: &mut HashMap<HoldKey, Entry>, key: &HoldKey) {
        if let Some(entry) = holds.get_mut(key) {
            entry.state.mark_lost();
            entry.state = Arc::default();
            entry.active = 0;
            if entry.pending == 0 {
                holds.remove(key);
            }
        }
    }
}

/// The client's watchdog. Dropping it stops the renewal task.
#[derive(Debug)]
pub(crate) struct Watchdog {
    registry: Arc<Registry>,
    _stop: oneshot::Sender<()>,
}

impl Watchdog {
    /// Starts the renewal task: every `lease / 3`, restart `lease` on every active hold.
    pub(crate) fn start(conn: ConnectionManager, lease: Duration) -> Self {
        let registry = Arc::new(Registry::default());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(run_renewals(registry.clone(), conn, lease, stopped));
        Watchdog {
            registry,
            _stop: stop,
        }
    }

    /// Registers a hold about to be acquired by `owner` on `name`.
    pub(crate) fn register(&self, name: &str, owner: &str) -> Registration {
        let key = (name.to_owned(), owner.to_owned());
        let mut holds = self.registry.holds();
        let entry = holds.entry(key.clone()).or_insert_with(|| Entry {
            active: 0,
            pending: 0,
            generation: 0,
            state: Arc::default(),
        });
        entry.pending += 1;
        Registration {
            registry: self.registry.clone(),
            key: Some(key),
        }
    }

    /// Stops renewing one hold of `owner` on `name` (an unlock through the lock
    /// handle rather than a guard). Returns whether one was registered.
    pub(crate) fn release_one(&self, name: &str, owner: &str) -> bool {
        let key = (name.to_owned(), owner.to_owned());
        let mut holds = self.registry.holds();
        let Some(entry) = holds.get_mut(&key) else {
            return false;
        };
        if entry.active == 0 {
            return false;
        }
        entry.active -= 1;
        if entry.active == 0 && entry.pending == 0 {
            holds.remove(&key);
        }
        true
    }

    /// Stops renewing every hold on `name`, whoever owns it (force unlock).
    pub(crate) fn forget_lock(&self, name: &str) {
        let mut holds = self.registry.holds();
        let keys: Vec<HoldKey> = holds
            .keys()
            .filter(|(lock, _)| lock == name)
            .cloned()
            .collect();
        for key in keys {
            Registry::mark_lost(&mut holds, &key);
        }
    }

    /// How many distinct holds are renewed (for tests and diagnostics).
    #[allow(dead_code)]
    pub(crate) fn active_holds(&self) -> usize {
        self.registry
            .holds()
            .values()
            .filter(|e| e.active > 0)
            .count()
    }
}

/// A hold registered before its acquire; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct Registration {
    registry: Arc<Registry>,
    key: Option<HoldKey>,
}

impl Registration {
    /// The acquire succeeded: renew this hold from now on.
    pub(crate) fn activate(mut self) -> Renewal {
        let key = self.key.take().unwrap_or_default();
        let mut holds = self.registry.holds();
        let entry = holds.entry(key.clone()).or_insert_with(|| Entry {
            active: 0,
            pending: 1,
            generation: 0,
            state: Arc::default(),
        });
        entry.pending -= 1;
        entry.active += 1;
        entry.generation += 1;
        let state = entry.state.clone();
        drop(holds);
        Renewal {
            registry: self.registry.clone(),
            key,
            state: Some(state),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.registry.update(&key, None, |entry| entry.pending -= 1);
        }
    }
}

/// One renewed hold; dropping it (or [`Renewal::stop`]) stops renewing it.
#[derive(Debug)]
pub(crate) struct Renewal {
    registry: Arc<Registry>,
    key: HoldKey,
    state: Option<Arc<HoldState>>,
}

impl Renewal {
    pub(crate) fn state(&self) -> Option<&Arc<HoldState>> {
        self.state.as_ref()
    }

    /// Keeps renewing after this handle is gone; the hold is then released through
    /// [`Watchdog::release_one`].
    pub(crate) fn detach(mut self) {
        self.state = None;
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.registry
                .update(&self.key, Some(&state), |entry| entry.active -= 1);
        }
    }
}

async fn run_renewals(
    registry: Arc<Registry>,
    mut conn: ConnectionManager,
    lease: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate; nothing is due yet
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = ticks.tick() => renew_all(&registry, &mut conn, lease_ms).await,
        }
    }
}

/// One renewal round over every active hold.
async fn renew_all(registry: &Registry, conn: &mut ConnectionManager, lease_ms: u64) {
    let due: Vec<(HoldKey, u64, Arc<HoldState>)> = registry
        .holds()
        .iter()
        .filter(|(_, e)| e.active > 0)
        .map(|(k, e)| (k.clone(), e.generation, e.state.clone()))
        .collect();
    for batch in due.chunks(RENEW_BATCH) {
        let holds: Vec<(&str, &str)> = batch
            .iter()
            .map(|((name, owner), _, _)| (name.as_str(), owner.as_str()))
            .collect();
        // An error leaves every hold registered: the next tick tries again, well
        // within the lease (three ticks per lease).
        let Ok(renewed) = scripts::lock_renew(conn, &holds, lease_ms).await else {
            continue;
        };
        for ((key, generation, state), still_held) in batch.iter().zip(renewed) {
            if still_held {
                continue;
            }
            let mut holds = registry.holds();
            let unchanged = holds
                .get(key)
                .is_some_and(|e| Arc::ptr_eq(&e.state, state) && e.generation == *generation);
            if unchanged {
                Registry::mark_lost(&mut holds, key);
            }
        }
    }
}
