//! Durations in a service's own config (feature `serde`): `1500`, `"1500ms"`, `"30s"`.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Unexpected, Visitor};

/// Reads a duration: an integer of milliseconds, or a string of a whole or decimal
/// number and a unit, `ms`, `s`, `m` or `h` (`"1500ms"`, `"1.5s"`, `"5m"`).
pub(super) fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationVisitor)
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a duration: an integer of milliseconds, or a string such as \"1500ms\", \"30s\", \
             \"1.5s\", \"5m\" or \"1h\"",
        )
    }

    fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Duration, E> {
        Ok(Duration::from_millis(ms))
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Duration, E> {
        u64::try_from(ms)
            .map(Duration::from_millis)
            .map_err(|_| E::invalid_value(Unexpected::Signed(ms), &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        parse(text).ok_or_else(|| E::invalid_value(Unexpected::Str(text), &self))
    }
}

/// Parses `<number><unit>`; `None` for anything else, negative and unit-less
/// numbers included (an integer without a unit is written unquoted). Exact to the
/// nanosecond: no floating point.
fn parse(text: &str) -> Option<Duration> {
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
    Some(Duration::new(seconds, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

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

    #[test]
    fn serde_reads_a_config_with_defaults_for_missing_fields() {
        let config: Config = serde_json::from_str(
            r#"{"address": "redis://10.0.0.5:6380", "password": "pw", "timeout": 1500,
                "connect_timeout": "2s", "retry_interval": "250ms",
                "lock_watchdog_timeout": "1m", "replica_sync": 0, "sharded_pubsub": true,
                "cluster_nodes": [], "clock_drift_factor": 0.02,
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
            sharded_pubsub: Some(true),
            clock_drift_factor: 0.02,
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
    }

    #[test]
    fn serde_refuses_unknown_fields_and_bad_durations() {
        for (json, named) in [
            (r#"{"adress": "redis://h:1"}"#, "adress"),
            (r#"{"lockWatchdogTimeout": 1000}"#, "lockWatchdogTimeout"),
            (r#"{"tls": {"ca_cert": "/ca.pem"}}"#, "ca_cert"),
            (r#"{"timeout": "30"}"#, "30"),
            (r#"{"timeout": -5}"#, "-5"),
            (r#"{"timeout": 1.5}"#, "1.5"),
            (r#"{"timeout": "soon"}"#, "soon"),
            (r#"{"retry_attempts": "3"}"#, "3"),
        ] {
            let err = serde_json::from_str::<Config>(json)
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{json}: {err}");
        }
    }

    #[test]
    fn deserializing_does_not_validate_but_validate_reports() {
        let config: Config =
            serde_json::from_str(r#"{"address": "127.0.0.1:6379", "timeout": 0}"#).unwrap();
        assert!(config.validate().unwrap_err().is_config());
    }
}
