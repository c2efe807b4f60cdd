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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use crate::transport::conn::Conn;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::futures::Notified;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::error::{Error, Result};
pub(crate) use crate::transport::wake::{Class, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::transport::wake::{Wakeups, CLASSES};

/// Where a channel's subscription stands on the server.
#[derive(Debug, Clone)]
enum Status {
    /// SUBSCRIBE is queued or in flight.
    Pending,
    /// The server confirmed the subscription on the current connection; its
    /// reply arrived at this instant, so every command sent from then on runs
    /// on the server after the subscription.
    Ready(Instant),
    /// SUBSCRIBE failed, or the connection it was made on is gone.
    Failed(Error),
}

/// A channel's [`Status`], and a wake-up for the waiters that wait for it to
/// settle. (Not a `watch` channel, whose room for many receivers is about
/// 400 bytes a channel: a client may listen on tens of thousands.)
#[derive(Debug)]
struct StatusCell {
    status: Mutex<Status>,
    changed: Notify,
}

impl Default for StatusCell {
    fn default() -> Self {
        StatusCell {
            status: Mutex::new(Status::Pending),
            changed: Notify::new(),
        }
    }
}

impl StatusCell {
    fn get(&self) -> MutexGuard<'_, Status> {
        // Each critical section is one read or write of the status.
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, status: Status) {
        *self.get() = status;
        self.changed.notify_waiters();
    }

    fn is_ready(&self) -> bool {
        matches!(*self.get(), Status::Ready(_))
    }

    /// When the confirmation standing now arrived, if the subscription is
    /// confirmed.
    fn ready_since(&self) -> Option<Instant> {
        match *self.get() {
            Status::Ready(since) => Some(since),
            _ => None,
        }
    }

    fn has_failed(&self) -> bool {
        matches!(*self.get(), Status::Failed(_))
    }

    /// The status once it is no longer pending.
    async fn settled(&self) -> Status {
        loop {
            // Registered before the status is read, so that a change made
            // in between wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let status = self.get().clone();
            if !matches!(status, Status::Pending) {
                return status;
            }
            changed.await;
        }
    }
}

/// One channel with at least one waiter of this client.
#[derive(Debug)]
struct Channel {
    /// Shared with the table's key.
    name: Arc<str>,
    status: StatusCell,
    /// The latest SUBSCRIBE request for this channel; a reply to an older one
    /// (overtaken by a reconnect) is ignored. Changed only under the table lock.
    request: AtomicU64,
}

/// The waiters of one channel, by lock name: two locks can share a channel
/// (Redisson names `a`'s and `{a}`'s channels alike), and an unlock message does
/// not say which lock it is about, so each lock on the channel gets the wake-up,
/// as Redisson wakes per lock name.
#[derive(Debug)]
struct Entry {
    channel: Arc<Channel>,
    locks: HashMap<Arc<str>, LockWaiters>,
}

/// One lock's waiters on a channel.
#[derive(Debug)]
struct LockWaiters {
    /// Waiters of each class, by [`Class`] index.
    waiters: [usize; CLASSES],
    wakeups: Arc<Wakeups>,
}

impl LockWaiters {
    fn total(&self) -> usize {
        self.waiters.iter().sum()
    }
}

/// The channel table, shared by the push handler, the subscriber task and the
/// waiters. It reaches the command queue only through a weak handle, so the
/// connection (which owns the push handler) does not keep the subscriber task, and
/// through it the connection itself, alive.
#[derive(Debug, Default)]
struct Channels {
    table: Mutex<HashMap<Arc<str>, Entry>>,
    commands: OnceLock<mpsc::WeakUnboundedSender<Command>>,
    /// Bumped on every lost or replaced connection.
    connections_lost: AtomicU64,
}

