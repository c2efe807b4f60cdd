//! Self-waits: Java's nested `lock()` and its read-write downgrade, ported line
//! by line, wait for the waiter's own hold. They are named (a warning, a count),
//! refused at once when the client asks for it, and work as in Java in the task
//! owner mode; sibling futures that take turns keep working as before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, OwnerMode, SelfWait};

use crate::support::{assert_nothing_left, eventually, within, RedisServer};

const T: Duration = Duration::from_secs(20);

async fn refusing(server: &RedisServer) -> Client {
    server.client_with(|c| c.self_wait = SelfWait::Refuse).await
}

#[tokio::test]
async fn a_nested_lock_outside_the_scope_is_refused_at_once_naming_the_fix() {
    let server = RedisServer::start();
    let client = refusing(&server).await;
    let lock = client.get_lock("nested").unwrap();
    let outer = lock.lock().await.unwrap();
    // Java: lock.lock() again in a called function.
    let err = within(T, "nested lock()", lock.lock()).await.unwrap_err();
    assert!(err.is_would_deadlock(), "{err:?}");
    let text = err.to_string();
    for needle in ["'nested'", "scope", "with_task_owner", "OwnerMode::Task"] {
        assert!(text.contains(needle), "{needle:?} missing from: {text}");
    }
    // A timed wait is refused too; a one-off try just answers no.
    let err = lock
        .try_lock_wait(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.is_would_deadlock());
    assert!(lock.try_lock().await.unwrap().is_none());
    // Nothing was taken by the refused waits: the outer hold counts 1.
    assert_eq!(outer.scope(lock.hold_count()).await.unwrap(), 1);
    // The fix the message names works: inside the scope it re-enters.
    outer
        .scope(async {
            let inner = lock.lock().await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 2);
            inner.unlock().await.unwrap();
        })
        .await;
    outer.unlock().await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test]
async fn every_exclusive_kind_refuses_its_own_tasks_second_owner() {
    let server = RedisServer::start();
    let client = refusing(&server).await;
    let locks = [
        client.get_lock("k-reentrant").unwrap(),
        client.get_fair_lock("k-fair").unwrap(),
        client.get_spin_lock("k-spin").unwrap(),
        client.get_non_reentrant_lock("k-non-reentrant").unwrap(),
        (*client.get_fenced_lock("k-fenced").unwrap()).clone(),
        client.get_multi_lock("k-group", ["a", "b"]).unwrap(),
    ];
    for lock in &locks {
        let outer = lock.lock().await.unwrap();
        let err = within(T, lock.name(), lock.lock()).await.unwrap_err();
        assert!(err.is_would_deadlock(), "{}: {err:?}", lock.name());
        outer.unlock().await.unwrap();
    }
    // A group member set that shares no member with a hold is no self-wait.
    let ab = client.get_multi_lock("k-group", ["a", "b"]).unwrap();
    let cd = client.get_multi_lock("k-group", ["c", "d"]).unwrap();
    let held = ab.lock().await.unwrap();
    let other = within(T, "disjoint members", cd.lock()).await.unwrap();
    other.unlock().await.unwrap();
    held.unlock().await.unwrap();
    assert_nothing_left_but_tokens(&server, &client).await;
}

async fn assert_nothing_left_but_tokens(server: &RedisServer, client: &Client) {
    crate::support::assert_nothing_left_but(server, &[client], |k| {
        k.starts_with("redisson_lock_token")
    })
    .await;
}

