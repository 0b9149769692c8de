//! The recorder: the hot path producers call, and the writer thread that owns the log.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use blackbox_kb::{Appended, KnowledgeBase, Sink, SinkError};
use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Recovery, Seq};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};
use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::clock::{Clock, Floored, SystemClock};
use crate::codec::{
    self, AccountingRecord, Counters, DictionaryRecord, Encoding, EventRecord, IncidentRecord,
    RecoveryRecord, SummaryRecord, ValueStats, WrittenTier,
};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::names::{DictionaryFold, Interner, KindInfo, Kinds, NameLimits, VALUES_PER_EVENT_MAX};
use crate::policy::{self, Policy, Sampling, Tier};
use crate::sum::WideSum;
use crate::working::WorkingMemory;

/// What `record` does when the writer falls behind and the channel is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wait for room: lossless, but a stalled disk stalls the producer.
    #[default]
    Block,
    /// Count the event as `overflow` and return at once: a control loop never waits.
    Drop,
}

/// Options for [`Recorder::open`].
#[derive(Debug, Clone)]
pub struct Config {
    log: LogOptions,
    durability: Durability,
    policy: Policy,
    overflow: Overflow,
    channel_capacity: usize,
    batch_records_max: usize,
    accounting_interval_ns: u64,
    checkpoint_interval_ns: Option<u64>,
    restore_working_memory: bool,
    event_bytes_max: usize,
    clock: Arc<dyn Clock>,
    kb_half_life_ns: u64,
    working_queue_bytes_max: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            log: LogOptions::new(),
            durability: Durability::Flush,
            policy: Policy::default(),
            overflow: Overflow::Block,
            channel_capacity: 4096,
            batch_records_max: 4096,
            accounting_interval_ns: 5_000_000_000,
            checkpoint_interval_ns: Some(60_000_000_000),
            restore_working_memory: true,
            event_bytes_max: 1 << 20,
            clock: Arc::new(SystemClock),
            kb_half_life_ns: blackbox_kb::adjudicate::DEFAULT_HALF_LIFE_NS,
            working_queue_bytes_max: crate::working::QUEUE_BYTES_MAX,
        }
    }
}

impl Config {
    /// Defaults: everything `full`, `Flush` durability, `Block` on overflow, accounting
    /// every 5 s, a working-memory checkpoint every 60 s, 1 MiB payloads at most.
    pub fn new() -> Config {
        Config::default()
    }

    /// Options of the log underneath (segment size, chain key, ...). Its durability is
    /// ignored: set it with [`Config::durability`].
    pub fn log_options(mut self, log: LogOptions) -> Self {
        self.log = log;
        self
    }

    /// When the writer's batches reach the OS and the disk (default `Flush`): `Sync` makes
    /// every batch durable before the next (group commit).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The retention policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// What `record` does when the writer cannot keep up (default `Block`).
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Events that may wait for the writer (default 4096: enough for 20 ms at 200 k
    /// events/s; a larger channel only streams more memory through the cache).
    pub fn channel_capacity(mut self, capacity: usize) -> Self {
        self.channel_capacity = capacity.max(1);
        self
    }

    /// Interval of accounting records, by the recorder's clock (default 5 s).
    pub fn accounting_interval_ns(mut self, ns: u64) -> Self {
        self.accounting_interval_ns = ns.max(1);
        self
    }

    /// Interval of automatic working-memory checkpoints (default 60 s; `None`: only on
    /// request, at incidents and on close).
    pub fn checkpoint_interval_ns(mut self, ns: Option<u64>) -> Self {
        self.checkpoint_interval_ns = ns.filter(|&n| n > 0);
        self
    }

    /// Restore working memory from the last checkpoint on open (default true).
    pub fn restore_working_memory(mut self, restore: bool) -> Self {
        self.restore_working_memory = restore;
        self
    }

    /// Largest event accepted: its payload plus 16 bytes per numeric value (default
    /// 1 MiB). With 256 bytes of encoding it must fit the log's `record_bytes_max`.
    pub fn event_bytes_max(mut self, bytes: usize) -> Self {
        self.event_bytes_max = bytes;
        self
    }

    /// The clock (default: the system clock). Tests pass a
    /// [`ManualClock`](crate::ManualClock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The half-life of a knowledge-base fact's confidence when a conflicting claim is
    /// weighed against it (0: no decay). Default: one day.
    #[must_use]
    pub fn kb_half_life_ns(mut self, ns: u64) -> Self {
        self.kb_half_life_ns = ns;
        self
    }

    /// Bytes of working-memory changes that may wait for the writer (default 64 MiB).
    /// A change counts its key, its value as JSON text and
    /// [`WORKING_CHANGE_BYTES`](crate::WORKING_CHANGE_BYTES) of bookkeeping. When more
    /// wait, the change that went over is made all the same, and the call that made it
    /// (`set`, `remove`, `replace`) returns once the writer has taken every change
    /// queued: a host that changes the memory faster than the writer logs it is slowed
    /// down, never refused, and no change is dropped. 0 makes every change wait so.
    #[must_use]
    pub fn working_queue_bytes_max(mut self, bytes: usize) -> Self {
        self.working_queue_bytes_max = bytes;
        self
    }
}

/// An event on its way to the writer.
#[derive(Debug)]
struct EventMsg {
    kind: Arc<KindInfo>,
    ts_ns: u64,
    /// Where it is counted in `Shared::stamped`: the parity of its generation.
    generation: usize,
    source: u32,
    event_time_ns: Option<u64>,
    encoding: Encoding,
    /// Small payloads travel inside the message: a heap buffer allocated by a producer
    /// and freed by the writer takes the allocator's slow path on both sides, which was
    /// a third of the cost of a kept event.
    payload: codec::Payload,
    values: Vec<(u32, f64)>,
}

impl EventMsg {
    fn size_bytes(&self) -> usize {
        64 + self.payload.len() + self.values.len() * VALUE_BYTES
    }
}

type Reply<T> = Sender<Result<T>>;

#[derive(Debug)]
enum Msg {
    Event(EventMsg),
    /// A checkpoint, stamped with the time the caller asked for it.
    Checkpoint {
        ts_ns: u64,
        reply: Reply<Seq>,
    },
    Sync(Reply<Option<Seq>>),
    Stats(Reply<BTreeMap<String, Counters>>),
    Close(Reply<Option<Seq>>),
    /// An event to keep whatever its tier, answered with its seq.
    Evidence(EventMsg, Reply<Seq>),
    /// Working-memory changes wait, up to this number: written here, in their place
    /// among the events of the thread that made them (unless a record stamped later
    /// took them first). With a reply, answered once they are taken.
    Working {
        last: u64,
        reply: Option<Sender<()>>,
    },
    /// A knowledge-base commit, appended once its evidence is checked.
    Kb {
        /// The time the commit was made.
        ts_ns: u64,
        payload: Vec<u8>,
        evidence: Vec<u64>,
        reply: Sender<Result<Appended, SinkError>>,
    },
}

/// State shared by producers and the writer.
#[derive(Debug)]
struct Shared {
    policy: Policy,
    /// The configured clock read through the stamp floor: every stamp comes from here.
    clock: Arc<Floored>,
    names: Interner,
    kinds: Kinds,
    working: Arc<WorkingMemory>,
    /// The end of the post-roll producers know of (recorder time, ns): 0 when none is
    /// open, `TRIGGER_PENDING` while a trigger is being stamped. Drop-tier producers
    /// take their fast path only at 0.
    postroll_until_ns: AtomicU64,
    /// Triggers recorded and not yet taken by the writer, so that it can tell an event
    /// stamped after one of them, which reached it first, to be post-roll.
    triggers: Mutex<Vec<PendingTrigger>>,
    /// `triggers.len()`, read by the writer without the lock.
    triggers_pending: AtomicUsize,
    /// Set with `failure` when the writer stops on an error.
    failed: AtomicBool,
    failure: Mutex<Option<Arc<blackbox_log::Error>>>,
    closed: AtomicBool,
    /// The writer thread, to wake it from its poll when a caller waits for a reply.
    writer: OnceLock<std::thread::Thread>,
    /// Events this session that producers are about to stamp or have stamped for the
    /// writer, less those that will never reach it (dropped after the stamp, refused,
    /// lost to overflow), by the parity of the generation they were counted in.
    /// Counted before the clock is read: once the count of a generation the writer
    /// closed equals what it received of it, every event stamped before the clock
    /// reading it closed that generation with has reached it (the watermark,
    /// [`Writer::advance_watermark`]).
    stamped: [AtomicU64; 2],
    /// The generation producers count into; only the writer moves it on.
    generation: AtomicU64,
}

/// A trigger a producer stamped, until the writer takes it.
#[derive(Debug, Clone, Copy)]
struct PendingTrigger {
    ts_ns: u64,
    postroll_end_ns: u64,
    /// Lost to overflow: the writer opens its post-roll all the same.
    lost: bool,
}

/// `Shared::postroll_until_ns` while a trigger is being stamped.
const TRIGGER_PENDING: u64 = u64::MAX;

impl Shared {
    /// Wakes a polling writer at once. Only calls that wait for the writer's answer do
    /// this: `record()` leaves the writer to its poll, so a producer pays no wake-up.
    fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }

