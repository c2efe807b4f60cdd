//! Interop with the real Java Redisson: a driver process (`interop/java`, built
//! with Maven against `REDISSON_VERSION`, default 3.52.0) whose actors are Java
//! threads taking Redisson locks, contending with this crate's owners on one
//! `redis-server` per test.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::json;

use crate::support::fair::{queue_len, timeouts_len};
use crate::support::java::{
    assert_nothing_left_but_latches, is_unlock_latch, java_field, JavaDriver,
};
use crate::support::{eventually, within, RedisServer};

/// The bound for an event that should come at once (a reply, a prompt wake-up
/// with a generous margin for two loaded cores).
const SOON: Duration = Duration::from_secs(10);
const WATCHDOG_30S: Duration = Duration::from_secs(30);

/// GET, 1 ms, SET: two overlapping critical sections lose an increment.
async fn incr_nonatomic(admin: &mut redis::aio::MultiplexedConnection, key: &str) {
    let value: Option<i64> = admin.get(key).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let _: () = admin.set(key, value.unwrap_or(0) + 1).await.unwrap();
}

/// 4 Java threads (the driver's `contend` on `kind`, with `java_extra` added to
/// the command) and 4 Rust tasks (each on a handle from `rust_lock`) take lock
/// `name` `ops` times each, every one doing a non-atomic increment of `counter`
/// inside (the Rust ones then pausing `hold`): no Java error, every grant made,
/// no increment lost.
#[allow(clippy::too_many_arguments)]
async fn contend_across_languages(
    server: &RedisServer,
    java: &mut JavaDriver,
    kind: &str,
    name: &str,
    java_extra: serde_json::Value,
    rust_lock: impl Fn() -> redisson_locks::RLock,
    ops: u64,
    hold: Duration,
) {
    let counter = format!("{name}-counter");
    let mut command = json!({
        "op": "contend", "kind": kind, "name": name, "threads": 4, "ops": ops,
        "hold_ms": 1, "counter": counter, "lease_ms": 0
    });
    if let serde_json::Value::Object(extra) = java_extra {
        command.as_object_mut().expect("object").extend(extra);
    }
    java.send(command);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let lock = rust_lock();
        let mut admin = server.admin().await;
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..ops {
                let guard = lock.lock().await.unwrap();
                incr_nonatomic(&mut admin, &counter).await;
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                guard.unlock().await.unwrap();
            }
        }));
    }
    finish_contention(server, java, tasks, &counter, 4 * ops, 8 * ops, kind).await;
}

/// Waits (bounded) for the Rust contenders `tasks` and the Java driver's
/// `contend`, then checks: no Java error, all `java_grants` made, and the shared
/// `counter` at `total` (an increment lost is an overlap). Deletes the counter.
async fn finish_contention(
    server: &RedisServer,
    java: &mut JavaDriver,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    counter: &str,
    java_grants: u64,
    total: u64,
    what: &str,
) {
    within(Duration::from_secs(90), "the Rust contenders", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let done = java
        .expect("contended", None, Duration::from_secs(90))
        .await;
    assert_eq!(done["errors"], 0, "{what}: Java errors: {done}");
    assert_eq!(done["grants"], java_grants, "{what}: {done}");
    let mut admin = server.admin().await;
    let counted: u64 = admin.get(counter).await.unwrap();
    assert_eq!(counted, total, "{what}: an increment was lost: an overlap");
    del(server, counter).await;
}

/// A Rust client (fair wait `wait`) holding fair lock `name`, with a Java
/// `tryLock(2 s)` waiter first in line whose JVM is then SIGKILLed. The holder's
/// lease is a 1 s watchdog: Redisson set the dead head's deadline when it joined,
/// to the holder's PTTL then (<= 1 s) + its tryLock wait (2 s).
async fn behind_a_killed_java_head(
    server: &RedisServer,
    name: &str,
    wait: Duration,
) -> (redisson_locks::Client, redisson_locks::LockGuard) {
    let mut doomed = JavaDriver::start(&server.url(), WATCHDOG_30S, Some(wait)).await;
    let client = server
        .client_with(|c| {
            c.fair_lock_wait_timeout = wait;
            c.lock_watchdog_timeout = Duration::from_secs(1);
        })
        .await;
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
    doomed.lock("k", "fair", name, 0, 2_000);
    assert!(eventually(SOON, || async { queue_len(server, name).await == 1 }).await);
    doomed.kill();
    (client, held)
}

async fn lrange(server: &RedisServer, key: &str) -> Vec<String> {
    let mut admin = server.admin().await;
    admin.lrange(key, 0, -1).await.unwrap()
}

async fn del(server: &RedisServer, key: &str) {
    let mut admin = server.admin().await;
    let _: () = admin.del(key).await.unwrap();
}

async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut admin = server.admin().await;
    admin.pttl(key).await.unwrap()
}

/// Waits (bounded) until `channel` has at least one subscriber: a waiter of some
/// client is parked on it.
async fn wait_subscribed(server: &RedisServer, channel: &str) {
    assert!(
        eventually(SOON, || async { server.subscribers(channel).await >= 1 }).await,
        "nobody subscribed to {channel}"
    );
}

/// The channel a waiter of `kind` sleeps on (fair waiters: their own; use the
/// queue length for them instead).
fn channel(kind: &str, name: &str) -> String {
    match kind {
        "read" | "write" => format!("redisson_rwlock:{{{name}}}"),
        _ => format!("redisson_lock__channel:{{{name}}}"),
    }
}

fn rust_lock(client: &redisson_locks::Client, kind: &str, name: &str) -> redisson_locks::RLock {
    match kind {
        "reentrant" => client.get_lock(name).unwrap(),
        "fair" => client.get_fair_lock(name).unwrap(),
        "read" => client.get_read_write_lock(name).unwrap().read_lock(),
        "write" => client.get_read_write_lock(name).unwrap().write_lock(),
        other => panic!("unknown kind {other}"),
    }
}

// ---- a. reentrant, mixed -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_threads_and_rust_tasks_exclude_each_other_on_one_reentrant_lock() {
    const OPS: u64 = 25;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;

    contend_across_languages(
        &server,
        &mut java,
        "reentrant",
        "mixed",
        json!({}),
        || client.get_lock("mixed").unwrap(),
        OPS,
        Duration::from_millis(1),
    )
    .await;
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- b. nested holds seen from both sides --------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_are_seen_alike_from_java_and_rust() {
    let server = RedisServer::start();
    let java_watchdog = Duration::from_secs(10);
    let mut java = JavaDriver::start(&server.url(), java_watchdog, None).await;
    let client = server.client().await;
    let lock = client.get_lock("nested").unwrap();
    let mut admin = server.admin().await;

    // A Java thread holds it twice.
    java.lock("j1", "reentrant", "nested", 0, -1);
    let acquired = java.expect("acquired", Some("j1"), SOON).await;
    java.lock("j1", "reentrant", "nested", 0, -1);
    java.expect("acquired", Some("j1"), SOON).await;
    let field = java_field(&java, &acquired);
    let fields: HashMap<String, i64> = admin.hgetall("nested").await.unwrap();
    assert_eq!(fields, HashMap::from([(field.clone(), 2)]));
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0, "not ours");
    assert!(!lock.is_held_by_current_task().await.unwrap());
    let ttl = lock
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .expect("an expiry");
    assert!(
        ttl > java_watchdog / 2 && ttl <= java_watchdog,
        "TTL {ttl:?}, Java's watchdog is {java_watchdog:?}"
    );
    assert!(lock.try_lock().await.unwrap().is_none());
    let seen = java.inspect("j1", "reentrant", "nested").await;
    assert_eq!(seen["hold_count"], 2, "{seen}");
    assert_eq!(seen["held_by_current"], true, "{seen}");
    assert_eq!(seen["locked"], true, "{seen}");
    let java_ttl = seen["ttl_ms"].as_i64().unwrap();
    assert!(java_ttl > 5_000 && java_ttl <= 10_000, "{seen}");
    // Another Java thread is not the owner.
    java.unlock("j2", "reentrant", "nested");
    let refused = java.expect("error", Some("j2"), SOON).await;
    assert_eq!(refused["error"], "not_held", "{refused}");
    for _ in 0..2 {
        java.unlock("j1", "reentrant", "nested");
        java.expect("unlocked", Some("j1"), SOON).await;
    }
    assert!(!lock.is_locked().await.unwrap());

    // A Rust owner holds it twice, nesting through its scope.
    let guard = lock.lock().await.unwrap();
    let inner = guard.scope(lock.lock()).await.unwrap();
    assert_eq!(guard.scope(lock.hold_count()).await.unwrap(), 2);
    let fields: HashMap<String, i64> = admin.hgetall("nested").await.unwrap();
    assert_eq!(
        fields,
        HashMap::from([(format!("{}:{}", client.id(), guard.owner_id()), 2)])
    );
    let seen = java.inspect("j2", "reentrant", "nested").await;
    assert_eq!(seen["locked"], true, "{seen}");
    assert_eq!(seen["held_by_current"], false, "{seen}");
    assert_eq!(seen["hold_count"], 0, "{seen}");
    assert!(seen["ttl_ms"].as_i64().unwrap() > 0, "{seen}");
    java.lock("j2", "reentrant", "nested", 0, 0);
    java.expect("not_acquired", Some("j2"), SOON).await;
    inner.unlock().await.unwrap();
    assert!(java.inspect("j2", "reentrant", "nested").await["locked"] == true);
    guard.unlock().await.unwrap();
    let seen = java.inspect("j2", "reentrant", "nested").await;
    assert_eq!(seen["locked"], false, "{seen}");
    assert_eq!(seen["ttl_ms"], -2, "{seen}");
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- c. fair lock ----------------------------------------------------------

