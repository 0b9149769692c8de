//! The lines `blackbox record` reads (GUIDE, "Feeding blackbox record"), parsed: an
//! event `{"kind", "payload", "values", "source", "event_time", "ack"}` (only `kind` is
//! required), an operation `{"op": "set", "key", "value"}`, `{"op": "del", "key"}`,
//! `{"op": "checkpoint"}`, `{"op": "sync"}`, or a knowledge-base operation (`kb.put`,
//! `kb.refute`, `kb.retract`, `kb.revert`). Any other field is refused, so that a
//! misspelt field is not dropped silently. The command applies what [`parse_line`]
//! gives; hosts and tests can check lines the same way without recording them.

use blackbox::kb::{Conditions, Version};
use blackbox_log::{SHOWN_CHARS_MAX, Shown};
use serde_json::{Map, Value};

/// One parsed input line.
#[derive(Debug)]
pub enum Line {
    /// An event.
    Event {
        /// Its kind, checked by the policy's rule for kinds.
        kind: String,
        /// Who emitted it.
        source: Option<String>,
        /// The payload as compact JSON text.
        payload: Option<String>,
        /// Numeric values by name, in the order given.
        values: Vec<(String, f64)>,
        /// The caller's time for it (ns since the epoch).
        event_time_ns: Option<u64>,
        /// Written through `record_evidence` and answered with its seq.
        ack: bool,
    },
    /// A knowledge-base operation.
    Kb(KbOp),
    /// `{"op": "set"}`: a working-memory key set.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: Value,
    },
    /// `{"op": "del"}`: a working-memory key removed.
    Del {
        /// The key.
        key: String,
    },
    /// `{"op": "checkpoint"}`.
    Checkpoint,
    /// `{"op": "sync"}`.
    Sync,
}

impl Line {
    /// Whether the line asks for a reply: an event sent with `"ack": true`, a
    /// knowledge-base operation, a sync.
    pub fn asks_reply(&self) -> bool {
        match self {
            Line::Event { ack, .. } => *ack,
            Line::Kb(_) | Line::Sync => true,
            Line::Set { .. } | Line::Del { .. } | Line::Checkpoint => false,
        }
    }
}

/// Parses one line (not blank); the error says what is wrong with it, in one sentence
/// without the line's number (the command adds it).
///
/// # Errors
///
/// A sentence naming the field at fault, or where the text stops being JSON.
pub fn parse_line(text: &str) -> Result<Line, String> {
    let value = crate::json_input::parse_strict(text)?;
    let Value::Object(mut obj) = value else {
        return Err("expected a JSON object, like {\"kind\": \"action.grasp\"}".to_owned());
    };
    if let Some(op) = obj.remove("op") {
        let Value::String(op) = op else {
            return Err(
                "\"op\" must be a string: set, del, checkpoint, sync or a kb.* operation"
                    .to_owned(),
            );
        };
        if op.starts_with("kb.") {
            return parse_kb(&op, obj).map(Line::Kb);
        }
        let line = match op.as_str() {
            "set" => Line::Set {
                key: take_string(&mut obj, "key")?.ok_or("{\"op\": \"set\"} needs a \"key\"")?,
                value: obj
                    .remove("value")
                    .ok_or("{\"op\": \"set\"} needs a \"value\"")?,
            },
            "del" => Line::Del {
                key: take_string(&mut obj, "key")?.ok_or("{\"op\": \"del\"} needs a \"key\"")?,
            },
            "checkpoint" => Line::Checkpoint,
            "sync" => Line::Sync,
            other => {
                return Err(format!(
                    "unknown op {}: expected set, del, checkpoint, sync, {}",
                    Shown(other),
                    KB_OPS.join(", ")
                ));
            }
        };
        if let Some(field) = obj.keys().next() {
            return Err(format!(
                "unknown field {} in {{\"op\": {op:?}}}",
                Shown(field)
            ));
        }
        return Ok(line);
    }
    let kind = take_string(&mut obj, "kind")?
        .ok_or("an event needs a \"kind\", like {\"kind\": \"action.grasp\"} (or an \"op\")")?;
    blackbox::policy::validate_kind(&kind).map_err(|e| e.to_string())?;
    let source = take_string(&mut obj, "source")?;
    let payload = obj
        .remove("payload")
        .map(|p| serde_json::to_string(&p).map_err(|e| format!("payload: {e}")))
        .transpose()?;
    let mut values = Vec::new();
    match obj.remove("values") {
        None => {}
        Some(Value::Object(map)) => {
            for (name, v) in map {
                let x = v
                    .as_f64()
                    .ok_or_else(|| format!("value {} is not a number", Shown(&name)))?;
                values.push((name, x));
            }
        }
        Some(_) => {
            return Err(
                "\"values\" must be an object of numbers, like {\"force\": 3.2}".to_owned(),
            );
        }
    }
    let event_time_ns = match obj.remove("event_time") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            Some(crate::parse_time(&s).map_err(|e| format!("event_time: {e}"))?)
        }
        Some(Value::Number(n)) => Some(n.as_u64().ok_or_else(|| {
            format!("event_time {n} is not a whole, non-negative count of nanoseconds")
        })?),
        Some(_) => {
            return Err(
                "\"event_time\" must be RFC 3339 text or integer nanoseconds since the epoch"
                    .to_owned(),
            );
        }
    };
    let ack = match obj.remove("ack") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err("\"ack\" must be true or false".to_owned()),
    };
    if let Some(field) = obj.keys().next() {
        return Err(format!(
            "unknown field {}: an event has kind, payload, values, source, event_time and ack",
            Shown(field)
        ));
    }
    Ok(Line::Event {
        kind,
        source,
        payload,
        values,
        event_time_ns,
        ack,
    })
}

