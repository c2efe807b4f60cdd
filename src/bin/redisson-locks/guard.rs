//! The guard: the tool itself, run again as `__guard`, in the command's
//! place. It leads the command's process group, starts the command in it,
//! and lives until the group is empty, so that:
//!
//! - **the command cannot outlive the tool** (Linux). The guard asks the
//!   kernel for a signal when its parent dies (`PR_SET_PDEATHSIG`, SIGCHLD,
//!   which it listens for anyway), checks after asking that its parent is
//!   still the tool (the tool may have died between the fork and the ask),
//!   and on the tool's death kills its whole group with SIGKILL. The kernel
//!   sends that signal when the *thread* that forked the guard ends: the
//!   tool forks it from its main thread, which its current-thread runtime
//!   keeps until the process ends.
//! - **the hold lasts as long as the group**: its exit, which the tool waits
//!   for, comes once no live process is left in the group but itself, so
//!   what the command left running (`work & exit 0`) keeps the hold. It is
//!   a child subreaper, so that such leftovers, orphaned, become its children
//!   and their exits wake it.
//! - **the command's status comes through**: it exits with the command's
//!   code, or 128+N when the command died of signal N; but when the group
//!   was told to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT: passed on by the
//!   tool, or sent by the terminal, whose foreground the group may have),
//!   it dies of that signal itself, which tells the tool to do the same.
//!
//! Signals sent to the group reach the guard too: it handles the ones that
//! would end it (see [`crate::signals::survive_group_signals`]) and lets the
//! stop signals (SIGTSTP, SIGTTIN, SIGTTOU) stop it, which is how the tool
//! learns that the job was stopped.
//!
//! What escapes it: a process that leaves the group (`setsid`, `setpgid`):
//! it is neither waited for nor stopped. What it cannot tell apart: a stop
//! signal the command sends its own group (`kill 0`, the `trap 'kill 0'
//! EXIT` idiom) from one the job was sent, so the tool then dies of it too.
//! What ends it early, and safely: SIGKILL while the tool lives, or a signal
//! the command sends its group that the guard cannot handle (SIGSEGV and the
//! like): the tool sees the guard die and kills the group.

use std::process::ExitStatus;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};

use crate::exit::{Code, Failure};
use crate::signals::{self, Stops};

/// How often the group is looked at without a wake-up: a leftover whose
/// parent is another leftover exits without telling the guard.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// Runs `command` in this process group while `tool` lives, and ends as
/// the group did (see the module's docs).
pub(crate) async fn run(tool: i32, terminal: bool, command: &[String]) -> Result<(), Failure> {
    let failed = |doing: &str, e: std::io::Error| {
        Failure::new(
            Code::ToolFailed,
            format!("the command's guard cannot {doing}: {e}"),
        )
    };
    let tool = Pid::from_raw(tool).ok_or_else(|| Failure::new(Code::Usage, "no tool pid"))?;
    // Started as /proc/self/exe, it would show as `exe` in ps and top. Only a
    // name: failing changes nothing else.
    let _ = rustix::thread::set_name(c"redisson-locks");
    // Listened for before the kernel is asked to send it, so it cannot be lost.
    let mut children = signals::listen(Signal::CHILD)?
        .ok_or_else(|| Failure::new(Code::ToolFailed, "SIGCHLD is ignored: cannot wait"))?;
    rustix::process::set_parent_process_death_signal(Some(Signal::CHILD))
        .map_err(|e| failed("watch the tool", e.into()))?;
    if rustix::process::getppid() != Some(tool) {
        // The tool died before the guard asked: nothing was started.
        return Err(Failure::Status(Code::ToolFailed as u8));
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| failed("adopt what the command leaves", e.into()))?;
    let mut stops = Stops::listen()?;
    signals::survive_group_signals()?;
    let group = rustix::process::getpgrp();
    if terminal {
        take_the_terminal(tool, group);
    }
    let started = start(command)?;
    let mut status = None;
    let mut told = None;
    loop {
        while let Some((pid, ended)) = reap()? {
            if pid == started {
                status = Some(crate::supervise::status_code(ended));
            }
        }
        if rustix::process::getppid() != Some(tool) {
            // The tool is gone: nothing of its command may run on.
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
            return Err(Failure::Signal(Signal::KILL));
        }
        if status.is_some() && !crate::group::others_live_in(group) {
            break;
        }
        tokio::select! {
            _ = children.recv() => {}
            stop = stops.next() => { told.get_or_insert(stop); }
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
    match (told, status) {
        (Some(stop), _) => Err(Failure::Signal(stop)),
        (None, Some(0)) => Ok(()),
        (None, Some(code)) => Err(Failure::Status(code)),
        (None, None) => Err(Failure::Status(Code::ToolFailed as u8)),
    }
}

/// Gives this group the terminal, if the tool's group has it still.
fn take_the_terminal(tool: Pid, group: Pid) {
    let tool_group = rustix::process::getpgid(Some(tool)).ok();
    if tool_group.is_some() && crate::terminal::foreground() == tool_group {
        // Failing, the command runs in the background of the terminal, as
        // it did before terminals were handed over: said, not fatal.
        if let Err(e) = crate::terminal::give_to(group) {
            crate::out::note(&format!(
                "redisson-locks: note: cannot give the command the terminal: {e}"
            ));
        }
    }
}

/// Starts the command, in this process group; its status is reaped by
/// [`reap`], not through the handle.
fn start(command: &[String]) -> Result<Pid, Failure> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| Failure::new(Code::Usage, "no command to run was given after --"))?;
    let child = std::process::Command::new(program)
        .args(args)
        .spawn()
        .map_err(|e| {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => Code::CommandNotFound,
                _ => Code::CannotExecute,
            };
            Failure::new(code, format!("cannot run '{program}': {e}"))
        })?;
    i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| Failure::new(Code::ToolFailed, "the command has no pid"))
}

/// The next child (the command, or a leftover it adopted) that ended.
fn reap() -> Result<Option<(Pid, ExitStatus)>, Failure> {
    use std::os::unix::process::ExitStatusExt as _;
    match rustix::process::wait(WaitOptions::NOHANG) {
        Ok(Some((pid, status))) => Ok(Some((pid, ExitStatus::from_raw(status.as_raw())))),
        Ok(None) => Ok(None),
        Err(rustix::io::Errno::CHILD) => Ok(None),
        Err(e) => Err(Failure::new(
            Code::ToolFailed,
            format!("the command's guard cannot wait: {e}"),
        )),
    }
}
