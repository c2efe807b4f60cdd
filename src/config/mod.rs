//! Client configuration: from code, from a URL, from Redisson's YAML or JSON
//! file, or (feature `serde`) from a service's own config.

use std::time::Duration;

use crate::error::{Error, Result};

mod address;
mod durability;
mod env;
mod human;
mod redisson_file;

pub use address::redact_address;
use address::{address_database, database_conflict, parse_address};
pub use durability::Durability;

/// The library name a client of this crate announces (and sends with
/// `CLIENT SETINFO LIB-NAME` where the server knows it).
pub(crate) const LIBRARY: &str = "redisson-locks";

/// The longest lease or wait accepted: ten years.
///
/// Leases and waits travel to Redis as milliseconds and are added to clock readings
/// there (in Lua's doubles for the fair lock); anything longer is a bug or a
/// sentinel such as `Duration::MAX`, and is refused with
/// [`Error::InvalidArgument`] rather than overflowing on the server.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The most [`Config::retry_attempts`] accepted. Each attempt waits up to
/// `retry_interval`, so this already covers hours of outage; more is a mistake
/// (a sentinel value such as `u32::MAX`), and it would keep a re-dialling
/// connection and a failing waiter busy for ever.
pub const MAX_RETRY_ATTEMPTS: u32 = 1_000;

/// The most holds one renewal script may renew
/// ([`Config::lock_watchdog_batch_size`]).
const MAX_WATCHDOG_BATCH: usize = 10_000;

/// How to reach Redis and how the locks behave.
///
/// Field defaults are Redisson's. Build one with [`Config::new`],
/// [`Config::from_url`], [`Config::cluster`] or [`Config::sentinel`], from
/// Redisson's config file (`Config::from_yaml` with the `yaml` feature,
/// [`Config::from_json`]) or, with the `serde` feature, as part of a service's
/// own config file.
///
/// The settings most services need are chainable: [`with_password`](Config::with_password),
/// [`with_username`](Config::with_username), [`with_database`](Config::with_database),
/// [`with_timeout`](Config::with_timeout),
/// [`with_lock_watchdog_timeout`](Config::with_lock_watchdog_timeout) and
/// [`with_client_name`](Config::with_client_name). The rest are expert
/// settings, public fields to assign (the struct is `#[non_exhaustive]`, so it
/// cannot be written as a literal: start from a constructor):
///
/// - connection: `connect_timeout`, `retry_attempts`, `retry_interval`, `tls`;
/// - topology: `cluster_nodes`, `sharded_pubsub`, `sentinel_addresses`,
///   `sentinel_master_name`, `replica_sync`, `replica_sync_timeout`,
///   `durability`;
/// - leases and waits: `fair_lock_wait_timeout`, `recheck_interval`,
///   `clock_drift_factor`, `max_hold`, `lock_watchdog_batch_size`;
/// - owners and deadlocks: `owner_mode`, `self_wait`, `self_wait_warning`,
///   `deadlock`, `deadlock_threshold`;
/// - observability: `announce`, `metrics_lock_names`.
///
/// ```
/// use std::time::Duration;
/// use redisson_locks::Config;
///
/// let mut config = Config::from_url("redis://:secret@127.0.0.1:6380/2")?;
/// config.lock_watchdog_timeout = Duration::from_secs(10);
/// assert_eq!(config.database, 2);
/// assert_eq!(config.password.as_deref(), Some("secret"));
/// # Ok::<(), redisson_locks::Error>(())
/// ```
///
/// # In a service's own config (feature `serde`)
///
/// With the `serde` feature, `Config` and [`TlsConfig`] implement
/// `serde::Deserialize` under their Rust field names (`lock_watchdog_timeout`,
/// `tls.ca_certificate`), for any serde format. Missing fields keep their defaults;
/// unknown fields are refused, since the file is the service's own and a typo
/// should not pass silently. A duration is an integer of milliseconds (`1500`) or a
/// string of a number and a unit, `ms`, `s`, `m` or `h` (`"1500ms"`, `"30s"`,
/// `"1.5s"`, `"5m"`). Without a `database` field, the address's `/N` (if any) is the
/// database; with both, they must agree (see [`database`](Config::database)).
/// Otherwise deserializing does not validate: call [`validate`](Config::validate)
/// to report a bad value early, as [`Client::connect`](crate::Client::connect)
/// does in any case.
///
/// # Secrets
///
/// No error about a configuration repeats a password: addresses appear with the
/// password of their user info masked (`redis://app:***@host:6379`), a value of
/// the wrong type is named by its kind (`invalid type: an integer, expected a
/// string`), and in Redisson's files a value substituted from the environment
/// (`${REDIS_PASSWORD}`) shows as `***` wherever an error would have quoted it.
/// `Debug` prints `password: Some("***")` and masks the addresses the same way.
/// (A format that quotes the offending line of its own, such as TOML's, is
/// outside this crate's reach.)
#[cfg_attr(
    feature = "serde",
    doc = r##"
