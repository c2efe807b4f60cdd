//! Liveness, checked like safety: a waiter that can take a free lock takes it
//! promptly, however the lock was freed. Each test makes one order on purpose
//! that once left a waiter asleep on a free lock for a whole lease (30 s by
//! default), and bounds the wait well below it.
//!
//! Two bounds, as DESIGN states them: a release that published reaches a
//! waiter that listened when it was sent, within moments; a freeing that no
//! message announces (a `DEL`, a lost push) is found at the waiter's next
//! re-check, at most `Config::recheck_interval` later. The tests of the first
//! kind set that interval far above their bound, so that only the message can
//! be what woke the waiter in time.

use std::time::{Duration, Instant};

use redisson_locks::{Client, RLock};

use crate::support::fair::queue_len;
use crate::support::{eventually, holds_until_told, within, RedisServer, LATE};

const T: Duration = Duration::from_secs(60);

/// A re-check interval no test of a message's wake-up can be rescued by.
const NO_RECHECK: Duration = Duration::from_secs(40);

/// A client of `server` whose waiters re-check a sleeping wait only every
/// `recheck`.
async fn client_rechecking(server: &RedisServer, recheck: Duration) -> Client {
    server
        .client_with(|config| config.recheck_interval = recheck)
        .await
}

/// Waits until `name`'s fair queue in Redis has `count` entries.
async fn until_queued(server: &RedisServer, name: &str, count: usize) {
    assert!(
        eventually(T, || async { queue_len(server, name).await == count }).await,
        "{} queued for {name}, expected {count}",
        queue_len(server, name).await
    );
}

/// A task that takes `lock`, releases it, and answers when it took it.
fn takes(lock: RLock) -> tokio::task::JoinHandle<Instant> {
    tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        let took = Instant::now();
        guard.unlock().await.unwrap();
        took
    })
}

/// [`takes`] the fair lock `name` of `client`.
fn takes_fair(client: &Client, name: &str) -> tokio::task::JoinHandle<Instant> {
    takes(client.get_fair_lock(name).unwrap())
}

/// The review's smallest form: a fair head that subscribed before it joined
/// (it came alone to a line its client found busy in the last second), then
/// waited behind its own client's hold, was taken for listening though it
/// had dropped that subscription: the release that passed it over (another
/// client's waiter was first in line) did not wake it, and that waiter's
/// release published to a channel it no longer listened on. It slept out
/// the lease (29.4 s, three runs of three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_head_passed_over_by_its_clients_release_hears_the_next_release() {
    let name = "live-passed-over";
    let server = RedisServer::start();
    let a = client_rechecking(&server, NO_RECHECK).await;
    let b = client_rechecking(&server, NO_RECHECK).await;

    // B holds; A's H1 waits, and takes the lock from B's release.
    let held_by_b = b.get_fair_lock(name).unwrap().lock().await.unwrap();
    let (h1, h1_has, h1_release) = holds_until_told(a.get_fair_lock(name).unwrap());
    until_queued(&server, name, 1).await;
    held_by_b.unlock().await.unwrap();
    within(T, "H1 taking the lock", h1_has).await.unwrap();

    // B's W_B queues behind H1's hold; A's N comes alone to A's line, less
    // than a second after A's last busy join.
    let (w_b, w_b_has, w_b_release) = holds_until_told(b.get_fair_lock(name).unwrap());
    until_queued(&server, name, 1).await;
    let n = takes_fair(&a, name);
    until_queued(&server, name, 2).await;

    // H1's release names N, but W_B is first in Redis's line: W_B is woken.
    h1_release.send(()).unwrap();
    h1.await.unwrap();
    within(T, "W_B taking the lock", w_b_has).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    w_b_release.send(()).unwrap();
    w_b.await.unwrap();
    let freed = Instant::now();

    let took = within(T, "N taking the lock", n).await.unwrap();
    let waited = took.saturating_duration_since(freed);
    assert!(
        waited < LATE,
        "N took the free lock {waited:?} after W_B's release: it slept on a channel it did not listen on"
    );
}

