//! What a host records.

use crate::codec::Encoding;

/// An event to record: a kind (a dotted name such as `action.grasp`), and optionally a
/// source, the caller's own event time, a payload and numeric values that summaries
/// aggregate. Borrowed: nothing is copied until the recorder keeps the event.
///
/// ```
/// use blackbox::Event;
/// let values = [("force", 3.2), ("width", 0.04)];
/// let event = Event::new("action.grasp")
///     .source("arm")
///     .json(r#"{"object":"cup"}"#)
///     .values(&values);
/// assert_eq!(event.kind(), "action.grasp");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub(crate) kind: &'a str,
    pub(crate) source: Option<&'a str>,
    pub(crate) event_time_ns: Option<u64>,
    pub(crate) encoding: Encoding,
    pub(crate) payload: &'a [u8],
    pub(crate) values: &'a [(&'a str, f64)],
}

impl<'a> Event<'a> {
    /// An event of `kind` with nothing else.
    pub fn new(kind: &'a str) -> Event<'a> {
        Event {
            kind,
            source: None,
            event_time_ns: None,
            encoding: Encoding::None,
            payload: &[],
            values: &[],
        }
    }

    /// Who emitted it (a component, a sensor, an agent).
    pub fn source(mut self, source: &'a str) -> Self {
        self.source = Some(source);
        self
    }

    /// The caller's own time for the event, ns since the Unix epoch. Kept apart from
    /// the recorder's timestamp, which orders the log.
    pub fn event_time_ns(mut self, ns: u64) -> Self {
        self.event_time_ns = Some(ns);
        self
    }

    /// A JSON payload (the recorder stores the text as given; it does not parse it).
    pub fn json(mut self, json: &'a str) -> Self {
        self.encoding = Encoding::Json;
        self.payload = json.as_bytes();
        self
    }

    /// An opaque payload.
    pub fn raw(mut self, bytes: &'a [u8]) -> Self {
        self.encoding = Encoding::Raw;
        self.payload = bytes;
        self
    }

    /// Numeric values, by name; summaries aggregate them.
    pub fn values(mut self, values: &'a [(&'a str, f64)]) -> Self {
        self.values = values;
        self
    }

    /// The kind.
    pub fn kind(&self) -> &'a str {
        self.kind
    }
}
