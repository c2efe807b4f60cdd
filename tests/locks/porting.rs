//! A porting corpus: every lock kind and synchronizer used the way Redisson's
//! documentation ("Distributed locks and synchronizers") shows it, each written
//! twice:
//!
//! - **line by line in the Java owner mode** (`config.owner_mode =
//!   OwnerMode::Task`): the task is the owner, as the thread is in Java, so
//!   `lock.lock(); try { .. } finally { lock.unlock(); }` ports as
//!   `lock.lock().await?.detach(); ..; lock.unlock().await?`, a nested `lock()`
//!   in a called function re-enters, and the documented downgrade works as
//!   written. These run in a task of their own, as a request handler would.
//! - **the idiomatic way** (the default config): guards, and `guard.scope(..)` /
//!   `lock.with(..)` for nesting and the downgrade.
//!
//! For the locks, the literal port also runs on the default owner mode with
//! `SelfWait::Refuse`: the nested `lock()` and the literal downgrade fail at once
//! with `Error::WouldDeadlock`, naming the lock and the fix, and leave nothing
//! behind.
//!
//! Semaphore permits and latch counts have no owner, in Redisson either, so for
//! the synchronizers both ways are the same code: one scenario, run once on a
//! Java-mode client and once on a default one.
//!
//! The Java lines in the comments paraphrase the documented usage. Every
//! scenario is bounded (`within`, a `tokio::time::timeout`), and every "at once"
//! by [`AT_ONCE`]: a hang fails the test, it never stalls the suite.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use redisson_locks::{
    Client, Config, Error, LockGuard, MultiLock, OwnerMode, RLock, RemainingTtl, Result, SelfWait,
};
use tokio::time::Instant;

use crate::support::{
    assert_nothing_left, assert_nothing_left_but, eventually, within, RedisServer,
};

/// The bound of a whole scenario.
const T: Duration = Duration::from_secs(20);
/// What "at once" means here: a refusal, or a wake-up that the scenario itself
/// causes, comes well within it, however loaded the machine. What it tells apart
/// is a wait sat out: it is well under the shortest wait a scenario asks for and
/// must not sit out (10 s; the others are 15 s, 100 s or for ever), and under the
/// synchronizers' 5 s recheck, so that a semaphore's wake-up within it came from
/// the release, not from a recheck.
const AT_ONCE: Duration = Duration::from_secs(4);

// ---------------------------------------------------------------------------
// Clients, as a port configures them.

/// Java's owner rule for the whole client: `Config::new(url)` and the mode.
async fn java_client(server: &RedisServer) -> Client {
    let mut config = Config::new(server.url());
    config.owner_mode = OwnerMode::Task;
    Client::connect(config).await.expect("connect")
}

/// The default configuration: every acquisition is its own owner, and nesting
/// goes through a hold's scope.
async fn scoped_client(server: &RedisServer) -> Client {
    Client::connect(Config::new(server.url()))
        .await
        .expect("connect")
}

/// The default owner mode, refusing self-waits: where a literal port must fail
/// at once instead of waiting for itself.
async fn refusing_client(server: &RedisServer) -> Client {
    let mut config = Config::new(server.url());
    config.self_wait = SelfWait::Refuse;
    Client::connect(config).await.expect("connect")
}

// ---------------------------------------------------------------------------
// Running and checking.

/// Runs `scenario` in a task of its own (the owner, in the Java mode), bounded
/// by [`T`]; its error or panic fails the test.
async fn run_in_task<F>(what: &str, scenario: F)
where
    F: Future<Output = Result<()>> + Send + 'static,
{
    match within(T, what, tokio::spawn(scenario)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{what}: {e} ({e:?})"),
        Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Err(join) => panic!("{what}: {join}"),
    }
}

/// A literal port's wait behind its own hold: it must fail within [`AT_ONCE`]
/// with `WouldDeadlock`, and the message must name the lock and the fix.
async fn refused_at_once<V: std::fmt::Debug>(name: &str, attempt: impl Future<Output = Result<V>>) {
    let outcome = tokio::time::timeout(AT_ONCE, attempt).await.unwrap_or_else(|_| {
        panic!("'{name}': the literal port still waits after {AT_ONCE:?} instead of failing at once")
    });
    let err = outcome.expect_err("the literal port got in past its own task's hold");
    assert!(err.is_would_deadlock(), "'{name}': {err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("'{name}'")) && text.contains("scope"),
        "the error names neither the lock nor the fix: {text}"
    );
}

/// The hold counts in lock hash `name` as Redis has them: every field but a
/// read-write lock's `mode`, sorted.
async fn counts_in_redis(admin: &mut MultiplexedConnection, name: &str) -> Vec<u64> {
    let fields: HashMap<String, String> = admin.hgetall(name).await.expect("HGETALL");
    let mut counts: Vec<u64> = fields
        .into_iter()
        .filter(|(field, _)| field != "mode")
        .map(|(_, count)| count.parse().expect("a hold count"))
        .collect();
    counts.sort_unstable();
    counts
}

async fn exists(admin: &mut MultiplexedConnection, key: &str) -> bool {
    admin.exists(key).await.expect("EXISTS")
}

async fn rw_mode(admin: &mut MultiplexedConnection, name: &str) -> Option<String> {
    admin.hget(name, "mode").await.expect("HGET mode")
}

/// Asserts that the lock expires within `lease`: it holds that lease, not the
/// watchdog's renewal (30 s, longer than any lease here). No lower bound: how
/// much of the lease is left depends on the machine's speed.
async fn assert_leased(lock: &RLock, lease: Duration) -> Result<()> {
    match lock.remain_time_to_live().await? {
        RemainingTtl::Expires(left) => assert!(
            left <= lease,
            "'{}': {left:?} left of a {lease:?} lease",
            lock.name()
        ),
        other => panic!("'{}': {other:?}, not a lease", lock.name()),
    }
    Ok(())
}

/// Nothing of a lock scenario is left on the server (a fenced lock's token
/// counter may stay: it must only grow), nor in the clients.
async fn assert_locks_left_nothing(server: &RedisServer, clients: &[&Client]) {
    assert_nothing_left_but(server, clients, |k| k.starts_with("redisson_lock_token")).await;
}

