//! The shipping manifest, `<url>/manifest.json`: which segments of which log are in the
//! store, with what they hold and their blake3 (docs/FORMAT.md, "Shipping manifest").

use serde::{Deserialize, Serialize};

/// The `format` field of every manifest.
pub const MANIFEST_FORMAT: &str = "blackbox-ship-manifest";
/// The manifest version this crate writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// The largest manifest read (a segment's entry is about 500 bytes: this holds more
/// than 100 000 segments).
pub const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// The manifest of one shipped log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// Which log this is.
    pub log: LogIdentity,
    /// The shipped segments, in seq order, each continuing the one before.
    pub segments: Vec<ShippedSegment>,
}

/// A log's identity: where its shipped chain starts. Two logs that start alike are told
/// apart by their first segment's `last_link`, which commits to its every byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogIdentity {
    /// File name of the first segment shipped.
    pub first_segment: String,
    /// Its first seq (0 unless the log was pruned before it was first shipped).
    pub first_seq: u64,
    /// Its header's `prev_link` (64 hex digits): the genesis link, zeros, for a log
    /// shipped from its start.
    pub start_link: String,
}

/// One shipped segment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShippedSegment {
    /// The segment's file name, also its object's name under `segments/`.
    pub name: String,
    /// Its first seq.
    pub first_seq: u64,
    /// Its last seq.
    pub last_seq: u64,
    /// Its first record's timestamp (ns since the Unix epoch).
    pub first_ts_ns: u64,
    /// Its last record's timestamp.
    pub last_ts_ns: u64,
    /// Its header's `prev_link`: the chain link before its first record (64 hex digits).
    pub prev_link: String,
    /// Its footer's last chain link (64 hex digits).
    pub last_link: String,
    /// The file's length in bytes.
    pub bytes: u64,
    /// blake3 of the whole file (64 hex digits).
    pub blake3: String,
}

impl Manifest {
    /// An empty manifest for the log whose first shipped segment is `first`.
    pub(crate) fn new(first: &ShippedSegment) -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT.to_owned(),
            version: MANIFEST_VERSION,
            log: LogIdentity {
                first_segment: first.name.clone(),
                first_seq: first.first_seq,
                start_link: first.prev_link.clone(),
            },
            segments: Vec::new(),
        }
    }

    /// Parses and checks a manifest: its format and version, and that its segments
    /// start where its identity says and continue one another (seqs and links).
    ///
    /// # Errors
    ///
    /// One sentence saying what is wrong, naming the segment.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| format!("it is not a manifest's JSON: {e}"))?;
        if m.format != MANIFEST_FORMAT {
            return Err(format!(
                "its format is {:?}, not {MANIFEST_FORMAT:?}",
                m.format
            ));
        }
        if m.version != MANIFEST_VERSION {
            return Err(format!(
                "it is version {}, and this blackbox reads version {MANIFEST_VERSION}",
                m.version
            ));
        }
        check_hex("the log's start_link", &m.log.start_link)?;
        let mut prev: Option<&ShippedSegment> = None;
        for s in &m.segments {
            if s.name != segment_name(s.first_seq) {
                return Err(format!(
                    "segment {:?} is not named by its first seq {}",
                    s.name, s.first_seq
                ));
            }
            for (what, hex) in [
                ("prev_link", &s.prev_link),
                ("last_link", &s.last_link),
                ("blake3", &s.blake3),
            ] {
                check_hex(&format!("segment {}'s {what}", s.name), hex)?;
            }
            if s.last_seq < s.first_seq || s.last_ts_ns < s.first_ts_ns {
                return Err(format!(
                    "segment {} covers seqs {}..={} and times {}..={}, out of order",
                    s.name, s.first_seq, s.last_seq, s.first_ts_ns, s.last_ts_ns
                ));
            }
            match prev {
                None => {
                    if s.name != m.log.first_segment
                        || s.first_seq != m.log.first_seq
                        || s.prev_link != m.log.start_link
                    {
                        return Err(format!(
                            "its first segment is {}, but the log's shipped chain starts with {} at seq {}: a segment is missing at the start",
                            s.name, m.log.first_segment, m.log.first_seq
                        ));
                    }
                }
                Some(p) => {
                    if p.last_seq.checked_add(1) != Some(s.first_seq) {
                        return Err(format!(
                            "segment {} starts at seq {} but the segment before it, {}, ends at seq {}: a segment is missing between them",
                            s.name, s.first_seq, p.name, p.last_seq
                        ));
                    }
                    if s.first_ts_ns < p.last_ts_ns {
                        return Err(format!(
                            "segment {} starts at time {} before the segment before it, {}, ends ({}): a log's times do not go back",
                            s.name, s.first_ts_ns, p.name, p.last_ts_ns
                        ));
                    }
                    if s.prev_link != p.last_link {
                        return Err(format!(
                            "segment {}'s prev_link is not the last_link of {}, the segment before it",
                            s.name, p.name
                        ));
                    }
                }
            }
            prev = Some(s);
        }
        Ok(m)
    }

    /// The manifest as stored: pretty JSON, one trailing newline. The same segments
    /// give the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// The entry of the segment named `name`.
    pub fn get(&self, name: &str) -> Option<&ShippedSegment> {
        self.segments.iter().find(|s| s.name == name)
    }
}

/// A segment's file name: its first seq in 20 digits and `.bbx` (FORMAT.md).
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.bbx")
}

fn check_hex(what: &str, hex: &str) -> Result<(), String> {
    if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(format!("{what} is not 64 lowercase hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(first: u64, last: u64, prev: char, end: char) -> ShippedSegment {
        ShippedSegment {
            name: segment_name(first),
            first_seq: first,
            last_seq: last,
            first_ts_ns: first * 10,
            last_ts_ns: last * 10,
            prev_link: prev.to_string().repeat(64),
            last_link: end.to_string().repeat(64),
            bytes: 100,
            blake3: "e".repeat(64),
        }
    }

    #[test]
    fn a_manifest_round_trips_and_a_gap_is_named() {
        let a = seg(0, 9, '0', 'a');
        let b = seg(10, 19, 'a', 'b');
        let c = seg(20, 29, 'b', 'c');
        let mut m = Manifest::new(&a);
        m.segments = vec![a, b, c];
        assert_eq!(Manifest::parse(&m.to_bytes()), Ok(m.clone()));

        let mut gap = m.clone();
        gap.segments.remove(1);
        let err = Manifest::parse(&gap.to_bytes()).expect_err("a gap");
        assert!(
            err.contains("00000000000000000020.bbx starts at seq 20"),
            "{err}"
        );

        let mut front = m.clone();
        front.segments.remove(0);
        let err = Manifest::parse(&front.to_bytes()).expect_err("a missing start");
        assert!(err.contains("missing at the start"), "{err}");

        // A reader finds a time's segment by these times: they must not go back.
        let mut back = m.clone();
        back.segments[1].first_ts_ns = 5;
        let err = Manifest::parse(&back.to_bytes()).expect_err("times going back");
        assert!(
            err.contains("00000000000000000010.bbx starts at time 5"),
            "{err}"
        );

        let mut relinked = m;
        relinked.segments[2].prev_link = "d".repeat(64);
        let err = Manifest::parse(&relinked.to_bytes()).expect_err("a broken link");
        assert!(
            err.contains("00000000000000000020.bbx's prev_link"),
            "{err}"
        );
    }
}
