//! What this client knows about the line for each lock: how many of its tasks
//! wait, whose turn it is to wait in Redis, and (a fair lock) who its heir is.
//! What its releases did lately is `handoff.rs`'s.
//!
//! For the exclusive kinds (reentrant, non-reentrant, fenced, write, the
//! one-permit semaphores; the fair lock in a form of its own, see
//! `wait/queued.rs`), a client's waiters for one lock form a local line
//! ([`Lines::enter`]): the one
//! at its head waits in Redis as every waiter used to (attempts, sleeps on the
//! unlock channel); the others are parked, sending nothing, holding no wait
//! engine, and move up in arrival order. When the head leaves holding the lock,
//! the next learns it ([`HeldHere`]) and sleeps on that hold's unlock message
//! rather than trying at once. Other clients still compete as Redisson's do.
//!
//! The count of waiting tasks also tells a fair waiter that it will likely
//! wait, so it subscribes before its first attempt (see `wait/in_redis.rs`).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::engine::join_order::{JoinOrder, JoinTicket};
use crate::engine::successor::{Naming, Successor};
use crate::transport::pubsub::{ChannelMark, Confirming};
use tokio::time::Instant;

/// Entries kept before expired contentions are first swept; after a sweep,
/// the next comes when the map has doubled, so sweeping stays O(1) amortized.
const SWEEP_AT: usize = 1024;

/// How long after one of this client's fair waiters joined a busy line a
/// waiter that comes alone expects to wait, and listens before it joins: a
/// process with one waiter at a time acquires a contended lock a few times
/// a second. A wrong guess costs one SUBSCRIBE (and its UNSUBSCRIBE).
const CONTENDED_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct LineState {
    /// This client's tasks waiting for the lock: past their first attempt, or
    /// in its local line (see [`Lines::enter`]).
    waiting: usize,
    /// The turn to wait for the lock in Redis (one permit), for the lock kinds
    /// that keep a local line; its queue is the line, first come first served.
    turn: Option<Arc<Semaphore>>,
    /// A task of this client that was at the head of the local line left it
    /// holding the lock: the next at the head sleeps on the unlock message
    /// instead of trying at once.
    held_here: Option<HeldHere>,
    /// By when the head acts next, if its future is being polled: the end of
    /// its sleep, or of its attempt's reply timeout, plus [`HEAD_GRACE`].
    head_due: Option<Instant>,
    /// The head waits for its subscription's confirmation: its due counts
    /// from the confirmation, however long a busy server takes (see
    /// [`Lines::release_stalled`]).
    confirming: Option<Confirming>,
    /// The head is past due: nobody parks behind it until it leaves.
    stalled: bool,
    /// For a fair lock: the order its waiters join Redis's queue in, which is
    /// the order of this line (see `join_order.rs`).
    joins: Option<Arc<JoinOrder>>,
    /// For a fair lock: the head of the line, offered as the heir of this
    /// client's releases (see `successor.rs`).
    heir: Option<Arc<Successor>>,
    /// For a fair lock: the parked waiters' heirs, in the order they joined
    /// Redis's queue (the order of the turn's queue). While no head is
    /// offered (the last one just left holding the lock, and the next has not
    /// run yet), a release names the first of them: the grant waits for it
    /// in its cell, where a release that found no heir would publish to a
    /// waiter that does not listen.
    parked_heirs: VecDeque<Arc<Successor>>,
    /// For a fair lock: until when a waiter of this client that comes alone
    /// expects to wait (one of them joined a busy line lately, see
    /// [`Lines::queued_behind_others`]).
    contended_until: Option<Instant>,
}

impl LineState {
    /// Whether the entry still says something once nobody waits: a
    /// contention still fresh.
    fn outlives_its_waiters(&self, now: Instant) -> bool {
        self.contended_until.is_some_and(|until| until > now)
    }
}

