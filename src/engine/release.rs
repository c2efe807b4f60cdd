//! The one way a hold of this client is given back on the server.
//!
//! `unlock()`, a guard's drop, a detached hold released as the client ends, a
//! hold that no replica confirmed, and the settle of an operation of unknown
//! outcome all send their release here (through the owner's gate, see
//! `ledger.rs`), so each sends the same commands, in one pass:
//!
//! ```text
//! the line (line.rs): the word that a task here holds it is void; the heir
//!   to name (a fair lock)
//! → the kind's release script (through the engine's contract)
//! → the heir told what came of it (successor.rs)
//! → what it did, for this client's waiters (handoff.rs): a hand-off window
//!   when it woke a waiter, or whether a fair release granted or passed over
//! → with replica sync on, a WAIT for the replicas, so that a failover soon
//!   after loses the release no more than it loses the acquire
//! ```

use std::sync::Arc;

use tokio::time::Instant;

use crate::engine::contract::Acquirer;
use crate::engine::handoff::{self, Handoffs};
use crate::engine::line::Lines;
use crate::error::Result;
use crate::transport::conn::Conn;
use crate::transport::pubsub::EpochReader;
use crate::transport::replication::ReplicaSync;
use crate::transport::scripts::Released;

/// What a release needs of the client: cheap to clone, and never the client
/// itself, so a release running in the background does not keep a client
/// alive past its last handle.
#[derive(Debug, Clone)]
pub(crate) struct Releaser {
    conn: Conn,
    lines: Arc<Lines>,
    handoffs: Arc<Handoffs>,
    sync: ReplicaSync,
    /// The connection epoch, recorded with a grant (see `successor.rs`).
    epoch: EpochReader,
}

impl Releaser {
    pub(crate) fn new(
        conn: Conn,
        (lines, handoffs): (Arc<Lines>, Arc<Handoffs>),
        sync: ReplicaSync,
        epoch: EpochReader,
    ) -> Self {
        Releaser {
            conn,
            lines,
            handoffs,
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
        let fair = ops.waits().queues();
        let heir = fair
            .then(|| self.lines.releasing(&ops.target().name, ops.owner()))
            .flatten();
        let (sent, epoch) = (Instant::now(), self.epoch.now());
        let naming = heir.as_ref().map(|(_, naming)| naming.clone());
        let released = ops
            .clone()
            .release_to(self.conn.clone(), lease_ms, naming)
            .await;
        let named = heir.is_some();
        if let Some((heir, _)) = heir {
            heir.told(&released, (sent, epoch), &self.conn);
        }
        let released = released?;
        // Before anything else is awaited: newcomers of this client must see
        // the hand-off as soon as possible. (A fair lock's newcomers queue:
        // they never barge past its woken head.)
        let news = match released {
            // Its message reached other clients (more than one, or one while
            // this client has no waiter of its own): the lock is contended
            // across clients (see `lock/client_order.rs`).
            Released::FreedAndWoke { listeners } if !fair => Some(handoff::Released::Woke {
                others: listeners as usize > usize::from(self.lines.waiting(ops.name()) > 0),
            }),
            Released::Granted if named => Some(handoff::Released::Granted),
            Released::Freed | Released::FreedAndWoke { .. } if named => {
                Some(handoff::Released::PassedOver)
            }
            _ => None,
        };
        if let Some(news) = news {
            self.handoffs.released(&ops.target().name, news);
        }
        if released != Released::NotHeld {
            self.sync.quietly().await;
        }
        Ok(released)
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
