//! The one way a hold of this client is given back on the server.
//!
//! `unlock()`, a guard's drop, a detached hold released as the client ends, a
//! hold that no replica confirmed, and the settle of an operation of unknown
//! outcome all send their release here (through the owner's gate, see
//! `ledger.rs`), so each sends the same commands: the kind's release script; a
//! hand-off record when the script freed the lock and woke a waiter, so this
//! client's newcomers let the woken waiter in first (see `line.rs`); and, with
//! replica sync on, a `WAIT` for the replicas, so a failover soon after loses the
//! release no more than it loses the acquire.

use std::sync::Arc;

use tokio::time::Instant;

use crate::engine::contract::Acquirer;
use crate::engine::line::Lines;
use crate::engine::successor::Successor;
use crate::error::Result;
use crate::transport::conn::Conn;
use crate::transport::pubsub::EpochReader;
use crate::transport::replication::QuietSync;
use crate::transport::scripts::Released;

/// What a release needs of the client: cheap to clone, and never the client
/// itself, so a release running in the background does not keep a client
/// alive past its last handle.
#[derive(Debug, Clone)]
pub(crate) struct Releaser {
    conn: Conn,
    lines: Arc<Lines>,
    sync: QuietSync,
    /// The connection epoch, recorded with a grant (see `successor.rs`).
    epoch: EpochReader,
}

impl Releaser {
    pub(crate) fn new(conn: Conn, lines: Arc<Lines>, sync: QuietSync, epoch: EpochReader) -> Self {
        Releaser {
            conn,
            lines,
            sync,
            epoch,
        }
    }

    /// The client's connection.
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Sends one release of `ops`' owner, restarting the lease of the holds
    /// that remain with `lease_ms`; the caller holds the owner's gate.
    ///
    /// A fair release names this client's next waiter for the lock, its heir
    /// (see `successor.rs`): the script grants it the lock when it is first in
    /// line, and the heir is told what came of it.
    pub(crate) async fn send(&self, ops: &Arc<dyn Acquirer>, lease_ms: u64) -> Result<Released> {
        let heir = self.heir_of(ops);
        let (sent, epoch) = (Instant::now(), self.epoch.now());
        let named = heir.as_ref().map(|heir| heir.named());
        let released = ops
            .clone()
            .release_to(self.conn.clone(), lease_ms, named)
            .await;
        if let Some(heir) = heir {
            self.tell(heir, &released, sent, epoch);
        }
        let released = released?;
        // (A fair lock's newcomers queue: they never barge past its woken head.)
        if released == Released::FreedAndWoke && !ops.waits().queues() {
            // Before anything else is awaited: newcomers of this client must see
            // the hand-off as soon as possible.
            self.lines.handed_off(&ops.target().name);
        }
        if released != Released::NotHeld {
            self.sync.run(&mut self.conn.clone()).await;
        }
        Ok(released)
    }

    /// The heir a release by `ops` names: the head of this client's line for
    /// a fair lock, offered as heir, never the releasing owner itself. Every
    /// fair release by this client (heir or not) also voids the word that
    /// one of its tasks holds the lock.
    fn heir_of(&self, ops: &Arc<dyn Acquirer>) -> Option<Arc<Successor>> {
        if !ops.waits().queues() {
            return None;
        }
        self.lines
            .releasing(&ops.target().name)
            .filter(|heir| heir.owner() != ops.owner())
    }

    /// Tells `heir` what came of a release sent at `sent` on connection
    /// `epoch` that named it: granted, not granted, or unknown. A heir that
    /// left meanwhile cannot take a grant made (or perhaps made) to it: it is
    /// given back here.
    fn tell(&self, heir: Arc<Successor>, released: &Result<Released>, sent: Instant, epoch: u64) {
        let name = heir.name();
        match released {
            Ok(Released::Granted) => self.lines.heir_granted(name, true),
            Ok(Released::Freed | Released::FreedAndWoke) => self.lines.heir_granted(name, false),
            _ => {}
        }
        let taken = match released {
            Ok(Released::Granted) => heir.granted(sent, epoch),
            Err(e) if !e.is_surely_not_executed() => heir.in_doubt(),
            other => {
                heir.passed_over(matches!(other, Ok(Released::FreedAndWoke)));
                true
            }
        };
        if !taken {
            let conn = self.conn.clone();
            self.conn.spawn_cleanup(heir.give_back(conn));
        }
    }

    /// An attempt of `ops`' owner is being settled (its outcome unknown): if
    /// that owner is this client's heir for the lock, a grant made to it may
    /// be given back by the settle, so it can no longer be taken as made.
    pub(crate) fn doubt_heir(&self, ops: &Arc<dyn Acquirer>) {
        if !ops.waits().queues() {
            return;
        }
        if let Some(heir) = self.lines.heir(&ops.target().name) {
            if heir.owner() == ops.owner() {
                heir.in_doubt();
            }
        }
    }
}
