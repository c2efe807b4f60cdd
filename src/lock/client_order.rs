//! A lock's order of this crate's waiting clients, as one acquisition's
//! attempts and release send it (`lua/order_common.lua`): the reentrant
//! lock's waiters and the write lock's keep one, so that a release's message
//! is answered by one client's attempt, not one per waiting client (a herd
//! that, with many clients, spent the server's time on attempts that lose).

use std::sync::atomic::{AtomicU8, Ordering};

use crate::engine::contract::Target;
use crate::engine::Engine;
use crate::error::Result;
use crate::transport::conn::Conn;
use crate::transport::scripts::{self, InOrder, Order};

/// How long a release's turn keeps a free lock for the client it names (see
/// `order_common.lua`): the time that client's waiter has, from the release,
/// to hear the message and try. A client that never comes (gone, stalled)
/// costs its lock this much once, and then has lost its place.
pub(crate) const TURN: std::time::Duration = std::time::Duration::from_millis(20);

/// The shortest time a lock's order of waiting clients lives untouched; at
/// least three re-check intervals, since every waiter tries at least that
/// often (and so keeps it).
const ORDER_KEPT_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(10);

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

/// One acquisition's part in its lock's order of waiting clients.
#[derive(Debug)]
pub(crate) struct ClientOrder {
    /// How long the order lives untouched, in ms; `None`: no order kept (the
    /// heuristic `waiter_order` off, or a kind without one).
    kept_ms: Option<u64>,
    /// Where this acquisition's wait stands (see [`Place`]): after a busy
    /// reply, its attempts are a waiter's, and once one of those was busy,
    /// its client is in the order, which the attempt that takes the lock (or
    /// the wait's end) leaves.
    place: AtomicU8,
    /// A release of the lock by this client woke other clients' waiters
    /// lately (when this acquisition began): the lock is contended across
    /// clients, and there may be an order and a turn. Otherwise the
    /// uncontended path, and one client's tasks taking turns (its local line
    /// orders them), send Redisson's scripts as they are: a release then names
    /// nobody, the first waiter elsewhere in the order tries on its message,
    /// and a newcomer may take the lock before it once, as Redisson's may.
    contended_lately: bool,
}

impl ClientOrder {
    /// No order: Redisson's scripts as they are.
    pub(crate) fn none() -> Self {
        ClientOrder {
            kept_ms: None,
            place: AtomicU8::new(Place::Fresh as u8),
            contended_lately: false,
        }
    }

    /// The order of lock `name` as `client` keeps it (none with the heuristic
    /// `waiter_order` switched off).
    pub(crate) fn of(client: &Engine, name: &str) -> Self {
        let mut order = ClientOrder::none();
        if crate::engine::heuristics::heuristics().waiter_order {
            order.contended_lately = client.handoffs.woke_others_lately(name);
            let kept = (client.config.recheck_interval * 3).max(ORDER_KEPT_AT_LEAST);
            order.kept_ms = Some(u64::try_from(kept.as_millis()).unwrap_or(u64::MAX));
        }
        order
    }

    /// Whether its waiters wait in the order ([`Waits::ordered`](crate::engine::contract::Waits)).
    pub(crate) fn is_kept(&self) -> bool {
        self.kept_ms.is_some()
    }

    /// Did this acquisition wait (its client may be in the order), or is the
    /// lock contended lately? Then its attempts and its release send the
    /// order.
    fn in_play(&self) -> bool {
        self.contended_lately || self.place.load(Ordering::Relaxed) != Place::Fresh as u8
    }

    /// The order as `owner`'s attempts and releases send it, when in play.
    pub(crate) fn sent<'o>(&self, owner: &'o str) -> Option<Order<'o>> {
        let kept_ms = self.kept_ms.filter(|_| self.in_play())?;
        Some(Order {
            client: owner.split_once(':').map_or(owner, |(client, _)| client),
            keep_ms: kept_ms,
            turn_ms: u64::try_from(TURN.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// What one attempt sends (`queue`: a waiter's, else a single try), and
    /// the place it was sent from, for [`attempted`](Self::attempted).
    pub(crate) fn before_attempt(&self, owner: &str, queue: bool) -> (Option<InOrder>, u8) {
        let place = self.place.load(Ordering::Relaxed);
        let order = self.sent(owner).map(|order| match place {
            _ if !queue => InOrder::TurnOnly,
            p if p == Place::Fresh as u8 => InOrder::TurnOnly,
            p => InOrder::Waiter {
                keep_ms: order.keep_ms,
                joined: p == Place::Joined as u8,
            },
        });
        // Joined (perhaps) from the moment a waiter's attempt is sent: its
        // reply may be lost, or its future dropped, after the server put the
        // client in the order; leaving it then is harmless if not.
        if matches!(order, Some(InOrder::Waiter { .. })) {
            self.place.store(Place::Joined as u8, Ordering::Relaxed);
        }
        (order, place)
    }

    /// An attempt sent from `place` came back `busy`: a waiter's first busy
    /// reply makes its next attempts a waiter's.
    pub(crate) fn attempted(&self, queue: bool, place: u8, busy: bool) {
        if queue && busy && place == Place::Fresh as u8 {
            self.place.store(Place::Waiting as u8, Ordering::Relaxed);
        }
    }

    /// A waiter of `target` that gave up leaves the order, if its client may
    /// be in it, publishing on the lock's channel as it does (see
    /// `lock_leave_order.lua`). A hint, which expires on its own if this
    /// fails.
    pub(crate) async fn leave(&self, conn: &mut Conn, target: &Target) -> Result<()> {
        let joined = self.place.load(Ordering::Relaxed) == Place::Joined as u8;
        match self.sent(&target.owner).filter(|_| joined) {
            Some(order) => {
                scripts::lock_leave_order(conn, &target.name, target.channel(), order).await
            }
            None => Ok(()),
        }
    }
}
