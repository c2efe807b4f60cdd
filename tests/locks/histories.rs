//! Recorded histories checked against Jepsen's lock models
//! (`support/history.rs`): each checker first fails on a violating history
//! of its kind, then real runs of this crate's locks and permits, recorded
//! by every task, pass.

use std::sync::Arc;
use std::time::Duration;

use crate::support::child::ChildHolder;
use crate::support::history::{
    check, close_killed_waits, merge, progress_report, FencedMutex, Latch, Mutex, Op, Operation,
    Outcome, Permits, ReadWrite, Recorder, ReentrantMutex,
};
use crate::support::progress::Admits;
use crate::support::proxy::{Mode, Proxy};
use crate::support::sentinel::SentinelSetup;
use crate::support::{within, RedisServer};

/// `op` by `owner` on lock `l`, invoked at `from`, ended at `to` (ms).
fn op(
    owner: &str,
    what: Op,
    outcome: Outcome,
    value: Option<u64>,
    from: u64,
    to: u64,
) -> Operation {
    Operation {
        process: "p".into(),
        owner: owner.into(),
        lock: "l".into(),
        op: what,
        outcome,
        value,
        invoked_ns: from,
        completed_ns: if outcome == Outcome::Unknown {
            u64::MAX
        } else {
            to
        },
        returned_ns: to,
    }
}

use Op::{
    Acquire, CountDown, LatchCount, LatchWait, PermitAcquire, PermitRelease, ReadAcquire,
    ReadRelease, Release,
};
use Outcome::{Fail, Ok as Done, Refused, Unknown};

#[test]
fn the_mutex_checker_fails_on_two_holders_and_passes_what_an_order_explains() {
    // a holds [0, 10); b's acquire [5, 6) succeeds inside: two holders.
    let two = [
        op("a", Acquire, Done, None, 0, 1),
        op("b", Acquire, Done, None, 5, 6),
        op("a", Release, Done, None, 9, 10),
    ];
    assert!(check(&Mutex, &two).is_err());
    // Overlapping calls: b's acquire [8, 12) may take effect after a's release [9, 10).
    let fine = [
        op("a", Acquire, Done, None, 0, 1),
        op("b", Acquire, Done, None, 8, 12),
        op("a", Release, Done, None, 9, 10),
        op("b", Release, Done, None, 13, 14),
    ];
    assert_eq!(check(&Mutex, &fine), Ok(()));
    // A release by a non-holder that succeeded: impossible.
    assert!(check(
        &Mutex,
        &[
            op("a", Acquire, Done, None, 0, 1),
            op("b", Release, Done, None, 2, 3)
        ]
    )
    .is_err());
    // A refused acquire while nobody could hold it: impossible.
    assert!(check(&Mutex, &[op("a", Acquire, Refused, None, 0, 1)]).is_err());
    // A wait that ran out says nothing of the state: left out (a paused
    // server explains it as well as a holder).
    assert_eq!(check(&Mutex, &[op("a", Acquire, Fail, None, 0, 1)]), Ok(()));
    // An acquire of unknown outcome may never have happened: b's later grant is fine.
    let unknown = [
        op("a", Acquire, Unknown, None, 0, 1),
        op("b", Acquire, Done, None, 5, 6),
    ];
    assert_eq!(check(&Mutex, &unknown), Ok(()));
}

#[test]
fn the_reentrant_checker_counts_holds() {
    let nested = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Acquire, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
        op("b", Acquire, Refused, None, 6, 7),
        op("a", Release, Done, None, 8, 9),
        op("b", Acquire, Done, None, 10, 11),
    ];
    assert_eq!(check(&ReentrantMutex, &nested), Ok(()));
    // One acquire, two successful releases.
    let over = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
    ];
    assert!(check(&ReentrantMutex, &over).is_err());
    // Freed after the first of two releases: b got in too early.
    let early = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Acquire, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
        op("b", Acquire, Done, None, 6, 7),
    ];
    assert!(check(&ReentrantMutex, &early).is_err());
}

