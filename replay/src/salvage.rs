//! Salvage: every intact record of a damaged log that a [`Query`] selects, typed, and
//! exactly what was lost between them, on the log's
//! [`LogReader::salvage`](blackbox::LogReader::salvage).

use std::path::Path;

use blackbox::log::{Loss, LostSeqs, ReaderOptions, Salvaged as LogSalvaged};
use blackbox::{LogReader, Seq};
use serde_json::{Value, json};

use blackbox::codec;

use crate::decode::{Decoder, Record, RecordType};
use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::query::Query;

/// One item of a [`Salvage`].
#[derive(Debug, Clone)]
pub enum Salvaged {
    /// An intact record the query selects.
    Record(Record),
    /// A stretch of the log that could not be read: the seqs lost and where.
    Lost(Loss),
    /// An intact record that does not decode (for instance, an event whose names were
    /// in a dictionary record that was lost).
    Undecodable {
        /// Its seq.
        seq: u64,
        /// Why.
        reason: String,
    },
}

/// The intact records a [`Query`] selects from a damaged log, in log order, and the
/// losses between them: see [`salvage`].
#[derive(Debug)]
pub struct Salvage {
    inner: blackbox::log::Salvage,
    decoder: Decoder,
    query: Query,
    chain_verified: bool,
    /// The seq after the last record read (the read's start before any).
    next_seq: u64,
}

/// Reads the log in `dir` around its damage: every record whose block passes all its
/// checks (and its chain link, picked up again after the damage from a link stored on
/// disk) and that `query` selects, in log order, with each stretch that was lost
/// reported where it lies ([`Salvaged::Lost`]). Time bounds select by when records
/// happened, over the query's seq range (the whole log without one): a salvage reads
/// every segment, it does not seek by time. A salvage from a seq mid-log starts at the
/// last segment at or before it that opens with the dictionary (as [`Replay`] does), so
/// the names in use there resolve; losses before the query's seq range are not
/// reported, and one that overlaps it is clipped to it.
///
/// [`Replay`]: crate::Replay
///
/// # Errors
///
/// [`Error::NoSuchDir`](crate::Error::NoSuchDir), not a log, a wrong key, I/O listing
/// the directory. Damage is never an error: it is a [`Salvaged::Lost`].
pub fn salvage(dir: impl AsRef<Path>, query: &Query) -> Result<Salvage> {
    let dir = dir.as_ref();
    match open_log_dir(dir) {
        // Something named like a segment that is not one: damage, read around.
        Ok(_) | Err(Error::Log(blackbox_log::Error::Corrupt(_))) => {}
        Err(e) => return Err(e),
    }
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: query.key.clone(),
        },
    )?;
    let lo = match query.from_seq {
        Some(from) => dictionary_start(&reader, from)?,
        None => 0,
    };
    let inner = match query.to_seq {
        Some(hi) => reader.salvage(Seq(lo)..=Seq(hi))?,
        None => reader.salvage(Seq(lo)..)?,
    };
    Ok(Salvage {
        inner,
        decoder: Decoder::new(),
        query: query.clone(),
        chain_verified: reader.chain_verified(),
        next_seq: lo,
    })
}

/// The first seq of the last segment at or before the one named to hold `from` whose
/// first intact record is a dictionary record (every segment the recorder starts opens
/// with one), or of the first segment: a salvage from there learns every name in use
/// at `from`. A segment whose first record is lost is passed over.
fn dictionary_start(reader: &LogReader, from: u64) -> Result<u64> {
    let segments = reader.segments()?;
    let holding = segments
        .partition_point(|s| s.first_seq <= from)
        .saturating_sub(1);
    for segment in segments.iter().take(holding + 1).skip(1).rev() {
        let first = Seq(segment.first_seq);
        let opens_with_dictionary = reader.salvage(first..=first)?.any(|item| {
            matches!(item, LogSalvaged::Record(r) if r.seq() == first && r.record_type() == codec::DICTIONARY)
        });
        if opens_with_dictionary {
            return Ok(first.0);
        }
    }
    Ok(segments.first().map_or(0, |s| s.first_seq))
}

