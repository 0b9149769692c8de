//! MCAP (the `mcap` crate, 0.26), the recording format of ROS 2 and Foxglove: one
//! channel per kind, no schema, each message's log and publish time the event's
//! timestamp and its sequence number counted per channel.
//!
//! Two rows. Unchunked: messages go straight into the data section, with no message
//! index, so the window query scans. Chunked: messages go into 1 MiB chunks (not
//! compressed: the workspace builds `mcap` without zstd and lz4), each with a CRC32
//! and a message index per channel, and the summary holds a chunk index (time range
//! and channels of every chunk), which the `IndexedReader` uses to skip chunks.
//! Both write through a `BufWriter`, finish the file (summary, footer) and fdatasync.
//!
//! Reading every event: the file is read into memory and streamed with
//! `MessageStream`, checking chunk CRCs in the chunked file. (`MessageStream` does not
//! check the unchunked file's data-section CRC.)

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom};
use std::path::Path;

use mcap::sans_io::indexed_reader::{IndexedReadEvent, IndexedReader, IndexedReaderOptions};
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader};

use super::into_file;
use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{KINDS, Tally, WindowQuery, Workload, kind_id};

/// The largest chunk the window query accepts: far above the 1 MiB this writer makes.
const CHUNK_BYTES_MAX: usize = 64 << 20;

/// An MCAP row.
#[derive(Debug, Clone, Copy)]
pub struct Mcap {
    description: Description,
    chunked: bool,
    chunk_bytes: u64,
}

impl Mcap {
    const FILE: &'static str = "events.mcap";

    /// Unchunked: no index, window query by scan.
    pub const UNCHUNKED: Mcap = Mcap {
        description: Description {
            id: "mcap-unchunked",
            name: "MCAP unchunked (mcap 0.26)",
            durability: "fdatasync at end",
            integrity: "CRC32 of the data section; not checked by `MessageStream`",
            window_path: "scan of the whole file with `MessageStream`, filtering channel and log time, stopping at the first message past the window (the file is in time order)",
        },
        chunked: false,
        chunk_bytes: 0,
    };

    /// Chunked, with the summary's chunk index and per-chunk message indexes.
    pub const CHUNKED: Mcap = Mcap {
        description: Description {
            id: "mcap-chunked",
            name: "MCAP chunked, `IndexedReader` (mcap 0.26)",
            durability: "fdatasync at end",
            integrity: "CRC32 per 1 MiB chunk; checked by `MessageStream`, not by `IndexedReader`",
            window_path: "`IndexedReader` on the summary, with the kind's topic and the time range: reads only the chunks whose index says they hold the kind in the range",
        },
        chunked: true,
        chunk_bytes: mcap::WriteOptions::DEFAULT_CHUNK_SIZE,
    };

    /// The chunked row with chunks of `chunk_bytes` (for tests on small streams).
    #[must_use]
    pub fn chunked_with(chunk_bytes: u64) -> Mcap {
        Mcap {
            chunk_bytes,
            ..Mcap::CHUNKED
        }
    }
}

/// Maps channel ids to kind ids, learning each channel from its topic once.
#[derive(Debug, Default)]
struct Channels(Vec<Option<u8>>);

impl Channels {
    fn kind(&mut self, channel_id: u16, topic: &str) -> Result<u8> {
        let i = usize::from(channel_id);
        if let Some(Some(kind)) = self.0.get(i) {
            return Ok(*kind);
        }
        let kind = kind_id(topic)?;
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(kind);
        Ok(kind)
    }
}

impl Contender for Mcap {
    fn describe(&self) -> Description {
        self.description
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let file = File::create(dir.join(Self::FILE))?;
        let mut options = mcap::WriteOptions::new()
            .use_chunks(self.chunked)
            .compression(None);
        if self.chunked {
            options = options.chunk_size(Some(self.chunk_bytes));
        }
        let mut writer = options.create(BufWriter::new(file))?;
        let encoding = if workload.iter().next().is_some_and(|e| e.json.is_some()) {
            "json"
        } else {
            "application/octet-stream"
        };
        let mut channels = [0u16; KINDS.len()];
        for (channel, kind) in channels.iter_mut().zip(KINDS) {
            *channel = writer.add_channel(0, kind, encoding, &BTreeMap::new())?;
        }
        let mut sequences = [0u32; KINDS.len()];
        for e in workload.iter() {
            let k = usize::from(e.kind);
            let header = mcap::records::MessageHeader {
                channel_id: channels[k],
                sequence: sequences[k],
                log_time: e.ts_ns,
                publish_time: e.ts_ns,
            };
            sequences[k] = sequences[k].wrapping_add(1);
            writer.write_to_known_channel(&header, e.payload)?;
        }
        writer.finish()?;
        into_file(writer.into_inner())?.sync_data()?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let bytes = fs::read(dir.join(Self::FILE))?;
        let options = if self.chunked {
            mcap::read::Options::ValidateChunkCrcs.into()
        } else {
            Default::default()
        };
        let mut channels = Channels::default();
        let mut tally = Tally::default();
        for message in mcap::MessageStream::new_with_options(&bytes, options)? {
            let message = message?;
            let kind = channels.kind(message.channel.id, &message.channel.topic)?;
            tally.add(kind, message.log_time, &message.data)?;
        }
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        if self.chunked {
            indexed_window(&dir.join(Self::FILE), query)
        } else {
            scanned_window(&dir.join(Self::FILE), query)
        }
    }
}

