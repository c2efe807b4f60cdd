//! The client's one connection: a single server's reconnecting multiplexed
//! connection, a Redis Cluster connection that routes each command by slot and
//! follows MOVED/ASK and slot-map changes after a failover, or the primary Sentinel
//! names; and where its driver runs (`home.rs`).

use std::sync::{Arc, RwLock};

use redis::aio::ConnectionManager;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use tokio::runtime::Handle;

use crate::transport::background::{entered, Spawner};
use crate::transport::home::Home;
use crate::transport::script_cache::ScriptCache;
use crate::transport::silence::{Sent, Verdict};

/// The client's connection: a cheap, cloneable handle. It knows where its driver
/// lives (see `home.rs`) and moves it to the client's own thread when that home
/// ends or stalls, before the next command is sent; every command is polled with
/// the home entered.
#[derive(Clone)]
pub(crate) struct Conn {
    shared: Arc<Shared>,
}

struct Shared {
    /// What kind of link, fixed for the client's life.
    cluster: bool,
    /// Messages go by sharded pub/sub (SPUBLISH, SSUBSCRIBE).
    sharded: bool,
    placed: RwLock<Placed>,
    /// Connects a new link of the same kind (run on the client's thread).
    reconnect: Reconnect,
    /// One move at a time.
    moving: tokio::sync::Mutex<()>,
    /// The client is gone: the cleanup still to send must not depend on the
    /// home runtime (the client may have been dropped on its only worker).
    leaving: std::sync::atomic::AtomicBool,
    spawner: Spawner,
    /// Tells the subscriber the connection was replaced.
    on_move: Box<dyn Fn() + Send + Sync>,
    /// The server's script cache as this client knows it.
    scripts: Arc<ScriptCache>,
    /// When the link last answered (see `silence.rs`): a cluster link silent
    /// through a command's whole timeout, or found not dispatching by a
    /// probe, is replaced.
    silence: crate::transport::silence::Silence,
    /// How long a cluster command waits in silence before the link is probed
    /// (see `silence.rs`), and how long the probe may take.
    probe_after: std::time::Duration,
    /// A probe of the link is out (one at a time).
    probing: std::sync::atomic::AtomicBool,
    /// The generation of the link in use, for commands still out on an older
    /// one: a link replaced under them fails them at once (their outcome
    /// unknown, as after a timeout) rather than at their timeout.
    replaced: tokio::sync::watch::Sender<u64>,
}

/// Connects a new link like the first one.
pub(crate) type Reconnect = Box<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::Result<Link>> + Send>>
        + Send
        + Sync,
>;

/// The link in use and the runtime its driver lives on.
#[derive(Clone)]
struct Placed {
    link: Link,
    home: Home,
    /// Counts the links this client made: a silence is judged against the
    /// link the command went out on, never a newer one.
    generation: u64,
}

/// Which kind of connection.
#[derive(Clone)]
pub(crate) enum Link {
    Single(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster {
        conn: ClusterConnection,
        /// Whether unlock messages travel on sharded pub/sub (SPUBLISH/SSUBSCRIBE).
        sharded: bool,
    },
    /// The primary that Sentinel names, followed across failovers.
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<crate::transport::sentinel::SentinelConn>),
}

/// The error of a command that was never sent because no link could be made: a
/// refused connection, which callers treat as surely not executed.
fn not_sent(detail: &str) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("the connection could not be moved to the client's thread: {detail}"),
    ))
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let placed = self.shared.placed();
        let link = match &placed.link {
            Link::Single(_) => "single",
            #[cfg(feature = "cluster")]
            Link::Cluster { .. } => "cluster",
            #[cfg(feature = "sentinel")]
            Link::Sentinel(_) => "sentinel",
        };
        f.debug_struct("Conn")
            .field("link", &link)
            .field("home", &placed.home)
            .finish()
    }
}

