//! The wait-for graph, walked: from a wait to its lock's holders (read as the
//! inspector reads any lock, whoever wrote it), to the locks those holders'
//! tasks wait for (their wait records, see `engine/deadlock.rs`), and on,
//! until the walk comes back to the wait it started from (a cycle), runs out
//! of ways on, or reaches its bounds.
//!
//! A holder with no record (a Java thread, a process of this crate whose wait
//! is still short, a dead one) is found waiting only as an entry in the queue
//! of a fair lock whose hold the walk knows of (a record's holds): Java
//! waiters are visible that way alone. Otherwise it is a dead end, counted.
//! Anything that does not read as what it should (a foreign key where a
//! record should be, a record naming a lock that is gone or no lock at all)
//! is a dead end too, never an error.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Kind, Owner, Snapshot};
use crate::engine::deadlock::{
    Deadlock, WaitRecord, WaitStep, Walked, Walker, MAX_READS, MAX_STEPS,
};
use crate::engine::identity::{self, Identity};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::keys;

/// The walk the client gives its engine.
pub(crate) struct GraphWalker;

impl Walker for GraphWalker {
    fn walk<'a>(
        &'a self,
        conn: &'a Conn,
        my_id: &'a str,
        start: &'a WaitRecord,
    ) -> Pin<Box<dyn Future<Output = Result<Walked>> + Send + 'a>> {
        Box::pin(walk_from(conn, my_id, start))
    }
}

/// A wait on the walk's path.
#[derive(Debug, Clone)]
struct Node {
    record: WaitRecord,
    /// Seen only as a fair queue's entry: no record, no start known.
    queued: bool,
    /// The holder of `record.lock` the walk went on through.
    holder: String,
}

/// One walk's reads, each made once.
struct Reads<'a> {
    conn: &'a Conn,
    my_id: &'a str,
    made: usize,
    snapshots: HashMap<String, Option<Arc<Snapshot>>>,
    records: HashMap<String, Option<WaitRecord>>,
}

impl<'a> Reads<'a> {
    fn new(conn: &'a Conn, my_id: &'a str) -> Self {
        Reads {
            conn,
            my_id,
            made: 0,
            snapshots: HashMap::new(),
            records: HashMap::new(),
        }
    }

    fn exhausted(&self) -> bool {
        self.made >= MAX_READS
    }

    /// The lock `name` as read now; `None` when it cannot be read as a lock
    /// (a name no lock can have).
    async fn snapshot(&mut self, name: &str) -> Result<Option<Arc<Snapshot>>> {
        if let Some(known) = self.snapshots.get(name) {
            return Ok(known.clone());
        }
        self.made += 1;
        let read = match super::look::holders_on(self.conn, self.my_id, name).await {
            Ok(snapshot) => Some(Arc::new(snapshot)),
            Err(e) if e.is_transient() => return Err(e),
            Err(_) => None,
        };
        self.snapshots.insert(name.to_owned(), read.clone());
        Ok(read)
    }

    /// The record of the wait of `owner`'s task, if its client wrote one.
    async fn record(&mut self, owner: &str) -> Result<Option<WaitRecord>> {
        if let Some(known) = self.records.get(owner) {
            return Ok(known.clone());
        }
        let client_id = Owner::parse(owner, "").client_id;
        if client_id.is_empty() {
            return Ok(None);
        }
        self.made += 1;
        let value: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("HGET")
            .arg(keys::waits_key(&client_id))
            .arg(owner)
            .query_async(&mut self.conn.clone())
            .await;
        let record = match value {
            Ok(value) => value.and_then(|v| parse_record(&v, owner)),
            // A foreign key where the hash should be: no record.
            Err(e) if e.code() == Some("WRONGTYPE") => None,
            Err(e) => return Err(Error::redis(e)),
        };
        self.records.insert(owner.to_owned(), record.clone());
        Ok(record)
    }

    /// The owners that hold `lock`, but `own` (the waiter's task's: a wait
    /// behind its own hold is a self-wait, named elsewhere).
    async fn holders(&mut self, lock: &str, own: &HashSet<&str>) -> Result<Vec<String>> {
        let Some(snapshot) = self.snapshot(lock).await? else {
            return Ok(Vec::new());
        };
        let mut holders: Vec<String> = snapshot
            .holders
            .iter()
            .map(|h| h.owner.field.clone())
            .filter(|field| !own.contains(field.as_str()))
            .collect();
        holders.sort();
        holders.dedup();
        Ok(holders)
    }

