//! Range reads: the [`Replay`] iterator over typed records, and [`fold`].

use std::collections::VecDeque;
use std::ops::Bound;
use std::path::Path;

use blackbox::codec;
use blackbox::log::{ReaderOptions, Records};
use blackbox::{LogReader, Seq};

use crate::decode::{Decoder, Record, RecordRef, RecordType};
use crate::error::Result;
use crate::inputs::open_log_dir;
use crate::query::{Order, Query};

/// An iterator of the typed records a [`Query`] selects, in log order or in the order
/// they happened ([`Order`]).
///
/// Interned names resolve even when the range starts mid-log: the names are those of
/// the last segment at or before the range's start that opens with the dictionary
/// (every segment the recorder starts does), with the dictionary records written after
/// it, found through the tag index; the range itself is read from the block that holds
/// its start, found through the footer's sparse index.
/// The whole log's structure (every segment's header and footer, and their continuity)
/// is checked at open; every block read passes its frame checksums and its chain link
/// (unless the log is keyed and the query has no key). The first error ends the iteration.
#[derive(Debug)]
pub struct Replay {
    scan: Scan,
    /// [`Order::Happened`]: the records that reached the log out of time order, as
    /// (happened, seq) sorted, found by a first pass; the second pass reads them again
    /// and merges them in. 16 bytes each: the records themselves are not held.
    late: Option<VecDeque<(u64, u64)>>,
    /// Reads the late records again, in the order they are merged in.
    late_reader: Option<LateReader>,
    /// The latest time among the records the second pass yields in stream.
    stream_max_ns: Option<u64>,
    /// A record of the second pass waiting for the late records that go before it.
    pending: Option<blackbox::LogRecord>,
    /// The record [`Replay::next_view`] returned last, and whether it is a late one
    /// read again (whose names the late reader's decoder resolves).
    current: Option<(blackbox::LogRecord, bool)>,
    /// Records the first pass read ([`Order::Happened`]).
    first_pass_read: u64,
    /// The most decoded records held at once.
    held_max: usize,
    done: bool,
}

/// One pass over a range, in log order.
#[derive(Debug)]
struct Scan {
    records: Option<Records>,
    decoder: Decoder,
    query: Query,
    start: u64,
    /// Whether to read on past `until` for events that happened by then and were
    /// written later (pre-roll events): only when the query selects events.
    scan_past_until: bool,
    chain_verified: bool,
    last_read: Option<(u64, u64)>,
    last_seen: Option<u64>,
    /// Records taken from the log, whatever became of them.
    read: u64,
    /// The highest watermark read so far (0: none): every event that happened before it
    /// was written before the record that carries it.
    watermark_ns: u64,
    /// The second pass of a read in time order: events that happened before this are
    /// the late ones, merged in by seq; they are passed over without being decoded.
    late_below_ns: Option<u64>,
    /// For a query by kind or type: how many names the decoder knew when the read was
    /// last told which tags to keep (the log's tag index then skips the sealed blocks
    /// that hold only events of other kinds and records of other types).
    tagged_names: Option<usize>,
    /// For a query by kind or type: the ids of the kinds it selects among the names
    /// known, ascending. An event of another named kind is passed over undecoded.
    kind_ids: Vec<u32>,
}