impl Channels {
    fn table(&self) -> MutexGuard<'_, HashMap<Arc<str>, Entry>> {
        // A panic while holding this lock cannot leave the table inconsistent (every
        // critical section is a few map operations), so poisoning is ignored.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a fresh SUBSCRIBE for `channel`, superseding any earlier request.
    /// Call with the table locked, so requests and unsubscriptions keep their order.
    fn request_subscribe(&self, _table: &HashMap<Arc<str>, Entry>, channel: &Arc<Channel>) {
        let request = channel.request.fetch_add(1, Ordering::SeqCst) + 1;
        channel.status.set(Status::Pending);
        let sent = self
            .commands
            .get()
            .and_then(mpsc::WeakUnboundedSender::upgrade)
            .map(|commands| commands.send(Command::Subscribe(channel.clone(), request)));
        if !matches!(sent, Some(Ok(()))) {
            // The client is shutting down: nobody will subscribe.
            channel.status.set(Status::Failed(Error::unexpected(
                "subscribe",
                "the client was dropped",
            )));
        }
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
                let payload = as_text(payload);
                // A message naming one waiter (a fair semaphore's call)
                // wakes it alone, found at once among thousands.
                let addressed = payload
                    .and_then(|payload| entry.locks.get(payload))
                    .filter(|lock| lock.waiters[Class::Addressed as usize] > 0);
                if let Some(lock) = addressed {
                    lock.wakeups.addressed.notify_one();
                    return;
                }
                for lock in entry.locks.values() {
                    lock.wakeups.deliver(payload, lock.waiters);
                }
            }
            PushKind::Unsubscribe | PushKind::SUnsubscribe => {
                if let Some(channel) = info.data.first().and_then(as_text) {
                    self.ended_by_server(channel);
                }
            }
            PushKind::Disconnection => {
                self.connections_lost.fetch_add(1, Ordering::SeqCst);
                // Every subscription died with the connection: ask again (the
                // requests go out on the new connection, and any reply still due
                // from the old one is superseded), and wake every waiter so it
                // retries as soon as its channel is back instead of sleeping out
                // its TTL.
                let table = self.table();
                crate::trace::info_event!(
                    "connection lost or replaced: subscribing {} channel(s) again, waking their waiters",
                    table.len()
                );
                for entry in table.values() {
                    self.request_subscribe(&table, &entry.channel);
                    for lock in entry.locks.values() {
                        lock.wakeups.wake_all();
                    }
                }
            }
            _ => {}
        }
    }
}

impl Channels {
    /// The server says `channel` is no longer subscribed. Our own
    /// UNSUBSCRIBE's confirmation says so too, but for a channel that left
    /// the table: one still in it is wanted, and was ended by the server, as
    /// a cluster node does (Redis 7+, Valkey) to every sharded subscriber of
    /// a slot it no longer serves (a reshard, a failover), keeping the
    /// connection. Its waiters would sleep on a channel that is dead: it is
    /// subscribed again (where the slot now lives) and they are woken, to
    /// try once it is confirmed. A subscription still pending is asked for
    /// again too, superseding the one in flight: a failover's old primary
    /// may confirm our SSUBSCRIBE and end it a moment later (seen: the
    /// second push came before the first re-subscription's confirmation was
    /// recorded, and the channel then stood "ready" and dead). A needless
    /// SSUBSCRIBE (after our own UNSUBSCRIBE of a channel wanted again) costs
    /// one command; a dead subscription, a re-check's wait.
    fn ended_by_server(&self, channel: &str) {
        let table = self.table();
        let Some(entry) = table.get(channel) else {
            return;
        };
        crate::trace::info_event!(
            "the server ended the subscription to {channel:?} (a slot moved away?): subscribing again, waking its waiters"
        );
        self.request_subscribe(&table, &entry.channel);
        for lock in entry.locks.values() {
            lock.wakeups.wake_all();
        }
        // And once more when the topology has settled: around a graceful
        // failover the old primary confirmed our SSUBSCRIBE, then dropped it
        // as it became a replica, saying nothing (seen on Redis 7.0).
        if let Some(commands) = self
            .commands
            .get()
            .and_then(mpsc::WeakUnboundedSender::upgrade)
        {
            let _ = commands.send(Command::Again(entry.channel.name.clone()));
        }
    }

