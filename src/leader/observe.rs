//! Watching leadership change, for anyone: wake on the messages that
//! announce a change (a release on the lock's unlock channel, a win of this
//! crate's participant on the election's channel), read who leads, report
//! it when it differs from what was reported last. A change nothing
//! announces (a leader whose lease ran out, a Java win) is found by the
//! re-read every `lock_watchdog_timeout / 3`, so a lost message costs at most
//! that, a third of a lease.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::Engine;
use crate::error::Result;
use crate::inspect::Rereads;
use crate::transport::keys::lock_channel;

use super::current::{self, Leader};
use super::record::leader_channel;

/// One change of leadership, as [`Observer::next`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderChange {
    /// A leader in a new epoch, greater than every epoch reported before
    /// (boxed: a vacancy carries nothing).
    Elected(Box<Leader>),
    /// Nobody leads.
    Vacant,
}

/// What was reported last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reported {
    Nothing,
    Vacant,
    Epoch(u64),
}

/// Leadership changes of one election, in order: see
/// [`LeaderElection::observe`](crate::LeaderElection::observe).
///
/// It listens as one more waiter of the client's subscription (no second
/// connection), in the class every message wakes, so it never takes a
/// wake-up from a participant. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Observer {
    client: Arc<Engine>,
    name: String,
    /// Wake-ups from both channels and the re-read interval, kept across
    /// calls of [`next`](Observer::next). After any reading, a failed one
    /// included, the next waits for one of them: a caller that keeps asking
    /// through a lasting refusal does not spin.
    rereads: Rereads,
    decider: Decider,
}

/// The reporting rule: what is news after what was reported.
#[derive(Debug)]
struct Decider {
    reported: Reported,
    /// The greatest epoch reported.
    highest: Option<u64>,
}

impl Observer {
    pub(super) fn new(client: Arc<Engine>, name: String) -> Observer {
        let every = (client.config.lock_watchdog_timeout / 3).max(Duration::from_millis(1));
        let mut rereads = Rereads::new(every);
        rereads.listen(
            &client,
            &name,
            vec![lock_channel(&name), leader_channel(&name)],
        );
        Observer {
            client,
            name,
            rereads,
            decider: Decider {
                reported: Reported::Nothing,
                highest: None,
            },
        }
    }

    /// The next change: the first call reports who leads now (or
    /// [`LeaderChange::Vacant`]); each later one waits until leadership
    /// differs from what was reported last. Epochs only grow: two changes
    /// between two readings are reported as the later one (a skipped epoch),
    /// never out of order, and a vacancy that came and went between two
    /// readings is not seen.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use redisson_locks::LeaderChange;
    ///
    /// let mut changes = client.get_leader_election("scheduler")?.observe();
    /// loop {
    ///     match changes.next().await? {
    ///         LeaderChange::Elected(leader) => println!("epoch {}: {}", leader.epoch, leader.owner.field),
    ///         LeaderChange::Vacant => println!("nobody leads"),
    ///         _ => {}
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`LeaderElection::leader`](crate::LeaderElection::leader); the
    /// observer stays usable: the next call reads again, after a wake-up or
    /// the re-read interval (so a loop through a lasting error does not spin).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call reports nothing and loses nothing; the next
    /// call reports the change it would have. The re-read interval runs from
    /// one reading to the next, not from each call, and a wake-up it took is
    /// kept for the next call: a caller that drops its calls (a `select!`
    /// against a ticker, a `timeout` in a loop), however often, still sees a
    /// change that no message announces within the interval.
    pub async fn next(&mut self) -> Result<LeaderChange> {
        loop {
            self.rereads.until_due().await;
            let began = tokio::time::Instant::now();
            let now = current::read(&self.client, &self.name).await;
            self.rereads.read(began);
            if let Some(change) = self.decider.change(now?) {
                return Ok(change);
            }
        }
    }
}

impl Observer {
    /// The same changes as a [`Stream`](futures_util::Stream) (the trait
    /// `tokio-stream` and `futures` re-export), for `while let Some(..)` with
    /// their `StreamExt`, `select!` over several, or `take_while`. It never
    /// ends by itself: an error is an item, and the next one reads again
    /// after a wake-up or the re-read interval.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use futures_util::StreamExt;
    /// use redisson_locks::LeaderChange;
    ///
    /// let changes = client.get_leader_election("scheduler")?.observe().into_stream();
    /// let mut changes = std::pin::pin!(changes);
    /// while let Some(change) = changes.next().await {
    ///     if let LeaderChange::Elected(leader) = change? {
    ///         println!("epoch {}", leader.epoch);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// As [`next`](Observer::next): dropping the stream unsubscribes.
    pub fn into_stream(
        self,
    ) -> impl futures_util::Stream<Item = Result<LeaderChange>> + Send + 'static {
        futures_util::stream::unfold(self, |mut observer| async move {
            let change = observer.next().await;
            Some((change, observer))
        })
    }
}

impl Decider {
    /// The change `now` is from what was reported last, if any; records it.
    fn change(&mut self, now: Option<Leader>) -> Option<LeaderChange> {
        let (seen, change) = match now {
            None => (Reported::Vacant, LeaderChange::Vacant),
            Some(leader) => (
                Reported::Epoch(leader.epoch),
                LeaderChange::Elected(Box::new(leader)),
            ),
        };
        let news = match (self.reported, seen) {
            (Reported::Nothing, _) => true,
            (Reported::Vacant, Reported::Vacant) => false,
            (Reported::Epoch(_), Reported::Vacant) => true,
            (Reported::Epoch(last), Reported::Epoch(e)) => e > last,
            // After a vacancy, only a newer epoch than any reported.
            (Reported::Vacant, Reported::Epoch(e)) => self.highest.is_none_or(|h| e > h),
            (_, Reported::Nothing) => false,
        };
        if !news {
            return None;
        }
        if let Reported::Epoch(e) = seen {
            self.highest = Some(e);
        }
        self.reported = seen;
        Some(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::Owner;

    fn leader(epoch: u64) -> Option<Leader> {
        Some(Leader {
            owner: Owner::parse("c:1", "me"),
            epoch,
            since_ms: None,
            lease_left: None,
        })
    }

    /// The reporting rule alone, without a server: the epochs it reports.
    fn reported(readings: Vec<Option<Leader>>) -> Vec<Option<u64>> {
        let mut state = (Reported::Nothing, None);
        readings
            .into_iter()
            .filter_map(|now| {
                let mut observer = Decider {
                    reported: state.0,
                    highest: state.1,
                };
                let change = observer.change(now);
                state = (observer.reported, observer.highest);
                change
            })
            .map(|change| match change {
                LeaderChange::Elected(l) => Some(l.epoch),
                LeaderChange::Vacant => None,
            })
            .collect()
    }

    #[test]
    fn changes_are_reported_once_in_order_and_skips_as_the_latest() {
        // The first reading, then repeats are not news.
        assert_eq!(
            reported(vec![None, None, leader(3), leader(3)]),
            [None, Some(3)]
        );
        // A skipped epoch (3 -> 5) is reported as the latest; an older
        // reading after a newer one is never reported.
        assert_eq!(
            reported(vec![
                leader(3),
                leader(5),
                leader(4),
                None,
                leader(5),
                leader(6)
            ]),
            [Some(3), Some(5), None, Some(6)]
        );
    }
}
