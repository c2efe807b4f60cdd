//! Redisson's config file, read from JSON or YAML into the same structs.
//!
//! The two syntaxes carry one layout (Redisson writes both from the same Java
//! objects), so one set of structs and one mapping serve both. Where Redisson
//! writes a Java class name, YAML puts it in a tag (`!<org.redisson.config.EqualJitterDelay>`)
//! and Jackson's JSON in a `class` key; [`Tagged`] captures the first and the
//! structs read the second.

use std::env::VarError;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{self, Deserializer, IgnoredAny, Unexpected, Visitor};
use serde::Deserialize;

use super::address::{address_database, database_conflict, redact_address};
use super::{env, human, Config, MAX_RETRY_ATTEMPTS};
use crate::error::{Error, Result};

impl Config {
    /// Parses Redisson's JSON configuration file (Redisson 3; Redisson 4 reads only
    /// YAML, see `from_yaml` with the `yaml` feature).
    ///
    /// The keys read, and how they map onto the fields, are those of the YAML file
    /// (listed at `from_yaml`, feature `yaml`, and in `PORTING.md`): `singleServerConfig`, `clusterServersConfig` or
    /// `sentinelServersConfig` (one of them), with their addresses, `username`,
    /// `password`, `database`, `connectTimeout`, `timeout`, `retryAttempts`,
    /// `retryInterval` or `retryDelay` (its class in a `class` key, as Jackson
    /// writes it) and the `sslTruststore`/`sslKeystore` PEM files; and
    /// `lockWatchdogTimeout`, `fairLockWaitTimeout`, `lockWatchdogBatchSize`,
    /// `checkLockSyncedSlaves` and `slavesSyncTimeout` at the top (times in
    /// milliseconds). Other keys are ignored, so a Java service's file can be
    /// shared; missing ones keep their defaults. `${VAR}` and `${VAR:-default}`
    /// are replaced from the environment first, as Redisson does.
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
    /// [`Error::Config`] when the text is not JSON, a referenced environment variable
    /// is unset without a default, a key has a bad value (the message names the
    /// key), two topology sections are present, an address names a database
    /// other than the section's `database` (see [`database`](Config::database)),
    /// or [`validate`](Config::validate) refuses the result. No message repeats a
    /// value taken from the environment or a password.
    pub fn from_json(json: &str) -> Result<Self> {
        read(json, Syntax::Json)
    }

    /// Parses Redisson's YAML configuration file, the format of Redisson 3 and 4
    /// (`Config.fromYAML`), so that a Java service's file can be shared.
    ///
    /// Before parsing, `${VAR}` and `${VAR:-default}` anywhere in the text are
    /// replaced from the environment, as Redisson does: a set variable is used even
    /// when empty, the default (up to the first `}`) only when it is unset, and an
    /// unset variable without a default is an error naming it. Java system
    /// properties, Redisson's second source, have no counterpart here. The value is
    /// pasted in unquoted, so quote the reference (`password: "${REDIS_PASSWORD}"`)
    /// when the value may hold YAML syntax. A reference in a comment is replaced too.
    ///
    /// Then exactly one of `singleServerConfig`, `clusterServersConfig` or
    /// `sentinelServersConfig` is read:
    ///
    /// | Redisson key | `Config` field |
    /// | --- | --- |
    /// | `singleServerConfig.address` | [`address`](Config::address) |
    /// | `clusterServersConfig.nodeAddresses` (required) | [`cluster_nodes`](Config::cluster_nodes) |
    /// | `sentinelServersConfig.sentinelAddresses`, `masterName` (both required) | [`sentinel_addresses`](Config::sentinel_addresses), [`sentinel_master_name`](Config::sentinel_master_name) |
    /// | `database` (single, sentinel; an address's `/N` is not read, as in Redisson, and must not differ) | [`database`](Config::database) |
    /// | `username`, `password` (top level in Redisson 4, where they win over the section's) | [`username`](Config::username), [`password`](Config::password) |
    /// | `connectTimeout`, `timeout` (ms) | [`connect_timeout`](Config::connect_timeout), [`timeout`](Config::timeout) |
    /// | `retryAttempts` | [`retry_attempts`](Config::retry_attempts) |
    /// | `retryInterval` (Redisson 3, ms) | [`retry_interval`](Config::retry_interval) |
    /// | `retryDelay` (Redisson 4): `ConstantDelay`'s `delay`, or the jitter strategies' `maxDelay` | [`retry_interval`](Config::retry_interval) |
    /// | `sslTruststore` (`file:` URL or path of a PEM file; top level or section, as the credentials) | [`tls.ca_certificate`](crate::TlsConfig::ca_certificate) |
    /// | `sslKeystore` (one PEM file with certificate chain and key) | [`tls.client_certificate`](crate::TlsConfig::client_certificate) and [`tls.client_key`](crate::TlsConfig::client_key) |
    /// | `lockWatchdogTimeout`, `fairLockWaitTimeout` (top level, ms) | [`lock_watchdog_timeout`](Config::lock_watchdog_timeout), [`fair_lock_wait_timeout`](Config::fair_lock_wait_timeout) |
    /// | `lockWatchdogBatchSize` (top level) | [`lock_watchdog_batch_size`](Config::lock_watchdog_batch_size) |
    /// | `checkLockSyncedSlaves` (top level; `false` turns replica sync off, `true` is the default) | [`replica_sync`](Config::replica_sync) (`Some(0)` for `false`) |
    /// | `slavesSyncTimeout` (top level, ms) | [`replica_sync_timeout`](Config::replica_sync_timeout) |
    ///
    /// `retryDelay` is a Redisson `DelayStrategy` named by its tag:
    /// `!<org.redisson.config.ConstantDelay> {delay: PT1S}` or
    /// `!<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}`
    /// (also `FullJitterDelay`, `DecorrelatedJitterDelay`), durations in ISO-8601.
    /// This client backs off on its own jittered schedule up to `retry_interval`, so
    /// the longest pause is what carries over. Other keys, Redisson's tags on them
    /// (`codec: !<org.redisson.codec.Kryo5Codec> {}`) included, are ignored; missing
    /// keys keep their defaults. Numbers may be written as strings (`"3000"`), as
    /// Redisson accepts them.
    ///
    /// ```
    /// let config = redisson_locks::Config::from_yaml(r#"
    /// singleServerConfig:
    ///   address: "redis://127.0.0.1:${REDISSON_LOCKS_DOC_PORT:-6380}"
    ///   password: null
    ///   timeout: 3000
    ///   retryAttempts: 4
    ///   retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}
    /// threads: 16
    /// codec: !<org.redisson.codec.Kryo5Codec> {}
    /// lockWatchdogTimeout: 10000
    /// "#)?;
    /// assert_eq!(config.address, "redis://127.0.0.1:6380");
    /// assert_eq!(config.retry_interval.as_secs(), 2);
    /// assert_eq!(config.lock_watchdog_timeout.as_secs(), 10);
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the text is not YAML, a referenced environment variable
    /// is unset without a default, a known key has a bad value (wrong type,
    /// negative, unparsable; the message names the key), two topology sections are
    /// present, an address names a database other than the section's `database`
    /// (see [`database`](Config::database)), `retryDelay` names a strategy that
    /// cannot be mapped, a store has a
    /// password (`sslTruststorePassword`, `sslKeystorePassword`: only PEM files
    /// without a password are read, not JKS or PKCS12 stores), or
    /// [`validate`](Config::validate) refuses the result.
    #[cfg(feature = "yaml")]
    pub fn from_yaml(yaml: &str) -> Result<Self> {
        read(yaml, Syntax::Yaml)
    }

