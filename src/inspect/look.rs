//! The inspector's operations on a client: one snapshot, a scan, a watch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{
    read_fair_snapshot, read_snapshot, scan_names, Identity, Kind, Listeners, Skipped, Snapshot,
    MAX_ENTRIES,
};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::keys;

use super::rereads::Rereads;

/// The most objects one [`Client::scan`](crate::Client::scan) lists.
pub const MAX_SCAN: usize = 10_000;

/// Identities already looked up, by client id (a scan meets the same clients
/// under many names).
type Known = HashMap<String, Option<Identity>>;

/// How many reads a scan sends at once: the multiplexed connection pipelines
/// them, so a scan costs a round trip per batch of this many names, not per
/// name (a scan of 1,000 held locks: a median of 211 ms one by one, 41 ms in
/// batches; BENCHMARKS.md), while this client never has more than this many
/// of its reads outstanding. (`join_all` of a batch, not a stream of
/// futures: a lone lookup through `buffer_unordered` cost `inspect` some
/// 60 µs more, measured.)
const IN_FLIGHT: usize = 32;

/// The snapshot of `name`, with the listeners of its channels and the
/// identities of its owners.
pub(crate) async fn inspect(client: &Engine, name: &str, known: &mut Known) -> Result<Snapshot> {
    read_named(client, name, known, Channels::Counted).await
}

/// The same without the listeners (`PUBSUB NUMSUB`, one round trip less):
/// for an election's reading of who leads, which has no use for them.
pub(crate) async fn inspect_holders(client: &Engine, name: &str) -> Result<Snapshot> {
    read_named(client, name, &mut Known::new(), Channels::Skipped).await
}

/// Whether a reading counts the listeners of the object's channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channels {
    Counted,
    Skipped,
}

/// The holders and queue of `name` as read on `conn` by client `my_id`,
/// without listeners or identities: what a deadlock walk reads of each lock.
pub(crate) async fn holders_on(conn: &Conn, my_id: &str, name: &str) -> Result<Snapshot> {
    keys::validate_name(name)?;
    if conn.is_cluster() {
        keys::validate_cluster_name(name)?;
    }
    snapshot_of(conn, name, my_id).await
}

/// The snapshot of a valid `name`, read on `conn` by client `my_id`: one
/// script for every kind, and a second for a fair semaphore (its keys are
/// this crate's own: an inspector whose ACL grants Redisson's keys alone
/// reads the other kinds all the same, and a fair semaphore's hash alone).
async fn snapshot_of(conn: &Conn, name: &str, my_id: &str) -> Result<Snapshot> {
    let reply = crate::transport::scripts::inspect(&mut conn.clone(), name, MAX_ENTRIES).await?;
    let snapshot = read_snapshot(name, reply, my_id)?;
    if snapshot.kind != Kind::FairSemaphore {
        return Ok(snapshot);
    }
    match crate::transport::scripts::inspect_fair(&mut conn.clone(), name, MAX_ENTRIES).await {
        Ok(reply) => read_fair_snapshot(name, reply, my_id),
        // Refused (an ACL): the hash alone. A failure that may pass (a cut
        // connection) is the caller's to retry, not a partial answer.
        Err(e) if e.is_transient() => Err(e),
        Err(e) => {
            crate::trace::debug_event!(
                "inspecting the fair semaphore {name:?}: its line and leases could not be read ({e}): its hash alone is shown"
            );
            Ok(snapshot)
        }
    }
}

/// [`inspect`], counting the listeners or not.
async fn read_named(
    client: &Engine,
    name: &str,
    known: &mut Known,
    channels: Channels,
) -> Result<Snapshot> {
    keys::validate_name(name)?;
    if client.conn.is_cluster() {
        // Its auxiliary keys would live in other slots than its key.
        keys::validate_cluster_name(name)?;
    }
    let mut snapshot = read_object(client, name, channels).await?;
    name_owners(client, std::slice::from_mut(&mut snapshot), known).await;
    Ok(snapshot)
}

/// The snapshot of a valid `name`, and the listeners of its channels when
/// `channels` says so; its owners not yet named.
async fn read_object(client: &Engine, name: &str, channels: Channels) -> Result<Snapshot> {
    let mut snapshot = snapshot_of(&client.conn, name, &client.id).await?;
    if channels == Channels::Counted {
        snapshot.listeners = listeners(client, &channels_of(name, &snapshot)).await;
    }
    Ok(snapshot)
}

