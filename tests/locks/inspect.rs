//! The inspector (`Client::inspect`, `scan`, `watch`, `force_unlock`) and the
//! clients' identities, on every kind this crate writes. What Java Redisson
//! writes is read in `java.rs` (`inspector_reads_what_java_holds`).

use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::inspect::{HoldMode, Kind, SkipReason};

use crate::support::fair::queue_len;
use crate::support::{eventually, within, RedisServer, IDENTITY_PREFIX};

const SOON: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_reentrant_lock_shows_its_owner_count_lease_and_identity() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| c.client_name = Some("billing".into()))
        .await;
    let looker = server.client().await;
    // One owner id for both holds: a nested hold of one owner.
    let lock = holder.get_lock("orders:42").unwrap().with_owner_id(7);
    let outer = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();
    let inner = lock.lock_with_lease(Duration::from_secs(60)).await.unwrap();

    let seen = looker.inspect("orders:42").await.unwrap();
    assert_eq!(seen.kind, Kind::Lock);
    assert_eq!(seen.holders.len(), 1, "{seen:?}");
    let h = &seen.holders[0];
    assert_eq!(h.holds, 2);
    assert_eq!(h.mode, HoldMode::Exclusive);
    assert_eq!(h.owner.client_id, holder.id());
    assert_eq!(h.owner.field, format!("{}:7", holder.id()));
    assert_eq!(h.owner.thread, "7");
    assert!(!h.owner.mine, "the looker holds nothing");
    let lease = h.lease_left.expect("a lease");
    assert!(
        lease > Duration::from_secs(50) && lease <= Duration::from_secs(60),
        "{lease:?}"
    );
    let who = h
        .owner
        .identity
        .as_ref()
        .expect("the holder announced itself");
    assert_eq!(who.pid, std::process::id());
    assert_eq!(who.name.as_deref(), Some("billing"));
    assert_eq!(who.library, "redisson-locks");
    assert_eq!(who, holder.identity());

    let mine = holder.inspect("orders:42").await.unwrap();
    assert!(mine.holders[0].owner.mine);
    assert_eq!(mine.mine().count(), 1);

    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    let free = looker.inspect("orders:42").await.unwrap();
    assert_eq!(free.kind, Kind::Absent);
    assert!(free.holders.is_empty() && free.ttl.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_queue_is_read_in_arrival_order_with_deadlines() {
    let server = RedisServer::start();
    let clients = [
        server.client().await,
        server.client().await,
        server.client().await,
    ];
    let holder = clients[0].get_fair_lock("line").unwrap();
    let held = holder.lock().await.unwrap();
    let mut waiters = Vec::new();
    let mut expected = Vec::new();
    for (i, client) in clients.iter().enumerate().skip(1) {
        let lock = client.get_fair_lock("line").unwrap();
        waiters.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await
        }));
        assert!(eventually(SOON, || async { queue_len(&server, "line").await == i }).await);
        expected.push(client.id().to_owned());
    }
    let seen = clients[0].inspect("line").await.unwrap();
    assert_eq!(seen.kind, Kind::FairLock);
    assert_eq!(seen.holders.len(), 1);
    assert!(seen.holders[0].owner.mine);
    let order: Vec<_> = seen
        .queue
        .iter()
        .map(|q| q.owner.client_id.clone())
        .collect();
    assert_eq!(order, expected, "first come first");
    assert_eq!(seen.queue_len, 2);
    let deadlines: Vec<i64> = seen
        .queue
        .iter()
        .map(|q| q.deadline_in_ms.unwrap())
        .collect();
    assert!(deadlines.iter().all(|d| *d > 0), "{deadlines:?}");
    assert!(
        deadlines[0] < deadlines[1],
        "the second waits behind the first: {deadlines:?}"
    );
    assert!(seen.queue.iter().all(|q| q.owner.identity.is_some()));
    held.unlock().await.unwrap();
    for waiter in waiters {
        within(SOON, "fair waiter", waiter).await.unwrap().unwrap();
    }
}

