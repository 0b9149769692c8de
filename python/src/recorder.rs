//! `Recorder`, its working memory and its knowledge base.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;

use blackbox::kb::{AsOf, Conditions, KnowledgeBase, Provenance};
use blackbox::policy::Policy;
use blackbox::{Config, Durability, Event, LogOptions, Overflow, Seq};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList};
use serde_json::{Value, json};
use std::sync::OnceLock;

use crate::convert::{
    InvalidInput, engine_error, from_py, json_text, kb_error, replay_error, time_ns, to_py,
    type_name,
};

/// The author of a knowledge-base commit that names none (as the command's).
const DEFAULT_AUTHOR: &str = "blackbox";

/// A flight recorder over the log in a directory (`blackbox.Recorder`).
#[pyclass(module = "blackbox._blackbox", frozen)]
#[derive(Debug)]
pub struct Recorder {
    inner: Arc<blackbox::Recorder>,
    /// What the first `close` returned: later ones return it again.
    closed: OnceLock<Option<u64>>,
}

#[pymethods]
impl Recorder {
    #[new]
    #[pyo3(signature = (dir, policy=None, durability="flush", *, overflow="block", key_file=None, segment_bytes=None, restore_working_memory=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dir: PathBuf,
        policy: Option<&Bound<'_, PyAny>>,
        durability: &str,
        overflow: &str,
        key_file: Option<PathBuf>,
        segment_bytes: Option<u64>,
        restore_working_memory: bool,
    ) -> PyResult<Recorder> {
        let durability = match durability {
            "sync" => Durability::Sync,
            "flush" => Durability::Flush,
            "buffered" => Durability::Buffered,
            other => {
                return Err(InvalidInput::new_err(format!(
                    "unknown durability {other:?}: expected \"sync\", \"flush\" or \"buffered\""
                )));
            }
        };
        let overflow = match overflow {
            "block" => Overflow::Block,
            "drop" => Overflow::Drop,
            other => {
                return Err(InvalidInput::new_err(format!(
                    "unknown overflow {other:?}: expected \"block\" or \"drop\""
                )));
            }
        };
        let mut config = Config::new()
            .durability(durability)
            .overflow(overflow)
            .restore_working_memory(restore_working_memory);
        if let Some(policy) = policy {
            config = config.policy(policy_from(policy)?);
        }
        let key = key_file
            .map(|path| blackbox_replay::read_key_file(&path))
            .transpose()
            .map_err(|e| replay_error(&e))?;
        let mut log = LogOptions::new().key(key);
        if let Some(bytes) = segment_bytes {
            if bytes < 4096 {
                return Err(InvalidInput::new_err(format!(
                    "segment_bytes {bytes} is too small: give at least 4096 bytes"
                )));
            }
            log = log.segment_bytes_max(bytes);
        }
        config = config.log_options(log);
        let recorder = py
            .detach(|| blackbox::Recorder::open(&dir, config))
            .map_err(|e| engine_error(&e))?;
        Ok(Recorder {
            inner: Arc::new(recorder),
            closed: OnceLock::new(),
        })
    }

    /// Records an event; never waits for the disk (unless the writer is behind and
    /// overflow is "block").
    #[pyo3(signature = (kind, payload=None, values=None, source=None, event_time_ns=None))]
    fn record(
        &self,
        py: Python<'_>,
        kind: &str,
        payload: Option<&Bound<'_, PyAny>>,
        values: Option<&Bound<'_, PyAny>>,
        source: Option<&str>,
        event_time_ns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let parts = EventParts::new(payload, values, event_time_ns)?;
        let values = parts.values();
        let event = parts.event(kind, source, &values);
        // The interpreter is let go only while the writer's channel is full: handing an
        // event over takes a fraction of a microsecond, letting go and taking the
        // interpreter back about as long again.
        self.inner
            .record_waiting_in(&event, |send| py.detach(send))
            .map_err(|e| engine_error(&e))
    }

    /// Records an event whatever its kind's tier, and returns its seq once it is
    /// written: the seq a knowledge-base claim cites as evidence.
    #[pyo3(signature = (kind, payload=None, values=None, source=None, event_time_ns=None))]
    fn record_evidence(
        &self,
        py: Python<'_>,
        kind: &str,
        payload: Option<&Bound<'_, PyAny>>,
        values: Option<&Bound<'_, PyAny>>,
        source: Option<&str>,
        event_time_ns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let parts = EventParts::new(payload, values, event_time_ns)?;
        let values = parts.values();
        let event = parts.event(kind, source, &values);
        py.detach(|| self.inner.record_evidence(&event))
            .map(|s| s.0)
            .map_err(|e| engine_error(&e))
    }

    /// The working memory's handle (the package wraps it in a mutable mapping).
    #[getter]
    fn _working(&self) -> Working {
        Working {
            inner: Arc::clone(&self.inner),
        }
    }

    /// The knowledge base, opened on first use.
    #[getter]
    fn kb(&self) -> Kb {
        Kb {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Appends a checkpoint of the working memory; returns its seq.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.inner.checkpoint())
            .map(|s| s.0)
            .map_err(|e| engine_error(&e))
    }

    /// Returns once every event recorded before it is durable, with the last seq
    /// written (None for an empty log).
    fn sync(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        py.detach(|| self.inner.sync())
            .map(|s| s.map(|s| s.0))
            .map_err(|e| engine_error(&e))
    }

    /// Per-kind counters: running totals since the log was created.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = py
            .detach(|| self.inner.stats())
            .map_err(|e| engine_error(&e))?;
        let out = PyDict::new(py);
        for (kind, c) in &stats {
            out.set_item(kind, to_py(py, &blackbox_replay::counters_json(c))?)?;
        }
        Ok(out)
    }

    /// Closes the log (summaries, accounting, a checkpoint, sync); returns the last
    /// seq. Closing again returns the same.
    fn close(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        if let Some(&last) = self.closed.get() {
            return Ok(last);
        }
        // No lock is held across the close: another thread waiting for one with the
        // interpreter held would keep this one from taking the interpreter back.
        match py.detach(|| self.inner.close()) {
            Ok(last) => {
                let last = last.map(|s| s.0);
                Ok(*self.closed.get_or_init(|| last))
            }
            Err(blackbox::Error::Closed) if self.closed.get().is_some() => {
                Ok(self.closed.get().copied().flatten())
            }
            Err(e) => Err(engine_error(&e)),
        }
    }
}

