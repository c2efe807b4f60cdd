//! The `lua/` files as [`LuaScript`] values, one typed function per script.
//!
//! Each is sent with EVALSHA, and with its text when the server answers NOSCRIPT
//! (after a restart, a failover or SCRIPT FLUSH; see `lua.rs`).
//! Replies are decoded here, so an unexpected shape becomes
//! [`Error::UnexpectedReply`] in one place.

use std::sync::LazyLock;

use crate::transport::conn::Conn;
use redis::Value;

use crate::transport::lua::{LuaScript, ScriptCall};

use crate::error::{Error, Result};
use crate::transport::pubsub::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};

/// `lua_script!(NAME, "file.lua")`, or with shared helpers prepended, in order:
/// `lua_script!(NAME, "common.lua" + "file.lua")`.
macro_rules! lua_script {
    ($name:ident, $first:literal $(+ $file:literal)*) => {
        static $name: LazyLock<LuaScript> = LazyLock::new(|| {
            LuaScript::new(concat!(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $first)),
                $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),*
            ))
        });
    };
}

lua_script!(LOCK_ACQUIRE, "lock_acquire.lua");
lua_script!(LOCK_RELEASE, "lock_release.lua");
lua_script!(LOCK_FORCE_RELEASE, "lock_force_release.lua");
lua_script!(LOCK_RENEW, "lock_renew.lua");
lua_script!(FENCED_ACQUIRE, "fenced_acquire.lua");
lua_script!(LEADER_RECORD, "leader_record.lua");
lua_script!(FENCED_WRITE, "fenced_write.lua");

// The fair lock's scripts share the queue rules of `fair_common.lua`.
lua_script!(FAIR_ACQUIRE, "fair_common.lua" + "fair_acquire.lua");
lua_script!(FAIR_CANCEL, "fair_common.lua" + "fair_cancel.lua");
lua_script!(FAIR_RELEASE, "fair_common.lua" + "fair_release.lua");
lua_script!(
    FAIR_FORCE_RELEASE,
    "fair_common.lua" + "fair_force_release.lua"
);

// The read-write lock's scripts share the hold-key layout of `rw_common.lua`.
lua_script!(RW_READ_ACQUIRE, "rw_common.lua" + "rw_read_acquire.lua");
lua_script!(RW_READ_RELEASE, "rw_common.lua" + "rw_read_release.lua");
lua_script!(RW_READ_RENEW, "rw_common.lua" + "rw_read_renew.lua");
lua_script!(RW_WRITE_ACQUIRE, "rw_common.lua" + "rw_write_acquire.lua");
lua_script!(RW_WRITE_RELEASE, "rw_common.lua" + "rw_write_release.lua");
lua_script!(RW_FORCE_RELEASE, "rw_common.lua" + "rw_force_release.lua");

// The single-hash multi-lock's scripts share the field layout of `group_common.lua`.
lua_script!(GROUP_ACQUIRE, "group_common.lua" + "group_acquire.lua");
lua_script!(GROUP_RELEASE, "group_common.lua" + "group_release.lua");
lua_script!(GROUP_RENEW, "group_common.lua" + "group_renew.lua");
lua_script!(
    GROUP_FORCE_RELEASE,
    "group_common.lua" + "group_force_release.lua"
);
lua_script!(GROUP_IS_LOCKED, "group_common.lua" + "group_is_locked.lua");

// The inspector reads a read-write lock's hold keys as its scripts build them.
lua_script!(INSPECT, "rw_common.lua" + "inspect.lua");

/// Everything under lock-family name `name`, read in one script (see
/// `lua/inspect.lua` for the reply's shape; `inspect/read.rs` decodes it).
pub(crate) async fn inspect(conn: &mut Conn, name: &str, bound: usize) -> Result<Value> {
    let mut invocation = INSPECT.key(name);
    invocation
        .key(crate::transport::keys::fair_queue(name))
        .key(crate::transport::keys::fair_timeouts(name))
        .key(crate::transport::keys::fenced_token(name))
        .key(crate::transport::keys::permit_timeouts(name))
        .arg(bound);
    call(conn, name, &invocation).await
}