/// Removes a string field; an error if it is there but not a string.
fn take_string(obj: &mut Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match obj.remove(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{field:?} must be a string")),
    }
}

/// Which reply a line asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// None.
    None,
    /// An event sent with `"ack": true`.
    Ack,
    /// A knowledge-base operation.
    Kb,
}

/// The fields of a line that say which reply it asks for; every other field is passed
/// over unread (a number out of range among them included).
#[derive(serde::Deserialize)]
struct Asks {
    #[serde(default)]
    op: Option<Value>,
    #[serde(default)]
    ack: Option<Value>,
}

/// Which reply a line that could not be applied asked for, as far as it can be read.
pub fn asks_reply(text: &str) -> Reply {
    let Ok(asks) = serde_json::from_str::<Asks>(text) else {
        return Reply::None;
    };
    match asks.op {
        Some(Value::String(op)) if op.starts_with("kb.") => Reply::Kb,
        Some(_) => Reply::None,
        None if asks.ack == Some(Value::Bool(true)) => Reply::Ack,
        None => Reply::None,
    }
}

/// One knowledge-base operation of the stream.
#[derive(Debug)]
pub struct KbOp {
    /// The operation and its operands.
    pub what: What,
    /// The records it cites.
    pub evidence: Vec<Evidence>,
    /// Why (`message`, or its alias `reason`); empty when the line gives none.
    pub message: String,
    /// Who (`blackbox` when the line names no one).
    pub author: String,
}

/// What a knowledge-base operation does.
#[derive(Debug)]
pub enum What {
    /// `kb.put`: a claim.
    Put {
        /// The key claimed.
        key: String,
        /// The value claimed.
        value: Value,
        /// The claim's confidence (0.5 when the line gives none).
        confidence: f64,
        /// The conditions it holds under.
        conditions: Conditions,
    },
    /// `kb.refute`: a counterexample.
    Refute {
        /// The key.
        key: String,
        /// The value refuted.
        value: Value,
    },
    /// `kb.retract`: the key's fact withdrawn.
    Retract {
        /// The key.
        key: String,
    },
    /// `kb.revert`: every key back to its state at a version.
    Revert {
        /// The version restored.
        version: Version,
    },
}

/// One cited record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// A seq of the log.
    Seq(u64),
    /// The seq an earlier acknowledged event line of this stream got.
    Line(u64),
}

/// The author of a commit whose line names none (as `blackbox kb`'s).
const DEFAULT_AUTHOR: &str = "blackbox";

/// The ops this module reads, as the `op` field spells them.
pub const KB_OPS: [&str; 4] = ["kb.put", "kb.refute", "kb.retract", "kb.revert"];

