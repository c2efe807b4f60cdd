//! `--scale nested`: nested locks in one global order, across real processes.
//!
//! `--processes` child processes (this binary again, `--nested-child`), each
//! with `--clients` clients shared by `--tasks` tasks. Every round a task takes
//! two of the mix's locks in one global order (the lower index first), holds
//! the first 0 to 20 ms, takes the second, holds it 0 to 10 ms, and releases
//! both; for `--seconds`. No faults. The default mix is the review's: locks
//! 1 and 3 fair, 0 and 2 reentrant; `--mix all` adds a read-write lock (each
//! round a writer or a reader), a fenced lock and a semaphore of two permits.
//!
//! What it measures is liveness: a round that takes seconds means a waiter
//! slept while a lock it could take was free. The report gives the rounds,
//! those over 2 s and over 5 s, the longest, percentiles, and each process's
//! share (Jain's index). `--without a,b` runs the children with those
//! heuristics switched off (`REDISSON_LOCKS_WITHOUT`), and `--each-heuristic`
//! runs one row per heuristic off, one with none and one with all off,
//! interleaved over `--rounds` repetitions.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_locks::{Client, LockGuard};
use serde_json::json;

use crate::options::err;
use crate::progress::{report_by_kind, Admits, Held as Hold, LockHistory, Waited};

/// Nanoseconds of CLOCK_MONOTONIC: one clock for every process of a run.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// How long after the run's end a round still running is cut: counted as a
/// round of the length it had then, and the run says how many were cut.
const ROUND_CUT: Duration = Duration::from_secs(40);

/// The stall bound the report counts against: a release's message, the
/// waiter's attempt and a loaded machine's delay fit well within it.
const STALL_BOUND_MS: f64 = 50.0;

/// The heuristics the engine can run without (`engine/heuristics.rs`).
pub(crate) const HEURISTICS: [&str; 9] = [
    "handoff_window",
    "held_here",
    "wake_jitter",
    "sleep_first",
    "unsubscribe_linger",
    "fair_line",
    "release_grant",
    "listen_before_join",
    "listen_ahead",
];

/// What one nested run is.
#[derive(Debug, Clone)]
pub(crate) struct Nested {
    pub(crate) processes: usize,
    pub(crate) clients: usize,
    pub(crate) tasks: usize,
    pub(crate) seconds: f64,
    pub(crate) all_kinds: bool,
    pub(crate) without: String,
}

/// One lock of the mix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lock {
    Reentrant,
    Fair,
    ReadWrite,
    Fenced,
    Semaphore,
}

impl Lock {
    fn name(self) -> &'static str {
        match self {
            Lock::Reentrant => "reentrant",
            Lock::Fair => "fair",
            Lock::ReadWrite => "read-write",
            Lock::Fenced => "fenced",
            Lock::Semaphore => "semaphore",
        }
    }

    fn admits(self) -> Admits {
        match self {
            Lock::ReadWrite => Admits::ReadersOrWriter,
            Lock::Semaphore => Admits::Permits(2),
            _ => Admits::One,
        }
    }

    fn mix(all_kinds: bool) -> Vec<Lock> {
        use Lock::*;
        match all_kinds {
            false => vec![Reentrant, Fair, Reentrant, Fair],
            true => vec![Reentrant, Fair, ReadWrite, Fenced, Semaphore, Fair],
        }
    }
}

/// A hold of one lock of the mix.
enum Held {
    Guard(LockGuard),
    Permit(redisson_locks::RSemaphore),
}

impl Held {
    async fn release(self) -> Result<(), String> {
        match self {
            Held::Guard(guard) => guard.unlock().await.map_err(err),
            Held::Permit(semaphore) => semaphore.release().await.map_err(err),
        }
    }
}

/// A small random source per task (xorshift, seeded from a fresh UUID).
struct Draw(u64);

