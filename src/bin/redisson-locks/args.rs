//! The command line: what the tool accepts, and the help a newcomer reads at
//! 3 a.m. Everything `--help` promises is here, in one place, so the text and
//! the flags cannot drift apart.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str =
    "Look at, free and take Redisson-compatible locks, semaphores and latches in Redis";

const LONG_ABOUT: &str = "\
Look at and free Redisson-compatible locks, semaphores and latches in Redis:
who holds what, for how long, and who waits. It reads what Java Redisson and
Rust redisson-locks clients write alike. And run a command while holding a
lock, a permit or leadership, from a shell script, a cron job or a deploy step.

`list`, `show`, `watch`, `deadlocks` and `doctor` only look: they connect with announce off (no
identity key is written) under the client name \"redisson-locks-cli\".
`force-unlock` asks first. `run`, `run-permit` and `elect` take what they are
named for, as any client of the library would, and give it back when the
command ends.";

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
  2  usage: a wrong command line, or a name no lock can have
  3  show, force-unlock: no lock, semaphore or latch under the name
  4  force-unlock: not confirmed (answered no, or stdin is not a terminal and
     --yes is absent)
  5  deadlocks: at least one cycle of waits was found
  6  doctor: at least one problem was found
  run, run-permit, elect: the command's own exit status, or 128+N when it died
  of signal N; and these of the tool's own:
  123  the hold was lost while the command ran (lease lost, term over, forced
       open): the command was stopped, and its work was not surely protected
  124  not acquired within --wait
  125  the tool failed: could not connect, the server refused, a bad config
  126  the command could not be executed
  127  the command was not found";

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
    /// Print every deadlock across processes the server shows
    ///
    /// Cycles of waits: each waiter waits for a lock the next one's task
    /// holds. Found from the wait records that waits of redisson-locks clients
    /// write once they last longer than their client's deadlock threshold
    /// (1 s by default).
    #[command(after_help = "\
Each cycle is printed once, with each wait's owner, its process (host, pid,
name) when its client announced itself, the lock it waits for, since when,
and the owner that holds that lock. PATTERN keeps the cycles with a lock whose
name matches it. Exits with 5 when a cycle is found, 0 when none is.

