//! The lock benchmark: one JSON line of measured numbers per run.
//!
//! ```text
//! cargo run --release --example lockbench -- \
//!     [--kind reentrant|fair|read|write|rw-mix|fenced|spin|non-reentrant|multi|group|redlock|semaphore] [--tasks 16] [--clients 1]
//!     [--locks 1] [--ops 100] [--hold-us 100] [--max-seconds 60]
//!     [--write-pct 20] [--url redis://... | --port N] [--metrics]
//! cargo run --release --example lockbench -- --scale watchdog [--watchdog-locks 10000]
//!     [--watchdog-ms 3000]
//! cargo run --release --example lockbench -- --scale waiters|spread [--waiters 10000]
//!     [--locks 1] [--kind reentrant|fair]
//! cargo run --release --example lockbench -- --scale handoff-floor [--ops 2000]
//!     [--hold-us 1000]
//! ```
//!
//! T tasks spread over C clients (separate client instances, as separate processes
//! would be); task i uses lock i % L; each op is acquire, a busy hold of H µs that
//! yields to the runtime, release. A run stops itself after `--max-seconds` and says
//! so (`capped: true`). Without `--url`/`--port` it starts its own redis-server.
//! `--metrics` (built with the `metrics` feature) first installs a Prometheus
//! recorder, as a service exporting the crate's metrics would, so that a run
//! measures what recording costs; the report then says `"metrics": true`.
//! Every number is measured; none is estimated. See BENCHMARKS.md for what each
//! field means.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_locks::{
    Client, Config, LockGuard, MultiGuard, MultiLock, RLock, RSemaphore, RedGuard, RedLock,
};

/// The global allocator, counting the bytes live (and the most ever live), so the
/// scale runs can tell live memory per waiter from what the process keeps resident.
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// What a task acquires: the lock itself, or a multi-lock or RedLock around it.
enum Contender {
    Lock,
    Multi(MultiLock),
    Red(RedLock),
    /// A semaphore of one permit, taken and given back like a lock.
    Semaphore(RSemaphore),
}

/// What it holds.
enum Held {
    Lock(LockGuard),
    Multi(MultiGuard),
    Red(RedGuard),
    Permit(RSemaphore),
}

impl Contender {
    async fn acquire(&self, lock: &RLock) -> Result<Held, String> {
        Ok(match self {
            Contender::Lock => Held::Lock(lock.lock().await.map_err(err)?),
            Contender::Multi(multi) => Held::Multi(multi.lock().await.map_err(err)?),
            Contender::Red(red) => Held::Red(
                red.lock_with_lease(Duration::from_secs(30))
                    .await
                    .map_err(err)?,
            ),
            Contender::Semaphore(sem) => {
                sem.acquire().await.map_err(err)?;
                Held::Permit(sem.clone())
            }
        })
    }
}

impl Held {
    async fn release(self) -> Result<(), String> {
        match self {
            Held::Lock(guard) => guard.unlock().await,
            Held::Multi(guard) => guard.unlock().await,
            Held::Red(guard) => guard.unlock().await,
            Held::Permit(sem) => sem.release().await,
        }
        .map_err(err)
    }
}
use serde_json::json;

#[cfg(feature = "metrics")]
#[path = "support/prometheus_recorder.rs"]
mod prometheus_recorder;
#[path = "support/throwaway_server.rs"]
mod throwaway_server;
use throwaway_server::ThrowawayServer;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Reentrant,
    Fair,
    Read,
    Write,
    RwMix,
    Fenced,
    Spin,
    NonReentrant,
    /// A multi-lock over two locks of one server.
    Multi,
    /// The single-hash multi-lock over two values of one group.
    Group,
    /// A RedLock over three clients (of one server here: what it costs, not what
    /// it survives).
    RedLock,
    /// A semaphore (`RSemaphore`) of one permit per lock name.
    Semaphore,
}

