//! The log alone against [`LogModel`].

use std::path::Path;
use std::sync::Arc;

use arbitrary::Unstructured;
use blackbox_log::storage::FaultyStorage;
use blackbox_log::{
    Durability, Log, LogOptions, Pin, PruneRecord, Record, RecordType, Retention, Seq,
};

use super::checks::{read_range, verify_all};
use super::ops::LogOp;
use super::reference::{Entry, LogModel, payload};
use super::{OPS_MAX, crash, ok};

/// The options of one run, from the bytes: durability, tiny segments, blocks and index
/// intervals, and maybe a disk budget of a few segments with a cap on what pins keep.
/// Also the durability, and whether pins may be evicted.
fn options(u: &mut Unstructured<'_>) -> arbitrary::Result<(LogOptions, Durability, bool)> {
    let durability = match u.int_in_range(0u8..=2)? {
        0 => Durability::Buffered,
        1 => Durability::Flush,
        _ => Durability::Sync,
    };
    let mut opts = LogOptions::new()
        .durability(durability)
        .segment_bytes_max(u.int_in_range(4096u64..=9000)?)
        .block_bytes_max(u.int_in_range(64usize..=2048)?)
        .index_interval_bytes(u.int_in_range(1u64..=1024)?)
        .write_buffer_bytes(u.int_in_range(256usize..=4096)?)
        .disk_reserve_bytes(0);
    let mut capped = false;
    if u.arbitrary()? {
        let pinned_max_bytes = match u.int_in_range(0u8..=2)? {
            0 => 0,
            1 => u64::from(u.int_in_range(0u16..=20_000)?),
            _ => u64::MAX,
        };
        capped = pinned_max_bytes != u64::MAX;
        opts = opts.retention(Retention {
            max_bytes: Some(u.int_in_range(8_000u64..=40_000)?),
            max_age_ns: None,
            pinned_max_bytes,
        });
    }
    Ok((opts, durability, capped))
}

struct Run<'a> {
    dir: &'a Path,
    opts: LogOptions,
    storage: FaultyStorage,
    log: Option<Log>,
    model: LogModel,
    durability: Durability,
    /// Whether pins may be evicted (`pinned_max_bytes` below the largest).
    pins_capped: bool,
    /// The segments the writer found at its open.
    baseline: crash::Baseline,
}

pub fn run(root: &Path, u: &mut Unstructured<'_>) {
    let Ok((opts, durability, pins_capped)) = options(u) else {
        return;
    };
    let dir = root.join("log");
    let storage = FaultyStorage::new();
    let (log, recovery) = ok(
        Log::open(&dir, opts.clone().storage(Arc::new(storage.clone()))),
        "open a new log",
    );
    assert!(recovery.created && recovery.last_seq.is_none());
    let mut run = Run {
        dir: &dir,
        durability,
        opts,
        storage,
        log: Some(log),
        model: LogModel::default(),
        pins_capped,
        baseline: crash::baseline(&dir),
    };
    for step in 0..OPS_MAX {
        // Bytes run out: `Unstructured` would go on with zeros.
        if u.is_empty() {
            break;
        }
        let Ok(op) = LogOp::read(u) else {
            break;
        };
        run.step(step, &op);
    }
    run.finish();
}

