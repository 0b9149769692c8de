//! What the shipping tests share: a log made by the recorder, a store that counts and
//! fails requests, and the oracle (the local segment files and their blake3).
#![allow(dead_code, reason = "each test file uses part of it")]

pub mod moto;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use blackbox::log::LogOptions;
use blackbox::{Config, Event, ManualClock, Recorder};
use blackbox_log::{Digest, LogReader};
use futures::stream::BoxStream;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// Records `events` events through the recorder into `dir`, with segments of at most
/// `segment_bytes`, so that the log has many sealed segments and an active one.
pub fn make_log(dir: &FsPath, events: u64, segment_bytes: u64) {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let recorder = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(segment_bytes))
            .checkpoint_interval_ns(None),
    )
    .expect("open a recorder");
    for i in 0..events {
        clock.set_ns(1_700_000_000_000_000_000 + i * 1_000_000);
        recorder
            .record(
                &Event::new("sensor.imu").values(&[("i", i as f64), ("ax", (i % 7) as f64 * 0.5)]),
            )
            .expect("record");
    }
    recorder.close().expect("close the recorder");
}

/// The log's segment files, by name: every one but the last is sealed.
pub fn segment_files(dir: &FsPath) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .expect("read the log directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bbx"))
        .map(|p| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    out.sort();
    out
}

/// The sealed segments (all but the last) with the blake3 of their files, computed
/// here from the local files: the oracle of what the store must hold.
pub fn sealed_hashes(dir: &FsPath) -> Vec<(String, String)> {
    let files = segment_files(dir);
    files[..files.len() - 1]
        .iter()
        .map(|(name, path)| {
            let bytes = std::fs::read(path).expect("read a segment");
            (name.clone(), blake3::hash(&bytes).to_hex().to_string())
        })
        .collect()
}

/// The digest of the sealed segments alone, as `blackbox digest` computes it: on a
/// copy of the sealed segment files.
pub fn local_digest_of_sealed(dir: &FsPath) -> Digest {
    let copy = tempfile::tempdir().expect("a temporary directory");
    let files = segment_files(dir);
    for (name, path) in &files[..files.len() - 1] {
        std::fs::copy(path, copy.path().join(name)).expect("copy a segment");
    }
    LogReader::open(copy.path())
        .and_then(|r| r.digest())
        .expect("the digest of the copy")
        .expect("a record in the copy")
}

/// An S3 client for `bucket` of the moto server.
pub fn s3(moto: &moto::Moto, bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(&moto.endpoint)
            .with_allow_http(true)
            .with_region(moto::REGION)
            .with_access_key_id(moto::ACCESS_KEY)
            .with_secret_access_key(moto::SECRET_KEY)
            .with_bucket_name(bucket)
            .build()
            .expect("an S3 client"),
    )
}

/// Runs `f` on a runtime of its own.
pub fn block_on<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// The bytes of an object, or `None` if there is none.
pub fn object(store: &dyn ObjectStore, path: &str) -> Option<Vec<u8>> {
    block_on(async {
        match store.get(&Path::from(path)).await {
            Ok(got) => Some(got.bytes().await.expect("read an object").to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("get {path}: {e}"),
        }
    })
}

/// Writes an object.
pub fn put_object(store: &dyn ObjectStore, path: &str, bytes: Vec<u8>) {
    block_on(store.put(&Path::from(path), PutPayload::from(bytes))).expect("put an object");
}

/// Deletes an object.
pub fn delete_object(store: &dyn ObjectStore, path: &str) {
    block_on(store.delete(&Path::from(path))).expect("delete an object");
}

/// When the faulty store stops answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Never.
    Never,
    /// Request k (from 1) and every one after fail before they reach the store: the
    /// shipper died before it sent request k.
    Before(usize),
    /// Request k reaches the store, but its answer is lost, and every request after it
    /// fails: the shipper died while it waited for that answer.
    After(usize),
}

/// What the faulty store counts.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests made (failed ones included).
    pub requests: AtomicUsize,
    /// Uploads started per object path (a put, or the start of a multipart upload),
    /// only those that reached the store.
    pub uploads: Mutex<HashMap<String, usize>>,
}

