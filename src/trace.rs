//! Observability through `tracing` (feature `tracing`, on by default).
//!
//! What is reported, and at which level (target `redisson_locks`):
//! - `WARN`: every error swallowed because nobody is left to receive it (a
//!   release from a dropped guard, leaving a fair queue from a dropped waiter,
//!   undoing a hold no replica confirmed, settling an acquire of unknown
//!   outcome that ran out of budget); every renewal round that failed; every
//!   hold the watchdog found gone (a lease lost).
//! - `INFO`: every failover followed (a Sentinel switch, a connection moved off a
//!   runtime that ended or stalled, channels subscribed again after a reconnect).
//! - `DEBUG`: a span per acquisition (`acquire`, with the lock's `name` and
//!   `kind`) and, when it ends, an event with how long it took and whether it
//!   waited: the recipe for acquire-latency and wait metrics (see `DESIGN.md`,
//!   "Observability"). Disabled levels cost one relaxed atomic load per callsite.
//!
//! Without the feature every macro here compiles to nothing (its arguments are
//! still type-checked, never evaluated).

/// A warning: something went wrong that no caller will hear about.
macro_rules! warn_event {
    ($($arg:tt)+) => {{
        #[cfg(feature = "tracing")]
        ::tracing::warn!(target: "redisson_locks", $($arg)+);
        // Type-checked, never evaluated (nor formatted).
        #[cfg(not(feature = "tracing"))]
        if false {
            let _ = format_args!($($arg)+);
        }
    }};
}

/// News worth a line in an operator's log: a failover followed.
macro_rules! info_event {
    ($($arg:tt)+) => {{
        #[cfg(feature = "tracing")]
        ::tracing::info!(target: "redisson_locks", $($arg)+);
        // Type-checked, never evaluated (nor formatted).
        #[cfg(not(feature = "tracing"))]
        if false {
            let _ = format_args!($($arg)+);
        }
    }};
}

/// Detail for metrics and debugging, off unless asked for.
macro_rules! debug_event {
    ($($arg:tt)+) => {{
        #[cfg(feature = "tracing")]
        ::tracing::debug!(target: "redisson_locks", $($arg)+);
        // Type-checked, never evaluated (nor formatted).
        #[cfg(not(feature = "tracing"))]
        if false {
            let _ = format_args!($($arg)+);
        }
    }};
}

pub(crate) use {debug_event, info_event, warn_event};

/// Runs `acquisition` inside a `DEBUG` span naming the lock and its kind.
#[cfg(feature = "tracing")]
pub(crate) fn in_acquire_span<F: std::future::Future>(
    name: &str,
    kind: &'static str,
    acquisition: F,
) -> impl std::future::Future<Output = F::Output> {
    use tracing::Instrument as _;
    acquisition.instrument(tracing::debug_span!(
        target: "redisson_locks",
        "acquire",
        name = name,
        kind = kind
    ))
}

/// Without the feature: the acquisition itself.
#[cfg(not(feature = "tracing"))]
pub(crate) fn in_acquire_span<F: std::future::Future>(
    _name: &str,
    _kind: &'static str,
    acquisition: F,
) -> F {
    acquisition
}
