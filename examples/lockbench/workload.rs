//! The contended run: T tasks over C clients and L locks, each op an acquire, a
//! busy hold and a release, with the bookkeeping of overlaps, handoffs, barges
//! and fairness, and the server's command counts around it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_locks::Client;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::contend::{task_locks, TaskLocks};
use crate::observe::{command_diff, percentiles, rss_kib, CommandCounts, Observer};
use crate::options::{err, Kind, Options};

/// The last release of one lock, waiting for the next acquisition to claim it.
struct Release {
    at: Instant,
    by: usize,
    /// Did anyone else wait at that moment?
    contended: bool,
}

#[derive(Default)]
struct LockState {
    writers: AtomicI64,
    readers: AtomicI64,
    waiting: Mutex<HashMap<usize, Instant>>,
    last_release: Mutex<Option<Release>>,
}

pub(crate) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    capped: AtomicBool,
    overlaps: AtomicU64,
    acquisitions: AtomicU64,
    first_done: AtomicBool,
    fairness_at_first_done: Mutex<Vec<u64>>,
    latencies: Mutex<Vec<Duration>>,
    handoffs: Mutex<Vec<Duration>>,
    waiter_handoffs: Mutex<Vec<Duration>>,
    barges: AtomicU64,
    /// Every acquisition, for the short-term measures (`short_term.rs`).
    acquisitions_made: Mutex<Vec<crate::short_term::Acquisition>>,
}

/// What the tasks of a run keep together: each lock's state, the run's totals
/// and each task's count of acquisitions.
#[derive(Clone)]
struct Books {
    states: Arc<Vec<LockState>>,
    shared: Arc<Shared>,
    per_task: Arc<Vec<AtomicU64>>,
}

/// The spawned tasks, with the command counts and the time at which the
/// measured run began (after the warm-up).
struct Running {
    tasks: Vec<JoinHandle<Result<(), String>>>,
    before: HashMap<String, u64>,
    started: Instant,
}

pub(crate) async fn workload(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let clients = connect(o, url).await?;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let books = Books {
        states: Arc::new((0..o.locks).map(|_| LockState::default()).collect()),
        shared: Arc::new(Shared::default()),
        per_task: Arc::new((0..o.tasks).map(|_| AtomicU64::new(0)).collect()),
    };
    let mut observer = Observer::new(url).await?;
    let rss_start = rss_kib();

    // Sample connections and subscriptions while the run goes on.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = tokio::spawn(sample(url.to_owned(), sampling.clone()));

    let running = spawn_tasks(o, &clients, &run, &mut observer, &books).await?;
    let limit = Duration::from_secs_f64(o.max_seconds);
    let stopper = tokio::spawn({
        let shared = books.shared.clone();
        async move {
            tokio::time::sleep(limit).await;
            shared.stop.store(true, Ordering::Relaxed);
        }
    });
    for task in running.tasks {
        task.await.map_err(err)??;
    }
    let wall = running.started.elapsed();
    stopper.abort();
    let after = observer.command_stats().await?;
    sampling.store(false, Ordering::Relaxed);
    let peaks = sampler.await.map_err(err)??;
    let commands = command_diff(&running.before, &after);
    Ok(report(o, &books.shared, wall, commands, peaks, rss_start))
}

/// `--clients` clients of the library.
async fn connect(o: &Options, url: &str) -> Result<Vec<Client>, String> {
    let config = crate::options::client_config(url)?;
    let mut clients = Vec::new();
    for _ in 0..o.clients {
        clients.push(Client::connect(config.clone()).await.map_err(err)?);
    }
    Ok(clients)
}