```
use std::time::Duration;
use redisson_locks::Config;

#[derive(serde::Deserialize)]
struct ServiceConfig {
    name: String,
    redis: Config,
}

let service: ServiceConfig = serde_json::from_str(r#"{
    "name": "billing",
    "redis": {
        "address": "redis://10.0.0.5:6379",
        "timeout": "1500ms",
        "lock_watchdog_timeout": "10s",
        "tls": { "ca_certificate": "/etc/redis/ca.pem" }
    }
}"#)?;
service.redis.validate()?;
assert_eq!(service.redis.timeout, Duration::from_millis(1500));
assert_eq!(service.redis.retry_attempts, 3); // the default
# Ok::<(), Box<dyn std::error::Error>>(())
```
"##
)]
// `Debug` is written out below: it must not print the password. `Deserialize`
// (feature `serde`) is in `human.rs`: it must know whether `database` was given.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Server address, `redis://host:port`, or `rediss://host:port` for TLS (with
    /// the `tls` feature; without it a `rediss://` address is refused with
    /// [`Error::Config`]). Default `redis://127.0.0.1:6379`.
    pub address: String,
    /// ACL user name. Default none (the `default` user).
    pub username: Option<String>,
    /// Password. Default none.
    pub password: Option<String>,
    /// Database number. Default 0, or the address's: [`Config::new`] and
    /// [`Config::from_url`] read it from the address's path (`redis://host:6379/3`
    /// is database 3).
    ///
    /// The address and this field must agree: an address whose `/N` differs
    /// from `database` is refused with [`Error::Config`] naming both numbers,
    /// however the `Config` was built ([`validate`](Config::validate) checks, and
    /// [`Client::connect`](crate::Client::connect) calls it). Where a source can
    /// leave `database` out (serde, feature `serde`), the address's number stands
    /// in for it.
    ///
    /// **Java Redisson ignores an address's path:** its `RedisURI` reads the
    /// scheme, user info, host and port only, and the database is
    /// `setDatabase(n)` (the file's `database` key), 0 when not set. So in
    /// Redisson's own files ([`Config::from_json`], `Config::from_yaml`) the
    /// database is the `database` key, as in Java, and an address naming another
    /// number (`redis://host:6379/3` without `database: 3`) is refused instead of
    /// read differently from the Java services sharing the file. A Java twin of a
    /// service configured with `redis://host:6379/3` here needs `setDatabase(3)`.
    ///
    /// Sentinel addresses name the sentinels, which have no databases: a `/N` on
    /// one must equal this field. With [`cluster_nodes`](Config::cluster_nodes),
    /// a number other than 0 needs a cluster that has numbered databases (Valkey
    /// 9 or newer, with `cluster-databases` above it; Redisson 4's
    /// `clusterServersConfig.database`): [`Client::connect`](crate::Client::connect)
    /// checks that every primary serves it and otherwise fails with
    /// [`Error::Config`] naming the server and its version (Redis refuses
    /// `SELECT` in cluster mode). A node's `/N` must equal this field. Pub/sub
    /// channels are not per database: a lock of the same name in two databases
    /// wakes the other's waiters too (they find it held, and sleep on).
    pub database: i64,
    /// How long one connection attempt may take (Redisson `connectTimeout`).
    /// Default 10 s. [`Client::connect`](crate::Client::connect) fails after this long
    /// when the server cannot be reached.
    pub connect_timeout: Duration,
    /// How long a command may wait for its reply (Redisson `timeout`). Default 3 s.
    pub timeout: Duration,
    /// How many times a broken connection is re-dialled before a command fails, and
    /// how many transient failures in a row a waiting lock call rides out
    /// (Redisson `retryAttempts`). Default 3; at most [`MAX_RETRY_ATTEMPTS`].
    pub retry_attempts: u32,
    /// The longest pause between two re-dials or retries (Redisson `retryInterval`).
    /// Default 1.5 s. Each retry of a waiting call or a settle pauses for a time
    /// drawn at random up to this (full jitter), so waiters that failed together
    /// do not retry together.
    pub retry_interval: Duration,
    /// The lease of a lock taken without an explicit lease; the watchdog renews it
    /// every third of this while it is held (Redisson `lockWatchdogTimeout`).
    /// Default 30 s.
    pub lock_watchdog_timeout: Duration,
    /// How many holds one renewal script renews (Redisson
    /// `lockWatchdogBatchSize`): the watchdog renews every hold of a kind in
    /// calls of this many, so that no call keeps the server busy long. Default
    /// 100; between 1 and 10,000.
    pub lock_watchdog_batch_size: usize,
    /// How long a fair-lock waiter may stay silent before the queue skips it
    /// (Redisson `fairLockWaitTimeout`). Default 300 s.
    pub fair_lock_wait_timeout: Duration,
    /// The longest a waiter sleeps between two looks at what it waits for,
    /// whatever the lock's lease says. A waiter sleeps on the unlock message,
    /// which wakes it within moments of a release; this bounds what a freeing
    /// that no message announces costs (an operator's `DEL`, a message lost
    /// with a connection or a server's push), where a sleep bounded by the
    /// lease alone would last the lease (30 s by default). Default 1 s: one
    /// command a second per lock and client while a wait lasts that long
    /// (only the first of a client's waiters for a lock looks; the others are
    /// parked). Between 1 ms and [`MAX_DURATION`](crate::MAX_DURATION).
    pub recheck_interval: Duration,
    /// Redis Cluster seed nodes, `redis://host:port` each (Redisson
    /// `clusterServersConfig.nodeAddresses`). Empty (the default): a single server
    /// at [`address`](Config::address). Set: cluster mode, `address` is ignored.
    pub cluster_nodes: Vec<String>,
    /// Whether unlock messages use sharded pub/sub (SPUBLISH/SSUBSCRIBE), in
    /// cluster mode; read only there (a single server and Sentinel always use
    /// plain pub/sub, as Redisson does). `None` (the default) decides as Redisson
    /// does: sharded on Redis 7 or newer. Sharded and plain messages do not reach
    /// each other, so every client of a lock, Java ones included, must agree.
    /// `Some(true)` on a cluster older than 7.0 (no sharded pub/sub) is refused
    /// at connect with [`Error::Config`].
    pub sharded_pubsub: Option<bool>,
    /// Sentinel addresses, `redis://host:port` each (Redisson
    /// `sentinelServersConfig.sentinelAddresses`). Empty (the default): no
    /// Sentinel. Set: the client asks them for the primary of
    /// [`sentinel_master_name`](Config::sentinel_master_name) and follows failovers;
    /// `address` is ignored.
    pub sentinel_addresses: Vec<String>,
    /// The monitored primary's name (Redisson `masterName`); required with
    /// `sentinel_addresses`.
    pub sentinel_master_name: Option<String>,
    /// How many replicas must acknowledge each acquire (Redis `WAIT`, or
    /// `WAITAOF` under [`durability`](Config::durability)), as Redisson's
    /// replica sync does (Redisson `checkLockSyncedSlaves`). `None` (the
    /// default): one when the server had replicas connected at connect time,
    /// none when it had none (or could not be asked: see
    /// [`Client::warnings`](crate::Client::warnings)). `Some(0)` turns it off
    /// (under [`Durability::Aof`], the primary's own fsync is still waited
    /// for). On every topology: in a cluster, each acquire's `WAIT` goes to the
    /// primary that took it.
    ///
    /// With it, an acquire no replica acknowledged is released again and reported
    /// as [`Error::NotReplicated`]: a hold that only the primary knows would be lost
    /// in a failover and let a second owner in. It narrows that window; it does not
    /// close it (WAIT is not a consensus: a replica that acknowledged can still lose
    /// the write, and a failover can promote one that did not acknowledge).
    pub replica_sync: Option<u32>,
    /// How long to wait for replicas to acknowledge (Redisson `slavesSyncTimeout`).
    /// Default 1 s, and at most a third of [`timeout`](Config::timeout) (a WAIT
    /// must answer before the client gives up on it, and one may queue behind
    /// another on the connection the WAITs go on). An acquire with a wait limit
    /// may overrun it by this much.
    pub replica_sync_timeout: Duration,
    /// What replica sync waits for: replicas' memory (`WAIT`, the default), or
    /// append-only files (`WAITAOF`); see [`Durability`] for the modes, what
    /// each survives and how servers are checked for them.
    pub durability: Durability,
    /// How much of every lease a holder keeps in reserve for the difference
    /// between its clock rate and the server's: a hold counts as surely valid for
    /// `lease - (lease * clock_drift_factor + 2 ms)` from the instant its acquire
    /// or last confirmed renewal was sent (see
    /// [`LockGuard::valid_for`](crate::LockGuard::valid_for)). Default 0.01, Redlock's
    /// figure: ordinary clocks drift by parts per million, so 1 % covers them and a
    /// server's slow clock adjustment (NTP slewing is at most 0.05 %) with room to
    /// spare; the 2 ms cover timer granularity. Between 0 and 0.5.
    pub clock_drift_factor: f64,
    /// A term limit for every hold this client takes (a handle's
    /// [`RLock::with_max_hold`](crate::RLock::with_max_hold) overrides it):
    /// once a hold has lasted this long, counted from the instant its acquire
    /// was sent, the watchdog stops renewing it and its guard reports the lease
    /// lost, so a holder stuck in its critical section (a hung call, a loop)
    /// cannot keep the lock for ever. The key then ends with its lease, at most
    /// one lease later. A hold's validity is the sooner of its lease's and its
    /// term's end. Default `None`: no limit, as in Redisson. Between 1 ms and
    /// [`MAX_DURATION`](crate::MAX_DURATION).
    pub max_hold: Option<Duration>,
    /// Certificates for `rediss://` addresses (feature `tls`): the servers' own
    /// and, for mutual TLS, the client's. Used for the single server, every
    /// cluster node and Sentinel's servers. Default: the system's trust store,
    /// no client certificate.
    pub tls: TlsConfig,
    /// Who owns what a lock handle of this client takes. [`OwnerMode::Scoped`]
    /// (the default): each acquisition is its own owner outside a hold's scope, so
    /// sibling futures of one task take turns. [`OwnerMode::Task`]: Java's rule,
    /// one owner per task (per thread for the blocking API), for every lock,
    /// read-write lock and synchronizer handle of the client, as
    /// [`RLock::with_task_owner`](crate::RLock::with_task_owner) does for one
    /// handle: code ported line by line from Java nests and downgrades as it does
    /// there. Its hazard: sibling futures of one task (`join!`, `select!`,
    /// `buffer_unordered`) share every hold, so two of them are inside one
    /// critical section at once. See `PORTING.md`.
    pub owner_mode: OwnerMode,
    /// What a *self-wait* does: a wait for a lock that the waiter's own task (or
    /// thread) holds, outside that hold's scope, in a mode that conflicts with
    /// the wait, so that only a sibling future's release can let it in (Java's
    /// nested `lock()`, or a downgrade, ported literally). [`SelfWait::Warn`]
    /// (the default): a warning once the self-wait has lasted
    /// [`self_wait_warning`](Config::self_wait_warning), naming the lock, the hold
    /// and the fix. [`SelfWait::Refuse`]: an immediate [`Error::WouldDeadlock`]
    /// instead of waiting, for ported code and for tests.
    pub self_wait: SelfWait,
    /// How long a self-wait lasts before its warning (see
    /// [`self_wait`](Config::self_wait)). Default 1 s: sibling futures that take
    /// turns rarely hold that long, a forgotten nested hold always does.
    pub self_wait_warning: Duration,
    /// What a wait on a deadlock across processes does (a cycle of waits:
    /// each waiter waits for a lock the next one's task holds; see
    /// `DESIGN.md`, "Deadlocks named across processes").
    /// [`OnDeadlock::Warn`] (the default): one warning naming the cycle, and
    /// [`Client::deadlocks`](crate::Client::deadlocks) lists it.
    /// [`OnDeadlock::Refuse`]: the cycle's youngest wait gives up with
    /// [`Error::Deadlock`](crate::Error::Deadlock) (every client on the cycle
    /// agrees which one). [`OnDeadlock::Ignore`]: no record, no walk.
    pub deadlock: OnDeadlock,
    /// How long a wait lasts before it writes what it waits for and looks for
    /// a cycle (again every this long while it waits). Default 1 s, as
    /// PostgreSQL's `deadlock_timeout`: shorter waits send nothing more.
    pub deadlock_threshold: Duration,
    /// A name for this client that the inspector shows beside its id (for
    /// example the service's name), as Redisson's `clientName` names a
    /// connection. Default `None`: the host and process id alone.
    pub client_name: Option<String>,
    /// Whether the client says who it is on the server: a small key,
    /// `redisson_locks_client:{<id>}`, holding its host, process id, crate
    /// version and [`client_name`](Config::client_name), kept fresh while the
    /// client lives (its TTL is one `lock_watchdog_timeout`) and deleted by
    /// [`Client::close`](crate::Client::close), so that
    /// [`Client::inspect`](crate::Client::inspect) can name the process behind an
    /// owner. Default `true`. See `DESIGN.md`, "Owners you can name".
    pub announce: bool,
    /// With the `metrics` feature, whether the lock name is a label of the
    /// metrics (one series per name: mind the cardinality). Default `false`:
    /// the kind is the only label.
    pub metrics_lock_names: bool,
}

