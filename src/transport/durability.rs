//! What a server can do for the durability mode asked for ([`Durability`]),
//! found by asking it ([`probe`]), and what replica sync sends there as a
//! result ([`Plan`], from [`Wanted::plan`]).
//!
//! The probe runs the commands themselves with nothing to wait for (`WAIT 0
//! 1`, `WAITAOF 0 0 1` answer at once), so a command the server does not
//! know, an ACL that forbids it, a rename and a replica's refusal all show the
//! same way they would on an acquire; and it reads `appendonly` and
//! `appendfsync`, without which `WAITAOF`'s local count never comes (or comes
//! once a second).

use std::collections::HashMap;
use std::time::Duration;

use redis::Value;

use crate::config::Durability;
use crate::error::{Error, RedisErrorKind};
use crate::transport::conn::Conn;

/// What one server said it supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Support {
    /// The server and its version, for messages (`Redis 7.0.15`).
    pub(crate) server: String,
    /// Why `WAIT` cannot be used there, if it cannot.
    pub(crate) wait: Option<String>,
    /// Why `WAITAOF` cannot be used there, if it cannot.
    pub(crate) waitaof: Option<String>,
    /// Why `WAITAOF`'s local count cannot be waited for there, if it cannot.
    pub(crate) local_aof: Option<String>,
    /// `appendfsync everysec`: the local count comes up to a second late.
    pub(crate) fsync_each_second: bool,
    /// Replicas connected now; `None` when `INFO` could not be read.
    pub(crate) replicas: Option<u32>,
}

/// Asks the server `conn` reaches (in a cluster, the primary serving `slot`)
/// what it supports. `Err` only when it could not be asked (the connection
/// failed): a refusal is an answer.
pub(crate) async fn probe(conn: &Conn, slot: Option<u16>) -> Result<Support, Error> {
    let ask =
        |cmd: redis::Cmd| async move { conn.query_on(slot, &cmd).await.map_err(Error::redis) };
    // Nothing to wait for: answered at once (a timeout of 1 ms, never 0,
    // which would mean "for ever" to a server that counted otherwise).
    let mut wait = redis::cmd("WAIT");
    wait.arg(0).arg(1);
    let mut waitaof = redis::cmd("WAITAOF");
    waitaof.arg(0).arg(0).arg(1);
    let info = |section: &str| {
        let mut cmd = redis::cmd("INFO");
        cmd.arg(section);
        cmd
    };
    let mut fsync = redis::cmd("CONFIG");
    fsync.arg("GET").arg("appendfsync");
    let (wait, waitaof, replication, persistence, server, fsync) = tokio::join!(
        ask(wait),
        ask(waitaof),
        ask(info("replication")),
        ask(info("persistence")),
        ask(info("server")),
        ask(fsync),
    );
    let text = |reply: Result<Value, Error>| -> Result<Option<String>, Error> {
        match reply {
            Ok(value) => Ok(redis::from_redis_value::<String>(value).ok()),
            Err(e) if refused(&e) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let (replication, persistence, server) =
        (text(replication)?, text(persistence)?, text(server)?);
    let server = match (
        info_field(&server, "valkey_version"),
        info_field(&server, "redis_version"),
    ) {
        (Some(v), _) => format!("Valkey {v}"),
        (None, Some(v)) => format!("Redis {v}"),
        (None, None) => "the server".to_owned(),
    };
    let appendfsync = fsync
        .ok()
        .and_then(|v| redis::from_redis_value::<HashMap<String, String>>(v).ok())
        .and_then(|pairs| pairs.get("appendfsync").map(|v| v.to_ascii_lowercase()));
    let local_aof = match (
        info_field(&persistence, "aof_enabled").as_deref(),
        appendfsync.as_deref(),
    ) {
        (Some("0"), _) => Some(
            "appendonly is off, so there is no append-only file to wait for \
             (CONFIG SET appendonly yes)"
                .to_owned(),
        ),
        (_, Some("no")) => Some(
            "appendfsync is no: the server leaves fsync to the OS and never reports one, \
             so every acquire would wait out replica_sync_timeout (redisson#6920); set \
             appendfsync everysec or always"
                .to_owned(),
        ),
        _ => None,
    };
    Ok(Support {
        server,
        wait: why_not(wait)?,
        waitaof: why_not(waitaof)?,
        local_aof,
        fsync_each_second: appendfsync.as_deref() == Some("everysec"),
        replicas: info_field(&replication, "connected_slaves")
            .and_then(|n| crate::numeral::decimal(&n)),
    })
}

/// The value of a `field:value` line of an `INFO` reply's `text` (none when
/// the reply or the line is missing).
pub(crate) fn info_field(text: &Option<String>, name: &str) -> Option<String> {
    text.as_deref()?.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().to_owned())
    })
}