#[test]
fn the_fenced_checkers_want_every_token_above_every_earlier_one() {
    let rising = [
        op("a", Acquire, Done, Some(1), 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("b", Acquire, Done, Some(2), 4, 5),
        op("b", Release, Done, None, 6, 7),
    ];
    assert_eq!(check(&FencedMutex { reentrant: false }, &rising), Ok(()));
    let falling = [
        op("a", Acquire, Done, Some(5), 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("b", Acquire, Done, Some(4), 4, 5),
    ];
    assert!(check(&FencedMutex { reentrant: false }, &falling).is_err());
    // Re-entry draws a new, larger token (Redisson's rule); the same one twice fails.
    let reentry = |second: u64| {
        [
            op("a", Acquire, Done, Some(7), 0, 1),
            op("a", Acquire, Done, Some(second), 2, 3),
        ]
    };
    assert_eq!(check(&FencedMutex { reentrant: true }, &reentry(8)), Ok(()));
    assert!(check(&FencedMutex { reentrant: true }, &reentry(7)).is_err());
    assert!(
        check(&FencedMutex { reentrant: false }, &reentry(8)).is_err(),
        "not reentrant"
    );
}

#[test]
fn the_permits_checker_never_lets_more_than_n_out() {
    let three = [
        op("a", PermitAcquire, Done, None, 0, 1),
        op("b", PermitAcquire, Done, None, 0, 1),
        op("c", PermitAcquire, Done, None, 0, 1),
    ];
    assert!(check(&Permits { n: 2 }, &three).is_err());
    assert_eq!(check(&Permits { n: 3 }, &three), Ok(()));
    // A release by an owner holding none.
    assert!(check(
        &Permits { n: 2 },
        &[op("a", PermitRelease, Done, None, 0, 1)]
    )
    .is_err());
    let turns = [
        op("a", PermitAcquire, Done, None, 0, 1),
        op("b", PermitAcquire, Refused, None, 2, 3),
        op("a", PermitRelease, Done, None, 4, 5),
        op("b", PermitAcquire, Done, None, 6, 7),
    ];
    assert_eq!(check(&Permits { n: 1 }, &turns), Ok(()));
}

#[test]
fn the_latch_checker_opens_only_at_zero_and_reads_what_the_count_downs_left() {
    // A count of 2; one count-down done when b's wait returns open, the
    // second invoked only after: no order has the count at zero in the wait.
    let early = [
        op("a", CountDown, Done, None, 0, 1),
        op("b", LatchWait, Done, None, 2, 3),
        op("c", CountDown, Done, None, 5, 6),
    ];
    assert!(check(&Latch { n: 2 }, &early).is_err());
    // Two count-downs of 3 surely done, then a read of 2: one too many.
    let misread = [
        op("a", CountDown, Done, None, 0, 1),
        op("b", CountDown, Done, None, 2, 3),
        op("c", LatchCount, Done, Some(2), 4, 5),
    ];
    assert!(check(&Latch { n: 3 }, &misread).is_err());
    // Reads during one long count-down: 3, then 2, then 3 again (a count
    // never goes back up), and a read of more than was set.
    let back_up = [
        op("a", CountDown, Done, None, 0, 10),
        op("b", LatchCount, Done, Some(3), 1, 2),
        op("b", LatchCount, Done, Some(2), 3, 4),
        op("b", LatchCount, Done, Some(3), 5, 6),
    ];
    assert!(check(&Latch { n: 3 }, &back_up).is_err());
    assert!(check(&Latch { n: 3 }, &[op("b", LatchCount, Done, Some(4), 0, 1)]).is_err());
    // A read done without its value, and a refused count-down, have no order.
    assert!(check(&Latch { n: 3 }, &[op("b", LatchCount, Done, None, 0, 1)]).is_err());
    assert!(check(&Latch { n: 3 }, &[op("a", CountDown, Refused, None, 0, 1)]).is_err());

    // A count of 2: a's count-down overlaps a read of 2 (the read first); b's
    // count-down is unknown and had not counted when 1 was read, but had
    // when c's wait returned open; a wait that ran out says nothing; a
    // count-down of an open latch leaves it at zero.
    let fine = [
        op("a", CountDown, Done, None, 0, 3),
        op("c", LatchCount, Done, Some(2), 1, 2),
        op("b", CountDown, Unknown, None, 4, 5),
        op("c", LatchCount, Done, Some(1), 6, 7),
        op("d", LatchWait, Fail, None, 6, 9),
        op("c", LatchWait, Done, None, 8, 10),
        op("a", CountDown, Done, None, 11, 12),
        op("c", LatchCount, Done, Some(0), 13, 14),
        op("d", LatchWait, Done, None, 13, 15),
    ];
    assert_eq!(check(&Latch { n: 2 }, &fine), Ok(()));
    // An unknown count-down may never have counted.
    let never = [
        op("a", CountDown, Unknown, None, 0, 1),
        op("c", LatchCount, Done, Some(2), 5, 6),
    ];
    assert_eq!(check(&Latch { n: 2 }, &never), Ok(()));
}

/// Three clients, four tasks each, recording every call: nested holds of a
/// reentrant lock, fenced acquisitions, permits of a two-permit semaphore.
/// The merged history satisfies the reentrant, fenced and permits models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_runs_of_every_model_are_linearizable() {
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, "test"));
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(server.client().await);
    }
    let slots = clients[0].get_semaphore("slots").unwrap();
    assert!(slots.try_set_permits(2).await.unwrap());
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..4u64 {
            let (client, recorder) = (client.clone(), recorder.clone());
            let owner = format!("c{c}t{t}");
            tasks.push(tokio::spawn(async move {
                let lock = client.get_lock("reentrant").unwrap().with_owner_id(100 + t);
                let fenced = client.get_fenced_lock("fenced").unwrap();
                let slots = client.get_semaphore("slots").unwrap();
                for round in 0..6 {
                    let call = recorder.invoke(&owner, "reentrant", Acquire);
                    let outer = lock.lock().await.unwrap();
                    call.end(Done, None);
                    let call = recorder.invoke(&owner, "reentrant", Acquire);
                    let inner = outer.scope(lock.lock()).await.unwrap();
                    call.end(Done, None);
                    for guard in [inner, outer] {
                        let call = recorder.invoke(&owner, "reentrant", Release);
                        guard.unlock().await.unwrap();
                        call.end(Done, None);
                    }

                    let call = recorder.invoke(&owner, "fenced", Acquire);
                    let (guard, token) = fenced.lock_and_get_token().await.unwrap();
                    call.end(Done, Some(token));
                    let call = recorder.invoke(&owner, "fenced", Release);
                    guard.unlock().await.unwrap();
                    call.end(Done, None);

                    let call = recorder.invoke(&owner, "slots", PermitAcquire);
                    if round % 2 == 0 {
                        slots.acquire().await.unwrap();
                        call.end(Done, None);
                    } else if slots.try_acquire().await.unwrap() {
                        call.end(Done, None);
                    } else {
                        call.end(Refused, None);
                        continue;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let call = recorder.invoke(&owner, "slots", PermitRelease);
                    slots.release().await.unwrap();
                    call.end(Done, None);
                }
            }));
        }
    }
    within(Duration::from_secs(120), "the recorded run", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    let history = merge(&dir);
    let on = |lock: &str| -> Vec<Operation> {
        history.iter().filter(|o| o.lock == lock).cloned().collect()
    };
    assert_eq!(on("reentrant").len(), 12 * 6 * 4);
    assert_eq!(check(&ReentrantMutex, &on("reentrant")), Ok(()));
    assert_eq!(
        check(&FencedMutex { reentrant: false }, &on("fenced")),
        Ok(())
    );
    assert_eq!(check(&Permits { n: 2 }, &on("slots")), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small fault campaign, in CI's budget: three clients, three tasks each,
/// on a reentrant lock, a fenced lock, a fair lock, both sides of a
/// read-write lock, a two-permit semaphore, a two-permit permit-expirable
/// semaphore and a count-down latch (counted down to zero mid-run, its count
/// read and its opening waited for), every call recorded, while the
/// test, at random, seeded intervals, cuts every connection (CLIENT KILL),
/// pauses the server's writes (CLIENT PAUSE WRITE, 300 ms), or, between the
/// third client and the server (a TCP proxy), drops every packet for 300 ms
/// (a partition), delays them by 50 ms for 300 ms, or severs the connection.
/// Leases (30 s) outlast every pause and partition, so the plain models apply.
/// A call that failed is recorded as unknown. A failing history is kept under
/// `target/histories/<seed>/` with the seed in the message; `CAMPAIGN_SEED`
/// replays one, and `CAMPAIGN_HISTORY=<dir>` checks a kept history again
/// without running anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_of_cuts_and_pauses_leaves_linearizable_histories() {
    if let Ok(kept) = std::env::var("CAMPAIGN_HISTORY") {
        let history = merge(std::path::Path::new(&kept));
        assert!(!history.is_empty(), "no history in {kept}");
        check_campaign(&history).unwrap_or_else(|why| panic!("{kept}: {why}"));
        return;
    }
    let seed = campaign_seed("campaign");
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-campaign-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, "campaign"));
    // The third client reaches the server through a proxy that the
    // campaign partitions, slows down and severs.
    let proxy = Proxy::start(server.port()).await;
    let mut clients = Vec::new();
    for c in 0..3 {
        let mut config = server.config();
        if c == 2 {
            config.address = proxy.url();
        }
        config.timeout = Duration::from_millis(500);
        // The default re-check: a fault may swallow a message.
        config.recheck_interval = default_recheck();
        clients.push(redisson_locks::Client::connect(config).await.unwrap());
    }
    set_campaign_counts(&clients[0]).await;
    let tasks = CampaignTasks::start(&clients, 3, &recorder, |c, t| format!("c{c}t{t}"));
    // The faults, at seeded random intervals, for 8 s.
    let mut next = seeded(seed);
    let mut admin = server.admin().await;
    let mut faults = Faults::default();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(150 + next(350))).await;
        match next(6) {
            0 => {
                server.kill_lock_connections().await;
                faults.cuts += 1;
            }
            1 => {
                let _: () = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(300)
                    .arg("WRITE")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
                faults.pauses += 1;
            }
            2 => {
                proxy.set_mode(Mode::Blackhole);
                tokio::time::sleep(Duration::from_millis(300)).await;
                proxy.set_mode(Mode::Pass);
                faults.partitions += 1;
            }
            3 => {
                proxy.set_mode(Mode::Delay(Duration::from_millis(50)));
                tokio::time::sleep(Duration::from_millis(300)).await;
                proxy.set_mode(Mode::Pass);
                faults.delays += 1;
            }
            4 => {
                proxy.sever();
                faults.severed += 1;
            }
            _ => {}
        }
    }
    tasks
        .stop(Duration::from_secs(60), "the campaign's tasks")
        .await;
    let history = merge(&dir);
    let unknown = history.iter().filter(|o| o.outcome == Unknown).count();
    eprintln!(
        "campaign seed {seed}: {} operations ({unknown} unknown), {faults:?}",
        history.len()
    );
    eprintln!("campaign seed {seed}: {}", latch_tally(&history));
    check_or_keep(&history, &dir, &seed.to_string(), &format!("seed {seed}"));
    check_progress(
        &history,
        campaign_kind,
        (&dir, &seed.to_string(), &format!("campaign seed {seed}")),
        CUTS_SETTLE,
        CUTS_STALL_BOUND,
    );
    assert!(history.len() > 100, "the tasks ran: {}", history.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// How long an outcome nobody knows may keep a lock held in the campaign of
/// cuts and pauses: its settle asks again every `retry_interval` (200 ms),
/// each try bounded by the reply timeout (500 ms), three times.
pub(super) const CUTS_SETTLE: Duration = Duration::from_millis(2_100);

/// The longest a waiter may wait on a lock free for it under cuts, write
/// pauses and partitions of 300 ms: the fault itself, a reply timeout and a
/// retry's pause (what a waiter cut off needs to try again), and the
/// re-check interval (1 s) for a message the fault swallowed.
pub(super) const CUTS_STALL_BOUND: Duration = Duration::from_millis(3_000);

/// One permit of the permit-expirable semaphore (a 30 s lease, outlasting
/// every fault), taken and given back by id, recorded.
async fn recorded_expiring_permit(
    recorder: &Recorder,
    owner: &str,
    semaphore: &redisson_locks::RPermitExpirableSemaphore,
    wait: Duration,
) {
    let call = recorder.invoke(owner, "camp-pes", PermitAcquire);
    match semaphore
        .try_acquire_wait(wait, Duration::from_secs(30))
        .await
    {
        Ok(Some(id)) => {
            call.end(Done, None);
            let call = recorder.invoke(owner, "camp-pes", PermitRelease);
            match semaphore.try_release(&id).await {
                Ok(true) => call.end(Done, None),
                Ok(false) => call.end(Refused, None),
                Err(_) => drop(call),
            }
        }
        Ok(None) => call.end(Fail, None),
        Err(_) => drop(call),
    }
}

/// One permit of the fair semaphore (a lease the watchdog renews), taken in
/// turn and given back, recorded.
async fn recorded_fair_permit(
    recorder: &Recorder,
    owner: &str,
    semaphore: &redisson_locks::RFairSemaphore,
    wait: Duration,
) {
    let call = recorder.invoke(owner, "camp-fair-slots", PermitAcquire);
    match semaphore.try_acquire(1, wait).await {
        Ok(Some(permits)) => {
            call.end(Done, None);
            let call = recorder.invoke(owner, "camp-fair-slots", PermitRelease);
            match permits.release().await {
                Ok(()) => call.end(Done, None),
                Err(e) if e.is_not_held() => call.end(Refused, None),
                Err(_) => drop(call),
            }
        }
        Ok(None) => call.end(Fail, None),
        Err(_) => drop(call),
    }
}

/// A campaign's latch task: a recorded round on the latch every
/// [`LATCH_PACE`], until told to stop.
async fn latch_task(
    client: &redisson_locks::Client,
    recorder: &Recorder,
    owner: &str,
    stop: &std::sync::atomic::AtomicBool,
) {
    let latch = client.get_count_down_latch("camp-latch").unwrap();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let next = tokio::time::Instant::now() + LATCH_PACE;
        recorded_latch_round(recorder, owner, &latch).await;
        tokio::time::sleep_until(next).await;
    }
}