// ---------------------------------------------------------------------------
// The reentrant lock, and the usage every RLock kind shares.
//
//   RLock lock = redisson.getLock("myLock");
//   lock.lock();                              // traditional lock method
//   lock.lock(10, TimeUnit.SECONDS);          // unlocked by itself after 10 s
//   boolean res = lock.tryLock(100, 10, TimeUnit.SECONDS);
//   if (res) { try { ... } finally { lock.unlock(); } }
//
// Only the owner thread may unlock (IllegalMonitorStateException otherwise), and
// the owner re-enters.

/// Java: a called function that takes the lock its caller may hold and reports
/// the hold count (`lock.lock(); try { return lock.getHoldCount(); } finally {
/// lock.unlock(); }`), ported line by line.
async fn restock_java(lock: &RLock) -> Result<u64> {
    lock.lock().await?.detach();
    let count = lock.hold_count().await;
    lock.unlock().await?;
    count
}

/// The same function, the idiomatic way: it takes the lock itself, which inside
/// its caller's scope re-enters.
async fn restock_scoped(lock: &RLock) -> Result<u64> {
    lock.with(|| lock.hold_count()).await?
}

/// The documented RLock usage, line by line, in the Java owner mode.
async fn java_lock_as_documented(lock: RLock) -> Result<()> {
    // lock.lock(); try { restock(); } finally { lock.unlock(); }
    lock.lock().await?.detach();
    let nested = restock_java(&lock).await;
    lock.unlock().await?;
    assert_eq!(nested?, 2, "the nested lock() re-enters");
    assert!(!lock.is_locked().await?);

    // Another thread's unlock() is IllegalMonitorStateException.
    lock.lock().await?.detach();
    let other = lock.clone();
    let theirs = tokio::spawn(async move { other.unlock().await })
        .await
        .expect("task");
    assert!(theirs.unwrap_err().is_not_held());
    assert!(lock.is_held_by_current_task().await?);
    lock.unlock().await?;

    // lock.lock(10, TimeUnit.SECONDS): the lock frees itself when the lease ends
    // (a short lease, to watch it happen); another thread then gets it.
    let lease = Duration::from_millis(500);
    lock.lock_with_lease(lease).await?.detach();
    assert_leased(&lock, lease).await?;
    let other = lock.clone();
    let got_it = tokio::spawn(async move {
        let res = other
            .try_lock_wait(Duration::from_secs(10))
            .await?
            .map(LockGuard::detach)
            .is_some();
        if res {
            other.unlock().await?;
        }
        Ok::<_, Error>(res)
    });
    assert!(got_it.await.expect("task")?, "free once the lease ended");
    // Our unlock() after the lease ended: IllegalMonitorStateException, as in Java.
    assert!(lock.unlock().await.unwrap_err().is_not_held());

    // boolean res = lock.tryLock(100, 10, TimeUnit.SECONDS);
    let res = lock
        .try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10))
        .await?
        .map(LockGuard::detach)
        .is_some();
    assert!(res, "a free lock");
    if res {
        // try { ... } finally { lock.unlock(); }
        let section = assert_leased(&lock, Duration::from_secs(10)).await;
        lock.unlock().await?;
        section?;
    }
    assert!(!lock.is_locked().await?);
    Ok(())
}

/// The documented RLock usage, the idiomatic way.
async fn scoped_lock_as_documented(lock: RLock) -> Result<()> {
    // lock.lock(); try { restock(); } finally { lock.unlock(); }
    let nested = lock.with(|| restock_scoped(&lock)).await??;
    assert_eq!(nested, 2, "the nested lock() re-enters inside the scope");
    // The same with the guard in hand.
    let guard = lock.lock().await?;
    let nested = guard.scope(restock_scoped(&lock)).await;
    guard.unlock().await?;
    assert_eq!(nested?, 2);
    assert!(!lock.is_locked().await?);

    // The guard is the owner: the handle outside any scope owns nothing (its
    // unlock() is NotHeld), and the guard releases from any task.
    let guard = lock.lock().await?;
    assert!(lock.unlock().await.unwrap_err().is_not_held());
    assert!(guard.scope(lock.is_held_by_current_task()).await?);
    tokio::spawn(guard.unlock()).await.expect("task")?;
    assert!(!lock.is_locked().await?);

    // lock.lock(10, TimeUnit.SECONDS): the lease ends by itself, the guard
    // knows, and another worker gets the lock.
    let lease = Duration::from_millis(500);
    let guard = lock.lock_with_lease(lease).await?;
    assert_leased(&lock, lease).await?;
    let other = lock.clone();
    let next = tokio::spawn(async move { other.try_lock_wait(Duration::from_secs(10)).await })
        .await
        .expect("task")?
        .expect("free once the lease ended");
    assert!(guard.is_lease_lost());
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    next.unlock().await?;

    // boolean res = lock.tryLock(100, 10, TimeUnit.SECONDS); if (res) { ... }
    let Some(guard) = lock
        .try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10))
        .await?
    else {
        panic!("'{}': a free lock was not granted", lock.name());
    };
    let section = assert_leased(&lock, Duration::from_secs(10)).await;
    guard.unlock().await?;
    section?;
    assert!(!lock.is_locked().await?);
    Ok(())
}

