//! The blocking API (`redisson_locks::blocking`), from plain threads, against a
//! real `redis-server` that each test starts itself (see `support`).

mod support;

use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use redis::Commands;
use redisson_locks::blocking::{self, current_thread_id};
use support::RedisServer;

/// Bounds a blocking test step: a hang fails the test instead of stalling the
/// suite; a panic inside `step` is the test's panic.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    step: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, result) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        // Fails only after a timeout, when the test has already failed.
        let _ = done.send(step());
    });
    match result.recv_timeout(limit) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("{what} did not finish within {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("{what} ended without a result"),
        },
    }
}

/// Polls `check` until it holds or `limit` passes.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs one of the support module's async checks from this plain thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the checks")
        .block_on(future)
}

fn connect(server: &RedisServer) -> blocking::Client {
    blocking::Client::connect(server.config()).expect("connect")
}

fn assert_nothing_left(server: &RedisServer, clients: &[&blocking::Client]) {
    let clients: Vec<&redisson_locks::Client> = clients.iter().map(|c| c.as_async()).collect();
    block_on(support::assert_nothing_left(server, &clients));
}

/// A plain synchronous connection, for the data the locks protect.
fn data_connection(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .and_then(|client| client.get_connection())
        .expect("data connection")
}

#[test]
fn public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<blocking::Client>();
    send_sync::<blocking::RLock>();
    send_sync::<blocking::RFencedLock>();
    send_sync::<blocking::RReadWriteLock>();
    send_sync::<blocking::LockGuard>();
}

#[test]
fn sixteen_threads_over_two_clients_keep_a_counter_exact() {
    const THREADS: usize = 16;
    const ROUNDS: u64 = 20;
    let server = RedisServer::start();
    let clients = [connect(&server), connect(&server)];
    let workers: Vec<_> = (0..THREADS)
        .map(|i| {
            let lock = clients[i % 2].get_lock("counted").unwrap();
            let mut data = data_connection(&server);
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    // Half the threads carry the guard, half unlock Java style.
                    let guard = lock.lock().expect("lock");
                    let java_style = i % 4 >= 2;
                    let guard = if java_style {
                        guard.detach();
                        None
                    } else {
                        Some(guard)
                    };
                    // Not atomic: an overlap of two holders would lose a count.
                    let value: Option<u64> = data.get("counter").expect("GET");
                    data.set::<_, _, ()>("counter", value.unwrap_or(0) + 1)
                        .expect("SET");
                    match guard {
                        Some(guard) => guard.unlock().expect("unlock"),
                        None => lock.unlock().expect("unlock"),
                    }
                }
            })
        })
        .collect();
    within(
        Duration::from_secs(120),
        "the contending threads",
        move || {
            for worker in workers {
                worker.join().expect("a worker panicked");
            }
        },
    );
    let mut data = data_connection(&server);
    let counted: u64 = data.get("counter").expect("GET");
    assert_eq!(counted, THREADS as u64 * ROUNDS);
    data.del::<_, ()>("counter").expect("DEL");
    assert_nothing_left(&server, &[&clients[0], &clients[1]]);
}

