//! Client configuration: from code, from a URL, or from Redisson-style JSON.

use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

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

/// How to reach Redis and how the locks behave.
///
/// Field defaults are Redisson's. Build one with [`Config::new`],
/// [`Config::from_url`] or [`Config::from_json`], then adjust the public fields.
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
#[derive(Debug, Clone, PartialEq)]
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
    /// Database number. Default 0.
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
    /// Default 1.5 s.
    pub retry_interval: Duration,
    /// The lease of a lock taken without an explicit lease; the watchdog renews it
    /// every third of this while it is held (Redisson `lockWatchdogTimeout`).
    /// Default 30 s.
    pub lock_watchdog_timeout: Duration,
    /// How long a fair-lock waiter may stay silent before the queue skips it
    /// (Redisson `fairLockWaitTimeout`). Default 300 s.
    pub fair_lock_wait_timeout: Duration,
    /// Redis Cluster seed nodes, `redis://host:port` each (Redisson
    /// `clusterServersConfig.nodeAddresses`). Empty (the default): a single server
    /// at [`address`](Config::address). Set: cluster mode, `address` is ignored.
    pub cluster_nodes: Vec<String>,
    /// Whether unlock messages use sharded pub/sub (SPUBLISH/SSUBSCRIBE). `None`
    /// (the default) decides as Redisson does: in cluster mode on Redis 7 or newer.
    /// Sharded and plain messages do not reach each other, so every client of a
    /// lock, Java ones included, must agree.
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
    /// How many replicas must acknowledge each acquire (Redis `WAIT`), as
    /// Redisson's replica sync does. `None` (the default): one when the server had
    /// replicas connected at connect time, none when it had none (or could not be
    /// asked: see [`Client::warnings`](crate::Client::warnings)). `Some(0)` turns it
    /// off. Single server and Sentinel; off in cluster mode.
    ///
    /// With it, an acquire no replica acknowledged is released again and reported
    /// as [`Error::NotReplicated`]: a hold that only the primary knows would be lost
    /// in a failover and let a second owner in. It narrows that window; it does not
    /// close it (WAIT is not a consensus: a replica that acknowledged can still lose
    /// the write, and a failover can promote one that did not acknowledge).
    pub replica_sync: Option<u32>,
    /// How long to wait for replicas to acknowledge (Redisson `syncSlavesTimeout`).
    /// Default 1 s, and at most half of [`timeout`](Config::timeout) (a WAIT must
    /// answer before the client gives up on it). While waiting, this client's
    /// connection is blocked, and an acquire with a wait limit may overrun it by
    /// this much.
    pub replica_sync_timeout: Duration,
    /// How much of every lease a holder keeps in reserve for the difference
    /// between its clock rate and the server's: a hold counts as surely valid for
    /// `lease - (lease * clock_drift_factor + 2 ms)` from the instant its acquire
    /// or last confirmed renewal was sent (see
    /// [`LockGuard::valid_for`](crate::LockGuard::valid_for)). Default 0.01, Redlock's
    /// figure: ordinary clocks drift by parts per million, so 1 % covers them and a
    /// server's slow clock adjustment (NTP slewing is at most 0.05 %) with room to
    /// spare; the 2 ms cover timer granularity. Between 0 and 0.5.
    pub clock_drift_factor: f64,
    /// Certificates for `rediss://` addresses (feature `tls`): the servers' own
    /// and, for mutual TLS, the client's. Used for the single server, every
    /// cluster node and Sentinel's servers. Default: the system's trust store,
    /// no client certificate.
    pub tls: TlsConfig,
}

/// Certificates for TLS connections (`rediss://`), as PEM files: the Rust
/// counterpart of Redisson's `sslTruststore` (whom to trust) and `sslKeystore`
/// (who we are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
            fair_lock_wait_timeout: Duration::from_millis(300_000),
            tls: TlsConfig::default(),
            cluster_nodes: Vec::new(),
            sharded_pubsub: None,
            sentinel_addresses: Vec::new(),
            sentinel_master_name: None,
            replica_sync: None,
            replica_sync_timeout: Duration::from_millis(1_000),
            clock_drift_factor: 0.01,
        }
    }
}

