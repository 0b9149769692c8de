//! Blackbox's knowledge base: versioned facts with provenance, adjudicated by evidence,
//! rolled back by appending.
//!
//! Every write is a commit: a dense version, an author, a message, the seqs of the log
//! records that justify it, and the new state of every key it changed. Commits are
//! records of the flight log (type [`KB_RECORD`]), appended through a [`Sink`] (the
//! recorder's writer): the log is the truth. A fjall database is the materialized
//! [`View`] that makes current and as-of reads fast; it catches up from the log when it
//! opens and can be dropped and rebuilt from it at any time. Snapshots of the whole
//! knowledge base (type [`KB_SNAPSHOT_RECORD`]) are records of the log too, so a log
//! pruned at its front still rebuilds it, with its history complete from the
//! snapshot's version ([`View::history_from`]).
//!
//! Conflicts are adjudicated, not settled by the last writer: see [`adjudicate`] and
//! `docs/ARCHITECTURE.md` for the rule and its constants.
//!
//! Most users reach this crate through `blackbox::Recorder::kb`.

mod base;
mod error;
mod model;
mod view;

pub mod adjudicate;

pub use base::{
    Appended, KEY_BYTES_MAX, KnowledgeBase, Options, Sink, SinkError, validate_confidence,
    validate_key,
};
pub use error::{Error, Result};
pub use model::{
    AsOf, Change, Commit, CommitRecord, Committed, Conditions, Difference, Fact, KeyLetGo, LetGo,
    Op, Outcome, Provenance, Rejection, Rival, SnapshotRecord, Status, Version,
};
pub use view::{
    DumpEntry, KB_CARRIED_RECORD, KB_RECORD, KB_SNAPSHOT_RECORD, View, decode_carried,
    decode_commit, decode_snapshot,
};
