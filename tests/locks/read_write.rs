//! The read-write lock: shared readers, exclusive writer, downgrade, per-hold
//! leases, Redisson interop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use crate::support::exclusion::Exclusion;
use crate::support::{eventually, within, RedisServer, LATE, PROMPT};

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let rw_a = a.get_read_write_lock("matrix").unwrap();
    let rw_b = b.get_read_write_lock("matrix").unwrap();

    // read + read across owners: allowed.
    let r1 = rw_a.read_lock().lock().await.unwrap();
    let r2 = rw_b
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("second reader");
    assert!(rw_a.read_lock().is_locked().await.unwrap());
    assert!(!rw_a.write_lock().is_locked().await.unwrap());
    // read + write: refused.
    assert!(rw_b.write_lock().try_lock().await.unwrap().is_none());
    r1.unlock().await.unwrap();
    assert!(
        rw_b.write_lock().try_lock().await.unwrap().is_none(),
        "one reader left"
    );
    r2.unlock().await.unwrap();
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);

    // write + read and write + write: refused.
    let writer = rw_a.write_lock().with_task_owner();
    let w = writer.lock().await.unwrap();
    assert!(rw_a.write_lock().is_locked().await.unwrap());
    assert!(rw_b.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw_b.write_lock().try_lock().await.unwrap().is_none());
    // Reentrant for the writer.
    let w2 = writer.lock().await.unwrap();
    assert_eq!(writer.hold_count().await.unwrap(), 2);
    assert!(writer.is_held_by_current_task().await.unwrap());
    assert!(!rw_b.write_lock().is_held_by_current_task().await.unwrap());
    w2.unlock().await.unwrap();
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mixed_tasks_never_see_a_writer_overlap() {
    let server = RedisServer::start();
    let clients = [server.client().await, server.client().await];
    let exclusion = Arc::new(Exclusion::default());
    let max_readers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let rw = clients[i % 2].get_read_write_lock("mixed-rw").unwrap();
        let (exclusion, max_readers) = (exclusion.clone(), max_readers.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..6 {
                if (i + round) % 5 == 0 {
                    let g = rw.write_lock().lock().await.unwrap();
                    let inside = exclusion.enter();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    drop(inside);
                    g.unlock().await.unwrap();
                } else {
                    let g = rw.read_lock().lock().await.unwrap();
                    let inside = exclusion.enter_shared();
                    max_readers.fetch_max(exclusion.readers(), Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    drop(inside);
                    g.unlock().await.unwrap();
                }
            }
        }));
    }
    within(Duration::from_secs(120), "50 mixed tasks", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    exclusion.assert_never_overlapped("50 mixed tasks");
    assert!(
        max_readers.load(Ordering::SeqCst) > 1,
        "readers never shared the lock"
    );
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_readers_behind_a_writer_all_get_in_together() {
    let server = RedisServer::start();
    let writer_client = server.client().await;
    let clients = [server.client().await, server.client().await];
    let write = writer_client
        .get_read_write_lock("gate")
        .unwrap()
        .write_lock()
        .lock()
        .await
        .unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let all_in = Arc::new(tokio::sync::Notify::new());
    let mut readers = Vec::new();
    for i in 0..20 {
        let read = clients[i % 2]
            .get_read_write_lock("gate")
            .unwrap()
            .read_lock();
        let (inside, all_in) = (inside.clone(), all_in.clone());
        readers.push(tokio::spawn(async move {
            let g = read.lock().await.unwrap();
            if inside.fetch_add(1, Ordering::SeqCst) + 1 == 20 {
                all_in.notify_waiters();
            } else {
                // Stay inside until all twenty are: they hold the lock together.
                let wait = all_in.notified();
                if inside.load(Ordering::SeqCst) < 20 {
                    wait.await;
                }
            }
            g.unlock().await.unwrap();
        }));
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_rwlock:{gate}").await == 2
        })
        .await
    );
    let released = tokio::time::Instant::now();
    write.unlock().await.unwrap();
    within(Duration::from_secs(20), "20 readers", async {
        for r in readers {
            r.await.unwrap();
        }
    })
    .await;
    // The write release woke them all at once (the lease was 30 s).
    assert!(released.elapsed() < PROMPT, "took {:?}", released.elapsed());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_to_a_reader() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let rw = a.get_read_write_lock("downgrade").unwrap();
    let theirs = b.get_read_write_lock("downgrade").unwrap();
    let w = rw.write_lock().lock().await.unwrap();
    // Inside the write hold's scope, the read is the writer's own: a downgrade.
    let r = w.scope(rw.read_lock().lock()).await.unwrap();
    // A reader of another client waits; the downgrade must wake it at once.
    let reader = theirs.read_lock();
    let waiting = tokio::spawn(async move { reader.lock().await.unwrap() });
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_rwlock:{downgrade}").await == 1
        })
        .await
    );
    w.unlock().await.unwrap();
    let their_read = within(PROMPT, "reader after downgrade", waiting)
        .await
        .unwrap();
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(
        theirs.write_lock().try_lock().await.unwrap().is_none(),
        "write while reads remain"
    );
    their_read.unlock().await.unwrap();
    assert!(
        theirs.write_lock().try_lock().await.unwrap().is_none(),
        "the downgraded read remains"
    );
    r.unlock().await.unwrap();
    let w = theirs
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("free now");
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_asking_to_write_is_refused_or_times_out() {
    let server = RedisServer::start();
    let client = server.client().await;
    let rw = client.get_read_write_lock("upgrade").unwrap();
    let r = rw.read_lock().lock().await.unwrap();
    // Inside the read hold's scope the writer is the reader itself: upgrading.
    let err = within(T, "upgrade", r.scope(rw.write_lock().lock()))
        .await
        .unwrap_err();
    assert!(err.is_would_deadlock(), "{err:?}");
    let timed = within(
        T,
        "timed upgrade",
        r.scope(rw.write_lock().try_lock_wait(Duration::from_millis(300))),
    )
    .await
    .unwrap();
    assert!(timed.is_none());
    assert_eq!(client.renewed_holds(), 1);
    assert_eq!(client.subscribed_channels(), 0);
    r.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_waits_for_the_longest_read_lease() {
    let server = RedisServer::start();
    let readers = server.client().await;
    let writer = server.client().await;
    let rw = readers.get_read_write_lock("leases").unwrap();
    let long_lease = Duration::from_secs(3);
    // Timed from before the reads are taken: the longest ends no sooner than its
    // lease after this, however slowly they are taken.
    let started = tokio::time::Instant::now();
    let short = tokio::spawn({
        let read = rw.read_lock();
        async move {
            read.lock_with_lease(Duration::from_secs(1))
                .await
                .unwrap()
                .detach()
        }
    });
    let long = tokio::spawn({
        let read = rw.read_lock();
        async move { read.lock_with_lease(long_lease).await.unwrap().detach() }
    });
    short.await.unwrap();
    long.await.unwrap();
    let write = writer.get_read_write_lock("leases").unwrap().write_lock();
    let w = within(T, "writer", write.try_lock_wait(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("writer");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2500),
        "writer got in after {waited:?}"
    );
    // Woken when the longest lease ends (a loaded machine may be late), not
    // after its 10 s wait.
    assert!(waited < long_lease + LATE, "writer took {waited:?}");
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_reader_expires_while_live_readers_stay_renewed() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let vanishing = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let live = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    let writer = server.client().await;
    vanishing
        .get_read_write_lock("readers")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap()
        .detach();
    let live_read = live
        .get_read_write_lock("readers")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap();
    drop(vanishing);

    // Three leases later the live reader still holds, the writer is still out.
    let write = writer.get_read_write_lock("readers").unwrap().write_lock();
    assert!(write
        .try_lock_wait(Duration::from_secs(3))
        .await
        .unwrap()
        .is_none());
    assert!(!live_read.is_lease_lost());
    let mut admin = server.admin().await;
    let live_key = format!(
        "{{readers}}:{}:{}:rwlock_timeout:1",
        live.id(),
        live_read.owner_id()
    );
    assert!(
        admin.exists::<_, bool>(&live_key).await.unwrap(),
        "live hold key expired"
    );

    // When the live reader leaves, the vanished one holds nothing: the writer gets in.
    live_read.unlock().await.unwrap();
    let w = within(T, "writer after the live reader", write.lock())
        .await
        .unwrap();
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);

    // And a vanished reader alone frees the lock within about its lease.
    let gone = server
        .client_with(|c| c.lock_watchdog_timeout = watchdog)
        .await;
    gone.get_read_write_lock("alone")
        .unwrap()
        .read_lock()
        .lock()
        .await
        .unwrap()
        .detach();
    drop(gone);
    let started = tokio::time::Instant::now();
    let w = within(
        T,
        "writer after a vanished reader",
        writer
            .get_read_write_lock("alone")
            .unwrap()
            .write_lock()
            .lock(),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < watchdog + LATE,
        "took {:?}",
        started.elapsed()
    );
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

/// Redisson-style peers: hand-written scripts following the wire contract.
const JAVA_READ: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or mode == 'read' then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if mode == false then redis.call('hset', KEYS[1], 'mode', 'read') end
  redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
  local ttl = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(ttl, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])";

