//! The recorder's public API: [`Recorder`], the hot path producers call, and the way in
//! of working-memory changes and knowledge-base commits. The writer thread that owns the
//! log is in `writer/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use blackbox_kb::{Appended, KnowledgeBase, Sink, SinkError};
use blackbox_log::{Durability, Log, LogReader, Recovery, Seq};
use crossbeam_channel::{Sender, TrySendError};
use parking_lot::Mutex;

use crate::clock::{Clock, Floored};
use crate::codec::{Counters, PendingEvent};
use crate::config::{Config, Overflow};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::{Interner, KindInfo, Kinds, NameLimits, VALUES_PER_EVENT_MAX};
use crate::policy::{self, Tier};
use crate::restore::restore;
use crate::shared::{EventMsg, Msg, Reply, Shared, TRIGGER_PENDING, VALUE_BYTES};
use crate::working::WorkingMemory;
use crate::writer::Writer;

/// The flight recorder: working memory, retention tiers with exact accounting, incident
/// capture, over a hash-chained log.
///
/// `record` may be called from any number of threads; it never touches the disk. One
/// writer thread owns the log, batches what producers hand it, and group-commits.
#[derive(Debug)]
pub struct Recorder {
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    overflow: Overflow,
    event_bytes_max: usize,
    writer: Mutex<Option<JoinHandle<()>>>,
    recovery: Recovery,
    dir: PathBuf,
    log_key: Option<blackbox_log::ChainKey>,
    kb_half_life_ns: u64,
    /// Opened on first use: a recorder that keeps no knowledge runs no fjall database.
    kb: OnceLock<KnowledgeBase>,
    kb_open: Mutex<()>,
    #[cfg(feature = "ship")]
    shipper: Mutex<Option<crate::ship::Shipper>>,
    #[cfg(feature = "ship")]
    ship_status: Option<Arc<Mutex<crate::ship::ShipStatus>>>,
}

