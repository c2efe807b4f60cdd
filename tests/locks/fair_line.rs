//! A client's line for the fair lock: of one client's waiters for one lock,
//! the first waits in Redis; the others are parked with their own entries in
//! Redis's queue (joined in the order they came) and send nothing else. They
//! are served in Redis's order, interleaved with other clients' waiters, and
//! a parked waiter that leaves (dropped, timed out, dropped while its join is
//! in flight) takes its entry with it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::exclusion::Exclusion;
use crate::support::fair::{join_in_turn, queue, queue_len, timeouts_len};
use crate::support::{assert_nothing_left, eventually, holds_until_told, within, RedisServer};

const T: Duration = Duration::from_secs(30);

/// Waits until `name`'s queue in Redis has `count` entries.
async fn until_queued(server: &RedisServer, name: &str, count: usize) {
    assert!(
        eventually(T, || async { queue_len(server, name).await == count }).await,
        "{} queued for {name}, expected {count}",
        queue_len(server, name).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_fair_waiters_keep_their_entries_and_send_nothing_else() {
    const WAITERS: usize = 40;
    let name = "fair-line";
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let held = holder.get_fair_lock(name).unwrap().lock().await.unwrap();
    let before = server.command_calls("evalsha").await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        tasks.push(join_in_turn(&server, &client, name, i, &order).await);
    }
    // Every task has its own entry and deadline, as Redisson's layout wants;
    // each sent its join, and only the first waits in Redis (its first attempt
    // was its join; once subscribed it may have tried once more).
    assert_eq!(timeouts_len(&server, name).await, WAITERS);
    let scripts = server.command_calls("evalsha").await - before;
    assert!(
        (WAITERS as u64..=WAITERS as u64 + 3).contains(&scripts),
        "{scripts} scripts for {WAITERS} waiters of one client"
    );
    assert!(
        eventually(T, || async { client.subscribed_channels() == 1 }).await,
        "{} channels subscribed for {WAITERS} waiters: only the first listens",
        client.subscribed_channels()
    );
    let serving = ServingCost::before(&server).await;
    held.unlock().await.unwrap();
    within(T, "the fair waiters", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    // The holder's release woke the first; from then on each release granted
    // the next (even one whose task had not yet come to its turn): no
    // message, one script per hand-off. A head that waited for its grant
    // longer than it defers its subscription (20 ms: a loaded machine)
    // subscribed and tried once: one script more each.
    let (scripts, published, subscribed) = serving.since(&server).await;
    assert_eq!(published, 1, "only the other client's release published");
    assert!(
        scripts <= WAITERS as u64 + 3 + subscribed,
        "{scripts} scripts to serve {WAITERS} waiters ({subscribed} subscribed)"
    );
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// Another client takes `name` within 10 s (whatever a dropped heir was
/// granted was given back), and releases it.
async fn comes_free_to(other: &redisson_locks::Client, name: &str, what: &str) {
    let taken = within(T, what, async {
        other
            .get_fair_lock(name)
            .unwrap()
            .try_lock_wait(Duration::from_secs(10))
            .await
            .unwrap()
    })
    .await
    .expect("the lock came free");
    taken.unlock().await.unwrap();
}

/// The commands a server ran from one point on.
struct ServingCost([u64; 3]);

impl ServingCost {
    const COMMANDS: [&str; 3] = ["evalsha", "publish", "subscribe"];

    async fn before(server: &RedisServer) -> ServingCost {
        let mut calls = [0; 3];
        for (calls, command) in calls.iter_mut().zip(Self::COMMANDS) {
            *calls = server.command_calls(command).await;
        }
        ServingCost(calls)
    }

    /// Scripts, publishes and subscribes since `before`.
    async fn since(&self, server: &RedisServer) -> (u64, u64, u64) {
        let now = ServingCost::before(server).await.0;
        (now[0] - self.0[0], now[1] - self.0[1], now[2] - self.0[2])
    }
}

/// Three clients' waiters come in turn, a, b, c, a, b, c, ...: each client
/// parks all but its first, and the lock still goes in Redis's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_of_several_clients_are_served_in_redis_order() {
    const WAITERS: usize = 30;
    let name = "fair-mixed";
    let server = RedisServer::start();
    let holder = server.client().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(server.client().await);
    }
    let held = holder.get_fair_lock(name).unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        tasks.push(join_in_turn(&server, &clients[i % 3], name, i, &order).await);
    }
    held.unlock().await.unwrap();
    within(T, "the fair waiters", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    let mut all = vec![&holder];
    all.extend(clients.iter());
    assert_nothing_left(&server, &all).await;
}

/// Sixty-four tasks of one client arrive at once, many parked before the
/// first has joined: their joins still reach Redis in the order of the local
/// line, so the first of them in Redis's queue is always the one listening.
/// Were it not, a release would wake a parked waiter that does not listen,
/// and the line would stall until that waiter's deadline (a minute here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_one_clients_waiters_never_stalls_the_line() {
    const TASKS: usize = 64;
    const ROUNDS: usize = 3;
    let name = "fair-burst";
    let server = RedisServer::start();
    let client = server
        .client_with(|config| config.fair_lock_wait_timeout = Duration::from_secs(60))
        .await;
    let locks = (0..TASKS).map(|_| client.get_fair_lock(name).unwrap());
    take_turns(
        locks.collect(),
        ROUNDS,
        "64 tasks of one client on a fair lock",
    )
    .await;
    assert_nothing_left(&server, &[&client]).await;
}

