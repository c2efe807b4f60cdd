//! The progress checker, beside the safety checkers: where the models ask
//! "were two inside at once?", this asks "did a waiter wait while the lock
//! was free for it?".
//!
//! A history gives, per lock, its holds (from the moment the acquire
//! returned to the moment the release was called) and its waits (from the
//! moment the acquire was called to the moment it returned, with the lock or
//! without). A *stall* is a stretch of time in which some pending waiter
//! could have taken the lock as the holds stood: for an exclusive lock, no
//! hold at all; for a read-write lock, no hold for a writer and no write
//! hold for a reader; for a semaphore of `n` permits, fewer than `n` out.
//! For a fair lock only the head of the line may take it, and the head is a
//! pending waiter whenever any waiter is, so the rule is the exclusive one.
//!
//! Every hand-off is a stall of its own: the release's round trip, the
//! message, the waiter's attempt (a fraction of a millisecond here). A
//! waiter asleep on a free lock is a long one. The checker reports each
//! lock's stalls; a campaign fails when the longest is past its bound.
//!
//! Measured from the clients' side, a stall can only be longer than the
//! server's own (a release is called before the server frees the lock, an
//! acquire returns after it took it): a bound met here is met there.

use std::collections::BTreeMap;

/// How a lock lets its waiters in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admits {
    /// One holder at a time (reentrant, fair, fenced, spin, a write lock's
    /// own name when only writers use it).
    One,
    /// A read-write lock: any number of readers, or one writer.
    ReadersOrWriter,
    /// A semaphore of this many permits, one per hold.
    Permits(u32),
}

/// One hold of a lock, from its grant to its release (both as the holder
/// saw them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub from_ns: u64,
    /// `u64::MAX` when it was never seen released (its holder died: the
    /// lock then stays held as far as this history can tell).
    pub to_ns: u64,
    /// A read hold of a read-write lock.
    pub read: bool,
}

/// One wait for a lock, from the call to its return (with the lock, or out
/// of time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    pub from_ns: u64,
    pub to_ns: u64,
    /// A reader of a read-write lock.
    pub read: bool,
}

/// A stretch in which a pending waiter could have taken the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Stall {
    pub fn ms(&self) -> f64 {
        (self.to_ns - self.from_ns) as f64 / 1e6
    }
}

/// One lock's history, for the checker.
#[derive(Debug, Clone, Default)]
pub struct LockHistory {
    pub holds: Vec<Held>,
    pub waits: Vec<Waited>,
}

/// The stalls of one lock that admits as `admits` says, in time order. A
/// sweep over the instants its state changes at: holds and waits counted in
/// as they start and out as they end.
pub fn stalls(admits: Admits, history: &LockHistory) -> Vec<Stall> {
    // (instant, change to: write holds, read holds, writers waiting,
    // readers waiting); an end that never came (u64::MAX) never applies.
    let mut changes: Vec<(u64, [i64; 4])> = Vec::new();
    let mut count = |i: usize, from_ns: u64, to_ns: u64| {
        let (mut on, mut off) = ([0; 4], [0; 4]);
        on[i] = 1;
        off[i] = -1;
        changes.push((from_ns, on));
        changes.push((to_ns, off));
    };
    for h in &history.holds {
        count(usize::from(h.read), h.from_ns, h.to_ns);
    }
    for w in &history.waits {
        count(2 + usize::from(w.read), w.from_ns, w.to_ns);
    }
    changes.retain(|(t, _)| *t != u64::MAX);
    changes.sort_by_key(|(t, _)| *t);
    let mut state = [0_i64; 4];
    let mut out: Vec<Stall> = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        let at = changes[i].0;
        while i < changes.len() && changes[i].0 == at {
            for (s, d) in state.iter_mut().zip(changes[i].1) {
                *s += d;
            }
            i += 1;
        }
        let Some(&(next, _)) = changes.get(i) else {
            break;
        };
        let [writes, reads, writers, readers] = state;
        let could = match admits {
            Admits::One => writes + reads == 0 && writers + readers > 0,
            Admits::ReadersOrWriter => {
                (writers > 0 && writes + reads == 0) || (readers > 0 && writes == 0)
            }
            Admits::Permits(n) => writers + readers > 0 && writes + reads < i64::from(n),
        };
        if !could {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.to_ns == at => last.to_ns = next,
            _ => out.push(Stall {
                from_ns: at,
                to_ns: next,
            }),
        }
    }
    out
}

/// What a run's stalls come to, per kind of lock: how many, the longest,
/// the 99th percentile, and how many went past `bound_ms`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StallReport {
    pub stalls: usize,
    pub longest_ms: f64,
    pub p99_ms: f64,
    pub over_bound: usize,
}

