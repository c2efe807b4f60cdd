//! Replica sync: making sure a replica has a write before relying on it (Redis
//! `WAIT`), as Redisson's `syncSlaves` does.
//!
//! `WAIT` parks the connection it is sent on until the replicas acknowledge,
//! up to its timeout, and the client's connection carries every task's
//! commands: sent there, one lagging replica stalled every acquire, renewal
//! and release of the client for up to the sync's timeout. So the `WAIT`s go
//! on a connection of their own ([`ReplicaSync`]), opened when first needed;
//! they queue only behind each other there (they wait on the same replicas),
//! and many are answered by one acknowledgement.
//!
//! `WAIT` counts the writes of the connection it runs on (a connection that
//! wrote nothing is "acknowledged" at once: measured on Redis 6.2 with the
//! replica frozen). So a write goes first on it, in the same pipeline, which
//! the server runs after the acquire (whose reply came before), and the
//! `WAIT` covers everything up to it. For an acquire that write is
//! `replica_fence.lua`, which also finds the hold on the server the
//! connection reaches (after a failover, perhaps not the one the acquire
//! reached); for a release or renewals, a `PUBLISH` to a channel of this
//! crate's, which outside a cluster is replicated.
//!
//! In a cluster, `WAIT` counts the writes of the one node it is sent to, so
//! each confirmation's fence and `WAIT` go to the primary serving its hold's
//! slot (a pipeline goes to the node of its keys), one pipeline per slot; a
//! release's or renewals' best-effort sync, which names no hold, is not sent
//! there.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;

use crate::config::Durability;
use crate::error::{Error, Result};
use crate::transport::background::Spawner;
use crate::transport::conn::Conn;
use crate::transport::durability::{in_words, probe, refused, Plan, Wanted};
#[cfg(feature = "cluster")]
use crate::transport::keys::{cluster_slot, Slot};
use crate::transport::pubsub::EpochReader;

/// How soon a server found unable to give the durability asked for is asked
/// again (by the next sync after it).
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// The fence an acquire's `WAIT` follows (see the module doc), without its
/// comments. Sent as EVAL: one round trip with its `WAIT`, never refused
/// with NOSCRIPT.
static FENCE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/replica_fence.lua"
    ))
    .lines()
    .filter(|line| !line.trim_start().starts_with("--") && !line.trim().is_empty())
    .collect::<Vec<_>>()
    .join("\n")
});

/// The channel a release's or renewal's `WAIT` is fenced by: nobody listens.
const FENCE_CHANNEL: &str = "redisson_locks__replica_fence";

/// Opens one more connection like the client's.
pub(crate) type OpenLink =
    Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Conn>> + Send>> + Send + Sync>;

/// Replica sync for one client: how many replicas must acknowledge, for how
/// long, and the connection its `WAIT`s go on. Cheap to clone.
///
/// `WAIT`s on one connection run one after another, each a round trip to the
/// replicas; so the confirmations asked while one is out are sent together
/// when it comes back, each hold's fence and then one `WAIT`, which covers
/// them all (a group commit): 64 tasks confirming at once cost a few round
/// trips to the replicas, not 64.
#[derive(Clone)]
pub(crate) struct ReplicaSync {
    inner: Arc<Inner>,
}

struct Inner {
    /// What the configuration asks for.
    wanted: Wanted,
    /// Replicas connected at connect time: the default's count.
    auto: Option<u32>,
    /// Whether sync can ever be on: off for good without a probe otherwise.
    may_sync: bool,
    /// The servers are a cluster: a release's or renewals' sync, which
    /// names no hold, has no node to go to, and is not sent.
    cluster: bool,
    /// What is sent now, as the last probe of the server found it.
    probed: Mutex<Probed>,
    /// One probe at a time.
    probing: tokio::sync::Mutex<()>,
    /// The client's connection epoch: a change (a reconnect, a Sentinel
    /// failover) may mean another server, so it is asked again.
    epoch: EpochReader,
    timeout_ms: u64,
    open: OpenLink,
    /// Where the batches are sent from: a confirmation dropped by its caller
    /// leaves the batch it is in to finish for the others.
    spawner: Spawner,
    /// Acquires' confirmations, and releases' and renewals' best-effort
    /// syncs, each on a connection of its own: a release's `WAIT` must not
    /// hold back the confirmation of the acquire its release let in.
    lanes: [Lane; 2],
}

/// One connection's `WAIT`s.
#[derive(Default)]
struct Lane {
    /// Opened by the first `WAIT` (a reconnecting connection).
    link: tokio::sync::OnceCell<Conn>,
    /// What waits for the next `WAIT`, and whether one is out.
    next: Mutex<Next>,
}