What cannot be seen: a Java Redisson client writes no records, so a Java
thread is seen waiting only as an entry in the queue of a fair lock that a
recorded wait's task holds; any other holder whose wait is unknown (Java, a
wait shorter than the threshold, a client with OnDeadlock::Ignore) is a dead
end, counted in the summary. A walk stops after 64 waits or 512 reads.
With --json: {\"cycles\": [{\"steps\": [...]}, ...], \"waits\", \"dead_ends\", \"cut\", \"unreadable\"}.

Examples:
  redisson-locks deadlocks
  redisson-locks deadlocks 'orders:*' --json")]
    Deadlocks {
        /// A Redis glob over lock names: `*` any run of characters.
        #[arg(default_value = "*")]
        pattern: String,
    },
    /// Check the server for what in its setup breaks locks, and how to fix it
    ///
    /// The eviction policy, the durability asked for against what the server
    /// supports, the scripts, keys and channels the ACL allows, a cluster's
    /// state and slot coverage, sharded pub/sub, the replicas' lag, the round
    /// trip and server versions with behaviour locks notice; on every primary
    /// of a cluster, or the primary a Sentinel set names.
    #[command(after_help = "\
Each finding is one line: OK, ADVICE (works, with a risk or cost worth
knowing) or PROBLEM (breaks locks: a second owner, a lost hold, a refused
command), with the server it is about and, for the last two, how to fix it.
Exits with 6 when a problem is found, 0 when none is (advice alone is 0).
Nothing is written but one script in the script cache and a message to a
channel nobody hears.
With --json: {\"findings\": [{\"check\", \"node\", \"verdict\", \"detail\", \"fix\"}, ...]}.

Examples:
  redisson-locks doctor
  redisson-locks --config redisson.yaml doctor --durability aof --replicas 1
  redisson-locks --json doctor | jq '.findings[] | select(.verdict != \"ok\")'")]
    Doctor {
        /// The durability to check the server for: `replicas` (WAIT, the
        /// default), `aof` (WAITAOF 1 n: the primary's file too), or
        /// `replica-aof` (WAITAOF 0 n).
        #[arg(long, value_parser = ["replicas", "aof", "replica-aof"], default_value = "replicas")]
        durability: String,
        /// How many replicas must acknowledge each acquire (default: the
        /// config file's `checkLockSyncedSlaves`, else one where the server
        /// has any).
        #[arg(long)]
        replicas: Option<u32>,
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
    /// Run a command while holding a lock; release it when the command ends
    ///
    /// Takes NAME (a reentrant lock unless told otherwise), runs COMMAND while
    /// holding it, and releases it when COMMAND ends, however it ends.
    #[command(after_help = RUN_HELP)]
    Run {
        /// The lock's name.
        name: String,
        /// Which lock: reentrant (the default), fair, read, write or fenced.
        #[command(flatten)]
        kind: LockKind,
        #[command(flatten)]
        hold: HoldOptions,
        /// End the hold after this long even if the command still runs (the
        /// command is then stopped, exit 123): a term limit for a wedged job.
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_span)]
        max_hold: Option<std::time::Duration>,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Run a command while holding a permit of a semaphore: at most N at once
    ///
    /// Takes a permit of the permit-expirable semaphore NAME (renewed while
    /// held, given back when the command ends, and back by itself a lease
    /// after a holder dies), so that at most N copies of a job run at once
    /// across machines.
    #[command(alias = "acquire-permit", after_help = RUN_PERMIT_HELP)]
    RunPermit {
        /// The semaphore's name.
        name: String,
        /// Set the semaphore to N permits first, if it has none set yet (an
        /// existing count is kept, and a note on stderr says so).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        permits: Option<u32>,
        /// How long to wait for a permit: 0 tries once; without it, as long as
        /// it takes.
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
        wait: Option<std::time::Duration>,
        /// Take the permit of a fair semaphore (this crate's `RFairSemaphore`,
        /// which Java cannot share): waiters are served in arrival order,
        /// across machines, where the default semaphore lets whoever asks
        /// first after a release win.
        #[arg(long)]
        fair: bool,
        /// How long the command has between SIGTERM and SIGKILL when what it
        /// runs under is ending: SIGKILL lands before that stops being surely
        /// valid. At most a third of the watchdog's lease [default: 10s, or a
        /// third of that lease]
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
        grace: Option<std::time::Duration>,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Run a command as the leader of an election, or print each change of leader
    ///
    /// Campaigns for NAME and runs COMMAND while leading, with the epoch in its
    /// environment; stops it when leadership is lost, and resigns when it ends.
    /// With --listen, prints one line per change of leader instead.
    #[command(after_help = ELECT_HELP)]
    Elect {
        /// The election's name.
        name: String,
        /// Print each change of leader (and the leader at start), one line
        /// each, until interrupted; no command.
        #[arg(long, conflicts_with_all = ["command", "wait"])]
        listen: bool,
        /// With --listen: stop after N lines.
        #[arg(long, value_name = "N", requires = "listen",
              value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// How long to campaign before giving up (exit 124): 0 tries once;
        /// without it, as long as it takes.
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
        wait: Option<std::time::Duration>,
        /// How long the command has between SIGTERM and SIGKILL when what it
        /// runs under is ending: SIGKILL lands before that stops being surely
        /// valid. At most a third of the watchdog's lease [default: 10s, or a
        /// third of that lease]
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
        grace: Option<std::time::Duration>,
        /// The command and its arguments, after `--` (not with --listen).
        #[arg(
            last = true,
            value_name = "COMMAND",
            required_unless_present = "listen"
        )]
        command: Vec<String>,
    },
    /// The guard `run`, `run-permit` and `elect` start in their command's
    /// place (see `guard.rs`): not for people, so not in the help.
    #[command(name = "__guard", hide = true)]
    Guard {
        /// The tool's pid: the guard's parent, whose death it watches for.
        #[arg(long)]
        tool: i32,
        /// Take the terminal's foreground for the command's group.
        #[arg(long)]
        terminal: bool,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
}

impl Command {
    /// Whether it runs a command and passes that command's status on.
    pub(crate) fn runs_a_command(&self) -> bool {
        match self {
            Command::Run { .. } | Command::RunPermit { .. } => true,
            Command::Elect { listen, .. } => !listen,
            _ => false,
        }
    }
}

/// Which lock `run` takes: one flag at most.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub(crate) struct LockKind {
    /// A fair lock: waiters served first come, first served.
    #[arg(long)]
    pub(crate) fair: bool,
    /// The read side of a read-write lock: shared with other readers.
    #[arg(long)]
    pub(crate) read: bool,
    /// The write side of a read-write lock: alone.
    #[arg(long)]
    pub(crate) write: bool,
    /// A fenced lock: the command gets a fencing token greater than every
    /// earlier holder's, in REDISSON_LOCK_TOKEN.
    #[arg(long)]
    pub(crate) fenced: bool,
}

