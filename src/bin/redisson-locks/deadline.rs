//! When a command whose hold is ending gets SIGTERM and SIGKILL.
//!
//! The next holder may start the moment the hold stops being surely valid,
//! so SIGKILL must land by then, not a grace after it (consul keeps its
//! grace below its lock-delay for the same reason): SIGTERM goes out once
//! the hold is surely valid for no more than the grace, and SIGKILL a grace
//! later, or sooner when the validity ends sooner. Validity moves on with
//! each renewal, so it is read again at every step; a hold lost outright (a
//! renewal found it gone, an operator forced it open) has none left, and
//! gets both signals at once.
//!
//! A grace must fit in what a healthy hold keeps ahead of it, or SIGTERM
//! would go out while all is well: shorter than a fixed lease or a term
//! (`--max-hold`), which only count down; and no more than a third of the
//! watchdog's lease, which is renewed every third and so, renewals on time,
//! stays above two thirds (a renewal running late by up to a third is
//! absorbed). An asked-for grace that does not fit is a wrong command line;
//! the default (10 s) is shortened to fit.

use std::time::Duration;

use tokio::time::Instant;

use crate::exit::{Code, Failure};

/// The grace when none is asked for, if it fits.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// What a hold's validity is made of, which a grace must fit in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Span {
    /// A lease set once (`--lease`): it counts down from the acquisition.
    Fixed(Duration),
    /// A term (`--max-hold`): the hold ends then, however it is renewed.
    Term(Duration),
    /// The watchdog's lease, renewed every third of it.
    Renewed(Duration),
}

impl Span {
    /// The longest grace that fits, and whether a grace equal to it does.
    fn limit(self) -> (Duration, bool) {
        match self {
            Span::Fixed(lease) | Span::Term(lease) => (lease, false),
            Span::Renewed(lease) => (lease / 3, true),
        }
    }

    fn refusal(self, grace: Duration) -> String {
        let grace = crate::units::duration(grace);
        match self {
            Span::Fixed(lease) => format!(
                "--grace {grace} is not shorter than --lease {}: SIGKILL must land before \
                 the lease ends, so SIGTERM would go out as the command starts",
                crate::units::duration(lease)
            ),
            Span::Term(term) => format!(
                "--grace {grace} is not shorter than --max-hold {}: SIGKILL must land \
                 before the term ends, so SIGTERM would go out as the command starts",
                crate::units::duration(term)
            ),
            Span::Renewed(lease) => format!(
                "--grace {grace} is longer than a third of the watchdog's lease ({}, \
                 lockWatchdogTimeout): SIGTERM goes out once the hold is surely valid for no \
                 more than the grace, which renewals running late would reach; use --grace {} \
                 or less",
                crate::units::duration(lease),
                crate::units::duration(lease / 3)
            ),
        }
    }
}

/// What a hold of a client with `config` is made of: `lease` when fixed,
/// else the watchdog's; and a term, the handle's or the config's.
pub(crate) fn spans(
    config: &redisson_locks::Config,
    lease: Option<Duration>,
    term: Option<Duration>,
) -> Vec<Span> {
    let mut spans = vec![match lease {
        Some(lease) => Span::Fixed(lease),
        None => Span::Renewed(config.lock_watchdog_timeout),
    }];
    spans.extend(term.or(config.max_hold).map(Span::Term));
    spans
}

/// The grace the command gets under a hold made of `spans`: `asked`, when
/// it fits each (else a usage error); by default 10 s, shortened to fit.
pub(crate) fn grace(asked: Option<Duration>, spans: &[Span]) -> Result<Duration, Failure> {
    let Some(asked) = asked else {
        return Ok(spans.iter().fold(DEFAULT_GRACE, |grace, span| {
            let (limit, inclusive) = span.limit();
            let fitting = if inclusive {
                limit
            } else {
                // Strictly shorter: a third of it, as the watchdog's rule.
                limit / 3
            };
            grace.min(fitting)
        }));
    };
    for span in spans {
        let (limit, inclusive) = span.limit();
        let fits = if inclusive {
            asked <= limit
        } else {
            asked < limit
        };
        if !fits {
            return Err(Failure::new(Code::Usage, span.refusal(asked)));
        }
    }
    Ok(asked)
}