/// Each of `locks` (one task per handle) takes its lock `rounds` times and
/// stays inside 1 ms each time; every task done within [`T`], and no two
/// inside at once.
async fn take_turns(locks: Vec<redisson_locks::RLock>, rounds: usize, what: &str) {
    let exclusion = Arc::new(Exclusion::default());
    let tasks: Vec<_> = locks
        .into_iter()
        .map(|lock| {
            let exclusion = exclusion.clone();
            tokio::spawn(async move {
                for _ in 0..rounds {
                    let guard = lock.lock().await.unwrap();
                    let inside = exclusion.enter();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    drop(inside);
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    within(T, what, async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    exclusion.assert_never_overlapped(what);
}

/// Three clients' lines take turns on one lock, their waiters alternating in
/// Redis's queue, so most releases pass their client's next waiter over. A
/// head behind its own client's hold listens without trying then, and a
/// release that passes it over leaves it asleep until its message: a message
/// it missed would stall the line for half the fair wait (30 s here), longer
/// than this test may take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_of_several_clients_taking_turns_never_stall() {
    const CLIENTS: usize = 3;
    const TASKS: usize = 6;
    const ROUNDS: usize = 5;
    let name = "fair-alternating";
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(
            server
                .client_with(|config| config.fair_lock_wait_timeout = Duration::from_secs(60))
                .await,
        );
    }
    let cost = ServingCost::before(&server).await;
    let locks = (0..CLIENTS * TASKS).map(|t| clients[t % CLIENTS].get_fair_lock(name).unwrap());
    take_turns(
        locks.collect(),
        ROUNDS,
        "three clients' lines on a fair lock",
    )
    .await;
    let (scripts, publishes, subscribes) = cost.since(&server).await;
    eprintln!(
        "{} acquisitions: {scripts} scripts, {publishes} publishes, {subscribes} subscribes",
        CLIENTS * TASKS * ROUNDS
    );
    let all: Vec<_> = clients.iter().collect();
    assert_nothing_left(&server, &all).await;
}

/// A waiter that comes alone to its client's line, for a lock one of that
/// client's waiters lately found busy, subscribes before it joins: its join
/// is the attempt a new subscription must be followed by. Its first wait
/// (nothing known yet) sends one script more: the attempt after subscribing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_waiter_on_a_lock_contended_lately_listens_before_it_joins() {
    let name = "fair-lone";
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let mut scripts = Vec::new();
    for _ in 0..2 {
        let held = holder.get_fair_lock(name).unwrap().lock().await.unwrap();
        let cost = ServingCost::before(&server).await;
        let lock = waiter.get_fair_lock(name).unwrap();
        let waiting = tokio::spawn(async move { lock.lock().await.unwrap().unlock().await });
        until_queued(&server, name, 1).await;
        // Time for an attempt after subscribing, if one is to come.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (before_release, _, subscribes) = cost.since(&server).await;
        assert_eq!(subscribes, 1, "one subscription per wait");
        held.unlock().await.unwrap();
        within(T, "the waiter", waiting).await.unwrap().unwrap();
        scripts.push(before_release);
    }
    assert_eq!(
        scripts,
        [2, 1],
        "scripts before the release: the join and the attempt after subscribing, \
         then the join alone"
    );
    assert_nothing_left(&server, &[&holder, &waiter]).await;
}

/// While its client's releases pass their heirs over, a fair head subscribes
/// the next parked heirs' channels with its own (one SUBSCRIBE for several
/// heads); a parked waiter that leaves takes the subscription made for it
/// with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_heirs_that_leave_take_the_subscriptions_made_for_them() {
    let name = "fair-ahead";
    let server = RedisServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let held = a.get_fair_lock(name).unwrap().lock().await.unwrap();
    // Redis's line: b's waiter, then four of a's; the first two of them
    // hold until told.
    let (b_waiter, b_took, b_may_release) = holds_until_told(b.get_fair_lock(name).unwrap());
    until_queued(&server, name, 1).await;
    let (a_waiter, a_took, a_may_release) = holds_until_told(a.get_fair_lock(name).unwrap());
    until_queued(&server, name, 2).await;
    let mut parked = Vec::new();
    for n in 3..=5 {
        let lock = a.get_fair_lock(name).unwrap();
        parked.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await.unwrap();
        }));
        until_queued(&server, name, n).await;
    }
    // a's release passes its head over (b's waiter is first): a's line now
    // alternates with b's.
    held.unlock().await.unwrap();
    within(T, "b's waiter", b_took).await.unwrap();
    b_may_release.send(()).unwrap();
    within(T, "a's first waiter", a_took).await.unwrap();
    // a's next head listens, and subscribed the two heirs behind it with it.
    let channels = || async { server.channels().await.len() };
    assert!(
        eventually(T, || async { channels().await == 3 }).await,
        "the head and the two heirs behind it listen: {:?}",
        server.channels().await
    );
    // Those two leave: their subscriptions go with them.
    for waiter in parked.drain(1..) {
        waiter.abort();
    }
    assert!(
        eventually(T, || async { channels().await == 1 }).await,
        "only the head listens: {:?}",
        server.channels().await
    );
    until_queued(&server, name, 1).await;
    a_may_release.send(()).unwrap();
    within(T, "the head", parked.remove(0)).await.unwrap();
    b_waiter.await.unwrap();
    a_waiter.await.unwrap();
    assert_nothing_left(&server, &[&a, &b]).await;
}