impl Recorder {
    /// Opens (or creates) the recorder's log in `dir`, restores its dictionary, its
    /// accounting totals and (unless disabled) the working memory of the last
    /// checkpoint, and starts the writer thread.
    ///
    /// # Errors
    ///
    /// Everything [`Log::open`] refuses; [`Error::Restore`] when a record needed to
    /// restore state cannot be decoded.
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Recorder> {
        let dir = dir.as_ref();
        let mut log_opts = config.log.clone().durability(Durability::Buffered);
        if let Some(retention) = config.retention.or(config.policy.retention()) {
            log_opts = log_opts.retention(retention);
        }
        // The policy's `[log]` section, when it has one, sets the blocks' compression.
        if let Some(compression) = config.policy.compression() {
            log_opts = log_opts.compression(compression);
        }
        #[cfg(feature = "ship")]
        let shipped = blackbox_log::ShippedThrough::new();
        #[cfg(feature = "ship")]
        let remote = config
            .ship
            .as_ref()
            .map(crate::ship::open_remote)
            .transpose()?;
        #[cfg(feature = "ship")]
        if config
            .ship
            .as_ref()
            .is_some_and(crate::ship::Ship::holds_pruning)
        {
            log_opts = log_opts.prune_after_shipped(shipped.clone());
        }
        let (log, recovery) = Log::open(dir, log_opts)?;
        if config.event_bytes_max.saturating_add(EVENT_OVERHEAD_BYTES) > log.record_bytes_max() {
            return Err(blackbox_log::Error::InvalidOptions {
                reason: format!(
                    "event_bytes_max {} plus {EVENT_OVERHEAD_BYTES} bytes of encoding exceeds the log's record_bytes_max {}",
                    config.event_bytes_max,
                    log.record_bytes_max()
                ),
            }
            .into());
        }
        let policy_toml = config.policy.to_toml().into_bytes();
        if policy_toml.len() > log.record_bytes_max() {
            return Err(blackbox_log::Error::InvalidOptions {
                reason: format!(
                    "the policy is {} bytes as TOML, more than the log's record_bytes_max {}: \
                     the log records the policy in force, so it must fit in one record",
                    policy_toml.len(),
                    log.record_bytes_max()
                ),
            }
            .into());
        }
        let limits = NameLimits::for_record_bytes(log.record_bytes_max());
        let (tx, rx) = crossbeam_channel::bounded(config.channel_capacity);
        let clock = Arc::new(Floored::new(Arc::clone(&config.clock)));
        let shared = Arc::new(Shared {
            policy: config.policy.clone(),
            clock: Arc::clone(&clock),
            names: Interner::new(limits),
            kinds: Kinds::new(limits),
            working: Arc::new(WorkingMemory::journaled(
                log.record_bytes_max()
                    .saturating_sub(crate::working::DELTA_OVERHEAD_BYTES),
                clock,
                notify_writer(tx.clone()),
                config.working_queue_bytes_max,
            )),
            postroll_until_ns: AtomicU64::new(0),
            stamped: [AtomicU64::new(0), AtomicU64::new(0)],
            generation: AtomicU64::new(0),
            triggers: Mutex::new(Vec::new()),
            triggers_pending: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            closed: AtomicBool::new(false),
            writer: OnceLock::new(),
            kb_snapshot_due: AtomicBool::new(false),
        });
        let mut restored = restore(dir, &shared, config.restore_working_memory)?;
        shared.kinds.set_restored(
            restored
                .totals
                .iter()
                .enumerate()
                .filter(|(_, c)| **c != Counters::default())
                .map(|(id, _)| u32::try_from(id).unwrap_or(u32::MAX)),
        );
        if let Some(seq) = recovery.last_seq {
            // Stamps go on from the log's last one, wherever the clock is now (the log
            // refuses a lower timestamp).
            let last = LogReader::open(dir)?.records(seq..)?.next().transpose()?;
            restored.last_ts_ns = last.map_or(0, |r| r.ts_ns());
            restored.any_record = true;
        }
        // Nothing this session is stamped below what the log holds: its last stamp and
        // its last watermark (a read bounded by that watermark looks no further).
        shared
            .clock
            .raise_floor(restored.last_ts_ns.max(restored.watermark_ns));
        let mut writer = Writer::new(log, Arc::clone(&shared), &config, restored, policy_toml);
        shared.working.start_journal();
        writer.open_session(&recovery)?;
        let on_panic = Arc::clone(&shared);
        let panic_dir = dir.to_owned();
        let handle = std::thread::Builder::new()
            .name("blackbox-writer".to_owned())
            .spawn(move || {
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    writer.run(rx);
                }));
                if run.is_err() {
                    // A bug, not an I/O failure: say so instead of reporting `Closed`.
                    let mut failure = on_panic.failure.lock();
                    if failure.is_none() {
                        *failure = Some(Arc::new(blackbox_log::Error::Io {
                            op: "keep writing (the writer thread panicked) to",
                            path: panic_dir,
                            source: std::io::Error::other("writer thread panicked"),
                        }));
                    }
                    on_panic.failed.store(true, Ordering::Release);
                }
            })
            .map_err(|e| {
                Error::from(blackbox_log::Error::Io {
                    op: "start the writer thread for",
                    path: dir.to_owned(),
                    source: e,
                })
            })?;
        let _ = shared.writer.set(handle.thread().clone());
        #[cfg(feature = "ship")]
        let shipper = match (&config.ship, remote) {
            (Some(ship), Some(remote)) => match crate::ship::Shipper::start(
                dir.to_owned(),
                ship,
                remote,
                shipped,
                config.log.chain_key().cloned(),
            ) {
                Ok(s) => Some(s),
                Err(e) => {
                    // The writer started: stop it before saying why.
                    let (reply, rx) = crossbeam_channel::bounded(1);
                    if tx.send(Msg::Close(reply)).is_ok() {
                        shared.wake_writer();
                        let _ = rx.recv();
                    }
                    let _ = handle.join();
                    return Err(e);
                }
            },
            _ => None,
        };
        #[cfg(feature = "ship")]
        let ship_status = shipper.as_ref().map(crate::ship::Shipper::status);
        Ok(Recorder {
            shared,
            tx,
            overflow: config.overflow,
            event_bytes_max: config.event_bytes_max,
            writer: Mutex::new(Some(handle)),
            recovery,
            dir: dir.to_owned(),
            log_key: config.log.chain_key().cloned(),
            kb_half_life_ns: config.kb_half_life_ns,
            kb: OnceLock::new(),
            kb_open: Mutex::new(()),
            #[cfg(feature = "ship")]
            shipper: Mutex::new(shipper),
            #[cfg(feature = "ship")]
            ship_status,
        })
    }

    /// What the shipper has done so far, with [`Config::ship`](crate::Config::ship);
    /// `None` without a shipper.
    #[cfg(feature = "ship")]
    pub fn ship_status(&self) -> Option<crate::ship::ShipStatus> {
        self.ship_status.as_ref().map(|s| s.lock().clone())
    }

    /// What opening the log found (torn tail cut, segments, last seq). A torn tail cut
    /// is also recorded in the log, as the session's first record (`codec::RECOVERY`).
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Records an event. Classifies its kind (cached), counts it, and hands what the
    /// policy keeps to the writer; never touches the disk.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKind`], [`Error::InvalidName`], [`Error::EventTooLarge`] (nothing
    /// recorded), [`Error::Writer`] after the writer failed (every time), and
    /// [`Error::Closed`].
    pub fn record(&self, event: &Event<'_>) -> Result<()> {
        self.record_waiting_in(event, |send| send())
    }

    /// Records an event as [`record`](Self::record) does, and runs the wait for room in
    /// the writer's channel inside `wait`: `wait` is called only when the channel is
    /// full (with [`Overflow::Block`]), and must call the function it is given. A caller
    /// that holds a lock other threads need (an interpreter's) lets it go there, and
    /// keeps it on the common path, where nothing waits.
    ///
    /// # Errors
    ///
    /// As [`record`](Self::record).
    pub fn record_waiting_in(
        &self,
        event: &Event<'_>,
        wait: impl FnOnce(&mut (dyn FnMut() -> Result<()> + Send)) -> Result<()>,
    ) -> Result<()> {
        let Some(msg) = self.prepare(event, false)? else {
            return Ok(());
        };
        match self.overflow {
            Overflow::Block => match self.tx.try_send(msg) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(msg)) => {
                    let mut msg = Some(msg);
                    let mut send = || {
                        let Some(msg) = msg.take() else {
                            return Ok(());
                        };
                        self.tx
                            .send(msg)
                            .map_err(|crossbeam_channel::SendError(msg)| {
                                self.unsend(&msg);
                                self.shared.failure()
                            })
                    };
                    let sent = wait(&mut send);
                    // A `wait` that never called it: sent now, waiting here.
                    send().and(sent)
                }
                Err(TrySendError::Disconnected(msg)) => {
                    self.unsend(&msg);
                    Err(self.shared.failure())
                }
            },
            Overflow::Drop => match self.tx.try_send(msg) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(Msg::Event(m))) => {
                    // Counted as overflow before it stops counting as sent, so `seen`
                    // never dips.
                    m.kind.overflow.fetch_add(1, Ordering::SeqCst);
                    m.kind.sent.fetch_sub(1, Ordering::SeqCst);
                    self.shared.uncount(m.generation);
                    if m.kind.class.trigger {
                        // The writer will never see it: its post-roll still holds.
                        self.shared.trigger_lost(m.ts_ns);
                    }
                    Ok(())
                }
                Err(TrySendError::Full(msg) | TrySendError::Disconnected(msg)) => {
                    self.unsend(&msg);
                    Err(self.shared.failure())
                }
            },
        }
    }

    /// Undoes what `prepare` counted and published for a message that was never sent.
    fn unsend(&self, msg: &Msg) {
        if let Msg::Event(m) | Msg::Evidence(m, _) = msg {
            m.kind.sent.fetch_sub(1, Ordering::SeqCst);
            self.shared.uncount(m.generation);
            if m.kind.class.trigger {
                self.shared.trigger_withdrawn(m.ts_ns);
            }
        }
    }

    /// Checks and classifies an event: `None` when it is dropped here (counted), else
    /// the message for the writer, already counted as sent. `evidence` events are never
    /// dropped.
    fn prepare(&self, event: &Event<'_>, evidence: bool) -> Result<Option<Msg>> {
        if self.shared.stopped() {
            return Err(self.shared.failure());
        }
        // Everything that can refuse the event is checked before anything is counted:
        // a refused event is not counted (names it brought may stay interned).
        let size_bytes = event.payload.len() + event.values.len() * VALUE_BYTES;
        if size_bytes > self.event_bytes_max {
            return Err(Error::EventTooLarge {
                kind: event.kind.to_owned(),
                size_bytes,
                limit_bytes: self.event_bytes_max,
            });
        }
        if event.values.len() > VALUES_PER_EVENT_MAX {
            return Err(Error::TooManyValues {
                kind: event.kind.to_owned(),
                values: event.values.len(),
                limit: VALUES_PER_EVENT_MAX,
            });
        }
        if let Some(s) = event.source {
            check_name(s, "source")?;
        }
        for &(name, _) in event.values {
            check_name(name, "value name")?;
        }
        let map = self.shared.kinds.pin();
        let inserted;
        let kind: &Arc<KindInfo> = match map.get(event.kind) {
            Some(k) => k,
            None => {
                policy::validate_kind(event.kind)?;
                inserted = self.shared.kinds.insert(
                    event.kind,
                    &self.shared.policy,
                    &self.shared.names,
                )?;
                &inserted
            }
        };
        let class = &kind.class;
        let is_drop = class.tier == Tier::Drop && !class.trigger && !evidence;
        // While no post-roll is open (the common case) a drop-tier event costs a lookup
        // and a counter: not even a clock reading. A drop rule with `preroll` sends its
        // events to the writer's ring instead.
        if is_drop && !class.preroll && self.shared.postroll_until_ns.load(Ordering::SeqCst) == 0 {
            return self.count_dropped(kind);
        }
        let source = match event.source {
            Some(s) => self.shared.names.intern(s)?,
            None => 0,
        };
        // The record is encoded here, once, straight from the caller's slices: the
        // writer appends these bytes as they are, with its header decisions (tier,
        // weight, a later stamp) written over the header alone.
        let mut record = PendingEvent::start(
            kind.id,
            source,
            event.event_time_ns,
            event.encoding,
            event.values.len(),
            event.payload.len(),
        );
        for &(name, v) in event.values {
            record.push_value(self.shared.names.intern(name)?, v);
        }
        record.finish(event.payload);
        // IMPORTANT: counted before the clock is read (see `Shared::stamped`); every
        // path below that does not hand the event to the writer takes it back.
        let generation = self.shared.count_stamp();
        let ts_ns = if class.trigger
            && let Some(incident) = self.shared.policy.incident()
        {
            self.shared.publish_trigger(incident.postroll_ns)
        } else {
            self.shared.clock.now_ns()
        };
        if is_drop && !class.preroll {
            // IMPORTANT: the clock is read before the post-roll is: a trigger publishes
            // its post-roll before it reads the clock, so an event stamped after a
            // trigger always sees that trigger's post-roll here.
            let until = self.shared.postroll_until_ns.load(Ordering::SeqCst);
            if until != TRIGGER_PENDING && ts_ns >= until {
                // The post-roll is over: reset it so later drops skip the clock. A
                // trigger that moved it meanwhile makes this exchange fail, as it should.
                let _ = self.shared.postroll_until_ns.compare_exchange(
                    until,
                    0,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                self.shared.uncount(generation);
                return self.count_dropped(kind);
            }
        }
        // IMPORTANT: counted as sent before the recorder's state is checked again, and
        // `close` sets that state before it asks the writer to close: an event that
        // passes the check is one the writer waits for before its last accounting.
        kind.sent.fetch_add(1, Ordering::SeqCst);
        if self.shared.stopped() {
            kind.sent.fetch_sub(1, Ordering::SeqCst);
            self.shared.uncount(generation);
            if class.trigger {
                self.shared.trigger_withdrawn(ts_ns);
            }
            return Err(self.shared.failure());
        }
        let kind = Arc::clone(kind);
        drop(map);
        let msg = EventMsg {
            kind,
            ts_ns,
            generation,
            record,
            size_bytes,
        };
        Ok(Some(Msg::Event(msg)))
    }

    /// Counts an event the producer drops; refuses it if the recorder stopped meanwhile
    /// (so the writer's last accounting counts every drop it accepted).
    fn count_dropped(&self, kind: &KindInfo) -> Result<Option<Msg>> {
        kind.dropped.fetch_add(1, Ordering::SeqCst);
        if self.shared.stopped() {
            kind.dropped.fetch_sub(1, Ordering::SeqCst);
            return Err(self.shared.failure());
        }
        Ok(None)
    }

    /// Records an event that will be cited as evidence (by a knowledge-base commit or
    /// by the host): it is written whatever its kind's tier says (counted as `kept`),
    /// and its seq is returned once it is as durable as the durability mode makes a
    /// batch: written to the operating system (`Flush`: a crash of the process cannot
    /// lose it), fdatasynced (`Sync`: a power cut cannot lose it), or appended to the
    /// log's buffer (`Buffered`: durable after the next [`Recorder::sync`]). A host may
    /// cite the seq at once. An incident trigger recorded this way triggers as
    /// [`Recorder::record`] would (pre-roll, marker, checkpoint, post-roll), and its own
    /// seq is returned.
    ///
    /// # Errors
    ///
    /// As [`Recorder::record`].
    pub fn record_evidence(&self, event: &Event<'_>) -> Result<Seq> {
        let Some(Msg::Event(msg)) = self.prepare(event, true)? else {
            return Err(Error::Closed);
        };
        // Counted as sent by `prepare`: it is sent whatever the recorder's state now (a
        // close waits for it), or uncounted if it cannot be.
        let (reply, rx) = crossbeam_channel::bounded(1);
        if let Err(crossbeam_channel::SendError(msg)) = self.tx.send(Msg::Evidence(msg, reply)) {
            self.unsend(&msg);
            return Err(self.shared.failure());
        }
        self.shared.wake_writer();
        rx.recv().unwrap_or_else(|_| Err(self.shared.failure()))
    }

    /// The knowledge base, opened on first use from `DIR/kb/` and caught up with the
    /// log. Its commits are records of this recorder's log. Its view stays open until
    /// the recorder is dropped (not only closed).
    ///
    /// ```
    /// use blackbox::{AsOf, Config, Event, Outcome, Provenance, Recorder, Status};
    /// use serde_json::json;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let recorder = Recorder::open(dir.path(), Config::new())?;
    /// let kb = recorder.kb()?;
    ///
    /// // Every commit cites the log records behind it.
    /// let weighed = recorder.record_evidence(&Event::new("observation.load").values(&[("kg", 0.31)]))?;
    /// let first = kb.assert("cup.mass_kg", json!(0.31), 0.6, &Default::default(), Provenance::new([weighed]))?;
    /// assert_eq!(first.outcome, Outcome::Created);
    ///
    /// // A stronger claim replaces the value, which stays as an open contradiction.
    /// let again = recorder.record_evidence(&Event::new("observation.load").values(&[("kg", 0.42)]))?;
    /// let second = kb.assert("cup.mass_kg", json!(0.42), 0.9, &Default::default(), Provenance::new([again]))?;
    /// assert_eq!(second.outcome, Outcome::Superseded);
    ///
    /// let now = kb.get("cup.mass_kg")?.expect("a fact");
    /// assert_eq!((now.value.clone(), now.status), (json!(0.42), Status::Contested));
    /// assert_eq!(now.rivals[0].value, json!(0.31));
    /// let then = kb.get_as_of("cup.mass_kg", AsOf::Version(first.version))?.expect("a fact");
    /// assert_eq!(then.value, json!(0.31));
    /// recorder.close()?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Kb`] when the view cannot be opened or caught up; [`Error::Closed`].
    pub fn kb(&self) -> Result<&KnowledgeBase> {
        if let Some(kb) = self.kb.get() {
            return Ok(kb);
        }
        let _open = self.kb_open.lock();
        if let Some(kb) = self.kb.get() {
            return Ok(kb);
        }
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // Catch-up reads the log's files: every commit is there, since a commit is
        // written to the operating system before it is acknowledged.
        let sink = KbSink {
            tx: self.tx.clone(),
            shared: Arc::clone(&self.shared),
        };
        let options = blackbox_kb::Options {
            half_life_ns: self.kb_half_life_ns,
            log_key: self.log_key.clone(),
        };
        let view_dir = self.dir.join(KB_DIR);
        let kb = match KnowledgeBase::open(
            &view_dir,
            &self.dir,
            Box::new(sink.clone()),
            options.clone(),
        ) {
            // A view fjall finds damaged (or of a fjall version this build does not read)
            // is a cache of the log: it is dropped and rebuilt. This recorder holds the
            // log's writer lock, and fjall's own lock would have refused the open if
            // another knowledge base still held the view.
            Err(e) if e.is_damaged_view() => {
                std::fs::remove_dir_all(&view_dir).map_err(|source| {
                    Error::from(blackbox_log::Error::Io {
                        op: "remove the damaged knowledge-base view",
                        path: view_dir.clone(),
                        source,
                    })
                })?;
                KnowledgeBase::open(&view_dir, &self.dir, Box::new(sink), options)?
            }
            other => other?,
        };
        Ok(self.kb.get_or_init(|| kb))
    }

    /// The working memory.
    pub fn working(&self) -> &WorkingMemory {
        &self.shared.working
    }

    /// Appends a snapshot of the working memory to the log and returns its seq (durable
    /// after the next [`Recorder::sync`], or at once in `Sync` mode).
    ///
    /// # Errors
    ///
    /// [`Error::Writer`] or [`Error::Closed`].
    pub fn checkpoint(&self) -> Result<Seq> {
        let ts_ns = self.shared.clock.now_ns();
        self.request(|reply| Msg::Checkpoint { ts_ns, reply })
    }

    /// A barrier: returns once every event recorded before it (and kept) is durable,
    /// with the last seq written.
    ///
    /// # Errors
    ///
    /// [`Error::Writer`] or [`Error::Closed`].
    pub fn sync(&self) -> Result<Option<Seq>> {
        self.request(Msg::Sync)
    }

    /// Releases the incident whose trigger has seq `trigger_seq` (as `record_evidence`
    /// or its incident record gives it): the segments holding its window are no longer
    /// kept by the log's disk budget (`[retention]`) beyond its `max_bytes` and
    /// `max_age`. Returns whether it was pinned (an incident of an earlier session, or
    /// one the budget already evicted, is not).
    ///
    /// # Errors
    ///
    /// [`Error::Writer`] or [`Error::Closed`].
    pub fn release(&self, trigger_seq: Seq) -> Result<bool> {
        self.request(|reply| Msg::Release(trigger_seq.0, reply))
    }

    /// Per-kind counters, running totals since the log was created, including every
    /// event this thread recorded before this call. `seen` also counts events other
    /// threads recorded that are still on their way to the writer (their outcomes are
    /// not counted yet): with no producer recording, every kind balances. After the
    /// writer failed, the counters are still given, with the events it could not write
    /// counted `lost`.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`].
    pub fn stats(&self) -> Result<BTreeMap<String, Counters>> {
        self.request(Msg::Stats)
    }

    /// Writes the open summary windows, a final accounting record and a checkpoint,
    /// syncs, and stops the writer. Later calls return [`Error::Closed`].
    ///
    /// # Errors
    ///
    /// The writer's error, if it failed.
    pub fn close(&self) -> Result<Option<Seq>> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Err(Error::Closed);
        }
        let (reply, rx) = crossbeam_channel::bounded(1);
        let result = match self.tx.send(Msg::Close(reply)) {
            Ok(()) => {
                self.shared.wake_writer();
                rx.recv().unwrap_or_else(|_| Err(self.shared.failure()))
            }
            Err(_) => Err(self.shared.failure()),
        };
        if let Some(handle) = self.writer.lock().take() {
            let _ = handle.join();
        }
        // After the writer: a last pass ships what it sealed; the status stays readable.
        #[cfg(feature = "ship")]
        {
            // Taken out first: the status stays readable while the last pass runs.
            let shipper = self.shipper.lock().take();
            if let Some(mut shipper) = shipper {
                shipper.stop();
            }
        }
        if let Some(kb) = self.kb.get() {
            // The view is not the truth: if this fails, the next open catches it up
            // from the log.
            let _ = kb.view().persist();
        }
        result
    }

    fn request<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.tx
            .send(make(reply))
            .map_err(|_| self.shared.failure())?;
        self.shared.wake_writer();
        rx.recv().unwrap_or_else(|_| Err(self.shared.failure()))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if !self.shared.closed.load(Ordering::Acquire) {
            let _ = self.close();
        }
    }
}

