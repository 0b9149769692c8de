//! Between Python and Blackbox: JSON values, times, and errors as the package's
//! exceptions.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{IntoPyObjectExt, create_exception};
use std::cell::RefCell;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

create_exception!(
    blackbox,
    BlackboxError,
    PyException,
    "Every error of the blackbox package; its message is the command's one sentence."
);
create_exception!(
    blackbox,
    LogDamaged,
    BlackboxError,
    "The log's bytes are damaged, cut or changed: a checksum, the hash chain or a digest fails."
);
create_exception!(
    blackbox,
    Locked,
    BlackboxError,
    "Another writer holds the log directory's lock (one writer per log)."
);
create_exception!(
    blackbox,
    InvalidInput,
    BlackboxError,
    "An argument is refused: a kind, a name, a time, a policy, a value, a claim."
);

/// Deepest nesting of a Python value turned into JSON: deeper (or a value that holds
/// itself) is refused rather than followed.
const DEPTH_MAX: usize = 256;

/// A JSON value as Python objects: `dict`, `list`, `str`, `int`, `float`, `bool`, `None`.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_bound_py_any(py)?
            } else if let Some(u) = n.as_u64() {
                u.into_bound_py_any(py)?
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python object as a JSON value (`None`, `bool`, `int` within 64 bits, a finite
/// `float`, `str`, and `dict` with `str` keys, `list` or `tuple` of those).
pub fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let failure = RefCell::new(None);
    serde_json::to_value(AsJson::new(obj, what, &failure)).map_err(|e| refused(e, &failure))
}

/// A Python object as JSON text, written straight from the object (no [`Value`] in
/// between), its dicts' keys in their order, into `text` (replacing what it held, in
/// its allocation): an event's payload.
pub fn json_text(obj: &Bound<'_, PyAny>, what: &str, text: &mut String) -> PyResult<()> {
    let failure = RefCell::new(None);
    let mut bytes = std::mem::take(text).into_bytes();
    bytes.clear();
    serde_json::to_writer(&mut bytes, &AsJson::new(obj, what, &failure))
        .map_err(|e| refused(e, &failure))?;
    // serde_json writes UTF-8 only.
    *text = String::from_utf8(bytes).map_err(|e| InvalidInput::new_err(format!("{what}: {e}")))?;
    Ok(())
}

/// The exception a conversion stopped on (kept aside: serde's error carries only text).
fn refused(e: serde_json::Error, failure: &RefCell<Option<PyErr>>) -> PyErr {
    failure
        .borrow_mut()
        .take()
        .unwrap_or_else(|| InvalidInput::new_err(e.to_string()))
}

/// A Python object seen by serde as the JSON value it stands for: one walk serves both
/// [`from_py`] and [`json_text`]. The first refusal is kept in `failure`.
struct AsJson<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    what: &'a str,
    depth: usize,
    failure: &'a RefCell<Option<PyErr>>,
}

impl<'a, 'py> AsJson<'a, 'py> {
    fn new(
        obj: &'a Bound<'py, PyAny>,
        what: &'a str,
        failure: &'a RefCell<Option<PyErr>>,
    ) -> AsJson<'a, 'py> {
        AsJson {
            obj,
            what,
            depth: 0,
            failure,
        }
    }

    fn child<'b>(&'b self, obj: &'b Bound<'py, PyAny>) -> AsJson<'b, 'py> {
        AsJson {
            obj,
            what: self.what,
            depth: self.depth + 1,
            failure: self.failure,
        }
    }

    /// The refusal of a `str` that UTF-8 cannot encode (a lone surrogate).
    fn not_unicode(&self) -> PyErr {
        InvalidInput::new_err(format!(
            "{} holds a string with a lone surrogate, which UTF-8 (and so JSON text) cannot hold",
            self.what
        ))
    }

    fn fail<E: serde::ser::Error>(&self, e: PyErr) -> E {
        self.failure.borrow_mut().get_or_insert(e);
        E::custom("refused")
    }
}

