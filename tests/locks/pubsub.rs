//! Waiting sleeps on pub/sub: few attempts, prompt wake-ups, one subscription per
//! lock per client, and recovery after the connection is cut.

use std::time::Duration;

use crate::support::{eventually, within, RedisServer, PROMPT};

const CHANNEL: &str = "redisson_lock__channel:{shared}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_waiter_sends_a_handful_of_attempts_and_wakes_promptly() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let guard = holder.get_lock("shared").unwrap().lock().await.unwrap();

    server.reset_stats().await;
    let lock = waiter.get_lock("shared").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        (tokio::time::Instant::now(), guard)
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let attempts = server.command_calls("evalsha").await;
    assert!(
        attempts <= 4,
        "{attempts} acquire attempts while blocked 3 s"
    );
    assert_eq!(server.subscribers(CHANNEL).await, 1);

    let released = tokio::time::Instant::now();
    guard.unlock().await.unwrap();
    let (acquired, theirs) = within(PROMPT * 2, "waiter", waiting).await.unwrap();
    // The lease is 30 s (its TTL never below 20 s): waking well within it means
    // the message woke it.
    assert!(
        acquired - released < PROMPT,
        "woken {:?} after the release",
        acquired - released
    );
    theirs.unlock().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers(CHANNEL).await == 0
        })
        .await
    );
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_share_one_subscription_and_leave_none() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let guard = holder.get_lock("shared").unwrap().lock().await.unwrap();
    let baseline_connections = server.lock_client_connections().await;

    let mut tasks = Vec::new();
    for _ in 0..50 {
        let lock = waiter.get_lock("shared").unwrap();
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
            g.unlock().await.unwrap();
        }));
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers(CHANNEL).await == 1
        })
        .await
    );
    // All fifty wait (in the client's line for the lock): still one subscription.
    assert!(
        eventually(Duration::from_secs(10), || async {
            waiter.waiting_for("shared") == 50
        })
        .await,
        "{} of 50 waiting",
        waiter.waiting_for("shared")
    );
    assert_eq!(
        server.subscribers(CHANNEL).await,
        1,
        "one subscription for 50 waiters"
    );
    assert_eq!(waiter.subscribed_channels(), 1);
    assert_eq!(
        server.lock_client_connections().await,
        baseline_connections,
        "waiters opened connections"
    );

    guard.unlock().await.unwrap();
    within(Duration::from_secs(30), "50 waiters", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers(CHANNEL).await == 0
        })
        .await
    );
    assert_eq!(waiter.subscribed_channels(), 0);
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_resubscribe_after_their_connection_is_killed() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let guard = holder.get_lock("shared").unwrap().lock().await.unwrap();
    let lock = waiter.get_lock("shared").unwrap();
    let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers(CHANNEL).await == 1
        })
        .await
    );

    assert_eq!(server.kill_subscribers().await, 1);
    // The waiter notices, reconnects and subscribes again (long before the 30 s TTL).
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers(CHANNEL).await == 1
        })
        .await,
        "waiter did not resubscribe"
    );
    let released = tokio::time::Instant::now();
    guard.unlock().await.unwrap();
    let theirs = within(PROMPT * 2, "waiter after reconnect", waiting)
        .await
        .unwrap();
    assert!(
        released.elapsed() < PROMPT,
        "waiter slept out its TTL: {:?}",
        released.elapsed()
    );
    theirs.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// Redisson once leaked a per-channel permit when subscriptions broke under
/// load, silently disabling wake-ups for a slice of channels for the life of
/// the process. Here: 1,000 waiters on 1,000 names (30 s leases), their
/// subscriptions killed three times while they wait, then every lock
/// released: each waiter is woken by its message, long before its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_a_thousand_names_are_woken_by_message_after_subscriptions_are_killed() {
    const NAMES: usize = 1_000;
    let server = RedisServer::start();
    let holder = server.client().await;
    let waiter = server.client().await;
    let mut guards = Vec::new();
    for i in 0..NAMES {
        guards.push(
            holder
                .get_lock(format!("n{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    let mut waiting = Vec::new();
    for i in 0..NAMES {
        let lock = waiter.get_lock(format!("n{i}")).unwrap();
        waiting.push(tokio::spawn(async move { lock.lock().await.unwrap() }));
    }
    let all_subscribed = || async { waiter.subscribed_channels() == NAMES };
    assert!(eventually(Duration::from_secs(30), all_subscribed).await);
    for _ in 0..3 {
        assert!(server.kill_subscribers().await >= 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Back on every channel before the releases.
    assert!(
        eventually(Duration::from_secs(20), || async {
            server.channels().await.len() == NAMES
        })
        .await,
        "{} of {NAMES} channels subscribed again",
        server.channels().await.len()
    );
    let released = tokio::time::Instant::now();
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    within(Duration::from_secs(20), "every waiter woken", async {
        for w in waiting {
            w.await.unwrap().unlock().await.unwrap();
        }
    })
    .await;
    assert!(
        released.elapsed() < Duration::from_secs(20),
        "woken by their messages, not their 30 s leases: {:?}",
        released.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.keys().await.is_empty()
        })
        .await
    );
    assert_eq!(waiter.subscribed_channels(), 0);
}

/// A waiter whose busy first attempt ran before the release, and whose lock's
/// channel another waiter of its client subscribed only after that release,
/// tries again: the release published to nobody here, so no message will come.
/// (Sleeping first, as a waiter may when the channel stood confirmed before
/// its attempt went out, cost the holder's whole lease: subscribed and
/// confirmed now is not confirmed then.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_before_the_channel_was_confirmed_is_not_slept_through() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("confirmed-late").unwrap();
    let channel = "redisson_lock__channel:{confirmed-late}";
    let holder = lock.lock().await.unwrap();

    // Polled once: the first waiter's attempt goes out while the lock is held;
    // its busy reply is not read before the end of the test's setup.
    let mut first = Box::pin(lock.lock());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(first.as_mut().poll(&mut cx).is_pending());
    // Sent after that attempt on the same connection, the release runs after it,
    // and publishes to nobody: nobody of this client listens yet.
    holder.unlock().await.unwrap();
    // (The lock's order of waiting clients and its turn stay: the first
    // waiter's client joined it, and the release named it.)
    assert!(
        !server.keys().await.iter().any(|k| k == "confirmed-late"),
        "the first waiter's attempt ran after the release: nothing is tested"
    );
    // A second waiter parks behind the first, and subscribes the lock's channel.
    let mut second = Box::pin(lock.lock());
    assert!(second.as_mut().poll(&mut cx).is_pending());
    assert!(
        eventually(PROMPT, || async { server.subscribers(channel).await == 1 }).await,
        "the parked waiter's subscription"
    );
    // The confirmation reaches the client a moment after the server has it.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The lock is free and the lease 30 s: a waiter that slept on the message
    // it missed would wake only at the end of that lease.
    let guard = within(PROMPT, "the first waiter", first).await.unwrap();
    guard.unlock().await.unwrap();
    let guard = within(PROMPT, "the parked waiter", second).await.unwrap();
    guard.unlock().await.unwrap();
    crate::support::assert_nothing_left(&server, &[&client]).await;
}
