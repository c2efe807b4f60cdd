//! Recorded histories and the models they are checked against, as Jepsen
//! checks lock services: every invocation and completion of every operation,
//! from every process, with CLOCK_MONOTONIC times (one clock for the machine,
//! so processes compare), written per process and merged; then a search for
//! an order of the operations, each taking effect at one instant between its
//! invocation and its completion, that a small sequential model accepts
//! (linearizability, checked per lock: a lock's operations never constrain
//! another's).
//!
//! An operation whose outcome is unknown (a timeout, a cut connection) may
//! have taken effect at any instant after its invocation, or never: the
//! search may place it anywhere after its start, or leave it out.
//!
//! The models, with this crate's rules:
//! - [`Mutex`]: one owner at a time; a release by a non-owner is refused.
//! - [`ReentrantMutex`]: the same owner may take it again; a count.
//! - [`FencedMutex`] / reentrant: every grant's token (Redisson draws a new
//!   one on every acquisition, re-entry included) above every earlier one.
//! - [`Permits`]: never more than N out; no release by an owner holding none.
//! - [`Latch`]: a count set once, only ever counted down; a wait that returned
//!   open saw it at zero, a read saw the count as the count-downs left it.
//!
//! A plain mutex model fails by design once a holder is paused past its
//! lease (the lock is given to another while the first still believes it
//! holds): histories with such faults are checked with the lease-aware
//! interval checker (`checker.rs`) instead, or with holds cut at their
//! validity.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::checker::monotonic_ns;

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Acquire,
    Release,
    /// A read hold of a read-write lock (`Acquire` and `Release` are its
    /// write holds).
    ReadAcquire,
    ReadRelease,
    Renew,
    Token,
    PermitAcquire,
    PermitRelease,
    /// A latch's `count_down`.
    CountDown,
    /// A read of a latch's count (`count`, Redisson `getCount`), the count
    /// read its value.
    LatchCount,
    /// A latch's timed wait: `Ok` when it returned open.
    LatchWait,
    /// An operator's force-unlock, or a `DEL` of the lock: every hold of the
    /// lock ends (the safety models know no such thing: a campaign with it
    /// checks progress only).
    ForceRelease,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It took effect (with a value: a token, a count).
    Ok,
    /// It surely took no effect, and the state at some instant of the call
    /// is why: a single try that found the lock held or no permit free, a
    /// release by an owner not holding.
    Refused,
    /// It surely took no effect, and says nothing of the state (Jepsen's
    /// `:fail`): a wait that ran out, which a paused server or a slow line
    /// explains as well as a holder. The checker leaves it out.
    Fail,
    /// Nobody knows: it may have taken effect, at any instant after its start.
    Unknown,
}

/// One line of a process's history file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    t: u64,
    process: String,
    call: u64,
    #[serde(flatten)]
    event: Event,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
enum Event {
    Invoke {
        owner: String,
        lock: String,
        op: Op,
    },
    Complete {
        outcome: Outcome,
        value: Option<u64>,
    },
}

/// One process's recorder: appends to `history-<process>.jsonl` in a
/// directory shared by all the processes of a run.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    process: String,
    calls: AtomicU64,
}

/// An operation in flight; [`Call::end`] records how it ended. Dropped
/// without an end, it is recorded as unknown.
#[derive(Debug)]
pub struct Call<'a> {
    recorder: &'a Recorder,
    id: u64,
    ended: bool,
}

impl Recorder {
    pub fn create(dir: &Path, process: &str) -> Recorder {
        std::fs::create_dir_all(dir).expect("history dir");
        let path = dir.join(format!("history-{process}.jsonl"));
        Recorder {
            path,
            process: process.to_owned(),
            calls: AtomicU64::new(0),
        }
    }

