//! `blackbox export --partition ... --out s3://BUCKET/PREFIX`: a partitioned Parquet
//! export written to a local temporary directory, then put under a prefix that many
//! robots' exports share (a data lake), its manifest last.

use std::path::{Path, PathBuf};

use blackbox_replay::{ExportManifest, partition_value};
use blackbox_ship::LakeFile;

use super::CliError;

/// The robot's name an export to a lake goes under: `--robot`, or the last part of the
/// log's directory or URL.
pub(super) fn robot_name(given: Option<&str>, dir: &Path) -> Result<String, CliError> {
    let name = match given {
        Some(name) => name.to_owned(),
        None => {
            let text = dir.to_string_lossy();
            let trimmed = text.trim_end_matches('/');
            let last = if blackbox_ship::is_url(trimmed) {
                trimmed.rsplit('/').next().map(str::to_owned)
            } else {
                std::path::absolute(dir)
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            };
            last.ok_or_else(|| {
                CliError::new(format!(
                    "{} names no robot: give --robot NAME",
                    dir.display()
                ))
            })?
        }
    };
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(CliError::new(format!(
            "the robot's name {name:?} is empty or holds a control character: give --robot NAME"
        )));
    }
    Ok(name)
}

/// What an upload to a lake did.
pub(super) enum Uploaded {
    /// Nothing: the export has no rows.
    Nothing,
    /// Nothing: the lake holds a manifest of this robot for this very range.
    AlreadyThere,
    /// Objects uploaded, and objects found already there with the same bytes.
    Objects { uploaded: usize, kept: usize },
}

