//! What the crates show against what the models hold.

use std::collections::BTreeMap;
use std::path::Path;

use blackbox::Fact;

use blackbox_log::retention::PRUNE_RECORD_TYPE;
use blackbox_log::{LogReader, PruneRecord, Seq};

use super::reference::{Entry, LogModel};
use super::{adjudication, ok};

/// A record as a reader returns it, in the model's terms.
fn entry_of(r: &blackbox_log::LogRecord) -> Entry {
    if r.record_type() == PRUNE_RECORD_TYPE {
        let p = ok(
            PruneRecord::decode(r.payload()),
            format_args!("seq {}: the prune record does not decode", r.seq()),
        );
        Entry::Prune {
            first_seq: p.first_seq,
            last_seq: p.last_seq,
        }
    } else {
        Entry::Rec {
            ty: r.record_type().0,
            ts: r.ts_ns(),
            payload: r.payload().to_vec(),
        }
    }
}

/// Reads `lo..=hi` (by seq, or by time) and compares with the model's records in the
/// range among the first `visible` seqs and from its start: exactly those, in order,
/// seqs dense.
pub fn read_range(dir: &Path, model: &LogModel, visible: u64, by_time: bool, lo: u64, hi: u64) {
    let reader = ok(LogReader::open(dir), "open a reader");
    let records = if by_time {
        reader.records_by_time(lo..=hi)
    } else {
        reader.records(Seq(lo)..=Seq(hi))
    };
    let records = ok(
        records,
        format_args!("read {lo}..={hi} (by time: {by_time})"),
    );
    let got: Vec<(u64, Entry)> = records
        .map(|r| {
            let r = ok(
                r,
                format_args!("a record of {lo}..={hi} (by time: {by_time})"),
            );
            (r.seq().0, entry_of(&r))
        })
        // A prune record is stamped with the time of a record next to it (before or
        // after): reads by time are compared on the host's records.
        .filter(|(_, e)| !by_time || matches!(e, Entry::Rec { .. }))
        .collect();
    let want: Vec<(u64, Entry)> = (model.start..visible)
        .map(|seq| (seq, model.entries[index(seq)].clone()))
        .filter(|(seq, e)| {
            let key = match e {
                Entry::Rec { ts, .. } if by_time => *ts,
                Entry::Prune { .. } if by_time => return false,
                _ => *seq,
            };
            lo <= key && key <= hi
        })
        .collect();
    if got != want {
        let seqs = |v: &[(u64, Entry)]| v.iter().map(|(s, _)| *s).collect::<Vec<_>>();
        panic!(
            "read {lo}..={hi} (by time: {by_time}, start {}, visible {visible}): got seqs {:?}, the model has {:?}{}",
            model.start,
            seqs(&got),
            seqs(&want),
            if seqs(&got) == seqs(&want) {
                " (the same seqs, other content)"
            } else {
                ""
            }
        );
    }
}

/// A seq as an index of the model's `Vec`.
pub fn index(seq: u64) -> usize {
    usize::try_from(seq).unwrap_or(usize::MAX)
}

/// `verify` proves the whole retained log: its records are the model's from its start,
/// its start is the newest prune record's cut, and the reader's digest is verify's.
pub fn verify_all(dir: &Path, model: &LogModel, visible: u64) {
    let report = ok(blackbox_log::verify(dir, None, None), "verify the log");
    assert_eq!(
        report.records,
        visible - model.start,
        "verify counts the records from {} to {visible}",
        model.start
    );
    assert_eq!(
        report.last.map(|d| d.seq),
        visible.checked_sub(1),
        "verify's last seq"
    );
    match (&report.pruned, model.start) {
        (None, 0) => {}
        (Some(p), start) => assert_eq!(p.up_to_seq + 1, start, "verify's pruned start"),
        (None, start) => panic!("the log starts at {start}, and verify names no pruning"),
    }
    if let Some(last) = report.last {
        let again = ok(
            blackbox_log::verify(dir, None, Some(&last)),
            "verify the log against its own digest",
        );
        assert!(
            again.digest_matched,
            "the log's digest does not match itself"
        );
    }
}

/// Asserts that `got` is `want` up to rounding in the confidences.
pub fn same_fact(got: Option<&Fact>, want: Option<&Fact>, what: &str) {
    assert_eq!(got.cloned(), adjudication::like_opt(got, want), "{what}");
}

/// Asserts that two sets of facts (by key) are the same up to rounding.
pub fn assert_facts(got: &BTreeMap<String, Fact>, want: &BTreeMap<String, Fact>, what: &str) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: the keys"
    );
    for (key, w) in want {
        same_fact(got.get(key), Some(w), &format!("{what}: {key}"));
    }
}
