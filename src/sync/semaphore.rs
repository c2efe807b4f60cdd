//! `RSemaphore`: Redisson's semaphore, on its key and channel.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::settle::{check_permits, settled_acquire};
use super::waiting::{wait_for, Attempt, Waiting};
use crate::engine::contract::{BoxFuture, Wait};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{kind, Kind, Labels};
use crate::transport::pubsub::Class;
use crate::transport::scripts;

/// A distributed counting semaphore: Redisson's `RSemaphore`, on the same key and
/// channel, so Java and Rust processes share its permits.
///
/// The semaphore is a Redis string named after it holding the number of
/// permits available. It starts absent (no permits): set a number once with
/// [`try_set_permits`](RSemaphore::try_set_permits), or change it with
/// [`add_permits`](RSemaphore::add_permits). Permits belong to nobody: any task
/// of any process may release them, and a process that dies holding permits
/// does not give them back (use an
/// [`RPermitExpirableSemaphore`](crate::RPermitExpirableSemaphore) when that
/// matters).
///
/// Waiting tasks sleep on the semaphore's channel (`redisson_sc:{name}`), one
/// subscription per client however many tasks wait; a release publishes how
/// many permits are available and wakes that many waiters. Each sleep is
/// bounded, so a lost message costs a few seconds, never a hang.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let connections = client.get_semaphore("db-connections")?;
/// connections.try_set_permits(10).await?; // only the first caller sets it
/// connections.acquire().await?;
/// // ... use one of the ten ...
/// connections.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RSemaphore {
    client: Arc<Engine>,
    name: Arc<str>,
    channel: String,
    /// Marks of this handle's acquires whose replies came, for the next
    /// attempt to delete.
    forget: Arc<Forget>,
}

/// The marks of acquires whose outcome is known (taken, and the caller has its
/// permits), which no settle will read: the next attempt deletes them in its
/// script, so a busy semaphore keeps about one mark per waiting task instead
/// of one per acquire until they expire.
#[derive(Debug, Default)]
struct Forget(std::sync::Mutex<Vec<String>>);

/// How many marks one attempt deletes at most; the rest wait for the next, and
/// beyond [`FORGET_KEPT`] they are left to expire.
const FORGET_PER_ATTEMPT: usize = 16;
const FORGET_KEPT: usize = 256;

impl Forget {
    fn take(&self) -> Vec<String> {
        let mut marks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let from = marks.len().saturating_sub(FORGET_PER_ATTEMPT);
        marks.split_off(from)
    }

    fn remember(&self, mark: String) {
        let mut marks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if marks.len() < FORGET_KEPT {
            marks.push(mark);
        }
    }
}

/// The semaphore's kind, as its measurements name it.
const SEMAPHORE: Kind = kind!("semaphore");

impl RSemaphore {
    pub(crate) fn new(client: Arc<Engine>, name: String) -> Self {
        RSemaphore {
            channel: crate::transport::keys::semaphore_channel(&name),
            name: name.into(),
            client,
            forget: Arc::default(),
        }
    }