impl Replay {
    /// Opens the log in `dir` for reading the records `query` selects. With
    /// [`Order::Happened`], the first of its two passes runs here.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchDir`](crate::Error::NoSuchDir), not a log, a wrong key, damage to
    /// the log's structure anywhere (a missing segment, a segment from another log: see
    /// `LogReader::structure`), damage met while locating the range's start (or, with [`Order::Happened`], anywhere in the
    /// range), I/O.
    pub fn open(dir: impl AsRef<Path>, query: &Query) -> Result<Replay> {
        let dir = dir.as_ref();
        if query.order == Order::Log {
            return Ok(Replay {
                scan: Scan::open(dir, query)?,
                late: None,
                late_reader: None,
                stream_max_ns: None,
                pending: None,
                current: None,
                first_pass_read: 0,
                held_max: 0,
                done: false,
            });
        }
        // First pass: which selected records reached the log out of time order.
        let mut first = Scan::open(dir, query)?;
        let mut late = Vec::new();
        let mut max_ns: Option<u64> = None;
        while let Some(r) = first.next_record()? {
            let t = happened_ns(&r);
            if max_ns.is_some_and(|m| t < m) {
                late.push((t, r.seq().0));
            } else {
                max_ns = Some(t);
            }
        }
        late.sort_unstable();
        let Some(last) = first.last_seen else {
            return Ok(Replay {
                scan: first,
                late: None,
                late_reader: None,
                stream_max_ns: None,
                pending: None,
                current: None,
                first_pass_read: 0,
                held_max: 0,
                done: true,
            });
        };
        // Second pass over exactly what the first one read (a writer may be appending):
        // the same records, classified the same way.
        let mut second = query.clone();
        second.to_seq = Some(second.to_seq.map_or(last, |t| t.min(last)));
        let late_reader = LateReader {
            reader: LogReader::open_with(
                dir,
                ReaderOptions {
                    key: query.key.clone(),
                },
            )?,
            records: None,
            next_seq: 0,
            last_seq: last,
            // It knows every name of the range: a name, once given, never changes.
            decoder: first.decoder.clone(),
            read: 0,
        };
        Ok(Replay {
            scan: Scan::open(dir, &second)?,
            late: Some(late.into()),
            late_reader: Some(late_reader),
            stream_max_ns: None,
            pending: None,
            current: None,
            first_pass_read: first.read,
            held_max: 0,
            done: false,
        })
    }

    /// Whether the records are checked against the hash chain (false only for a keyed
    /// log read without its key).
    pub fn chain_verified(&self) -> bool {
        self.scan.chain_verified
    }

    /// How many records this read has taken from the log so far (both passes, with
    /// [`Order::Happened`]), the records of the blocks read for the names before the
    /// range included, the blocks the tag index lets a read skip excluded: what a
    /// bounded read costs.
    pub fn records_read(&self) -> u64 {
        self.first_pass_read + self.scan.read + self.late_reader.as_ref().map_or(0, |l| l.read)
    }

    /// The most decoded records this read held at once (with [`Order::Happened`], the
    /// record waiting in stream and a late one read again; the late records themselves
    /// cost 16 bytes each between the passes): what its memory grows with.
    pub fn records_held_max(&self) -> usize {
        self.held_max
    }

    /// The policy in force at the last record read, in log order: the last policy
    /// record read (seq, TOML text), the ones before the range's start included. `None`
    /// before any, or for a log that holds none. With [`Order::Happened`], the one of
    /// the pass that read last.
    pub fn policy(&self) -> Option<(u64, &str)> {
        self.scan.decoder.policy()
    }

    /// The seq and timestamp of the last record read inside the seq and time range,
    /// selected or not (in log order). A query by kind or type does not read the blocks
    /// the log's tag index says hold only other kinds' events or other types' records.
    pub fn last_read(&self) -> Option<(u64, u64)> {
        self.scan.last_read
    }

