//! Self-waits: waits that only the waiter's own task can end.
//!
//! Outside a hold's scope every acquisition is its own owner (see `owner.rs`), and
//! that rule keeps sibling futures of one task apart. Its cost is that the two
//! most common Java idioms, ported literally, wait for themselves: a nested
//! `lock()` in a called function, and the read-write downgrade (`writeLock().lock()`,
//! `readLock().lock()`). The outer hold is renewed by the watchdog, so such a
//! wait never times out on its own.
//!
//! So the client keeps a small record of every hold its guards stand for: which
//! *context* took it (the task, or the thread for the blocking API), which owner,
//! and what it claims. A wait that starts behind a record of its own context,
//! which it conflicts with, is a self-wait: it can only end when a sibling future
//! of that task releases. [`SelfWait::Warn`](crate::SelfWait::Warn) lets it wait
//! and warns once after [`Config::self_wait_warning`](crate::Config::self_wait_warning),
//! naming the lock, the hold and the fix; [`SelfWait::Refuse`](crate::SelfWait::Refuse)
//! refuses it at once with [`Error::WouldDeadlock`]. Siblings that take turns
//! keep working: they release, the wait ends, and no warning is due.
//!
//! The record is this process's own belief, kept beside the guard's lifetime: a
//! detached hold (no guard) keeps its record in its `DetachedHold` (see
//! `detached.rs`) until `RLock::unlock` or a forced unlock ends it, and a hold of another client (Java's included) is never a
//! self-wait.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::SelfWait;
use crate::engine::validity::Validity;
use crate::error::{Error, Result};

/// Why a write request of a reader is refused (its own read hold keeps it out).
pub(crate) const UPGRADE_REFUSED: &str = "the owner holds its read lock, and a reader cannot \
     upgrade (as in Redisson): release the read hold before asking for the write lock";

/// How a self-wait is fixed, for the warning and the error.
const FIX: &str = "run the inner code inside the hold's scope (`guard.scope(..)` or \
     `lock.with(..)`), so that it re-enters as the hold's owner; or make the task the owner, \
     for one handle (`with_task_owner()`) or for the whole client \
     (`Config::owner_mode = OwnerMode::Task`, Java's rule)";

/// What a hold holds, or a wait wants, of one lock name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The whole lock, alone (reentrant, fair, fenced, spin, non-reentrant).
    Exclusive,
    /// The read side of a read-write lock: shared with other readers.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// These members (their ids) of a single-hash multi-lock.
    Members(Arc<[String]>),
}

impl Claim {
    /// Does a hold of `self` by owner `holder` keep a request of `wanted` by
    /// owner `asker` out?
    pub(crate) fn excludes(&self, holder: u64, wanted: &Claim, asker: u64) -> bool {
        let same_owner = holder == asker;
        match (self, wanted) {
            (Claim::Read, Claim::Read) => false,
            // Other readers, and the asker's own read hold (no upgrade).
            (Claim::Read, Claim::Write) => true,
            (Claim::Members(held), Claim::Members(asked)) => {
                !same_owner && held.iter().any(|member| asked.contains(member))
            }
            // A writer may read (the downgrade); an owner re-enters its own hold.
            _ => !same_owner,
        }
    }

    /// The hold as a warning names it.
    fn describe(&self) -> &'static str {
        match self {
            Claim::Exclusive => "hold",
            Claim::Read => "read hold",
            Claim::Write => "write hold",
            Claim::Members(_) => "hold of those members",
        }
    }

    /// The request as a warning names it.
    fn describe_request(&self) -> &'static str {
        match self {
            Claim::Exclusive => "the lock",
            Claim::Read => "the read lock",
            Claim::Write => "the write lock",
            Claim::Members(_) => "members",
        }
    }
}

/// Parts of the record, by lock name: holds of unrelated locks never meet on
/// one mutex.
const SHARDS: usize = 16;

