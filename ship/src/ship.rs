//! One shipping pass: every sealed segment the manifest lacks is uploaded, checked and
//! recorded, one at a time, so that a pass stopped anywhere resumes where it stopped.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use blackbox_log::{LogReader, ReaderOptions, SegmentSummary, link_to_hex};
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, Result};
use crate::manifest::{MANIFEST_BYTES_MAX, Manifest, ShippedSegment};
use crate::remote::Remote;

/// Options of a shipping pass.
#[derive(Debug, Clone)]
pub struct ShipOptions {
    /// A segment at least this large goes up in parts (multipart upload); a smaller one
    /// in one request. Default 16 MiB.
    pub multipart_threshold: u64,
    /// The size of each part of a multipart upload (S3 wants at least 5 MiB but for
    /// the last). Default 8 MiB.
    pub part_bytes: usize,
    /// The chain key of a keyed log, to read its footers with.
    pub key: Option<blackbox_log::ChainKey>,
}

impl Default for ShipOptions {
    fn default() -> Self {
        ShipOptions {
            multipart_threshold: 16 << 20,
            part_bytes: 8 << 20,
            key: None,
        }
    }
}

/// What a pass did with one sealed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Uploaded, checked and added to the manifest.
    Uploaded,
    /// Found in the store, whole and matching (a pass stopped after its upload), and
    /// added to the manifest without uploading it again.
    Adopted,
    /// Already in the manifest: nothing done.
    AlreadyShipped,
}

/// One sealed segment's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentOutcome {
    /// The segment's file name.
    pub name: String,
    /// What was done.
    pub action: Action,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its seqs.
    pub first_seq: u64,
    /// Its last seq.
    pub last_seq: u64,
}

/// What a pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShipReport {
    /// Every sealed segment of the log, in order.
    pub segments: Vec<SegmentOutcome>,
    /// Bytes uploaded in this pass.
    pub bytes_uploaded: u64,
    /// Segments in the manifest after the pass.
    pub shipped_segments: usize,
    /// The last seq in the manifest after the pass.
    pub shipped_through_seq: Option<u64>,
}

impl ShipReport {
    /// Segments of the given action.
    pub fn count(&self, action: Action) -> usize {
        self.segments.iter().filter(|s| s.action == action).count()
    }
}

/// Ships the sealed segments of the log in `dir` to `url` ([`Remote::open`]).
///
/// # Errors
///
/// As [`ship_to`], and [`Error::Url`] for a URL that names no store.
pub fn ship(dir: &Path, url: &str, options: &ShipOptions) -> Result<ShipReport> {
    let remote = Remote::open(url)?;
    ship_to(dir, &remote, options, |_| {})
}

