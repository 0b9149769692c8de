//! `blackbox record`'s input: lines of JSON (events, working-memory operations, syncs,
//! checkpoints, knowledge-base operations) through the parser the command uses
//! (`record_input::parse_line`), and through the recording path it uses
//! (`record_apply::apply_line`) into a temporary log.
//!
//! The first byte picks the mode: even, the lines are parsed; odd, they are also
//! applied, in order, to a recorder on a new log (as `blackbox record` applies them,
//! with its default durability), which is then closed: the log must verify (every
//! checksum and the hash chain) and hold exactly the events the recorder took, in
//! order, with their fields, an acknowledged one at the seq its acknowledgement gave;
//! a line the recorder refuses gets one sentence as the parser's refusals do, and a
//! knowledge-base operation committed is acknowledged with its line's number. The rest
//! of the input is the stream, one line a `\n`. Every line the parser takes must say what an independent reading of its JSON
//! (plain serde_json, then the GUIDE's rules for each field) says it holds: the kind,
//! source, payload, values, event time and ack of an event; the key and value of a set
//! or a removal; the op, operands, evidence, message and author of a knowledge-base
//! operation; and which reply it asks for. Every line it refuses gets one sentence: not
//! empty, on one line, no control character, and short (input echoed in it is cut).

use blackbox::policy::validate_kind;
use blackbox::{Config, Durability, Recorder};
use blackbox_replay::record_apply::{AckedLines, Applied, apply_line};
use blackbox_replay::record_input::{Evidence, Line, Reply, What, asks_reply, parse_line};
use blackbox_replay::{Body, Payload, Query, RecordType, Replay, parse_time};
use serde_json::{Map, Value};

/// The longest refusal: a sentence, with at most a few inputs echoed in it, each cut to
/// its first 128 characters (`Shown`).
const REFUSAL_CHARS_MAX: usize = 1_000;

/// The target: see the module's documentation.
pub fn record_line(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let mut taken = Vec::new();
    // Numbered as the command numbers them: every line, blank ones included.
    for (number, line) in (1u64..).zip(stream.split(|&b| b == b'\n')) {
        let Ok(text) = std::str::from_utf8(line) else {
            // The command refuses a line that is not UTF-8 before parsing it.
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match parse_line(text) {
            Ok(parsed) => {
                check_taken(text, &parsed);
                taken.push((number, text, parsed));
            }
            Err(reason) => check_refusal(text, &reason),
        }
    }
    if mode % 2 == 1 {
        record(taken);
    }
}

/// An event the recorder took, as the log must hold it.
#[derive(Debug)]
struct Taken {
    kind: String,
    source: Option<String>,
    payload: Option<Value>,
    values: Vec<(String, u64)>,
    event_time_ns: Option<u64>,
    /// The seq its acknowledgement gave.
    seq: Option<u64>,
}

/// The lines the parser took, applied to a recorder on a new log; then the log read
/// back.
fn record(lines: Vec<(u64, &str, Line)>) {
    let dir = match tempfile::Builder::new()
        .prefix("record_line")
        .tempdir_in(scratch())
    {
        Ok(dir) => dir,
        Err(e) => panic!("cannot make a temporary directory: {e}"),
    };
    let recorder = Recorder::open(dir.path(), Config::new().durability(Durability::Flush))
        .unwrap_or_else(|e| panic!("cannot open a recorder on a new log: {e}"));
    let mut acked = AckedLines::default();
    let mut events = Vec::new();
    for (number, text, line) in lines {
        let event = match &line {
            Line::Event {
                kind,
                source,
                payload,
                values,
                event_time_ns,
                ..
            } => Some(Taken {
                kind: kind.clone(),
                source: source.clone(),
                payload: payload.as_deref().map(|p| {
                    serde_json::from_str(p)
                        .unwrap_or_else(|e| panic!("a payload parsed is not JSON: {e}"))
                }),
                values: values
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_bits()))
                    .collect(),
                event_time_ns: *event_time_ns,
                seq: None,
            }),
            _ => None,
        };
        match apply_line(&recorder, line, number, &mut acked) {
            Err(e) => panic!("the recorder failed on line {number} ({e}): {text:?}"),
            Ok(Err(reason)) => check_refusal(text, &reason),
            Ok(Ok(applied)) => match (applied, event) {
                (Applied::Event { seq }, Some(mut event)) => {
                    event.seq = seq;
                    events.push(event);
                }
                (Applied::Kb(ack), None) => {
                    assert_eq!(ack["line"], Value::from(number), "a commit's line");
                }
                (Applied::Op | Applied::Synced(_), None) => {}
                (applied, event) => panic!("line {number} ({event:?}) applied as {applied:?}"),
            },
        }
    }
    recorder
        .close()
        .unwrap_or_else(|e| panic!("the recorder cannot close its log: {e}"));
    let report = blackbox::log::verify(dir.path(), None, None)
        .unwrap_or_else(|e| panic!("the log recorded does not verify: {e}"));
    assert!(report.torn_tail.is_none(), "a log closed has a torn tail");
    let query = Query::new().types([RecordType::Event]);
    let replay = Replay::open(dir.path(), &query)
        .unwrap_or_else(|e| panic!("the log recorded cannot be replayed: {e}"));
    let mut held = Vec::new();
    for record in replay {
        let record = record.unwrap_or_else(|e| panic!("the log recorded cannot be read: {e}"));
        let Body::Event(e) = record.body else {
            panic!("a read of events gave {:?}", record.body);
        };
        held.push(Taken {
            kind: e.kind,
            source: e.source,
            payload: match e.payload {
                Payload::None => None,
                Payload::Json(v) => Some(v),
                Payload::Raw(bytes) => panic!("a JSON payload reads back raw: {bytes:?}"),
            },
            values: e
                .values
                .into_iter()
                .map(|(k, v)| (k, v.to_bits()))
                .collect(),
            event_time_ns: e.event_time_ns,
            seq: Some(record.seq),
        });
    }
    assert_eq!(
        held.len(),
        events.len(),
        "the log holds {held:?}, taken {events:?}"
    );
    for (got, want) in held.iter().zip(&events) {
        assert_eq!(
            (
                &got.kind,
                &got.source,
                &got.payload,
                &got.values,
                got.event_time_ns
            ),
            (
                &want.kind,
                &want.source,
                &want.payload,
                &want.values,
                want.event_time_ns
            ),
            "an event read back"
        );
        if want.seq.is_some() {
            assert_eq!(got.seq, want.seq, "an acknowledged event's seq");
        }
    }
}

