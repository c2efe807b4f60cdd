//! The `metrics` feature: what the client records, read back from a
//! `metrics_util` debugging recorder installed once, globally, for this test
//! binary (its own process, so no other test's metrics mix in). Tests run side
//! by side and share the recorder: each uses lock names of its own, and a
//! client with `metrics_lock_names` on, and reads only its names' series.
//! Every test starts its own `redis-server` (see `support`).

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::CompositeKey;
use redisson_locks::Client;
use support::{eventually, within, RedisServer};

const T: Duration = Duration::from_secs(10);

/// The recorder, and what it recorded so far: a snapshot hands out what was
/// recorded since the last one (it zeroes the counters and the gauges and
/// drains the histograms), so every read adds it up here, for every test. The
/// gauges are only ever moved up and down, so their changes add up too.
struct Recorded {
    snapshotter: Snapshotter,
    totals: Mutex<HashMap<CompositeKey, f64>>,
}

fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this process");
        Recorded {
            snapshotter,
            totals: Mutex::default(),
        }
    })
}

/// One series as recorded: a histogram's value is how many it recorded.
#[derive(Debug, Clone)]
struct Series {
    metric: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Every series recorded so far.
fn series() -> Vec<Series> {
    let recorded = recorded();
    let mut totals = recorded.totals.lock().unwrap();
    for (key, _, _, value) in recorded.snapshotter.snapshot().into_vec() {
        *totals.entry(key).or_default() += match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Gauge(change) => change.0,
            DebugValue::Histogram(values) => values.len() as f64,
        };
    }
    totals
        .iter()
        .map(|(key, total)| Series::of(key, *total))
        .collect()
}

impl Series {
    fn of(key: &CompositeKey, value: f64) -> Series {
        Series {
            metric: key.key().name().to_owned(),
            labels: key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect(),
            value,
        }
    }
}

/// The series of `metric` for lock `name`.
fn of(metric: &str, name: &str) -> Vec<Series> {
    series()
        .into_iter()
        .filter(|s| {
            s.metric == format!("redisson_locks_{metric}")
                && s.labels.get("name").map(String::as_str) == Some(name)
        })
        .collect()
}

/// The sum of `metric` over lock `name`'s series (0 when none).
fn value(metric: &str, name: &str) -> f64 {
    of(metric, name).iter().map(|s| s.value).sum()
}

/// A server for one test, with the recorder installed first: what is
/// recorded before the recorder exists goes nowhere.
fn start() -> RedisServer {
    recorded();
    RedisServer::start()
}

async fn named_client(server: &RedisServer) -> Client {
    server.client_with(|c| c.metrics_lock_names = true).await
}

