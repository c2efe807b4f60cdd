//! The client's one connection: a single server's reconnecting multiplexed
//! connection, or a Redis Cluster connection that routes each command by slot and
//! follows MOVED/ASK and slot-map changes after a failover.

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// Either kind of connection; cheap to clone, as both are handles.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster {
        conn: ClusterConnection,
        /// Whether unlock messages travel on sharded pub/sub (SPUBLISH/SSUBSCRIBE).
        sharded: bool,
    },
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conn::Single(_) => f.write_str("Conn::Single"),
            Conn::Cluster { sharded, .. } => write!(f, "Conn::Cluster {{ sharded: {sharded} }}"),
        }
    }
}

impl Conn {
    /// The command the release scripts publish unlock messages with. Sharded and
    /// plain messages do not reach each other, so this must match what the other
    /// clients (Java ones included) subscribe with.
    pub(crate) fn publish_command(&self) -> &'static str {
        match self {
            Conn::Cluster { sharded: true, .. } => "spublish",
            _ => "publish",
        }
    }

    /// Is this a cluster connection (keys of one call must share a slot)?
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster { .. })
    }

    pub(crate) async fn subscribe(&mut self, channels: &[&str]) -> redis::RedisResult<()> {
        match self {
            Conn::Single(conn) => conn.subscribe(channels).await,
            Conn::Cluster {
                conn,
                sharded: true,
            } => conn.ssubscribe(channels).await,
            Conn::Cluster { conn, .. } => conn.subscribe(channels).await,
        }
    }

    pub(crate) async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        match self {
            Conn::Single(conn) => conn.unsubscribe(channels).await,
            Conn::Cluster {
                conn,
                sharded: true,
            } => conn.sunsubscribe(channels).await,
            Conn::Cluster { conn, .. } => conn.unsubscribe(channels).await,
        }
    }
}

impl redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster { conn, .. } => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster { conn, .. } => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster { conn, .. } => conn.get_db(),
        }
    }
}
