//! `deadlocks [PATTERN]`: every cycle of waits the server's records show,
//! each wait on its own line, and what the walks could not see.

use redisson_locks::inspect::DeadlockScan;
use redisson_locks::Client;

use crate::escape::escaped;
use crate::exit::{Code, Failure};
use crate::out;

/// Prints the cycles; exits with [`Code::DeadlockFound`] when there is one.
pub(crate) async fn run(client: &Client, pattern: &str, json: bool) -> Result<(), Failure> {
    let found = client
        .find_deadlocks(pattern)
        .await
        .map_err(|e| Failure::of(&format!("cannot look for deadlocks on '{pattern}'"), &e))?;
    if json {
        out::json(&found)?;
    } else {
        out::print(&render(&found, pattern))?;
    }
    if found.cycles.is_empty() {
        return Ok(());
    }
    // Said on stdout already: the code alone tells a script.
    Err(Failure::new(
        Code::DeadlockFound,
        format!("{} deadlock(s) found", found.cycles.len()),
    ))
}

/// The cycles, then a summary of what was read and what stayed unseen.
pub(crate) fn render(found: &DeadlockScan, pattern: &str) -> String {
    let mut text = String::new();
    if found.cycles.is_empty() {
        text.push_str(&format!(
            "No deadlock among the waits recorded for '{}'.\n",
            escaped(pattern)
        ));
    }
    for (n, cycle) in found.cycles.iter().enumerate() {
        text.push_str(&format!(
            "Deadlock {} ({} waits):\n",
            n + 1,
            cycle.steps.len()
        ));
        for step in &cycle.steps {
            text.push_str(&format!("  {}\n", escaped(&step.to_string())));
        }
        if let Some(victim) = cycle.victim() {
            text.push_str(&format!(
                "  OnDeadlock::Refuse gives up the youngest wait: {}\n",
                escaped(&victim.waiter)
            ));
        }
    }
    text.push_str(&format!(
        "{} wait(s) recorded; {} holder(s) whose wait is unknown (Java threads are seen \
         only in a fair lock's queue; a wait shorter than its client's threshold writes no \
         record){}{}.\n",
        found.waits,
        found.dead_ends,
        if found.cut {
            "; a walk stopped at its bound (64 waits, 512 reads): a longer cycle is not shown"
        } else {
            ""
        },
        if found.unreadable > 0 {
            format!(
                "; {} value(s) under a record key were no records",
                found.unreadable
            )
        } else {
            String::new()
        }
    ));
    text
}
