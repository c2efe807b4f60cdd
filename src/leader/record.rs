//! The election's own record, `redisson_locks_leader:{name}`: who won which
//! epoch and when, on the server's clock. Redisson's fenced lock keeps no
//! "since when", so a participant of this crate writes it right after its
//! fenced acquire, in a script that first checks the win still stands (its
//! owner holds the lock and its token is the last drawn), and announces the
//! win on `redisson_locks_leader__channel:{name}` so observers hear of it at
//! once. The record has no TTL, like the token counter beside it: one small
//! key per election, overwritten by each win, and trusted only while its
//! epoch and owner are the lock's current ones (a Java leader writes none).

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::transport::conn::Conn;
pub(super) use crate::transport::keys::leader_channel;
use crate::transport::keys::{fenced_token, leader_record};
use crate::transport::scripts::{self, LeaderKeys};

/// A win as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(super) struct Record {
    pub(super) owner: String,
    pub(super) epoch: u64,
    pub(super) since_ms: u64,
}

/// Records `owner`'s win of `epoch` on election `name`; the server's clock
/// then, or `None` when that win is over already (nothing written).
pub(super) async fn write(
    conn: &mut Conn,
    name: &str,
    owner: &str,
    epoch: u64,
) -> Result<Option<u64>> {
    let (counter, record, channel) = (
        fenced_token(name),
        leader_record(name),
        leader_channel(name),
    );
    let keys = LeaderKeys {
        name,
        counter: &counter,
        record: &record,
        channel: &channel,
    };
    scripts::leader_record(conn, &keys, owner, epoch).await
}

/// The last win recorded on election `name`; `None` when none was (only Java
/// leaders so far) or the key holds something else than a record.
pub(super) async fn read(conn: &mut Conn, name: &str) -> Result<Option<Record>> {
    let text: Option<String> = match redis::cmd("GET")
        .arg(leader_record(name))
        .query_async(conn)
        .await
    {
        Ok(text) => text,
        // Someone else's key of another type: no record, not a failure.
        Err(e) if Error::from_redis(name, e.clone()).is_wrong_type() => None,
        Err(e) => return Err(Error::from_redis(name, e)),
    };
    Ok(text.and_then(|text| parse(&text)))
}

/// A record's JSON; a value in another shape is no record (someone else's).
fn parse(text: &str) -> Option<Record> {
    serde_json::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_parse_and_foreign_values_do_not() {
        let record = parse(r#"{"owner":"c:1","epoch":18446744073709551615,"since_ms":17}"#);
        assert_eq!(
            record,
            Some(Record {
                owner: "c:1".into(),
                epoch: u64::MAX,
                since_ms: 17
            })
        );
        assert_eq!(parse("42"), None);
        assert_eq!(parse(r#"{"owner":"c:1"}"#), None);
    }
}