    /// What `holder`'s task waits for: its record, else its entry in the
    /// queue of a fair lock held on the path.
    async fn wait_of(&mut self, holder: &str, path: &[Node]) -> Result<Option<Node>> {
        if let Some(record) = self.record(holder).await? {
            return Ok(Some(Node {
                record,
                queued: false,
                holder: String::new(),
            }));
        }
        let known: Vec<String> = path
            .iter()
            .flat_map(|node| node.record.holds.iter().map(|h| h.lock.clone()))
            .collect();
        for lock in known {
            if self.exhausted() {
                break;
            }
            let Some(snapshot) = self.snapshot(&lock).await? else {
                continue;
            };
            // An overdue entry is a waiter that stopped asking: no wait.
            let queued = snapshot.kind == Kind::FairLock
                && snapshot.queue.iter().any(|q| {
                    q.owner.field == holder && q.deadline_in_ms.is_none_or(|left| left >= 0)
                });
            if queued {
                return Ok(Some(Node {
                    record: WaitRecord {
                        waiter: holder.to_owned(),
                        lock,
                        kind: "fair".to_owned(),
                        since_ms: 0,
                        holds: Vec::new(),
                        written_ms: 0,
                        ttl_ms: 0,
                    },
                    queued: true,
                    holder: String::new(),
                }));
            }
        }
        Ok(None)
    }
}

/// A record as stored under `owner`'s field, if it is one (a value someone
/// else wrote is none).
fn parse_record(value: &[u8], owner: &str) -> Option<WaitRecord> {
    let now = crate::transport::scripts::epoch_millis();
    serde_json::from_slice::<WaitRecord>(value)
        .ok()
        .filter(|record| record.owners().any(|o| o == owner) && record.is_current(now))
}

/// Walks from `start`, depth first, for a cycle back to it.
async fn walk_from(conn: &Conn, my_id: &str, start: &WaitRecord) -> Result<Walked> {
    let mut reads = Reads::new(conn, my_id);
    let mut walked = Walked::default();
    let start_owners: HashSet<&str> = start.owners().collect();
    let mut path = vec![Node {
        record: start.clone(),
        queued: false,
        holder: String::new(),
    }];
    let mut visited: HashSet<String> = HashSet::from([start.waiter.clone()]);
    let mut frames = vec![reads.holders(&start.lock, &start_owners).await?];
    while let Some(frame) = frames.last_mut() {
        let Some(holder) = frame.pop() else {
            frames.pop();
            path.pop();
            continue;
        };
        if start_owners.contains(holder.as_str()) {
            if let Some(last) = path.last_mut() {
                last.holder = holder;
            }
            walked.cycle = Some(named(&mut reads, &path).await);
            walked.reads = reads.made;
            return Ok(walked);
        }
        if path.len() >= MAX_STEPS || reads.exhausted() {
            walked.cut = true;
            continue;
        }
        let Some(mut next) = reads.wait_of(&holder, &path).await? else {
            walked.dead_ends += 1;
            continue;
        };
        if !visited.insert(next.record.waiter.clone()) {
            continue;
        }
        let own: HashSet<&str> = next.record.owners().collect();
        let holders = reads.holders(&next.record.lock, &own).await?;
        if let Some(last) = path.last_mut() {
            last.holder = holder;
        }
        next.holder = String::new();
        path.push(next);
        frames.push(holders);
    }
    walked.reads = reads.made;
    Ok(walked)
}

/// How many reads all of [`find_all`]'s walks make at most: a server full of
/// long chains (or one cycle of thousands) is read in bounded time.
const FIND_READS: usize = 16 * MAX_READS;

/// The cycle `path` closes, each waiter named by its client's identity.
async fn named(reads: &mut Reads<'_>, path: &[Node]) -> Deadlock {
    let mut identities: HashMap<String, Option<Identity>> = HashMap::new();
    let mut steps = Vec::with_capacity(path.len());
    for node in path {
        let client_id = Owner::parse(&node.record.waiter, "").client_id;
        let identity = match identities.get(&client_id) {
            Some(known) => known.clone(),
            None if client_id.is_empty() => None,
            None => {
                let mut conn = reads.conn.clone();
                let found = identity::look_up(&mut conn, &client_id)
                    .await
                    .ok()
                    .flatten();
                identities.insert(client_id, found.clone());
                found
            }
        };
        steps.push(WaitStep {
            waiter: node.record.waiter.clone(),
            lock: node.record.lock.clone(),
            holder: node.holder.clone(),
            since_ms: (!node.queued).then_some(node.record.since_ms),
            identity,
        });
    }
    Deadlock { steps }
}

