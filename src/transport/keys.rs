//! The only place that builds Redis key and channel names.
//!
//! The layout is Redisson's (see `DESIGN.md`, "Key schema"): the lock key is the
//! user's name untouched, and every auxiliary key or channel wraps the name in a hash
//! tag `{name}` so that all keys of one lock share one cluster slot. A name that
//! already contains `{` is taken to carry its own tag and is used as is.

use crate::error::{Error, Result};

/// The longest lock name accepted, in bytes.
///
/// Redis itself would take far longer keys, but every operation sends the name (and
/// names derived from it) several times; a name this long is almost surely a bug,
/// and refusing it before any I/O keeps such a bug from reaching the server.
pub const MAX_NAME_LEN: usize = 8 * 1024;

/// `prefixed(P, N)` = `P:{N}`, or `P:N` when `N` carries its own hash tag.
pub(crate) fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// `suffixed(N, S)` = `{N}:S`, or `N:S` when `N` carries its own hash tag.
pub(crate) fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The mark a semaphore acquire leaves of itself, `{name}:rl-acquired:<id>`:
/// how many permits that attempt took, for a settle to give back if the reply
/// never came (see `semaphore_acquire.lua`). Redisson never reads it.
pub(crate) fn semaphore_mark(name: &str, attempt: &str) -> String {
    suffixed(name, &format!("{SEMAPHORE_MARK}:{attempt}"))
}

/// The receipt a semaphore release leaves of itself,
/// `{name}:rl-released:<id>`: a release sent again after its reply was lost
/// finds it and gives nothing back twice (see `semaphore_release.lua`).
/// Redisson never reads it.
pub(crate) fn semaphore_receipt(name: &str, release: &str) -> String {
    suffixed(name, &format!("{SEMAPHORE_RECEIPT}:{release}"))
}

/// The order in which this crate's clients wait for a reentrant lock (or a
/// write lock), `{name}:rl-waiters`: a ZSET of client id -> arrival (see
/// `order_common.lua`).
/// A hint among this crate's clients; Redisson never reads it.
pub(crate) fn lock_waiters(name: &str) -> String {
    suffixed(name, LOCK_WAITERS)
}

/// The client a reentrant lock's (or write lock's) last release named for
/// the next turn, `{name}:rl-turn`, for a few milliseconds (see
/// `order_common.lua`).
/// Redisson never reads it.
pub(crate) fn lock_turn(name: &str) -> String {
    suffixed(name, LOCK_TURN)
}

// The prefixes and infixes of the layout's auxiliary names, each written once:
// the builders below use them, and `is_auxiliary` tells their keys apart.
const FENCED_TOKEN: &str = "redisson_lock_token";
const FAIR_QUEUE: &str = "redisson_lock_queue";
/// Redisson's retried-release latches (`redisson_unlock_latch:{N}:<id>`).
const UNLOCK_LATCH: &str = "redisson_unlock_latch";
const IDENTITY: &str = "redisson_locks_client";
/// A client's long waits (see `engine/deadlock.rs`).
const WAITS: &str = "redisson_locks_waits";
const LEADER_RECORD: &str = "redisson_locks_leader";
const LEADER_CHANNEL: &str = "redisson_locks_leader__channel";
const READ_HOLD: &str = ":rwlock_timeout:";
const SEMAPHORE_MARK: &str = "rl-acquired";
const SEMAPHORE_RECEIPT: &str = "rl-released";
const LOCK_WAITERS: &str = "rl-waiters";
const LOCK_TURN: &str = "rl-turn";

/// The pub/sub channel on which a reentrant lock's unlock is announced.
pub(crate) fn lock_channel(name: &str) -> String {
    prefixed("redisson_lock__channel", name)
}

/// The fenced lock's token counter: a STRING, no TTL, INCR on every acquisition.
pub(crate) fn fenced_token(name: &str) -> String {
    prefixed(FENCED_TOKEN, name)
}

/// The fair lock's waiting line: a LIST of owner fields in arrival order.
pub(crate) fn fair_queue(name: &str) -> String {
    prefixed(FAIR_QUEUE, name)
}

/// The SCAN pattern of every fair queue.
pub(crate) fn fair_queue_pattern() -> String {
    format!("{FAIR_QUEUE}:*")
}