impl Config {
    /// A configuration for the server at `address`, every other field at its default.
    /// The address is checked when the client connects.
    pub fn new(address: impl Into<String>) -> Self {
        Config {
            address: address.into(),
            ..Config::default()
        }
    }

    /// Parses a `redis://[user[:password]@]host[:port][/db]` URL.
    ///
    /// User, password and database in the URL fill the matching fields.
    ///
    /// # Errors
    /// [`Error::Config`] when the URL is malformed.
    pub fn from_url(url: &str) -> Result<Self> {
        let info = parse_address(url)?;
        let settings = info.redis_settings();
        Ok(Config {
            address: url.to_owned(),
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
            database: settings.db(),
            ..Config::default()
        })
    }

    /// Parses Redisson's JSON configuration layout.
    ///
    /// Read are `singleServerConfig.{address, username, password, database,
    /// connectTimeout, timeout, retryAttempts, retryInterval}`,
    /// `clusterServersConfig.{nodeAddresses, username, password, connectTimeout,
    /// timeout, retryAttempts, retryInterval}`, `lockWatchdogTimeout` and
    /// `fairLockWaitTimeout` (times in milliseconds). Other fields are ignored, so a
    /// Java service's file can be shared; missing ones keep their defaults.
    ///
    /// ```
    /// let config = redisson_locks::Config::from_json(r#"{
    ///     "singleServerConfig": { "address": "redis://10.0.0.5:6379", "database": 1 },
    ///     "lockWatchdogTimeout": 10000,
    ///     "codec": "ignored"
    /// }"#)?;
    /// assert_eq!(config.database, 1);
    /// assert_eq!(config.lock_watchdog_timeout.as_millis(), 10_000);
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the text is not JSON, a field has the wrong type, or a
    /// value is out of range.
    pub fn from_json(json: &str) -> Result<Self> {
        let file: RedissonJson = serde_json::from_str(json)
            .map_err(|e| Error::Config(format!("redisson JSON config: {e}")))?;
        let topologies: Vec<&str> = [
            ("singleServerConfig", file.single_server_config.is_some()),
            (
                "clusterServersConfig",
                file.cluster_servers_config.is_some(),
            ),
            (
                "sentinelServersConfig",
                file.sentinel_servers_config.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(section, present)| present.then_some(section))
        .collect();
        if topologies.len() > 1 {
            return Err(Error::Config(format!(
                "redisson JSON config: {} are exclusive; keep one",
                topologies.join(" and ")
            )));
        }
        let mut config = Config::default();
        if let Some(single) = file.single_server_config {
            if let Some(address) = single.address {
                config.address = address;
            }
            if let Some(db) = single.database {
                config.database = db;
            }
            single.common.apply(&mut config);
        }
        if let Some(cluster) = file.cluster_servers_config {
            config.cluster_nodes = cluster.node_addresses.unwrap_or_default();
            cluster.common.apply(&mut config);
        }
        if let Some(sentinel) = file.sentinel_servers_config {
            config.sentinel_addresses = sentinel.sentinel_addresses.unwrap_or_default();
            config.sentinel_master_name = sentinel.master_name;
            if let Some(db) = sentinel.database {
                config.database = db;
            }
            sentinel.common.apply(&mut config);
        }
        set_millis(
            &mut config.lock_watchdog_timeout,
            file.lock_watchdog_timeout,
        );
        set_millis(
            &mut config.fair_lock_wait_timeout,
            file.fair_lock_wait_timeout,
        );
        config.validate()?;
        Ok(config)
    }

    /// Checks every field; [`Client::connect`](crate::Client::connect) calls this.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        parse_address(&self.address)?;
        self.cluster_node_infos()?;
        self.sentinel_infos()?;
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
            ("replica_sync_timeout", self.replica_sync_timeout),
        ] {
            if value.is_zero() || value > MAX_DURATION {
                return Err(Error::Config(format!(
                    "{field} must be between 1 ms and {} s, got {value:?}",
                    MAX_DURATION.as_secs()
                )));
            }
        }
        if !(0.0..=0.5).contains(&self.clock_drift_factor) {
            return Err(Error::Config(format!(
                "clock_drift_factor must be between 0 and 0.5, got {}",
                self.clock_drift_factor
            )));
        }
        if self.lock_watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::Config(
                "lock_watchdog_timeout must be at least 30 ms (renewal runs every third of it)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The replica sync timeout in force: the configured one, capped at half of
    /// `timeout`.
    pub(crate) fn effective_replica_sync_timeout_ms(&self) -> u64 {
        let effective = self.replica_sync_timeout.min(self.timeout / 2);
        u64::try_from(effective.as_millis()).unwrap_or(u64::MAX)
    }

    /// The sentinels as connection infos.
    pub(crate) fn sentinel_infos(&self) -> Result<Vec<redis::ConnectionInfo>> {
        self.sentinel_addresses
            .iter()
            .map(|node| parse_address(node))
            .collect()
    }

    /// The cluster seed nodes as connection infos.
    pub(crate) fn cluster_node_infos(&self) -> Result<Vec<redis::ConnectionInfo>> {
        self.cluster_nodes
            .iter()
            .map(|node| parse_address(node))
            .collect()
    }

    /// The `redis` crate's connection info for this configuration, speaking RESP3 so
    /// that unlock messages arrive as pushes on the command connection.
    pub(crate) fn connection_info(&self) -> Result<redis::ConnectionInfo> {
        let info = parse_address(&self.address)?;
        let mut settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3)
            .set_db(self.database);
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        Ok(info.set_redis_settings(settings))
    }
}

