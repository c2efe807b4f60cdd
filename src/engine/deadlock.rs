//! Deadlocks across processes, named the way a database names them: what a
//! long wait waits for, written where every client can read it, and the
//! cycles found by walking from a waiter to the holders of its lock, to what
//! they wait for, and so on.
//!
//! A wait that lasts longer than [`Config::deadlock_threshold`] (1 s, as
//! PostgreSQL's `deadlock_timeout`) writes a *wait record* beside its client's
//! identity key: a hash, `redisson_locks_waits:{<client id>}`, whose field is
//! an owner field and whose value says which lock that owner's task waits
//! for, since when, and which holds that task has (each with its owner).
//! Every owner of the task gets a field: under the scoped owner mode a task
//! holds as one owner and waits as another, and a walk that arrives at a
//! holder must find what that holder's task waits for. The hash has a TTL of
//! one watchdog lease, refreshed while the wait lasts; the fields go when it
//! ends. Short waits write nothing, so the uncontended and heavy paths send
//! nothing more.
//!
//! The walk (`inspect/deadlocks.rs`: it reads locks as the inspector does)
//! goes from the waiter to its lock's holders, whoever wrote them, and on to
//! the locks those holders' tasks wait for, by their records; a holder with
//! no record (a Java thread, a process of this crate whose wait is still
//! short) is found waiting only as an entry in the queue of a fair lock the
//! walk knows a hold of. Bounded: [`MAX_STEPS`] steps deep, [`MAX_READS`]
//! reads in all.
//!
//! [`Config::deadlock_threshold`]: crate::Config::deadlock_threshold

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::engine::identity::Identity;
use crate::error::Result;
use crate::transport::conn::Conn;

/// How many waits deep a walk goes before it stops (and says so).
pub(crate) const MAX_STEPS: usize = 64;

/// How many reads (round trips) one walk makes at most.
pub(crate) const MAX_READS: usize = 512;

/// A cycle of waits: each step's waiter waits for a lock held by the next
/// step's waiter (the last's by the first's), so none of them can go on
/// unless one gives up.
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) {
/// for cycle in client.deadlocks() {
///     eprintln!("{cycle}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Deadlock {
    /// The waits on the cycle, each held up by the next.
    pub steps: Vec<WaitStep>,
}

/// One wait on a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitStep {
    /// The owner field of the waiting acquisition (`<client id>:<task or
    /// thread id>`).
    pub waiter: String,
    /// The lock it waits for.
    pub lock: String,
    /// The owner field that holds the lock and keeps it out: an owner of the
    /// next step's task.
    pub holder: String,
    /// When the wait began, epoch milliseconds on the waiter's clock: `None`
    /// when it was seen only as an entry in a fair lock's queue (a Java
    /// waiter, or a wait shorter than its client's threshold).
    pub since_ms: Option<u64>,
    /// The waiter's client, when it announced itself (a client of this crate).
    pub identity: Option<Identity>,
}

impl WaitStep {
    /// The task or thread id after the client id in the waiter's field.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// for cycle in client.find_deadlocks("*").await?.cycles {
    ///     for step in &cycle.steps {
    ///         // The task (Rust) or thread (Java) id alone, to find in the logs of
    ///         // the process that waits.
    ///         println!("task {} waits for {:?}, held by {}", step.task(), step.lock, step.holder);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn task(&self) -> &str {
        self.waiter
            .split_at_checked(37)
            .filter(|(id, _)| id.ends_with(':'))
            .map_or(self.waiter.as_str(), |(_, rest)| rest)
    }
}

