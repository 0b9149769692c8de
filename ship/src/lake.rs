//! An export's files put into a data lake: a prefix that many logs' exports share,
//! where an object, once written, is never replaced.

use std::path::PathBuf;

use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};
use crate::remote::Remote;

/// Files up to this size go up in one conditional put (read into memory whole), which
/// the store refuses if the object appeared meanwhile; larger ones in parts, after the
/// lookup only.
const ONE_PUT_MAX: u64 = 128 << 20;

/// The size of each part of a larger file.
const PART_BYTES: usize = 8 << 20;

/// A local file to put under the lake's prefix.
#[derive(Debug, Clone)]
pub struct LakeFile {
    /// Its object path under the prefix, `/`-separated (`kind=imu/part-0.parquet`).
    pub key: String,
    /// The local file.
    pub local: PathBuf,
    /// Its size, as written.
    pub bytes: u64,
    /// Its blake3, as written.
    pub blake3: [u8; 32],
}

/// What [`put_in_lake`] did: the URL of each object, uploaded or found already there
/// with the same bytes (an earlier run of the same export, stopped before its end).
#[derive(Debug, Clone, Default)]
pub struct LakeReport {
    /// Objects uploaded.
    pub uploaded: Vec<String>,
    /// Objects already there, byte for byte the file: kept.
    pub kept: Vec<String>,
}

/// Puts `files` under the prefix `url` names (`s3://BUCKET/PREFIX`, `file:///PATH` or a
/// plain path), in their order (put last the file that says the others are whole: a
/// manifest).
///
/// First every object is looked up: one already there with the file's size and blake3
/// is kept (a run of the same export that stopped part way leaves such objects, and
/// running it again finishes it); one with other bytes stops everything before any
/// upload. Each upload is a conditional put that fails if the object appeared since
/// (files over 128 MiB go up in parts, which only the lookup guards), and each file is
/// hashed as it is sent and must be what `bytes` and `blake3` say.
///
/// # Errors
///
/// [`Error::Url`] for a URL this crate does not write to or a key that is not an object
/// path; [`Error::Exists`] for an object with other bytes; [`Error::LakeFile`] for a
/// file that changed since it was listed; [`Error::Partial`] around any error after the
/// first upload, saying how many objects are in place; the store's and the file
/// system's errors.
pub fn put_in_lake(url: &str, files: &[LakeFile]) -> Result<LakeReport> {
    let remote = Remote::open(url)?;
    let mut objects = Vec::with_capacity(files.len());
    for f in files {
        objects.push(object_at(&remote, &f.key)?);
    }
    let runtime = crate::ship::runtime()?;
    runtime.block_on(async {
        let mut report = LakeReport::default();
        let mut to_upload = Vec::with_capacity(files.len());
        for (f, (object, url)) in files.iter().zip(&objects) {
            if holds(&remote, object, url, f).await? {
                report.kept.push(url.clone());
            } else {
                to_upload.push((f, object, url));
            }
        }
        let total = to_upload.len();
        for (done, (f, object, url)) in to_upload.into_iter().enumerate() {
            let partial = |source: Error| Error::Partial {
                done,
                total,
                source: Box::new(source),
            };
            upload(&remote, object, url, f)
                .await
                .map_err(|e| if done == 0 { e } else { partial(e) })?;
            report.uploaded.push(url.clone());
        }
        Ok(report)
    })
}

/// The object at `key` (`/`-separated) under `remote`'s prefix, and its URL.
fn object_at(remote: &Remote, key: &str) -> Result<(ObjectPath, String)> {
    let url = format!("{}/{key}", remote.url());
    let parsed = ObjectPath::parse(key).map_err(|e| Error::Url {
        url: url.clone(),
        why: format!("it is not an object path: {e}"),
    })?;
    let object = parsed
        .parts()
        .fold(remote.prefix().clone(), |path, part| path.join(part));
    Ok((object, url))
}

/// Whether `object` already holds `f`'s bytes: `false` when it is absent; an error when
/// it holds others.
async fn holds(remote: &Remote, object: &ObjectPath, url: &str, f: &LakeFile) -> Result<bool> {
    let meta = match remote.store().head(object).await {
        Ok(meta) => meta,
        Err(object_store::Error::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(remote.error(format!("cannot look up {url}"), e)),
    };
    let same = meta.size == f.bytes && hash_object(remote, object, url).await? == f.blake3;
    if same {
        Ok(true)
    } else {
        Err(Error::Exists {
            url: url.to_owned(),
        })
    }
}

/// The blake3 of `object`'s bytes, streamed.
async fn hash_object(remote: &Remote, object: &ObjectPath, url: &str) -> Result<[u8; 32]> {
    let got = remote
        .store()
        .get(object)
        .await
        .map_err(|e| remote.error(format!("cannot download {url}"), e))?;
    let mut stream = got.into_stream();
    let mut hasher = blake3::Hasher::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| remote.error(format!("cannot download {url}"), e))?;
        hasher.update(&chunk);
    }
    Ok(*hasher.finalize().as_bytes())
}

