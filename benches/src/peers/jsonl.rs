//! JSON lines, the agent developer's log: one object a line, `{"ts": …, "kind": …,
//! "payload": …}`, the payload embedded as JSON in the JSON variant and as a hex
//! string in the binary one, through a `BufWriter` with one `fdatasync` at the end.
//! Read back by parsing every line with `serde_json` (and decoding the hex); the window
//! query parses from the start and stops at the first line past the window.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use serde_json::Value;

use super::{PAYLOAD_BYTES_MAX, into_file};
use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{Tally, WindowQuery, Workload};

const FILE: &str = "events.jsonl";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The JSON lines row.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines;

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0x0f)]);
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

/// Decodes `hex` into `out` (cleared first); `None` for odd length or a non-hex digit.
fn decode_hex(hex: &str, out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let hex = hex.as_bytes();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    for pair in hex.chunks_exact(2) {
        out.push((hex_nibble(pair[0])? << 4) | hex_nibble(pair[1])?);
    }
    Some(())
}

/// Calls `f(line number, ts, kind, payload)` for each line until `f` returns false.
fn scan(dir: &Path, mut f: impl FnMut(u64, u64, &str, &Value) -> Result<bool>) -> Result<()> {
    let mut input = BufReader::with_capacity(1 << 16, File::open(dir.join(FILE))?);
    let mut line = Vec::with_capacity(512);
    let mut n = 0u64;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        n += 1;
        let value: Value = serde_json::from_slice(&line).map_err(|e| format!("line {n}: {e}"))?;
        let (Some(ts), Some(kind), Some(payload)) = (
            value["ts"].as_u64(),
            value["kind"].as_str(),
            value.get("payload"),
        ) else {
            return Err(format!("line {n}: a field is missing or of the wrong type").into());
        };
        if !f(n, ts, kind, payload)? {
            return Ok(());
        }
    }
}

/// Tallies one line's event.
fn add(
    tally: &mut Tally,
    bytes: &mut Vec<u8>,
    n: u64,
    ts: u64,
    kind: &str,
    payload: &Value,
) -> Result<()> {
    match payload {
        Value::String(hex) if hex.len() > 2 * PAYLOAD_BYTES_MAX => {
            Err(format!("line {n}: a payload of {} hex digits", hex.len()).into())
        }
        Value::String(hex) => {
            decode_hex(hex, bytes).ok_or_else(|| format!("line {n}: the payload is not hex"))?;
            tally.add_named(kind, ts, bytes)
        }
        Value::Object(_) => tally.add_parsed(kind, ts, payload),
        _ => Err(format!("line {n}: the payload is neither hex nor an object").into()),
    }
}

impl Contender for JsonLines {
    fn describe(&self) -> Description {
        Description {
            id: "jsonl",
            name: "JSON lines (serde_json)",
            durability: "fdatasync at end",
            integrity: "none",
            window_path: "every line parsed from the start, stopping at the first line past the window",
        }
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let mut out = BufWriter::with_capacity(1 << 16, File::create(dir.join(FILE))?);
        let mut line = Vec::with_capacity(512);
        for e in workload.iter() {
            line.clear();
            line.extend_from_slice(b"{\"ts\":");
            line.extend_from_slice(e.ts_ns.to_string().as_bytes());
            line.extend_from_slice(b",\"kind\":");
            serde_json::to_writer(&mut line, e.kind_name())?;
            line.extend_from_slice(b",\"payload\":");
            match e.json {
                Some(text) => line.extend_from_slice(text.as_bytes()),
                None => {
                    line.push(b'"');
                    push_hex(&mut line, e.payload);
                    line.push(b'"');
                }
            }
            line.extend_from_slice(b"}\n");
            out.write_all(&line)?;
        }
        into_file(out)?.sync_data()?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let mut tally = Tally::default();
        let mut bytes = Vec::new();
        scan(dir, |n, ts, kind, payload| {
            add(&mut tally, &mut bytes, n, ts, kind, payload)?;
            Ok(true)
        })?;
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let mut tally = Tally::default();
        let mut bytes = Vec::new();
        scan(dir, |n, ts, kind, payload| {
            if ts > query.until_ns {
                return Ok(false);
            }
            if kind == query.kind_name() && ts >= query.since_ns {
                add(&mut tally, &mut bytes, n, ts, kind, payload)?;
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
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut hex = Vec::new();
        push_hex(&mut hex, &bytes);
        let hex = String::from_utf8(hex).unwrap_or_default();
        let mut back = Vec::new();
        assert_eq!(decode_hex(&hex, &mut back), Some(()));
        assert_eq!(back, bytes);
        assert_eq!(decode_hex("zz", &mut back), None);
        assert_eq!(decode_hex("abc", &mut back), None);
    }

    #[test]
    fn the_row_gives_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            let dir = tempfile::tempdir()?;
            JsonLines.write(dir.path(), &workload)?;
            expected.all.check(&JsonLines.read_all(dir.path())?)?;
            expected
                .window
                .check(&JsonLines.read_window(dir.path(), &expected.query)?)?;
        }
        Ok(())
    }

    #[test]
    fn each_line_is_a_json_object_a_user_can_read() -> Result<()> {
        let workload = Workload::generate(3, Variant::Json)?;
        let dir = tempfile::tempdir()?;
        JsonLines.write(dir.path(), &workload)?;
        let text = std::fs::read_to_string(dir.path().join(FILE))?;
        let first: Value = serde_json::from_str(text.lines().next().unwrap_or(""))?;
        let e = workload.event(0);
        assert_eq!(first["ts"].as_u64(), Some(e.ts_ns));
        assert_eq!(first["kind"].as_str(), Some(e.kind_name()));
        assert_eq!(first["payload"]["seq"].as_u64(), Some(0));
        Ok(())
    }
}
