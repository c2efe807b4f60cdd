//! What a cluster does all day, under load: slots move (a reshard) and a
//! primary hands over gracefully (an upgrade) while every lock kind is held,
//! renewed and waited on. The checks are the campaigns' (`histories.rs`):
//! never two holders, every waiter woken within a bound once its lock is
//! free, and, for the cluster, no hold lost while its holder renews and no
//! sharded subscription left on a node that no longer serves its slot.

use std::sync::Arc;
use std::time::Duration;

use super::histories::{
    campaign_kind, campaign_seed, check_or_keep, check_progress, keep, recorded_hold,
    set_campaign_counts, CampaignTasks, CUTS_SETTLE, CUTS_STALL_BOUND,
};
use crate::support::cluster::RedisCluster;
use crate::support::history::{check, merge, Mutex, Operation, Recorder};
use crate::support::progress::Admits;
use crate::support::{eventually, within};

/// Locks held for the whole campaign by one client, renewed by its watchdog.
const HELD: usize = 1_000;

/// Fair waiters queued on one lock while its slot moves.
const QUEUED: usize = 100;

/// The fair lock they queue on.
const QUEUE: &str = "camp-queue";

/// How long each queued waiter keeps the lock: the queue drains over about
/// two seconds, while the later slots move.
const QUEUED_HOLD: Duration = Duration::from_millis(20);

/// The watchdog's lease: a renewal every 3.3 s, so a hold whose renewals
/// stopped for 10 s is gone, and the check at the end sees it (the default is
/// 30 s; a client whose link went silent needs a reply timeout, 2 s here, to
/// tell it and replace the link).
const WATCHDOG: Duration = Duration::from_secs(10);

/// Pause between two keys of a slot moved the classic way: clients meet
/// `ASK` and `TRYAGAIN` meanwhile.
const KEY_PACE: Duration = Duration::from_millis(20);

