//! Recorded histories checked against Jepsen's lock models
//! (`support/history.rs`): each checker first fails on a violating history
//! of its kind, then real runs of this crate's locks and permits, recorded
//! by every task, pass.

use std::sync::Arc;
use std::time::Duration;

use crate::support::history::{
    check, merge, FencedMutex, Mutex, Op, Operation, Outcome, Permits, Recorder, ReentrantMutex,
};
use crate::support::{within, RedisServer};

/// `op` by `owner` on lock `l`, invoked at `from`, ended at `to` (ms).
fn op(
    owner: &str,
    what: Op,
    outcome: Outcome,
    value: Option<u64>,
    from: u64,
    to: u64,
) -> Operation {
    Operation {
        process: "p".into(),
        owner: owner.into(),
        lock: "l".into(),
        op: what,
        outcome,
        value,
        invoked_ns: from,
        completed_ns: if outcome == Outcome::Unknown {
            u64::MAX
        } else {
            to
        },
    }
}

use Op::{Acquire, PermitAcquire, PermitRelease, Release};
use Outcome::{Ok as Done, Refused, Unknown};

#[test]
fn the_mutex_checker_fails_on_two_holders_and_passes_what_an_order_explains() {
    // a holds [0, 10); b's acquire [5, 6) succeeds inside: two holders.
    let two = [
        op("a", Acquire, Done, None, 0, 1),
        op("b", Acquire, Done, None, 5, 6),
        op("a", Release, Done, None, 9, 10),
    ];
    assert!(check(&Mutex, &two).is_err());
    // Overlapping calls: b's acquire [8, 12) may take effect after a's release [9, 10).
    let fine = [
        op("a", Acquire, Done, None, 0, 1),
        op("b", Acquire, Done, None, 8, 12),
        op("a", Release, Done, None, 9, 10),
        op("b", Release, Done, None, 13, 14),
    ];
    assert_eq!(check(&Mutex, &fine), Ok(()));
    // A release by a non-holder that succeeded: impossible.
    assert!(check(
        &Mutex,
        &[
            op("a", Acquire, Done, None, 0, 1),
            op("b", Release, Done, None, 2, 3)
        ]
    )
    .is_err());
    // A refused acquire while nobody could hold it: impossible.
    assert!(check(&Mutex, &[op("a", Acquire, Refused, None, 0, 1)]).is_err());
    // An acquire of unknown outcome may never have happened: b's later grant is fine.
    let unknown = [
        op("a", Acquire, Unknown, None, 0, 1),
        op("b", Acquire, Done, None, 5, 6),
    ];
    assert_eq!(check(&Mutex, &unknown), Ok(()));
}

#[test]
fn the_reentrant_checker_counts_holds() {
    let nested = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Acquire, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
        op("b", Acquire, Refused, None, 6, 7),
        op("a", Release, Done, None, 8, 9),
        op("b", Acquire, Done, None, 10, 11),
    ];
    assert_eq!(check(&ReentrantMutex, &nested), Ok(()));
    // One acquire, two successful releases.
    let over = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
    ];
    assert!(check(&ReentrantMutex, &over).is_err());
    // Freed after the first of two releases: b got in too early.
    let early = [
        op("a", Acquire, Done, None, 0, 1),
        op("a", Acquire, Done, None, 2, 3),
        op("a", Release, Done, None, 4, 5),
        op("b", Acquire, Done, None, 6, 7),
    ];
    assert!(check(&ReentrantMutex, &early).is_err());
}

