//! The watchdog: renewal while held, nothing after, loss reported.

use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::RemainingTtl;

use crate::support::{eventually, within, RedisServer, LATE};

const WATCHDOG: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_outlives_its_lease_while_held_and_is_not_renewed_after() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let contender = server.client().await;
    let lock = client.get_lock("renewed").unwrap();
    let theirs = contender.get_lock("renewed").unwrap();
    let guard = lock.lock().await.unwrap();
    assert_eq!(client.renewed_holds(), 1);

    // Four leases long: still held at every check, never free for a contender.
    let end = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < end {
        match lock.remain_time_to_live().await.unwrap() {
            RemainingTtl::Expires(ttl) => assert!(ttl <= WATCHDOG),
            other => panic!("hold lost while renewed: {other:?}"),
        }
        assert!(theirs.try_lock().await.unwrap().is_none());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!guard.is_lease_lost());
    guard.unlock().await.unwrap();
    assert_eq!(client.renewed_holds(), 0);

    // After the unlock nothing renews: no script runs at all for two leases.
    server.reset_stats().await;
    tokio::time::sleep(WATCHDOG * 2).await;
    assert_eq!(
        server.command_calls("evalsha").await,
        0,
        "a renewal ran after unlock"
    );
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_stops_renewing_and_the_lock_frees() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let lock = client.get_lock("orphan").unwrap();
    // Detached: the hold is not released by a guard drop, only the client goes.
    lock.lock().await.unwrap().detach();
    drop(lock);
    drop(client);

    let other = server.client().await;
    let theirs = other.get_lock("orphan").unwrap();
    let started = tokio::time::Instant::now();
    let guard = within(
        Duration::from_secs(10),
        "lock after owner's client dropped",
        theirs.lock(),
    )
    .await
    .unwrap();
    // Bounded by the lease (1 s) plus a loaded machine's lateness; a hold still
    // renewed would run into the 10 s bound above.
    assert!(
        started.elapsed() < WATCHDOG + LATE,
        "took {:?}",
        started.elapsed()
    );
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_found_gone_is_reported_to_its_holder() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let lock = client.get_lock("vanishing").unwrap();
    let guard = lock.lock().await.unwrap();
    // Someone deletes the lock behind the holder's back.
    let mut admin = server.admin().await;
    let _: () = admin.del("vanishing").await.unwrap();

    within(Duration::from_secs(5), "loss reported", guard.lease_lost()).await;
    assert!(guard.is_lease_lost());
    assert_eq!(
        client.renewed_holds(),
        0,
        "a lost hold is no longer renewed"
    );
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_held());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_holds_are_renewed_in_batches() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_millis(900))
        .await;
    let mut guards = Vec::new();
    for i in 0..250 {
        guards.push(
            client
                .get_lock(format!("batch-{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    assert_eq!(client.renewed_holds(), 250);
    server.reset_stats().await;
    tokio::time::sleep(Duration::from_millis(950)).await;
    let calls = server.command_calls("evalsha").await;
    // Renewing one lock per call would be hundreds of calls; batched, each round
    // (every 300 ms, so at most four in the window) is three.
    assert!(
        (3..=12).contains(&calls),
        "{calls} renewal calls for 250 holds"
    );
    assert_eq!(
        server.keys().await.len(),
        250,
        "every hold survived its lease"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.keys().await.is_empty()
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocking_a_detached_hold_leaves_a_guarded_hold_renewed() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let lock = client.get_lock("mixed-holds").unwrap().with_task_owner();
    let guarded = lock.lock().await.unwrap();
    lock.lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap()
        .detach();
    lock.unlock().await.unwrap(); // ends the detached hold only
    assert_eq!(client.renewed_holds(), 1);
    tokio::time::sleep(WATCHDOG * 3).await;
    assert!(lock.is_locked().await.unwrap(), "the guarded hold expired");
    assert!(!guarded.is_lease_lost());
    guarded.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inner_short_lease_does_not_shorten_the_outer_hold() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("short-inner").unwrap();
    let outer = lock.lock().await.unwrap();
    let inner = outer
        .scope(lock.lock_with_lease(Duration::from_millis(100)))
        .await
        .unwrap();
    inner.unlock().await.unwrap();
    let ttl = lock
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .unwrap();
    assert!(ttl > Duration::from_secs(20), "outer hold cut to {ttl:?}");
    outer.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_value_under_one_lock_does_not_stop_renewing_the_others() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let spoiled = client.get_lock("spoiled").unwrap().lock().await.unwrap();
    let healthy = client.get_lock("healthy").unwrap().lock().await.unwrap();
    let mut admin = server.admin().await;
    let _: () = admin.del("spoiled").await.unwrap();
    let _: () = admin.set("spoiled", "not a lock").await.unwrap();
    within(
        Duration::from_secs(5),
        "loss of the spoiled hold",
        spoiled.lease_lost(),
    )
    .await;
    tokio::time::sleep(WATCHDOG * 2).await;
    assert!(!healthy.is_lease_lost());
    assert!(client
        .get_lock("healthy")
        .unwrap()
        .is_locked()
        .await
        .unwrap());
    healthy.unlock().await.unwrap();
    assert!(spoiled.unlock().await.unwrap_err().is_wrong_type());
    let value: String = admin.get("spoiled").await.unwrap();
    assert_eq!(value, "not a lock");
    let _: () = admin.del("spoiled").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_counts_from_the_acquisition_not_the_wait() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    // The wait is the first lease. A lease counted from the wait's start would
    // have at most `lease - first` left once granted; counted from the grant,
    // nearly all of it is left, less what a loaded machine takes to read it
    // (`first` of room).
    let first = Duration::from_secs(2);
    let lease = Duration::from_secs(3);
    let held = a
        .get_lock("late-lease")
        .unwrap()
        .lock_with_lease(first)
        .await
        .unwrap();
    let lock = b.get_lock("late-lease").unwrap();
    let guard = lock
        .try_lock_with_lease(Duration::from_secs(5), lease)
        .await
        .unwrap()
        .expect("acquired after the first lease ran out");
    // Acquired after ~2 s of waiting; its own 3 s lease has just begun.
    assert!(!guard.is_lease_lost());
    drop(held);
    let ttl = lock
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .unwrap();
    assert!(ttl > lease - first, "{ttl:?} left of a {lease:?} lease");
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// `guard.run(section)` drops the section the moment the hold is lost: a
/// section that writes a mark every 20 ms stops writing before another
/// client holds the lock (its marks all precede the new holder's grant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stops_the_section_before_another_holder_gets_in() {
    use std::sync::{Arc, Mutex};
    let server = crate::support::RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let lock = holder.get_lock("bounded").unwrap();
    let guard = lock
        .lock_with_lease(Duration::from_millis(600))
        .await
        .unwrap();
    let marks: Arc<Mutex<Vec<tokio::time::Instant>>> = Arc::default();
    let section = {
        let marks = marks.clone();
        async move {
            loop {
                marks.lock().unwrap().push(tokio::time::Instant::now());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let theirs = other.get_lock("bounded").unwrap();
    let (ran, taken) = tokio::join!(guard.run(section), async {
        let g = theirs.lock().await.unwrap();
        (tokio::time::Instant::now(), g)
    });
    let (granted, their_guard) = taken;
    let err = ran.expect_err("the section never ends by itself");
    assert!(err.is_lease_lost(), "{err}");
    let last = *marks.lock().unwrap().last().unwrap();
    assert!(last < granted, "a side effect after the next holder got in");
    their_guard.unlock().await.unwrap();

    // The closure form: acquire, run bounded, release; a section that ends
    // in time gives its value.
    assert_eq!(lock.run(|| async { 7 }).await.unwrap(), 7);
    assert!(!lock.is_locked().await.unwrap());
}

/// Detached holds ended by `force_unlock()` leave this client as ones ended by
/// their owner's `unlock()`: nothing renewed, the lock free, and the owner's
/// next hold released even when its release is cut by a killed connection.
/// (`faults::a_forced_unlock_leaves_no_count_for_a_settle_to_trust` shows the
/// count a force must not leave behind.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_unlock_ends_detached_holds_as_their_unlock_does() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    for (round, forced) in [(0, false), (1, true), (2, true), (3, false)] {
        let name = format!("detached-end-{round}");
        for lock in [
            client.get_lock(&name).unwrap().with_task_owner(),
            client
                .get_fair_lock(format!("{name}-fair"))
                .unwrap()
                .with_task_owner(),
        ] {
            lock.lock().await.unwrap().detach();
            lock.lock().await.unwrap().detach();
            assert_eq!(lock.hold_count().await.unwrap(), 2);
            if forced {
                assert!(lock.force_unlock().await.unwrap());
            } else {
                lock.unlock().await.unwrap();
                lock.unlock().await.unwrap();
            }
            assert_eq!(client.renewed_holds(), 0, "{}: still renewed", lock.name());
            assert!(!lock.is_locked().await.unwrap());

            // The same owner again, and a release whose connection is cut.
            lock.lock().await.unwrap().detach();
            server.kill_clients().await;
            within(Duration::from_secs(20), "the release", lock.unlock())
                .await
                .unwrap_or_else(|e| panic!("{}: unlock failed: {e:?}", lock.name()));
            assert!(
                !server.keys().await.contains(&lock.name().to_owned()),
                "{} (forced: {forced}): the release was settled to a stale count",
                lock.name()
            );
            assert_eq!(client.renewed_holds(), 0);
        }
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.keys().await.is_empty()
        })
        .await
    );
}