/// The review's second form: a fair head waiting behind its own client's
/// hold was deaf to anything but that client's release. Another client's
/// `force_unlock()` publishes to the first in line's channel; the head must
/// hear it (29.4 s before, two runs of two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_head_behind_its_clients_hold_hears_another_clients_force_unlock() {
    let name = "live-forced";
    let server = RedisServer::start();
    let a = client_rechecking(&server, NO_RECHECK).await;
    let b = client_rechecking(&server, NO_RECHECK).await;
    let (h1, _h1_release, n) = head_behind_own_hold(&server, &a, name).await;

    let forced = Instant::now();
    assert!(b.get_fair_lock(name).unwrap().force_unlock().await.unwrap());
    let took = within(T, "N taking the lock", n).await.unwrap();
    let waited = took.saturating_duration_since(forced);
    assert!(
        waited < LATE,
        "N took the forced-open lock {waited:?} after the force: it did not listen"
    );
    h1.abort();
}

/// As above, freed the way a failover that lost the key looks: the key
/// deleted and every connection cut. The reconnect must wake the head,
/// which then finds the lock free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_head_behind_its_clients_hold_wakes_when_a_failover_loses_the_key() {
    let name = "live-lost-key";
    let server = RedisServer::start();
    let a = client_rechecking(&server, NO_RECHECK).await;
    let (h1, _h1_release, n) = head_behind_own_hold(&server, &a, name).await;

    let mut admin = server.admin().await;
    let lost = Instant::now();
    let _: i64 = redis::cmd("DEL")
        .arg(name)
        .query_async(&mut admin)
        .await
        .unwrap();
    server.kill_lock_connections().await;
    let took = within(T, "N taking the lock", n).await.unwrap();
    let waited = took.saturating_duration_since(lost);
    assert!(
        waited < LATE,
        "N took the lost lock {waited:?} after the reconnect"
    );
    h1.abort();
}

