//! Uncontended acquire + release of each lock kind, against the floor: two EVALSHA
//! round trips of a trivial script on the same kind of connection (one multiplexed
//! RESP3 connection), since a lock and an unlock cannot cost less than two round
//! trips. After the runs it prints one JSON line: each kind's mean time and the
//! floor's mean divided by it (1.0 = at the floor), and the inspector's times.
//!
//! The `inspect` group times the inspector: one `inspect` of a held lock, and a
//! `scan` that finds and reads `SCANNED` held locks (the operator's `list`).
//!
//! ```text
//! cargo bench --bench locks              # starts its own redis-server
//! cargo bench --bench locks -- inspect   # the inspector only
//! REDIS_URL=redis://... cargo bench --bench locks
//! ```

use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use redisson_locks::{Client, Config, RLock};

#[path = "../examples/support/throwaway_server.rs"]
mod throwaway_server;
use redisson_locks::testing::TestServer;

/// `REDIS_URL`, or a throwaway server of our own.
fn server() -> (Option<TestServer>, String) {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (None, url);
    }
    let (server, url) = throwaway_server::start(&[])
        .expect("redis-server must be installed (scripts/test installs it)");
    (Some(server), url)
}

const FLOOR: &str = "floor 2x EVALSHA";
const KINDS: [&str; 4] = ["reentrant", "fair", "read", "write"];
/// How many held locks the `scan` benchmark lists.
const SCANNED: usize = 1000;

fn locks(c: &mut Criterion) {
    let (_server, url) = server();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let (floor_conn, client) = runtime.block_on(async {
        let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).expect("url");
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let floor = redis::Client::open(info.set_redis_settings(settings)).expect("client");
        let conn = floor
            .get_multiplexed_async_connection()
            .await
            .expect("floor connection");
        let client = Client::connect(Config::from_url(&url).expect("url"))
            .await
            .expect("connect");
        (conn, client)
    });
    let trivial = redis::Script::new("return 1");

    let mut group = c.benchmark_group("uncontended");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function(FLOOR, |b| {
        b.iter_custom(|iters| {
            let state = (floor_conn.clone(), trivial.clone());
            timed(&runtime, iters, state, |(mut conn, trivial)| async move {
                let _: i64 = trivial.invoke_async(&mut conn).await.expect("evalsha");
                let _: i64 = trivial.invoke_async(&mut conn).await.expect("evalsha");
                (conn, trivial)
            })
        })
    });
    let rw = client.get_read_write_lock("bench:rw").expect("name");
    let locks: [RLock; 4] = [
        client.get_lock("bench:reentrant").expect("name"),
        client.get_fair_lock("bench:fair").expect("name"),
        rw.read_lock(),
        rw.write_lock(),
    ];
    for (kind, lock) in KINDS.iter().zip(&locks) {
        group.bench_function(*kind, |b| {
            b.iter_custom(|iters| {
                timed(&runtime, iters, lock.clone(), |lock| async move {
                    let guard = lock.lock().await.expect("lock");
                    guard.unlock().await.expect("unlock");
                    lock
                })
            })
        });
    }
    group.finish();

    // The inspector: held locks under their own prefix, read by another client.
    let guards: Vec<_> = runtime.block_on(async {
        let mut guards = Vec::new();
        for i in 0..SCANNED {
            let lock = client.get_lock(format!("bench:held:{i}")).expect("name");
            guards.push(lock.lock().await.expect("lock"));
        }
        guards
    });
    let reader = runtime.block_on(async {
        Client::connect(Config::from_url(&url).expect("url"))
            .await
            .expect("connect")
    });
    let mut group = c.benchmark_group("inspect");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("inspect", |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, reader.clone(), |reader| async move {
                let seen = reader.inspect("bench:held:0").await.expect("inspect");
                assert_eq!(seen.holders.len(), 1);
                reader
            })
        })
    });
    group.sample_size(10);
    group.bench_function(format!("scan {SCANNED}"), |b| {
        b.iter_custom(|iters| {
            timed(&runtime, iters, reader.clone(), |reader| async move {
                let found = reader.scan("bench:held:*").await.expect("scan");
                assert_eq!(found.objects.len(), SCANNED);
                reader
            })
        })
    });
    group.finish();
    runtime.block_on(async {
        for guard in guards {
            guard.unlock().await.expect("unlock");
        }
    });
}

/// The time of `iters` runs of `op`, each handed the state the last returned,
/// inside a spawned task, as a service's code runs: timing from outside the
/// runtime (`block_on`) would add a thread hop to every await.
fn timed<S, F, Fut>(runtime: &tokio::runtime::Runtime, iters: u64, state: S, op: F) -> Duration
where
    S: Send + 'static,
    F: Fn(S) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = S> + Send,
{
    runtime.block_on(async move {
        tokio::spawn(async move {
            let mut state = state;
            let started = Instant::now();
            for _ in 0..iters {
                state = op(state).await;
            }
            started.elapsed()
        })
        .await
        .expect("the timed task")
    })
}

/// Each kind's mean time, and the floor's mean over it, and the inspector's
/// times, from criterion's estimates.
fn print_ratios() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion");
    let mean_ns = |group: &str, id: &str| -> Option<f64> {
        let path = dir.join(group).join(id).join("new/estimates.json");
        let text = std::fs::read_to_string(path).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        json["mean"]["point_estimate"].as_f64()
    };
    let mut report = serde_json::Map::new();
    if let Some(floor) = mean_ns("uncontended", FLOOR) {
        report.insert("floor_us".into(), (floor / 1000.0).into());
        for kind in KINDS {
            if let Some(mean) = mean_ns("uncontended", kind) {
                report.insert(
                    kind.into(),
                    serde_json::json!({"us": mean / 1000.0, "floor_over_kind": floor / mean}),
                );
            }
        }
    }
    if let Some(mean) = mean_ns("inspect", "inspect") {
        report.insert("inspect_us".into(), (mean / 1000.0).into());
    }
    if let Some(mean) = mean_ns("inspect", &format!("scan {SCANNED}")) {
        report.insert(format!("scan_{SCANNED}_ms"), (mean / 1e6).into());
    }
    if !report.is_empty() {
        println!("{}", serde_json::Value::Object(report));
    }
}

criterion_group!(benches, locks);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_ratios();
}
