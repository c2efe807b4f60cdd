//! The tool's side of a command run under a hold: it starts the guard (see
//! `guard.rs`) in the command's place, in a process group of its own, and
//! until the guard ends: passes on the signals the tool gets, stops and
//! continues the job as a whole, hands the terminal over and back, and
//! stops the command as its hold ends (see `deadline.rs`).
//!
//! Its own process group, as `timeout(1)` does it: a signal the tool gets
//! reaches the command once, passed on (a command in the tool's group would
//! get a terminal's Ctrl-C twice), and stopping the command stops whatever
//! it started too (a shell script's own children).

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal, WaitId, WaitIdOptions};

use crate::deadline::{Deadline, Step};
use crate::exit::{Code, Failure};
use crate::held::Held;
use crate::out::note;
use crate::signals::{self, Stops};

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// By itself: its status as a shell reports it, 128+N for a death by
    /// signal N.
    Exited(u8),
    /// Told to stop by this signal (sent to the tool, or to the command's
    /// group by its terminal): the tool dies of it once the hold is given back.
    Told(Signal),
    /// Stopped because what was held was ending.
    Stopped,
}

/// Runs `command` with `env` added to the tool's environment, under `held`
/// (named `what` in messages), until its process group is gone; then says
/// how it ended. `stops` listens for the signals to pass on. The command gets SIGTERM and SIGKILL as `held` ends, with
/// `grace` between them (see `deadline.rs`).
///
/// # Errors
/// [`Code::ToolFailed`] when the guard cannot be started or waited for, or
/// the signals cannot be listened for. (A command that cannot be started is
/// the guard's status: 126 or 127.)
pub(crate) async fn supervise(
    what: &str,
    command: &[String],
    env: &[(&str, String)],
    (held, mut stops): (&impl Held, Stops),
    grace: Duration,
) -> Result<Ended, Failure> {
    // Listened for before the guard starts, so no change of it is missed.
    let mut children = signals::listen(Signal::CHILD)?
        .ok_or_else(|| Failure::new(Code::ToolFailed, "SIGCHLD is ignored: cannot wait"))?;
    let mut suspends = signals::listen(Signal::TSTP)?;
    let mut continues = signals::listen(Signal::CONT)?;
    let terminal = crate::terminal::ours();
    let guard = Guard::start(command, env, terminal)?;
    let mut deadline = Deadline::new(grace);
    let mut told = None;
    loop {
        if let Some(status) = guard.ended()? {
            let ended = guard.end(status);
            return Ok(match (deadline.acted(), told, ended) {
                (true, _, _) => Ended::Stopped,
                (false, Some(stop), _) => Ended::Told(stop),
                (false, None, ended) => ended,
            });
        }
        if guard.stopped_by_job_control()? {
            // Ctrl-Z, or the command read the terminal from the background:
            // the tool stops with it, and a job-control shell sees the job stop.
            signals::stop_self();
        }
        let wait_until = match deadline.step(held.valid_for(), tokio::time::Instant::now()) {
            Step::Terminate => {
                note(&format!(
                    "redisson-locks: {what} is surely valid for {} more at most: sending the \
                     command SIGTERM",
                    crate::units::duration(held.valid_for().unwrap_or_default())
                ));
                guard.signal(Signal::TERM);
                continue;
            }
            Step::Kill => {
                note(&format!(
                    "redisson-locks: {what} is no longer surely valid, or the grace is over: \
                     killing the command"
                ));
                guard.signal(Signal::KILL);
                continue;
            }
            Step::Wait(until) => until,
        };
        let timer = async {
            match wait_until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = children.recv() => {}
            // Lost outright: the next step signals at once (none is left after SIGKILL).
            () = held.lost(), if !deadline.done() => {}
            () = timer => {}
            stop = stops.next() => {
                told.get_or_insert(stop);
                guard.signal(stop);
            }
            Some(()) = next(&mut suspends) => guard.signal(Signal::TSTP),
            Some(()) = next(&mut continues) => {
                // Continued (`fg`, `bg`): the command too, unless its hold ran
                // out meanwhile (then the next step kills it).
                if held.valid_for().is_some() {
                    // In the terminal's foreground now (`fg`, also after
                    // starting in the background): the command's group too.
                    if crate::terminal::ours() {
                        // Failing, the command runs in the background: if it
                        // reads the terminal, the job stops again, and says so.
                        let _ = crate::terminal::give_to(guard.pid);
                    }
                    guard.signal(Signal::CONT);
                }
            }
        }
    }
}