struct Options {
    kind: Kind,
    tasks: usize,
    clients: usize,
    locks: usize,
    ops: usize,
    hold: Duration,
    max_seconds: f64,
    write_pct: usize,
    url: Option<String>,
    /// A label copied into the output, naming the workload.
    workload: Option<String>,
    scale_watchdog: bool,
    /// `--scale waiters`: many waiters each served once, reentrant then fair.
    scale_waiters: bool,
    /// `--scale spread`: many waiters over many locks, from one client.
    scale_spread: bool,
    /// `--scale handoff-floor`: the fastest a handoff can be with this driver.
    handoff_floor: bool,
    waiters: usize,
    watchdog_locks: usize,
    watchdog_ms: u64,
    /// `--metrics`: record the crate's metrics into a Prometheus recorder.
    metrics: bool,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        kind: Kind::Reentrant,
        tasks: 16,
        clients: 1,
        locks: 1,
        ops: 100,
        hold: Duration::from_micros(100),
        max_seconds: 60.0,
        write_pct: 20,
        url: None,
        workload: None,
        scale_watchdog: false,
        scale_waiters: false,
        scale_spread: false,
        handoff_floor: false,
        waiters: 10_000,
        watchdog_locks: 10_000,
        watchdog_ms: 3_000,
        metrics: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--bench" {
            continue; // passed by `cargo bench`-style runners
        }
        if flag == "--metrics" {
            o.metrics = true;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: '{value}' is not a number"))
        };
        match flag.as_str() {
            "--kind" => {
                o.kind = match value.as_str() {
                    "reentrant" => Kind::Reentrant,
                    "fair" => Kind::Fair,
                    "read" => Kind::Read,
                    "write" => Kind::Write,
                    "rw-mix" => Kind::RwMix,
                    "fenced" => Kind::Fenced,
                    "spin" => Kind::Spin,
                    "non-reentrant" => Kind::NonReentrant,
                    "multi" => Kind::Multi,
                    "group" => Kind::Group,
                    "redlock" => Kind::RedLock,
                    "semaphore" => Kind::Semaphore,
                    other => return Err(format!("unknown kind {other}")),
                }
            }
            "--scale" => match value.as_str() {
                "watchdog" => o.scale_watchdog = true,
                "waiters" => o.scale_waiters = true,
                "spread" => o.scale_spread = true,
                "handoff-floor" => o.handoff_floor = true,
                other => {
                    return Err(format!(
                        "unknown scale run {other} (watchdog, waiters, spread, handoff-floor)"
                    ))
                }
            },
            "--tasks" => o.tasks = number()? as usize,
            "--waiters" => o.waiters = number()? as usize,
            "--clients" => o.clients = number()? as usize,
            "--locks" => o.locks = number()? as usize,
            "--ops" => o.ops = number()? as usize,
            "--hold-us" => o.hold = Duration::from_micros(number()?),
            "--max-seconds" => {
                o.max_seconds = value
                    .parse()
                    .map_err(|_| format!("--max-seconds: '{value}' is not a number"))?
            }
            "--write-pct" => o.write_pct = number()? as usize,
            "--url" => o.url = Some(value),
            "--workload" => o.workload = Some(value),
            "--port" => {
                let port = number()?;
                if port == 0 || port > u64::from(u16::MAX) {
                    return Err(format!("--port: {port} is not a TCP port (1 to 65535)"));
                }
                o.url = Some(format!("redis://127.0.0.1:{port}"));
            }
            "--watchdog-locks" => o.watchdog_locks = number()? as usize,
            "--watchdog-ms" => o.watchdog_ms = number()?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    check(&o)?;
    Ok(o)
}

/// Refuses options that would make a meaningless run (or panic) before any
/// server is started.
fn check(o: &Options) -> Result<(), String> {
    for (flag, value) in [
        ("--tasks", o.tasks),
        ("--clients", o.clients),
        ("--locks", o.locks),
        ("--ops", o.ops),
        ("--watchdog-locks", o.watchdog_locks),
    ] {
        if value == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
    }
    if o.write_pct > 100 {
        return Err(format!(
            "--write-pct: {} is not a percentage (0 to 100)",
            o.write_pct
        ));
    }
    // `Duration::from_secs_f64` panics on a negative, NaN or overflowing value.
    if !(o.max_seconds.is_finite() && o.max_seconds > 0.0 && o.max_seconds <= 1e9) {
        return Err(format!(
            "--max-seconds: {} must be a positive number of seconds",
            o.max_seconds
        ));
    }
    // The client's own minimum: renewal runs every third of it.
    if o.watchdog_ms < 30 {
        return Err(format!(
            "--watchdog-ms: {} is too short (at least 30 ms)",
            o.watchdog_ms
        ));
    }
    Ok(())
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The bench's own view of the server, on a RESP2 connection of its own.
struct Observer {
    conn: redis::aio::MultiplexedConnection,
}

/// Commands a client sends itself (round trips); everything else in the command
/// stats ran inside scripts, except the observer's own INFO, CONFIG and CLIENT.
const CLIENT_COMMANDS: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "script|load",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "ping",
    "hello",
];
const OBSERVER_COMMANDS: &[&str] = &["info", "config|resetstat", "config|get", "client|list"];

