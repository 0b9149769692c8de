//! The model-based target: the log, the recorder and its knowledge base run a sequence
//! of operations side by side with a reference model, and after every step what they
//! show must be what the model holds.
//!
//! The fuzzer's first byte picks the layer: the log alone ([`log_run`]: records and
//! batches, flushes, syncs, crash images, reopens, range reads, pins and prunings), or
//! the recorder ([`recorder_run`]: events of several kinds, working memory, crash
//! images, reopens, knowledge-base writes and as-of reads, `state_at`, a disk budget).
//! The rest of the bytes are read as operations ([`ops`]) through
//! `arbitrary::Unstructured`; a run stops after [`OPS_MAX`] operations or when the
//! bytes run out. The models ([`reference`], and the knowledge base's adjudication from
//! `kb/tests/reference`, written from docs/ARCHITECTURE.md) share no code with the
//! crates; [`checks`] compares the two, and [`crash`] builds the image a power loss
//! leaves.

// The knowledge base's adjudication as docs/ARCHITECTURE.md states it, shared with the
// knowledge base's own model tests: it names the crate `kb` at its including module.
#[path = "../../../kb/tests/reference/mod.rs"]
mod adjudication;
mod checks;
mod crash;
mod kb_model;
mod log_run;
mod ops;
mod recorder_run;
mod reference;

use std::fmt::Display;

use blackbox::kb;
use std::path::Path;

/// Most operations one input runs: keeps a run short.
pub const OPS_MAX: usize = 64;

/// Runs the operations the bytes describe against the crates and the model; panics at
/// the first difference.
pub fn model(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(mode) = u.arbitrary::<u8>() else {
        return;
    };
    let root = scratch();
    if mode % 8 == 0 {
        recorder_run::run(root.path(), &mut u);
    } else {
        log_run::run(root.path(), &mut u);
    }
}

/// A fresh directory for one run: in /dev/shm when it is there (no disk writes, fast
/// fsyncs), else in the system's temporary directory.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let made = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("bbx-model-")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("bbx-model-").tempdir()
    };
    made.unwrap_or_else(|e| panic!("cannot make a scratch directory: {e}"))
}

/// Whether to print each operation as it runs (`BBX_MODEL_TRACE=1`), to read what an
/// input that fails does.
fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("BBX_MODEL_TRACE").is_some())
}

/// The value of `r`, or a panic that says what failed.
fn ok<T, E: Display>(r: Result<T, E>, what: impl Display) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}
