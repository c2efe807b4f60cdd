//! Test support: real `redis-server` processes, one per test, on free loopback ports
//! in temp dirs, killed and reaped on drop; plus helpers that read the server's
//! state (keys, command counts, subscriptions) to assert on.

#![allow(dead_code, unreachable_pub)]

pub mod checker;
pub mod child;
pub mod cluster;
pub mod fair;
pub mod fake_resp;
pub mod java;
pub mod proxy;
pub mod sentinel;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use redisson_locks::{Client, Config};

/// A `redis-server` owned by one test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra_args: Vec<String>,
}

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (`["--requirepass", "x"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redisson-locks-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut server = RedisServer {
            child: None,
            port: 0,
            dir,
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
        };
        // A port found free can be taken by another process before the server binds
        // it: try a few.
        for _ in 0..10 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server (is it installed?)");
    }

    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.current_dir(&self.dir)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let Ok(child) = cmd.spawn() else {
            return false;
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false; // exited: port taken, most likely
                }
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// Starts a replica of `primary` and waits until its initial sync is done.
    pub async fn start_replica_of(primary: &RedisServer) -> RedisServer {
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
        assert!(
            eventually(Duration::from_secs(10), || async {
                let mut admin = replica.admin().await;
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut admin)
                    .await
                    .expect("INFO");
                info.contains("master_link_status:up")
            })
            .await,
            "the replica did not sync"
        );
        replica
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(|c| c.id())
            .expect("server not running")
    }

    /// A client configuration for this server with short timeouts for tests.
    pub fn config(&self) -> Config {
        let mut config = Config::from_url(&self.url()).expect("url");
        config.connect_timeout = Duration::from_secs(2);
        config.timeout = Duration::from_secs(2);
        config.retry_interval = Duration::from_millis(200);
        config
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.config()).await.expect("connect")
    }

    pub async fn client_with(&self, adjust: impl FnOnce(&mut Config)) -> Client {
        let mut config = self.config();
        adjust(&mut config);
        Client::connect(config).await.expect("connect")
    }

    /// A plain connection for inspecting and poking the server (RESP2).
    pub async fn admin(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).expect("url");
        client
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection")
    }

    /// Every key in the server.
    pub async fn keys(&self) -> Vec<String> {
        let mut admin = self.admin().await;
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut admin)
            .await
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// How many clients subscribe to `channel` (PUBSUB NUMSUB).
    pub async fn subscribers(&self, channel: &str) -> i64 {
        let mut admin = self.admin().await;
        let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut admin)
            .await
            .expect("PUBSUB NUMSUB");
        reply.first().map(|(_, n)| *n).unwrap_or(0)
    }

    /// All channels with at least one subscriber (PUBSUB CHANNELS).
    pub async fn channels(&self) -> Vec<String> {
        let mut admin = self.admin().await;
        redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .query_async(&mut admin)
            .await
            .expect("PUBSUB CHANNELS")
    }

    /// How many times `command` ran (INFO commandstats, e.g. "evalsha").
    pub async fn command_calls(&self, command: &str) -> u64 {
        let mut admin = self.admin().await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut admin)
            .await
            .expect("INFO");
        let prefix = format!("cmdstat_{}:calls=", command.to_lowercase());
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    pub async fn reset_stats(&self) {
        let mut admin = self.admin().await;
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut admin)
            .await
            .expect("CONFIG RESETSTAT");
    }

    /// Number of RESP3 connections (CLIENT LIST): those of `redisson_locks`
    /// clients, not the RESP2 admin connections the tests open.
    pub async fn lock_client_connections(&self) -> usize {
        let list = self.client_list().await;
        list.lines().filter(|line| line.contains(" resp=3")).count()
    }

    /// CLIENT LIST, one line per connection.
    pub async fn client_list(&self) -> String {
        let mut admin = self.admin().await;
        redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut admin)
            .await
            .expect("CLIENT LIST")
    }

    /// Kills every client connection except the admin's (CLIENT KILL TYPE normal
    /// and pubsub).
    pub async fn kill_clients(&self) {
        let mut admin = self.admin().await;
        let _: redis::Value = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("SKIPME")
            .arg("yes")
            .query_async(&mut admin)
            .await
            .expect("CLIENT KILL");
    }

    /// Kills the connections that hold subscriptions (those of waiting clients),
    /// and no others. Returns how many.
    pub async fn kill_subscribers(&self) -> usize {
        let list = self.client_list().await;
        let mut admin = self.admin().await;
        let mut killed = 0;
        for line in list.lines() {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .map(str::to_owned)
            };
            let subscribed = field("sub=").is_some_and(|n| n != "0");
            if let (true, Some(id)) = (subscribed, field("id=")) {
                let _: redis::Value = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(id)
                    .query_async(&mut admin)
                    .await
                    .expect("CLIENT KILL ID");
                killed += 1;
            }
        }
        killed
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// Kills the server (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts a fresh one (empty) on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("could not restart redis-server on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `check` until it holds or `limit` passes; for state that settles
/// asynchronously (an UNSUBSCRIBE sent from a drop, say).
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Bounds a test step: a hang fails the test instead of stalling the suite.
pub async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = T>,
) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

/// Runs `attempt`, which must give up (answer `false`) on time: not before
/// `wait`, and within two seconds after it.
pub async fn gives_up_on_time(wait: Duration, attempt: impl std::future::Future<Output = bool>) {
    let started = Instant::now();
    assert!(!attempt.await, "it succeeded; it should have given up");
    let took = started.elapsed();
    assert!(
        took >= wait && took < wait + Duration::from_secs(2),
        "gave up after {took:?} (wait {wait:?})"
    );
}

/// Asserts that nothing is left behind, allowing a few seconds for releases and
/// UNSUBSCRIBEs sent from drops: no key and no subscribed channel on the server,
/// and none of `clients` subscribed or renewing.
pub async fn assert_nothing_left(server: &RedisServer, clients: &[&Client]) {
    assert_nothing_left_but(server, clients, |_| false).await;
}

/// [`assert_nothing_left`], except for keys that `expected` says may stay (a
/// fenced lock's token counter, Redisson's unlock latches).
pub async fn assert_nothing_left_but(
    server: &RedisServer,
    clients: &[&Client],
    expected: impl Fn(&str) -> bool,
) {
    let limit = Duration::from_secs(5);
    let left = || async {
        let mut keys = server.keys().await;
        keys.retain(|k| !expected(k));
        keys
    };
    assert!(
        eventually(limit, || async { left().await.is_empty() }).await,
        "keys left behind: {:?}",
        left().await
    );
    assert!(
        eventually(limit, || async { server.channels().await.is_empty() }).await,
        "subscriptions left behind: {:?}",
        server.channels().await
    );
    for client in clients {
        assert_eq!(client.subscribed_channels(), 0, "client still subscribed");
        assert_eq!(client.renewed_holds(), 0, "client still renewing");
    }
}

/// Starts `count` tasks that each wait for `lock` through a failover: an error
/// while there is no primary is retried (200 ms apart, 200 times at most), a wait
/// of 20 s without the lock ends the task. Each ends `true` when it acquired (and
/// released) the lock.
pub fn spawn_failover_waiters(
    lock: &redisson_locks::RLock,
    count: usize,
) -> Vec<tokio::task::JoinHandle<bool>> {
    (0..count)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move {
                for _ in 0..200 {
                    match lock.try_lock_wait(Duration::from_secs(20)).await {
                        Ok(Some(guard)) => {
                            guard.unlock().await.ok();
                            return true;
                        }
                        Ok(None) => return false,
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
                false
            })
        })
        .collect()
}

/// Whether every failover waiter acquired, all of them ending within a minute.
pub async fn all_acquired(waiters: Vec<tokio::task::JoinHandle<bool>>) -> bool {
    within(
        Duration::from_secs(60),
        "waiters after the failover",
        async {
            let mut all = true;
            for waiter in waiters {
                all &= waiter.await.expect("waiter task");
            }
            all
        },
    )
    .await
}
