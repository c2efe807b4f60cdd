//! The flags: what to run, checked before any server is started.

use std::time::Duration;

use crate::args::Args;

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Kind {
    Reentrant,
    Fair,
    Read,
    Write,
    RwMix,
    Fenced,
    Spin,
    NonReentrant,
    /// A multi-lock over two locks of one server.
    Multi,
    /// The single-hash multi-lock over two values of one group.
    Group,
    /// A RedLock over three clients (of one server here: what it costs, not what
    /// it survives).
    RedLock,
    /// A semaphore (`RSemaphore`) of `--permits` permits per lock name.
    Semaphore,
    /// A fair semaphore (`RFairSemaphore`) of `--permits` permits per lock
    /// name: its waiters served in arrival order.
    FairSemaphore,
}

impl Kind {
    /// Its name, as `--kind` takes it and the report says it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::RwMix => "rw-mix",
            Kind::Fenced => "fenced",
            Kind::Spin => "spin",
            Kind::NonReentrant => "non-reentrant",
            Kind::Multi => "multi",
            Kind::Group => "group",
            Kind::RedLock => "redlock",
            Kind::Semaphore => "semaphore",
            Kind::FairSemaphore => "fair-semaphore",
        }
    }

    /// The kind `--kind` names.
    fn from_name(name: &str) -> Result<Kind, String> {
        Ok(match name {
            "reentrant" => Kind::Reentrant,
            "fair" => Kind::Fair,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "rw-mix" => Kind::RwMix,
            "fenced" => Kind::Fenced,
            "spin" => Kind::Spin,
            "non-reentrant" => Kind::NonReentrant,
            "multi" => Kind::Multi,
            "group" => Kind::Group,
            "redlock" => Kind::RedLock,
            "semaphore" => Kind::Semaphore,
            "fair-semaphore" => Kind::FairSemaphore,
            other => return Err(format!("unknown kind {other}")),
        })
    }
}

pub(crate) struct Options {
    pub(crate) kind: Kind,
    pub(crate) tasks: usize,
    pub(crate) clients: usize,
    pub(crate) locks: usize,
    /// `--permits N`: the permits of each semaphore (`semaphore`,
    /// `fair-semaphore`); 1 by default, a lock's worth.
    pub(crate) permits: usize,
    pub(crate) ops: usize,
    pub(crate) hold: Duration,
    pub(crate) max_seconds: f64,
    pub(crate) write_pct: usize,
    pub(crate) url: Option<String>,
    /// `--cluster N`: the workload on a cluster of N primaries this run
    /// starts (see `cluster.rs`).
    pub(crate) cluster: Option<usize>,
    /// `--broadcast`: on a cluster, unlock messages by broadcast pub/sub
    /// (`Config::sharded_pubsub = Some(false)`), for comparison.
    pub(crate) broadcast: bool,
    /// A label copied into the output, naming the workload.
    pub(crate) workload: Option<String>,
    pub(crate) scale_watchdog: bool,
    /// `--scale waiters`: many waiters each served once, reentrant then fair.
    pub(crate) scale_waiters: bool,
    /// `--scale spread`: many waiters over many locks, from one client.
    pub(crate) scale_spread: bool,
    /// `--scale handoff-floor`: the fastest a handoff can be with this driver.
    pub(crate) handoff_floor: bool,
    /// `--scale deadlocks`: how long rings of clients take to be named.
    pub(crate) scale_deadlocks: bool,
    pub(crate) waiters: usize,
    pub(crate) watchdog_locks: usize,
    pub(crate) watchdog_ms: u64,
    /// `--metrics`: record the crate's metrics into a Prometheus recorder.
    pub(crate) metrics: bool,
    /// `--scale nested`: nested locks across processes (see `nested.rs`).
    pub(crate) scale_nested: bool,
    /// `--nested-child`: one of those processes, of the run `--run`.
    pub(crate) nested_child: Option<String>,
    /// `--each-heuristic`: the nested run once per heuristic switched off.
    pub(crate) each_heuristic: bool,
    /// `--rounds`: how many times `--each-heuristic` runs its rows.
    pub(crate) rounds: usize,
    pub(crate) nested: crate::nested::Nested,
}