impl Counts {
    /// Uploads of `path` that reached the store.
    pub fn uploads_of(&self, path: &str) -> usize {
        self.uploads
            .lock()
            .expect("the counts' lock")
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

/// A store that counts requests and uploads and stops answering as [`Stop`] says, and
/// that can run `before_manifest_put` once before the first put of `manifest.json`.
pub struct Faulty {
    inner: Arc<dyn ObjectStore>,
    stop: Stop,
    pub counts: Arc<Counts>,
    #[allow(clippy::type_complexity, reason = "a test hook")]
    before_manifest_put: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl fmt::Debug for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({:?})", self.stop)
    }
}

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

impl Faulty {
    pub fn new(inner: Arc<dyn ObjectStore>, stop: Stop) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner,
            stop,
            counts: Arc::new(Counts::default()),
            before_manifest_put: Mutex::new(None),
        })
    }

    pub fn with_hook(inner: Arc<dyn ObjectStore>, hook: Box<dyn FnOnce() + Send>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner,
            stop: Stop::Never,
            counts: Arc::new(Counts::default()),
            before_manifest_put: Mutex::new(Some(hook)),
        })
    }

    /// Counts a request; says whether it may reach the store and whether its answer
    /// is lost.
    fn admit(&self) -> Admit {
        admit(&self.counts, self.stop)
    }
}

enum Admit {
    Pass,
    Refuse,
    LoseAnswer,
}

fn admit(counts: &Counts, stop: Stop) -> Admit {
    let n = counts.requests.fetch_add(1, Ordering::SeqCst) + 1;
    match stop {
        Stop::Before(k) if n >= k => Admit::Refuse,
        Stop::After(k) if n > k => Admit::Refuse,
        Stop::After(k) if n == k => Admit::LoseAnswer,
        _ => Admit::Pass,
    }
}

fn killed() -> object_store::Error {
    object_store::Error::Generic {
        store: "Faulty",
        source: "the shipper was stopped here".into(),
    }
}

fn count_upload(counts: &Counts, location: &Path) {
    *counts
        .uploads
        .lock()
        .expect("the counts' lock")
        .entry(location.to_string())
        .or_default() += 1;
}

/// Runs one request through the fault plan.
macro_rules! request {
    ($self:expr, $call:expr) => {
        match $self.admit() {
            Admit::Refuse => Err(killed()),
            Admit::Pass => $call.await,
            Admit::LoseAnswer => {
                let _ = $call.await;
                Err(killed())
            }
        }
    };
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if location.as_ref().ends_with("manifest.json") {
            let hook = self
                .before_manifest_put
                .lock()
                .expect("the hook's lock")
                .take();
            if let Some(hook) = hook {
                hook();
            }
        }
        let admitted = self.admit();
        if !matches!(admitted, Admit::Refuse) {
            count_upload(&self.counts, location);
        }
        match admitted {
            Admit::Refuse => Err(killed()),
            Admit::Pass => self.inner.put_opts(location, payload, opts).await,
            Admit::LoseAnswer => {
                let _ = self.inner.put_opts(location, payload, opts).await;
                Err(killed())
            }
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let admitted = self.admit();
        if !matches!(admitted, Admit::Refuse) {
            count_upload(&self.counts, location);
        }
        let inner = match admitted {
            Admit::Refuse => return Err(killed()),
            Admit::Pass => self.inner.put_multipart_opts(location, opts).await?,
            Admit::LoseAnswer => {
                if let Ok(mut upload) = self.inner.put_multipart_opts(location, opts).await {
                    let _ = upload.abort().await;
                }
                return Err(killed());
            }
        };
        Ok(Box::new(FaultyUpload {
            inner,
            counts: Arc::clone(&self.counts),
            stop: self.stop,
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        request!(self, self.inner.get_opts(location, options))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        request!(self, self.inner.list_with_delimiter(prefix))
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        request!(self, self.inner.copy_opts(from, to, options))
    }
}

/// A multipart upload whose part, complete and abort requests go through the plan.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    counts: Arc<Counts>,
    stop: Stop,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        match admit(&self.counts, self.stop) {
            Admit::Refuse => Box::pin(async { Err(killed()) }),
            Admit::Pass => self.inner.put_part(data),
            Admit::LoseAnswer => {
                let part = self.inner.put_part(data);
                Box::pin(async move {
                    let _ = part.await;
                    Err(killed())
                })
            }
        }
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        match admit(&self.counts, self.stop) {
            Admit::Refuse => Err(killed()),
            Admit::Pass => self.inner.complete().await,
            Admit::LoseAnswer => {
                let _ = self.inner.complete().await;
                Err(killed())
            }
        }
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        match admit(&self.counts, self.stop) {
            Admit::Refuse => Err(killed()),
            Admit::Pass => self.inner.abort().await,
            Admit::LoseAnswer => {
                let _ = self.inner.abort().await;
                Err(killed())
            }
        }
    }
}