    fn write(&self, call: u64, event: Event) {
        let line = Line {
            t: monotonic_ns(),
            process: self.process.clone(),
            call,
            event,
        };
        let mut text = serde_json::to_string(&line).expect("json");
        text.push('\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("history file");
        // One write per line: O_APPEND keeps lines whole.
        file.write_all(text.as_bytes()).expect("history write");
    }

    /// Records the invocation of `op` by `owner` on `lock`.
    pub fn invoke(&self, owner: &str, lock: &str, op: Op) -> Call<'_> {
        let id = self.calls.fetch_add(1, Ordering::Relaxed);
        self.write(
            id,
            Event::Invoke {
                owner: owner.into(),
                lock: lock.into(),
                op,
            },
        );
        Call {
            recorder: self,
            id,
            ended: false,
        }
    }
}

impl Call<'_> {
    pub fn end(mut self, outcome: Outcome, value: Option<u64>) {
        self.ended = true;
        self.recorder
            .write(self.id, Event::Complete { outcome, value });
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.recorder.write(
                self.id,
                Event::Complete {
                    outcome: Outcome::Unknown,
                    value: None,
                },
            );
        }
    }
}

/// One operation of a merged history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub process: String,
    pub owner: String,
    pub lock: String,
    pub op: Op,
    pub outcome: Outcome,
    pub value: Option<u64>,
    pub invoked_ns: u64,
    /// `u64::MAX` for an unknown outcome: it may take effect any time after.
    pub completed_ns: u64,
    /// When the call returned, whatever its outcome (an unknown one too);
    /// `u64::MAX` when it never did (its process was killed first).
    pub returned_ns: u64,
}

/// Every process's history in `dir`, merged: one operation per call (an
/// invocation without a completion, its process killed, is unknown).
pub fn merge(dir: &Path) -> Vec<Operation> {
    let mut open: HashMap<(String, u64), (u64, String, String, Op)> = HashMap::new();
    let mut ops = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("history dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("history file");
        // A process killed mid-line leaves a partial last line: skipped.
        for line in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Line>(l).ok())
        {
            let key = (line.process.clone(), line.call);
            match line.event {
                Event::Invoke { owner, lock, op } => {
                    open.insert(key, (line.t, owner, lock, op));
                }
                Event::Complete { outcome, value } => {
                    if let Some((invoked_ns, owner, lock, op)) = open.remove(&key) {
                        let completed_ns = if outcome == Outcome::Unknown {
                            u64::MAX
                        } else {
                            line.t
                        };
                        ops.push(Operation {
                            process: key.0,
                            owner,
                            lock,
                            op,
                            outcome,
                            value,
                            invoked_ns,
                            completed_ns,
                            returned_ns: line.t,
                        });
                    }
                }
            }
        }
    }
    for ((process, _), (invoked_ns, owner, lock, op)) in open {
        ops.push(Operation {
            process,
            owner,
            lock,
            op,
            outcome: Outcome::Unknown,
            value: None,
            invoked_ns,
            completed_ns: u64::MAX,
            returned_ns: u64::MAX,
        });
    }
    ops.sort_by_key(|o| (o.invoked_ns, o.completed_ns));
    ops
}

/// A sequential model of one lock: from a state, whether an operation is
/// possible and the state after it.
pub trait Model {
    type State: Clone + Eq + Hash + std::fmt::Debug;
    fn init(&self) -> Self::State;
    /// The state after `op` took effect in `state` as its outcome says, or
    /// `None` when that outcome is impossible there. Only `Ok` and `Refused`
    /// outcomes are asked about (an unknown one is asked as `Ok`).
    fn step(&self, state: &Self::State, op: &Operation) -> Option<Self::State>;
}

/// Why a history is not linearizable: the lock, and the operations that
/// could not all be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub lock: String,
    pub operations: Vec<Operation>,
}

