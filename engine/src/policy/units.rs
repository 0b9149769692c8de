//! The units a policy is written in: durations and sizes, read exactly and printed back.

use blackbox_log::Shown;

pub(super) const NS_PER_SEC: u64 = 1_000_000_000;

pub(super) const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", NS_PER_SEC),
    ("m", 60 * NS_PER_SEC),
    ("h", 3_600 * NS_PER_SEC),
];
pub(super) const DURATION_EXPECTED: &str =
    "expected a number and a unit (ns, us, ms, s, m or h), like \"30s\", \"100ms\" or \"1.5s\"";

/// Parses a duration such as `"30s"`, `"5m"`, `"100ms"`, `"250us"`, `"10ns"`, `"1h"` or
/// `"1.5s"` into nanoseconds.
///
/// The number is a non-negative decimal, with an optional fraction, directly followed by
/// one of the units `ns`, `us` (or `µs`), `ms`, `s`, `m` or `h`; there is no whitespace.
/// A fraction must come to a whole number of nanoseconds.
///
/// # Errors
///
/// A sentence naming the text and what was expected, when the unit is missing or
/// unknown, the number is malformed or negative, the value is not a whole number of
/// nanoseconds, or it exceeds `u64::MAX` nanoseconds (about 584 years).
pub fn parse_duration(text: &str) -> Result<u64, String> {
    parse_quantity(
        text,
        "duration",
        DURATION_UNITS,
        false,
        DURATION_EXPECTED,
        "nanoseconds",
    )
}

pub(super) const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];
pub(super) const SIZE_EXPECTED: &str = "expected a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB, \
     KB, MB, GB or TB), like \"64MiB\" or \"512\"";

/// Parses a size such as `"64MiB"`, `"1KiB"`, `"10MB"`, `"512B"`, `"512"` or `"1GiB"` into
/// bytes.
///
/// The number is a non-negative decimal, with an optional fraction, directly followed by
/// an optional unit: `B`, the binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or the
/// decimal `KB`, `MB`, `GB`, `TB` (powers of 1000). Units are case-sensitive. A bare
/// number counts bytes. A fraction must come to a whole number of bytes.
///
/// # Errors
///
/// A sentence naming the text and what was expected, when the unit is unknown, the
/// number is malformed or negative, the value is not a whole number of bytes, or it
/// exceeds `u64::MAX` bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    parse_quantity(text, "size", SIZE_UNITS, true, SIZE_EXPECTED, "bytes")
}

/// Parses `<digits>[.<digits>]<unit>` exactly, in integer arithmetic.
pub(super) fn parse_quantity(
    text: &str,
    what: &str,
    units: &[(&str, u64)],
    unit_optional: bool,
    expected: &str,
    base_unit: &str,
) -> Result<u64, String> {
    /// More fraction digits than this cannot come to a whole base unit with any of the
    /// units above, and the bound keeps the arithmetic inside `u128`.
    const FRACTION_DIGITS_MAX: usize = 18;
    /// `u64::MAX` has 20 digits.
    const INTEGER_DIGITS_MAX: usize = 20;

    // The text comes from a user: messages show at most its start.
    let shown = Shown(text);
    if text.is_empty() {
        return Err(format!("empty {what}: {expected}"));
    }
    if text.starts_with('-') {
        return Err(format!("{what} {shown} is negative: {expected}"));
    }
    let number_len = text
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_len);
    if number.is_empty() {
        return Err(format!(
            "{what} {shown} does not start with a number: {expected}"
        ));
    }
    let multiplier = if unit.is_empty() && unit_optional {
        1
    } else if unit.is_empty() {
        return Err(format!("{what} {shown} has no unit: {expected}"));
    } else {
        match units.iter().find(|(name, _)| *name == unit) {
            Some(&(_, multiplier)) => multiplier,
            None => {
                return Err(format!(
                    "{what} {shown} has an unknown unit {}: {expected}",
                    Shown(unit)
                ));
            }
        }
    };

    let (integer, fraction) = match number.split_once('.') {
        Some((integer, fraction)) => (integer, fraction),
        None => (number, ""),
    };
    let has_dot = number.len() != integer.len();
    if integer.is_empty() || (has_dot && fraction.is_empty()) || fraction.contains('.') {
        return Err(format!(
            "{what} {shown} has a malformed number {}: {expected}",
            Shown(number)
        ));
    }
    let too_large = || {
        format!(
            "{what} {shown} is too large: at most {} {base_unit}",
            u64::MAX
        )
    };
    let integer = integer.trim_start_matches('0');
    if integer.len() > INTEGER_DIGITS_MAX {
        return Err(too_large());
    }
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > FRACTION_DIGITS_MAX {
        return Err(format!(
            "{what} {shown} is not a whole number of {base_unit}"
        ));
    }
    // Both parts are ASCII digits within the bounds above, so they parse and the
    // products below stay far inside u128.
    let integer_value: u128 = if integer.is_empty() {
        0
    } else {
        integer.parse().map_err(|_| too_large())?
    };
    let (fraction_value, fraction_scale): (u128, u128) = if fraction.is_empty() {
        (0, 1)
    } else {
        let value = fraction
            .parse()
            .map_err(|_| format!("{what} {shown} has a malformed number {}", Shown(number)))?;
        let exponent = u32::try_from(fraction.len()).map_err(|_| too_large())?;
        (value, 10u128.pow(exponent))
    };
    let multiplier = u128::from(multiplier);
    let fraction_scaled = fraction_value * multiplier;
    if fraction_scaled % fraction_scale != 0 {
        return Err(format!(
            "{what} {shown} is not a whole number of {base_unit}"
        ));
    }
    let total = integer_value * multiplier + fraction_scaled / fraction_scale;
    u64::try_from(total).map_err(|_| too_large())
}

