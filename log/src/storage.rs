//! The file layer under the writer.
//!
//! The writer reaches the disk only through [`Storage`] and [`WriteFile`], so tests can
//! swap in [`FaultyStorage`], which injects short writes, `ENOSPC` and failing fsyncs,
//! and remembers how many bytes of each file were made durable so a test can build the
//! image a power loss would leave (only synced bytes survive, the pending write is torn).
//! [`SmallDisk`] plays a disk of a fixed size: a write past it fails with `ENOSPC`
//! after writing what fits, and removing or cutting a file gives its bytes back.
//! [`PowerLossStorage`] records every write, cut, fsync and directory change and
//! builds the image a power loss would leave: unsynced pages lost at random and out of
//! order, the last write torn, unsynced directory changes a prefix.
//! Readers and recovery read with plain `std::fs`: reads have no side effects to fake.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
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

/// Creates `path`, which must not exist, owner-only (0600), for reading and appending.
fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
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
        let file = create_private(path)?;
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
        let file = create_private(path)?;
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
        let file = create_private(path)?;
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

/// The page size of [`PowerLossStorage`]: the unit in which unsynced data reaches the
/// disk, or does not.
pub const SIM_PAGE_BYTES: u64 = 4096;

/// A [`Storage`] over the real file system that remembers, for every file it writes
/// through, what the disk would hold after a power loss, and builds such a disk image
/// on demand ([`PowerLossStorage::crash_image`]).
///
/// The files on disk always hold what the page cache would (readers read them with
/// `std::fs`); fsyncs are not passed to the disk, only recorded. What is assumed of the
/// file system and the OS (the image follows it):
///
/// - `fdatasync` of a file makes its data and length durable: that content survives;
/// - the data written since (appends, cuts, allocations) is in 4 KiB pages, each of
///   which reaches the disk or not, independently of the others and in any order; a
///   page that did not reads as its old content: the synced bytes, zeros past the old
///   end (a hole or an unwritten extent, as ext4 and XFS give, never another file's
///   data);
/// - the length is journaled in the order of the calls that changed it: after a crash it
///   is the length after some prefix of them (from the synced length to the current
///   one), so a file may end before a page that reached the disk, or past one that did
///   not (which reads as zeros);
/// - the last write is torn at a random byte: its bytes from there on read as old;
/// - the directory's entries (files created, removed) are durable after `sync_dir` of
///   the directory; those changed since survive as a prefix in call order (a journal):
///   a file created since may be missing, a file removed since may be back with the
///   content it had.
#[derive(Debug, Clone)]
pub struct PowerLossStorage {
    root: PathBuf,
    sim: Arc<Mutex<Sim>>,
}

#[derive(Debug, Default)]
struct Sim {
    inodes: Vec<Inode>,
    durable_names: HashMap<PathBuf, usize>,
    names: HashMap<PathBuf, usize>,
    dir_ops: Vec<DirOp>,
    /// Calls that changed something, so far.
    calls: u64,
    /// A crash armed at a call: its number, the image's directory and seed.
    armed: Option<(u64, PathBuf, u64)>,
    /// The image an armed crash took.
    taken: Option<io::Result<CrashImage>>,
}

impl Sim {
    /// Counts a call that is about to change something; takes the armed image first if
    /// it is due (a power cut just before the call).
    fn call(&mut self) {
        if let Some((_, to, seed)) = self.armed.take_if(|(at, ..)| *at <= self.calls) {
            self.taken = Some(self.image(&to, seed));
        }
        self.calls += 1;
    }

    /// Takes a file that exists on disk with `bytes` as durable, entry and content.
    fn adopt_durable(&mut self, path: &Path, bytes: Vec<u8>) {
        let id = self.inodes.len();
        self.inodes.push(Inode {
            durable: bytes.clone(),
            current: bytes,
            ops: Vec::new(),
        });
        self.durable_names.insert(path.to_owned(), id);
        self.names.insert(path.to_owned(), id);
    }
}

#[derive(Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    current: Vec<u8>,
    ops: Vec<FileOp>,
}

#[derive(Debug, Clone, Copy)]
enum FileOp {
    Write { at: u64, len: u64 },
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Link(PathBuf, usize),
    Unlink(PathBuf),
}

/// What [`PowerLossStorage::crash_image`] dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashImage {
    /// The calls (writes, cuts, fsyncs, directory changes) made before the power cut:
    /// what they did may be in the image, what came after is not.
    pub calls: u64,
    /// Files in the image.
    pub files: u64,
    /// Pages written since their file's last fsync (inside the image's lengths).
    pub pages_dirty: u64,
    /// Of those, pages that read as their old content.
    pub pages_dropped: u64,
    /// Writes torn (at most one per file: its last).
    pub writes_torn: u64,
    /// Files created since the last `sync_dir` that are missing from the image.
    pub files_lost: u64,
    /// Files removed since the last `sync_dir` that are back in the image.
    pub files_back: u64,
    /// Bytes the page cache held that the image does not: files shorter than their
    /// current length, and lost files.
    pub bytes_lost: u64,
}