/// Who owns an acquisition: see [`Config::owner_mode`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum OwnerMode {
    /// Each acquisition is its own owner; code run inside a hold's scope
    /// ([`LockGuard::scope`](crate::LockGuard::scope),
    /// [`RLock::with`](crate::RLock::with)) re-enters as that hold's owner.
    #[default]
    Scoped,
    /// Java's rule: the task (or thread) that calls is the owner, so a nested
    /// `lock()` in the same task re-enters and sibling futures share holds.
    Task,
}

/// What a self-wait does: see [`Config::self_wait`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum SelfWait {
    /// Wait as asked, with one warning after
    /// [`Config::self_wait_warning`].
    #[default]
    Warn,
    /// Refuse at once with [`Error::WouldDeadlock`].
    Refuse,
}

/// What a wait on a deadlock across processes does: see [`Config::deadlock`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum OnDeadlock {
    /// Wait as asked, with one warning naming the cycle.
    #[default]
    Warn,
    /// The cycle's youngest wait gives up with
    /// [`Error::Deadlock`](crate::Error::Deadlock).
    Refuse,
    /// Write no record and look for no cycle.
    Ignore,
}

/// Certificates for TLS connections (`rediss://`), as PEM files: the Rust
/// counterpart of Redisson's `sslTruststore` (whom to trust) and `sslKeystore`
/// (who we are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct TlsConfig {
    /// The certificate authorities to trust instead of the system's trust store
    /// (Redisson `sslTruststore`): a PEM file of one or more certificates.
    pub ca_certificate: Option<std::path::PathBuf>,
    /// The client's certificate chain for mutual TLS (Redisson `sslKeystore`): a
    /// PEM file. Requires [`client_key`](TlsConfig::client_key).
    pub client_certificate: Option<std::path::PathBuf>,
    /// The client certificate's private key, a PEM file (it may be the same file
    /// as the certificate).
    pub client_key: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            address: "redis://127.0.0.1:6379".to_owned(),
            username: None,
            password: None,
            database: 0,
            connect_timeout: Duration::from_millis(10_000),
            timeout: Duration::from_millis(3_000),
            retry_attempts: 3,
            retry_interval: Duration::from_millis(1_500),
            lock_watchdog_timeout: Duration::from_millis(30_000),
            lock_watchdog_batch_size: 100,
            fair_lock_wait_timeout: Duration::from_millis(300_000),
            recheck_interval: Duration::from_millis(1_000),
            tls: TlsConfig::default(),
            cluster_nodes: Vec::new(),
            sharded_pubsub: None,
            sentinel_addresses: Vec::new(),
            sentinel_master_name: None,
            replica_sync: None,
            replica_sync_timeout: Duration::from_millis(1_000),
            durability: Durability::Replicas,
            clock_drift_factor: 0.01,
            max_hold: None,
            owner_mode: OwnerMode::Scoped,
            self_wait: SelfWait::Warn,
            self_wait_warning: Duration::from_millis(1_000),
            deadlock: OnDeadlock::Warn,
            deadlock_threshold: Duration::from_millis(1_000),
            client_name: None,
            announce: true,
            metrics_lock_names: false,
        }
    }
}

