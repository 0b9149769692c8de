//! Frame and block decoding on raw bytes: the block header and frame decoders alone,
//! then one block in a segment through `verify`, a range read and salvage, against the
//! forger's reference decoder ([`crate::forge::decode_block`]).
//!
//! The first byte says which checksums to recompute over the rest (the block header's,
//! the frames', the compressed head's, the chain link), and whether to compress the
//! stored bytes as frames first, so the fuzzer reaches the checks behind each one.

use std::fs;

use blackbox_log::format::{BlockHeader, decode_frame, encode_frame, frame_len};
use blackbox_log::{LogReader, Salvaged, Seq, verify};

use crate::forge::{
    self, BLOCK_HEADER_LEN, BlockMeta, COMPRESSED_BIT, COMPRESSED_HEAD_LEN, FRAME_HEADER_LEN,
};
use crate::reading::{self, assert_names_file, check_read};

const FIX_HEADER_CRC: u8 = 1;
const FIX_FRAME_CRCS: u8 = 2;
const FIX_HEAD_CRC: u8 = 4;
const FIX_LINK: u8 = 8;
const FIX_SEQ: u8 = 16;
const COMPRESS: u8 = 32;
const FIX_LEN: u8 = 64;

/// Recomputes the crc of every frame of `frames` that lies whole inside it, for seqs
/// from `first_seq`.
fn fix_frame_crcs(frames: &mut [u8], first_seq: u64, count: u32) {
    let mut at = 0usize;
    for i in 0..count {
        if frames.len().saturating_sub(at) < FRAME_HEADER_LEN {
            return;
        }
        let len = usize::try_from(forge::le32(frames, at)).unwrap_or(usize::MAX);
        let Some(end) = len
            .checked_add(FRAME_HEADER_LEN + at)
            .filter(|&e| e <= frames.len())
        else {
            return;
        };
        let seq = first_seq.wrapping_add(u64::from(i));
        let c = forge::crc(&[
            &seq.to_le_bytes(),
            &frames[at..at + 12],
            &frames[at + FRAME_HEADER_LEN..end],
        ]);
        frames[at + 12..at + 16].copy_from_slice(&c.to_le_bytes());
        at = forge::align8(end);
    }
}

/// The block the fuzzer's bytes make once the fix-ups in `mode` are applied.
fn fix_up(mode: u8, raw: &[u8]) -> Vec<u8> {
    let mut b = raw.to_vec();
    if b.len() < BLOCK_HEADER_LEN {
        return b;
    }
    if mode & FIX_SEQ != 0 {
        b[16..24].copy_from_slice(&0u64.to_le_bytes());
    }
    let mut m = BlockMeta::read(&b);
    if mode & COMPRESS != 0 {
        // The bytes after the header are frames to store compressed.
        let mut frames = b[BLOCK_HEADER_LEN..].to_vec();
        frames.truncate(frames.len() / 8 * 8);
        if mode & FIX_FRAME_CRCS != 0 {
            fix_frame_crcs(&mut frames, m.first_seq, m.count);
        }
        let z = forge::zstd_frame(&frames);
        let stored = forge::compressed_stored(u32::try_from(frames.len()).unwrap_or(u32::MAX), &z);
        m.len_word = u32::try_from(stored.len()).unwrap_or(u32::MAX) | COMPRESSED_BIT;
        b.truncate(BLOCK_HEADER_LEN);
        b.extend_from_slice(&stored);
    } else if mode & FIX_LEN != 0 {
        let stored = (b.len() - BLOCK_HEADER_LEN) / 8 * 8;
        b.truncate(BLOCK_HEADER_LEN + stored);
        let bit = m.len_word & COMPRESSED_BIT;
        m.len_word = u32::try_from(stored).unwrap_or(u32::MAX) | bit;
    }
    b[4..8].copy_from_slice(&m.len_word.to_le_bytes());
    let stored_len = usize::try_from(m.len_word & !COMPRESSED_BIT).unwrap_or(usize::MAX);
    // Bytes past the block the header declares are not part of it.
    if let Some(total) = stored_len.checked_add(BLOCK_HEADER_LEN)
        && total < b.len()
    {
        b.truncate(total);
    }
    let compressed = m.len_word & COMPRESSED_BIT != 0;
    let stored_end = b.len();
    if !compressed && mode & FIX_FRAME_CRCS != 0 {
        fix_frame_crcs(&mut b[BLOCK_HEADER_LEN..stored_end], m.first_seq, m.count);
    }
    if compressed
        && mode & FIX_HEAD_CRC != 0
        && stored_end - BLOCK_HEADER_LEN >= COMPRESSED_HEAD_LEN
    {
        let s = &b[BLOCK_HEADER_LEN..];
        let zlen = usize::try_from(forge::le32(s, 4)).unwrap_or(usize::MAX);
        if zlen <= s.len() - COMPRESSED_HEAD_LEN {
            let c = forge::crc(&[
                &s[0..8],
                &s[COMPRESSED_HEAD_LEN..COMPRESSED_HEAD_LEN + zlen],
            ]);
            b[BLOCK_HEADER_LEN + 8..BLOCK_HEADER_LEN + 12].copy_from_slice(&c.to_le_bytes());
        }
    }
    if mode & FIX_LINK != 0 && b.len() == BLOCK_HEADER_LEN + stored_len {
        let l = forge::link(
            &b[BLOCK_HEADER_LEN..],
            &m.chain_meta(),
            &forge::GENESIS_LINK,
        );
        b[40..72].copy_from_slice(&l);
    }
    if mode & FIX_HEADER_CRC != 0 {
        let c = forge::crc(&[&b[0..12], &b[16..72]]);
        b[12..16].copy_from_slice(&c.to_le_bytes());
    }
    b
}

