//! A checkup of the servers behind a client: what in their setup breaks
//! locks, and how to fix each ([`Client::checkup`](crate::Client::checkup),
//! the tool's `doctor`).
//!
//! Every check asks each primary the way the locks would: the scripts, the
//! channels and the durability command are run (harmlessly), not looked up,
//! so a rename, an ACL or a managed service's missing command shows as it
//! would on an acquire. Nothing is written but one script in the script
//! cache and a message to a channel nobody hears.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::Value;
use serde::Serialize;

use crate::config::Durability;
use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::durability::{info_field as field, probe, refused, Plan, Support, Wanted};
use crate::transport::keys::lock_channel;

/// How a finding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// As locks need it.
    Ok,
    /// Works, with a risk or a cost worth knowing.
    Advice,
    /// Breaks locks (a second owner, a lost hold, a refused command): fix it.
    Problem,
}

/// One check on one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// Which check: `eviction`, `durability`, `cluster`, `sharded_pubsub`,
    /// `permissions`, `replicas`, `round_trip`, `version`; `reachable` for a
    /// server that could not be checked.
    pub check: &'static str,
    /// The server it is about (`Redis 7.0.15, port 6379`; in a cluster, the
    /// primary of a slot).
    pub node: String,
    /// How it stands.
    pub verdict: Verdict,
    /// What was found, in words.
    pub detail: String,
    /// How to fix it, for an advice or a problem.
    pub fix: Option<String>,
}

/// What a checkup found, server by server, check by check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Checkup {
    /// Every finding, in the order the checks ran.
    pub findings: Vec<Finding>,
}

impl Checkup {
    /// The findings that break locks.
    pub fn problems(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.verdict == Verdict::Problem)
    }

    /// No problem found (advice may remain).
    pub fn is_healthy(&self) -> bool {
        self.problems().next().is_none()
    }
}

/// What a checkup checks the servers against: the durability the client
/// is to ask for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wish {
    pub(crate) durability: Durability,
    pub(crate) replica_sync: Option<u32>,
    pub(crate) timeout: Duration,
}

/// Checks every primary `conn` reaches.
pub(crate) async fn checkup(conn: &Conn, wish: Wish) -> Result<Checkup> {
    let (slots, left_out) = conn.primaries().await.map_err(Error::redis)?;
    let mut findings = Vec::new();
    if left_out {
        findings.push(Finding {
            check: "cluster",
            node: "the cluster".into(),
            verdict: Verdict::Problem,
            detail: "a primary has no address yet (in a handshake, or failing): its slots \
                     were not checked"
                .into(),
            fix: Some("check CLUSTER NODES, and run the checkup again".into()),
        });
    }
    for slot in slots {
        let node = Node { conn, slot };
        match node.check(wish).await {
            Ok(found) => findings.extend(found),
            // One server that cannot be checked is a finding about it; the
            // others are still checked.
            Err(e) => findings.push(Finding {
                check: "reachable",
                node: slot.map_or("the server".into(), |slot| {
                    format!("the primary of slot {slot}")
                }),
                verdict: Verdict::Problem,
                detail: format!("could not be checked: {e}"),
                fix: Some("make sure the server answers this client (network, ACL, load)".into()),
            }),
        }
    }
    Ok(Checkup { findings })
}

/// One primary: the client's connection and, in a cluster, a slot it serves.
struct Node<'c> {
    conn: &'c Conn,
    slot: Option<u16>,
}

