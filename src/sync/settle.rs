//! The rule the synchronizers share for acquires that a dropped future or a
//! lost reply must not lose: [`settled_acquire`] finishes the command in
//! flight and gives back what it took when the caller is gone, and
//! [`settle_retrying`] retries a release whose outcome is unknown, and
//! [`settled_release`] sends a semaphore's release again (under its receipt,
//! or its permit id) when it fails in transit.

use std::future::Future;

use crate::engine::cleanup::{FinishOnDrop, Orphaned};
use crate::engine::contract::BoxFuture;
use crate::error::{Error, Result};
use crate::metrics::Labels;
use crate::transport::conn::Conn;

/// The most permits one call may move: Redisson counts them in a Java `int`.
const MAX_PERMITS: u32 = i32::MAX as u32;

/// Checks a number of permits before any I/O.
pub(super) fn check_permits(permits: u32) -> Result<()> {
    if permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "{permits} permits exceed the maximum of {MAX_PERMITS} (Redisson counts permits in a Java int)"
        )));
    }
    Ok(())
}

/// What an acquire of unknown fate may have taken, as its undo is told.
#[derive(Debug)]
pub(super) enum Took<T> {
    /// The reply came: it took this (a caller who went away never got it).
    Surely(T),
    /// No reply came (a cut connection, a timeout): it may have run.
    Maybe,
}

/// Sends `call`, an acquire that takes something from the server, so that what
/// it takes is never lost. If the caller's future is dropped before the reply,
/// the call is finished from the client's thread and `undo` gives back what it
/// took; if its reply never comes (the outcome is unknown), `undo` settles it
/// from the client's thread, and the caller gets the error. `Ok(None)` from
/// `call` took nothing. `undo` must be safe to run when nothing was taken: it
/// reads what the attempt left on the server (its mark, its permit id). Every
/// undo run is a settle, counted with `labels` (feature `metrics`).
///
/// # Cancel safety
/// That is its purpose: dropped at any point, nothing taken stays taken.
pub(super) async fn settled_acquire<T, U, UF>(
    conn: &Conn,
    call: BoxFuture<Result<Option<T>>>,
    undo: U,
    labels: Labels,
) -> Result<Option<T>>
where
    T: Send + 'static,
    U: FnOnce(Took<T>) -> UF + Send + 'static,
    UF: Future<Output = ()> + Send + 'static,
{
    // Dropped with the call in flight, the call is finished on the client's
    // thread and whatever it may have taken is undone.
    let orphaned: Orphaned<Option<T>, U> = {
        let labels = labels.clone();
        Box::new(move |outcome, undo| {
            Box::pin(async move {
                if let Some(took) = doubt(outcome) {
                    labels.settled();
                    undo(took).await;
                }
            })
        })
    };
    let (outcome, undo) = FinishOnDrop::new(conn, call, undo, orphaned).await;
    match outcome {
        Ok(taken) => Ok(taken),
        Err(e) => {
            if may_have_run(&e) {
                labels.settled();
                conn.spawn_cleanup(undo(Took::Maybe));
            }
            Err(e)
        }
    }
}

/// Sends `call`, a release that `resend` may send again safely (under the
/// same receipt, or the same permit id: the server applies it once however
/// often it comes), so that a permit given back is never lost. If it fails in
/// transit (a cut connection, a timeout, a refused connection), it is sent
/// again from the client's thread until the server answers, within the
/// settle's budget, and the caller hears that answer; if the caller's future
/// is dropped first, that goes on without it. `resend` is told whether the
/// first send may have run (then an answer of "nothing to release" may be
/// the first send's doing). A resend after a reply that was lost is a
/// settle, counted with `labels`.
///
/// # Errors
/// The server's refusal (nothing changed), or the first error when no resend
/// reached the server within the budget (the outcome then stays unknown).
///
/// # Cancel safety
/// That is its purpose: dropped at any point, the release happens once.
pub(super) async fn settled_release<T, R, RF>(
    conn: &Conn,
    call: BoxFuture<Result<T>>,
    resend: R,
    terms: SettleTerms,
    labels: Labels,
) -> Result<T>
where
    T: Send + 'static,
    R: FnMut(bool) -> RF + Send + 'static,
    RF: Future<Output = Result<T>> + Send + 'static,
{
    let orphaned: Orphaned<T, R> = {
        let labels = labels.clone();
        Box::new(move |outcome, resend| {
            Box::pin(async move {
                if let Err(e) = &outcome {
                    if e.is_transient() {
                        let ran = may_have_run(e);
                        if ran {
                            labels.settled();
                        }
                        let _ = resent(terms, resend, ran).await;
                    }
                }
            })
        })
    };
    let (outcome, resend) = FinishOnDrop::new(conn, call, resend, orphaned).await;
    match outcome {
        Ok(answer) => Ok(answer),
        // Refused by the server (a key of another type): nothing changed.
        Err(e) if !e.is_transient() => Err(e),
        // Cut, timed out, refused a connection: whether it ran or not, sending
        // it again is safe.
        Err(e) => {
            let ran = may_have_run(&e);
            if ran {
                labels.settled();
            }
            // On the client's thread, so that it goes on if this caller goes.
            let (tell, told) = tokio::sync::oneshot::channel();
            conn.spawn_cleanup(async move {
                let _ = tell.send(resent(terms, resend, ran).await);
            });
            match told.await {
                Ok(Ok(answer)) => Ok(answer),
                _ => Err(e),
            }
        }
    }
}

