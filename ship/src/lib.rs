//! Blackbox's shipping: the sealed segments of a flight log to object storage (S3 or
//! an S3-compatible store, or a directory), with a manifest beside them that says which
//! segments of which log are there and their blake3; and remote verification of what
//! was shipped.
//!
//! ```text
//! <url>/manifest.json            the shipping manifest (docs/FORMAT.md)
//! <url>/segments/<segment name>  each sealed segment, byte for byte
//! ```
//!
//! - [`ship`] / [`ship_to`]: one pass; resumable at any point, never uploading a
//!   segment the manifest holds, never recording one that is not whole in the store.
//! - [`verify_url`] / [`verify_remote`]: the manifest, each object's blake3, then the
//!   log's own verify over the shipped segments (the chain across all of them).
//! - [`RemoteLog`] / [`install_url_reader`]: a shipped log read where it lies, by range
//!   requests, so that every read command takes its URL as `--dir`.
//! - [`list_fleet`] / [`verify_fleet`]: the logs of a fleet, one per prefix under the
//!   fleet's (`<fleet>/<robot>/manifest.json`), verified side by side.
//! - [`put_in_lake`]: an export's files put under a prefix shared by many logs' exports,
//!   never replacing an object there.
//!
//! The API is synchronous: each call runs the store's requests on a runtime of its own
//! on the calling thread.

mod error;
mod fleet;
mod lake;
mod manifest;
mod read;
mod remote;
mod ship;
mod upload;
mod verify;

pub use error::{Error, Result};
pub use fleet::{FleetLog, list_fleet, verify_fleet};
pub use lake::{LakeFile, LakeReport, lake_listing, lake_read, lake_remove, put_in_lake};
pub use manifest::{
    LogIdentity, MANIFEST_BYTES_MAX, MANIFEST_FORMAT, MANIFEST_VERSION, Manifest, ShippedSegment,
    segment_name,
};
pub use read::{PAGE_BYTES, RemoteLog, install_url_reader, opened_remote_log};
pub use remote::Remote;
pub use ship::{Action, SegmentOutcome, ShipOptions, ShipReport, ship, ship_to};
pub use verify::{RemoteVerifyReport, verify_remote, verify_url};

/// Whether `dir` names an object-store URL rather than a local directory.
pub fn is_url(dir: &str) -> bool {
    dir.starts_with("s3://") || dir.starts_with("file://")
}
