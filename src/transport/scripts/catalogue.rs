//! Every script this crate sends, for pinning them in the server's cache.

use super::*;

/// The text of every script this crate sends, for pinning them in the
/// server's cache (`script_cache.rs`). A test checks that none is missing.
pub(crate) fn catalogue() -> Vec<&'static str> {
    scripts().into_iter().map(LuaScript::code).collect()
}

/// Every script this crate sends.
fn scripts() -> Vec<&'static LuaScript> {
    vec![
        &*LOCK_ACQUIRE,
        &*LOCK_RELEASE,
        &*LOCK_FORCE_RELEASE,
        &*LOCK_RENEW,
        &*LOCK_LEAVE_ORDER,
        &*FENCED_ACQUIRE,
        &*LEADER_RECORD,
        &*FENCED_WRITE,
        &*FAIR_ACQUIRE,
        &*FAIR_CANCEL,
        &*FAIR_RELEASE,
        &*FAIR_FORCE_RELEASE,
        &*RW_READ_ACQUIRE,
        &*RW_READ_RELEASE,
        &*RW_READ_RENEW,
        &*RW_WRITE_ACQUIRE,
        &*RW_WRITE_RELEASE,
        &*RW_FORCE_RELEASE,
        &*GROUP_ACQUIRE,
        &*GROUP_RELEASE,
        &*GROUP_RENEW,
        &*GROUP_FORCE_RELEASE,
        &*GROUP_IS_LOCKED,
        &*INSPECT,
        &*INSPECT_FAIR,
        &*SEMAPHORE_ACQUIRE,
        &*SEMAPHORE_RELEASE,
        &*SEMAPHORE_SETTLE,
        &*SEMAPHORE_TRY_SET,
        &*SEMAPHORE_ADD,
        &*SEMAPHORE_DRAIN,
        &*PES_ACQUIRE,
        &*PES_RELEASE,
        &*PES_UPDATE_LEASE,
        &*PES_RENEW,
        &*PES_AVAILABLE,
        &*FSEM_ACQUIRE,
        &*FSEM_RELEASE,
        &*FSEM_LEAVE,
        &*FSEM_RENEW,
        &*FSEM_PERMITS,
        &*LATCH_TRY_SET,
        &*LATCH_COUNT_DOWN,
        &*LATCH_DELETE,
    ]
}

#[cfg(test)]
mod tests {
    use super::{catalogue, scripts};

    /// The catalogue names every script defined here, each once: a script
    /// missing from it would never be pinned.
    #[test]
    fn the_catalogue_holds_every_script() {
        let sources = [
            include_str!("lock.rs"),
            include_str!("fair.rs"),
            include_str!("read_write.rs"),
            include_str!("group.rs"),
            include_str!("inspect.rs"),
            include_str!("sync.rs"),
        ];
        let defined: usize = sources
            .iter()
            .map(|source| source.matches("\nlua_script!(").count())
            .sum();
        assert_eq!(catalogue().len(), defined);
        let scripts = scripts();
        let mut shas: Vec<&str> = scripts.iter().map(|s| s.sha()).collect();
        shas.sort_unstable();
        shas.dedup();
        assert_eq!(shas.len(), defined, "no script twice");
    }
}
