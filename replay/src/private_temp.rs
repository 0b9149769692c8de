//! Private temporary directories for the knowledge-base views that reads build.
//!
//! They live in one directory per user, `ROOT/blackbox-UID/` (mode 0700, owned by the
//! user, never a symbolic link), so nobody else can list or read them whatever the
//! umask; ROOT is `$TMPDIR` when set, else `/dev/shm` for a view of at most 64 MiB, else
//! the system's temporary directory ([`view_dir`]). Each is named `view-PID-…` after the process that made it and removed when
//! that process drops it; one a killed process left behind is removed by the next
//! reader, which finds its process gone.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Views up to this many bytes go to memory ([`root`]).
pub const IN_MEMORY_MAX_BYTES: u64 = 64 << 20;

/// Where the per-user directory goes for a view of about `bytes`: `$TMPDIR` when it is
/// set (the user chose); otherwise `/dev/shm` (a tmpfs on Linux) when it exists and the
/// view is at most [`IN_MEMORY_MAX_BYTES`], because opening a view creates, syncs and
/// removes dozens of files, which costs far more on a disk than in memory; otherwise the
/// system's temporary directory.
fn root(bytes: u64) -> PathBuf {
    let shm = Path::new("/dev/shm");
    root_among(
        std::env::var_os("TMPDIR").is_some(),
        shm,
        bytes,
        free_bytes(shm),
    )
    .unwrap_or_else(std::env::temp_dir)
}

/// [`root`]'s choice: `Some(shm)` when memory is chosen (it has at least twice the
/// view's bytes free: the view grows as it catches up), `None` for the temporary
/// directory.
fn root_among(tmpdir_set: bool, shm: &Path, bytes: u64, free: u64) -> Option<PathBuf> {
    (!tmpdir_set && bytes <= IN_MEMORY_MAX_BYTES && bytes.saturating_mul(2) <= free && shm.is_dir())
        .then(|| shm.to_owned())
}

/// Bytes free for an unprivileged user on the filesystem holding `path` (0 when
/// unknown).
fn free_bytes(path: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs writes only into the zeroed struct it is given; the path is a
    // NUL-terminated string that outlives the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &raw mut st) } != 0 {
        return 0;
    }
    st.f_bavail.saturating_mul(st.f_frsize)
}

/// The per-user base directory under `root`: created 0700 if absent; refused if it is
/// not a directory of this user's (a symlink planted by another user, say); tightened
/// to 0700 if its mode lets anyone else in.
fn base_dir(root: &Path) -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = root.join(format!("blackbox-{uid}"));
    let io = |op: &'static str, source: std::io::Error| Error::Io {
        op,
        path: base.clone(),
        source,
    };
    match fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("create the private temporary directory", e)),
    }
    let meta = fs::symlink_metadata(&base).map_err(|e| io("inspect", e))?;
    if !meta.file_type().is_dir() || meta.uid() != uid {
        return Err(Error::Io {
            op: "use as a private temporary directory",
            path: base.clone(),
            source: std::io::Error::other(
                "it is not a directory owned by this user (a symbolic link or another user's): remove it",
            ),
        });
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(&base, fs::Permissions::from_mode(0o700))
            .map_err(|e| io("make private", e))?;
    }
    Ok(base)
}

/// Removes the views that dead processes left in `base` (a process killed mid-read).
fn clean(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("view-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        if pid > 0 && !alive(pid) {
            // Best effort: another reader may be removing it at the same time.
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Whether a process with this pid exists (a pid another user owns counts).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 sends nothing; kill only checks that the pid exists and may be
    // signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// A new private temporary directory for a view of about `bytes` (see the module
/// documentation and [`root`]), removed when dropped.
///
/// # Errors
///
/// [`Error::Io`] when the per-user directory cannot be created or is not safe to use,
/// or the directory cannot be made.
pub fn view_dir(bytes: u64) -> Result<tempfile::TempDir> {
    let base = base_dir(&root(bytes))?;
    clean(&base);
    tempfile::Builder::new()
        .prefix(&format!("view-{}-", std::process::id()))
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|source| Error::Io {
            op: "create a temporary directory for the knowledge base in",
            path: base,
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_chosen_only_for_a_small_view_when_tmpdir_is_unset_and_it_exists() {
        let shm = tempfile::tempdir().expect("a directory");
        let there = Some(shm.path().to_owned());
        let free = 1 << 30;
        assert_eq!(root_among(false, shm.path(), 0, free), there);
        assert_eq!(root_among(false, shm.path(), 64 << 20, free), there);
        assert_eq!(root_among(false, shm.path(), (64 << 20) + 1, free), None);
        assert_eq!(root_among(false, shm.path(), u64::MAX, free), None);
        assert_eq!(root_among(true, shm.path(), 0, free), None, "TMPDIR wins");
        let missing = shm.path().join("absent");
        assert_eq!(root_among(false, &missing, 0, free), None);
        // Twice the view's bytes free, or the disk.
        assert_eq!(root_among(false, shm.path(), 4 << 20, 8 << 20), there);
        assert_eq!(root_among(false, shm.path(), 4 << 20, (8 << 20) - 1), None);
    }
}
