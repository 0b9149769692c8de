//! The writer thread: it alone owns the log. It takes what producers send in batches,
//! applies the tiers, incidents and accounting, names what it writes, and group-commits.

mod accounting;
mod batch;
mod dictionary;
mod incidents;
pub(crate) mod kb;
mod pins;
pub use pins::RELEASE_DIR;
mod tiers;
mod watermark;

pub use tiers::SUMMARY_GRACE_NS;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use blackbox_kb::{Appended, SinkError};
use blackbox_log::{Durability, Log, RecordType, Recovery, Seq};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use crate::clock::Clock;
use crate::codec::{self, AccountingRecord, Counters, RecoveryRecord, WrittenTier};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::restore::Restored;
use crate::shared::{Msg, Reply, Shared};
use accounting::nonzero;
use incidents::{RingEntry, Span};
use tiers::{Sampler, Window};

/// How often a busy writer looks for messages.
const POLL_INTERVAL: Duration = Duration::from_micros(200);
/// How long without a message before the writer blocks instead of polling.
const IDLE_AFTER: Duration = Duration::from_millis(20);
/// How long the writer blocks before it runs its timers anyway.
const TICK: Duration = Duration::from_millis(50);
/// Records written since the last accounting record after which one is due, whatever
/// the accounting interval: a read bounded by `until` goes on to the first watermark
/// past `until`, so this bounds how far past it a read goes when the recorder writes
/// faster than one accounting interval's worth (about 0.1 % of the records, each
/// delta naming the kinds that changed).
pub(crate) const ACCOUNTING_RECORDS_MAX: u64 = 8192;
/// Working-memory delta records written since the last checkpoint after which the
/// writer writes a checkpoint itself: every segment's preamble carries the last
/// checkpoint and the deltas since, so this bounds how many deltas it repeats. Not
/// before the deltas' payloads weigh as much as that checkpoint, though: a large memory
/// changed a little at a time is then written whole at most once per its own weight
/// of changes, and the preamble holds at most about twice the memory.
pub(crate) const CARRIED_DELTAS_MAX: usize = 256;
/// Bytes of working-memory delta payloads written since the last checkpoint after
/// which the writer writes a checkpoint itself (see [`CARRIED_DELTAS_MAX`]).
pub(crate) const CARRIED_DELTA_BYTES_MAX: usize = 64 << 10;
/// Clock time between accounting snapshots written among the records (besides the one
/// each segment opens with): a fold of the totals up to any time then starts at most
/// this much (plus one accounting interval) before it, however long the segment.
pub(crate) const ACCOUNTING_SNAPSHOT_EVERY_NS: u64 = 60_000_000_000;
/// Records written since the last snapshot among the records, per kind a snapshot
/// lists, before another is written: a log of many kinds and few events writes them
/// less often than every minute, so snapshots stay a small part of the log.
pub(crate) const ACCOUNTING_SNAPSHOT_RECORDS_PER_KIND: u64 = 16;

