//! The owner of a hold is a sequential context, not a task: sibling futures that
//! one task polls side by side (`join!`, `select!`, `buffer_unordered`) never
//! share a hold and take turns; re-entry happens inside a hold's scope
//! (`RLock::with`, `LockGuard::scope`); `with_task_owner()` keeps Java's rule.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, LockGuard, RLock};

use crate::support::{assert_nothing_left, within, RedisServer};

const T: Duration = Duration::from_secs(30);

/// Jobs per way of running siblings.
const JOBS: usize = 100;

/// Lock names the jobs spread over.
const NAMES: [&str; 3] = ["sib-0", "sib-1", "sib-2"];

/// Which lock the jobs of a test take.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Reentrant,
    Fair,
    Write,
    /// Readers and writers of one read-write lock: readers may share, a writer
    /// is alone.
    ReadWriteMix,
}

/// In-process occupancy of each lock name, and every exclusion violation seen.
#[derive(Default)]
struct Occupancy {
    slots: [Slot; 3],
    violations: Mutex<Vec<String>>,
    /// Jobs in `lock()`, in `unlock()`, and done (for a hang's report).
    locking: AtomicUsize,
    unlocking: AtomicUsize,
    done: AtomicUsize,
}

#[derive(Default)]
struct Slot {
    readers: AtomicUsize,
    writers: AtomicUsize,
}

/// Inside a critical section; leaving (or being dropped, when a `select!` drops
/// the section) decrements the occupancy before the lock guard is released.
struct Inside<'a> {
    slot: &'a Slot,
    shared: bool,
}

impl Occupancy {
    fn enter(&self, name: usize, shared: bool, job: usize) -> Inside<'_> {
        let slot = &self.slots[name];
        if shared {
            slot.readers.fetch_add(1, Ordering::SeqCst);
            let writers = slot.writers.load(Ordering::SeqCst);
            if writers != 0 {
                self.violation(format!(
                    "job {job}: reader entered {} beside {writers} writer(s)",
                    NAMES[name]
                ));
            }
        } else {
            let writers = slot.writers.fetch_add(1, Ordering::SeqCst);
            let readers = slot.readers.load(Ordering::SeqCst);
            if writers != 0 || readers != 0 {
                self.violation(format!(
                    "job {job}: exclusive holder entered {} beside {writers} exclusive \
                     holder(s) and {readers} reader(s)",
                    NAMES[name]
                ));
            }
        }
        Inside { slot, shared }
    }

    /// Unlocks a section's guard; counts the job done.
    async fn unlock(&self, guard: LockGuard) {
        {
            let _phase = Phase::enter(&self.unlocking);
            guard.unlock().await.unwrap();
        }
        self.done.fetch_add(1, Ordering::SeqCst);
    }

    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let count = if self.shared {
            &self.slot.readers
        } else {
            &self.slot.writers
        };
        count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts the jobs in one phase (`lock()`, `unlock()`), dropped ones included.
struct Phase<'a>(&'a AtomicUsize);

impl<'a> Phase<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Phase(count)
    }
}

impl Drop for Phase<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The handles of one client for the three names.
struct Locks {
    kind: Kind,
    /// Per name: (exclusive side, shared side). The shared side is only used by the
    /// read-write mix.
    handles: Vec<(RLock, RLock)>,
}

impl Locks {
    fn new(client: &Client, kind: Kind) -> Locks {
        let handles = NAMES
            .iter()
            .map(|name| match kind {
                Kind::Reentrant => {
                    let l = client.get_lock(*name).unwrap();
                    (l.clone(), l)
                }
                Kind::Fair => {
                    let l = client.get_fair_lock(*name).unwrap();
                    (l.clone(), l)
                }
                Kind::Write | Kind::ReadWriteMix => {
                    let rw = client.get_read_write_lock(*name).unwrap();
                    (rw.write_lock(), rw.read_lock())
                }
            })
            .collect();
        Locks { kind, handles }
    }