/// 8 Java threads and 8 Rust waiters, alternating, each joining after the one
/// before is in line, are served in arrival order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_serves_java_and_rust_waiters_in_arrival_order() {
    let name = "fair-order";
    let wait = Duration::from_secs(20);
    let server = RedisServer::start();
    // Both sides with the same fair wait: each acquisition from the line moves the
    // deadlines behind it earlier by the acquirer's wait.
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, Some(wait)).await;
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let holder = client.get_fair_lock(name).unwrap();
    let held = holder.lock().await.unwrap();

    let mut expected = Vec::new();
    let mut rust_waiters = Vec::new();
    let mut java_actors = Vec::new();
    for i in 0..16 {
        let before = queue_len(&server, name).await;
        let label = if i % 2 == 0 {
            format!("java-{i}")
        } else {
            format!("rust-{i}")
        };
        if i % 2 == 0 {
            java.lock(&label, "fair", name, 0, -1);
            java.act(
                &label,
                "record",
                "fair",
                name,
                json!({ "list": "grants", "value": label }),
            );
            java.unlock(&label, "fair", name);
            java_actors.push(label.clone());
        } else {
            let lock = client.get_fair_lock(name).unwrap();
            let mut admin = server.admin().await;
            let label = label.clone();
            rust_waiters.push(tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                let _: () = admin.rpush("grants", &label).await.unwrap();
                guard.unlock().await.unwrap();
            }));
        }
        assert!(
            eventually(SOON, || async {
                queue_len(&server, name).await == before + 1
            })
            .await,
            "{label} did not join the line"
        );
        expected.push(label);
    }
    held.unlock().await.unwrap();
    within(Duration::from_secs(30), "16 fair waiters", async {
        for actor in &java_actors {
            java.expect("unlocked", Some(actor), Duration::from_secs(30))
                .await;
        }
        for t in rust_waiters {
            t.await.unwrap();
        }
    })
    .await;
    assert_eq!(
        lrange(&server, "grants").await,
        expected,
        "granted out of arrival order"
    );
    del(&server, "grants").await;
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// A Java waiter (`tryLock(2 s)`) whose JVM is killed while first in line: the
/// Rust and Java waiters behind it get the lock, in order, within its wait plus a
/// few seconds of the release (half the Rust side's 20 s fair wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_behind_a_killed_java_head_still_get_the_lock() {
    let name = "fair-killed";
    let wait = Duration::from_secs(20);
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, Some(wait)).await;
    let (client, held) = behind_a_killed_java_head(&server, name, wait).await;

    let lock = client.get_fair_lock(name).unwrap();
    let mut admin = server.admin().await;
    let rust_waiter = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        let at = Instant::now();
        let _: () = admin.rpush("grants", "rust").await.unwrap();
        guard.unlock().await.unwrap();
        at
    });
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);
    java.lock("behind", "fair", name, 0, -1);
    java.act(
        "behind",
        "record",
        "fair",
        name,
        json!({ "list": "grants", "value": "java" }),
    );
    java.unlock("behind", "fair", name);
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 3 }).await);

    let released = Instant::now();
    held.unlock().await.unwrap();
    // The dead head's wait (2 s) and a check or two, with room for a loaded
    // machine; well under the Rust side's 20 s fair wait.
    let bound = wait / 2;
    let rust_at = within(bound, "the Rust waiter behind the dead head", rust_waiter)
        .await
        .unwrap();
    java.expect(
        "unlocked",
        Some("behind"),
        bound.saturating_sub(released.elapsed()),
    )
    .await;
    eprintln!(
        "fair, killed Java head: the Rust waiter behind it acquired {:?} after the release",
        rust_at.duration_since(released)
    );
    assert_eq!(lrange(&server, "grants").await, ["rust", "java"]);
    del(&server, "grants").await;
    assert_eq!(queue_len(&server, name).await, 0);
    assert_eq!(timeouts_len(&server, name).await, 0);
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// `tryLock` give-ups, Java's and ours, leave the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_try_lock_give_ups_on_both_sides_leave_the_line() {
    let name = "fair-give-up";
    let wait = Duration::from_secs(20);
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, Some(wait)).await;
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();

    // One waiter that stays, first in line.
    let stayer = client.get_fair_lock(name).unwrap();
    let stayer = tokio::spawn(async move { stayer.lock().await.unwrap().unlock().await.unwrap() });
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 1 }).await);

    // Java gives up after 2 s (long enough to be seen in line, however loaded
    // the machine).
    java.lock("quitter", "fair", name, 0, 2_000);
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);
    java.expect("not_acquired", Some("quitter"), SOON).await;
    assert!(
        eventually(SOON, || async { queue_len(&server, name).await == 1 }).await,
        "the Java quitter stayed in line: {:?}",
        crate::support::fair::queue(&server, name).await
    );
    assert_eq!(timeouts_len(&server, name).await, 1);

    // Rust gives up after 2 s, behind a Java waiter that stays.
    java.lock("java-stayer", "fair", name, 0, -1);
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);
    let quitter = client.get_fair_lock(name).unwrap();
    let gave_up = tokio::spawn(async move {
        quitter
            .try_lock_wait(Duration::from_secs(2))
            .await
            .unwrap()
            .is_none()
    });
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 3 }).await);
    assert!(within(SOON, "the Rust quitter", gave_up).await.unwrap());
    assert!(
        eventually(SOON, || async { queue_len(&server, name).await == 2 }).await,
        "the Rust quitter stayed in line: {:?}",
        crate::support::fair::queue(&server, name).await
    );
    assert_eq!(timeouts_len(&server, name).await, 2);

    // Java gives up from the middle of the line, too.
    java.lock("quitter2", "fair", name, 0, 300);
    java.expect("not_acquired", Some("quitter2"), SOON).await;
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);

    held.unlock().await.unwrap();
    within(SOON, "the Rust stayer", stayer).await.unwrap();
    java.expect("acquired", Some("java-stayer"), SOON).await;
    java.unlock("java-stayer", "fair", name);
    java.expect("unlocked", Some("java-stayer"), SOON).await;
    assert_eq!(queue_len(&server, name).await, 0);
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- d. read-write ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_excludes_across_languages_both_ways() {
    let name = "rw-mixed";
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let rw = client.get_read_write_lock(name).unwrap();

    // Java readers, a Rust writer waiting.
    for r in ["jr1", "jr2"] {
        java.lock(r, "read", name, 0, -1);
        java.expect("acquired", Some(r), SOON).await;
    }
    let shared = rw.read_lock().try_lock().await.unwrap();
    shared
        .expect("a Rust reader shares with Java readers")
        .unlock()
        .await
        .unwrap();
    let writer = rw.write_lock();
    let waiting = tokio::spawn(async move { writer.lock().await.unwrap() });
    wait_subscribed(&server, &channel("write", name)).await;
    java.unlock("jr1", "read", name);
    java.expect("unlocked", Some("jr1"), SOON).await;
    assert!(
        !waiting.is_finished(),
        "a writer got in beside a Java reader"
    );
    java.unlock("jr2", "read", name);
    java.expect("unlocked", Some("jr2"), SOON).await;
    let write = within(SOON, "the Rust writer after the Java readers", waiting)
        .await
        .unwrap();
    java.lock("jr3", "read", name, 0, 0);
    java.expect("not_acquired", Some("jr3"), SOON).await;
    write.unlock().await.unwrap();

    // Rust readers, a Java writer waiting.
    let r1 = rw.read_lock().lock().await.unwrap();
    let r2 = rw.read_lock().lock().await.unwrap();
    java.lock("jw", "write", name, 0, -1);
    wait_subscribed(&server, &channel("write", name)).await;
    r1.unlock().await.unwrap();
    assert!(
        java.try_expect("acquired", Some("jw"), Duration::from_millis(300))
            .await
            .is_none(),
        "a Java writer got in beside a Rust reader"
    );
    r2.unlock().await.unwrap();
    java.expect("acquired", Some("jw"), SOON).await;
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    java.unlock("jw", "write", name);
    java.expect("unlocked", Some("jw"), SOON).await;
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_downgrade_lets_a_waiting_java_reader_in_promptly() {
    let name = "rw-downgrade";
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let rw = client.get_read_write_lock(name).unwrap();

    let write = rw.write_lock().lock().await.unwrap();
    java.lock("reader", "read", name, 0, -1);
    wait_subscribed(&server, &channel("read", name)).await;
    let read = write.scope(rw.read_lock().lock()).await.unwrap();
    write.unlock().await.unwrap();
    // The lock's TTL it would otherwise sleep out is the Rust client's 30 s
    // watchdog lease (never below 20 s).
    java.expect("acquired", Some("reader"), WATCHDOG_30S / 3)
        .await;
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    java.unlock("reader", "read", name);
    java.expect("unlocked", Some("reader"), SOON).await;
    read.unlock().await.unwrap();
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- e. watchdog both ways -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdogs_keep_one_second_leases_alive_both_ways() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let mut java = JavaDriver::start(&server.url(), watchdog, None).await;
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let hold = Duration::from_secs(3);

    for kind in ["reentrant", "write"] {
        let name = format!("watchdog-{kind}");
        let key = name.clone();

        // A Java holder, a Rust contender.
        java.lock("holder", kind, &name, 0, -1);
        java.expect("acquired", Some("holder"), SOON).await;
        let lock = rust_lock(&client, kind, &name);
        let start = Instant::now();
        let mut attempts = 0;
        // Over three leases, and at least ten attempts however slow each is.
        while start.elapsed() < hold || attempts < 10 {
            assert!(
                lock.try_lock_wait(Duration::from_millis(100))
                    .await
                    .unwrap()
                    .is_none(),
                "{kind}: got a lock Java holds, after {:?}",
                start.elapsed()
            );
            let ttl = pttl(&server, &key).await;
            assert!(ttl > 0 && ttl <= 1_000, "{kind}: PTTL {ttl}");
            attempts += 1;
        }
        java.unlock("holder", kind, &name);
        java.expect("unlocked", Some("holder"), SOON).await;
        let guard = lock
            .try_lock_wait(SOON)
            .await
            .unwrap()
            .expect("free after the Java unlock");

        // The reverse: the Rust holder, a Java contender.
        let start = Instant::now();
        while start.elapsed() < hold {
            java.lock("contender", kind, &name, 0, 100);
            java.expect("not_acquired", Some("contender"), SOON).await;
            let ttl = pttl(&server, &key).await;
            assert!(ttl > 0 && ttl <= 1_000, "{kind}: PTTL {ttl}");
        }
        guard.unlock().await.unwrap();
        java.lock("contender", kind, &name, 0, 10_000);
        java.expect("acquired", Some("contender"), SOON).await;
        java.unlock("contender", kind, &name);
        java.expect("unlocked", Some("contender"), SOON).await;
    }
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- f. force unlock -------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_from_either_side_wakes_the_other_sides_waiters() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    // Far below the 30 s leases (renewed every 10 s, so a TTL slept out is never
    // below 20 s): the wake-up came from the force release's message.
    let prompt = WATCHDOG_30S / 3;

    for kind in ["reentrant", "fair", "write"] {
        let name = format!("force-{kind}");

        // Java holds, a Rust waiter waits, Java forces.
        java.lock("holder", kind, &name, 0, -1);
        java.expect("acquired", Some("holder"), SOON).await;
        let lock = rust_lock(&client, kind, &name);
        let waiter = lock.clone();
        let waiting = tokio::spawn(async move { waiter.lock().await.unwrap() });
        if kind == "fair" {
            assert!(eventually(SOON, || async { queue_len(&server, &name).await == 1 }).await);
        } else {
            wait_subscribed(&server, &channel(kind, &name)).await;
        }
        java.act("forcer", "force_unlock", kind, &name, json!({}));
        let forced = java.expect("forced", Some("forcer"), SOON).await;
        assert_eq!(forced["result"], true, "{kind}: {forced}");
        let guard = within(
            prompt,
            &format!("{kind}: the Rust waiter after a Java force unlock"),
            waiting,
        )
        .await
        .unwrap();

        // Rust holds, a Java waiter waits, Rust forces.
        java.lock("waiter", kind, &name, 0, -1);
        if kind == "fair" {
            assert!(eventually(SOON, || async { queue_len(&server, &name).await == 1 }).await);
        } else {
            wait_subscribed(&server, &channel(kind, &name)).await;
        }
        assert!(lock.force_unlock().await.unwrap(), "{kind}: nothing forced");
        java.expect("acquired", Some("waiter"), prompt).await;
        assert!(guard.unlock().await.unwrap_err().is_not_held());
        java.unlock("waiter", kind, &name);
        java.expect("unlocked", Some("waiter"), SOON).await;
        // The Java holder that was forced out: its unlock is refused, except
        // that Redisson's fair and write unlocks report success on a lock that
        // no longer exists at all.
        java.unlock("holder", kind, &name);
        let answer = java
            .expect_any(&["error", "unlocked"], Some("holder"), SOON)
            .await;
        if kind == "reentrant" {
            assert_eq!(answer["error"], "not_held", "{answer}");
        }
        eprintln!("force unlock, {kind}: the forced-out Java holder's unlock said {answer}");
    }
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- g. Redisson's unlock latches ----------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_unlock_latches_do_not_disturb_rust_locks() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;

    for kind in ["reentrant", "fair", "read", "write"] {
        let name = format!("latch-{kind}");
        // Java: watchdog hold, lease hold, nested hold; each released.
        for lease in [0, 5_000] {
            java.lock("j", kind, &name, lease, -1);
            java.expect("acquired", Some("j"), SOON).await;
            java.unlock("j", kind, &name);
            java.expect("unlocked", Some("j"), SOON).await;
        }
        // Rust, right after, on the same name: everything as usual.
        let lock = rust_lock(&client, kind, &name);
        let guard = lock.try_lock().await.unwrap().expect("free after Java");
        let inner = guard.scope(lock.lock()).await.unwrap();
        assert_eq!(guard.scope(lock.hold_count()).await.unwrap(), 2);
        inner.unlock().await.unwrap();
        guard.unlock().await.unwrap();
        let guard = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
        guard.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
        // And Java again after Rust.
        java.lock("j", kind, &name, 0, 0);
        java.expect("acquired", Some("j"), SOON).await;
        java.unlock("j", kind, &name);
        java.expect("unlocked", Some("j"), SOON).await;
    }
    // Rust alone writes no latch.
    let rust_only = client.get_lock("latch-rust-only").unwrap();
    rust_only.lock().await.unwrap().unlock().await.unwrap();

    let latches = assert_nothing_left_but_latches(&server, &[&client]).await;
    assert!(
        !latches.iter().any(|k| k.contains("latch-rust-only")),
        "a Rust unlock wrote a latch: {latches:?}"
    );
    let mut report = String::new();
    for key in &latches {
        let ttl = pttl(&server, key).await;
        report.push_str(&format!("  {key} (PTTL {ttl} ms)\n"));
    }
    eprintln!(
        "Redisson {} left {} unlock latch key(s) after 12 Java unlocks:\n{report}",
        crate::support::java::redisson_version(),
        latches.len()
    );
    assert!(latches.iter().all(|k| is_unlock_latch(k)));
}

// ---- h. fix checks ---------------------------------------------------------

/// A Java waiter parked on the read-write lock behind a Rust writer acquires
/// within a quarter of the watchdog (5 s) of the write release, not after the
/// TTL its attempt returned (the 20 s watchdog, renewed every third of it, so
/// never below 13 s): Redisson's waiters keep a `0` message as a permit but not a `1`,
/// so a waiter between its attempt and its sleep misses a lone `1`. The window
/// is narrow (a few percent of rounds hit it): 60 rounds, each releasing the
/// moment the Java waiter subscribes plus 0 to 1 ms, swept round by round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fix_check_a_java_rw_waiter_wakes_promptly_after_a_rust_write_release() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(20);
    let prompt = watchdog / 4;
    let mut java = JavaDriver::start(&server.url(), watchdog, None).await;
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let mut admin = server.admin().await;
    let mut late = Vec::new();
    for round in 0..60u64 {
        let name = format!("rw-race-{round}");
        let java_kind = if round % 2 == 0 { "write" } else { "read" };
        let rw = client.get_read_write_lock(&name).unwrap();
        let write = rw.write_lock().lock().await.unwrap();
        java.lock("waiter", java_kind, &name, 0, -1);
        // Poll without sleeping: release as close as possible after the Java
        // waiter's subscription, where its second attempt and its park are.
        let channel = channel("write", &name);
        let deadline = Instant::now() + SOON;
        loop {
            let subs: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut admin)
                .await
                .unwrap();
            if subs.first().is_some_and(|(_, n)| *n >= 1) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the Java waiter never subscribed"
            );
        }
        // Sweep the release over the window, for each kind.
        let spin = Duration::from_micros(1_000 * ((round / 2) % 30) / 30);
        let spin_until = Instant::now() + spin;
        while Instant::now() < spin_until {
            std::hint::spin_loop();
        }
        let released = Instant::now();
        write.unlock().await.unwrap();
        if java
            .try_expect("acquired", Some("waiter"), prompt)
            .await
            .is_none()
        {
            java.expect("acquired", Some("waiter"), watchdog + SOON)
                .await;
            late.push(format!(
                "round {round} (Java {java_kind} lock, released {spin:?} after it \
                 subscribed): acquired {:?} after the release",
                released.elapsed()
            ));
        }
        java.unlock("waiter", java_kind, &name);
        java.expect("unlocked", Some("waiter"), SOON).await;
        if late.len() == 2 {
            break; // each costs a lease; two make the point
        }
    }
    assert!(
        late.is_empty(),
        "Java waiters slept out the lease after a Rust write release:\n{}",
        late.join("\n")
    );
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// A Java `tryLock(2 s)` waiter killed while first in line holds the line for
/// about its own wait after the release, not for the Rust fair wait (20 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fix_check_a_killed_java_fair_head_blocks_for_its_wait_not_ours() {
    let name = "fair-dead-head";
    let wait = Duration::from_secs(20);
    let server = RedisServer::start();
    let (client, held) = behind_a_killed_java_head(&server, name, wait).await;
    let next = client.get_fair_lock(name).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = next.lock().await.unwrap();
        let at = Instant::now();
        guard.unlock().await.unwrap();
        at
    });
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);
    let released = Instant::now();
    held.unlock().await.unwrap();
    // Its wait (2 s) and a check or two, with room for a loaded machine: half
    // the Rust fair wait.
    let at = within(
        wait / 2,
        "the Rust waiter behind the killed Java head (the Rust fair wait is 20 s)",
        waiting,
    )
    .await
    .unwrap();
    eprintln!(
        "fix check, killed Java fair head: the next waiter acquired {:?} after the release",
        at.duration_since(released)
    );
    assert_eq!(queue_len(&server, name).await, 0);
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// `read_lock().is_locked()` agrees with Java's `readLock().isLocked()` in pure
/// write mode, during a downgrade (write + read by one owner) and in pure read
/// mode; the write side is compared too. Each state is built by Rust, then by
/// Java.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fix_check_read_lock_is_locked_agrees_with_java_in_every_mode() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let mut table = Vec::new();
    let mut mismatches = Vec::new();

    async fn compare(
        java: &mut JavaDriver,
        client: &redisson_locks::Client,
        name: &str,
        state: &str,
        table: &mut Vec<String>,
        mismatches: &mut Vec<String>,
    ) {
        let rw = client.get_read_write_lock(name).unwrap();
        for (kind, lock) in [("read", rw.read_lock()), ("write", rw.write_lock())] {
            let rust = lock.is_locked().await.unwrap();
            let java_says = java.inspect("observer", kind, name).await["locked"]
                .as_bool()
                .unwrap();
            let line =
                format!("{state:<32} {kind}Lock().isLocked(): Java {java_says}, Rust {rust}");
            if java_says != rust {
                mismatches.push(line.clone());
            }
            table.push(line);
        }
    }

    // Built by Rust.
    let name = "rw-is-locked-rust";
    let rw = client.get_read_write_lock(name).unwrap();
    let write = rw.write_lock().lock().await.unwrap();
    compare(
        &mut java,
        &client,
        name,
        "Rust: write",
        &mut table,
        &mut mismatches,
    )
    .await;
    let read = write.scope(rw.read_lock().lock()).await.unwrap();
    compare(
        &mut java,
        &client,
        name,
        "Rust: write + read (downgrade)",
        &mut table,
        &mut mismatches,
    )
    .await;
    write.unlock().await.unwrap();
    compare(
        &mut java,
        &client,
        name,
        "Rust: read",
        &mut table,
        &mut mismatches,
    )
    .await;
    read.unlock().await.unwrap();
    compare(
        &mut java,
        &client,
        name,
        "Rust: free",
        &mut table,
        &mut mismatches,
    )
    .await;

    // Built by Java.
    let name = "rw-is-locked-java";
    java.lock("owner", "write", name, 0, -1);
    java.expect("acquired", Some("owner"), SOON).await;
    compare(
        &mut java,
        &client,
        name,
        "Java: write",
        &mut table,
        &mut mismatches,
    )
    .await;
    java.lock("owner", "read", name, 0, -1);
    java.expect("acquired", Some("owner"), SOON).await;
    compare(
        &mut java,
        &client,
        name,
        "Java: write + read (downgrade)",
        &mut table,
        &mut mismatches,
    )
    .await;
    java.unlock("owner", "write", name);
    java.expect("unlocked", Some("owner"), SOON).await;
    compare(
        &mut java,
        &client,
        name,
        "Java: read",
        &mut table,
        &mut mismatches,
    )
    .await;
    java.unlock("owner", "read", name);
    java.expect("unlocked", Some("owner"), SOON).await;

    eprintln!("isLocked() by mode:\n{}", table.join("\n"));
    assert!(
        mismatches.is_empty(),
        "Rust disagrees with Java:\n{}",
        mismatches.join("\n")
    );
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// Fenced tokens are one sequence for Java's `RFencedLock` and this crate's:
/// acquisitions alternating between the languages draw strictly increasing
/// tokens, and `get_token` agrees with the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_tokens_are_one_sequence_across_languages() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let lock = client.get_fenced_lock("shared-fence").unwrap();
    let mut last = 0u64;
    for round in 0..10 {
        java.lock("fj", "fenced", "shared-fence", 0, -1);
        let acquired = java.expect("acquired", Some("fj"), SOON).await;
        let token = acquired["token"].as_u64().expect("Java's token");
        assert!(
            token > last,
            "round {round}: Java's token {token} after {last}"
        );
        java.unlock("fj", "fenced", "shared-fence");
        java.expect("unlocked", Some("fj"), SOON).await;
        let (guard, ours) = within(SOON, "Rust fenced lock", lock.lock_and_get_token())
            .await
            .unwrap();
        assert!(
            ours > token,
            "round {round}: our token {ours} after Java's {token}"
        );
        guard.unlock().await.unwrap();
        last = ours;
    }
    assert_eq!(lock.get_token().await.unwrap(), Some(last));
}