/// The decoders alone: a header that decodes is one the reference accepts, and encodes
/// back to the same bytes; a frame that decodes lies inside the buffer and encodes back
/// to the same bytes.
fn decoders(b: &[u8]) {
    if b.len() < BLOCK_HEADER_LEN {
        return;
    }
    let decoded = BlockHeader::decode(&b[..BLOCK_HEADER_LEN]);
    assert_eq!(
        decoded.is_ok(),
        forge::intact_block_header(b),
        "the block header decoder and FORMAT.md disagree: {decoded:?}"
    );
    let Ok(h) = decoded else {
        return;
    };
    let mut again = [0u8; BLOCK_HEADER_LEN];
    h.encode_into(&mut again);
    assert_eq!(
        again[..],
        b[..BLOCK_HEADER_LEN],
        "a decoded header encodes differently"
    );
    assert!(h.count >= 1 && h.last_ts >= h.first_ts);
    assert!(h.first_seq.checked_add(u64::from(h.count)).is_some());
    if h.compressed {
        return;
    }
    let frames = &b[BLOCK_HEADER_LEN..];
    let mut at = 0usize;
    for i in 0..h.count {
        let seq = h.first_seq + u64::from(i);
        let Ok((fh, total)) = decode_frame(&frames[at..], seq, true) else {
            return;
        };
        assert!(total <= frames.len() - at, "a frame runs past its buffer");
        assert_eq!(
            total,
            frame_len(fh.payload_len as usize),
            "a frame's length"
        );
        let payload =
            &frames[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + fh.payload_len as usize];
        let mut out = Vec::new();
        encode_frame(&mut out, fh, seq, payload);
        assert_eq!(
            out[..],
            frames[at..at + total],
            "a decoded frame encodes differently"
        );
        let forged = forge::frame(seq, fh.record_type, 0, fh.ts_delta, payload);
        assert_eq!(out, forged, "the frame encoder and FORMAT.md disagree");
        at += total;
    }
}