/// The lock a fair queue key belongs to: `redisson_lock_queue:{N}` names `N`,
/// and `redisson_lock_queue:N` a name `N` with its own hash tag.
pub(crate) fn lock_of_fair_queue(key: &str) -> Option<String> {
    let rest = key.strip_prefix(FAIR_QUEUE)?.strip_prefix(':')?;
    let name = match rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        Some(inner) if !inner.contains('{') && !inner.contains('}') => inner,
        _ => rest,
    };
    (fair_queue(name) == key).then(|| name.to_owned())
}

/// The key under which client `client_id` says who it is (see `identity.rs`).
pub(crate) fn identity_key(client_id: &str) -> String {
    prefixed(IDENTITY, client_id)
}

/// The hash in which client `client_id` records its long waits, beside its
/// identity key (the same hash tag, so the same slot in a cluster).
pub(crate) fn waits_key(client_id: &str) -> String {
    prefixed(WAITS, client_id)
}

/// The SCAN pattern of every client's wait records.
pub(crate) fn waits_pattern() -> String {
    format!("{WAITS}:*")
}

/// A leader election's record of its last win (see `leader/record.rs`).
pub(crate) fn leader_record(name: &str) -> String {
    prefixed(LEADER_RECORD, name)
}

/// The channel on which a participant of this crate announces its win.
pub(crate) fn leader_channel(name: &str) -> String {
    prefixed(LEADER_CHANNEL, name)
}

/// Whether `key` is part of another object's layout rather than an object of
/// its own: a fenced lock's token, a read hold's lease, a semaphore acquire's
/// mark or release's receipt, a lock's order of waiting clients or its turn, a
/// release's latch, a client's identity or wait records, an election's record.
pub(crate) fn is_auxiliary(key: &str) -> bool {
    [FENCED_TOKEN, UNLOCK_LATCH, IDENTITY, WAITS, LEADER_RECORD]
        .iter()
        .any(|prefix| {
            key.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        || key.contains(READ_HOLD)
        || key.contains(&format!(":{SEMAPHORE_MARK}:"))
        || key.contains(&format!(":{SEMAPHORE_RECEIPT}:"))
        || [LOCK_WAITERS, LOCK_TURN]
            .iter()
            .any(|suffix| key.ends_with(&format!(":{suffix}")))
}

/// The fair lock's waiter deadlines: a ZSET of owner field -> epoch-ms deadline.
pub(crate) fn fair_timeouts(name: &str) -> String {
    prefixed("redisson_lock_timeout", name)
}

/// The channel on which one fair-lock waiter (owner field `owner`) is woken.
pub(crate) fn fair_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// The pub/sub channel of a read-write lock, shared by its readers and writers.
pub(crate) fn rwlock_channel(name: &str) -> String {
    prefixed("redisson_rwlock", name)
}

/// The channel of a semaphore (and of a permit-expirable semaphore): its
/// messages are the number of permits available.
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefixed("redisson_sc", name)
}

/// The permit-expirable semaphore's leases: a ZSET of permit id (16 raw bytes)
/// -> epoch-ms expiry.
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffixed(name, "timeout")
}

/// The fair semaphore's holds' leases: a ZSET of hold id -> epoch-ms end.
pub(crate) fn fair_semaphore_leases(name: &str) -> String {
    prefixed("redisson_fair_semaphore_leases", name)
}

/// The fair semaphore's line: a LIST of waiter ids in arrival order.
pub(crate) fn fair_semaphore_queue(name: &str) -> String {
    prefixed("redisson_fair_semaphore_queue", name)
}

/// The fair semaphore's client deadlines: a ZSET of client id -> epoch ms,
/// after which that client's waiters are taken for gone.
pub(crate) fn fair_semaphore_timeouts(name: &str) -> String {
    prefixed("redisson_fair_semaphore_timeout", name)
}

/// The prefix of the fair semaphore's waiter channels: waiter `w` listens
/// on `<prefix>:w`.
pub(crate) fn fair_semaphore_channel(name: &str) -> String {
    prefixed("redisson_fair_semaphore__channel", name)
}

/// The channel of a count-down latch. Redisson builds it with literal braces
/// around the name, whatever the name contains (not [`prefixed`]).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The key of read hold `i` of owner field `owner` (kept in step with
/// `read_hold_key` in `lua/rw_common.lua`, which builds it server-side).
#[cfg(test)]
pub(crate) fn read_hold_key(name: &str, owner: &str, i: u64) -> String {
    format!("{}{READ_HOLD}{i}", suffixed(name, owner))
}