    /// Whether job `job` reads (shares) rather than holds exclusively: in the mix,
    /// one job in four writes (4 and 3 coprime: every name gets both).
    fn shared(&self, job: usize) -> bool {
        matches!(self.kind, Kind::ReadWriteMix) && !job.is_multiple_of(4)
    }

    /// One critical section: lock its name, stay inside a little (yields and a
    /// 1 ms sleep, so siblings get polled meanwhile), leave; the guard is returned
    /// still held.
    async fn section(&self, job: usize, name: usize, occupancy: &Occupancy) -> LockGuard {
        let shared = self.shared(job);
        let (exclusive, reader) = &self.handles[name];
        let lock = if shared { reader } else { exclusive };
        let guard = {
            let _phase = Phase::enter(&occupancy.locking);
            lock.lock().await.unwrap()
        };
        let inside = occupancy.enter(name, shared, job);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        drop(inside);
        guard
    }

    /// One job: a section, then unlock.
    async fn job(&self, job: usize, name: usize, occupancy: &Occupancy) {
        let guard = self.section(job, name, occupancy).await;
        occupancy.unlock(guard).await;
    }
}

/// What the server holds: every key (a hash with its fields, a list or zset with
/// its members) with its PTTL, and the channels subscribed; for a hang's report.
async fn server_state(server: &RedisServer) -> String {
    let mut admin = server.admin().await;
    let mut state = Vec::new();
    for key in server.keys().await {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut admin)
            .await
            .unwrap();
        let content: redis::Value = match kind.as_str() {
            "hash" => admin.hgetall(&key).await.unwrap(),
            "list" => admin.lrange(&key, 0, -1).await.unwrap(),
            "zset" => admin.zrange_withscores(&key, 0, -1).await.unwrap(),
            _ => admin.get(&key).await.unwrap(),
        };
        let pttl: i64 = admin.pttl(&key).await.unwrap();
        state.push(format!("{key} ({kind}, pttl {pttl}): {content:?}"));
    }
    format!("keys {state:#?}, channels {:?}", server.channels().await)
}

/// Runs `jobs`, bounded by `T`; a hang fails with the progress, the server's
/// state and the client's.
async fn bounded(
    (server, client): (&RedisServer, &Client),
    what: &str,
    occupancy: &Occupancy,
    jobs: impl Future<Output = ()>,
) {
    // Pinned here, so that the report sees the jobs as they were, still alive.
    let mut jobs = std::pin::pin!(jobs);
    if tokio::time::timeout(T, &mut jobs).await.is_err() {
        panic!(
            "{what} did not finish within {T:?}: {} of {JOBS} jobs done, {} in lock(), {} in \
             unlock(); violations {:?}; {}; the client: {client:#?}",
            occupancy.done.load(Ordering::SeqCst),
            occupancy.locking.load(Ordering::SeqCst),
            occupancy.unlocking.load(Ordering::SeqCst),
            occupancy.violations(),
            server_state(server).await
        );
    }
}

/// Polls `jobs` side by side in the calling task, at most `limit` at a time, as
/// `StreamExt::buffer_unordered` does, until all are done.
async fn buffer_unordered<F: Future<Output = ()>>(jobs: impl IntoIterator<Item = F>, limit: usize) {
    let mut pending = jobs.into_iter();
    let mut running: Vec<Pin<Box<F>>> = Vec::new();
    std::future::poll_fn(move |cx| loop {
        while running.len() < limit {
            match pending.next() {
                Some(job) => running.push(Box::pin(job)),
                None => break,
            }
        }
        if running.is_empty() {
            return Poll::Ready(());
        }
        let before = running.len();
        running.retain_mut(|job| job.as_mut().poll(cx).is_pending());
        if running.len() == before {
            return Poll::Pending;
        }
        // Some finished: start the next ones and poll them too.
    })
    .await
}

