//! Liveness campaigns: recorded histories of nested locks across real
//! processes, checked by the safety models (`history.rs`) and by the
//! progress checker (`progress.rs`): no waiter waits on a lock free for it
//! past a bound.
//!
//! The workload the earlier campaigns lacked: each child process has two
//! clients, one shared by four tasks and one used by a fifth (so holders
//! alternate between the same client and others, where the local line, the
//! grant and the early subscription meet); every round a task
//! takes two of seven locks of every kind (reentrant, fair, read-write, a
//! writer or a reader, a second fair one, fenced, a semaphore of two
//! permits, a fair semaphore of two permits) in one global order, holds each
//! a few milliseconds, and gives both back.
//!
//! - Without faults, the processes run with their sets of heuristics (all
//!   on in two, all off, one off chosen by the seed), every wait is recorded, and
//!   the clients re-check only every 40 s: a waiter that slept on a free
//!   lock shows as a stall of seconds, the bound is 2 s.
//! - With frees behind the waiters' backs: another client's force-unlock,
//!   the tool's, Java's; a `DEL` of the key; a pub/sub `CLIENT KILL`; Java
//!   waiters whose `tryLock` runs out as they are woken. The clients
//!   re-check at the default 1 s, and the bound is that plus the fair
//!   grace a timed-out Java head may hold the line for.
//!
//! Each prints its seed; `CAMPAIGN_SEED` replays it, and a failing history
//! is kept under `target/histories/`.

use std::sync::Arc;
use std::time::Duration;

use redisson_locks::{Client, LockGuard};

use super::histories::{check_progress, seeded};
use crate::support::child::ChildHolder;
use crate::support::history::{
    check, merge, FencedMutex, Mutex, Op, Operation, Outcome, Permits, ReadWrite, Recorder,
};
use crate::support::progress::Admits;
use crate::support::{within, RedisServer};

/// The locks, in their global order, and what each is.
const MIX: [(&str, Kind); 7] = [
    ("nest-reentrant", Kind::Reentrant),
    ("nest-fair", Kind::Fair),
    ("nest-rw", Kind::ReadWrite),
    ("nest-fair-2", Kind::Fair),
    ("nest-fenced", Kind::Fenced),
    ("nest-slots", Kind::Semaphore),
    ("nest-fair-slots", Kind::FairSemaphore),
];

/// The semaphore of the mix.
const SEMAPHORE: &str = "nest-slots";

/// The fair semaphore of the mix.
const FAIR_SEMAPHORE: &str = "nest-fair-slots";

/// How many of the mix, at its end, are semaphores (no holder to force out).
const SEMAPHORES: usize = 2;

/// Each semaphore's permits.
const PERMITS: u32 = 2;

/// The longest a timed wait of the workload lasts before it gives up (a
/// `fail`: the checker still sees it wait). Half the waits are untimed.
const WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Reentrant,
    Fair,
    ReadWrite,
    Fenced,
    Semaphore,
    FairSemaphore,
}

/// How the progress checker reads the campaign's locks.
fn kind_of(lock: &str) -> Option<(Admits, &'static str)> {
    let (_, kind) = MIX.iter().find(|(name, _)| *name == lock)?;
    Some(match kind {
        Kind::Reentrant => (Admits::One, "reentrant"),
        Kind::Fair => (Admits::One, "fair"),
        Kind::ReadWrite => (Admits::ReadersOrWriter, "read-write"),
        Kind::Fenced => (Admits::One, "fenced"),
        Kind::Semaphore => (Admits::Permits(PERMITS), "semaphore"),
        Kind::FairSemaphore => (Admits::Permits(PERMITS), "fair-semaphore"),
    })
}

/// A hold of one lock of the mix.
enum Held {
    Guard(LockGuard),
    Permit(redisson_locks::RSemaphore),
    FairPermit(redisson_locks::FairPermits),
}

