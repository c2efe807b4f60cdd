//! How the tool ends: an exit code a script can branch on, and a sentence on
//! stderr for the person who ran it.

use std::io::Write as _;
use std::process::ExitCode;

use redisson_locks::Error;

/// The exit codes, as `--help` lists them. 0 is success; 2 is clap's, for a
/// wrong command line, before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// Something failed: the server could not be reached or refused, a
    /// configuration is bad, or the name cannot be forced (a semaphore).
    Failed = 1,
    /// `show` or `force-unlock` found no lock, semaphore or latch under the name.
    NotFound = 3,
    /// `force-unlock` was not confirmed: declined at the prompt, or no
    /// terminal to ask on and no `--yes`.
    NotConfirmed = 4,
    /// `deadlocks` found at least one cycle of waits.
    DeadlockFound = 5,
    /// `doctor` found at least one problem.
    NeedsFixing = 6,
    /// A name no lock can have (empty, too long), a `--grace` that cannot
    /// end before the hold does: a wrong command line, as clap's own 2.
    Usage = 2,
    /// `run`, `run-permit`, `elect`: what was held was lost, or about to be,
    /// while the command ran, and the command was stopped (or it was lost
    /// before the command ended).
    HoldLost = 123,
    /// `run`, `run-permit`, `elect`: not acquired within `--wait`.
    NotAcquired = 124,
    /// `run`, `run-permit`, `elect`: the tool itself failed (could not
    /// connect, the server refused); the commands that pass a child's status
    /// on use this rather than 1, which commands exit with so often.
    ToolFailed = 125,
    /// The command could not be executed (found, but not runnable).
    CannotExecute = 126,
    /// The command was not found.
    CommandNotFound = 127,
}

/// Why a command did not finish normally.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Ends with `code`, after saying `message` on stderr.
    Said {
        /// The exit code.
        code: Code,
        /// What happened, in words (no `error:` prefix: [`finish`] adds it).
        message: String,
    },
    /// Whoever read stdout went away (`| head`): stop quietly, as `cat` does.
    ReaderGone,
    /// The command `run` ran ended with this status, which the tool passes
    /// on: nothing to say.
    Status(u8),
    /// The tool (or the command's group) was told to stop by this signal:
    /// the tool dies of it, so that whoever started it sees "interrupted",
    /// not an exit code (a shell loop stops on it).
    Signal(rustix::process::Signal),
}

impl Failure {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure::Said {
            code,
            message: message.into(),
        }
    }

    /// An operational failure of the library, with what was being done.
    pub(crate) fn of(doing: &str, error: &Error) -> Failure {
        Failure::new(Code::Failed, format!("{doing}: {}", words(error)))
    }

    /// The same failure ending with `code` instead (a command that passes a
    /// child's status on fails with [`Code::ToolFailed`], not 1).
    pub(crate) fn with_code(self, code: Code) -> Failure {
        match self {
            Failure::Said { message, .. } => Failure::Said { code, message },
            other => other,
        }
    }
}

/// The library's error, as an operator reads it: an argument the library
/// refused is the reason itself (its `invalid argument:` prefix speaks to a
/// programmer, not to someone who typed a name).
pub(crate) fn words(error: &Error) -> String {
    match error {
        Error::InvalidArgument(reason) => reason.clone(),
        other => other.to_string(),
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Failure {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::ReaderGone
        } else {
            Failure::new(Code::Failed, format!("cannot write the output: {error}"))
        }
    }
}

/// The process's exit code for `result`, having said what went wrong.
pub(crate) fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) | Err(Failure::ReaderGone) => ExitCode::SUCCESS,
        Err(Failure::Status(status)) => ExitCode::from(status),
        Err(Failure::Signal(signal)) => die_of(signal),
        Err(Failure::Said { code, message }) => {
            // With stderr gone too there is nobody left to tell; the code still says it.
            // Escaped: the message may quote a name or what the server said.
            let message = crate::escape::escaped_lines(&message);
            let _ = writeln!(std::io::stderr(), "redisson-locks: {message}");
            ExitCode::from(code as u8)
        }
    }
}

/// Ends the process by `signal`, as its default action does: the way a shell
/// (or `flock`, or `timeout`) tells "interrupted" from "exited 130". SIGQUIT
/// dumps no core: the tool did not crash.
pub(crate) fn die_of(signal_: rustix::process::Signal) -> ! {
    if signal_ == rustix::process::Signal::QUIT {
        let none = rustix::process::Rlimit {
            current: Some(0),
            maximum: rustix::process::getrlimit(rustix::process::Resource::Core).maximum,
        };
        // Failing leaves at worst a core file of a tool that did not crash.
        let _ = rustix::process::setrlimit(rustix::process::Resource::Core, none);
    }
    // Restores the default action and raises the signal: for these signals
    // it does not return (it aborts should the signal fail to end the process).
    let _ = signal_hook::low_level::emulate_default_handler(signal_.as_raw());
    std::process::exit(128 + signal_.as_raw())
}
