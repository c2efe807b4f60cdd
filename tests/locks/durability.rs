//! The durability modes (`Config::durability`): each server is asked what it
//! can give, at connect time and again after its connection changed or it
//! refused, and a mode it cannot give is a clear, typed error naming the fix,
//! never the server's "unknown command".

use std::time::Duration;

use redisson_locks::{Client, Durability, Error};

use crate::support::{eventually, server_has, RedisServer};

/// `ACL SETUSER default <rule>` on `server`.
async fn acl(server: &RedisServer, rule: &str) {
    let mut admin = server.admin().await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg(rule)
        .query_async(&mut admin)
        .await
        .unwrap();
}

/// `CONFIG SET name value` on `server`.
async fn config_set(server: &RedisServer, name: &str, value: &str) {
    let mut admin = server.admin().await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(&mut admin)
        .await
        .unwrap();
}

async fn connect(
    server: &RedisServer,
    durability: Durability,
    replicas: Option<u32>,
) -> Result<Client, Error> {
    let mut config = server.config();
    config.durability = durability;
    config.replica_sync = replicas;
    Client::connect(config).await
}

/// The bytes of the server's append-only files (one file before 7.0, a
/// directory of them since).
fn append_only_files(server: &RedisServer) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut read = |path: &std::path::Path| {
        if let Ok(content) = std::fs::read(path) {
            bytes.extend(content);
        }
    };
    read(&server.dir().join("appendonly.aof"));
    if let Ok(entries) = std::fs::read_dir(server.dir().join("appendonlydir")) {
        for entry in entries.flatten() {
            read(&entry.path());
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_the_server_cannot_give_is_refused_at_connect_with_the_reason() {
    let plain = RedisServer::start_with(&["--appendonly", "no"]);
    if !server_has(7, 2, "WAITAOF") {
        // Before 7.2 there is no WAITAOF: both file modes are refused, with
        // the server named, and the default still connects.
        for mode in [Durability::Aof, Durability::ReplicaAof] {
            let err = connect(&plain, mode, Some(1)).await.unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::Config(_)), "{err:?}");
            assert!(text.contains("WAITAOF") && text.contains("7.2"), "{text}");
            assert!(!text.contains("unknown command"), "{text}");
        }
        let client = connect(&plain, Durability::Replicas, None).await.unwrap();
        assert_eq!(client.durability(), None, "no replica: nothing to wait for");
        return;
    }
    // No append-only file to wait for.
    let err = connect(&plain, Durability::Aof, Some(0)).await.unwrap_err();
    assert!(err.to_string().contains("appendonly"), "{err}");
    // A file the server never reports an fsync of (redisson#6920).
    let never = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "no"]);
    let err = connect(&never, Durability::Aof, Some(0)).await.unwrap_err();
    assert!(err.to_string().contains("appendfsync"), "{err}");
    // Once a second: longer than the default replica sync timeout.
    let each_second =
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let err = connect(&each_second, Durability::Aof, Some(0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("everysec"), "{err}");
    let mut patient = each_second.config();
    patient.durability = Durability::Aof;
    patient.replica_sync = Some(0);
    patient.replica_sync_timeout = Duration::from_millis(1_500);
    patient.timeout = Duration::from_millis(4_500);
    let client = Client::connect(patient).await.unwrap();
    assert_eq!(client.durability(), Some(Durability::Aof));
    let guard = client
        .get_lock("each-second")
        .unwrap()
        .lock()
        .await
        .unwrap();
    guard.unlock().await.unwrap();
}

/// A server that fsyncs every write to its append-only file and a client
/// asking for `Durability::Aof` on it; none before 7.2 (no WAITAOF).
async fn fsyncing_every_write() -> Option<(RedisServer, Client)> {
    if !server_has(7, 2, "WAITAOF") {
        return None;
    }
    let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let client = connect(&server, Durability::Aof, Some(0)).await.unwrap();
    Some((server, client))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aof_hold_is_in_the_primarys_file_before_the_acquire_returns() {
    let Some((server, client)) = fsyncing_every_write().await else {
        return;
    };
    assert_eq!(client.durability(), Some(Durability::Aof));
    let name = "in-the-file-7f3a";
    let guard = client.get_lock(name).unwrap().lock().await.unwrap();
    let file = append_only_files(&server);
    assert!(
        file.windows(name.len()).any(|w| w == name.as_bytes()),
        "the hold is not in the append-only file"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_keeping_its_file_fails_acquires_clearly_until_it_keeps_it_again() {
    let Some((server, client)) = fsyncing_every_write().await else {
        return;
    };
    let lock = client.get_lock("file-kept").unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();

    // The server's answer would be "ERR WAITAOF cannot be used when numlocal
    // is set but appendonly is disabled".
    config_set(&server, "appendonly", "no").await;
    let err = lock.lock().await.unwrap_err();
    assert!(err.is_durability_unavailable(), "{err:?}");
    assert!(err.to_string().contains("appendonly"), "{err}");
    assert!(server.keys().await.is_empty(), "the refused hold was kept");
    assert!(lock
        .try_lock()
        .await
        .unwrap_err()
        .is_durability_unavailable());
    assert!(server.keys().await.is_empty());

    config_set(&server, "appendonly", "yes").await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            match lock.try_lock().await {
                Ok(Some(guard)) => guard.unlock().await.is_ok(),
                _ => false,
            }
        })
        .await,
        "the file is kept again, and acquires still fail"
    );
    assert_eq!(client.durability(), Some(Durability::Aof));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_the_acl_forbids_is_a_clear_error_for_an_explicit_count() {
    let primary = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&primary).await;
    let client = connect(&primary, Durability::Replicas, Some(1))
        .await
        .unwrap();
    let lock = client.get_lock("acl-wait").unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();

    acl(&primary, "-wait").await;
    let err = lock.lock().await.unwrap_err();
    assert!(err.is_durability_unavailable(), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("ACL") && text.contains("WAIT"), "{text}");
    assert!(primary.keys().await.is_empty(), "the refused hold was kept");

    acl(&primary, "+wait").await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            match lock.try_lock().await {
                Ok(Some(guard)) => guard.unlock().await.is_ok(),
                _ => false,
            }
        })
        .await,
        "WAIT is allowed again, and acquires still fail"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_turns_sync_off_where_wait_is_refused_and_on_again_after_a_reconnect() {
    let primary = RedisServer::start();
    let _replica = RedisServer::start_replica_of(&primary).await;
    acl(&primary, "-wait").await;
    let client = primary.client().await;
    assert_eq!(client.durability(), None);
    assert!(
        client.warnings().iter().any(|w| w.contains("refuses WAIT")),
        "{:?}",
        client.warnings()
    );
    let lock = client.get_lock("default-refused").unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();

    // Allowed again, and the connection replaced (as after a failover): the
    // server is asked again, and sync is back on.
    acl(&primary, "+wait").await;
    assert!(primary.kill_lock_connections().await > 0);
    assert!(
        eventually(Duration::from_secs(10), || async {
            if let Ok(guard) = lock.lock().await {
                let _ = guard.unlock().await;
            }
            client.durability() == Some(Durability::Replicas)
        })
        .await,
        "sync stayed off after the reconnect"
    );
    assert_eq!(client.replica_sync(), 1);
}