    /// Subscribes `channel` again, if it is still wanted, and wakes its
    /// waiters to try once it is confirmed: a message may have gone to a
    /// subscription the server had dropped.
    fn subscribe_again(&self, channel: &str) {
        let table = self.table();
        if let Some(entry) = table.get(channel) {
            self.request_subscribe(&table, &entry.channel);
            for lock in entry.locks.values() {
                lock.wakeups.wake_all();
            }
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
    /// Subscribe, as request number `.1` for that channel.
    Subscribe(Arc<Channel>, u64),
    /// Unsubscribe; `true`: it may linger to go out with others (see
    /// [`UNSUBSCRIBE_LINGER`]).
    Unsubscribe(Arc<str>, bool),
    /// Subscribe this channel again [`SUBSCRIBE_AGAIN_AFTER`] from now, if
    /// it is still wanted (see [`Channels::ended_by_server`]).
    Again(Arc<str>),
}

/// Reads the client's connection epoch (see [`PubSub::connection_epoch`]).
#[derive(Clone)]
pub(crate) struct EpochReader(Arc<Channels>);

impl EpochReader {
    pub(crate) fn now(&self) -> u64 {
        self.0.connections_lost.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for EpochReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EpochReader({})", self.now())
    }
}

/// The client's subscriber: hands out [`Subscription`]s. Holding it (or a
/// subscription) keeps the subscriber task running.
#[derive(Debug, Clone)]
pub(crate) struct PubSub {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Subscribe(c, request) => write!(f, "SUBSCRIBE {} (#{request})", c.name),
            Command::Unsubscribe(n, _) => write!(f, "UNSUBSCRIBE {n}"),
            Command::Again(n) => write!(f, "SUBSCRIBE {n} again, later"),
        }
    }
}

/// The receiving half, created before the connection so it can be its push sender.
#[derive(Debug, Clone)]
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

    /// A signal that the connection was replaced (a Sentinel failover): every
    /// channel is subscribed again and every waiter retries, as after a reconnect.
    pub(crate) fn reconnect_signal(&self) -> Box<dyn Fn() + Send + Sync> {
        let channels = self.0.clone();
        Box::new(move || {
            channels.deliver(PushInfo {
                kind: PushKind::Disconnection,
                data: Vec::new(),
            })
        })
    }

    /// Starts the task that sends SUBSCRIBE/UNSUBSCRIBE on `conn`; with
    /// `linger`, a one-waiter channel's UNSUBSCRIBE may wait to go out with
    /// others (see [`UNSUBSCRIBE_LINGER`]).
    pub(crate) fn start(self, conn: Conn, linger: bool) -> PubSub {
        let (commands, queue) = mpsc::unbounded_channel();
        let _ = self.0.commands.set(commands.downgrade());
        let spawner = conn.spawner().clone();
        spawner.spawn(run_subscriber(self.0.clone(), conn, queue, linger));
        PubSub {
            channels: self.0,
            commands,
        }
    }
}

/// How long an unsubscription may wait to go out with others: a fair waiter
/// listens on a channel of its own, so under contention every acquisition
/// ends one subscription, and one UNSUBSCRIBE per acquisition was a sixth of
/// the fair lock's commands. Messages still arriving meanwhile find no waiter
/// and are dropped. Only such one-waiter channels linger, at most
/// [`UNSUBSCRIBE_BATCH`] of them. A second, not 100 ms: a process with one
/// waiter at a time (a client per task) acquires a contended lock a few
/// times a second, so 100 ms gathered one or two channels per UNSUBSCRIBE.
const UNSUBSCRIBE_LINGER: Duration = Duration::from_secs(1);

/// Whether `channel` is a channel of one waiter of `lock` (a fair waiter's
/// own, `redisson_lock__channel:{lock}:<owner>`), whose UNSUBSCRIBE may
/// linger: never reused, and nobody else's release is told it was heard. A
/// kind's shared channel (a lock's, a read-write lock's, a semaphore's, a
/// latch's) may not: while it lingers, every release's PUBLISH counts this
/// client as a listener, and a release of its own that "woke a waiter" would
/// hold its newcomers back for a waiter that is gone. (A fair semaphore's
/// channel, one client's, lingers too: see [`Class::Addressed`].)
fn is_one_waiters(channel: &str, lock: &str) -> bool {
    channel
        .strip_prefix(crate::transport::keys::lock_channel(lock).as_str())
        .is_some_and(|rest| rest.starts_with(':'))
}