/// The window by scan: every message from the start until the first one past it.
fn scanned_window(path: &Path, query: &WindowQuery) -> Result<Tally> {
    let bytes = fs::read(path)?;
    let mut channels = Channels::default();
    let mut tally = Tally::default();
    for message in mcap::MessageStream::new(&bytes)? {
        let message = message?;
        if message.log_time > query.until_ns {
            break;
        }
        let kind = channels.kind(message.channel.id, &message.channel.topic)?;
        if query.matches(kind, message.log_time) {
            tally.add(kind, message.log_time, &message.data)?;
        }
    }
    Ok(tally)
}

/// The window through the summary and the `IndexedReader`, reading only the chunks it
/// asks for.
fn indexed_window(path: &Path, query: &WindowQuery) -> Result<Tally> {
    let mut file = File::open(path)?;
    let mut summary_reader = SummaryReader::new();
    while let Some(event) = summary_reader.next_event() {
        match event? {
            SummaryReadEvent::ReadRequest(need) => {
                let read = file.read(summary_reader.insert(need))?;
                summary_reader.notify_read(read);
            }
            SummaryReadEvent::SeekRequest(to) => {
                summary_reader.notify_seeked(file.seek(to)?);
            }
        }
    }
    let summary = summary_reader
        .finish()
        .ok_or("the MCAP file has no summary section")?;
    // The chunk index's sizes come from the file: bounded before a buffer is sized by
    // them.
    let options = IndexedReaderOptions::new()
        .include_topics([query.kind_name()])
        .starting_at(query.since_ns)
        .ending_at(query.until_ns)
        .with_record_length_limit(CHUNK_BYTES_MAX);
    let mut reader = IndexedReader::new_with_options(&summary, options)?;
    let mut chunk = Vec::new();
    let mut tally = Tally::default();
    while let Some(event) = reader.next_event() {
        match event? {
            IndexedReadEvent::ReadChunkRequest { offset, length } => {
                file.seek(SeekFrom::Start(offset))?;
                chunk.resize(length, 0);
                file.read_exact(&mut chunk)?;
                reader.insert_chunk_record_data(offset, &chunk)?;
            }
            IndexedReadEvent::Message { header, data } => {
                let channel = summary
                    .channels
                    .get(&header.channel_id)
                    .ok_or_else(|| format!("message on unknown channel {}", header.channel_id))?;
                tally.add(kind_id(&channel.topic)?, header.log_time, data)?;
            }
        }
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
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            for row in [Mcap::UNCHUNKED, Mcap::CHUNKED, Mcap::chunked_with(16 << 10)] {
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
    fn the_indexed_window_reads_only_the_chunks_it_needs() -> Result<()> {
        let workload = Workload::generate(5_000, Variant::Binary)?;
        let dir = tempfile::tempdir()?;
        Mcap::chunked_with(16 << 10).write(dir.path(), &workload)?;
        let bytes = fs::read(dir.path().join(Mcap::FILE))?;
        let summary = mcap::Summary::read(&bytes)?.ok_or("no summary")?;
        let chunks = summary.chunk_indexes.len();
        // About 620 KB of messages in 16 KiB chunks.
        assert!(chunks > 30, "{chunks} chunks");
        let query = workload.window();
        let options = IndexedReaderOptions::new()
            .include_topics([query.kind_name()])
            .starting_at(query.since_ns)
            .ending_at(query.until_ns);
        let mut reader = IndexedReader::new_with_options(&summary, options)?;
        let mut requested = 0;
        while let Some(event) = reader.next_event() {
            if let IndexedReadEvent::ReadChunkRequest { offset, length } = event? {
                requested += 1;
                let start = usize::try_from(offset)?;
                reader.insert_chunk_record_data(offset, &bytes[start..start + length])?;
            }
        }
        // A tenth of the time span: about a tenth of the chunks, one more at each end.
        assert!(
            requested <= chunks / 10 + 2,
            "{requested} of {chunks} chunks read"
        );
        assert!(requested >= 1);
        Ok(())
    }

    #[test]
    fn a_damaged_chunk_fails_the_full_read() -> Result<()> {
        let workload = Workload::generate(2_000, Variant::Binary)?;
        let dir = tempfile::tempdir()?;
        Mcap::CHUNKED.write(dir.path(), &workload)?;
        let path = dir.path().join(Mcap::FILE);
        let mut bytes = fs::read(&path)?;
        // One bit of one message's payload: only the chunk's CRC can tell.
        let payload = workload.event(1_000).payload;
        let at = bytes
            .windows(payload.len())
            .position(|w| w == payload)
            .ok_or("payload not found in the file")?;
        bytes[at + 50] ^= 0x01;
        fs::write(&path, &bytes)?;
        let err = Mcap::CHUNKED
            .read_all(dir.path())
            .err()
            .ok_or("a damaged chunk was read")?;
        assert!(err.to_string().to_lowercase().contains("crc"), "{err}");
        Ok(())
    }
}
