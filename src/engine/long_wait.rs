//! A wait that lasts: once past [`Config::deadlock_threshold`], if its task
//! holds something (a task that holds nothing can be on no cycle), it writes
//! what it waits for (see `deadlock.rs`), looks for a cycle of waits through
//! it, and looks again while it waits (every threshold while on a cycle,
//! else less and less often); a cycle found is named once, counted, listed by
//! [`Client::deadlocks`], and under [`OnDeadlock::Refuse`] its youngest wait
//! gives up.
//!
//! Everything it writes goes when the wait ends, however it ends (held, out of
//! time, failed, refused, or its future dropped): the fields are deleted from
//! the client's thread, and the hash's TTL (one watchdog lease, refreshed
//! every third of it while the wait lasts) ends them if the process dies.
//!
//! [`Config::deadlock_threshold`]: crate::Config::deadlock_threshold
//! [`Client::deadlocks`]: crate::Client::deadlocks
//! [`OnDeadlock::Refuse`]: crate::OnDeadlock::Refuse

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::time::Instant;

use crate::config::OnDeadlock;
use crate::engine::cleanup::OnDrop;
use crate::engine::deadlock::{Deadlock, HeldBy, WaitRecord, Walked};
use crate::engine::owner::owner_field;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::keys;

/// Who waits, for what: known when the wait starts.
#[derive(Debug, Clone)]
pub(crate) struct LongWait {
    pub(crate) lock: Arc<str>,
    /// The kind's name, as metrics name it.
    pub(crate) kind: &'static str,
    /// The owner id the acquisition acts for.
    pub(crate) owner: u64,
    /// The task (or thread) that waits.
    pub(crate) context: u64,
}

/// Awaits the future `acquiring` makes, the wait of task `context` that
/// `wait` describes; if it lasts past the client's threshold, it is watched
/// for deadlocks from then on (its record made then). A wait
/// of a task that holds nothing costs an atomic read; one of a task that
/// holds something, an allocation and a timer (boxed: only such waits pay
/// for their room); neither sends anything before the threshold.
///
/// Given a maker, not the future: the future is made here, in its one place
/// in this future. An argument future would sit in two (the argument, then
/// the local it is pinned in: rustc does not overlap them), doubling every
/// waiting `lock()` future (2,840 -> 6,544 bytes, measured).
///
/// # Cancel safety
/// Cancel safe as the wait is; a record written is deleted when this future
/// is dropped.
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
pub(crate) fn watched<'a, F, T>(
    client: &'a Arc<Engine>,
    (context, wait): (u64, impl FnOnce() -> LongWait + 'a),
    acquiring: impl FnOnce() -> F + 'a,
) -> impl Future<Output = Result<T>> + 'a
where
    F: Future<Output = Result<T>> + 'a,
    T: 'a,
{
    async move {
        let acquiring = acquiring();
        tokio::pin!(acquiring);
        // A task that holds nothing can be on no cycle: no timer, nothing more.
        if matches!(client.config.deadlock, OnDeadlock::Ignore)
            || client.deadlocks.walker().is_none()
            || !client.holdings.may_hold_in(context)
        {
            return acquiring.await;
        }
        // Boxed, the threshold's timer and the wait's record with them: a
        // waiting future of a task that holds nothing (every parked waiter,
        // as a rule) has no room for them.
        Box::pin(past_threshold(client, wait(), acquiring)).await
    }
}

/// Awaits `acquiring`; once it has lasted the client's threshold, watches it.
async fn past_threshold<F, T>(
    client: &Arc<Engine>,
    wait: LongWait,
    mut acquiring: Pin<&mut F>,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let started = Instant::now();
    tokio::select! {
        biased;
        done = &mut acquiring => return done,
        () = tokio::time::sleep(client.config.deadlock_threshold) => {}
    }
    watch(client, wait, started, acquiring).await
}

/// Each watched wait's number, for the client's list of cycles.
static SERIALS: AtomicU64 = AtomicU64::new(0);

