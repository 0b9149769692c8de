//! fjall 3, an LSM tree: one keyspace whose key is kind id ‖ timestamp ‖ seq (big-endian,
//! so that key order is kind, then time; the seq keeps keys unique whatever the
//! timestamps) and whose value is the payload, written in atomic batches of
//! [`COMMIT_EVERY`] events, each committed with `fdatasync` (`PersistMode::SyncData`).
//! Opening the database recovers what its journal holds beyond the flushed tables:
//! every read below pays that, as any process opening the store does.
//!
//! The key makes the window query one range scan. Reading every event is a scan of the
//! whole keyspace, in key order (kind by kind), not in time order.

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::COMMIT_EVERY;
use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{Tally, WindowQuery, Workload};

const DB_DIR: &str = "fjall";
const KEYSPACE: &str = "events";
const KEY_BYTES: usize = 17;

/// The fjall row.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fjall;

fn key(kind: u8, ts_ns: u64, seq: u64) -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    key[0] = kind;
    key[1..9].copy_from_slice(&ts_ns.to_be_bytes());
    key[9..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// The kind and timestamp of a key read back.
fn parse_key(key: &[u8]) -> Result<(u8, u64)> {
    let key: &[u8; KEY_BYTES] = key
        .try_into()
        .map_err(|_| format!("a key of {} bytes, expected {KEY_BYTES}", key.len()))?;
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&key[1..9]);
    Ok((key[0], u64::from_be_bytes(ts)))
}

fn open(dir: &Path) -> Result<(Database, Keyspace)> {
    let db = Database::builder(dir.join(DB_DIR)).open()?;
    let keyspace = db.keyspace(KEYSPACE, KeyspaceCreateOptions::default)?;
    Ok((db, keyspace))
}

impl Contender for Fjall {
    fn describe(&self) -> Description {
        Description {
            id: "fjall",
            name: "fjall 3, key (kind, ts, seq)",
            durability: "fdatasync per batch of 1000",
            integrity: "xxh3 per journal batch and per table block; checked on read",
            window_path: "one range scan over the keys of the kind between the window's times, after the open has recovered the journal",
        }
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let (db, keyspace) = open(dir)?;
        for first in (0..workload.len()).step_by(COMMIT_EVERY) {
            let mut batch = db.batch().durability(Some(PersistMode::SyncData));
            for i in first..workload.len().min(first + COMMIT_EVERY) {
                let e = workload.event(i);
                batch.insert(&keyspace, key(e.kind, e.ts_ns, e.seq), e.payload);
            }
            batch.commit()?;
        }
        db.persist(PersistMode::SyncData)?;
        // Dropping the database waits for its background workers.
        drop(keyspace);
        drop(db);
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let (_db, keyspace) = open(dir)?;
        let mut tally = Tally::default();
        for guard in keyspace.iter() {
            let (key, value) = guard.into_inner()?;
            let (kind, ts) = parse_key(&key)?;
            tally.add(kind, ts, &value)?;
        }
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let (_db, keyspace) = open(dir)?;
        let lo = key(query.kind, query.since_ns, 0);
        let hi = key(query.kind, query.until_ns, u64::MAX);
        let mut tally = Tally::default();
        for guard in keyspace.range(lo..=hi) {
            let (key, value) = guard.into_inner()?;
            let (kind, ts) = parse_key(&key)?;
            tally.add(kind, ts, &value)?;
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Expected;
    use crate::workload::Variant;

    #[test]
    fn the_row_gives_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            let dir = tempfile::tempdir()?;
            Fjall.write(dir.path(), &workload)?;
            expected.all.check(&Fjall.read_all(dir.path())?)?;
            expected
                .window
                .check(&Fjall.read_window(dir.path(), &expected.query)?)?;
        }
        Ok(())
    }

    #[test]
    fn keys_sort_by_kind_then_time() -> Result<()> {
        assert!(key(1, u64::MAX, u64::MAX) < key(2, 0, 0));
        assert!(key(2, 5, u64::MAX) < key(2, 6, 0));
        assert_eq!(parse_key(&key(3, 42, 7))?, (3, 42));
        assert!(parse_key(&[0u8; 16]).is_err());
        Ok(())
    }
}
