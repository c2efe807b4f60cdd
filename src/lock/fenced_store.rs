//! The fencing kit: data kept in Redis, written only under a newer fencing token.
//!
//! A lock's token ([`RFencedLock`](crate::RFencedLock)) protects nothing by
//! itself: a holder paused past its lease (a GC pause, a frozen VM) still
//! believes it holds the lock, and writes. What makes the token work is a store
//! that *checks* it, in the same atomic step as the write: remember the newest
//! token that wrote, and refuse any write that brings an older one. So a stale
//! holder's late write is refused whatever it believes.
//!
//! [`FencedStore`] is that store for a value kept in Redis: one HASH per value,
//! field `value` (the data) and field `fence` (the token of the write that set
//! it), written by one script (`lua/fenced_write.lua`) that compares and writes
//! at once. Tokens are compared exactly over all of `u64`. An equal token
//! writes: a token is drawn once per acquisition (a re-entry draws a new one),
//! so an equal token is the same hold writing again, and a holder may write
//! as often as it likes while it holds.
//!
//! For data kept elsewhere the rule is the same, in that store's own atomic
//! step. In SQL, keep a `fence` column beside the data and make the check part
//! of the write:
//!
//! ```sql
//! UPDATE t SET v = $1, fence = $2 WHERE id = $3 AND fence <= $2
//! ```
//!
//! and treat "0 rows updated" as "a newer holder wrote; stop". (Insert the row
//! with `fence = 0` first, or use `INSERT ... ON CONFLICT (id) DO UPDATE ...
//! WHERE t.fence <= excluded.fence`.)

use std::sync::Arc;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::scripts;

/// A value kept in Redis that only a newer fencing token may overwrite:
/// obtained with [`Client::get_fenced_store`](crate::Client::get_fenced_store).
///
/// A lock's token ([`RFencedLock`](crate::RFencedLock)) protects data only
/// where the store compares it with the last writer's in the same atomic step
/// as the write: a holder paused past its lease still believes it holds the
/// lock, and writes. This store is a HASH with fields `value` and `fence`,
/// written by one script only for a token at least as new as `fence` (an
/// equal one is the same hold writing again), compared exactly over all of
/// `u64`. For data in SQL the
/// same rule is one statement, with "0 rows" meaning "a newer holder wrote;
/// stop":
///
/// ```sql
/// UPDATE t SET v = $1, fence = $2 WHERE id = $3 AND fence <= $2
/// ```
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_fenced_lock("account:7")?;
/// let balance = client.get_fenced_store("account:7:balance")?;
/// let (guard, token) = lock.lock_and_get_token().await?;
/// let write = balance.write(token, b"100").await?;
/// if !write.written() {
///     // A holder with a newer token wrote: this one lost the lock at some point.
///     eprintln!("refused: the store is at fence {}", write.fence());
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FencedStore {
    client: Arc<Engine>,
    key: Arc<str>,
}

/// What a [`FencedStore::write`] came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FencedWrite {
    written: bool,
    fence: u64,
}

impl FencedWrite {
    /// Did the value get written (the token was newer than the stored fence)?
    ///
    /// ```no_run
    /// # async fn demo(store: redisson_locks::FencedStore) -> Result<(), redisson_locks::Error> {
    /// if !store.write(7, b"v").await?.written() {
    ///     eprintln!("a newer token wrote first; stopping");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn written(&self) -> bool {
        self.written
    }

    /// The fence stored now: the token written, or the newer one that refused it.
    ///
    /// ```no_run
    /// # async fn demo(store: redisson_locks::FencedStore) -> Result<(), redisson_locks::Error> {
    /// let write = store.write(7, b"v").await?;
    /// assert!(write.fence() >= 7);
    /// # Ok(()) }
    /// ```
    pub fn fence(&self) -> u64 {
        self.fence
    }
}

impl FencedStore {
    pub(crate) fn new(client: Arc<Engine>, key: String) -> Self {
        FencedStore {
            client,
            key: key.into(),
        }
    }

    /// The store's key (a HASH with fields `value` and `fence`).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// assert_eq!(client.get_fenced_store("balance")?.key(), "balance");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Writes `value` if `token` is newer than the stored fence (or nothing is
    /// stored), and makes `token` the fence; otherwise changes nothing. One
    /// script: the check and the write are one atomic step.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let store = client.get_fenced_store("config:v")?;
    /// assert!(store.write(2, b"new").await?.written());
    /// assert!(!store.write(1, b"stale").await?.written());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for token 0 (the fenced lock's first token is
    /// 1: a 0 is a bug, never a token); [`Error::WrongType`] when the key holds
    /// something other than a hash; [`Error::Redis`] when the command fails or
    /// the stored fence is not a token (someone else wrote the hash).
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped while in flight, the write may or may not
    /// happen. Either way the store stays consistent: a write happens whole or
    /// not at all, and only for a newer token.
    pub async fn write(&self, token: u64, value: impl AsRef<[u8]>) -> Result<FencedWrite> {
        if token == 0 {
            return Err(Error::invalid(
                "a fencing token is at least 1 (0 is never drawn)",
            ));
        }
        let mut conn = self.client.conn.clone();
        let (written, fence) =
            scripts::fenced_write(&mut conn, &self.key, token, value.as_ref()).await?;
        Ok(FencedWrite { written, fence })
    }

    /// The value stored and its fence; `None` when nothing was written.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let store = client.get_fenced_store("config:v")?;
    /// if let Some((value, fence)) = store.read().await? {
    ///     println!("{} bytes, written under token {fence}", value.len());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::WrongType`] when the key holds something other than a hash;
    /// [`Error::Redis`] when the command fails or the fence is not a token.
    pub async fn read(&self) -> Result<Option<(Vec<u8>, u64)>> {
        let mut conn = self.client.conn.clone();
        let (value, fence): (Option<Vec<u8>>, Option<String>) = redis::cmd("HMGET")
            .arg(&*self.key)
            .arg("value")
            .arg("fence")
            .query_async(&mut conn)
            .await
            .map_err(|e| Error::from_redis(&self.key, e))?;
        match (value, fence) {
            (Some(value), Some(fence)) => {
                let fence = crate::numeral::decimal(&fence).ok_or_else(|| {
                    Error::unexpected("fenced read", format!("fence {fence:?} of {:?}", self.key))
                })?;
                Ok(Some((value, fence)))
            }
            _ => Ok(None),
        }
    }
}
