//! The engine: the state of one client's lock machinery, under every kind.
//!
//! A [`Engine`] owns what a client shares among its locks and synchronizers:
//! the connection and subscriber (from `transport/`), the ledger of what each
//! owner holds, the lines of waiting tasks, the watchdog, the releaser and the
//! self-wait registry. Kinds (`lock/`, `sync/`, `leader/`) hold an
//! `Arc<Engine>` and answer the engine's [`contract`]; the public
//! [`Client`](crate::Client) is a thin handle over it. Nothing here names a kind
//! or a face type other than the configuration and the one error enum.

pub(crate) mod backoff;
pub(crate) mod cleanup;
pub(crate) mod contract;
pub(crate) mod deadlock;
pub(crate) mod detached;
pub(crate) mod fair_line;
pub(crate) mod handoff;
pub(crate) mod heuristics;
pub(crate) mod identity;
pub(crate) mod join_order;
pub(crate) mod ledger;
pub(crate) mod line;
pub(crate) mod long_wait;
pub(crate) mod owner;
pub(crate) mod release;
pub(crate) mod retry;
pub(crate) mod self_wait;
pub(crate) mod successor;
pub(crate) mod validity;
pub(crate) mod wait;
pub(crate) mod watchdog;

use std::sync::Arc;

use crate::config::Config;
use crate::engine::ledger::{Ledger, Settling};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, Result};
use crate::transport::background::{entered, Background, Spawner};
use crate::transport::conn::Conn;
use crate::transport::connect::{check_server, connect_link};
use crate::transport::home::Home;
use crate::transport::pubsub::{PubSub, PushHandler};
use crate::transport::replication::ReplicaSync;

#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) id: std::sync::Arc<str>,
    pub(crate) config: Config,
    pub(crate) conn: Conn,
    pub(crate) pubsub: PubSub,
    pub(crate) watchdog: Watchdog,
    /// What this client believes each owner holds (see `ledger.rs`).
    pub(crate) ledger: Ledger,
    /// The holds whose guard was detached, one record each (see `detached.rs`).
    pub(crate) detached: crate::engine::detached::Detached,
    /// This client's side of each lock's line (see `line.rs`).
    pub(crate) lines: Arc<crate::engine::line::Lines>,
    /// What this client's releases of each lock did lately (see `handoff.rs`).
    pub(crate) handoffs: Arc<crate::engine::handoff::Handoffs>,
    /// This client's waiters for each fair semaphore (see `fair_line.rs`).
    pub(crate) fair_lines: Arc<crate::engine::fair_line::FairLines>,
    /// Which of this client's tasks holds what, to name a wait for one's own
    /// hold (see `self_wait.rs`).
    pub(crate) holdings: Arc<crate::engine::self_wait::Holdings>,
    /// The cycles of waits this client's long waits found, and the walk that
    /// finds them (see `deadlock.rs`).
    pub(crate) deadlocks: crate::engine::deadlock::Deadlocks,
    /// Replica sync: how many replicas acknowledge each acquire (0: off), and
    /// the connections replica sync's `WAIT`s go on (see `replication.rs`).
    pub(crate) replica_links: ReplicaSync,
    /// How every hold of this client is given back (see `release.rs`).
    pub(crate) releaser: crate::engine::release::Releaser,
    /// Who this client is, and how it says so on the server (see `identity.rs`).
    pub(crate) identity: crate::engine::identity::Identity,
    /// Keeps the client's identity key set (see `identity.rs`).
    announcer: crate::engine::identity::Announcer,
    pub(crate) warnings: Vec<String>,
    /// The client's thread; dropped last, after the releases it must still send
    /// have been queued. Taken out by [`Engine::close`], which awaits its end.
    background: Option<Background>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Nobody can unlock a detached hold once the client is gone: release it,
        // as any other release, through its owner's gate.
        // (A detached hold with an explicit lease ends with it.)
        let renewed = self
            .detached
            .take_all()
            .into_iter()
            .filter(|h| h.is_renewed());
        for hold in renewed {
            let (acquirer, lease_ms, slot) = (hold.acquirer, hold.lease_ms, hold.slot);
            let releaser = self.releaser.clone();
            self.conn.spawn_cleanup(async move {
                let name = acquirer.name().to_owned();
                if let Err(e) = crate::engine::ledger::release_one(&slot, &acquirer, &releaser, lease_ms).await {
                    crate::trace::warn_event!(
                        "lock {name:?}: releasing a detached hold as the client closed failed (it ends with its lease): {e}"
                    );
                }
            });
        }
        // What is still to be sent goes out from the client's own thread.
        if self.conn.spawner().has_cleanup() {
            self.conn.leave_home();
        }
    }
}

