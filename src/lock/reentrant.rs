//! The reentrant lock's scripts: whoever asks first after a release gets it.

use std::sync::Arc;

use crate::conn::Conn;

use crate::error::Result;
use crate::keys::lock_channel;
use crate::scripts::{self, BusyTtl, Released};
use crate::wait::{Acquirer, BoxFuture, Target};

/// The reentrant lock's scripts, bound to one name and owner. All waiters of one
/// lock share its unlock channel; an unlock wakes one of them per client.
#[derive(Debug)]
pub(crate) struct ReentrantOps {
    target: Target,
}

impl ReentrantOps {
    pub(crate) fn new(name: Arc<str>, owner: String) -> Self {
        ReentrantOps {
            target: Target {
                channel: lock_channel(&name),
                name,
                owner,
            },
        }
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
        _queue: bool,
    ) -> BoxFuture<Result<Option<BusyTtl>>> {
        Box::pin(async move {
            scripts::lock_acquire(&mut conn, self.name(), lease_ms, self.owner()).await
        })
    }

    fn release(self: Arc<Self>, mut conn: Conn, lease_ms: u64) -> BoxFuture<Result<Released>> {
        Box::pin(async move {
            scripts::lock_release(
                &mut conn,
                self.name(),
                self.channel(),
                lease_ms,
                self.owner(),
            )
            .await
        })
    }
}