#[test]
fn the_fenced_checkers_want_every_token_above_every_earlier_one() {
    let rising = [
        op("a", Acquire, Done, Some(1), 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("b", Acquire, Done, Some(2), 4, 5),
        op("b", Release, Done, None, 6, 7),
    ];
    assert_eq!(check(&FencedMutex { reentrant: false }, &rising), Ok(()));
    let falling = [
        op("a", Acquire, Done, Some(5), 0, 1),
        op("a", Release, Done, None, 2, 3),
        op("b", Acquire, Done, Some(4), 4, 5),
    ];
    assert!(check(&FencedMutex { reentrant: false }, &falling).is_err());
    // Re-entry draws a new, larger token (Redisson's rule); the same one twice fails.
    let reentry = |second: u64| {
        [
            op("a", Acquire, Done, Some(7), 0, 1),
            op("a", Acquire, Done, Some(second), 2, 3),
        ]
    };
    assert_eq!(check(&FencedMutex { reentrant: true }, &reentry(8)), Ok(()));
    assert!(check(&FencedMutex { reentrant: true }, &reentry(7)).is_err());
    assert!(
        check(&FencedMutex { reentrant: false }, &reentry(8)).is_err(),
        "not reentrant"
    );
}

#[test]
fn the_permits_checker_never_lets_more_than_n_out() {
    let three = [
        op("a", PermitAcquire, Done, None, 0, 1),
        op("b", PermitAcquire, Done, None, 0, 1),
        op("c", PermitAcquire, Done, None, 0, 1),
    ];
    assert!(check(&Permits { n: 2 }, &three).is_err());
    assert_eq!(check(&Permits { n: 3 }, &three), Ok(()));
    // A release by an owner holding none.
    assert!(check(
        &Permits { n: 2 },
        &[op("a", PermitRelease, Done, None, 0, 1)]
    )
    .is_err());
    let turns = [
        op("a", PermitAcquire, Done, None, 0, 1),
        op("b", PermitAcquire, Refused, None, 2, 3),
        op("a", PermitRelease, Done, None, 4, 5),
        op("b", PermitAcquire, Done, None, 6, 7),
    ];
    assert_eq!(check(&Permits { n: 1 }, &turns), Ok(()));
}

/// Three clients, four tasks each, recording every call: nested holds of a
/// reentrant lock, fenced acquisitions, permits of a two-permit semaphore.
/// The merged history satisfies the reentrant, fenced and permits models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_runs_of_every_model_are_linearizable() {
    let server = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("rl-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, "test"));
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(server.client().await);
    }
    let slots = clients[0].get_semaphore("slots").unwrap();
    assert!(slots.try_set_permits(2).await.unwrap());
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..4u64 {
            let (client, recorder) = (client.clone(), recorder.clone());
            let owner = format!("c{c}t{t}");
            tasks.push(tokio::spawn(async move {
                let lock = client.get_lock("reentrant").unwrap().with_owner_id(100 + t);
                let fenced = client.get_fenced_lock("fenced").unwrap();
                let slots = client.get_semaphore("slots").unwrap();
                for round in 0..6 {
                    let call = recorder.invoke(&owner, "reentrant", Acquire);
                    let outer = lock.lock().await.unwrap();
                    call.end(Done, None);
                    let call = recorder.invoke(&owner, "reentrant", Acquire);
                    let inner = outer.scope(lock.lock()).await.unwrap();
                    call.end(Done, None);
                    for guard in [inner, outer] {
                        let call = recorder.invoke(&owner, "reentrant", Release);
                        guard.unlock().await.unwrap();
                        call.end(Done, None);
                    }

                    let call = recorder.invoke(&owner, "fenced", Acquire);
                    let (guard, token) = fenced.lock_and_get_token().await.unwrap();
                    call.end(Done, Some(token));
                    let call = recorder.invoke(&owner, "fenced", Release);
                    guard.unlock().await.unwrap();
                    call.end(Done, None);

                    let call = recorder.invoke(&owner, "slots", PermitAcquire);
                    if round % 2 == 0 {
                        slots.acquire().await.unwrap();
                        call.end(Done, None);
                    } else if slots.try_acquire().await.unwrap() {
                        call.end(Done, None);
                    } else {
                        call.end(Refused, None);
                        continue;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let call = recorder.invoke(&owner, "slots", PermitRelease);
                    slots.release().await.unwrap();
                    call.end(Done, None);
                }
            }));
        }
    }
    within(Duration::from_secs(120), "the recorded run", async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
    let history = merge(&dir);
    let on = |lock: &str| -> Vec<Operation> {
        history.iter().filter(|o| o.lock == lock).cloned().collect()
    };
    assert_eq!(on("reentrant").len(), 12 * 6 * 4);
    assert_eq!(check(&ReentrantMutex, &on("reentrant")), Ok(()));
    assert_eq!(
        check(&FencedMutex { reentrant: false }, &on("fenced")),
        Ok(())
    );
    assert_eq!(check(&Permits { n: 2 }, &on("slots")), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}