impl Shared {
    fn placed(&self) -> Placed {
        self.placed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `link`, driven on the client's own thread, in use as number
    /// `generation`; commands still out on the one before fail at once.
    fn place(&self, link: Link, generation: u64) {
        *self.placed.write().unwrap_or_else(|p| p.into_inner()) = Placed {
            link,
            home: Home::Client(self.spawner.handle().clone()),
            generation,
        };
        self.replaced.send_replace(generation);
    }
}

impl Conn {
    /// `link`, whose driver runs on `home`; `reconnect` makes another like it.
    /// A cluster command silent for `probe_after` has its link probed.
    pub(crate) fn new(
        link: Link,
        home: Home,
        spawner: Spawner,
        (reconnect, probe_after): (Reconnect, std::time::Duration),
        on_move: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        let (cluster, sharded) = match &link {
            #[cfg(feature = "cluster")]
            Link::Cluster { sharded, .. } => (true, *sharded),
            Link::Single(_) => (false, false),
            #[cfg(feature = "sentinel")]
            Link::Sentinel(_) => (false, false),
        };
        Conn {
            shared: Arc::new(Shared {
                cluster,
                sharded,
                placed: RwLock::new(Placed {
                    link,
                    home,
                    generation: 0,
                }),
                reconnect,
                moving: tokio::sync::Mutex::new(()),
                leaving: std::sync::atomic::AtomicBool::new(false),
                spawner,
                on_move,
                scripts: Arc::new(ScriptCache::default()),
                silence: Default::default(),
                probe_after,
                probing: std::sync::atomic::AtomicBool::new(false),
                replaced: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// The server's script cache as this client knows it (see
    /// `script_cache.rs`).
    pub(crate) fn scripts(&self) -> &Arc<ScriptCache> {
        &self.shared.scripts
    }

    /// The client is being dropped: commands still to be sent (queued releases)
    /// move the connection to the client's own thread first, so they do not wait
    /// on a home runtime whose worker may be the one dropping the client.
    pub(crate) fn leave_home(&self) {
        self.shared
            .leaving
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The calling thread is about to block until the client's own thread has
    /// answered (the blocking API): when it runs inside the home runtime, it may
    /// be the worker the connection's driver needs, so commands move to the
    /// client's own thread first, as for a client being dropped.
    #[cfg(feature = "blocking")]
    pub(crate) fn leave_home_if_blocking_it(&self) {
        let Ok(current) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let placed = self.shared.placed();
        if placed.home.is_caller() && placed.home.handle().id() == current.id() {
            self.leave_home();
        }
    }

    /// The client's background runtime.
    pub(crate) fn spawner(&self) -> &Spawner {
        &self.shared.spawner
    }

    /// Runs cleanup `work` on the client's background runtime (see
    /// [`Spawner::spawn_cleanup`]): it runs whatever becomes of the caller's runtime.
    pub(crate) fn spawn_cleanup(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        self.shared.spawner.spawn_cleanup(work);
    }

    /// The command the release scripts publish unlock messages with. Sharded and
    /// plain messages do not reach each other, so this must match what the other
    /// clients (Java ones included) subscribe with.
    pub(crate) fn publish_command(&self) -> &'static str {
        if self.is_sharded() {
            "spublish"
        } else {
            "publish"
        }
    }

    /// Do messages go by sharded pub/sub (counted by `PUBSUB SHARDNUMSUB`)?
    pub(crate) fn is_sharded(&self) -> bool {
        self.shared.sharded
    }

    /// Is this a cluster connection (keys of one call must share a slot)?
    pub(crate) fn is_cluster(&self) -> bool {
        self.shared.cluster
    }

    /// The link to send the next command on, moved to the client's own thread
    /// first if its home is no longer healthy.
    /// Also the link's home, to be told if it ended under a command.
    async fn link(&self) -> redis::RedisResult<(Link, Handle, Home)> {
        let placed = self.shared.placed();
        let leaving = self
            .shared
            .leaving
            .load(std::sync::atomic::Ordering::Relaxed);
        if placed.home.is_healthy() && !(leaving && placed.home.is_caller()) {
            let runtime = self.runtime_for_command(&placed.home);
            return Ok((placed.link, runtime, placed.home));
        }
        let link = self.move_home(placed).await?;
        let own = self.shared.spawner.handle().clone();
        Ok((link, own.clone(), Home::Client(own)))
    }

    /// The runtime a command is polled in (see `home.rs`): the client's own for
    /// the client's background work (renewals, subscriptions, releases), so that
    /// nothing it depends on can end or stall with a home; the home for the
    /// callers' commands, which costs nothing when the caller is on the home.
    fn runtime_for_command(&self, home: &Home) -> Handle {
        if crate::transport::background::on_client_thread() {
            self.shared.spawner.handle().clone()
        } else {
            home.handle().clone()
        }
    }

    /// Replaces a link whose home ended or stalled with a new one whose driver (and
    /// push relay) run on the client's thread, and has every channel subscribed
    /// again there. If no link can be made now (the server is down too), the
    /// command fails as surely not sent, and the next one tries again: the old
    /// link's push relay may have died with its home, so it is never adopted.
    async fn move_home(&self, stale: Placed) -> redis::RedisResult<Link> {
        let shared = &self.shared;
        let _moving = shared.moving.lock().await;
        let current = shared.placed();
        if !current.home.is(&stale.home) {
            // Someone else moved it while this caller waited.
            return Ok(current.link);
        }
        let link = match shared.spawner.run((shared.reconnect)()).await {
            Ok(Ok(link)) => link,
            Ok(Err(e)) => {
                crate::trace::warn_event!(
                    "moving the connection off a runtime that ended or stalled failed (next command retries): {e}"
                );
                return Err(not_sent(&e.to_string()));
            }
            Err(e) => return Err(not_sent(&e.to_string())),
        };
        shared.place(link.clone(), current.generation + 1);
        crate::trace::info_event!(
            "the runtime driving the connection ended or stalled: moved the connection to the \
             client's own thread"
        );
        (shared.on_move)();
        Ok(link)
    }

    /// What a command about to go out is judged by afterwards (see
    /// [`judge`](Conn::judge)): the link it goes out on and when. Only a
    /// cluster link is watched: a single server's and a Sentinel's managers
    /// reconnect by themselves, and their commands pay nothing for this.
    fn watch(&self) -> Option<(u64, Sent)> {
        let shared = &self.shared;
        shared.cluster.then(|| {
            let generation = shared
                .placed
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .generation;
            (generation, shared.silence.sent())
        })
    }

    /// Judges the link a command went out on (see [`watch`](Conn::watch))
    /// by its `result`; a cluster link that went silent (see `silence.rs`)
    /// is replaced in the background by a new one, and every channel
    /// subscribed again there (its waiters woken), as after a move.
    fn judge<T>(&self, result: &redis::RedisResult<T>, watched: Option<(u64, Sent)>) {
        let Some((generation, sent)) = watched else {
            return;
        };
        if self.shared.silence.judge(result, sent) != Verdict::Silent {
            return;
        }
        let conn = self.clone();
        self.shared.spawner.spawn(async move {
            conn.replace_silent(generation).await;
        });
    }

    /// `command`, sent at `watched` (see [`watch`](Conn::watch)): on a
    /// cluster link, silent for `probe_after`, the link is probed (see
    /// `silence.rs`); replaced meanwhile, the command fails at once, its
    /// outcome unknown (as after a timeout: callers settle it so).
    async fn watched<T>(
        &self,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
        watched: Option<(u64, Sent)>,
    ) -> redis::RedisResult<T> {
        let Some((generation, sent)) = watched else {
            return command.await;
        };
        let mut command = std::pin::pin!(command);
        let probe_due = tokio::time::sleep(self.shared.probe_after);
        tokio::select! {
            result = &mut command => return result,
            _ = probe_due => {}
        }
        // Only now: most commands are answered before. A replacement made
        // meanwhile is seen all the same (`wait_for` looks at the value first).
        let mut replaced = self.shared.replaced.subscribe();
        if self.shared.silence.silent_since(sent) {
            self.probe(generation, sent);
        }
        tokio::select! {
            result = &mut command => result,
            _ = replaced.wait_for(|now| *now != generation) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the cluster connection stopped answering and was replaced under the command \
                 (its outcome is unknown)",
            )
            .into()),
        }
    }

    /// Probes link number `generation`, silent since `sent`, from the
    /// client's thread (one probe at a time): a PING to every primary that
    /// ends at the first answer. One slow or paused node answers nothing,
    /// the others do, and the link is kept; a link that answers nothing at
    /// all within `probe_after` (redis-rs's slot refresh holds every command
    /// while it waits on one node) is replaced.
    fn probe(&self, generation: u64, sent: Sent) {
        use std::sync::atomic::Ordering;
        let shared = &self.shared;
        if shared.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let conn = self.clone();
        shared.spawner.spawn(async move {
            let shared = &conn.shared;
            let placed = shared.placed();
            if placed.generation != generation {
                shared.probing.store(false, Ordering::Release);
                return;
            }
            let ping = ping_any_primary(placed.link);
            let answered = tokio::time::timeout(shared.probe_after, ping).await;
            shared.probing.store(false, Ordering::Release);
            match answered {
                Ok(Ok(())) => shared.silence.answered(),
                _ if shared.silence.silent_since(sent) => conn.replace_silent(generation).await,
                _ => {}
            }
        });
    }

    /// Replaces link number `generation` if it is still the one in use and
    /// has said nothing since it was judged silent. If no new link can be
    /// made (the cluster is down), the old one stays.
    async fn replace_silent(&self, generation: u64) {
        let shared = &self.shared;
        let _moving = shared.moving.lock().await;
        let current = shared.placed();
        if current.generation != generation {
            return;
        }
        let link = match (shared.reconnect)().await {
            Ok(link) => link,
            Err(e) => {
                crate::trace::warn_event!(
                    "the cluster connection stopped answering, and a new one could not be made (tried again on the next silence): {e}"
                );
                return;
            }
        };
        shared.place(link, generation + 1);
        shared.silence.answered();
        crate::trace::warn_event!(
            "the cluster connection stopped answering (redis-rs's slot refresh can hang, for a reply timeout or for good): replaced it with a new one"
        );
        (shared.on_move)();
    }

    /// The primaries a whole-keyspace command (SCAN) must visit, each named by
    /// a slot it serves (the cluster client routes by its own slot map, so
    /// announced host names and addresses need no matching): in a cluster, one
    /// slot per serving primary of `CLUSTER NODES`, and whether a primary had
    /// to be left out (no address, in handshake); elsewhere the one server,
    /// `None`.
    pub(crate) async fn primaries(&self) -> redis::RedisResult<(Vec<Option<u16>>, bool)> {
        let (link, runtime, home) = self.link().await?;
        match link {
            #[cfg(feature = "cluster")]
            Link::Cluster { mut conn, .. } => {
                let command = entered(runtime, async move {
                    conn.route_command(
                        redis::cmd("CLUSTER").arg("NODES").clone(),
                        redis::cluster_routing::RoutingInfo::SingleNode(
                            redis::cluster_routing::SingleNodeRoutingInfo::Random,
                        ),
                    )
                    .await
                });
                let nodes = unless_its_runtime_ended(command, &home).await?;
                let text: String = redis::FromRedisValue::from_redis_value(nodes)?;
                let (slots, left_out) = cluster_primaries(&text);
                Ok((slots.into_iter().map(Some).collect(), left_out))
            }
            _ => {
                let _ = (runtime, home);
                Ok((vec![None], false))
            }
        }
    }

    /// Sends `cmd` to the primary serving `slot` (one of
    /// [`primaries`](Conn::primaries)), or as any command when `slot` is `None`.
    pub(crate) async fn query_on(&self, slot: Option<u16>, cmd: &Cmd) -> redis::RedisResult<Value> {
        let Some(slot) = slot else {
            return cmd.query_async(&mut self.clone()).await;
        };
        let (link, runtime, home) = self.link().await?;
        match link {
            #[cfg(feature = "cluster")]
            Link::Cluster { mut conn, .. } => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::new(slot, SlotAddr::Master),
                ));
                let cmd = cmd.clone();
                let command = entered(
                    runtime,
                    async move { conn.route_command(cmd, routing).await },
                );
                unless_its_runtime_ended(command, &home).await
            }
            _ => {
                let _ = (runtime, home, slot);
                cmd.query_async(&mut self.clone()).await
            }
        }
    }

