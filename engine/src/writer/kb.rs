//! The knowledge base's carry: the last knowledge-base snapshot the log holds and the
//! commits written after it, repeated in every segment's preamble, so that pruning
//! the segments that hold them never loses what the knowledge base learned.

use blackbox_log::RecordType;

use crate::codec;

/// Commits carried after the snapshot past which a fresh snapshot is asked for.
pub(crate) const CARRIED_COMMITS_MAX: usize = 256;
/// Bytes of carried commits past which a fresh snapshot is asked for.
pub(crate) const CARRIED_BYTES_MAX: usize = 1 << 20;

/// The last snapshot record's payload and the carried commits after it (each a
/// `blackbox_kb::Commit` as JSON: the commit record's payload with its seq and time).
#[derive(Debug, Default)]
pub(crate) struct KbCarry {
    snapshot: Option<Vec<u8>>,
    commits: Vec<Vec<u8>>,
    bytes: usize,
}

impl KbCarry {
    /// The preamble records: the snapshot, then the carried commits (none without a
    /// snapshot: commits alone would not rebuild the knowledge base).
    pub(crate) fn records(&self) -> Vec<(RecordType, Vec<u8>)> {
        let Some(snapshot) = &self.snapshot else {
            return Vec::new();
        };
        let mut out = vec![(codec::KB_SNAPSHOT, snapshot.clone())];
        out.extend(self.commits.iter().map(|c| (codec::KB_CARRIED, c.clone())));
        out
    }

    /// Whether the log wants a fresh snapshot: it has none, or the carried commits
    /// passed their bound.
    pub(crate) fn snapshot_due(&self) -> bool {
        self.snapshot.is_none()
            || self.commits.len() >= CARRIED_COMMITS_MAX
            || self.bytes >= CARRIED_BYTES_MAX
    }

    /// A snapshot was written: it replaces what was carried.
    pub(crate) fn set_snapshot(&mut self, payload: Vec<u8>) {
        self.snapshot = Some(payload);
        self.commits.clear();
        self.bytes = 0;
    }

    /// A commit was written at `seq`, `time_ns`. One that cannot be carried (its copy
    /// would pass the record limit) ends the carry until the next snapshot.
    pub(crate) fn push_commit(
        &mut self,
        seq: u64,
        time_ns: u64,
        payload: &[u8],
        record_bytes_max: usize,
    ) {
        if self.snapshot.is_none() {
            return;
        }
        match carried_commit(seq, time_ns, payload) {
            Some(c) if c.len() <= record_bytes_max => self.push_carried(c),
            _ => *self = KbCarry::default(),
        }
    }

    /// Appends a carried commit as read back from the log.
    pub(crate) fn push_carried(&mut self, carried: Vec<u8>) {
        if self.snapshot.is_none() {
            return;
        }
        self.bytes += carried.len();
        self.commits.push(carried);
    }

    /// Drops the carry when a record of it passes `record_bytes_max` (the preamble
    /// refuses such a record): nothing is carried until the next snapshot.
    pub(crate) fn fit(&mut self, record_bytes_max: usize) {
        let too_large = self
            .snapshot
            .iter()
            .chain(&self.commits)
            .any(|r| r.len() > record_bytes_max);
        if too_large {
            *self = KbCarry::default();
        }
    }

    pub(crate) fn has_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }
}

/// The carried copy of a commit record: its JSON object with `seq` and `time_ns` put
/// first (`blackbox_kb::Commit`). `None` when the payload is not a JSON object with a
/// member.
pub(crate) fn carried_commit(seq: u64, time_ns: u64, payload: &[u8]) -> Option<Vec<u8>> {
    let rest = payload.strip_prefix(b"{")?;
    if rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}') || rest.is_empty() {
        return None;
    }
    let mut out = format!("{{\"seq\":{seq},\"time_ns\":{time_ns},").into_bytes();
    out.extend_from_slice(rest);
    Some(out)
}

/// The version a knowledge-base record's JSON payload names.
pub(crate) fn version_of(payload: &[u8]) -> Result<u64, String> {
    #[derive(serde::Deserialize)]
    struct VersionOnly {
        version: u64,
    }
    serde_json::from_slice::<VersionOnly>(payload)
        .map(|v| v.version)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carried_commit_is_the_commit_with_its_seq_and_time() {
        let carried = carried_commit(7, 9, br#"{"version":3,"author":"a"}"#);
        assert_eq!(
            carried.as_deref(),
            Some(&br#"{"seq":7,"time_ns":9,"version":3,"author":"a"}"#[..])
        );
        assert_eq!(carried_commit(7, 9, b"{}"), None);
        assert_eq!(carried_commit(7, 9, b"[1]"), None);
    }
}
