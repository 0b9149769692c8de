//! One event an export reads, as every encoding sees it: decoded in place by a range
//! read, owned from a salvage.

use std::borrow::Cow;

use blackbox::codec::WrittenTier;
use serde_json::Value;

use crate::decode::{Body, BodyRef, Payload, PayloadRef, Record, RecordRef};
use crate::json::to_json;

/// One record an export reads: decoded in place by a range read, owned from a salvage.
pub(crate) enum Row<'a> {
    View(RecordRef<'a>),
    Owned(&'a Record),
}

/// An event's payload as the typed encodings store it.
pub(crate) enum RowPayload<'a> {
    /// No payload.
    None,
    /// Valid JSON text.
    Json(Cow<'a, str>),
    /// Raw bytes, or text recorded as JSON that is not valid JSON (as the JSONL export
    /// shows it: in hex, with encoding `raw`).
    Raw(&'a [u8]),
}

impl Row<'_> {
    pub(crate) fn seq(&self) -> u64 {
        match self {
            Row::View(r) => r.seq,
            Row::Owned(r) => r.seq,
        }
    }

    /// When the log wrote the record (ns).
    pub(crate) fn written_ns(&self) -> u64 {
        match self {
            Row::View(r) => r.ts_ns,
            Row::Owned(r) => r.ts_ns,
        }
    }

    /// When what the record describes happened (ns): an event's recording time.
    pub(crate) fn happened_ns(&self) -> u64 {
        match self {
            Row::View(r) => r.happened_ns(),
            Row::Owned(r) => r.happened_ns(),
        }
    }

    /// An event's kind, tier and recorded weight; `None` for another record.
    pub(crate) fn event(&self) -> Option<(&str, WrittenTier, f64)> {
        match self {
            Row::View(r) => match &r.body {
                BodyRef::Event(e) => Some((e.kind, e.tier, e.weight)),
                _ => None,
            },
            Row::Owned(r) => match &r.body {
                Body::Event(e) => Some((e.kind.as_str(), e.tier, e.weight)),
                _ => None,
            },
        }
    }

    /// An event's source, if it gave one.
    pub(crate) fn source(&self) -> Option<&str> {
        match self {
            Row::View(r) => match &r.body {
                BodyRef::Event(e) => e.source,
                _ => None,
            },
            Row::Owned(r) => match &r.body {
                Body::Event(e) => e.source.as_deref(),
                _ => None,
            },
        }
    }

    /// An event's own time (ns), if it gave one.
    pub(crate) fn event_time_ns(&self) -> Option<u64> {
        match self {
            Row::View(r) => match &r.body {
                BodyRef::Event(e) => e.event_time_ns,
                _ => None,
            },
            Row::Owned(r) => match &r.body {
                Body::Event(e) => e.event_time_ns,
                _ => None,
            },
        }
    }

    /// An event's payload: JSON text as recorded (a salvaged event's, printed again
    /// compactly), raw bytes as they are.
    pub(crate) fn payload(&self) -> RowPayload<'_> {
        match self {
            Row::View(r) => match &r.body {
                BodyRef::Event(e) => match e.payload {
                    PayloadRef::None => RowPayload::None,
                    PayloadRef::Json(b) => {
                        let valid = serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok();
                        match std::str::from_utf8(b) {
                            Ok(text) if valid => RowPayload::Json(Cow::Borrowed(text)),
                            _ => RowPayload::Raw(b),
                        }
                    }
                    PayloadRef::Raw(b) => RowPayload::Raw(b),
                },
                _ => RowPayload::None,
            },
            Row::Owned(r) => match &r.body {
                Body::Event(e) => match &e.payload {
                    Payload::None => RowPayload::None,
                    Payload::Json(v) => RowPayload::Json(Cow::Owned(v.to_string())),
                    Payload::Raw(b) => RowPayload::Raw(b),
                },
                _ => RowPayload::None,
            },
        }
    }

    /// Calls `f` with each of an event's values, in the order recorded.
    pub(crate) fn for_each_value(&self, mut f: impl FnMut(&str, f64)) {
        match self {
            Row::View(r) => {
                if let BodyRef::Event(e) = &r.body {
                    for (name, v) in e.values.iter() {
                        f(name, v);
                    }
                }
            }
            Row::Owned(r) => {
                if let Body::Event(e) = &r.body {
                    for (name, v) in &e.values {
                        f(name, *v);
                    }
                }
            }
        }
    }

    /// The record's content hash.
    pub(crate) fn hash(&self) -> [u8; 32] {
        match self {
            Row::View(r) => r.hash(),
            Row::Owned(r) => r.hash,
        }
    }

    /// The row as [`to_json`] renders it, given its content hash.
    pub(crate) fn json(&self, hash: [u8; 32]) -> Value {
        match self {
            Row::View(r) => r.to_json_with_hash(hash),
            Row::Owned(r) => to_json(r),
        }
    }
}