    pub(crate) async fn subscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        let watched = self.watch();
        let (mut link, runtime, home) = self.link().await?;
        let command = entered(runtime, async move { link.subscribe(channels).await });
        let result = self
            .watched(unless_its_runtime_ended(command, &home), watched)
            .await;
        self.judge(&result, watched);
        result
    }

    pub(crate) async fn unsubscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        let watched = self.watch();
        let (mut link, runtime, home) = self.link().await?;
        let command = entered(runtime, async move { link.unsubscribe(channels).await });
        let result = self
            .watched(unless_its_runtime_ended(command, &home), watched)
            .await;
        self.judge(&result, watched);
        result
    }
}

/// One slot of each primary in a `CLUSTER NODES` reply that serves slots
/// (`<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch>
/// <link> <slot or range> ...`), and whether one was left out: a primary
/// without an address (`noaddr`) or still in handshake. A primary only
/// suspected of failing (`fail?`) is kept: it may answer.
#[cfg(feature = "cluster")]
fn cluster_primaries(nodes: &str) -> (Vec<u16>, bool) {
    let mut slots = Vec::new();
    let mut left_out = false;
    for line in nodes.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let Some(flags) = parts.get(2) else { continue };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master") || flags.contains(&"fail") {
            continue;
        }
        // The first slot it serves (ranges `a-b`; `[..]` entries are slots in
        // migration, not served here).
        let first = parts
            .iter()
            .skip(8)
            .filter(|p| !p.starts_with('['))
            .find_map(|p| crate::numeral::decimal::<u16>(p.split('-').next()?));
        let Some(first) = first else { continue };
        if flags.contains(&"noaddr") || flags.contains(&"handshake") {
            left_out = true;
            continue;
        }
        slots.push(first);
    }
    (slots, left_out)
}