impl Salvage {
    /// The policy in force at the last record read: the last intact policy record
    /// read (seq, TOML text), as [`Replay::policy`](crate::Replay::policy).
    pub fn policy(&self) -> Option<(u64, &str)> {
        self.decoder.policy()
    }

    /// Whether records are checked against the hash chain (false only for a keyed log
    /// read without its key).
    pub fn chain_verified(&self) -> bool {
        self.chain_verified
    }

    /// `loss` clipped to the query's seq range, or `None` when it lies before the
    /// range (read only to learn the names in use): the rule the log's salvage applies
    /// to the range it is given.
    fn in_range(&self, mut loss: Loss) -> Option<Loss> {
        let Some(from) = self.query.from_seq else {
            return Some(loss);
        };
        match &mut loss.seqs {
            LostSeqs::None => (self.next_seq >= from).then_some(loss),
            LostSeqs::Exact { first, last } => {
                if *last < from {
                    return None;
                }
                *first = (*first).max(from);
                Some(loss)
            }
            LostSeqs::From { first, .. } => {
                *first = (*first).max(from);
                Some(loss)
            }
        }
    }
}

impl Iterator for Salvage {
    type Item = Salvaged;

    fn next(&mut self) -> Option<Salvaged> {
        loop {
            let raw = match self.inner.next()? {
                LogSalvaged::Lost(loss) => match self.in_range(loss) {
                    Some(loss) => return Some(Salvaged::Lost(loss)),
                    None => continue,
                },
                LogSalvaged::Record(raw) => raw,
            };
            let seq = raw.seq().0;
            self.next_seq = seq.saturating_add(1);
            let selected = self.query.from_seq.is_none_or(|f| seq >= f)
                && self
                    .query
                    .type_selected(RecordType::from_tag(raw.record_type()));
            if !selected {
                // A record before the range is read only for its names: if they do not
                // decode, the records in the range that use them say so.
                let before_range = self.query.from_seq.is_some_and(|f| seq < f);
                if let Err(e) = self.decoder.learn(&raw)
                    && !before_range
                {
                    return Some(Salvaged::Undecodable {
                        seq,
                        reason: e.to_string(),
                    });
                }
                continue;
            }
            match self.decoder.decode(&raw) {
                Ok(r)
                    if self.query.time_selected(r.happened_ns()) && self.query.kind_matches(&r) =>
                {
                    return Some(Salvaged::Record(r));
                }
                Ok(_) => {}
                Err(e) => {
                    return Some(Salvaged::Undecodable {
                        seq,
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
}

/// A loss as JSON: `{"type": "lost", "first_seq", "last_seq" (null when unknown),
/// "claimed_last_seq", "seqs" (in words), "places": [{"segment", "bytes": [start,
/// end] or null, "what"}], "chain_broken"}`.
pub fn loss_json(loss: &Loss) -> Value {
    let (first, last, claimed) = match loss.seqs {
        LostSeqs::None => (None, None, None),
        LostSeqs::Exact { first, last } => (Some(first), Some(last), None),
        LostSeqs::From {
            first,
            claimed_last,
        } => (Some(first), None, claimed_last),
    };
    let places: Vec<Value> = loss
        .places
        .iter()
        .map(|p| {
            json!({
                "segment": p.segment.display().to_string(),
                "bytes": p.bytes.as_ref().map(|b| [b.start, b.end]),
                "what": p.kind.to_string(),
            })
        })
        .collect();
    json!({
        "type": "lost",
        "first_seq": first,
        "last_seq": last,
        "claimed_last_seq": claimed,
        "seqs": loss.seqs.to_string(),
        "places": places,
        "chain_broken": loss.chain_broken,
    })
}

/// Whether a loss lost any record.
pub fn loses_records(loss: &Loss) -> bool {
    !matches!(loss.seqs, LostSeqs::None)
}
