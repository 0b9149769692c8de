//! Helpers shared by the integration tests: a tiny deterministic PRNG, records that are
//! a function of their seq (so any reader can check any record it is handed), and
//! directory copies and full reads.
#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

use std::fs;
use std::path::Path;

use blackbox_log::{ChainKey, LogReader, ReaderOptions, RecordType, Seq};

/// splitmix64: tiny and deterministic, for delays, batch sizes and read ranges.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The record written at a seq.
pub struct Expected {
    pub record_type: RecordType,
    pub ts_ns: u64,
    pub payload: Vec<u8>,
}

/// The record at `seq`: type and payload (up to `max_payload_bytes`) derived from the
/// blake3 hash of the seq, at `ts_ns`.
pub fn expected_record(seq: u64, max_payload_bytes: usize, ts_ns: u64) -> Expected {
    let hash = blake3::hash(&seq.to_le_bytes());
    let h = hash.as_bytes();
    let len = usize::from(u16::from_le_bytes([h[0], h[1]])) % (max_payload_bytes + 1);
    Expected {
        record_type: RecordType(u16::from(h[2] % 4)),
        ts_ns,
        payload: h.iter().copied().cycle().take(len).collect(),
    }
}

/// A record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub seq: u64,
    pub ts: u64,
    pub record_type: u16,
    pub payload: Vec<u8>,
}

/// Copies the files (not subdirectories) of `src` into `dst`.
pub fn copy_dir(src: &Path, dst: &Path) {
    for entry in fs::read_dir(src).expect("read source directory") {
        let entry = entry.expect("directory entry");
        if entry.file_type().expect("file type").is_file() {
            fs::copy(entry.path(), dst.join(entry.file_name())).expect("copy file");
        }
    }
}

/// Every record of the log in `dir`, read with the given chain key.
pub fn read_all(dir: &Path, key: Option<[u8; 32]>) -> Vec<Rec> {
    let opts = ReaderOptions {
        key: key.map(ChainKey::new),
    };
    LogReader::open_with(dir, opts)
        .expect("open reader")
        .records(Seq(0)..)
        .expect("range read")
        .map(|r| {
            let r = r.expect("intact record");
            Rec {
                seq: r.seq().0,
                ts: r.ts_ns(),
                record_type: r.record_type().0,
                payload: r.payload().to_vec(),
            }
        })
        .collect()
}
