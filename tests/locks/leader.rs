//! Leader election (`Client::get_leader_election`): participants in their own
//! processes killed and frozen, a Java `RFencedLock` holder as the leader,
//! observers, cancellation. Every term is logged with CLOCK_MONOTONIC times,
//! and no two terms may be valid at one instant.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::AsyncCommands;
use redisson_locks::{Client, LeaderChange, Leadership};

use crate::support::checker::monotonic_ns;
use crate::support::child::ChildHolder;
use crate::support::java::JavaDriver;
use crate::support::{assert_nothing_left_but, eventually, within, RedisServer, LATE};

const WATCHDOG: Duration = Duration::from_secs(1);
const SOON: Duration = Duration::from_secs(10);

/// A term log shared by processes: `WON who epoch ns`, `VALID who epoch
/// until_ns` (each time the term's validity moves), `END who epoch ns`
/// (resigned or found lost). One line per write (O_APPEND keeps lines whole).
#[derive(Debug, Clone)]
struct TermLog {
    path: PathBuf,
}

/// A term's logged instants: its win, its greatest validity, its end.
type Marks = (Option<u64>, Option<u64>, Option<u64>);

/// One term as its leader saw it: valid from `won` until the earlier of its
/// end and the last validity it logged (a killed leader logs no end).
#[derive(Debug, Clone, PartialEq)]
struct Term {
    who: String,
    epoch: u64,
    won: u64,
    valid_until: u64,
}

impl TermLog {
    fn create(dir: &Path) -> TermLog {
        let path = dir.join(format!("terms-{}.log", monotonic_ns()));
        std::fs::write(&path, b"").unwrap();
        TermLog { path }
    }

    fn line(&self, what: &str, who: &str, epoch: u64, ns: u64) {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .unwrap();
        file.write_all(format!("{what} {who} {epoch} {ns}\n").as_bytes())
            .unwrap();
    }

    /// The marks logged so far, by (who, epoch): (won, greatest validity,
    /// end). Only whole lines: a child may be killed while writing one.
    fn marks(&self) -> HashMap<(String, u64), Marks> {
        let text = std::fs::read_to_string(&self.path).unwrap();
        let mut marks: HashMap<(String, u64), Marks> = HashMap::new();
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let line = line.trim_end();
            let f: Vec<&str> = line.split(' ').collect();
            let [what, who, epoch, ns] = f[..] else {
                panic!("bad term line {line:?}")
            };
            let (epoch, ns): (u64, u64) = (epoch.parse().unwrap(), ns.parse().unwrap());
            let term = marks.entry((who.to_owned(), epoch)).or_default();
            match what {
                "WON" => term.0 = Some(ns),
                "VALID" => term.1 = Some(term.1.map_or(ns, |v| v.max(ns))),
                "END" => term.2 = Some(ns),
                other => panic!("bad term line kind {other}"),
            }
        }
        marks
    }

    /// A term, once its win and a validity are logged.
    fn term_of(who: String, epoch: u64, (won, valid, end): Marks) -> Option<Term> {
        let (won, valid) = (won?, valid?);
        Some(Term {
            who,
            epoch,
            won,
            valid_until: end.map_or(valid, |end| end.min(valid)),
        })
    }

    /// Every term, in win order; each must have its win and a validity.
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = self
            .marks()
            .into_iter()
            .map(|((who, epoch), marks)| {
                Self::term_of(who, epoch, marks).expect("a term without its win or validity")
            })
            .collect();
        terms.sort_by_key(|t| t.won);
        terms
    }

    /// The term of `epoch`, once its leader logged its win and a validity.
    fn term(&self, epoch: u64) -> Option<Term> {
        self.marks()
            .into_iter()
            .find(|((_, e), _)| *e == epoch)
            .and_then(|((who, epoch), marks)| Self::term_of(who, epoch, marks))
    }

    /// Every pair of terms valid at one instant.
    fn overlaps(&self) -> Vec<(Term, Term)> {
        let terms = self.terms();
        let mut found = Vec::new();
        for (i, a) in terms.iter().enumerate() {
            for b in &terms[i + 1..] {
                if b.won < a.valid_until && b.won < b.valid_until {
                    found.push((a.clone(), b.clone()));
                }
            }
        }
        found
    }
}