/// Ships the sealed segments of the log in `dir` (never the active, last one) to
/// `remote`, calling `each` as each segment is done.
///
/// For each sealed segment the manifest lacks, in order: its blake3 is computed from
/// the local file; an object already at its place with the same size and blake3 (left
/// by a pass stopped before it recorded it) is adopted; otherwise the file is uploaded
/// (in parts when large) while its bytes are hashed again, the two hashes must agree
/// and the store's size (a `head`) must be the file's; then the manifest is written
/// with the segment added, by a conditional put. A segment is in the manifest only
/// once it is whole in the store; one in the manifest is never uploaded again.
///
/// # Errors
///
/// [`Error::ForeignLog`] when the manifest records another log, or the local log
/// does not continue it (a segment pruned before it was shipped);
/// [`Error::Conflict`] when another shipper wrote the manifest during the pass;
/// [`Error::Mismatch`] when a stored object or the local file is not what it should
/// be; store, log and I/O errors.
pub fn ship_to(
    dir: &Path,
    remote: &Remote,
    options: &ShipOptions,
    mut each: impl FnMut(&SegmentOutcome),
) -> Result<ShipReport> {
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: options.key.clone(),
        },
    )
    .map_err(|source| Error::Log {
        what: format!("cannot read the log in {}", dir.display()),
        source,
    })?;
    let structure = reader.structure().map_err(|source| Error::Log {
        what: format!("cannot read the segments of the log in {}", dir.display()),
        source,
    })?;
    // The last segment is the active one, even when a footer ends it (a writer
    // stopped right after a seal): only a segment another follows is final and durable.
    let sealed: Vec<(PathBuf, ShippedSegment)> = structure
        .iter()
        .take(structure.len().saturating_sub(1))
        .filter_map(describe)
        .collect();
    let rt = runtime()?;
    rt.block_on(async {
        let mut state = read_manifest(remote).await?;
        // With nothing sealed to ship, the active segment alone says whether this is
        // the manifest's log: another log's manifest is refused all the same.
        if sealed.is_empty()
            && let Some(active) = structure.last()
        {
            let start = ShippedSegment {
                name: segment_file_name(active),
                first_seq: active.first_seq,
                prev_link: link_to_hex(&active.prev_link),
                ..ShippedSegment::default()
            };
            check_continues(remote, state.manifest.as_ref(), &start, false)?;
        }
        let mut report = ShipReport::default();
        for (path, local) in &sealed {
            check_continues(remote, state.manifest.as_ref(), local, true)?;
            let action = if state
                .manifest
                .as_ref()
                .is_some_and(|m| m.get(&local.name).is_some())
            {
                Action::AlreadyShipped
            } else {
                let (bytes, hash) = hash_file(path)?;
                let mut entry = local.clone();
                entry.bytes = bytes;
                entry.blake3 = hash.to_hex().to_string();
                let action = if stored_matches(remote, &entry).await? {
                    Action::Adopted
                } else {
                    upload(remote, path, &entry, options).await?;
                    report.bytes_uploaded += entry.bytes;
                    Action::Uploaded
                };
                let mut next = state
                    .manifest
                    .clone()
                    .unwrap_or_else(|| Manifest::new(&entry));
                next.segments.push(entry);
                write_manifest(remote, &mut state, next).await?;
                action
            };
            let outcome = SegmentOutcome {
                name: local.name.clone(),
                action,
                bytes: std::fs::metadata(path).map_or(local.bytes, |m| m.len()),
                first_seq: local.first_seq,
                last_seq: local.last_seq,
            };
            each(&outcome);
            report.segments.push(outcome);
        }
        if let Some(m) = &state.manifest {
            report.shipped_segments = m.segments.len();
            report.shipped_through_seq = m.segments.last().map(|s| s.last_seq);
        }
        Ok(report)
    })
}

/// A sealed segment as the manifest records it, but for its blake3 (computed when it
/// is shipped).
fn describe(s: &SegmentSummary) -> Option<(PathBuf, ShippedSegment)> {
    let sealed = s.sealed?;
    let name = s.path.file_name()?.to_str()?.to_owned();
    Some((
        s.path.clone(),
        ShippedSegment {
            name,
            first_seq: s.first_seq,
            last_seq: sealed.last.seq,
            first_ts_ns: sealed.first_ts_ns,
            last_ts_ns: sealed.last_ts_ns,
            prev_link: link_to_hex(&s.prev_link),
            last_link: link_to_hex(&sealed.last.link),
            bytes: s.len_bytes,
            blake3: String::new(),
        },
    ))
}

