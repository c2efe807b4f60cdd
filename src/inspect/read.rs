//! The inspect script's reply as a [`Snapshot`]: the kind told from the
//! layout, then the holders, queue and permits that kind keeps.

use std::collections::HashMap;
use std::time::Duration;

use redis::Value;

use super::{HoldMode, Holder, Kind, Owner, PermitLease, Queued, Snapshot, MAX_ENTRIES};
use crate::error::{Error, Result};

const OPERATION: &str = "inspect";

/// The permit-expirable semaphore's score of a permit taken without a lease.
const NEVER: i64 = 922_337_203_685_477;

/// The script's reply, its parts named.
struct Reply {
    now: i64,
    redis_type: String,
    pttl: i64,
    body: Vec<Value>,
    queue: Vec<String>,
    queue_len: usize,
    deadlines: HashMap<String, Option<i64>>,
    token: Option<u64>,
    leases: Vec<(Vec<u8>, i64)>,
    leases_count: usize,
    read_ttls: HashMap<String, Vec<i64>>,
    fair: FairParts,
}

/// A fair semaphore's keys besides its hash.
#[derive(Default)]
struct FairParts {
    line: Vec<String>,
    line_len: usize,
    /// Client id -> epoch-ms deadline of its places.
    deadlines: HashMap<String, Option<i64>>,
    /// Hold id -> epoch-ms lease end.
    leases: HashMap<String, i64>,
    leases_count: usize,
}

fn unexpected(what: impl std::fmt::Debug) -> Error {
    Error::unexpected(OPERATION, what)
}

fn int(value: &Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(parse_number)
            .ok_or_else(|| unexpected(value)),
        other => Err(unexpected(other)),
    }
}

/// An integer exactly (a fencing token may pass 2^53), else a finite float
/// as Lua hands a zset score over ("1.7e12"), truncated.
fn parse_number(text: &str) -> Option<i64> {
    crate::numeral::signed_decimal::<i64>(text).or_else(|| {
        text.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(|n| n as i64)
    })
}

fn text(value: &Value) -> Result<String> {
    match value {
        Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Ok(text.clone()),
        Value::Int(n) => Ok(n.to_string()),
        other => Err(unexpected(other)),
    }
}

fn array(value: Value) -> Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Nil => Ok(Vec::new()),
        other => Err(unexpected(other)),
    }
}

/// A flat `member, score, ...` list as pairs; a score that is no number
/// (someone else's zset) reads as `None` rather than failing the snapshot.
fn pairs(value: Value) -> Result<Vec<(Value, Option<i64>)>> {
    let items = array(value)?;
    items
        .chunks(2)
        .map(|pair| match pair {
            [member, score] => Ok((member.clone(), int(score).ok())),
            other => Err(unexpected(other)),
        })
        .collect()
}

/// A list of texts (a queue, a line).
fn texts(value: Value) -> Result<Vec<String>> {
    array(value)?.iter().map(text).collect()
}

/// A length or a count (one that is no positive integer reads as 0).
fn count(value: &Value) -> Result<usize> {
    Ok(usize::try_from(int(value)?).unwrap_or(0))
}

/// A flat `member, score, ...` list by member (see [`pairs`]).
fn scores_by_text(value: Value) -> Result<HashMap<String, Option<i64>>> {
    pairs(value)?
        .into_iter()
        .map(|(member, score)| Ok((text(&member)?, score)))
        .collect()
}

impl Reply {
    fn decode(reply: Value) -> Result<Reply> {
        let parts = array(reply)?;
        let [now, redis_type, pttl, body, queue, queue_len, deadlines, token, leases, leases_count, read_ttls] =
            <[Value; 11]>::try_from(parts).map_err(unexpected)?;
        let read_ttls = array(read_ttls)?
            .into_iter()
            .map(|entry| {
                let entry = array(entry)?;
                let (field, ttls) = entry.split_first().ok_or_else(|| unexpected(&entry))?;
                Ok((text(field)?, ttls.iter().map(int).collect::<Result<_>>()?))
            })
            .collect::<Result<_>>()?;
        Ok(Reply {
            now: int(&now)?,
            redis_type: text(&redis_type)?,
            pttl: int(&pttl)?,
            body: array(body)?,
            queue: texts(queue)?,
            queue_len: count(&queue_len)?,
            deadlines: scores_by_text(deadlines)?,
            // A counter that is no positive integer is no token of ours.
            token: int(&token).ok().and_then(|t| u64::try_from(t).ok()),
            leases: pairs(leases)?
                .into_iter()
                .filter_map(|(member, score)| match (member, score) {
                    (Value::BulkString(bytes), Some(score)) => Some((bytes, score)),
                    _ => None,
                })
                .collect(),
            leases_count: count(&leases_count)?,
            read_ttls,
            fair: FairParts::default(),
        })
    }