/// A policy from a path to its TOML file, or from a dict shaped as that TOML.
fn policy_from(policy: &Bound<'_, PyAny>) -> PyResult<Policy> {
    if policy.cast::<PyDict>().is_ok() {
        let value = from_py(policy, "policy")?;
        let text = toml::to_string(&value).map_err(|e| {
            InvalidInput::new_err(format!("the policy dict cannot be written as TOML: {e}"))
        })?;
        return Policy::from_toml_str(&text).map_err(|e| InvalidInput::new_err(e.to_string()));
    }
    let path: PathBuf = policy.extract().map_err(|_| {
        InvalidInput::new_err(format!(
            "policy is of type {}: give the path of a policy file or a dict",
            type_name(policy)
        ))
    })?;
    Policy::from_toml_file(&path).map_err(|e| InvalidInput::new_err(e.to_string()))
}

thread_local! {
    /// The buffer a payload's JSON text is written into, reused from event to event
    /// (a thread records one event at a time).
    static PAYLOAD_TEXT: Cell<String> = const { Cell::new(String::new()) };
}

/// A reused payload buffer larger than this is let go rather than kept.
const PAYLOAD_TEXT_KEPT: usize = 64 << 10;

/// What an event owns, converted from Python before the interpreter is let go.
struct EventParts<'a> {
    payload: Payload<'a>,
    values: Vec<(String, f64)>,
    event_time_ns: Option<u64>,
}

