//! Peer formats Blackbox is compared against.
//!
//! Each peer is written the way a careful user of that library would write
//! a flight-recorder stream, with the durability stated in its row; none is
//! tuned beyond what the row says.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use crate::{Contender, Event, PAYLOAD_LEN, Result};

/// Events per fsync'd batch for the peers that sync periodically.
const SYNC_EVERY: usize = 1_000;

/// Flushes a `BufWriter<File>` and returns the file, with the buffer's error
/// rather than the writer on failure.
fn into_file(writer: BufWriter<File>) -> Result<File> {
    Ok(writer.into_inner().map_err(|e| e.into_error())?)
}

/// Checks that a payload read back has the size that was written.
fn check_payload_len(seq: u64, len: usize) -> Result<()> {
    if len == PAYLOAD_LEN {
        Ok(())
    } else {
        Err(format!("record {seq}: payload is {len} bytes, expected {PAYLOAD_LEN}").into())
    }
}

// ---------------------------------------------------------------------------
// MCAP

/// MCAP file, unchunked (messages straight into the data section, so no
/// compression and no message index), one channel, no schema.
#[derive(Debug, Default, Clone, Copy)]
pub struct McapUnchunked;

impl McapUnchunked {
    const FILE: &'static str = "events.mcap";
}

/// MCAP message sequence numbers are `u32`; the stream's `u64` sequence
/// wraps into it.
#[expect(
    clippy::cast_possible_truncation,
    reason = "MCAP sequence numbers are u32 and wrap"
)]
fn mcap_sequence(seq: u64) -> u32 {
    seq as u32
}

impl Contender for McapUnchunked {
    fn name(&self) -> &str {
        "mcap 0.26 (unchunked)"
    }

    fn keeps(&self) -> &str {
        "seq (u32), ts"
    }

    fn durability(&self) -> &str {
        "fdatasync at end"
    }

    fn integrity(&self) -> &str {
        "CRC32 of data section"
    }

    fn write(&self, dir: &Path, events: &[Event]) -> Result<()> {
        let file = File::create(dir.join(Self::FILE))?;
        let mut writer = mcap::WriteOptions::new()
            .use_chunks(false)
            .create(BufWriter::new(file))?;
        let channel_id =
            writer.add_channel(0, "events", "application/octet-stream", &BTreeMap::new())?;
        for event in events {
            let header = mcap::records::MessageHeader {
                channel_id,
                sequence: mcap_sequence(event.seq),
                log_time: event.ts_ns,
                publish_time: event.ts_ns,
            };
            writer.write_to_known_channel(&header, &event.payload)?;
        }
        writer.finish()?;
        into_file(writer.into_inner())?.sync_data()?;
        Ok(())
    }

    fn read(&self, dir: &Path) -> Result<Option<u64>> {
        let bytes = fs::read(dir.join(Self::FILE))?;
        let mut count = 0u64;
        for message in mcap::MessageStream::new(&bytes)? {
            let message = message?;
            check_payload_len(count, message.data.len())?;
            if message.sequence != mcap_sequence(count) {
                return Err(format!(
                    "message {count}: sequence {} out of order",
                    message.sequence
                )
                .into());
            }
            black_box((message.log_time, &message.data));
            count += 1;
        }
        Ok(Some(count))
    }
}

// ---------------------------------------------------------------------------
// fjall

/// fjall 3 LSM-tree: one keyspace, key = big-endian `u64` sequence number
/// (so key order is stream order), value = payload, written in atomic
/// batches of [`SYNC_EVERY`] events, each committed with `fdatasync`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fjall;

impl Fjall {
    const DB_DIR: &'static str = "fjall";
    const KEYSPACE: &'static str = "events";
}

impl Contender for Fjall {
    fn name(&self) -> &str {
        "fjall 3 (batch of 1000)"
    }

    fn keeps(&self) -> &str {
        "seq"
    }

    fn durability(&self) -> &str {
        "fdatasync per 1000"
    }

    fn integrity(&self) -> &str {
        "xxh3 per journal batch"
    }