#[test]
fn a_thread_re_enters_and_other_threads_are_other_owners() {
    let server = RedisServer::start();
    let client = connect(&server);
    let lock = client.get_lock("re-entered").unwrap();
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(outer.owner_id(), current_thread_id());
    inner.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    assert!(lock.is_locked().unwrap());

    let me = current_thread_id();
    let other = lock.clone();
    within(Duration::from_secs(20), "the other thread", move || {
        assert!(other.try_lock().unwrap().is_none(), "another owner got in");
        assert_eq!(other.hold_count().unwrap(), 0);
        assert!(!other.is_held_by_current_thread().unwrap());
        assert!(other.is_held_by_thread(me).unwrap());
        assert!(other.unlock().unwrap_err().is_not_held());
    });
    // The other thread's failed unlock took nothing away.
    assert_eq!(lock.hold_count().unwrap(), 1);
    outer.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());

    // Java style: two holds taken and released through the handle.
    lock.lock().unwrap().detach();
    lock.lock().unwrap().detach();
    lock.unlock().unwrap();
    assert!(lock.is_held_by_current_thread().unwrap());
    lock.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    assert!(lock.unlock().unwrap_err().is_not_held());

    // A non-reentrant lock refuses the same thread, and only it.
    let once = client.get_non_reentrant_lock("once").unwrap();
    let held = once.lock().unwrap();
    assert!(once.lock().unwrap_err().is_already_held());
    let other = once.clone();
    within(Duration::from_secs(20), "the other thread", move || {
        assert!(other.try_lock().unwrap().is_none());
    });
    held.unlock().unwrap();
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn fenced_tokens_grow_across_threads() {
    let server = RedisServer::start();
    let client = connect(&server);
    let lock = client.get_fenced_lock("fenced").unwrap();
    let (guard, first) = lock.lock_and_get_token().unwrap();
    guard.unlock().unwrap();
    let other = lock.clone();
    let second = within(Duration::from_secs(20), "the other thread", move || {
        let (guard, token) = other
            .try_lock_and_get_token(Duration::from_secs(5), None)
            .unwrap()
            .expect("the lock is free");
        assert_eq!(guard.token(), Some(token));
        guard.unlock().unwrap();
        token
    });
    assert!(second > first);
    assert_eq!(lock.get_token().unwrap(), Some(second));
    let mut data = data_connection(&server);
    data.del::<_, ()>("redisson_lock_token:{fenced}")
        .expect("DEL");
    assert_nothing_left(&server, &[&client]);
}

