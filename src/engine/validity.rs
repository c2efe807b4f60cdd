//! What a holder can know about its hold from its own clock.
//!
//! A hold is surely valid until the instant its last *confirmed* acquire or
//! renewal was *sent*, plus the lease that command set, minus a margin for the
//! difference in clock rates between this machine and the server. Nothing else
//! enters into it: not the network, not the watchdog, not any runtime. When that
//! instant passes without a newer confirmation the hold counts as lost, for good: a
//! renewal that comes back later does not revive it (the holder may already have
//! stopped, or been told), so lost is a state a holder sees once and keeps.
//!
//! A hold may also have a *term* (`Config::max_hold`, `RLock::with_max_hold`):
//! an instant after which it counts as lost whatever the server says, and which
//! the watchdog does not renew past. The validity is then the sooner of the
//! lease's end and the term's: the one rule for renewed and explicit leases.
//!
//! This is Redlock's "validity time" for one server: a holder paused longer than its
//! lease (a GC pause, a frozen VM) wakes up to `valid_for() == None` rather than to a
//! belief that someone else's lock is its own.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::HoldMeter;

/// The fixed part of the clock-drift margin, as Redlock's (2 ms).
pub(crate) const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// How much of a lease is held back for clock drift: `lease * factor + 2 ms`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drift {
    pub(crate) factor: f64,
}

impl Drift {
    /// How long a lease of `lease` is surely valid on this machine's clock.
    pub(crate) fn trusted(self, lease: Duration) -> Duration {
        let margin = lease.mul_f64(self.factor.clamp(0.0, 1.0)) + DRIFT_FLOOR;
        lease.saturating_sub(margin)
    }
}

/// One hold's validity, shared by its guard and the watchdog.
#[derive(Debug)]
pub(crate) struct Validity {
    state: Mutex<State>,
    /// Notified when the hold is marked lost or its validity is extended.
    changed: Notify,
    drift: Drift,
    /// The hold's measurements (feature `metrics`): this value is the one thing
    /// the guard, the watchdog and the self-wait record share for a hold, and
    /// the one place its loss is decided, so the hold is measured here.
    meter: HoldMeter,
}

#[derive(Debug, Clone, Copy)]
struct State {
    valid_until: Instant,
    lost: bool,
    /// The hold's term: no confirmation extends `valid_until` past it.
    term_end: Option<Instant>,
}

impl State {
    /// `until`, cut at the term.
    fn bounded(&self, until: Instant) -> Instant {
        self.term_end.map_or(until, |end| until.min(end))
    }
}

impl Validity {
    /// A hold whose acquire, sent at `sent`, set a lease of `lease`.
    pub(crate) fn new(sent: Instant, lease: Duration, drift: Drift) -> Self {
        Validity {
            state: Mutex::new(State {
                valid_until: sent + drift.trusted(lease),
                lost: false,
                term_end: None,
            }),
            changed: Notify::new(),
            drift,
            meter: HoldMeter::none(),
        }
    }

    /// The same, ending for good at `term_end` (if any) however it is renewed.
    pub(crate) fn with_term(self, term_end: Option<Instant>) -> Self {
        {
            let mut state = self.state();
            state.term_end = term_end;
            state.valid_until = state.bounded(state.valid_until);
        }
        self
    }

    /// Is the hold's term over at `now`? Then the watchdog renews it no more.
    pub(crate) fn term_over(&self, now: Instant) -> bool {
        self.state().term_end.is_some_and(|end| now >= end)
    }

    /// The same, measured by `meter` until the hold ends (this value is
    /// dropped) or is lost.
    pub(crate) fn measured(mut self, meter: HoldMeter) -> Self {
        self.meter = meter;
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Each critical section is a field update; poisoning leaves nothing half done.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the state at `now`, turning an expired validity into lost for good.
    fn settle(&self, now: Instant) -> State {
        let mut state = self.state();
        if now >= state.valid_until {
            self.lose(&mut state);
        }
        *state
    }

    /// The one way into lost: measured once, whoever finds it.
    fn lose(&self, state: &mut State) {
        if !state.lost {
            state.lost = true;
            self.meter.lost();
        }
    }

    /// A renewal sent at `sent` was confirmed, setting `lease`. Extends the
    /// validity if the hold is still valid now; a hold already expired on this
    /// clock stays lost. Returns whether the hold is still valid.
    pub(crate) fn confirm(&self, sent: Instant, lease: Duration) -> bool {
        let now = Instant::now();
        let extended = {
            let mut state = self.state();
            if state.lost || now >= state.valid_until {
                self.lose(&mut state);
                false
            } else {
                let until = state.bounded(sent + self.drift.trusted(lease));
                state.valid_until = state.valid_until.max(until);
                self.meter.renewed();
                true
            }
        };
        self.changed.notify_waiters();
        extended
    }

    /// The server says the hold is gone (or it was force-unlocked).
    pub(crate) fn mark_lost(&self) {
        self.lose(&mut self.state());
        self.changed.notify_waiters();
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.settle(Instant::now()).lost
    }

    /// How much longer the hold is surely valid; `None` once it is lost.
    pub(crate) fn valid_for(&self) -> Option<Duration> {
        let now = Instant::now();
        let state = self.settle(now);
        (!state.lost).then(|| state.valid_until.saturating_duration_since(now))
    }

    /// Completes once the hold is lost: marked so, or its validity ran out.
    pub(crate) async fn wait_lost(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let state = self.settle(Instant::now());
            if state.lost {
                return;
            }
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(state.valid_until) => {}
            }
        }
    }
}

