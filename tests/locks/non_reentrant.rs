//! The non-reentrant locks: an owner asking again for a lock it holds is refused
//! at once; every other owner waits as for the reentrant and the fair lock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, RLock};

use crate::support::exclusion::Exclusion;
use crate::support::fair::queue_len;
use crate::support::{assert_nothing_left, eventually, within, RedisServer};

const T: Duration = Duration::from_secs(10);

fn both_kinds(client: &Client, name: &str) -> [RLock; 2] {
    [
        client
            .get_non_reentrant_lock(format!("{name}-plain"))
            .unwrap(),
        client
            .get_non_reentrant_fair_lock(format!("{name}-fair"))
            .unwrap(),
    ]
}

/// The same owner asking again, however it asks (inside the hold's scope, or as
/// the same task in task-owner mode, waiting or trying once), is refused at once;
/// the hold is untouched and no queue place is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_asking_again_is_refused_at_once() {
    let server = RedisServer::start();
    let client = server.client().await;
    for lock in both_kinds(&client, "again") {
        let guard = lock.lock().await.unwrap();
        let field = format!("{}:{}", client.id(), guard.owner_id());
        for attempt in 0..3 {
            let refused = within(Duration::from_secs(2), "re-entry refusal", async {
                match attempt {
                    0 => guard.scope(lock.lock()).await.map(|_| ()),
                    1 => guard
                        .scope(lock.try_lock_wait(Duration::from_secs(5)))
                        .await
                        .map(|_| ()),
                    _ => guard.scope(lock.try_lock()).await.map(|_| ()),
                }
            })
            .await
            .unwrap_err();
            assert!(refused.is_already_held(), "{}: {refused:?}", lock.name());
            assert!(!refused.is_transient());
        }
        let mut admin = server.admin().await;
        let count: Option<u64> = admin.hget(lock.name(), &field).await.unwrap();
        assert_eq!(count, Some(1), "{}: the hold count changed", lock.name());
        assert_eq!(queue_len(&server, lock.name()).await, 0);
        assert!(!guard.is_lease_lost());
        guard.unlock().await.unwrap();

        // Java-style: the task is the owner, inline.
        let by_task = lock.with_task_owner();
        let held = by_task.lock().await.unwrap();
        let refused = within(T, "task re-entry", by_task.lock())
            .await
            .unwrap_err();
        assert!(refused.is_already_held(), "{refused:?}");
        held.unlock().await.unwrap();
    }
    assert_nothing_left(&server, &[&client]).await;
}

/// Other owners exclude each other and wait as usual: 8 tasks over 2 clients, 20
/// grants each, a non-atomic counter in Redis, on both kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_owners_wait_and_exclude_each_other() {
    let server = RedisServer::start();
    let clients = [server.client().await, server.client().await];
    for kind in 0..2 {
        let exclusion = Arc::new(Exclusion::default());
        let mut tasks = Vec::new();
        for task in 0..8 {
            let client = clients[task % 2].clone();
            let url = server.url();
            let exclusion = exclusion.clone();
            tasks.push(tokio::spawn(async move {
                let lock = both_kinds(&client, "exclusive")[kind].clone();
                let counter = format!("{}-counter", lock.name());
                let mut conn = redis::Client::open(url)
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                for _ in 0..20 {
                    let guard = lock.lock().await.unwrap();
                    let inside = exclusion.enter();
                    assert_eq!(exclusion.overlaps(), 0, "two inside");
                    let value: Option<u64> = conn.get(&counter).await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = conn.set(&counter, value.unwrap_or(0) + 1).await.unwrap();
                    drop(inside);
                    guard.unlock().await.unwrap();
                }
                counter
            }));
        }
        let mut counter = String::new();
        for task in tasks {
            counter = within(Duration::from_secs(60), "contenders", task)
                .await
                .unwrap();
        }
        let mut admin = server.admin().await;
        let total: u64 = admin.get(&counter).await.unwrap();
        assert_eq!(total, 160);
        let _: () = admin.del(&counter).await.unwrap();
    }
    assert_nothing_left(&server, &[&clients[0], &clients[1]]).await;
}

/// The fair variant still serves waiters in arrival order, and a cancelled
/// waiter leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fair_variant_keeps_order_and_cancellation_leaves_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let holder = server.client().await;
    let name = "nr-fair";
    let held = holder
        .get_non_reentrant_fair_lock(name)
        .unwrap()
        .lock()
        .await
        .unwrap();
    // A waiter that gives up in the middle of the line.
    let lock = client.get_non_reentrant_fair_lock(name).unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(5), lock.lock())
        .await
        .is_err());
    assert!(
        eventually(T, || async { queue_len(&server, name).await == 0 }).await,
        "the cancelled waiter kept its place"
    );
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..3usize {
        let lock = client.get_non_reentrant_fair_lock(name).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        assert!(
            eventually(T, || async { queue_len(&server, name).await == i + 1 }).await,
            "waiter {i} did not join the line"
        );
    }
    held.unlock().await.unwrap();
    for waiter in waiters {
        within(T, "fair waiters", waiter).await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert_nothing_left(&server, &[&client, &holder]).await;
}
