//! The command line: what the tool accepts, and the help a newcomer reads at
//! 3 a.m. Everything `--help` promises is here, in one place, so the text and
//! the flags cannot drift apart.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "Look at and free Redisson-compatible locks, semaphores and latches in Redis";

const LONG_ABOUT: &str = "\
Look at and free Redisson-compatible locks, semaphores and latches in Redis:
who holds what, for how long, and who waits. It reads what Java Redisson and
Rust redisson-locks clients write alike.

The tool never takes a lock, so it never shows up as a holder itself; it
connects with announce off (it writes no identity key) under the client name
\"redisson-locks-cli\". Only `force-unlock` changes anything, and it asks first.";

const AFTER_HELP: &str = "\
Connecting:
  --url redis://[user:password@]host:port[/db]   (rediss:// for TLS)
  REDIS_URL=redis://...                          (the same, from the environment)
  --config redisson.yaml | redisson.json         (a Redisson config file: single
                                                  server, cluster or sentinel, with
                                                  its credentials and TLS files)
  Nothing given: redis://127.0.0.1:6379. --url and --config exclude each other;
  --config wins over REDIS_URL.

Examples:
  redisson-locks list 'orders:*'
  redisson-locks --url redis://10.0.0.5:6379 show orders:42
  redisson-locks watch orders:42 --interval 250
  redisson-locks --config redisson.yaml force-unlock orders:42
  redisson-locks --json list | jq '.objects[].name'

Exit codes:
  0  done
  1  failed: the server could not be reached or refused, a config file is bad,
     or the name cannot be forced (a semaphore or a latch)
  2  usage: a wrong command line
  3  show, force-unlock: no lock, semaphore or latch under the name
  4  force-unlock: not confirmed (answered no, or stdin is not a terminal and
     --yes is absent)";

/// The whole command line.
#[derive(Debug, Parser)]
#[command(
    name = "redisson-locks",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub(crate) struct Cli {
    /// Where the server is.
    #[command(flatten)]
    pub(crate) connection: Connection,
    /// Print machine-readable JSON instead of text (see each command's help).
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How to reach the server: a URL, or a Redisson configuration file.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// The server's URL: redis://[user:password@]host:port[/db], or rediss://
    /// for TLS [env: REDIS_URL] [default: redis://127.0.0.1:6379]
    // REDIS_URL is read in `connect.rs`, not through clap's `env`: a URL in the
    // environment must not conflict with an explicit --config.
    #[arg(long, value_name = "URL", global = true, conflicts_with = "config")]
    pub(crate) url: Option<String>,
    /// A Redisson configuration file: YAML (Redisson 3 and 4), or JSON when
    /// its name ends in .json
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) config: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the locks, semaphores and latches whose names match PATTERN
    ///
    /// One line each (holders, lease left, queue or count) and a summary.
    #[command(after_help = "\
Holders are shown as <first 8 characters of the client id>:<thread>, with their
mode and hold count. The names are found with SCAN (never KEYS), so the server
never blocks; at most 10000 are read, and a warning says when more matched.
With --json: the scan as one object, {\"objects\": [snapshot, ...], \"complete\": bool}.

Examples:
  redisson-locks list
  redisson-locks list 'orders:*'")]
    List {
        /// A Redis glob: `*` any run of characters, `?` one, `[ab]` a set.
        #[arg(default_value = "*")]
        pattern: String,
    },
    /// Show everything about one name
    ///
    /// Kind, TTL, each holder (owner, client id, thread, who the client is,
    /// holds, mode, leases), the fair queue with deadlines, counts, permits,
    /// fencing token, listeners.
    #[command(after_help = "\
A holder of a redisson-locks client shows its host, pid, name and version; a
Java Redisson client announces nothing and shows without. Exits with 3 when no
lock, semaphore or latch lives under NAME.
With --json: the snapshot as one object (times in milliseconds).

Example:
  redisson-locks show orders:42")]
    Show {
        /// The object's name, as the application names it (`orders:42`).
        name: String,
    },
    /// Watch one name live: who holds it for how long, who waits
    ///
    /// Redrawn whenever its channel says something happened, and at least
    /// every interval: holders and how long they have held it, waiters in order
    /// and how long they have waited.
    #[command(after_help = "\
\"Held for\" and \"waiting for\" count from when this watch first saw the owner
(Redis does not record when a hold began); \"at least\" marks owners already
there when the watch started. On a terminal each frame replaces the last;
otherwise frames follow each other, a blank line between them. Ctrl-C ends it
(the tool holds nothing, so nothing is left behind).
With --json: one object per line per frame, {\"frame\", \"snapshot\",
\"held_for_ms\", \"waiting_for_ms\"}.

Examples:
  redisson-locks watch orders:42
  redisson-locks watch orders:42 --interval 2000 --count 10
  redisson-locks watch orders:42 --poll --interval 250")]
    Watch {
        /// The object's name.
        name: String,
        /// Redraw at least this often, in milliseconds, even when nothing is said
        /// on the channel (a fair lock's hand-over speaks on the next waiter's own
        /// channel, and a lease that runs out says nothing).
        #[arg(long, value_name = "MS", default_value_t = 500,
              value_parser = clap::value_parser!(u64).range(1..))]
        interval: u64,
        /// Stop after N frames (for scripts and tests); without it, until Ctrl-C.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Read at the interval only, without listening on the channel. A
        /// listening watch counts as one more woken waiter in each release, so a
        /// client of redisson-locks that frees and retakes the lock back to back
        /// waits up to 5 ms for it each time; --poll leaves it alone.
        #[arg(long)]
        poll: bool,
    },
    /// Free a stuck lock, whoever holds it (asks first)
    ///
    /// Redisson's forceUnlock: shows what holds it, asks, frees it, and says
    /// what it freed.
    #[command(after_help = "\
The holders learn that they lost the lock at their next renewal or check; any
waiters are woken. Semaphores and latches have no holder to force out and are
refused. Without --yes it asks \"Force-unlock NAME? [y/N]\" on the terminal,
and refuses (exit 4) when stdin is not a terminal. Exits with 3 when nothing
lives under NAME.
With --json: {\"freed\": bool, \"before\": snapshot} (the prompt and what holds
it go to stderr).

Examples:
  redisson-locks force-unlock orders:42
  redisson-locks force-unlock orders:42 --yes")]
    ForceUnlock {
        /// The lock's name.
        name: String,
        /// Do not ask: free it at once (needed when stdin is not a terminal).
        #[arg(long, short)]
        yes: bool,
    },
}
