//! Sentinel on loopback: a primary, a replica and three sentinels (the server
//! binary, or `REDIS_SENTINEL`, in sentinel mode), each killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, sentinel_binary, RedisServer};
use redisson_locks::Config;

pub const MASTER: &str = "mymaster";

struct SentinelProcess {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct SentinelSetup {
    pub primary: RedisServer,
    pub replica: RedisServer,
    sentinels: Vec<SentinelProcess>,
}

impl SentinelSetup {
    pub async fn start() -> SentinelSetup {
        let primary = RedisServer::start();
        let replica = RedisServer::start_replica_of(&primary).await;
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "redisson-locks-sentinel-{}-{port}-{i}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("sentinel dir");
            let conf = dir.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {}\n\
                     sentinel monitor {MASTER} 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} 3000\n\
                     sentinel parallel-syncs {MASTER} 1\n",
                    dir.display(),
                    primary.port()
                ),
            )
            .expect("sentinel.conf");
            let child = Command::new(sentinel_binary())
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{} --sentinel: {e}", sentinel_binary()));
            sentinels.push(SentinelProcess { child, port, dir });
        }
        let setup = SentinelSetup {
            primary,
            replica,
            sentinels,
        };
        // Ready once every sentinel knows the replica and the other two sentinels.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if setup.sentinels.iter().all(|s| {
                let out = Command::new("redis-cli")
                    .args(["-p", &s.port.to_string(), "sentinel", "master", MASTER])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                let field = |name: &str| {
                    let lines: Vec<&str> = out.lines().collect();
                    lines
                        .iter()
                        .position(|l| *l == name)
                        .and_then(|i| lines.get(i + 1))
                        .and_then(|v| v.parse::<u32>().ok())
                };
                field("num-slaves") == Some(1) && field("num-other-sentinels") == Some(2)
            }) {
                return setup;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("sentinels did not discover the replica and each other");
    }

    pub fn config(&self) -> Config {
        let mut config = Config::default();
        config.sentinel_addresses = self
            .sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}", s.port))
            .collect();
        config.sentinel_master_name = Some(MASTER.into());
        config.connect_timeout = Duration::from_secs(3);
        config.timeout = Duration::from_secs(1);
        config.retry_interval = Duration::from_millis(300);
        config.retry_attempts = 20;
        config
    }

    /// The primary's port as the sentinels report it.
    pub fn reported_primary(&self) -> Option<u16> {
        let s = self.sentinels.first()?;
        let out = Command::new("redis-cli")
            .args([
                "-p",
                &s.port.to_string(),
                "sentinel",
                "get-master-addr-by-name",
                MASTER,
            ])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)?
            .trim()
            .parse()
            .ok()
    }
}
