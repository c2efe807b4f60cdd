//! What people write in config files, and what errors may say back about it:
//! error messages that name a value's kind, never the value; and, with feature
//! `serde`, `Deserialize for Config` and durations such as `1500`, `"1500ms"`,
//! `"30s"`.

use std::borrow::Cow;

/// `message`, from serde or a format's deserializer, with every value it quotes
/// replaced by the value's kind: ``invalid type: string "S3cr3t", expected u32``
/// becomes ``invalid type: a string, expected u32``, and ``unknown variant
/// `S3cr3t`, expected ...`` becomes ``unknown variant, expected ...``.
///
/// serde words these errors itself (`de::Error::invalid_type`,
/// `invalid_value`, `unknown_variant`), in one fixed shape whatever the format,
/// and the formats build some of them before any of our code sees the value
/// (serde_json's ``invalid type: integer `5`, expected a string`` for a
/// password written as a number), so the message is the one place where all
/// of them can be caught. Names of keys (`missing field`, `unknown field`) are
/// kept: they are what the reader needs to find the mistake.
pub(super) fn without_values(message: &str) -> Cow<'_, str> {
    const MARKERS: [&str; 3] = ["invalid type: ", "invalid value: ", "unknown variant `"];
    let mut out = String::new();
    let mut rest = message;
    while let Some((at, marker)) = MARKERS
        .iter()
        .filter_map(|marker| rest.find(marker).map(|at| (at, *marker)))
        .min_by_key(|(at, _)| *at)
    {
        let after = &rest[at + marker.len()..];
        if marker.starts_with("unknown variant") {
            out.push_str(&rest[..at]);
            out.push_str("unknown variant");
            // The variant runs to the last "`, " that serde puts after it: a
            // variant holding one is cut further on, never earlier.
            rest = match ["`, expected ", "`, there are no variants"]
                .iter()
                .filter_map(|end| after.rfind(end))
                .max()
            {
                Some(end) => &after[end + 1..],
                None => "",
            };
            continue;
        }
        out.push_str(&rest[..at + marker.len()]);
        match quoted_value(after) {
            Some((kind, len)) => {
                out.push_str(kind);
                rest = &after[len..];
            }
            None => rest = after,
        }
    }
    if out.is_empty() {
        return message.into();
    }
    out.push_str(rest);
    if out == message {
        message.into()
    } else {
        out.into()
    }
}

/// serde's `Unexpected` values that carry the value (`string "x"`, ``integer
/// `5` ``, ...) at the start of `text`: their kind and the length of the value
/// as written; `None` for the kinds that carry none (`map`, `sequence`, ...).
/// A value whose end is missing runs to the end of `text`.
fn quoted_value(text: &str) -> Option<(&'static str, usize)> {
    if let Some(string) = text.strip_prefix("string \"") {
        // Written with `{:?}`: an inner quote is escaped, so the first quote
        // not after a backslash ends it.
        let mut escaped = false;
        let end = string
            .char_indices()
            .find(|&(_, c)| {
                let closes = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            })
            .map_or(string.len(), |(i, _)| i + 1);
        return Some(("a string", "string \"".len() + end));
    }
    for (prefix, kind) in [
        ("integer `", "an integer"),
        ("floating point `", "a number"),
        ("boolean `", "a boolean"),
        ("character `", "a character"),
    ] {
        if let Some(value) = text.strip_prefix(prefix) {
            // A character may itself be a backtick: skip it before looking.
            let skip = value.chars().next().map_or(0, char::len_utf8);
            let end = value
                .get(skip..)
                .and_then(|tail| tail.find('`'))
                .map_or(value.len(), |i| skip + i + 1);
            return Some((kind, prefix.len() + end));
        }
    }
    None
}

#[cfg(feature = "serde")]
mod with_serde {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

    use super::without_values;
    use crate::config::address::{address_database, database_conflict, redact_address};
    use crate::{Config, Durability, OnDeadlock, OwnerMode, SelfWait, TlsConfig};

