//! The image a power loss leaves: of every segment file, the bytes an fsync covered
//! (as `FaultyStorage` tracked them) and a torn prefix of the rest, the rest gone.
//!
//! The image is taken while the writer still runs (the files are read, not cut), and
//! put in place once it is gone: whatever the writer does on its way out (a `Log`
//! dropped writes its buffer, a recorder dropped closes) never reaches the image.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use blackbox_log::storage::FaultyStorage;

use super::ok;

/// The surviving bytes of each segment file, taken at one moment.
#[derive(Debug)]
pub struct Image {
    files: Vec<(PathBuf, Vec<u8>, u32)>,
}

/// The segments a writer found when it opened, with their lengths: on disk before it
/// started, so durable (the storage tracks only the files the writer writes).
pub type Baseline = HashMap<PathBuf, u64>;

/// The lengths of the segments in `dir`, taken right after a writer opened it.
pub fn baseline(dir: &Path) -> Baseline {
    segment_files(dir)
        .into_iter()
        .map(|p| {
            let len = ok(fs::metadata(&p), format_args!("stat {}", p.display())).len();
            (p, len)
        })
        .collect()
}

/// Takes the image of the segments in `dir`: each keeps its durable bytes and `keep`
/// more of those written after them (a torn write), never more than the file holds.
pub fn take(dir: &Path, storage: &FaultyStorage, baseline: &Baseline, keep: u64) -> Image {
    let mut files = Vec::new();
    for path in segment_files(dir) {
        let durable = storage
            .durable_len(&path)
            .max(baseline.get(&path).copied().unwrap_or(0));
        let mut bytes = Vec::new();
        let file = ok(
            fs::File::open(&path),
            format_args!("open {}", path.display()),
        );
        let cut = durable.saturating_add(keep);
        ok(
            file.take(cut).read_to_end(&mut bytes),
            format_args!("read {}", path.display()),
        );
        // A file's durable length never passes what it holds.
        assert!(
            bytes.len() as u64 >= durable.min(cut),
            "{}: {} bytes durable, {} on disk",
            path.display(),
            durable,
            bytes.len()
        );
        let mode = ok(fs::metadata(&path), format_args!("stat {}", path.display()))
            .permissions()
            .mode();
        files.push((path, bytes, mode));
    }
    Image { files }
}

/// Replaces the segments of `dir` by the image (the writer must be gone).
pub fn put(dir: &Path, image: Image) {
    for path in segment_files(dir) {
        ok(
            fs::remove_file(&path),
            format_args!("remove {}", path.display()),
        );
    }
    for (path, bytes, mode) in image.files {
        ok(
            fs::write(&path, &bytes),
            format_args!("write {}", path.display()),
        );
        ok(
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o777)),
            format_args!("chmod {}", path.display()),
        );
    }
}

/// The segment files (`*.bbx`) of `dir`.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let entries = ok(fs::read_dir(dir), format_args!("list {}", dir.display()));
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bbx"))
        .collect();
    out.sort();
    out
}
