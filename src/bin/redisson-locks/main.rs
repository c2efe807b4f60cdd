//! `redisson-locks`: the operator's tool for Redisson-compatible locks in
//! Redis. `list` what is held, `show` everything about one name, `watch` it
//! live, find the `deadlocks` across processes, `force-unlock` what is stuck;
//! and from a shell, `run` a command under a lock, `run-permit` under a
//! semaphore's permit, `elect` a leader. Run `redisson-locks --help`;
//! `docs/cli.md` is the reference.
//!
//! - `args.rs`: the command line and its help.
//! - `connect.rs`: a URL or a Redisson file, to a client that holds nothing.
//! - `list.rs`, `show.rs`, `watch.rs`, `deadlocks.rs`, `force.rs`,
//!   `doctor.rs`: one command each.
//! - `run.rs`, `permit.rs`, `elect.rs`: a command run while holding a lock, a
//!   permit, leadership; `child.rs`: what it runs under, taken and given
//!   back; `supervise.rs`: its process group, its signals, the terminal, and
//!   stopping it as the hold ends (`deadline.rs`: when); `guard.rs`: the
//!   process that keeps the command from outliving the tool (`group.rs`:
//!   who is left in its group); `signals.rs`: the signals that stop the
//!   tool, and the ones it found ignored; `terminal.rs`: the terminal's
//!   foreground.
//! - `page.rs`, `units.rs`: text layout, and times and owners in words.
//! - `out.rs`: stdout, stderr and `--json`; `escape.rs`: what a terminal
//!   would act on, shown escaped in text output.
//! - `exit.rs`: exit codes and failures in words.

mod args;
mod child;
mod connect;
mod deadline;
mod deadlocks;
mod doctor;
mod elect;
mod escape;
mod exit;
mod force;
mod group;
mod guard;
mod held;
mod list;
mod out;
mod page;
mod permit;
mod run;
mod show;
mod signals;
mod supervise;
mod terminal;
mod units;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

use args::{Cli, Command};
use exit::{Code, Failure};

fn main() -> ExitCode {
    // Before anything installs a handler: what was ignored stays so.
    signals::record_ignored_at_start();
    // Bad arguments, --help and --version end here, with clap's exit codes.
    let cli = Cli::parse();
    // One thread is plenty: the client runs its connection on its own thread.
    // And it must be this one: the guard of a command the tool runs is told
    // of the tool's death when the thread that started it ends.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return exit::finish(Err(Failure::new(
                Code::Failed,
                format!("cannot start the async runtime: {e}"),
            )))
        }
    };
    if let Command::Guard {
        tool,
        terminal,
        command,
    } = &cli.command
    {
        return exit::finish(runtime.block_on(guard::run(*tool, *terminal, command)));
    }
    exit::finish(runtime.block_on(run(cli)))
}

/// Connects, runs the command, and closes the client before the process
/// ends, so that its connection is given back in order.
async fn run(cli: Cli) -> Result<(), Failure> {
    // A command that passes its child's status on says its own failures
    // with 125, not the 1 so many commands exit with.
    let holds = cli.command.runs_a_command();
    let failed = if holds {
        Code::ToolFailed
    } else {
        Code::Failed
    };
    // The doctor connects asking for no durability, so that a server that
    // cannot give it is a finding, not a refused connection.
    let doctor = matches!(cli.command, Command::Doctor { .. });
    let (client, wanted_sync) = connect::connect(&cli.connection, holds, doctor)
        .await
        .map_err(|f| f.with_code(failed))?;
    let json = cli.json;
    let result = match &cli.command {
        Command::List { pattern } => list::run(&client, pattern, json).await,
        Command::Deadlocks { pattern } => deadlocks::run(&client, pattern, json).await,
        Command::Doctor {
            durability,
            replicas,
        } => doctor::run(&client, durability, replicas.or(wanted_sync), json).await,
        Command::Show { name } => show::run(&client, name, json).await,
        Command::Watch {
            name,
            interval,
            count,
            poll,
        } => {
            let options = watch::Options {
                name,
                interval: Duration::from_millis(*interval),
                count: *count,
                poll: *poll,
                json,
            };
            watch::run(&client, options).await
        }
        Command::ForceUnlock { name, yes } => force::run(&client, name, *yes, json).await,
        Command::Run {
            name,
            kind,
            hold,
            max_hold,
            command,
        } => {
            let options = run::Options {
                name,
                kind,
                hold,
                max_hold: *max_hold,
                command,
            };
            run::run(&client, options).await
        }
        Command::RunPermit {
            name,
            permits,
            wait,
            fair,
            grace,
            command,
        } => {
            let options = permit::Options {
                name,
                permits: *permits,
                wait: *wait,
                fair: *fair,
                grace: *grace,
                command,
            };
            permit::run(&client, options).await
        }
        Command::Guard { .. } => Err(Failure::new(Code::Usage, "the guard runs on its own")),
        Command::Elect {
            name,
            listen,
            count,
            wait,
            grace,
            command,
        } => {
            let options = elect::Options {
                name,
                listen: *listen,
                count: *count,
                wait: *wait,
                grace: *grace,
                command,
                json,
            };
            elect::run(&client, options).await
        }
    };
    client.close().await;
    result
}
