//! Fencing, played out: a holder pauses past its lease, another holder takes the
//! lock and writes, then the first wakes and writes with its old token. A store
//! that checks tokens refuses the late write; the same run without the check lets
//! it overwrite the newer holder's data.
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
use throwaway_server::ThrowawayServer;

/// The store: a value and the highest token it has accepted. The compare and the
/// write are one atomic step (a Lua script), as they must be.
const FENCED_WRITE: &str = "\
    local seen = tonumber(redis.call('get', KEYS[2]) or '0') \
    if tonumber(ARGV[1]) <= seen then return 0 end \
    redis.call('set', KEYS[2], ARGV[1]) \
    redis.call('set', KEYS[1], ARGV[2]) \
    return 1";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (server, url) = ThrowawayServer::start(&[])?;
            (Some(server), url)
        }
    };
    let slow = Client::connect(Config::from_url(&url)?).await?;
    let fast = Client::connect(Config::from_url(&url)?).await?;
    let mut store = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let fenced_write = redis::Script::new(FENCED_WRITE);

    for fenced in [true, false] {
        let name = if fenced {
            "account-fenced"
        } else {
            "account-plain"
        };
        let key = format!("{name}:balance");
        let token_key = format!("{name}:token");
        let lease = Duration::from_millis(300);
        // With fencing, the store's checked write; without, a plain SET.
        let script = if fenced {
            fenced_write.clone()
        } else {
            redis::Script::new("redis.call('set', KEYS[1], ARGV[2]) return 1")
        };
        let write = |token: u64, value: &'static str| {
            let mut invocation = script.key(&key);
            invocation.key(&token_key).arg(token).arg(value);
            invocation
        };
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
        let _: i64 = write(token, "B's balance").invoke_async(&mut store).await?;
        println!("[{name}] holder B took the lock with token {token} and wrote");
        let applied: i64 = write(old_token, "A's stale balance")
            .invoke_async(&mut store)
            .await?;
        let balance: String = redis::cmd("GET").arg(&key).query_async(&mut store).await?;
        println!(
            "[{name}] A wakes and writes with token {old_token}: {}; the balance is now {balance:?}",
            if applied == 1 { "applied" } else { "refused" }
        );
        if fenced {
            assert_eq!(applied, 0, "the store let a stale token through");
        } else {
            println!("[{name}] without the token check, A's late write destroyed B's");
        }
        guard.unlock().await?;
        let _ = paused.unlock().await;
    }
    Ok(())
}
