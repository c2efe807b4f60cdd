//! The client's own runtime: one thread per client that drives everything the
//! client does in the background, so that none of it depends on the runtime that
//! happened to call [`Client::connect`](crate::Client::connect).
//!
//! What runs here: the connection's driver (and every re-dial, whoever's command
//! noticed the break), the subscriber, the watchdog, and the cleanup work of
//! dropped guards and cancelled attempts (releases, leaving a fair queue, settling
//! an attempt of unknown outcome). A caller's runtime only awaits replies, so it can
//! end, stall or be a different runtime every call without a hold going unrenewed
//! or a release going unsent.
//!
//! The connection's driver itself may live on the runtime that connected the client
//! while that runtime is healthy, for speed; `home.rs` decides, and moves it here
//! when that runtime ends or stalls.
//!
//! When the client ends (its last handle, lock and guard gone), the thread
//! finishes the cleanup work already queued, for at most the drain limit, and
//! ends. [`Background::close`] awaits that. A drop never blocks where blocking is
//! forbidden or harmful: inside a runtime (a `LocalSet`, a current-thread runtime,
//! a worker) it hands the wait to that runtime's blocking pool, which a shutting
//! down runtime waits for, so the end of `#[tokio::main]` still lets the queued
//! releases go out (a pool already shutting down refuses the job, and the drop
//! then waits where it is); on a plain thread it waits there.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{oneshot, Notify};

use crate::error::{Error, Result};

thread_local! {
    /// Set on every client's own thread.
    static ON_CLIENT_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Is the calling thread a client's own thread (its background work)?
pub(crate) fn on_client_thread() -> bool {
    ON_CLIENT_THREAD.with(std::cell::Cell::get)
}

/// The background thread and its runtime, owned by the client.
#[derive(Debug)]
pub(crate) struct Background {
    spawner: Spawner,
    /// Dropping it (or sending) tells the thread to drain and end.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Sent as the thread's very last act: its runtime (and all left on it) gone.
    ended: Option<oneshot::Receiver<()>>,
}

/// A cheap handle for putting work on the background runtime.
#[derive(Debug, Clone)]
pub(crate) struct Spawner {
    handle: Handle,
    cleanup: Arc<Outstanding>,
}

/// Cleanup jobs not finished yet, so the thread can wait for them at shutdown.
#[derive(Debug, Default)]
struct Outstanding {
    count: AtomicUsize,
    idle: Notify,
}

impl Background {
    /// Starts the thread. `drain_limit` bounds how long it keeps sending queued
    /// cleanup work once the client is dropped.
    pub(crate) fn start(drain_limit: Duration) -> Result<Background> {
        let cleanup = Arc::new(Outstanding::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let (started, handle) = std::sync::mpsc::channel();
        let (end, ended) = oneshot::channel::<()>();
        let drained = cleanup.clone();
        // The runtime is built, run and dropped on its own thread: never inside
        // the caller's async context, where dropping a runtime panics.
        let thread = std::thread::Builder::new()
            .name("redisson-locks".into())
            .spawn(move || {
                ON_CLIENT_THREAD.with(|on| on.set(true));
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = started.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = started.send(Ok(runtime.handle().clone()));
                runtime.block_on(async move {
                    // Sent or dropped: the client is gone either way.
                    let _ = stopped.await;
                    let _ = tokio::time::timeout(drain_limit, drained.until_idle()).await;
                });
                // Dropping the runtime cancels what is left: the watchdog, the
                // subscriber, the connection's driver.
                drop(runtime);
                let _ = end.send(());
            })
            .map_err(|e| Error::unexpected("start the client's thread", e))?;
        let handle = match handle.recv() {
            Ok(Ok(handle)) => handle,
            Ok(Err(e)) => return Err(Error::unexpected("start the client's runtime", e)),
            Err(e) => return Err(Error::unexpected("start the client's runtime", e)),
        };
        Ok(Background {
            spawner: Spawner { handle, cleanup },
            stop: Some(stop),
            thread: Some(thread),
            ended: Some(ended),
        })
    }

    /// Tells the thread to finish its queued cleanup (at most the drain limit)
    /// and end, and waits for that without blocking the caller's thread.
    pub(crate) async fn close(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(ended) = self.ended.take() {
            // An error means the thread ended without sending: it panicked, and
            // `thread` reports it below.
            let _ = ended.await;
        }
        if let Some(thread) = self.thread.take() {
            if thread.is_finished() {
                join_reporting(thread);
            }
        }
    }

    pub(crate) fn spawner(&self) -> &Spawner {
        &self.spawner
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Waiting on itself would never end; the thread then finishes alone.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        match Handle::try_current() {
            // Blocking here may be forbidden (a `LocalSet`) or would stall the
            // runtime: its blocking pool waits instead, and a runtime that shuts
            // down waits for its blocking pool. A pool that has begun to shut
            // down (this client dropped with a task as a multi-thread runtime
            // ends) drops the job unrun, and with it the guard, which then waits
            // here: blocking while the runtime ends anyway, so that the queued
            // releases still go out.
            Ok(runtime) => {
                let join = JoinOnDrop(Some(thread));
                drop(runtime.spawn_blocking(move || drop(join)));
            }
            Err(_) => join_reporting(thread),
        }
    }
}

/// Waits for the client's thread when dropped, wherever that is.
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            join_reporting(thread);
        }
    }
}