impl Link {
    /// In a cluster, whether unlock messages use sharded pub/sub; `None` elsewhere.
    pub(crate) fn sharded_pubsub(&self) -> Option<bool> {
        match self {
            #[cfg(feature = "cluster")]
            Link::Cluster { sharded, .. } => Some(*sharded),
            _ => None,
        }
    }

    async fn subscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        match self {
            Link::Single(conn) => conn.subscribe(channels).await,
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => {
                let seen = sentinel.switches();
                let result = sentinel.manager().subscribe(channels).await;
                sentinel.follow_if_moved(&result, seen).await;
                result
            }
            #[cfg(feature = "cluster")]
            Link::Cluster {
                conn,
                sharded: true,
            } => conn.ssubscribe(channels).await,
            #[cfg(feature = "cluster")]
            Link::Cluster { conn, .. } => conn.subscribe(channels).await,
        }
    }

    async fn unsubscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        match self {
            Link::Single(conn) => conn.unsubscribe(channels).await,
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => sentinel.manager().unsubscribe(channels).await,
            #[cfg(feature = "cluster")]
            Link::Cluster {
                conn,
                sharded: true,
            } => conn.sunsubscribe(channels).await,
            #[cfg(feature = "cluster")]
            Link::Cluster { conn, .. } => conn.unsubscribe(channels).await,
        }
    }
}

