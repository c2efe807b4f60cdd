//! The scale runs: many waiters served once (`waiters`, `spread`), and many
//! locks held under the watchdog (`watchdog`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redisson_locks::{Client, FairPermits, LockGuard, RFairSemaphore, RLock};
use serde_json::json;

use crate::observe::{rss_kib, Observer};
use crate::options::{err, Kind, Options};
use crate::ALLOCATOR;

/// The locks of one scale run: `kind` (fair, a fair semaphore of one permit,
/// else reentrant) under this run's names.
struct ScaleLocks {
    run: String,
    kind: Kind,
}

/// One lock of a scale run.
enum Waitable {
    Lock(RLock),
    Permits(RFairSemaphore),
}

/// A hold of one.
enum Held {
    Lock(LockGuard),
    Permits(FairPermits),
}

impl Waitable {
    async fn hold(&self) -> redisson_locks::Result<Held> {
        Ok(match self {
            Waitable::Lock(lock) => Held::Lock(lock.lock().await?),
            Waitable::Permits(semaphore) => Held::Permits(semaphore.acquire(1).await?),
        })
    }
}

impl Held {
    async fn release(self) -> redisson_locks::Result<()> {
        match self {
            Held::Lock(guard) => guard.unlock().await,
            Held::Permits(permits) => permits.release().await,
        }
    }
}

impl ScaleLocks {
    fn name(&self, i: usize) -> String {
        format!("lockbench:{}:scale:{i}", self.run)
    }

    async fn get(&self, client: &Client, i: usize) -> Result<Waitable, String> {
        Ok(match self.kind {
            Kind::Fair => Waitable::Lock(client.get_fair_lock(self.name(i)).map_err(err)?),
            Kind::FairSemaphore => {
                let semaphore = client.get_fair_semaphore(self.name(i)).map_err(err)?;
                semaphore.try_set_permits(1).await.map_err(err)?;
                Waitable::Permits(semaphore)
            }
            _ => Waitable::Lock(client.get_lock(self.name(i)).map_err(err)?),
        })
    }

    /// The line whose length counts the waiters queued on lock `i`.
    fn queue(&self, i: usize) -> String {
        match self.kind {
            Kind::FairSemaphore => format!("redisson_fair_semaphore_queue:{{{}}}", self.name(i)),
            _ => format!("redisson_lock_queue:{{{}}}", self.name(i)),
        }
    }
}

/// `waiters` tasks of one client wait on `locks` locks (spread evenly) of
/// `kind`, each held by another client meanwhile; then every lock is released
/// and each waiter takes its lock once (hold 0) and releases it. Reports the
/// time to serve them all, the slowest scripts (SLOWLOG, over 1 ms), the
/// connections and the client's memory per waiter.
pub(crate) async fn waiters_scale(
    url: &str,
    kind: Kind,
    waiters: usize,
    locks: usize,
) -> Result<serde_json::Value, String> {
    let mut observer = Observer::new(url).await?;
    reset_slowlog(&mut observer).await?;
    let config = crate::options::client_config(url)?;
    let holder = Client::connect(config.clone()).await.map_err(err)?;
    let client = Client::connect(config).await.map_err(err)?;
    let scale = ScaleLocks {
        run: uuid::Uuid::new_v4().simple().to_string(),
        kind,
    };
    let mut held = Vec::with_capacity(locks);
    for i in 0..locks {
        held.push(scale.get(&holder, i).await?.hold().await.map_err(err)?);
    }
    let rss_before = rss_kib();
    let heap_before = ALLOCATOR.allocated() as f64;
    let served = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(waiters);
    for w in 0..waiters {
        let served = served.clone();
        // A task of each kind's own future (an enum's would be the larger's).
        tasks.push(match scale.get(&client, w % locks).await? {
            Waitable::Lock(lock) => tokio::spawn(async move {
                let guard = lock.lock().await?;
                served.fetch_add(1, Ordering::Relaxed);
                guard.unlock().await
            }),
            Waitable::Permits(semaphore) => tokio::spawn(async move {
                let permits = semaphore.acquire(1).await?;
                served.fetch_add(1, Ordering::Relaxed);
                permits.release().await
            }),
        });
        if w % 1_000 == 999 {
            tokio::task::yield_now().await;
        }
    }
    wait_until_waiting(&mut observer, &scale, waiters, locks).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_waiting = rss_kib();
    let heap_waiting = ALLOCATOR.allocated() as f64;
    let heap_peak = ALLOCATOR.max_allocated() as f64;
    let (connections, subscriptions) = observer.clients().await?;
    let started = Instant::now();
    for guard in held {
        guard.release().await.map_err(err)?;
    }
    let mut errors = 0usize;
    for task in tasks {
        if !matches!(task.await, Ok(Ok(()))) {
            errors += 1;
        }
    }
    let served_s = started.elapsed().as_secs_f64();
    let (slow, slowest_us, slow_commands) = slowlog(&mut observer).await?;
    Ok(json!({
        "slow_commands": slow_commands,
        "scale": "waiters", "kind": match kind { Kind::Fair | Kind::FairSemaphore => kind.name(), _ => "reentrant" },
        "waiters": waiters, "locks": locks,
        "served": served.load(Ordering::Relaxed), "errors": errors,
        "served_s": served_s,
        "scripts_over_1ms": slow, "slowest_script_us": slowest_us,
        "connections_during_wait": connections, "subscriptions_during_wait": subscriptions,
        "rss_kib_per_waiter": (rss_waiting.saturating_sub(rss_before)) as f64 / waiters as f64,
        "heap_kib_per_waiter": (heap_waiting - heap_before) / 1024.0 / waiters as f64,
        "heap_peak_kib_per_waiter": (heap_peak - heap_before) / 1024.0 / waiters as f64,
    }))
}

