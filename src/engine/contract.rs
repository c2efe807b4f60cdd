//! The engine's contracts: what a lock kind answers for one acquisition (its
//! target, its scripts, how its holds are renewed), and how long a hold lasts
//! and a waiter waits. A leaf: it names no engine part, so every part (the wait
//! loop, the ledger, the watchdog) and every kind can depend on it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::MAX_DURATION;
use crate::error::{Error, Result};
use crate::metrics::Labels;
use crate::transport::conn::Conn;
use crate::transport::keys;
use crate::transport::pubsub::Class;
use crate::transport::scripts::{Busy, Released};

/// A boxed future, as the lock kinds return from [`Acquirer`].
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What one acquisition is about: which lock, for which owner, the channel
/// whose messages announce that trying again may succeed, and the labels its
/// measurements carry (feature `metrics`; zero-sized without it), so that
/// every engine part that handles the acquisition can measure it.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    /// The owner field, `<client-uuid>:<id>` (its exact length: one per
    /// waiter).
    pub(crate) owner: Box<str>,
    channel_of: ChannelOf,
    /// Named when first asked for: a waiter parked in its client's line never
    /// listens, and so never pays for the name (a fair waiter's is its own,
    /// about 150 bytes).
    channel: OnceLock<Box<str>>,
    pub(crate) labels: Labels,
}

/// Which channel a kind's waiters listen on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChannelOf {
    /// The lock's own, `redisson_lock__channel:{name}`.
    Lock,
    /// A read-write lock's, `redisson_rwlock:{name}`, shared by both sides.
    ReadWrite,
    /// One fair waiter's own: the lock's, then `:<owner>`.
    FairWaiter,
}

impl Target {
    pub(crate) fn new(
        name: Arc<str>,
        owner: String,
        channel_of: ChannelOf,
        labels: Labels,
    ) -> Self {
        Target {
            name,
            owner: owner.into_boxed_str(),
            channel_of,
            channel: OnceLock::new(),
            labels,
        }
    }

    /// The channel whose messages announce that trying again may succeed.
    pub(crate) fn channel(&self) -> &str {
        self.channel.get_or_init(|| {
            match self.channel_of {
                ChannelOf::Lock => keys::lock_channel(&self.name),
                ChannelOf::ReadWrite => keys::rwlock_channel(&self.name),
                ChannelOf::FairWaiter => keys::fair_waiter_channel(&self.name, &self.owner),
            }
            .into_boxed_str()
        })
    }
}

/// The lock-kind specific half of acquiring: the scripts, the channel to wait on.
pub(crate) trait Acquirer: std::fmt::Debug + Send + Sync + 'static {
    /// The lock, owner and channel.
    fn target(&self) -> &Target;
    /// The lock's name, for watchdog registration.
    fn name(&self) -> &str {
        &self.target().name
    }
    /// The owner field acquiring.
    fn owner(&self) -> &str {
        &self.target().owner
    }
    /// The hash field that counts this owner's holds, and how the watchdog renews
    /// them.
    fn renewal(&self) -> (&str, RenewKind) {
        (self.owner(), RenewKind::HashField)
    }
    /// The hash field whose integer is this owner's hold count (what a settle
    /// compares with its belief).
    fn count_field(&self) -> &str {
        self.renewal().0
    }
    /// The channel whose messages announce that trying again may succeed.
    fn channel(&self) -> &str {
        self.target().channel()
    }
    /// How this kind's waiters wait (see [`Waits`]): stated once, read once.
    fn waits(&self) -> Waits {
        Waits::LISTENING
    }
    /// One atomic attempt: acquired, with what it drew, or busy. With `queue`,
    /// a fair lock keeps (or takes) the caller's place in line.
    fn attempt(
        self: Arc<Self>,
        conn: Conn,
        lease_ms: u64,
        queue: bool,
    ) -> BoxFuture<Result<Outcome>>;
    /// Releases one hold of this owner, restarting the lease of any that remain
    /// with `lease_ms` (never shortening it).
    fn release(self: Arc<Self>, conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>>;
    /// Releases one hold as [`release`](Acquirer::release) does, and when
    /// that frees the lock and `heir` (this client's next waiter: its owner
    /// field and lease) is first in line, grants the lock to it
    /// ([`Released::Granted`]). Only the fair lock grants; the others release.
    fn release_to(
        self: Arc<Self>,
        conn: Conn,
        lease_ms: u64,
        heir: Option<(Arc<str>, u64)>,
    ) -> BoxFuture<Result<Released>> {
        let _ = heir;
        self.release(conn, lease_ms)
    }
    /// From now on, a hold this owner finds when it tries is a grant made to
    /// it by its client's release: acquired, not one more. Only the fair lock
    /// is granted to, and only a waiter made for one acquisition says this.
    fn accept_grants(&self) {}
    /// Leaves the queue, or the order of waiting clients. Only called for a
    /// kind whose busy attempts [leave a place](Waits::leaves_a_place).
    fn abandon(self: Arc<Self>, _conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// How a kind's waiters wait: what the engine would otherwise ask a kind in
/// many places, answered once by [`Acquirer::waits`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waits {
    /// A shared hold (a read) or an exclusive one: which wake-ups concern the
    /// waiter.
    pub(crate) class: Class,
    /// What the waiter does between two attempts.
    pub(crate) between: Between,
    /// This client's waiters wait in a local line, one at a time in Redis
    /// (see `Lines::enter`): for the non-fair exclusive kinds that sleep on
    /// messages.
    pub(crate) local_line: bool,
    /// Its waiters keep the lock's order of this crate's clients (the
    /// reentrant locks and the write lock, see `order_common.lua`): a busy reply says how many
    /// clients wait ahead, and a waiter that gives up leaves the order
    /// ([`Acquirer::abandon`]).
    pub(crate) ordered: bool,
}

/// What a waiter does between two attempts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Between {
    /// Sleeps on the kind's channel until woken, at most the busy TTL.
    Listens,
    /// The same, holding a place in a queue kept in Redis (the fair lock),
    /// which a waiter that gives up leaves ([`Acquirer::abandon`]); it sleeps at
    /// most `max_sleep`, whatever the TTL says.
    Queues { max_sleep: Duration },
    /// Backs off and retries, on no channel (the spin lock).
    Spins(crate::engine::backoff::BackOff),
}

