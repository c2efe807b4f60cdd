//! End-to-end tests of the `redisson-locks` command-line tool: the built
//! binary, run as an operator would run it, against a real `redis-server` per
//! test (see `support`), with locks held by this crate and by Java Redisson
//! (`support/java.rs`).

#[path = "support/mod.rs"]
mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use support::java::{java_field, JavaDriver};
use support::{closed_port, eventually, within, RedisServer};

/// The tool under test, built by cargo for this test target.
const BIN: &str = env!("CARGO_BIN_EXE_redisson-locks");

/// The bound of one run of the tool: connecting, one script, printing.
const RUN: Duration = Duration::from_secs(60);
/// The bound of anything that should happen at once, on two loaded cores.
const SOON: Duration = Duration::from_secs(20);
const WATCHDOG_30S: Duration = Duration::from_secs(30);

/// What one run of the tool did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Asserts the exit code, showing everything the tool said otherwise.
    fn exited(&self, code: i32) -> &Ran {
        assert_eq!(self.code, Some(code), "{self:#?}");
        self
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {self:#?}"))
    }
}

/// The tool with `args`, its output piped, an empty stdin (never a
/// terminal), killed if dropped. `REDIS_URL` is cleared, so only what a test
/// passes says where the server is.
fn command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("env");
    command
        .arg(DEFAULT_SIGNALS)
        .arg(BIN)
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The tool is started through `env` with this: as a terminal or a service
/// manager would start it, with the stop signals at their default
/// disposition, whatever the test runner inherited. A job a non-interactive
/// shell starts in the background ignores SIGINT and SIGQUIT, `nohup`
/// ignores SIGHUP, and the tool rightly keeps a signal ignored at its start
/// ignored (`a_signal_ignored_at_start_stays_ignored_and_is_not_passed_on`):
/// the tests of what those signals do would then hang. (`env` execs the
/// tool: its pid is the tool's.)
const DEFAULT_SIGNALS: &str = "--default-signal=INT,QUIT,HUP,TERM";

/// Runs the tool with `args` (and `input` on a piped stdin), bounded by
/// [`RUN`].
async fn run(args: &[&str], input: Option<&str>) -> Ran {
    run_with_env(args, &[], input).await
}

/// [`run`], with `env` set for the tool.
async fn run_with_env(args: &[&str], env: &[(&str, &str)], input: Option<&str>) -> Ran {
    let mut command = command(args);
    command.envs(env.iter().copied());
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("spawn the tool");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin
            .write_all(input.as_bytes())
            .await
            .expect("write stdin");
    }
    let output = within(
        RUN,
        &format!("redisson-locks {args:?}"),
        child.wait_with_output(),
    )
    .await
    .expect("the tool's output");
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs the tool against `server` (`--url` first, then `args`).
async fn tool(server: &RedisServer, args: &[&str]) -> Ran {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    run(&all, None).await
}

/// The lines of `text` from the one that is `header` (after its indent) to
/// the next at the same or a lesser indent: one holder's or waiter's block.
fn block<'a>(text: &'a str, header: &str) -> &'a str {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.trim_start() == header)
        .unwrap_or_else(|| panic!("no line {header:?} in:\n{text}"));
    let indent = lines[start].len() - lines[start].trim_start().len();
    let end = lines[start + 1..]
        .iter()
        .position(|line| line.len() - line.trim_start().len() <= indent)
        .map_or(lines.len(), |n| start + 1 + n);
    let from = text.find(lines[start]).expect("the line is in the text");
    let to = if end < lines.len() {
        text.find(lines[end]).unwrap_or(text.len())
    } else {
        text.len()
    };
    &text[from..to]
}

/// An owner as `list` and `watch` shorten it: 8 characters of the client id
/// and the thread.
fn short(client_id: &str, thread: &str) -> String {
    format!("{}:{thread}", &client_id[..8])
}

// ---- list -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_every_kind_under_a_pattern_as_text_and_json() {
    let server = RedisServer::start();
    let client = server.client().await;
    let lock = client.get_lock("jobs:lock").unwrap().with_owner_id(7);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    let rw = client.get_read_write_lock("jobs:rw").unwrap();
    let read = rw.read_lock().with_owner_id(8).lock().await.unwrap();
    let (fenced, _token) = client
        .get_fenced_lock("jobs:fenced")
        .unwrap()
        .lock_and_get_token()
        .await
        .unwrap();
    let slots = client.get_semaphore("jobs:slots").unwrap();
    slots.try_set_permits(3).await.unwrap();
    slots.acquire().await.unwrap();
    let ready = client.get_count_down_latch("jobs:ready").unwrap();
    ready.try_set_count(2).await.unwrap();
    let workers = client
        .get_permit_expirable_semaphore("jobs:workers")
        .unwrap();
    workers.try_set_permits(2).await.unwrap();
    let permit = workers.acquire(Duration::from_secs(60)).await.unwrap();
    let mut admin = server.admin().await;
    let _: () = admin.set("jobs:note", "not a lock").await.unwrap();
    let _: () = admin.set("elsewhere", "1").await.unwrap();

    let text = tool(&server, &["list", "jobs:*"]).await;
    text.exited(0);
    let line = |name: &str| -> String {
        text.stdout
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{}", text.stdout))
            .to_owned()
    };
    assert!(text.stdout.starts_with("NAME"), "{}", text.stdout);
    let id = client.id();
    let of_lock = line("jobs:lock");
    assert!(of_lock.contains("  lock  "), "{of_lock}");
    assert!(
        of_lock.contains(&format!("{} (exclusive x2)", short(id, "7"))),
        "{of_lock}"
    );
    let of_rw = line("jobs:rw");
    assert!(
        of_rw.contains("read-write lock")
            && of_rw.contains(&format!("{} (read x1)", short(id, "8"))),
        "{of_rw}"
    );
    assert!(line("jobs:fenced").contains("fenced lock"));
    assert!(line("jobs:slots").contains("count 2"));
    assert!(line("jobs:ready").contains("count 2"));
    assert!(line("jobs:workers").contains("1 free, 1 out"));
    assert!(!text.stdout.contains("jobs:note") && !text.stdout.contains("elsewhere"));
    let summary = text.stdout.lines().last().unwrap();
    assert_eq!(summary, "6 objects, 3 held, 0 waiting in fair queues");
    assert!(
        !text.stderr.contains("warning"),
        "a complete scan: {text:#?}"
    );

    let json = tool(&server, &["--json", "list", "jobs:*"]).await;
    let scanned = json.exited(0).json();
    assert_eq!(scanned["complete"], true);
    let names: Vec<&str> = scanned["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "jobs:fenced",
            "jobs:lock",
            "jobs:ready",
            "jobs:rw",
            "jobs:slots",
            "jobs:workers"
        ]
    );
    let of_lock = &scanned["objects"][1];
    assert_eq!(of_lock["kind"]["type"], "lock");
    assert_eq!(of_lock["holders"][0]["holds"], 2);
    assert_eq!(of_lock["holders"][0]["owner"]["client_id"], id);

    let none = tool(&server, &["list", "nothing:*"]).await;
    assert!(none
        .exited(0)
        .stdout
        .contains("No lock, semaphore or latch matches"));

    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    read.unlock().await.unwrap();
    fenced.unlock().await.unwrap();
    workers.release(&permit).await.unwrap();
}

