//! The permit-expirable semaphore (`RPermitExpirableSemaphore`) on Redisson's
//! layout: ids, leases, expiry, and a holder process that dies.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::support::child::ChildHolder;
use crate::support::{eventually, within, RedisServer, SYNC_RECHECK};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_have_ids_and_leases() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client.get_permit_expirable_semaphore("pes").unwrap();
    let mut admin = server.admin().await;
    let lease = Duration::from_secs(60);

    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert_eq!(sem.try_acquire(lease).await.unwrap(), None);
    assert!(sem.try_set_permits(2).await.unwrap());
    assert!(!sem.try_set_permits(5).await.unwrap());

    let a = sem.try_acquire(lease).await.unwrap().expect("a permit");
    let b = sem.acquire(Duration::from_millis(400)).await.unwrap();
    assert_ne!(a, b);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    // The ids are stored raw (16 bytes), leases as epoch-ms scores.
    let out: Vec<(Vec<u8>, f64)> = admin
        .zrange_withscores("{pes}:timeout", 0, -1)
        .await
        .unwrap();
    assert_eq!(out.len(), 2);
    assert!(out.iter().any(|(id, _)| id.as_slice() == a.as_bytes()));

    // b's short lease ends: the permit comes back by itself, and a waiter
    // sleeping on the semaphore gets it without any release.
    // The waiter sleeps to the lease's end it was told of, not to a recheck.
    let started = Instant::now();
    let c = within(
        Duration::from_secs(10),
        "an acquire behind an expiring lease",
        sem.acquire(lease),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < SYNC_RECHECK / 2,
        "{:?}",
        started.elapsed()
    );
    assert!(!sem.try_release(&b).await.unwrap(), "b's lease is over");
    assert!(sem.release(&b).await.unwrap_err().is_not_held());

    // A wrong id is refused; a right one releases once.
    let stranger: redisson_locks::PermitId = "0123456789abcdef0123456789abcdef".parse().unwrap();
    let err = sem.release(&stranger).await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    assert!(sem.update_lease(&a, Duration::from_secs(5)).await.unwrap());
    assert!(!sem.update_lease(&stranger, lease).await.unwrap());
    sem.release(&a).await.unwrap();
    assert!(sem.release(&a).await.unwrap_err().is_not_held());
    sem.release(&c).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    sem.add_permits(-1).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);

    // Absurd leases are refused before any I/O.
    assert!(sem
        .acquire(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    let forever = redisson_locks::MAX_DURATION + Duration::from_secs(1);
    assert!(sem
        .try_acquire(forever)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(sem
        .update_lease(&stranger, Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(client.subscribed_channels(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_process_gives_its_permit_back_within_its_lease() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client.get_permit_expirable_semaphore("workers").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let lease = Duration::from_millis(1500);

    let mut child = ChildHolder::spawn(&[
        ("CHILD", "pes-hold".into()),
        ("URL", server.url()),
        ("LOCK", "workers".into()),
        ("LEASE_MS", lease.as_millis().to_string()),
    ]);
    assert!(
        child.wait_for_line("HELD"),
        "the child did not take the permit"
    );
    let taken = Instant::now();
    child.kill();
    assert_eq!(
        sem.try_acquire(Duration::from_secs(10)).await.unwrap(),
        None
    );

    // Waiting, not polling: the wait wakes when the dead holder's lease ends.
    let id = within(
        Duration::from_secs(10),
        "the permit of the killed child",
        sem.acquire(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let back_after = taken.elapsed();
    eprintln!("the killed child's permit (lease {lease:?}) was taken again {back_after:?} after it was taken");
    // At the lease's end (a loaded machine may be late), not at a recheck (5 s
    // after the wait began).
    assert!(
        back_after < lease + Duration::from_secs(2),
        "{back_after:?}"
    );
    sem.release(&id).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_never_keep_a_permit() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client.get_permit_expirable_semaphore("cut").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let lease = Duration::from_secs(60);
    // Another client takes and gives back the one permit all along, so the
    // acquires below wait (and are cut) at every stage.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = server.client().await;
    let churn = {
        let sem = other.get_permit_expirable_semaphore("cut").unwrap();
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let id = sem.acquire(lease).await.unwrap();
                tokio::time::sleep(Duration::from_micros(500)).await;
                sem.release(&id).await.unwrap();
            }
        })
    };
    let mut abandoned = 0;
    for i in 0..300u64 {
        let limit = Duration::from_micros((i * 7919) % 1500);
        match tokio::time::timeout(limit, sem.acquire(lease)).await {
            Ok(id) => sem.release(&id.unwrap()).await.unwrap(),
            Err(_) => abandoned += 1,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.await.unwrap();
    assert!(abandoned > 30, "only {abandoned} cut short");
    assert!(
        eventually(Duration::from_secs(5), || async {
            sem.available_permits().await.unwrap() == 1
        })
        .await
    );
    let mut admin = server.admin().await;
    let out: i64 = admin.zcard("{cut}:timeout").await.unwrap();
    assert_eq!(out, 0, "a cancelled acquire left its permit out");
}

/// Foreign values in the permit-expirable semaphore's keys are refused at once,
/// naming the key that is wrong, and nothing is written (before: `acquire`
/// waited for ever, `available_permits` answered `Ok(0)`, and a leases key of
/// another type was blamed on the semaphore's key).
#[tokio::test]
async fn foreign_values_are_refused_at_once_naming_the_wrong_key() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let limit = Duration::from_secs(20);
    let lease = Duration::from_secs(10);

    let _: () = admin.set("pes-text", "not a number").await.unwrap();
    let texty = client.get_permit_expirable_semaphore("pes-text").unwrap();
    let acquired = within(limit, "acquire", texty.acquire(lease)).await;
    let available = within(limit, "available", texty.available_permits()).await;
    for err in [acquired.unwrap_err(), available.unwrap_err()] {
        assert!(err.to_string().contains("pes-text"), "{err}");
        assert!(!err.is_transient(), "{err:?}");
    }
    let value: String = admin.get("pes-text").await.unwrap();
    assert_eq!(value, "not a number", "never written over");

    let _: () = admin.set("pes-typed", 3).await.unwrap();
    let leases = "{pes-typed}:timeout";
    let typed = client.get_permit_expirable_semaphore("pes-typed").unwrap();
    let _: () = admin.rpush(leases, "x").await.unwrap();
    let err = within(limit, "acquire", typed.acquire(lease))
        .await
        .unwrap_err();
    assert!(err.is_wrong_type(), "{err:?}");
    assert!(err.to_string().contains(leases), "{err}");
    let permits: i64 = admin.get("pes-typed").await.unwrap();
    assert_eq!(permits, 3, "no permit taken");
}

/// Connections cut every 50 to 150 ms while sixteen tasks acquire permits
/// leased for a minute, many of them dropped in flight: every permit is back
/// long before its lease would end. Before, an attempt whose reply was lost
/// while dropped, or whose give-back met a cut connection, left its permit out
/// with no holder until the lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_and_dropped_acquires_leave_no_permit_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const PERMITS: i64 = 20;
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.timeout = Duration::from_millis(300))
        .await;
    let sem = client.get_permit_expirable_semaphore("cut").unwrap();
    assert!(sem.try_set_permits(PERMITS as u32).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..16u64 {
        let (sem, stop) = (sem.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                i += 16;
                let limit = Duration::from_micros((i * 7919) % 3000);
                let attempt =
                    sem.try_acquire_wait(Duration::from_millis(200), Duration::from_secs(60));
                if let Ok(Ok(Some(id))) = tokio::time::timeout(limit, attempt).await {
                    // Repeated until answered: releasing an id twice frees it once.
                    while sem.try_release(&id).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    let cuts = {
        let stopper = stop.clone();
        let stopping = async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            stopper.store(true, Ordering::Relaxed);
        };
        tokio::join!(server.keep_cutting(&stop), stopping).0
    };
    for task in tasks {
        task.await.unwrap();
    }
    assert!(cuts > 10);
    let observer = server.client().await;
    let sem = observer.get_permit_expirable_semaphore("cut").unwrap();
    assert!(
        eventually(Duration::from_secs(40), || async {
            sem.available_permits().await.unwrap() == PERMITS
        })
        .await,
        "permits out with no holder: {} of {PERMITS} available",
        sem.available_permits().await.unwrap()
    );
}

/// The watchdog timeout of the renewed-permit tests: renewed every 200 ms.
const RENEW_LEASE: Duration = Duration::from_millis(600);

async fn lease_end(admin: &mut redis::aio::MultiplexedConnection, name: &str, id: &[u8]) -> f64 {
    let key = format!("{{{name}}}:timeout");
    let score: Option<f64> = admin.zscore(key, id).await.unwrap();
    score.expect("the permit is out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_permit_lease_moves_while_held_and_ends_with_release() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = RENEW_LEASE)
        .await;
    let sem = client.get_permit_expirable_semaphore("renewed").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let mut admin = server.admin().await;

    let permit = sem.acquire_renewed().await.unwrap();
    assert!(permit.valid_for().unwrap() <= RENEW_LEASE);
    assert_eq!(client.renewed_holds(), 1);
    let id = *permit.id().as_bytes();
    let first = lease_end(&mut admin, "renewed", &id).await;
    // Five leases long: the score keeps moving, the permit never comes back.
    let mut last = first;
    let mut moves = 0;
    for _ in 0..10 {
        tokio::time::sleep(RENEW_LEASE / 2).await;
        assert_eq!(sem.available_permits().await.unwrap(), 0, "came back");
        let now = lease_end(&mut admin, "renewed", &id).await;
        assert!(now >= last, "the lease moved back");
        moves += usize::from(now > last);
        last = now;
    }
    println!(
        "renewed permit: lease end moved {moves} times, by {} ms",
        last - first
    );
    assert!(moves >= 5, "moved {moves} times");
    assert!(last - first >= 2_000.0);
    assert!(!permit.is_lease_lost());
    assert!(permit.valid_for().is_some());

    permit.release().await.unwrap();
    assert_eq!(client.renewed_holds(), 0);
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(server.keys().await.iter().all(|k| k != "{renewed}:timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_permit_released_elsewhere_is_reported_lost() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = RENEW_LEASE)
        .await;
    let sem = client.get_permit_expirable_semaphore("taken-away").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let permit = sem.acquire_renewed().await.unwrap();
    // Released by id (as a Java client could): the next renewal finds it gone.
    sem.release(&permit.id()).await.unwrap();
    within(RENEW_LEASE * 2, "lease_lost", permit.lease_lost()).await;
    assert_eq!(permit.valid_for(), None);
    assert_eq!(client.renewed_holds(), 0);
    assert!(permit.release().await.unwrap_err().is_not_held());
    assert_eq!(sem.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_permit_is_released_promptly() {
    let server = RedisServer::start();
    let client = server.client().await; // the default 30 s watchdog
    let sem = client.get_permit_expirable_semaphore("dropped").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let permit = sem.acquire_renewed().await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    let started = Instant::now();
    drop(permit);
    assert!(
        eventually(Duration::from_secs(5), || async {
            sem.available_permits().await.unwrap() == 1
        })
        .await
    );
    println!("dropped permit back after {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(client.renewed_holds(), 0);
    // A waiter behind a dropped permit gets it without the lease (30 s).
    let holder = sem.acquire_renewed().await.unwrap();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.try_acquire_renewed(Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(holder);
    let next = within(Duration::from_secs(10), "the waiter", waiter)
        .await
        .unwrap()
        .unwrap()
        .expect("the dropped permit");
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_of_a_renewed_permit_gives_it_back_within_one_lease() {
    let server = RedisServer::start();
    let client = server.client().await;
    let sem = client
        .get_permit_expirable_semaphore("renewed-kill")
        .unwrap();
    sem.try_set_permits(1).await.unwrap();
    let lease = Duration::from_millis(1000);

    let mut child = ChildHolder::spawn(&[
        ("CHILD", "pes-renewed".into()),
        ("URL", server.url()),
        ("LOCK", "renewed-kill".into()),
        ("WATCHDOG_MS", lease.as_millis().to_string()),
    ]);
    assert!(child.wait_for_line("HELD"), "the child took no permit");
    // Renewed: held past several leases while the child lives.
    tokio::time::sleep(lease * 3).await;
    assert_eq!(sem.available_permits().await.unwrap(), 0, "not renewed");
    let killed = Instant::now();
    child.kill();
    assert!(
        eventually(lease + Duration::from_secs(5), || async {
            sem.available_permits().await.unwrap() == 1
        })
        .await,
        "the killed child's permit did not come back"
    );
    let back_after = killed.elapsed();
    println!(
        "renewed permit of a SIGKILLed child back {back_after:?} after the kill (lease {lease:?})"
    );
    assert!(
        back_after <= lease + Duration::from_millis(500),
        "{back_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_renewed_acquire_leaves_no_permit() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = RENEW_LEASE)
        .await;
    let sem = client.get_permit_expirable_semaphore("cancelled").unwrap();
    sem.try_set_permits(1).await.unwrap();

    // A waiter behind a held permit, cancelled.
    let holder = sem.acquire_renewed().await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), sem.acquire_renewed()).await;
    assert!(waiting.is_err(), "acquired a held permit");
    holder.release().await.unwrap();

    // Acquires cut short at every point, from nothing sent to the reply.
    for i in 0..200u64 {
        let limit = Duration::from_micros((i * 7919) % 3000);
        if let Ok(taken) = tokio::time::timeout(limit, sem.acquire_renewed()).await {
            drop(taken.unwrap());
        }
    }
    assert!(
        eventually(Duration::from_secs(10), || async {
            sem.available_permits().await.unwrap() == 1 && client.renewed_holds() == 0
        })
        .await,
        "left behind: {} available, {} renewed",
        sem.available_permits().await.unwrap(),
        client.renewed_holds()
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.channels().await.is_empty()
        })
        .await
    );
}
