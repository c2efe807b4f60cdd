//! Times, dates and owners as a person reads them: `28.4s`, `2025-03-01
//! 09:15:02 UTC`, `3f2a9c1e:7`. No date crate: the tool only ever prints UTC.

use std::time::Duration;

use redisson_locks::inspect::{HoldMode, Identity, Owner};

/// A length of time, as precise as it matters at its size: `850ms`, `28.4s`,
/// `12m03s`, `3h02m`, `2d03h`.
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    match s {
        _ if ms < 1_000 => format!("{ms}ms"),
        0..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3_600 => format!("{}m{:02}s", s / 60, s % 60),
        3_600..86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// A duration as an operator types it: a number of seconds (`30`, `1.5`, `0`),
/// or a number with a unit: `500ms`, `30s`, `5m`, `1h`. What clap calls for
/// `--wait`, `--lease` and `--grace`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3_600.0,
        _ => {
            return Err(format!(
                "'{unit}' is not a unit: use ms, s, m or h (or none, for seconds)"
            ))
        }
    };
    let valid = !number.is_empty()
        && number.bytes().filter(|b| *b == b'.').count() <= 1
        && number.bytes().any(|b| b.is_ascii_digit());
    let seconds: f64 = if valid { number.parse().ok() } else { None }
        .ok_or_else(|| format!("'{text}' is not a duration: try 30, 1.5s, 500ms, 5m or 1h"))?;
    Duration::try_from_secs_f64(seconds * scale)
        .ok()
        .filter(|d| *d <= redisson_locks::MAX_DURATION)
        .ok_or_else(|| format!("'{text}' is too long a duration"))
}

/// A duration that must be some time at all: what clap calls for `--lease`
/// and `--max-hold`. A lease of 0 would end the hold as it is taken, so 0 is
/// a wrong command line (exit 2), said before anything runs, not a failure of
/// the tool when the server refuses it.
pub(crate) fn parse_span(text: &str) -> Result<Duration, String> {
    let span = parse_duration(text)?;
    if span < Duration::from_millis(1) {
        return Err(format!(
            "'{}' is no time at all: a lease or a term lasts at least 1ms",
            text.trim()
        ));
    }
    Ok(span)
}

/// An optional lease: `28.4s`, or `none` (no TTL: it never expires by itself).
pub(crate) fn lease(d: Option<Duration>) -> String {
    d.map_or_else(|| "none".to_owned(), duration)
}

/// A fair waiter's deadline relative to the server's clock, in seconds:
/// `in 298.1s`, or `overdue by 1.2s` (the next acquire or release evicts it).
pub(crate) fn deadline(in_ms: Option<i64>) -> String {
    match in_ms {
        None => "none recorded".to_owned(),
        Some(ms) if ms >= 0 => format!("in {:.1}s", ms as f64 / 1000.0),
        Some(ms) => format!("overdue by {:.1}s", -ms as f64 / 1000.0),
    }
}

/// An instant in epoch milliseconds as a UTC date and time, to the second.
pub(crate) fn utc(epoch_ms: u64) -> String {
    let secs = epoch_ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let (year, month, day) = civil_from_days(days);
    let of_day = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

/// The time of day of an instant, UTC: `09:15:02`.
pub(crate) fn clock(epoch_ms: u64) -> String {
    let of_day = epoch_ms / 1000 % 86_400;
    format!(
        "{:02}:{:02}:{:02}",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// An owner in a few characters: the first 8 of its client id and its
/// thread (`3f2a9c1e:7`), enough to tell the owners of one object apart; a
/// field not in Redisson's shape as it is.
pub(crate) fn short_owner(owner: &Owner) -> String {
    match owner.client_id.get(..8) {
        Some(prefix) => format!("{prefix}:{}", owner.thread),
        None => owner.field.clone(),
    }
}

/// A hold's mode in one word.
pub(crate) fn mode(mode: HoldMode) -> &'static str {
    match mode {
        HoldMode::Read => "read",
        HoldMode::Write => "write",
        HoldMode::Permits => "permits",
        // `HoldMode` is non-exhaustive: a mode added later is some exclusive hold.
        _ => "exclusive",
    }
}

/// Who is behind an owner, on one line: `pid 4121 on web-3 "billing",
/// redisson-locks 0.1.0`; or why that cannot be said.
pub(crate) fn identity(owner: &Owner) -> String {
    match &owner.identity {
        Some(who) => {
            let mut line = format!("pid {} on {}", who.pid, who.host);
            if let Some(name) = &who.name {
                line.push_str(&format!(" \"{name}\""));
            }
            line.push_str(&format!(", {} {}", who.library, who.version));
            line
        }
        None if owner.client_id.is_empty() => {
            "unknown: the owner field is not Redisson's <client id>:<thread>".to_owned()
        }
        None => NO_IDENTITY.to_owned(),
    }
}

/// What an owner without an identity is.
pub(crate) const NO_IDENTITY: &str = "not a redisson-locks client: no identity (a Java \
     Redisson client, a client with announce off, or one that has been gone longer than \
     a watchdog lease)";

/// An identity's start, for `show`: `connected 2025-03-01 09:15:02 UTC`.
pub(crate) fn connected(who: &Identity) -> String {
    format!("connected {} (its own clock)", utc(who.started_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_their_scale() {
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(Duration::from_millis(28_449)), "28.4s");
        assert_eq!(duration(Duration::from_secs(723)), "12m03s");
        assert_eq!(duration(Duration::from_secs(3 * 3600 + 125)), "3h02m");
        assert_eq!(
            duration(Duration::from_secs(2 * 86_400 + 3 * 3600)),
            "2d03h"
        );
        assert_eq!(lease(None), "none");
    }

    #[test]
    fn durations_read_as_typed() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3_600)));
        for bad in [
            "",
            "s",
            "-1",
            "+1",
            "1.2.3",
            "10x",
            "1e3",
            "99999999999h",
            ".",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_lease_or_term_is_some_time_at_all() {
        assert_eq!(parse_span("1ms"), Ok(Duration::from_millis(1)));
        for zero in ["0", "0s", "0.5ms"] {
            assert!(parse_span(zero).unwrap_err().contains("1ms"), "{zero}");
        }
    }

    #[test]
    fn deadlines_say_when_they_are_overdue() {
        assert_eq!(deadline(Some(298_140)), "in 298.1s");
        assert_eq!(deadline(Some(-1_200)), "overdue by 1.2s");
        assert_eq!(deadline(None), "none recorded");
    }

    #[test]
    fn epoch_milliseconds_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2024-02-29 (a leap day) 13:45:30.999 UTC.
        assert_eq!(utc(1_709_214_330_999), "2024-02-29 13:45:30 UTC");
        assert_eq!(clock(1_709_214_330_999), "13:45:30");
    }
}
