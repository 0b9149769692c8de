//! Shared helpers of the recorder's integration tests: reading back everything the
//! recorder wrote, by record type, with interned names resolved; and a file layer whose
//! writes can be held on a gate, to stall the writer thread at will.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of these helpers"
)]

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blackbox::codec::{
    self, ArchivedAccountingRecord, ArchivedDictionaryRecord, ArchivedIncidentRecord,
    ArchivedSummaryRecord, Encoding,
};
use blackbox::log::storage::{Storage, WriteFile};
use blackbox::{Clock, Counters, LogReader, ManualClock, Seq};
use parking_lot::{Condvar, Mutex};

/// One summary of one value over a window, names resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueSummary {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub mean: f64,
    pub last: f64,
}

/// A record the recorder wrote, decoded by type, with every interned id resolved through
/// the dictionary records that precede it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rec {
    /// The policy in force, as TOML.
    Policy { seq: u64, ts_ns: u64, toml: String },
    Event {
        seq: u64,
        ts_ns: u64,
        kind: String,
        /// The interned id of the kind, to check that ids stay stable across sessions.
        kind_id: u32,
        source: Option<String>,
        event_time_ns: Option<u64>,
        recorded_ns: u64,
        /// `full`, `sample`, `preroll` or `postroll`.
        tier: &'static str,
        weight: f64,
        encoding: Encoding,
        payload: Vec<u8>,
        values: Vec<(String, f64)>,
    },
    Summary {
        seq: u64,
        ts_ns: u64,
        kind: String,
        window_start_ns: u64,
        window_end_ns: u64,
        count: u64,
        values: BTreeMap<String, ValueSummary>,
    },
    Accounting {
        seq: u64,
        ts_ns: u64,
        kinds: BTreeMap<String, Counters>,
    },
    Checkpoint {
        seq: u64,
        ts_ns: u64,
        memory: BTreeMap<String, serde_json::Value>,
    },
    Incident {
        seq: u64,
        ts_ns: u64,
        trigger_seq: u64,
        trigger_kind: String,
        trigger_ts_ns: u64,
        preroll_start_ns: u64,
        postroll_end_ns: u64,
        preroll_events: u64,
    },
    Dictionary {
        seq: u64,
        ts_ns: u64,
        entries: Vec<(u32, String)>,
    },
    /// A torn tail cut when the log was opened.
    Recovery {
        seq: u64,
        ts_ns: u64,
        first_lost_seq: u64,
        torn_bytes: u64,
        segment: String,
        detail: String,
    },
    /// A knowledge-base commit (JSON).
    Kb {
        seq: u64,
        ts_ns: u64,
        commit: serde_json::Value,
    },
    /// Working-memory changes at one time (JSON: `{"set": {...}, "del": [...]}`).
    Working {
        seq: u64,
        ts_ns: u64,
        set: BTreeMap<String, serde_json::Value>,
        del: Vec<String>,
    },
}

impl Rec {
    pub fn seq(&self) -> u64 {
        match self {
            Rec::Event { seq, .. }
            | Rec::Summary { seq, .. }
            | Rec::Accounting { seq, .. }
            | Rec::Checkpoint { seq, .. }
            | Rec::Incident { seq, .. }
            | Rec::Dictionary { seq, .. }
            | Rec::Recovery { seq, .. }
            | Rec::Kb { seq, .. }
            | Rec::Working { seq, .. }
            | Rec::Policy { seq, .. } => *seq,
        }
    }

    pub fn ts_ns(&self) -> u64 {
        match self {
            Rec::Event { ts_ns, .. }
            | Rec::Summary { ts_ns, .. }
            | Rec::Accounting { ts_ns, .. }
            | Rec::Checkpoint { ts_ns, .. }
            | Rec::Incident { ts_ns, .. }
            | Rec::Dictionary { ts_ns, .. }
            | Rec::Recovery { ts_ns, .. }
            | Rec::Kb { ts_ns, .. }
            | Rec::Working { ts_ns, .. }
            | Rec::Policy { ts_ns, .. } => *ts_ns,
        }
    }

    /// The event's payload as text (the tests use JSON or UTF-8 raw payloads).
    pub fn payload_str(&self) -> Option<&str> {
        match self {
            Rec::Event { payload, .. } => std::str::from_utf8(payload).ok(),
            _ => None,
        }
    }
}