/// 100 jobs over 3 names, in this one task, three ways: `join!` of lanes,
/// `select!` races, `buffer_unordered(8)`. No violation, nothing left.
async fn siblings_take_turns(kind: Kind) {
    let server = RedisServer::start();
    let client = server.client().await;
    let locks = Locks::new(&client, kind);

    // (a) tokio::join! of 5 lanes of 20 jobs each.
    let occupancy = Occupancy::default();
    bounded((&server, &client), "join! of lanes", &occupancy, async {
        let lane = |lane: usize| {
            let (locks, occupancy) = (&locks, &occupancy);
            async move {
                for k in 0..JOBS / 5 {
                    let job = lane + 5 * k;
                    locks.job(job, job % 3, occupancy).await;
                }
            }
        };
        tokio::join!(lane(0), lane(1), lane(2), lane(3), lane(4));
    })
    .await;
    assert_eq!(
        occupancy.violations(),
        Vec::<String>::new(),
        "{kind:?}, join!"
    );

    // (b) tokio::select! racing three sections per round, two on one name; the
    // first to finish wins and the others are dropped, waiting or inside (their
    // guard dropped, which releases at once). The winner's guard is unlocked after
    // the race: a dropped unlock() may leave its hold to the lease, as documented.
    let occupancy = Occupancy::default();
    bounded((&server, &client), "select! races", &occupancy, async {
        for round in 0..JOBS {
            let name = round % 3;
            let job = 3 * round;
            let winner = tokio::select! {
                guard = locks.section(job, name, &occupancy) => guard,
                guard = locks.section(job + 1, name, &occupancy) => guard,
                guard = locks.section(job + 2, (name + 1) % 3, &occupancy) => guard,
            };
            occupancy.unlock(winner).await;
        }
    })
    .await;
    assert_eq!(
        occupancy.violations(),
        Vec::<String>::new(),
        "{kind:?}, select!"
    );

    // (c) buffer_unordered(8), hand-written: one task polls up to 8 jobs at once.
    let occupancy = Occupancy::default();
    bounded(
        (&server, &client),
        "buffer_unordered(8)",
        &occupancy,
        buffer_unordered((0..JOBS).map(|job| locks.job(job, job % 3, &occupancy)), 8),
    )
    .await;
    assert_eq!(
        occupancy.violations(),
        Vec::<String>::new(),
        "{kind:?}, buffer_unordered"
    );

    assert_nothing_left(&server, &[&client]).await;
}