    /// Reads Redisson's YAML configuration file at `path`; see
    /// [`from_yaml`](Config::from_yaml).
    ///
    /// ```no_run
    /// let config = redisson_locks::Config::from_yaml_file("redisson.yaml")?;
    /// # Ok::<(), redisson_locks::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`] when the file cannot be read, and as
    /// [`from_yaml`](Config::from_yaml).
    #[cfg(feature = "yaml")]
    pub fn from_yaml_file(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let yaml = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
        Self::from_yaml(&yaml)
    }
}

/// The syntax a Redisson config file is written in.
#[derive(Debug, Clone, Copy)]
pub(super) enum Syntax {
    Json,
    #[cfg(feature = "yaml")]
    Yaml,
}

impl fmt::Display for Syntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Syntax::Json => "JSON",
            #[cfg(feature = "yaml")]
            Syntax::Yaml => "YAML",
        })
    }
}

/// Reads a Redisson config file: substitutes `${...}` references from the
/// environment, parses, maps the fields onto a [`Config`] and validates it.
///
/// No error repeats a secret: serde's messages name a bad value's kind, not the
/// value ([`human::without_values`]), addresses show with their passwords
/// masked ([`redact_address`]), and whatever any message would quote of a value taken
/// from the environment becomes `***` ([`env::Resolved::scrub`]), validation's
/// messages included.
pub(super) fn read(text: &str, syntax: Syntax) -> Result<Config> {
    read_with_env(text, syntax, |name| std::env::var(name))
}

fn read_with_env(
    text: &str,
    syntax: Syntax,
    lookup: impl Fn(&str) -> std::result::Result<String, VarError>,
) -> Result<Config> {
    let error = |message: String| Error::Config(format!("redisson {syntax} config: {message}"));
    // These messages name variables, never values.
    let resolved = env::substitute(text, lookup).map_err(error)?;
    let quiet = |message: String| error(resolved.scrub(&human::without_values(&message)));
    let file = parse(resolved.text(), syntax).map_err(quiet)?;
    let config = file.into_config().map_err(quiet)?;
    config.validate().map_err(|e| match e {
        Error::Config(message) => Error::Config(resolved.scrub(&message)),
        other => other,
    })?;
    Ok(config)
}

/// Parses the text; an error names the key it is about (`singleServerConfig.timeout`).
fn parse(text: &str, syntax: Syntax) -> std::result::Result<RedissonFile, String> {
    let mut path = String::new();
    let parsed = match syntax {
        Syntax::Json => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut deserializer)
                .map_err(|e| {
                    path = e.path().to_string();
                    e.into_inner()
                })
                .and_then(|file| deserializer.end().map(|()| file))
                .map_err(|e| e.to_string())
        }
        #[cfg(feature = "yaml")]
        Syntax::Yaml => {
            // No snippet: the offending line may hold a substituted secret.
            let options = serde_saphyr::options! { with_snippet: false };
            serde_saphyr::with_deserializer_from_str_with_options(text, options, |deserializer| {
                serde_path_to_error::deserialize(deserializer).map_err(|e| {
                    path = e.path().to_string();
                    e.into_inner()
                })
            })
            .map_err(|e| e.to_string())
        }
    };
    // `Tagged` reads its value as element 0 of a pair; the user wrote no list.
    let path = path.replace("retryDelay[0]", "retryDelay");
    parsed.map_err(|message| match path.as_str() {
        "" | "." => message,
        path => format!("{path}: {message}"),
    })
}

/// The part of Redisson's config file this crate reads; other keys are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RedissonFile {
    single_server_config: Option<ServerSection>,
    cluster_servers_config: Option<ServerSection>,
    sentinel_servers_config: Option<ServerSection>,
    lock_watchdog_timeout: Option<Whole>,
    fair_lock_wait_timeout: Option<Whole>,
    lock_watchdog_batch_size: Option<Whole>,
    check_lock_synced_slaves: Option<Flag>,
    slaves_sync_timeout: Option<Whole>,
    // Redisson 4 moved these to the top; the section's are its deprecated fallback.
    username: Option<String>,
    password: Option<String>,
    ssl_truststore: Option<String>,
    ssl_truststore_password: Option<IgnoredAny>,
    ssl_keystore: Option<String>,
    ssl_keystore_password: Option<IgnoredAny>,
}

/// The keys read from `singleServerConfig`, `clusterServersConfig` and
/// `sentinelServersConfig`; each section uses those of its topology.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerSection {
    address: Option<String>,
    node_addresses: Option<Vec<String>>,
    sentinel_addresses: Option<Vec<String>>,
    master_name: Option<String>,
    database: Option<Whole>,
    username: Option<String>,
    password: Option<String>,
    connect_timeout: Option<Whole>,
    timeout: Option<Whole>,
    retry_attempts: Option<Whole>,
    retry_interval: Option<Whole>,
    retry_delay: Option<Tagged<DelayStrategy>>,
    ssl_truststore: Option<String>,
    ssl_truststore_password: Option<IgnoredAny>,
    ssl_keystore: Option<String>,
    ssl_keystore_password: Option<IgnoredAny>,
}

/// Redisson 4's `retryDelay`: a `DelayStrategy` object, its class in a YAML tag or
/// a JSON `class` key, its durations in ISO-8601 (`PT1.5S`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DelayStrategy {
    class: Option<String>,
    delay: Option<IsoDuration>,
    base_delay: Option<IsoDuration>,
    max_delay: Option<IsoDuration>,
}

#[derive(Clone, Copy)]
enum Topology {
    Single,
    Cluster,
    Sentinel,
}

impl Topology {
    fn section(self) -> &'static str {
        match self {
            Topology::Single => "singleServerConfig",
            Topology::Cluster => "clusterServersConfig",
            Topology::Sentinel => "sentinelServersConfig",
        }
    }
}