/// Per lock name, this client's side of the line.
#[derive(Debug)]
pub(crate) struct Lines {
    /// The map, split by lock name: every `lock()` of a kind with a local line
    /// touches its lock's entry a few times, and one mutex for all locks was
    /// contended by the runtime's threads (a quarter of the throughput of 64
    /// tasks on 64 locks).
    shards: Box<[Shard]>,
    /// How many locks have an entry: 0 lets a path with no line anywhere skip
    /// the mutexes.
    entries: std::sync::atomic::AtomicUsize,
    /// By when a new head acts first (its first attempt's reply timeout), until
    /// it says otherwise ([`Turn::due`]).
    first_due: Duration,
}

/// How many parts the map is split in.
const SHARDS: usize = 32;

#[derive(Debug, Default)]
struct Shard {
    map: Mutex<HashMap<Arc<str>, LineState>>,
    /// The size at which `enter` next sweeps this part (0: [`SWEEP_AT`]).
    sweep_at: std::sync::atomic::AtomicUsize,
}

impl Lines {
    /// The lines of a client whose replies time out after `timeout`.
    pub(crate) fn new(timeout: Duration) -> Lines {
        Lines {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            entries: std::sync::atomic::AtomicUsize::new(0),
            first_due: timeout + HEAD_GRACE,
        }
    }
}

/// One part of the map, locked; dropping it records the change in its size in
/// [`Lines::entries`].
struct Locked<'a> {
    map: std::sync::MutexGuard<'a, HashMap<Arc<str>, LineState>>,
    entries: &'a std::sync::atomic::AtomicUsize,
    sweep_at: &'a std::sync::atomic::AtomicUsize,
    before: usize,
}

impl std::ops::Deref for Locked<'_> {
    type Target = HashMap<Arc<str>, LineState>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.map
    }
}