/// Where the temporary logs go: memory when the system has it (`/dev/shm`).
fn scratch() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    }
}

/// A refusal is one short sentence.
fn check_refusal(text: &str, reason: &str) {
    assert!(
        !reason.trim().is_empty(),
        "a line is refused without a reason: {text:?}"
    );
    assert!(
        !reason.chars().any(char::is_control),
        "a refusal holds a control character (it would not print as one line): {reason:?}"
    );
    let chars = reason.chars().count();
    assert!(
        chars <= REFUSAL_CHARS_MAX,
        "a refusal of {chars} characters echoes too much of its line: {reason:?}"
    );
}

/// What the line says, read independently of the parser.
fn check_taken(text: &str, parsed: &Line) {
    let plain: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("the parser took text serde_json refuses ({e}): {text:?}"));
    let Value::Object(obj) = plain else {
        panic!("the parser took a line that is not an object: {text:?}");
    };
    let only = |fields: &[&str]| {
        if let Some(k) = obj.keys().find(|k| !fields.contains(&k.as_str())) {
            panic!("the parser took a line with the unknown field {k:?}: {text:?}");
        }
    };
    let string = |field: &str| obj.get(field).and_then(Value::as_str).map(str::to_owned);
    let asks = asks_reply(text);
    match parsed {
        Line::Event {
            kind,
            source,
            payload,
            values,
            event_time_ns,
            ack,
        } => {
            only(&["kind", "payload", "values", "source", "event_time", "ack"]);
            assert_eq!(Some(kind.clone()), string("kind"), "kind");
            assert!(
                validate_kind(kind).is_ok(),
                "a kind the policy refuses was taken: {kind:?}"
            );
            assert_eq!(source, &string("source"), "source");
            assert_eq!(
                payload,
                &obj.get("payload").map(Value::to_string),
                "payload"
            );
            let want_values: Vec<(String, u64)> = match obj.get("values") {
                None => Vec::new(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| match v.as_f64() {
                        Some(x) => (k.clone(), x.to_bits()),
                        None => panic!("a value that is not a number was taken: {text:?}"),
                    })
                    .collect(),
                Some(other) => panic!("values of {other} were taken"),
            };
            let got_values: Vec<(String, u64)> = values
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect();
            assert_eq!(got_values, want_values, "values");
            let want_time = match obj.get("event_time") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => match parse_time(s) {
                    Ok(t) => Some(t),
                    Err(e) => panic!("an event time parse_time refuses was taken ({e})"),
                },
                Some(Value::Number(n)) => n.as_u64(),
                Some(other) => panic!("an event time of {other} was taken"),
            };
            assert_eq!(*event_time_ns, want_time, "event time");
            let want_ack = obj.get("ack").is_some_and(|a| a == &Value::Bool(true));
            assert_eq!(*ack, want_ack, "ack");
            let want_asks = if *ack { Reply::Ack } else { Reply::None };
            assert_eq!(asks, want_asks, "the reply an event asks for");
            assert_eq!(
                parsed.asks_reply(),
                *ack,
                "whether an event asks for a reply"
            );
        }
        Line::Set { key, value } => {
            only(&["op", "key", "value"]);
            assert_eq!(string("op").as_deref(), Some("set"), "op");
            assert_eq!(Some(key.clone()), string("key"), "key");
            assert_eq!(Some(value), obj.get("value"), "value");
            assert!(!parsed.asks_reply(), "a set asks for no reply");
        }
        Line::Del { key } => {
            only(&["op", "key"]);
            assert_eq!(string("op").as_deref(), Some("del"), "op");
            assert_eq!(Some(key.clone()), string("key"), "key");
            assert!(!parsed.asks_reply(), "a removal asks for no reply");
        }
        Line::Checkpoint => {
            only(&["op"]);
            assert_eq!(string("op").as_deref(), Some("checkpoint"), "op");
        }
        Line::Sync => {
            only(&["op"]);
            assert_eq!(string("op").as_deref(), Some("sync"), "op");
            assert!(parsed.asks_reply(), "a sync asks for a reply");
        }
        Line::Kb(op) => {
            assert_eq!(asks, Reply::Kb, "a knowledge-base line asks for its reply");
            assert!(
                parsed.asks_reply(),
                "a knowledge-base operation asks for a reply"
            );
            let name = string("op").unwrap_or_default();
            let common = ["op", "evidence", "message", "reason", "author"];
            let operands: &[&str] = match (&op.what, name.as_str()) {
                (What::Put { .. }, "kb.put") => &["key", "value", "confidence", "conditions"],
                (What::Refute { .. }, "kb.refute") => &["key", "value"],
                (What::Retract { .. }, "kb.retract") => &["key"],
                (What::Revert { .. }, "kb.revert") => &["version"],
                (what, name) => panic!("the op {name:?} was taken as {what:?}"),
            };
            let fields: Vec<&str> = common.iter().chain(operands).copied().collect();
            only(&fields);
            check_kb_operands(&obj, &op.what);
            let want_evidence: Vec<Evidence> = match obj.get("evidence") {
                None => Vec::new(),
                Some(Value::Array(items)) => items.iter().map(evidence).collect(),
                Some(other) => panic!("evidence of {other} was taken"),
            };
            assert_eq!(op.evidence, want_evidence, "evidence");
            let message = string("message")
                .or_else(|| string("reason"))
                .unwrap_or_default();
            assert!(
                !(obj.contains_key("message") && obj.contains_key("reason")),
                "both a message and a reason were taken"
            );
            assert_eq!(op.message, message, "message");
            assert_eq!(
                op.author,
                string("author").unwrap_or("blackbox".to_owned()),
                "author"
            );
        }
    }
}

