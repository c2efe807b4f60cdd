//! The multi-lock: all of several locks (on different servers) or none.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redisson_locks::MultiLock;

use crate::support::exclusion::Exclusion;
use crate::support::{assert_nothing_left, eventually, within, RedisServer, LATE};

const T: Duration = Duration::from_secs(60);

/// One lock busy: a timed try gives up on time and holds none of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_across_two_servers() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (one.client().await, two.client().await);
    let blocker = two.client().await;
    let held = blocker.get_lock("m-2").unwrap().lock().await.unwrap();
    let multi =
        MultiLock::new(vec![a.get_lock("m-1").unwrap(), b.get_lock("m-2").unwrap()]).unwrap();
    let wait = Duration::from_millis(400);
    let started = tokio::time::Instant::now();
    assert!(multi.try_lock_wait(wait).await.unwrap().is_none());
    assert!(started.elapsed() >= wait);
    assert!(started.elapsed() < wait + LATE, "{:?}", started.elapsed());
    assert!(multi.try_lock().await.unwrap().is_none());
    assert!(
        eventually(Duration::from_secs(5), || async {
            one.keys().await.is_empty()
        })
        .await,
        "a lock of a failed multi-lock stayed held: {:?}",
        one.keys().await
    );
    held.unlock().await.unwrap();
    let guard = within(T, "multi-lock", multi.lock()).await.unwrap();
    assert_eq!(guard.guards().len(), 2);
    assert!(guard.valid_for().is_some());
    guard.unlock().await.unwrap();
    assert!(one.keys().await.is_empty() && two.keys().await.is_empty());
}