/// Takes lock `index` of the mix as `owner`, recorded: the hold (and what
/// to record its release as), or `None` when the wait ran out or failed.
async fn take(
    client: &Client,
    recorder: &Recorder,
    owner: &str,
    index: usize,
    draw: &mut impl FnMut(u64) -> u64,
) -> Option<(Held, Op)> {
    let (name, kind) = MIX[index];
    let read = kind == Kind::ReadWrite && draw(2) == 1;
    // Half the waits untimed: a timed one whose deadline comes before the
    // holder's lease ends makes its attempts instead of sleeping behind it,
    // and some of the engine's orders arise only without a deadline.
    let wait = (draw(2) == 0).then_some(WAIT);
    let (asked, given_back) = match (kind, read) {
        (Kind::Semaphore | Kind::FairSemaphore, _) => (Op::PermitAcquire, Op::PermitRelease),
        (_, true) => (Op::ReadAcquire, Op::ReadRelease),
        _ => (Op::Acquire, Op::Release),
    };
    let call = recorder.invoke(owner, name, asked);
    let taken: redisson_locks::Result<Option<(Held, Option<u64>)>> = async {
        Ok(match kind {
            Kind::Reentrant => waiting(client.get_lock(name)?, wait)
                .await?
                .map(|g| (Held::Guard(g), None)),
            Kind::Fair => waiting(client.get_fair_lock(name)?, wait)
                .await?
                .map(|g| (Held::Guard(g), None)),
            Kind::ReadWrite => {
                let rw = client.get_read_write_lock(name)?;
                let side = if read {
                    rw.read_lock()
                } else {
                    rw.write_lock()
                };
                waiting(side, wait).await?.map(|g| (Held::Guard(g), None))
            }
            Kind::Fenced => {
                let fenced = client.get_fenced_lock(name)?;
                match wait {
                    Some(wait) => fenced.try_lock_and_get_token(wait, None).await?,
                    None => Some(fenced.lock_and_get_token().await?),
                }
                .map(|(g, token)| (Held::Guard(g), Some(token)))
            }
            Kind::Semaphore => {
                let semaphore = client.get_semaphore(name)?;
                let taken = match wait {
                    Some(wait) => semaphore.try_acquire_wait(wait).await?,
                    None => semaphore.acquire().await.map(|()| true)?,
                };
                taken.then_some((Held::Permit(semaphore), None))
            }
            Kind::FairSemaphore => {
                let semaphore = client.get_fair_semaphore(name)?;
                match wait {
                    Some(wait) => semaphore.try_acquire(1, wait).await?,
                    None => Some(semaphore.acquire(1).await?),
                }
                .map(|permits| (Held::FairPermit(permits), None))
            }
        })
    }
    .await;
    match taken {
        Ok(Some((held, token))) => {
            call.end(Outcome::Ok, token);
            Some((held, given_back))
        }
        Ok(None) => {
            call.end(Outcome::Fail, None);
            None
        }
        Err(_) => None,
    }
}

/// `lock`, waiting at most `wait`, or as long as it takes.
async fn waiting(
    lock: redisson_locks::RLock,
    wait: Option<Duration>,
) -> redisson_locks::Result<Option<LockGuard>> {
    match wait {
        Some(wait) => lock.try_lock_wait(wait).await,
        None => lock.lock().await.map(Some),
    }
}

/// Gives `held` (lock `index`) back as `owner`, recorded as `op`.
async fn give_back(recorder: &Recorder, owner: &str, index: usize, (held, op): (Held, Op)) {
    let call = recorder.invoke(owner, MIX[index].0, op);
    let released = match held {
        Held::Guard(guard) => guard.unlock().await,
        Held::Permit(semaphore) => semaphore.release().await,
        Held::FairPermit(permits) => permits.release().await,
    };
    match released {
        Ok(()) => call.end(Outcome::Ok, None),
        Err(e) if e.is_not_held() => call.end(Outcome::Refused, None),
        Err(_) => drop(call),
    }
}

/// One task of the workload: rounds until `until`.
async fn nested_task(
    client: Client,
    recorder: Arc<Recorder>,
    owner: String,
    seed: u64,
    until: std::time::Instant,
) {
    // Each `draw(n)` is below `n` (never 0 here).
    let mut draw = seeded(seed | 1);
    while std::time::Instant::now() < until {
        let first = draw(MIX.len() as u64 - 1) as usize;
        let second = first + 1 + draw((MIX.len() - first - 1) as u64) as usize;
        let Some(outer) = take(&client, &recorder, &owner, first, &mut draw).await else {
            continue;
        };
        tokio::time::sleep(Duration::from_millis(draw(21))).await;
        if let Some(inner) = take(&client, &recorder, &owner, second, &mut draw).await {
            tokio::time::sleep(Duration::from_millis(draw(11))).await;
            give_back(&recorder, &owner, second, inner).await;
        }
        give_back(&recorder, &owner, first, outer).await;
    }
}