/// One round on the campaign's latch, recorded: a count-down, a read of the
/// count, and a short wait for the latch to open (short: until the count
/// reaches zero every wait runs out). A count-down that failed is unknown; a
/// read or a wait that failed, like a wait that ran out, changed nothing and
/// says nothing: a `fail`.
async fn recorded_latch_round(
    recorder: &Recorder,
    owner: &str,
    latch: &redisson_locks::RCountDownLatch,
) {
    let call = recorder.invoke(owner, "camp-latch", CountDown);
    match latch.count_down().await {
        Ok(()) => call.end(Done, None),
        Err(_) => drop(call),
    }
    let call = recorder.invoke(owner, "camp-latch", LatchCount);
    match latch.count().await {
        Ok(count) => call.end(Done, Some(count)),
        Err(_) => call.end(Fail, None),
    }
    let call = recorder.invoke(owner, "camp-latch", LatchWait);
    match latch.wait_timeout(Duration::from_millis(50)).await {
        Ok(true) => call.end(Done, None),
        Ok(false) | Err(_) => call.end(Fail, None),
    }
}

/// What a run did on the latch, for its log: its calls by outcome, and when
/// it was first seen open (a read of zero or a wait that returned open done),
/// from the run's first call.
fn latch_tally(history: &[Operation]) -> String {
    let latch: Vec<&Operation> = history.iter().filter(|o| o.lock == "camp-latch").collect();
    let count = |op: Op, outcome: Outcome| {
        latch
            .iter()
            .filter(|o| o.op == op && o.outcome == outcome)
            .count()
    };
    let start = history.iter().map(|o| o.invoked_ns).min().unwrap_or(0);
    let open_at = latch
        .iter()
        .filter(|o| o.outcome == Done)
        .filter(|o| o.op == LatchWait || (o.op == LatchCount && o.value == Some(0)))
        .map(|o| o.completed_ns)
        .min()
        .map_or("never".to_owned(), |at| {
            format!("{:.1} s in", at.saturating_sub(start) as f64 / 1e9)
        });
    format!(
        "latch: {} count-downs done ({} unknown), {} reads ({} failed), {} waits open, {} ran out; open {open_at}",
        count(CountDown, Done),
        count(CountDown, Unknown),
        count(LatchCount, Done),
        count(LatchCount, Fail),
        count(LatchWait, Done),
        count(LatchWait, Fail),
    )
}

