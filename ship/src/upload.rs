//! A local file put into the store whole: one request when small, a multipart upload
//! when large, hashed as it goes and checked before the object is completed.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{PutMultipartOptions, PutOptions, PutPayload, WriteMultipart};

use crate::error::{Error, Result};
use crate::remote::Remote;

/// Uploads the file at `path` to `object` (named `url` in messages): in one request
/// below `sizes.0` bytes, else in parts of `sizes.1` bytes. `check` sees the bytes sent
/// and their hash before the object is completed; its error abandons the upload.
pub(crate) async fn put_file(
    remote: &Remote,
    object: &ObjectPath,
    url: &str,
    path: &Path,
    sizes: (u64, usize),
    check: &dyn Fn(u64, &blake3::Hasher) -> Result<()>,
) -> Result<()> {
    let (multipart_threshold, part_bytes) = sizes;
    let io = |source| Error::Io {
        what: "read",
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut hasher = blake3::Hasher::new();
    let mut sent = 0u64;
    if len < multipart_threshold {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        hasher.update(&bytes);
        sent = bytes.len() as u64;
        check(sent, &hasher)?;
        remote
            .store()
            .put_opts(
                object,
                PutPayload::from(Bytes::from(bytes)),
                PutOptions::default(),
            )
            .await
            .map_err(|e| remote.error(format!("cannot upload {url}"), e))?;
        return Ok(());
    }
    let part = part_bytes.max(1);
    let upload = remote
        .store()
        .put_multipart_opts(object, PutMultipartOptions::default())
        .await
        .map_err(|e| remote.error(format!("cannot start the upload of {url}"), e))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
    let mut buf = vec![0u8; part];
    let result: Result<()> = async {
        loop {
            let n = file.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            sent += n as u64;
            writer
                .wait_for_capacity(2)
                .await
                .map_err(|e| remote.error(format!("cannot upload a part of {url}"), e))?;
            writer.write(&buf[..n]);
        }
        check(sent, &hasher)
    }
    .await;
    if let Err(e) = result {
        // Best effort: the store forgets unfinished uploads after a while anyway.
        let _ = writer.abort().await;
        return Err(e);
    }
    writer
        .finish()
        .await
        .map_err(|e| remote.error(format!("cannot finish the upload of {url}"), e))?;
    Ok(())
}