impl redis::aio::ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => Box::pin(async move {
                let seen = sentinel.switches();
                let result = sentinel.manager().req_packed_command(cmd).await;
                sentinel.follow_if_moved(&result, seen).await;
                result
            }),
            Link::Single(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Link::Cluster { conn, .. } => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => Box::pin(async move {
                sentinel
                    .manager()
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
            Link::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Link::Cluster { conn, .. } => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            #[cfg(feature = "sentinel")]
            Link::Sentinel(sentinel) => sentinel.manager().get_db(),
            Link::Single(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Link::Cluster { conn, .. } => conn.get_db(),
        }
    }
}

/// A PING on `link` that any primary answers (Ok at the first answer).
async fn ping_any_primary(link: Link) -> redis::RedisResult<()> {
    #[cfg(feature = "cluster")]
    if let Link::Cluster { mut conn, .. } = link {
        use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
        let every_primary = RoutingInfo::MultiNode((
            MultipleNodeRoutingInfo::AllMasters,
            Some(ResponsePolicy::OneSucceeded),
        ));
        return conn
            .route_command(redis::cmd("PING"), every_primary)
            .await
            .map(drop);
    }
    #[cfg(not(feature = "cluster"))]
    let _ = link;
    Ok(())
}

/// `command`, with a panic in it turned into a dropped connection (an
/// outcome unknown, settled as any other), its `home` marked gone so that the
/// next command moves the connection to the client's own thread.
///
/// Why it can panic: the `redis` crate shares one re-dial among the commands
/// that find the connection broken, and that re-dial's timers (its backoff)
/// belong to the runtime that first polled it. When that was the home and the
/// home shuts down, the next poll of those timers, from the client's own
/// thread (a queued release), panics in tokio ("a Tokio 1.x context was
/// found, but it is being shutdown"), and the release was lost with its task.
async fn unless_its_runtime_ended<T>(
    command: impl std::future::Future<Output = redis::RedisResult<T>>,
    home: &Home,
) -> redis::RedisResult<T> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(command).catch_unwind().await {
        Ok(result) => result,
        Err(_) => {
            home.mark_gone();
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "the runtime the connection lived on ended under the command",
            )
            .into())
        }
    }
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let watched = self.watch();
            let (mut link, runtime, home) = self.link().await?;
            let command = entered(runtime, link.req_packed_command(cmd));
            let result = self
                .watched(unless_its_runtime_ended(command, &home), watched)
                .await;
            self.judge(&result, watched);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let watched = self.watch();
            let (mut link, runtime, home) = self.link().await?;
            let command = entered(runtime, link.req_packed_commands(pipeline, offset, count));
            let result = self
                .watched(unless_its_runtime_ended(command, &home), watched)
                .await;
            self.judge(&result, watched);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.placed().link.get_db()
    }
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::cluster_primaries;

    #[test]
    fn cluster_nodes_give_one_slot_of_each_serving_primary() {
        let nodes = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host-a slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002,host-b master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail? - 0 1426238318243 3 connected 10923-16383
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected [93->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f] 0-5460
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail - 0 1426238316232 5 connected
";
        assert_eq!(cluster_primaries(nodes), (vec![5461, 10923, 0], false));
        let lost = ":0@0 master,noaddr - 0 0 0 disconnected 100-200\n";
        let lost = format!("abc {lost}");
        assert_eq!(cluster_primaries(&lost), (vec![], true));
    }
}