impl Config {
    /// A configuration for the server at `address`, every other field at its
    /// default except [`database`](Config::database), which is the address's
    /// `/N` when it names one. The address is checked when the client connects
    /// (or by [`validate`](Config::validate)); one that does not parse leaves
    /// the database at 0.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::Config;
    ///
    /// let mut config = Config::new("redis://10.0.0.5:6379/3");
    /// assert_eq!(config.database, 3);
    /// config.lock_watchdog_timeout = Duration::from_secs(10);
    /// assert_eq!(config.timeout, Duration::from_secs(3)); // Redisson's default
    /// config.validate()?;
    ///
    /// // The address and the field must agree.
    /// config.database = 5;
    /// let err = config.validate().unwrap_err();
    /// assert!(err.to_string().contains("names database 3 but database is 5"));
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn new(address: impl Into<String>) -> Self {
        let address = address.into();
        let database = address_database(&address).unwrap_or(0);
        Config {
            address,
            database,
            ..Config::default()
        }
    }

    /// Parses a `redis://[user[:password]@]host[:port][/db]` URL.
    ///
    /// User, password and database in the URL fill the matching fields.
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// let config = Config::from_url("redis://app:secret@10.0.0.5:6380/1")?;
    /// assert_eq!(config.username.as_deref(), Some("app"));
    /// assert_eq!(config.password.as_deref(), Some("secret"));
    /// assert_eq!(config.database, 1);
    ///
    /// // A bare host:port is refused: the scheme is required.
    /// assert!(Config::from_url("10.0.0.5:6380").unwrap_err().is_config());
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the URL is malformed (the message shows it with
    /// its password masked).
    pub fn from_url(url: &str) -> Result<Self> {
        let info = parse_address("address", url)?;
        let settings = info.redis_settings();
        Ok(Config {
            address: url.to_owned(),
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
            database: settings.db(),
            ..Config::default()
        })
    }

    /// A configuration for a Redis Cluster reached through its seed `nodes`
    /// (`redis://host:port` each; any of the cluster's nodes will do), every
    /// other field at its default.
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// let config = Config::cluster(["redis://10.0.0.5:7000", "redis://10.0.0.6:7000"])
    ///     .with_password("secret");
    /// assert_eq!(config.cluster_nodes.len(), 2);
    /// config.validate()?;
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn cluster<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Config {
            cluster_nodes: nodes.into_iter().map(Into::into).collect(),
            ..Config::default()
        }
    }

    /// A configuration that asks the Sentinels at `addresses` for the primary
    /// they monitor as `master_name`, and follows its failovers.
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// let config = Config::sentinel("mymaster", ["redis://10.0.0.5:26379"]);
    /// assert_eq!(config.sentinel_master_name.as_deref(), Some("mymaster"));
    /// config.validate()?;
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    pub fn sentinel<I, S>(master_name: impl Into<String>, addresses: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Config {
            sentinel_addresses: addresses.into_iter().map(Into::into).collect(),
            sentinel_master_name: Some(master_name.into()),
            ..Config::default()
        }
    }

    /// The password to authenticate with (`AUTH`); see
    /// [`password`](Config::password).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::Config;
    ///
    /// // The settings most services need, chained; the rest are fields.
    /// let config = Config::new("redis://10.0.0.5:6379")
    ///     .with_username("billing")
    ///     .with_password("secret")
    ///     .with_database(2)
    ///     .with_timeout(Duration::from_secs(1))
    ///     .with_lock_watchdog_timeout(Duration::from_secs(10))
    ///     .with_client_name("billing-7");
    /// assert_eq!(config.database, 2);
    /// config.validate()?;
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    #[must_use]
    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The ACL user to authenticate as; see [`username`](Config::username).
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// // `AUTH billing secret`: an ACL user, with its password.
    /// let config = Config::new("redis://10.0.0.5:6379")
    ///     .with_username("billing")
    ///     .with_password("secret");
    /// assert_eq!(config.username.as_deref(), Some("billing"));
    /// // Safe to log: `Debug` shows the user, never the password.
    /// let shown = format!("{config:?}");
    /// assert!(shown.contains("billing") && !shown.contains("secret"));
    /// ```
    #[must_use]
    pub fn with_username(mut self, username: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self
    }

    /// The logical database; see [`database`](Config::database) (an address
    /// naming another `/N` is refused when the client connects).
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// let config = Config::new("redis://10.0.0.5:6379").with_database(4);
    /// assert_eq!(config.database, 4);
    /// config.validate()?;
    ///
    /// // An address naming its own database must name the same one.
    /// let err = Config::new("redis://10.0.0.5:6379/3")
    ///     .with_database(4)
    ///     .validate()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("names database 3 but database is 4"));
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    #[must_use]
    pub fn with_database(mut self, database: i64) -> Self {
        self.database = database;
        self
    }

