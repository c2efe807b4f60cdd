//! A blocking API, for thread-based code ported from Java Redisson (the
//! `blocking` feature).
//!
//! The same locks, keys and guarantees as the async API, with methods that block
//! the calling thread instead of returning futures, and Redisson's owner rule:
//! **every OS thread is one owner**. A thread that takes a lock it holds
//! re-enters it (the hold count grows), other threads wait their turn, and
//! [`RLock::unlock`] releases a hold of the calling thread, as `RLock.unlock()`
//! does in Java.
//!
//! ```no_run
//! use redisson_locks::blocking::Client;
//! use redisson_locks::Config;
//!
//! # fn main() -> Result<(), redisson_locks::Error> {
//! // No tokio runtime needed: a plain `main`.
//! let client = Client::connect(Config::from_url("redis://127.0.0.1:6379")?)?;
//! let lock = client.get_lock("orders:42")?;
//!
//! let guard = lock.lock()?; // waits as long as it takes, renewed while held
//! let inner = lock.lock()?; // the same thread: re-enters
//! assert_eq!(lock.hold_count()?, 2);
//! inner.unlock()?;
//! guard.unlock()?; // or drop it: dropping releases too
//!
//! // Java style, without carrying a guard:
//! lock.lock()?.detach(); // lock.lock();
//! // ...
//! lock.unlock()?; // lock.unlock();
//! # Ok(()) }
//! ```
//!
//! # Where the work runs
//! Every call runs on the client's own background thread, the one that already
//! drives the client's renewals, unlock messages and releases; the calling
//! thread only waits for the result. So no runtime is created per call and none
//! is needed on the calling thread: [`Client::connect`] works from a plain
//! `main`, and a guard can be sent to and dropped on any thread.
//!
//! # From async code
//! A blocking call blocks its thread until it returns, as tokio's own blocking
//! APIs do. Made inside an async task it blocks that task's worker (on a
//! current-thread runtime, the whole runtime) while it waits. It never panics
//! for it, in a `LocalSet` neither: it does not use `block_in_place`, and when
//! the thread it blocks belongs to the runtime the client's connection lives
//! on, the connection moves to the client's own thread first, so the call is
//! still answered. Owners by thread also mean little to tasks, which share worker
//! threads and move between them. So from async code use the async API, or run
//! the blocking code in `tokio::task::spawn_blocking`. A call made on a client's
//! own thread (which could only wait on itself) is refused with
//! [`Error::InvalidArgument`].
//!
//! # Nothing to cancel
//! A blocking call cannot be interrupted (there is no `lockInterruptibly`): bound
//! a wait with [`RLock::try_lock_wait`] instead. Every wait is bounded as in the
//! async API, and a call runs to its end on the client's thread, so a hold it took
//! always reaches the caller as a guard.

mod client;
mod guard;
mod lock;

use std::future::Future;

pub use client::Client;
pub use guard::LockGuard;
pub use lock::{RFencedLock, RLock, RReadWriteLock};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::background::{on_client_thread, Spawner};

/// Thread owner ids start here. The async API's ids lie below (tasks from 1,
/// single acquisitions from 2^61, threads outside a task from 2^62), so a blocking
/// thread is never the same owner as anything else of its client; all stay within
/// Java's signed 64-bit `long`.
const THREAD_ID_BASE: u64 = 3 << 61;

/// The owner id of the calling thread (Java's `Thread.currentThread().getId()`):
/// the second half of the owner field (`<client-uuid>:<id>`) its holds are
/// written under. Assigned at a thread's first use, from the process-wide
/// thread numbers the async API uses too (in a range of its own), so no two
/// threads of a process ever share one.
///
/// ```
/// use redisson_locks::blocking::current_thread_id;
///
/// let mine = current_thread_id();
/// assert_eq!(mine, current_thread_id());
/// let other = std::thread::spawn(current_thread_id).join().unwrap();
/// assert_ne!(mine, other);
/// ```
pub fn current_thread_id() -> u64 {
    THREAD_ID_BASE + crate::engine::owner::thread_number()
}

/// Runs `work` (a call about lock `name`) on `client`'s own thread and blocks the
/// calling thread for its result.
fn run<T, F>(client: &Engine, name: &str, work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    client.conn.leave_home_if_blocking_it();
    run_on(client.conn.spawner(), name, work)
}

/// [`run`], on the client thread of `spawner`.
fn run_on<T, F>(spawner: &Spawner, name: &str, work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    if on_client_thread() {
        return Err(Error::invalid(format!(
            "a blocking call on lock {name:?} was made on a client's own thread, where it \
             would wait on itself; use the async API there"
        )));
    }
    spawner.block_on(work).unwrap_or_else(|| {
        Err(Error::unexpected(
            "a blocking call",
            "the client's thread ended before answering",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn thread_ids_are_per_thread_and_above_the_async_ranges() {
        let a = current_thread_id();
        assert_eq!(a, current_thread_id());
        assert!(a >= THREAD_ID_BASE);
        assert!(i64::try_from(a).is_ok(), "fits Java's long");
        let b = std::thread::spawn(current_thread_id).join().unwrap();
        assert_ne!(a, b);
        assert_ne!(a, crate::engine::owner::current_id());
    }

    #[test]
    fn the_clients_own_thread_is_refused() {
        let background =
            crate::transport::background::Background::start(Duration::from_secs(1)).unwrap();
        let spawner = background.spawner().clone();
        let (sent, answer) = std::sync::mpsc::channel();
        background.spawner().spawn(async move {
            // On the client's thread: refused at once instead of waiting on itself.
            let _ = sent.send(run_on(&spawner, "x", async { Ok(1) }));
        });
        let answer = answer.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(answer.unwrap_err().is_invalid_argument());
        // Anywhere else the work runs there and its result comes back.
        assert_eq!(
            run_on(background.spawner(), "x", async { Ok(2) }).unwrap(),
            2
        );
    }
}
