//! One forged segment through every path that opens it: the writer's recovery, `verify`,
//! range reads by seq and by time, `digest`, `structure` and salvage.
//!
//! The fuzzer's bytes describe a segment (its start, blocks of records with timestamps
//! that jump or sit near `u64::MAX`, lies in blocks and footer, a torn or garbage tail);
//! [`crate::forge`] lays it out with every checksum and chain link valid, and knows what
//! each path must say.

use std::fs;
use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use blackbox_log::{Digest, Log, LogOptions, LogReader, Record, RecordType, Salvaged, Seq, verify};

use crate::forge::{self, BlockLie, IndexEntry, Rec, RecordSpec, SegmentForge};
use crate::reading::{self, assert_names_file, check_read, check_read_within};

/// Where the segment starts.
#[derive(Debug, Arbitrary)]
enum Start {
    Zero,
    At(u64),
    NearMax(u16),
}

/// How a record's timestamp follows the one before.
#[derive(Debug, Arbitrary)]
enum Step {
    Same,
    Small(u16),
    Large(u32),
    Jump(u64),
    NearMax(u16),
}

#[derive(Debug, Arbitrary)]
struct RecDesc {
    record_type: u16,
    step: Step,
    len: u16,
    fill: u8,
}

#[derive(Debug, Arbitrary)]
struct BlockDesc {
    records: Vec<RecDesc>,
    compress: bool,
    lie: Option<BlockLie>,
}

/// A lie a footer tells (its crc32c and tag authenticator recomputed but for `TagMac`).
#[derive(Debug, Arbitrary)]
enum FooterLie {
    RecordCount(u64),
    BlockCount(u64),
    FirstSeq(u64),
    LastSeq(u64),
    FirstTs(u64),
    LastTs(u64),
    LastLink,
    TypeCount(u8, u64),
    ExtraType(u16, u64),
    DropType(u8),
    IndexOffset(u8, u64),
    IndexSeq(u8, u64),
    IndexTs(u8, u64),
    IndexLink(u8),
    ExtraIndex(u64, u64, u64),
    TagCount(u8, u32),
    TagMac,
}

#[derive(Debug, Arbitrary)]
struct FooterDesc {
    index_every: u8,
    tags: bool,
    lies: Vec<FooterLie>,
}

#[derive(Debug, Arbitrary)]
enum TailDesc {
    None,
    Torn {
        records: Vec<RecDesc>,
        compress: bool,
        keep: u16,
    },
    Garbage(Vec<u8>),
    Zeros(u8),
}

#[derive(Debug, Arbitrary)]
struct ReadDesc {
    seq_lo: u8,
    seq_len: u8,
    ts_lo: u8,
    ts_hi: u8,
}

/// A page a power loss kept from the disk (docs/FORMAT.md, "Recovery"): the data was
/// synced up to the start of block `block`, and the page `page` after that reads as
/// zeros from its start (or from the synced end, inside it) to its end.
#[derive(Debug, Arbitrary)]
struct LostPageDesc {
    block: u8,
    page: u16,
}

#[derive(Debug, Arbitrary)]
struct Desc {
    start: Start,
    blocks: Vec<BlockDesc>,
    footer: Option<FooterDesc>,
    tail: TailDesc,
    verify_on_open: bool,
    read: ReadDesc,
    /// Last, so that inputs written before it decode as they did.
    lost_page: Option<LostPageDesc>,
}

const MAX_BLOCKS: usize = 10;
const MAX_RECORDS: usize = 16;

fn payload(len: u16, fill: u8) -> Vec<u8> {
    let n = usize::from(len % 512);
    if fill & 1 == 0 {
        vec![fill; n]
    } else {
        (0..n)
            .map(|i| fill.wrapping_add(i.to_le_bytes()[0]))
            .collect()
    }
}

