//! JSON the command reads (`record` lines, `kb` values, conditions and contexts): parsed
//! strictly, and its errors said in words.
//!
//! A key given twice in one object, at any depth, is an error naming the key: JSON
//! leaves duplicates to the parser, and serde_json keeps the last one silently, so
//! `{"kind": "a", "kind": "b"}` would record `b` and a payload would lose a value.

use std::fmt;

use blackbox_log::{SHOWN_CHARS_MAX, Shown};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses JSON text, refusing a key given twice in one object.
///
/// # Errors
///
/// A sentence that says what is wrong and where (the column), never the parser's own
/// words.
pub fn parse_strict(text: &str) -> Result<Value, String> {
    parse_strict_why(text).map_err(|(why, _)| why)
}

/// [`parse_strict`], and with its error whether the text is not JSON at all (a syntax
/// error or an early end: a bare word, say), rather than JSON refused (a key twice).
///
/// # Errors
///
/// As [`parse_strict`].
pub fn parse_strict_why(text: &str) -> Result<Value, (String, bool)> {
    use serde_json::error::Category;
    serde_json::from_str::<Strict>(text)
        .map(|s| s.0)
        .map_err(|e| {
            let not_json = matches!(e.classify(), Category::Syntax | Category::Eof);
            (json_error(&e), not_json)
        })
}

/// A JSON parse error in words: where it is, not what the parser was doing.
pub fn json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "it is not valid JSON: it ends before the value does".to_owned(),
        Category::Syntax => format!("it is not valid JSON (at column {})", e.column()),
        Category::Data => {
            // Only `Strict` makes data errors, and its message is ours: drop the
            // position serde_json appends and give the column.
            let text = e.to_string();
            let ours = text.split(" at line ").next().unwrap_or(&text);
            if let Some((path, column)) = ours
                .strip_prefix(OUT_OF_RANGE)
                .and_then(|rest| rest.rsplit_once('|'))
            {
                return format!(
                    "{}: the number ending at column {column} is out of range: a number must be finite and within ±1.7976931348623157e308 (a 64-bit float)",
                    shown_path(path)
                );
            }
            format!("{ours} (at column {})", e.column())
        }
        Category::Io => "it could not be read".to_owned(),
    }
}

/// The path to a value (`values.force`, `value.mass[1]`) as a message shows it: as it
/// is, but a control character in a key escaped (`\n`), so the message stays on one
/// line, and cut as [`Shown`] cuts input (its first [`SHOWN_CHARS_MAX`] characters,
/// then `…` and its length in bytes), so a long key is not printed whole.
fn shown_path(path: &str) -> String {
    let mut shown = String::new();
    for (i, c) in path.chars().enumerate() {
        if i == SHOWN_CHARS_MAX {
            shown.push_str(&format!("… ({} bytes)", path.len()));
            break;
        }
        if c.is_control() {
            shown.extend(c.escape_debug());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// How a number out of range travels up from where serde_json found it: this, the path
/// to it (`values.force`, `value.mass[1]`), `|`, and the column where it ends.
const OUT_OF_RANGE: &str = "number out of range in ";

/// An error from inside the value at `segment` (a key, or `[i]`): a number out of range
/// gets the segment put before its path; any other error passes unchanged.
fn inside<E: de::Error>(e: E, segment: &str) -> E {
    let text = e.to_string();
    let message = text.split(" at line ").next().unwrap_or(&text);
    if let Some(rest) = message.strip_prefix(OUT_OF_RANGE) {
        let (path, column) = rest.rsplit_once('|').unwrap_or((rest, "?"));
        let joined = if path.is_empty() || path.starts_with('[') {
            format!("{segment}{path}")
        } else {
            format!("{segment}.{path}")
        };
        return E::custom(format!("{OUT_OF_RANGE}{joined}|{column}"));
    }
    if message == "number out of range" {
        // serde_json's own error, at the number itself: "… at line L column C".
        let column = text.rsplit("column ").next().unwrap_or("?");
        return E::custom(format!("{OUT_OF_RANGE}{segment}|{column}"));
    }
    e
}

/// A JSON value with no key given twice in any object.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Strict::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq
            .next_element()
            .map_err(|e| inside(e, &format!("[{}]", items.len())))?
        {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key {} appears twice in one object",
                    Shown(&key)
                )));
            }
            let Strict(v) = map.next_value().map_err(|e| inside(e, &key))?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth_and_everything_else_parses_as_serde_json_does() {
        for text in [
            r#"{"a": 1, "b": [1, 2.5, -3, "x", null, true, {"c": {}}], "d": {"e": 18446744073709551615}}"#,
            "[]",
            "\"s\"",
            "-0.0",
            "1e300",
        ] {
            let strict = parse_strict(text);
            let plain: Result<Value, _> = serde_json::from_str(text);
            assert_eq!(strict.ok(), plain.ok(), "{text}");
        }
        for (text, key) in [
            (r#"{"a": 1, "a": 2}"#, "a"),
            (r#"{"x": [{"y": {"z": 1, "z": 1}}]}"#, "z"),
        ] {
            let err = parse_strict(text).err().unwrap_or_default();
            assert!(err.contains(&format!("{key:?} appears twice")), "{err}");
            assert!(err.contains("column"), "{err}");
            assert!(!err.contains("line 1"), "{err}");
        }
    }
}