/// Every hold this client's guards stand for, and every self-wait under way.
#[derive(Debug)]
pub(crate) struct Holdings {
    shards: [Mutex<Shard>; SHARDS],
    hasher: RandomState,
    next_serial: AtomicU64,
    /// Holds recorded, counted by a hash of their context: a zero says at
    /// once, without a lock, that a context holds nothing (see
    /// [`Holdings::may_hold_in`]).
    by_context: [AtomicUsize; CONTEXT_COUNTS],
}

/// How many counts [`Holdings::by_context`] spreads contexts over.
const CONTEXT_COUNTS: usize = 64;

#[derive(Debug, Default)]
struct Shard {
    held: HashMap<Arc<str>, Vec<Holding>>,
    /// Waits that began as self-waits and have not ended (their `validity`
    /// unused).
    self_waits: HashMap<Arc<str>, Vec<Holding>>,
}

/// Which of a shard's lists a [`Recorded`] entry is in.
#[derive(Debug, Clone, Copy)]
enum List {
    Held,
    SelfWaits,
}

impl Shard {
    fn list(&mut self, list: List) -> &mut HashMap<Arc<str>, Vec<Holding>> {
        match list {
            List::Held => &mut self.held,
            List::SelfWaits => &mut self.self_waits,
        }
    }
}

/// One hold, as recorded.
#[derive(Debug)]
struct Holding {
    serial: u64,
    request: Request,
    since: Instant,
    /// Until when the hold is surely valid: a hold whose lease ran out (a
    /// detached one with a fixed lease, a lost one) keeps nobody out.
    validity: Option<Arc<Validity>>,
}

/// Who asks (or asked) for what.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The sequential context: the task (for the blocking API the thread) the
    /// caller runs in, or an explicit owner id.
    pub(crate) context: u64,
    /// The owner id the acquisition acts for.
    pub(crate) owner: u64,
    pub(crate) claim: Claim,
}

/// A recorded hold that keeps a request out: what a self-wait waits behind.
#[derive(Debug, Clone)]
pub(crate) struct Behind {
    owner: u64,
    claim: Claim,
    held_for: Duration,
}