/// The records of `descs`, each stamped after `ts` by its step; split into runs that
/// fit one block (timestamps within `u32::MAX` ns of the run's first).
fn runs(descs: &[RecDesc], ts: &mut u64) -> Vec<Vec<RecordSpec>> {
    let mut out: Vec<Vec<RecordSpec>> = Vec::new();
    for d in descs.iter().take(MAX_RECORDS) {
        *ts = match d.step {
            Step::Same => *ts,
            Step::Small(x) => ts.saturating_add(u64::from(x)),
            Step::Large(x) => ts.saturating_add(u64::from(x)),
            Step::Jump(x) => ts.saturating_add(x),
            Step::NearMax(x) => (*ts).max(u64::MAX - u64::from(x)),
        };
        // The log reserves the prune record's type; this target forges none.
        let t = if d.record_type == forge::PRUNE_RECORD_TYPE {
            d.record_type - 1
        } else {
            d.record_type
        };
        let rec = (t, *ts, payload(d.len, d.fill));
        match out.last_mut() {
            Some(run) if *ts - run[0].1 <= u64::from(u32::MAX) => run.push(rec),
            _ => out.push(vec![rec]),
        }
    }
    out
}

fn apply(spec: &mut forge::FooterSpec, lie: &FooterLie) {
    let pick = |n: usize, at: u8| usize::from(at) % n.max(1);
    match *lie {
        FooterLie::RecordCount(x) => spec.record_count = x,
        FooterLie::BlockCount(x) => spec.block_count = x,
        FooterLie::FirstSeq(x) => spec.first_seq = x,
        FooterLie::LastSeq(x) => spec.last_seq = x,
        FooterLie::FirstTs(x) => spec.first_ts = x,
        FooterLie::LastTs(x) => spec.last_ts = x,
        FooterLie::LastLink => spec.last_link[7] ^= 0x40,
        FooterLie::TypeCount(at, n) => {
            if !spec.type_counts.is_empty() {
                let i = pick(spec.type_counts.len(), at);
                spec.type_counts[i].1 = n;
            }
        }
        FooterLie::ExtraType(t, n) => {
            if let Err(i) = spec.type_counts.binary_search_by_key(&t, |x| x.0) {
                spec.type_counts.insert(i, (t, n.max(1)));
            }
        }
        FooterLie::DropType(at) => {
            if !spec.type_counts.is_empty() {
                let i = pick(spec.type_counts.len(), at);
                spec.type_counts.remove(i);
            }
        }
        FooterLie::IndexOffset(at, x) => {
            if !spec.index.is_empty() {
                let i = pick(spec.index.len(), at);
                spec.index[i].offset = x;
            }
        }
        FooterLie::IndexSeq(at, x) => {
            if !spec.index.is_empty() {
                let i = pick(spec.index.len(), at);
                spec.index[i].first_seq = x;
            }
        }
        FooterLie::IndexTs(at, x) => {
            if !spec.index.is_empty() {
                let i = pick(spec.index.len(), at);
                spec.index[i].first_ts = x;
            }
        }
        FooterLie::IndexLink(at) => {
            if !spec.index.is_empty() {
                let i = pick(spec.index.len(), at);
                spec.index[i].prev_link[3] ^= 0x10;
            }
        }
        FooterLie::ExtraIndex(seq, ts, offset) => {
            let i = spec.index.partition_point(|e| e.first_seq <= seq);
            spec.index.insert(
                i,
                IndexEntry {
                    first_seq: seq,
                    first_ts: ts,
                    offset,
                    prev_link: [0xA5; 32],
                },
            );
        }
        FooterLie::TagCount(at, n) => {
            if !spec.tags.is_empty() {
                let i = pick(spec.tags.len(), at);
                spec.tags[i].1 = n;
            }
        }
        FooterLie::TagMac => spec.tag_mac_flip = true,
    }
}

/// What the forger laid out and what every path must therefore say.
struct Forged {
    bytes: Vec<u8>,
    first_seq: u64,
    /// Records of every honest block, in order (those after a lie too).
    honest: Vec<Rec>,
    /// Records of the lying blocks that are intact read alone (a seq or time out of
    /// place): salvage, which reads around damage, may return them.
    intact_alone: Vec<Rec>,
    /// Those of them past the segment's first block: a read by seq that starts there
    /// through the sparse index checks no block before it (FORMAT.md, "What readers
    /// check"), so it may return them too; the first block must continue the segment
    /// header.
    readable_alone: Vec<Rec>,
    /// Records of the blocks before the first byte that is not a well-formed block.
    prefix: Vec<Rec>,
    /// The chain point after the prefix.
    prefix_digest: Option<Digest>,
    /// Whether the file ends in the forger's footer.
    sealed: bool,
    footer_lie: bool,
    block_lie: bool,
    /// Where the bytes that are not well-formed blocks start (a lying block, the torn or
    /// garbage tail, a footer followed by more bytes), if anywhere.
    bad_from: Option<u64>,
    /// Whether an intact block header follows `bad_from` (damage before intact data).
    intact_after_bad: bool,
    /// Whether the tail starts with an intact block header the forger did not lay out.
    stray_header: bool,
    /// Whether `bad_from` is where a lost page starts to change the blocks: recovery cuts
    /// from there, intact blocks after it included, and salvage may read those.
    lost_page: bool,
}