impl Observer {
    async fn new(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(err)?;
        Ok(Observer {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .map_err(err)?,
        })
    }

    /// calls per command from INFO commandstats.
    async fn command_stats(&mut self) -> Result<HashMap<String, u64>, String> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .map_err(err)?;
        Ok(info
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats
                    .strip_prefix("calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()?;
                Some((name.to_owned(), calls))
            })
            .collect())
    }

    /// (connections, subscriptions) of lock clients (RESP3 connections) now.
    async fn clients(&mut self) -> Result<(u64, u64), String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.conn)
            .await
            .map_err(err)?;
        let mut connections = 0;
        let mut subscriptions = 0;
        for line in list.lines().filter(|l| l.contains(" resp=3")) {
            connections += 1;
            for field in line.split(' ') {
                if let Some(n) = field
                    .strip_prefix("sub=")
                    .or_else(|| field.strip_prefix("ssub="))
                {
                    subscriptions += n.parse::<u64>().unwrap_or(0);
                }
            }
        }
        Ok((connections, subscriptions))
    }
}

/// (round trips, commands run inside scripts) between two command-stat snapshots.
fn command_diff(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> (u64, u64) {
    let mut client = 0;
    let mut inner = 0;
    for (name, calls) in after {
        let delta = calls - before.get(name).copied().unwrap_or(0);
        if CLIENT_COMMANDS.contains(&name.as_str()) {
            client += delta;
        } else if !OBSERVER_COMMANDS.contains(&name.as_str()) {
            inner += delta;
        }
    }
    (client, inner)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn percentiles(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    let at = |p: f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    json!({"n": samples.len(), "p50": at(0.5), "p99": at(0.99), "max": at(1.0)})
}

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

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    match run().await {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("lockbench failed: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<serde_json::Value, String> {
    let o = parse()?;
    let scrape = install_metrics(o.metrics)?;
    let mut report = run_with(&o).await?;
    if let Some(map) = report.as_object_mut() {
        map.insert("metrics".into(), json!(o.metrics));
        if let Some(scrape) = scrape {
            // What the recorder holds at the end: proof that it recorded.
            map.insert("metrics_scrape_bytes".into(), json!(scrape().len()));
        }
    }
    Ok(report)
}

/// Renders the recorder's scrape.
type Scrape = Box<dyn Fn() -> String>;

/// With `--metrics`: installs a Prometheus recorder (histograms with buckets,
/// upkeep every 5 s, as a service would run it) before any client exists, and
/// returns what renders its scrape.
#[cfg(feature = "metrics")]
fn install_metrics(on: bool) -> Result<Option<Scrape>, String> {
    if !on {
        return Ok(None);
    }
    let handle = prometheus_recorder::install()?;
    Ok(Some(Box::new(move || handle.render())))
}

/// Without the feature there is nothing to record.
#[cfg(not(feature = "metrics"))]
fn install_metrics(on: bool) -> Result<Option<Scrape>, String> {
    if on {
        return Err("--metrics needs a build with the `metrics` feature".into());
    }
    Ok(None)
}

/// The run the options ask for.
async fn run_with(o: &Options) -> Result<serde_json::Value, String> {
    let (_server, url) = match &o.url {
        Some(url) => (None, url.clone()),
        None => {
            let (server, url) = ThrowawayServer::start(&["--maxclients", "10000"])?;
            (Some(server), url)
        }
    };
    if o.scale_watchdog {
        return watchdog_scale(o, &url).await;
    }
    if o.scale_waiters {
        let reentrant = waiters_scale(&url, Kind::Reentrant, o.waiters, 1).await?;
        let fair = waiters_scale(&url, Kind::Fair, o.waiters, 1).await?;
        let ratio = fair["served_s"].as_f64().unwrap_or(0.0)
            / reentrant["served_s"].as_f64().unwrap_or(f64::NAN);
        return Ok(json!({
            "scale": "waiters", "waiters": o.waiters,
            "reentrant": reentrant, "fair": fair, "fair_to_reentrant_time": ratio,
        }));
    }
    if o.scale_spread {
        let kind = if o.kind == Kind::Fair {
            Kind::Fair
        } else {
            Kind::Reentrant
        };
        let mut report = waiters_scale(&url, kind, o.waiters, o.locks).await?;
        if let Some(map) = report.as_object_mut() {
            map.insert("scale".into(), json!("spread"));
        }
        return Ok(report);
    }
    if o.handoff_floor {
        return handoff_floor(o, &url).await;
    }
    let mut report = workload(o, &url).await?;
    if o.tasks == 1 && !matches!(o.kind, Kind::Multi | Kind::RedLock | Kind::Semaphore) {
        // Uncontended: compare with the floor in this very process and moment.
        let floor = floor_ratio(o, &url).await?;
        if let Some(map) = report.as_object_mut() {
            map.insert("floor".into(), floor);
        }
    }
    Ok(report)
}

/// A plain `redis` client on RESP3, as the library's connections are: for the
/// floors, measured without the library.
fn raw_client(url: &str) -> Result<redis::Client, String> {
    let info = redis::IntoConnectionInfo::into_connection_info(url).map_err(err)?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings)).map_err(err)
}

/// The floor of a handoff to a waiter, without the library: a holder busy for
/// `--hold-us` sends a script that publishes (as a release does); a waiter on the
/// same connection (as one client's tasks share one) hears the push and sends a
/// trivial script (as its attempt). From the holder's send to the waiter's reply,
/// `--ops` times: what a handoff costs on this machine with this Redis driver
/// before any lock logic.
async fn handoff_floor(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let raw = raw_client(url)?;
    let heard = Arc::new(tokio::sync::Notify::new());
    let config = redis::AsyncConnectionConfig::new().set_push_sender({
        let heard = heard.clone();
        move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::Message {
                heard.notify_one();
            }
            Ok::<(), std::convert::Infallible>(())
        }
    });
    let mut conn = raw
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(err)?;
    let channel = format!("lockbench:floor:{}", uuid::Uuid::new_v4().simple());
    conn.subscribe(&channel).await.map_err(err)?;
    let release = redis::Script::new("redis.call('publish', KEYS[1], '0') return 1");
    let attempt = redis::Script::new("return 1");
    let sent_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let served = Arc::new(tokio::sync::Notify::new());
    let ops = o.ops.max(100);
    let waiter = {
        let (heard, sent_at, served, mut conn) =
            (heard.clone(), sent_at.clone(), served.clone(), conn.clone());
        tokio::spawn(async move {
            let mut gaps = Vec::with_capacity(ops);
            for _ in 0..ops {
                heard.notified().await;
                let _: i64 = attempt.invoke_async(&mut conn).await.map_err(err)?;
                if let Some(sent) = locked(&sent_at).take() {
                    gaps.push(sent.elapsed());
                }
                served.notify_one();
            }
            Ok::<_, String>(gaps)
        })
    };
    for _ in 0..ops {
        let got = Instant::now();
        while got.elapsed() < o.hold {
            tokio::task::yield_now().await;
        }
        *locked(&sent_at) = Some(Instant::now());
        let _: i64 = release
            .key(&channel)
            .invoke_async(&mut conn)
            .await
            .map_err(err)?;
        served.notified().await;
    }
    let gaps = waiter.await.map_err(err)??;
    Ok(json!({
        "scale": "handoff-floor", "hold_us": o.hold.as_micros() as u64,
        "handoff_us": percentiles(gaps),
    }))
}