/// A duration in the largest unit [`parse_duration`] reads that keeps it exact.
pub(super) fn duration_text(ns: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("h", 3_600 * NS_PER_SEC),
        ("m", 60 * NS_PER_SEC),
        ("s", NS_PER_SEC),
        ("ms", 1_000_000),
        ("us", 1_000),
    ];
    for (unit, size) in UNITS {
        if ns != 0 && ns.is_multiple_of(size) {
            return format!("{}{unit}", ns / size);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

    #[test]
    fn parse_duration_accepts_each_unit_and_fractions() {
        let cases: &[(&str, u64)] = &[
            ("0s", 0),
            ("10ns", 10),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("100ms", 100_000_000),
            ("30s", 30 * NS_PER_SEC),
            ("5m", 300 * NS_PER_SEC),
            ("1h", 3_600 * NS_PER_SEC),
            ("1.5s", 1_500_000_000),
            ("0.5ms", 500_000),
            ("1.000000001s", 1_000_000_001),
            ("1.50000000000000000000000000s", 1_500_000_000),
            ("007s", 7 * NS_PER_SEC),
            ("0.25h", 900 * NS_PER_SEC),
            ("18446744073709551615ns", u64::MAX),
            ("18446744073.709551615s", u64::MAX),
        ];
        for &(text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn parse_duration_refuses_malformed_text_and_says_what_was_expected() {
        let cases: &[(&str, &str)] = &[
            ("5", "has no unit"),
            ("5x", "unknown unit \"x\""),
            ("5 s", "unknown unit \" s\""),
            ("5S", "unknown unit \"S\""),
            ("5sec", "unknown unit \"sec\""),
            ("-1s", "is negative"),
            ("", "empty duration"),
            ("s", "does not start with a number"),
            (" 5s", "does not start with a number"),
            ("+5s", "does not start with a number"),
            ("1.5.2s", "malformed number \"1.5.2\""),
            (".5s", "malformed number \".5\""),
            ("5.s", "malformed number \"5.\""),
            ("1.5ns", "not a whole number of nanoseconds"),
            ("0.0000000001s", "not a whole number of nanoseconds"),
            (
                "0.1234567890123456789h",
                "not a whole number of nanoseconds",
            ),
            ("18446744073709551616ns", "too large"),
            ("18446744073.709551616s", "too large"),
            ("5124096h", "too large"),
            ("999999999999999999999999999999h", "too large"),
        ];
        for &(text, needle) in cases {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(
                err.contains("expected") || needle.contains("whole") || needle.contains("large"),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn parse_size_accepts_each_unit() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("1KiB", 1024),
            ("64MiB", 64 << 20),
            ("1GiB", 1 << 30),
            ("2TiB", 2 << 40),
            ("10KB", 10_000),
            ("10MB", 10_000_000),
            ("3GB", 3_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("1.5KiB", 1536),
            ("0.5MB", 500_000),
            ("18446744073709551615", u64::MAX),
            ("0.5KiB", 512),
            ("16777215TiB", 16_777_215 << 40),
        ];
        for &(text, expected) in cases {
            assert_eq!(parse_size(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn parse_size_refuses_malformed_text_and_says_what_was_expected() {
        let cases: &[(&str, &str)] = &[
            ("", "empty size"),
            ("5x", "unknown unit \"x\""),
            ("64mib", "unknown unit \"mib\""),
            ("64 MiB", "unknown unit \" MiB\""),
            ("64M", "unknown unit \"M\""),
            ("-1", "is negative"),
            ("-1KiB", "is negative"),
            ("MiB", "does not start with a number"),
            ("1.5.2MiB", "malformed number \"1.5.2\""),
            ("1.5", "not a whole number of bytes"),
            ("1.5B", "not a whole number of bytes"),
            ("18446744073709551616", "too large"),
            ("16777216TiB", "too large"),
            ("99999999999999999999999", "too large"),
        ];
        for &(text, needle) in cases {
            let err = parse_size(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
