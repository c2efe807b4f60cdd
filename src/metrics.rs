//! What the client measures (feature `metrics`), through the `metrics` facade:
//! whichever recorder the process installs (Prometheus, StatsD, OpenTelemetry,
//! ...) receives it. Install a global recorder (`metrics::set_global_recorder`,
//! or an exporter's `install`) before the first acquisition: what is recorded
//! before goes to no recorder, and the descriptions below are given once, at
//! the first acquisition.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `redisson_locks_wait_seconds` | histogram | kind | from the call of an acquire until it holds, gave up or failed |
//! | `redisson_locks_hold_seconds` | histogram | kind | from a hold's grant until it is released (its guard gone) or lost |
//! | `redisson_locks_acquisitions_total` | counter | kind | acquires that got what they asked (a latch: that saw it open) |
//! | `redisson_locks_timeouts_total` | counter | kind | waits with a limit that ran out |
//! | `redisson_locks_busy_total` | counter | kind | one-off tries (`try_lock()`, a zero wait) that found it taken |
//! | `redisson_locks_cancelled_total` | counter | kind | acquires whose future was dropped before they ended |
//! | `redisson_locks_errors_total` | counter | kind, op | acquires (`op="acquire"`) and lock releases (`op="release"`) that ended in an error, `NotHeld` included |
//! | `redisson_locks_leases_lost_total` | counter | kind | holds lost while held: a renewal found them gone, they were forced open by this client, or their validity ran out on the holder's clock |
//! | `redisson_locks_renewals_total` | counter | kind | holds renewed by the watchdog (one per hold per confirmed renewal) |
//! | `redisson_locks_settles_total` | counter | kind | attempts and releases of unknown outcome (a lost reply, a future dropped mid-flight) that were settled |
//! | `redisson_locks_waiting_tasks` | gauge | kind | acquires in progress (the span of the wait histogram) |
//! | `redisson_locks_live_holds` | gauge | kind | holds granted and not yet released or lost |
//! | `redisson_locks_deadlocks_total` | counter | | cycles of waits across processes found by this client's waits (each wait counts a cycle once; see `Config::deadlock`) |
//! | `redisson_locks_script_fallbacks_total` | counter | | script calls the server's cache had lost (NOSCRIPT), sent again with the script's text; each also loads every script again |
//!
//! Every acquire call ends as exactly one of acquired, timeout, busy, error or
//! cancelled, so those five counters add up to the calls made. `kind` is the
//! kind's name (`reentrant`, `fair`, `fenced`, `spin`, `non_reentrant`,
//! `non_reentrant_fair`, `read`, `write`, `group` for the single-hash multi-lock,
//! `semaphore`, `permit_expirable_semaphore`, `count_down_latch`); a multi-lock
//! or a RedLock is measured through its member locks, each with its own kind.
//! With [`Config::metrics_lock_names`] a `name` label carries the lock's name
//! (one series per name: mind the cardinality). Holds, leases, renewals and
//! release errors are the locks' (a synchronizer's permit has no hold to
//! follow).
//!
//! Where each is taken: once per measurement, in the engine's layers, so every
//! kind gets it without a line of its own.
//! - waits, their outcomes and the waiting gauge: [`metered`] around the
//!   engine's two acquire entry points, a lock's `wait::acquire` (every lock
//!   kind, the local line, the wait in Redis and replica confirmation) and a
//!   synchronizer's `sync::waiting::wait_for`;
//! - holds, lost leases and renewals: [`HoldMeter`], kept in the hold's
//!   `Validity`, the one value the guard, the watchdog and the self-wait record
//!   share for a hold: made when the hold is granted, marked lost once (by the
//!   watchdog, a force unlock, or the clock), confirmed by each renewal, dropped
//!   when the last of them lets go of the hold;
//! - release errors: `ledger::release_one`, the one release of a hold;
//! - settles: `ledger::settle_telling` (every lock settle) and
//!   `sync::settled_acquire` (the semaphores').
//!
//! The labels ride on the acquisition's `Target` ([`Labels`]), made once per
//! acquisition by its kind: without names they are a static slice, so
//! recording allocates nothing; with names, the name is the lock's own
//! `Arc<str>`. Handles that a measurement needs at its start and end (the
//! gauges, the hold histogram) are registered once and kept.
//!
//! Without the feature every type here is zero-sized and every function an
//! empty inline one: nothing is computed, nothing is stored.
//!
//! [`Config::metrics_lock_names`]: crate::Config::metrics_lock_names