/// What to do about the command now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing until then (or until something happens), `None`: nothing ever.
    Wait(Option<Instant>),
    /// Send SIGTERM.
    Terminate,
    /// Send SIGKILL.
    Kill,
}

/// Where a command stands with the signals its hold's end calls for.
#[derive(Debug)]
pub(crate) struct Deadline {
    grace: Duration,
    terminated: Option<Instant>,
    killed: bool,
}

impl Deadline {
    pub(crate) fn new(grace: Duration) -> Deadline {
        Deadline {
            grace,
            terminated: None,
            killed: false,
        }
    }

    /// The step for a hold surely valid for `valid_for` more (`None`: lost)
    /// at `now`; a signal step is taken as sent.
    pub(crate) fn step(&mut self, valid_for: Option<Duration>, now: Instant) -> Step {
        if self.killed {
            return Step::Wait(None);
        }
        let left = valid_for.unwrap_or(Duration::ZERO);
        match self.terminated {
            None if left > self.grace => Step::Wait(Some(now + (left - self.grace))),
            None => {
                self.terminated = Some(now);
                Step::Terminate
            }
            Some(at) => {
                let kill_at = (at + self.grace).min(now + left);
                if now >= kill_at {
                    self.killed = true;
                    Step::Kill
                } else {
                    Step::Wait(Some(kill_at))
                }
            }
        }
    }

    /// Whether SIGKILL was sent: nothing is left to do.
    pub(crate) fn done(&self) -> bool {
        self.killed
    }

    /// Whether the command was signalled for its hold's end.
    pub(crate) fn acted(&self) -> bool {
        self.terminated.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn sigterm_goes_out_a_grace_before_the_validity_ends_and_sigkill_by_then() {
        let start = Instant::now();
        let mut deadline = Deadline::new(2 * S);
        assert_eq!(
            deadline.step(Some(10 * S), start),
            Step::Wait(Some(start + 8 * S))
        );
        // A renewal moved the validity on: wait again.
        let later = start + 8 * S;
        assert_eq!(
            deadline.step(Some(9 * S), later),
            Step::Wait(Some(later + 7 * S))
        );
        let late = later + 7 * S;
        assert_eq!(deadline.step(Some(2 * S), late), Step::Terminate);
        // Renewed after SIGTERM: still no later than the grace.
        assert_eq!(
            deadline.step(Some(20 * S), late),
            Step::Wait(Some(late + 2 * S))
        );
        // The validity now ends before the grace would: SIGKILL by then.
        let sooner = late + S / 2;
        assert_eq!(deadline.step(Some(S), sooner), Step::Wait(Some(sooner + S)));
        assert_eq!(deadline.step(Some(Duration::ZERO), sooner + S), Step::Kill);
        assert_eq!(deadline.step(None, sooner + S), Step::Wait(None));
        assert!(deadline.acted());
    }

    #[test]
    fn a_hold_lost_outright_gets_both_signals_at_once() {
        let now = Instant::now();
        let mut deadline = Deadline::new(10 * S);
        assert_eq!(deadline.step(None, now), Step::Terminate);
        assert_eq!(deadline.step(None, now), Step::Kill);
    }

    #[test]
    fn a_grace_must_fit_in_the_hold() {
        let fixed = [Span::Fixed(3 * S)];
        assert_eq!(grace(Some(S), &fixed).ok(), Some(S));
        assert!(grace(Some(3 * S), &fixed).is_err());
        assert!(grace(Some(S), &[Span::Term(S)]).is_err());
        let renewed = [Span::Renewed(30 * S)];
        assert_eq!(grace(Some(10 * S), &renewed).ok(), Some(10 * S));
        assert!(grace(Some(11 * S), &renewed).is_err());
        // The default fits itself in.
        assert_eq!(grace(None, &renewed).ok(), Some(10 * S));
        assert_eq!(
            grace(None, &[Span::Renewed(1_500 * S / 1000)]).ok(),
            Some(S / 2)
        );
        assert_eq!(
            grace(None, &[Span::Fixed(3 * S), Span::Renewed(60 * S)]).ok(),
            Some(S)
        );
    }
}
