//! The synchronizers beside the locks, on Redisson's layout: the semaphore
//! (`RSemaphore`), the permit-expirable semaphore (`RPermitExpirableSemaphore`)
//! and the count-down latch (`RCountDownLatch`).
//!
//! Each is a thin handle over its scripts; they share one wait loop
//! (`waiting.rs`) on the client's subscriber, and one rule for acquires that a
//! dropped future must not lose (`undo_if_dropped`).

mod latch;
mod permit_expirable;
mod semaphore;
mod waiting;

pub use latch::RCountDownLatch;
pub use permit_expirable::{PermitId, RPermitExpirableSemaphore};
pub use semaphore::RSemaphore;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use crate::cleanup::OnDrop;
use crate::conn::Conn;
use crate::contract::BoxFuture;
use crate::error::{Error, Result};

/// The most permits one call may move: Redisson counts them in a Java `int`.
const MAX_PERMITS: u32 = i32::MAX as u32;

/// Checks a number of permits before any I/O.
fn check_permits(permits: u32) -> Result<()> {
    if permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "{permits} permits exceed the maximum of {MAX_PERMITS} (Redisson counts permits in a Java int)"
        )));
    }
    Ok(())
}

/// Sends `call`, an acquire that takes something from the server, so that what
/// it takes is never lost: if the caller's future is dropped before the reply,
/// the call is finished from the client's thread, and `undo` gives back what it
/// took. `Ok(None)` from `call` took nothing.
///
/// # Cancel safety
/// That is its purpose: dropped at any point, nothing taken stays taken.
async fn undo_if_dropped<T, U, UF>(
    conn: &Conn,
    call: BoxFuture<Result<Option<T>>>,
    undo: U,
) -> Result<Option<T>>
where
    T: Send + 'static,
    U: FnOnce(T) -> UF + Send + 'static,
    UF: Future<Output = ()> + Send + 'static,
{
    // The call in flight, shared with the undo: whoever holds it last finishes it.
    let in_flight = Arc::new(Mutex::new(Some(call)));
    let mut guard = {
        let in_flight = in_flight.clone();
        OnDrop::armed(conn, async move {
            let call = in_flight.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(call) = call {
                if let Ok(Some(taken)) = call.await {
                    undo(taken).await;
                }
            }
        })
    };
    let outcome = std::future::poll_fn(|cx| {
        let mut slot = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let Some(call) = slot.as_mut() else {
            return Poll::Ready(Err(Error::unexpected("acquire", "polled after completion")));
        };
        let outcome = std::task::ready!(call.as_mut().poll(cx));
        *slot = None;
        Poll::Ready(outcome)
    })
    .await;
    guard.disarm();
    outcome
}

#[cfg(test)]
mod tests {
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
        id: PermitId,
    ) {
        send_sync(&sem);
        send_sync(&pes);
        send_sync(&latch);
        send_sync(&id);
        send(&sem.acquire_many(2));
        send(&sem.try_acquire_wait(std::time::Duration::ZERO));
        send(&pes.acquire(std::time::Duration::ZERO));
        send(&pes.release(&id));
        send(&latch.wait());
        send(&latch.wait_timeout(std::time::Duration::ZERO));
    }
}
