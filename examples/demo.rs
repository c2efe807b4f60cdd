//! The demo: many tasks contend on a few locks with nested (reentrant) critical
//! sections, and it reports throughput, wait latency, an exclusion check and
//! fairness.
//!
//! ```text
//! cargo run --release --example demo -- [--kind reentrant|fair|read|write|rw]
//!     [--tasks 64] [--locks 4] [--clients 4] [--ops 25] [--depth 3]
//!     [--hold-us 200] [--write-pct 20] [--json]
//! ```
//!
//! `read`, `write` and `rw` use read-write locks: only reads, only writes, or a mix
//! with `--write-pct` percent writes. Writers increment a counter in Redis with a
//! non-atomic read-modify-write, so any overlap would lose an increment; readers
//! only read it.
//!
//! Fairness: acquisitions per task at the moment the first task finished (Jain's
//! index, 1.0 = perfectly even), and overtakes: acquisitions that went to a task
//! which started asking more than `OVERTAKE_MARGIN` after another task still
//! waiting for the same lock (for exclusive holds). The fair lock must show none.
//!
//! It uses `REDIS_URL` when set; otherwise it starts a throwaway `redis-server` on a
//! free loopback port and stops it at the end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_locks::{Client, Config, RLock};

#[path = "support/args.rs"]
mod args;
#[path = "support/throwaway_server.rs"]
mod throwaway_server;
use args::Args;

/// Two requests closer together than this may reach Redis in either order; only
/// an overtake of a waiter that asked earlier by more than this counts.
const OVERTAKE_MARGIN: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Reentrant,
    Fair,
    Read,
    Write,
    Mixed,
}

impl Kind {
    fn parse(text: &str) -> Result<Kind, String> {
        Ok(match text {
            "reentrant" => Kind::Reentrant,
            "fair" => Kind::Fair,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "rw" => Kind::Mixed,
            other => {
                return Err(format!(
                    "--kind: '{other}' is not reentrant, fair, read, write or rw"
                ))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::Read => "read-write (reads only)",
            Kind::Write => "read-write (writes only)",
            Kind::Mixed => "read-write (mixed)",
        }
    }
}

struct Options {
    kind: Kind,
    tasks: usize,
    locks: usize,
    clients: usize,
    ops: usize,
    depth: usize,
    hold: Duration,
    write_pct: usize,
    json: bool,
}

const USAGE: &str = "usage: demo [--kind reentrant|fair|read|write|rw] [--tasks 64] [--locks 4] \
    [--clients 4] [--ops 25] [--depth 3] [--hold-us 200] [--write-pct 20] [--json]\n\
    REDIS_URL selects a server; otherwise a throwaway redis-server is started.";

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        kind: Kind::Reentrant,
        tasks: 64,
        locks: 4,
        clients: 4,
        ops: 25,
        depth: 3,
        hold: Duration::from_micros(200),
        write_pct: 20,
        json: false,
    };
    let mut args = Args::from_env(Some(USAGE));
    while let Some(flag) = args.next_flag() {
        let f = flag.as_str();
        match f {
            "--json" => options.json = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--kind" => options.kind = Kind::parse(&args.value(f)?)?,
            "--tasks" => options.tasks = args.count(f)?,
            "--locks" => options.locks = args.count(f)?,
            "--clients" => options.clients = args.count(f)?,
            "--ops" => options.ops = args.count(f)?,
            "--depth" => options.depth = args.count(f)?,
            "--hold-us" => options.hold = Duration::from_micros(args.number(f)?),
            "--write-pct" => {
                let count = args.count(f)?;
                if count > 100 {
                    return Err(format!(
                        "--write-pct: {count} is not a percentage (0 to 100)"
                    ));
                }
                options.write_pct = count;
            }
            _ => return Err(args.unknown(f)),
        }
    }
    if options.tasks == 0
        || options.locks == 0
        || options.clients == 0
        || options.ops == 0
        || options.depth == 0
    {
        return Err("--tasks, --locks, --clients, --ops and --depth must be at least 1".into());
    }
    Ok(options)
}

