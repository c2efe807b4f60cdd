//! One pub/sub subscriber per client, shared by every waiter of every lock.
//!
//! Unlock messages arrive as RESP3 pushes on the client's one command connection,
//! so the number of connections never grows with locks or waiters. A channel is
//! subscribed when its first waiter arrives and unsubscribed when its last one
//! leaves; [`Subscription`] is that membership, and dropping it is all a waiter
//! needs to do to leave.
//!
//! SUBSCRIBE and UNSUBSCRIBE are decided under one mutex and sent, in that order, by
//! a single task, so a channel left and re-joined at once can never end up
//! unsubscribed. When the connection drops, every channel is marked stale and every
//! waiter is woken: it re-subscribes and retries at once instead of sleeping out its
//! TTL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redis::aio::ConnectionManager;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, watch, Notify};

use crate::error::{Error, Result};

/// The payload a lock release publishes to wake one waiter.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// The payload a write release publishes to wake every waiter.
#[allow(dead_code)] // published by the read-write lock
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// Where a channel's subscription stands on the server.
#[derive(Debug, Clone)]
enum Status {
    /// SUBSCRIBE is queued or in flight.
    Pending,
    /// The server confirmed the subscription on the current connection.
    Ready,
    /// SUBSCRIBE failed, or the connection it was made on is gone.
    Failed(Error),
}

/// One channel with at least one waiter of this client.
#[derive(Debug)]
struct Channel {
    name: String,
    wakeups: Notify,
    status: watch::Sender<Status>,
}

#[derive(Debug)]
struct Entry {
    waiters: usize,
    channel: Arc<Channel>,
}

/// The channel table. The push handler holds this (and not the command queue), so
/// the connection does not keep the subscriber task alive through a cycle.
#[derive(Debug, Default)]
struct Channels {
    table: Mutex<HashMap<String, Entry>>,
    /// Bumped on every connection loss; a SUBSCRIBE confirmed across a bump may
    /// have landed on the dead connection and is not trusted.
    connection_epoch: AtomicU64,
}

impl Channels {
    fn table(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding this lock cannot leave the table inconsistent (every
        // critical section is a few map operations), so poisoning is ignored.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn deliver(&self, info: PushInfo) {
        match info.kind {
            PushKind::Message | PushKind::SMessage => {
                let (Some(channel), Some(payload)) = (info.data.first(), info.data.get(1)) else {
                    return;
                };
                let Some(channel) = as_text(channel) else {
                    return;
                };
                let table = self.table();
                let Some(entry) = table.get(channel) else {
                    return;
                };
                if as_text(payload) == Some(UNLOCK_MESSAGE) {
                    entry.channel.wakeups.notify_one();
                } else {
                    // "1" (a write release) and anything unknown wake every waiter:
                    // a needless retry costs one round trip, a missed one a TTL.
                    entry.channel.wakeups.notify_waiters();
                }
            }
            PushKind::Disconnection => {
                self.connection_epoch.fetch_add(1, Ordering::SeqCst);
                let lost = Error::Redis(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "pub/sub connection lost",
                )));
                for entry in self.table().values() {
                    entry
                        .channel
                        .status
                        .send_replace(Status::Failed(lost.clone()));
                    entry.channel.wakeups.notify_waiters();
                }
            }
            _ => {}
        }
    }
}

fn as_text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

enum Command {
    Subscribe(Arc<Channel>),
    Unsubscribe(String),
}

/// The client's subscriber: hands out [`Subscription`]s.
#[derive(Debug, Clone)]
pub(crate) struct PubSub {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Subscribe(c) => write!(f, "SUBSCRIBE {}", c.name),
            Command::Unsubscribe(n) => write!(f, "UNSUBSCRIBE {n}"),
        }
    }
}

/// The receiving half, created before the connection so it can be its push sender.
#[derive(Debug)]
pub(crate) struct PushHandler(Arc<Channels>);

impl PushHandler {
    pub(crate) fn new() -> Self {
        PushHandler(Arc::new(Channels::default()))
    }

    /// The callback the connection calls for every push it reads.
    pub(crate) fn sender(&self) -> impl Fn(PushInfo) -> Result<(), std::convert::Infallible> {
        let channels = self.0.clone();
        move |info| {
            channels.deliver(info);
            Ok(())
        }
    }

    /// Starts the task that sends SUBSCRIBE/UNSUBSCRIBE on `conn`.
    pub(crate) fn start(self, conn: ConnectionManager) -> PubSub {
        let (commands, queue) = mpsc::unbounded_channel();
        tokio::spawn(run_subscriber(self.0.clone(), conn, queue));
        PubSub {
            channels: self.0,
            commands,
        }
    }
}