/// Spin locks of both languages exclude each other: 4 Java threads and 4 Rust
/// tasks, a shared non-atomic counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_locks_exclude_each_other_across_languages() {
    const OPS: u64 = 15;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    contend_across_languages(
        &server,
        &mut java,
        "spin",
        "spun",
        json!({}),
        || client.get_spin_lock("spun").unwrap(),
        OPS,
        Duration::ZERO,
    )
    .await;
}

/// Non-reentrant locks of both languages exclude each other, on Redisson 4 (3.x
/// has no non-reentrant lock: there the driver must say so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reentrant_locks_exclude_each_other_across_languages() {
    const OPS: u64 = 15;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let version = crate::support::java::redisson_version();
    if !java.non_reentrant_supported {
        assert!(
            version.starts_with("3."),
            "Redisson {version} lacks getNonReentrantLock"
        );
        return;
    }
    let client = server.client().await;
    for kind in ["nonreentrant", "nonreentrant_fair"] {
        let name = format!("nr-{kind}");
        let rust_lock = || {
            if kind == "nonreentrant" {
                client.get_non_reentrant_lock(name.clone())
            } else {
                client.get_non_reentrant_fair_lock(name.clone())
            }
            .unwrap()
        };
        contend_across_languages(
            &server,
            &mut java,
            kind,
            &name,
            json!({}),
            rust_lock,
            OPS,
            Duration::ZERO,
        )
        .await;
    }
}

