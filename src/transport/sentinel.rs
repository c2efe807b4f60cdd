//! A connection to whichever server Sentinel names as the primary, following
//! it across failovers (feature `sentinel`).

use std::sync::RwLock;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;

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

    pub(crate) fn manager(&self) -> ConnectionManager {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }

    /// How many times this connection switched primaries so far.
    pub(crate) fn switches(&self) -> u64 {
        self.switches.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// After a failed command: follow the primary if the failure suggests it moved.
    /// After a failed command sent at switch count `seen`: follow the primary if
    /// the failure suggests it moved.
    pub(crate) async fn follow_if_moved<T>(&self, result: &redis::RedisResult<T>, seen: u64) {
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
        let client = match sentinel.async_get_client().await {
            Ok(client) => client,
            Err(e) => {
                crate::trace::warn_event!(
                    "asking the sentinels for the primary failed (asked again on the next failure): {e}"
                );
                return;
            }
        };
        let address = client.get_connection_info().addr().to_string();
        let previous = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone();
        if previous == address {
            return;
        }
        let manager = match ConnectionManager::new_with_config(client, self.manager_config.clone())
            .await
        {
            Ok(manager) => manager,
            Err(e) => {
                crate::trace::warn_event!(
                        "connecting to the new primary {address} failed (asked again on the next failure): {e}"
                    );
                return;
            }
        };
        crate::trace::info_event!("Sentinel failover followed: primary {previous} -> {address}");
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
