//! The test kit (`redisson_locks::testing`, feature `test-util`), tested as a
//! user would use it: its example test, passing for a job that stops when it
//! loses its lock and failing for one that does not; each fault it offers, on
//! every lock kind; and a clear error without a server binary.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redisson_locks::testing::TestServer;
use redisson_locks::{Client, Error};

/// The bound of anything that should happen within a renewal or two, on two
/// loaded cores.
const SOON: Duration = Duration::from_secs(10);

type Written = Arc<Mutex<Vec<Instant>>>;

/// The example's job: writes every 20 ms for as long as it holds the lock.
async fn careful_job(client: Client, written: Written) -> Result<(), Error> {
    let guard = client.get_lock("reports")?.lock().await?;
    guard
        .run(async {
            loop {
                written.lock().unwrap().push(Instant::now());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
}

/// The job the example is there to catch: it takes the lock and writes on,
/// whatever becomes of its hold.
async fn careless_job(client: Client, written: Written) -> Result<(), Error> {
    let _guard = client.get_lock("reports")?.lock().await?;
    loop {
        written.lock().unwrap().push(Instant::now());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The example test of the module's docs, over `job`: `Err` with why when
/// the job does not stop writing once it lost the lock.
async fn stops_writing_when_it_loses_the_lock<J, F>(job: J) -> Result<(), String>
where
    J: FnOnce(Client, Written) -> F,
    F: Future<Output = Result<(), Error>> + Send + 'static,
{
    let server = TestServer::start().map_err(|e| e.to_string())?;
    let client = server.client().await.map_err(|e| e.to_string())?;
    let written: Written = Arc::new(Mutex::new(Vec::new()));
    let running = tokio::spawn(job(client.clone(), written.clone()));
    while written.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(server
        .end_lease("reports")
        .await
        .map_err(|e| e.to_string())?);
    let ended = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .map_err(|_| "the job kept running after it lost the lock".to_owned())?
        .map_err(|e| format!("the job panicked: {e}"))?;
    match ended {
        Err(e) if e.is_lease_lost() => {}
        other => return Err(format!("the job ended with {other:?}, not LeaseLost")),
    }
    let count = written.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(200)).await;
    if written.lock().unwrap().len() != count {
        return Err("the job wrote after it ended".to_owned());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_passes_for_a_job_that_stops_when_it_loses_the_lock() {
    stops_writing_when_it_loses_the_lock(careful_job)
        .await
        .expect("the careful job passes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_fails_for_a_job_that_writes_on() {
    let why = stops_writing_when_it_loses_the_lock(careless_job)
        .await
        .expect_err("the careless job fails the example");
    assert!(why.contains("kept running"), "{why}");
}

/// `end_lease` ends the holds of every lock kind; each holder's
/// `lease_lost()` completes within a renewal or two; nothing of the hold is
/// left (a read-write lock's per-hold leases included); a free name says
/// `false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_lease_ends_every_kind_of_hold_and_its_holder_finds_out() {
    let server = TestServer::start().unwrap();
    let client = server.client().await.unwrap();
    let rw = client.get_read_write_lock("rw").unwrap();
    let guards = vec![
        (
            "plain",
            client.get_lock("plain").unwrap().lock().await.unwrap(),
        ),
        (
            "fair",
            client.get_fair_lock("fair").unwrap().lock().await.unwrap(),
        ),
        (
            "fenced",
            client
                .get_fenced_lock("fenced")
                .unwrap()
                .lock()
                .await
                .unwrap(),
        ),
        ("rw", rw.read_lock().lock().await.unwrap()),
        (
            "{t}w",
            client
                .get_read_write_lock("{t}w")
                .unwrap()
                .write_lock()
                .lock()
                .await
                .unwrap(),
        ),
    ];
    let mut admin = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for (name, guard) in &guards {
        assert!(server.end_lease(name).await.unwrap(), "{name} was held");
        let started = Instant::now();
        tokio::time::timeout(SOON, guard.lease_lost())
            .await
            .unwrap_or_else(|_| panic!("{name}: the holder never found out"));
        assert!(started.elapsed() < SOON, "{name}");
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(
        keys.iter().all(|k| k.starts_with("redisson_lock_token") || k.starts_with("redisson_locks_client")),
        "only the fenced token and the identity are left: {keys:?}"
    );
    assert!(
        !server.end_lease("plain").await.unwrap(),
        "nothing holds it now"
    );
    assert!(server
        .end_lease("")
        .await
        .unwrap_err()
        .is_invalid_argument());
    for (name, guard) in guards {
        assert!(guard.unlock().await.unwrap_err().is_not_held(), "{name}");
    }
}

/// `pause` holds every client's commands back until it ends; `cut_connections`
/// cuts them, and the clients go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_and_cuts_reach_the_clients_and_they_recover() {
    let server = TestServer::start().unwrap();
    let client = server.client().await.unwrap();
    let lock = client.get_lock("p").unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    server.pause(Duration::from_millis(600)).await.unwrap();
    let started = Instant::now();
    let guard = tokio::time::timeout(SOON, lock.lock())
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the lock waited for the pause to end ({:?})",
        started.elapsed()
    );
    assert!(server.cut_connections().await.unwrap() >= 1);
    guard.unlock().await.unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_some(),
        "the client reconnected"
    );
    assert!(server
        .pause(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
}

#[test]
fn a_missing_server_binary_is_a_clear_error() {
    let e = TestServer::start_from("/no/such/redis-server").unwrap_err();
    assert!(e.is_config(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("apt-get install redis-server") && text.contains("REDIS_SERVER"),
        "{text}"
    );
}

/// A restart is a crash and a fresh, empty server on the same port: the lock
/// is gone with the old process, and the client reconnects to the new one and
/// locks again. Arguments given at the start reach the restarted server too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_empty_on_the_same_port_and_the_client_reconnects() {
    let binary = redisson_locks::testing::default_binary();
    let mut server = TestServer::start_with(&binary, &["--maxclients", "77"]).unwrap();
    let port = server.port();
    let first_pid = server.pid().unwrap();
    let client = server.client().await.unwrap();
    let guard = client.get_lock("restarted").unwrap().lock().await.unwrap();
    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), Some(first_pid));
    assert!(server.is_running());
    let mut admin = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let maxclients: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(maxclients, ["maxclients", "77"]);
    let held: bool = redis::cmd("EXISTS")
        .arg("restarted")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(!held, "a restarted server keeps nothing");
    drop(guard);
    let again = tokio::time::timeout(
        Duration::from_secs(20),
        client.get_lock("restarted").unwrap().lock(),
    )
    .await
    .expect("the client did not get back to the restarted server")
    .unwrap();
    again.unlock().await.unwrap();
    server.kill();
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
}

/// A port taken by something else is said, not waited on for ever.
#[test]
fn a_taken_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let binary = redisson_locks::testing::default_binary();
    let e = TestServer::start_on(&binary, port, &[]).unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    assert!(e.to_string().contains(&port.to_string()), "{e}");
}

/// Another Redis already listening on the port is not taken for the kit's
/// own server: starting or restarting there fails, saying the port is taken,
/// rather than handing the test someone else's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_another_redis_listens_on_is_a_clear_error() {
    let binary = redisson_locks::testing::default_binary();
    let other = TestServer::start().unwrap();
    let e = TestServer::start_on(&binary, other.port(), &[]).unwrap_err();
    assert!(matches!(e, Error::Config(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&other.port().to_string()) && text.contains("taken"),
        "{text}"
    );

    // Its port taken while it was down: the restart fails the same way.
    let mut server = TestServer::start().unwrap();
    server.kill();
    let squatter = TestServer::start_on(&binary, server.port(), &[]).unwrap();
    let e = server.restart().unwrap_err();
    assert!(
        e.to_string().contains("taken") && !server.is_running(),
        "{e}"
    );
    drop(squatter);
}

/// The documented `--requirepass` server: the client made from its
/// configuration and every fault authenticate with the password it was
/// started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_faults_work_on_a_server_started_with_a_password() {
    let binary = redisson_locks::testing::default_binary();
    let server = TestServer::start_with(&binary, &["--requirepass", "secret"]).unwrap();
    let mut config = server.config();
    config.password = Some("secret".into());
    let client = Client::connect(config).await.unwrap();
    let guard = client.get_lock("pw").unwrap().lock().await.unwrap();
    assert!(server.end_lease("pw").await.unwrap(), "the lease was ended");
    tokio::time::timeout(SOON, guard.lease_lost())
        .await
        .expect("the holder finds out");
    server.pause(Duration::from_millis(10)).await.unwrap();
    assert!(server.cut_connections().await.unwrap() >= 1);
    // Its configuration carries the password too.
    let again = server.client().await.unwrap();
    again
        .get_lock("pw")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}
