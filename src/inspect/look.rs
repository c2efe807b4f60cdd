//! The inspector's operations on a client: one snapshot, a scan, a watch.

use std::collections::HashMap;
use std::future::Future as _;
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

/// The snapshot of `name`, with the listeners of its channels and the
/// identities of its owners.
pub(crate) async fn inspect(
    client: &ClientInner,
    name: &str,
    known: &mut Known,
) -> Result<Snapshot> {
    keys::validate_name(name)?;
    let mut conn = client.conn.clone();
    let reply = crate::scripts::inspect(&mut conn, name, MAX_ENTRIES).await?;
    let mut snapshot = read_snapshot(name, reply, &client.id)?;
    snapshot.listeners = listeners(client, &channels_of(name, &snapshot.kind)).await;
    for owner in snapshot.owners_mut() {
        if owner.client_id.is_empty() {
            continue;
        }
        if !known.contains_key(&owner.client_id) {
            let found = crate::identity::look_up(&mut conn, &owner.client_id).await?;
            known.insert(owner.client_id.clone(), found);
        }
        owner.identity = known.get(&owner.client_id).cloned().flatten();
    }
    Ok(snapshot)
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
    let sharded = client.conn.publish_command() == "spublish";
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
    let (names, more) = scan_names(&client.conn, pattern, MAX_SCAN).await?;
    let mut known = Known::new();
    let mut objects = Vec::new();
    for name in names {
        let snapshot = inspect(client, &name, &mut known).await?;
        if snapshot.kind.is_lock_family() {
            objects.push(snapshot);
        }
    }
    Ok(Scanned {
        objects,
        complete: !more,
    })
}

/// What a [`Client::scan`](crate::Client::scan) found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Scanned {
    /// Every lock-family object found, by name.
    pub objects: Vec<Snapshot>,
    /// `false` when more than [`MAX_SCAN`] names matched and the rest were
    /// left out: narrow the pattern.
    pub complete: bool,
}

/// A live view of one object: each [`next`](Watch::next) returns a fresh
/// snapshot as soon as the object's channel says something happened, and at
/// the latest after the watch's interval.
///
/// It listens as one more waiter of the client's subscription (no second
/// connection). A fair lock's releases speak on the next waiter's own channel,
/// so its changes show at the interval.
#[derive(Debug)]
pub struct Watch {
    client: Arc<ClientInner>,
    name: String,
    every: Duration,
    subscriptions: Vec<Subscription>,
    kind: Option<Kind>,
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
            subscriptions: Vec::new(),
            kind: None,
            known: Known::new(),
        })
    }

    /// The next snapshot: the first at once, each later one when a message
    /// arrives on the object's channel or the interval has passed.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call loses nothing but its wait.
    pub async fn next(&mut self) -> Result<Snapshot> {
        if self.kind.is_some() {
            let woken = futures_any(&self.subscriptions);
            let _ = tokio::time::timeout(self.every, woken).await;
        }
        let snapshot = inspect(&self.client, &self.name, &mut self.known).await?;
        if self.kind.as_ref() != Some(&snapshot.kind) {
            // (Re)listen where this kind speaks; a channel kept stays subscribed.
            let lock: Arc<str> = self.name.as_str().into();
            self.subscriptions = channels_of(&self.name, &snapshot.kind)
                .iter()
                .map(|channel| self.client.pubsub.subscribe(channel, &lock, Class::All))
                .collect();
            self.kind = Some(snapshot.kind.clone());
        }
        Ok(snapshot)
    }
}

/// Completes when any of `subscriptions` is woken (never, for none).
async fn futures_any(subscriptions: &[Subscription]) {
    if subscriptions.is_empty() {
        return std::future::pending().await;
    }
    let mut waits: Vec<_> = subscriptions
        .iter()
        .map(|s| Box::pin(s.notified()))
        .collect();
    std::future::poll_fn(|cx| {
        for wait in &mut waits {
            if wait.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}