/// Every cycle of waits the records on the server show, each once: a walk
/// from every recorded wait not already on a cycle found (until all walks
/// together made [`FIND_READS`] reads), keeping the cycles with a lock whose
/// name matches `pattern` (a glob).
pub(crate) async fn find_all(engine: &Engine, pattern: &str) -> Result<DeadlockScan> {
    let mut found = DeadlockScan::default();
    let records = all_records(engine, &mut found).await?;
    let mut on_cycles: HashSet<String> = HashSet::new();
    let mut keys: HashSet<Vec<String>> = HashSet::new();
    let mut reads = 0;
    for record in &records {
        if on_cycles.contains(&record.waiter) {
            continue;
        }
        if reads >= FIND_READS {
            found.cut = true;
            break;
        }
        let walked = walk_from(&engine.conn, &engine.id, record).await?;
        reads += walked.reads;
        found.dead_ends += walked.dead_ends;
        found.cut |= walked.cut;
        let Some(cycle) = walked.cycle else {
            continue;
        };
        on_cycles.extend(cycle.steps.iter().map(|s| s.waiter.clone()));
        let matches = cycle
            .steps
            .iter()
            .any(|s| super::glob::glob_match(pattern, &s.lock));
        if matches && keys.insert(cycle.key()) {
            found.cycles.push(cycle);
        }
    }
    Ok(found)
}

/// The cycles of waits found on a server
/// ([`Client::find_deadlocks`](crate::Client::find_deadlocks)), and what the
/// walks could not see.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct DeadlockScan {
    /// Each cycle once, whichever of its waits it was found from.
    pub cycles: Vec<Deadlock>,
    /// The waits recorded on the server (waits longer than their client's
    /// threshold, of clients of this crate).
    pub waits: usize,
    /// Holders met whose task's wait is unknown: no record (a Java thread, a
    /// short wait, a client that records nothing) and no entry in a fair
    /// queue the walk knew of. A cycle through one of them is not seen.
    pub dead_ends: usize,
    /// Some walk stopped at its bounds (64 waits deep, 512 reads; 8,192
    /// reads for all walks): a longer cycle is not seen.
    pub cut: bool,
    /// Values under a record hash that were no records (someone else's data).
    pub unreadable: usize,
}

/// Every wait record of every client, each waiter once.
async fn all_records(engine: &Engine, found: &mut DeadlockScan) -> Result<Vec<WaitRecord>> {
    let conn = &engine.conn;
    let (primaries, _) = conn.primaries().await.map_err(Error::redis)?;
    let mut records: HashMap<String, WaitRecord> = HashMap::new();
    for primary in primaries {
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(keys::waits_pattern())
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg("hash");
            let (next, names) = super::scan::decode_step(
                conn.query_on(primary, &scan).await.map_err(Error::redis)?,
            )?;
            for name in names {
                let mut hgetall = redis::cmd("HGETALL");
                hgetall.arg(&name);
                let reply = conn.query_on(primary, &hgetall).await;
                let fields = match reply {
                    Ok(reply) => hash_pairs(reply),
                    // Gone, or changed type, since the SCAN.
                    Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
                    Err(e) => return Err(Error::redis(e)),
                };
                for (field, value) in fields {
                    let field = String::from_utf8_lossy(&field);
                    match parse_record(&value, &field) {
                        Some(record) => {
                            records.entry(record.waiter.clone()).or_insert(record);
                        }
                        None => found.unreadable += 1,
                    }
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    found.waits = records.len();
    let mut records: Vec<WaitRecord> = records.into_values().collect();
    records.sort_by(|a, b| a.waiter.cmp(&b.waiter));
    Ok(records)
}

/// A hash's fields and values as HGETALL answers them (RESP2's flat array or
/// RESP3's map); anything else reads as none.
fn hash_pairs(reply: redis::Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    use redis::Value;
    let bytes = |value: &Value| match value {
        Value::BulkString(b) => Some(b.clone()),
        _ => None,
    };
    match reply {
        Value::Array(items) => items
            .chunks_exact(2)
            .filter_map(|pair| Some((bytes(&pair[0])?, bytes(&pair[1])?)))
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}
