//! Java Redisson in the loop: the driver process of `interop/java` (a Maven
//! project using Redisson's public API), built once per test process and started
//! once per test. Commands go to its stdin as JSON lines; events come back on its
//! stdout as JSON lines (see `interop/java/README.md`).
//!
//! There is no skipping: without `java` and `mvn` the interop tests fail, saying
//! so. `scripts/test` installs them.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::RedisServer;

/// The Redisson release the tests run against unless `REDISSON_VERSION` says
/// otherwise: the newest 3.x.
pub const DEFAULT_REDISSON_VERSION: &str = "3.52.0";

/// The Redisson release under test.
pub fn redisson_version() -> String {
    std::env::var("REDISSON_VERSION")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_REDISSON_VERSION.to_owned())
}

fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/java")
}

/// The built driver's classpath (`target/<V>/classes:<dependencies>`), building
/// it on the first call: `mvn package dependency:build-classpath`, once per test
/// process. A failed build fails every caller with Maven's output.
pub fn classpath() -> String {
    static BUILT: Mutex<Option<Result<String, String>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.is_none() {
        *built = Some(build());
    }
    match built.as_ref().expect("built above") {
        Ok(cp) => cp.clone(),
        Err(message) => panic!("{message}"),
    }
}

fn on_path(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn build() -> Result<String, String> {
    for (tool, arg) in [("java", "-version"), ("mvn", "-v")] {
        if !on_path(tool, arg) {
            return Err(format!(
                "the Java interop tests need `{tool}` on PATH (a JDK 17+ and Maven 3.8+); \
                 scripts/test installs them. These tests are never skipped."
            ));
        }
    }
    let version = redisson_version();
    let dir = project_dir();
    let cp_file = dir.join(format!("target/classpath-{version}.txt"));
    let started = Instant::now();
    // Another test process (a second `cargo test`) may build the same version at
    // the same moment: where `flock` exists, builds of one version take turns.
    let lock_file = dir.join(format!("target/.build-{version}.lock"));
    let mut cmd = if std::fs::create_dir_all(dir.join("target")).is_ok() && on_path("flock", "-V") {
        let mut cmd = Command::new("flock");
        cmd.arg(&lock_file).arg("mvn");
        cmd
    } else {
        Command::new("mvn")
    };
    cmd.args(["-q", "-B"])
        .arg("-f")
        .arg(dir.join("pom.xml"))
        .arg(format!("-Dredisson.version={version}"))
        .args(["package", "dependency:build-classpath"])
        .arg(format!("-Dmdep.outputFile={}", cp_file.display()))
        .arg("-DskipTests")
        .stdin(Stdio::null());
    let output = cmd
        .output()
        .map_err(|e| format!("could not run mvn: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the Java interop driver failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let deps = std::fs::read_to_string(&cp_file)
        .map_err(|e| format!("mvn wrote no classpath at {}: {e}", cp_file.display()))?;
    let classes = dir.join(format!("target/{version}/classes"));
    eprintln!(
        "built the Java interop driver for Redisson {version} in {:.1?}",
        started.elapsed()
    );
    Ok(format!("{}:{}", classes.display(), deps.trim()))
}

/// A running driver process: one Redisson client, its actors (threads) named by
/// the tests. Killed (SIGKILL) when dropped.
pub struct JavaDriver {
    child: Child,
    stdin: Option<ChildStdin>,
    events: mpsc::UnboundedReceiver<Value>,
    /// Events read but not yet matched by an `expect`.
    pending: Vec<Value>,
    /// Every line read, for failure messages.
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    /// Redisson's `getId()`: the first part of its hash fields.
    pub client_id: String,
    /// Whether this Redisson has the non-reentrant locks (4.x does, 3.x not).
    pub non_reentrant_supported: bool,
}

impl std::fmt::Debug for JavaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JavaDriver")
            .field("pid", &self.child.id())
            .field("client_id", &self.client_id)
            .finish()
    }
}

impl JavaDriver {
    /// Builds the driver if needed, starts it against `url` with Redisson's
    /// `lockWatchdogTimeout` = `watchdog` (and `fairLockWaitTimeout` = `fair_wait`
    /// when given), and waits for its `ready` event.
    pub async fn start(url: &str, watchdog: Duration, fair_wait: Option<Duration>) -> JavaDriver {
        Self::launch(url, watchdog, fair_wait, None).await
    }

    /// As [`start`](JavaDriver::start), with Redisson's `setDatabase(database)`
    /// (Redisson reads no database from the address).
    pub async fn start_on_database(url: &str, database: i64, watchdog: Duration) -> JavaDriver {
        Self::launch(url, watchdog, None, Some(database)).await
    }

    async fn launch(
        url: &str,
        watchdog: Duration,
        fair_wait: Option<Duration>,
        database: Option<i64>,
    ) -> JavaDriver {
        let url = url.to_owned();
        let mut driver = tokio::task::spawn_blocking(move || {
            let cp = classpath();
            let mut cmd = Command::new("java");
            // Small and quick to start: several of these share two cores with the
            // tests and the servers.
            cmd.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
                .arg("-cp")
                .arg(cp)
                .arg("io.redissonlocks.interop.Driver")
                .args(["--redis", &url])
                .arg("--watchdog-ms")
                .arg(watchdog.as_millis().to_string());
            if let Some(wait) = fair_wait {
                cmd.arg("--fair-wait-ms").arg(wait.as_millis().to_string());
            }
            if let Some(database) = database {
                cmd.arg("--database").arg(database.to_string());
            }
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("spawn java");
            let stdout = child.stdout.take().expect("driver stdout");
            let mut stderr_pipe = child.stderr.take().expect("driver stderr");
            let stdin = child.stdin.take();

            let (tx, rx) = mpsc::unbounded_channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let value = serde_json::from_str::<Value>(&line)
                        .unwrap_or_else(|_| json!({ "event": "unparsed", "line": line }));
                    if tx.send(value).is_err() {
                        break;
                    }
                }
            });
            let stderr = Arc::new(Mutex::new(String::new()));
            let sink = stderr.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr_pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    // Keep the tail only.
                    if text.len() > 64 * 1024 {
                        let cut = text.len() - 32 * 1024;
                        let cut = (cut..text.len())
                            .find(|i| text.is_char_boundary(*i))
                            .unwrap_or(0);
                        text.drain(..cut);
                    }
                }
            });
            JavaDriver {
                child,
                stdin,
                events: rx,
                pending: Vec::new(),
                seen: Vec::new(),
                stderr,
                client_id: String::new(),
                non_reentrant_supported: false,
            }
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        let ready = driver.expect("ready", None, Duration::from_secs(60)).await;
        driver.client_id = ready["client_id"]
            .as_str()
            .expect("ready carries client_id")
            .to_owned();
        driver.non_reentrant_supported = ready["non_reentrant_supported"] == true;
        driver
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command (a JSON object).
    pub fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        let stdin = self.stdin.as_mut().expect("driver stdin closed");
        if let Err(e) = stdin.write_all(line.as_bytes()).and_then(|_| stdin.flush()) {
            panic!(
                "writing to the Java driver failed ({e}); it said:\n{}",
                self.diagnostics()
            );
        }
    }

    /// Sends an actor's command on a lock: `{"op", "actor", "name", "kind", ..extra}`.
    pub fn act(&mut self, actor: &str, op: &str, kind: &str, name: &str, extra: Value) {
        let mut fields = json!({ "kind": kind });
        if let (Value::Object(fields), Value::Object(extra)) = (&mut fields, extra) {
            fields.extend(extra);
        }
        self.op(actor, op, name, fields);
    }

    /// Sends an actor's command on object `name`: `{"op", "actor", "name", ..extra}`.
    pub fn op(&mut self, actor: &str, op: &str, name: &str, extra: Value) {
        let mut command = json!({ "op": op, "actor": actor, "name": name });
        if let Value::Object(extra) = extra {
            command.as_object_mut().expect("object").extend(extra);
        }
        self.send(command);
    }

    /// `lock` for `actor`: `wait_ms` -1 is `lock()` / `lock(lease)`, >= 0
    /// `tryLock(wait, lease or -1)`; `lease_ms` 0 is the watchdog.
    pub fn lock(&mut self, actor: &str, kind: &str, name: &str, lease_ms: i64, wait_ms: i64) {
        self.act(
            actor,
            "lock",
            kind,
            name,
            json!({ "lease_ms": lease_ms, "wait_ms": wait_ms }),
        );
    }

    pub fn unlock(&mut self, actor: &str, kind: &str, name: &str) {
        self.act(actor, "unlock", kind, name, json!({}));
    }

    /// `inspect` from `actor`'s thread, waiting for the answer.
    pub async fn inspect(&mut self, actor: &str, kind: &str, name: &str) -> Value {
        self.act(actor, "inspect", kind, name, json!({}));
        self.expect("inspected", Some(actor), Duration::from_secs(10))
            .await
    }

    /// Reads events until one named `event` (from `actor`, when given) arrives,
    /// keeping the others for later calls. Panics after `limit` with everything
    /// seen, and at once on an `error` event of that actor (unless `event` is
    /// "error").
    pub async fn expect(&mut self, event: &str, actor: Option<&str>, limit: Duration) -> Value {
        match self.try_expect(event, actor, limit).await {
            Some(v) => v,
            None => panic!(
                "no {event:?} event{} from the Java driver within {limit:?}\n{}",
                actor
                    .map(|a| format!(" for actor {a:?}"))
                    .unwrap_or_default(),
                self.diagnostics()
            ),
        }
    }

    /// As `expect`, but `None` when `limit` passes first.
    pub async fn try_expect(
        &mut self,
        event: &str,
        actor: Option<&str>,
        limit: Duration,
    ) -> Option<Value> {
        self.try_expect_any(&[event], actor, limit).await
    }

    /// The first of the `events` (from `actor`, when given) to arrive; panics after
    /// `limit`.
    pub async fn expect_any(
        &mut self,
        events: &[&str],
        actor: Option<&str>,
        limit: Duration,
    ) -> Value {
        match self.try_expect_any(events, actor, limit).await {
            Some(v) => v,
            None => panic!(
                "none of {events:?}{} from the Java driver within {limit:?}\n{}",
                actor
                    .map(|a| format!(" for actor {a:?}"))
                    .unwrap_or_default(),
                self.diagnostics()
            ),
        }
    }

    /// As `expect_any`, but `None` when `limit` passes first.
    pub async fn try_expect_any(
        &mut self,
        events: &[&str],
        actor: Option<&str>,
        limit: Duration,
    ) -> Option<Value> {
        let from_actor = |v: &Value| actor.is_none_or(|a| v["actor"].as_str() == Some(a));
        let matches =
            |v: &Value| v["event"].as_str().is_some_and(|e| events.contains(&e)) && from_actor(v);
        let fails =
            |v: &Value| !events.contains(&"error") && v["event"] == "error" && from_actor(v);
        if let Some(i) = self.pending.iter().position(|v| matches(v) || fails(v)) {
            let v = self.pending.remove(i);
            if fails(&v) {
                panic!("the Java driver reported {v}\n{}", self.diagnostics());
            }
            return Some(v);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Err(_) => return None,
                Ok(None) => panic!(
                    "the Java driver's stdout closed while waiting for {events:?}\n{}",
                    self.diagnostics()
                ),
                Ok(Some(v)) => {
                    self.seen.push(v.to_string());
                    if matches(&v) {
                        return Some(v);
                    }
                    if fails(&v) {
                        panic!("the Java driver reported {v}\n{}", self.diagnostics());
                    }
                    self.pending.push(v);
                }
            }
        }
    }

    /// What the driver printed (events) and logged (stderr), for failure messages.
    pub fn diagnostics(&self) -> String {
        let stderr = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "--- Java driver events seen:\n{}\n--- unmatched: {:?}\n--- Java driver stderr (tail):\n{}",
            self.seen.join("\n"),
            self.pending,
            stderr
        )
    }

    /// SIGKILLs the JVM: no cleanup, its connections just drop.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Asks the driver to exit (Redisson shutdown) and waits for it, at most
    /// `limit` (then SIGKILL).
    pub async fn exit(&mut self, limit: Duration) {
        if self.stdin.is_some() {
            self.send(json!({ "op": "exit" }));
            self.stdin = None;
        }
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
        panic!("the Java driver did not exit within {limit:?}");
    }
}