/// The faults a campaign injected, by kind.
#[derive(Debug, Default)]
struct Faults {
    cuts: u32,
    pauses: u32,
    partitions: u32,
    delays: u32,
    severed: u32,
}

/// The campaign's seed: `CAMPAIGN_SEED` when set (a replay), else a fresh
/// one; printed either way, so a failing run can be replayed.
pub(super) fn campaign_seed(what: &str) -> u64 {
    let seed = std::env::var("CAMPAIGN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| crate::support::checker::monotonic_ns() | 1);
    eprintln!("{what} seed {seed} (CAMPAIGN_SEED={seed} replays it)");
    seed
}

/// A small generator (xorshift) drawn from `seed`: `next(n)` is in `0..n`.
pub(super) fn seeded(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

/// How often a campaign's latch task counts the latch down, reads it and
/// waits for it: the count falls at a pace of its own, not at the pace of
/// the lock rounds, which the faults and the contention decide (a holder
/// killed or frozen stalls every round for up to its lease).
const LATCH_PACE: Duration = Duration::from_millis(100);

/// The campaign latch's count: the three latch tasks (one per client, or per
/// process) counting down every [`LATCH_PACE`] take it to zero about 3 s into
/// runs of 6 to 8 s, a little later when processes are killed and replaced.
/// The waits before run out, those after return open, and the ones in
/// flight then are woken: each a case to check.
const CAMPAIGN_LATCH_COUNT: u64 = 80;

/// Gives the campaign's three semaphores their two permits each, and its latch
/// its count (once: nobody re-arms it during the run).
pub(super) async fn set_campaign_counts(client: &redisson_locks::Client) {
    assert!(client
        .get_semaphore("camp-slots")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap());
    assert!(client
        .get_permit_expirable_semaphore("camp-pes")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap());
    assert!(client
        .get_fair_semaphore("camp-fair-slots")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap());
    assert!(client
        .get_count_down_latch("camp-latch")
        .unwrap()
        .try_set_count(CAMPAIGN_LATCH_COUNT)
        .await
        .unwrap());
}

/// The campaign's tasks, running, and what stops them.
pub(super) struct CampaignTasks {
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl CampaignTasks {
    /// `per_client` tasks on each of `clients` and a latch task, recording
    /// into `recorder`; task `t` of client `c` is owner `owner(c, t)`, its
    /// latch task `owner(c, per_client)`.
    pub(super) fn start(
        clients: &[redisson_locks::Client],
        per_client: u64,
        recorder: &Arc<Recorder>,
        owner: impl Fn(usize, u64) -> String,
    ) -> CampaignTasks {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (c, client) in clients.iter().enumerate() {
            for t in 0..per_client {
                let (client, recorder, stop) = (client.clone(), recorder.clone(), stop.clone());
                let owner = owner(c, t);
                tasks.push(tokio::spawn(async move {
                    campaign_task(&client, &recorder, &owner, t, &stop).await;
                }));
            }
            let (client, recorder, stop) = (client.clone(), recorder.clone(), stop.clone());
            let owner = owner(c, per_client);
            tasks.push(tokio::spawn(async move {
                latch_task(&client, &recorder, &owner, &stop).await;
            }));
        }
        CampaignTasks { stop, tasks }
    }

    /// Tells them to stop after their round, and waits for them, at most `limit`.
    pub(super) async fn stop(self, limit: Duration, what: &str) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        within(limit, what, async {
            for task in self.tasks {
                task.await.unwrap();
            }
        })
        .await;
    }
}

/// The campaign's locks as the progress checker reads them: how each admits
/// its waiters, and its kind (the latch is no lock).
pub(super) fn campaign_kind(lock: &str) -> Option<(Admits, &'static str)> {
    match lock {
        "camp-lock" => Some((Admits::One, "reentrant")),
        "camp-fenced" => Some((Admits::One, "fenced")),
        "camp-fair" => Some((Admits::One, "fair")),
        "camp-rw" => Some((Admits::ReadersOrWriter, "read-write")),
        "camp-slots" => Some((Admits::Permits(2), "semaphore")),
        "camp-pes" => Some((Admits::Permits(2), "expiring permits")),
        "camp-fair-slots" => Some((Admits::Permits(2), "fair-semaphore")),
        _ => None,
    }
}

/// The progress check of a campaign's `history` (see `progress.rs`): the
/// longest stall of each kind (`kind_of` names a lock's), said on stderr as
/// `run`, and the run fails (its history kept under `kept`, as
/// [`check_or_keep`] keeps it) when one passed `bound`. `settle`: how long an
/// outcome nobody knows may keep a lock held (its settle's budget, or a
/// killed holder's lease).
pub(super) fn check_progress(
    history: &[Operation],
    kind_of: impl Fn(&str) -> Option<(Admits, &'static str)>,
    (dir, kept, run): (&std::path::Path, &str, &str),
    settle: Duration,
    bound: Duration,
) {
    let (report, within_bound) = progress_report(
        history,
        kind_of,
        settle.as_nanos() as u64,
        bound.as_secs_f64() * 1e3,
    );
    eprintln!("{run}: progress: {report}");
    if !within_bound {
        let kept = keep(dir, kept);
        panic!(
            "{run}: a waiter waited on a lock free for it past {bound:?}: {report}; the history is kept in {}",
            kept.display()
        );
    }
}

/// Keeps the recorded files of `dir` under `target/histories/<kept>/`;
/// where.
pub(super) fn keep(dir: &std::path::Path, kept: &str) -> std::path::PathBuf {
    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/histories")
        .join(kept);
    let _ = std::fs::create_dir_all(&kept);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
    }
    kept
}

/// Checks a campaign's merged `history`; when no order explains it, keeps
/// the recorded files of `dir` under `target/histories/<kept>/` and fails,
/// naming the `run` (its seed, or what it struck) and the place.
pub(super) fn check_or_keep(history: &[Operation], dir: &std::path::Path, kept: &str, run: &str) {
    let Err(why) = check_campaign(history) else {
        return;
    };
    let kept = keep(dir, kept);
    panic!("{run}: {why}; the history is kept in {}", kept.display());
}

/// One hold of `lock`, recorded: `taking` (a timed acquire, with the token it
/// drew, if any), then its release. A wait that ran out is a `fail` (no
/// effect, and no evidence of a holder: a paused server explains it too); a
/// call that failed is unknown.
pub(super) async fn recorded_hold(
    recorder: &Recorder,
    owner: &str,
    lock: &str,
    taking: impl std::future::Future<
        Output = redisson_locks::Result<Option<(redisson_locks::LockGuard, Option<u64>)>>,
    >,
) {
    recorded_hold_as(recorder, owner, lock, (Acquire, Release), taking).await;
}

/// [`recorded_hold`] recorded as `ops` (a read hold's, say).
async fn recorded_hold_as(
    recorder: &Recorder,
    owner: &str,
    lock: &str,
    (taken, given_back): (Op, Op),
    taking: impl std::future::Future<
        Output = redisson_locks::Result<Option<(redisson_locks::LockGuard, Option<u64>)>>,
    >,
) {
    let call = recorder.invoke(owner, lock, taken);
    match taking.await {
        Ok(Some((guard, token))) => {
            call.end(Done, token);
            let call = recorder.invoke(owner, lock, given_back);
            match guard.unlock().await {
                Ok(()) => call.end(Done, None),
                Err(e) if e.is_not_held() => call.end(Refused, None),
                Err(_) => drop(call),
            }
        }
        Ok(None) => call.end(Fail, None),
        Err(_) => drop(call),
    }
}

/// The campaign's locks, semaphores and latch, each against its model: why
/// not, if one fails.
fn check_campaign(history: &[Operation]) -> Result<(), String> {
    let on = |lock: &str| -> Vec<Operation> {
        history.iter().filter(|o| o.lock == lock).cloned().collect()
    };
    let verdicts = [
        ("reentrant", check(&ReentrantMutex, &on("camp-lock"))),
        (
            "fenced",
            check(&FencedMutex { reentrant: false }, &on("camp-fenced")),
        ),
        ("permits", check(&Permits { n: 2 }, &on("camp-slots"))),
        ("fair mutex", check(&Mutex, &on("camp-fair"))),
        ("read-write", check(&ReadWrite, &on("camp-rw"))),
        (
            "expiring permits",
            check(&Permits { n: 2 }, &on("camp-pes")),
        ),
        (
            "fair permits",
            check(&Permits { n: 2 }, &on("camp-fair-slots")),
        ),
        (
            "latch",
            check(
                &Latch {
                    n: CAMPAIGN_LATCH_COUNT,
                },
                &on("camp-latch"),
            ),
        ),
    ];
    // A lock nobody ever got would pass every model, and prove nothing; so
    // would a latch never counted down, or never seen open.
    let kinds = [
        ("camp-lock", Acquire),
        ("camp-fenced", Acquire),
        ("camp-fair", Acquire),
        ("camp-rw", Acquire),
        ("camp-rw", ReadAcquire),
        ("camp-pes", PermitAcquire),
        ("camp-fair-slots", PermitAcquire),
        ("camp-latch", CountDown),
        ("camp-latch", LatchWait),
    ];
    for (lock, taken) in kinds {
        let granted = history
            .iter()
            .filter(|o| o.lock == lock && o.op == taken && o.outcome == Done)
            .count();
        if granted == 0 {
            return Err(format!(
                "{lock} never had a {taken:?} take effect: the run checked nothing"
            ));
        }
    }
    match verdicts.into_iter().find(|(_, v)| v.is_err()) {
        Some((model, Err(violation))) => Err(format!(
            "the {model} model found no order for lock {} ({} operations)",
            violation.lock,
            violation.operations.len()
        )),
        _ => Ok(()),
    }
}

/// One campaign task: rounds of a hold of each lock kind and a permit of
/// each semaphore (the fair one's too), each call recorded; a failed call is unknown, and the
/// task goes on. (The latch has tasks of its own: [`latch_task`].)
pub(super) async fn campaign_task(
    client: &redisson_locks::Client,
    recorder: &Recorder,
    owner: &str,
    id: u64,
    stop: &std::sync::atomic::AtomicBool,
) {
    let lock = client
        .get_lock("camp-lock")
        .unwrap()
        .with_owner_id(500 + id);
    let fenced = client.get_fenced_lock("camp-fenced").unwrap();
    let slots = client.get_semaphore("camp-slots").unwrap();
    let fair = client.get_fair_lock("camp-fair").unwrap();
    let rw = client.get_read_write_lock("camp-rw").unwrap();
    let (write, read) = (rw.write_lock(), rw.read_lock());
    let expiring = client.get_permit_expirable_semaphore("camp-pes").unwrap();
    let fair_slots = client.get_fair_semaphore("camp-fair-slots").unwrap();
    let wait = Duration::from_millis(400);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let taking = async { Ok(lock.try_lock_wait(wait).await?.map(|guard| (guard, None))) };
        recorded_hold(recorder, owner, "camp-lock", taking).await;
        let taking = async {
            let taken = fenced.try_lock_and_get_token(wait, None).await?;
            Ok(taken.map(|(guard, token)| (guard, Some(token))))
        };
        recorded_hold(recorder, owner, "camp-fenced", taking).await;
        let taking = async { Ok(fair.try_lock_wait(wait).await?.map(|guard| (guard, None))) };
        recorded_hold(recorder, owner, "camp-fair", taking).await;
        let taking = async { Ok(write.try_lock_wait(wait).await?.map(|guard| (guard, None))) };
        recorded_hold(recorder, owner, "camp-rw", taking).await;
        let taking = async { Ok(read.try_lock_wait(wait).await?.map(|guard| (guard, None))) };
        let reading = (ReadAcquire, ReadRelease);
        recorded_hold_as(recorder, owner, "camp-rw", reading, taking).await;
        recorded_expiring_permit(recorder, owner, &expiring, wait).await;
        recorded_fair_permit(recorder, owner, &fair_slots, wait).await;
        let call = recorder.invoke(owner, "camp-slots", PermitAcquire);
        match slots.try_acquire_wait(wait).await {
            Ok(true) => {
                call.end(Done, None);
                let call = recorder.invoke(owner, "camp-slots", PermitRelease);
                match slots.release().await {
                    Ok(()) => call.end(Done, None),
                    Err(_) => drop(call),
                }
            }
            Ok(false) => call.end(Fail, None),
            Err(_) => drop(call),
        }
    }
}

/// The fair lock's model (`model/fair_lock.qnt`, run by `scripts/model`)
/// records the SHA-1 of each script it models: a script changed without its
/// line in the model (and so, presumably, without the model) fails here.
#[test]
fn the_fair_model_is_in_step_with_the_fair_scripts() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = std::fs::read_to_string(root.join("model/fair_lock.qnt")).expect("the model");
    let recorded: Vec<(&str, &str)> = model
        .lines()
        .filter_map(|line| line.trim().strip_prefix("//   lua/"))
        .filter_map(|rest| rest.split_once(' '))
        .collect();
    let mut modelled: Vec<&str> = recorded.iter().map(|(file, _)| *file).collect();
    modelled.sort_unstable();
    assert_eq!(
        modelled,
        [
            "fair_acquire.lua",
            "fair_cancel.lua",
            "fair_common.lua",
            "fair_release.lua"
        ],
        "the model names the scripts it follows"
    );
    for (file, sha) in recorded {
        let text = std::fs::read_to_string(root.join("lua").join(file)).expect("the script");
        assert_eq!(
            redis::Script::new(&text).get_hash(),
            sha,
            "lua/{file} changed: bring model/fair_lock.qnt in step with it, then its line"
        );
    }
}