impl Forged {
    /// Whether the log is well formed but for a torn or garbage tail: every path must
    /// succeed on it.
    fn well_formed(&self) -> bool {
        self.first_seq == 0
            && !self.footer_lie
            && !self.block_lie
            && !self.intact_after_bad
            && !self.stray_header
    }

    /// Whether a path may accept the log at all (a lie at the very end of an active
    /// segment reads as a torn write).
    fn acceptable(&self) -> bool {
        let sealed_lie = self.sealed && self.block_lie;
        self.first_seq == 0 && !self.footer_lie && !sealed_lie && !self.intact_after_bad
    }

    fn torn(&self) -> Option<(u64, u64)> {
        if self.sealed {
            return None;
        }
        self.bad_from.map(|at| (at, self.bytes.len() as u64 - at))
    }
}

fn forge_segment(desc: &Desc) -> Forged {
    let first_seq = match desc.start {
        Start::Zero => 0,
        Start::At(x) => x,
        Start::NearMax(x) => u64::MAX - u64::from(x),
    };
    let mut seg = SegmentForge::new(first_seq, forge::GENESIS_LINK, 0);
    let mut ts = 0u64;
    for b in desc.blocks.iter().take(MAX_BLOCKS) {
        for (i, run) in runs(&b.records, &mut ts).iter().enumerate() {
            seg.push_block(run, b.compress, if i == 0 { b.lie } else { None });
        }
    }
    let mut footer_lie = false;
    if let Some(f) = &desc.footer
        && let Some(honest) = seg.honest_footer(usize::from(f.index_every % 4) + 1, f.tags)
    {
        let mut spec = honest.clone();
        for lie in f.lies.iter().take(3) {
            apply(&mut spec, lie);
        }
        footer_lie = spec != honest;
        seg.seal(&spec);
    }
    let block_lie = seg.first_lie().is_some();
    let honest = seg.honest_records();
    let intact_alone: Vec<Rec> = seg
        .blocks
        .iter()
        .filter_map(|b| b.intact_alone.clone())
        .flatten()
        .collect();
    let readable_alone: Vec<Rec> = seg
        .blocks
        .iter()
        .filter(|b| b.offset > forge::SEGMENT_HEADER_LEN as u64)
        .filter_map(|b| b.intact_alone.clone())
        .flatten()
        .collect();
    let data_len = seg.bytes.len() as u64;
    let mut stray_header = false;
    match &desc.tail {
        TailDesc::None => {}
        TailDesc::Torn {
            records,
            compress,
            keep,
        } => {
            let mut next = seg.clone();
            let before = next.bytes.len();
            if let Some(run) = runs(records, &mut ts).first() {
                next.push_block(run, *compress, None);
                let n = next.bytes.len() - before;
                let keep = usize::from(*keep) % n;
                seg.bytes
                    .extend_from_slice(&next.bytes[before..before + keep]);
            }
        }
        TailDesc::Garbage(g) => {
            let g = &g[..g.len().min(256)];
            stray_header = forge::intact_block_header(g);
            seg.bytes.extend_from_slice(g);
        }
        TailDesc::Zeros(n) => {
            seg.bytes
                .resize(seg.bytes.len() + (usize::from(*n % 32) + 1) * 8, 0);
        }
    }
    // Garbage that ends like a trailer would make the file look sealed.
    if seg.bytes.len() as u64 > data_len
        && seg.bytes.ends_with(&forge::TRAILER_MAGIC)
        && let Some(last) = seg.bytes.last_mut()
    {
        *last ^= 1;
    }
    let tail_at = (seg.bytes.len() as u64 > data_len).then(|| seg.footer_at.unwrap_or(data_len));
    // A lost page in an otherwise well-formed active segment.
    let original = seg.bytes.clone();
    let lost_at = match &desc.lost_page {
        Some(lost)
            if first_seq == 0
                && !block_lie
                && seg.footer_at.is_none()
                && tail_at.is_none()
                && !seg.blocks.is_empty() =>
        {
            lose_page(&mut seg, lost)
        }
        _ => None,
    };
    let sealed = seg.footer_at.is_some() && tail_at.is_none();
    // A footer followed by more bytes is no footer: what it says does not count.
    let footer_lie = footer_lie && sealed;
    let bad_from = [seg.first_lie(), tail_at, lost_at]
        .into_iter()
        .flatten()
        .min();
    let prefix_blocks: Vec<_> = seg
        .blocks
        .iter()
        .filter(|b| bad_from.is_none_or(|at| b.offset < at))
        .collect();
    let prefix: Vec<Rec> = prefix_blocks
        .iter()
        .flat_map(|b| b.records.iter().cloned())
        .collect();
    let prefix_digest = prefix_blocks.last().map(|b| Digest {
        seq: b.meta.first_seq + u64::from(b.meta.count) - 1,
        link: b.link,
    });
    let intact_after_bad = lost_at.is_none()
        && bad_from.is_some_and(|at| {
            forge::intact_header_after(&seg.bytes, usize::try_from(at).unwrap_or(usize::MAX))
        });
    // After a lost page the log ends where it starts to change the blocks; the blocks it
    // left intact after that are intact alone, as salvage may find them.
    let (honest, intact_alone) = match lost_at {
        Some(at) => {
            let after = seg.blocks.iter().filter(|b| b.offset > at);
            let unchanged = after.filter(|b| {
                let range = usize::try_from(b.offset).unwrap_or(usize::MAX)
                    ..usize::try_from(b.offset + b.len).unwrap_or(usize::MAX);
                seg.bytes.get(range.clone()) == original.get(range)
            });
            let mut alone = intact_alone;
            alone.extend(unchanged.flat_map(|b| b.records.iter().cloned()));
            (prefix.clone(), alone)
        }
        None => (honest, intact_alone),
    };
    Forged {
        bytes: seg.bytes,
        first_seq,
        honest,
        intact_alone,
        readable_alone,
        prefix,
        prefix_digest,
        sealed,
        footer_lie,
        block_lie,
        bad_from,
        intact_after_bad,
        stray_header,
        lost_page: lost_at.is_some(),
    }
}