/// Checks every lock's operations against `model`; the first lock that no
/// order explains.
pub fn check<M: Model>(model: &M, history: &[Operation]) -> Result<(), Violation> {
    let mut by_lock: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in history.iter().filter(|op| op.outcome != Outcome::Fail) {
        by_lock.entry(op.lock.as_str()).or_default().push(op);
    }
    for (lock, ops) in by_lock {
        if !linearizable(model, &ops) {
            return Err(Violation {
                lock: lock.to_owned(),
                operations: ops.into_iter().cloned().collect(),
            });
        }
    }
    Ok(())
}

/// The search (Wing and Gong's, with the memo of Lowe's and porcupine's):
/// place, one at a time, an operation invoked before every unplaced
/// operation's completion; backtrack when the model refuses; remember the
/// (placed set, state) pairs already tried. Unknown operations may stay
/// unplaced.
fn linearizable<M: Model>(model: &M, ops: &[&Operation]) -> bool {
    let n = ops.len();
    let mut seen: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(Vec<u64>, M::State)> = vec![(vec![0; n.div_ceil(64)], model.init())];
    let placed = |set: &Vec<u64>, i: usize| set[i / 64] & (1 << (i % 64)) != 0;
    while let Some((set, state)) = stack.pop() {
        if !seen.insert((set.clone(), state.clone())) {
            continue;
        }
        // Done when every definite operation is placed.
        if (0..n).all(|i| placed(&set, i) || ops[i].outcome == Outcome::Unknown) {
            return true;
        }
        // The earliest completion among the unplaced bounds who may go next.
        let horizon = (0..n)
            .filter(|&i| !placed(&set, i))
            .map(|i| ops[i].completed_ns)
            .min()
            .unwrap_or(u64::MAX);
        for i in (0..n).filter(|&i| !placed(&set, i) && ops[i].invoked_ns <= horizon) {
            if let Some(next) = model.step(&state, ops[i]) {
                let mut set = set.clone();
                set[i / 64] |= 1 << (i % 64);
                stack.push((set, next));
            }
        }
    }
    false
}

/// One owner at a time (non-reentrant: a second acquire by the holder is refused).
pub struct Mutex;

impl Model for Mutex {
    type State = Option<String>;
    fn init(&self) -> Self::State {
        None
    }
    fn step(&self, holder: &Self::State, op: &Operation) -> Option<Self::State> {
        let ok = op.outcome != Outcome::Refused;
        match (op.op, ok, holder) {
            (Op::Acquire, true, None) => Some(Some(op.owner.clone())),
            (Op::Acquire, false, Some(_)) => Some(holder.clone()),
            (Op::Release, true, Some(h)) if *h == op.owner => Some(None),
            (Op::Release, false, h) if h.as_deref() != Some(op.owner.as_str()) => {
                Some(holder.clone())
            }
            (Op::Renew, true, Some(h)) if *h == op.owner => Some(holder.clone()),
            (Op::Renew, false, h) if h.as_deref() != Some(op.owner.as_str()) => {
                Some(holder.clone())
            }
            _ => None,
        }
    }
}

/// The same owner may take it again; only the last release frees it.
pub struct ReentrantMutex;

impl Model for ReentrantMutex {
    type State = Option<(String, u64)>;
    fn init(&self) -> Self::State {
        None
    }
    fn step(&self, state: &Self::State, op: &Operation) -> Option<Self::State> {
        let ok = op.outcome != Outcome::Refused;
        let mine = state.as_ref().is_some_and(|(h, _)| *h == op.owner);
        match (op.op, ok, state) {
            (Op::Acquire, true, None) => Some(Some((op.owner.clone(), 1))),
            (Op::Acquire, true, Some((h, c))) if mine => Some(Some((h.clone(), c + 1))),
            (Op::Acquire, false, Some(_)) if !mine => Some(state.clone()),
            (Op::Release, true, Some((h, c))) if mine => Some((*c > 1).then(|| (h.clone(), c - 1))),
            (Op::Release, false, _) if !mine => Some(state.clone()),
            (Op::Renew, true, _) if mine => Some(state.clone()),
            (Op::Renew, false, _) if !mine => Some(state.clone()),
            _ => None,
        }
    }
}