impl Locked<'_> {
    /// Drops the entries nobody waits on that say nothing any more (kept for
    /// a hand-off or a contention, see [`LineState::outlives_its_waiters`]),
    /// once this part has grown to its sweep size, which then doubles.
    fn sweep(&mut self) {
        let sweep_at = match self.sweep_at.load(std::sync::atomic::Ordering::Relaxed) {
            0 => SWEEP_AT,
            n => n,
        };
        if self.len() >= sweep_at {
            let now = Instant::now();
            self.retain(|_, line| line.waiting > 0 || line.outlives_its_waiters(now));
            let next = (self.len() * 2).max(SWEEP_AT);
            self.sweep_at
                .store(next, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::AcqRel;
        let after = self.map.len();
        if after > self.before {
            self.entries.fetch_add(after - self.before, AcqRel);
        } else if after < self.before {
            self.entries.fetch_sub(self.before - after, AcqRel);
        }
    }
}

impl LineState {
    /// Closes the line: the turn's queue answers every parked waiter at once
    /// (they wait in Redis on their own), nobody parks until the head leaves
    /// (the head keeps its permit; a fresh one opens when it leaves), and a
    /// fair head is no longer offered as heir.
    fn close(&mut self) {
        self.stalled = true;
        self.heir = None;
        self.parked_heirs.clear();
        if let Some(turn) = &self.turn {
            turn.close();
        }
    }
}

impl Lines {
    /// The part of the map that holds `lock`'s entry, locked.
    fn lines(&self, lock: &str) -> Locked<'_> {
        // FNV-1a: the shard only needs to spread names, not resist anyone.
        let hash = lock.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        let shard = &self.shards[(hash % SHARDS as u64) as usize];
        let map = shard.map.lock().unwrap_or_else(|p| p.into_inner());
        Locked {
            before: map.len(),
            map,
            entries: &self.entries,
            sweep_at: &shard.sweep_at,
        }
    }

    /// No lock has an entry: nothing waits and no hand-off is under way.
    fn is_empty(&self) -> bool {
        self.entries.load(std::sync::atomic::Ordering::Acquire) == 0
    }

    /// A task of this client starts waiting for `lock`; it stops when the
    /// returned value is dropped.
    pub(crate) fn join(self: &Arc<Self>, lock: &Arc<str>) -> Waiting {
        self.lines(lock).entry(lock.clone()).or_default().waiting += 1;
        Waiting::new(self, lock)
    }

    /// A task of this client wants `lock` (of a kind with a local line, see
    /// `Acquirer::local_line`): it waits in Redis if nobody else of this client
    /// does ([`Entry::Turn`]); otherwise it parks behind them
    /// ([`Entry::Park`]), sending nothing until its turn comes.
    ///
    /// Why: many tasks of one client waiting for one lock would all try, all
    /// fail, all sleep on the same message, and only one could win when it
    /// comes; the others' tries are wasted commands and their wait engines
    /// wasted memory (100,000 waiters of one client cost 1.9 KiB each in tasks
    /// alone). Parked, a waiter is a place in a queue; and the client's own
    /// tasks are served in order, as in the fair lock, while other clients
    /// still compete as Redisson's do.
    ///
    /// `queued` (a fair lock, whose waiters each keep an entry in Redis's
    /// queue): the task always parks first, with its ticket in the order its
    /// line's waiters join that queue, taken here so that it is the line's
    /// order; it joins when its ticket's turn comes and takes its place in
    /// the line's queue before the next may join, so that even the head
    /// comes in Redis's order (see `wait/queued.rs`).
    pub(crate) fn enter(self: &Arc<Self>, lock: &Arc<str>, queued: bool) -> Entry {
        let mut lines = self.lines(lock);
        if queued {
            // Entries outlive a fair lock's waiters (see `contended_until`).
            lines.sweep();
        }
        let line = lines.entry(lock.clone()).or_default();
        if line.stalled {
            return Entry::Bypass;
        }
        line.waiting += 1;
        let expects_wait = queued
            && crate::engine::heuristics::heuristics().listen_before_join
            && line.waiting == 1
            && line
                .contended_until
                .is_some_and(|until| until > Instant::now());
        let join = queued.then(|| line.joins.get_or_insert_with(Default::default).ticket());
        let turn = line
            .turn
            .get_or_insert_with(|| Arc::new(Semaphore::new(1)))
            .clone();
        let taken = match join {
            Some(_) => Err(()),
            None => turn.clone().try_acquire_owned().map_err(|_| ()),
        };
        if taken.is_ok() {
            // Nobody was in line: what the last head left is stale.
            line.held_here = None;
            line.head_due = Some(Instant::now() + self.first_due);
        }
        drop(lines);
        let waiting = Waiting::new(self, lock);
        match taken {
            Ok(permit) => Entry::Turn(Turn {
                _permit: permit,
                waiting,
                held_here: None,
                heir: None,
            }),
            Err(_) => Entry::Park(Parked {
                spot: LineSpot { turn, waiting },
                join,
                expects_wait,
            }),
        }
    }

    /// Starts this client's supervision of its local lines, on `spawner` (the
    /// client's own runtime): every [`SUPERVISE_EVERY`], a head past due
    /// (its future is no longer polled: say it sits in a `select!` whose other
    /// branch runs, maybe waiting for this very lock) releases the parked
    /// waiters behind it to wait in Redis on their own. A parked waiter then
    /// waits at most a TTL or a reply timeout, plus [`HEAD_GRACE`], for a head
    /// that does not move, as for a lost message. Ends with the client.
    pub(crate) fn supervise(self: &Arc<Self>, spawner: &crate::transport::background::Spawner) {
        let lines = Arc::downgrade(self);
        spawner.spawn(async move {
            loop {
                tokio::time::sleep(SUPERVISE_EVERY).await;
                let Some(lines) = lines.upgrade() else {
                    return;
                };
                if !lines.is_empty() {
                    lines.release_stalled(Instant::now());
                }
            }
        });
    }

    /// Marks every line whose head is past due at `now` stalled, and wakes its
    /// parked waiters.
    fn release_stalled(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut lines = shard.map.lock().unwrap_or_else(|p| p.into_inner());
            for (lock, line) in lines.iter_mut() {
                if line.stalled || line.head_due.is_none_or(|due| due > now) {
                    continue;
                }
                if let Some(confirming) = &line.confirming {
                    // Its server has yet to confirm: the head waits for it, as a
                    // head waits for a reply. Confirmed since (the head, if polled,
                    // says so itself): it acts within a reply timeout from here.
                    if !confirming.is_pending() {
                        line.confirming = None;
                        line.head_due = Some(now + self.first_due);
                    }
                    continue;
                }
                crate::trace::warn_event!(
                    "lock {lock:?}: the first of this client's waiters in line has not moved for {:?} \
                     past due (its future is not being polled); the others wait in Redis on their own",
                    now.saturating_duration_since(line.head_due.unwrap_or(now))
                );
                line.close();
            }
        }
    }

    /// How long a waiter of this client waits, at most, for a step of its
    /// line that never comes (a head's attempt answered, an earlier waiter's
    /// join answered) before it waits in Redis on its own: a reply timeout
    /// plus [`HEAD_GRACE`], as for a head that is not polled.
    pub(crate) fn patience(&self) -> Duration {
        self.first_due
    }

    /// How many of this client's tasks wait for `lock`.
    pub(crate) fn waiting(&self, lock: &str) -> usize {
        if self.is_empty() {
            return 0;
        }
        self.lines(lock).get(lock).map_or(0, |line| line.waiting)
    }

    /// A fair waiter of this client joined `lock`'s line in Redis behind
    /// others (the lock was busy): for [`CONTENDED_FOR`], a waiter that comes
    /// alone expects to wait too (see [`Parked::expects_wait`]).
    pub(crate) fn queued_behind_others(&self, lock: &str) {
        if let Some(line) = self.lines(lock).get_mut(lock) {
            line.contended_until = Some(Instant::now() + CONTENDED_FOR);
        }
    }

    /// This client's owner `releaser` releases the fair lock `lock`: the word
    /// that one of its tasks holds it is stale from now on, and the heir the
    /// release may grant the lock to, if one is offered (never the releasing
    /// owner itself), is returned, named (see [`Successor::named`]): its
    /// owner field and lease, for the release script. Under the line's lock,
    /// so a new head either is offered before and is told of the release, or
    /// comes after and does not trust the stale word.
    pub(crate) fn releasing(&self, lock: &str, releaser: &str) -> Option<(Arc<Successor>, Naming)> {
        if self.is_empty() {
            return None;
        }
        let mut lines = self.lines(lock);
        let line = lines.get_mut(lock)?;
        line.held_here = None;
        if line.heir.is_none() {
            // Those that left (or were granted) are no heirs any more.
            while line
                .parked_heirs
                .front()
                .is_some_and(|heir| !heir.is_waiting())
            {
                line.parked_heirs.pop_front();
            }
        }
        let heir = line
            .heir
            .as_ref()
            .or(line.parked_heirs.front())
            .filter(|heir| heir.owner() != releaser)?
            .clone();
        let naming = heir.named();
        Some((heir, naming))
    }

    /// Up to `most` of the fair lock `lock`'s parked heirs, first first, that
    /// are still parked and have no subscription made for them yet (see
    /// [`Successor::listen_ahead`]).
    pub(crate) fn heirs_to_listen_ahead(&self, lock: &str, most: usize) -> Vec<Arc<Successor>> {
        let lines = self.lines(lock);
        let Some(line) = lines.get(lock) else {
            return Vec::new();
        };
        line.parked_heirs
            .iter()
            .filter(|heir| heir.may_listen_ahead())
            .take(most)
            .cloned()
            .collect()
    }

    /// The heir offered for the fair lock `lock`, if any.
    pub(crate) fn heir(&self, lock: &str) -> Option<Arc<Successor>> {
        if self.is_empty() {
            return None;
        }
        self.lines(lock).get(lock)?.heir.clone()
    }
}