/// The knowledge base's view, inside the log's directory (the log ignores
/// subdirectories).
pub const KB_DIR: &str = "kb";

/// How a working-memory change tells the writer that it waits: a message through the
/// writer's channel. It waits for room as an event does under `Overflow::Block`, whatever
/// the overflow policy, since a change is never dropped; with `wait` (too many bytes of
/// changes wait), it also waits until the writer has taken them.
fn notify_writer(tx: Sender<Msg>) -> Box<dyn Fn(u64, bool) + Send + Sync> {
    Box::new(move |last, wait| {
        if wait {
            let (reply, rx) = crossbeam_channel::bounded(1);
            if tx
                .send(Msg::Working {
                    last,
                    reply: Some(reply),
                })
                .is_ok()
            {
                let _ = rx.recv();
            }
        } else {
            // Refused only once the writer is gone: the recorder closed or failed, and
            // its changes are no longer logged.
            let _ = tx.send(Msg::Working { last, reply: None });
        }
    })
}

/// The knowledge base's way into the log: commits go through the writer thread, so they
/// take their place among the events.
#[derive(Debug, Clone)]
struct KbSink {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
}

impl Sink for KbSink {
    fn append(&self, payload: Vec<u8>, evidence: &[u64]) -> Result<Appended, SinkError> {
        self.send(payload, evidence, false)
    }