/// The keys of one fair lock.
#[derive(Debug, Clone)]
pub(crate) struct FairKeys {
    pub(crate) lock: std::sync::Arc<str>,
    pub(crate) queue: String,
    pub(crate) timeouts: String,
    /// Waiters' channels are this plus `:<owner>`.
    pub(crate) channel_prefix: String,
}

impl FairKeys {
    pub(crate) fn new(lock: std::sync::Arc<str>) -> Self {
        FairKeys {
            queue: crate::transport::keys::fair_queue(&lock),
            timeouts: crate::transport::keys::fair_timeouts(&lock),
            channel_prefix: crate::transport::keys::lock_channel(&lock),
            lock,
        }
    }

    /// A call of `script` with the lock, queue and deadline keys (and the channel
    /// prefix, when `with_channel`) as KEYS, in that order.
    fn invocation<'a>(&self, script: &'a LuaScript, with_channel: bool) -> ScriptCall<'a> {
        let mut invocation = script.key(&*self.lock);
        invocation.key(&self.queue).key(&self.timeouts);
        if with_channel {
            invocation.key(&self.channel_prefix);
        }
        invocation
    }
}

/// Milliseconds since the Unix epoch on this machine's clock: the fair lock's
/// deadlines are absolute times, as Redisson's are.
pub(crate) fn epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

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
    /// That was the last hold; the lock is free (and a waiter was woken, if any
    /// listened).
    Freed,
    /// As `Freed`, and the unlock message reached at least one subscriber (the
    /// reentrant lock's release says so): a waiter, here or elsewhere, is on
    /// its way (see `line.rs`).
    FreedAndWoke,
}

/// Sends one script call about lock `name`; a refusal (WRONGTYPE, NOPERM, ...)
/// becomes this crate's error.
async fn call(conn: &mut Conn, name: &str, invocation: &ScriptCall<'_>) -> Result<Value> {
    call_naming(conn, name, None, invocation).await
}

/// [`call`] for a script on two keys that can each be of the wrong type: its
/// WRONGTYPE refusal names `other` when the script's message does (the script
/// checks that key itself, before any write), and `name` otherwise.
async fn call_naming(
    conn: &mut Conn,
    name: &str,
    other: Option<&str>,
    invocation: &ScriptCall<'_>,
) -> Result<Value> {
    invocation.invoke(conn).await.map_err(|e| {
        let text = e.to_string();
        let named = other.filter(|other| text.contains("WRONGTYPE") && text.contains(*other));
        Error::from_redis(named.unwrap_or(name), e)
    })
}

/// nil: acquired; an integer: busy, with how long to sleep.
fn decode_acquire(operation: &'static str, reply: Value) -> Result<Option<BusyTtl>> {
    match reply {
        Value::Nil => Ok(None),
        Value::Int(ttl) => Ok(Some(ttl)),
        other => Err(Error::unexpected(operation, other)),
    }
}

/// nil: not held; 0: holds remain; 1: freed.
fn decode_release(operation: &'static str, reply: Value) -> Result<Released> {
    match reply {
        Value::Nil => Ok(Released::NotHeld),
        Value::Int(0) => Ok(Released::StillHeld),
        Value::Int(1) => Ok(Released::Freed),
        Value::Int(n) if n > 1 => Ok(Released::FreedAndWoke),
        other => Err(Error::unexpected(operation, other)),
    }
}

/// An integer flag: 1 is true.
fn decode_flag(operation: &'static str, reply: Value) -> Result<bool> {
    match reply {
        Value::Int(n) => Ok(n == 1),
        other => Err(Error::unexpected(operation, other)),
    }
}

/// Reentrant acquire: `Ok(None)` when `owner` now holds `name`, `Ok(Some(ttl))` when
/// another owner does.
pub(crate) async fn lock_acquire(
    conn: &mut Conn,
    name: &str,
    lease_ms: u64,
    owner: &str,
    reentry: Reentry,
) -> Result<Option<BusyTtl>> {
    let mut invocation = LOCK_ACQUIRE.key(name);
    invocation.arg(lease_ms).arg(owner).arg(reentry.flag());
    let reply = call(conn, name, &invocation).await?;
    refuse_reentry(name, owner, decode_acquire("lock acquire", reply)?)
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

/// Whether a release announces itself on the lock's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notify {
    /// Publish the unlock message (waiters sleep on it).
    Publish,
    /// No message: the spin lock, whose waiters poll, and which must work for a
    /// user whose ACL grants no channel.
    Silent,
}