impl Serialize for AsJson<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (obj, what) = (self.obj, self.what);
        if self.depth > DEPTH_MAX {
            return Err(self.fail(InvalidInput::new_err(format!(
                "{what} is nested deeper than {DEPTH_MAX} levels (or holds itself): it cannot be stored as JSON"
            ))));
        }
        if let Ok(text) = obj.cast::<PyString>() {
            return s.serialize_str(text.to_str().map_err(|_| self.fail(self.not_unicode()))?);
        }
        if let Ok(d) = obj.cast::<PyDict>() {
            let mut map = s.serialize_map(Some(d.len()))?;
            for (k, v) in d.iter() {
                let Ok(key) = k.cast::<PyString>() else {
                    let repr = k.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string());
                    return Err(self.fail(InvalidInput::new_err(format!(
                        "{what} has the key {repr} of type {}: JSON object keys are strings",
                        type_name(&k)
                    ))));
                };
                map.serialize_entry(
                    key.to_str().map_err(|_| self.fail(self.not_unicode()))?,
                    &self.child(&v),
                )?;
            }
            return map.end();
        }
        if obj.is_none() {
            return s.serialize_unit();
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            return s.serialize_bool(b.is_true());
        }
        if obj.cast::<PyInt>().is_ok() {
            if let Ok(i) = obj.extract::<i64>() {
                return s.serialize_i64(i);
            }
            if let Ok(u) = obj.extract::<u64>() {
                return s.serialize_u64(u);
            }
            return Err(self.fail(InvalidInput::new_err(format!(
                "{what} holds the integer {obj}, beyond 64 bits: it cannot be stored as a JSON number"
            ))));
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            let f = f.value();
            if !f.is_finite() {
                return Err(self.fail(InvalidInput::new_err(format!(
                    "{what} holds {f}, which JSON cannot hold (it has no NaN or infinity)"
                ))));
            }
            return s.serialize_f64(f);
        }
        if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
            let items = obj.try_iter().map_err(|e| self.fail(e))?;
            let mut seq = s.serialize_seq(obj.len().ok())?;
            for item in items {
                seq.serialize_element(&self.child(&item.map_err(|e| self.fail(e))?))?;
            }
            return seq.end();
        }
        Err(self.fail(InvalidInput::new_err(format!(
            "{what} holds a value of type {}: expected None, bool, int, float, str, and dict, list or tuple of those",
            type_name(obj)
        ))))
    }
}

