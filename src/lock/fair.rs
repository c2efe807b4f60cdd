//! The fair lock's scripts: the lock goes to waiters strictly in arrival order.
//!
//! Waiters queue in a LIST with a deadline each in a ZSET (Redisson's layout); each
//! waiter sleeps on its own channel and only the first in line is woken on unlock.
//! A waiter that goes silent past its deadline is skipped, so a vanished process
//! never blocks the line for longer than its wait; one that gives up or is
//! cancelled leaves at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::kind::LockKind;
use crate::engine::Engine;
use crate::transport::conn::Conn;

use crate::config::duration_to_millis;
use crate::engine::contract::{
    plain, Acquirer, Between, BoxFuture, ChannelOf, Outcome, Target, Wait, Waits,
};
use crate::error::Result;
use crate::metrics::{kind, Kind, Labels};
use crate::transport::scripts::{self, FairKeys, Handoff, Reentry, Released};

/// The fair lock's scripts for one acquisition; `reentry` says whether an owner
/// that holds it may take it again, `labels` are its kind's measurements'.
pub(crate) fn fair_acquirer(
    client: &Engine,
    name: &Arc<str>,
    owner: String,
    wait: Wait,
    reentry: Reentry,
    labels: Labels,
) -> Arc<dyn Acquirer> {
    let config = &client.config;
    // How long this waiter keeps its place while silent: a timed try uses its
    // wait, as Redisson does; otherwise the configured default.
    let grace = match wait {
        Wait::For(wait) if !wait.is_zero() => wait,
        _ => config.fair_lock_wait_timeout,
    };
    Arc::new(FairOps::new(
        name.clone(),
        owner,
        grace,
        handoff(config),
        config.lock_watchdog_timeout,
        reentry,
        labels,
    ))
}

/// The fair lock (Redisson `getFairLock`): handed out strictly in arrival order.
#[derive(Debug)]
pub(crate) struct Fair;

impl LockKind for Fair {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        fair_acquirer(client, name, owner, wait, Reentry::Allowed, labels)
    }

    fn kind(&self) -> Kind {
        kind!("fair")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let handoff = handoff(&client.config);
            scripts::fair_force_release(&mut client.conn.clone(), &FairKeys::new(name), handoff)
                .await
        })
    }

    fn is_fair(&self) -> bool {
        true
    }
}

/// The least time the first in line gets to take a lock just freed (its
/// deadline becomes the later of its own and now + this). Short, because a woken
/// head takes the lock within milliseconds, and a live head of this crate keeps
/// its own deadline ahead anyway; what it bounds is how long a head that vanished
/// (a killed Redisson waiter) blocks the line after a release. Redisson's own
/// release leaves the head's deadline alone.
pub(crate) const HANDOFF_GRACE: Duration = Duration::from_secs(2);

/// What the first in line gets when the lock is freed: at least
/// [`HANDOFF_GRACE`] (or the configured fair-lock wait, when shorter) from now,
/// its own deadline if later, and never more than the configured wait from now.
pub(crate) fn handoff(config: &crate::Config) -> Handoff {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Handoff {
        grace_ms: millis(config.fair_lock_wait_timeout.min(HANDOFF_GRACE)),
        cap_ms: millis(config.fair_lock_wait_timeout),
    }
}

/// The fair lock's scripts, bound to one name, owner and wait.
#[derive(Debug)]
pub(crate) struct FairOps {
    /// The lock, the owner, and the owner's own wake-up channel.
    target: Target,
    /// How long this waiter keeps its place in line while silent.
    grace: Duration,
    /// What the next in line gets to take the lock when this owner frees it.
    handoff: Handoff,
    /// The longest sleep between attempts, so a lost wake-up costs at most this.
    max_sleep: Duration,
    /// Whether an owner that holds the lock may take it again.
    reentry: Reentry,
    /// A waiter its client's release may grant the lock to: a hold it finds
    /// is that grant (see [`Acquirer::accept_grants`]).
    grants: AtomicBool,
}

impl FairOps {
    /// `grace`: this waiter's wait; `handoff`: see [`handoff`];
    /// `lease_bound`: the watchdog timeout, the longest a hold lasts unrenewed.
    pub(crate) fn new(
        name: Arc<str>,
        owner: String,
        grace: Duration,
        handoff: Handoff,
        lease_bound: Duration,
        reentry: Reentry,
        labels: Labels,
    ) -> Self {
        FairOps {
            target: Target::new(name, owner, ChannelOf::FairWaiter, labels),
            grace,
            handoff,
            // A waiter wakes at least twice per grace period: to see whether the
            // one ahead went silent, and, when first in line, to push its own
            // deadline on before it passes. And once per lease, in case a
            // wake-up was lost.
            max_sleep: (grace / 2).min(lease_bound),
            reentry,
            grants: AtomicBool::new(false),
        }
    }

    /// Made for each script call, not kept: a waiter parked in its client's
    /// line would carry them (about 250 bytes) for its whole wait.
    fn keys(&self) -> FairKeys {
        FairKeys::new(self.target.name.clone())
    }

    fn grace_ms(&self) -> Result<u64> {
        duration_to_millis("fair lock wait", self.grace)
    }
}

impl Acquirer for FairOps {
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
            let grace_ms = self.grace_ms()?;
            let attempt = scripts::FairAttempt {
                lease_ms,
                wait_ms: grace_ms,
                cap_ms: self.handoff.cap_ms,
                queue,
                reentry: match self.grants.load(Ordering::Acquire) {
                    true => Reentry::Granted,
                    false => self.reentry,
                },
            };
            scripts::fair_acquire(&mut conn, &self.keys(), self.owner(), attempt)
                .await
                .map(plain)
        })
    }

    fn release(self: Arc<Self>, conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>> {
        self.release_to(conn, lease_ms, None)
    }

    fn release_to(
        self: Arc<Self>,
        mut conn: Conn,
        lease_ms: u64,
        heir: Option<(Arc<str>, u64)>,
    ) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            let heir = heir.as_ref().map(|(owner, lease_ms)| (&**owner, *lease_ms));
            let (keys, owner) = (&self.keys(), self.owner());
            scripts::fair_release(&mut conn, keys, lease_ms, owner, self.handoff, heir).await
        })
    }

    fn accept_grants(&self) {
        self.grants.store(true, Ordering::Release);
    }

    fn waits(&self) -> Waits {
        Waits {
            between: Between::Queues {
                max_sleep: self.max_sleep,
            },
            ..Waits::LISTENING
        }
    }

    fn abandon(self: Arc<Self>, mut conn: Conn) -> BoxFuture<Result<()>> {
        Box::pin(async move {
            let grace_ms = self.grace_ms()?;
            scripts::fair_cancel(
                &mut conn,
                &self.keys(),
                self.owner(),
                grace_ms,
                self.handoff,
            )
            .await?;
            Ok(())
        })
    }
}