const JAVA_WRITE: &str = r"
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";

const JAVA_READ_RELEASE_ALL: &str = r"
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
for i = 1, n do redis.call('del', KEYS[2] .. ':' .. i) end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1]); redis.call('publish', KEYS[3], '0')
end
return 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_style_readers_and_writers_respect_the_same_exclusion() {
    let server = RedisServer::start();
    let client = server.client().await;
    let rw = client.get_read_write_lock("interop-rw").unwrap();
    let mut admin = server.admin().await;
    let java = "3f2a1b0c-1111-4222-8333-444455556666:9";
    let java_timeouts = format!("{{interop-rw}}:{java}:rwlock_timeout");

    // A Java reader: ours may read too, but not write.
    let r: Option<i64> = redis::Script::new(JAVA_READ)
        .key("interop-rw")
        .key(&java_timeouts)
        .arg(30_000)
        .arg(java)
        .invoke_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(r, None);
    let ours = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("read beside a Java reader");
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    ours.unlock().await.unwrap();
    // Our writer waits for the Java reader's release message.
    let write = rw.write_lock();
    let waiting = tokio::spawn(async move { write.lock().await.unwrap() });
    assert!(
        eventually(Duration::from_secs(5), || async {
            server.subscribers("redisson_rwlock:{interop-rw}").await == 1
        })
        .await
    );
    let _: i64 = redis::Script::new(JAVA_READ_RELEASE_ALL)
        .key("interop-rw")
        .key(&java_timeouts)
        .key("redisson_rwlock:{interop-rw}")
        .arg(java)
        .invoke_async(&mut admin)
        .await
        .unwrap();
    let w = within(PROMPT, "writer after Java reader", waiting)
        .await
        .unwrap();

    // Java cannot read or write while we write.
    let java_read: Option<i64> = redis::Script::new(JAVA_READ)
        .key("interop-rw")
        .key(&java_timeouts)
        .arg(30_000)
        .arg(java)
        .invoke_async(&mut admin)
        .await
        .unwrap();
    assert!(java_read.unwrap() > 0);
    let java_write: Option<i64> = redis::Script::new(JAVA_WRITE)
        .key("interop-rw")
        .arg(30_000)
        .arg(format!("{java}:write"))
        .invoke_async(&mut admin)
        .await
        .unwrap();
    assert!(java_write.unwrap() > 0);
    // Our layout is Redisson's.
    let mode: String = admin.hget("interop-rw", "mode").await.unwrap();
    assert_eq!(mode, "write");
    let field = format!("{}:{}:write", client.id(), w.owner_id());
    assert_eq!(
        admin.hget::<_, _, i64>("interop-rw", &field).await.unwrap(),
        1
    );
    w.unlock().await.unwrap();

    // A Java writer excludes our reader.
    let java_write: Option<i64> = redis::Script::new(JAVA_WRITE)
        .key("interop-rw")
        .arg(30_000)
        .arg(format!("{java}:write"))
        .invoke_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(java_write, None);
    assert!(rw.read_lock().try_lock().await.unwrap().is_none());
    // Our reader's hold keys follow the layout too.
    let _: () = admin.del("interop-rw").await.unwrap();
    let r = rw.read_lock().lock().await.unwrap();
    let key = format!(
        "{{interop-rw}}:{}:{}:rwlock_timeout:1",
        client.id(),
        r.owner_id()
    );
    assert!(admin.exists::<_, bool>(&key).await.unwrap());
    r.unlock().await.unwrap();
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_and_queries_on_both_sides() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let rw = a.get_read_write_lock("forced-rw").unwrap();
    let theirs = b.get_read_write_lock("forced-rw").unwrap();
    let reader = rw.read_lock().with_task_owner();
    let r1 = reader.lock().await.unwrap();
    let r2 = reader.lock().await.unwrap();
    assert_eq!(reader.hold_count().await.unwrap(), 2);
    assert_eq!(
        rw.write_lock()
            .with_task_owner()
            .hold_count()
            .await
            .unwrap(),
        0
    );
    assert!(theirs.read_lock().is_locked().await.unwrap());
    assert!(
        !theirs.write_lock().force_unlock().await.unwrap(),
        "not in write mode"
    );
    assert!(theirs.read_lock().force_unlock().await.unwrap());
    assert!(!rw.read_lock().is_locked().await.unwrap());
    assert!(
        server.keys().await.is_empty(),
        "read hold keys left: {:?}",
        server.keys().await
    );
    assert!(r2.unlock().await.unwrap_err().is_not_held());
    drop(r1);

    let w = theirs.write_lock().lock().await.unwrap();
    assert!(rw.write_lock().is_locked().await.unwrap());
    assert!(rw
        .write_lock()
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .is_some());
    assert!(rw.write_lock().force_unlock().await.unwrap());
    assert!(w.unlock().await.unwrap_err().is_not_held());
    assert!(rw.read_lock().unlock().await.unwrap_err().is_not_held());
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_lease_survives_write_renewals_and_the_downgrade() {
    let server = RedisServer::start();
    let a = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(1))
        .await;
    let b = server.client().await;
    let rw = a.get_read_write_lock("long-read").unwrap();
    let w = rw.write_lock().lock().await.unwrap();
    let r = w
        .scope(rw.read_lock().lock_with_lease(Duration::from_secs(8)))
        .await
        .unwrap();
    // Several write renewals (every 333 ms) must not cut the 8 s read lease (to
    // the write's 1 s): about 6.5 s are left, less on a loaded machine.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    w.unlock().await.unwrap();
    let ttl = rw
        .read_lock()
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .unwrap();
    assert!(
        ttl > Duration::from_secs(3),
        "the downgraded read hold was cut to {ttl:?}"
    );
    let theirs = b.get_read_write_lock("long-read").unwrap().write_lock();
    assert!(theirs
        .try_lock_wait(Duration::from_secs(2))
        .await
        .unwrap()
        .is_none());
    assert!(!r.is_lease_lost());
    r.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_short_read_hold_keeps_the_long_one() {
    let server = RedisServer::start();
    let a = server.client().await;
    let b = server.client().await;
    let read = a.get_read_write_lock("two-reads").unwrap().read_lock();
    let short = read.lock_with_lease(Duration::from_secs(2)).await.unwrap();
    let long = read.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    short.unlock().await.unwrap();
    let ttl = read
        .remain_time_to_live()
        .await
        .unwrap()
        .as_duration()
        .unwrap();
    assert!(
        ttl > Duration::from_secs(25),
        "the long hold was cut to {ttl:?}"
    );
    let theirs = b.get_read_write_lock("two-reads").unwrap().write_lock();
    assert!(theirs
        .try_lock_wait(Duration::from_secs(3))
        .await
        .unwrap()
        .is_none());
    long.unlock().await.unwrap();
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forcing_the_idle_side_leaves_the_other_sides_holds_renewed() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(1))
        .await;
    let rw = client.get_read_write_lock("one-side").unwrap();
    let w = rw.write_lock().lock().await.unwrap();
    assert!(
        !rw.read_lock().force_unlock().await.unwrap(),
        "not in read mode"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!w.is_lease_lost());
    assert!(rw.write_lock().is_locked().await.unwrap());
    w.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
}