/// Reshard and graceful failover under load, on a 3 + 3 cluster.
///
/// The load: [`HELD`] locks held and renewed; [`QUEUED`] fair waiters
/// queued on [`QUEUE`] behind a holder; the campaign's tasks (three per
/// client, three clients) taking every kind in turn (reentrant, fenced,
/// fair, read-write, the three semaphores, the latch), so there are read-write
/// and semaphore waiters at every move.
///
/// The faults, in order: the slots of every campaign lock, of the queue
/// (twice: queued, then draining) and of 20 held locks move to another
/// primary (`CLUSTER MIGRATESLOTS` on Valkey 9, else `SETSLOT` and key by
/// key `MIGRATE`); then the primary serving the fair lock fails over
/// gracefully (`CLUSTER FAILOVER` on its replica).
///
/// The clients re-check a wait only every 40 s (the suite's), so a waiter
/// that missed its wake-up shows as a stall past the bound rather than
/// being saved by a re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reshard_and_a_graceful_failover_under_load_keep_every_lock_safe_and_live() {
    if !crate::support::server_has(7, 0, "sharded pub/sub") {
        return;
    }
    let seed = campaign_seed("cluster campaign");
    let cluster = Arc::new(RedisCluster::start());
    assert!(
        cluster
            .wait_until_replicas_synced(Duration::from_secs(30))
            .await,
        "the replicas never synced"
    );
    let dir = std::env::temp_dir().join(format!("rl-cluster-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let recorder = Arc::new(Recorder::create(&dir, "cluster"));
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut config = cluster.config();
        config.lock_watchdog_timeout = WATCHDOG;
        clients.push(redisson_locks::Client::connect(config).await.unwrap());
    }
    set_campaign_counts(&clients[0]).await;

    let held = hold_many(&clients[0]).await;
    let queue_holder = clients[1]
        .get_fair_lock(QUEUE)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let queued = queue_up(&clients, &recorder);
    let queued_now =
        || async { clients.iter().map(|c| c.waiting_for(QUEUE)).sum::<usize>() == QUEUED };
    assert!(
        eventually(Duration::from_secs(30), queued_now).await,
        "the queue's waiters never all waited"
    );
    let tasks = CampaignTasks::start(&clients, 3, &recorder, |c, t| format!("c{c}t{t}"));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The queue's slot moves while all its waiters wait, and their
    // subscriptions must follow it; then its holder lets go, and it moves
    // again while the queue drains.
    let mut moved = Vec::new();
    moved.push(move_to_next_primary(&cluster, QUEUE).await);
    assert_subscriptions_follow(&cluster, QUEUE).await;
    within(
        Duration::from_secs(10),
        "the queue's release",
        queue_holder.unlock(),
    )
    .await
    .unwrap();
    moved.push(move_to_next_primary(&cluster, QUEUE).await);
    for name in [
        "camp-lock",
        "camp-fenced",
        "camp-fair",
        "camp-rw",
        "camp-slots",
        "camp-pes",
        "camp-fair-slots",
        "camp-latch",
    ] {
        moved.push(move_to_next_primary(&cluster, name).await);
    }
    for i in 0..20 {
        moved.push(move_to_next_primary(&cluster, &format!("held-{}", i * 50)).await);
    }
    let handed_over = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster.fail_over_gracefully("camp-fair"))
            .await
            .unwrap()
    };
    assert_no_stray_subscriptions(&cluster);
    // The load goes on a while on the new primary.
    tokio::time::sleep(Duration::from_secs(2)).await;

    tasks
        .stop(Duration::from_secs(60), "the campaign's tasks")
        .await;
    within(Duration::from_secs(60), "the queue's waiters", async {
        for waiter in queued {
            waiter.await.unwrap();
        }
    })
    .await;
    assert_holds_kept(held).await;
    assert_no_stray_subscriptions(&cluster);
    // Nobody waits any more: every subscription ends (an unsubscription
    // may linger a second to go out with others).
    let ended = eventually(Duration::from_secs(10), || async {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster.shard_subscriptions().is_empty())
            .await
            .unwrap()
    })
    .await;
    assert!(
        ended,
        "subscriptions left with nobody waiting: {:?}",
        cluster.shard_subscriptions()
    );

    let history = merge(&dir);
    eprintln!(
        "cluster campaign seed {seed}: {} operations; {} slots moved ({}), node {handed_over} took over gracefully; {}",
        history.len(),
        moved.len(),
        if cluster.has_atomic_slot_migration() {
            "CLUSTER MIGRATESLOTS"
        } else {
            "SETSLOT and MIGRATE, key by key"
        },
        redirections(&cluster),
    );
    let kept = format!("cluster-{seed}");
    check_or_keep(&history, &dir, &kept, &format!("cluster seed {seed}"));
    check_queue(&history, &dir, &kept);
    check_progress(
        &history,
        |lock| match lock {
            QUEUE => Some((Admits::One, "fair, 100 queued")),
            lock => campaign_kind(lock),
        },
        (&dir, &kept, &format!("cluster campaign seed {seed}")),
        CUTS_SETTLE,
        CUTS_STALL_BOUND,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// [`HELD`] locks `held-0`, `held-1`, … taken by `client` with no lease (the
/// watchdog renews them), spread over every primary.
async fn hold_many(client: &redisson_locks::Client) -> Vec<redisson_locks::LockGuard> {
    let mut held = Vec::with_capacity(HELD);
    for chunk in (0..HELD).collect::<Vec<_>>().chunks(100) {
        let taking = chunk.iter().map(|i| {
            let lock = client.get_lock(format!("held-{i}")).unwrap();
            async move { lock.lock().await.unwrap() }
        });
        held.extend(futures_join_all(taking).await);
    }
    held
}

/// Awaits every future of `futures` at once (tasks on the runtime).
async fn futures_join_all<T: Send + 'static>(
    futures: impl Iterator<Item = impl std::future::Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

/// [`QUEUED`] tasks, spread over `clients`, each waiting for [`QUEUE`] with
/// no bound, keeping it [`QUEUED_HOLD`], recorded.
fn queue_up(
    clients: &[redisson_locks::Client],
    recorder: &Arc<Recorder>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..QUEUED)
        .map(|i| {
            let lock = clients[i % clients.len()].get_fair_lock(QUEUE).unwrap();
            let recorder = recorder.clone();
            tokio::spawn(async move {
                let taking = async {
                    let guard = lock.lock().await?;
                    tokio::time::sleep(QUEUED_HOLD).await;
                    Ok(Some((guard, None)))
                };
                recorded_hold(&recorder, &format!("q{i}"), QUEUE, taking).await;
            })
        })
        .collect()
}

