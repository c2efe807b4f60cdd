//! A client's line for a non-fair lock: of one client's waiters for one lock,
//! one waits in Redis and the others are parked behind it, sending nothing, and
//! they get the lock in the order they arrived. Re-entries never wait in it,
//! and a waiter that leaves it (cancelled, timed out) takes nothing with it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{
    assert_nothing_left, eventually, gives_up_on_time, holds_until_told, within, RedisServer,
};

const T: Duration = Duration::from_secs(20);

/// Waits until `client`'s subscription to lock `name`'s channel is on the
/// server: its waiters listen.
async fn until_subscribed(server: &RedisServer, name: &str) {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert!(
        eventually(T, || async { server.subscribers(&channel).await == 1 }).await,
        "nobody subscribed to {channel}"
    );
}

/// Waits until `count` of `client`'s tasks wait for `name`.
async fn until_waiting(client: &redisson_locks::Client, name: &str, count: usize) {
    assert!(
        eventually(T, || async { client.waiting_for(name) == count }).await,
        "{} waiting for {name}, expected {count}",
        client.waiting_for(name)
    );
}

/// A server, a client holding the lock `name`, and a client to wait for it.
async fn held_by_another_client(
    name: &str,
) -> (
    RedisServer,
    redisson_locks::Client,
    redisson_locks::Client,
    redisson_locks::LockGuard,
) {
    held_with(name, |_| {}).await
}

/// [`held_by_another_client`], both clients configured by `adjust`.
async fn held_with(
    name: &str,
    adjust: impl Fn(&mut redisson_locks::Config) + Copy,
) -> (
    RedisServer,
    redisson_locks::Client,
    redisson_locks::Client,
    redisson_locks::LockGuard,
) {
    let server = RedisServer::start();
    let holder = server.client_with(adjust).await;
    let client = server.client_with(adjust).await;
    let held = holder.get_lock(name).unwrap().lock().await.unwrap();
    (server, holder, client, held)
}

/// Short leases: a waiter sleeps at most a TTL (2 s) before trying again.
fn short_leases(config: &mut redisson_locks::Config) {
    config.lock_watchdog_timeout = Duration::from_secs(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_send_nothing_and_are_served_in_arrival_order() {
    const WAITERS: usize = 40;
    let name = "line";
    let (server, holder, client, held) = held_by_another_client(name).await;
    let before = server.command_calls("evalsha").await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        let lock = client.get_lock(name).unwrap();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        // Arrival order is the order they entered the line.
        until_waiting(&client, name, i + 1).await;
    }
    // One of them tried (and, once subscribed, tried again); the others sent
    // nothing while they waited.
    let attempts = server.command_calls("evalsha").await - before;
    assert!(
        (1..=3).contains(&attempts),
        "{attempts} attempts for {WAITERS} waiters of one client"
    );
    assert_eq!(client.subscribed_channels(), 1);

    held.unlock().await.unwrap();
    within(T, "the waiters", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    // Each took its turn with one attempt that succeeded, and one release;
    // none tried while another of its client held the lock.
    let commands = server.command_calls("evalsha").await - before;
    assert!(
        commands <= 2 * WAITERS as u64 + 4,
        "{commands} scripts for {WAITERS} acquisitions and releases"
    );
    assert_eq!(client.waiting_for(name), 0);
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// The owner holding the lock takes it again at once, though its client's
/// other tasks wait for it: waiting behind them would wait forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_never_waits_behind_the_clients_line() {
    let server = RedisServer::start();
    let client = server.client().await;
    let name = "reentered";
    let lock = client.get_lock(name).unwrap().with_task_owner();
    within(T, "re-entry past the line", async {
        let outer = lock.lock().await.unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let lock = client.get_lock(name).unwrap();
                tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
            })
            .collect();
        until_waiting(&client, name, 3).await;
        let inner = lock.lock().await.unwrap();
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        inner.unlock().await.unwrap();
        outer.unlock().await.unwrap();
        for waiter in waiters {
            waiter.await.unwrap();
        }
    })
    .await;
    assert_nothing_left(&server, &[&client]).await;
}

