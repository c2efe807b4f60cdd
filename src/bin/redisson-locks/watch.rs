//! `watch NAME`: a live view, one frame per [`Watch::next`] (a message on the
//! object's channel, or the interval), with how long each holder has held it
//! and each waiter has waited.
//!
//! Redis keeps no start time of a hold or a wait, so the watch keeps its own:
//! when it first saw each owner field. An owner already there at the first
//! frame has been there *at least* that long; one that leaves and comes back
//! starts again, since its new hold is a new hold.
//!
//! [`Watch::next`]: redisson_locks::inspect::Watch::next

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use redisson_locks::inspect::{Kind, Snapshot};
use redisson_locks::Client;
use serde::Serialize;

use crate::exit::Failure;
use crate::page::Page;
use crate::{out, show, units};

/// Clear the screen and move home: each frame replaces the last on a terminal.
const REDRAW: &str = "\x1b[2J\x1b[H";

/// What the command line asked of the watch.
#[derive(Debug)]
pub(crate) struct Options<'a> {
    pub(crate) name: &'a str,
    pub(crate) interval: Duration,
    /// Stop after this many frames; `None`: until Ctrl-C.
    pub(crate) count: Option<u64>,
    /// Read at the interval only (see `--poll`).
    pub(crate) poll: bool,
    pub(crate) json: bool,
}

/// Draws frames until `count` of them (or for ever).
///
/// Ctrl-C ends it between frames or during a wait, with success: the client
/// is then closed in order (its subscription given back). The tool holds
/// nothing and wrote nothing, and the terminal was never switched out of its
/// normal mode (no alternate screen, no hidden cursor).
pub(crate) async fn run(client: &Client, options: Options<'_>) -> Result<(), Failure> {
    let name = options.name;
    let failed = |e: redisson_locks::Error| Failure::of(&format!("cannot watch '{name}'"), &e);
    let mut watch = client.watch(name, options.interval).map_err(failed)?;
    if options.poll {
        watch = watch.polling();
    }
    let terminal = !options.json && std::io::stdout().is_terminal();
    let mut holders = FirstSeen::default();
    let mut waiters = FirstSeen::default();
    let mut frame = 0u64;
    loop {
        let snapshot = tokio::select! {
            next = watch.next() => next.map_err(failed)?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let now = Instant::now();
        frame += 1;
        let held = holders.update(snapshot.holders.iter().map(|h| h.owner.field.as_str()), now);
        let waited = waiters.update(snapshot.queue.iter().map(|q| q.owner.field.as_str()), now);
        if options.json {
            out::json_line(&Frame {
                frame,
                snapshot: &snapshot,
                held_for_ms: held,
                waiting_for_ms: waited,
            })?;
        } else {
            let text = render(&snapshot, frame, options.interval, &held, &waited);
            if terminal {
                out::print(&format!("{REDRAW}{text}"))?;
            } else {
                // A blank line between frames: a reader of the pipe splits on it.
                out::print(&format!("{text}\n"))?;
            }
        }
        if options.count.is_some_and(|count| frame >= count) {
            return Ok(());
        }
    }
}

/// One frame, as `--json` prints it (one line each).
#[derive(Debug, Serialize)]
struct Frame<'a> {
    /// 1 for the first.
    frame: u64,
    snapshot: &'a Snapshot,
    /// One per holder, in the snapshot's order.
    held_for_ms: Vec<Age>,
    /// One per waiter shown, first in line first.
    waiting_for_ms: Vec<Age>,
}

/// How long the watch has seen an owner.
#[derive(Debug, Clone, Serialize)]
struct Age {
    /// The owner field.
    owner: String,
    /// Since the watch first saw it.
    ms: u64,
    /// Whether it was there at the first frame: it has been there at least
    /// `ms`, perhaps much longer.
    at_least: bool,
}

impl Age {
    fn text(&self) -> String {
        let length = units::duration(Duration::from_millis(self.ms));
        if self.at_least {
            format!("at least {length}")
        } else {
            length
        }
    }
}

/// When the watch first saw each owner field, of one role (holders or
/// waiters).
#[derive(Debug, Default)]
struct FirstSeen {
    /// Field -> (first seen, seen at the first frame).
    since: HashMap<String, (Instant, bool)>,
    /// Whether a frame has been drawn (owners seen after it arrived).
    started: bool,
}

