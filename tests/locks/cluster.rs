//! Every lock kind on a real Redis Cluster (3 primaries, 3 replicas), sharded
//! pub/sub, slot checks, and a primary killed under a held lock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::cluster::RedisCluster;
use crate::support::{all_acquired, eventually, spawn_failover_waiters, within, PROMPT};

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lock_kind_works_on_a_cluster() {
    let cluster = RedisCluster::start();
    let a = cluster.client().await;
    let b = cluster.client().await;

    // Reentrant, on names spread over slots; a waiter of another client is woken
    // through sharded pub/sub long before the 30 s lease.
    for name in ["alpha", "beta", "gamma", "{order}:1"] {
        let lock = a.get_lock(name).unwrap();
        let outer = lock.lock().await.unwrap();
        let inner = outer.scope(lock.lock()).await.unwrap();
        assert_eq!(outer.scope(lock.hold_count()).await.unwrap(), 2);
        let theirs = b.get_lock(name).unwrap();
        let waiting = tokio::spawn(async move { theirs.lock().await.unwrap() });
        assert!(
            eventually(T, || async { b.waiting_for(name) == 1 }).await,
            "{name}: the waiter is not waiting"
        );
        inner.unlock().await.unwrap();
        let released = tokio::time::Instant::now();
        outer.unlock().await.unwrap();
        let guard = within(T, "cluster waiter", waiting).await.unwrap();
        assert!(
            released.elapsed() < PROMPT,
            "woken after {:?}",
            released.elapsed()
        );
        guard.unlock().await.unwrap();
    }

    // Fair: served in the order they joined.
    let held = a.get_fair_lock("fair-c").unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4 {
        let lock = if i % 2 == 0 { &a } else { &b }
            .get_fair_lock("fair-c")
            .unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            g.unlock().await.unwrap();
        }));
        // The next joins once this one has its place in line.
        assert!(
            eventually(T, || async {
                cluster.fair_queue_len("fair-c").await == i + 1
            })
            .await,
            "fair waiter {i} did not join the line"
        );
    }
    held.unlock().await.unwrap();
    within(T, "fair waiters", async {
        for w in waiters {
            w.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);

    // Read-write: readers share, a writer waits for them and is woken.
    let r1 = a
        .get_read_write_lock("rw-c")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let r2 = b
        .get_read_write_lock("rw-c")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    let write = b.get_read_write_lock("rw-c").unwrap().write_lock();
    assert!(write.try_lock().await.unwrap().is_none());
    let waiting = tokio::spawn(async move { write.lock().await.unwrap() });
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let w = within(T, "cluster writer", waiting).await.unwrap();
    w.unlock().await.unwrap();
    // The scripts were pinned on every primary at connect: names over all
    // three needed no EVAL fallback.
    assert_eq!((a.script_fallbacks(), b.script_fallbacks()), (0, 0));

    assert!(
        eventually(Duration::from_secs(5), || async {
            cluster.keys().await.is_empty()
        })
        .await,
        "{:?}",
        cluster.keys().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_names_that_would_span_slots_are_refused_and_renewals_batch_per_slot() {
    let cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.lock_watchdog_timeout = Duration::from_secs(1);
    let client = redisson_locks::Client::connect(config).await.unwrap();
    assert!(client.get_lock("a{b").unwrap_err().is_invalid_argument());
    assert!(client
        .get_fair_lock("a{}b")
        .unwrap_err()
        .is_invalid_argument());
    assert!(client.get_lock("{ok}:name").is_ok());

    // 150 watchdog holds over many slots stay held for three leases.
    let mut guards = Vec::new();
    for i in 0..150 {
        guards.push(
            client
                .get_lock(format!("renewed-{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(guards.iter().all(|g| !g.is_lease_lost()), "a hold was lost");
    assert_eq!(cluster.keys().await.len(), 150);
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            cluster.keys().await.is_empty()
        })
        .await
    );
}

/// The primary serving the lock's slot is SIGKILLed while the lock is held and
/// three tasks of another client wait; once a replica has taken over, the waiters
/// acquire and new locks work, with the same clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_recovers_when_a_primary_dies_under_a_held_lock() {
    let mut cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.lock_watchdog_timeout = Duration::from_secs(2);
    let holder = redisson_locks::Client::connect(config.clone())
        .await
        .unwrap();
    let waiters = redisson_locks::Client::connect(config).await.unwrap();
    let lock = holder.get_lock("failover").unwrap();
    let guard = lock.lock().await.unwrap();
    let tasks = spawn_failover_waiters(&waiters.get_lock("failover").unwrap(), 3);
    assert!(
        eventually(T, || async { waiters.waiting_for("failover") == 3 }).await,
        "the waiters are not waiting"
    );
    let primary = cluster.primary_for("failover");
    cluster.nodes[primary].kill();
    // Wait for the failure to be noticed (state goes bad) and a replica to take over.
    assert!(
        cluster.wait_until_failed_over(primary, Duration::from_secs(20)),
        "no failover"
    );
    // The holder releases (or learns its hold was lost in the failover).
    let _ = within(T, "holder unlock after failover", guard.unlock()).await;
    let acquired = all_acquired(tasks).await;
    assert!(acquired, "a waiter gave up after the failover");
    // And new locks work at once.
    let g = within(
        T,
        "lock after failover",
        holder.get_lock("failover").unwrap().lock(),
    )
    .await
    .unwrap();
    g.unlock().await.unwrap();
}

/// Sharded pub/sub asked for explicitly: used on Redis 7+, refused at connect
/// (a typed `Config` error naming the version) where the cluster has none, since
/// every release's SPUBLISH would fail there after its writes. `scripts/test`
/// runs this test on Redis 6.2 as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_pubsub_asked_for_is_refused_where_the_cluster_lacks_it() {
    let cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.sharded_pubsub = Some(true);
    let connected = redisson_locks::Client::connect(config).await;
    if crate::support::server_version().at_least(7, 0) {
        let client = connected.expect("sharded pub/sub on Redis 7+");
        let lock = client.get_lock("sharded").unwrap();
        lock.lock().await.unwrap().unlock().await.unwrap();
    } else {
        let err = connected.expect_err("no sharded pub/sub before 7.0");
        assert!(err.is_config(), "{err:?}");
        assert!(err.to_string().contains("7.0"), "{err}");
    }
}

/// The inspector on a cluster: `scan` visits every primary (names on all
/// three are found), `inspect` reads each kind in its slot, and the holders'
/// identities are found wherever their keys live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_scans_every_primary_of_a_cluster() {
    let cluster = RedisCluster::start();
    let a = cluster.client().await;
    let b = cluster.client().await;
    let names: Vec<String> = (0..24).map(|i| format!("inv:{i}")).collect();
    let mut primaries: Vec<usize> = names.iter().map(|n| cluster.primary_for(n)).collect();
    primaries.sort();
    primaries.dedup();
    assert_eq!(primaries.len(), 3, "the names spread over every primary");
    let mut guards = Vec::new();
    for name in &names {
        guards.push(a.get_lock(name.as_str()).unwrap().lock().await.unwrap());
    }
    let rw = a.get_read_write_lock("inv:rw").unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    let found = b.scan("inv:*").await.unwrap();
    assert!(found.complete);
    assert_eq!(
        found.objects.len(),
        25,
        "{:?}",
        found.objects.iter().map(|o| &o.name).collect::<Vec<_>>()
    );
    for object in &found.objects {
        assert!(object.is_held(), "{}", object.name);
        let owner = &object.holders[0].owner;
        assert_eq!(owner.client_id, a.id());
        assert_eq!(
            owner.identity.as_ref(),
            Some(a.identity()),
            "{}",
            object.name
        );
    }
    let seen = b.inspect("inv:rw").await.unwrap();
    assert_eq!(
        seen.kind,
        redisson_locks::inspect::Kind::ReadWriteLock {
            mode: "read".into()
        }
    );
    assert_eq!(seen.holders[0].read_leases.len(), 1);
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    read.unlock().await.unwrap();
    assert!(b.scan("inv:*").await.unwrap().objects.is_empty());
}

/// Leader election and watchdog-renewed permits on a cluster, on names served
/// by each of the three primaries: a resignation wakes the next participant
/// of another client through the cluster's pub/sub long before any lease,
/// with a greater epoch that an observer reports in order; the record (its
/// own key, in the name's slot) gives `since_ms`; renewed permits stay out
/// across three leases, in one batch per slot, and come back on release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_and_renewed_permits_work_on_a_cluster() {
    use redisson_locks::LeaderChange;
    let cluster = RedisCluster::start();
    // Participants on the 30 s watchdog: a wake-up within PROMPT came from a
    // message, not from the lease's end.
    let a = cluster.client().await;
    let b = cluster.client().await;
    let watcher = cluster.client().await;
    let names = ["lead:a", "lead:b", "lead:c", "lead:d", "lead:e", "lead:f"];
    let mut primaries: Vec<usize> = names.iter().map(|n| cluster.primary_for(n)).collect();
    primaries.sort();
    primaries.dedup();
    assert_eq!(primaries.len(), 3, "the names spread over every primary");

    for name in names {
        let mut observer = watcher.get_leader_election(name).unwrap().observe();
        assert_eq!(
            within(T, "first reading", observer.next()).await.unwrap(),
            LeaderChange::Vacant
        );
        let first = a
            .get_leader_election(name)
            .unwrap()
            .campaign()
            .await
            .unwrap();
        let change = within(T, "the first win", observer.next()).await.unwrap();
        assert!(
            matches!(&change, LeaderChange::Elected(l) if l.epoch == first.epoch()),
            "{name}: {change:?}"
        );
        let election = b.get_leader_election(name).unwrap();
        let waiting = tokio::spawn(async move { election.campaign().await });
        assert!(
            eventually(T, || async { b.waiting_for(name) == 1 }).await,
            "{name}: the second participant is not waiting"
        );
        let first_epoch = first.epoch();
        let resigned = tokio::time::Instant::now();
        first.resign().await.unwrap();
        let next = within(T, "the next leader", waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(
            resigned.elapsed() < PROMPT,
            "{name}: woken after {:?}",
            resigned.elapsed()
        );
        assert!(next.epoch() > first_epoch, "{name}");
        let leader = b
            .get_leader_election(name)
            .unwrap()
            .leader()
            .await
            .unwrap()
            .expect("a leader");
        assert_eq!(leader.epoch, next.epoch());
        assert_eq!(leader.owner.client_id, b.id());
        assert_eq!(leader.since_ms, Some(next.since_ms()));
        // The observer: (a vacancy, then) the next epoch, never an older one.
        let mut change = within(T, "the change", observer.next()).await.unwrap();
        if change == LeaderChange::Vacant {
            change = within(T, "the next win", observer.next()).await.unwrap();
        }
        assert!(
            matches!(&change, LeaderChange::Elected(l) if l.epoch == next.epoch()),
            "{name}: {change:?}"
        );
        next.resign().await.unwrap();
    }

    // Renewed permits under a 1 s watchdog, six semaphores over the slots:
    // out for three leases, back on release.
    let mut config = cluster.config();
    config.lock_watchdog_timeout = Duration::from_secs(1);
    let renewing = redisson_locks::Client::connect(config).await.unwrap();
    let mut permits = Vec::new();
    for i in 0..6 {
        let sem = renewing
            .get_permit_expirable_semaphore(format!("pes:{i}"))
            .unwrap();
        assert!(sem.try_set_permits(1).await.unwrap(), "{}", sem.name());
        let permit = within(T, "a renewed permit", sem.acquire_renewed())
            .await
            .unwrap();
        permits.push((sem, permit));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (sem, permit) in permits {
        assert!(
            !permit.is_lease_lost(),
            "{}: lost while renewed",
            sem.name()
        );
        assert_eq!(sem.available_permits().await.unwrap(), 0, "{}", sem.name());
        permit.release().await.unwrap();
        assert_eq!(sem.available_permits().await.unwrap(), 1, "{}", sem.name());
    }
    assert_eq!(renewing.renewed_holds(), 0);
}

/// A cluster `database` other than 0: on Valkey 9 and newer (run with
/// `cluster-databases`), every kind's keys land in that database on every
/// primary and a client of database 0 does not see them; elsewhere (Redis
/// refuses SELECT in cluster mode) `connect` fails with `Error::Config`
/// naming the server and its version. `scripts/test` runs it on Valkey 9.1 as
/// well as on the main server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_database_is_used_where_the_server_has_them_and_refused_by_name_elsewhere() {
    let server = crate::support::server_version();
    let has_them = server.name == "Valkey" && server.at_least(9, 0);
    let cluster = if has_them {
        RedisCluster::start_with(&["--cluster-databases", "16"])
    } else {
        RedisCluster::start()
    };
    let mut config = cluster.config();
    config.database = 3;
    let connected = redisson_locks::Client::connect(config).await;
    if !has_them {
        let e = connected.unwrap_err();
        let (major, minor, patch) = server.version;
        let text = e.to_string();
        eprintln!("{text}");
        assert!(
            e.is_config()
                && text.contains(&format!("{major}.{minor}.{patch}"))
                && text.contains("Valkey 9"),
            "{e}"
        );
        return;
    }
    let three = connected.unwrap();
    let zero = cluster.client().await;
    let names = ["alpha", "beta", "gamma", "{order}:1"];
    let mut guards = Vec::new();
    for name in names {
        guards.push(three.get_lock(name).unwrap().lock().await.unwrap());
        assert!(
            zero.get_lock(name)
                .unwrap()
                .try_lock()
                .await
                .unwrap()
                .is_some(),
            "{name}: database 0 has a lock of its own"
        );
    }
    let mut in_three = Vec::new();
    for node in &cluster.nodes {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/3", node.port()))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let role: String = redis::cmd("ROLE")
            .query_async::<Vec<redis::Value>>(&mut conn)
            .await
            .ok()
            .and_then(|r| r.first().cloned())
            .and_then(|v| redis::from_redis_value(v).ok())
            .unwrap_or_default();
        if role == "master" {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut conn)
                .await
                .unwrap();
            in_three.extend(
                keys.into_iter()
                    .filter(|k| !k.starts_with(crate::support::IDENTITY_PREFIX)),
            );
        }
    }
    in_three.sort();
    assert_eq!(in_three, {
        let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        expected.sort();
        expected
    });
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert_eq!(three.script_fallbacks(), 0);
}

