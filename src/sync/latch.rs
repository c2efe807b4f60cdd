//! `RCountDownLatch`: Redisson's count-down latch, on its key and channel.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::waiting::{wait_for, Attempt, Waiting};
use crate::engine::contract::Wait;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::kind;
use crate::transport::pubsub::Class;
use crate::transport::scripts;

/// A distributed count-down latch: Redisson's `RCountDownLatch`, on the same key
/// and channel. Tasks anywhere wait until the count, set once, has been
/// counted down to zero by others.
///
/// The latch is a Redis string named after it holding the count still to go;
/// absent means open (never set, counted down, or deleted). Its channel is
/// `redisson_countdownlatch__channel__{name}`: the count-down that reaches zero
/// (and a delete) publishes `0`, a new count publishes `1`, and every waiter
/// checks the count again on either. Each sleep is bounded, so a lost message
/// costs a few seconds, never a hang.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let ready = client.get_count_down_latch("shards-loaded")?;
/// ready.try_set_count(3).await?;
/// // ... three loaders each call ready.count_down() when done ...
/// ready.wait().await?; // until all three have
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RCountDownLatch {
    client: Arc<Engine>,
    name: Arc<str>,
    channel: String,
}

impl RCountDownLatch {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RCountDownLatch {
            channel: crate::transport::keys::latch_channel(&name),
            name: name.into(),
            client,
        }
    }

    /// The latch's name, its key (Redisson `getName()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// assert_eq!(ready.name(), "ready");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count, only if the latch is open (Redisson
    /// `trySetCount(count)`); `true` when this call set it. Waiters already
    /// waiting on an open latch have returned; new ones wait for the new count.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// if !ready.try_set_count(3).await? {
    ///     println!("already counting: {}", ready.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a count of zero (Redisson stores it, and
    /// then no count-down ever announces the latch open) or over `i64::MAX`;
    /// [`Error::Redis`] when the command fails.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 || i64::try_from(count).is_err() {
            return Err(Error::invalid(format!(
                "latch count {count} must be between 1 and {}",
                i64::MAX
            )));
        }
        let mut conn = self.client.conn.clone();
        scripts::latch_try_set(&mut conn, &self.name, &self.channel, count).await
    }

    /// Counts one down (Redisson `countDown()`); the count that reaches zero
    /// opens the latch (deletes its key) and wakes every waiter. On an open
    /// latch it does nothing.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// ready.count_down().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails (whether it counted is then
    /// unknown when the reply timed out).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped while in flight, the count-down may or may not
    /// happen.
    pub async fn count_down(&self) -> Result<()> {
        let mut conn = self.client.conn.clone();
        scripts::latch_count_down(&mut conn, &self.name, &self.channel).await?;
        Ok(())
    }

    /// The count still to go (Redisson `getCount()`); 0 when open.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// println!("{} to go", ready.count().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails, or the key holds no integer.
    pub async fn count(&self) -> Result<u64> {
        let mut conn = self.client.conn.clone();
        let count: Option<i64> = conn
            .get(&*self.name)
            .await
            .map_err(|e| Error::from_redis(&self.name, e))?;
        Ok(count.map_or(0, |c| c.max(0).unsigned_abs()))
    }

    /// Waits until the latch is open, as long as it takes (Redisson `await()`).
    /// An open latch (never set, counted down, deleted) returns at once.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// ready.wait().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when Redis fails more than `retry_attempts` times in a
    /// row.
    ///
    /// # Cancel safety
    /// Cancel safe: waiting changes nothing on the server; a dropped future
    /// leaves no subscription behind.
    pub async fn wait(&self) -> Result<()> {
        match self.open_within(Wait::Forever).await? {
            true => Ok(()),
            false => Err(Error::unexpected("await", "gave up without a wait limit")),
        }
    }

    /// Waits at most `timeout` for the latch to open (Redisson `await(timeout,
    /// unit)`); `true` when it is open, `false` when the time ran out first.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let ready = client.get_count_down_latch("ready")?;
    /// if !ready.wait_timeout(Duration::from_secs(10)).await? {
    ///     println!("still {} to go", ready.count().await?);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a timeout over
    /// [`MAX_DURATION`](crate::MAX_DURATION); otherwise as
    /// [`wait`](RCountDownLatch::wait).
    ///
    /// # Cancel safety
    /// As [`wait`](RCountDownLatch::wait).
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.open_within(Wait::For(timeout)).await
    }

    /// Deletes the latch, opening it (Redisson `delete()`): waiters wake and
    /// return, Java ones included (Redisson's own delete announces a new count,
    /// so its waiters sleep on). `true` when it was counting.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let ready = client.get_count_down_latch("ready")?;
    /// ready.delete().await?; // give up on it: release everyone
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails.
    pub async fn delete(&self) -> Result<bool> {
        let mut conn = self.client.conn.clone();
        scripts::latch_delete(&mut conn, &self.name, &self.channel).await
    }

    async fn open_within(&self, wait: Wait) -> Result<bool> {
        let waiting = Waiting {
            client: &self.client,
            name: &self.name,
            channel: &self.channel,
            class: Class::All,
            local_line: false,
            kind: kind!("count_down_latch"),
        };
        let opened = wait_for(waiting, wait, || async {
            Ok(match self.count().await? {
                0 => Attempt::Done(()),
                _ => Attempt::NotYet(None),
            })
        })
        .await?;
        Ok(opened.is_some())
    }
}
