//! The checkup (`Client::checkup`, the tool's `doctor`): one misconfigured
//! server per check, found and named with its fix, and a healthy one found
//! healthy.

use std::time::Duration;

use redisson_locks::inspect::{Checkup, Finding, Verdict};
use redisson_locks::{Client, Durability};

use crate::support::cluster::RedisCluster;
use crate::support::{eventually, server_has, RedisServer};

/// The findings of `check`, one per server.
fn of<'c>(checkup: &'c Checkup, check: &str) -> Vec<&'c Finding> {
    checkup
        .findings
        .iter()
        .filter(|f| f.check == check)
        .collect()
}

/// The one finding of `check` (a single server).
fn only<'c>(checkup: &'c Checkup, check: &str) -> &'c Finding {
    let found = of(checkup, check);
    assert_eq!(found.len(), 1, "{check}: {checkup:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_server_is_found_healthy_with_every_check_run() {
    let server = RedisServer::start();
    let client = server.client().await;
    let checkup = client.checkup().await.unwrap();
    assert!(checkup.is_healthy(), "{checkup:#?}");
    for check in [
        "eviction",
        "permissions",
        "replicas",
        "round_trip",
        "version",
    ] {
        assert_eq!(only(&checkup, check).verdict, Verdict::Ok, "{checkup:#?}");
    }
    // No replica: works, with the risk said.
    let durability = only(&checkup, "durability");
    assert_eq!(durability.verdict, Verdict::Advice);
    assert!(durability.fix.is_some());
    assert!(only(&checkup, "round_trip").detail.contains("µs"));
    assert!(only(&checkup, "version")
        .node
        .contains(&server.port().to_string()));
    assert!(server.keys().await.is_empty(), "the checkup wrote a key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_policy_that_evicts_lock_keys_is_a_problem() {
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let server =
            RedisServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", policy]);
        let checkup = server.client().await.checkup().await.unwrap();
        let eviction = only(&checkup, "eviction");
        assert_eq!(eviction.verdict, Verdict::Problem, "{policy}: {eviction:?}");
        assert!(eviction.detail.contains(policy), "{eviction:?}");
        assert!(eviction.fix.as_deref().unwrap().contains("noeviction"));
        assert!(!checkup.is_healthy());
    }
    // The same policy without a memory limit never acts: advice only.
    let unlimited = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let checkup = unlimited.client().await.checkup().await.unwrap();
    assert_eq!(only(&checkup, "eviction").verdict, Verdict::Advice);
    assert!(checkup.is_healthy());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durability_the_server_cannot_give_is_a_problem_with_its_reason() {
    let server = RedisServer::start_with(&["--appendonly", "no"]);
    let client = server.client().await;
    let checkup = client.checkup_for(Durability::Aof, Some(0)).await.unwrap();
    let durability = only(&checkup, "durability");
    assert_eq!(durability.verdict, Verdict::Problem, "{durability:?}");
    let fix = durability.fix.as_deref().unwrap();
    if server_has(7, 2, "WAITAOF") {
        assert!(fix.contains("appendonly"), "{fix}");
    } else {
        assert!(fix.contains("WAITAOF") && fix.contains("7.2"), "{fix}");
    }
    assert!(!fix.contains("unknown command"), "{fix}");
    // What the server can give is fine.
    let checkup = client
        .checkup_for(Durability::Replicas, Some(0))
        .await
        .unwrap();
    assert_ne!(only(&checkup, "durability").verdict, Verdict::Problem);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_without_lock_channels_or_scripts_is_a_problem() {
    let server = RedisServer::start();
    let mut admin = server.admin().await;
    // A user made on Redis 7 gets no channel unless given one.
    for (user, rules) in [
        (
            "nochannels",
            vec!["on", ">pw", "~*", "+@all", "resetchannels"],
        ),
        (
            "noscripts",
            vec!["on", ">pw", "~*", "&*", "+@all", "-eval", "-script"],
        ),
    ] {
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(&rules)
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("nosortedsets")
        .arg(&["on", ">pw", "~*", "&*", "+@all", "-zadd"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut cases = vec![
        ("nochannels", "publishing on a lock channel"),
        ("noscripts", "SCRIPT LOAD"),
    ];
    // What the scripts run inside is asked with redis.acl_check_cmd (7.0).
    if server_has(7, 0, "redis.acl_check_cmd") {
        cases.push((
            "nosortedsets",
            "inside the lock scripts, on a lock key or channel: zadd",
        ));
    }
    for (user, refused) in cases {
        let client = server
            .client_with(|config| {
                config.username = Some(user.into());
                config.password = Some("pw".into());
                config.announce = false;
            })
            .await;
        let checkup = client.checkup().await.unwrap();
        let permissions = only(&checkup, "permissions");
        assert_eq!(
            permissions.verdict,
            Verdict::Problem,
            "{user}: {permissions:?}"
        );
        assert!(
            permissions.detail.contains(refused),
            "{user}: {permissions:?}"
        );
        assert!(permissions.fix.as_deref().unwrap().contains("ACL SETUSER"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_falling_behind_is_advice() {
    let primary = RedisServer::start();
    let replica = RedisServer::start_replica_of(&primary).await;
    let client: Client = primary.client().await;
    let checkup = client.checkup().await.unwrap();
    let replicas = only(&checkup, "replicas");
    assert_eq!(replicas.verdict, Verdict::Ok, "{replicas:?}");
    assert!(replicas.detail.contains("1 replica"), "{replicas:?}");
    assert_eq!(only(&checkup, "durability").verdict, Verdict::Ok);

    // Frozen: it stops acknowledging, and its lag grows by a second a second.
    replica.pause();
    let lagging = eventually(Duration::from_secs(15), || async {
        let checkup = client.checkup().await.unwrap();
        only(&checkup, "replicas").verdict == Verdict::Advice
    })
    .await;
    replica.resume();
    assert!(lagging, "a frozen replica's lag was not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primary_of_a_cluster_is_checked_and_an_unserved_slot_is_a_problem() {
    let cluster = RedisCluster::start();
    let client = cluster.client().await;
    let checkup = client.checkup().await.unwrap();
    let states = of(&checkup, "cluster");
    assert_eq!(states.len(), 3, "one per primary: {checkup:#?}");
    assert!(
        states.iter().all(|f| f.verdict == Verdict::Ok),
        "{states:#?}"
    );
    assert_eq!(of(&checkup, "permissions").len(), 3);
    assert!(of(&checkup, "permissions")
        .iter()
        .all(|f| f.verdict == Verdict::Ok));
    assert_eq!(of(&checkup, "sharded_pubsub").len(), 3);

    // One slot dropped by the primary serving it: the cluster no longer
    // covers every slot.
    let slot = cluster.slot_of("unserved");
    let owner = cluster.primary_for("unserved");
    let mut admin = cluster.nodes[owner].admin().await;
    let _: () = redis::cmd("CLUSTER")
        .arg("DELSLOTS")
        .arg(slot)
        .query_async(&mut admin)
        .await
        .unwrap();
    let found = eventually(Duration::from_secs(15), || async {
        match client.checkup().await {
            Ok(checkup) => of(&checkup, "cluster")
                .iter()
                .any(|f| f.verdict == Verdict::Problem && f.detail.contains("16383 of 16384")),
            Err(_) => false,
        }
    })
    .await;
    if !found {
        eprintln!("{:#?}", client.checkup().await);
    }
    assert!(found, "the unserved slot was not found");
}