/// Waits for the client's thread to end, and says so if it panicked.
fn join_reporting(thread: std::thread::JoinHandle<()>) {
    if thread.join().is_err() {
        crate::trace::warn_event!(
            "the client's background thread panicked; queued releases may not have been sent \
             (those holds end with their leases)"
        );
    }
}

impl Spawner {
    /// Runs `work` on the background runtime, detached.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.handle.spawn(work);
    }

    /// Runs cleanup `work` on the background runtime; a dropped client waits for
    /// it (up to the drain limit) before its thread ends.
    pub(crate) fn spawn_cleanup(&self, work: impl Future<Output = ()> + Send + 'static) {
        let counted = Counted::new(self.cleanup.clone());
        self.handle.spawn(async move {
            let _counted = counted;
            work.await;
        });
    }

    /// Runs `work` on the background runtime and waits for its result from
    /// wherever the caller is. Dropping the returned future does not cancel it.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        let counted = Counted::new(self.cleanup.clone());
        self.handle
            .spawn(async move {
                let _counted = counted;
                work.await
            })
            .await
            .map_err(|e| Error::unexpected("background work", e))
    }

    /// Runs `work` on the background runtime and blocks the calling thread until
    /// it ends: the way in of the blocking API (`blocking/`). `None` when it never
    /// ended: the runtime shut down under it, or it panicked.
    ///
    /// It blocks plainly, never through `block_in_place` (which tokio forbids in
    /// a `LocalSet` and on a current-thread runtime, and which cannot be asked
    /// whether it is allowed): the caller first moves the connection off a home
    /// runtime it may be blocking (`Conn::leave_home_if_blocking_it`), so
    /// nothing `work` needs runs on the blocked thread.
    ///
    /// Not for a client's own thread, which would wait on itself for ever: the
    /// caller checks [`on_client_thread`] first. Not counted as cleanup: the
    /// caller keeps the client alive while it waits, and `work` (with every
    /// handle it captured) is dropped before its result is sent, so the caller
    /// holds the last handles and a client dropped afterwards is dropped there,
    /// waiting for its queued releases as usual.
    #[cfg(feature = "blocking")]
    pub(crate) fn block_on<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        debug_assert!(!on_client_thread(), "a client's thread waiting on itself");
        let (done, result) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let output = work.await;
            // Fails only when the caller is gone, which it cannot be while it
            // waits below; the output (a guard, say) is then dropped here, which
            // is what dropping it anywhere does.
            let _ = done.send(output);
        });
        result.recv().ok()
    }

    /// Waits until no cleanup work is queued or running.
    pub(crate) async fn until_idle(&self) {
        self.cleanup.until_idle().await;
    }

    /// Is cleanup work queued or running?
    pub(crate) fn has_cleanup(&self) -> bool {
        self.cleanup.count.load(Ordering::SeqCst) > 0
    }

    /// The background runtime.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// `future`, polled with the runtime of `handle` as the current one: anything it
/// spawns or registers (tasks, sockets, timers) belongs to that runtime.
pub(crate) fn entered<F: Future>(handle: Handle, future: F) -> Entered<F> {
    Entered {
        handle,
        future: Box::pin(future),
    }
}

impl Outstanding {
    async fn until_idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// One outstanding cleanup job; counted from creation to drop (completed or
/// cancelled alike).
struct Counted(Arc<Outstanding>);

impl Counted {
    fn new(outstanding: Arc<Outstanding>) -> Self {
        outstanding.count.fetch_add(1, Ordering::SeqCst);
        Counted(outstanding)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A future polled with a given runtime entered (see [`entered`]).
pub(crate) struct Entered<F> {
    handle: Handle,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.handle.enter();
        this.future.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_outlives_the_runtime_that_queued_it() {
        let background = Background::start(Duration::from_secs(1)).unwrap();
        let spawner = background.spawner().clone();
        let (done, finished) = std::sync::mpsc::channel();
        {
            let caller = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            caller.block_on(async {
                spawner.spawn_cleanup(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = done.send(());
                });
            });
        }
        // The caller's runtime is gone; the work still completes.
        assert!(finished.recv_timeout(Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn a_client_dropped_as_its_runtime_ends_still_sends_its_cleanup() {
        for multi_thread in [true, false] {
            let mut builder = if multi_thread {
                tokio::runtime::Builder::new_multi_thread()
            } else {
                tokio::runtime::Builder::new_current_thread()
            };
            let runtime = builder.enable_all().build().unwrap();
            let background = Background::start(Duration::from_secs(5)).unwrap();
            let (done, finished) = std::sync::mpsc::channel();
            background.spawner().spawn_cleanup(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = done.send(());
            });
            // A task that still holds the client when the runtime ends: it is
            // dropped during the runtime's shutdown.
            runtime.spawn(async move {
                let _background = background;
                std::future::pending::<()>().await;
            });
            drop(runtime);
            assert!(
                finished.try_recv().is_ok(),
                "the runtime ended before the cleanup ran (multi-thread: {multi_thread})"
            );
        }
    }

    #[test]
    fn drop_waits_for_queued_cleanup() {
        let background = Background::start(Duration::from_secs(5)).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        background.spawner().spawn_cleanup(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = done.send(());
        });
        drop(background);
        assert!(
            finished.try_recv().is_ok(),
            "drop returned before the cleanup ran"
        );
    }
}
