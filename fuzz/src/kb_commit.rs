//! The knowledge base's records: commits, snapshots and carried commits, through
//! `decode_commit`, `decode_snapshot` and `decode_carried`, and through the decoder
//! `Replay` uses for the same record types.
//!
//! The first byte picks the mode: 0, 1, 2 (and every byte whose value mod 8 is one of
//! them) decode the rest, after a seq and a time (8 bytes each, little endian), as a
//! commit, a snapshot or a carried commit; 3 and 4 build an arbitrary commit (written
//! as a commit record and as a carried copy) or an arbitrary snapshot, encode it as the
//! knowledge base writes it (serde JSON), and require it to decode to exactly what was
//! built; a snapshot that breaks one of the decoder's rules (version 0, a key outside
//! the key rule, a fact updated after the snapshot) must be refused, naming the rule.
//! Other bytes end the input.
//!
//! Every record decoded: it reads back the same when encoded again; the seq and time
//! are the log record's; `Replay`'s decoder takes it too, as a JSON object, and prints
//! it as valid JSON. Every record refused: a `BadRecord` error naming the record's seq,
//! with a reason.

use arbitrary::{Result as ArbResult, Unstructured};
use blackbox::LogRecord;
use blackbox::kb::{
    self, Change, Commit, CommitRecord, Conditions, Fact, KeyLetGo, LetGo, Op, Outcome, Rejection,
    Rival, SnapshotRecord, Status,
};
use blackbox::log::{RecordType as Tag, Seq};
use blackbox_replay::{Body, Decoder, to_json};
use serde_json::Value;

use crate::arb;

/// The target: see the module's documentation.
pub fn kb_commit(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick {
        3 => drop(commits(&mut Unstructured::new(rest))),
        4 => drop(snapshots(&mut Unstructured::new(rest))),
        p if p % 8 <= 2 => raw(p % 8, rest),
        _ => {}
    }
}

/// The record decoded as one of the three types.
fn raw(which: u8, data: &[u8]) {
    let (seq, rest) = match data.split_first_chunk::<8>() {
        Some((s, rest)) => (u64::from_le_bytes(*s), rest),
        None => (0, data),
    };
    let (time_ns, payload) = match rest.split_first_chunk::<8>() {
        Some((t, rest)) => (u64::from_le_bytes(*t), rest),
        None => (0, rest),
    };
    let (tag, outcome) = match which {
        0 => (
            kb::KB_RECORD,
            kb::decode_commit(Seq(seq), time_ns, payload).map(|c| {
                assert_eq!(
                    (c.seq, c.time_ns),
                    (seq, time_ns),
                    "the commit's seq and time"
                );
                let again = encode(&c.record);
                let back = kb::decode_commit(Seq(seq), time_ns, &again)
                    .unwrap_or_else(|e| panic!("a commit encoded again is refused: {e}"));
                assert_eq!(back, c, "a commit encoded again reads back different");
            }),
        ),
        1 => (
            kb::KB_SNAPSHOT_RECORD,
            kb::decode_snapshot(Seq(seq), payload).map(|s| {
                // What the decoder promises of a snapshot it takes.
                assert_ne!(s.version, 0, "a snapshot of version 0 was taken");
                for key in s
                    .facts
                    .iter()
                    .map(|f| &f.key)
                    .chain(s.let_go.iter().map(|g| &g.key))
                {
                    assert!(
                        kb::validate_key(key).is_ok(),
                        "a snapshot with the key {key:?} was taken"
                    );
                }
                assert!(
                    s.facts.iter().all(|f| f.updated <= s.version),
                    "a snapshot holds a fact updated after it"
                );
                let back = kb::decode_snapshot(Seq(seq), &encode(&s))
                    .unwrap_or_else(|e| panic!("a snapshot encoded again is refused: {e}"));
                assert_eq!(back, s, "a snapshot encoded again reads back different");
            }),
        ),
        _ => (
            kb::KB_CARRIED_RECORD,
            kb::decode_carried(Seq(seq), payload).map(|c| {
                let back = kb::decode_carried(Seq(seq), &encode(&c))
                    .unwrap_or_else(|e| panic!("a carried commit encoded again is refused: {e}"));
                assert_eq!(
                    back, c,
                    "a carried commit encoded again reads back different"
                );
            }),
        ),
    };
    let replayed = replay_decodes(seq, time_ns, tag, payload);
    match outcome {
        Ok(()) => assert!(
            replayed,
            "the knowledge base takes a record that replay refuses"
        ),
        Err(e) => {
            let text = e.to_string();
            match &e {
                kb::Error::BadRecord { seq: at, reason } => {
                    assert_eq!(*at, seq, "the error names another seq: {text}");
                    assert!(!reason.trim().is_empty(), "the error gives no reason");
                    assert!(
                        text.contains(&format!("seq {seq}")),
                        "the error does not say where: {text}"
                    );
                }
                other => panic!("a record's bytes gave an error of another kind: {other}"),
            }
        }
    }
}