/// The floor of an uncontended lock + unlock: two EVALSHA round trips of a trivial
/// script on the same kind of connection (multiplexed, RESP3). Measured in
/// alternating blocks with the lock itself, so that drift in the machine's speed
/// affects both alike.
async fn floor_ratio(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let floor_client = raw_client(url)?;
    let mut conn = floor_client
        .get_multiplexed_async_connection()
        .await
        .map_err(err)?;
    let trivial = redis::Script::new("return 1");
    let client = Client::connect(Config::from_url(url).map_err(err)?)
        .await
        .map_err(err)?;
    let name = format!("lockbench:floor:{}", uuid::Uuid::new_v4().simple());
    let lock = match o.kind {
        Kind::Reentrant => client.get_lock(name),
        Kind::Fair => client.get_fair_lock(name),
        Kind::Read => client.get_read_write_lock(name).map(|rw| rw.read_lock()),
        Kind::Write | Kind::RwMix => client.get_read_write_lock(name).map(|rw| rw.write_lock()),
        Kind::Fenced => client.get_fenced_lock(name).map(|fenced| (*fenced).clone()),
        Kind::Spin => client.get_spin_lock(name),
        Kind::Group => client.get_multi_lock(name, ["a", "b"]),
        Kind::NonReentrant | Kind::Multi | Kind::RedLock | Kind::Semaphore => {
            client.get_non_reentrant_lock(name)
        }
    }
    .map_err(err)?;
    let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
    lock.lock()
        .await
        .map_err(err)?
        .unlock()
        .await
        .map_err(err)?;
    // The reentrant lock's own two scripts sent raw, without the library: the
    // difference to the floor is the scripts' server-side work, the difference to
    // the lock is the library's.
    let acquire = redis::Script::new(include_str!("../lua/lock_acquire.lua"));
    let release = redis::Script::new(include_str!("../lua/lock_release.lua"));
    let raw_name = format!("lockbench:raw:{}", uuid::Uuid::new_v4().simple());
    let raw_channel = format!("redisson_lock__channel:{{{raw_name}}}");
    let work = tokio::spawn(async move {
        let mut times = [Duration::ZERO; 3];
        let mut done = 0u32;
        while done < 2000 {
            let t = Instant::now();
            for _ in 0..100 {
                let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
                let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
            }
            times[0] += t.elapsed();
            let t = Instant::now();
            for _ in 0..100 {
                lock.lock()
                    .await
                    .map_err(err)?
                    .unlock()
                    .await
                    .map_err(err)?;
            }
            times[1] += t.elapsed();
            let t = Instant::now();
            for _ in 0..100 {
                let _: Option<i64> = acquire
                    .key(&raw_name)
                    .arg(30_000)
                    .arg("raw:1")
                    .invoke_async(&mut conn)
                    .await
                    .map_err(err)?;
                let _: Option<i64> = release
                    .key(&raw_name)
                    .key(&raw_channel)
                    .arg("0")
                    .arg(30_000)
                    .arg("raw:1")
                    .arg("publish")
                    .invoke_async(&mut conn)
                    .await
                    .map_err(err)?;
            }
            times[2] += t.elapsed();
            done += 100;
        }
        Ok::<_, String>((done, times))
    });
    let (done, [floor, locked_time, raw]) = work.await.map_err(err)??;
    let per_s = |time: Duration| f64::from(done) / time.as_secs_f64();
    Ok(json!({
        "ops": done,
        "floor_pairs_per_s": per_s(floor),
        "lock_unlock_per_s": per_s(locked_time),
        "ratio": per_s(locked_time) / per_s(floor),
        "raw_reentrant_scripts_pairs_per_s": per_s(raw),
        "ratio_to_raw_scripts": per_s(locked_time) / per_s(raw),
    }))
}