/// Two tasks taking the same three locks in opposite orders both finish, and are
/// never inside together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opposite_orders_do_not_deadlock() {
    let (one, two) = (RedisServer::start(), RedisServer::start());
    let exclusion = Arc::new(Exclusion::default());
    let mut tasks = Vec::new();
    for reversed in [false, true] {
        let (a, b) = (one.client().await, two.client().await);
        let exclusion = exclusion.clone();
        tasks.push(tokio::spawn(async move {
            let mut locks = vec![
                a.get_lock("x").unwrap(),
                b.get_lock("y").unwrap(),
                a.get_lock("z").unwrap(),
            ];
            if reversed {
                locks.reverse();
            }
            let multi = MultiLock::new(locks).unwrap();
            for _ in 0..10 {
                let guard = multi.lock().await.unwrap();
                let inside = exclusion.enter();
                assert_eq!(exclusion.overlaps(), 0, "both inside");
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(inside);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(T, "opposite-order multi-locks", task).await.unwrap();
    }
    assert!(one.keys().await.is_empty() && two.keys().await.is_empty());
}

/// One lock's server is down: the multi-lock fails cleanly, and nothing is left
/// on the live server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_fails_the_multi_lock_cleanly() {
    let (one, mut two) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (one.client().await, two.client().await);
    let multi = MultiLock::new(vec![
        a.get_lock("alive").unwrap(),
        b.get_lock("dead").unwrap(),
    ])
    .unwrap();
    two.kill();
    let err = within(T, "multi-lock with a dead server", multi.lock())
        .await
        .unwrap_err();
    assert!(err.is_redis(), "{err:?}");
    assert!(
        eventually(Duration::from_secs(3), || async {
            one.keys().await.is_empty()
        })
        .await,
        "left on the live server: {:?}",
        one.keys().await
    );
    assert_eq!(a.renewed_holds(), 0);
}

/// Leases, cancellation and bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_cancellation_and_bad_input() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    assert!(MultiLock::new(Vec::new())
        .unwrap_err()
        .is_invalid_argument());
    let multi = MultiLock::new(vec![
        client.get_lock("l-1").unwrap(),
        client.get_lock("l-2").unwrap(),
    ])
    .unwrap();
    let lease = Duration::from_millis(500);
    let guard = multi
        .try_lock_with_lease(Duration::from_secs(1), lease)
        .await
        .unwrap()
        .expect("free");
    assert!(guard.valid_for().unwrap() <= lease);
    // Both end with their lease.
    let theirs = MultiLock::new(vec![
        other.get_lock("l-1").unwrap(),
        other.get_lock("l-2").unwrap(),
    ])
    .unwrap();
    let got = within(T, "after the leases", theirs.lock()).await.unwrap();
    assert!(guard.is_lease_lost());
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    // Cancelled multi-locks, while one lock is held elsewhere, leave nothing.
    for i in 0..100u64 {
        let _ = tokio::time::timeout(Duration::from_micros(i * 30), multi.lock()).await;
    }
    got.unlock().await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

/// The same lock given twice is taken once (before: `try_lock()` answered no on
/// a free lock and `lock()` went round for ever); two handles of one lock that
/// exclude each other are refused at once.
#[tokio::test]
async fn a_lock_given_twice_is_taken_once_and_exclusive_twins_are_refused() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("twice").unwrap();
    let other = client.get_lock("other").unwrap();
    let multi = MultiLock::new(vec![lock.clone(), other.clone(), lock.clone()]).unwrap();
    assert_eq!(multi.locks().len(), 2);
    let guard = multi.try_lock().await.unwrap().expect("both free");
    guard.unlock().await.unwrap();
    let guard = within(Duration::from_secs(20), "lock()", multi.lock())
        .await
        .unwrap();
    assert_eq!(guard.guards().len(), 2);
    guard.unlock().await.unwrap();
    for twins in [
        vec![lock.clone(), client.get_fair_lock("twice").unwrap()],
        {
            let rw = client.get_read_write_lock("rw").unwrap();
            vec![rw.read_lock(), rw.write_lock()]
        },
        vec![
            client.get_multi_lock("group", ["a", "b"]).unwrap(),
            client.get_multi_lock("group", ["b", "c"]).unwrap(),
        ],
    ] {
        let err = MultiLock::new(twins).unwrap_err();
        assert!(err.is_invalid_argument(), "{err:?}");
    }
    // Independent handles of one name stay: two readers, disjoint members.
    let rw = client.get_read_write_lock("rw").unwrap();
    let readers = MultiLock::new(vec![rw.read_lock(), rw.read_lock().with_task_owner()]).unwrap();
    assert_eq!(readers.locks().len(), 2);
    let members = MultiLock::new(vec![
        client.get_multi_lock("group", ["a"]).unwrap(),
        client.get_multi_lock("group", ["c"]).unwrap(),
    ])
    .unwrap();
    let held = within(Duration::from_secs(20), "disjoint members", members.lock())
        .await
        .unwrap();
    held.unlock().await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

/// Overlapping sets given in random orders are taken in one order, so callers
/// queue on their first common lock instead of meeting head on (before: each
/// round held its first locks while waiting its whole budget for the next, 15
/// grants in 16 s). Judged by the outcome: grants flow at lock speed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_mixed_orders_keep_granting() {
    let server = RedisServer::start();
    let names = ["m-a", "m-b", "m-c", "m-d"];
    let grants = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..4usize {
        let client = server.client().await;
        let grants = grants.clone();
        tasks.push(tokio::spawn(async move {
            let mut seed = task as u64 + 1;
            let end = tokio::time::Instant::now() + Duration::from_secs(4);
            while tokio::time::Instant::now() < end {
                // Three of the four names, in an order of this task's own.
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let skip = (seed >> 33) as usize % 4;
                let mut set: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|n| *n != names[skip])
                    .collect();
                set.rotate_left((seed >> 40) as usize % 3);
                if seed & 1 == 0 {
                    set.reverse();
                }
                let locks = set.iter().map(|n| client.get_lock(*n).unwrap()).collect();
                let multi = MultiLock::new(locks).unwrap();
                let guard = multi.lock().await.unwrap();
                grants.fetch_add(1, Ordering::Relaxed);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(T, "mixed-order multi-locks", task).await.unwrap();
    }
    let granted = grants.load(Ordering::Relaxed);
    eprintln!("mixed orders: {granted} grants in 4 s");
    assert!(
        granted >= 40,
        "only {granted} grants in 4 s: the sets met head on"
    );
}
