//! The count-down latch (`RCountDownLatch`) on Redisson's layout.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::{eventually, gives_up_on_time, within, RedisServer, SYNC_RECHECK};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiters_across_clients_wake_at_the_last_count_down() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let latch = clients[0].get_count_down_latch("start").unwrap();
    assert!(latch.try_set_count(3).await.unwrap());

    let mut waiters = Vec::new();
    for i in 0..20 {
        let latch = clients[i % 4].get_count_down_latch("start").unwrap();
        waiters.push(tokio::spawn(async move {
            latch.wait().await.unwrap();
            Instant::now()
        }));
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server
                .subscribers("redisson_countdownlatch__channel__{start}")
                .await
                == 4
        })
        .await,
        "one subscription per client"
    );
    for client in &clients {
        assert_eq!(client.subscribed_channels(), 1);
    }
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "opened early");
    let last = Instant::now();
    latch.count_down().await.unwrap();
    let mut slowest = Duration::ZERO;
    within(Duration::from_secs(10), "20 waiters", async {
        for w in waiters {
            slowest = slowest.max(w.await.unwrap().saturating_duration_since(last));
        }
    })
    .await;
    eprintln!("20 waiters over 4 clients: the last woke {slowest:?} after the last count-down");
    // Woken by the message, not by a recheck.
    assert!(slowest < SYNC_RECHECK / 2, "{slowest:?}");
    assert!(server.keys().await.is_empty(), "an open latch has no key");
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_wait_returns_false_on_time() {
    let server = RedisServer::start();
    let client = server.client().await;
    let latch = client.get_count_down_latch("slow").unwrap();
    latch.try_set_count(1).await.unwrap();
    let wait = Duration::from_millis(300);
    gives_up_on_time(wait, async { latch.wait_timeout(wait).await.unwrap() }).await;
    latch.count_down().await.unwrap();
    // Open: the first check lets it in (the wait is only a bound).
    assert!(latch.wait_timeout(Duration::from_secs(5)).await.unwrap());
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_follows_redissons_rules() {
    let server = RedisServer::start();
    let client = server.client().await;
    let latch = client.get_count_down_latch("rules").unwrap();
    let mut admin = server.admin().await;

    // Open until set; counting down an open latch changes nothing.
    assert_eq!(latch.count().await.unwrap(), 0);
    latch.count_down().await.unwrap();
    assert!(server.keys().await.is_empty());
    assert!(latch.wait_timeout(Duration::from_millis(1)).await.unwrap());

    assert!(latch.try_set_count(2).await.unwrap());
    assert!(
        !latch.try_set_count(5).await.unwrap(),
        "set only while open"
    );
    let raw: String = admin.get("rules").await.unwrap();
    assert_eq!(raw, "2");
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 1);

    // Deleting opens it and wakes the waiters.
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            server
                .subscribers("redisson_countdownlatch__channel__{rules}")
                .await
                == 1
        })
        .await
    );
    assert!(latch.delete().await.unwrap());
    within(Duration::from_secs(2), "the waiter after delete", waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(!latch.delete().await.unwrap());

    assert!(latch
        .try_set_count(0)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(latch
        .try_set_count(u64::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
}
