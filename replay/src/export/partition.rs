//! A hive-style partition directory, `OUT/kind=<kind>/part-0.parquet`: written under a
//! temporary name beside `OUT` and renamed into place whole.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::output::{AtomicFile, check_output_dir};

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

    /// Creates the file of `kind`'s partition; returns it and its path under the
    /// directory.
    pub(crate) fn file_for(&self, kind: &str) -> Result<(AtomicFile, PathBuf)> {
        let sub = format!("kind={}", escape(kind));
        let dir = self.temp.path().join(&sub);
        std::fs::create_dir(&dir).map_err(|source| Error::Io {
            op: "create the partition directory",
            path: dir.clone(),
            source,
        })?;
        let file = AtomicFile::create(&dir.join("part-0.parquet"))?;
        Ok((file, Path::new(&sub).join("part-0.parquet")))
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

/// A kind as a path segment: letters, digits, `.`, `_` and `-` as they are, every
/// other byte as `%XX` (upper-case hex), as Hive escapes partition values; a kind of
/// only dots is escaped whole, so that no segment is `.` or `..`.
pub(crate) fn escape(kind: &str) -> String {
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
    use super::escape;

    #[test]
    fn kinds_become_safe_path_segments() {
        assert_eq!(escape("sensor.imu"), "sensor.imu");
        assert_eq!(escape("a/b"), "a%2Fb");
        assert_eq!(escape("x=1 %"), "x%3D1%20%25");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape("é"), "%C3%A9");
        assert_eq!(escape(""), "");
    }
}