/// Runs the campaign's tasks, clients configured by `config`, for 6 s with
/// `fault` struck after 2 s; returns the merged history and the fault's
/// instant (ns, the history's clock). The recorded files stay in
/// [`across_dir`] for the caller to keep or remove.
async fn run_across<F: std::future::Future<Output = u64>>(
    mut config: redisson_locks::Config,
    tag: &str,
    fault: F,
) -> (Vec<Operation>, u64) {
    let dir = across_dir(tag);
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, tag));
    config.timeout = Duration::from_millis(500);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            redisson_locks::Client::connect(config.clone())
                .await
                .unwrap(),
        );
    }
    set_campaign_counts(&clients[0]).await;
    let tasks = CampaignTasks::start(&clients, 3, &recorder, |c, t| format!("c{c}t{t}"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The instant the old server was surely gone (the fault says): a call
    // begun after it was answered by the server after the fault. (A call
    // begun before it may have been answered by either: see `spanning`.)
    let struck_ns = fault.await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    tasks
        .stop(Duration::from_secs(90), "the tasks across a fault")
        .await;
    (merge(&dir), struck_ns)
}

/// Where [`run_across`] records the campaign tagged `tag`.
fn across_dir(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("rl-across-{}-{tag}", std::process::id()))
}

/// The part of `lock`'s history on one side of the instant `at` (a restart,
/// a failover): a call in flight across it may have taken effect on either
/// server (or neither), so on each side it is unknown.
fn side(history: &[Operation], lock: &str, at: u64, before: bool) -> Vec<Operation> {
    history
        .iter()
        .filter(|o| o.lock == lock)
        .filter(|o| {
            if before {
                o.invoked_ns < at
            } else {
                o.completed_ns > at
            }
        })
        .map(|o| {
            let mut o = o.clone();
            if o.invoked_ns < at && o.completed_ns > at {
                o.outcome = Unknown;
                o.completed_ns = u64::MAX;
                o.invoked_ns = o.invoked_ns.max(if before { 0 } else { at });
            }
            o
        })
        .collect()
}