/// The interned names in force while reading the log: the fold of the dictionary records
/// seen so far. A later entry may repeat an id, never give it another name.
#[derive(Debug, Default)]
struct Names {
    by_id: HashMap<u32, String>,
}

impl Names {
    fn add(&mut self, id: u32, name: &str, seq: u64) {
        if let Some(old) = self.by_id.insert(id, name.to_owned()) {
            assert_eq!(
                old, name,
                "dictionary record at seq {seq} renames id {id} from {old:?} to {name:?}"
            );
        }
    }

    fn get(&self, id: u32, what: &str, seq: u64) -> String {
        match self.by_id.get(&id) {
            Some(n) => n.clone(),
            None => panic!("{what} id {id} used at seq {seq} before any dictionary names it"),
        }
    }
}

/// Reads the whole log in `dir` and decodes every record. Panics on a record that does
/// not decode, an unknown record type, or an id that no earlier dictionary record names.
pub fn read_log(dir: &Path) -> Vec<Rec> {
    let reader = LogReader::open(dir).expect("open the log for reading");
    let mut names = Names::default();
    let mut out = Vec::new();
    for r in reader.records(Seq(0)..).expect("read the log") {
        let r = r.expect("a record of the log");
        let seq = r.seq().0;
        let ts_ns = r.ts_ns();
        let payload = r.payload();
        let t = r.record_type();
        let rec = if t == codec::EVENT {
            let e = codec::decode_event(payload, ts_ns).expect("an event record");
            Rec::Event {
                seq,
                ts_ns,
                kind: names.get(e.kind, "event record's kind", seq),
                kind_id: e.kind,
                source: match e.source {
                    0 => None,
                    id => Some(names.get(id, "source", seq)),
                },
                event_time_ns: e.event_time_ns,
                recorded_ns: e.recorded_ns,
                tier: e.tier.name(),
                weight: e.weight,
                encoding: e.encoding,
                payload: e.payload.to_vec(),
                values: e
                    .values
                    .iter()
                    .map(|(name, value)| (names.get(name, "value name", seq), value))
                    .collect(),
            }
        } else if t == codec::SUMMARY {
            let s = codec::access::<ArchivedSummaryRecord>(payload).expect("a summary record");
            let mut values = BTreeMap::new();
            for v in s.values.iter() {
                let stats: codec::ValueStats =
                    rkyv::deserialize::<codec::ValueStats, rkyv::rancor::Error>(v)
                        .expect("value stats");
                let name = names.get(stats.name, "value name", seq);
                let summary = ValueSummary {
                    count: stats.count,
                    min: stats.min,
                    max: stats.max,
                    sum: stats.sum,
                    mean: stats.mean,
                    last: stats.last,
                };
                assert!(
                    values.insert(name, summary).is_none(),
                    "summary at seq {seq} names a value twice"
                );
            }
            Rec::Summary {
                seq,
                ts_ns,
                kind: names.get(s.kind.to_native(), "summary record's kind", seq),
                window_start_ns: s.window_start_ns.to_native(),
                window_end_ns: s.window_end_ns.to_native(),
                count: s.count.to_native(),
                values,
            }
        } else if t == codec::ACCOUNTING {
            let a =
                codec::access::<ArchivedAccountingRecord>(payload).expect("an accounting record");
            let mut kinds = BTreeMap::new();
            for e in a.kinds.iter() {
                let c = rkyv::deserialize::<Counters, rkyv::rancor::Error>(&e.1).expect("counters");
                let name = names.get(e.0.to_native(), "accounting record's kind", seq);
                assert!(
                    kinds.insert(name, c).is_none(),
                    "accounting at seq {seq} names a kind twice"
                );
            }
            Rec::Accounting { seq, ts_ns, kinds }
        } else if t == codec::CHECKPOINT {
            Rec::Checkpoint {
                seq,
                ts_ns,
                memory: serde_json::from_slice(payload).expect("a checkpoint is a JSON object"),
            }
        } else if t == codec::INCIDENT {
            let i = codec::access::<ArchivedIncidentRecord>(payload).expect("an incident record");
            Rec::Incident {
                seq,
                ts_ns,
                trigger_seq: i.trigger_seq.to_native(),
                trigger_kind: names.get(i.trigger_kind.to_native(), "incident record's kind", seq),
                trigger_ts_ns: i.trigger_ts_ns.to_native(),
                preroll_start_ns: i.preroll_start_ns.to_native(),
                postroll_end_ns: i.postroll_end_ns.to_native(),
                preroll_events: i.preroll_events.to_native(),
            }
        } else if t == codec::DICTIONARY {
            let d =
                codec::access::<ArchivedDictionaryRecord>(payload).expect("a dictionary record");
            let entries: Vec<(u32, String)> = d
                .entries
                .iter()
                .map(|e| (e.0.to_native(), e.1.as_str().to_owned()))
                .collect();
            for (id, name) in &entries {
                names.add(*id, name, seq);
            }
            Rec::Dictionary {
                seq,
                ts_ns,
                entries,
            }
        } else if t == codec::RECOVERY {
            let r =
                codec::access::<codec::ArchivedRecoveryRecord>(payload).expect("a recovery record");
            Rec::Recovery {
                seq,
                ts_ns,
                first_lost_seq: r.first_lost_seq.to_native(),
                torn_bytes: r.torn_bytes.to_native(),
                segment: r.segment.as_str().to_owned(),
                detail: r.detail.as_str().to_owned(),
            }
        } else if t == codec::KB {
            Rec::Kb {
                seq,
                ts_ns,
                commit: serde_json::from_slice(payload).expect("a commit is a JSON object"),
            }
        } else if t == codec::WORKING {
            let mut obj: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(payload).expect("a delta is a JSON object");
            let set = match obj.remove("set") {
                None => BTreeMap::new(),
                Some(serde_json::Value::Object(m)) => m.into_iter().collect(),
                Some(other) => panic!("a delta's set is an object, not {other} (seq {seq})"),
            };
            let del = match obj.remove("del") {
                None => Vec::new(),
                Some(serde_json::Value::Array(keys)) => keys
                    .into_iter()
                    .map(|k| k.as_str().expect("a removed key").to_owned())
                    .collect(),
                Some(other) => panic!("a delta's del is an array, not {other} (seq {seq})"),
            };
            assert!(obj.is_empty(), "a delta holds set and del only: {obj:?}");
            assert!(
                !set.is_empty() || !del.is_empty(),
                "an empty delta at seq {seq}"
            );
            Rec::Working {
                seq,
                ts_ns,
                set,
                del,
            }
        } else if t == codec::POLICY {
            Rec::Policy {
                seq,
                ts_ns,
                toml: String::from_utf8(payload.to_vec()).expect("a policy is UTF-8 text"),
            }
        } else if t == blackbox::log::retention::PRUNE_RECORD_TYPE {
            // The log's own record of a pruning: not the recorder's.
            continue;
        } else {
            panic!("unknown record type {t:?} at seq {seq}");
        };
        out.push(rec);
    }
    out
}

