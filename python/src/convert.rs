//! Between Python and Blackbox: JSON values, times, and errors as the package's
//! exceptions.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{IntoPyObjectExt, create_exception};
use serde_json::{Map, Number, Value};

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

/// A Python value as JSON: `None`, `bool`, `int` (64 bits), finite `float`, `str`, and
/// `dict` (string keys), `list` and `tuple` of those. `what` names the argument in the
/// error.
pub fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    from_py_at(obj, what, 0)
}

fn from_py_at(obj: &Bound<'_, PyAny>, what: &str, depth: usize) -> PyResult<Value> {
    if depth > DEPTH_MAX {
        return Err(InvalidInput::new_err(format!(
            "{what} is nested deeper than {DEPTH_MAX} levels (or holds itself): it cannot be stored as JSON"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(InvalidInput::new_err(format!(
            "{what} holds the integer {obj}, beyond 64 bits: it cannot be stored as a JSON number"
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let f = f.value();
        return Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            InvalidInput::new_err(format!(
                "{what} holds {f}, which JSON cannot hold (it has no NaN or infinity)"
            ))
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(InvalidInput::new_err(format!(
                    "{what} has the key {} of type {}: JSON object keys are strings",
                    k.repr()?,
                    type_name(&k)
                )));
            };
            map.insert(key.to_str()?.to_owned(), from_py_at(&v, what, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for item in obj.try_iter()? {
            items.push(from_py_at(&item?, what, depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(InvalidInput::new_err(format!(
        "{what} holds a value of type {}: expected None, bool, int, float, str, and dict, list or tuple of those",
        type_name(obj)
    )))
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
        | R::PrunedBefore { .. } => InvalidInput::new_err(e.to_string()),
        _ => BlackboxError::new_err(e.to_string()),
    }
}
