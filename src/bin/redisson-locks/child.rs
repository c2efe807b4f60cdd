//! The command `run`, `run-permit` and `elect` run while they hold something:
//! started in a process group of its own, passed the signals the tool gets,
//! and stopped (SIGTERM, then SIGKILL after a grace) the moment what is held
//! is no longer surely valid.
//!
//! Its own process group, as `timeout(1)` does it: a Ctrl-C at the terminal
//! reaches the tool alone, which passes it on once (a command in the tool's
//! group would get it twice), and stopping the command stops whatever it
//! started too (a shell script's own children).

use std::future::Future;
use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};

use crate::exit::{Code, Failure};
use crate::out::note;

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// By itself (or by a signal passed on): its status as a shell reports
    /// it, 128+N for a death by signal N.
    Exited(u8),
    /// Stopped because what was held was lost.
    Stopped,
}

/// What the command runs under: a lock's hold, a permit, leadership. It can
/// say when it is lost, and be given back.
pub(crate) trait Held {
    /// Completes once it is no longer surely valid.
    fn lost(&self) -> impl Future<Output = ()> + '_;
    /// Gives it back; `NotHeld` when it was lost meanwhile.
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>>;
}

impl Held for redisson_locks::LockGuard {
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.lease_lost()
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        self.unlock()
    }
}

impl Held for redisson_locks::Permit {
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        self.lease_lost()
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        redisson_locks::Permit::release(self)
    }
}

impl Held for redisson_locks::Leadership {
    fn lost(&self) -> impl Future<Output = ()> + '_ {
        redisson_locks::Leadership::lost(self)
    }
    fn release(self) -> impl Future<Output = redisson_locks::Result<()>> {
        self.resign()
    }
}

/// Runs `command` with `env` while `held` lasts (see [`supervise`]), gives
/// `held` back however the command ended, and says how it went: the
/// command's status, or [`Code::HoldLost`] when `held` (named `what` in
/// messages) was lost before the command ended.
pub(crate) async fn run_while_held(
    what: &str,
    held: impl Held,
    command: &[String],
    env: &[(&str, String)],
    grace: Duration,
) -> Result<(), Failure> {
    let ended = supervise(command, env, held.lost(), grace).await;
    // Given back however the command ended, before anything is reported.
    let released = held.release().await;
    match ended? {
        Ended::Stopped => Err(Failure::new(
            Code::HoldLost,
            format!("{what} was lost while the command ran: the command was stopped"),
        )),
        Ended::Exited(status) => match released {
            Err(e) if e.is_not_held() => Err(Failure::new(
                Code::HoldLost,
                format!(
                    "{what} was lost before the command ended (it exited with {status}): \
                     its work was not surely protected"
                ),
            )),
            Err(e) => {
                note(&format!(
                    "redisson-locks: warning: could not release {what}: {} (it ends with its \
                     lease)",
                    crate::exit::words(&e)
                ));
                passed_on(status)
            }
            Ok(()) => passed_on(status),
        },
    }
}

/// The command's status as the tool's own outcome.
fn passed_on(status: u8) -> Result<(), Failure> {
    match status {
        0 => Ok(()),
        status => Err(Failure::Status(status)),
    }
}

/// Runs `command` (program and arguments) with `env` added to the tool's
/// environment until it ends, or until `lost` completes: then its group gets
/// SIGTERM, and SIGKILL after `grace`.
///
/// # Errors
/// [`Code::CommandNotFound`] or [`Code::CannotExecute`] when it cannot be
/// started; [`Code::ToolFailed`] when the signals cannot be listened for.
pub(crate) async fn supervise(
    command: &[String],
    env: &[(&str, String)],
    lost: impl Future<Output = ()>,
    grace: Duration,
) -> Result<Ended, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(Code::Usage, "no command to run was given after --"))?;
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        // Whatever becomes of the tool, the command never outlives its hold
        // unnoticed: dropped, the child is killed.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => Code::CommandNotFound,
                _ => Code::CannotExecute,
            };
            Failure::new(code, format!("cannot run '{program}': {e}"))
        })?;
    let group = child
        .id()
        .and_then(|id| Pid::from_raw(i32::try_from(id).ok()?));
    let mut stops = Stops::listen()?;
    let mut lost = std::pin::pin!(lost);
    loop {
        tokio::select! {
            status = child.wait() => return Ok(Ended::Exited(status_code(status.map_err(waiting)?))),
            () = &mut lost => {
                stop(&mut child, group, grace).await?;
                return Ok(Ended::Stopped);
            }
            signal = stops.next() => pass_on(group, signal),
        }
    }
}