/// The peak (connections, subscriptions, RSS in KiB), sampled every 10 ms
/// while `sampling` says so.
async fn sample(url: String, sampling: Arc<AtomicBool>) -> Result<(u64, u64, u64), String> {
    let mut observer = Observer::new(&url).await?;
    let (mut peak_conns, mut peak_subs, mut peak_rss) = (0, 0, 0);
    while sampling.load(Ordering::Relaxed) {
        let (conns, subs) = observer.clients().await?;
        peak_conns = peak_conns.max(conns);
        peak_subs = peak_subs.max(subs);
        peak_rss = peak_rss.max(rss_kib());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok((peak_conns, peak_subs, peak_rss))
}

/// Builds each task's locks and spawns it, in order; before spawning task 0,
/// warms the scripts up and starts the command counts and the clock.
async fn spawn_tasks(
    o: &Options,
    clients: &[Client],
    run: &str,
    observer: &mut Observer,
    books: &Books,
) -> Result<Running, String> {
    let mut before = HashMap::new();
    let mut started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..o.tasks {
        let slot = task % o.locks;
        let locks = task_locks(o, clients, task, format!("lockbench:{run}:{slot}")).await?;
        let write_pct = match o.kind {
            Kind::Read => 0,
            Kind::RwMix => o.write_pct,
            _ => 100,
        };
        if task == 0 {
            // Warm up: the server caches the scripts on their first use (a
            // NOSCRIPT reply, then EVAL), a cost once per server, not per
            // acquisition; the counts below are the steady state.
            locks
                .contender
                .acquire(&locks.exclusive)
                .await?
                .release()
                .await?;
            if let Some(side) = &locks.shared_side {
                locks.contender.acquire(side).await?.release().await?;
            }
            before = observer.command_stats().await?;
            started = Instant::now();
        }
        let worker = Worker {
            task,
            slot,
            ops: o.ops,
            hold: o.hold,
            write_pct,
            locks,
            books: books.clone(),
        };
        tasks.push(tokio::spawn(worker.run()));
    }
    Ok(Running {
        tasks,
        before,
        started,
    })
}

/// One task: `ops` acquisitions of its lock slot (reads or writes by
/// `write_pct`), each held `hold`.
struct Worker {
    task: usize,
    slot: usize,
    ops: usize,
    hold: Duration,
    write_pct: usize,
    locks: TaskLocks,
    books: Books,
}

impl Worker {
    async fn run(self) -> Result<(), String> {
        let (shared, per_task) = (&self.books.shared, &self.books.per_task);
        let state = &self.books.states[self.slot];
        for op in 0..self.ops {
            if shared.stop.load(Ordering::Relaxed) {
                shared.capped.store(true, Ordering::Relaxed);
                break;
            }
            let is_write = (self.task * 7 + op * 13) % 100 < self.write_pct;
            let lock = match (&self.locks.shared_side, is_write) {
                (Some(side), false) => side,
                _ => &self.locks.exclusive,
            };
            let asked = Instant::now();
            locked(&state.waiting).insert(self.task, asked);
            let guard = self.locks.contender.acquire(lock).await?;
            let got = Instant::now();
            locked(&state.waiting).remove(&self.task);
            locked(&shared.latencies).push(got - asked);
            shared.acquisitions.fetch_add(1, Ordering::Relaxed);
            self.entered(state, is_write, asked, got);
            // A busy hold that yields to the runtime.
            while got.elapsed() < self.hold {
                tokio::task::yield_now().await;
            }
            self.leaving(state, is_write);
            let released = Instant::now();
            guard.release().await?;
            locked(&shared.acquisitions_made).push(crate::short_term::Acquisition {
                task: self.task,
                asked,
                got,
                released,
            });
            per_task[self.task].fetch_add(1, Ordering::Relaxed);
        }
        if !shared.first_done.swap(true, Ordering::SeqCst) {
            *locked(&shared.fairness_at_first_done) =
                per_task.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        }
        Ok(())
    }

    /// Just acquired (asked at `asked`, got at `got`): counts an overlap (a
    /// writer not alone, a reader beside a writer); a write claims the lock's
    /// last release, a handoff when others waited then, a barge when that
    /// release was this task's own, a handoff to a waiter when it asked before.
    fn entered(&self, state: &LockState, is_write: bool, asked: Instant, got: Instant) {
        let shared = &self.books.shared;
        let overlap = if is_write {
            state.writers.fetch_add(1, Ordering::SeqCst) != 0
                || state.readers.load(Ordering::SeqCst) != 0
        } else {
            state.readers.fetch_add(1, Ordering::SeqCst);
            state.writers.load(Ordering::SeqCst) != 0
        };
        if overlap {
            shared.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        if is_write {
            if let Some(release) = locked(&state.last_release).take() {
                if release.contended {
                    let gap = got - release.at;
                    locked(&shared.handoffs).push(gap);
                    if release.by == self.task {
                        shared.barges.fetch_add(1, Ordering::Relaxed);
                    } else if asked < release.at {
                        locked(&shared.waiter_handoffs).push(gap);
                    }
                }
            }
        }
    }

    /// About to release: leaves, and a write records its release (and whether
    /// anyone waited) for the next acquisition.
    fn leaving(&self, state: &LockState, is_write: bool) {
        if is_write {
            state.writers.fetch_sub(1, Ordering::SeqCst);
            let contended = !locked(&state.waiting).is_empty();
            *locked(&state.last_release) = Some(Release {
                at: Instant::now(),
                by: self.task,
                contended,
            });
        } else {
            state.readers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Jain's fairness index of the counts: 1.0 when all are equal (and when all
/// are zero).
pub(crate) fn jain(counts: &[u64]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sum_sq: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
    if sum_sq > 0.0 {
        sum * sum / (counts.len() as f64 * sum_sq)
    } else {
        1.0
    }
}

/// The run's JSON line (before `metrics` and `floor` are added to it).
fn report(
    o: &Options,
    shared: &Shared,
    wall: Duration,
    commands: CommandCounts,
    (peak_conns, peak_subs, peak_rss): (u64, u64, u64),
    rss_start: u64,
) -> serde_json::Value {
    let acquisitions = shared.acquisitions.load(Ordering::Relaxed);
    let counts = locked(&shared.fairness_at_first_done).clone();
    let handoffs = std::mem::take(&mut *locked(&shared.handoffs));
    let barges = shared.barges.load(Ordering::Relaxed);
    let barge_pct = if handoffs.is_empty() {
        0.0
    } else {
        100.0 * barges as f64 / handoffs.len() as f64
    };
    json!({
        "workload": o.workload, "kind": o.kind.name(), "tasks": o.tasks, "clients": o.clients, "locks": o.locks,
        // A semaphore's permits: with more than one, "overlaps" counts holders
        // beside another, as they should be (up to permits - 1 at once).
        "permits": o.permits,
        "ops": o.ops, "hold_us": o.hold.as_micros() as u64,
        "capped": shared.capped.load(Ordering::Relaxed),
        "acquisitions": acquisitions,
        "wall_s": wall.as_secs_f64(),
        "acq_per_s": acquisitions as f64 / wall.as_secs_f64(),
        "overlaps": shared.overlaps.load(Ordering::Relaxed),
        "acq_lat_us": percentiles(std::mem::take(&mut *locked(&shared.latencies))),
        "handoff_gap_us": percentiles(handoffs),
        "waiter_handoff_us": percentiles(std::mem::take(&mut *locked(&shared.waiter_handoffs))),
        "barge_pct": barge_pct,
        "fairness": {
            "min": counts.iter().min().copied().unwrap_or(0),
            "max": counts.iter().max().copied().unwrap_or(0),
            "jain": jain(&counts),
        },
        "short_term": crate::short_term::measures(std::mem::take(&mut *locked(&shared.acquisitions_made))),
        "redis_cmds": commands.client,
        "cmds_per_acq": commands.client as f64 / (acquisitions.max(1)) as f64,
        "cmds_by_command": commands.by_command,
        "script_inner_cmds": commands.inner,
        "connections": peak_conns,
        "peak_subscriptions": peak_subs,
        "rss_kib": {"start": rss_start, "peak": peak_rss},
    })
}