/// Redisson's single-hash multi-lock (`getMultiLock(group, values)`) and ours
/// name the members alike (the same hash fields for the same values, so the
/// member hash agrees byte for byte), exclude each other on a shared value, and
/// keep a shared counter exact under contention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_multi_locks_share_redissons_layout() {
    const OPS: u64 = 10;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let members = |fields: Vec<String>| -> Vec<String> {
        let mut ids: Vec<String> = fields.into_iter().filter(|f| !f.contains(':')).collect();
        ids.sort();
        ids
    };
    let values = json!({ "values": "seat-1,seat-2" });

    java.act("gj", "lock", "group_multi", "plane", values.clone());
    java.expect("acquired", Some("gj"), SOON).await;
    let mut admin = server.admin().await;
    let java_ids = members(admin.hkeys("plane").await.unwrap());
    assert_eq!(java_ids.len(), 2, "Java's fields: {java_ids:?}");
    let ours = client
        .get_multi_lock("plane", ["seat-2", "seat-3"])
        .unwrap();
    assert!(
        ours.is_locked().await.unwrap(),
        "Java's hold of seat-2 unseen"
    );
    assert!(
        ours.try_lock().await.unwrap().is_none(),
        "seat-2 taken twice"
    );
    java.act("gj", "unlock", "group_multi", "plane", values.clone());
    java.expect("unlocked", Some("gj"), SOON).await;

    let guard = client
        .get_multi_lock("plane", ["seat-1", "seat-2"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let rust_ids = members(admin.hkeys("plane").await.unwrap());
    assert_eq!(rust_ids, java_ids, "the member ids differ");
    java.act(
        "gj",
        "lock",
        "group_multi",
        "plane",
        json!({ "values": "seat-2", "wait_ms": 0, "lease_ms": 0 }),
    );
    let refused = java.expect("not_acquired", Some("gj"), SOON).await;
    assert_eq!(refused["event"], "not_acquired");
    guard.unlock().await.unwrap();

    contend_across_languages(
        &server,
        &mut java,
        "group_multi",
        "plane",
        values,
        || {
            client
                .get_multi_lock("plane", ["seat-1", "seat-2"])
                .unwrap()
        },
        OPS,
        Duration::ZERO,
    )
    .await;
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// Redisson's `RedissonMultiLock` over three locks and ours over the same three
/// (in the opposite order) exclude each other: a shared counter stays exact,
/// and neither side deadlocks. Opposite orders meet head on and each meeting is
/// resolved by a round running out (up to 4.5 s on either side), so a run of
/// 10 operations per contender took 5-97 s here: 4 keep it well inside the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_locks_over_separate_locks_exclude_across_languages() {
    const OPS: u64 = 4;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let counter = "multi-counter";
    java.send(json!({
        "op": "contend", "kind": "multi", "name": "m1,m2,m3", "threads": 2, "ops": OPS,
        "hold_ms": 1, "counter": counter, "lease_ms": 0
    }));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let locks = ["m3", "m2", "m1"].map(|n| client.get_lock(n).unwrap());
        let multi = redisson_locks::MultiLock::new(locks.to_vec()).unwrap();
        let mut admin = server.admin().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..OPS {
                let guard = multi.lock().await.unwrap();
                incr_nonatomic(&mut admin, counter).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    finish_contention(
        &server,
        &mut java,
        tasks,
        counter,
        2 * OPS,
        4 * OPS,
        "multi-lock",
    )
    .await;
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

// ---- synchronizers: semaphore, permit-expirable semaphore, latch ------------

/// Sends `op` on synchronizer `name` for `actor` (with `extra` fields).
fn sync_op(java: &mut JavaDriver, actor: &str, op: &str, name: &str, extra: serde_json::Value) {
    java.op(actor, op, name, extra);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_take_and_give_back_permits_of_one_semaphore() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let sem = client.get_semaphore("shared-sem").unwrap();
    let channel = "redisson_sc:{shared-sem}";

    // Java sets the count; Rust sees it.
    sync_op(
        &mut java,
        "j",
        "sem_try_set",
        "shared-sem",
        json!({ "permits": 2 }),
    );
    assert_eq!(
        java.expect("sem_set", Some("j"), SOON).await["result"],
        true
    );
    assert!(!sem.try_set_permits(7).await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 2);

    // Java takes both; a Rust waiter is woken by Java's release.
    sync_op(
        &mut java,
        "j",
        "sem_acquire",
        "shared-sem",
        json!({ "permits": 2 }),
    );
    java.expect("sem_acquired", Some("j"), SOON).await;
    assert!(!sem.try_acquire().await.unwrap());
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire().await })
    };
    wait_subscribed(&server, channel).await;
    sync_op(
        &mut java,
        "j",
        "sem_release",
        "shared-sem",
        json!({ "permits": 1 }),
    );
    java.expect("sem_released", Some("j"), SOON).await;
    within(SOON, "the Rust waiter after a Java release", waiter)
        .await
        .unwrap()
        .unwrap();

    // Now a Java waiter (for two) is woken by Rust releases.
    sync_op(
        &mut java,
        "k",
        "sem_acquire",
        "shared-sem",
        json!({ "permits": 2 }),
    );
    wait_subscribed(&server, channel).await;
    assert!(java
        .try_expect("sem_acquired", Some("k"), Duration::from_millis(300))
        .await
        .is_none());
    sem.release().await.unwrap();
    sem.release().await.unwrap();
    java.expect("sem_acquired", Some("k"), SOON).await;

    // Timed waits agree: Java times out, then both give everything back.
    sync_op(
        &mut java,
        "j",
        "sem_acquire",
        "shared-sem",
        json!({ "permits": 1, "wait_ms": 200 }),
    );
    java.expect("sem_not_acquired", Some("j"), SOON).await;
    sync_op(
        &mut java,
        "k",
        "sem_release",
        "shared-sem",
        json!({ "permits": 3 }),
    );
    java.expect("sem_released", Some("k"), SOON).await;
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    sem.add_permits(-1).await.unwrap();
    sync_op(&mut java, "j", "sem_available", "shared-sem", json!({}));
    assert_eq!(
        java.expect("sem_available", Some("j"), SOON).await["permits"],
        2
    );
    sync_op(&mut java, "j", "sem_drain", "shared-sem", json!({}));
    assert_eq!(
        java.expect("sem_drained", Some("j"), SOON).await["permits"],
        2
    );
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(
        eventually(SOON, || async { server.channels().await.is_empty() }).await,
        "subscriptions left: {:?}",
        server.channels().await
    );
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_release_each_others_expirable_permits() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let sem = client.get_permit_expirable_semaphore("shared-pes").unwrap();
    let lease = Duration::from_secs(60);
    assert!(sem.try_set_permits(1).await.unwrap());

    // A Java permit, released in Rust by the id Java printed.
    sync_op(
        &mut java,
        "j",
        "pes_acquire",
        "shared-pes",
        json!({ "lease_ms": 60_000 }),
    );
    let acquired = java.expect("pes_acquired", Some("j"), SOON).await;
    let java_id: redisson_locks::PermitId = acquired["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(sem.try_acquire(lease).await.unwrap(), None);
    // A Rust waiter behind it, woken by Rust's release of Java's permit.
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(lease).await })
    };
    wait_subscribed(&server, "redisson_sc:{shared-pes}").await;
    sem.release(&java_id).await.unwrap();
    let rust_id = within(SOON, "the Rust waiter", waiter)
        .await
        .unwrap()
        .unwrap();

    // A Java waiter, woken when Java releases the Rust permit by its id.
    sync_op(
        &mut java,
        "k",
        "pes_acquire",
        "shared-pes",
        json!({ "lease_ms": 60_000 }),
    );
    wait_subscribed(&server, "redisson_sc:{shared-pes}").await;
    sync_op(
        &mut java,
        "j",
        "pes_try_release",
        "shared-pes",
        json!({ "id": rust_id.to_string() }),
    );
    assert_eq!(
        java.expect("pes_released", Some("j"), SOON).await["result"],
        true
    );
    let k_id = java.expect("pes_acquired", Some("k"), SOON).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!sem.try_release(&rust_id).await.unwrap(), "released twice");

    // Leases set on one side are seen on the other: Rust shortens Java's permit,
    // and Java's availablePermits() reclaims it once the lease is over.
    let k_id: redisson_locks::PermitId = k_id.parse().unwrap();
    assert!(sem
        .update_lease(&k_id, Duration::from_millis(200))
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    sync_op(&mut java, "j", "pes_available", "shared-pes", json!({}));
    assert_eq!(
        java.expect("pes_available", Some("j"), SOON).await["permits"],
        1
    );
    assert_eq!(sem.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_sees_a_renewed_rust_permit_held_past_its_lease_then_returned() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let lease = Duration::from_secs(1);
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = lease)
        .await;
    let sem = client
        .get_permit_expirable_semaphore("renewed-pes")
        .unwrap();
    assert!(sem.try_set_permits(1).await.unwrap());
    let mut admin = server.admin().await;
    let permit = sem.acquire_renewed().await.unwrap();
    let id = *permit.id().as_bytes();
    let score = |admin: &mut redis::aio::MultiplexedConnection| {
        let mut admin = admin.clone();
        async move {
            let score: Option<f64> = admin
                .zscore("{renewed-pes}:timeout", &id[..])
                .await
                .unwrap();
            score
        }
    };
    let first = score(&mut admin).await.expect("out");

    // Three leases on: Java (which reclaims by its own clock) still finds it
    // out, and its lease end has moved.
    tokio::time::sleep(lease * 3).await;
    sync_op(&mut java, "j", "pes_available", "renewed-pes", json!({}));
    assert_eq!(
        java.expect("pes_available", Some("j"), SOON).await["permits"],
        0
    );
    let moved = score(&mut admin).await.expect("still out");
    assert!(
        moved - first >= 1_500.0,
        "the lease end moved {} ms",
        moved - first
    );

    // Dropped in Rust: Java sees it back.
    drop(permit);
    assert!(
        eventually(SOON, || async {
            sem.available_permits().await.unwrap() == 1
        })
        .await
    );
    sync_op(&mut java, "j", "pes_available", "renewed-pes", json!({}));
    assert_eq!(
        java.expect("pes_available", Some("j"), SOON).await["permits"],
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_count_down_and_wake_each_other_on_one_latch() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let latch = client.get_count_down_latch("shared-latch").unwrap();
    let channel = "redisson_countdownlatch__channel__{shared-latch}";

    // A Java count-down wakes a Rust waiter.
    assert!(latch.try_set_count(2).await.unwrap());
    sync_op(
        &mut java,
        "j",
        "latch_try_set",
        "shared-latch",
        json!({ "count": 5 }),
    );
    assert_eq!(
        java.expect("latch_set", Some("j"), SOON).await["result"],
        false
    );
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    wait_subscribed(&server, channel).await;
    latch.count_down().await.unwrap();
    sync_op(&mut java, "j", "latch_count", "shared-latch", json!({}));
    assert_eq!(
        java.expect("latch_count", Some("j"), SOON).await["count"],
        1
    );
    sync_op(
        &mut java,
        "j",
        "latch_count_down",
        "shared-latch",
        json!({}),
    );
    java.expect("latch_counted_down", Some("j"), SOON).await;
    within(SOON, "the Rust waiter after Java's count-down", waiter)
        .await
        .unwrap()
        .unwrap();

    // A Rust count-down wakes a Java waiter.
    sync_op(
        &mut java,
        "j",
        "latch_try_set",
        "shared-latch",
        json!({ "count": 1 }),
    );
    assert_eq!(
        java.expect("latch_set", Some("j"), SOON).await["result"],
        true
    );
    assert_eq!(latch.count().await.unwrap(), 1);
    sync_op(&mut java, "k", "latch_await", "shared-latch", json!({}));
    wait_subscribed(&server, channel).await;
    latch.count_down().await.unwrap();
    java.expect("latch_opened", Some("k"), SOON).await;

    // Timed waits time out alike, and a delete from Rust opens Java's wait.
    assert!(latch.try_set_count(1).await.unwrap());
    sync_op(
        &mut java,
        "k",
        "latch_await",
        "shared-latch",
        json!({ "wait_ms": 200 }),
    );
    java.expect("latch_timed_out", Some("k"), SOON).await;
    sync_op(&mut java, "k", "latch_await", "shared-latch", json!({}));
    wait_subscribed(&server, channel).await;
    assert!(latch.delete().await.unwrap());
    java.expect("latch_opened", Some("k"), SOON).await;
    assert!(server.keys().await.is_empty());
}

// ---- the address's database ------------------------------------------------

/// Real Redisson on database 3 and this crate configured from the same address
/// `redis://…/3` exclude each other, both ways. Redisson reads no database from
/// the address (only `setDatabase`), so its side is given both; this crate's
/// `Config::new` takes database 3 from the address alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_on_database_3_and_this_crate_on_the_same_address_exclude_each_other() {
    let server = RedisServer::start();
    let address = format!("{}/3", server.url());
    let mut java = JavaDriver::start_on_database(&address, 3, WATCHDOG_30S).await;
    let client = redisson_locks::Client::connect(redisson_locks::Config::new(&address))
        .await
        .unwrap();
    let lock = client.get_lock("db3").unwrap();

    // Java holds it, in database 3: Rust is shut out.
    java.lock("j1", "reentrant", "db3", 0, -1);
    let acquired = java.expect("acquired", Some("j1"), SOON).await;
    let mut db3 = redis::Client::open(address.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let fields: HashMap<String, i64> = db3.hgetall("db3").await.unwrap();
    assert_eq!(fields, HashMap::from([(java_field(&java, &acquired), 1)]));
    assert!(lock.try_lock().await.unwrap().is_none());

    // A waiting Rust task gets it once Java lets go; then Java is shut out.
    let waiter = client.get_lock("db3").unwrap();
    let waiting = tokio::spawn(async move { waiter.lock().await });
    wait_subscribed(&server, &channel("reentrant", "db3")).await;
    java.unlock("j1", "reentrant", "db3");
    java.expect("unlocked", Some("j1"), SOON).await;
    let guard = within(SOON, "the Rust waiter", waiting)
        .await
        .unwrap()
        .unwrap();
    java.lock("j2", "reentrant", "db3", 0, 0);
    java.expect("not_acquired", Some("j2"), SOON).await;
    guard.unlock().await.unwrap();
    java.lock("j2", "reentrant", "db3", 0, 0);
    java.expect("acquired", Some("j2"), SOON).await;
    java.unlock("j2", "reentrant", "db3");
    java.expect("unlocked", Some("j2"), SOON).await;
    assert!(!db3.exists::<_, bool>("db3").await.unwrap());
    assert!(server.keys().await.is_empty(), "nothing in database 0");
}

// ---- the inspector ---------------------------------------------------------

/// What Java Redisson holds reads as what this crate holds: a reentrant lock
/// held twice, a fair lock's queue with a Java and a Rust waiter in order, a
/// read-write lock read by Java and Rust at once, a fenced lock's token, a
/// semaphore, an expirable permit by the id Java printed, and a latch. Java's
/// owners carry no identity; Rust's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_reads_what_java_holds() {
    use redisson_locks::inspect::{HoldMode, Kind};
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;

    java.lock("j1", "reentrant", "ir", 0, -1);
    let acquired = java.expect("acquired", Some("j1"), SOON).await;
    java.lock("j1", "reentrant", "ir", 0, -1);
    java.expect("acquired", Some("j1"), SOON).await;
    let seen = client.inspect("ir").await.unwrap();
    assert_eq!(seen.kind, Kind::Lock);
    let holder = &seen.holders[0];
    assert_eq!(holder.owner.field, java_field(&java, &acquired));
    assert_eq!(holder.owner.client_id, java.client_id);
    assert_eq!(holder.owner.thread, acquired["thread"].to_string());
    assert_eq!(holder.holds, 2);
    assert!(holder.owner.identity.is_none() && !holder.owner.mine);
    let lease = holder.lease_left.unwrap();
    assert!(
        lease > Duration::from_secs(15) && lease <= WATCHDOG_30S,
        "{lease:?}"
    );

    // Fair: Java holds; a Rust waiter, then a Java one, queue behind.
    java.lock("j2", "fair", "if", 0, -1);
    java.expect("acquired", Some("j2"), SOON).await;
    let rust_waiter = {
        let lock = client.get_fair_lock("if").unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await })
    };
    assert!(eventually(SOON, || async { queue_len(&server, "if").await == 1 }).await);
    java.lock("j3", "fair", "if", 0, -1);
    assert!(eventually(SOON, || async { queue_len(&server, "if").await == 2 }).await);
    let seen = client.inspect("if").await.unwrap();
    assert_eq!(seen.kind, Kind::FairLock);
    assert_eq!(seen.holders[0].owner.client_id, java.client_id);
    let queued: Vec<_> = seen
        .queue
        .iter()
        .map(|q| q.owner.client_id.as_str())
        .collect();
    assert_eq!(queued, [client.id(), java.client_id.as_str()]);
    assert!(seen.queue[0].owner.identity.is_some() && seen.queue[1].owner.identity.is_none());
    assert!(seen
        .queue
        .iter()
        .all(|q| q.deadline_in_ms.is_some_and(|d| d > 0)));
    java.unlock("j2", "fair", "if");
    within(SOON, "the Rust fair waiter", rust_waiter)
        .await
        .unwrap()
        .unwrap();
    java.expect("acquired", Some("j3"), SOON).await;
    java.unlock("j3", "fair", "if");
    java.expect("unlocked", Some("j3"), SOON).await;

    // Read-write: a Java reader and a Rust reader at once.
    java.lock("j4", "read", "irw", 0, -1);
    java.expect("acquired", Some("j4"), SOON).await;
    let rust_read = client
        .get_read_write_lock("irw")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let seen = client.inspect("irw").await.unwrap();
    assert_eq!(
        seen.kind,
        Kind::ReadWriteLock {
            mode: "read".into()
        }
    );
    assert_eq!(seen.holders.len(), 2);
    for holder in &seen.holders {
        assert_eq!(
            (holder.mode, holder.holds, holder.read_leases.len()),
            (HoldMode::Read, 1, 1)
        );
        assert!(
            holder.read_leases[0].is_some(),
            "each read hold's own lease"
        );
        let java_side = holder.owner.client_id == java.client_id;
        assert_eq!(holder.owner.identity.is_none(), java_side);
        assert_eq!(holder.owner.mine, !java_side);
    }
    rust_read.unlock().await.unwrap();
    java.unlock("j4", "read", "irw");
    java.expect("unlocked", Some("j4"), SOON).await;

    // Fenced: the token Java drew.
    java.lock("j5", "fenced", "ifc", 0, -1);
    let fenced = java.expect("acquired", Some("j5"), SOON).await;
    let seen = client.inspect("ifc").await.unwrap();
    assert_eq!(seen.kind, Kind::FencedLock);
    assert_eq!(seen.fencing_token, fenced["token"].as_u64());
    java.unlock("j5", "fenced", "ifc");
    java.expect("unlocked", Some("j5"), SOON).await;

    // The synchronizers.
    sync_op(
        &mut java,
        "s",
        "sem_try_set",
        "isem",
        json!({ "permits": 3 }),
    );
    java.expect("sem_set", Some("s"), SOON).await;
    sync_op(
        &mut java,
        "s",
        "sem_acquire",
        "isem",
        json!({ "permits": 1 }),
    );
    java.expect("sem_acquired", Some("s"), SOON).await;
    let seen = client.inspect("isem").await.unwrap();
    assert_eq!((seen.kind, seen.count), (Kind::Counter, Some(2)));
    sync_op(
        &mut java,
        "p",
        "pes_try_set",
        "ipes",
        json!({ "permits": 2 }),
    );
    java.expect("pes_set", Some("p"), SOON).await;
    sync_op(
        &mut java,
        "p",
        "pes_acquire",
        "ipes",
        json!({ "lease_ms": 60_000 }),
    );
    let permit = java.expect("pes_acquired", Some("p"), SOON).await;
    let seen = client.inspect("ipes").await.unwrap();
    assert_eq!(seen.kind, Kind::PermitExpirableSemaphore);
    assert_eq!((seen.count, seen.permits.len()), (Some(1), 1));
    assert_eq!(
        seen.permits[0].id,
        permit["id"].as_str().unwrap().to_lowercase()
    );
    let left = seen.permits[0].lease_left.unwrap();
    assert!(
        left > Duration::from_secs(50) && left <= Duration::from_secs(60),
        "{left:?}"
    );
    sync_op(
        &mut java,
        "l",
        "latch_try_set",
        "ilatch",
        json!({ "count": 4 }),
    );
    java.expect("latch_set", Some("l"), SOON).await;
    let seen = client.inspect("ilatch").await.unwrap();
    assert_eq!((seen.kind, seen.count), (Kind::Counter, Some(4)));

    java.unlock("j1", "reentrant", "ir");
    java.expect("unlocked", Some("j1"), SOON).await;
    java.unlock("j1", "reentrant", "ir");
    java.expect("unlocked", Some("j1"), SOON).await;
    assert_eq!(client.inspect("ir").await.unwrap().kind, Kind::Absent);
}