    fn append_snapshot(&self, payload: Vec<u8>) -> Result<Appended, SinkError> {
        self.send(payload, &[], true)
    }

    fn snapshot_due(&self) -> bool {
        self.shared.kb_snapshot_due.load(Ordering::Acquire)
    }

    fn now_ns(&self) -> u64 {
        self.shared.clock.now_ns()
    }
}

impl KbSink {
    fn send(
        &self,
        payload: Vec<u8>,
        evidence: &[u64],
        snapshot: bool,
    ) -> Result<Appended, SinkError> {
        let failed = || SinkError::Failed(Box::new(self.shared.failure()));
        if self.shared.failed.load(Ordering::Acquire) || self.shared.closed.load(Ordering::Acquire)
        {
            return Err(failed());
        }
        let (reply, rx) = crossbeam_channel::bounded(1);
        let msg = Msg::Kb {
            ts_ns: self.shared.clock.now_ns(),
            payload,
            evidence: evidence.to_vec(),
            snapshot,
            reply,
        };
        self.tx.send(msg).map_err(|_| failed())?;
        self.shared.wake_writer();
        rx.recv().unwrap_or_else(|_| Err(failed()))
    }
}

/// Room an event record takes beyond its payload and values (rkyv fields, padding).
const EVENT_OVERHEAD_BYTES: usize = 256;

fn check_name(name: &str, what: &'static str) -> Result<()> {
    let rule = if name.is_empty() {
        "it is empty"
    } else if name.len() > 256 {
        "it is longer than 256 bytes"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.to_owned(),
        what,
        rule,
    })
}
