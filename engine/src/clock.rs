//! Where the recorder's timestamps come from.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of time in nanoseconds since the Unix epoch (UTC).
///
/// The recorder never lets its timestamps decrease, whatever the clock does: the writer
/// stamps each record with the larger of the clock's reading and the previous stamp,
/// and an event is never stamped below a watermark the recorder may have written (the
/// recorder reads its clock through a floor, see `Floored`).
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time, ns since the Unix epoch.
    fn now_ns(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to: for tests and simulations.
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now_ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start_ns`.
    pub fn new(start_ns: u64) -> ManualClock {
        ManualClock {
            now_ns: Arc::new(AtomicU64::new(start_ns)),
        }
    }

    /// Sets the time.
    pub fn set_ns(&self, now_ns: u64) {
        self.now_ns.store(now_ns, Ordering::SeqCst);
    }

    /// Moves the time forward by `delta_ns`.
    pub fn advance_ns(&self, delta_ns: u64) {
        self.now_ns.fetch_add(delta_ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }
}

/// The recorder's clock: the configured one, never read below a floor. The writer raises
/// the floor to each clock reading it may publish as a watermark, before it counts the
/// events stamped before that reading; on open, the floor starts at the log's last stamp
/// and its last watermark. So when the clock steps back, within a session or across a
/// restart, events are stamped at the floor instead of below a watermark already
/// written, where a read bounded by that watermark would not look for them.
#[derive(Debug)]
pub(crate) struct Floored {
    clock: Arc<dyn Clock>,
    floor_ns: AtomicU64,
}

impl Floored {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Floored {
        Floored {
            clock,
            floor_ns: AtomicU64::new(0),
        }
    }

    /// Raises the floor to `ns` (never lowers it).
    pub(crate) fn raise_floor(&self, ns: u64) {
        self.floor_ns.fetch_max(ns, Ordering::SeqCst);
    }
}

impl Clock for Floored {
    fn now_ns(&self) -> u64 {
        // IMPORTANT: the floor is read after whatever the caller counted before reading
        // the time (see `Writer::advance_watermark`). Before the clock: a thread
        // preempted between the two readings then keeps the time its clock gave.
        let floor_ns = self.floor_ns.load(Ordering::SeqCst);
        self.clock.now_ns().max(floor_ns)
    }
}
