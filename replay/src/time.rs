//! The command's argument formats: times, durations and sizes.

use jiff::Timestamp;

use crate::error::{Error, Result};

/// Parses a time: RFC 3339 (`2026-11-30T12:00:00.5Z`, `2026-11-30T13:00:00+01:00`), an
/// integer count of nanoseconds since the Unix epoch (`1764504000000000000`), `now`, or
/// a duration before now (`-5s`, `-10m`, `-1.5h`), on the system clock. Returns
/// nanoseconds since the epoch.
///
/// # Errors
///
/// [`Error::InvalidTime`] naming the text and why: none of these forms (a date without
/// a time or an offset is ambiguous and refused), before the epoch, or past the last
/// time 64-bit nanoseconds since the epoch hold (2554-07-21T23:34:33.709551615Z).
///
/// ```
/// use blackbox_replay::parse_time;
/// assert_eq!(parse_time("1970-01-01T00:00:01Z").unwrap(), 1_000_000_000);
/// assert_eq!(parse_time("42").unwrap(), 42);
/// assert!(parse_time("-5s").unwrap() < parse_time("now").unwrap());
/// assert!(parse_time("yesterday").is_err());
/// ```
pub fn parse_time(text: &str) -> Result<u64> {
    parse_time_at(text, now_ns())
}

/// [`parse_time`] with `now` given (ns since the epoch), for relative times.
///
/// # Errors
///
/// As [`parse_time`].
pub fn parse_time_at(text: &str, now_ns: u64) -> Result<u64> {
    let invalid = |reason: String| Error::InvalidTime {
        input: text.to_owned(),
        reason,
    };
    const EXPECTED: &str = "expected RFC 3339 with a time and an offset (like 2026-11-30T12:00:00Z), integer nanoseconds since the epoch, `now`, or a duration before now (like -5m)";
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(invalid(format!("it is empty: {EXPECTED}")));
    }
    if trimmed == "now" {
        return Ok(now_ns);
    }
    if let Some(ago) = trimmed.strip_prefix('-') {
        let ns = crate::parse_duration(ago).map_err(|e| match e {
            Error::InvalidDuration { reason, .. } => invalid(format!(
                "a time before now is a duration after `-`, like -5m: {reason}"
            )),
            other => invalid(other.to_string()),
        })?;
        return now_ns
            .checked_sub(ns)
            .ok_or_else(|| invalid("it is before the Unix epoch".to_owned()));
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed.parse::<u64>().map_err(|_| {
            invalid(
                "it is too large: integer nanoseconds since the epoch fit in 64 bits".to_owned(),
            )
        });
    }
    let past_the_last = || {
        invalid(format!(
            "it is past the last time nanoseconds since the epoch can hold ({})",
            format_time(u64::MAX)
        ))
    };
    // jiff's own message names its parser's steps: the reason given is ours.
    let ts: Timestamp = trimmed.parse().map_err(|_: jiff::Error| {
        // A well-formed time outside jiff's range (up to 9999-12-30) is still a time:
        // say which side of the range it is on.
        match jiff::fmt::temporal::Pieces::parse(trimmed) {
            Ok(pieces) if pieces.time().is_some() && pieces.offset().is_some() => {
                if pieces.date().year() >= 1970 {
                    past_the_last()
                } else {
                    invalid("it is before the Unix epoch".to_owned())
                }
            }
            _ => invalid(format!("it is not a valid time: {EXPECTED}")),
        }
    })?;
    let ns = ts.as_nanosecond();
    if ns < 0 {
        return Err(invalid("it is before the Unix epoch".to_owned()));
    }
    u64::try_from(ns).map_err(|_| past_the_last())
}

/// The system clock, in ns since the epoch (0 before the epoch).
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Formats nanoseconds since the epoch as RFC 3339 in UTC with nine fractional digits,
/// e.g. `2026-11-30T12:00:00.500000000Z`.
///
/// ```
/// use blackbox_replay::format_time;
/// assert_eq!(format_time(1_500_000_000), "1970-01-01T00:00:01.500000000Z");
/// ```
pub fn format_time(ns: u64) -> String {
    match Timestamp::from_nanosecond(i128::from(ns)) {
        Ok(ts) => format!("{ts:.9}"),
        // Unreachable for u64 nanoseconds (they end in 2554), kept total all the same.
        Err(_) => ns.to_string(),
    }
}

/// Parses a duration such as `30s`, `5m`, `100ms` or `1.5s` into nanoseconds, with the
/// recorder's policy rules ([`blackbox::policy::parse_duration`]).
///
/// # Errors
///
/// [`Error::InvalidDuration`] naming the text and what was expected.
pub fn parse_duration(text: &str) -> Result<u64> {
    blackbox::policy::parse_duration(text).map_err(|reason| Error::InvalidDuration {
        input: text.to_owned(),
        reason,
    })
}

/// Parses a size such as `64MiB`, `10MB` or `4096` into bytes, with the recorder's
/// policy rules ([`blackbox::policy::parse_size`]).
///
/// # Errors
///
/// [`Error::InvalidSize`] naming the text and what was expected.
pub fn parse_size(text: &str) -> Result<u64> {
    blackbox::policy::parse_size(text).map_err(|reason| Error::InvalidSize {
        input: text.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_at_nanosecond_precision() {
        let ns = 1_764_504_000_123_456_789;
        let text = format_time(ns);
        assert_eq!(text, "2025-11-30T12:00:00.123456789Z");
        assert_eq!(parse_time(&text).ok(), Some(ns));
        assert_eq!(
            parse_time("2025-11-30T13:00:00.123456789+01:00").ok(),
            Some(ns)
        );
        assert_eq!(parse_time(&ns.to_string()).ok(), Some(ns));
    }

    #[test]
    fn durations_and_sizes_use_the_policy_rules_and_name_the_text() {
        assert_eq!(parse_duration("1.5s").ok(), Some(1_500_000_000));
        assert_eq!(parse_size("64MiB").ok(), Some(64 << 20));
        let err = parse_duration("5 minutes").err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.starts_with("invalid duration \"5 minutes\"")),
            "{err:?}"
        );
        let err = parse_size("12XB").err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("\"12XB\"") && e.contains("unit")),
            "{err:?}"
        );
    }

    #[test]
    fn relative_times_count_back_from_now() {
        let now = 1_764_504_000_000_000_000;
        assert_eq!(parse_time_at("now", now).ok(), Some(now));
        assert_eq!(parse_time_at("-5s", now).ok(), Some(now - 5_000_000_000));
        assert_eq!(
            parse_time_at(" -1.5m ", now).ok(),
            Some(now - 90_000_000_000)
        );
        assert_eq!(parse_time_at("-250ms", now).ok(), Some(now - 250_000_000));
        let err = parse_time_at("-5", now).err().map(|e| e.to_string());
        assert!(err.as_deref().is_some_and(|e| e.contains("-5m")), "{err:?}");
        assert!(parse_time_at("-1000000h", 5).is_err());
    }

    #[test]
    fn bad_times_are_refused_with_the_text() {
        for bad in [
            "",
            "2025-11-30",
            "1969-12-31T23:59:59Z",
            "99999999999999999999",
            "-5",
        ] {
            let err = parse_time(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("invalid time"), "{bad:?}: {err}");
            // The reason is ours, not the parser's.
            assert!(!err.contains("parse"), "{bad:?}: {err}");
        }
    }
}
