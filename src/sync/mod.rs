//! The synchronizers beside the locks, on Redisson's layout: the semaphore
//! (`RSemaphore`), the permit-expirable semaphore (`RPermitExpirableSemaphore`)
//! and the count-down latch (`RCountDownLatch`); and one Redisson lacks, the
//! fair semaphore (`RFairSemaphore`).
//!
//! Each is a thin handle over its scripts; they wait in the locks' wait loop
//! (`waiting.rs` hands it their attempts), on the client's subscriber, and
//! share one rule for acquires that a dropped future or a lost reply must not
//! lose (`settled_acquire`).

mod fair_semaphore;
#[cfg(test)]
mod handles_are_send;
mod latch;
mod permit_expirable;
mod semaphore;
mod settle;
mod waiting;

pub use fair_semaphore::{FairPermits, RFairSemaphore};
pub use latch::RCountDownLatch;
pub use permit_expirable::{Permit, PermitId, RPermitExpirableSemaphore};
pub use semaphore::RSemaphore;
