//! The reentrant lock's scripts: whoever asks first after a release gets it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::kind::LockKind;
use crate::engine::backoff::BackOff;
use crate::engine::contract::{
    plain, Acquirer, Between, BoxFuture, ChannelOf, Outcome, Target, Wait, Waits,
};
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::{kind, Kind, Labels};
use crate::transport::conn::Conn;
use crate::transport::keys::lock_channel;
use crate::transport::scripts::{self, InOrder, Notify, Order, Reentry, Released};

/// How long a release's turn keeps a free lock for the client it names (see
/// `lock_release.lua`): the time that client's waiter has, from the release,
/// to hear the message and try. A client that never comes (gone, stalled)
/// costs its lock this much once, and then has lost its place.
pub(crate) const TURN: std::time::Duration = std::time::Duration::from_millis(20);

/// The shortest time a lock's order of waiting clients lives untouched; at
/// least three re-check intervals, since every waiter tries at least that
/// often (and so keeps it).
const ORDER_KEPT_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(10);

/// The reentrant lock (Redisson `getLock`): whoever asks first after a release
/// gets it.
#[derive(Debug)]
pub(crate) struct Reentrant;

impl LockKind for Reentrant {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        let ops = ReentrantOps::new(name.clone(), owner, Reentry::Allowed, labels);
        Arc::new(ops.ordered(client))
    }

    fn kind(&self) -> Kind {
        kind!("reentrant")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let channel = lock_channel(&name);
            scripts::lock_force_release(&mut client.conn.clone(), &name, &channel, Notify::Publish)
                .await
        })
    }
}

/// Where one acquisition's wait stands in its lock's order of waiting
/// clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Place {
    /// No busy reply yet: an attempt sends the turn alone.
    Fresh,
    /// A busy reply came: the next attempts are a waiter's.
    Waiting,
    /// A waiter's attempt was sent: its client may be in the order.
    Joined,
}

/// The reentrant lock's scripts, bound to one name and owner. All waiters of one
/// lock share its unlock channel; an unlock wakes one of them per client.
#[derive(Debug)]
pub(crate) struct ReentrantOps {
    target: Target,
    reentry: Reentry,
    notify: Notify,
    backoff: Option<BackOff>,
    /// Its waiters keep the lock's order of waiting clients (see
    /// [`ReentrantOps::ordered`]): how long the order lives untouched, in ms.
    order_kept_ms: Option<u64>,
    /// Where this acquisition's wait stands in the order (see
    /// [`Place`]): after a busy reply, its attempts are a waiter's, and once
    /// one of those was busy, its client is in the order, which the attempt
    /// that takes the lock (or the wait's end) leaves.
    place: std::sync::atomic::AtomicU8,
    /// A release of the lock by this client woke other clients' waiters
    /// lately (when this acquisition began): the lock is contended across
    /// clients, and there may be an order and a turn.
    /// Otherwise the uncontended path, and one client's tasks taking turns
    /// (its local line orders them), send Redisson's scripts as they are: a
    /// release then names nobody, the first waiter elsewhere in the order
    /// tries on its message, and a newcomer may take the lock before it once,
    /// as Redisson's may.
    contended_lately: bool,
}

impl ReentrantOps {
    /// `reentry`: whether an owner that holds the lock may take it again;
    /// `labels`: its kind's, for the measurements.
    pub(crate) fn new(name: Arc<str>, owner: String, reentry: Reentry, labels: Labels) -> Self {
        ReentrantOps {
            target: Target::new(name, owner, ChannelOf::Lock, labels),
            reentry,
            notify: Notify::Publish,
            backoff: None,
            order_kept_ms: None,
            place: std::sync::atomic::AtomicU8::new(Place::Fresh as u8),
            contended_lately: false,
        }
    }

