//! A hive-style partition directory, `OUT/<key>=<value>/.../part-<seq>.parquet`: the
//! keys a Parquet export is split by ([`PartitionKey`]), and the directory, written
//! under a temporary name beside `OUT` and renamed into place whole.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::output::{AtomicFile, check_output_dir};

/// What a Parquet export's files are split by: each key a directory level, in the
/// order given (`robot=<name>/date=<YYYY-MM-DD>/kind=<kind>`), as Hive lays out a
/// partitioned table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionKey {
    /// The robot whose log it is: one value per export, its name
    /// ([`ParquetOptions::robot`](super::ParquetOptions::robot)).
    Robot,
    /// The UTC date of the event's time (`ts`), `YYYY-MM-DD`.
    Date,
    /// The event's kind (then not a column of the files: their path holds it).
    Kind,
}

impl PartitionKey {
    /// Its name, in paths and in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            PartitionKey::Robot => "robot",
            PartitionKey::Date => "date",
            PartitionKey::Kind => "kind",
        }
    }

    /// The key named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<PartitionKey> {
        [PartitionKey::Robot, PartitionKey::Date, PartitionKey::Kind]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// The UTC date, `YYYY-MM-DD`, of the day that holds `ns` nanoseconds after the epoch.
pub(crate) fn utc_date(ns: u64) -> String {
    let days = i64::try_from(ns / 86_400_000_000_000).unwrap_or(i64::MAX);
    match jiff::civil::Date::constant(1970, 1, 1).checked_add(jiff::Span::new().days(days)) {
        Ok(d) => d.strftime("%Y-%m-%d").to_string(),
        // Past jiff's last date (9999-12-31): no event time reaches it.
        Err(_) => "9999-12-31".to_owned(),
    }
}

/// A partition directory being written.
#[derive(Debug)]
pub(crate) struct PartitionDir {
    /// The final path, resolved.
    path: PathBuf,
    temp: tempfile::TempDir,
}

impl PartitionDir {
    /// Checks `out` ([`check_output_dir`]) and creates the temporary directory beside
    /// it.
    pub(crate) fn create(out: &Path) -> Result<PartitionDir> {
        let parent = check_output_dir(out)?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(out.file_name().unwrap_or_default());
        prefix.push(".tmp-");
        let temp = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(&parent)
            .map_err(|source| Error::Io {
                op: "create a temporary directory beside",
                path: out.to_owned(),
                source,
            })?;
        Ok(PartitionDir {
            path: parent.join(out.file_name().unwrap_or_default()),
            temp,
        })
    }

    /// The final path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the file of the partition `sub` (`key=value/...`, its values escaped)
    /// whose first row is `first_seq`; returns it and its path under the directory.
    pub(crate) fn file_for(&self, sub: &str, first_seq: u64) -> Result<(AtomicFile, PathBuf)> {
        let dir = self.temp.path().join(sub);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            op: "create the partition directory",
            path: dir.clone(),
            source,
        })?;
        let name = format!("part-{first_seq}.parquet");
        let file = AtomicFile::create(&dir.join(&name))?;
        Ok((file, Path::new(sub).join(name)))
    }

    /// Renames the directory into place (over an empty directory of its name) and
    /// syncs its parent.
    pub(crate) fn commit(self) -> Result<PathBuf> {
        let io = |op: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| Error::Io { op, path, source }
        };
        check_output_dir(&self.path)?;
        let temp = self.temp.keep();
        std::fs::File::open(&temp)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", &temp))?;
        if let Err(e) = std::fs::rename(&temp, &self.path) {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(io("rename into place", &self.path)(e));
        }
        if let Some(parent) = self.path.parent() {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(io("sync the directory of", &self.path))?;
        }
        Ok(self.path)
    }
}

/// A partition value (a kind, a robot's name) as a path segment: letters, digits, `.`, `_` and `-` as they are, every
/// other byte as `%XX` (upper-case hex), as Hive escapes partition values; a kind of
/// only dots is escaped whole, so that no segment is `.` or `..`.
pub fn escape(kind: &str) -> String {
    let only_dots = kind.bytes().all(|b| b == b'.');
    let mut s = String::with_capacity(kind.len());
    for b in kind.bytes() {
        let plain =
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || (b == b'.' && !only_dots);
        if plain {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{escape, utc_date};

    #[test]
    fn kinds_become_safe_path_segments() {
        assert_eq!(escape("sensor.imu"), "sensor.imu");
        assert_eq!(escape("a/b"), "a%2Fb");
        assert_eq!(escape("x=1 %"), "x%3D1%20%25");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape("é"), "%C3%A9");
        assert_eq!(escape(""), "");
    }

    #[test]
    fn dates_are_utc_days() {
        // Python's datetime: 2026-12-02 is 20 789 days after 1970-01-01.
        let day = 86_400_000_000_000u64;
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(day - 1), "1970-01-01");
        assert_eq!(utc_date(20_789 * day), "2026-12-02");
        assert_eq!(utc_date(20_789 * day - 1), "2026-12-01");
        // 2024 is a leap year: day 19 782 is 2024-02-29.
        assert_eq!(utc_date(19_782 * day + 5), "2024-02-29");
        assert_eq!(utc_date(u64::MAX), "2554-07-21");
    }
}
