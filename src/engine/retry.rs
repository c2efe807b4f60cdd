//! Retrying with full jitter: every pause after a failure is drawn at random up
//! to the configured interval, so that callers who failed together (a cut
//! connection, a restart) retry apart instead of in one burst.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;

/// A pseudo-random duration in `[0, span]`, good enough to spread retries (a
/// spin lock's back-off, the pause between two rounds of a multi-lock or RedLock,
/// and every retry after a transient failure: full jitter up to
/// `Config::retry_interval`).
pub(crate) fn jitter(span: Duration) -> Duration {
    let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    let bits = uuid::Uuid::new_v4().as_u64_pair().0;
    Duration::from_nanos(bits % nanos.saturating_add(1))
}

/// Runs `step` (safe to repeat: a settle) until it succeeds (its answer), retrying a
/// transient failure after a pause of full jitter up to `interval` while
/// `deadline` has not passed. `failed` hears the number of failures so far
/// after each one that is retried. The error that ended it otherwise: a final
/// one, or a transient one past the deadline.
pub(crate) async fn until_settled<T, F, Fut>(
    deadline: Instant,
    interval: Duration,
    mut step: F,
    mut failed: impl FnMut(u32),
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut failures = 0u32;
    loop {
        match step().await {
            Ok(done) => return Ok(done),
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                failures = failures.saturating_add(1);
                failed(failures);
                tokio::time::sleep(jitter(interval)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
