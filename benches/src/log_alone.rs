//! `blackbox-log` alone: the flight log without the recorder, the kind in the payload.
//!
//! Each event is one record of type [`RECORD_TYPE`] with the event's timestamp and a
//! payload of one byte of kind id followed by the event's payload. The log numbers
//! records itself, densely from 0. Default [`LogOptions`] apart from the durability.
//!
//! Reading goes through [`LogReader::records`], which recomputes every block's blake3
//! chain link (it covers every byte of the block's frames) and checks every frame's
//! structure, falling back to the frames' crc32c only when a link fails: the read rate
//! is the rate of a verified scan. The window query is [`LogReader::records_by_time`]
//! (a seek through the footers' sparse time index) with the kind byte as a filter.

use std::path::Path;

use blackbox_log::{Compression, Durability, Log, LogOptions, LogReader, Record, RecordType};

use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{Tally, WindowQuery, Workload};

/// The zstd level of the rows that compress blocks, unless `compare --zstd-level`
/// says otherwise.
pub const ZSTD_LEVEL: i32 = 1;

/// The type tag every event is written with.
pub const RECORD_TYPE: RecordType = RecordType(1);

/// Records per [`Log::append_batch`] call in the `Sync` row, as the peers that commit
/// every 1000 events.
pub const BATCH: usize = 1_000;

const INTEGRITY: &str = "crc32c per record, blake3 chain per block; checked by the reader";
const WINDOW_PATH: &str = "`LogReader::records_by_time` (a seek through the footers' sparse time index), kind byte filtered";

/// How a row hands events to the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// One [`Log::append`] per event.
    Single,
    /// One [`Log::append_batch`] per [`BATCH`] events.
    Batched,
}

/// One row of the log alone.
#[derive(Debug, Clone, Copy)]
pub struct LogRow {
    description: Description,
    durability: Durability,
    feed: Feed,
    compression: Compression,
}

impl LogRow {
    /// `Durability::Buffered`, one `append` per event, `close()` (one fdatasync) at
    /// the end.
    pub const BUFFERED: LogRow = LogRow {
        description: Description {
            id: "log-buffered",
            name: "`blackbox-log` alone `Buffered` (kind in payload)",
            durability: "fdatasync at close",
            integrity: INTEGRITY,
            window_path: WINDOW_PATH,
        },
        durability: Durability::Buffered,
        feed: Feed::Single,
        compression: Compression::Off,
    };

    /// As [`LogRow::BUFFERED`], with every block compressed by zstd at `level` (kept
    /// where it saves an eighth).
    #[must_use]
    pub const fn buffered_zstd(level: i32) -> LogRow {
        LogRow {
            description: Description {
                id: "log-buffered-zstd",
                name: "`blackbox-log` alone `Buffered`, zstd blocks",
                durability: "fdatasync at close",
                integrity: INTEGRITY,
                window_path: WINDOW_PATH,
            },
            durability: Durability::Buffered,
            feed: Feed::Single,
            compression: Compression::Zstd { level },
        }
    }

    /// `Durability::Sync`, `append_batch` of [`BATCH`] records: one fdatasync per
    /// batch.
    pub const SYNC: LogRow = LogRow {
        description: Description {
            id: "log-sync",
            name: "`blackbox-log` alone `Sync`, batches of 1000",
            durability: "fdatasync per 1000",
            integrity: INTEGRITY,
            window_path: WINDOW_PATH,
        },
        durability: Durability::Sync,
        feed: Feed::Batched,
        compression: Compression::Off,
    };
}

/// Appends the kind byte and the payload of an event to `out`.
fn encode(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.extend_from_slice(payload);
}

/// Splits a record's payload into the kind byte and the event's payload.
fn decode(payload: &[u8]) -> Result<(u8, &[u8])> {
    payload
        .split_first()
        .map(|(kind, rest)| (*kind, rest))
        .ok_or_else(|| "a record has an empty payload (no kind byte)".into())
}

impl Contender for LogRow {
    fn describe(&self) -> Description {
        self.description
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let options = LogOptions::new()
            .durability(self.durability)
            .compression(self.compression);
        let (mut log, _recovery) = Log::open(dir, options)?;
        let mut buf = Vec::new();
        match self.feed {
            Feed::Single => {
                for e in workload.iter() {
                    buf.clear();
                    encode(&mut buf, e.kind, e.payload);
                    log.append(Record::new(RECORD_TYPE, e.ts_ns, &buf))?;
                }
            }
            Feed::Batched => {
                let mut ends = Vec::with_capacity(BATCH);
                for first in (0..workload.len()).step_by(BATCH) {
                    let chunk = first..workload.len().min(first + BATCH);
                    buf.clear();
                    ends.clear();
                    for i in chunk.clone() {
                        let e = workload.event(i);
                        encode(&mut buf, e.kind, e.payload);
                        ends.push(buf.len());
                    }
                    let mut batch = Vec::with_capacity(BATCH);
                    let mut start = 0;
                    for (i, &end) in chunk.zip(&ends) {
                        let ts_ns = workload.event(i).ts_ns;
                        batch.push(Record::new(RECORD_TYPE, ts_ns, &buf[start..end]));
                        start = end;
                    }
                    log.append_batch(&batch)?;
                }
            }
        }
        log.close()?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let reader = LogReader::open(dir)?;
        let mut tally = Tally::default();
        for record in reader.records(..)? {
            let record = record?;
            let (kind, payload) = decode(record.payload())?;
            tally.add(kind, record.ts_ns(), payload)?;
        }
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let reader = LogReader::open(dir)?;
        let mut tally = Tally::default();
        for record in reader.records_by_time(query.since_ns..=query.until_ns)? {
            let record = record?;
            let (kind, payload) = decode(record.payload())?;
            if kind == query.kind {
                tally.add(kind, record.ts_ns(), payload)?;
            }
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Expected;
    use crate::workload::Variant;

    #[test]
    fn both_rows_give_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            // More than two batches, and a partial last one.
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            for row in [LogRow::BUFFERED, LogRow::SYNC] {
                let dir = tempfile::tempdir()?;
                row.write(dir.path(), &workload)?;
                expected.all.check(&row.read_all(dir.path())?)?;
                expected
                    .window
                    .check(&row.read_window(dir.path(), &expected.query)?)?;
            }
        }
        Ok(())
    }

    #[test]
    fn records_are_the_kind_byte_then_the_payload() -> Result<()> {
        let workload = Workload::generate(500, Variant::Binary)?;
        let dir = tempfile::tempdir()?;
        LogRow::SYNC.write(dir.path(), &workload)?;
        let reader = LogReader::open(dir.path())?;
        let mut n = 0;
        for (record, e) in reader.records(..)?.zip(workload.iter()) {
            let record = record?;
            assert_eq!(record.seq().0, e.seq);
            assert_eq!(record.ts_ns(), e.ts_ns);
            assert_eq!(record.record_type(), RECORD_TYPE);
            assert_eq!(record.payload()[0], e.kind);
            assert_eq!(&record.payload()[1..], e.payload);
            n += 1;
        }
        assert_eq!(n, 500);
        assert!(decode(&[]).is_err());
        Ok(())
    }
}