/// The writer thread's state. It alone touches the log.
pub(crate) struct Writer {
    log: Log,
    shared: Arc<Shared>,
    durability: Durability,
    batch_records_max: usize,
    accounting_interval_ns: u64,
    checkpoint_interval_ns: Option<u64>,
    incident: Option<crate::policy::IncidentPolicy>,
    /// Running totals restored from the log, indexed by kind id.
    base: Vec<Counters>,
    /// The outcomes the writer counted this session, indexed by kind id (ids are small
    /// and dense): kept, sampled_out, summarized, dropped (drop-tier events that reached
    /// it), preroll and lost. `seen` stays 0 here: producers count it.
    counts: Vec<Counters>,
    /// Each kind's totals as the last accounting record left them, indexed by kind id.
    accounted: Vec<Counters>,
    /// Indexed by kind id.
    samplers: Vec<Sampler>,
    /// Open summary windows by (kind, window start).
    windows: BTreeMap<(u32, u64), Window>,
    ring: VecDeque<RingEntry>,
    ring_bytes: usize,
    /// The ring's oldest stamp, kept as a sliding-window minimum: (stamp, id) of the
    /// entries no later entry is older than, oldest first. Its front is the ring's
    /// oldest stamp, in O(1) amortized: the watermark needs it at every batch's end.
    ring_min: VecDeque<(u64, u64)>,
    ring_next_id: u64,
    /// Post-roll windows `[trigger, end)` of the triggers taken, sorted and merged.
    spans: VecDeque<Span>,
    /// Incident windows pinned against the disk budget.
    pins: pins::Pins,
    /// Whether the log has a disk budget (pins matter only then).
    retention_bounded: bool,
    last_stamp_ns: u64,
    /// Every interned id up to this one is in the log's dictionary.
    named_upto: u32,
    /// Dictionary records were queued since the segment preamble was last set.
    preamble_stale: bool,
    /// The encoded dictionary of the segment preamble.
    preamble_dictionary: Vec<u8>,
    /// The encoded accounting snapshot of the segment preamble: the totals of the last
    /// accounting record.
    preamble_accounting: Option<Vec<u8>>,
    /// The policy in force, as TOML ([`Policy::to_toml`]): written when the session
    /// opens and in every segment's preamble.
    policy_toml: Vec<u8>,
    /// The working memory the segment preamble carries after the policy, so that it
    /// survives the pruning of every segment that held a change: the payload of the
    /// last checkpoint appended (or the memory this session restored, before it writes
    /// one; `None` while the log holds no memory at all), then `carried_deltas`.
    carried_checkpoint: Option<Vec<u8>>,
    /// The payloads of the working-memory delta records appended since that checkpoint.
    carried_deltas: Vec<Vec<u8>>,
    /// Records of the preamble before the carried memory (dictionary, snapshot, policy).
    preamble_base_len: usize,
    /// Delta records queued since the last checkpoint queued, and their payload bytes:
    /// past [`CARRIED_DELTAS_MAX`] or [`CARRIED_DELTA_BYTES_MAX`], and once the bytes
    /// reach `queued_checkpoint_bytes`, a checkpoint is queued.
    queued_deltas: usize,
    queued_delta_bytes: usize,
    /// Bytes of the last checkpoint queued (or of the memory restored, before one).
    queued_checkpoint_bytes: usize,
    next_accounting_ns: u64,
    next_checkpoint_ns: Option<u64>,
    /// Encoded records of the current batch: (type, ts, range in `arena`, tag for the
    /// log's tag index: an event's kind id, the record type's own tag for other
    /// records).
    out: Vec<(RecordType, u64, std::ops::Range<usize>, u32)>,
    arena: rkyv::util::AlignedVec,
    /// The kinds of the kept events among `out`: lost if their append fails.
    out_kept: Vec<u32>,
    /// Whether records were appended since the durability mode was last applied.
    dirty: bool,
    /// Events received from producers this session (`record` and `record_evidence`), by
    /// the parity of the generation they were counted in (`Shared::stamped`).
    received: [u64; 2],
    /// The generation producers count into (`Shared::generation`, which only the
    /// writer moves on).
    generation: u64,
    /// The generation the writer closed and the clock reading it closed it with, while
    /// events counted in it are still on their way.
    closing: Option<(u64, u64)>,
    /// Whether what a failure cost was moved to `lost`.
    failure_accounted: bool,
    /// The working memory as the log holds it so far: the last checkpoint with every
    /// delta since folded in, each value as compact JSON text. Checkpoints write it, so
    /// a checkpoint is exactly the fold of the records before it.
    logged: BTreeMap<String, String>,
    /// Write a checkpoint of the empty memory when the session opens: the log holds a
    /// memory this session did not restore.
    reset_working: bool,
    /// The watermark: every event stamped before it is in the log before the next
    /// record written (0: none established yet). Written in every accounting record.
    watermark_ns: u64,
    /// The watermark the last accounting record carried: one is due when it moved.
    accounted_watermark_ns: u64,
    /// The log's next seq after the last accounting record: a watermark that moved while
    /// nothing else was written needs no record (a reader reaches the log's end there).
    accounted_next_seq: u64,
    /// The knowledge base's last snapshot and the commits since, carried in every
    /// segment's preamble.
    kb_carry: kb::KbCarry,
    /// When the next accounting snapshot is due among the records (clock ns).
    next_accounting_snapshot_ns: u64,
    /// The log's next seq after the last snapshot among the records.
    accounting_snapshot_next_seq: u64,
}