fn parse_address(address: &str) -> Result<redis::ConnectionInfo> {
    use redis::IntoConnectionInfo;
    if !(address.starts_with("redis://") || address.starts_with("rediss://")) {
        return Err(Error::Config(format!(
            "address '{address}' must start with redis:// or rediss://"
        )));
    }
    if address.starts_with("rediss://") && !cfg!(feature = "tls") {
        return Err(Error::Config(format!(
            "address '{address}' needs TLS, and this build has no TLS support (cargo \
             feature `tls`)"
        )));
    }
    address
        .into_connection_info()
        .map_err(|e| Error::Config(format!("address '{address}': {e}")))
}

fn set_millis(field: &mut Duration, millis: Option<u64>) {
    if let Some(ms) = millis {
        *field = Duration::from_millis(ms);
    }
}

/// The part of Redisson's JSON config this crate reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RedissonJson {
    single_server_config: Option<SingleServerJson>,
    cluster_servers_config: Option<ClusterServersJson>,
    sentinel_servers_config: Option<SentinelServersJson>,
    lock_watchdog_timeout: Option<u64>,
    fair_lock_wait_timeout: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SingleServerJson {
    address: Option<String>,
    database: Option<i64>,
    #[serde(flatten)]
    common: ServerJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterServersJson {
    node_addresses: Option<Vec<String>>,
    #[serde(flatten)]
    common: ServerJson,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SentinelServersJson {
    sentinel_addresses: Option<Vec<String>>,
    master_name: Option<String>,
    database: Option<i64>,
    #[serde(flatten)]
    common: ServerJson,
}

/// The settings `singleServerConfig`, `clusterServersConfig` and
/// `sentinelServersConfig` share.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerJson {
    username: Option<String>,
    password: Option<String>,
    connect_timeout: Option<u64>,
    timeout: Option<u64>,
    retry_attempts: Option<u32>,
    retry_interval: Option<u64>,
}

impl ServerJson {
    fn apply(self, config: &mut Config) {
        if self.username.is_some() {
            config.username = self.username;
        }
        if self.password.is_some() {
            config.password = self.password;
        }
        set_millis(&mut config.connect_timeout, self.connect_timeout);
        set_millis(&mut config.timeout, self.timeout);
        set_millis(&mut config.retry_interval, self.retry_interval);
        if let Some(attempts) = self.retry_attempts {
            config.retry_attempts = attempts;
        }
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
        let config = Config {
            timeout: Duration::ZERO,
            ..Config::default()
        };
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("timeout"));
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
