//! How the synchronizers wait: in the locks' wait loop (`wait/in_redis.rs`),
//! without the owners, leases and renewal that a permit or a latch does not
//! have. Between two attempts a waiter sleeps on the object's channel (one
//! subscription per name and client), at most the attempt's hint (a permit's
//! lease ends) or the client's re-check interval, which bounds what a lost
//! message (or a change made without one: a plain `SET`, `DEL` or `INCRBY`)
//! costs, as for every waiter.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::MAX_DURATION;
use crate::engine::cleanup::OnDrop;
use crate::engine::contract::{Between, Wait, Waits};
use crate::engine::wait::{through_the_line, InRedis, Object, Pause, Place, Tried, Tries};
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::{Kind, Labels};
use crate::transport::pubsub::Class;

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
    pub(crate) client: &'a Arc<Engine>,
    /// The object's name: waiters of one name and client share a subscription.
    pub(crate) name: &'a Arc<str>,
    pub(crate) channel: &'a str,
    pub(crate) class: Class,
    /// This client's waiters form a local line, one at a time in Redis (the
    /// waiters of one permit, who would otherwise all try for each permit
    /// released and all but one fail).
    pub(crate) local_line: bool,
    /// What the object is, for its measurements.
    pub(crate) kind: Kind,
}

/// Runs `attempt` until it is done, waiting as `wait` says between attempts on
/// the object's channel, in the wait loop every kind waits in
/// ([`InRedis`](crate::engine::wait::InRedis)). `Ok(None)`: not done in time (or, with
/// [`Wait::Once`], not at the first attempt).
///
/// Transient failures (of the subscription, or of an attempt: one whose
/// outcome is unknown is settled by the attempt itself) are retried
/// `retry_attempts` times, with pauses drawn up to `retry_interval`; any other
/// error ends the wait.
///
/// Measured here (feature `metrics`, see `metrics.rs`), the one entry every
/// synchronizer waits through.
///
/// # Cancel safety
/// Cancel safe if `attempt`'s futures are: the subscription is left on drop.
pub(crate) async fn wait_for<T, F, Fut>(
    waiting: Waiting<'_>,
    wait: Wait,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send,
    F: Fn() -> Fut + Sync,
    Fut: Future<Output = Result<Attempt<T>>> + Send,
{
    let labels = Labels::new(waiting.kind, waiting.name, &waiting.client.config);
    crate::metrics::metered(&labels, wait.is_one_off(), || {
        wait_unmetered(waiting, wait, attempt)
    })
    .await
}

/// [`wait_for`], unmeasured.
async fn wait_unmetered<T, F, Fut>(
    waiting: Waiting<'_>,
    wait: Wait,
    attempt: F,
) -> Result<Option<T>>
where
    T: Send,
    F: Fn() -> Fut + Sync,
    Fut: Future<Output = Result<Attempt<T>>> + Send,
{
    let Waiting {
        client,
        name,
        channel,
        class,
        local_line,
        kind: _,
    } = waiting;
    // A synchronizer's waiters listen; none barges past a hand-off or keeps a
    // queue in Redis.
    let waits = Waits {
        class,
        between: Between::Listens,
        local_line,
        ordered: false,
    };
    let started = wait.start()?;
    let tries = Retrying(attempt);
    let object = Object {
        name,
        channel,
        class,
    };
    // The turn at the head of the line passes on when this wait ends, got or
    // not; no "held here" for the next: a permit taken may leave others.
    let (got, _turn) = through_the_line(
        client,
        object,
        local_line,
        started,
        async |wait, listening, turn| {
            let place = Place {
                client,
                name,
                channel,
                waits,
                wait,
            };
            InRedis::new(place, turn, OnDrop::disarmed())
                .run(&tries, listening.map(Into::into))
                .await
        },
    )
    .await;
    got
}

/// A synchronizer's attempts, as the wait loop makes them.
struct Retrying<F>(F);

impl<T, F, Fut> Tries for Retrying<F>
where
    T: Send,
    F: Fn() -> Fut + Sync,
    Fut: Future<Output = Result<Attempt<T>>> + Send,
{
    type Got = T;

    async fn attempt(&self, _queue: bool, _start_by: Option<Instant>) -> Option<Result<Tried<T>>> {
        Some((self.0)().await.map(|attempt| match attempt {
            Attempt::Done(done) => Tried::Got(done),
            // Nothing ends the wait by itself as a lease ends a lock's: the
            // sleep is the re-check interval's (the wait loop's cap), or the
            // hint's when sooner.
            Attempt::NotYet(hint) => Tried::Busy(Pause::For(hint.unwrap_or(MAX_DURATION))),
        }))
    }
}