/// How long after the server ended a subscription it is made once more
/// (see [`Channels::ended_by_server`]): a failover's handover settles in
/// well under this.
const SUBSCRIBE_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// At most this many channels wait for one UNSUBSCRIBE.
const UNSUBSCRIBE_BATCH: usize = 128;

/// Sends queued (un)subscriptions in order, batching runs of subscriptions, and
/// gathering unsubscriptions for up to [`UNSUBSCRIBE_LINGER`] (a channel
/// subscribed again meanwhile is simply kept) when `may_linger`. Ends when the client and every
/// subscription are gone.
async fn run_subscriber(
    channels: Arc<Channels>,
    mut conn: Conn,
    mut queue: mpsc::UnboundedReceiver<Command>,
    may_linger: bool,
) {
    let mut batch = Vec::new();
    let mut leaving: Vec<Arc<str>> = Vec::new();
    let mut flush_at: Option<Instant> = None;
    // Channels to subscribe once more, and when.
    let mut again: Vec<(Instant, Arc<str>)> = Vec::new();
    loop {
        let next = again.iter().map(|(at, _)| *at).chain(flush_at).min();
        let received = match next {
            Some(at) => tokio::select! {
                n = queue.recv_many(&mut batch, 256) => n,
                _ = tokio::time::sleep_until(at) => {
                    let now = Instant::now();
                    if flush_at.is_some_and(|flush| flush <= now) {
                        unsubscribe(&mut conn, &mut leaving).await;
                        flush_at = None;
                    }
                    let (due, later) = again.drain(..).partition(|(at, _)| *at <= now);
                    again = later;
                    for (_, name) in due {
                        channels.subscribe_again(&name);
                    }
                    continue;
                }
            },
            None => queue.recv_many(&mut batch, 256).await,
        };
        if received == 0 {
            unsubscribe(&mut conn, &mut leaving).await;
            return;
        }
        let mut commands = batch.drain(..).peekable();
        while let Some(first) = commands.next() {
            match first {
                Command::Subscribe(channel, request) => {
                    let mut group = vec![(channel, request)];
                    while let Some(Command::Subscribe(..)) = commands.peek() {
                        if let Some(Command::Subscribe(c, r)) = commands.next() {
                            group.push((c, r));
                        }
                    }
                    // A channel subscribed again before its UNSUBSCRIBE went out
                    // must not get it afterwards.
                    leaving.retain(|name| group.iter().all(|(c, _)| c.name != *name));
                    // In a cluster one (S)SUBSCRIBE may name channels of one slot only.
                    for group in by_slot(&conn, group, |(c, _)| &*c.name) {
                        let names: Vec<&str> = group.iter().map(|(c, _)| &*c.name).collect();
                        let status = match conn.subscribe(&names).await {
                            Ok(()) => Status::Ready(Instant::now()),
                            Err(e) => Status::Failed(Error::redis(e)),
                        };
                        let _table = channels.table();
                        for (channel, request) in group {
                            // A newer request (after a reconnect) decides instead.
                            if channel.request.load(Ordering::SeqCst) == request {
                                channel.status.set(status.clone());
                            }
                        }
                    }
                }
                Command::Again(name) => {
                    if again.iter().all(|(_, queued)| *queued != name) {
                        again.push((Instant::now() + SUBSCRIBE_AGAIN_AFTER, name));
                    }
                }
                Command::Unsubscribe(name, linger) => {
                    leaving.push(name);
                    if linger && may_linger {
                        flush_at.get_or_insert_with(|| Instant::now() + UNSUBSCRIBE_LINGER);
                    } else {
                        // A lock's shared channel goes at once: while this
                        // connection still listened, a release's PUBLISH would
                        // count it as a waiter woken (see `line.rs`).
                        unsubscribe(&mut conn, &mut leaving).await;
                        flush_at = None;
                    }
                }
            }
        }
        if leaving.len() >= UNSUBSCRIBE_BATCH {
            unsubscribe(&mut conn, &mut leaving).await;
            flush_at = None;
        }
    }
}