/// The file name of a segment (its path's last component).
fn segment_file_name(s: &SegmentSummary) -> String {
    s.path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Checks that the local segment `local` is the manifest's entry of that name, or the
/// one that continues the manifest's chain. Of the active segment (`sealed` false) only
/// the start is known: its name, first seq and `prev_link`.
fn check_continues(
    remote: &Remote,
    manifest: Option<&Manifest>,
    local: &ShippedSegment,
    sealed: bool,
) -> Result<()> {
    let Some(m) = manifest else { return Ok(()) };
    let foreign = |why: String| Error::ForeignLog {
        url: remote.manifest_url(),
        why,
    };
    if let Some(shipped) = m.get(&local.name) {
        // Every log starts at seq 0 from the same link: a segment the manifest holds
        // sealed that is still the local log's active one is another log's.
        if !sealed {
            return Err(foreign(format!(
                "it records segment {} as sealed, with seqs {}..={}, and the local log's segment of that name is its active one, still being written",
                local.name, shipped.first_seq, shipped.last_seq
            )));
        }
        if shipped.first_seq != local.first_seq || shipped.prev_link != local.prev_link {
            return Err(foreign(format!(
                "it records segment {} as starting at seq {} from link {}, and the local segment starts at seq {} from link {}",
                local.name, shipped.first_seq, shipped.prev_link, local.first_seq, local.prev_link
            )));
        }
        if shipped.last_seq != local.last_seq || shipped.last_link != local.last_link {
            return Err(foreign(format!(
                "it records segment {} with seqs {}..={} ending in link {}, and the local segment holds seqs {}..={} ending in link {}",
                local.name,
                shipped.first_seq,
                shipped.last_seq,
                shipped.last_link,
                local.first_seq,
                local.last_seq,
                local.last_link
            )));
        }
        return Ok(());
    }
    let Some(last) = m.segments.last() else {
        return Ok(());
    };
    if local.first_seq <= last.last_seq {
        return Err(foreign(format!(
            "it records seqs up to {} but not the local segment {}, which starts at seq {}",
            last.last_seq, local.name, local.first_seq
        )));
    }
    if last.last_seq.checked_add(1) != Some(local.first_seq) {
        return Err(foreign(format!(
            "it ends at seq {} and the local log's next {}segment, {}, starts at seq {}: the segments between were pruned before they were shipped",
            last.last_seq,
            if sealed { "sealed " } else { "" },
            local.name,
            local.first_seq
        )));
    }
    if local.prev_link != last.last_link {
        return Err(foreign(format!(
            "its last segment {} ends in link {}, and the local segment {} that follows it starts from link {}",
            last.name, last.last_link, local.name, local.prev_link
        )));
    }
    Ok(())
}

/// The manifest as read, with the version to update it from.
pub(crate) struct ManifestState {
    pub(crate) manifest: Option<Manifest>,
    version: Option<UpdateVersion>,
}

/// The manifest of a shipped log, to read the log by: there must be one, listing a
/// segment at least.
pub(crate) async fn shipped_manifest(remote: &Remote) -> Result<Manifest> {
    let Some(manifest) = read_manifest(remote).await?.manifest else {
        return Err(Error::Manifest {
            url: remote.manifest_url(),
            why: "there is none: nothing was shipped there".to_owned(),
        });
    };
    if manifest.segments.is_empty() {
        return Err(Error::Manifest {
            url: remote.manifest_url(),
            why: "it lists no segment".to_owned(),
        });
    }
    Ok(manifest)
}

/// Reads the manifest, if there is one.
pub(crate) async fn read_manifest(remote: &Remote) -> Result<ManifestState> {
    let path = remote.manifest_path();
    let url = remote.manifest_url();
    let got = match remote.store().get(&path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => {
            return Ok(ManifestState {
                manifest: None,
                version: None,
            });
        }
        Err(e) => return Err(remote.error(format!("cannot read manifest {url}"), e)),
    };
    if got.meta.size > MANIFEST_BYTES_MAX {
        return Err(Error::Manifest {
            url,
            why: format!(
                "it is {} bytes, more than the {MANIFEST_BYTES_MAX} a manifest may have",
                got.meta.size
            ),
        });
    }
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let bytes = got
        .bytes()
        .await
        .map_err(|e| remote.error(format!("cannot read manifest {url}"), e))?;
    let manifest = Manifest::parse(&bytes).map_err(|why| Error::Manifest {
        url: url.clone(),
        why,
    })?;
    Ok(ManifestState {
        manifest: Some(manifest),
        version: Some(version),
    })
}

/// Writes `next` as the manifest, only if the manifest is still the one read (or
/// still absent).
async fn write_manifest(remote: &Remote, state: &mut ManifestState, next: Manifest) -> Result<()> {
    let path = remote.manifest_path();
    let url = remote.manifest_url();
    let payload = PutPayload::from(next.to_bytes());
    let mode = match (&state.version, remote.conditional_update()) {
        (None, _) => PutMode::Create,
        (Some(v), true) => PutMode::Update(v.clone()),
        (Some(v), false) => {
            // A store without conditional updates (a directory): check the e-tag, then
            // replace. Another shipper can still race between the two.
            let meta = remote
                .store()
                .head(&path)
                .await
                .map_err(|e| remote.error(format!("cannot read manifest {url}"), e))?;
            if meta.e_tag != v.e_tag {
                return Err(Error::Conflict { url });
            }
            PutMode::Overwrite
        }
    };
    match remote
        .store()
        .put_opts(&path, payload, PutOptions::from(mode))
        .await
    {
        Ok(put) => {
            state.version = Some(UpdateVersion {
                e_tag: put.e_tag,
                version: put.version,
            });
            state.manifest = Some(next);
            Ok(())
        }
        Err(
            object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. },
        ) => Err(Error::Conflict { url }),
        Err(e) => Err(remote.error(format!("cannot write manifest {url}"), e)),
    }
}

