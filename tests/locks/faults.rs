//! Real faults: processes killed and frozen, connections cut, a black-holed
//! network, a restarted server, lost notifications, a paused server. Under each,
//! no two owners hold a lock at once while their leases are valid, no waiter
//! hangs, nothing is left behind, and a holder learns when its lease was lost.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, Config, RLock, RemainingTtl};

use crate::support::checker::{monotonic_ns, HoldLog, HoldRecord};
use crate::support::child::ChildHolder;
use crate::support::fair::{join_in_turn, queue_len};
use crate::support::proxy::{Mode, Proxy};
use crate::support::{assert_nothing_left, eventually, within, RedisServer, LATE};

/// Takes `grants` holds of `lock_name` one after the other, each doing a
/// non-atomic read-modify-write of `counter`, and logs every hold.
async fn contend(
    client: Client,
    url: String,
    lock_name: String,
    counter: String,
    grants: usize,
    log: HoldLog,
) {
    let lock = client.get_lock(lock_name.clone()).unwrap();
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..grants {
        let guard = lock.lock().await.unwrap();
        let acquired_ns = monotonic_ns();
        let value: Option<u64> = conn.get(&counter).await.unwrap();
        tokio::task::yield_now().await;
        let _: () = conn.set(&counter, value.unwrap_or(0) + 1).await.unwrap();
        log.record(&HoldRecord {
            owner: format!("{}:{}", client.id(), guard.owner_id()),
            lock: lock_name.clone(),
            acquired_ns,
            released_ns: monotonic_ns(),
            lease_deadline_ns: u64::MAX,
        });
        guard.unlock().await.unwrap();
    }
}

