//! The spin lock: no channel, no message; waiters back off and retry.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{BackOff, Client, Config};

use crate::support::exclusion::Exclusion;
use crate::support::{eventually, within, RedisServer, LATE};

const T: Duration = Duration::from_secs(30);

async fn contend(clients: Vec<Client>, url: String, name: &'static str) -> u64 {
    let exclusion = Arc::new(Exclusion::default());
    let mut tasks = Vec::new();
    for task in 0..8 {
        let client = clients[task % clients.len()].clone();
        let (url, exclusion) = (url.clone(), exclusion.clone());
        tasks.push(tokio::spawn(async move {
            let lock = client.get_spin_lock(name).unwrap();
            let mut conn = redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            for _ in 0..20 {
                let guard = lock.lock().await.unwrap();
                let inside = exclusion.enter();
                assert_eq!(exclusion.overlaps(), 0, "two inside");
                let value: Option<u64> = conn.get("spin-counter").await.unwrap();
                tokio::task::yield_now().await;
                let _: () = conn
                    .set("spin-counter", value.unwrap_or(0) + 1)
                    .await
                    .unwrap();
                drop(inside);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(T, "spin contenders", task).await.unwrap();
    }
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    conn.get("spin-counter").await.unwrap()
}

/// 8 tasks over 2 clients, 20 grants each: a non-atomic counter stays exact, and
/// nobody ever subscribes to anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_excludes_without_any_channel() {
    let server = RedisServer::start();
    let clients = vec![server.client().await, server.client().await];
    let total = contend(clients.clone(), server.url(), "spinning").await;
    assert_eq!(total, 160);
    assert_eq!(server.command_calls("subscribe").await, 0);
    assert_eq!(server.command_calls("publish").await, 0);
    for client in &clients {
        assert_eq!(client.subscribed_channels(), 0);
    }
    let keys = server.keys().await;
    assert_eq!(
        keys,
        vec!["spin-counter".to_owned()],
        "left behind: {keys:?}"
    );
}

/// A user whose ACL grants no channel at all can use the spin lock fully
/// (contended waits and releases included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_works_for_a_user_without_channels() {
    let server = RedisServer::start();
    let mut admin = server.admin().await;
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "spinner",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut config =
        Config::from_url(&format!("redis://spinner:pw@127.0.0.1:{}", server.port())).unwrap();
    config.timeout = Duration::from_secs(2);
    let a = Client::connect(config.clone()).await.unwrap();
    let b = Client::connect(config).await.unwrap();
    let total = contend(vec![a, b], server.url(), "acl-spin").await;
    assert_eq!(total, 160);
}

/// Waits are bounded; a timed try gives up on time; watchdog and explicit leases
/// work; cancellation leaves nothing; a bad back-off is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_lock_waits_leases_and_cancellation() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let holder = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let other = server.client().await;
    let held = holder.get_spin_lock("spun").unwrap().lock().await.unwrap();
    let lock = other
        .get_spin_lock_with_backoff("spun", BackOff::Constant(Duration::from_millis(20)))
        .unwrap();
    // Renewed for three leases: the spinner never gets in.
    let started = tokio::time::Instant::now();
    assert!(lock.try_lock_wait(watchdog * 3).await.unwrap().is_none());
    assert!(started.elapsed() >= watchdog * 3);
    assert!(
        started.elapsed() < watchdog * 3 + LATE,
        "{:?}",
        started.elapsed()
    );
    assert!(!held.is_lease_lost());
    // Cancelled waits leave nothing.
    for i in 0..100u64 {
        let _ = tokio::time::timeout(Duration::from_micros(i * 50), lock.lock()).await;
    }
    held.unlock().await.unwrap();
    let guard = within(T, "spinner after release", lock.lock())
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    // An explicit lease ends by itself and lets the spinner in.
    let short = holder
        .get_spin_lock("spun")
        .unwrap()
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let guard = within(
        Duration::from_secs(10),
        "spinner after the lease",
        lock.lock(),
    )
    .await
    .unwrap();
    guard.unlock().await.unwrap();
    assert!(short.unlock().await.unwrap_err().is_not_held());
    assert!(
        eventually(Duration::from_secs(3), || async {
            server.keys().await.is_empty()
        })
        .await,
        "left behind: {:?}",
        server.keys().await
    );
    assert_eq!(other.renewed_holds(), 0);
    let bad = BackOff::Constant(Duration::ZERO);
    assert!(other
        .get_spin_lock_with_backoff("x", bad)
        .unwrap_err()
        .is_invalid_argument());
}
