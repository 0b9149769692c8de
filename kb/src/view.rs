//! The fjall view: the knowledge base's commits, materialized for fast reads.
//!
//! Seven keyspaces in one fjall `Database`:
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `facts` | key | the key's current fact (JSON); absent when it has none |
//! | `history` | key ‖ `0x00` ‖ !version (u64 BE, bits inverted: newest first) | the key's fact after that version, or `null` |
//! | `commits` | version (u64 BE) | the commit with its seq and time (JSON) |
//! | `times` | time ns (u64 BE) ‖ version (u64 BE) | empty |
//! | `versions` | version (u64 BE) | its commit's time ns (u64 BE) |
//! | `let_go` | key ‖ `0x00` ‖ blake3 of the value's JSON text | a refuted value the key's fact let go: the version that let it go and the value's state then (JSON) |
//! | `meta` | `applied` | last applied version (u64 BE) ‖ its seq (u64 BE) |
//! | `meta` | `layout` | [`LAYOUT`]: a view of another layout is cleared and rebuilt |
//! | `meta` | `base` | for a view started from a snapshot (the log was pruned): the snapshot's version, its commit's seq and time (JSON) |
//! | `meta` | `base_rejected` | the rejections the snapshot listed (JSON) |
//! | `meta` | `base_let_go` ‖ `0x00` ‖ key | the refuted values the key remembered at the snapshot's version (JSON) |
//!
//! Keys hold no `0x00` byte (see [`crate::validate_key`]), so a key's history is one
//! contiguous range ordered by version (newest first), and a read as of version v is one
//! forward seek: O(log n) in the history's depth. Values are JSON (serde): nothing is read in place, so
//! fjall's unaligned buffers are never a problem.
//!
//! The view is never the truth: one commit's changes are applied in one atomic batch,
//! together with the applied version, and [`View::catch_up`] re-applies from the log
//! whatever the view lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use blackbox_log::{ChainKey, LogReader, ReaderOptions, Seq};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::error::{Error, Result};
use crate::model::{
    AsOf, Commit, CommitRecord, Conditions, Difference, Fact, KeyLetGo, LetGo, Op, Rejection,
    Rival, SnapshotRecord, Status, Version,
};

/// The record type of a knowledge-base commit in the log.
pub const KB_RECORD: blackbox_log::RecordType = blackbox_log::RecordType(5);

/// The record type of a knowledge-base snapshot ([`SnapshotRecord`], JSON): the whole
/// knowledge base as of one version, so that the log's records before it may be pruned.
pub const KB_SNAPSHOT_RECORD: blackbox_log::RecordType = blackbox_log::RecordType(11);

/// The record type of a carried commit: a copy of a commit record (type [`KB_RECORD`])
/// in a segment's preamble, as a [`Commit`] (JSON, with the original's seq and time).
/// Readers apply it only when they lack its version.
pub const KB_CARRIED_RECORD: blackbox_log::RecordType = blackbox_log::RecordType(12);

const APPLIED: &[u8] = b"applied";
const LAYOUT_KEY: &[u8] = b"layout";
const BASE: &[u8] = b"base";
const BASE_REJECTED: &[u8] = b"base_rejected";
const BASE_LET_GO: &[u8] = b"base_let_go\0";

/// The version of the view's layout, and of the facts it stores (2: every value of a
/// key with its claims and refutations; 3: the refuted values facts let go). A view written with another one (or none) is
/// cleared when opened and rebuilt from the log by the catch-up that follows: the view
/// is a cache of the log, never migrated.
pub const LAYOUT: u8 = 3;
const REBUILDING: &[u8] = b"rebuilding";

