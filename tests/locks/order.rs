//! A lock's order of waiting clients (`order_common.lua`): this crate's
//! clients wait for a contended reentrant lock (or write lock) in arrival order, a
//! release names the first for a short turn, and a Redisson client, which
//! never reads the order, keeps its own behaviour. The liveness of its skips
//! (a client named that never comes, a count cut by a reconnect) is in
//! `liveness.rs`.

use std::time::Duration;

use redisson_locks::{Client, RLock};

use crate::support::{eventually, within, RedisServer};

const T: Duration = Duration::from_secs(30);

async fn order_len(server: &RedisServer, name: &str) -> usize {
    redis::cmd("ZCARD")
        .arg(format!("{{{name}}}:rl-waiters"))
        .query_async(&mut server.admin().await)
        .await
        .unwrap()
}

/// Clients that came one after another to a held lock take it in that
/// order, each release handing it to the next client; the holder's own next
/// acquisition, made at once, joins the tail instead of taking the lock again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_take_a_contended_lock_in_the_order_they_came() {
    in_arrival_order("order-fifo", |client, name| client.get_lock(name).unwrap()).await;
}

/// The same for a read-write lock's writers, whose release publishes two
/// messages (`"1"`, then `"0"`): each counts as one release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_take_a_contended_write_lock_in_the_order_they_came() {
    in_arrival_order("order-fifo-write", |client, name| {
        client.get_read_write_lock(name).unwrap().write_lock()
    })
    .await;
}

/// Five clients, four of which come one after another to `name` (the lock
/// `lock_of` gives) held by the first, take it in arrival order, twice.
async fn in_arrival_order(name: &str, lock_of: fn(&Client, &str) -> RLock) {
    let server = RedisServer::start();
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..5 {
        clients.push(server.client().await);
    }
    let held = lock_of(&clients[0], name).lock().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (i, client) in clients.iter().enumerate().skip(1) {
        let lock = lock_of(client, name);
        let tx = tx.clone();
        tokio::spawn(async move {
            for round in 0..2 {
                let guard = lock.lock().await.unwrap();
                tx.send((i, round)).unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.unlock().await.unwrap();
            }
        });
        assert!(
            eventually(T, || async { order_len(&server, name).await == i }).await,
            "client {i} joined the order"
        );
    }
    drop(tx);
    held.unlock().await.unwrap();
    let mut served = Vec::new();
    while let Some(turn) = within(T, "the next turn", rx.recv()).await {
        served.push(turn);
    }
    let expected: Vec<_> = (0..2)
        .flat_map(|round| (1..5).map(move |i| (i, round)))
        .collect();
    assert_eq!(served, expected, "turns out of arrival order");
    crate::support::assert_nothing_left(&server, &clients.iter().collect::<Vec<_>>()).await;
}

/// A Redisson client never reads the order: its acquire (Redisson's script
/// shape, sent as Redisson sends it) takes a free lock during another
/// client's turn, as Redisson's waiters always have; the waiter of the client
/// named, asleep behind the Java hold, is woken by the Java release and takes
/// the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_acquire_ignores_the_turn_and_the_client_named_takes_the_next() {
    let name = "order-java";
    let server = RedisServer::start();
    let waiter = server.client().await;
    let mut admin = server.admin().await;
    let java = |owner: &'static str| {
        let mut eval = redis::cmd("EVAL");
        eval.arg(REDISSON_ACQUIRE)
            .arg(1)
            .arg(name)
            .arg(30_000)
            .arg(owner);
        eval
    };
    let first: redis::Value = java("java-uuid:1").query_async(&mut admin).await.unwrap();
    assert_eq!(first, redis::Value::Nil, "the Java holder");
    let waiting = {
        let lock = waiter.get_lock(name).unwrap();
        tokio::spawn(async move { lock.lock().await.unwrap().unlock().await.unwrap() })
    };
    assert!(eventually(T, || async { order_len(&server, name).await == 1 }).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The waiter's client named for the turn, as this crate's release names
    // it, and the lock free: a Java acquire takes it all the same.
    let member: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("{{{name}}}:rl-waiters"))
        .arg(0)
        .arg(0)
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{name}}}:rl-turn"))
        .arg(&member[0])
        .arg("PX")
        .arg(5_000)
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query_async(&mut admin)
        .await
        .unwrap();
    let second: redis::Value = java("java-uuid:2").query_async(&mut admin).await.unwrap();
    assert_eq!(
        second,
        redis::Value::Nil,
        "the Java acquire took the free lock"
    );
    // The Java holder releases as Redisson does: DEL and one message.
    let _: () = redis::cmd("DEL")
        .arg(name)
        .query_async(&mut admin)
        .await
        .unwrap();
    let _: () = redis::cmd("PUBLISH")
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg("0")
        .query_async(&mut admin)
        .await
        .unwrap();
    within(T, "the waiter named for the turn", waiting)
        .await
        .unwrap();
    crate::support::assert_nothing_left(&server, &[&waiter]).await;
}

/// Redisson's reentrant acquire, as its documented behaviour reads: free or
/// ours, take a hold; else the PTTL.
const REDISSON_ACQUIRE: &str = "if redis.call('exists', KEYS[1]) == 0 \
     or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); \
     redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";

/// A waiter that gives up (its time runs out, or its future is dropped)
/// leaves the order at once: the clients behind it are not counted behind a
/// client that no longer waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_the_order() {
    let name = "order-leave";
    let server = RedisServer::start();
    let holder = server.client().await;
    let timed = server.client().await;
    let dropped = server.client().await;
    let held = holder.get_lock(name).unwrap().lock().await.unwrap();
    let lock = timed.get_lock(name).unwrap();
    let got = lock
        .try_lock_wait(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(
        eventually(T, || async { order_len(&server, name).await == 0 }).await,
        "the waiter whose time ran out left the order"
    );
    let waiting = {
        let lock = dropped.get_lock(name).unwrap();
        tokio::spawn(async move { lock.lock().await.map(drop) })
    };
    assert!(eventually(T, || async { order_len(&server, name).await == 1 }).await);
    waiting.abort();
    assert!(
        eventually(T, || async { order_len(&server, name).await == 0 }).await,
        "the dropped waiter left the order"
    );
    held.unlock().await.unwrap();
    crate::support::assert_nothing_left(&server, &[&holder, &timed, &dropped]).await;
}