/// Sends queued (un)subscriptions in order, batching runs of the same command.
/// Ends when the client and every subscription are gone.
async fn run_subscriber(
    channels: Arc<Channels>,
    mut conn: ConnectionManager,
    mut queue: mpsc::UnboundedReceiver<Command>,
) {
    let mut batch = Vec::new();
    while queue.recv_many(&mut batch, 256).await > 0 {
        let mut commands = batch.drain(..).peekable();
        while let Some(first) = commands.next() {
            match first {
                Command::Subscribe(channel) => {
                    let mut group = vec![channel];
                    while let Some(Command::Subscribe(_)) = commands.peek() {
                        if let Some(Command::Subscribe(c)) = commands.next() {
                            group.push(c);
                        }
                    }
                    let epoch = channels.connection_epoch.load(Ordering::SeqCst);
                    let names: Vec<&str> = group.iter().map(|c| c.name.as_str()).collect();
                    let result = conn.subscribe(&names).await;
                    let same_connection = channels.connection_epoch.load(Ordering::SeqCst) == epoch;
                    let status = match result {
                        Ok(()) if same_connection => Status::Ready,
                        Ok(()) => Status::Failed(Error::Redis(redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "connection lost while subscribing",
                        )))),
                        Err(e) => Status::Failed(Error::Redis(e)),
                    };
                    for channel in group {
                        channel.status.send_if_modified(|s| {
                            // A later loss already marked it failed: keep that.
                            if matches!(s, Status::Pending) {
                                *s = status.clone();
                                true
                            } else {
                                false
                            }
                        });
                    }
                }
                Command::Unsubscribe(name) => {
                    let mut names = vec![name];
                    while let Some(Command::Unsubscribe(_)) = commands.peek() {
                        if let Some(Command::Unsubscribe(n)) = commands.next() {
                            names.push(n);
                        }
                    }
                    // A failure means the connection is gone, and the subscription
                    // with it: nothing to undo.
                    let _ = conn.unsubscribe(&names).await;
                }
            }
        }
    }
}

impl PubSub {
    /// Joins `channel`'s waiters, subscribing it if this is the first.
    pub(crate) fn subscribe(&self, channel: &str) -> Subscription {
        let mut table = self.channels.table();
        let entry = table.entry(channel.to_owned()).or_insert_with(|| {
            let (status, _) = watch::channel(Status::Pending);
            let channel = Arc::new(Channel {
                name: channel.to_owned(),
                wakeups: Notify::new(),
                status,
            });
            // Ignored error: the subscriber task only ends with the client.
            let _ = self.commands.send(Command::Subscribe(channel.clone()));
            Entry {
                waiters: 0,
                channel,
            }
        });
        entry.waiters += 1;
        Subscription {
            pubsub: self.clone(),
            channel: entry.channel.clone(),
        }
    }

    /// How many channels this client is subscribed to (or subscribing).
    #[allow(dead_code)]
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.table().len()
    }
}

/// A waiter's membership of one channel; dropping it leaves.
#[derive(Debug)]
pub(crate) struct Subscription {
    pubsub: PubSub,
    channel: Arc<Channel>,
}

impl Subscription {
    /// Waits until the server confirms the subscription, re-subscribing first when
    /// an earlier attempt failed or the connection was lost.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the subscription request queued, which the
    /// next waiter (or nobody, harmlessly) uses.
    pub(crate) async fn ready(&self) -> Result<()> {
        {
            let table = self.pubsub.channels.table();
            let failed = matches!(*self.channel.status.borrow(), Status::Failed(_));
            if failed {
                self.channel.status.send_replace(Status::Pending);
                let _ = self
                    .pubsub
                    .commands
                    .send(Command::Subscribe(self.channel.clone()));
            }
            drop(table);
        }
        let mut status = self.channel.status.subscribe();
        let settled = status
            .wait_for(|s| !matches!(s, Status::Pending))
            .await
            .map_err(|_| Error::unexpected("subscribe", "subscriber gone"))?
            .clone();
        match settled {
            Status::Failed(e) => Err(e),
            _ => Ok(()),
        }
    }

    /// A future that completes on the next wake-up for this channel. Call
    /// `enable()` on it before the acquire attempt so no wake-up in between is lost.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.channel.wakeups.notified()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut table = self.pubsub.channels.table();
        let Some(entry) = table.get_mut(&self.channel.name) else {
            return;
        };
        if !Arc::ptr_eq(&entry.channel, &self.channel) {
            return;
        }
        entry.waiters -= 1;
        if entry.waiters == 0 {
            table.remove(&self.channel.name);
            let _ = self
                .pubsub
                .commands
                .send(Command::Unsubscribe(self.channel.name.clone()));
        }
    }
}
