//! Reading a shipped log where it lies: its manifest lists the segments, and every read
//! of a segment is a range request for the pages it needs, kept in a bounded cache, so
//! a query fetches the headers, footers and blocks it touches and nothing else.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use blackbox_log::source::{SegmentRead, SegmentSource};
use blackbox_log::{Digest, SealedSummary, SegmentEntry, SegmentSummary, link_from_hex};
use bytes::Bytes;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::manifest::{Manifest, ShippedSegment};
use crate::remote::Remote;
use crate::ship::{runtime, shipped_manifest};

/// The unit of a range request and of the cache: 16 KiB of a segment (a request asks
/// for every page a read spans at once).
pub const PAGE_BYTES: u64 = 16 << 10;

/// The most pages the cache of one shipped log holds (16 MiB).
const CACHE_PAGES_MAX: usize = 1024;

/// A shipped log, read through range requests.
#[derive(Debug)]
pub struct RemoteLog {
    remote: Remote,
    manifest: Manifest,
    summaries: Vec<SegmentSummary>,
    shared: Arc<Shared>,
}

/// What the segments of one remote log share: the runtime their requests run on, the
/// page cache and the counters.
struct Shared {
    rt: tokio::runtime::Runtime,
    cache: Mutex<PageCache>,
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("requests", &self.requests)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// Pages by (segment's first seq, page number), evicted oldest first.
#[derive(Default)]
struct PageCache {
    pages: HashMap<(u64, u64), Bytes>,
    order: VecDeque<(u64, u64)>,
}

impl PageCache {
    fn insert(&mut self, key: (u64, u64), page: Bytes) {
        if self.pages.insert(key, page).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > CACHE_PAGES_MAX {
            if let Some(old) = self.order.pop_front() {
                self.pages.remove(&old);
            }
        }
    }
}

impl RemoteLog {
    /// The log shipped to `remote`, from its manifest (one request).
    ///
    /// # Errors
    ///
    /// [`Error::Manifest`] when there is no manifest or it lists no segment; the
    /// store's error.
    pub fn open(remote: Remote) -> Result<RemoteLog> {
        let rt = runtime()?;
        let manifest = rt.block_on(shipped_manifest(&remote))?;
        let summaries = summaries(&remote, &manifest)?;
        Ok(RemoteLog {
            remote,
            manifest,
            summaries,
            shared: Arc::new(Shared {
                rt,
                cache: Mutex::new(PageCache::default()),
                requests: AtomicU64::new(1),
                bytes: AtomicU64::new(0),
            }),
        })
    }

    /// The manifest it reads by.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Requests made so far (the manifest's included).
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Bytes of segments fetched so far (the manifest's not included).
    pub fn bytes_fetched(&self) -> u64 {
        self.shared.bytes.load(Ordering::Relaxed)
    }
}

/// Each segment's header and footer as the manifest records them.
fn summaries(remote: &Remote, manifest: &Manifest) -> Result<Vec<SegmentSummary>> {
    let link = |hex: &str, what: &str, name: &str| {
        link_from_hex(hex).ok_or_else(|| Error::Manifest {
            url: remote.manifest_url(),
            why: format!("the {what} of segment {name} is not 64 hex digits"),
        })
    };
    manifest
        .segments
        .iter()
        .map(|s| {
            Ok(SegmentSummary {
                path: PathBuf::from(remote.segment_url(&s.name)),
                first_seq: s.first_seq,
                len_bytes: s.bytes,
                prev_link: link(&s.prev_link, "prev_link", &s.name)?,
                sealed: Some(SealedSummary {
                    record_count: s.last_seq.saturating_add(1).saturating_sub(s.first_seq),
                    first_ts_ns: s.first_ts_ns,
                    last_ts_ns: s.last_ts_ns,
                    last: Digest {
                        seq: s.last_seq,
                        link: link(&s.last_link, "last_link", &s.name)?,
                    },
                }),
            })
        })
        .collect()
}

impl SegmentSource for RemoteLog {
    fn summaries(&self) -> Option<Vec<SegmentSummary>> {
        Some(self.summaries.clone())
    }

    fn list(&self) -> blackbox_log::Result<Vec<(u64, PathBuf)>> {
        Ok(self
            .manifest
            .segments
            .iter()
            .map(|s| (s.first_seq, PathBuf::from(self.remote.segment_url(&s.name))))
            .collect())
    }