/// What one batch left waiting for its end.
#[derive(Default)]
struct Waiting {
    syncs: Vec<Reply<Option<Seq>>>,
    close: Option<Reply<Option<Seq>>>,
    /// Events recorded as evidence, with their seqs: answered once the batch is as
    /// durable as the durability mode makes it (written, or synced).
    evidence: Vec<(Reply<Seq>, Seq)>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    pub(crate) fn new(
        log: Log,
        shared: Arc<Shared>,
        config: &Config,
        restored: Restored,
        policy_toml: Vec<u8>,
    ) -> Writer {
        let reset_working = !config.restore_working_memory && restored.any_record;
        let now = shared.clock.now_ns();
        let mut restored = restored;
        restored.kb_carry.fit(log.record_bytes_max());
        if restored.kb_carry.snapshot_due() {
            shared.kb_snapshot_due.store(true, Ordering::Release);
        }
        Writer {
            incident: shared.policy.incident().cloned(),
            log,
            durability: config.durability,
            batch_records_max: config.batch_records_max,
            accounting_interval_ns: config.accounting_interval_ns,
            checkpoint_interval_ns: config.checkpoint_interval_ns,
            accounted: restored.totals.clone(),
            base: restored.totals,
            counts: Vec::new(),
            samplers: Vec::new(),
            windows: BTreeMap::new(),
            ring: VecDeque::new(),
            ring_bytes: 0,
            ring_min: VecDeque::new(),
            ring_next_id: 0,
            spans: VecDeque::new(),
            pins: pins::Pins::default(),
            retention_bounded: config
                .retention
                .or(config.policy.retention())
                .is_some_and(|r| r.is_bounded()),
            last_stamp_ns: restored.last_ts_ns,
            named_upto: 0,
            preamble_stale: false,
            preamble_dictionary: Vec::new(),
            preamble_accounting: None,
            policy_toml,
            carried_checkpoint: None,
            carried_deltas: Vec::new(),
            preamble_base_len: 0,
            queued_deltas: 0,
            queued_delta_bytes: 0,
            queued_checkpoint_bytes: 0,
            next_accounting_ns: now.saturating_add(config.accounting_interval_ns),
            next_checkpoint_ns: config.checkpoint_interval_ns.map(|i| now.saturating_add(i)),
            out: Vec::new(),
            arena: rkyv::util::AlignedVec::new(),
            out_kept: Vec::new(),
            dirty: false,
            received: [0, 0],
            generation: 0,
            closing: None,
            failure_accounted: false,
            logged: restored
                .working
                .into_iter()
                // Writing JSON of a `Value` into a string cannot fail.
                .map(|(k, v)| (k, serde_json::to_string(&v).unwrap_or_default()))
                .collect(),
            reset_working,
            // Still true: this session stamps nothing below it (`Floored`).
            watermark_ns: restored.watermark_ns,
            accounted_watermark_ns: restored.watermark_ns,
            accounted_next_seq: 0,
            kb_carry: restored.kb_carry,
            next_accounting_snapshot_ns: now.saturating_add(ACCOUNTING_SNAPSHOT_EVERY_NS),
            accounting_snapshot_next_seq: 0,
            shared,
        }
    }

    /// Writes the full dictionary, so this session's records are self-describing even
    /// in a segment that opened before the dictionary was set as its preamble, and sets
    /// the preamble: every segment this session starts opens with the dictionary and
    /// the restored totals. When the active segment holds no record yet (recovery
    /// created it after a crash during a roll), the totals follow the dictionary as a
    /// snapshot too: the segment then opens with the whole preamble, as every other.
    /// A recovery record (a torn tail was cut) is the session's first record, but in
    /// such an empty segment, where it follows the preamble (and the policy).
    pub(crate) fn open_session(&mut self, recovery: &Recovery) -> Result<()> {
        let segment_empty = self.log.active_segment_first_seq() == self.log.next_seq();
        // One reading serves the session's first records.
        let now = self.shared.clock.now_ns();
        let all = self.shared.names.all();
        // IMPORTANT: an empty segment opens with its preamble (readers and `restore`
        // look for the dictionary at a segment's first record), so nothing goes before
        // it there.
        let preamble_first = segment_empty;
        if !preamble_first {
            self.emit_recovery(recovery);
        }
        if !all.is_empty() {
            self.emit_dictionary(all, now);
            if self.base.iter().any(|c| *c != Counters::default()) {
                let snapshot = AccountingRecord {
                    snapshot: true,
                    watermark_ns: self.watermark_ns,
                    kinds: nonzero(&self.base),
                };
                self.preamble_accounting = Some(codec::encode_to_vec(&snapshot));
                if segment_empty {
                    self.emit_encoded(codec::ACCOUNTING, now, &snapshot);
                }
            }
        }
        // The policy in force from here on; every segment this session starts opens
        // with it too.
        let now = self.shared.clock.now_ns();
        let policy = std::mem::take(&mut self.policy_toml);
        self.emit_raw(codec::POLICY, now, &policy);
        self.policy_toml = policy;
        if segment_empty {
            // The rest of the preamble: what the knowledge base carries.
            for (t, payload) in self.kb_carry.records() {
                self.emit_raw(t, now, &payload);
            }
        }
        self.preamble_stale = true;
        // The memory restored is carried in the preamble from here on; a segment that
        // opens with the preamble written here holds it too. (The memory refuses a
        // `set` that would not fit a record: checked all the same.)
        if !self.logged.is_empty()
            && let Ok(snapshot) = self.snapshot()
        {
            if segment_empty {
                self.emit_raw(codec::CHECKPOINT, now, &snapshot);
            } else {
                self.queued_checkpoint_bytes = snapshot.len();
                self.carried_checkpoint = Some(snapshot);
            }
        }
        if preamble_first {
            self.emit_recovery(recovery);
        }
        if self.reset_working {
            // The memory starts empty although the log holds one: say so, or readers
            // would fold this session's changes into the last session's memory. Stamped
            // with the time of the open (`emit_raw` keeps it no earlier than the log's
            // last stamp): at the last session's last stamp its memory still held.
            self.emit_raw(codec::CHECKPOINT, now, b"{}");
        }
        self.flush_out()?;
        self.end_batch()?;
        Ok(())
    }

