//! `--cluster N`: the contended workload on a Redis Cluster of `N` primaries
//! (no replicas) that this run starts, measuring how the load splits across
//! the shards and what each release costs the cluster, rather than
//! throughput (one machine's two cores serve every shard):
//!
//! - each shard's share of the commands (`INFO commandstats`, summed), and
//!   Jain's index over the shards;
//! - the cluster bus messages a release costs (`CLUSTER INFO`'s
//!   `cluster_stats_messages_publish_sent`, what a broadcast `PUBLISH` sends
//!   every other node, and `..._publishshard_sent`, what a sharded one sends
//!   its shard's replicas: none here);
//! - the shard channels subscribed on each node at the end of the run's
//!   busiest second (`PUBSUB SHARDCHANNELS`), sampled while it runs.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redisson_locks::testing::{default_binary, TestServer};
use redisson_locks::{Client, Config};
use serde_json::json;

use crate::options::{err, Options};

/// Runs the workload the options describe on a cluster of `primaries`.
pub(crate) async fn run(o: &Options, primaries: usize) -> Result<serde_json::Value, String> {
    let nodes = start(primaries)?;
    let addresses: Vec<String> = nodes.iter().map(TestServer::url).collect();
    let mut clients = Vec::new();
    for _ in 0..o.clients {
        let mut config = Config::cluster(addresses.clone());
        config.replica_sync = Some(0);
        if o.broadcast {
            config.sharded_pubsub = Some(false);
        }
        clients.push(Client::connect(config).await.map_err(err)?);
    }
    let before = snapshot(&nodes).await?;
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = tokio::spawn(sample_channels(addresses.clone(), sampling.clone()));
    let acquired = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(o.max_seconds);
    let mut tasks = Vec::new();
    for task in 0..o.tasks {
        let client = clients[task % clients.len()].clone();
        let (acquired, ops, hold) = (acquired.clone(), o.ops, o.hold);
        let (tasks_n, locks) = (o.tasks, o.locks);
        tasks.push(tokio::spawn(async move {
            for op in 0..ops {
                if Instant::now() > deadline {
                    break;
                }
                // Task t's op k takes lock (t + k * tasks) % locks: with more
                // locks than tasks, every lock is used, and the names spread
                // over the slots as a service's would.
                let name = format!("bench:{}", (task + op * tasks_n) % locks);
                let lock = client.get_lock(&name).map_err(err)?;
                let guard = lock.lock().await.map_err(err)?;
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                guard.unlock().await.map_err(err)?;
                acquired.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(err)??;
    }
    let wall = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let peak_channels = sampler.await.map_err(err)?;
    let after = snapshot(&nodes).await?;
    for client in clients {
        client.close().await;
    }
    let acquisitions = acquired.load(Ordering::Relaxed);
    Ok(report(
        o,
        primaries,
        acquisitions,
        wall,
        &before,
        &after,
        &peak_channels,
    ))
}

/// The commands this run sends to look, not the clients' work.
const OWN_LOOKS: [&str; 3] = [
    "cmdstat_info:",
    "cmdstat_cluster|info:",
    "cmdstat_pubsub|shardchannels:",
];

/// What one node had counted at one instant.
#[derive(Default, Clone)]
struct Counts {
    /// Every command's calls (`INFO commandstats`), summed.
    commands: u64,
    /// `SPUBLISH` and `PUBLISH` calls.
    spublish: u64,
    publish: u64,
    /// The cluster bus messages it sent for broadcast and sharded publishes.
    bus_publish: u64,
    bus_publishshard: u64,
}

async fn snapshot(nodes: &[TestServer]) -> Result<Vec<Counts>, String> {
    let mut all = Vec::new();
    for node in nodes {
        let client = redis::Client::open(node.url()).map_err(err)?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(err)?;
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        let bus: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        let calls = |line: &str| -> u64 {
            line.split(',')
                .find_map(|part| part.split_once("calls=").map(|(_, n)| n))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let command = |name: &str| -> u64 {
            stats
                .lines()
                .find(|line| line.starts_with(&format!("cmdstat_{name}:")))
                .map_or(0, calls)
        };
        let field = |name: &str| -> u64 {
            bus.lines()
                .find_map(|line| line.strip_prefix(&format!("{name}:")))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0)
        };
        all.push(Counts {
            // The run's own looks (this snapshot, the sampler) left out.
            commands: stats
                .lines()
                .filter(|l| l.starts_with("cmdstat_"))
                .filter(|l| !OWN_LOOKS.iter().any(|own| l.starts_with(own)))
                .map(calls)
                .sum(),
            spublish: command("spublish"),
            publish: command("publish"),
            bus_publish: field("cluster_stats_messages_publish_sent"),
            bus_publishshard: field("cluster_stats_messages_publishshard_sent"),
        });
    }
    Ok(all)
}

/// The most shard channels each node had subscribed in one sample (every
/// 100 ms while the run goes on).
async fn sample_channels(addresses: Vec<String>, sampling: Arc<AtomicBool>) -> Vec<u64> {
    let mut peaks = vec![0; addresses.len()];
    let mut conns = Vec::new();
    for address in &addresses {
        let conn = match redis::Client::open(address.as_str()) {
            Ok(client) => client.get_multiplexed_async_connection().await.ok(),
            Err(_) => None,
        };
        conns.push(conn);
    }
    while sampling.load(Ordering::Relaxed) {
        for (peak, conn) in peaks.iter_mut().zip(conns.iter_mut()) {
            if let Some(conn) = conn {
                let channels: redis::RedisResult<Vec<String>> = redis::cmd("PUBSUB")
                    .arg("SHARDCHANNELS")
                    .query_async(conn)
                    .await;
                if let Ok(channels) = channels {
                    *peak = (*peak).max(channels.len() as u64);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    peaks
}

fn report(
    o: &Options,
    primaries: usize,
    acquisitions: u64,
    wall: Duration,
    before: &[Counts],
    after: &[Counts],
    peak_channels: &[u64],
) -> serde_json::Value {
    let diff: Vec<Counts> = before
        .iter()
        .zip(after)
        .map(|(b, a)| Counts {
            commands: a.commands.saturating_sub(b.commands),
            spublish: a.spublish.saturating_sub(b.spublish),
            publish: a.publish.saturating_sub(b.publish),
            bus_publish: a.bus_publish.saturating_sub(b.bus_publish),
            bus_publishshard: a.bus_publishshard.saturating_sub(b.bus_publishshard),
        })
        .collect();
    let total: u64 = diff.iter().map(|c| c.commands).sum();
    let shares: Vec<f64> = diff
        .iter()
        .map(|c| c.commands as f64 / total.max(1) as f64)
        .collect();
    let commands: Vec<u64> = diff.iter().map(|c| c.commands).collect();
    let jain = crate::workload::jain(&commands);
    let per = |n: u64| n as f64 / acquisitions.max(1) as f64;
    let shards: Vec<serde_json::Value> = diff
        .iter()
        .zip(&shares)
        .zip(peak_channels)
        .map(|((c, share), channels)| {
            json!({
                "commands": c.commands, "share": share, "spublish": c.spublish,
                "publish": c.publish, "bus_publish_sent": c.bus_publish,
                "bus_publishshard_sent": c.bus_publishshard, "peak_shard_channels": channels,
            })
        })
        .collect();
    let mut by_kind: HashMap<&str, u64> = HashMap::new();
    for c in &diff {
        *by_kind.entry("spublish").or_default() += c.spublish;
        *by_kind.entry("publish").or_default() += c.publish;
        *by_kind.entry("bus").or_default() += c.bus_publish + c.bus_publishshard;
    }
    json!({
        "workload": o.workload, "cluster": primaries, "broadcast": o.broadcast,
        "kind": o.kind.name(), "tasks": o.tasks, "clients": o.clients,
        "locks": o.locks, "hold_us": o.hold.as_micros() as u64, "acquisitions": acquisitions,
        "acq_per_s": acquisitions as f64 / wall.as_secs_f64(),
        "commands_per_acq": per(total),
        "jain_over_shards": jain,
        "publishes_per_acq": per(by_kind["spublish"] + by_kind["publish"]),
        "sharded_publishes_per_acq": per(by_kind["spublish"]),
        "bus_messages_per_publish": by_kind["bus"] as f64
            / (by_kind["spublish"] + by_kind["publish"]).max(1) as f64,
        "shards": shards,
    })
}

/// Starts `primaries` cluster nodes and joins them (`redis-cli --cluster
/// create`, no replicas); waits until the cluster serves.
fn start(primaries: usize) -> Result<Vec<TestServer>, String> {
    if primaries < 3 && primaries != 1 {
        return Err("--cluster: 1, or 3 and more primaries (a cluster of two cannot vote)".into());
    }
    let mut nodes = Vec::new();
    for _ in 0..primaries {
        let node = TestServer::start_with(
            default_binary(),
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--maxclients",
                "10000",
            ],
        )
        .map_err(err)?;
        nodes.push(node);
    }
    if primaries == 1 {
        let node = &nodes[0];
        let status = Command::new("redis-cli")
            .args([
                "-p",
                &node.port().to_string(),
                "cluster",
                "addslotsrange",
                "0",
                "16383",
            ])
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("redis-cli: {e}"))?;
        if !status.success() {
            return Err("CLUSTER ADDSLOTSRANGE failed".into());
        }
    } else {
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let status = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
        if !status.success() {
            return Err("redis-cli --cluster create failed".into());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let ok = nodes.iter().all(|node| {
            Command::new("redis-cli")
                .args(["-p", &node.port().to_string(), "cluster", "info"])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok"))
        });
        if ok {
            return Ok(nodes);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the cluster did not come up within 30 s".into())
}