/// An evidence item the parser took, as the GUIDE spells it: a seq, or `"line:L"` with
/// L in plain decimal digits.
fn evidence(item: &Value) -> Evidence {
    match item {
        Value::Number(n) => match n.as_u64() {
            Some(seq) => Evidence::Seq(seq),
            None => panic!("evidence {n} was taken"),
        },
        Value::String(s) => {
            let digits = s.strip_prefix("line:").unwrap_or("");
            assert!(
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
                "evidence {s:?} was taken"
            );
            match digits.parse() {
                Ok(line) => Evidence::Line(line),
                Err(e) => panic!("evidence {s:?} was taken ({e})"),
            }
        }
        other => panic!("evidence {other} was taken"),
    }
}

fn check_kb_operands(obj: &Map<String, Value>, what: &What) {
    let key = obj.get("key").and_then(Value::as_str);
    match what {
        What::Put {
            key: k,
            value,
            confidence,
            conditions,
        } => {
            assert_eq!(Some(k.as_str()), key, "key");
            assert_eq!(Some(value), obj.get("value"), "value");
            let want = obj.get("confidence").map_or(Some(0.5), Value::as_f64);
            assert_eq!(
                want.map(f64::to_bits),
                Some(confidence.to_bits()),
                "confidence"
            );
            let want: Map<String, Value> = match obj.get("conditions") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(c)) => c.clone(),
                Some(other) => panic!("conditions of {other} were taken"),
            };
            let got: Map<String, Value> = conditions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(got, want, "conditions");
        }
        What::Refute { key: k, value } => {
            assert_eq!(Some(k.as_str()), key, "key");
            assert_eq!(Some(value), obj.get("value"), "value");
        }
        What::Retract { key: k } => assert_eq!(Some(k.as_str()), key, "key"),
        What::Revert { version } => {
            assert_eq!(
                obj.get("version").and_then(Value::as_u64),
                Some(*version),
                "version"
            );
        }
    }
}
