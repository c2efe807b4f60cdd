//! Fencing, played out: a holder pauses past its lease, another holder takes the
//! lock and writes, then the first wakes and writes with its old token. A store
//! that checks tokens (the crate's `FencedStore`: one script compares the token
//! with the stored fence and writes) refuses the late write; the same run with a
//! plain SET lets it overwrite the newer holder's data. For a SQL store the check
//! is `UPDATE t SET v = $1, fence = $2 WHERE id = $3 AND fence <= $2`: `<=`, as
//! `FencedStore` compares, so that a holder's second write under the same token
//! is let through and only an older token is refused.
//!
//! ```sh
//! cargo run --example fencing
//! ```
//!
//! It uses `REDIS_URL` when set; otherwise it starts a throwaway `redis-server`.

use std::time::Duration;

use redisson_locks::{Client, Config};

#[path = "support/throwaway_server.rs"]
mod throwaway_server;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (server, url) = throwaway_server::start(&[])?;
            (Some(server), url)
        }
    };
    let slow = Client::connect(Config::from_url(&url)?).await?;
    let fast = Client::connect(Config::from_url(&url)?).await?;
    let mut plain = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;

    for fenced in [true, false] {
        let name = if fenced {
            "account-fenced"
        } else {
            "account-plain"
        };
        let key = format!("{name}:balance");
        let lease = Duration::from_millis(300);
        // With fencing, the store's checked write; without, a plain SET.
        let store = fast.get_fenced_store(key.as_str())?;
        let stale_store = slow.get_fenced_store(key.as_str())?;
        let lock = slow.get_fenced_lock(name)?;
        let (paused, old_token) = lock
            .try_lock_and_get_token(Duration::from_secs(1), Some(lease))
            .await?
            .ok_or("the lock was busy")?;
        println!("[{name}] holder A holds the lock with token {old_token}, then pauses");
        tokio::time::sleep(lease * 2).await;
        println!(
            "[{name}] A's lease has ended (A's guard says lost: {})",
            paused.is_lease_lost()
        );
        let (guard, token) = fast.get_fenced_lock(name)?.lock_and_get_token().await?;
        if fenced {
            store.write(token, "B's balance").await?;
        } else {
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("B's balance")
                .query_async(&mut plain)
                .await?;
        }
        println!("[{name}] holder B took the lock with token {token} and wrote");
        let applied = if fenced {
            let write = stale_store.write(old_token, "A's stale balance").await?;
            println!("[{name}] the store's fence is {}", write.fence());
            write.written()
        } else {
            let _: () = redis::cmd("SET")
                .arg(&key)
                .arg("A's stale balance")
                .query_async(&mut plain)
                .await?;
            true
        };
        let balance = if fenced {
            let (value, _fence) = store.read().await?.ok_or("nothing stored")?;
            String::from_utf8_lossy(&value).into_owned()
        } else {
            redis::cmd("GET").arg(&key).query_async(&mut plain).await?
        };
        println!(
            "[{name}] A wakes and writes with token {old_token}: {}; the balance is now {balance:?}",
            if applied { "applied" } else { "refused" }
        );
        if fenced {
            assert!(!applied, "the store let a stale token through");
        } else {
            println!("[{name}] without the token check, A's late write destroyed B's");
        }
        guard.unlock().await?;
        // A's hold is gone already: its unlock can only answer "not held".
        match paused.unlock().await {
            Err(e) if !e.is_not_held() => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}