/// Moves the slot of `name`'s keys to the primary after the one serving it
/// (off the runtime's workers); the slot.
async fn move_to_next_primary(cluster: &Arc<RedisCluster>, name: &str) -> u16 {
    let cluster = cluster.clone();
    let key = format!("{{{name}}}");
    tokio::task::spawn_blocking(move || {
        let slot = cluster.slot_of(&key);
        let primaries = cluster.primaries();
        let from = cluster.primary_of_slot(slot);
        let at = primaries.iter().position(|&p| p == from).unwrap_or(0);
        cluster.move_slot(slot, primaries[(at + 1) % primaries.len()], KEY_PACE);
        assert_no_stray_subscriptions(&cluster);
        slot
    })
    .await
    .unwrap()
}

/// No node keeps a sharded subscription to a channel whose slot its shard
/// does not serve: the server ends those itself when a slot leaves (pushing
/// `sunsubscribe`), so one left would be a client subscribed where the slot
/// used to live, hearing nothing. A subscription on a replica of the
/// serving primary hears every message (a shard's messages reach all its
/// nodes): after a graceful failover, a client's subscription connection
/// may still take the old primary, now a replica, for the primary (it
/// sends nothing that would be redirected) and subscribe there.
fn assert_no_stray_subscriptions(cluster: &RedisCluster) {
    let strays = stray_subscriptions(cluster);
    assert!(
        strays.is_empty(),
        "sharded subscriptions on nodes that do not serve their slots: {strays:?}"
    );
}

/// The sharded subscriptions on nodes outside the shard that serves their
/// slots: (node, channel).
fn stray_subscriptions(cluster: &RedisCluster) -> Vec<(usize, String)> {
    cluster
        .shard_subscriptions()
        .into_iter()
        .filter(|(node, channel)| !cluster.shard_of(channel).contains(node))
        .collect()
}

/// The waiters of `name` that wait in Redis (one per client: the others wait
/// in their client's line) are subscribed again on the node that serves the
/// slot now, within a bound (the re-subscription after a `sunsubscribe`,
/// and the second one a second later).
async fn assert_subscriptions_follow(cluster: &Arc<RedisCluster>, name: &str) {
    let tag = format!("{{{name}}}");
    let followed = eventually(Duration::from_secs(5), || async {
        let cluster = cluster.clone();
        let tag = tag.clone();
        tokio::task::spawn_blocking(move || {
            let home = cluster.primary_for(&tag);
            let channels = cluster.shard_subscriptions();
            let on_home = channels
                .iter()
                .filter(|(node, channel)| *node == home && channel.contains(&tag))
                .count();
            // Three clients, each with its first waiter in the queue.
            on_home >= 3
        })
        .await
        .unwrap()
    })
    .await;
    assert!(
        followed,
        "the waiters of {name} are not subscribed where its slot lives: {:?}",
        cluster.shard_subscriptions()
    );
}

