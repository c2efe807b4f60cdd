//! The fair lock: strict first-come-first-served, vanished and departing waiters.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::exclusion::Exclusion;
use crate::support::fair::{join_in_turn, queue, queue_len, timeouts_len};
use crate::support::{eventually, within, RedisServer, LATE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_waiters_are_served_in_the_order_they_joined() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let holder = clients[0].get_fair_lock("fifo").unwrap();
    let held = holder.lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..200 {
        tasks.push(join_in_turn(&server, &clients[i % 4], "fifo", i, &order).await);
    }
    held.unlock().await.unwrap();
    within(Duration::from_secs(120), "200 fair waiters", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let order = order.lock().unwrap().clone();
    assert_eq!(order, (0..200).collect::<Vec<_>>(), "served out of order");
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_tasks_each_get_every_round_without_overlap() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let exclusion = Arc::new(Exclusion::default());
    let mut tasks = Vec::new();
    for i in 0..64 {
        let lock = clients[i % 4].get_fair_lock("busy-fair").unwrap();
        let exclusion = exclusion.clone();
        tasks.push(tokio::spawn(async move {
            let mut rounds = 0;
            for _ in 0..20 {
                let guard = lock.lock().await.unwrap();
                let inside = exclusion.enter();
                tokio::time::sleep(Duration::from_micros(200)).await;
                drop(inside);
                guard.unlock().await.unwrap();
                rounds += 1;
            }
            rounds
        }));
    }
    let rounds = within(Duration::from_secs(240), "64 x 20 fair rounds", async {
        let mut rounds = Vec::new();
        for t in tasks {
            rounds.push(t.await.unwrap());
        }
        rounds
    })
    .await;
    assert!(rounds.iter().all(|r| *r == 20));
    exclusion.assert_never_overlapped("64 x 20 fair rounds");
    assert_eq!(queue_len(&server, "busy-fair").await, 0);
    assert_eq!(timeouts_len(&server, "busy-fair").await, 0);
    assert!(server.keys().await.is_empty());
}

/// A Redisson-style peer: hand-written commands following the wire contract.
const JAVA_FAIR_ENQUEUE: &str = r"
local ttl = redis.call('pttl', KEYS[1])
local tail = redis.call('lindex', KEYS[2], -1)
if tail then ttl = tonumber(redis.call('zscore', KEYS[3], tail)) - tonumber(ARGV[3]) end
redis.call('zadd', KEYS[3], tonumber(ARGV[3]) + ttl + tonumber(ARGV[2]), ARGV[1])
redis.call('rpush', KEYS[2], ARGV[1])
return ttl";

const JAVA_FAIR_TAKE: &str = r"
if redis.call('exists', KEYS[1]) == 0 and redis.call('lindex', KEYS[2], 0) == ARGV[1] then
  redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[1])
  for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), w)
  end
  redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], 30000)
  return 1
end
return 0";