/// A server that lost writes at `at` (restarted empty, or failed over before
/// its replica had them) may give a hold out twice: the documented hazard.
/// The check names it rather than hide it: a two-holder violation of a
/// mutex lock must come with a hold granted before `at` and still open then,
/// and each side of `at` holds on its own. Returns, per lock, the holds that
/// were open across `at` when the whole history fails.
fn hazard_named(history: &[Operation], at: u64, what: &str) -> Vec<(String, usize)> {
    let mut named = Vec::new();
    for lock in ["camp-fair", "camp-rw"] {
        let whole: Vec<Operation> = history.iter().filter(|o| o.lock == lock).cloned().collect();
        let lost = spanning(history, lock, at);
        let holds = |ops: &[Operation]| {
            if lock == "camp-rw" {
                check(&ReadWrite, ops).is_ok()
            } else {
                check(&Mutex, ops).is_ok()
            }
        };
        if !holds(&whole) {
            assert!(
                lost > 0,
                "{what}, {lock}: two holders without a hold across it to explain them"
            );
            eprintln!(
                "{what}, {lock}: the documented hazard: {lost} grant(s) open across it were lost"
            );
            named.push((lock.to_owned(), lost));
        }
        assert!(
            holds(&side(history, lock, at, true)),
            "{what}, {lock}: before"
        );
        assert!(
            holds(&side(history, lock, at, false)),
            "{what}, {lock}: after"
        );
    }
    named
}

/// The fencing tokens granted on each side of `at`: (highest before, lowest after).
fn tokens_around(history: &[Operation], at: u64) -> (u64, u64) {
    let tokens = |before: bool| -> Vec<u64> {
        side(history, "camp-fenced", at, before)
            .iter()
            .filter(|o| o.op == Acquire && o.outcome == Done)
            .filter_map(|o| o.value)
            .collect()
    };
    let (before, after) = (tokens(true), tokens(false));
    assert!(
        !before.is_empty() && !after.is_empty(),
        "fenced holds on both sides"
    );
    (
        before.iter().max().copied().unwrap_or(0),
        after.iter().min().copied().unwrap_or(u64::MAX),
    )
}