/// The event records of the log, in log order.
pub fn events(recs: &[Rec]) -> Vec<&Rec> {
    recs.iter()
        .filter(|r| matches!(r, Rec::Event { .. }))
        .collect()
}

/// The counters of every accounting record, in log order.
pub fn accountings(recs: &[Rec]) -> Vec<&BTreeMap<String, Counters>> {
    recs.iter()
        .filter_map(|r| match r {
            Rec::Accounting { kinds, .. } => Some(kinds),
            _ => None,
        })
        .collect()
}

/// The running totals the accounting records fold to: each lists the kinds that
/// changed since the one before, so a kind's totals are those of the last record that
/// lists it.
pub fn last_accounting(recs: &[Rec]) -> BTreeMap<String, Counters> {
    let records = accountings(recs);
    assert!(!records.is_empty(), "the log holds an accounting record");
    let mut totals = BTreeMap::new();
    for a in records {
        for (kind, c) in a {
            totals.insert(kind.clone(), *c);
        }
    }
    totals
}

/// Event records of `kind` written with `tier`.
pub fn count_events(recs: &[Rec], of_kind: &str, of_tier: &str) -> u64 {
    recs.iter()
        .filter(
            |r| matches!(r, Rec::Event { kind, tier, .. } if kind == of_kind && *tier == of_tier),
        )
        .count() as u64
}

/// The counters without all-zero entries (a kind the recorder classified but never
/// counted), so two maps can be compared.
pub fn nonzero(stats: &BTreeMap<String, Counters>) -> BTreeMap<String, Counters> {
    stats
        .iter()
        .filter(|(_, c)| **c != Counters::default())
        .map(|(k, c)| (k.clone(), *c))
        .collect()
}

