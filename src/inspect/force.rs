//! Freeing a name whoever holds it, for an operator: the kind the inspector
//! sees chooses the kind's own force script (Redisson's `forceUnlock`), so
//! waiters of every language are told as by any release.

use std::sync::Arc;

use super::{Kind, Snapshot};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::lock::{Fair, RFencedLock, RLock, RReadWriteLock, Reentrant};

/// Frees `name` whatever holds it; returns what held it just before and
/// whether the force freed anything.
pub(crate) async fn force_unlock(inner: &Arc<Engine>, name: &str) -> Result<(Snapshot, bool)> {
    let before = super::inspect(inner, name, &mut Default::default()).await?;
    let freed = match &before.kind {
        Kind::Absent => false,
        Kind::Lock => {
            RLock::new(inner.clone(), name.to_owned(), Arc::new(Reentrant))
                .force_unlock()
                .await?
        }
        Kind::FairLock => {
            RLock::new(inner.clone(), name.to_owned(), Arc::new(Fair))
                .force_unlock()
                .await?
        }
        Kind::FencedLock => {
            RFencedLock::new(inner.clone(), name.to_owned())
                .force_unlock()
                .await?
        }
        // Each side's force frees the lock only in its own mode.
        Kind::ReadWriteLock { mode } if mode == "write" => {
            RReadWriteLock::new(inner.clone(), name.to_owned())
                .write_lock()
                .force_unlock()
                .await?
        }
        Kind::ReadWriteLock { .. } => {
            RReadWriteLock::new(inner.clone(), name.to_owned())
                .read_lock()
                .force_unlock()
                .await?
        }
        Kind::MultiLockGroup => {
            let ids: Vec<String> = before
                .holders
                .iter()
                .filter_map(|h| h.member.clone())
                .collect();
            // The group kind's own force, through `RLock::force_unlock`, so
            // this client's bookkeeping goes with it as for any lock.
            let group = crate::lock::GroupMembers::new(ids);
            !group.is_empty()
                && RLock::new(inner.clone(), name.to_owned(), Arc::new(group))
                    .force_unlock()
                    .await?
        }
        Kind::Counter | Kind::PermitExpirableSemaphore | Kind::FairSemaphore => {
            return Err(Error::invalid(format!(
                "'{name}' is a {}: it has no holder to force out (release its permits or \
                 count it down instead)",
                before.kind.label()
            )))
        }
        Kind::Foreign { redis_type } => {
            return Err(Error::invalid(format!(
                "'{name}' is a {redis_type} that is not a lock: nothing was changed"
            )))
        }
    };
    Ok((before, freed))
}