    fn failure(&self) -> Error {
        match &*self.failure.lock() {
            Some(e) => Error::Writer(Arc::clone(e)),
            None => Error::Closed,
        }
    }

    /// Whether the recorder accepts no more events (closed, or its writer failed).
    fn stopped(&self) -> bool {
        self.failed.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst)
    }

    /// Counts an event about to be stamped in the current generation; returns where
    /// (`stamped`'s index), for `uncount`.
    ///
    /// IMPORTANT: counted, then the generation read again: an event counted in a
    /// generation was counted before the writer closed it (else it counts again, in
    /// the new one), so a generation the writer closed gains no event afterwards. An
    /// event counted after a close reads the clock after it: its stamp is no earlier
    /// than the reading the writer closed it with (see `Writer::advance_watermark`).
    fn count_stamp(&self) -> usize {
        loop {
            let generation = self.generation.load(Ordering::SeqCst);
            let i = (generation & 1) as usize;
            self.stamped[i].fetch_add(1, Ordering::SeqCst);
            if self.generation.load(Ordering::SeqCst) == generation {
                return i;
            }
            self.stamped[i].fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Takes back the count of an event that will never reach the writer.
    fn uncount(&self, generation: usize) {
        self.stamped[generation].fetch_sub(1, Ordering::SeqCst);
    }

    /// Stamps a trigger and opens its post-roll; returns its stamp.
    ///
    /// IMPORTANT: the post-roll is marked pending and the trigger counted before the
    /// clock is read, and the trigger is listed before the lock is released: any event
    /// stamped after this trigger then finds it, in `postroll_until_ns` (a drop-tier
    /// producer) or in `triggers` (the writer, if that event reaches it first).
    fn publish_trigger(&self, postroll_ns: u64) -> u64 {
        let mut triggers = self.triggers.lock();
        let before = self
            .postroll_until_ns
            .swap(TRIGGER_PENDING, Ordering::SeqCst);
        self.triggers_pending.fetch_add(1, Ordering::SeqCst);
        let ts_ns = self.clock.now_ns();
        let end = ts_ns
            .saturating_add(postroll_ns)
            .clamp(1, TRIGGER_PENDING - 1);
        triggers.push(PendingTrigger {
            ts_ns,
            postroll_end_ns: end,
            lost: false,
        });
        self.postroll_until_ns
            .store(before.max(end), Ordering::SeqCst);
        ts_ns
    }

    /// Marks a trigger the channel had no room for: the writer opens its post-roll.
    fn trigger_lost(&self, ts_ns: u64) {
        let mut triggers = self.triggers.lock();
        if let Some(t) = triggers.iter_mut().find(|t| t.ts_ns == ts_ns && !t.lost) {
            t.lost = true;
        }
    }

    /// Forgets a trigger that was refused before it was sent.
    fn trigger_withdrawn(&self, ts_ns: u64) {
        let mut triggers = self.triggers.lock();
        if let Some(i) = triggers.iter().position(|t| t.ts_ns == ts_ns && !t.lost) {
            triggers.swap_remove(i);
            self.triggers_pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

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
        let log_opts = config.log.clone().durability(Durability::Buffered);
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
        })
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
        let Some(msg) = self.prepare(event, false)? else {
            return Ok(());
        };
        match self.overflow {
            Overflow::Block => match self.tx.send(msg) {
                Ok(()) => Ok(()),
                Err(crossbeam_channel::SendError(msg)) => {
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
        let mut values = Vec::with_capacity(event.values.len());
        for &(name, v) in event.values {
            values.push((self.shared.names.intern(name)?, v));
        }
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
            source,
            event_time_ns: event.event_time_ns,
            encoding: event.encoding,
            payload: SmallVec::from_slice(event.payload),
            values,
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
            reply,
        };
        self.tx.send(msg).map_err(|_| failed())?;
        self.shared.wake_writer();
        rx.recv().unwrap_or_else(|_| Err(failed()))
    }

    fn now_ns(&self) -> u64 {
        self.shared.clock.now_ns()
    }
}

/// How long a summary window stays open after its end, by the recorder's clock, for
/// events stamped inside it that reach the writer late. An event later still adds a
/// further summary record for the same window: readers add records of one (kind,
/// window) together.
pub const SUMMARY_GRACE_NS: u64 = 100_000_000;

/// How often a busy writer looks for messages.
const POLL_INTERVAL: Duration = Duration::from_micros(200);
/// How long without a message before the writer blocks instead of polling.
const IDLE_AFTER: Duration = Duration::from_millis(20);
/// How long the writer blocks before it runs its timers anyway.
const TICK: Duration = Duration::from_millis(50);

/// What a numeric value counts for against `event_bytes_max` (its name is interned).
const VALUE_BYTES: usize = 16;

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

/// What the log says about the state the last session left.
#[derive(Debug, Default)]
struct Restored {
    /// Running totals per kind id, as the log's accounting records fold to.
    totals: Vec<Counters>,
    /// Timestamp of the log's last record.
    last_ts_ns: u64,
    /// The working memory as the log holds it: the last checkpoint and every delta
    /// after it (empty when not restored).
    working: BTreeMap<String, serde_json::Value>,
    /// Whether the log holds any record.
    any_record: bool,
    /// The largest watermark of the accounting records read (0: none).
    watermark_ns: u64,
}

/// Restores the dictionary, the accounting totals and the working memory from the log,
/// reading back from the last segment: to the last segment that opens with the
/// dictionary (or the first) for the names; to the last segment that holds an
/// accounting snapshot (or the first) for the totals, folding the accounting records
/// from its last snapshot on; and as far as the last checkpoint, whose memory the
/// working-memory deltas after it are then folded into (reading forward from it): the
/// memory is what the log holds, also after a crash that left no checkpoint at the end.
fn restore(dir: &Path, shared: &Shared, restore_working: bool) -> Result<Restored> {
    let segments = blackbox_log::list_segments(dir)?;
    let reader = LogReader::open(dir)?;
    let mut restored = Restored::default();
    let mut dict_done = false;
    let mut accounting_done = false;
    let mut checkpoint_done = !restore_working;
    let mut checkpoint = None;
    // Per segment read, newest first: its dictionary entries and accounting records.
    let mut dict_segments: Vec<Vec<(u64, u32, String)>> = Vec::new();
    let mut accounting_segments: Vec<Vec<blackbox_log::LogRecord>> = Vec::new();
    for (i, seg) in segments.iter().enumerate().rev() {
        if dict_done && accounting_done && checkpoint_done {
            break;
        }
        let end = segments.get(i + 1).map(|s| s.first_seq);
        let mut seg_dict = Vec::new();
        let mut seg_accounting = Vec::new();
        let mut opens_with_dict = false;
        let mut holds_snapshot = false;
        let mut last_checkpoint = None;
        let range = match end {
            Some(end) => reader.records(Seq(seg.first_seq)..Seq(end))?,
            None => reader.records(Seq(seg.first_seq)..)?,
        };
        for (n, r) in range.enumerate() {
            let r = r?;
            let t = r.record_type();
            if n == 0 {
                opens_with_dict = t == codec::DICTIONARY;
            }
            if t == codec::DICTIONARY && !dict_done {
                let seq = r.seq().0;
                let d =
                    codec::access::<codec::ArchivedDictionaryRecord>(r.payload()).map_err(|e| {
                        Error::Restore {
                            seq,
                            reason: format!("dictionary record: {e}"),
                        }
                    })?;
                for e in d.entries.iter() {
                    seg_dict.push((seq, e.0.to_native(), e.1.as_str().to_owned()));
                }
            } else if t == codec::ACCOUNTING && !accounting_done {
                // A segment this reads back to holds a snapshot or is the first: the
                // last watermark written is among these records (a snapshot carries
                // the watermark of the record it was taken with).
                if let Some(w) = codec::accounting_watermark_ns(r.payload()) {
                    restored.watermark_ns = restored.watermark_ns.max(w);
                }
                if codec::is_accounting_snapshot(r.payload()) == Some(true) {
                    // It holds the fold of the records before it: start from it.
                    seg_accounting.clear();
                    holds_snapshot = true;
                }
                seg_accounting.push(r);
            } else if t == codec::CHECKPOINT && !checkpoint_done {
                last_checkpoint = Some(r);
            }
        }
        if !dict_done {
            dict_segments.push(seg_dict);
            dict_done = opens_with_dict || i == 0;
        }
        if !accounting_done {
            accounting_segments.push(seg_accounting);
            accounting_done = holds_snapshot || i == 0;
        }
        if let Some(r) = last_checkpoint {
            checkpoint = Some(r);
            checkpoint_done = true;
        }
    }
    if restore_working {
        let (mut memory, from) = match &checkpoint {
            Some(r) => {
                let memory = serde_json::from_slice(r.payload()).map_err(|e| Error::Restore {
                    seq: r.seq().0,
                    reason: format!("checkpoint record: {e}"),
                })?;
                (memory, r.seq().0 + 1)
            }
            None => (serde_json::Map::new(), 0),
        };
        if segments.last().is_some() {
            for r in reader.records(Seq(from)..)? {
                let r = r?;
                if r.record_type() == codec::WORKING {
                    let delta =
                        crate::delta::WorkingDelta::decode(r.payload()).map_err(|reason| {
                            Error::Restore {
                                seq: r.seq().0,
                                reason: format!("working-memory delta record: {reason}"),
                            }
                        })?;
                    delta.apply(&mut memory);
                }
            }
        }
        restored.working = memory.into_iter().collect();
        shared.working.restore(restored.working.clone());
    }
    let mut fold = DictionaryFold::new();
    for (seq, id, name) in dict_segments.into_iter().rev().flatten() {
        fold.add(id, &name).map_err(|reason| Error::Restore {
            seq,
            reason: format!("dictionary record: {reason}"),
        })?;
    }
    let mut totals: BTreeMap<u32, Counters> = BTreeMap::new();
    for r in accounting_segments.into_iter().rev().flatten() {
        let seq = r.seq().0;
        let bad = |e: rkyv::rancor::Error| Error::Restore {
            seq,
            reason: format!("accounting record: {e}"),
        };
        let a = codec::access::<codec::ArchivedAccountingRecord>(r.payload()).map_err(bad)?;
        let mut kinds = Vec::with_capacity(a.kinds.len());
        for e in a.kinds.iter() {
            let kind = e.0.to_native();
            if fold.name(kind).is_none() {
                return Err(Error::Restore {
                    seq,
                    reason: format!(
                        "accounting record: kind id {kind} is named by no dictionary record"
                    ),
                });
            }
            let c: Counters =
                rkyv::deserialize::<Counters, rkyv::rancor::Error>(&e.1).map_err(bad)?;
            kinds.push((kind, c));
        }
        codec::fold_accounting(&mut totals, a.snapshot, kinds);
    }
    for (kind, c) in totals {
        // The id is at most NAMES_PER_LOG_MAX: the dictionary names it.
        let i = kind as usize;
        if restored.totals.len() <= i {
            restored.totals.resize(i + 1, Counters::default());
        }
        restored.totals[i] = c;
    }
    shared.names.restore(&fold);
    Ok(restored)
}

/// Adds an entry stamped `ts` to a sliding-window minimum (see `Writer::ring_min`).
fn push_min(mins: &mut VecDeque<(u64, u64)>, ts: u64, id: u64) {
    while mins.back().is_some_and(|&(t, _)| t >= ts) {
        mins.pop_back();
    }
    mins.push_back((ts, id));
}

/// A sampled-out or summarized event kept for a possible incident.
#[derive(Debug)]
struct RingEntry {
    msg: EventMsg,
    /// Its place in the order of arrival, for `Writer::ring_min`.
    id: u64,
}

/// The open summary window of one kind.
#[derive(Debug)]
struct Window {
    start_ns: u64,
    end_ns: u64,
    count: u64,
    values: BTreeMap<u32, ValueAcc>,
}

/// One value's aggregates in an open summary window.
#[derive(Debug)]
struct ValueAcc {
    count: u64,
    min: f64,
    max: f64,
    sum: WideSum,
    last: f64,
}

/// Sampling state of one kind.
#[derive(Debug, Default, Clone, Copy)]
struct Sampler {
    /// Events of the kind seen by the sampler so far.
    n: u64,
}

impl Sampler {
    /// Deterministic: `Every(N)` keeps events 0, N, 2N, ...; `Rate(p)` keeps event n when
    /// `floor((n + 1) p) > floor(n p)`, exactly p of them over any prefix, to within one.
    fn keep(&mut self, sampling: Sampling) -> bool {
        let n = self.n;
        self.n += 1;
        match sampling {
            Sampling::Every(every) => n.is_multiple_of(every.max(1)),
            Sampling::Rate(p) => ((n + 1) as f64 * p).floor() > (n as f64 * p).floor(),
        }
    }
}

/// The writer thread's state. It alone touches the log.
struct Writer {
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
    next_accounting_ns: u64,
    next_checkpoint_ns: Option<u64>,
    /// Encoded records of the current batch: (type, ts, range in `arena`, tag for the
    /// log's tag index: an event's kind id, 0 for other records).
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
}

/// A post-roll window of the triggers taken: `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start_ns: u64,
    end_ns: u64,
}

/// Post-roll windows the writer remembers, for events that reach it late.
const SPANS_MAX: usize = 1024;

/// Where an event falls relative to the incidents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Outside every incident's windows.
    Normal,
    /// Inside a taken trigger's pre-roll window, reaching the writer after it.
    LatePreroll,
    /// Inside a post-roll window.
    Postroll,
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
    fn new(
        log: Log,
        shared: Arc<Shared>,
        config: &Config,
        restored: Restored,
        policy_toml: Vec<u8>,
    ) -> Writer {
        let reset_working = !config.restore_working_memory && restored.any_record;
        let now = shared.clock.now_ns();
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
            last_stamp_ns: restored.last_ts_ns,
            named_upto: 0,
            preamble_stale: false,
            preamble_dictionary: Vec::new(),
            preamble_accounting: None,
            policy_toml,
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
    fn open_session(&mut self, recovery: &Recovery) -> Result<()> {
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
        self.preamble_stale = true;
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

    fn run(mut self, rx: Receiver<Msg>) {
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
                reply,
            } => match self.kb_commit(ts_ns, &payload, &evidence) {
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

    /// Raises the watermark at the end of a batch, `now` being the clock reading the
    /// caller took for it (no events of this batch are pending after it).
    ///
    /// Producers count each event in the current generation before they read the clock
    /// (`Shared::count_stamp`). The writer closes a generation with a clock reading: it
    /// raises the stamp floor to the reading, then moves the generation on, so an event
    /// counted in a later generation is stamped no earlier than the reading, whatever
    /// the clock does. Once it has received every event counted in the closed
    /// generation, every event stamped before that reading has reached it, and it
    /// closes the next generation (at most one is closing at a time, so the events of
    /// earlier ones were all received before). Under load that never pauses, producers
    /// count into the new generation while the old one drains: the watermark trails the
    /// clock by about a batch or two instead of standing still.
    ///
    /// What reached the writer is in the log by the next record written, but for the
    /// events the pre-roll ring holds, which an incident may still write (with `ring`):
    /// the watermark is the reading or the oldest of those, the largest so far.
    fn advance_watermark(&mut self, ring: bool, now: u64) {
        if let Some((generation, at)) = self.closing
            && self.drained(generation)
        {
            self.closing = None;
            self.settle_watermark(ring, at);
        }
        if self.closing.is_none() {
            // IMPORTANT: the floor first, then the generation (see `count_stamp`).
            self.shared.clock.raise_floor(now);
            let closed = self.generation;
            self.generation += 1;
            self.shared
                .generation
                .store(self.generation, Ordering::SeqCst);
            self.closing = Some((closed, now));
            // Quiet producers: the generation may have drained already.
            if self.drained(closed) {
                self.closing = None;
                self.settle_watermark(ring, now);
            }
        }
    }

    /// Whether every event counted in `generation` (closed) has reached the writer.
    /// The count of a parity holds that generation's and the drained ones' before it.
    fn drained(&self, generation: u64) -> bool {
        let i = (generation & 1) as usize;
        self.shared.stamped[i].load(Ordering::SeqCst) == self.received[i]
    }

    /// Every event stamped before `at` has reached the writer: the watermark moves to
    /// `at`, or to the oldest event the ring holds (with `ring`). The ring first drops
    /// what no incident can write any more: a trigger yet to reach the writer is
    /// stamped at `at` or later, so its pre-roll starts no earlier than `at` less the
    /// pre-roll's length; what is older would otherwise hold the watermark back for
    /// good when no later event comes to push it out (`evict_ring`).
    fn settle_watermark(&mut self, ring: bool, at: u64) {
        if ring && let Some(incident) = &self.incident {
            let horizon = at.saturating_sub(incident.preroll_ns);
            self.evict_ring_before(horizon);
        }
        let held = if ring {
            self.ring_min.front().map(|&(ts, _)| ts)
        } else {
            None
        };
        let w = held.map_or(at, |h| h.min(at));
        self.watermark_ns = self.watermark_ns.max(w);
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
                self.out
                    .push((codec::WORKING, at, start..self.arena.len(), 0));
            }
            for key in dels {
                self.logged.remove(&key);
            }
            self.logged.extend(sets);
        }
    }

    fn counts(&mut self, kind: u32) -> &mut Counters {
        let i = kind as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, Counters::default());
        }
        &mut self.counts[i]
    }

    fn on_event(&mut self, msg: EventMsg) -> Result<()> {
        let ts = msg.ts_ns;
        self.evict_ring(ts);
        let kind = msg.kind.id;
        let class = msg.kind.class.clone();
        if class.trigger && self.incident.is_some() {
            return self.on_trigger(msg).map(|_| ());
        }
        if class.tier == Tier::Full {
            self.counts(kind).kept += 1;
            self.emit_event(msg, WrittenTier::Full, 1.0);
            return Ok(());
        }
        let phase = self.phase(ts);
        if phase == Phase::Postroll {
            self.counts(kind).kept += 1;
            self.emit_event(msg, WrittenTier::Postroll, 1.0);
            return Ok(());
        }
        let late = phase == Phase::LatePreroll;
        match class.tier {
            Tier::Sample(sampling) => {
                let i = kind as usize;
                if self.samplers.len() <= i {
                    self.samplers.resize(i + 1, Sampler::default());
                }
                if self.samplers[i].keep(sampling) {
                    self.counts(kind).kept += 1;
                    self.emit_event(msg, WrittenTier::Sample, sampling.weight());
                } else {
                    self.counts(kind).sampled_out += 1;
                    self.hold(msg, late);
                }
            }
            Tier::Summary { window_ns } => {
                self.summarize(&msg, window_ns);
                self.counts(kind).summarized += 1;
                self.hold(msg, late);
            }
            Tier::Drop | Tier::Full => {
                // A drop-tier event reaches the writer when a producer saw a post-roll
                // open, or when its rule keeps it for the pre-roll.
                self.counts(kind).dropped += 1;
                if class.preroll {
                    self.hold(msg, late);
                }
            }
        }
        Ok(())
    }

    /// Keeps an event that was not written for a possible incident: in the ring, or,
    /// for one stamped inside the pre-roll of a trigger already taken, written at once.
    fn hold(&mut self, msg: EventMsg, late_preroll: bool) {
        if late_preroll {
            self.counts(msg.kind.id).preroll += 1;
            self.emit_event(msg, WrittenTier::Preroll, 1.0);
        } else {
            self.push_ring(msg);
        }
    }

    /// Where an event stamped `ts` falls: inside a post-roll (of a trigger taken, or of
    /// one a producer stamped before it that has not reached the writer yet), inside the
    /// pre-roll of a trigger taken, or neither.
    fn phase(&mut self, ts: u64) -> Phase {
        if self.shared.triggers_pending.load(Ordering::SeqCst) > 0 {
            self.take_lost_triggers();
            let triggers = self.shared.triggers.lock();
            // Strictly after: an event stamped at the same time as the trigger that
            // reached the writer first was recorded before it.
            if triggers
                .iter()
                .any(|t| ts > t.ts_ns && ts < t.postroll_end_ns)
            {
                return Phase::Postroll;
            }
        }
        let preroll_ns = self.incident.as_ref().map_or(0, |i| i.preroll_ns);
        let mut phase = Phase::Normal;
        for span in self.spans.iter().rev() {
            if ts >= span.end_ns {
                break;
            }
            if ts >= span.start_ns {
                return Phase::Postroll;
            }
            if ts >= span.start_ns.saturating_sub(preroll_ns) {
                phase = Phase::LatePreroll;
            }
        }
        phase
    }

    /// Opens the post-roll of the triggers lost to overflow (they never reach the
    /// writer) and stops counting them as pending.
    fn take_lost_triggers(&mut self) {
        let shared = Arc::clone(&self.shared);
        let mut triggers = shared.triggers.lock();
        let mut i = 0;
        while i < triggers.len() {
            if triggers[i].lost {
                let t = triggers.swap_remove(i);
                shared.triggers_pending.fetch_sub(1, Ordering::SeqCst);
                self.add_span(t.ts_ns, t.postroll_end_ns);
            } else {
                i += 1;
            }
        }
    }

    /// Adds a post-roll window, merged with those it overlaps; returns the end of the
    /// merged window holding `start_ns`.
    fn add_span(&mut self, start_ns: u64, end_ns: u64) -> u64 {
        let at = self.spans.partition_point(|s| s.start_ns <= start_ns);
        self.spans.insert(at, Span { start_ns, end_ns });
        let mut merged: VecDeque<Span> = VecDeque::with_capacity(self.spans.len());
        for s in self.spans.drain(..) {
            match merged.back_mut() {
                Some(last) if s.start_ns <= last.end_ns => last.end_ns = last.end_ns.max(s.end_ns),
                _ => merged.push_back(s),
            }
        }
        while merged.len() > SPANS_MAX {
            merged.pop_front();
        }
        self.spans = merged;
        self.spans
            .iter()
            .find(|s| s.start_ns <= start_ns && start_ns < s.end_ns)
            .map_or(end_ns, |s| s.end_ns)
    }

    /// Writes the pre-roll, the trigger, the incident marker and the checkpoint; returns
    /// the trigger's seq.
    fn on_trigger(&mut self, msg: EventMsg) -> Result<u64> {
        let Some(incident) = self.incident.clone() else {
            return Ok(0);
        };
        let ts = msg.ts_ns;
        // Taken: no longer pending for the events that follow.
        self.shared.trigger_withdrawn(ts);
        let tier = if self.phase(ts) == Phase::Postroll {
            WrittenTier::Postroll
        } else {
            WrittenTier::Full
        };
        let preroll_start = ts.saturating_sub(incident.preroll_ns);
        let mut preroll_events = 0u64;
        let mut later = VecDeque::new();
        self.ring_min.clear();
        while let Some(entry) = self.ring.pop_front() {
            let t = entry.msg.ts_ns;
            if t > ts {
                // Stamped after the trigger: not its pre-roll.
                later.push_back(entry);
                continue;
            }
            self.ring_bytes -= entry.msg.size_bytes();
            if t >= preroll_start {
                let kind = entry.msg.kind.id;
                self.counts(kind).preroll += 1;
                self.emit_event(entry.msg, WrittenTier::Preroll, 1.0);
                preroll_events += 1;
            }
        }
        for e in &later {
            push_min(&mut self.ring_min, e.msg.ts_ns, e.id);
        }
        self.ring = later;
        let kind = msg.kind.id;
        self.counts(kind).kept += 1;
        self.emit_event(msg, tier, 1.0);
        let trigger_seq = self.flush_out()?.map_or(0, |s| s.0);
        let postroll_end = self.add_span(ts, ts.saturating_add(incident.postroll_ns));
        let marker = IncidentRecord {
            trigger_seq,
            trigger_kind: kind,
            trigger_ts_ns: ts,
            preroll_start_ns: preroll_start,
            postroll_end_ns: postroll_end,
            preroll_events,
        };
        let at = self.stamp(ts);
        self.emit_encoded(codec::INCIDENT, at, &marker);
        // The memory as the log holds it at the trigger: every change made before the
        // trigger was written before it. The memory refuses a `set` that would not fit
        // a record; checked all the same.
        if let Ok(snapshot) = self.snapshot() {
            self.emit_raw(codec::CHECKPOINT, at, &snapshot);
        }
        Ok(trigger_seq)
    }

    fn push_ring(&mut self, msg: EventMsg) {
        let Some(incident) = &self.incident else {
            return;
        };
        let max = usize::try_from(incident.preroll_bytes_max).unwrap_or(usize::MAX);
        self.ring_bytes += msg.size_bytes();
        let id = self.ring_next_id;
        self.ring_next_id += 1;
        push_min(&mut self.ring_min, msg.ts_ns, id);
        self.ring.push_back(RingEntry { msg, id });
        while self.ring_bytes > max {
            if self.ring_pop_front().is_none() {
                break;
            }
        }
    }

    /// Takes the ring's first entry, keeping `ring_bytes` and `ring_min` with it.
    fn ring_pop_front(&mut self) -> Option<RingEntry> {
        let e = self.ring.pop_front()?;
        self.ring_bytes -= e.msg.size_bytes();
        if self.ring_min.front().is_some_and(|&(_, id)| id == e.id) {
            self.ring_min.pop_front();
        }
        Some(e)
    }

    /// Drops every ring event stamped before `horizon_ns`, wherever it is in the ring
    /// (an event may reach the writer behind a later one).
    fn evict_ring_before(&mut self, horizon_ns: u64) {
        while self.ring.front().is_some_and(|e| e.msg.ts_ns < horizon_ns) {
            self.ring_pop_front();
        }
        if self
            .ring_min
            .front()
            .is_none_or(|&(ts, _)| ts >= horizon_ns)
        {
            return;
        }
        // An older one behind the front: rebuild the ring without them (rare: events
        // reach the writer nearly in stamp order).
        let kept: VecDeque<RingEntry> = std::mem::take(&mut self.ring)
            .into_iter()
            .filter(|e| e.msg.ts_ns >= horizon_ns)
            .collect();
        self.ring_min.clear();
        self.ring_bytes = 0;
        for e in &kept {
            self.ring_bytes += e.msg.size_bytes();
            push_min(&mut self.ring_min, e.msg.ts_ns, e.id);
        }
        self.ring = kept;
    }

    /// Drops ring events older than the pre-roll window of an event stamped `now_ns`.
    /// Not while a trigger is pending: an event stamped after that trigger, reaching
    /// the writer first, must not push the trigger's own pre-roll out.
    fn evict_ring(&mut self, now_ns: u64) {
        let Some(incident) = &self.incident else {
            return;
        };
        if self.shared.triggers_pending.load(Ordering::SeqCst) > 0 {
            return;
        }
        let horizon = now_ns.saturating_sub(incident.preroll_ns);
        while self.ring.front().is_some_and(|e| e.msg.ts_ns < horizon) {
            self.ring_pop_front();
        }
    }

    fn summarize(&mut self, msg: &EventMsg, window_ns: u64) {
        let kind = msg.kind.id;
        let start = msg.ts_ns - msg.ts_ns % window_ns;
        // Several windows of a kind may be open at once: one that has ended stays open
        // for SUMMARY_GRACE_NS, so an event stamped before the boundary by one thread but
        // queued behind later events of another still lands in its own window.
        let w = self.windows.entry((kind, start)).or_insert_with(|| Window {
            start_ns: start,
            end_ns: start.saturating_add(window_ns),
            count: 0,
            values: BTreeMap::new(),
        });
        w.count += 1;
        for &(name, v) in &msg.values {
            let s = w.values.entry(name).or_insert(ValueAcc {
                count: 0,
                min: v,
                max: v,
                sum: WideSum::default(),
                last: v,
            });
            s.count += 1;
            s.min = s.min.min(v);
            s.max = s.max.max(v);
            s.sum.add(v);
            s.last = v;
        }
    }

    /// The length of an open window.
    fn window_ns(&self, key: (u32, u64)) -> u64 {
        self.windows
            .get(&key)
            .map_or(0, |w| w.end_ns.saturating_sub(w.start_ns))
    }

    fn close_window(&mut self, key: (u32, u64), at: u64) {
        let Some(w) = self.windows.remove(&key) else {
            return;
        };
        let kind = key.0;
        let record = SummaryRecord {
            kind,
            window_start_ns: w.start_ns,
            window_end_ns: w.end_ns,
            count: w.count,
            values: w
                .values
                .into_iter()
                .map(|(name, a)| ValueStats {
                    name,
                    count: a.count,
                    min: a.min,
                    max: a.max,
                    sum: a.sum.sum(),
                    last: a.last,
                    mean: a.sum.mean(a.count, a.min, a.max),
                })
                .collect(),
        };
        self.emit_encoded(codec::SUMMARY, at, &record);
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
    /// The outer error is the writer's failure; the inner one refuses this commit only.
    fn kb_commit(
        &mut self,
        ts_ns: u64,
        payload: &[u8],
        evidence: &[u64],
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
        self.emit_raw(codec::KB, ts_ns, payload);
        let time_ns = self.last_stamp_ns;
        let seq = self.flush_out()?.unwrap_or(Seq(0));
        // In `Sync` mode an acknowledged commit survives a power cut, like a synced
        // event; otherwise it is at least in the operating system's hands.
        if self.durability == Durability::Sync {
            self.log.sync()?;
        } else {
            self.log.flush()?;
        }
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

    /// Running totals per kind id: restored base, this session's writer outcomes, and
    /// the producers' counts (`seen`, drops at the producer, overflow).
    fn totals(&self) -> Vec<Counters> {
        let producers = self.shared.kinds.producer_counts();
        let len = producers
            .iter()
            .map(|p| p.id as usize + 1)
            .chain([self.base.len(), self.counts.len()])
            .max()
            .unwrap_or(0);
        let mut totals = self.base.clone();
        totals.resize(len, Counters::default());
        for (t, c) in totals.iter_mut().zip(&self.counts) {
            t.add(c);
        }
        for p in producers {
            let t = &mut totals[p.id as usize];
            t.seen += p.dropped + p.overflow + p.sent;
            t.dropped += p.dropped;
            t.overflow += p.overflow;
        }
        totals
    }

    fn stats(&self) -> BTreeMap<String, Counters> {
        nonzero(&self.totals())
            .into_iter()
            .map(|(k, c)| {
                let name = self
                    .shared
                    .names
                    .name(k)
                    .map_or_else(|| format!("#{k}"), |n| n.to_string());
                (name, c)
            })
            .collect()
    }

    /// Writes an accounting record of the kinds whose totals changed since the last one
    /// (none is written when neither they nor the watermark changed, unless `always`:
    /// readers learn of a watermark from these records), after naming every kind
    /// still pending (drop-tier kinds never reach the writer otherwise). The segment
    /// preamble's snapshot becomes the whole of these totals before the record is
    /// appended, so a segment that opens from then on starts from them.
    fn emit_accounting(&mut self, at: u64, always: bool) -> Result<()> {
        let totals = self.totals();
        let changed: Vec<(u32, Counters)> = nonzero(&totals)
            .into_iter()
            .filter(|&(k, c)| self.accounted.get(k as usize) != Some(&c))
            .collect();
        let written_since =
            !self.out.is_empty() || self.log.next_seq().0 != self.accounted_next_seq;
        if changed.is_empty()
            && !always
            && (self.watermark_ns == self.accounted_watermark_ns || !written_since)
        {
            return Ok(());
        }
        let pending = self.shared.names.take_pending();
        if let Some(&(last, _)) = pending.last() {
            self.named_upto = self.named_upto.max(last);
            self.emit_dictionary(pending, at);
        }
        // Everything queued before the record goes first, under the snapshot before it.
        self.flush_out()?;
        self.preamble_accounting = Some(codec::encode_to_vec(&AccountingRecord {
            snapshot: true,
            watermark_ns: self.watermark_ns,
            kinds: nonzero(&totals),
        }));
        self.preamble_stale = true;
        self.emit_encoded(
            codec::ACCOUNTING,
            at,
            &AccountingRecord {
                snapshot: false,
                watermark_ns: self.watermark_ns,
                kinds: changed,
            },
        );
        self.flush_out()?;
        self.accounted = totals;
        self.accounted_watermark_ns = self.watermark_ns;
        self.accounted_next_seq = self.log.next_seq().0;
        Ok(())
    }

    /// Writes the dictionary entries an event needs that are not written yet, right
    /// before it. Names interned after the event's own (by other producers, for later
    /// events) wait for the event that needs them, so where dictionary records fall
    /// depends on the events alone, not on how the writer's batches happen to be cut.
    fn name(&mut self, e: &EventMsg) {
        let need = e
            .values
            .iter()
            .map(|&(id, _)| id)
            .chain([e.kind.id, e.source])
            .max()
            .unwrap_or(0);
        if need <= self.named_upto {
            return;
        }
        let entries = self.shared.names.take_pending_upto(need);
        self.named_upto = need;
        if !entries.is_empty() {
            // Stamped with the event's own time (never before the last stamp): not the
            // clock, which may be ahead of the batch, and not 0 in a new log.
            self.emit_dictionary(entries, e.ts_ns);
        }
    }

    /// Queues a dictionary record; the segment preamble is brought up to date once, by
    /// the next `flush_out`, before anything is appended.
    fn emit_dictionary(&mut self, entries: Vec<(u32, String)>, now: u64) {
        self.emit_encoded(codec::DICTIONARY, now, &DictionaryRecord { entries });
        self.preamble_dictionary.clear();
        self.preamble_stale = true;
    }

    /// Sets the segment preamble: the whole dictionary, then the accounting snapshot,
    /// then the policy in force.
    fn set_preamble(&mut self) -> Result<()> {
        if self.preamble_dictionary.is_empty() {
            self.preamble_dictionary = codec::encode_to_vec(&DictionaryRecord {
                entries: self.shared.names.all(),
            });
        }
        let mut records = vec![(codec::DICTIONARY, self.preamble_dictionary.clone())];
        if let Some(totals) = &self.preamble_accounting {
            records.push((codec::ACCOUNTING, totals.clone()));
        }
        records.push((codec::POLICY, self.policy_toml.clone()));
        self.log.set_segment_preamble(records)?;
        Ok(())
    }

    fn emit_event(&mut self, mut msg: EventMsg, tier: WrittenTier, weight: f64) {
        if tier != WrittenTier::Preroll {
            self.out_kept.push(msg.kind.id);
        }
        let record = EventRecord {
            kind: msg.kind.id,
            source: msg.source,
            event_time_ns: msg.event_time_ns,
            recorded_ns: msg.ts_ns,
            tier: tier as u8,
            weight,
            encoding: msg.encoding as u8,
            payload: std::mem::take(&mut msg.payload),
            values: std::mem::take(&mut msg.values),
        };
        // Encoded straight into the batch buffer, without the padding rkyv archives
        // need: an event record is read with byte copies, at any alignment.
        let at = self.stamp(msg.ts_ns);
        let start = self.arena.len();
        record.encode_with(at, |b| self.arena.extend_from_slice(b));
        self.out
            .push((codec::EVENT, at, start..self.arena.len(), record.kind));
    }

    /// Queues a record encoded straight into the batch buffer, stamped no earlier than
    /// anything before it.
    fn emit_encoded<T: codec::Encode>(&mut self, t: RecordType, ts_ns: u64, value: &T) {
        let at = self.stamp(ts_ns);
        let range = codec::encode_append(value, &mut self.arena);
        self.out.push((t, at, range, 0));
    }

    /// Queues a record, stamped no earlier than anything before it.
    fn emit_raw(&mut self, t: RecordType, ts_ns: u64, bytes: &[u8]) {
        let at = self.stamp(ts_ns);
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        self.out.push((t, at, start..self.arena.len(), 0));
    }

    /// Appends the batch's encoded records; returns the last seq. On an error nothing
    /// is cleared: `fail` counts the kept events among them as lost.
    fn flush_out(&mut self) -> Result<Option<Seq>> {
        if self.out.is_empty() {
            return Ok(None);
        }
        // Before the append: a segment it rolls into must open with every name used.
        if self.preamble_stale {
            self.set_preamble()?;
            self.preamble_stale = false;
        }
        let records: Vec<Record<'_>> = self
            .out
            .iter()
            .map(|(t, ts, range, tag)| {
                Record::new(*t, *ts, &self.arena[range.clone()]).with_tag(*tag)
            })
            .collect();
        let last = self.log.append_batch(&records)?;
        self.dirty = true;
        self.out.clear();
        self.arena.clear();
        self.out_kept.clear();
        Ok(last)
    }
}

/// Answers the events recorded as evidence in a batch: with their seqs once the batch is
/// as durable as the durability mode makes it, or with the failure that stopped it.
fn answer_evidence(evidence: Vec<(Reply<Seq>, Seq)>, durable: std::result::Result<(), &Error>) {
    for (reply, seq) in evidence {
        let _ = reply.send(durable.map(|()| seq).map_err(Error::clone));
    }
}

/// The non-zero counters of `totals` (indexed by kind id), by id.
fn nonzero(totals: &[Counters]) -> Vec<(u32, Counters)> {
    totals
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != Counters::default())
        .map(|(k, c)| (u32::try_from(k).unwrap_or(u32::MAX), *c))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::push_min;

    #[test]
    fn the_sliding_minimum_is_the_oldest_stamp_of_the_window() {
        // The ring's entries arrive in any stamp order and leave from the front; the
        // minimum's front must be the window's smallest stamp, by hand (a scan).
        let mut window: VecDeque<(u64, u64)> = VecDeque::new();
        let mut mins = VecDeque::new();
        let mut x = 12_345u64;
        for id in 0..5_000u64 {
            // A small linear congruential generator: arrival times that wander.
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let ts = 1_000 + id + (x >> 54);
            push_min(&mut mins, ts, id);
            window.push_back((ts, id));
            if (x >> 40).is_multiple_of(3) {
                for _ in 0..((x >> 20) % 4) {
                    if let Some((_, gone)) = window.pop_front()
                        && mins.front().is_some_and(|&(_, m)| m == gone)
                    {
                        mins.pop_front();
                    }
                }
            }
            let by_hand = window.iter().map(|&(t, _)| t).min();
            assert_eq!(mins.front().map(|&(t, _)| t), by_hand, "after {id}");
        }
    }
}
