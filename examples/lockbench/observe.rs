//! What the bench observes: the server's command counts and lock clients (on a
//! connection of its own), the process's resident memory, and percentiles.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::options::err;

/// The bench's own view of the server, on a RESP2 connection of its own.
pub(crate) struct Observer {
    pub(crate) conn: redis::aio::MultiplexedConnection,
}

/// Commands a client sends itself (round trips); everything else in the command
/// stats ran inside scripts, except the observer's own INFO, CONFIG and CLIENT.
const CLIENT_COMMANDS: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "script|load",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "ping",
    "hello",
];
const OBSERVER_COMMANDS: &[&str] = &["info", "config|resetstat", "config|get", "client|list"];

impl Observer {
    pub(crate) async fn new(url: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(err)?;
        Ok(Observer {
            conn: client
                .get_multiplexed_async_connection()
                .await
                .map_err(err)?,
        })
    }

    /// calls per command from INFO commandstats.
    pub(crate) async fn command_stats(&mut self) -> Result<HashMap<String, u64>, String> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .map_err(err)?;
        Ok(info
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(':')?;
                let calls = stats
                    .strip_prefix("calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()?;
                Some((name.to_owned(), calls))
            })
            .collect())
    }

    /// (connections, subscriptions) of lock clients (RESP3 connections) now.
    pub(crate) async fn clients(&mut self) -> Result<(u64, u64), String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.conn)
            .await
            .map_err(err)?;
        let mut connections = 0;
        let mut subscriptions = 0;
        for line in list.lines().filter(|l| l.contains(" resp=3")) {
            connections += 1;
            for field in line.split(' ') {
                if let Some(n) = field
                    .strip_prefix("sub=")
                    .or_else(|| field.strip_prefix("ssub="))
                {
                    subscriptions += n.parse::<u64>().unwrap_or(0);
                }
            }
        }
        Ok((connections, subscriptions))
    }
}

/// What the clients sent between two command-stat snapshots.
pub(crate) fn command_diff(
    before: &HashMap<String, u64>,
    after: &HashMap<String, u64>,
) -> CommandCounts {
    let mut counts = CommandCounts::default();
    for (name, calls) in after {
        let delta = calls - before.get(name).copied().unwrap_or(0);
        if CLIENT_COMMANDS.contains(&name.as_str()) {
            counts.client += delta;
            if delta > 0 {
                counts.by_command.insert(name.clone(), delta);
            }
        } else if !OBSERVER_COMMANDS.contains(&name.as_str()) {
            counts.inner += delta;
        }
    }
    counts
}

/// What the clients sent during a run: round trips in all, and of each
/// command; and the commands that ran inside scripts.
#[derive(Debug, Default)]
pub(crate) struct CommandCounts {
    pub(crate) client: u64,
    pub(crate) by_command: std::collections::BTreeMap<String, u64>,
    pub(crate) inner: u64,
}

/// The process's resident memory (VmRSS) in KiB; 0 where /proc does not say.
pub(crate) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

/// Count, p50, p99 and max of `samples`, in µs.
pub(crate) fn percentiles(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort();
    let at = |p: f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    json!({"n": samples.len(), "p50": at(0.5), "p99": at(0.99), "max": at(1.0)})
}
