//! Holds whose guard was detached (Java's `lock()` with no guard to carry):
//! one record each, holding everything that keeps the hold.
//!
//! A detached hold still has an owner's count in the ledger, maybe a renewal
//! by the watchdog, and a record that makes a wait behind it a self-wait. Each
//! of those ends when its token is dropped, so one [`DetachedHold`] owns the
//! three tokens, and every way a detached hold ends (an `unlock()` by its
//! owner, a forced unlock, the client's end) takes the record out of
//! [`Detached`] and drops it: they cannot disagree about what is left.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::engine::contract::{Acquirer, RenewKind};
use crate::engine::ledger::Slot;
use crate::engine::self_wait::HeldMark;
use crate::engine::watchdog::Renewal;

/// One detached hold and what keeps it.
#[derive(Debug)]
pub(crate) struct DetachedHold {
    /// The scripts that release it (at the client's end, when nobody else can).
    pub(crate) acquirer: Arc<dyn Acquirer>,
    /// The lease its release restarts on the owner's remaining holds.
    pub(crate) lease_ms: u64,
    /// The owner's slot in the ledger: kept, its count outlives the guard.
    pub(crate) slot: Arc<Slot>,
    /// The watchdog's renewal, for a hold without an explicit lease.
    renewal: Option<Renewal>,
    /// The self-wait record: a wait of its owner's task behind it is named
    /// (kept for what its drop does).
    _mark: Option<HeldMark>,
}

impl DetachedHold {
    pub(crate) fn new(
        acquirer: Arc<dyn Acquirer>,
        lease_ms: u64,
        slot: Arc<Slot>,
        renewal: Option<Renewal>,
        mark: Option<HeldMark>,
    ) -> Self {
        DetachedHold {
            acquirer,
            lease_ms,
            slot,
            renewal,
            _mark: mark,
        }
    }

    /// Renewed by the watchdog (no explicit lease).
    pub(crate) fn is_renewed(&self) -> bool {
        self.renewal.is_some()
    }

    /// Renewed no more: its release is on its way.
    pub(crate) fn stop_renewing(&mut self) {
        self.renewal = None;
    }
}

/// Which lock, owner field and renewal kind a detached hold is of.
type HoldKey = (Arc<str>, String, RenewKind);

/// The client's detached holds, newest last per lock and owner.
#[derive(Debug, Default)]
pub(crate) struct Detached {
    holds: Mutex<HashMap<HoldKey, Vec<DetachedHold>>>,
}

impl Detached {
    /// Keeps `hold` until its owner's `unlock()`, a forced unlock or the
    /// client's end.
    pub(crate) fn keep(&self, hold: DetachedHold) {
        let (field, kind) = hold.acquirer.renewal();
        let key = (hold.acquirer.target().name.clone(), field.to_owned(), kind);
        self.map().entry(key).or_default().push(hold);
    }

    /// The newest detached hold of owner `field` on `name`, taken out (an
    /// `unlock()` through the lock handle).
    pub(crate) fn take_newest(
        &self,
        name: &Arc<str>,
        field: &str,
        kind: RenewKind,
    ) -> Option<DetachedHold> {
        let key = (name.clone(), field.to_owned(), kind);
        let mut holds = self.map();
        let newest = holds.get_mut(&key).and_then(Vec::pop);
        if holds.get(&key).is_some_and(Vec::is_empty) {
            holds.remove(&key);
        }
        newest
    }

    /// Every detached hold on `name`, whoever owns it, taken out (the lock was
    /// forced open).
    pub(crate) fn take_all_of(&self, name: &str) -> Vec<DetachedHold> {
        let mut holds = self.map();
        let keys: Vec<HoldKey> = holds
            .keys()
            .filter(|(lock, _, _)| &**lock == name)
            .cloned()
            .collect();
        keys.iter()
            .filter_map(|key| holds.remove(key))
            .flatten()
            .collect()
    }

    /// Every detached hold, taken out (the client is going away).
    pub(crate) fn take_all(&self) -> Vec<DetachedHold> {
        self.map().drain().flat_map(|(_, holds)| holds).collect()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<HoldKey, Vec<DetachedHold>>> {
        // Poisoned only by a panic while it was held, which leaves the map whole.
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }
}
