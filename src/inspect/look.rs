//! The inspector's operations on a client: one snapshot, a scan, a watch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{read_snapshot, scan_names, Identity, Kind, Listeners, Snapshot, MAX_ENTRIES};
use crate::client::ClientInner;
use crate::error::{Error, Result};
use crate::keys;
use crate::pubsub::{Class, Subscription};

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
pub(crate) async fn inspect(
    client: &ClientInner,
    name: &str,
    known: &mut Known,
) -> Result<Snapshot> {
    read_named(client, name, known, Channels::Counted).await
}

/// The same without the listeners (`PUBSUB NUMSUB`, one round trip less):
/// for an election's reading of who leads, which has no use for them.
pub(crate) async fn inspect_holders(client: &ClientInner, name: &str) -> Result<Snapshot> {
    read_named(client, name, &mut Known::new(), Channels::Skipped).await
}

/// Whether a reading counts the listeners of the object's channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channels {
    Counted,
    Skipped,
}

/// [`inspect`], counting the listeners or not.
async fn read_named(
    client: &ClientInner,
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
async fn read_object(client: &ClientInner, name: &str, channels: Channels) -> Result<Snapshot> {
    let reply = crate::scripts::inspect(&mut client.conn.clone(), name, MAX_ENTRIES).await?;
    let mut snapshot = read_snapshot(name, reply, &client.id)?;
    if channels == Channels::Counted {
        snapshot.listeners = listeners(client, &channels_of(name, &snapshot.kind)).await;
    }
    Ok(snapshot)
}

/// Attaches each owner's announced identity, looking up (in batches) the
/// client ids `known` has not met yet. A refusal (an ACL written for
/// Redisson's keys only, a key of another type) leaves the owner unnamed, not
/// the snapshot unread.
async fn name_owners(client: &ClientInner, snapshots: &mut [Snapshot], known: &mut Known) {
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
            let identity = crate::identity::look_up(&mut client.conn.clone(), id)
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

/// The channels on which an object of `kind` announces changes. A fair lock's
/// waiters each listen on their own channel; its own is the lock's.
fn channels_of(name: &str, kind: &Kind) -> Vec<String> {
    match kind {
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
async fn listeners(client: &ClientInner, channels: &[String]) -> Vec<Listeners> {
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
pub(crate) async fn scan(client: &ClientInner, pattern: &str) -> Result<Scanned> {
    if pattern.is_empty() {
        return Err(Error::invalid(
            "scan pattern must not be empty (use * for every name)",
        ));
    }
    let (names, incomplete) = scan_names(&client.conn, pattern, MAX_SCAN).await?;
    // A key no lock could be named (empty, too long, or refused in a
    // cluster) holds none: skipped, not an error that ends the scan.
    let readable: Vec<String> = names
        .into_iter()
        .filter(|name| {
            keys::validate_name(name).is_ok()
                && (!client.conn.is_cluster() || keys::validate_cluster_name(name).is_ok())
        })
        .collect();
    let mut objects = Vec::new();
    for batch in readable.chunks(IN_FLIGHT) {
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
        complete: !incomplete,
    })
}

/// What a [`Client::scan`](crate::Client::scan) found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Scanned {
    /// Every lock-family object found, by name.
    pub objects: Vec<Snapshot>,
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
    client: Arc<ClientInner>,
    name: String,
    every: Duration,
    listen: bool,
    /// Woken by the relays of the channels listened on; a wake-up that comes
    /// while nobody waits is kept (one permit).
    woken: Arc<tokio::sync::Notify>,
    /// Channels listened on, each relayed by a task that stops when its
    /// sender is dropped (with the watch).
    relays: Vec<(String, tokio::sync::oneshot::Sender<()>)>,
    seen_first: bool,
    known: Known,
}

impl Watch {
    pub(crate) fn new(client: Arc<ClientInner>, name: String, every: Duration) -> Result<Watch> {
        keys::validate_name(&name)?;
        if every.is_zero() {
            return Err(Error::invalid("a watch's interval must be positive"));
        }
        Ok(Watch {
            client,
            name,
            every,
            listen: true,
            woken: Arc::new(tokio::sync::Notify::new()),
            relays: Vec::new(),
            seen_first: false,
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
        self.relays.clear();
        self
    }

    /// The next snapshot: the first at once, each later one when a message
    /// arrives on the object's channel or the interval has passed.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call loses nothing but its wait.
    pub async fn next(&mut self) -> Result<Snapshot> {
        if self.seen_first {
            let _ = tokio::time::timeout(self.every, self.woken.notified()).await;
        }
        let snapshot = inspect(&self.client, &self.name, &mut self.known).await?;
        self.seen_first = true;
        if self.listen {
            self.listen_for(&snapshot.kind);
        }
        Ok(snapshot)
    }

    /// Listens where an object of `kind` speaks. A name gone free (absent)
    /// keeps the channels it had: its next holder is likely of the same kind.
    fn listen_for(&mut self, kind: &Kind) {
        let wanted = channels_of(&self.name, kind);
        if wanted.is_empty() || self.relays.iter().map(|(c, _)| c).eq(wanted.iter()) {
            return;
        }
        let lock: Arc<str> = self.name.as_str().into();
        self.relays = wanted
            .into_iter()
            .map(|channel| {
                let subscription = self.client.pubsub.subscribe(&channel, &lock, Class::All);
                let (stop, stopped) = tokio::sync::oneshot::channel();
                let woken = self.woken.clone();
                self.client
                    .conn
                    .spawner()
                    .spawn(relay(subscription, woken, stopped));
                (channel, stop)
            })
            .collect();
    }
}

/// Passes every wake-up of `subscription` on to `woken` until stopped; the
/// subscription ends with it (a watch's, and an election observer's).
pub(crate) async fn relay(
    subscription: Subscription,
    woken: Arc<tokio::sync::Notify>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        let notified = subscription.notified();
        tokio::pin!(notified);
        // Registered before anything else is awaited: nothing in between is lost.
        notified.as_mut().enable();
        tokio::select! {
            _ = &mut stopped => return,
            _ = notified => woken.notify_one(),
        }
    }
}
