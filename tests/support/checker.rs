//! The exclusion checker: holds are logged with CLOCK_MONOTONIC times (one clock for
//! the whole machine, so processes compare) to an append-only file, and the checker
//! fails when two different owners' valid holds of one lock overlap. A hold is valid
//! from the moment `lock()` returned to the moment the release was about to be sent,
//! cut at the lease deadline (counted from when the acquire was sent).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Nanoseconds of CLOCK_MONOTONIC.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// One hold, as its holder saw it.
#[derive(Debug, Clone)]
pub struct HoldRecord {
    pub owner: String,
    pub lock: String,
    pub acquired_ns: u64,
    pub released_ns: u64,
    /// `u64::MAX` for a watchdog hold.
    pub lease_deadline_ns: u64,
}

impl HoldRecord {
    fn valid_until(&self) -> u64 {
        self.released_ns.min(self.lease_deadline_ns)
    }
}

/// Where holders append their records.
#[derive(Debug, Clone)]
pub struct HoldLog {
    path: PathBuf,
}

impl HoldLog {
    pub fn create(dir: &Path) -> HoldLog {
        let path = dir.join(format!("holds-{}.log", monotonic_ns()));
        std::fs::write(&path, b"").expect("hold log");
        HoldLog { path }
    }

    pub fn open(path: impl Into<PathBuf>) -> HoldLog {
        HoldLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record in one write (O_APPEND keeps lines whole across processes).
    pub fn record(&self, hold: &HoldRecord) {
        let line = format!(
            "{} {} {} {} {}\n",
            hold.owner, hold.lock, hold.acquired_ns, hold.released_ns, hold.lease_deadline_ns
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .expect("open hold log");
        file.write_all(line.as_bytes()).expect("write hold log");
    }

    pub fn read(&self) -> Vec<HoldRecord> {
        std::fs::read_to_string(&self.path)
            .expect("read hold log")
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                Some(HoldRecord {
                    owner: f.first()?.to_string(),
                    lock: f.get(1)?.to_string(),
                    acquired_ns: f.get(2)?.parse().ok()?,
                    released_ns: f.get(3)?.parse().ok()?,
                    lease_deadline_ns: f.get(4)?.parse().ok()?,
                })
            })
            .collect()
    }

    /// Every pair of overlapping valid holds by different owners of one lock.
    pub fn overlaps(&self) -> Vec<(HoldRecord, HoldRecord)> {
        let mut holds = self.read();
        holds.sort_by_key(|h| (h.lock.clone(), h.acquired_ns));
        let mut found = Vec::new();
        for (i, a) in holds.iter().enumerate() {
            for b in holds[i + 1..].iter().take_while(|b| b.lock == a.lock) {
                // b started no earlier than a; they overlap when b started while a
                // was still valid (and b itself was ever valid).
                if b.owner != a.owner
                    && b.acquired_ns < a.valid_until()
                    && b.acquired_ns < b.valid_until()
                {
                    found.push((a.clone(), b.clone()));
                }
            }
        }
        found
    }
}
