//! Hostile conditions: missing permissions, flushed scripts, replies of the wrong
//! shape, a server that may evict lock keys. Each gives a typed error (or a
//! warning), never a panic, a retry loop or a hang, and leaves nothing behind.

use std::time::Duration;

use redisson_locks::{Client, Config};

use crate::support::fake_resp::FakeRedis;
use crate::support::{within, RedisServer};

async fn acl(server: &RedisServer, rules: &[&str]) {
    let mut admin = server.admin().await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER");
    for rule in rules {
        cmd.arg(*rule);
    }
    let _: () = cmd.query_async(&mut admin).await.unwrap();
}

async fn connect_as(server: &RedisServer, user: &str) -> Client {
    let mut config = server.config();
    config.username = Some(user.into());
    config.password = Some("pw".into());
    Client::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_eval_gets_a_typed_error_at_once() {
    let server = RedisServer::start();
    acl(
        &server,
        &[
            "noeval", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval", "-script",
        ],
    )
    .await;
    let client = connect_as(&server, "noeval").await;
    let lock = client.get_lock("acl").unwrap();
    server.reset_stats().await;
    let err = within(Duration::from_secs(10), "lock without EVAL", lock.lock())
        .await
        .unwrap_err();
    assert!(err.is_redis() && !err.is_transient(), "{err:?}");
    assert!(err.to_string().to_uppercase().contains("NOPERM"), "{err}");
    assert_eq!(client.renewed_holds(), 0);
    assert_eq!(client.subscribed_channels(), 0);
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_channel_gets_a_typed_error_when_it_must_wait() {
    let server = RedisServer::start();
    acl(
        &server,
        &["nochannel", "on", ">pw", "~*", "resetchannels", "+@all"],
    )
    .await;
    let holder = server.client().await;
    let held = holder
        .get_lock("acl-channel")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let client = connect_as(&server, "nochannel").await;
    let lock = client.get_lock("acl-channel").unwrap();
    // Uncontended use needs no channel...
    assert!(lock.try_lock().await.unwrap().is_none());
    // ...waiting does, and is refused at once, not retried.
    let err = within(
        Duration::from_secs(10),
        "wait without the channel",
        lock.lock(),
    )
    .await
    .unwrap_err();
    assert!(err.is_redis() && !err.is_transient(), "{err:?}");
    assert_eq!(client.subscribed_channels(), 0);
    assert_eq!(client.renewed_holds(), 0);
    held.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_flush_between_calls_is_transparent() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    for lock in [
        client.get_lock("flushed").unwrap(),
        client.get_fair_lock("flushed-fair").unwrap(),
        client
            .get_read_write_lock("flushed-rw")
            .unwrap()
            .read_lock(),
        client
            .get_read_write_lock("flushed-rw")
            .unwrap()
            .write_lock(),
    ] {
        let guard = lock.lock().await.unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
        guard.unlock().await.unwrap();
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut admin)
            .await
            .unwrap();
        let guard = lock.lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_of_an_unexpected_shape_are_typed_errors() {
    for reply in ["+surprise\r\n", "*2\r\n:1\r\n:2\r\n", ",3.5\r\n", "#t\r\n"] {
        let fake = FakeRedis::start(reply).await;
        let mut config = Config::from_url(&fake.url()).unwrap();
        config.timeout = Duration::from_secs(2);
        let client = within(
            Duration::from_secs(10),
            "connect to the fake",
            Client::connect(config),
        )
        .await
        .unwrap();
        for lock in [
            client.get_lock("odd").unwrap(),
            client.get_fair_lock("odd").unwrap(),
            client.get_read_write_lock("odd").unwrap().read_lock(),
        ] {
            let err = within(Duration::from_secs(10), "lock on the fake", lock.lock())
                .await
                .unwrap_err();
            assert!(err.is_unexpected_reply(), "{reply:?}: {err:?}");
            assert!(lock.unlock().await.unwrap_err().is_unexpected_reply());
            assert!(lock.try_lock().await.unwrap_err().is_unexpected_reply());
        }
        assert_eq!(client.renewed_holds(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_may_evict_lock_keys_is_reported_at_connect() {
    let evicting = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let client = evicting.client().await;
    assert_eq!(client.warnings().len(), 1);
    assert!(client.warnings()[0].contains("allkeys-lru"));
    let safe = RedisServer::start();
    assert!(safe.client().await.warnings().is_empty());
}