impl Notify {
    fn command(self, conn: &Conn) -> &'static str {
        match self {
            Notify::Publish => conn.publish_command(),
            Notify::Silent => "",
        }
    }
}

/// Whether an owner that holds a lock may take it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reentry {
    /// The reentrant locks: one more hold.
    Allowed,
    /// The non-reentrant locks: refused with [`Error::AlreadyHeld`].
    Refused,
}

impl Reentry {
    fn flag(self) -> &'static str {
        match self {
            Reentry::Allowed => "1",
            Reentry::Refused => "0",
        }
    }
}

/// The acquire scripts' reply when the owner holds the lock and re-entry is
/// refused (nothing was changed).
const HELD_BY_OWNER: BusyTtl = -4;

/// Turns the refused re-entry reply into [`Error::AlreadyHeld`].
fn refuse_reentry(name: &str, owner: &str, reply: Option<BusyTtl>) -> Result<Option<BusyTtl>> {
    match reply {
        Some(HELD_BY_OWNER) => Err(Error::AlreadyHeld {
            name: name.to_owned(),
            owner: owner.to_owned(),
        }),
        other => Ok(other),
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
) -> Result<Released> {
    let mut invocation = LOCK_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(notify.command(conn));
    decode_release("lock release", call(conn, name, &invocation).await?)
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

/// [`lock_renew`] for readers of read-write locks: extends each owner's own read
/// holds (never another reader's) and keeps the hash alive as long.
pub(crate) async fn read_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    renew_with(&RW_READ_RENEW, conn, holds, lease_ms).await
}

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

async fn renew_with(
    script: &LuaScript,
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    let mut invocation = script.call();
    invocation.arg(lease_ms);
    for (name, owner) in holds {
        invocation.key(*name).arg(*owner);
    }
    let reply: Value = invocation.invoke(conn).await.map_err(Error::redis)?;
    match reply {
        Value::Array(flags) if flags.len() == holds.len() => flags
            .into_iter()
            .map(|flag| decode_flag("renew", flag))
            .collect(),
        other => Err(Error::unexpected("renew", other)),
    }
}

/// Fair acquire: `Ok(None)` when `owner` now holds the lock, `Ok(Some(ms))` how long
/// to sleep before trying again. With `queue`, joins (or keeps) a place in line.
pub(crate) async fn fair_acquire(
    conn: &mut Conn,
    keys: &FairKeys,
    owner: &str,
    attempt: FairAttempt,
) -> Result<Option<BusyTtl>> {
    let FairAttempt {
        lease_ms,
        wait_ms,
        cap_ms,
        queue,
        reentry,
    } = attempt;
    let mut invocation = keys.invocation(&FAIR_ACQUIRE, false);
    invocation
        .arg(lease_ms)
        .arg(owner)
        .arg(wait_ms)
        .arg(epoch_millis())
        .arg(if queue { "1" } else { "0" })
        .arg(reentry.flag())
        .arg(cap_ms);
    let reply = decode_acquire(
        "fair lock acquire",
        call(conn, &keys.lock, &invocation).await?,
    )?;
    refuse_reentry(&keys.lock, owner, reply)
}

/// One fair acquire attempt's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairAttempt {
    pub(crate) lease_ms: u64,
    /// How long this waiter keeps its place while silent.
    pub(crate) wait_ms: u64,
    /// The configured fair-lock wait: what a waiter made first gets.
    pub(crate) cap_ms: u64,
    /// Join (or keep) a place in line when the lock is busy.
    pub(crate) queue: bool,
    pub(crate) reentry: Reentry,
}

/// What the first in line gets when a fair lock is freed: its deadline becomes
/// the later of its own and now + `grace_ms`, but no later than now + `cap_ms`
/// (the configured fair-lock wait).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handoff {
    pub(crate) grace_ms: u64,
    pub(crate) cap_ms: u64,
}