/// The length and blake3 of a local file, read in full.
fn hash_file(path: &Path) -> Result<(u64, blake3::Hash)> {
    let io = |source| Error::Io {
        what: "read segment",
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((len, hasher.finalize()))
}

/// Whether the store already holds `entry`'s object whole: the same size and blake3
/// (read back in full: this happens only after a pass stopped between an upload and
/// the manifest's update).
async fn stored_matches(remote: &Remote, entry: &ShippedSegment) -> Result<bool> {
    let path = remote.segment_path(&entry.name);
    let url = remote.segment_url(&entry.name);
    let meta = match remote.store().head(&path).await {
        Ok(meta) => meta,
        Err(object_store::Error::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(remote.error(format!("cannot look up {url}"), e)),
    };
    if meta.size != entry.bytes {
        return Ok(false);
    }
    let hash = crate::verify::hash_object(remote, &entry.name, None).await?;
    Ok(hash.to_hex().as_str() == entry.blake3)
}

/// Uploads the segment file at `path`, hashing the bytes as they go, and checks the
/// hash against `entry.blake3` and the stored size against `entry.bytes`.
async fn upload(
    remote: &Remote,
    path: &Path,
    entry: &ShippedSegment,
    options: &ShipOptions,
) -> Result<()> {
    let object = remote.segment_path(&entry.name);
    let url = remote.segment_url(&entry.name);
    crate::upload::put_file(
        remote,
        &object,
        &url,
        path,
        (options.multipart_threshold, options.part_bytes),
        &|sent, hasher| check_sent(entry, sent, hasher),
    )
    .await?;
    let meta = remote
        .store()
        .head(&object)
        .await
        .map_err(|e| remote.error(format!("cannot check the upload of {url}"), e))?;
    if meta.size != entry.bytes {
        return Err(Error::Mismatch {
            segment: entry.name.clone(),
            why: format!(
                "the store holds {} bytes at {url} after its upload, and the file has {}",
                meta.size, entry.bytes
            ),
        });
    }
    Ok(())
}

/// Checks that the bytes sent are the file as first hashed.
fn check_sent(entry: &ShippedSegment, sent: u64, hasher: &blake3::Hasher) -> Result<()> {
    if sent != entry.bytes || hasher.finalize().to_hex().as_str() != entry.blake3 {
        return Err(Error::Mismatch {
            segment: entry.name.clone(),
            why: format!(
                "the file changed while it was shipped ({} bytes and blake3 {} when first read, {sent} bytes and blake3 {} when uploaded); a sealed segment must not change",
                entry.bytes,
                entry.blake3,
                hasher.finalize().to_hex()
            ),
        });
    }
    Ok(())
}

/// A runtime on this thread for the store's requests.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "start the I/O runtime for",
            path: PathBuf::from("the object store"),
            source,
        })
}