/// Polls `cond` until it holds, failing after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The calling thread's id in `/proc` (`/proc/self/task/ID`).
pub fn current_thread_id() -> String {
    let link = fs::read_link("/proc/thread-self").expect("read /proc/thread-self");
    link.file_name()
        .expect("/proc/thread-self names a task")
        .to_string_lossy()
        .into_owned()
}

/// Whether the thread `tid` of this process is asleep (state `S`: waiting on a lock,
/// a condition or a futex), as `/proc` reports it.
pub fn thread_sleeping(tid: &str) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "S")
}

/// A gate threads wait at while it is closed, counting who waits.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    cvar: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    closed: bool,
    waiting: usize,
}

impl Gate {
    /// From now on, callers of `pass` wait.
    pub fn close(&self) {
        self.state.lock().closed = true;
    }

    /// Lets every waiting and future caller through.
    pub fn open(&self) {
        self.state.lock().closed = false;
        self.cvar.notify_all();
    }

    /// Callers waiting right now.
    pub fn waiting(&self) -> usize {
        self.state.lock().waiting
    }

    /// Waits while the gate is closed.
    pub fn pass(&self) {
        let mut state = self.state.lock();
        state.waiting += 1;
        while state.closed {
            self.cvar.wait(&mut state);
        }
        state.waiting -= 1;
    }

    /// Waits until `n` callers wait at the gate.
    pub fn wait_for_waiters(&self, n: usize) {
        wait_until("threads to reach the gate", Duration::from_secs(10), || {
            self.waiting() == n
        });
    }
}

/// A [`Storage`] over the real file system whose appends wait while its gate is closed:
/// it stalls the recorder's writer thread as a hung disk would.
#[derive(Debug, Clone, Default)]
pub struct GatedStorage {
    gate: Arc<Gate>,
    /// The gate fdatasyncs wait at.
    sync_gate: Arc<Gate>,
}

impl GatedStorage {
    pub fn new() -> GatedStorage {
        GatedStorage::default()
    }

    /// The gate appends wait at.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The gate fdatasyncs wait at (open unless closed).
    pub fn sync_gate(&self) -> &Gate {
        &self.sync_gate
    }
}

/// A manual clock that can hold the threads of one name inside `now_ns`: to stop the
/// recorder's writer, or one producer, at a chosen point.
#[derive(Debug, Clone)]
pub struct StallingClock {
    pub time: ManualClock,
    gate: Arc<Gate>,
    /// The name of the thread to hold, and whether it reads the time before it waits
    /// (and so returns the time of before the wait) or after.
    target: Arc<Mutex<Option<(String, bool)>>>,
}

impl StallingClock {
    pub fn new(start_ns: u64) -> StallingClock {
        StallingClock {
            time: ManualClock::new(start_ns),
            gate: Arc::new(Gate::default()),
            target: Arc::new(Mutex::new(None)),
        }
    }

    /// From now on, the thread named `thread` waits in `now_ns` until `release`; it reads
    /// the time before waiting if `read_first`, else after.
    pub fn hold(&self, thread: &str, read_first: bool) {
        self.gate.close();
        *self.target.lock() = Some((thread.to_owned(), read_first));
    }

    /// Waits until the held thread is inside `now_ns`.
    pub fn wait_held(&self) {
        self.gate.wait_for_waiters(1);
    }

    /// Lets the held thread go, and holds no thread from now on.
    pub fn release(&self) {
        *self.target.lock() = None;
        self.gate.open();
    }
}

impl Clock for StallingClock {
    fn now_ns(&self) -> u64 {
        let target = self.target.lock().clone();
        match target {
            Some((name, read_first)) if std::thread::current().name() == Some(name.as_str()) => {
                let before = self.time.now_ns();
                self.gate.pass();
                if read_first {
                    before
                } else {
                    self.time.now_ns()
                }
            }
            _ => self.time.now_ns(),
        }
    }
}

#[derive(Debug)]
struct GatedFile {
    file: File,
    storage: GatedStorage,
}

impl Storage for GatedStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        Ok(Box::new(GatedFile {
            file,
            storage: self.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        let file = OpenOptions::new().read(true).append(true).open(path)?;
        Ok(Box::new(GatedFile {
            file,
            storage: self.clone(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(0o400))
    }
}

impl WriteFile for GatedFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.storage.gate.pass();
        self.file.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.storage.sync_gate.pass();
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}
