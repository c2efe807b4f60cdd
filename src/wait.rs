//! The one wait engine every lock kind uses.
//!
//! ```text
//! register renewal (watchdog holds) ─▶ attempt ─▶ acquired? ── yes ─▶ hold
//!                                        │ no (ttl)
//!                  subscribe to the kind's channel, then loop:
//!                    wait for the subscription ─▶ arm wake-up ─▶ attempt
//!                    ─▶ sleep until woken, at most min(ttl, time left) ─▶ loop
//! ```
//!
//! Each attempt runs in a task of its own and hands its result back over a
//! oneshot. If the caller's future was dropped meanwhile, the hand-back fails and
//! that task gives the hold straight back, so a cancelled `lock()` never leaves a
//! hold behind, even when its acquire had already run on the server.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client::ClientInner;
use crate::config::duration_to_millis;
use crate::error::{Error, Result};
use crate::scripts::BusyTtl;
use crate::watchdog::{HoldState, Renewal};

/// A boxed future, as the lock kinds return from [`Acquirer`].
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How long a waiter sleeps when the lock reports no usable TTL (`-1`: no expiry,
/// `-2`: gone). Every sleep is bounded, even then.
const NO_TTL_SLEEP: Duration = Duration::from_millis(100);

/// The lock-kind specific half of acquiring: the scripts, the channel to wait on.
pub(crate) trait Acquirer: std::fmt::Debug + Send + Sync + 'static {
    /// The lock's name, for watchdog registration.
    fn name(&self) -> &str;
    /// The owner field acquiring.
    fn owner(&self) -> &str;
    /// The channel whose messages announce that trying again may succeed.
    fn channel(&self) -> &str;
    /// One atomic attempt: `Ok(None)` acquired, `Ok(Some(ttl))` busy.
    fn attempt(
        self: Arc<Self>,
        conn: ConnectionManager,
        lease_ms: u64,
    ) -> BoxFuture<Result<Option<BusyTtl>>>;
    /// Releases one hold of this owner, restarting the lease of any that remain
    /// with `lease_ms`.
    fn release(
        self: Arc<Self>,
        conn: ConnectionManager,
        lease_ms: u64,
    ) -> BoxFuture<Result<crate::scripts::Released>>;
}

/// How long a hold lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lease {
    /// The watchdog timeout, renewed while held.
    Watchdog,
    /// Exactly this long; never renewed.
    Fixed(Duration),
}

/// How long to keep trying.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt.
    Once,
    /// Until this much time has passed.
    For(Duration),
    /// Until acquired.
    Forever,
}

/// A hold just acquired: how it is kept alive and how its loss is noticed.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The watchdog's renewal, for holds without an explicit lease.
    pub(crate) renewal: Option<Renewal>,
    /// For explicit leases: when the lease runs out at the latest (measured from
    /// before the acquire was sent).
    pub(crate) lease_deadline: Option<Instant>,
    /// The lease in milliseconds, restarted on the holds that remain when this one
    /// is released.
    pub(crate) lease_ms: u64,
}

impl Hold {
    /// The watchdog state of this hold, when it is renewed.
    pub(crate) fn state(&self) -> Option<&Arc<HoldState>> {
        self.renewal.as_ref().and_then(Renewal::state)
    }
}

/// Acquires with `acquirer`, waiting as `wait` says. `Ok(None)`: not acquired in time.
///
/// # Cancel safety
/// Cancel safe at every await: the subscription, the watchdog registration and any
/// hold a detached attempt obtained are all released when this future is dropped.
pub(crate) async fn acquire(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    lease: Lease,
    wait: Wait,
) -> Result<Option<Hold>> {
    let (lease_ms, registration) = match lease {
        Lease::Watchdog => (
            duration_to_millis("watchdog timeout", client.config.lock_watchdog_timeout)?,
            Some(client.watchdog.register(acquirer.name(), acquirer.owner())),
        ),
        Lease::Fixed(lease) => (duration_to_millis("lease", lease)?, None),
    };
    let deadline = match wait {
        Wait::Once | Wait::Forever => None,
        Wait::For(wait) => {
            if wait > crate::config::MAX_DURATION {
                return Err(Error::invalid(format!(
                    "wait time of {wait:?} exceeds the maximum of {} s",
                    crate::config::MAX_DURATION.as_secs()
                )));
            }
            Some(Instant::now() + wait)
        }
    };
    let started = Instant::now();
    let acquired = |registration: Option<crate::watchdog::Registration>| Hold {
        renewal: registration.map(|r| r.activate()),
        lease_deadline: match lease {
            Lease::Fixed(lease) => Some(started + lease),
            Lease::Watchdog => None,
        },
        lease_ms,
    };

    // The uncontended path: one attempt, no subscription.
    let mut failures = 0;
    match attempt(client, acquirer, lease_ms).await {
        Ok(None) => return Ok(Some(acquired(registration))),
        Ok(Some(_busy)) => {}
        Err(e) if e.is_transient() && !matches!(wait, Wait::Once) => failures += 1,
        Err(e) => return Err(e),
    }
    if matches!(wait, Wait::Once) || deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(None);
    }

    let subscription = client.pubsub.subscribe(acquirer.channel());
    loop {
        // Armed before the attempt: an unlock published between the attempt's reply
        // and the sleep below still wakes this waiter.
        let mut woken = std::pin::pin!(subscription.notified());
        woken.as_mut().enable();
        let result = match subscription.ready().await {
            Ok(()) => attempt(client, acquirer, lease_ms).await,
            Err(e) => Err(e),
        };
        let sleep = match result {
            Ok(None) => return Ok(Some(acquired(registration))),
            Ok(Some(ttl)) => {
                failures = 0;
                sleep_bound(ttl)
            }
            Err(e) if e.is_transient() && failures < client.config.retry_attempts => {
                failures += 1;
                client.config.retry_interval
            }
            Err(e) => return Err(e),
        };
        let sleep = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(None);
                }
                sleep.min(left)
            }
            None => sleep,
        };
        // Woken or timed out, the next step is the same: try again.
        let _ = tokio::time::timeout(sleep, woken).await;
    }
}

fn sleep_bound(ttl: BusyTtl) -> Duration {
    match u64::try_from(ttl) {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => NO_TTL_SLEEP,
    }
}

/// Runs one attempt in its own task (see the module docs for why).
async fn attempt(
    client: &Arc<ClientInner>,
    acquirer: &Arc<dyn Acquirer>,
    lease_ms: u64,
) -> Result<Option<BusyTtl>> {
    let (reply, result) = oneshot::channel();
    let conn = client.conn.clone();
    let acquirer = acquirer.clone();
    tokio::spawn(async move {
        let outcome = acquirer.clone().attempt(conn.clone(), lease_ms).await;
        if let Err(Ok(None)) = reply.send(outcome) {
            // Acquired for a caller that is gone: give it back. Failing that, the
            // hold expires with its lease (it was never handed to the watchdog).
            let _ = acquirer.release(conn, lease_ms).await;
        }
    });
    result.await.map_err(|_| {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Client,
            "the runtime shut down during a lock attempt",
        )))
    })?
}
