//! The signals that tell the tool (and its guard) to stop, and how the tool
//! ends by one.
//!
//! A signal that was ignored when the process started stays ignored: `nohup`
//! ignores SIGHUP, a non-interactive shell ignores SIGINT and SIGQUIT for a
//! job it runs in the background. Listening for it would replace that
//! ignoring with a handler, and the command, which inherits an ignored signal
//! but not a handler, would then die of it. What was ignored is read once,
//! from the kernel's own record (`/proc/self/status`, `SigIgn:`), before
//! anything installs a handler.

use std::sync::OnceLock;
use std::task::Poll;

use rustix::process::Signal;
use tokio::signal::unix::{signal, SignalKind};

use crate::exit::{Code, Failure};

/// The signals that tell the tool to stop, passed on to the command's group.
pub(crate) const STOPS: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// The mask of signals ignored at start: bit N-1 for signal N.
static IGNORED_AT_START: OnceLock<u64> = OnceLock::new();

/// Reads which signals were ignored when the process started. `main` calls
/// it first, before any handler exists; later calls return that reading.
pub(crate) fn record_ignored_at_start() -> u64 {
    *IGNORED_AT_START.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| ignored_mask(&status))
            // Without /proc, nothing is known to be ignored: listened for, as before.
            .unwrap_or(0)
    })
}

/// The `SigIgn:` mask of a `/proc/<pid>/status` text.
fn ignored_mask(status: &str) -> Option<u64> {
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// Whether `signal` was ignored when the process started.
pub(crate) fn ignored_at_start(signal: Signal) -> bool {
    let number = signal.as_raw();
    (1..=64).contains(&number) && record_ignored_at_start() & (1 << (number - 1)) != 0
}

/// A stream of `signal`, unless it was ignored at start (`None`: left ignored).
pub(crate) fn listen(signal_: Signal) -> Result<Option<tokio::signal::unix::Signal>, Failure> {
    if ignored_at_start(signal_) {
        return Ok(None);
    }
    signal(SignalKind::from_raw(signal_.as_raw()))
        .map(Some)
        .map_err(|e| Failure::new(Code::ToolFailed, format!("cannot listen for signals: {e}")))
}

/// The signals of [`STOPS`] that were not ignored at start, listened for.
/// Once listened for, they no longer end the process by themselves.
#[derive(Debug)]
pub(crate) struct Stops {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Stops {
    pub(crate) fn listen() -> Result<Stops, Failure> {
        let mut streams = Vec::new();
        for stop in STOPS {
            if let Some(stream) = listen(stop)? {
                streams.push((stop, stream));
            }
        }
        Ok(Stops { streams })
    }

    /// The next of them to arrive; never, when all were ignored at start.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal not yet returned stays pending in its stream.
    pub(crate) async fn next(&mut self) -> Signal {
        std::future::poll_fn(|cx| {
            for (stop, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*stop);
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// Stops the process as SIGTSTP's default action would, whatever handler
/// the tool has for it; returns once it is continued.
pub(crate) fn stop_self() {
    // Fails only for a signal it does not know, which SIGTSTP is not.
    let _ = signal_hook::low_level::emulate_default_handler(Signal::TSTP.as_raw());
}

/// Ignores the signals a command may send its own group for its own
/// purposes (`kill -USR1 0`): the guard, in that group, must not die of them.
/// Their handlers are reset by `exec`, so the command still gets their
/// defaults; one ignored at start stays ignored.
pub(crate) fn survive_group_signals() -> Result<(), Failure> {
    for other in [
        Signal::USR1,
        Signal::USR2,
        Signal::ALARM,
        Signal::VTALARM,
        Signal::PROF,
        Signal::IO,
        Signal::POWER,
        Signal::STKFLT,
    ] {
        // A handler stays installed once a stream was made: dropping the
        // stream leaves the signal handled and discarded.
        drop(listen(other)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_mask_is_read_from_the_status_text() {
        let status = "Name:\tsh\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000001\n";
        assert_eq!(ignored_mask(status), Some(1));
        assert_eq!(ignored_mask("Name:\tsh\n"), None);
    }
}