/// Redisson once overflowed a stack and hit CROSSSLOT renewing many holds
/// spread over a cluster's slots. Here: 10,000 watchdog holds on names over
/// all three primaries (thousands of slots), a third of them released
/// between renewal ticks: every live hold is renewed through two more leases,
/// none is reported lost, and a released one is never renewed back to life.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_holds_over_every_primary_are_renewed_and_released_ones_stay_gone() {
    const HOLDS: usize = 10_000;
    let cluster = RedisCluster::start();
    let mut config = cluster.config();
    config.lock_watchdog_timeout = Duration::from_secs(6);
    let client = redisson_locks::Client::connect(config).await.unwrap();
    let mut guards = Vec::new();
    within(Duration::from_secs(120), "10,000 holds taken", async {
        for i in 0..HOLDS {
            guards.push(
                client
                    .get_lock(format!("h{i}"))
                    .unwrap()
                    .lock()
                    .await
                    .unwrap(),
            );
        }
    })
    .await;
    assert_eq!(client.renewed_holds(), HOLDS);
    let slots: std::collections::HashSet<u16> =
        (0..HOLDS).map(|i| cluster_slot(&format!("h{i}"))).collect();
    assert!(slots.len() > 4_000, "spread over {} slots", slots.len());
    // A third released, in three rounds between ticks (every 2 s).
    let mut released = Vec::new();
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        let mut kept = Vec::new();
        for (i, guard) in guards.into_iter().enumerate() {
            if i % 9 == round * 3 {
                released.push(guard.name().to_owned());
                guard.unlock().await.unwrap();
            } else {
                kept.push(guard);
            }
        }
        guards = kept;
    }
    // Two more leases' worth of ticks: the live holds outlive their 6 s lease.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(client.renewed_holds(), guards.len());
    assert!(guards
        .iter()
        .all(|g| !g.is_lease_lost() && g.valid_for().is_some()));
    let mut admin = client.clone();
    for name in released.iter().step_by(37) {
        let lock = admin.get_lock(name.clone()).unwrap();
        assert!(!lock.is_locked().await.unwrap(), "{name} came back to life");
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    admin = client;
    assert_eq!(admin.renewed_holds(), 0);
}

