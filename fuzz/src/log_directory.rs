//! A directory of several forged segments through `verify` and range reads: chains
//! consistent or broken (a seq gap, an overlap, a segment from another chain, a missing
//! segment, an unsealed one before the last), perhaps pruned at its front with a prune
//! record that explains the start or does not.
//!
//! The forger knows which directories are consistent: `verify` must accept exactly
//! those, and a read must return exactly the forged records of its range, or fail.

use arbitrary::{Arbitrary, Unstructured};
use blackbox_log::{Digest, LogReader, verify};

use crate::forge::{self, Link, Rec, RecordSpec, SegmentForge};
use crate::reading::{self, assert_names_file, check_read, check_read_within};

#[derive(Debug, Arbitrary)]
struct SmallRec {
    record_type: u8,
    step: u16,
    len: u8,
}

#[derive(Debug, Arbitrary)]
enum Anomaly {
    Gap(u8),
    Overlap(u8),
    ForeignLink(u8),
    Missing,
    Unsealed,
}

#[derive(Debug, Arbitrary)]
struct SegDesc {
    blocks: Vec<Vec<SmallRec>>,
    compress: bool,
    sealed: bool,
    anomaly: Option<Anomaly>,
}

#[derive(Debug, Arbitrary, PartialEq, Eq)]
enum PruneLie {
    CutLink,
    LastSeq(u8),
    Version,
}

#[derive(Debug, Arbitrary)]
struct PruneDesc {
    drop: u8,
    keep_named: u8,
    holder: u8,
    lie: Option<PruneLie>,
}

#[derive(Debug, Arbitrary)]
struct DirDesc {
    segments: Vec<SegDesc>,
    prune: Option<PruneDesc>,
    ts_lo: u8,
    ts_hi: u8,
    seq_lo: u8,
    seq_len: u8,
}

const MAX_SEGMENTS: usize = 5;

/// One segment as laid out, and whether its file is in the directory.
struct Laid {
    forge: SegmentForge,
    sealed: bool,
    present: bool,
}

/// The prune record as written, for the forger's own check of what it explains.
struct Prune {
    segments: Vec<(u64, Link)>,
    last_seq: u64,
    cut_link: Link,
    decodable: bool,
}

impl Prune {
    fn explains(&self, first_seq: u64, prev_link: &Link) -> bool {
        (first_seq == self.last_seq.wrapping_add(1) && *prev_link == self.cut_link)
            || self.segments.contains(&(first_seq, *prev_link))
    }
}

fn block_specs(blocks: &[Vec<SmallRec>], ts: &mut u64) -> Vec<Vec<RecordSpec>> {
    let mut out = Vec::new();
    for b in blocks.iter().take(3) {
        let run: Vec<RecordSpec> = b
            .iter()
            .take(4)
            .map(|r| {
                *ts += u64::from(r.step % 1000);
                let payload = vec![r.record_type; usize::from(r.len % 64)];
                (u16::from(r.record_type), *ts, payload)
            })
            .collect();
        if !run.is_empty() {
            out.push(run);
        }
    }
    if out.is_empty() {
        // Every segment holds a record, so no two segments share a name.
        *ts += 1;
        out.push(vec![(1, *ts, b"filler".to_vec())]);
    }
    out
}