/// Sends one UNSUBSCRIBE for every channel in `leaving`, and empties it. A failure
/// means the connection is gone, and the subscriptions with it: nothing to undo.
async fn unsubscribe(conn: &mut Conn, leaving: &mut Vec<Arc<str>>) {
    if leaving.is_empty() {
        return;
    }
    let names = std::mem::take(leaving);
    for names in by_slot(conn, names, |name| &**name) {
        let list: Vec<&str> = names.iter().map(|name| &**name).collect();
        if let Err(e) = conn.unsubscribe(&list).await {
            crate::trace::debug_event!(
                "unsubscribing {names:?} failed (the connection went with it): {e}"
            );
        }
    }
}

/// `items` split into one batch per cluster slot of their channel (`name`), in
/// a cluster; one batch elsewhere.
#[cfg(feature = "cluster")]
fn by_slot<T>(conn: &Conn, items: Vec<T>, name: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
    if !conn.is_cluster() {
        return vec![items];
    }
    let mut batches: Vec<(crate::transport::keys::Slot, Vec<T>)> = Vec::new();
    for item in items {
        let slot = crate::transport::keys::cluster_slot(name(&item));
        match batches.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, batch)) => batch.push(item),
            None => batches.push((slot, vec![item])),
        }
    }
    batches.into_iter().map(|(_, batch)| batch).collect()
}

/// Without Cluster support: one batch.
#[cfg(not(feature = "cluster"))]
fn by_slot<T>(_conn: &Conn, items: Vec<T>, _name: impl Fn(&T) -> &str) -> Vec<Vec<T>> {
    vec![items]
}

impl PubSub {
    /// Joins the waiters of lock `lock` of `class` on `channel`, subscribing the
    /// channel if this is its first waiter.
    pub(crate) fn subscribe(&self, channel: &str, lock: &Arc<str>, class: Class) -> Subscription {
        let mut table = self.channels.table();
        let entry = match table.get_mut(channel) {
            Some(entry) => entry,
            None => {
                let name: Arc<str> = Arc::from(channel);
                let new = Arc::new(Channel {
                    name: name.clone(),
                    status: StatusCell::default(),
                    request: AtomicU64::new(0),
                });
                self.channels.request_subscribe(&table, &new);
                table.entry(name).or_insert(Entry {
                    channel: new,
                    locks: HashMap::new(),
                })
            }
        };
        let waiters = entry
            .locks
            .entry(lock.clone())
            .or_insert_with(|| LockWaiters {
                waiters: [0; CLASSES],
                wakeups: Arc::default(),
            });
        waiters.waiters[class as usize] += 1;
        Subscription {
            pubsub: self.clone(),
            channel: entry.channel.clone(),
            lock: lock.clone(),
            wakeups: waiters.wakeups.clone(),
            class,
        }
    }

    /// How many times the client's connection was lost or replaced so far: a
    /// change between two commands means they may have gone out on different
    /// connections.
    pub(crate) fn connection_epoch(&self) -> u64 {
        self.channels.connections_lost.load(Ordering::SeqCst)
    }

    /// A reader of [`connection_epoch`](PubSub::connection_epoch) for work
    /// that does not hold the client (a release running in the background).
    pub(crate) fn epoch_reader(&self) -> EpochReader {
        EpochReader(self.channels.clone())
    }

    /// `channel`'s subscription as it stands, if confirmed on the current
    /// connection: a [`Subscription`] can tell later whether it still is the same
    /// one ([`Subscription::still`]).
    pub(crate) fn mark(&self, channel: &str) -> Option<ChannelMark> {
        let table = self.channels.table();
        let entry = table.get(channel)?;
        // Read under the table lock, where every new request is made: a
        // reconnect not yet handled shows as a later request when checked.
        let ready = entry.channel.status.is_ready();
        ready.then(|| ChannelMark {
            channel: Arc::downgrade(&entry.channel),
            request: entry.channel.request.load(Ordering::SeqCst),
        })
    }

    /// How many channels this client is subscribed to (or subscribing).
    #[allow(dead_code)]
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.table().len()
    }
}

/// One channel's confirmed subscription at one moment (see [`PubSub::mark`]).
#[derive(Debug, Clone)]
pub(crate) struct ChannelMark {
    /// Weak: a channel left and subscribed again is another `Channel`, and the
    /// old one's allocation stays while this lives, so it is never mistaken.
    channel: std::sync::Weak<Channel>,
    request: u64,
}