/// A kind's name as its traces and measurements carry it: `kind!("reentrant")`.
/// With the feature, its `kind` label is made once, in a static, so that
/// recording with it allocates nothing.
macro_rules! kind {
    ($name:literal) => {{
        #[cfg(feature = "metrics")]
        let kind = {
            static LABEL: [::metrics::Label; 1] =
                [::metrics::Label::from_static_parts("kind", $name)];
            $crate::metrics::Kind {
                name: $name,
                label: &LABEL,
            }
        };
        #[cfg(not(feature = "metrics"))]
        let kind = $crate::metrics::Kind { name: $name };
        kind
    }};
}
pub(crate) use kind;

/// What kind of lock or synchronizer is measured: see [`kind!`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    /// The name: the `kind` label's value, and the `kind` field of the traces.
    pub(crate) name: &'static str,
    /// The `kind` label, made once.
    #[cfg(feature = "metrics")]
    pub(crate) label: &'static [::metrics::Label],
}

impl Kind {
    /// The kind's name.
    pub(crate) fn name(self) -> &'static str {
        self.name
    }
}

#[cfg(feature = "metrics")]
pub(crate) use recording::{deadlock_found, metered, script_fallback, HoldMeter, Labels};
#[cfg(not(feature = "metrics"))]
pub(crate) use silent::{deadlock_found, metered, script_fallback, HoldMeter, Labels};

/// The metric names.
#[cfg(feature = "metrics")]
mod names {
    pub(super) const WAIT: &str = "redisson_locks_wait_seconds";
    pub(super) const HOLD: &str = "redisson_locks_hold_seconds";
    pub(super) const ACQUISITIONS: &str = "redisson_locks_acquisitions_total";
    pub(super) const TIMEOUTS: &str = "redisson_locks_timeouts_total";
    pub(super) const BUSY: &str = "redisson_locks_busy_total";
    pub(super) const CANCELLED: &str = "redisson_locks_cancelled_total";
    pub(super) const ERRORS: &str = "redisson_locks_errors_total";
    pub(super) const LOST: &str = "redisson_locks_leases_lost_total";
    pub(super) const RENEWALS: &str = "redisson_locks_renewals_total";
    pub(super) const SETTLES: &str = "redisson_locks_settles_total";
    pub(super) const WAITING: &str = "redisson_locks_waiting_tasks";
    pub(super) const HOLDS: &str = "redisson_locks_live_holds";
    pub(super) const SCRIPT_FALLBACKS: &str = "redisson_locks_script_fallbacks_total";
    pub(super) const DEADLOCKS: &str = "redisson_locks_deadlocks_total";
}