/// How `run` waits for and keeps its hold.
#[derive(Debug, Args)]
pub(crate) struct HoldOptions {
    /// How long to wait for the lock: 0 tries once; without it, as long as it
    /// takes. A number is seconds; or 500ms, 30s, 5m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub(crate) wait: Option<std::time::Duration>,
    /// Hold for this long at most, not renewed: before it ends the command is
    /// stopped (exit 123). Without it the hold is renewed while the command
    /// runs (the watchdog).
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_span)]
    pub(crate) lease: Option<std::time::Duration>,
    /// How long the command has between SIGTERM and SIGKILL when its hold is
    /// ending: SIGKILL lands before the hold stops being surely valid.
    /// Shorter than --lease and --max-hold, and at most a third of the
    /// watchdog's lease [default: 10s, or a third of the shortest of these]
    #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub(crate) grace: Option<std::time::Duration>,
}

/// What the commands that run a command have in common, for their help (a
/// macro: `concat!` takes literals only).
macro_rules! child_help {
    () => {
        "\
The command runs in a process group of its own, with the tool's stdin, stdout
and stderr. When the tool runs in the foreground of a terminal, the command's
group is given the terminal (so it can read it, and Ctrl-C and Ctrl-Z reach
it), and the tool takes the terminal back once the group is gone.

The command does not outlive the tool (Linux): a guard, the tool itself run
again, waits in the command's group and kills the whole group with SIGKILL the
moment the tool dies, even of SIGKILL. (A process that leaves the group, as
setsid does, escapes it.)

What is held is given back once the command, and whatever it left running in
its process group, has exited: `sh -c 'work & exit 0'` holds, renewed, until
`work` ends. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the tool are passed on
to the command's group; once the group is gone and what was held is given
back, the tool dies of the signal itself, as it does when Ctrl-C or Ctrl-\\ at
the terminal reached the command's group, so that a shell loop around it
stops. SIGTSTP (Ctrl-Z) stops the tool and the command together, SIGCONT (fg,
bg) continues both. A signal ignored when the tool started (nohup) stays
ignored, by the command too, and is not passed on.

When what is held is ending (its renewals fail, its lease or --max-hold runs
out, an operator forced it open, leadership is lost), the command's group gets
SIGTERM --grace before it stops being surely valid, and SIGKILL at the latest
when it does (at once when it was lost outright); the tool exits with 123. A
--grace that cannot end in time (not shorter than --lease or --max-hold, or
over a third of the watchdog's lease, which renewals that run late would
reach) is a wrong command line; the default, 10s, is shortened to fit.

Exit status: the command's own, or 128+N when it died of signal N; 123 hold
lost; 124 not acquired within --wait; 125 the tool failed (could not connect,
the server refused); 126 the command could not be executed; 127 not found; 2 a
wrong command line or a name no lock can have. The tool's own codes can also
be the command's: where that matters, have the command exit below 123.

Durations: a number of seconds (30, 1.5), or with a unit: 500ms, 30s, 5m, 1h."
    };
}

