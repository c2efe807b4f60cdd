//! `show NAME`: everything one snapshot says, as a person reads it. Only the
//! parts the kind has are printed (a semaphore has no holders, a plain lock no
//! queue), so that what is printed is what there is.

use redisson_locks::inspect::{HoldMode, Holder, Kind, Queued, Snapshot, MAX_ENTRIES};
use redisson_locks::Client;

use crate::exit::{Code, Failure};
use crate::out;
use crate::page::Page;
use crate::units;

/// Prints the snapshot of `name`; exits with [`Code::NotFound`] when no
/// lock-family object lives there (after printing it, with `--json`).
pub(crate) async fn run(client: &Client, name: &str, json: bool) -> Result<(), Failure> {
    let snapshot = client
        .inspect(name)
        .await
        .map_err(|e| Failure::of(&format!("cannot inspect '{name}'"), &e))?;
    if json {
        out::json(&snapshot)?;
    } else if snapshot.kind.is_lock_family() {
        out::print(&render(&snapshot))?;
    }
    match not_found(&snapshot) {
        Some(why) => Err(Failure::new(Code::NotFound, why)),
        None => Ok(()),
    }
}

/// Why no lock-family object is under the snapshot's name, if none is.
pub(crate) fn not_found(snapshot: &Snapshot) -> Option<String> {
    let name = &snapshot.name;
    match &snapshot.kind {
        Kind::Absent => Some(format!(
            "nothing lives under '{name}' (no lock, semaphore or latch: check the name, \
             and the database the URL or file selects)"
        )),
        Kind::Foreign { redis_type } => Some(format!(
            "'{name}' is a {redis_type} in no lock's layout: not a lock, semaphore or latch"
        )),
        _ => None,
    }
}

/// The whole snapshot, one `Label: value` per line.
pub(crate) fn render(s: &Snapshot) -> String {
    let mut page = Page::default();
    page.field(0, "Name:", &s.name);
    page.field(0, "Kind:", kind(&s.kind));
    page.field(0, "TTL:", units::lease(s.ttl));
    page.field(0, "Server time:", units::utc(s.server_time_ms));
    if has_holders(&s.kind) {
        holders(&mut page, s);
    }
    if matches!(s.kind, Kind::FairLock | Kind::FairSemaphore) || s.queue_len > 0 {
        queue(&mut page, s);
    }
    if let Some(count) = s.count {
        let what = match s.kind {
            Kind::PermitExpirableSemaphore | Kind::FairSemaphore => "permits available",
            _ => "a semaphore's permits available, or a latch's count",
        };
        page.field(0, "Count:", format!("{count} ({what})"));
    }
    if matches!(s.kind, Kind::PermitExpirableSemaphore) {
        permits(&mut page, s);
    }
    if let Some(token) = s.fencing_token {
        page.field(
            0,
            "Fencing token:",
            format!("{token} (the last one handed out; the next holder gets a greater one)"),
        );
    }
    listeners(&mut page, s);
    if s.truncated {
        page.field(
            0,
            "Note:",
            format!("more than {MAX_ENTRIES} entries: only the first are shown"),
        );
    }
    page.into_text()
}

/// The kind, with what the layout cannot tell apart.
fn kind(kind: &Kind) -> String {
    match kind {
        Kind::Lock => "lock (reentrant, spin or non-reentrant: one layout)".to_owned(),
        Kind::ReadWriteLock { mode } => format!("read-write lock, in {mode} mode"),
        Kind::Counter => {
            "semaphore or count-down latch (one layout: the listeners say which)".to_owned()
        }
        other => other.label().to_owned(),
    }
}

fn has_holders(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::Lock
            | Kind::FairLock
            | Kind::FencedLock
            | Kind::ReadWriteLock { .. }
            | Kind::MultiLockGroup
            | Kind::FairSemaphore
    )
}

/// The holders section: each holder with everything known of it.
pub(crate) fn holders(page: &mut Page, s: &Snapshot) {
    if s.holders.is_empty() {
        page.field(0, "Holders:", "none: it is free");
        return;
    }
    page.field(0, "Holders:", s.holders.len());
    for holder in &s.holders {
        holder_block(page, holder);
    }
}

fn holder_block(page: &mut Page, h: &Holder) {
    page.line(1, &h.owner.field);
    if !h.owner.client_id.is_empty() {
        page.field(2, "Client id:", &h.owner.client_id);
        page.field(2, "Thread:", &h.owner.thread);
    }
    let mut who = units::identity(&h.owner);
    if let Some(identity) = &h.owner.identity {
        who.push_str(&format!(", {}", units::connected(identity)));
    }
    page.field(2, "Identity:", who);
    match h.mode {
        // A fair semaphore's hold: its count is of permits.
        HoldMode::Permits => page.field(2, "Permits:", h.holds),
        _ => page.field(2, "Holds:", h.holds),
    }
    page.field(2, "Mode:", units::mode(h.mode));
    page.field(2, "Lease left:", units::lease(h.lease_left));
    if !h.read_leases.is_empty() {
        let leases: Vec<String> = h
            .read_leases
            .iter()
            .map(|lease| lease.map_or_else(|| "gone".to_owned(), units::duration))
            .collect();
        page.field(2, "Read leases:", leases.join(", "));
    }
    if let Some(member) = &h.member {
        page.field(2, "Member:", member);
    }
}

/// The fair queue, first in line first.
fn queue(page: &mut Page, s: &Snapshot) {
    if s.queue_len == 0 {
        page.field(0, "Fair queue:", "empty");
        return;
    }
    page.field(
        0,
        "Fair queue:",
        format!("{} waiting, first in line first", s.queue_len),
    );
    for (place, waiter) in s.queue.iter().enumerate() {
        waiter_block(page, place + 1, waiter);
    }
    if s.queue.len() < s.queue_len {
        page.line(1, format!("... and {} more", s.queue_len - s.queue.len()));
    }
}

fn waiter_block(page: &mut Page, place: usize, q: &Queued) {
    page.line(1, format!("{place}. {}", q.owner.field));
    page.field(2, "Deadline:", units::deadline(q.deadline_in_ms));
    page.field(2, "Identity:", units::identity(&q.owner));
}

/// A permit-expirable semaphore's permits out, each with its lease (or that
/// it expired, or never expires).
pub(crate) fn permits(page: &mut Page, s: &Snapshot) {
    page.field(0, "Permits out:", s.permits_out);
    for permit in &s.permits {
        let lease = if permit.expired {
            "expired (the next operation returns it)".to_owned()
        } else {
            match permit.lease_left {
                Some(left) => format!("lease left {}", units::duration(left)),
                None => "no lease (it never expires)".to_owned(),
            }
        };
        page.line(1, format!("{}  {lease}", permit.id));
    }
}

fn listeners(page: &mut Page, s: &Snapshot) {
    if s.listeners.is_empty() {
        page.field(0, "Listeners:", "none known");
        return;
    }
    let what = match s.kind {
        // Each fair waiter sleeps on a channel of its own, `<channel>:<owner>`.
        Kind::FairLock => "clients subscribed (watches; fair waiters listen on their own channels)",
        // One channel per waiting client, `<channel>:<client id>`.
        Kind::FairSemaphore => "subscribed, on each waiting client's channel",
        _ => "clients subscribed (waiters asleep, watches)",
    };
    page.field(0, "Listeners:", what);
    for l in &s.listeners {
        page.line(1, format!("{}  {}", l.channel, l.clients));
    }
}
