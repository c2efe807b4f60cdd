//! Fair-lock helpers: read the queue and its deadlines, join waiters one by one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::Client;

use super::{eventually, RedisServer};

pub async fn queue_len(server: &RedisServer, name: &str) -> usize {
    let mut admin = server.admin().await;
    admin
        .llen(format!("redisson_lock_queue:{{{name}}}"))
        .await
        .unwrap()
}

pub async fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    let mut admin = server.admin().await;
    admin
        .lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .unwrap()
}

pub async fn timeouts_len(server: &RedisServer, name: &str) -> usize {
    let mut admin = server.admin().await;
    admin
        .zcard(format!("redisson_lock_timeout:{{{name}}}"))
        .await
        .unwrap()
}

/// Starts a waiter that records its number in `order` when it acquires, and waits
/// until it has joined the queue.
pub async fn join_in_turn(
    server: &RedisServer,
    client: &Client,
    name: &str,
    number: usize,
    order: &Arc<Mutex<Vec<usize>>>,
) -> tokio::task::JoinHandle<()> {
    let lock = client.get_fair_lock(name).unwrap();
    let order = order.clone();
    let before = queue_len(server, name).await;
    let task = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        order.lock().unwrap().push(number);
        guard.unlock().await.unwrap();
    });
    assert!(
        eventually(Duration::from_secs(10), || async {
            queue_len(server, name).await == before + 1
        })
        .await,
        "waiter {number} did not join the queue"
    );
    task
}
