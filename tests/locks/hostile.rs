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
    // (`*2 :1 :2` is the reentrant lock's busy reply with its place in line.)
    for reply in [
        "+surprise\r\n",
        "*3\r\n:1\r\n:2\r\n:3\r\n",
        ",3.5\r\n",
        "#t\r\n",
    ] {
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

/// `EVAL` of `return <n>` for n in `range`: distinct ad-hoc scripts from
/// another client, as a busy shared server sees them.
async fn eval_many(admin: &mut redis::aio::MultiplexedConnection, range: std::ops::Range<u32>) {
    for n in range {
        let _: i64 = redis::cmd("EVAL")
            .arg(format!("return {n}"))
            .arg(0)
            .query_async(admin)
            .await
            .unwrap();
    }
}

/// Scripts are pinned with SCRIPT LOAD: a thousand ad-hoc EVALs from another
/// client, which since Redis 7.4 evict EVAL-cached scripts (500 kept), leave
/// this crate's scripts in place, so neither the client that was connected
/// nor a new one meets a NOSCRIPT. After SCRIPT FLUSH one call falls back to
/// EVAL (counted), and the scripts are loaded again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_scripts_outlive_the_eval_cache_and_a_flush_costs_one_fallback() {
    let server = RedisServer::start();
    let mut admin = server.admin().await;
    let before = server.client().await;
    let names = ["pinned", "pinned-fair"];
    let locks = |client: &Client| {
        [
            client.get_lock(names[0]).unwrap(),
            client.get_fair_lock(names[1]).unwrap(),
        ]
    };
    for lock in locks(&before) {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    // Whether this server evicts what EVAL cached: a marker script, then the flood.
    let marker = "return 'marker'";
    let _: String = redis::cmd("EVAL")
        .arg(marker)
        .arg(0)
        .query_async(&mut admin)
        .await
        .unwrap();
    eval_many(&mut admin, 0..1_000).await;
    let marker_sha = redis::Script::new(marker).get_hash().to_owned();
    let kept: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&marker_sha)
        .query_async(&mut admin)
        .await
        .unwrap();
    eprintln!(
        "{:?}: an EVAL-cached script after 1,000 others: {}",
        crate::support::server_version(),
        if kept[0] { "kept" } else { "evicted" }
    );
    let after = server.client().await;
    for client in [&before, &after] {
        for lock in locks(client) {
            lock.lock().await.unwrap().unlock().await.unwrap();
        }
        assert_eq!(client.script_fallbacks(), 0, "no NOSCRIPT after the flood");
    }

    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    let lock = before.get_lock(names[0]).unwrap();
    let guard = lock.lock().await.unwrap();
    // The acquire fell back (a renewal racing it might too).
    assert!(
        before.script_fallbacks() >= 1,
        "the acquire fell back to EVAL"
    );
    // Every script is loaded again in the background: soon a fair lock's
    // acquire and release, never sent since the flush, need no EVAL. (Calls
    // that race the reload may fall back too: they are counted.)
    let reloaded = crate::support::eventually(Duration::from_secs(10), || async {
        let fair = locks(&before)[1].clone();
        let calls = server.command_calls("eval").await;
        fair.lock().await.unwrap().unlock().await.unwrap();
        server.command_calls("eval").await == calls
    })
    .await;
    assert!(reloaded, "the scripts were loaded again");
    guard.unlock().await.unwrap();
    // From here on nothing falls back.
    let settled = before.script_fallbacks();
    for lock in locks(&before) {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    assert_eq!(before.script_fallbacks(), settled);
    assert!(server.keys().await.is_empty());
}