/// The literal port on the default owner mode with `SelfWait::Refuse`: the
/// called function's `lock()` waits behind its own task's hold, outside that
/// hold's scope; it is refused at once and takes nothing.
async fn refused_nesting(server: &RedisServer, client: &Client, lock: &RLock) {
    let name = lock.name().to_owned();
    let mut admin = server.admin().await;
    // lock.lock(); (the guard kept: see the detach probes below)
    let guard = lock.lock().await.unwrap();
    // try { restock(); }
    refused_at_once(&name, restock_java(lock)).await;
    // lock.tryLock(100, 10, SECONDS) inside: a timed wait is refused alike; a
    // one-off tryLock() just answers no.
    refused_at_once(
        &name,
        lock.try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10)),
    )
    .await;
    assert!(lock.try_lock().await.unwrap().is_none());
    // Nothing was taken: the outer hold still counts 1.
    assert_eq!(guard.scope(lock.hold_count()).await.unwrap(), 1);
    assert_eq!(counts_in_redis(&mut admin, &name).await, [1]);
    assert_eq!(client.self_waits_for(&name), 0);
    // The fix the error names works.
    assert_eq!(guard.scope(restock_scoped(lock)).await.unwrap(), 2);
    // finally { lock.unlock(); }
    guard.unlock().await.unwrap();
    assert!(
        !exists(&mut admin, &name).await,
        "'{name}' outlived its last hold"
    );
    assert_locks_left_nothing(server, &[client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let lock = client.get_lock("myLock").unwrap();
    run_in_task("lock, Java mode", java_lock_as_documented(lock)).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_scoped() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let lock = client.get_lock("myLock").unwrap();
    run_in_task("lock, scoped", scoped_lock_as_documented(lock)).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_literal_port_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let lock = client.get_lock("myLock").unwrap();
    within(
        T,
        "lock, literal port",
        refused_nesting(&server, &client, &lock),
    )
    .await;
}

// The other literal form of Java's `lock.lock()` (PORTING.md shows both):
// `lock.lock().await?.detach()`. On the default owner mode a detached hold
// belongs to an owner nobody can name again (only a scope or a task or explicit
// owner could), so what follows it must fail at once too, naming the fix.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_literal_port_with_detach_refuses_the_nested_lock_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let lock = client.get_lock("myDetachedLock").unwrap();
    within(T, "detached outer hold, nested lock()", async {
        // lock.lock(); try { restock(); } ...
        lock.lock().await.unwrap().detach();
        let nested = tokio::time::timeout(AT_ONCE, restock_java(&lock)).await;
        // Free the hold nobody owns before judging, so a failure leaves no renewal.
        assert!(lock.force_unlock().await.unwrap());
        let nested = nested.unwrap_or_else(|_| {
            panic!(
                "the nested lock() behind a detached hold of its own task still waits after \
                 {AT_ONCE:?}: a silent self-wait, not refused"
            )
        });
        let err = nested.expect_err("the nested lock() got in past a detached hold");
        assert!(err.is_would_deadlock(), "{err:?}");
    })
    .await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_literal_port_with_detach_fails_at_unlock_naming_the_fix() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let lock = client.get_lock("myDetachedLock").unwrap();
    within(T, "detached hold, unlock()", async {
        // lock.lock(); try { ... } finally { lock.unlock(); }
        lock.lock().await.unwrap().detach();
        let unlocked = lock.unlock().await;
        let left_held = lock.force_unlock().await.unwrap();
        let err = unlocked.expect_err("a default handle outside a scope owns nothing");
        assert!(err.is_not_held(), "{err:?}");
        let text = err.to_string();
        assert!(
            ["scope", "with_task_owner", "OwnerMode::Task"]
                .iter()
                .any(|fix| text.contains(fix)),
            "the unlock() of a detached default hold fails, but names no fix: {text}"
        );
        assert!(left_held, "the detached hold stays until forced open");
    })
    .await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

// ---------------------------------------------------------------------------
// tryLock with a wait and a lease, against another holder.
//
//   boolean res = lock.tryLock(100, 10, TimeUnit.SECONDS);   // wait, lease
//   if (res) { try { ... } finally { lock.unlock(); } }

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_with_wait_and_lease_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let lock = client.get_lock("myTryLock").unwrap();
    let scenario = async move {
        // Another thread holds the lock for a moment.
        let holder = lock.clone();
        let (taken, was_taken) = tokio::sync::oneshot::channel();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let holding = tokio::spawn(async move {
            holder.lock().await?.detach();
            // The receiver waits for this; were it gone, the scenario has failed already.
            let _ = taken.send(());
            // Either a message or the sender dropped: both mean "let go now".
            let _ = released.await;
            holder.unlock().await
        });
        was_taken.await.expect("the holder took the lock");

        // A wait that runs out: false, after the wait and not much later.
        let started = Instant::now();
        let res = lock
            .try_lock_with_lease(Duration::from_millis(300), Duration::from_secs(10))
            .await?
            .map(LockGuard::detach)
            .is_some();
        let waited = started.elapsed();
        assert!(!res, "got a held lock");
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(300) + AT_ONCE,
            "gave up after {waited:?}"
        );

        // boolean res = lock.tryLock(100, 10, TimeUnit.SECONDS): granted as soon
        // as the holder lets go, long before the 100 s.
        let (trying, tried) = tokio::join!(
            lock.try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10)),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let started = Instant::now();
                // The holder waits for this message; its failure shows below.
                let _ = release.send(());
                started
            }
        );
        let res = trying?.map(LockGuard::detach).is_some();
        assert!(res, "not granted after the release");
        assert!(
            tried.elapsed() < AT_ONCE,
            "granted {:?} after the release",
            tried.elapsed()
        );
        holding.await.expect("task")?;
        if res {
            // try { ... } finally { lock.unlock(); }
            let section = async {
                assert_leased(&lock, Duration::from_secs(10)).await?;
                assert!(lock.is_held_by_current_task().await?);
                Ok::<_, Error>(())
            }
            .await;
            lock.unlock().await?;
            section?;
        }
        assert!(!lock.is_locked().await?);
        Ok(())
    };
    run_in_task("tryLock(wait, lease), Java mode", scenario).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_with_wait_and_lease_scoped() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let lock = client.get_lock("myTryLock").unwrap();
    let scenario = async move {
        // Another worker holds the lock until told to let go.
        let held = lock.lock().await?;
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let holding = tokio::spawn(async move {
            // Either a message or the sender dropped: both mean "let go now".
            let _ = released.await;
            held.unlock().await
        });

        let started = Instant::now();
        let missed = lock
            .try_lock_with_lease(Duration::from_millis(300), Duration::from_secs(10))
            .await?;
        let waited = started.elapsed();
        assert!(missed.is_none(), "got a held lock");
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(300) + AT_ONCE,
            "gave up after {waited:?}"
        );

        let (trying, tried) = tokio::join!(
            lock.try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10)),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let started = Instant::now();
                // The holder waits for this message; its failure shows below.
                let _ = release.send(());
                started
            }
        );
        let Some(guard) = trying? else {
            panic!("not granted after the release");
        };
        assert!(
            tried.elapsed() < AT_ONCE,
            "granted {:?} after the release",
            tried.elapsed()
        );
        holding.await.expect("task")?;
        let section = assert_leased(&lock, Duration::from_secs(10)).await;
        guard.unlock().await?;
        section?;
        assert!(!lock.is_locked().await?);
        Ok(())
    };
    run_in_task("tryLock(wait, lease), scoped", scenario).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