/// The next signal of an optional stream; never, when there is none.
async fn next(stream: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match stream {
        Some(stream) => stream.recv().await,
        None => std::future::pending().await,
    }
}

/// The running guard: its pid is its process group's id. Until it is
/// reaped, that id cannot be reused, so signals to the group reach only it
/// and what it started. Dropped before its end (an error, a cancelled run),
/// its group is killed and it is reaped.
#[derive(Debug)]
struct Guard {
    pid: Pid,
    reaped: bool,
}

impl Guard {
    /// Starts the tool itself as `__guard` for `command`, leading a new
    /// process group, with `env` added; `terminal`: it takes the terminal's
    /// foreground for its group.
    fn start(command: &[String], env: &[(&str, String)], terminal: bool) -> Result<Guard, Failure> {
        // The running binary itself, even if its file was replaced since.
        let mut guard = std::process::Command::new("/proc/self/exe");
        guard
            .arg0("redisson-locks")
            .arg("__guard")
            .arg("--tool")
            .arg(rustix::process::getpid().as_raw_nonzero().to_string());
        if terminal {
            guard.arg("--terminal");
        }
        let child = guard
            .arg("--")
            .args(command)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .spawn()
            .map_err(|e| {
                Failure::new(
                    Code::ToolFailed,
                    format!("cannot start the command's guard: {e}"),
                )
            })?;
        let pid = i32::try_from(child.id())
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| Failure::new(Code::ToolFailed, "the guard has no pid"))?;
        Ok(Guard { pid, reaped: false })
    }

    /// Sends `signal` to the command's group; one that is gone already needs none.
    fn signal(&self, signal: Signal) {
        let _ = kill_process_group(self.pid, signal);
    }

    /// Its exit status once it has ended (left unreaped).
    fn ended(&self) -> Result<Option<ExitStatus>, Failure> {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let status = rustix::process::waitid(WaitId::Pid(self.pid), options).map_err(waiting)?;
        Ok(status.and_then(|status| {
            let raw = match (status.exit_status(), status.terminating_signal()) {
                (Some(code), _) => (code & 0xff) << 8,
                (None, Some(signal)) => signal & 0x7f,
                (None, None) => return None,
            };
            Some(ExitStatus::from_raw(raw))
        }))
    }

    /// Whether it was stopped by job control (SIGTSTP, SIGTTIN, SIGTTOU:
    /// with its group), since last asked. A SIGSTOP from someone else stops
    /// the command alone: the tool holds on.
    fn stopped_by_job_control(&self) -> Result<bool, Failure> {
        let options = WaitIdOptions::STOPPED | WaitIdOptions::NOHANG;
        let status = rustix::process::waitid(WaitId::Pid(self.pid), options).map_err(waiting)?;
        let job_control = [Signal::TSTP, Signal::TTIN, Signal::TTOU].map(Signal::as_raw);
        Ok(status
            .and_then(|status| status.stopping_signal())
            .is_some_and(|signal| job_control.contains(&signal)))
    }

    /// After it ended with `status`: nothing of its group outlives it (a
    /// guard killed from outside leaves its command behind), it is reaped,
    /// and the terminal, if the group still has it, comes back to the tool.
    fn end(mut self, status: ExitStatus) -> Ended {
        self.reap();
        if crate::terminal::foreground() == Some(self.pid) {
            if let Err(e) = crate::terminal::give_to(rustix::process::getpgrp()) {
                note(&format!(
                    "redisson-locks: note: cannot take the terminal back: {e}"
                ));
            }
        }
        match status.signal().and_then(Signal::from_named_raw) {
            Some(stop) if signals::STOPS.contains(&stop) => Ended::Told(stop),
            Some(signal) => {
                note(&format!(
                    "redisson-locks: the command's guard was killed by signal {}: its process \
                     group was killed with it",
                    signal.as_raw()
                ));
                Ended::Exited(status_code(status))
            }
            None => Ended::Exited(status_code(status)),
        }
    }

    fn reap(&mut self) {
        if self.reaped {
            return;
        }
        self.signal(Signal::KILL);
        // Fails only if it was reaped already, which nothing else does.
        let _ = rustix::process::waitpid(Some(self.pid), rustix::process::WaitOptions::empty());
        self.reaped = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.reap();
    }
}

fn waiting(e: rustix::io::Errno) -> Failure {
    Failure::new(
        Code::ToolFailed,
        format!("cannot wait for the command: {e}"),
    )
}

/// An exit status as a shell reports it: the code, or 128+N for a death by
/// signal N.
pub(crate) fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}
