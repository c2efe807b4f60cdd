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

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use redis::Value;

use crate::error::{Error, Result};
use crate::transport::background::Spawner;
use crate::transport::conn::Conn;

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
    replicas: u32,
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
    answer: tokio::sync::oneshot::Sender<Result<u32>>,
}

impl std::fmt::Debug for ReplicaSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSync")
            .field("replicas", &self.inner.replicas)
            .field("timeout_ms", &self.inner.timeout_ms)
            .finish()
    }
}

impl ReplicaSync {
    /// Sync with `replicas` (0: off), each `WAIT` at most `timeout_ms`, on a
    /// connection `open` makes when first needed; batches sent from
    /// `spawner`.
    pub(crate) fn new(replicas: u32, timeout_ms: u64, open: OpenLink, spawner: Spawner) -> Self {
        ReplicaSync {
            inner: Arc::new(Inner {
                replicas,
                timeout_ms,
                open,
                spawner,
                lanes: Default::default(),
            }),
        }
    }

    /// How many replicas must acknowledge; 0 when sync is off.
    pub(crate) fn replicas(&self) -> u32 {
        self.inner.replicas
    }

    /// Waits until the replicas acknowledged the hold `field` of lock `name`
    /// (and every write before it), or the timeout passed: how many did. 0 when
    /// the hold is not on the server the `WAIT`s' connection reaches.
    ///
    /// # Cancel safety
    /// Cancel safe: the batch it joined is sent all the same, for the others.
    pub(crate) async fn confirm_hold(&self, name: &str, field: &str) -> Result<u32> {
        self.ask(Some((name.to_owned(), field.to_owned()))).await
    }

    /// Best effort, after a release or renewals: waits until the replicas
    /// acknowledged every write before now, or the timeout passed. A lost
    /// release or renewal costs liveness (the hold lives on until its lease
    /// ends), never exclusion, so a failure is only logged.
    pub(crate) async fn quietly(&self) {
        if self.inner.replicas == 0 {
            return;
        }
        if let Err(e) = self.ask(None).await {
            crate::trace::debug_event!("replica sync after a release or renewal: {e}");
        }
    }

    /// Sends its own fence and `WAIT` when none is out (the common case of
    /// one confirmation at a time, with no task between); otherwise joins the
    /// next batch, which the one out sends when it comes back.
    async fn ask(&self, hold: Option<(String, String)>) -> Result<u32> {
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
    /// `WAIT`; what it says for each ask.
    async fn send_batch(&self, lane: usize, asks: &[Option<(String, String)>]) -> Vec<Result<u32>> {
        let mut pipe = redis::pipe();
        for hold in asks {
            match hold {
                Some((name, field)) => pipe.cmd("EVAL").arg(&*FENCE).arg(1).arg(name).arg(field),
                None => pipe.cmd("PUBLISH").arg(FENCE_CHANNEL).arg(""),
            };
        }
        pipe.cmd("WAIT").arg(self.replicas).arg(self.timeout_ms);
        let replies: Result<Vec<Value>> = async {
            let link = self.lanes[lane]
                .link
                .get_or_try_init(|| (self.open)())
                .await?;
            pipe.query_async(&mut link.clone())
                .await
                .map_err(Error::redis)
        }
        .await;
        let replies = match replies {
            Ok(replies) if replies.len() == asks.len() + 1 => replies,
            Ok(other) => {
                let e = Error::unexpected("replica sync", other);
                return asks.iter().map(|_| Err(e.clone())).collect();
            }
            Err(e) => return asks.iter().map(|_| Err(e.clone())).collect(),
        };
        let acked = match replies.last() {
            Some(Value::Int(acked)) => {
                u32::try_from(*acked).map_err(|_| Error::unexpected("WAIT", acked))
            }
            other => Err(Error::unexpected("WAIT", other)),
        };
        asks.iter()
            .zip(&replies)
            .map(|(hold, fenced)| match (hold, fenced, &acked) {
                (_, _, Err(e)) => Err(e.clone()),
                // The hold is not on this server: nothing confirms it.
                (Some(_), Value::Int(0), Ok(_)) => Ok(0),
                (Some(_), Value::Int(1), Ok(acked)) | (None, _, Ok(acked)) => Ok(*acked),
                (Some(_), other, Ok(_)) => Err(Error::unexpected("replica sync", other)),
            })
            .collect()
    }
}

/// How many replicas must acknowledge each acquire: the configured number, or
/// (by default) one when the server has replicas connected right now, else none.
/// Never in cluster mode (WAIT would have to reach the node that took each write).
/// The second value is a warning when the server could not be asked.
pub(crate) async fn replicas_to_sync(
    configured: Option<u32>,
    conn: &mut Conn,
) -> (u32, Option<String>) {
    if conn.is_cluster() {
        return (0, None);
    }
    if let Some(n) = configured {
        return (n, None);
    }
    let info: redis::RedisResult<String> = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await;
    let connected = info.ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| crate::numeral::decimal::<u32>(n.trim()))
    });
    match connected {
        Some(n) => (n.min(1), None),
        None => (
            0,
            Some(
                "could not read INFO replication: replica sync is off; set \
                 Config::replica_sync to require replica acknowledgements"
                    .to_owned(),
            ),
        ),
    }
}