/// Locks on collections' entries (`getMap(name).getLock(key)` and the rest):
/// for every collection type, key and codec a Rust service can encode without
/// a JVM, every kind's name is the one Redisson derives (JSON keys on
/// Redisson 3.x only: 4.x ships without Jackson).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_lock_names_are_redissons_for_every_collection_key_and_codec() {
    use redisson_locks::EntryKey;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let json = crate::support::java::redisson_version().starts_with("3.");
    let mut keys = vec![
        ("string", "k", "string", EntryKey::string("k")),
        ("string", "über:{x}", "string", EntryKey::string("über:{x}")),
        ("string", "42", "long", EntryKey::string("42")),
    ];
    if json {
        keys.extend([
            ("json", "k", "string", EntryKey::json_string("k")),
            (
                "json",
                "a\"\\\u{1}😀é",
                "string",
                EntryKey::json_string("a\"\\\u{1}😀é"),
            ),
            ("json", "42", "long", EntryKey::json_long(42)),
            ("json", "-7", "int", EntryKey::json_int(-7)),
        ]);
    }
    let mut checked = 0;
    for (collection_type, collection) in [
        ("map", "orders"),
        ("set", "{tag}seats"),
        ("setcache", "sc"),
        ("listmultimap", "lm"),
        ("setmultimap", "sm"),
    ] {
        let rust = match collection_type {
            "map" => client.get_map(collection),
            "set" => client.get_set(collection),
            "setcache" => client.get_set_cache(collection),
            _ => client.get_multimap(collection),
        }
        .unwrap();
        for (codec, key, key_type, entry) in &keys {
            java.op(
                "a",
                "entry_names",
                collection,
                json!({ "collection_type": collection_type, "codec": codec, "key": key, "key_type": key_type }),
            );
            let names = java.expect("entry_names", Some("a"), SOON).await;
            let rw = rust.get_read_write_lock(entry).unwrap();
            let ours = [
                ("lock", rust.get_lock(entry).unwrap().name().to_owned()),
                (
                    "fairlock",
                    rust.get_fair_lock(entry).unwrap().name().to_owned(),
                ),
                ("rw_lock", rw.read_lock().name().to_owned()),
                (
                    "semaphore",
                    rust.get_semaphore(entry).unwrap().name().to_owned(),
                ),
                (
                    "permitexpirablesemaphore",
                    rust.get_permit_expirable_semaphore(entry)
                        .unwrap()
                        .name()
                        .to_owned(),
                ),
                (
                    "countdownlatch",
                    rust.get_count_down_latch(entry).unwrap().name().to_owned(),
                ),
            ];
            for (kind, name) in ours {
                assert_eq!(
                    names[kind].as_str(),
                    Some(name.as_str()),
                    "{collection_type} {collection} {codec} {key:?} {kind}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 5 * keys.len() * 6);
}

/// A Java thread and a Rust task contend on one map entry's lock, and one
/// entry's read-write lock: each sees the other's hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_contend_on_a_map_entrys_locks() {
    use redisson_locks::EntryKey;
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let orders = client.get_map("orders").unwrap();
    let key = EntryKey::string("42");
    let entry = |entry_kind: &str| json!({ "collection_type": "map", "codec": "string", "key": "42", "entry_kind": entry_kind, "lease_ms": 0, "wait_ms": -1 });
    java.act("j", "lock", "entry", "orders", entry("lock"));
    java.expect("acquired", Some("j"), SOON).await;
    let lock = orders.get_lock(&key).unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "Java holds the entry"
    );
    let waiting = tokio::spawn(async move { lock.lock().await.map(|g| (g, Instant::now())) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let unlocked = Instant::now();
    java.act("j", "unlock", "entry", "orders", entry("lock"));
    java.expect("unlocked", Some("j"), SOON).await;
    let (guard, at) = within(SOON, "the Rust waiter", waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(at >= unlocked);
    guard.unlock().await.unwrap();

    // Readers of both languages share the entry's read-write lock; a writer waits.
    java.act("j", "lock", "entry", "orders", entry("read"));
    java.expect("acquired", Some("j"), SOON).await;
    let rw = orders.get_read_write_lock(&key).unwrap();
    let reading = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("a second reader");
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    reading.unlock().await.unwrap();
    java.act("j", "unlock", "entry", "orders", entry("read"));
    java.expect("unlocked", Some("j"), SOON).await;
    assert!(rw.write_lock().try_lock().await.unwrap().is_some());
}

/// A Java head is never granted the lock by a Rust release: a Rust holder
/// whose client has a waiter further back releases, the Java waiter first in
/// line gets its message and takes the lock itself with one hold, and its one
/// `unlock()` frees it for the Rust waiter behind. (A grant behind its back
/// would make Java's own acquire a re-entry, two holds, and its one unlock
/// would leave the lock held for a lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_release_never_grants_a_java_head() {
    let name = "fair-java-head";
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
    java.lock("j", "fair", name, 0, -1);
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 1 }).await);
    // This client's next waiter, behind Java: its head of line, the heir of
    // the release below.
    let lock = client.get_fair_lock(name).unwrap();
    let behind = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
    });
    assert!(eventually(SOON, || async { queue_len(&server, name).await == 2 }).await);
    held.unlock().await.unwrap();
    let acquired = java.expect("acquired", Some("j"), SOON).await;
    let field = java_field(&java, &acquired);
    let mut admin = server.admin().await;
    let fields: HashMap<String, i64> = admin.hgetall(name).await.unwrap();
    assert_eq!(fields, HashMap::from([(field, 1)]), "Java holds it once");
    java.unlock("j", "fair", name);
    java.expect("unlocked", Some("j"), SOON).await;
    within(SOON, "the Rust waiter behind Java", behind)
        .await
        .unwrap();
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// A cycle through a Java `RFairLock` waiter: Java holds `java-holds` and
/// waits in the queue of the fair lock `rust-holds`, which a Rust task holds
/// while it waits for `java-holds`. Java writes no record; the Rust wait's
/// walk finds Java's wait from the fair queue and names the cycle, and under
/// `OnDeadlock::Refuse` the Rust wait (the only one with a record) gives up,
/// its task releases, and Java takes the fair lock once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_a_java_fair_lock_waiter_is_found_from_its_queue() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server
        .client_with(|c| {
            c.deadlock = redisson_locks::OnDeadlock::Refuse;
            c.deadlock_threshold = Duration::from_millis(200);
        })
        .await;
    java.lock("j", "reentrant", "java-holds", 0, -1);
    let acquired = java.expect("acquired", Some("j"), SOON).await;
    let java_owner = java_field(&java, &acquired);
    let (fair, theirs) = (
        client.get_fair_lock("rust-holds").unwrap(),
        client.get_lock("java-holds").unwrap(),
    );
    let (holding, held) = tokio::sync::oneshot::channel();
    let rust = tokio::spawn(async move {
        let guard = fair.lock().await.unwrap();
        let _ = holding.send(());
        let waited = theirs.lock().await;
        guard.unlock().await.unwrap();
        waited.map(drop)
    });
    held.await.unwrap();
    java.lock("j", "fair", "rust-holds", 0, -1);
    assert!(
        eventually(SOON, || async {
            queue_len(&server, "rust-holds").await == 1
        })
        .await
    );
    let refused = within(Duration::from_secs(30), "the Rust side", rust)
        .await
        .unwrap()
        .expect_err("the Rust wait is the victim");
    assert!(refused.is_deadlock(), "{refused}");
    let text = refused.to_string();
    assert!(text.contains("seen in its fair queue"), "{text}");
    assert!(text.contains(&java_owner), "{text}");
    let acquired = java.expect("acquired", Some("j"), SOON).await;
    assert_eq!(java_field(&java, &acquired), java_owner);
    let mut admin = server.admin().await;
    let fields: HashMap<String, i64> = admin.hgetall("rust-holds").await.unwrap();
    assert_eq!(
        fields,
        HashMap::from([(java_owner, 1)]),
        "Java holds it once"
    );
    java.unlock("j", "fair", "rust-holds");
    java.expect("unlocked", Some("j"), SOON).await;
    java.unlock("j", "reentrant", "java-holds");
    java.expect("unlocked", Some("j"), SOON).await;
    assert!(client.deadlocks().is_empty());
    assert_nothing_left_but_latches(&server, &[&client]).await;
}

