//! Bad input and unreachable servers: typed errors, no hang, nothing left behind.

use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, Config, Error, MAX_DURATION, MAX_NAME_LEN};

use crate::support::{eventually, within, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_are_refused_before_any_io() {
    let server = RedisServer::start();
    let client = server.client().await;
    assert!(matches!(
        client.get_lock(""),
        Err(Error::InvalidArgument(_))
    ));
    assert!(client
        .get_lock("x".repeat(MAX_NAME_LEN + 1))
        .unwrap_err()
        .is_invalid_argument());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_and_absurd_durations_are_refused() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("durations").unwrap();
    server.reset_stats().await;
    let zero = lock.lock_with_lease(Duration::ZERO).await.unwrap_err();
    assert!(zero.is_invalid_argument(), "{zero}");
    assert!(lock
        .lock_with_lease(Duration::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .lock_with_lease(MAX_DURATION + Duration::from_millis(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .try_lock_wait(Duration::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .try_lock_with_lease(Duration::from_secs(1), Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(
        server.command_calls("evalsha").await,
        0,
        "bad input reached the server"
    );
    assert_eq!(client.renewed_holds(), 0);
    assert!(server.keys().await.is_empty());

    // A sub-millisecond lease rounds up instead of deleting the key at once.
    let g = lock
        .lock_with_lease(Duration::from_micros(500))
        .await
        .unwrap();
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_by_a_non_owner_fails_and_leaves_the_owner_alone() {
    let server = RedisServer::start();
    let owner = server.client().await;
    let stranger = server.client().await;
    let guard = owner.get_lock("mine").unwrap().lock().await.unwrap();
    let before: i64 = server.admin().await.pttl("mine").await.unwrap();

    let err = stranger
        .get_lock("mine")
        .unwrap()
        .unlock()
        .await
        .unwrap_err();
    match &err {
        Error::NotHeld { name, owner: field } => {
            assert_eq!(name, "mine");
            assert!(field.starts_with(stranger.id()));
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    // Another task of the owner's own client is a non-owner too.
    let same_client = owner.get_lock("mine").unwrap();
    let err = tokio::spawn(async move { same_client.unlock().await })
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_not_held());

    let mut admin = server.admin().await;
    let count: i64 = admin
        .hget("mine", format!("{}:{}", owner.id(), guard.owner_id()))
        .await
        .unwrap();
    assert_eq!(count, 1);
    let after: i64 = admin.pttl("mine").await.unwrap();
    assert!(
        after <= before && after > before - 5_000,
        "TTL changed: {before} -> {after}"
    );
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_is_a_wrong_type_error() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let _: () = admin.set("occupied", "a string").await.unwrap();
    let lock = client.get_lock("occupied").unwrap();
    let err = within(Duration::from_secs(5), "lock on a string key", lock.lock())
        .await
        .unwrap_err();
    assert!(err.is_wrong_type(), "{err:?}");
    assert!(lock.hold_count().await.unwrap_err().is_wrong_type());
    assert!(lock.try_lock().await.unwrap_err().is_wrong_type());
    assert_eq!(client.renewed_holds(), 0);
    assert_eq!(client.subscribed_channels(), 0);
    let value: String = admin.get("occupied").await.unwrap();
    assert_eq!(value, "a string", "the foreign key was touched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_redis_error_not_a_hang() {
    let server = RedisServer::start_with(&["--requirepass", "right"]);
    let mut config = server.config();
    config.password = Some("wrong".into());
    let err = within(Duration::from_secs(10), "connect", Client::connect(config))
        .await
        .unwrap_err();
    assert!(err.is_redis(), "{err:?}");
    assert!(
        !err.is_transient(),
        "authentication failure treated as transient: {err:?}"
    );

    let mut config = server.config();
    config.password = Some("right".into());
    let client = Client::connect(config).await.unwrap();
    let g = client.get_lock("auth").unwrap().lock().await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_connect_timeout() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = Config::new(format!("redis://127.0.0.1:{port}"));
    config.connect_timeout = Duration::from_secs(1);
    let started = std::time::Instant::now();
    let err = within(Duration::from_secs(10), "connect", Client::connect(config))
        .await
        .unwrap_err();
    assert!(err.is_redis(), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_under_a_waiter_yields_an_error_not_a_hang() {
    let mut server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let _held = other.get_lock("doomed").unwrap().lock().await.unwrap();
    let lock = client.get_lock("doomed").unwrap();
    let waiting = tokio::spawn(async move { lock.lock().await });
    assert!(
        eventually(Duration::from_secs(10), || async {
            client.waiting_for("doomed") == 1
        })
        .await,
        "the waiter is not waiting"
    );
    server.kill();
    let result = within(Duration::from_secs(60), "waiter on a dead server", waiting)
        .await
        .unwrap();
    let err = result.unwrap_err();
    assert!(err.is_redis() && err.is_transient(), "{err:?}");
    assert_eq!(client.subscribed_channels(), 0);
    assert_eq!(client.renewed_holds(), 0);
}

#[test]
fn bad_configuration_is_a_config_error() {
    assert!(Config::from_url("localhost:6379").unwrap_err().is_config());
    assert!(Config::from_json("{").unwrap_err().is_config());
    let mut config = Config::default();
    config.lock_watchdog_timeout = Duration::ZERO;
    assert!(config.validate().unwrap_err().is_config());
}

/// Per-entry locks: an empty collection name or key, or a derived name over
/// the limit, is refused before any I/O; a good one is the kind it names in
/// every other way (it locks, the inspector reads it, nothing is left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_entries_are_refused_and_good_ones_are_their_kind() {
    use redisson_locks::EntryKey;
    let server = RedisServer::start();
    let client = server.client().await;
    assert!(client.get_map("").unwrap_err().is_invalid_argument());
    let orders = client.get_map("orders").unwrap();
    assert!(orders
        .get_lock(&EntryKey::encoded(Vec::new()))
        .unwrap_err()
        .is_invalid_argument());
    assert!(orders
        .get_semaphore(&EntryKey::string(""))
        .unwrap_err()
        .is_invalid_argument());
    let huge = client.get_set("s".repeat(MAX_NAME_LEN)).unwrap();
    assert!(huge
        .get_fair_lock(&EntryKey::string("k"))
        .unwrap_err()
        .is_invalid_argument());
    assert!(server.keys().await.is_empty(), "nothing was written");

    let lock = orders.get_lock(&EntryKey::string("42")).unwrap();
    let guard = lock.lock().await.unwrap();
    let seen = client.inspect(lock.name()).await.unwrap();
    assert!(seen.is_held() && seen.holders[0].owner.mine, "{seen:?}");
    assert_eq!(lock.name(), "{orders}:RE0IojEvPTY8Dofe3IkBNA:lock");
    guard.unlock().await.unwrap();
    let latch = orders
        .get_count_down_latch(&EntryKey::string("42"))
        .unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert!(
        within(Duration::from_secs(5), "the open latch", latch.wait())
            .await
            .is_ok()
    );
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

/// Redisson once overflowed the unlock's wait expiry with a huge
/// `retryAttempts` (fixed in 4.4.0). Here the most this crate accepts, with
/// the longest interval, leaves every kind's lock and unlock working, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_retry_attempts_leave_every_kind_unlocking() {
    use redisson_locks::MAX_RETRY_ATTEMPTS;
    let server = RedisServer::start();
    let client = server
        .client_with(|c| {
            c.retry_attempts = MAX_RETRY_ATTEMPTS;
            c.retry_interval = c.timeout;
        })
        .await;
    within(
        Duration::from_secs(30),
        "every kind, locked and unlocked",
        async {
            let rw = client.get_read_write_lock("rw").unwrap();
            let locks = [
                client.get_lock("reentrant").unwrap(),
                client.get_fair_lock("fair").unwrap(),
                (*client.get_fenced_lock("fenced").unwrap()).clone(),
                client.get_spin_lock("spin").unwrap(),
                client.get_non_reentrant_lock("non").unwrap(),
                rw.read_lock(),
                rw.write_lock(),
                client.get_multi_lock("group", ["a", "b"]).unwrap(),
            ];
            for lock in locks {
                let guard = lock.lock().await.unwrap();
                guard.unlock().await.unwrap();
                let guard = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
                guard.unlock().await.unwrap();
                assert!(
                    lock.unlock().await.unwrap_err().is_not_held(),
                    "{}",
                    lock.name()
                );
            }
            let semaphore = client.get_semaphore("sem").unwrap();
            assert!(semaphore.try_set_permits(1).await.unwrap());
            semaphore.acquire().await.unwrap();
            semaphore.release().await.unwrap();
            let pes = client.get_permit_expirable_semaphore("pes").unwrap();
            assert!(pes.try_set_permits(1).await.unwrap());
            pes.acquire_renewed()
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
            let latch = client.get_count_down_latch("latch").unwrap();
            assert!(latch.try_set_count(1).await.unwrap());
            latch.count_down().await.unwrap();
            latch.wait().await.unwrap();
        },
    )
    .await;
    // Left: the synchronizers' counts, the fenced token, and the
    // semaphore's mark of its last acquire and receipt of its last release
    // (each ends with its TTL).
    let keys = server.keys().await;
    assert!(
        keys.iter().all(|k| k == "sem"
            || k == "pes"
            || k.starts_with("redisson_lock_token")
            || k.starts_with("{sem}:rl-acquired:")
            || k.starts_with("{sem}:rl-released:")),
        "{keys:?}"
    );
}
