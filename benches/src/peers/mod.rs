//! The peers Blackbox is compared against, each used the way a careful user of it
//! would write and read a flight-recorder stream, with its durability and integrity
//! stated in its row; none is tuned beyond what its row says.

use std::fs::File;
use std::io::BufWriter;

use crate::Result;

pub mod fjall;
pub mod flat;
pub mod jsonl;
pub mod mcap;
pub mod sqlite;

/// Events per committed batch for the peers that commit periodically.
pub const COMMIT_EVERY: usize = 1_000;

/// Flushes a `BufWriter<File>` and returns the file, with the buffer's error rather
/// than the writer on failure.
fn into_file(writer: BufWriter<File>) -> Result<File> {
    Ok(writer.into_inner().map_err(|e| e.into_error())?)
}

/// The largest payload a reader accepts from a length field it has not checked
/// otherwise: far above the workload's, far below what would hurt to allocate.
const PAYLOAD_BYTES_MAX: usize = 1 << 16;
