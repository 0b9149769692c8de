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

/// Puts the export `m`, written under `root` (its paths relative to it, the events'
/// directory named `local_name`), under the lake `url`; returns the manifest as
/// uploaded (paths relative to the URL). Nothing is uploaded for an export without
/// rows.
pub(super) fn upload(
    mut m: ExportManifest,
    root: &Path,
    local_name: &str,
    url: &str,
    robot: &str,
) -> Result<ExportManifest, CliError> {
    let url = url.trim_end_matches('/');
    m.file = PathBuf::from(url);
    let (Some(first), Some(last)) = (m.first_seq, m.last_seq) else {
        m.manifest_file = PathBuf::new();
        return Ok(m);
    };
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
    let manifest_key = format!(
        "_manifests/{}.seq-{first}-{last}.manifest.json",
        partition_value(robot)
    );
    m.manifest_file = PathBuf::from(format!("{url}/{manifest_key}"));
    let mut text = serde_json::to_vec_pretty(&m.to_json())
        .map_err(|e| CliError::new(format!("cannot write the lake's manifest: {e}")))?;
    text.push(b'\n');
    let local = root.join("lake.manifest.json");
    std::fs::write(&local, &text).map_err(|e| {
        CliError::new(format!(
            "cannot write the lake's manifest to {}: {e}",
            local.display()
        ))
    })?;
    files.push(LakeFile {
        key: manifest_key,
        local,
        bytes: text.len() as u64,
        blake3: *blake3::hash(&text).as_bytes(),
    });
    blackbox_ship::put_in_lake(url, &files).map_err(|e| CliError::new(e.to_string()))?;
    Ok(m)
}
