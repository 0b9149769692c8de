//! Reading an MCAP file from start to end, record by record, as it streams from disk:
//! chunks decompressed (zstd, lz4) and their CRCs checked, the bytes hashed as they
//! are read, and any fault (not an MCAP file, truncated, a CRC that does not match, a
//! record that does not parse) an [`Error::Mcap`] naming the file and the byte offset
//! read up to.

use std::io::Read;
use std::path::Path;

use mcap::records::Record;
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};

use crate::error::{Error, Result};

/// The most bytes read from the file at a time: what the reader holds is bounded by
/// what the file holds, never by a length the file claims.
const READ_BYTES_MAX: usize = 1 << 20;

/// The longest record outside a chunk (and the longest chunk) read: a record claiming
/// more is refused rather than buffered.
const RECORD_BYTES_MAX: usize = 1 << 30;

/// Reads the MCAP file `path`, calling `on_record` with each record (those inside
/// chunks included, in file order) and the byte offset read up to; returns the file's
/// byte count and blake3.
///
/// # Errors
///
/// [`Error::Mcap`] for a file that is not an MCAP file or is damaged; [`Error::Io`];
/// whatever `on_record` returns.
pub(crate) fn read_mcap(
    path: &Path,
    on_record: &mut dyn FnMut(Record<'_>, u64) -> Result<()>,
) -> Result<(u64, [u8; 32])> {
    let mut file = std::fs::File::open(path).map_err(|source| Error::Io {
        op: "open",
        path: path.to_owned(),
        source,
    })?;
    let mut reader = LinearReader::new_with_options(
        // A chunk's CRC is checked before any of its records is handed out: a damaged
        // chunk gives none.
        LinearReaderOptions::default()
            .with_record_length_limit(RECORD_BYTES_MAX)
            .with_prevalidate_chunk_crcs(true)
            .with_validate_data_section_crc(true)
            .with_validate_summary_section_crc(true),
    );
    let mut hasher = blake3::Hasher::new();
    let mut offset: u64 = 0;
    let fault = |offset: u64, e: mcap::McapError| Error::Mcap {
        path: path.to_owned(),
        offset,
        reason: match e {
            // The 8 magic bytes and a header: no MCAP file is shorter.
            mcap::McapError::UnexpectedEof if offset < 8 => {
                format!("it is {offset} bytes long, too short to be an MCAP file")
            }
            e => reason(&e),
        },
    };
    while let Some(event) = reader.next_event() {
        match event.map_err(|e| fault(offset, e))? {
            LinearReadEvent::ReadRequest(need) => {
                let buf = reader.insert(need.clamp(1, READ_BYTES_MAX));
                let n = read_some(&mut file, buf).map_err(|source| Error::Io {
                    op: "read",
                    path: path.to_owned(),
                    source,
                })?;
                hasher.update(&buf[..n]);
                offset += n as u64;
                reader.notify_read(n);
            }
            LinearReadEvent::Record { data, opcode } => {
                let record = mcap::parse_record(opcode, data).map_err(|e| fault(offset, e))?;
                on_record(record, offset)?;
            }
        }
    }
    Ok((offset, *hasher.finalize().as_bytes()))
}

/// Reads into `buf`, retrying when interrupted; 0 only at the end of the file.
fn read_some(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// What an `mcap` error means, as a clause.
fn reason(e: &mcap::McapError) -> String {
    use mcap::McapError as M;
    match e {
        M::BadMagic => "it does not start with the MCAP magic bytes".to_owned(),
        M::UnexpectedEof => "it ends in the middle of a record (truncated)".to_owned(),
        M::UnexpectedEoc => "a chunk ends in the middle of a record".to_owned(),
        M::BadChunkCrc { saved, calculated } => format!(
            "a chunk's CRC does not match (the file says {saved:08x}, its bytes give {calculated:08x})"
        ),
        M::BadDataCrc { saved, calculated } => format!(
            "the data section's CRC does not match (the file says {saved:08x}, its bytes give {calculated:08x})"
        ),
        M::BadSummaryCrc { saved, calculated } => format!(
            "the summary section's CRC does not match (the file says {saved:08x}, its bytes give {calculated:08x})"
        ),
        M::RecordTooLarge { opcode, len } => format!(
            "a record (opcode {opcode:#04x}) claims {len} bytes, more than the {RECORD_BYTES_MAX} read"
        ),
        M::ChunkTooLarge(len) => {
            format!("a chunk claims {len} bytes, more than the {RECORD_BYTES_MAX} read")
        }
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => "it does not parse".to_owned(),
            }
        }
    }
}