    /// The next record by (happened, seq): the earlier of the second pass's next
    /// in-order record and the first late one.
    fn next_happened(&mut self) -> Result<Option<(blackbox::LogRecord, bool)>> {
        if self.pending.is_none() {
            self.scan.late_below_ns = self.stream_max_ns;
            while let Some(r) = self.scan.next_record()? {
                let t = happened_ns(&r);
                if self.stream_max_ns.is_some_and(|m| t < m) {
                    // Found by the first pass: merged in from `late`.
                    continue;
                }
                self.stream_max_ns = Some(t);
                self.pending = Some(r);
                self.held_max = self.held_max.max(1);
                break;
            }
        }
        let late_first = self.late.as_ref().and_then(VecDeque::front).copied();
        let take_late = match (&self.pending, late_first) {
            (Some(p), Some(l)) => l < (happened_ns(p), p.seq().0),
            (None, l) => l.is_some(),
            (Some(_), None) => false,
        };
        if !take_late {
            return Ok(self.pending.take().map(|r| (r, false)));
        }
        let Some((_, seq)) = self.late.as_mut().and_then(VecDeque::pop_front) else {
            return Ok(None);
        };
        let Some(reader) = self.late_reader.as_mut() else {
            return Ok(None);
        };
        let record = reader.read(seq)?;
        // The record waiting in stream, and this one.
        self.held_max = self.held_max.max(usize::from(self.pending.is_some()) + 1);
        Ok(Some((record, true)))
    }
}

/// Reads again, by seq, the records the first pass of a read in time order found late:
/// forward in one pass while they come in seq order (a pre-roll run is written in the
/// order it happened), with a seek for each one behind the last read or far ahead.
#[derive(Debug)]
struct LateReader {
    reader: LogReader,
    records: Option<Records>,
    /// The seq `records` yields next.
    next_seq: u64,
    /// The last seq of the range the first pass read.
    last_seq: u64,
    decoder: Decoder,
    /// Records taken from the log.
    read: u64,
}

/// How far ahead a late record may be for the reader to read up to it rather than seek.
const LATE_SKIP_MAX: u64 = 4096;

impl LateReader {
    /// The record at `seq`, its names learned.
    fn read(&mut self, seq: u64) -> Result<blackbox::LogRecord> {
        let behind_or_far = seq < self.next_seq || seq - self.next_seq > LATE_SKIP_MAX;
        if self.records.is_none() || behind_or_far {
            self.records = Some(self.reader.records(Seq(seq)..=Seq(self.last_seq))?);
            self.next_seq = seq;
        }
        let gone = || crate::error::Error::Decode {
            seq,
            record_type: 0,
            reason: "the record the first pass read is no longer in the log".to_owned(),
        };
        let records = self.records.as_mut().ok_or_else(gone)?;
        loop {
            let raw = records.next().ok_or_else(gone)??;
            self.read += 1;
            let at = raw.seq().0;
            self.next_seq = at.saturating_add(1);
            if at == seq {
                self.decoder.learn(&raw)?;
                return Ok(raw);
            }
            if at > seq {
                return Err(gone());
            }
        }
    }
}

impl Replay {
    /// The next record, decoded in place: its content borrowed from the block it was
    /// read from and from the read's names ([`RecordRef`]), nothing allocated for an
    /// event, its content hash computed only when asked for. The iterator ([`Replay`]
    /// yields owned [`Record`]s) is this and [`RecordRef::into_owned`]. `None` at the
    /// end; the first error ends the read.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use blackbox::{Config, Event, Recorder};
    /// use blackbox_replay::{BodyRef, Query, RecordType, Replay};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let recorder = Recorder::open(dir.path(), Config::new())?;
    /// recorder.record(&Event::new("arm.move").values(&[("dx", 2.0)]))?;
    /// recorder.close()?;
    ///
    /// let mut replay = Replay::open(dir.path(), &Query::new().types([RecordType::Event]))?;
    /// let mut moved = 0.0;
    /// while let Some(r) = replay.next_view() {
    ///     if let BodyRef::Event(e) = r?.body {
    ///         assert_eq!(e.kind, "arm.move");
    ///         moved += e.values.iter().map(|(_, v)| v).sum::<f64>();
    ///     }
    /// }
    /// assert_eq!(moved, 2.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_view(&mut self) -> Option<Result<RecordRef<'_>>> {
        if self.done {
            return None;
        }
        let next = if self.late.is_some() {
            self.next_happened()
        } else {
            self.scan.next_record().map(|r| r.map(|r| (r, false)))
        };
        match next {
            Ok(Some(r)) => self.current = Some(r),
            Ok(None) => {
                self.done = true;
                self.current = None;
                return None;
            }
            Err(e) => {
                self.done = true;
                self.current = None;
                return Some(Err(e));
            }
        }
        let (raw, late) = self.current.as_ref()?;
        let decoder = match (late, &self.late_reader) {
            (true, Some(l)) => &l.decoder,
            _ => &self.scan.decoder,
        };
        let view = decoder.view(raw);
        if view.is_err() {
            self.done = true;
        }
        Some(view)
    }
}

