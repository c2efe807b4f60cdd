//! A holder's belief: bounded by its own clock, and background work that survives
//! the runtime that started it. Each test reproduces a way a holder could believe
//! it holds a lock it does not, or leave a hold behind, and shows it no longer can.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, Config};
use tokio::time::Instant;

use crate::support::fair::{queue, queue_len};
use crate::support::proxy::{Mode, Proxy};
use crate::support::{eventually, within, RedisServer, LATE, PROMPT};

/// The default drift margin: 1 % of the lease plus 2 ms.
fn margin(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// A partitioned holder is told it lost the lock no later than its lease (minus
/// the drift margin) after the cut, while still cut off, and before anyone else
/// can get in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_holder_learns_of_its_loss_from_its_own_clock() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let lease = Duration::from_secs(2);
    let mut config = Config::from_url(&proxy.url()).unwrap();
    config.lock_watchdog_timeout = lease;
    config.timeout = Duration::from_secs(1);
    config.connect_timeout = Duration::from_secs(2);
    let holder = Client::connect(config).await.unwrap();
    let contender = server.client().await;
    let guard = Arc::new(holder.get_lock("cut-off").unwrap().lock().await.unwrap());
    // Renewed for a while first: validity is carried forward by confirmed renewals.
    tokio::time::sleep(lease).await;
    assert!(!guard.is_lease_lost());
    let before = guard.valid_for().expect("valid while connected");
    assert!(before <= lease, "{before:?}");

    let cut = Instant::now();
    proxy.set_mode(Mode::Blackhole);
    let lost_at = tokio::spawn({
        let guard = guard.clone();
        async move {
            guard.lease_lost().await;
            Instant::now()
        }
    });
    let theirs = within(
        Duration::from_secs(10),
        "contender during the partition",
        contender.get_lock("cut-off").unwrap().lock(),
    )
    .await
    .unwrap();
    let theirs_at = Instant::now();
    // The holder knew before the contender got in.
    assert!(
        guard.is_lease_lost(),
        "the contender holds the lock and the partitioned holder does not know"
    );
    assert_eq!(guard.valid_for(), None);

    let check = cut + lease + margin(lease) + Duration::from_millis(100);
    tokio::time::sleep_until(check).await;
    assert!(guard.is_lease_lost());
    // lease_lost() resolves on the holder's own clock: while still cut off (the
    // partition heals only below; a loaded machine may run the task late), and
    // before the contender got in.
    let lost_at = within(LATE, "lease_lost() while cut off", lost_at)
        .await
        .unwrap();
    assert!(
        lost_at <= theirs_at,
        "the contender got in before the loss was reported"
    );

    // Healing brings nothing back: lost stays lost.
    proxy.set_mode(Mode::Pass);
    tokio::time::sleep(lease / 2).await;
    assert!(guard.is_lease_lost());
    let guard = Arc::try_unwrap(guard).expect("one guard");
    let err = within(Duration::from_secs(10), "late unlock", guard.unlock())
        .await
        .unwrap_err();
    assert!(err.is_not_held(), "{err:?}");
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// An explicit lease counts down on the holder's clock from the acquire's send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_is_valid_until_its_end_less_the_margin() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lease = Duration::from_millis(800);
    let sent = Instant::now();
    let guard = client
        .get_lock("counted")
        .unwrap()
        .lock_with_lease(lease)
        .await
        .unwrap();
    let left = guard.valid_for().unwrap();
    assert!(left <= lease - margin(lease), "{left:?}");
    within(lease + LATE, "lease end", guard.lease_lost()).await;
    assert!(sent.elapsed() >= lease - margin(lease));
    assert!(guard.is_lease_lost());
    assert_eq!(guard.valid_for(), None);
}

/// Builds a client in a runtime of its own, which is then dropped.
fn client_from_a_dropped_runtime(config: Config, multi_thread: bool) -> Client {
    std::thread::spawn(move || {
        let runtime = runtime(multi_thread);
        let client = runtime.block_on(Client::connect(config)).unwrap();
        drop(runtime);
        client
    })
    .join()
    .unwrap()
}

/// Runtime A connects and is dropped; runtime B uses the client with the
/// watchdog for three leases while another client contends: every call works,
/// the hold is renewed, nobody else gets in. A multi-thread A was the
/// connection's home; a current-thread one never is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_outlives_the_runtime_that_connected_it() {
    for multi_thread in [true, false] {
        outlive_the_connecting_runtime(multi_thread).await;
    }
}