impl RedissonFile {
    fn into_config(self) -> std::result::Result<Config, String> {
        let sections: Vec<(Topology, ServerSection)> = [
            (Topology::Single, self.single_server_config),
            (Topology::Cluster, self.cluster_servers_config),
            (Topology::Sentinel, self.sentinel_servers_config),
        ]
        .into_iter()
        .filter_map(|(topology, section)| section.map(|s| (topology, s)))
        .collect();
        if sections.len() > 1 {
            let names: Vec<&str> = sections.iter().map(|(t, _)| t.section()).collect();
            return Err(format!("{} are exclusive; keep one", names.join(" and ")));
        }
        let mut config = Config::default();
        if let Some((topology, section)) = sections.into_iter().next() {
            section.apply(topology, &mut config)?;
        }
        // Applied after the section's, so that they win, as in Redisson 4.
        Access {
            username: self.username,
            password: self.password,
            ssl_truststore: self.ssl_truststore,
            ssl_truststore_password: self.ssl_truststore_password,
            ssl_keystore: self.ssl_keystore,
            ssl_keystore_password: self.ssl_keystore_password,
        }
        .apply("", &mut config)?;
        if let Some(ms) = self.lock_watchdog_timeout {
            config.lock_watchdog_timeout = ms.millis("lockWatchdogTimeout")?;
        }
        if let Some(ms) = self.fair_lock_wait_timeout {
            config.fair_lock_wait_timeout = ms.millis("fairLockWaitTimeout")?;
        }
        if let Some(size) = self.lock_watchdog_batch_size {
            let size = size.non_negative("lockWatchdogBatchSize")?;
            config.lock_watchdog_batch_size = usize::try_from(size)
                .map_err(|_| format!("lockWatchdogBatchSize is too large, got {size}"))?;
        }
        // Redisson's `true` (its default) is this crate's default: one replica
        // when the server has any.
        if let Some(Flag(false)) = self.check_lock_synced_slaves {
            config.replica_sync = Some(0);
        }
        if let Some(ms) = self.slaves_sync_timeout {
            config.replica_sync_timeout = ms.millis("slavesSyncTimeout")?;
        }
        Ok(config)
    }
}

impl ServerSection {
    fn apply(mut self, topology: Topology, config: &mut Config) -> std::result::Result<(), String> {
        let section = topology.section();
        self.apply_addresses(topology, config)?;
        self.apply_database(topology, config)?;
        self.apply_timing(section, config)?;
        Access {
            username: self.username,
            password: self.password,
            ssl_truststore: self.ssl_truststore,
            ssl_truststore_password: self.ssl_truststore_password,
            ssl_keystore: self.ssl_keystore,
            ssl_keystore_password: self.ssl_keystore_password,
        }
        .apply(&format!("{section}."), config)
    }

    /// Where the servers are: the address, the cluster's nodes, or the
    /// sentinels and the master's name.
    fn apply_addresses(
        &mut self,
        topology: Topology,
        config: &mut Config,
    ) -> std::result::Result<(), String> {
        let section = topology.section();
        let key = |name: &str| format!("{section}.{name}");
        match topology {
            Topology::Single => {
                if let Some(address) = self.address.take() {
                    config.address = address;
                }
            }
            Topology::Cluster => {
                config.cluster_nodes = self.node_addresses.take().unwrap_or_default();
                if config.cluster_nodes.is_empty() {
                    return Err(format!(
                        "{} needs at least one address",
                        key("nodeAddresses")
                    ));
                }
            }
            Topology::Sentinel => {
                config.sentinel_addresses = self.sentinel_addresses.take().unwrap_or_default();
                if config.sentinel_addresses.is_empty() {
                    return Err(format!(
                        "{} needs at least one address",
                        key("sentinelAddresses")
                    ));
                }
                config.sentinel_master_name = Some(
                    self.master_name
                        .take()
                        .ok_or_else(|| format!("{} is required", key("masterName")))?,
                );
            }
        }
        Ok(())
    }

    /// The database, which every address given must agree with (Redisson
    /// ignores an address's `/N`; see `Database::check`).
    fn apply_database(
        &self,
        topology: Topology,
        config: &mut Config,
    ) -> std::result::Result<(), String> {
        let section = topology.section();
        let key = |name: &str| format!("{section}.{name}");
        // Redisson 4 reads a cluster section's `database` too (Valkey 9 clusters
        // have numbered databases); the client checks at connect that the
        // cluster serves it.
        let database_given = self.database.is_some();
        if let Some(db) = self.database {
            config.database = db.non_negative(&key("database"))?;
        }
        let in_force = Database {
            key: key("database"),
            number: config.database,
            given: database_given,
        };
        match topology {
            Topology::Single => in_force.check(&key("address"), &config.address)?,
            Topology::Cluster => {
                for node in &config.cluster_nodes {
                    in_force.check(&key("nodeAddresses"), node)?;
                }
            }
            Topology::Sentinel => {
                for sentinel in &config.sentinel_addresses {
                    in_force.check(&key("sentinelAddresses"), sentinel)?;
                }
            }
        }
        Ok(())
    }

    /// Timeouts and retries; Redisson 3's `retryInterval` or Redisson 4's
    /// `retryDelay`, not both.
    fn apply_timing(
        &mut self,
        section: &str,
        config: &mut Config,
    ) -> std::result::Result<(), String> {
        let key = |name: &str| format!("{section}.{name}");
        if let Some(ms) = self.connect_timeout {
            config.connect_timeout = ms.millis(&key("connectTimeout"))?;
        }
        if let Some(ms) = self.timeout {
            config.timeout = ms.millis(&key("timeout"))?;
        }
        if let Some(attempts) = self.retry_attempts {
            let attempts = attempts.non_negative(&key("retryAttempts"))?;
            config.retry_attempts = u32::try_from(attempts)
                .ok()
                .filter(|a| *a <= MAX_RETRY_ATTEMPTS)
                .ok_or_else(|| {
                    format!(
                        "{} must be at most {MAX_RETRY_ATTEMPTS}, got {attempts}",
                        key("retryAttempts")
                    )
                })?;
        }
        match (self.retry_interval, self.retry_delay.take()) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{} (Redisson 3) and {} (Redisson 4) are both set; keep one",
                    key("retryInterval"),
                    key("retryDelay")
                ));
            }
            (Some(ms), None) => config.retry_interval = ms.millis(&key("retryInterval"))?,
            (None, Some(delay)) => {
                config.retry_interval = longest_pause(&key("retryDelay"), delay)?
            }
            (None, None) => {}
        }
        Ok(())
    }
}

/// The database a section makes Redisson use: its `database` key, 0 without it.
struct Database {
    key: String,
    number: i64,
    given: bool,
}

impl Database {
    /// Refuses an address (of key `address_key`) whose `/N` is not the database
    /// in force. Redisson reads no database from an address (its `RedisURI`
    /// keeps scheme, user info, host and port), so the file means the `database`
    /// key to every Java client reading it: reading the `/N` here instead would
    /// put this client's locks in another database than theirs.
    fn check(&self, address_key: &str, address: &str) -> std::result::Result<(), String> {
        let Some(named) = address_database(address).filter(|&n| n != self.number) else {
            return Ok(());
        };
        let shown = format!("{address_key} '{}'", redact_address(address));
        Err(if self.given {
            format!(
                "{} (Redisson uses {} and ignores the address's)",
                database_conflict(&shown, named, &self.key, self.number),
                self.key
            )
        } else {
            format!(
                "{shown} names database {named}, but Redisson ignores an address's database \
                 and, without {key}, uses database 0: Java clients reading this file lock \
                 in database 0. Add `database: {named}` to the section, or drop the \
                 /{named}",
                key = self.key
            )
        })
    }
}