/// One entry of [`View::dump`]: keyspace, key, value.
pub type DumpEntry = (&'static str, Vec<u8>, Vec<u8>);

/// The materialized view of the knowledge base's commits.
pub struct View {
    path: PathBuf,
    db: Database,
    facts: Keyspace,
    history: Keyspace,
    commits: Keyspace,
    times: Keyspace,
    versions: Keyspace,
    let_go: Keyspace,
    meta: Keyspace,
}

/// Where a view started from a snapshot begins: the snapshot's version, and its
/// commit's seq and time.
#[derive(serde::Serialize, serde::Deserialize)]
struct Base {
    version: Version,
    seq: u64,
    time_ns: u64,
}

/// What a reader needs to know of any knowledge-base record first: its version.
#[derive(serde::Deserialize)]
struct VersionOnly {
    version: Version,
}

/// A catch-up that met a version it cannot follow from what the view holds (the log
/// was pruned past the view's last commit): the view is rebuilt.
struct Gap;

fn base_let_go_key(key: &str) -> Vec<u8> {
    let mut k = BASE_LET_GO.to_vec();
    k.extend_from_slice(key.as_bytes());
    k
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn be(v: u64) -> [u8; 8] {
    v.to_be_bytes()
}

fn read_be(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

/// `key ‖ 0x00 ‖ !version` (big-endian): a key's history runs newest first, so the
/// fact as of v is the first entry at or after `!v`, one forward seek (faster than a
/// reverse one in fjall: about 25 % on a deep history, in memory and in tables).
fn history_key(key: &[u8], version: Version) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(key);
    k.push(0);
    k.extend_from_slice(&be(!version));
    k
}

/// `key ‖ 0x00`: the prefix of every `let_go` entry of the key.
fn let_go_prefix(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 33);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// `key ‖ 0x00 ‖ blake3(value's JSON text)`: a value's text may be longer than a fjall
/// key may be.
fn let_go_key(key: &[u8], value: &serde_json::Value) -> Vec<u8> {
    let mut k = let_go_prefix(key);
    let text = serde_json::to_string(value).unwrap_or_default();
    k.extend_from_slice(blake3::hash(text.as_bytes()).as_bytes());
    k
}

/// Decodes a snapshot record's payload, checking its keys.
///
/// # Errors
///
/// [`Error::BadRecord`] when the payload is not a snapshot.
pub fn decode_snapshot(seq: Seq, payload: &[u8]) -> Result<SnapshotRecord> {
    let bad = |reason: String| Error::BadRecord { seq: seq.0, reason };
    let snap: SnapshotRecord =
        serde_json::from_slice(payload).map_err(|e| bad(format!("not a snapshot: {e}")))?;
    if snap.version == 0 {
        return Err(bad("a snapshot of version 0".to_owned()));
    }
    let keys = snap
        .facts
        .iter()
        .map(|f| &f.key)
        .chain(snap.let_go.iter().map(|g| &g.key));
    for key in keys {
        crate::validate_key(key).map_err(|e| bad(format!("snapshot: {e}")))?;
    }
    if let Some(f) = snap.facts.iter().find(|f| f.updated > snap.version) {
        return Err(bad(format!(
            "snapshot of version {}: the fact of {} was updated by version {}",
            snap.version,
            blackbox_log::Shown(&f.key),
            f.updated
        )));
    }
    Ok(snap)
}

/// Decodes a carried commit's payload (a [`Commit`], with its original seq and time).
///
/// # Errors
///
/// [`Error::BadRecord`] when the payload is not a commit.
pub fn decode_carried(seq: Seq, payload: &[u8]) -> Result<Commit> {
    serde_json::from_slice(payload).map_err(|e| Error::BadRecord {
        seq: seq.0,
        reason: format!("not a carried commit: {e}"),
    })
}

/// The version a knowledge-base record (commit, snapshot or carried commit) names.
fn version_of(payload: &[u8]) -> Option<Version> {
    serde_json::from_slice::<VersionOnly>(payload)
        .ok()
        .map(|v| v.version)
}

/// Decodes a commit record's payload.
///
/// # Errors
///
/// [`Error::BadRecord`] when the payload is not a commit.
pub fn decode_commit(seq: Seq, time_ns: u64, payload: &[u8]) -> Result<Commit> {
    let record: CommitRecord = serde_json::from_slice(payload).map_err(|e| Error::BadRecord {
        seq: seq.0,
        reason: format!("not a commit: {e}"),
    })?;
    Ok(Commit {
        seq: seq.0,
        time_ns,
        record,
    })
}

impl View {
    /// Opens (or creates) the view in `path`.
    ///
    /// # Errors
    ///
    /// [`Error::View`] when fjall cannot open it.
    pub fn open(path: impl AsRef<Path>) -> Result<View> {
        let path = path.as_ref().to_owned();
        let err = |op| {
            let path = path.clone();
            move |source| Error::View { op, path, source }
        };
        // The view is private to its owner whatever the umask: fjall creates its files
        // inside a directory nobody else can enter.
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            let private = |source| Error::View {
                op: "create",
                path: path.clone(),
                source: fjall::Error::Io(source),
            };
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)
                .map_err(private)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .map_err(private)?;
        }
        let db = Database::builder(&path).open().map_err(err("open"))?;
        let ks = |name: &str| {
            db.keyspace(name, KeyspaceCreateOptions::default)
                .map_err(err("open a keyspace of"))
        };
        let view = View {
            facts: ks("facts")?,
            history: ks("history")?,
            commits: ks("commits")?,
            times: ks("times")?,
            versions: ks("versions")?,
            let_go: ks("let_go")?,
            meta: ks("meta")?,
            db,
            path,
        };
        let layout = view.meta.get(LAYOUT_KEY).map_err(view.err("read"))?;
        if layout.as_deref() != Some(&[LAYOUT][..]) {
            // Data of another layout (an empty view has nothing to clear: every batch
            // that writes data also writes `applied`).
            if view.meta.get(APPLIED).map_err(view.err("read"))?.is_some() {
                view.clear()?;
            }
            view.meta
                .insert(LAYOUT_KEY, [LAYOUT])
                .map_err(view.err("write"))?;
        }
        Ok(view)
    }

    /// The view's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, op: &'static str) -> impl Fn(fjall::Error) -> Error + '_ {
        move |source| Error::View {
            op,
            path: self.path.clone(),
            source,
        }
    }

    fn encode<T: serde::Serialize>(&self, value: &T) -> Result<Vec<u8>> {
        serde_json::to_vec(value).map_err(|e| Error::View {
            op: "encode an entry of",
            path: self.path.clone(),
            source: fjall::Error::Io(std::io::Error::other(e)),
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, what: &str, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| Error::View {
            op: "decode an entry of",
            path: self.path.clone(),
            source: fjall::Error::Io(std::io::Error::other(format!("{what}: {e}"))),
        })
    }

    /// The last applied version and the seq of its record (version 0 and `None` when
    /// the view is empty).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn applied(&self) -> Result<(Version, Option<u64>)> {
        let Some(bytes) = self.meta.get(APPLIED).map_err(self.err("read"))? else {
            return Ok((0, None));
        };
        match (read_be(&bytes), bytes.get(8..).and_then(read_be)) {
            (Some(v), Some(seq)) => Ok((v, Some(seq))),
            _ => Ok((0, None)),
        }
    }

    /// The latest version (0 before any commit).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn version(&self) -> Result<Version> {
        Ok(self.applied()?.0)
    }

    /// Applies one commit: its changes, its commit entry, its time and the applied
    /// version, in one atomic batch. A commit already applied is skipped.
    ///
    /// # Errors
    ///
    /// [`Error::BadRecord`] when the commit's version is not the next one;
    /// [`Error::View`].
    pub fn apply(&self, commit: &Commit) -> Result<()> {
        let version = commit.record.version;
        let (applied, applied_seq) = self.applied()?;
        if version <= applied {
            // Already applied, unless this record comes after the one applied: then the
            // log repeats a version, which no writer does.
            if applied_seq.is_some_and(|s| commit.seq > s) {
                return Err(Error::BadRecord {
                    seq: commit.seq,
                    reason: format!(
                        "version {version} repeats (version {applied} is at seq {})",
                        applied_seq.unwrap_or(0)
                    ),
                });
            }
            return Ok(());
        }
        if version != applied + 1 {
            return Err(Error::BadRecord {
                seq: commit.seq,
                reason: format!("version {version} follows version {applied}"),
            });
        }
        let base = self.history_from()?;
        let mut batch = self.db.batch().durability(Some(PersistMode::Buffer));
        for change in &commit.record.changes {
            // What the key's fact let go is remembered along its lineage (see
            // `lineage_let_go`): a key that loses its fact forgets all of it (as it
            // forgets its rivals and its refuted values), and a revert gives back what
            // the key remembered at the version it restores.
            // A revert written with what the key remembers again carries it: applied
            // as it is, without the history (which a view started from a snapshot
            // lacks before its version).
            let restored = match (&change.fact, &commit.record.op, &change.remembered) {
                (None, _, _) => Some(BTreeMap::new()),
                (Some(_), Op::Revert { .. }, Some(remembered)) => Some(
                    remembered
                        .iter()
                        .map(|g| (json_text(&g.state.value), (g.version, g.state.clone())))
                        .collect(),
                ),
                (Some(_), Op::Revert { version: target }, None) => {
                    if *target < base {
                        return Err(Error::BadRecord {
                            seq: commit.seq,
                            reason: format!(
                                "the revert to version {target} carries no remembered values, and the view's history starts at version {base}"
                            ),
                        });
                    }
                    Some(lineage_let_go(*target, |v| {
                        self.lineage_step(&change.key, v, base)
                    })?)
                }
                (Some(_), _, _) => None,
            };
            if let Some(restored) = restored {
                for g in self.let_go.prefix(let_go_prefix(change.key.as_bytes())) {
                    let k = g.key().map_err(self.err("read"))?;
                    batch.remove(&self.let_go, k);
                }
                for (_, (let_go, state)) in restored {
                    let key = let_go_key(change.key.as_bytes(), &state.value);
                    let entry = LetGo {
                        version: let_go,
                        state,
                    };
                    batch.insert(&self.let_go, key, self.encode(&entry)?);
                }
            }
            for state in &change.let_go {
                let entry = LetGo {
                    version,
                    state: state.clone(),
                };
                batch.insert(
                    &self.let_go,
                    let_go_key(change.key.as_bytes(), &state.value),
                    self.encode(&entry)?,
                );
            }
            let json = self.encode(&change.fact)?;
            batch.insert(
                &self.history,
                history_key(change.key.as_bytes(), version),
                json.clone(),
            );
            match &change.fact {
                Some(_) => batch.insert(&self.facts, change.key.as_bytes(), json),
                None => batch.remove(&self.facts, change.key.as_bytes()),
            }
        }
        batch.insert(&self.commits, be(version), self.encode(commit)?);
        let mut t = be(commit.time_ns).to_vec();
        t.extend_from_slice(&be(version));
        batch.insert(&self.times, t, []);
        batch.insert(&self.versions, be(version), be(commit.time_ns));
        let mut applied = be(version).to_vec();
        applied.extend_from_slice(&be(commit.seq));
        batch.insert(&self.meta, APPLIED, applied);
        batch.commit().map_err(self.err("write"))
    }

    /// Brings the view up to date with the log in `log_dir`: applies every commit
    /// record after the last applied one, up to `until` (inclusive) when given. A view
    /// ahead of the log (its last commit is not in the log, as after a power loss that
    /// kept the view's writes and lost the log's) or interrupted in a rebuild is
    /// cleared and rebuilt. Returns how many commits it applied.
    ///
    /// A pruned log (its first segment starts past seq 0) lacks the commits before
    /// the cut: a view that must be rebuilt then starts from the log's first snapshot
    /// record ([`KB_SNAPSHOT_RECORD`], see [`View::load_snapshot`]) and applies the
    /// commits after it, carried copies ([`KB_CARRIED_RECORD`]) of the versions it
    /// lacks included. A view whose last commit was pruned goes on from the log's
    /// first record when the retained log continues it, and is rebuilt otherwise.
    ///
    /// # Errors
    ///
    /// [`Error::Log`], [`Error::BadRecord`], [`Error::View`]; [`Error::NoSnapshot`] for
    /// a pruned log that holds commits but no snapshot before them.
    pub fn catch_up(
        &self,
        log_dir: &Path,
        key: Option<ChainKey>,
        until: Option<Seq>,
    ) -> Result<usize> {
        let reader = LogReader::open_with(log_dir, ReaderOptions { key })?;
        let first_seq = reader.segments()?.first().map_or(0, |s| s.first_seq);
        let rebuilding = self
            .meta
            .get(REBUILDING)
            .map_err(self.err("read"))?
            .is_some();
        let (version, seq) = self.applied()?;
        // Where to go on from, or `None`: rebuild.
        let mut from = None;
        if rebuilding {
            self.clear()?;
        } else if let Some(seq) = seq {
            if seq < first_seq {
                // Its last record was pruned: the retained log must continue it.
                from = Some(first_seq);
            } else {
                let found = reader.records(Seq(seq)..=Seq(seq))?.next().transpose()?;
                let matches = found.as_ref().is_some_and(|r| {
                    r.seq().0 == seq
                        && [KB_RECORD, KB_CARRIED_RECORD, KB_SNAPSHOT_RECORD]
                            .contains(&r.record_type())
                        && version_of(r.payload()) == Some(version)
                });
                if matches {
                    from = Some(seq + 1);
                } else {
                    self.clear()?;
                }
            }
        } else {
            from = Some(0);
        }
        let end = until.map_or(Bound::Unbounded, Bound::Included);
        let went_on = match from {
            Some(from) => self.read_log(&reader, from, end, false, first_seq)?,
            None => Err(Gap),
        };
        let full = went_on.is_err() || from == Some(0);
        let applied = match went_on {
            Ok(n) => n,
            Err(Gap) => {
                if from.is_some() {
                    self.clear()?;
                }
                // A rebuild meets no gap it could recover from: it reports damage.
                self.read_log(&reader, 0, end, true, first_seq)?
                    .map_err(|Gap| Error::BadRecord {
                        seq: first_seq,
                        reason: "the knowledge-base records do not follow one another".to_owned(),
                    })?
            }
        };
        if full {
            self.meta.remove(REBUILDING).map_err(self.err("write"))?;
        }
        Ok(applied)
    }

    /// Applies the knowledge-base records of the log from `from`. A `rebuild` of an
    /// empty view on a pruned log starts at the first snapshot; otherwise a version
    /// the view cannot follow is a [`Gap`] (or, in a rebuild, damage).
    fn read_log(
        &self,
        reader: &LogReader,
        from: u64,
        end: Bound<Seq>,
        rebuild: bool,
        first_seq: u64,
    ) -> Result<std::result::Result<usize, Gap>> {
        let mut started = !(rebuild && first_seq > 0);
        let mut commit_before_start = false;
        let mut applied_n = 0;
        // The last copy (snapshot or carried commit) of the version applied last: when
        // the record the view applied last was pruned, the next catch-up starts after
        // it rather than at the log's start again.
        let mut copy_of_applied: Option<(Version, u64)> = None;
        // Only the knowledge base's records count here: the log's tag index passes over
        // the sealed blocks that hold none.
        let records = reader
            .records((Bound::Included(Seq(from)), end))?
            .with_tags([KB_SNAPSHOT_RECORD, KB_RECORD, KB_CARRIED_RECORD].map(|t| t.index_tag()));
        for record in records {
            let record = record?;
            let t = record.record_type();
            let seq = record.seq();
            if t == KB_SNAPSHOT_RECORD {
                if !started {
                    let snap = decode_snapshot(seq, record.payload())?;
                    self.load_snapshot(&snap, seq.0)?;
                    started = true;
                    continue;
                }
                let version = version_of(record.payload()).ok_or_else(|| Error::BadRecord {
                    seq: seq.0,
                    reason: "not a snapshot: it names no version".to_owned(),
                })?;
                let (applied, _) = self.applied()?;
                if version == applied {
                    copy_of_applied = Some((version, seq.0));
                }
                if version > applied {
                    if !rebuild {
                        return Ok(Err(Gap));
                    }
                    return Err(Error::BadRecord {
                        seq: seq.0,
                        reason: format!(
                            "a snapshot of version {version} follows version {applied}: the commits between are missing"
                        ),
                    });
                }
                continue;
            }
            let commit = if t == KB_RECORD {
                decode_commit(seq, record.ts_ns(), record.payload())?
            } else if t == KB_CARRIED_RECORD {
                decode_carried(seq, record.payload())?
            } else {
                continue;
            };
            if !started {
                commit_before_start = true;
                continue;
            }
            let (applied, _) = self.applied()?;
            let version = commit.record.version;
            if t == KB_CARRIED_RECORD && version <= applied {
                // A copy of a commit the view holds.
                if version == applied {
                    copy_of_applied = Some((version, seq.0));
                }
                continue;
            }
            if !rebuild && (version <= applied || version > applied + 1) {
                return Ok(Err(Gap));
            }
            self.apply(&commit)?;
            applied_n += 1;
        }
        if !started && commit_before_start {
            return Err(Error::NoSnapshot {
                pruned_upto: first_seq.saturating_sub(1),
            });
        }
        if let (Some((version, seq)), (applied, Some(applied_seq))) =
            (copy_of_applied, self.applied()?)
            && version == applied
            && applied_seq < first_seq
            && seq > applied_seq
        {
            let mut entry = be(applied).to_vec();
            entry.extend_from_slice(&be(seq));
            self.meta
                .insert(APPLIED, entry)
                .map_err(self.err("write"))?;
        }
        Ok(Ok(applied_n))
    }

    /// Empties the view and loads `snap`, read from the record at `record_seq`: the
    /// facts (each as the key's history entry at the snapshot's version), the values
    /// the keys remember, the rejections and the commit times the snapshot lists. The
    /// view's history is then complete from the snapshot's version
    /// ([`View::history_from`]); commits after it apply as usual.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn load_snapshot(&self, snap: &SnapshotRecord, record_seq: u64) -> Result<()> {
        self.clear()?;
        let version = snap.version;
        let mut batch = self.db.batch().durability(Some(PersistMode::Buffer));
        for fact in &snap.facts {
            let json = self.encode(&Some(fact))?;
            batch.insert(
                &self.history,
                history_key(fact.key.as_bytes(), version),
                json.clone(),
            );
            batch.insert(&self.facts, fact.key.as_bytes(), json);
        }
        let mut remembered: BTreeMap<&str, Vec<LetGo>> = BTreeMap::new();
        for g in &snap.let_go {
            let entry = LetGo {
                version: g.version,
                state: g.state.clone(),
            };
            batch.insert(
                &self.let_go,
                let_go_key(g.key.as_bytes(), &g.state.value),
                self.encode(&entry)?,
            );
            remembered.entry(&g.key).or_default().push(entry);
        }
        for (key, entries) in remembered {
            batch.insert(&self.meta, base_let_go_key(key), self.encode(&entries)?);
        }
        for (v, t) in &snap.times {
            batch.insert(&self.versions, be(*v), be(*t));
        }
        batch.insert(&self.versions, be(version), be(snap.time_ns));
        let mut t = be(snap.time_ns).to_vec();
        t.extend_from_slice(&be(version));
        batch.insert(&self.times, t, []);
        let base = Base {
            version,
            seq: snap.seq,
            time_ns: snap.time_ns,
        };
        batch.insert(&self.meta, BASE, self.encode(&base)?);
        batch.insert(&self.meta, BASE_REJECTED, self.encode(&snap.rejected)?);
        let mut applied = be(version).to_vec();
        applied.extend_from_slice(&be(record_seq));
        batch.insert(&self.meta, APPLIED, applied);
        batch.remove(&self.meta, REBUILDING);
        batch.commit().map_err(self.err("write"))
    }

    /// The version from which the view's history is complete: 0 for a view built
    /// from the log's start, the snapshot's version for one started from a snapshot
    /// (the log was pruned). Reads as of an earlier version are refused
    /// ([`Error::BeforeHistory`]).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn history_from(&self) -> Result<Version> {
        Ok(self.base()?.map_or(0, |b| b.version))
    }

    fn base(&self) -> Result<Option<Base>> {
        match self.meta.get(BASE).map_err(self.err("read"))? {
            Some(bytes) => self.decode("base", &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// What the view's latest version is, as a snapshot record: every current fact,
    /// the values the keys remember, every rejection and the commit times they name.
    /// `None` before any commit.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn snapshot_record(&self) -> Result<Option<SnapshotRecord>> {
        let (version, _) = self.applied()?;
        if version == 0 {
            return Ok(None);
        }
        let (seq, time_ns) = match (self.commit(version)?, self.base()?) {
            (Some(c), _) => (c.seq, c.time_ns),
            (None, Some(b)) if b.version == version => (b.seq, b.time_ns),
            (None, _) => {
                return Err(Error::BadRecord {
                    seq: 0,
                    reason: format!("the view holds no commit of its version {version}"),
                });
            }
        };
        let facts = self.facts()?;
        let mut let_go = Vec::new();
        for g in self.let_go.iter() {
            let (k, value) = g.into_inner().map_err(self.err("read"))?;
            let key = k.get(..k.len().saturating_sub(33)).unwrap_or_default();
            let entry: LetGo = self.decode("let-go entry", &value)?;
            let_go.push(KeyLetGo {
                key: String::from_utf8_lossy(key).into_owned(),
                version: entry.version,
                state: entry.state,
            });
        }
        let rejected = self.rejected()?;
        let named = facts
            .iter()
            .map(|f| f.updated)
            .chain(let_go.iter().map(|g| g.version))
            .chain(rejected.iter().map(|r| r.version));
        let mut times = BTreeMap::new();
        for v in named {
            if let Some(t) = self.commit_time(v)? {
                times.insert(v, t);
            }
        }
        Ok(Some(SnapshotRecord {
            version,
            time_ns,
            seq,
            facts,
            let_go,
            times,
            rejected,
        }))
    }

    /// The refuted values `key` remembers after version `at`, as a revert to `at`
    /// restores them, in the order of their JSON text.
    ///
    /// # Errors
    ///
    /// [`Error::BeforeHistory`] for a version before [`View::history_from`];
    /// [`Error::View`].
    pub fn remembered_at(&self, key: &str, at: Version) -> Result<Vec<LetGo>> {
        let base = self.history_from()?;
        if at < base {
            return Err(Error::BeforeHistory {
                at: AsOf::Version(at),
                history_from: base,
            });
        }
        let map = lineage_let_go(at, |v| self.lineage_step(key, v, base))?;
        Ok(map
            .into_values()
            .map(|(version, state)| LetGo { version, state })
            .collect())
    }

    /// Empties the view (marking it as rebuilding until a catch-up completes).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn clear(&self) -> Result<()> {
        self.meta
            .insert(REBUILDING, [1])
            .map_err(self.err("write"))?;
        for ks in [
            &self.facts,
            &self.history,
            &self.commits,
            &self.times,
            &self.versions,
            &self.let_go,
        ] {
            ks.clear().map_err(self.err("clear"))?;
        }
        for g in self.meta.prefix(BASE_LET_GO) {
            let k = g.key().map_err(self.err("read"))?;
            self.meta.remove(k).map_err(self.err("write"))?;
        }
        self.meta.remove(BASE).map_err(self.err("write"))?;
        self.meta.remove(BASE_REJECTED).map_err(self.err("write"))?;
        self.meta.remove(APPLIED).map_err(self.err("write"))
    }

    /// Makes the view's writes durable.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn persist(&self) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(self.err("persist"))
    }

    /// The version current at `at`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`] for a version above the latest;
    /// [`Error::BeforeHistory`] for a point before [`View::history_from`] (version 0,
    /// the empty base, excepted); [`Error::View`].
    pub fn resolve(&self, at: AsOf) -> Result<Version> {
        let version = self.resolve_any(at)?;
        let history_from = self.history_from()?;
        let before = match at {
            AsOf::Version(v) => v > 0 && v < history_from,
            AsOf::Time(_) => version < history_from,
        };
        if before {
            return Err(Error::BeforeHistory { at, history_from });
        }
        Ok(version)
    }

    fn resolve_any(&self, at: AsOf) -> Result<Version> {
        match at {
            AsOf::Version(v) => {
                let latest = self.version()?;
                if v > latest {
                    return Err(Error::UnknownVersion { version: v, latest });
                }
                Ok(v)
            }
            AsOf::Time(t) => {
                let mut upper = be(t).to_vec();
                upper.extend_from_slice(&be(u64::MAX));
                match self.times.range(..=upper).next_back() {
                    None => Ok(0),
                    Some(g) => {
                        let k = g.key().map_err(self.err("read"))?;
                        Ok(k.get(8..).and_then(read_be).unwrap_or(0))
                    }
                }
            }
        }
    }

    /// The key's current fact.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`] for a key no fact can have (the store refuses keys over
    /// 64 KiB outright); [`Error::View`].
    pub fn get(&self, key: &str) -> Result<Option<Fact>> {
        crate::validate_key(key)?;
        match self.facts.get(key.as_bytes()).map_err(self.err("read"))? {
            Some(bytes) => self.decode("fact", &bytes),
            None => Ok(None),
        }
    }

    fn fact_at(&self, key: &[u8], version: Version) -> Result<Option<Fact>> {
        let from = history_key(key, version);
        let to = history_key(key, 0);
        match self.history.range(from..=to).next() {
            None => Ok(None),
            Some(g) => {
                let (_, value) = g.into_inner().map_err(self.err("read"))?;
                self.decode("history entry", &value)
            }
        }
    }

    /// The state of `value` when the fact of `key` let it go (a refuted value past
    /// [`crate::adjudicate::REFUTED_KEPT`]), with the version that let it go; `None`
    /// when it never did, or the key forgot it since (it lost its fact, or a revert
    /// restored a version before).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn let_go(&self, key: &str, value: &serde_json::Value) -> Result<Option<(Version, Rival)>> {
        match self
            .let_go
            .get(let_go_key(key.as_bytes(), value))
            .map_err(self.err("read"))?
        {
            Some(bytes) => {
                let entry: LetGo = self.decode("let-go entry", &bytes)?;
                Ok(Some((entry.version, entry.state)))
            }
            None => Ok(None),
        }
    }

    /// The key's fact as of a version or a time: one seek, O(log n) in its history.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`]; [`Error::UnknownVersion`]; [`Error::View`].
    pub fn get_as_of(&self, key: &str, at: AsOf) -> Result<Option<Fact>> {
        crate::validate_key(key)?;
        let version = self.resolve(at)?;
        self.fact_at(key.as_bytes(), version)
    }

    /// Every version that changed the key, oldest first, with the key's fact after it
    /// (`None`: retracted or reverted away).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`]; [`Error::View`].
    pub fn history(&self, key: &str) -> Result<Vec<(Version, Option<Fact>)>> {
        crate::validate_key(key)?;
        let mut prefix = key.as_bytes().to_vec();
        prefix.push(0);
        let mut out = Vec::new();
        // Stored newest first.
        for g in self.history.prefix(&prefix).rev() {
            let (k, value) = g.into_inner().map_err(self.err("read"))?;
            let version = !k.get(prefix.len()..).and_then(read_be).unwrap_or(u64::MAX);
            out.push((version, self.decode("history entry", &value)?));
        }
        Ok(out)
    }

    /// The commit of `version`.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn commit(&self, version: Version) -> Result<Option<Commit>> {
        match self.commits.get(be(version)).map_err(self.err("read"))? {
            Some(bytes) => self.decode("commit", &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// The time of `version`'s commit, without decoding the commit.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn commit_time(&self, version: Version) -> Result<Option<u64>> {
        let value = self.versions.get(be(version)).map_err(self.err("read"))?;
        Ok(value.as_deref().and_then(read_be))
    }

    /// The commits whose versions are in `range`, oldest first.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn log(&self, range: impl std::ops::RangeBounds<Version>) -> Result<Vec<Commit>> {
        let map = |b: Bound<&Version>| match b {
            Bound::Included(v) => Bound::Included(be(*v)),
            Bound::Excluded(v) => Bound::Excluded(be(*v)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let range = (map(range.start_bound()), map(range.end_bound()));
        let mut out = Vec::new();
        for g in self.commits.range(range) {
            let (_, value) = g.into_inner().map_err(self.err("read"))?;
            out.push(self.decode("commit", &value)?);
        }
        Ok(out)
    }

    /// Every key's fact as of `at`: one seek per key.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`]; [`Error::View`].
    pub fn snapshot(&self, at: AsOf) -> Result<BTreeMap<String, Fact>> {
        let version = self.resolve(at)?;
        let mut out = BTreeMap::new();
        let mut from: Vec<u8> = Vec::new();
        loop {
            let Some(g) = self.history.range(from.as_slice()..).next() else {
                break;
            };
            let k = g.key().map_err(self.err("read"))?;
            let key = k.get(..k.len().saturating_sub(9)).unwrap_or_default();
            if let Some(fact) = self.fact_at(key, version)? {
                out.insert(fact.key.clone(), fact);
            }
            from = key.to_vec();
            from.push(1);
        }
        Ok(out)
    }

    /// Every current fact, in key order.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn facts(&self) -> Result<Vec<Fact>> {
        let mut out = Vec::new();
        for g in self.facts.iter() {
            let (_, value) = g.into_inner().map_err(self.err("read"))?;
            out.push(self.decode("fact", &value)?);
        }
        Ok(out)
    }

    /// The facts that differ between versions `v1` and `v2`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`]; [`Error::View`].
    pub fn diff(&self, v1: Version, v2: Version) -> Result<Vec<Difference>> {
        let mut a = self.snapshot(AsOf::Version(v1))?;
        let b = self.snapshot(AsOf::Version(v2))?;
        let mut out = Vec::new();
        for (key, after) in b {
            let before = a.remove(&key);
            if before.as_ref() != Some(&after) {
                out.push(Difference {
                    key,
                    before,
                    after: Some(after),
                });
            }
        }
        for (key, before) in a {
            out.push(Difference {
                key,
                before: Some(before),
                after: None,
            });
        }
        out.sort_by(|x, y| x.key.cmp(&y.key));
        Ok(out)
    }

    /// The current facts, not rejected, whose conditions hold in `context`.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn matching(&self, context: &Conditions) -> Result<Vec<Fact>> {
        let mut facts = self.facts()?;
        facts.retain(|f| f.status != Status::Rejected && f.holds_in(context));
        Ok(facts)
    }

    /// The current facts with open contradictions.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn contradictions(&self) -> Result<Vec<Fact>> {
        let mut facts = self.facts()?;
        facts.retain(|f| !f.rivals.is_empty());
        Ok(facts)
    }

    /// Every value ever rejected: each time a commit left a value of a key refuted
    /// (held by the fact, or let go by it and remembered), or made it the key's fact
    /// with status `rejected`, when the key's state before did not, with that commit's
    /// version; in key order, then by version, then by the value's JSON text. It reads
    /// every key's whole history, so it finds values the key no longer holds.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn rejected(&self) -> Result<Vec<Rejection>> {
        let base = self.history_from()?;
        let mut out = Vec::new();
        // A key's history runs newest first: gathered per key, then walked oldest first.
        let mut key: Vec<u8> = Vec::new();
        let mut entries: Vec<(Version, Option<Fact>)> = Vec::new();
        for g in self.history.iter() {
            let (k, value) = g.into_inner().map_err(self.err("read"))?;
            let split = k.len().saturating_sub(9);
            let name = k.get(..split).unwrap_or_default();
            let version = !k.get(split + 1..).and_then(read_be).unwrap_or(u64::MAX);
            if name != key.as_slice() {
                self.rejected_of(&key, &mut entries, &mut out, base)?;
                key = name.to_vec();
            }
            entries.push((version, self.decode("history entry", &value)?));
        }
        self.rejected_of(&key, &mut entries, &mut out, base)?;
        if base > 0 {
            // Those before the snapshot, as it listed them, in the same order.
            if let Some(bytes) = self.meta.get(BASE_REJECTED).map_err(self.err("read"))? {
                out.extend(self.decode::<Vec<Rejection>>("base rejections", &bytes)?);
            }
            out.sort_by(|a, b| {
                (&a.key, a.version, json_text(&a.value)).cmp(&(
                    &b.key,
                    b.version,
                    json_text(&b.value),
                ))
            });
        }
        Ok(out)
    }

    /// Appends to `out` the rejections of one key, from its history `entries` (newest
    /// first; emptied).
    fn rejected_of(
        &self,
        key: &[u8],
        entries: &mut Vec<(Version, Option<Fact>)>,
        out: &mut Vec<Rejection>,
        base: Version,
    ) -> Result<()> {
        let name = String::from_utf8_lossy(key).into_owned();
        // The key's lineage steps, oldest first, as far as walked.
        let mut steps: Vec<LineageStep> = Vec::with_capacity(entries.len());
        let mut found = Vec::new();
        // The values the fact let go and the key still remembers after each version,
        // and the values its fact held rejected: together, the key's rejected state.
        let mut remembered: BTreeMap<String, (Version, Rival)> = BTreeMap::new();
        let mut held_before: BTreeSet<String> = BTreeSet::new();
        for (version, fact) in entries.drain(..).rev() {
            let step = self.step_of(&name, version, fact.is_none(), base)?;
            if step.base {
                // The snapshot's state: what it held rejected is listed with the
                // snapshot's rejections, and is the state the next versions compare with.
                held_before = fact
                    .map(|f| rejected_in(&f, version))
                    .unwrap_or_default()
                    .iter()
                    .map(|r| json_text(&r.value))
                    .collect();
                remembered = step
                    .let_go
                    .iter()
                    .map(|(v, r)| (json_text(&r.value), (*v, r.clone())))
                    .collect();
                steps.push(step);
                continue;
            }
            let rebuilt = match step.from {
                Basis::Nothing => Some(BTreeMap::new()),
                Basis::Version(p) if p + 1 == version => None,
                // A revert: what the key remembered at the version it restores.
                Basis::Version(_) if step.restored.is_some() => Some(
                    step.restored
                        .iter()
                        .flatten()
                        .map(|(v, r)| (json_text(&r.value), (*v, r.clone())))
                        .collect(),
                ),
                Basis::Version(p) => Some(lineage_let_go(p, |v| {
                    let i = steps.partition_point(|s| s.version <= v);
                    Ok(i.checked_sub(1).and_then(|i| steps.get(i)).cloned())
                })?),
            };
            // What may be new: what the fact holds rejected, what it let go now, and
            // after a revert what the key remembers again. Only the state before is
            // compared with, so the walk costs what changes, not what is remembered.
            let held = fact.map(|f| rejected_in(&f, version)).unwrap_or_default();
            let as_rejection = |let_go: Version, r: &Rival| Rejection {
                key: name.clone(),
                value: r.value.clone(),
                version: let_go,
                confidence: r.confidence,
                refutations: r.refutations,
            };
            let mut candidates: Vec<Rejection> = held.clone();
            candidates.extend(step.let_go.iter().map(|(v, r)| as_rejection(*v, r)));
            if let Some(again) = &rebuilt {
                candidates.extend(again.values().map(|(v, r)| as_rejection(*v, r)));
            }
            let mut seen = BTreeSet::new();
            for mut r in candidates {
                let text = json_text(&r.value);
                let before = remembered.contains_key(&text) || held_before.contains(&text);
                if seen.insert(text.clone()) && !before {
                    r.version = version;
                    found.push((version, text, r));
                }
            }
            if let Some(again) = rebuilt {
                remembered = again;
            }
            for (v, r) in &step.let_go {
                remembered.insert(json_text(&r.value), (*v, r.clone()));
            }
            held_before = held.iter().map(|r| json_text(&r.value)).collect();
            steps.push(step);
        }
        found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.extend(found.into_iter().map(|(_, _, r)| r));
        Ok(())
    }

    /// The lineage step of `key` at `version`, a version that changed it. At `base`
    /// (the snapshot a view started from, when not 0) the key's lineage starts, with
    /// what it remembered then.
    fn step_of(
        &self,
        key: &str,
        version: Version,
        cleared: bool,
        base: Version,
    ) -> Result<LineageStep> {
        if base > 0 && version == base {
            let let_go = match self
                .meta
                .get(base_let_go_key(key))
                .map_err(self.err("read"))?
            {
                Some(bytes) => self.decode::<Vec<LetGo>>("base let-go entry", &bytes)?,
                None => Vec::new(),
            };
            return Ok(LineageStep {
                version,
                let_go: let_go.into_iter().map(|g| (g.version, g.state)).collect(),
                from: Basis::Nothing,
                base: true,
                restored: None,
            });
        }
        let commit = self.commit(version)?;
        let change = commit
            .as_ref()
            .and_then(|c| c.record.changes.iter().find(|c| c.key == key));
        let from = match commit.as_ref().map(|c| &c.record.op) {
            _ if cleared => Basis::Nothing,
            Some(Op::Revert { version: target }) => Basis::Version(*target),
            _ => Basis::Version(version.saturating_sub(1)),
        };
        Ok(LineageStep {
            version,
            let_go: change
                .map(|c| c.let_go.iter().map(|r| (version, r.clone())).collect())
                .unwrap_or_default(),
            from,
            base: false,
            restored: change
                .and_then(|c| c.remembered.as_ref())
                .map(|r| r.iter().map(|g| (g.version, g.state.clone())).collect()),
        })
    }

    /// The lineage step of `key` at the last version at or before `at` that changed
    /// it, read from its history and that version's commit.
    fn lineage_step(&self, key: &str, at: Version, base: Version) -> Result<Option<LineageStep>> {
        if at == 0 || at < base {
            return Ok(None);
        }
        let from = history_key(key.as_bytes(), at);
        let to = history_key(key.as_bytes(), 0);
        let Some(g) = self.history.range(from..=to).next() else {
            return Ok(None);
        };
        let (k, value) = g.into_inner().map_err(self.err("read"))?;
        let split = k.len().saturating_sub(8);
        let version = !k.get(split..).and_then(read_be).unwrap_or(u64::MAX);
        let fact: Option<Fact> = self.decode("history entry", &value)?;
        self.step_of(key, version, fact.is_none(), base).map(Some)
    }

    /// Every entry of every keyspace, in order: two views with equal dumps are
    /// identical.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn dump(&self) -> Result<Vec<DumpEntry>> {
        let mut out = Vec::new();
        for (name, ks) in [
            ("facts", &self.facts),
            ("history", &self.history),
            ("commits", &self.commits),
            ("times", &self.times),
            ("versions", &self.versions),
            ("let_go", &self.let_go),
            ("meta", &self.meta),
        ] {
            for g in ks.iter() {
                let (k, v) = g.into_inner().map_err(self.err("read"))?;
                out.push((name, k.to_vec(), v.to_vec()));
            }
        }
        Ok(out)
    }
}