/// splitmix64, for the image's choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..=n`.
    fn upto(&mut self, n: u64) -> u64 {
        self.next() % (n + 1)
    }
}

fn to_usize(n: u64) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::other("file too large for the simulation"))
}

impl PowerLossStorage {
    /// A simulation over the directory `root`: its regular files are taken as durable,
    /// entries and content. Files elsewhere are written through without a model.
    ///
    /// # Errors
    ///
    /// Reading `root`'s files.
    pub fn new(root: &Path) -> io::Result<PowerLossStorage> {
        let mut sim = Sim::default();
        if root.exists() {
            for entry in fs::read_dir(root)? {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    sim.adopt_durable(&entry.path(), fs::read(entry.path())?);
                }
            }
        }
        Ok(PowerLossStorage {
            root: root.to_owned(),
            sim: Arc::new(Mutex::new(sim)),
        })
    }

    fn modelled(&self, path: &Path) -> bool {
        path.parent() == Some(self.root.as_path())
    }

    /// Writes into the new directory `to` what the disk would hold after a power loss
    /// now, with the choices the seed makes; files keep their names.
    ///
    /// # Errors
    ///
    /// Creating `to` or writing its files.
    pub fn crash_image(&self, to: &Path, seed: u64) -> io::Result<CrashImage> {
        self.sim.lock().image(to, seed)
    }

    /// Arms a power cut just before the call (write, cut, fsync, directory change)
    /// after `calls` more: its image is written into `to` then, with the choices
    /// `seed` makes, and the calls go on. [`PowerLossStorage::armed_image`] tells
    /// whether it was taken.
    pub fn arm_crash(&self, calls: u64, to: &Path, seed: u64) {
        let mut sim = self.sim.lock();
        let at = sim.calls + calls;
        sim.armed = Some((at, to.to_owned(), seed));
        sim.taken = None;
    }

    /// The calls that changed something so far (see [`CrashImage::calls`]).
    pub fn calls(&self) -> u64 {
        self.sim.lock().calls
    }

    /// The image an armed power cut took, if its call came.
    pub fn armed_image(&self) -> Option<io::Result<CrashImage>> {
        let mut sim = self.sim.lock();
        sim.armed = None;
        sim.taken.take()
    }
}

impl Sim {
    fn image(&self, to: &Path, seed: u64) -> io::Result<CrashImage> {
        let sim = self;
        let mut rng = Choices(seed);
        let mut report = CrashImage {
            calls: self.calls,
            ..CrashImage::default()
        };
        fs::DirBuilder::new().mode(0o700).create(to)?;
        let kept = to_usize(rng.upto(sim.dir_ops.len() as u64))?;
        let mut names = sim.durable_names.clone();
        for op in &sim.dir_ops[..kept] {
            match op {
                DirOp::Link(name, id) => {
                    names.insert(name.clone(), *id);
                }
                DirOp::Unlink(name) => {
                    names.remove(name);
                }
            }
        }
        for op in &sim.dir_ops[kept..] {
            match op {
                DirOp::Link(name, id) if !names.contains_key(name) => {
                    report.files_lost += 1;
                    report.bytes_lost += sim.inodes[*id].current.len() as u64;
                }
                DirOp::Unlink(name) if names.contains_key(name) => report.files_back += 1,
                _ => {}
            }
        }
        let mut sorted: Vec<(&PathBuf, &usize)> = names.iter().collect();
        sorted.sort();
        for (name, &id) in sorted {
            let Some(file_name) = name.file_name() else {
                continue;
            };
            let bytes = sim.inodes[id].image(&mut rng, &mut report)?;
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(to.join(file_name))?;
            file.write_all(&bytes)?;
            report.files += 1;
        }
        Ok(report)
    }
}

impl PowerLossStorage {
    fn file(&self, path: &Path, file: File) -> Box<dyn WriteFile> {
        let inode = self
            .modelled(path)
            .then(|| self.sim.lock().names.get(path).copied())
            .flatten();
        Box::new(SimFile {
            inner: OsFile { file },
            inode,
            sim: Arc::clone(&self.sim),
        })
    }
}