/// A mutex whose every grant carries a token above every earlier grant's;
/// `reentrant`: the holder may take it again (drawing a new token too).
pub struct FencedMutex {
    pub reentrant: bool,
}

impl Model for FencedMutex {
    /// (holder and its count, the greatest token granted)
    type State = (Option<(String, u64)>, u64);
    fn init(&self) -> Self::State {
        (None, 0)
    }
    fn step(&self, (holder, last): &Self::State, op: &Operation) -> Option<Self::State> {
        let ok = op.outcome != Outcome::Refused;
        let mine = holder.as_ref().is_some_and(|(h, _)| *h == op.owner);
        // An unknown grant's token is unknown: it moves nothing.
        let token = |t: Option<u64>| match (op.outcome, t) {
            (Outcome::Unknown, _) => Some(*last),
            (_, Some(t)) if t > *last => Some(t),
            _ => None,
        };
        match (op.op, ok) {
            (Op::Acquire, true) if holder.is_none() => {
                Some((Some((op.owner.clone(), 1)), token(op.value)?))
            }
            (Op::Acquire, true) if mine && self.reentrant => {
                let (h, c) = holder.clone()?;
                Some((Some((h, c + 1)), token(op.value)?))
            }
            (Op::Acquire, false) if holder.is_some() => Some((holder.clone(), *last)),
            (Op::Release, true) if mine => {
                let (h, c) = holder.clone()?;
                Some(((c > 1).then_some((h, c - 1)), *last))
            }
            (Op::Release, false) if !mine => Some((holder.clone(), *last)),
            _ => None,
        }
    }
}

/// A read-write lock: one writer and no reader, or any number of readers
/// and no writer (a writer may also read, as Redisson lets it).
pub struct ReadWrite;

impl Model for ReadWrite {
    /// (the writer, the readers' holds, sorted)
    type State = (Option<String>, Vec<String>);
    fn init(&self) -> Self::State {
        (None, Vec::new())
    }
    fn step(&self, (writer, readers): &Self::State, op: &Operation) -> Option<Self::State> {
        let ok = op.outcome != Outcome::Refused;
        let writing = writer.as_deref() == Some(op.owner.as_str());
        let reading = readers.contains(&op.owner);
        let free_for_write = writer.is_none() && readers.iter().all(|r| *r == op.owner);
        let free_for_read = writer.is_none() || writing;
        let same = Some((writer.clone(), readers.clone()));
        match (op.op, ok) {
            (Op::Acquire, true) if free_for_write => {
                Some((Some(op.owner.clone()), readers.clone()))
            }
            (Op::Acquire, false) if !free_for_write => same,
            (Op::Release, true) if writing => Some((None, readers.clone())),
            (Op::Release, false) if !writing => same,
            (Op::ReadAcquire, true) if free_for_read => {
                let mut readers = readers.clone();
                readers.push(op.owner.clone());
                readers.sort();
                Some((writer.clone(), readers))
            }
            (Op::ReadAcquire, false) if !free_for_read => same,
            (Op::ReadRelease, true) if reading => {
                let mut readers = readers.clone();
                let at = readers.iter().position(|r| *r == op.owner)?;
                readers.remove(at);
                Some((writer.clone(), readers))
            }
            (Op::ReadRelease, false) if !reading => same,
            _ => None,
        }
    }
}

/// At most `n` permits out; a release by an owner holding none is refused.
pub struct Permits {
    pub n: u64,
}

