//! Owner identity: which client, and which sequential context inside it, holds a
//! lock.
//!
//! Redisson names an owner `<client-uuid>:<thread-id>`, and a Java thread is a
//! sequential context: whatever it does while holding a lock is nested inside the
//! hold. A tokio task is not: futures polled together by one task (`join!`,
//! `select!`, `FuturesUnordered`, `buffer_unordered`) run side by side, and a task
//! id cannot tell a nested call from a sibling future. So by default an owner is
//! one acquisition, and re-entry is explicit: code run inside a hold's *scope*
//! ([`LockGuard::scope`](crate::LockGuard::scope), [`RLock::with`](crate::RLock::with))
//! acts as that hold's owner for that lock, so it re-enters, while siblings outside
//! the scope wait their turn. The scope is a task-local frame around the future
//! that runs inside the hold, so it follows exactly what is awaited inside it.
//!
//! Two other modes: an explicit id (work handed between tasks, or acting for a
//! Java thread), and the Java-style "owner = task" mode for code ported line by
//! line, which shares holds between sibling futures of one task.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Ids handed to threads that are not inside a tokio task start here, far above any
/// task id tokio will hand out, and still within Java's signed 64-bit `long`.
const THREAD_ID_BASE: u64 = 1 << 62;

/// Ids of single acquisitions (the default mode) start here: below the thread
/// range, far above any task id.
const ACQUISITION_ID_BASE: u64 = 1 << 61;

/// The next OS thread's number (see [`thread_number`]).
static NEXT_THREAD_NUMBER: AtomicU64 = AtomicU64::new(1);
static NEXT_ACQUISITION_ID: AtomicU64 = AtomicU64::new(ACQUISITION_ID_BASE);

tokio::task_local! {
    /// The holds whose scope the current future runs in, innermost first.
    static SCOPE: Option<Arc<Frame>>;
}

/// One hold's scope: inside it, acquisitions of `lock` (on `client`) act as `owner`.
#[derive(Debug)]
struct Frame {
    client: Arc<str>,
    lock: Arc<str>,
    owner: u64,
    outer: Option<Arc<Frame>>,
}

/// The owner that the innermost enclosing scope gives lock `lock` of `client`.
fn scoped_owner(client: &str, lock: &str) -> Option<u64> {
    SCOPE
        .try_with(|scope| {
            let mut frame = scope.as_deref();
            while let Some(f) = frame {
                if &*f.client == client && &*f.lock == lock {
                    return Some(f.owner);
                }
                frame = f.outer.as_deref();
            }
            None
        })
        .ok()
        .flatten()
}

/// Runs `future` inside the scope of a hold of `lock` (on `client`) by `owner`.
pub(crate) fn in_scope<F: Future>(
    client: Arc<str>,
    lock: Arc<str>,
    owner: u64,
    future: F,
) -> impl Future<Output = F::Output> {
    let outer = SCOPE.try_with(Clone::clone).ok().flatten();
    let frame = Arc::new(Frame {
        client,
        lock,
        owner,
        outer,
    });
    SCOPE.scope(Some(frame), future)
}

thread_local! {
    /// The calling thread's number; 0 until its first use.
    static THREAD_NUMBER: Cell<u64> = const { Cell::new(0) };
}

/// The calling OS thread's number in this process (1, 2, ...), assigned at its
/// first use: the one source of thread owners. The async API outside a task
/// and the blocking API (`blocking::current_thread_id`) each place it in a range
/// of their own, so a blocking thread is never the same owner as async code.
pub(crate) fn thread_number() -> u64 {
    THREAD_NUMBER.with(|cell| {
        if cell.get() == 0 {
            cell.set(NEXT_THREAD_NUMBER.fetch_add(1, Ordering::Relaxed));
        }
        cell.get()
    })
}

/// Which id a lock handle acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OwnerId {
    /// The default: the enclosing scope's owner for this lock, or else a new
    /// owner for each acquisition.
    Scoped,
    /// Java-style: the task (or thread) that calls each method, looked up at call
    /// time. Sibling futures of one task share its holds.
    Task,
    /// A fixed id the caller chose.
    Explicit(u64),
}

impl OwnerId {
    /// The id an acquisition of `lock` on `client` acts for right now, and
    /// whether that id is new, made for this acquisition alone: then nothing
    /// else of that owner is held or under way, so it cannot be a re-entry and
    /// waits behind nobody of its own.
    pub(crate) fn for_acquisition(self, client: &str, lock: &str) -> (u64, bool) {
        match self {
            OwnerId::Scoped => match scoped_owner(client, lock) {
                Some(scope) => (scope, false),
                None => (new_acquisition_id(), true),
            },
            other => (other.for_query(client, lock), false),
        }
    }

    /// The sequential context an acquisition through this handle runs in, as
    /// self-waits are told (see `self_wait.rs`): the calling task (or thread),
    /// or for an explicit id that id, which stands for a context of the
    /// caller's choosing (the blocking API's thread, a Java thread).
    pub(crate) fn context(self) -> u64 {
        match self {
            OwnerId::Explicit(id) => id,
            OwnerId::Scoped | OwnerId::Task => current_id(),
        }
    }

    /// The id a query or release (hold count, held by, unlock) acts for: for a
    /// scoped handle outside any scope of `lock`, an owner that holds nothing.
    pub(crate) fn for_query(self, client: &str, lock: &str) -> u64 {
        match self {
            OwnerId::Explicit(id) => id,
            OwnerId::Task => current_id(),
            OwnerId::Scoped => scoped_owner(client, lock).unwrap_or(NO_OWNER),
        }
    }
}