/// Lays out the directory's segments, the prune record among them.
fn lay_out(desc: &DirDesc) -> (Vec<Laid>, Option<Prune>) {
    let descs: Vec<&SegDesc> = desc.segments.iter().take(MAX_SEGMENTS).collect();
    let n = descs.len();
    let prune_plan = desc.prune.as_ref().filter(|_| n >= 2).map(|p| {
        let drop = 1 + usize::from(p.drop) % (n - 1);
        let holder = drop + usize::from(p.holder) % (n - drop);
        let keep = usize::from(p.keep_named) % (drop + 1);
        (p, drop, holder, keep)
    });
    let mut laid: Vec<Laid> = Vec::new();
    let mut prune = None;
    let (mut next_seq, mut link, mut ts) = (0u64, forge::GENESIS_LINK, 1_000u64);
    for (i, d) in descs.iter().enumerate() {
        let mut first_seq = next_seq;
        let mut prev_link = link;
        match d.anomaly {
            Some(Anomaly::Gap(k)) => first_seq += u64::from(k % 5) + 1,
            Some(Anomaly::Overlap(k)) => {
                if let Some(prev) = laid.last() {
                    let held = next_seq - prev.forge.first_seq;
                    if held >= 2 {
                        first_seq -= 1 + u64::from(k) % (held - 1);
                    }
                }
            }
            Some(Anomaly::ForeignLink(b)) => prev_link = [b | 1; 32],
            _ => {}
        }
        let mut seg = SegmentForge::new(first_seq, prev_link, ts);
        if let Some((p, drop, holder, _)) = prune_plan
            && holder == i
        {
            let removed = &laid[..drop];
            let segments: Vec<(u64, Link)> = removed
                .iter()
                .map(|l| (l.forge.first_seq, l.forge.prev_link))
                .collect();
            // The first segment kept: this one, or one laid out before it.
            let (cut_seq, mut cut_link) = laid.get(drop).map_or((first_seq, prev_link), |l| {
                (l.forge.first_seq, l.forge.prev_link)
            });
            let mut last_seq = cut_seq.wrapping_sub(1);
            let times: Vec<u64> = removed
                .iter()
                .flat_map(|l| l.forge.honest_records())
                .map(|r| r.ts)
                .collect();
            let times = (
                times.first().copied().unwrap_or(0),
                times.last().copied().unwrap_or(0),
            );
            match p.lie {
                Some(PruneLie::CutLink) => cut_link[5] ^= 2,
                Some(PruneLie::LastSeq(k)) => last_seq = last_seq.wrapping_add(u64::from(k) + 1),
                _ => {}
            }
            let mut payload = forge::prune_payload(1, &segments, last_seq, times, &cut_link);
            if p.lie == Some(PruneLie::Version) {
                payload[0] = 2;
            }
            // FORMAT.md, "The prune record": what `PruneRecord::decode` accepts.
            let first = segments.first().map_or(0, |s| s.0);
            let ascending = segments.windows(2).all(|w| w[0].0 < w[1].0)
                && segments.iter().all(|s| s.0 <= last_seq);
            let decodable = p.lie != Some(PruneLie::Version)
                && last_seq >= first
                && times.1 >= times.0
                && ascending;
            seg.push_block(
                &[(forge::PRUNE_RECORD_TYPE, seg.last_ts, payload)],
                false,
                None,
            );
            prune = Some((
                i,
                Prune {
                    segments,
                    last_seq,
                    cut_link,
                    decodable,
                },
            ));
        }
        for run in block_specs(&d.blocks, &mut ts) {
            seg.push_block(&run, d.compress, None);
        }
        let last = i + 1 == n;
        let sealed = if last {
            d.sealed
        } else {
            !matches!(d.anomaly, Some(Anomaly::Unsealed))
        };
        if sealed && let Some(spec) = seg.honest_footer(1, false) {
            seg.seal(&spec);
        }
        next_seq = seg.next_seq;
        link = seg.link;
        ts = seg.last_ts;
        let present = !matches!(d.anomaly, Some(Anomaly::Missing));
        laid.push(Laid {
            forge: seg,
            sealed,
            present,
        });
    }
    if let Some((_, drop, _, keep)) = prune_plan {
        for l in &mut laid[..drop - keep] {
            l.present = false;
        }
    }
    let prune = prune.and_then(|(holder, p)| laid[holder].present.then_some(p));
    (laid, prune)
}

/// Whether the segments present make a log `verify` must accept (FORMAT.md,
/// "Invariants" and "Proving a pruned log's start").
fn consistent(present: &[&Laid], prune: Option<&Prune>) -> bool {
    let Some(first) = present.first() else {
        return false;
    };
    if prune.is_some_and(|p| !p.decodable) {
        return false;
    }
    let start = (first.forge.first_seq == 0 && first.forge.prev_link == forge::GENESIS_LINK)
        || (first.forge.first_seq > 0
            && prune.is_some_and(|p| p.explains(first.forge.first_seq, &first.forge.prev_link)));
    start
        && present.windows(2).all(|w| {
            w[0].sealed
                && w[1].forge.first_seq == w[0].forge.next_seq
                && w[1].forge.prev_link == w[0].forge.link
        })
}