impl Waits {
    /// An exclusive waiter sleeping on its channel, in Redis.
    pub(crate) const LISTENING: Waits = Waits {
        class: Class::Exclusive,
        between: Between::Listens,
        local_line: false,
        ordered: false,
    };

    /// Does a busy attempt leave a queue place that a waiter giving up must
    /// leave?
    pub(crate) fn queues(&self) -> bool {
        matches!(self.between, Between::Queues { .. })
    }

    /// Does a busy attempt leave a place (in a queue, or in an order of
    /// clients) that a waiter giving up leaves ([`Acquirer::abandon`])?
    pub(crate) fn leaves_a_place(&self) -> bool {
        self.queues() || self.ordered
    }

    /// The longest sleep between attempts, whatever the TTL says.
    pub(crate) fn max_sleep(&self) -> Option<Duration> {
        match self.between {
            Between::Queues { max_sleep } => Some(max_sleep),
            Between::Listens | Between::Spins(_) => None,
        }
    }

    /// Exclusive, sleeping on messages, in no queue: whoever asks first after
    /// a release gets it, so the hand-off window and the wake jitter concern it.
    pub(crate) fn barges(&self) -> bool {
        self.class == Class::Exclusive && matches!(self.between, Between::Listens)
    }
}

/// What one attempt came to: acquired, with what it drew, or busy (the TTL the
/// script answered, and the waiter's place in its lock's order, see [`Busy`]).
pub(crate) type Outcome = std::result::Result<Drawn, Busy>;

/// What an acquisition drew besides the hold: a kind's capabilities come back
/// as values with the attempt that took the hold (a fencing token), never
/// through state kept in the kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Drawn {
    /// The fencing token (the fenced lock only): greater than every token
    /// drawn before for the lock's name.
    pub(crate) token: Option<u64>,
}

/// The outcome of a script that answers `None` when it took the hold and draws
/// nothing else.
pub(crate) fn plain(reply: Option<impl Into<Busy>>) -> Outcome {
    reply.map_or(Ok(Drawn::default()), |busy| Err(busy.into()))
}

/// How long a hold lasts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lease {
    /// The watchdog timeout, renewed while held.
    Watchdog,
    /// Exactly this long; never renewed.
    Fixed(Duration),
}

/// How long to keep trying.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt; never queues.
    Once,
    /// Until this much time has passed.
    For(Duration),
    /// Until acquired.
    Forever,
}

impl Wait {
    /// A single try: it gives up at the first busy reply, which is not a wait
    /// that ran out (a zero wait is one try, see [`start`](Wait::start)).
    pub(crate) fn is_one_off(self) -> bool {
        match self {
            Wait::Once => true,
            Wait::For(limit) => limit.is_zero(),
            Wait::Forever => false,
        }
    }

    /// The wait as the loops run it, and its deadline: a zero wait is one try
    /// (Java's `tryLock(0, ...)`) and never queues; an absurd one is refused.
    pub(crate) fn start(self) -> Result<(Wait, Option<Instant>)> {
        match self {
            Wait::For(limit) if limit.is_zero() => Ok((Wait::Once, None)),
            Wait::For(limit) => {
                validate_wait(limit)?;
                Ok((self, Some(Instant::now() + limit)))
            }
            Wait::Once | Wait::Forever => Ok((self, None)),
        }
    }
}

/// How a hold is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) enum RenewKind {
    /// A hash field counting holds (reentrant, fair, write): extend the hash.
    #[default]
    HashField,
    /// A reader's holds of a read-write lock: extend its hold keys and the hash.
    ReadHolds,
    /// A single-hash multi-lock hold (field: [`scripts::group_hold`]): extend the
    /// owner's hold of every member, and the hash.
    GroupMembers,
    /// A permit of a permit-expirable semaphore (name: the semaphore, field:
    /// the permit id in hex): move its score in `{name}:timeout` later.
    Permit,
    /// A hold of a fair semaphore's permits (name: the semaphore, field: the
    /// hold id): move its lease end later.
    FairPermits,
}

/// Checks a wait time before any I/O.
pub(crate) fn validate_wait(wait: Duration) -> Result<()> {
    if wait > MAX_DURATION {
        return Err(Error::invalid(format!(
            "wait time of {wait:?} exceeds the maximum of {} s",
            MAX_DURATION.as_secs()
        )));
    }
    Ok(())
}
