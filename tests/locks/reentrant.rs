//! The reentrant lock's core behaviour.

use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::RemainingTtl;

use crate::support::{within, RedisServer};

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holds_count_up_and_down_and_exclude_others() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other_client = server.client().await;
    // Java's rule (the task is the owner): inline nesting re-enters. The default
    // rule, nesting through scopes, is in `siblings.rs`.
    let lock = client.get_lock("nested").unwrap().with_task_owner();
    let same_name = client.get_lock("nested").unwrap().with_task_owner();

    within(T, "nested holds", async {
        let g1 = lock.lock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 1);
        let g2 = lock.lock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        // A second handle for the same name, same task: re-enters too.
        let g3 = same_name.lock().await.unwrap();
        assert_eq!(same_name.hold_count().await.unwrap(), 3);
        assert!(lock.is_held_by_current_task().await.unwrap());

        // Another task of the same client is another owner.
        let contender = lock.clone();
        let taken = tokio::spawn(async move { contender.try_lock().await.unwrap().is_some() })
            .await
            .unwrap();
        assert!(!taken, "another task took a held lock");
        // So is a task of another client.
        let foreign = other_client.get_lock("nested").unwrap();
        assert!(foreign.try_lock().await.unwrap().is_none());
        assert!(!foreign.is_held_by_current_task().await.unwrap());

        g3.unlock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        g2.unlock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 1);
        assert!(lock.is_locked().await.unwrap());
        g1.unlock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 0);
        assert!(!lock.is_locked().await.unwrap());

        // Free now: the other client gets it at once.
        let g = foreign.try_lock().await.unwrap().expect("free lock");
        g.unlock().await.unwrap();
    })
    .await;
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_keeps_a_non_atomic_counter_exact() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let mut tasks = Vec::new();
    for i in 0..100 {
        let lock = clients[i % 4].get_lock("counter-lock").unwrap();
        let mut conn = server.admin().await;
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            // Read, pause, write: any overlap loses an increment.
            let value: Option<i64> = conn.get("counter").await.unwrap();
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
            let _: () = conn.set("counter", value.unwrap_or(0) + 1).await.unwrap();
            guard.unlock().await.unwrap();
        }));
    }
    within(Duration::from_secs(60), "100 tasks", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    let mut admin = server.admin().await;
    let count: i64 = admin.get("counter").await.unwrap();
    assert_eq!(count, 100);
    let _: () = admin.del("counter").await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_lets_another_owner_in_and_fails_the_late_unlock() {
    let server = RedisServer::start();
    let first = server.client().await;
    let second = server.client().await;
    let lock = first.get_lock("lease").unwrap();
    // Timed from before the lease is taken: it ends no sooner than a second after
    // this, however slowly the checks below go.
    let started = tokio::time::Instant::now();
    let guard = lock.lock_with_lease(Duration::from_secs(1)).await.unwrap();
    match lock.remain_time_to_live().await.unwrap() {
        RemainingTtl::Expires(ttl) => assert!(ttl <= Duration::from_secs(1)),
        other => panic!("unexpected ttl {other:?}"),
    }
    assert!(!guard.is_lease_lost());

    let theirs = within(T, "second client waits out the lease", async {
        second.get_lock("lease").unwrap().lock().await.unwrap()
    })
    .await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "got in after {waited:?}"
    );
    assert!(guard.is_lease_lost());

    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    // The late unlock left the new owner's hold alone.
    assert!(second.get_lock("lease").unwrap().is_locked().await.unwrap());
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_releases_from_another_task() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("handoff").unwrap().with_owner_id(4242);
    let guard = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    assert_eq!(guard.owner_id(), 4242);
    assert!(lock.is_held_by(4242).await.unwrap());
    // The field is Redisson's: <client-uuid>:<id>.
    let mut admin = server.admin().await;
    let count: i64 = admin
        .hget("handoff", format!("{}:4242", client.id()))
        .await
        .unwrap();
    assert_eq!(count, 1);
    // Re-entry by the same explicit owner from yet another task.
    let again = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock().await.unwrap() }
    })
    .await
    .unwrap()
    .expect("same explicit owner re-enters");
    again.unlock().await.unwrap();
    // Released from this task, which is not the acquiring one.
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_style_lock_then_unlock_through_the_handle() {
    let server = RedisServer::start();
    let client = server.client().await;
    // Redisson's rule: the calling task is the owner, as a thread is in Java.
    let lock = client.get_lock("java-style").unwrap().with_task_owner();
    lock.lock().await.unwrap().detach();
    lock.lock().await.unwrap().detach();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(client.renewed_holds(), 1);
    lock.unlock().await.unwrap();
    lock.unlock().await.unwrap();
    assert_eq!(client.renewed_holds(), 0);
    let err = lock.unlock().await.unwrap_err();
    assert!(err.is_not_held());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_guard_releases_the_hold() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("dropped").unwrap();
    {
        let _guard = lock.lock().await.unwrap();
        assert!(lock.is_locked().await.unwrap());
    }
    let other = server.client().await;
    let theirs = within(T, "lock after guard drop", async {
        other.get_lock("dropped").unwrap().lock().await.unwrap()
    })
    .await;
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_any_owner_and_reports_loss_to_local_holders() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let admin_client = server.client().await;
    let lock = holder.get_lock("forced").unwrap();
    let guard = lock.lock().await.unwrap();
    let _nested = guard.scope(lock.lock()).await.unwrap();
    let by_admin = admin_client.get_lock("forced").unwrap();
    assert!(by_admin.force_unlock().await.unwrap());
    assert!(!by_admin.force_unlock().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(
        by_admin.remain_time_to_live().await.unwrap(),
        RemainingTtl::NotLocked
    );
    // The holder's client force-unlocking its own lock marks its guards lost.
    let g = lock.lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(g.is_lease_lost());
    within(T, "lease_lost", g.lease_lost()).await;
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_wait_gives_up_after_the_wait() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let held = a.get_lock("busy").unwrap().lock().await.unwrap();
    let lock = b.get_lock("busy").unwrap();
    let started = tokio::time::Instant::now();
    let got = within(
        T,
        "try_lock_wait",
        lock.try_lock_wait(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    assert!(got.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(1))
        .await
        .unwrap()
        .is_none());
    // The waiter left nothing behind: no subscription, no renewal.
    assert_eq!(b.subscribed_channels(), 0);
    assert_eq!(b.renewed_holds(), 0);
    held.unlock().await.unwrap();
    let g = lock
        .try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free now");
    assert_eq!(b.renewed_holds(), 0, "an explicit lease is not renewed");
    g.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// Eventual fairness without a queue in Redis: a task that releases the lock
/// and at once asks again goes behind the task of its client already waiting,
/// and a client whose release woke another client's waiter lets that waiter in
/// first. Before, the releaser re-won nearly every time (it asks within
/// microseconds; the woken waiter needs a message and a round trip). Counted
/// over 20 rounds each, with a wide margin for a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_releaser_asking_again_goes_behind_the_woken_waiter() {
    const ROUNDS: usize = 20;
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    for (case, waiter_client) in [("same client", &a), ("other client", &b)] {
        let name = format!("handoff-{}", case.replace(' ', "-"));
        let mut waiter_first = 0;
        for _ in 0..ROUNDS {
            let releaser = a.get_lock(name.clone()).unwrap();
            let held = releaser.lock().await.unwrap();
            let waiter = waiter_client.get_lock(name.clone()).unwrap();
            let (tx, mut rx) = tokio::sync::oneshot::channel();
            let waiting = tokio::spawn(async move {
                let guard = waiter.lock().await.unwrap();
                let _ = tx.send(());
                tokio::time::sleep(Duration::from_millis(2)).await;
                guard.unlock().await.unwrap();
            });
            // The waiter listens (its first attempt failed).
            assert!(
                crate::support::eventually(T, || async {
                    server
                        .subscribers(&format!("redisson_lock__channel:{{{name}}}"))
                        .await
                        >= 1
                })
                .await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
            held.unlock().await.unwrap();
            let again = releaser.lock().await.unwrap();
            // The waiter went first if it had the lock before ours came back.
            if rx.try_recv().is_ok() {
                waiter_first += 1;
            }
            again.unlock().await.unwrap();
            within(T, "the waiter", waiting).await.unwrap();
        }
        assert!(
            waiter_first * 2 >= ROUNDS,
            "{case}: the woken waiter went first in only {waiter_first} of {ROUNDS} rounds"
        );
    }
}
