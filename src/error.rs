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
    /// Waiting could only end by the waiter's own doing, so it was refused.
    ///
    /// Two cases. The owner asked to wait, without a time limit, for the write
    /// lock of a read-write lock while holding its read lock: upgrading is not
    /// supported (as in Redisson), so that wait could only end when its own read
    /// hold expired. Or, with [`Config::self_wait`](crate::Config::self_wait) set
    /// to [`SelfWait::Refuse`](crate::SelfWait::Refuse), the waiter's own task (or
    /// thread) holds the lock, outside that hold's scope, in a mode that
    /// conflicts with the wait (a nested `lock()` or a downgrade ported literally
    /// from Java): only a sibling future's release could let it in. `reason`
    /// names the hold and the fix.
    WouldDeadlock {
        /// The lock name.
        name: String,
        /// What the wait would be behind, and how to fix the code.
        reason: String,
    },
    /// The wait was on a deadlock across processes and was the one to give up
    /// ([`Config::deadlock`](crate::Config::deadlock) `= OnDeadlock::Refuse`):
    /// its lock is held by a task that waits, through a cycle of waits, for a
    /// lock this wait's task holds. `cycle` names each wait on it. The refused
    /// wait ends as a dropped one does (a fair queue entry, or a grant that
    /// arrived meanwhile, is given back by the client); the others on the
    /// cycle go on once this task releases what it holds.
    Deadlock {
        /// The lock the refused wait waited for.
        name: String,
        /// The cycle, each waiter with its process, task, lock and since when.
        cycle: String,
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
    /// The durability asked for ([`Config::durability`](crate::Config::durability),
    /// [`Config::replica_sync`](crate::Config::replica_sync)) cannot be had from
    /// the server the client reaches now: found after connecting (a failover to
    /// a server without `WAITAOF` or without an append-only file, an ACL
    /// changed, `appendonly` turned off). The acquire it happened to was
    /// released again; nothing is held. The client asks the server again on
    /// its next acquires (at most once a second), so this ends when the
    /// server is fixed. A mode the server cannot give at connect time is an
    /// [`Error::Config`] instead.
    DurabilityUnavailable {
        /// The lock name; empty for a release's or renewals' sync.
        name: String,
        /// The mode asked for.
        durability: crate::Durability,
        /// Why the server cannot give it, and how to fix that.
        reason: String,
    },
    /// Redis could not be reached, the connection broke, a command timed out, or the
    /// server refused the command (authentication, ACL, ...). The details are
    /// this crate's own ([`RedisFailure`]), so matching on them does not tie you to
    /// the `redis` crate's version; the driver's error is the
    /// [`source`](std::error::Error::source).
    Redis(RedisFailure),
    /// The hold, leadership or renewed permit that bounded a piece of work
    /// was no longer surely valid (its lease lost, forced open, or past its
    /// term), so the work was dropped before it finished (`LockGuard::run`,
    /// `Leadership::run`, `Permit::run`).
    LeaseLost {
        /// The lock's name (the election's, or the semaphore's for a permit).
        name: String,
    },
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
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("report")?;
    /// let guard = lock.lock_with_lease(Duration::from_secs(10)).await?;
    /// // ... work that may outlast the ten seconds ...
    /// match guard.unlock().await {
    ///     Ok(()) => {}
    ///     // The lease ran out first: another owner may have been inside meanwhile.
    ///     Err(e) if e.is_not_held() => eprintln!("report: the lease expired before the unlock"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// Was an argument rejected before any I/O?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// assert!(client.get_lock("").unwrap_err().is_invalid_argument());
    ///
    /// let lock = client.get_lock("report")?;
    /// let lease = Duration::ZERO; // say, a setting left unset
    /// match lock.lock_with_lease(lease).await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     // Refused before anything was sent: a bug to fix, not a failure to retry.
    ///     Err(e) if e.is_invalid_argument() => eprintln!("report: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    /// Is the configuration at fault?
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::{Client, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), redisson_locks::Error> {
    /// assert!(Config::from_url("127.0.0.1:6379").unwrap_err().is_config()); // no scheme
    ///
    /// let mut config = Config::from_url("redis://127.0.0.1:6379")?;
    /// config.timeout = Duration::ZERO;
    /// // Refused before connecting: fix the settings rather than retry.
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(err.is_config());
    /// # Ok(()) }
    /// ```
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Config(_))
    }

    /// Does the lock key hold a value of another Redis type?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("session:9")?;
    /// match lock.try_lock().await {
    ///     Ok(Some(guard)) => guard.unlock().await?,
    ///     Ok(None) => { /* another owner holds it */ }
    ///     // Something else (a string, a list) lives under that name: a naming clash
    ///     // that no retry will fix.
    ///     Err(e) if e.is_wrong_type() => eprintln!("session:9 is not a lock: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_wrong_type(&self) -> bool {
        matches!(self, Error::WrongType { .. })
    }

    /// Was a write lock refused because the owner holds the read lock?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let rw = client.get_read_write_lock("catalog")?;
    /// let reading = rw.read_lock().lock().await?;
    /// // Inside the read hold's scope the writer would wait for its own read hold.
    /// match reading.scope(rw.write_lock().lock()).await {
    ///     Ok(writing) => writing.unlock().await?,
    ///     Err(e) if e.is_would_deadlock() => { /* release the read lock first, then write */ }
    ///     Err(e) => return Err(e),
    /// }
    /// reading.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_would_deadlock(&self) -> bool {
        matches!(self, Error::WouldDeadlock { .. })
    }

    /// Was this wait refused as the one to break a deadlock across processes
    /// ([`Error::Deadlock`])?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("stock:7")?;
    /// match lock.lock().await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     // Release what this task holds, then start its work again.
    ///     Err(e) if e.is_deadlock() => eprintln!("{e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock { .. })
    }

    /// Did the owner ask again for a non-reentrant lock it holds?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// // Ported from Java, where the thread is the owner: here, the task.
    /// let lock = client.get_non_reentrant_lock("once")?.with_task_owner();
    /// let first = lock.lock().await?;
    /// match lock.lock().await {
    ///     Ok(second) => second.unlock().await?,
    ///     // Refused at once: this task would be waiting for itself.
    ///     Err(e) if e.is_already_held() => {}
    ///     Err(e) => return Err(e),
    /// }
    /// first.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_already_held(&self) -> bool {
        matches!(self, Error::AlreadyHeld { .. })
    }

    /// Was an acquire released again because no replica acknowledged it?
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let mut config = Config::from_url("redis://127.0.0.1:6379")?;
    /// config.replica_sync = Some(1);
    /// let client = Client::connect(config).await?;
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.try_lock_wait(Duration::from_secs(5)).await {
    ///     Ok(Some(guard)) => guard.unlock().await?,
    ///     Ok(None) => { /* another owner held it all along */ }
    ///     // The primary granted it but no replica confirmed in time, so it was
    ///     // released: a failover could have lost it. Nothing is held now.
    ///     Err(e) if e.is_not_replicated() => eprintln!("orders:42: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_not_replicated(&self) -> bool {
        matches!(self, Error::NotReplicated { .. })
    }

    /// Was an acquire released again because the server cannot give the
    /// durability asked for any more (see [`Error::DurabilityUnavailable`])?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// match client.get_lock("orders:42")?.lock().await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     // A failover to a server without an append-only file, say:
    ///     // nothing is held, and the message says what to fix.
    ///     Err(e) if e.is_durability_unavailable() => eprintln!("{e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_durability_unavailable(&self) -> bool {
        matches!(self, Error::DurabilityUnavailable { .. })
    }

    /// Is this an error from Redis or the connection to it?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("nightly-cleanup")?;
    /// match lock.try_lock().await {
    ///     Ok(Some(guard)) => guard.unlock().await?,
    ///     Ok(None) => { /* another instance is at it */ }
    ///     // Redis, or the way to it, failed: whether the lock is free is unknown.
    ///     Err(e) if e.is_redis() => eprintln!("skipping the cleanup this round: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_redis(&self) -> bool {
        matches!(self, Error::Redis(_))
    }

    /// Did Redis answer with an unexpected reply?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.is_locked().await {
    ///     Ok(locked) => eprintln!("orders:42 locked: {locked}"),
    ///     // The server answered outside the protocol (a proxy, a Redis look-alike):
    ///     // retrying will not help, report it.
    ///     Err(e) if e.is_unexpected_reply() => eprintln!("incompatible server: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_unexpected_reply(&self) -> bool {
        matches!(self, Error::UnexpectedReply { .. })
    }

    /// Was work dropped because the hold that bounded it was lost?
    ///
    /// ```no_run
    /// # async fn demo(guard: redisson_locks::LockGuard) -> Result<(), redisson_locks::Error> {
    /// match guard.run(async { /* the critical section */ }).await {
    ///     Ok(()) => {}
    ///     // Stopped the moment the hold was no longer surely valid.
    ///     Err(e) if e.is_lease_lost() => eprintln!("abandoned: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }

    /// Did a command, or connecting, run out of time (`timeout`,
    /// `connect_timeout`)? Its outcome on the server is unknown.
    ///
    /// ```no_run
    /// use redisson_locks::{Client, Config};
    ///
    /// # async fn demo() -> Result<(), redisson_locks::Error> {
    /// let config = Config::from_url("redis://10.0.0.5:6379")?;
    /// match Client::connect(config).await {
    ///     Ok(_client) => { /* ... */ }
    ///     // No answer within `connect_timeout`: unreachable, or the network is slow.
    ///     Err(e) if e.is_timeout() => eprintln!("redis did not answer in time: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Redis(f) if f.kind == RedisErrorKind::Timeout)
    }

    /// Is this a transport failure (refused, dropped, timed out) or a server's
    /// "not now" that a later attempt may get past, as opposed to a refusal that
    /// will repeat (auth, ACL, bad input)?
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), redisson_locks::Error> {
    /// use std::time::Duration;
    ///
    /// let lock = client.get_lock("orders:42")?;
    /// // `lock()` already rides out `retry_attempts` failures; give it a few more
    /// // rounds, for a failover say, but never for a refusal that will repeat.
    /// let mut rounds = 0;
    /// let guard = loop {
    ///     match lock.lock().await {
    ///         Ok(guard) => break guard,
    ///         Err(e) if e.is_transient() && rounds < 3 => {
    ///             rounds += 1;
    ///             tokio::time::sleep(Duration::from_secs(2)).await;
    ///         }
    ///         Err(e) => return Err(e),
    ///     }
    /// };
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
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
    ///
    /// ```no_run
    /// use redisson_locks::{Error, RedisErrorKind};
    ///
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.lock().await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     Err(Error::Redis(failure)) => match failure.kind() {
    ///         RedisErrorKind::Auth | RedisErrorKind::NoPermission => {
    ///             eprintln!("fix the credentials or the ACL: {failure}")
    ///         }
    ///         RedisErrorKind::Timeout => eprintln!("no answer in time: {failure}"),
    ///         _ => eprintln!("redis failed: {failure}"),
    ///     },
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> RedisErrorKind {
        self.kind
    }

    /// The server's error code (`NOPERM`, `WRONGPASS`, `LOADING`, ...), when the
    /// server answered with an error.
    ///
    /// ```no_run
    /// use redisson_locks::Error;
    ///
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.lock().await {
    ///     Ok(guard) => guard.unlock().await?,
    ///     Err(Error::Redis(failure)) => match failure.code() {
    ///         // Full, with `maxmemory-policy noeviction`: writes fail until it frees memory.
    ///         Some("OOM") => eprintln!("redis is out of memory: {failure}"),
    ///         Some(code) => eprintln!("redis refused with {code}: {failure}"),
    ///         None => eprintln!("no answer from redis: {failure}"), // a transport failure
    ///     },
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The failure in words.
    ///
    /// ```no_run
    /// use redisson_locks::Error;
    ///
    /// # async fn demo(client: redisson_locks::Client) -> Result<(), Error> {
    /// let lock = client.get_lock("orders:42")?;
    /// match lock.force_unlock().await {
    ///     Ok(was_locked) => eprintln!("orders:42 forced open (was locked: {was_locked})"),
    ///     // For a log line with its own fields: the words without the "redis
    ///     // error: " that `Error`'s `Display` puts before them.
    ///     Err(Error::Redis(failure)) => {
    ///         eprintln!("force_unlock failed: kind={:?} {}", failure.kind(), failure.message())
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
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
    ) || is_not_now_inside_a_script(err)
}

/// Redis before 7.0 reports a refusal met by a command inside a script as a
/// plain `ERR Error running script ...: -READONLY You can't write ...`: the
/// same "not now" (a replica, or a primary demoted by a failover), wrapped.
fn is_not_now_inside_a_script(err: &redis::RedisError) -> bool {
    if err.code() != Some("ERR") {
        return false;
    }
    let text = err.to_string();
    text.contains("Error running script")
        && [
            "-READONLY ",
            "-LOADING ",
            "-MASTERDOWN ",
            "-TRYAGAIN ",
            "-CLUSTERDOWN ",
        ]
        .iter()
        .any(|code| text.contains(code))
}

/// The owner id a default handle acts for outside any hold's scope: it holds
/// nothing, so a release refused to it is named as such (see
/// `engine/owner.rs`, which never hands it to an acquisition).
pub(crate) const NOBODY_OWNER_ID: u64 = (1 << 61) - 1;

/// Is `field` (`<client-uuid>:<id>`) the owner a default handle acts for
/// outside any scope, which holds nothing? Then a release it was refused
/// (`Error::NotHeld`) is most likely Java's `lock(); ... unlock();` ported into
/// the default owner mode.
pub(crate) fn is_nobody(field: &str) -> bool {
    field
        .split(':')
        .nth(1)
        .is_some_and(|id| crate::numeral::decimal::<u64>(id) == Some(NOBODY_OWNER_ID))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHeld { name, owner } => {
                write!(f, "lock '{name}' is not held by owner {owner}")?;
                if is_nobody(owner) {
                    f.write_str(
                        " (a default handle outside any hold's scope owns nothing: release \
                         through the guard, `guard.unlock()`, or inside its scope; for Java's \
                         lock() ... unlock() pairs make the task the owner, `with_task_owner()` \
                         or `Config::owner_mode = OwnerMode::Task`)",
                    )?;
                }
                Ok(())
            }
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Config(msg) => write!(f, "invalid configuration: {msg}"),
            Error::WrongType { name } => write!(
                f,
                "key '{name}' holds a value of another type than this lock kind uses"
            ),
            Error::WouldDeadlock { name, reason } => {
                write!(f, "waiting for lock '{name}' would deadlock: {reason}")
            }
            Error::Deadlock { name, cycle } => {
                write!(
                    f,
                    "deadlock detected: the wait for lock '{name}' gave up to break it; {cycle}"
                )
            }
            Error::AlreadyHeld { name, owner } => write!(
                f,
                "lock '{name}' is not reentrant and owner {owner} already holds it"
            ),
            Error::NotReplicated { name, replicas } => write!(
                f,
                "lock '{name}' was acquired but not confirmed in time by {replicas} \
                 replica(s) (nor, under Durability::Aof, by the primary's append-only file); \
                 it was released"
            ),
            Error::DurabilityUnavailable {
                name,
                durability,
                reason,
            } => write!(
                f,
                "lock '{name}' was acquired but durability {durability} cannot be had from the \
                 server now, so it was released: {reason}"
            ),
            Error::Redis(e) => write!(f, "redis error: {e}"),
            Error::LeaseLost { name } => write!(
                f,
                "the hold of '{name}' was lost (its lease ran out, it was forced open, or its \
                 term ended): the work it bounded was stopped"
            ),
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