#[cfg(feature = "metrics")]
mod recording {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Once};
    use std::time::Instant;

    use ::metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Unit};

    use super::names::*;
    use super::Kind;
    use crate::config::Config;
    use crate::error::Result;

    /// Every metric is registered with this metadata: the crate's target, so a
    /// recorder that filters by target can tell them apart.
    static METADATA: Metadata<'static> =
        Metadata::new("redisson_locks", Level::INFO, Some(module_path!()));

    static DESCRIBED: Once = Once::new();

    /// Describes every metric to the recorder, once per process.
    fn describe() {
        DESCRIBED.call_once(|| {
            use ::metrics::{describe_counter, describe_gauge, describe_histogram};
            describe_histogram!(
                WAIT,
                Unit::Seconds,
                "Time from the call of an acquire until it held, gave up or failed."
            );
            describe_histogram!(
                HOLD,
                Unit::Seconds,
                "Time from a hold's grant until it was released or lost."
            );
            describe_counter!(ACQUISITIONS, "Acquires that got what they asked for.");
            describe_counter!(TIMEOUTS, "Waits with a limit that ran out.");
            describe_counter!(BUSY, "One-off tries that found the lock or permits taken.");
            describe_counter!(
                CANCELLED,
                "Acquires whose future was dropped before they ended."
            );
            describe_counter!(
                ERRORS,
                "Acquires and lock releases that ended in an error (op: acquire, release)."
            );
            describe_counter!(
                LOST,
                "Holds lost while held: found gone by a renewal, forced open, or out of validity."
            );
            describe_counter!(RENEWALS, "Holds renewed by the watchdog.");
            describe_counter!(
                SETTLES,
                "Attempts and releases of unknown outcome that were settled."
            );
            describe_gauge!(WAITING, "Acquires in progress.");
            describe_gauge!(HOLDS, "Holds granted and not yet released or lost.");
            describe_counter!(
                SCRIPT_FALLBACKS,
                "Script calls whose script the server had lost (NOSCRIPT), sent again with its text."
            );
            describe_counter!(
                DEADLOCKS,
                "Cycles of waits across processes found by this client's waits."
            );
        });
    }

    /// A wait of this client found itself on a cycle of waits.
    pub(crate) fn deadlock_found() {
        describe();
        ::metrics::counter!(DEADLOCKS).increment(1);
    }

    /// A script call found its script missing from the server's cache.
    pub(crate) fn script_fallback() {
        describe();
        ::metrics::counter!(SCRIPT_FALLBACKS).increment(1);
    }

    /// The labels of one acquisition's measurements: its kind, and its name
    /// when the client's config asks for names.
    #[derive(Debug, Clone)]
    pub(crate) struct Labels {
        kind: Kind,
        name: Option<Arc<str>>,
    }

    impl Labels {
        /// The labels of `kind` and lock `name`, as `config` wants them.
        pub(crate) fn new(kind: Kind, name: &Arc<str>, config: &Config) -> Labels {
            describe();
            Labels {
                kind,
                name: config.metrics_lock_names.then(|| name.clone()),
            }
        }

        fn key(&self, metric: &'static str) -> Key {
            match &self.name {
                // The common case: static parts, no allocation.
                None => Key::from_static_parts(metric, self.kind.label),
                Some(name) => {
                    Key::from_parts(metric, vec![self.kind.label[0].clone(), named(name)])
                }
            }
        }

        /// Rare events only: this key allocates its labels.
        fn key_with(&self, metric: &'static str, extra: Label) -> Key {
            let mut labels = vec![self.kind.label[0].clone(), extra];
            labels.extend(self.name.as_ref().map(named));
            Key::from_parts(metric, labels)
        }

        fn counter(&self, metric: &'static str) -> Counter {
            ::metrics::with_recorder(|r| r.register_counter(&self.key(metric), &METADATA))
        }

        fn gauge(&self, metric: &'static str) -> Gauge {
            ::metrics::with_recorder(|r| r.register_gauge(&self.key(metric), &METADATA))
        }

        fn histogram(&self, metric: &'static str) -> Histogram {
            ::metrics::with_recorder(|r| r.register_histogram(&self.key(metric), &METADATA))
        }

        /// An attempt or release of unknown outcome is being settled.
        pub(crate) fn settled(&self) {
            self.counter(SETTLES).increment(1);
        }

        /// A release of a hold ended in an error (`NotHeld` included).
        pub(crate) fn release_failed(&self) {
            let key = self.key_with(ERRORS, Label::from_static_parts("op", "release"));
            ::metrics::with_recorder(|r| r.register_counter(&key, &METADATA)).increment(1);
        }
    }

    fn named(name: &Arc<str>) -> Label {
        Label::new("name", name.clone())
    }

    /// Runs `acquiring` (an acquire: `Ok(None)` when it did not get what it
    /// asked; `one_off` when it is a single try, whose "no" is busy rather
    /// than a wait that ran out), measuring it with `labels`: counted among the waiting from the
    /// call on, and when it ends, its wait recorded and its outcome counted.
    /// A dropped future counts as cancelled, and leaves the waiting gauge.
    ///
    /// Given a maker, not the future, so that the future has one place in this
    /// one (see `long_wait::watched`).
    // Not an `async fn`, which would keep each argument twice (as the argument
    // and as the body's local): a waiting future carries both for its whole wait.
    #[allow(clippy::manual_async_fn)]
    pub(crate) fn metered<'a, T, F>(
        labels: &'a Labels,
        one_off: bool,
        acquiring: impl FnOnce() -> F + 'a,
    ) -> impl Future<Output = Result<Option<T>>> + 'a
    where
        F: Future<Output = Result<Option<T>>> + 'a,
        T: 'a,
    {
        async move {
            let mut meter = AcquireMeter::start(labels);
            let outcome = acquiring().await;
            meter.end(one_off, &outcome);
            outcome
        }
    }

    /// One acquire in progress; a drop guard, so that the waiting gauge comes
    /// down on every way out, a dropped future included. Not `OnDrop` (the
    /// crate's undo guard, which sends work to the client's thread): this must
    /// run at once, in place, and needs no connection.
    struct AcquireMeter<'a> {
        labels: &'a Labels,
        since: Instant,
        waiting: Gauge,
        ended: bool,
    }

    impl<'a> AcquireMeter<'a> {
        fn start(labels: &'a Labels) -> Self {
            let waiting = labels.gauge(WAITING);
            waiting.increment(1.0);
            AcquireMeter {
                labels,
                since: Instant::now(),
                waiting,
                ended: false,
            }
        }

        fn end<T>(&mut self, one_off: bool, outcome: &Result<Option<T>>) {
            self.ended = true;
            let labels = self.labels;
            labels
                .histogram(WAIT)
                .record(self.since.elapsed().as_secs_f64());
            match outcome {
                Ok(Some(_)) => labels.counter(ACQUISITIONS).increment(1),
                Ok(None) if one_off => labels.counter(BUSY).increment(1),
                Ok(None) => labels.counter(TIMEOUTS).increment(1),
                Err(_) => {
                    let key = labels.key_with(ERRORS, Label::from_static_parts("op", "acquire"));
                    ::metrics::with_recorder(|r| r.register_counter(&key, &METADATA)).increment(1);
                }
            }
        }
    }

    impl Drop for AcquireMeter<'_> {
        fn drop(&mut self) {
            if !self.ended {
                self.labels.counter(CANCELLED).increment(1);
            }
            self.waiting.decrement(1.0);
        }
    }

    /// One hold, from its grant to its release or loss: counted among the live
    /// holds meanwhile, its time recorded when it ends. It ends once: at its
    /// loss ([`lost`](HoldMeter::lost)) or, if never lost, when dropped with
    /// the hold's validity (released, the guard gone).
    #[derive(Debug)]
    pub(crate) struct HoldMeter(Option<Held>);

    #[derive(Debug)]
    struct Held {
        labels: Labels,
        since: Instant,
        live: Gauge,
        held: Histogram,
        ended: AtomicBool,
    }

    impl HoldMeter {
        /// Measures nothing: a validity made without a hold (the unit tests').
        pub(crate) fn none() -> HoldMeter {
            HoldMeter(None)
        }

        /// A hold of `labels` granted just now.
        pub(crate) fn start(labels: &Labels) -> HoldMeter {
            let live = labels.gauge(HOLDS);
            live.increment(1.0);
            HoldMeter(Some(Held {
                labels: labels.clone(),
                since: Instant::now(),
                live,
                held: labels.histogram(HOLD),
                ended: AtomicBool::new(false),
            }))
        }

        /// The watchdog renewed the hold.
        pub(crate) fn renewed(&self) {
            if let Some(held) = &self.0 {
                held.labels.counter(RENEWALS).increment(1);
            }
        }

        /// The hold was lost: counted, and its time ends now.
        pub(crate) fn lost(&self) {
            if let Some(held) = self.0.as_ref().filter(|held| held.end()) {
                held.labels.counter(LOST).increment(1);
            }
        }

        /// The hold ends (its validity is dropped): lost after all if
        /// `expired()`, a validity that ran out with nobody looking.
        pub(crate) fn ending(&self, expired: impl FnOnce() -> bool) {
            if self.0.is_some() && expired() {
                self.lost();
            }
        }
    }

    impl Held {
        /// Ends the hold's measurement; `false` if it had ended already.
        fn end(&self) -> bool {
            if self.ended.swap(true, Ordering::AcqRel) {
                return false;
            }
            self.held.record(self.since.elapsed().as_secs_f64());
            self.live.decrement(1.0);
            true
        }
    }

    impl Drop for HoldMeter {
        fn drop(&mut self) {
            if let Some(held) = &self.0 {
                held.end();
            }
        }
    }
}

