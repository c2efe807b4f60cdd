//! Redisson's single-hash multi-lock (`get_multi_lock(group, values)`): every
//! value of one group at once, or none, on one hash.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use crate::support::exclusion::Exclusion;
use crate::support::{assert_nothing_left, eventually, within, RedisServer, PROMPT};

const T: Duration = Duration::from_secs(30);

/// 8 tasks over 2 clients, each locking an overlapping pair of seats 15 times:
/// a task's seats are never held by another task inside (per-seat occupancy
/// counters), the non-atomic per-seat counters stay exact, and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_groups_exclude_and_disjoint_ones_do_not_wait() {
    const OPS: usize = 15;
    let server = RedisServer::start();
    let clients = [server.client().await, server.client().await];
    let seats = ["1A", "1B", "1C", "1D"];
    let exclusion: Arc<Vec<Exclusion>> =
        Arc::new(seats.iter().map(|_| Exclusion::default()).collect());
    let mut tasks = Vec::new();
    for task in 0..8 {
        // Pairs (0,1) (1,2) (2,3) (3,0): each overlaps two others.
        let pair = [task % 4, (task + 1) % 4];
        let lock = clients[task % 2]
            .get_multi_lock("flight", pair.map(|i| seats[i]))
            .unwrap();
        let exclusion = exclusion.clone();
        let mut admin = server.admin().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..OPS {
                let guard = lock.lock().await.unwrap();
                let inside = pair.map(|i| {
                    let inside = exclusion[i].enter();
                    assert_eq!(exclusion[i].overlaps(), 0, "seat {i} twice");
                    inside
                });
                for i in pair {
                    let key = format!("seat-count-{i}");
                    let n: Option<u64> = admin.get(&key).await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = admin.set(&key, n.unwrap_or(0) + 1).await.unwrap();
                }
                drop(inside);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(T, "group contenders", task).await.unwrap();
    }
    let mut admin = server.admin().await;
    for i in 0..4 {
        let key = format!("seat-count-{i}");
        // Each seat is in two pairs, each pair locked by two tasks.
        let n: u64 = admin.get(&key).await.unwrap();
        assert_eq!(n, 4 * OPS as u64, "seat {i}: an overlap lost an increment");
        let _: () = admin.del(&key).await.unwrap();
    }
    assert_nothing_left(&server, &[&clients[0], &clients[1]]).await;

    // Disjoint value sets of one group are held at once.
    let a = clients[0].get_multi_lock("flight", ["2A"]).unwrap();
    let b = clients[1].get_multi_lock("flight", ["2B", "2C"]).unwrap();
    let ga = a.lock().await.unwrap();
    let gb = within(T, "disjoint", b.try_lock()).await.unwrap();
    assert!(gb.is_some(), "a disjoint set waited");
    assert!(a.is_locked().await.unwrap() && b.is_locked().await.unwrap());
    // One shared value is enough to exclude.
    let c = clients[1].get_multi_lock("flight", ["2A", "2Z"]).unwrap();
    assert!(c.try_lock().await.unwrap().is_none());
    assert!(c.is_locked().await.unwrap(), "2A is held");
    ga.unlock().await.unwrap();
    drop(gb);
    assert_nothing_left(&server, &[&clients[0], &clients[1]]).await;
}

/// Re-entry counts holds on every member, the last unlock frees them all and
/// wakes a waiter at once (not after a lease); a non-owner's unlock is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_release_and_wake_up() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let lock = holder.get_multi_lock("g", ["x", "y"]).unwrap();
    let outer = lock.lock().await.unwrap();
    let inner = outer.scope(lock.lock()).await.unwrap();
    assert_eq!(outer.scope(lock.hold_count()).await.unwrap(), 2);
    assert!(outer.scope(lock.is_held_by_current_task()).await.unwrap());

    let theirs = other.get_multi_lock("g", ["y"]).unwrap();
    let unlock_by_stranger = theirs.unlock().await.unwrap_err();
    assert!(unlock_by_stranger.is_not_held(), "{unlock_by_stranger}");
    let waiter = tokio::spawn(async move {
        let guard = theirs.lock().await.unwrap();
        guard.unlock().await.unwrap();
    });
    inner.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "one hold is still left");
    outer.unlock().await.unwrap();
    // The default watchdog lease is 30 s: only the unlock message wakes it soon.
    within(PROMPT, "woken waiter", waiter).await.unwrap();
    assert_nothing_left(&server, &[&holder, &other]).await;
}

/// The watchdog keeps a 1 s lease alive for three leases; an explicit lease
/// ends on its own and the next owner gets in; a bad argument is refused
/// before any I/O; a cancelled wait leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_cancellation_and_bad_input() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let holder = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let other = server.client().await;
    let held = holder
        .get_multi_lock("w", ["a", "b"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let theirs = other.get_multi_lock("w", ["b", "c"]).unwrap();
    assert!(theirs.try_lock_wait(watchdog * 3).await.unwrap().is_none());
    assert!(!held.is_lease_lost());
    assert!(held.valid_for().unwrap() <= watchdog);

    // Cancelled waits: no hold, no subscription.
    for _ in 0..20 {
        let _ = tokio::time::timeout(Duration::from_millis(5), theirs.lock()).await;
    }
    held.unlock().await.unwrap();
    assert_nothing_left(&server, &[&holder, &other]).await;

    // An explicit lease ends unrenewed; the hash goes with it.
    let short = holder.get_multi_lock("w", ["a"]).unwrap();
    let guard = short
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(holder.renewed_holds(), 0);
    let next = other.get_multi_lock("w", ["a"]).unwrap();
    let took = within(T, "after the lease", next.lock()).await.unwrap();
    assert!(guard.is_lease_lost());
    took.unlock().await.unwrap();
    drop(guard);
    assert_nothing_left(&server, &[&holder, &other]).await;

    let none: [&str; 0] = [];
    assert!(holder
        .get_multi_lock("w", none)
        .unwrap_err()
        .is_invalid_argument());
    assert!(holder
        .get_multi_lock("", ["a"])
        .unwrap_err()
        .is_invalid_argument());
    let lock = holder.get_multi_lock("w", ["a"]).unwrap();
    assert!(lock
        .lock_with_lease(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    let mut admin = server.admin().await;
    let _: () = admin.set("w", "not a hash").await.unwrap();
    assert!(lock.try_lock().await.unwrap_err().is_wrong_type());
}

/// force_unlock frees the members whoever holds them and wakes their waiters;
/// the other members of the group stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_only_its_members() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let other = server.client().await;
    let ab = holder
        .get_multi_lock("f", ["a", "b"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let cd = holder
        .get_multi_lock("f", ["c"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let theirs = other.get_multi_lock("f", ["a"]).unwrap();
    let waiter = {
        let theirs = theirs.clone();
        tokio::spawn(async move { theirs.lock().await.unwrap().unlock().await.unwrap() })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            server.subscribers("redisson_lock__channel:{f}").await == 1
        })
        .await,
        "the waiter did not subscribe"
    );
    assert!(other
        .get_multi_lock("f", ["b", "a"])
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    // Woken by the force release's message, long before the 30 s lease's end.
    within(PROMPT, "woken by force_unlock", waiter)
        .await
        .unwrap();
    assert!(holder
        .get_multi_lock("f", ["c"])
        .unwrap()
        .is_locked()
        .await
        .unwrap());
    let lost = ab.unlock().await.unwrap_err();
    assert!(lost.is_not_held(), "{lost}");
    cd.unlock().await.unwrap();
    assert_nothing_left(&server, &[&holder, &other]).await;
}