/// Parses the fields of a `kb.*` line (`op` already removed); the error says what is
/// wrong with it.
pub fn parse_kb(op: &str, mut obj: Map<String, Value>) -> Result<KbOp, String> {
    let needs = |field: &str| format!("{{\"op\": {op:?}}} needs a {field:?}");
    let key = |obj: &mut Map<String, Value>| match obj.remove("key") {
        Some(Value::String(k)) => Ok(k),
        Some(_) => Err("\"key\" must be a string".to_owned()),
        None => Err(needs("key")),
    };
    let what = match op {
        "kb.put" => {
            let key = key(&mut obj)?;
            let value = obj.remove("value").ok_or_else(|| needs("value"))?;
            let confidence = match obj.remove("confidence") {
                None => 0.5,
                Some(Value::Number(n)) => n.as_f64().ok_or("\"confidence\" must be a number")?,
                Some(_) => return Err("\"confidence\" must be a number between 0 and 1".into()),
            };
            let conditions = match obj.remove("conditions") {
                None | Some(Value::Null) => Conditions::new(),
                Some(Value::Object(c)) => c.into_iter().collect(),
                Some(_) => {
                    return Err(
                        "\"conditions\" must be a JSON object, like {\"level\": 1}".to_owned()
                    );
                }
            };
            What::Put {
                key,
                value,
                confidence,
                conditions,
            }
        }
        "kb.refute" => What::Refute {
            key: key(&mut obj)?,
            value: obj.remove("value").ok_or_else(|| needs("value"))?,
        },
        "kb.retract" => What::Retract {
            key: key(&mut obj)?,
        },
        "kb.revert" => What::Revert {
            version: match obj.remove("version") {
                Some(Value::Number(n)) => n
                    .as_u64()
                    .ok_or("\"version\" must be a knowledge-base version (a whole number)")?,
                Some(_) => {
                    return Err(
                        "\"version\" must be a knowledge-base version (a whole number)".into(),
                    );
                }
                None => return Err(needs("version")),
            },
        },
        other => {
            return Err(format!(
                "unknown op {}: expected {}",
                Shown(other),
                KB_OPS.join(", ")
            ));
        }
    };
    let evidence = match obj.remove("evidence") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(evidence_item)
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(
                "\"evidence\" must be an array of seqs or \"line:L\" references, like [308, \"line:4\"]"
                    .to_owned(),
            );
        }
    };
    let message = match (obj.remove("message"), obj.remove("reason")) {
        (Some(_), Some(_)) => {
            return Err("give \"message\" or its alias \"reason\", not both".to_owned());
        }
        (Some(Value::String(m)), None) | (None, Some(Value::String(m))) => m,
        (None, None) => String::new(),
        _ => return Err("\"message\" (or \"reason\") must be a string".to_owned()),
    };
    let author = match obj.remove("author") {
        None => DEFAULT_AUTHOR.to_owned(),
        Some(Value::String(a)) => a,
        Some(_) => return Err("\"author\" must be a string".to_owned()),
    };
    if let Some(field) = obj.keys().next() {
        return Err(format!(
            "unknown field {} in {{\"op\": {op:?}}}",
            Shown(field)
        ));
    }
    Ok(KbOp {
        what,
        evidence,
        message,
        author,
    })
}

/// A JSON value as a message shows it: its compact text, cut as [`Shown`] cuts input
/// (its first [`SHOWN_CHARS_MAX`] characters, then `…` and its length in bytes). JSON
/// text holds no control character: it prints on one line.
fn shown_json(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SHOWN_CHARS_MAX) {
        None => text,
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
    }
}

fn evidence_item(item: &Value) -> Result<Evidence, String> {
    let bad = || {
        format!(
            "evidence {} is neither a seq nor a \"line:L\" reference to an earlier line",
            shown_json(item)
        )
    };
    match item {
        Value::Number(n) => n.as_u64().map(Evidence::Seq).ok_or_else(bad),
        // Plain decimal digits only: `u64::from_str` also takes a leading '+'.
        Value::String(s) => s
            .strip_prefix("line:")
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|l| l.parse::<u64>().ok())
            .map(Evidence::Line)
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}