/// Puts the export `m`, written under `root` (its paths relative to it, the events'
/// directory named `local_name`), under the lake `url`; returns the manifest as
/// uploaded (paths relative to the URL) and what was done.
///
/// A lake holds each robot's seqs once: an export whose range overlaps one that a
/// manifest of the same robot lists is refused, but for the very same range, which is
/// already there.
pub(super) fn upload(
    mut m: ExportManifest,
    root: &Path,
    local_name: &str,
    url: &str,
    robot: &str,
) -> Result<(ExportManifest, Uploaded), CliError> {
    let url = url.trim_end_matches('/');
    m.file = PathBuf::from(url);
    let (Some(first), Some(last)) = (m.first_seq, m.last_seq) else {
        m.manifest_file = PathBuf::new();
        return Ok((m, Uploaded::Nothing));
    };
    let robot_part = partition_value(robot);
    let manifest_name = format!("{robot_part}.seq-{first}-{last}.manifest.json");
    m.manifest_file = PathBuf::from(format!("{url}/{MANIFESTS}/{manifest_name}"));
    let listed = blackbox_ship::lake_listing(url, MANIFESTS, &format!("{robot_part}.seq-"))
        .map_err(|e| CliError::new(e.to_string()))?;
    let pending_name = format!("{robot_part}.seq-{first}-{last}{PENDING}");
    let ranges: Vec<(u64, u64, &String, bool)> = listed
        .iter()
        .filter_map(|name| listed_range(name, &robot_part).map(|(a, b, p)| (a, b, name, p)))
        // A marker beside its manifest: an export that ended before removing it.
        .filter(|&(a, b, _, pending)| {
            !pending
                || !listed
                    .iter()
                    .any(|n| *n == format!("{robot_part}.seq-{a}-{b}{MANIFEST}"))
        })
        .collect();
    // The advice: after the robot's last seq in the lake.
    let next = ranges.iter().map(|&(_, b, _, _)| b.saturating_add(1)).max();
    let mut files = Vec::with_capacity(m.files.len() + 1);
    for f in &mut m.files {
        let local = root.join(&f.path);
        let under = f.path.strip_prefix(local_name).unwrap_or(&f.path);
        let key = under
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        files.push(LakeFile {
            key: key.clone(),
            local,
            bytes: f.bytes,
            blake3: f.blake3,
        });
        f.path = PathBuf::from(key);
    }
    let mut json = m.to_json();
    // The lake's manifest names the lake; its files' paths are relative to it.
    json["file"]["path"] = url.into();
    for &(a, b, name, pending) in &ranges {
        if !(a <= last && first <= b) || *name == pending_name {
            // Not these seqs, or this very export, stopped: running it again finishes it.
            continue;
        }
        if pending {
            return Err(CliError::new(format!(
                "an export of robot {robot}'s seqs {a}..={b} into {url} stopped part way ({MANIFESTS}/{name} lists its files), and this export's {first}..={last} overlap it: nothing was uploaded; finish it by running it over its seqs, --from-seq {a} --to-seq {b} (if the log no longer holds them all, remove the objects the marker lists, and the marker, then export again)"
            )));
        }
        if *name == manifest_name {
            // The same seqs: the same export only if it lists the same files.
            let there =
                blackbox_ship::lake_read(url, &format!("{MANIFESTS}/{name}"), MANIFEST_BYTES_MAX)
                    .map_err(|e| CliError::new(e.to_string()))?
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            if there.is_some_and(|t| t["files"] == json["files"]) {
                return Ok((m, Uploaded::AlreadyThere));
            }
            return Err(CliError::new(format!(
                "{url}/{MANIFESTS}/{name} lists another export of robot {robot}'s seqs {a}..={b} (other files: another --kind, or another log): nothing was uploaded; a lake holds a robot's seqs once"
            )));
        }
        return Err(CliError::new(format!(
            "robot {robot}'s seqs {a}..={b} are already in {url} ({MANIFESTS}/{name}), and this export's {first}..={last} overlap them: nothing was uploaded; export the events after the robot's last seq in the lake with --from-seq {}{}",
            next.unwrap_or(b.saturating_add(1)),
            if first < a {
                format!(", or those before these with --to-seq {}", a - 1)
            } else {
                String::new()
            }
        )));
    }
    let mut text = serde_json::to_vec_pretty(&json)
        .map_err(|e| CliError::new(format!("cannot write the lake's manifest: {e}")))?;
    text.push(b'\n');
    let local = root.join("lake.manifest.json");
    std::fs::write(&local, &text).map_err(|e| {
        CliError::new(format!(
            "cannot write the lake's manifest to {}: {e}",
            local.display()
        ))
    })?;
    // First a marker that lists the files (the same for the same export, so that
    // running a stopped one again keeps it): while it stands without its manifest, the
    // seqs are taken, and an export over others is refused.
    let listing: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            serde_json::json!({
                "path": f.key,
                "bytes": f.bytes,
                "blake3": blackbox_replay::hex(&f.blake3),
            })
        })
        .collect();
    let mut marker = serde_json::to_vec_pretty(&serde_json::json!({
        "pending": "an export to this lake under way or stopped part way: these files, then its manifest",
        "robot": robot,
        "first_seq": first,
        "last_seq": last,
        "files": listing,
    }))
    .map_err(|e| CliError::new(format!("cannot write the lake's marker: {e}")))?;
    marker.push(b'\n');
    let marker_local = root.join("lake.pending.json");
    std::fs::write(&marker_local, &marker).map_err(|e| {
        CliError::new(format!(
            "cannot write the lake's marker to {}: {e}",
            marker_local.display()
        ))
    })?;
    files.insert(
        0,
        LakeFile {
            key: format!("{MANIFESTS}/{pending_name}"),
            local: marker_local,
            bytes: marker.len() as u64,
            blake3: *blake3::hash(&marker).as_bytes(),
        },
    );
    files.push(LakeFile {
        key: format!("{MANIFESTS}/{manifest_name}"),
        local,
        bytes: text.len() as u64,
        blake3: *blake3::hash(&text).as_bytes(),
    });
    let report = blackbox_ship::put_in_lake(url, &files).map_err(|e| {
        let finish = format!(
            "to finish a stopped export, run it again over the same seqs: --from-seq {first} --to-seq {last}"
        );
        match e {
            blackbox_ship::Error::Partial { .. } => CliError::new(format!("{e}; {finish}")),
            blackbox_ship::Error::Exists { .. } => CliError::new(format!(
                "{e}: nothing was uploaded (if an earlier export stopped part way, run it again over its seqs, --from-seq and --to-seq, to finish it)"
            )),
            other => CliError::new(other.to_string()),
        }
    })?;
    // Best effort: a marker beside its manifest counts for nothing.
    let _ = blackbox_ship::lake_remove(url, &format!("{MANIFESTS}/{pending_name}"));
    Ok((
        m,
        Uploaded::Objects {
            uploaded: report.uploaded.len(),
            kept: report.kept.len(),
        },
    ))
}

/// The largest lake manifest read back (one lists a file per partition).
const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// Where a lake's manifests lie, under its URL.
const MANIFESTS: &str = "_manifests";

/// The name's end of a manifest, and of the marker of an export under way.
const MANIFEST: &str = ".manifest.json";
const PENDING: &str = ".pending.json";

/// The seqs a manifest's or a marker's name, `<robot>.seq-<first>-<last>.manifest.json`
/// or `….pending.json`, lists, and whether it is a marker.
fn listed_range(name: &str, robot_part: &str) -> Option<(u64, u64, bool)> {
    let rest = name.strip_prefix(robot_part)?.strip_prefix(".seq-")?;
    let (range, pending) = match rest.strip_suffix(MANIFEST) {
        Some(range) => (range, false),
        None => (rest.strip_suffix(PENDING)?, true),
    };
    let (a, b) = range.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?, pending))
}

#[cfg(test)]
mod tests {
    use super::listed_range;

    #[test]
    fn manifest_names_give_their_seqs() {
        assert_eq!(
            listed_range("r1.seq-2-4.manifest.json", "r1"),
            Some((2, 4, false))
        );
        assert_eq!(
            listed_range("r1.seq-2-4.pending.json", "r1"),
            Some((2, 4, true))
        );
        assert_eq!(listed_range("r1.seq-2-4.manifest.json", "r"), None);
        assert_eq!(listed_range("r1.seq-x-4.manifest.json", "r1"), None);
        assert_eq!(listed_range("r1.seq-2.manifest.json", "r1"), None);
    }
}
