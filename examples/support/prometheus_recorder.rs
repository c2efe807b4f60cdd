//! The Prometheus recorder as a service exporting the crate's metrics would run
//! it, for the examples that record (`prometheus`, `lockbench --metrics`).

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Bucket bounds of the `_seconds` histograms: from a loopback round trip to
/// a long wait for a busy lock.
pub(crate) const BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0];

/// Installs the recorder as the process's global recorder (before any client
/// exists: what is recorded earlier goes nowhere) and returns the handle that
/// renders what it recorded. Its histograms are kept in windows that
/// `run_upkeep` rolls: a task does it every 5 s, as the exporter's own HTTP
/// listener (not built here) would. Must be called inside a tokio runtime.
pub(crate) fn install() -> Result<PrometheusHandle, String> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .map_err(|e| e.to_string())?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| e.to_string())?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