/// Whether a command's error is the server's refusal of the command itself
/// (unknown or renamed away, forbidden by the ACL, not on a replica, a
/// `WAITAOF` without an append-only file), not a failure to ask: a `BUSY`
/// server or any other passing error keeps what was known.
pub(crate) fn refused(e: &Error) -> bool {
    let Error::Redis(failure) = e else {
        return false;
    };
    match failure.kind() {
        RedisErrorKind::NoPermission => true,
        RedisErrorKind::Server => {
            let text = e.to_string().to_ascii_lowercase();
            text.contains("unknown command") || text.contains("cannot be used")
        }
        _ => false,
    }
}

/// `None` when the command answered; why not when the server refused it, in
/// words a user can act on.
fn why_not(reply: Result<Value, Error>) -> Result<Option<String>, Error> {
    let refusal = match reply {
        Ok(Value::ServerError(e)) => e.to_string(),
        Ok(_) => return Ok(None),
        Err(e) if refused(&e) => e.to_string(),
        Err(e) => return Err(e),
    };
    Ok(Some(in_words(&refusal)))
}

/// A server's refusal of a command, in words a user can act on.
pub(crate) fn in_words(refusal: &str) -> String {
    let lower = refusal.to_ascii_lowercase();
    if lower.contains("unknown command") {
        "it does not know the command (too old, or renamed away)".to_owned()
    } else if lower.contains("noperm") || lower.contains("no permissions") {
        "the client's ACL user may not run it (ACL SETUSER <user> +<command>)".to_owned()
    } else {
        format!("it refuses it: {refusal}")
    }
}

/// The durability asked for in the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) mode: Durability,
    /// [`Config::replica_sync`](crate::Config::replica_sync): `None` when the
    /// client chooses (one replica where any was connected at connect time).
    pub(crate) replicas: Option<u32>,
    /// The `WAIT`'s timeout.
    pub(crate) timeout: Duration,
}

/// What replica sync sends after each acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Nothing: every hold counts as confirmed.
    Off,
    /// `mode`'s command, with `replicas` to acknowledge.
    On { mode: Durability, replicas: u32 },
}

impl Plan {
    /// How many replicas must acknowledge; 0 when off.
    pub(crate) fn replicas(self) -> u32 {
        match self {
            Plan::Off => 0,
            Plan::On { replicas, .. } => replicas,
        }
    }

    /// The command and its arguments, timeout `timeout_ms`.
    pub(crate) fn command(self, timeout_ms: u64) -> Option<redis::Cmd> {
        let Plan::On { mode, replicas } = self else {
            return None;
        };
        let mut cmd = redis::cmd(mode.command());
        if mode != Durability::Replicas {
            cmd.arg(u32::from(mode.local()));
        }
        cmd.arg(replicas).arg(timeout_ms);
        Some(cmd)
    }

    /// Whether `reply` (to [`command`](Plan::command)) says enough servers
    /// have the writes; `Err` when the reply is not the command's.
    pub(crate) fn satisfied_by(self, reply: &Value) -> Result<bool, Error> {
        let Plan::On { mode, replicas } = self else {
            return Ok(true);
        };
        let count = |value: &Value| match value {
            Value::Int(n) => u32::try_from(*n).ok(),
            _ => None,
        };
        let unexpected = || Error::unexpected(mode.command(), reply);
        match (mode, reply) {
            (Durability::Replicas, reply) => count(reply)
                .map(|acked| acked >= replicas)
                .ok_or_else(unexpected),
            (_, Value::Array(counts)) if counts.len() == 2 => {
                let local = count(&counts[0]).ok_or_else(unexpected)?;
                let acked = count(&counts[1]).ok_or_else(unexpected)?;
                Ok((local >= 1 || !mode.local()) && acked >= replicas)
            }
            _ => Err(unexpected()),
        }
    }
}