async fn watch<F, T>(
    client: &Arc<Engine>,
    wait: LongWait,
    started: Instant,
    mut acquiring: Pin<&mut F>,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let mut record = record_of(client, &wait, started);
    if record.holds.is_empty() {
        // A task that holds nothing keeps nobody waiting: no cycle can pass
        // through it, and no walk can arrive at it. Nothing to write or walk.
        return acquiring.await;
    }
    let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
    let fields = fields(&record);
    let _written = Written::new(client, fields.clone(), serial);
    let threshold = client.config.deadlock_threshold;
    // Written again every third of its TTL, whatever the walks do.
    let refresh_every = client.config.lock_watchdog_timeout / 3;
    let (mut refresh_at, mut walk_at) = (Instant::now(), Instant::now());
    let mut quiet_walks = 0u32;
    // The cycle the last walk found: a refusal needs the same cycle found by
    // two walks in a row (the reads of one walk are not of one instant).
    let mut last_cycle: Option<Vec<String>> = None;
    loop {
        if Instant::now() >= refresh_at {
            let writing = write(client, &mut record, &fields);
            let written = tokio::select! {
                biased;
                done = &mut acquiring => return done,
                written = writing => written,
            };
            refresh_at = Instant::now()
                + match written {
                    Ok(()) => refresh_every,
                    Err(e) => {
                        crate::trace::debug_event!(
                            "lock {:?}: writing a long wait's record failed (tried again): {e}",
                            wait.lock
                        );
                        threshold.min(refresh_every)
                    }
                };
        }
        if Instant::now() >= walk_at {
            let walking = walk(client, &record);
            let walked = tokio::select! {
                biased;
                done = &mut acquiring => return done,
                walked = walking => walked,
            };
            match on_walked(client, &wait, serial, walked) {
                Some(cycle) => {
                    let key = cycle.key();
                    let confirmed = last_cycle.as_ref() == Some(&key);
                    if confirmed && refuses(client, &record, &cycle) {
                        return Err(Error::Deadlock {
                            name: wait.lock.to_string(),
                            cycle: cycle.to_string(),
                        });
                    }
                    last_cycle = Some(key);
                    quiet_walks = 0;
                }
                None => {
                    last_cycle = None;
                    quiet_walks += 1;
                }
            }
            walk_at = Instant::now() + next_walk(threshold, quiet_walks);
        }
        tokio::select! {
            biased;
            done = &mut acquiring => return done,
            () = tokio::time::sleep_until(refresh_at.min(walk_at)) => {}
        }
    }
}

/// Whether this wait (`record`) gives up to break `cycle`: under `Refuse`,
/// when it is the cycle's victim.
fn refuses(client: &Engine, record: &WaitRecord, cycle: &Deadlock) -> bool {
    matches!(client.config.deadlock, OnDeadlock::Refuse)
        && cycle
            .victim()
            .is_some_and(|victim| victim.waiter == record.waiter)
}

/// The most thresholds between two walks of a wait on no cycle.
const SLOWEST_WALK: u32 = 32;

/// How long until the next walk: a threshold while the wait is on a cycle
/// (to see it resolve), else doubling after each walk that found none, up to
/// [`SLOWEST_WALK`] thresholds. A cycle that forms later is found by the
/// wait that closes it (its own first walk), as PostgreSQL finds it; the
/// others see it at their next walk, and many long waits of tasks that hold
/// something cost little.
fn next_walk(threshold: std::time::Duration, quiet_walks: u32) -> std::time::Duration {
    let doublings = quiet_walks.saturating_sub(1).min(5);
    threshold * (1u32 << doublings).min(SLOWEST_WALK)
}

