//! A term limit (`Config::max_hold`, `RLock::with_max_hold`): at the term the
//! hold is lost to its holder, renewed no more, and the key ends with its lease.

use std::time::Duration;

use redisson_locks::Config;
use tokio::time::Instant;

use crate::support::{eventually, within, RedisServer, LATE};

const WATCHDOG: Duration = Duration::from_millis(600);
const TERM: Duration = Duration::from_secs(1);

/// The lateness a term's loss may have on a loaded machine, beyond the term.
const SLACK: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_is_lost_at_its_term_renewed_no_more_and_frees_within_a_lease() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let contender = server.client().await;
    let lock = client.get_lock("term").unwrap().with_max_hold(TERM);
    let started = Instant::now();
    let guard = lock.lock().await.unwrap();
    assert!(guard.valid_for().unwrap() <= WATCHDOG);

    // Renewed until the term: past the first lease, still held.
    tokio::time::sleep(WATCHDOG + Duration::from_millis(100)).await;
    assert!(!guard.is_lease_lost(), "lost before its term");
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(client.renewed_holds(), 1);

    within(TERM + LATE, "lease_lost at the term", guard.lease_lost()).await;
    let lost_after = started.elapsed();
    println!("max_hold: lost {lost_after:?} after the acquire (term {TERM:?})");
    assert!(
        lost_after >= TERM - Duration::from_millis(5),
        "{lost_after:?}"
    );
    assert!(lost_after < TERM + SLACK, "lost late: {lost_after:?}");
    assert!(guard.is_lease_lost());
    assert_eq!(guard.valid_for(), None);
    assert_eq!(
        client.renewed_holds(),
        0,
        "a hold past its term is renewed no more"
    );

    // No renewal after the term: the key ends with its last lease.
    server.reset_stats().await;
    let freed = eventually(WATCHDOG + LATE, || async {
        !lock.is_locked().await.unwrap()
    })
    .await;
    let freed_after = started.elapsed();
    println!("max_hold: key gone {freed_after:?} after the acquire");
    assert!(freed, "the key outlived its lease");
    assert!(
        freed_after < TERM + WATCHDOG + SLACK,
        "freed late: {freed_after:?}"
    );
    tokio::time::sleep(WATCHDOG).await;
    assert_eq!(
        server.command_calls("evalsha").await,
        0,
        "a renewal ran after the term"
    );
    assert_eq!(server.command_calls("pexpire").await, 0);

    let theirs = contender.get_lock("term").unwrap();
    let taken = theirs
        .try_lock()
        .await
        .unwrap()
        .expect("free after the term");
    taken.unlock().await.unwrap();
    // The lost guard's release finds nothing of its own.
    assert!(guard.unlock().await.unwrap_err().is_not_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_ends_with_lease_lost_at_the_term() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = WATCHDOG)
        .await;
    let lock = client.get_lock("term:run").unwrap().with_max_hold(TERM);
    let guard = lock.lock().await.unwrap();
    let started = Instant::now();
    let section = guard.run(tokio::time::sleep(Duration::from_secs(30)));
    let err = within(TERM + LATE, "run at the term", section)
        .await
        .unwrap_err();
    assert!(err.is_lease_lost(), "{err}");
    assert!(started.elapsed() < TERM + SLACK, "{:?}", started.elapsed());
    // Released by the drop: the key goes at once, not a lease later.
    drop(guard);
    assert!(eventually(LATE, || async { !lock.is_locked().await.unwrap() }).await);
}

