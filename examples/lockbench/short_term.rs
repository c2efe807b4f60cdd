//! Fairness over short spans, besides Jain's index over a whole run: the
//! overtakes (a grant to a task that asked well after another that still
//! waits), and Dice's two short-term measures ("Avoiding Scalability
//! Collapse by Restricting Concurrency", Dice and Kogan): the median time a
//! task takes to reacquire after its release, and the lock working-set size,
//! how many distinct tasks acquire within a window of acquisitions.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::json;

/// How much later a task must have asked than one still waiting for its
/// grant to count as an overtake (the measure).
const OVERTAKE_AFTER: Duration = Duration::from_millis(20);

/// How many acquisitions one working-set window spans (Dice's: 1,000), or a
/// quarter of the run when it is shorter.
const WINDOW: usize = 1_000;

/// One acquisition: which task, when it asked, when it got the lock, and when
/// it released it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acquisition {
    pub(crate) task: usize,
    pub(crate) asked: Instant,
    pub(crate) got: Instant,
    pub(crate) released: Instant,
}

/// The short-term measures of a run's acquisitions, as JSON.
pub(crate) fn measures(mut acquisitions: Vec<Acquisition>) -> serde_json::Value {
    let overtakes = overtakes(&mut acquisitions);
    let reacquire = median_reacquire(&mut acquisitions);
    let (window, working_set) = working_set(&mut acquisitions);
    json!({
        "overtakes": overtakes,
        "overtake_after_ms": OVERTAKE_AFTER.as_millis() as u64,
        "median_reacquire_us": reacquire.map(|d| d.as_secs_f64() * 1e6),
        "working_set": {"window": window, "mean_tasks": working_set},
    })
}

/// Grants to a task that asked at least [`OVERTAKE_AFTER`] after another
/// task that got its grant later.
fn overtakes(acquisitions: &mut [Acquisition]) -> u64 {
    acquisitions.sort_by_key(|a| a.asked);
    let mut count = 0;
    // The latest grant among those that asked at least OVERTAKE_AFTER before.
    let mut latest_earlier_grant: Option<Instant> = None;
    let mut earlier = 0;
    for i in 0..acquisitions.len() {
        let me = acquisitions[i];
        while earlier < i && acquisitions[earlier].asked + OVERTAKE_AFTER <= me.asked {
            let got = acquisitions[earlier].got;
            latest_earlier_grant = Some(latest_earlier_grant.map_or(got, |l| l.max(got)));
            earlier += 1;
        }
        if latest_earlier_grant.is_some_and(|latest| latest > me.got) {
            count += 1;
        }
    }
    count
}

/// The median, over every task's consecutive acquisitions, of the time from
/// a release to the same task's next grant.
fn median_reacquire(acquisitions: &mut [Acquisition]) -> Option<Duration> {
    acquisitions.sort_by_key(|a| (a.task, a.got));
    let mut gaps: Vec<Duration> = acquisitions
        .windows(2)
        .filter(|pair| pair[0].task == pair[1].task)
        .map(|pair| pair[1].got.saturating_duration_since(pair[0].released))
        .collect();
    gaps.sort();
    gaps.get(gaps.len() / 2).copied()
}

/// The window used, and the mean number of distinct tasks granted within
/// each whole window of that many consecutive grants.
fn working_set(acquisitions: &mut [Acquisition]) -> (usize, f64) {
    acquisitions.sort_by_key(|a| a.got);
    let window = WINDOW.min(acquisitions.len() / 4).max(1);
    let sizes: Vec<usize> = acquisitions
        .chunks_exact(window)
        .map(|chunk| chunk.iter().map(|a| a.task).collect::<HashSet<_>>().len())
        .collect();
    let mean = match sizes.len() {
        0 => 0.0,
        n => sizes.iter().sum::<usize>() as f64 / n as f64,
    };
    (window, mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn a_late_asker_served_first_is_one_overtake_and_a_near_tie_none() {
        let t0 = Instant::now();
        let a = |task, asked, got| Acquisition {
            task,
            asked: at(t0, asked),
            got: at(t0, got),
            released: at(t0, got + 1),
        };
        // 1 asked 30 ms after 0 and was served before it: an overtake.
        assert_eq!(overtakes(&mut [a(0, 0, 100), a(1, 30, 50)]), 1);
        // Asked 10 ms after: within the tie window, not counted.
        assert_eq!(overtakes(&mut [a(0, 0, 100), a(1, 10, 50)]), 0);
        // In order: none.
        assert_eq!(overtakes(&mut [a(0, 0, 50), a(1, 30, 100)]), 0);
    }

    #[test]
    fn reacquire_and_working_set_are_counted_per_task() {
        let t0 = Instant::now();
        let mut runs: Vec<Acquisition> = (0..8u64)
            .map(|i| Acquisition {
                task: (i % 2) as usize,
                asked: at(t0, i * 10),
                got: at(t0, i * 10 + 1),
                released: at(t0, i * 10 + 2),
            })
            .collect();
        // Each task's next grant comes 19 ms after its release.
        assert_eq!(median_reacquire(&mut runs), Some(Duration::from_millis(19)));
        let (window, mean) = working_set(&mut runs);
        assert_eq!((window, mean), (2, 2.0));
    }
}
