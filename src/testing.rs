//! A kit for testing your own code against lost locks, on a real server
//! (feature `test-util`).
//!
//! Mocks of a lock cannot lose it the way Redis does, so this kit does not
//! mock: [`TestServer`] starts a throwaway `redis-server` for one test (a
//! free loopback port, a temp dir, no persistence, killed on drop), and then
//! does to it what production does to your holds, when your test wants it:
//!
//! - [`end_lease`](TestServer::end_lease): the lock's lease ends now, on the
//!   server, as if it had run out. The holder finds out as it would in
//!   production: its next renewal finds the hold gone, its
//!   [`lease_lost()`](crate::LockGuard::lease_lost) completes and a section
//!   under [`run`](crate::LockGuard::run) is cut with
//!   [`Error::LeaseLost`]. (A hold taken with an
//!   explicit lease is not renewed: it finds out when its own validity ends.)
//! - [`pause`](TestServer::pause): the server answers nobody for a while.
//! - [`cut_connections`](TestServer::cut_connections): every client's
//!   connections are cut, as by a network blip; the clients reconnect.
//!
//! The server is `$REDIS_SERVER` when set, else `redis-server` on `PATH`
//! (Debian: `apt-get install redis-server`); without one,
//! [`TestServer::start`] fails with a message that says so.
//!
//! # Example: my job stops writing when it loses the lock
//!
//! The job under test writes while it holds `reports`; the test ends the
//! lease under it and checks that the job stopped, and wrote nothing after.
//! A job that ignored the loss would write on, and the test would fail.
//!
//! ```no_run
//! use std::sync::{Arc, Mutex};
//! use std::time::{Duration, Instant};
//!
//! use redisson_locks::testing::TestServer;
//! use redisson_locks::{Client, Error};
//!
//! /// The code under test: writes a line every 20 ms for as long as it holds
//! /// the lock, and stops the moment it does not.
//! async fn write_reports(client: Client, written: Arc<Mutex<Vec<Instant>>>) -> Result<(), Error> {
//!     let guard = client.get_lock("reports")?.lock().await?;
//!     guard
//!         .run(async {
//!             loop {
//!                 written.lock().unwrap().push(Instant::now());
//!                 tokio::time::sleep(Duration::from_millis(20)).await;
//!             }
//!         })
//!         .await
//! }
//!
//! # async fn my_job_stops_writing_when_it_loses_the_lock() -> Result<(), Error> {
//! // In your tests: #[tokio::test]
//! let server = TestServer::start()?;
//! let client = server.client().await?;
//! let written = Arc::new(Mutex::new(Vec::new()));
//! let job = tokio::spawn(write_reports(client.clone(), written.clone()));
//! while written.lock().unwrap().is_empty() {
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! }
//!
//! server.end_lease("reports").await?;
//!
//! // The job ends, told why, within a renewal (half a second here)...
//! let ended = tokio::time::timeout(Duration::from_secs(5), job)
//!     .await
//!     .expect("the job kept running after it lost the lock")
//!     .expect("the job panicked");
//! assert!(ended.unwrap_err().is_lease_lost());
//! // ... and writes nothing more.
//! let count = written.lock().unwrap().len();
//! tokio::time::sleep(Duration::from_millis(200)).await;
//! assert_eq!(written.lock().unwrap().len(), count);
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::{Client, Config};

/// The watchdog lease of [`TestServer::config`]: renewals every 500 ms, so a
/// lease the kit ends is found lost within half a second.
pub const TEST_WATCHDOG: Duration = Duration::from_millis(1_500);

/// How long a server may take to listen after it is started.
const START_LIMIT: Duration = Duration::from_secs(10);

/// A throwaway `redis-server` for one test: killed, and its directory
/// removed, when dropped.
#[derive(Debug)]
pub struct TestServer {
    /// The running process; `None` once [`kill`](TestServer::kill)ed.
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    binary: String,
    args: Vec<String>,
    /// The `--requirepass` among `args`: the kit's own connections (the
    /// faults, the check that the server answering is this one) and
    /// [`config`](TestServer::config) authenticate with it.
    password: Option<String>,
}

/// Tells apart the directories of one process's servers.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