enum Payload<'a> {
    None,
    Json(String),
    Raw(&'a [u8]),
}

impl<'a> EventParts<'a> {
    fn new(
        payload: Option<&'a Bound<'_, PyAny>>,
        values: Option<&Bound<'_, PyAny>>,
        event_time_ns: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<EventParts<'a>> {
        let payload = match payload {
            None => Payload::None,
            Some(p) if p.is_none() => Payload::None,
            Some(p) => match p.cast::<PyBytes>() {
                Ok(b) => Payload::Raw(b.as_bytes()),
                Err(_) => {
                    let mut text = PAYLOAD_TEXT.take();
                    json_text(p, "payload", &mut text)?;
                    Payload::Json(text)
                }
            },
        };
        let mut named = Vec::new();
        if let Some(values) = values.filter(|v| !v.is_none()) {
            let dict = values.cast::<PyDict>().map_err(|_| {
                InvalidInput::new_err(format!(
                    "values is of type {}: give a dict of names to numbers",
                    type_name(values)
                ))
            })?;
            for (k, v) in dict.iter() {
                let name: String = k.extract().map_err(|_| {
                    InvalidInput::new_err(format!(
                        "values has the key {} of type {}: value names are strings",
                        k.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string()),
                        type_name(&k)
                    ))
                })?;
                let number: f64 = v.extract().map_err(|_| {
                    InvalidInput::new_err(format!(
                        "value {name:?} is of type {}: values are numbers",
                        type_name(&v)
                    ))
                })?;
                named.push((name, number));
            }
        }
        let event_time_ns = event_time_ns
            .filter(|t| !t.is_none())
            .map(|t| time_ns(t, "event_time_ns"))
            .transpose()?;
        Ok(EventParts {
            payload,
            values: named,
            event_time_ns,
        })
    }

    /// The event, borrowing these parts and the names given.
    fn event<'e>(
        &'e self,
        kind: &'e str,
        source: Option<&'e str>,
        values: &'e [(&'e str, f64)],
    ) -> Event<'e> {
        let mut event = Event::new(kind).values(values);
        if let Some(s) = source {
            event = event.source(s);
        }
        if let Some(t) = self.event_time_ns {
            event = event.event_time_ns(t);
        }
        match &self.payload {
            Payload::None => event,
            Payload::Json(text) => event.json(text),
            Payload::Raw(bytes) => event.raw(bytes),
        }
    }

    /// The values as the event borrows them.
    fn values(&self) -> Vec<(&str, f64)> {
        self.values.iter().map(|(n, v)| (n.as_str(), *v)).collect()
    }
}

impl Drop for EventParts<'_> {
    fn drop(&mut self) {
        if let Payload::Json(text) = &mut self.payload
            && text.capacity() <= PAYLOAD_TEXT_KEPT
        {
            PAYLOAD_TEXT.set(std::mem::take(text));
        }
    }
}

/// The working memory of a recorder: every change reaches the log.
#[pyclass(module = "blackbox._blackbox", frozen)]
#[derive(Debug)]
pub struct Working {
    inner: Arc<blackbox::Recorder>,
}

#[pymethods]
impl Working {
    /// The value of `key`, or None.
    fn get<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .working()
            .get(key)
            .map(|v| to_py(py, &v))
            .transpose()
    }

    /// Sets `key`; returns whether it was there before.
    fn set(&self, py: Python<'_>, key: String, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        let value = from_py(value, "the working-memory value")?;
        py.detach(|| self.inner.working().set(key, value))
            .map(|old| old.is_some())
            .map_err(|e| engine_error(&e))
    }

    /// Removes `key`; returns whether it was there.
    fn remove(&self, py: Python<'_>, key: &str) -> bool {
        py.detach(|| self.inner.working().remove(key)).is_some()
    }

    /// The keys, sorted.
    fn keys(&self) -> Vec<String> {
        self.inner.working().snapshot().into_keys().collect()
    }

    /// The whole memory as a dict.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (k, v) in self.inner.working().snapshot() {
            out.set_item(k, to_py(py, &v)?)?;
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.inner.working().len()
    }
}

