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

use crate::engine::contract::Acquirer;
use crate::engine::line::Lines;
use crate::error::Result;
use crate::transport::conn::Conn;
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
}

impl Releaser {
    pub(crate) fn new(conn: Conn, lines: Arc<Lines>, sync: QuietSync) -> Self {
        Releaser { conn, lines, sync }
    }

    /// The client's connection.
    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    /// Sends one release of `ops`' owner, restarting the lease of the holds
    /// that remain with `lease_ms`; the caller holds the owner's gate.
    pub(crate) async fn send(&self, ops: &Arc<dyn Acquirer>, lease_ms: u64) -> Result<Released> {
        let released = ops.clone().release(self.conn.clone(), lease_ms).await?;
        if released == Released::FreedAndWoke {
            // Before anything else is awaited: newcomers of this client must see
            // the hand-off as soon as possible.
            self.lines.handed_off(&ops.target().name);
        }
        if released != Released::NotHeld {
            self.sync.run(&mut self.conn.clone()).await;
        }
        Ok(released)
    }
}