impl TestServer {
    /// Starts `$REDIS_SERVER` (else `redis-server` on `PATH`) on a free
    /// loopback port, in a temp dir of its own, with no persistence, and
    /// waits until it listens.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// // In your tests: #[tokio::test]
    /// let server = TestServer::start()?; // its own server: no test shares it
    /// let client = server.client().await?;
    /// let guard = client.get_lock("reports")?.lock().await?;
    /// guard.unlock().await?;
    /// // At the end of the test, dropping `server` kills it and removes its directory.
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the binary cannot be found or run (the message
    /// says how to install it), or when it does not listen within 10 s.
    pub fn start() -> Result<TestServer> {
        TestServer::start_with(default_binary(), &[])
    }

    /// [`start`](TestServer::start) with a server binary of your choosing: a
    /// path to a `redis-server` or `valkey-server`, or a name on `PATH`.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// // The same test against Valkey, whatever `REDIS_SERVER` says.
    /// let server = TestServer::start_from("valkey-server")?;
    /// assert!(server.is_running());
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`start`](TestServer::start).
    pub fn start_from(binary: impl AsRef<std::ffi::OsStr>) -> Result<TestServer> {
        TestServer::start_with(binary, &[])
    }

    /// [`start_from`](TestServer::start_from) with more server arguments
    /// (`["--requirepass", "secret"]`, `["--maxclients", "10000"]`). A port
    /// found free can be taken by another process before the server binds it:
    /// a few free ports are tried. A `--requirepass` is remembered: the kit's
    /// faults authenticate with it, and [`config`](TestServer::config)
    /// carries it.
    ///
    /// ```no_run
    /// use redisson_locks::testing::{default_binary, TestServer};
    ///
    /// let server = TestServer::start_with(default_binary(), &["--maxmemory-policy", "noeviction"])?;
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`start`](TestServer::start).
    pub fn start_with(binary: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Result<TestServer> {
        let mut last = None;
        for _ in 0..PORT_TRIES {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(|e| Error::Config(format!("the test kit found no free port: {e}")))?
                .port();
            match TestServer::start_on(binary.as_ref(), port, args) {
                Ok(server) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("the test kit started no server".into())))
    }

    /// Starts `binary` with `args` on loopback port `port` (which the caller
    /// found free: a cluster node needs its bus port, `port + 10000`, free
    /// too), in a temp dir of its own, and waits until it listens.
    ///
    /// # Errors
    /// As [`start`](TestServer::start), and when the port is taken: by
    /// anything (the server exits), or by another Redis server, which is
    /// never taken for this one (the server that answers must be the process
    /// started, by its `INFO server` `process_id`).
    ///
    /// ```no_run
    /// use std::net::TcpListener;
    /// use redisson_locks::testing::{default_binary, TestServer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A port of the test's own choosing: here one the system says is free now.
    /// let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    /// let server = TestServer::start_on(default_binary(), port, &["--maxclients", "100"])?;
    /// assert_eq!(server.port(), port);
    /// # Ok(()) }
    /// ```
    pub fn start_on(
        binary: impl AsRef<std::ffi::OsStr>,
        port: u16,
        args: &[&str],
    ) -> Result<TestServer> {
        let dir = std::env::temp_dir().join(format!(
            "redisson-locks-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::Config(format!("the test kit cannot create {}: {e}", dir.display()))
        })?;
        let mut server = TestServer {
            child: None,
            dir,
            port,
            binary: binary.as_ref().to_string_lossy().into_owned(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            password: required_password(args),
        };
        // Dropped on failure: the directory goes with it.
        server.spawn().map_err(Error::from)?;
        Ok(server)
    }

    /// Its loopback port.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = TestServer::start()?;
    /// // For code under test that takes a host and a port rather than a URL.
    /// let stream = std::net::TcpStream::connect(("127.0.0.1", server.port()))?;
    /// # drop(stream);
    /// # Ok(()) }
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (its logs and files, when its arguments ask for any).
    ///
    /// ```no_run
    /// use redisson_locks::testing::{default_binary, TestServer};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A relative log file lands in the server's directory.
    /// let server = TestServer::start_with(default_binary(), &["--logfile", "server.log"])?;
    /// // ... the test; on a failure, show what the server said ...
    /// let log = std::fs::read_to_string(server.dir().join("server.log"))?;
    /// eprintln!("{log}");
    /// # Ok(()) }
    /// ```
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Its process id; `None` once killed through [`kill`](TestServer::kill).
    /// A server that ended by itself (a crash, a `SHUTDOWN`) is not noticed
    /// here: it keeps its id until killed or restarted.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// let mut server = TestServer::start()?;
    /// let pid = server.pid().expect("a started server runs");
    /// eprintln!("redis-server is process {pid}"); // to attach a debugger, say
    /// server.kill();
    /// assert_eq!(server.pid(), None);
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it runs as far as the kit knows: it was not
    /// [`kill`](TestServer::kill)ed (a server that ended by itself still
    /// counts as running).
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// let mut server = TestServer::start()?;
    /// assert!(server.is_running());
    /// server.kill();
    /// assert!(!server.is_running());
    /// server.restart()?;
    /// assert!(server.is_running());
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL), as a crash would, and reaps it. Its port
    /// and directory stay for [`restart`](TestServer::restart).
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let mut server = TestServer::start()?;
    /// let client = server.client().await?;
    /// let lock = client.get_lock("reports")?;
    /// server.kill(); // the server crashes
    /// // The code under test must cope: its calls fail (after their retries),
    /// // with an error a later attempt may get past.
    /// let err = lock.try_lock().await.unwrap_err();
    /// assert!(err.is_transient());
    /// # Ok(()) }
    /// ```
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts a fresh one, empty (no persistence), on
    /// the same port, as a restart after a crash: clients reconnect to it.
    ///
    /// # Errors
    /// As [`start`](TestServer::start), when it does not start again within
    /// 10 s; at once when another Redis server listens on its port now.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let mut server = TestServer::start()?;
    /// let client = server.client().await?;
    /// let guard = client.get_lock("reports")?.lock().await?;
    /// server.restart()?; // a crash, and back, empty: every hold is gone
    /// // The holder finds out at its next renewal (within half a second here).
    /// guard.lease_lost().await;
    /// // The client reconnected: the lock can be taken again.
    /// let again = client.get_lock("reports")?.lock().await?;
    /// again.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        let deadline = Instant::now() + START_LIMIT;
        loop {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(Spawn::Taken(e)) => return Err(e),
                // The old process's port may linger for a moment.
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Runs the binary on this server's port and directory, and waits until it
    /// listens (or exits: the port was taken, most likely). A server already
    /// answering there, or answering in its place, is another's: refused.
    fn spawn(&mut self) -> std::result::Result<(), Spawn> {
        if let Some(other) = server_pid(self.port, self.password.as_deref()) {
            return Err(Spawn::Taken(self.taken(other)));
        }
        let spawned = Command::new(&self.binary)
            .current_dir(&self.dir)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let binary = self.binary.clone();
        let child = spawned.map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (install it: `apt-get install redis-server`, or set REDIS_SERVER to \
                 the path of a redis-server or valkey-server)"
            } else {
                ""
            };
            Spawn::Failed(Error::Config(format!(
                "the test kit cannot start '{binary}': {e}{hint}"
            )))
        })?;
        let own = child.id();
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if answers(self.port) {
                match server_pid(self.port, self.password.as_deref()) {
                    Some(pid) if pid == own => return Ok(()),
                    Some(other) => {
                        self.kill();
                        return Err(Spawn::Taken(self.taken(other)));
                    }
                    // Not ready to say yet (loading): asked again.
                    None => {}
                }
            }
            let exited = self
                .child
                .as_mut()
                .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))));
            if exited || started.elapsed() > START_LIMIT {
                self.kill();
                return Err(Spawn::Failed(Error::Config(format!(
                    "the test kit's '{binary}' did not listen on port {} within 10 s{}",
                    self.port,
                    if exited {
                        " (it exited: is the port taken?)"
                    } else {
                        ""
                    }
                ))));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The error for this server's port, found taken by the Redis server `other`.
    fn taken(&self, other: u32) -> Error {
        Error::Config(format!(
            "the test kit cannot start '{}' on port {}: the port is taken by another Redis \
             server (process {other}), which is not this test's",
            self.binary, self.port
        ))
    }

    /// Its address: `redis://127.0.0.1:<port>`.
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use redisson_locks::testing::TestServer;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = TestServer::start()?;
    /// assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    /// // A service under test, run as a process, pointed at the test's server.
    /// // (The URL carries no password: with `--requirepass`, pass it too.)
    /// let status = Command::new("./target/debug/my-service")
    ///     .env("REDIS_URL", server.url())
    ///     .status()?;
    /// assert!(status.success());
    /// # Ok(()) }
    /// ```
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A configuration for it: [`Config::new`] with its address, the
    /// password it was started with (`--requirepass`), and a watchdog lease
    /// of [`TEST_WATCHDOG`] (renewals every 500 ms, so that a
    /// lease ended by [`end_lease`](TestServer::end_lease) is found lost
    /// within half a second; the default 30 s would take up to 10 s).
    ///
    /// ```no_run
    /// use redisson_locks::testing::{default_binary, TestServer, TEST_WATCHDOG};
    /// use redisson_locks::{Client, OwnerMode};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let server = TestServer::start_with(default_binary(), &["--requirepass", "secret"])?;
    /// let mut config = server.config();
    /// assert_eq!(config.password.as_deref(), Some("secret"));
    /// assert_eq!(config.lock_watchdog_timeout, TEST_WATCHDOG);
    /// // Then the settings of the code under test, before connecting.
    /// config.owner_mode = OwnerMode::Task;
    /// let client = Client::connect(config).await?;
    /// # drop(client);
    /// # Ok(()) }
    /// ```
    pub fn config(&self) -> Config {
        let mut config = Config::new(self.url());
        config.lock_watchdog_timeout = TEST_WATCHDOG;
        config.password = self.password.clone();
        config
    }

    /// A client of it, with [`config`](TestServer::config).
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let server = TestServer::start()?;
    /// // Two clients contend as two processes would.
    /// let (a, b) = (server.client().await?, server.client().await?);
    /// let held = a.get_lock("reports")?.lock().await?;
    /// assert!(b.get_lock("reports")?.try_lock().await?.is_none());
    /// held.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub async fn client(&self) -> Result<Client> {
        Client::connect(self.config()).await
    }

    /// Ends the lease of the lock `name` now, whoever holds it and whatever
    /// its kind (reentrant, fair, fenced, read-write, a single-hash group):
    /// its holds are gone from the server, as if their leases had run out,
    /// and nothing is announced (a lease that runs out announces nothing
    /// either). Its holders find out at their next renewal; its waiters at
    /// their next look, within the lease they were waiting out. A fair lock's
    /// queue, and a fenced lock's token, are left as they are. `false` when
    /// nothing held it.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let server = TestServer::start()?;
    /// let client = server.client().await?;
    /// let guard = client.get_lock("reports")?.lock().await?;
    /// assert!(server.end_lease("reports").await?); // it was held: ended
    /// guard.lease_lost().await; // the holder finds out at its next renewal
    /// assert!(!server.end_lease("reports").await?); // nothing holds it now
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty or oversized name;
    /// [`Error::Redis`] when the server cannot be reached.
    pub async fn end_lease(&self, name: &str) -> Result<bool> {
        crate::transport::keys::validate_name(name)?;
        let mut admin = self.admin().await?;
        let ended: i64 = redis::cmd("DEL")
            .arg(name)
            .query_async(&mut admin)
            .await
            .map_err(Error::redis)?;
        // A read-write lock's per-hold leases live beside it.
        let pattern = crate::transport::keys::read_hold_pattern(name);
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut admin)
                .await
                .map_err(Error::redis)?;
            if !keys.is_empty() {
                let _: i64 = redis::cmd("DEL")
                    .arg(&keys)
                    .query_async(&mut admin)
                    .await
                    .map_err(Error::redis)?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok(ended > 0)
    }

    /// Pauses the server for `duration`: it answers no client's command
    /// until then (`CLIENT PAUSE ... ALL`), as a server stalled by a long
    /// command, a fork or a failover would. Returns at once.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let server = TestServer::start()?;
    /// let client = server.client().await?;
    /// let guard = client.get_lock("reports")?.lock().await?;
    /// // Stalled for longer than the lease (TEST_WATCHDOG, 1.5 s): no renewal
    /// // gets through, and the holder must stop trusting its hold.
    /// server.pause(Duration::from_secs(2)).await?;
    /// guard.lease_lost().await; // on its own clock, while the server is still paused
    /// assert!(guard.valid_for().is_none());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero duration; [`Error::Redis`] when
    /// the server cannot be reached.
    pub async fn pause(&self, duration: Duration) -> Result<()> {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        if millis == 0 {
            return Err(Error::invalid("a pause must last at least a millisecond"));
        }
        let mut admin = self.admin().await?;
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(millis)
            .arg("ALL")
            .query_async::<()>(&mut admin)
            .await
            .map_err(Error::redis)
    }

    /// Cuts every client's connections (`CLIENT KILL`), as a network blip
    /// would: commands in flight fail or are retried, and the clients
    /// reconnect. Returns how many connections were cut.
    ///
    /// ```no_run
    /// use redisson_locks::testing::TestServer;
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let server = TestServer::start()?;
    /// let client = server.client().await?;
    /// let lock = client.get_lock("reports")?;
    /// let guard = lock.lock().await?;
    /// assert!(server.cut_connections().await? >= 1); // this client's, at least
    /// // A blip, not a loss: the client reconnects, and the hold is still there.
    /// assert!(lock.is_locked().await?);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Redis`] when the server cannot be reached.
    pub async fn cut_connections(&self) -> Result<usize> {
        let mut admin = self.admin().await?;
        let mut cut = 0;
        for kind in ["normal", "pubsub"] {
            let killed: usize = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg(kind)
                .arg("SKIPME")
                .arg("yes")
                .query_async(&mut admin)
                .await
                .map_err(Error::redis)?;
            cut += killed;
        }
        Ok(cut)
    }

    /// A plain connection of the kit's own, for the faults: authenticated
    /// with the password the server was started with.
    async fn admin(&self) -> Result<redis::aio::MultiplexedConnection> {
        use redis::IntoConnectionInfo as _;
        let mut info = self.url().into_connection_info().map_err(Error::redis)?;
        if let Some(password) = &self.password {
            let settings = info.redis_settings().clone().set_password(password);
            info = info.set_redis_settings(settings);
        }
        redis::Client::open(info)
            .map_err(Error::redis)?
            .get_multiplexed_async_connection()
            .await
            .map_err(Error::redis)
    }
}

