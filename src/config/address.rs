//! Addresses in a configuration: parsing them, the database their path
//! names, and masking the credentials they carry in every message and log.

use crate::error::{Error, Result};

/// Parses `address`, one of the addresses that `what` names (`"address"`,
/// `"cluster node"`, `"sentinel address"`); errors show it [`redact_address`]ed.
pub(super) fn parse_address(what: &str, address: &str) -> Result<redis::ConnectionInfo> {
    use redis::IntoConnectionInfo;
    let shown = redact_address(address);
    if !(address.starts_with("redis://") || address.starts_with("rediss://")) {
        return Err(Error::Config(format!(
            "{what} '{shown}' must start with redis:// or rediss://"
        )));
    }
    if address.starts_with("rediss://") && !cfg!(feature = "tls") {
        return Err(Error::Config(format!(
            "{what} '{shown}' needs TLS, and this build has no TLS support (cargo \
             feature `tls`)"
        )));
    }
    address.into_connection_info().map_err(|e| {
        // The redis crate's messages do not quote the URL; should one ever do,
        // the password still stays out.
        let mut reason = e.to_string();
        for secret in secrets_of(address) {
            reason = reason.replace(secret, "***");
        }
        Error::Config(format!("{what} '{shown}': {reason}"))
    })
}

/// The database an address's path names (`redis://host:6379/3` names 3), or
/// `None` when it names none or does not parse (then [`parse_address`] reports it).
pub(super) fn address_database(address: &str) -> Option<i64> {
    use redis::IntoConnectionInfo;
    let url = redis::parse_redis_url(address)?;
    if url.path().trim_matches('/').is_empty() {
        return None;
    }
    let info = address.into_connection_info().ok()?;
    Some(info.redis_settings().db())
}

/// The message for an address (`shown`, e.g. `address 'redis://h:6379/3'`) that
/// names database `named` while the field or key `field` says `database`.
pub(super) fn database_conflict(shown: &str, named: i64, field: &str, database: i64) -> String {
    format!(
        "{shown} names database {named} but {field} is {database}; make them agree, or \
         drop the /{named} from the address"
    )
}

/// `address` with every credential it carries masked, for messages and logs:
/// the password of its user info (`redis://app:***@host`), or the whole user
/// info when it has no `:` (Redisson and redis-cli read a lone
/// `redis://secret@host` as the password), and the value of a `pass` or
/// `password` query parameter (`redis+unix:///run/redis.sock?pass=***`, the
/// form the `redis` crate reads for a socket). Addresses without a scheme
/// (`app:secret@host:6379`, `:secret@host`) are masked the same way, so the
/// error that says a scheme is missing does not repeat the password.
///
/// The user info is taken to end at the *last* `@`, so that an unescaped `@`
/// or `/` in a password (the kind of address that fails to parse) is masked
/// as well; an `@` in a path or query masks a little more than needed, never
/// less.
///
/// ```
/// use redisson_locks::redact_address;
///
/// assert_eq!(redact_address("redis://app:s3cret@10.0.0.5:6380/1"), "redis://app:***@10.0.0.5:6380/1");
/// assert_eq!(redact_address("app:s3cret@cache:6379"), "app:***@cache:6379");
/// assert_eq!(redact_address("redis+unix:///tmp/r.sock?db=1&pass=s3cret"), "redis+unix:///tmp/r.sock?db=1&pass=***");
/// ```
pub fn redact_address(address: &str) -> std::borrow::Cow<'_, str> {
    let secrets = secret_ranges(address);
    if secrets.is_empty() {
        return address.into();
    }
    let mut shown = String::with_capacity(address.len());
    let mut from = 0;
    for secret in secrets {
        shown.push_str(&address[from..secret.start]);
        shown.push_str("***");
        from = secret.end;
    }
    shown.push_str(&address[from..]);
    shown.into()
}

/// The query parameters whose values are secrets.
const SECRET_PARAMETERS: [&str; 2] = ["pass", "password"];

/// The parts of `address` that [`redact_address`] masks, in order: the user info's
/// secret, then each secret query parameter's value.
fn secret_ranges(address: &str) -> Vec<std::ops::Range<usize>> {
    let start = address.find("://").map_or(0, |i| i + 3);
    let mut ranges = Vec::new();
    let mut rest_from = start;
    if let Some(at) = address[start..].rfind('@').map(|i| start + i) {
        let secret = address[start..at]
            .find(':')
            .map_or(start, |colon| start + colon + 1);
        ranges.push(secret..at);
        rest_from = at + 1;
    }
    let Some(query) = address[rest_from..].find('?').map(|i| rest_from + i + 1) else {
        return ranges;
    };
    let query_end = address[query..]
        .find('#')
        .map_or(address.len(), |i| query + i);
    let mut from = query;
    for parameter in address[query..query_end].split('&') {
        if let Some((key, value)) = parameter.split_once('=') {
            let secret = SECRET_PARAMETERS
                .iter()
                .any(|name| key.eq_ignore_ascii_case(name));
            if secret && !value.is_empty() {
                let value_start = from + key.len() + 1;
                ranges.push(value_start..value_start + value.len());
            }
        }
        from += parameter.len() + 1;
    }
    ranges
}

/// The secrets of `address` ([`redact_address`]'s ranges), for scrubbing them out of
/// a message that might quote them.
fn secrets_of(address: &str) -> impl Iterator<Item = &str> {
    secret_ranges(address)
        .into_iter()
        .map(move |range| &address[range])
        .filter(|secret| !secret.is_empty())
}