/// Without the feature: the same interface, zero-sized, doing nothing.
#[cfg(not(feature = "metrics"))]
mod silent {
    use std::sync::Arc;

    use super::Kind;
    use crate::config::Config;

    #[inline(always)]
    pub(crate) fn script_fallback() {}

    #[inline(always)]
    pub(crate) fn deadlock_found() {}

    #[derive(Debug, Clone)]
    pub(crate) struct Labels;

    impl Labels {
        #[inline(always)]
        pub(crate) fn new(_kind: Kind, _name: &Arc<str>, _config: &Config) -> Labels {
            Labels
        }

        #[inline(always)]
        pub(crate) fn settled(&self) {}

        #[inline(always)]
        pub(crate) fn release_failed(&self) {}
    }

    /// The acquisition itself.
    #[inline(always)]
    pub(crate) fn metered<F>(_labels: &Labels, _one_off: bool, acquiring: impl FnOnce() -> F) -> F {
        acquiring()
    }

    #[derive(Debug)]
    pub(crate) struct HoldMeter;

    impl HoldMeter {
        #[inline(always)]
        pub(crate) fn none() -> HoldMeter {
            HoldMeter
        }

        #[inline(always)]
        pub(crate) fn start(_labels: &Labels) -> HoldMeter {
            HoldMeter
        }

        #[inline(always)]
        pub(crate) fn renewed(&self) {}

        #[inline(always)]
        pub(crate) fn lost(&self) {}

        #[inline(always)]
        pub(crate) fn ending(&self, _expired: impl FnOnce() -> bool) {}
    }
}
