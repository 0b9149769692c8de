//! Applying `blackbox record`'s lines ([`Line`], from
//! [`parse_line`](crate::record_input::parse_line)) to a running recorder, as the
//! command does: events recorded (through `record_evidence` when sent with `"ack":
//! true`), working-memory operations, checkpoints and syncs, and knowledge-base
//! operations committed in log order when they arrive. The command prints the replies;
//! hosts and tests can feed a recorder the same way.
//!
//! A knowledge-base line's `evidence` holds seqs, or `"line:L"` references to earlier
//! event lines of the same stream that were sent with `"ack": true` (those, and only
//! those, have a seq the command knows: a plain event line gets its seq only when the
//! writer writes it).

use blackbox::kb::Provenance;
use blackbox::{Event, Recorder, Seq};
use serde_json::{Value, json};

use crate::record_input::{Evidence, KbOp, Line, What};

/// What a line applied did, for its reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// An event recorded; with its seq when it was sent with `"ack": true`.
    Event {
        /// The seq it got, for an acknowledged event.
        seq: Option<u64>,
    },
    /// A working-memory operation or a checkpoint.
    Op,
    /// A knowledge-base operation committed: its acknowledgement, `{"line", "version",
    /// "outcome", "seq"}`.
    Kb(Value),
    /// A sync: the last seq durable.
    Synced(Option<u64>),
}