/// An operator's `DEL` of a held lock publishes nothing: no message can wake
/// anyone, and the waiter finds the lock free at its next re-check, never a
/// lease later: behind another client's hold, and behind its own client's
/// (the next in the local line sleeps on that hold's release, which never
/// comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lock_is_found_free_at_the_next_recheck() {
    for (fair, own) in [(false, false), (true, false), (false, true), (true, true)] {
        let name = format!("live-del-{fair}-{own}");
        let server = RedisServer::start();
        let recheck = Duration::from_millis(500);
        let waiter = client_rechecking(&server, recheck).await;
        let other = server.client().await;
        let lock = |client: &Client| match fair {
            true => client.get_fair_lock(&name).unwrap(),
            false => client.get_lock(&name).unwrap(),
        };
        let held_by_other = lock(&other).lock().await.unwrap();
        // Behind its own client: the holder waits in the line first, the
        // waiter is parked behind it, and the holder takes the lock.
        let own_holder = own.then(|| holds_until_told(lock(&waiter)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let waiting = takes(lock(&waiter));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let own_holder = match own_holder {
            Some((task, has, release)) => {
                held_by_other.unlock().await.unwrap();
                within(T, "the waiter's client's holder", has)
                    .await
                    .unwrap();
                Some((task, release))
            }
            None => {
                std::mem::forget(held_by_other);
                None
            }
        };
        // Asleep on the 30 s lease it read, or on its client's release.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut admin = server.admin().await;
        let deleted = Instant::now();
        let _: i64 = redis::cmd("DEL")
            .arg(&name)
            .query_async(&mut admin)
            .await
            .unwrap();
        let took = within(T, "the waiter taking the deleted lock", waiting)
            .await
            .unwrap();
        let waited = took.saturating_duration_since(deleted);
        assert!(
            waited < recheck + LATE,
            "fair: {fair}, behind its own client: {own}: took the deleted lock {waited:?} \
             after the DEL (re-check {recheck:?})"
        );
        if let Some((task, _release)) = own_holder {
            task.abort();
        }
    }
}

/// The next in a client's local line sleeps on the release of the hold the
/// one before took (`held_here`): another client's `force_unlock()`
/// publishes, and it must hear that too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_in_line_behind_its_clients_hold_hears_a_force_unlock() {
    let name = "live-held-here-forced";
    let server = RedisServer::start();
    let a = client_rechecking(&server, NO_RECHECK).await;
    let b = client_rechecking(&server, NO_RECHECK).await;
    let held_by_b = b.get_lock(name).unwrap().lock().await.unwrap();
    let (h1, h1_has, _h1_release) = holds_until_told(a.get_lock(name).unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let n = takes(a.get_lock(name).unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    held_by_b.unlock().await.unwrap();
    within(T, "H1 taking the lock", h1_has).await.unwrap();
    // N is the head of a's line now, asleep on H1's release.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let forced = Instant::now();
    assert!(b.get_lock(name).unwrap().force_unlock().await.unwrap());
    let took = within(T, "N taking the lock", n).await.unwrap();
    let waited = took.saturating_duration_since(forced);
    assert!(
        waited < LATE,
        "N took the forced-open lock {waited:?} after the force"
    );
    h1.abort();
}

/// A client's newcomers hold back for a moment behind a waiter its release
/// woke (`handoff_window`); if that waiter never comes (its task was dropped
/// as it was woken), the newcomer takes the lock all the same, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_held_back_behind_a_waiter_that_never_comes_takes_the_lock() {
    let name = "live-hand-off";
    let server = RedisServer::start();
    let a = client_rechecking(&server, NO_RECHECK).await;
    let b = client_rechecking(&server, NO_RECHECK).await;
    for _ in 0..3 {
        let held = a.get_lock(name).unwrap().lock().await.unwrap();
        let woken = {
            let lock = b.get_lock(name).unwrap();
            tokio::spawn(async move { lock.lock().await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.unlock().await.unwrap();
        woken.abort();
        let released = Instant::now();
        let guard = within(T, "the newcomer", a.get_lock(name).unwrap().lock())
            .await
            .unwrap();
        let waited = released.elapsed();
        assert!(waited < LATE, "the newcomer waited {waited:?}");
        guard.unlock().await.unwrap();
    }
}

/// A waiter that sleeps at once after its first busy attempt (`sleep_first`:
/// its lock's channel stood confirmed before that attempt went out) while its
/// connection is cut, and the lock released meanwhile (the message goes to
/// nobody here): the reconnect wakes it, and it takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_slept_first_wakes_when_its_connection_is_cut() {
    let name = "live-sleep-first";
    let server = RedisServer::start();
    let holder = client_rechecking(&server, NO_RECHECK).await;
    let client = client_rechecking(&server, NO_RECHECK).await;
    let held = holder.get_lock(name).unwrap().lock().await.unwrap();
    // Listening already: another waiter of the same client (an explicit
    // owner, outside the local line).
    let first = {
        let lock = client.get_lock(name).unwrap().with_owner_id(1);
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            guard.unlock().await.unwrap();
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = takes(client.get_lock(name).unwrap().with_owner_id(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The waiters' connection is cut (the holder's is not, it has no
    // subscription) and, before it is back, the lock is released: its
    // message reaches nobody of the waiters' client.
    assert_eq!(server.kill_subscribers().await, 1);
    let released = Instant::now();
    held.unlock().await.unwrap();
    within(T, "the first waiter", first).await.unwrap();
    let took = within(T, "the second waiter", second).await.unwrap();
    let waited = took.saturating_duration_since(released);
    assert!(
        waited < LATE,
        "the waiter that slept first took the lock {waited:?} after the release"
    );
}

/// In client `a`: H0 holds `name`, H1 waits and takes it from H0's release
/// (a grant: the same client); then N comes and waits as head of `a`'s line
/// behind H1's hold. Returns H1's task (holding until told, or aborted), the
/// sender that tells it, and N's task.
async fn head_behind_own_hold(
    server: &RedisServer,
    a: &Client,
    name: &str,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Instant>,
) {
    let h0 = a.get_fair_lock(name).unwrap().lock().await.unwrap();
    let (h1, h1_has, h1_release) = holds_until_told(a.get_fair_lock(name).unwrap());
    until_queued(server, name, 1).await;
    h0.unlock().await.unwrap();
    within(T, "H1 taking the lock", h1_has).await.unwrap();
    let n = takes_fair(a, name);
    until_queued(server, name, 1).await;
    // N is the head of a's line now, behind H1's hold, asleep.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (h1, h1_release, n)
}

/// Polls `future` once, as the runtime would after a wake-up; `true` when it
/// is still pending.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> bool {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx).is_pending())
    })
    .await
}

/// A release's message wakes one waiter of a client (`notify_one`). A waiter
/// that takes that wake-up and leaves before it acts on it (dropped in the
/// jitter a waiter woken by another client's release waits out, or out of
/// time as it was woken) must pass it on: before, its client's other waiter
/// slept on the free lock until its re-check (here 40 s; by default a lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_taken_and_not_acted_on_is_passed_on() {
    let name = "live-passed-on";
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = client_rechecking(&server, NO_RECHECK).await;
    for round in 0..3_u64 {
        let held = holder.get_lock(name).unwrap().lock().await.unwrap();
        // Two waiters of one client, both waiting in Redis (explicit owners
        // wait outside the local line). A sleeps first, so the message's one
        // wake-up goes to A.
        let a_lock = client
            .get_lock(name)
            .unwrap()
            .with_owner_id(100 + 2 * round);
        let mut a = Box::pin(a_lock.lock());
        for _ in 0..20 {
            assert!(poll_once(&mut a).await, "A took a held lock");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let b = takes(
            client
                .get_lock(name)
                .unwrap()
                .with_owner_id(101 + 2 * round),
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.unlock().await.unwrap();
        let released = Instant::now();
        // The message reaches A (not polled), then A runs once: it takes the
        // wake-up and starts its jitter (or its attempt), and is dropped.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = poll_once(&mut a).await;
        drop(a);
        let took = within(T, "B taking the lock", b).await.unwrap();
        let waited = took.saturating_duration_since(released);
        assert!(
            waited < LATE,
            "round {round}: B took the lock {waited:?} after the release: A's wake-up was lost with A"
        );
    }
}

/// The members of `name`'s order of waiting clients (`waiter_order`), first
/// first.
async fn order_of(server: &RedisServer, name: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(format!("{{{name}}}:rl-waiters"))
        .arg(0)
        .arg(-1)
        .query_async(&mut server.admin().await)
        .await
        .unwrap()
}

/// Puts clients that vanished (their processes killed while they waited:
/// their entries stay) first in `name`'s order of waiting clients.
async fn vanished_first(server: &RedisServer, name: &str, count: usize) {
    for i in 0..count {
        let _: () = redis::cmd("ZADD")
            .arg(format!("{{{name}}}:rl-waiters"))
            .arg(i + 1)
            .arg(format!("vanished-{i}"))
            .query_async(&mut server.admin().await)
            .await
            .unwrap();
    }
}

/// Releases `held`, and checks that the waiter `took` took the lock soon
/// after.
async fn released_to(held: redisson_locks::LockGuard, took: tokio::task::JoinHandle<Instant>) {
    let released = Instant::now();
    held.unlock().await.unwrap();
    took_soon_after(took, released, "the release").await;
}

/// Checks that the waiter `took` took the lock within [`LATE`] of `since`
/// (the instant of `what`).
async fn took_soon_after(took: tokio::task::JoinHandle<Instant>, since: Instant, what: &str) {
    let took = within(T, "the waiter", took).await.unwrap();
    let waited = took.saturating_duration_since(since);
    assert!(
        waited < LATE,
        "the waiter took the lock {waited:?} after {what}"
    );
}

/// A holder of `name` and, in another client, a waiter behind `vanished`
/// clients that vanished from its order, its place told by its attempt after
/// its subscription: (holder, waiter's client, the hold, the waiter's task).
async fn behind_vanished(
    server: &RedisServer,
    name: &str,
    vanished: usize,
    lock_of: fn(&Client, &str) -> redisson_locks::RLock,
) -> (
    Client,
    Client,
    redisson_locks::LockGuard,
    tokio::task::JoinHandle<Instant>,
) {
    let holder = client_rechecking(server, NO_RECHECK).await;
    let waiter = client_rechecking(server, NO_RECHECK).await;
    let held = lock_of(&holder, name).lock().await.unwrap();
    vanished_first(server, name, vanished).await;
    let took = takes(lock_of(&waiter, name));
    assert!(
        eventually(T, || async {
            order_of(server, name).await.len() == vanished + 1
        })
        .await,
        "the waiter joined the order"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    (holder, waiter, held, took)
}

/// `waiter_order`: a client that joined a reentrant lock's order and vanished
/// is named by the next release for its turn, and never comes. The waiter
/// behind it slept through that release's message (one client was ahead of
/// its own); first now, it tries when that turn is over, and takes the lock.
/// (Without its try, it slept out the holder's lease: the lock was free and
/// no message would come.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_client_that_vanished_from_the_order_takes_the_lock() {
    let name = "live-order-vanished";
    let server = RedisServer::start();
    let (_holder, _waiter, held, took) = behind_vanished(&server, name, 1, reentrant).await;
    released_to(held, took).await;
    // The waiter left the order as it took the lock; the vanished client's
    // entry stays until a release names it (the waiter's own may have) or
    // the order expires.
    let left = order_of(&server, name).await;
    assert!(left.iter().all(|m| m == "vanished-0"), "{left:?}");
}

/// The same for a write lock, whose release publishes `"1"` and then `"0"`:
/// the waiter counts releases (its `"0"`s), not messages, behind two
/// vanished clients, and takes the lock on the third release's turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiter_behind_clients_that_vanished_from_the_order_takes_the_lock() {
    let name = "live-order-vanished-write";
    let server = RedisServer::start();
    let (_holder, _waiter, held, took) = behind_vanished(&server, name, 2, writer).await;
    released_to(held, took).await;
}

fn reentrant(client: &Client, name: &str) -> redisson_locks::RLock {
    client.get_lock(name).unwrap()
}

fn writer(client: &Client, name: &str) -> redisson_locks::RLock {
    client.get_read_write_lock(name).unwrap().write_lock()
}

/// `waiter_order`: a waiter counting the releases before its client's turn
/// (three clients ahead, all vanished) has its connection cut after the
/// first: the messages of releases meanwhile are lost, so its count means
/// nothing, and it tries once its subscription is back. (Counting the
/// reconnect's wake-up as one more release, it slept on a free lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_counting_the_releases_ahead_tries_after_a_cut() {
    let name = "live-order-cut";
    let server = RedisServer::start();
    let (_holder, _waiter, held, took) = behind_vanished(&server, name, 3, reentrant).await;
    // The release names the first vanished client; the waiter counts it.
    held.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        server.kill_subscribers().await,
        1,
        "the waiter's connection"
    );
    took_soon_after(took, Instant::now(), "the cut").await;
}

/// `waiter_order`: two clients ahead of a waiter in a reentrant lock's order
/// give up (their time runs out) while it sleeps counting the releases
/// before its turn. Their leaving is counted like a release (it publishes):
/// first now, the waiter tries on the holder's release and takes the lock.
/// (Taken out of the order with no message, they left its count two too
/// high: it slept through that release on a free lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_clients_that_gave_up_takes_the_lock() {
    let name = "live-order-gave-up";
    let server = RedisServer::start();
    let holder = client_rechecking(&server, NO_RECHECK).await;
    let held = holder.get_lock(name).unwrap().lock().await.unwrap();
    let mut quitters = Vec::new();
    for (i, wait_ms) in [(1, 1_500), (2, 1_800)] {
        let client = client_rechecking(&server, NO_RECHECK).await;
        let lock = client.get_lock(name).unwrap();
        quitters.push(tokio::spawn(async move {
            let wait = Duration::from_millis(wait_ms);
            let got = lock.try_lock_wait(wait).await.unwrap();
            drop(client);
            got.is_none()
        }));
        assert!(
            eventually(T, || async { order_of(&server, name).await.len() == i }).await,
            "client {i} joined the order"
        );
    }
    let waiter = client_rechecking(&server, NO_RECHECK).await;
    let took = takes(waiter.get_lock(name).unwrap());
    assert!(
        eventually(T, || async { order_of(&server, name).await.len() == 3 }).await,
        "the waiter joined the order behind both"
    );
    for quitter in quitters {
        assert!(within(T, "a client giving up", quitter).await.unwrap());
    }
    assert_eq!(
        order_of(&server, name).await.len(),
        1,
        "both left the order"
    );
    released_to(held, took).await;
}
