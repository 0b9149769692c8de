//! The file layer under the writer.
//!
//! The writer reaches the disk only through [`Storage`] and [`WriteFile`], so tests can
//! swap in [`FaultyStorage`], which injects short writes, `ENOSPC` and failing fsyncs,
//! and remembers how many bytes of each file were made durable so a test can build the
//! image a power loss would leave (only synced bytes survive, the pending write is torn).
//! [`SmallDisk`] plays a disk of a fixed size: a write past it fails with `ENOSPC`
//! after writing what fits, and removing or cutting a file gives its bytes back.
//! Readers and recovery read with plain `std::fs`: reads have no side effects to fake.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Creates, extends and syncs segment files.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Creates a new file (it must not exist), owner-only (0600), for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>>;
    /// Makes the directory's entries (created, renamed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Makes a file read-only (0400): done to a segment when it is sealed.
    fn set_read_only(&self, path: &Path) -> io::Result<()>;
    /// Makes an existing file's data durable (`fdatasync`) without writing to it: it is
    /// opened read-only, since it may be read-only already. Recovery calls this on a
    /// segment a crash left sealed, before it starts the next one.
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        open_existing_read_only(path)?.sync_data()
    }
    /// Removes a file (a pruned segment). Durable after [`Storage::sync_dir`].
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    /// Creates `path` if needed (0600) and allocates `bytes` bytes of disk to it: the
    /// log's disk reserve, given back when the disk fills so that a prune record fits.
    fn reserve(&self, path: &Path, bytes: u64) -> io::Result<()> {
        reserve_file(path, bytes)
    }
}

/// Allocates `bytes` bytes to `path` (created 0600, never through a symbolic link).
fn reserve_file(path: &Path, bytes: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("the reserve is not a regular file"));
    }
    if meta.len() > bytes {
        // A reserve left larger by an earlier run: cut to the size asked for.
        file.set_len(bytes)?;
    }
    let len = libc::off_t::try_from(bytes).map_err(|_| io::Error::other("reserve too large"))?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: the descriptor is open for the duration of the call, which reads no
    // memory of ours.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Opens an existing file read-only, never through a symbolic link.