/// The knowledge base's encoding of a record: serde JSON.
fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| panic!("a record cannot be written: {e}"))
}

/// Whether `Replay`'s decoder takes the record; when it does, its JSON is valid JSON
/// that reads back the same, and holds the payload's object.
fn replay_decodes(seq: u64, time_ns: u64, tag: Tag, payload: &[u8]) -> bool {
    let record = LogRecord::from_parts(Seq(seq), time_ns, tag, payload);
    match Decoder::new().decode(&record) {
        Ok(decoded) => {
            let object = match &decoded.body {
                Body::Kb(c) | Body::KbCarried(c) => &c.commit,
                Body::KbSnapshot(s) => &s.snapshot,
                other => panic!("a knowledge-base record decodes to {other:?}"),
            };
            let parsed: Value = serde_json::from_slice(payload)
                .unwrap_or_else(|e| panic!("replay took a payload that is not JSON: {e}"));
            assert_eq!(object, &parsed, "replay's object is not the payload's");
            let json = to_json(&decoded);
            let back: Value = serde_json::from_str(&json.to_string())
                .unwrap_or_else(|e| panic!("a record's JSON does not read back: {e}"));
            assert_eq!(back, json, "a record's JSON reads back different");
            true
        }
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!("seq {seq}")),
                "replay's error does not say where: {text}"
            );
            false
        }
    }
}

/// A key the key rule takes: 1 to 256 bytes, no control character.
fn key(u: &mut Unstructured<'_>) -> ArbResult<String> {
    let mut k: String = u
        .arbitrary::<String>()?
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    while k.len() > kb::KEY_BYTES_MAX {
        k.pop();
    }
    if k.is_empty() {
        k.push('k');
    }
    Ok(k)
}

fn conditions(u: &mut Unstructured<'_>) -> ArbResult<Conditions> {
    Ok(arb::object(u)?.into_iter().collect())
}

fn seqs(u: &mut Unstructured<'_>) -> ArbResult<Vec<u64>> {
    let n = u.int_in_range(0..=4)?;
    (0..n).map(|_| u.arbitrary()).collect()
}

fn floats(u: &mut Unstructured<'_>) -> ArbResult<Vec<f64>> {
    let n = u.int_in_range(0..=4)?;
    (0..n).map(|_| arb::finite(u)).collect()
}

fn rival(u: &mut Unstructured<'_>) -> ArbResult<Rival> {
    Ok(Rival {
        value: arb::json(u)?,
        confidence: arb::finite(u)?,
        claims: floats(u)?,
        evidence_count: u.arbitrary()?,
        conditions: conditions(u)?,
        provenance: seqs(u)?,
        refutations: u.arbitrary()?,
        counter_evidence: seqs(u)?,
    })
}

fn rivals(u: &mut Unstructured<'_>) -> ArbResult<Vec<Rival>> {
    let n = u.int_in_range(0..=2)?;
    (0..n).map(|_| rival(u)).collect()
}

fn fact(u: &mut Unstructured<'_>, key: String) -> ArbResult<Fact> {
    Ok(Fact {
        key,
        value: arb::json(u)?,
        confidence: arb::finite(u)?,
        claims: floats(u)?,
        evidence_count: u.arbitrary()?,
        status: *u.choose(&[
            Status::Hypothesis,
            Status::Confirmed,
            Status::Contested,
            Status::Rejected,
        ])?,
        conditions: conditions(u)?,
        provenance: seqs(u)?,
        refutations: u.arbitrary()?,
        counter_evidence: seqs(u)?,
        created: u.arbitrary()?,
        updated: u.arbitrary()?,
        rivals: rivals(u)?,
        refuted: rivals(u)?,
    })
}

fn commit_record(u: &mut Unstructured<'_>) -> ArbResult<CommitRecord> {
    let op = match u.int_in_range(0..=3)? {
        0 => Op::Assert {
            key: key(u)?,
            value: arb::json(u)?,
            confidence: arb::finite(u)?,
            conditions: conditions(u)?,
        },
        1 => Op::Refute {
            key: key(u)?,
            value: arb::json(u)?,
        },
        2 => Op::Retract { key: key(u)? },
        _ => Op::Revert {
            version: u.arbitrary()?,
        },
    };
    let mut changes = Vec::new();
    for _ in 0..u.int_in_range(0..=3)? {
        let k = key(u)?;
        let fact = if u.arbitrary()? {
            Some(fact(u, k.clone())?)
        } else {
            None
        };
        let remembered = if u.arbitrary()? {
            let n = u.int_in_range(0..=2)?;
            Some(
                (0..n)
                    .map(|_| {
                        Ok(LetGo {
                            version: u.arbitrary()?,
                            state: rival(u)?,
                        })
                    })
                    .collect::<ArbResult<Vec<_>>>()?,
            )
        } else {
            None
        };
        changes.push(Change {
            key: k,
            fact,
            let_go: rivals(u)?,
            remembered,
        });
    }
    Ok(CommitRecord {
        version: u.arbitrary()?,
        author: u.arbitrary()?,
        message: u.arbitrary()?,
        provenance: seqs(u)?,
        op,
        outcome: *u.choose(&[
            Outcome::Created,
            Outcome::Corroborated,
            Outcome::Superseded,
            Outcome::Contested,
            Outcome::Duplicate,
            Outcome::Refuted,
            Outcome::Rejected,
            Outcome::Retracted,
            Outcome::Reverted,
        ])?,
        changes,
    })
}