impl Model for Permits {
    /// (owner, permits it holds), sorted.
    type State = Vec<(String, u64)>;
    fn init(&self) -> Self::State {
        Vec::new()
    }
    fn step(&self, out: &Self::State, op: &Operation) -> Option<Self::State> {
        let ok = op.outcome != Outcome::Refused;
        let total: u64 = out.iter().map(|(_, c)| c).sum();
        let held = out
            .iter()
            .find(|(o, _)| *o == op.owner)
            .map_or(0, |(_, c)| *c);
        let with = |count: u64| {
            let mut next: Vec<(String, u64)> = out
                .iter()
                .filter(|(o, _)| *o != op.owner)
                .cloned()
                .collect();
            if count > 0 {
                next.push((op.owner.clone(), count));
            }
            next.sort();
            next
        };
        match (op.op, ok) {
            (Op::PermitAcquire, true) if total < self.n => Some(with(held + 1)),
            (Op::PermitAcquire, false) if total >= self.n => Some(out.clone()),
            (Op::PermitRelease, true) if held > 0 => Some(with(held - 1)),
            (Op::PermitRelease, false) if held == 0 => Some(out.clone()),
            _ => None,
        }
    }
}

/// A count-down latch (Redisson's `RCountDownLatch`) whose count was set to
/// `n` once, before the run, and is never set again during it (no re-arm,
/// so no op for `try_set_count`: once at zero it stays there, as nothing
/// re-creates the deleted key).
///
/// - A count-down takes one off, down to zero and no further (on an open
///   latch it does nothing); one of unknown outcome may or may not have.
/// - A read of the count sees exactly the count at its instant.
/// - A wait that returned open saw the count at zero at its instant (it
///   returns on a read of zero). A wait that ran out is a `fail`: a paused
///   server or a lost message explains it as well as a count above zero.
pub struct Latch {
    pub n: u64,
}

impl Model for Latch {
    /// The count still to go.
    type State = u64;
    fn init(&self) -> Self::State {
        self.n
    }
    fn step(&self, count: &Self::State, op: &Operation) -> Option<Self::State> {
        // Nothing here is ever refused: a refusal has no order.
        if op.outcome == Outcome::Refused {
            return None;
        }
        match op.op {
            Op::CountDown => Some(count.saturating_sub(1)),
            // A read of unknown outcome has no value: left out.
            Op::LatchCount if op.value == Some(*count) => Some(*count),
            Op::LatchWait if *count == 0 => Some(0),
            _ => None,
        }
    }
}