impl Holdings {
    pub(crate) fn new() -> Self {
        Holdings {
            shards: std::array::from_fn(|_| Mutex::new(Shard::default())),
            hasher: RandomState::new(),
            next_serial: AtomicU64::new(0),
            by_context: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    fn shard(&self, name: &str) -> std::sync::MutexGuard<'_, Shard> {
        let index = (self.hasher.hash_one(name) % SHARDS as u64) as usize;
        // A panic while holding the lock leaves nothing half done (one map update).
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a hold of `name` just taken; the record lasts as long as the mark.
    pub(crate) fn record(
        self: &Arc<Self>,
        name: &Arc<str>,
        request: Request,
        validity: Arc<Validity>,
    ) -> HeldMark {
        self.enter(List::Held, name, request, Some(validity))
    }

    /// Puts an entry in one of `name`'s lists, until the returned value is
    /// dropped.
    fn enter(
        self: &Arc<Self>,
        list: List,
        name: &Arc<str>,
        request: Request,
        validity: Option<Arc<Validity>>,
    ) -> Recorded {
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        if let List::Held = list {
            self.context_count(request.context)
                .fetch_add(1, Ordering::Relaxed);
        }
        self.shard(name)
            .list(list)
            .entry(name.clone())
            .or_default()
            .push(Holding {
                serial,
                request,
                since: Instant::now(),
                validity,
            });
        Recorded {
            holdings: Arc::downgrade(self),
            list,
            name: name.clone(),
            serial,
        }
    }

    fn remove(&self, list: List, name: &str, serial: u64) {
        let mut shard = self.shard(name);
        let entries = shard.list(list);
        if let Some(held) = entries.get_mut(name) {
            // Serials are unique: one entry at most.
            if let Some(at) = held.iter().position(|holding| holding.serial == serial) {
                let gone = held.remove(at);
                if let List::Held = list {
                    self.context_count(gone.request.context)
                        .fetch_sub(1, Ordering::Relaxed);
                }
            }
            if held.is_empty() {
                entries.remove(name);
            }
        }
    }

    /// The hold of `request`'s own context that keeps it out of `name`, if any.
    pub(crate) fn behind(&self, name: &str, request: &Request) -> Option<Behind> {
        let shard = self.shard(name);
        Self::behind_in(&shard, name, request)
    }

    fn behind_in(shard: &Shard, name: &str, request: &Request) -> Option<Behind> {
        shard.held.get(name)?.iter().find_map(|holding| {
            let held = &holding.request;
            (held.context == request.context
                && held
                    .claim
                    .excludes(held.owner, &request.claim, request.owner)
                && !holding.validity.as_ref().is_some_and(|v| v.is_lost()))
            .then(|| Behind {
                owner: held.owner,
                claim: held.claim.clone(),
                held_for: holding.since.elapsed(),
            })
        })
    }

    fn context_count(&self, context: u64) -> &AtomicUsize {
        let spread = context.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        &self.by_context[(spread as usize) % CONTEXT_COUNTS]
    }

    /// Whether `context` may hold something: `false` is sure (no hold of it
    /// is recorded), `true` may be another context's hold. One atomic read:
    /// every wait asks, so that a wait of a task that holds nothing arms no
    /// deadlock timer (see `long_wait.rs`).
    pub(crate) fn may_hold_in(&self, context: u64) -> bool {
        self.context_count(context).load(Ordering::Relaxed) > 0
    }

    /// The holds of `context` (a task, or a thread), each with its lock name
    /// and owner id; lost holds left out. Visits every part of the record:
    /// only a wait that has lasted (see `deadlock.rs`) asks.
    pub(crate) fn held_in_context(&self, context: u64) -> Vec<(Arc<str>, u64)> {
        let mut holds = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (name, held) in &shard.held {
                holds.extend(
                    held.iter()
                        .filter(|h| h.request.context == context)
                        .filter(|h| !h.validity.as_ref().is_some_and(|v| v.is_lost()))
                        .map(|h| (name.clone(), h.request.owner)),
                );
            }
        }
        holds
    }

    /// How many waits for `name` are self-waits right now: begun behind a hold
    /// of their own context that is still held.
    pub(crate) fn self_waits_for(&self, name: &str) -> usize {
        let shard = self.shard(name);
        shard.self_waits.get(name).map_or(0, |waits| {
            waits
                .iter()
                .filter(|wait| Self::behind_in(&shard, name, &wait.request).is_some())
                .count()
        })
    }

    /// Counts a self-wait until the returned value is dropped.
    fn self_waiting(self: &Arc<Self>, name: &Arc<str>, request: Request) -> Recorded {
        self.enter(List::SelfWaits, name, request, None)
    }
}

/// An entry in the client's record (a hold, or a self-wait), removed when
/// dropped: with the guard that stands for the hold, or when the wait ends.
#[derive(Debug)]
pub(crate) struct Recorded {
    holdings: Weak<Holdings>,
    list: List,
    name: Arc<str>,
    serial: u64,
}

/// A hold's entry.
pub(crate) type HeldMark = Recorded;

impl Drop for Recorded {
    fn drop(&mut self) {
        if let Some(holdings) = self.holdings.upgrade() {
            holdings.remove(self.list, &self.name, self.serial);
        }
    }
}

/// How this client treats self-waits (from its config).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub(crate) on_self_wait: SelfWait,
    pub(crate) warn_after: Duration,
}

