//! Owner identity: which client, and which task or thread inside it, holds a lock.
//!
//! Redisson names an owner `<client-uuid>:<thread-id>`. A Rust service has tasks
//! rather than threads, so the default id is the current tokio task's id: nested
//! critical sections inside one task re-enter, as they do inside one Java thread.
//! Outside a task the current thread gets an id from a range no task id reaches.
//! Work handed between tasks names an explicit id instead.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids handed to threads that are not inside a tokio task start here, far above any
/// task id tokio will hand out, and still within Java's signed 64-bit `long`.
const THREAD_ID_BASE: u64 = 1 << 62;

static NEXT_THREAD_ID: AtomicU64 = AtomicU64::new(THREAD_ID_BASE);

thread_local! {
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// Which id a lock handle acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OwnerId {
    /// The task (or thread) that calls each method, looked up at call time.
    Current,
    /// A fixed id the caller chose.
    Explicit(u64),
}

impl OwnerId {
    /// The numeric id this handle acts for right now.
    pub(crate) fn resolve(self) -> u64 {
        match self {
            OwnerId::Explicit(id) => id,
            OwnerId::Current => current_id(),
        }
    }
}

/// The id of the calling tokio task, or of the calling thread outside a task.
pub fn current_id() -> u64 {
    match tokio::task::try_id() {
        Some(id) => task_id_number(id),
        None => THREAD_ID.with(|cell| {
            if cell.get() == 0 {
                cell.set(NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed));
            }
            cell.get()
        }),
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
    fn thread_ids_are_stable_and_outside_task_range() {
        let a = current_id();
        assert_eq!(a, current_id());
        assert!(a >= THREAD_ID_BASE);
        let b = std::thread::spawn(current_id).join().unwrap();
        assert_ne!(a, b);
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