/// Takes `owner` out of the fair lock's line; `true` when it was in it.
pub(crate) async fn fair_cancel(
    conn: &mut Conn,
    keys: &FairKeys,
    owner: &str,
    wait_ms: u64,
    handoff: Handoff,
) -> Result<bool> {
    let mut invocation = keys.invocation(&FAIR_CANCEL, true);
    invocation
        .arg(owner)
        .arg(wait_ms)
        .arg(UNLOCK_MESSAGE)
        .arg(conn.publish_command())
        .arg(epoch_millis())
        .arg(handoff.grace_ms)
        .arg(handoff.cap_ms);
    decode_flag(
        "fair lock cancel",
        call(conn, &keys.lock, &invocation).await?,
    )
}

/// Fair release of one hold by `owner`; when it frees the lock, the first in line
/// is woken and given time to take it (see [`Handoff`]).
pub(crate) async fn fair_release(
    conn: &mut Conn,
    keys: &FairKeys,
    lease_ms: u64,
    owner: &str,
    handoff: Handoff,
) -> Result<Released> {
    let mut invocation = keys.invocation(&FAIR_RELEASE, true);
    invocation
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(epoch_millis())
        .arg(conn.publish_command())
        .arg(handoff.grace_ms)
        .arg(handoff.cap_ms);
    decode_release(
        "fair lock release",
        call(conn, &keys.lock, &invocation).await?,
    )
}

/// Deletes the fair lock whoever holds it; the first in line is woken and given
/// time to take it (see [`Handoff`]).
pub(crate) async fn fair_force_release(
    conn: &mut Conn,
    keys: &FairKeys,
    handoff: Handoff,
) -> Result<bool> {
    let mut invocation = keys.invocation(&FAIR_FORCE_RELEASE, true);
    invocation
        .arg(UNLOCK_MESSAGE)
        .arg(epoch_millis())
        .arg(conn.publish_command())
        .arg(handoff.grace_ms)
        .arg(handoff.cap_ms);
    decode_flag(
        "fair force unlock",
        call(conn, &keys.lock, &invocation).await?,
    )
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
/// `refuse_upgrade`, `Ok(Some(HOLDS_READ))` when the owner holds a read.
pub(crate) async fn write_acquire(
    conn: &mut Conn,
    name: &str,
    lease_ms: u64,
    owner: &str,
    refuse_upgrade: bool,
) -> Result<Option<BusyTtl>> {
    let mut invocation = RW_WRITE_ACQUIRE.key(name);
    invocation
        .arg(lease_ms)
        .arg(owner)
        .arg(if refuse_upgrade { "1" } else { "0" });
    decode_acquire("write lock acquire", call(conn, name, &invocation).await?)
}

/// Releases one write hold of `owner`; freeing the lock or completing a downgrade
/// wakes every waiter.
pub(crate) async fn write_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    lease_ms: u64,
    owner: &str,
) -> Result<Released> {
    let mut invocation = RW_WRITE_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(READ_UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(conn.publish_command())
        .arg(UNLOCK_MESSAGE);
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

// ---- Synchronizers: semaphores and the count-down latch (`sync/`) ----------
//
// Their messages: a semaphore's is the number of permits available (decimal); a
// latch's is `0` (open: the count reached zero, or the latch was deleted) or `1`
// (a new count was set).

lua_script!(
    SEMAPHORE_ACQUIRE,
    "semaphore_count.lua" + "semaphore_acquire.lua"
);
lua_script!(SEMAPHORE_RELEASE, "semaphore_release.lua");
lua_script!(SEMAPHORE_SETTLE, "semaphore_settle.lua");
lua_script!(SEMAPHORE_TRY_SET, "semaphore_try_set.lua");
lua_script!(SEMAPHORE_ADD, "semaphore_add.lua");
lua_script!(
    SEMAPHORE_DRAIN,
    "semaphore_count.lua" + "semaphore_drain.lua"
);
// The permit-expirable semaphore's scripts share the expiry rule of `pes_common.lua`.
lua_script!(
    PES_ACQUIRE,
    "semaphore_count.lua" + "pes_common.lua" + "pes_acquire.lua"
);
lua_script!(
    PES_RELEASE,
    "semaphore_count.lua" + "pes_common.lua" + "pes_release.lua"
);
lua_script!(
    PES_UPDATE_LEASE,
    "semaphore_count.lua" + "pes_common.lua" + "pes_update_lease.lua"
);
lua_script!(
    PES_RENEW,
    "semaphore_count.lua" + "pes_common.lua" + "pes_renew.lua"
);
lua_script!(
    PES_AVAILABLE,
    "semaphore_count.lua" + "pes_common.lua" + "pes_available.lua"
);
lua_script!(LATCH_TRY_SET, "latch_try_set.lua");
lua_script!(LATCH_COUNT_DOWN, "latch_count_down.lua");
lua_script!(LATCH_DELETE, "latch_delete.lua");

/// The text of every script this crate sends, for pinning them in the
/// server's cache (`script_cache.rs`). A test checks that none is missing.
pub(crate) fn catalogue() -> Vec<&'static str> {
    scripts().into_iter().map(LuaScript::code).collect()
}

/// Every script this crate sends.
fn scripts() -> Vec<&'static LuaScript> {
    vec![
        &*LOCK_ACQUIRE,
        &*LOCK_RELEASE,
        &*LOCK_FORCE_RELEASE,
        &*LOCK_RENEW,
        &*FENCED_ACQUIRE,
        &*LEADER_RECORD,
        &*FENCED_WRITE,
        &*FAIR_ACQUIRE,
        &*FAIR_CANCEL,
        &*FAIR_RELEASE,
        &*FAIR_FORCE_RELEASE,
        &*RW_READ_ACQUIRE,
        &*RW_READ_RELEASE,
        &*RW_READ_RENEW,
        &*RW_WRITE_ACQUIRE,
        &*RW_WRITE_RELEASE,
        &*RW_FORCE_RELEASE,
        &*GROUP_ACQUIRE,
        &*GROUP_RELEASE,
        &*GROUP_RENEW,
        &*GROUP_FORCE_RELEASE,
        &*GROUP_IS_LOCKED,
        &*INSPECT,
        &*SEMAPHORE_ACQUIRE,
        &*SEMAPHORE_RELEASE,
        &*SEMAPHORE_SETTLE,
        &*SEMAPHORE_TRY_SET,
        &*SEMAPHORE_ADD,
        &*SEMAPHORE_DRAIN,
        &*PES_ACQUIRE,
        &*PES_RELEASE,
        &*PES_UPDATE_LEASE,
        &*PES_RENEW,
        &*PES_AVAILABLE,
        &*LATCH_TRY_SET,
        &*LATCH_COUNT_DOWN,
        &*LATCH_DELETE,
    ]
}

