//! The recorder's shipper ([`Config::ship`](crate::Config::ship), feature `ship`): a
//! thread of its own that ships each segment once it is sealed to object storage
//! (`blackbox-ship`), and tells the log how far it got, so that a log under a disk
//! budget prunes only what is shipped. It reads sealed segment files and the store,
//! never the writer's state: `record()` does not wait for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use blackbox_log::ShippedThrough;
use blackbox_ship::{Action, Remote, ShipOptions};
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Where and how a recorder ships its sealed segments.
#[derive(Debug, Clone)]
pub struct Ship {
    url: String,
    interval: Duration,
    prune_after_shipped: bool,
    close_wait: Duration,
}

impl Ship {
    /// Ships to `url`: `s3://BUCKET/PREFIX` (credentials, region and endpoint from the
    /// environment, as `blackbox ship` reads them), `file:///PATH` or a plain directory.
    pub fn to(url: impl Into<String>) -> Ship {
        Ship {
            url: url.into(),
            interval: Duration::from_secs(1),
            prune_after_shipped: true,
            close_wait: Duration::from_secs(10),
        }
    }

    /// How often the shipper looks for newly sealed segments (default 1 s, at least
    /// 10 ms), and how long it waits after a failed pass before the next.
    pub fn interval(mut self, interval: Duration) -> Ship {
        self.interval = interval.max(MIN_INTERVAL);
        self
    }

    /// How long `Recorder::close` waits for the shipper's last pass (default 10 s):
    /// past it, the close returns and the pass goes on in the background until it
    /// ends or the process does (a pass stopped anywhere resumes at the next run).
    pub fn close_wait(mut self, wait: Duration) -> Ship {
        self.close_wait = wait;
        self
    }

    /// Whether a log under a disk budget prunes only segments shipped (default true):
    /// its budget then waits for shipping, and every prune record says whether what it
    /// removed was shipped. A full disk still removes the oldest segments.
    pub fn prune_after_shipped(mut self, hold: bool) -> Ship {
        self.prune_after_shipped = hold;
        self
    }

    pub(crate) fn holds_pruning(&self) -> bool {
        self.prune_after_shipped
    }
}

/// The shortest interval between passes.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// What the shipper has done so far ([`Recorder::ship_status`](crate::Recorder::ship_status)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShipStatus {
    /// The last seq of the last segment of this log that a pass found in the store's
    /// manifest (uploaded then, or before).
    pub shipped_through: Option<u64>,
    /// Passes finished, with or without an error.
    pub passes: u64,
    /// Segments uploaded by this recorder's shipper.
    pub uploaded: u64,
    /// The last pass's error, if it failed (the next pass retries).
    pub last_error: Option<String>,
    /// A pass is under way.
    pub passing: bool,
    /// The thread has ended: after a close, its last pass is done (or was not run, the
    /// one before having failed). Still false after a close that stopped waiting.
    pub ended: bool,
}

/// The running shipper.
#[derive(Debug)]
pub(crate) struct Shipper {
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<ShipStatus>>,
    handle: Option<JoinHandle<()>>,
    /// Closed when the thread ends.
    done: crossbeam_channel::Receiver<()>,
    close_wait: Duration,
}

/// The store `ship` names, opened before the log is, so that a URL the shipper cannot
/// use stops the recorder before it writes anything.
pub(crate) fn open_remote(ship: &Ship) -> Result<Remote> {
    Remote::open(&ship.url).map_err(|e| Error::Ship {
        url: ship.url.clone(),
        why: e.to_string(),
    })
}

impl Shipper {
    /// Starts shipping the log in `dir` to `remote` as `ship` says, raising `through` as
    /// passes end.
    pub(crate) fn start(
        dir: PathBuf,
        ship: &Ship,
        remote: Remote,
        through: ShippedThrough,
        key: Option<blackbox_log::ChainKey>,
    ) -> Result<Shipper> {
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(ShipStatus::default()));
        let options = ShipOptions {
            key,
            ..ShipOptions::default()
        };
        let interval = ship.interval;
        let (thread_stop, thread_status) = (Arc::clone(&stop), Arc::clone(&status));
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        let dir_for_error = dir.clone();
        let handle = std::thread::Builder::new()
            .name("blackbox-ship".to_owned())
            .spawn(move || {
                // Dropped when the thread ends: the close waiting on it wakes.
                let _done = done_tx;
                loop {
                    // Asked to stop before this pass: it is the last, and it runs only
                    // if the one before reached the store (a close does not wait out
                    // a store that is down).
                    let last = thread_stop.load(Ordering::SeqCst);
                    if last && thread_status.lock().last_error.is_some() {
                        break;
                    }
                    thread_status.lock().passing = true;
                    let pass = blackbox_ship::ship_to(&dir, &remote, &options, |_| {});
                    let mut s = thread_status.lock();
                    s.passing = false;
                    s.passes += 1;
                    match pass {
                        Ok(report) => {
                            // Shipped is what this pass found of this log in the
                            // manifest (each checked against the local segment), not
                            // the manifest's end: a copy of this log may have shipped
                            // further on another path.
                            if let Some(seq) = report.segments.iter().map(|o| o.last_seq).max() {
                                through.set(seq);
                            }
                            s.shipped_through = through.get();
                            s.uploaded += report.count(Action::Uploaded) as u64;
                            s.last_error = None;
                        }
                        Err(e) => s.last_error = Some(e.to_string()),
                    }
                    drop(s);
                    if last {
                        break;
                    }
                    std::thread::park_timeout(interval);
                }
                thread_status.lock().ended = true;
            })
            .map_err(|e| {
                Error::from(blackbox_log::Error::Io {
                    op: "start the shipper thread for",
                    path: dir_for_error,
                    source: e,
                })
            })?;
        Ok(Shipper {
            stop,
            status,
            handle: Some(handle),
            done,
            close_wait: ship.close_wait,
        })
    }

    /// The status the thread keeps.
    pub(crate) fn status(&self) -> Arc<Mutex<ShipStatus>> {
        Arc::clone(&self.status)
    }

    /// Stops the thread after one last pass (the segments the writer sealed last),
    /// unless the pass before it failed; waits for it `close_wait` at most, then lets
    /// it end on its own.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            handle.thread().unpark();
            // Disconnected when the thread ends; a timeout leaves it running, detached.
            if let Err(crossbeam_channel::RecvTimeoutError::Disconnected) =
                self.done.recv_timeout(self.close_wait)
            {
                let _ = handle.join();
            }
        }
    }
}