/// Zeros the page `lost` names, as a power loss leaves it; returns the offset of the
/// first block whose bytes that changed (none if the page held zeros only).
fn lose_page(seg: &mut SegmentForge, lost: &LostPageDesc) -> Option<u64> {
    const PAGE: u64 = 4096;
    let synced_end = seg.blocks[usize::from(lost.block) % seg.blocks.len()].offset;
    // Pages that end after the synced end and by the end of the file.
    let first = synced_end / PAGE;
    let last = seg.bytes.len() as u64 / PAGE;
    if last <= first {
        return None;
    }
    let page = first + u64::from(lost.page) % (last - first);
    let from = usize::try_from(synced_end.max(page * PAGE)).ok()?;
    let to = usize::try_from((page + 1) * PAGE).ok()?;
    let before = seg.bytes[from..to].to_vec();
    seg.bytes[from..to].fill(0);
    let changed = before.iter().position(|&b| b != 0)? + from;
    seg.blocks
        .iter()
        .find(|b| b.offset + b.len > changed as u64)
        .map(|b| b.offset)
}

/// The seq and time ranges to read, picked among the forged records' own values.
fn ranges(f: &Forged, read: &ReadDesc) -> ((u64, u64), (u64, u64)) {
    let n = f.honest.len() as u64 + 2;
    let lo = f.first_seq.saturating_add(u64::from(read.seq_lo) % n);
    let hi = lo.saturating_add(u64::from(read.seq_len) % n);
    let times: Vec<u64> = f.honest.iter().map(|r| r.ts).collect();
    let pick = |k: u8| {
        let k = usize::from(k) % (times.len() + 3);
        match k.checked_sub(times.len()) {
            None => times[k],
            Some(0) => 0,
            Some(1) => u64::MAX,
            _ => times.last().map_or(1, |t| t.saturating_add(1)),
        }
    };
    let (a, b) = (pick(read.ts_lo), pick(read.ts_hi));
    ((lo, hi), (a.min(b), a.max(b)))
}

