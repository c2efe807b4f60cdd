//! `redisson-locks`: the operator's tool for Redisson-compatible locks in
//! Redis. `list` what is held, `show` everything about one name, `watch` it
//! live, `force-unlock` what is stuck. Run `redisson-locks --help`.
//!
//! - `args.rs`: the command line and its help.
//! - `connect.rs`: a URL or a Redisson file, to a client that holds nothing.
//! - `list.rs`, `show.rs`, `watch.rs`, `force.rs`: one command each.
//! - `page.rs`, `units.rs`: text layout, and times and owners in words.
//! - `out.rs`: stdout, stderr and `--json`; `escape.rs`: what a terminal
//!   would act on, shown escaped in text output.
//! - `exit.rs`: exit codes and failures in words.

mod args;
mod connect;
mod escape;
mod exit;
mod force;
mod list;
mod out;
mod page;
mod show;
mod units;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

use args::{Cli, Command};
use exit::{Code, Failure};

fn main() -> ExitCode {
    // Bad arguments, --help and --version end here, with clap's exit codes.
    let cli = Cli::parse();
    // One thread is plenty: the client runs its connection on its own thread.
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
    exit::finish(runtime.block_on(run(cli)))
}

/// Connects, runs the command, and closes the client before the process
/// ends, so that its connection is given back in order.
async fn run(cli: Cli) -> Result<(), Failure> {
    let client = connect::connect(&cli.connection).await?;
    let json = cli.json;
    let result = match &cli.command {
        Command::List { pattern } => list::run(&client, pattern, json).await,
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
    };
    client.close().await;
    result
}