    /// Reads a duration: an integer of milliseconds, or a string of a whole or
    /// decimal number and a unit, `ms`, `s`, `m` or `h` (`"1500ms"`, `"1.5s"`,
    /// `"5m"`). A bad one is named by its kind, not repeated.
    fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }

    /// A duration that may be absent (`null`): an absent field keeps the
    /// default through `#[serde(default)]`.
    fn optional_duration<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<Human>::deserialize(deserializer).map(|d| d.map(|Human(d)| d))
    }

    /// One duration as `duration` reads it.
    struct Human(Duration);

    impl<'de> Deserialize<'de> for Human {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            duration(deserializer).map(Human)
        }
    }

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(
                "a duration: an integer of milliseconds, or a string such as \"1500ms\", \
                 \"30s\", \"1.5s\", \"5m\" or \"1h\"",
            )
        }

        fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Duration, E> {
            Ok(Duration::from_millis(ms))
        }

        fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Duration, E> {
            u64::try_from(ms)
                .map(Duration::from_millis)
                .map_err(|_| E::invalid_value(Unexpected::Other("a negative integer"), &self))
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
            super::parse(text).ok_or_else(|| E::invalid_value(Unexpected::Other("a string"), &self))
        }
    }

    /// `Config` as serde reads it: the same fields, with `database` optional so
    /// that its absence can be told from an explicit 0.
    #[derive(serde::Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Fields {
        address: String,
        username: Option<String>,
        password: Option<String>,
        database: Option<i64>,
        #[serde(deserialize_with = "duration")]
        connect_timeout: Duration,
        #[serde(deserialize_with = "duration")]
        timeout: Duration,
        retry_attempts: u32,
        #[serde(deserialize_with = "duration")]
        retry_interval: Duration,
        #[serde(deserialize_with = "duration")]
        lock_watchdog_timeout: Duration,
        lock_watchdog_batch_size: usize,
        #[serde(deserialize_with = "duration")]
        fair_lock_wait_timeout: Duration,
        #[serde(deserialize_with = "duration")]
        recheck_interval: Duration,
        cluster_nodes: Vec<String>,
        sharded_pubsub: Option<bool>,
        sentinel_addresses: Vec<String>,
        sentinel_master_name: Option<String>,
        replica_sync: Option<u32>,
        #[serde(deserialize_with = "duration")]
        replica_sync_timeout: Duration,
        durability: Durability,
        clock_drift_factor: f64,
        #[serde(deserialize_with = "optional_duration")]
        max_hold: Option<Duration>,
        tls: TlsConfig,
        owner_mode: OwnerMode,
        self_wait: SelfWait,
        #[serde(deserialize_with = "duration")]
        self_wait_warning: Duration,
        deadlock: OnDeadlock,
        #[serde(deserialize_with = "duration")]
        deadlock_threshold: Duration,
        client_name: Option<String>,
        announce: bool,
        metrics_lock_names: bool,
    }

    impl Default for Fields {
        /// `Config::default()`'s values, `database` absent. Destructured (here
        /// and in `into_config`) so that a field added to `Config` and not here
        /// fails to compile.
        fn default() -> Self {
            let Config {
                address,
                username,
                password,
                database: _,
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
            } = Config::default();
            Fields {
                address,
                username,
                password,
                database: None,
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
            }
        }
    }

    impl Fields {
        /// The `Config`: `database` as given, else the address's `/N`, else 0;
        /// both given and different is an error naming both.
        fn into_config(self) -> Result<Config, String> {
            let Fields {
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
            let named = address_database(&address);
            let database = match (database, named) {
                (Some(given), Some(named)) if given != named => {
                    return Err(database_conflict(
                        &format!("address '{}'", redact_address(&address)),
                        named,
                        "database",
                        given,
                    ));
                }
                (Some(given), _) => given,
                (None, named) => named.unwrap_or(0),
            };
            Ok(Config {
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
            })
        }
    }

    impl<'de> Deserialize<'de> for Config {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let fields = Fields::deserialize(deserializer).map_err(quiet)?;
            fields.into_config().map_err(de::Error::custom)
        }
    }

    /// `error` with the values its message quotes left out ([`without_values`]);
    /// itself when it quotes none, so that its kind and position stay as the
    /// format made them.
    fn quiet<E: de::Error>(error: E) -> E {
        let message = error.to_string();
        match without_values(&message) {
            std::borrow::Cow::Borrowed(_) => error,
            std::borrow::Cow::Owned(quiet) => E::custom(quiet),
        }
    }
}

