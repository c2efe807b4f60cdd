//! The fair semaphore's local line: what one client knows about its waiters
//! for each fair semaphore, so that only one of them acts while the others
//! sleep, sending nothing.
//!
//! Every waiter has its own entry in Redis's line (fairness across clients
//! is Redis's), but its client keeps the places: one attempt by any of its
//! waiters moves the client's deadline ahead (`lua/fsem_common.lua`). So
//! only the earliest waiter here, the line's head, re-checks (every
//! `recheck_interval` at most, and only when no other waiter of this client
//! sent an attempt meanwhile); the others sleep until a message names them
//! (the server's call when they are first and their permits are free), a
//! release of this client grants them permits ([`FairLines::grant`]), or
//! their places may be lost ([`FairLines::busy`] sees a new epoch, or a
//! release's grants are unknown, or a keep found them gone): then they try.
//!
//! ```text
//! seat ─▶ attempt (joins Redis's line) ─▶ sleeps ─┬─ message naming it ─▶ attempt
//!                                                  ├─ grant ─▶ holds (no command)
//!                                                  ├─ places lost ─▶ attempt
//!                                                  └─ head: re-check due ─▶ attempt
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One client's fair-semaphore lines, by semaphore name.
#[derive(Debug, Default)]
pub(crate) struct FairLines {
    lines: Mutex<HashMap<Arc<str>, Line>>,
}

/// One semaphore's line in this client.
#[derive(Debug, Default)]
struct Line {
    /// The waiters, in arrival order: the first is the head.
    seats: VecDeque<Arc<Seat>>,
    /// The epoch of this client's places in Redis's line, as last answered.
    epoch: Option<Arc<str>>,
    /// When the last attempt by any of its waiters was sent: each calls the
    /// first in line.
    last_attempt: Option<Instant>,
    /// When the last send that moved the client's deadline ahead went out
    /// (a busy attempt, a keep; not one that took: its waiter left).
    last_sent: Option<Instant>,
}

/// One waiter's seat in its client's line.
#[derive(Debug)]
pub(crate) struct Seat {
    /// Its id, `<client>:<uuid>`: its place in Redis's line and the id of
    /// the hold it takes.
    pub(crate) id: Arc<str>,
    state: Mutex<SeatState>,
    /// Told of a grant, of a reason to try, and of becoming the head.
    told: Notify,
}

#[derive(Debug, Default)]
struct SeatState {
    /// A release of this client granted it permits; sent then.
    granted: Option<Instant>,
    /// Its place may be lost, or a grant to it unknown: it tries.
    try_again: bool,
    /// The epoch it joined under.
    epoch: Option<Arc<str>>,
}

impl Seat {
    fn state(&self) -> MutexGuard<'_, SeatState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn tell_to_try(&self) {
        self.state().try_again = true;
        self.told.notify_one();
    }
}

/// A waiter's seat, taken out of its line when dropped (the next is head).
#[derive(Debug)]
pub(crate) struct SeatGuard {
    lines: Arc<FairLines>,
    name: Arc<str>,
    seat: Arc<Seat>,
}

impl FairLines {
    fn map(&self) -> MutexGuard<'_, HashMap<Arc<str>, Line>> {
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Seats waiter `id` at the back of this client's line for `name`.
    pub(crate) fn seat(self: &Arc<Self>, name: &Arc<str>, id: Arc<str>) -> SeatGuard {
        let seat = Arc::new(Seat {
            id,
            state: Mutex::default(),
            told: Notify::new(),
        });
        self.map()
            .entry(name.clone())
            .or_default()
            .seats
            .push_back(seat.clone());
        SeatGuard {
            lines: self.clone(),
            name: name.clone(),
            seat,
        }
    }

    /// An attempt for `name` is sent at `at`: it calls the first in line
    /// (the head's re-check is due a re-check interval after the last).
    pub(crate) fn attempted(&self, name: &str, at: Instant) {
        if let Some(line) = self.map().get_mut(name) {
            line.last_attempt = Some(line.last_attempt.map_or(at, |last| last.max(at)));
        }
    }

    /// A reply to a send of `at` (a busy attempt, a keep) moved the client's
    /// deadline for `name` ahead (the head's keep is due a third of the
    /// window after the last).
    pub(crate) fn kept(&self, name: &str, at: Instant) {
        if let Some(line) = self.map().get_mut(name) {
            line.last_sent = Some(line.last_sent.map_or(at, |last| last.max(at)));
        }
    }

    /// A busy attempt of `seat` answered `epoch`, the epoch of this client's
    /// places: when it is not the one its other waiters joined under, their
    /// places were lost (the client's deadline passed, the keys went, a
    /// failover lost them), and each tries, to join again.
    pub(crate) fn busy(&self, name: &str, seat: &SeatGuard, epoch: Option<&str>) {
        let Some(epoch) = epoch else {
            return;
        };
        let mut map = self.map();
        let Some(line) = map.get_mut(name) else {
            return;
        };
        seat.seat.state().epoch = Some(Arc::from(epoch));
        if line.epoch.as_deref() == Some(epoch) {
            return;
        }
        let current: Arc<str> = Arc::from(epoch);
        line.epoch = Some(current.clone());
        for other in &line.seats {
            let stale = other
                .state()
                .epoch
                .as_ref()
                .is_some_and(|joined| *joined != current);
            if stale {
                other.tell_to_try();
            }
        }
    }

