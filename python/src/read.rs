//! The readers: `replay`, `state_at` and `verify`, over a log directory.

use std::path::PathBuf;

use blackbox::Digest;
use blackbox_replay::{Order, Query, RecordType, Replay};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{InvalidInput, log_error, replay_error, time_ns, to_py, type_name};

/// An iterator over the records of a log, each a dict as `blackbox replay --json`
/// prints it.
#[pyclass(module = "blackbox._blackbox")]
#[derive(Debug)]
pub struct Records {
    replay: Replay,
}

#[pymethods]
impl Records {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        mut slf: PyRefMut<'_, Self>,
        py: Python<'py>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let replay = &mut slf.replay;
        let next = py.detach(|| replay.next_view().map(|r| r.map(|r| r.to_json())));
        match next {
            None => Ok(None),
            Some(Ok(value)) => to_py(py, &value).map(Some),
            Some(Err(e)) => Err(replay_error(&e)),
        }
    }
}

/// Strings from a str or an iterable of them.
fn strings(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(vec![s.to_str()?.to_owned()]);
    }
    let refuse = || {
        InvalidInput::new_err(format!(
            "{what} is of type {}: give a str or a list of them",
            type_name(obj)
        ))
    };
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| refuse())? {
        out.push(item?.extract::<String>().map_err(|_| refuse())?);
    }
    Ok(out)
}

/// The chain key of a keyed log, from its key file.
fn key(key_file: Option<PathBuf>) -> PyResult<Option<blackbox::ChainKey>> {
    key_file
        .map(|path| blackbox_replay::read_key_file(&path))
        .transpose()
        .map_err(|e| replay_error(&e))
}

/// The query of a reader's arguments: a time range, a seq range, kinds (globs) and
/// record types, and the chain key of a keyed log.
pub fn query(
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    kind: Option<&Bound<'_, PyAny>>,
    types: Option<&Bound<'_, PyAny>>,
    from_seq: Option<u64>,
    to_seq: Option<u64>,
    key_file: Option<PathBuf>,
) -> PyResult<Query> {
    let mut q = Query::new();
    if let Some(t) = since.filter(|t| !t.is_none()) {
        q = q.since(time_ns(t, "since")?);
    }
    if let Some(t) = until.filter(|t| !t.is_none()) {
        q = q.until(time_ns(t, "until")?);
    }
    if let Some(s) = from_seq {
        q = q.from_seq(s);
    }
    if let Some(s) = to_seq {
        q = q.to_seq(s);
    }
    if let Some(kinds) = kind.filter(|k| !k.is_none()) {
        for glob in strings(kinds, "kind")? {
            q = q.kind(&glob).map_err(|e| replay_error(&e))?;
        }
    }
    if let Some(types) = types.filter(|t| !t.is_none()) {
        let mut chosen = Vec::new();
        for name in strings(types, "types")? {
            chosen.push(
                RecordType::ALL
                    .into_iter()
                    .find(|t| t.name() == name)
                    .ok_or_else(|| {
                        replay_error(&blackbox_replay::Error::InvalidRecordType { input: name })
                    })?,
            );
        }
        q = q.types(chosen);
    }
    Ok(q.key(key(key_file)?))
}

/// The records of a log in a range, filtered by kind and type, in the order they
/// happened (or in log order).
#[pyfunction]
#[pyo3(signature = (dir, since=None, until=None, kind=None, types=None, *, from_seq=None, to_seq=None, log_order=false, key_file=None))]
#[allow(clippy::too_many_arguments)]
pub fn replay(
    py: Python<'_>,
    dir: PathBuf,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    kind: Option<&Bound<'_, PyAny>>,
    types: Option<&Bound<'_, PyAny>>,
    from_seq: Option<u64>,
    to_seq: Option<u64>,
    log_order: bool,
    key_file: Option<PathBuf>,
) -> PyResult<Records> {
    let q = query(since, until, kind, types, from_seq, to_seq, key_file)?.order(if log_order {
        Order::Log
    } else {
        Order::Happened
    });
    let replay = py
        .detach(|| {
            blackbox_replay::open_log_dir(&dir)?;
            Replay::open(&dir, &q)
        })
        .map_err(|e| replay_error(&e))?;
    Ok(Records { replay })
}

/// The state at a point in time, as `blackbox state --json` prints it.
#[pyfunction]
#[pyo3(signature = (dir, at, *, key_file=None))]
pub fn state_at<'py>(
    py: Python<'py>,
    dir: PathBuf,
    at: &Bound<'_, PyAny>,
    key_file: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let at_ns = time_ns(at, "at")?;
    let key = key(key_file)?;
    let state = py
        .detach(|| blackbox_replay::state_at(&dir, at_ns, key))
        .map_err(|e| replay_error(&e))?;
    to_py(py, &state.to_json())
}

/// Checks every checksum and the hash chain (and, given a digest, that the log still
/// holds the prefix it was taken from); returns the report `blackbox verify --json`
/// prints, or raises `LogDamaged`.
#[pyfunction]
#[pyo3(signature = (dir, digest=None, *, key_file=None))]
pub fn verify<'py>(
    py: Python<'py>,
    dir: PathBuf,
    digest: Option<&str>,
    key_file: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let digest: Option<Digest> = digest
        .map(|d| d.parse::<Digest>().map_err(|e| log_error(&e)))
        .transpose()?;
    let key = key(key_file)?;
    let report = py
        .detach(|| {
            blackbox_replay::open_log_dir(&dir)?;
            blackbox_log::verify(&dir, key.as_ref(), digest.as_ref())
                .map_err(blackbox_replay::Error::from)
        })
        .map_err(|e| replay_error(&e))?;
    to_py(
        py,
        &blackbox_replay::verify_json(&report, key.is_some(), digest.as_ref()),
    )
}

/// Time in nanoseconds since the epoch from any form a time is given in: an int, a
/// datetime with a time zone, or a string (RFC 3339, integer ns, `now`, `-5m`).
#[pyfunction]
pub fn to_ns(t: &Bound<'_, PyAny>) -> PyResult<u64> {
    time_ns(t, "the time")
}