    /// How long a command may wait for its reply; see
    /// [`timeout`](Config::timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::Config;
    ///
    /// // Fail a command after 500 ms rather than Redisson's 3 s.
    /// let config = Config::new("redis://10.0.0.5:6379").with_timeout(Duration::from_millis(500));
    /// assert_eq!(config.timeout, Duration::from_millis(500));
    /// config.validate()?;
    ///
    /// // No timeout at all is not one of the choices.
    /// let err = config.with_timeout(Duration::ZERO).validate().unwrap_err();
    /// assert!(err.is_config() && err.to_string().contains("timeout"));
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The lease of a hold taken without one, which the watchdog renews; see
    /// [`lock_watchdog_timeout`](Config::lock_watchdog_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::Config;
    ///
    /// // A holder that dies without releasing blocks the others for at most
    /// // 10 s (not 30 s); a live one's hold is renewed every ~3.3 s.
    /// let config = Config::new("redis://10.0.0.5:6379")
    ///     .with_lock_watchdog_timeout(Duration::from_secs(10));
    /// config.validate()?;
    ///
    /// // Renewal runs every third of the lease: under 30 ms is refused.
    /// let err = config
    ///     .with_lock_watchdog_timeout(Duration::from_millis(20))
    ///     .validate()
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("lock_watchdog_timeout"));
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    #[must_use]
    pub fn with_lock_watchdog_timeout(mut self, lease: Duration) -> Self {
        self.lock_watchdog_timeout = lease;
        self
    }

    /// A name for this client (the service's, say) that the inspector shows
    /// beside its id; see [`client_name`](Config::client_name).
    ///
    /// ```
    /// use redisson_locks::Config;
    ///
    /// // Holders of this client show as "billing-7" (beside their host and
    /// // process id) in `Client::inspect` and the `redisson-locks` tool.
    /// let config = Config::new("redis://10.0.0.5:6379").with_client_name("billing-7");
    /// assert_eq!(config.client_name.as_deref(), Some("billing-7"));
    /// config.validate()?;
    ///
    /// // 1 to 256 bytes, without control characters.
    /// assert!(config.with_client_name("billing\n7").validate().unwrap_err().is_config());
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    #[must_use]
    pub fn with_client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Checks every field; [`Client::connect`](crate::Client::connect) calls this.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redisson_locks::Config;
    ///
    /// let mut config = Config::from_url("redis://127.0.0.1:6379")?;
    /// config.validate()?;
    ///
    /// // Check settings read from elsewhere early, before connecting.
    /// config.lock_watchdog_timeout = Duration::from_millis(10);
    /// let err = config.validate().unwrap_err();
    /// assert!(err.is_config());
    /// assert!(err.to_string().contains("lock_watchdog_timeout"));
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] naming the first bad field; an address and
    /// [`database`](Config::database) that disagree name both numbers.
    pub fn validate(&self) -> Result<()> {
        parse_address("address", &self.address)?;
        self.cluster_node_infos()?;
        self.sentinel_infos()?;
        self.check_databases()?;
        if !self.sentinel_addresses.is_empty() && self.sentinel_master_name.is_none() {
            return Err(Error::Config(
                "sentinel_master_name is required with sentinel_addresses".into(),
            ));
        }
        if !self.sentinel_addresses.is_empty() && !self.cluster_nodes.is_empty() {
            return Err(Error::Config(
                "cluster_nodes and sentinel_addresses cannot both be set".into(),
            ));
        }
        if self.retry_attempts > MAX_RETRY_ATTEMPTS {
            return Err(Error::Config(format!(
                "retry_attempts must be at most {MAX_RETRY_ATTEMPTS}, got {}",
                self.retry_attempts
            )));
        }
        if self.database < 0 {
            return Err(Error::Config("database must not be negative".into()));
        }
        for (field, value) in [
            ("connect_timeout", self.connect_timeout),
            ("timeout", self.timeout),
            ("retry_interval", self.retry_interval),
            ("lock_watchdog_timeout", self.lock_watchdog_timeout),
            ("fair_lock_wait_timeout", self.fair_lock_wait_timeout),
            ("recheck_interval", self.recheck_interval),
            ("replica_sync_timeout", self.replica_sync_timeout),
            ("self_wait_warning", self.self_wait_warning),
            ("deadlock_threshold", self.deadlock_threshold),
        ]
        .into_iter()
        .chain(self.max_hold.map(|limit| ("max_hold", limit)))
        {
            if value < Duration::from_millis(1) || value > MAX_DURATION {
                return Err(Error::Config(format!(
                    "{field} must be between 1 ms and {} s, got {value:?}",
                    MAX_DURATION.as_secs()
                )));
            }
        }
        if let Some(name) = &self.client_name {
            if name.is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
                return Err(Error::Config(format!(
                    "client_name must be 1 to 256 bytes without control characters, got {name:?}"
                )));
            }
        }
        if !(0.0..=0.5).contains(&self.clock_drift_factor) {
            return Err(Error::Config(format!(
                "clock_drift_factor must be between 0 and 0.5, got {}",
                self.clock_drift_factor
            )));
        }
        if !(1..=MAX_WATCHDOG_BATCH).contains(&self.lock_watchdog_batch_size) {
            return Err(Error::Config(format!(
                "lock_watchdog_batch_size must be between 1 and {MAX_WATCHDOG_BATCH}, got {}",
                self.lock_watchdog_batch_size
            )));
        }
        if self.replica_sync == Some(0) && self.durability == Durability::ReplicaAof {
            return Err(Error::Config(
                "durability replica_aof with replica_sync 0 waits for nothing: set \
                 replica_sync to the replicas that must write each acquire to disk, or \
                 durability to aof for the primary's disk alone"
                    .into(),
            ));
        }
        if self.lock_watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::Config(
                "lock_watchdog_timeout must be at least 30 ms (renewal runs every third of it)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Checks that every address naming a database names
    /// [`database`](Config::database), and that a cluster uses database 0.
    fn check_databases(&self) -> Result<()> {
        let named = |address: &str| address_database(address).filter(|&n| n != self.database);
        if let Some(named) = named(&self.address) {
            return Err(Error::Config(database_conflict(
                &format!("address '{}'", redact_address(&self.address)),
                named,
                "database",
                self.database,
            )));
        }
        for sentinel in &self.sentinel_addresses {
            if let Some(named) = named(sentinel) {
                return Err(Error::Config(format!(
                    "{} (sentinels have no databases: the primary's is `database`)",
                    database_conflict(
                        &format!("sentinel address '{}'", redact_address(sentinel)),
                        named,
                        "database",
                        self.database,
                    )
                )));
            }
        }
        for node in &self.cluster_nodes {
            if let Some(named) = named(node) {
                return Err(Error::Config(database_conflict(
                    &format!("cluster node '{}'", redact_address(node)),
                    named,
                    "database",
                    self.database,
                )));
            }
        }
        Ok(())
    }

    /// The replica sync timeout in force: the configured one, capped at a third
    /// of `timeout` (two WAITs may follow each other on their connection, a
    /// dropped batch's and the next, within one command's timeout).
    pub(crate) fn effective_replica_sync_timeout_ms(&self) -> u64 {
        let effective = self.replica_sync_timeout.min(self.timeout / 3);
        u64::try_from(effective.as_millis()).unwrap_or(u64::MAX)
    }

    /// The sentinels as connection infos.
    pub(crate) fn sentinel_infos(&self) -> Result<Vec<redis::ConnectionInfo>> {
        self.sentinel_addresses
            .iter()
            .map(|node| parse_address("sentinel address", node))
            .collect()
    }

    /// The cluster seed nodes as connection infos.
    pub(crate) fn cluster_node_infos(&self) -> Result<Vec<redis::ConnectionInfo>> {
        self.cluster_nodes
            .iter()
            .map(|node| parse_address("cluster node", node))
            .collect()
    }

    /// The `redis` crate's connection info for this configuration, speaking RESP3 so
    /// that unlock messages arrive as pushes on the command connection.
    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo> {
        let info = parse_address("address", &self.address)?;
        let mut settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3)
            .set_db(self.database)
            .set_lib_name(LIBRARY, env!("CARGO_PKG_VERSION"));
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        Ok(info.set_redis_settings(settings))
    }
}

impl std::fmt::Debug for Config {
    /// Every field, with the password shown as `Some("***")` and the addresses
    /// `redact`ed. Destructured, so that a new field cannot be forgotten here.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Config {
            address,
            username,
            password,
            database,
            connect_timeout,
            timeout,
            retry_attempts,
            retry_interval,
            lock_watchdog_timeout,
            lock_watchdog_batch_size,
            fair_lock_wait_timeout,
            recheck_interval,
            cluster_nodes,
            sharded_pubsub,
            sentinel_addresses,
            sentinel_master_name,
            replica_sync,
            replica_sync_timeout,
            durability,
            clock_drift_factor,
            max_hold,
            tls,
            owner_mode,
            self_wait,
            self_wait_warning,
            deadlock,
            deadlock_threshold,
            client_name,
            announce,
            metrics_lock_names,
        } = self;
        let redacted = |addresses: &[String]| -> Vec<String> {
            addresses
                .iter()
                .map(|a| redact_address(a).into_owned())
                .collect()
        };
        f.debug_struct("Config")
            .field("address", &redact_address(address))
            .field("username", username)
            .field("password", &password.as_ref().map(|_| "***"))
            .field("database", database)
            .field("connect_timeout", connect_timeout)
            .field("timeout", timeout)
            .field("retry_attempts", retry_attempts)
            .field("retry_interval", retry_interval)
            .field("lock_watchdog_timeout", lock_watchdog_timeout)
            .field("lock_watchdog_batch_size", lock_watchdog_batch_size)
            .field("fair_lock_wait_timeout", fair_lock_wait_timeout)
            .field("recheck_interval", recheck_interval)
            .field("cluster_nodes", &redacted(cluster_nodes))
            .field("sharded_pubsub", sharded_pubsub)
            .field("sentinel_addresses", &redacted(sentinel_addresses))
            .field("sentinel_master_name", sentinel_master_name)
            .field("replica_sync", replica_sync)
            .field("replica_sync_timeout", replica_sync_timeout)
            .field("durability", durability)
            .field("clock_drift_factor", clock_drift_factor)
            .field("max_hold", max_hold)
            .field("tls", tls)
            .field("owner_mode", owner_mode)
            .field("self_wait", self_wait)
            .field("self_wait_warning", self_wait_warning)
            .field("deadlock", deadlock)
            .field("deadlock_threshold", deadlock_threshold)
            .field("client_name", client_name)
            .field("announce", announce)
            .field("metrics_lock_names", metrics_lock_names)
            .finish()
    }
}