/// The grants a restart of a server without persistence may lose: holds
/// (read holds included) of `lock` that the old server may have granted
/// (asked for before `restarted_ns`) and not released before it. A grant
/// answered before the kill may be read after it: a task of a busy client
/// runs when it can, and a fair heir's grant is handed on in process.
fn spanning(history: &[Operation], lock: &str, restarted_ns: u64) -> usize {
    let granted_before: Vec<&Operation> = history
        .iter()
        .filter(|o| o.lock == lock && matches!(o.op, Acquire | ReadAcquire))
        .filter(|o| o.outcome == Done && o.invoked_ns < restarted_ns)
        .collect();
    granted_before
        .iter()
        .filter(|grant| {
            let given_back = if grant.op == Acquire {
                Release
            } else {
                ReadRelease
            };
            !history.iter().any(|o| {
                o.lock == lock
                    && o.owner == grant.owner
                    && o.op == given_back
                    && o.invoked_ns > grant.completed_ns
                    && o.completed_ns < restarted_ns
            })
        })
        .count()
}

/// A server restart, checked the way the models see it. With every write
/// on disk before it is answered (AOF, fsync always) the restart loses
/// nothing: every model holds across it, fencing tokens included. Without
/// persistence the restarted server has forgotten every hold and the token
/// counter: a grant made before the restart and held across it may be given
/// again (two holders), and tokens start over. That is the documented hazard
/// (README.md, "Requirements": a server restarted without persistence forgets every lock); the check names it: any
/// violation of the mutex models comes with holds that spanned the restart,
/// and the history on each side of the restart holds on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_loses_grants_only_without_persistence() {
    let mut durable = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let config = durable.config();
    let (history, restarted) = run_across(config, "durable", async {
        durable.kill();
        let gone = crate::support::checker::monotonic_ns();
        durable.restart();
        gone
    })
    .await;
    eprintln!(
        "durable restart: {} operations, {} holds across it",
        history.len(),
        spanning(&history, "camp-lock", restarted)
    );
    eprintln!("durable restart: {}", latch_tally(&history));
    check_or_keep(
        &history,
        &across_dir("durable"),
        "across-durable",
        "with fsync always",
    );
    let _ = std::fs::remove_dir_all(across_dir("durable"));

    let mut forgetful = RedisServer::start();
    let config = forgetful.config();
    let (history, restarted) = run_across(config, "forgetful", async {
        forgetful.kill();
        let gone = crate::support::checker::monotonic_ns();
        forgetful.restart();
        gone
    })
    .await;
    eprintln!(
        "forgetful restart: recorded in {} (removed if it passes)",
        across_dir("forgetful").display()
    );
    hazard_named(&history, restarted, "a restart without persistence");
    // The token counter went with the restart: the first token after it is
    // not above every earlier one (named, not hidden).
    let (highest_before, lowest_after) = tokens_around(&history, restarted);
    eprintln!(
        "forgetful restart: tokens up to {highest_before} before, from {lowest_after} after (the counter was lost)"
    );
    assert!(
        lowest_after <= highest_before,
        "without persistence the token counter starts over"
    );
    let _ = std::fs::remove_dir_all(across_dir("forgetful"));
}

/// A Sentinel failover under the campaign: the primary is killed 2 s in, the
/// sentinels promote its replica, and the clients follow. Replication is
/// asynchronous (the new primary has no replica left to WAIT for, so replica
/// sync is off), so the writes the old primary acknowledged last may be
/// missing on the new one: a grant, or tokens. The check names that hazard
/// (DESIGN.md, "Beyond one server") instead of hiding it, as for a restart:
/// each side of the failover holds on its own, and a two-holder violation
/// must come with a hold open across it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_names_the_grants_it_may_lose() {
    let mut setup = SentinelSetup::start().await;
    let mut config = setup.config();
    config.replica_sync = Some(0);
    config.lock_watchdog_timeout = Duration::from_secs(2);
    let replica_port = setup.replica.port();
    let failover = async {
        setup.primary.kill();
        let gone = crate::support::checker::monotonic_ns();
        let promoted = crate::support::eventually(Duration::from_secs(30), || async {
            setup.reported_primary() == Some(replica_port)
        })
        .await;
        assert!(promoted, "the sentinels did not fail over");
        gone
    };
    let (history, failed_over) = run_across(config, "failover", failover).await;
    eprintln!(
        "failover: recorded in {} (removed if it passes)",
        across_dir("failover").display()
    );
    let named = hazard_named(&history, failed_over, "a failover");
    let (highest_before, lowest_after) = tokens_around(&history, failed_over);
    eprintln!(
        "failover: {} operations, lost grants named {named:?}, tokens up to {highest_before} before, from {lowest_after} after",
        history.len()
    );
    assert!(history.len() > 100, "the tasks ran: {}", history.len());
    let _ = std::fs::remove_dir_all(across_dir("failover"));
}

/// The child's part of the cross-process campaign (`LOCKS_CHILD=history`, see
/// `faults::child_process_entry`): two campaign tasks and a latch task
/// recording into `dir` as process `name`, until the process is killed.
pub(super) async fn history_child(client: redisson_locks::Client, dir: String, name: String) {
    let recorder = Arc::new(Recorder::create(std::path::Path::new(&dir), &name));
    let tasks = CampaignTasks::start(&[client], 2, &recorder, |_, t| format!("{name}t{t}"));
    println!("READY");
    // Until the process is killed: nothing stops them.
    for task in tasks.tasks {
        let _ = task.await;
    }
}

/// Closes what a killed process left open: each of its holds (write or read)
/// that was granted and never released ends with its lease at some instant
/// after the kill, so it gets a release of unknown outcome invoked at the
/// kill. (Its expiring permits keep their 30 s lease, longer than the run:
/// they stay out, and the permits model counts them out. Its count-down in
/// flight needs nothing here: `merge` already makes every call left open
/// unknown, which may have counted at any instant after its start.)
fn close_killed(history: &mut Vec<Operation>, killed: &[(String, u64)]) {
    let mut closing = Vec::new();
    for (process, killed_ns) in killed {
        // (owner, lock, the release that ends it) -> holds still open
        let mut open: std::collections::HashMap<(String, String, Op), i64> = Default::default();
        for o in history.iter().filter(|o| &o.process == process) {
            let (write, read) = (
                (o.owner.clone(), o.lock.clone(), Release),
                (o.owner.clone(), o.lock.clone(), ReadRelease),
            );
            match (o.op, o.outcome) {
                (Acquire, Done) => *open.entry(write).or_default() += 1,
                (Release, Done) => *open.entry(write).or_default() -= 1,
                (ReadAcquire, Done) => *open.entry(read).or_default() += 1,
                (ReadRelease, Done) => *open.entry(read).or_default() -= 1,
                // A release of unknown outcome may have ended it already; the
                // lease ends it anyway: one more unknown release is harmless.
                _ => {}
            }
        }
        for ((owner, lock, release), count) in open {
            for _ in 0..count.max(0) {
                closing.push(Operation {
                    process: process.clone(),
                    owner: owner.clone(),
                    lock: lock.clone(),
                    op: release,
                    outcome: Unknown,
                    value: None,
                    invoked_ns: *killed_ns,
                    completed_ns: u64::MAX,
                    returned_ns: *killed_ns,
                });
            }
        }
    }
    history.extend(closing);
}

