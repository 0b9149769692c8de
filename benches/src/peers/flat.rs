//! The floor for a sequential writer: a length-prefixed file with no checks. Each
//! record is a `u32` payload length, a `u64` timestamp and a one-byte kind id (all
//! little-endian), then the payload, through a `BufWriter`, with one `fdatasync` at the
//! end. Read back through a `BufReader`; the window query scans from the start and
//! stops at the first record past the window (the writer wrote in time order).

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::Path;

use super::{PAYLOAD_BYTES_MAX, into_file};
use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{Tally, WindowQuery, Workload};

const FILE: &str = "events.bin";
const HEADER_BYTES: usize = 13;

/// The length-prefixed file row.
#[derive(Debug, Clone, Copy, Default)]
pub struct LengthPrefixed;

/// Calls `f(kind, ts, payload)` for each record in the file until `f` returns false.
fn scan(dir: &Path, mut f: impl FnMut(u8, u64, &[u8]) -> Result<bool>) -> Result<()> {
    let mut input = BufReader::with_capacity(1 << 16, File::open(dir.join(FILE))?);
    let mut header = [0u8; HEADER_BYTES];
    let mut payload = Vec::new();
    let mut n = 0u64;
    loop {
        match input.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let (len, rest) = header.split_at(4);
        let (ts, kind) = rest.split_at(8);
        let len = usize::try_from(u32::from_le_bytes(len.try_into()?))?;
        if len > PAYLOAD_BYTES_MAX {
            return Err(format!("record {n}: a length of {len} bytes").into());
        }
        payload.resize(len, 0);
        input
            .read_exact(&mut payload)
            .map_err(|e| format!("record {n}: truncated payload: {e}"))?;
        if !f(kind[0], u64::from_le_bytes(ts.try_into()?), &payload)? {
            return Ok(());
        }
        n += 1;
    }
}

impl Contender for LengthPrefixed {
    fn describe(&self) -> Description {
        Description {
            id: "flat",
            name: "length-prefixed file",
            durability: "fdatasync at end",
            integrity: "none",
            window_path: "scan from the start, stopping at the first record past the window",
        }
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(dir.join(FILE))?);
        for e in workload.iter() {
            let len = u32::try_from(e.payload.len())?;
            out.write_all(&len.to_le_bytes())?;
            out.write_all(&e.ts_ns.to_le_bytes())?;
            out.write_all(&[e.kind])?;
            out.write_all(e.payload)?;
        }
        into_file(out)?.sync_data()?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let mut tally = Tally::default();
        scan(dir, |kind, ts, payload| {
            tally.add(kind, ts, payload)?;
            Ok(true)
        })?;
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let mut tally = Tally::default();
        scan(dir, |kind, ts, payload| {
            if ts > query.until_ns {
                return Ok(false);
            }
            if query.matches(kind, ts) {
                tally.add(kind, ts, payload)?;
            }
            Ok(true)
        })?;
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Expected;
    use crate::workload::Variant;

    #[test]
    fn the_row_gives_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            let dir = tempfile::tempdir()?;
            LengthPrefixed.write(dir.path(), &workload)?;
            expected.all.check(&LengthPrefixed.read_all(dir.path())?)?;
            expected
                .window
                .check(&LengthPrefixed.read_window(dir.path(), &expected.query)?)?;
        }
        Ok(())
    }

    #[test]
    fn a_truncated_file_or_a_huge_length_is_an_error() -> Result<()> {
        let workload = Workload::generate(10, Variant::Binary)?;
        let dir = tempfile::tempdir()?;
        LengthPrefixed.write(dir.path(), &workload)?;
        let path = dir.path().join(FILE);
        let bytes = std::fs::read(&path)?;
        std::fs::write(&path, &bytes[..bytes.len() - 1])?;
        assert!(LengthPrefixed.read_all(dir.path()).is_err());
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&path, &huge)?;
        let err = LengthPrefixed
            .read_all(dir.path())
            .err()
            .ok_or("a huge length was accepted")?;
        assert!(err.to_string().contains("record 0"), "{err}");
        Ok(())
    }
}