/// What the wait writes: its owner, lock, start, and its task's holds.
fn record_of(client: &Engine, wait: &LongWait, started: Instant) -> WaitRecord {
    let lasted = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let holds = client
        .holdings
        .held_in_context(wait.context)
        .into_iter()
        .map(|(lock, owner)| HeldBy {
            lock: lock.to_string(),
            owner: owner_field(&client.id, owner),
        })
        .collect();
    WaitRecord {
        waiter: owner_field(&client.id, wait.owner),
        lock: wait.lock.to_string(),
        kind: wait.kind.to_owned(),
        since_ms: crate::transport::scripts::epoch_millis().saturating_sub(lasted),
        holds,
        written_ms: 0,
        ttl_ms: u64::try_from(client.config.lock_watchdog_timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

/// The record's fields: one per owner of the task (see `deadlock.rs`).
fn fields(record: &WaitRecord) -> Vec<String> {
    let mut owners: Vec<String> = record.owners().map(str::to_owned).collect();
    owners.sort();
    owners.dedup();
    owners
}

/// Sets the record's `fields` and the hash's TTL (the record's, one
/// watchdog lease).
async fn write(client: &Engine, record: &mut WaitRecord, fields: &[String]) -> Result<()> {
    record.written_ms = crate::transport::scripts::epoch_millis();
    // A record always serialises (strings and numbers only).
    let value = serde_json::to_string(record).unwrap_or_default();
    let key = keys::waits_key(&client.id);
    let mut hset = redis::cmd("HSET");
    hset.arg(&key);
    for field in fields {
        hset.arg(field).arg(&value);
    }
    // One transaction: never fields without the TTL.
    redis::pipe()
        .atomic()
        .add_command(hset)
        .ignore()
        .cmd("PEXPIRE")
        .arg(&key)
        .arg(record.ttl_ms.max(1))
        .ignore()
        .query_async::<()>(&mut client.conn.clone())
        .await
        .map_err(Error::redis)
}

async fn walk(client: &Engine, record: &WaitRecord) -> Result<Walked> {
    match client.deadlocks.walker() {
        Some(walker) => walker.walk(&client.conn, &client.id, record).await,
        None => Ok(Walked::default()),
    }
}

/// Names a cycle found (once per cycle and wait, counted) and lists it, or
/// forgets one gone; the cycle this wait is on, if any.
fn on_walked(
    client: &Engine,
    wait: &LongWait,
    serial: u64,
    walked: Result<Walked>,
) -> Option<Deadlock> {
    let walked = match walked {
        Ok(walked) => walked,
        Err(e) => {
            crate::trace::debug_event!(
                "lock {:?}: looking for a deadlock failed (tried again): {e}",
                wait.lock
            );
            return None;
        }
    };
    if walked.cut {
        crate::trace::debug_event!(
            "lock {:?}: the deadlock walk stopped at its bound ({} steps, {} reads)",
            wait.lock,
            crate::engine::deadlock::MAX_STEPS,
            crate::engine::deadlock::MAX_READS
        );
    }
    let Some(cycle) = walked.cycle else {
        client.deadlocks.note(serial, None);
        return None;
    };
    if client.deadlocks.note(serial, Some(cycle.clone())) {
        crate::metrics::deadlock_found();
        let victim = cycle.victim().map(|step| step.waiter.as_str());
        let fate = match (client.config.deadlock, victim) {
            (OnDeadlock::Refuse, Some(victim)) => {
                format!("the wait of {victim} gives up to break it")
            }
            (OnDeadlock::Refuse, None) => {
                "no wait on it can be given up by this crate (two Java waits)".to_owned()
            }
            _ => {
                "`Config::deadlock = OnDeadlock::Refuse` makes one of its waits give up".to_owned()
            }
        };
        crate::trace::warn_event!("lock {:?}: {cycle}; {fate}", wait.lock);
    }
    Some(cycle)
}

/// The record's fields and the client's note of the wait, gone with the wait.
struct Written<'a> {
    client: &'a Engine,
    serial: u64,
    _fields: OnDrop,
}

impl<'a> Written<'a> {
    fn new(client: &'a Engine, fields: Vec<String>, serial: u64) -> Self {
        let (key, mut conn) = (keys::waits_key(&client.id), client.conn.clone());
        let removal = OnDrop::armed(&client.conn, async move {
            let deleted = redis::cmd("HDEL")
                .arg(&key)
                .arg(&fields)
                .query_async::<()>(&mut conn)
                .await;
            if let Err(e) = deleted {
                crate::trace::debug_event!(
                    "deleting a long wait's record failed (it ends with its TTL): {e}"
                );
            }
        });
        Written {
            client,
            serial,
            _fields: removal,
        }
    }
}

impl Drop for Written<'_> {
    fn drop(&mut self) {
        self.client.deadlocks.note(self.serial, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn walks_come_every_threshold_on_a_cycle_and_slow_down_off_one() {
        let t = Duration::from_secs(1);
        let gaps: Vec<u64> = (0..9).map(|quiet| next_walk(t, quiet).as_secs()).collect();
        assert_eq!(gaps, [1, 1, 2, 4, 8, 16, 32, 32, 32]);
    }
}
