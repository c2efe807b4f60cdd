//! The read-write lock's scripts.

use super::lock::{ordered_busy, with_order, with_release_order};
use super::*;

// The read-write lock's scripts share the hold-key layout of `rw_common.lua`.
lua_script!(RW_READ_ACQUIRE, "rw_common.lua" + "rw_read_acquire.lua");
lua_script!(RW_READ_RELEASE, "rw_common.lua" + "rw_read_release.lua");
lua_script!(RW_READ_RENEW, "rw_common.lua" + "rw_read_renew.lua");
lua_script!(
    RW_WRITE_ACQUIRE,
    "rw_common.lua" + "order_common.lua" + "rw_write_acquire.lua"
);
lua_script!(
    RW_WRITE_RELEASE,
    "rw_common.lua" + "order_common.lua" + "rw_write_release.lua"
);
lua_script!(RW_FORCE_RELEASE, "rw_common.lua" + "rw_force_release.lua");

/// [`lock_renew`] for readers of read-write locks: extends each owner's own read
/// holds (never another reader's) and keeps the hash alive as long.
pub(crate) async fn read_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    renew_with(&RW_READ_RENEW, conn, holds, lease_ms).await
}

/// Read acquire: `Ok(None)` when `owner` now holds one more read hold.
pub(crate) async fn read_acquire(
    conn: &mut Conn,
    name: &str,
    lease_ms: u64,
    owner: &str,
) -> Result<Option<BusyTtl>> {
    let reply = call(
        conn,
        name,
        RW_READ_ACQUIRE.key(name).arg(lease_ms).arg(owner),
    )
    .await?;
    decode_acquire("read lock acquire", reply)
}

/// Releases one read hold of `owner`; a release that frees the lock wakes one waiter.
pub(crate) async fn read_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    owner: &str,
) -> Result<Released> {
    let mut invocation = RW_READ_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(owner)
        .arg(conn.publish_command());
    decode_release("read lock release", call(conn, name, &invocation).await?)
}

/// What a write acquire answers when the owner holds a read and asked to be
/// refused rather than wait on itself.
pub(crate) const HOLDS_READ: BusyTtl = -3;

/// Write acquire: `Ok(None)` when `owner` now holds one more write hold; with
/// `refuse_upgrade`, `Ok(Some(busy))` with a TTL of [`HOLDS_READ`] when the
/// owner holds a read. With `order`, as the reentrant lock's (see
/// [`lock_acquire`]).
pub(crate) async fn write_acquire(
    conn: &mut Conn,
    name: &str,
    lease_ms: u64,
    owner: &str,
    refuse_upgrade: bool,
    order: Option<InOrder>,
) -> Result<Option<Busy>> {
    let mut invocation = RW_WRITE_ACQUIRE.key(name);
    invocation
        .arg(lease_ms)
        .arg(owner)
        .arg(if refuse_upgrade { "1" } else { "0" });
    with_order(&mut invocation, name, order);
    let reply = call(conn, name, &invocation).await?;
    if let Some(busy) = ordered_busy("write lock acquire", &reply) {
        return busy.map(Some);
    }
    Ok(decode_acquire("write lock acquire", reply)?.map(Busy::from))
}

/// Releases one write hold of `owner`; freeing the lock or completing a downgrade
/// wakes every waiter. With `order`, a release that frees the lock names the
/// first client in it for a turn.
pub(crate) async fn write_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    lease_ms: u64,
    owner: &str,
    order: Option<Order<'_>>,
) -> Result<Released> {
    let mut invocation = RW_WRITE_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(READ_UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(conn.publish_command())
        .arg(UNLOCK_MESSAGE);
    with_release_order(&mut invocation, name, order);
    decode_release("write lock release", call(conn, name, &invocation).await?)
}

/// Deletes the read-write lock when it is in `mode` ("read" or "write"), with
/// every read hold's key, and wakes every waiter.
pub(crate) async fn rw_force_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    mode: &str,
) -> Result<bool> {
    let mut invocation = RW_FORCE_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(mode)
        .arg(READ_UNLOCK_MESSAGE)
        .arg(conn.publish_command())
        .arg(UNLOCK_MESSAGE);
    decode_flag(
        "read-write force unlock",
        call(conn, name, &invocation).await?,
    )
}
