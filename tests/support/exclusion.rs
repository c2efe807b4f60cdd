//! The one exclusion check of the tests: who is inside a critical section
//! right now, and how many times two were who must not be.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts writers (exclusive holders) and readers inside one section, and
/// every entry that found someone it excludes inside.
#[derive(Debug, Default)]
pub struct Exclusion {
    writers: AtomicUsize,
    readers: AtomicUsize,
    overlaps: AtomicUsize,
}

/// One holder inside; leaves the section when dropped.
#[must_use = "the holder leaves the section when this is dropped"]
pub struct Inside<'a> {
    exclusion: &'a Exclusion,
    writer: bool,
}

impl Exclusion {
    /// An exclusive holder enters: an overlap when anyone else is inside.
    pub fn enter(&self) -> Inside<'_> {
        let writers = self.writers.fetch_add(1, Ordering::SeqCst);
        if writers != 0 || self.readers.load(Ordering::SeqCst) != 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        Inside {
            exclusion: self,
            writer: true,
        }
    }

    /// A shared holder (a reader) enters: an overlap when a writer is inside.
    pub fn enter_shared(&self) -> Inside<'_> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        if self.writers.load(Ordering::SeqCst) != 0 {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        Inside {
            exclusion: self,
            writer: false,
        }
    }

    /// How many entries found someone they exclude inside.
    pub fn overlaps(&self) -> usize {
        self.overlaps.load(Ordering::SeqCst)
    }

    /// How many readers are inside now.
    pub fn readers(&self) -> usize {
        self.readers.load(Ordering::SeqCst)
    }

    /// Fails the test, naming `what`, when two holders that exclude each other
    /// were ever inside at once.
    pub fn assert_never_overlapped(&self, what: &str) {
        assert_eq!(
            self.overlaps(),
            0,
            "{what}: holders that exclude each other were inside at once"
        );
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let count = if self.writer {
            &self.exclusion.writers
        } else {
            &self.exclusion.readers
        };
        count.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn an_overlap_is_counted_and_a_turn_is_not() {
    let section = Exclusion::default();
    drop(section.enter());
    drop(section.enter());
    let a = section.enter_shared();
    let b = section.enter_shared();
    assert_eq!(section.overlaps(), 0);
    let writer = section.enter();
    assert_eq!(section.overlaps(), 1);
    drop((a, b));
    let _second = section.enter();
    assert_eq!(section.overlaps(), 2);
    drop(writer);
}