/// How often [`Lines::supervise`] looks for heads past due.
const SUPERVISE_EVERY: Duration = Duration::from_millis(250);

/// How late a head may act, past the end of its sleep or of its reply timeout,
/// before it counts as stalled: a polled task on a busy runtime is never this
/// late.
const HEAD_GRACE: Duration = Duration::from_secs(1);

/// Where a task entered a local line (see [`Lines::enter`]).
#[derive(Debug)]
pub(crate) enum Entry {
    /// Nobody else of this client waits: this task waits in Redis.
    Turn(Turn),
    /// Others do: wait for the turn with [`Parked::turn`].
    Park(Parked),
    /// The line's head stalled: wait in Redis, outside the line.
    Bypass,
}

/// The turn to wait for a lock in Redis; dropping it passes the turn to the
/// next parked task, if any.
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: OwnedSemaphorePermit,
    waiting: Waiting,
    held_here: Option<HeldHere>,
    /// A fair head offered as the heir of this client's releases.
    heir: Option<Arc<Successor>>,
}

/// The task before in the local line left it holding the lock.
#[derive(Debug, Clone)]
pub(crate) struct HeldHere {
    /// Until when its lease runs (the most a lost message can cost).
    pub(crate) until: Instant,
    /// The lock channel's subscription, confirmed when it took the lock: its
    /// release's message reaches this client if that subscription still
    /// stands. None for a fair lock: its release grants the lock to the next
    /// head, or tells it to try (see `successor.rs`).
    pub(crate) mark: Option<ChannelMark>,
}