    fn write(&self, dir: &Path, events: &[Event]) -> Result<()> {
        let db = fjall::Database::builder(dir.join(Self::DB_DIR)).open()?;
        let keyspace = db.keyspace(Self::KEYSPACE, fjall::KeyspaceCreateOptions::default)?;
        for chunk in events.chunks(SYNC_EVERY) {
            let mut batch = db.batch().durability(Some(fjall::PersistMode::SyncData));
            for event in chunk {
                // Big-endian on purpose: it makes byte order of keys equal
                // numeric order, which is what the LSM tree sorts by.
                batch.insert(
                    &keyspace,
                    event.seq.to_be_bytes().as_slice(),
                    event.payload.as_slice(),
                );
            }
            batch.commit()?;
        }
        db.persist(fjall::PersistMode::SyncData)?;
        // Dropping the database waits for its background workers.
        drop(keyspace);
        drop(db);
        Ok(())
    }

    fn read(&self, dir: &Path) -> Result<Option<u64>> {
        let db = fjall::Database::builder(dir.join(Self::DB_DIR)).open()?;
        let keyspace = db.keyspace(Self::KEYSPACE, fjall::KeyspaceCreateOptions::default)?;
        let mut count = 0u64;
        for guard in keyspace.iter() {
            let (key, value) = guard.into_inner()?;
            if *key != count.to_be_bytes() {
                return Err(format!("entry {count}: unexpected key {:?}", &*key).into());
            }
            check_payload_len(count, value.len())?;
            black_box(&value);
            count += 1;
        }
        Ok(Some(count))
    }
}

// ---------------------------------------------------------------------------
// JSON lines

/// One JSON object per line, payload hex-encoded, through a `BufWriter`,
/// with `fdatasync` every [`SYNC_EVERY`] lines. Read back by parsing every
/// line and decoding every payload.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonLines;

impl JsonLines {
    const FILE: &'static str = "events.jsonl";
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
}

fn hex_nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes `hex` into `out`, which must be exactly half its length.
fn decode_hex(hex: &str, out: &mut [u8]) -> Option<()> {
    let hex = hex.as_bytes();
    if hex.len() != out.len() * 2 {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = (hex_nibble(pair[0])? << 4) | hex_nibble(pair[1])?;
    }
    Some(())
}

impl Contender for JsonLines {
    fn name(&self) -> &str {
        "JSON lines (serde_json, hex)"
    }

    fn keeps(&self) -> &str {
        "seq, ts"
    }

    fn durability(&self) -> &str {
        "fdatasync per 1000"
    }

    fn integrity(&self) -> &str {
        "none"
    }

    fn write(&self, dir: &Path, events: &[Event]) -> Result<()> {
        use serde_json::Value;

        let mut out = BufWriter::new(File::create(dir.join(Self::FILE))?);
        // One object reused for every line, with its fields overwritten in
        // place, so the loop measures encoding and I/O, not allocation.
        let mut line = serde_json::Map::new();
        line.insert("seq".to_owned(), Value::Null);
        line.insert("ts".to_owned(), Value::Null);
        line.insert(
            "payload".to_owned(),
            Value::String(String::with_capacity(PAYLOAD_LEN * 2)),
        );
        for (i, event) in events.iter().enumerate() {
            for (key, value) in &mut line {
                match (key.as_str(), value) {
                    ("seq", value) => *value = Value::from(event.seq),
                    ("ts", value) => *value = Value::from(event.ts_ns),
                    (_, Value::String(hex)) => {
                        hex.clear();
                        push_hex(hex, &event.payload);
                    }
                    _ => {}
                }
            }
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
            if (i + 1).is_multiple_of(SYNC_EVERY) {
                out.flush()?;
                out.get_ref().sync_data()?;
            }
        }
        into_file(out)?.sync_data()?;
        Ok(())
    }

    fn read(&self, dir: &Path) -> Result<Option<u64>> {
        let mut input = BufReader::new(File::open(dir.join(Self::FILE))?);
        let mut buf = Vec::with_capacity(512);
        let mut payload = [0u8; PAYLOAD_LEN];
        let mut count = 0u64;
        loop {
            buf.clear();
            if input.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            let value: serde_json::Value = serde_json::from_slice(&buf)?;
            let seq = value["seq"].as_u64();
            let ts = value["ts"].as_u64();
            let hex = value["payload"].as_str();
            let (Some(seq), Some(ts), Some(hex)) = (seq, ts, hex) else {
                return Err(format!("line {}: missing or mistyped field", count + 1).into());
            };
            if seq != count {
                return Err(format!("line {}: seq {seq} out of order", count + 1).into());
            }
            decode_hex(hex, &mut payload).ok_or_else(|| {
                format!("line {}: payload is not {PAYLOAD_LEN} hex bytes", count + 1)
            })?;
            black_box((ts, &payload));
            count += 1;
        }
        Ok(Some(count))
    }
}

