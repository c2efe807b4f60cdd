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

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal as NixSignal};
use rustix::process::Pid;

/// The process group in the foreground of the terminal on stdin; `None`
/// when stdin is not a terminal (or not this process's controlling one).
pub(crate) fn foreground() -> Option<Pid> {
    let stdin = std::io::stdin();
    if !rustix::termios::isatty(&stdin) {
        return None;
    }
    rustix::termios::tcgetpgrp(&stdin).ok()
}

/// Whether the tool's own process group has the terminal's foreground: only
/// then is the command's group given it.
pub(crate) fn ours() -> bool {
    foreground() == Some(rustix::process::getpgrp())
}

/// Makes `group` the terminal's foreground process group.
///
/// # Errors
/// When stdin is not the controlling terminal, or `group` is not in its session.
pub(crate) fn give_to(group: Pid) -> std::io::Result<()> {
    let mut ttou = SigSet::empty();
    ttou.add(NixSignal::SIGTTOU);
    let mut before = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut before))?;
    let given = rustix::termios::tcsetpgrp(std::io::stdin(), group);
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None)?;
    Ok(given?)
}
