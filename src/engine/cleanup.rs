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

use crate::transport::conn::Conn;

type Work = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Cleanup to run unless disarmed.
pub(crate) struct OnDrop {
    /// Behind a mutex only so that a guard can sit in state that is shared by
    /// reference across awaits (the work itself is `Send`, not `Sync`): every
    /// access is through `&mut self` (`get_mut`), which never locks.
    armed: std::sync::Mutex<Option<(Conn, Work)>>,
}

impl OnDrop {
    /// Armed with `work` (not started: futures are lazy), queued on `conn`'s
    /// client thread if dropped armed.
    pub(crate) fn armed(conn: &Conn, work: impl Future<Output = ()> + Send + 'static) -> Self {
        OnDrop {
            armed: std::sync::Mutex::new(Some((conn.clone(), Box::pin(work)))),
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
        if let Some((_, work)) = self.work() {
            work.as_mut().await;
        }
        *self.work() = None;
    }

    fn work(&mut self) -> &mut Option<(Conn, Work)> {
        // Poisoned only by a panic while it was borrowed, which leaves nothing
        // half done.
        self.armed.get_mut().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some((conn, work)) = self.work().take() {
            conn.spawn_cleanup(work);
        }
    }
}