/// Parses `<number><unit>`; `None` for anything else, negative and unit-less
/// numbers included (an integer without a unit is written unquoted). Exact to the
/// nanosecond: no floating point.
#[cfg(feature = "serde")]
fn parse(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let unit_at = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = (text[..unit_at].trim_end(), &text[unit_at..]);
    let nanos_per_unit: u128 = match unit {
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || fraction.is_some_and(|f| !digits(f)) {
        return None;
    }
    let mut nanos = whole.parse::<u128>().ok()?.checked_mul(nanos_per_unit)?;
    if let Some(fraction) = fraction {
        let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
        nanos = nanos.checked_add(fraction.parse::<u128>().ok()? * nanos_per_unit / scale)?;
    }
    let seconds = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(std::time::Duration::new(
        seconds,
        (nanos % 1_000_000_000) as u32,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "serde")]
    use crate::Config;
    #[cfg(feature = "serde")]
    use std::time::Duration;

    #[test]
    fn messages_name_the_kind_of_a_value_never_the_value() {
        for (message, expected) in [
            (
                r#"invalid type: string "S3cr3t", expected u32 at line 1 column 9"#,
                "invalid type: a string, expected u32 at line 1 column 9",
            ),
            (
                r#"a.b: invalid value: string "with \"S3cr3t\" inside", expected x"#,
                "a.b: invalid value: a string, expected x",
            ),
            (
                "invalid type: integer `123456`, expected a string",
                "invalid type: an integer, expected a string",
            ),
            (
                "invalid type: integer `123456` as i128, expected a string",
                "invalid type: an integer as i128, expected a string",
            ),
            (
                "invalid type: floating point `1.5`, expected a string",
                "invalid type: a number, expected a string",
            ),
            (
                "invalid type: boolean `true`, expected a string",
                "invalid type: a boolean, expected a string",
            ),
            (
                "invalid type: character `S`, expected a string; invalid type: character ``` x",
                "invalid type: a character, expected a string; invalid type: a character x",
            ),
            (
                "unknown variant `S3cr3t`, expected `scoped` or `task`",
                "unknown variant, expected `scoped` or `task`",
            ),
            (
                "unknown variant `S3cr3t`, expected x`, expected `a`",
                "unknown variant, expected `a`",
            ),
            (
                "unknown variant `S3cr3t`, there are no variants",
                "unknown variant, there are no variants",
            ),
            // A value cut short is left out to the end.
            (r#"invalid type: string "S3cr3t"#, "invalid type: a string"),
            ("unknown variant `S3cr3t", "unknown variant"),
        ] {
            assert_eq!(without_values(message), expected, "{message}");
        }
        for kept in [
            "invalid type: map, expected a string",
            "invalid length 3, expected a pair",
            "unknown field `adress`, expected one of `address`, `username`",
            "missing field `address`",
            "EOF while parsing a string at line 1 column 9",
        ] {
            assert!(matches!(without_values(kept), Cow::Borrowed(_)), "{kept}");
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn durations_read_as_milliseconds_or_with_a_unit() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("1500ms", ms(1_500)),
            ("30s", ms(30_000)),
            ("1.5s", ms(1_500)),
            ("0.5ms", Duration::from_micros(500)),
            ("5m", ms(300_000)),
            ("1h", ms(3_600_000)),
            (" 2 s ", ms(2_000)),
        ] {
            assert_eq!(parse(text), Some(expected), "{text}");
        }
        for bad in [
            "",
            "30",
            "s",
            "-1s",
            "1.5",
            "1e3s",
            "10 sec",
            "1d",
            "ms10",
            "1..5s",
            "1.s",
            ".5s",
            "99999999999999999999h",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_reads_a_config_with_defaults_for_missing_fields() {
        let config: Config = serde_json::from_str(
            r#"{"address": "redis://10.0.0.5:6380", "password": "pw", "timeout": 1500,
                "connect_timeout": "2s", "retry_interval": "250ms",
                "lock_watchdog_timeout": "1m", "replica_sync": 0, "sharded_pubsub": true,
                "durability": "aof", "lock_watchdog_batch_size": 500,
                "cluster_nodes": [], "clock_drift_factor": 0.02, "max_hold": "5m",
                "tls": {"ca_certificate": "/etc/ca.pem", "client_key": "/etc/key.pem"}}"#,
        )
        .unwrap();
        let expected = Config {
            address: "redis://10.0.0.5:6380".into(),
            password: Some("pw".into()),
            timeout: Duration::from_millis(1_500),
            connect_timeout: Duration::from_secs(2),
            retry_interval: Duration::from_millis(250),
            lock_watchdog_timeout: Duration::from_secs(60),
            replica_sync: Some(0),
            durability: crate::Durability::Aof,
            lock_watchdog_batch_size: 500,
            sharded_pubsub: Some(true),
            clock_drift_factor: 0.02,
            max_hold: Some(Duration::from_secs(300)),
            tls: crate::TlsConfig {
                ca_certificate: Some("/etc/ca.pem".into()),
                client_key: Some("/etc/key.pem".into()),
                ..crate::TlsConfig::default()
            },
            ..Config::default()
        };
        assert_eq!(config, expected);
        config.validate().unwrap();
        let empty: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Config::default());
        let unlimited: Config = serde_json::from_str(r#"{"max_hold": null}"#).unwrap();
        assert_eq!(unlimited.max_hold, None);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_refuses_unknown_fields_and_bad_durations() {
        for (json, named) in [
            (r#"{"adress": "redis://h:1"}"#, "adress"),
            (r#"{"lockWatchdogTimeout": 1000}"#, "lockWatchdogTimeout"),
            (r#"{"tls": {"ca_cert": "/ca.pem"}}"#, "ca_cert"),
            (r#"{"timeout": "30"}"#, "expected a duration"),
            (r#"{"timeout": -5}"#, "invalid value: a negative integer"),
            (r#"{"timeout": 1.5}"#, "invalid type: a number"),
            (r#"{"timeout": "soon"}"#, "invalid value: a string"),
            (
                r#"{"retry_attempts": "3"}"#,
                "invalid type: a string, expected u32",
            ),
        ] {
            let err = serde_json::from_str::<Config>(json)
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{json}: {err}");
        }
    }

    /// Whatever is put where it does not belong, the error names its kind and
    /// where it is, never the value: it may be a password.
    #[cfg(feature = "serde")]
    #[test]
    fn serde_errors_never_repeat_a_value() {
        for json in [
            r#"{"password": 987654321}"#,
            r#"{"password": 98765.4321}"#,
            r#"{"password": ["S3cr3t-p"]}"#,
            r#"{"username": 987654321}"#,
            r#"{"timeout": "S3cr3t-p"}"#,
            r#"{"timeout": -987654321}"#,
            r#"{"retry_attempts": "S3cr3t-p"}"#,
            r#"{"retry_attempts": 98765432123}"#,
            r#"{"address": 987654321}"#,
            r#"{"cluster_nodes": "redis://app:S3cr3t-p@h:1"}"#,
            r#"{"sentinel_addresses": [987654321]}"#,
            r#"{"owner_mode": "S3cr3t-p"}"#,
            r#"{"tls": "S3cr3t-p"}"#,
            r#"{"sharded_pubsub": "S3cr3t-p"}"#,
        ] {
            let err = serde_json::from_str::<Config>(json)
                .unwrap_err()
                .to_string();
            for secret in ["S3cr3t", "987654321", "98765"] {
                assert!(!err.contains(secret), "{json}: {err}");
            }
            assert!(err.contains("line 1 column"), "the position stays: {err}");
        }
        // Nested in a service's own struct, the same.
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Service {
            redis: Config,
        }
        let err = serde_json::from_str::<Service>(r#"{"redis": {"password": 987654321}}"#)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("987654321"), "{err}");
        assert!(
            err.contains("invalid type: an integer, expected a string"),
            "{err}"
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_takes_the_database_from_the_address_unless_given() {
        let read = |json: &str| serde_json::from_str::<Config>(json);
        let c = read(r#"{"address": "redis://h:6379/3"}"#).unwrap();
        assert_eq!(c.database, 3);
        c.validate().unwrap();
        let c = read(r#"{"address": "redis://h:6379/3", "database": 3}"#).unwrap();
        assert_eq!(c.database, 3);
        let c = read(r#"{"address": "redis://h:6379", "database": 4}"#).unwrap();
        assert_eq!(c.database, 4);
        assert_eq!(read("{}").unwrap().database, 0);
        // An address that does not parse leaves it to validate.
        let c = read(r#"{"address": "h:6379/3"}"#).unwrap();
        assert_eq!(c.database, 0);
        assert!(c.validate().unwrap_err().is_config());
        for (json, both) in [
            (
                r#"{"address": "redis://h:6379/3", "database": 5}"#,
                "3 but database is 5",
            ),
            (
                r#"{"database": 0, "address": "redis://h:6379/3"}"#,
                "3 but database is 0",
            ),
        ] {
            let err = read(json).unwrap_err().to_string();
            assert!(err.contains(&format!("names database {both}")), "{err}");
        }
        let err = read(r#"{"address": "redis://app:S3cr3t@h:6379/3", "database": 5}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'redis://app:***@h:6379/3'") && !err.contains("S3cr3t"),
            "{err}"
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn deserializing_does_not_validate_but_validate_reports() {
        let config: Config =
            serde_json::from_str(r#"{"address": "127.0.0.1:6379", "timeout": 0}"#).unwrap();
        assert!(config.validate().unwrap_err().is_config());
    }
}