    /// The fair semaphore script's reply (`lua/inspect_fair.lua`), as the
    /// parts of a reply it shares with the main one.
    fn decode_fair(reply: Value) -> Result<Reply> {
        let parts = array(reply)?;
        let [now, redis_type, body, line, line_len, deadlines, leases, leases_count] =
            <[Value; 8]>::try_from(parts).map_err(unexpected)?;
        Ok(Reply {
            now: int(&now)?,
            redis_type: text(&redis_type)?,
            pttl: -1,
            body: array(body)?,
            queue: Vec::new(),
            queue_len: 0,
            deadlines: HashMap::new(),
            token: None,
            leases: Vec::new(),
            leases_count: 0,
            read_ttls: HashMap::new(),
            fair: FairParts {
                line: texts(line)?,
                line_len: count(&line_len)?,
                deadlines: scores_by_text(deadlines)?,
                leases: pairs(leases)?
                    .into_iter()
                    .filter_map(|(member, score)| Some((text(&member).ok()?, score?)))
                    .collect(),
                leases_count: count(&leases_count)?,
            },
        })
    }

    /// A hash body's fields and values, and its length.
    fn hash(&self) -> Result<(Vec<(String, String)>, usize)> {
        let (length, fields) = self
            .body
            .split_last()
            .ok_or_else(|| unexpected(&self.body))?;
        let fields = fields
            .chunks(2)
            .map(|pair| match pair {
                [field, value] => Ok((text(field)?, text(value)?)),
                other => Err(unexpected(other)),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((fields, count(length)?))
    }

    fn has_queue(&self) -> bool {
        self.queue_len > 0 || !self.deadlines.is_empty()
    }

    fn ttl(&self) -> Option<Duration> {
        u64::try_from(self.pttl).ok().map(Duration::from_millis)
    }
}

/// The snapshot of `name` from the inspect script's `reply`, with `my_id` the
/// inspecting client's id.
pub(crate) fn read_snapshot(name: &str, reply: Value, my_id: &str) -> Result<Snapshot> {
    let reply = Reply::decode(reply)?;
    let mut snapshot = Snapshot {
        name: name.to_owned(),
        kind: Kind::Absent,
        server_time_ms: u64::try_from(reply.now).unwrap_or(0),
        ttl: reply.ttl(),
        holders: Vec::new(),
        queue: queue(&reply, my_id),
        queue_len: reply.queue_len,
        count: None,
        permits: permits(&reply),
        permits_out: reply.leases_count,
        fencing_token: reply.token,
        listeners: Vec::new(),
        truncated: reply.queue_len > MAX_ENTRIES || reply.leases_count > MAX_ENTRIES,
    };
    match reply.redis_type.as_str() {
        "hash" => read_hash(&reply, my_id, &mut snapshot)?,
        "string" => {
            let value = reply.body.first().map(text).transpose()?;
            match value.as_deref().map(crate::numeral::signed_decimal::<i64>) {
                Some(Some(count)) => {
                    snapshot.count = Some(count);
                    snapshot.kind = if reply.leases_count > 0 {
                        Kind::PermitExpirableSemaphore
                    } else {
                        Kind::Counter
                    };
                }
                _ => snapshot.kind = foreign("string"),
            }
        }
        "none" => {
            snapshot.kind = if reply.has_queue() {
                Kind::FairLock
            } else if reply.leases_count > 0 {
                Kind::PermitExpirableSemaphore
            } else if reply.token.is_some() {
                Kind::FencedLock
            } else {
                Kind::Absent
            };
        }
        other => snapshot.kind = foreign(other),
    }
    Ok(snapshot)
}

/// The snapshot of the fair semaphore `name` from its own script's `reply`
/// (`lua/inspect_fair.lua`), which the main one found: the hash read again
/// with the line, deadlines and leases, all at one instant.
pub(crate) fn read_fair_snapshot(name: &str, reply: Value, my_id: &str) -> Result<Snapshot> {
    let reply = Reply::decode_fair(reply)?;
    let mut snapshot = Snapshot {
        name: name.to_owned(),
        kind: Kind::Absent,
        server_time_ms: u64::try_from(reply.now).unwrap_or(0),
        ttl: None,
        holders: Vec::new(),
        queue: Vec::new(),
        queue_len: 0,
        count: None,
        permits: Vec::new(),
        permits_out: 0,
        fencing_token: None,
        listeners: Vec::new(),
        truncated: false,
    };
    match reply.redis_type.as_str() {
        "hash" => read_hash(&reply, my_id, &mut snapshot)?,
        "none" => {}
        other => snapshot.kind = foreign(other),
    }
    Ok(snapshot)
}

fn foreign(redis_type: &str) -> Kind {
    Kind::Foreign {
        redis_type: redis_type.to_owned(),
    }
}

/// A lock's hash: which lock, and its holders. Each layout is taken only when
/// every field fits it (owner fields with counts, `mode` with `read` or
/// `write`, a group's member and hold fields): a user's hash that merely has
/// a `mode` field is foreign, and so never forced open as a lock.
fn read_hash(reply: &Reply, my_id: &str, snapshot: &mut Snapshot) -> Result<()> {
    let (fields, length) = reply.hash()?;
    snapshot.truncated |= length > MAX_ENTRIES;
    let values: HashMap<&str, &str> = fields
        .iter()
        .map(|(f, v)| (f.as_str(), v.as_str()))
        .collect();
    if let Some(holders) = fair_semaphore_holders(reply, &fields, my_id) {
        snapshot.kind = Kind::FairSemaphore;
        snapshot.count = values
            .get("permits")
            .and_then(|p| crate::numeral::signed_decimal(p));
        snapshot.holders = holders;
        snapshot.queue = fair_queue(reply, my_id);
        // Each waiter in line has its ask in the hash: counted so, the line's
        // length is known even where its list could not be read (an ACL
        // granting the hash alone, see `look.rs`).
        let asks = fields
            .iter()
            .filter(|(f, _)| f.starts_with("want:"))
            .count();
        snapshot.queue_len = reply.fair.line_len.max(asks);
        snapshot.permits_out = holders_count(&snapshot.holders);
        snapshot.truncated |=
            reply.fair.line_len > MAX_ENTRIES || reply.fair.leases_count > MAX_ENTRIES;
        return Ok(());
    }
    let read = if let Some(mode) = values.get("mode") {
        read_write_holders(reply, &fields, my_id)
            .filter(|_| matches!(*mode, "read" | "write"))
            .map(|holders| {
                (
                    Kind::ReadWriteLock {
                        mode: (*mode).to_owned(),
                    },
                    holders,
                )
            })
    } else if fields
        .iter()
        .any(|(f, _)| f.ends_with(":expire_time") || f.ends_with(":lock_count"))
    {
        group_holders(reply, &fields, &values, my_id).map(|holders| (Kind::MultiLockGroup, holders))
    } else {
        lock_holders(reply, &fields, my_id).map(|holders| {
            let kind = if reply.has_queue() {
                Kind::FairLock
            } else if reply.token.is_some() {
                Kind::FencedLock
            } else {
                Kind::Lock
            };
            (kind, holders)
        })
    };
    match read {
        Some((kind, holders)) => {
            snapshot.kind = kind;
            snapshot.holders = holders;
        }
        None => snapshot.kind = foreign("hash"),
    }
    Ok(())
}

/// A fair semaphore's holds, when the hash is one: a `permits` count, and
/// every other field a hold (`hold:<id>` -> permits), a waiter's ask
/// (`want:<id>`) or a client's epoch (`line:<client>`).
fn fair_semaphore_holders(
    reply: &Reply,
    fields: &[(String, String)],
    my_id: &str,
) -> Option<Vec<Holder>> {
    fields.iter().find(|(field, _)| field == "permits")?;
    let mut holders = Vec::new();
    for (field, value) in fields {
        if let Some(hold) = field.strip_prefix("hold:") {
            let ends = reply.fair.leases.get(hold).copied();
            holders.push(Holder {
                owner: Owner::parse(hold, my_id),
                mode: HoldMode::Permits,
                holds: crate::numeral::decimal(value)?,
                lease_left: ends.map(|ends| {
                    Duration::from_millis(u64::try_from(ends - reply.now).unwrap_or(0))
                }),
                read_leases: Vec::new(),
                member: None,
            });
        } else if !(field == "permits" || field.starts_with("want:") || field.starts_with("line:"))
        {
            return None;
        }
    }
    Some(holders)
}

/// How many permits the holds hold.
fn holders_count(holders: &[Holder]) -> usize {
    holders
        .iter()
        .map(|h| usize::try_from(h.holds).unwrap_or(usize::MAX))
        .fold(0, usize::saturating_add)
}

/// A fair semaphore's line, first first, each waiter with its client's
/// deadline.
fn fair_queue(reply: &Reply, my_id: &str) -> Vec<Queued> {
    reply
        .fair
        .line
        .iter()
        .map(|waiter| {
            let owner = Owner::parse(waiter, my_id);
            let deadline = reply
                .fair
                .deadlines
                .get(&owner.client_id)
                .copied()
                .flatten();
            Queued {
                owner,
                deadline_ms: deadline,
                deadline_in_ms: deadline.map(|d| d - reply.now),
            }
        })
        .collect()
}

/// The owner a field names, when it is in Redisson's shape.
fn owner_of(field: &str, my_id: &str) -> Option<Owner> {
    let owner = Owner::parse(field, my_id);
    (!owner.client_id.is_empty()).then_some(owner)
}

/// A lock hash's holders: every field an owner, every value a count.
fn lock_holders(reply: &Reply, fields: &[(String, String)], my_id: &str) -> Option<Vec<Holder>> {
    fields
        .iter()
        .map(|(field, count)| {
            Some(Holder {
                owner: owner_of(field, my_id)?,
                mode: HoldMode::Exclusive,
                holds: crate::numeral::decimal(count)?,
                lease_left: reply.ttl(),
                read_leases: Vec::new(),
                member: None,
            })
        })
        .collect()
}

fn read_write_holders(
    reply: &Reply,
    fields: &[(String, String)],
    my_id: &str,
) -> Option<Vec<Holder>> {
    fields
        .iter()
        .filter(|(field, _)| field != "mode")
        .map(|(field, count)| {
            let holds = crate::numeral::decimal(count)?;
            Some(match field.strip_suffix(":write") {
                Some(writer) => Holder {
                    owner: owner_of(writer, my_id)?,
                    mode: HoldMode::Write,
                    holds,
                    lease_left: reply.ttl(),
                    read_leases: Vec::new(),
                    member: None,
                },
                None => {
                    let read_leases: Vec<Option<Duration>> = reply
                        .read_ttls
                        .get(field)
                        .map(|ttls| {
                            ttls.iter()
                                .map(|ttl| u64::try_from(*ttl).ok().map(Duration::from_millis))
                                .collect()
                        })
                        .unwrap_or_default();
                    Holder {
                        owner: owner_of(field, my_id)?,
                        mode: HoldMode::Read,
                        holds,
                        lease_left: read_leases.iter().flatten().max().copied(),
                        read_leases,
                        member: None,
                    }
                }
            })
        })
        .collect()
}

/// A single-hash multi-lock's holds: `<member id>` names the owner, whose
/// `<id>:<owner>:expire_time` and `:lock_count` say until when and how often.
/// A member whose hold has ended is free, whatever its fields still say.
/// `None` when a field does not fit that layout.
fn group_holders(
    reply: &Reply,
    fields: &[(String, String)],
    values: &HashMap<&str, &str>,
    my_id: &str,
) -> Option<Vec<Holder>> {
    let fits = fields
        .iter()
        .all(|(field, value)| match field.split_once(':') {
            None => owner_of(value, my_id).is_some(),
            Some((_member, rest)) => {
                let owner = rest
                    .strip_suffix(":expire_time")
                    .or_else(|| rest.strip_suffix(":lock_count"));
                owner.is_some_and(|o| owner_of(o, my_id).is_some())
                    && crate::numeral::signed_decimal::<i64>(value).is_some()
            }
        });
    if !fits {
        return None;
    }
    let holders = fields
        .iter()
        .filter(|(field, _)| !field.contains(':'))
        .filter_map(|(member, owner)| {
            let ends = values
                .get(format!("{member}:{owner}:expire_time").as_str())
                .and_then(|ends| crate::numeral::signed_decimal::<i64>(ends))?;
            let left = u64::try_from(ends - reply.now).ok()?;
            let holds = values
                .get(format!("{member}:{owner}:lock_count").as_str())
                .and_then(|count| crate::numeral::decimal::<u64>(count))
                .unwrap_or(1);
            Some(Holder {
                owner: Owner::parse(owner, my_id),
                mode: HoldMode::Exclusive,
                holds,
                lease_left: Some(Duration::from_millis(left)),
                read_leases: Vec::new(),
                member: Some(member.clone()),
            })
        })
        .collect();
    Some(holders)
}

fn queue(reply: &Reply, my_id: &str) -> Vec<Queued> {
    reply
        .queue
        .iter()
        .map(|field| {
            let deadline = reply.deadlines.get(field).copied().flatten();
            Queued {
                owner: Owner::parse(field, my_id),
                deadline_ms: deadline,
                deadline_in_ms: deadline.map(|d| d - reply.now),
            }
        })
        .collect()
}

fn permits(reply: &Reply) -> Vec<PermitLease> {
    reply
        .leases
        .iter()
        .map(|(id, ends)| {
            let id = if id.len() == 16 {
                id.iter().map(|b| format!("{b:02x}")).collect()
            } else {
                String::from_utf8_lossy(id).into_owned()
            };
            let left = ends - reply.now;
            PermitLease {
                id,
                lease_left: (*ends < NEVER)
                    .then(|| u64::try_from(left).ok().map(Duration::from_millis))
                    .flatten(),
                expired: left < 0,
            }
        })
        .collect()
}
