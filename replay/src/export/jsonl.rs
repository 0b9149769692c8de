//! The JSONL encoding: one event a line, the JSON object `blackbox replay --json`
//! prints with its export `weight` added.

use std::io::Write;

use serde_json::Value;

use super::{Hashing, Row, RowSink, io};
use crate::error::Result;

/// Writes rows as JSON lines into a writer, counting and hashing the bytes.
pub(crate) struct JsonlSink<'a> {
    w: Hashing<&'a mut dyn Write>,
}

impl<'a> JsonlSink<'a> {
    pub(crate) fn new(w: &'a mut dyn Write) -> JsonlSink<'a> {
        JsonlSink { w: Hashing::new(w) }
    }

    /// The bytes written and their blake3.
    pub(crate) fn finish(self) -> (u64, [u8; 32]) {
        self.w.digest()
    }
}

impl RowSink for JsonlSink<'_> {
    fn row(&mut self, row: &Row<'_>, weight: f64, hash: [u8; 32]) -> Result<()> {
        let target = std::path::Path::new("export file");
        let mut json = row.json(hash);
        if let Value::Object(o) = &mut json {
            o.insert("weight".into(), weight.into());
        }
        serde_json::to_writer(&mut self.w, &json).map_err(|e| io("write", target, e.into()))?;
        self.w.write_all(b"\n").map_err(|e| io("write", target, e))
    }
}
