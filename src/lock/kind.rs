//! The one extension point of the lock kinds.
//!
//! A lock kind is one value implementing [`LockKind`], in a file of its own with
//! its scripts' adapter (an [`Acquirer`]): which scripts acquire and release for
//! an owner, which hash field counts an owner's holds, how the lock is forced
//! open and asked whether it is held. [`RLock`](super::RLock), the handle every
//! kind shares, knows nothing else about kinds; the wait engine (`wait/`) and
//! the watchdog serve them all.
//!
//! A trait rather than an enum of operations: a new kind is then one new file,
//! with no match arm to add elsewhere, and a kind that composes another (the fair
//! variant of a non-reentrant lock, say) can wrap it.

use std::sync::Arc;

use redis::AsyncCommands;

use crate::engine::contract::{Acquirer, BoxFuture, Wait};
use crate::engine::self_wait::Claim;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::{Kind, Labels};

/// What one kind of lock is, as the shared handle sees it.
pub(crate) trait LockKind: std::fmt::Debug + Send + Sync + 'static {
    /// The scripts one acquisition (or release) by owner field `owner` uses;
    /// `wait` is the caller's wait, which some kinds take into account.
    fn acquirer(
        &self,
        client: &Engine,
        name: &Arc<str>,
        owner: String,
        wait: Wait,
    ) -> Arc<dyn Acquirer>;

    /// The hash field that counts `owner`'s holds.
    fn field(&self, owner: String) -> String {
        owner
    }

    /// Releases the lock whoever holds it; `true` when it was held and is now
    /// deleted (taking this client's holds of it with it).
    fn force_unlock(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>>;

    /// Is it held (Redisson `isLocked()`)? By default: does the key exist.
    fn is_locked(&self, client: Arc<Engine>, name: Arc<str>) -> BoxFuture<Result<bool>> {
        Box::pin(async move {
            let mut conn = client.conn.clone();
            conn.exists(&*name)
                .await
                .map_err(|e| Error::from_redis(&name, e))
        })
    }

    /// The kind's name, `kind!("reentrant")`: the `kind` field of its traces
    /// and the `kind` label of its metrics, so snake case and stable.
    fn kind(&self) -> Kind;

    /// The labels of one acquisition's measurements of lock `name`.
    fn labels(&self, client: &Engine, name: &Arc<str>) -> Labels {
        Labels::new(self.kind(), name, &client.config)
    }

    /// What a hold of this kind claims of the lock, to tell which holds keep
    /// a request out (see `self_wait.rs`). By default: all of it, alone.
    fn claim(&self) -> Claim {
        Claim::Exclusive
    }

    /// Does it hand the lock out in arrival order?
    fn is_fair(&self) -> bool {
        false
    }
}
