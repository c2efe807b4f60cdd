//! The one undo-on-drop guard: cleanup a dropped future would otherwise skip.
//!
//! A lock call can be dropped at any await point; whatever it holds at that
//! moment (a hold not yet confirmed by replicas, a place in a fair queue) must
//! still be given back. [`OnDrop`] carries that work: disarmed when the call
//! succeeds, run inline on an ordinary way out, and queued on the client's own
//! thread (`Conn::spawn_cleanup`) when dropped while armed, so it runs whatever
//! becomes of the caller's runtime.

use std::future::Future;
use std::pin::Pin;

use crate::error::Result;
use crate::transport::conn::Conn;

type Work = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The work, or what makes it when it runs.
enum Undo {
    Made(Work),
    /// Made only if it runs: a guard armed for a long wait (a parked fair
    /// waiter's place) keeps its few captures boxed, not a whole future.
    Later(Box<dyn FnOnce(&Conn) -> Work + Send + 'static>),
}

impl Undo {
    fn made(self, conn: &Conn) -> Work {
        match self {
            Undo::Made(work) => work,
            Undo::Later(make) => make(conn),
        }
    }
}

/// Cleanup to run unless disarmed.
pub(crate) struct OnDrop {
    /// Behind a mutex only so that a guard can sit in state that is shared by
    /// reference across awaits (the work itself is `Send`, not `Sync`): every
    /// access is through `&mut self` (`get_mut`), which never locks.
    armed: std::sync::Mutex<Option<(Conn, Undo)>>,
}

impl OnDrop {
    /// Armed with `work` (not started: futures are lazy), queued on `conn`'s
    /// client thread if dropped armed.
    pub(crate) fn armed(conn: &Conn, work: impl Future<Output = ()> + Send + 'static) -> Self {
        OnDrop {
            armed: std::sync::Mutex::new(Some((conn.clone(), Undo::Made(Box::pin(work))))),
        }
    }

    /// Armed with the work `make` makes, on `conn`, when it runs: for a guard
    /// kept armed across a long wait, whose work is seldom run.
    pub(crate) fn armed_lazily<F>(
        conn: &Conn,
        make: impl FnOnce(&Conn) -> F + Send + 'static,
    ) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let make = Box::new(move |conn: &Conn| -> Work { Box::pin(make(conn)) });
        OnDrop {
            armed: std::sync::Mutex::new(Some((conn.clone(), Undo::Later(make)))),
        }
    }

    /// Nothing to clean up.
    pub(crate) fn disarmed() -> Self {
        OnDrop {
            armed: std::sync::Mutex::new(None),
        }
    }

    /// The work is no longer needed (the call succeeded, or did it itself).
    pub(crate) fn disarm(&mut self) {
        *self.work() = None;
    }

    /// Runs the work now, on the caller's task, and disarms once it is done.
    /// Polled in place: if this future is dropped half way, the work is still
    /// armed, and the drop finishes it from the client's thread.
    pub(crate) async fn run_now(&mut self) {
        if let Some((conn, undo)) = self.work().take() {
            let work = undo.made(&conn);
            let armed = self.work().insert((conn, Undo::Made(work)));
            if let (_, Undo::Made(work)) = armed {
                work.as_mut().await;
            }
        }
        *self.work() = None;
    }

    fn work(&mut self) -> &mut Option<(Conn, Undo)> {
        // Poisoned only by a panic while it was borrowed, which leaves nothing
        // half done.
        self.armed.get_mut().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some((conn, undo)) = self.work().take() {
            let work = undo.made(&conn);
            conn.spawn_cleanup(work);
        }
    }
}

/// What to do with a command's outcome when the caller who sent it is gone:
/// given the outcome and what the caller would have got back.
pub(crate) type Orphaned<T, K> =
    Box<dyn FnOnce(Result<T>, K) -> crate::engine::contract::BoxFuture<()> + Send>;

/// A command on its way to the server, with something kept beside it (an
/// owner's gate, an undo): completes with the command's outcome and what was
/// kept. Dropped while the command is in flight, it is finished in a task of
/// its own on the client's thread, and its outcome and what was kept go to
/// `orphaned` (which settles them), since nobody is left to receive them. The
/// one "finish the command in flight, then settle" of locks and synchronizers.
pub(crate) struct FinishOnDrop<T: Send + 'static, K: Send + 'static> {
    command: Option<crate::engine::contract::BoxFuture<Result<T>>>,
    kept: Option<K>,
    orphaned: Option<Orphaned<T, K>>,
    conn: Conn,
}

impl<T: Send + 'static, K: Send + 'static> FinishOnDrop<T, K> {
    pub(crate) fn new(
        conn: &Conn,
        command: crate::engine::contract::BoxFuture<Result<T>>,
        kept: K,
        orphaned: Orphaned<T, K>,
    ) -> Self {
        FinishOnDrop {
            command: Some(command),
            kept: Some(kept),
            orphaned: Some(orphaned),
            conn: conn.clone(),
        }
    }
}

// Nothing in it is pinned in place: the command is boxed, and what is kept is
// only ever moved out whole.
impl<T: Send + 'static, K: Send + 'static> Unpin for FinishOnDrop<T, K> {}

impl<T: Send + 'static, K: Send + 'static> Future for FinishOnDrop<T, K> {
    type Output = (Result<T>, K);

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        let (Some(command), Some(_)) = (this.command.as_mut(), this.kept.as_ref()) else {
            // Polled after completion: a bug in the caller; nothing to return.
            return std::task::Poll::Pending;
        };
        let outcome = std::task::ready!(command.as_mut().poll(cx));
        this.command = None;
        match this.kept.take() {
            Some(kept) => std::task::Poll::Ready((outcome, kept)),
            None => std::task::Poll::Pending,
        }
    }
}

impl<T: Send + 'static, K: Send + 'static> Drop for FinishOnDrop<T, K> {
    fn drop(&mut self) {
        let pending = (self.command.take(), self.kept.take(), self.orphaned.take());
        if let (Some(command), Some(kept), Some(orphaned)) = pending {
            self.conn.spawn_cleanup(async move {
                let outcome = command.await;
                orphaned(outcome, kept).await;
            });
        }
    }
}
