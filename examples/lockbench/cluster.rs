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
//!   busiest second (`PUBSUB SHARDCHANNELS`), sampled while it runs;
//! - each shard's CPU time (`INFO cpu`, user and system: every primary is a
//!   process of its own) and Jain's index over the shards: the split the
//!   servers measure, not one inferred from command counts;
//! - where the server has `CLUSTER SLOT-STATS` (Valkey 8.0 on, Redis 8.2 on,
//!   with `cluster-slot-stats-enabled`), each shard's slots' CPU time and
//!   bytes out, summed. Those servers do not count a script's CPU time or
//!   its input against its keys' slot (measured on Valkey 9.1 and Redis 8.2:
//!   200 `EVAL`s of a `SET` leave the slot at 0 µs and 0 bytes in, the same
//!   200 `SET`s at about 200 µs), so for this crate, whose every change is a
//!   script, SLOT-STATS sees the replies only (`bytes_out`); its CPU field is
//!   reported as read. Elsewhere (Redis 7.0) those fields are `null`.

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
    /// The process's CPU time, user and system (`INFO cpu`), in µs.
    cpu_us: u64,
    /// Its slots' CPU time and bytes out, from `CLUSTER SLOT-STATS`, where
    /// the server has it.
    slot_stats: Option<SlotStats>,
}

/// One node's `CLUSTER SLOT-STATS`, summed over the slots it serves.
#[derive(Default, Clone, Copy)]
struct SlotStats {
    cpu_usec: u64,
    bytes_out: u64,
}

/// Sums `CLUSTER SLOT-STATS SLOTSRANGE 0 16383` (the node answers for the
/// slots it serves): each entry is a slot and its metrics, name then value.
fn sum_slot_stats(reply: &redis::Value) -> Option<SlotStats> {
    use redis::Value;
    let entries = match reply {
        Value::Array(entries) => entries,
        _ => return None,
    };
    let mut sum = SlotStats::default();
    for entry in entries {
        let Value::Array(pair) = entry else { continue };
        let metrics: Vec<(&Value, &Value)> = match pair.get(1) {
            Some(Value::Map(map)) => map.iter().map(|(k, v)| (k, v)).collect(),
            Some(Value::Array(flat)) => flat
                .chunks(2)
                .filter_map(|c| Some((c.first()?, c.get(1)?)))
                .collect(),
            _ => continue,
        };
        for (name, value) in metrics {
            let name = match name {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => continue,
            };
            let Value::Int(n) = value else { continue };
            let n = u64::try_from(*n).unwrap_or(0);
            match name.as_str() {
                "cpu-usec" => sum.cpu_usec += n,
                "network-bytes-out" => sum.bytes_out += n,
                _ => {}
            }
        }
    }
    Some(sum)
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
        let cpu: String = redis::cmd("INFO")
            .arg("cpu")
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        let seconds = |name: &str| -> f64 {
            cpu.lines()
                .find_map(|line| line.strip_prefix(&format!("{name}:")))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let cpu_us = ((seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6) as u64;
        let slot_stats: Option<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOT-STATS")
            .arg("SLOTSRANGE")
            .arg(0)
            .arg(16383)
            .query_async(&mut conn)
            .await
            .ok();
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
            cpu_us,
            slot_stats: slot_stats.as_ref().and_then(sum_slot_stats),
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
            cpu_us: a.cpu_us.saturating_sub(b.cpu_us),
            slot_stats: match (b.slot_stats, a.slot_stats) {
                (Some(b), Some(a)) => Some(SlotStats {
                    cpu_usec: a.cpu_usec.saturating_sub(b.cpu_usec),
                    bytes_out: a.bytes_out.saturating_sub(b.bytes_out),
                }),
                _ => None,
            },
        })
        .collect();
    // The servers' own split: each process's CPU time, and (SLOT-STATS)
    // each shard's slots' bytes out.
    let cpu: Vec<u64> = diff.iter().map(|c| c.cpu_us).collect();
    let cpu_total: u64 = cpu.iter().sum();
    let bytes_out: Option<Vec<u64>> = diff
        .iter()
        .map(|c| c.slot_stats.map(|s| s.bytes_out))
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
                "cpu_us": c.cpu_us,
                "cpu_share": c.cpu_us as f64 / cpu_total.max(1) as f64,
                "slot_stats_cpu_usec": c.slot_stats.map(|s| s.cpu_usec),
                "slot_stats_bytes_out": c.slot_stats.map(|s| s.bytes_out),
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
        "jain_cpu_over_shards": crate::workload::jain(&cpu),
        "jain_slot_stats_bytes_out_over_shards": bytes_out.as_deref().map(crate::workload::jain),
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
            // Per-slot CPU and network counts (CLUSTER SLOT-STATS) are off by
            // default; a server without them refuses, and the report says null.
            for node in &nodes {
                let _ = Command::new("redis-cli")
                    .args(["-p", &node.port().to_string()])
                    .args(["config", "set", "cluster-slot-stats-enabled", "yes"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            return Ok(nodes);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the cluster did not come up within 30 s".into())
}