impl Deadlock {
    /// The wait that gives up under [`OnDeadlock::Refuse`](crate::OnDeadlock::Refuse).
    ///
    /// With every wait recorded: the youngest (the latest `since_ms`; of
    /// equals, the greatest owner field). Every client on the cycle reads the
    /// same records, so all agree on it, and only the client that owns it
    /// refuses. With one wait seen only in a fair queue (a Java waiter): the
    /// wait after it, whose task holds the fair lock it is queued on, since
    /// only a walk from that wait can see the queued one (a walk finds a
    /// queued wait in the queues of locks it knows holds of, its own first).
    /// `None` when no wait on the cycle can be given up by this crate (two
    /// queued waits, or the wait after the queued one has no record).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// for cycle in client.find_deadlocks("*").await?.cycles {
    ///     match cycle.victim() {
    ///         Some(step) => println!("{} would give up waiting for {:?}", step.waiter, step.lock),
    ///         // Java waiters only: break it by hand (`force_unlock`, or a restart).
    ///         None => println!("no wait this crate can give up: {cycle}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn victim(&self) -> Option<&WaitStep> {
        let queued: Vec<usize> = (0..self.steps.len())
            .filter(|&i| self.steps[i].since_ms.is_none())
            .collect();
        match queued.as_slice() {
            [] => self
                .steps
                .iter()
                .max_by(|a, b| (a.since_ms, &a.waiter).cmp(&(b.since_ms, &b.waiter))),
            [only] => Some(&self.steps[(only + 1) % self.steps.len()])
                .filter(|after| after.since_ms.is_some()),
            _ => None,
        }
    }

    /// The same cycle read from any step: its waiters, sorted.
    pub(crate) fn key(&self) -> Vec<String> {
        let mut waiters: Vec<String> = self.steps.iter().map(|s| s.waiter.clone()).collect();
        waiters.sort();
        waiters
    }

    /// Whether `owner` waits on the cycle.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// // A job that acquires as owner 7 (`RLock::with_owner_id(7)`) waits under the
    /// // owner field `<client id>:7`.
    /// let job = format!("{}:7", client.id());
    /// if client.deadlocks().iter().any(|cycle| cycle.has_waiter(&job)) {
    ///     eprintln!("job 7 is on a deadlock: cancelling it");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn has_waiter(&self, owner: &str) -> bool {
        self.steps.iter().any(|step| step.waiter == owner)
    }
}

impl std::fmt::Display for Deadlock {
    /// `deadlock of 2 waits: A waits for "x" (for 3.1 s), held by B; B waits
    /// for "y" ..., held by A`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deadlock of {} waits:", self.steps.len())?;
        for (i, step) in self.steps.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            write!(f, "{sep}{step}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for WaitStep {
    /// `A (pid 41 on h, orders-svc, task 7) waits for "x" (for 3.1 s), held
    /// by B`: the waiter named by its process when its client announced
    /// itself, how long it has waited (or that it was seen in a fair queue),
    /// and the holder keeping it out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.identity {
            Some(who) => write!(
                f,
                "{} (pid {} on {}{}, task {})",
                self.waiter,
                who.pid,
                who.host,
                who.name
                    .as_deref()
                    .map(|n| format!(", {n}"))
                    .unwrap_or_default(),
                self.task()
            )?,
            None => write!(f, "{} (no record of its process)", self.waiter)?,
        }
        write!(f, " waits for {:?}", self.lock)?;
        match self.since_ms {
            Some(since) => {
                let waited = crate::transport::scripts::epoch_millis().saturating_sub(since);
                write!(f, " (for {:.1} s)", waited as f64 / 1000.0)?;
            }
            None => write!(f, " (seen in its fair queue)")?,
        }
        write!(f, ", held by {}", self.holder)
    }
}

/// What a long wait writes (the value of each of its fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WaitRecord {
    /// The owner field of the waiting acquisition.
    pub(crate) waiter: String,
    /// The lock it waits for.
    pub(crate) lock: String,
    /// The kind's name (`reentrant`, `fair`, `write`, ...).
    pub(crate) kind: String,
    /// When the wait began, epoch milliseconds.
    pub(crate) since_ms: u64,
    /// The holds of the waiter's task, as its client knows them.
    pub(crate) holds: Vec<HeldBy>,
    /// When it was last written, epoch milliseconds, and for how long it
    /// holds from then: a reader takes a record older than that for gone (a
    /// field that outlived its wait, its hash kept alive by the client's
    /// other waits).
    #[serde(default)]
    pub(crate) written_ms: u64,
    #[serde(default)]
    pub(crate) ttl_ms: u64,
}

/// One hold of a waiter's task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldBy {
    pub(crate) lock: String,
    pub(crate) owner: String,
}

impl WaitRecord {
    /// Whether the record is still current at `now_ms` (written within its
    /// TTL; a record of an older writer, without the two, is taken as is).
    pub(crate) fn is_current(&self, now_ms: u64) -> bool {
        self.ttl_ms == 0 || self.written_ms.saturating_add(self.ttl_ms) >= now_ms
    }

    /// Every owner field of the task: the waiter's and its holds'.
    pub(crate) fn owners(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.waiter.as_str()).chain(self.holds.iter().map(|h| h.owner.as_str()))
    }
}