/// Redis Cluster's hash slot of a plain name's keys (`{name}`): CRC16 (XMODEM)
/// of the name, modulo 16384.
fn cluster_slot(name: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in name.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// A graceful failover (`CLUSTER FAILOVER`, as an upgrade does it): the old
/// primary, now a replica, ends its sharded subscriptions; waiters follow
/// their channels to the new primary and take the lock at its release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_follow_their_channels_through_a_graceful_failover() {
    if !crate::support::server_has(7, 0, "sharded pub/sub") {
        return;
    }
    let cluster = &RedisCluster::start();
    waiters_follow_their_channels(
        cluster,
        ["{handed}:reentrant", "{handed-fair}:fair"],
        "the new primary",
        |name| async move {
            cluster.fail_over_gracefully(name);
        },
    )
    .await;
}

/// A slot moved away (a reshard): the node that gave it up pushes
/// `sunsubscribe` to every sharded subscriber of its channels and keeps the
/// connection. A waiter's subscription is then dead though it stood
/// confirmed: it is made again where the slot now lives, and the waiter,
/// woken, takes the lock when its holder releases it (the suite's clients
/// re-check only every 40 s: a wake-up within PROMPT is the message's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_follow_their_channels_when_the_slot_moves() {
    if !crate::support::server_has(7, 0, "sharded pub/sub") {
        return;
    }
    let cluster = &RedisCluster::start();
    waiters_follow_their_channels(
        cluster,
        ["{moved}:reentrant", "{moved-fair}:fair"],
        "the slot's new node",
        |name| async move {
            cluster.move_slot_of(name).await;
        },
    )
    .await;
}

