//! Ambiguity: attempts whose outcome the caller never learned (the server paused
//! past the response timeout), scripts flushed under load, two names sharing one
//! unlock channel, and a foreign hold without expiry that no unlock message will
//! ever announce the end of.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::LockGuard;
use tokio::time::Instant;

use crate::support::exclusion::Exclusion;
use crate::support::{assert_nothing_left, eventually, within, RedisServer, LATE, PROMPT};

const T: Duration = Duration::from_secs(20);

/// The first few of `problems`, for an assertion message.
fn first_few(problems: &[String]) -> String {
    let shown: Vec<&String> = problems.iter().take(5).collect();
    format!("{} problem(s), first: {shown:#?}", problems.len())
}

/// Acquisitions cut short while the server is paused (their scripts run when it
/// resumes), then the same owner cycling lock/unlock: at every check its hash
/// field counts exactly the guards it holds; once it stops, another client gets
/// the lock within one lease, and nothing is left.
async fn unknown_outcomes_settle(task_owner: bool) {
    let server = RedisServer::start();
    let lease = Duration::from_secs(2);
    let pause = Duration::from_millis(2000);
    let client = server
        .client_with(|c| {
            c.timeout = Duration::from_millis(300);
            c.lock_watchdog_timeout = lease;
        })
        .await;
    let other = server
        .client_with(|c| c.lock_watchdog_timeout = lease)
        .await;
    let name = if task_owner {
        "ambiguous-task"
    } else {
        "ambiguous"
    };
    let lock = client.get_lock(name).unwrap();
    let lock = if task_owner {
        lock.with_task_owner()
    } else {
        lock
    };
    // Load the scripts, so that the attempts queued behind the pause really run
    // (rather than come back NOSCRIPT).
    within(T, "warm-up", async {
        lock.lock().await.unwrap().unlock().await.unwrap();
    })
    .await;

    let mut pauser = server.admin().await;
    let mut admin = server.admin().await;
    let client_id = client.id().to_owned();
    let owner = tokio::spawn(async move {
        let mut outcomes: Vec<String> = Vec::new();
        let mut problems: Vec<String> = Vec::new();
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(pause.as_millis() as u64)
            .arg("ALL")
            .query_async(&mut pauser)
            .await
            .unwrap();
        let resumed = Instant::now() + pause;
        // Guards handed out during the pause (none expected: the server answers
        // nothing), kept and checked once it is over.
        let mut got: Vec<LockGuard> = Vec::new();
        for _ in 0..3 {
            match tokio::time::timeout(Duration::from_millis(100), lock.lock()).await {
                Err(_) => outcomes.push("lock: cut at 100 ms".into()),
                Ok(Ok(guard)) => {
                    outcomes.push("lock: acquired".into());
                    got.push(guard);
                }
                Ok(Err(e)) => outcomes.push(format!("lock: {e}")),
            }
            let tried = within(
                Duration::from_secs(5),
                "try_lock_wait during the pause",
                lock.try_lock_wait(Duration::from_millis(100)),
            )
            .await;
            match tried {
                Ok(None) => outcomes.push("try_lock_wait: none".into()),
                Ok(Some(guard)) => {
                    outcomes.push("try_lock_wait: acquired".into());
                    got.push(guard);
                }
                Err(e) => outcomes.push(format!("try_lock_wait: {e}")),
            }
        }
        tokio::time::sleep_until(resumed + Duration::from_millis(100)).await;

        let task_field = format!("{client_id}:{}", redisson_locks::current_id());
        for guard in got {
            let field = format!("{client_id}:{}", guard.owner_id());
            let count: Option<u64> = admin.hget(name, &field).await.unwrap();
            if count != Some(1) {
                problems.push(format!(
                    "a guard from the pause: its field counts {count:?} for 1 guard"
                ));
            }
            if let Err(e) = guard.unlock().await {
                problems.push(format!("unlock of a guard from the pause: {e}"));
            }
            let count: Option<u64> = admin.hget(name, &field).await.unwrap();
            if count.is_some() {
                problems.push(format!(
                    "a guard from the pause released: its field counts {count:?}"
                ));
            }
        }

        let stop = Instant::now() + Duration::from_secs(3);
        let mut cycles = 0u32;
        while Instant::now() < stop {
            let guard =
                match within(Duration::from_secs(10), "lock after the pause", lock.lock()).await {
                    Ok(guard) => guard,
                    Err(e) => {
                        problems.push(format!("cycle {cycles}: lock: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
            let field = format!("{client_id}:{}", guard.owner_id());
            if task_owner && field != task_field {
                problems.push(format!("cycle {cycles}: owner {field}, not the task"));
            }
            let hash: Vec<(String, u64)> = admin.hgetall(name).await.unwrap();
            if hash != vec![(field.clone(), 1)] {
                problems.push(format!(
                    "cycle {cycles}: holding 1 guard as {field}, the hash is {hash:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            if let Err(e) = guard.unlock().await {
                problems.push(format!("cycle {cycles}: unlock: {e}"));
            }
            // Holding nothing now: the owner's field (the task's, or this
            // acquisition's) counts nothing.
            let count: Option<u64> = admin.hget(name, &field).await.unwrap();
            if count.is_some() {
                problems.push(format!(
                    "cycle {cycles}: holding no guard, field {field} counts {count:?}"
                ));
            }
            cycles += 1;
        }
        (outcomes, problems, cycles)
    });
    let (outcomes, problems, cycles) = within(T, "the owner", owner).await.unwrap();

    // The owner stopped: another client gets the lock within one lease (a hold
    // left behind is not renewed: it ends with its lease; one left renewed would
    // never end), to which a loaded machine may add.
    let stopped = Instant::now();
    let theirs = tokio::time::timeout(lease + LATE, other.get_lock(name).unwrap().lock()).await;
    let waited = stopped.elapsed();
    let left = server.keys().await;
    if let Ok(Ok(guard)) = theirs {
        guard.unlock().await.unwrap();
    }
    assert!(
        problems.is_empty(),
        "owner ({}): {}; during the pause: {outcomes:?}; {cycles} cycles",
        if task_owner { "task" } else { "default" },
        first_few(&problems)
    );
    assert!(cycles > 0, "no cycle ran");
    println!("during the pause: {outcomes:?}; {cycles} cycles; the other client waited {waited:?}");
    assert!(
        waited <= lease + LATE,
        "another client waited {waited:?} (lease {lease:?}) after the owner stopped; \
         keys then: {left:?}; during the pause: {outcomes:?}"
    );
    assert_nothing_left(&server, &[&client, &other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_cut_short_by_a_client_pause_settle_for_the_default_owner() {
    unknown_outcomes_settle(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_cut_short_by_a_client_pause_settle_for_the_task_owner() {
    unknown_outcomes_settle(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_flushed_every_two_ms_cost_no_error_and_no_overlap() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            server
                .client_with(|c| {
                    c.timeout = Duration::from_secs(2);
                    c.lock_watchdog_timeout = Duration::from_secs(5);
                })
                .await,
        );
    }
    let flushing = Duration::from_secs(10);
    // After the flushing: long enough to tell a stall apart from a loaded
    // machine's pause (see the widest gap below).
    let after = Duration::from_secs(4);
    let started = Instant::now();
    let flush_stop = started + flushing;
    let stop_at = flush_stop + after;

    let flusher = tokio::spawn({
        let mut admin = server.admin().await;
        async move {
            let mut flushes = 0u64;
            while Instant::now() < flush_stop {
                let _: () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut admin)
                    .await
                    .unwrap();
                flushes += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            flushes
        }
    });

    let grants: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let exclusion = Arc::new(Exclusion::default());
    let counter_conn = server.admin().await;
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..10 {
            let lock = client.get_lock("flushed").unwrap();
            let mut conn = counter_conn.clone();
            let (grants, errors) = (grants.clone(), errors.clone());
            let exclusion = exclusion.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < stop_at {
                    let guard = match tokio::time::timeout_at(
                        stop_at + Duration::from_secs(5),
                        lock.lock(),
                    )
                    .await
                    {
                        Err(_) => {
                            errors
                                .lock()
                                .unwrap()
                                .push(format!("{c}/{t}: lock() still waiting 5 s after the end"));
                            return;
                        }
                        Ok(Err(e)) => {
                            errors.lock().unwrap().push(format!("{c}/{t}: lock: {e}"));
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        Ok(Ok(guard)) => guard,
                    };
                    let at = Instant::now();
                    let inside = exclusion.enter();
                    // Read, yield, write: an overlap loses an increment.
                    let value: Option<u64> = conn.get("flushed-counter").await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = conn
                        .set("flushed-counter", value.unwrap_or(0) + 1)
                        .await
                        .unwrap();
                    drop(inside);
                    grants.lock().unwrap().push(at);
                    if let Err(e) = guard.unlock().await {
                        errors.lock().unwrap().push(format!("{c}/{t}: unlock: {e}"));
                    }
                }
            }));
        }
    }
    within(
        flushing + after + Duration::from_secs(10),
        "30 contenders",
        async {
            for task in tasks {
                task.await.unwrap();
            }
        },
    )
    .await;
    let flushes = within(T, "flusher", flusher).await.unwrap();

    let grants = grants.lock().unwrap().clone();
    let errors = errors.lock().unwrap().clone();
    let during = grants.iter().filter(|at| **at < flush_stop).count();
    let mut admin = server.admin().await;
    let counter: Option<u64> = admin.get("flushed-counter").await.unwrap();
    let summary = format!(
        "{flushes} flushes; {} grants ({during} while flushing); {} errors",
        grants.len(),
        errors.len()
    );
    assert!(errors.is_empty(), "{summary}: {}", first_few(&errors));
    exclusion.assert_never_overlapped(&format!("{summary}: overlapping holds"));
    assert_eq!(
        counter.unwrap_or(0),
        grants.len() as u64,
        "{summary}: an increment was lost"
    );
    // After the flushing stops, grants follow each other without a gap: none as
    // long as half the time after it (2 s). A wake-up lost to a flush would
    // sleep out the TTL of a 5 s watchdog hold (never below 3.3 s), and a stall
    // of all 30 would leave the whole time after the flushing without a grant.
    let mut points: Vec<Instant> = grants
        .iter()
        .copied()
        .filter(|at| *at >= flush_stop)
        .collect();
    points.push(flush_stop);
    points.push(stop_at);
    points.sort();
    let (gap_at, widest) = points
        .windows(2)
        .map(|w| (w[0] - started, w[1] - w[0]))
        .max_by_key(|(_, gap)| *gap)
        .unwrap();
    assert!(
        widest <= after / 2,
        "{summary}: no grant for {widest:?} from {gap_at:?} after the start (flushing \
         stopped at {flushing:?})"
    );
    println!("{summary}; widest gap after the flushing {widest:?}");
    let _: () = admin.del("flushed-counter").await.unwrap();
    assert_nothing_left(&server, &clients.iter().collect::<Vec<_>>()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_sharing_a_channel_each_wake_their_own_waiter() {
    const CHANNEL: &str = "redisson_lock__channel:{a}";
    let server = RedisServer::start();
    // A long lease: a sleep bounded by the TTL cannot hide a lost wake-up.
    let holder = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(30))
        .await;
    let waiter = server.client().await;
    // Well under the 20-30 s TTL a waiter whose wake-up went to the other name
    // would sleep out.
    let prompt = PROMPT;

    for (first, second) in [("a", "{a}"), ("{a}", "a")] {
        let (held_first, held_second) = within(T, "holder", async {
            (
                holder.get_lock(first).unwrap().lock().await.unwrap(),
                holder.get_lock(second).unwrap().lock().await.unwrap(),
            )
        })
        .await;
        let wait = |name: &str| {
            let lock = waiter.get_lock(name).unwrap();
            tokio::spawn(async move { lock.lock().await.unwrap() })
        };
        let mut waiting_first = wait(first);
        let mut waiting_second = wait(second);
        assert!(
            eventually(Duration::from_secs(5), || async {
                server.subscribers(CHANNEL).await == 1
            })
            .await,
            "the waiters did not subscribe to {CHANNEL}"
        );
        // Both wait, each in its client's line for its name.
        assert!(
            eventually(Duration::from_secs(10), || async {
                waiter.waiting_for(first) == 1 && waiter.waiting_for(second) == 1
            })
            .await,
            "the waiters are not both waiting"
        );
        assert!(!waiting_first.is_finished() && !waiting_second.is_finished());

        held_first.unlock().await.unwrap();
        let got_first = within(
            prompt,
            &format!("the {first} waiter after {first} was released ({second} still held)"),
            &mut waiting_first,
        )
        .await
        .unwrap();
        assert!(
            !waiting_second.is_finished(),
            "the {second} waiter got a lock that is held"
        );

        held_second.unlock().await.unwrap();
        let got_second = within(
            prompt,
            &format!("the {second} waiter after {second} was released ({first} released before)"),
            &mut waiting_second,
        )
        .await
        .unwrap();
        got_first.unlock().await.unwrap();
        got_second.unlock().await.unwrap();
    }
    assert_nothing_left(&server, &[&holder, &waiter]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_hold_without_ttl_is_polled_once_per_client_and_its_end_noticed() {
    const WAITERS: usize = 200;
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    // A hold some other library left without an expiry.
    let _: () = admin.hset("foreign", "someone:1", 1).await.unwrap();

    let started = Arc::new(AtomicUsize::new(0));
    let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let lock = client.get_lock("foreign").unwrap();
        let (started, acquired_tx) = (started.clone(), acquired_tx.clone());
        tasks.push(tokio::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = lock.lock().await.unwrap();
            acquired_tx.send(Instant::now()).unwrap();
            guard.unlock().await.unwrap();
        }));
    }
    drop(acquired_tx);
    assert!(
        eventually(Duration::from_secs(5), || async {
            started.load(Ordering::SeqCst) == WAITERS
        })
        .await
    );
    // All past their first attempt (the head from its first on), so that only
    // polls fall in the measured window.
    assert!(
        eventually(Duration::from_secs(30), || async {
            client.waiting_for("foreign") == WAITERS
        })
        .await,
        "{} of {WAITERS} waiting",
        client.waiting_for("foreign")
    );

    let mut problems = Vec::new();
    server.reset_stats().await;
    let measured = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let calls = server.command_calls("evalsha").await + server.command_calls("eval").await;
    let elapsed = measured.elapsed();
    let per_second = calls as f64 / elapsed.as_secs_f64();
    println!("{calls} script calls in {elapsed:?} with {WAITERS} waiters");
    if per_second > 20.0 {
        problems.push(format!(
            "{calls} script calls in {elapsed:?} ({per_second:.1}/s) with {WAITERS} waiters"
        ));
    }
    if acquired.try_recv().is_ok() {
        problems.push("a waiter acquired while the foreign hold was on".into());
    }

    let _: () = admin.del("foreign").await.unwrap();
    let deleted = Instant::now();
    // The poller notices within its longest pause (500 ms), a loaded machine
    // later; a client that only listened would never notice.
    match tokio::time::timeout(Duration::from_secs(3), acquired.recv()).await {
        Ok(Some(_)) => {}
        Ok(None) => problems.push("every waiter ended without acquiring".into()),
        Err(_) => problems.push("no waiter acquired within 3 s of the deletion".into()),
    }
    // Then the line moves on by releases: 200 in a row, each a few round trips,
    // which a loaded machine makes slow; this bound catches a line that stops.
    let all_within = Duration::from_secs(20);
    let all = tokio::time::timeout_at(deleted + all_within, async {
        for task in &mut tasks {
            task.await.unwrap();
        }
    })
    .await;
    println!("all done {:?} after the deletion", deleted.elapsed());
    if all.is_err() {
        let done = tasks.iter().filter(|t| t.is_finished()).count();
        problems.push(format!(
            "{done} of {WAITERS} waiters done {all_within:?} after the deletion"
        ));
        for task in &tasks {
            task.abort();
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert_nothing_left(&server, &[&client]).await;
}
