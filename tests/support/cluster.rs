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
        self.primary_of_slot(self.slot_of(key))
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
    /// primary (see [`move_slot`](Self::move_slot)). Returns the index of
    /// the new owner.
    pub async fn move_slot_of(&self, key: &str) -> usize {
        let slot = self.slot_of(key);
        let from = self.primary_for(key);
        let to = *self
            .primaries()
            .iter()
            .find(|&&i| i != from)
            .expect("another primary");
        self.move_slot(slot, to, Duration::ZERO);
        to
    }

    /// The indexes of the live primaries (each node's own word).
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running() && self.is_primary(i))
            .collect()
    }

    /// Moves `slot` to primary `to`, as a reshard does, the way the server
    /// under test does it best: Valkey 9's atomic `CLUSTER MIGRATESLOTS`
    /// (the keys stream over, then the slot changes hands at once), or else
    /// the classic way of Redis 7 (`CLUSTER SETSLOT` and `MIGRATE`): the
    /// target imports, the source migrates, its keys are `MIGRATE`d one at a
    /// time `pace` apart (so clients meet `ASK`, and `TRYAGAIN` for a script
    /// whose keys are split, meanwhile), and every primary is told the new
    /// owner. Blocking: call it off the runtime's workers
    /// (`spawn_blocking`), whose timers the load's waiters need.
    pub fn move_slot(&self, slot: u16, to: usize, pace: Duration) {
        let from = self.primary_of_slot(slot);
        if from == to {
            return;
        }
        let to_id = self.node_id(to);
        if self.has_atomic_slot_migration() {
            let slot = slot.to_string();
            let answer = self.cli(
                from,
                &[
                    "cluster",
                    "migrateslots",
                    "slotsrange",
                    &slot,
                    &slot,
                    "node",
                    &to_id,
                ],
            );
            assert!(answer.contains("OK"), "CLUSTER MIGRATESLOTS: {answer}");
        } else {
            self.move_slot_classically(slot, (from, to), pace);
        }
        if !self.wait_until_all_see(slot, to) {
            panic!(
                "slot {slot} did not reach node {to}: {}",
                self.cli(from, &["cluster", "getslotmigrations"])
            );
        }
    }

    /// Waits (30 s at most) until every live node, replicas too, says
    /// primary `owner` serves `slot`.
    pub fn wait_until_all_see(&self, slot: u16, owner: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running())
            .collect();
        while live
            .iter()
            .any(|&i| self.owner_seen_by(i, slot) != Some(owner))
        {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// `INFO section` of every live node.
    pub fn info_of_each(&self, section: &str) -> Vec<String> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running())
            .map(|i| self.cli(i, &["info", section]))
            .collect()
    }

    /// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`).
    pub fn has_atomic_slot_migration(&self) -> bool {
        let server = super::server_version();
        server.name.eq_ignore_ascii_case("valkey") && server.at_least(9, 0)
    }

    /// [`move_slot`](Self::move_slot) the classic way.
    fn move_slot_classically(&self, slot: u16, (from, to): (usize, usize), pace: Duration) {
        let slot = slot.to_string();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        self.cli(to, &["cluster", "setslot", &slot, "importing", &from_id]);
        self.cli(from, &["cluster", "setslot", &slot, "migrating", &to_id]);
        let batch = if pace.is_zero() { "100" } else { "1" };
        loop {
            let keys = self.cli(from, &["cluster", "getkeysinslot", &slot, batch]);
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let port = self.nodes[to].port().to_string();
            let mut args = vec!["migrate", "127.0.0.1", &port, "", "0", "5000", "keys"];
            args.extend(keys);
            self.cli(from, &args);
            std::thread::sleep(pace);
        }
        for i in [to, from].into_iter().chain(self.primaries()) {
            self.cli(i, &["cluster", "setslot", &slot, "node", &to_id]);
        }
    }

    /// The primary serving `slot`, as node `seen_by` sees it.
    fn owner_seen_by(&self, seen_by: usize, slot: u16) -> Option<usize> {
        let nodes = self.cli(seen_by, &["cluster", "nodes"]);
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if !fields.get(2).is_some_and(|f| f.contains("master"))
                || fields.get(2).is_some_and(|f| f.contains("fail"))
            {
                continue;
            }
            let serves = fields
                .iter()
                .skip(8)
                .any(|range| match range.split_once('-') {
                    Some((a, b)) => {
                        a.parse::<u16>().is_ok_and(|a| a <= slot)
                            && b.parse::<u16>().is_ok_and(|b| slot <= b)
                    }
                    None => range.parse::<u16>() == Ok(slot),
                });
            if serves {
                let port: u16 = fields[1].split(['@', ':']).nth(1)?.parse().ok()?;
                return self.nodes.iter().position(|n| n.port() == port);
            }
        }
        None
    }

    /// The primary serving `slot` (seen from a live node).
    pub fn primary_of_slot(&self, slot: u16) -> usize {
        let node = self
            .nodes
            .iter()
            .position(|n| n.is_running())
            .expect("a live node");
        self.owner_seen_by(node, slot)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}"))
    }

    /// The nodes of the shard serving the slot of `key`: its primary and
    /// the nodes that say, each in its own CLUSTER NODES line, that they
    /// replicate it (a demoted primary knows its new role at once; the
    /// primary's own table may list it as a replica only later).
    pub fn shard_of(&self, key: &str) -> Vec<usize> {
        let primary = self.primary_for(key);
        let id = self.node_id(primary);
        let mut shard = vec![primary];
        for i in (0..self.nodes.len()).filter(|&i| i != primary && self.nodes[i].is_running()) {
            let replicates = self.cli(i, &["cluster", "nodes"]).lines().any(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                fields
                    .get(2)
                    .is_some_and(|f| f.contains("myself") && f.contains("slave"))
                    && fields.get(3) == Some(&id.as_str())
            });
            if replicates {
                shard.push(i);
            }
        }
        shard
    }

    /// Every sharded subscription on every live node: (node, channel)
    /// (`PUBSUB SHARDCHANNELS`).
    pub fn shard_subscriptions(&self) -> Vec<(usize, String)> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_running())
            .flat_map(|i| {
                self.cli(i, &["pubsub", "shardchannels"])
                    .lines()
                    .filter(|c| !c.is_empty())
                    .map(|c| (i, c.to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A graceful failover of the primary serving `key`, as an upgrade does
    /// it: its replica runs `CLUSTER FAILOVER` (the two agree, no write is
    /// lost) and becomes the primary. Returns the index of the new primary
    /// once it says so. Blocking, as [`move_slot`](Self::move_slot) is.
    pub fn fail_over_gracefully(&self, key: &str) -> usize {
        let replica = self.replica_for(key);
        let answer = self.cli(replica, &["cluster", "failover"]);
        assert!(answer.contains("OK"), "CLUSTER FAILOVER: {answer}");
        assert!(
            self.wait_until_all_see(self.slot_of(key), replica),
            "the replica did not take over"
        );
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
