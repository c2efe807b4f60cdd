//! The client's one connection: a single server's reconnecting multiplexed
//! connection, or a Redis Cluster connection that routes each command by slot and
//! follows MOVED/ASK and slot-map changes after a failover.

use std::sync::{Arc, RwLock};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::background::Spawner;

/// The client's connection and its background runtime; cheap to clone, as both
/// are handles. Every command is polled with the background runtime entered (see
/// `background.rs`), so re-dials and drivers never land on a caller's runtime.
#[derive(Clone)]
pub(crate) struct Conn {
    link: Link,
    spawner: Spawner,
}

/// Which kind of connection.
#[derive(Clone)]
pub(crate) enum Link {
    Single(ConnectionManager),
    Cluster {
        conn: ClusterConnection,
        /// Whether unlock messages travel on sharded pub/sub (SPUBLISH/SSUBSCRIBE).
        sharded: bool,
    },
    /// The primary that Sentinel names, followed across failovers.
    Sentinel(Arc<SentinelConn>),
}

/// A connection to whichever server Sentinel says is the primary. A command that
/// fails the way a failover makes commands fail (refused, cut, timed out, or a
/// READONLY from a demoted primary) makes it ask the sentinels again; when they
/// name another primary it connects there, and tells the subscriber to subscribe
/// again (as after any reconnect), so waiters follow.
pub(crate) struct SentinelConn {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    manager_config: ConnectionManagerConfig,
    current: RwLock<(String, ConnectionManager)>,
    /// Bumped on every switch, so that commands which failed together ask the
    /// sentinels once, not once each.
    switches: std::sync::atomic::AtomicU64,
    on_switch: Box<dyn Fn() + Send + Sync>,
}

impl SentinelConn {
    pub(crate) async fn connect(
        mut sentinel: SentinelClient,
        manager_config: ConnectionManagerConfig,
        on_switch: Box<dyn Fn() + Send + Sync>,
    ) -> redis::RedisResult<SentinelConn> {
        let client = sentinel.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        let manager = ConnectionManager::new_with_config(client, manager_config.clone()).await?;
        Ok(SentinelConn {
            sentinel: tokio::sync::Mutex::new(sentinel),
            manager_config,
            current: RwLock::new((address, manager)),
            switches: std::sync::atomic::AtomicU64::new(0),
            on_switch,
        })
    }

    fn manager(&self) -> ConnectionManager {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }

    /// How many times this connection switched primaries so far.
    fn switches(&self) -> u64 {
        self.switches.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// After a failed command: follow the primary if the failure suggests it moved.
    /// After a failed command sent at switch count `seen`: follow the primary if
    /// the failure suggests it moved.
    async fn follow_if_moved<T>(&self, result: &redis::RedisResult<T>, seen: u64) {
        if let Err(err) = result {
            if primary_may_have_moved(err) {
                self.follow(seen).await;
            }
        }
    }

    /// Asks the sentinels for the primary; moves there if it changed. Nothing to
    /// do when another caller already switched since `seen`: commands that failed
    /// together ask the sentinels once.
    async fn follow(&self, seen: u64) {
        let mut sentinel = self.sentinel.lock().await;
        if self.switches() != seen {
            return;
        }
        let Ok(client) = sentinel.async_get_client().await else {
            return;
        };
        let address = client.get_connection_info().addr().to_string();
        if self.current.read().unwrap_or_else(|p| p.into_inner()).0 == address {
            return;
        }
        let Ok(manager) =
            ConnectionManager::new_with_config(client, self.manager_config.clone()).await
        else {
            return;
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = (address, manager);
        self.switches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(sentinel);
        (self.on_switch)();
    }
}

/// Does `err` look like the primary moved?
fn primary_may_have_moved(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || matches!(
            err.kind(),
            redis::ErrorKind::Server(
                redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown
            )
        )
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.link {
            Link::Single(_) => f.write_str("Conn::Single"),
            Link::Cluster { sharded, .. } => write!(f, "Conn::Cluster {{ sharded: {sharded} }}"),
            Link::Sentinel(_) => f.write_str("Conn::Sentinel"),
        }
    }
}

impl Conn {
    pub(crate) fn new(link: Link, spawner: Spawner) -> Self {
        Conn { link, spawner }
    }

    /// The client's background runtime.
    pub(crate) fn spawner(&self) -> &Spawner {
        &self.spawner
    }

    /// Runs cleanup `work` on the client's background runtime (see
    /// [`Spawner::spawn_cleanup`]): it runs whatever becomes of the caller's runtime.
    pub(crate) fn spawn_cleanup(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        self.spawner.spawn_cleanup(work);
    }

    /// The command the release scripts publish unlock messages with. Sharded and
    /// plain messages do not reach each other, so this must match what the other
    /// clients (Java ones included) subscribe with.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self.link {
            Link::Cluster { sharded: true, .. } => "spublish",
            _ => "publish",
        }
    }

    /// Is this a cluster connection (keys of one call must share a slot)?
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster { .. })
    }

    pub(crate) async fn subscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        let link = &mut self.link;
        self.spawner
            .enter(async move {
                match link {
                    Link::Single(conn) => conn.subscribe(channels).await,
                    Link::Sentinel(sentinel) => {
                        let seen = sentinel.switches();
                        let result = sentinel.manager().subscribe(channels).await;
                        sentinel.follow_if_moved(&result, seen).await;
                        result
                    }
                    Link::Cluster {
                        conn,
                        sharded: true,
                    } => conn.ssubscribe(channels).await,
                    Link::Cluster { conn, .. } => conn.subscribe(channels).await,
                }
            })
            .await
    }

    pub(crate) async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        let link = &mut self.link;
        self.spawner
            .enter(async move {
                match link {
                    Link::Single(conn) => conn.unsubscribe(channels).await,
                    Link::Sentinel(sentinel) => sentinel.manager().unsubscribe(channels).await,
                    Link::Cluster {
                        conn,
                        sharded: true,
                    } => conn.sunsubscribe(channels).await,
                    Link::Cluster { conn, .. } => conn.unsubscribe(channels).await,
                }
            })
            .await
    }
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let request: RedisFuture<'a, Value> = match &mut self.link {
            Link::Sentinel(sentinel) => Box::pin(async move {
                let seen = sentinel.switches();
                let result = sentinel.manager().req_packed_command(cmd).await;
                sentinel.follow_if_moved(&result, seen).await;
                result
            }),
            Link::Single(conn) => conn.req_packed_command(cmd),
            Link::Cluster { conn, .. } => conn.req_packed_command(cmd),
        };
        Box::pin(self.spawner.enter(request))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let request: RedisFuture<'a, Vec<Value>> = match &mut self.link {
            Link::Sentinel(sentinel) => Box::pin(async move {
                sentinel
                    .manager()
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
            Link::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Link::Cluster { conn, .. } => conn.req_packed_commands(pipeline, offset, count),
        };
        Box::pin(self.spawner.enter(request))
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Sentinel(sentinel) => sentinel.manager().get_db(),
            Link::Single(conn) => conn.get_db(),
            Link::Cluster { conn, .. } => conn.get_db(),
        }
    }
}
