//! Sentinel: the client finds the primary, and follows a failover with a lock held
//! and waiters waiting.

use std::time::Duration;

use redisson_locks::Client;

use crate::support::sentinel::SentinelSetup;
use crate::support::{all_acquired, eventually, spawn_failover_waiters, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_a_sentinel_failover_with_a_lock_held_and_three_waiters() {
    let mut setup = SentinelSetup::start().await;
    let mut config = setup.config();
    config.lock_watchdog_timeout = Duration::from_secs(2);
    // The new primary will have no replica left: do not require one.
    config.replica_sync = Some(0);
    let holder = Client::connect(config.clone()).await.unwrap();
    let waiters = Client::connect(config).await.unwrap();

    let guard = holder.get_lock("sentinel").unwrap().lock().await.unwrap();
    assert_eq!(
        setup.primary.keys().await,
        vec!["sentinel".to_owned()],
        "not on the primary"
    );
    let tasks = spawn_failover_waiters(&waiters.get_lock("sentinel").unwrap(), 3);
    assert!(
        eventually(Duration::from_secs(20), || async {
            waiters.waiting_for("sentinel") == 3
        })
        .await,
        "the waiters are not waiting"
    );
    let old = setup.primary.port();
    setup.primary.kill();
    assert!(
        eventually(Duration::from_secs(20), || async {
            setup.reported_primary() == Some(setup.replica.port())
        })
        .await,
        "the sentinels did not fail over"
    );
    assert_ne!(setup.reported_primary(), Some(old));
    let _ = within(Duration::from_secs(30), "holder unlock", guard.unlock()).await;
    let all = all_acquired(tasks).await;
    assert!(all, "a waiter gave up");
    // New holds land on the new primary, and renewals keep them there.
    let g = within(
        Duration::from_secs(30),
        "lock after failover",
        holder.get_lock("after").unwrap().lock(),
    )
    .await
    .unwrap();
    assert!(setup.replica.keys().await.contains(&"after".to_owned()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!g.is_lease_lost(), "renewal did not follow the failover");
    g.unlock().await.unwrap();
}
