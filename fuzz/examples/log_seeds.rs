//! Writes the hand-made seeds of the log targets into `fuzz/corpus/`: blocks forged by
//! FORMAT.md for `log_block` (raw, compressed, damaged), and byte strings of several
//! lengths and patterns for the structured targets (`segment_open`, `log_directory`),
//! whose bytes the targets read as a description.
//!
//! `cargo run -p blackbox-fuzz --example log_seeds`

use std::fs;
use std::path::Path;

use blackbox_fuzz::forge::{self, SegmentForge};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("corpus directory");
    fs::write(dir.join(name), bytes).expect("seed written");
}

/// The first block a forged segment lays out, behind a mode byte.
fn block_seed(mode: u8, compress: bool, records: &[forge::RecordSpec]) -> Vec<u8> {
    let mut seg = SegmentForge::new(0, forge::GENESIS_LINK, 0);
    seg.push_block(records, compress, None);
    let mut out = vec![mode];
    out.extend_from_slice(&seg.bytes[forge::SEGMENT_HEADER_LEN..]);
    out
}

fn main() {
    let records: Vec<forge::RecordSpec> = vec![
        (1, 1_000, b"hello".to_vec()),
        (2, 1_500, vec![7; 40]),
        (1, 4_000_000_000, b"the last record of the block".to_vec()),
    ];
    write(
        "log_block",
        "raw_three_frames.bin",
        &block_seed(0, false, &records),
    );
    write(
        "log_block",
        "raw_fix_everything.bin",
        &block_seed(0x5F, false, &records),
    );
    let zeros: Vec<forge::RecordSpec> = vec![(3, 0, vec![0; 300]), (3, 0, vec![0; 300])];
    write("log_block", "compressed.bin", &block_seed(0, true, &zeros));
    write(
        "log_block",
        "compressed_fix_head.bin",
        &block_seed(0x1D, true, &zeros),
    );
    let mut damaged = block_seed(0, false, &records);
    damaged[1 + 8] ^= 0xFF; // the count, behind a crc no longer fixed
    write("log_block", "damaged_count.bin", &damaged);
    // Frames to compress: the target compresses the bytes after the header (mode 32).
    let mut to_compress = block_seed(0x3F, false, &records);
    to_compress[0] = 0x3F;
    write("log_block", "recompressed.bin", &to_compress);
    let near_max: Vec<forge::RecordSpec> =
        vec![(9, u64::MAX - 5, b"x".to_vec()), (9, u64::MAX, Vec::new())];
    write(
        "log_block",
        "near_max_ts.bin",
        &block_seed(0, false, &near_max),
    );

    // Structured targets: bytes of several lengths and patterns (a xorshift stream).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.to_le_bytes()[0]
    };
    for target in ["segment_open", "log_directory"] {
        for (i, len) in [64usize, 256, 700, 2048].iter().enumerate() {
            let bytes: Vec<u8> = (0..*len).map(|_| next()).collect();
            write(target, &format!("random_{i}.bin"), &bytes);
        }
        write(target, "zeros.bin", &[0; 512]);
        write(target, "ones.bin", &[1; 512]);
        write(
            target,
            "ascending.bin",
            &(0..=255u8).cycle().take(1024).collect::<Vec<_>>(),
        );
    }
}
