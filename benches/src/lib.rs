//! Harness for the `compare` binary: one fixed workload, a [`Contender`] trait
//! that every storage format implements, and the measurement and reporting
//! code shared by all rows.
//!
//! Every contender gets the same events, a fresh empty directory per run, and
//! is timed end to end: opening, writing every event, making it durable (as
//! far as that contender's [`Contender::durability`] says) and closing. Reads
//! happen right after the write, so they are served from a warm page cache.

use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod blackbox;
pub mod peers;

/// Size of every event payload, in bytes.
pub const PAYLOAD_LEN: usize = 100;

/// Error type used throughout the harness; peers' errors are boxed into it.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Result alias used throughout the harness.
pub type Result<T, E = BoxError> = std::result::Result<T, E>;

/// One recorded event: sequence number, nanosecond timestamp and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Position in the stream, starting at 0.
    pub seq: u64,
    /// Wall-clock timestamp in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Opaque payload bytes.
    pub payload: [u8; PAYLOAD_LEN],
}

/// First timestamp of the generated stream (2023-11-14T22:13:20Z).
const BASE_TS_NS: u64 = 1_700_000_000_000_000_000;
/// Nominal spacing between events: 1 µs, plus up to 999 ns of jitter.
const TS_STEP_NS: u64 = 1_000;

/// SplitMix64: tiny, fast and good enough to make payloads incompressible.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Builds the workload: `n` events with deterministic pseudo-random payloads
/// and strictly increasing timestamps. The same `n` always gives the same
/// events, so every contender and every run sees identical input.
///
/// # Errors
///
/// Fails if `n` does not fit in memory addressing (`usize`).
pub fn generate_events(n: u64) -> Result<Vec<Event>> {
    let mut rng = SplitMix64(0x0B1A_C0B0_0000_0001);
    let mut events = Vec::with_capacity(usize::try_from(n)?);
    for seq in 0..n {
        let mut payload = [0u8; PAYLOAD_LEN];
        for chunk in payload.chunks_mut(8) {
            let word = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        let jitter = rng.next_u64() % TS_STEP_NS;
        events.push(Event {
            seq,
            ts_ns: BASE_TS_NS + seq * TS_STEP_NS + jitter,
            payload,
        });
    }
    Ok(events)
}

/// A storage format under comparison.
///
/// To add a row, implement this trait and list the value in the contender
/// list in `src/bin/compare.rs`.
pub trait Contender {
    /// Row label in the report.
    fn name(&self) -> &str;

    /// What each record keeps besides the payload, e.g. `"seq, ts"`.
    fn keeps(&self) -> &str;

    /// When written data is forced to stable storage.
    fn durability(&self) -> &str;

    /// Integrity protection the format puts on the data.
    fn integrity(&self) -> &str;

    /// Whether the contender stores anything; `false` for compute-only rows,
    /// whose bytes-on-disk column is then reported as not applicable.
    fn uses_disk(&self) -> bool {
        true
    }

    /// Writes all `events`, in order, into `dir` (which exists and is empty)
    /// and returns once they are as durable as [`Self::durability`] says.
    ///
    /// # Errors
    ///
    /// Any I/O or format error.
    fn write(&self, dir: &Path, events: &[Event]) -> Result<()>;

    /// Reads back everything [`Self::write`] put into `dir` and returns the
    /// number of events found, or `None` if the contender has no read path.
    ///
    /// # Errors
    ///
    /// Any I/O or format error, including records that fail to decode.
    fn read(&self, dir: &Path) -> Result<Option<u64>>;
}

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Runs per contender; the report shows the median.
    pub runs: u32,
    /// Where the per-run temporary directories are created.
    pub base_dir: PathBuf,
}

/// Medians over all runs of one contender.
#[derive(Debug, Clone)]
pub struct Row {
    /// [`Contender::name`].
    pub name: String,
    /// [`Contender::keeps`].
    pub keeps: String,
    /// [`Contender::durability`].
    pub durability: String,
    /// [`Contender::integrity`].
    pub integrity: String,
    /// Median events per second written.
    pub write_eps: f64,
    /// Median events per second read back, if the contender reads.
    pub read_eps: Option<f64>,
    /// Median allocated bytes on disk divided by payload bytes, if the
    /// contender stores.
    pub disk_ratio: Option<f64>,
    /// Median apparent file size divided by payload bytes, if the contender
    /// stores. Exceeds [`Self::disk_ratio`] for sparse, preallocated files.
    pub size_ratio: Option<f64>,
}

