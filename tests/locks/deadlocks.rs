//! Deadlocks across processes: waits that last past the threshold write what
//! they wait for, walk the wait-for graph, and name a cycle (each client a
//! process of its own as far as Redis can tell: its own client id, identity
//! and connection); `OnDeadlock::Refuse` breaks it at exactly one wait; a
//! chain is no cycle, a cycle that resolves itself stops being named, and bad
//! data is a dead end in bounded time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redisson_locks::{Client, Deadlock, OnDeadlock};
use tokio::sync::Barrier;

use crate::support::child::ChildHolder;
use crate::support::{assert_nothing_left, eventually, within, RedisServer};

const T: Duration = Duration::from_secs(30);
const THRESHOLD: Duration = Duration::from_millis(200);

async fn client(server: &RedisServer, name: &str, on_deadlock: OnDeadlock) -> Client {
    let name = name.to_owned();
    server
        .client_with(move |c| {
            c.deadlock = on_deadlock;
            c.deadlock_threshold = THRESHOLD;
            c.client_name = Some(name);
        })
        .await
}

/// What one side of a cycle does: takes `first`, waits until every side
/// holds its first, then waits for `second` (a plain lock each).
fn side(
    client: &Client,
    first: &str,
    second: &str,
    all_hold: &Arc<Barrier>,
) -> tokio::task::JoinHandle<redisson_locks::Result<()>> {
    let (first, second) = (
        client.get_lock(first).unwrap(),
        client.get_lock(second).unwrap(),
    );
    let all_hold = all_hold.clone();
    tokio::spawn(async move {
        let held = first.lock().await?;
        all_hold.wait().await;
        let result = second.lock().await;
        let outcome = match result {
            Ok(inner) => inner.unlock().await,
            Err(e) => Err(e),
        };
        held.unlock().await?;
        outcome
    })
}

/// The one cycle `client` is on, once it names one.
async fn named_by(client: &Client) -> Deadlock {
    assert!(
        eventually(T, || async { !client.deadlocks().is_empty() }).await,
        "no deadlock named"
    );
    let mut cycles = client.deadlocks();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    cycles.remove(0)
}

fn locks_of(cycle: &Deadlock) -> Vec<String> {
    let mut locks: Vec<String> = cycle.steps.iter().map(|s| s.lock.clone()).collect();
    locks.sort();
    locks
}

