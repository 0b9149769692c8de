//! Blackbox's own rows: the `blackbox-log` crate written and read the way the
//! recorder uses it.
//!
//! Every row writes each event as one record of type [`RECORD_TYPE`] with the
//! event's nanosecond timestamp; the log numbers records itself, densely from
//! 0, so the event's seq is kept without being stored twice. The default
//! [`LogOptions`] are used apart from the durability mode.
//!
//! Reading goes through [`LogReader::records`], which recomputes every block's
//! blake3 chain link (it covers every byte of the block's frames) and checks
//! every frame's structure as it goes, falling back to the frames' crc32c only
//! when a link fails: the read rate is the rate of a verified scan. The
//! `verify` row reads with [`blackbox_log::verify`] instead, which also
//! recomputes every frame's crc32c and checks every segment footer, but hands
//! out no records.

use std::hint::black_box;
use std::path::Path;

use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Seq};

use crate::{Contender, Event, PAYLOAD_LEN, Result};

/// The type tag every event is written with.
pub const RECORD_TYPE: RecordType = RecordType(1);

/// Records per [`Log::append_batch`] call for the batched rows, as the peers
/// that sync every 1000 events.
pub const BATCH: usize = 1_000;

const INTEGRITY: &str = "crc32c per record, blake3 chain per 64 KiB block";

/// How a row hands events to the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// One [`Log::append`] per event.
    Single,
    /// One [`Log::append_batch`] per [`BATCH`] events.
    Batched,
}

/// How a row reads the log back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadPath {
    /// Every record through [`LogReader::records`], payload touched.
    Records,
    /// [`blackbox_log::verify`], which returns a count.
    Verify,
}

/// One Blackbox row: a durability mode, a way to feed events and a read path.
#[derive(Debug, Clone, Copy)]
pub struct Blackbox {
    name: &'static str,
    durability: Durability,
    feed: Feed,
    read: ReadPath,
}

impl Blackbox {
    /// `Durability::Buffered`, one `append` per event, `close()` (one
    /// fdatasync) at the end.
    pub const BUFFERED: Blackbox = Blackbox {
        name: "blackbox buffered",
        durability: Durability::Buffered,
        feed: Feed::Single,
        read: ReadPath::Records,
    };

    /// `Durability::Sync`, `append_batch` of [`BATCH`] records: one
    /// fdatasync per batch.
    pub const SYNC_BATCH: Blackbox = Blackbox {
        name: "blackbox sync, batch 1000",
        durability: Durability::Sync,
        feed: Feed::Batched,
        read: ReadPath::Records,
    };

    /// `Durability::Flush`, `append_batch` of [`BATCH`] records: one write(2)
    /// per batch, one fdatasync at `close()`.
    pub const FLUSH_BATCH: Blackbox = Blackbox {
        name: "blackbox flush, batch 1000",
        durability: Durability::Flush,
        feed: Feed::Batched,
        read: ReadPath::Records,
    };

    /// As [`Blackbox::BUFFERED`], read back with [`blackbox_log::verify`].
    pub const VERIFY: Blackbox = Blackbox {
        name: "blackbox verify (buffered write)",
        durability: Durability::Buffered,
        feed: Feed::Single,
        read: ReadPath::Verify,
    };

    /// Every Blackbox row, in report order.
    pub const ALL: [Blackbox; 4] = [
        Blackbox::BUFFERED,
        Blackbox::SYNC_BATCH,
        Blackbox::FLUSH_BATCH,
        Blackbox::VERIFY,
    ];
}

impl Contender for Blackbox {
    fn name(&self) -> &str {
        self.name
    }

    fn keeps(&self) -> &str {
        "seq, ts, type"
    }

    fn durability(&self) -> &str {
        match self.durability {
            Durability::Buffered => "fdatasync at close",
            Durability::Flush => "write per 1000, fdatasync at close",
            Durability::Sync => "fdatasync per 1000",
        }
    }

    fn integrity(&self) -> &str {
        INTEGRITY
    }

    fn write(&self, dir: &Path, events: &[Event]) -> Result<()> {
        let options = LogOptions::new().durability(self.durability);
        let (mut log, _recovery) = Log::open(dir, options)?;
        match self.feed {
            Feed::Single => {
                for event in events {
                    log.append(Record::new(RECORD_TYPE, event.ts_ns, &event.payload))?;
                }
            }
            Feed::Batched => {
                let mut batch = Vec::with_capacity(BATCH);
                for chunk in events.chunks(BATCH) {
                    batch.clear();
                    batch.extend(
                        chunk
                            .iter()
                            .map(|e| Record::new(RECORD_TYPE, e.ts_ns, &e.payload)),
                    );
                    log.append_batch(&batch)?;
                }
            }
        }
        log.close()?;
        Ok(())
    }

    fn read(&self, dir: &Path) -> Result<Option<u64>> {
        match self.read {
            ReadPath::Records => read_records(dir).map(Some),
            ReadPath::Verify => {
                let report = blackbox_log::verify(dir, None, None)?;
                Ok(Some(report.records))
            }
        }
    }
}

/// Reads every record in order, checking seq and payload length and touching
/// the payload; returns the count.
fn read_records(dir: &Path) -> Result<u64> {
    let reader = LogReader::open(dir)?;
    let mut count = 0u64;
    for record in reader.records(..)? {
        let record = record?;
        if record.seq() != Seq(count) {
            return Err(format!("record {count}: seq {} out of order", record.seq()).into());
        }
        let payload = record.payload();
        if payload.len() != PAYLOAD_LEN {
            return Err(format!(
                "record {count}: payload is {} bytes, expected {PAYLOAD_LEN}",
                payload.len()
            )
            .into());
        }
        black_box((record.ts_ns(), payload));
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate_events;

    #[test]
    fn every_row_round_trips_a_small_stream() -> Result<()> {
        // More than one batch, and a partial last one.
        let events = generate_events(2_345)?;
        for row in Blackbox::ALL {
            let dir = tempfile::tempdir()?;
            row.write(dir.path(), &events)?;
            assert_eq!(row.read(dir.path())?, Some(2_345), "{}", row.name());
            assert!(
                crate::dir_usage(dir.path())?.apparent > 2_345 * 100,
                "{}",
                row.name()
            );
        }
        Ok(())
    }

    #[test]
    fn records_keep_timestamps_and_payloads() -> Result<()> {
        let events = generate_events(1_500)?;
        let dir = tempfile::tempdir()?;
        Blackbox::SYNC_BATCH.write(dir.path(), &events)?;
        let reader = LogReader::open(dir.path())?;
        for (record, event) in reader.records(..)?.zip(&events) {
            let record = record?;
            assert_eq!(record.seq(), Seq(event.seq));
            assert_eq!(record.ts_ns(), event.ts_ns);
            assert_eq!(record.record_type(), RECORD_TYPE);
            assert_eq!(record.payload(), event.payload.as_slice());
        }
        Ok(())
    }
}