/// Credentials and certificate stores, read at the top level (Redisson 4) and in
/// the server section (Redisson 3, deprecated in 4).
struct Access {
    username: Option<String>,
    password: Option<String>,
    ssl_truststore: Option<String>,
    ssl_truststore_password: Option<IgnoredAny>,
    ssl_keystore: Option<String>,
    ssl_keystore_password: Option<IgnoredAny>,
}

impl Access {
    /// Sets what is present; `prefix` is the section (`"singleServerConfig."`) or empty.
    fn apply(self, prefix: &str, config: &mut Config) -> std::result::Result<(), String> {
        if self.username.is_some() {
            config.username = self.username;
        }
        if self.password.is_some() {
            config.password = self.password;
        }
        for (name, password) in [
            ("sslTruststorePassword", &self.ssl_truststore_password),
            ("sslKeystorePassword", &self.ssl_keystore_password),
        ] {
            if password.is_some() {
                return Err(format!(
                    "{prefix}{name} is set, but only PEM files without a password are read \
                     (JKS and PKCS12 stores are not): convert the store to PEM and remove \
                     the password"
                ));
            }
        }
        if let Some(url) = self.ssl_truststore {
            config.tls.ca_certificate = Some(store_path(&format!("{prefix}sslTruststore"), &url)?);
        }
        if let Some(url) = self.ssl_keystore {
            // One PEM file holding the certificate chain and its private key.
            let path = store_path(&format!("{prefix}sslKeystore"), &url)?;
            config.tls.client_certificate = Some(path.clone());
            config.tls.client_key = Some(path);
        }
        Ok(())
    }
}

/// The longest pause this strategy makes, which is what
/// [`Config::retry_interval`] is: `delay` for `ConstantDelay`, `maxDelay` for
/// the jitter strategies (their `baseDelay` is checked and not used: the
/// client's own back-off starts small).
fn longest_pause(key: &str, delay: Tagged<DelayStrategy>) -> std::result::Result<Duration, String> {
    const PACKAGE: &str = "org.redisson.config.";
    let Tagged(strategy, tag) = delay;
    let class = tag
        .as_deref()
        .map(|tag| {
            tag.trim_start_matches("tag:yaml.org,2002:")
                .trim_start_matches('!')
        })
        .or(strategy.class.as_deref())
        .ok_or_else(|| {
            format!(
                "{key} needs its strategy class, as YAML writes it: \
                 !<org.redisson.config.EqualJitterDelay> {{baseDelay: PT1S, maxDelay: PT2S}}"
            )
        })?;
    let name = class.strip_prefix(PACKAGE).unwrap_or("");
    match name {
        "ConstantDelay" => strategy
            .delay
            .map(|d| d.0)
            .ok_or_else(|| format!("{key}: ConstantDelay needs delay (e.g. PT1S)")),
        "EqualJitterDelay" | "FullJitterDelay" | "DecorrelatedJitterDelay" => {
            match (strategy.base_delay, strategy.max_delay) {
                (Some(_), Some(max)) => Ok(max.0),
                _ => Err(format!(
                    "{key}: {name} needs baseDelay and maxDelay (e.g. PT2S)"
                )),
            }
        }
        _ => Err(format!(
            "{key}: cannot map the delay strategy {class}; use {PACKAGE}ConstantDelay, \
             EqualJitterDelay, FullJitterDelay or DecorrelatedJitterDelay"
        )),
    }
}

/// The file named by `sslTruststore` or `sslKeystore`: a `file:` URL (as Redisson
/// writes them: `file:ca.pem`, `file:/etc/redis/ca.pem`, `file:///etc/redis/ca.pem`)
/// or a plain path. Relative paths are relative to the working directory, as in Java.
fn store_path(key: &str, url: &str) -> std::result::Result<PathBuf, String> {
    let path = if let Some(rest) = url.strip_prefix("file:") {
        let path = match rest.strip_prefix("//") {
            Some(authority_and_path) => {
                let slash = authority_and_path
                    .find('/')
                    .unwrap_or(authority_and_path.len());
                let (host, path) = authority_and_path.split_at(slash);
                if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                    return Err(format!(
                        "{key}: {} names another host; give a local file",
                        redact_address(url)
                    ));
                }
                path
            }
            None => rest,
        };
        percent_decode(path)
            .ok_or_else(|| format!("{key}: {} is not a valid file URL", redact_address(url)))?
    } else {
        let scheme_len = url
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .filter(|&end| url[end..].starts_with(':'))
            .unwrap_or(0);
        // One letter before ':' is a Windows drive, not a scheme.
        if scheme_len > 1 {
            return Err(format!(
                "{key}: only file: URLs and plain paths are read, not {}: URLs",
                &url[..scheme_len]
            ));
        }
        url.to_owned()
    };
    if path.is_empty() {
        return Err(format!("{key} is empty"));
    }
    Ok(PathBuf::from(path))
}

/// Decodes `%XX` escapes; `None` when one is malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            bytes.push(crate::numeral::hex_byte(tail.get(..2)?)?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

// A value and the YAML tag written on it, if any: `serde_saphyr::Tagged` with the
// `yaml` feature. JSON has no tags, so without it the tag is always `None`.
#[cfg(feature = "yaml")]
use serde_saphyr::Tagged;

#[cfg(not(feature = "yaml"))]
struct Tagged<T>(T, Option<String>);

#[cfg(not(feature = "yaml"))]
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tagged<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        T::deserialize(deserializer).map(|value| Tagged(value, None))
    }
}

/// A whole number as Redisson's files hold them: an integer, or a string of one
/// (Jackson and SnakeYAML both read `"3000"` into an `int`, which matters for
/// quoted `${...}` references).
#[derive(Clone, Copy)]
struct Whole(i64);

impl Whole {
    fn non_negative(self, key: &str) -> std::result::Result<i64, String> {
        if self.0 < 0 {
            return Err(format!("{key} must not be negative, got {}", self.0));
        }
        Ok(self.0)
    }