/// Sends a release again until the server answers, for at most the budget;
/// `ran`: the first send may have run.
async fn resent<T, R, RF>(terms: SettleTerms, mut resend: R, ran: bool) -> Result<T>
where
    R: FnMut(bool) -> RF,
    RF: Future<Output = Result<T>>,
{
    let deadline = tokio::time::Instant::now() + terms.budget;
    let settled =
        crate::engine::retry::until_settled(deadline, terms.retry_interval, || resend(ran), |_| {})
            .await;
    if let Err(e) = &settled {
        crate::trace::warn_event!(
            "settling a release of unknown outcome gave up (its permits may not be back): {e}"
        );
    }
    settled
}

/// What a finished call left for an undo whose caller is gone.
pub(super) fn doubt<T>(outcome: Result<Option<T>>) -> Option<Took<T>> {
    match outcome {
        Ok(taken) => taken.map(Took::Surely),
        Err(e) if may_have_run(&e) => Some(Took::Maybe),
        Err(_) => None,
    }
}

/// Might a call that failed with `e` have run on the server?
pub(super) fn may_have_run(e: &Error) -> bool {
    !(e.is_surely_not_executed() || e.is_definite_refusal())
}

/// How a synchronizer's settle retries, taken from the client's config: a
/// value of its own, so that a settle running in the background holds the
/// connection and nothing else of the client (a client whose last handle goes
/// during a settle still ends, and waits for the settle as for any cleanup).
#[derive(Debug, Clone, Copy)]
pub(super) struct SettleTerms {
    retry_interval: std::time::Duration,
    budget: std::time::Duration,
}

impl SettleTerms {
    pub(super) fn of(config: &crate::Config) -> Self {
        SettleTerms {
            retry_interval: config.retry_interval,
            budget: settle_budget(config),
        }
    }
}

/// Runs `step` (a settle: safe to repeat) until it succeeds, retrying a
/// transient failure after a pause drawn with full jitter up to
/// `retry_interval`, for at most the budget; says so if it gave up.
pub(super) async fn settle_retrying<F, Fut>(terms: SettleTerms, what: &str, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let deadline = tokio::time::Instant::now() + terms.budget;
    let settled =
        crate::engine::retry::until_settled(deadline, terms.retry_interval, &mut step, |_| {})
            .await;
    if let Err(e) = settled {
        crate::trace::warn_event!("{what}: settling an acquire of unknown outcome gave up: {e}");
    }
}

/// How long a settle of a synchronizer's acquire keeps trying: a reconnect
/// and a few replies' worth.
pub(super) fn settle_budget(config: &crate::Config) -> std::time::Duration {
    config
        .timeout
        .saturating_mul(4)
        .saturating_add(std::time::Duration::from_secs(10))
}

/// How long a semaphore acquire's mark lives: past the end of any settle that
/// may read it (one starts at most a reply timeout after the acquire ran), and
/// never past what Redis can be told.
pub(super) fn mark_ttl(config: &crate::Config) -> std::time::Duration {
    settle_budget(config)
        .saturating_add(config.timeout.saturating_mul(2))
        .min(crate::MAX_DURATION)
}