/// A SCAN pattern matching every read hold's lease key of read-write lock
/// `name` (see `read_hold_key`), and no other key.
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn read_hold_pattern(name: &str) -> String {
    let holder_keys = suffixed(name, "");
    let tagged = holder_keys.strip_suffix(':').unwrap_or(&holder_keys);
    format!("{}:*{READ_HOLD}*", glob_escaped(tagged))
}

/// `text` with Redis's glob characters escaped, so that it matches itself only.
#[cfg(any(test, feature = "test-util"))]
fn glob_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The name Redisson gives the lock of `kind` on a collection's entry whose
/// key its codec encodes as `encoded`: `{collection}:<hash>:<kind>` (see
/// `entry.rs`).
pub(crate) fn entry_lock_name(collection: &str, encoded: &[u8], kind: &str) -> String {
    suffixed(collection, &format!("{}:{kind}", group_member_id(encoded)))
}

/// The part of `key` Redis Cluster hashes: the content of the first `{...}` when it
/// is non-empty, else the whole key.
fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// A Redis Cluster slot: one script call may only touch keys of one.
#[cfg(feature = "cluster")]
pub(crate) type Slot = redis::cluster_routing::Slot;
/// Without Cluster support there is one server, and so one "slot".
#[cfg(not(feature = "cluster"))]
pub(crate) type Slot = ();

/// The Redis Cluster slot of `key` (of its hash tag, when it has one).
#[cfg(feature = "cluster")]
pub(crate) fn cluster_slot(key: &str) -> Slot {
    redis::cluster_routing::Slot::for_key(key)
}

/// The Redis Cluster slot of `key`: there is only one without Cluster support.
#[cfg(not(feature = "cluster"))]
pub(crate) fn cluster_slot(_key: &str) -> Slot {}

/// In a cluster every key and channel of one lock must live in one slot. A name
/// with its own hash tag keeps it for the auxiliary names; a name with an
/// unbalanced or empty `{` would scatter them, and is refused before any I/O.
pub(crate) fn validate_cluster_name(name: &str) -> Result<()> {
    if hash_tag(name) == hash_tag(&prefixed("redisson_lock__channel", name)) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "lock name '{name}' has an unbalanced or empty hash tag: in a cluster its \
             keys would land in different slots"
        )))
    }
}