/// The target: the first byte picks the fix-ups, the rest is a block.
pub fn log_block(data: &[u8]) {
    let Some((&mode, raw)) = data.split_first() else {
        return;
    };
    decoders(raw);
    let block = fix_up(mode, raw);
    decoders(&block);
    let oracle = forge::decode_block(&block, 0, 0, &forge::GENESIS_LINK, true);
    // A range read leaves the frames' checksums to a chain link that matched.
    let read_oracle = forge::decode_block(&block, 0, 0, &forge::GENESIS_LINK, false);
    let scratch = forge::Scratch::new("log_block");
    let dir = scratch.path();
    let path = dir.join(forge::segment_name(0));
    let mut file = forge::segment_header(0, &forge::GENESIS_LINK);
    file.extend_from_slice(&block);
    if let Err(e) = fs::write(&path, &file) {
        panic!("cannot write {}: {e}", path.display());
    }
    let whole = oracle
        .as_ref()
        .ok()
        .filter(|(_, _, used)| *used == block.len());
    // `verify` also decodes every prune record (type 0xFFFF) it meets, which the
    // reference decoder does not: a block holding one may go either way there.
    let holds_prune = oracle
        .as_ref()
        .is_ok_and(|(r, _, _)| r.iter().any(|r| r.record_type == forge::PRUNE_RECORD_TYPE));
    match verify(dir, None, None) {
        Ok(_) | Err(_) if holds_prune => {}
        Ok(report) => match whole {
            Some((records, own, _)) => {
                assert_eq!(report.records, records.len() as u64, "verify's count");
                assert_eq!(report.torn_tail, None, "a whole block is no torn tail");
                assert_eq!(
                    report.last.map(|d| d.link),
                    Some(*own),
                    "verify's last link"
                );
            }
            None => {
                assert_eq!(
                    report.records, 0,
                    "verify accepted records of a block FORMAT.md refuses: {oracle:?}"
                );
                if !block.is_empty() {
                    let torn = report.torn_tail.map(|t| (t.1, t.2));
                    assert_eq!(
                        torn,
                        Some((forge::SEGMENT_HEADER_LEN as u64, block.len() as u64)),
                        "a refused block must be the torn tail"
                    );
                }
            }
        },
        Err(e) => {
            assert!(
                whole.is_none(),
                "verify refused a block FORMAT.md accepts: {e}"
            );
            assert_names_file("verify", &e, dir);
        }
    }
    let reader = match LogReader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            assert!(whole.is_none(), "LogReader::open refused a good block: {e}");
            assert_names_file("LogReader::open", &e, dir);
            return;
        }
    };
    let read_whole = read_oracle.ok().filter(|(_, _, used)| *used == block.len());
    check_read(
        "read of the block",
        &reading::by_seq(&reader, 0, u64::MAX),
        &read_whole.map(|w| w.0).unwrap_or_default(),
        whole.is_some(),
        dir,
    );
    // Salvage reads around damage: it may yield any block it finds at an 8-aligned
    // offset whose link matches from a link stored before it (the segment header's, or
    // an intact block header's), the seqs before it lost. What it yields must be such
    // a block's records; a block the reference decoder accepts whole, all of it.
    let mut anchors = vec![forge::GENESIS_LINK];
    let mut salvageable: Vec<forge::Rec> = Vec::new();
    for at in (0..block.len()).step_by(8) {
        let rest = &block[at..];
        if !forge::intact_block_header(rest) {
            continue;
        }
        let m = BlockMeta::read(rest);
        for prev in &anchors {
            if let Ok((records, _, _)) = forge::decode_block(rest, m.first_seq, 0, prev, true) {
                salvageable.extend(records);
            }
        }
        let mut own = [0u8; 32];
        own.copy_from_slice(&rest[40..72]);
        anchors.push(own);
    }
    let expected = whole.map(|w| w.0.clone()).unwrap_or_default();
    if let Ok(items) = reader.salvage(Seq(0)..) {
        let got: Vec<_> = items
            .filter_map(|i| match i {
                Salvaged::Record(r) => Some(reading::rec(&r)),
                Salvaged::Lost(_) => None,
            })
            .collect();
        for r in &got {
            assert!(
                salvageable.contains(r),
                "salvage yielded seq {} that no intact block holds",
                r.seq
            );
        }
        for r in &expected {
            assert!(
                got.contains(r),
                "salvage lost seq {} of a whole block",
                r.seq
            );
        }
    }
}