// ---------------------------------------------------------------------------
// The fair lock: the RLock usage above, and threads get it in the order they
// asked.
//
//   RLock lock = redisson.getFairLock("myLock");
//   lock.lock(); ... (as for getLock)

/// Waits until `count` owners stand in the fair lock's line.
async fn line_is(admin: &MultiplexedConnection, name: &str, count: usize) -> bool {
    let queue = format!("redisson_lock_queue:{{{name}}}");
    eventually(AT_ONCE, || {
        let (mut admin, queue) = (admin.clone(), queue.clone());
        async move {
            let len: usize = admin.llen(&queue).await.expect("LLEN");
            len == count
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let admin = server.admin().await;
    let fair = client.get_fair_lock("myFairLock").unwrap();
    run_in_task(
        "fair lock, Java mode",
        java_lock_as_documented(fair.clone()),
    )
    .await;

    let in_order = async move {
        let order = Arc::new(Mutex::new(Vec::new()));
        fair.lock().await?.detach();
        let mut workers = Vec::new();
        for i in 0..3 {
            let (lock, order) = (fair.clone(), order.clone());
            workers.push(tokio::spawn(async move {
                // lock.lock(); try { ... } finally { lock.unlock(); }
                lock.lock().await?.detach();
                order.lock().unwrap().push(i);
                lock.unlock().await
            }));
            assert!(
                line_is(&admin, fair.name(), i + 1).await,
                "worker {i} in line"
            );
        }
        // The owner re-enters without joining the line.
        assert_eq!(restock_java(&fair).await?, 2);
        fair.unlock().await?;
        for worker in workers {
            worker.await.expect("task")?;
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2], "granted out of order");
        Ok(())
    };
    run_in_task("fair lock order, Java mode", in_order).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_scoped() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let admin = server.admin().await;
    let fair = client.get_fair_lock("myFairLock").unwrap();
    run_in_task("fair lock, scoped", scoped_lock_as_documented(fair.clone())).await;

    let in_order = async move {
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = fair.lock().await?;
        let mut workers = Vec::new();
        for i in 0..3 {
            let (lock, order) = (fair.clone(), order.clone());
            workers.push(tokio::spawn(async move {
                let guard = lock.lock().await?;
                order.lock().unwrap().push(i);
                guard.unlock().await
            }));
            assert!(
                line_is(&admin, fair.name(), i + 1).await,
                "worker {i} in line"
            );
        }
        assert_eq!(held.scope(restock_scoped(&fair)).await?, 2);
        held.unlock().await?;
        for worker in workers {
            worker.await.expect("task")?;
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2], "granted out of order");
        Ok(())
    };
    run_in_task("fair lock order, scoped", in_order).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_literal_port_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let fair = client.get_fair_lock("myFairLock").unwrap();
    // A refused waiter must not stay in the line either (checked at the end).
    within(
        T,
        "fair lock, literal port",
        refused_nesting(&server, &client, &fair),
    )
    .await;
}

// ---------------------------------------------------------------------------
// The multi-lock: all of several locks, possibly of several Redisson instances.
//
//   RLock lock1 = redisson1.getLock("lock1");
//   RLock lock2 = redisson2.getLock("lock2");
//   RLock lock3 = redisson3.getLock("lock3");
//   RLock multiLock = anyRedisson.getMultiLock(lock1, lock2, lock3);
//   multiLock.lock();                          // or lock(10, SECONDS)
//   boolean res = multiLock.tryLock(100, 10, TimeUnit.SECONDS);
//   ... finally { multiLock.unlock(); }
//
// A `MultiGuard` has no `detach`, and `MultiLock` no `unlock`: the port carries
// the guard from `lock()` to `unlock()`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_java_line_by_line() {
    let server = RedisServer::start();
    let redisson = [
        java_client(&server).await,
        java_client(&server).await,
        java_client(&server).await,
    ];
    let another_process = java_client(&server).await;
    let (lock1, lock2, lock3) = (
        redisson[0].get_lock("lock1").unwrap(),
        redisson[1].get_lock("lock2").unwrap(),
        redisson[2].get_lock("lock3").unwrap(),
    );
    let others = another_process.clone();
    let scenario = async move {
        let locks = [&lock1, &lock2, &lock3];
        let multi_lock = MultiLock::new(vec![lock1.clone(), lock2.clone(), lock3.clone()])?;
        // multiLock.lock(); try { ... } finally { multiLock.unlock(); }
        let held = multi_lock.lock().await?;
        let section = async {
            // Another process gets none of them.
            assert!(others.get_lock("lock2")?.try_lock().await?.is_none());
            // A called function locks lock1 alone: re-enters.
            assert_eq!(restock_java(&lock1).await?, 2);
            // The multi-lock again, in the same thread: re-enters each.
            let again = multi_lock.lock().await?;
            for lock in locks {
                assert_eq!(lock.hold_count().await?, 2, "'{}'", lock.name());
            }
            again.unlock().await
        }
        .await;
        held.unlock().await?;
        section?;
        for lock in locks {
            assert!(!lock.is_locked().await?, "'{}'", lock.name());
        }

        // boolean res = multiLock.tryLock(100, 10, TimeUnit.SECONDS);
        let res = multi_lock
            .try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10))
            .await?;
        let Some(held) = res else {
            panic!("free locks were not granted");
        };
        let section = async {
            for lock in locks {
                assert_leased(lock, Duration::from_secs(10)).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        held.unlock().await?;
        section?;
        Ok(())
    };
    run_in_task("multi-lock, Java mode", scenario).await;
    let clients: Vec<&Client> = redisson.iter().chain([&another_process]).collect();
    assert_locks_left_nothing(&server, &clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_scoped() {
    let server = RedisServer::start();
    let redisson = [
        scoped_client(&server).await,
        scoped_client(&server).await,
        scoped_client(&server).await,
    ];
    let another_process = scoped_client(&server).await;
    let (lock1, lock2, lock3) = (
        redisson[0].get_lock("lock1").unwrap(),
        redisson[1].get_lock("lock2").unwrap(),
        redisson[2].get_lock("lock3").unwrap(),
    );
    let others = another_process.clone();
    let scenario = async move {
        let locks = [&lock1, &lock2, &lock3];
        let multi_lock = MultiLock::new(vec![lock1.clone(), lock2.clone(), lock3.clone()])?;
        let held = multi_lock.lock().await?;
        // A `MultiGuard` has no scope of its own: nest through its guards'.
        let [g1, g2, g3] = held.guards() else {
            panic!("one guard per lock");
        };
        let section = async {
            assert!(others.get_lock("lock2")?.try_lock().await?.is_none());
            // A called function locks lock1 alone, inside lock1's hold's scope.
            assert_eq!(g1.scope(restock_scoped(&lock1)).await?, 2);
            // The multi-lock again, inside every hold's scope: re-enters each.
            let counts = g1
                .scope(g2.scope(g3.scope(async {
                    let again = multi_lock.lock().await?;
                    let mut counts = Vec::new();
                    for lock in locks {
                        counts.push(lock.hold_count().await?);
                    }
                    again.unlock().await?;
                    Ok::<_, Error>(counts)
                })))
                .await?;
            assert_eq!(counts, [2, 2, 2]);
            Ok::<_, Error>(())
        }
        .await;
        held.unlock().await?;
        section?;
        for lock in locks {
            assert!(!lock.is_locked().await?, "'{}'", lock.name());
        }

        let Some(held) = multi_lock
            .try_lock_with_lease(Duration::from_secs(100), Duration::from_secs(10))
            .await?
        else {
            panic!("free locks were not granted");
        };
        let section = async {
            for lock in locks {
                assert_leased(lock, Duration::from_secs(10)).await?;
            }
            Ok::<_, Error>(())
        }
        .await;
        held.unlock().await?;
        section?;
        Ok(())
    };
    run_in_task("multi-lock, scoped", scenario).await;
    let clients: Vec<&Client> = redisson.iter().chain([&another_process]).collect();
    assert_locks_left_nothing(&server, &clients).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_literal_port_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let mut admin = server.admin().await;
    let locks: Vec<RLock> = ["lock1", "lock2", "lock3"]
        .iter()
        .map(|name| client.get_lock(*name).unwrap())
        .collect();
    let multi_lock = MultiLock::new(locks.clone()).unwrap();
    within(T, "multi-lock, literal port", async {
        let held = multi_lock.lock().await.unwrap();
        // A called function locks lock1 alone, outside the hold's scope.
        refused_at_once("lock1", restock_java(&locks[0])).await;
        // The multi-lock again: refused at its first lock, nothing kept.
        refused_at_once("lock1", multi_lock.lock()).await;
        for lock in &locks {
            assert_eq!(
                counts_in_redis(&mut admin, lock.name()).await,
                [1],
                "'{}'",
                lock.name()
            );
        }
        held.unlock().await.unwrap();
        for lock in &locks {
            assert!(
                !exists(&mut admin, lock.name()).await,
                "'{}' left",
                lock.name()
            );
        }
    })
    .await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

// ---------------------------------------------------------------------------
// The read-write lock: shared readers, one writer, and the downgrade.
//
//   RReadWriteLock rwlock = redisson.getReadWriteLock("myLock");
//   RLock lock = rwlock.readLock();  // or rwlock.writeLock();
//   lock.lock(); ...
//
// The downgrade (as for java.util.concurrent's ReentrantReadWriteLock):
//   rwlock.writeLock().lock();
//   ... update ...; rwlock.readLock().lock();   // still writing: take the read
//   rwlock.writeLock().unlock();                // now only reading
//   ... use ...;    rwlock.readLock().unlock();

/// Can a reader of another process read now, while a writer cannot write? Run
/// as that process's own thread (a task of its own).
async fn others_read_but_cannot_write(others: &Client, name: &str, java: bool) -> Result<()> {
    let theirs = others.get_read_write_lock(name)?;
    let reader = theirs.read_lock();
    let read = tokio::spawn(async move {
        let Some(guard) = reader.try_lock_wait(AT_ONCE).await? else {
            return Ok(false);
        };
        if java {
            guard.detach();
            reader.unlock().await?;
        } else {
            guard.unlock().await?;
        }
        Ok::<_, Error>(true)
    });
    assert!(
        read.await.expect("task")?,
        "'{name}': another reader was kept out"
    );
    assert!(
        theirs.write_lock().try_lock().await?.is_none(),
        "'{name}': a writer got in beside a reader"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_java_line_by_line_with_the_downgrade() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let another_process = java_client(&server).await;
    let mut admin = server.admin().await;
    let rwlock = client.get_read_write_lock("myRwLock").unwrap();
    let others = another_process.clone();
    let scenario = async move {
        let name = rwlock.name().to_owned();
        // rwlock.readLock().lock(); try { ... } finally { rwlock.readLock().unlock(); }
        rwlock.read_lock().lock().await?.detach();
        let section = others_read_but_cannot_write(&others, &name, true).await;
        rwlock.read_lock().unlock().await?;
        section?;

        // The downgrade, line by line.
        rwlock.write_lock().lock().await?.detach();
        assert!(rwlock.write_lock().is_held_by_current_task().await?);
        rwlock.read_lock().lock().await?.detach();
        rwlock.write_lock().unlock().await?;
        assert_eq!(rw_mode(&mut admin, &name).await.as_deref(), Some("read"));
        let section = others_read_but_cannot_write(&others, &name, true).await;
        rwlock.read_lock().unlock().await?;
        section?;
        assert!(
            !exists(&mut admin, &name).await,
            "'{name}' outlived its holds"
        );

        // rwlock.writeLock().lock(); a nested writeLock().lock() re-enters.
        rwlock.write_lock().lock().await?.detach();
        rwlock.write_lock().lock().await?.detach();
        assert_eq!(rwlock.write_lock().hold_count().await?, 2);
        rwlock.write_lock().unlock().await?;
        rwlock.write_lock().unlock().await?;
        Ok(())
    };
    run_in_task("read-write lock, Java mode", scenario).await;
    assert_locks_left_nothing(&server, &[&client, &another_process]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_scoped_with_the_downgrade() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let another_process = scoped_client(&server).await;
    let mut admin = server.admin().await;
    let rwlock = client.get_read_write_lock("myRwLock").unwrap();
    let others = another_process.clone();
    let scenario = async move {
        let name = rwlock.name().to_owned();
        let reading = rwlock.read_lock().lock().await?;
        let section = others_read_but_cannot_write(&others, &name, false).await;
        reading.unlock().await?;
        section?;

        // The downgrade with the guard in hand: read inside the write hold's scope.
        let writing = rwlock.write_lock().lock().await?;
        let reading = writing.scope(rwlock.read_lock().lock()).await?;
        writing.unlock().await?;
        assert_eq!(rw_mode(&mut admin, &name).await.as_deref(), Some("read"));
        let section = others_read_but_cannot_write(&others, &name, false).await;
        reading.unlock().await?;
        section?;
        assert!(
            !exists(&mut admin, &name).await,
            "'{name}' outlived its holds"
        );

        // The closure form: write, and come out of it holding the read lock.
        let (writer, reader) = (rwlock.write_lock(), rwlock.read_lock());
        let reading = writer.with(|| reader.lock()).await??;
        assert_eq!(rw_mode(&mut admin, &name).await.as_deref(), Some("read"));
        reading.unlock().await?;

        // A nested write re-enters inside the scope.
        let count = writer.with(|| restock_scoped(&writer)).await??;
        assert_eq!(count, 2);
        Ok(())
    };
    run_in_task("read-write lock, scoped", scenario).await;
    assert_locks_left_nothing(&server, &[&client, &another_process]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_literal_downgrade_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let mut admin = server.admin().await;
    let rwlock = client.get_read_write_lock("myRwLock").unwrap();
    within(T, "read-write lock, literal downgrade", async {
        // rwlock.writeLock().lock();
        let writing = rwlock.write_lock().lock().await.unwrap();
        // rwlock.readLock().lock(); (and its timed form)
        refused_at_once("myRwLock", rwlock.read_lock().lock()).await;
        refused_at_once(
            "myRwLock",
            rwlock.read_lock().try_lock_wait(Duration::from_secs(100)),
        )
        .await;
        // A nested writeLock().lock() outside the scope: refused too.
        refused_at_once("myRwLock", restock_java(&rwlock.write_lock())).await;
        // Nothing taken: the write hold still counts 1, no read hold, no read key.
        assert_eq!(
            writing
                .scope(rwlock.write_lock().hold_count())
                .await
                .unwrap(),
            1
        );
        assert_eq!(counts_in_redis(&mut admin, "myRwLock").await, [1]);
        assert_eq!(
            rw_mode(&mut admin, "myRwLock").await.as_deref(),
            Some("write")
        );
        assert_eq!(server.keys().await, ["myRwLock"]);
        writing.unlock().await.unwrap();
        assert!(!exists(&mut admin, "myRwLock").await);
    })
    .await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

// ---------------------------------------------------------------------------
// The semaphore. Permits have no owner (any thread may release one), so the
// Java-mode port and the idiomatic one are the same code: one scenario, run on
// both configs.
//
//   RSemaphore semaphore = redisson.getSemaphore("mySemaphore");
//   semaphore.acquire();                 semaphore.acquire(10);
//   boolean res = semaphore.tryAcquire();
//   boolean res = semaphore.tryAcquire(15, TimeUnit.SECONDS);
//   boolean res = semaphore.tryAcquire(10, 15, TimeUnit.SECONDS);
//   if (res) { try { ... } finally { semaphore.release(); } }

async fn semaphore_as_documented(client: Client) -> Result<()> {
    let semaphore = client.get_semaphore("mySemaphore")?;
    assert!(semaphore.try_set_permits(12).await?);
    // semaphore.acquire(); semaphore.acquire(10);
    semaphore.acquire().await?;
    semaphore.acquire_many(10).await?;
    // boolean res = semaphore.tryAcquire();
    assert!(semaphore.try_acquire().await?);
    assert!(!semaphore.try_acquire().await?, "all twelve are out");

    // boolean res = semaphore.tryAcquire(15, TimeUnit.SECONDS): another thread
    // releases one, which lets this wait in long before the 15 s.
    let other = semaphore.clone();
    let releasing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        other.release().await
    });
    let started = Instant::now();
    assert!(semaphore.try_acquire_wait(Duration::from_secs(15)).await?);
    assert!(
        started.elapsed() < AT_ONCE,
        "woken {:?} later",
        started.elapsed()
    );
    releasing.await.expect("task")?;

    // boolean res = semaphore.tryAcquire(10, 15, TimeUnit.SECONDS) with nothing
    // coming back: false once the wait is over (short here).
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    assert!(!semaphore.try_acquire_many_wait(10, wait).await?);
    let waited = started.elapsed();
    assert!(
        waited >= wait && waited < wait + AT_ONCE,
        "gave up after {waited:?}"
    );

    // finally { semaphore.release(); } for every permit out.
    semaphore.release_many(12).await?;
    assert_eq!(semaphore.available_permits().await?, 12);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    run_in_task(
        "semaphore, Java mode",
        semaphore_as_documented(client.clone()),
    )
    .await;
    // The semaphore, and the receipt of its last release (it ends with its
    // TTL; a later call of the handle would have deleted it).
    assert_nothing_left_but(&server, &[&client], |k| {
        k == "mySemaphore" || k.starts_with("{mySemaphore}:rl-released:")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_scoped() {
    // The same code as the Java mode's: permits have no owner.
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    run_in_task("semaphore, scoped", semaphore_as_documented(client.clone())).await;
    // The semaphore, and the receipt of its last release (it ends with its
    // TTL; a later call of the handle would have deleted it).
    assert_nothing_left_but(&server, &[&client], |k| {
        k == "mySemaphore" || k.starts_with("{mySemaphore}:rl-released:")
    })
    .await;
}

// ---------------------------------------------------------------------------
// The permit-expirable semaphore: permits with ids and leases. Not owned either
// (a permit is released by its id, from anywhere), so again one scenario on both
// configs.
//
//   RPermitExpirableSemaphore semaphore = redisson.getPermitExpirableSemaphore("mySemaphore");
//   semaphore.trySetPermits(23);
//   String id = semaphore.acquire(10, TimeUnit.SECONDS);      // with a lease
//   String id = semaphore.tryAcquire();
//   String id = semaphore.tryAcquire(10, 15, TimeUnit.SECONDS); // wait, lease
//   if (id != null) { try { ... } finally { semaphore.release(id); } }
//
// Rust asks every acquisition for its lease: a permit without one is a plain
// semaphore's.

async fn permit_expirable_semaphore_as_documented(client: Client) -> Result<()> {
    let semaphore = client.get_permit_expirable_semaphore("myExpirableSemaphore")?;
    assert!(semaphore.try_set_permits(2).await?);
    // String id = semaphore.acquire(10, TimeUnit.SECONDS);
    let id = semaphore.acquire(Duration::from_secs(10)).await?;
    // String id = semaphore.tryAcquire(); here with a short lease, which ends
    // while the permit is out.
    let short = semaphore
        .try_acquire(Duration::from_millis(300))
        .await?
        .expect("one permit left");
    assert!(
        semaphore
            .try_acquire(Duration::from_secs(10))
            .await?
            .is_none(),
        "none left"
    );

    // String id = semaphore.tryAcquire(10, 15, TimeUnit.SECONDS): the short
    // lease ends and its permit comes back to this wait.
    let started = Instant::now();
    let third = semaphore
        .try_acquire_wait(Duration::from_secs(10), Duration::from_secs(15))
        .await?
        .expect("the expired permit came back");
    assert!(
        started.elapsed() < AT_ONCE,
        "came back after {:?}",
        started.elapsed()
    );

    // semaphore.release(id), from another thread.
    let other = semaphore.clone();
    tokio::spawn(async move { other.release(&id).await })
        .await
        .expect("task")?;
    // The expired permit's id is no longer out: its release is refused.
    assert!(semaphore.release(&short).await.unwrap_err().is_not_held());
    semaphore.release(&third).await?;
    assert_eq!(semaphore.available_permits().await?, 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_expirable_semaphore_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let scenario = permit_expirable_semaphore_as_documented(client.clone());
    run_in_task("permit-expirable semaphore, Java mode", scenario).await;
    assert_nothing_left_but(&server, &[&client], |k| k == "myExpirableSemaphore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_expirable_semaphore_scoped() {
    // The same code as the Java mode's: permits have no owner.
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let scenario = permit_expirable_semaphore_as_documented(client.clone());
    run_in_task("permit-expirable semaphore, scoped", scenario).await;
    assert_nothing_left_but(&server, &[&client], |k| k == "myExpirableSemaphore").await;
}

// ---------------------------------------------------------------------------
// The count-down latch: no owner either, so one scenario on both configs.
//
//   RCountDownLatch latch = redisson.getCountDownLatch("myCountDownLatch");
//   latch.trySetCount(1);
//   latch.await();
//   // in another thread or JVM:
//   RCountDownLatch latch = redisson.getCountDownLatch("myCountDownLatch");
//   latch.countDown();

async fn latch_as_documented(client: Client, another_jvm: Client) -> Result<()> {
    let latch = client.get_count_down_latch("myCountDownLatch")?;
    // latch.trySetCount(2): two workers count down.
    assert!(latch.try_set_count(2).await?);
    assert!(
        !latch.try_set_count(5).await?,
        "set once until it reaches zero"
    );
    let mut workers = Vec::new();
    for _ in 0..2 {
        let latch = another_jvm.get_count_down_latch("myCountDownLatch")?;
        workers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            latch.count_down().await
        }));
    }
    // latch.await();
    latch.wait().await?;
    assert_eq!(
        latch.count().await?,
        0,
        "opened before the last countDown()"
    );
    for worker in workers {
        worker.await.expect("task")?;
    }

    // latch.await(timeout) with nobody counting down: false when the time is up.
    assert!(
        latch.try_set_count(1).await?,
        "a latch at zero may be set again"
    );
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    assert!(!latch.wait_timeout(wait).await?);
    let waited = started.elapsed();
    assert!(
        waited >= wait && waited < wait + AT_ONCE,
        "gave up after {waited:?}"
    );
    latch.count_down().await?;
    assert!(
        latch.wait_timeout(AT_ONCE).await?,
        "an open latch lets in at once"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_down_latch_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let another_jvm = java_client(&server).await;
    let scenario = latch_as_documented(client.clone(), another_jvm.clone());
    run_in_task("count-down latch, Java mode", scenario).await;
    assert_nothing_left(&server, &[&client, &another_jvm]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_down_latch_scoped() {
    // The same code as the Java mode's: a count has no owner.
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let another_jvm = scoped_client(&server).await;
    let scenario = latch_as_documented(client.clone(), another_jvm.clone());
    run_in_task("count-down latch, scoped", scenario).await;
    assert_nothing_left(&server, &[&client, &another_jvm]).await;
}

// ---------------------------------------------------------------------------
// The fenced lock: every acquisition draws a token greater than any before, and
// the resource refuses a token lower than the highest it has seen.
//
//   RFencedLock lock = redisson.getFencedLock("myLock");
//   Long token = lock.lockAndGetToken();
//   token = lock.lockAndGetToken(10, TimeUnit.SECONDS);
//   Long token = lock.tryLockAndGetToken(100, 10, TimeUnit.SECONDS);
//   if (token != null) { try { /* check token >= old token */ } finally { lock.unlock(); } }

/// The resource a fenced lock guards: it keeps the highest token it has seen and
/// refuses a write with a lower one.
#[derive(Clone, Default)]
struct FencedStore(Arc<Mutex<u64>>);

impl FencedStore {
    fn write(&self, token: u64) -> bool {
        let mut highest = self.0.lock().unwrap();
        if token >= *highest {
            *highest = token;
            true
        } else {
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_lock_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let another_process = java_client(&server).await;
    let lock = client.get_fenced_lock("myFencedLock").unwrap();
    let theirs = another_process.get_fenced_lock("myFencedLock").unwrap();
    let scenario = async move {
        let store = FencedStore::default();
        // Long token = lock.lockAndGetToken(); try { ... } finally { lock.unlock(); }
        let (guard, token) = lock.lock_and_get_token().await?;
        guard.detach();
        assert!(store.write(token));
        // Nested, in the same thread: re-enters, drawing a later token.
        let (guard, nested) = lock.lock_and_get_token().await?;
        guard.detach();
        assert!(nested > token, "{nested} after {token}");
        assert_eq!(lock.hold_count().await?, 2);
        lock.unlock().await?;
        lock.unlock().await?;

        // token = lock.lockAndGetToken(10, TimeUnit.SECONDS); a short lease, and
        // the holder pauses past it.
        let guard = lock.lock_with_lease(Duration::from_millis(300)).await?;
        let stale = guard.token().expect("a fenced lock's guard has a token");
        guard.detach();
        assert!(stale > nested);
        // Meanwhile another process: Long token = lock.tryLockAndGetToken(100, 10, SECONDS);
        let their_store = store.clone();
        let their_turn = tokio::spawn(async move {
            let token = theirs
                .try_lock_and_get_token(Duration::from_secs(100), Some(Duration::from_secs(10)))
                .await?
                .map(|(guard, token)| {
                    guard.detach();
                    token
                });
            if let Some(token) = token {
                // try { write } finally { lock.unlock(); }
                let wrote = their_store.write(token);
                theirs.unlock().await?;
                assert!(wrote, "the newer holder's write was refused");
            }
            Ok::<_, Error>(token)
        });
        let newer = their_turn
            .await
            .expect("task")?
            .expect("free once the lease ended");
        assert!(newer > stale, "{newer} after {stale}");
        // The paused holder wakes up: its write is refused, its unlock() too.
        assert!(!store.write(stale), "a stale token's write went through");
        assert!(lock.unlock().await.unwrap_err().is_not_held());
        assert_eq!(lock.get_token().await?, Some(newer));
        Ok(())
    };
    run_in_task("fenced lock, Java mode", scenario).await;
    assert_locks_left_nothing(&server, &[&client, &another_process]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_lock_scoped() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let another_process = scoped_client(&server).await;
    let lock = client.get_fenced_lock("myFencedLock").unwrap();
    let theirs = another_process.get_fenced_lock("myFencedLock").unwrap();
    let scenario = async move {
        let store = FencedStore::default();
        let (guard, token) = lock.lock_and_get_token().await?;
        assert!(store.write(token));
        // Nested inside the hold's scope: re-enters, drawing a later token.
        let (inner, nested) = guard.scope(lock.lock_and_get_token()).await?;
        assert!(nested > token, "{nested} after {token}");
        assert_eq!(guard.scope(lock.hold_count()).await?, 2);
        inner.unlock().await?;
        guard.unlock().await?;

        let guard = lock.lock_with_lease(Duration::from_millis(300)).await?;
        let stale = guard.token().expect("a fenced lock's guard has a token");
        assert!(stale > nested);
        let their_store = store.clone();
        let their_turn = tokio::spawn(async move {
            let Some((their_guard, token)) = theirs
                .try_lock_and_get_token(Duration::from_secs(100), Some(Duration::from_secs(10)))
                .await?
            else {
                return Ok(None);
            };
            let wrote = their_store.write(token);
            their_guard.unlock().await?;
            assert!(wrote, "the newer holder's write was refused");
            Ok::<_, Error>(Some(token))
        });
        let newer = their_turn
            .await
            .expect("task")?
            .expect("free once the lease ended");
        assert!(newer > stale, "{newer} after {stale}");
        assert!(guard.is_lease_lost());
        assert!(!store.write(stale), "a stale token's write went through");
        assert!(guard.unlock().await.unwrap_err().is_not_held());
        assert_eq!(lock.get_token().await?, Some(newer));
        Ok(())
    };
    run_in_task("fenced lock, scoped", scenario).await;
    assert_locks_left_nothing(&server, &[&client, &another_process]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_lock_literal_port_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let lock = client.get_fenced_lock("myFencedLock").unwrap();
    within(T, "fenced lock, literal port", async {
        let (guard, token) = lock.lock_and_get_token().await.unwrap();
        // Long token = lock.lockAndGetToken(); again, outside the scope: refused
        // before it draws a token.
        refused_at_once("myFencedLock", lock.lock_and_get_token()).await;
        assert_eq!(
            lock.get_token().await.unwrap(),
            Some(token),
            "a refused wait drew a token"
        );
        guard.unlock().await.unwrap();
    })
    .await;
    // And the RLock usage every kind shares.
    within(
        T,
        "fenced lock, literal nesting",
        refused_nesting(&server, &client, &lock),
    )
    .await;
}

// ---------------------------------------------------------------------------
// The spin lock: the RLock usage, waiting by back-off instead of a channel.
//
//   RLock lock = redisson.getSpinLock("myLock");
//   lock.lock(); ... (as for getLock)

/// Another thread waits for the spin lock while this one holds it: no channel is
/// subscribed, and it gets in soon after the release.
async fn spin_waiter_uses_no_channel(
    lock: RLock,
    admin: MultiplexedConnection,
    java: bool,
) -> Result<()> {
    let guard = lock.lock().await?;
    let other = lock.clone();
    let waiting = tokio::spawn(async move {
        let guard = other.try_lock_wait(Duration::from_secs(10)).await?;
        let granted = Instant::now();
        if let Some(guard) = guard {
            if java {
                guard.detach();
                other.unlock().await?;
            } else {
                guard.unlock().await?;
            }
            return Ok::<_, Error>(Some(granted));
        }
        Ok(None)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut admin = admin;
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .query_async(&mut admin)
        .await
        .expect("PUBSUB CHANNELS");
    assert!(
        channels.is_empty(),
        "a spin waiter subscribed: {channels:?}"
    );
    let released = Instant::now();
    guard.unlock().await?;
    let got = waiting
        .await
        .expect("task")?
        .expect("granted after the release");
    let after = got.saturating_duration_since(released);
    assert!(after < AT_ONCE, "granted {after:?} after the release");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_java_line_by_line() {
    let server = RedisServer::start();
    let client = java_client(&server).await;
    let lock = client.get_spin_lock("mySpinLock").unwrap();
    run_in_task(
        "spin lock, Java mode",
        java_lock_as_documented(lock.clone()),
    )
    .await;
    let waiter = spin_waiter_uses_no_channel(lock, server.admin().await, true);
    run_in_task("spin lock waiter, Java mode", waiter).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_scoped() {
    let server = RedisServer::start();
    let client = scoped_client(&server).await;
    let lock = client.get_spin_lock("mySpinLock").unwrap();
    run_in_task("spin lock, scoped", scoped_lock_as_documented(lock.clone())).await;
    let waiter = spin_waiter_uses_no_channel(lock, server.admin().await, false);
    run_in_task("spin lock waiter, scoped", waiter).await;
    assert_locks_left_nothing(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_literal_port_on_the_default_mode_is_refused_at_once() {
    let server = RedisServer::start();
    let client = refusing_client(&server).await;
    let lock = client.get_spin_lock("mySpinLock").unwrap();
    within(
        T,
        "spin lock, literal port",
        refused_nesting(&server, &client, &lock),
    )
    .await;
}