/// A fair semaphore reads as one: the permits available, each hold with its
/// permits and lease, the line in arrival order with each waiter's client's
/// deadline, one listening channel per waiting client; the tool lists it,
/// and `force-unlock` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_semaphore_shows_its_holds_with_leases_and_its_line_in_order() {
    let server = RedisServer::start();
    let client = server.client().await;
    let others = [server.client().await, server.client().await];
    let pool = client.get_fair_semaphore("pool").unwrap();
    pool.try_set_permits(3).await.unwrap();
    let two = pool.acquire(2).await.unwrap();
    let one = pool.acquire(1).await.unwrap();
    let mut waiting = Vec::new();
    for (i, other) in others.iter().enumerate() {
        let pool = other.get_fair_semaphore("pool").unwrap();
        waiting.push(tokio::spawn(async move { pool.acquire(1).await }));
        assert!(
            eventually(Duration::from_secs(10), || async {
                client.inspect("pool").await.unwrap().queue_len == i + 1
            })
            .await
        );
    }
    let seen = client.inspect("pool").await.unwrap();
    assert_eq!(seen.kind, Kind::FairSemaphore);
    assert_eq!(seen.count, Some(0));
    let mut holds: Vec<(String, u64)> = seen
        .holders
        .iter()
        .map(|h| (h.owner.field.clone(), h.holds))
        .collect();
    holds.sort();
    let mut expected = vec![(two.hold_id().to_owned(), 2), (one.hold_id().to_owned(), 1)];
    expected.sort();
    assert_eq!(holds, expected);
    for holder in &seen.holders {
        assert_eq!(holder.mode, redisson_locks::inspect::HoldMode::Permits);
        assert!(holder.owner.mine, "{holder:?}");
        let left = holder.lease_left.unwrap();
        assert!(
            left > Duration::from_secs(20) && left <= Duration::from_secs(30),
            "{left:?}"
        );
    }
    assert_eq!(seen.queue_len, 2);
    let clients: Vec<&str> = seen
        .queue
        .iter()
        .map(|q| q.owner.client_id.as_str())
        .collect();
    assert_eq!(clients, [others[0].id(), others[1].id()]);
    for queued in &seen.queue {
        let left = queued.deadline_in_ms.unwrap();
        assert!(left > 0 && left <= 10_000, "{queued:?}");
    }
    assert_eq!(seen.listeners.len(), 2, "{:?}", seen.listeners);
    assert!(
        seen.listeners.iter().all(|l| l.clients == 1),
        "{:?}",
        seen.listeners
    );
    let scanned = client.scan("po*").await.unwrap();
    let names: Vec<&str> = scanned.objects.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pool"]);
    assert!(client
        .force_unlock("pool")
        .await
        .unwrap_err()
        .is_invalid_argument());
    two.release().await.unwrap();
    for task in waiting {
        task.await.unwrap().unwrap().release().await.unwrap();
    }
    one.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_lock_shows_each_reader_with_its_own_leases_and_a_writer() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let rw_a = a.get_read_write_lock("doc").unwrap();
    let rw_b = b.get_read_write_lock("doc").unwrap();
    // One owner id for both of a's read holds.
    let r1 = rw_a
        .read_lock()
        .with_owner_id(7)
        .lock_with_lease(Duration::from_secs(40))
        .await
        .unwrap();
    let r2 = rw_a
        .read_lock()
        .with_owner_id(7)
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let r3 = rw_b.read_lock().lock().await.unwrap();
    let seen = b.inspect("doc").await.unwrap();
    assert_eq!(
        seen.kind,
        Kind::ReadWriteLock {
            mode: "read".into()
        }
    );
    assert_eq!(seen.holders.len(), 2, "{seen:?}");
    let of_a = seen
        .holders
        .iter()
        .find(|h| h.owner.client_id == a.id())
        .unwrap();
    assert_eq!((of_a.mode, of_a.holds), (HoldMode::Read, 2));
    let leases: Vec<_> = of_a.read_leases.iter().map(|l| l.unwrap()).collect();
    assert_eq!(leases.len(), 2);
    assert!(
        leases[0] > Duration::from_secs(30) && leases[1] <= Duration::from_secs(20),
        "{leases:?}"
    );
    assert_eq!(of_a.lease_left, Some(leases[0]), "the longest read lease");
    let of_b = seen
        .holders
        .iter()
        .find(|h| h.owner.client_id == b.id())
        .unwrap();
    assert!(of_b.owner.mine && of_b.holds == 1);
    for guard in [r1, r2, r3] {
        guard.unlock().await.unwrap();
    }
    let w = rw_a.write_lock().lock().await.unwrap();
    let seen = b.inspect("doc").await.unwrap();
    assert_eq!(
        seen.kind,
        Kind::ReadWriteLock {
            mode: "write".into()
        }
    );
    assert_eq!(seen.holders.len(), 1);
    assert_eq!(seen.holders[0].mode, HoldMode::Write);
    assert_eq!(seen.holders[0].owner.client_id, a.id());
    assert!(
        !seen.holders[0].owner.field.ends_with(":write"),
        "the writer's field, less its suffix"
    );
    w.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_kinds_are_told_from_their_layout() {
    let server = RedisServer::start();
    let client = server.client().await;

    let fenced = client.get_fenced_lock("fenced").unwrap();
    let (guard, token) = fenced.lock_and_get_token().await.unwrap();
    let seen = client.inspect("fenced").await.unwrap();
    assert_eq!(seen.kind, Kind::FencedLock);
    assert_eq!(seen.fencing_token, Some(token));
    assert_eq!(seen.holders.len(), 1);
    guard.unlock().await.unwrap();
    let seen = client.inspect("fenced").await.unwrap();
    assert_eq!(
        (seen.kind.clone(), seen.holders.len()),
        (Kind::FencedLock, 0),
        "the counter stays"
    );

    let slots = client.get_semaphore("slots").unwrap();
    slots.try_set_permits(3).await.unwrap();
    slots.acquire().await.unwrap();
    let seen = client.inspect("slots").await.unwrap();
    assert_eq!((seen.kind.clone(), seen.count), (Kind::Counter, Some(2)));

    let workers = client.get_permit_expirable_semaphore("workers").unwrap();
    workers.try_set_permits(2).await.unwrap();
    let permit = workers.acquire(Duration::from_secs(30)).await.unwrap();
    let seen = client.inspect("workers").await.unwrap();
    assert_eq!(seen.kind, Kind::PermitExpirableSemaphore);
    assert_eq!((seen.count, seen.permits_out), (Some(1), 1));
    assert_eq!(seen.permits[0].id, permit.to_string());
    let left = seen.permits[0].lease_left.unwrap();
    assert!(
        left > Duration::from_secs(25) && left <= Duration::from_secs(30),
        "{left:?}"
    );
    assert!(!seen.permits[0].expired);
    workers.release(&permit).await.unwrap();

    let ready = client.get_count_down_latch("ready").unwrap();
    ready.try_set_count(5).await.unwrap();
    let seen = client.inspect("ready").await.unwrap();
    assert_eq!((seen.kind.clone(), seen.count), (Kind::Counter, Some(5)));

    let seats = client.get_multi_lock("flight", ["12A", "12B"]).unwrap();
    let booked = seats
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    let seen = client.inspect("flight").await.unwrap();
    assert_eq!(seen.kind, Kind::MultiLockGroup);
    assert_eq!(seen.holders.len(), 2, "one per member: {seen:?}");
    assert!(seen
        .holders
        .iter()
        .all(|h| h.owner.mine && h.member.is_some() && h.lease_left.is_some()));
    booked.unlock().await.unwrap();

    let mut admin = server.admin().await;
    let _: () = admin.set("plain", "hello").await.unwrap();
    let _: () = admin.hset("profile", "name", "Ada").await.unwrap();
    let _: () = admin.rpush("jobs", "a").await.unwrap();
    for (name, redis_type) in [("plain", "string"), ("profile", "hash"), ("jobs", "list")] {
        let seen = client.inspect(name).await.unwrap();
        assert_eq!(
            seen.kind,
            Kind::Foreign {
                redis_type: redis_type.into()
            },
            "{name}"
        );
        assert!(seen.holders.is_empty());
    }
    assert!(client.inspect("").await.unwrap_err().is_invalid_argument());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_lists_the_lock_family_under_a_pattern_and_nothing_else() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut guards = Vec::new();
    for i in 0..30 {
        guards.push(
            client
                .get_lock(format!("jobs:{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    let rw = client.get_read_write_lock("jobs:rw").unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    client
        .get_semaphore("jobs:slots")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap();
    client
        .get_fenced_lock("jobs:fenced")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let mut admin = server.admin().await;
    let _: () = admin.set("jobs:note", "not a lock").await.unwrap();
    let _: () = admin.set("other:1", "7").await.unwrap();

    let found = client.scan("jobs:*").await.unwrap();
    assert!(found.complete);
    let names: Vec<_> = found.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names.len(),
        32,
        "30 locks, the read-write lock, the semaphore: {names:?}"
    );
    assert!(names.contains(&"jobs:rw") && names.contains(&"jobs:slots"));
    assert!(
        !names.contains(&"jobs:note"),
        "a string that is no number is no synchronizer"
    );
    assert!(!names
        .iter()
        .any(|n| n.contains("rwlock_timeout") || n.starts_with("redisson")));
    // The fenced lock is free: only its counter is left, and the counter is
    // the fenced lock's, not an object of its own.
    assert!(!names.contains(&"jobs:fenced"));
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let lock = found.objects.iter().find(|o| o.name == "jobs:7").unwrap();
    assert_eq!(
        (lock.kind.clone(), lock.holders[0].owner.mine),
        (Kind::Lock, true)
    );
    assert_eq!(
        lock.holders[0].owner.identity.as_ref(),
        Some(client.identity()),
        "the scan names the owner"
    );
    assert!(client.scan("").await.unwrap_err().is_invalid_argument());
    assert_eq!(client.scan("nothing:*").await.unwrap().objects.len(), 0);
    // Keys no lock could be named (empty, longer than a name may be) are
    // passed over, not an error that ends the scan.
    let _: () = admin.set("", "1").await.unwrap();
    let _: () = admin.set("x".repeat(9 * 1024), "1").await.unwrap();
    let _: () = admin.set(&b"bin:\xff\xfe"[..], "1").await.unwrap();
    let everything = client.scan("*").await.unwrap();
    assert!(everything.complete);
    assert_eq!(everything.objects.len(), 33, "the 32 and other:1");
    // ... and each is said, with why: nothing is left out silently.
    let mut skipped: Vec<(usize, SkipReason)> = everything
        .skipped
        .iter()
        .map(|s| (s.len, s.reason))
        .collect();
    skipped.sort_by_key(|(len, _)| *len);
    assert_eq!(
        skipped,
        [
            (0, SkipReason::NotAName),
            (6, SkipReason::NotUtf8),
            (9 * 1024, SkipReason::NotAName)
        ],
        "{:?}",
        everything.skipped
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    read.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_each_lock_kind_and_refuses_the_synchronizers() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let operator = server.client().await;
    let plain = holder.get_lock("p").unwrap().lock().await.unwrap();
    let fair = holder.get_fair_lock("f").unwrap().lock().await.unwrap();
    let rw = holder.get_read_write_lock("rw").unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    let seats = holder
        .get_multi_lock("g", ["1", "2"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    for name in ["p", "f", "rw", "g"] {
        let (before, freed) = operator.force_unlock(name).await.unwrap();
        assert!(freed, "{name}");
        assert!(!before.holders.is_empty(), "{name}: what it freed");
        assert!(!operator.inspect(name).await.unwrap().is_held(), "{name}");
    }
    for lost in [plain.lease_lost(), fair.lease_lost(), read.lease_lost()] {
        within(Duration::from_secs(40), "holders learn it", lost).await;
    }
    drop((plain, fair, read, seats));
    let (before, freed) = operator.force_unlock("p").await.unwrap();
    assert!(!freed && before.kind == Kind::Absent);
    operator
        .get_semaphore("s")
        .unwrap()
        .try_set_permits(1)
        .await
        .unwrap();
    assert!(operator
        .force_unlock("s")
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(
        operator.inspect("s").await.unwrap().count,
        Some(1),
        "nothing changed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_a_change_as_its_message_arrives() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let watcher = server.client().await;
    let lock = holder.get_lock("w").unwrap();
    let guard = lock.lock().await.unwrap();
    // A long interval: only the unlock message can end the second wait early.
    let mut watch = watcher.watch("w", Duration::from_secs(60)).unwrap();
    assert!(watch.next().await.unwrap().is_held());
    assert!(
        eventually(SOON, || async {
            server.subscribers("redisson_lock__channel:{w}").await == 1
        })
        .await
    );
    let next = tokio::spawn(async move { (watch.next().await, watch) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.unlock().await.unwrap();
    let (seen, watch) = within(SOON, "the watch wakes on the unlock message", next)
        .await
        .unwrap();
    assert!(!seen.unwrap().is_held());
    drop(watch);
    assert!(
        eventually(SOON, || async { server.channels().await.is_empty() }).await,
        "the watch unsubscribed"
    );
    assert!(watcher
        .watch("w", Duration::ZERO)
        .unwrap_err()
        .is_invalid_argument());
}

/// A caller that drops `next()` faster than the watch's interval still gets
/// a fresh snapshot at least every interval: an acquire (which announces
/// nothing) and a lease running out are seen, with every call dropped after
/// 1 to 150 ms, at every await inside (the wait, the reading's round trips).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_calls_are_dropped_still_sees_silent_changes() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let watcher = server.client().await;
    let mut watch = watcher.watch("quiet", Duration::from_millis(500)).unwrap();
    assert!(!within(SOON, "first", watch.next()).await.unwrap().is_held());
    let lease = Duration::from_millis(1_200);
    let guard = holder
        .get_lock("quiet")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let dropped_after = [1, 3, 10, 40, 150].map(Duration::from_millis);
    let mut held = Vec::new();
    let mut calls = 0usize;
    within(
        SOON,
        "the hold and its end, with every call dropped",
        async {
            // Every snapshot that completes: held ones until the lease ran out,
            // then a free one.
            while held.first() != Some(&true) || held.last() != Some(&false) {
                let limit = dropped_after[calls % dropped_after.len()];
                calls += 1;
                if let Ok(snapshot) = tokio::time::timeout(limit, watch.next()).await {
                    held.push(snapshot.unwrap().is_held());
                }
            }
        },
    )
    .await;
    assert!(calls > 10, "the calls were dropped, many times: {calls}");
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_announces_itself_while_it_lives_and_withdraws_when_it_closes() {
    let server = RedisServer::start();
    let client = server.client().await;
    let id = client.id().to_owned();
    let key = format!("{IDENTITY_PREFIX}{{{id}}}");
    assert_eq!(server.identity_keys().await, vec![key.clone()]);
    let mut admin = server.admin().await;
    let ttl: i64 = admin.pttl(&key).await.unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "one watchdog lease: {ttl}");
    let other = server.client().await;
    assert_eq!(
        other.identity_of(&id).await.unwrap().as_ref(),
        Some(client.identity())
    );
    client.close().await;
    assert!(
        eventually(SOON, || async {
            !server.identity_keys().await.contains(&key)
        })
        .await
    );
    assert_eq!(other.identity_of(&id).await.unwrap(), None);

    let quiet = server.client_with(|c| c.announce = false).await;
    assert!(!server
        .identity_keys()
        .await
        .iter()
        .any(|k| k.contains(quiet.id())));
    let _held = quiet.get_lock("q").unwrap().lock().await.unwrap();
    let seen = other.inspect("q").await.unwrap();
    assert_eq!(seen.holders[0].owner.client_id, quiet.id());
    assert!(seen.holders[0].owner.identity.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_key_is_kept_fresh_by_the_watchdog() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_millis(600))
        .await;
    let key = format!("{IDENTITY_PREFIX}{{{}}}", client.id());
    // Three leases later the key is still there: each tick set it again.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(server.identity_keys().await, vec![key]);
}

/// Writes the server has counted since its last save (`INFO persistence`).
async fn writes(server: &RedisServer) -> u64 {
    let mut admin = server.admin().await;
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(&mut admin)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("rdb_changes_since_last_save")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspecting_and_scanning_write_nothing() {
    let server = RedisServer::start();
    // No identity refresh and no renewal in between (explicit leases): the
    // only writes would be the inspector's.
    let client = server.client_with(|c| c.announce = false).await;
    let lease = Duration::from_secs(60);
    let _lock = client
        .get_lock("a")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let _fair = client
        .get_fair_lock("b")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let rw = client.get_read_write_lock("c").unwrap();
    let _read = rw
        .read_lock()
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let pes = client.get_permit_expirable_semaphore("d").unwrap();
    pes.try_set_permits(1).await.unwrap();
    let _permit = pes.acquire(Duration::from_secs(60)).await.unwrap();
    let fenced = client.get_fenced_lock("e").unwrap();
    let _fenced = fenced
        .try_lock_and_get_token(lease, Some(lease))
        .await
        .unwrap()
        .unwrap();
    let keys_before = server.all_keys().await;
    let before = writes(&server).await;
    for name in ["a", "b", "c", "d", "e", "absent"] {
        client.inspect(name).await.unwrap();
    }
    assert_eq!(client.scan("*").await.unwrap().objects.len(), 5);
    assert_eq!(writes(&server).await, before, "the inspector wrote");
    assert_eq!(server.all_keys().await, keys_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_data_that_looks_a_little_like_a_lock_is_foreign_and_never_forced() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    // A `mode` field, a `:lock_count` field, an owner-shaped field with a
    // word for a count, a blob, a number far too long to be a count.
    let _: () = redis::cmd("HSET")
        .arg("file:42")
        .arg(&["mode", "read", "owner", "bob", "size", "12"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: () = admin.hset("stats", "x:lock_count", "3").await.unwrap();
    let owner_like = format!("{}:1", client.id());
    let _: () = admin.hset("profile", &owner_like, "many").await.unwrap();
    let _: () = admin.set("blob", "7".repeat(4096)).await.unwrap();
    for name in ["file:42", "stats", "profile", "blob"] {
        let seen = client.inspect(name).await.unwrap();
        assert!(
            matches!(seen.kind, Kind::Foreign { .. }),
            "{name}: {seen:?}"
        );
        assert!(seen.holders.is_empty(), "{name}");
        assert!(
            client
                .force_unlock(name)
                .await
                .unwrap_err()
                .is_invalid_argument(),
            "{name}"
        );
    }
    let found = client.scan("*").await.unwrap();
    assert!(found.objects.is_empty(), "{:?}", found.objects);
    let kept: Vec<String> = admin.hkeys("file:42").await.unwrap();
    assert_eq!(kept.len(), 3, "nothing was changed");
    let blob: String = admin.get("blob").await.unwrap();
    assert_eq!(blob.len(), 4096);
}

/// A fair queue's lock name is matched against the pattern in the client (the
/// name sits inside the key's hash tag), in time linear in the name: long
/// names that almost match patterns of many stars once took seconds to
/// forever there, on a worker thread every other task shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_matches_long_queue_names_against_many_stars_at_once() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let long = "a".repeat(8_000);
    let almost = format!("{long}c");
    for name in [&long, &almost] {
        let queue = format!("redisson_lock_queue:{{{name}}}");
        let _: () = admin.rpush(&queue, "someone:1").await.unwrap();
    }
    for (pattern, expected) in [
        ("*a*a*a*a*a*a*a*a*a*a*a*a*b", 0),
        ("*a*a*a*a*a*a*a*a*a*a*a*a*c", 1),
        ("a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*", 2),
        ("*?*?*?*?*?*?*?*?", 2),
    ] {
        let found = within(SOON, pattern, client.scan(pattern)).await.unwrap();
        let names: Vec<_> = found.objects.iter().map(|o| o.name.len()).collect();
        assert_eq!(names.len(), expected, "{pattern}: {names:?}");
        assert!(found.objects.iter().all(|o| o.kind == Kind::FairLock));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_lock_is_forced_on_the_side_its_mode_names() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let operator = server.client().await;
    let rw = holder.get_read_write_lock("rwf").unwrap();
    // A writer who also reads (a downgrade on its way): write mode, with a
    // reader field too.
    let write = rw.write_lock().lock().await.unwrap();
    let read = write.scope(rw.read_lock().lock()).await.unwrap();
    let seen = operator.inspect("rwf").await.unwrap();
    assert_eq!(
        seen.kind,
        Kind::ReadWriteLock {
            mode: "write".into()
        }
    );
    let (_, freed) = operator.force_unlock("rwf").await.unwrap();
    assert!(freed);
    assert_eq!(operator.inspect("rwf").await.unwrap().kind, Kind::Absent);
    drop((read, write));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspector_the_acl_keeps_from_identities_still_reads_the_lock() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let _held = holder.get_lock("q").unwrap().lock().await.unwrap();
    // Redisson's keys and channels only: no `redisson_locks_client:*`.
    let limited = client_granted(&server, &["~q", "~redisson_lock_*", "~{q}*"]).await;
    assert!(
        limited.warnings().iter().any(|w| w.contains("announce")),
        "its own refused announcement is a warning: {:?}",
        limited.warnings()
    );
    let seen = limited.inspect("q").await.unwrap();
    assert_eq!(seen.holders.len(), 1);
    assert_eq!(seen.holders[0].owner.client_id, holder.id());
    assert!(
        seen.holders[0].owner.identity.is_none(),
        "unnamed, not unread"
    );
}

/// A client of an ACL user granted every command and channel, and of the
/// keys only those `key_patterns` (`~pattern`) match.
async fn client_granted(server: &RedisServer, key_patterns: &[&str]) -> redisson_locks::Client {
    let mut admin = server.admin().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "ops", "on", ">pw", "&*", "+@all"])
        .arg(key_patterns)
        .query_async(&mut admin)
        .await
        .unwrap();
    server
        .client_with(|c| {
            c.username = Some("ops".into());
            c.password = Some("pw".into());
        })
        .await
}

/// A fair semaphore's line and leases are this crate's own keys: an inspector
/// whose ACL grants its hash (and Redisson's keys) alone reads it all the
/// same, its kind and holds from the hash, its line and leases unread, never
/// an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspector_the_acl_keeps_from_a_fair_semaphores_line_reads_its_hash() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let pool = holder.get_fair_semaphore("fs").unwrap();
    assert!(pool.try_set_permits(1).await.unwrap());
    let held = pool.acquire(1).await.unwrap();
    let waiter = {
        let pool = server.client().await.get_fair_semaphore("fs").unwrap();
        tokio::spawn(async move { pool.acquire(1).await })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            holder.inspect("fs").await.unwrap().queue_len == 1
        })
        .await
    );
    let limited = client_granted(&server, &["~fs", "~redisson_lock_*", "~{fs}*"]).await;
    let seen = limited.inspect("fs").await.unwrap();
    assert_eq!(seen.kind, Kind::FairSemaphore);
    assert_eq!(seen.count, Some(0));
    let holds: Vec<(&str, u64)> = seen
        .holders
        .iter()
        .map(|h| (h.owner.field.as_str(), h.holds))
        .collect();
    assert_eq!(holds, [(held.hold_id(), 1)]);
    assert!(seen.holders[0].lease_left.is_none(), "{:?}", seen.holders);
    // Its waiter counted from its ask in the hash, the line itself unread.
    assert_eq!(seen.queue_len, 1, "{seen:?}");
    assert!(seen.queue.is_empty(), "{seen:?}");
    held.release().await.unwrap();
    within(Duration::from_secs(10), "the waiter", waiter)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_watch_listens_to_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let _held = client.get_lock("pw").unwrap().lock().await.unwrap();
    let mut watch = client
        .watch("pw", Duration::from_millis(50))
        .unwrap()
        .polling();
    for _ in 0..3 {
        assert!(watch.next().await.unwrap().is_held());
    }
    assert_eq!(server.subscribers("redisson_lock__channel:{pw}").await, 0);
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_finds_a_fair_line_whose_lock_is_gone() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    // A head waiter that died in line: its entry stays until its deadline,
    // and nobody holds the lock.
    let dead = "0b9c6e1e-6a2f-4c4b-9d7e-1f2a3b4c5d6e:1";
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 120_000;
    let _: () = admin
        .rpush("redisson_lock_queue:{stuck}", dead)
        .await
        .unwrap();
    let _: () = admin
        .zadd("redisson_lock_timeout:{stuck}", dead, deadline)
        .await
        .unwrap();
    let _: () = admin
        .rpush("redisson_lock_queue:{other}", dead)
        .await
        .unwrap();
    let found = client.scan("st*").await.unwrap();
    let names: Vec<_> = found.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["stuck"]);
    let stuck = &found.objects[0];
    assert_eq!(stuck.kind, Kind::FairLock);
    assert!(stuck.holders.is_empty());
    assert_eq!(stuck.queue[0].owner.field, dead);
    assert!(stuck.queue[0].deadline_in_ms.unwrap() > 100_000);
}