/// Every one of the [`HELD`] holds is still held, as its holder believes
/// (its lease neither lost nor run out) and as the server says (its unlock
/// is accepted).
async fn assert_holds_kept(held: Vec<redisson_locks::LockGuard>) {
    let lost: Vec<String> = held
        .iter()
        .filter(|g| g.is_lease_lost() || g.valid_for().is_none_or(|v| v.is_zero()))
        .map(|g| g.name().to_owned())
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {HELD} holds lost while renewed, as {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let refused: Vec<String> = futures_join_all(held.into_iter().map(|guard| async move {
        let name = guard.name().to_owned();
        guard.unlock().await.err().map(|e| format!("{name}: {e}"))
    }))
    .await
    .into_iter()
    .flatten()
    .collect();
    assert!(
        refused.is_empty(),
        "{} of {HELD} holds the server no longer had, as {:?}",
        refused.len(),
        &refused[..refused.len().min(5)]
    );
}

/// The queue, against the mutex model, and every one of its waiters served.
fn check_queue(history: &[Operation], dir: &std::path::Path, kept: &str) {
    let queue: Vec<Operation> = history
        .iter()
        .filter(|o| o.lock == QUEUE)
        .cloned()
        .collect();
    let served = queue
        .iter()
        .filter(|o| {
            o.op == crate::support::history::Op::Acquire
                && o.outcome == crate::support::history::Outcome::Ok
        })
        .count();
    if let Err(violation) = check(&Mutex, &queue) {
        let kept = keep(dir, kept);
        panic!(
            "the mutex model found no order for {QUEUE} ({} operations); the history is kept in {}",
            violation.operations.len(),
            kept.display()
        );
    }
    assert_eq!(served, QUEUED, "every queued waiter is served");
}

/// The redirections the nodes answered (`INFO errorstats`: `ASK`, `MOVED`,
/// `TRYAGAIN`), summed over the live nodes, in words.
fn redirections(cluster: &RedisCluster) -> String {
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for text in cluster.info_of_each("errorstats") {
        for line in text.lines() {
            let Some((name, rest)) = line
                .strip_prefix("errorstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let count = rest
                .strip_prefix("count=")
                .and_then(|c| c.trim().parse::<u64>().ok())
                .unwrap_or(0);
            *counts.entry(name.to_owned()).or_default() += count;
        }
    }
    format!("redirections and refusals answered: {counts:?}")
}

/// A client that floods its cluster link (1,000 commands at once, over and
/// over) while slots move: redis-rs 1.8.2's cluster connection has been
/// seen to stop dispatching every command for good there (its slot refresh
/// began and never ended; the watchdog then sent all its renewals at once,
/// and every hold of that client expired). The client tells the silence
/// (a command timed out and nothing else was answered since it was sent)
/// and replaces the link, so commands succeed again within a few reply
/// timeouts of the last move, whatever redis-rs does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_flooding_its_link_through_a_reshard_keeps_being_answered() {
    let cluster = Arc::new(RedisCluster::start());
    let client = cluster.client().await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let (client, stop) = (client.clone(), stop.clone());
        tokio::spawn(async move {
            let locks: Vec<_> = (0..1_000)
                .map(|i| client.get_lock(format!("flood-{i}")).unwrap())
                .collect();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let asked = locks.iter().map(|lock| lock.is_locked());
                let _ = futures_util::future::join_all(asked).await;
            }
        })
    };
    let held: Vec<_> = futures_join_all((0..20).map(|i| {
        let lock = client.get_lock(format!("flood-{}", i * 50)).unwrap();
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    for i in 0..20 {
        move_to_next_primary(&cluster, &format!("flood-{}", i * 50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    within(Duration::from_secs(30), "the flood", flood)
        .await
        .unwrap();
    // A reply timeout (2 s) to tell a silence, one more to be sure.
    let answered = eventually(Duration::from_secs(6), || async {
        let asked = (0..100).map(|i| client.get_lock(format!("flood-{i}")).unwrap());
        let asked: Vec<_> = asked.collect();
        let results = futures_util::future::join_all(asked.iter().map(|l| l.is_locked())).await;
        results.iter().all(|r| r.is_ok())
    })
    .await;
    assert!(answered, "the client's commands are no longer answered");
    for guard in held {
        guard.unlock().await.unwrap();
    }
}
