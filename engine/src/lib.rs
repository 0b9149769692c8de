//! Blackbox: a flight recorder for robots and AI agents.
//!
//! A [`Recorder`] sits between a robot's or an agent's runtime and its flight log
//! ([`blackbox_log`]). Producers on any thread call [`Recorder::record`]; one writer
//! thread owns the log, batches, encodes and group-commits.
//!
//! # Main types
//!
//! - [`Recorder`]: `open`, `record`, `working`, `checkpoint`, `sync`, `stats`, `close`.
//! - [`Event`]: a kind (dotted name), an optional source, event time, payload (JSON or
//!   raw) and numeric values.
//! - [`Policy`]: which tier each kind gets, first matching glob wins: `full` (every
//!   event), `sample` (1 in N or a rate, the kept record carrying its weight), `summary`
//!   (one record per window with count, min, max, mean, sum and last of each value) or
//!   `drop`; and incident capture (pre-roll and post-roll around trigger kinds).
//! - [`Counters`]: per-kind accounting, `seen = kept + sampled_out + summarized +
//!   dropped + overflow + lost` once every recorded event reached the writer, written
//!   to the log (the kinds that changed) every few seconds and on close.
//! - [`WorkingMemory`]: the volatile decision window: every change reaches the log as a
//!   delta record ([`WorkingDelta`]) in its place among the events, and checkpoints
//!   hold it whole.
//! - [`codec`]: the records the recorder writes, read back in place with rkyv.
//!
//! # Example
//!
//! ```
//! use blackbox::{Config, Event, Policy, Recorder, Tier};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let policy = Policy::builder()
//!     .rule("debug.*", Tier::Drop)
//!     .rule("sensor.*", Tier::Summary { window_ns: 1_000_000_000 })
//!     .build()?;
//! let recorder = Recorder::open(dir.path(), Config::new().policy(policy))?;
//!
//! recorder.record(&Event::new("sensor.imu").values(&[("ax", 0.1)]))?;
//! recorder.record(&Event::new("debug.tick"))?;
//! recorder.record(&Event::new("action.grasp").json(r#"{"object":"cup"}"#))?;
//! recorder.working().set("goal", serde_json::json!("cup"))?;
//! recorder.checkpoint()?;
//!
//! let stats = recorder.stats()?;
//! assert_eq!(stats["debug.tick"].dropped, 1);
//! assert_eq!(stats["action.grasp"].kept, 1);
//! recorder.close()?;
//! # Ok(())
//! # }
//! ```

mod clock;
pub mod codec;
mod config;
mod delta;
mod error;
mod event;
mod names;
pub mod policy;
mod recorder;
mod restore;
mod shared;
#[cfg(feature = "ship")]
mod ship;
mod sum;
mod working;
mod writer;

pub use blackbox_kb as kb;
pub use blackbox_kb::{AsOf, Conditions, Fact, KnowledgeBase, Outcome, Provenance, Status};
pub use blackbox_log::{
    self as log, ChainKey, Digest, Durability, LogOptions, LogReader, LogRecord, Recovery, Seq,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use codec::Counters;
pub use config::{Config, Overflow};
pub use delta::WorkingDelta;
pub use error::{Error, Result};
pub use event::Event;
pub use names::{
    DictionaryFold, NAMES_PER_LOG_MAX, NameLimitError, VALUES_PER_EVENT_MAX, dictionary_start,
};
pub use policy::{IncidentPolicy, Policy, Sampling, Tier};
pub use recorder::{KB_DIR, Recorder};
#[cfg(feature = "ship")]
pub use ship::{Ship, ShipStatus};
pub use working::{CHANGE_BYTES as WORKING_CHANGE_BYTES, DELTA_OVERHEAD_BYTES, WorkingMemory};
pub use writer::{RELEASE_DIR, SUMMARY_GRACE_NS};

// The recorder is shared by the threads of a runtime: it must stay `Send + Sync`.
const _: fn() = || {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Recorder>();
    assert_send_sync::<WorkingMemory>();
};
