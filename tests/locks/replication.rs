//! Replica sync (WAIT): the known unsafety of asynchronous replication shown, and
//! the sync option detecting it.

use std::time::Duration;

use redisson_locks::Client;

use crate::support::{eventually, RedisServer};

/// A primary and a replica of it, the replica's initial sync done.
async fn primary_with_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start_replica_of(&primary).await;
    (primary, replica)
}

/// A client of `primary`, whose replica sync turned itself on.
async fn synced(primary: &RedisServer) -> Client {
    let client = primary.client().await;
    assert_eq!(
        client.replica_sync(),
        1,
        "replica sync is on where replicas exist"
    );
    client
}

async fn detach(replica: &RedisServer) {
    let mut admin = replica.admin().await;
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut admin)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_no_replica_acknowledged_is_released_and_reported() {
    let (primary, replica) = primary_with_replica().await;
    let client = primary.client().await;
    assert_eq!(
        client.replica_sync(),
        1,
        "replica sync is on where replicas exist"
    );
    let lock = client.get_lock("synced").unwrap();
    // Acknowledged: a normal hold, on both.
    let guard = lock.lock().await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async {
            replica.keys().await == vec!["synced".to_owned()]
        })
        .await
    );
    guard.unlock().await.unwrap();

    // The replica stops following before the acquire: nobody acknowledges it.
    detach(&replica).await;
    let err = lock.lock().await.unwrap_err();
    assert!(err.is_not_replicated(), "{err:?}");
    assert!(
        primary.keys().await.is_empty(),
        "the unacknowledged hold was kept"
    );
    assert_eq!(client.renewed_holds(), 0);
    assert!(lock.try_lock().await.unwrap_err().is_not_replicated());
    assert!(primary.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sync_a_grant_lost_in_failover_lets_a_second_owner_in() {
    let (primary, replica) = primary_with_replica().await;
    let mut config = primary.config();
    config.replica_sync = Some(0);
    let first = Client::connect(config).await.unwrap();
    assert_eq!(first.replica_sync(), 0);
    // The grant does not reach the replica (replication lag, here a detached one)...
    detach(&replica).await;
    let theirs = first.get_lock("unsafe").unwrap().lock().await.unwrap();
    // ...and the replica is promoted: clients now reach it, where the lock is free.
    let second = replica.client().await;
    let ours = second.get_lock("unsafe").unwrap().try_lock().await.unwrap();
    assert!(
        ours.is_some(),
        "expected the known unsafety: two owners after a lost grant"
    );
    // Both believe they hold it. With replica sync on, the first acquire would have
    // failed with NotReplicated instead (previous test).
    assert!(!theirs.is_lease_lost());
    ours.unwrap().unlock().await.unwrap();
    theirs.unlock().await.unwrap();
}

/// Every release path sends the same commands: a dropped guard's release is
/// followed by a replica `WAIT`, as `unlock()`'s is (before, the drop sent
/// none), and so is a detached hold's release when the client closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guards_release_waits_for_replicas_as_unlock_does() {
    let (primary, _replica) = primary_with_replica().await;
    let client = synced(&primary).await;
    let lock = client.get_lock("parity").unwrap();

    let guard = lock.lock().await.unwrap();
    let before_unlock = primary.command_calls("wait").await;
    guard.unlock().await.unwrap();
    let by_unlock = primary.command_calls("wait").await - before_unlock;
    assert_eq!(by_unlock, 1, "unlock() sent {by_unlock} WAIT");

    let guard = lock.lock().await.unwrap();
    let before_drop = primary.command_calls("wait").await;
    drop(guard);
    assert!(
        eventually(Duration::from_secs(10), || async {
            primary.command_calls("wait").await > before_drop
        })
        .await,
        "a dropped guard's release sent no WAIT"
    );
    assert!(primary.keys().await.is_empty());

    let detached = client
        .get_lock("detached-parity")
        .unwrap()
        .with_task_owner();
    detached.lock().await.unwrap().detach();
    let before_close = primary.command_calls("wait").await;
    drop((lock, detached));
    client.close().await;
    assert!(primary.keys().await.is_empty());
    assert_eq!(
        primary.command_calls("wait").await - before_close,
        1,
        "the detached hold's release at close"
    );
}

/// A replica that stops acknowledging (frozen: its link stays up, nothing
/// answers) is found out: the acquire's WAIT, on a connection of its own,
/// follows a write on that connection (a WAIT counts its own connection's
/// writes, and a connection that wrote nothing would have been "acknowledged"
/// at once), so the acquire is given back and reported, never confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_confirms_no_acquire() {
    let (primary, replica) = primary_with_replica().await;
    let client = synced(&primary).await;
    let lock = client.get_lock("frozen-replica").unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    replica.pause();
    let err = lock.lock().await.unwrap_err();
    replica.resume();
    assert!(err.is_not_replicated(), "{err:?}");
    assert!(
        primary.keys().await.is_empty(),
        "the unconfirmed hold was kept"
    );
}

/// While one task's acquire waits for a frozen replica's acknowledgement, the
/// client's other commands are not queued behind its WAIT (which once went on
/// the client's one connection, and stalled every task for the sync's whole
/// timeout): another task's query is answered while that WAIT still waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_wait_blocks_no_other_task_of_the_client() {
    let (primary, replica) = primary_with_replica().await;
    let mut config = primary.config();
    config.replica_sync_timeout = Duration::from_secs(5);
    config.timeout = Duration::from_secs(10);
    let client = Client::connect(config).await.unwrap();
    let other = client.get_lock("other-lock").unwrap();
    let held = other.lock().await.unwrap();
    replica.pause();
    let waiting = {
        let lock = client.get_lock("waits-for-replica").unwrap();
        tokio::spawn(async move { lock.lock().await.map(drop) })
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            primary.blocked_clients().await == 1
        })
        .await,
        "the acquire's WAIT"
    );
    assert!(other.is_locked().await.unwrap());
    assert!(other.remain_time_to_live().await.is_ok());
    assert!(
        !waiting.is_finished(),
        "the WAIT ended before the other task's queries were answered: nothing is tested"
    );
    replica.resume();
    waiting.await.unwrap().unwrap();
    held.unlock().await.unwrap();
}

/// Confirmations asked together go out together: 32 tasks acquiring 32
/// locks at once are each confirmed (each hold reached the replica), by fewer
/// WAITs than holds: those asked while one WAIT was out share the next, which
/// covers every hold fenced before it (one WAIT each made 32 round trips to
/// the replica, one after another on one connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_asked_together_share_a_wait() {
    let (primary, replica) = primary_with_replica().await;
    let client = synced(&primary).await;
    // The WAITs' connection, opened by a first confirmation.
    let first = client.get_lock("first").unwrap();
    first.lock().await.unwrap().unlock().await.unwrap();
    let before = primary.command_calls("wait").await;
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let lock = client.get_lock(format!("together-{i}")).unwrap();
            tokio::spawn(async move { lock.lock().await.unwrap() })
        })
        .collect();
    let mut guards = Vec::new();
    for task in tasks {
        guards.push(task.await.unwrap());
    }
    let waits = primary.command_calls("wait").await - before;
    assert!(waits < 16, "{waits} WAITs for 32 holds");
    assert!(
        eventually(Duration::from_secs(10), || async {
            replica.keys().await.len() == 32
        })
        .await,
        "every hold on the replica"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}