impl Turn {
    /// Changes this head's line, under its shard's lock (nothing, if the line
    /// is gone).
    fn update_line(&self, change: impl FnOnce(&mut LineState)) {
        let mut lines = self.waiting.lines.lines(&self.waiting.lock);
        if let Some(line) = lines.get_mut(&self.waiting.lock) {
            change(line);
        }
    }

    /// This head acts next by `by` (the end of its sleep or of its attempt's
    /// reply timeout), if its future is being polled.
    pub(crate) fn due(&self, by: Instant) {
        self.update_line(|line| line.head_due = Some(by + HEAD_GRACE));
    }

    /// This head waits for its subscription's confirmation; see
    /// [`Lines::release_stalled`].
    pub(crate) fn confirming(&self, confirming: Confirming) {
        self.update_line(|line| line.confirming = Some(confirming));
    }

    /// This head's wait for its confirmation is over, and it acts next by
    /// `by`: both at once, so that the supervisor never sees the word gone
    /// and the old due still standing.
    pub(crate) fn confirmed(&self, by: Instant) {
        self.update_line(|line| {
            line.confirming = None;
            line.head_due = Some(by + HEAD_GRACE);
        });
    }

    /// Whether the task that had the turn before left holding the lock: then
    /// trying before its release is wasted, and its release's unlock message
    /// wakes this waiter.
    pub(crate) fn held_here_until(&self) -> Option<HeldHere> {
        self.held_here
            .clone()
            .filter(|held| held.until > Instant::now())
    }

    /// A fair head lost its entry in Redis's queue (an attempt of unknown
    /// outcome was settled, which leaves the place): it joins again at the
    /// tail, behind the parked waiters' entries, so the line no longer
    /// stands in Redis's order; closed, it lets them wait on their own.
    pub(crate) fn lost_place(&self) {
        self.update_line(|line| {
            if !line.stalled {
                crate::trace::debug_event!(
                    "fair lock {:?}: the first of this client's waiters lost its place in line \
                     (an attempt of unknown outcome); the others wait in Redis on their own",
                    self.waiting.lock
                );
                line.close();
            }
        });
    }

    /// The heir this head was offered as, if any.
    pub(crate) fn heir(&self) -> Option<&Arc<Successor>> {
        self.heir.as_ref()
    }