impl Node<'_> {
    async fn ask(&self, cmd: &redis::Cmd) -> Result<Value> {
        self.conn
            .query_on(self.slot, cmd)
            .await
            .map_err(Error::redis)
    }

    /// Its answer as text: `None` when the server refused (ACL, rename).
    async fn text(&self, cmd: &redis::Cmd) -> Result<Option<String>> {
        match self.ask(cmd).await {
            Ok(value) => Ok(redis::from_redis_value::<String>(value).ok()),
            Err(e) if refused(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn check(&self, wish: Wish) -> Result<Vec<Finding>> {
        let support = probe(self.conn, self.slot).await?;
        let info = |section: &str| {
            let mut cmd = redis::cmd("INFO");
            cmd.arg(section);
            cmd
        };
        let server = self.text(&info("server")).await?;
        let port = field(&server, "tcp_port").unwrap_or_else(|| "?".into());
        let name = match self.slot {
            Some(slot) => format!("{}, port {port} (primary of slot {slot})", support.server),
            None => format!("{}, port {port}", support.server),
        };
        let say =
            |check: &'static str, verdict: Verdict, detail: String, fix: Option<String>| Finding {
                check,
                node: name.clone(),
                verdict,
                detail,
                fix,
            };
        let mut found = vec![
            self.eviction(&say).await?,
            self.durability(&say, &support, wish),
        ];
        // A node whose cluster is down refuses every keyed command: its
        // permissions cannot be tried then.
        let mut serving = true;
        if self.conn.is_cluster() {
            let state = self.cluster(&say).await?;
            serving = state.verdict != Verdict::Problem;
            found.push(state);
            found.push(sharded_pubsub(&say, &support, self.conn.is_sharded()));
        }
        found.push(match serving {
            true => self.permissions(&say).await?,
            false => say(
                "permissions",
                Verdict::Advice,
                "not tried: the cluster is down here, so keyed commands are refused".into(),
                None,
            ),
        });
        let replication = self.text(&info("replication")).await?;
        found.push(replicas(&say, &replication));
        found.push(self.round_trip(&say).await?);
        found.push(version(&say, &support));
        Ok(found)
    }

    /// Keys with a TTL evicted under memory pressure: every lock key has one.
    async fn eviction(&self, say: &Say<'_>) -> Result<Finding> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg("maxmemory*");
        let settings = match self.ask(&cmd).await {
            Ok(value) => redis::from_redis_value::<HashMap<String, String>>(value).ok(),
            Err(e) if refused(&e) => None,
            Err(e) => return Err(e),
        };
        let Some(settings) = settings else {
            return Ok(say(
                "eviction",
                Verdict::Advice,
                "CONFIG GET is refused, so the eviction policy could not be read".into(),
                Some(
                    "make sure maxmemory-policy is noeviction (or volatile-* with no lock \
                      key ever near the memory limit)"
                        .into(),
                ),
            ));
        };
        let policy = settings
            .get("maxmemory-policy")
            .map(|p| p.to_ascii_lowercase())
            .unwrap_or_default();
        let limit = settings.get("maxmemory").map(String::as_str).unwrap_or("0");
        let evicts = policy.starts_with("allkeys-") || policy.starts_with("volatile-");
        Ok(match (evicts, limit) {
            (false, _) => say(
                "eviction",
                Verdict::Ok,
                format!("maxmemory-policy {policy}: no key is evicted"),
                None,
            ),
            (true, "0") => say(
                "eviction",
                Verdict::Advice,
                format!(
                    "maxmemory-policy {policy} evicts keys with a TTL, and every lock key has \
                     one; with no maxmemory set it never acts"
                ),
                Some("keep maxmemory unset here, or set maxmemory-policy noeviction".into()),
            ),
            (true, limit) => say(
                "eviction",
                Verdict::Problem,
                format!(
                    "maxmemory-policy {policy} with maxmemory {limit}: under memory pressure \
                     the server evicts keys with a TTL, every lock key has one, and an \
                     evicted hold lets a second owner in"
                ),
                Some(
                    "CONFIG SET maxmemory-policy noeviction, or give the locks a server of \
                     their own; this crate does not use BLESS SET key NO-EVICT (Redis 8.12 \
                     and later), which could exempt lock keys"
                        .into(),
                ),
            ),
        })
    }

    /// The durability asked for, against what the server supports.
    fn durability(&self, say: &Say<'_>, support: &Support, wish: Wish) -> Finding {
        let wanted = Wanted {
            mode: wish.durability,
            replicas: wish.replica_sync,
            timeout: wish.timeout,
        };
        match wanted.plan(support, support.replicas) {
            Err(reason) => say(
                "durability",
                Verdict::Problem,
                format!("durability {}: cannot be had here", wish.durability),
                Some(reason),
            ),
            Ok((_, Some(warning))) => say("durability", Verdict::Advice, warning, None),
            Ok((Plan::Off, None)) => say(
                "durability",
                Verdict::Advice,
                "no replica acknowledges acquires (none connected, or replica_sync 0): a \
                 failover or a restart can lose a hold"
                    .into(),
                Some("add a replica, or accept that a crash of the server frees every lock".into()),
            ),
            Ok((Plan::On { mode, replicas }, None)) => say(
                "durability",
                Verdict::Ok,
                format!("each acquire waits for {mode} with {replicas} replica(s)"),
                None,
            ),
        }
    }

    /// The scripts, keys and channels locks use, allowed: the commands sent
    /// (`SCRIPT LOAD`, `EVAL`, publishing), and, where the server can say
    /// (Redis 7.0 and later), every command the lock scripts run inside.
    async fn permissions(&self, say: &Say<'_>) -> Result<Finding> {
        let key = key_in(self.slot);
        let channel = lock_channel(&key);
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg("return 1");
        let mut eval = redis::cmd("EVAL");
        eval.arg("return redis.call('exists', KEYS[1])")
            .arg(1)
            .arg(&key);
        let mut publish = redis::cmd(self.conn.publish_command());
        publish.arg(&channel).arg("");
        let mut refusals = Vec::new();
        for (what, cmd) in [
            ("SCRIPT LOAD", &load),
            ("EVAL on a lock key", &eval),
            ("publishing on a lock channel", &publish),
        ] {
            match self.ask(cmd).await {
                Ok(Value::ServerError(e)) => refusals.push(format!("{what}: {e}")),
                Ok(_) => {}
                Err(e) if refused(&e) => refusals.push(format!("{what}: {e}")),
                Err(e) => return Err(e),
            }
        }
        if refusals.is_empty() {
            let inside = self.refused_inside_scripts(&key, &channel).await?;
            if !inside.is_empty() {
                refusals.push(format!(
                    "inside the lock scripts, on a lock key or channel: {}",
                    inside.join(", ")
                ));
            }
        }
        Ok(match refusals.is_empty() {
            true => say(
                "permissions",
                Verdict::Ok,
                "scripts, lock keys and lock channels are allowed".into(),
                None,
            ),
            false => say(
                "permissions",
                Verdict::Problem,
                format!("refused: {}", refusals.join("; ")),
                Some(
                    "allow the lock user what the locks run: ACL SETUSER <user> ~* &* \
                     +@scripting +@pubsub +@keyspace +@string +@hash +@sortedset +@list \
                     +@connection +time +info +wait +waitaof (a user made on Redis 7 has no \
                     channel until given one)"
                        .into(),
                ),
            ),
        })
    }

    /// The commands the lock scripts run on `key` and `channel` that the
    /// user may not (`acl_check.lua`); none where the server cannot say
    /// (before Redis 7.0, `redis.acl_check_cmd` does not exist).
    async fn refused_inside_scripts(&self, key: &str, channel: &str) -> Result<Vec<String>> {
        let subscribe = match self.conn.is_sharded() {
            true => "ssubscribe",
            false => "subscribe",
        };
        let mut check = redis::cmd("EVAL");
        check
            .arg(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/lua/acl_check.lua"
            )))
            .arg(1)
            .arg(key)
            .arg(channel)
            .arg(self.conn.publish_command().to_ascii_lowercase())
            .arg(subscribe);
        match self.ask(&check).await {
            Ok(value) => Ok(redis::from_redis_value::<Vec<String>>(value).unwrap_or_default()),
            // Older servers: the commands sent were allowed, which is what
            // can be known there.
            Err(e) if e.to_string().contains("acl_check_cmd") => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Every slot served, the cluster agreeing it is up.
    async fn cluster(&self, say: &Say<'_>) -> Result<Finding> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("INFO");
        let Some(info) = self.text(&cmd).await? else {
            return Ok(say(
                "cluster",
                Verdict::Advice,
                "CLUSTER INFO is refused, so the cluster's state could not be read".into(),
                Some("allow the lock user CLUSTER INFO, or check the state by hand".into()),
            ));
        };
        let info = Some(info);
        let state = field(&info, "cluster_state").unwrap_or_default();
        let assigned = field(&info, "cluster_slots_assigned").unwrap_or_default();
        let failing = field(&info, "cluster_slots_fail").unwrap_or_default();
        let healthy = state == "ok" && assigned == "16384" && failing == "0";
        Ok(match healthy {
            true => say(
                "cluster",
                Verdict::Ok,
                "cluster_state ok, all 16384 slots served".into(),
                None,
            ),
            false => say(
                "cluster",
                Verdict::Problem,
                format!(
                    "cluster_state {state}, {assigned} of 16384 slots assigned, {failing} \
                     failing: locks whose names hash to an unserved slot cannot be taken"
                ),
                Some("assign every slot (CLUSTER ADDSLOTS, or redis-cli --cluster fix)".into()),
            ),
        })
    }

    /// The round trip a lock's every step pays: the median of five PINGs.
    async fn round_trip(&self, say: &Say<'_>) -> Result<Finding> {
        let mut times = Vec::new();
        for _ in 0..5 {
            let sent = Instant::now();
            self.ask(&redis::cmd("PING")).await?;
            times.push(sent.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        let detail = format!("round trip {} µs (median of 5 PINGs)", median.as_micros());
        Ok(match median > Duration::from_millis(5) {
            false => say("round_trip", Verdict::Ok, detail, None),
            true => say(
                "round_trip",
                Verdict::Advice,
                detail,
                Some(
                    "every acquire, release and hand-off pays at least one round trip: keep \
                     the server near its clients"
                        .into(),
                ),
            ),
        })
    }
}

/// How a check reports one finding about the node at hand.
type Say<'n> = dyn Fn(&'static str, Verdict, String, Option<String>) -> Finding + 'n;

/// Broadcast pub/sub in a cluster: every release reaches every node.
fn sharded_pubsub(say: &Say<'_>, support: &Support, sharded: bool) -> Finding {
    match sharded {
        true => say(
            "sharded_pubsub",
            Verdict::Ok,
            "unlock messages go by sharded pub/sub: each reaches its lock's shard only".into(),
            None,
        ),
        false => say(
            "sharded_pubsub",
            Verdict::Advice,
            format!(
                "unlock messages are broadcast to every node ({} has no sharded pub/sub, or \
                 it is turned off): past a few thousand releases a second the cluster bus \
                 saturates (redisson#3349)",
                support.server
            ),
            Some("Redis 7.0 or later, with Config::sharded_pubsub left on".into()),
        ),
    }
}

/// The replicas connected and how far behind each is.
fn replicas(say: &Say<'_>, replication: &Option<String>) -> Finding {
    let lags: Vec<u64> = replication
        .as_deref()
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains("lag="))
        .filter_map(|line| {
            line.split(',')
                .find_map(|part| part.strip_prefix("lag="))
                .and_then(|lag| lag.trim().parse().ok())
        })
        .collect();
    let worst = lags.iter().copied().max();
    match worst {
        None => say("replicas", Verdict::Ok, "no replica connected".into(), None),
        Some(lag) if lag > 1 => say(
            "replicas",
            Verdict::Advice,
            format!(
                "{} replica(s), one {lag} s behind: an acquire waiting for its \
                 acknowledgement waits that long, or fails",
                lags.len()
            ),
            Some("look at the replica's load and link (INFO replication on it)".into()),
        ),
        Some(_) => say(
            "replicas",
            Verdict::Ok,
            format!(
                "{} replica(s) connected, none over a second behind",
                lags.len()
            ),
            None,
        ),
    }
}

/// Server versions with behaviour locks notice.
fn version(say: &Say<'_>, support: &Support) -> Finding {
    let numbers: Vec<u32> = support
        .server
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .split('.')
        .filter_map(|n| n.parse().ok())
        .collect();
    let at_least = |major: u32, minor: u32| {
        let (have_major, have_minor) = (
            numbers.first().copied().unwrap_or(0),
            numbers.get(1).copied().unwrap_or(0),
        );
        (have_major, have_minor) >= (major, minor)
    };
    let redis = support.server.starts_with("Redis");
    if redis && !at_least(6, 2) {
        return say(
            "version",
            Verdict::Advice,
            format!(
                "{}: this crate is tested on Redis 6.2 and later",
                support.server
            ),
            Some("upgrade to Redis 6.2 or later".into()),
        );
    }
    let detail = if redis && at_least(7, 4) {
        format!(
            "{}: scripts sent with EVAL may be evicted from the script cache (7.4 and \
             later); this crate sends EVALSHA and loads a script again when it is missing",
            support.server
        )
    } else {
        "no lock-relevant quirk known for this version".to_owned()
    };
    say("version", Verdict::Ok, detail, None)
}

/// A key the checkup's script may touch (it only reads it), in `slot` when
/// the servers are a cluster.
fn key_in(slot: Option<u16>) -> String {
    let plain = "redisson-locks:doctor".to_owned();
    #[cfg(feature = "cluster")]
    if let Some(wanted) = slot.and_then(redis::cluster_routing::Slot::new) {
        // One tag in 16,384 lands in a given slot: a few thousand tries.
        return (0u32..)
            .map(|n| format!("redisson-locks:doctor:{{{n}}}"))
            .find(|key| redis::cluster_routing::Slot::for_key(key) == wanted)
            .unwrap_or(plain);
    }
    let _ = slot;
    plain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn say(check: &'static str, verdict: Verdict, detail: String, fix: Option<String>) -> Finding {
        Finding {
            check,
            node: "n".into(),
            verdict,
            detail,
            fix,
        }
    }

    #[test]
    fn a_lagging_replica_is_advice() {
        let info = Some(
            "# Replication\nrole:master\nconnected_slaves:2\n\
             slave0:ip=127.0.0.1,port=7001,state=online,offset=10,lag=0\n\
             slave1:ip=127.0.0.1,port=7002,state=online,offset=8,lag=4\n"
                .to_owned(),
        );
        let found = replicas(&say, &info);
        assert_eq!(found.verdict, Verdict::Advice);
        assert!(
            found.detail.contains("2 replica(s), one 4 s behind"),
            "{}",
            found.detail
        );
        assert_eq!(replicas(&say, &None).verdict, Verdict::Ok);
    }

    #[test]
    fn versions_with_known_behaviour_are_named() {
        let of = |server: &str| Support {
            server: server.into(),
            ..Support::default()
        };
        assert_eq!(version(&say, &of("Redis 6.0.16")).verdict, Verdict::Advice);
        assert!(version(&say, &of("Redis 7.4.1")).detail.contains("EVALSHA"));
        assert!(!version(&say, &of("Valkey 8.1.8"))
            .detail
            .contains("EVALSHA"));
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn the_checkups_key_lands_in_the_slot_asked() {
        for slot in [0u16, 5_000, 16_383] {
            let key = key_in(Some(slot));
            assert_eq!(
                redis::cluster_routing::Slot::for_key(&key),
                redis::cluster_routing::Slot::new(slot).unwrap()
            );
        }
    }
}