async fn outlive_the_connecting_runtime(multi_thread: bool) {
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let mut config = server.config();
    config.lock_watchdog_timeout = lease;
    let client = client_from_a_dropped_runtime(config, multi_thread);
    let contender = server.client().await;
    let theirs = contender.get_lock("survivor").unwrap();

    let lock = client.get_lock("survivor").unwrap();
    let guard = lock.lock().await.expect("first call after runtime A ended");
    let end = Instant::now() + lease * 3;
    while Instant::now() < end {
        assert!(
            theirs
                .try_lock_wait(Duration::from_millis(100))
                .await
                .unwrap()
                .is_none(),
            "the contender got in while the hold was renewed"
        );
        assert!(!guard.is_lease_lost());
    }
    assert!(lock.is_held_by(guard.owner_id()).await.unwrap());
    // Waiting works too: the subscriber lives on the client's own thread.
    let waiter = tokio::spawn({
        let lock = client.get_lock("survivor").unwrap();
        async move { lock.lock().await.map(|g| g.owner_id()) }
    });
    assert!(
        eventually(Duration::from_secs(10), || async {
            server
                .subscribers("redisson_lock__channel:{survivor}")
                .await
                == 1
        })
        .await,
        "the waiter did not subscribe"
    );
    guard.unlock().await.unwrap();
    within(Duration::from_secs(10), "waiter", waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            server.keys().await.is_empty()
        })
        .await
    );
}

/// A client connected in a current_thread runtime that is still alive but never
/// driven again works fully from another runtime (such a runtime is never the
/// connection's home).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connect_runtime_does_not_matter() {
    let server = RedisServer::start();
    let config = server.config();
    let (client, idle_runtime) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(Client::connect(config)).unwrap();
        (client, runtime)
    })
    .join()
    .unwrap();
    let lock = client.get_lock("idle").unwrap();
    let guard = within(Duration::from_secs(10), "lock", lock.lock())
        .await
        .unwrap();
    within(Duration::from_secs(10), "unlock", guard.unlock())
        .await
        .unwrap();
    // Kept alive (never driven) until here; dropped off the async context.
    std::thread::spawn(move || drop(idle_runtime))
        .join()
        .unwrap();
}

/// A multi-thread home whose every worker is blocked: once its beat is a second
/// old, the client moves its connection to its own thread and carries on, with
/// renewals, from another runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_home_runtime_is_left_behind() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let mut config = server.config();
    config.lock_watchdog_timeout = lease;
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = std::thread::scope(|scope| {
        scope
            .spawn(|| home.block_on(Client::connect(config)).unwrap())
            .join()
            .unwrap()
    });
    // Block the home's only worker for longer than the test needs it.
    home.spawn(async { std::thread::sleep(Duration::from_secs(6)) });
    tokio::time::sleep(Duration::from_millis(1300)).await;

    let lock = client.get_lock("stalled-home").unwrap();
    let guard = within(Duration::from_secs(10), "lock", lock.lock())
        .await
        .unwrap();
    tokio::time::sleep(lease * 2).await;
    assert!(
        !guard.is_lease_lost(),
        "renewals stopped with the stalled home"
    );
    within(Duration::from_secs(10), "unlock", guard.unlock())
        .await
        .unwrap();
    std::thread::spawn(move || drop(home)).join().unwrap();
}

/// Whether `name` is gone from the server soon: well before the 30 s lease (the
/// default watchdog's) with which a hold whose release was never sent would end.
async fn gone_soon(server: &RedisServer, name: &str) -> bool {
    let mut admin = server.admin().await;
    eventually(Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move { !admin.exists::<_, bool>(name).await.unwrap() }
    })
    .await
        && !admin.exists::<_, bool>(name).await.unwrap()
}

fn runtime(multi_thread: bool) -> tokio::runtime::Runtime {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.worker_threads(2).enable_all().build().unwrap()
}

/// `#[tokio::main]` with a guard in scope, or `block_on` returning with one: the
/// guard is dropped as (or after) its runtime ends, and the hold is released
/// soon (not at the end of its lease), every time, on both runtime flavors.
#[test]
fn a_guard_in_scope_when_block_on_returns_is_released() {
    let server = RedisServer::start();
    let observer = runtime(false);
    let client = observer.block_on(server.client());
    for multi_thread in [false, true] {
        for run in 0..20 {
            let name = format!("scoped-{multi_thread}-{run}");
            // Dropped inside the future, as its block_on ends.
            let rt = runtime(multi_thread);
            rt.block_on(async {
                let _guard = client.get_lock(name.clone()).unwrap().lock().await.unwrap();
            });
            drop(rt);
            assert!(
                observer.block_on(gone_soon(&server, &name)),
                "{name}: held after block_on returned"
            );
            // Carried out of block_on, dropped after its runtime is gone.
            let rt = runtime(multi_thread);
            let guard = rt.block_on(async { client.get_lock(name.clone()).unwrap().lock().await });
            drop(rt);
            drop(guard);
            assert!(
                observer.block_on(gone_soon(&server, &name)),
                "{name}: held after its runtime was dropped"
            );
        }
    }
}