    /// This task took the lock: the next in line learns it. Passes the turn
    /// on (as dropping does).
    pub(crate) fn acquired(self, held: HeldHere) {
        self.update_line(|line| line.held_here = Some(held));
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // The head leaves (its permit goes to the next after this): a new head
        // is due when it says so, and the line is open again.
        let lines = self.waiting.lines.clone();
        let mut lines = lines.lines(&self.waiting.lock);
        if let Some(line) = lines.get_mut(&self.waiting.lock) {
            line.head_due = None;
            line.confirming = None;
            let offered = line.heir.as_ref().zip(self.heir.as_ref());
            if offered.is_some_and(|(line_heir, own)| Arc::ptr_eq(line_heir, own)) {
                line.heir = None;
            }
            if line.stalled {
                line.stalled = false;
                line.turn = None;
            }
        }
        // Under the same lock: one trip to the map per head that leaves.
        self.waiting.leave(&mut lines);
    }
}

/// A task parked in a local line.
#[derive(Debug)]
pub(crate) struct Parked {
    spot: LineSpot,
    /// A fair waiter's place in the join order (see [`Lines::enter`]).
    join: Option<JoinTicket>,
    /// A fair waiter that came alone to a line whose waiters lately joined
    /// a busy lock: it listens before it joins (see `wait/queued.rs`).
    expects_wait: bool,
}

impl Parked {
    /// Waits for the turn (see [`LineSpot::turn`]); a fair waiter's ticket is
    /// done with.
    pub(crate) fn turn(
        self,
        heir: Option<Arc<Successor>>,
    ) -> impl Future<Output = Option<Turn>> + Send {
        self.spot.turn(heir)
    }

    /// A fair waiter's place in the order its line joins Redis's queue in
    /// (see `join_order.rs`), to be done once its join is answered, and the
    /// spot it waits in for its turn: apart, so that a parked waiter's turn
    /// has no room for the ticket.
    pub(crate) fn join_ticket(self) -> (Option<JoinTicket>, LineSpot) {
        (self.join, self.spot)
    }

    /// A fair waiter that came alone to a line whose waiters lately joined a
    /// busy lock: it will wait in Redis, so it listens before it joins, and
    /// its join is the attempt that must follow a new subscription.
    pub(crate) fn expects_wait(&self) -> bool {
        self.expects_wait
    }
}

/// What a parked task keeps while it waits for its turn: the line's turn,
/// and its count in the line.
#[derive(Debug)]
pub(crate) struct LineSpot {
    turn: Arc<Semaphore>,
    waiting: Waiting,
}

impl LineSpot {
    /// Waits for the turn, first come first served; `None` when the head
    /// stalled (see [`Lines::supervise`]): then wait in Redis on your own.
    ///
    /// `heir`: a fair waiter offered as the heir of this client's releases
    /// once it is the head, in the same step as it learns whether a task of
    /// this client holds the lock (see [`Lines::releasing`]).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped wait leaves the line; a turn handed to it meanwhile
    /// passes on to the next.
    // Not an `async fn`, and the fields used in place, not taken out: each
    // would otherwise be kept twice in a parked waiter's future.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn turn(
        self,
        heir: Option<Arc<Successor>>,
    ) -> impl Future<Output = Option<Turn>> + Send {
        async move {
            let waiting = &self.waiting;
            // Offered as a parked heir in the order of the turn's queue: both
            // before the first await.
            if let Some(heir) = &heir {
                if let Some(line) = waiting.lines.lines(&waiting.lock).get_mut(&waiting.lock) {
                    line.parked_heirs.push_back(heir.clone());
                }
            }
            // Closed: the head stalled.
            let permit = self.turn.clone().acquire_owned().await.ok();
            let held_here = waiting
                .lines
                .lines(&waiting.lock)
                .get_mut(&waiting.lock)
                .and_then(|line| {
                    if let Some(heir) = &heir {
                        line.parked_heirs
                            .retain(|parked| !Arc::ptr_eq(parked, heir));
                    }
                    permit.as_ref()?;
                    line.head_due = Some(Instant::now() + waiting.lines.first_due);
                    if heir.is_some() {
                        line.heir = heir.clone();
                    }
                    // A release naming it is on its way: it waits for that word
                    // as for the release of a hold of this client's, at most a
                    // reply timeout (and the grace) if the release is dropped.
                    let word_due = || HeldHere {
                        until: Instant::now() + waiting.lines.first_due,
                        mark: None,
                    };
                    let awaits_word = heir.as_ref().is_some_and(|heir| heir.awaits_word());
                    let held_here = line.held_here.take();
                    held_here.or_else(|| awaits_word.then(word_due))
                });
            let permit = permit?;
            Some(Turn {
                _permit: permit,
                waiting: self.waiting,
                held_here,
                heir,
            })
        }
    }
}

