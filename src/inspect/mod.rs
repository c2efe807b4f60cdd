//! The inspector: who holds what, since when it is valid, and who waits.
//!
//! [`Client::inspect`](crate::Client::inspect) reads everything under one name
//! in one script (`lua/inspect.lua`: nothing can change between its parts, and
//! nothing is written) and tells the kind from the layout, so that what Java
//! Redisson wrote reads exactly as what this crate wrote.
//! [`Client::scan`](crate::Client::scan) does it for every name matching a
//! pattern, with SCAN (never KEYS), on every primary of a cluster.
//!
//! - `look.rs`: the operations (one snapshot, a scan, a watch).
//! - `read.rs`: the script's reply as a [`Snapshot`].
//! - `scan.rs`: the names worth inspecting, found at bounded cost.
//! - `glob.rs`: Redis's glob patterns, matched in time linear in the name.
//! - `rereads.rs`: when a watch or an election observer reads again.
//! - `force.rs`: freeing whatever holds a name, through each kind's force script.
//! - `doctor.rs`: a checkup of the servers, for what in their setup breaks locks.

mod deadlocks;
mod doctor;
mod force;
mod glob;
mod look;
mod read;
mod rereads;
mod scan;

use std::time::Duration;

use serde::Serialize;

pub use crate::engine::identity::Identity;
pub use deadlocks::DeadlockScan;
pub(crate) use deadlocks::{find_all as find_deadlocks, GraphWalker};
pub(crate) use doctor::{checkup, Wish};
pub use doctor::{Checkup, Finding, Verdict};
pub(crate) use force::force_unlock;
pub(crate) use look::{inspect, inspect_holders, scan};
pub use look::{Scanned, Watch, MAX_SCAN};
pub(crate) use read::{read_fair_snapshot, read_snapshot};
pub(crate) use rereads::Rereads;
pub(crate) use scan::scan_names;
pub use scan::{SkipReason, Skipped, SKIPPED_SHOWN};

/// The most entries read of any one list, zset or hash of an object: a fair
/// queue of 100,000 waiters, or a foreign hash, costs the server no more than
/// this per inspection. [`Snapshot::truncated`] says when it cut.
pub const MAX_ENTRIES: usize = 10_000;

/// What lives under one name, read at one instant.
///
/// Every time is as the server saw it at [`server_time_ms`](Snapshot::server_time_ms);
/// leases are the server's PTTLs then. The kind is told from the layout, which
/// several kinds share (see [`Kind`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// The name inspected.
    pub name: String,
    /// What the layout says it is.
    pub kind: Kind,
    /// The server's clock when the snapshot was read, epoch milliseconds.
    pub server_time_ms: u64,
    /// The name's own key's remaining TTL; `None` when it has none or is absent.
    #[serde(rename = "ttl_ms", serialize_with = "millis")]
    pub ttl: Option<Duration>,
    /// The holds, one entry per owner (per owner and mode for a read-write
    /// lock, per member for a single-hash multi-lock).
    pub holders: Vec<Holder>,
    /// A fair lock's or a fair semaphore's waiters, first in line first (a
    /// fair semaphore's deadline is its waiter's client's).
    pub queue: Vec<Queued>,
    /// How many waiters the queue holds (more than `queue` when it was cut
    /// at [`MAX_ENTRIES`], or when a fair semaphore's line could not be read:
    /// an ACL that grants its hash alone, which counts its waiters' asks).
    pub queue_len: usize,
    /// The value of a synchronizer's count: the permits available of a
    /// semaphore, a permit-expirable or a fair semaphore, or a latch's count.
    pub count: Option<i64>,
    /// A permit-expirable semaphore's permits taken, each with its lease.
    pub permits: Vec<PermitLease>,
    /// How many permits are out (more than `permits` when cut; a fair
    /// semaphore's: the permits its holds hold).
    pub permits_out: usize,
    /// A fenced lock's token counter: the last token handed out.
    pub fencing_token: Option<u64>,
    /// How many clients listen on the object's channel(s) for its messages:
    /// waiters asleep (one subscription per client, however many of its tasks
    /// wait), counted by the server just after the snapshot.
    pub listeners: Vec<Listeners>,
    /// Whether a list, zset or hash had more than [`MAX_ENTRIES`] entries and
    /// was cut.
    pub truncated: bool,
}