/// Released soon: well before the 30 s lease (the default watchdog's) with which
/// a hold whose release was never sent would end.
#[test]
fn guards_dropped_on_other_threads_are_released() {
    let server = RedisServer::start();
    let client = connect(&server);
    let lock = client.get_lock("handed-over").unwrap();

    // Dropped on another thread.
    let guard = lock.lock().unwrap();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || !lock.is_locked().unwrap()),
        "a guard dropped on another thread was not released"
    );

    // Unlocked on another thread: it releases the acquiring thread's hold.
    let guard = lock.lock().unwrap();
    within(Duration::from_secs(20), "the unlocking thread", move || {
        guard.unlock().unwrap();
    });
    assert!(!lock.is_locked().unwrap());

    // Dropped while its thread panics.
    let holder = lock.clone();
    let panicked = std::thread::spawn(move || {
        let _guard = holder.lock().unwrap();
        panic!("a panic inside the critical section");
    })
    .join();
    assert!(panicked.is_err());
    assert!(
        eventually(Duration::from_secs(10), || !lock.is_locked().unwrap()),
        "a guard dropped by a panic was not released"
    );
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn try_lock_wait_gives_up_after_about_its_wait() {
    let server = RedisServer::start();
    let client = connect(&server);
    let lock = client.get_lock("busy").unwrap();
    let held = lock.lock().unwrap();
    let wait = Duration::from_millis(500);
    let other = lock.clone();
    let (got, took) = within(wait + Duration::from_secs(10), "try_lock_wait", move || {
        let started = Instant::now();
        let got = other.try_lock_wait(wait).unwrap().is_some();
        (got, started.elapsed())
    });
    assert!(!got, "acquired a lock held by another thread");
    assert!(took < wait + support::LATE, "gave up after {took:?}");

    let other = lock.clone();
    let (got, took) = within(
        wait + Duration::from_secs(10),
        "try_lock_with_lease",
        move || {
            let started = Instant::now();
            let got = other
                .try_lock_with_lease(wait, Duration::from_secs(10))
                .unwrap()
                .is_some();
            (got, started.elapsed())
        },
    );
    assert!(!got);
    assert!(took < wait + support::LATE, "gave up after {took:?}");

    // Released, the next waiter gets it with the lease it asked for.
    drop(held);
    let lease = Duration::from_secs(10);
    let guard = lock
        .try_lock_with_lease(Duration::from_secs(5), lease)
        .unwrap()
        .expect("the lock was released");
    let ttl = lock.remain_time_to_live().unwrap().as_duration().unwrap();
    assert!(ttl <= lease);
    guard.unlock().unwrap();
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn a_fair_lock_serves_threads_in_arrival_order() {
    const WAITERS: usize = 4;
    let server = RedisServer::start();
    let client = connect(&server);
    let lock = client.get_fair_lock("fair").unwrap();
    let held = lock.lock().unwrap();
    let mut queue = data_connection(&server);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let (lock, order) = (lock.clone(), order.clone());
        waiters.push(std::thread::spawn(move || {
            let guard = lock.lock().unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().unwrap();
        }));
        // The next thread starts once this one has its place in line.
        assert!(
            eventually(Duration::from_secs(10), || {
                let len: usize = queue.llen("redisson_lock_queue:{fair}").unwrap();
                len == i + 1
            }),
            "waiter {i} did not join the queue"
        );
    }
    held.unlock().unwrap();
    within(Duration::from_secs(60), "the fair waiters", move || {
        for waiter in waiters {
            waiter.join().expect("a waiter panicked");
        }
    });
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn a_read_write_lock_shares_readers_and_excludes_a_writer_across_threads() {
    let server = RedisServer::start();
    let client = connect(&server);
    let rw = client.get_read_write_lock("catalog").unwrap();
    let reading = rw.read_lock().lock().unwrap();

    // A second reader thread gets in beside this one; a writer thread does not.
    let both_reading = Arc::new(Barrier::new(2));
    let (reader_rw, barrier) = (rw.clone(), both_reading.clone());
    let reader = std::thread::spawn(move || {
        let guard = reader_rw.read_lock().try_lock().unwrap().expect("shared");
        barrier.wait();
        barrier.wait();
        guard.unlock().unwrap();
    });
    both_reading.wait();
    let writer_rw = rw.clone();
    within(Duration::from_secs(20), "the refused writer", move || {
        assert!(writer_rw.write_lock().try_lock().unwrap().is_none());
    });
    both_reading.wait();
    within(Duration::from_secs(20), "the second reader", move || {
        reader.join().unwrap()
    });
    reading.unlock().unwrap();

    // A writer thread holds it alone: no reader thread gets in.
    let writing = Arc::new(Barrier::new(2));
    let (writer_rw, barrier) = (rw.clone(), writing.clone());
    let writer = std::thread::spawn(move || {
        let write = writer_rw.write_lock();
        let guard = write.lock().unwrap();
        assert!(write.is_held_by_current_thread().unwrap());
        barrier.wait();
        barrier.wait();
        guard.unlock().unwrap();
    });
    writing.wait();
    assert!(rw.write_lock().is_locked().unwrap());
    let reader_rw = rw.clone();
    within(Duration::from_secs(20), "the refused reader", move || {
        assert!(reader_rw.read_lock().try_lock().unwrap().is_none());
    });
    writing.wait();
    within(Duration::from_secs(20), "the writer", move || {
        writer.join().unwrap()
    });
    let again = rw
        .read_lock()
        .try_lock_wait(Duration::from_secs(5))
        .unwrap()
        .expect("free again");
    again.unlock().unwrap();
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn connect_needs_no_runtime() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    let server = RedisServer::start();
    let client = connect(&server);
    let guard = client.get_lock("plain").unwrap().lock().unwrap();
    guard.unlock().unwrap();
    assert_nothing_left(&server, &[&client]);

    // Nobody listening: an error, within the connect timeout and a little.
    let mut config = server.config();
    let (_held, port) = support::closed_port();
    config.address = format!("redis://127.0.0.1:{port}");
    config.connect_timeout = Duration::from_millis(500);
    let refused = within(Duration::from_secs(10), "a refused connect", move || {
        blocking::Client::connect(config).map(|_| ())
    });
    assert!(refused.is_err());
}

#[test]
fn blocking_calls_work_inside_spawn_blocking() {
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = server.config();
    let (connected, from_async) = runtime.block_on(async move {
        // Connected in spawn_blocking, and converted from a client connected here.
        let async_client = redisson_locks::Client::connect(config.clone())
            .await
            .unwrap();
        let from_async = blocking::Client::from_async(async_client);
        let lock = from_async.get_lock("inside").unwrap();
        let connected = tokio::task::spawn_blocking(move || {
            let client = blocking::Client::connect(config).unwrap();
            let guard = client.get_lock("inside").unwrap().lock().unwrap();
            // The two clients are two owners.
            assert!(lock.try_lock().unwrap().is_none());
            guard.unlock().unwrap();
            let guard = lock.lock().unwrap();
            assert_eq!(lock.hold_count().unwrap(), 1);
            guard.unlock().unwrap();
            client
        });
        let connected = tokio::time::timeout(Duration::from_secs(30), connected)
            .await
            .expect("spawn_blocking did not finish")
            .unwrap();
        (connected, from_async)
    });
    assert_nothing_left(&server, &[&connected, &from_async]);
    drop((connected, from_async));
    drop(runtime);
}

#[test]
fn a_blocking_call_in_a_task_of_the_clients_home_runtime_does_not_deadlock() {
    let server = RedisServer::start();
    // One worker, which is also the connection's home: a blocking call from a task
    // there must hand the worker's other tasks (the connection's driver) over.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = server.config();
    let client = within(Duration::from_secs(30), "the task", move || {
        runtime.block_on(async move {
            let client = blocking::Client::from_async(
                redisson_locks::Client::connect(config).await.unwrap(),
            );
            let in_task = client.clone();
            tokio::spawn(async move {
                let lock = in_task.get_lock("in-a-task").unwrap();
                let guard = lock.lock().unwrap();
                assert!(lock.is_locked().unwrap());
                guard.unlock().unwrap();
            })
            .await
            .unwrap();
            client
        })
    });
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn a_blocking_call_inside_a_local_set_answers_instead_of_panicking() {
    let server = RedisServer::start();
    // tokio forbids block_in_place here (a LocalSet on a multi-thread runtime,
    // on the runtime the connection lives on): the call must block plainly.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = server.config();
    let client = within(Duration::from_secs(30), "the LocalSet", move || {
        let local = tokio::task::LocalSet::new();
        let client = runtime.block_on(local.run_until(async move {
            let client = blocking::Client::from_async(
                redisson_locks::Client::connect(config).await.unwrap(),
            );
            let in_set = client.clone();
            tokio::task::spawn_local(async move {
                let lock = in_set.get_lock("in-a-local-set").unwrap();
                let guard = lock.lock().unwrap();
                assert!(lock.is_locked().unwrap());
                guard.unlock().unwrap();
            })
            .await
            .unwrap();
            client
        }));
        drop(local);
        drop(runtime);
        client
    });
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn a_threads_self_wait_is_refused_at_once_when_asked() {
    // A thread is one owner, so its nested lock() re-enters and its downgrade
    // works; what it can still wait for is itself, by asking for the write lock
    // while reading (no upgrade, as in Redisson).
    let server = RedisServer::start();
    let mut config = server.config();
    config.self_wait = redisson_locks::SelfWait::Refuse;
    let client = blocking::Client::connect(config).expect("connect");
    let rw = client.get_read_write_lock("upgrade").unwrap();
    let step = {
        let rw = rw.clone();
        move || {
            let writing = rw.write_lock().lock().unwrap();
            let reading = rw.read_lock().lock().unwrap(); // the downgrade
            writing.unlock().unwrap();
            let upgrade = rw.write_lock().try_lock_wait(Duration::from_secs(10));
            reading.unlock().unwrap();
            upgrade.map(|guard| guard.is_some())
        }
    };
    let err = within(Duration::from_secs(5), "the upgrade", step).unwrap_err();
    assert!(err.is_would_deadlock(), "{err:?}");
    assert!(err.to_string().contains("upgrade"), "{err}");
    assert_nothing_left(&server, &[&client]);
}

#[test]
fn a_thread_inspects_scans_and_forces_out_a_hold() {
    let server = RedisServer::start();
    let client = connect(&server);
    let guard = client.get_lock("seen").unwrap().lock().unwrap();
    let snapshot = client.inspect("seen").unwrap();
    assert_eq!(snapshot.holders.len(), 1);
    let owner = &snapshot.holders[0].owner;
    assert!(owner.mine);
    assert_eq!(
        owner.thread,
        current_thread_id().to_string(),
        "the thread is the owner"
    );
    assert_eq!(client.scan("se*").unwrap().objects.len(), 1);
    let (before, freed) = client.force_unlock("seen").unwrap();
    assert!(freed && before.is_held());
    assert!(!client.inspect("seen").unwrap().is_held());
    drop(guard);
}