/// Uploads `f` to `object`, refusing to replace an object that appeared since the
/// lookup.
async fn upload(remote: &Remote, object: &ObjectPath, url: &str, f: &LakeFile) -> Result<()> {
    let check = |sent: u64, hasher: &blake3::Hasher| {
        let hash = hasher.finalize();
        if sent == f.bytes && hash.as_bytes() == &f.blake3 {
            Ok(())
        } else {
            Err(Error::LakeFile {
                path: f.local.clone(),
                why: format!(
                    "it changed after it was written ({} bytes with blake3 {} then, {sent} bytes with blake3 {} when sent)",
                    f.bytes,
                    blake3::Hash::from_bytes(f.blake3).to_hex(),
                    hash.to_hex()
                ),
            })
        }
    };
    if f.bytes > ONE_PUT_MAX {
        return crate::upload::put_file(
            remote,
            object,
            url,
            &f.local,
            (ONE_PUT_MAX, PART_BYTES),
            &check,
        )
        .await;
    }
    let bytes = std::fs::read(&f.local).map_err(|source| Error::Io {
        what: "read",
        path: f.local.clone(),
        source,
    })?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes);
    check(bytes.len() as u64, &hasher)?;
    let put = remote
        .store()
        .put_opts(
            object,
            PutPayload::from(bytes),
            PutOptions::from(PutMode::Create),
        )
        .await;
    match put {
        Ok(_) => Ok(()),
        // Another writer put it between the lookup and now: kept if it is these bytes.
        Err(object_store::Error::AlreadyExists { .. }) => {
            if holds(remote, object, url, f).await? {
                Ok(())
            } else {
                // The store says it is there, and no object of these bytes is.
                Err(Error::Exists {
                    url: url.to_owned(),
                })
            }
        }
        Err(e) => Err(remote.error(format!("cannot upload {url}"), e)),
    }
}

/// The names of the objects directly under `url`'s `dir` (`_manifests`) that start
/// with `prefix`, sorted.
///
/// # Errors
///
/// [`Error::Url`] for a URL this crate does not read; the store's error when it cannot
/// be listed.
pub fn lake_listing(url: &str, dir: &str, prefix: &str) -> Result<Vec<String>> {
    let remote = Remote::open(url)?;
    let under = remote.prefix().clone().join(dir);
    let runtime = crate::ship::runtime()?;
    let listing = runtime
        .block_on(remote.store().list_with_delimiter(Some(&under)))
        .map_err(|e| remote.error(format!("cannot list {}/{dir}", remote.url()), e))?;
    let mut names: Vec<String> = listing
        .objects
        .iter()
        .filter_map(|o| o.location.filename().map(str::to_owned))
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    Ok(names)
}

/// The bytes of the object at `key` under `url`, if there is one, up to `max_bytes`.
///
/// # Errors
///
/// [`Error::Url`] for a URL this crate does not read, or an object larger than
/// `max_bytes`; the store's error.
pub fn lake_read(url: &str, key: &str, max_bytes: u64) -> Result<Option<Vec<u8>>> {
    let remote = Remote::open(url)?;
    let (object, object_url) = object_at(&remote, key)?;
    let runtime = crate::ship::runtime()?;
    runtime.block_on(async {
        let meta = match remote.store().head(&object).await {
            Ok(meta) => meta,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(remote.error(format!("cannot look up {object_url}"), e)),
        };
        if meta.size > max_bytes {
            return Err(Error::Url {
                url: object_url,
                why: format!(
                    "it holds {} bytes, more than the {max_bytes} it may",
                    meta.size
                ),
            });
        }
        let got = remote
            .store()
            .get(&object)
            .await
            .map_err(|e| remote.error(format!("cannot download {object_url}"), e))?;
        let bytes = got
            .bytes()
            .await
            .map_err(|e| remote.error(format!("cannot download {object_url}"), e))?;
        Ok(Some(bytes.to_vec()))
    })
}

/// Removes the object at `key` under `url` (a marker the caller wrote); one already
/// gone is no error.
///
/// # Errors
///
/// [`Error::Url`] for a URL this crate does not write to; the store's error.
pub fn lake_remove(url: &str, key: &str) -> Result<()> {
    let remote = Remote::open(url)?;
    let (object, object_url) = object_at(&remote, key)?;
    let runtime = crate::ship::runtime()?;
    runtime.block_on(async {
        match remote.store().delete(&object).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(remote.error(format!("cannot remove {object_url}"), e)),
        }
    })
}
