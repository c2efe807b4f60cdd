//! The fair lock's release-and-grant, on the client's side: the waiter at the
//! head of a client's local line for a fair lock offers itself as the heir of
//! that client's releases, and a release that frees the lock while the heir
//! is first in Redis's line grants it the lock in the same script (one round
//! trip where a message and the heir's own acquire took two).
//!
//! What the release learns reaches the heir through this cell, never through
//! Redis: a grant (when the release was sent, on which connection: the hold's
//! validity counts from that send), no grant (the heir tries, as if woken), or
//! an outcome nobody knows. The cell also settles who gives back a grant its
//! heir can no longer take: the heir when it leaves after a grant (or a doubt),
//! the releaser when its reply finds the heir gone.
//!
//! ```text
//! Waiting ──grant──▶ Granted ──take──▶ Taken (the heir holds)
//!    │ doubt, or a settle of the heir's own attempt
//!    ▼
//! InDoubt: the heir's next attempt finds out (a hold it has is the grant)
//! any state ──the heir leaves──▶ Gone (a grant, or a doubt, is given back)
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::contract::{Acquirer, Target};
use crate::transport::conn::Conn;
use crate::transport::pubsub::{Confirming, Subscription};
use crate::transport::scripts::Released;

/// What a release names its heir by, for the release script: the heir's
/// owner field and lease.
pub(crate) type Naming = (Arc<str>, u64);

/// A fair waiter that its own client's release may grant the lock to.
pub(crate) struct Successor {
    /// Its scripts (owner field, lease): the release names it with them, and a
    /// grant it can no longer take is given back with them.
    acquirer: Arc<dyn Acquirer>,
    lease_ms: u64,
    state: Mutex<State>,
    /// Told of every outcome of a release that named it (but a pass-over
    /// while it listens on its channel: a message wakes it when its turn
    /// comes).
    told: Notify,
    /// The subscription to its channel it listens on, read where it stands
    /// (never a flag of its own, which outlived a subscription dropped under
    /// it and left a passed-over heir asleep on a channel it no longer
    /// listened on, for a whole lease).
    ears: Mutex<Option<Confirming>>,
    /// A release that named it is on its way: its word will come.
    named: AtomicBool,
    /// It listened when the last release that named it was sent: whatever is
    /// published to it after that release reaches it.
    heard_when_named: AtomicBool,
    /// A subscription to its channel made for it while it was parked, with
    /// the head's own, in one SUBSCRIBE (see [`Successor::listen_ahead`]);
    /// boxed, so that a parked waiter without one carries a pointer.
    ahead: Mutex<Option<Box<Subscription>>>,
}

impl std::fmt::Debug for Successor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Successor")
            .field("owner", &self.acquirer.owner())
            .field("state", &self.state())
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing granted yet.
    Waiting,
    /// A release granted it the lock: sent at `sent` on connection `epoch`.
    Granted { sent: Instant, epoch: u64 },
    /// A grant may have been made (a release whose outcome is unknown, or a
    /// settle of the heir's own attempt that may have given a grant back):
    /// only the heir's own attempt can tell, and its leaving gives back
    /// whatever it may hold.
    InDoubt,
    /// The heir holds the lock (taken from a grant, or by its own attempt).
    Taken,
    /// The heir left without the lock.
    Gone,
}