    fn open(&self, entry: &SegmentEntry) -> blackbox_log::Result<Box<dyn SegmentRead>> {
        let Some(shipped) = self
            .manifest
            .segments
            .iter()
            .find(|s| s.first_seq == entry.first_seq)
        else {
            return Err(blackbox_log::Error::Io {
                op: "open shipped segment",
                path: entry.path.clone(),
                source: io::Error::new(io::ErrorKind::NotFound, "the manifest does not list it"),
            });
        };
        Ok(Box::new(RemoteSegment {
            remote: self.remote.clone(),
            shipped: shipped.clone(),
            shared: Arc::clone(&self.shared),
        }))
    }
}

/// One shipped segment, read by range requests through the log's page cache.
#[derive(Debug)]
struct RemoteSegment {
    remote: Remote,
    shipped: ShippedSegment,
    shared: Arc<Shared>,
}

impl RemoteSegment {
    /// The pages `first..=last` of the segment: those cached, and the run from the
    /// first missing one to the last missing one fetched in one request. The read is
    /// served from what was fetched, not from the cache, which may evict pages of a read
    /// larger than itself.
    fn pages(&self, first: u64, last: u64) -> io::Result<Vec<Bytes>> {
        let key = self.shipped.first_seq;
        let mut pages: Vec<Option<Bytes>> = {
            let cache = self.shared.cache.lock().map_err(|_| poisoned())?;
            (first..=last)
                .map(|p| cache.pages.get(&(key, p)).cloned())
                .collect()
        };
        let missing = |pages: &[Option<Bytes>]| pages.iter().position(Option::is_none);
        if let Some(from) = missing(&pages) {
            let to = pages.iter().rposition(Option::is_none).unwrap_or(from);
            let fetched = self.fetch(first + from as u64, first + to as u64)?;
            for (slot, page) in pages[from..=to].iter_mut().zip(fetched) {
                *slot = Some(page);
            }
        }
        if missing(&pages).is_some() {
            return Err(io::Error::other(format!(
                "the store returned less of {} than the manifest lists",
                self.remote.segment_url(&self.shipped.name)
            )));
        }
        Ok(pages.into_iter().flatten().collect())
    }

    /// Fetches the pages `first..=last` in one request, caches them and returns them.
    fn fetch(&self, first: u64, last: u64) -> io::Result<Vec<Bytes>> {
        let key = self.shipped.first_seq;
        let start = first * PAGE_BYTES;
        let end = (last + 1)
            .saturating_mul(PAGE_BYTES)
            .min(self.shipped.bytes);
        let path = self.remote.segment_path(&self.shipped.name);
        self.shared.requests.fetch_add(1, Ordering::Relaxed);
        let bytes = self
            .shared
            .rt
            .block_on(self.remote.store().get_range(&path, start..end))
            .map_err(|e| {
                io::Error::other(
                    self.remote
                        .error(
                            format!(
                                "cannot read {}",
                                self.remote.segment_url(&self.shipped.name)
                            ),
                            e,
                        )
                        .to_string(),
                )
            })?;
        if bytes.len() as u64 != end - start {
            return Err(io::Error::other(format!(
                "the store returned {} bytes of {} for bytes {start}..{end}: the object is not the {} bytes the manifest lists",
                bytes.len(),
                self.remote.segment_url(&self.shipped.name),
                self.shipped.bytes
            )));
        }
        self.shared
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let mut cache = self.shared.cache.lock().map_err(|_| poisoned())?;
        let mut pages = Vec::new();
        for p in first..=last {
            let from = usize::try_from((p - first) * PAGE_BYTES).unwrap_or(usize::MAX);
            let to = usize::try_from((p - first + 1) * PAGE_BYTES)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let page = bytes.slice(from.min(to)..to);
            cache.insert((key, p), page.clone());
            pages.push(page);
        }
        Ok(pages)
    }
}

fn poisoned() -> io::Error {
    io::Error::other("the page cache's lock was poisoned by a panic")
}

impl SegmentRead for RemoteSegment {
    fn byte_len(&self) -> io::Result<u64> {
        Ok(self.shipped.bytes)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let len = self.shipped.bytes;
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let end = len.min(offset.saturating_add(buf.len() as u64));
        let first = offset / PAGE_BYTES;
        let last = (end - 1) / PAGE_BYTES;
        let pages = self.pages(first, last)?;
        let mut got = 0usize;
        let mut at = offset;
        for (p, page) in (first..=last).zip(&pages) {
            let from = usize::try_from(at - p * PAGE_BYTES).unwrap_or(usize::MAX);
            if from >= page.len() {
                break;
            }
            let n = (page.len() - from).min(buf.len() - got);
            buf[got..got + n].copy_from_slice(&page[from..from + n]);
            got += n;
            at += n as u64;
            if got == buf.len() {
                break;
            }
        }
        Ok(got)
    }
}

/// The logs read by URL in this process, by URL: a command opens the same log several
/// times (a reader per query), and each reuses the manifest and the page cache.
static OPENED: OnceLock<Mutex<HashMap<String, Arc<RemoteLog>>>> = OnceLock::new();

/// Makes the log crate's readers take a shipped log's URL (`s3://…`, `file://…`) as
/// their directory, reading it through [`RemoteLog`]. Idempotent.
///
/// A URL is opened once per process and kept (its manifest and its page cache): a
/// command sees the log as shipped when it started; a long-running program that must
/// see segments shipped since opens a [`RemoteLog`] of its own for each read.
pub fn install_url_reader() {
    blackbox_log::source::set_url_opener(open_url);
}

/// The shipped log at `url` this process has read, with its counters.
pub fn opened_remote_log(url: &str) -> Option<Arc<RemoteLog>> {
    OPENED
        .get()?
        .lock()
        .ok()?
        .get(url.trim_end_matches('/'))
        .cloned()
}

fn open_url(url: &str) -> Option<blackbox_log::Result<Arc<dyn SegmentSource>>> {
    if !crate::is_url(url) {
        return None;
    }
    let key = url.trim_end_matches('/').to_owned();
    let opened = OPENED.get_or_init(Mutex::default);
    if let Some(log) = opened.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Some(Ok(log));
    }
    let log = Remote::open_existing(url).and_then(RemoteLog::open);
    Some(match log {
        Ok(log) => {
            let log = Arc::new(log);
            if let Ok(mut m) = opened.lock() {
                m.insert(key, Arc::clone(&log));
            }
            Ok(log)
        }
        Err(e) => Err(blackbox_log::Error::Remote {
            url: url.to_owned(),
            why: e.to_string(),
        }),
    })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

