//! What producers and the writer thread share: the messages that cross the channel
//! between them, and the state both sides read ([`Shared`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use blackbox_kb::{Appended, SinkError};
use blackbox_log::Seq;
use crossbeam_channel::Sender;
use parking_lot::Mutex;

use crate::clock::{Clock, Floored};
use crate::codec::{self, Counters};
use crate::error::{Error, Result};
use crate::names::{Interner, KindInfo, Kinds};
use crate::policy::Policy;
use crate::working::WorkingMemory;

/// An event on its way to the writer.
#[derive(Debug)]
pub(crate) struct EventMsg {
    pub(crate) kind: Arc<KindInfo>,
    pub(crate) ts_ns: u64,
    /// Where it is counted in `Shared::stamped`: the parity of its generation.
    pub(crate) generation: usize,
    /// The event record as the producer encoded it (held inline when small: a heap
    /// buffer allocated by a producer and freed by the writer takes the allocator's
    /// slow path on both sides, which was a third of the cost of a kept event).
    pub(crate) record: codec::PendingEvent,
    /// Its payload plus `VALUE_BYTES` per value, as checked against `event_bytes_max`.
    pub(crate) size_bytes: usize,
}

impl EventMsg {
    /// What the event counts for in the pre-roll ring's bytes.
    pub(crate) fn size_bytes(&self) -> usize {
        64 + self.size_bytes
    }
}

pub(crate) type Reply<T> = Sender<Result<T>>;

#[derive(Debug)]
pub(crate) enum Msg {
    Event(EventMsg),
    /// A checkpoint, stamped with the time the caller asked for it.
    Checkpoint {
        ts_ns: u64,
        reply: Reply<Seq>,
    },
    Sync(Reply<Option<Seq>>),
    /// Releases the pin of the incident whose trigger has this seq; answered with
    /// whether it was pinned.
    Release(u64, Reply<bool>),
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
        /// A snapshot of the knowledge base rather than a commit.
        snapshot: bool,
        reply: Sender<Result<Appended, SinkError>>,
    },
}

/// State shared by producers and the writer.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) policy: Policy,
    /// The configured clock read through the stamp floor: every stamp comes from here.
    pub(crate) clock: Arc<Floored>,
    pub(crate) names: Interner,
    pub(crate) kinds: Kinds,
    pub(crate) working: Arc<WorkingMemory>,
    /// The end of the post-roll producers know of (recorder time, ns): 0 when none is
    /// open, `TRIGGER_PENDING` while a trigger is being stamped. Drop-tier producers
    /// take their fast path only at 0.
    pub(crate) postroll_until_ns: AtomicU64,
    /// Triggers recorded and not yet taken by the writer, so that it can tell an event
    /// stamped after one of them, which reached it first, to be post-roll.
    pub(crate) triggers: Mutex<Vec<PendingTrigger>>,
    /// `triggers.len()`, read by the writer without the lock.
    pub(crate) triggers_pending: AtomicUsize,
    /// Set with `failure` when the writer stops on an error.
    pub(crate) failed: AtomicBool,
    pub(crate) failure: Mutex<Option<Arc<blackbox_log::Error>>>,
    pub(crate) closed: AtomicBool,
    /// The writer thread, to wake it from its poll when a caller waits for a reply.
    pub(crate) writer: OnceLock<std::thread::Thread>,
    /// Events this session that producers are about to stamp or have stamped for the
    /// writer, less those that will never reach it (dropped after the stamp, refused,
    /// lost to overflow), by the parity of the generation they were counted in.
    /// Counted before the clock is read: once the count of a generation the writer
    /// closed equals what it received of it, every event stamped before the clock
    /// reading it closed that generation with has reached it (the watermark,
    /// [`Writer::advance_watermark`]).
    pub(crate) stamped: [AtomicU64; 2],
    /// The generation producers count into; only the writer moves it on.
    pub(crate) generation: AtomicU64,
    /// The log wants a fresh knowledge-base snapshot: the writer sets it when the
    /// commits it carries since the last snapshot pass their bound (or there is none),
    /// the knowledge base reads it after each commit ([`blackbox_kb::Sink::snapshot_due`]).
    pub(crate) kb_snapshot_due: AtomicBool,
}

/// A trigger a producer stamped, until the writer takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingTrigger {
    pub(crate) ts_ns: u64,
    pub(crate) postroll_end_ns: u64,
    /// Lost to overflow: the writer opens its post-roll all the same.
    pub(crate) lost: bool,
}

/// `Shared::postroll_until_ns` while a trigger is being stamped.
pub(crate) const TRIGGER_PENDING: u64 = u64::MAX;

impl Shared {
    /// Wakes a polling writer at once. Only calls that wait for the writer's answer do
    /// this: `record()` leaves the writer to its poll, so a producer pays no wake-up.
    pub(crate) fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }

    pub(crate) fn failure(&self) -> Error {
        match &*self.failure.lock() {
            Some(e) => Error::Writer(Arc::clone(e)),
            None => Error::Closed,
        }
    }

    /// Whether the recorder accepts no more events (closed, or its writer failed).
    pub(crate) fn stopped(&self) -> bool {
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
    pub(crate) fn count_stamp(&self) -> usize {
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
    pub(crate) fn uncount(&self, generation: usize) {
        self.stamped[generation].fetch_sub(1, Ordering::SeqCst);
    }

    /// Stamps a trigger and opens its post-roll; returns its stamp.
    ///
    /// IMPORTANT: the post-roll is marked pending and the trigger counted before the
    /// clock is read, and the trigger is listed before the lock is released: any event
    /// stamped after this trigger then finds it, in `postroll_until_ns` (a drop-tier
    /// producer) or in `triggers` (the writer, if that event reaches it first).
    pub(crate) fn publish_trigger(&self, postroll_ns: u64) -> u64 {
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
    pub(crate) fn trigger_lost(&self, ts_ns: u64) {
        let mut triggers = self.triggers.lock();
        if let Some(t) = triggers.iter_mut().find(|t| t.ts_ns == ts_ns && !t.lost) {
            t.lost = true;
        }
    }

    /// Forgets a trigger that was refused before it was sent.
    pub(crate) fn trigger_withdrawn(&self, ts_ns: u64) {
        let mut triggers = self.triggers.lock();
        if let Some(i) = triggers.iter().position(|t| t.ts_ns == ts_ns && !t.lost) {
            triggers.swap_remove(i);
            self.triggers_pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// What a numeric value counts for against `event_bytes_max` (its name is interned).
pub(crate) const VALUE_BYTES: usize = 16;