    /// Queues the recovery record of a torn tail cut at open, if one was cut.
    fn emit_recovery(&mut self, recovery: &Recovery) {
        if recovery.torn_bytes_cut == 0 {
            return;
        }
        // Stamped with the log's last stamp: the cut happened after it.
        let at = self.last_stamp_ns;
        let record = RecoveryRecord {
            first_lost_seq: recovery.first_lost_seq.map_or(0, |s| s.0),
            torn_bytes: recovery.torn_bytes_cut,
            segment: recovery
                .torn_segment
                .as_ref()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            detail: recovery.torn_detail.clone().unwrap_or_default(),
        };
        self.emit_encoded(codec::RECOVERY, at, &record);
    }

    pub(crate) fn run(mut self, rx: Receiver<Msg>) {
        let mut batch = Vec::with_capacity(self.batch_records_max);
        let mut last_busy = Instant::now();
        loop {
            // While events flow, the writer polls: producers then never pay for waking
            // it (a futex call and a context switch per send, the tail of record()'s
            // latency). After IDLE_AFTER without a message it blocks, so an idle
            // recorder costs no wake-ups; the first producer to send wakes it.
            match rx.try_recv() {
                Ok(m) => {
                    batch.push(m);
                    last_busy = Instant::now();
                }
                Err(TryRecvError::Disconnected) => {
                    let _ = self.close();
                    return;
                }
                Err(TryRecvError::Empty) if last_busy.elapsed() < IDLE_AFTER => {
                    // Woken early by a caller waiting for a reply (sync, checkpoint,
                    // a knowledge-base commit), so those do not wait out the poll.
                    std::thread::park_timeout(POLL_INTERVAL);
                }
                Err(TryRecvError::Empty) => match rx.recv_timeout(TICK) {
                    Ok(m) => {
                        batch.push(m);
                        last_busy = Instant::now();
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        let _ = self.close();
                        return;
                    }
                },
            }
            while batch.len() < self.batch_records_max {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let stop = if self.shared.failed.load(Ordering::Acquire) {
                // Answer every request with the failure until the recorder closes.
                self.fail_all(batch.drain(..))
            } else {
                self.process(&mut batch, &rx)
            };
            if stop {
                return;
            }
        }
    }

    /// Processes one batch of messages. Returns whether the writer stops (closed).
    ///
    /// Whatever fails, the recorder is marked failed with the cause before any caller
    /// is answered or any message dropped, and every message of the batch is answered
    /// (events that could not be written are counted `lost`).
    fn process(&mut self, batch: &mut Vec<Msg>, rx: &Receiver<Msg>) -> bool {
        let mut waiting = Waiting::default();
        let mut rest = Vec::new();
        let mut result = Ok(());
        let mut msgs = batch.drain(..);
        for msg in msgs.by_ref() {
            if let Err(e) = self.handle(msg, &mut waiting) {
                result = Err(e);
                break;
            }
        }
        rest.extend(msgs);
        if result.is_ok() && waiting.close.is_some() {
            result = self.drain_before_close(rx, &mut waiting);
        }
        if result.is_ok() {
            // One clock reading a batch serves the watermark and the timers.
            let now = self.shared.clock.now_ns();
            self.advance_watermark(true, now);
            result = self.timers(now);
        }
        if result.is_ok() {
            result = self.flush_out().map(|_| ());
        }
        if let Err(e) = result {
            self.fail(&e);
            let failure = self.shared.failure();
            for s in waiting.syncs {
                let _ = s.send(Err(failure.clone()));
            }
            for (r, _) in waiting.evidence {
                let _ = r.send(Err(failure.clone()));
            }
            let mut closing = false;
            if let Some(reply) = waiting.close {
                let _ = reply.send(Err(failure));
                closing = true;
            }
            return self.fail_all(rest.into_iter()) || closing;
        }
        if let Some(reply) = waiting.close {
            let r = self.close();
            if let Err(e) = &r {
                self.fail(e);
            }
            for s in waiting.syncs {
                let _ = s.send(r.clone());
            }
            answer_evidence(waiting.evidence, r.as_ref().map(|_| ()));
            let _ = reply.send(r);
            return true;
        }
        if waiting.syncs.is_empty() {
            let r = self.end_batch();
            if let Err(e) = &r {
                self.fail(e);
            }
            answer_evidence(waiting.evidence, r.as_ref().map(|_| ()));
        } else {
            // The barrier applies every durability mode: nothing is left dirty.
            self.dirty = false;
            let r = self.log.sync().map_err(Error::from);
            if let Err(e) = &r {
                // Failed before anyone hears of it, so no record() that follows the
                // reply is accepted and then lost.
                self.fail(e);
            }
            answer_evidence(waiting.evidence, r.as_ref().map(|_| ()));
            for s in waiting.syncs {
                let _ = s.send(r.clone());
            }
        }
        false
    }

    /// Handles one message. A request that fails is answered with the cause, after the
    /// recorder is marked failed.
    fn handle(&mut self, msg: Msg, waiting: &mut Waiting) -> Result<()> {
        match msg {
            Msg::Event(e) => {
                self.received[e.generation] += 1;
                self.name(&e);
                self.on_event(e)?;
            }
            Msg::Checkpoint { ts_ns, reply } => match self.checkpoint(ts_ns) {
                Ok(seq) => {
                    let _ = reply.send(Ok(seq));
                }
                // Refused before anything was written: the recorder goes on.
                Err(e @ Error::CheckpointTooLarge { .. }) => {
                    let _ = reply.send(Err(e));
                }
                Err(e) => {
                    self.fail(&e);
                    let _ = reply.send(Err(e.clone()));
                    return Err(e);
                }
            },
            Msg::Sync(reply) => waiting.syncs.push(reply),
            Msg::Release(trigger_seq, reply) => {
                let _ = reply.send(Ok(self.release_pin(trigger_seq)));
            }
            Msg::Working { last, reply } => {
                let changes = self.shared.working.take_through(last);
                self.emit_changes(changes);
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
            Msg::Evidence(e, reply) => {
                self.received[e.generation] += 1;
                self.name(&e);
                self.evict_ring(e.ts_ns);
                // Evidence of a failure is a failure all the same: it triggers.
                let written = if e.kind.class.trigger && self.incident.is_some() {
                    self.on_trigger(e).map(|seq| Some(Seq(seq)))
                } else {
                    self.counts(e.kind.id).kept += 1;
                    self.emit_event(e, WrittenTier::Full, 1.0);
                    self.flush_out()
                };
                match written {
                    // Answered at the batch's end, once the durability mode is applied:
                    // a host cites the seq at once, and a crash must not lose it then.
                    Ok(seq) => waiting.evidence.push((reply, seq.unwrap_or(Seq(0)))),
                    Err(e) => {
                        self.fail(&e);
                        let _ = reply.send(Err(e.clone()));
                        return Err(e);
                    }
                }
            }
            Msg::Kb {
                ts_ns,
                payload,
                evidence,
                snapshot,
                reply,
            } => match self.kb_commit(ts_ns, &payload, &evidence, snapshot) {
                Ok(r) => {
                    let _ = reply.send(r);
                }
                Err(e) => {
                    self.fail(&e);
                    let _ = reply.send(Err(SinkError::Failed(Box::new(e.clone()))));
                    return Err(e);
                }
            },
            Msg::Stats(reply) => {
                let _ = reply.send(Ok(self.stats()));
            }
            // Answered once every event accepted before it is written.
            Msg::Close(reply) => waiting.close = Some(reply),
        }
        Ok(())
    }

    /// Before the last accounting record: takes every event a producer counted as sent
    /// (`close` stops producers first, and each one that got past that check is counted
    /// before it sends), so the last record accounts every event `record` accepted.
    fn drain_before_close(&mut self, rx: &Receiver<Msg>, waiting: &mut Waiting) -> Result<()> {
        loop {
            if self.received.iter().sum::<u64>() >= self.shared.kinds.sent_total() {
                return Ok(());
            }
            match rx.try_recv() {
                Ok(msg) => self.handle(msg, waiting)?,
                // A producer between its count and its send.
                Err(TryRecvError::Empty) => std::thread::yield_now(),
                Err(TryRecvError::Disconnected) => return Ok(()),
            }
        }
    }

    /// Answers every message with the writer's failure (stats with the counters) and
    /// counts its events `lost`. Returns whether a close was among them.
    fn fail_all(&mut self, msgs: impl Iterator<Item = Msg>) -> bool {
        let mut closing = false;
        for msg in msgs {
            match msg {
                Msg::Event(e) => {
                    self.received[e.generation] += 1;
                    self.counts(e.kind.id).lost += 1;
                }
                Msg::Evidence(e, r) => {
                    self.received[e.generation] += 1;
                    self.counts(e.kind.id).lost += 1;
                    let _ = r.send(Err(self.shared.failure()));
                }
                Msg::Checkpoint { reply, .. } => {
                    let _ = reply.send(Err(self.shared.failure()));
                }
                Msg::Sync(r) => {
                    let _ = r.send(Err(self.shared.failure()));
                }
                Msg::Release(_, r) => {
                    let _ = r.send(Err(self.shared.failure()));
                }
                Msg::Working { reply, .. } => {
                    if let Some(reply) = reply {
                        let _ = reply.send(());
                    }
                }
                Msg::Stats(r) => {
                    let _ = r.send(Ok(self.stats()));
                }
                Msg::Kb { reply, .. } => {
                    let _ = reply.send(Err(SinkError::Failed(Box::new(self.shared.failure()))));
                }
                Msg::Close(r) => {
                    let _ = r.send(Err(self.shared.failure()));
                    closing = true;
                }
            }
        }
        closing
    }

    /// Marks the recorder failed with `e` (the first failure wins): every later call
    /// returns it. What can no longer be written is counted `lost`: the kept events of
    /// an append that did not happen, and the events of the open summary windows.
    fn fail(&mut self, e: &Error) {
        let cause = match e {
            Error::Log(e) | Error::Writer(e) => Arc::clone(e),
            other => Arc::new(blackbox_log::Error::InvalidOptions {
                reason: other.to_string(),
            }),
        };
        {
            let mut failure = self.shared.failure.lock();
            if failure.is_none() {
                *failure = Some(cause);
            }
        }
        self.shared.failed.store(true, Ordering::SeqCst);
        if std::mem::replace(&mut self.failure_accounted, true) {
            return;
        }
        // Nothing more reaches the log: the memory stops queueing its changes.
        drop(self.shared.working.stop_journal());
        for kind in std::mem::take(&mut self.out_kept) {
            let c = self.counts(kind);
            c.kept -= 1;
            c.lost += 1;
        }
        self.out.clear();
        self.arena.clear();
        for ((kind, _), w) in std::mem::take(&mut self.windows) {
            let c = self.counts(kind);
            c.summarized -= w.count;
            c.lost += w.count;
        }
        self.ring.clear();
        self.ring_min.clear();
        self.ring_bytes = 0;
    }

    /// The working memory as the log holds it (the last checkpoint and the deltas since),
    /// as JSON, or `CheckpointTooLarge` when it would not fit in a log record (the memory
    /// refuses a `set` that would make it so).
    fn snapshot(&self) -> Result<Vec<u8>> {
        let mut bytes = b"{".to_vec();
        for (i, (key, text)) in self.logged.iter().enumerate() {
            if i > 0 {
                bytes.push(b',');
            }
            // Writing JSON of a `String` into a vector cannot fail.
            let _ = serde_json::to_writer(&mut bytes, key);
            bytes.push(b':');
            bytes.extend_from_slice(text.as_bytes());
        }
        bytes.push(b'}');
        let limit_bytes = self.log.record_bytes_max();
        if bytes.len() > limit_bytes {
            return Err(Error::CheckpointTooLarge {
                size_bytes: bytes.len(),
                limit_bytes,
            });
        }
        Ok(bytes)
    }

    /// Applies the durability mode at the end of a batch that appended anything.
    fn end_batch(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.dirty) {
            return Ok(());
        }
        match self.durability {
            Durability::Buffered => {}
            Durability::Flush => self.log.flush()?,
            Durability::Sync => {
                self.log.sync()?;
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<Option<Seq>> {
        // Every change made before the close reaches the log; later ones do not.
        let changes = self.shared.working.stop_journal();
        self.emit_changes(changes);
        // The ring is never written now: it holds the watermark back no more.
        // Nothing is queued behind these records: they take the clock's time.
        let now = self.shared.clock.now_ns();
        self.advance_watermark(false, now);
        let open: Vec<(u32, u64)> = self.windows.keys().copied().collect();
        for key in open {
            let at = key.1.saturating_add(self.window_ns(key)).min(now);
            self.close_window(key, at);
        }
        self.emit_accounting(now, true)?;
        if let Ok(snapshot) = self.snapshot() {
            self.emit_raw(codec::CHECKPOINT, now, &snapshot);
        }
        self.flush_out()?;
        Ok(self.log.sync()?)
    }

    /// The stamp of a record asked for at `ts_ns`: that time, or the last stamp when it
    /// is later. Before a stamp moves past the last one, the working-memory changes made
    /// before it are written, in their place (see `WorkingMemory::queue`).
    fn stamp(&mut self, ts_ns: u64) -> u64 {
        if ts_ns > self.last_stamp_ns {
            let changes = self.shared.working.take_before(ts_ns);
            self.emit_changes(changes);
        }
        self.last_stamp_ns = self.last_stamp_ns.max(ts_ns);
        self.last_stamp_ns
    }

    /// Queues working-memory delta records for `changes` (in the order made): one per
    /// time, holding the net effect of that time's changes on the memory the log holds
    /// (nothing when they leave it as it was), split into several when it does not fit
    /// a record. Changes of one time are coalesced, never changes of two: every time a
    /// reader may ask about sees its own memory.
    fn emit_changes(&mut self, changes: Vec<crate::working::Change>) {
        let mut changes = changes.into_iter().peekable();
        while let Some(first) = changes.next() {
            let ts_ns = first.ts_ns;
            let mut net = BTreeMap::from([(first.key, first.value)]);
            while let Some(c) = changes.next_if(|c| c.ts_ns == ts_ns) {
                net.insert(c.key, c.value);
            }
            let mut sets = Vec::new();
            let mut dels = Vec::new();
            for (key, value) in net {
                match value {
                    Some(v) if self.logged.get(&key) != Some(&v) => sets.push((key, v)),
                    None if self.logged.contains_key(&key) => dels.push(key),
                    _ => {}
                }
            }
            if sets.is_empty() && dels.is_empty() {
                continue;
            }
            // Never earlier than the last stamp (the clock may have gone back).
            self.last_stamp_ns = self.last_stamp_ns.max(ts_ns);
            let at = self.last_stamp_ns;
            for chunk in crate::delta::encode(&sets, &dels, self.log.record_bytes_max()) {
                let start = self.arena.len();
                self.arena.extend_from_slice(&chunk);
                self.out.push((
                    codec::WORKING,
                    at,
                    start..self.arena.len(),
                    codec::WORKING.index_tag(),
                ));
                self.queued_deltas += 1;
                self.queued_delta_bytes += chunk.len();
            }
            for key in dels {
                self.logged.remove(&key);
            }
            self.logged.extend(sets);
            if (self.queued_deltas >= CARRIED_DELTAS_MAX
                || self.queued_delta_bytes >= CARRIED_DELTA_BYTES_MAX)
                && self.queued_delta_bytes >= self.queued_checkpoint_bytes
            {
                // The preamble would repeat too much: a checkpoint replaces it all
                // (`emit_raw` stamps it `at` and takes no change: `at` is the last stamp).
                if let Ok(snapshot) = self.snapshot() {
                    self.emit_raw(codec::CHECKPOINT, at, &snapshot);
                }
            }
        }
    }

    /// Closes summary windows that have ended and writes due accounting records and
    /// checkpoints. They are due by the clock, but stamped with the last stamp written:
    /// events still queued behind them keep their own times.
    fn timers(&mut self, now: u64) -> Result<()> {
        if self.shared.triggers_pending.load(Ordering::SeqCst) > 0 {
            self.take_lost_triggers();
        }
        let at = self.last_stamp_ns;
        let ended: Vec<(u32, u64)> = self
            .windows
            .iter()
            .filter(|(_, w)| w.end_ns.saturating_add(SUMMARY_GRACE_NS) <= now)
            .map(|(&k, _)| k)
            .collect();
        for key in ended {
            self.close_window(key, at);
        }
        // The ring is not evicted by `now` here: events still queued behind this batch,
        // a trigger among them, may be older than `now`. Each event evicts by its own
        // time (`on_event`), the watermark by a reading every event before which has
        // arrived (`settle_watermark`), and the byte bound caps the memory.
        if now >= self.next_accounting_ns {
            self.emit_accounting(at, false)?;
            self.next_accounting_ns = now.saturating_add(self.accounting_interval_ns);
        } else if self
            .log
            .next_seq()
            .0
            .saturating_sub(self.accounted_next_seq)
            >= ACCOUNTING_RECORDS_MAX
        {
            // Many records since the last watermark written: one more, so that a read
            // bounded by time stops within about this many records of its end.
            self.emit_accounting(at, false)?;
        }
        if let (Some(next), Some(interval)) = (self.next_checkpoint_ns, self.checkpoint_interval_ns)
            && now >= next
        {
            match self.checkpoint(at) {
                Ok(_) | Err(Error::CheckpointTooLarge { .. }) => {}
                Err(e) => return Err(e),
            }
            self.next_checkpoint_ns = Some(now.saturating_add(interval));
        }
        Ok(())
    }

    /// Appends a knowledge-base commit after every record before it, once its evidence
    /// is checked, and writes it to the operating system (fdatasyncs it in `Sync` mode)
    /// before answering: the view is updated only after, so a killed process never
    /// leaves the view ahead of the log.
    /// A snapshot (`snapshot`) is appended the same way, as type `KB_SNAPSHOT`. Either
    /// goes into the knowledge-base carry of the preambles of the segments started after
    /// it.
    /// The outer error is the writer's failure; the inner one refuses this commit only.
    fn kb_commit(
        &mut self,
        ts_ns: u64,
        payload: &[u8],
        evidence: &[u64],
        snapshot: bool,
    ) -> Result<Result<Appended, SinkError>> {
        self.flush_out()?;
        let next_seq = self.log.next_seq().0;
        if let Some(&seq) = evidence.iter().find(|&&s| s >= next_seq) {
            return Ok(Err(SinkError::EvidenceNotInLog { seq, next_seq }));
        }
        if payload.len() > self.log.record_bytes_max() {
            // The commit's own problem: refused, and the recorder goes on.
            return Ok(Err(SinkError::TooLarge {
                size_bytes: payload.len(),
                limit_bytes: self.log.record_bytes_max(),
            }));
        }
        let record_type = if snapshot {
            codec::KB_SNAPSHOT
        } else {
            codec::KB
        };
        self.emit_raw(record_type, ts_ns, payload);
        let time_ns = self.last_stamp_ns;
        let seq = self.flush_out()?.unwrap_or(Seq(0));
        // In `Sync` mode an acknowledged commit survives a power cut, like a synced
        // event; otherwise it is at least in the operating system's hands.
        if self.durability == Durability::Sync {
            self.log.sync()?;
        } else {
            self.log.flush()?;
        }
        if snapshot {
            self.kb_carry.set_snapshot(payload.to_vec());
        } else {
            self.kb_carry
                .push_commit(seq.0, time_ns, payload, self.log.record_bytes_max());
        }
        self.shared
            .kb_snapshot_due
            .store(self.kb_carry.snapshot_due(), Ordering::Release);
        // The segments started from now on carry it.
        self.preamble_stale = true;
        Ok(Ok(Appended {
            seq: seq.0,
            time_ns,
        }))
    }

    fn checkpoint(&mut self, ts_ns: u64) -> Result<Seq> {
        // Stamped first, so that the changes made before it are in it.
        let at = self.stamp(ts_ns);
        let snapshot = self.snapshot()?;
        self.emit_raw(codec::CHECKPOINT, at, &snapshot);
        Ok(self.flush_out()?.unwrap_or(Seq(0)))
    }
}

/// Answers the events recorded as evidence in a batch: with their seqs once the batch is
/// as durable as the durability mode makes it, or with the failure that stopped it.
fn answer_evidence(evidence: Vec<(Reply<Seq>, Seq)>, durable: std::result::Result<(), &Error>) {
    for (reply, seq) in evidence {
        let _ = reply.send(durable.map(|()| seq).map_err(Error::clone));
    }
}