/// The owner a scoped handle queries for outside any scope: none holds as it
/// (the one id below every acquisition's; the error for a release it was
/// refused recognises it, see `error.rs`).
const NO_OWNER: u64 = crate::error::NOBODY_OWNER_ID;
const _: () = assert!(NO_OWNER == ACQUISITION_ID_BASE - 1);

/// A fresh owner id for one acquisition.
pub(crate) fn new_acquisition_id() -> u64 {
    NEXT_ACQUISITION_ID.fetch_add(1, Ordering::Relaxed)
}

/// The id of the calling tokio task, or of the calling thread outside a task.
///
/// It is the owner id of a handle made with
/// [`RLock::with_task_owner`](crate::RLock::with_task_owner): stable within a
/// task, different from one task to another.
///
/// ```
/// use redisson_locks::current_id;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (first, again) = tokio::spawn(async { (current_id(), current_id()) }).await.unwrap();
/// let other = tokio::spawn(async { current_id() }).await.unwrap();
/// assert_eq!(first, again);
/// assert_ne!(first, other);
/// # }
/// ```
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// let lock = client.get_lock("inventory")?.with_task_owner();
/// let guard = lock.lock().await?;
/// assert_eq!(guard.owner_id(), redisson_locks::current_id());
/// assert!(lock.is_held_by(redisson_locks::current_id()).await?);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub fn current_id() -> u64 {
    match tokio::task::try_id() {
        Some(id) => task_id_number(id),
        None => THREAD_ID_BASE + thread_number(),
    }
}

/// tokio shows a task id only through `Display`, as its decimal number.
fn task_id_number(id: tokio::task::Id) -> u64 {
    struct Digits {
        value: u64,
    }
    impl fmt::Write for Digits {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for b in s.bytes() {
                let digit = b.checked_sub(b'0').filter(|d| *d <= 9).ok_or(fmt::Error)?;
                self.value = self
                    .value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(digit)))
                    .ok_or(fmt::Error)?;
            }
            Ok(())
        }
    }
    let mut digits = Digits { value: 0 };
    match fmt::write(&mut digits, format_args!("{id}")) {
        Ok(()) => digits.value,
        // Not a decimal number: a future tokio changed the format. Fall back to a
        // stable hash so the id is still unique per task in practice.
        Err(_) => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            id.hash(&mut h);
            h.finish() & (THREAD_ID_BASE - 1)
        }
    }
}

/// The owner field Redisson stores in the lock hash: `<client-uuid>:<id>`.
pub(crate) fn owner_field(client_id: &str, id: u64) -> String {
    format!("{client_id}:{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_field_is_uuid_colon_id() {
        assert_eq!(owner_field("abc", 7), "abc:7");
    }

    #[test]
    fn nobody_is_told_from_real_owners() {
        let nobody = OwnerId::Scoped.for_query("c", "a");
        assert!(crate::error::is_nobody(&owner_field("6c47fd2f-aa", nobody)));
        assert!(crate::error::is_nobody(&format!(
            "{}:write",
            owner_field("6c47fd2f-aa", nobody)
        )));
        assert!(!crate::error::is_nobody(&owner_field(
            "6c47fd2f-aa",
            nobody + 1
        )));
        assert!(!crate::error::is_nobody(&owner_field("6c47fd2f-aa", 7)));
        assert!(!crate::error::is_nobody("permit 1f2e"));
    }

    #[test]
    fn thread_ids_are_stable_and_outside_task_range() {
        let a = current_id();
        assert_eq!(a, current_id());
        assert!(a >= THREAD_ID_BASE);
        let b = std::thread::spawn(current_id).join().unwrap();
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn scopes_give_their_lock_its_owner_and_nest() {
        let (client, a, b): (Arc<str>, Arc<str>, Arc<str>) = ("c".into(), "a".into(), "b".into());
        assert_eq!(OwnerId::Scoped.for_query("c", "a"), NO_OWNER);
        let (first, new) = OwnerId::Scoped.for_acquisition("c", "a");
        assert!(new, "outside any scope each acquisition is a new owner");
        assert_ne!(first, OwnerId::Scoped.for_acquisition("c", "a").0);
        // Java's owners and explicit ids are never new: others may share them.
        assert!(!OwnerId::Task.for_acquisition("c", "a").1);
        assert!(!OwnerId::Explicit(5).for_acquisition("c", "a").1);
        in_scope(client.clone(), a.clone(), 7, async {
            assert_eq!(OwnerId::Scoped.for_acquisition("c", "a"), (7, false));
            assert_eq!(OwnerId::Scoped.for_query("c", "a"), 7);
            // Another lock, or the same name on another client, is not in scope.
            assert_eq!(OwnerId::Scoped.for_query("c", "b"), NO_OWNER);
            assert_eq!(OwnerId::Scoped.for_query("d", "a"), NO_OWNER);
            in_scope(client.clone(), b.clone(), 9, async {
                assert_eq!(OwnerId::Scoped.for_acquisition("c", "a").0, 7);
                assert_eq!(OwnerId::Scoped.for_acquisition("c", "b").0, 9);
            })
            .await;
            // A sibling polled beside the scope is outside it.
        })
        .await;
        assert_eq!(OwnerId::Scoped.for_query("c", "a"), NO_OWNER);
    }

    #[tokio::test]
    async fn each_task_has_its_own_id() {
        let a = tokio::spawn(async { (current_id(), current_id()) })
            .await
            .unwrap();
        let b = tokio::spawn(async { current_id() }).await.unwrap();
        assert_eq!(a.0, a.1);
        assert_ne!(a.0, b);
        assert!(a.0 < THREAD_ID_BASE);
    }
}