async fn workload(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let config = Config::from_url(url).map_err(err)?;
    let mut clients = Vec::new();
    for _ in 0..o.clients {
        clients.push(Client::connect(config.clone()).await.map_err(err)?);
    }
    let run = uuid::Uuid::new_v4().simple().to_string();
    let states: Arc<Vec<LockState>> =
        Arc::new((0..o.locks).map(|_| LockState::default()).collect());
    let shared = Arc::new(Shared::default());
    let per_task: Arc<Vec<AtomicU64>> = Arc::new((0..o.tasks).map(|_| AtomicU64::new(0)).collect());
    let mut observer = Observer::new(url).await?;
    let rss_start = rss_kib();

    // Sample connections and subscriptions while the run goes on.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = tokio::spawn({
        let sampling = sampling.clone();
        let url = url.to_owned();
        async move {
            let mut observer = Observer::new(&url).await?;
            let (mut peak_conns, mut peak_subs, mut peak_rss) = (0, 0, 0);
            while sampling.load(Ordering::Relaxed) {
                let (conns, subs) = observer.clients().await?;
                peak_conns = peak_conns.max(conns);
                peak_subs = peak_subs.max(subs);
                peak_rss = peak_rss.max(rss_kib());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok::<_, String>((peak_conns, peak_subs, peak_rss))
        }
    });

    let mut before = HashMap::new();
    let mut started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..o.tasks {
        let client = &clients[task % o.clients];
        let slot = task % o.locks;
        let name = format!("lockbench:{run}:{slot}");
        let base = name.clone();
        let (exclusive, shared_side): (RLock, Option<RLock>) = match o.kind {
            Kind::Reentrant => (client.get_lock(name).map_err(err)?, None),
            Kind::Fair => (client.get_fair_lock(name).map_err(err)?, None),
            Kind::Read => {
                let rw = client.get_read_write_lock(name).map_err(err)?;
                (rw.read_lock(), Some(rw.read_lock()))
            }
            Kind::Write => (
                client.get_read_write_lock(name).map_err(err)?.write_lock(),
                None,
            ),
            Kind::RwMix => {
                let rw = client.get_read_write_lock(name).map_err(err)?;
                (rw.write_lock(), Some(rw.read_lock()))
            }
            Kind::Fenced => ((*client.get_fenced_lock(name).map_err(err)?).clone(), None),
            Kind::Spin => (client.get_spin_lock(name).map_err(err)?, None),
            Kind::NonReentrant => (client.get_non_reentrant_lock(name).map_err(err)?, None),
            Kind::Group => (client.get_multi_lock(name, ["a", "b"]).map_err(err)?, None),
            Kind::Multi | Kind::RedLock | Kind::Semaphore => {
                (client.get_lock(name.clone()).map_err(err)?, None)
            }
        };
        let contender = match o.kind {
            Kind::Multi => Contender::Multi(
                MultiLock::new(vec![
                    client.get_lock(format!("{base}:a")).map_err(err)?,
                    client.get_lock(format!("{base}:b")).map_err(err)?,
                ])
                .map_err(err)?,
            ),
            Kind::RedLock => Contender::Red(
                RedLock::new(
                    (0..3)
                        .map(|i| clients[(task + i) % o.clients].get_lock(format!("{base}:{i}")))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(err)?,
                )
                .map_err(err)?,
            ),
            Kind::Semaphore => {
                let sem = client.get_semaphore(format!("{base}:sem")).map_err(err)?;
                sem.try_set_permits(1).await.map_err(err)?;
                Contender::Semaphore(sem)
            }
            _ => Contender::Lock,
        };
        let write_pct = match o.kind {
            Kind::Read => 0,
            Kind::RwMix => o.write_pct,
            _ => 100,
        };
        if task == 0 {
            // Warm up: the server caches the scripts on their first use (a
            // NOSCRIPT reply, then EVAL), a cost once per server, not per
            // acquisition; the counts below are the steady state.
            contender.acquire(&exclusive).await?.release().await?;
            if let Some(side) = &shared_side {
                contender.acquire(side).await?.release().await?;
            }
            before = observer.command_stats().await?;
            started = Instant::now();
        }
        let (states, shared, per_task) = (states.clone(), shared.clone(), per_task.clone());
        let (ops, hold) = (o.ops, o.hold);
        tasks.push(tokio::spawn(async move {
            let state = &states[slot];
            for op in 0..ops {
                if shared.stop.load(Ordering::Relaxed) {
                    shared.capped.store(true, Ordering::Relaxed);
                    break;
                }
                let is_write = (task * 7 + op * 13) % 100 < write_pct;
                let lock = match (&shared_side, is_write) {
                    (Some(side), false) => side,
                    _ => &exclusive,
                };
                let asked = Instant::now();
                locked(&state.waiting).insert(task, asked);
                let guard = contender.acquire(lock).await?;
                let got = Instant::now();
                locked(&state.waiting).remove(&task);
                locked(&shared.latencies).push(got - asked);
                shared.acquisitions.fetch_add(1, Ordering::Relaxed);
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
                            if release.by == task {
                                shared.barges.fetch_add(1, Ordering::Relaxed);
                            } else if asked < release.at {
                                locked(&shared.waiter_handoffs).push(gap);
                            }
                        }
                    }
                }
                // A busy hold that yields to the runtime.
                while got.elapsed() < hold {
                    tokio::task::yield_now().await;
                }
                if is_write {
                    state.writers.fetch_sub(1, Ordering::SeqCst);
                    let contended = !locked(&state.waiting).is_empty();
                    *locked(&state.last_release) = Some(Release {
                        at: Instant::now(),
                        by: task,
                        contended,
                    });
                } else {
                    state.readers.fetch_sub(1, Ordering::SeqCst);
                }
                guard.release().await?;
                per_task[task].fetch_add(1, Ordering::Relaxed);
            }
            if !shared.first_done.swap(true, Ordering::SeqCst) {
                *locked(&shared.fairness_at_first_done) =
                    per_task.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            }
            Ok::<_, String>(())
        }));
    }
    let limit = Duration::from_secs_f64(o.max_seconds);
    let stopper = tokio::spawn({
        let shared = shared.clone();
        async move {
            tokio::time::sleep(limit).await;
            shared.stop.store(true, Ordering::Relaxed);
        }
    });
    for task in tasks {
        task.await.map_err(err)??;
    }
    let wall = started.elapsed();
    stopper.abort();
    let after = observer.command_stats().await?;
    sampling.store(false, Ordering::Relaxed);
    let (peak_conns, peak_subs, peak_rss) = sampler.await.map_err(err)??;

    let acquisitions = shared.acquisitions.load(Ordering::Relaxed);
    let (round_trips, inner) = command_diff(&before, &after);
    let counts = locked(&shared.fairness_at_first_done).clone();
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sum_sq: f64 = counts.iter().map(|&c| (c as f64).powi(2)).sum();
    let jain = if sum_sq > 0.0 {
        sum * sum / (counts.len() as f64 * sum_sq)
    } else {
        1.0
    };
    let handoffs = std::mem::take(&mut *locked(&shared.handoffs));
    let barges = shared.barges.load(Ordering::Relaxed);
    let barge_pct = if handoffs.is_empty() {
        0.0
    } else {
        100.0 * barges as f64 / handoffs.len() as f64
    };
    let kind = match o.kind {
        Kind::Reentrant => "reentrant",
        Kind::Fair => "fair",
        Kind::Read => "read",
        Kind::Write => "write",
        Kind::RwMix => "rw-mix",
        Kind::Fenced => "fenced",
        Kind::Spin => "spin",
        Kind::NonReentrant => "non-reentrant",
        Kind::Multi => "multi",
        Kind::Group => "group",
        Kind::RedLock => "redlock",
        Kind::Semaphore => "semaphore",
    };
    Ok(json!({
        "workload": o.workload, "kind": kind, "tasks": o.tasks, "clients": o.clients, "locks": o.locks,
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
            "jain": jain,
        },
        "redis_cmds": round_trips,
        "cmds_per_acq": round_trips as f64 / (acquisitions.max(1)) as f64,
        "script_inner_cmds": inner,
        "connections": peak_conns,
        "peak_subscriptions": peak_subs,
        "rss_kib": {"start": rss_start, "peak": peak_rss},
    }))
}