impl Successor {
    /// The heir `acquirer` (a fair waiter made for one acquisition), asking
    /// for a lease of `lease_ms`. From now on a hold it finds when it tries is
    /// the grant, not one more (see [`Acquirer::accept_grants`]).
    pub(crate) fn new(acquirer: &Arc<dyn Acquirer>, lease_ms: u64) -> Arc<Successor> {
        acquirer.accept_grants();
        Arc::new(Successor {
            acquirer: acquirer.clone(),
            lease_ms,
            state: Mutex::new(State::Waiting),
            told: Notify::new(),
            ears: Mutex::new(None),
            named: AtomicBool::new(false),
            heard_when_named: AtomicBool::new(false),
            ahead: Mutex::new(None),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a release names it by: its owner field and lease. From now on
    /// until it is told, a word is on its way.
    pub(crate) fn named(&self) -> Naming {
        let heard = self.listens();
        self.heard_when_named.store(heard, Ordering::Release);
        self.named.store(true, Ordering::Release);
        (Arc::from(self.acquirer.owner()), self.lease_ms)
    }

    /// A release that named it is on its way and has not told it yet: a
    /// head that comes to its turn meanwhile waits for that word rather than
    /// listen and try (the release cleared the word that a task of this
    /// client holds the lock, see `Lines::releasing`).
    pub(crate) fn awaits_word(&self) -> bool {
        self.named.load(Ordering::Acquire)
    }

    fn word_came(&self) {
        self.named.store(false, Ordering::Release);
    }

    /// Its lock and channel.
    pub(crate) fn target(&self) -> &Target {
        self.acquirer.target()
    }

    fn ahead(&self) -> std::sync::MutexGuard<'_, Option<Box<Subscription>>> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether it is parked still, with no subscription made for it yet.
    pub(crate) fn may_listen_ahead(&self) -> bool {
        self.is_waiting() && self.ahead().is_none()
    }

    /// Keeps `subscription` to its channel, made for it while it is parked
    /// (a head subscribes the next few heirs' channels with its own when its
    /// client's waiters alternate with others'), for when it is head: then
    /// it sends no SUBSCRIBE of its own. Dropped if it left meanwhile.
    pub(crate) fn listen_ahead(&self, subscription: Subscription) {
        let mut ahead = self.ahead();
        if self.is_waiting() {
            self.listens_on(&subscription);
            *ahead = Some(Box::new(subscription));
        }
    }

    /// Whether a subscription was made for it while it was parked.
    pub(crate) fn has_listening_ahead(&self) -> bool {
        self.ahead().is_some()
    }

    /// The subscription made for it while it was parked, if any.
    pub(crate) fn take_listening_ahead(&self) -> Option<Subscription> {
        self.ahead().take().map(|subscription| *subscription)
    }

    /// Drops a subscription made for it that it will not use (it left, or
    /// holds the lock).
    fn stop_listening_ahead(&self) {
        let unused = self.ahead().take();
        if unused.is_some() {
            *self.ears() = None;
        }
        drop(unused);
    }

    /// Its owner field.
    pub(crate) fn owner(&self) -> &str {
        self.acquirer.owner()
    }

    /// A release sent at `sent` on connection `epoch` granted it the lock.
    /// `false`: it left, and the grant is the caller's to give back.
    pub(crate) fn granted(&self, sent: Instant, epoch: u64) -> bool {
        let mut state = self.state();
        match *state {
            State::Gone => return false,
            State::Waiting => *state = State::Granted { sent, epoch },
            // Once in doubt, only the heir's attempt can tell (a settle may
            // have given this very grant back).
            State::Granted { .. } | State::InDoubt | State::Taken => {}
        }
        drop(state);
        self.word_came();
        self.told.notify_one();
        true
    }

    /// A release that named it ended with an unknown outcome, or a settle of
    /// its own attempt is under way: a grant may exist, and may be given back.
    /// `false`: it left, and whatever it may hold is the caller's to give back.
    pub(crate) fn in_doubt(&self) -> bool {
        let mut state = self.state();
        match *state {
            State::Gone => return false,
            State::Waiting | State::Granted { .. } => *state = State::InDoubt,
            State::InDoubt | State::Taken => {}
        }
        drop(state);
        self.word_came();
        self.told.notify_one();
        true
    }

    /// A release that named it did not grant it the lock. `woke_another`:
    /// it freed the lock and published to the waiter first in line, another
    /// than this heir. If the heir listened when that release was sent, every
    /// later message to it reaches it, so it sleeps on (a message wakes it
    /// when its turn comes); otherwise, or when the release freed the lock
    /// for nobody or found it held still, it tries, as if woken.
    pub(crate) fn passed_over(&self, woke_another: bool) {
        self.word_came();
        if !(woke_another && self.heard_when_named.load(Ordering::Acquire)) {
            self.told.notify_one();
        }
    }

    /// It listens on `subscription` to its channel from now on (made by it
    /// as head, or for it while it was parked).
    pub(crate) fn listens_on(&self, subscription: &Subscription) {
        *self.ears() = Some(subscription.confirming());
    }

    /// Whether a message published to its channel now reaches it: the
    /// subscription it listens on is confirmed on the current connection
    /// (after a reconnect it is not, until confirmed again; the reconnect
    /// itself wakes it, so that it tries on the new connection).
    fn listens(&self) -> bool {
        self.ears().as_ref().is_some_and(Confirming::is_confirmed)
    }

    fn ears(&self) -> std::sync::MutexGuard<'_, Option<Confirming>> {
        self.ears.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether nothing was granted yet, nor taken, nor left: a waiter a
    /// release may still name.
    pub(crate) fn is_waiting(&self) -> bool {
        *self.state() == State::Waiting
    }

    /// The heir leaves, unless a grant was (or may have been) made to it:
    /// `false` then, and it is still an heir, to leave with the grant given
    /// back ([`Successor::leave`], [`Successor::give_back`]).
    pub(crate) fn leave_unless_granted(&self) -> bool {
        let mut state = self.state();
        let leaves = match *state {
            State::Granted { .. } | State::InDoubt => false,
            State::Taken => true,
            State::Waiting | State::Gone => {
                *state = State::Gone;
                true
            }
        };
        drop(state);
        if leaves {
            self.stop_listening_ahead();
        }
        leaves
    }

    /// Whether a grant waits to be taken.
    pub(crate) fn has_grant(&self) -> bool {
        matches!(*self.state(), State::Granted { .. })
    }

    /// Takes the grant, if one waits: when the release was sent, and on which
    /// connection. Call with the heir's gate held (so no settle of its own
    /// attempt runs meanwhile).
    pub(crate) fn take(&self) -> Option<(Instant, u64)> {
        let mut state = self.state();
        let State::Granted { sent, epoch } = *state else {
            return None;
        };
        *state = State::Taken;
        drop(state);
        self.stop_listening_ahead();
        Some((sent, epoch))
    }

    /// The heir took the lock with its own attempt.
    pub(crate) fn acquired(&self) {
        *self.state() = State::Taken;
        self.stop_listening_ahead();
    }

    /// The heir leaves without the lock. `true` when a grant was, or may have
    /// been, made to it: it gives that back ([`Successor::give_back`]).
    pub(crate) fn leave(&self) -> bool {
        let mut state = self.state();
        let was = std::mem::replace(&mut *state, State::Gone);
        if was == State::Taken {
            *state = State::Taken;
        }
        drop(state);
        self.stop_listening_ahead();
        matches!(was, State::Granted { .. } | State::InDoubt)
    }

    /// A future that completes when a release that named it ends (a permit is
    /// kept if none waits, so a word sent before is not missed).
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.told.notified()
    }

    /// Tells the heir what came of a release that named it, sent at `sent`
    /// on connection `epoch`: granted, not granted, or unknown. An heir that
    /// left meanwhile cannot take a grant made (or perhaps made) to it: it is
    /// given back here, on `conn`, from the client's thread.
    pub(crate) fn told(
        self: Arc<Self>,
        released: &crate::error::Result<Released>,
        (sent, epoch): (Instant, u64),
        conn: &Conn,
    ) {
        let taken = match released {
            Ok(Released::Granted) => self.granted(sent, epoch),
            Err(e) if !e.is_surely_not_executed() => self.in_doubt(),
            other => {
                self.passed_over(matches!(other, Ok(Released::FreedAndWoke { .. })));
                true
            }
        };
        if !taken {
            conn.spawn_cleanup(self.give_back(conn.clone()));
        }
    }

    /// Gives back, on `conn`, a hold that a grant made to the heir after it
    /// left (a release of its owner; nothing happens if it holds none).
    pub(crate) async fn give_back(self: Arc<Self>, conn: Conn) {
        let released = self.acquirer.clone().release(conn, self.lease_ms).await;
        if let Err(e) = released {
            crate::trace::warn_event!(
                "fair lock {:?}: giving back a grant its waiter no longer takes failed \
                 (it ends with its lease): {e}",
                self.acquirer.name()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell() -> Successor {
        #[derive(Debug)]
        struct Nobody(crate::engine::contract::Target);
        impl Acquirer for Nobody {
            fn target(&self) -> &crate::engine::contract::Target {
                &self.0
            }
            fn attempt(
                self: Arc<Self>,
                _: Conn,
                _: u64,
                _: bool,
            ) -> crate::engine::contract::BoxFuture<crate::Result<crate::engine::contract::Outcome>>
            {
                unreachable!("not tried here")
            }
            fn release(
                self: Arc<Self>,
                _: Conn,
                _: u64,
            ) -> crate::engine::contract::BoxFuture<
                crate::Result<crate::transport::scripts::Released>,
            > {
                unreachable!("not released here")
            }
        }
        let name: Arc<str> = "l".into();
        let labels = crate::metrics::Labels::new(
            crate::metrics::kind!("fair"),
            &name,
            &crate::Config::default(),
        );
        let target = crate::engine::contract::Target::new(
            name,
            "o".into(),
            crate::engine::contract::ChannelOf::Lock,
            labels,
        );
        let acquirer: Arc<dyn Acquirer> = Arc::new(Nobody(target));
        Arc::into_inner(Successor::new(&acquirer, 1000)).expect("one handle")
    }

    #[test]
    fn a_grant_is_taken_once_and_a_gone_heir_gives_it_back() {
        let now = Instant::now();
        let heir = cell();
        assert!(heir.granted(now, 3));
        assert!(heir.has_grant());
        assert_eq!(heir.take(), Some((now, 3)));
        assert_eq!(heir.take(), None, "taken once");
        assert!(!heir.leave(), "a heir that holds has nothing to give back");

        let heir = cell();
        assert!(heir.granted(now, 3));
        assert!(heir.leave(), "left after a grant: it gives the grant back");
        assert!(!heir.granted(now, 4), "gone: the releaser gives it back");

        let heir = cell();
        assert!(!heir.leave(), "nothing granted, nothing to give back");
        assert!(
            !heir.granted(now, 3),
            "granted after it left: the releaser gives it back"
        );
        assert!(!heir.in_doubt());
    }

    #[test]
    fn a_doubt_is_never_taken_from_the_cell() {
        let now = Instant::now();
        let heir = cell();
        assert!(heir.granted(now, 1));
        // A settle of the heir's own attempt may give this grant back.
        assert!(heir.in_doubt());
        assert_eq!(heir.take(), None);
        assert!(heir.granted(now, 2));
        assert_eq!(heir.take(), None, "still in doubt: its attempt tells");
        assert!(heir.leave(), "leaving in doubt gives back what it may hold");
        let heir = cell();
        heir.acquired();
        assert!(heir.in_doubt(), "it holds: nothing to give back");
        assert!(!heir.leave());
    }

    /// Whether a word waits for `heir` (a permit `notify_one` left).
    async fn told(heir: &Successor) -> bool {
        let wait = std::time::Duration::from_millis(1);
        tokio::time::timeout(wait, heir.notified()).await.is_ok()
    }

    #[tokio::test]
    async fn a_heir_that_listened_when_named_is_not_made_to_try_when_another_was_woken() {
        let heir = cell();
        let _ = heir.named();
        heir.passed_over(true);
        assert!(told(&heir).await, "not listening when named: it tries");

        // Subscribed, not confirmed yet: a message sent now may be missed.
        let (ears, confirm) = Confirming::detached();
        *heir.ears() = Some(ears);
        let _ = heir.named();
        heir.passed_over(true);
        assert!(told(&heir).await, "not confirmed when named: it tries");

        confirm();
        let _ = heir.named();
        heir.passed_over(true);
        assert!(
            !told(&heir).await,
            "listening when named, another woken: the next message is its turn's"
        );
        let _ = heir.named();
        heir.passed_over(false);
        assert!(
            told(&heir).await,
            "freed for nobody, or still held: it tries, listening or not"
        );

        // The subscription it listened on is gone (dropped under it): it
        // does not listen, whatever it once did.
        drop(confirm);
        let _ = heir.named();
        heir.passed_over(true);
        assert!(told(&heir).await, "its subscription is gone: it tries");
    }

    #[test]
    fn a_named_heir_awaits_the_word_and_a_granted_one_does_not_leave_quietly() {
        let now = Instant::now();
        let heir = cell();
        assert!(!heir.awaits_word());
        let _ = heir.named();
        assert!(heir.awaits_word(), "a release naming it is on its way");
        heir.passed_over(true);
        assert!(!heir.awaits_word(), "told");
        let _ = heir.named();
        assert!(heir.granted(now, 1));
        assert!(!heir.awaits_word());
        assert!(
            !heir.leave_unless_granted(),
            "granted: it must leave with the grant given back"
        );
        assert!(heir.leave(), "and that leave gives it back");

        let heir = cell();
        assert!(heir.is_waiting());
        assert!(
            heir.leave_unless_granted(),
            "nothing granted: it just leaves"
        );
        assert!(!heir.is_waiting(), "no release names it any more");
        assert!(!heir.granted(now, 2), "a later grant is the releaser's");
    }
}
