//! What an acquisition asks for ([`Terms`]: the lease, renewed or not, the
//! longest hold) and what it comes to ([`Hold`]: how the hold is kept alive
//! and how its loss is noticed).

use std::sync::Arc;
use std::time::Duration;

use crate::config::duration_to_millis;
use crate::engine::contract::Lease;
use crate::engine::ledger::Slot;
use crate::engine::validity::Validity;
use crate::engine::watchdog::Renewal;
use crate::engine::Engine;
use crate::error::{Error, Result};

/// A hold just acquired: how it is kept alive and how its loss is noticed.
#[derive(Debug)]
pub(crate) struct Hold {
    /// The watchdog's renewal, for holds without an explicit lease.
    pub(crate) renewal: Option<Renewal>,
    /// Until when the hold is surely valid on this client's clock: from the
    /// instant the acquire was sent, extended by each confirmed renewal.
    pub(crate) validity: Arc<Validity>,
    /// The lease in milliseconds, restarted on the holds that remain when this one
    /// is released.
    pub(crate) lease_ms: u64,
    /// The owner's slot in the client's ledger: releases go through its gate.
    pub(crate) slot: Arc<Slot>,
    /// The connection epoch when the acquire that took it was sent: replica sync
    /// must WAIT on that same connection.
    pub(crate) epoch: u64,
    /// What the acquire drew besides the hold (a fencing token).
    pub(crate) drawn: crate::engine::contract::Drawn,
}

/// A hold's lease as one acquisition asks for it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terms {
    pub(super) lease: Duration,
    pub(super) lease_ms: u64,
    /// Renewed by the watchdog (no explicit lease).
    pub(super) renewed: bool,
    /// The longest the hold may last, from the instant its acquire is sent
    /// (the handle's, else `Config::max_hold`).
    pub(super) max_hold: Option<Duration>,
}

impl Terms {
    pub(super) fn new(client: &Engine, lease: Lease, max_hold: Option<Duration>) -> Result<Terms> {
        let max_hold = max_hold.or(client.config.max_hold);
        if let Some(limit) = max_hold {
            if limit.is_zero() || limit > crate::config::MAX_DURATION {
                return Err(Error::invalid(format!(
                    "a maximum hold must be between 1 ms and {} s, got {limit:?}",
                    crate::config::MAX_DURATION.as_secs()
                )));
            }
        }
        let terms = match lease {
            Lease::Watchdog => {
                let lease = client.config.lock_watchdog_timeout;
                Terms {
                    lease,
                    lease_ms: duration_to_millis("watchdog timeout", lease)?,
                    renewed: true,
                    max_hold,
                }
            }
            Lease::Fixed(lease) => Terms {
                lease,
                lease_ms: duration_to_millis("lease", lease)?,
                renewed: false,
                max_hold,
            },
        };
        Ok(terms)
    }
}