fn open_existing_read_only(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// A file open for appending.
pub trait WriteFile: Send + fmt::Debug {
    /// Appends all of `buf` at the end of the file.
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes the file's data durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Asks the OS to start writing `len` bytes at `offset` to the disk without waiting,
    /// so that the fdatasync that seals a segment finds little left to do. A hint: it
    /// proves nothing about durability, and its failure is ignored (the fsync that
    /// follows reports what matters).
    fn start_writeback(&mut self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// Cuts the file to `len` bytes: recovery cuts a torn tail, and the writer the part
    /// of a write that a full disk refused.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsStorage;

#[derive(Debug)]
struct OsFile {
    file: File,
}

impl Storage for OsStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        Ok(Box::new(OsFile { file }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(OsFile {
            file: open_existing_for_append(path)?,
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(0o400))
    }
}

impl WriteFile for OsFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&mut self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (
            libc::off64_t::try_from(offset),
            libc::off64_t::try_from(len),
        ) else {
            return;
        };
        // SAFETY: the descriptor is open for the lifetime of `self.file`, and
        // sync_file_range reads no memory of ours.
        let _ = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
    }
}

/// Opens an existing segment for appending, never through a symbolic link.
fn open_existing_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next append writes only this many bytes of its buffer, then fails with `ENOSPC`.
    ShortWriteThenNoSpace {
        /// Bytes that reach the file before the failure.
        written_bytes: usize,
    },
    /// The next fsync fails with `EIO` (and, as on Linux, the dirty data may be gone).
    SyncFails,
    /// The next fsync fails with `ENOSPC` (a file system that finds no room only when
    /// it writes back: the dirty data may be gone as well).
    SyncNoSpace,
}

/// A [`Storage`] over the real file system that injects faults and tracks durability.
///
/// Arm a fault with [`FaultyStorage::arm`]; it fires once, on the first matching call
/// after `after_ops` further calls of that kind. [`FaultyStorage::durable_len`] tells how
/// many bytes of a file an fsync has covered, which a test uses to build a crash image.
#[derive(Debug, Clone, Default)]
pub struct FaultyStorage {
    state: Arc<FaultState>,
}

#[derive(Debug, Default)]
struct FaultState {
    armed: Mutex<Option<(Fault, u64)>>,
    durable: Mutex<HashMap<PathBuf, u64>>,
    appends: AtomicU64,
    syncs: AtomicU64,
}

impl FaultyStorage {
    /// A storage with no fault armed.
    pub fn new() -> FaultyStorage {
        FaultyStorage::default()
    }

    /// Arms `fault` to fire after `after_ops` more calls of its kind (append or fsync).
    pub fn arm(&self, fault: Fault, after_ops: u64) {
        *self.state.armed.lock() = Some((fault, after_ops));
    }

    /// Whether the armed fault has fired.
    pub fn fired(&self) -> bool {
        self.state.armed.lock().is_none()
    }

    /// Bytes of `path` known durable: its length at its last successful fsync.
    pub fn durable_len(&self, path: &Path) -> u64 {
        self.state.durable.lock().get(path).copied().unwrap_or(0)
    }

    /// Number of appends and fsyncs seen so far.
    pub fn op_counts(&self) -> (u64, u64) {
        (
            self.state.appends.load(Ordering::Relaxed),
            self.state.syncs.load(Ordering::Relaxed),
        )
    }

    fn take(&self, is_sync: bool) -> Option<Fault> {
        let mut armed = self.state.armed.lock();
        let (fault, after) = (*armed)?;
        if matches!(fault, Fault::SyncFails | Fault::SyncNoSpace) != is_sync {
            return None;
        }
        if after == 0 {
            *armed = None;
            Some(fault)
        } else {
            *armed = Some((fault, after - 1));
            None
        }
    }
}

/// The error an fsync fault returns: `ENOSPC` or `EIO`.
fn sync_error(fault: Fault) -> io::Error {
    match fault {
        Fault::SyncNoSpace => io::Error::from_raw_os_error(libc::ENOSPC),
        _ => io::Error::from_raw_os_error(libc::EIO),
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: OsFile,
    path: PathBuf,
    len: u64,
    storage: FaultyStorage,
}

impl Storage for FaultyStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        Ok(Box::new(FaultyFile {
            inner: OsFile { file },
            path: path.to_owned(),
            len: 0,
            storage: self.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = open_existing_for_append(path)?;
        let len = file.metadata()?.len();
        // What existed before this storage saw the file counts as durable.
        self.state.durable.lock().insert(path.to_owned(), len);
        Ok(Box::new(FaultyFile {
            inner: OsFile { file },
            path: path.to_owned(),
            len,
            storage: self.clone(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }

    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        OsStorage.set_read_only(path)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.state.syncs.fetch_add(1, Ordering::Relaxed);
        if let Some(fault) = self.take(true) {
            return Err(sync_error(fault));
        }
        let file = open_existing_read_only(path)?;
        file.sync_data()?;
        let len = file.metadata()?.len();
        self.state.durable.lock().insert(path.to_owned(), len);
        Ok(())
    }
}

impl WriteFile for FaultyFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.storage.state.appends.fetch_add(1, Ordering::Relaxed);
        if let Some(Fault::ShortWriteThenNoSpace { written_bytes }) = self.storage.take(false) {
            let n = written_bytes.min(buf.len());
            self.inner.append(&buf[..n])?;
            self.len += n as u64;
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.inner.append(buf)?;
        self.len += buf.len() as u64;
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.storage.state.syncs.fetch_add(1, Ordering::Relaxed);
        if let Some(fault) = self.storage.take(true) {
            return Err(sync_error(fault));
        }
        self.inner.sync_data()?;
        self.storage
            .state
            .durable
            .lock()
            .insert(self.path.clone(), self.len);
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)?;
        self.len = len;
        let mut durable = self.storage.state.durable.lock();
        if let Some(d) = durable.get_mut(&self.path) {
            *d = (*d).min(len);
        }
        Ok(())
    }
}

/// A [`Storage`] over the real file system that plays a disk of `capacity` bytes:
/// the bytes of the files it has seen (created, opened, reserved) count against it; an
/// append that would pass it writes what fits, then fails with `ENOSPC`; a removed or
/// cut file gives its bytes back. Files it never saw (a lock file, segments of an
/// earlier run that were not opened through it) take no room.
#[derive(Debug, Clone)]
pub struct SmallDisk {
    state: Arc<DiskState>,
}

#[derive(Debug)]
struct DiskState {
    capacity: AtomicU64,
    sizes: Mutex<HashMap<PathBuf, u64>>,
    refused: AtomicU64,
}

impl SmallDisk {
    /// A disk of `capacity` bytes.
    pub fn new(capacity: u64) -> SmallDisk {
        SmallDisk {
            state: Arc::new(DiskState {
                capacity: AtomicU64::new(capacity),
                sizes: Mutex::new(HashMap::new()),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Changes the disk's size (a test gives room back, or takes it away).
    pub fn set_capacity(&self, capacity: u64) {
        self.state.capacity.store(capacity, Ordering::SeqCst);
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.state.sizes.lock().values().sum()
    }

    /// How many writes (appends and reservations) failed with `ENOSPC`.
    pub fn refused(&self) -> u64 {
        self.state.refused.load(Ordering::SeqCst)
    }

    /// Room for `want` more bytes of `path`: how many fit.
    fn room(&self, sizes: &HashMap<PathBuf, u64>, want: u64) -> u64 {
        let used: u64 = sizes.values().sum();
        let capacity = self.state.capacity.load(Ordering::SeqCst);
        want.min(capacity.saturating_sub(used))
    }

    fn no_space(&self) -> io::Error {
        self.state.refused.fetch_add(1, Ordering::SeqCst);
        io::Error::from_raw_os_error(libc::ENOSPC)
    }
}

#[derive(Debug)]
struct SmallDiskFile {
    inner: OsFile,
    path: PathBuf,
    disk: SmallDisk,
}

impl Storage for SmallDisk {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        self.state.sizes.lock().insert(path.to_owned(), 0);
        Ok(Box::new(SmallDiskFile {
            inner: OsFile { file },
            path: path.to_owned(),
            disk: self.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = open_existing_for_append(path)?;
        let len = file.metadata()?.len();
        self.state.sizes.lock().insert(path.to_owned(), len);
        Ok(Box::new(SmallDiskFile {
            inner: OsFile { file },
            path: path.to_owned(),
            disk: self.clone(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }

    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        OsStorage.set_read_only(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)?;
        self.state.sizes.lock().remove(path);
        Ok(())
    }

    fn reserve(&self, path: &Path, bytes: u64) -> io::Result<()> {
        let mut sizes = self.state.sizes.lock();
        let have = sizes.get(path).copied().unwrap_or(0);
        let more = bytes.saturating_sub(have);
        if self.room(&sizes, more) < more {
            return Err(self.no_space());
        }
        reserve_file(path, bytes)?;
        sizes.insert(path.to_owned(), have.max(bytes));
        Ok(())
    }
}

impl WriteFile for SmallDiskFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut sizes = self.disk.state.sizes.lock();
        let fits = usize::try_from(self.disk.room(&sizes, buf.len() as u64)).unwrap_or(0);
        self.inner.append(&buf[..fits])?;
        *sizes.entry(self.path.clone()).or_insert(0) += fits as u64;
        if fits < buf.len() {
            return Err(self.disk.no_space());
        }
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)?;
        self.disk.state.sizes.lock().insert(self.path.clone(), len);
        Ok(())
    }
}
