//! The `lua/` files as `redis::Script` values, one typed function per script.
//!
//! `redis::Script` hashes each script once and sends EVALSHA, loading the script
//! and retrying when the server answers NOSCRIPT (after a restart or SCRIPT FLUSH).
//! Replies are decoded here, so an unexpected shape becomes
//! [`Error::UnexpectedReply`] in one place.

use std::sync::LazyLock;

use redis::aio::ConnectionManager;
use redis::{Script, Value};

use crate::error::{Error, Result};
use crate::pubsub::UNLOCK_MESSAGE;

/// The publish command the release scripts call. Plain pub/sub on a single server;
/// sharded pub/sub (`spublish`) belongs to cluster mode.
const PUBLISH: &str = "publish";

macro_rules! lua_script {
    ($name:ident, $file:literal) => {
        static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../lua/", $file))));
    };
}

lua_script!(LOCK_ACQUIRE, "lock_acquire.lua");
lua_script!(LOCK_RELEASE, "lock_release.lua");
lua_script!(LOCK_FORCE_RELEASE, "lock_force_release.lua");
lua_script!(LOCK_RENEW, "lock_renew.lua");

/// What a failed acquire attempt learned: the lock's PTTL in milliseconds
/// (`-1` no expiry, `-2` gone), which bounds the next sleep.
pub(crate) type BusyTtl = i64;

/// The outcome of releasing one hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The owner held nothing to release.
    NotHeld,
    /// Holds remain; the lease was restarted.
    StillHeld,
    /// That was the last hold; the lock is free and a waiter was woken.
    Freed,
}

/// Reentrant acquire: `Ok(None)` when `owner` now holds `name`, `Ok(Some(ttl))` when
/// another owner does.
pub(crate) async fn lock_acquire(
    conn: &mut ConnectionManager,
    name: &str,
    lease_ms: u64,
    owner: &str,
) -> Result<Option<BusyTtl>> {
    let reply: Value = LOCK_ACQUIRE
        .key(name)
        .arg(lease_ms)
        .arg(owner)
        .invoke_async(conn)
        .await
        .map_err(|e| Error::from_redis(name, e))?;
    match reply {
        Value::Nil => Ok(None),
        Value::Int(ttl) => Ok(Some(ttl)),
        other => Err(Error::unexpected("lock acquire", other)),
    }
}

/// Reentrant release of one hold by `owner`, waking one waiter when it frees the lock.
pub(crate) async fn lock_release(
    conn: &mut ConnectionManager,
    name: &str,
    channel: &str,
    lease_ms: u64,
    owner: &str,
) -> Result<Released> {
    let reply: Value = LOCK_RELEASE
        .key(name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(PUBLISH)
        .invoke_async(conn)
        .await
        .map_err(|e| Error::from_redis(name, e))?;
    match reply {
        Value::Nil => Ok(Released::NotHeld),
        Value::Int(0) => Ok(Released::StillHeld),
        Value::Int(1) => Ok(Released::Freed),
        other => Err(Error::unexpected("lock release", other)),
    }
}

/// Deletes the lock whoever holds it; `true` when there was one (a waiter is woken).
pub(crate) async fn lock_force_release(
    conn: &mut ConnectionManager,
    name: &str,
    channel: &str,
) -> Result<bool> {
    let reply: Value = LOCK_FORCE_RELEASE
        .key(name)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(PUBLISH)
        .invoke_async(conn)
        .await
        .map_err(|e| Error::from_redis(name, e))?;
    match reply {
        Value::Int(n) => Ok(n == 1),
        other => Err(Error::unexpected("force unlock", other)),
    }
}

/// Restarts the lease of every `(lock, owner)` hold still present; one flag per hold,
/// `false` for a hold that is gone.
pub(crate) async fn lock_renew(
    conn: &mut ConnectionManager,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    let mut invocation = LOCK_RENEW.prepare_invoke();
    invocation.arg(lease_ms);
    for (name, owner) in holds {
        invocation.key(*name).arg(*owner);
    }
    let reply: Value = invocation.invoke_async(conn).await?;
    let flags = match reply {
        Value::Array(items) if items.len() == holds.len() => items,
        other => return Err(Error::unexpected("renew", other)),
    };
    flags
        .into_iter()
        .map(|flag| match flag {
            Value::Int(n) => Ok(n == 1),
            other => Err(Error::unexpected("renew", other)),
        })
        .collect()
}