/// Per-lock bookkeeping: who is inside right now (writers must be alone), and
/// who is waiting since when (for overtakes).
#[derive(Default)]
struct LockStats {
    writers: AtomicI64,
    readers: AtomicI64,
    max_readers: AtomicI64,
    waiting: Mutex<BTreeMap<u64, Instant>>,
}

impl LockStats {
    fn start_waiting(&self, request: u64, since: Instant) {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(request, since);
    }

    /// Stops waiting; whether someone who asked well before `since` still waits.
    fn acquired(&self, request: u64, since: Instant) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.remove(&request);
        waiting
            .values()
            .any(|earlier| *earlier + OVERTAKE_MARGIN < since)
    }

    /// Enters; false when that broke exclusion.
    fn enter(&self, exclusive: bool) -> bool {
        if exclusive {
            let others = self.writers.fetch_add(1, Ordering::SeqCst);
            others == 0 && self.readers.load(Ordering::SeqCst) == 0
        } else {
            let readers = self.readers.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_readers.fetch_max(readers, Ordering::SeqCst);
            self.writers.load(Ordering::SeqCst) == 0
        }
    }

    fn leave(&self, exclusive: bool) {
        if exclusive {
            self.writers.fetch_sub(1, Ordering::SeqCst);
        } else {
            self.readers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[derive(Default)]
struct Totals {
    acquisitions: AtomicU64,
    writes: AtomicU64,
    overlaps: AtomicU64,
    overtakes: AtomicU64,
    next_request: AtomicU64,
    /// Set when the first task finishes: fairness is read at that moment.
    first_done: AtomicBool,
}

/// What one task works with.
struct Worker {
    task: usize,
    exclusive_lock: RLock,
    shared_lock: Option<RLock>,
    stats: Arc<Vec<LockStats>>,
    slot: usize,
    counter: String,
    conn: redis::aio::MultiplexedConnection,
    totals: Arc<Totals>,
    per_task: Arc<Vec<AtomicU64>>,
    fairness_snapshot: Arc<Mutex<Vec<u64>>>,
}

#[tokio::main]
async fn main() {
    if let Err(message) = run().await {
        eprintln!("demo failed: {message}");
        std::process::exit(1);
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

async fn run() -> Result<(), String> {
    let options = parse_options()?;
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (server, url) = throwaway_server::start(&[])?;
            (Some(server), url)
        }
    };
    if !options.json {
        println!(
            "demo: {} tasks over {} clients contend on {} {} locks, {} ops each, nested {} deep, {:?} hold ({url})",
            options.tasks,
            options.clients,
            options.locks,
            options.kind.name(),
            options.ops,
            options.depth,
            options.hold
        );
    }
    let run = Run::start(&options, &url).await?;
    let summary = run.finish(&options).await?;
    if options.json {
        summary.print_json(&options);
    } else {
        summary.print_text(&options);
    }
    if !summary.exclusive() {
        return Err("exclusion check failed".into());
    }
    if !summary.fair_ok(&options) {
        return Err("fair lock served out of arrival order".into());
    }
    Ok(())
}

/// The contending tasks, started, and what they share.
struct Run {
    redis_client: redis::Client,
    lock_names: Vec<String>,
    counter_names: Vec<String>,
    stats: Arc<Vec<LockStats>>,
    totals: Arc<Totals>,
    fairness_snapshot: Arc<Mutex<Vec<u64>>>,
    started: Instant,
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, String>>>,
    /// Kept until the tasks are done.
    _clients: Vec<Client>,
}

impl Run {
    /// Connects the clients and spawns one worker per task.
    async fn start(options: &Options, url: &str) -> Result<Run, String> {
        let config = Config::from_url(url).map_err(err)?;
        let mut clients = Vec::new();
        for _ in 0..options.clients {
            clients.push(Client::connect(config.clone()).await.map_err(err)?);
        }
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let mut run = Run {
            redis_client: redis::Client::open(url).map_err(err)?,
            lock_names: (0..options.locks)
                .map(|i| format!("demo:{run_id}:lock{i}"))
                .collect(),
            counter_names: (0..options.locks)
                .map(|i| format!("demo:{run_id}:counter{i}"))
                .collect(),
            stats: Arc::new((0..options.locks).map(|_| LockStats::default()).collect()),
            totals: Arc::new(Totals::default()),
            fairness_snapshot: Arc::default(),
            started: Instant::now(),
            tasks: Vec::new(),
            _clients: Vec::new(),
        };
        let per_task: Arc<Vec<AtomicU64>> =
            Arc::new((0..options.tasks).map(|_| AtomicU64::new(0)).collect());
        for task in 0..options.tasks {
            let worker = run
                .worker(options, &clients[task % options.clients], task, &per_task)
                .await?;
            let write_pct = match options.kind {
                Kind::Read => 0,
                Kind::Mixed => options.write_pct,
                _ => 100,
            };
            let (ops, depth, hold) = (options.ops, options.depth, options.hold);
            run.tasks
                .push(tokio::spawn(worker.run(ops, depth, hold, write_pct)));
        }
        run._clients = clients;
        Ok(run)
    }

    /// Task `task`'s worker, on its lock of `client`.
    async fn worker(
        &self,
        options: &Options,
        client: &Client,
        task: usize,
        per_task: &Arc<Vec<AtomicU64>>,
    ) -> Result<Worker, String> {
        let slot = task % options.locks;
        let name = self.lock_names[slot].clone();
        let (exclusive_lock, shared_lock) = match options.kind {
            Kind::Reentrant => (client.get_lock(name).map_err(err)?, None),
            Kind::Fair => (client.get_fair_lock(name).map_err(err)?, None),
            Kind::Read | Kind::Write | Kind::Mixed => {
                let rw = client.get_read_write_lock(name).map_err(err)?;
                (rw.write_lock(), Some(rw.read_lock()))
            }
        };
        Ok(Worker {
            task,
            exclusive_lock,
            shared_lock,
            stats: self.stats.clone(),
            slot,
            counter: self.counter_names[slot].clone(),
            conn: self
                .redis_client
                .get_multiplexed_async_connection()
                .await
                .map_err(err)?,
            totals: self.totals.clone(),
            per_task: per_task.clone(),
            fairness_snapshot: self.fairness_snapshot.clone(),
        })
    }

    /// Waits for every task, then checks Redis: the counters (writers
    /// incremented them non-atomically, so an overlap loses increments) and
    /// the locks left behind.
    async fn finish(self, options: &Options) -> Result<Summary, String> {
        let mut waits = Vec::new();
        for task in self.tasks {
            waits.extend(task.await.map_err(err)??);
        }
        let elapsed = self.started.elapsed();
        let mut conn = self
            .redis_client
            .get_multiplexed_async_connection()
            .await
            .map_err(err)?;
        let mut counted = 0u64;
        for name in &self.counter_names {
            let value: Option<u64> = conn.get(name).await.map_err(err)?;
            counted += value.unwrap_or(0);
            let _: () = conn.del(name).await.map_err(err)?;
        }
        let mut leftovers = 0;
        for name in &self.lock_names {
            let exists: bool = conn.exists(name).await.map_err(err)?;
            leftovers += usize::from(exists);
        }
        waits.sort();
        let counts = self
            .fairness_snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let _ = options;
        Ok(Summary {
            waits,
            elapsed,
            counted,
            leftovers,
            counts,
            acquisitions: self.totals.acquisitions.load(Ordering::Relaxed),
            writes: self.totals.writes.load(Ordering::Relaxed),
            overlaps: self.totals.overlaps.load(Ordering::Relaxed),
            overtakes: self.totals.overtakes.load(Ordering::Relaxed),
            max_readers: self
                .stats
                .iter()
                .map(|s| s.max_readers.load(Ordering::SeqCst))
                .max()
                .unwrap_or(0),
        })
    }
}

/// What a run came to.
struct Summary {
    waits: Vec<Duration>,
    elapsed: Duration,
    counted: u64,
    leftovers: usize,
    /// Acquisitions per task when the first task finished.
    counts: Vec<u64>,
    acquisitions: u64,
    writes: u64,
    overlaps: u64,
    overtakes: u64,
    max_readers: i64,
}

impl Summary {
    /// The wait at percentile `p`, in ms.
    fn percentile(&self, p: f64) -> f64 {
        let index = ((self.waits.len() as f64 - 1.0) * p).round() as usize;
        self.waits
            .get(index)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }

    fn jain(&self) -> f64 {
        let sum: f64 = self.counts.iter().map(|&c| c as f64).sum();
        let sum_sq: f64 = self.counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
        if sum_sq > 0.0 {
            sum * sum / (self.counts.len() as f64 * sum_sq)
        } else {
            1.0
        }
    }

    fn exclusive(&self) -> bool {
        self.overlaps == 0 && self.counted == self.writes && self.leftovers == 0
    }

    /// The fair lock promises arrival order; the others do not.
    fn fair_ok(&self, options: &Options) -> bool {
        options.kind != Kind::Fair || self.overtakes == 0
    }

    fn rate(&self) -> f64 {
        self.acquisitions as f64 / self.elapsed.as_secs_f64()
    }

    fn count_range(&self) -> (u64, u64) {
        (
            self.counts.iter().copied().min().unwrap_or(0),
            self.counts.iter().copied().max().unwrap_or(0),
        )
    }

    fn print_json(&self, options: &Options) {
        let (count_min, count_max) = self.count_range();
        println!(
            "{}",
            serde_json::json!({
                "kind": options.kind.name(),
                "tasks": options.tasks, "clients": options.clients, "locks": options.locks,
                "ops_per_task": options.ops, "depth": options.depth,
                "hold_us": options.hold.as_micros() as u64,
                "acquisitions": self.acquisitions, "writes": self.writes,
                "wall_s": self.elapsed.as_secs_f64(),
                "acq_per_s": self.rate(),
                "wait_ms": {"p50": self.percentile(0.5), "p90": self.percentile(0.9),
                            "p99": self.percentile(0.99), "max": self.percentile(1.0)},
                "overlaps": self.overlaps, "max_readers_together": self.max_readers,
                "counter": self.counted, "counter_expected": self.writes,
                "locks_left": self.leftovers, "exclusive": self.exclusive(),
                "fairness": {"per_task_min": count_min, "per_task_max": count_max,
                             "jain": self.jain(), "overtakes": self.overtakes,
                             "overtake_margin_ms": OVERTAKE_MARGIN.as_millis() as u64},
            })
        );
    }

    fn print_text(&self, options: &Options) {
        let Summary {
            acquisitions,
            writes,
            overlaps,
            overtakes,
            max_readers,
            counted,
            leftovers,
            ..
        } = self;
        let (count_min, count_max) = self.count_range();
        println!(
            "acquisitions:   {acquisitions} in {:.2} s = {:.0}/s ({writes} exclusive)",
            self.elapsed.as_secs_f64(),
            self.rate()
        );
        println!(
            "wait latency:   p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.percentile(0.5),
            self.percentile(0.9),
            self.percentile(0.99),
            self.percentile(1.0)
        );
        println!(
            "nested holds:   {} per acquisition (reentrant)",
            options.depth
        );
        println!("exclusion:      {overlaps} overlaps; most readers inside one lock at once: {max_readers}");
        println!("counter check:  {counted} increments counted, {writes} expected");
        println!("locks left:     {leftovers}");
        println!(
            "fairness:       per task (when the first finished) min {count_min}, max {count_max}, Jain {:.3}",
            self.jain()
        );
        println!(
            "overtakes:      {overtakes} exclusive acquisitions went past a task waiting {} ms longer{}",
            OVERTAKE_MARGIN.as_millis(),
            if options.kind == Kind::Fair { " (fair lock: must be 0)" } else { "" }
        );
        for line in overtake_note(options.kind) {
            println!("{:16}{line}", "");
        }
        println!(
            "result:         {}",
            match (self.exclusive(), self.fair_ok(options)) {
                (true, true) => "OK, no writer ever overlapped another owner",
                (false, _) => "FAILED: exclusion",
                (true, false) => "FAILED: the fair lock served out of order",
            }
        );
    }
}

/// What the overtake count means for `kind`, printed under the figure.
fn overtake_note(kind: Kind) -> Vec<String> {
    let margin = OVERTAKE_MARGIN.as_millis();
    match kind {
        Kind::Fair => vec![
            "the fair lock queues its waiters in Redis and grants the lock only to the".into(),
            "first in line, so nobody can barge ahead of an earlier waiter".into(),
        ],
        // Reads only: nobody waits for an exclusive hold.
        Kind::Read => Vec::new(),
        Kind::Reentrant | Kind::Write | Kind::Mixed => vec![
            "this lock is not fair: a release wakes its waiters, but the lock goes to".into(),
            "whichever acquire reaches Redis first, often a task that has only just asked".into(),
            "(or the releasing task itself, back for its next op) rather than one that was".into(),
            "woken and still has a round trip to make. Taking the lock ahead of earlier".into(),
            format!("waiters is barging; an overtake is a barge past a task that had waited {margin} ms"),
            "longer. Barging keeps the lock busy (no idle gap while a woken waiter gets".into(),
            "going) at the cost of uneven waits; the fair lock (--kind fair) grants only".into(),
            "the head of its queue and shows none".into(),
        ],
    }
}

impl Worker {
    async fn run(
        mut self,
        ops: usize,
        depth: usize,
        hold: Duration,
        write_pct: usize,
    ) -> Result<Vec<Duration>, String> {
        let mut waits = Vec::with_capacity(ops);
        for op in 0..ops {
            let exclusive = (self.task * 7 + op * 13) % 100 < write_pct;
            let lock = match (&self.shared_lock, exclusive) {
                (Some(shared), false) => shared.clone(),
                _ => self.exclusive_lock.clone(),
            };
            let stats = self.stats.clone();
            let seen = &stats[self.slot];
            let request = self.totals.next_request.fetch_add(1, Ordering::Relaxed);
            let asked = Instant::now();
            if exclusive {
                seen.start_waiting(request, asked);
            }
            let outer = lock.lock().await.map_err(err)?;
            waits.push(asked.elapsed());
            if exclusive && seen.acquired(request, asked) {
                self.totals.overtakes.fetch_add(1, Ordering::Relaxed);
            }
            self.totals.acquisitions.fetch_add(1, Ordering::Relaxed);
            self.per_task[self.task].fetch_add(1, Ordering::Relaxed);
            if !seen.enter(exclusive) {
                self.totals.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            // Nested sections run in the outer hold's scope, so they re-enter.
            outer
                .scope(self.nested_section(&lock, depth - 1, hold, exclusive))
                .await?;
            seen.leave(exclusive);
            outer.unlock().await.map_err(err)?;
        }
        if !self.totals.first_done.swap(true, Ordering::SeqCst) {
            let counts = self
                .per_task
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
            *self
                .fairness_snapshot
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = counts;
        }
        Ok(waits)
    }

    /// Re-enters `lock` `depth` more times; in the innermost section a writer does
    /// a non-atomic increment of the counter and a reader reads it.
    async fn nested_section(
        &mut self,
        lock: &RLock,
        depth: usize,
        hold: Duration,
        exclusive: bool,
    ) -> Result<(), String> {
        let mut guards = Vec::with_capacity(depth);
        for _ in 0..depth {
            guards.push(lock.lock().await.map_err(err)?);
        }
        let value: Option<u64> = self.conn.get(&self.counter).await.map_err(err)?;
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        if exclusive {
            let _: () = self
                .conn
                .set(&self.counter, value.unwrap_or(0) + 1)
                .await
                .map_err(err)?;
            self.totals.writes.fetch_add(1, Ordering::Relaxed);
        }
        while let Some(guard) = guards.pop() {
            guard.unlock().await.map_err(err)?;
        }
        Ok(())
    }
}
