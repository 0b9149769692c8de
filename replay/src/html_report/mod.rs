//! `blackbox report`: one self-contained HTML file that shows an incident (or any
//! window) as people review it: a timeline of every kind, the values plotted, the
//! knowledge base's changes and the records they cite, the working memory and the facts
//! at the trigger, what the recorder did not keep, and the log's integrity; or an
//! overview of the whole log. Inline SVG and style, no script, nothing fetched.

mod gather;
mod page;
mod svg;

use std::path::{Path, PathBuf};

use blackbox::ChainKey;
use blackbox_log::{LogReader, ReaderOptions};

use crate::decode::{Body, Incident, RecordType};
use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::output::AtomicFile;
use crate::query::{Order, Query};
use crate::replay::Replay;

/// What a report covers.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportScope {
    /// The whole log: rates per kind, every incident, totals, disk.
    Overview,
    /// A window of time, and the incident it is (its trigger marked, the state taken
    /// there), if it is one.
    Window {
        /// Start, ns since the epoch.
        since_ns: u64,
        /// End, ns since the epoch.
        until_ns: u64,
        /// The incident the window shows.
        incident: Option<Incident>,
    },
}

/// What writing a report did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportWritten {
    /// The file written.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Records read for it (a verify pass aside).
    pub records_read: u64,
}

/// The incidents of a log, in log order: every one, or the first `limit`.
///
/// # Errors
///
/// As [`Replay::open`].
pub fn incidents(dir: &Path, key: Option<ChainKey>, limit: Option<usize>) -> Result<Vec<Incident>> {
    let q = Query::new()
        .types([RecordType::Incident])
        .key(key)
        .order(Order::Log);
    let mut out = Vec::new();
    for r in Replay::open(dir, &q)? {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        if let Body::Incident(i) = r?.body {
            out.push(i);
        }
    }
    Ok(out)
}

/// How a report is made, beyond what it covers.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// The chain key of a keyed log.
    pub key: Option<ChainKey>,
    /// The command line that writes the report again, shown on the page.
    pub command: String,
    /// The key file the commands the page shows name (`--key-file`), for a keyed log.
    pub key_file: Option<PathBuf>,
    /// Verify the whole log (every record) before a window's report, as the overview
    /// always does; without it, a window's report checks the log's structure and every
    /// block it reads.
    pub verify_whole_log: bool,
}

/// Writes the report of `scope` over the log in `dir` to `out` (replaced if it exists,
/// never inside a log directory; written under a temporary name and renamed into place).
///
/// What is checked first, and shown on the page: for the overview (and a window's
/// report with [`ReportOptions::verify_whole_log`]), the whole log, as `blackbox verify`
/// does; for a window's report, the log's structure (every segment's header and
/// footer, in sequence, and the last segment in full, as `blackbox digest` does) and every
/// block the report reads (checksums and hash chain), so that its cost follows the
/// window, not the log. Damage found fails the report.
///
/// # Errors
///
/// [`Error::UnsafeOutput`]; damage; a record that does not decode; I/O.
pub fn write_report(
    dir: &Path,
    scope: &ReportScope,
    options: &ReportOptions,
    out: &Path,
) -> Result<ReportWritten> {
    let mut file = AtomicFile::create(out)?;
    open_log_dir(dir)?;
    let key = options.key.clone();
    let command = options.command.as_str();
    let verify_whole = options.verify_whole_log || *scope == ReportScope::Overview;
    let (mut checked, digest) = if verify_whole {
        let verify = blackbox_log::verify(dir, key.as_ref(), None).map_err(Error::from)?;
        let digest = verify.last.map(|d| d.to_string());
        (page::Checked::Whole(Box::new(verify)), digest)
    } else {
        let reader = LogReader::open_with(dir, ReaderOptions { key: key.clone() })?;
        let digest = reader.digest()?.map(|d| d.to_string());
        (
            page::Checked::Window {
                records_read: 0,
                chain: reader.chain_verified(),
            },
            digest,
        )
    };
    let shown_dir = dir.display().to_string();
    // The log as the commands on the page name it.
    let mut dir_arg = shell_word(&shown_dir);
    if let Some(k) = &options.key_file {
        dir_arg.push_str(" --key-file ");
        dir_arg.push_str(&shell_word(&k.display().to_string()));
    }
    let (html, records_read) = match scope {
        ReportScope::Window {
            since_ns,
            until_ns,
            incident,
        } => {
            let data = gather::window(dir, key, *since_ns, *until_ns, incident.clone())?;
            if let page::Checked::Window { records_read, .. } = &mut checked {
                *records_read = data.records_read;
            }
            let html = page::window(
                &data,
                &shown_dir,
                &dir_arg,
                &checked,
                digest.as_deref(),
                command,
            );
            (html, data.records_read)
        }
        ReportScope::Overview => {
            let stats = crate::stats::stats(dir, key.clone())?;
            let (first, last) = (
                stats.first_ts_ns.unwrap_or(0),
                stats.last_ts_ns.unwrap_or(0),
            );
            let data = gather::overview(dir, key, first, last)?;
            let facts = page::LogFacts {
                dir: &shown_dir,
                records: stats.records,
                segments: stats.segments,
                bytes: stats.bytes,
                kinds: &stats.kinds,
            };
            let html = page::overview(
                &data,
                &facts,
                &checked,
                digest.as_deref(),
                command,
                &dir_arg,
            );
            (html, data.records_read)
        }
    };
    let written = file.path().to_owned();
    file.writer()
        .write_all(html.as_bytes())
        .map_err(|source| Error::Io {
            op: "write",
            path: written.clone(),
            source,
        })?;
    let path = file.commit()?;
    Ok(ReportWritten {
        path,
        bytes: html.len() as u64,
        records_read,
    })
}

/// A path as one shell word: quoted when it holds anything but plain characters.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
