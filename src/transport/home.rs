//! Where the connection's driver lives: its *home* runtime.
//!
//! The `redis` crate runs each connection as a task (its driver) on the runtime
//! that created it; commands reach it over a channel. A driver on the caller's own
//! runtime answers with no thread hop, which is what keeps a lock + unlock at the
//! floor's speed. A driver on a runtime that ends, or that nobody drives, fails or
//! stalls every command. So:
//!
//! - A client connected from a multi-thread runtime makes that runtime its home
//!   and watches it: a small task there beats every [`BEAT`]. When the task is
//!   dropped (the runtime shut down) or its beat is older than [`STALL_LIMIT`]
//!   (every worker blocked), the home is *unhealthy*, and the next command moves
//!   the connection to the client's own thread (see `background.rs`) before it is
//!   sent. A moved connection never moves back.
//! - A current-thread runtime is driven only inside `block_on`, so it is never
//!   trusted as a home: such a client's connection lives on its own thread from
//!   the start.
//!
//! Every command is polled with a runtime entered (see `conn.rs`), so whatever
//! the driver spawns (a re-dial after a broken connection) and every timer it
//! sets (the response timeout, re-dial backoff) land there, never on the runtime
//! a caller happens to be on: the client's own runtime for the client's
//! background work (renewals, subscriptions, releases), which therefore never
//! waits on a timer of a home that ended or stalled; the home for callers'
//! commands, which is free when the caller is on the home (entering another
//! runtime for every command measured about 8 % slower).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::transport::background::Spawner;

/// How often a home runtime's watch task beats.
pub(crate) const BEAT: Duration = Duration::from_millis(100);

/// A home whose last beat is older than this is taken to be stalled.
pub(crate) const STALL_LIMIT: Duration = Duration::from_secs(1);

/// The runtime a connection's driver runs on.
#[derive(Debug, Clone)]
pub(crate) enum Home {
    /// The multi-thread runtime that connected the client, while it is healthy.
    Caller { handle: Handle, watch: Arc<Watch> },
    /// The client's own thread.
    Client(Handle),
}

impl Home {
    /// The runtime calling now, if it can be a home (a multi-thread runtime);
    /// otherwise the client's own thread.
    pub(crate) fn choose(spawner: &Spawner) -> Home {
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() != RuntimeFlavor::CurrentThread => {
                let watch = Watch::start(&handle);
                Home::Caller { handle, watch }
            }
            _ => Home::Client(spawner.handle().clone()),
        }
    }

    /// Can commands still be sent through a driver on this runtime?
    pub(crate) fn is_healthy(&self) -> bool {
        match self {
            Home::Caller { watch, .. } => watch.is_healthy(),
            Home::Client(_) => true,
        }
    }

    /// A command found this home's runtime ending (see `conn.rs`): it is no
    /// longer healthy, whatever its watch task says yet. The client's own
    /// thread never ends under a command.
    pub(crate) fn mark_gone(&self) {
        if let Home::Caller { watch, .. } = self {
            watch.gone.store(true, Ordering::Relaxed);
        }
    }

    /// The runtime to enter while polling a command.
    pub(crate) fn handle(&self) -> &Handle {
        match self {
            Home::Caller { handle, .. } | Home::Client(handle) => handle,
        }
    }

    /// Is this the runtime that connected the client (not the client's thread)?
    pub(crate) fn is_caller(&self) -> bool {
        matches!(self, Home::Caller { .. })
    }

    /// Is this the same home as `other` (not merely an equal one)?
    pub(crate) fn is(&self, other: &Home) -> bool {
        match (self, other) {
            (Home::Caller { watch: a, .. }, Home::Caller { watch: b, .. }) => Arc::ptr_eq(a, b),
            (Home::Client(_), Home::Client(_)) => true,
            _ => false,
        }
    }
}

/// The heartbeat of a home runtime.
#[derive(Debug)]
pub(crate) struct Watch {
    started: std::time::Instant,
    /// Milliseconds since `started` at the last beat.
    last_beat: AtomicU64,
    /// The watch task was dropped: its runtime is shutting down or gone.
    gone: AtomicBool,
}

impl Watch {
    /// Spawns the watch task on `handle`. It ends by itself once the client (the
    /// last holder of the returned `Arc`) is gone.
    fn start(handle: &Handle) -> Arc<Watch> {
        let watch = Arc::new(Watch {
            started: std::time::Instant::now(),
            last_beat: AtomicU64::new(0),
            gone: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&watch);
        handle.spawn(async move {
            let _gone = MarkGoneOnDrop(weak.clone());
            let mut beats = tokio::time::interval(BEAT);
            beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                beats.tick().await;
                match weak.upgrade() {
                    Some(watch) => watch.beat(),
                    None => return,
                }
            }
        });
        watch
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn beat(&self) {
        self.last_beat.store(self.now_ms(), Ordering::Relaxed);
    }

    fn is_healthy(&self) -> bool {
        if self.gone.load(Ordering::Relaxed) {
            return false;
        }
        let since = self
            .now_ms()
            .saturating_sub(self.last_beat.load(Ordering::Relaxed));
        Duration::from_millis(since) <= STALL_LIMIT
    }
}

/// Marks the watch gone when its task is dropped: the runtime is shutting down.
struct MarkGoneOnDrop(Weak<Watch>);

impl Drop for MarkGoneOnDrop {
    fn drop(&mut self) {
        if let Some(watch) = self.0.upgrade() {
            watch.gone.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_current_thread_runtime_is_never_a_home() {
        let background =
            crate::transport::background::Background::start(Duration::from_secs(1)).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let home = runtime.block_on(async { Home::choose(background.spawner()) });
        assert!(matches!(home, Home::Client(_)));
    }

    #[test]
    fn a_home_that_shuts_down_turns_unhealthy() {
        let background =
            crate::transport::background::Background::start(Duration::from_secs(1)).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let home = runtime.block_on(async {
            let home = Home::choose(background.spawner());
            tokio::time::sleep(BEAT * 2).await;
            home
        });
        assert!(matches!(home, Home::Caller { .. }));
        assert!(home.is_healthy());
        drop(runtime);
        assert!(!home.is_healthy());
    }
}