/// `waiters` tasks of one client wait on `locks` locks (spread evenly) of
/// `kind`, each held by another client meanwhile; then every lock is released
/// and each waiter takes its lock once (hold 0) and releases it. Reports the
/// time to serve them all, the slowest scripts (SLOWLOG, over 1 ms), the
/// connections and the client's memory per waiter.
async fn waiters_scale(
    url: &str,
    kind: Kind,
    waiters: usize,
    locks: usize,
) -> Result<serde_json::Value, String> {
    let mut observer = Observer::new(url).await?;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "slowlog-log-slower-than", "1000"])
        .query_async(&mut observer.conn)
        .await
        .map_err(err)?;
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut observer.conn)
        .await
        .map_err(err)?;
    let config = Config::from_url(url).map_err(err)?;
    let holder = Client::connect(config.clone()).await.map_err(err)?;
    let client = Client::connect(config).await.map_err(err)?;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let name = |i: usize| format!("lockbench:{run}:scale:{i}");
    let get = |c: &Client, i: usize| match kind {
        Kind::Fair => c.get_fair_lock(name(i)),
        _ => c.get_lock(name(i)),
    };
    let mut held = Vec::with_capacity(locks);
    for i in 0..locks {
        held.push(get(&holder, i).map_err(err)?.lock().await.map_err(err)?);
    }
    let rss_before = rss_kib();
    let heap_before = ALLOCATOR.allocated() as f64;
    let served = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(waiters);
    for w in 0..waiters {
        let lock = get(&client, w % locks).map_err(err)?;
        let served = served.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await?;
            served.fetch_add(1, Ordering::Relaxed);
            guard.unlock().await
        }));
        if w % 1_000 == 999 {
            tokio::task::yield_now().await;
        }
    }
    // Every waiter has made its first attempt (and, fair, joined its line).
    let queued = Instant::now();
    loop {
        let waiting = match kind {
            // (The observer's queries may time out behind the burst: not yet.)
            Kind::Fair => {
                let mut total = 0usize;
                for i in 0..locks.min(16) {
                    let n: redis::RedisResult<usize> = redis::cmd("LLEN")
                        .arg(format!("redisson_lock_queue:{{{}}}", name(i)))
                        .query_async(&mut observer.conn)
                        .await;
                    total += n.unwrap_or(0);
                }
                total >= waiters.min(16 * waiters.div_ceil(locks))
            }
            // Every lock's channel subscribed on the server, not just asked for.
            // (The observer's query may time out behind the burst: not yet.)
            _ => observer.clients().await.map_or(0, |(_, subs)| subs) >= locks.min(waiters) as u64,
        };
        if waiting || queued.elapsed() > Duration::from_secs(120) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_waiting = rss_kib();
    let heap_waiting = ALLOCATOR.allocated() as f64;
    let heap_peak = ALLOCATOR.max_allocated() as f64;
    let (connections, subscriptions) = observer.clients().await?;
    let started = Instant::now();
    for guard in held {
        guard.unlock().await.map_err(err)?;
    }
    let mut errors = 0usize;
    for task in tasks {
        if !matches!(task.await, Ok(Ok(()))) {
            errors += 1;
        }
    }
    let served_s = started.elapsed().as_secs_f64();
    let slow: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(128)
        .query_async(&mut observer.conn)
        .await
        .map_err(err)?;
    let slowest_us = slow
        .iter()
        .filter_map(|entry| match entry {
            redis::Value::Array(fields) => match fields.get(2) {
                Some(redis::Value::Int(us)) => Some(*us),
                _ => None,
            },
            _ => None,
        })
        .max()
        .unwrap_or(0);
    // What the slow entries ran: the command, and a script's first key.
    let mut slow_commands: HashMap<String, u64> = HashMap::new();
    for entry in &slow {
        if let redis::Value::Array(fields) = entry {
            if let Some(redis::Value::Array(args)) = fields.get(3) {
                let text = |v: Option<&redis::Value>| match v {
                    Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_lowercase(),
                    _ => String::new(),
                };
                let command = text(args.first());
                *slow_commands.entry(command).or_default() += 1;
            }
        }
    }
    Ok(json!({
        "slow_commands": slow_commands,
        "scale": "waiters", "kind": if kind == Kind::Fair { "fair" } else { "reentrant" },
        "waiters": waiters, "locks": locks,
        "served": served.load(Ordering::Relaxed), "errors": errors,
        "served_s": served_s,
        "scripts_over_1ms": slow.len(), "slowest_script_us": slowest_us,
        "connections_during_wait": connections, "subscriptions_during_wait": subscriptions,
        "rss_kib_per_waiter": (rss_waiting.saturating_sub(rss_before)) as f64 / waiters as f64,
        "heap_kib_per_waiter": (heap_waiting - heap_before) / 1024.0 / waiters as f64,
        "heap_peak_kib_per_waiter": (heap_peak - heap_before) / 1024.0 / waiters as f64,
    }))
}

