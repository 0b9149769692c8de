//! Running the contenders: the [`Contender`] trait, rounds that alternate the
//! contenders, checks of what each one reads back, and medians.
//!
//! One round runs every contender once, in turn, each in a fresh empty directory:
//! write the whole workload (timed from opening to closing, durable as the row says),
//! measure the bytes on disk, read every event back (timed from opening), then answer
//! the window query (timed from opening). Reads follow the write at once, so they are
//! served from a warm page cache. Every read is checked against the workload's own
//! [`Tally`]; a wrong answer stops the run. Rounds start with a different contender
//! each time, so drift in the machine's load falls on every row alike.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Result;
use crate::workload::{Tally, WindowQuery, Workload};

/// What a row says about itself in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Description {
    /// Stable key, used by the ratios under the table.
    pub id: &'static str,
    /// Row label.
    pub name: &'static str,
    /// When written data is forced to stable storage.
    pub durability: &'static str,
    /// What the format protects its data with, and whether the read path checks it.
    pub integrity: &'static str,
    /// How the window query is answered.
    pub window_path: &'static str,
}

/// A storage system under comparison, used the way a careful user of it would.
///
/// To add a row, implement this trait and list the value in `contenders()` in
/// `src/bin/compare.rs`.
pub trait Contender {
    /// What the row says about itself.
    fn describe(&self) -> Description;

    /// Writes every event of `workload`, in order, into `dir` (which exists and is
    /// empty), and returns once they are as durable as the description says.
    ///
    /// # Errors
    ///
    /// Any I/O or format error.
    fn write(&self, dir: &Path, workload: &Workload) -> Result<()>;

    /// Reads every event back from `dir` and tallies them.
    ///
    /// # Errors
    ///
    /// Any I/O or format error, including data that fails the system's own checks.
    fn read_all(&self, dir: &Path) -> Result<Tally>;

    /// Answers `query` from `dir` by the system's best access path and tallies the
    /// events found.
    ///
    /// # Errors
    ///
    /// As [`Contender::read_all`].
    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally>;
}

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Rounds; the report shows the median of each figure.
    pub rounds: u32,
    /// Where the per-round temporary directories are created.
    pub base_dir: PathBuf,
}

/// What the workload must read back as: computed once from the events themselves.
#[derive(Debug, Clone)]
pub struct Expected {
    /// Every event.
    pub all: Tally,
    /// The window query.
    pub query: WindowQuery,
    /// Its answer.
    pub window: Tally,
}

impl Expected {
    /// The expectations of `workload`.
    #[must_use]
    pub fn of(workload: &Workload) -> Expected {
        let query = workload.window();
        Expected {
            all: workload.expected_all(),
            window: workload.expected_window(&query),
            query,
        }
    }
}

/// One round of one contender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Writing every event, open to close.
    pub write: Duration,
    /// Reading every event back, open to end.
    pub read: Duration,
    /// Answering the window query, open to end.
    pub window: Duration,
    /// Bytes allocated on disk after the write.
    pub disk_bytes: u64,
}

/// The medians of one contender over all rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What the row says about itself.
    pub description: Description,
    /// Events written per second.
    pub write_eps: f64,
    /// Events read back per second.
    pub read_eps: f64,
    /// Time to answer the window query.
    pub window: Duration,
    /// Bytes allocated on disk divided by the workload's logical bytes.
    pub disk_ratio: f64,
}

/// Runs one round of `contender` in a fresh directory under `settings.base_dir`.
///
/// # Errors
///
/// Any error of the contender, or a read whose tally differs from `expected`, each
/// labelled with the row and the phase.
pub fn run_once(
    contender: &dyn Contender,
    workload: &Workload,
    expected: &Expected,
    settings: &Settings,
) -> Result<Sample> {
    let name = contender.describe().name;
    let dir = tempfile::Builder::new()
        .prefix("blackbox-compare-")
        .tempdir_in(&settings.base_dir)
        .map_err(|e| {
            format!(
                "{name}: cannot create a temporary directory in {}: {e}",
                settings.base_dir.display()
            )
        })?;

    let start = Instant::now();
    contender
        .write(dir.path(), workload)
        .map_err(|e| format!("{name}: write failed: {e}"))?;
    let write = start.elapsed();

    let disk_bytes = dir_usage(dir.path())
        .map_err(|e| format!("{name}: cannot measure bytes on disk: {e}"))?
        .allocated;

    let start = Instant::now();
    let all = contender
        .read_all(dir.path())
        .map_err(|e| format!("{name}: read failed: {e}"))?;
    let read = start.elapsed();
    expected
        .all
        .check(&all)
        .map_err(|e| format!("{name}: reading every event: {e}"))?;

    let start = Instant::now();
    let window = contender
        .read_window(dir.path(), &expected.query)
        .map_err(|e| format!("{name}: window query failed: {e}"))?;
    let window_time = start.elapsed();
    expected
        .window
        .check(&window)
        .map_err(|e| format!("{name}: window query: {e}"))?;

    dir.close()
        .map_err(|e| format!("{name}: cannot remove the temporary directory: {e}"))?;
    Ok(Sample {
        write,
        read,
        window: window_time,
        disk_bytes,
    })
}

