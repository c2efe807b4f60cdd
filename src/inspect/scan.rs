//! The names worth inspecting under a pattern, found at bounded cost: SCAN
//! with MATCH, COUNT and TYPE on every primary (never KEYS, which blocks the
//! server for the whole keyspace), once for hashes (the locks), once for
//! strings (the synchronizers' counts), less the auxiliary keys of the
//! layout, which belong to an object listed under its own name, and once for
//! fair queues, whose lock may be gone while its line still waits.

use std::collections::BTreeSet;

use redis::Value;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::transport::keys;

use super::glob::glob_match;

/// How many keys each SCAN step asks the server to look at.
pub(crate) const SCAN_COUNT: usize = 1000;

/// A key a scan met under its pattern but could not read as a lock's name,
/// so could not inspect; [`Scanned::skipped`](crate::inspect::Scanned::skipped)
/// lists them, so that a scan never leaves a key out without saying so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Skipped {
    /// The key as read: bytes that are not UTF-8 replaced by U+FFFD, cut
    /// after its first [`SKIPPED_SHOWN`] characters.
    pub key: String,
    /// Its length in bytes, whole.
    pub len: usize,
    /// Why it could not be read.
    pub reason: SkipReason,
}

/// Why a scan passed over a key (see [`Skipped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The key is not UTF-8, and a lock's name is a `&str`.
    NotUtf8,
    /// The key is empty, or over [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes:
    /// no lock of this crate can have that name.
    NotAName,
    /// In a cluster, its hash tag would put the name's other keys in other
    /// slots, so the object cannot be read in one script.
    SplitOverSlots,
}

/// How many characters of a skipped key are kept.
pub const SKIPPED_SHOWN: usize = 100;

/// What a scan of the names found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// The names to inspect, sorted.
    pub(crate) names: Vec<String>,
    /// The keys passed over, at most as many as names may be found.
    pub(crate) skipped: Vec<Skipped>,
    /// More names matched than the limit, or a primary could not be asked.
    pub(crate) incomplete: bool,
}