impl Engine {
    /// Lock `name` was forced open (deleted, whoever held it): every hold this
    /// client had of it is gone. Its guards learn it (the watchdog reports
    /// them lost), its detached holds end, and no owner's count of it is
    /// believed any more. The one place a force ends holds, as `unlock()`
    /// (through `detached.rs` and the ledger) ends one.
    pub(crate) fn forced_open(&self, name: &str) {
        self.watchdog.forget_lock(name);
        drop(self.detached.take_all_of(name));
        self.ledger.forget_lock(name);
    }

    /// What this client does with a self-wait (see `self_wait.rs`).
    pub(crate) fn self_wait_policy(&self) -> crate::engine::self_wait::Policy {
        crate::engine::self_wait::Policy {
            on_self_wait: self.config.self_wait,
            warn_after: self.config.self_wait_warning,
        }
    }

    /// Validates `config`, starts the client's background thread, connects, and
    /// starts its renewal and subscriber tasks there (see [`Client::connect`](crate::Client::connect)).
    pub(crate) async fn start(config: Config) -> Result<Engine> {
        config.validate()?;
        let background = Background::start(config.timeout + DRAIN_SLACK)?;
        let pushes = PushHandler::new();
        let conn = open_connection(&config, background.spawner().clone(), &pushes, true).await?;
        let mut warnings = check_server(&mut conn.clone()).await;
        let (sync_start, sync_warning) =
            crate::transport::replication::start_on(&config, &conn).await?;
        warnings.extend(sync_warning);
        let linger = crate::engine::heuristics::heuristics().unsubscribe_linger;
        // In a cluster with sharded pub/sub, the subscriptions get a connection
        // of their own. A node that gives up a slot (a reshard, a failover)
        // pushes `sunsubscribe` to its subscribers and keeps the connection;
        // redis-rs before 1.8.2 took that push for the reply to the command at
        // the front of that node's queue, shifting every later reply by one (a
        // script's reply read as another's: seen as timeouts under a graceful
        // failover; redis-rs#2530, fixed in 1.8.2, which this crate requires,
        // and tested by `cluster::a_pushed_sunsubscribe_is_never_taken_for_a_commands_reply`).
        // The separate connection stays: a subscription's traffic never waits
        // behind scripts, and a wedged command link (see `silence.rs`) is
        // replaced without ending every subscription.
        let subscriptions = match conn.is_cluster() && conn.is_sharded() {
            true => open_connection(&config, background.spawner().clone(), &pushes, false).await?,
            false => conn.clone(),
        };
        let pubsub = pushes.start(subscriptions, linger);
        let replica_links = {
            let timeout_ms = config.effective_replica_sync_timeout_ms();
            let spawner = background.spawner().clone();
            let (config, opener) = (config.clone(), spawner.clone());
            let open: crate::transport::replication::OpenLink = Box::new(move || {
                let (config, spawner) = (config.clone(), opener.clone());
                // No pushes: nothing subscribes on the WAITs' connection.
                Box::pin(async move {
                    open_connection(&config, spawner, &PushHandler::new(), false).await
                })
            });
            ReplicaSync::new(sync_start, timeout_ms, open, spawner, pubsub.epoch_reader())
        };
        let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let identity =
            crate::engine::identity::Identity::of_this_process(&id, config.client_name.clone());
        let announcement = announce(&config, &identity, &conn, &mut warnings).await;
        let watchdog = Watchdog::start(
            conn.clone(),
            config.lock_watchdog_timeout,
            config.lock_watchdog_batch_size,
            replica_links.clone(),
        );
        let announcer = crate::engine::identity::Announcer::start(
            announcement,
            &conn,
            config.lock_watchdog_timeout,
        );
        let settling = Settling {
            retry: config.retry_interval,
            budget: config.timeout * 2,
            caller_attempts: config.retry_attempts,
        };
        let lines = Arc::new(crate::engine::line::Lines::new(config.timeout));
        lines.supervise(background.spawner());
        let handoffs = Arc::new(crate::engine::handoff::Handoffs::default());
        let releaser = crate::engine::release::Releaser::new(
            conn.clone(),
            (lines.clone(), handoffs.clone()),
            replica_links.clone(),
            pubsub.epoch_reader(),
        );
        Ok(Engine {
            id,
            identity,
            announcer,
            config,
            conn,
            pubsub,
            watchdog,
            ledger: Ledger::new(settling),
            detached: Default::default(),
            holdings: Arc::new(crate::engine::self_wait::Holdings::new()),
            deadlocks: Default::default(),
            lines,
            handoffs,
            fair_lines: Arc::default(),
            replica_links,
            releaser,
            warnings,
            background: Some(background),
        })
    }

