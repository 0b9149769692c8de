//! The recorder's options: [`Config`] and its builder, and the [`Overflow`] policy.

use std::sync::Arc;

use blackbox_log::{Durability, LogOptions};

use crate::clock::{Clock, SystemClock};
use crate::policy::Policy;

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
    pub(crate) log: LogOptions,
    pub(crate) durability: Durability,
    pub(crate) policy: Policy,
    pub(crate) overflow: Overflow,
    pub(crate) channel_capacity: usize,
    pub(crate) batch_records_max: usize,
    pub(crate) accounting_interval_ns: u64,
    pub(crate) checkpoint_interval_ns: Option<u64>,
    pub(crate) restore_working_memory: bool,
    pub(crate) event_bytes_max: usize,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) kb_half_life_ns: u64,
    pub(crate) working_queue_bytes_max: usize,
    pub(crate) retention: Option<blackbox_log::Retention>,
    #[cfg(feature = "ship")]
    pub(crate) ship: Option<crate::ship::Ship>,
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
            retention: None,
            #[cfg(feature = "ship")]
            ship: None,
        }
    }
}

impl Config {
    /// Defaults: everything `full`, `Flush` durability, `Block` on overflow, accounting
    /// every 5 s, a working-memory checkpoint every 60 s, 1 MiB payloads at most.
    pub fn new() -> Config {
        Config::default()
    }

    /// Options of the log underneath (segment size, chain key, compression, ...). Its
    /// durability is ignored: set it with [`Config::durability`]. A policy with a
    /// `[log]` section ([`Policy::compression`]) sets the compression instead.
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

    /// Bounds the log's disk: after every seal the log removes its oldest segments over
    /// the budget, keeping incident windows within `pinned_max_bytes`
    /// (`blackbox_log::Retention`). Overrides the policy's `[retention]`; without
    /// either the log grows without bound.
    #[must_use]
    pub fn retention(mut self, retention: blackbox_log::Retention) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Ships each segment, once sealed, to object storage from a thread of its own
    /// (feature `ship`; `blackbox ship` does the same from the command line): the
    /// segment, checked, and the shipping manifest beside it. A pass that fails is
    /// retried after the interval; [`Recorder::ship_status`](crate::Recorder::ship_status)
    /// says how far it got. Under a disk budget, the log prunes only shipped segments
    /// unless [`Ship::prune_after_shipped`](crate::Ship::prune_after_shipped) says
    /// otherwise.
    #[cfg(feature = "ship")]
    #[must_use]
    pub fn ship(mut self, ship: crate::ship::Ship) -> Self {
        self.ship = Some(ship);
        self
    }
}