/// Checks a lock name before any I/O.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes long; the maximum is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// The hash field under which Redisson's single-hash multi-lock
/// (`getMultiLock(group, values)`) keeps one member: HighwayHash-128 of the
/// member's codec-encoded bytes, with Redisson's fixed key, the two halves
/// big-endian, in standard base64 without its `==` padding (22 characters).
///
/// For a Java side on `StringCodec`, a member's encoding is its UTF-8 bytes.
pub(crate) fn group_member_id(encoded: &[u8]) -> String {
    use base64::Engine as _;
    use highway::{HighwayHash, HighwayHasher, Key};
    // Redisson's `Hash.KEY`.
    const KEY: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0xf39c_c060_5ced_c834,
        0x1082_276b_f3a2_7251,
        0xf86c_6a11_d0c1_8e95,
    ];
    let mut hasher = HighwayHasher::new(Key(KEY));
    hasher.append(encoded);
    let [high, low] = hasher.finalize128();
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_hold_keys_are_matched_by_their_pattern_alone() {
        assert_eq!(read_hold_pattern("rw"), "{rw}:*:rwlock_timeout:*");
        assert_eq!(read_hold_pattern("{t}r*w:"), "{t}r\\*w::*:rwlock_timeout:*");
        assert_eq!(
            read_hold_pattern("a[b]?\\"),
            "{a\\[b\\]\\?\\\\}:*:rwlock_timeout:*"
        );
    }

    #[test]
    fn plain_names_get_a_hash_tag() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
        assert_eq!(suffixed("orders", "x"), "{orders}:x");
        assert_eq!(
            prefixed("redisson_lock_queue", "orders"),
            "redisson_lock_queue:{orders}"
        );
    }

    #[test]
    fn fair_lock_keys_follow_redisson() {
        assert_eq!(fair_queue("f"), "redisson_lock_queue:{f}");
        assert_eq!(fair_timeouts("f"), "redisson_lock_timeout:{f}");
        assert_eq!(
            fair_waiter_channel("f", "u:1"),
            "redisson_lock__channel:{f}:u:1"
        );
    }

    #[test]
    fn read_write_lock_names_follow_redisson() {
        assert_eq!(rwlock_channel("rw"), "redisson_rwlock:{rw}");
        assert_eq!(read_hold_key("rw", "u:1", 2), "{rw}:u:1:rwlock_timeout:2");
        assert_eq!(
            read_hold_key("{t}rw", "u:1", 1),
            "{t}rw:u:1:rwlock_timeout:1"
        );
    }

    #[test]
    fn synchronizer_names_follow_redisson() {
        // As observed with Redisson 3.52.0 and 4.7.0 (MONITOR).
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(semaphore_channel("{t}s"), "redisson_sc:{t}s");
        assert_eq!(permit_timeouts("p"), "{p}:timeout");
        assert_eq!(permit_timeouts("{t}p"), "{t}p:timeout");
        assert_eq!(latch_channel("l"), "redisson_countdownlatch__channel__{l}");
        assert_eq!(
            latch_channel("{t}m"),
            "redisson_countdownlatch__channel__{{t}m}"
        );
    }

    #[test]
    fn crate_names_follow_the_same_tagging() {
        assert_eq!(
            identity_key("6c47fd2f-0000-4000-8000-000000000000"),
            "redisson_locks_client:{6c47fd2f-0000-4000-8000-000000000000}"
        );
        assert_eq!(leader_record("jobs"), "redisson_locks_leader:{jobs}");
        assert_eq!(
            leader_channel("jobs"),
            "redisson_locks_leader__channel:{jobs}"
        );
        assert_eq!(
            leader_record("{app}:jobs"),
            "redisson_locks_leader:{app}:jobs"
        );
        assert_eq!(semaphore_mark("s", "01"), "{s}:rl-acquired:01");
    }

    #[test]
    fn fair_queue_keys_name_their_lock() {
        assert_eq!(
            lock_of_fair_queue("redisson_lock_queue:{orders}").as_deref(),
            Some("orders")
        );
        assert_eq!(
            lock_of_fair_queue("redisson_lock_queue:{o}:a").as_deref(),
            Some("{o}:a")
        );
        assert_eq!(lock_of_fair_queue("jobs"), None);
        assert_eq!(fair_queue_pattern(), "redisson_lock_queue:*");
    }

    #[test]
    fn auxiliary_keys_are_left_to_their_objects() {
        assert!(is_auxiliary("redisson_lock_token:{orders}"));
        assert!(is_auxiliary(
            "{rw}:6c47fd2f-1b3c-4a5d-9e8f-0a1b2c3d4e5f:7:rwlock_timeout:1"
        ));
        assert!(is_auxiliary("{s}:rl-acquired:0123"));
        assert!(is_auxiliary(
            "redisson_locks_client:{6c47fd2f-1b3c-4a5d-9e8f-0a1b2c3d4e5f}"
        ));
        assert!(is_auxiliary("redisson_locks_leader:{jobs}"));
        assert!(is_auxiliary("redisson_unlock_latch:{a}:0f"));
        assert!(is_auxiliary(&lock_waiters("orders:42")));
        assert!(is_auxiliary(&lock_turn("{orders}:42")));
        assert!(!is_auxiliary("orders:42"));
    }

    #[test]
    fn names_with_their_own_tag_are_kept() {
        assert_eq!(
            lock_channel("{order}:a"),
            "redisson_lock__channel:{order}:a"
        );
        assert_eq!(suffixed("{order}:a", "x"), "{order}:a:x");
    }

    #[test]
    #[cfg(feature = "cluster")]
    fn cluster_slots_match_redis() {
        // Values from CLUSTER KEYSLOT.
        let slot = |n| Some(Slot::new(n).unwrap());
        assert_eq!(Some(cluster_slot("foo")), slot(12182));
        assert_eq!(
            cluster_slot("{user1000}.following"),
            cluster_slot("user1000")
        );
        assert_eq!(Some(cluster_slot("123456789")), slot(12739));
        assert_eq!(
            cluster_slot("orders"),
            cluster_slot(&lock_channel("orders"))
        );
    }

    #[test]
    fn cluster_names_must_keep_one_slot() {
        assert!(validate_cluster_name("orders").is_ok());
        assert!(validate_cluster_name("{order}:a").is_ok());
        assert!(validate_cluster_name("a{b")
            .unwrap_err()
            .is_invalid_argument());
        assert!(validate_cluster_name("a{}b")
            .unwrap_err()
            .is_invalid_argument());
    }

    #[test]
    fn names_are_validated() {
        assert!(validate_name("").unwrap_err().is_invalid_argument());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1))
            .unwrap_err()
            .is_invalid_argument());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }
}
