//! The floors: the same work without the library (a handoff, a lock and
//! unlock), on the same kind of connection, measured in this process.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_locks::{Client, Config, RLock};
use serde_json::json;

use crate::observe::percentiles;
use crate::options::{err, Kind, Options};
use crate::workload::locked;

/// A plain `redis` client on RESP3, as the library's connections are: for the
/// floors, measured without the library.
fn raw_client(url: &str) -> Result<redis::Client, String> {
    let info = redis::IntoConnectionInfo::into_connection_info(url).map_err(err)?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings)).map_err(err)
}

/// The floor of a handoff to a waiter, without the library: a holder busy for
/// `--hold-us` sends a script that publishes (as a release does); a waiter on the
/// same connection (as one client's tasks share one) hears the push and sends a
/// trivial script (as its attempt). From the holder's send to the waiter's reply,
/// `--ops` times: what a handoff costs on this machine with this Redis driver
/// before any lock logic.
pub(crate) async fn handoff_floor(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let Subscribed {
        mut conn,
        heard,
        channel,
    } = subscribed(url).await?;
    let release = redis::Script::new("redis.call('publish', KEYS[1], '0') return 1");
    let attempt = redis::Script::new("return 1");
    let sent_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let served = Arc::new(tokio::sync::Notify::new());
    let ops = o.ops.max(100);
    let waiter = {
        let (heard, sent_at, served, mut conn) =
            (heard.clone(), sent_at.clone(), served.clone(), conn.clone());
        tokio::spawn(async move {
            let mut gaps = Vec::with_capacity(ops);
            for _ in 0..ops {
                heard.notified().await;
                let _: i64 = attempt.invoke_async(&mut conn).await.map_err(err)?;
                if let Some(sent) = locked(&sent_at).take() {
                    gaps.push(sent.elapsed());
                }
                served.notify_one();
            }
            Ok::<_, String>(gaps)
        })
    };
    for _ in 0..ops {
        let got = Instant::now();
        while got.elapsed() < o.hold {
            tokio::task::yield_now().await;
        }
        *locked(&sent_at) = Some(Instant::now());
        let _: i64 = release
            .key(&channel)
            .invoke_async(&mut conn)
            .await
            .map_err(err)?;
        served.notified().await;
    }
    let gaps = waiter.await.map_err(err)??;
    let (one_trip, replies) = one_trip_handoff_floor(o, conn, ops).await?;
    Ok(json!({
        "scale": "handoff-floor", "hold_us": o.hold.as_micros() as u64,
        "handoff_us": percentiles(gaps),
        "one_trip_handoff_us": percentiles(one_trip),
        "one_trip_reply_us": percentiles(replies),
        "lock_future_bytes": lock_future_sizes(url).await?,
    }))
}

/// The floor of a hand-off in one round trip, as a release that grants the
/// lock to its own client's next waiter would make it: the holder, busy for
/// `--hold-us`, sends a script that replies (the release and the grant in one),
/// and on the reply wakes the next task in this process, which runs at once
/// (no pub/sub push, no attempt of its own). From the holder's send to the
/// woken task running, `ops` times; and, apart, the reply's round trip alone.
async fn one_trip_handoff_floor(
    o: &Options,
    mut conn: redis::aio::MultiplexedConnection,
    ops: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let release_and_grant = redis::Script::new("return 1");
    let replies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let sent_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let granted = Arc::new(tokio::sync::Notify::new());
    let served = Arc::new(tokio::sync::Notify::new());
    let next = {
        let (sent_at, granted, served) = (sent_at.clone(), granted.clone(), served.clone());
        tokio::spawn(async move {
            let mut gaps = Vec::with_capacity(ops);
            for _ in 0..ops {
                granted.notified().await;
                if let Some(sent) = locked(&sent_at).take() {
                    gaps.push(sent.elapsed());
                }
                served.notify_one();
            }
            gaps
        })
    };
    for _ in 0..ops {
        let got = Instant::now();
        while got.elapsed() < o.hold {
            tokio::task::yield_now().await;
        }
        let sent = Instant::now();
        *locked(&sent_at) = Some(sent);
        let _: i64 = release_and_grant
            .invoke_async(&mut conn)
            .await
            .map_err(err)?;
        locked(&replies).push(sent.elapsed());
        granted.notify_one();
        served.notified().await;
    }
    let woken = next.await.map_err(err)?;
    let replies = std::mem::take(&mut *locked(&replies));
    Ok((woken, replies))
}

/// How large the future of one `lock()` is, for each kind that waits in a line:
/// what every parked waiter carries.
async fn lock_future_sizes(url: &str) -> Result<serde_json::Value, String> {
    let client = Client::connect(Config::from_url(url).map_err(err)?)
        .await
        .map_err(err)?;
    let reentrant = client.get_lock("lockbench:size").map_err(err)?;
    let fair = client.get_fair_lock("lockbench:size-fair").map_err(err)?;
    let write = client
        .get_read_write_lock("lockbench:size-rw")
        .map_err(err)?
        .write_lock();
    let sizes = json!({
        "reentrant": std::mem::size_of_val(&reentrant.lock()),
        "fair": std::mem::size_of_val(&fair.lock()),
        "write": std::mem::size_of_val(&write.lock()),
        "try_lock_wait_fair": std::mem::size_of_val(&fair.try_lock_wait(Duration::from_secs(1))),
    });
    client.close().await;
    Ok(sizes)
}

/// A raw RESP3 connection subscribed to a channel of its own.
struct Subscribed {
    conn: redis::aio::MultiplexedConnection,
    /// Notified on each message pushed to it.
    heard: Arc<tokio::sync::Notify>,
    channel: String,
}