/// The target: lays out a directory, then checks `verify` and range reads against it.
pub fn log_directory(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(desc) = DirDesc::arbitrary(&mut u) else {
        return;
    };
    if desc.segments.is_empty() {
        return;
    }
    let (laid, prune) = lay_out(&desc);
    let scratch = forge::Scratch::new("log_directory");
    let dir = scratch.path();
    let present: Vec<&Laid> = laid.iter().filter(|l| l.present).collect();
    for l in &present {
        if let Err(e) = l.forge.write(dir) {
            panic!("cannot write a segment into {}: {e}", dir.display());
        }
    }
    let ok = consistent(&present, prune.as_ref());
    // Every record in the directory, in file order, with its segment's place.
    let records: Vec<(usize, Rec)> = present
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.forge.honest_records().into_iter().map(move |r| (i, r)))
        .collect();
    match verify(dir, None, None) {
        Ok(report) => {
            assert!(ok, "verify accepted an inconsistent directory");
            assert_eq!(report.records, records.len() as u64, "verify's count");
            assert_eq!(report.torn_tail, None);
            let last = present
                .last()
                .and_then(|l| l.forge.blocks.last())
                .map(|b| Digest {
                    seq: b.meta.first_seq + u64::from(b.meta.count) - 1,
                    link: b.link,
                });
            assert_eq!(report.last, last, "verify's last chain point");
            let start = present.first().map_or(0, |l| l.forge.first_seq);
            assert_eq!(
                report.pruned.map(|p| p.up_to_seq + 1),
                (start > 0).then_some(start),
                "verify's pruned start"
            );
        }
        Err(e) => {
            assert!(!ok, "verify refused a consistent directory: {e}");
            assert_names_file("verify", &e, dir);
        }
    }
    let reader = match LogReader::open(dir) {
        Ok(r) => r,
        Err(e) => {
            assert!(!ok, "LogReader::open refused a consistent directory: {e}");
            assert_names_file("LogReader::open", &e, dir);
            return;
        }
    };
    let times: Vec<u64> = records.iter().map(|r| r.1.ts).collect();
    let pick = |k: u8| {
        let k = usize::from(k) % (times.len() + 2);
        times
            .get(k)
            .copied()
            .unwrap_or(if k == times.len() { 0 } else { u64::MAX })
    };
    let (a, b) = (pick(desc.ts_lo), pick(desc.ts_hi));
    let (lo, hi) = (a.min(b), a.max(b));
    let got = reading::by_time(&reader, lo, hi);
    let expected: Vec<Rec> = records
        .iter()
        .filter(|r| (lo..=hi).contains(&r.1.ts))
        .map(|r| r.1.clone())
        .collect();
    let forged: Vec<Rec> = records.iter().map(|r| r.1.clone()).collect();
    if ok {
        check_read("read by time", &got, &expected, true, dir);
    } else {
        check_read_within("read by time", &got, &forged, dir);
    }
    if let Ok(v) = &got {
        // A read by time proves its start (the block before its first one chains to
        // it), and every block it returns chains from the one before.
        let place = |r: &Rec| records.iter().find(|x| x.1 == *r).map_or(0, |x| x.0);
        let broken = |i: usize| i > 0 && present[i].forge.prev_link != present[i - 1].forge.link;
        for (k, r) in v.iter().enumerate() {
            let i = place(r);
            let crosses = match k.checked_sub(1) {
                None => present[i].forge.honest_records().first() == Some(r),
                Some(p) => place(&v[p]) != i,
            };
            assert!(
                !(crosses && broken(i)),
                "a read by time returned seq {} of a segment that does not chain from the one before",
                r.seq
            );
        }
    }
    let first = present.first().map_or(0, |l| l.forge.first_seq);
    let lo = first.saturating_add(u64::from(desc.seq_lo) % (records.len() as u64 + 2));
    let hi = lo.saturating_add(u64::from(desc.seq_len) % (records.len() as u64 + 2));
    let expected: Vec<Rec> = records
        .iter()
        .filter(|r| (lo..=hi).contains(&r.1.seq))
        .map(|r| r.1.clone())
        .collect();
    let got = reading::by_seq(&reader, lo, hi);
    if ok {
        check_read("read by seq", &got, &expected, true, dir);
    } else {
        check_read_within("read by seq", &got, &forged, dir);
    }
}
