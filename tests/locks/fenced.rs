//! The fenced lock: every acquisition draws a token greater than every earlier
//! one for the name, and a store that checks tokens refuses a paused holder's
//! late write.

use std::time::Duration;

use redis::AsyncCommands;

use crate::support::{assert_nothing_left_but, within, RedisServer};

const T: Duration = Duration::from_secs(30);

/// 1,000 acquisitions from 4 clients (some re-entering): in grant order, every
/// token is greater than the one before; `get_token` is the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_across_clients_and_reentries() {
    let server = RedisServer::start();
    let mut tasks = Vec::new();
    for c in 0..4 {
        let client = server.client().await;
        let url = server.url();
        tasks.push(tokio::spawn(async move {
            let lock = client.get_fenced_lock("fenced").unwrap();
            let mut conn = redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            for i in 0..250 {
                let (guard, token) = lock.lock_and_get_token().await.unwrap();
                let _: () = conn.rpush("granted", token).await.unwrap();
                if (c + i) % 10 == 0 {
                    // A re-entry draws a token of its own, greater still.
                    let (inner, inner_token) =
                        guard.scope(lock.lock_and_get_token()).await.unwrap();
                    assert!(inner_token > token);
                    assert_eq!(inner.token(), Some(inner_token));
                    let _: () = conn.rpush("granted", inner_token).await.unwrap();
                    inner.unlock().await.unwrap();
                }
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(T, "contenders", task).await.unwrap();
    }
    let mut admin = server.admin().await;
    let granted: Vec<u64> = admin.lrange("granted", 0, -1).await.unwrap();
    assert_eq!(granted.len(), 1000 + 100);
    for pair in granted.windows(2) {
        assert!(pair[0] < pair[1], "token {} after {}", pair[1], pair[0]);
    }
    let client = server.client().await;
    let lock = client.get_fenced_lock("fenced").unwrap();
    assert_eq!(lock.get_token().await.unwrap(), granted.last().copied());
    assert!(!lock.is_locked().await.unwrap());
}

/// The scenario from the fencing literature: a holder paused past its lease
/// writes late. A store that keeps the highest token it saw, and compares and
/// writes in one step, refuses that write; without the token check the same
/// interleaving overwrites the newer holder's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_late_write_is_refused_by_a_fencing_store() {
    let server = RedisServer::start();
    let (a, b) = (server.client().await, server.client().await);
    let mut store = server.admin().await;
    // The store: write `value` only with a token above the highest seen.
    let fenced_write = redis::Script::new(
        "local seen = tonumber(redis.call('get', KEYS[2]) or '0') \
         if tonumber(ARGV[1]) <= seen then return 0 end \
         redis.call('set', KEYS[2], ARGV[1]) redis.call('set', KEYS[1], ARGV[2]) return 1",
    );
    let lease = Duration::from_millis(300);
    let slow = a.get_fenced_lock("account").unwrap();
    let (paused, stale) = slow
        .try_lock_and_get_token(Duration::from_secs(1), Some(lease))
        .await
        .unwrap()
        .expect("free");
    // A pauses past its lease; B gets the lock and writes.
    tokio::time::sleep(lease * 2).await;
    assert!(paused.is_lease_lost(), "the paused holder is told");
    let (fresh, token) = within(
        T,
        "second holder",
        b.get_fenced_lock("account").unwrap().lock_and_get_token(),
    )
    .await
    .unwrap();
    assert!(token > stale);
    let applied: i64 = fenced_write
        .key("balance")
        .key("balance:token")
        .arg(token)
        .arg("written by B")
        .invoke_async(&mut store)
        .await
        .unwrap();
    assert_eq!(applied, 1);
    // A wakes and writes with its old token: refused.
    let applied: i64 = fenced_write
        .key("balance")
        .key("balance:token")
        .arg(stale)
        .arg("written by A, late")
        .invoke_async(&mut store)
        .await
        .unwrap();
    assert_eq!(applied, 0, "the stale write was applied");
    let balance: String = store.get("balance").await.unwrap();
    assert_eq!(balance, "written by B");
    // Without the check the late write lands: what fencing prevents.
    let _: () = store.set("unfenced", "written by B").await.unwrap();
    let _: () = store.set("unfenced", "written by A, late").await.unwrap();
    let unfenced: String = store.get("unfenced").await.unwrap();
    assert_ne!(unfenced, "written by B");
    fresh.unlock().await.unwrap();
    assert!(paused.unlock().await.unwrap_err().is_not_held());
}

/// Cancelled acquisitions leave nothing but the token counter (which, as in
/// Redisson, has no TTL and only grows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_fenced_acquisitions_leave_only_the_counter() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let client = server.client().await;
    let held = holder.get_fenced_lock("cancelled").unwrap();
    let (guard, _) = held.lock_and_get_token().await.unwrap();
    let lock = client.get_fenced_lock("cancelled").unwrap();
    for i in 0..200u64 {
        let _ = tokio::time::timeout(Duration::from_micros(i * 10), lock.lock()).await;
    }
    guard.unlock().await.unwrap();
    for i in 0..200u64 {
        if let Ok(Ok(guard)) =
            tokio::time::timeout(Duration::from_micros(i * 20), lock.lock()).await
        {
            guard.unlock().await.unwrap();
        }
    }
    let counter = "redisson_lock_token:{cancelled}";
    assert_nothing_left_but(&server, &[&client], |key| key == counter).await;
    assert_eq!(server.keys().await, vec![counter.to_owned()]);
}

/// Tokens are exact over the counter's whole range: past 2^53, where a Lua
/// number (a double) can no longer tell neighbours apart, each acquisition still
/// draws the next integer (before: …996, …996, …996).
#[tokio::test]
async fn tokens_stay_exact_past_two_to_the_fifty_three() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let start: u64 = (1 << 53) + 1;
    let _: () = admin
        .set("redisson_lock_token:{exact}", start)
        .await
        .unwrap();
    let lock = client.get_fenced_lock("exact").unwrap();
    for step in 1..=4 {
        let (guard, token) = lock.lock_and_get_token().await.unwrap();
        assert_eq!(token, start + step, "token {step}");
        assert_eq!(lock.get_token().await.unwrap(), Some(token));
        guard.unlock().await.unwrap();
    }
    // Near the top of Redis' integer range too.
    let top = i64::MAX as u64 - 2;
    let _: () = admin.set("redisson_lock_token:{exact}", top).await.unwrap();
    let (guard, token) = lock.lock_and_get_token().await.unwrap();
    assert_eq!(token, top + 1);
    guard.unlock().await.unwrap();
}

