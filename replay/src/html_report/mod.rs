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
    /// Records read for it (the verify pass aside).
    pub records_read: u64,
}

/// The incidents of a log, in log order.
///
/// # Errors
///
/// As [`Replay::open`].
pub fn incidents(dir: &Path, key: Option<ChainKey>) -> Result<Vec<Incident>> {
    let q = Query::new()
        .types([RecordType::Incident])
        .key(key)
        .order(Order::Log);
    let mut out = Vec::new();
    for r in Replay::open(dir, &q)? {
        if let Body::Incident(i) = r?.body {
            out.push(i);
        }
    }
    Ok(out)
}

/// Writes the report of `scope` over the log in `dir` to `out` (replaced if it exists,
/// never inside a log directory; written under a temporary name and renamed into place).
/// `command` is the command line that makes it again, shown in the report.
///
/// The log is verified whole first (every checksum and the hash chain): a report is
/// made of an intact log only, and shows the verify result and the digest.
///
/// # Errors
///
/// [`Error::UnsafeOutput`]; damage ([`blackbox_log::verify`]'s errors); a record that
/// does not decode; I/O.
pub fn write_report(
    dir: &Path,
    scope: &ReportScope,
    key: Option<ChainKey>,
    command: &str,
    out: &Path,
) -> Result<ReportWritten> {
    let mut file = AtomicFile::create(out)?;
    open_log_dir(dir)?;
    let verify = blackbox_log::verify(dir, key.as_ref(), None).map_err(Error::from)?;
    let digest = verify.last.map(|d| d.to_string());
    let shown_dir = dir.display().to_string();
    let (html, records_read) = match scope {
        ReportScope::Window {
            since_ns,
            until_ns,
            incident,
        } => {
            let data = gather::window(dir, key, *since_ns, *until_ns, incident.clone())?;
            let html = page::window(&data, &shown_dir, &verify, digest.as_deref(), command);
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
                &verify,
                digest.as_deref(),
                command,
                &shell_word(&shown_dir),
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
