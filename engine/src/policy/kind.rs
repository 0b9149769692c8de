//! Event kinds: what a valid kind is ([`validate_kind`]) and how a refused one is told.

use std::fmt;

/// The longest kind [`validate_kind`] accepts, in bytes.
pub const KIND_BYTES_MAX: usize = 128;
// `KindError::LENGTH` spells the bound out so that it can be a `&'static str`.
const _: () = assert!(KIND_BYTES_MAX == 128);

/// Checks that `kind` is a valid event kind.
///
/// A kind is a dotted name such as `sensor.imu.accel`:
///
/// - it is 1 to [`KIND_BYTES_MAX`] (128) bytes long;
/// - it is one or more segments separated by single dots, so it neither starts nor ends
///   with a dot and has no `..`;
/// - each segment is non-empty and made only of ASCII letters, digits, `_` and `-` (so
///   no whitespace).
///
/// # Errors
///
/// A [`KindError`] naming the kind and the first of these rules it breaks.
pub fn validate_kind(kind: &str) -> Result<(), KindError> {
    let broken = |rule: &'static str| {
        Err(KindError {
            kind: kind.to_owned(),
            rule,
        })
    };
    if kind.is_empty() || kind.len() > KIND_BYTES_MAX {
        return broken(KindError::LENGTH);
    }
    if kind.starts_with('.') || kind.ends_with('.') {
        return broken(KindError::EDGE_DOT);
    }
    let mut previous_dot = false;
    for byte in kind.bytes() {
        match byte {
            b'.' if previous_dot => return broken(KindError::EMPTY_SEGMENT),
            b'.' => previous_dot = true,
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' => previous_dot = false,
            _ => return broken(KindError::CHARACTER),
        }
    }
    Ok(())
}

/// A kind that [`validate_kind`] refuses, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindError {
    /// The refused kind.
    pub kind: String,
    /// The rule it breaks, one of the `KindError` constants.
    pub rule: &'static str,
}

impl KindError {
    /// The kind is empty or longer than [`KIND_BYTES_MAX`] bytes.
    pub const LENGTH: &'static str = "a kind is 1 to 128 bytes long";
    /// The kind starts or ends with a dot.
    pub const EDGE_DOT: &'static str = "a kind neither starts nor ends with a dot";
    /// The kind has two dots in a row.
    pub const EMPTY_SEGMENT: &'static str =
        "segments are separated by single dots and are never empty";
    /// The kind has a byte other than an ASCII letter, digit, `_`, `-` or `.`.
    pub const CHARACTER: &'static str =
        "segments are made only of ASCII letters, digits, '_' and '-'";
}

impl fmt::Display for KindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A kind can come from untrusted input of any length; show a bounded prefix.
        write!(
            f,
            "invalid kind {}: {}",
            blackbox_log::Shown(&self.kind),
            self.rule
        )
    }
}

impl std::error::Error for KindError {}
