//! The lock kinds: thin adapters over the wait engine and the watchdog.

mod client_order;
mod fair;
mod fenced;
mod fenced_store;
mod group;
mod guard;
mod kind;
mod multi;
mod non_reentrant;
mod read_write;
mod redlock;
mod reentrant;
mod rlock;
mod spin;

pub use crate::engine::backoff::BackOff;
pub(crate) use fair::Fair;
pub use fenced::RFencedLock;
pub use fenced_store::{FencedStore, FencedWrite};
pub(crate) use group::GroupMembers;
pub use guard::LockGuard;
pub use multi::{MultiGuard, MultiLock};
pub(crate) use non_reentrant::{NonReentrant, NonReentrantFair};
pub use read_write::RReadWriteLock;
pub use redlock::{RedGuard, RedLock};
pub(crate) use reentrant::Reentrant;
pub use rlock::RLock;
pub(crate) use spin::Spin;

use std::time::Duration;

pub(crate) use crate::engine::retry::jitter;

/// The longest random pause between two rounds of a multi-lock or RedLock: two
/// callers that met head on do not start their next rounds together.
pub(crate) const ROUND_PAUSE: Duration = Duration::from_millis(50);

/// A lock's remaining time to live, as Redisson's `remainTimeToLive()` reports it
/// ([`RLock::remain_time_to_live`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemainingTtl {
    /// The lock is not held (Redisson: `-2`).
    NotLocked,
    /// The lock is held with no expiry (Redisson: `-1`); none of this crate's locks
    /// does this, but a foreign writer might.
    NoExpiry,
    /// The lock is held and expires in this long unless renewed.
    Expires(Duration),
}

impl RemainingTtl {
    pub(crate) fn from_pttl(pttl: i64) -> Self {
        match pttl {
            -1 => RemainingTtl::NoExpiry,
            ms if ms >= 0 => RemainingTtl::Expires(Duration::from_millis(ms.unsigned_abs())),
            _ => RemainingTtl::NotLocked,
        }
    }

    /// The remaining time, when the lock is held with an expiry.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// let ttl = lock.remain_time_to_live().await?;
    /// if ttl.as_duration().is_some_and(|left| left < Duration::from_secs(1)) {
    ///     println!("the current hold ends within a second unless renewed");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn as_duration(self) -> Option<Duration> {
        match self {
            RemainingTtl::Expires(d) => Some(d),
            _ => None,
        }
    }
}