    /// The semaphore's name, its key (Redisson `getName()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// assert_eq!(slots.name(), "slots");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Takes one permit, waiting as long as it takes (Redisson `acquire()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// slots.acquire().await?;
    /// slots.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when Redis fails more than `retry_attempts` times in a row,
    /// or a reply does not come (a permit the attempt may have taken is then
    /// given back from the client's thread: the attempt left a mark of itself
    /// beside the semaphore for that, `{name}:rl-acquired:<id>`, which Redisson
    /// ignores); [`Error::UnexpectedReply`] when the key holds no integer.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future never leaves a permit taken, even when
    /// the script had already run on the server, or its reply was lost (it is
    /// given back), and leaves no subscription behind.
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_many(1).await
    }

    /// Takes `permits` permits at once, waiting as long as it takes (Redisson
    /// `acquire(permits)`). Zero permits succeed at once, with no I/O, as in
    /// Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let bandwidth = client.get_semaphore("bandwidth-mbps")?;
    /// bandwidth.acquire_many(25).await?;
    /// bandwidth.release_many(25).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits (Redisson
    /// counts them in a Java `int`); otherwise as [`acquire`](RSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](RSemaphore::acquire).
    pub async fn acquire_many(&self, permits: u32) -> Result<()> {
        match self.take(permits, Wait::Forever).await? {
            true => Ok(()),
            false => Err(Error::unexpected("acquire", "gave up without a wait limit")),
        }
    }

    /// Takes one permit if one is available now, without waiting (Redisson
    /// `tryAcquire()`); `true` when taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// if slots.try_acquire().await? {
    ///     slots.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire`](RSemaphore::acquire), without retries.
    ///
    /// # Cancel safety
    /// As [`acquire`](RSemaphore::acquire).
    pub async fn try_acquire(&self) -> Result<bool> {
        self.take(1, Wait::Once).await
    }

    /// Takes `permits` permits if that many are available now (Redisson
    /// `tryAcquire(permits)`); `true` when taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// if slots.try_acquire_many(3).await? {
    ///     slots.release_many(3).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire_many`](RSemaphore::acquire_many), without retries.
    ///
    /// # Cancel safety
    /// As [`acquire`](RSemaphore::acquire).
    pub async fn try_acquire_many(&self, permits: u32) -> Result<bool> {
        self.take(permits, Wait::Once).await
    }

    /// Takes one permit, waiting at most `wait` (Redisson `tryAcquire(wait,
    /// unit)`); `true` when taken. The first attempt is made however short the
    /// wait.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let slots = client.get_semaphore("slots")?;
    /// if slots.try_acquire_wait(Duration::from_secs(2)).await? {
    ///     slots.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wait over
    /// [`MAX_DURATION`](crate::MAX_DURATION); otherwise as
    /// [`acquire`](RSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](RSemaphore::acquire).
    pub async fn try_acquire_wait(&self, wait: Duration) -> Result<bool> {
        self.take(1, Wait::For(wait)).await
    }

    /// Takes `permits` permits at once, waiting at most `wait` (Redisson
    /// `tryAcquire(permits, wait, unit)`); `true` when taken.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    /// let slots = client.get_semaphore("slots")?;
    /// if slots.try_acquire_many_wait(2, Duration::from_millis(500)).await? {
    ///     slots.release_many(2).await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire_many`](RSemaphore::acquire_many) and
    /// [`try_acquire_wait`](RSemaphore::try_acquire_wait).
    ///
    /// # Cancel safety
    /// As [`acquire`](RSemaphore::acquire).
    pub async fn try_acquire_many_wait(&self, permits: u32, wait: Duration) -> Result<bool> {
        self.take(permits, Wait::For(wait)).await
    }

    /// Gives one permit back (Redisson `release()`), waking a waiter. Any task
    /// may release, whether it took a permit or not, as in Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// slots.acquire().await?;
    /// slots.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when no send reached the server within the settle's
    /// budget (a reconnect and a few replies' worth: the server was gone that
    /// long, and whether the permit went back is unknown); [`Error::UnexpectedReply`]
    /// when the key holds no integer. A release that fails in transit (a cut
    /// connection, a lost reply) is sent again under a receipt it leaves
    /// beside the semaphore, `{name}:rl-released:<id>` (Redisson ignores it),
    /// which the server finds, so that it never gives back twice: do not
    /// release again after an error.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any point, the release happens once (finished,
    /// and settled if its reply is lost, from the client's thread).
    pub async fn release(&self) -> Result<()> {
        self.release_many(1).await
    }

    /// Gives `permits` permits back at once (Redisson `release(permits)`), waking
    /// up to that many waiters. Zero permits do nothing, with no I/O.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// slots.acquire_many(2).await?;
    /// slots.release_many(2).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits; otherwise as
    /// [`release`](RSemaphore::release).
    ///
    /// # Cancel safety
    /// As [`release`](RSemaphore::release).
    pub async fn release_many(&self, permits: u32) -> Result<()> {
        check_permits(permits)?;
        if permits == 0 {
            return Ok(());
        }
        let receipt = crate::transport::keys::semaphore_receipt(
            &self.name,
            &uuid::Uuid::new_v4().simple().to_string(),
        );
        let ttl_ms = crate::config::duration_to_millis(
            "semaphore receipt",
            super::settle::mark_ttl(&self.client.config),
        )?;
        let send = {
            let (conn, name, channel) = (
                self.client.conn.clone(),
                self.name.clone(),
                self.channel.clone(),
            );
            let receipt = receipt.clone();
            move |forget: Vec<String>| {
                let (mut conn, name, channel) = (conn.clone(), name.clone(), channel.clone());
                let receipts = scripts::AcquireMarks {
                    this: receipt.clone(),
                    forget,
                    ttl_ms,
                };
                async move {
                    scripts::semaphore_release(&mut conn, &name, &channel, &receipts, permits)
                        .await
                        .map(drop)
                }
            }
        };
        let call: BoxFuture<Result<()>> = Box::pin(send(self.forget.take()));
        let resend = send;
        let labels = Labels::new(SEMAPHORE, &self.name, &self.client.config);
        super::settle::settled_release(
            &self.client.conn,
            call,
            move |_| resend(Vec::new()),
            super::settle::SettleTerms::of(&self.client.config),
            labels,
        )
        .await?;
        self.forget.remember(receipt);
        Ok(())
    }

    /// How many permits are available now (Redisson `availablePermits()`): 0
    /// for a semaphore never set, negative after more were removed than were
    /// available.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// println!("{} free", slots.available_permits().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails, or the key holds no integer.
    pub async fn available_permits(&self) -> Result<i64> {
        let mut conn = self.client.conn.clone();
        let permits: Option<i64> = conn
            .get(&*self.name)
            .await
            .map_err(|e| Error::from_redis(&self.name, e))?;
        Ok(permits.unwrap_or(0))
    }

    /// Sets the number of permits, only if the semaphore was never set (or was
    /// deleted): Redisson `trySetPermits(permits)`. `true` when this call set it.
    /// The common start: every process calls it, the first one wins.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// let first = slots.try_set_permits(3).await?;
    /// println!("set by this process: {first}");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than `i32::MAX` permits;
    /// [`Error::Redis`] when the command fails.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        check_permits(permits)?;
        let mut conn = self.client.conn.clone();
        scripts::semaphore_try_set(&mut conn, &self.name, &self.channel, permits).await
    }

    /// Adds `change` permits, or removes them when negative (Redisson
    /// `addPermits(change)`); the count may go below zero, and acquires then wait
    /// until releases lift it above. Waiters are woken when permits are available
    /// afterwards.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// slots.add_permits(5).await?; // scale up
    /// slots.add_permits(-2).await?; // and down
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails, or the key holds no integer.
    pub async fn add_permits(&self, change: i32) -> Result<()> {
        let mut conn = self.client.conn.clone();
        scripts::semaphore_add(&mut conn, &self.name, &self.channel, change).await?;
        Ok(())
    }

    /// Takes every available permit (Redisson `drainPermits()`); how many there
    /// were (0 for a semaphore never set; negative when it was below zero, which
    /// this resets to zero, as Redisson does).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let slots = client.get_semaphore("slots")?;
    /// let taken = slots.drain_permits().await?;
    /// slots.add_permits(i32::try_from(taken).unwrap_or(0)).await?; // give them back
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the command fails, or the key holds no integer.
    pub async fn drain_permits(&self) -> Result<i64> {
        let mut conn = self.client.conn.clone();
        scripts::semaphore_drain(&mut conn, &self.name).await
    }

    /// Takes `permits`, waiting as `wait` says; `true` when taken.
    async fn take(&self, permits: u32, wait: Wait) -> Result<bool> {
        check_permits(permits)?;
        if permits == 0 {
            return Ok(true);
        }
        // A message says how many permits are available and wakes that many
        // waiters of one permit; a waiter of several is woken by every message,
        // so a wake-up never goes to one that cannot use it while another that
        // could sleeps on.
        let class = if permits == 1 {
            Class::Counted
        } else {
            Class::All
        };
        let waiting = Waiting {
            client: &self.client,
            name: &self.name,
            channel: &self.channel,
            class,
            // Waiters of one permit wait in this client's local line: one in
            // Redis, the others parked (see `wait/in_line.rs`).
            local_line: permits == 1,
            kind: SEMAPHORE,
        };
        let taken = wait_for(waiting, wait, || self.attempt(permits)).await?;
        Ok(taken.is_some())
    }

    /// One attempt to take `permits`, leaving a mark of itself on the server
    /// (see `semaphore_acquire.lua`): if its future is dropped, or its reply
    /// never comes, the settle gives back what the mark says it took.
    async fn attempt(&self, permits: u32) -> Result<Attempt<()>> {
        let mark = crate::transport::keys::semaphore_mark(
            &self.name,
            &uuid::Uuid::new_v4().simple().to_string(),
        );
        let marks = scripts::AcquireMarks {
            this: mark.clone(),
            forget: self.forget.take(),
            ttl_ms: crate::config::duration_to_millis(
                "semaphore mark",
                super::settle::mark_ttl(&self.client.config),
            )?,
        };
        let (mut conn, name) = (self.client.conn.clone(), self.name.clone());
        let call: BoxFuture<Result<Option<()>>> = Box::pin(async move {
            let taken = scripts::semaphore_acquire(&mut conn, &name, &marks, permits).await?;
            Ok(taken.then_some(()))
        });
        let (conn, terms) = (
            self.client.conn.clone(),
            super::settle::SettleTerms::of(&self.client.config),
        );
        let (name, channel, settled_mark) = (self.name.clone(), self.channel.clone(), mark.clone());
        let undo = move |_took| async move {
            let what = format!("semaphore {name:?}");
            super::settle::settle_retrying(terms, &what, || {
                let mut conn = conn.clone();
                let (name, channel, mark) = (&name, &channel, &settled_mark);
                async move {
                    scripts::semaphore_settle(&mut conn, name, channel, mark)
                        .await
                        .map(drop)
                }
            })
            .await;
        };
        // On an error the forgotten marks may not have been deleted: they expire.
        let labels = Labels::new(SEMAPHORE, &self.name, &self.client.config);
        let taken = settled_acquire(&self.client.conn, call, undo, labels).await?;
        Ok(match taken {
            Some(()) => {
                self.forget.remember(mark);
                Attempt::Done(())
            }
            None => Attempt::NotYet(None),
        })
    }
}