/// An arbitrary commit, written as a commit record and as a carried copy, reads back
/// as built; replay takes both.
fn commits(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let record = commit_record(u)?;
    let (seq, time_ns): (u64, u64) = (u.arbitrary()?, u.arbitrary()?);
    let bytes = encode(&record);
    let got = kb::decode_commit(Seq(seq), time_ns, &bytes)
        .unwrap_or_else(|e| panic!("a commit written is refused: {e}"));
    let want = Commit {
        seq,
        time_ns,
        record,
    };
    assert_eq!(got, want, "a commit reads back different");
    assert!(
        replay_decodes(seq, time_ns, kb::KB_RECORD, &bytes),
        "replay refuses a commit"
    );
    let carried = encode(&want);
    // A carried copy sits in a later segment's preamble, at a seq of its own.
    let at = seq.wrapping_add(1);
    let got = kb::decode_carried(Seq(at), &carried)
        .unwrap_or_else(|e| panic!("a carried commit written is refused: {e}"));
    assert_eq!(got, want, "a carried commit reads back different");
    assert!(
        replay_decodes(at, time_ns, kb::KB_CARRIED_RECORD, &carried),
        "replay refuses a carried commit"
    );
    Ok(())
}

/// An arbitrary snapshot within the decoder's rules reads back as built; one that
/// breaks one rule is refused, naming it.
fn snapshots(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let version = u.int_in_range(1..=u64::MAX)?;
    let mut facts = Vec::new();
    for _ in 0..u.int_in_range(0..=3)? {
        let k = key(u)?;
        let mut f = fact(u, k)?;
        f.updated = u.int_in_range(0..=version)?;
        facts.push(f);
    }
    let mut let_go = Vec::new();
    for _ in 0..u.int_in_range(0..=2)? {
        let_go.push(KeyLetGo {
            key: key(u)?,
            version: u.arbitrary()?,
            state: rival(u)?,
        });
    }
    let mut times = std::collections::BTreeMap::new();
    for _ in 0..u.int_in_range(0..=3)? {
        times.insert(u.arbitrary()?, u.arbitrary()?);
    }
    let mut rejected = Vec::new();
    for _ in 0..u.int_in_range(0..=2)? {
        rejected.push(Rejection {
            key: key(u)?,
            value: arb::json(u)?,
            version: u.arbitrary()?,
            confidence: arb::finite(u)?,
            refutations: u.arbitrary()?,
        });
    }
    let mut snap = SnapshotRecord {
        version,
        time_ns: u.arbitrary()?,
        seq: u.arbitrary()?,
        facts,
        let_go,
        times,
        rejected,
    };
    let seq: u64 = u.arbitrary()?;
    // Which rule to break, if any.
    let broken = match u.int_in_range(0..=3)? {
        1 => {
            snap.version = 0;
            for f in &mut snap.facts {
                f.updated = 0;
            }
            Some("version 0")
        }
        2 if !snap.facts.is_empty() => {
            let bad = *u.choose(&["", "a\u{0}b", "tab\there", "\u{85}"])?;
            snap.facts[0].key = bad.to_owned();
            Some("key")
        }
        3 if !snap.facts.is_empty() && snap.version < u64::MAX => {
            snap.facts[0].updated = snap.version + 1;
            Some("updated by version")
        }
        _ => None,
    };
    let bytes = encode(&snap);
    match (kb::decode_snapshot(Seq(seq), &bytes), broken) {
        (Ok(got), None) => assert_eq!(got, snap, "a snapshot reads back different"),
        (Err(e), Some(rule)) => {
            let text = e.to_string();
            assert!(
                text.contains(rule) && text.contains(&format!("seq {seq}")),
                "a snapshot breaking the rule on its {rule} is refused without saying so: {text}"
            );
        }
        (got, broken) => panic!("a snapshot breaking {broken:?} decodes to {got:?}"),
    }
    assert!(
        replay_decodes(seq, 0, kb::KB_SNAPSHOT_RECORD, &bytes),
        "replay refuses a snapshot"
    );
    Ok(())
}