/// Runs `acquiring`, a wait of `request` for lock `name`, as this client's
/// policy says if it is a self-wait: refused at once, or
/// waited with one warning once it has lasted the policy's time and is still
/// behind its own task's hold. Anything else is just awaited.
///
/// Given a maker, not the future, so that the future has one place in this
/// one (see `long_wait::watched`).
// Not an `async fn`, which would keep each argument twice (as the argument
// and as the body's local): a waiting future carries both for its whole wait.
#[allow(clippy::manual_async_fn)]
pub(crate) fn guard_wait<'a, F, T>(
    holdings: &'a Arc<Holdings>,
    policy: Policy,
    name: &'a Arc<str>,
    request: &'a Request,
    acquiring: impl FnOnce() -> F + 'a,
) -> impl Future<Output = Result<T>> + 'a
where
    F: Future<Output = Result<T>> + 'a,
    T: 'a,
{
    async move {
        let Some(behind) = holdings.behind(name, request) else {
            return acquiring().await;
        };
        if matches!(policy.on_self_wait, SelfWait::Refuse) {
            return Err(Error::WouldDeadlock {
                name: name.to_string(),
                reason: reason(request, &behind),
            });
        }
        // Boxed: only self-waits pay for the timer.
        Box::pin(warn_if_still_behind(
            holdings,
            policy,
            name,
            request.clone(),
            acquiring(),
        ))
        .await
    }
}

async fn warn_if_still_behind<F, T>(
    holdings: &Arc<Holdings>,
    policy: Policy,
    name: &Arc<str>,
    request: Request,
    acquiring: F,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let _counted = holdings.self_waiting(name, request.clone());
    let started = Instant::now();
    let mut acquiring = std::pin::pin!(acquiring);
    tokio::select! {
        biased;
        done = &mut acquiring => return done,
        () = tokio::time::sleep(policy.warn_after) => {}
    }
    if let Some(behind) = holdings.behind(name, &request) {
        crate::trace::warn_event!(
            "lock {name:?}: a wait has lasted {:.1?} behind a hold of its own task: {} \
             (`Config::self_wait = SelfWait::Refuse` makes such a wait an immediate \
             `Error::WouldDeadlock`)",
            started.elapsed(),
            reason(&request, &behind)
        );
    }
    acquiring.await
}