/// What a name holds, told from its layout.
///
/// Some kinds share a layout: a spin lock and a non-reentrant lock write a
/// reentrant lock's hash; a fair lock with nobody queued has left no queue; a
/// semaphore's permits and a latch's count are both a number. Such a name
/// reads as the kind the layout shows ([`Kind::Lock`], [`Kind::Counter`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type")]
#[non_exhaustive]
pub enum Kind {
    /// Nothing lives under the name.
    Absent,
    /// A reentrant lock's hash (`getLock`; also a spin lock, a non-reentrant
    /// lock, or a fair lock that nobody waits for).
    Lock,
    /// A fair lock: its queue or its waiters' deadlines exist.
    FairLock,
    /// A fenced lock: its token counter exists (held or not).
    FencedLock,
    /// A read-write lock: its hash has a `mode` field.
    ReadWriteLock {
        /// `read` or `write`.
        mode: String,
    },
    /// A single-hash multi-lock (`getMultiLock(group, values)`).
    MultiLockGroup,
    /// A number: a semaphore's permits or a count-down latch's count (one
    /// layout; [`Snapshot::listeners`] says whose channel has listeners).
    Counter,
    /// A permit-expirable semaphore: its permits' leases exist.
    PermitExpirableSemaphore,
    /// A fair semaphore (`getFairSemaphore`, this crate's own): a hash of
    /// `permits` and its holds, waiters and clients' epochs. Its holders
    /// are its holds (each [`HoldMode::Permits`]), its queue its line.
    FairSemaphore,
    /// Not a lock-family object: a key of this Redis type in another layout.
    Foreign {
        /// The key's Redis type (`hash`, `string`, `list`, ...).
        redis_type: String,
    },
}

impl Kind {
    /// A short name, as the command-line tool prints it.
    ///
    /// ```
    /// use redisson_locks::inspect::Kind;
    ///
    /// assert_eq!(Kind::FairLock.label(), "fair lock");
    /// assert_eq!(Kind::ReadWriteLock { mode: "read".into() }.label(), "read-write lock");
    /// // A layout several kinds share says so.
    /// assert_eq!(Kind::Counter.label(), "semaphore or latch");
    /// assert_eq!(Kind::Foreign { redis_type: "list".into() }.label(), "not a lock");
    /// ```
    pub fn label(&self) -> &str {
        match self {
            Kind::Absent => "absent",
            Kind::Lock => "lock",
            Kind::FairLock => "fair lock",
            Kind::FencedLock => "fenced lock",
            Kind::ReadWriteLock { .. } => "read-write lock",
            Kind::MultiLockGroup => "multi-lock group",
            Kind::Counter => "semaphore or latch",
            Kind::PermitExpirableSemaphore => "permit-expirable semaphore",
            Kind::FairSemaphore => "fair semaphore",
            Kind::Foreign { .. } => "not a lock",
        }
    }

    /// Whether a lock-family object lives under the name.
    ///
    /// ```
    /// use redisson_locks::inspect::Kind;
    ///
    /// assert!(Kind::Lock.is_lock_family());
    /// assert!(Kind::PermitExpirableSemaphore.is_lock_family());
    /// // Nothing there, or someone else's key: nothing for a lock tool to touch.
    /// assert!(!Kind::Absent.is_lock_family());
    /// assert!(!Kind::Foreign { redis_type: "string".into() }.is_lock_family());
    /// ```
    pub fn is_lock_family(&self) -> bool {
        !matches!(self, Kind::Absent | Kind::Foreign { .. })
    }
}

/// One owner's hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Holder {
    /// Who holds it.
    pub owner: Owner,
    /// How: exclusive (a lock), a read or a write hold.
    pub mode: HoldMode,
    /// How many times the owner holds it (re-entries counted).
    pub holds: u64,
    /// How long the hold lasts unless renewed: the lock's PTTL, a read
    /// holder's longest read lease, or a multi-lock member's own end.
    #[serde(rename = "lease_left_ms", serialize_with = "millis")]
    pub lease_left: Option<Duration>,
    /// A read holder's holds, each with its own lease (`None`: its key is
    /// gone, the hold no longer keeps the lock).
    #[serde(rename = "read_leases_ms", serialize_with = "millis_each")]
    pub read_leases: Vec<Option<Duration>>,
    /// The member a single-hash multi-lock hold is of (its hashed id).
    pub member: Option<String>,
}

/// How a hold holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HoldMode {
    /// A lock's hold (reentrant, fair, fenced, spin, a multi-lock member).
    Exclusive,
    /// A fair semaphore's hold of [`holds`](Holder::holds) permits, under
    /// the id of the waiter that took it (its owner's field).
    Permits,
    /// A read-write lock's read hold.
    Read,
    /// A read-write lock's write hold.
    Write,
}