/// An owner that may be waiting elsewhere (one explicit id on two tasks, a
/// task's sibling futures) never parks: parked behind a waiter that waits for
/// its own hold, it would wait forever. Owner 7 takes the lock and keeps it
/// until its second acquisition re-enters; a waiter of another owner stands
/// between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_waiting_twice_never_parks_behind_itself() {
    let name = "shared-owner";
    // Short leases: nothing wakes an owner's second waiter when its first one
    // acquires; it tries again after a TTL.
    let (server, holder, client, held) = held_with(name, short_leases).await;
    let spawn_waiter = |owner: Option<u64>, done: Option<tokio::sync::oneshot::Receiver<()>>| {
        let lock = client.get_lock(name).unwrap();
        let lock = match owner {
            Some(id) => lock.with_owner_id(id),
            None => lock,
        };
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            if let Some(done) = done {
                done.await.unwrap();
            }
            guard.unlock().await.unwrap();
        })
    };
    let (second_in, second_done) = tokio::sync::oneshot::channel();
    let head = spawn_waiter(None, None);
    until_waiting(&client, name, 1).await;
    let first_of_7 = spawn_waiter(Some(7), Some(second_done));
    until_waiting(&client, name, 2).await;
    let between = spawn_waiter(None, None);
    until_waiting(&client, name, 3).await;
    let second_of_7 = {
        let lock = client.get_lock(name).unwrap().with_owner_id(7);
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            second_in.send(()).unwrap();
            guard.unlock().await.unwrap();
        })
    };
    until_waiting(&client, name, 4).await;
    held.unlock().await.unwrap();
    within(T, "both of owner 7, and the others", async {
        for task in [head, first_of_7, between, second_of_7] {
            task.await.unwrap();
        }
    })
    .await;
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// A head whose future is no longer polled (it sits in a `select!` whose other
/// branch runs) does not hold the line forever: once past due (its TTL-bounded
/// sleep, plus a grace), the waiters behind it wait in Redis on their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_is_not_polled_does_not_hold_the_line() {
    let name = "unpolled";
    let (server, holder, client, held) = held_with(name, short_leases).await;
    let lock = client.get_lock(name).unwrap();
    let mut head = Box::pin(lock.lock());
    // Polled until it listens (it entered the line and tried), then no more.
    tokio::select! {
        got = &mut head => panic!("the head got a held lock (ok: {})", got.is_ok()),
        () = until_subscribed(&server, name) => {}
    }
    let other = {
        let lock = client.get_lock(name).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    until_waiting(&client, name, 2).await;
    held.unlock().await.unwrap();
    within(T, "the waiter behind a head nobody polls", other)
        .await
        .unwrap();
    drop(head);
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// Waiters leaving the line, from its head or from behind, leave nothing: the
/// rest move up and are all served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_waiters_leave_the_line_and_the_rest_move_up() {
    let name = "leaving";
    let (server, holder, client, held) = held_by_another_client(name).await;
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = client.get_lock(name).unwrap();
        let served = served.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            served.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        until_waiting(&client, name, i + 1).await;
    }
    // A timed wait parked at the back gives up on time.
    let timed = client.get_lock(name).unwrap();
    gives_up_on_time(Duration::from_millis(300), async {
        timed
            .try_lock_wait(Duration::from_millis(300))
            .await
            .unwrap()
            .is_some()
    })
    .await;
    until_waiting(&client, name, 8).await;
    // The head (waiting in Redis) and two parked ones are cancelled.
    for i in [0, 3, 6] {
        tasks[i].abort();
    }
    until_waiting(&client, name, 5).await;
    held.unlock().await.unwrap();
    within(T, "the remaining waiters", async {
        for (i, task) in tasks.into_iter().enumerate() {
            let outcome = task.await;
            assert_eq!(outcome.is_err(), [0, 3, 6].contains(&i), "task {i}");
        }
    })
    .await;
    assert_eq!(*served.lock().unwrap(), vec![1, 2, 4, 5, 7]);
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// The next in line, told the lock is held by its own client, sends nothing
/// and sleeps on the unlock message: the release wakes it at once, long before
/// the holder's lease (30 s, the bound it sleeps to) would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_in_line_wakes_on_its_clients_release() {
    let name = "passed-on";
    let (server, holder, client, held) = held_by_another_client(name).await;
    let (first, first_has, release_first) = holds_until_told(client.get_lock(name).unwrap());
    until_waiting(&client, name, 1).await;
    let second = {
        let lock = client.get_lock(name).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    until_waiting(&client, name, 2).await;
    // The first has tried, subscribed (and tried again if it had to): nothing
    // more goes out while the lock stays held.
    let settled = || async {
        let calls = server.command_calls("evalsha").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.command_calls("evalsha").await == calls
    };
    assert!(eventually(T, settled).await);
    let before = server.command_calls("evalsha").await;
    held.unlock().await.unwrap();
    within(T, "the first in line", first_has).await.unwrap();
    // The second now heads the line, behind a hold of its own client: it
    // sends nothing, waiting for that hold's release.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!second.is_finished());
    assert_eq!(
        server.command_calls("evalsha").await - before,
        2,
        "the holder's release and the first's acquire, and no attempt of the second"
    );
    release_first.send(()).unwrap();
    within(
        Duration::from_secs(10),
        "the second, woken by the release",
        second,
    )
    .await
    .unwrap();
    first.await.unwrap();
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// A lost connection while the line waits: the head re-subscribes and
/// retries, and every parked waiter is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_survives_a_lost_connection() {
    let name = "reconnected";
    let (server, holder, client, held) = held_by_another_client(name).await;
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let lock = client.get_lock(name).unwrap();
            tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
        })
        .collect();
    until_waiting(&client, name, 10).await;
    // Counted as waiting, the parked ones may not listen yet: the cut must hit a
    // subscription.
    until_subscribed(&server, name).await;
    assert!(server.kill_subscribers().await >= 1);
    held.unlock().await.unwrap();
    within(T, "the line after the reconnect", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;

    // Again with the lock held by the client's own first in line: the next
    // sleeps on that hold's message, which a reconnect may lose; it must find
    // out (it is woken, and retries) rather than sleep out the 30 s lease.
    let held = holder.get_lock(name).unwrap().lock().await.unwrap();
    let (first, first_has, release_first) = holds_until_told(client.get_lock(name).unwrap());
    until_waiting(&client, name, 1).await;
    let rest: Vec<_> = (0..5)
        .map(|_| {
            let lock = client.get_lock(name).unwrap();
            tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
        })
        .collect();
    until_waiting(&client, name, 6).await;
    held.unlock().await.unwrap();
    within(T, "the first", first_has).await.unwrap();
    until_waiting(&client, name, 5).await;
    until_subscribed(&server, name).await;
    assert!(server.kill_subscribers().await >= 1);
    release_first.send(()).unwrap();
    within(
        T,
        "the line behind its own holder, after a reconnect",
        async {
            first.await.unwrap();
            for task in rest {
                task.await.unwrap();
            }
        },
    )
    .await;
    assert_nothing_left(&server, &[&holder, &client]).await;
}
