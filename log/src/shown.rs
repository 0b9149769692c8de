//! Input echoed in messages: a name, key, time or digest of any length is shown quoted
//! and cut to its first [`SHOWN_CHARS_MAX`] characters, so an error never prints a
//! 100 KB argument whole.

use std::fmt;

/// The most characters of an input that a message shows.
pub const SHOWN_CHARS_MAX: usize = 128;

/// An input as a message shows it: quoted and escaped as `{:?}` prints it; past
/// [`SHOWN_CHARS_MAX`] characters, its first ones, then `…` and its length in bytes.
///
/// ```
/// use blackbox_log::Shown;
///
/// assert_eq!(Shown("door").to_string(), r#""door""#);
/// let long = "a".repeat(1000);
/// assert_eq!(
///     Shown(&long).to_string(),
///     format!("{:?}… (1000 bytes)", "a".repeat(128))
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(SHOWN_CHARS_MAX) {
            None => write!(f, "{:?}", self.0),
            Some((end, _)) => {
                let head = self.0.get(..end).unwrap_or_default();
                write!(f, "{head:?}… ({} bytes)", self.0.len())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_up_to_the_limit_are_shown_whole_and_longer_ones_cut_on_a_character() {
        let exact: String = "é".repeat(SHOWN_CHARS_MAX);
        assert_eq!(Shown(&exact).to_string(), format!("{exact:?}"));
        let over = format!("{exact}z");
        assert_eq!(
            Shown(&over).to_string(),
            format!("{exact:?}… ({} bytes)", over.len())
        );
        assert_eq!(Shown("").to_string(), "\"\"");
    }
}
