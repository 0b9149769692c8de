//! The policy's `[log]` section turns on the log's per-block compression: the recorder's
//! blocks are then stored zstd-compressed where that saves space, read back as
//! recorded, and the policy record says so.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::fs;
use std::path::Path;
use std::sync::Arc;

use blackbox::log::{LogOptions, LogReader, Seq, list_segments, verify};
use blackbox::{Config, Durability, Event, ManualClock, Policy, Recorder};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// (compressed, raw) blocks of the log, from the segment files' bytes: a block header
/// is 72 bytes after the 96-byte segment header; its bytes 4..8 hold the stored length
/// (bits 0..30) and bit 31 for a compressed block; a sealed segment ends in a footer
/// whose length is in its 16-byte trailer.
fn block_kinds(dir: &Path) -> (usize, usize) {
    let (mut compressed, mut raw) = (0, 0);
    for segment in list_segments(dir).unwrap() {
        let bytes = fs::read(&segment.path).unwrap();
        let len = bytes.len();
        let end = if bytes.ends_with(b"BBOXEND\0") {
            len - 16 - le32(&bytes, len - 16) as usize
        } else {
            len
        };
        let mut at = 96;
        while at < end {
            assert_eq!(&bytes[at..at + 4], b"BBLK");
            let word = le32(&bytes, at + 4);
            if word >> 31 == 1 {
                compressed += 1;
            } else {
                raw += 1;
            }
            at += 72 + (word & 0x7fff_ffff) as usize;
        }
        assert_eq!(at, end);
    }
    (compressed, raw)
}

/// Records 20 000 JSON events under `policy` and returns the bytes of the log's
/// segments, after checking that every event reads back and the log verifies.
fn record(dir: &Path, policy: &str) -> u64 {
    let clock = ManualClock::new(T0);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .durability(Durability::Buffered)
        .policy(Policy::from_toml_str(policy).unwrap())
        .log_options(LogOptions::new().segment_bytes_max(1 << 20));
    let rec = Recorder::open(dir, config).unwrap();
    for i in 0..20_000u64 {
        clock.set_ns(T0 + i * SEC / 1000);
        rec.record(&Event::new("joint.state").json(&format!(
            r#"{{"i":{i},"joint":"elbow","angle":{:.3},"mode":"tracking","ok":true}}"#,
            (i % 997) as f64 / 100.0
        )))
        .unwrap();
    }
    rec.close().unwrap();
    let reader = LogReader::open(dir).unwrap();
    let events = reader
        .records(Seq(0)..)
        .unwrap()
        .map(Result::unwrap)
        .filter(|r| r.record_type().0 == 1)
        .count();
    assert_eq!(events, 20_000);
    verify(dir, None, None).unwrap();
    list_segments(dir)
        .unwrap()
        .iter()
        .map(|s| fs::metadata(&s.path).unwrap().len())
        .sum()
}

#[test]
fn a_policy_with_log_compression_zstd_compresses_the_recorders_blocks() {
    let plain = tempfile::tempdir().unwrap();
    let plain_bytes = record(plain.path(), "default = \"full\"\n");
    assert_eq!(block_kinds(plain.path()).0, 0);

    let zstd = tempfile::tempdir().unwrap();
    let zstd_bytes = record(
        zstd.path(),
        "default = \"full\"\n\n[log]\ncompression = \"zstd\"\nlevel = 3\n",
    );
    let (compressed, raw) = block_kinds(zstd.path());
    assert!(compressed > raw, "{compressed} compressed, {raw} raw");
    assert!(
        zstd_bytes * 3 < plain_bytes,
        "{zstd_bytes} bytes compressed, {plain_bytes} not"
    );
}

#[test]
fn the_log_section_reads_back_from_the_policy_record() {
    let text = "default = \"drop\"\n\n[log]\ncompression = \"zstd\"\nlevel = 7\n";
    let policy = Policy::from_toml_str(text).unwrap();
    let again = Policy::from_toml_str(&policy.to_toml()).unwrap();
    assert_eq!(again, policy);
    assert!(policy.to_toml().contains("[log]"), "{}", policy.to_toml());
    assert!(
        policy.to_toml().contains("level = 7"),
        "{}",
        policy.to_toml()
    );
    // Without the section, the policy says nothing of compression, and differs.
    let plain = Policy::from_toml_str("default = \"drop\"\n").unwrap();
    assert!(!plain.to_toml().contains("[log]"));
    assert_ne!(plain, policy);
    let off = Policy::from_toml_str("default = \"drop\"\n[log]\ncompression = \"off\"\n").unwrap();
    assert_eq!(Policy::from_toml_str(&off.to_toml()).unwrap(), off);
    assert_ne!(off, policy);
}

#[test]
fn a_bad_log_section_is_refused_naming_its_line() {
    for (text, line, says) in [
        (
            "default = \"full\"\n[log]\ncompression = \"lz4\"\n",
            3,
            "unknown compression \"lz4\": expected \"zstd\" or \"off\"",
        ),
        (
            "[log]\ncompression = \"zstd\"\nlevel = 40\n",
            3,
            "zstd level 40 must be between",
        ),
        (
            "[log]\ncompression = \"zstd\"\nlevel = 0\n",
            3,
            "zstd level 0 must be between",
        ),
        (
            "[log]\ncompression = \"off\"\nlevel = 3\n",
            3,
            "level applies only to compression = \"zstd\"",
        ),
        (
            "[log]\nlevel = 3\n",
            2,
            "level applies only to compression = \"zstd\"",
        ),
        ("[log]\nzstd = true\n", 2, "unknown field"),
    ] {
        let err = Policy::from_toml_str(text).unwrap_err();
        assert_eq!(err.line, Some(line), "{text:?}: {err}");
        assert!(err.reason.contains(says), "{text:?}: {err}");
    }
}
