//! The one error type of the crate.

use std::fmt;

/// Everything that can go wrong in this crate.
///
/// Match on the variant, or use the `is_*` predicates, which keep working when a
/// variant grows fields. The enum is `#[non_exhaustive]`: new failure kinds may be
/// added without a breaking release.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The caller does not hold the lock it tried to release or extend.
    ///
    /// This is Redisson's `IllegalMonitorStateException`: the lock is free, its lease
    /// expired, or another owner holds it.
    NotHeld {
        /// The lock name.
        name: String,
        /// The owner field (`<client-uuid>:<id>`) that tried to release it.
        owner: String,
    },
    /// An argument was rejected before any I/O: an empty or oversized name, a zero
    /// lease or a duration too large for Redis' millisecond arithmetic.
    InvalidArgument(String),
    /// The configuration could not be parsed or is inconsistent.
    Config(String),
    /// The lock key exists but holds another Redis type than the lock kind expects
    /// (Redis answered `WRONGTYPE`). Retrying cannot help.
    WrongType {
        /// The lock name.
        name: String,
    },
    /// The owner asked to wait, without a time limit, for the write lock of a
    /// read-write lock while holding its read lock. Upgrading is not supported (as
    /// in Redisson), so that wait could only end when the owner's own read hold
    /// expired: it is refused instead. A timed try simply times out.
    WouldDeadlock {
        /// The lock name.
        name: String,
    },
    /// The owner asked for a non-reentrant lock it already holds
    /// ([`Client::get_non_reentrant_lock`](crate::Client::get_non_reentrant_lock)).
    /// Refused at once, as Redisson refuses it (with `IllegalMonitorStateException`):
    /// waiting would be waiting on itself.
    AlreadyHeld {
        /// The lock name.
        name: String,
        /// The owner field (`<client-uuid>:<id>`) that asked again.
        owner: String,
    },
    /// The lock was acquired on the primary but no replica acknowledged it within
    /// `replica_sync_timeout`; it was released again (see
    /// [`Config::replica_sync`](crate::Config::replica_sync)).
    NotReplicated {
        /// The lock name.
        name: String,
        /// How many replicas were asked to acknowledge.
        replicas: u32,
    },
    /// Redis could not be reached, the connection broke, a command timed out, or the
    /// server refused the command (authentication, ACL, ...).
    Redis(redis::RedisError),
    /// Redis answered with a reply this crate does not understand.
    UnexpectedReply {
        /// What was being done.
        operation: &'static str,
        /// The reply, rendered for the message.
        reply: String,
    },
}

impl Error {
    /// Is this the "not held by this owner" error (Java's `IllegalMonitorStateException`)?
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// Was an argument rejected before any I/O?
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    /// Is the configuration at fault?
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config(_))
    }

    /// Does the lock key hold a value of another Redis type?
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, Error::WrongType { .. })
    }

    /// Was a write lock refused because the owner holds the read lock?
    pub fn is_would_deadlock(&self) -> bool {
        matches!(self, Error::WouldDeadlock { .. })
    }

    /// Did the owner ask again for a non-reentrant lock it holds?
    pub fn is_already_held(&self) -> bool {
        matches!(self, Error::AlreadyHeld { .. })
    }

    /// Was an acquire released again because no replica acknowledged it?
    pub fn is_not_replicated(&self) -> bool {
        matches!(self, Error::NotReplicated { .. })
    }

    /// Is this an error from Redis or the connection to it?
    pub fn is_redis(&self) -> bool {
        matches!(self, Error::Redis(_))
    }

    /// Did Redis answer with an unexpected reply?
    pub fn is_unexpected_reply(&self) -> bool {
        matches!(self, Error::UnexpectedReply { .. })
    }

    /// Is this a transport failure (refused, dropped, timed out) or a server's
    /// "not now" that a later attempt may get past, as opposed to a refusal that
    /// will repeat (auth, ACL, bad input)?
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || is_not_now(e)
            }
            _ => false,
        }
    }

    /// Did the server surely not run the command? True for a refused connection
    /// and for the server's "not now" refusals; false for a timeout or a
    /// connection cut mid-request, after which the command may or may not have run.
    pub(crate) fn is_surely_not_executed(&self) -> bool {
        match self {
            Error::Redis(e) => e.is_connection_refusal() || is_not_now(e),
            _ => false,
        }
    }

    /// Is this a refusal decided by a script that changed nothing (a re-entry
    /// of a non-reentrant lock, an upgrade)? Its outcome is known: nothing to
    /// settle.
    pub(crate) fn is_definite_refusal(&self) -> bool {
        matches!(
            self,
            Error::AlreadyHeld { .. } | Error::WouldDeadlock { .. }
        )
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    pub(crate) fn unexpected(operation: &'static str, reply: impl fmt::Debug) -> Self {
        Error::UnexpectedReply {
            operation,
            reply: format!("{reply:?}"),
        }
    }

    /// Converts a Redis error raised while operating on lock `name`, recognising a
    /// `WRONGTYPE` refusal (which Lua scripts surface inside their error text).
    pub(crate) fn from_redis(name: &str, err: redis::RedisError) -> Self {
        let wrong_type = err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE");
        if wrong_type {
            Error::WrongType {
                name: name.to_owned(),
            }
        } else {
            Error::Redis(err)
        }
    }
}

/// The server refused to run the command for now: LOADING, TRYAGAIN, MASTERDOWN,
/// CLUSTERDOWN, READONLY from a primary demoted in a failover, or NOSCRIPT (a
/// script it does not have; `lua.rs` answers that one itself).
fn is_not_now(err: &redis::RedisError) -> bool {
    matches!(
        err.kind(),
        redis::ErrorKind::Server(
            redis::ServerErrorKind::BusyLoading
                | redis::ServerErrorKind::TryAgain
                | redis::ServerErrorKind::MasterDown
                | redis::ServerErrorKind::ClusterDown
                | redis::ServerErrorKind::ReadOnly
                | redis::ServerErrorKind::NoScript
        )
    )
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHeld { name, owner } => {
                write!(f, "lock '{name}' is not held by owner {owner}")
            }
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Config(msg) => write!(f, "invalid configuration: {msg}"),
            Error::WrongType { name } => write!(
                f,
                "key '{name}' holds a value of another type than this lock kind uses"
            ),
            Error::WouldDeadlock { name } => write!(
                f,
                "the write lock of '{name}' was requested without a time limit by an owner \
                 holding its read lock; upgrading is not supported"
            ),
            Error::AlreadyHeld { name, owner } => write!(
                f,
                "lock '{name}' is not reentrant and owner {owner} already holds it"
            ),
            Error::NotReplicated { name, replicas } => write!(
                f,
                "lock '{name}' was acquired but none of {replicas} replica(s) acknowledged \
                 it in time; it was released"
            ),
            Error::Redis(e) => write!(f, "redis error: {e}"),
            Error::UnexpectedReply { operation, reply } => {
                write!(f, "unexpected reply from redis to {operation}: {reply}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        Error::Redis(err)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_is_recognised_inside_script_errors() {
        let err = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "script failed",
            "WRONGTYPE Operation against a key holding the wrong kind of value".to_owned(),
        ));
        assert!(Error::from_redis("n", err).is_wrong_type());
    }

    #[test]
    fn io_errors_are_transient_and_not_held_is_not() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(Error::Redis(io.into()).is_transient());
        let not_held = Error::NotHeld {
            name: "n".into(),
            owner: "o".into(),
        };
        assert!(!not_held.is_transient());
        assert!(not_held.is_not_held());
    }
}