/// Runs `settings.rounds` rounds over `contenders` and returns one row per contender,
/// in the order given. Round `r` starts with contender `r mod n` and goes on in list
/// order. `progress` hears about every step.
///
/// # Errors
///
/// The first error of [`run_once`].
pub fn measure(
    contenders: &[Box<dyn Contender>],
    workload: &Workload,
    settings: &Settings,
    mut progress: impl FnMut(&str),
) -> Result<Vec<Row>> {
    let expected = Expected::of(workload);
    let n = contenders.len();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); n];
    for round in 0..settings.rounds {
        for k in 0..n {
            let i = (k + round as usize) % n;
            let contender = contenders[i].as_ref();
            let sample = run_once(contender, workload, &expected, settings)?;
            progress(&format!(
                "round {}/{}: {}: write {:.3} s, read {:.3} s, window {:.2} ms",
                round + 1,
                settings.rounds,
                contender.describe().name,
                sample.write.as_secs_f64(),
                sample.read.as_secs_f64(),
                sample.window.as_secs_f64() * 1e3,
            ));
            samples[i].push(sample);
        }
    }
    let events = workload.len() as f64;
    let logical = workload.logical_bytes() as f64;
    Ok(contenders
        .iter()
        .zip(samples)
        .map(|(contender, samples)| {
            let secs = |f: fn(&Sample) -> Duration| {
                let mut v: Vec<f64> = samples.iter().map(|s| f(s).as_secs_f64()).collect();
                median(&mut v).unwrap_or(f64::NAN)
            };
            let mut disk: Vec<f64> = samples.iter().map(|s| s.disk_bytes as f64).collect();
            Row {
                description: contender.describe(),
                write_eps: events / secs(|s| s.write).max(f64::MIN_POSITIVE),
                read_eps: events / secs(|s| s.read).max(f64::MIN_POSITIVE),
                window: Duration::from_secs_f64(secs(|s| s.window).max(0.0)),
                disk_ratio: median(&mut disk).unwrap_or(f64::NAN) / logical,
            }
        })
        .collect())
}

/// Median of `values` (mean of the middle two for an even count); `None` if empty.
#[must_use]
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => Some(values[mid]),
        _ => Some(f64::midpoint(values[mid - 1], values[mid])),
    }
}

/// Space taken by a directory tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Sum of file lengths, as `ls -l` shows them.
    pub apparent: u64,
    /// Bytes allocated on the device, as `du` counts them: smaller than `apparent` for
    /// sparse (preallocated but unwritten) files, larger for a file's last partial block.
    pub allocated: u64,
}

/// Space taken by all files under `path`, recursively.
///
/// # Errors
///
/// Any error while listing directories or reading metadata.
pub fn dir_usage(path: &Path) -> std::io::Result<DiskUsage> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok(DiskUsage {
            apparent: meta.len(),
            allocated: allocated_bytes(&meta),
        });
    }
    let mut total = DiskUsage::default();
    for entry in fs::read_dir(path)? {
        let usage = dir_usage(&entry?.path())?;
        total.apparent += usage.apparent;
        total.allocated += usage.allocated;
    }
    Ok(total)
}

#[cfg(unix)]
fn allocated_bytes(meta: &fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    // `st_blocks` counts 512-byte units whatever the file system's block size.
    meta.blocks() * 512
}

