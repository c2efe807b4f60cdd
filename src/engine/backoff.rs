//! How a spin lock's waiter pauses between attempts: Redisson's back-off
//! curves, with jitter.

use std::time::Duration;

use crate::engine::retry::jitter;
use crate::error::Result;

/// How a spin lock's waiter pauses between attempts (Redisson's
/// `LockOptions.BackOff`), for
/// [`Client::get_spin_lock_with_backoff`](crate::Client::get_spin_lock_with_backoff).
///
/// ```no_run
/// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
/// use std::time::Duration;
/// use redisson_locks::BackOff;
///
/// // Redisson's default: 1 ms doubling up to 128 ms, with jitter.
/// let lock = client.get_spin_lock_with_backoff("batch", BackOff::default())?;
/// // Or a fixed pause between attempts:
/// let lock = client.get_spin_lock_with_backoff("batch", BackOff::Constant(Duration::from_millis(20)))?;
/// // Or a gentler curve:
/// let backoff = BackOff::Exponential {
///     initial: Duration::from_millis(5),
///     max: Duration::from_millis(500),
///     multiplier: 3,
/// };
/// let lock = client.get_spin_lock_with_backoff("batch", backoff)?;
/// let guard = lock.lock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum BackOff {
    /// Pauses that grow by `multiplier` from `initial` up to `max`, each drawn at
    /// random between half of it and all of it (jitter, so waiters that started
    /// together do not retry together). Redisson's default: 1 ms, 128 ms, ×2.
    Exponential {
        /// The first pause.
        initial: Duration,
        /// The longest pause.
        max: Duration,
        /// How much each pause grows.
        multiplier: u32,
    },
    /// The same pause every time (Redisson `ConstantBackOff`, default 64 ms).
    Constant(Duration),
}

impl Default for BackOff {
    fn default() -> Self {
        BackOff::Exponential {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

impl BackOff {
    /// Checks the values before any I/O.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = match *self {
            BackOff::Exponential {
                initial,
                max,
                multiplier,
            } => initial.is_zero() || max < initial || multiplier == 0 || max > crate::MAX_DURATION,
            BackOff::Constant(delay) => delay.is_zero() || delay > crate::MAX_DURATION,
        };
        if bad {
            return Err(crate::Error::invalid(format!(
                "spin lock back-off {self:?}: pauses must be positive and at most \
                 MAX_DURATION, max >= initial, multiplier >= 1"
            )));
        }
        Ok(())
    }

    /// The pause before retry number `attempt` (0 = the first retry).
    pub(crate) fn pause(&self, attempt: u32) -> Duration {
        match *self {
            BackOff::Constant(delay) => delay,
            BackOff::Exponential {
                initial,
                max,
                multiplier,
            } => {
                let grown = multiplier
                    .checked_pow(attempt.min(32))
                    .map_or(max, |factor| initial.saturating_mul(factor).min(max));
                // Jitter: between half of it and all of it.
                let half = grown / 2;
                half + jitter(grown - half)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_pauses_grow_with_jitter_and_stop_at_the_max() {
        let backoff = BackOff::default();
        for attempt in 0..20 {
            let pause = backoff.pause(attempt);
            let grown = Duration::from_millis(1 << attempt.min(7));
            assert!(pause >= grown / 2 && pause <= grown, "{attempt}: {pause:?}");
        }
        assert_eq!(
            BackOff::Constant(Duration::from_millis(64)).pause(9),
            Duration::from_millis(64)
        );
    }

    #[test]
    fn absurd_back_offs_are_refused() {
        assert!(BackOff::Constant(Duration::ZERO).validate().is_err());
        let backwards = BackOff::Exponential {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(1),
            multiplier: 2,
        };
        assert!(backwards.validate().is_err());
        assert!(BackOff::default().validate().is_ok());
    }
}