/// Every name matching `pattern` whose key is a hash or a string, or that has
/// a fair queue, sorted, at most `limit` of them; and the matching keys that
/// no lock could be named (not UTF-8, empty or too long, split over slots).
pub(crate) async fn scan_names(conn: &Conn, pattern: &str, limit: usize) -> Result<Found> {
    let mut names = BTreeSet::new();
    let mut skipped = Vec::new();
    let (primaries, mut incomplete) = conn.primaries().await.map_err(Error::redis)?;
    'primaries: for primary in primaries {
        for redis_type in ["hash", "string", "list"] {
            let matching = if redis_type == "list" {
                keys::fair_queue_pattern()
            } else {
                pattern.to_owned()
            };
            let mut cursor = 0u64;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(&matching)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .arg("TYPE")
                    .arg(redis_type);
                let reply = conn.query_on(primary, &cmd).await.map_err(Error::redis)?;
                let (next, keys) = decode_step(reply)?;
                for key in keys {
                    let name = match name_of(key, redis_type, pattern, conn.is_cluster()) {
                        Some(Ok(name)) => name,
                        Some(Err(skip)) => {
                            if skipped.len() < limit {
                                skipped.push(skip);
                            }
                            continue;
                        }
                        None => continue,
                    };
                    if names.len() == limit && !names.contains(&name) {
                        incomplete = true;
                        break 'primaries;
                    }
                    names.insert(name);
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    Ok(Found {
        names: names.into_iter().collect(),
        skipped,
        incomplete,
    })
}

/// The name a key found by SCAN stands for: `None` for a key that is no
/// object of its own (an auxiliary key, a fair queue of a name outside the
/// pattern), `Some(Err)` for one no lock could be named.
fn name_of(
    key: Vec<u8>,
    redis_type: &str,
    pattern: &str,
    cluster: bool,
) -> Option<std::result::Result<String, Skipped>> {
    let skip = |key: &[u8], reason| {
        let text = String::from_utf8_lossy(key);
        Skipped {
            key: text.chars().take(SKIPPED_SHOWN).collect(),
            len: key.len(),
            reason,
        }
    };
    let name = match std::str::from_utf8(&key) {
        // A fair lock whose queue outlives its hash (a dead head waiter,
        // until its deadline): the stuck lock to find. Its lock's name is
        // matched here, as the pattern is about names.
        Ok(text) if redis_type == "list" => {
            keys::lock_of_fair_queue(text).filter(|name| glob_match(pattern, name))?
        }
        Ok(text) if keys::is_auxiliary(text) => return None,
        Ok(text) => text.to_owned(),
        Err(_) if redis_type == "list" => {
            let text = String::from_utf8_lossy(&key);
            keys::lock_of_fair_queue(&text).filter(|name| glob_match(pattern, name))?;
            return Some(Err(skip(&key, SkipReason::NotUtf8)));
        }
        Err(_) => return Some(Err(skip(&key, SkipReason::NotUtf8))),
    };
    if keys::validate_name(&name).is_err() {
        return Some(Err(skip(name.as_bytes(), SkipReason::NotAName)));
    }
    if cluster && keys::validate_cluster_name(&name).is_err() {
        return Some(Err(skip(name.as_bytes(), SkipReason::SplitOverSlots)));
    }
    Some(Ok(name))
}

/// One SCAN reply: the next cursor and the keys of this step, as bytes.
pub(super) fn decode_step(reply: Value) -> Result<(u64, Vec<Vec<u8>>)> {
    let unexpected = |reply: &Value| Error::unexpected("scan", reply);
    let Value::Array(parts) = &reply else {
        return Err(unexpected(&reply));
    };
    let [cursor, Value::Array(keys)] = parts.as_slice() else {
        return Err(unexpected(&reply));
    };
    let cursor = match cursor {
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(crate::numeral::decimal),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
    .ok_or_else(|| unexpected(&reply))?;
    let keys = keys
        .iter()
        .map(|key| match key {
            Value::BulkString(bytes) => Ok(bytes.clone()),
            other => Err(unexpected(other)),
        })
        .collect::<Result<_>>()?;
    Ok((cursor, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_step_decodes_its_cursor_and_keys() {
        let reply = Value::Array(vec![
            Value::BulkString(b"17".to_vec()),
            Value::Array(vec![Value::BulkString(b"a".to_vec())]),
        ]);
        assert_eq!(decode_step(reply).unwrap(), (17, vec![b"a".to_vec()]));
        assert!(decode_step(Value::Int(1)).is_err());
    }

    #[test]
    fn keys_no_lock_could_be_named_are_said_not_dropped() {
        let reason = |key: &[u8], redis_type: &str, cluster: bool| match name_of(
            key.to_vec(),
            redis_type,
            "*",
            cluster,
        ) {
            Some(Err(skipped)) => Some(skipped.reason),
            _ => None,
        };
        assert_eq!(reason(b"ok\xff", "hash", false), Some(SkipReason::NotUtf8));
        assert_eq!(
            reason(b"redisson_lock_queue:{q\xfe}", "list", false),
            Some(SkipReason::NotUtf8)
        );
        let long = vec![b'a'; crate::MAX_NAME_LEN + 1];
        assert_eq!(reason(&long, "string", false), Some(SkipReason::NotAName));
        assert_eq!(
            reason(b"{half", "hash", true),
            Some(SkipReason::SplitOverSlots)
        );
        assert_eq!(reason(b"{half", "hash", false), None);
        let Some(Err(skipped)) = name_of(long.clone(), "hash", "*", false) else {
            panic!("a name too long is skipped");
        };
        assert_eq!(
            (skipped.key.len(), skipped.len),
            (SKIPPED_SHOWN, long.len())
        );
        // An auxiliary key, and a queue of a name outside the pattern, are
        // no objects of their own: nothing to say.
        assert!(name_of(b"redisson_lock_token:{t}".to_vec(), "string", "*", false).is_none());
        assert!(name_of(b"redisson_lock_queue:{x}".to_vec(), "list", "y*", false).is_none());
    }
}
