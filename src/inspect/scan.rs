//! The names worth inspecting under a pattern, found at bounded cost: SCAN
//! with MATCH, COUNT and TYPE on every primary (never KEYS, which blocks the
//! server for the whole keyspace), once for hashes (the locks), once for
//! strings (the synchronizers' counts), less the auxiliary keys of the
//! layout, which belong to an object listed under its own name, and once for
//! fair queues, whose lock may be gone while its line still waits.

use std::collections::BTreeSet;

use redis::Value;

use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::keys;

/// How many keys each SCAN step asks the server to look at.
pub(crate) const SCAN_COUNT: usize = 1000;

/// Every name matching `pattern` whose key is a hash or a string, or that has
/// a fair queue, sorted, at
/// most `limit` of them, and whether the list may be incomplete (more names
/// matched, or a primary could not be asked).
pub(crate) async fn scan_names(
    conn: &Conn,
    pattern: &str,
    limit: usize,
) -> Result<(Vec<String>, bool)> {
    let mut names = BTreeSet::new();
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
                let names_found = keys.into_iter().filter_map(|key| match redis_type {
                    // A fair lock whose queue outlives its hash (a dead head
                    // waiter, until its deadline): the stuck lock to find.
                    "list" => {
                        keys::lock_of_fair_queue(&key).filter(|name| glob_match(pattern, name))
                    }
                    _ => (!keys::is_auxiliary(&key)).then_some(key),
                });
                for key in names_found {
                    if names.len() == limit && !names.contains(&key) {
                        incomplete = true;
                        break 'primaries;
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
    Ok((names.into_iter().collect(), incomplete))
}

/// Whether `text` matches the glob `pattern` as Redis's MATCH reads it: `*`,
/// `?`, `[abc]`, `[^a-z]`, and `\` escaping the next character.
fn glob_match(pattern: &str, text: &str) -> bool {
    fn matches(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|skip| matches(rest, &t[skip..])),
            Some(('?', rest)) => !t.is_empty() && matches(rest, &t[1..]),
            Some(('[', rest)) => {
                let Some((&c, t_rest)) = t.split_first() else {
                    return false;
                };
                let (negate, mut body) = match rest.split_first() {
                    Some(('^', body)) => (true, body),
                    _ => (false, rest),
                };
                let mut found = false;
                loop {
                    match body {
                        [] => return false, // unclosed: Redis matches nothing
                        [']', after @ ..] => {
                            body = after;
                            break;
                        }
                        ['\\', x, after @ ..] => {
                            found |= *x == c;
                            body = after;
                        }
                        [a, '-', b, after @ ..] if *b != ']' => {
                            let (lo, hi) = if a <= b { (*a, *b) } else { (*b, *a) };
                            found |= (lo..=hi).contains(&c);
                            body = after;
                        }
                        [x, after @ ..] => {
                            found |= *x == c;
                            body = after;
                        }
                    }
                }
                found != negate && matches(body, t_rest)
            }
            Some(('\\', rest)) if !rest.is_empty() => {
                t.first() == rest.first() && matches(&rest[1..], &t[1..])
            }
            Some((c, rest)) => t.first() == Some(c) && matches(rest, &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    matches(&p, &t)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_redis_reads_them() {
        for (pattern, text, expected) in [
            ("*", "anything", true),
            ("orders:*", "orders:42", true),
            ("orders:*", "order:42", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-c]llo", "hbllo", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("*:42", "orders:42", true),
            ("[", "[", false),
        ] {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} ~ {text}");
        }
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