// ---------------------------------------------------------------------------
// Bare length-prefixed file

/// The floor for a sequential writer: `u32` little-endian length followed
/// by the payload, through a `BufWriter`, no checksum, one `fdatasync` at
/// the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct LengthPrefixed;

impl LengthPrefixed {
    const FILE: &'static str = "events.bin";
}

impl Contender for LengthPrefixed {
    fn name(&self) -> &str {
        "length-prefixed file"
    }

    fn keeps(&self) -> &str {
        "payload only"
    }

    fn durability(&self) -> &str {
        "fdatasync at end"
    }

    fn integrity(&self) -> &str {
        "none"
    }

    fn write(&self, dir: &Path, events: &[Event]) -> Result<()> {
        let mut out = BufWriter::new(File::create(dir.join(Self::FILE))?);
        for event in events {
            let len = u32::try_from(event.payload.len())?;
            out.write_all(&len.to_le_bytes())?;
            out.write_all(&event.payload)?;
        }
        into_file(out)?.sync_data()?;
        Ok(())
    }

    fn read(&self, dir: &Path) -> Result<Option<u64>> {
        let bytes = fs::read(dir.join(Self::FILE))?;
        let mut rest = bytes.as_slice();
        let mut count = 0u64;
        while !rest.is_empty() {
            let Some((prefix, tail)) = rest.split_first_chunk::<4>() else {
                return Err(format!("record {count}: truncated length prefix").into());
            };
            let len = usize::try_from(u32::from_le_bytes(*prefix))?;
            if tail.len() < len {
                return Err(format!("record {count}: truncated payload").into());
            }
            let (payload, tail) = tail.split_at(len);
            check_payload_len(count, payload.len())?;
            black_box(payload);
            rest = tail;
            count += 1;
        }
        Ok(Some(count))
    }
}

// ---------------------------------------------------------------------------
// BLAKE3 chain, no I/O

/// Per-record keyed BLAKE3 chain, `h = keyed_hash(h, payload)`, starting from
/// an all-zero key, with no I/O: the ceiling that hashing every 100-byte
/// record on its own puts on a hash-chained log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Blake3Chain;

impl Contender for Blake3Chain {
    fn name(&self) -> &str {
        "blake3 per record (no I/O)"
    }

    fn keeps(&self) -> &str {
        "n/a"
    }

    fn durability(&self) -> &str {
        "none (CPU only)"
    }

    fn integrity(&self) -> &str {
        "keyed BLAKE3 chain"
    }

    fn uses_disk(&self) -> bool {
        false
    }

    fn write(&self, _dir: &Path, events: &[Event]) -> Result<()> {
        let mut chain = [0u8; blake3::KEY_LEN];
        for event in events {
            chain = *blake3::keyed_hash(&chain, &event.payload).as_bytes();
        }
        black_box(chain);
        Ok(())
    }

    fn read(&self, _dir: &Path) -> Result<Option<u64>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate_events;

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut hex = String::new();
        push_hex(&mut hex, &bytes);
        let mut back = vec![0u8; bytes.len()];
        assert_eq!(decode_hex(&hex, &mut back), Some(()));
        assert_eq!(back, bytes);
        assert_eq!(decode_hex("zz", &mut [0u8; 1]), None);
        assert_eq!(decode_hex("abc", &mut [0u8; 1]), None);
    }

    #[test]
    fn every_peer_round_trips_a_small_stream() -> Result<()> {
        let events = generate_events(2_345)?;
        let peers: [&dyn Contender; 5] = [
            &McapUnchunked,
            &Fjall,
            &JsonLines,
            &LengthPrefixed,
            &Blake3Chain,
        ];
        for peer in peers {
            let dir = tempfile::tempdir()?;
            peer.write(dir.path(), &events)?;
            let read = peer.read(dir.path())?;
            if peer.uses_disk() {
                assert_eq!(read, Some(2_345), "{}", peer.name());
                assert!(
                    crate::dir_usage(dir.path())?.apparent > 2_345 * 100,
                    "{}",
                    peer.name()
                );
            } else {
                assert_eq!(read, None, "{}", peer.name());
            }
        }
        Ok(())
    }
}