/// A token counter of another type is a `WrongType` naming the counter's key,
/// not the lock's, and takes nothing.
#[tokio::test]
async fn a_counter_of_another_type_is_named_in_the_error() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let _: () = admin
        .rpush("redisson_lock_token:{typed}", "x")
        .await
        .unwrap();
    let lock = client.get_fenced_lock("typed").unwrap();
    let err = within(T, "acquire", lock.lock()).await.unwrap_err();
    assert!(err.is_wrong_type(), "{err:?}");
    assert!(
        err.to_string().contains("redisson_lock_token:{typed}"),
        "{err}"
    );
    let held: bool = admin.exists("typed").await.unwrap();
    assert!(!held, "a refused acquire takes nothing");
}

/// A token counter holding a string that is not a number is refused before
/// anything is written, naming the counter.
#[tokio::test]
async fn a_counter_that_is_no_number_is_refused_and_takes_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let _: () = admin
        .set("redisson_lock_token:{texty}", "abc")
        .await
        .unwrap();
    let lock = client.get_fenced_lock("texty").unwrap();
    let err = within(T, "acquire", lock.lock()).await.unwrap_err();
    assert!(
        err.to_string().contains("redisson_lock_token:{texty}"),
        "{err}"
    );
    let held: bool = admin.exists("texty").await.unwrap();
    assert!(!held, "a refused acquire takes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_store_writes_only_for_a_newer_token() {
    let server = RedisServer::start();
    let client = server.client().await;
    let store = client.get_fenced_store("fenced:data").unwrap();
    assert_eq!(store.read().await.unwrap(), None);

    let first = store.write(5, b"five").await.unwrap();
    assert!(first.written());
    assert_eq!(first.fence(), 5);
    // Stale tokens are refused, and say which fence refused them.
    for stale in [4, 1] {
        let refused = store.write(stale, b"stale").await.unwrap();
        assert!(!refused.written(), "{stale}");
        assert_eq!(refused.fence(), 5);
    }
    assert_eq!(store.read().await.unwrap(), Some((b"five".to_vec(), 5)));
    // The same token is the same hold writing again: it writes.
    let again = store.write(5, b"five again").await.unwrap();
    assert!(again.written() && again.fence() == 5);
    assert_eq!(
        store.read().await.unwrap(),
        Some((b"five again".to_vec(), 5))
    );
    // Newer writes; compared exactly past 2^53 and across digit counts.
    assert!(store.write(10, b"ten").await.unwrap().written());
    assert!(!store.write(9, b"nine").await.unwrap().written());
    let big = (1u64 << 53) + 1;
    assert!(store.write(big, b"big").await.unwrap().written());
    assert!(!store.write(big - 1, b"x").await.unwrap().written());
    assert!(store.write(u64::MAX, b"max").await.unwrap().written());
    assert!(!store.write(u64::MAX - 1, b"older").await.unwrap().written());
    assert_eq!(
        store.read().await.unwrap(),
        Some((b"max".to_vec(), u64::MAX))
    );
    // A fence written elsewhere with leading zeros compares by its value.
    let mut admin = server.admin().await;
    let _: () = admin.hset("fenced:data", "fence", "007").await.unwrap();
    assert!(store.write(9, b"nine").await.unwrap().written());
    assert!(!store.write(6, b"six").await.unwrap().written());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_store_refuses_bad_input_with_typed_errors() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let store = client.get_fenced_store("fenced:bad").unwrap();
    assert!(store
        .write(0, b"v")
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(server.keys().await.is_empty());
    assert!(client.get_fenced_store("").is_err());

    let _: () = admin.set("fenced:bad", "a string").await.unwrap();
    let err = store.write(1, b"v").await.unwrap_err();
    assert!(err.is_wrong_type(), "{err}");
    assert!(store.read().await.unwrap_err().is_wrong_type());
    let _: () = admin.del("fenced:bad").await.unwrap();
    let _: () = admin
        .hset_multiple("fenced:bad", &[("value", "v"), ("fence", "nope")])
        .await
        .unwrap();
    assert!(store.write(1, b"v").await.is_err());
    assert!(store.read().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holders_late_write_is_refused_by_the_fenced_store() {
    let server = RedisServer::start();
    let (slow, fast) = (server.client().await, server.client().await);
    let store = fast.get_fenced_store("fenced:balance").unwrap();
    let lease = Duration::from_millis(200);
    let (paused, old) = slow
        .get_fenced_lock("fenced:acct")
        .unwrap()
        .try_lock_and_get_token(Duration::from_secs(1), Some(lease))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(lease * 2).await;
    let (guard, token) = fast
        .get_fenced_lock("fenced:acct")
        .unwrap()
        .lock_and_get_token()
        .await
        .unwrap();
    assert!(token > old);
    assert!(store.write(token, b"B").await.unwrap().written());
    let late = slow.get_fenced_store("fenced:balance").unwrap();
    assert!(!late.write(old, b"A, stale").await.unwrap().written());
    assert_eq!(store.read().await.unwrap(), Some((b"B".to_vec(), token)));
    guard.unlock().await.unwrap();
    drop(paused);
}