/// Leads `leadership` (logged as `who`) for `hold` (until lost when `None`),
/// logging its validity as it moves; `true` when it was lost. A belief that
/// outlived its validity (not lost though the last validity passed) panics.
async fn lead(leadership: &Leadership, who: &str, log: &TermLog, hold: Option<Duration>) -> bool {
    let epoch = leadership.epoch();
    let started = tokio::time::Instant::now();
    let mut until = 0;
    loop {
        if leadership.is_lost() {
            log.line("END", who, epoch, monotonic_ns());
            return true;
        }
        let now = monotonic_ns();
        if let Some(left) = leadership.valid_for() {
            let new = now + left.as_nanos() as u64;
            if new.abs_diff(until) > 1_000_000 {
                until = new;
                log.line("VALID", who, epoch, until);
                println!("VALID {until}");
            }
        }
        if hold.is_some_and(|hold| started.elapsed() >= hold) {
            log.line("END", who, epoch, monotonic_ns());
            return false;
        }
        tokio::select! {
            biased;
            () = leadership.lost() => {}
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
}

/// A fenced store: writes `epoch` to `key` unless a greater or equal one was
/// written; 1 when accepted.
async fn fenced_write(conn: &mut redis::aio::MultiplexedConnection, key: &str, epoch: u64) -> i64 {
    redis::Script::new(
        "local top = tonumber(redis.call('get', KEYS[1]) or '0') \
         if tonumber(ARGV[1]) > top then redis.call('set', KEYS[1], ARGV[1]) return 1 end \
         return 0",
    )
    .key(key)
    .arg(epoch)
    .invoke_async(conn)
    .await
    .unwrap()
}

/// The child's part (`LOCKS_CHILD=campaign`, see `faults::child_process_entry`):
/// campaigns for `LOCK` `ROUNDS` times (0: once, then leads until lost and
/// stays), leading `HOLD_MS` each time (0: until lost), logging to `LOG`.
/// Once lost it prints `LOST <epoch> <ns>` and, given `FENCE_KEY`, tries a
/// fenced write with its stale epoch and prints `FENCED <0|1>`.
pub(super) async fn campaign_child(client: Client) {
    let var = |name: &str| std::env::var(format!("LOCKS_{name}")).expect(name);
    let election = client.get_leader_election(var("LOCK")).unwrap();
    let log = TermLog {
        path: var("LOG").into(),
    };
    let rounds: u64 = var("ROUNDS").parse().unwrap();
    let hold = match var("HOLD_MS").parse().unwrap() {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    let who = std::process::id().to_string();
    for _ in 0..rounds.max(1) {
        let leadership = election.campaign().await.unwrap();
        let won = monotonic_ns();
        log.line("WON", &who, leadership.epoch(), won);
        println!("LEADING {} {won}", leadership.epoch());
        if lead(&leadership, &who, &log, hold).await {
            println!("LOST {} {}", leadership.epoch(), monotonic_ns());
            if let Ok(key) = std::env::var("LOCKS_FENCE_KEY") {
                let mut conn = redis::Client::open(var("URL"))
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                println!(
                    "FENCED {}",
                    fenced_write(&mut conn, &key, leadership.epoch()).await
                );
            }
        } else {
            leadership.resign().await.unwrap();
        }
    }
    println!("DONE");
    if rounds == 0 {
        std::future::pending::<()>().await;
    }
}

fn spawn_participant(
    server: &RedisServer,
    name: &str,
    log: &TermLog,
    extra: &[(&str, String)],
) -> ChildHolder {
    let mut orders = vec![
        ("CHILD", "campaign".to_owned()),
        ("URL", server.url()),
        ("LOCK", name.to_owned()),
        ("LOG", log.path.display().to_string()),
        ("WATCHDOG_MS", WATCHDOG.as_millis().to_string()),
        ("ROUNDS", "0".to_owned()),
        ("HOLD_MS", "0".to_owned()),
    ];
    orders.extend(extra.iter().map(|(k, v)| (*k, v.clone())));
    ChildHolder::spawn(&orders)
}

/// Collects an observer's changes in a task, until aborted.
fn collect_changes(
    client: &Client,
    name: &str,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedReceiver<LeaderChange>,
) {
    use tokio_stream::StreamExt as _;
    let changes = client
        .get_leader_election(name)
        .unwrap()
        .observe()
        .into_stream();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut changes = std::pin::pin!(changes);
        while let Some(change) = changes.next().await {
            if tx.send(change.unwrap()).is_err() {
                return;
            }
        }
    });
    (task, rx)
}

/// The epochs of `changes` (0 for a vacancy), asserting they only grow.
fn assert_in_order(changes: &[LeaderChange]) -> Vec<u64> {
    let mut last = 0;
    let mut seen = Vec::new();
    for (i, change) in changes.iter().enumerate() {
        match change {
            LeaderChange::Elected(leader) => {
                assert!(
                    leader.epoch > last,
                    "change {i}: epoch {} after {last}: {changes:?}",
                    leader.epoch
                );
                last = leader.epoch;
                seen.push(leader.epoch);
            }
            LeaderChange::Vacant => {
                if i > 0 {
                    assert!(
                        !matches!(changes[i - 1], LeaderChange::Vacant),
                        "two vacancies in a row: {changes:?}"
                    );
                }
                seen.push(0);
            }
            other => panic!("unknown change {other:?}"),
        }
    }
    seen
}

/// Requirement 1 (and 3, 4 across processes): three participants; the leader
/// is SIGKILLed; another leads within its lease plus a margin, with a greater
/// epoch; an observer saw each change in order; no two terms overlapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_within_its_lease_by_a_greater_epoch() {
    let server = RedisServer::start();
    let log = TermLog::create(server.dir());
    let client = server.client().await;
    let election = client.get_leader_election("jobs").unwrap();
    let (observing, mut changes) = collect_changes(&client, "jobs");
    let mut children: Vec<ChildHolder> = (0..3)
        .map(|_| spawn_participant(&server, "jobs", &log, &[]))
        .collect();
    // One leads, the two others wait on the unlock channel (the observer listens there too).
    assert!(
        eventually(SOON, || async {
            // The win's record is written just after the acquire: wait for it.
            election
                .leader()
                .await
                .unwrap()
                .is_some_and(|l| l.since_ms.is_some())
                && server.subscribers("redisson_lock__channel:{jobs}").await == 3
        })
        .await,
        "no recorded leader with two participants waiting"
    );
    let first = election.leader().await.unwrap().unwrap();
    let pid = first
        .owner
        .identity
        .as_ref()
        .expect("a participant of this crate announces itself")
        .pid;
    assert!(first.since_ms.is_some(), "{first:?}");
    let victim = children
        .iter()
        .position(|c| c.pid() == pid)
        .expect("the leader is one of the children");
    let killed = monotonic_ns();
    children[victim].kill();
    let next = within(WATCHDOG + LATE, "a new leader after SIGKILL", async {
        loop {
            if let Some(leader) = election.leader().await.unwrap() {
                if leader.epoch > first.epoch {
                    return leader;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let new_pid = next.owner.identity.as_ref().unwrap().pid;
    assert_ne!(new_pid, pid);
    // The server names the new leader as soon as it acquired, a moment
    // before its process logs the win and its first validity.
    let mut term = None;
    assert!(
        eventually(SOON, || {
            term = log.term(next.epoch);
            let logged = term.is_some();
            async move { logged }
        })
        .await,
        "the new leader never logged its win and validity"
    );
    let won = term.map_or(0, |t| t.won);
    println!(
        "failover after SIGKILL: {} ms (lease {} ms); epochs {} -> {}",
        (won - killed) / 1_000_000,
        WATCHDOG.as_millis(),
        first.epoch,
        next.epoch
    );
    // The observer: the first leader, then (a vacancy, then) the next, in order.
    let mut seen = Vec::new();
    within(SOON, "the observer sees the new epoch", async {
        while !seen
            .iter()
            .any(|c| matches!(c, LeaderChange::Elected(l) if l.epoch == next.epoch))
        {
            seen.push(changes.recv().await.unwrap());
        }
    })
    .await;
    observing.abort();
    let epochs = assert_in_order(&seen);
    assert!(
        epochs.contains(&first.epoch),
        "the observer missed the first leader: {seen:?}"
    );
    drop(children);
    let overlaps = log.overlaps();
    assert!(overlaps.is_empty(), "two leaders at once: {overlaps:?}");
}

/// Requirement 2: a leader frozen past its lease. The new leader's campaign
/// returns only after the frozen one's validity ended (CLOCK_MONOTONIC, both
/// logged), the frozen one learns it lost as soon as it runs again, and a
/// fenced store refuses its stale epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_learns_it_lost_and_its_stale_epoch_is_refused() {
    let server = RedisServer::start();
    let log = TermLog::create(server.dir());
    let mut frozen = spawn_participant(
        &server,
        "frozen",
        &log,
        &[("FENCE_KEY", "store".to_owned())],
    );
    let leading =
        tokio::task::block_in_place(|| frozen.line_starting("LEADING")).expect("the child leads");
    let stale: u64 = leading.split(' ').nth(1).unwrap().parse().unwrap();
    // Freeze it just after a renewal moved its validity (the next is a third
    // of a lease away), so the validity it logged last is the one it has: the
    // first line is the win's, the second a renewal's.
    for _ in 0..2 {
        tokio::task::block_in_place(|| frozen.line_starting("VALID")).expect("a validity line");
    }
    frozen.signal("STOP");
    let client = server.client().await;
    let election = client.get_leader_election("frozen").unwrap();
    let leadership = within(
        WATCHDOG + LATE,
        "a campaign behind a frozen leader",
        election.campaign(),
    )
    .await
    .unwrap();
    let won = monotonic_ns();
    log.line("WON", "test", leadership.epoch(), won);
    let until = monotonic_ns() + leadership.valid_for().unwrap().as_nanos() as u64;
    log.line("VALID", "test", leadership.epoch(), until);
    assert!(leadership.epoch() > stale);
    let mut conn = server.admin().await;
    assert_eq!(
        fenced_write(&mut conn, "store", leadership.epoch()).await,
        1
    );
    frozen.signal("CONT");
    let lost = tokio::task::block_in_place(|| frozen.line_starting("LOST"))
        .expect("the thawed leader says it lost");
    assert_eq!(
        lost.split(' ').nth(1).unwrap().parse::<u64>().unwrap(),
        stale
    );
    let fenced = tokio::task::block_in_place(|| frozen.line_starting("FENCED")).unwrap();
    assert_eq!(fenced, "FENCED 0", "the stale epoch was accepted");
    let stale_term = log.terms().into_iter().find(|t| t.epoch == stale).unwrap();
    assert!(
        stale_term.valid_until <= won,
        "the new leader won {} ms before the frozen one's validity ended",
        (stale_term.valid_until - won) / 1_000_000
    );
    println!(
        "SIGSTOP: the frozen leader's validity ended {} ms before the new campaign returned",
        (won - stale_term.valid_until) / 1_000_000
    );
    log.line("END", "test", leadership.epoch(), monotonic_ns());
    leadership.resign().await.unwrap();
    let overlaps = log.overlaps();
    assert!(overlaps.is_empty(), "two leaders at once: {overlaps:?}");
}

/// Requirement 4: three processes campaign, lead briefly and resign, again
/// and again; no two terms are valid at one instant, and epochs grow with
/// every win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_taking_turns_never_lead_at_once() {
    let server = RedisServer::start();
    let log = TermLog::create(server.dir());
    let extra = [("ROUNDS", "12".to_owned()), ("HOLD_MS", "15".to_owned())];
    let mut children: Vec<ChildHolder> = (0..3)
        .map(|_| spawn_participant(&server, "turns", &log, &extra))
        .collect();
    for child in &mut children {
        assert!(
            tokio::task::block_in_place(|| child.wait(Duration::from_secs(60))),
            "a participant failed"
        );
    }
    let terms = log.terms();
    assert_eq!(terms.len(), 36, "{terms:?}");
    assert!(
        terms.windows(2).all(|w| w[0].epoch < w[1].epoch),
        "epochs out of win order: {terms:?}"
    );
    let overlaps = log.overlaps();
    assert!(overlaps.is_empty(), "two leaders at once: {overlaps:?}");
}

/// The checker can fail: two overlapping terms are caught, and a killed
/// leader's term ends at its last logged validity.
#[test]
fn the_term_checker_catches_overlaps() {
    let dir = std::env::temp_dir().join(format!("term-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = TermLog::create(&dir);
    log.line("WON", "a", 1, 100);
    log.line("VALID", "a", 1, 1_000);
    log.line("WON", "b", 2, 900);
    log.line("VALID", "b", 2, 2_000);
    log.line("END", "b", 2, 1_500);
    assert_eq!(log.overlaps().len(), 1);
    let clean = TermLog::create(&dir);
    clean.line("WON", "a", 1, 100);
    clean.line("VALID", "a", 1, 1_000);
    clean.line("END", "a", 1, 800);
    clean.line("WON", "b", 2, 900);
    clean.line("VALID", "b", 2, 2_000);
    assert!(clean.overlaps().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Requirement 3 in one process: the observer reports vacancy, A's epoch,
/// vacancy, B's greater epoch, vacancy, in that order, each promptly (from
/// the messages, not the re-read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reports_every_change_in_order() {
    let server = RedisServer::start();
    let a = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(30))
        .await;
    let b = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(30))
        .await;
    let watcher = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_secs(30))
        .await;
    let mut observer = watcher.get_leader_election("seq").unwrap().observe();
    assert_eq!(
        within(SOON, "first reading", observer.next())
            .await
            .unwrap(),
        LeaderChange::Vacant
    );
    // Listening on both channels before anything changes.
    assert!(
        eventually(SOON, || async {
            server
                .subscribers("redisson_locks_leader__channel:{seq}")
                .await
                == 1
                && server.subscribers("redisson_lock__channel:{seq}").await == 1
        })
        .await
    );
    let mut seen = vec![LeaderChange::Vacant];
    let (a_lead, change) = win_observed(&a, "seq", &mut observer, "A's win").await;
    let LeaderChange::Elected(leader) = &change else {
        unreachable!()
    };
    assert_eq!(leader.since_ms, Some(a_lead.since_ms()));
    seen.push(change);
    a_lead.resign().await.unwrap();
    seen.push(vacancy_observed(&mut observer, "A's resignation").await);
    let (b_lead, change) = win_observed(&b, "seq", &mut observer, "B's win").await;
    seen.push(change);
    drop(b_lead); // dropping resigns
    seen.push(vacancy_observed(&mut observer, "B's drop").await);
    assert_eq!(assert_in_order(&seen).len(), 5);
    drop(observer);
    let record = |k: &str| k == "redisson_lock_token:{seq}" || k == "redisson_locks_leader:{seq}";
    assert_nothing_left_but(&server, &[&a, &b, &watcher], record).await;
}

/// `client` campaigns for `name`; `observer` reports the win with its epoch
/// and client id within 5 s. A re-read comes every 10 s here (a 30 s
/// watchdog): a change within it came from a message.
async fn win_observed(
    client: &Client,
    name: &str,
    observer: &mut redisson_locks::Observer,
    what: &str,
) -> (Leadership, LeaderChange) {
    let lead = client
        .get_leader_election(name)
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let change = within(Duration::from_secs(5), what, observer.next())
        .await
        .unwrap();
    let LeaderChange::Elected(leader) = &change else {
        panic!("{what}: {change:?}")
    };
    assert_eq!(
        (leader.epoch, leader.owner.client_id.as_str()),
        (lead.epoch(), client.id()),
        "{what}"
    );
    (lead, change)
}

/// `observer` reports a vacancy within 5 s (a message, as above).
async fn vacancy_observed(observer: &mut redisson_locks::Observer, what: &str) -> LeaderChange {
    let change = within(Duration::from_secs(5), what, observer.next())
        .await
        .unwrap();
    assert_eq!(change, LeaderChange::Vacant, "{what}");
    change
}

/// Requirement 5: a Java `RFencedLock(name)` holder is the leader (no
/// identity, no since); a Rust campaign waits for it and wins with an epoch
/// greater than Java's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_fenced_lock_holder_leads_until_it_unlocks() {
    let server = RedisServer::start();
    let mut java = JavaDriver::start(&server.url(), Duration::from_secs(30), None).await;
    let client = server.client().await;
    let election = client.get_leader_election("java-led").unwrap();
    java.lock("j", "fenced", "java-led", 0, -1);
    let acquired = java.expect("acquired", Some("j"), SOON).await;
    let token = acquired["token"].as_u64().expect("Java's token");
    let leader = election.leader().await.unwrap().expect("Java leads");
    assert_eq!(leader.epoch, token);
    assert_eq!(leader.owner.identity, None);
    assert_eq!(leader.since_ms, None);
    assert!(
        !leader.owner.client_id.is_empty() && !leader.owner.mine,
        "{leader:?}"
    );
    let campaign = tokio::spawn({
        let election = election.clone();
        async move { election.campaign().await }
    });
    assert!(
        eventually(SOON, || async {
            server
                .subscribers("redisson_lock__channel:{java-led}")
                .await
                == 1
        })
        .await,
        "the campaign does not wait on the unlock channel"
    );
    assert!(
        !campaign.is_finished(),
        "the campaign won while Java held the lock"
    );
    assert_eq!(election.leader().await.unwrap().unwrap().epoch, token);
    java.unlock("j", "fenced", "java-led");
    java.expect("unlocked", Some("j"), SOON).await;
    let leadership = within(SOON, "the campaign after Java's unlock", campaign)
        .await
        .unwrap()
        .unwrap();
    assert!(
        leadership.epoch() > token,
        "epoch {} after Java's {token}",
        leadership.epoch()
    );
    let now = election.leader().await.unwrap().unwrap();
    assert!(
        now.owner.mine && now.epoch == leadership.epoch() && now.since_ms.is_some(),
        "{now:?}"
    );
    leadership.resign().await.unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
}

/// Requirement 6: campaigns dropped at every stage (timeouts of 0 to ~2 ms
/// behind a leader, and one cut while it waited) leave no hold, queue entry,
/// subscription or renewal; only the token counter and the record remain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_campaigns_leave_nothing_behind() {
    let server = RedisServer::start();
    let leader_client = server.client().await;
    let client = server.client().await;
    let election = client.get_leader_election("cut").unwrap();
    let mut won = 0;
    for i in 0..300u64 {
        let limit = Duration::from_micros((i * 7919) % 2000);
        if let Ok(leadership) = tokio::time::timeout(limit, election.campaign()).await {
            won += 1;
            leadership.unwrap().resign().await.unwrap();
        }
    }
    let leadership = leader_client
        .get_leader_election("cut")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    for i in 0..100u64 {
        let limit = Duration::from_micros((i * 7919) % 2000);
        assert!(tokio::time::timeout(limit, election.campaign())
            .await
            .is_err());
    }
    // One that waited long enough to subscribe, then was dropped.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), election.campaign())
            .await
            .is_err()
    );
    let observer = election.observe();
    drop(observer);
    assert!(election
        .try_campaign(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    leadership.resign().await.unwrap();
    let _ = won;
    let allowed = |k: &str| k == "redisson_lock_token:{cut}" || k == "redisson_locks_leader:{cut}";
    assert_nothing_left_but(&server, &[&client, &leader_client], allowed).await;
}

/// Errors are typed: a bad name before any I/O, another kind under the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_foreign_keys_are_typed_errors() {
    let server = RedisServer::start();
    let client = server.client().await;
    assert!(client
        .get_leader_election("")
        .unwrap_err()
        .is_invalid_argument());
    let mut admin = server.admin().await;
    let _: () = admin.set("not-a-lock", "hello").await.unwrap();
    let e = client
        .get_leader_election("not-a-lock")
        .unwrap()
        .leader()
        .await
        .unwrap_err();
    assert!(
        matches!(e, redisson_locks::Error::WrongType { .. }),
        "{e:?}"
    );
    // An observer reports the refusal, and does not read again at once: a
    // loop that keeps asking through it waits a re-read interval (a third
    // of the 30 s watchdog) or a wake-up between two readings.
    let mut observer = client.get_leader_election("not-a-lock").unwrap().observe();
    let e = within(SOON, "the refused reading", observer.next())
        .await
        .unwrap_err();
    assert!(e.is_wrong_type(), "{e:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), observer.next())
            .await
            .is_err(),
        "read again at once after a refusal"
    );
    let _: () = admin.del("not-a-lock").await.unwrap();
    // A release on the name's channel wakes it: the next reading finds nobody.
    assert!(
        eventually(SOON, || async {
            server
                .subscribers("redisson_lock__channel:{not-a-lock}")
                .await
                == 1
        })
        .await
    );
    let _: () = admin
        .publish("redisson_lock__channel:{not-a-lock}", "0")
        .await
        .unwrap();
    assert_eq!(
        within(SOON, "the reading after the wake-up", observer.next())
            .await
            .unwrap(),
        LeaderChange::Vacant
    );
}

/// A campaign never re-enters a term: with Java's owner rule (the task is the
/// owner) a second campaign of the leading task waits, draws no epoch, and
/// the first term's epoch stays the current one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_campaign_of_the_leading_task_waits_and_draws_no_epoch() {
    let server = RedisServer::start();
    let client = server
        .client_with(|c| c.owner_mode = redisson_locks::OwnerMode::Task)
        .await;
    let election = client.get_leader_election("once").unwrap();
    let first = election.campaign().await.unwrap();
    let again = election
        .try_campaign(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        again.is_none(),
        "the leading task won a second term at once"
    );
    server.reset_stats().await;
    let leader = election.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.epoch, first.epoch(), "no new epoch was drawn");
    // Who leads is the lock's snapshot, the owner's identity and the record:
    // it counts no listeners (Redis 7 names the call `pubsub|numsub`, 6.2
    // `pubsub`).
    assert_eq!(server.command_calls("pubsub|numsub").await, 0);
    assert_eq!(server.command_calls("pubsub").await, 0);
    assert!(!first.is_lost());
    first.resign().await.unwrap();
}