/// The child's part (`LOCKS_CHILD=nested`, see `faults::child_process_entry`):
/// two clients of `config`, the first shared by four tasks, the second
/// used by one, running rounds for `run_for` and recording into `dir` as process
/// `name`; prints `DONE` when they all ended.
pub(super) async fn nested_child(
    config: redisson_locks::Config,
    dir: String,
    name: String,
    run_for: Duration,
) {
    let recorder = Arc::new(Recorder::create(std::path::Path::new(&dir), &name));
    let shared = Client::connect(config.clone()).await.unwrap();
    let other = Client::connect(config).await.unwrap();
    println!("READY");
    let until = std::time::Instant::now() + run_for;
    let seed = uuid::Uuid::new_v4().as_u64_pair().0;
    let mut tasks = Vec::new();
    for t in 0..5_u64 {
        let client = if t < 4 { shared.clone() } else { other.clone() };
        let owner = format!("{name}t{t}");
        tasks.push(tokio::spawn(nested_task(
            client,
            recorder.clone(),
            owner,
            seed.wrapping_add(t * 7919),
            until,
        )));
    }
    for task in tasks {
        task.await.unwrap();
    }
    shared.close().await;
    other.close().await;
    println!("DONE");
}

/// The heuristics the engine can run without (`engine/heuristics.rs`).
const HEURISTICS: [&str; 9] = [
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

/// How long the children run their rounds.
const RUN_FOR: Duration = Duration::from_secs(6);

/// Starts `without.len()` child processes running the nested workload
/// against `server`, recording into `dir`; process `i` runs without the
/// heuristics `without[i]` and re-checks every `recheck`.
fn spawn_nested(
    server: &RedisServer,
    dir: &std::path::Path,
    without: &[String],
    recheck: Duration,
) -> Vec<ChildHolder> {
    without
        .iter()
        .enumerate()
        .map(|(i, without)| {
            let mut child = ChildHolder::spawn_with_env(
                &[
                    ("CHILD", "nested".to_owned()),
                    ("URL", server.url()),
                    ("DIR", dir.display().to_string()),
                    ("NAME", format!("p{i}")),
                    ("RUN_MS", RUN_FOR.as_millis().to_string()),
                    ("RECHECK_MS", recheck.as_millis().to_string()),
                ],
                &[("REDISSON_LOCKS_WITHOUT", without.clone())],
            );
            assert!(child.wait_for_line("READY"), "child p{i} started");
            child
        })
        .collect()
}

/// Waits, at most 180 s, for the children to finish their rounds.
async fn finish(children: Vec<ChildHolder>) {
    let finished = tokio::task::spawn_blocking(move || {
        for (i, mut child) in children.into_iter().enumerate() {
            assert!(
                child.wait_for_line("DONE"),
                "child p{i} ended before its rounds did"
            );
            assert!(child.wait(Duration::from_secs(30)), "child p{i} failed");
        }
    });
    within(Duration::from_secs(180), "the nested processes", finished)
        .await
        .unwrap();
}

/// Gives the semaphores their permits (once).
async fn set_permits(server: &RedisServer) {
    let client = server.client().await;
    assert!(client
        .get_semaphore(SEMAPHORE)
        .unwrap()
        .try_set_permits(PERMITS)
        .await
        .unwrap());
    assert!(client
        .get_fair_semaphore(FAIR_SEMAPHORE)
        .unwrap()
        .try_set_permits(PERMITS)
        .await
        .unwrap());
    client.close().await;
}

/// Checks every lock of the mix against its safety model.
fn check_safety(history: &[Operation]) -> Result<(), String> {
    for (lock, kind) in MIX {
        let ops: Vec<Operation> = history.iter().filter(|o| o.lock == lock).cloned().collect();
        let verdict = match kind {
            Kind::Reentrant | Kind::Fair => check(&Mutex, &ops),
            Kind::ReadWrite => check(&ReadWrite, &ops),
            Kind::Fenced => check(&FencedMutex { reentrant: false }, &ops),
            Kind::Semaphore | Kind::FairSemaphore => check(&Permits { n: PERMITS.into() }, &ops),
        };
        verdict.map_err(|v| {
            format!(
                "{lock}: its model found no order ({} operations)",
                v.operations.len()
            )
        })?;
        if !ops.iter().any(|o| o.outcome == Outcome::Ok) {
            return Err(format!("{lock} was never taken: the run checked nothing"));
        }
    }
    Ok(())
}

/// The longest a waiter may wait on a lock free for it without faults,
/// in a debug build on two loaded cores: far above a hand-off (milliseconds)
/// and far below what a missed wake-up costs here (the lease, 30 s: the
/// children re-check only every 40 s).
const NESTED_STALL_BOUND: Duration = Duration::from_secs(2);

/// Four processes, with their sets of heuristics (all on in two, all off,
/// one off chosen by the seed), nested rounds over every kind for 6 s: every
/// lock's history is linearizable, and no waiter waited on a lock free for
/// it for longer than [`NESTED_STALL_BOUND`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_locks_across_processes_are_safe_and_live_whatever_the_heuristics() {
    let seed = super::histories::campaign_seed("nested campaign");
    let mut next = super::histories::seeded(seed);
    let one_off = HEURISTICS[next(HEURISTICS.len() as u64) as usize];
    let mut without = [
        String::new(),
        String::new(),
        HEURISTICS.join(","),
        one_off.to_owned(),
    ];
    // `CAMPAIGN_WITHOUT=name,...` (or `all`): every process without those,
    // as `scripts/campaign` runs each heuristic off in turn.
    if let Ok(only) = std::env::var("CAMPAIGN_WITHOUT") {
        let only = if only == "all" {
            HEURISTICS.join(",")
        } else {
            only
        };
        without = std::array::from_fn(|_| only.clone());
    }
    eprintln!("nested campaign seed {seed}: processes without {without:?}");
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-nested-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    set_permits(&server).await;
    let children = spawn_nested(&server, &dir, &without, crate::support::SUITE_RECHECK);
    // A waiter asleep on a free lock wakes at the lease's end (30 s): the
    // run ends whatever the engine does, and the checker names the stall.
    finish(children).await;
    let history = merge(&dir);
    let run = format!("nested campaign seed {seed}");
    eprintln!("{run}: {} operations", history.len());
    if let Err(why) = check_safety(&history) {
        let kept = super::histories::keep(&dir, &format!("nested-{seed}"));
        panic!("{run}: {why}; the history is kept in {}", kept.display());
    }
    check_progress(
        &history,
        kind_of,
        (&dir, &format!("nested-{seed}"), &run),
        Duration::from_secs(10),
        NESTED_STALL_BOUND,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The longest a waiter may wait on a lock freed behind its back: the
/// re-check interval (1 s) for a freeing nothing announced (a `DEL`), a
/// reconnect after a pub/sub `CLIENT KILL` (its backoff is drawn up to the
/// 1.5 s retry interval), and a loaded debug build's slack.
const FREED_STALL_BOUND: Duration = Duration::from_millis(3_500);

/// How the parent frees a lock behind the waiters' backs.
#[derive(Debug, Default)]
struct Freed {
    forced: usize,
    deleted: usize,
    by_tool: usize,
    by_java: usize,
    pubsub_kills: usize,
    java_waits: usize,
}

/// Records an operator's freeing of `lock`, `done` by `freeing`.
async fn freeing<F: std::future::Future<Output = bool>>(
    recorder: &Recorder,
    lock: &str,
    freeing: F,
) {
    let call = recorder.invoke("operator", lock, Op::ForceRelease);
    if freeing.await {
        call.end(Outcome::Ok, None);
    } else {
        call.end(Outcome::Refused, None);
    }
}

/// A Java waiter, over and over until `stop`: a `tryLock` on the reentrant
/// or the fair lock of the mix whose wait (20 to 150 ms) often runs out as
/// it is woken, a short hold when it gets the lock; recorded (the test's
/// clock, at the command and at its answer).
async fn java_waits(
    mut java: crate::support::java::JavaDriver,
    recorder: Arc<Recorder>,
    seed: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> usize {
    let mut next = super::histories::seeded(seed);
    let mut waits = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (name, kind) = if next(2) == 0 {
            (MIX[0].0, "reentrant")
        } else {
            (MIX[1].0, "fair")
        };
        let wait = 20 + next(131) as i64;
        let call = recorder.invoke("java", name, Op::Acquire);
        java.lock("jw", kind, name, 0, wait);
        let answer = java
            .expect_any(
                &["acquired", "not_acquired"],
                Some("jw"),
                Duration::from_secs(30),
            )
            .await;
        waits += 1;
        if answer["event"] != "acquired" {
            call.end(Outcome::Fail, None);
            continue;
        }
        call.end(Outcome::Ok, None);
        tokio::time::sleep(Duration::from_millis(2 + next(4))).await;
        let call = recorder.invoke("java", name, Op::Release);
        java.unlock("jw", kind, name);
        match java
            .expect_any(&["unlocked", "error"], Some("jw"), Duration::from_secs(30))
            .await["event"]
            .as_str()
        {
            Some("unlocked") => call.end(Outcome::Ok, None),
            _ => call.end(Outcome::Refused, None),
        }
    }
    java.exit(Duration::from_secs(10)).await;
    waits
}

/// Four processes run the nested workload (all heuristics on, the default
/// re-check) while the test frees their locks behind their backs, at seeded
/// intervals: another client's `force_unlock`, the tool's `force-unlock`,
/// Java's `forceUnlock`, a `DEL` of the key, a pub/sub-only `CLIENT KILL`;
/// and a Java waiter's `tryLock`s run out as they are woken, on the
/// reentrant and the fair lock. A forced holder believes it holds a while:
/// the safety models do not apply, progress does. No waiter waits on a lock
/// free for it past [`FREED_STALL_BOUND`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_locks_freed_behind_their_waiters_backs_are_taken_promptly() {
    let seed = super::histories::campaign_seed("freed campaign");
    let mut next = super::histories::seeded(seed);
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-freed-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    set_permits(&server).await;
    let recheck = redisson_locks::Config::default().recheck_interval;
    let children = spawn_nested(
        &server,
        &dir,
        &[String::new(), String::new(), String::new(), String::new()],
        recheck,
    );
    let recorder = Arc::new(Recorder::create(&dir, "operator"));
    let java =
        crate::support::java::JavaDriver::start(&server.url(), Duration::from_secs(30), None).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let java = tokio::spawn(java_waits(java, recorder.clone(), seed, stop.clone()));
    let mut forcer =
        crate::support::java::JavaDriver::start(&server.url(), Duration::from_secs(30), None).await;
    let operator = server.client().await;
    let mut admin = server.admin().await;
    let tool = option_env!("CARGO_BIN_EXE_redisson-locks");
    let mut freed = Freed::default();
    let started = std::time::Instant::now();
    while started.elapsed() < RUN_FOR {
        tokio::time::sleep(Duration::from_millis(200 + next(400))).await;
        // Never a semaphore: it has no holder to force out, and its
        // permits deleted would be gone for good (the pub/sub kills reach
        // their waiters).
        let lock = MIX[next((MIX.len() - SEMAPHORES) as u64) as usize].0;
        match next(5) {
            0 => {
                freeing(&recorder, lock, async {
                    operator
                        .force_unlock(lock)
                        .await
                        .is_ok_and(|(_, forced)| forced)
                })
                .await;
                freed.forced += 1;
            }
            1 => {
                freeing(&recorder, lock, async {
                    redis::cmd("DEL")
                        .arg(lock)
                        .query_async::<i64>(&mut admin)
                        .await
                        .is_ok_and(|n| n == 1)
                })
                .await;
                freed.deleted += 1;
            }
            2 => {
                let _: redis::RedisResult<redis::Value> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("pubsub")
                    .query_async(&mut admin)
                    .await;
                freed.pubsub_kills += 1;
            }
            3 if tool.is_some() => {
                let url = server.url();
                freeing(&recorder, lock, async {
                    let status = tokio::process::Command::new(tool.unwrap_or_default())
                        .args(["--url", &url, "force-unlock", lock, "--yes"])
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status()
                        .await;
                    status.is_ok_and(|s| s.success())
                })
                .await;
                freed.by_tool += 1;
            }
            4 if matches!(
                MIX.iter().find(|(name, _)| *name == lock),
                Some((_, Kind::Reentrant | Kind::Fair))
            ) =>
            {
                let kind = if lock == MIX[0].0 {
                    "reentrant"
                } else {
                    "fair"
                };
                freeing(&recorder, lock, async {
                    forcer.act("jforce", "force_unlock", kind, lock, serde_json::json!({}));
                    let forced = forcer
                        .expect("forced", Some("jforce"), Duration::from_secs(30))
                        .await;
                    forced["result"] == true
                })
                .await;
                freed.by_java += 1;
            }
            _ => {}
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    freed.java_waits = within(Duration::from_secs(60), "the Java waiter", java)
        .await
        .unwrap();
    forcer.exit(Duration::from_secs(10)).await;
    finish(children).await;
    let history = merge(&dir);
    let run = format!("freed campaign seed {seed}");
    eprintln!("{run}: {} operations, {freed:?}", history.len());
    check_progress(
        &history,
        kind_of,
        (&dir, &format!("freed-{seed}"), &run),
        Duration::from_secs(10),
        FREED_STALL_BOUND,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