impl FirstSeen {
    /// The ages of `fields` at `now`: known ones keep their first sight, new
    /// ones start now, and owners gone are forgotten.
    fn update<'a>(&mut self, fields: impl Iterator<Item = &'a str>, now: Instant) -> Vec<Age> {
        let at_start = !self.started;
        self.started = true;
        let mut kept = HashMap::new();
        let ages = fields
            .map(|field| {
                let (first, at_least) = self.since.get(field).copied().unwrap_or((now, at_start));
                kept.insert(field.to_owned(), (first, at_least));
                Age {
                    owner: field.to_owned(),
                    ms: u64::try_from(now.duration_since(first).as_millis()).unwrap_or(u64::MAX),
                    at_least,
                }
            })
            .collect();
        self.since = kept;
        ages
    }
}

/// One frame as text.
fn render(s: &Snapshot, frame: u64, interval: Duration, held: &[Age], waited: &[Age]) -> String {
    let mut page = Page::default();
    // A lock nobody holds has no key: to a watch that is a free lock, not a
    // wrong name (the first frame of a name never used says so just as well).
    let kind = match s.kind {
        Kind::Absent => "nothing under the name",
        ref kind => kind.label(),
    };
    page.line(
        0,
        format!(
            "{} ({kind}) at {} UTC, frame {frame}: redrawn on each change, at least every {}",
            s.name,
            units::clock(s.server_time_ms),
            units::duration(interval)
        ),
    );
    if let (Kind::Foreign { .. }, Some(why)) = (&s.kind, show::not_found(s)) {
        page.line(0, format!("Nothing to watch: {why}."));
        return page.into_text();
    }
    if matches!(s.kind, Kind::Counter | Kind::PermitExpirableSemaphore) {
        counts(&mut page, s);
        return page.into_text();
    }
    if s.holders.is_empty() {
        page.field(0, "Holder:", "none: it is free");
    }
    for (holder, age) in s.holders.iter().zip(held) {
        page.field(
            0,
            "Holder:",
            format!(
                "{} ({} x{})",
                units::short_owner(&holder.owner),
                units::mode(holder.mode),
                holder.holds
            ),
        );
        page.field(1, "held for", age.text());
        page.field(1, "lease left", units::lease(holder.lease_left));
        page.field(1, "who", units::identity(&holder.owner));
    }
    if s.queue_len > 0 {
        page.field(
            0,
            "Waiting:",
            format!("{}, first in line first", s.queue_len),
        );
        for (place, (waiter, age)) in s.queue.iter().zip(waited).enumerate() {
            page.line(
                1,
                format!(
                    "{}. {}  waiting for {}, deadline {}, {}",
                    place + 1,
                    units::short_owner(&waiter.owner),
                    age.text(),
                    units::deadline(waiter.deadline_in_ms),
                    units::identity(&waiter.owner)
                ),
            );
        }
    }
    if let Some(token) = s.fencing_token {
        page.field(0, "Token:", format!("{token} (the last handed out)"));
    }
    page.into_text()
}

/// A semaphore's or latch's frame: its count, and a permit-expirable
/// semaphore's permits with their leases.
fn counts(page: &mut Page, s: &Snapshot) {
    page.field(
        0,
        "Count:",
        s.count.map_or_else(|| "-".to_owned(), |c| c.to_string()),
    );
    if matches!(s.kind, Kind::PermitExpirableSemaphore) {
        show::permits(page, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_keeps_its_first_sight_until_it_leaves() {
        let mut seen = FirstSeen::default();
        let t0 = Instant::now();
        let first = seen.update(["a"].into_iter(), t0);
        assert_eq!((first[0].ms, first[0].at_least), (0, true));

        let t1 = t0 + Duration::from_secs(2);
        let second = seen.update(["a", "b"].into_iter(), t1);
        assert_eq!((second[0].ms, second[0].at_least), (2_000, true));
        assert_eq!((second[1].ms, second[1].at_least), (0, false));
        assert_eq!(second[0].text(), "at least 2.0s");

        // `a` leaves; when it comes back, its new hold counts from then.
        let t2 = t1 + Duration::from_secs(1);
        seen.update(["b"].into_iter(), t2);
        let t3 = t2 + Duration::from_secs(1);
        let back = seen.update(["b", "a"].into_iter(), t3);
        assert_eq!((back[0].ms, back[0].at_least), (2_000, false));
        assert_eq!((back[1].ms, back[1].at_least), (0, false));
        assert_eq!(back[0].text(), "2.0s");
    }
}
