//! An export's files put into a data lake: a prefix that many logs' exports share,
//! where an object, once written, is never replaced.

use std::path::PathBuf;

use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;

use crate::error::{Error, Result};
use crate::remote::Remote;

/// Files at or above this size go up in parts.
const MULTIPART_THRESHOLD: u64 = 16 << 20;

/// The size of each part.
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

/// Puts `files` under the prefix `url` names (`s3://BUCKET/PREFIX`, `file:///PATH` or a
/// plain path), in their order (put last the file that says the others are whole: a
/// manifest). First it looks every object up: if any exists, nothing is uploaded. Each file is hashed as it is sent and must be what `bytes` and `blake3`
/// say. Returns the URL of each object.
///
/// # Errors
///
/// [`Error::Url`] for a URL this crate does not write to or a key that is not an object
/// path; [`Error::Exists`] for an object that is already there; [`Error::Mismatch`] for a
/// file that changed since it was listed; the store's and the file system's errors.
pub fn put_in_lake(url: &str, files: &[LakeFile]) -> Result<Vec<String>> {
    let remote = Remote::open(url)?;
    let mut objects = Vec::with_capacity(files.len());
    for f in files {
        let key = ObjectPath::parse(&f.key).map_err(|e| Error::Url {
            url: format!("{}/{}", remote.url(), f.key),
            why: format!("it is not an object path: {e}"),
        })?;
        let object = key
            .parts()
            .fold(remote.prefix().clone(), |path, part| path.join(part));
        objects.push((object, format!("{}/{}", remote.url(), f.key)));
    }
    let runtime = crate::ship::runtime()?;
    runtime.block_on(async {
        for (object, url) in &objects {
            match remote.store().head(object).await {
                Ok(_) => return Err(Error::Exists { url: url.clone() }),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(remote.error(format!("cannot look up {url}"), e)),
            }
        }
        for (f, (object, url)) in files.iter().zip(&objects) {
            let check = |sent: u64, hasher: &blake3::Hasher| {
                if sent == f.bytes && hasher.finalize().as_bytes() == &f.blake3 {
                    Ok(())
                } else {
                    Err(Error::Mismatch {
                        segment: f.local.display().to_string(),
                        why: format!(
                            "the file changed after it was written ({} bytes listed, {sent} sent); nothing after it was uploaded",
                            f.bytes
                        ),
                    })
                }
            };
            crate::upload::put_file(
                &remote,
                object,
                url,
                &f.local,
                (MULTIPART_THRESHOLD, PART_BYTES),
                &check,
            )
            .await?;
        }
        Ok(())
    })?;
    Ok(objects.into_iter().map(|(_, url)| url).collect())
}