    /// Its waiters wait in the lock's order of this crate's clients, and its
    /// releases name the first for a turn (see `lock_acquire.lua`): a
    /// release's message is then answered by one client's attempt, not one per
    /// waiting client (a herd that, with many clients, spent the server's time
    /// on attempts that lose). Not with the heuristic `waiter_order` switched
    /// off.
    pub(crate) fn ordered(mut self, client: &Engine) -> Self {
        if crate::engine::heuristics::heuristics().waiter_order {
            self.contended_lately = client.handoffs.woke_others_lately(self.name());
            let kept = (client.config.recheck_interval * 3).max(ORDER_KEPT_AT_LEAST);
            self.order_kept_ms = Some(u64::try_from(kept.as_millis()).unwrap_or(u64::MAX));
        }
        self
    }

    /// Did this acquisition wait (its client may be in the order), or is
    /// the lock contended lately? Then its attempts and its release send the
    /// order.
    fn may_be_ordered(&self) -> bool {
        self.contended_lately || self.place.load(Ordering::Relaxed) != Place::Fresh as u8
    }

    /// The order as this owner's attempts and releases send it.
    fn order(&self) -> Option<Order<'_>> {
        let owner = self.owner();
        self.order_kept_ms.map(|keep_ms| Order {
            client: owner.split_once(':').map_or(owner, |(client, _)| client),
            keep_ms,
            turn_ms: u64::try_from(TURN.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The spin lock's variant: no unlock message, and waiters back off and
    /// retry rather than listen.
    pub(crate) fn spinning(mut self, backoff: BackOff) -> Self {
        self.notify = Notify::Silent;
        self.backoff = Some(backoff);
        self
    }
}

impl Acquirer for ReentrantOps {
    fn target(&self) -> &Target {
        &self.target
    }

    fn attempt(
        self: Arc<Self>,
        mut conn: Conn,
        lease_ms: u64,
        queue: bool,
    ) -> BoxFuture<Result<Outcome>> {
        Box::pin(async move {
            let place = self.place.load(Ordering::Relaxed);
            let order = self.order().filter(|_| self.may_be_ordered());
            let order = order.map(|order| match place {
                _ if !queue => InOrder::TurnOnly,
                p if p == Place::Fresh as u8 => InOrder::TurnOnly,
                p => InOrder::Waiter {
                    keep_ms: order.keep_ms,
                    joined: p == Place::Joined as u8,
                },
            });
            // Joined (perhaps) from the moment a waiter's attempt is sent: its
            // reply may be lost, or its future dropped, after the server put
            // the client in the order; leaving it then is harmless if not.
            if matches!(order, Some(InOrder::Waiter { .. })) {
                self.place.store(Place::Joined as u8, Ordering::Relaxed);
            }
            let (name, owner) = (self.name(), self.owner());
            let outcome =
                scripts::lock_acquire(&mut conn, name, lease_ms, owner, self.reentry, order)
                    .await
                    .map(plain);
            if queue && matches!(outcome, Ok(Err(_))) && place == Place::Fresh as u8 {
                self.place.store(Place::Waiting as u8, Ordering::Relaxed);
            }
            outcome
        })
    }

    fn waits(&self) -> Waits {
        match self.backoff {
            // A spin lock's waiters never sleep on a message; they keep retrying.
            Some(backoff) => Waits {
                between: Between::Spins(backoff),
                ..Waits::LISTENING
            },
            None => Waits {
                local_line: true,
                ordered: self.order_kept_ms.is_some(),
                ..Waits::LISTENING
            },
        }
    }

    fn release(self: Arc<Self>, mut conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            scripts::lock_release(
                &mut conn,
                self.name(),
                self.channel(),
                lease_ms,
                self.owner(),
                self.notify,
                self.order().filter(|_| self.may_be_ordered()),
            )
            .await
        })
    }

    /// Leaves the lock's order of waiting clients (a waiter that gave up): a
    /// hint, which expires on its own if this fails.
    fn abandon(self: Arc<Self>, mut conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async move {
            let joined = self.place.load(Ordering::Relaxed) == Place::Joined as u8;
            match self.order().filter(|_| joined) {
                Some(order) => {
                    let (name, channel) = (self.name(), self.channel());
                    scripts::lock_leave_order(&mut conn, name, channel, order).await
                }
                None => Ok(()),
            }
        })
    }
}
