//! Test support: real `redis-server` processes, one per test, on free loopback ports
//! in temp dirs, killed and reaped on drop; plus helpers that read the server's
//! state (keys, command counts, subscriptions) to assert on.
//!
//! # Which server
//!
//! - `REDIS_SERVER`: the server binary every test starts (default `redis-server`,
//!   found on `PATH`). Any Redis 6.2 or newer, or Valkey, will do:
//!   `REDIS_SERVER=/path/to/valkey-server cargo test --all-features --test locks`.
//! - `REDIS_SENTINEL`: the binary the Sentinel tests start as
//!   `$REDIS_SENTINEL sentinel.conf --sentinel` (default: the server binary above,
//!   so `redis-server --sentinel`; `redis-sentinel` works as well).
//!
//! `scripts/servers` installs Valkey 8.1 and Redis 6.2 into `target/servers/` and
//! prints their paths; `scripts/test` runs the lock tests on each.
//!
//! The server's version is read once from `$REDIS_SERVER --version`
//! ([`server_version`]). Test support passes only the options that version knows,
//! and a test that needs a newer server asks [`server_has`] first: on an older one
//! it prints `skipped: needs Redis 7.0 or newer (...)` to stderr (past the test
//! harness's capture, so it shows in every run) and returns without checking
//! anything.

#![allow(dead_code, unreachable_pub)]

pub mod checker;
pub mod child;
pub mod cluster;
pub mod exclusion;
pub mod fair;
pub mod fake_resp;
pub mod history;
pub mod java;
pub mod progress;
pub mod proxy;
pub mod sentinel;

use std::io::Write as _;
use std::net::TcpListener;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use redisson_locks::testing::TestServer;
pub use redisson_locks::{Client, Config};

/// How a client's identity key begins (see `src/engine/identity.rs`).
pub const IDENTITY_PREFIX: &str = "redisson_locks_client:";

/// The server binary tests start: `REDIS_SERVER`, or `redis-server` on `PATH`.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".into())
}

/// The binary the Sentinel tests start with `--sentinel`: `REDIS_SENTINEL`, or
/// the server binary (a Redis or Valkey server is a sentinel given `--sentinel`).
pub fn sentinel_binary() -> String {
    std::env::var("REDIS_SENTINEL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(server_binary)
}

/// What the server binary says it is (`--version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersion {
    /// `Redis` or `Valkey` (the first word of the `--version` line).
    pub name: String,
    /// `(major, minor, patch)` in the product's own numbering.
    pub version: (u32, u32, u32),
}

impl ServerVersion {
    /// Parses a `--version` line: `Redis server v=7.0.15 sha=...` or
    /// `Valkey server v=8.1.8 sha=...`.
    pub fn parse(line: &str) -> Option<ServerVersion> {
        let name = line.split_whitespace().next()?.to_owned();
        let number = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("v="))?;
        let mut parts = number.split('.').map(|p| p.parse::<u32>());
        let major = parts.next()?.ok()?;
        let minor = parts.next().unwrap_or(Ok(0)).ok()?;
        let patch = parts.next().unwrap_or(Ok(0)).ok()?;
        Some(ServerVersion {
            name,
            version: (major, minor, patch),
        })
    }

    /// Whether this server has what Redis `major.minor` has. Valkey forked from
    /// Redis 7.2.4 and every Valkey release (7.2 on) has all of Redis 7.2, so its
    /// own numbers compare correctly against any Redis version up to 7.2, the
    /// newest any test asks for.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.version.0, self.version.1) >= (major, minor)
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor, patch) = self.version;
        write!(f, "{} {major}.{minor}.{patch}", self.name)
    }
}

/// The version of [`server_binary`], read once per test process.
///
/// # Panics
///
/// When the binary does not run or its `--version` line has no `v=X.Y.Z`: no
/// test could start a server then, and guessing a version would choose options
/// and skips wrongly.
pub fn server_version() -> &'static ServerVersion {
    static VERSION: OnceLock<ServerVersion> = OnceLock::new();
    VERSION.get_or_init(|| {
        let binary = server_binary();
        let out = Command::new(&binary)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "could not run `{binary} --version` ({e}); is it installed? \
                     (REDIS_SERVER names another binary)"
                )
            });
        let text = String::from_utf8_lossy(&out.stdout);
        ServerVersion::parse(&text).unwrap_or_else(|| {
            panic!("`{binary} --version` printed no version (v=X.Y.Z): {text:?}")
        })
    })
}

