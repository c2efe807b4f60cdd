//! Interop with Java Redisson: a peer that speaks the wire protocol of
//! `redisson-wire.md` with its own hand-written commands contends with our locks.

use std::time::Duration;

use redis::AsyncCommands;
use tokio_stream::StreamExt;

use crate::support::{eventually, within, RedisServer, PROMPT};

/// A Redisson-style client: its own scripts, written here from the wire contract.
struct JavaPeer {
    conn: redis::aio::MultiplexedConnection,
    owner: String,
}

const JAVA_ACQUIRE: &str = r"
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";

const JAVA_RELEASE: &str = r"
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local n = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if n > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1";

impl JavaPeer {
    async fn new(server: &RedisServer) -> Self {
        JavaPeer {
            conn: server.admin().await,
            owner: "0b5d3d6e-8f0c-4d0e-9a63-3b1f3c0f9a11:1".into(),
        }
    }

    async fn try_acquire(&mut self, name: &str) -> Option<i64> {
        redis::Script::new(JAVA_ACQUIRE)
            .key(name)
            .arg(30_000)
            .arg(&self.owner)
            .invoke_async(&mut self.conn)
            .await
            .unwrap()
    }

    async fn release(&mut self, name: &str) -> Option<i64> {
        redis::Script::new(JAVA_RELEASE)
            .key(name)
            .key(format!("redisson_lock__channel:{{{name}}}"))
            .arg("0")
            .arg(30_000)
            .arg(&self.owner)
            .invoke_async(&mut self.conn)
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_waiter_wakes_on_a_java_unlock() {
    let server = RedisServer::start();
    let mut java = JavaPeer::new(&server).await;
    assert_eq!(java.try_acquire("interop").await, None);

    let client = server.client().await;
    let lock = client.get_lock("interop").unwrap();
    assert!(lock.try_lock().await.unwrap().is_none(), "Java holds it");
    let waiting = tokio::spawn(async move { lock.lock().await.unwrap() });
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_lock__channel:{interop}").await == 1
        })
        .await
    );
    let released = tokio::time::Instant::now();
    assert_eq!(java.release("interop").await, Some(1));
    let guard = within(PROMPT * 2, "waiter", waiting).await.unwrap();
    // Java's lease is 30 s: a prompt wake-up came from its unlock message.
    assert!(
        released.elapsed() < PROMPT,
        "woken {:?} after the release",
        released.elapsed()
    );
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_waiter_sees_our_layout_and_our_unlock_message() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("interop").unwrap();
    let guard = lock.lock().await.unwrap();
    let nested = guard.scope(lock.lock()).await.unwrap();

    // The layout is Redisson's: a hash with our owner field counting holds, and the
    // watchdog lease.
    let mut admin = server.admin().await;
    let fields: Vec<(String, i64)> = admin.hgetall("interop").await.unwrap();
    assert_eq!(fields.len(), 1);
    let (owner, count) = &fields[0];
    assert_eq!(count, &2);
    let (uuid, id) = owner.rsplit_once(':').unwrap();
    assert_eq!(uuid, client.id());
    assert_eq!(uuid.len(), 36);
    assert_eq!(id.parse::<u64>().unwrap(), guard.owner_id());
    let pttl: i64 = admin.pttl("interop").await.unwrap();
    assert!(pttl > 25_000 && pttl <= 30_000, "pttl {pttl}");

    // A Java waiter: fails, subscribes, waits for "0", then retries.
    let mut java = JavaPeer::new(&server).await;
    assert!(java.try_acquire("interop").await.unwrap() > 0);
    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub
        .subscribe("redisson_lock__channel:{interop}")
        .await
        .unwrap();

    nested.unlock().await.unwrap(); // still held: no message
    guard.unlock().await.unwrap();
    let message = within(Duration::from_secs(5), "unlock message", async {
        pubsub.on_message().next().await.unwrap()
    })
    .await;
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    assert_eq!(
        java.try_acquire("interop").await,
        None,
        "Java acquires after our unlock"
    );
    // And now we wait on Java's hold.
    assert!(lock.try_lock().await.unwrap().is_none());
    assert_eq!(java.release("interop").await, Some(1));
    assert!(server.keys().await.is_empty());
}
