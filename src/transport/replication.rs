//! Replica sync: making sure a replica has a write before relying on it (Redis
//! `WAIT`), as Redisson's `syncSlaves` does.

use crate::error::{Error, Result};
use crate::transport::conn::Conn;

/// Waits until `replicas` replicas acknowledged every write this client's
/// connection made so far, or `replica_sync_timeout` passed; how many did (the
/// acquire counts as confirmed only when that is at least `replicas`).
///
/// WAIT applies to the connection's own writes. The client has one connection, so
/// this covers the write just made (and any other of this client's, which only
/// makes it stricter).
pub(crate) async fn wait_for_replicas(conn: &Conn, replicas: u32, timeout_ms: u64) -> Result<u32> {
    let mut conn = conn.clone();
    let acked: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms)
        .query_async(&mut conn)
        .await
        .map_err(Error::redis)?;
    u32::try_from(acked).map_err(|_| Error::unexpected("WAIT", acked))
}

/// How a client syncs releases and renewals: best effort, since a lost one costs
/// liveness (the hold lives on until its lease ends), never exclusion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuietSync {
    pub(crate) replicas: u32,
    pub(crate) timeout_ms: u64,
}

impl QuietSync {
    pub(crate) async fn run(self, conn: &mut Conn) {
        if self.replicas == 0 {
            return;
        }
        let _: redis::RedisResult<i64> = redis::cmd("WAIT")
            .arg(self.replicas)
            .arg(self.timeout_ms)
            .query_async(conn)
            .await;
    }
}

/// How many replicas must acknowledge each acquire: the configured number, or
/// (by default) one when the server has replicas connected right now, else none.
/// Never in cluster mode (WAIT would have to reach the node that took each write).
/// The second value is a warning when the server could not be asked.
pub(crate) async fn replicas_to_sync(
    configured: Option<u32>,
    conn: &mut Conn,
) -> (u32, Option<String>) {
    if conn.is_cluster() {
        return (0, None);
    }
    if let Some(n) = configured {
        return (n, None);
    }
    let info: redis::RedisResult<String> = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await;
    let connected = info.ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| crate::numeral::decimal::<u32>(n.trim()))
    });
    match connected {
        Some(n) => (n.min(1), None),
        None => (
            0,
            Some(
                "could not read INFO replication: replica sync is off; set \
                 Config::replica_sync to require replica acknowledgements"
                    .to_owned(),
            ),
        ),
    }
}
