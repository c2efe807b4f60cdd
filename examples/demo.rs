//! The demo: many tasks contend on a few locks with nested (reentrant) critical
//! sections, and it reports throughput, wait latency and an exclusion check.
//!
//! ```text
//! cargo run --release --example demo -- [--tasks 64] [--locks 4] [--clients 4]
//!     [--ops 25] [--depth 3] [--hold-us 200] [--json]
//! ```
//!
//! It uses `REDIS_URL` when set; otherwise it starts a throwaway `redis-server` on a
//! free loopback port and stops it at the end.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redisson_locks::{Client, Config, RLock};

struct Options {
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
                "usage: demo [--tasks 64] [--locks 4] [--clients 4] [--ops 25] [--depth 3] \
                 [--hold-us 200] [--json]\n(REDIS_URL selects a server; otherwise a throwaway \
                 redis-server is started)"
            );
            std::process::exit(0);
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
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

/// Per-lock exclusion check: how many owners are inside right now, and the most
/// ever seen at once (must be 1).
#[derive(Default)]
struct Occupancy {
    inside: AtomicI64,
    max_inside: AtomicI64,
}

#[derive(Default)]
struct Totals {
    acquisitions: AtomicU64,
    overlaps: AtomicU64,
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
    let occupancy: Arc<Vec<Occupancy>> =
        Arc::new((0..options.locks).map(|_| Occupancy::default()).collect());
    let totals = Arc::new(Totals::default());

    if !options.json {
        println!(
            "demo: {} tasks over {} clients contend on {} locks, {} ops each, nested {} deep, {:?} hold ({url})",
            options.tasks, options.clients, options.locks, options.ops, options.depth, options.hold
        );
    }
    let redis_client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..options.tasks {
        let slot = task % options.locks;
        let lock = clients[task % options.clients]
            .get_lock(lock_names[slot].clone())
            .map_err(|e| e.to_string())?;
        let counter = counter_names[slot].clone();
        let mut conn = redis_client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let occupancy = occupancy.clone();
        let totals = totals.clone();
        let (ops, depth, hold) = (options.ops, options.depth, options.hold);
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::with_capacity(ops);
            for _ in 0..ops {
                let asked = Instant::now();
                let outer = lock.lock().await.map_err(|e| e.to_string())?;
                waits.push(asked.elapsed());
                totals.acquisitions.fetch_add(1, Ordering::Relaxed);
                let seen = &occupancy[slot];
                let inside = seen.inside.fetch_add(1, Ordering::SeqCst) + 1;
                seen.max_inside.fetch_max(inside, Ordering::SeqCst);
                if inside > 1 {
                    totals.overlaps.fetch_add(1, Ordering::Relaxed);
                }
                nested_section(&lock, depth - 1, &mut conn, &counter, hold).await?;
                seen.inside.fetch_sub(1, Ordering::SeqCst);
                outer.unlock().await.map_err(|e| e.to_string())?;
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
    let max_inside = occupancy
        .iter()
        .map(|o| o.max_inside.load(Ordering::SeqCst))
        .max()
        .unwrap_or(0);
    let exclusive = overlaps == 0 && max_inside <= 1 && counted == expected && leftovers == 0;
    let rate = acquisitions as f64 / elapsed.as_secs_f64();
    if options.json {
        println!(
            "{}",
            serde_json::json!({
                "tasks": options.tasks, "clients": options.clients, "locks": options.locks,
                "ops_per_task": options.ops, "depth": options.depth,
                "hold_us": options.hold.as_micros() as u64,
                "acquisitions": acquisitions, "wall_s": elapsed.as_secs_f64(),
                "acq_per_s": rate,
                "wait_ms": {"p50": percentile(0.5), "p90": percentile(0.9),
                            "p99": percentile(0.99), "max": percentile(1.0)},
                "overlaps": overlaps, "counter": counted, "counter_expected": expected,
                "locks_left": leftovers, "exclusive": exclusive,
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
            "result:         {}",
            if exclusive {
                "OK, no two owners ever overlapped"
            } else {
                "FAILED"
            }
        );
    }
    if exclusive {
        Ok(())
    } else {
        Err("exclusion check failed".into())
    }
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
