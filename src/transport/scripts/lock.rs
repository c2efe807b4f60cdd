//! The reentrant lock's scripts, and the fenced lock's, store's and
//! election record's beside them.

use super::*;
use crate::transport::keys;

lua_script!(LOCK_ACQUIRE, "order_common.lua" + "lock_acquire.lua");
lua_script!(LOCK_RELEASE, "order_common.lua" + "lock_release.lua");
lua_script!(LOCK_FORCE_RELEASE, "lock_force_release.lua");
lua_script!(LOCK_RENEW, "lock_renew.lua");
lua_script!(LOCK_LEAVE_ORDER, "lock_leave_order.lua");
lua_script!(FENCED_ACQUIRE, "fenced_acquire.lua");
lua_script!(LEADER_RECORD, "leader_record.lua");
lua_script!(FENCED_WRITE, "fenced_write.lua");

/// Reentrant acquire: `Ok(None)` when `owner` now holds `name`, `Ok(Some(busy))`
/// when another owner does. With `order`, another client's turn is honoured,
/// and a waiter's client keeps its place in the lock's order of waiting
/// clients (its busy reply says how many wait ahead).
pub(crate) async fn lock_acquire(
    conn: &mut Conn,
    name: &str,
    lease_ms: u64,
    owner: &str,
    reentry: Reentry,
    order: Option<InOrder>,
) -> Result<Option<Busy>> {
    let mut invocation = LOCK_ACQUIRE.key(name);
    invocation.arg(lease_ms).arg(owner).arg(reentry.flag());
    with_order(&mut invocation, name, order);
    let reply = call(conn, name, &invocation).await?;
    if let Some(busy) = ordered_busy("lock acquire", &reply) {
        return busy.map(Some);
    }
    let reply = decode_acquire("lock acquire", reply)?;
    Ok(refuse_reentry(name, owner, reply)?.map(Busy::from))
}

/// Adds an attempt's part of `name`'s order of waiting clients to an acquire
/// that keeps one (see `order_common.lua`): the turn alone, or a waiter's
/// order, turn, how long the order lives and whether it joined.
pub(super) fn with_order(invocation: &mut ScriptCall<'_>, name: &str, order: Option<InOrder>) {
    match order {
        None => {}
        Some(InOrder::TurnOnly) => {
            invocation.key(keys::lock_turn(name));
        }
        Some(InOrder::Waiter { keep_ms, joined }) => {
            invocation
                .key(keys::lock_waiters(name))
                .key(keys::lock_turn(name))
                .arg(keep_ms)
                .arg(if joined { "1" } else { "0" });
        }
    }
}

/// A waiter's busy reply, `{bound, clients ahead}`; `None` for any other
/// reply (the caller decodes it).
pub(super) fn ordered_busy(operation: &'static str, reply: &Value) -> Option<Result<Busy>> {
    let Value::Array(items) = reply else {
        return None;
    };
    Some(match items.as_slice() {
        [Value::Int(ttl), Value::Int(ahead)] => Ok(Busy {
            ttl: *ttl,
            ahead: u32::try_from(*ahead).ok(),
        }),
        other => Err(Error::unexpected(operation, other)),
    })
}

/// Adds `order` to a release that frees the lock (see `order_common.lua`):
/// the first client in it is named for a turn.
pub(super) fn with_release_order(
    invocation: &mut ScriptCall<'_>,
    name: &str,
    order: Option<Order<'_>>,
) {
    if let Some(order) = order {
        invocation
            .key(keys::lock_waiters(name))
            .key(keys::lock_turn(name))
            .arg(order.turn_ms);
    }
}

/// Fenced acquire: `Ok(Ok(token))` when `owner` now holds `name` (with a new
/// fencing token drawn from `counter`), `Ok(Err(ttl))` when another owner holds it.
pub(crate) async fn fenced_acquire(
    conn: &mut Conn,
    name: &str,
    counter: &str,
    lease_ms: u64,
    owner: &str,
) -> Result<std::result::Result<u64, BusyTtl>> {
    let mut invocation = FENCED_ACQUIRE.key(name);
    invocation.key(counter).arg(lease_ms).arg(owner);
    match call_naming(conn, name, Some(counter), &invocation).await? {
        Value::Array(items) => match items.as_slice() {
            [Value::BulkString(token)] => std::str::from_utf8(token)
                .ok()
                .and_then(crate::numeral::decimal::<u64>)
                .filter(|token| *token > 0)
                .map(Ok)
                .ok_or_else(|| Error::unexpected("fenced lock acquire", items)),
            other => Err(Error::unexpected("fenced lock acquire", other)),
        },
        Value::Int(ttl) => Ok(Err(ttl)),
        other => Err(Error::unexpected("fenced lock acquire", other)),
    }
}

