//! The non-reentrant locks (Redisson `getNonReentrantLock`,
//! `getNonReentrantFairLock`): the reentrant and the fair lock's layout and
//! scripts, except that an owner asking again for a lock it holds is refused at
//! once with [`Error::AlreadyHeld`](crate::Error::AlreadyHeld) (the scripts
//! check it atomically), as Redisson refuses it, rather than counted.

use std::sync::Arc;

use super::fair::{fair_acquirer, Fair};
use super::kind::LockKind;
use super::reentrant::{Reentrant, ReentrantOps};
use crate::engine::contract::{Acquirer, BoxFuture, Wait};
use crate::engine::Engine;
use crate::error::Result;
use crate::metrics::{kind, Kind};
use crate::transport::scripts::Reentry;

/// The non-reentrant lock: whoever asks first after a release gets it.
#[derive(Debug)]
pub(crate) struct NonReentrant;

impl LockKind for NonReentrant {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        _wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        let ops = ReentrantOps::new(name.clone(), owner, Reentry::Refused, labels);
        Arc::new(ops.ordered(client))
    }

    fn kind(&self) -> Kind {
        kind!("non_reentrant")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Reentrant.force_unlock(client, name)
    }
}

/// The non-reentrant fair lock: handed out in arrival order.
#[derive(Debug)]
pub(crate) struct NonReentrantFair;

impl LockKind for NonReentrantFair {
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        wait: Wait,
    ) -> Arc<dyn Acquirer> {
        let labels = self.labels(client, name);
        fair_acquirer(client, name, owner, wait, Reentry::Refused, labels)
    }

    fn kind(&self) -> Kind {
        kind!("non_reentrant_fair")
    }

    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Fair.force_unlock(client, name)
    }

    fn is_fair(&self) -> bool {
        true
    }
}
