//! Blackbox's replay: range reads over a recorder's log with typed records, folds that
//! rebuild derived state, JSON rendering and export; and the `blackbox` command built on
//! them.
//!
//! # Main items
//!
//! - [`Query`]: what to read: a seq range, a time range, kind globs and record types.
//! - [`Replay`]: an iterator of typed [`Record`]s over a log directory for a query. It
//!   resolves interned names through the log's dictionary records even when the range
//!   starts mid-log, and checks every block it returns (checksums and hash chain) as
//!   the log's reader does.
//!   [`Replay::next_view`] hands out each record decoded in place ([`RecordRef`]: an
//!   event's kind, source and payload borrowed, nothing allocated), with the owned
//!   form on request ([`RecordRef::into_owned`]).
//! - [`fold()`]: folds the records of a query in log order into any derived state.
//! - [`salvage()`]: every intact record of a damaged log that a query selects, and
//!   exactly what was lost between them.
//! - [`Decoder`]: turns one [`LogRecord`](blackbox_log::LogRecord) into a [`Record`],
//!   for hosts that read the log themselves.
//! - [`to_json`]: a record as the JSON object `blackbox replay --json` prints.
//! - [`stats()`], [`export_jsonl`], [`export_parquet`], [`export_mcap`]: the log's
//!   totals, and the JSONL, Parquet and MCAP exports with their manifest; [`Weights`]: the export weights, computed from the log;
//!   [`check_export`]: whether an exported file is still what its manifest says.
//! - [`state_at`]: time travel: the working memory, the knowledge base and the
//!   accounting totals at any point in time; [`kb_view`]: the
//!   knowledge base (a copy of the recorder's view caught up with the log, or rebuilt from it), for reading without the writer's lock.
//! - [`record_input::parse_line`]: a line of `blackbox record`'s input, parsed as the
//!   command parses it, and [`record_apply::apply_line`]: the line applied to a running
//!   recorder as the command applies it; [`json_input::parse_strict`]: JSON refusing a
//!   key given twice.
//! - [`import_mcap::import_mcap`]: an MCAP recording recorded into a log through a
//!   policy, each message at its log time.
//! - [`write_report`]: an incident (or any window, or the whole log) as one
//!   self-contained HTML page.
//! - [`verify_json`], [`history_entry`], [`rejection_json`]: reports as the command's
//!   `--json` prints them.
//! - [`parse_time`], [`format_time`], [`parse_duration`], [`parse_size`]: the command's
//!   argument formats.
//!
//! # Example
//!
//! ```
//! use blackbox::{Config, Event, Recorder};
//! use blackbox_replay::{Body, Query, RecordType, Replay};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let recorder = Recorder::open(dir.path(), Config::new())?;
//! recorder.record(&Event::new("action.grasp").json(r#"{"object":"cup"}"#))?;
//! recorder.record(&Event::new("action.lift"))?;
//! recorder.close()?;
//!
//! let query = Query::new().kind("action.*")?.types([RecordType::Event]);
//! let kinds: Vec<String> = Replay::open(dir.path(), &query)?
//!     .map(|r| r.map(|r| match r.body {
//!         Body::Event(e) => e.kind,
//!         _ => unreachable!("only events were asked for"),
//!     }))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(kinds, ["action.grasp", "action.lift"]);
//!
//! let count = blackbox_replay::fold(dir.path(), &query, 0u64, |n, _| n + 1)?;
//! assert_eq!(count, 2);
//! # Ok(())
//! # }
//! ```

mod decode;
mod error;
mod export;
mod html_report;
pub mod import_mcap;
mod inputs;
mod json;
pub mod json_input;
mod manifest;
mod mcap_read;
mod output;
mod private_temp;
mod query;
pub mod record_apply;
pub mod record_input;
mod replay;
mod report;
mod salvage;
mod state;
mod stats;
mod time;
mod weights;

pub use blackbox::WorkingDelta;
pub use decode::{
    Accounting, Body, BodyRef, Checkpoint, Decoder, Dictionary, Event, EventRef, Incident,
    KbCommit, KbSnapshot, Payload, PayloadRef, Record, RecordRef, RecordType, Summary,
    ValueSummary, ValuesRef, record_hash,
};
pub use error::{Error, Result};
pub use export::{
    ExportOptions, McapCompression, ParquetOptions, PartitionKey, check_export_against_log,
    export_jsonl, export_jsonl_to, export_mcap, export_mcap_to, export_parquet, partition_value,
};
pub use html_report::{
    ReportOptions, ReportScope, ReportWritten, incidents, shell_word, write_report,
};
pub use inputs::{is_shipped_dir, open_log_dir, read_key_file};
pub use json::{counters_json, hex, to_json};
pub use manifest::{
    CheckReport, Excluded, ExportFormat, ExportManifest, ExportedFile, KindRows, MANIFEST_VERSION,
    check_export,
};
pub use output::{AtomicFile, check_output, check_output_dir};
pub use query::{Order, Query};
pub use replay::{Replay, fold};
pub use report::{history_entry, rejection_json, verify_json};
pub use salvage::{Salvage, Salvaged, loses_records, loss_json, salvage};
pub use state::{State, TempView, fact_json, kb_view, start_seq, state_at};
pub use stats::{LogStats, stats};
pub use time::{format_time, parse_duration, parse_size, parse_time, parse_time_at};
pub use weights::{RangeAccounting, Unreconciled, Weights};