/// Opens and subscribes one.
async fn subscribed(url: &str) -> Result<Subscribed, String> {
    let raw = raw_client(url)?;
    let heard = Arc::new(tokio::sync::Notify::new());
    let config = redis::AsyncConnectionConfig::new().set_push_sender({
        let heard = heard.clone();
        move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::Message {
                heard.notify_one();
            }
            Ok::<(), std::convert::Infallible>(())
        }
    });
    let mut conn = raw
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(err)?;
    let channel = format!("lockbench:floor:{}", uuid::Uuid::new_v4().simple());
    conn.subscribe(&channel).await.map_err(err)?;
    Ok(Subscribed {
        conn,
        heard,
        channel,
    })
}

/// The floor of an uncontended lock + unlock: two EVALSHA round trips of a trivial
/// script on the same kind of connection (multiplexed, RESP3). Measured in
/// alternating blocks with the lock itself, so that drift in the machine's speed
/// affects both alike.
pub(crate) async fn floor_ratio(o: &Options, url: &str) -> Result<serde_json::Value, String> {
    let floor_client = raw_client(url)?;
    let mut conn = floor_client
        .get_multiplexed_async_connection()
        .await
        .map_err(err)?;
    let trivial = redis::Script::new("return 1");
    let client = Client::connect(Config::from_url(url).map_err(err)?)
        .await
        .map_err(err)?;
    let name = format!("lockbench:floor:{}", uuid::Uuid::new_v4().simple());
    let lock = floor_lock(o.kind, &client, name)?;
    let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
    lock.lock()
        .await
        .map_err(err)?
        .unlock()
        .await
        .map_err(err)?;
    let work = tokio::spawn(alternate(conn, trivial, lock));
    let (done, [floor, locked_time, raw]) = work.await.map_err(err)??;
    let per_s = |time: Duration| f64::from(done) / time.as_secs_f64();
    Ok(json!({
        "ops": done,
        "floor_pairs_per_s": per_s(floor),
        "lock_unlock_per_s": per_s(locked_time),
        "ratio": per_s(locked_time) / per_s(floor),
        "raw_reentrant_scripts_pairs_per_s": per_s(raw),
        "ratio_to_raw_scripts": per_s(locked_time) / per_s(raw),
    }))
}

/// The lock of `kind` the floor is compared with (a plain non-reentrant lock
/// for the kinds that are not one lock).
fn floor_lock(kind: Kind, client: &Client, name: String) -> Result<RLock, String> {
    match kind {
        Kind::Reentrant => client.get_lock(name),
        Kind::Fair => client.get_fair_lock(name),
        Kind::Read => client.get_read_write_lock(name).map(|rw| rw.read_lock()),
        Kind::Write | Kind::RwMix => client.get_read_write_lock(name).map(|rw| rw.write_lock()),
        Kind::Fenced => client.get_fenced_lock(name).map(|fenced| (*fenced).clone()),
        Kind::Spin => client.get_spin_lock(name),
        Kind::Group => client.get_multi_lock(name, ["a", "b"]),
        Kind::NonReentrant
        | Kind::Multi
        | Kind::RedLock
        | Kind::Semaphore
        | Kind::FairSemaphore => client.get_non_reentrant_lock(name),
    }
    .map_err(err)
}

/// Blocks of 100, in turn, until 2000 of each: trivial-script pairs, lock +
/// unlock, and the reentrant lock's own two scripts sent raw, without the
/// library (the difference to the floor is the scripts' server-side work, the
/// difference to the lock is the library's). Returns the count and the time
/// of each.
async fn alternate(
    mut conn: redis::aio::MultiplexedConnection,
    trivial: redis::Script,
    lock: RLock,
) -> Result<(u32, [Duration; 3]), String> {
    let acquire = redis::Script::new(concat!(
        include_str!("../../lua/order_common.lua"),
        include_str!("../../lua/lock_acquire.lua")
    ));
    let release = redis::Script::new(concat!(
        include_str!("../../lua/order_common.lua"),
        include_str!("../../lua/lock_release.lua")
    ));
    let raw_name = format!("lockbench:raw:{}", uuid::Uuid::new_v4().simple());
    let raw_channel = format!("redisson_lock__channel:{{{raw_name}}}");
    // As the library sends them: the acquire honours a turn, the release
    // names the next client of the order (see `lock_acquire.lua`).
    let (raw_order, raw_turn) = (
        format!("{{{raw_name}}}:rl-waiters"),
        format!("{{{raw_name}}}:rl-turn"),
    );
    let mut times = [Duration::ZERO; 3];
    let mut done = 0u32;
    while done < 2000 {
        let t = Instant::now();
        for _ in 0..100 {
            let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
            let _: i64 = trivial.invoke_async(&mut conn).await.map_err(err)?;
        }
        times[0] += t.elapsed();
        let t = Instant::now();
        for _ in 0..100 {
            lock.lock()
                .await
                .map_err(err)?
                .unlock()
                .await
                .map_err(err)?;
        }
        times[1] += t.elapsed();
        let t = Instant::now();
        for _ in 0..100 {
            let _: Option<i64> = acquire
                .key(&raw_name)
                .key(&raw_turn)
                .arg(30_000)
                .arg("raw:1")
                .arg("1")
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            let _: Option<i64> = release
                .key(&raw_name)
                .key(&raw_channel)
                .key(&raw_order)
                .key(&raw_turn)
                .arg("0")
                .arg(30_000)
                .arg("raw:1")
                .arg("publish")
                .arg(20)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
        }
        times[2] += t.elapsed();
        done += 100;
    }
    Ok((done, times))
}