#[cfg(not(unix))]
fn allocated_bytes(meta: &fs::Metadata) -> u64 {
    meta.len()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::workload::Variant;

    #[test]
    fn median_handles_odd_even_and_empty() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn dir_usage_counts_every_file_below() -> Result<()> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("a"), [0u8; 10])?;
        fs::create_dir(dir.path().join("sub"))?;
        fs::write(dir.path().join("sub").join("b"), [0u8; 5_000])?;
        let usage = dir_usage(dir.path())?;
        assert_eq!(usage.apparent, 5_010);
        assert!(usage.allocated >= 5_010, "{usage:?}");
        Ok(())
    }

    /// A contender that keeps its events in memory and can be told to lose one on the
    /// way back, to show that the harness refuses a wrong answer.
    #[derive(Debug, Default)]
    struct InMemory {
        name: &'static str,
        stored: RefCell<Vec<(u8, u64, Vec<u8>)>>,
        lose_one: bool,
        log: RefCell<Vec<&'static str>>,
    }

    impl Contender for InMemory {
        fn describe(&self) -> Description {
            Description {
                id: "memory",
                name: self.name,
                durability: "none",
                integrity: "none",
                window_path: "scan",
            }
        }

        fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
            self.log.borrow_mut().push("write");
            *self.stored.borrow_mut() = workload
                .iter()
                .map(|e| (e.kind, e.ts_ns, e.payload.to_vec()))
                .collect();
            fs::write(dir.join("marker"), b"x")?;
            Ok(())
        }

        fn read_all(&self, _dir: &Path) -> Result<Tally> {
            self.log.borrow_mut().push("read");
            let mut tally = Tally::default();
            let skip = usize::from(self.lose_one);
            for (kind, ts, payload) in self.stored.borrow().iter().skip(skip) {
                tally.add(*kind, *ts, payload)?;
            }
            Ok(tally)
        }

        fn read_window(&self, _dir: &Path, query: &WindowQuery) -> Result<Tally> {
            self.log.borrow_mut().push("window");
            let mut tally = Tally::default();
            for (kind, ts, payload) in self.stored.borrow().iter() {
                if query.matches(*kind, *ts) {
                    tally.add(*kind, *ts, payload)?;
                }
            }
            Ok(tally)
        }
    }

    #[test]
    fn a_contender_that_reads_back_wrong_stops_the_run() -> Result<()> {
        let workload = Workload::generate(1_000, Variant::Binary)?;
        let base = tempfile::tempdir()?;
        let settings = Settings {
            rounds: 1,
            base_dir: base.path().to_owned(),
        };
        let expected = Expected::of(&workload);
        let honest = InMemory {
            name: "in memory",
            ..InMemory::default()
        };
        let sample = run_once(&honest, &workload, &expected, &settings)?;
        assert!(sample.disk_bytes > 0);
        assert_eq!(*honest.log.borrow(), ["write", "read", "window"]);

        let lossy = InMemory {
            name: "in memory",
            lose_one: true,
            ..InMemory::default()
        };
        let err = run_once(&lossy, &workload, &expected, &settings)
            .err()
            .ok_or("a lossy read was accepted")?;
        assert!(
            err.to_string().contains("in memory: reading every event"),
            "{err}"
        );
        // Every temporary directory is gone.
        assert_eq!(fs::read_dir(base.path())?.count(), 0);
        Ok(())
    }

    #[test]
    fn rounds_alternate_and_rows_keep_the_list_order() -> Result<()> {
        let workload = Workload::generate(500, Variant::Json)?;
        let base = tempfile::tempdir()?;
        let settings = Settings {
            rounds: 3,
            base_dir: base.path().to_owned(),
        };
        let named = |name| InMemory {
            name,
            ..InMemory::default()
        };
        let contenders: Vec<Box<dyn Contender>> = vec![Box::new(named("a")), Box::new(named("b"))];
        let mut order = Vec::new();
        let rows = measure(&contenders, &workload, &settings, |line| {
            order.push(line.to_owned());
        })?;
        assert_eq!(rows.len(), 2);
        // Each round runs both, starting one further along the list each time.
        let who: Vec<&str> = order
            .iter()
            .map(|line| line.split(": ").nth(1).unwrap_or(""))
            .collect();
        assert_eq!(who, ["a", "b", "b", "a", "a", "b"], "{order:?}");
        assert!(order[2].starts_with("round 2/3"), "{order:?}");
        assert_eq!(
            rows.iter().map(|r| r.description.name).collect::<Vec<_>>(),
            ["a", "b"]
        );
        for row in &rows {
            assert!(row.write_eps > 0.0 && row.read_eps > 0.0, "{row:?}");
            // One small file per directory, over 500 events' logical bytes.
            assert!(row.disk_ratio > 0.0 && row.disk_ratio < 1.0, "{row:?}");
        }
        Ok(())
    }
}
