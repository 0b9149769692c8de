//! `blackbox verify --dir URL`: a log shipped to object storage, verified remotely.

use std::io::{self, Write};
use std::path::Path;

use blackbox::Digest;

use super::{CliError, human_bytes, line};

/// Verifies the log shipped to `url`: the manifest, every object's blake3, then every
/// checksum and the chain across the shipped segments.
pub fn run(
    url: &str,
    key_file: Option<&Path>,
    digest: Option<&Digest>,
    json: bool,
) -> Result<(), CliError> {
    let key = super::key_from(key_file)?;
    let bar = super::progress_bar(None, format!("verifying the log shipped to {url}"));
    let result = blackbox_ship::verify_url(url, key.as_ref(), digest);
    bar.finish_and_clear();
    let report = result.map_err(|e| CliError::new(e.to_string()))?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if json {
        let mut value = blackbox_replay::verify_json(&report.log, key.is_some(), digest);
        if let Some(map) = value.as_object_mut() {
            map.insert("url".to_owned(), url.into());
            map.insert("downloaded_bytes".to_owned(), report.bytes.into());
        }
        line(&mut out, value)?;
    } else {
        let n = report.log.segments;
        let mut text = format!(
            "log shipped to {url} is intact: {} records in {n} shipped segment{} ({} blocks, {}), every object's blake3 matched the manifest, every checksum and the hash chain verified",
            report.log.records,
            if n == 1 { "" } else { "s" },
            report.log.blocks,
            human_bytes(report.log.bytes)
        );
        if let Some(d) = digest {
            if report.log.digest_pruned {
                text.push_str(&format!(
                    "; digest {d} is older than the first shipped segment: it can be neither matched nor refuted"
                ));
            } else {
                text.push_str(&format!("; it holds the prefix of digest {d}"));
            }
        }
        line(&mut out, text)?;
        if let Some(last) = report.log.last {
            line(&mut out, format!("last: {last}"))?;
        }
    }
    out.flush().map_err(super::stdout_error)
}
