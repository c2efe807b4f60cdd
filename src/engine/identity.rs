//! Who a client is, said on the server: a small key per client,
//! `redisson_locks_client:{<client id>}`, holding its host, process id, crate
//! version and chosen name as JSON, with a TTL of one watchdog lease. A task
//! beside the watchdog's sets it again every lease / 3, so it lives as long as
//! the client and at most one lease after a killed process or a dropped
//! client; [`Client::close`](crate::Client::close) deletes it.
//!
//! Why a key and not `CLIENT SETNAME` (see `DESIGN.md`, "Owners you can name"):
//! an owner field carries the client id, and a key named by that id is found
//! with one GET from any connection, on any node, by anyone with read access;
//! a connection name is found only by listing every connection of every node
//! (`CLIENT LIST`, an admin command that managed services and ACLs often
//! refuse), is lost with each re-dial, and belongs to the user, whose own name
//! it would overwrite. Redisson never reads the key.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::keys;

use crate::config::LIBRARY;

/// Who a client of this crate is, as it says on the server.
///
/// [`Client::inspect`](crate::Client::inspect) attaches it to every holder and
/// waiter whose client announced itself (see [`Config::announce`](crate::Config::announce));
/// a Java Redisson client announces nothing, and its owners carry `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Identity {
    /// The client id: the first half of the client's owner fields.
    pub client_id: String,
    /// The library: `redisson-locks`.
    pub library: String,
    /// The library's version.
    pub version: String,
    /// The host the client runs on (its host name, as the OS says it).
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// [`Config::client_name`](crate::Config::client_name), when set.
    pub name: Option<String>,
    /// When the client connected, in epoch milliseconds (its own clock).
    pub started_ms: u64,
}

impl Identity {
    /// The identity of a client of this process.
    pub(crate) fn of_this_process(client_id: &str, name: Option<String>) -> Identity {
        let started_ms = crate::transport::scripts::epoch_millis();
        Identity {
            client_id: client_id.to_owned(),
            library: LIBRARY.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            host: host_name(),
            pid: std::process::id(),
            name,
            started_ms,
        }
    }
}

/// The host's name: `/proc/sys/kernel/hostname`, then `$HOSTNAME`, else
/// `unknown` (no libc call: the crate forbids `unsafe`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A client's announcement: what it writes, and for how long.
#[derive(Debug, Clone)]
pub(crate) struct Announcement {
    key: String,
    value: String,
    ttl_ms: u64,
}

impl Announcement {
    pub(crate) fn new(identity: &Identity, ttl: Duration) -> Announcement {
        Announcement {
            key: keys::identity_key(&identity.client_id),
            // An Identity always serialises (strings and numbers only).
            value: serde_json::to_string(identity).unwrap_or_default(),
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1),
        }
    }

    /// Writes (or refreshes) the key. A refusal (an ACL, a read-only replica)
    /// is the caller's to report once; the locks work without it.
    pub(crate) async fn refresh(&self, conn: &mut Conn) -> Result<()> {
        redis::cmd("SET")
            .arg(&self.key)
            .arg(&self.value)
            .arg("PX")
            .arg(self.ttl_ms)
            .query_async::<()>(conn)
            .await
            .map_err(Error::redis)
    }

    /// Deletes the key: the client is closing.
    pub(crate) async fn withdraw(&self, conn: &mut Conn) -> Result<()> {
        redis::cmd("DEL")
            .arg(&self.key)
            .query_async::<()>(conn)
            .await
            .map_err(Error::redis)
    }
}

/// The identity client `client_id` announced, if it did and its key is fresh.
/// A value that is not an identity (someone else's key) reads as none.
pub(crate) async fn look_up(conn: &mut Conn, client_id: &str) -> Result<Option<Identity>> {
    let value: Option<Vec<u8>> = redis::cmd("GET")
        .arg(keys::identity_key(client_id))
        .query_async(conn)
        .await
        .map_err(Error::redis)?;
    Ok(value
        .and_then(|value| serde_json::from_slice::<Identity>(&value).ok())
        .filter(|identity| identity.client_id == client_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_round_trips_through_its_json() {
        let identity = Identity::of_this_process("id-1", Some("billing".into()));
        let announcement = Announcement::new(&identity, Duration::from_secs(30));
        let back: Identity = serde_json::from_str(&announcement.value).expect("json");
        assert_eq!(back, identity);
        assert_eq!(back.pid, std::process::id());
        assert_eq!(announcement.ttl_ms, 30_000);
        assert!(!back.host.is_empty());
    }
}

/// The task that keeps the client's identity key set. Dropping it stops the
/// refresh (the key ends with its TTL); [`withdraw`](Announcer::withdraw)
/// deletes the key first.
#[derive(Debug, Default)]
pub(crate) struct Announcer {
    /// Sent a reply channel, the task deletes the key, then answers.
    stop: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

impl Announcer {
    /// Refreshes `announcement` every `lease / 3` on the client's background
    /// runtime (its TTL is one lease, so it outlives a killed process by no
    /// more than its holds do); nothing when the client announces nothing.
    pub(crate) fn start(announcement: Option<Announcement>, conn: &Conn, lease: Duration) -> Self {
        let Some(announcement) = announcement else {
            return Announcer::default();
        };
        let (withdraw, withdrawn) = oneshot::channel();
        conn.spawner().spawn(keep_announcing(
            announcement,
            conn.clone(),
            lease,
            withdrawn,
        ));
        Announcer {
            stop: Some(withdraw),
        }
    }

    /// Stops refreshing the client's identity and deletes its key; the
    /// receiver answers once the DEL has been answered (or the refresh had
    /// already stopped). Nothing when the client announces nothing.
    pub(crate) fn withdraw(&mut self) -> Option<oneshot::Receiver<()>> {
        let (done, answered) = oneshot::channel();
        self.stop.take()?.send(done).ok()?;
        Some(answered)
    }
}

/// Sets the client's identity key again every `lease / 3`, until told to
/// withdraw it (then it deletes the key, after any refresh in flight, so that
/// no SET lands after the DEL) or dropped (then the key ends with its TTL). A
/// failure is said once until a refresh succeeds again; a refusal by the
/// server's ACL ends the refreshing: it would be refused for ever.
async fn keep_announcing(
    announcement: Announcement,
    mut conn: Conn,
    lease: Duration,
    mut withdrawn: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // set at connect already
    let mut failing = false;
    loop {
        tokio::select! {
            biased;
            withdraw = &mut withdrawn => {
                if let Ok(done) = withdraw {
                    // Best effort: left behind, the key ends with its TTL.
                    let _ = announcement.withdraw(&mut conn).await;
                    let _ = done.send(());
                }
                return;
            }
            _ = ticks.tick() => match announcement.refresh(&mut conn).await {
                Err(crate::Error::Redis(failure))
                    if failure.kind() == crate::RedisErrorKind::NoPermission =>
                {
                    crate::trace::warn_event!(
                        "this client may not write its identity key (ACL): the inspector will not name it: {failure}"
                    );
                    return;
                }
                Err(e) if !failing => {
                    failing = true;
                    crate::trace::warn_event!(
                        "refreshing this client's identity key failed (the inspector may not name it): {e}"
                    );
                }
                Err(_) => {}
                Ok(()) => failing = false,
            },
        }
    }
}