/// Attaches each owner's announced identity, looking up (in batches) the
/// client ids `known` has not met yet. A refusal (an ACL written for
/// Redisson's keys only, a key of another type) leaves the owner unnamed, not
/// the snapshot unread.
async fn name_owners(client: &Engine, snapshots: &mut [Snapshot], known: &mut Known) {
    let mut unknown: Vec<String> = snapshots
        .iter_mut()
        .flat_map(Snapshot::owners_mut)
        .map(|owner| owner.client_id.clone())
        .filter(|id| !id.is_empty() && !known.contains_key(id))
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    for batch in unknown.chunks(IN_FLIGHT) {
        let found = futures_util::future::join_all(batch.iter().map(|id| async move {
            let identity = crate::engine::identity::look_up(&mut client.conn.clone(), id)
                .await
                .ok()
                .flatten();
            (id.clone(), identity)
        }))
        .await;
        known.extend(found);
    }
    for owner in snapshots.iter_mut().flat_map(Snapshot::owners_mut) {
        owner.identity = known.get(&owner.client_id).cloned().flatten();
    }
}

/// The channels on which the object `snapshot` shows announces changes. A
/// fair lock's waiters each listen on their own channel; its own is the
/// lock's. A fair semaphore's waiters listen on their client's: one channel
/// per client in its line.
fn channels_of(name: &str, snapshot: &Snapshot) -> Vec<String> {
    match &snapshot.kind {
        Kind::FairSemaphore => {
            let clients: std::collections::BTreeSet<&str> = snapshot
                .queue
                .iter()
                .map(|queued| queued.owner.client_id.as_str())
                .collect();
            let prefix = keys::fair_semaphore_channel(name);
            clients
                .into_iter()
                .map(|client| format!("{prefix}:{client}"))
                .collect()
        }
        Kind::ReadWriteLock { .. } => vec![keys::rwlock_channel(name)],
        Kind::Counter => vec![keys::semaphore_channel(name), keys::latch_channel(name)],
        Kind::PermitExpirableSemaphore => vec![keys::semaphore_channel(name)],
        Kind::Lock | Kind::FairLock | Kind::FencedLock => vec![keys::lock_channel(name)],
        Kind::Absent | Kind::MultiLockGroup | Kind::Foreign { .. } => Vec::new(),
    }
}

/// How many connections listen on each channel: `PUBSUB NUMSUB` (SHARDNUMSUB
/// where messages travel on sharded pub/sub). Empty when the server refuses
/// (an ACL): listeners are a hint, never worth failing an inspection for.
async fn listeners(client: &Engine, channels: &[String]) -> Vec<Listeners> {
    if channels.is_empty() {
        return Vec::new();
    }
    let sharded = client.conn.is_sharded();
    let mut cmd = redis::cmd("PUBSUB");
    cmd.arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
        .arg(channels);
    let Ok(reply) = cmd
        .query_async::<Vec<(String, u64)>>(&mut client.conn.clone())
        .await
    else {
        return Vec::new();
    };
    reply
        .into_iter()
        .map(|(channel, clients)| Listeners { channel, clients })
        .collect()
}

/// Every lock-family object under `pattern`, at most [`MAX_SCAN`].
pub(crate) async fn scan(client: &Engine, pattern: &str) -> Result<Scanned> {
    if pattern.is_empty() {
        return Err(Error::invalid(
            "scan pattern must not be empty (use * for every name)",
        ));
    }
    let found = scan_names(&client.conn, pattern, MAX_SCAN).await?;
    let mut objects = Vec::new();
    for batch in found.names.chunks(IN_FLIGHT) {
        let read = futures_util::future::join_all(
            batch
                .iter()
                .map(|name| read_object(client, name, Channels::Counted)),
        );
        for snapshot in read.await {
            let snapshot = snapshot?;
            if snapshot.kind.is_lock_family() {
                objects.push(snapshot);
            }
        }
    }
    name_owners(client, &mut objects, &mut Known::new()).await;
    Ok(Scanned {
        objects,
        skipped: found.skipped,
        complete: !found.incomplete,
    })
}

