//! The wait loop of the synchronizers: the locks' rules (`wait/`) without
//! owners, leases or renewal, which a permit or a latch does not have.
//!
//! ```text
//! attempt ─▶ done? ── yes ─▶ return
//!    │ no
//! subscribe to the channel (one subscription per name and client), then loop:
//!    arm wake-up ─▶ wait for the subscription ─▶ attempt
//!    ─▶ sleep until woken, at most min(hint, RECHECK, time left) ─▶ loop
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::ClientInner;
use crate::contract::Wait;
use crate::error::{Error, Result};
use crate::pubsub::Class;
use crate::wait::within;

/// The longest a waiter sleeps between two attempts without a message. Nothing
/// ends a semaphore's or a latch's wait by itself the way a lock's lease does,
/// so this bounds what a lost message (or a change made without one: a plain
/// `SET`, `DEL` or `INCRBY`) costs.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// What one attempt came to.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    /// Done: the wait is over.
    Done(T),
    /// Not yet; something changes by itself in this long at the latest (a
    /// permit's lease ends), if known.
    NotYet(Option<Duration>),
}

/// Which waiters a synchronizer's messages concern.
#[derive(Debug)]
pub(crate) struct Waiting<'a> {
    pub(crate) client: &'a Arc<ClientInner>,
    /// The object's name: waiters of one name and client share a subscription.
    pub(crate) name: &'a Arc<str>,
    pub(crate) channel: &'a str,
    pub(crate) class: Class,
}

/// Runs `attempt` until it is done, waiting as `wait` says between attempts on
/// the object's channel. `Ok(None)`: not done in time (or, with [`Wait::Once`],
/// not at the first attempt).
///
/// Errors that surely left the server untouched (a refused connection, a
/// "not now" reply) and failed subscriptions are retried `retry_attempts`
/// times, `retry_interval` apart; any other error ends the wait.
///
/// # Cancel safety
/// Cancel safe if `attempt`'s futures are: the subscription is left on drop.
pub(crate) async fn wait_for<T, F, Fut>(
    waiting: Waiting<'_>,
    wait: Wait,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let Waiting {
        client,
        name,
        channel,
        class,
    } = waiting;
    let (wait, deadline) = wait.start()?;
    let config = &client.config;
    let mut failures = 0;
    // The uncontended path: one attempt, no subscription.
    match attempt().await {
        Ok(Attempt::Done(done)) => return Ok(Some(done)),
        Ok(Attempt::NotYet(_)) if matches!(wait, Wait::Once) => return Ok(None),
        Ok(Attempt::NotYet(_)) => {}
        Err(e) if !matches!(wait, Wait::Once) && e.is_surely_not_executed() => failures += 1,
        Err(e) => return Err(e),
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(None);
    }
    let subscription = client.pubsub.subscribe(channel, name, class);
    loop {
        // Armed before the attempt: a message published between the attempt's
        // reply and the sleep below still wakes this waiter.
        let mut woken = std::pin::pin!(subscription.notified());
        woken.as_mut().enable();
        let step = async {
            subscription.ready().await.map_err(|e| (e, true))?;
            attempt().await.map_err(|e| (e, false))
        };
        let sleep = match within(deadline, step).await {
            None => return Ok(None),
            Some(Ok(Attempt::Done(done))) => return Ok(Some(done)),
            Some(Ok(Attempt::NotYet(hint))) => {
                failures = 0;
                hint.map_or(RECHECK, |hint| hint.min(RECHECK))
            }
            Some(Err((e, subscribing)))
                if retryable(&e, subscribing) && failures < config.retry_attempts =>
            {
                failures += 1;
                // Full jitter: waiters that failed together retry apart.
                crate::retry::jitter(config.retry_interval)
            }
            Some(Err((e, _))) => return Err(e),
        };
        let until = Instant::now() + sleep;
        let until = deadline.map_or(until, |d| until.min(d));
        // Woken or timed out, the next step is the same: try again.
        let _ = tokio::time::timeout_at(until, woken).await;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
    }
}

/// May the step that failed with `e` simply be repeated? A subscription always
/// may after a transport failure; an attempt only if it surely did not run.
fn retryable(e: &Error, subscribing: bool) -> bool {
    if subscribing {
        e.is_transient()
    } else {
        e.is_surely_not_executed()
    }
}