/// Runs `contender` `settings.runs` times over `events`, each run in a fresh
/// temporary directory, and returns the medians. Progress goes to stderr.
///
/// # Errors
///
/// Any error from the contender, labelled with its name and the phase, or a
/// read-back count that differs from the number of events written.
pub fn measure(contender: &dyn Contender, events: &[Event], settings: &Settings) -> Result<Row> {
    let name = contender.name();
    let expected = u64::try_from(events.len())?;
    let payload_bytes = expected * u64::try_from(PAYLOAD_LEN)?;

    let mut write_eps = Vec::new();
    let mut read_eps = Vec::new();
    let mut disk_ratio = Vec::new();
    let mut size_ratio = Vec::new();

    for run in 1..=settings.runs {
        eprintln!("[compare] {name}: run {run}/{}", settings.runs);
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
            .write(dir.path(), events)
            .map_err(|e| format!("{name}: write failed: {e}"))?;
        write_eps.push(rate(expected, start.elapsed()));

        if contender.uses_disk() {
            let usage = dir_usage(dir.path())
                .map_err(|e| format!("{name}: cannot measure bytes on disk: {e}"))?;
            // Exact up to 2^53 bytes, far past anything this harness writes.
            disk_ratio.push(usage.allocated as f64 / payload_bytes as f64);
            size_ratio.push(usage.apparent as f64 / payload_bytes as f64);
        }

        let start = Instant::now();
        let read = contender
            .read(dir.path())
            .map_err(|e| format!("{name}: read failed: {e}"))?;
        let elapsed = start.elapsed();
        if let Some(count) = read {
            if count != expected {
                return Err(
                    format!("{name}: read back {count} events, expected {expected}").into(),
                );
            }
            read_eps.push(rate(expected, elapsed));
        }

        dir.close()
            .map_err(|e| format!("{name}: cannot remove the temporary directory: {e}"))?;
    }

    Ok(Row {
        name: name.to_owned(),
        keeps: contender.keeps().to_owned(),
        durability: contender.durability().to_owned(),
        integrity: contender.integrity().to_owned(),
        write_eps: median(&mut write_eps).unwrap_or(0.0),
        read_eps: median(&mut read_eps),
        disk_ratio: median(&mut disk_ratio),
        size_ratio: median(&mut size_ratio),
    })
}

/// Events per second for `events` handled in `elapsed`.
fn rate(events: u64, elapsed: Duration) -> f64 {
    // Exact up to 2^53 events, far past anything this harness writes.
    let events = events as f64;
    events / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Median of `values` (mean of the middle two for an even count); `None` if empty.
fn median(values: &mut [f64]) -> Option<f64> {
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
    /// Bytes actually allocated on the device, as `du` counts them: smaller
    /// than `apparent` for sparse (preallocated but unwritten) files.
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

/// Renders `rows` as a markdown table.
#[must_use]
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| contender | keeps | durability | integrity | write (events/s) | read (events/s) | disk / payload | file size / payload |\n",
    );
    out.push_str("|---|---|---|---|---:|---:|---:|---:|\n");
    for row in rows {
        let read = row.read_eps.map_or_else(|| "n/a".to_owned(), group_digits);
        let ratio = |r: Option<f64>| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}"));
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            row.keeps,
            row.durability,
            row.integrity,
            group_digits(row.write_eps),
            read,
            ratio(row.disk_ratio),
            ratio(row.size_ratio),
        );
    }
    out
}

/// Formats a rate rounded to a whole number with `,` thousands separators.
fn group_digits(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_deterministic_and_ordered() -> Result<()> {
        let a = generate_events(1_000)?;
        let b = generate_events(1_000)?;
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].ts_ns < w[1].ts_ns));
        assert!(a.iter().enumerate().all(|(i, e)| e.seq == i as u64));
        assert_ne!(a[0].payload, a[1].payload);
        Ok(())
    }

    #[test]
    fn median_handles_odd_even_and_empty() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(0.0), "0");
        assert_eq!(group_digits(999.4), "999");
        assert_eq!(group_digits(1_000.0), "1,000");
        assert_eq!(group_digits(1_234_567.8), "1,234,568");
    }
}
