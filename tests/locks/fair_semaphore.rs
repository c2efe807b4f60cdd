//! The fair semaphore (`RFairSemaphore`): waiters served strictly in arrival
//! order, a big request first in line holding back smaller ones, a try with
//! no wait barging, leased permits renewed by the watchdog and given back
//! when their holder dies, a vanished waiter skipped, and every way out of a
//! wait leaving nothing behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{eventually, within, RedisServer};

const T: Duration = Duration::from_secs(20);

/// How many wait in `name`'s line (its LIST).
async fn line_len(server: &RedisServer, name: &str) -> usize {
    let mut admin = server.admin().await;
    admin
        .llen(format!("redisson_fair_semaphore_queue:{{{name}}}"))
        .await
        .unwrap()
}

/// A task that takes `permits` of `name`, records its `tag` when it has them,
/// and keeps them until told.
fn waiter(
    client: &redisson_locks::Client,
    name: &str,
    permits: u32,
    tag: &'static str,
    served: &Arc<Mutex<Vec<&'static str>>>,
) -> (
    tokio::task::JoinHandle<redisson_locks::FairPermits>,
    tokio::sync::oneshot::Sender<()>,
) {
    let semaphore = client.get_fair_semaphore(name).unwrap();
    let served = served.clone();
    let (go, told) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let permits = semaphore.acquire(permits).await.unwrap();
        served.lock().unwrap().push(tag);
        let _ = told.await;
        permits
    });
    (task, go)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order_across_clients() {
    let server = RedisServer::start();
    let clients = [server.client().await, server.client().await];
    let semaphore = clients[0].get_fair_semaphore("fifo").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(!semaphore.try_set_permits(5).await.unwrap());
    let first = semaphore.acquire(1).await.unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    for (i, tag) in ["a", "b", "c", "d", "e", "f"].into_iter().enumerate() {
        waiting.push(waiter(&clients[i % 2], "fifo", 1, tag, &served));
        assert!(
            eventually(T, || async { line_len(&server, "fifo").await == i + 1 }).await,
            "{tag} did not join the line"
        );
    }
    first.release().await.unwrap();
    for (task, go) in waiting {
        let _ = go.send(());
        within(T, "a waiter in turn", task)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    assert_eq!(*served.lock().unwrap(), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    assert_eq!(line_len(&server, "fifo").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_request_first_in_line_holds_back_smaller_ones_behind_it() {
    let server = RedisServer::start();
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("big").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    let held = semaphore.acquire(2).await.unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let (big, go_big) = waiter(&client, "big", 2, "big", &served);
    assert!(eventually(T, || async { line_len(&server, "big").await == 1 }).await);
    let (small, go_small) = waiter(&client, "big", 1, "small", &served);
    assert!(eventually(T, || async { line_len(&server, "big").await == 2 }).await);
    // One permit is free, and the small request behind the big one does not
    // take it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(served.lock().unwrap().is_empty(), "{served:?}");
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    held.release().await.unwrap();
    let _ = (go_big.send(()), go_small.send(()));
    let big = within(T, "the big request", big).await.unwrap();
    let small = within(T, "the small request", small).await.unwrap();
    // The one release served both, in line order, in one script (both are
    // this client's); their tasks record in whatever order they run.
    let mut served = served.lock().unwrap().clone();
    served.sort();
    assert_eq!(served, ["big", "small"]);
    assert_eq!(big.permits() + small.permits(), 3);
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    big.release().await.unwrap();
    small.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_with_no_wait_barges_and_a_try_with_a_wait_queues() {
    let server = RedisServer::start();
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("barge").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let held = semaphore.acquire(1).await.unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let (big, go_big) = waiter(&client, "barge", 2, "big", &served);
    assert!(eventually(T, || async { line_len(&server, "barge").await == 1 }).await);
    // Java's tryAcquire() on a fair semaphore barges: so does a zero wait.
    let barged = semaphore.try_acquire(1, Duration::ZERO).await.unwrap();
    let barged = barged.expect("a try with no wait takes the free permit");
    assert_eq!(line_len(&server, "barge").await, 1, "it never queued");
    // A try with a wait queues behind the big request, and gives up.
    let timed = semaphore
        .try_acquire(1, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(timed.is_none());
    assert_eq!(line_len(&server, "barge").await, 1, "it left the line");
    held.release().await.unwrap();
    barged.release().await.unwrap();
    let _ = go_big.send(());
    let big = within(T, "the big request", big).await.unwrap();
    assert_eq!(big.permits(), 2);
    big.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_leaves_no_place_no_permit_and_no_subscription() {
    let server = RedisServer::start();
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("dropped").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let held = semaphore.acquire(1).await.unwrap();
    let waiting = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    assert!(eventually(T, || async { line_len(&server, "dropped").await == 1 }).await);
    waiting.abort();
    assert!(
        eventually(T, || async { line_len(&server, "dropped").await == 0 }).await,
        "the dropped waiter kept its place"
    );
    let mut admin = server.admin().await;
    let fields: Vec<String> = admin.hkeys("dropped").await.unwrap();
    // The client's epoch stays until its place window ends (see fsem_common.lua).
    let fields: Vec<&String> = fields.iter().filter(|f| !f.starts_with("line:")).collect();
    assert_eq!(fields.len(), 2, "permits and the one hold: {fields:?}");
    assert!(
        eventually(T, || async { server.channels().await.is_empty() }).await,
        "subscriptions left: {:?}",
        server.channels().await
    );
    held.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
    // Bad input: nothing sent.
    assert!(semaphore
        .acquire(0)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(semaphore
        .try_acquire(1, Duration::from_secs(u64::MAX / 2))
        .await
        .unwrap_err()
        .is_invalid_argument());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_renewed_while_held_and_come_back_a_lease_after_renewals_stop() {
    let server = RedisServer::start();
    let short = |config: &mut redisson_locks::Config| {
        config.lock_watchdog_timeout = Duration::from_secs(1);
    };
    let holder = server.client_with(short).await;
    let semaphore = holder.get_fair_semaphore("leased").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permits = semaphore.acquire(1).await.unwrap();
    // Three leases long: renewed all along.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!permits.is_lease_lost());
    assert!(permits.valid_for().is_some());
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    permits.release().await.unwrap();

    // A holder whose renewals stop (here: its term, `max_hold`, is over; a
    // process that died stops them the same way) keeps its permits one lease
    // more, then they are back, and a waiter elsewhere gets them.
    let bounded = server
        .client_with(|config| {
            config.lock_watchdog_timeout = Duration::from_secs(1);
            config.max_hold = Some(Duration::from_millis(1_500));
        })
        .await;
    let stopped = bounded
        .get_fair_semaphore("leased")
        .unwrap()
        .acquire(1)
        .await
        .unwrap();
    let other = server.client().await;
    let waiting = other.get_fair_semaphore("leased").unwrap();
    let started = std::time::Instant::now();
    let got = within(T, "permits whose renewals stopped", waiting.acquire(1))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(stopped.is_lease_lost(), "the holder knows");
    assert!(stopped.release().await.unwrap_err().is_not_held());
    got.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_vanished_from_the_head_of_the_line_is_skipped() {
    let server = RedisServer::start();
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("vanished").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    // A waiter that joined and died: first in line, its place a moment from
    // its end, nobody to take the free permit for it.
    let mut admin = server.admin().await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = admin
        .rpush("redisson_fair_semaphore_queue:{vanished}", "ghost")
        .await
        .unwrap();
    let _: () = admin
        .zadd(
            "redisson_fair_semaphore_timeout:{vanished}",
            "ghost",
            now_ms + 300,
        )
        .await
        .unwrap();
    let _: () = admin.hset("vanished", "want:ghost", 1).await.unwrap();
    let got = within(T, "the waiter behind a vanished one", semaphore.acquire(1))
        .await
        .unwrap();
    assert_eq!(line_len(&server, "vanished").await, 0);
    got.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_semaphore_of_the_same_name_is_refused_both_ways() {
    let server = RedisServer::start();
    let client = server.client().await;
    // Redisson's RSemaphore keeps its count in a string at the name.
    let plain = client.get_semaphore("shared-name").unwrap();
    assert!(plain.try_set_permits(3).await.unwrap());
    let fair = client.get_fair_semaphore("shared-name").unwrap();
    let refused = fair.acquire(1).await.unwrap_err();
    assert!(refused.is_wrong_type(), "{refused}");
    assert!(fair.available_permits().await.unwrap_err().is_wrong_type());
    assert_eq!(plain.available_permits().await.unwrap(), 3, "untouched");

    // And a fair semaphore's hash is no count for an RSemaphore.
    let fair = client.get_fair_semaphore("fair-only").unwrap();
    assert!(fair.try_set_permits(2).await.unwrap());
    let plain = client.get_semaphore("fair-only").unwrap();
    assert!(plain.try_acquire().await.is_err());
    assert_eq!(fair.available_permits().await.unwrap(), 2, "untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_can_be_added_removed_and_drained() {
    let server = RedisServer::start();
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("counts").unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert_eq!(semaphore.add_permits(3).await.unwrap(), 3);
    // A waiter for two is called as soon as the permits come.
    assert_eq!(semaphore.drain_permits().await.unwrap(), 3);
    let waiting = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(2).await })
    };
    assert!(eventually(T, || async { line_len(&server, "counts").await == 1 }).await);
    assert_eq!(semaphore.add_permits(1).await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "served with one permit of two");
    assert_eq!(semaphore.add_permits(1).await.unwrap(), 2);
    let two = within(T, "the waiter for two", waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    assert_eq!(semaphore.add_permits(-1).await.unwrap(), -1);
    two.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

/// Eight tasks over two clients take one of two permits in turn for 3 s,
/// every call recorded: no instant of the history has more than two holders
/// (the permits model of `support/history.rs`), and the line shares the
/// permits out evenly (Jain's index over the tasks' counts: a plain
/// semaphore's race lets a task starve; one served in arrival order cannot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_never_has_more_holders_than_permits_and_serves_every_task() {
    use crate::support::history::{check, merge, Op, Outcome, Permits, Recorder};
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-fair-sem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, "fair-semaphore"));
    let clients = [server.client().await, server.client().await];
    assert!(clients[0]
        .get_fair_semaphore("recorded")
        .unwrap()
        .try_set_permits(2)
        .await
        .unwrap());
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let semaphore = clients[t % 2].get_fair_semaphore("recorded").unwrap();
            let recorder = recorder.clone();
            tokio::spawn(async move {
                let owner = format!("t{t}");
                let mut served = 0_u64;
                while tokio::time::Instant::now() < until {
                    let call = recorder.invoke(&owner, "recorded", Op::PermitAcquire);
                    let Ok(permits) = semaphore.acquire(1).await else {
                        drop(call);
                        continue;
                    };
                    call.end(Outcome::Ok, None);
                    served += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let call = recorder.invoke(&owner, "recorded", Op::PermitRelease);
                    match permits.release().await {
                        Ok(()) => call.end(Outcome::Ok, None),
                        Err(e) if e.is_not_held() => call.end(Outcome::Refused, None),
                        Err(_) => drop(call),
                    }
                }
                served
            })
        })
        .collect();
    let mut served = Vec::new();
    for task in tasks {
        served.push(within(T, "a task", task).await.unwrap());
    }
    let history = merge(&dir);
    assert!(history.len() > 100, "{} operations", history.len());
    if let Err(violation) = check(&Permits { n: 2 }, &history) {
        panic!(
            "the permits model found no order ({} operations); history in {}",
            violation.operations.len(),
            dir.display()
        );
    }
    let sum: f64 = served.iter().map(|&n| n as f64).sum();
    let squares: f64 = served.iter().map(|&n| (n as f64).powi(2)).sum();
    let jain = sum * sum / (served.len() as f64 * squares);
    eprintln!("fair semaphore, 8 tasks, 2 permits: served {served:?}, Jain {jain:.3}");
    assert!(jain > 0.95, "Jain {jain:.3} over {served:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A head that vanished is removed by whatever script runs next, and the
/// waiter it held back is called at once if what it asks for is free: here
/// a newcomer's try removes it, and the waiter behind, which last tried
/// before the vanished head's place ran out, must not sleep to its own next
/// try (up to a third of the 10 s window) on a permit that is free for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_vanished_head_is_called_by_the_next_script_that_removes_it() {
    let server = RedisServer::start();
    let clients = [server.client().await, server.client().await];
    let semaphore = clients[0].get_fair_semaphore("called").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    // First in line: a waiter for two permits that died. Its place looks good
    // for a minute when the waiter behind joins (so that the waiter's reply
    // names no change by itself soon), and then ends in 300 ms, which nobody
    // is told of.
    let mut admin = server.admin().await;
    let ghost_admin = admin.clone();
    let ghost_gone_in = |ms: u64| {
        let mut admin = ghost_admin.clone();
        async move {
            let time: (u64, u64) = redis::cmd("TIME").query_async(&mut admin).await.unwrap();
            let _: () = admin
                .zadd(
                    "redisson_fair_semaphore_timeout:{called}",
                    "ghost",
                    time.0 * 1000 + time.1 / 1000 + ms,
                )
                .await
                .unwrap();
        }
    };
    let _: () = admin
        .rpush("redisson_fair_semaphore_queue:{called}", "ghost")
        .await
        .unwrap();
    ghost_gone_in(60_000).await;
    let _: () = admin.hset("called", "want:ghost", 2).await.unwrap();
    let scripts_before = scripts_run(&server).await;
    let behind = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    // Alone in its client, the waiter tries, listens, and tries again once
    // its channel is confirmed: the ghost's end moves only after that second
    // try, whose reply would otherwise name the new end (and the waiter would
    // rightly try then, with nobody's script to call it).
    let settled = eventually(T, || async {
        line_len(&server, "called").await == 2
            && server.channels().await.len() == 1
            && scripts_run(&server).await >= scripts_before + 2
    })
    .await;
    assert!(settled, "the waiter behind the ghost never tried twice");
    ghost_gone_in(300).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!behind.is_finished(), "nothing ran to remove the ghost yet");
    // The newcomer's first try removes the ghost and joins the line behind
    // the waiter (it stays there: no leave calls anyone).
    let newcomer = {
        let semaphore = clients[1].get_fair_semaphore("called").unwrap();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    let started = std::time::Instant::now();
    let got = within(T, "the waiter behind the ghost", behind)
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "called {:?} after the ghost was removed",
        started.elapsed()
    );
    got.release().await.unwrap();
    within(T, "the newcomer", newcomer)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    assert_eq!(line_len(&server, "called").await, 0);
}

/// How many scripts the server ran so far (`EVALSHA`, `EVAL`).
async fn scripts_run(server: &RedisServer) -> u64 {
    let mut admin = server.admin().await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut admin)
        .await
        .unwrap();
    info.lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A client's waiters for one fair semaphore share one subscription and
/// stand parked: only the first of them keeps the client's places (a keep
/// every third of the 10 s place window; the suite re-checks only every
/// 40 s), so twenty waiters send about one script in four seconds, not
/// twenty. Then they are served in arrival order, each by its client's own
/// release (a grant, handed over in process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_send_nothing_and_are_served_in_arrival_order() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let held = {
        let semaphore = holder.get_fair_semaphore("parked").unwrap();
        assert!(semaphore.try_set_permits(1).await.unwrap());
        semaphore.acquire(1).await.unwrap()
    };
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    for i in 0..20_usize {
        let semaphore = client.get_fair_semaphore("parked").unwrap();
        let served = served.clone();
        waiting.push(tokio::spawn(async move {
            let permits = semaphore.acquire(1).await.unwrap();
            served.lock().unwrap().push(i);
            permits.release().await.unwrap();
        }));
        assert!(eventually(T, || async { line_len(&server, "parked").await == i + 1 }).await);
    }
    let before = scripts_run(&server).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let sent = scripts_run(&server).await - before;
    // One keep (maybe two, at the window's edges) and the holder's renewal.
    assert!(sent <= 4, "{sent} scripts in 4 s from 20 parked waiters");
    assert_eq!(
        server.channels().await.len(),
        1,
        "{:?}",
        server.channels().await
    );
    held.release().await.unwrap();
    for task in waiting {
        within(T, "a parked waiter", task).await.unwrap();
    }
    assert_eq!(*served.lock().unwrap(), (0..20).collect::<Vec<_>>());
    assert_eq!(line_len(&server, "parked").await, 0);
}

/// A client's places lost while its waiters are parked (the line's keys
/// deleted, as a failover to a replica that missed them would): the first
/// waiter's keep finds no place, and every waiter of the client joins again
/// and is served, all within a keep's period. Without the word to all, each
/// parked waiter found out only when it came first, a keep (3.3 s) after the
/// one before, until a new epoch told the rest (10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_lost_under_parked_waiters_is_joined_again_by_all_of_them() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let semaphore = holder.get_fair_semaphore("lost").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let held = semaphore.acquire(1).await.unwrap();
    let mut waiting = Vec::new();
    for i in 0..10_usize {
        let semaphore = client.get_fair_semaphore("lost").unwrap();
        waiting.push(tokio::spawn(async move {
            semaphore.acquire(1).await.unwrap().release().await.unwrap();
        }));
        assert!(eventually(T, || async { line_len(&server, "lost").await == i + 1 }).await);
    }
    // The line, the deadlines, and what each waiter asked for, gone; the
    // permits and the hold stay.
    let mut admin = server.admin().await;
    let _: () = admin
        .del(&[
            "redisson_fair_semaphore_queue:{lost}",
            "redisson_fair_semaphore_timeout:{lost}",
        ])
        .await
        .unwrap();
    let fields: Vec<String> = admin.hkeys("lost").await.unwrap();
    for field in fields
        .iter()
        .filter(|f| f.starts_with("want:") || f.starts_with("line:"))
    {
        let _: () = admin.hdel("lost", field).await.unwrap();
    }
    held.release().await.unwrap();
    // All within a keep's period (3.3 s) and room for a loaded machine; each
    // one finding out alone, in turn, took 10 s here.
    let all = async {
        for task in waiting {
            task.await.unwrap();
        }
    };
    within(
        Duration::from_secs(8),
        "every waiter whose place was lost",
        all,
    )
    .await;
    assert_eq!(line_len(&server, "lost").await, 0);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

/// What a fair semaphore keeps besides `permits` once every hold and waiter
/// is gone: nothing but its clients' epochs (they end with their place
/// window). Its hold fields, asks, line and leases are all gone.
async fn assert_left_clean(server: &RedisServer, name: &str, permits: i64) {
    // What the settles and leaves from the clients' threads finish with.
    let leftovers = || async {
        let mut admin = server.admin().await;
        let available: Option<i64> = admin.hget(name, "permits").await.unwrap();
        let fields: Vec<String> = admin.hkeys(name).await.unwrap();
        let left: Vec<String> = fields
            .into_iter()
            .filter(|f| f != "permits" && !f.starts_with("line:"))
            .collect();
        let leases: usize = admin
            .zcard(format!("redisson_fair_semaphore_leases:{{{name}}}"))
            .await
            .unwrap();
        (available, left, line_len(server, name).await, leases)
    };
    let clean = eventually(Duration::from_secs(40), || async {
        let (available, left, line, leases) = leftovers().await;
        available == Some(permits) && left.is_empty() && line == 0 && leases == 0
    })
    .await;
    let (available, left, line, leases) = leftovers().await;
    assert!(
        clean,
        "{available:?} of {permits} permits available, {line} in line, {leases} leases, {} \
         fields left behind (first {:?})",
        left.len(),
        left.iter().take(3).collect::<Vec<_>>()
    );
    super::semaphore::assert_unsubscribed(server, &[]).await;
}

/// Three thousand acquires, three at a time, cut short at every point (before
/// the script, while it runs, while listening, while parked, while a grant
/// is on its way), under
/// churn by two other clients: the permits come back exact, and nothing is
/// left in line, held or subscribed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cancelled_acquires_leave_nothing_behind() {
    let server = RedisServer::start();
    let churners = [server.client().await, server.client().await];
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("cancelled").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut churn = Vec::new();
    for churner in &churners {
        for _ in 0..2 {
            let semaphore = churner.get_fair_semaphore("cancelled").unwrap();
            let stop = stop.clone();
            churn.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let permits = semaphore.acquire(1).await.unwrap();
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    permits.release().await.unwrap();
                }
            }));
        }
    }
    let (mut acquired, mut abandoned) = (0, 0);
    within(Duration::from_secs(120), "1000 cancelled acquires", async {
        for i in 0..1000_u64 {
            let limit = Duration::from_micros((i * 7919) % 15_000);
            // Several at once, so that some are parked behind others.
            let tries = (0..3).map(|_| tokio::time::timeout(limit, semaphore.acquire(1)));
            for taken in futures_util::future::join_all(tries).await {
                match taken {
                    Ok(permits) => {
                        acquired += 1;
                        permits.unwrap().release().await.unwrap();
                    }
                    Err(_) => abandoned += 1,
                }
            }
        }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in churn {
        within(T, "a churning task", task).await.unwrap();
    }
    eprintln!("{acquired} acquired, {abandoned} cancelled");
    assert!(abandoned > 300, "only {abandoned} acquires were cut short");
    assert!(acquired > 30, "only {acquired} acquires got through");
    assert_left_clean(&server, "cancelled", 2).await;
    super::semaphore::assert_unsubscribed(&server, &[&client]).await;
}

/// Connections cut every 50 to 150 ms while sixteen tasks take and give back
/// permits, each acquire dropped at 0 to 30 ms (before the script, while it
/// runs, while its reply is on the way) and each release sent again until
/// the server answers: no permit lost or doubled, nothing left in line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_and_dropped_acquires_lose_no_permit() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.timeout = Duration::from_millis(300))
        .await;
    let semaphore = client.get_fair_semaphore("cut").unwrap();
    assert!(semaphore.try_set_permits(4).await.unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let taken = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..16_u64 {
        let (semaphore, stop, taken) = (semaphore.clone(), stop.clone(), taken.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = t;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 16;
                let limit = Duration::from_micros((i * 7919) % 30_000);
                let attempt = semaphore.try_acquire(1, Duration::from_millis(200));
                if let Ok(Ok(Some(permits))) = tokio::time::timeout(limit, attempt).await {
                    taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // Dropped: given back from the client's thread, sent
                    // again until the server answers.
                    drop(permits);
                }
            }
        }));
    }
    let cutting = server.keep_cutting(&stop);
    let stopping = async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let cuts = tokio::join!(cutting, stopping).0;
    for task in tasks {
        within(T, "a cut task", task).await.unwrap();
    }
    eprintln!(
        "{} acquired over {cuts} cuts",
        taken.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(cuts > 10);
    assert_left_clean(&server, "cut", 4).await;
}