/// What a self-wait waits behind, and the fix.
fn reason(request: &Request, behind: &Behind) -> String {
    if behind.owner == request.owner {
        // Only a read hold keeps its own owner out: the upgrade.
        return UPGRADE_REFUSED.to_owned();
    }
    format!(
        "owner {} asks for {} while the same task (or thread, id {}) holds its {} as owner \
         {} (taken {:.1?} ago), outside that hold's scope: only a sibling future's release can \
         let it in. Fix: {FIX}",
        request.owner,
        request.claim.describe_request(),
        request.context,
        behind.claim.describe(),
        behind.owner,
        behind.held_for,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> Arc<Validity> {
        let drift = crate::engine::validity::Drift { factor: 0.01 };
        Arc::new(Validity::new(
            Instant::now(),
            Duration::from_secs(30),
            drift,
        ))
    }

    fn request(context: u64, owner: u64, claim: Claim) -> Request {
        Request {
            context,
            owner,
            claim,
        }
    }

    #[test]
    fn conflicts_follow_each_kind_rule() {
        use Claim::*;
        // Another owner of the task: kept out of an exclusive hold.
        assert!(Exclusive.excludes(1, &Exclusive, 2));
        // The same owner re-enters.
        assert!(!Exclusive.excludes(1, &Exclusive, 1));
        // Readers share; a writer may read (downgrade) as itself only.
        assert!(!Read.excludes(1, &Read, 2));
        assert!(!Write.excludes(1, &Read, 1));
        assert!(Write.excludes(1, &Read, 2));
        // No upgrade, even for the reader itself.
        assert!(Read.excludes(1, &Write, 1));
        // Members conflict only where they overlap.
        let members =
            |names: [&str; 2]| -> Arc<[String]> { names.iter().map(|n| n.to_string()).collect() };
        let (ab, cd, bc) = (
            members(["a", "b"]),
            members(["c", "d"]),
            members(["b", "c"]),
        );
        assert!(!Members(ab.clone()).excludes(1, &Members(cd), 2));
        assert!(Members(ab).excludes(1, &Members(bc), 2));
    }

    #[test]
    fn a_record_lasts_as_long_as_its_mark_and_names_only_its_context() {
        let holdings = Arc::new(Holdings::new());
        let name: Arc<str> = "inventory".into();
        let mark = holdings.record(&name, request(10, 1, Claim::Exclusive), valid());
        // The same task, another owner: a self-wait.
        assert!(holdings
            .behind("inventory", &request(10, 2, Claim::Exclusive))
            .is_some());
        // Another task: an ordinary wait. Another lock: nothing.
        assert!(holdings
            .behind("inventory", &request(11, 2, Claim::Exclusive))
            .is_none());
        assert!(holdings
            .behind("other", &request(10, 2, Claim::Exclusive))
            .is_none());
        drop(mark);
        assert!(holdings
            .behind("inventory", &request(10, 2, Claim::Exclusive))
            .is_none());
        // A hold no longer surely valid keeps nobody out.
        let lost = valid();
        let _lost = holdings.record(&name, request(10, 1, Claim::Exclusive), lost.clone());
        lost.mark_lost();
        assert!(holdings
            .behind("inventory", &request(10, 2, Claim::Exclusive))
            .is_none());
        // A record kept with no guard (a detached hold's, in `detached.rs`)
        // lasts until it is dropped.
        let detached = holdings.record(&name, request(10, 1, Claim::Write), valid());
        assert!(holdings
            .behind("inventory", &request(10, 2, Claim::Read))
            .is_some());
        drop(detached);
        assert!(holdings
            .behind("inventory", &request(10, 2, Claim::Read))
            .is_none());
    }

    #[tokio::test]
    async fn refuse_names_the_fix_and_warn_waits_on() {
        let holdings = Arc::new(Holdings::new());
        let name: Arc<str> = "inventory".into();
        let _mark = holdings.record(&name, request(10, 1, Claim::Write), valid());
        let refuse = Policy {
            on_self_wait: SelfWait::Refuse,
            warn_after: Duration::from_secs(1),
        };
        let refused = guard_wait(
            &holdings,
            refuse,
            &name,
            &request(10, 2, Claim::Read),
            || async { Ok(()) },
        )
        .await
        .unwrap_err();
        assert!(refused.is_would_deadlock());
        let text = refused.to_string();
        assert!(
            text.contains("inventory") && text.contains("scope"),
            "{text}"
        );
        assert!(text.contains("OwnerMode::Task"), "{text}");

        let warn = Policy {
            on_self_wait: SelfWait::Warn,
            ..refuse
        };
        let counted = guard_wait(
            &holdings,
            warn,
            &name,
            &request(10, 2, Claim::Read),
            || async { Ok(holdings.self_waits_for("inventory")) },
        )
        .await
        .unwrap();
        assert_eq!(counted, 1, "a self-wait is counted while it lasts");
        assert_eq!(holdings.self_waits_for("inventory"), 0);
        // An ordinary wait (another task) is neither refused nor counted.
        guard_wait(
            &holdings,
            refuse,
            &name,
            &request(11, 2, Claim::Read),
            || async { Ok(()) },
        )
        .await
        .unwrap();
    }

    #[test]
    fn a_context_that_holds_nothing_is_known_at_once() {
        let holdings = Arc::new(Holdings::new());
        let name: Arc<str> = "l".into();
        assert!(!holdings.may_hold_in(10));
        let mark = holdings.record(&name, request(10, 1, Claim::Exclusive), valid());
        assert!(holdings.may_hold_in(10));
        let self_wait = holdings.self_waiting(&name, request(11, 2, Claim::Exclusive));
        drop(mark);
        assert!(!holdings.may_hold_in(10), "its one hold is gone");
        assert!(!holdings.may_hold_in(11), "a self-wait is no hold");
        drop(self_wait);
    }
}
