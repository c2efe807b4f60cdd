//! A real Redis Cluster on loopback: six `redis-server` processes (three primaries,
//! three replicas) joined with `redis-cli --cluster create`, each killed on drop.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, server_version, RedisServer};
use redisson_locks::{Client, Config};

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

/// A free port whose cluster bus port (port + 10000, before Redis 7.0) is free too.
fn port_with_free_bus() -> u16 {
    for _ in 0..1000 {
        let port = free_port();
        let Some(bus) = port.checked_add(10000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
    panic!("no free port with a free bus port (port + 10000)");
}

impl RedisCluster {
    /// Starts and joins a 3 primary + 3 replica cluster; waits until it serves.
    pub fn start() -> RedisCluster {
        Self::start_with(&[])
    }

    /// [`start`](Self::start) with `extra` arguments for every node.
    pub fn start_with(extra: &[&str]) -> RedisCluster {
        for _ in 0..3 {
            if let Some(cluster) = Self::try_start(extra) {
                return cluster;
            }
        }
        panic!("could not form a redis cluster");
    }

    fn try_start(extra: &[&str]) -> Option<RedisCluster> {
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let bus = free_port().to_string();
            let mut args = vec![
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "1000",
                // A replica may take over however long it was cut off (tests kill
                // primaries soon after the cluster forms).
                "--cluster-replica-validity-factor",
                "0",
            ];
            args.extend_from_slice(extra);
            // The bus port is an option from 7.0 on; before, it is port + 10000.
            let node = if server_version().at_least(7, 0) {
                args.extend(["--cluster-port", &bus]);
                RedisServer::start_with(&args)
            } else {
                RedisServer::start_on(&args, port_with_free_bus)
            };
            nodes.push(node);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let status = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        let cluster = RedisCluster { nodes };
        cluster
            .wait_until_ok(Duration::from_secs(30))
            .then_some(cluster)
    }

    /// Waits until every live node reports `cluster_state:ok`.
    pub fn wait_until_ok(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let all_ok = self.nodes.iter().filter(|n| n.is_running()).all(|node| {
                Command::new("redis-cli")
                    .args(["-p", &node.port().to_string(), "cluster", "info"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
                    .unwrap_or(false)
            });
            if all_ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Waits until a live node reports the killed node `index` as failed and the
    /// cluster serves every slot again.
    pub fn wait_until_failed_over(&self, index: usize, limit: Duration) -> bool {
        let dead = format!("127.0.0.1:{}", self.nodes[index].port());
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let live = self
                .nodes
                .iter()
                .find(|n| n.is_running())
                .expect("a live node");
            let nodes = Command::new("redis-cli")
                .args(["-p", &live.port().to_string(), "cluster", "nodes"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let dead_failed = nodes
                .lines()
                .any(|l| l.contains(&dead) && l.contains("fail") && !l.contains("fail?"));
            let dead_has_no_slots = nodes
                .lines()
                .filter(|l| l.contains(&dead))
                .all(|l| l.split(' ').count() <= 8);
            if dead_failed && dead_has_no_slots {
                return self.wait_until_ok(deadline.saturating_duration_since(Instant::now()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Waits until every replica's link to its primary is up (initial sync done).
    fn wait_for_replicas(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let synced = self.nodes.iter().all(|node| {
                Command::new("redis-cli")
                    .args(["-p", &node.port().to_string(), "info", "replication"])
                    .output()
                    .map(|o| {
                        let info = String::from_utf8_lossy(&o.stdout).into_owned();
                        info.contains("role:master") || info.contains("master_link_status:up")
                    })
                    .unwrap_or(false)
            });
            if synced {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub fn config(&self) -> Config {
        let mut config = Config::default();
        config.cluster_nodes = self
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect();
        config.connect_timeout = Duration::from_secs(5);
        config.timeout = Duration::from_secs(2);
        config.retry_interval = Duration::from_millis(300);
        config.retry_attempts = 6;
        // As the single server's (see `SUITE_RECHECK`): a wake-up within
        // PROMPT is then a message's.
        config.recheck_interval = super::SUITE_RECHECK;
        // No replica sync: the tests kill primaries, and a promoted replica
        // has no replica of its own (acquires would fail NotReplicated, as
        // they should). `replica_sync_waits_on_the_primary_that_took_each_hold`
        // turns it on.
        config.replica_sync = Some(0);
        config
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.config())
            .await
            .expect("cluster connect")
    }

    /// The index of the node serving `key` as a primary (CLUSTER NODES seen from a
    /// live node).
    pub fn primary_for(&self, key: &str) -> usize {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a live node");
        let slot = self.slot_of(key);
        let nodes = Command::new("redis-cli")
            .args(["-p", &node.port().to_string(), "cluster", "nodes"])
            .output()
            .expect("redis-cli");
        for line in String::from_utf8_lossy(&nodes.stdout).lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields.get(2).is_some_and(|f| f.contains("master"))
                || fields.get(2).is_some_and(|f| f.contains("fail"))
            {
                continue;
            }
            let serves = fields[8..].iter().any(|range| match range.split_once('-') {
                Some((a, b)) => {
                    a.parse::<u16>().is_ok_and(|a| a <= slot)
                        && b.parse::<u16>().is_ok_and(|b| slot <= b)
                }
                None => range.parse::<u16>() == Ok(slot),
            });
            if serves {
                let port: u16 = fields[1]
                    .split(['@', ':'])
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .expect("port");
                return self
                    .nodes
                    .iter()
                    .position(|n| n.port() == port)
                    .expect("known node");
            }
        }
        panic!("no primary serves slot {slot}");
    }

    /// The slot of `key` (CLUSTER KEYSLOT, asked of a live node).
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a live node");
        let slot = Command::new("redis-cli")
            .args(["-p", &node.port().to_string(), "cluster", "keyslot", key])
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&slot.stdout)
            .trim()
            .parse()
            .expect("slot")
    }

    /// Moves the slot of `key` from the primary serving it to another
    /// primary, as a reshard does on Redis 7: the target imports it, the
    /// source migrates it, its keys are MIGRATEd, and every primary is told
    /// the new owner. Returns the index of the new owner.
    pub async fn move_slot_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key).to_string();
        let from = self.primary_for(key);
        let primaries: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running() && self.is_primary(i))
            .collect();
        let to = *primaries
            .iter()
            .find(|&&i| i != from)
            .expect("another primary");
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        self.cli(to, &["cluster", "setslot", &slot, "importing", &from_id]);
        self.cli(from, &["cluster", "setslot", &slot, "migrating", &to_id]);
        loop {
            let keys = self.cli(from, &["cluster", "getkeysinslot", &slot, "100"]);
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let port = self.nodes[to].port().to_string();
            let mut args = vec!["migrate", "127.0.0.1", &port, "", "0", "5000", "keys"];
            args.extend(keys);
            self.cli(from, &args);
        }
        for &i in std::iter::once(&to)
            .chain(std::iter::once(&from))
            .chain(&primaries)
        {
            self.cli(i, &["cluster", "setslot", &slot, "node", &to_id]);
        }
        to
    }

    /// A graceful failover of the primary serving `key`, as an upgrade does
    /// it: its replica runs `CLUSTER FAILOVER` (the two agree, no write is
    /// lost) and becomes the primary. Returns the index of the new primary
    /// once it says so.
    pub async fn fail_over_gracefully(&self, key: &str) -> usize {
        let replica = self.replica_for(key);
        let answer = self.cli(replica, &["cluster", "failover"]);
        assert!(answer.contains("OK"), "CLUSTER FAILOVER: {answer}");
        let promoted = super::eventually(Duration::from_secs(30), || async {
            self.is_primary(replica) && self.primary_for(key) == replica
        })
        .await;
        assert!(promoted, "the replica did not take over");
        replica
    }

    /// Waits until every primary's replicas have done their initial sync
    /// (`state=online` in its `INFO replication`): until then a `WAIT` on it
    /// counts none.
    pub async fn wait_until_replicas_synced(&self, limit: Duration) -> bool {
        super::eventually(limit, || async {
            let mut all = true;
            for node in self.nodes.iter().filter(|n| n.is_running()) {
                let info = node.info("replication").await;
                if info.contains("role:master")
                    && info
                        .lines()
                        .any(|l| l.starts_with("slave") && !l.contains("state=online"))
                {
                    all = false;
                }
            }
            all
        })
        .await
    }

    /// The index of the replica of the primary serving `key`.
    pub fn replica_for(&self, key: &str) -> usize {
        let primary_id = self.node_id(self.primary_for(key));
        (0..self.nodes.len())
            .find(|&i| {
                self.cli(i, &["cluster", "nodes"]).lines().any(|line| {
                    line.contains("myself") && line.contains("slave") && line.contains(&primary_id)
                })
            })
            .expect("the primary's replica")
    }

    /// Whether node `index` is a primary now (its own CLUSTER NODES line).
    fn is_primary(&self, index: usize) -> bool {
        self.cli(index, &["cluster", "nodes"])
            .lines()
            .any(|line| line.contains("myself") && line.contains("master"))
    }

    /// What `redis-cli` prints for `args` asked of node `index`.
    fn cli(&self, index: usize, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.nodes[index].port().to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Node `index`'s id (CLUSTER MYID).
    fn node_id(&self, index: usize) -> String {
        self.cli(index, &["cluster", "myid"]).trim().to_owned()
    }

    /// How many wait in fair lock `name`'s line: LLEN of its queue on the node
    /// that serves it (the others answer MOVED, or a replica's copy, never more).
    pub async fn fair_queue_len(&self, name: &str) -> usize {
        let queue = format!("redisson_lock_queue:{{{name}}}");
        let mut longest = 0;
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            let mut admin = node.admin().await;
            let len: redis::RedisResult<usize> =
                redis::cmd("LLEN").arg(&queue).query_async(&mut admin).await;
            longest = longest.max(len.unwrap_or(0));
        }
        longest
    }

    /// Every key on every live primary and replica (deduplicated).
    pub async fn keys(&self) -> Vec<String> {
        let mut all = Vec::new();
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            all.extend(node.keys().await);
        }
        all.sort();
        all.dedup();
        all
    }
}