/// Not a test: the entry point of child-process holders (see `support::child`).
/// Run without the `LOCKS_CHILD` orders it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "entry point of child-process holders"]
async fn child_process_entry() {
    let Ok(mode) = std::env::var("LOCKS_CHILD") else {
        return;
    };
    let var = |name: &str| std::env::var(format!("LOCKS_{name}")).expect(name);
    let mut config = Config::from_url(&var("URL")).unwrap();
    // As the suite's own clients (see `SUITE_RECHECK`), unless told.
    config.recheck_interval = match std::env::var("LOCKS_RECHECK_MS") {
        Ok(ms) => Duration::from_millis(ms.parse().unwrap()),
        Err(_) => crate::support::SUITE_RECHECK,
    };
    if let Ok(ms) = std::env::var("LOCKS_WATCHDOG_MS") {
        config.lock_watchdog_timeout = Duration::from_millis(ms.parse().unwrap());
    }
    if let Ok(ms) = std::env::var("LOCKS_FAIR_WAIT_MS") {
        config.fair_lock_wait_timeout = Duration::from_millis(ms.parse().unwrap());
    }
    if mode == "nested" {
        let run_for = Duration::from_millis(var("RUN_MS").parse().unwrap());
        super::liveness_campaigns::nested_child(config, var("DIR"), var("NAME"), run_for).await;
        return;
    }
    let client = Client::connect(config).await.unwrap();
    match mode.as_str() {
        "contend" => {
            let grants = var("GRANTS").parse().unwrap();
            contend(
                client,
                var("URL"),
                var("LOCK"),
                var("COUNTER"),
                grants,
                HoldLog::open(var("LOG")),
            )
            .await;
        }
        "soak" => {
            soak_contender(client, var("LOCK"), HoldLog::open(var("LOG")), u64::MAX).await;
        }
        "fair-wait" => {
            // Joins the fair lock's line and waits there until killed.
            let lock = client.get_fair_lock(var("LOCK")).unwrap();
            let _ = lock.lock().await;
        }
        "fair-waiters" => {
            // WAITERS tasks join the fair lock's line one by one (the first
            // waits in Redis, the others are parked), then wait until killed.
            let count: usize = var("WAITERS").parse().unwrap();
            let mut waiters = Vec::new();
            for _ in 0..count {
                let lock = client.get_fair_lock(var("LOCK")).unwrap();
                waiters.push(tokio::spawn(async move {
                    let _ = lock.lock().await;
                }));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            std::future::pending::<()>().await;
        }
        "hold" => {
            let lock = client.get_lock(var("LOCK")).unwrap();
            let lease: u64 = var("LEASE_MS").parse().unwrap();
            let guard = if lease == 0 {
                lock.lock().await.unwrap()
            } else {
                lock.lock_with_lease(Duration::from_millis(lease))
                    .await
                    .unwrap()
            };
            println!("HELD");
            std::future::pending::<()>().await;
            drop(guard);
        }
        "campaign" => super::leader::campaign_child(client).await,
        "history" => super::histories::history_child(client, var("DIR"), var("NAME")).await,
        "pes-hold" => {
            // Takes a permit of a permit-expirable semaphore and keeps it.
            let sem = client.get_permit_expirable_semaphore(var("LOCK")).unwrap();
            let lease: u64 = var("LEASE_MS").parse().unwrap();
            let _id = sem.acquire(Duration::from_millis(lease)).await.unwrap();
            println!("HELD");
            std::future::pending::<()>().await;
        }
        "pes-renewed" => {
            // Takes a watchdog-renewed permit and keeps it, renewed, until killed.
            let sem = client.get_permit_expirable_semaphore(var("LOCK")).unwrap();
            let permit = sem.acquire_renewed().await.unwrap();
            println!("HELD");
            std::future::pending::<()>().await;
            drop(permit);
        }
        "deadlock-side" => {
            super::deadlocks::deadlock_side(var("URL"), var("FIRST"), var("SECOND")).await
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_grants_across_processes_never_overlap() {
    let server = RedisServer::start();
    let log = HoldLog::create(server.dir());
    let mut children = Vec::new();
    for _ in 0..2 {
        children.push(ChildHolder::spawn(&[
            ("CHILD", "contend".into()),
            ("URL", server.url()),
            ("LOCK", "contended".into()),
            ("COUNTER", "grants".into()),
            ("GRANTS", "500".into()),
            ("LOG", log.path().display().to_string()),
        ]));
    }
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = server.client().await;
        tasks.push(tokio::spawn(contend(
            client,
            server.url(),
            "contended".into(),
            "grants".into(),
            250,
            log.clone(),
        )));
    }
    within(Duration::from_secs(180), "in-process contenders", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    for child in &mut children {
        assert!(
            child.wait(Duration::from_secs(120)),
            "a child contender failed"
        );
    }
    let holds = log.read();
    assert_eq!(holds.len(), 2000);
    let overlaps = log.overlaps();
    assert!(
        overlaps.is_empty(),
        "overlapping holds: {:?}",
        &overlaps[..overlaps.len().min(3)]
    );
    let mut admin = server.admin().await;
    let count: u64 = admin.get("grants").await.unwrap();
    assert_eq!(count, 2000, "a non-atomic increment was lost");
    let _: () = admin.del("grants").await.unwrap();
    assert!(server.keys().await.is_empty());
}

async fn killed_holder_frees_within_its_ttl(lease_ms: u64, watchdog_ms: u64) {
    let server = RedisServer::start();
    let mut holder = ChildHolder::spawn(&[
        ("CHILD", "hold".into()),
        ("URL", server.url()),
        ("LOCK", "victim".into()),
        ("LEASE_MS", lease_ms.to_string()),
        ("WATCHDOG_MS", watchdog_ms.to_string()),
    ]);
    assert!(holder.wait_for_line("HELD"), "child did not take the lock");
    let client = server.client().await;
    let lock = client.get_lock("victim").unwrap();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    });
    // The waiter waits (it tried, and listens) before the holder dies.
    assert!(
        eventually(Duration::from_secs(10), || async {
            server.subscribers("redisson_lock__channel:{victim}").await == 1
        })
        .await,
        "the waiter did not subscribe"
    );
    let ttl = match lock.remain_time_to_live().await.unwrap() {
        RemainingTtl::Expires(ttl) => ttl,
        other => panic!("holder's lock has no TTL: {other:?}"),
    };
    let killed = tokio::time::Instant::now();
    holder.signal("KILL");
    let guard = within(
        Duration::from_secs(30),
        "waiter after the holder died",
        waiting,
    )
    .await
    .unwrap();
    let waited = killed.elapsed();
    // No message announces a death: the waiter's sleep to the TTL ends it, and a
    // loaded machine may be late to wake (a waiter that only listened would run
    // into the 30 s bound above).
    assert!(waited <= ttl + LATE, "waited {waited:?} for a {ttl:?} TTL");
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_with_a_lease_frees_the_lock_within_its_ttl() {
    killed_holder_frees_within_its_ttl(2_000, 30_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_under_the_watchdog_frees_the_lock_within_its_ttl() {
    killed_holder_frees_within_its_ttl(0, 1_500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_process_loses_its_lock_to_a_waiter() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let holder = ChildHolder::spawn(&[
        ("CHILD", "hold".into()),
        ("URL", server.url()),
        ("LOCK", "frozen".into()),
        ("LEASE_MS", "0".into()),
        ("WATCHDOG_MS", watchdog.as_millis().to_string()),
    ]);
    let mut holder = holder;
    assert!(holder.wait_for_line("HELD"));
    holder.signal("STOP");
    let client = server.client().await;
    let started = tokio::time::Instant::now();
    let guard = within(
        Duration::from_secs(10),
        "waiter behind a frozen holder",
        client.get_lock("frozen").unwrap().lock(),
    )
    .await
    .unwrap();
    // Within the frozen holder's last lease (the watchdog's), however late a
    // loaded machine wakes.
    assert!(
        started.elapsed() < watchdog + LATE,
        "took {:?}",
        started.elapsed()
    );
    // Thawed, the holder's watchdog finds the hold gone and does not take it back.
    holder.signal("CONT");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(client
        .get_lock("frozen")
        .unwrap()
        .is_held_by(guard.owner_id())
        .await
        .unwrap());
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_killed_again_and_again_do_not_lose_a_watchdog_hold() {
    let server = RedisServer::start();
    // A 2 s lease, renewed every 667 ms: every renewal's reconnect may be slow on
    // a loaded machine without the lease running out. The kills go on for over
    // two leases, so the hold lives on renewals made on new connections.
    let holder = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(2))
        .await;
    let contender = server.client().await;
    let guard = holder.get_lock("resilient").unwrap().lock().await.unwrap();
    let theirs = contender.get_lock("resilient").unwrap();
    for _ in 0..15 {
        server.kill_clients().await;
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(
            theirs.try_lock().await.unwrap().is_none(),
            "a contender got in while the holder's connection was being killed"
        );
    }
    assert!(!guard.is_lease_lost());
    within(
        Duration::from_secs(10),
        "unlock after reconnects",
        guard.unlock(),
    )
    .await
    .unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_hole_longer_than_the_lease_is_reported_and_harms_nobody() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let watchdog = Duration::from_secs(1);
    let mut config = Config::from_url(&proxy.url()).unwrap();
    config.lock_watchdog_timeout = watchdog;
    config.timeout = Duration::from_millis(500);
    config.connect_timeout = Duration::from_secs(2);
    let holder = Client::connect(config).await.unwrap();
    let contender = server.client().await;
    let guard = holder
        .get_lock("partitioned")
        .unwrap()
        .lock()
        .await
        .unwrap();

    proxy.set_mode(Mode::Blackhole);
    let theirs = within(
        Duration::from_secs(10),
        "contender during the black hole",
        contender.get_lock("partitioned").unwrap().lock(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let healed = tokio::time::Instant::now();
    proxy.set_mode(Mode::Pass);
    within(
        Duration::from_secs(10),
        "loss reported after healing",
        guard.lease_lost(),
    )
    .await;
    // Within one renewal period (a third of the lease) plus a reconnect's margin.
    assert!(
        healed.elapsed() < watchdog / 3 + LATE,
        "took {:?}",
        healed.elapsed()
    );
    let err = within(Duration::from_secs(10), "late unlock", guard.unlock())
        .await
        .unwrap_err();
    assert!(err.is_not_held(), "{err:?}");
    let lock = contender.get_lock("partitioned").unwrap();
    assert!(
        lock.is_held_by(theirs.owner_id()).await.unwrap(),
        "the contender's hold was touched"
    );
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_server_restart_and_all_acquire() {
    let mut server = RedisServer::start();
    let holder = server.client().await;
    // The test config's retry budget (3 x 200 ms) can be shorter than a restart
    // on a loaded machine; a deployment sizes retry_attempts x retry_interval to
    // cover the outages it rides out (the defaults give 4.5 s).
    let waiters = server.client_with(|c| c.retry_attempts = 15).await;
    let baseline = server.lock_client_connections().await;
    let guard = holder.get_lock("restarted").unwrap().lock().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let lock = waiters.get_lock("restarted").unwrap();
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.unlock().await.unwrap();
        }));
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server
                .subscribers("redisson_lock__channel:{restarted}")
                .await
                == 1
        })
        .await
    );
    server.restart(); // an empty server on the same port: the hold is gone
    within(
        Duration::from_secs(20),
        "5 waiters after a restart",
        async {
            for t in tasks {
                t.await.unwrap();
            }
        },
    )
    .await;
    // The holder learns its hold is gone at its next renewal; its unlock says so.
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
    assert_eq!(waiters.subscribed_channels(), 0);
    assert!(server.lock_client_connections().await <= baseline);
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_unlock_message_costs_at_most_the_ttl() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let lease = Duration::from_secs(2);
    let subscribers = || server.subscribers("redisson_lock__channel:{silent}");
    let subscribed = || async { subscribers().await == 1 };
    // The key vanishes without any message (deleted by hand).
    let _held = holder
        .get_lock("silent")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let lock = waiter.get_lock("silent").unwrap();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    });
    assert!(
        eventually(Duration::from_secs(10), subscribed).await,
        "the waiter did not subscribe"
    );
    let mut admin = server.admin().await;
    let deleted = tokio::time::Instant::now();
    let _: () = admin.del("silent").await.unwrap();
    let g = within(
        Duration::from_secs(10),
        "waiter after a silent delete",
        waiting,
    )
    .await
    .unwrap();
    // At most the TTL (a loaded machine may wake late); a waiter that only
    // listened would run into the 10 s bound above.
    assert!(
        deleted.elapsed() < lease + LATE,
        "woken {:?} after the delete",
        deleted.elapsed()
    );
    g.unlock().await.unwrap();

    // The waiter's connection is cut just before the unlock is published. (The
    // first waiter's subscription is gone first, so that the one seen below is
    // the second's.)
    assert!(
        eventually(Duration::from_secs(10), || async {
            subscribers().await == 0
        })
        .await,
        "the first waiter stayed subscribed"
    );
    let guard = holder
        .get_lock("silent")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    });
    assert!(
        eventually(Duration::from_secs(10), subscribed).await,
        "the waiter did not subscribe"
    );
    // Cut the waiter's connection (the one subscribed) right before the unlock:
    // the unlock is published before the waiter re-subscribes.
    assert_eq!(server.kill_subscribers().await, 1);
    let released = tokio::time::Instant::now();
    guard.unlock().await.unwrap();
    let g = within(
        Duration::from_secs(10),
        "waiter after a cut connection",
        waiting,
    )
    .await
    .unwrap();
    assert!(
        released.elapsed() < lease + LATE,
        "woken {:?} after the release",
        released.elapsed()
    );
    g.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// A client reaching `server` through a proxy that can hold its replies