/// Every path on the forged segment; panics when one breaks a property.
pub fn segment_open(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(desc) = Desc::arbitrary(&mut u) else {
        return;
    };
    let f = forge_segment(&desc);
    if std::env::var("FUZZLOG_DEBUG").is_ok() {
        eprintln!(
            "{desc:#?}\nsealed {} footer_lie {} block_lie {} bad_from {:?} len {} blocks {:?} lost_page {}",
            f.sealed,
            f.footer_lie,
            f.block_lie,
            f.bad_from,
            f.bytes.len(),
            f.honest.len(),
            f.lost_page
        );
    }
    let scratch = forge::Scratch::new("segment_open");
    let dir = scratch.path();
    let path = dir.join(forge::segment_name(f.first_seq));
    if let Err(e) = fs::write(&path, &f.bytes) {
        panic!("cannot write {}: {e}", path.display());
    }
    read_only_paths(&f, &desc, dir);
    open_and_append(&f, &desc, dir, &path);
}

fn read_only_paths(f: &Forged, desc: &Desc, dir: &Path) {
    let well = f.well_formed();
    // verify
    match verify(dir, None, None) {
        Ok(report) => {
            assert!(
                f.acceptable(),
                "verify accepted a segment that lies (footer lie {}, block lie {}, sealed {}, start {}, intact data after damage {})",
                f.footer_lie,
                f.block_lie,
                f.sealed,
                f.first_seq,
                f.intact_after_bad
            );
            assert_eq!(
                report.records,
                f.prefix.len() as u64,
                "verify counted other records than the forger wrote"
            );
            assert_eq!(report.last, f.prefix_digest, "verify's last chain point");
            let torn = report.torn_tail.as_ref().map(|t| (t.1, t.2));
            assert_eq!(torn, f.torn(), "verify's torn tail");
        }
        Err(e) => {
            assert!(!well, "verify refused a well-formed segment: {e}");
            assert_names_file("verify", &e, dir);
        }
    }
    let reader = match LogReader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            assert!(!well, "LogReader::open refused a well-formed log: {e}");
            assert_names_file("LogReader::open", &e, dir);
            return;
        }
    };
    // A segment whose blocks lie may be read where the lies do not show: what a read
    // returns must then be records written whole, in dense seqs.
    let lying_blocks: Vec<Rec> = f.honest.iter().chain(&f.readable_alone).cloned().collect();
    let check = |what: &str, got: &Result<Vec<Rec>, blackbox_log::Error>, expected: &[Rec]| {
        if f.block_lie {
            check_read_within(what, got, &lying_blocks, dir);
        } else {
            check_read(what, got, expected, well, dir);
        }
    };
    let ((lo, hi), (tlo, thi)) = ranges(f, &desc.read);
    let expected: Vec<Rec> = f
        .honest
        .iter()
        .filter(|r| (lo..=hi).contains(&r.seq))
        .cloned()
        .collect();
    check("read by seq", &reading::by_seq(&reader, lo, hi), &expected);
    let expected: Vec<Rec> = f
        .honest
        .iter()
        .filter(|r| (tlo..=thi).contains(&r.ts))
        .cloned()
        .collect();
    check(
        "read by time",
        &reading::by_time(&reader, tlo, thi),
        &expected,
    );
    let all: Vec<Rec> = f.honest.clone();
    check(
        "read of every seq",
        &reading::by_seq(&reader, 0, u64::MAX),
        &all,
    );
    match reader.digest() {
        Ok(d) => assert_eq!(d, f.prefix_digest, "digest"),
        Err(e) => {
            assert!(!well, "digest refused a well-formed log: {e}");
            assert_names_file("digest", &e, dir);
        }
    }
    match reader.structure() {
        Ok(s) => {
            if well {
                assert_eq!(s.len(), 1, "structure of one segment");
                assert_eq!(s[0].first_seq, 0, "structure's first seq");
                assert_eq!(s[0].sealed.is_some(), f.sealed, "structure: sealed");
                if let Some(sealed) = s[0].sealed {
                    assert_eq!(sealed.record_count, f.prefix.len() as u64);
                    assert_eq!(Some(sealed.last), f.prefix_digest);
                }
            }
        }
        Err(e) => {
            assert!(!well, "structure refused a well-formed log: {e}");
            assert_names_file("structure", &e, dir);
        }
    }
    salvage(f, &reader, dir);
}