    /// The number as milliseconds, Redisson's unit for every time in the file.
    fn millis(self, key: &str) -> std::result::Result<Duration, String> {
        self.non_negative(key)
            .map(|ms| Duration::from_millis(ms.unsigned_abs()))
    }
}

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct WholeVisitor;

        impl Visitor<'_> for WholeVisitor {
            type Value = Whole;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Whole, E> {
                Ok(Whole(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Whole, E> {
                i64::try_from(v)
                    .map(Whole)
                    .map_err(|_| E::invalid_value(Unexpected::Other("too large an integer"), &self))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Whole, E> {
                v.trim()
                    .parse()
                    .map(Whole)
                    .map_err(|_| E::invalid_value(Unexpected::Other("a string"), &self))
            }
        }

        deserializer.deserialize_any(WholeVisitor)
    }
}

/// A boolean as Redisson's files hold them: `true`/`false`, or a string of
/// one (Jackson and SnakeYAML both read `"false"` into a `boolean`, which
/// matters for quoted `${...}` references).
#[derive(Clone, Copy)]
struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct FlagVisitor;

        impl Visitor<'_> for FlagVisitor {
            type Value = Flag;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true or false")
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Flag, E> {
                Ok(Flag(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Flag, E> {
                match v.trim().to_ascii_lowercase().as_str() {
                    "true" => Ok(Flag(true)),
                    "false" => Ok(Flag(false)),
                    _ => Err(E::invalid_value(Unexpected::Other("a string"), &self)),
                }
            }
        }

        deserializer.deserialize_any(FlagVisitor)
    }
}

/// A `java.time.Duration` as Redisson writes it: ISO-8601, `PT1S`, `PT0.1S`, `PT2M`.
struct IsoDuration(Duration);

impl<'de> Deserialize<'de> for IsoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct IsoVisitor;

        impl Visitor<'_> for IsoVisitor {
            type Value = IsoDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ISO-8601 duration such as PT1.5S")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<IsoDuration, E> {
                parse_iso_duration(v)
                    .map(IsoDuration)
                    .ok_or_else(|| E::invalid_value(Unexpected::Other("a string"), &self))
            }
        }

        deserializer.deserialize_str(IsoVisitor)
    }
}