/// What the client can do: a plan, with a warning for the user when it is
/// less than asked; or why the mode asked for cannot be had.
pub(crate) type Resolved = Result<(Plan, Option<String>), String>;

impl Wanted {
    /// What to send on a server that supports `support`, with `auto` replicas
    /// to acknowledge when the configuration leaves it to the client.
    pub(crate) fn plan(&self, support: &Support, auto: Option<u32>) -> Resolved {
        let server = &support.server;
        let (replicas, mut warning) = match (self.replicas, auto) {
            (Some(n), _) => (n, None),
            (None, Some(n)) => (n.min(1), None),
            (None, None) => (
                0,
                Some(
                    "could not read INFO replication: replica sync is off; set \
                     Config::replica_sync to require replica acknowledgements"
                        .to_owned(),
                ),
            ),
        };
        let mode = self.mode;
        if replicas == 0 && !mode.local() {
            if mode != Durability::Replicas && self.replicas.is_none() && warning.is_none() {
                warning = Some(format!(
                    "durability {mode}: {server} had no replica connected, so nothing is \
                     waited for; set Config::replica_sync to require replicas"
                ));
            }
            return Ok((Plan::Off, warning));
        }
        if mode == Durability::Replicas {
            return match &support.wait {
                None => Ok((Plan::On { mode, replicas }, warning)),
                // The client turned sync on by itself: a server that refuses
                // WAIT (some managed services do) turns it off again.
                Some(why) if self.replicas.is_none() => Ok((
                    Plan::Off,
                    Some(format!(
                        "{server} has replicas but refuses WAIT ({why}): replica sync is \
                         off; a failover may lose a hold"
                    )),
                )),
                Some(why) => Err(format!(
                    "replica_sync {replicas} needs WAIT, which {server} refuses ({why}); \
                     set replica_sync to 0 to lock without it"
                )),
            };
        }
        if let Some(why) = &support.waitaof {
            return Err(format!(
                "durability {mode} needs WAITAOF (Redis 7.2 and later, Valkey 7.2 and \
                 later), which {server} refuses ({why}); durability replicas sends WAIT"
            ));
        }
        if mode.local() {
            if let Some(why) = &support.local_aof {
                return Err(format!("durability {mode} on {server}: {why}"));
            }
            if support.fsync_each_second && self.timeout <= Duration::from_millis(1_100) {
                return Err(format!(
                    "durability {mode} on {server}: appendfsync everysec fsyncs once a \
                     second, so most acquires would wait out a replica sync timeout of \
                     {:?}; set appendfsync always, or replica_sync_timeout to 1.5 s or \
                     more (and timeout to three times that)",
                    self.timeout
                ));
            }
        }
        Ok((Plan::On { mode, replicas }, warning))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Support {
        Support {
            server: "Redis 8.2.3".into(),
            replicas: Some(1),
            ..Support::default()
        }
    }

    fn wanted(mode: Durability, replicas: Option<u32>) -> Wanted {
        Wanted {
            mode,
            replicas,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_default_waits_for_one_replica_where_there_are_any() {
        let auto = wanted(Durability::Replicas, None);
        assert_eq!(
            auto.plan(&full(), Some(3)),
            Ok((
                Plan::On {
                    mode: Durability::Replicas,
                    replicas: 1
                },
                None
            ))
        );
        assert_eq!(auto.plan(&full(), Some(0)), Ok((Plan::Off, None)));
        let (plan, warning) = auto.plan(&full(), None).unwrap();
        assert_eq!(plan, Plan::Off);
        assert!(warning.unwrap().contains("INFO replication"));
    }

    #[test]
    fn a_refused_wait_turns_the_default_off_and_fails_an_explicit_count() {
        let refusing = Support {
            wait: Some("the client's ACL user may not run it".into()),
            ..full()
        };
        let (plan, warning) = wanted(Durability::Replicas, None)
            .plan(&refusing, Some(1))
            .unwrap();
        assert_eq!(plan, Plan::Off);
        assert!(warning.unwrap().contains("refuses WAIT"));
        let err = wanted(Durability::Replicas, Some(1))
            .plan(&refusing, Some(1))
            .unwrap_err();
        assert!(err.contains("ACL") && err.contains("replica_sync"), "{err}");
        // Nothing asked, nothing refused.
        assert_eq!(
            wanted(Durability::Replicas, Some(0)).plan(&refusing, Some(1)),
            Ok((Plan::Off, None))
        );
    }

    #[test]
    fn aof_modes_need_waitaof_and_the_local_one_a_usable_append_only_file() {
        let old = Support {
            server: "Redis 7.0.15".into(),
            waitaof: Some("it does not know the command".into()),
            ..full()
        };
        for mode in [Durability::Aof, Durability::ReplicaAof] {
            let err = wanted(mode, Some(1)).plan(&old, Some(1)).unwrap_err();
            assert!(err.contains("Redis 7.0.15") && err.contains("7.2"), "{err}");
        }
        let no_file = Support {
            local_aof: Some("appendonly is off".into()),
            ..full()
        };
        assert!(wanted(Durability::Aof, Some(0))
            .plan(&no_file, Some(0))
            .unwrap_err()
            .contains("appendonly"));
        // The replicas' files do not need the primary's.
        assert_eq!(
            wanted(Durability::ReplicaAof, Some(1)).plan(&no_file, Some(1)),
            Ok((
                Plan::On {
                    mode: Durability::ReplicaAof,
                    replicas: 1
                },
                None
            ))
        );
        let each_second = Support {
            fsync_each_second: true,
            ..full()
        };
        assert!(wanted(Durability::Aof, Some(0))
            .plan(&each_second, Some(0))
            .unwrap_err()
            .contains("everysec"));
        let patient = Wanted {
            timeout: Duration::from_millis(1_500),
            ..wanted(Durability::Aof, Some(0))
        };
        assert_eq!(
            patient.plan(&each_second, Some(0)),
            Ok((
                Plan::On {
                    mode: Durability::Aof,
                    replicas: 0
                },
                None
            ))
        );
    }

    #[test]
    fn replies_are_read_per_mode() {
        let wait = Plan::On {
            mode: Durability::Replicas,
            replicas: 2,
        };
        assert_eq!(wait.satisfied_by(&Value::Int(2)).ok(), Some(true));
        assert_eq!(wait.satisfied_by(&Value::Int(1)).ok(), Some(false));
        assert!(wait.satisfied_by(&Value::Nil).is_err());
        let aof = Plan::On {
            mode: Durability::Aof,
            replicas: 1,
        };
        let counts = |local, acked| Value::Array(vec![Value::Int(local), Value::Int(acked)]);
        assert_eq!(aof.satisfied_by(&counts(1, 1)).ok(), Some(true));
        assert_eq!(aof.satisfied_by(&counts(0, 1)).ok(), Some(false));
        assert_eq!(aof.satisfied_by(&counts(1, 0)).ok(), Some(false));
        let replica_aof = Plan::On {
            mode: Durability::ReplicaAof,
            replicas: 1,
        };
        assert_eq!(replica_aof.satisfied_by(&counts(0, 1)).ok(), Some(true));
        assert!(replica_aof.satisfied_by(&Value::Int(1)).is_err());
        let sent = |plan: Plan| {
            plan.command(250)
                .map(|cmd| String::from_utf8_lossy(&cmd.get_packed_command()).into_owned())
        };
        assert!(sent(aof)
            .unwrap()
            .contains("WAITAOF\r\n$1\r\n1\r\n$1\r\n1\r\n$3\r\n250"));
        assert!(sent(replica_aof)
            .unwrap()
            .contains("WAITAOF\r\n$1\r\n0\r\n"));
        assert_eq!(sent(Plan::Off), None);
    }
}
