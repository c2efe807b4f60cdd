//! Dropping a lock future at any point leaves no hold, subscription or renewal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{assert_nothing_left, eventually, within, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_abandoned_lock_calls_leave_nothing_behind() {
    let server = RedisServer::start();
    let holder_client = server.client().await;
    let client = server.client().await;
    let stop = Arc::new(AtomicBool::new(false));

    // Others hold and release all along.
    let churn = tokio::spawn({
        let lock = holder_client.get_lock("contested").unwrap();
        let stop = stop.clone();
        async move {
            while !stop.load(Ordering::Relaxed) {
                let g = lock.lock().await.unwrap();
                tokio::time::sleep(Duration::from_micros(300)).await;
                g.unlock().await.unwrap();
            }
        }
    });

    let lock = client.get_lock("contested").unwrap();
    let mut acquired = 0;
    let mut abandoned = 0;
    within(Duration::from_secs(120), "1000 cancelled attempts", async {
        for i in 0..1000u64 {
            // Timeouts from 0 to ~1 ms cut the call at every stage: before the
            // script is sent, while it runs, while subscribing, while sleeping.
            let limit = Duration::from_micros((i * 7919) % 1200);
            match tokio::time::timeout(limit, lock.lock()).await {
                Ok(guard) => {
                    acquired += 1;
                    guard.unwrap().unlock().await.unwrap();
                }
                Err(_) => abandoned += 1,
            }
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    churn.await.unwrap();
    assert!(abandoned > 100, "only {abandoned} attempts were cut short");
    let _ = acquired;

    assert_nothing_left(&server, &[&client]).await;
    assert_eq!(holder_client.renewed_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_waiting_task_leaves_nothing_behind() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let held = a.get_lock("aborted").unwrap().lock().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..10 {
        let lock = b.get_lock("aborted").unwrap();
        waiters.push(tokio::spawn(async move { lock.lock().await }));
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_lock__channel:{aborted}").await == 1
        })
        .await
    );
    for w in &waiters {
        w.abort();
    }
    for w in waiters {
        assert!(w.await.unwrap_err().is_cancelled());
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
    assert_eq!(b.subscribed_channels(), 0);
    assert_eq!(b.renewed_holds(), 0);
    held.unlock().await.unwrap();
    let again = within(
        Duration::from_secs(5),
        "lock after aborts",
        b.get_lock("aborted").unwrap().lock(),
    )
    .await
    .unwrap();
    again.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_fair_lock_calls_leave_no_queue_entries() {
    let server = RedisServer::start();
    let holder_client = server.client().await;
    let client = server.client().await;
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn({
        let lock = holder_client.get_fair_lock("fair-contested").unwrap();
        let stop = stop.clone();
        async move {
            while !stop.load(Ordering::Relaxed) {
                let g = lock.lock().await.unwrap();
                tokio::time::sleep(Duration::from_micros(300)).await;
                g.unlock().await.unwrap();
            }
        }
    });
    // Spawned, so that each call is its own owner (its own place in line).
    let mut abandoned = 0;
    within(
        Duration::from_secs(120),
        "300 cancelled fair attempts",
        async {
            for i in 0..300u64 {
                let lock = client.get_fair_lock("fair-contested").unwrap();
                let limit = Duration::from_micros((i * 7919) % 1500);
                let outcome = tokio::spawn(async move {
                    match tokio::time::timeout(limit, lock.lock()).await {
                        Ok(guard) => {
                            guard.unwrap().unlock().await.unwrap();
                            false
                        }
                        Err(_) => true,
                    }
                })
                .await
                .unwrap();
                abandoned += usize::from(outcome);
            }
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    churn.await.unwrap();
    assert!(abandoned > 30, "only {abandoned} attempts were cut short");
    assert_nothing_left(&server, &[&client]).await;
}
