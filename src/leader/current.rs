//! Who leads now, readable by anyone: the inspector's snapshot of the fenced
//! lock (holder, owner, identity, token), joined with the election's record
//! for "since when" when a participant of this crate wrote one.

use std::time::Duration;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::inspect::{Kind, Owner};

use super::record;

/// How often a reading is retried when the record is of a newer win than
/// the snapshot (a win between the two reads).
const READS: usize = 3;

/// The current leader of an election, as [`LeaderElection::leader`] reads it.
///
/// [`LeaderElection::leader`]: crate::LeaderElection::leader
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// Who leads: its owner field, client id and thread, and its identity
    /// (host, pid, name) when its client announced one; a Java
    /// `RFencedLock` holder has none.
    pub owner: Owner,
    /// The epoch it leads in: the fenced lock's current token, greater than
    /// every earlier leader's. 0 when no token was ever drawn for the name (a
    /// plain `RLock` of that name holds it: no election's participant).
    pub epoch: u64,
    /// When it won, in epoch milliseconds on the server's clock; `None` for a
    /// leader that wrote no record (a Java `RFencedLock` holder) or when the
    /// record could not be matched to it.
    pub since_ms: Option<u64>,
    /// How long its hold lasts unless renewed (the lock's PTTL when read).
    pub lease_left: Option<Duration>,
}

/// Reads who leads election `name`.
pub(super) async fn read(client: &Engine, name: &str) -> Result<Option<Leader>> {
    let mut last = None;
    for _ in 0..READS {
        let Some(mut leader) = holder(client, name).await? else {
            return Ok(None);
        };
        match record::read(&mut client.conn.clone(), name).await? {
            Some(r) if r.epoch == leader.epoch && r.owner == leader.owner.field => {
                leader.since_ms = Some(r.since_ms);
                return Ok(Some(leader));
            }
            // A newer win was recorded after the snapshot: read both again.
            Some(r) if r.epoch > leader.epoch => last = Some(leader),
            _ => return Ok(Some(leader)),
        }
    }
    Ok(last)
}

/// The fenced lock's holder, without "since when".
async fn holder(client: &Engine, name: &str) -> Result<Option<Leader>> {
    let snapshot = crate::inspect::inspect_holders(client, name).await?;
    match snapshot.kind {
        Kind::Absent | Kind::Lock | Kind::FencedLock => {}
        // Another kind, or a user's key, lives under the name: no election.
        _ => {
            return Err(Error::WrongType {
                name: name.to_owned(),
            })
        }
    }
    let epoch = snapshot.fencing_token.unwrap_or(0);
    Ok(snapshot.holders.into_iter().next().map(|holder| Leader {
        owner: holder.owner,
        epoch,
        since_ms: None,
        lease_left: holder.lease_left,
    }))
}