/// An owner, as its hash field names it: `<client id>:<thread or task id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Owner {
    /// The field as stored (a writer's without its `:write`).
    pub field: String,
    /// The client id (the first 36 characters: a UUID), or empty when the
    /// field is not in Redisson's shape.
    pub client_id: String,
    /// The thread (Java) or task (Rust) id after it.
    pub thread: String,
    /// Whether the owner is of the client that inspected.
    pub mine: bool,
    /// Who the client is, when it announced itself (a client of this crate
    /// with [`Config::announce`](crate::Config::announce) on).
    pub identity: Option<Identity>,
}

impl Owner {
    /// Splits an owner field into its client id and thread.
    pub(crate) fn parse(field: &str, my_id: &str) -> Owner {
        let (client_id, thread) = match field.split_at_checked(36) {
            Some((id, rest)) if rest.starts_with(':') && uuid::Uuid::try_parse(id).is_ok() => {
                (id.to_owned(), rest[1..].to_owned())
            }
            _ => (String::new(), field.to_owned()),
        };
        Owner {
            mine: !client_id.is_empty() && client_id == my_id,
            field: field.to_owned(),
            client_id,
            thread,
            identity: None,
        }
    }
}

/// A fair lock's waiter.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Queued {
    /// Who waits.
    pub owner: Owner,
    /// When the waiter counts as gone unless it retries, epoch milliseconds
    /// as the waiter's client computed it (Redisson uses the client's clock).
    pub deadline_ms: Option<i64>,
    /// `deadline_ms` less the server's clock: negative when the waiter is
    /// overdue (the next acquire or release evicts it).
    pub deadline_in_ms: Option<i64>,
}

/// A permit of a permit-expirable semaphore.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PermitLease {
    /// The permit id, in hex (as Redisson prints it).
    pub id: String,
    /// How long until the permit comes back by itself; `None`: taken without
    /// a lease (it never expires), or already expired (`expired`).
    #[serde(rename = "lease_left_ms", serialize_with = "millis")]
    pub lease_left: Option<Duration>,
    /// Whether its lease has ended (the next operation returns it).
    pub expired: bool,
}

/// Listeners on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Listeners {
    /// The channel.
    pub channel: String,
    /// How many connections are subscribed to it.
    pub clients: u64,
}

impl Snapshot {
    /// The holders that belong to the client that inspected.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let guard = client.get_lock("orders:42")?.lock().await?;
    /// let snapshot = client.inspect("orders:42").await?;
    /// let mine: Vec<_> = snapshot.mine().collect();
    /// assert_eq!(mine.len(), 1);
    /// assert_eq!(mine[0].owner.client_id, client.id());
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn mine(&self) -> impl Iterator<Item = &Holder> {
        self.holders.iter().filter(|h| h.owner.mine)
    }

    /// Whether anything holds the object right now: a lock's holders (a
    /// write or read hold, any owner). A semaphore's permits are not holders
    /// (permits have no owner, or, for the permit-expirable semaphore, are
    /// listed as permits): for them this is `false`; read its permits instead.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let snapshot = client.inspect("orders:42").await?;
    /// if snapshot.is_held() {
    ///     for h in &snapshot.holders {
    ///         println!("held by {} ({}x), lease left {:?}", h.owner.field, h.holds, h.lease_left);
    ///     }
    /// } else {
    ///     println!("orders:42 is free");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }

    /// Every owner in the snapshot (holders and waiters), to attach identities.
    pub(crate) fn owners_mut(&mut self) -> impl Iterator<Item = &mut Owner> {
        self.holders
            .iter_mut()
            .map(|h| &mut h.owner)
            .chain(self.queue.iter_mut().map(|q| &mut q.owner))
    }
}

fn millis<S: serde::Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

fn millis_each<S: serde::Serializer>(values: &[Option<Duration>], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(values.len()))?;
    for value in values {
        seq.serialize_element(&value.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))?;
    }
    seq.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_split_into_client_and_thread() {
        let me = "6c47fd2f-1b3c-4a5d-9e8f-0a1b2c3d4e5f";
        let owner = Owner::parse(&format!("{me}:2305843009213693952"), me);
        assert_eq!(owner.client_id, me);
        assert_eq!(owner.thread, "2305843009213693952");
        assert!(owner.mine);
        let other = Owner::parse("not-a-uuid:1", me);
        assert_eq!(other.client_id, "");
        assert_eq!(other.thread, "not-a-uuid:1");
        assert!(!other.mine);
    }
}
