//! The summary records of a Parquet export, in a file of their own: one row per summary
//! window of one kind (GUIDE.md "Parquet").
//!
//! The value columns are the names the summaries carry, known once they are read: the
//! summaries (one per kind and window, far fewer than events) are collected, then
//! written.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    Float64Builder, StringDictionaryBuilder, TimestampNanosecondBuilder, UInt64Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;

use super::parquet::{UTC, encode_error, timestamp, writer_properties};
use super::{ExportOptions, Hashing};
use crate::decode::{Body, RecordType, Summary};
use crate::error::Result;
use crate::manifest::{ExportManifest, ExportedFile};
use crate::output::AtomicFile;
use crate::query::{Order, Query};
use crate::replay::Replay;
use crate::salvage::Salvaged;

/// The statistics of each value, in column order: `<stat>_<value name>`.
const STATS: [&str; 6] = ["min", "max", "mean", "sum", "last", "count"];

/// Rows per batch handed to the encoder.
const BATCH_ROWS: usize = 8192;

/// Writes the summary records `query` selects, read up to the events' digest (or
/// around damage, as the events were), to `out` under a temporary name; returns the
/// file and its manifest entry (its path still to be set).
pub(crate) fn write(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    events: &ExportManifest,
    out: &Path,
) -> Result<(AtomicFile, ExportedFile)> {
    let file = AtomicFile::create(out)?;
    let path = file.path().to_owned();
    let summaries = read(dir, query, options, events)?;
    let names: BTreeSet<&str> = summaries
        .iter()
        .flat_map(|(_, _, s)| s.values.keys().map(String::as_str))
        .collect();
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some(UTC.into()));
    let mut fields = vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("written", ts.clone(), false),
        Field::new(
            "kind",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            false,
        ),
        Field::new("window_start", ts.clone(), false),
        Field::new("window_end", ts, false),
        Field::new("count", DataType::UInt64, false),
    ];
    for name in &names {
        for stat in STATS {
            let t = if stat == "count" {
                DataType::UInt64
            } else {
                DataType::Float64
            };
            fields.push(Field::new(format!("{stat}_{name}"), t, true));
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let mut writer = ArrowWriter::try_new(
        Hashing::new(file),
        schema.clone(),
        Some(writer_properties()?),
    )
    .map_err(|e| encode_error(&path, e))?;
    for chunk in summaries.chunks(BATCH_ROWS) {
        let mut seq = UInt64Builder::with_capacity(chunk.len());
        let mut written = TimestampNanosecondBuilder::with_capacity(chunk.len()).with_timezone(UTC);
        let mut kind = StringDictionaryBuilder::<Int32Type>::new();
        let mut start = TimestampNanosecondBuilder::with_capacity(chunk.len()).with_timezone(UTC);
        let mut end = TimestampNanosecondBuilder::with_capacity(chunk.len()).with_timezone(UTC);
        let mut count = UInt64Builder::with_capacity(chunk.len());
        let mut value_cols: Vec<ArrayRef> = Vec::new();
        for (s_seq, s_written, s) in chunk {
            seq.append_value(*s_seq);
            written.append_value(timestamp(*s_written, *s_seq, "write time", &path)?);
            kind.append_value(&s.kind);
            start.append_value(timestamp(s.window_start_ns, *s_seq, "window start", &path)?);
            end.append_value(timestamp(s.window_end_ns, *s_seq, "window end", &path)?);
            count.append_value(s.count);
        }
        for name in &names {
            let mut f: Vec<Float64Builder> = (0..5)
                .map(|_| Float64Builder::with_capacity(chunk.len()))
                .collect();
            let mut n = UInt64Builder::with_capacity(chunk.len());
            for (_, _, s) in chunk {
                let v = s.values.get(*name);
                let each = v.map(|v| [v.min, v.max, v.mean, v.sum, v.last]);
                for (i, b) in f.iter_mut().enumerate() {
                    b.append_option(each.map(|e| e[i]));
                }
                n.append_option(v.map(|v| v.count));
            }
            for mut b in f {
                value_cols.push(Arc::new(b.finish()));
            }
            value_cols.push(Arc::new(n.finish()));
        }
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(seq.finish()),
            Arc::new(written.finish()),
            Arc::new(kind.finish()),
            Arc::new(start.finish()),
            Arc::new(end.finish()),
            Arc::new(count.finish()),
        ];
        cols.extend(value_cols);
        let batch =
            RecordBatch::try_new(schema.clone(), cols).map_err(|e| encode_error(&path, e))?;
        writer.write(&batch).map_err(|e| encode_error(&path, e))?;
    }
    let hashing = writer.into_inner().map_err(|e| encode_error(&path, e))?;
    let (bytes, blake3) = hashing.digest();
    Ok((
        hashing.inner,
        ExportedFile {
            path: path.clone(),
            role: "summaries",
            kind: None,
            date: None,
            rows: summaries.len() as u64,
            bytes,
            blake3,
        },
    ))
}

/// The summary records (seq, write time, summary) `query` selects, in log order.
fn read(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    events: &ExportManifest,
) -> Result<Vec<(u64, u64, Summary)>> {
    let q = query.clone().types([RecordType::Summary]);
    let mut out = Vec::new();
    let mut keep = |seq: u64, ts_ns: u64, body: Body| {
        if let Body::Summary(s) = body {
            out.push((seq, ts_ns, s));
        }
    };
    if options.salvage {
        for item in crate::salvage::salvage(dir, &q)? {
            // The events' manifest lists the losses; a summary lost with them is gone.
            if let Salvaged::Record(r) = item {
                keep(r.seq, r.ts_ns, r.body);
            }
        }
    } else if let Some(digest) = events.log_digest {
        let bound = q.to_seq_bound().map_or(digest.seq, |s| s.min(digest.seq));
        let q = q.to_seq(bound).order(Order::Log);
        for r in Replay::open(dir, &q)? {
            let r = r?;
            keep(r.seq, r.ts_ns, r.body);
        }
    }
    // Otherwise the log is empty: no digest, no summaries.
    Ok(out)
}
