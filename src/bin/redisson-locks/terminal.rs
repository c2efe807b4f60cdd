//! The controlling terminal's foreground: given to the command's process
//! group, so that it can read the terminal and Ctrl-C and Ctrl-Z reach it, and
//! taken back for the tool's group once that group is gone, as a shell does
//! for its jobs (`timeout --foreground` keeps the command in its own group
//! instead, and then cannot stop what the command started).
//!
//! A process outside the foreground that changes it would be stopped by
//! SIGTTOU; a shell ignores SIGTTOU for that, here it is blocked in the
//! calling thread for the one call (a blocked signal is not inherited by a
//! command: `std::process` clears the mask of what it starts).

use std::os::fd::{AsFd as _, BorrowedFd};

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal as NixSignal};
use rustix::process::Pid;

/// Runs `act` on the controlling terminal, as the first of stdin, stdout and
/// stderr that is on it (a command may prompt on `/dev/tty`, as sudo does,
/// whatever its stdin is); `None` when none is.
fn on_terminal<T>(
    act: impl FnOnce(BorrowedFd<'_>) -> std::io::Result<T>,
) -> Option<std::io::Result<T>> {
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let tty = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()]
        .into_iter()
        // tcgetpgrp answers only for the process's controlling terminal.
        .find(|fd| rustix::termios::isatty(fd) && rustix::termios::tcgetpgrp(fd).is_ok());
    tty.map(act)
}

/// The process group in the foreground of the controlling terminal; `None`
/// without one.
pub(crate) fn foreground() -> Option<Pid> {
    on_terminal(|tty| Ok(rustix::termios::tcgetpgrp(tty)?))?.ok()
}

/// Whether the tool's own process group has the terminal's foreground: only
/// then is the command's group given it.
pub(crate) fn ours() -> bool {
    foreground() == Some(rustix::process::getpgrp())
}

/// Makes `group` the terminal's foreground process group.
///
/// # Errors
/// When there is no controlling terminal, or `group` is not in its session.
pub(crate) fn give_to(group: Pid) -> std::io::Result<()> {
    on_terminal(|tty| {
        let mut ttou = SigSet::empty();
        ttou.add(NixSignal::SIGTTOU);
        let mut before = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut before))?;
        let given = rustix::termios::tcsetpgrp(tty, group);
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None)?;
        Ok(given?)
    })
    .unwrap_or_else(|| Err(std::io::ErrorKind::NotFound.into()))
}