impl Lane {
    fn next(&self) -> std::sync::MutexGuard<'_, Next> {
        self.next.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The lane of an ask for `hold` (none: a release's or renewals' sync).
fn lane_of(hold: &Option<(String, String)>) -> usize {
    usize::from(hold.is_none())
}

/// The plan found by the last probe, or why the mode asked for cannot be had;
/// with the connection epoch and the instant it was found at.
struct Probed {
    plan: std::result::Result<Plan, String>,
    epoch: u64,
    at: Instant,
}

#[derive(Default)]
struct Next {
    sending: bool,
    asks: Vec<Ask>,
}

/// One confirmation waiting for the next batch.
struct Ask {
    /// The hold's lock and count field; none for a release's or renewals'
    /// best-effort sync.
    hold: Option<(String, String)>,
    answer: tokio::sync::oneshot::Sender<Result<bool>>,
}

impl std::fmt::Debug for ReplicaSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSync")
            .field("wanted", &self.inner.wanted)
            .field("plan", &self.inner.probed().plan)
            .finish()
    }
}

/// What [`ReplicaSync::new`] starts from: the configuration's wish, the
/// replicas connected at connect time and the plan found then.
pub(crate) struct Start {
    pub(crate) wanted: Wanted,
    pub(crate) auto: Option<u32>,
    pub(crate) plan: Plan,
    pub(crate) may_sync: bool,
    pub(crate) cluster: bool,
}

impl ReplicaSync {
    /// Sync as `start` says, each `WAIT` at most `timeout_ms`, on a
    /// connection `open` makes when first needed; batches sent from
    /// `spawner`; the server asked again when `epoch` moves.
    pub(crate) fn new(
        start: Start,
        timeout_ms: u64,
        open: OpenLink,
        spawner: Spawner,
        epoch: EpochReader,
    ) -> Self {
        ReplicaSync {
            inner: Arc::new(Inner {
                wanted: start.wanted,
                auto: start.auto,
                may_sync: start.may_sync,
                cluster: start.cluster,
                probed: Mutex::new(Probed {
                    plan: Ok(start.plan),
                    epoch: epoch.now(),
                    at: Instant::now(),
                }),
                probing: tokio::sync::Mutex::new(()),
                epoch,
                timeout_ms,
                open,
                spawner,
                lanes: Default::default(),
            }),
        }
    }

    /// How many replicas must acknowledge now; 0 when sync is off.
    pub(crate) fn replicas(&self) -> u32 {
        match self.inner.probed().plan {
            Ok(plan) => plan.replicas(),
            Err(_) => self.inner.wanted.replicas.unwrap_or(1),
        }
    }

    /// The mode in force now; `None` when nothing is waited for.
    pub(crate) fn durability(&self) -> Option<Durability> {
        match self.inner.probed().plan {
            Ok(Plan::On { mode, .. }) => Some(mode),
            Ok(Plan::Off) => None,
            Err(_) => Some(self.inner.wanted.mode),
        }
    }

    /// Whether an acquire must be confirmed ([`confirm_hold`](Self::confirm_hold)):
    /// sync is on, or the server was found unable to give it (the
    /// confirmation says so, and asks again).
    /// After a change of connection it counts as on until the confirmation
    /// asks the server again (and, finding sync off, sends nothing).
    pub(crate) fn is_on(&self) -> bool {
        if !self.inner.may_sync {
            return false;
        }
        let probed = self.inner.probed();
        probed.plan != Ok(Plan::Off) || probed.epoch != self.inner.epoch.now()
    }

    /// Waits until the replicas acknowledged the hold `field` of lock `name`
    /// (and every write before it), or the timeout passed: whether enough did
    /// (and the primary's file has it, under [`Durability::Aof`]). `false`
    /// when the hold is not on the server the `WAIT`s' connection reaches.
    ///
    /// # Cancel safety
    /// Cancel safe: the batch it joined is sent all the same, for the others.
    pub(crate) async fn confirm_hold(&self, name: &str, field: &str) -> Result<bool> {
        self.ask(Some((name.to_owned(), field.to_owned()))).await
    }