    /// Ends one handle of the engine (see [`Client::close`](crate::Client::close)):
    /// the last one stops everything and waits for the client's thread; any
    /// other waits only for the releases queued so far.
    pub(crate) async fn close(engine: Arc<Engine>) {
        match Arc::try_unwrap(engine) {
            Ok(mut inner) => {
                // Who it was goes first: a closed client is no longer named.
                if let Some(answered) = inner.announcer.withdraw() {
                    let _ = tokio::time::timeout(inner.config.timeout, answered).await;
                }
                let background = inner.background.take();
                // Queues the releases of detached holds on the client's thread.
                drop(inner);
                if let Some(background) = background {
                    background.close().await;
                }
            }
            Err(shared) => {
                let limit = shared.config.timeout + DRAIN_SLACK;
                let _ = tokio::time::timeout(limit, shared.conn.spawner().until_idle()).await;
            }
        }
    }
}

/// Connects as `config` says, with the connection's driver on a runtime chosen
/// from `spawner`'s (the client's thread or the caller's), and pins the
/// scripts on the server.
/// `scripts`: pin the scripts on it (a connection for commands; one for
/// subscriptions alone runs none).
async fn open_connection(
    config: &Config,
    spawner: Spawner,
    pushes: &PushHandler,
    scripts: bool,
) -> Result<Conn> {
    // Polled with the home entered: the connection's driver, and every task it
    // spawns, run there (see `home.rs`).
    let home = Home::choose(&spawner);
    let connect = connect_link(config.clone(), pushes.clone());
    let connect = entered(
        home.handle().clone(),
        tokio::time::timeout(config.connect_timeout, connect),
    );
    let link = match connect.await {
        Ok(link) => link?,
        Err(_) => {
            return Err(Error::connect_timeout(&crate::config::redact_address(
                &config.address,
            )))
        }
    };
    // A replacement link (when the home runtime ends or stalls) must agree on
    // sharded pub/sub with the first one.
    let mut same_kind = config.clone();
    if let Some(sharded) = link.sharded_pubsub() {
        same_kind.sharded_pubsub = Some(sharded);
    }
    let reconnect_pushes = pushes.clone();
    let reconnect: crate::transport::conn::Reconnect =
        Box::new(move || Box::pin(connect_link(same_kind.clone(), reconnect_pushes.clone())));
    let probe_after = crate::transport::silence::probe_after(config.timeout);
    let conn = Conn::new(
        link,
        home,
        spawner,
        (reconnect, probe_after),
        pushes.reconnect_signal(),
    );
    if !scripts {
        return Ok(conn);
    }
    // Pinned (SCRIPT LOAD), so that a busy shared server's EVAL cache
    // cannot evict them; loaded again after any NOSCRIPT. A refusal (an ACL
    // without SCRIPT) leaves the EVAL fallback to cover every call.
    conn.scripts().set_catalogue(
        crate::transport::scripts::catalogue,
        crate::metrics::script_fallback,
    );
    let _ = conn.scripts().pin(&conn).await;
    Ok(conn)
}

/// Says on the server who the client is (when `config.announce`), before its
/// first hold: a refusal (an ACL) is a warning, not a failure to connect.
async fn announce(
    config: &Config,
    identity: &crate::engine::identity::Identity,
    conn: &Conn,
    warnings: &mut Vec<String>,
) -> Option<crate::engine::identity::Announcement> {
    if !config.announce {
        return None;
    }
    let announcement =
        crate::engine::identity::Announcement::new(identity, config.lock_watchdog_timeout);
    if let Err(e) = announcement.refresh(&mut conn.clone()).await {
        warnings.push(format!(
            "this client could not announce who it is (the inspector will not name it): {e}"
        ));
    }
    Some(announcement)
}

/// How much longer than one command's timeout a dropped client keeps sending
/// queued releases.
const DRAIN_SLACK: std::time::Duration = std::time::Duration::from_millis(250);
