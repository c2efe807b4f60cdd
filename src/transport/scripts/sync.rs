//! The synchronizers' scripts: the semaphores and the count-down latch.

use super::*;

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
// The fair semaphore's scripts share its line and lease rules (`fsem_common.lua`).
lua_script!(FSEM_ACQUIRE, "fsem_common.lua" + "fsem_acquire.lua");
lua_script!(FSEM_RELEASE, "fsem_common.lua" + "fsem_release.lua");
lua_script!(FSEM_LEAVE, "fsem_common.lua" + "fsem_leave.lua");
lua_script!(FSEM_RENEW, "fsem_common.lua" + "fsem_renew.lua");
lua_script!(FSEM_PERMITS, "fsem_common.lua" + "fsem_permits.lua");
lua_script!(LATCH_TRY_SET, "latch_try_set.lua");
lua_script!(LATCH_COUNT_DOWN, "latch_count_down.lua");
lua_script!(LATCH_DELETE, "latch_delete.lua");

/// The latch message: open (the count reached zero, or the latch was deleted).
const LATCH_ZERO_MESSAGE: &str = "0";
/// The latch message: a new count was set.
const LATCH_NEW_COUNT_MESSAGE: &str = "1";

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

/// The marks one semaphore call sends: its own (an acquire's mark, a
/// release's receipt), and those of earlier calls whose replies came, to
/// delete (see `semaphore_acquire.lua`, `semaphore_release.lua`).
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

/// Gives `permits` back to semaphore `name` under `receipts.this`, once
/// however often it is sent; the number now available.
pub(crate) async fn semaphore_release(
    conn: &mut Conn,
    name: &str,
    channel: &str,
    receipts: &AcquireMarks,
    permits: u32,
) -> Result<i64> {
    let mut invocation = SEMAPHORE_RELEASE.key(name);
    invocation.key(channel).key(&receipts.this);
    for forgotten in &receipts.forget {
        invocation.key(forgotten);
    }
    invocation
        .arg(permits)
        .arg(conn.publish_command())
        .arg(receipts.ttl_ms);
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

/// The keys of one fair semaphore (see `lua/fsem_common.lua`).
#[derive(Debug, Clone)]
pub(crate) struct FairSemaphoreKeys {
    pub(crate) semaphore: std::sync::Arc<str>,
    pub(crate) leases: String,
    pub(crate) queue: String,
    pub(crate) timeouts: String,
    /// The waiters of client `c` listen on `<channel_prefix>:c`.
    pub(crate) channel_prefix: String,
}

impl FairSemaphoreKeys {
    pub(crate) fn new(semaphore: std::sync::Arc<str>) -> Self {
        use crate::transport::keys;
        FairSemaphoreKeys {
            leases: keys::fair_semaphore_leases(&semaphore),
            queue: keys::fair_semaphore_queue(&semaphore),
            timeouts: keys::fair_semaphore_timeouts(&semaphore),
            channel_prefix: keys::fair_semaphore_channel(&semaphore),
            semaphore,
        }
    }

    /// The channel the waiters of client `client` listen on (a message
    /// names the waiter it calls).
    pub(crate) fn client_channel(&self, client: &str) -> String {
        format!("{}:{client}", self.channel_prefix)
    }

    /// A call of `script` with the semaphore, leases, line and deadlines as KEYS.
    fn invocation<'a>(&self, script: &'a LuaScript) -> ScriptCall<'a> {
        let mut invocation = script.key(&*self.semaphore);
        invocation
            .key(&self.leases)
            .key(&self.queue)
            .key(&self.timeouts);
        invocation
    }

    async fn call(&self, conn: &mut Conn, invocation: &ScriptCall<'_>) -> Result<Value> {
        call_naming(conn, &self.semaphore, Some(&self.queue), invocation).await
    }
}

/// How a fair semaphore's acquire takes its turn (see `lua/fsem_acquire.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// In arrival order: take when first in line (or nobody waits), else
    /// join the line, or keep the place there.
    InLine,
    /// Take if available now, whoever waits (a try with no wait, as Java's
    /// `tryAcquire()` does on a fair semaphore); never join.
    Barge,
    /// Take nothing, call nobody: keep the client's places (move its
    /// deadline ahead), and say whether the waiter still has its place.
    Keep,
}

/// One attempt of a fair semaphore's acquire: `permits` for waiter `waiter`
/// (`<client>:<uuid>`, also the id of the hold it takes), leased for
/// `lease_ms` from the server's now; its client's places in line are kept
/// for `window_ms` of silence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairAsk<'a> {
    pub(crate) waiter: &'a str,
    pub(crate) permits: u32,
    pub(crate) lease_ms: u64,
    pub(crate) turn: Turn,
    pub(crate) window_ms: u64,
}

/// What a fair semaphore's attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FairTaken {
    /// Taken (or granted to the waiter already by its client's release).
    Taken,
    /// Nothing taken: permits come back without a release in `hint` (a
    /// lease ends), if any lease is out; `epoch`: the epoch of the client's
    /// places in line (none for a barge).
    Busy {
        hint: Option<std::time::Duration>,
        epoch: Option<String>,
    },
}