/// A key of another type where the election keeps its record: the leader
/// is still read (without its "since"), and a campaign is a typed error that
/// holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_key_at_the_record_is_read_around_and_refused_in_words() {
    let server = RedisServer::start();
    let client = server.client().await;
    let mut admin = server.admin().await;
    let _: () = admin
        .hset("redisson_locks_leader:{rec}", "not", "a record")
        .await
        .unwrap();
    let election = client.get_leader_election("rec").unwrap();
    let err = election.campaign().await.unwrap_err();
    assert!(err.is_wrong_type(), "{err}");
    let lock = client.get_lock("rec").unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            !lock.is_locked().await.unwrap()
        })
        .await,
        "the win was given back"
    );
    let held = client.get_fenced_lock("rec").unwrap().lock().await.unwrap();
    let leader = election
        .leader()
        .await
        .unwrap()
        .expect("the fenced holder leads");
    assert_eq!(leader.since_ms, None);
    held.unlock().await.unwrap();
}

/// A caller that drops `next()` faster than the re-read interval (a
/// `select!` against a ticker, a `timeout` in a loop) still sees the changes
/// no message announces: a plain fenced-lock holder's win (an acquire
/// publishes nothing), and its lease running out. With a 1.5 s watchdog the
/// re-read is due every 500 ms; the calls here are dropped after 1 to 150 ms,
/// at every await inside (the wait, the reading's round trips).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_whose_calls_are_dropped_still_sees_silent_changes() {
    let server = RedisServer::start();
    let holder = server.client().await;
    let watcher = server
        .client_with(|c| c.lock_watchdog_timeout = Duration::from_millis(1_500))
        .await;
    let mut observer = watcher.get_leader_election("silent").unwrap().observe();
    assert_eq!(
        within(SOON, "first reading", observer.next())
            .await
            .unwrap(),
        LeaderChange::Vacant
    );
    let lease = Duration::from_millis(1_200);
    let fenced = holder.get_fenced_lock("silent").unwrap();
    let (guard, token) = fenced
        .try_lock_and_get_token(Duration::ZERO, Some(lease))
        .await
        .unwrap()
        .unwrap();
    let dropped_after = [1, 3, 10, 40, 150].map(Duration::from_millis);
    let mut seen = Vec::new();
    let mut calls = 0usize;
    within(
        SOON,
        "the win and the vacancy, with every call dropped",
        async {
            while seen.len() < 2 {
                let limit = dropped_after[calls % dropped_after.len()];
                calls += 1;
                if let Ok(change) = tokio::time::timeout(limit, observer.next()).await {
                    seen.push(change.unwrap());
                }
            }
        },
    )
    .await;
    let LeaderChange::Elected(leader) = &seen[0] else {
        panic!("the holder's win first: {seen:?}")
    };
    assert_eq!(
        (leader.epoch, leader.owner.client_id.as_str()),
        (token, holder.id())
    );
    assert_eq!(
        seen[1],
        LeaderChange::Vacant,
        "then its lease ran out: {seen:?}"
    );
    assert!(calls > 10, "the calls were dropped, many times: {calls}");
    drop(guard);
}