/// What a [`Client::scan`](crate::Client::scan) found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Scanned {
    /// Every lock-family object found, by name.
    pub objects: Vec<Snapshot>,
    /// The keys under the pattern that no lock can be named (not UTF-8,
    /// empty or longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN), split
    /// over a cluster's slots), so were not read: whatever they hold is not
    /// in [`objects`](Scanned::objects). At most [`MAX_SCAN`].
    pub skipped: Vec<Skipped>,
    /// `false` when more than [`MAX_SCAN`] names matched and the rest were
    /// left out (narrow the pattern), or when a cluster primary without an
    /// address could not be asked.
    pub complete: bool,
}

/// A live view of one object: each [`next`](Watch::next) returns a fresh
/// snapshot as soon as the object's channel says something happened, and at
/// the latest after the watch's interval.
///
/// It listens as one more waiter of the client's subscription (no second
/// connection), in the class every message wakes, so it never takes a
/// wake-up from a waiter. A message that arrives while a snapshot is read is
/// kept for the next call. A fair lock's releases speak on the next waiter's
/// own channel, and an acquire announces nothing, so those changes show at
/// the interval.
///
/// **Its cost to the lock's users**: a release counts the clients its message
/// reached, and a watch is one of them, so a releasing client of this crate
/// believes a waiter was woken and holds its own next caller back for up to
/// 5 ms (the hand-off window, `DESIGN.md`, "The local line"). A client that
/// takes and frees the lock back to back is slowed while it is watched;
/// [`polling`](Watch::polling) watches without listening.
#[derive(Debug)]
pub struct Watch {
    client: Arc<Engine>,
    name: String,
    listen: bool,
    /// Wake-ups from the object's channels and the interval, kept across
    /// calls of [`next`](Watch::next).
    rereads: Rereads,
    known: Known,
}

impl Watch {
    pub(crate) fn new(client: Arc<Engine>, name: String, every: Duration) -> Result<Watch> {
        keys::validate_name(&name)?;
        if every.is_zero() {
            return Err(Error::invalid("a watch's interval must be positive"));
        }
        Ok(Watch {
            client,
            name,
            listen: true,
            rereads: Rereads::new(every),
            known: Known::new(),
        })
    }

    /// This watch, reading at its interval only: it subscribes to nothing,
    /// so the lock's releases count no extra listener.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let mut watch = client.watch("orders:42", Duration::from_millis(250))?.polling();
    /// let now = watch.next().await?;
    /// # Ok(()) }
    /// ```
    pub fn polling(mut self) -> Watch {
        self.listen = false;
        self.rereads.stop_listening();
        self
    }

    /// The next snapshot: the first at once, each later one when a message
    /// arrives on the object's channel or the interval since the last
    /// reading began has passed.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// // Follow a lock until it is free.
    /// let mut watch = client.watch("orders:42", Duration::from_secs(1))?;
    /// loop {
    ///     let snapshot = watch.next().await?;
    ///     if !snapshot.is_held() {
    ///         break;
    ///     }
    ///     let holders: Vec<&str> =
    ///         snapshot.holders.iter().map(|h| h.owner.field.as_str()).collect();
    ///     println!("held by {holders:?}, {} waiting in line", snapshot.queue_len);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call loses nothing. The interval runs from one
    /// reading to the next, not from each call, and a wake-up it took is kept
    /// for the next call; so a caller that drops its calls (a `select!`
    /// against a ticker, a `timeout` in a loop), however often, still gets a
    /// fresh snapshot at least every interval.
    pub async fn next(&mut self) -> Result<Snapshot> {
        self.rereads.until_due().await;
        let began = tokio::time::Instant::now();
        let reading = inspect(&self.client, &self.name, &mut self.known).await;
        self.rereads.read(began);
        let snapshot = reading?;
        if self.listen {
            // Listens where an object of this kind speaks. A name gone free
            // (absent) keeps the channels it had: its next holder is likely
            // of the same kind.
            let wanted = channels_of(&self.name, &snapshot);
            if !wanted.is_empty() {
                self.rereads.listen(&self.client, &self.name, wanted);
            }
        }
        Ok(snapshot)
    }
}