#[tokio::test]
async fn the_literal_downgrade_is_refused_and_the_scoped_one_works() {
    let server = RedisServer::start();
    let client = refusing(&server).await;
    let rw = client.get_read_write_lock("catalog").unwrap();
    let writing = rw.write_lock().lock().await.unwrap();
    // Java: rw.readLock().lock() while holding the write lock.
    let err = within(T, "literal downgrade", rw.read_lock().lock())
        .await
        .unwrap_err();
    assert!(err.is_would_deadlock(), "{err:?}");
    assert!(err.to_string().contains("scope"), "{err}");
    // Through the write hold's scope the read lock is the writer's: a downgrade.
    let reading = writing.scope(rw.read_lock().lock()).await.unwrap();
    writing.unlock().await.unwrap();
    let mode: Option<String> = server.admin().await.hget("catalog", "mode").await.unwrap();
    assert_eq!(mode.as_deref(), Some("read"));
    reading.unlock().await.unwrap();
    // A reader asking for the write lock is its own obstacle (no upgrade), in
    // whichever mode: refused, naming the upgrade.
    let reading = rw.read_lock().lock().await.unwrap();
    let err = reading
        .scope(rw.write_lock().try_lock_wait(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("upgrade"), "{err}");
    // Another reader of the same task is no self-wait: readers share.
    let second = within(T, "a second reader", rw.read_lock().lock())
        .await
        .unwrap();
    second.unlock().await.unwrap();
    reading.unlock().await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

/// The warnings of the `redisson_locks` target, as text, seen on this thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn taken(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "redisson_locks" {
            let mut text = String::new();
            event.record(&mut Message(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_self_wait_is_warned_once_named_and_counted_and_ends_when_the_sibling_releases() {
    let warnings = Warnings::default();
    let _subscribed = tracing::subscriber::set_default(warnings.clone());
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.self_wait_warning = Duration::from_millis(300))
        .await;
    let lock = client.get_lock("orders").unwrap();
    let outer = lock.lock().await.unwrap();
    // The nested lock() waits behind its own task's hold; a sibling future of the
    // task releases that hold later, which is the only way in.
    let nested = async { lock.lock().await.unwrap() };
    let sibling = async {
        assert!(
            eventually(T, || async { client.self_waits_for("orders") == 1 }).await,
            "the self-wait is counted"
        );
        assert!(client.waiting_for("orders") >= 1);
        assert!(
            eventually(T, || async { !warnings.taken().is_empty() }).await,
            "a warning within the self-wait time"
        );
        // Still waiting: well past the warning, no second one.
        tokio::time::sleep(Duration::from_millis(700)).await;
        outer.unlock().await.unwrap();
    };
    let (inner, ()) = within(T, "the self-wait ends", async {
        tokio::join!(nested, sibling)
    })
    .await;
    assert_eq!(client.self_waits_for("orders"), 0);
    inner.unlock().await.unwrap();
    let seen = warnings.taken();
    assert_eq!(seen.len(), 1, "one warning per self-wait: {seen:?}");
    eprintln!("the warning: {}", seen[0]);
    for needle in [
        "\"orders\"",
        "its own task",
        "guard.scope",
        "lock.with",
        "with_task_owner",
        "OwnerMode::Task",
    ] {
        assert!(
            seen[0].contains(needle),
            "{needle:?} missing from: {}",
            seen[0]
        );
    }
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test(flavor = "current_thread")]
async fn siblings_that_take_turns_neither_warn_nor_fail() {
    let warnings = Warnings::default();
    let _subscribed = tracing::subscriber::set_default(warnings.clone());
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("turns").unwrap();
    let job = |n: u64| {
        let lock = lock.clone();
        async move {
            for _ in 0..5 {
                let guard = lock.lock().await.unwrap();
                tokio::time::sleep(Duration::from_millis(n)).await;
                guard.unlock().await.unwrap();
            }
        }
    };
    within(T, "siblings", async {
        tokio::join!(job(10), job(20), job(30))
    })
    .await;
    assert!(warnings.taken().is_empty(), "{:?}", warnings.taken());
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test]
async fn a_wait_behind_another_task_is_no_self_wait() {
    let server = RedisServer::start();
    let client = refusing(&server).await;
    let lock = client.get_lock("others").unwrap();
    let held = lock.lock().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.map(|guard| guard.unlock()) })
    };
    assert!(eventually(T, || async { client.waiting_for("others") == 1 }).await);
    assert_eq!(client.self_waits_for("others"), 0);
    held.unlock().await.unwrap();
    let released = within(T, "the other task", waiter).await.unwrap().unwrap();
    released.await.unwrap();
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test]
async fn in_the_task_owner_mode_java_idioms_work_as_in_java() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| {
            c.owner_mode = OwnerMode::Task;
            c.self_wait = SelfWait::Refuse;
        })
        .await;
    let admin = &mut server.admin().await;
    // Nested lock(), in a called function.
    let lock = client.get_lock("java-nested").unwrap();
    async fn inner(lock: &redisson_locks::RLock) -> u64 {
        let guard = lock.lock().await.unwrap();
        let count = lock.hold_count().await.unwrap();
        guard.unlock().await.unwrap();
        count
    }
    let outer = lock.lock().await.unwrap();
    assert_eq!(within(T, "nested", inner(&lock)).await, 2);
    assert!(lock.is_held_by_current_task().await.unwrap());
    outer.unlock().await.unwrap();
    // lock(); ... unlock(); with no guard kept, as Java writes it.
    lock.lock().await.unwrap().detach();
    lock.lock().await.unwrap().detach();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    lock.unlock().await.unwrap();
    lock.unlock().await.unwrap();
    // The documented downgrade, line by line.
    let rw = client.get_read_write_lock("java-rw").unwrap();
    let writing = rw.write_lock().lock().await.unwrap();
    let reading = within(T, "downgrade", rw.read_lock().lock()).await.unwrap();
    writing.unlock().await.unwrap();
    let mode: Option<String> = admin.hget("java-rw", "mode").await.unwrap();
    assert_eq!(mode.as_deref(), Some("read"));
    reading.unlock().await.unwrap();
    // Every kind re-enters for its task; the non-reentrant one refuses at once.
    for lock in [
        client.get_fair_lock("java-fair").unwrap(),
        client.get_spin_lock("java-spin").unwrap(),
        (*client.get_fenced_lock("java-fenced").unwrap()).clone(),
        client.get_multi_lock("java-group", ["x"]).unwrap(),
    ] {
        let outer = lock.lock().await.unwrap();
        let again = within(T, lock.name(), lock.lock()).await.unwrap();
        again.unlock().await.unwrap();
        outer.unlock().await.unwrap();
    }
    let once = client.get_non_reentrant_lock("java-once").unwrap();
    let held = once.lock().await.unwrap();
    assert!(within(T, "non-reentrant", once.lock())
        .await
        .unwrap_err()
        .is_already_held());
    held.unlock().await.unwrap();
    // Another task is another owner.
    let held = lock.lock().await.unwrap();
    let other = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock().await.map(|g| g.is_some()) })
    };
    assert!(!other.await.unwrap().unwrap());
    held.unlock().await.unwrap();
    assert_nothing_left_but_tokens(&server, &client).await;
}
