//! What this client's releases of each lock did lately, for its own waiters
//! to act on: written once per release (`release.rs`, after the kind's
//! script answered), read by the wait loop.
//!
//! - **A hand-off window.** Redis keeps no line for a non-fair lock, so
//!   whoever asks first after a release takes it: often the task that
//!   released it, asking again at once, before the waiter the release woke
//!   has even heard of it. After a release whose unlock message reached a
//!   subscriber (PUBLISH says how many received it: this client's waiters,
//!   or other clients'), this client's tasks that are not already waiting
//!   hold their first attempt back for at most [`HANDOFF_WINDOW`], sleeping
//!   behind the woken waiter, in the spirit of parking_lot's eventual
//!   fairness; the window closes early when one of this client's waiters
//!   takes the lock. Without touching the wire.
//! - **When this client last freed the lock, waking a waiter**: a waiter of
//!   this client woken after that is the one the hand-off is for, and skips
//!   the wake jitter meant to even out races between clients.
//! - **For a fair lock, whether this client's last release that named an heir
//!   granted it the lock or passed it over** (the lock went to a waiter of
//!   another client, first in Redis's line): while releases pass their heirs
//!   over, a new head listens at once instead of deferring its SUBSCRIBE
//!   (see `wait/in_redis.rs`).
//!
//! Apart from the lines (`line.rs`, who waits and in what order), so that a
//! release visits the line once, before its script, and records what came of
//! it here, after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// How long a release that woke a waiter keeps this client's newcomers from
/// barging: enough for the woken waiter, here or in another process, to hear
/// the message and send its attempt (a few round trips), short enough that a
/// waiter that never comes costs little.
pub(crate) const HANDOFF_WINDOW: Duration = Duration::from_millis(5);

/// The most times a waiter woken by another client's release yields before it
/// tries (see [`wake_jitter`]).
const WAKE_JITTER_YIELDS: u64 = 64;

/// A short random pause before a waiter woken by another client's release
/// tries: the message reached one waiter of every listening client in the
/// order they subscribed, so without it the same clients would win every race.
/// Yields rather than a timer: tokio's timers tick in milliseconds, far longer
/// than the spread to even out.
pub(crate) async fn wake_jitter() {
    let yields = uuid::Uuid::new_v4().as_u64_pair().0 % (WAKE_JITTER_YIELDS + 1);
    for _ in 0..yields {
        tokio::task::yield_now().await;
    }
}

/// How long what a release did stays news: a release's word on a fair lock
/// (granted or passed over) older than this is forgotten (the next head
/// defers then, at most 20 ms), and an entry with nothing fresher is swept.
const NEWS_FOR: Duration = Duration::from_secs(1);

/// How many parts the map is split in: every release of a contended lock
/// writes here, from whatever thread it finished on.
const SHARDS: usize = 32;

/// Entries a part keeps before stale ones are first swept; after a sweep,
/// the next comes when the part has doubled.
const SWEEP_AT: usize = 1024;

/// What this client's last releases of one lock did.
#[derive(Debug, Default, Clone, Copy)]
struct Record {
    /// Until when newcomers hold back (a release woke a waiter).
    window_until: Option<Instant>,
    /// When this client last freed the lock and woke a waiter.
    released_at: Option<Instant>,
    /// When this client's last fair release that named an heir passed it
    /// over; `None` when it granted the lock.
    passed_over_at: Option<Instant>,
    /// When a release of this client last woke waiters of other clients,
    /// whoever took the lock since: the lock is contended across clients
    /// lately.
    woke_others_at: Option<Instant>,
}

impl Record {
    /// Whether it still says something at `now`.
    fn is_news(&self, now: Instant) -> bool {
        let recent = |at: Option<Instant>| at.is_some_and(|at| now < at + NEWS_FOR);
        self.window_until.is_some_and(|until| until > now)
            || recent(self.released_at)
            || recent(self.passed_over_at)
            || recent(self.woke_others_at)
    }
}

#[derive(Debug, Default)]
struct Shard {
    records: HashMap<Arc<str>, Record>,
    sweep_at: usize,
}

/// Per lock name, what this client's releases did lately.
#[derive(Debug)]
pub(crate) struct Handoffs {
    shards: Box<[Mutex<Shard>]>,
}

