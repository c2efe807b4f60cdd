//! The wake rules: which of a lock's waiters one message wakes, by what the
//! message says (an unlock, a read unlock, a number of permits) and what each
//! waiter waits for ([`Class`]). The subscriber (`pubsub.rs`) delivers each
//! message to the [`Wakeups`] of every lock on its channel.

use std::sync::Arc;

use tokio::sync::Notify;

/// The payload a lock release publishes to wake one waiter.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// The payload a write release publishes to wake every waiter.
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

/// What wakes one lock's waiters.
#[derive(Debug, Default)]
pub(crate) struct Wakeups {
    /// Waiters for exclusive holds (locks, write locks).
    pub(crate) exclusive: Notify,
    /// Waiters for shared holds (read locks).
    pub(crate) shared: Notify,
    /// Waiters for permits of a semaphore (see [`Class::Counted`]).
    pub(crate) counted: Notify,
    /// Waiters that every message concerns (see [`Class::All`]).
    pub(crate) all: Notify,
    /// The one waiter a message names (see [`Class::Addressed`]): its
    /// subscription's lock is its own id.
    pub(crate) addressed: Notify,
    /// Held by the one waiter that polls a lock whose holder set no expiry (no
    /// TTL bounds the sleep, and no unlock message may ever come): the others
    /// wait for a message or for their turn to poll, so the lock is polled once
    /// per client, not once per waiter.
    ///
    /// Made when first asked for: most locks' holders set an expiry, and a
    /// fair semaphore's waiter (a `Wakeups` each) never polls.
    pub(crate) poller: std::sync::OnceLock<Arc<tokio::sync::Mutex<()>>>,
    /// How many unlock messages (`"0"`) the channel carried so far: a waiter
    /// in its lock's order of clients counts releases by it, one `"0"` each
    /// whatever else a release publishes (a write release's `"1"` before
    /// it), and however its wake-ups were merged.
    pub(crate) unlocks: std::sync::atomic::AtomicU64,
}

impl Wakeups {
    /// Applies one message to this lock's waiters.
    pub(crate) fn deliver(&self, payload: Option<&str>, waiters: [usize; CLASSES]) {
        if payload == Some(UNLOCK_MESSAGE) {
            self.unlocks
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        // An addressed waiter is woken only by a message naming it (see
        // `pubsub.rs`), or by `wake_all`.
        let [exclusive, shared, counted, all, _addressed] = waiters;
        if counted > 0 {
            // A semaphore's message is the number of permits now available:
            // that many waiters can use them (Redisson wakes as many).
            match payload.and_then(|p| p.parse::<i64>().ok()) {
                Some(permits) => {
                    let wake = usize::try_from(permits.max(0)).unwrap_or(usize::MAX);
                    for _ in 0..wake.min(counted) {
                        self.counted.notify_one();
                    }
                }
                None => self.counted.notify_waiters(),
            }
        }
        if all > 0 {
            self.all.notify_waiters();
        }
        if exclusive + shared == 0 {
            // Only synchronizer waiters: no lock waiter to keep a wake-up for.
            return;
        }
        match payload {
            Some(UNLOCK_MESSAGE) if exclusive > 0 => self.exclusive.notify_one(),
            Some(UNLOCK_MESSAGE) => self.shared.notify_one(),
            Some(READ_UNLOCK_MESSAGE) => {
                if shared > 0 {
                    self.shared.notify_waiters();
                }
                if exclusive > 0 {
                    self.exclusive.notify_one();
                }
            }
            // Unknown payloads wake everyone: a needless retry costs one
            // round trip, a missed one a TTL.
            _ => self.wake_all(),
        }
    }

    /// Hands a wake-up of `class` that a waiter took and will not act on to
    /// another waiter (or keeps it for the next to listen): a message that
    /// wakes one waiter must reach one that tries.
    pub(crate) fn pass_on(&self, class: Class) {
        match class {
            Class::Exclusive => self.exclusive.notify_one(),
            Class::Shared => self.shared.notify_one(),
            Class::Counted => self.counted.notify_one(),
            // Every message wakes them all: nothing is kept for one. A
            // message to one waiter concerns nobody else.
            Class::All | Class::Addressed => {}
        }
    }

    pub(crate) fn wake_all(&self) {
        self.exclusive.notify_waiters();
        self.shared.notify_waiters();
        self.counted.notify_waiters();
        self.all.notify_waiters();
        // One waiter: a wake-up is kept for it until it listens.
        self.addressed.notify_one();
    }
}

/// What a waiter waits for: a message waking "one waiter" prefers an exclusive
/// waiter (it can use the whole lock); "wake all" (a write release) wakes every
/// shared waiter, since readers proceed together, but only one exclusive waiter,
/// since only one of those could win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Exclusive = 0,
    Shared = 1,
    /// A semaphore's waiter: a message carries how many permits are available,
    /// and wakes that many of these waiters (all of them when it is not a number).
    Counted = 2,
    /// A waiter every message concerns (a count-down latch's): each wakes all.
    All = 3,
    /// A waiter that only a message naming it concerns (a fair semaphore's:
    /// its client's waiters share one channel, and a message names the one
    /// it calls). Its subscription's lock is its own id, and a message whose
    /// payload is that id wakes it alone.
    Addressed = 4,
}

/// How many [`Class`]es there are.
pub(crate) const CLASSES: usize = 5;