    /// Best effort, after a release or renewals: waits until the replicas
    /// acknowledged every write before now, or the timeout passed. A lost
    /// release or renewal costs liveness (the hold lives on until its lease
    /// ends), never exclusion, so a failure is only logged.
    pub(crate) async fn quietly(&self) {
        // Best effort, on what is known: a release never asks the server
        // again (a client closing must not probe it on its way out).
        let inner = &self.inner;
        if !inner.may_sync || inner.cluster || inner.probed().plan == Ok(Plan::Off) {
            return;
        }
        if let Err(e) = self.ask(None).await {
            crate::trace::debug_event!("replica sync after a release or renewal: {e}");
        }
    }

    /// Sends its own fence and `WAIT` when none is out (the common case of
    /// one confirmation at a time, with no task between); otherwise joins the
    /// next batch, which the one out sends when it comes back.
    async fn ask(&self, hold: Option<(String, String)>) -> Result<bool> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let lane = lane_of(&hold);
        let lead = {
            let mut next = self.inner.lanes[lane].next();
            if next.sending {
                next.asks.push(Ask {
                    hold: hold.clone(),
                    answer,
                });
            }
            !std::mem::replace(&mut next.sending, true)
        };
        if !lead {
            return answered
                .await
                .map_err(|_| Error::unexpected("replica sync", "its sender ended"))?;
        }
        let leading = Leading(self.inner.clone(), lane);
        let mine = self
            .inner
            .send_batch(lane, std::slice::from_ref(&hold))
            .await;
        drop(leading);
        mine.into_iter()
            .next()
            .unwrap_or_else(|| Err(Error::unexpected("replica sync", "no answer")))
    }
}

/// The ask that sent its own batch: when it is done (or dropped half way),
/// the asks that queued meanwhile are sent from a task of their own.
struct Leading(Arc<Inner>, usize);

impl Drop for Leading {
    fn drop(&mut self) {
        let lane = self.1;
        let mut next = self.0.lanes[lane].next();
        if next.asks.is_empty() {
            next.sending = false;
            return;
        }
        drop(next);
        let inner = self.0.clone();
        self.0
            .spawner
            .spawn(async move { inner.send_batches(lane).await });
    }
}

impl Inner {
    /// Sends what waits in `lane`, one batch at a time, until nothing does.
    async fn send_batches(self: Arc<Self>, lane: usize) {
        loop {
            let asks = {
                let mut next = self.lanes[lane].next();
                if next.asks.is_empty() {
                    next.sending = false;
                    return;
                }
                std::mem::take(&mut next.asks)
            };
            let holds: Vec<_> = asks.iter().map(|ask| ask.hold.clone()).collect();
            let answers = self.send_batch(lane, &holds).await;
            for (ask, answer) in asks.into_iter().zip(answers) {
                let _ = ask.answer.send(answer);
            }
        }
    }