/// Takes permits of a fair semaphore in turn (see [`FairAsk`]).
pub(crate) async fn fsem_acquire(
    conn: &mut Conn,
    keys: &FairSemaphoreKeys,
    ask: FairAsk<'_>,
) -> Result<FairTaken> {
    let mut invocation = keys.invocation(&FSEM_ACQUIRE);
    invocation
        .arg(ask.lease_ms)
        .arg(ask.waiter)
        .arg(ask.permits)
        .arg(match ask.turn {
            Turn::InLine => "line",
            Turn::Barge => "barge",
            Turn::Keep => "keep",
        })
        .arg(ask.window_ms)
        .arg(conn.publish_command())
        .arg(&keys.channel_prefix);
    let reply = keys.call(conn, &invocation).await?;
    let odd = || Error::unexpected("fair semaphore acquire", format!("{reply:?}"));
    let Value::Array(items) = &reply else {
        return Err(odd());
    };
    let int = |i: usize| match items.get(i) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    match int(0) {
        Some(1) => Ok(FairTaken::Taken),
        Some(0) => {
            let hint = int(1)
                .ok_or_else(odd)?
                .try_into()
                .ok()
                .filter(|ms: &u64| *ms > 0)
                .map(std::time::Duration::from_millis);
            let epoch = match items.get(2) {
                Some(Value::BulkString(bytes)) => {
                    Some(String::from_utf8(bytes.clone()).map_err(|_| odd())?)
                }
                _ => None,
            };
            Ok(FairTaken::Busy { hint, epoch })
        }
        _ => Err(odd()),
    }
}

/// What a fair semaphore's release did: whether the hold was out, and the
/// waiters of the releasing client it granted permits to, in line order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FairReleased {
    pub(crate) released: bool,
    pub(crate) granted: Vec<String>,
}

/// Gives back the permits held under `hold`; with `grant_to` (a client id
/// and a lease), grants what that frees to that client's waiters while they
/// are first in line.
pub(crate) async fn fsem_release(
    conn: &mut Conn,
    keys: &FairSemaphoreKeys,
    hold: &str,
    grant_to: Option<(&str, u64)>,
) -> Result<FairReleased> {
    let (client, lease_ms) = grant_to.unwrap_or(("", 0));
    let mut invocation = keys.invocation(&FSEM_RELEASE);
    invocation
        .arg(hold)
        .arg(conn.publish_command())
        .arg(&keys.channel_prefix)
        .arg(client)
        .arg(lease_ms);
    let reply = keys.call(conn, &invocation).await?;
    let odd = || Error::unexpected("fair semaphore release", format!("{reply:?}"));
    let Value::Array(items) = &reply else {
        return Err(odd());
    };
    let mut items = items.iter();
    let released = match items.next() {
        Some(Value::Int(flag)) => *flag == 1,
        _ => return Err(odd()),
    };
    let granted = items
        .map(|item| match item {
            Value::BulkString(bytes) => String::from_utf8(bytes.clone()).map_err(|_| odd()),
            _ => Err(odd()),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(FairReleased { released, granted })
}

/// Waiter `waiter` leaves the line; `true` when it had a place.
pub(crate) async fn fsem_leave(
    conn: &mut Conn,
    keys: &FairSemaphoreKeys,
    waiter: &str,
) -> Result<bool> {
    let mut invocation = keys.invocation(&FSEM_LEAVE);
    invocation
        .arg(waiter)
        .arg(conn.publish_command())
        .arg(&keys.channel_prefix);
    decode_flag("fair semaphore leave", keys.call(conn, &invocation).await?)
}

/// What a fair semaphore's permits call does (see `lua/fsem_permits.lua`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum PermitsChange {
    Available,
    TrySet(u32),
    Add(i32),
    Drain,
}

/// Reads or changes a fair semaphore's permits; the script's number.
pub(crate) async fn fsem_permits(
    conn: &mut Conn,
    keys: &FairSemaphoreKeys,
    change: PermitsChange,
) -> Result<i64> {
    let (what, number) = match change {
        PermitsChange::Available => ("available", 0),
        PermitsChange::TrySet(n) => ("try_set", i64::from(n)),
        PermitsChange::Add(n) => ("add", i64::from(n)),
        PermitsChange::Drain => ("drain", 0),
    };
    let mut invocation = keys.invocation(&FSEM_PERMITS);
    invocation
        .arg(what)
        .arg(number)
        .arg(conn.publish_command())
        .arg(&keys.channel_prefix);
    decode_int(
        "fair semaphore permits",
        keys.call(conn, &invocation).await?,
    )
}

/// Watchdog: moves the lease end of every `(semaphore, hold id)` still out
/// to `lease_ms` from the server's now (never earlier); one flag per hold,
/// `false` for one that is gone.
pub(crate) async fn fsem_renew(
    conn: &mut Conn,
    holds: &[(&str, &str)],
    lease_ms: u64,
) -> Result<Vec<bool>> {
    let mut invocation = FSEM_RENEW.call();
    invocation.arg(lease_ms);
    for (name, hold) in holds {
        invocation
            .key(*name)
            .key(crate::transport::keys::fair_semaphore_leases(name))
            .arg(*hold);
    }
    let reply: Value = invocation.invoke(conn).await.map_err(Error::redis)?;
    match reply {
        Value::Array(flags) if flags.len() == holds.len() => flags
            .into_iter()
            .map(|flag| decode_flag("fair semaphore renew", flag))
            .collect(),
        other => Err(Error::unexpected("fair semaphore renew", other)),
    }
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