/// A cycle of three with a Java waiter in the middle: R1 holds `a` and waits
/// for `x`, which Java holds; Java waits in the queue of the fair lock `f`,
/// which R2 holds; R2 waits for `a`. Only R2's walk can see Java's wait (in
/// the queue of a lock R2 holds), so R2 is the victim under `Refuse`, though
/// R1's wait is younger; R2 gives up, Java takes `f`, and R1 waits on behind
/// Java as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_with_a_java_wait_in_the_middle_is_broken_by_the_wait_that_sees_it() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let refusing = |c: &mut redisson_locks::Config| {
        c.deadlock = redisson_locks::OnDeadlock::Refuse;
        c.deadlock_threshold = Duration::from_millis(200);
    };
    let (r1, r2) = (
        server.client_with(refusing).await,
        server.client_with(refusing).await,
    );
    java.lock("j", "reentrant", "x", 0, -1);
    java.expect("acquired", Some("j"), SOON).await;
    // R1: holds a, then (told to) waits for x, in one task.
    let (a, x) = (r1.get_lock("a").unwrap(), r1.get_lock("x").unwrap());
    let (r1_holds, r1_held) = tokio::sync::oneshot::channel();
    let (go, gone) = tokio::sync::oneshot::channel::<()>();
    let first = tokio::spawn(async move {
        let held_a = a.lock().await.unwrap();
        let _ = r1_holds.send(());
        let _ = gone.await;
        let waited = x.lock().await.map(drop);
        held_a.unlock().await.unwrap();
        waited
    });
    r1_held.await.unwrap();
    // R2: holds f, waits for a (the older wait).
    let (f, a2) = (r2.get_fair_lock("f").unwrap(), r2.get_lock("a").unwrap());
    let (holding, held) = tokio::sync::oneshot::channel();
    let second = tokio::spawn(async move {
        let guard = f.lock().await.unwrap();
        let _ = holding.send(());
        let waited = a2.lock().await.map(drop);
        guard.unlock().await.unwrap();
        waited
    });
    held.await.unwrap();
    java.lock("j", "fair", "f", 0, -1);
    assert!(eventually(SOON, || async { queue_len(&server, "f").await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // R1's wait for x begins last: the youngest on the cycle.
    go.send(()).unwrap();
    let refused = within(Duration::from_secs(30), "R2's wait", second)
        .await
        .unwrap()
        .expect_err("R2 sees the cycle and is its victim");
    assert!(refused.is_deadlock(), "{refused}");
    java.expect("acquired", Some("j"), SOON).await;
    java.unlock("j", "fair", "f");
    java.expect("unlocked", Some("j"), SOON).await;
    java.unlock("j", "reentrant", "x");
    java.expect("unlocked", Some("j"), SOON).await;
    within(Duration::from_secs(30), "R1's wait", first)
        .await
        .unwrap()
        .expect("R1 takes x once Java lets go");
    assert_nothing_left_but_latches(&server, &[&r1, &r2]).await;
}