    /// One pipeline: each hold's fence (a release's: one `PUBLISH`), then one
    /// `WAIT` (or `WAITAOF`); what it says for each ask. The server is asked
    /// first what it supports when the client's connection changed since the
    /// last time, and again when it refuses the command.
    async fn send_batch(
        &self,
        lane: usize,
        asks: &[Option<(String, String)>],
    ) -> Vec<Result<bool>> {
        let quiet = lane == lane_of(&None);
        let link = match self.lanes[lane]
            .link
            .get_or_try_init(|| (self.open)())
            .await
        {
            Ok(link) => link,
            // Nothing was to be sent if sync is off (a confirmation after a
            // change of connection, which would have asked the server again).
            Err(_) if self.probed().plan == Ok(Plan::Off) => {
                return asks.iter().map(|_| Ok(true)).collect()
            }
            Err(e) => return asks.iter().map(|_| Err(e.clone())).collect(),
        };
        // Only a confirmation asks again after a change of connection: a
        // release's or renewals' sync is best effort, and a client closing
        // must not probe the server on its way out.
        let plan = match quiet {
            true => self.probed().plan.clone(),
            false => self.plan_now(link, false).await,
        };
        let Some(command) = plan
            .as_ref()
            .ok()
            .and_then(|plan| plan.command(self.timeout_ms))
        else {
            return self.answer_without_sync(asks, &plan);
        };
        let plan = plan.unwrap_or(Plan::Off);
        if !link.is_cluster() {
            return self.send_group(link, quiet, plan, &command, asks).await;
        }
        // A cluster: only confirmations come here (a release's or renewals'
        // sync names no hold, so no node, and `quietly` sends none there).
        // Each hold's fence and a `WAIT` go to the primary that took it: one
        // pipeline per slot (a pipeline goes to the node of its keys), the
        // slots' pipelines at once.
        let groups = by_slot(asks);
        let sent = futures_util::future::join_all(groups.iter().map(|members| {
            let group: Vec<_> = members.iter().map(|&at| asks[at].clone()).collect();
            let command = command.clone();
            async move { self.send_group(link, quiet, plan, &command, &group).await }
        }))
        .await;
        let mut answers: Vec<Option<Result<bool>>> = asks.iter().map(|_| None).collect();
        for (members, group_answers) in groups.iter().zip(sent) {
            for (&at, answer) in members.iter().zip(group_answers) {
                answers[at] = Some(answer);
            }
        }
        answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| Err(Error::unexpected("replica sync", "no answer")))
            })
            .collect()
    }

    /// One pipeline to one server: each hold's fence (a release's: one
    /// `PUBLISH`), then `command`; what it says for each ask.
    async fn send_group(
        &self,
        link: &Conn,
        quiet: bool,
        plan: Plan,
        command: &redis::Cmd,
        asks: &[Option<(String, String)>],
    ) -> Vec<Result<bool>> {
        let mut pipe = redis::pipe();
        for hold in asks {
            match hold {
                Some((name, field)) => pipe.cmd("EVAL").arg(&*FENCE).arg(1).arg(name).arg(field),
                None => pipe.cmd("PUBLISH").arg(FENCE_CHANNEL).arg(""),
            };
        }
        pipe.add_command(command.clone());
        let replies: Result<Vec<Value>> = pipe
            .query_async(&mut link.clone())
            .await
            .map_err(Error::redis);
        let replies = match replies {
            Ok(replies) if replies.len() == asks.len() + 1 => replies,
            Ok(other) => {
                let e = Error::unexpected("replica sync", other);
                return asks.iter().map(|_| Err(e.clone())).collect();
            }
            Err(e) if refused(&e) && !quiet => return self.after_refusal(link, asks, e).await,
            Err(e) => return asks.iter().map(|_| Err(e.clone())).collect(),
        };
        let enough = match replies.last() {
            Some(Value::ServerError(refusal)) => {
                let e = Error::unexpected(self.wanted.mode.command(), refusal);
                return match quiet {
                    true => asks.iter().map(|_| Err(e.clone())).collect(),
                    false => self.after_refusal(link, asks, e).await,
                };
            }
            Some(reply) => plan.satisfied_by(reply),
            None => Err(Error::unexpected("replica sync", "no reply")),
        };
        asks.iter()
            .zip(&replies)
            .map(|(hold, fenced)| match (hold, fenced, &enough) {
                (_, _, Err(e)) => Err(e.clone()),
                // The hold is not on this server: nothing confirms it.
                (Some(_), Value::Int(0), Ok(_)) => Ok(false),
                (Some(_), Value::Int(1), Ok(enough)) | (None, _, Ok(enough)) => Ok(*enough),
                (Some(_), other, Ok(_)) => Err(Error::unexpected("replica sync", other)),
            })
            .collect()
    }

    /// The answers when nothing is sent: confirmed when sync is off (the
    /// default's, on a server found to refuse `WAIT`), refused with the reason
    /// when the mode asked for cannot be had.
    fn answer_without_sync(
        &self,
        asks: &[Option<(String, String)>],
        plan: &std::result::Result<Plan, String>,
    ) -> Vec<Result<bool>> {
        asks.iter()
            .map(|hold| match plan {
                Ok(_) => Ok(true),
                Err(reason) => Err(Error::DurabilityUnavailable {
                    name: hold
                        .as_ref()
                        .map(|(name, _)| name.clone())
                        .unwrap_or_default(),
                    durability: self.wanted.mode,
                    reason: reason.clone(),
                }),
            })
            .collect()
    }

    /// The server refused the sync's command (`e`): asked again what it
    /// supports, the answers are what that finds, never the raw refusal
    /// (an "unknown command" says nothing a user can act on).
    async fn after_refusal(
        &self,
        link: &Conn,
        asks: &[Option<(String, String)>],
        e: Error,
    ) -> Vec<Result<bool>> {
        match self.plan_now(link, true).await {
            // The server still says it supports the command (or was asked a
            // moment ago): the refusal itself is the reason.
            Ok(Plan::On { mode, .. }) => {
                let reason = format!(
                    "the server refused {}: {}",
                    mode.command(),
                    in_words(&e.to_string())
                );
                self.answer_without_sync(asks, &Err(reason))
            }
            plan => self.answer_without_sync(asks, &plan),
        }
    }

    /// The plan for the server `link` reaches: the last one found, unless the
    /// client's connection changed since, the mode could not be had a while
    /// ago, or `again` asks for a fresh look (a refusal; at most once per
    /// [`ASK_AGAIN_AFTER`] on one connection).
    async fn plan_now(&self, link: &Conn, again: bool) -> std::result::Result<Plan, String> {
        let epoch = self.epoch.now();
        let fresh = |probed: &Probed| {
            let recent = probed.at.elapsed() < ASK_AGAIN_AFTER;
            probed.epoch == epoch && (recent || (probed.plan.is_ok() && !again))
        };
        let started = Instant::now();
        {
            let probed = self.probed();
            if !self.may_sync || fresh(&probed) {
                return probed.plan.clone();
            }
        }
        let _one = self.probing.lock().await;
        {
            // Another sync asked while this one queued for the probe.
            let probed = self.probed();
            if probed.at > started && fresh(&probed) {
                return probed.plan.clone();
            }
        }
        let found = match probe(link, some_primary(link).await).await {
            Ok(support) => match self.wanted.plan(&support, self.auto) {
                Ok((plan, warning)) => {
                    if let Some(warning) = warning {
                        crate::trace::warn_event!("replica sync: {warning}");
                    }
                    Ok(plan)
                }
                Err(reason) => {
                    crate::trace::warn_event!("replica sync: {reason}");
                    Err(reason)
                }
            },
            // Could not ask: the next sync asks again.
            Err(e) => {
                crate::trace::debug_event!("replica sync: asking the server what it supports: {e}");
                return self.probed().plan.clone();
            }
        };
        *self.probed.lock().unwrap_or_else(|p| p.into_inner()) = Probed {
            plan: found.clone(),
            epoch,
            at: Instant::now(),
        };
        found
    }

    fn probed(&self) -> std::sync::MutexGuard<'_, Probed> {
        self.probed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The asks' places grouped by the slot of their hold (in a cluster, one