/// One waiting task, counted in its lock's line while this lives.
#[derive(Debug)]
pub(crate) struct Waiting {
    lines: Arc<Lines>,
    lock: Arc<str>,
    /// Still counted (a turn ends its count itself, under its own lock).
    counted: bool,
}

impl Waiting {
    fn new(lines: &Arc<Lines>, lock: &Arc<str>) -> Waiting {
        Waiting {
            lines: lines.clone(),
            lock: lock.clone(),
            counted: true,
        }
    }

    /// Stops counting this task, in `lines` (its lock's part of the map,
    /// locked); the entry goes when nothing is left in it.
    fn leave(&mut self, lines: &mut HashMap<Arc<str>, LineState>) {
        if !std::mem::take(&mut self.counted) {
            return;
        }
        if let Some(line) = lines.get_mut(&self.lock) {
            line.waiting = line.waiting.saturating_sub(1);
            if line.waiting == 0 && !line.outlives_its_waiters(Instant::now()) {
                lines.remove(&self.lock);
            }
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.counted {
            let lines = self.lines.clone();
            self.leave(&mut lines.lines(&self.lock));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_local_line_hands_the_turn_on_in_arrival_order() {
        let lines = Arc::new(Lines::new(Duration::from_secs(3)));
        let lock: Arc<str> = "l".into();
        let Entry::Turn(head) = lines.enter(&lock, false) else {
            panic!("the first to come must have the turn");
        };
        let parked: Vec<_> = (0..3)
            .map(|_| match lines.enter(&lock, false) {
                Entry::Park(parked) => parked,
                Entry::Turn(_) | Entry::Bypass => panic!("the turn is taken"),
            })
            .collect();
        assert_eq!(lines.waiting("l"), 4);
        let mut turns: Vec<_> = parked.into_iter().map(|p| Box::pin(p.turn(None))).collect();
        assert!(turns.iter_mut().all(|t| poll_once(t.as_mut()).is_none()));
        // The head leaves holding the lock: the next learns it.
        let until = Instant::now() + Duration::from_secs(30);
        head.acquired(HeldHere {
            until,
            mark: Some(ChannelMark::of_nothing(7)),
        });
        // The second parked one is cancelled; the turn skips it.
        drop(turns.remove(1));
        let next = poll_once(turns[0].as_mut())
            .expect("the first parked has the turn")
            .expect("no stall");
        assert_eq!(
            next.held_here_until()
                .and_then(|held| held.mark.as_ref().map(ChannelMark::request)),
            Some(7)
        );
        assert!(poll_once(turns[1].as_mut()).is_none(), "one turn at a time");
        drop(next);
        let last = poll_once(turns[1].as_mut())
            .expect("then the last")
            .expect("no stall");
        assert!(
            last.held_here_until().is_none(),
            "told once, to the next only"
        );
        assert_eq!(lines.waiting("l"), 1);
        drop(last);
        assert_eq!(lines.waiting("l"), 0);
        assert!(lines.is_empty(), "nothing kept for an idle lock");

        // A head that left holding the lock with nobody behind it: its word
        // is not passed to a later line (the entry kept alive meanwhile by a
        // waiter of the old kind).
        let _kept = lines.join(&lock);
        let Entry::Turn(alone) = lines.enter(&lock, false) else {
            panic!("nobody in line");
        };
        alone.acquired(HeldHere {
            until,
            mark: Some(ChannelMark::of_nothing(8)),
        });
        let Entry::Turn(later) = lines.enter(&lock, false) else {
            panic!("nobody in line");
        };
        let Entry::Park(behind) = lines.enter(&lock, false) else {
            panic!("the turn is taken");
        };
        drop(later);
        let mut behind = Box::pin(behind.turn(None));
        let turn = poll_once(behind.as_mut())
            .expect("its turn")
            .expect("no stall");
        assert!(
            turn.held_here_until().is_none(),
            "a stale word was passed on"
        );
    }

    /// A line of lock "l" (3 s reply timeout): its head, and one parked
    /// behind it.
    fn a_head_and_one_parked() -> (Arc<Lines>, Arc<str>, Turn, Parked) {
        let lines = Arc::new(Lines::new(Duration::from_secs(3)));
        let lock: Arc<str> = "l".into();
        let Entry::Turn(head) = lines.enter(&lock, false) else {
            panic!("the first to come must have the turn");
        };
        let Entry::Park(parked) = lines.enter(&lock, false) else {
            panic!("the turn is taken");
        };
        (lines, lock, head, parked)
    }

    #[tokio::test]
    async fn a_head_past_due_releases_the_parked_and_closes_the_line_until_it_leaves() {
        let (lines, lock, head, parked) = a_head_and_one_parked();
        let mut parked = Box::pin(parked.turn(None));
        let now = Instant::now();
        head.due(now + Duration::from_secs(5));
        lines.release_stalled(now + Duration::from_secs(5));
        assert!(
            poll_once(parked.as_mut()).is_none(),
            "not past due yet (grace)"
        );
        lines.release_stalled(now + Duration::from_secs(5) + HEAD_GRACE * 2);
        assert!(
            matches!(poll_once(parked.as_mut()), Some(None)),
            "the parked one is sent to wait on its own"
        );
        assert!(
            matches!(lines.enter(&lock, false), Entry::Bypass),
            "nobody parks now"
        );
        drop(head);
        let Entry::Turn(_next) = lines.enter(&lock, false) else {
            panic!("open again once the stalled head left");
        };
    }

    #[tokio::test]
    async fn a_head_waiting_for_its_subscription_is_judged_from_the_confirmation() {
        let (lines, _, head, parked) = a_head_and_one_parked();
        let mut parked = Box::pin(parked.turn(None));
        let now = Instant::now();
        head.due(now);
        let (confirming, confirm) = Confirming::detached();
        head.confirming(confirming);
        // Long past due, but its server has yet to confirm (a burst keeps it
        // busy): the head waits for it, the line stays open.
        let later = now + Duration::from_secs(60);
        lines.release_stalled(later);
        assert!(
            poll_once(parked.as_mut()).is_none(),
            "a head waiting for its server was taken for an unpolled one"
        );
        // Confirmed, and the head (not polled) says nothing: it is due a reply
        // timeout and the grace from when the confirmation was seen.
        confirm();
        lines.release_stalled(later);
        lines.release_stalled(later + Duration::from_secs(3));
        assert!(
            poll_once(parked.as_mut()).is_none(),
            "judged before its due from the confirmation"
        );
        lines.release_stalled(later + Duration::from_secs(3) + HEAD_GRACE * 2);
        assert!(
            matches!(poll_once(parked.as_mut()), Some(None)),
            "a head confirmed and then not polled still releases the parked"
        );
    }

    /// Polls `future` once with a no-op waker.
    fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.poll(&mut cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    }
}