/// Parses what Java's `Duration.parse` reads, `P[nD][T[nH][nM][n[.f]S]]` (letters
/// in either case), except negative amounts, which make no sense for a delay.
fn parse_iso_duration(text: &str) -> Option<Duration> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total = Duration::ZERO;
    let mut any = false;
    if !days.is_empty() {
        let days: u64 = crate::numeral::decimal(days.strip_suffix('D')?)?;
        total = total.checked_add(Duration::from_secs(days.checked_mul(86_400)?))?;
        any = true;
    }
    let mut time = time.unwrap_or("");
    for (unit, seconds) in [('H', 3_600), ('M', 60)] {
        if let Some(end) = time.find(unit) {
            let amount: u64 = crate::numeral::decimal(&time[..end])?;
            total = total.checked_add(Duration::from_secs(amount.checked_mul(seconds)?))?;
            time = &time[end + 1..];
            any = true;
        }
    }
    if !time.is_empty() {
        let seconds = time.strip_suffix('S')?;
        let (whole, fraction) = seconds.split_once(['.', ',']).unwrap_or((seconds, ""));
        if fraction.len() > 9
            || (!fraction.is_empty() && crate::numeral::decimal::<u32>(fraction).is_none())
        {
            return None;
        }
        let nanos = format!("{fraction:0<9}").parse().ok()?;
        total = total.checked_add(Duration::new(crate::numeral::decimal(whole)?, nanos))?;
        any = true;
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations_parse_as_java_reads_them() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("PT1S", ms(1_000)),
            ("PT0.1S", ms(100)),
            ("pt1,5s", ms(1_500)),
            ("PT2M", ms(120_000)),
            ("PT1H2M3.004S", ms(3_723_004)),
            ("P1D", ms(86_400_000)),
            ("P1DT1S", ms(86_401_000)),
            ("PT0S", Duration::ZERO),
            ("PT0.000000001S", Duration::from_nanos(1)),
        ] {
            assert_eq!(parse_iso_duration(text), Some(expected), "{text}");
        }
        for bad in [
            "",
            "P",
            "PT",
            "P1DT",
            "1S",
            "PT-1S",
            "-PT1S",
            "PT1",
            "PT1.S1",
            "PT1M1H",
            "PT1.0000000001S",
            "PT S",
            "P1W",
            "PT1SS",
            "PT+1S",
        ] {
            assert_eq!(parse_iso_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn store_urls_and_paths_become_paths() {
        for (url, path) in [
            ("file:ca.pem", "ca.pem"),
            ("file:/etc/redis/ca.pem", "/etc/redis/ca.pem"),
            ("file:///etc/redis/ca.pem", "/etc/redis/ca.pem"),
            ("file://localhost/etc/ca.pem", "/etc/ca.pem"),
            ("file:/etc/my%20certs/ca.pem", "/etc/my certs/ca.pem"),
            ("/etc/redis/ca.pem", "/etc/redis/ca.pem"),
            ("certs/client.pem", "certs/client.pem"),
            ("C:\\certs\\ca.pem", "C:\\certs\\ca.pem"),
        ] {
            assert_eq!(store_path("k", url).unwrap(), PathBuf::from(path), "{url}");
        }
        for bad in [
            "classpath:ca.pem",
            "https://example.com/ca.pem",
            "file://elsewhere/ca.pem",
            "file:/bad%zz",
            "file:",
            "",
        ] {
            let err = store_path("singleServerConfig.sslTruststore", bad).unwrap_err();
            assert!(err.contains("sslTruststore"), "{err}");
        }
    }

    /// Reads YAML with a fixed environment, so that tests do not touch the process's.
    #[cfg(feature = "yaml")]
    fn yaml(text: &str) -> Result<Config> {
        read_with_env(text, Syntax::Yaml, |name| match name {
            "TEST_REDIS_HOST" => Ok("10.0.0.7".into()),
            "TEST_EMPTY" => Ok(String::new()),
            _ => Err(VarError::NotPresent),
        })
    }

    #[cfg(feature = "yaml")]
    fn yaml_err(text: &str) -> String {
        let err = yaml(text).unwrap_err();
        assert!(err.is_config(), "{err}");
        err.to_string()
    }

    /// A single-server file as Redisson 4's `toYAML` writes it (tags and all).
    #[cfg(feature = "yaml")]
    const REDISSON4_SINGLE: &str = r#"---
singleServerConfig:
  idleConnectionTimeout: 10000
  connectTimeout: 10000
  timeout: 3000
  retryAttempts: 4
  retryDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}
  reconnectionDelay: !<org.redisson.config.EqualJitterDelay> {baseDelay: PT0.1S, maxDelay: PT10S}
  password: null
  subscriptionsPerConnection: 5
  clientName: null
  address: "redis://127.0.0.1:6379"
  subscriptionConnectionMinimumIdleSize: 1
  subscriptionConnectionPoolSize: 50
  connectionMinimumIdleSize: 24
  connectionPoolSize: 64
  database: 0
  dnsMonitoringInterval: 5000
threads: 16
nettyThreads: 32
codec: !<org.redisson.codec.Kryo5Codec> {}
transportMode: "NIO"
"#;

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_reads_redisson4_single_layout_with_its_tags() {
        let c = yaml(REDISSON4_SINGLE).unwrap();
        let expected = Config {
            address: "redis://127.0.0.1:6379".into(),
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(3),
            retry_attempts: 4,
            retry_interval: Duration::from_secs(2),
            ..Config::default()
        };
        assert_eq!(c, expected);
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_reads_redisson3_layout_with_retry_interval() {
        let c = yaml(
            "singleServerConfig:\n  address: redis://h:6380\n  username: app\n  password: pw\n  \
             database: 2\n  retryInterval: 700\n  timeout: \"2500\"\n\
             lockWatchdogTimeout: 20000\nfairLockWaitTimeout: 60000\n\
             codec: !<org.redisson.codec.JsonJacksonCodec> {}\n",
        )
        .unwrap();
        assert_eq!(c.address, "redis://h:6380");
        assert_eq!(c.username.as_deref(), Some("app"));
        assert_eq!(c.password.as_deref(), Some("pw"));
        assert_eq!(c.database, 2);
        assert_eq!(c.retry_interval, Duration::from_millis(700));
        assert_eq!(c.timeout, Duration::from_millis(2_500));
        assert_eq!(c.lock_watchdog_timeout, Duration::from_secs(20));
        assert_eq!(c.fair_lock_wait_timeout, Duration::from_secs(60));
    }

    #[test]
    fn the_lock_keys_at_the_top_are_read() {
        let c = Config::from_json(
            r#"{"singleServerConfig": {"address": "redis://h:6379"},
                "lockWatchdogBatchSize": 250, "checkLockSyncedSlaves": false,
                "slavesSyncTimeout": "400"}"#,
        )
        .unwrap();
        assert_eq!(c.lock_watchdog_batch_size, 250);
        assert_eq!(c.replica_sync, Some(0));
        assert_eq!(c.replica_sync_timeout, Duration::from_millis(400));
        // Redisson's default, `true`: the crate's default, sync where replicas are.
        let c = Config::from_json(r#"{"checkLockSyncedSlaves": "true"}"#).unwrap();
        assert_eq!(c.replica_sync, None);
        for (text, key) in [
            (
                r#"{"checkLockSyncedSlaves": "yes"}"#,
                "checkLockSyncedSlaves",
            ),
            (r#"{"slavesSyncTimeout": -1}"#, "slavesSyncTimeout"),
            (
                r#"{"lockWatchdogBatchSize": 0}"#,
                "lock_watchdog_batch_size",
            ),
            (
                r#"{"lockWatchdogBatchSize": 100000}"#,
                "lock_watchdog_batch_size",
            ),
        ] {
            let err = Config::from_json(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_reads_redisson_cluster_layout() {
        let c = yaml(
            r#"clusterServersConfig:
  scanInterval: 1000
  readMode: "SLAVE"
  loadBalancer: !<org.redisson.connection.balancer.RoundRobinLoadBalancer> {}
  failedSlaveNodeDetector: !<org.redisson.client.FailedConnectionDetector> {}
  nodeAddresses:
  - "redis://127.0.0.1:7001"
  - "redis://127.0.0.1:7002"
  password: secret
  database: 3
  retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT0.5S}
codec: !<org.redisson.codec.Kryo5Codec> {}
"#,
        )
        .unwrap();
        assert_eq!(
            c.cluster_nodes,
            vec!["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"]
        );
        assert_eq!(c.password.as_deref(), Some("secret"));
        assert_eq!(c.database, 3, "Redisson 4 reads a cluster's database");
        assert_eq!(c.retry_interval, Duration::from_millis(500));
        let err = yaml_err("clusterServersConfig:\n  scanInterval: 1000\n");
        assert!(err.contains("clusterServersConfig.nodeAddresses"), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_reads_redisson_sentinel_layout() {
        let c = yaml(
            r#"sentinelServersConfig:
  sentinelAddresses:
  - "redis://127.0.0.1:26379"
  - "redis://127.0.0.1:26389"
  masterName: "mymaster"
  database: 1
  checkSentinelsList: false
threads: 16
"#,
        )
        .unwrap();
        assert_eq!(
            c.sentinel_addresses,
            vec!["redis://127.0.0.1:26379", "redis://127.0.0.1:26389"]
        );
        assert_eq!(c.sentinel_master_name.as_deref(), Some("mymaster"));
        assert_eq!(c.database, 1);
        let err = yaml_err("sentinelServersConfig:\n  sentinelAddresses: [redis://s:1]\n");
        assert!(err.contains("sentinelServersConfig.masterName"), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_retry_delay_strategies_map_to_their_longest_pause() {
        for (delay, expected) in [
            ("!<org.redisson.config.ConstantDelay> {delay: PT0.25S}", 250),
            (
                "!<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}",
                2_000,
            ),
            (
                "!<org.redisson.config.FullJitterDelay> {baseDelay: PT0.1S, maxDelay: PT3S}",
                3_000,
            ),
            (
                "!<org.redisson.config.DecorrelatedJitterDelay> {baseDelay: PT1S, maxDelay: PT1M}",
                60_000,
            ),
            // Redisson 4 rewrites !<x> to !!x before parsing, so both spellings work there.
            ("!!org.redisson.config.ConstantDelay {delay: PT4S}", 4_000),
            (
                "!<org.redisson.config.EqualJitterDelay>\n    baseDelay: PT1S\n    maxDelay: PT5S",
                5_000,
            ),
        ] {
            let c = yaml(&format!("singleServerConfig:\n  retryDelay: {delay}\n")).unwrap();
            assert_eq!(c.retry_interval, Duration::from_millis(expected), "{delay}");
        }
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_refuses_retry_delays_it_cannot_map() {
        for delay in [
            "!<com.example.FibonacciDelay> {maxDelay: PT2S}",
            "!<org.redisson.config.EqualJitterDelay> {maxDelay: PT2S}",
            "!<org.redisson.config.ConstantDelay> {}",
            "{baseDelay: PT1S, maxDelay: PT2S}",
            "!<org.redisson.config.ConstantDelay> {delay: 1000}",
            "!<org.redisson.config.ConstantDelay> {delay: PT-1S}",
            "1500",
        ] {
            let err = yaml_err(&format!("singleServerConfig:\n  retryDelay: {delay}\n"));
            assert!(
                err.contains("singleServerConfig.retryDelay"),
                "{delay}: {err}"
            );
        }
        let err = yaml_err(
            "singleServerConfig:\n  retryInterval: 1500\n  \
             retryDelay: !<org.redisson.config.ConstantDelay> {delay: PT1S}\n",
        );
        assert!(
            err.contains("retryInterval") && err.contains("keep one"),
            "{err}"
        );
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_substitutes_environment_variables_before_parsing() {
        let c = yaml(
            "singleServerConfig:\n  address: \"redis://${TEST_REDIS_HOST}:${TEST_UNSET_PORT:-6390}\"\n  \
             password: \"${TEST_EMPTY}\"\n  timeout: ${TEST_UNSET_TIMEOUT:-1200}\n",
        )
        .unwrap();
        assert_eq!(c.address, "redis://10.0.0.7:6390");
        assert_eq!(c.password.as_deref(), Some(""));
        assert_eq!(c.timeout, Duration::from_millis(1_200));
        let err = yaml_err("singleServerConfig:\n  password: ${TEST_REDIS_PASSWORD}\n");
        assert!(err.contains("TEST_REDIS_PASSWORD"), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_substitution_reads_the_process_environment() {
        // A name no other test or process uses, set once: nothing else reads it.
        let name = "REDISSON_LOCKS_TEST_YAML_DB_3F9A";
        std::env::set_var(name, "5");
        let c = Config::from_yaml(&format!("singleServerConfig:\n  database: ${{{name}}}\n"));
        std::env::remove_var(name);
        assert_eq!(c.unwrap().database, 5);
        let err = Config::from_yaml(&format!("singleServerConfig:\n  database: ${{{name}}}\n"))
            .unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_bad_values_are_config_errors_naming_the_key() {
        for (text, key) in [
            (
                "singleServerConfig:\n  timeout: soon\n",
                "singleServerConfig.timeout",
            ),
            (
                "singleServerConfig:\n  timeout: \"3s\"\n",
                "singleServerConfig.timeout",
            ),
            (
                "singleServerConfig:\n  timeout: -5\n",
                "singleServerConfig.timeout",
            ),
            (
                "singleServerConfig:\n  timeout: 1.5\n",
                "singleServerConfig.timeout",
            ),
            (
                "singleServerConfig:\n  connectTimeout: [1]\n",
                "singleServerConfig.connectTimeout",
            ),
            (
                "singleServerConfig:\n  database: -1\n",
                "singleServerConfig.database",
            ),
            (
                "singleServerConfig:\n  retryAttempts: -1\n",
                "singleServerConfig.retryAttempts",
            ),
            (
                "singleServerConfig:\n  retryAttempts: 5000\n",
                "singleServerConfig.retryAttempts",
            ),
            (
                "singleServerConfig:\n  address: [a]\n",
                "singleServerConfig.address",
            ),
            (
                "clusterServersConfig:\n  nodeAddresses: redis://a:1\n",
                "clusterServersConfig.nodeAddresses",
            ),
            ("lockWatchdogTimeout: 1e3\n", "lockWatchdogTimeout"),
            ("fairLockWaitTimeout: later\n", "fairLockWaitTimeout"),
        ] {
            let err = yaml_err(text);
            assert!(err.contains(key), "{text}: {err}");
        }
        // Values the layout accepts but validation refuses.
        for text in [
            "singleServerConfig:\n  address: 127.0.0.1:6379\n",
            "singleServerConfig:\n  timeout: 0\n",
            "lockWatchdogTimeout: 10\n",
            "not: [valid",
        ] {
            yaml_err(text);
        }
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_with_two_topologies_is_refused_naming_both() {
        let err = yaml_err(
            "singleServerConfig:\n  address: redis://a:1\n\
             clusterServersConfig:\n  nodeAddresses: [redis://b:2]\n",
        );
        assert!(
            err.contains("singleServerConfig and clusterServersConfig are exclusive"),
            "{err}"
        );
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_maps_pem_stores_to_tls_and_refuses_store_passwords() {
        let c = yaml(
            "singleServerConfig:\n  sslTruststore: file:///etc/redis/ca.pem\n  \
             sslKeystore: certs/client.pem\n  sslTruststorePassword: null\n",
        )
        .unwrap();
        assert_eq!(
            c.tls.ca_certificate,
            Some(PathBuf::from("/etc/redis/ca.pem"))
        );
        assert_eq!(
            c.tls.client_certificate,
            Some(PathBuf::from("certs/client.pem"))
        );
        assert_eq!(c.tls.client_key, Some(PathBuf::from("certs/client.pem")));
        for (password, key) in [
            ("sslTruststorePassword: changeit", "sslTruststorePassword"),
            ("sslKeystorePassword: \"\"", "sslKeystorePassword"),
        ] {
            let err = yaml_err(&format!(
                "singleServerConfig:\n  sslTruststore: file:ca.jks\n  {password}\n"
            ));
            assert!(err.contains(key) && err.contains("PEM"), "{err}");
            assert!(
                !err.contains("changeit"),
                "the password is not repeated: {err}"
            );
        }
        let err = yaml_err("singleServerConfig:\n  sslTruststore: classpath:ca.pem\n");
        assert!(err.contains("singleServerConfig.sslTruststore"), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_reads_redisson4_top_level_credentials_and_stores_over_the_sections() {
        let c = yaml(
            "username: app\npassword: top\nsslTruststore: file:/etc/redis/ca.pem\n\
             sslKeystore: file:/etc/redis/client.pem\n\
             singleServerConfig:\n  password: section\n  sslTruststore: file:old.pem\n",
        )
        .unwrap();
        assert_eq!(c.username.as_deref(), Some("app"));
        assert_eq!(c.password.as_deref(), Some("top"));
        assert_eq!(
            c.tls.ca_certificate,
            Some(PathBuf::from("/etc/redis/ca.pem"))
        );
        assert_eq!(
            c.tls.client_key,
            Some(PathBuf::from("/etc/redis/client.pem"))
        );
        let c = yaml("singleServerConfig:\n  password: section\n").unwrap();
        assert_eq!(c.password.as_deref(), Some("section"));
        let err = yaml_err("sslKeystore: file:k.p12\nsslKeystorePassword: secret\n");
        assert!(err.contains(": sslKeystorePassword is set"), "{err}");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_file_is_read_from_disk() {
        let dir = std::env::temp_dir().join(format!("redisson-locks-yaml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("redisson.yaml");
        std::fs::write(&path, REDISSON4_SINGLE).unwrap();
        let c = Config::from_yaml_file(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(c.unwrap().retry_interval, Duration::from_secs(2));
        let err = Config::from_yaml_file(dir.join("missing.yaml")).unwrap_err();
        assert!(
            err.is_config() && err.to_string().contains("missing.yaml"),
            "{err}"
        );
    }

    #[test]
    fn json_reads_the_same_keys_with_jacksons_class_key() {
        let c = read_with_env(
            r#"{"singleServerConfig":{"address":"redis://${HOST:-h}:1",
                "retryDelay":{"class":"org.redisson.config.EqualJitterDelay",
                              "baseDelay":"PT1S","maxDelay":"PT3S"},
                "sslTruststore":"file:ca.pem","timeout":"800"}}"#,
            Syntax::Json,
            |_| Err(VarError::NotPresent),
        )
        .unwrap();
        assert_eq!(c.address, "redis://h:1");
        assert_eq!(c.retry_interval, Duration::from_secs(3));
        assert_eq!(c.timeout, Duration::from_millis(800));
        assert_eq!(c.tls.ca_certificate, Some(PathBuf::from("ca.pem")));
        let err = Config::from_json(r#"{"singleServerConfig":{"timeout":"soon"}}"#).unwrap_err();
        assert!(
            err.to_string().contains("singleServerConfig.timeout"),
            "{err}"
        );
    }

    /// An environment with secrets, for the tests that check they stay out.
    fn secret_env(name: &str) -> std::result::Result<String, VarError> {
        match name {
            "PW" => Ok("S3cr3t-env".into()),
            "NUM" => Ok("987654321".into()),
            "URL" => Ok("redis://app:S3cr3t-env@h:notaport".into()),
            "HOST" => Ok("S3cr3t-host".into()),
            "QUOTE" => Ok("S3cr3t\"env".into()),
            _ => Err(VarError::NotPresent),
        }
    }

    /// Asserts that reading `text` fails with an error that holds none of
    /// [`secret_env`]'s values; returns the message.
    fn secret_free_error(text: &str, syntax: Syntax) -> String {
        let err = read_with_env(text, syntax, secret_env).unwrap_err();
        assert!(err.is_config(), "{err}");
        let message = err.to_string();
        for secret in ["S3cr3t", "987654321", "env\\\""] {
            assert!(!message.contains(secret), "{text}: {message}");
        }
        message
    }

    #[test]
    fn json_errors_never_repeat_a_value_from_the_environment() {
        for (json, says) in [
            (
                r#"{"singleServerConfig":{"timeout":"${PW}"}}"#,
                "singleServerConfig.timeout",
            ),
            (r#"{"singleServerConfig":{"timeout":${PW}}}"#, "line 1"),
            (
                r#"{"singleServerConfig":{"timeout":"${QUOTE}"}}"#,
                "singleServerConfig.timeout",
            ),
            (
                r#"{"singleServerConfig":{"retryAttempts":"${NUM}"}}"#,
                "at most 1000",
            ),
            (
                r#"{"singleServerConfig":{"database":"-${NUM}"}}"#,
                "must not be negative",
            ),
            (
                r#"{"singleServerConfig":{"address":"${URL}"}}"#,
                "'redis://app:***@h:notaport'",
            ),
            (
                r#"{"singleServerConfig":{"address":"redis://${HOST}:notaport"}}"#,
                "'redis://***:notaport'",
            ),
            (
                r#"{"singleServerConfig":{"address":"${PW}"}}"#,
                "must start with redis://",
            ),
            (
                r#"{"singleServerConfig":{"password":${NUM}}}"#,
                "singleServerConfig.password",
            ),
            (
                r#"{"password":${NUM}}"#,
                "password: invalid type: an integer",
            ),
            (
                r#"{"singleServerConfig":{"retryDelay":{"class":"${PW}"}}}"#,
                "retryDelay",
            ),
            (
                r#"{"singleServerConfig":{"sslTruststore":"${PW}:ca.pem"}}"#,
                "sslTruststore",
            ),
            (
                r#"{"clusterServersConfig":{"nodeAddresses":"${URL}"}}"#,
                "nodeAddresses",
            ),
            (r#"{"lockWatchdogTimeout":"${PW}"}"#, "lockWatchdogTimeout"),
            (
                r#"{"lockWatchdogTimeout":${NUM}${NUM}${NUM}}"#,
                "lockWatchdogTimeout",
            ),
            (r#"{"singleServerConfig":"${PW}"}"#, "singleServerConfig"),
        ] {
            let message = secret_free_error(json, Syntax::Json);
            assert!(message.contains(says), "{json}: {message}");
        }
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_errors_never_repeat_a_value_from_the_environment_or_a_password() {
        for (yaml, says) in [
            ("singleServerConfig:\n  timeout: ${PW}\n", "singleServerConfig.timeout"),
            // The quote in the value ends the YAML string early.
            ("singleServerConfig:\n  timeout: \"${QUOTE}\"\n", "singleServerConfig"),
            ("singleServerConfig:\n  retryAttempts: ${NUM}\n", "at most 1000"),
            ("singleServerConfig:\n  address: ${URL}\n", "'redis://app:***@h:notaport'"),
            ("singleServerConfig:\n  address: redis://${HOST}:1/${PW}\n", "address"),
            ("singleServerConfig:\n  password: [${PW}\n", "YAML"),
            ("singleServerConfig:\n  password: \"${PW}\n", "YAML"),
            ("singleServerConfig:\n  password: ${PW}: x\n", "YAML"),
            ("singleServerConfig:\n  password: [${PW}]\n", "singleServerConfig.password"),
            ("singleServerConfig:\n  password: {${PW}: 1}\n", "singleServerConfig.password"),
            ("singleServerConfig: ${PW}\n", "singleServerConfig"),
            ("singleServerConfig:\n  retryDelay: !<${PW}> {delay: PT1S}\n", "retryDelay"),
            ("singleServerConfig:\n  retryDelay: !<org.redisson.config.ConstantDelay> {delay: ${PW}}\n", "retryDelay"),
            ("clusterServersConfig:\n  nodeAddresses: ${URL}\n", "nodeAddresses"),
            ("clusterServersConfig:\n  nodeAddresses: [${URL}]\n", "'redis://app:***@h:notaport'"),
            ("sentinelServersConfig:\n  sentinelAddresses: [${URL}]\n  masterName: m\n", "'redis://app:***@h:notaport'"),
            ("lockWatchdogTimeout: ${PW}\n", "lockWatchdogTimeout"),
        ] {
            let message = secret_free_error(yaml, Syntax::Yaml);
            assert!(message.contains(says), "{yaml}: {message}");
        }
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_database_is_the_key_as_in_redisson() {
        let c = yaml("singleServerConfig:\n  address: redis://h:1/3\n  database: 3\n").unwrap();
        assert_eq!((c.address.as_str(), c.database), ("redis://h:1/3", 3));
        let err = yaml_err("singleServerConfig:\n  address: redis://h:1/3\n");
        assert!(
            err.contains("names database 3, but Redisson ignores an address's database")
                && err.contains("Add `database: 3`"),
            "{err}"
        );
        let err = yaml_err("singleServerConfig:\n  address: redis://h:1/3\n  database: 5\n");
        assert!(
            err.contains("names database 3 but singleServerConfig.database is 5"),
            "{err}"
        );
        let c = yaml(
            "sentinelServersConfig:\n  sentinelAddresses: [redis://s:26379/1]\n  \
             masterName: m\n  database: 1\n",
        )
        .unwrap();
        assert_eq!(c.database, 1);
        let err = yaml_err("clusterServersConfig:\n  nodeAddresses: [redis://a:1/2]\n");
        assert!(
            err.contains("names database 2, but Redisson ignores an address's database"),
            "{err}"
        );
        let c = yaml("clusterServersConfig:\n  nodeAddresses: [redis://a:1/2]\n  database: 2\n")
            .unwrap();
        assert_eq!(c.database, 2);
    }
}
