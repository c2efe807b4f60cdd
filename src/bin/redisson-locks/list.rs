//! `list [PATTERN]`: one line per lock-family object, a table a person can
//! scan for the one that is stuck, and a summary.

use std::time::Duration;

use redisson_locks::inspect::{Kind, Scanned, SkipReason, Skipped, Snapshot, MAX_SCAN};
use redisson_locks::Client;

use crate::escape::escaped;
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
        return format!(
            "No lock, semaphore or latch matches '{}'.\n{}",
            escaped(pattern),
            skipped_line(scanned)
        );
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
            .map(|cell| escaped(&cell).into_owned())
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
        (Kind::FairSemaphore, Some(count)) => {
            format!(
                "{count} free, {} held, {} queued",
                s.holders.len(),
                s.queue_len
            )
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
    line.push_str(&skipped_line(scanned));
    line
}

/// How many keys under the pattern were left out as no lock's name, and the
/// first few of them with why; empty when none were.
fn skipped_line(scanned: &Scanned) -> String {
    if scanned.skipped.is_empty() {
        return String::new();
    }
    let count = scanned.skipped.len();
    let named: Vec<String> = scanned
        .skipped
        .iter()
        .take(HOLDERS_SHOWN)
        .map(skipped)
        .collect();
    let more = match count.saturating_sub(HOLDERS_SHOWN) {
        0 => String::new(),
        n => format!(", +{n} more"),
    };
    format!(
        "Left out: {count} key{} under the pattern no lock can be named, so not read: {}{more}\n",
        if count == 1 { "" } else { "s" },
        named.join(", ")
    )
}

/// One skipped key: `'ab\u{fffd}' (not UTF-8)`.
fn skipped(key: &Skipped) -> String {
    let cut = if key.key.len() < key.len && key.reason != SkipReason::NotUtf8 {
        "..."
    } else {
        ""
    };
    let why = match key.reason {
        SkipReason::NotUtf8 => "not UTF-8".to_owned(),
        SkipReason::NotAName if key.len == 0 => "empty".to_owned(),
        SkipReason::NotAName => format!(
            "{} bytes, over the {} a name may have",
            key.len,
            redisson_locks::MAX_NAME_LEN
        ),
        SkipReason::SplitOverSlots => "its keys would be split over a cluster's slots".to_owned(),
        // `SkipReason` is non-exhaustive.
        _ => "no lock's name".to_owned(),
    };
    format!("'{}{cut}' ({why})", escaped(&key.key))
}
