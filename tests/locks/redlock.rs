//! RedLock over 5 independent servers: quorum, dead and frozen servers, validity.

use std::sync::Arc;
use std::time::Duration;

use redisson_locks::{Client, RedLock};

use crate::support::exclusion::Exclusion;
use crate::support::{eventually, within, RedisServer, LATE};

const T: Duration = Duration::from_secs(30);

async fn five() -> (Vec<RedisServer>, Vec<Client>) {
    let servers: Vec<RedisServer> = (0..5).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(server.client().await);
    }
    (servers, clients)
}

fn red(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.get_lock(name).unwrap()).collect()).unwrap()
}

/// Two servers down: a quorum of three still grants it; three down: a timed try
/// fails cleanly within its wait and leaves nothing on the living.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_survives_two_dead_servers_but_not_three() {
    let (mut servers, clients) = five().await;
    let lease = Duration::from_secs(5);
    servers[3].kill();
    servers[4].kill();
    let lock = red(&clients, "quorum");
    assert_eq!(lock.quorum(), 3);
    let guard = within(
        T,
        "RedLock with 2 dead",
        lock.try_lock_with_lease(Duration::from_secs(3), lease),
    )
    .await
    .unwrap()
    .expect("a quorum of 3 is up");
    assert_eq!(guard.granted(), 3);
    let left = guard.valid_for().unwrap();
    assert!(left <= lease, "validity {left:?} above the lease");
    guard.unlock().await.unwrap();

    servers[2].kill();
    let wait = Duration::from_secs(1);
    let started = tokio::time::Instant::now();
    let none = within(
        T,
        "RedLock with 3 dead",
        lock.try_lock_with_lease(wait, lease),
    )
    .await
    .unwrap();
    assert!(none.is_none());
    assert!(
        started.elapsed() < wait + LATE,
        "took {:?}",
        started.elapsed()
    );
    for server in &servers[..2] {
        assert!(
            eventually(Duration::from_secs(3), || async {
                server.keys().await.is_empty()
            })
            .await,
            "left on a living server: {:?}",
            server.keys().await
        );
    }
}

/// One server frozen past the lease while two holders contend: never two inside
/// while their holds are valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_never_lets_two_holders_in() {
    let (servers, clients_a) = five().await;
    let mut clients_b = Vec::new();
    for server in &servers {
        clients_b.push(server.client().await);
    }
    servers[0].pause();
    let exclusion = Arc::new(Exclusion::default());
    let mut tasks = Vec::new();
    for clients in [clients_a, clients_b] {
        let exclusion = exclusion.clone();
        tasks.push(tokio::spawn(async move {
            let lock = red(&clients, "frozen");
            for _ in 0..5 {
                let guard = lock.lock_with_lease(Duration::from_secs(2)).await.unwrap();
                assert!(guard.granted() >= 3);
                assert!(guard.valid_for().is_some());
                let inside = exclusion.enter();
                assert_eq!(exclusion.overlaps(), 0, "two holders inside");
                tokio::time::sleep(Duration::from_millis(30)).await;
                assert!(guard.valid_for().is_some(), "held past its validity");
                drop(inside);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(Duration::from_secs(60), "RedLock contenders", task)
            .await
            .unwrap();
    }
    servers[0].resume();
}

/// Validity is never above the lease and runs out with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_is_never_above_the_lease_and_runs_out() {
    let (_servers, clients) = five().await;
    let lease = Duration::from_millis(600);
    let lock = red(&clients, "validity");
    let guard = lock
        .try_lock_with_lease(Duration::from_secs(1), lease)
        .await
        .unwrap()
        .expect("free");
    assert_eq!(guard.granted(), 5);
    assert!(guard.valid_for().unwrap() <= lease);
    tokio::time::sleep(lease).await;
    assert!(guard.is_lease_lost());
    assert_eq!(guard.valid_for(), None);
    assert!(RedLock::new(Vec::new()).unwrap_err().is_invalid_argument());
}

/// A lease at or below the clock-drift margin can never be surely valid: it is
/// refused at once (before: `lock_with_lease(2 ms)` went round for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_is_all_drift_margin_is_refused_at_once() {
    let (_servers, clients) = five().await;
    let lock = red(&clients, "too-short");
    for lease in [Duration::from_millis(1), Duration::from_millis(2)] {
        let err = within(
            Duration::from_secs(20),
            "lock_with_lease",
            lock.lock_with_lease(lease),
        )
        .await
        .unwrap_err();
        assert!(err.is_invalid_argument(), "{err:?}");
        let err = lock
            .try_lock_with_lease(Duration::from_secs(1), lease)
            .await
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{err:?}");
    }
    // A short lease with validity left still works.
    let guard = lock
        .try_lock_with_lease(Duration::from_secs(5), Duration::from_millis(500))
        .await
        .unwrap()
        .expect("free");
    guard.unlock().await.unwrap();
}
