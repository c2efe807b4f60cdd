//! The handles, ids and waiting futures go anywhere (compile-time checks).

use super::*;

fn send_sync<T: Send + Sync>(_: &T) {}
fn send<T: Send>(_: &T) {}

/// The handles and ids go anywhere, and so do the futures of their waiting
/// methods (compile-time only: never called).
#[allow(dead_code)]
fn handles_and_futures_are_send(
    sem: RSemaphore,
    pes: RPermitExpirableSemaphore,
    latch: RCountDownLatch,
    permit: Permit,
    id: PermitId,
    fair: RFairSemaphore,
    fair_permits: FairPermits,
) {
    send_sync(&fair);
    send_sync(&fair_permits);
    send(&fair.acquire(1));
    send(&fair.try_acquire(1, std::time::Duration::ZERO));
    send(&fair_permits.release());
    send_sync(&sem);
    send_sync(&pes);
    send_sync(&latch);
    send_sync(&id);
    send(&sem.acquire_many(2));
    send(&sem.try_acquire_wait(std::time::Duration::ZERO));
    send(&pes.acquire(std::time::Duration::ZERO));
    send(&pes.release(&id));
    send(&pes.acquire_renewed());
    send_sync(&permit);
    send(&pes.try_acquire_renewed(std::time::Duration::ZERO));
    send(&latch.wait());
    send(&latch.wait_timeout(std::time::Duration::ZERO));
}
