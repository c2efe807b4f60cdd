//! The lock kinds: thin adapters over the wait engine and the watchdog.

mod fair;
mod fenced;
mod guard;
mod kind;
mod multi;
mod non_reentrant;
mod read_write;
mod redlock;
mod reentrant;
mod rlock;
mod spin;

pub(crate) use fair::Fair;
pub use fenced::RFencedLock;
pub use guard::LockGuard;
pub use multi::{MultiGuard, MultiLock};
pub(crate) use non_reentrant::{NonReentrant, NonReentrantFair};
pub use read_write::RReadWriteLock;
pub use redlock::{RedGuard, RedLock};
pub(crate) use reentrant::Reentrant;
pub use rlock::RLock;
pub use spin::BackOff;
pub(crate) use spin::Spin;

use std::time::Duration;

/// A lock's remaining time to live, as Redisson's `remainTimeToLive()` reports it.
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
    pub fn as_duration(self) -> Option<Duration> {
        match self {
            RemainingTtl::Expires(d) => Some(d),
            _ => None,
        }
    }
}