pub(crate) fn parse() -> Result<Options, String> {
    let mut o = Options {
        kind: Kind::Reentrant,
        tasks: 16,
        clients: 1,
        locks: 1,
        permits: 1,
        ops: 100,
        hold: Duration::from_micros(100),
        max_seconds: 60.0,
        write_pct: 20,
        url: None,
        cluster: None,
        broadcast: false,
        workload: None,
        scale_watchdog: false,
        scale_waiters: false,
        scale_spread: false,
        scale_deadlocks: false,
        handoff_floor: false,
        waiters: 10_000,
        watchdog_locks: 10_000,
        watchdog_ms: 3_000,
        metrics: false,
        scale_nested: false,
        nested_child: None,
        each_heuristic: false,
        rounds: 1,
        nested: crate::nested::Nested {
            processes: 4,
            clients: 1,
            tasks: 4,
            seconds: 10.0,
            all_kinds: false,
            without: String::new(),
        },
    };
    let mut run = None;
    let mut tasks_given = false;
    let mut args = Args::from_env(None);
    while let Some(flag) = args.next_flag() {
        let f = flag.as_str();
        match f {
            "--bench" => {} // passed by `cargo bench`-style runners
            "--metrics" => o.metrics = true,
            "--kind" => o.kind = Kind::from_name(&args.value(f)?)?,
            "--scale" => scale(&mut o, &args.value(f)?)?,
            "--tasks" => {
                o.tasks = args.count(f)?;
                tasks_given = true;
            }
            "--waiters" => o.waiters = args.count(f)?,
            "--clients" => o.clients = args.count(f)?,
            "--locks" => o.locks = args.count(f)?,
            "--permits" => o.permits = args.count(f)?,
            "--ops" => o.ops = args.count(f)?,
            "--hold-us" => o.hold = Duration::from_micros(args.number(f)?),
            "--max-seconds" => o.max_seconds = args.parsed(f, "a number")?,
            "--write-pct" => o.write_pct = args.count(f)?,
            "--url" => o.url = Some(args.value(f)?),
            "--cluster" => o.cluster = Some(args.count(f)?),
            "--broadcast" => o.broadcast = true,
            "--workload" => o.workload = Some(args.value(f)?),
            "--port" => {
                let port = args.number(f)?;
                if port == 0 || port > u64::from(u16::MAX) {
                    return Err(format!("--port: {port} is not a TCP port (1 to 65535)"));
                }
                o.url = Some(format!("redis://127.0.0.1:{port}"));
            }
            "--processes" => o.nested.processes = args.count(f)?,
            "--seconds" => o.nested.seconds = args.parsed(f, "a number")?,
            "--mix" => {
                o.nested.all_kinds = match args.value(f)?.as_str() {
                    "all" => true,
                    "fair-reentrant" => false,
                    other => return Err(format!("--mix: {other} (fair-reentrant or all)")),
                }
            }
            "--without" => o.nested.without = args.value(f)?,
            "--each-heuristic" => o.each_heuristic = true,
            "--rounds" => o.rounds = args.count(f)?,
            "--nested-child" => o.nested_child = Some(String::new()),
            "--run" => run = Some(args.value(f)?),
            "--recheck-ms" => {
                let _ = RECHECK.set(Duration::from_millis(args.number(f)?));
            }
            "--watchdog-locks" => o.watchdog_locks = args.count(f)?,
            "--watchdog-ms" => o.watchdog_ms = args.number(f)?,
            _ => return Err(args.unknown(f)),
        }
    }
    if o.nested_child.is_some() {
        o.nested_child = Some(run.ok_or("--nested-child needs --run")?);
    }
    // The nested run's tasks are per process, 4 unless --tasks says.
    if (o.scale_nested || o.nested_child.is_some()) && !tasks_given {
        o.tasks = o.nested.tasks;
    }
    o.nested.tasks = o.tasks;
    o.nested.clients = o.clients;
    check(&o)?;
    if !(o.nested.seconds.is_finite() && o.nested.seconds > 0.0 && o.nested.seconds <= 3600.0) {
        return Err(format!("--seconds: {} (0 to 3600)", o.nested.seconds));
    }
    Ok(o)
}

/// `--scale`: which scale run.
fn scale(o: &mut Options, run: &str) -> Result<(), String> {
    match run {
        "watchdog" => o.scale_watchdog = true,
        "waiters" => o.scale_waiters = true,
        "spread" => o.scale_spread = true,
        "handoff-floor" => o.handoff_floor = true,
        "deadlocks" => o.scale_deadlocks = true,
        "nested" => o.scale_nested = true,
        other => {
            return Err(format!(
                "unknown scale run {other} (watchdog, waiters, spread, handoff-floor, deadlocks, nested)"
            ))
        }
    }
    Ok(())
}

/// Refuses options that would make a meaningless run (or panic) before any
/// server is started.
fn check(o: &Options) -> Result<(), String> {
    for (flag, value) in [
        ("--tasks", o.tasks),
        ("--clients", o.clients),
        ("--locks", o.locks),
        ("--permits", o.permits),
        ("--ops", o.ops),
        ("--watchdog-locks", o.watchdog_locks),
    ] {
        if value == 0 {
            return Err(format!("{flag} must be at least 1"));
        }
    }
    if o.write_pct > 100 {
        return Err(format!(
            "--write-pct: {} is not a percentage (0 to 100)",
            o.write_pct
        ));
    }
    // `Duration::from_secs_f64` panics on a negative, NaN or overflowing value.
    if !(o.max_seconds.is_finite() && o.max_seconds > 0.0 && o.max_seconds <= 1e9) {
        return Err(format!(
            "--max-seconds: {} must be a positive number of seconds",
            o.max_seconds
        ));
    }
    // The client's own minimum: renewal runs every third of it.
    if o.watchdog_ms < 30 {
        return Err(format!(
            "--watchdog-ms: {} is too short (at least 30 ms)",
            o.watchdog_ms
        ));
    }
    Ok(())
}

/// `--recheck-ms`: the clients' re-check interval, when not the default.
static RECHECK: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// A client configuration for `url`, as the flags ask (`--recheck-ms`).
pub(crate) fn client_config(url: &str) -> Result<redisson_locks::Config, String> {
    let mut config = redisson_locks::Config::from_url(url).map_err(err)?;
    if let Some(recheck) = RECHECK.get() {
        config.recheck_interval = *recheck;
    }
    Ok(config)
}

/// The `--recheck-ms` flag to pass on to a child process, if one was given.
pub(crate) fn recheck_flag() -> Option<String> {
    RECHECK.get().map(|recheck| recheck.as_millis().to_string())
}

pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
