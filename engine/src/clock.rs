//! Where the recorder's timestamps come from.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of time in nanoseconds since the Unix epoch (UTC).
///
/// The recorder never lets its timestamps decrease, whatever the clock does: the writer
/// stamps each record with the larger of the clock's reading and the previous stamp.
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