impl Run<'_> {
    fn log(&mut self) -> &mut Log {
        self.log.as_mut().expect("the log is open between steps")
    }

    fn step(&mut self, step: usize, op: &LogOp) {
        let what = format!("step {step}: {op:?}");
        if super::trace() {
            eprintln!("{what}");
        }
        match op {
            LogOp::Append(batch) => self.append(batch, &what),
            LogOp::Flush => ok(self.log().flush(), &what),
            LogOp::Sync => {
                let durable = ok(self.log().sync(), &what);
                assert_eq!(
                    durable.map(|s| s.0),
                    self.model.last_seq(),
                    "{what}: sync makes every record durable"
                );
                self.model.ack(durable.map(|s| s.0));
            }
            LogOp::Crash { keep } => self.crash(*keep, &what),
            LogOp::Reopen => self.reopen(&what),
            LogOp::ReadSeq(lo, hi) => {
                let visible = self.visible(&what);
                read_range(self.dir, &self.model, visible, false, *lo, *hi);
            }
            LogOp::ReadTime(lo, hi) => {
                let visible = self.visible(&what);
                let max = self.model.last_ts().max(1);
                let scale = |x: u8| {
                    u64::try_from(u128::from(max) * u128::from(x) / 255).unwrap_or(u64::MAX)
                };
                read_range(self.dir, &self.model, visible, true, scale(*lo), scale(*hi));
            }
            LogOp::Pin { first, len } => {
                let Some(last) = self.model.last_seq() else {
                    return;
                };
                let first = first % (last + 1);
                let end = len.map(|l| first + u64::from(l));
                self.model.pin_ids += 1;
                let id = self.model.pin_ids;
                self.model.pins.push((id, first, end));
                self.set_pins();
            }
            LogOp::Unpin => {
                self.model.pins.clear();
                self.set_pins();
            }
            LogOp::Prune => {
                let next = self.model.next_seq();
                let seq = ok(self.log().prune(), &what);
                let pruned = self.log().take_pruned();
                match seq {
                    Some(s) => {
                        assert_eq!(s.0, next, "{what}: the prune record's seq");
                        assert_eq!(pruned.len(), 1, "{what}: one pruning");
                    }
                    None => assert!(pruned.is_empty(), "{what}: a pruning not returned"),
                }
                self.fold_pruned(&pruned, &what);
                // A pruning makes its record durable before a segment goes.
                if let Some(s) = seq {
                    self.model.ack(Some(s.0));
                }
            }
        }
        // A full read after what changes the log's shape, and every few steps: the
        // reads the operations ask for cover the rest.
        let full = step % 8 == 7
            || matches!(
                op,
                LogOp::Crash { .. } | LogOp::Reopen | LogOp::Prune | LogOp::Sync
            );
        self.after_step(&what, full);
    }

    fn set_pins(&mut self) {
        let pins: Vec<Pin> = self
            .model
            .pins
            .iter()
            .map(|&(id, first_seq, last_seq)| Pin {
                id,
                first_seq,
                last_seq,
            })
            .collect();
        self.log().set_pins(pins);
    }

    fn append(&mut self, batch: &[(u16, u64, usize)], what: &str) {
        let mut ts = self.model.last_ts();
        let mut recs = Vec::with_capacity(batch.len());
        for &(ty, step, len) in batch {
            ts += step;
            recs.push((ty, ts, payload(self.model.appended, len)));
            self.model.appended += 1;
        }
        let records: Vec<Record<'_>> = recs
            .iter()
            .map(|(ty, ts, p)| Record::new(RecordType(*ty), *ts, p))
            .collect();
        let next = self.model.next_seq();
        let last = if records.len() == 1 {
            Some(ok(self.log().append(records[0]), what))
        } else {
            ok(self.log().append_batch(&records), what)
        };
        let pruned = self.log().take_pruned();
        // The prunings its seals started took seqs among the batch's.
        let new_next = self.log().next_seq().0;
        assert_eq!(
            new_next - next,
            (records.len() + pruned.len()) as u64,
            "{what}: seqs taken by {} records and {} prunings",
            records.len(),
            pruned.len()
        );
        let mut recs = recs.into_iter();
        let mut last_rec = None;
        for s in next..new_next {
            let here: Vec<(Seq, PruneRecord)> =
                pruned.iter().filter(|(p, _)| p.0 == s).cloned().collect();
            if here.is_empty() {
                let (ty, ts, payload) = recs
                    .next()
                    .unwrap_or_else(|| panic!("{what}: seq {s} is neither a record nor a pruning"));
                self.model.entries.push(Entry::Rec { ty, ts, payload });
                last_rec = Some(s);
            } else {
                self.fold_pruned(&here, what);
            }
        }
        assert_eq!(last.map(|s| s.0), last_rec, "{what}: the batch's last seq");
        if self.durability == Durability::Sync {
            self.model.ack(last.map(|s| s.0));
        }
    }

    /// Takes prunings into the model: each at the next seq, removing the oldest seqs
    /// from the start up to a cut that no pin the model holds (and that was not
    /// evicted) reaches.
    fn fold_pruned(&mut self, pruned: &[(Seq, PruneRecord)], what: &str) {
        for (seq, p) in pruned {
            assert_eq!(seq.0, self.model.next_seq(), "{what}: a prune record's seq");
            assert_eq!(
                p.first_seq, self.model.start,
                "{what}: a pruning starts where the log starts"
            );
            assert!(
                p.first_seq <= p.last_seq && p.last_seq < seq.0,
                "{what}: pruned {}..={} at seq {}",
                p.first_seq,
                p.last_seq,
                seq.0
            );
            for id in &p.evicted_pins {
                assert!(
                    self.model.pins.iter().any(|(i, ..)| i == id),
                    "{what}: evicted pin {id}, which is not set"
                );
                assert!(self.pins_capped, "{what}: an uncapped pin {id} was evicted");
            }
            self.model
                .pins
                .retain(|(id, ..)| !p.evicted_pins.contains(id));
            for s in p.first_seq..=p.last_seq {
                assert!(
                    !self.model.pinned(s),
                    "{what}: pruned seq {s}, which a pin holds"
                );
            }
            self.model.entries.push(Entry::Prune {
                first_seq: p.first_seq,
                last_seq: p.last_seq,
            });
            self.model.start = p.last_seq + 1;
        }
    }

    /// Seqs a reader can see: those handed to the OS, all of them but in `Buffered`.
    fn visible(&mut self, what: &str) -> u64 {
        let written = self.log().written_seq().map_or(0, |s| s.0 + 1);
        let next = self.model.next_seq();
        assert!(written <= next, "{what}: written {written} of {next}");
        if self.durability != Durability::Buffered {
            assert_eq!(written, next, "{what}: every record reached the OS");
        }
        written
    }

    fn after_step(&mut self, what: &str, full_read: bool) {
        let pruned = self.log().take_pruned();
        assert!(
            pruned.is_empty(),
            "{what}: a pruning outside an append or a prune: {pruned:?}"
        );
        let durable = self.log().durable_seq().map(|s| s.0);
        assert!(
            durable <= self.model.last_seq(),
            "{what}: durable {durable:?} past the last seq"
        );
        // What the log says is durable, a crash must keep.
        self.model.ack(durable);
        let next = self.log().next_seq().0;
        assert_eq!(next, self.model.next_seq(), "{what}: the next seq");
        let visible = self.visible(what);
        if full_read {
            read_range(self.dir, &self.model, visible, false, 0, u64::MAX);
        }
    }

    fn crash(&mut self, keep: u64, what: &str) {
        let image = crash::take(self.dir, &self.storage, &self.baseline, keep);
        drop(self.log.take());
        crash::put(self.dir, image);
        self.storage = FaultyStorage::new();
        let opts = self.opts.clone().storage(Arc::new(self.storage.clone()));
        let (log, recovery) = ok(Log::open(self.dir, opts), format_args!("{what}: reopen"));
        self.baseline = crash::baseline(self.dir);
        let last = recovery.last_seq.map(|s| s.0);
        assert!(
            last >= self.model.acked,
            "{what}: the crash lost acknowledged records: the log ends at {last:?}, {:?} was durable",
            self.model.acked
        );
        assert!(
            last <= self.model.last_seq(),
            "{what}: the log ends at {last:?} after a crash, past the model's {:?}",
            self.model.last_seq()
        );
        if recovery.torn_bytes_cut > 0 {
            let lost = recovery.first_lost_seq.map(|s| s.0);
            assert_eq!(
                lost,
                Some(last.map_or(0, |l| l + 1)),
                "{what}: the cut's first lost seq"
            );
            assert!(
                lost > self.model.acked,
                "{what}: the cut names acknowledged seq {lost:?}"
            );
            assert!(
                recovery.torn_detail.is_some(),
                "{what}: a cut without a reason"
            );
        }
        let keep_to = last.map_or(0, |l| l + 1);
        self.model.entries.truncate(super::checks::index(keep_to));
        self.log = Some(log);
        self.set_pins();
        verify_all(self.dir, &self.model, self.model.next_seq());
    }

    fn reopen(&mut self, what: &str) {
        let log = self.log.take().expect("the log is open between steps");
        let last = ok(log.close(), format_args!("{what}: close"));
        assert_eq!(last.map(|s| s.0), self.model.last_seq(), "{what}: close");
        self.model.ack(last.map(|s| s.0));
        let opts = self.opts.clone().storage(Arc::new(self.storage.clone()));
        let (log, recovery) = ok(Log::open(self.dir, opts), format_args!("{what}: reopen"));
        self.baseline = crash::baseline(self.dir);
        assert_eq!(
            recovery.torn_bytes_cut, 0,
            "{what}: a clean reopen cut bytes"
        );
        assert_eq!(
            recovery.last_seq.map(|s| s.0),
            self.model.last_seq(),
            "{what}: the reopened log's last seq"
        );
        self.log = Some(log);
        self.set_pins();
        verify_all(self.dir, &self.model, self.model.next_seq());
    }

    fn finish(mut self) {
        let log = self.log.take().expect("the log is open between steps");
        let last = ok(log.close(), "close at the end");
        assert_eq!(last.map(|s| s.0), self.model.last_seq(), "close at the end");
        read_range(
            self.dir,
            &self.model,
            self.model.next_seq(),
            false,
            0,
            u64::MAX,
        );
        verify_all(self.dir, &self.model, self.model.next_seq());
    }
}
