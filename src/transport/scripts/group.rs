//! The single-hash multi-lock's scripts.

use super::*;

// The single-hash multi-lock's scripts share the field layout of `group_common.lua`.
lua_script!(GROUP_ACQUIRE, "group_common.lua" + "group_acquire.lua");
lua_script!(GROUP_RELEASE, "group_common.lua" + "group_release.lua");
lua_script!(GROUP_RENEW, "group_common.lua" + "group_renew.lua");
lua_script!(
    GROUP_FORCE_RELEASE,
    "group_common.lua" + "group_force_release.lua"
);
lua_script!(GROUP_IS_LOCKED, "group_common.lua" + "group_is_locked.lua");

/// [`lock_renew`] for single-hash multi-lock holds, each packed by
/// [`group_hold`]: extends the owner's hold of every member.
pub(crate) async fn group_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    renew_with(&GROUP_RENEW, conn, holds, lease_ms).await
}

/// One single-hash multi-lock hold, as the renewal script reads it:
/// `id1,id2,...|owner`.
pub(crate) fn group_hold(ids: &[String], owner: &str) -> String {
    format!("{}|{owner}", ids.join(","))
}

/// Single-hash multi-lock acquire: `Ok(None)` when `owner` now holds every member
/// `ids` of `group`, `Ok(Some(ms))` until the other holders' holds end.
pub(crate) async fn group_acquire(
    conn: &mut Conn,
    group: &str,
    ids: &[String],
    lease_ms: u64,
    owner: &str,
) -> Result<Option<BusyTtl>> {
    let mut invocation = GROUP_ACQUIRE.key(group);
    invocation.arg(lease_ms).arg(owner);
    // One ARGV per member id.
    invocation.arg(ids);
    decode_acquire("group lock acquire", call(conn, group, &invocation).await?)
}

/// Single-hash multi-lock release of one hold of every member.
pub(crate) async fn group_release(
    conn: &mut Conn,
    group: &str,
    channel: &str,
    ids: &[String],
    lease_ms: u64,
    owner: &str,
) -> Result<Released> {
    let mut invocation = GROUP_RELEASE.key(group);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(conn.publish_command());
    // One ARGV per member id.
    invocation.arg(ids);
    decode_release("group lock release", call(conn, group, &invocation).await?)
}

/// Releases members `ids` of `group` whoever holds them; `true` when one was held.
pub(crate) async fn group_force_release(
    conn: &mut Conn,
    group: &str,
    channel: &str,
    ids: &[String],
) -> Result<bool> {
    let mut invocation = GROUP_FORCE_RELEASE.key(group);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(conn.publish_command());
    // One ARGV per member id.
    invocation.arg(ids);
    decode_flag("group force unlock", call(conn, group, &invocation).await?)
}

/// Is any member `ids` of `group` held, by anyone?
pub(crate) async fn group_is_locked(conn: &mut Conn, group: &str, ids: &[String]) -> Result<bool> {
    let mut invocation = GROUP_IS_LOCKED.key(group);
    // One ARGV per member id.
    invocation.arg(ids);
    decode_flag("group is locked", call(conn, group, &invocation).await?)
}
