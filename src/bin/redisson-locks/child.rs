//! The command `run`, `run-permit` and `elect` run while they hold something:
//! what it runs under ([`Held`]), taking that unless the tool is told to stop
//! first, and giving it back however the command ended. The command's
//! process and its signals are `supervise.rs`'s and `guard.rs`'s.

use std::future::Future;
use std::time::Duration;

use crate::exit::{Code, Failure};
use crate::held::Held;
use crate::out::note;
use crate::signals::Stops;
use crate::supervise::{supervise, Ended};

/// Runs `command` with `env` while `held` lasts (see [`supervise`]), gives
/// `held` back however the command ended, and says how it went: the
/// command's status; [`Code::HoldLost`] when `held` (named `what` in
/// messages) was ending or lost before the command ended; or, when the tool
/// or the command's group was told to stop by a signal, death by that signal.
pub(crate) async fn run_while_held(
    what: &str,
    (held, stops): (impl Held, Stops),
    command: &[String],
    env: &[(&str, String)],
    grace: Duration,
) -> Result<(), Failure> {
    let ended = supervise(what, command, env, (&held, stops), grace).await;
    // Given back however the command ended, before anything is reported.
    let released = held.release().await;
    let lost_first = match released {
        Err(e) if e.is_not_held() => true,
        Err(e) => {
            note(&format!(
                "redisson-locks: warning: could not release {what}: {} (it ends with its \
                 lease)",
                crate::exit::words(&e)
            ));
            false
        }
        Ok(()) => false,
    };
    match ended? {
        Ended::Stopped => Err(Failure::new(
            Code::HoldLost,
            format!(
                "{what} was lost, or about to be, while the command ran: the command was \
                 stopped, and its work was not surely protected"
            ),
        )),
        Ended::Told(signal) => {
            if lost_first {
                note(&format!(
                    "redisson-locks: warning: {what} was lost before the command ended: its \
                     work was not surely protected"
                ));
            }
            Err(Failure::Signal(signal))
        }
        Ended::Exited(status) if lost_first => Err(Failure::new(
            Code::HoldLost,
            format!(
                "{what} was lost before the command ended (it exited with {status}): its \
                 work was not surely protected"
            ),
        )),
        Ended::Exited(0) => Ok(()),
        Ended::Exited(status) => Err(Failure::Status(status)),
    }
}

/// What `taking` (a wait for a lock, a permit, a win) came to, unless the
/// tool is told to stop first (SIGINT, SIGTERM, SIGHUP, SIGQUIT): then the
/// wait is dropped, which leaves nothing behind (no hold, no queue entry),
/// and the tool dies of that signal. Otherwise what it took, with the
/// listener for those signals, which [`run_while_held`] goes on with (so
/// that one arriving in between is not lost); or [`Code::NotAcquired`]
/// saying `not_acquired` when the wait ran out, or [`Code::ToolFailed`]
/// saying what `doing` failed.
pub(crate) async fn take<T>(
    doing: &str,
    not_acquired: String,
    taking: impl Future<Output = redisson_locks::Result<Option<T>>>,
) -> Result<(T, Stops), Failure> {
    let mut stops = Stops::listen()?;
    let taken = tokio::select! {
        taken = taking => taken,
        signal = stops.next() => return Err(Failure::Signal(signal)),
    };
    match taken {
        Ok(Some(taken)) => Ok((taken, stops)),
        Ok(None) => Err(Failure::new(Code::NotAcquired, not_acquired)),
        Err(e) => Err(Failure::of(doing, &e).with_code(Code::ToolFailed)),
    }
}