fn salvage(f: &Forged, reader: &LogReader, dir: &Path) {
    let items = match reader.salvage(..) {
        Ok(s) => s,
        Err(e) => {
            assert!(!f.well_formed(), "salvage refused a well-formed log: {e}");
            assert_names_file("salvage", &e, dir);
            return;
        }
    };
    let mut got = Vec::new();
    for item in items {
        match item {
            Salvaged::Record(r) => got.push(reading::rec(&r)),
            Salvaged::Lost(loss) => {
                for place in &loss.places {
                    assert!(
                        place.segment.starts_with(dir),
                        "a loss names no file of the log: {loss}"
                    );
                }
            }
        }
    }
    for w in got.windows(2) {
        assert!(w[0].seq < w[1].seq, "salvage went back in seqs");
    }
    for w in got.windows(2) {
        assert!(w[0].ts <= w[1].ts, "salvage went back in time");
    }
    for r in &got {
        assert!(
            f.honest.contains(r) || f.intact_alone.contains(r),
            "salvage yielded a record the forger did not write whole: seq {}",
            r.seq
        );
    }
    if f.lost_page {
        // Salvage reads on around the lost page: the intact blocks after it too.
        assert!(got.starts_with(&f.prefix), "salvage around a lost page");
    } else if f.well_formed() {
        assert_eq!(got, f.prefix, "salvage of a well-formed log");
    }
}

fn open_and_append(f: &Forged, desc: &Desc, dir: &Path, path: &Path) {
    let opts = LogOptions::new().verify_on_open(desc.verify_on_open);
    let (mut log, recovery) = match Log::open(dir, opts) {
        Ok(x) => x,
        Err(e) => {
            assert!(!f.well_formed(), "Log::open refused a well-formed log: {e}");
            assert_names_file("Log::open", &e, dir);
            let after = fs::read(path).unwrap_or_default();
            assert!(after == f.bytes, "a refused open changed the segment");
            return;
        }
    };
    assert!(
        f.acceptable(),
        "Log::open accepted a segment that lies (footer lie {}, block lie {}, sealed {}, start {})",
        f.footer_lie,
        f.block_lie,
        f.sealed,
        f.first_seq
    );
    let cut = f.torn().map_or(0, |t| t.1);
    assert_eq!(recovery.torn_bytes_cut, cut, "recovery cut other bytes");
    assert_eq!(recovery.last_seq, f.prefix_digest.map(|d| Seq(d.seq)));
    if cut > 0 {
        assert_eq!(recovery.torn_segment.as_deref(), Some(path));
        assert_eq!(
            recovery.first_lost_seq,
            Some(Seq(f.prefix.len() as u64)),
            "the first seq lost"
        );
    }
    let ts = f.prefix.last().map_or(0, |r| r.ts);
    let appended = log.append(Record::new(RecordType(7), ts, b"after recovery"));
    let seq = match appended {
        Ok(seq) => seq,
        Err(e) => panic!("append after recovery failed: {e}"),
    };
    assert_eq!(seq, Seq(f.prefix.len() as u64), "the seq after recovery");
    if let Err(e) = log.close() {
        panic!("close after recovery failed: {e}");
    }
    let mut expected = f.prefix.clone();
    expected.push(Rec {
        seq: seq.0,
        ts,
        record_type: 7,
        payload: b"after recovery".to_vec(),
    });
    match verify(dir, None, None) {
        Ok(report) => {
            assert_eq!(
                report.records,
                expected.len() as u64,
                "verify after recovery"
            );
            assert_eq!(report.torn_tail, None, "a torn tail left after recovery");
        }
        Err(e) => panic!("verify after recovery failed: {e}"),
    }
    match LogReader::open(dir) {
        Ok(reader) => check_read(
            "read after recovery",
            &reading::by_seq(&reader, 0, u64::MAX),
            &expected,
            true,
            dir,
        ),
        Err(e) => panic!("LogReader::open after recovery failed: {e}"),
    }
}
