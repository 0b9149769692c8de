//! The bodies of Blackbox's fuzz targets, one function per target.
//!
//! Each `fuzz_targets/NAME.rs` is a one-line cargo-fuzz target that calls [`NAME`] with
//! the fuzzer's bytes; `tests/corpora.rs` calls the same function on every file of
//! `corpus/NAME/` and `regressions/NAME/`, so a plain `cargo test` replays the seed
//! corpora and every input a campaign found, without a nightly toolchain or libFuzzer.
//! A target fails by panicking: each checks properties of what it decodes (a value
//! accepted reads back the same, errors name what and where), not only that nothing
//! panics.

mod arb;
pub mod forge;
mod kb_commit;
mod log_block;
mod log_directory;
mod model;
mod policy;
mod reading;
mod record_line;
mod recorder_records;
mod segment_open;

pub use kb_commit::kb_commit;
pub use log_block::log_block;
pub use log_directory::log_directory;
pub use model::model;
pub use policy::policy_toml;
pub use record_line::record_line;
pub use recorder_records::recorder_records;
pub use segment_open::segment_open;

/// A target's body: it panics when the bytes break a property it checks.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz_targets/` file and corpus directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("policy_toml", policy_toml),
    ("log_block", log_block),
    ("segment_open", segment_open),
    ("log_directory", log_directory),
    ("recorder_records", recorder_records),
    ("kb_commit", kb_commit),
    ("record_line", record_line),
    ("model", model),
];
