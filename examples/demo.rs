//! The demo: many tasks contend on a few locks with nested (reentrant) critical
//! sections, and it reports throughput, wait latency and an exclusion check.
//!
//! ```text
//! cargo run --release --example demo -- [--kind reentrant|fair] [--tasks 64]
//!     [--locks 4] [--clients 4] [--ops 25] [--depth 3] [--hold-us 200] [--json]
//! ```
//!
//! Besides throughput and latency it reports fairness: acquisitions per task (at
//! the moment the first task finished: Jain's index, 1.0 = perfectly even) and
//! overtakes, acquisitions that went to a task which started asking more than
//! `OVERTAKE_MARGIN` after another task still waiting for the same lock. The fair
//! lock must show none; the reentrant lock lets whoever asks first after a release
//! win, so it shows many.
//!
//! It uses `REDIS_URL` when set; otherwise it starts a throwaway `redis-server` on a
//! free loopback port and stops it at the end.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_locks::{Client, Config, RLock};

/// Two requests closer together than this may reach Redis in either order; only
/// an overtake of a waiter that asked earlier by more than this counts.
const OVERTAKE_MARGIN: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Reentrant,
    Fair,
}

struct Options {
    kind: Kind,
    tasks: usize,
    locks: usize,
    clients: usize,
    ops: usize,
    depth: usize,
    hold: Duration,
    json: bool,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        kind: Kind::Reentrant,
        tasks: 64,
        locks: 4,
        clients: 4,
        ops: 25,
        depth: 3,
        hold: Duration::from_micros(200),
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--json" {
            options.json = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            println!(
                "usage: demo [--kind reentrant|fair] [--tasks 64] [--locks 4] [--clients 4] [--ops 25] [--depth 3] \
                 [--hold-us 200] [--json]\n(REDIS_URL selects a server; otherwise a throwaway \
                 redis-server is started)"
            );
            std::process::exit(0);
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        if flag == "--kind" {
            options.kind = match value.as_str() {
                "reentrant" => Kind::Reentrant,
                "fair" => Kind::Fair,
                other => return Err(format!("--kind: '{other}' is not reentrant or fair")),
            };
            continue;
        }
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: '{value}' is not a whole number"))?;
        let count = usize::try_from(number).map_err(|_| format!("{flag}: too large"))?;
        match flag.as_str() {
            "--tasks" => options.tasks = count,
            "--locks" => options.locks = count,
            "--clients" => options.clients = count,
            "--ops" => options.ops = count,
            "--depth" => options.depth = count,
            "--hold-us" => options.hold = Duration::from_micros(number),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if options.tasks == 0 || options.locks == 0 || options.clients == 0 || options.depth == 0 {
        return Err("--tasks, --locks, --clients and --depth must be at least 1".into());
    }
    Ok(options)
}

/// A throwaway redis-server, killed on drop.
struct ThrowawayServer {
    child: Child,
    dir: std::path::PathBuf,
}

impl ThrowawayServer {
    fn start() -> Result<(Self, String), String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!("redisson-locks-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start redis-server ({e}); is it installed?"))?;
        let server = ThrowawayServer { child, dir };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(10) {
                return Err("redis-server did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok((server, format!("redis://127.0.0.1:{port}")))
    }
}

impl Drop for ThrowawayServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Per-lock bookkeeping: how many owners are inside right now, the most ever seen
/// at once (must be 1), and who is waiting since when (for overtakes).
#[derive(Default)]
struct LockStats {
    inside: AtomicI64,
    max_inside: AtomicI64,
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
}

#[derive(Default)]
struct Totals {
    acquisitions: AtomicU64,
    overlaps: AtomicU64,
    overtakes: AtomicU64,
    next_request: AtomicU64,
    /// Set when the first task finishes: fairness is read at that moment.
    first_done: AtomicBool,
}

#[tokio::main]
async fn main() {
    if let Err(message) = run().await {
        eprintln!("demo failed: {message}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), String> {
    let options = parse_options()?;
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (server, url) = ThrowawayServer::start()?;
            (Some(server), url)
        }
    };
    let config = Config::from_url(&url).map_err(|e| e.to_string())?;
    let mut clients = Vec::new();
    for _ in 0..options.clients {
        clients.push(
            Client::connect(config.clone())
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let lock_names: Vec<String> = (0..options.locks)
        .map(|i| format!("demo:{run_id}:lock{i}"))
        .collect();
    let counter_names: Vec<String> = (0..options.locks)
        .map(|i| format!("demo:{run_id}:counter{i}"))
        .collect();
    let stats: Arc<Vec<LockStats>> =
        Arc::new((0..options.locks).map(|_| LockStats::default()).collect());
    let totals = Arc::new(Totals::default());
    let per_task: Arc<Vec<AtomicU64>> =
        Arc::new((0..options.tasks).map(|_| AtomicU64::new(0)).collect());
    let fairness_snapshot: Arc<Mutex<Vec<u64>>> = Arc::default();
    let kind_name = match options.kind {
        Kind::Reentrant => "reentrant",
        Kind::Fair => "fair",
    };

    if !options.json {
        println!(
            "demo: {} tasks over {} clients contend on {} {kind_name} locks, {} ops each, nested {} deep, {:?} hold ({url})",
            options.tasks, options.clients, options.locks, options.ops, options.depth, options.hold
        );
    }
    let redis_client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..options.tasks {
        let slot = task % options.locks;
        let client = &clients[task % options.clients];
        let lock = match options.kind {
            Kind::Reentrant => client.get_lock(lock_names[slot].clone()),
            Kind::Fair => client.get_fair_lock(lock_names[slot].clone()),
        }
        .map_err(|e| e.to_string())?;
        let counter = counter_names[slot].clone();
        let mut conn = redis_client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let stats = stats.clone();
        let totals = totals.clone();
        let per_task = per_task.clone();
        let fairness_snapshot = fairness_snapshot.clone();
        let (ops, depth, hold) = (options.ops, options.depth, options.hold);
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::with_capacity(ops);
            let seen = &stats[slot];
            for _ in 0..ops {
                let request = totals.next_request.fetch_add(1, Ordering::Relaxed);
                let asked = Instant::now();
                seen.start_waiting(request, asked);
                let outer = lock.lock().await.map_err(|e| e.to_string())?;
                waits.push(asked.elapsed());
                if seen.acquired(request, asked) {
                    totals.overtakes.fetch_add(1, Ordering::Relaxed);
                }
                totals.acquisitions.fetch_add(1, Ordering::Relaxed);
                per_task[task].fetch_add(1, Ordering::Relaxed);
                let inside = seen.inside.fetch_add(1, Ordering::SeqCst) + 1;
                seen.max_inside.fetch_max(inside, Ordering::SeqCst);
                if inside > 1 {
                    totals.overlaps.fetch_add(1, Ordering::Relaxed);
                }
                nested_section(&lock, depth - 1, &mut conn, &counter, hold).await?;
                seen.inside.fetch_sub(1, Ordering::SeqCst);
                outer.unlock().await.map_err(|e| e.to_string())?;
            }
            if !totals.first_done.swap(true, Ordering::SeqCst) {
                let counts = per_task.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                *fairness_snapshot.lock().unwrap_or_else(|p| p.into_inner()) = counts;
            }
            Ok::<_, String>(waits)
        }));
    }
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await.map_err(|e| e.to_string())??);
    }
    let elapsed = started.elapsed();

    // The counters were incremented non-atomically inside the locks: any overlap
    // would have lost an increment.
    let mut conn = redis_client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let mut counted = 0i64;
    for name in &counter_names {
        let value: Option<i64> = conn.get(name).await.map_err(|e| e.to_string())?;
        counted += value.unwrap_or(0);
        let _: () = conn.del(name).await.map_err(|e| e.to_string())?;
    }
    let mut leftovers = 0;
    for name in &lock_names {
        let exists: bool = conn.exists(name).await.map_err(|e| e.to_string())?;
        leftovers += usize::from(exists);
    }

    waits.sort();
    let percentile = |p: f64| -> f64 {
        let index = ((waits.len() as f64 - 1.0) * p).round() as usize;
        waits.get(index).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let acquisitions = totals.acquisitions.load(Ordering::Relaxed);
    let expected = (options.tasks * options.ops) as i64;
    let overlaps = totals.overlaps.load(Ordering::Relaxed);
    let overtakes = totals.overtakes.load(Ordering::Relaxed);
    let counts = fairness_snapshot
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let (count_min, count_max) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sum_sq: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    let jain = if sum_sq > 0.0 {
        sum * sum / (counts.len() as f64 * sum_sq)
    } else {
        1.0
    };
    let max_inside = stats
        .iter()
        .map(|o| o.max_inside.load(Ordering::SeqCst))
        .max()
        .unwrap_or(0);
    let exclusive = overlaps == 0 && max_inside <= 1 && counted == expected && leftovers == 0;
    // The fair lock promises arrival order; the reentrant lock does not.
    let fair_ok = options.kind != Kind::Fair || overtakes == 0;
    let rate = acquisitions as f64 / elapsed.as_secs_f64();
    if options.json {
        println!(
            "{}",
            serde_json::json!({
                "kind": kind_name,
                "tasks": options.tasks, "clients": options.clients, "locks": options.locks,
                "ops_per_task": options.ops, "depth": options.depth,
                "hold_us": options.hold.as_micros() as u64,
                "acquisitions": acquisitions, "wall_s": elapsed.as_secs_f64(),
                "acq_per_s": rate,
                "wait_ms": {"p50": percentile(0.5), "p90": percentile(0.9),
                            "p99": percentile(0.99), "max": percentile(1.0)},
                "overlaps": overlaps, "counter": counted, "counter_expected": expected,
                "locks_left": leftovers, "exclusive": exclusive,
                "fairness": {"per_task_min": count_min, "per_task_max": count_max, "jain": jain,
                             "overtakes": overtakes, "overtake_margin_ms": OVERTAKE_MARGIN.as_millis() as u64},
            })
        );
    } else {
        println!(
            "acquisitions:   {acquisitions} in {:.2} s = {rate:.0}/s",
            elapsed.as_secs_f64()
        );
        println!(
            "wait latency:   p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            percentile(0.5),
            percentile(0.9),
            percentile(0.99),
            percentile(1.0)
        );
        println!(
            "nested holds:   {} per acquisition (reentrant)",
            options.depth
        );
        println!(
            "exclusion:      {} overlaps, most owners inside one lock at once: {max_inside}",
            overlaps
        );
        println!("counter check:  {counted} increments counted, {expected} expected");
        println!("locks left:     {leftovers}");
        println!(
            "fairness:       per task (when the first finished) min {count_min}, max {count_max}, Jain {jain:.3}"
        );
        println!(
            "overtakes:      {overtakes} acquisitions went past a task waiting {} ms longer{}",
            OVERTAKE_MARGIN.as_millis(),
            if options.kind == Kind::Fair {
                " (fair lock: must be 0)"
            } else {
                ""
            }
        );
        println!(
            "result:         {}",
            match (exclusive, fair_ok) {
                (true, true) => "OK, no two owners ever overlapped",
                (false, _) => "FAILED: exclusion",
                (true, false) => "FAILED: the fair lock served out of order",
            }
        );
    }
    if !exclusive {
        return Err("exclusion check failed".into());
    }
    if !fair_ok {
        return Err("fair lock served out of arrival order".into());
    }
    Ok(())
}

/// Re-enters `lock` `depth` more times, then does a non-atomic increment of
/// `counter` in the innermost section.
async fn nested_section(
    lock: &RLock,
    depth: usize,
    conn: &mut redis::aio::MultiplexedConnection,
    counter: &str,
    hold: Duration,
) -> Result<(), String> {
    let mut guards = Vec::with_capacity(depth);
    for _ in 0..depth {
        guards.push(lock.lock().await.map_err(|e| e.to_string())?);
    }
    let value: Option<i64> = conn.get(counter).await.map_err(|e| e.to_string())?;
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    let _: () = conn
        .set(counter, value.unwrap_or(0) + 1)
        .await
        .map_err(|e| e.to_string())?;
    while let Some(guard) = guards.pop() {
        guard.unlock().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}
