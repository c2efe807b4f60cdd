//! The spin lock (Redisson `getSpinLock`): the reentrant lock's layout, with no
//! channel and no message. Waiters back off and retry, so it works for a user
//! whose ACL grants no channel at all, at the price of polling.

use std::sync::Arc;

use super::kind::LockKind;
use super::reentrant::ReentrantOps;
use crate::engine::backoff::BackOff;
use crate::engine::contract::{Acquirer, BoxFuture, Wait};
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::{kind, Kind};
use crate::transport::keys::lock_channel;
use crate::transport::scripts::{self, Notify, Reentry};

/// The spin lock's kind, with its back-off.
#[derive(Debug)]
pub(crate) struct Spin {
    pub(crate) backoff: BackOff,
}

impl LockKind for Spin {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        let ops = ReentrantOps::new(name.clone(), owner, Reentry::Allowed, labels);
        Arc::new(ops.spinning(self.backoff))
    }

    fn kind(&self) -> Kind {
        kind!("spin")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let channel = lock_channel(&name);
            scripts::lock_force_release(&mut client.conn.clone(), &name, &channel, Notify::Silent)
                .await
        })
    }
}