/// `acquiring` (a wait for a lock, a permit, a win), unless the tool is told
/// to stop first (SIGINT, SIGTERM, SIGHUP): then the wait is dropped, which
/// leaves nothing behind (no hold, no queue entry), and the tool ends with
/// 128+N, as if the signal had ended it.
async fn unless_stopped<T>(acquiring: impl Future<Output = T>) -> Result<T, Failure> {
    let mut stops = Stops::listen()?;
    tokio::select! {
        done = acquiring => Ok(done),
        signal = stops.next() => {
            let number = u8::try_from(signal.as_raw()).unwrap_or(0);
            Err(Failure::Status(128 + number))
        }
    }
}

/// The signals that tell the tool to stop: SIGINT, SIGTERM, SIGHUP. Once
/// listened for, they no longer end the process by themselves.
pub(crate) struct Stops {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Stops {
    pub(crate) fn listen() -> Result<Stops, Failure> {
        let listen = |kind| {
            signal(kind).map_err(|e| {
                Failure::new(Code::ToolFailed, format!("cannot listen for signals: {e}"))
            })
        };
        Ok(Stops {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
            hangup: listen(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.interrupt.recv() => Signal::INT,
            _ = self.terminate.recv() => Signal::TERM,
            _ = self.hangup.recv() => Signal::HUP,
        }
    }
}

/// What `taking` (a wait for a lock, a permit, a win) came to, unless the
/// tool was told to stop first ([`unless_stopped`]): what it took; or
/// [`Code::NotAcquired`] saying `not_acquired` when the wait ran out, or
/// [`Code::ToolFailed`] saying what `doing` failed.
pub(crate) async fn take<T>(
    doing: &str,
    not_acquired: String,
    taking: impl Future<Output = redisson_locks::Result<Option<T>>>,
) -> Result<T, Failure> {
    match unless_stopped(taking).await? {
        Ok(Some(taken)) => Ok(taken),
        Ok(None) => Err(Failure::new(Code::NotAcquired, not_acquired)),
        Err(e) => Err(Failure::of(doing, &e).with_code(Code::ToolFailed)),
    }
}

/// Sends `signal` to the command's process group; one that is gone already
/// needs none.
fn pass_on(group: Option<Pid>, signal: Signal) {
    if let Some(group) = group {
        let _ = kill_process_group(group, signal);
    }
}

/// SIGTERM to the command's group, then SIGKILL if it has not exited within
/// `grace`; waits for it.
async fn stop(child: &mut Child, group: Option<Pid>, grace: Duration) -> Result<(), Failure> {
    pass_on(group, Signal::TERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        note(&format!(
            "redisson-locks: the command did not end within {} of SIGTERM: killing it",
            crate::units::duration(grace)
        ));
        pass_on(group, Signal::KILL);
        // The group's leader is our child: make sure it is reaped even when
        // the group signal could not be sent.
        let _ = child.start_kill();
    }
    child.wait().await.map_err(waiting)?;
    Ok(())
}

fn waiting(e: std::io::Error) -> Failure {
    Failure::new(
        Code::ToolFailed,
        format!("cannot wait for the command: {e}"),
    )
}

/// An exit status as a shell reports it: the code, or 128+N for a death by
/// signal N.
fn status_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}