/// pipeline goes to the node of one slot).
#[cfg(feature = "cluster")]
fn by_slot(asks: &[Option<(String, String)>]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(Slot, Vec<usize>)> = Vec::new();
    for (at, hold) in asks.iter().enumerate() {
        let slot = cluster_slot(hold.as_ref().map_or("", |(name, _)| name.as_str()));
        match groups.iter_mut().find(|(of, _)| *of == slot) {
            Some((_, members)) => members.push(at),
            None => groups.push((slot, vec![at])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

/// Without Cluster support there is one server: one group.
#[cfg(not(feature = "cluster"))]
fn by_slot(asks: &[Option<(String, String)>]) -> Vec<Vec<usize>> {
    vec![(0..asks.len()).collect()]
}

/// A primary of `conn`'s cluster to ask what the servers support (one slot
/// it serves); `None` outside a cluster, or when none can be named (then
/// the question goes where the driver sends it).
async fn some_primary(conn: &Conn) -> Option<u16> {
    if !conn.is_cluster() {
        return None;
    }
    conn.primaries()
        .await
        .ok()
        .and_then(|(slots, _)| slots.into_iter().flatten().next())
}

/// How replica sync starts on the server `conn` reaches, for `config`: what it
/// sends after each acquire, with a warning for the user when that is less
/// than asked. [`Error::Config`] when the server cannot give the durability
/// asked for (the message says why, and how to fix it). In a cluster, one
/// primary is asked (the others are taken to be alike, as the nodes of one
/// cluster are), and each acquire's `WAIT` goes to the primary that took it.
pub(crate) async fn start_on(
    config: &crate::Config,
    conn: &Conn,
) -> Result<(Start, Option<String>)> {
    let wanted = Wanted {
        mode: config.durability,
        replicas: config.replica_sync,
        timeout: Duration::from_millis(config.effective_replica_sync_timeout_ms()),
    };
    let nothing_asked = config.replica_sync == Some(0) && !config.durability.local();
    if nothing_asked {
        let start = Start {
            wanted,
            auto: None,
            plan: Plan::Off,
            may_sync: false,
            cluster: conn.is_cluster(),
        };
        return Ok((start, None));
    }
    let support = probe(conn, some_primary(conn).await).await?;
    let (plan, warning) = wanted
        .plan(&support, support.replicas)
        .map_err(Error::Config)?;
    // The count is fixed at connect time; only what the server supports may
    // change (and turn sync on or off).
    let replicas = config
        .replica_sync
        .unwrap_or_else(|| support.replicas.unwrap_or(0).min(1));
    let start = Start {
        wanted,
        auto: support.replicas,
        plan,
        may_sync: replicas > 0 || config.durability.local(),
        cluster: conn.is_cluster(),
    };
    Ok((start, warning))
}