/// Whether the server under test has what Redis `major.minor` has. When it does
/// not, prints why the calling test skips (`skipped: needs Redis 7.0 or newer
/// (sharded pub/sub); redis-server is Redis 6.2.14`) and returns false; the test
/// then returns at once, checking nothing:
///
/// ```ignore
/// if !support::server_has(7, 0, "sharded pub/sub") {
///     return;
/// }
/// ```
pub fn server_has(major: u32, minor: u32, what: &str) -> bool {
    let server = server_version();
    if server.at_least(major, minor) {
        return true;
    }
    let test = std::thread::current()
        .name()
        .map(|name| format!("{name}: "))
        .unwrap_or_default();
    // Straight to the stderr stream, past libtest's capture of `eprintln!`, so a
    // skip shows in every run and not only in a failing one. A failed write to
    // stderr leaves nowhere to report it.
    let _ = writeln!(
        std::io::stderr(),
        "{test}skipped: needs Redis {major}.{minor} or newer ({what}); {} is {server}",
        server_binary()
    );
    false
}

/// A `redis-server` owned by one test: the crate's own test kit's server
/// (`redisson_locks::testing::TestServer`, the one spawner), with the tests'
/// defaults and helpers.
pub struct RedisServer {
    server: TestServer,
    extra_args: Vec<String>,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// A loopback port where no server is: bound, never listened on, and held
/// so while the returned socket lives (a port `free_port` picks and frees
/// could be taken meanwhile by another test's server). A connection to it
/// is refused.
pub fn closed_port() -> (rustix::fd::OwnedFd, u16) {
    use rustix::net::{bind, getsockname, socket, AddressFamily, SocketType};
    let socket = socket(AddressFamily::INET, SocketType::STREAM, None).expect("a socket");
    bind(&socket, &std::net::SocketAddr::from(([127, 0, 0, 1], 0))).expect("a loopback port");
    let address = getsockname(&socket).expect("its address");
    let port = std::net::SocketAddr::try_from(address)
        .expect("an IPv4 address")
        .port();
    (socket, port)
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (`["--requirepass", "x"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_on(extra, free_port)
    }

    /// [`start_with`](Self::start_with) on a port that `pick` finds free (a
    /// cluster node before 7.0 needs its bus port, port + 10000, free as well).
    pub fn start_on(extra: &[&str], pick: fn() -> u16) -> Self {
        let mut args: Vec<&str> = Vec::new();
        // No test sends DEBUG; it is on for poking at a test's server by hand. 7.0
        // turned it off unless this option says otherwise; 6.2 has it on and
        // refuses the option.
        if server_version().at_least(7, 0) {
            args.extend(["--enable-debug-command", "local"]);
        }
        args.extend_from_slice(extra);
        // A port found free can be taken by another process before the server binds
        // it: try a few.
        let mut last = None;
        for _ in 0..10 {
            match TestServer::start_on(server_binary(), pick(), &args) {
                Ok(server) => {
                    return RedisServer {
                        server,
                        extra_args: extra.iter().map(|s| s.to_string()).collect(),
                    }
                }
                Err(e) => last = Some(e),
            }
        }
        panic!(
            "could not start {} ({}) with {:?}: {last:?}",
            server_binary(),
            server_version(),
            extra
        );
    }

    /// Starts a replica of `primary` and waits until its initial sync is done.
    pub async fn start_replica_of(primary: &RedisServer) -> RedisServer {
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
        assert!(
            eventually(Duration::from_secs(10), || async {
                let info = replica.info("replication").await;
                info.contains("master_link_status:up")
            })
            .await,
            "the replica did not sync"
        );
        replica
    }

    pub fn port(&self) -> u16 {
        self.server.port()
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    pub fn dir(&self) -> &std::path::Path {
        self.server.dir()
    }

    pub fn pid(&self) -> u32 {
        self.server.pid().expect("server not running")
    }

    /// A client configuration for this server with short timeouts for tests,
    /// re-checking a sleeping wait only every [`SUITE_RECHECK`].
    pub fn config(&self) -> Config {
        let mut config = Config::from_url(&self.url()).expect("url");
        config.connect_timeout = Duration::from_secs(2);
        config.timeout = Duration::from_secs(2);
        config.retry_interval = Duration::from_millis(200);
        config.recheck_interval = SUITE_RECHECK;
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
        let mut admin = client
            .get_multiplexed_async_connection()
            .await
            .expect("admin connection");
        // Named, so that a server too old to show a connection's protocol
        // (Redis 6.2) still tells the kit's connections from the clients'
        // (see `kill_lock_connections`).
        let _: () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(ADMIN_NAME)
            .query_async(&mut admin)
            .await
            .expect("CLIENT SETNAME");
        admin
    }

    /// Every key in the server but the clients' identity keys
    /// (`redisson_locks_client:{<id>}`, which live as long as their client,
    /// whatever it holds: see [`identity_keys`](RedisServer::identity_keys)).
    pub async fn keys(&self) -> Vec<String> {
        let mut keys = self.all_keys().await;
        keys.retain(|key| !key.starts_with(IDENTITY_PREFIX));
        keys
    }

    /// The identity keys of the clients connected (and announcing) now.
    pub async fn identity_keys(&self) -> Vec<String> {
        let mut keys = self.all_keys().await;
        keys.retain(|key| key.starts_with(IDENTITY_PREFIX));
        keys
    }

    /// Every key in the server, sorted.
    pub async fn all_keys(&self) -> Vec<String> {
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

    /// One section of `INFO`.
    pub async fn info(&self, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.admin().await)
            .await
            .expect("INFO")
    }

    /// How many connections wait in a blocking command (INFO clients'
    /// `blocked_clients`: a WAIT, for one).
    pub async fn blocked_clients(&self) -> u64 {
        let info = self.info("clients").await;
        info.lines()
            .find_map(|line| line.strip_prefix("blocked_clients:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// How many times `command` ran (INFO commandstats, e.g. "evalsha").
    pub async fn command_calls(&self, command: &str) -> u64 {
        let info = self.info("commandstats").await;
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

    /// The ids of the connections (CLIENT LIST) whose line `wanted` picks.
    async fn connection_ids(&self, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        let list = self.client_list().await;
        list.lines()
            .filter(|line| wanted(line))
            .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
            .map(str::to_owned)
            .collect()
    }

    /// Kills the connections of this crate's clients (RESP3), and no admin
    /// connection. Returns how many. A server older than 7.0 shows no
    /// protocol in `CLIENT LIST` (where the filter once matched nothing, and
    /// the cut never happened): there every connection but the kit's own
    /// (named [`ADMIN_NAME`]) and replication's is cut.
    pub async fn kill_lock_connections(&self) -> usize {
        let ids = self.connection_ids(is_lock_connection).await;
        let mut admin = self.admin().await;
        for id in &ids {
            // Gone already is fine: it may have closed meanwhile.
            let _: redis::RedisResult<redis::Value> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut admin)
                .await;
        }
        ids.len()
    }

    /// Cuts this crate's connections every 50 to 150 ms until `stop` is set;
    /// how many cuts.
    pub async fn keep_cutting(&self, stop: &std::sync::atomic::AtomicBool) -> usize {
        let mut cuts = 0;
        for i in 0u64.. {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50 + (i * 37) % 100)).await;
            self.kill_lock_connections().await;
            cuts += 1;
        }
        cuts
    }

    /// Kills the connections that hold subscriptions (those of waiting clients),
    /// and no others. Returns how many.
    pub async fn kill_subscribers(&self) -> usize {
        let subscribed = |line: &str| {
            line.split(' ')
                .find_map(|f| f.strip_prefix("sub="))
                .is_some_and(|n| n != "0")
        };
        let ids = self.connection_ids(subscribed).await;
        let mut admin = self.admin().await;
        for id in &ids {
            let _: redis::Value = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut admin)
                .await
                .expect("CLIENT KILL ID");
        }
        ids.len()
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
        self.server.kill();
    }

    /// Kills the server and starts a fresh one (empty) on the same port.
    pub fn restart(&mut self) {
        if let Err(e) = self.server.restart() {
            panic!(
                "could not restart {} on port {} with {:?}: {e}",
                server_binary(),
                self.port(),
                self.extra_args
            );
        }
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

/// How late a loaded machine may be, on top of the time a mechanism takes by
/// itself: a debug build on two cores shared with another CPU-heavy job is at
/// times ten times slower than alone. A slow machine is late, never early, so
/// lower bounds ("not before the wait") need no such margin; upper bounds that
/// only say "on time" take this one.
pub const LATE: Duration = Duration::from_secs(5);

/// The bound of a wake-up that a message brings (an unlock, a release), where
/// the alternative is a waiter sleeping out the TTL of a hold under the default
/// 30 s watchdog: renewed every 10 s, that TTL is never below 20 s. A third of
/// the lease: room for a loaded machine on one side, for the fallback on the
/// other.
pub const PROMPT: Duration = Duration::from_secs(10);

/// How often the suite's clients re-check a sleeping wait
/// (`Config::recheck_interval`, 1 s by default): longer than the default
/// lease, so that a wake-up within [`PROMPT`] or [`SYNC_RECHECK`] came from a
/// message (or from a lease's end the waiter knew of), never from the
/// re-check, which would hide a lost message. The tests of the re-check set
/// their own, and the campaigns run with the default.
pub const SUITE_RECHECK: Duration = Duration::from_secs(40);

/// A bound on a semaphore's or a latch's wake-up by a message: a wake-up
/// well within it came from the message (the suite's clients re-check only
/// every [`SUITE_RECHECK`]).
pub const SYNC_RECHECK: Duration = Duration::from_secs(5);

/// Runs `attempt`, which must give up (answer `false`) on time: not before
/// `wait` (an outcome: it must not give up early), and not much after it
/// ([`LATE`]: a loaded machine may be late).
pub async fn gives_up_on_time(wait: Duration, attempt: impl std::future::Future<Output = bool>) {
    let started = Instant::now();
    assert!(!attempt.await, "it succeeded; it should have given up");
    let took = started.elapsed();
    assert!(
        took >= wait && took < wait + LATE,
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

/// A task that takes `lock`, says so on the receiver, and releases it when
/// told on the sender.
pub fn holds_until_told(
    lock: redisson_locks::RLock,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (has_it, has) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        has_it.send(()).unwrap();
        released.await.unwrap();
        guard.unlock().await.unwrap();
    });
    (task, has, release)
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

/// The name of the kit's own connections (`RedisServer::admin`).
const ADMIN_NAME: &str = "redisson-locks-test-admin";

/// Whether a `CLIENT LIST` line is a connection of this crate's clients:
/// RESP3 where the server shows the protocol (7.0+); elsewhere any
/// connection but the kit's own and replication's.
fn is_lock_connection(line: &str) -> bool {
    let field = |name: &str| {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_default()
    };
    if line.contains(" resp=") {
        return field("resp") == "3";
    }
    field("name") != ADMIN_NAME && !field("flags").contains(['S', 'M'])
}

#[cfg(test)]
mod tests {
    use super::ServerVersion;

    /// The `--version` lines of the three servers the suite runs on.
    #[test]
    fn version_lines_of_redis_and_valkey_parse() {
        let parse = |line| ServerVersion::parse(line).expect(line);
        let debian = parse("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64");
        let valkey = parse("Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64");
        let old = parse("Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64");
        assert_eq!(debian.to_string(), "Redis 7.0.15");
        assert_eq!(valkey.to_string(), "Valkey 8.1.8");
        assert_eq!(old.version, (6, 2, 14));
        assert!(debian.at_least(7, 0) && valkey.at_least(7, 0) && valkey.at_least(7, 2));
        assert!(old.at_least(6, 2) && !old.at_least(7, 0));
        assert_eq!(
            ServerVersion::parse("redis-server: command not found"),
            None
        );
    }
}