/// The keys of one election's record (see `leader/record.rs`).
#[derive(Debug)]
pub(crate) struct LeaderKeys<'a> {
    pub(crate) name: &'a str,
    pub(crate) counter: &'a str,
    pub(crate) record: &'a str,
    pub(crate) channel: &'a str,
}

/// Records `owner`'s win of epoch `epoch` and announces it: `Some(since_ms)`,
/// the server's clock when written; `None` when that win is already over (the
/// owner holds no more, or a later token was drawn) and nothing was written.
pub(crate) async fn leader_record(
    conn: &mut Conn,
    keys: &LeaderKeys<'_>,
    owner: &str,
    epoch: u64,
) -> Result<Option<u64>> {
    let mut invocation = LEADER_RECORD.key(keys.name);
    invocation
        .key(keys.counter)
        .key(keys.record)
        .key(keys.channel)
        .arg(owner)
        .arg(epoch)
        .arg(conn.publish_command());
    match call_naming(conn, keys.name, Some(keys.record), &invocation).await? {
        Value::Nil => Ok(None),
        Value::BulkString(ms) => std::str::from_utf8(&ms)
            .ok()
            .and_then(crate::numeral::decimal::<u64>)
            .map(Some)
            .ok_or_else(|| Error::unexpected("leader record", ms)),
        other => Err(Error::unexpected("leader record", other)),
    }
}

/// Reentrant release of one hold by `owner`, waking one waiter when it frees the lock.
pub(crate) async fn lock_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    lease_ms: u64,
    owner: &str,
    notify: Notify,
    order: Option<Order<'_>>,
) -> Result<Released> {
    let mut invocation = LOCK_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(notify.command(conn));
    with_release_order(&mut invocation, name, order);
    decode_release("lock release", call(conn, name, &invocation).await?)
}

/// Takes `order`'s client out of `name`'s order of waiting clients (its
/// waiter gave up), publishing on `channel` as a release does, so that the
/// waiters behind count it (see `lock_leave_order.lua`).
pub(crate) async fn lock_leave_order(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    order: Order<'_>,
) -> Result<()> {
    let mut invocation = LOCK_LEAVE_ORDER.key(keys::lock_waiters(name));
    invocation
        .key(channel)
        .arg(order.client)
        .arg(conn.publish_command())
        .arg(UNLOCK_MESSAGE);
    call(conn, name, &invocation).await.map(drop)
}

/// Deletes the lock whoever holds it; `true` when there was one (a waiter is woken).
pub(crate) async fn lock_force_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    notify: Notify,
) -> Result<bool> {
    let mut invocation = LOCK_FORCE_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(notify.command(conn));
    decode_flag("force unlock", call(conn, name, &invocation).await?)
}

/// Writes `value` to the fenced store `key` if `token` is newer than its
/// fence: whether it wrote, and the fence stored now.
pub(crate) async fn fenced_write(
    conn: &mut Conn,
    key: &str,
    token: u64,
    value: &[u8],
) -> Result<(bool, u64)> {
    let mut invocation = FENCED_WRITE.key(key);
    invocation.arg(token).arg(value);
    match call(conn, key, &invocation).await? {
        Value::Array(reply) => match reply.as_slice() {
            [Value::Int(written), fence] => {
                let fence = decode_token("fenced write", fence)?;
                Ok((*written == 1, fence))
            }
            _ => Err(Error::unexpected("fenced write", Value::Array(reply))),
        },
        other => Err(Error::unexpected("fenced write", other)),
    }
}

/// A token the server sent as a decimal string.
fn decode_token(operation: &'static str, reply: &Value) -> Result<u64> {
    let parsed = match reply {
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(crate::numeral::decimal),
        Value::SimpleString(text) => crate::numeral::decimal(text),
        _ => None,
    };
    parsed.ok_or_else(|| Error::unexpected(operation, reply.clone()))
}

/// Restarts the lease of every `(lock, owner)` hold still present; one flag per hold,
/// `false` for a hold that is gone.
pub(crate) async fn lock_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    renew_with(&LOCK_RENEW, conn, holds, lease_ms).await
}