/// The latch message: open (the count reached zero, or the latch was deleted).
const LATCH_ZERO_MESSAGE: &str = "0";
/// The latch message: a new count was set.
const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// An integer reply.
fn decode_int(operation: &'static str, reply: Value) -> Result<i64> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(Error::unexpected(operation, other)),
    }
}

/// Takes `permits` of semaphore `name` if available; `true` when taken.
pub(crate) async fn semaphore_acquire(
    conn: &mut Conn,
    name: &str,
    marks: &AcquireMarks,
    permits: u32,
) -> Result<bool> {
    let mut invocation = SEMAPHORE_ACQUIRE.key(name);
    invocation.key(&marks.this);
    for forgotten in &marks.forget {
        invocation.key(forgotten);
    }
    invocation.arg(permits).arg(marks.ttl_ms);
    decode_flag("semaphore acquire", call(conn, name, &invocation).await?)
}

/// The marks one semaphore attempt sends: its own, and those of earlier
/// attempts whose replies came, to delete (see `semaphore_acquire.lua`).
#[derive(Debug)]
pub(crate) struct AcquireMarks {
    pub(crate) this: String,
    pub(crate) forget: Vec<String>,
    pub(crate) ttl_ms: u64,
}

/// Gives back what the attempt that left `mark` took, if it took anything and
/// was not settled already; the number of permits given back.
pub(crate) async fn semaphore_settle(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    mark: &str,
) -> Result<i64> {
    let mut invocation = SEMAPHORE_SETTLE.key(name);
    invocation
        .key(channel)
        .key(mark)
        .arg(conn.publish_command());
    decode_int("semaphore settle", call(conn, name, &invocation).await?)
}