impl Iterator for Replay {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        self.next_view().map(|r| r.map(RecordRef::into_owned))
    }
}

/// When a record happened ([`Record::happened_ns`]), read from an event's header: an
/// event that does not decode counts as happening when it was written (decoding it
/// reports it).
fn happened_ns(raw: &blackbox::LogRecord) -> u64 {
    if raw.record_type() == codec::EVENT {
        codec::decode_event(raw.payload(), raw.ts_ns()).map_or(raw.ts_ns(), |e| e.recorded_ns)
    } else {
        raw.ts_ns()
    }
}

impl Scan {
    fn open(dir: &Path, query: &Query) -> Result<Scan> {
        let segments = open_log_dir(dir)?;
        let reader = LogReader::open_with(
            dir,
            ReaderOptions {
                key: query.key.clone(),
            },
        )?;
        // A segment from another log, a missing or truncated one anywhere: refused
        // before a range read can skip past it or return another log's records.
        reader.structure()?;
        let mut scan = Scan {
            records: None,
            decoder: Decoder::new(),
            query: query.clone(),
            start: query.from_seq.unwrap_or(0),
            scan_past_until: query.until_ns.is_some()
                && query.type_selected(Some(RecordType::Event)),
            chain_verified: reader.chain_verified(),
            last_read: None,
            last_seen: None,
            read: 0,
            watermark_ns: 0,
            late_below_ns: None,
            tagged_names: None,
            kind_ids: Vec::new(),
        };
        if query.empty_by_bounds() {
            return Ok(scan);
        }
        if let Some(since) = query.since_ns {
            // A record that happened at or after `since` was written at or after it
            // (an event is written when it is recorded, or later from the pre-roll
            // ring; every other record happens when it is written): the range starts at
            // the first record stamped at or after `since`.
            match reader.records_by_time(since..)?.next() {
                Some(r) => scan.start = scan.start.max(r?.seq().0),
                None => return Ok(scan),
            }
        }
        let dict_start = blackbox::dictionary_start(&reader, &segments, scan.start)?;
        if dict_start < scan.start {
            // The names in use at the range's start: the dictionary the segment opens
            // with and every dictionary record after it (and the policy and watermark
            // in force there). The blocks of sealed segments that hold none of those
            // are passed over by the tag index, unread.
            let before = reader
                .records(Seq(dict_start)..Seq(scan.start))?
                .with_tags(scan.context_tags());
            for raw in before {
                let raw = raw?;
                scan.read += 1;
                scan.learn_before(&raw)?;
            }
        }
        let hi = match query.to_seq {
            Some(to) => Bound::Included(Seq(to)),
            None => Bound::Unbounded,
        };
        // From the block that holds the range's start, found through the footer's
        // sparse index, whose entries carry the link before their block: the chain is
        // verified from there.
        scan.records = Some(reader.records((Bound::Included(Seq(scan.start)), hi))?);
        // A query by type or by kind passes over the blocks that hold only records of
        // other types, or events of other kinds.
        if query.selects_by_kind() || query.selects_by_type() {
            scan.tag_kinds();
        }
        Ok(scan)
    }