/// Applies line `number` of a stream. The outer error stops the run (the recorder
/// failed); the inner one is the line's own problem (refused by the recorder: a name
/// or an event past the limits, a memory or checkpoint too large, a knowledge-base
/// operation refused), in one sentence, and the recorder goes on. An acknowledged
/// event's seq is noted in `acked`.
///
/// # Errors
///
/// [`blackbox::Error`] when the recorder or the knowledge base's view failed.
pub fn apply_line(
    recorder: &Recorder,
    line: Line,
    number: u64,
    acked: &mut AckedLines,
) -> Result<Result<Applied, String>, blackbox::Error> {
    match line {
        Line::Kb(op) => Ok(apply_kb(recorder, op, number, acked)?.map(Applied::Kb)),
        Line::Event {
            kind,
            source,
            payload,
            values,
            event_time_ns,
            ack,
        } => {
            let values: Vec<(&str, f64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let mut event = Event::new(&kind).values(&values);
            if let Some(s) = &source {
                event = event.source(s);
            }
            if let Some(p) = &payload {
                event = event.json(p);
            }
            if let Some(t) = event_time_ns {
                event = event.event_time_ns(t);
            }
            // An acknowledged event is written whatever its kind's tier: it may be cited.
            let recorded = if ack {
                recorder.record_evidence(&event).map(|seq| Some(seq.0))
            } else {
                recorder.record(&event).map(|()| None)
            };
            match recorded {
                Ok(seq) => {
                    if let Some(seq) = seq {
                        acked.push(number, seq);
                    }
                    Ok(Ok(Applied::Event { seq }))
                }
                Err(
                    e @ (blackbox::Error::InvalidKind(_)
                    | blackbox::Error::InvalidName { .. }
                    | blackbox::Error::EventTooLarge { .. }
                    | blackbox::Error::TooManyValues { .. }
                    | blackbox::Error::NameLimit(_)),
                ) => Ok(Err(e.to_string())),
                Err(e) => Err(e),
            }
        }
        Line::Set { key, value } => match recorder.working().set(key, value) {
            Ok(_) => Ok(Ok(Applied::Op)),
            Err(e @ blackbox::Error::WorkingMemoryTooLarge { .. }) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        },
        Line::Del { key } => {
            recorder.working().remove(&key);
            Ok(Ok(Applied::Op))
        }
        Line::Checkpoint => match recorder.checkpoint() {
            Ok(_) => Ok(Ok(Applied::Op)),
            Err(e @ blackbox::Error::CheckpointTooLarge { .. }) => Ok(Err(e.to_string())),
            Err(e) => Err(e),
        },
        Line::Sync => Ok(Ok(Applied::Synced(recorder.sync()?.map(|s| s.0)))),
    }
}

/// The seq each event line sent with `"ack": true` got, by line number, for `"line:L"`
/// references: kept for the whole run, as pairs in line order (lines only grow), found
/// by binary search. 16 bytes an acknowledged line (up to twice that while the vector
/// grows), nothing for the other lines.
#[derive(Debug, Default)]
pub struct AckedLines(Vec<(u64, u64)>);

impl AckedLines {
    /// Notes that line `line`, later than every line noted so far, got `seq`.
    pub fn push(&mut self, line: u64, seq: u64) {
        match self.0.last() {
            Some(&(last, _)) if last >= line => {
                // Never happens (lines come in order); kept sorted all the same.
                let at = self.0.partition_point(|&(l, _)| l < line);
                if self.0.get(at).is_some_and(|&(l, _)| l == line) {
                    self.0[at] = (line, seq);
                } else {
                    self.0.insert(at, (line, seq));
                }
            }
            _ => self.0.push((line, seq)),
        }
    }

    /// The seq line `line` got, if it was acknowledged.
    pub fn get(&self, line: u64) -> Option<u64> {
        self.0
            .binary_search_by_key(&line, |&(l, _)| l)
            .ok()
            .map(|i| self.0[i].1)
    }
}

/// Commits `op` (line `line` of the stream) through the recorder. The outer error stops
/// the run (the recorder or the knowledge base's view failed); the inner one is the op's
/// own problem, and the recorder goes on. On success, the acknowledgement to print.
///
/// # Errors
///
/// [`blackbox::Error`] when the knowledge base cannot be opened or the recorder failed.
fn apply_kb(
    recorder: &Recorder,
    op: KbOp,
    line: u64,
    acked: &AckedLines,
) -> Result<Result<Value, String>, blackbox::Error> {
    let mut seqs = Vec::with_capacity(op.evidence.len());
    for e in &op.evidence {
        seqs.push(match *e {
            Evidence::Seq(s) => s,
            Evidence::Line(l) if l >= line => {
                return Ok(Err(format!(
                    "evidence \"line:{l}\" is not an earlier line of this stream (this is line {line})"
                )));
            }
            Evidence::Line(l) => match acked.get(l) {
                Some(s) => s,
                None => {
                    return Ok(Err(format!(
                        "evidence \"line:{l}\": line {l} has no seq to cite; only an event line sent with \"ack\": true and recorded has one"
                    )));
                }
            },
        });
    }
    let provenance = Provenance::new(seqs.into_iter().map(Seq))
        .author(op.author)
        .message(op.message);
    let kb = recorder.kb()?;
    let result = match op.what {
        What::Put {
            key,
            value,
            confidence,
            conditions,
        } => kb.assert(&key, value, confidence, &conditions, provenance),
        What::Refute { key, value } => kb.refute(&key, &value, provenance),
        What::Retract { key } => kb.retract(&key, provenance),
        What::Revert { version } => kb.revert_to(version, provenance),
    };
    match result {
        Ok(c) => Ok(Ok(json!({
            "line": line,
            "version": c.version,
            "outcome": c.outcome.name(),
            "seq": c.seq,
        }))),
        Err(e) if refused(&e) => Ok(Err(e.to_string())),
        Err(e) => Err(blackbox::Error::from(e)),
    }
}

/// Whether a knowledge-base error is the op's own problem (nothing was committed, and
/// the next op may succeed) rather than a failure of the view or the recorder.
fn refused(e: &blackbox::kb::Error) -> bool {
    use blackbox::kb::Error as E;
    matches!(
        e,
        E::NoEvidence
            | E::EvidenceNotInLog { .. }
            | E::InvalidConfidence { .. }
            | E::InvalidKey { .. }
            | E::InvalidJson { .. }
            | E::UnknownVersion { .. }
            | E::NotFound { .. }
            | E::CommitTooLarge { .. }
            | E::BeforeHistory { .. }
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The lines found are those noted, with their seqs, as a map would give them; and
    /// the memory is the vector of pairs alone, 16 bytes each.
    #[test]
    fn acked_lines_are_found_as_a_map_finds_them() {
        let mut acked = AckedLines::default();
        let mut model = BTreeMap::new();
        let mut seq = 100;
        for line in (1..30_000u64).filter(|l| l % 3 != 0 && l % 7 != 1) {
            seq += line % 5 + 1;
            acked.push(line, seq);
            model.insert(line, seq);
        }
        // A line out of order (never sent by `record`) keeps the order all the same.
        acked.push(9, 1);
        model.insert(9, 1);
        for line in 0..30_010 {
            assert_eq!(acked.get(line), model.get(&line).copied(), "line {line}");
        }
        assert_eq!(acked.0.len(), model.len());
        assert_eq!(std::mem::size_of::<(u64, u64)>(), 16);
    }
}
