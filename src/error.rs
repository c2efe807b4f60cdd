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
    /// server refused the command (authentication, ACL, ...). The details are
    /// this crate's own ([`RedisFailure`]), so matching on them does not tie you to
    /// the `redis` crate's version; the driver's error is the
    /// [`source`](std::error::Error::source).
    Redis(RedisFailure),
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

    /// Did a command, or connecting, run out of time (`timeout`,
    /// `connect_timeout`)? Its outcome on the server is unknown.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Redis(f) if f.kind == RedisErrorKind::Timeout)
    }

    /// Is this a transport failure (refused, dropped, timed out) or a server's
    /// "not now" that a later attempt may get past, as opposed to a refusal that
    /// will repeat (auth, ACL, bad input)?
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Redis(f) => matches!(
                f.kind,
                RedisErrorKind::Io
                    | RedisErrorKind::Timeout
                    | RedisErrorKind::ConnectionDropped
                    | RedisErrorKind::ConnectionRefused
                    | RedisErrorKind::NotNow
            ),
            _ => false,
        }
    }

    /// Did the server surely not run the command? True for a refused connection
    /// and for the server's "not now" refusals; false for a timeout or a
    /// connection cut mid-request, after which the command may or may not have run.
    pub(crate) fn is_surely_not_executed(&self) -> bool {
        matches!(
            self,
            Error::Redis(f) if matches!(f.kind, RedisErrorKind::ConnectionRefused | RedisErrorKind::NotNow)
        )
    }

    /// A failure of the driver, in this crate's terms.
    pub(crate) fn redis(err: redis::RedisError) -> Self {
        Error::Redis(RedisFailure::new(err))
    }

    /// Connecting took longer than `connect_timeout`.
    pub(crate) fn connect_timeout(address: &str) -> Self {
        Error::Redis(RedisFailure {
            kind: RedisErrorKind::Timeout,
            code: None,
            message: format!("could not connect to {address} within connect_timeout"),
            source: None,
        })
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
            Error::redis(err)
        }
    }
}

/// What kind of Redis failure an [`Error::Redis`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisErrorKind {
    /// The connection could not be made: refused, unreachable, DNS, TLS
    /// handshake. The command was not sent.
    ConnectionRefused,
    /// The connection broke while a command was in flight: it may have run.
    ConnectionDropped,
    /// Another transport failure.
    Io,
    /// A command, or connecting, took too long; a command's outcome is unknown.
    Timeout,
    /// The server will refuse for now, and a later attempt may get through:
    /// `LOADING`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`, `READONLY` (a primary
    /// demoted in a failover), `NOSCRIPT`.
    NotNow,
    /// Authentication failed (`WRONGPASS`, `NOAUTH`).
    Auth,
    /// The user's ACL forbids the command, key or channel (`NOPERM`).
    NoPermission,
    /// Any other refusal by the server (see [`RedisFailure::code`]).
    Server,
    /// The reply could not be parsed, or the client was misused.
    Client,
}

/// The details of an [`Error::Redis`]: this crate's own data, with the
/// driver's error kept as the [`source`](std::error::Error::source).
#[derive(Debug, Clone)]
pub struct RedisFailure {
    kind: RedisErrorKind,
    code: Option<String>,
    message: String,
    source: Option<std::sync::Arc<redis::RedisError>>,
}

impl RedisFailure {
    fn new(err: redis::RedisError) -> Self {
        let kind = if err.is_timeout() {
            RedisErrorKind::Timeout
        } else if err.is_connection_refusal() {
            RedisErrorKind::ConnectionRefused
        } else if err.is_connection_dropped() {
            RedisErrorKind::ConnectionDropped
        } else if is_not_now(&err) {
            RedisErrorKind::NotNow
        } else if err.is_io_error() {
            RedisErrorKind::Io
        } else {
            match err.code() {
                Some("WRONGPASS" | "NOAUTH") => RedisErrorKind::Auth,
                Some("NOPERM") => RedisErrorKind::NoPermission,
                Some(_) => RedisErrorKind::Server,
                None if matches!(err.kind(), redis::ErrorKind::AuthenticationFailed) => {
                    RedisErrorKind::Auth
                }
                None => RedisErrorKind::Client,
            }
        };
        RedisFailure {
            kind,
            code: err.code().map(str::to_owned),
            message: err.to_string(),
            source: Some(std::sync::Arc::new(err)),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> RedisErrorKind {
        self.kind
    }

    /// The server's error code (`NOPERM`, `WRONGPASS`, `LOADING`, ...), when the
    /// server answered with an error.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The failure in words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RedisFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
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
            Error::Redis(RedisFailure {
                source: Some(e), ..
            }) => Some(&**e),
            _ => None,
        }
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
    fn a_connect_timeout_is_a_timeout_and_the_driver_error_is_the_source() {
        assert!(Error::connect_timeout("redis://x").is_timeout());
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no");
        let err = Error::redis(refused.into());
        assert!(err.is_transient() && !err.is_timeout());
        assert!(std::error::Error::source(&err).is_some());
        let Error::Redis(failure) = err else {
            unreachable!()
        };
        assert_eq!(failure.kind(), RedisErrorKind::ConnectionRefused);
    }

    #[test]
    fn io_errors_are_transient_and_not_held_is_not() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(Error::redis(io.into()).is_transient());
        let not_held = Error::NotHeld {
            name: "n".into(),
            owner: "o".into(),
        };
        assert!(!not_held.is_transient());
        assert!(not_held.is_not_held());
    }
}