/// Logs every command over 1 ms, from an empty SLOWLOG.
async fn reset_slowlog(observer: &mut Observer) -> Result<(), String> {
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
    Ok(())
}

/// Returns once every waiter has made its first attempt (and, fair, joined its
/// line, with each line's head listening), or after 120 s.
async fn wait_until_waiting(
    observer: &mut Observer,
    scale: &ScaleLocks,
    waiters: usize,
    locks: usize,
) {
    let queued = Instant::now();
    loop {
        let waiting = match scale.kind {
            // (The observer's queries may time out behind the burst: not yet.)
            // Every line's head listening, then (a command per lock, asked
            // only then, so as not to load the server) every waiter queued.
            Kind::Fair | Kind::FairSemaphore => {
                observer.clients().await.map_or(0, |(_, subs)| subs) >= locks.min(waiters) as u64
                    && queued_waiters(observer, scale, locks).await >= waiters
            }
            // Every lock's channel subscribed on the server, not just asked for.
            // (The observer's query may time out behind the burst: not yet.)
            _ => observer.clients().await.map_or(0, |(_, subs)| subs) >= locks.min(waiters) as u64,
        };
        if waiting || queued.elapsed() > Duration::from_secs(120) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many waiters stand in the fair queues of the run's `locks` locks
/// (0 while the observer's queries time out behind the burst).
async fn queued_waiters(observer: &mut Observer, scale: &ScaleLocks, locks: usize) -> usize {
    let mut total = 0;
    for first in (0..locks).step_by(1_000) {
        let mut pipe = redis::pipe();
        for i in first..(first + 1_000).min(locks) {
            pipe.cmd("LLEN").arg(scale.queue(i));
        }
        let lengths: redis::RedisResult<Vec<usize>> = pipe.query_async(&mut observer.conn).await;
        match lengths {
            Ok(lengths) => total += lengths.iter().sum::<usize>(),
            Err(_) => return 0,
        }
    }
    total
}

/// The SLOWLOG (up to 128 entries): how many entries, the slowest in µs, and
/// how many of them each command ran.
async fn slowlog(observer: &mut Observer) -> Result<(usize, i64, HashMap<String, u64>), String> {
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
    Ok((slow.len(), slowest_us, slow_commands))
}

/// 10,000 locks held under the watchdog for two renewal periods: how many renewal
/// script calls per period, and how many connections.
pub(crate) async fn watchdog_scale(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let mut config = crate::options::client_config(url)?;
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