/// Runs the siblings of one kind in one spawned tokio task, as a service would.
async fn in_one_task(kind: Kind) {
    tokio::spawn(siblings_take_turns(kind)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_futures_never_share_a_reentrant_hold() {
    in_one_task(Kind::Reentrant).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_futures_never_share_a_fair_hold() {
    in_one_task(Kind::Fair).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_futures_never_share_a_write_hold() {
    in_one_task(Kind::Write).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sibling_readers_and_writers_never_put_a_writer_beside_anyone() {
    in_one_task(Kind::ReadWriteMix).await;
}

/// The counts of every field of hash `name`.
async fn hash_counts(server: &RedisServer, name: &str) -> Vec<u64> {
    let mut admin = server.admin().await;
    let fields: Vec<(String, String)> = admin.hgetall(name).await.unwrap();
    fields
        .into_iter()
        .filter(|(field, _)| field != "mode")
        .map(|(_, count)| count.parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_through_with_re_enters_three_deep_and_unwinds() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("nest-with").unwrap();
    let same_name = client.get_lock("nest-with").unwrap();

    let (counts, on_server) = within(T, "nested with", async {
        lock.with(|| async {
            let first = lock.hold_count().await.unwrap();
            let (inner, on_server) = same_name
                .with(|| async {
                    let second = same_name.hold_count().await.unwrap();
                    let (third, on_server) = lock
                        .with(|| async {
                            (
                                lock.hold_count().await.unwrap(),
                                hash_counts(&server, "nest-with").await,
                            )
                        })
                        .await
                        .unwrap();
                    (
                        vec![second, third, same_name.hold_count().await.unwrap()],
                        on_server,
                    )
                })
                .await
                .unwrap();
            let mut counts = vec![first];
            counts.extend(inner);
            counts.push(lock.hold_count().await.unwrap());
            (counts, on_server)
        })
        .await
        .unwrap()
    })
    .await;
    // In: 1, 2, 3; out again: 2 (after the innermost), 1 (after the middle).
    assert_eq!(counts, vec![1, 2, 3, 2, 1]);
    // One owner, counted three times, on the server.
    assert_eq!(on_server, vec![3]);
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap());
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_through_scope_re_enters_three_deep_and_unwinds() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("nest-scope").unwrap();
    let same_name = client.get_lock("nest-scope").unwrap();

    within(T, "nested scopes", async {
        let outer = lock.lock().await.unwrap();
        let field = format!("{}:{}", client.id(), outer.owner_id());
        outer
            .scope(async {
                assert_eq!(lock.hold_count().await.unwrap(), 1);
                assert!(lock.is_held_by_current_task().await.unwrap());
                let middle = same_name.lock().await.unwrap();
                assert_eq!(middle.owner_id(), outer.owner_id());
                assert_eq!(same_name.hold_count().await.unwrap(), 2);
                middle
                    .scope(async {
                        let inner = lock.lock().await.unwrap();
                        assert_eq!(inner.owner_id(), outer.owner_id());
                        assert_eq!(lock.hold_count().await.unwrap(), 3);
                        let mut admin = server.admin().await;
                        let count: Option<u64> = admin.hget("nest-scope", &field).await.unwrap();
                        assert_eq!(count, Some(3));
                        assert_eq!(hash_counts(&server, "nest-scope").await, vec![3]);
                        inner.unlock().await.unwrap();
                        assert_eq!(lock.hold_count().await.unwrap(), 2);
                    })
                    .await;
                middle.unlock().await.unwrap();
                assert_eq!(same_name.hold_count().await.unwrap(), 1);
                assert!(lock.is_locked().await.unwrap());
            })
            .await;
        outer.unlock().await.unwrap();
    })
    .await;
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert!(!lock.is_locked().await.unwrap());
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_on_the_write_side_and_a_downgrade_inside_the_write_scope() {
    let server = RedisServer::start();
    let client = server.client().await;
    let other = server.client().await;
    let rw = client.get_read_write_lock("nest-rw").unwrap();
    let same_name = client.get_read_write_lock("nest-rw").unwrap();
    let write = rw.write_lock();

    // Write inside write, 3 deep, through a second handle too.
    let counts = within(T, "nested writes", async {
        write
            .with(|| async {
                let first = write.hold_count().await.unwrap();
                let inner = same_name
                    .write_lock()
                    .with(|| async {
                        let second = same_name.write_lock().hold_count().await.unwrap();
                        let third = write
                            .with(|| async {
                                let third = write.hold_count().await.unwrap();
                                assert_eq!(hash_counts(&server, "nest-rw").await, vec![3]);
                                third
                            })
                            .await
                            .unwrap();
                        vec![second, third]
                    })
                    .await
                    .unwrap();
                let mut counts = vec![first];
                counts.extend(inner);
                counts.push(write.hold_count().await.unwrap());
                counts
            })
            .await
            .unwrap()
    })
    .await;
    assert_eq!(counts, vec![1, 2, 3, 1]);
    assert_eq!(write.hold_count().await.unwrap(), 0);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);

    // Downgrade: the read lock taken inside the write guard's scope, then the write
    // lock released: the lock stays held, in read mode.
    within(T, "downgrade", async {
        let w = write.lock().await.unwrap();
        let r = w
            .scope(async {
                let r = rw.read_lock().lock().await.unwrap();
                assert_eq!(r.owner_id(), w.owner_id());
                assert_eq!(rw.read_lock().hold_count().await.unwrap(), 1);
                assert_eq!(write.hold_count().await.unwrap(), 1);
                r
            })
            .await;
        let mut admin = server.admin().await;
        let mode: Option<String> = admin.hget("nest-rw", "mode").await.unwrap();
        assert_eq!(mode.as_deref(), Some("write"));
        w.unlock().await.unwrap();
        let mode: Option<String> = admin.hget("nest-rw", "mode").await.unwrap();
        assert_eq!(mode.as_deref(), Some("read"), "not downgraded to read mode");
        assert!(rw.read_lock().is_locked().await.unwrap());
        assert!(!write.is_locked().await.unwrap());
        // Read mode: another client's reader shares it, its writer is kept out.
        let theirs = other.get_read_write_lock("nest-rw").unwrap();
        assert!(theirs.write_lock().try_lock().await.unwrap().is_none());
        let shared = theirs
            .read_lock()
            .try_lock()
            .await
            .unwrap()
            .expect("a reader beside a downgraded hold");
        shared.unlock().await.unwrap();
        r.unlock().await.unwrap();
    })
    .await;
    assert_nothing_left(&server, &[&client, &other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_a_scope_there_is_no_owner_and_a_sibling_waits() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("unscoped").unwrap();
    let rw = client.get_read_write_lock("unscoped-rw").unwrap();

    for lock in [lock, rw.write_lock()] {
        let name = lock.name().to_owned();
        within(T, "unscoped queries", async {
            let guard = lock.lock().await.unwrap();
            assert!(lock.is_locked().await.unwrap());
            assert_eq!(lock.hold_count().await.unwrap(), 0, "{name}");
            assert!(!lock.is_held_by_current_task().await.unwrap(), "{name}");
            let err = lock.unlock().await.unwrap_err();
            assert!(err.is_not_held(), "{name}: {err}");
            // The handle's unlock released nothing.
            assert!(lock.is_locked().await.unwrap());
            // Nor does sequential code outside the scope re-enter.
            assert!(lock.try_lock().await.unwrap().is_none(), "{name}");
            guard.unlock().await.unwrap();
        })
        .await;

        // A sibling's try_lock while the first future holds.
        let held = tokio::sync::Notify::new();
        let tried = tokio::sync::Notify::new();
        let (_, sibling_got) = within(T, "siblings", async {
            tokio::join!(
                async {
                    let guard = lock.lock().await.unwrap();
                    held.notify_one();
                    tried.notified().await;
                    guard.unlock().await.unwrap();
                },
                async {
                    held.notified().await;
                    let got = lock.try_lock().await.unwrap();
                    tried.notify_one();
                    got.is_some()
                },
            )
        })
        .await;
        assert!(!sibling_got, "{name}: a sibling took a held lock");
    }
    assert_nothing_left(&server, &[&client]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_owner_mode_re_enters_inline_as_java_does() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("task-owned").unwrap().with_task_owner();
    let mut admin = server.admin().await;
    let client_id = client.id().to_owned();
    within(
        T,
        "task-owned",
        tokio::spawn({
            let lock = lock.clone();
            async move {
                let first = lock.lock().await.unwrap();
                let second = lock.lock().await.unwrap();
                assert_eq!(first.owner_id(), redisson_locks::current_id());
                assert_eq!(second.owner_id(), first.owner_id());
                assert_eq!(lock.hold_count().await.unwrap(), 2);
                assert!(lock.is_held_by_current_task().await.unwrap());
                let field = format!("{client_id}:{}", first.owner_id());
                let count: Option<u64> = admin.hget("task-owned", &field).await.unwrap();
                assert_eq!(count, Some(2));
                second.unlock().await.unwrap();
                assert_eq!(lock.hold_count().await.unwrap(), 1);
                first.unlock().await.unwrap();
                assert_eq!(lock.hold_count().await.unwrap(), 0);
            }
        }),
    )
    .await
    .unwrap();
    assert_nothing_left(&server, &[&client]).await;
}
