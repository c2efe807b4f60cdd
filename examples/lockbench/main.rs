//! The lock benchmark: one JSON line of measured numbers per run.
//!
//! ```text
//! cargo run --release --example lockbench -- \
//!     [--kind reentrant|fair|read|write|rw-mix|fenced|spin|non-reentrant|multi|group|redlock|semaphore|fair-semaphore] [--tasks 16] [--clients 1]
//!     [--locks 1] [--permits 1] [--ops 100] [--hold-us 100] [--max-seconds 60]
//!     [--write-pct 20] [--url redis://... | --port N] [--metrics] [--recheck-ms 1000]
//! cargo run --release --example lockbench -- --scale watchdog [--watchdog-locks 10000]
//!     [--watchdog-ms 3000]
//! cargo run --release --example lockbench -- --scale waiters|spread [--waiters 10000]
//!     [--locks 1] [--kind reentrant|fair]
//! cargo run --release --example lockbench -- --scale handoff-floor [--ops 2000]
//!     [--hold-us 1000]
//! cargo run --release --example lockbench -- --cluster 3 [--tasks 64] [--locks 64]
//!     [--ops 100] [--hold-us 0] [--clients 1]
//! cargo run --release --example lockbench -- --scale deadlocks
//! cargo run --release --example lockbench -- --scale nested [--processes 4] [--tasks 4]
//!     [--clients 1] [--seconds 10] [--mix fair-reentrant|all] [--without a,b]
//!     [--each-heuristic [--rounds 3]]
//! ```
//!
//! T tasks spread over C clients (separate client instances, as separate processes
//! would be); task i uses lock i % L; each op is acquire, a busy hold of H µs that
//! yields to the runtime, release. A run stops itself after `--max-seconds` and says
//! so (`capped: true`). Without `--url`/`--port` it starts its own redis-server.
//! `--metrics` (built with the `metrics` feature) first installs a Prometheus
//! recorder, as a service exporting the crate's metrics would, so that a run
//! measures what recording costs; the report then says `"metrics": true`.
//! Every number is measured; none is estimated. See BENCHMARKS.md for what each
//! field means.
//!
//! The modules: `options` (the flags), `workload` (the contended run), `contend`
//! (what a task acquires), `observe` (the server's and the process's numbers),
//! `floors` (the same work without the library), `scale` (the scale runs),
//! `deadlocks` (how long a deadlock takes to be named), `nested` (nested
//! locks across processes: liveness) and `cluster` (the load across a
//! cluster's shards).

use serde_json::json;

#[path = "../support/args.rs"]
mod args;
mod cluster;
mod contend;
mod deadlocks;
mod floors;
mod nested;
mod observe;
mod options;
// The suite's progress checker, shared (its test module is the suite's).
#[allow(unreachable_pub, dead_code)]
#[path = "../../tests/support/progress.rs"]
mod progress;
#[cfg(feature = "metrics")]
#[path = "../support/prometheus_recorder.rs"]
mod prometheus_recorder;
mod scale;
mod short_term;
#[path = "../support/throwaway_server.rs"]
mod throwaway_server;
mod workload;

use options::{parse, Kind, Options};

/// The global allocator, counting the bytes live (and the most ever live), so the
/// scale runs can tell live memory per waiter from what the process keeps resident.
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    match run().await {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("lockbench failed: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<serde_json::Value, String> {
    let o = parse()?;
    let scrape = install_metrics(o.metrics)?;
    let mut report = run_with(&o).await?;
    if let Some(map) = report.as_object_mut() {
        map.insert("metrics".into(), json!(o.metrics));
        if let Some(scrape) = scrape {
            // What the recorder holds at the end: proof that it recorded.
            map.insert("metrics_scrape_bytes".into(), json!(scrape().len()));
        }
    }
    Ok(report)
}

/// Renders the recorder's scrape.
type Scrape = Box<dyn Fn() -> String>;

/// With `--metrics`: installs a Prometheus recorder (histograms with buckets,
/// upkeep every 5 s, as a service would run it) before any client exists, and
/// returns what renders its scrape.
#[cfg(feature = "metrics")]
fn install_metrics(on: bool) -> Result<Option<Scrape>, String> {
    if !on {
        return Ok(None);
    }
    let handle = prometheus_recorder::install()?;
    Ok(Some(Box::new(move || handle.render())))
}

/// Without the feature there is nothing to record.
#[cfg(not(feature = "metrics"))]
fn install_metrics(on: bool) -> Result<Option<Scrape>, String> {
    if on {
        return Err("--metrics needs a build with the `metrics` feature".into());
    }
    Ok(None)
}

/// The run the options ask for.
async fn run_with(o: &Options) -> Result<serde_json::Value, String> {
    if let (Some(run), Some(url)) = (&o.nested_child, &o.url) {
        return nested::child(url, run, &o.nested).await;
    }
    if let Some(primaries) = o.cluster {
        return cluster::run(o, primaries).await;
    }
    let (_server, url) = match &o.url {
        Some(url) => (None, url.clone()),
        None => {
            let (server, url) = throwaway_server::start(&["--maxclients", "10000"])?;
            (Some(server), url)
        }
    };
    if o.scale_watchdog {
        return scale::watchdog_scale(o, &url).await;
    }
    if o.scale_waiters {
        let reentrant = scale::waiters_scale(&url, Kind::Reentrant, o.waiters, 1).await?;
        let fair = scale::waiters_scale(&url, Kind::Fair, o.waiters, 1).await?;
        let ratio = fair["served_s"].as_f64().unwrap_or(0.0)
            / reentrant["served_s"].as_f64().unwrap_or(f64::NAN);
        let fair_semaphore = scale::waiters_scale(&url, Kind::FairSemaphore, o.waiters, 1).await?;
        return Ok(json!({
            "scale": "waiters", "waiters": o.waiters,
            "reentrant": reentrant, "fair": fair, "fair_to_reentrant_time": ratio,
            "fair_semaphore": fair_semaphore,
        }));
    }
    if o.scale_spread {
        let kind = match o.kind {
            Kind::Fair | Kind::FairSemaphore => o.kind,
            _ => Kind::Reentrant,
        };
        let mut report = scale::waiters_scale(&url, kind, o.waiters, o.locks).await?;
        if let Some(map) = report.as_object_mut() {
            map.insert("scale".into(), json!("spread"));
        }
        return Ok(report);
    }
    if o.handoff_floor {
        return floors::handoff_floor(o, &url).await;
    }
    if o.scale_deadlocks {
        return deadlocks::rings(&url).await;
    }
    if o.scale_nested && o.each_heuristic {
        return nested::each_heuristic(&url, &o.nested, o.rounds).await;
    }
    if o.scale_nested {
        return nested::nested(&url, &o.nested).await;
    }
    let mut report = workload::workload(o, &url).await?;
    if o.tasks == 1
        && !matches!(
            o.kind,
            Kind::Multi | Kind::RedLock | Kind::Semaphore | Kind::FairSemaphore
        )
    {
        // Uncontended: compare with the floor in this very process and moment.
        let floor = floors::floor_ratio(o, &url).await?;
        if let Some(map) = report.as_object_mut() {
            map.insert("floor".into(), floor);
        }
    }
    Ok(report)
}