/// The connection breaks and the `redis` crate's re-dial, which it runs on
/// the connection's home with its backoff's timers there, is still trying
/// when the home shuts down with a guard dropped in it: the queued release,
/// which the client's own thread was awaiting on that same re-dial, reaches
/// the server once it answers again. (It used to die with the home's timers:
/// tokio panicked in the release's task, and the hold stayed for its lease.)
#[test]
fn a_release_queued_as_the_home_ends_mid_redial_still_goes_out() {
    // The lock must outlive the restart: written through to an append-only file.
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let observer = runtime(false);
    let mut config = server.config();
    config.retry_attempts = 10;
    let home = runtime(true);
    let (client, guard) = home.block_on(async {
        let client = Client::connect(config).await.unwrap();
        let lease = Duration::from_secs(60);
        let guard = client
            .get_lock("redial")
            .unwrap()
            .lock_with_lease(lease)
            .await;
        (client, guard.unwrap())
    });
    server.kill();
    home.block_on(async {
        // A command on the home finds the break; the re-dial starts there and
        // keeps failing (refused, backoff, again) while the server is down.
        let refused = client.get_lock("redial").unwrap().is_locked().await;
        assert!(refused.is_err(), "{refused:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(guard);
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
    drop(home);
    server.restart();
    assert!(
        observer.block_on(gone_soon(&server, "redial")),
        "held after its release was queued"
    );
    drop(client);
}

/// A runtime shut down with tasks holding guards and tasks queued on a fair lock:
/// every hold and every queue place goes, and the next live fair waiter gets the
/// lock soon, not after a fair wait.
#[test]
fn runtime_shutdown_releases_holds_and_queue_places() {
    let server = RedisServer::start();
    let observer = runtime(true);
    let fair_wait = Duration::from_secs(20);
    let (client, live) = observer.block_on(async {
        let client = server
            .client_with(|c| c.fair_lock_wait_timeout = fair_wait)
            .await;
        let live = server
            .client_with(|c| c.fair_lock_wait_timeout = fair_wait)
            .await;
        (client, live)
    });
    for multi_thread in [false, true] {
        let rt = runtime(multi_thread);
        let held = rt.block_on(async {
            let mut held = Vec::new();
            for name in ["plain-a", "plain-b"] {
                let guard = client.get_lock(name).unwrap().lock().await.unwrap();
                held.push(tokio::spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                }));
            }
            let fair = client.get_fair_lock("shut-fair").unwrap();
            let guard = fair.lock().await.unwrap();
            held.push(tokio::spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }));
            for _ in 0..3 {
                let fair = fair.clone();
                held.push(tokio::spawn(async move {
                    let _guard = fair.lock().await;
                    std::future::pending::<()>().await;
                }));
            }
            // Driven here (a current_thread runtime runs its tasks only inside
            // block_on) until all three are in line.
            assert!(
                eventually(Duration::from_secs(10), || async {
                    queue_len(&server, "shut-fair").await == 3
                })
                .await
            );
            held
        });
        // A live waiter queues behind them, on another client.
        let waiter = observer.spawn({
            let fair = live.get_fair_lock("shut-fair").unwrap();
            async move {
                let guard = fair.lock().await.unwrap();
                let at = Instant::now();
                guard.unlock().await.unwrap();
                at
            }
        });
        observer.block_on(async {
            assert!(
                eventually(Duration::from_secs(10), || async {
                    queue_len(&server, "shut-fair").await == 4
                })
                .await
            );
        });
        let shut = Instant::now();
        drop(held);
        drop(rt);
        observer.block_on(async {
            let granted = within(fair_wait / 2, "live fair waiter", waiter)
                .await
                .unwrap();
            // Queue places left behind would each keep the line for up to the
            // fair wait (refreshed every half of it, so never less than 10 s).
            assert!(
                granted.duration_since(shut) < fair_wait / 4,
                "the live waiter waited {:?}",
                granted.duration_since(shut)
            );
            for name in ["plain-a", "plain-b"] {
                assert!(gone_soon(&server, name).await, "{name} still held");
            }
            assert!(
                eventually(Duration::from_secs(10), || async {
                    server.keys().await.is_empty()
                })
                .await,
                "left behind: {:?} (queue {:?})",
                server.keys().await,
                queue(&server, "shut-fair").await
            );
        });
    }
}

/// A guard moved to a plain thread (no runtime there) and dropped is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_on_a_plain_thread_is_released() {
    let server = RedisServer::start();
    let client = server.client().await;
    let guard = client.get_lock("threaded").unwrap().lock().await.unwrap();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    assert!(gone_soon(&server, "threaded").await);
}

