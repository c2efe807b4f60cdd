//! Every skip-or-delay heuristic of the engine behind one switch, so that each
//! can be measured off against on with everything else in place (`lockbench`
//! under `REDISSON_LOCKS_WITHOUT=name,...`; the table is in BENCHMARKS.md). None
//! of them is needed for safety: each only skips a command or delays an
//! attempt. Each keeps DESIGN's liveness rule: a waiter sleeps only on a
//! message it is surely subscribed to and surely sent, or else for a bound
//! stated there (at most the re-check interval, never a lease), and
//! `tests/locks/liveness.rs` makes each one's missed order on purpose.
//!
//! | name | what it does | where |
//! |---|---|---|
//! | `handoff_window` | after a release of this client that woke a waiter, its newcomers hold back up to 5 ms behind the woken one | `line.rs` |
//! | `held_here` | the next at the head of the local line sleeps on the release of the hold the head before took, instead of trying at once | `wait/mod.rs` |
//! | `wake_jitter` | a waiter woken by another client's release yields a random few times before it tries | `wait/in_redis.rs` |
//! | `sleep_first` | a waiter whose lock's channel stood confirmed (subscribed by it or by others of its client) before its first attempt went out sleeps before its second attempt | `wait/in_redis.rs` |
//! | `fair_line` | a fair lock's waiters of one client wait in a local line: the first waits in Redis, the others are parked with their queue entries and send nothing else | `wait/queued.rs` |
//! | `release_grant` | a fair release grants the lock to its client's next waiter when that one is first in line, and that waiter defers its SUBSCRIBE (at most 20 ms) while a task of its client holds the lock | `successor.rs`, `release.rs` |
//! | `unsubscribe_linger` | a channel's last waiter leaving waits up to 1 s to unsubscribe with others | `engine/mod.rs` (passed to `transport/pubsub.rs`) |
//! | `listen_ahead` | while a client's fair waiters alternate with other clients', a head subscribes the next three parked heirs' channels with its own, in one SUBSCRIBE | `wait/in_redis.rs`, `successor.rs` |
//! | `waiter_order` | a reentrant lock's (and a write lock's) waiters keep an order of this crate's clients, a release names the first for a 20 ms turn, and a waiter sleeps through the releases before its client's turn (trying within 25 ms of being first, 50 ms of being second) | `lock/client_order.rs`, `wait/pause.rs` |
//! | `listen_before_join` | a fair waiter alone in its client's line, for a lock that client's waiters found busy in the last second, subscribes before it joins, and its join is its attempt after subscribing | `line.rs`, `wait/queued.rs` |
//!
//! The switch is a measuring hook, not configuration: only a build with the
//! feature `measure-heuristics` (the tests, `lockbench` and the campaigns
//! turn it on) reads it, once per process, from the environment, and a name
//! it does not know is ignored. Any other build runs with every heuristic on,
//! whatever the environment says, and warns once if the variable is set.

use std::sync::OnceLock;

/// Which heuristics are on (all, unless the environment says otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heuristics {
    pub(crate) handoff_window: bool,
    pub(crate) held_here: bool,
    pub(crate) wake_jitter: bool,
    pub(crate) sleep_first: bool,
    pub(crate) unsubscribe_linger: bool,
    pub(crate) fair_line: bool,
    pub(crate) release_grant: bool,
    pub(crate) listen_before_join: bool,
    pub(crate) listen_ahead: bool,
    pub(crate) waiter_order: bool,
}

/// The environment variable naming the heuristics to switch off, comma-separated.
const WITHOUT: &str = "REDISSON_LOCKS_WITHOUT";

/// The heuristics in force in this process.
pub(crate) fn heuristics() -> &'static Heuristics {
    static IN_FORCE: OnceLock<Heuristics> = OnceLock::new();
    IN_FORCE.get_or_init(|| {
        let without = std::env::var(WITHOUT).unwrap_or_default();
        if cfg!(feature = "measure-heuristics") {
            parse(&without)
        } else {
            if !without.is_empty() {
                crate::trace::warn_event!(
                    "{WITHOUT} is set but ignored: it switches heuristics off only in a build \
                     with the feature measure-heuristics"
                );
            }
            parse("")
        }
    })
}

fn parse(without: &str) -> Heuristics {
    let off = |name: &str| without.split(',').any(|n| n.trim() == name);
    Heuristics {
        handoff_window: !off("handoff_window"),
        held_here: !off("held_here"),
        wake_jitter: !off("wake_jitter"),
        sleep_first: !off("sleep_first"),
        unsubscribe_linger: !off("unsubscribe_linger"),
        fair_line: !off("fair_line"),
        release_grant: !off("release_grant"),
        listen_before_join: !off("listen_before_join"),
        listen_ahead: !off("listen_ahead"),
        waiter_order: !off("waiter_order"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_are_on_unless_named() {
        let all = parse("");
        assert!(all.handoff_window && all.held_here && all.wake_jitter);
        assert!(all.sleep_first && all.unsubscribe_linger && all.fair_line);
        assert!(all.release_grant && all.listen_before_join && all.listen_ahead);
        assert!(all.waiter_order);
        let some = parse("wake_jitter, sleep_first,unknown");
        assert!(!some.wake_jitter && !some.sleep_first);
        assert!(some.handoff_window && some.held_here && some.unsubscribe_linger);
    }
}