/// Gives `permits` back to semaphore `name`; the number now available.
pub(crate) async fn semaphore_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    permits: u32,
) -> Result<i64> {
    let mut invocation = SEMAPHORE_RELEASE.key(name);
    invocation
        .key(channel)
        .arg(permits)
        .arg(conn.publish_command());
    decode_int("semaphore release", call(conn, name, &invocation).await?)
}

/// Sets the permits of a semaphore of either kind unless it exists; `true` when set.
pub(crate) async fn semaphore_try_set(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    permits: u32,
) -> Result<bool> {
    let mut invocation = SEMAPHORE_TRY_SET.key(name);
    invocation
        .key(channel)
        .arg(permits)
        .arg(conn.publish_command());
    decode_flag("semaphore try-set", call(conn, name, &invocation).await?)
}

/// Adds `change` permits (negative: removes) to a semaphore of either kind; the
/// number now available.
pub(crate) async fn semaphore_add(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    change: i32,
) -> Result<i64> {
    let mut invocation = SEMAPHORE_ADD.key(name);
    invocation
        .key(channel)
        .arg(change)
        .arg(conn.publish_command());
    decode_int("semaphore add", call(conn, name, &invocation).await?)
}

/// Takes every available permit of semaphore `name`; how many there were.
pub(crate) async fn semaphore_drain(conn: &mut Conn, name: &str) -> Result<i64> {
    let reply = call(conn, name, &SEMAPHORE_DRAIN.key(name)).await?;
    decode_int("semaphore drain", reply)
}

/// The keys of one permit-expirable semaphore.
#[derive(Debug, Clone)]
pub(crate) struct PermitKeys {
    pub(crate) semaphore: std::sync::Arc<str>,
    pub(crate) timeouts: String,
    pub(crate) channel: String,
}

impl PermitKeys {
    pub(crate) fn new(semaphore: std::sync::Arc<str>) -> Self {
        PermitKeys {
            timeouts: crate::transport::keys::permit_timeouts(&semaphore),
            channel: crate::transport::keys::semaphore_channel(&semaphore),
            semaphore,
        }
    }

    /// A call of `script` with the semaphore, leases and channel as KEYS.
    fn invocation<'a>(&self, script: &'a LuaScript) -> ScriptCall<'a> {
        let mut invocation = script.key(&*self.semaphore);
        invocation.key(&self.timeouts).key(&self.channel);
        invocation
    }
}

/// What a permit-expirable acquire came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitsTaken {
    /// The permits are out under the ids sent.
    Taken,
    /// Too few available; a lease ends in this long (a permit comes back then).
    Busy(Option<std::time::Duration>),
}

/// Takes one permit per id in `ids`, each leased until `expiry_ms` (epoch ms).
pub(crate) async fn pes_acquire(
    conn: &mut Conn,
    keys: &PermitKeys,
    ids: &[[u8; 16]],
    expiry_ms: u64,
) -> Result<PermitsTaken> {
    let mut invocation = keys.invocation(&PES_ACQUIRE);
    invocation
        .arg(epoch_millis())
        .arg(expiry_ms)
        .arg(conn.publish_command());
    for id in ids {
        invocation.arg(&id[..]);
    }
    match decode_int(
        "permit-expirable acquire",
        call_naming(conn, &keys.semaphore, Some(&keys.timeouts), &invocation).await?,
    )? {
        0 => Ok(PermitsTaken::Taken),
        ms if ms > 0 => Ok(PermitsTaken::Busy(Some(std::time::Duration::from_millis(
            ms.unsigned_abs(),
        )))),
        _ => Ok(PermitsTaken::Busy(None)),
    }
}

/// Gives permit `id` back; `true` when it was out (and its lease not over).
pub(crate) async fn pes_release(conn: &mut Conn, keys: &PermitKeys, id: &[u8; 16]) -> Result<bool> {
    let mut invocation = keys.invocation(&PES_RELEASE);
    invocation
        .arg(&id[..])
        .arg(epoch_millis())
        .arg(conn.publish_command());
    decode_flag(
        "permit-expirable release",
        call_naming(conn, &keys.semaphore, Some(&keys.timeouts), &invocation).await?,
    )
}