/// 10,000 locks held under the watchdog for two renewal periods: how many renewal
/// script calls per period, and how many connections.
async fn watchdog_scale(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let mut config = Config::from_url(url).map_err(err)?;
    config.lock_watchdog_timeout = Duration::from_millis(o.watchdog_ms);
    let client = Client::connect(config).await.map_err(err)?;
    let mut observer = Observer::new(url).await?;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let started = Instant::now();
    let mut guards = Vec::with_capacity(o.watchdog_locks);
    for chunk in (0..o.watchdog_locks).collect::<Vec<_>>().chunks(200) {
        let mut pending = Vec::new();
        for &i in chunk {
            let lock = client
                .get_lock(format!("lockbench:{run}:wd:{i}"))
                .map_err(err)?;
            pending.push(tokio::spawn(
                async move { lock.with_owner_id(1).lock().await },
            ));
        }
        for p in pending {
            guards.push(p.await.map_err(err)?.map_err(err)?);
        }
    }
    let acquire_s = started.elapsed().as_secs_f64();
    let period = Duration::from_millis(o.watchdog_ms / 3);
    let before = observer.command_stats().await?;
    let window = period * 2 + period / 2;
    tokio::time::sleep(window).await;
    let after = observer.command_stats().await?;
    let renew_calls =
        after.get("evalsha").copied().unwrap_or(0) - before.get("evalsha").copied().unwrap_or(0);
    let (connections, subscriptions) = observer.clients().await?;
    let held: u64 = redis::cmd("DBSIZE")
        .query_async(&mut observer.conn)
        .await
        .map_err(err)?;
    let lost = guards.iter().filter(|g| g.is_lease_lost()).count();
    let periods = window.as_secs_f64() / period.as_secs_f64();
    for guard in guards {
        guard.unlock().await.map_err(err)?;
    }
    Ok(json!({
        "scale": "watchdog", "locks": o.watchdog_locks, "watchdog_ms": o.watchdog_ms,
        "acquire_s": acquire_s,
        "window_s": window.as_secs_f64(), "renewal_periods_in_window": periods,
        "renew_script_calls": renew_calls,
        "renew_calls_per_period": renew_calls as f64 / periods.floor().max(1.0),
        "locks_still_held": held, "lost_reported": lost,
        "connections": connections, "subscriptions": subscriptions,
        "rss_kib": rss_kib(),
    }))
}