/// Why a server did not start: [`Taken`](Spawn::Taken) is final (another
/// Redis server has the port), a [`Failed`](Spawn::Failed) start may be tried
/// again once the port is free.
#[derive(Debug)]
enum Spawn {
    Taken(Error),
    Failed(Error),
}

impl From<Spawn> for Error {
    fn from(spawn: Spawn) -> Error {
        match spawn {
            Spawn::Taken(e) | Spawn::Failed(e) => e,
        }
    }
}

/// The value of the last `--requirepass` in a server's arguments.
fn required_password(args: &[&str]) -> Option<String> {
    args.windows(2)
        .rev()
        .find(|pair| pair[0] == "--requirepass")
        .map(|pair| pair[1].to_owned())
        .filter(|password| !password.is_empty())
}

/// The process id of the Redis server answering on loopback `port`, by its
/// `INFO server` (after `AUTH password`, if one is given); `None` when none
/// answers that.
fn server_pid(port: u16, password: Option<&str>) -> Option<u32> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let command = |parts: &[&str]| {
        let mut wire = format!("*{}\r\n", parts.len());
        for part in parts {
            wire.push_str(&format!("${}\r\n{part}\r\n", part.len()));
        }
        wire
    };
    let mut request = String::new();
    if let Some(password) = password {
        request.push_str(&command(&["AUTH", password]));
    }
    request.push_str(&command(&["INFO", "server"]));
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
        // An error (the password refused, INFO unknown) or the end: no answer.
        if text.lines().any(|line| line.starts_with('-')) {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server binary the kit starts by default: `$REDIS_SERVER` when set and
/// not empty, else `redis-server` (on `PATH`).
///
/// ```
/// use redisson_locks::testing::default_binary;
///
/// // What `TestServer::start` runs: CI can point REDIS_SERVER at a build of the
/// // version under test, or at a `valkey-server`, without touching the tests.
/// let binary = default_binary();
/// assert!(!binary.is_empty());
/// println!("test servers run {binary}");
/// ```
pub fn default_binary() -> String {
    std::env::var("REDIS_SERVER")
        .ok()
        .filter(|binary| !binary.is_empty())
        .unwrap_or_else(|| "redis-server".to_owned())
}

/// Whether a Redis server answers on loopback `port`: a `PING` gets a reply
/// (`+PONG`, or an error such as `-NOAUTH`), not just a connection, which
/// anything listening there would accept.
fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut reply = [0u8; 1];
    stream.write_all(b"PING\r\n").is_ok()
        && matches!(stream.read(&mut reply), Ok(1) if reply[0] == b'+' || reply[0] == b'-')
}

/// How many free ports [`TestServer::start_with`] tries.
const PORT_TRIES: usize = 10;
