//! The fair lock's scripts: a queue and deadlines beside the hold.

use super::*;

// The fair lock's scripts share the queue rules of `fair_common.lua`.
lua_script!(FAIR_ACQUIRE, "fair_common.lua" + "fair_acquire.lua");
lua_script!(FAIR_CANCEL, "fair_common.lua" + "fair_cancel.lua");
lua_script!(FAIR_RELEASE, "fair_common.lua" + "fair_release.lua");
lua_script!(
    FAIR_FORCE_RELEASE,
    "fair_common.lua" + "fair_force_release.lua"
);

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
/// is woken and given time to take it (see [`Handoff`]; [`Released::FreedAndWoke`],
/// or [`Released::Freed`] when nobody is in line), unless it is `heir` (this
/// client's next waiter, and its lease): then the lock is granted to it
/// ([`Released::Granted`]) and nobody is woken.
pub(crate) async fn fair_release(
    conn: &mut Conn,
    keys: &FairKeys,
    lease_ms: u64,
    owner: &str,
    handoff: Handoff,
    heir: Option<(&str, u64)>,
) -> Result<Released> {
    let mut invocation = keys.invocation(&FAIR_RELEASE, true);
    let (heir, heir_lease_ms) = heir.unwrap_or(("", 0));
    invocation
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(epoch_millis())
        .arg(conn.publish_command())
        .arg(handoff.grace_ms)
        .arg(handoff.cap_ms)
        .arg(heir)
        .arg(heir_lease_ms);
    match call(conn, &keys.lock, &invocation).await? {
        Value::Int(2) => Ok(Released::Granted),
        // The first in line, another than `heir`, was woken.
        Value::Int(3) => Ok(Released::FreedAndWoke { listeners: 1 }),
        Value::Int(n) if n > 3 => Err(Error::unexpected("fair lock release", Value::Int(n))),
        reply => decode_release("fair lock release", reply),
    }
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