    /// The tags of the records a scan reads whatever it selects (FORMAT.md, "Tag
    /// index"): dictionary records (the names), policy records ([`Replay::policy`]),
    /// and, when it reads past `until` for late events, accounting records (whose
    /// watermark ends it).
    fn context_tags(&self) -> Vec<u32> {
        let mut tags = vec![codec::DICTIONARY.index_tag(), codec::POLICY.index_tag()];
        if self.scan_past_until {
            tags.push(codec::ACCOUNTING.index_tag());
        }
        tags
    }

    /// Tells the read which tags the query selects: the kind ids of the events it
    /// selects, among the names known so far, the tags of the other record types it
    /// selects, and [`Scan::context_tags`]. The blocks of sealed segments that hold
    /// none of them are then skipped unread (none when it selects events of every
    /// kind). A block that holds a dictionary record is
    /// always read, and a kind is named before its first event, so every kind is known
    /// before a block holding its events is reached.
    fn tag_kinds(&mut self) {
        let names = self.decoder.names();
        if self.tagged_names == Some(names.len()) {
            return;
        }
        self.tagged_names = Some(names.len());
        let events = self.query.type_selected(Some(RecordType::Event));
        let mut ids: Vec<u32> = names
            .iter()
            .filter(|(_, name)| events && self.query.kind_selected(Some(name)))
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        let mut tags = ids.clone();
        tags.extend(
            RecordType::ALL
                .into_iter()
                .filter(|&t| t != RecordType::Event && self.query.type_selected(Some(t)))
                .map(|t| t.tag().index_tag()),
        );
        tags.extend(self.context_tags());
        // Events of every kind: nearly every block holds one, and an event whose kind no
        // dictionary record names must still reach the decoder, which reports it.
        let tags = (!events || self.query.selects_by_kind()).then_some(tags);
        if let Some(records) = self.records.as_mut() {
            records.set_tags(tags);
        }
        self.kind_ids = ids;
    }

    /// Whether `raw` is an event of a named kind the query does not select: read from
    /// its header alone. An event that does not decode, or whose kind no dictionary
    /// record named, is left to the decoder, which reports it.
    fn other_kinds_event(&self, raw: &blackbox::LogRecord) -> bool {
        self.tagged_names.is_some()
            && self.query.selects_by_kind()
            && raw.record_type() == codec::EVENT
            && codec::decode_event(raw.payload(), raw.ts_ns()).is_ok_and(|e| {
                self.kind_ids.binary_search(&e.kind).is_err() && self.decoder.name(e.kind).is_some()
            })
    }

    /// The next record the query selects, its names learned (decode it with
    /// `self.decoder`).
    /// Learns from a record before the range's start: its names, its policy, its
    /// watermark.
    fn learn_before(&mut self, raw: &blackbox::LogRecord) -> Result<()> {
        self.note_watermark(raw);
        self.decoder.learn(raw)
    }

    fn note_watermark(&mut self, raw: &blackbox::LogRecord) {
        if raw.record_type() == codec::ACCOUNTING
            && let Some(w) = codec::accounting_watermark_ns(raw.payload())
        {
            self.watermark_ns = self.watermark_ns.max(w);
        }
    }

    fn next_record(&mut self) -> Result<Option<blackbox::LogRecord>> {
        loop {
            if self.tagged_names.is_some() {
                self.tag_kinds();
            }
            let Some(raw) = self.records.as_mut().and_then(Iterator::next) else {
                self.records = None;
                return Ok(None);
            };
            let raw = raw?;
            self.read += 1;
            if raw.seq().0 >= self.start {
                self.note_watermark(&raw);
            }
            let seq = raw.seq().0;
            if seq < self.start {
                self.learn_before(&raw)?;
                continue;
            }
            self.last_seen = Some(seq);
            let last = self.query.to_seq.is_some_and(|t| seq >= t);
            if let Some(below) = self.late_below_ns
                && raw.record_type() == codec::EVENT
                && codec::decode_event(raw.payload(), raw.ts_ns())
                    .is_ok_and(|e| e.recorded_ns < below)
            {
                if self.query.until_ns.is_none_or(|u| raw.ts_ns() <= u) {
                    self.last_read = Some((seq, raw.ts_ns()));
                }
                if last {
                    self.records = None;
                    return Ok(None);
                }
                continue;
            }
            if last {
                // The range's last record: nothing after it is read, so damage right
                // after a range does not fail it.
                self.records = None;
                return Ok(self.select(&raw)?.then_some(raw));
            }
            if self.select(&raw)? {
                return Ok(Some(raw));
            }
        }
    }

