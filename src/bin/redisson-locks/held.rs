//! What a command runs under ([`Held`]): a lock's hold, a permit,
//! leadership, as `child.rs` takes it and `supervise.rs` watches it.

use std::future::Future;
use std::time::Duration;

/// What the command runs under: a lock's hold, a permit, leadership. It can
/// say how long it is surely valid and when it is lost, and be given back.
pub(crate) trait Held {
    /// How much longer it is surely valid; `None` once lost.
    fn valid_for(&self) -> Option<Duration>;
    /// Completes once it is no longer surely valid.
    fn lost(&self) -> impl Future<Output = ()> + '_;
    /// Gives it back; `NotHeld` when it was lost meanwhile.
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>>;
}

impl Held for redisson_locks::LockGuard {
    fn valid_for(&self) -> Option<Duration> {
        redisson_locks::LockGuard::valid_for(self)
    }
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.lease_lost()
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        self.unlock()
    }
}

impl Held for redisson_locks::Permit {
    fn valid_for(&self) -> Option<Duration> {
        redisson_locks::Permit::valid_for(self)
    }
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.lease_lost()
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        redisson_locks::Permit::release(self)
    }
}

impl Held for redisson_locks::FairPermits {
    fn valid_for(&self) -> Option<Duration> {
        redisson_locks::FairPermits::valid_for(self)
    }
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.lease_lost()
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        redisson_locks::FairPermits::release(self)
    }
}

impl Held for redisson_locks::Leadership {
    fn valid_for(&self) -> Option<Duration> {
        redisson_locks::Leadership::valid_for(self)
    }
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        redisson_locks::Leadership::lost(self)
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        self.resign()
    }
}
