//! What users run: the [`Recorder`] writing (record → close) and [`Replay`] reading.
//!
//! Every kind is `full` (the default policy), so every event is kept. The recorder's
//! clock is a [`ManualClock`] set to each event's timestamp just before it is
//! recorded, so the log holds the workload's own times and the window query means the
//! same here as for every other row; a host reading the system clock pays about the
//! same for it (one vDSO call instead of one atomic store). Binary payloads are
//! recorded with [`Event::raw`], JSON ones with [`Event::json`].
//!
//! Reading goes through [`Replay`] with a query for event records: every block's
//! checksums and chain link are checked, and every record decoded in place
//! ([`Replay::next_view`]: kind and payload borrowed, a JSON payload handed out as its
//! text, unparsed, as every peer hands out bytes; no content hash). The window query adds
//! [`Query::kind`] and [`Query::since`]/[`Query::until`]: the read finds the window's
//! first record through the footers' sparse time index, learns the names in use there
//! (the segment's preamble and the blocks holding a dictionary or policy record,
//! through the tag index), reads from the window's first block on, and decodes the events of the kind.

use std::path::Path;
use std::sync::Arc;

use blackbox::{Config, Durability, Event, ManualClock, Recorder};
use blackbox_log::{Compression, LogOptions};
use blackbox_replay::{BodyRef, Query, RecordType, Replay};

use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{Tally, WindowQuery, Workload};

/// Events between two [`Recorder::sync`] calls in the `Sync` row: the same batching as
/// the peers that commit every 1000 events.
pub const SYNC_EVERY: usize = 1_000;

const INTEGRITY: &str = "crc32c per record, blake3 chain per block; checked by `Replay`";
const WINDOW_PATH: &str = "`Replay` with `Query::kind` and `since`/`until`: finds the window's first record by time through the segment footers' sparse index, learns the names from the segment's preamble and the blocks the tag index says hold a dictionary or policy record, reads from the window's block on (to the first watermark past the window), and decodes the events of the kind, passing over the others by their header";

/// One recorder row.
#[derive(Debug, Clone, Copy)]
pub struct RecorderRow {
    description: Description,
    durability: Durability,
    /// `Some(n)`: call [`Recorder::sync`] after every `n` events.
    sync_every: Option<usize>,
    compression: Compression,
}

impl RecorderRow {
    /// `Durability::Buffered`: the writer hands its batches to the log, which writes
    /// them as its buffer fills; `close()` fsyncs.
    pub const BUFFERED: RecorderRow = RecorderRow {
        description: Description {
            id: "recorder-buffered",
            name: "Recorder `Buffered` → `Replay`",
            durability: "fdatasync at close",
            integrity: INTEGRITY,
            window_path: WINDOW_PATH,
        },
        durability: Durability::Buffered,
        sync_every: None,
        compression: Compression::Off,
    };

    /// As [`RecorderRow::BUFFERED`], with the log's blocks compressed by zstd at
    /// `level` (kept where it saves an eighth).
    #[must_use]
    pub const fn buffered_zstd(level: i32) -> RecorderRow {
        RecorderRow {
            description: Description {
                id: "recorder-buffered-zstd",
                name: "Recorder `Buffered`, zstd blocks → `Replay`",
                durability: "fdatasync at close",
                integrity: INTEGRITY,
                window_path: WINDOW_PATH,
            },
            durability: Durability::Buffered,
            sync_every: None,
            compression: Compression::Zstd { level },
        }
    }

    /// `Durability::Sync` (group commit: the writer fdatasyncs every batch it drains),
    /// and `sync()` after every [`SYNC_EVERY`] events, so that each 1000 are known to
    /// be durable, as each committed batch of the peers is.
    pub const SYNC: RecorderRow = RecorderRow {
        description: Description {
            id: "recorder-sync",
            name: "Recorder `Sync`, `sync()` every 1000 → `Replay`",
            durability: "fdatasync per writer batch; `sync()` returns per 1000",
            integrity: INTEGRITY,
            window_path: WINDOW_PATH,
        },
        durability: Durability::Sync,
        sync_every: Some(SYNC_EVERY),
        compression: Compression::Off,
    };
}

impl Contender for RecorderRow {
    fn describe(&self) -> Description {
        self.description
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let start_ns = workload.iter().next().map_or(0, |e| e.ts_ns);
        let clock = ManualClock::new(start_ns);
        let config = Config::new()
            .log_options(LogOptions::new().compression(self.compression))
            .durability(self.durability)
            .clock(Arc::new(clock.clone()));
        let recorder = Recorder::open(dir, config)?;
        for e in workload.iter() {
            clock.set_ns(e.ts_ns);
            let event = Event::new(e.kind_name());
            let event = match e.json {
                Some(text) => event.json(text),
                None => event.raw(e.payload),
            };
            recorder.record(&event)?;
            if let Some(n) = self.sync_every
                && (e.seq + 1).is_multiple_of(n as u64)
            {
                recorder.sync()?;
            }
        }
        recorder.close()?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        tally(dir, &Query::new().types([RecordType::Event]))
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let query = Query::new()
            .types([RecordType::Event])
            .kind(query.kind_name())?
            .since(query.since_ns)
            .until(query.until_ns);
        tally(dir, &query)
    }
}

/// Tallies the events `query` selects, each decoded in place (its kind and payload
/// borrowed from the block it was read from, as every peer hands out bytes).
fn tally(dir: &Path, query: &Query) -> Result<Tally> {
    let mut tally = Tally::default();
    let mut replay = Replay::open(dir, query)?;
    while let Some(record) = replay.next_view() {
        let record = record?;
        let BodyRef::Event(event) = &record.body else {
            return Err(format!("record {} is not an event", record.seq).into());
        };
        tally.add_named(event.kind, record.ts_ns, event.payload.bytes())?;
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Expected;
    use crate::workload::Variant;

    #[test]
    fn both_rows_give_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            // More than two sync batches, and a partial last one.
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            for row in [RecorderRow::BUFFERED, RecorderRow::SYNC] {
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
    fn the_log_holds_the_workloads_own_timestamps() -> Result<()> {
        let workload = Workload::generate(300, Variant::Binary)?;
        let dir = tempfile::tempdir()?;
        RecorderRow::BUFFERED.write(dir.path(), &workload)?;
        let query = Query::new().types([RecordType::Event]);
        let stamps: Vec<u64> = Replay::open(dir.path(), &query)?
            .map(|r| r.map(|r| r.ts_ns))
            .collect::<std::result::Result<_, _>>()?;
        let want: Vec<u64> = workload.iter().map(|e| e.ts_ns).collect();
        assert_eq!(stamps, want);
        Ok(())
    }
}