const JAVA_UNLOCK: &str = r"
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then redis.call('publish', KEYS[3] .. ':' .. head, '0') end
return 1";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn java_enqueue(server: &RedisServer, name: &str, owner: &str, wait_ms: u64) {
    let mut admin = server.admin().await;
    let _: i64 = redis::Script::new(JAVA_FAIR_ENQUEUE)
        .key(name)
        .key(format!("redisson_lock_queue:{{{name}}}"))
        .key(format!("redisson_lock_timeout:{{{name}}}"))
        .arg(owner)
        .arg(wait_ms)
        .arg(now_ms())
        .invoke_async(&mut admin)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_head_is_skipped_after_its_wait_and_the_rest_keep_order() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(2);
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let holder = client.get_fair_lock("dead-head").unwrap();
    let held = holder.lock().await.unwrap();
    // A waiter whose process died while first in line: it joined, and will never
    // try again or leave.
    java_enqueue(
        &server,
        "dead-head",
        "dead0000-0000-4000-8000-000000000000:1",
        2_000,
    )
    .await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(join_in_turn(&server, &client, "dead-head", i, &order).await);
    }
    held.unlock().await.unwrap();
    let released = tokio::time::Instant::now();
    within(
        Duration::from_secs(20),
        "waiters behind a dead head",
        async {
            for t in tasks {
                t.await.unwrap();
            }
        },
    )
    .await;
    // Once the lock is free, the dead head has its wait to take it; the next waiter
    // checks at least once per wait. So the line moves on within about two waits
    // (more on a loaded machine), long before the dead waiter's original deadline
    // (the holder's 30 s lease plus its wait) and in order.
    assert!(
        released.elapsed() < wait * 3 + LATE,
        "took {:?}",
        released.elapsed()
    );
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_head_blocks_for_at_most_its_wait() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(1);
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    // The lock is free; a dead waiter is first in line with a short deadline.
    // Timed from before it joined: its deadline is a wait after that, however
    // slowly this test goes on.
    let started = tokio::time::Instant::now();
    java_enqueue(
        &server,
        "dead-head-2",
        "dead0000-0000-4000-8000-000000000000:7",
        1_000,
    )
    .await;
    let lock = client.get_fair_lock("dead-head-2").unwrap();
    let guard = within(
        Duration::from_secs(10),
        "lock behind a dead head",
        lock.lock(),
    )
    .await
    .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "jumped the line after {waited:?}"
    );
    // Its wait, and a check or two; a loaded machine may be late.
    assert!(waited < wait + LATE, "took {waited:?}");
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_give_up_or_are_cancelled_leave_the_line() {
    let server = RedisServer::start();
    let client = server.client().await;
    let held = client
        .get_fair_lock("leavers")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = join_in_turn(&server, &client, "leavers", 1, &order).await;

    // One gives up after its wait (long enough to be seen in line beside the
    // next, however slowly they join).
    let impatient = client.get_fair_lock("leavers").unwrap();
    let gave_up =
        tokio::spawn(async move { impatient.try_lock_wait(Duration::from_secs(3)).await });
    // One is cancelled mid-wait.
    let cancelled_lock = client.get_fair_lock("leavers").unwrap();
    let cancelled = tokio::spawn(async move { cancelled_lock.lock().await });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue_len(&server, "leavers").await == 3
        })
        .await
    );
    let last = join_in_turn(&server, &client, "leavers", 2, &order).await;

    assert!(within(Duration::from_secs(10), "give up", gave_up)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue_len(&server, "leavers").await == 2
        })
        .await,
        "queue: {:?}",
        queue(&server, "leavers").await
    );
    assert_eq!(timeouts_len(&server, "leavers").await, 2);

    held.unlock().await.unwrap();
    within(Duration::from_secs(20), "remaining waiters", async {
        first.await.unwrap();
        last.await.unwrap();
    })
    .await;
    assert_eq!(*order.lock().unwrap(), vec![1, 2]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_once_never_joins_the_line_and_reentry_never_queues() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let lock = a.get_fair_lock("no-queue").unwrap().with_task_owner();
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(queue_len(&server, "no-queue").await, 0);
    let theirs = b.get_fair_lock("no-queue").unwrap();
    assert!(theirs.try_lock().await.unwrap().is_none());
    assert!(theirs
        .try_lock_wait(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    assert_eq!(queue_len(&server, "no-queue").await, 0);
    assert_eq!(timeouts_len(&server, "no-queue").await, 0);
    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(theirs.unlock().await.unwrap_err().is_not_held());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_waiter_queued_between_ours_is_served_in_its_turn() {
    let server = RedisServer::start();
    let client = server.client().await;
    let held = client.get_fair_lock("mixed").unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = join_in_turn(&server, &client, "mixed", 1, &order).await;
    let java_owner = "7a1c0f3e-2b4d-4c6e-8f10-123456789abc:55";
    java_enqueue(&server, "mixed", java_owner, 300_000).await;
    // The Java waiter listens on its own channel, as Redisson's fair lock does.
    let mut java_sub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    java_sub
        .subscribe(format!("redisson_lock__channel:{{mixed}}:{java_owner}"))
        .await
        .unwrap();
    let last = join_in_turn(&server, &client, "mixed", 3, &order).await;
    assert_eq!(
        queue(&server, "mixed").await.get(1).map(String::as_str),
        Some(java_owner)
    );

    held.unlock().await.unwrap();
    within(Duration::from_secs(10), "our first waiter", first)
        .await
        .unwrap();
    // Our first waiter's release woke the Java waiter on its own channel.
    use tokio_stream::StreamExt;
    let message = within(Duration::from_secs(5), "java wake-up", async {
        java_sub.on_message().next().await.unwrap()
    })
    .await;
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    let mut admin = server.admin().await;
    let took: i64 = redis::Script::new(JAVA_FAIR_TAKE)
        .key("mixed")
        .key("redisson_lock_queue:{mixed}")
        .key("redisson_lock_timeout:{mixed}")
        .arg(java_owner)
        .arg(300_000)
        .invoke_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(took, 1, "the Java waiter was not first in line");
    assert_eq!(
        order.lock().unwrap().len(),
        1,
        "our last waiter jumped the Java one"
    );
    // The Java client unlocks: our last waiter is woken on its channel.
    let _: Option<i64> = redis::Script::new(JAVA_UNLOCK)
        .key("mixed")
        .key("redisson_lock_queue:{mixed}")
        .key("redisson_lock__channel:{mixed}")
        .arg(java_owner)
        .invoke_async(&mut admin)
        .await
        .unwrap();
    within(Duration::from_secs(10), "our last waiter", last)
        .await
        .unwrap();
    assert_eq!(*order.lock().unwrap(), vec![1, 3]);
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lease_expiry_watchdog_and_force_unlock() {
    let server = RedisServer::start();
    let a = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(1))
        .await;
    let b = server.client().await;
    let lock = a.get_fair_lock("fair-lease").unwrap();
    // Explicit lease: expires, the other client gets in, the late unlock fails.
    let guard = lock
        .lock_with_lease(Duration::from_millis(500))
        .await
        .unwrap();
    let theirs = within(
        Duration::from_secs(10),
        "after lease",
        b.get_fair_lock("fair-lease").unwrap().lock(),
    )
    .await
    .unwrap();
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    theirs.unlock().await.unwrap();
    // Watchdog: held across three leases.
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(lock.is_locked().await.unwrap());
    assert!(!guard.is_lease_lost());
    // Force unlock frees it and wakes the first in line.
    let other = b.get_fair_lock("fair-lease").unwrap();
    let waiting = tokio::spawn(async move { other.lock().await.unwrap() });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue_len(&server, "fair-lease").await == 1
        })
        .await
    );
    assert!(lock.force_unlock().await.unwrap());
    assert!(guard.is_lease_lost());
    let theirs = within(Duration::from_secs(5), "after force unlock", waiting)
        .await
        .unwrap();
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_head_keeps_its_place_through_a_hold_longer_than_its_wait() {
    let server = RedisServer::start();
    // A live waiter pushes its deadline (a wait ahead) on every half wait: 1 s of
    // slack for a loaded machine to be late with it.
    let wait = Duration::from_secs(2);
    // A 1 s watchdog lease: the first waiter's deadline when it joins is about
    // 1 s + 2 s away, well inside the 6 s hold.
    let client = server
        .client_with(|c| {
            c.fair_lock_wait_timeout = wait;
            c.lock_watchdog_timeout = Duration::from_secs(1);
        })
        .await;
    let prodder = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let held = client
        .get_fair_lock("long-hold")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = join_in_turn(&server, &client, "long-hold", 1, &order).await;
    let second = join_in_turn(&server, &client, "long-hold", 2, &order).await;
    // Others keep trying (each try evicts stale heads) for several waits.
    let lock = prodder.get_fair_lock("long-hold").unwrap();
    let line = queue(&server, "long-hold").await;
    for _ in 0..24 {
        assert!(lock.try_lock().await.unwrap().is_none());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            queue(&server, "long-hold").await,
            line,
            "a live waiter lost its place"
        );
    }
    held.unlock().await.unwrap();
    within(Duration::from_secs(10), "both waiters", async {
        first.await.unwrap();
        second.await.unwrap();
    })
    .await;
    assert_eq!(*order.lock().unwrap(), vec![1, 2]);
    assert!(server.keys().await.is_empty());
}