    /// A segment object of `len` bytes whose every 8-byte word is its own offset: any
    /// slice of it says where it came from.
    fn segment(dir: &std::path::Path, len: u64) -> (RemoteSegment, Vec<u8>) {
        let bytes: Vec<u8> = (0..len / 8).flat_map(|w| (w * 8).to_le_bytes()).collect();
        let name = crate::segment_name(0);
        std::fs::create_dir_all(dir.join("segments")).unwrap();
        std::fs::write(dir.join("segments").join(&name), &bytes).unwrap();
        let remote = Remote::open_existing(&format!("file://{}", dir.display())).unwrap();
        let segment = RemoteSegment {
            remote,
            shipped: ShippedSegment {
                name,
                bytes: len,
                ..ShippedSegment::default()
            },
            shared: Arc::new(Shared {
                rt: runtime().unwrap(),
                cache: Mutex::new(PageCache::default()),
                requests: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
            }),
        };
        (segment, bytes)
    }

    #[test]
    fn a_read_larger_than_the_cache_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let len = (CACHE_PAGES_MAX as u64 + 8) * PAGE_BYTES;
        let (segment, bytes) = segment(dir.path(), len);
        let mut buf = vec![0u8; usize::try_from(len).unwrap() - 24];
        segment.read_exact_at(&mut buf, 8).unwrap();
        assert!(
            buf == bytes[8..bytes.len() - 16],
            "the bytes read are the object's"
        );
        assert_eq!(segment.shared.requests.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_small_read_after_the_cache_filled_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let len = (CACHE_PAGES_MAX as u64 + 200) * PAGE_BYTES;
        let (segment, bytes) = segment(dir.path(), len);
        let page = usize::try_from(PAGE_BYTES).unwrap();
        let mut one = vec![0u8; page];
        // Page 50, then page 5, then enough others to fill the cache: page 5 is among
        // the oldest when a read of pages 4..=6 fetches 4 and 6 around it.
        for p in [50u64, 5]
            .into_iter()
            .chain(100..100 + CACHE_PAGES_MAX as u64 - 2)
        {
            segment.read_exact_at(&mut one, p * PAGE_BYTES).unwrap();
        }
        let mut three = vec![0u8; 3 * page];
        segment.read_exact_at(&mut three, 4 * PAGE_BYTES).unwrap();
        assert!(three == bytes[4 * page..7 * page]);
        // And past the end: what there is.
        let mut tail = vec![0u8; 2 * page];
        let got = segment.read_at(&mut tail, len - 100).unwrap();
        assert_eq!(got, 100);
        assert!(tail[..100] == bytes[bytes.len() - 100..]);
    }
}