// ---- show -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_names_the_holder_of_a_reentrant_lock_its_count_and_its_process() {
    let server = RedisServer::start();
    let holder = server
        .client_with(|c| c.client_name = Some("billing".into()))
        .await;
    let lock = holder.get_lock("orders:42").unwrap().with_owner_id(7);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();

    let ran = tool(&server, &["show", "orders:42"]).await;
    let text = &ran.exited(0).stdout;
    let field = format!("{}:7", holder.id());
    assert!(text.contains("Kind:          lock"), "{text}");
    assert!(text.contains("Holders:       1"), "{text}");
    let of_holder = block(text, &field);
    assert!(
        of_holder.contains(&format!("Client id:   {}", holder.id())),
        "{of_holder}"
    );
    assert!(of_holder.contains("Thread:      7"), "{of_holder}");
    assert!(of_holder.contains("Holds:       2"), "{of_holder}");
    assert!(of_holder.contains("Mode:        exclusive"), "{of_holder}");
    assert!(
        of_holder.contains(&format!("pid {} on ", std::process::id())),
        "the identity names this test's process: {of_holder}"
    );
    assert!(of_holder.contains("\"billing\""), "{of_holder}");
    assert!(of_holder.contains("Lease left:  "), "{of_holder}");
    assert!(
        text.contains("redisson_lock__channel:{orders:42}"),
        "{text}"
    );

    let json = tool(&server, &["--json", "show", "orders:42"]).await;
    let seen = json.exited(0).json();
    let h = &seen["holders"][0];
    assert_eq!(h["owner"]["field"], field.as_str());
    assert_eq!(h["holds"], 2);
    assert_eq!(h["owner"]["identity"]["pid"], std::process::id());
    assert!(h["lease_left_ms"].as_u64().unwrap() > 0);
    assert_eq!(h["owner"]["mine"], false, "the tool holds nothing");

    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_lists_a_fair_queue_in_order_with_deadlines() {
    let server = RedisServer::start();
    let clients = [
        server.client().await,
        server.client().await,
        server.client().await,
    ];
    let held = clients[0]
        .get_fair_lock("line")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut waiters = Vec::new();
    for (i, client) in clients.iter().enumerate().skip(1) {
        let lock = client.get_fair_lock("line").unwrap();
        waiters.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await
        }));
        assert!(
            eventually(SOON, || async {
                support::fair::queue_len(&server, "line").await == i
            })
            .await
        );
    }

    let ran = tool(&server, &["show", "line"]).await;
    let text = &ran.exited(0).stdout;
    assert!(text.contains("Kind:          fair lock"), "{text}");
    assert!(
        text.contains("Fair queue:    2 waiting, first in line first"),
        "{text}"
    );
    let first = text
        .find(&format!("1. {}:", clients[1].id()))
        .unwrap_or_else(|| panic!("the first waiter is first:\n{text}"));
    let second = text
        .find(&format!("2. {}:", clients[2].id()))
        .unwrap_or_else(|| panic!("the second waiter is second:\n{text}"));
    assert!(first < second, "{text}");
    let deadlines = text
        .lines()
        .filter(|line| line.trim_start().starts_with("Deadline:    in "))
        .count();
    assert_eq!(deadlines, 2, "each waiter's deadline, ahead: {text}");
    assert!(text.contains(&format!("pid {} on ", std::process::id())));

    held.unlock().await.unwrap();
    for waiter in waiters {
        within(SOON, "a fair waiter", waiter)
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_tells_a_java_reader_without_identity_from_a_rust_reader_with_one() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    let client = server.client().await;
    java.lock("reader", "read", "doc", 0, -1);
    let acquired = java.expect("acquired", Some("reader"), SOON).await;
    let java_owner = java_field(&java, &acquired);
    let rust_read = client
        .get_read_write_lock("doc")
        .unwrap()
        .read_lock()
        .with_owner_id(5)
        .lock()
        .await
        .unwrap();
    let rust_owner = format!("{}:5", client.id());

    let ran = tool(&server, &["show", "doc"]).await;
    let text = &ran.exited(0).stdout;
    assert!(
        text.contains("Kind:          read-write lock, in read mode"),
        "{text}"
    );
    assert!(text.contains("Holders:       2"), "{text}");
    let of_java = block(text, &java_owner);
    assert!(
        of_java.contains("not a redisson-locks client: no identity (a Java Redisson client"),
        "{of_java}"
    );
    assert!(of_java.contains("Mode:        read"), "{of_java}");
    assert!(of_java.contains("Read leases: "), "{of_java}");
    let of_rust = block(text, &rust_owner);
    assert!(
        of_rust.contains(&format!("pid {} on ", std::process::id())),
        "{of_rust}"
    );
    assert!(of_rust.contains("Mode:        read"), "{of_rust}");
    assert!(
        !of_rust.contains("not a redisson-locks client"),
        "{of_rust}"
    );

    rust_read.unlock().await.unwrap();
    java.unlock("reader", "read", "doc");
    java.expect("unlocked", Some("reader"), SOON).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_reads_semaphores_latches_permits_and_a_fencing_token() {
    let server = RedisServer::start();
    let client = server.client().await;
    let slots = client.get_semaphore("slots").unwrap();
    slots.try_set_permits(3).await.unwrap();
    slots.acquire().await.unwrap();
    let ready = client.get_count_down_latch("ready").unwrap();
    ready.try_set_count(5).await.unwrap();
    let workers = client.get_permit_expirable_semaphore("workers").unwrap();
    workers.try_set_permits(2).await.unwrap();
    let permit = workers.acquire(Duration::from_secs(60)).await.unwrap();
    let fenced = client.get_fenced_lock("fenced").unwrap();
    let (guard, token) = fenced.lock_and_get_token().await.unwrap();

    let of_slots = tool(&server, &["show", "slots"]).await;
    let text = &of_slots.exited(0).stdout;
    assert!(
        text.contains("Kind:          semaphore or count-down latch"),
        "{text}"
    );
    assert!(text.contains("Count:         2 "), "{text}");
    assert!(
        !text.contains("Holders:"),
        "a semaphore has no holders: {text}"
    );

    let of_ready = tool(&server, &["show", "ready"]).await;
    assert!(of_ready.exited(0).stdout.contains("Count:         5 "));

    let of_workers = tool(&server, &["show", "workers"]).await;
    let text = &of_workers.exited(0).stdout;
    assert!(
        text.contains("Kind:          permit-expirable semaphore"),
        "{text}"
    );
    assert!(
        text.contains("Count:         1 (permits available)"),
        "{text}"
    );
    assert!(text.contains("Permits out:   1"), "{text}");
    assert!(
        text.contains(&format!("  {permit}  lease left ")),
        "the permit with its lease: {text}"
    );

    let of_fenced = tool(&server, &["show", "fenced"]).await;
    let text = &of_fenced.exited(0).stdout;
    assert!(text.contains("Kind:          fenced lock"), "{text}");
    assert!(
        text.contains(&format!("Fencing token: {token} ")),
        "{token}: {text}"
    );
    assert!(
        text.contains(&format!("{}:", client.id())),
        "its holder: {text}"
    );

    guard.unlock().await.unwrap();
    workers.release(&permit).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_of_a_name_with_nothing_under_it_exits_3() {
    let server = RedisServer::start();
    let ran = tool(&server, &["show", "nothing-here"]).await;
    ran.exited(3);
    assert!(ran.stdout.is_empty(), "{ran:#?}");
    assert!(
        ran.stderr.contains("nothing lives under 'nothing-here'"),
        "{ran:#?}"
    );

    let json = tool(&server, &["--json", "show", "nothing-here"]).await;
    assert_eq!(json.exited(3).json()["kind"]["type"], "absent");

    let mut admin = server.admin().await;
    let _: () = admin.rpush("queue-of-jobs", "a").await.unwrap();
    let foreign = tool(&server, &["show", "queue-of-jobs"]).await;
    assert!(
        foreign.exited(3).stderr.contains("is a list"),
        "{foreign:#?}"
    );
}

// ---- watch ------------------------------------------------------------------

/// The next frame a watch prints on a pipe: its lines up to the blank one.
/// Starts `watch` on `server` with `args`, and its stdout's lines to read
/// frames from as they come.
fn spawn_watch(
    server: &RedisServer,
    args: &[&str],
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let url = server.url();
    let mut all = vec!["--url", url.as_str(), "watch"];
    all.extend_from_slice(args);
    let mut child = command(&all).spawn().expect("spawn the tool");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, lines)
}

async fn next_frame(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    what: &str,
) -> String {
    within(SOON, what, async {
        let mut text = String::new();
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            if line.is_empty() {
                break;
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_redraws_when_the_holder_unlocks_not_at_the_interval() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let guard = holder
        .get_lock("w")
        .unwrap()
        .with_owner_id(3)
        .lock()
        .await
        .unwrap();
    // A minute between redraws: a second frame well before it came from the
    // unlock message.
    let (mut child, mut lines) =
        spawn_watch(&server, &["w", "--interval", "60000", "--count", "2"]);
    let first = next_frame(&mut lines, "the first frame").await;
    assert!(first.contains("frame 1"), "{first}");
    assert!(
        first.contains(&format!(
            "Holder:        {} (exclusive x1)",
            short(holder.id(), "3")
        )),
        "{first}"
    );
    assert!(first.contains("held for     at least "), "{first}");
    assert!(
        eventually(SOON, || async {
            server.subscribers("redisson_lock__channel:{w}").await >= 1
        })
        .await,
        "the watch listens on the lock's channel"
    );
    guard.unlock().await.unwrap();
    let second = next_frame(&mut lines, "the frame the unlock message brings").await;
    assert!(second.contains("frame 2"), "{second}");
    assert!(second.contains("none: it is free"), "{second}");
    let status = within(SOON, "the watch ends after --count 2", child.wait())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_prints_one_object_per_frame_with_how_long_each_holder_held() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let guard = holder
        .get_lock("j")
        .unwrap()
        .with_owner_id(4)
        .lock()
        .await
        .unwrap();
    let ran = tool(
        &server,
        &["--json", "watch", "j", "--interval", "50", "--count", "3"],
    )
    .await;
    ran.exited(0);
    let frames: Vec<Value> = ran
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert_eq!(frames.len(), 3, "{ran:#?}");
    let field = format!("{}:4", holder.id());
    for (i, frame) in frames.iter().enumerate() {
        assert_eq!(frame["frame"], i + 1);
        assert_eq!(
            frame["snapshot"]["holders"][0]["owner"]["field"],
            field.as_str()
        );
        assert_eq!(frame["held_for_ms"][0]["owner"], field.as_str());
        assert_eq!(
            frame["held_for_ms"][0]["at_least"], true,
            "held before the watch began"
        );
    }
    let ages: Vec<u64> = frames
        .iter()
        .map(|f| f["held_for_ms"][0]["ms"].as_u64().unwrap())
        .collect();
    assert!(ages.windows(2).all(|w| w[0] <= w[1]), "{ages:?}");
    guard.unlock().await.unwrap();
}

// ---- force-unlock -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_yes_frees_a_lock_held_by_java() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), WATCHDOG_30S, None).await;
    java.lock("k", "reentrant", "stuck", 0, -1);
    let acquired = java.expect("acquired", Some("k"), SOON).await;
    let owner = java_field(&java, &acquired);

    let ran = tool(&server, &["force-unlock", "stuck", "--yes"]).await;
    let text = &ran.exited(0).stdout;
    assert!(text.contains(&owner), "what held it: {text}");
    assert!(text.contains("Freed 'stuck'"), "{text}");

    tool(&server, &["show", "stuck"]).await.exited(3);
    java.unlock("k", "reentrant", "stuck");
    let refused = java.expect("error", Some("k"), SOON).await;
    assert_eq!(refused["error"], "not_held", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_yes_frees_a_lock_held_by_rust_and_says_so_in_json() {
    let server = RedisServer::start();
    // A short watchdog: the holder learns of the loss at its next renewal.
    let holder = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(3))
        .await;
    let guard = holder.get_lock("held").unwrap().lock().await.unwrap();

    let ran = tool(&server, &["--json", "force-unlock", "held", "--yes"]).await;
    let out = ran.exited(0).json();
    assert_eq!(out["freed"], true, "{ran:#?}");
    assert_eq!(
        out["before"]["holders"][0]["owner"]["client_id"],
        holder.id()
    );
    assert!(!holder.inspect("held").await.unwrap().is_held());
    within(
        SOON,
        "the holder learns it lost the lock",
        guard.lease_lost(),
    )
    .await;
    assert!(guard.is_lease_lost());

    let again = tool(&server, &["force-unlock", "held", "--yes"]).await;
    again.exited(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_without_yes_on_a_pipe_refuses_and_changes_nothing() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let guard = holder.get_lock("keep").unwrap().lock().await.unwrap();
    let url = server.url();
    // A `y` that a script pipes in is no person's answer.
    let ran = run(&["--url", &url, "force-unlock", "keep"], Some("y\n")).await;
    ran.exited(4);
    assert!(ran.stderr.contains("stdin is not a terminal"), "{ran:#?}");
    assert!(ran.stderr.contains("--yes"), "{ran:#?}");
    let seen = holder.inspect("keep").await.unwrap();
    assert!(
        seen.is_held() && seen.holders[0].owner.mine,
        "still held: {seen:?}"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_of_a_semaphore_is_refused_and_changes_nothing() {
    let server = RedisServer::start();
    let client = server.client().await;
    let slots = client.get_semaphore("slots").unwrap();
    slots.try_set_permits(2).await.unwrap();
    let ran = tool(&server, &["force-unlock", "slots", "--yes"]).await;
    ran.exited(1);
    assert!(ran.stderr.contains("semaphore"), "{ran:#?}");
    assert_eq!(
        slots.available_permits().await.unwrap(),
        2,
        "nothing changed"
    );
}

// ---- connecting ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_files_in_yaml_and_json_name_the_server() {
    let server = RedisServer::start();
    let client = server.client().await;
    let guard = client.get_lock("via-file").unwrap().lock().await.unwrap();
    let url = server.url();
    let yaml = server.dir().join("redisson.yaml");
    std::fs::write(
        &yaml,
        format!(
            "singleServerConfig:\n  address: \"{url}\"\n  timeout: 3000\n\
             codec: !<org.redisson.codec.Kryo5Codec> {{}}\nlockWatchdogTimeout: 10000\n"
        ),
    )
    .unwrap();
    let json_file = server.dir().join("redisson.json");
    std::fs::write(
        &json_file,
        json!({ "singleServerConfig": { "address": url, "database": 0 }, "threads": 16 })
            .to_string(),
    )
    .unwrap();
    for file in [&yaml, &json_file] {
        let path = file.to_str().unwrap();
        let ran = run(&["--config", path, "show", "via-file"], None).await;
        let text = &ran.exited(0).stdout;
        assert!(
            text.contains(&format!("{}:", client.id())),
            "{path}: {text}"
        );
    }
    // A file that is not Redisson's says so, naming the file.
    let bad = server.dir().join("bad.json");
    std::fs::write(&bad, "{ not json").unwrap();
    let ran = run(&["--config", bad.to_str().unwrap(), "list"], None).await;
    assert!(ran.exited(1).stderr.contains("bad.json"), "{ran:#?}");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_or_an_absent_server_is_said_in_words_with_exit_1() {
    let ran = run(&["--url", "not-a-url", "list"], None).await;
    ran.exited(1);
    assert!(ran.stderr.contains("not-a-url"), "{ran:#?}");
    assert!(
        ran.stderr.contains("redis://"),
        "says what is expected: {ran:#?}"
    );

    let (_held, port) = closed_port();
    let nobody = format!("redis://127.0.0.1:{port}");
    let ran = run(&["--url", &nobody, "list"], None).await;
    ran.exited(1);
    assert!(
        ran.stderr.contains(&format!("cannot connect to {nobody}")),
        "{ran:#?}"
    );

    let ran = run(&["--url", "redis://u:hunter2@127.0.0.1:1", "list"], None).await;
    assert!(!ran.exited(1).stderr.contains("hunter2"), "{ran:#?}");
}

/// Every form a credential can take in an address, given by `--url` or by
/// `REDIS_URL`, well-formed or not: the tool fails in words that never
/// repeat it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_in_an_address_is_ever_printed() {
    let (_held, closed) = closed_port();
    let addresses = [
        format!("app:hunter2@127.0.0.1:{closed}"),
        ":hunter2@127.0.0.1".to_owned(),
        "hunter2@127.0.0.1".to_owned(),
        format!("redis://app:hunter2@127.0.0.1:{closed}"),
        format!("redis://:hunter2@127.0.0.1:{closed}/0"),
        format!("redis://app:hun@ter2@127.0.0.1:{closed}"),
        "redis+unix:///tmp/nowhere.sock?pass=hunter2".to_owned(),
        "unix:///tmp/nowhere.sock?db=1&password=hunter2".to_owned(),
        format!("redis://127.0.0.1:{closed}/?pass=hunter2"),
        "redis://app:hunter2@h:notaport".to_owned(),
    ];
    for address in &addresses {
        for ran in [
            run(&["--url", address, "list"], None).await,
            run_with_env(&["show", "x"], &[("REDIS_URL", address)], None).await,
        ] {
            ran.exited(1);
            assert!(
                !ran.stderr.contains("hunter2") && !ran.stdout.contains("hunter2"),
                "{address}: {ran:#?}"
            );
            assert!(
                !ran.stderr.trim().is_empty(),
                "{address}: says why: {ran:#?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_explains_itself_and_usage_errors_exit_2() {
    let help = run(&["--help"], None).await;
    let text = &help.exited(0).stdout;
    for part in [
        "list",
        "show",
        "watch",
        "force-unlock",
        "REDIS_URL",
        "--config",
        "Exit codes",
    ] {
        assert!(text.contains(part), "--help mentions {part}: {text}");
    }
    let version = run(&["--version"], None).await;
    assert!(version.exited(0).stdout.contains(env!("CARGO_PKG_VERSION")));
    run(&["show"], None).await.exited(2);
    run(&["watch", "w", "--interval", "0"], None)
        .await
        .exited(2);
    run(
        &["--url", "redis://h:1", "--config", "f.yaml", "list"],
        None,
    )
    .await
    .exited(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_watch_with_success_and_gives_its_subscription_back() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let _guard = holder.get_lock("c").unwrap().lock().await.unwrap();
    let (mut child, mut lines) = spawn_watch(&server, &["c", "--interval", "60000"]);
    next_frame(&mut lines, "the first frame").await;
    assert!(
        eventually(SOON, || async {
            server.subscribers("redisson_lock__channel:{c}").await == 1
        })
        .await,
        "the watch listens"
    );
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    let status = within(SOON, "the tool ends on SIGINT", child.wait())
        .await
        .expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(
        server.subscribers("redisson_lock__channel:{c}").await,
        0,
        "its subscription went with it"
    );
}

// ---- text from Redis reaches the terminal escaped ---------------------------

/// Names, owner fields and identities are written by whoever can write a key:
/// in text output a control character (an escape sequence, a newline) or a
/// bidirectional override is shown escaped, never sent to the terminal, and a
/// newline in a name adds no row to `list`. `--json` carries them as JSON does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_owners_and_identities_reach_the_terminal_escaped() {
    let server = RedisServer::start();
    let mut admin = server.admin().await;
    let id = "6c47fd2f-1b3c-4a5d-9e8f-0a1b2c3d4e5f";
    let name = "evil\u{1b}]0;owned\u{7}\nfake row\u{202e}";
    let field = format!("{id}:7\u{1b}[2J");
    let _: () = admin.hset(name, &field, 1).await.unwrap();
    let _: () = admin.pexpire(name, 60_000).await.unwrap();
    let identity = json!({
        "client_id": id, "library": "redisson-locks", "version": "0",
        "host": "web\r\u{1b}[31m", "pid": 1, "name": "n\u{9b}1m", "started_ms": 0
    });
    let _: () = admin
        .set(
            format!("{}{{{id}}}", support::IDENTITY_PREFIX),
            identity.to_string(),
        )
        .await
        .unwrap();
    let _: () = admin.set(&b"bin:\xff"[..], "1").await.unwrap();

    let list = tool(&server, &["list"]).await;
    let text = &list.exited(0).stdout;
    let shown = "evil\\u{1b}]0;owned\\u{7}\\nfake row\\u{202e}";
    assert!(text.contains(shown), "the name, escaped: {text}");
    for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}', '\u{9b}'] {
        assert!(
            !text.contains(raw),
            "{raw:?} reached the terminal: {text:?}"
        );
    }
    assert!(!text.lines().any(|l| l.starts_with("fake row")), "{text}");
    assert_eq!(
        text.lines().count(),
        4,
        "header, one row, the summary, the keys left out: {text}"
    );
    assert!(
        text.contains("Left out: 1 key") && text.contains("not UTF-8"),
        "the key no lock can be named is said: {text}"
    );

    let show = tool(&server, &["show", name]).await;
    let page = &show.exited(0).stdout;
    assert!(page.contains(shown), "{page}");
    assert!(page.contains("7\\u{1b}[2J"), "the thread, escaped: {page}");
    assert!(
        page.contains("web\\r\\u{1b}[31m"),
        "the host, escaped: {page}"
    );
    for raw in ['\u{1b}', '\u{7}', '\r', '\u{202e}', '\u{9b}'] {
        assert!(
            !page.contains(raw),
            "{raw:?} reached the terminal: {page:?}"
        );
    }

    let json = tool(&server, &["--json", "list"]).await.json();
    assert_eq!(
        json["objects"][0]["name"], name,
        "JSON carries the name as it is"
    );
    assert_eq!(json["skipped"][0]["reason"], "not_utf8");
}

// ---- run, run-permit, elect: a command under a lock, a permit, leadership ----

/// A Redisson YAML file in `dir` for `server` with a 1.5 s watchdog (renewals
/// every 500 ms), so that a hold forced open is found lost within half a
/// second; returns its path.
fn short_watchdog_config(server: &RedisServer, dir: &std::path::Path) -> String {
    let path = dir.join("redisson.yaml");
    std::fs::write(
        &path,
        format!(
            "singleServerConfig:\n  address: \"{}\"\nlockWatchdogTimeout: 1500\n",
            server.url()
        ),
    )
    .expect("write the config");
    path.to_string_lossy().into_owned()
}

/// A fresh directory for a test's files (shared by the tool's children).
fn scratch(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Sends `signal` (`-INT`, `-KILL`, ...) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill {signal} {pid}");
}

/// Whether process `pid` still exists (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

/// Reads the pid a child wrote to `path`, waiting for it.
async fn pid_in(path: &std::path::Path) -> u32 {
    within(SOON, "the command writes its pid", async {
        loop {
            if let Some(pid) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_gives_the_command_the_lock_its_name_and_token_and_passes_its_status_on() {
    let server = RedisServer::start();
    let ran = tool(
        &server,
        &[
            "run",
            "job",
            "--",
            "sh",
            "-c",
            "echo \"$REDISSON_LOCK_NAME\"; exit 7",
        ],
    )
    .await;
    assert_eq!(ran.exited(7).stdout.trim(), "job");
    // Held while the command runs, by this machine's pid as its identity says.
    let ran = tool(
        &server,
        &[
            "run",
            "job",
            "--fenced",
            "--",
            "sh",
            "-c",
            "echo \"$REDISSON_LOCK_TOKEN\"",
        ],
    )
    .await;
    let token: u64 = ran.exited(0).stdout.trim().parse().expect("a token");
    let client = server.client().await;
    let (_, next) = client
        .get_fenced_lock("job")
        .unwrap()
        .lock_and_get_token()
        .await
        .unwrap();
    assert!(next > token, "later holders draw greater tokens");
    for kind in ["--fair", "--read", "--write"] {
        let ran = tool(&server, &["run", kind, "k", "--", "true"]).await;
        ran.exited(0);
    }
    // A command that dies of a signal: 128 + N, as a shell says it.
    tool(&server, &["run", "sig", "--", "sh", "-c", "kill -KILL $$"])
        .await
        .exited(137);
    assert!(server
        .keys()
        .await
        .iter()
        .all(|k| k.starts_with("redisson_lock_token")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_on_one_name_never_overlap() {
    let server = RedisServer::start();
    let dir = scratch("overlap");
    let log = dir.join("log");
    let script = format!(
        "echo start >> {log}; sleep 0.05; echo end >> {log}",
        log = log.display()
    );
    let url = server.url();
    let mut runs = Vec::new();
    for _ in 0..4 {
        let (url, script) = (url.clone(), script.clone());
        runs.push(tokio::spawn(async move {
            for _ in 0..5 {
                run(
                    &["--url", &url, "run", "shared", "--", "sh", "-c", &script],
                    None,
                )
                .await
                .exited(0);
            }
        }));
    }
    for r in runs {
        r.await.unwrap();
    }
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 40, "{lines:?}");
    for pair in lines.chunks(2) {
        assert_eq!(
            pair,
            ["start", "end"],
            "two commands ran at once: {lines:?}"
        );
    }
    assert!(server.keys().await.is_empty(), "released after each");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_zero_on_a_held_lock_exits_124_at_once_and_runs_nothing() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let guard = holder.get_lock("busy").unwrap().lock().await.unwrap();
    let dir = scratch("wait0");
    let mark = dir.join("ran");
    let touch = format!("touch {}", mark.display());
    let ran = within(
        SOON,
        "--wait 0 answers at once",
        tool(
            &server,
            &["run", "busy", "--wait", "0", "--", "sh", "-c", &touch],
        ),
    )
    .await;
    assert!(ran.exited(124).stderr.contains("not acquired"), "{ran:#?}");
    assert!(!mark.exists(), "the command did not run");
    // A bounded wait gives up too, and then the lock is taken once free.
    tool(&server, &["run", "busy", "--wait", "300ms", "--", "true"])
        .await
        .exited(124);
    guard.unlock().await.unwrap();
    tool(
        &server,
        &["run", "busy", "--wait", "5s", "--", "sh", "-c", &touch],
    )
    .await
    .exited(0);
    assert!(mark.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An operator forces the lock open while the command runs, and the command
/// ignores SIGTERM: the tool finds the hold lost at its next renewal, sends
/// SIGTERM, then SIGKILL after --grace, and exits 123.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_outlives_a_forced_unlock_is_killed_within_the_grace() {
    let server = RedisServer::start();
    let dir = scratch("forced");
    let config = short_watchdog_config(&server, &dir);
    let pidfile = dir.join("pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; sleep 60 & wait; sleep 60",
        pidfile.display()
    );
    let mut tool_process = command(&[
        "--config", &config, "run", "forced", "--grace", "500ms", "--", "sh", "-c", &script,
    ])
    .spawn()
    .expect("spawn the tool");
    let pid = pid_in(&pidfile).await;
    let operator = server.client().await;
    assert!(operator
        .get_lock("forced")
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    let forced = std::time::Instant::now();
    let status = within(SOON, "the tool stops the command", tool_process.wait())
        .await
        .expect("wait");
    assert_eq!(status.code(), Some(123), "{status:?}");
    // Found at the next renewal (within 500 ms); no grace is left then.
    assert!(
        forced.elapsed() < Duration::from_secs(5),
        "stopped {:?} after the force",
        forced.elapsed()
    );
    assert!(!alive(pid), "the command was killed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fixed lease that runs out while the command runs stops it, exit 123.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_stops_the_command() {
    let server = RedisServer::start();
    let ran = within(
        SOON,
        "the lease ends the command",
        tool(
            &server,
            &["run", "leased", "--lease", "800ms", "--", "sleep", "30"],
        ),
    )
    .await;
    assert!(ran.exited(123).stderr.contains("was lost"), "{ran:#?}");
}

/// SIGINT to the tool reaches the command (once: it runs in its own process
/// group), the tool waits for it to exit, the lock is released, and then the
/// tool dies of SIGINT itself, as flock(1) and timeout(1) do, so that a shell
/// loop around it stops (whatever the command made of the signal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_to_the_tool_reaches_the_command_and_the_lock_is_released() {
    use std::os::unix::process::ExitStatusExt as _;
    let server = RedisServer::start();
    let dir = scratch("sigint");
    let (pidfile, got) = (dir.join("pid"), dir.join("got"));
    let script = format!(
        "trap 'echo INT >> {got}; exit 5' INT; echo $$ > {pid}; while true; do sleep 0.05; done",
        got = got.display(),
        pid = pidfile.display()
    );
    let url = server.url();
    let mut tool_process = command(&["--url", &url, "run", "int", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn the tool");
    pid_in(&pidfile).await;
    assert_eq!(server.keys().await, ["int"], "held while it runs");
    signal(tool_process.id().expect("running"), "-INT");
    let status = within(SOON, "the tool ends after the command", tool_process.wait())
        .await
        .expect("wait");
    assert_eq!(status.signal(), Some(2), "died of SIGINT: {status:?}");
    assert_eq!(
        std::fs::read_to_string(&got).unwrap(),
        "INT\n",
        "delivered once"
    );
    assert!(server.keys().await.is_empty(), "released");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM to a tool still waiting for the lock ends the wait: the tool dies
/// of it, nothing run, no place left in a fair lock's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_waiting_leaves_no_queue_entry() {
    use std::os::unix::process::ExitStatusExt as _;
    let server = RedisServer::start();
    let holder = server.client().await;
    let guard = holder.get_fair_lock("line").unwrap().lock().await.unwrap();
    let url = server.url();
    let mut waiting = command(&["--url", &url, "run", "--fair", "line", "--", "true"])
        .spawn()
        .expect("spawn the tool");
    assert!(
        eventually(SOON, || async {
            support::fair::queue_len(&server, "line").await == 1
        })
        .await,
        "the tool waits in line"
    );
    signal(waiting.id().expect("running"), "-TERM");
    let status = within(SOON, "the wait ends", waiting.wait())
        .await
        .expect("wait");
    assert_eq!(status.signal(), Some(15), "died of SIGTERM: {status:?}");
    assert_eq!(support::fair::queue_len(&server, "line").await, 0);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_permit_lets_at_most_n_commands_run_at_once() {
    let server = RedisServer::start();
    let dir = scratch("permits");
    let log = dir.join("log");
    // Each command counts itself in and out with an atomic append; the
    // running count is replayed from the log afterwards.
    let script = format!(
        "echo \"in $REDISSON_PERMIT_ID\" >> {log}; sleep 0.2; echo out >> {log}",
        log = log.display()
    );
    let url = server.url();
    let mut runs = Vec::new();
    for _ in 0..6 {
        let (url, script) = (url.clone(), script.clone());
        runs.push(tokio::spawn(async move {
            run(
                &[
                    "--url",
                    &url,
                    "run-permit",
                    "jobs",
                    "--permits",
                    "2",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
                None,
            )
            .await
            .exited(0);
        }));
    }
    for r in runs {
        r.await.unwrap();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for line in text.lines() {
        running += if line.starts_with("in ") { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(text.lines().count(), 12, "{text}");
    assert!(most <= 2, "{most} ran at once: {text}");
    assert!(
        text.lines().any(|l| l.len() == "in ".len() + 32),
        "the permit id is in the environment: {text}"
    );
    let client = server.client().await;
    let semaphore = client.get_permit_expirable_semaphore("jobs").unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2, "all back");
    // All out: --wait 0 gives up with 124.
    let a = semaphore.acquire_renewed().await.unwrap();
    let b = semaphore.acquire_renewed().await.unwrap();
    tool(
        &server,
        &["run-permit", "jobs", "--wait", "0", "--", "true"],
    )
    .await
    .exited(124);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run-permit --fair`: commands take a fair semaphore's permit in the order
/// they asked, one at a time here, and `--wait 0` gives up with 124 when all
/// are out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_permit_fair_runs_commands_in_arrival_order() {
    use redis::AsyncCommands;
    let server = RedisServer::start();
    let dir = scratch("fair-permits");
    let log = dir.join("log");
    let client = server.client().await;
    let semaphore = client.get_fair_semaphore("fjobs").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let held = semaphore.acquire(1).await.unwrap();
    let url = server.url();
    let mut admin = server.admin().await;
    let mut runs = Vec::new();
    for i in 0..4 {
        let script = format!(
            "echo \"in {i} $REDISSON_PERMIT_ID\" >> {log}; sleep 0.1; echo out >> {log}",
            log = log.display()
        );
        let url = url.clone();
        runs.push(tokio::spawn(async move {
            run(
                &[
                    "--url",
                    &url,
                    "run-permit",
                    "fjobs",
                    "--fair",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
                None,
            )
            .await
            .exited(0);
        }));
        // The next asks only once this one stands in line.
        let mut joined = false;
        for _ in 0..200 {
            let len: usize = admin
                .llen("redisson_fair_semaphore_queue:{fjobs}")
                .await
                .unwrap();
            if len == i + 1 {
                joined = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(joined, "run {i} did not join the line");
    }
    held.release().await.unwrap();
    for r in runs {
        r.await.unwrap();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let order: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("in ")?.split(' ').next())
        .collect();
    assert_eq!(order, ["0", "1", "2", "3"], "{text}");
    let (mut running, mut most) = (0i32, 0i32);
    for line in text.lines() {
        running += if line.starts_with("in ") { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(most, 1, "{text}");
    assert_eq!(semaphore.available_permits().await.unwrap(), 1, "all back");
    let held = semaphore.acquire(1).await.unwrap();
    tool(
        &server,
        &["run-permit", "fjobs", "--fair", "--wait", "0", "--", "true"],
    )
    .await
    .exited(124);
    held.release().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `elect NAME -- COMMAND` runs the command as leader with its epoch; `elect
/// NAME --listen` prints each change in order while leaders are killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_runs_the_leader_and_listen_prints_each_change_in_order() {
    let server = RedisServer::start();
    let dir = scratch("elect");
    let config = short_watchdog_config(&server, &dir);
    let ran = tool(
        &server,
        &[
            "elect",
            "boss",
            "--",
            "sh",
            "-c",
            "echo \"$REDISSON_LEADER_EPOCH\"",
        ],
    )
    .await;
    let first: u64 = ran.exited(0).stdout.trim().parse().expect("an epoch");

    let mut listener = command(&["--config", &config, "--json", "elect", "boss", "--listen"])
        .spawn()
        .expect("spawn the listener");
    let mut lines = BufReader::new(listener.stdout.take().expect("stdout")).lines();
    assert_eq!(
        next_json(&mut lines).await["leader"],
        Value::Null,
        "vacant at start"
    );
    // Three leaders in turn, each SIGKILLed while it leads (the tool: its
    // command dies with it, its hold ends with its 1.5 s lease).
    let mut epochs = Vec::new();
    for round in 0..3 {
        let pidfile = dir.join(format!("pid{round}"));
        let script = format!("echo $$ > {}; sleep 60", pidfile.display());
        let mut leader = command(&[
            "--config", &config, "elect", "boss", "--", "sh", "-c", &script,
        ])
        .spawn()
        .expect("spawn a leader");
        let command_pid = pid_in(&pidfile).await;
        let change = next_json(&mut lines).await;
        let epoch = change["leader"]["epoch"].as_u64().expect("an epoch");
        epochs.push(epoch);
        signal(leader.id().expect("running"), "-KILL");
        let _ = leader.wait().await;
        assert!(
            eventually(SOON, || async { !alive(command_pid) }).await,
            "the leader's command died with its tool"
        );
        assert_eq!(
            next_json(&mut lines).await["leader"],
            Value::Null,
            "vacant after the kill"
        );
    }
    assert!(
        epochs[0] > first && epochs.windows(2).all(|w| w[0] < w[1]),
        "{epochs:?}"
    );
    signal(listener.id().expect("running"), "-TERM");
    let status = within(SOON, "the listener ends", listener.wait())
        .await
        .expect("wait");
    assert_eq!(status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The next line of `lines`, as one JSON value, within [`SOON`].
async fn next_json(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> Value {
    let line = within(SOON, "a line", lines.next_line())
        .await
        .expect("read")
        .expect("a line");
    serde_json::from_str(&line).expect("one JSON object per line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_command_lines_for_run_say_why_with_their_codes_and_leave_nothing() {
    let server = RedisServer::start();
    // No command, an unknown option, two kinds: usage, 2.
    tool(&server, &["run", "x"]).await.exited(2);
    tool(&server, &["run", "x", "--bogus", "--", "true"])
        .await
        .exited(2);
    tool(&server, &["run", "x", "--fair", "--read", "--", "true"])
        .await
        .exited(2);
    tool(&server, &["run", "x", "--wait", "soon", "--", "true"])
        .await
        .exited(2);
    tool(&server, &["elect", "x"]).await.exited(2);
    // A name no lock can have: 2, in words.
    let ran = tool(&server, &["run", "", "--", "true"]).await;
    assert!(ran.exited(2).stderr.contains("empty"), "{ran:#?}");
    let long = "n".repeat(redisson_locks::MAX_NAME_LEN + 1);
    tool(&server, &["run-permit", &long, "--", "true"])
        .await
        .exited(2);
    // A command that cannot be found or run: 127, 126; the lock is released.
    tool(&server, &["run", "x", "--", "/no/such/command"])
        .await
        .exited(127);
    tool(&server, &["run", "x", "--", "/"]).await.exited(126);
    // An unreachable server: 125 (not 1, which commands exit with so often).
    let (_held, port) = closed_port();
    let nobody = format!("redis://127.0.0.1:{port}");
    let ran = run(&["--url", &nobody, "run", "x", "--", "true"], None).await;
    assert!(
        ran.exited(125).stderr.contains("cannot connect"),
        "{ran:#?}"
    );
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlocks_prints_a_cycle_of_two_clients_and_exits_5() {
    let server = RedisServer::start();
    let quick = |c: &mut redisson_locks::Config| c.deadlock_threshold = Duration::from_millis(200);
    let (a, b) = (
        server.client_with(quick).await,
        server.client_with(quick).await,
    );
    let none = tool(&server, &["deadlocks"]).await;
    none.exited(0);
    assert!(none.stdout.contains("No deadlock"), "{none:#?}");
    let both = Arc::new(tokio::sync::Barrier::new(2));
    let mut sides = Vec::new();
    for (client, first, second) in [(&a, "left", "right"), (&b, "right", "left")] {
        let (first, second) = (
            client.get_lock(first).unwrap(),
            client.get_lock(second).unwrap(),
        );
        let both = both.clone();
        sides.push(tokio::spawn(async move {
            let _held = first.lock().await.unwrap();
            both.wait().await;
            let _ = second.lock().await;
        }));
    }
    let found = eventually(SOON, || async { !a.deadlocks().is_empty() }).await;
    assert!(found, "the client names it first");
    let text = tool(&server, &["deadlocks"]).await;
    text.exited(5);
    assert!(text.stdout.contains("Deadlock 1 (2 waits)"), "{text:#?}");
    assert!(
        text.stdout.contains("\"left\"") && text.stdout.contains("\"right\""),
        "{text:#?}"
    );
    let json = tool(&server, &["deadlocks", "left", "--json"]).await;
    json.exited(5);
    let value = json.json();
    assert_eq!(value["cycles"].as_array().map(Vec::len), Some(1), "{value}");
    assert_eq!(value["waits"], 2);
    let elsewhere = tool(&server, &["deadlocks", "other:*", "--json"]).await;
    elsewhere.exited(0);
    for side in sides {
        side.abort();
        let _ = side.await;
    }
}

// ---- run: the command never outlives its hold ------------------------------

/// The pids a child wrote on one line to `path`, waiting for the whole line.
async fn pids_in(path: &std::path::Path) -> Vec<u32> {
    within(SOON, "the command writes its pids", async {
        loop {
            if let Ok(text) = std::fs::read_to_string(path) {
                if text.ends_with('\n') {
                    return text
                        .split_whitespace()
                        .map(|pid| pid.parse().expect("a pid"))
                        .collect();
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The state letter of process `pid` (`R`, `S`, `T` for stopped, `Z`), or
/// `None` when it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The processes a `cat /proc/<pid>/stat ...` snapshot shows alive (a zombie
/// counts as gone): the lines of `snapshot` whose state is not `Z`.
fn alive_in(snapshot: &str) -> Vec<&str> {
    snapshot
        .lines()
        .filter(|line| {
            line.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        })
        .collect()
}

/// A shell command that records, as the command of a second hold, which of
/// `pids` still live at the moment it starts.
fn snapshot_of(pids: &[u32], into: &std::path::Path) -> String {
    let stats: Vec<String> = pids.iter().map(|pid| format!("/proc/{pid}/stat")).collect();
    format!(
        "cat {} > {} 2>/dev/null; true",
        stats.join(" "),
        into.display()
    )
}

/// Kills what a failing test left running, so that it does not outlive the test.
fn kill_leftovers(pids: &[u32]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// The tool killed with SIGKILL (the OOM killer) while its command runs: the
/// command and what it started in its process group die with it, so that the
/// next holder, who gets the lock once the dead tool's lease runs out, never
/// runs beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_killed_with_sigkill_takes_its_command_and_group_with_it() {
    let server = RedisServer::start();
    let dir = scratch("sigkill");
    let config = short_watchdog_config(&server, &dir);
    let pidfile = dir.join("pids");
    let script = format!("sleep 60 & echo $$ $! > {}; wait", pidfile.display());
    let mut first = command(&["--config", &config, "run", "one", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn the tool");
    let pids = pids_in(&pidfile).await;
    signal(first.id().expect("running"), "-KILL");
    let _ = first.wait().await;
    let seen = dir.join("seen");
    let second = run(
        &[
            "--config",
            &config,
            "run",
            "one",
            "--wait",
            "20s",
            "--",
            "sh",
            "-c",
            &snapshot_of(&pids, &seen),
        ],
        None,
    )
    .await;
    let snapshot = std::fs::read_to_string(&seen).unwrap_or_default();
    kill_leftovers(&pids);
    second.exited(0);
    assert_eq!(
        alive_in(&snapshot),
        Vec::<&str>::new(),
        "the first command's group still ran when the second hold's command started"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sh -c 'work & exit 0'`: the lock is held (and renewed) until the work left
/// in the command's process group has exited too, as flock(1) holds until
/// the last holder of its descriptor exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_is_held_until_what_the_command_left_running_has_exited() {
    let server = RedisServer::start();
    let dir = scratch("leftover");
    let (pidfile, go) = (dir.join("pids"), dir.join("go"));
    let script = format!(
        "(while [ ! -e {go} ]; do sleep 0.05; done) & echo $$ $! > {pids}; exit 0",
        go = go.display(),
        pids = pidfile.display()
    );
    let url = server.url();
    let mut tool_process = command(&["--url", &url, "run", "left", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn the tool");
    let pids = pids_in(&pidfile).await;
    let (shell, leftover) = (pids[0], pids[1]);
    assert!(
        eventually(SOON, || async { !alive(shell) }).await,
        "the command exits at once"
    );
    let busy = tool(&server, &["run", "left", "--wait", "0", "--", "true"]).await;
    let still_running = tool_process.try_wait().expect("try_wait").is_none();
    std::fs::write(&go, "").expect("let the leftover end");
    busy.exited(124);
    assert!(still_running, "the tool waits for the leftover");
    let status = within(
        SOON,
        "the tool ends after the leftover",
        tool_process.wait(),
    )
    .await
    .expect("wait");
    assert_eq!(status.code(), Some(0), "the command's status: {status:?}");
    assert!(!alive(leftover));
    assert!(server.keys().await.is_empty(), "released at the end");

    // A leftover still running when the hold ends is stopped like the command.
    let pidfile = dir.join("pids2");
    let script = format!("sleep 60 & echo $! > {}; exit 0", pidfile.display());
    let ran = tool(
        &server,
        &[
            "run", "left2", "--lease", "1500ms", "--", "sh", "-c", &script,
        ],
    )
    .await;
    let leftover = pids_in(&pidfile).await[0];
    let lived = alive(leftover);
    kill_leftovers(&[leftover]);
    assert!(ran.exited(123).stderr.contains("lost"), "{ran:#?}");
    assert!(!lived, "the leftover was stopped with the hold");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command that ignores SIGTERM is killed no later than the moment its hold
/// stops being surely valid: SIGTERM goes out a grace before that, so the next
/// holder never runs beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_lands_before_the_hold_stops_being_valid() {
    let server = RedisServer::start();
    let dir = scratch("grace");
    let pidfile = dir.join("pids");
    let script = format!(
        "trap '' TERM; sleep 60 & echo $$ $! > {}; wait; sleep 60",
        pidfile.display()
    );
    let url = server.url();
    let mut first = command(&[
        "--url", &url, "run", "graced", "--lease", "3s", "--grace", "1s", "--", "sh", "-c", &script,
    ])
    .spawn()
    .expect("spawn the tool");
    let pids = pids_in(&pidfile).await;
    let seen = dir.join("seen");
    let second = tool(
        &server,
        &[
            "run",
            "graced",
            "--wait",
            "20s",
            "--",
            "sh",
            "-c",
            &snapshot_of(&pids, &seen),
        ],
    )
    .await;
    let snapshot = std::fs::read_to_string(&seen).unwrap_or_default();
    kill_leftovers(&pids);
    second.exited(0);
    assert_eq!(
        alive_in(&snapshot),
        Vec::<&str>::new(),
        "the first command still ran when the next holder's started"
    );
    let status = within(SOON, "the first tool ends", first.wait())
        .await
        .expect("wait");
    assert_eq!(status.code(), Some(123), "{status:?}");

    // A grace that cannot end before the hold does is a usage error.
    for args in [
        &["--lease", "1s", "--grace", "1s"][..],
        &["--lease", "1s", "--grace", "5s"],
        &["--max-hold", "2s", "--grace", "2s"],
    ] {
        let mut all = vec!["run", "g"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let ran = tool(&server, &all).await;
        assert!(
            ran.exited(2).stderr.contains("--grace"),
            "{args:?}: {ran:#?}"
        );
    }
    // Renewed holds: a grace over a third of the watchdog's lease would stop
    // a command whose renewals are only running late.
    let config = short_watchdog_config(&server, &dir);
    let ran = run(
        &[
            "--config", &config, "run", "g", "--grace", "1s", "--", "true",
        ],
        None,
    )
    .await;
    assert!(ran.exited(2).stderr.contains("--grace"), "{ran:#?}");
    run(
        &[
            "--config", &config, "run", "g", "--grace", "400ms", "--", "true",
        ],
        None,
    )
    .await
    .exited(0);
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_lease_or_term_is_a_usage_error() {
    let server = RedisServer::start();
    for flag in ["--lease", "--max-hold"] {
        for zero in ["0", "0s", "0.0001ms"] {
            let ran = tool(&server, &["run", "z", flag, zero, "--", "true"]).await;
            assert!(
                ran.exited(2).stderr.contains(flag),
                "{flag} {zero}: {ran:#?}"
            );
        }
    }
}

/// Started with SIGHUP ignored (`nohup`), the tool leaves it ignored: a
/// hangup neither ends it nor reaches the command, which runs with it ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_ignored_at_start_stays_ignored_and_is_not_passed_on() {
    let server = RedisServer::start();
    let dir = scratch("nohup");
    let (pidfile, go) = (dir.join("pids"), dir.join("go"));
    let script = format!(
        "echo $$ > {pids}; while [ ! -e {go} ]; do sleep 0.05; done",
        go = go.display(),
        pids = pidfile.display()
    );
    let url = server.url();
    let mut nohup = tokio::process::Command::new("nohup");
    nohup
        .arg(BIN)
        .args(["--url", &url, "run", "hup", "--", "sh", "-c", &script])
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut tool_process = nohup.spawn().expect("spawn nohup");
    let command_pid = pids_in(&pidfile).await[0];
    let status = std::fs::read_to_string(format!("/proc/{command_pid}/status")).unwrap();
    let ignored = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
        .unwrap();
    let tool_pid = tool_process.id().expect("running");
    signal(tool_pid, "-HUP");
    let hung_up = eventually(Duration::from_millis(500), || async {
        !alive(command_pid) || !alive(tool_pid)
    })
    .await;
    std::fs::write(&go, "").expect("let the command end");
    let status = within(SOON, "the tool ends", tool_process.wait())
        .await
        .expect("wait");
    assert_eq!(
        ignored & 1,
        1,
        "SIGHUP is ignored in the command: {ignored:x}"
    );
    assert!(!hung_up, "a hangup ended the tool or its command");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(server.keys().await.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTSTP to the tool (as `kill -TSTP` or a job-control shell sends it)
/// stops the job as a whole, the command included; SIGCONT continues both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_tool_stops_its_command_and_continues_it() {
    let server = RedisServer::start();
    let dir = scratch("tstp");
    let url = server.url();
    let (pidfile, go) = (dir.join("pids"), dir.join("go"));
    let script = format!(
        "echo $$ > {pids}; while [ ! -e {go} ]; do sleep 0.05; done",
        go = go.display(),
        pids = pidfile.display()
    );
    let mut tool_process = command(&["--url", &url, "run", "tstp", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn the tool");
    let command_pid = pids_in(&pidfile).await[0];
    let tool_pid = tool_process.id().expect("running");
    signal(tool_pid, "-TSTP");
    stop_and_continue_together(&mut tool_process, command_pid, &go).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The job (`tool`, running `command_pid`) was just told to stop: both stop,
/// SIGCONT to the tool (as `fg` sends it) continues both, and once `go`
/// exists the command, and the tool with it, ends with 0.
async fn stop_and_continue_together(
    tool: &mut tokio::process::Child,
    command_pid: u32,
    go: &std::path::Path,
) {
    let tool_pid = tool.id().expect("running");
    let both_stopped = eventually(SOON, || async {
        state(tool_pid) == Some('T') && state(command_pid) == Some('T')
    })
    .await;
    let states = (state(tool_pid), state(command_pid));
    signal(tool_pid, "-CONT");
    let both_run = eventually(SOON, || async {
        !matches!(state(tool_pid), Some('T')) && !matches!(state(command_pid), Some('T'))
    })
    .await;
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &command_pid.to_string()])
        .status();
    std::fs::write(go, "").expect("let the command end");
    let status = within(SOON, "the tool ends", tool.wait())
        .await
        .expect("wait");
    assert!(
        both_stopped,
        "the tool and its command stop together: {states:?}"
    );
    assert!(both_run, "and continue together");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

// ---- run at a terminal ------------------------------------------------------

/// A pseudo-terminal: the tool runs with its slave as stdin, stdout, stderr
/// and controlling terminal (`setsid -c`, so the tool leads a session and its
/// process group is the terminal's foreground, as a shell's job would be);
/// the test types on its master. What the terminal prints is drained.
struct Pty {
    master: std::fs::File,
    slave: std::path::PathBuf,
}

impl Pty {
    fn open() -> Pty {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let slave = ptsname(&master, Vec::new()).expect("ptsname");
        let master = std::fs::File::from(master);
        let mut drain = master.try_clone().expect("clone the master");
        // Ends when the last slave closes (EIO), or with the test process.
        std::thread::spawn(move || std::io::copy(&mut drain, &mut std::io::sink()));
        Pty {
            master,
            slave: std::path::PathBuf::from(slave.to_string_lossy().into_owned()),
        }
    }

    /// Runs the tool with `args` on the terminal.
    fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        use rustix::fs::{Mode, OFlags};
        let open = || {
            let fd = rustix::fs::open(&self.slave, OFlags::RDWR | OFlags::NOCTTY, Mode::empty())
                .expect("open the slave");
            Stdio::from(std::fs::File::from(fd))
        };
        tokio::process::Command::new("setsid")
            .arg("-c")
            .args(["env", DEFAULT_SIGNALS, BIN])
            .args(args)
            .env_remove("REDIS_URL")
            .stdin(open())
            .stdout(open())
            .stderr(open())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the tool on the terminal")
    }

    /// Types `keys` (`\x03` is Ctrl-C, `\x1a` Ctrl-Z).
    fn type_keys(&mut self, keys: &[u8]) {
        use std::io::Write as _;
        self.master.write_all(keys).expect("type");
    }
}

/// `run L -- vim` at a terminal: the command reads the terminal (it is given
/// the terminal's foreground) rather than being stopped by SIGTTIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_run_at_a_terminal_can_read_it() {
    let server = RedisServer::start();
    let dir = scratch("tty-read");
    let got = dir.join("got");
    let script = format!("read line; echo \"got $line\" > {}", got.display());
    let mut pty = Pty::open();
    let url = server.url();
    let mut tool_process = pty.spawn(&["--url", &url, "run", "tty", "--", "sh", "-c", &script]);
    pty.type_keys(b"hello\n");
    let status = tokio::time::timeout(SOON, tool_process.wait()).await;
    let read = std::fs::read_to_string(&got).unwrap_or_default();
    assert_eq!(
        read, "got hello\n",
        "the command read the terminal ({status:?})"
    );
    assert_eq!(status.expect("ends").expect("wait").code(), Some(0));
    assert!(server.keys().await.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C at the terminal reaches the command, and the tool, once it gave
/// the lock back, dies of SIGINT as the command did: a shell loop around it
/// stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_a_terminal_ends_the_tool_by_sigint_after_the_release() {
    use std::os::unix::process::ExitStatusExt as _;
    let server = RedisServer::start();
    let dir = scratch("tty-int");
    let pidfile = dir.join("pids");
    let script = format!("echo $$ > {}; sleep 60", pidfile.display());
    let mut pty = Pty::open();
    let url = server.url();
    let mut tool_process = pty.spawn(&["--url", &url, "run", "tty", "--", "sh", "-c", &script]);
    let command_pid = pids_in(&pidfile).await[0];
    pty.type_keys(b"\x03");
    let status = within(SOON, "the tool ends on Ctrl-C", tool_process.wait())
        .await
        .expect("wait");
    assert_eq!(status.signal(), Some(2), "died of SIGINT: {status:?}");
    assert!(!alive(command_pid));
    assert!(server.keys().await.is_empty(), "released");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-Z at the terminal stops the job as a whole (the command, which has
/// the terminal, and the tool); SIGCONT to the tool, as `fg` sends it,
/// continues both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_z_at_a_terminal_stops_the_tool_and_its_command_together() {
    let server = RedisServer::start();
    let dir = scratch("tty-tstp");
    let (pidfile, go) = (dir.join("pids"), dir.join("go"));
    let script = format!(
        "echo $$ > {pids}; while [ ! -e {go} ]; do sleep 0.05; done",
        go = go.display(),
        pids = pidfile.display()
    );
    let mut pty = Pty::open();
    let url = server.url();
    let mut tool_process = pty.spawn(&["--url", &url, "run", "tty", "--", "sh", "-c", &script]);
    let command_pid = pids_in(&pidfile).await[0];
    pty.type_keys(b"\x1a");
    stop_and_continue_together(&mut tool_process, command_pid, &go).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_exits_0_on_a_healthy_server_and_6_with_each_problem_and_its_fix() {
    let healthy = RedisServer::start();
    let ran = tool(&healthy, &["doctor"]).await;
    ran.exited(0);
    assert!(ran.stdout.contains("0 problem(s)"), "{ran:#?}");
    for check in [
        "eviction",
        "durability",
        "permissions",
        "round_trip",
        "version",
    ] {
        assert!(ran.stdout.contains(check), "{check}: {ran:#?}");
    }

    let evicting =
        RedisServer::start_with(&["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu"]);
    let ran = tool(&evicting, &["doctor"]).await;
    ran.exited(6);
    let line = ran
        .stdout
        .lines()
        .position(|l| l.starts_with("PROBLEM") && l.contains("eviction"))
        .unwrap_or_else(|| panic!("no eviction problem: {ran:#?}"));
    let fix = ran.stdout.lines().nth(line + 1).unwrap_or_default();
    assert!(
        fix.trim_start().starts_with("fix:") && fix.contains("noeviction"),
        "{ran:#?}"
    );
    assert!(ran.stderr.contains("1 problem(s) found"), "{ran:#?}");

    // A durability the server cannot give is a finding, not a refused
    // connection.
    let ran = tool(
        &healthy,
        &["doctor", "--durability", "aof", "--replicas", "0"],
    )
    .await;
    ran.exited(6);
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("PROBLEM") && l.contains("durability")),
        "{ran:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_json_lists_each_finding_with_its_verdict() {
    let server =
        RedisServer::start_with(&["--maxmemory", "50mb", "--maxmemory-policy", "volatile-lru"]);
    let ran = tool(&server, &["--json", "doctor"]).await;
    ran.exited(6);
    let findings = ran.json()["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let eviction = findings
        .iter()
        .find(|f| f["check"] == "eviction")
        .unwrap_or_else(|| panic!("{ran:#?}"));
    assert_eq!(eviction["verdict"], "problem");
    assert!(eviction["fix"]
        .as_str()
        .unwrap_or_default()
        .contains("noeviction"));
    let permissions = findings
        .iter()
        .find(|f| f["check"] == "permissions")
        .unwrap();
    assert_eq!(permissions["verdict"], "ok");
    assert!(permissions["fix"].is_null());
}
