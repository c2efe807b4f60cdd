//! `list [PATTERN]`: one line per lock-family object, a table a person can
//! scan for the one that is stuck, and a summary.

use std::time::Duration;

use redisson_locks::inspect::{Kind, Scanned, Snapshot, MAX_SCAN};
use redisson_locks::Client;

use crate::exit::Failure;
use crate::out;
use crate::units;

/// How many holders a line names before it says how many more there are (a
/// read-write lock can have hundreds of readers).
const HOLDERS_SHOWN: usize = 3;

/// Prints what matches `pattern`, warning on stderr when the scan stopped
/// short.
pub(crate) async fn run(client: &Client, pattern: &str, json: bool) -> Result<(), Failure> {
    let scanned = client
        .scan(pattern)
        .await
        .map_err(|e| Failure::of(&format!("cannot list '{pattern}'"), &e))?;
    if json {
        out::json(&scanned)?;
    } else {
        out::print(&render(&scanned, pattern))?;
    }
    if !scanned.complete {
        out::note(&format!(
            "redisson-locks: warning: more than {MAX_SCAN} names match '{pattern}'; only the \
             first {MAX_SCAN} were read: narrow the pattern to see the rest"
        ));
    }
    Ok(())
}

/// The table and its summary line.
pub(crate) fn render(scanned: &Scanned, pattern: &str) -> String {
    if scanned.objects.is_empty() {
        return format!("No lock, semaphore or latch matches '{pattern}'.\n");
    }
    let header = ["NAME", "KIND", "HOLDERS", "LEASE LEFT", "QUEUE/COUNT"].map(str::to_owned);
    let rows: Vec<[String; 5]> = scanned
        .objects
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                s.kind.label().to_owned(),
                holders(s),
                lease(s),
                queue_or_count(s),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text.push_str(&summary(scanned));
    text
}

/// `3f2a9c1e:7 (exclusive x2)`, comma-separated, the first few.
fn holders(s: &Snapshot) -> String {
    if s.holders.is_empty() {
        return "-".to_owned();
    }
    let mut named: Vec<String> = s
        .holders
        .iter()
        .take(HOLDERS_SHOWN)
        .map(|h| {
            format!(
                "{} ({} x{})",
                units::short_owner(&h.owner),
                units::mode(h.mode),
                h.holds
            )
        })
        .collect();
    if s.holders.len() > HOLDERS_SHOWN {
        named.push(format!("+{} more", s.holders.len() - HOLDERS_SHOWN));
    }
    named.join(", ")
}

/// How long until the object frees itself unless renewed: the key's TTL, or
/// the longest hold's lease (a multi-lock group's members end one by one).
fn lease(s: &Snapshot) -> String {
    let longest: Option<Duration> = s.holders.iter().filter_map(|h| h.lease_left).max();
    match s.ttl.or(longest) {
        Some(left) if !s.holders.is_empty() => units::duration(left),
        _ => "-".to_owned(),
    }
}

fn queue_or_count(s: &Snapshot) -> String {
    match (&s.kind, s.count) {
        (Kind::PermitExpirableSemaphore, Some(count)) => {
            format!("{count} free, {} out", s.permits_out)
        }
        (_, Some(count)) => format!("count {count}"),
        _ if s.queue_len > 0 => format!("{} queued", s.queue_len),
        _ => "-".to_owned(),
    }
}

fn summary(scanned: &Scanned) -> String {
    let objects = scanned.objects.len();
    let held = scanned.objects.iter().filter(|s| s.is_held()).count();
    let queued: usize = scanned.objects.iter().map(|s| s.queue_len).sum();
    let mut line = format!(
        "{objects} object{}, {held} held, {queued} waiting in fair queues",
        if objects == 1 { "" } else { "s" }
    );
    if !scanned.complete {
        line.push_str(&format!(
            " (incomplete: more than {MAX_SCAN} names matched)"
        ));
    }
    line.push('\n');
    line
}