    /// A release of this client, sent at `sent`, granted `name`'s permits to
    /// its waiter `id`: handed over in process. `false` when that waiter left
    /// meanwhile: holding it (its own attempt found the grant), or giving it
    /// back with its leave, sent after it left this line.
    pub(crate) fn grant(&self, name: &str, id: &str, sent: Instant) -> bool {
        let map = self.map();
        let seat = map
            .get(name)
            .and_then(|line| line.seats.iter().find(|seat| &*seat.id == id));
        match seat {
            Some(seat) => {
                seat.state().granted = Some(sent);
                seat.told.notify_one();
                true
            }
            None => false,
        }
    }

    /// Every waiter of this client for `name` tries: a release of its may
    /// have granted permits that nobody heard of (its reply was lost), and
    /// one granted finds its grant; or a keep found the client's places
    /// lost, and each joins again.
    pub(crate) fn tell_all_to_try(&self, name: &str) {
        if let Some(line) = self.map().get(name) {
            line.seats.iter().for_each(|seat| seat.tell_to_try());
        }
    }

    /// How many waiters this client has for `name`.
    #[cfg(test)]
    pub(crate) fn waiting(&self, name: &str) -> usize {
        self.map().get(name).map_or(0, |line| line.seats.len())
    }
}

impl SeatGuard {
    /// Armed before an attempt: a grant or word to try made after it wakes
    /// the waiter (a permit is kept for it until it listens).
    pub(crate) fn told(&self) -> Notified<'_> {
        self.seat.told.notified()
    }

    /// The grant a release of this client made to it, if any: sent then.
    pub(crate) fn take_grant(&self) -> Option<Instant> {
        self.seat.state().granted.take()
    }

    /// Whether it was told to try (see [`FairLines::busy`],
    /// [`FairLines::tell_all_to_try`]); the word is used up.
    pub(crate) fn take_try_again(&self) -> bool {
        std::mem::take(&mut self.seat.state().try_again)
    }

    /// As the first of its client's waiters, when it must act if nothing
    /// wakes it first (read at once, under one lock); `None` for the others,
    /// which only a word wakes.
    pub(crate) fn head_dues(&self, recheck: Duration, keep: Duration) -> Option<HeadDues> {
        let map = self.lines.map();
        let line = map.get(&self.name)?;
        let head = line
            .seats
            .front()
            .is_some_and(|head| Arc::ptr_eq(head, &self.seat));
        head.then(|| HeadDues {
            recheck: line.last_attempt.unwrap_or_else(Instant::now) + recheck,
            keep: line.last_sent.unwrap_or_else(Instant::now) + keep,
        })
    }
}

/// When the head of a client's line acts if nothing wakes it first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadDues {
    /// A re-check: the last attempt by any waiter of its client is a
    /// re-check interval old.
    pub(crate) recheck: Instant,
    /// A keep: the last send of its client that moved its deadline is a
    /// third of the place window old.
    pub(crate) keep: Instant,
}

impl Drop for SeatGuard {
    fn drop(&mut self) {
        let mut map = self.lines.map();
        let Some(line) = map.get_mut(&self.name) else {
            return;
        };
        // Mostly the head or near it: seats leave in about arrival order.
        let Some(at) = line.seats.iter().position(|s| Arc::ptr_eq(s, &self.seat)) else {
            return;
        };
        line.seats.remove(at);
        if line.seats.is_empty() {
            map.remove(&self.name);
        } else if at == 0 {
            // The new head re-checks from now on.
            if let Some(head) = line.seats.front() {
                head.told.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> Arc<str> {
        Arc::from("pool")
    }

    #[tokio::test]
    async fn only_the_head_rechecks_and_the_next_is_told_when_it_leaves() {
        let lines = Arc::new(FairLines::default());
        let every = Duration::from_secs(1);
        let first = lines.seat(&name(), Arc::from("c:1"));
        let second = lines.seat(&name(), Arc::from("c:2"));
        assert!(first.head_dues(every, every).is_some());
        assert!(second.head_dues(every, every).is_none());
        let told = second.told();
        drop(first);
        tokio::time::timeout(every, told)
            .await
            .expect("the new head is told");
        assert!(second.head_dues(every, every).is_some());
        drop(second);
        assert_eq!(lines.waiting("pool"), 0);
    }

    #[tokio::test]
    async fn a_grant_reaches_its_seat_and_a_gone_seat_refuses_it() {
        let lines = Arc::new(FairLines::default());
        let seat = lines.seat(&name(), Arc::from("c:1"));
        let told = seat.told();
        let sent = Instant::now();
        assert!(lines.grant("pool", "c:1", sent));
        told.await;
        assert_eq!(seat.take_grant(), Some(sent));
        assert_eq!(seat.take_grant(), None);
        assert!(!lines.grant("pool", "c:2", sent));
        drop(seat);
        assert!(!lines.grant("pool", "c:1", sent));
    }

    #[tokio::test]
    async fn a_new_epoch_tells_the_seats_of_the_old_one_to_try() {
        let lines = Arc::new(FairLines::default());
        let old = lines.seat(&name(), Arc::from("c:1"));
        let new = lines.seat(&name(), Arc::from("c:2"));
        lines.busy("pool", &old, Some("c:1"));
        assert!(!old.take_try_again());
        // The places were lost; the next join made a new epoch.
        lines.busy("pool", &new, Some("c:2"));
        assert!(old.take_try_again());
        assert!(!new.take_try_again());
        lines.tell_all_to_try("pool");
        assert!(old.take_try_again() && new.take_try_again());
    }
}