impl Default for Handoffs {
    fn default() -> Self {
        Handoffs {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

/// What a release came to, as this record reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// A non-fair lock freed, and its message reached a waiter; `others`:
    /// it reached other clients' waiters.
    Woke { others: bool },
    /// A fair release that named an heir granted it the lock.
    Granted,
    /// A fair release that named an heir freed the lock for another.
    PassedOver,
}

impl Handoffs {
    fn shard(&self, lock: &str) -> MutexGuard<'_, Shard> {
        // FNV-1a: the shard only needs to spread names, not resist anyone.
        let hash = lock.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        let shard = &self.shards[(hash % SHARDS as u64) as usize];
        // Each critical section is one map update: poisoning leaves nothing half done.
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This client's release of `lock` came to `released`.
    pub(crate) fn released(&self, lock: &Arc<str>, released: Released) {
        let now = Instant::now();
        let mut shard = self.shard(lock);
        if shard.records.len() >= shard.sweep_at.max(SWEEP_AT) {
            shard.records.retain(|_, record| record.is_news(now));
            shard.sweep_at = (shard.records.len() * 2).max(SWEEP_AT);
        }
        let record = shard.records.entry(lock.clone()).or_default();
        match released {
            Released::Woke { others } => {
                if crate::engine::heuristics::heuristics().handoff_window {
                    record.window_until = Some(now + HANDOFF_WINDOW);
                }
                record.released_at = Some(now);
                if others {
                    record.woke_others_at = Some(now);
                }
            }
            Released::Granted => record.passed_over_at = None,
            Released::PassedOver => record.passed_over_at = Some(now),
        }
    }

    /// One of this client's tasks took `lock`: the hand-off is done.
    pub(crate) fn taken(&self, lock: &str) {
        let mut shard = self.shard(lock);
        if let Some(record) = shard.records.get_mut(lock) {
            record.window_until = None;
            record.released_at = None;
            if record.passed_over_at.is_none() && record.woke_others_at.is_none() {
                shard.records.remove(lock);
            }
        }
    }

    /// Until when a newcomer to `lock` holds back, if a hand-off is under way.
    pub(crate) fn hold_back_until(&self, lock: &str) -> Option<Instant> {
        let until = self.shard(lock).records.get(lock)?.window_until?;
        (until > Instant::now()).then_some(until)
    }

    /// Did this client free `lock` (waking a waiter) since `since`? A waiter
    /// woken then is the one its own client's hand-off is for.
    pub(crate) fn released_since(&self, lock: &str, since: Instant) -> bool {
        self.shard(lock)
            .records
            .get(lock)
            .and_then(|record| record.released_at)
            .is_some_and(|at| at >= since)
    }

    /// Did a release of `lock` by this client wake other clients' waiters
    /// in the last [`NEWS_FOR`]? Then the lock is contended across
    /// clients, and its reentrant or write waiters keep an order of clients, which a
    /// turn may hold the lock for.
    pub(crate) fn woke_others_lately(&self, lock: &str) -> bool {
        self.shard(lock)
            .records
            .get(lock)
            .and_then(|record| record.woke_others_at)
            .is_some_and(|at| Instant::now() < at + NEWS_FOR)
    }

    /// Whether this client's releases of the fair lock `lock` lately granted
    /// it to their heirs (none passed one over in the last [`NEWS_FOR`]).
    pub(crate) fn grants(&self, lock: &str) -> bool {
        self.shard(lock)
            .records
            .get(lock)
            .and_then(|record| record.passed_over_at)
            .is_none_or(|at| Instant::now() >= at + NEWS_FOR)
    }

    /// How many locks have a record (for the tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .records
                    .len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hand_off_holds_newcomers_back_until_taken_or_expired() {
        let handoffs = Handoffs::default();
        let lock: Arc<str> = "l".into();
        assert!(handoffs.hold_back_until("l").is_none());
        handoffs.released(&lock, Released::Woke { others: false });
        assert!(handoffs.hold_back_until("l").is_some());
        assert!(handoffs.released_since("l", Instant::now() - Duration::from_secs(1)));
        handoffs.taken("l");
        assert!(handoffs.hold_back_until("l").is_none());
        assert_eq!(handoffs.len(), 0, "nothing kept for a lock taken");
        handoffs.released(&lock, Released::Woke { others: false });
        tokio::time::sleep(HANDOFF_WINDOW + Duration::from_millis(5)).await;
        assert!(handoffs.hold_back_until("l").is_none());
    }

    #[test]
    fn a_release_heard_by_other_clients_marks_the_lock_contended_across_them() {
        let handoffs = Handoffs::default();
        let lock: Arc<str> = "o".into();
        handoffs.released(&lock, Released::Woke { others: false });
        assert!(!handoffs.woke_others_lately("o"));
        handoffs.released(&lock, Released::Woke { others: true });
        assert!(handoffs.woke_others_lately("o"));
        handoffs.taken("o");
        assert!(handoffs.woke_others_lately("o"), "whoever took it since");
    }

    #[test]
    fn a_fair_release_that_passed_its_heir_over_is_news_for_a_while() {
        let handoffs = Handoffs::default();
        let lock: Arc<str> = "f".into();
        assert!(handoffs.grants("f"), "nothing known: grants");
        handoffs.released(&lock, Released::PassedOver);
        assert!(!handoffs.grants("f"));
        handoffs.released(&lock, Released::Granted);
        assert!(handoffs.grants("f"));
    }
}