impl Draw {
    fn new() -> Draw {
        Draw(uuid::Uuid::new_v4().as_u64_pair().0 | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Takes lock `index` (of kind `lock`) of the run `run` on `client`.
/// `(hold, whether it is a read hold)`.
async fn take(
    client: &Client,
    run: &str,
    index: usize,
    lock: Lock,
    draw: &mut Draw,
) -> Result<(Held, bool), String> {
    let name = format!("lockbench:{run}:nested:{index}");
    let read = lock == Lock::ReadWrite && draw.below(2) == 1;
    Ok((
        match lock {
            Lock::Reentrant => Held::Guard(
                client
                    .get_lock(name)
                    .map_err(err)?
                    .lock()
                    .await
                    .map_err(err)?,
            ),
            Lock::Fair => Held::Guard(
                client
                    .get_fair_lock(name)
                    .map_err(err)?
                    .lock()
                    .await
                    .map_err(err)?,
            ),
            Lock::Fenced => Held::Guard(
                client
                    .get_fenced_lock(name)
                    .map_err(err)?
                    .lock()
                    .await
                    .map_err(err)?,
            ),
            Lock::ReadWrite => {
                let rw = client.get_read_write_lock(name).map_err(err)?;
                let side = if read {
                    rw.read_lock()
                } else {
                    rw.write_lock()
                };
                Held::Guard(side.lock().await.map_err(err)?)
            }
            Lock::Semaphore => {
                let semaphore = client.get_semaphore(name).map_err(err)?;
                semaphore.acquire().await.map_err(err)?;
                Held::Permit(semaphore)
            }
        },
        read,
    ))
}

/// One acquisition as it went: the lock, the wait (call to return), the
/// hold (return to release), whether a read.
type Taken = (usize, u64, u64, u64, bool);

/// What a child's tasks finished, and the rounds they are in.
#[derive(Debug, Default)]
struct Done {
    rounds: Vec<f64>,
    taken: Vec<Taken>,
    /// Per task, since when its current round runs.
    running: Vec<Option<Instant>>,
}

/// Gives the mix's semaphores their two permits (once: a later call finds
/// them set).
async fn set_permits(client: &Client, run: &str, mix: &[Lock]) -> Result<(), String> {
    for (index, _) in mix
        .iter()
        .enumerate()
        .filter(|(_, lock)| **lock == Lock::Semaphore)
    {
        let name = format!("lockbench:{run}:nested:{index}");
        client
            .get_semaphore(name)
            .map_err(err)?
            .try_set_permits(2)
            .await
            .map_err(err)?;
    }
    Ok(())
}

/// One child process: `clients` clients shared by `tasks` tasks, rounds for
/// `seconds`; prints each round's duration in ms as one JSON line.
pub(crate) async fn child(
    url: &str,
    run: &str,
    nested: &Nested,
) -> Result<serde_json::Value, String> {
    let config = crate::options::client_config(url)?;
    let mut clients = Vec::new();
    for _ in 0..nested.clients {
        clients.push(Client::connect(config.clone()).await.map_err(err)?);
    }
    let mix = Lock::mix(nested.all_kinds);
    set_permits(&clients[0], run, &mix).await?;
    let until = Instant::now() + Duration::from_secs_f64(nested.seconds);
    // Shared, so that a task cut at the end keeps what it finished.
    let done = Arc::new(Mutex::new(Done {
        running: vec![None; nested.tasks],
        ..Done::default()
    }));
    let mut tasks = Vec::new();
    for t in 0..nested.tasks {
        let client = clients[t % clients.len()].clone();
        let (mix, run, done) = (mix.clone(), run.to_owned(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut draw = Draw::new();
            while Instant::now() < until {
                let first = draw.below(mix.len() as u64 - 1) as usize;
                let second = first + 1 + draw.below((mix.len() - first - 1) as u64) as usize;
                let started = Instant::now();
                done.lock().unwrap_or_else(|p| p.into_inner()).running[t] = Some(started);
                let asked = monotonic_ns();
                let (outer, outer_read) = take(&client, &run, first, mix[first], &mut draw).await?;
                let outer_got = monotonic_ns();
                tokio::time::sleep(Duration::from_millis(draw.below(21))).await;
                let inner_asked = monotonic_ns();
                let (inner, inner_read) =
                    take(&client, &run, second, mix[second], &mut draw).await?;
                let inner_got = monotonic_ns();
                tokio::time::sleep(Duration::from_millis(draw.below(11))).await;
                let inner_released = monotonic_ns();
                inner.release().await?;
                let outer_released = monotonic_ns();
                outer.release().await?;
                let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
                done.taken
                    .push((second, inner_asked, inner_got, inner_released, inner_read));
                done.taken
                    .push((first, asked, outer_got, outer_released, outer_read));
                done.rounds.push(started.elapsed().as_secs_f64() * 1e3);
                done.running[t] = None;
            }
            Ok::<_, String>(())
        }));
    }
    // A round still running well after the end (a waiter asleep on a free
    // lock for a lease, or longer) is cut there, and counted at its length
    // so far: the run's length stays bounded whatever the engine does.
    let cut_at = tokio::time::Instant::from_std(until) + ROUND_CUT;
    for task in tasks {
        if let Ok(finished) = tokio::time::timeout_at(cut_at, task).await {
            finished.map_err(err)??;
        }
    }
    let mut done = std::mem::take(&mut *done.lock().unwrap_or_else(|p| p.into_inner()));
    let cut: Vec<f64> = done
        .running
        .iter()
        .flatten()
        .map(|at| at.elapsed().as_secs_f64() * 1e3)
        .collect();
    done.rounds.extend(&cut);
    for client in clients {
        client.close().await;
    }
    Ok(json!({ "rounds_ms": done.rounds, "taken": done.taken, "cut": cut.len() }))
}

/// Runs the children against `url` and sums up their rounds.
pub(crate) async fn nested(url: &str, nested: &Nested) -> Result<serde_json::Value, String> {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let exe = std::env::current_exe().map_err(err)?;
    let mut children = Vec::new();
    for _ in 0..nested.processes {
        let mut command = std::process::Command::new(&exe);
        command
            .args(["--nested-child", "--url", url, "--run", &run])
            .args(["--clients", &nested.clients.to_string()])
            .args(["--tasks", &nested.tasks.to_string()])
            .args(["--seconds", &nested.seconds.to_string()])
            .env("REDISSON_LOCKS_WITHOUT", &nested.without)
            .stdout(std::process::Stdio::piped());
        if nested.all_kinds {
            command.args(["--mix", "all"]);
        }
        if let Some(recheck) = crate::options::recheck_flag() {
            command.args(["--recheck-ms", &recheck]);
        }
        children.push(command.spawn().map_err(err)?);
    }
    let mut per_process = Vec::new();
    let mut cut = 0;
    let mut per_lock = Vec::new();
    let mix = Lock::mix(nested.all_kinds);
    let mut locks: Vec<LockHistory> = vec![LockHistory::default(); mix.len()];
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .map_err(err)?
            .map_err(err)?;
        if !output.status.success() {
            return Err(format!("a nested child failed: {}", output.status));
        }
        let line: serde_json::Value =
            serde_json::from_slice(&output.stdout).map_err(|e| format!("a child's report: {e}"))?;
        let rounds: Vec<f64> = line["rounds_ms"]
            .as_array()
            .map(|rounds| {
                rounds
                    .iter()
                    .filter_map(serde_json::Value::as_f64)
                    .collect()
            })
            .unwrap_or_default();
        per_process.push(rounds);
        cut += line["cut"].as_u64().unwrap_or(0);
        let taken: Vec<Taken> = serde_json::from_value(line["taken"].clone())
            .map_err(|e| format!("a child's history: {e}"))?;
        let mut mine = vec![0_usize; mix.len()];
        for (lock, asked, got, released, read) in taken {
            mine[lock] += 1;
            let history = &mut locks[lock];
            history.waits.push(Waited {
                from_ns: asked,
                to_ns: got,
                read,
            });
            history.holds.push(Hold {
                from_ns: got,
                to_ns: released,
                read,
            });
        }
        per_lock.push(mine);
    }
    let mut report = summary(nested, per_process);
    let names: Vec<String> = (0..mix.len()).map(|i| i.to_string()).collect();
    let stalls = report_by_kind(
        names
            .iter()
            .zip(&mix)
            .zip(&locks)
            .map(|((name, lock), history)| (name.as_str(), lock.admits(), history)),
        |name| {
            name.parse::<usize>()
                .ok()
                .and_then(|i| mix.get(i))
                .map_or("?", |l| l.name())
                .to_owned()
        },
        STALL_BOUND_MS,
    );
    let stalls: serde_json::Map<String, serde_json::Value> = stalls
        .into_iter()
        .map(|(kind, r)| {
            (kind, json!({ "stalls": r.stalls, "longest_ms": r.longest_ms, "p99_ms": r.p99_ms, "over_50ms": r.over_bound }))
        })
        .collect();
    if let Some(map) = report.as_object_mut() {
        map.insert("stalls_by_kind".into(), serde_json::Value::Object(stalls));
        map.insert("tasks_cut".into(), json!(cut));
        map.insert("acquisitions_per_process_by_lock".into(), json!(per_lock));
    }
    Ok(report)
}

/// The report of one run: rounds, slow rounds, the longest, percentiles,
/// and the processes' shares.
fn summary(nested: &Nested, per_process: Vec<Vec<f64>>) -> serde_json::Value {
    let counts: Vec<f64> = per_process.iter().map(|r| r.len() as f64).collect();
    let mut all: Vec<f64> = per_process.into_iter().flatten().collect();
    all.sort_by(f64::total_cmp);
    let at = |q: f64| {
        all.get(((all.len() as f64 - 1.0) * q).round().max(0.0) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let sum: f64 = counts.iter().sum();
    let squares: f64 = counts.iter().map(|c| c * c).sum();
    let jain = if squares > 0.0 {
        sum * sum / (counts.len() as f64 * squares)
    } else {
        0.0
    };
    json!({
        "scale": "nested",
        "mix": if nested.all_kinds { "all" } else { "fair-reentrant" },
        "without": nested.without,
        "processes": nested.processes,
        "clients_per_process": nested.clients,
        "tasks_per_process": nested.tasks,
        "seconds": nested.seconds,
        "rounds": all.len(),
        "rounds_over_2s": all.iter().filter(|&&ms| ms > 2_000.0).count(),
        "rounds_over_5s": all.iter().filter(|&&ms| ms > 5_000.0).count(),
        "longest_round_ms": all.last().copied().unwrap_or(0.0),
        "p50_ms": at(0.5),
        "p99_ms": at(0.99),
        "rounds_per_process": counts,
        "jain_processes": jain,
    })
}

/// `--each-heuristic`: the run once with every heuristic on, once with each
/// off, once with all off, `repeats` times over, interleaved; one row each.
pub(crate) async fn each_heuristic(
    url: &str,
    base: &Nested,
    repeats: usize,
) -> Result<serde_json::Value, String> {
    let mut rows: Vec<(String, Vec<serde_json::Value>)> = std::iter::once(String::new())
        .chain(HEURISTICS.iter().map(|h| (*h).to_owned()))
        .chain(std::iter::once(HEURISTICS.join(",")))
        .map(|without| (without, Vec::new()))
        .collect();
    for _ in 0..repeats {
        for (without, runs) in rows.iter_mut() {
            let run = Nested {
                without: without.clone(),
                ..base.clone()
            };
            runs.push(nested(url, &run).await?);
        }
    }
    let rows: Vec<serde_json::Value> = rows
        .into_iter()
        .map(|(without, runs)| {
            let field = |name: &str| -> Vec<serde_json::Value> { runs.iter().map(|r| r[name].clone()).collect() };
            json!({
                "without": if without.is_empty() { "none".to_owned() } else if without.contains(',') { "all".to_owned() } else { without },
                "rounds": field("rounds"),
                "rounds_over_2s": field("rounds_over_2s"),
                "rounds_over_5s": field("rounds_over_5s"),
                "longest_round_ms": field("longest_round_ms"),
                "p99_ms": field("p99_ms"),
                "longest_stall_ms": runs
                    .iter()
                    .map(|r| {
                        r["stalls_by_kind"]
                            .as_object()
                            .into_iter()
                            .flat_map(|kinds| kinds.values())
                            .filter_map(|kind| kind["longest_ms"].as_f64())
                            .fold(0.0, f64::max)
                    })
                    .collect::<Vec<f64>>(),
            })
        })
        .collect();
    Ok(
        json!({ "scale": "nested-heuristics", "repeats": repeats, "base": {
        "processes": base.processes, "clients": base.clients, "tasks": base.tasks,
        "seconds": base.seconds, "mix": if base.all_kinds { "all" } else { "fair-reentrant" },
    }, "rows": rows }),
    )
}
