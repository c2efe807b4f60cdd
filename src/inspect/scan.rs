//! The names worth inspecting under a pattern, found at bounded cost: SCAN
//! with MATCH, COUNT and TYPE on every primary (never KEYS, which blocks the
//! server for the whole keyspace), once for hashes (the locks) and once for
//! strings (the synchronizers' counts), less the auxiliary keys of the
//! layout, which belong to an object listed under its own name.

use std::collections::BTreeSet;

use redis::Value;

use crate::conn::Conn;
use crate::error::{Error, Result};

/// How many keys each SCAN step asks the server to look at.
pub(crate) const SCAN_COUNT: usize = 1000;

/// Every name matching `pattern` whose key is a hash or a string, sorted, at
/// most `limit` of them (and whether there were more).
pub(crate) async fn scan_names(
    conn: &Conn,
    pattern: &str,
    limit: usize,
) -> Result<(Vec<String>, bool)> {
    let mut names = BTreeSet::new();
    let mut more = false;
    'nodes: for node in conn.primaries().await.map_err(Error::redis)? {
        for redis_type in ["hash", "string"] {
            let mut cursor = 0u64;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .arg("TYPE")
                    .arg(redis_type);
                let reply = conn
                    .query_on(node.as_ref(), &cmd)
                    .await
                    .map_err(Error::redis)?;
                let (next, keys) = decode_step(reply)?;
                for key in keys.into_iter().filter(|key| !is_auxiliary(key)) {
                    if names.len() == limit {
                        more = true;
                        break 'nodes;
                    }
                    names.insert(key);
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    Ok((names.into_iter().collect(), more))
}

/// One SCAN reply: the next cursor and the keys of this step.
fn decode_step(reply: Value) -> Result<(u64, Vec<String>)> {
    let unexpected = |reply: &Value| Error::unexpected("scan", reply);
    let Value::Array(parts) = &reply else {
        return Err(unexpected(&reply));
    };
    let [cursor, Value::Array(keys)] = parts.as_slice() else {
        return Err(unexpected(&reply));
    };
    let cursor = match cursor {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().and_then(|c| c.parse().ok()),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
    .ok_or_else(|| unexpected(&reply))?;
    let keys = keys
        .iter()
        .map(|key| match key {
            Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            other => Err(unexpected(other)),
        })
        .collect::<Result<_>>()?;
    Ok((cursor, keys))
}

/// Keys that are part of another object's layout: a fenced lock's token, a
/// read hold's lease, a semaphore acquire's mark, a release's latch, a
/// client's identity.
fn is_auxiliary(key: &str) -> bool {
    const PREFIXES: [&str; 3] = [
        "redisson_lock_token:",
        "redisson_unlock_latch:",
        "redisson_locks_client:",
    ];
    PREFIXES.iter().any(|prefix| key.starts_with(prefix))
        || key.contains(":rwlock_timeout:")
        || key.contains(":rl-acquired:")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(!is_auxiliary("orders:42"));
    }

    #[test]
    fn a_scan_step_decodes_its_cursor_and_keys() {
        let reply = Value::Array(vec![
            Value::BulkString(b"17".to_vec()),
            Value::Array(vec![Value::BulkString(b"a".to_vec())]),
        ]);
        assert_eq!(decode_step(reply).unwrap(), (17, vec!["a".to_owned()]));
        assert!(decode_step(Value::Int(1)).is_err());
    }
}