/// Polls until `metric` of `name` reads `expected`; says what it read if not.
async fn expect(metric: &str, name: &str, expected: f64) {
    let reached = eventually(T, || async { value(metric, name) == expected }).await;
    assert!(
        reached,
        "{metric} of {name:?}: {} after {T:?}, expected {expected}; series: {:?}",
        value(metric, name),
        of(metric, name)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_acquisitions_of_a_reentrant_lock_are_three_waits_and_three_holds() {
    let server = start();
    let client = named_client(&server).await;
    let name = "metrics:reentrant";
    let lock = client.get_lock(name).unwrap();
    for round in 0..3 {
        let guard = within(T, "lock", lock.lock()).await.unwrap();
        if round == 0 {
            assert_eq!(value("live_holds", name), 1.0, "while held");
        }
        guard.unlock().await.unwrap();
    }
    assert_eq!(value("acquisitions_total", name), 3.0);
    assert_eq!(value("wait_seconds", name), 3.0, "waits recorded");
    assert_eq!(value("hold_seconds", name), 3.0, "holds recorded");
    assert_eq!(value("live_holds", name), 0.0, "after the releases");
    assert_eq!(value("waiting_tasks", name), 0.0);
    for metric in [
        "timeouts_total",
        "busy_total",
        "errors_total",
        "cancelled_total",
    ] {
        assert_eq!(value(metric, name), 0.0, "{metric}");
    }
    let acquisitions = of("acquisitions_total", name);
    assert_eq!(acquisitions.len(), 1, "{acquisitions:?}");
    let labels: Vec<(&str, &str)> = acquisitions[0]
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(labels, [("kind", "reentrant"), ("name", name)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_gives_up_is_a_timeout_and_a_one_off_try_is_busy() {
    let server = start();
    let (holder, contender) = (named_client(&server).await, named_client(&server).await);
    let name = "metrics:timeout";
    let guard = holder.get_lock(name).unwrap().lock().await.unwrap();
    let theirs = contender.get_lock(name).unwrap();

    let waited = within(
        T,
        "try_lock_wait",
        theirs.try_lock_wait(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    assert!(waited.is_none(), "the lock is held");
    assert_eq!(value("timeouts_total", name), 1.0);
    assert_eq!(value("busy_total", name), 0.0);

    assert!(theirs.try_lock().await.unwrap().is_none());
    assert_eq!(
        value("busy_total", name),
        1.0,
        "a one-off try is busy, not a timeout"
    );
    assert_eq!(value("timeouts_total", name), 1.0);
    assert_eq!(value("acquisitions_total", name), 1.0, "the holder's");
    assert_eq!(
        value("wait_seconds", name),
        3.0,
        "every call's wait is recorded"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_gauge_follows_a_waiter_and_comes_down_when_its_future_is_dropped() {
    let server = start();
    let (holder, contender) = (named_client(&server).await, named_client(&server).await);
    let name = "metrics:waiting";
    let lock = holder.get_lock(name).unwrap();
    let guard = lock.lock().await.unwrap();
    assert_eq!(value("waiting_tasks", name), 0.0, "the holder acquired");

    let theirs = contender.get_lock(name).unwrap();
    let waiter = tokio::spawn({
        let theirs = theirs.clone();
        async move { theirs.lock().await.unwrap().unlock().await.unwrap() }
    });
    expect("waiting_tasks", name, 1.0).await;
    guard.unlock().await.unwrap();
    within(T, "the waiter", waiter).await.unwrap();
    assert_eq!(value("waiting_tasks", name), 0.0, "the waiter acquired");
    assert_eq!(value("acquisitions_total", name), 2.0);

    // A waiter whose future is dropped (its task aborted) is no longer waiting.
    let guard = lock.lock().await.unwrap();
    let dropped = tokio::spawn(async move { theirs.lock().await.map(drop) });
    expect("waiting_tasks", name, 1.0).await;
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    expect("waiting_tasks", name, 0.0).await;
    assert_eq!(value("cancelled_total", name), 1.0);
    assert_eq!(
        value("acquisitions_total", name),
        3.0,
        "the dropped one got nothing"
    );
    guard.unlock().await.unwrap();
    assert_eq!(value("live_holds", name), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_are_counted_and_a_hold_forced_open_elsewhere_is_a_lost_lease() {
    let server = start();
    let holder = server
        .client_with(|c| {
            c.metrics_lock_names = true;
            c.lock_watchdog_timeout = Duration::from_secs(1);
        })
        .await;
    let operator = named_client(&server).await;
    let name = "metrics:lost";
    let guard = holder.get_lock(name).unwrap().lock().await.unwrap();
    // Renewed every third of a second while held.
    assert!(
        eventually(T, || async { value("renewals_total", name) >= 2.0 }).await,
        "renewals: {:?}",
        of("renewals_total", name)
    );
    assert_eq!(value("leases_lost_total", name), 0.0, "renewed, not lost");
    assert_eq!(value("live_holds", name), 1.0);

    // Another client forces it open: the next renewal finds the hold gone.
    assert!(operator
        .get_lock(name)
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    expect("leases_lost_total", name, 1.0).await;
    assert!(guard.is_lease_lost());
    assert_eq!(value("live_holds", name), 0.0, "a lost hold is not live");
    assert_eq!(
        value("hold_seconds", name),
        1.0,
        "its time ended with the loss"
    );

    // Its release finds nothing: an error, and no second hold time.
    assert!(guard.unlock().await.unwrap_err().is_not_held());
    let errors = of("errors_total", name);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].labels.get("op").map(String::as_str),
        Some("release")
    );
    assert_eq!(errors[0].value, 1.0);
    assert_eq!(value("hold_seconds", name), 1.0);
    assert_eq!(value("leases_lost_total", name), 1.0, "counted once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validity_that_runs_out_is_a_lost_lease_too() {
    let server = start();
    let client = named_client(&server).await;
    let name = "metrics:expired";
    let lock = client.get_lock(name).unwrap();
    // An explicit lease is not renewed: the holder's clock ends it.
    let guard = lock
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    within(T, "lease_lost", guard.lease_lost()).await;
    assert_eq!(value("leases_lost_total", name), 1.0);
    assert_eq!(value("live_holds", name), 0.0);
    drop(guard);
    assert_eq!(value("leases_lost_total", name), 1.0, "counted once");
    assert_eq!(value("hold_seconds", name), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_cut_short_in_flight_is_cancelled_and_settled() {
    let server = start();
    let client = named_client(&server).await;
    let name = "metrics:settled";
    let lock = client.get_lock(name).unwrap();
    // Loads the script, so that the attempt held up by the pause runs after it.
    lock.lock().await.unwrap().unlock().await.unwrap();

    let mut admin = server.admin().await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(500)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let cut = tokio::time::timeout(Duration::from_millis(100), lock.lock()).await;
    assert!(cut.is_err(), "the server answers nothing during the pause");
    assert_eq!(value("cancelled_total", name), 1.0);
    assert_eq!(value("waiting_tasks", name), 0.0);
    // Finished from the client's thread once the pause ends, then settled.
    expect("settles_total", name, 1.0).await;
    assert!(
        eventually(T, || async { server.keys().await.is_empty() }).await,
        "the settle released what the attempt took"
    );
    assert_eq!(value("live_holds", name), 0.0, "no guard ever held it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_acquisition_is_counted_with_its_kind() {
    let server = start();
    let client = named_client(&server).await;
    let name = "metrics:semaphore";
    let semaphore = client.get_semaphore(name).unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    within(T, "acquire", semaphore.acquire()).await.unwrap();
    assert!(!semaphore.try_acquire().await.unwrap());
    semaphore.release().await.unwrap();

    let acquisitions = of("acquisitions_total", name);
    assert_eq!(acquisitions.len(), 1, "{acquisitions:?}");
    assert_eq!(
        acquisitions[0].labels.get("kind").map(String::as_str),
        Some("semaphore")
    );
    assert_eq!(acquisitions[0].value, 1.0);
    assert_eq!(value("busy_total", name), 1.0);
    assert_eq!(value("wait_seconds", name), 2.0);
    assert_eq!(value("waiting_tasks", name), 0.0);
    assert!(of("live_holds", name).is_empty(), "a permit is not a hold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_lock_names_the_kind_is_the_only_label() {
    let server = start();
    // The default: no names. The only client of this binary that uses this
    // kind, so its series are this test's alone.
    let client = server.client().await;
    assert!(!client.config().metrics_lock_names);
    let lock = client
        .get_non_reentrant_fair_lock("metrics:unnamed")
        .unwrap();
    for _ in 0..3 {
        within(T, "lock", lock.lock())
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }
    let kind = |s: &Series| s.labels.get("kind").map(String::as_str) == Some("non_reentrant_fair");
    let mine: Vec<Series> = series().into_iter().filter(kind).collect();
    assert!(!mine.is_empty(), "nothing recorded for the kind");
    for s in &mine {
        assert!(!s.labels.contains_key("name"), "a name label: {s:?}");
    }
    let acquisitions: f64 = mine
        .iter()
        .filter(|s| s.metric == "redisson_locks_acquisitions_total")
        .map(|s| s.value)
        .sum();
    assert_eq!(acquisitions, 3.0);
    let names_anywhere = series()
        .into_iter()
        .filter(|s| s.labels.get("name").map(String::as_str) == Some("metrics:unnamed"))
        .count();
    assert_eq!(names_anywhere, 0);
}