    /// Whether the query selects `raw` (its names then learned). Once a watermark past
    /// `until` was read, the first record written after `until` (any, for a query that
    /// selects no events) ends the scan (see [`Query`]). An event that does not decode
    /// is selected: decoding it reports it.
    fn select(&mut self, raw: &blackbox::LogRecord) -> Result<bool> {
        let seq = raw.seq().0;
        let tag = raw.record_type();
        if let Some(until) = self.query.until_ns
            && raw.ts_ns() > until
        {
            // Written after `until`: only an event that happened by then can still be
            // selected (a pre-roll event, written when its incident was triggered, or
            // one that reached the writer behind later ones). A watermark past `until`
            // says every event that happened by then is written before it; every other
            // record happens when it is written.
            if !self.scan_past_until || self.watermark_ns > until {
                self.records = None;
                return Ok(false);
            }
            if tag != codec::EVENT {
                self.decoder.learn(raw)?;
                return Ok(false);
            }
        } else {
            self.last_read = Some((seq, raw.ts_ns()));
        }
        if !self.query.type_selected(RecordType::from_tag(tag)) {
            self.decoder.learn(raw)?;
            return Ok(false);
        }
        if self.other_kinds_event(raw) {
            return Ok(false);
        }
        self.decoder.learn(raw)?;
        if tag == codec::EVENT {
            // From the header and the kind's name alone: the record is decoded once,
            // when it is handed out.
            let Ok(e) = codec::decode_event(raw.payload(), raw.ts_ns()) else {
                return Ok(true);
            };
            let Some(kind) = self.decoder.name(e.kind) else {
                return Ok(true);
            };
            return Ok(
                self.query.time_selected(e.recorded_ns) && self.query.kind_selected(Some(kind))
            );
        }
        let record = self.decoder.view(raw)?;
        Ok(self.query.time_selected(record.happened_ns())
            && self.query.kind_selected(record.kind()))
    }
}

/// Folds the records `query` selects, in the query's order (log order by default),
/// into a derived state: `f(state, record)` for each. The state at any point in the
/// log is the fold up to there.
///
/// # Errors
///
/// As [`Replay::open`], and the first error the iteration meets (damage, a record
/// that does not decode).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use blackbox::{Config, Event, Recorder};
/// use blackbox_replay::{Body, Query, RecordType, fold};
///
/// let dir = tempfile::tempdir()?;
/// let recorder = Recorder::open(dir.path(), Config::new())?;
/// for x in [1.0, 2.0, 4.0] {
///     recorder.record(&Event::new("arm.move").values(&[("dx", x)]))?;
/// }
/// recorder.close()?;
///
/// // The arm's position: the sum of its moves.
/// let query = Query::new().types([RecordType::Event]).kind("arm.*")?;
/// let x = fold(dir.path(), &query, 0.0, |x, r| match r.body {
///     Body::Event(e) => x + e.values.iter().map(|(_, v)| v).sum::<f64>(),
///     _ => x,
/// })?;
/// assert_eq!(x, 7.0);
/// # Ok(())
/// # }
/// ```
pub fn fold<T>(
    dir: impl AsRef<Path>,
    query: &Query,
    init: T,
    mut f: impl FnMut(T, Record) -> T,
) -> Result<T> {
    let mut state = init;
    for record in Replay::open(dir, query)? {
        state = f(state, record?);
    }
    Ok(state)
}