impl StallReport {
    pub fn of(stalls: &[Stall], bound_ms: f64) -> StallReport {
        let mut ms: Vec<f64> = stalls.iter().map(Stall::ms).collect();
        ms.sort_by(f64::total_cmp);
        StallReport {
            stalls: ms.len(),
            longest_ms: ms.last().copied().unwrap_or(0.0),
            p99_ms: ms
                .get(((ms.len() as f64 - 1.0) * 0.99).max(0.0) as usize)
                .copied()
                .unwrap_or(0.0),
            over_bound: ms.iter().filter(|&&m| m > bound_ms).count(),
        }
    }
}

/// Every lock's stalls, by the kind each lock is (`kind_of` its name),
/// reported against `bound_ms`.
pub fn report_by_kind<'a>(
    locks: impl IntoIterator<Item = (&'a str, Admits, &'a LockHistory)>,
    kind_of: impl Fn(&str) -> String,
    bound_ms: f64,
) -> BTreeMap<String, StallReport> {
    let mut by_kind: BTreeMap<String, Vec<Stall>> = BTreeMap::new();
    for (name, admits, history) in locks {
        by_kind
            .entry(kind_of(name))
            .or_default()
            .extend(stalls(admits, history));
    }
    by_kind
        .into_iter()
        .map(|(kind, stalls)| (kind, StallReport::of(&stalls, bound_ms)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn hold(from: u64, to: u64) -> Held {
        Held {
            from_ns: from * MS,
            to_ns: to * MS,
            read: false,
        }
    }

    fn wait(from: u64, to: u64) -> Waited {
        Waited {
            from_ns: from * MS,
            to_ns: to * MS,
            read: false,
        }
    }

    #[test]
    fn a_prompt_hand_off_is_a_short_stall_and_a_sleep_on_a_free_lock_a_long_one() {
        // Held 0-10, released; the waiter (there since 5) takes it at 11.
        let prompt = LockHistory {
            holds: vec![hold(0, 10), hold(11, 20)],
            waits: vec![wait(5, 11)],
        };
        assert_eq!(
            stalls(Admits::One, &prompt),
            vec![Stall {
                from_ns: 10 * MS,
                to_ns: 11 * MS
            }]
        );
        // The mutation that makes it fail: the waiter sleeps on after the
        // release, and takes the lock 30 s later.
        let asleep = LockHistory {
            holds: vec![hold(0, 10), hold(30_010, 30_020)],
            waits: vec![wait(5, 30_010)],
        };
        let report = StallReport::of(&stalls(Admits::One, &asleep), 50.0);
        assert_eq!(report.over_bound, 1);
        assert!(report.longest_ms >= 30_000.0);
    }

    #[test]
    fn a_free_lock_nobody_waits_for_is_no_stall() {
        // Free from 10 to 500; the second holder came at 500 and took it
        // at once, and a waiter behind a third holder waited while it held.
        let idle = LockHistory {
            holds: vec![hold(0, 10), hold(500, 510), hold(600, 700), hold(700, 710)],
            waits: vec![wait(500, 500), wait(650, 700)],
        };
        assert!(stalls(Admits::One, &idle).is_empty());
        // A waiter there from 400 on: 100 ms of a free lock it could have had.
        let waited = LockHistory {
            waits: vec![wait(400, 500)],
            ..idle
        };
        assert_eq!(
            StallReport::of(&stalls(Admits::One, &waited), 50.0).over_bound,
            1
        );
    }

    #[test]
    fn readers_can_share_and_permits_count() {
        let read = |from, to| Held {
            read: true,
            ..hold(from, to)
        };
        let reader = |from, to| Waited {
            read: true,
            ..wait(from, to)
        };
        // A reader waits while a reader holds: it could have shared.
        let rw = LockHistory {
            holds: vec![read(0, 100), read(60, 70)],
            waits: vec![reader(10, 60)],
        };
        assert_eq!(stalls(Admits::ReadersOrWriter, &rw).len(), 1);
        // A writer waiting behind a reader is no stall.
        let writer_behind = LockHistory {
            holds: vec![read(0, 100), hold(100, 110)],
            waits: vec![wait(10, 100)],
        };
        assert!(stalls(Admits::ReadersOrWriter, &writer_behind).is_empty());
        // Two permits: one out and a waiter pending is a stall; two out is not.
        let permits = LockHistory {
            holds: vec![hold(0, 100), hold(0, 50), hold(60, 100)],
            waits: vec![wait(10, 60)],
        };
        assert_eq!(
            stalls(Admits::Permits(2), &permits),
            vec![Stall {
                from_ns: 50 * MS,
                to_ns: 60 * MS
            }]
        );
    }
}