/// Deadlines no longer move with the line, so a waiter deep in a long line
/// keeps the far deadline it joined with: when it becomes first, it must still
/// get only one wait to show up. A dead waiter second in line, with a deadline
/// an hour out, is skipped within about a wait of becoming first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_with_a_far_deadline_is_skipped_within_a_wait_of_becoming_first() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(1);
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let name = "far-deadline";
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let first = join_in_turn(&server, &client, name, 0, &order).await;
    // Dead, second in line, joined an hour's worth of waits ago.
    let mut admin = server.admin().await;
    let dead = "dead0000-0000-4000-8000-000000000000:9";
    let far = redisson_locks_epoch_ms() + 3_600_000;
    let _: () = redis::pipe()
        .rpush(format!("redisson_lock_queue:{{{name}}}"), dead)
        .zadd(format!("redisson_lock_timeout:{{{name}}}"), dead, far)
        .query_async(&mut admin)
        .await
        .unwrap();
    let second = join_in_turn(&server, &client, name, 1, &order).await;
    held.unlock().await.unwrap();
    let released = tokio::time::Instant::now();
    within(
        Duration::from_secs(20),
        "the line past a dead waiter",
        async {
            first.await.unwrap();
            second.await.unwrap();
        },
    )
    .await;
    assert!(
        released.elapsed() < wait * 4 + LATE,
        "the dead waiter held the line for {:?}",
        released.elapsed()
    );
    assert_eq!(*order.lock().unwrap(), vec![0, 1]);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