/// One version that changed a key, as its lineage needs it: what its fact let go, and
/// the state it built on.
#[derive(Debug, Clone)]
struct LineageStep {
    version: Version,
    /// What the fact let go, each with the version that let it go (this step's
    /// version, but for a snapshot's base step).
    let_go: Vec<(Version, Rival)>,
    from: Basis,
    /// The step at the snapshot a view started from.
    base: bool,
    /// For a revert that carries them: what the key remembers again.
    restored: Option<Vec<(Version, Rival)>>,
}

/// The state a version built a key's fact on.
#[derive(Debug, Clone, Copy)]
enum Basis {
    /// None: the key lost its fact.
    Nothing,
    /// The key's state at this version (the one before, or the one a revert restored).
    Version(Version),
}

/// The refuted values a key remembers after version `at` (JSON text → the version that
/// let it go and its state then): what its fact let go along its lineage, from `at`
/// back through the versions each change built on (the one before it; for a revert,
/// the version restored) to the start or to a version where the key lost its fact.
/// The latest letting go of a value wins. `step_at(v)` gives the step of the last
/// version at or before `v` that changed the key.
fn lineage_let_go(
    at: Version,
    mut step_at: impl FnMut(Version) -> Result<Option<LineageStep>>,
) -> Result<BTreeMap<String, (Version, Rival)>> {
    let mut out = BTreeMap::new();
    let mut next = Some(at);
    while let Some(v) = next {
        let Some(step) = step_at(v)? else { break };
        for (v, r) in step.let_go {
            out.entry(json_text(&r.value)).or_insert((v, r));
        }
        if let Some(restored) = step.restored {
            // A revert that carries what it restored: the lineage before it is that.
            for (v, r) in restored {
                out.entry(json_text(&r.value)).or_insert((v, r));
            }
            break;
        }
        next = match step.from {
            Basis::Nothing => None,
            // Versions only go down along a lineage (a revert restores an earlier one).
            Basis::Version(p) if p < step.version && p > 0 => Some(p),
            Basis::Version(_) => None,
        };
    }
    Ok(out)
}

fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The values `fact` holds rejected after `version`: its own when its status is
/// `rejected`, and its refuted values.
fn rejected_in(fact: &Fact, version: Version) -> Vec<Rejection> {
    let own = (fact.status == Status::Rejected).then(|| Rejection {
        key: fact.key.clone(),
        value: fact.value.clone(),
        version,
        confidence: fact.confidence,
        refutations: fact.refutations,
    });
    own.into_iter()
        .chain(fact.refuted.iter().map(|r| Rejection {
            key: fact.key.clone(),
            value: r.value.clone(),
            version,
            confidence: r.confidence,
            refutations: r.refutations,
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use serde_json::Value;

    use super::*;
    use crate::model::{Change, Outcome};

    fn fact(version: Version, value: i64) -> Fact {
        Fact {
            key: "k".to_owned(),
            value: value.into(),
            confidence: 0.5,
            claims: vec![0.5],
            evidence_count: 1,
            status: Status::Hypothesis,
            conditions: Conditions::new(),
            provenance: vec![0],
            refutations: 0,
            counter_evidence: Vec::new(),
            created: 1,
            updated: version,
            rivals: Vec::new(),
            refuted: Vec::new(),
        }
    }

    fn commit(version: Version, value: i64) -> Commit {
        with_fact(version, Some(fact(version, value)))
    }

    fn with_fact(version: Version, fact: Option<Fact>) -> Commit {
        Commit {
            seq: version,
            time_ns: version * 10,
            record: CommitRecord {
                version,
                author: String::new(),
                message: String::new(),
                provenance: vec![0],
                op: Op::Retract {
                    key: "k".to_owned(),
                },
                outcome: Outcome::Created,
                changes: vec![Change {
                    key: "k".to_owned(),
                    fact,
                    let_go: Vec::new(),
                    remembered: None,
                }],
            },
        }
    }

    #[test]
    fn rejected_lists_each_time_a_value_became_rejected_even_after_the_key_moved_on() {
        let dir = tempfile::tempdir().unwrap();
        let view = View::open(dir.path()).unwrap();
        let weak = |version: Version, value: i64| {
            let mut f = fact(version, value);
            f.confidence = 0.1;
            f.status = Status::Rejected;
            f
        };
        let as_rival = |f: Fact, refutations: u64| crate::model::Rival {
            value: f.value,
            confidence: f.confidence,
            claims: f.claims,
            evidence_count: f.evidence_count,
            conditions: f.conditions,
            provenance: f.provenance,
            refutations,
            counter_evidence: Vec::new(),
        };
        // v1: 7 is the fact, rejected for its confidence alone.
        view.apply(&with_fact(1, Some(weak(1, 7)))).unwrap();
        // v2: 8 wins; 7 is an unrefuted rival, no longer rejected.
        let mut f2 = fact(2, 8);
        f2.rivals.push(as_rival(weak(2, 7), 0));
        view.apply(&with_fact(2, Some(f2.clone()))).unwrap();
        // v3: 7 is refuted.
        let mut f3 = fact(3, 8);
        f3.refuted.push(as_rival(weak(3, 7), 1));
        view.apply(&with_fact(3, Some(f3.clone()))).unwrap();
        // v4: another refutation of 7: still rejected, nothing new.
        let mut f4 = f3.clone();
        f4.updated = 4;
        f4.refuted[0].refutations = 2;
        view.apply(&with_fact(4, Some(f4))).unwrap();
        // v5: the key is retracted; v6: 7 comes back as a rejected fact.
        view.apply(&with_fact(5, None)).unwrap();
        view.apply(&with_fact(6, Some(weak(6, 7)))).unwrap();
        let got: Vec<(Value, Version, u64)> = view
            .rejected()
            .unwrap()
            .into_iter()
            .map(|r| (r.value, r.version, r.refutations))
            .collect();
        let seven = Value::from(7);
        assert_eq!(
            got,
            [(seven.clone(), 1, 0), (seven.clone(), 3, 1), (seven, 6, 0)]
        );
    }

    #[test]
    fn as_of_reads_find_the_last_version_at_or_before() {
        let dir = tempfile::tempdir().unwrap();
        let view = View::open(dir.path()).unwrap();
        for v in 1..=5 {
            view.apply(&commit(v, i64::try_from(v).unwrap() * 100))
                .unwrap();
        }
        for v in 1..=5 {
            let f = view.get_as_of("k", AsOf::Version(v)).unwrap().unwrap();
            assert_eq!(f.value, serde_json::json!(v * 100));
        }
        assert_eq!(view.get_as_of("k", AsOf::Version(0)).unwrap(), None);
        assert_eq!(
            view.get_as_of("k", AsOf::Time(35))
                .unwrap()
                .unwrap()
                .updated,
            3
        );
        let versions: Vec<Version> = view
            .history("k")
            .unwrap()
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert_eq!(versions, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_version_the_log_repeats_is_refused_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let view = View::open(dir.path()).unwrap();
        view.apply(&commit(1, 1)).unwrap();
        // The same record again (a catch-up re-reading it) is skipped.
        view.apply(&commit(1, 1)).unwrap();
        let mut again = commit(1, 2);
        again.seq = 7;
        let err = view.apply(&again).unwrap_err();
        assert!(matches!(err, Error::BadRecord { seq: 7, .. }), "{err}");
        assert_eq!(view.get("k").unwrap().unwrap().value, serde_json::json!(1));
    }

    fn refuted(value: i64) -> Rival {
        Rival {
            value: value.into(),
            confidence: 0.05,
            claims: vec![0.5],
            evidence_count: 1,
            conditions: Conditions::new(),
            provenance: vec![1],
            refutations: 1,
            counter_evidence: vec![2],
        }
    }

    fn rejection(key: &str, value: i64, version: Version) -> Rejection {
        Rejection {
            key: key.to_owned(),
            value: value.into(),
            version,
            confidence: 0.05,
            refutations: 1,
        }
    }

    /// A snapshot as of version 5: `k` is 50 and remembers 3 (let go by version 4);
    /// `gone` has no fact but had 1 rejected.
    fn snapshot_at_5() -> SnapshotRecord {
        SnapshotRecord {
            version: 5,
            time_ns: 50,
            seq: 9,
            facts: vec![fact(5, 50)],
            let_go: vec![KeyLetGo {
                key: "k".to_owned(),
                version: 4,
                state: refuted(3),
            }],
            times: BTreeMap::from([(4, 40), (5, 50)]),
            rejected: vec![rejection("gone", 1, 2), rejection("k", 3, 3)],
        }
    }

    #[test]
    fn a_view_started_from_a_snapshot_answers_from_its_version_and_goes_on_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let view = View::open(dir.path()).unwrap();
        // What it held before is gone.
        view.apply(&commit(1, 1)).unwrap();
        view.apply(&commit(2, 2)).unwrap();
        view.load_snapshot(&snapshot_at_5(), 77).unwrap();
        assert_eq!(view.history_from().unwrap(), 5);
        assert_eq!(view.applied().unwrap(), (5, Some(77)));
        assert_eq!(view.get("k").unwrap(), Some(fact(5, 50)));
        assert_eq!(view.history("k").unwrap(), [(5, Some(fact(5, 50)))]);
        assert_eq!(view.let_go("k", &3.into()).unwrap(), Some((4, refuted(3))));
        assert_eq!(view.commit_time(4).unwrap(), Some(40));
        // Before version 5: refused, by version and by time; version 0 is the empty
        // base, known whatever was pruned.
        for at in [AsOf::Version(4), AsOf::Version(1), AsOf::Time(49)] {
            let e = view.get_as_of("k", at).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::BeforeHistory {
                        history_from: 5,
                        ..
                    }
                ),
                "{at:?}: {e}"
            );
        }
        assert!(matches!(view.diff(2, 5), Err(Error::BeforeHistory { .. })));
        assert_eq!(view.get_as_of("k", AsOf::Version(0)).unwrap(), None);
        assert_eq!(
            view.get_as_of("k", AsOf::Time(50)).unwrap(),
            Some(fact(5, 50))
        );

        // The next commit applies as on a whole view; one that skips a version does not.
        let mut skip = commit(7, 70);
        skip.seq = 80;
        assert!(matches!(
            view.apply(&skip),
            Err(Error::BadRecord { seq: 80, .. })
        ));
        let mut six = commit(6, 60);
        six.seq = 78;
        view.apply(&six).unwrap();
        assert_eq!(
            view.history("k").unwrap(),
            [(5, Some(fact(5, 50))), (6, Some(fact(6, 60)))]
        );
        // The rejections before the snapshot, as it listed them; none new.
        assert_eq!(
            view.rejected().unwrap(),
            [rejection("gone", 1, 2), rejection("k", 3, 3)]
        );

        // A revert to a version before the snapshot applies from what it carries ...
        let mut revert = with_fact(7, Some(fact(7, 20)));
        revert.seq = 79;
        revert.record.op = Op::Revert { version: 2 };
        revert.record.changes[0].remembered = Some(vec![LetGo {
            version: 1,
            state: refuted(9),
        }]);
        view.apply(&revert).unwrap();
        assert_eq!(view.let_go("k", &3.into()).unwrap(), None);
        assert_eq!(view.let_go("k", &9.into()).unwrap(), Some((1, refuted(9))));
        // ... and one written without it cannot be applied: a clear error.
        let mut old = with_fact(8, Some(fact(8, 20)));
        old.seq = 81;
        old.record.op = Op::Revert { version: 2 };
        let e = view.apply(&old).unwrap_err();
        assert!(matches!(e, Error::BadRecord { seq: 81, .. }), "{e}");
        // A revert to the snapshot's own version gives back what the key remembered
        // then.
        let mut back = with_fact(8, Some(fact(8, 50)));
        back.seq = 82;
        back.record.op = Op::Revert { version: 5 };
        view.apply(&back).unwrap();
        assert_eq!(view.let_go("k", &3.into()).unwrap(), Some((4, refuted(3))));
        assert_eq!(view.let_go("k", &9.into()).unwrap(), None);
        assert_eq!(
            view.remembered_at("k", 5).unwrap(),
            [LetGo {
                version: 4,
                state: refuted(3)
            }]
        );
        assert!(matches!(
            view.remembered_at("k", 4),
            Err(Error::BeforeHistory { .. })
        ));
    }

    #[test]
    fn a_snapshot_record_of_a_view_loads_into_an_equal_view() {
        let dir = tempfile::tempdir().unwrap();
        let view = View::open(dir.path()).unwrap();
        view.load_snapshot(&snapshot_at_5(), 77).unwrap();
        let mut six = commit(6, 60);
        six.seq = 78;
        view.apply(&six).unwrap();
        let record = view.snapshot_record().unwrap().unwrap();
        assert_eq!((record.version, record.seq, record.time_ns), (6, 78, 60));
        assert_eq!(record.facts, [fact(6, 60)]);
        assert_eq!(record.let_go, snapshot_at_5().let_go);
        assert_eq!(record.rejected, snapshot_at_5().rejected);
        // The times of the versions named: the fact's, the value let go's, the
        // rejections' (versions 2 and 3 were never in this view: not known).
        assert_eq!(record.times, BTreeMap::from([(4, 40), (6, 60)]));
        let again = tempfile::tempdir().unwrap();
        let other = View::open(again.path()).unwrap();
        other.load_snapshot(&record, 90).unwrap();
        assert_eq!(other.facts().unwrap(), view.facts().unwrap());
        assert_eq!(other.rejected().unwrap(), view.rejected().unwrap());
        assert_eq!(other.let_go("k", &3.into()).unwrap(), Some((4, refuted(3))));
        assert_eq!(other.history_from().unwrap(), 6);
    }

    #[test]
    fn a_snapshot_with_a_key_no_fact_can_have_is_refused() {
        let mut snap = snapshot_at_5();
        snap.facts[0].key = "a\0b".to_owned();
        let payload = serde_json::to_vec(&snap).unwrap();
        let e = decode_snapshot(Seq(3), &payload).unwrap_err();
        assert!(matches!(e, Error::BadRecord { seq: 3, .. }), "{e}");
        let mut late = snapshot_at_5();
        late.facts[0].updated = 6;
        let payload = serde_json::to_vec(&late).unwrap();
        assert!(decode_snapshot(Seq(3), &payload).is_err());
        let payload = serde_json::to_vec(&snapshot_at_5()).unwrap();
        assert_eq!(decode_snapshot(Seq(3), &payload).unwrap(), snapshot_at_5());
    }

    #[test]
    fn a_view_of_another_layout_is_cleared_on_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let view = View::open(dir.path()).unwrap();
            view.apply(&commit(1, 1)).unwrap();
            view.meta.insert(LAYOUT_KEY, [LAYOUT + 1]).unwrap();
        }
        let view = View::open(dir.path()).unwrap();
        assert_eq!(view.applied().unwrap(), (0, None));
        assert_eq!(view.get("k").unwrap(), None);
        assert_eq!(
            view.meta.get(LAYOUT_KEY).unwrap().as_deref(),
            Some(&[LAYOUT][..])
        );
    }
}