const RUN_HELP: &str = concat!(
    "\
The command's environment gets REDISSON_LOCK_NAME (the lock's name) and, with
--fenced, REDISSON_LOCK_TOKEN (its fencing token: send it with every write to a
store that refuses lower ones).

",
    child_help!(),
    "

Examples:
  redisson-locks run nightly-report -- ./report.sh
  redisson-locks run deploy:web --wait 0 -- ./deploy.sh   # exit 124 if held
  redisson-locks run ledger --fenced --lease 5m -- ./post-entries
  redisson-locks run cache --read --wait 30s -- ./read-cache"
);

const RUN_PERMIT_HELP: &str = concat!(
    "\
The command's environment gets REDISSON_LOCK_NAME and REDISSON_PERMIT_ID (the
permit's id, as Redisson prints it; with --fair, the hold's id). The permit is renewed by the watchdog
while the command runs; a holder that dies gives it back a lease later.

",
    child_help!(),
    "

Examples:
  redisson-locks run-permit renders --permits 4 -- ./render-one.sh
  redisson-locks run-permit renders --wait 0 -- ./render-one.sh   # 124 if all 4 are out
  redisson-locks run-permit renders --fair -- ./render-one.sh     # in arrival order"
);

const ELECT_HELP: &str = concat!(
    "\
The command's environment gets REDISSON_LOCK_NAME and REDISSON_LEADER_EPOCH
(the epoch: greater than every earlier leader's, a fencing token). The
election lives on the fenced lock's keys: a Java RFencedLock holder leads too.

With --listen: one line per change, the leader at start first:
  epoch 7: 6c47fd2f:1 (pid 4121 on web-3), since 09:15:02
  vacant
With --json, one object per line: {\"leader\": {...}} or {\"leader\": null}.
A change nothing announces (a leader's lease running out) is seen within a
third of a watchdog lease.

",
    child_help!(),
    "

Examples:
  redisson-locks elect scheduler -- ./run-scheduler
  redisson-locks elect scheduler --listen"
);

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;
    use crate::exit::Code;

    /// Every exit code, in the order `--help` lists them: the match is
    /// exhaustive, so a code added to the enum does not compile until it is
    /// placed here.
    fn after(code: Option<Code>) -> Option<Code> {
        match code {
            None => Some(Code::Failed),
            Some(Code::Failed) => Some(Code::Usage),
            Some(Code::Usage) => Some(Code::NotFound),
            Some(Code::NotFound) => Some(Code::NotConfirmed),
            Some(Code::NotConfirmed) => Some(Code::DeadlockFound),
            Some(Code::DeadlockFound) => Some(Code::NeedsFixing),
            Some(Code::NeedsFixing) => Some(Code::HoldLost),
            Some(Code::HoldLost) => Some(Code::NotAcquired),
            Some(Code::NotAcquired) => Some(Code::ToolFailed),
            Some(Code::ToolFailed) => Some(Code::CannotExecute),
            Some(Code::CannotExecute) => Some(Code::CommandNotFound),
            Some(Code::CommandNotFound) => None,
        }
    }

    fn all_codes() -> Vec<u8> {
        std::iter::successors(after(None), |code| after(Some(*code)))
            .map(|code| code as u8)
            .collect()
    }

    /// The numbers that open the lines of the top-level help's "Exit codes:".
    fn listed_codes() -> Vec<u8> {
        let (_, section) = AFTER_HELP.split_once("Exit codes:\n").expect("a section");
        section
            .lines()
            .filter_map(|line| line.split_whitespace().next()?.parse().ok())
            .collect()
    }

    #[test]
    fn the_help_lists_every_exit_code_the_tool_has() {
        let mut expected = vec![0];
        expected.extend(all_codes());
        assert_eq!(listed_codes(), expected);
    }

    /// The tool's subcommands as clap has them (the hidden `__guard` aside).
    fn subcommands() -> Vec<String> {
        Cli::command()
            .get_subcommands()
            .filter(|command| !command.is_hide_set())
            .map(|command| command.get_name().to_owned())
            .collect()
    }

    fn repository_file(path: &str) -> String {
        let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
    }

    /// The backquoted words that could name a subcommand in the first line
    /// of `text` that contains `marker` and the lines that continue it (a
    /// list item's indented lines), less the words around such a list.
    fn quoted_on_the_line_of(text: &str, marker: &str) -> Vec<String> {
        let mut lines = text.lines().skip_while(|line| !line.contains(marker));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("a line with {marker:?}"));
        let item = std::iter::once(first)
            .chain(lines.take_while(|line| line.starts_with("  ")))
            .collect::<Vec<_>>()
            .join(" ");
        item.split('`')
            .skip(1)
            .step_by(2)
            .filter(|word| word.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .filter(|word| !["cli", "redisson-locks", "yaml", "tls"].contains(word))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_document_that_lists_the_subcommands_lists_clap_s() {
        let mut expected = subcommands();
        expected.sort();
        assert_eq!(expected.len(), 9, "{expected:?}");
        let sorted = |mut names: Vec<String>| {
            names.sort();
            names
        };
        let lib = repository_file("src/lib.rs");
        assert_eq!(
            sorted(quoted_on_the_line_of(&lib, "| `cli` |")),
            expected,
            "src/lib.rs, the feature table's cli row"
        );
        let readme = repository_file("README.md");
        assert_eq!(
            sorted(quoted_on_the_line_of(&readme, "docs/cli.md)")),
            expected,
            "README.md, the link to docs/cli.md"
        );
        let manifest = repository_file("Cargo.toml");
        let (_, cli) = manifest
            .split_once("## The `redisson-locks` command-line tool (")
            .expect("Cargo.toml's cli feature comment");
        let (listed, _) = cli.split_once(")").expect("its list ends");
        let listed: Vec<String> = listed
            .split([',', ' ', '\n', '#'])
            .filter(|word| !word.is_empty())
            .map(str::to_owned)
            .collect();
        assert_eq!(sorted(listed), expected, "Cargo.toml, the cli feature");
        let page = repository_file("docs/cli.md");
        let headings: Vec<String> = page
            .lines()
            .filter_map(|line| line.strip_prefix("## ").or(line.strip_prefix("### ")))
            .filter(|title| title.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .map(str::to_owned)
            .collect();
        assert_eq!(sorted(headings), expected, "docs/cli.md, a section each");
    }

    #[test]
    fn the_reference_page_lists_every_exit_code_the_tool_has() {
        let page = repository_file("docs/cli.md");
        let (_, section) = page.split_once("## Exit codes\n").expect("the section");
        let section = section.split("\n## ").next().unwrap_or_default();
        let mut listed: Vec<u8> = section
            .lines()
            .filter_map(|line| line.strip_prefix("| ")?.split(' ').next()?.parse().ok())
            .collect();
        listed.sort_unstable();
        listed.dedup();
        let mut expected = vec![0];
        expected.extend(all_codes());
        expected.sort_unstable();
        assert_eq!(listed, expected);
    }

    #[test]
    fn each_command_names_its_own_exit_codes_as_the_enum_numbers_them() {
        let cli = Cli::command();
        let help = |name: &str| {
            cli.find_subcommand(name)
                .and_then(|command| command.get_after_help())
                .map(|text| text.to_string())
                .unwrap_or_default()
        };
        let deadlocks = help("deadlocks");
        assert!(
            deadlocks.contains(&format!(
                "Exits with {} when a cycle is found",
                Code::DeadlockFound as u8
            )),
            "{deadlocks}"
        );
        let doctor = help("doctor");
        assert!(
            doctor.contains(&format!(
                "Exits with {} when a problem is found",
                Code::NeedsFixing as u8
            )),
            "{doctor}"
        );
        let show = help("show");
        assert!(
            show.contains(&format!("Exits with {} when no", Code::NotFound as u8)),
            "{show}"
        );
        let force = help("force-unlock");
        assert!(
            force.contains(&format!("(exit {})", Code::NotConfirmed as u8))
                && force.contains(&format!("Exits with {} when nothing", Code::NotFound as u8)),
            "{force}"
        );
        for name in ["run", "run-permit", "elect"] {
            let text = help(name);
            for code in [
                Code::HoldLost,
                Code::NotAcquired,
                Code::ToolFailed,
                Code::CannotExecute,
                Code::CommandNotFound,
                Code::Usage,
            ] {
                assert!(
                    text.contains(&format!("{} ", code as u8)),
                    "{name} names {code:?}: {text}"
                );
            }
        }
    }
}