/// Parked waiters that are dropped, that time out, and that are dropped
/// while their join may be in flight leave no entry; the others keep their
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_waiters_that_leave_take_their_entries_with_them() {
    const WAITERS: usize = 20;
    let name = "fair-leavers";
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let held = holder.get_fair_lock(name).unwrap().lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..WAITERS {
        tasks.push(join_in_turn(&server, &client, name, i, &order).await);
    }
    // Every other one is dropped while parked.
    let mut staying = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if i % 2 == 1 {
            task.abort();
        } else {
            staying.push(task);
        }
    }
    until_queued(&server, name, WAITERS / 2).await;
    // Timed waits that run out while parked.
    let timed: Vec<_> = (0..5)
        .map(|_| {
            let lock = client.get_fair_lock(name).unwrap();
            tokio::spawn(async move {
                lock.try_lock_wait(Duration::from_millis(300))
                    .await
                    .unwrap()
                    .is_some()
            })
        })
        .collect();
    for waiter in timed {
        assert!(!waiter.await.unwrap(), "a timed wait got a held lock");
    }
    // Dropped at every point of their short lives: before the join, while it
    // is in flight, just after.
    for i in 0..100u64 {
        let lock = client.get_fair_lock(name).unwrap();
        let waiter = tokio::spawn(async move { drop(lock.lock().await) });
        tokio::time::sleep(Duration::from_micros(50 * (i % 20))).await;
        waiter.abort();
    }
    until_queued(&server, name, WAITERS / 2).await;
    assert_eq!(timeouts_len(&server, name).await, WAITERS / 2);
    let left = queue(&server, name).await;
    assert_eq!(left.len(), WAITERS / 2, "{left:?}");
    held.unlock().await.unwrap();
    within(T, "the waiters that stayed", async {
        for task in staying {
            task.await.unwrap();
        }
    })
    .await;
    let served = order.lock().unwrap().clone();
    assert_eq!(served, (0..WAITERS).step_by(2).collect::<Vec<_>>());
    assert_nothing_left(&server, &[&holder, &client]).await;
}