/// Gives permit `id` a lease ending at `expiry_ms`; `true` when it was still out.
pub(crate) async fn pes_update_lease(
    conn: &mut Conn,
    keys: &PermitKeys,
    id: &[u8; 16],
    expiry_ms: u64,
) -> Result<bool> {
    let mut invocation = keys.invocation(&PES_UPDATE_LEASE);
    invocation
        .arg(&id[..])
        .arg(epoch_millis())
        .arg(expiry_ms)
        .arg(conn.publish_command());
    decode_flag(
        "permit-expirable lease update",
        call_naming(conn, &keys.semaphore, Some(&keys.timeouts), &invocation).await?,
    )
}

/// Watchdog: moves the lease end of every `(semaphore, permit id in hex)` still
/// out to `lease_ms` from now (never earlier); one flag per permit, `false` for
/// one that is gone. The permits may be of several semaphores (of one slot in a
/// cluster: the watchdog groups them so).
pub(crate) async fn pes_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    let now = epoch_millis();
    let mut invocation = PES_RENEW.call();
    invocation
        .arg(now)
        .arg(now.saturating_add(lease_ms))
        .arg(conn.publish_command());
    for (name, id) in holds {
        // The watchdog's field is the id as this crate prints it; it never
        // holds anything else.
        let id: [u8; 16] = crate::numeral::hex_bytes(id)
            .ok_or_else(|| Error::invalid(format!("{id:?} is not a permit id (32 hex digits)")))?;
        let keys = PermitKeys::new((*name).into());
        invocation
            .key(&*keys.semaphore)
            .key(&keys.timeouts)
            .key(&keys.channel)
            .arg(&id[..]);
    }
    let reply: Value = invocation.invoke(conn).await.map_err(Error::redis)?;
    match reply {
        Value::Array(flags) if flags.len() == holds.len() => flags
            .into_iter()
            .map(|flag| decode_flag("permit renew", flag))
            .collect(),
        other => Err(Error::unexpected("permit renew", other)),
    }
}

/// The permits available once expired leases are reclaimed.
pub(crate) async fn pes_available(conn: &mut Conn, keys: &PermitKeys) -> Result<i64> {
    let mut invocation = keys.invocation(&PES_AVAILABLE);
    invocation.arg(epoch_millis()).arg(conn.publish_command());
    decode_int(
        "permit-expirable available",
        call_naming(conn, &keys.semaphore, Some(&keys.timeouts), &invocation).await?,
    )
}

/// Sets the latch's count unless it is counting; `true` when set.
pub(crate) async fn latch_try_set(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    count: u64,
) -> Result<bool> {
    let mut invocation = LATCH_TRY_SET.key(name);
    invocation
        .key(channel)
        .arg(count)
        .arg(LATCH_NEW_COUNT_MESSAGE)
        .arg(conn.publish_command());
    decode_flag("latch try-set", call(conn, name, &invocation).await?)
}

/// Counts the latch down by one; the count still to go.
pub(crate) async fn latch_count_down(conn: &mut Conn, name: &str, channel: &str) -> Result<i64> {
    let mut invocation = LATCH_COUNT_DOWN.key(name);
    invocation
        .key(channel)
        .arg(LATCH_ZERO_MESSAGE)
        .arg(conn.publish_command());
    decode_int("latch count down", call(conn, name, &invocation).await?)
}

/// Deletes the latch; `true` when it was counting.
pub(crate) async fn latch_delete(conn: &mut Conn, name: &str, channel: &str) -> Result<bool> {
    let mut invocation = LATCH_DELETE.key(name);
    invocation
        .key(channel)
        .arg(LATCH_ZERO_MESSAGE)
        .arg(conn.publish_command());
    decode_flag("latch delete", call(conn, name, &invocation).await?)
}

#[cfg(test)]
mod tests {
    use super::{catalogue, scripts};

    /// The catalogue names every script defined here, each once: a script
    /// missing from it would never be pinned.
    #[test]
    fn the_catalogue_holds_every_script() {
        let source = include_str!("scripts.rs");
        let defined = source.matches("\nlua_script!(").count();
        assert_eq!(catalogue().len(), defined);
        let scripts = scripts();
        let mut shas: Vec<&str> = scripts.iter().map(|s| s.sha()).collect();
        shas.sort_unstable();
        shas.dedup();
        assert_eq!(shas.len(), defined, "no script twice");
    }
}