/// The knowledge base of a recorder: facts with confidence and evidence, each commit a
/// record of the log.
#[pyclass(module = "blackbox._blackbox", frozen)]
#[derive(Debug)]
pub struct Kb {
    inner: Arc<blackbox::Recorder>,
}

impl Kb {
    fn base(&self, py: Python<'_>) -> PyResult<&KnowledgeBase> {
        py.detach(|| self.inner.kb()).map_err(|e| engine_error(&e))
    }
}

/// The provenance of a write: evidence seqs, author and message.
fn provenance(
    evidence: &Bound<'_, PyAny>,
    message: Option<String>,
    author: Option<String>,
) -> PyResult<Provenance> {
    let seqs: Vec<u64> = if evidence.is_none() {
        Vec::new()
    } else if evidence.cast::<PyInt>().is_ok() {
        vec![evidence.extract()?]
    } else {
        evidence.extract().map_err(|_| {
            InvalidInput::new_err(format!(
                "evidence is of type {}: give the seqs of log records (a list of ints, as record_evidence returns them)",
                type_name(evidence)
            ))
        })?
    };
    Ok(Provenance::new(seqs.into_iter().map(Seq))
        .author(author.unwrap_or_else(|| DEFAULT_AUTHOR.to_owned()))
        .message(message.unwrap_or_default()))
}

/// A commit's acknowledgement as the command's: `{"version", "outcome", "seq"}`.
fn committed<'py>(
    py: Python<'py>,
    result: blackbox::kb::Result<blackbox::kb::Committed>,
) -> PyResult<Bound<'py, PyAny>> {
    let c = result.map_err(|e| kb_error(&e))?;
    to_py(
        py,
        &json!({"version": c.version, "outcome": c.outcome.name(), "seq": c.seq}),
    )
}

