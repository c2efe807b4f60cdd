//! The semaphore (`RSemaphore`) on Redisson's layout: the count, the bound on
//! concurrent holders, waiting on the channel, and cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::{eventually, gives_up_on_time, within, RedisServer, SYNC_RECHECK};

/// Waits (bounded) until no channel is subscribed on the server and none of
/// `clients` holds a subscription.
pub(super) async fn assert_unsubscribed(server: &RedisServer, clients: &[&redisson_locks::Client]) {
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await,
        "subscriptions left behind: {:?}",
        server.channels().await
    );
    for client in clients {
        assert_eq!(client.subscribed_channels(), 0, "client still subscribed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_permits_admit_at_most_three_of_fifty_tasks_over_four_clients() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(server.client().await);
    }
    let sem = clients[0].get_semaphore("pool").unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());

    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let sem = clients[i % 4].get_semaphore("pool").unwrap();
        let mut admin = server.admin().await;
        tasks.push(tokio::spawn(async move {
            let mut most = 0;
            for _ in 0..4 {
                sem.acquire().await.unwrap();
                // Checked on the server: how many are inside right now.
                let inside: i64 = admin.incr("pool-inside", 1).await.unwrap();
                most = most.max(inside);
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _: i64 = admin.decr("pool-inside", 1).await.unwrap();
                sem.release().await.unwrap();
            }
            most
        }));
    }
    let mut most = 0;
    within(Duration::from_secs(120), "50 tasks", async {
        for task in tasks {
            most = most.max(task.await.unwrap());
        }
    })
    .await;
    eprintln!(
        "semaphore(3), 50 tasks x 4 acquisitions over 4 clients: {:?}, at most {most} inside",
        started.elapsed()
    );
    assert!(most <= 3, "{most} tasks were inside at once");
    assert!(most >= 2, "the permits were never used together ({most})");
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    let refs: Vec<&redisson_locks::Client> = clients.iter().collect();
    assert_unsubscribed(&server, &refs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_follows_redissons_rules() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client.get_semaphore("count").unwrap();
    let mut admin = server.admin().await;

    // Never set: no permits, nothing to take, nothing written.
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(!sem.try_acquire().await.unwrap());
    assert_eq!(sem.drain_permits().await.unwrap(), 0);
    assert!(server.keys().await.is_empty());

    assert!(sem.try_set_permits(5).await.unwrap());
    assert!(!sem.try_set_permits(9).await.unwrap(), "set only once");
    let raw: String = admin.get("count").await.unwrap();
    assert_eq!(raw, "5", "the key is the count, as a string");

    assert!(sem.try_acquire_many(3).await.unwrap());
    assert!(!sem.try_acquire_many(3).await.unwrap(), "only 2 left");
    assert!(
        sem.try_acquire_many(0).await.unwrap(),
        "zero succeeds at once"
    );
    sem.release_many(0).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);

    sem.add_permits(-4).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), -2);
    assert!(!sem.try_acquire().await.unwrap());
    sem.release_many(3).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    sem.add_permits(4).await.unwrap();
    assert_eq!(sem.drain_permits().await.unwrap(), 5);
    assert_eq!(sem.available_permits().await.unwrap(), 0);

    // Bad input is refused before any I/O.
    let too_many = u32::try_from(i32::MAX).unwrap() + 1;
    assert!(sem
        .acquire_many(too_many)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(sem
        .release_many(too_many)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(sem
        .try_set_permits(too_many)
        .await
        .unwrap_err()
        .is_invalid_argument());
    let forever = redisson_locks::MAX_DURATION + Duration::from_secs(1);
    assert!(sem
        .try_acquire_wait(forever)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(client.get_semaphore("").unwrap_err().is_invalid_argument());

    // A key of another type is reported, not overwritten.
    let _: () = admin.hset("hash", "f", 1).await.unwrap();
    let wrong = client.get_semaphore("hash").unwrap();
    assert!(wrong.try_acquire().await.unwrap_err().is_wrong_type());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_sleep_on_one_subscription_and_a_release_wakes_them() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let sem = client.get_semaphore("gate").unwrap();
    sem.try_set_permits(0).await.unwrap();

    let mut waiters = Vec::new();
    for _ in 0..10 {
        let sem = sem.clone();
        waiters.push(tokio::spawn(async move { sem.acquire().await }));
    }
    // A waiter of several permits beside them.
    let big = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire_many(5).await })
    };
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_sc:{gate}").await == 1
        })
        .await
    );
    assert_eq!(
        client.subscribed_channels(),
        1,
        "one subscription for 11 waiters"
    );
    server.reset_stats().await;

    // Ten permits from another client: the ten single waiters get one each
    // (the big one may take five first; then five more follow).
    let released = Instant::now();
    other
        .get_semaphore("gate")
        .unwrap()
        .release_many(10)
        .await
        .unwrap();
    let mut done = 0;
    within(Duration::from_secs(10), "the woken waiters", async {
        loop {
            done =
                waiters.iter().filter(|w| w.is_finished()).count() + usize::from(big.is_finished());
            if done >= 6 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    eprintln!(
        "a release of 10 woke {done} waiters in {:?}",
        released.elapsed()
    );
    assert!(
        released.elapsed() < SYNC_RECHECK / 2,
        "woken by the message, not a recheck"
    );
    // Give everyone what they need and let them finish.
    sem.release_many(10).await.unwrap();
    within(Duration::from_secs(10), "every waiter", async {
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        big.await.unwrap().unwrap();
    })
    .await;
    assert_eq!(sem.available_permits().await.unwrap(), 5);
    assert_unsubscribed(&server, &[&client, &other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_acquire_gives_up_on_time() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client.get_semaphore("timed").unwrap();
    sem.try_set_permits(1).await.unwrap();
    assert!(sem.try_acquire().await.unwrap());
    let wait = Duration::from_millis(300);
    gives_up_on_time(wait, async { sem.try_acquire_wait(wait).await.unwrap() }).await;
    sem.release().await.unwrap();
    // Free: the first attempt takes it (the wait is only a bound).
    assert!(sem.try_acquire_wait(Duration::from_secs(5)).await.unwrap());
    assert_unsubscribed(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cancelled_acquires_leave_the_count_exact() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    client
        .get_semaphore("contested")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    // Others take and give back permits all along.
    let mut churn = Vec::new();
    for _ in 0..2 {
        let sem = holder.get_semaphore("contested").unwrap();
        let stop = stop.clone();
        churn.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                sem.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_micros(300)).await;
                sem.release().await.unwrap();
            }
        }));
    }

    let sem = client.get_semaphore("contested").unwrap();
    let (mut acquired, mut abandoned) = (0, 0);
    within(Duration::from_secs(120), "1000 cancelled acquires", async {
        for i in 0..1000u64 {
            // 0 to ~1.2 ms: cut before the script is sent, while it runs, while
            // subscribing, while sleeping.
            let limit = Duration::from_micros((i * 7919) % 1200);
            match tokio::time::timeout(limit, sem.acquire()).await {
                Ok(taken) => {
                    taken.unwrap();
                    acquired += 1;
                    sem.release().await.unwrap();
                }
                Err(_) => abandoned += 1,
            }
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for task in churn {
        task.await.unwrap();
    }
    eprintln!("{acquired} acquired, {abandoned} cancelled");
    assert!(abandoned > 100, "only {abandoned} acquires were cut short");
    // Permits a cancelled acquire took come back from the client's thread.
    assert!(
        eventually(Duration::from_secs(5), || async {
            sem.available_permits().await.unwrap() == 2
        })
        .await,
        "permits lost or doubled: {}",
        sem.available_permits().await.unwrap()
    );
    assert_unsubscribed(&server, &[&client, &holder]).await;
}

/// A semaphore key that someone else set to a non-number is answered with an
/// error naming the key, at once, by every call that reads it, and is never
/// written over (before: `acquire()` waited for ever, re-checking every 5 s, and
/// `drain_permits()` overwrote the value with 0).
#[tokio::test]
async fn a_foreign_value_is_refused_at_once_and_left_as_it_is() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let _: () = admin.set("foreign-sem", "not a number").await.unwrap();
    let semaphore = client.get_semaphore("foreign-sem").unwrap();
    let limit = Duration::from_secs(20);
    let errors = [
        within(limit, "acquire", semaphore.acquire())
            .await
            .unwrap_err(),
        within(limit, "try_acquire", semaphore.try_acquire())
            .await
            .unwrap_err(),
        within(
            limit,
            "try_acquire_wait",
            semaphore.try_acquire_wait(Duration::from_secs(30)),
        )
        .await
        .unwrap_err(),
        within(limit, "drain_permits", semaphore.drain_permits())
            .await
            .unwrap_err(),
    ];
    for err in errors {
        assert!(err.to_string().contains("foreign-sem"), "{err}");
        assert!(!err.is_transient(), "{err:?}");
    }
    let value: String = admin.get("foreign-sem").await.unwrap();
    assert_eq!(value, "not a number", "never written over");
    // Another type: WRONGTYPE, naming the key.
    let _: () = admin.del("foreign-sem").await.unwrap();
    let _: () = admin.rpush("foreign-sem", "x").await.unwrap();
    let err = within(limit, "acquire", semaphore.acquire())
        .await
        .unwrap_err();
    assert!(err.is_wrong_type(), "{err:?}");
}

/// Connections cut every 50 to 150 ms while sixteen tasks acquire, many of
/// them dropped in flight: no permit is lost. Before, an attempt whose reply
/// was lost (or was still in flight when it was dropped and then failed) could
/// have taken permits nobody held, for good: a third of them vanished. Now each
/// attempt leaves a mark, and a settle gives back what the mark says it took.
/// Permits are given back here by a plain connection that is never cut, so
/// that only the acquires' fate is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_and_dropped_acquires_lose_no_permit() {
    const PERMITS: i64 = 20;
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.timeout = Duration::from_millis(300))
        .await;
    let sem = client.get_semaphore("cut").unwrap();
    assert!(sem.try_set_permits(PERMITS as u32).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let (mut tasks, taken) = (Vec::new(), Arc::new(std::sync::atomic::AtomicU64::new(0)));
    for t in 0..16u64 {
        let (sem, stop, taken) = (sem.clone(), stop.clone(), taken.clone());
        let mut giver = server.admin().await;
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                i += 16;
                // 0 to 3 ms: dropped before the script, while it runs, while
                // its reply is on the way; some never dropped.
                let limit = Duration::from_micros((i * 7919) % 3000);
                let attempt = sem.try_acquire_wait(Duration::from_millis(200));
                if let Ok(Ok(true)) = tokio::time::timeout(limit, attempt).await {
                    taken.fetch_add(1, Ordering::Relaxed);
                    let _: i64 = giver.incr("cut", 1).await.unwrap();
                    let _: i64 = giver.publish("redisson_sc:{cut}", 1).await.unwrap();
                }
            }
        }));
    }
    let cuts = cut_for_four_seconds(&server, &stop, tasks).await;
    assert!(cuts > 10);
    let acquired = format!(
        "{} acquired over {cuts} cuts",
        taken.load(Ordering::Relaxed)
    );
    assert_count_comes_back(&server, "cut", PERMITS, &acquired).await;
}