/// Converts a lease or wait to whole milliseconds, rounding up so that a positive
/// sub-millisecond duration never becomes 0 (which would delete the key at once).
pub(crate) fn duration_to_millis(what: &str, value: Duration) -> Result<u64> {
    if value.is_zero() {
        return Err(Error::invalid(format!("{what} must be positive")));
    }
    if value > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} of {value:?} exceeds the maximum of {} s",
            MAX_DURATION.as_secs()
        )));
    }
    let millis = value.as_millis() + u128::from(!value.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).map_err(|_| Error::invalid(format!("{what} overflows milliseconds")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_redissons() {
        let c = Config::default();
        assert_eq!(c.lock_watchdog_timeout, Duration::from_secs(30));
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.retry_attempts, 3);
        c.validate().unwrap();
    }

    #[test]
    fn url_fills_credentials_and_database() {
        let c = Config::from_url("redis://alice:pw@localhost:7000/3").unwrap();
        assert_eq!(c.username.as_deref(), Some("alice"));
        assert_eq!(c.password.as_deref(), Some("pw"));
        assert_eq!(c.database, 3);
    }

    #[test]
    #[cfg(not(feature = "tls"))]
    fn tls_urls_are_refused_clearly_without_tls_support() {
        // Built without TLS: a rediss:// address is a configuration error at
        // parse time, not a confusing connect failure.
        let err = Config::from_url("rediss://localhost:6380").unwrap_err();
        assert!(err.is_config(), "{err}");
    }

    #[test]
    fn bad_urls_are_config_errors() {
        assert!(Config::from_url("http://x").unwrap_err().is_config());
        assert!(Config::from_url("redis://").unwrap_err().is_config());
    }

    #[test]
    fn json_reads_redisson_layout_and_ignores_unknown_fields() {
        let c = Config::from_json(
            r#"{"singleServerConfig":{"address":"redis://h:1","password":"p","timeout":500,
                "idleConnectionTimeout":1},"lockWatchdogTimeout":1000,"threads":16}"#,
        )
        .unwrap();
        assert_eq!(c.address, "redis://h:1");
        assert_eq!(c.password.as_deref(), Some("p"));
        assert_eq!(c.timeout, Duration::from_millis(500));
        assert_eq!(c.lock_watchdog_timeout, Duration::from_secs(1));
    }

    #[test]
    fn json_reads_redisson_cluster_layout() {
        let c = Config::from_json(
            r#"{"clusterServersConfig":{"nodeAddresses":["redis://a:7000","redis://b:7001"],
                "password":"p","scanInterval":1000}}"#,
        )
        .unwrap();
        assert_eq!(c.cluster_nodes, vec!["redis://a:7000", "redis://b:7001"]);
        assert_eq!(c.password.as_deref(), Some("p"));
        assert!(
            Config::from_json(r#"{"clusterServersConfig":{"nodeAddresses":["a:1"]}}"#)
                .unwrap_err()
                .is_config()
        );
    }

    #[test]
    fn json_reads_redisson_sentinel_layout() {
        let c = Config::from_json(
            r#"{"sentinelServersConfig":{"sentinelAddresses":["redis://s1:26379"],
                "masterName":"mymaster","database":2}}"#,
        )
        .unwrap();
        assert_eq!(c.sentinel_addresses, vec!["redis://s1:26379"]);
        assert_eq!(c.sentinel_master_name.as_deref(), Some("mymaster"));
        assert_eq!(c.database, 2);
        assert!(Config::from_json(
            r#"{"sentinelServersConfig":{"sentinelAddresses":["redis://s1:26379"]}}"#
        )
        .unwrap_err()
        .is_config());
    }

    #[test]
    fn json_bad_values_are_config_errors() {
        for bad in [
            "not json",
            r#"{"lockWatchdogTimeout":"soon"}"#,
            r#"{"lockWatchdogTimeout":0}"#,
            r#"{"lockWatchdogTimeout":-5}"#,
            r#"{"singleServerConfig":{"address":"127.0.0.1:6379"}}"#,
            r#"{"singleServerConfig":{"database":-1}}"#,
            r#"{"singleServerConfig":{"retryAttempts":4294967295}}"#,
            r#"{"singleServerConfig":{"retryAttempts":1001}}"#,
            r#"{"singleServerConfig":{"retryAttempts":-1}}"#,
        ] {
            assert!(Config::from_json(bad).unwrap_err().is_config(), "{bad}");
        }
    }

    #[test]
    fn json_with_two_topologies_is_refused_naming_both() {
        for (json, named) in [
            (
                r#"{"singleServerConfig":{"address":"redis://a:1"},
                    "clusterServersConfig":{"nodeAddresses":["redis://b:2"]}}"#,
                ["singleServerConfig", "clusterServersConfig"],
            ),
            (
                r#"{"clusterServersConfig":{"nodeAddresses":["redis://b:2"]},
                    "sentinelServersConfig":{"sentinelAddresses":["redis://s:3"],"masterName":"m"}}"#,
                ["clusterServersConfig", "sentinelServersConfig"],
            ),
            (
                r#"{"singleServerConfig":{},
                    "sentinelServersConfig":{"sentinelAddresses":["redis://s:3"],"masterName":"m"}}"#,
                ["singleServerConfig", "sentinelServersConfig"],
            ),
        ] {
            let err = Config::from_json(json).unwrap_err();
            assert!(err.is_config(), "{err}");
            for section in named {
                assert!(err.to_string().contains(section), "{err}");
            }
        }
    }

    #[test]
    fn absurd_values_are_refused_naming_the_field_and_the_bound() {
        let mut config = Config {
            retry_attempts: u32::MAX,
            ..Config::default()
        };
        let err = config.validate().unwrap_err();
        assert!(err.is_config() && err.to_string().contains("retry_attempts"));
        assert!(err.to_string().contains("1000"), "{err}");
        config.retry_attempts = MAX_RETRY_ATTEMPTS;
        config.validate().unwrap();
        for factor in [-0.1, 0.6, f64::NAN, f64::INFINITY] {
            let config = Config {
                clock_drift_factor: factor,
                ..Config::default()
            };
            let err = config.validate().unwrap_err();
            assert!(err.to_string().contains("clock_drift_factor"), "{err}");
        }
        // Under a millisecond is zero to the scripts, which count in whole
        // milliseconds (a fair line's TTL of 0 would delete it).
        let too_short = [
            (
                Config {
                    timeout: Duration::ZERO,
                    ..Config::default()
                },
                "timeout",
            ),
            (
                Config {
                    fair_lock_wait_timeout: Duration::from_micros(500),
                    ..Config::default()
                },
                "fair_lock_wait_timeout",
            ),
        ];
        for (config, field) in too_short {
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }

    #[test]
    fn new_takes_the_database_from_the_address() {
        assert_eq!(Config::new("redis://h:6379/3").database, 3);
        assert_eq!(Config::new("redis://app:pw@h:6379/12").database, 12);
        for none in ["redis://h:6379", "redis://h:6379/", "redis://h"] {
            let config = Config::new(none);
            assert_eq!(config.database, 0, "{none}");
            config.validate().unwrap();
        }
        Config::new("redis://h:6379/3").validate().unwrap();
        // It cannot fail: an address that does not parse leaves database 0, and
        // validate reports the address.
        for bad in ["h:6379/3", "redis://h:6379/x", "redis://"] {
            let config = Config::new(bad);
            assert_eq!(config.database, 0, "{bad}");
            assert!(config.validate().unwrap_err().is_config(), "{bad}");
        }
        let err = Config::new("redis://h:6379/-1").validate().unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }

    #[test]
    fn an_address_and_a_database_that_disagree_are_refused_naming_both() {
        let mut config = Config::from_url("redis://h:6379/3").unwrap();
        assert_eq!(config.database, 3);
        config.database = 5;
        let err = config.validate().unwrap_err();
        assert!(err.is_config(), "{err}");
        assert_eq!(
            err.to_string(),
            "invalid configuration: address 'redis://h:6379/3' names database 3 but database \
             is 5; make them agree, or drop the /3 from the address"
        );
        // A struct literal cannot slip past: `..Default::default()` is database 0.
        let config = Config {
            address: "redis://h:6379/3".into(),
            ..Config::default()
        };
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string()
                .contains("names database 3 but database is 0"),
            "{err}"
        );
        let config = Config {
            address: "redis://h:6379/0".into(),
            database: 2,
            ..Config::default()
        };
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string()
                .contains("names database 0 but database is 2"),
            "{err}"
        );
        // An address without a database leaves it to the field.
        let config = Config {
            address: "redis://h:6379".into(),
            database: 2,
            ..Config::default()
        };
        config.validate().unwrap();
        assert_eq!(config.connection_info().unwrap().redis_settings().db(), 2);
        let agreed = Config::new("redis://h:6379/3");
        assert_eq!(agreed.connection_info().unwrap().redis_settings().db(), 3);
    }

    #[test]
    fn sentinel_addresses_must_name_the_database_and_cluster_nodes_none() {
        let sentinel = |address: &str, database: i64| Config {
            sentinel_addresses: vec!["redis://s1:26379".into(), address.into()],
            sentinel_master_name: Some("m".into()),
            database,
            ..Config::default()
        };
        sentinel("redis://s2:26379/2", 2).validate().unwrap();
        sentinel("redis://s2:26379", 2).validate().unwrap();
        let err = sentinel("redis://s2:26379/2", 0).validate().unwrap_err();
        assert!(
            err.to_string().contains(
                "sentinel address 'redis://s2:26379/2' names database 2 but database is 0"
            ),
            "{err}"
        );
        let cluster = |node: &str, database: i64| Config {
            cluster_nodes: vec!["redis://a:7000".into(), node.into()],
            database,
            ..Config::default()
        };
        cluster("redis://b:7001", 0).validate().unwrap();
        cluster("redis://b:7001/0", 0).validate().unwrap();
        let err = cluster("redis://b:7001/3", 0).validate().unwrap_err();
        assert!(
            err.to_string()
                .contains("cluster node 'redis://b:7001/3' names database 3 but database is 0"),
            "{err}"
        );
        // A number other than 0 is the cluster's to refuse, at connect.
        cluster("redis://b:7001", 1).validate().unwrap();
        cluster("redis://b:7001/1", 1).validate().unwrap();
    }

    #[test]
    fn json_database_is_the_key_as_in_redisson() {
        let read = |section: &str| Config::from_json(&format!("{{{section}}}"));
        let c = read(r#""singleServerConfig":{"address":"redis://h:1/3","database":3}"#).unwrap();
        assert_eq!(c.database, 3);
        let c = read(r#""singleServerConfig":{"address":"redis://h:1","database":4}"#).unwrap();
        assert_eq!(c.database, 4);
        let c = read(r#""singleServerConfig":{"address":"redis://h:1/0"}"#).unwrap();
        assert_eq!(c.database, 0);
        // Redisson would use database 0 here, whatever the address says.
        let err = read(r#""singleServerConfig":{"address":"redis://h:1/3"}"#).unwrap_err();
        let message = err.to_string();
        assert!(err.is_config(), "{err}");
        assert!(
            message.contains("singleServerConfig.address 'redis://h:1/3' names database 3")
                && message.contains("Redisson ignores an address's database")
                && message.contains("`database: 3`"),
            "{err}"
        );
        for (database, named) in [
            (5, "3 but singleServerConfig.database is 5"),
            (0, "3 but singleServerConfig.database is 0"),
        ] {
            let err = read(&format!(
                r#""singleServerConfig":{{"address":"redis://h:1/3","database":{database}}}"#
            ))
            .unwrap_err();
            assert!(
                err.to_string().contains(&format!("names database {named}")),
                "{err}"
            );
        }
        let sentinel = |database: &str| {
            read(&format!(
                r#""sentinelServersConfig":{{"sentinelAddresses":["redis://s:26379/2"],
                    "masterName":"m"{database}}}"#
            ))
        };
        assert_eq!(sentinel(r#","database":2"#).unwrap().database, 2);
        let err = sentinel("").unwrap_err();
        assert!(
            err.to_string().contains(
                "sentinelServersConfig.sentinelAddresses 'redis://s:26379/2' names database 2"
            ),
            "{err}"
        );
        let err =
            read(r#""clusterServersConfig":{"nodeAddresses":["redis://a:1/1"]}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("clusterServersConfig.nodeAddresses 'redis://a:1/1' names database 1"),
            "{err}"
        );
    }

    #[test]
    fn redact_masks_the_secret_part_of_user_info() {
        for (address, shown) in [
            ("redis://h:6379", "redis://h:6379"),
            ("redis://app:S3cr3t@h:6379/3", "redis://app:***@h:6379/3"),
            ("redis://:S3cr3t@h:6379", "redis://:***@h:6379"),
            ("redis://S3cr3t@h:6379", "redis://***@h:6379"),
            ("redis://app:@h", "redis://app:***@h"),
            // Unescaped `@`, `/` and `:` in a password: all of it is masked.
            ("redis://app:S3c@r/3t:x@h:1", "redis://app:***@h:1"),
            ("app:S3cr3t@h:6379", "app:***@h:6379"),
            (":S3cr3t@h", ":***@h"),
            ("rediss://app:S3cr3t@h:6380", "rediss://app:***@h:6380"),
            // The forms the `redis` crate reads for a socket, and a query
            // parameter under either name, in any case.
            (
                "redis+unix:///tmp/r.sock?pass=S3cr3t",
                "redis+unix:///tmp/r.sock?pass=***",
            ),
            (
                "unix:///tmp/r.sock?db=1&PASS=S3cr3t&user=app",
                "unix:///tmp/r.sock?db=1&PASS=***&user=app",
            ),
            (
                "redis://app:S3cr3t@h:1/?password=S3cr3t#x",
                "redis://app:***@h:1/?password=***#x",
            ),
            ("redis://h:1/?pass=&db=2", "redis://h:1/?pass=&db=2"),
            ("redis://h:1/?passport=ok", "redis://h:1/?passport=ok"),
        ] {
            assert_eq!(redact_address(address), shown, "{address}");
        }
    }

    #[test]
    fn errors_about_addresses_mask_the_password() {
        for (url, shown) in [
            (
                "redis://app:S3cr3t@h:notaport",
                "'redis://app:***@h:notaport'",
            ),
            ("redis://S3cr3t@h:notaport", "'redis://***@h:notaport'"),
            (
                "redis://app:S3cr3t@h:6379/notadb",
                "'redis://app:***@h:6379/notadb'",
            ),
            ("redis://app:S3c@r/3t@h:1:2", "'redis://app:***@h:1:2'"),
            ("http://app:S3cr3t@h:6379", "'http://app:***@h:6379'"),
            ("app:S3cr3t@h:6379", "'app:***@h:6379'"),
            (":S3cr3t@h", "':***@h'"),
            (
                "redis+unix:///tmp/r.sock?pass=S3cr3t",
                "'redis+unix:///tmp/r.sock?pass=***'",
            ),
        ] {
            let err = Config::from_url(url).unwrap_err().to_string();
            assert!(
                err.contains(shown) && !err.contains("S3cr3t"),
                "{url}: {err}"
            );
            let err = Config::new(url).validate().unwrap_err().to_string();
            assert!(
                err.contains(shown) && !err.contains("S3cr3t"),
                "{url}: {err}"
            );
        }
        let err = Config {
            address: "redis://app:S3cr3t@h:6379/3".into(),
            database: 4,
            ..Config::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("'redis://app:***@h:6379/3'") && !err.contains("S3cr3t"),
            "{err}"
        );
        let bad = "redis://app:S3cr3t@h:notaport".to_owned();
        for (config, what) in [
            (
                Config {
                    cluster_nodes: vec!["redis://a:7000".into(), bad.clone()],
                    ..Config::default()
                },
                "cluster node",
            ),
            (
                Config {
                    sentinel_addresses: vec![bad.clone()],
                    sentinel_master_name: Some("m".into()),
                    ..Config::default()
                },
                "sentinel address",
            ),
        ] {
            let err = config.validate().unwrap_err().to_string();
            assert!(
                err.contains(&format!(": {what} 'redis://app:***@h:notaport'")),
                "{err}"
            );
            assert!(!err.contains("S3cr3t"), "{err}");
        }
        for json in [
            r#"{"singleServerConfig":{"address":"redis://app:S3cr3t@h:notaport"}}"#,
            r#"{"clusterServersConfig":{"nodeAddresses":["redis://app:S3cr3t@h:notaport"]}}"#,
            r#"{"clusterServersConfig":{"nodeAddresses":["redis://app:S3cr3t@h:1/2"]}}"#,
            r#"{"sentinelServersConfig":{"sentinelAddresses":["redis://app:S3cr3t@h:x"],"masterName":"m"}}"#,
            r#"{"singleServerConfig":{"address":"redis://app:S3cr3t@h:1/2","database":3}}"#,
            r#"{"singleServerConfig":{"sslTruststore":"file://app:S3cr3t@elsewhere/ca.pem"}}"#,
        ] {
            let err = Config::from_json(json).unwrap_err().to_string();
            assert!(
                err.contains("app:***@") && !err.contains("S3cr3t"),
                "{json}: {err}"
            );
        }
    }

    #[test]
    fn json_errors_never_repeat_a_password() {
        for json in [
            r#"{"singleServerConfig":{"password":987654321}}"#,
            r#"{"singleServerConfig":{"password":98765.4321}}"#,
            r#"{"password":987654321}"#,
            r#"{"password":{"value":987654321}}"#,
            r#"{"singleServerConfig":{"username":987654321}}"#,
            r#"{"singleServerConfig":{"address":987654321}}"#,
            r#"{"singleServerConfig":"S3cr3t-7"}"#,
            r#"{"singleServerConfig":{"timeout":"S3cr3t-7"}}"#,
            r#"{"singleServerConfig":{"retryDelay":{"class":"org.redisson.config.ConstantDelay","delay":"S3cr3t-7"}}}"#,
            r#"{"clusterServersConfig":{"nodeAddresses":"redis://:S3cr3t-7@a:1"}}"#,
            r#"{"singleServerConfig":{"sslKeystorePassword":"S3cr3t-7"}}"#,
        ] {
            let err = Config::from_json(json).unwrap_err();
            assert!(err.is_config(), "{err}");
            let err = err.to_string();
            for secret in ["987654321", "98765", "S3cr3t"] {
                assert!(!err.contains(secret), "{json}: {err}");
            }
        }
        let err = Config::from_json(r#"{"singleServerConfig":{"password":987654321}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "singleServerConfig.password: invalid type: an integer, expected a string"
            ),
            "the key and the kind are named: {err}"
        );
    }

    #[test]
    fn debug_does_not_print_the_password() {
        let mut config = Config::from_url("redis://app:S3cr3t@h:6379/1").unwrap();
        config.cluster_nodes = vec!["redis://:S3cr3t@a:7000".into()];
        config.sentinel_addresses = vec!["redis://S3cr3t@s:26379".into()];
        let shown = format!("{config:?}");
        assert!(!shown.contains("S3cr3t"), "{shown}");
        for part in [
            r#"password: Some("***")"#,
            r#"address: "redis://app:***@h:6379/1""#,
            r#"username: Some("app")"#,
            r#"cluster_nodes: ["redis://:***@a:7000"]"#,
            r#"sentinel_addresses: ["redis://***@s:26379"]"#,
            "database: 1",
            "self_wait_warning: 1s",
        ] {
            assert!(shown.contains(part), "{part} in {shown}");
        }
        assert!(format!("{:?}", Config::default()).contains("password: None"));
        assert!(!format!("{config:#?}").contains("S3cr3t"));
    }

    #[test]
    fn durations_round_up_and_reject_absurd_values() {
        assert_eq!(
            duration_to_millis("lease", Duration::from_micros(1)).unwrap(),
            1
        );
        assert_eq!(
            duration_to_millis("lease", Duration::from_millis(5)).unwrap(),
            5
        );
        assert!(duration_to_millis("lease", Duration::ZERO).is_err());
        assert!(duration_to_millis("lease", Duration::MAX).is_err());
        assert!(duration_to_millis("lease", MAX_DURATION).is_ok());
    }
}