impl Drop for JavaDriver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The name of a Java thread's hash field: `<redisson id>:<thread id>`.
pub fn java_field(driver: &JavaDriver, acquired: &Value) -> String {
    format!(
        "{}:{}",
        driver.client_id,
        acquired["thread"].as_u64().expect("event carries thread")
    )
}

/// Redisson writes `redisson_unlock_latch:{N}:<request id>` on every unlock of
/// every lock kind: a string (`0`/`1`, the outcome) with a TTL of about 20 s, so
/// that a retried unlock finds its first outcome. 3.52.0 leaves them to expire;
/// 4.7.0 deletes each once its unlock has completed (one can remain when the JVM
/// exits right after an unlock). Redisson's bookkeeping, not a hold.
pub fn is_unlock_latch(key: &str) -> bool {
    key.starts_with("redisson_unlock_latch:")
}

/// `assert_nothing_left`, except for Redisson's unlock latches (which are
/// returned, for the tests to report).
pub async fn assert_nothing_left_but_latches(
    server: &RedisServer,
    clients: &[&redisson_locks::Client],
) -> Vec<String> {
    super::assert_nothing_left_but(server, clients, is_unlock_latch).await;
    server
        .keys()
        .await
        .into_iter()
        .filter(|k| is_unlock_latch(k))
        .collect()
}