/// A client whose holds have `TERM` as their default term, under `WATCHDOG`.
async fn termed_client(server: &RedisServer) -> redisson_locks::Client {
    server
        .client_with(|c| {
            c.lock_watchdog_timeout = WATCHDOG;
            c.max_hold = Some(TERM);
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_default_bounds_every_kind_and_a_handle_overrides_it() {
    let server = RedisServer::start();
    let client = termed_client(&server).await;
    let started = Instant::now();
    let plain = client.get_lock("term:plain").unwrap().lock().await.unwrap();
    let fair = client.get_fair_lock("term:fair").unwrap();
    let fair = fair.lock().await.unwrap();
    let rw = client.get_read_write_lock("term:rw").unwrap();
    let read = rw.read_lock().lock().await.unwrap();
    let longer = client
        .get_lock("term:longer")
        .unwrap()
        .with_max_hold(Duration::from_secs(60));
    let longer = longer.lock().await.unwrap();
    for guard in [&plain, &fair, &read] {
        within(TERM + LATE, "lost at the config's term", guard.lease_lost()).await;
    }
    assert!(started.elapsed() < TERM + SLACK, "{:?}", started.elapsed());
    assert!(
        !longer.is_lease_lost(),
        "the handle's longer term was not used"
    );
    longer.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_longer_than_the_term_is_valid_until_the_term() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("term:leased").unwrap().with_max_hold(TERM);
    let guard = lock.lock_with_lease(Duration::from_secs(10)).await.unwrap();
    // validity = min(lease end, term end).
    assert!(guard.valid_for().unwrap() <= TERM);
    within(TERM + LATE, "lost at the term", guard.lease_lost()).await;
    // The key keeps the lease it was given; releasing frees it.
    assert!(lock.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // A shorter lease ends first, as without a term.
    let guard = lock
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(guard.valid_for().unwrap() <= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_terms_are_refused() {
    let server = RedisServer::start();
    let client = server.client().await;
    for limit in [Duration::ZERO, Duration::from_secs(u64::MAX / 2)] {
        let lock = client.get_lock("term:bad").unwrap().with_max_hold(limit);
        let err = lock.lock().await.unwrap_err();
        assert!(err.is_invalid_argument(), "{limit:?}: {err}");
    }
    assert!(server.keys().await.is_empty());
    for limit in [Duration::ZERO, Duration::from_secs(u64::MAX / 2)] {
        let mut config: Config = server.config();
        config.max_hold = Some(limit);
        assert!(config.validate().is_err(), "{limit:?}");
    }
}

/// The term bounds a renewed permit as it bounds a hold: `Permit::run` ends
/// with `LeaseLost` at the term, its job takes no step past the term, the
/// watchdog renews it no more, and the permit comes back within one lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_permit_is_lost_at_its_term_and_comes_back_within_a_lease() {
    let server = RedisServer::start();
    let client = termed_client(&server).await;
    let other = server.client().await;
    let sem = client.get_permit_expirable_semaphore("term:pes").unwrap();
    sem.try_set_permits(1).await.unwrap();
    let started = Instant::now();
    let permit = sem.acquire_renewed().await.unwrap();
    // The term runs from the acquire's sending: it ends before this plus TERM.
    let term_ends_before = Instant::now() + TERM;
    assert!(permit.valid_for().unwrap() <= WATCHDOG);

    // The job: a step every 20 ms, each noting when it ran, for ever.
    let steps = std::sync::Mutex::new(Vec::new());
    let job = async {
        loop {
            steps.lock().unwrap().push(Instant::now());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let err = within(TERM + LATE, "run at the term", permit.run(job))
        .await
        .unwrap_err();
    let lost_after = started.elapsed();
    println!("max_hold: renewed permit lost {lost_after:?} after the acquire (term {TERM:?})");
    assert!(err.is_lease_lost(), "{err}");
    assert!(err.to_string().contains("term:pes"), "{err}");
    assert!(
        lost_after >= TERM - Duration::from_millis(5),
        "{lost_after:?}"
    );
    assert!(lost_after < TERM + SLACK, "lost late: {lost_after:?}");
    assert_eq!(client.renewed_holds(), 0, "renewed past its term");
    let last_step = *steps.lock().unwrap().last().expect("the job ran");
    // It ran past the first lease (renewed until the term), and took no
    // step once the term was over (the clock is read before each).
    assert!(last_step - started > WATCHDOG, "{:?}", last_step - started);
    assert!(
        last_step < term_ends_before,
        "a step {:?} after the term",
        last_step - term_ends_before
    );

    // Not released (the permit is still held by its handle): it comes back
    // with its last lease, to another client, after the job stopped.
    let theirs = other.get_permit_expirable_semaphore("term:pes").unwrap();
    let taken = within(
        WATCHDOG + LATE,
        "the permit back after its last lease",
        theirs.acquire_renewed(),
    )
    .await
    .unwrap();
    let back_after = started.elapsed();
    println!("max_hold: the permit back {back_after:?} after the acquire");
    assert!(
        back_after < TERM + WATCHDOG + SLACK,
        "back late: {back_after:?}"
    );
    assert!(permit.release().await.unwrap_err().is_not_held());
    taken.release().await.unwrap();
}
