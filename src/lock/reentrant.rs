//! The reentrant lock's scripts: whoever asks first after a release gets it.

use std::sync::Arc;

use super::client_order::ClientOrder;
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
use crate::transport::scripts::{self, Notify, Reentry, Released};

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

/// The reentrant lock's scripts, bound to one name and owner. All waiters of one
/// lock share its unlock channel; an unlock wakes one of them per client.
#[derive(Debug)]
pub(crate) struct ReentrantOps {
    target: Target,
    reentry: Reentry,
    notify: Notify,
    backoff: Option<BackOff>,
    /// Its waiters' part in the lock's order of waiting clients (see
    /// [`ReentrantOps::ordered`]).
    order: ClientOrder,
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
            order: ClientOrder::none(),
        }
    }

    /// Its waiters wait in the lock's order of this crate's clients, and its
    /// releases name the first for a turn (see `client_order.rs`). Not with
    /// the heuristic `waiter_order` switched off.
    pub(crate) fn ordered(mut self, client: &Engine) -> Self {
        self.order = ClientOrder::of(client, self.name());
        self
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
            let (order, place) = self.order.before_attempt(self.owner(), queue);
            let (name, owner) = (self.name(), self.owner());
            let outcome =
                scripts::lock_acquire(&mut conn, name, lease_ms, owner, self.reentry, order)
                    .await
                    .map(plain);
            let busy = matches!(outcome, Ok(Err(_)));
            self.order.attempted(queue, place, busy);
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
                ordered: self.order.is_kept(),
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
                self.order.sent(self.owner()),
            )
            .await
        })
    }

    /// Leaves the lock's order of waiting clients (a waiter that gave up).
    fn abandon(self: Arc<Self>, mut conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async move { self.order.leave(&mut conn, self.target()).await })
    }
}
