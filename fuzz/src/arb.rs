//! Arbitrary values the structured targets build from the fuzzer's bytes: JSON values,
//! strings and finite numbers, bounded in depth and size.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// The deepest JSON value built: deep enough for nesting bugs, shallow enough that the
/// parsers' recursion limit (128) is never what refuses it.
const DEPTH_MAX: u32 = 4;
/// The most members of one array or object built.
const MEMBERS_MAX: usize = 6;

/// A JSON value of at most [`DEPTH_MAX`] levels: every kind of value, numbers of every
/// kind (unsigned, negative, finite floats), strings of any Unicode.
pub fn json(u: &mut Unstructured<'_>) -> Result<Value> {
    json_at(u, 0)
}

fn json_at(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let leaf_only = depth >= DEPTH_MAX;
    let pick = if leaf_only {
        u.int_in_range(0..=5)?
    } else {
        u.int_in_range(0..=7)?
    };
    Ok(match pick {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(Number::from(u.arbitrary::<u64>()?)),
        3 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
        4 => Value::Number(Number::from_f64(finite(u)?).unwrap_or_else(|| Number::from(0))),
        5 => Value::String(u.arbitrary()?),
        6 => {
            let n = u.int_in_range(0..=MEMBERS_MAX)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(json_at(u, depth + 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=MEMBERS_MAX)?;
            let mut members = Map::new();
            for _ in 0..n {
                let key: String = u.arbitrary()?;
                members.insert(key, json_at(u, depth + 1)?);
            }
            Value::Object(members)
        }
    })
}

/// A JSON object of arbitrary members.
pub fn object(u: &mut Unstructured<'_>) -> Result<Map<String, Value>> {
    let n = u.int_in_range(0..=MEMBERS_MAX)?;
    let mut members = Map::new();
    for _ in 0..n {
        let key: String = u.arbitrary()?;
        members.insert(key, json_at(u, 1)?);
    }
    Ok(members)
}

/// A finite `f64` (any bit pattern that is not NaN or infinite; `-0.0` included).
pub fn finite(u: &mut Unstructured<'_>) -> Result<f64> {
    let x = f64::from_bits(u.arbitrary()?);
    Ok(if x.is_finite() { x } else { 0.0 })
}