/// What a walk from one wait found.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// A cycle through the wait, if any.
    pub(crate) cycle: Option<Deadlock>,
    /// Holders met that wait for nothing known (no record, in no known queue).
    pub(crate) dead_ends: usize,
    /// The walk stopped at [`MAX_STEPS`] or [`MAX_READS`].
    pub(crate) cut: bool,
    /// The reads it made.
    pub(crate) reads: usize,
}

/// The walk, from a layer above the engine (it reads locks as the inspector
/// does): set once by the client.
pub(crate) trait Walker: Send + Sync {
    /// Walks from `start` for a cycle back to it, reading on `conn` as the
    /// client `my_id`.
    fn walk<'a>(
        &'a self,
        conn: &'a Conn,
        my_id: &'a str,
        start: &'a WaitRecord,
    ) -> Pin<Box<dyn Future<Output = Result<Walked>> + Send + 'a>>;
}

/// The cycles this client's waits are on, and the walk.
#[derive(Default)]
pub(crate) struct Deadlocks {
    walker: OnceLock<Box<dyn Walker>>,
    /// By the serial of the wait that found it.
    found: Mutex<HashMap<u64, Deadlock>>,
}

impl std::fmt::Debug for Deadlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deadlocks")
            .field("found", &self.found().len())
            .finish()
    }
}

impl Deadlocks {
    /// Sets the walk (once; later calls do nothing).
    pub(crate) fn set_walker(&self, walker: Box<dyn Walker>) {
        let _ = self.walker.set(walker);
    }

    pub(crate) fn walker(&self) -> Option<&dyn Walker> {
        self.walker.get().map(|w| w.as_ref())
    }

    /// The cycles found by this client's waits that still wait on them, each
    /// once.
    pub(crate) fn found(&self) -> Vec<Deadlock> {
        let found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = std::collections::HashSet::new();
        found
            .values()
            .filter(|cycle| seen.insert(cycle.key()))
            .cloned()
            .collect()
    }

    /// Wait `serial` is on `cycle` (`None`: on none, or no longer).
    /// `true` when the cycle is new to this wait.
    pub(crate) fn note(&self, serial: u64, cycle: Option<Deadlock>) -> bool {
        let mut found = self.found.lock().unwrap_or_else(|p| p.into_inner());
        match cycle {
            Some(cycle) => {
                let new = found
                    .get(&serial)
                    .is_none_or(|old| old.key() != cycle.key());
                found.insert(serial, cycle);
                new
            }
            None => {
                found.remove(&serial);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(waiter: &str, since: Option<u64>) -> WaitStep {
        WaitStep {
            waiter: waiter.into(),
            lock: "l".into(),
            holder: "h".into(),
            since_ms: since,
            identity: None,
        }
    }

    #[test]
    fn the_victim_is_the_youngest_wait_with_a_record_and_all_agree() {
        let cycle = Deadlock {
            steps: vec![
                step("a", Some(10)),
                step("b", Some(30)),
                step("c", Some(20)),
            ],
        };
        assert_eq!(cycle.victim().map(|s| s.waiter.as_str()), Some("b"));
        let rotated = Deadlock {
            steps: vec![
                step("c", Some(20)),
                step("a", Some(10)),
                step("b", Some(30)),
            ],
        };
        assert_eq!(rotated.victim(), cycle.victim(), "whoever found it");
        assert_eq!(rotated.key(), cycle.key());
        let tie = Deadlock {
            steps: vec![step("a", Some(30)), step("b", Some(30))],
        };
        assert_eq!(tie.victim().map(|s| s.waiter.as_str()), Some("b"));
        let java_only = Deadlock {
            steps: vec![step("j", None)],
        };
        assert!(java_only.victim().is_none());
        // A queued (Java) wait: only the wait after it sees the cycle, so
        // it is the victim, young or not.
        let through_java = Deadlock {
            steps: vec![step("r1", Some(50)), step("j", None), step("r2", Some(10))],
        };
        assert_eq!(through_java.victim().map(|s| s.waiter.as_str()), Some("r2"));
        let two_queued = Deadlock {
            steps: vec![step("r", Some(5)), step("j1", None), step("j2", None)],
        };
        assert!(two_queued.victim().is_none());
    }

    #[test]
    fn a_task_is_what_follows_the_client_id() {
        let s = step("0b8c6a3e-8f1e-4a7f-9d55-3b8a1c2d4e5f:17", None);
        assert_eq!(s.task(), "17");
        assert_eq!(step("odd", None).task(), "odd");
    }
}