fn redisson_locks_epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waiters that are not first keep the deadline they joined with, which a long
/// hold outlasts. When the first in line leaves (its call was cancelled), the
/// next one becomes first: it must get a fresh wait, not be evicted for a
/// deadline that passed while it was rightly waiting. Holder: 6 s under a 1 s
/// watchdog; wait 1 s; the head is cancelled at 4 s, after the others' joining
/// deadlines passed. Order must be kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_past_their_joining_deadline_keep_their_places_when_the_head_leaves() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(1);
    let client = server
        .client_with(|c| {
            c.fair_lock_wait_timeout = wait;
            c.lock_watchdog_timeout = Duration::from_secs(1);
        })
        .await;
    let name = "long-hold";
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let head = join_in_turn(&server, &client, name, 0, &order).await;
    let second = join_in_turn(&server, &client, name, 1, &order).await;
    let third = join_in_turn(&server, &client, name, 2, &order).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    head.abort();
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue_len(&server, name).await == 2
        })
        .await,
        "the cancelled head did not leave"
    );
    // Any script now runs the eviction rule: a one-off try by someone else.
    assert!(client
        .get_fair_lock(name)
        .unwrap()
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        queue_len(&server, name).await,
        2,
        "a live waiter was evicted for a deadline it joined with"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    held.unlock().await.unwrap();
    within(Duration::from_secs(20), "the rest of the line", async {
        second.await.unwrap();
        third.await.unwrap();
    })
    .await;
    assert_eq!(
        *order.lock().unwrap(),
        vec![1, 2],
        "a waiter lost its place"
    );
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}