/// The campaign across processes: three child processes (two tasks and a
/// latch task each, a 2 s watchdog lease) run the campaign's work on one
/// server while the test, at seeded random intervals, freezes one (SIGSTOP
/// for 300 ms, then SIGCONT: shorter than the lease) or kills one (SIGKILL)
/// and starts a new one in its place. Every process records its own history; they are merged.
/// A killed process's calls in flight are unknown, and each hold it never
/// released ends with its lease after the kill (an unknown release at the
/// kill). The plain semaphore's permits have no lease: one a killed process
/// held stays out (as in Redisson), and the permits model counts it out. The
/// latch is counted down by every process, the replacements too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_of_killed_and_frozen_processes_leaves_linearizable_histories() {
    let seed = campaign_seed("process campaign");
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-processes-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let admin_client = server.client().await;
    set_campaign_counts(&admin_client).await;
    let spawn = |n: usize| {
        let mut child = ChildHolder::spawn(&[
            ("CHILD", "history".to_owned()),
            ("URL", server.url()),
            ("DIR", dir.display().to_string()),
            ("NAME", format!("p{n}")),
            ("WATCHDOG_MS", "2000".to_owned()),
            // The default re-check: a fault may swallow a message.
            ("RECHECK_MS", default_recheck().as_millis().to_string()),
        ]);
        assert!(child.wait_for_line("READY"), "child p{n} started");
        (format!("p{n}"), child)
    };
    let mut children: Vec<(String, ChildHolder)> = (0..3).map(spawn).collect();
    let mut spawned = 3;
    let mut killed: Vec<(String, u64)> = Vec::new();
    let mut next = seeded(seed);
    let (mut freezes, mut kills) = (0, 0);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(300 + next(500))).await;
        let which = next(children.len() as u64) as usize;
        match next(3) {
            0 => {
                children[which].1.signal("STOP");
                tokio::time::sleep(Duration::from_millis(300)).await;
                children[which].1.signal("CONT");
                freezes += 1;
            }
            1 => {
                let (name, mut child) = children.remove(which);
                child.kill();
                killed.push((name, crate::support::checker::monotonic_ns()));
                children.push(spawn(spawned));
                spawned += 1;
                kills += 1;
            }
            _ => {}
        }
    }
    for (name, mut child) in children.drain(..) {
        child.kill();
        killed.push((name, crate::support::checker::monotonic_ns()));
    }
    let mut history = merge(&dir);
    close_killed(&mut history, &killed);
    close_killed_waits(&mut history, &killed);
    let unknown = history.iter().filter(|o| o.outcome == Unknown).count();
    eprintln!(
        "process campaign seed {seed}: {} operations ({unknown} unknown), {freezes} freezes, {kills} kills",
        history.len()
    );
    eprintln!("process campaign seed {seed}: {}", latch_tally(&history));
    check_or_keep(
        &history,
        &dir,
        &format!("processes-{seed}"),
        &format!("seed {seed}"),
    );
    check_progress(
        &history,
        campaign_kind,
        (
            &dir,
            &format!("processes-{seed}"),
            &format!("process campaign seed {seed}"),
        ),
        PROCESSES_SETTLE,
        PROCESSES_STALL_BOUND,
    );
    assert!(history.len() > 100, "the processes ran: {}", history.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The library's default re-check interval, which the fault campaigns run
/// with (the suite's other clients re-check far less often, see
/// `SUITE_RECHECK`): a fault may swallow a message, and the re-check is what
/// bounds that.
fn default_recheck() -> Duration {
    redisson_locks::Config::default().recheck_interval
}

/// How long a killed process's hold keeps its lock: its 2 s lease, from its
/// last renewal (before the kill).
const PROCESSES_SETTLE: Duration = Duration::from_millis(2_000);

/// The longest a waiter may wait on a lock free for it while processes are
/// frozen (300 ms) and killed: a frozen waiter cannot take it, and a fair
/// lock's head that was killed holds its line until its deadline, which a
/// release brings to the 2 s grace at most; the re-check interval (1 s) on
/// top for a wake-up the fault swallowed.
const PROCESSES_STALL_BOUND: Duration = Duration::from_millis(3_500);

#[test]
fn the_read_write_checker_lets_readers_share_and_never_a_writer_in() {
    // Two readers together, then a writer: an order exists.
    let shared = vec![
        op("a", ReadAcquire, Done, None, 0, 1),
        op("b", ReadAcquire, Done, None, 2, 3),
        op("a", ReadRelease, Done, None, 4, 5),
        op("b", ReadRelease, Done, None, 6, 7),
        op("c", Acquire, Done, None, 8, 9),
        op("c", Release, Done, None, 10, 11),
    ];
    assert!(check(&ReadWrite, &shared).is_ok());
    // A writer granted while a reader surely holds: no order explains it.
    let overlapping = vec![
        op("a", ReadAcquire, Done, None, 0, 1),
        op("c", Acquire, Done, None, 2, 3),
        op("a", ReadRelease, Done, None, 4, 5),
        op("c", Release, Done, None, 6, 7),
    ];
    assert!(check(&ReadWrite, &overlapping).is_err());
    // A reader granted while a writer surely holds, and a read release by
    // an owner that reads nothing.
    let reader_in = vec![
        op("c", Acquire, Done, None, 0, 1),
        op("a", ReadAcquire, Done, None, 2, 3),
        op("c", Release, Done, None, 4, 5),
    ];
    assert!(check(&ReadWrite, &reader_in).is_err());
    let stray = vec![op("b", ReadRelease, Done, None, 0, 1)];
    assert!(check(&ReadWrite, &stray).is_err());
}