/// Runs `work` while a hold lasts: `None`, with `work` dropped where it stands,
/// the moment the hold is lost (`lost` completes, or `is_lost` says so). The
/// one rule behind every `run` (a lock's guard, a leadership, a permit).
///
/// The clock is read before every poll of `work`: a wake-up that comes after
/// the validity ended, before the timer fired, must not let it take one more
/// step. A loss that ties with the end wins: that result is not trusted.
pub(crate) async fn while_held<F: std::future::Future>(
    work: F,
    is_lost: impl Fn() -> bool,
    lost: impl std::future::Future<Output = ()>,
) -> Option<F::Output> {
    use std::task::Poll;
    let mut work = std::pin::pin!(work);
    let mut lost = std::pin::pin!(lost);
    std::future::poll_fn(|cx| {
        if lost.as_mut().poll(cx).is_ready() || is_lost() {
            return Poll::Ready(None);
        }
        match work.as_mut().poll(cx) {
            Poll::Ready(_) if is_lost() => Poll::Ready(None),
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

impl Drop for Validity {
    /// The hold ends: a validity that ran out while nobody asked is a loss all
    /// the same (without the feature, nothing is read).
    fn drop(&mut self) {
        let state = &mut self.state;
        self.meter.ending(|| {
            let state = state.get_mut().unwrap_or_else(|p| p.into_inner());
            !state.lost && Instant::now() >= state.valid_until
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIFT: Drift = Drift { factor: 0.01 };

    #[test]
    fn margin_is_one_percent_plus_two_ms() {
        assert_eq!(
            DRIFT.trusted(Duration::from_secs(30)),
            Duration::from_millis(29_698)
        );
        assert_eq!(DRIFT.trusted(Duration::from_millis(1)), Duration::ZERO);
    }

    #[test]
    fn validity_runs_from_the_send_instant() {
        let sent = Instant::now() - Duration::from_millis(500);
        let v = Validity::new(sent, Duration::from_secs(1), DRIFT);
        let left = v.valid_for().unwrap();
        assert!(left <= Duration::from_millis(488), "{left:?}");
        assert!(!v.is_lost());
    }

    #[test]
    fn expiry_is_sticky_and_late_renewals_do_not_revive() {
        let sent = Instant::now() - Duration::from_secs(2);
        let v = Validity::new(sent, Duration::from_secs(1), DRIFT);
        assert!(v.is_lost());
        assert!(!v.confirm(Instant::now(), Duration::from_secs(30)));
        assert!(v.is_lost());
        assert_eq!(v.valid_for(), None);
    }

    #[test]
    fn confirmations_extend_but_never_shorten() {
        let now = Instant::now();
        let v = Validity::new(now, Duration::from_secs(10), DRIFT);
        let before = v.valid_for().unwrap();
        assert!(v.confirm(now, Duration::from_secs(1)));
        assert!(v.valid_for().unwrap() + Duration::from_millis(50) >= before);
        assert!(v.confirm(Instant::now(), Duration::from_secs(20)));
        assert!(v.valid_for().unwrap() > before);
    }

    #[test]
    fn a_term_bounds_the_validity_and_every_renewal() {
        let now = Instant::now();
        let term = now + Duration::from_millis(300);
        let v = Validity::new(now, Duration::from_secs(10), DRIFT).with_term(Some(term));
        assert!(v.valid_for().unwrap() <= Duration::from_millis(300));
        assert!(v.confirm(Instant::now(), Duration::from_secs(30)));
        assert!(v.valid_for().unwrap() <= Duration::from_millis(300));
        assert!(!v.term_over(now));
        assert!(v.term_over(term));
        // Past the term: lost, and a confirmation does not revive it.
        let past = Validity::new(now, Duration::from_secs(10), DRIFT).with_term(Some(now));
        assert!(past.is_lost());
        assert!(!past.confirm(Instant::now(), Duration::from_secs(30)));
    }

    #[tokio::test]
    async fn wait_lost_completes_when_validity_runs_out() {
        let v = Validity::new(Instant::now(), Duration::from_millis(50), DRIFT);
        tokio::time::timeout(Duration::from_secs(2), v.wait_lost())
            .await
            .expect("validity ran out but wait_lost did not complete");
        assert!(v.is_lost());
    }
}