#[cfg(test)]
impl ChannelMark {
    /// A mark of no channel (no subscription is ever still it), numbered.
    pub(crate) fn of_nothing(request: u64) -> ChannelMark {
        ChannelMark {
            channel: std::sync::Weak::new(),
            request,
        }
    }

    pub(crate) fn request(&self) -> u64 {
        self.request
    }
}

/// A waiter's membership of one channel, for one lock; dropping it leaves.
#[derive(Debug)]
pub(crate) struct Subscription {
    pubsub: PubSub,
    channel: Arc<Channel>,
    lock: Arc<str>,
    wakeups: Arc<Wakeups>,
    class: Class,
}

/// Whether a subscription still waits for its server's confirmation, as the
/// head of a local line leaves word of it while it waits (see
/// `Lines::supervise`): a head that waits for its server is not an unpolled
/// one, however long a server busy with a burst takes to confirm. Holds the
/// channel weakly: a channel gone is not pending.
#[derive(Debug, Clone)]
pub(crate) struct Confirming(Weak<Channel>);

impl Confirming {
    /// Is the subscription confirmed on the current connection (and the
    /// channel still there)?
    pub(crate) fn is_confirmed(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|channel| channel.status.is_ready())
    }

    /// Is the subscription still unconfirmed (neither ready nor failed)?
    pub(crate) fn is_pending(&self) -> bool {
        self.0
            .upgrade()
            .is_some_and(|channel| matches!(*channel.status.get(), Status::Pending))
    }

    /// A probe of a channel of its own, pending until the returned function
    /// confirms it: for the line's tests.
    #[cfg(test)]
    pub(crate) fn detached() -> (Confirming, impl Fn()) {
        let channel = Arc::new(Channel {
            name: Arc::from("detached"),
            status: StatusCell::default(),
            request: AtomicU64::new(0),
        });
        let probe = Confirming(Arc::downgrade(&channel));
        (probe, move || {
            channel.status.set(Status::Ready(Instant::now()))
        })
    }
}

impl Subscription {
    /// Word of this subscription's confirmation, for a local line's head to
    /// leave while it waits for it.
    pub(crate) fn confirming(&self) -> Confirming {
        Confirming(Arc::downgrade(&self.channel))
    }