/// The same for releases. Connections cut every 50 to 150 ms while sixteen
/// tasks each take a permit (through a plain connection that is never cut)
/// and give it back through the cut client, many of the releases dropped in
/// flight: no permit is lost and none is doubled. Before, a release whose
/// reply was lost could not be sent again (it might give back two) and its
/// permit could be gone for good: the campaign of cuts saw both of two
/// permits vanish. Now each release leaves a receipt, and is sent again under
/// it until the server answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_and_dropped_releases_lose_no_permit_and_double_none() {
    const PERMITS: i64 = 20;
    let name = "cut-release";
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.timeout = Duration::from_millis(300))
        .await;
    let sem = client.get_semaphore(name).unwrap();
    assert!(sem.try_set_permits(PERMITS as u32).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let (mut tasks, released) = (Vec::new(), Arc::new(std::sync::atomic::AtomicU64::new(0)));
    let failed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for t in 0..16u64 {
        let (sem, stop, released, failed) =
            (sem.clone(), stop.clone(), released.clone(), failed.clone());
        let mut taker = server.admin().await;
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                i += 16;
                let left: i64 = taker.decr(name, 1).await.unwrap();
                if left < 0 {
                    let _: i64 = taker.incr(name, 1).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                // 0 to 3 ms: dropped before the script, while it runs, while
                // its reply is on the way; some never dropped.
                let limit = Duration::from_micros((i * 7919) % 3000);
                match tokio::time::timeout(limit, sem.release()).await {
                    Ok(Err(_)) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(())) | Err(_) => {
                        released.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let cuts = cut_for_four_seconds(&server, &stop, tasks).await;
    assert!(cuts > 10);
    // Each cut lasts a moment: every resend reaches the server well within
    // the settle's budget, so no release ends in doubt.
    assert_eq!(failed.load(Ordering::Relaxed), 0, "releases that gave up");
    let released = format!(
        "{} released over {cuts} cuts",
        released.load(Ordering::Relaxed)
    );
    assert_count_comes_back(&server, name, PERMITS, &released).await;
}

/// Cuts the crate's connections every 50 to 150 ms for 4 s, then sets
/// `stop` and waits for `tasks`; how many cuts.
async fn cut_for_four_seconds(
    server: &RedisServer,
    stop: &Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
) -> usize {
    let cutting = server.keep_cutting(stop);
    let stopping = async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, Ordering::Relaxed);
    };
    let cuts = tokio::join!(cutting, stopping).0;
    for task in tasks {
        task.await.unwrap();
    }
    cuts
}

/// Semaphore `name`'s count comes back to exactly `permits` (within 40 s:
/// the settles run from the client's thread), no permit lost or doubled;
/// `done` says what the tasks did, for the log.
async fn assert_count_comes_back(server: &RedisServer, name: &str, permits: i64, done: &str) {
    let available = || async {
        let mut admin = server.admin().await;
        let n: i64 = admin.get(name).await.unwrap();
        n
    };
    eprintln!("{done}; {} available right after", available().await);
    assert!(
        eventually(Duration::from_secs(40), || async {
            available().await == permits
        })
        .await,
        "permits lost or doubled: {} of {permits} available",
        available().await
    );
}

/// Of one client's waiters for one permit, one waits in Redis and the others
/// are parked behind it, sending nothing: they get the permit in the order
/// they arrived, each with a handful of scripts, however many wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_waiters_of_one_permit_are_served_in_arrival_order() {
    const WAITERS: usize = 40;
    let name = "sem-line";
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let held = holder.get_semaphore(name).unwrap();
    assert!(held.try_set_permits(1).await.unwrap());
    held.acquire().await.unwrap();
    let before = server.command_calls("evalsha").await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let semaphore = client.get_semaphore(name).unwrap();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            semaphore.acquire().await.unwrap();
            order.lock().unwrap().push(i);
            semaphore.release().await.unwrap();
        }));
        // Arrival order is the order they entered the line.
        let waiting = i + 1;
        assert!(
            eventually(SYNC_RECHECK, || async {
                client.waiting_for(name) == waiting
            })
            .await,
            "{} waiting, expected {waiting}",
            client.waiting_for(name)
        );
    }
    // One of them tried (and, once subscribed, tried again); the others sent
    // nothing while they waited.
    let attempts = server.command_calls("evalsha").await - before;
    assert!(
        (1..=3).contains(&attempts),
        "{attempts} attempts for {WAITERS} waiters of one client"
    );
    assert_eq!(client.subscribed_channels(), 1);

    held.release().await.unwrap();
    within(SYNC_RECHECK * 4, "the waiters", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    // An acquire, a release, and about one attempt of the next head while the
    // one before still held the permit (all trying at every release would be
    // hundreds).
    let commands = server.command_calls("evalsha").await - before;
    assert!(
        commands <= 4 * WAITERS as u64 + 6,
        "{commands} scripts for {WAITERS} acquisitions and releases"
    );
    assert_eq!(client.waiting_for(name), 0);
    assert_eq!(held.available_permits().await.unwrap(), 1);
}