/// back (commands time out after 5 s).
async fn client_behind_a_proxy(server: &RedisServer) -> (Proxy, Client) {
    let proxy = Proxy::start(server.port()).await;
    let mut config = Config::from_url(&proxy.url()).unwrap();
    config.timeout = Duration::from_secs(5);
    let client = Client::connect(config).await.unwrap();
    (proxy, client)
}

/// An acquire whose reply never came: `lock.lock()` is sent with the
/// proxy holding replies back, runs on the server (the lock's key appears),
/// and is dropped before its reply; then replies pass again.
async fn abandon_an_acquire(proxy: &Proxy, server: &RedisServer, lock: RLock) {
    let name = lock.name().to_owned();
    proxy.set_mode(Mode::HoldReplies);
    let task = tokio::spawn(async move { lock.lock().await });
    assert!(
        eventually(Duration::from_secs(5), || async {
            let mut admin = server.admin().await;
            admin.exists::<_, bool>(&name).await.unwrap()
        })
        .await,
        "the acquire of {name} did not run"
    );
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    proxy.set_mode(Mode::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_never_came_is_given_back() {
    let server = RedisServer::start();
    let (proxy, client) = client_behind_a_proxy(&server).await;
    for (name, fair) in [("held-back", false), ("held-back-fair", true)] {
        let lock = if fair {
            client.get_fair_lock(name)
        } else {
            client.get_lock(name)
        }
        .unwrap();
        // Load the scripts first: a NOSCRIPT reply held back would stop the acquire
        // before it ran.
        lock.lock().await.unwrap().unlock().await.unwrap();
        abandon_an_acquire(&proxy, &server, lock).await;
        assert!(
            eventually(Duration::from_secs(5), || async {
                server.keys().await.is_empty()
            })
            .await,
            "the unclaimed hold was left: {:?}",
            server.keys().await
        );
    }
    assert_eq!(client.renewed_holds(), 0);
}

/// A forced unlock ends this client's belief about the lock as an unlock
/// does: every owner's count of it is 0 afterwards. An owner whose guard was
/// forced out then takes the lock again, and that acquire's reply never comes:
/// the hold it took is given back, as for any owner holding nothing. (With the
/// count of the forced hold still believed, the settle would take the new hold
/// for that one and leave it to its lease.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_unlock_leaves_no_count_for_a_settle_to_trust() {
    let server = RedisServer::start();
    let (proxy, client) = client_behind_a_proxy(&server).await;
    for (name, fair) in [("forced-then-lost", false), ("forced-then-lost-fair", true)] {
        let lock = if fair {
            client.get_fair_lock(name)
        } else {
            client.get_lock(name)
        }
        .unwrap()
        .with_owner_id(7);
        // Owner 7 holds it through a guard, and the lock is forced open.
        let guard = lock.lock().await.unwrap();
        assert!(lock.force_unlock().await.unwrap());
        assert!(!lock.is_locked().await.unwrap());
        assert!(guard.is_lease_lost());
        // Owner 7 again; the acquire runs on the server, its reply is held back.
        abandon_an_acquire(&proxy, &server, lock.clone()).await;
        assert!(
            eventually(Duration::from_secs(10), || async {
                !server.keys().await.contains(&name.to_owned())
            })
            .await,
            "{name}: the unclaimed hold was left to its lease"
        );
        drop(guard);
    }
    assert!(
        eventually(Duration::from_secs(10), || async {
            server.keys().await.is_empty()
        })
        .await
    );
    assert_eq!(client.renewed_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_aborted_try_locks_leave_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let held = other.get_lock("aborts").unwrap().lock().await.unwrap();
    for i in 0..300 {
        let lock = if i % 2 == 0 {
            client.get_lock("aborts")
        } else {
            client.get_fair_lock("aborts")
        }
        .unwrap();
        let task = tokio::spawn(async move { lock.try_lock_wait(Duration::from_secs(5)).await });
        if i % 3 == 0 {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
    }
    held.unlock().await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_read_write_waiters_leave_nothing_and_fair_waiters_keep_order() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    // Read-write: waiters on both sides aborted.
    let w = other
        .get_read_write_lock("rw-abort")
        .unwrap()
        .write_lock()
        .lock()
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let rw = client.get_read_write_lock("rw-abort").unwrap();
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                rw.read_lock().lock().await
            } else {
                rw.write_lock().lock().await
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for t in &tasks {
        t.abort();
    }
    w.unlock().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
    assert!(server.keys().await.is_empty());

    // Fair: the middle waiters aborted, the rest keep their order.
    let held = other
        .get_fair_lock("fair-abort")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        waiters.push(join_in_turn(&server, &client, "fair-abort", i, &order).await);
    }
    waiters[2].abort();
    waiters[3].abort();
    assert!(
        eventually(Duration::from_secs(5), || async {
            queue_len(&server, "fair-abort").await == 4
        })
        .await
    );
    held.unlock().await.unwrap();
    for (i, w) in waiters.into_iter().enumerate() {
        if i != 2 && i != 3 {
            within(Duration::from_secs(10), "fair waiter", w)
                .await
                .unwrap();
        }
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 4, 5]);
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.keys().await.is_empty()
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_never_leaves_more_holds_than_the_caller_was_told() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = server
        .client_with(|c| {
            c.timeout = Duration::from_millis(400);
            c.lock_watchdog_timeout = watchdog;
        })
        .await;
    // The task as owner: the mode where an orphan hold could be re-entered.
    let lock = client.get_lock("paused").unwrap().with_task_owner();
    let mut admin = server.admin().await;
    // Load the script, then pause writes (scripts included); reads still answer.
    lock.lock().await.unwrap().unlock().await.unwrap();
    // Taken before the pause is asked for: the pause ends 1200 ms after the
    // server has it, so at least that long after this, however slow the reply.
    let paused = tokio::time::Instant::now();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1200)
        .arg("WRITE")
        .query_async(&mut admin)
        .await
        .unwrap();
    // The first attempt times out (its outcome unknown: it runs when the pause
    // ends). It is settled before the owner's next attempt, so `lock()` rides
    // out the pause and ends up with exactly the one hold its guard stands for.
    let field = format!("{}:{}", client.id(), redisson_locks::current_id());
    let watcher = tokio::spawn({
        let mut admin = admin.clone();
        let field = field.clone();
        async move {
            let mut most = 0;
            while paused.elapsed() < Duration::from_secs(4) {
                let count: Option<u64> = admin.hget("paused", &field).await.unwrap();
                most = most.max(count.unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            most
        }
    });
    let guard = within(Duration::from_secs(10), "lock during a pause", lock.lock())
        .await
        .expect("lock() rides out a pause");
    assert!(
        paused.elapsed() >= Duration::from_millis(1000),
        "acquired during the pause"
    );
    let count: Option<u64> = admin.hget("paused", &field).await.unwrap();
    assert_eq!(count, Some(1), "one guard, one hold");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count: Option<u64> = admin.hget("paused", &field).await.unwrap();
    assert_eq!(count, Some(1), "one guard, one hold");
    guard.unlock().await.unwrap();
    let most = watcher.await.unwrap();
    assert!(most <= 1, "the hold was counted {most} times");
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
    assert_eq!(client.renewed_holds(), 0);
}

/// A contender for the soak: explicit leases (so a frozen holder's validity ends at
/// its deadline), every error tolerated and counted, until `stop_at_ns`.
/// Returns (grants, errors).
async fn soak_contender(
    client: Client,
    lock_name: String,
    log: HoldLog,
    stop_at_ns: u64,
) -> (u64, u64) {
    let lease = Duration::from_secs(2);
    let lock = client.get_lock(lock_name.clone()).unwrap();
    let (mut grants, mut errors) = (0, 0);
    while monotonic_ns() < stop_at_ns {
        let sent_ns = monotonic_ns();
        let guard = match lock
            .try_lock_with_lease(Duration::from_secs(5), lease)
            .await
        {
            Ok(Some(guard)) => guard,
            Ok(None) => continue,
            Err(_) => {
                errors += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let acquired_ns = monotonic_ns();
        tokio::time::sleep(Duration::from_millis(2)).await;
        log.record(&HoldRecord {
            owner: format!("{}:{}", client.id(), guard.owner_id()),
            lock: lock_name.clone(),
            acquired_ns,
            released_ns: monotonic_ns(),
            lease_deadline_ns: sent_ns + lease.as_nanos() as u64,
        });
        grants += 1;
        if guard.unlock().await.is_err() {
            errors += 1;
        }
    }
    (grants, errors)
}

/// The soak: contenders in this process and in two child processes hammer one lock
/// for `SOAK_SECONDS` (default 120) while random faults strike: a child frozen
/// past its lease, every connection killed, Redis killed and restarted (with an
/// append-only file, so locks survive as they would in production). The exclusion
/// checker must find no overlap of valid holds.
///
/// `cargo test --release --test locks soak -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run on purpose (see RELIABILITY.md)"]
async fn soak_contention_with_random_faults() {
    let seconds: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let log = HoldLog::create(server.dir());
    let stop_at = monotonic_ns() + seconds * 1_000_000_000;
    let mut children: Vec<ChildHolder> = (0..2)
        .map(|_| {
            ChildHolder::spawn(&[
                ("CHILD", "soak".into()),
                ("URL", server.url()),
                ("LOCK", "soaked".into()),
                ("LOG", log.path().display().to_string()),
            ])
        })
        .collect();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = server
            .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(1))
            .await;
        let log = log.clone();
        tasks.push(tokio::spawn(soak_contender(
            client,
            "soaked".into(),
            log,
            stop_at,
        )));
    }
    let mut faults = std::collections::BTreeMap::<&str, u32>::new();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    while monotonic_ns() < stop_at {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        tokio::time::sleep(Duration::from_millis(1000 + seed % 2000)).await;
        match seed % 3 {
            0 => {
                let child = &children[(seed >> 8) as usize % children.len()];
                child.signal("STOP");
                tokio::time::sleep(Duration::from_millis(2500)).await;
                child.signal("CONT");
                *faults
                    .entry("child frozen 2.5 s (past its 2 s lease)")
                    .or_default() += 1;
            }
            1 => {
                server.kill_clients().await;
                *faults.entry("every connection killed").or_default() += 1;
            }
            _ => {
                server.restart();
                *faults
                    .entry("redis-server SIGKILLed and restarted")
                    .or_default() += 1;
            }
        }
    }
    let mut grants = 0;
    let mut errors = 0;
    for t in tasks {
        let (g, e) = within(Duration::from_secs(60), "soak contender", t)
            .await
            .unwrap();
        grants += g;
        errors += e;
    }
    for child in &mut children {
        child.kill();
    }
    let holds = log.read();
    let overlaps = log.overlaps();
    println!(
        "soak: {seconds} s, {} holds logged ({grants} in this process), {errors} errors ridden out, faults {faults:?}, overlaps {}",
        holds.len(),
        overlaps.len()
    );
    assert!(
        overlaps.is_empty(),
        "overlapping valid holds: {:?}",
        &overlaps[..overlaps.len().min(3)]
    );
    assert!(
        holds.len() > 100,
        "too few holds to mean anything: {}",
        holds.len()
    );
    // Children were killed mid-run: their last holds expire with their leases.
    assert!(
        eventually(Duration::from_secs(10), || async {
            server.keys().await.is_empty()
        })
        .await
    );
}

#[test]
fn the_exclusion_checker_catches_overlaps_and_respects_lease_deadlines() {
    let dir = std::env::temp_dir().join(format!("checker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = HoldLog::create(&dir);
    let hold = |owner: &str, acquired_ns, released_ns, lease_deadline_ns| HoldRecord {
        owner: owner.into(),
        lock: "l".into(),
        acquired_ns,
        released_ns,
        lease_deadline_ns,
    };
    log.record(&hold("a", 100, 200, u64::MAX));
    log.record(&hold("b", 200, 300, u64::MAX)); // starts as a ends: fine
    log.record(&hold("a", 300, 310, u64::MAX)); // same owner re-entering: fine
    log.record(&hold("c", 400, 900, 450)); // lease ran out at 450
    log.record(&hold("d", 460, 500, u64::MAX)); // after c's deadline: fine
    assert!(log.overlaps().is_empty(), "{:?}", log.overlaps());
    log.record(&hold("e", 480, 520, u64::MAX)); // inside d's hold
    let overlaps = log.overlaps();
    assert_eq!(overlaps.len(), 1, "{overlaps:?}");
    assert_eq!(
        (overlaps[0].0.owner.as_str(), overlaps[0].1.owner.as_str()),
        ("d", "e")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_whose_process_dies_at_the_head_is_skipped_in_order() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(2);
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let held = client
        .get_fair_lock("dying-head")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut child = ChildHolder::spawn(&[
        ("CHILD", "fair-wait".into()),
        ("URL", server.url()),
        ("LOCK", "dying-head".into()),
        ("FAIR_WAIT_MS", wait.as_millis().to_string()),
    ]);
    assert!(
        eventually(Duration::from_secs(10), || async {
            queue_len(&server, "dying-head").await == 1
        })
        .await,
        "the child did not join the line"
    );
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..3 {
        waiters.push(join_in_turn(&server, &client, "dying-head", i, &order).await);
    }
    // The child, first in line, dies without leaving the line.
    child.kill();
    held.unlock().await.unwrap();
    let released = tokio::time::Instant::now();
    within(
        Duration::from_secs(20),
        "waiters behind the dead head",
        async {
            for w in waiters {
                w.await.unwrap();
            }
        },
    )
    .await;
    // The dead head had the fair-lock wait to take the freed lock; the next waiter
    // checks at least twice per wait: about one and a half waits, to which a
    // loaded machine may add. A line stuck behind its dead head runs into the
    // 20 s bound above.
    assert!(
        released.elapsed() < wait * 2 + LATE,
        "took {:?}",
        released.elapsed()
    );
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

/// A process whose fair waiters are parked in its client's line (one waits in
/// Redis, the others only have their entries) is killed while they stand
/// first in line: each dead entry is skipped within about a wait of becoming
/// first, the live waiters behind are served in their order, and nothing is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_with_parked_fair_waiters_does_not_stick_the_line() {
    const DEAD: usize = 4;
    let name = "dying-line";
    let server = RedisServer::start();
    let wait = Duration::from_secs(1);
    let client = server
        .client_with(|c| c.fair_lock_wait_timeout = wait)
        .await;
    let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
    let mut child = ChildHolder::spawn(&[
        ("CHILD", "fair-waiters".into()),
        ("URL", server.url()),
        ("LOCK", name.into()),
        ("WAITERS", DEAD.to_string()),
        ("FAIR_WAIT_MS", wait.as_millis().to_string()),
    ]);
    assert!(
        eventually(Duration::from_secs(10), || async {
            queue_len(&server, name).await == DEAD
        })
        .await,
        "the child's waiters did not join the line"
    );
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..3 {
        waiters.push(join_in_turn(&server, &client, name, i, &order).await);
    }
    child.kill();
    held.unlock().await.unwrap();
    let released = tokio::time::Instant::now();
    within(
        Duration::from_secs(30),
        "waiters behind the dead line",
        async {
            for w in waiters {
                w.await.unwrap();
            }
        },
    )
    .await;
    // Each dead entry costs about a wait and a half once first (the live
    // head checks at least twice per wait); a line stuck behind one runs
    // into the 30 s bound above.
    let bound = wait * 2 * DEAD as u32 + LATE;
    assert!(released.elapsed() < bound, "took {:?}", released.elapsed());
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

/// A release sent on a connection that the server has just cut (CLIENT KILL) may
/// or may not have run: the client settles it on the new connection before
/// `unlock()` answers, so the caller is told the truth (released), not the
/// first try's "broken pipe", and the lock is free at once. Every kind of
/// release goes through that one path: `unlock()`, a dropped guard, a read
/// hold, a fair hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_by_a_killed_connection_is_settled_before_it_answers() {
    let server = RedisServer::start();
    let client = server.client().await;
    let reentrant = client.get_lock("cut-release").unwrap();
    let fair = client.get_fair_lock("cut-release-fair").unwrap();
    let rw = client.get_read_write_lock("cut-release-rw").unwrap();
    for round in 0..10 {
        for lock in [&reentrant, &fair, &rw.read_lock(), &rw.write_lock()] {
            let guard = lock.lock().await.unwrap();
            server.kill_clients().await;
            within(Duration::from_secs(20), "the release", guard.unlock())
                .await
                .unwrap_or_else(|e| panic!("round {round}, {}: unlock failed: {e:?}", lock.name()));
            let keys = server.keys().await;
            assert!(
                !keys.contains(&lock.name().to_owned()),
                "round {round}: {} still held",
                lock.name()
            );
        }
        // A dropped guard's release takes the same path: free within a moment.
        drop(reentrant.lock().await.unwrap());
        server.kill_clients().await;
        assert!(
            eventually(Duration::from_secs(10), || async {
                !server.keys().await.contains(&"cut-release".to_owned())
            })
            .await
        );
    }
    assert_nothing_left(&server, &[&client]).await;
}

/// Retries after a transient failure are jittered in full, as `retry_interval`
/// documents: waiters of separate clients that fail together (a replica answers
/// every lock script with READONLY, a "not now" refusal) retry at instants drawn
/// at random up to the interval, so they give up spread over most of it rather
/// than all at once. Judged by the spread of the outcomes, not by speed: with a
/// fixed pause every waiter gives up within a few ms of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_a_shared_failure_are_spread_by_full_jitter() {
    let primary = RedisServer::start();
    let replica = RedisServer::start_replica_of(&primary).await;
    let interval = Duration::from_millis(1000);
    let mut clients = Vec::new();
    for _ in 0..12 {
        clients.push(
            replica
                .client_with(|c| {
                    c.retry_attempts = 3;
                    c.retry_interval = interval;
                    c.replica_sync = Some(0);
                })
                .await,
        );
    }
    let start = Arc::new(tokio::sync::Barrier::new(clients.len()));
    let waiters: Vec<_> = clients
        .iter()
        .map(|client| {
            let lock = client.get_lock("on-a-replica").unwrap();
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                let outcome = lock.lock().await.map(|_| ());
                (outcome, tokio::time::Instant::now())
            })
        })
        .collect();
    let mut ended = Vec::new();
    for waiter in waiters {
        let (outcome, at) = within(Duration::from_secs(60), "a waiter gives up", waiter)
            .await
            .unwrap();
        let err = outcome.expect_err("a replica takes no lock");
        assert!(err.is_transient(), "{err:?}");
        ended.push(at);
    }
    let (first, last) = (
        ended.iter().min().copied().unwrap(),
        ended.iter().max().copied().unwrap(),
    );
    let spread = last - first;
    assert!(
        spread >= interval * 3 / 10,
        "12 waiters that failed together gave up within {spread:?} of each other: \
         their retries were not jittered"
    );
}

/// Fair waiters whose processes are killed while they wait, and nobody comes
/// back: the line (the queue and its deadlines) leaves Redis by itself within a
/// fair wait of the last script that touched it. Before, both keys stayed for
/// ever, with no TTL, until someone waited on that lock again (Redisson's users
/// report the same leftovers, redisson#6150).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_line_whose_waiters_all_died_leaves_redis_within_a_wait() {
    let server = RedisServer::start();
    let wait = Duration::from_secs(2);
    // A foreign holder (a Java service, say) whose hold ends with its lease.
    let mut admin = server.admin().await;
    let _: () = admin.hset("abandoned", "elsewhere:1", 1).await.unwrap();
    let _: () = admin.pexpire("abandoned", 3_000).await.unwrap();
    let mut children: Vec<ChildHolder> = (0..3)
        .map(|_| {
            ChildHolder::spawn(&[
                ("CHILD", "fair-wait".into()),
                ("URL", server.url()),
                ("LOCK", "abandoned".into()),
                ("FAIR_WAIT_MS", wait.as_millis().to_string()),
            ])
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(20), || async {
            queue_len(&server, "abandoned").await == 3
        })
        .await,
        "the children did not join the line"
    );
    for child in &mut children {
        child.kill();
    }
    let killed = tokio::time::Instant::now();
    assert!(
        eventually(wait + LATE, || async { server.keys().await.is_empty() }).await,
        "left behind {:?} after the waiters died",
        server.keys().await
    );
    eprintln!(
        "the line left Redis {:?} after its waiters died",
        killed.elapsed()
    );
}