/// A guard dropped inside a user's `Drop` (no await possible there) is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_inside_a_user_drop_is_released() {
    struct Session {
        _guard: redisson_locks::LockGuard,
    }
    impl Drop for Session {
        fn drop(&mut self) {
            // The user's own cleanup would go here.
        }
    }
    let server = RedisServer::start();
    let client = server.client().await;
    let session = Session {
        _guard: client.get_lock("in-drop").unwrap().lock().await.unwrap(),
    };
    drop(session);
    assert!(gone_soon(&server, "in-drop").await);
}

/// Holds of every sort for `client` to leave behind: a guard about to be
/// dropped (its release queued), a detached hold and a detached fair hold (which
/// nobody can unlock once the client is gone).
async fn leave_holds(client: &Client, prefix: &str) -> redisson_locks::LockGuard {
    let guard = client
        .get_lock(format!("{prefix}queued-release"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    client
        .get_lock(format!("{prefix}detached"))
        .unwrap()
        .lock()
        .await
        .unwrap()
        .detach();
    let lock = client
        .get_fair_lock(format!("{prefix}detached-fair"))
        .unwrap();
    lock.lock().await.unwrap().detach();
    guard
}

/// `close()` on the last handle: a release just queued by a guard's drop has
/// been sent by the time it returns, and detached holds (which nobody can
/// unlock any more) are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_sends_every_outstanding_release() {
    let server = RedisServer::start();
    let client = server.client().await;
    drop(leave_holds(&client, "").await);
    let closed = Instant::now();
    client.close().await;
    // At most the reply timeout (2 s here) "plus a little", which a loaded
    // machine makes longer.
    assert!(
        closed.elapsed() < Duration::from_secs(2) + LATE,
        "the close took {:?}",
        closed.elapsed()
    );
    let keys = server.keys().await;
    assert!(keys.is_empty(), "left behind after close(): {keys:?}");
}

/// `close()` on a handle that is not the last: the client lives on with the
/// others, and the releases queued so far have gone out.
#[tokio::test]
async fn closing_one_handle_of_many_waits_for_queued_releases_only() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = client.clone();
    let guard = client.get_lock("queued").unwrap().lock().await.unwrap();
    drop(guard);
    client.close().await;
    assert!(
        server.keys().await.is_empty(),
        "the queued release was not sent"
    );
    let guard = other.get_lock("queued").unwrap().lock().await.unwrap();
    guard.unlock().await.unwrap();
}

/// The last handle dropped inside a task: the drop returns without waiting
/// (blocking a worker is what tokio forbids in places), and the releases still
/// go out from the client's own thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_client_sends_every_outstanding_release() {
    let server = RedisServer::start();
    let client = server.client().await;
    drop(leave_holds(&client, "").await);
    drop(client);
    assert!(
        eventually(PROMPT, || async { server.keys().await.is_empty() }).await,
        "left behind after the client's drop: {:?}",
        server.keys().await
    );
}

/// The client dropped on the only worker of the runtime its connection lives on:
/// the releases it queued must not need that worker, and the runtime's shutdown
/// waits until they are sent.
#[test]
fn dropping_the_client_on_its_home_runtimes_only_worker_still_releases() {
    let server = RedisServer::start();
    let config = server.config();
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    home.block_on(home.spawn(async move {
        let client = Client::connect(config).await.unwrap();
        let guard = client
            .get_lock("on-the-worker")
            .unwrap()
            .lock()
            .await
            .unwrap();
        client
            .get_lock("detached-on-the-worker")
            .unwrap()
            .lock()
            .await
            .unwrap()
            .detach();
        drop(guard);
        drop(client);
    }))
    .unwrap();
    std::thread::spawn(move || drop(home)).join().unwrap();
    let keys = runtime(false).block_on(server.keys());
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

/// A client dropped, and one closed, inside a `LocalSet` on a multi-thread
/// runtime, where tokio forbids `block_in_place`: neither panics, and once the
/// runtime has shut down nothing is left on the server.
#[test]
fn a_client_ends_inside_a_local_set_without_panicking() {
    let server = RedisServer::start();
    let config = server.config();
    let multi = runtime(true);
    let local = tokio::task::LocalSet::new();
    multi.block_on(local.run_until(async move {
        let dropped = Client::connect(config.clone()).await.unwrap();
        drop(leave_holds(&dropped, "dropped-").await);
        drop(dropped);
        let closed = Client::connect(config).await.unwrap();
        drop(leave_holds(&closed, "closed-").await);
        tokio::task::spawn_local(async move { closed.close().await })
            .await
            .unwrap();
    }));
    drop(local);
    std::thread::spawn(move || drop(multi)).join().unwrap();
    let keys = runtime(false).block_on(server.keys());
    assert!(keys.is_empty(), "left behind: {keys:?}");
}
