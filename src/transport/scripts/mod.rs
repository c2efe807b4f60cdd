//! The `lua/` files as [`LuaScript`] values, one typed function per script.
//!
//! Each is sent with EVALSHA, and with its text when the server answers NOSCRIPT
//! (after a restart, a failover or SCRIPT FLUSH; see `lua.rs`).
//! Replies are decoded here, so an unexpected shape becomes
//! [`Error::UnexpectedReply`] in one place.
//!
//! One file per family (`lock`, `fair`, `read_write`, `group`, `sync`, and the
//! inspector's one script); what they share (sending a call, decoding the
//! common replies, the release's options) is here, and `catalogue` lists every
//! script for pinning.

/// `lua_script!(NAME, "file.lua")`, or with shared helpers prepended, in order:
/// `lua_script!(NAME, "common.lua" + "file.lua")`: a `LuaScript` built once.
macro_rules! lua_script {
    ($name:ident, $first:literal $(+ $file:literal)*) => {
        pub(super) static $name: std::sync::LazyLock<$crate::transport::lua::LuaScript> =
            std::sync::LazyLock::new(|| {
                $crate::transport::lua::LuaScript::new(concat!(
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $first)),
                    $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),*
                ))
            });
    };
}

mod catalogue;
mod fair;
mod group;
mod inspect;
mod lock;
mod read_write;
mod sync;

pub(crate) use catalogue::catalogue;
pub(crate) use fair::*;
pub(crate) use group::*;
pub(crate) use inspect::*;
pub(crate) use lock::*;
pub(crate) use read_write::*;
pub(crate) use sync::*;

use redis::Value;

use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::lua::{LuaScript, ScriptCall};
use crate::transport::pubsub::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};

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

/// A busy acquire's reply: the bound on the next sleep, and, for a waiter in
/// its lock's order of clients (see `order_common.lua`), how many clients wait
/// ahead of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy {
    pub(crate) ttl: BusyTtl,
    pub(crate) ahead: Option<u32>,
}

impl From<BusyTtl> for Busy {
    fn from(ttl: BusyTtl) -> Self {
        Busy { ttl, ahead: None }
    }
}

/// What one attempt sends of its lock's order of waiting clients (see
/// `order_common.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InOrder {
    /// A first attempt or a single try: another client's turn is honoured,
    /// and nothing else is sent (the uncontended path).
    TurnOnly,
    /// A waiter's attempt (after a busy one): busy, its client keeps its
    /// place in the order; `joined`, an earlier attempt of its wait put it
    /// there, and taking the lock leaves the order.
    Waiter { keep_ms: u64, joined: bool },
}

/// A lock's order of waiting clients as one attempt or release sends
/// it (see `order_common.lua`): this crate's clients wait in it, and a release
/// names the first for a short turn, so that one release's message is answered
/// by one attempt rather than one per waiting client.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order<'a> {
    /// The owner's client id: the order's member.
    pub(crate) client: &'a str,
    /// How long the order lives untouched (a client that vanished leaves it
    /// then, or when a release names it and it never comes).
    pub(crate) keep_ms: u64,
    /// How long a release's turn keeps the free lock for the client it names.
    pub(crate) turn_ms: u64,
}

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
    /// its way (see `line.rs`). `listeners`: how many clients it reached (one
    /// subscription each).
    FreedAndWoke { listeners: u32 },
    /// That was the last hold, and the lock went straight to the waiter the
    /// release named (the fair lock's release-and-grant): nobody was woken.
    Granted,
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
        Value::Int(n) if n > 1 => Ok(Released::FreedAndWoke {
            listeners: u32::try_from(n - 1).unwrap_or(u32::MAX),
        }),
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
    /// A fair waiter that its own client's release may grant the lock to: a
    /// hold it finds is that grant, acquired, not one more.
    Granted,
}

impl Reentry {
    fn flag(self) -> &'static str {
        match self {
            Reentry::Allowed => "1",
            Reentry::Refused => "0",
            Reentry::Granted => "2",
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

/// An integer reply.
fn decode_int(operation: &'static str, reply: Value) -> Result<i64> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(Error::unexpected(operation, other)),
    }
}