/// Sixteen tasks of one client, each taking a fair lock again and again,
/// while the client's connections are cut (CLIENT KILL) and the server paused
/// (CLIENT PAUSE) under the releases that grant the lock to the next task:
/// never two inside at once (a grant of unknown outcome is settled before
/// anyone trusts it), and the line never sticks (every task finishes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_cut_or_paused_mid_flight_never_make_two_holders_or_a_stuck_line() {
    const TASKS: usize = 16;
    let name = "fair-grant-faults";
    let server = RedisServer::start();
    let client = server
        .client_with(|config| config.timeout = Duration::from_millis(300))
        .await;
    let exclusion = Arc::new(Exclusion::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rounds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let lock = client.get_fair_lock(name).unwrap();
            let (exclusion, stop, rounds) = (exclusion.clone(), stop.clone(), rounds.clone());
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // A cut may fail a call: that round is lost, not the test.
                    let Ok(guard) = lock.lock().await else {
                        continue;
                    };
                    let inside = exclusion.enter();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    drop(inside);
                    let _ = guard.unlock().await;
                    rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut admin = server.admin().await;
    for fault in 0..16 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        if fault % 2 == 0 {
            server.kill_lock_connections().await;
        } else {
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(200)
                .arg("WRITE")
                .query_async(&mut admin)
                .await
                .unwrap();
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    within(T, "every task's last round", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    exclusion.assert_never_overlapped("fair grants under cuts and pauses");
    assert!(
        rounds.load(std::sync::atomic::Ordering::Relaxed) > TASKS,
        "the tasks took the lock"
    );
    assert_nothing_left(&server, &[&client]).await;
}

/// The next waiter dropped at every moment around the release that grants
/// it the lock: before the release, while it is in flight, after its reply
/// (the grant not yet taken): nothing is left, neither a hold nor an entry
/// nor a subscription, and the lock is free at once after each round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_heir_dropped_around_its_grant_leaves_nothing() {
    let name = "fair-heir-dropped";
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    for round in 0..120u64 {
        let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
        let lock = client.get_fair_lock(name).unwrap();
        let heir = tokio::spawn(async move { drop(lock.lock().await) });
        until_queued(&server, name, 1).await;
        let releasing = tokio::spawn(held.unlock());
        tokio::time::sleep(Duration::from_micros(40 * (round % 25))).await;
        heir.abort();
        releasing.await.unwrap().unwrap();
        // Whatever the heir got is given back: the lock is free to another
        // client within the time a give-back takes.
        comes_free_to(&other, name, "the lock after a dropped heir").await;
    }
    assert_nothing_left(&server, &[&client, &other]).await;
}

/// A parked waiter is its line's heir too while no head is offered (the head
/// before it just took the lock): a release then grants it before its task
/// runs. Dropped around that grant, it leaves nothing: whatever it was
/// granted is given back, and another client takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_heir_dropped_around_its_grant_leaves_nothing() {
    let name = "fair-parked-heir-dropped";
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    for round in 0..120u64 {
        let held = client.get_fair_lock(name).unwrap().lock().await.unwrap();
        // The head: takes the lock from the holder's grant and releases it at
        // once, naming the parked waiter behind it.
        let head = client.get_fair_lock(name).unwrap();
        let head = tokio::spawn(async move {
            let guard = head.lock().await.unwrap();
            guard.unlock().await.unwrap();
        });
        until_queued(&server, name, 1).await;
        let lock = client.get_fair_lock(name).unwrap();
        let parked = tokio::spawn(async move { drop(lock.lock().await) });
        until_queued(&server, name, 2).await;
        held.unlock().await.unwrap();
        tokio::time::sleep(Duration::from_micros(40 * (round % 25))).await;
        parked.abort();
        within(T, "the head", head).await.unwrap();
        comes_free_to(&other, name, "the lock after a dropped parked heir").await;
    }
    assert_nothing_left(&server, &[&client, &other]).await;
}
