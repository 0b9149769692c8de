//! Remote verification: the manifest, every shipped object's blake3 against it, then
//! the log's own `verify` over the downloaded segments (the chain across all of them).

use std::fs::File;
use std::io::Write;

use blackbox_log::{ChainKey, Digest, LogReader, VerifyReport, link_to_hex};
use futures::StreamExt;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::remote::Remote;
use crate::ship::{runtime, shipped_manifest};

/// What a remote verification found: the log's own report over the shipped segments,
/// and the manifest it checked them against.
#[derive(Debug, Clone)]
pub struct RemoteVerifyReport {
    /// The log's verification of the downloaded segments.
    pub log: VerifyReport,
    /// The manifest.
    pub manifest: Manifest,
    /// Bytes downloaded.
    pub bytes: u64,
}

/// Verifies the log shipped to `url` ([`Remote::open_existing`]).
///
/// # Errors
///
/// As [`verify_remote`], and [`Error::Url`].
pub fn verify_url(
    url: &str,
    key: Option<&ChainKey>,
    digest: Option<&Digest>,
) -> Result<RemoteVerifyReport> {
    verify_remote(&Remote::open_existing(url)?, key, digest)
}

/// Verifies the log shipped to `remote`: reads the manifest (which must start the log
/// where its identity says and continue from segment to segment), downloads every
/// segment it lists into a private temporary directory while hashing it, requires each
/// object's size and blake3 to be the manifest's, then runs the log's own verify over
/// them (every checksum and the chain across all shipped segments, and `digest` when
/// given) and checks each segment's footer against its manifest entry.
///
/// # Errors
///
/// [`Error::Manifest`] when there is no manifest or it contradicts itself (a removed
/// entry leaves a gap); [`Error::Mismatch`] naming the segment whose object is
/// missing, of another size or another blake3, or whose footer differs from its
/// entry; [`Error::Verify`] when the log's verify fails, naming the segment's object.
pub fn verify_remote(
    remote: &Remote,
    key: Option<&ChainKey>,
    digest: Option<&Digest>,
) -> Result<RemoteVerifyReport> {
    let rt = runtime()?;
    let temp = tempfile::Builder::new()
        .prefix("blackbox-verify-")
        .tempdir()
        .map_err(|source| Error::Io {
            what: "create a temporary directory in",
            path: std::env::temp_dir(),
            source,
        })?;
    let manifest = rt.block_on(async {
        let manifest = shipped_manifest(remote).await?;
        for s in &manifest.segments {
            let path = temp.path().join(&s.name);
            let mut file = File::create(&path).map_err(|source| Error::Io {
                what: "create",
                path: path.clone(),
                source,
            })?;
            let (len, hash) = download(remote, &s.name, &mut file).await?;
            if len != s.bytes || hash.to_hex().as_str() != s.blake3 {
                return Err(Error::Mismatch {
                    segment: s.name.clone(),
                    why: format!(
                        "the object {} holds {len} bytes with blake3 {}, and the manifest says {} bytes with blake3 {}: it was changed after it was shipped",
                        remote.segment_url(&s.name),
                        hash.to_hex(),
                        s.bytes,
                        s.blake3
                    ),
                });
            }
        }
        Ok(manifest)
    })?;
    let bytes = manifest.segments.iter().map(|s| s.bytes).sum();
    let shown = |e: &dyn std::fmt::Display| {
        e.to_string()
            .replace(
                &format!("{}/", temp.path().display()),
                &format!("{}/segments/", remote.url()),
            )
            .replace(
                &temp.path().display().to_string(),
                &format!("{}/segments", remote.url()),
            )
    };
    let log = blackbox_log::verify(temp.path(), key, digest).map_err(|e| Error::Verify {
        url: remote.url().to_owned(),
        why: shown(&e),
    })?;
    // The footers the log's verify checked against the blocks must be the entries the
    // manifest lists.
    let structure = LogReader::open(temp.path())
        .and_then(|r| r.structure())
        .map_err(|e| Error::Verify {
            url: remote.url().to_owned(),
            why: shown(&e),
        })?;
    for (entry, seg) in manifest.segments.iter().zip(&structure) {
        let ok = seg.sealed.is_some_and(|f| {
            f.last.seq == entry.last_seq
                && link_to_hex(&f.last.link) == entry.last_link
                && f.first_ts_ns == entry.first_ts_ns
                && f.last_ts_ns == entry.last_ts_ns
        }) && seg.first_seq == entry.first_seq
            && link_to_hex(&seg.prev_link) == entry.prev_link;
        if !ok {
            return Err(Error::Mismatch {
                segment: entry.name.clone(),
                why: format!(
                    "its footer or header in {} differs from its entry in the manifest",
                    remote.segment_url(&entry.name)
                ),
            });
        }
    }
    Ok(RemoteVerifyReport {
        log,
        manifest,
        bytes,
    })
}

/// Streams segment `name`'s object into `sink`, returning its length and blake3.
async fn download(remote: &Remote, name: &str, sink: &mut File) -> Result<(u64, blake3::Hash)> {
    let mut len = 0;
    let hash = hash_object_into(remote, name, Some(sink), &mut len).await?;
    Ok((len, hash))
}

/// The blake3 of segment `name`'s object, streamed (and written to `sink` if given).
pub(crate) async fn hash_object(
    remote: &Remote,
    name: &str,
    sink: Option<&mut File>,
) -> Result<blake3::Hash> {
    let mut len = 0;
    hash_object_into(remote, name, sink, &mut len).await
}

async fn hash_object_into(
    remote: &Remote,
    name: &str,
    mut sink: Option<&mut File>,
    len: &mut u64,
) -> Result<blake3::Hash> {
    let url = remote.segment_url(name);
    let got = match remote.store().get(&remote.segment_path(name)).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(Error::Mismatch {
                segment: name.to_owned(),
                why: format!("the manifest lists it but the store has no object {url}"),
            });
        }
        Err(e) => return Err(remote.error(format!("cannot download {url}"), e)),
    };
    let mut stream = got.into_stream();
    let mut hasher = blake3::Hasher::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| remote.error(format!("cannot download {url}"), e))?;
        hasher.update(&chunk);
        *len += chunk.len() as u64;
        if let Some(file) = sink.as_deref_mut() {
            file.write_all(&chunk).map_err(|source| Error::Io {
                what: "write the download of",
                path: url.clone().into(),
                source,
            })?;
        }
    }
    Ok(hasher.finalize())
}