fn processes_of(cycle: &Deadlock) -> Vec<String> {
    let mut names: Vec<String> = cycle
        .steps
        .iter()
        .map(|s| {
            let identity = s.identity.as_ref().expect("a client of this crate");
            assert_eq!(identity.pid, std::process::id());
            identity.name.clone().unwrap_or_default()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_in_opposite_order_are_both_named_and_the_walk_finds_one_cycle() {
    let server = RedisServer::start();
    let a = client(&server, "orders-svc", OnDeadlock::Warn).await;
    let b = client(&server, "stock-svc", OnDeadlock::Warn).await;
    let all_hold = Arc::new(Barrier::new(2));
    let began = Instant::now();
    let sides = [
        side(&a, "orders:42", "stock:7", &all_hold),
        side(&b, "stock:7", "orders:42", &all_hold),
    ];
    let (seen_a, seen_b) = (named_by(&a).await, named_by(&b).await);
    let took = began.elapsed();
    assert!(
        took < THRESHOLD * 2 + Duration::from_secs(5),
        "named after {took:?}"
    );
    for seen in [&seen_a, &seen_b] {
        assert_eq!(seen.steps.len(), 2, "{seen}");
        assert_eq!(locks_of(seen), ["orders:42", "stock:7"]);
        assert_eq!(processes_of(seen), ["orders-svc", "stock-svc"]);
        assert!(seen.steps.iter().all(|s| s.since_ms.is_some()));
        let text = seen.to_string();
        assert!(
            text.contains("orders-svc") && text.contains("\"stock:7\""),
            "{text}"
        );
    }
    assert_eq!(seen_a.victim(), seen_b.victim(), "both agree on the victim");
    // Each step's holder is the next step's task.
    for (i, step) in seen_a.steps.iter().enumerate() {
        let next = &seen_a.steps[(i + 1) % seen_a.steps.len()];
        assert_eq!(step.holder.split(':').next(), next.waiter.split(':').next());
    }
    let found = a.find_deadlocks("*").await.unwrap();
    assert_eq!(found.cycles.len(), 1, "{found:?}");
    assert_eq!(found.waits, 2);
    assert_eq!(
        a.find_deadlocks("stock:*").await.unwrap().cycles.len(),
        1,
        "a pattern matching one of its locks"
    );
    assert!(a
        .find_deadlocks("nothing:*")
        .await
        .unwrap()
        .cycles
        .is_empty());
    for task in sides {
        task.abort();
        let _ = task.await;
    }
    assert!(
        eventually(T, || async {
            a.deadlocks().is_empty() && b.deadlocks().is_empty()
        })
        .await
    );
    assert_nothing_left(&server, &[&a, &b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_breaks_the_cycle_at_exactly_one_wait_and_the_other_proceeds() {
    for round in 0..3 {
        let server = RedisServer::start();
        let a = client(&server, "a", OnDeadlock::Refuse).await;
        let b = client(&server, "b", OnDeadlock::Refuse).await;
        let all_hold = Arc::new(Barrier::new(2));
        let sides = [side(&a, "x", "y", &all_hold), side(&b, "y", "x", &all_hold)];
        let mut refused = 0;
        for task in sides {
            match within(T, "a side of the cycle", task).await.unwrap() {
                Ok(()) => {}
                Err(e) if e.is_deadlock() => {
                    refused += 1;
                    let text = e.to_string();
                    assert!(text.contains("deadlock detected"), "{text}");
                }
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(refused, 1, "round {round}: exactly one side gives up");
        assert_nothing_left(&server, &[&a, &b]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_of_three_through_a_read_write_lock_and_a_fair_lock_is_found() {
    let server = RedisServer::start();
    let c0 = client(&server, "c0", OnDeadlock::Warn).await;
    let c1 = client(&server, "c1", OnDeadlock::Warn).await;
    let c2 = client(&server, "c2", OnDeadlock::Warn).await;
    let all_hold = Arc::new(Barrier::new(3));
    // c0 holds fair "f" and wants to write "rw"; c1 reads "rw" and wants
    // "x"; c2 holds "x" and wants "f".
    let t0 = {
        let (f, rw, all_hold) = (
            c0.get_fair_lock("f").unwrap(),
            c0.get_read_write_lock("rw").unwrap(),
            all_hold.clone(),
        );
        tokio::spawn(async move {
            let _held = f.lock().await.unwrap();
            all_hold.wait().await;
            let _ = rw.write_lock().lock().await;
        })
    };
    let t1 = {
        let (rw, x, all_hold) = (
            c1.get_read_write_lock("rw").unwrap(),
            c1.get_lock("x").unwrap(),
            all_hold.clone(),
        );
        tokio::spawn(async move {
            let _held = rw.read_lock().lock().await.unwrap();
            all_hold.wait().await;
            let _ = x.lock().await;
        })
    };
    let t2 = {
        let (x, f, all_hold) = (
            c2.get_lock("x").unwrap(),
            c2.get_fair_lock("f").unwrap(),
            all_hold.clone(),
        );
        tokio::spawn(async move {
            let _held = x.lock().await.unwrap();
            all_hold.wait().await;
            let _ = f.lock().await;
        })
    };
    for client in [&c0, &c1, &c2] {
        let cycle = named_by(client).await;
        assert_eq!(cycle.steps.len(), 3, "{cycle}");
        assert_eq!(locks_of(&cycle), ["f", "rw", "x"]);
    }
    for task in [t0, t1, t2] {
        task.abort();
        let _ = task.await;
    }
    assert_nothing_left(&server, &[&c0, &c1, &c2]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_is_no_cycle_and_a_cycle_that_resolves_itself_stops_being_named() {
    const LINKS: usize = 12;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for i in 0..=LINKS {
        clients.push(client(&server, &format!("c{i}"), OnDeadlock::Refuse).await);
    }
    // A chain of twelve waits: client i holds chain:i and waits for
    // chain:i+1; the last client holds chain:12 and waits for nothing.
    let held_last = clients[LINKS]
        .get_lock(format!("chain:{LINKS}"))
        .unwrap()
        .lock()
        .await
        .unwrap();
    let all_hold = Arc::new(Barrier::new(LINKS));
    let chain: Vec<_> = (0..LINKS)
        .map(|i| {
            side(
                &clients[i],
                &format!("chain:{i}"),
                &format!("chain:{}", i + 1),
                &all_hold,
            )
        })
        .collect();
    tokio::time::sleep(THRESHOLD * 6).await;
    for client in &clients {
        assert!(client.deadlocks().is_empty(), "a chain is not a deadlock");
    }
    let found = clients[0].find_deadlocks("*").await.unwrap();
    assert!(found.cycles.is_empty(), "{found:?}");
    assert_eq!(found.waits, LINKS);
    assert!(
        found.dead_ends >= 1,
        "the last waits for nothing: {found:?}"
    );
    held_last.unlock().await.unwrap();
    for task in chain {
        // Under Refuse too: no wait of a chain gives up.
        within(T, "the chain drains", task).await.unwrap().unwrap();
    }

    // A cycle whose one side gives up after 1.5 s: named, then no longer
    // (clients that only warn).
    let (p, q) = (
        &client(&server, "p", OnDeadlock::Warn).await,
        &client(&server, "q", OnDeadlock::Warn).await,
    );
    let all_hold = Arc::new(Barrier::new(2));
    let patient = side(p, "m", "n", &all_hold);
    let impatient = {
        let (first, second, all_hold) = (
            q.get_lock("n").unwrap(),
            q.get_lock("m").unwrap(),
            all_hold.clone(),
        );
        tokio::spawn(async move {
            let held = first.lock().await.unwrap();
            all_hold.wait().await;
            let got = second
                .try_lock_wait(Duration::from_millis(1_500))
                .await
                .unwrap();
            assert!(got.is_none(), "it waits behind p's hold of m");
            held.unlock().await.unwrap();
        })
    };
    named_by(p).await;
    within(T, "the impatient side gives up", impatient)
        .await
        .unwrap();
    assert!(
        eventually(T, || async { p.deadlocks().is_empty() }).await,
        "still named: {:?}",
        p.deadlocks()
    );
    within(T, "the patient side", patient)
        .await
        .unwrap()
        .unwrap();
    let mut all: Vec<&Client> = clients.iter().collect();
    all.extend([p, q]);
    assert_nothing_left(&server, &all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_of_ten_clients_is_found_and_refuse_breaks_it_once() {
    const TEN: usize = 10;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for i in 0..TEN {
        clients.push(client(&server, &format!("c{i}"), OnDeadlock::Refuse).await);
    }
    let all_hold = Arc::new(Barrier::new(TEN));
    let sides: Vec<_> = (0..TEN)
        .map(|i| {
            side(
                &clients[i],
                &format!("ten:{i}"),
                &format!("ten:{}", (i + 1) % TEN),
                &all_hold,
            )
        })
        .collect();
    let mut refused = 0;
    for task in sides {
        match within(T, "a side of the ring", task).await.unwrap() {
            Ok(()) => {}
            Err(e) if e.is_deadlock() => {
                refused += 1;
                assert!(e.to_string().contains("deadlock of 10 waits"), "{e}");
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(refused, 1, "one wait breaks the ring, the others go on");
    let all: Vec<&Client> = clients.iter().collect();
    assert_nothing_left(&server, &all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_wait_of_a_task_that_holds_nothing_writes_nothing() {
    let server = RedisServer::start();
    let holder = client(&server, "holder", OnDeadlock::Warn).await;
    let waiter = client(&server, "waiter", OnDeadlock::Warn).await;
    let held = holder.get_lock("busy").unwrap().lock().await.unwrap();
    let lock = waiter.get_lock("busy").unwrap();
    let waiting = tokio::spawn(async move { lock.try_lock_wait(THRESHOLD * 5).await });
    let writes_before = server.command_calls("hset").await;
    assert!(within(T, "the wait", waiting)
        .await
        .unwrap()
        .unwrap()
        .is_none());
    assert_eq!(
        server.command_calls("hset").await,
        writes_before,
        "no record"
    );
    held.unlock().await.unwrap();
    assert_nothing_left(&server, &[&holder, &waiter]).await;
}

/// Writes a lock hash held by `owner`, as any client would.
async fn held_by(server: &RedisServer, lock: &str, owner: &str) {
    let mut admin = server.admin().await;
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(lock)
        .arg(owner)
        .arg(1)
        .ignore()
        .cmd("PEXPIRE")
        .arg(lock)
        .arg(60_000)
        .ignore()
        .query_async(&mut admin)
        .await
        .unwrap();
}

/// Writes a wait record of `owner` (waiting for `lock`) where its client's
/// records go.
async fn record(server: &RedisServer, owner: &str, lock: &str) {
    let client_id = &owner[..36];
    let value = serde_json::json!({
        "waiter": owner, "lock": lock, "kind": "reentrant",
        "since_ms": 1_700_000_000_000u64, "holds": [],
    });
    let mut admin = server.admin().await;
    let _: () = redis::cmd("HSET")
        .arg(format!("redisson_locks_waits:{{{client_id}}}"))
        .arg(owner)
        .arg(value.to_string())
        .query_async(&mut admin)
        .await
        .unwrap();
}

fn fake_owner() -> String {
    format!("{}:1", uuid::Uuid::new_v4())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_data_is_a_dead_end_in_bounded_time_and_a_ring_of_a_thousand_is_cut() {
    let server = RedisServer::start();
    let waiter = client(&server, "w", OnDeadlock::Refuse).await;
    let mut admin = server.admin().await;
    // A foreign key where a holder's records should be.
    let foreign = fake_owner();
    held_by(&server, "held-by-foreign", &foreign).await;
    let _: () = redis::cmd("SET")
        .arg(format!("redisson_locks_waits:{{{}}}", &foreign[..36]))
        .arg("not a hash")
        .query_async(&mut admin)
        .await
        .unwrap();
    // A record naming a lock that does not exist, one naming no lock at all,
    // and a field that is no record.
    let lost = fake_owner();
    held_by(&server, "held-by-lost", &lost).await;
    record(&server, &lost, "nowhere").await;
    let nameless = fake_owner();
    held_by(&server, "held-by-nameless", &nameless).await;
    record(&server, &nameless, "").await;
    let _: () = redis::cmd("HSET")
        .arg(format!("redisson_locks_waits:{{{}}}", &nameless[..36]))
        .arg("junk-field")
        .arg("{not json")
        .query_async(&mut admin)
        .await
        .unwrap();
    // A ring of 1,000 waits: ring:i held by owner i, who waits for ring:i+1.
    const RING: usize = 1_000;
    let owners: Vec<String> = (0..RING).map(|_| fake_owner()).collect();
    for (i, owner) in owners.iter().enumerate() {
        held_by(&server, &format!("ring:{i}"), owner).await;
        record(&server, owner, &format!("ring:{}", (i + 1) % RING)).await;
    }
    let began = Instant::now();
    let mut waits = Vec::new();
    for name in [
        "held-by-foreign",
        "held-by-lost",
        "held-by-nameless",
        "ring:0",
    ] {
        // Each waiting task holds a lock of its own, so that it walks.
        let own = waiter.get_lock(format!("own:{name}")).unwrap();
        let lock = waiter.get_lock(name).unwrap();
        waits.push(tokio::spawn(async move {
            let held = own.lock().await?;
            let timed_out = lock
                .try_lock_wait(THRESHOLD * 6)
                .await
                .map(|got| got.is_none());
            held.unlock().await?;
            timed_out
        }));
    }
    for wait in waits {
        let timed_out = within(T, "a wait behind bad data", wait).await.unwrap();
        assert!(timed_out.unwrap(), "ran out of time, no deadlock named");
    }
    assert!(waiter.deadlocks().is_empty());
    let found = within(T, "the whole server's walk", waiter.find_deadlocks("*"))
        .await
        .unwrap();
    assert!(found.cycles.is_empty(), "{found:?}");
    assert!(found.cut, "the ring is longer than a walk goes: {found:?}");
    assert!(found.unreadable >= 1, "{found:?}");
    assert!(
        began.elapsed() < Duration::from_secs(25),
        "bounded: {:?}",
        began.elapsed()
    );
}

/// A child process's side of a cycle (`LOCKS_CHILD=deadlock-side`): takes
/// FIRST, says `HELD`, waits until SECOND is held (by the other side), then
/// waits for SECOND; says `GOT` or `REFUSED`, releases and ends. Its client
/// refuses under `LOCKS_DEADLOCK=refuse`, warns otherwise; its watchdog
/// lease is `LOCKS_WATCHDOG_MS` when set.
pub(crate) async fn deadlock_side(url: String, first: String, second: String) {
    let mut config = redisson_locks::Config::from_url(&url).unwrap();
    config.deadlock_threshold = THRESHOLD;
    config.deadlock = match std::env::var("LOCKS_DEADLOCK").as_deref() {
        Ok("refuse") => OnDeadlock::Refuse,
        _ => OnDeadlock::Warn,
    };
    config.client_name = Some(format!("side-{first}"));
    if let Ok(ms) = std::env::var("LOCKS_WATCHDOG_MS") {
        config.lock_watchdog_timeout = Duration::from_millis(ms.parse().unwrap());
    }
    let client = Client::connect(config).await.unwrap();
    let (first, second) = (
        client.get_lock(&first).unwrap(),
        client.get_lock(&second).unwrap(),
    );
    let held = first.lock().await.unwrap();
    println!("HELD");
    while !second.is_locked().await.unwrap() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match second.lock().await {
        Ok(inner) => {
            println!("GOT");
            inner.unlock().await.unwrap();
        }
        Err(e) if e.is_deadlock() => println!("REFUSED"),
        Err(e) => panic!("{e}"),
    }
    held.unlock().await.unwrap();
    client.close().await;
}

fn side_process(
    server: &RedisServer,
    first: &str,
    second: &str,
    env: &[(&str, &str)],
) -> ChildHolder {
    let mut orders = vec![
        ("CHILD", "deadlock-side".to_owned()),
        ("URL", server.url()),
        ("FIRST", first.to_owned()),
        ("SECOND", second.to_owned()),
    ];
    orders.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let mut child = ChildHolder::spawn(&orders);
    assert!(child.wait_for_line("HELD"), "the side took its first lock");
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_in_opposite_order_are_named_and_refuse_breaks_it_at_one() {
    let server = RedisServer::start();
    let observer = server.client().await;
    // Warned: both processes wait; the cycle is seen from a third client.
    let began = Instant::now();
    let _sides = [
        side_process(&server, "orders:42", "stock:7", &[]),
        side_process(&server, "stock:7", "orders:42", &[]),
    ];
    let seen = eventually(T, || async {
        observer.find_deadlocks("*").await.unwrap().cycles.len() == 1
    })
    .await;
    assert!(seen, "{:?}", observer.find_deadlocks("*").await);
    let took = began.elapsed();
    let cycle = observer.find_deadlocks("*").await.unwrap().cycles.remove(0);
    assert_eq!(locks_of(&cycle), ["orders:42", "stock:7"]);
    let mut pids: Vec<u32> = cycle
        .steps
        .iter()
        .map(|s| s.identity.as_ref().expect("announced").pid)
        .collect();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), 2, "two processes: {cycle}");
    assert!(!pids.contains(&std::process::id()));
    assert!(took < Duration::from_secs(10), "named after {took:?}");
    drop(_sides);

    // Refused: exactly one process gives up, the other takes its lock.
    let server = RedisServer::start();
    let observer = server.client().await;
    let mut sides = [
        side_process(&server, "x", "y", &[("DEADLOCK", "refuse")]),
        side_process(&server, "y", "x", &[("DEADLOCK", "refuse")]),
    ];
    let mut said = Vec::new();
    for side in &mut sides {
        said.push(outcome(side));
    }
    said.sort();
    assert_eq!(said, ["GOT", "REFUSED"], "{said:?}");
    for side in &mut sides {
        assert!(side.wait(T), "the side ended cleanly");
    }
    assert_nothing_left(&server, &[&observer]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_mid_cycle_leaves_no_stale_cycle() {
    let server = RedisServer::start();
    let observer = server.client().await;
    let watchdog = [("WATCHDOG_MS", "1500")];
    let mut doomed = side_process(&server, "p", "q", &watchdog);
    let mut survivor = side_process(&server, "q", "p", &watchdog);
    assert!(
        eventually(T, || async {
            observer.find_deadlocks("*").await.unwrap().cycles.len() == 1
        })
        .await
    );
    doomed.kill();
    // Its hold of p and its record end with its lease; the survivor takes p.
    assert_eq!(outcome(&mut survivor), "GOT");
    assert!(survivor.wait(T));
    let found = observer.find_deadlocks("*").await.unwrap();
    assert!(found.cycles.is_empty(), "{found:?}");
    assert!(
        eventually(T, || async { server.keys().await.is_empty() }).await,
        "left: {:?}",
        server.keys().await
    );
}

/// What a side process said of its wait: `GOT`, `REFUSED`, or `` if it ended
/// without saying.
fn outcome(side: &mut ChildHolder) -> String {
    while let Some(line) = side.line_starting("") {
        for word in ["GOT", "REFUSED"] {
            if line.ends_with(word) {
                return word.to_owned();
            }
        }
    }
    String::new()
}
