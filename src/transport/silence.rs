//! Telling a cluster link that stopped answering altogether.
//!
//! redis-rs's cluster connection can stop dispatching every command for good:
//! under a reshard (slots moving by `CLUSTER SETSLOT` and `MIGRATE`) its slot
//! refresh began and never ended, and from then on every command of that
//! client timed out, for minutes, while the cluster and every other client
//! were fine (the reshard campaign in `tests/locks/cluster_campaigns.rs`; the
//! holds of the client that lost its link all expired). Nothing inside the
//! connection recovers it, so the client replaces it (see `conn.rs`).
//!
//! The sign is silence, not a timeout: a command that timed out while no
//! other command on the link was answered since it was sent. One slow or
//! paused node (a primary handing over in a graceful failover) times out its
//! own commands while the other nodes' keep answering, and that link is
//! kept; a cluster that is down answers nothing, and a replacement then fails
//! to connect and changes nothing.
//!
//! Nor does it take a whole timeout to tell. redis-rs refreshes its slot map
//! holding every command of the client while it asks one node, and when that
//! node is the primary that just handed over in a graceful failover (its
//! connection still behind a write the failover paused), every command of
//! the client waits a reply timeout: a fair lock's first waiter then sits on
//! a free lock, and everyone behind it, for seconds (the cluster campaign saw
//! 2 to 4 s). So a command silent for [`probe_after`] has the link probed
//! (`conn.rs`): a PING to every primary that ends at the first answer. Any
//! answer keeps the link (a slow node is not a stuck link); none within
//! another `probe_after` replaces it, and the commands still out on it fail
//! at once, their outcome unknown, as after a timeout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest a cluster command waits in silence before its link is probed.
const PROBE_AFTER_MOST: Duration = Duration::from_millis(500);

/// How long a cluster command waits in silence before its link is probed,
/// and the probe may take, under a reply timeout of `timeout`: a quarter of
/// it, at most half a second (a stuck link is then replaced within about a
/// second, against a reply timeout of 3 s by default).
pub(crate) fn probe_after(timeout: Duration) -> Duration {
    (timeout / 4).min(PROBE_AFTER_MOST)
}

/// When a link last answered, on the client's monotonic clock.
#[derive(Debug)]
pub(crate) struct Silence {
    started: Instant,
    /// Microseconds from `started` to the latest answer.
    answered_us: AtomicU64,
}

/// When a command was sent (see [`Silence::sent`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent(u64);

impl Default for Silence {
    fn default() -> Self {
        Silence {
            started: Instant::now(),
            answered_us: AtomicU64::new(0),
        }
    }
}

impl Silence {
    /// Microseconds since `started`, from 1: a command sent the instant the
    /// link was made is after the answer it starts with (0).
    fn now_us(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
    }

    /// A command goes out now.
    pub(crate) fn sent(&self) -> Sent {
        Sent(self.now_us())
    }

    /// The link answered a command (a reply, or an error the server sent).
    pub(crate) fn answered(&self) {
        self.answered_us.fetch_max(self.now_us(), Ordering::Relaxed);
    }

    /// Whether the link has said nothing at all since `sent`.
    pub(crate) fn silent_since(&self, sent: Sent) -> bool {
        self.answered_us.load(Ordering::Relaxed) < sent.0
    }

    /// What a command's `result` says of the link: an answer, or (a timeout
    /// with nothing else answered since `sent`) a link gone silent.
    pub(crate) fn judge<T>(&self, result: &redis::RedisResult<T>, sent: Sent) -> Verdict {
        match result {
            Ok(_) => {
                self.answered();
                Verdict::Answering
            }
            Err(e) if e.code().is_some() => {
                // The server said so: it is answering.
                self.answered();
                Verdict::Answering
            }
            Err(e) if e.is_timeout() && self.silent_since(sent) => Verdict::Silent,
            Err(_) => Verdict::Answering,
        }
    }
}

/// What one command's outcome says of its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It answered, or failed in a way that says nothing of the link.
    Answering,
    /// It timed out and nothing else on the link was answered meanwhile.
    Silent,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> redis::RedisResult<()> {
        Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "timed out",
        )))
    }

    #[test]
    fn a_timeout_is_silence_only_when_nothing_answered_since_its_send() {
        let silence = Silence::default();
        let sent = silence.sent();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(silence.judge(&timeout(), sent), Verdict::Silent);
        let later = silence.sent();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(silence.judge(&Ok(()), silence.sent()), Verdict::Answering);
        assert_eq!(silence.judge(&timeout(), later), Verdict::Answering);
    }

    #[test]
    fn an_error_the_server_sent_is_an_answer() {
        let silence = Silence::default();
        let sent = silence.sent();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let refused: redis::RedisResult<()> = Err(redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain),
            "TRYAGAIN",
        )));
        assert_eq!(silence.judge(&refused, sent), Verdict::Answering);
        assert!(!silence.silent_since(sent));
    }
}