/// Each lock's holds and waits in `history`, as the progress checker
/// (`progress.rs`) reads them, for the locks `admits` names (a latch is no
/// lock: left out).
///
/// - A wait is an acquire (write, read or permit) from its call to its
///   return, whatever came of it; one that never returned (its process was
///   killed) waited until the kill, which [`close_killed_waits`] records.
/// - A hold runs from a granted acquire's completion to its owner's next
///   release of the lock (its call: the release is asked for then). A
///   release of unknown outcome ends it at the latest `settle_ns` later (its
///   settle finds out and gives the hold back); with none at all (its holder
///   died, see `close_killed`) the lease ends it. The checker takes the
///   latest, so that a lock that may still be held is never called free.
/// - An acquire of unknown outcome may have taken the lock, and its settle
///   gives it back: it counts as a hold from its call until `settle_ns`
///   after it returned.
pub fn lock_histories(
    history: &[Operation],
    admits: impl Fn(&str) -> Option<super::progress::Admits>,
    settle_ns: u64,
) -> BTreeMap<String, (super::progress::Admits, super::progress::LockHistory)> {
    use super::progress::{Held, LockHistory, Waited};
    let later = |t: u64| t.saturating_add(settle_ns);
    let mut out: BTreeMap<String, (super::progress::Admits, LockHistory)> = BTreeMap::new();
    // Holds still open, per (owner, lock, read): when each began.
    let mut open: HashMap<(&str, &str, bool), Vec<u64>> = HashMap::new();
    let mut ops: Vec<&Operation> = history.iter().collect();
    ops.sort_by_key(|o| o.invoked_ns);
    for o in ops {
        let Some(admitted) = admits(&o.lock) else {
            continue;
        };
        let (_, lock) = out
            .entry(o.lock.clone())
            .or_insert_with(|| (admitted, LockHistory::default()));
        let read = matches!(o.op, Op::ReadAcquire | Op::ReadRelease);
        match o.op {
            Op::Acquire | Op::ReadAcquire | Op::PermitAcquire => {
                if o.returned_ns != u64::MAX {
                    lock.waits.push(Waited {
                        from_ns: o.invoked_ns,
                        to_ns: o.returned_ns,
                        read,
                    });
                }
                match o.outcome {
                    Outcome::Ok => open
                        .entry((&o.owner, &o.lock, read))
                        .or_default()
                        .push(o.completed_ns),
                    Outcome::Unknown => lock.holds.push(Held {
                        from_ns: o.invoked_ns,
                        to_ns: later(o.returned_ns),
                        read,
                    }),
                    Outcome::Refused | Outcome::Fail => {}
                }
            }
            // Every hold open ends by the time the force returned.
            Op::ForceRelease => {
                let name = o.lock.as_str();
                for ((_, lock_name, read), begun) in open.iter_mut() {
                    if *lock_name != name {
                        continue;
                    }
                    for from_ns in begun.drain(..) {
                        lock.holds.push(Held {
                            from_ns,
                            to_ns: o.returned_ns.min(o.completed_ns),
                            read: *read,
                        });
                    }
                }
            }
            Op::Release | Op::ReadRelease | Op::PermitRelease => {
                let Some(from_ns) = open
                    .get_mut(&(o.owner.as_str(), o.lock.as_str(), read))
                    .and_then(|begun| (!begun.is_empty()).then(|| begun.remove(0)))
                else {
                    continue;
                };
                let to_ns = match o.outcome {
                    Outcome::Unknown => later(o.invoked_ns),
                    _ => o.invoked_ns,
                };
                lock.holds.push(Held {
                    from_ns,
                    to_ns,
                    read,
                });
            }
            _ => {}
        }
    }
    for ((_, name, read), begun) in open {
        if let Some((_, lock)) = out.get_mut(name) {
            for from_ns in begun {
                lock.holds.push(Held {
                    from_ns,
                    to_ns: u64::MAX,
                    read,
                });
            }
        }
    }
    out
}

/// Gives every call of a killed process that never returned the instant of
/// the kill as its return: it waited (or held) until then, and no longer.
pub fn close_killed_waits(history: &mut [Operation], killed: &[(String, u64)]) {
    for o in history.iter_mut().filter(|o| o.returned_ns == u64::MAX) {
        if let Some((_, at)) = killed.iter().find(|(process, _)| *process == o.process) {
            o.returned_ns = (*at).max(o.invoked_ns);
        }
    }
}

/// The stalls of `history`'s locks (see `progress.rs`), by kind (`kind_of`
/// each lock, with how it admits), against `bound_ms`, an unknown outcome
/// settled within `settle_ns` (see [`lock_histories`]): the report, one line
/// per kind, and whether every kind kept the bound.
pub fn progress_report(
    history: &[Operation],
    kind_of: impl Fn(&str) -> Option<(super::progress::Admits, &'static str)>,
    settle_ns: u64,
    bound_ms: f64,
) -> (String, bool) {
    let locks = lock_histories(history, |lock| kind_of(lock).map(|(a, _)| a), settle_ns);
    let reports = super::progress::report_by_kind(
        locks
            .iter()
            .map(|(name, (admits, h))| (name.as_str(), *admits, h)),
        |name| kind_of(name).map_or("?", |(_, kind)| kind).to_owned(),
        bound_ms,
    );
    let kept = reports.values().all(|r| r.over_bound == 0);
    let text = reports
        .iter()
        .map(|(kind, r)| {
            format!(
                "{kind}: {} stalls, longest {:.1} ms, p99 {:.1} ms, {} over {bound_ms} ms",
                r.stalls, r.longest_ms, r.p99_ms, r.over_bound
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    (text, kept)
}