/// For a reentrant lock (`names[0]`) and a fair one (`names[1]`): a client
/// holds it, another's task waits on its channel, `moved` moves the name's
/// slot to `new_home` while it waits, and the holder's release there must
/// wake the waiter within PROMPT.
async fn waiters_follow_their_channels<'c, F, Fut>(
    cluster: &'c RedisCluster,
    names: [&'static str; 2],
    new_home: &str,
    moved: F,
) where
    F: Fn(&'static str) -> Fut,
    Fut: std::future::Future<Output = ()> + 'c,
{
    let holder = cluster.client().await;
    let waiter = cluster.client().await;
    for (fair, name) in [(false, names[0]), (true, names[1])] {
        let lock = |client: &redisson_locks::Client| match fair {
            true => client.get_fair_lock(name).unwrap(),
            false => client.get_lock(name).unwrap(),
        };
        let held = lock(&holder).lock().await.unwrap();
        let waiting = {
            let lock = lock(&waiter);
            tokio::spawn(async move {
                let guard = lock.lock().await.unwrap();
                let took = tokio::time::Instant::now();
                guard.unlock().await.unwrap();
                took
            })
        };
        assert!(
            eventually(T, || async { waiter.waiting_for(name) == 1 }).await,
            "{name}: the waiter is not waiting"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        moved(name).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let released = tokio::time::Instant::now();
        within(T, &format!("the release on {new_home}"), held.unlock())
            .await
            .unwrap();
        let took = within(T * 2, "the waiter", waiting).await.unwrap();
        let waited = took.saturating_duration_since(released);
        assert!(
            waited < PROMPT,
            "{name}: the waiter took the lock {waited:?} after the release on {new_home}"
        );
    }
}

/// Replica sync in a cluster: each acquire's fence and `WAIT` go to the
/// primary that took the hold (a `WAIT` counts one node's writes), so holds
/// on every primary are confirmed by that primary's replica; with one
/// replica frozen, an acquire on its primary is given back and reported,
/// while locks on the other primaries are still confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sync_waits_on_the_primary_that_took_each_hold() {
    let cluster = RedisCluster::start();
    assert!(
        cluster.wait_until_replicas_synced(T).await,
        "the replicas did not sync"
    );
    let mut config = cluster.config();
    config.replica_sync = None;
    let client = redisson_locks::Client::connect(config).await.unwrap();
    assert_eq!(client.replica_sync(), 1, "the primaries have replicas");
    // Names on every primary, confirmed together (one pipeline per slot).
    let names: Vec<String> = (0..12).map(|i| format!("synced-{i}")).collect();
    let primaries: std::collections::HashSet<usize> =
        names.iter().map(|name| cluster.primary_for(name)).collect();
    assert_eq!(primaries.len(), 3, "the names cover every primary");
    let guards = futures_util::future::join_all(names.iter().map(|name| {
        let lock = client.get_lock(name).unwrap();
        async move { lock.lock().await }
    }))
    .await;
    for (name, guard) in names.iter().zip(guards) {
        let guard = guard.unwrap_or_else(|e| panic!("{name}: {e}"));
        let replica = cluster.replica_for(name);
        assert!(
            cluster.nodes[replica].keys().await.contains(name),
            "{name} is not on its primary's replica"
        );
        guard.unlock().await.unwrap();
    }

    // One replica frozen: its primary's acquire is not confirmed.
    let frozen = "frozen-replica";
    let replica = cluster.replica_for(frozen);
    cluster.nodes[replica].pause();
    let err = client.get_lock(frozen).unwrap().lock().await.unwrap_err();
    let other = names
        .iter()
        .find(|name| cluster.primary_for(name) != cluster.primary_for(frozen))
        .unwrap();
    let elsewhere = client.get_lock(other).unwrap().lock().await;
    cluster.nodes[replica].resume();
    assert!(err.is_not_replicated(), "{err:?}");
    elsewhere.unwrap().unlock().await.unwrap();
    let primary = cluster.primary_for(frozen);
    assert!(
        !cluster.nodes[primary]
            .keys()
            .await
            .contains(&frozen.to_owned()),
        "the unconfirmed hold was kept"
    );
}

/// The server pushes `sunsubscribe` to every sharded subscriber of a slot
/// it gives up, and keeps the connection: redis-rs before 1.8.2 took that
/// push for the reply to the command at the front of the node's queue, and
/// every later reply on the connection went to the command after its own
/// (redis-rs#2530, fixed by #2583 in 1.8.2, the version this crate needs).
/// Here, on redis-rs's own cluster connection, eight tasks keep `INCR`s in
/// flight to the node of a subscribed channel while the channel's slot
/// moves away three times: each task's counter must read 1, 2, 3, … with
/// no reply shifted, and the push must have come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_sunsubscribe_is_never_taken_for_a_commands_reply() {
    if !crate::support::server_has(7, 0, "sharded pub/sub") {
        return;
    }
    let cluster = Arc::new(RedisCluster::start());
    let pushed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = pushed.clone();
    let client = redis::cluster::ClusterClientBuilder::new(
        cluster
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect::<Vec<_>>(),
    )
    .use_protocol(redis::ProtocolVersion::RESP3)
    .response_timeout(Duration::from_secs(5))
    .push_sender(move |push: redis::PushInfo| {
        if push.kind == redis::PushKind::SUnsubscribe {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .build()
    .unwrap();
    let mut conn = client.get_async_connection().await.unwrap();
    for round in 0..3 {
        let channel = format!("{{pushed-{round}}}");
        conn.ssubscribe(&channel).await.unwrap();
        // Counters on the channel's node, in slots that stay there.
        let node = cluster.primary_for(&channel);
        let keys: Vec<String> = (0..10_000)
            .map(|i| format!("counter-{round}-{i}"))
            .filter(|key| cluster.primary_for(key) == node)
            .take(8)
            .collect();
        assert_eq!(keys.len(), 8, "counters on node {node}");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let counting: Vec<_> = keys
            .into_iter()
            .map(|key| {
                let (mut conn, stop) = (conn.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut expected = 1;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let got: redis::RedisResult<i64> =
                            redis::cmd("INCR").arg(&key).query_async(&mut conn).await;
                        match got {
                            Ok(n) if n == expected => expected += 1,
                            other => return Err(format!("{key}: INCR #{expected} read {other:?}")),
                        }
                    }
                    Ok(expected - 1)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = pushed.load(std::sync::atomic::Ordering::SeqCst);
        let mover = cluster.clone();
        let moved = channel.clone();
        tokio::task::spawn_blocking(move || {
            let slot = mover.slot_of(&moved);
            let to = *mover
                .primaries()
                .iter()
                .find(|&&p| p != mover.primary_of_slot(slot))
                .unwrap();
            mover.move_slot(slot, to, Duration::ZERO);
        })
        .await
        .unwrap();
        assert!(
            eventually(T, || async {
                pushed.load(std::sync::atomic::Ordering::SeqCst) > before
            })
            .await,
            "round {round}: no sunsubscribe was pushed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for task in counting {
            let counted = task
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert!(counted > 0, "round {round}: no INCR was answered");
        }
    }
}
