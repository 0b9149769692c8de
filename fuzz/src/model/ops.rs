//! The operations, read from the fuzzer's bytes.

use arbitrary::{Result, Unstructured};

/// An operation on the log alone.
#[derive(Debug, Clone)]
pub enum LogOp {
    /// One call of `append` (one record) or `append_batch`: (type, time step, payload
    /// length) per record.
    Append(Vec<(u16, u64, usize)>),
    Flush,
    Sync,
    /// A power loss: each file keeps its synced bytes and `keep` more.
    Crash {
        keep: u64,
    },
    /// `close` and `open`.
    Reopen,
    /// Records by seq, `lo..=hi`.
    ReadSeq(u64, u64),
    /// Records by time, `lo..=hi` in 1/256ths of the newest record's time.
    ReadTime(u8, u8),
    /// Pins the seqs from `first` (taken modulo the log's length), `len` of them or to
    /// the end (an open range).
    Pin {
        first: u64,
        len: Option<u8>,
    },
    /// Drops every pin.
    Unpin,
    /// `Log::prune`.
    Prune,
}

/// A record's time step: mostly none or small, sometimes past a block's u32 delta.
fn ts_step(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=15)? {
        0..=6 => 0,
        7..=14 => u64::from(u.int_in_range(1u16..=999)?),
        _ => u64::from(u32::MAX) - 2 + u64::from(u.int_in_range(0u8..=6)?),
    })
}

impl LogOp {
    pub fn read(u: &mut Unstructured<'_>) -> Result<LogOp> {
        Ok(match u.int_in_range(0u8..=19)? {
            0..=7 => {
                let n = u.int_in_range(1usize..=6)?;
                let mut batch = Vec::with_capacity(n);
                for _ in 0..n {
                    let ty = u.int_in_range(0u16..=3)?;
                    let step = ts_step(u)?;
                    let len = usize::from(u.int_in_range(0u16..=400)?);
                    batch.push((ty, step, len));
                }
                LogOp::Append(batch)
            }
            8 => LogOp::Flush,
            9 | 10 => LogOp::Sync,
            11 => LogOp::Crash {
                keep: u64::from(u.int_in_range(0u16..=3000)?),
            },
            12 => LogOp::Reopen,
            13 => {
                let a = u64::from(u.int_in_range(0u16..=400)?);
                let b = u64::from(u.int_in_range(0u16..=400)?);
                LogOp::ReadSeq(a.min(b), a.max(b))
            }
            14 => {
                let (a, b) = (u.arbitrary::<u8>()?, u.arbitrary::<u8>()?);
                LogOp::ReadTime(a.min(b), a.max(b))
            }
            15 | 16 => LogOp::Pin {
                first: u64::from(u.arbitrary::<u16>()?),
                len: if u.arbitrary()? {
                    Some(u.arbitrary()?)
                } else {
                    None
                },
            },
            17 => LogOp::Unpin,
            _ => LogOp::Prune,
        })
    }
}

/// How the recorder's evidence is picked for a knowledge-base write.
#[derive(Debug, Clone, Copy)]
pub enum Cites {
    /// An observation recorded for this write.
    Fresh,
    /// A fresh one and the run's first.
    FreshAndFirst,
    /// Only an earlier one (picked modulo how many there are): may count nothing.
    Earlier(u8),
}

/// An operation on the recorder.
#[derive(Debug, Clone)]
pub enum RecOp {
    /// `record` of an event of kind `KINDS[kind]` with a payload of `len` bytes and
    /// `values` numeric values.
    Event {
        kind: usize,
        len: usize,
        values: u8,
    },
    /// `record_evidence` of an observation.
    Evidence,
    /// Sets (or with `None`, removes) a working-memory key.
    Working {
        key: usize,
        value: Option<u8>,
    },
    /// Moves the recorder's clock forward.
    Advance(u64),
    Sync,
    Checkpoint,
    /// A power loss after a barrier: each file keeps its synced bytes and `keep` more.
    Crash {
        keep: u64,
    },
    Reopen,
    Assert {
        key: usize,
        value: usize,
        confidence: f64,
        conditions: usize,
        cites: Cites,
    },
    Refute {
        key: usize,
        value: usize,
        cites: Cites,
    },
    Retract {
        key: usize,
        cites: Cites,
    },
    /// A revert to a version picked from `pick` (sometimes 0 or past the latest).
    Revert {
        pick: u8,
        cites: Cites,
    },
    /// Every as-of read of the knowledge base against the model.
    KbReads,
    /// `state_at` a time picked from `pick` (in 1/256ths of the run's span, or before).
    StateAt(u8),
    /// The events replayed up to a time picked from `pick`.
    ReplayTo(u8),
}

fn cites(u: &mut Unstructured<'_>) -> Result<Cites> {
    Ok(match u.int_in_range(0u8..=5)? {
        0..=3 => Cites::Fresh,
        4 => Cites::FreshAndFirst,
        _ => Cites::Earlier(u.arbitrary()?),
    })
}

fn confidence(u: &mut Unstructured<'_>) -> Result<f64> {
    Ok(match u.int_in_range(0u8..=7)? {
        0 => 0.0,
        1 => 1.0,
        2 => 0.8,
        3 => 0.2,
        _ => f64::from(u.arbitrary::<u16>()?) / f64::from(u16::MAX),
    })
}

impl RecOp {
    pub fn read(u: &mut Unstructured<'_>) -> Result<RecOp> {
        Ok(match u.int_in_range(0u8..=27)? {
            0..=4 => RecOp::Event {
                kind: u.int_in_range(0usize..=2)?,
                len: usize::from(u.int_in_range(0u16..=600)?),
                values: u.int_in_range(0u8..=3)?,
            },
            5 => RecOp::Evidence,
            6 | 7 => RecOp::Working {
                key: u.int_in_range(0usize..=2)?,
                value: if u.int_in_range(0u8..=3)? == 0 {
                    None
                } else {
                    Some(u.arbitrary()?)
                },
            },
            8 | 9 => RecOp::Advance(match u.int_in_range(0u8..=3)? {
                0 => 1,
                1 => u64::from(u.arbitrary::<u16>()?) * 1_000,
                2 => u64::from(u.arbitrary::<u16>()?) * 1_000_000,
                _ => 5_000_000_000,
            }),
            10 => RecOp::Sync,
            11 => RecOp::Checkpoint,
            12 => RecOp::Crash {
                keep: u64::from(u.int_in_range(0u16..=3000)?),
            },
            13 => RecOp::Reopen,
            14..=17 => RecOp::Assert {
                key: u.int_in_range(0usize..=2)?,
                value: u.int_in_range(0usize..=3)?,
                confidence: confidence(u)?,
                conditions: u.int_in_range(0usize..=2)?,
                cites: cites(u)?,
            },
            18 | 19 => RecOp::Refute {
                key: u.int_in_range(0usize..=2)?,
                value: u.int_in_range(0usize..=3)?,
                cites: cites(u)?,
            },
            20 => RecOp::Retract {
                key: u.int_in_range(0usize..=2)?,
                cites: cites(u)?,
            },
            21 => RecOp::Revert {
                pick: u.arbitrary()?,
                cites: cites(u)?,
            },
            22 | 23 => RecOp::KbReads,
            24 | 25 => RecOp::StateAt(u.arbitrary()?),
            _ => RecOp::ReplayTo(u.arbitrary()?),
        })
    }
}