/// The name of an object's type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A point in time as nanoseconds since the Unix epoch: an `int` of nanoseconds, a
/// `datetime` with a time zone, or a string as the command reads `--since` (RFC 3339,
/// integer nanoseconds, `now`, `-5m`).
pub fn time_ns(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if obj.cast::<PyBool>().is_ok() {
        return Err(InvalidInput::new_err(format!(
            "{what} is a bool: give a datetime, an ISO 8601 string or integer nanoseconds since the epoch"
        )));
    }
    if obj.cast::<PyInt>().is_ok() {
        return obj.extract::<u64>().map_err(|_| {
            InvalidInput::new_err(format!(
                "{what} {obj} is not a time: integer nanoseconds since the epoch are 0 to 2^64-1"
            ))
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        // The command's message, which names the text.
        return blackbox_replay::parse_time(s.to_str()?)
            .map_err(|e| InvalidInput::new_err(e.to_string()));
    }
    let py = obj.py();
    let datetime = py.import("datetime")?;
    if obj.is_instance(&datetime.getattr("datetime")?)? {
        if obj.getattr("tzinfo")?.is_none() || obj.call_method0("utcoffset")?.is_none() {
            return Err(InvalidInput::new_err(format!(
                "{what} {} has no time zone, so it names no one instant: give it one (like tzinfo=datetime.timezone.utc)",
                obj.str()?
            )));
        }
        let utc = datetime.getattr("timezone")?.getattr("utc")?;
        let epoch = datetime
            .getattr("datetime")?
            .call1((1970, 1, 1, 0, 0, 0, 0, utc))?;
        let delta = obj.call_method1("__sub__", (epoch,))?;
        let days: i128 = delta.getattr("days")?.extract()?;
        let seconds: i128 = delta.getattr("seconds")?.extract()?;
        let micros: i128 = delta.getattr("microseconds")?.extract()?;
        let ns = (days * 86_400 + seconds) * 1_000_000_000 + micros * 1_000;
        let shown = obj.str()?;
        return u64::try_from(ns).map_err(|_| {
            InvalidInput::new_err(format!("{what} {shown} is before the Unix epoch"))
        });
    }
    Err(InvalidInput::new_err(format!(
        "{what} is of type {}: give a datetime, an ISO 8601 string or integer nanoseconds since the epoch",
        type_name(obj)
    )))
}

/// The exception for an error of the log.
pub fn log_error(e: &blackbox_log::Error) -> PyErr {
    use blackbox_log::Error as L;
    let text = e.to_string();
    match e {
        L::Locked { .. } => Locked::new_err(text),
        L::Corrupt(_) | L::DigestMismatch { .. } => LogDamaged::new_err(text),
        L::NotALog { .. }
        | L::KeyRequired { .. }
        | L::WrongKey { .. }
        | L::NotKeyed { .. }
        | L::InvalidDigest { .. }
        | L::InvalidOptions { .. }
        | L::RecordTooLarge { .. } => InvalidInput::new_err(text),
        _ => BlackboxError::new_err(text),
    }
}

/// The exception for an error of the knowledge base.
pub fn kb_error(e: &blackbox::kb::Error) -> PyErr {
    use blackbox::kb::Error as K;
    match e {
        K::Log(e) => log_error(e),
        K::NoEvidence
        | K::EvidenceNotInLog { .. }
        | K::InvalidConfidence { .. }
        | K::InvalidKey { .. }
        | K::InvalidJson { .. }
        | K::UnknownVersion { .. }
        | K::NotFound { .. }
        | K::CommitTooLarge { .. }
        | K::BeforeHistory { .. } => InvalidInput::new_err(e.to_string()),
        K::BadRecord { .. } => LogDamaged::new_err(e.to_string()),
        _ => BlackboxError::new_err(e.to_string()),
    }
}

/// The exception for an error of the recorder.
pub fn engine_error(e: &blackbox::Error) -> PyErr {
    use blackbox::Error as E;
    match e {
        E::Log(e) => log_error(e),
        E::Kb(e) => kb_error(e),
        E::InvalidKind(_)
        | E::InvalidName { .. }
        | E::EventTooLarge { .. }
        | E::TooManyValues { .. }
        | E::NameLimit(_)
        | E::Policy(_)
        | E::CheckpointTooLarge { .. }
        | E::WorkingMemoryTooLarge { .. } => InvalidInput::new_err(e.to_string()),
        E::Restore { .. } => LogDamaged::new_err(e.to_string()),
        _ => BlackboxError::new_err(e.to_string()),
    }
}

/// The exception for an error of a reader (replay, state, verify).
pub fn replay_error(e: &blackbox_replay::Error) -> PyErr {
    use blackbox_replay::Error as R;
    match e {
        R::Log(e) => log_error(e),
        R::Kb(e) => kb_error(e),
        R::Decode { .. } => LogDamaged::new_err(e.to_string()),
        R::NoSuchDir { .. }
        | R::InvalidTime { .. }
        | R::InvalidDuration { .. }
        | R::InvalidSize { .. }
        | R::InvalidGlob { .. }
        | R::InvalidRecordType { .. }
        | R::InvalidKey { .. }
        | R::PrunedBefore { .. }
        | R::UnsafeOutput { .. } => InvalidInput::new_err(e.to_string()),
        _ => BlackboxError::new_err(e.to_string()),
    }
}
