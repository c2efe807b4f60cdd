//! Serving the crate's metrics to Prometheus (being written).
fn main() {}