#[pymethods]
impl Kb {
    /// Claims `key = value` with a confidence, citing the log records behind it.
    #[pyo3(signature = (key, value, confidence, evidence, conditions=None, message=None, author=None))]
    #[allow(clippy::too_many_arguments)]
    fn put<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: &Bound<'_, PyAny>,
        confidence: f64,
        evidence: &Bound<'_, PyAny>,
        conditions: Option<&Bound<'_, PyAny>>,
        message: Option<String>,
        author: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let value = from_py(value, "value")?;
        let conditions: Conditions = match conditions.filter(|c| !c.is_none()) {
            None => Conditions::new(),
            Some(c) => match from_py(c, "conditions")? {
                Value::Object(map) => map.into_iter().collect(),
                _ => {
                    return Err(InvalidInput::new_err(
                        "conditions must be a dict, like {\"level\": 1}",
                    ));
                }
            },
        };
        let provenance = provenance(evidence, message, author)?;
        let kb = self.base(py)?;
        let result = py.detach(|| kb.assert(&key, value, confidence, &conditions, provenance));
        committed(py, result)
    }

    /// Refutes `key = value` (a counterexample), citing the records that show it.
    #[pyo3(signature = (key, value, evidence, message=None, author=None))]
    fn refute<'py>(
        &self,
        py: Python<'py>,
        key: String,
        value: &Bound<'_, PyAny>,
        evidence: &Bound<'_, PyAny>,
        message: Option<String>,
        author: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let value = from_py(value, "value")?;
        let provenance = provenance(evidence, message, author)?;
        let kb = self.base(py)?;
        let result = py.detach(|| kb.refute(&key, &value, provenance));
        committed(py, result)
    }

    /// Withdraws the fact of `key`.
    #[pyo3(signature = (key, evidence=None, message=None, author=None))]
    fn retract<'py>(
        &self,
        py: Python<'py>,
        key: String,
        evidence: Option<&Bound<'_, PyAny>>,
        message: Option<String>,
        author: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let none = py.None().into_bound(py);
        let provenance = provenance(evidence.unwrap_or(&none), message, author)?;
        let kb = self.base(py)?;
        let result = py.detach(|| kb.retract(&key, provenance));
        committed(py, result)
    }

    /// Puts every key back to its state right after `version`.
    #[pyo3(signature = (version, evidence=None, message=None, author=None))]
    fn revert<'py>(
        &self,
        py: Python<'py>,
        version: u64,
        evidence: Option<&Bound<'_, PyAny>>,
        message: Option<String>,
        author: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let none = py.None().into_bound(py);
        let provenance = provenance(evidence.unwrap_or(&none), message, author)?;
        let kb = self.base(py)?;
        let result = py.detach(|| kb.revert_to(version, provenance));
        committed(py, result)
    }

    /// The fact of `key` as `blackbox kb get --json` prints it, or None: now, right
    /// after version `as_of` (an int), or as of a time (`as_of` a datetime or a string,
    /// or `at` in any time form).
    #[pyo3(signature = (key, as_of=None, *, at=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        as_of: Option<&Bound<'_, PyAny>>,
        at: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let when = match (as_of.filter(|a| !a.is_none()), at.filter(|a| !a.is_none())) {
            (Some(_), Some(_)) => {
                return Err(InvalidInput::new_err(
                    "give as_of (a version) or at (a time), not both",
                ));
            }
            (Some(v), None) if v.cast::<PyInt>().is_ok() => {
                Some(AsOf::Version(v.extract().map_err(|_| {
                    InvalidInput::new_err(format!("as_of {v} is not a knowledge-base version"))
                })?))
            }
            (Some(t), None) | (None, Some(t)) => Some(AsOf::Time(time_ns(t, "as_of")?)),
            (None, None) => None,
        };
        let kb = self.base(py)?;
        let fact = py
            .detach(|| match when {
                Some(at) => kb.get_as_of(key, at),
                None => kb.get(key),
            })
            .map_err(|e| kb_error(&e))?;
        match fact {
            Some(f) => to_py(py, &blackbox_replay::fact_json(&f)),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// Every version that changed `key`, as `blackbox kb history --json` prints them.
    fn history<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyList>> {
        let kb = self.base(py)?;
        let entries = py
            .detach(|| -> blackbox_replay::Result<Vec<Value>> {
                let view = kb.view();
                let from = view.history_from()?;
                kb.history(key)?
                    .into_iter()
                    .map(|(version, fact)| {
                        blackbox_replay::history_entry(view, from, version, fact.as_ref())
                    })
                    .collect()
            })
            .map_err(|e| replay_error(&e))?;
        let out = PyList::empty(py);
        for e in &entries {
            out.append(to_py(py, e)?)?;
        }
        Ok(out)
    }

    /// The facts with an open contradiction (a rival claim, a refutation).
    fn contradictions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let kb = self.base(py)?;
        let facts = py
            .detach(|| kb.contradictions())
            .map_err(|e| kb_error(&e))?;
        let out = PyList::empty(py);
        for f in &facts {
            out.append(to_py(py, &blackbox_replay::fact_json(f))?)?;
        }
        Ok(out)
    }

    /// The claims rejected (refuted, or their confidence fell too low), of `key` or of
    /// every key, as `blackbox kb rejected --json` prints them.
    #[pyo3(signature = (key=None))]
    fn rejected<'py>(&self, py: Python<'py>, key: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let kb = self.base(py)?;
        let entries = py
            .detach(|| -> blackbox_replay::Result<Vec<Value>> {
                kb.rejected()?
                    .iter()
                    .filter(|r| key.is_none_or(|k| r.key == k))
                    .map(|r| blackbox_replay::rejection_json(kb.view(), r))
                    .collect()
            })
            .map_err(|e| replay_error(&e))?;
        let out = PyList::empty(py);
        for e in &entries {
            out.append(to_py(py, e)?)?;
        }
        Ok(out)
    }
}