impl Inode {
    /// The file's content after a power loss, with the choices `rng` makes.
    fn image(&self, rng: &mut Choices, report: &mut CrashImage) -> io::Result<Vec<u8>> {
        // The length: after a prefix of the calls that changed it. The base is the old
        // content at that length: synced bytes, zeros past them.
        let journaled = to_usize(rng.upto(self.ops.len() as u64))?;
        let mut base = self.durable.clone();
        for op in &self.ops[..journaled] {
            let len = match *op {
                FileOp::Write { at, len } => to_usize(at + len)?.max(base.len()),
                FileOp::SetLen(len) => to_usize(len)?,
            };
            base.resize(len, 0);
        }
        report.bytes_lost += (self.current.len() as u64).saturating_sub(base.len() as u64);
        let mut image = base.clone();
        let page = to_usize(SIM_PAGE_BYTES)?;
        let mut dirty: Vec<usize> = Vec::new();
        for op in &self.ops {
            if let FileOp::Write { at, len } = *op
                && len > 0
            {
                let first = to_usize(at / SIM_PAGE_BYTES)?;
                let last = to_usize((at + len - 1) / SIM_PAGE_BYTES)?;
                dirty.extend(first..=last);
            }
        }
        dirty.sort_unstable();
        dirty.dedup();
        for p in dirty {
            let start = p * page;
            let end = (start + page).min(image.len());
            if start >= end {
                continue;
            }
            report.pages_dirty += 1;
            if rng.next() & 1 == 0 {
                // Reached the disk: as the page cache holds it (zeros past its end).
                for (i, b) in image[start..end].iter_mut().enumerate() {
                    *b = self.current.get(start + i).copied().unwrap_or(0);
                }
            } else {
                report.pages_dropped += 1;
            }
        }
        if let Some(&FileOp::Write { at, len }) = self
            .ops
            .iter()
            .rev()
            .find(|op| matches!(op, FileOp::Write { .. }))
            && len > 0
        {
            let from = to_usize(at + rng.upto(len))?;
            let to = to_usize(at + len)?.min(image.len());
            if from < to && image[from..to] != base[from..to] {
                image[from..to].copy_from_slice(&base[from..to]);
                report.writes_torn += 1;
            }
        }
        Ok(image)
    }
}

#[derive(Debug)]
struct SimFile {
    inner: OsFile,
    /// The file's model, for a file in the simulated directory.
    inode: Option<usize>,
    sim: Arc<Mutex<Sim>>,
}

impl SimFile {
    /// Counts the call (a power cut may come before it), then changes the model.
    fn with_inode(&self, f: impl FnOnce(&mut Inode)) {
        let mut sim = self.sim.lock();
        sim.call();
        if let Some(id) = self.inode {
            f(&mut sim.inodes[id]);
        }
    }
}

impl WriteFile for SimFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.append(buf)?;
        self.with_inode(|inode| {
            inode.ops.push(FileOp::Write {
                at: inode.current.len() as u64,
                len: buf.len() as u64,
            });
            inode.current.extend_from_slice(buf);
        });
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.with_inode(|inode| {
            inode.durable.clone_from(&inode.current);
            inode.ops.clear();
        });
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)?;
        let new_len = to_usize(len)?;
        self.with_inode(|inode| {
            inode.current.resize(new_len, 0);
            inode.ops.push(FileOp::SetLen(len));
        });
        Ok(())
    }
}

impl Storage for PowerLossStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = create_private(path)?;
        let mut sim = self.sim.lock();
        sim.call();
        if self.modelled(path) {
            let id = sim.inodes.len();
            sim.inodes.push(Inode::default());
            sim.names.insert(path.to_owned(), id);
            sim.dir_ops.push(DirOp::Link(path.to_owned(), id));
        }
        drop(sim);
        Ok(self.file(path, file))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = open_existing_for_append(path)?;
        if self.modelled(path) && !self.sim.lock().names.contains_key(path) {
            // A file made outside this storage (after it started): taken as durable.
            let bytes = fs::read(path)?;
            self.sim.lock().adopt_durable(path, bytes);
        }
        Ok(self.file(path, file))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut sim = self.sim.lock();
        sim.call();
        if dir == self.root {
            let ops = std::mem::take(&mut sim.dir_ops);
            for op in ops {
                match op {
                    DirOp::Link(name, id) => {
                        sim.durable_names.insert(name, id);
                    }
                    DirOp::Unlink(name) => {
                        sim.durable_names.remove(&name);
                    }
                }
            }
            Ok(())
        } else {
            OsStorage.sync_dir(dir)
        }
    }

    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        OsStorage.set_read_only(path)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        open_existing_read_only(path)?;
        let mut sim = self.sim.lock();
        sim.call();
        if let Some(&id) = sim.names.get(path) {
            let inode = &mut sim.inodes[id];
            inode.durable.clone_from(&inode.current);
            inode.ops.clear();
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)?;
        let mut sim = self.sim.lock();
        sim.call();
        if self.modelled(path) {
            sim.names.remove(path);
            sim.dir_ops.push(DirOp::Unlink(path.to_owned()));
        }
        Ok(())
    }

    fn reserve(&self, path: &Path, bytes: u64) -> io::Result<()> {
        reserve_file(path, bytes)?;
        let mut sim = self.sim.lock();
        sim.call();
        if self.modelled(path) {
            let len = to_usize(bytes)?;
            let id = match sim.names.get(path) {
                Some(&id) => id,
                None => {
                    let id = sim.inodes.len();
                    sim.inodes.push(Inode::default());
                    sim.names.insert(path.to_owned(), id);
                    sim.dir_ops.push(DirOp::Link(path.to_owned(), id));
                    id
                }
            };
            let inode = &mut sim.inodes[id];
            if inode.current.len() != len {
                inode.current.resize(len, 0);
                inode.ops.push(FileOp::SetLen(bytes));
            }
        }
        Ok(())
    }
}