    /// Waits until the server confirms the subscription, re-subscribing first when
    /// an earlier attempt failed or the connection was lost.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the subscription request queued, which the
    /// next waiter (or nobody, harmlessly) uses.
    pub(crate) async fn ready(&self) -> Result<()> {
        {
            let table = self.pubsub.channels.table();
            if self.channel.status.has_failed() {
                self.pubsub
                    .channels
                    .request_subscribe(&table, &self.channel);
            }
        }
        match self.channel.status.settled().await {
            Status::Failed(e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Is this the channel subscription `mark` was taken of, subscribed by the
    /// same request (no reconnect, no UNSUBSCRIBE since) and confirmed? Then
    /// every message published since the mark reached this client.
    pub(crate) fn still(&self, mark: &ChannelMark) -> bool {
        let _table = self.pubsub.channels.table();
        mark.channel
            .upgrade()
            .is_some_and(|channel| Arc::ptr_eq(&channel, &self.channel))
            && self.channel.request.load(Ordering::SeqCst) == mark.request
            && self.is_ready()
    }

    /// Is the subscription confirmed on the current connection right now?
    pub(crate) fn is_ready(&self) -> bool {
        self.channel.status.is_ready()
    }

    /// Was this subscription confirmed before `sent`, and still is, by the
    /// same request? Then a command sent at `sent` ran on the server after the
    /// SUBSCRIBE, and every message published after that command reaches
    /// this client: made by this waiter or by another (a parked waiter's, a
    /// channel shared by the client's waiters), subscribed is not enough; it
    /// must have been confirmed when the command went out.
    pub(crate) fn confirmed_before(&self, sent: Instant) -> bool {
        self.channel
            .status
            .ready_since()
            .is_some_and(|since| since <= sent)
    }

    /// How many unlock messages (`"0"`) its lock's channel carried so far
    /// (see [`Wakeups::unlocks`]).
    pub(crate) fn unlocks_heard(&self) -> u64 {
        self.wakeups.unlocks.load(Ordering::SeqCst)
    }

    /// A future that completes on the next wake-up for this channel. Call
    /// `enable()` on it before the acquire attempt so no wake-up in between is lost.
    pub(crate) fn notified(&self) -> Notified<'_> {
        match self.class {
            Class::Exclusive => self.wakeups.exclusive.notified(),
            Class::Shared => self.wakeups.shared.notified(),
            Class::Counted => self.wakeups.counted.notified(),
            Class::All => self.wakeups.all.notified(),
            Class::Addressed => self.wakeups.addressed.notified(),
        }
    }

    /// The wake-up this waiter was just woken by, to pass on if it does not
    /// act on it (see [`WakeToken`]).
    pub(crate) fn wake_token(&self) -> WakeToken {
        WakeToken {
            wakeups: self.wakeups.clone(),
            class: self.class,
            used: false,
        }
    }

    /// The turn to poll the lock (see `Wakeups::poller`).
    fn poller(&self) -> Arc<tokio::sync::Mutex<()>> {
        self.wakeups.poller.get_or_init(Arc::default).clone()
    }

    /// Becomes this client's poller of the lock (see `Wakeups::poller`) if
    /// nobody is; `None` when another waiter polls.
    pub(crate) fn try_poll(&self) -> Option<PollTurn> {
        self.poller().try_lock_owned().ok()
    }

    /// Waits for this waiter's turn to poll the lock.
    pub(crate) async fn poll_turn(&self) -> PollTurn {
        self.poller().lock_owned().await
    }
}

/// A wake-up that one waiter took from its lock's messages (see
/// [`Subscription::wake_token`]). Dropped before [`WakeToken::used`], it is
/// passed on to another waiter of this client for that lock: a message that
/// wakes one waiter (a `notify_one`) is lost if that waiter then leaves
/// without trying (out of time as it was woken, dropped before its attempt),
/// and tokio passes a wake-up on only when its waiter is dropped before it
/// was polled, not after.
#[derive(Debug)]
pub(crate) struct WakeToken {
    wakeups: Arc<Wakeups>,
    class: Class,
    used: bool,
}

impl WakeToken {
    /// The waiter acted on it: an attempt went out.
    pub(crate) fn used(mut self) {
        self.used = true;
    }
}

impl Drop for WakeToken {
    fn drop(&mut self) {
        if !self.used {
            self.wakeups.pass_on(self.class);
        }
    }
}

/// The turn to poll a lock whose holder set no expiry; dropping it passes it on.
pub(crate) type PollTurn = tokio::sync::OwnedMutexGuard<()>;

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut table = self.pubsub.channels.table();
        let Some(entry) = table.get_mut(&self.channel.name) else {
            return;
        };
        if !Arc::ptr_eq(&entry.channel, &self.channel) {
            return;
        }
        if let Some(lock) = entry.locks.get_mut(&self.lock) {
            let count = &mut lock.waiters[self.class as usize];
            *count = count.saturating_sub(1);
            if lock.total() == 0 {
                entry.locks.remove(&self.lock);
            }
        }
        if entry.locks.is_empty() {
            table.remove(&self.channel.name);
            // A fair semaphore's channel is one client's: nobody's release
            // counts it as a listener, so it may linger.
            let linger =
                self.class == Class::Addressed || is_one_waiters(&self.channel.name, &self.lock);
            let _ = self
                .pubsub
                .commands
                .send(Command::Unsubscribe(self.channel.name.clone(), linger));
        }
    }
}

#[cfg(test)]
mod lingering {
    use super::is_one_waiters;
    use crate::transport::keys;

    #[test]
    fn only_a_fair_waiters_own_channel_lingers() {
        let lock = "orders:42";
        assert!(is_one_waiters(
            &keys::fair_waiter_channel(lock, "a1b2:7"),
            lock
        ));
        for shared in [
            keys::lock_channel(lock),
            keys::rwlock_channel(lock),
            keys::semaphore_channel(lock),
            keys::latch_channel(lock),
            // Another lock's whose name starts the same.
            keys::lock_channel("orders:420"),
        ] {
            assert!(!is_one_waiters(&shared, lock), "{shared}");
        }
    }
}
