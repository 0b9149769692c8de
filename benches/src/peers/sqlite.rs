//! SQLite (the `rusqlite` crate, SQLite bundled) in WAL mode, as an agent developer's
//! event store: a `kinds` table, an `events` table of (timestamp, kind id, payload)
//! with an index on (kind, ts), created before the first insert; inserts through one
//! prepared statement in transactions of [`COMMIT_EVERY`] events. Binary payloads are
//! BLOBs, JSON payloads TEXT (so that SQLite's JSON functions apply to them).
//!
//! Two rows: `synchronous = NORMAL` (the WAL is fsynced only at checkpoints, so a
//! commit survives a crash of the process but not of the machine) and `synchronous =
//! FULL` (the WAL is fsynced at every commit). Closing the connection checkpoints the
//! WAL into the database and fsyncs it, so both are durable at the end.
//!
//! SQLite keeps no checksums of its pages (without the `cksumvfs` extension): reads
//! check the b-tree's structure only.

use std::path::Path;

use rusqlite::{Connection, params};

use super::COMMIT_EVERY;
use crate::Result;
use crate::harness::{Contender, Description};
use crate::workload::{KINDS, Tally, WindowQuery, Workload};

const FILE: &str = "events.sqlite";

const SCHEMA: &str = "
    CREATE TABLE kinds (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE events (
        ts INTEGER NOT NULL,
        kind INTEGER NOT NULL REFERENCES kinds (id),
        payload NOT NULL
    );
    CREATE INDEX events_kind_ts ON events (kind, ts);
";

const INSERT: &str = "INSERT INTO events (ts, kind, payload) VALUES (?1, ?2, ?3)";
const SELECT_ALL: &str = "SELECT ts, kind, payload FROM events";
/// The window query; the (kind, ts) index answers it.
pub const SELECT_WINDOW: &str =
    "SELECT ts, payload FROM events WHERE kind = ?1 AND ts BETWEEN ?2 AND ?3";

/// A SQLite row.
#[derive(Debug, Clone, Copy)]
pub struct Sqlite {
    description: Description,
    synchronous: &'static str,
}

impl Sqlite {
    /// WAL, `synchronous = NORMAL`.
    pub const NORMAL: Sqlite = Sqlite {
        description: Description {
            id: "sqlite-normal",
            name: "SQLite WAL `NORMAL`, (kind, ts) index",
            durability: "WAL fsynced at checkpoints and close; transactions of 1000",
            integrity: "none (no page checksums)",
            window_path: "`SELECT … WHERE kind = ? AND ts BETWEEN ? AND ?` through the (kind, ts) index, each row fetched from the table by rowid",
        },
        synchronous: "NORMAL",
    };

    /// WAL, `synchronous = FULL`.
    pub const FULL: Sqlite = Sqlite {
        description: Description {
            id: "sqlite-full",
            name: "SQLite WAL `FULL`, (kind, ts) index",
            durability: "WAL fsynced per transaction of 1000",
            integrity: "none (no page checksums)",
            window_path: "as `NORMAL`",
        },
        synchronous: "FULL",
    };
}

/// A timestamp as SQLite's INTEGER (a signed 64-bit number).
fn to_sql_ts(ts_ns: u64) -> Result<i64> {
    Ok(i64::try_from(ts_ns)
        .map_err(|_| format!("timestamp {ts_ns} does not fit SQLite's INTEGER"))?)
}

/// A timestamp read back.
fn from_sql_ts(ts: i64) -> Result<u64> {
    Ok(u64::try_from(ts).map_err(|_| format!("negative timestamp {ts} in the database"))?)
}

/// A kind id read back.
fn from_sql_kind(kind: i64) -> Result<u8> {
    Ok(u8::try_from(kind).map_err(|_| format!("kind id {kind} out of range"))?)
}

impl Contender for Sqlite {
    fn describe(&self) -> Description {
        self.description
    }

    fn write(&self, dir: &Path, workload: &Workload) -> Result<()> {
        let mut conn = Connection::open(dir.join(FILE))?;
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("SQLite refused WAL mode (journal_mode is {mode})").into());
        }
        conn.pragma_update(None, "synchronous", self.synchronous)?;
        conn.execute_batch(SCHEMA)?;
        {
            let tx = conn.transaction()?;
            for (id, name) in (0u8..).zip(KINDS) {
                tx.execute(
                    "INSERT INTO kinds (id, name) VALUES (?1, ?2)",
                    params![id, name],
                )?;
            }
            tx.commit()?;
        }
        for first in (0..workload.len()).step_by(COMMIT_EVERY) {
            let tx = conn.transaction()?;
            {
                let mut insert = tx.prepare_cached(INSERT)?;
                for i in first..workload.len().min(first + COMMIT_EVERY) {
                    let e = workload.event(i);
                    let ts = to_sql_ts(e.ts_ns)?;
                    match e.json {
                        Some(text) => insert.execute(params![ts, e.kind, text])?,
                        None => insert.execute(params![ts, e.kind, e.payload])?,
                    };
                }
            }
            tx.commit()?;
        }
        conn.close().map_err(|(_, e)| e)?;
        Ok(())
    }

    fn read_all(&self, dir: &Path) -> Result<Tally> {
        let conn = Connection::open(dir.join(FILE))?;
        let mut tally = Tally::default();
        {
            let mut select = conn.prepare(SELECT_ALL)?;
            let mut rows = select.query([])?;
            while let Some(row) = rows.next()? {
                let ts = from_sql_ts(row.get(0)?)?;
                let kind = from_sql_kind(row.get(1)?)?;
                tally.add(kind, ts, row.get_ref(2)?.as_bytes()?)?;
            }
        }
        conn.close().map_err(|(_, e)| e)?;
        Ok(tally)
    }

    fn read_window(&self, dir: &Path, query: &WindowQuery) -> Result<Tally> {
        let conn = Connection::open(dir.join(FILE))?;
        let mut tally = Tally::default();
        {
            let mut select = conn.prepare(SELECT_WINDOW)?;
            let mut rows = select.query(params![
                query.kind,
                to_sql_ts(query.since_ns)?,
                to_sql_ts(query.until_ns)?
            ])?;
            while let Some(row) = rows.next()? {
                let ts = from_sql_ts(row.get(0)?)?;
                tally.add(query.kind, ts, row.get_ref(1)?.as_bytes()?)?;
            }
        }
        conn.close().map_err(|(_, e)| e)?;
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Expected;
    use crate::workload::Variant;

    #[test]
    fn both_rows_give_back_every_event_and_the_window() -> Result<()> {
        for variant in Variant::ALL {
            let workload = Workload::generate(2_345, variant)?;
            let expected = Expected::of(&workload);
            for row in [Sqlite::NORMAL, Sqlite::FULL] {
                let dir = tempfile::tempdir()?;
                row.write(dir.path(), &workload)?;
                expected.all.check(&row.read_all(dir.path())?)?;
                expected
                    .window
                    .check(&row.read_window(dir.path(), &expected.query)?)?;
            }
        }
        Ok(())
    }

    #[test]
    fn the_database_is_in_wal_mode_and_the_window_uses_the_index() -> Result<()> {
        let workload = Workload::generate(500, Variant::Json)?;
        let dir = tempfile::tempdir()?;
        Sqlite::FULL.write(dir.path(), &workload)?;
        let conn = Connection::open(dir.path().join(FILE))?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        assert_eq!(mode, "wal");
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {SELECT_WINDOW}"))?
            .query_map(params![2, 0, 1], |r| r.get(3))?
            .collect::<std::result::Result<_, _>>()?;
        assert!(
            plan.iter()
                .any(|p| p.contains("USING INDEX events_kind_ts")),
            "{plan:?}"
        );
        // JSON payloads are stored as TEXT, so SQLite's JSON functions read them.
        let seq: i64 = conn.query_row(
            "SELECT payload ->> '$.seq' FROM events ORDER BY rowid LIMIT 1 OFFSET 7",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(seq, 7);
        Ok(())
    }
}
