//! The recorder and its knowledge base against [`RecorderModel`] and [`KbModel`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arbitrary::Unstructured;
use blackbox::kb::{AsOf, Error as KbError, Provenance};
use blackbox::log::storage::FaultyStorage;
use blackbox::policy::{Policy, Tier};
use blackbox::{Conditions, Config, Durability, Event, LogOptions, ManualClock, Recorder, Seq};
use blackbox_log::{LogReader, Retention};
use blackbox_replay::{Body, Payload, Query, RecordType, Replay};
use serde_json::{Value, json};

use super::checks::{assert_facts, same_fact};
use super::kb_model::{Expected, KbModel};
use super::ops::{Cites, RecOp};
use super::reference::{KeptEvent, RecorderModel, payload};
use super::{OPS_MAX, crash, ok};

const MS: u64 = 1_000_000;
/// Where the manual clock starts (2023-11-14, in ns).
const T0: u64 = 1_700_000_000_000_000_000;
/// Small, so that the clock steps decay facts from barely to almost entirely.
const HALF_LIFE_NS: u64 = 10 * MS;
/// The kinds events are recorded with: kept, dropped by the policy, kept.
const KINDS: [&str; 3] = ["act.move", "dbg.tick", "act.grip"];
/// The kind of the observations cited as evidence (dropped by the policy, kept as
/// evidence).
const EVIDENCE_KIND: &str = "obs.cam";
const KEYS: [&str; 3] = ["door", "lamp", "cup.pos"];
const VALUE_NAMES: [&str; 3] = ["x", "y", "z"];

fn value_of(i: usize) -> Value {
    match i {
        0 => json!("open"),
        1 => json!("closed"),
        2 => json!({"x": 1.5}),
        _ => json!(null),
    }
}

fn conditions_of(i: usize) -> Conditions {
    let mut c = Conditions::new();
    match i {
        0 => {}
        1 => {
            c.insert("level".to_owned(), json!(1));
        }
        _ => {
            c.insert("level".to_owned(), json!(2));
        }
    }
    c
}

struct Run<'a> {
    dir: &'a Path,
    clock: ManualClock,
    durability: Durability,
    segment: u64,
    budget: Option<u64>,
    storage: FaultyStorage,
    baseline: crash::Baseline,
    rec: Option<Recorder>,
    model: RecorderModel,
    kb: KbModel,
    /// Every evidence seq recorded (and still in the log), oldest first.
    evidence: Vec<u64>,
    /// The highest seq acknowledged as durable.
    acked_seq: Option<u64>,
    /// Events recorded so far (what payloads are made from).
    recorded: u64,
    /// Whether the log was pruned (its start passed seq 0).
    pruned: bool,
}

pub fn run(root: &Path, u: &mut Unstructured<'_>) {
    let Ok(durability) = u.int_in_range(0u8..=2).map(|d| match d {
        0 => Durability::Buffered,
        1 => Durability::Flush,
        _ => Durability::Sync,
    }) else {
        return;
    };
    let Ok(segment) = u.int_in_range(4096u64..=8192) else {
        return;
    };
    let budget = match u.int_in_range(0u8..=2) {
        Ok(0) => Some(u.int_in_range(12_000u64..=40_000).unwrap_or(12_000)),
        Ok(_) => None,
        Err(_) => return,
    };
    let dir = root.join("rec");
    let mut run = Run {
        dir: &dir,
        clock: ManualClock::new(T0),
        durability,
        segment,
        budget,
        storage: FaultyStorage::new(),
        baseline: crash::Baseline::new(),
        rec: None,
        model: RecorderModel::new(),
        kb: KbModel::new(),
        evidence: Vec::new(),
        acked_seq: None,
        recorded: 0,
        pruned: false,
    };
    if super::trace() {
        eprintln!("recorder: {durability:?}, segments of {segment} bytes, budget {budget:?}");
    }
    run.open("open a new recorder");
    for step in 0..OPS_MAX {
        if u.is_empty() {
            break;
        }
        let Ok(op) = RecOp::read(u) else {
            break;
        };
        run.step(step, &op);
    }
    run.reopen("the end");
    run.check_kb("the end");
}

impl Run<'_> {
    fn config(&self) -> Config {
        let mut log = LogOptions::new()
            .segment_bytes_max(self.segment)
            .block_bytes_max(1024)
            .index_interval_bytes(512)
            .disk_reserve_bytes(0)
            .storage(Arc::new(self.storage.clone()));
        if let Some(max) = self.budget {
            log = log.retention(Retention {
                max_bytes: Some(max),
                max_age_ns: None,
                pinned_max_bytes: 0,
            });
        }
        let policy = ok(
            Policy::builder()
                .rule("dbg.*", Tier::Drop)
                .rule("obs.*", Tier::Drop)
                .build(),
            "the policy",
        );
        Config::new()
            .log_options(log)
            .durability(self.durability)
            .policy(policy)
            .clock(Arc::new(self.clock.clone()))
            .kb_half_life_ns(HALF_LIFE_NS)
            .accounting_interval_ns(u64::MAX)
            .checkpoint_interval_ns(None)
    }

    fn open(&mut self, what: &str) {
        self.storage = FaultyStorage::new();
        let rec = ok(
            Recorder::open(self.dir, self.config()),
            format_args!("{what}: open"),
        );
        self.baseline = crash::baseline(self.dir);
        self.rec = Some(rec);
    }

    fn rec(&self) -> &Recorder {
        self.rec
            .as_ref()
            .expect("the recorder is open between steps")
    }

    fn now(&self) -> u64 {
        blackbox::Clock::now_ns(&self.clock)
    }

    fn step(&mut self, step: usize, op: &RecOp) {
        let what = format!("step {step}: {op:?}");
        if super::trace() {
            eprintln!("{what}");
        }
        match *op {
            RecOp::Event { kind, len, values } => {
                let p = payload(self.recorded, len);
                let n = self.recorded as f64;
                self.recorded += 1;
                let vals: Vec<(&str, f64)> = VALUE_NAMES
                    .iter()
                    .take(usize::from(values))
                    .enumerate()
                    .map(|(i, name)| (*name, n + i as f64 / 4.0))
                    .collect();
                let event = Event::new(KINDS[kind]).raw(&p).values(&vals);
                ok(self.rec().record(&event), &what);
                if KINDS[kind] != "dbg.tick" {
                    self.model.events.push(KeptEvent {
                        kind: KINDS[kind].to_owned(),
                        ts: self.now(),
                        payload: p,
                        values: vals.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
                        seq: None,
                    });
                }
            }
            RecOp::Evidence => {
                self.observe(&what);
            }
            RecOp::Working { key, value } => {
                self.model.values_given += 1;
                let v = json!(format!(
                    "{}-{}",
                    self.model.values_given,
                    value.unwrap_or(0)
                ));
                let name = KEYS[key];
                ok(self.rec().working().set(name, v.clone()), &what);
                let mut next = self.model.memory().clone();
                next.insert(name.to_owned(), v);
                self.model.working.push((self.now(), next));
            }
            RecOp::Advance(ns) => self.clock.advance_ns(ns),
            RecOp::Sync => self.sync(&what),
            RecOp::Checkpoint => {
                ok(self.rec().checkpoint(), &what);
            }
            RecOp::Crash { keep } => self.crash(keep, &what),
            RecOp::Reopen => self.reopen(&what),
            RecOp::Assert {
                key,
                value,
                confidence,
                conditions,
                cites,
            } => {
                let evidence = self.cite(cites, &what);
                let (key, value, conditions) =
                    (KEYS[key], value_of(value), conditions_of(conditions));
                let expected = self.kb.claim(
                    key,
                    self.now(),
                    HALF_LIFE_NS,
                    &value,
                    confidence,
                    &conditions,
                    &evidence,
                );
                let got = self.kb_of(&what).assert(
                    key,
                    value,
                    confidence,
                    &conditions,
                    Provenance::new(evidence.iter().map(|s| Seq(*s))),
                );
                self.commit(expected, got, &evidence, &what);
            }
            RecOp::Refute { key, value, cites } => {
                let evidence = self.cite(cites, &what);
                let (key, value) = (KEYS[key], value_of(value));
                let expected = self
                    .kb
                    .refute(key, self.now(), HALF_LIFE_NS, &value, &evidence);
                let got = self.kb_of(&what).refute(
                    key,
                    &value,
                    Provenance::new(evidence.iter().map(|s| Seq(*s))),
                );
                self.commit(expected, got, &evidence, &what);
            }
            RecOp::Retract { key, cites } => {
                let evidence = self.cite(cites, &what);
                let expected = self.kb.retract(KEYS[key]);
                let got = self
                    .kb_of(&what)
                    .retract(KEYS[key], Provenance::new(evidence.iter().map(|s| Seq(*s))));
                self.commit(expected, got, &evidence, &what);
            }
            RecOp::Revert { pick, cites } => {
                let evidence = self.cite(cites, &what);
                let latest = self.kb.latest();
                let pick = u64::from(pick);
                let target = match pick {
                    0..8 => 0,
                    8..16 => latest + 1 + (pick - 8),
                    _ if latest == 0 => 0,
                    _ => 1 + pick % latest,
                };
                let expected = self.kb.revert(target, self.now());
                let got = self
                    .kb_of(&what)
                    .revert_to(target, Provenance::new(evidence.iter().map(|s| Seq(*s))));
                self.commit(expected, got, &evidence, &what);
            }
            RecOp::KbReads => self.check_kb(&what),
            RecOp::StateAt(pick) => self.state_at(pick, &what),
            RecOp::ReplayTo(pick) => {
                self.sync(&what);
                let t = self.time_of(pick);
                self.check_events(Some(t), false, &what);
            }
        }
    }

    /// Records an observation as evidence; its seq.
    fn observe(&mut self, what: &str) -> u64 {
        let p = payload(self.recorded, 24);
        self.recorded += 1;
        let seq = ok(
            self.rec()
                .record_evidence(&Event::new(EVIDENCE_KIND).raw(&p)),
            format_args!("{what}: record evidence"),
        )
        .0;
        if let Some(&last) = self.evidence.last() {
            assert!(seq > last, "{what}: evidence seq {seq} after {last}");
        }
        self.evidence.push(seq);
        self.model.events.push(KeptEvent {
            kind: EVIDENCE_KIND.to_owned(),
            ts: self.now(),
            payload: p,
            values: Vec::new(),
            seq: Some(seq),
        });
        if self.durability == Durability::Sync {
            self.ack(Some(seq));
            self.model.events_acked = self.model.events.len();
        }
        seq
    }

    fn cite(&mut self, cites: Cites, what: &str) -> Vec<u64> {
        let first = self.evidence.first().copied();
        match cites {
            Cites::Earlier(pick) if !self.evidence.is_empty() => {
                vec![self.evidence[usize::from(pick) % self.evidence.len()]]
            }
            Cites::FreshAndFirst if first.is_some() => {
                let fresh = self.observe(what);
                let mut e = vec![first.unwrap_or(fresh), fresh];
                e.dedup();
                e
            }
            _ => vec![self.observe(what)],
        }
    }

    fn ack(&mut self, seq: Option<u64>) {
        if seq > self.acked_seq {
            self.acked_seq = seq;
        }
    }

    fn kb_of(&self, what: &str) -> &blackbox::KnowledgeBase {
        ok(
            self.rec().kb(),
            format_args!("{what}: open the knowledge base"),
        )
    }

    /// Checks a write's result against the model's expectation, and commits it to the
    /// model.
    fn commit(
        &mut self,
        expected: Expected,
        got: Result<blackbox::kb::Committed, KbError>,
        evidence: &[u64],
        what: &str,
    ) {
        let latest = self.kb.latest();
        match expected {
            Expected::Commit(outcome, changes) => {
                let c = ok(got, what);
                assert_eq!(
                    (c.version, c.outcome),
                    (latest + 1, outcome),
                    "{what}: the commit's version and outcome"
                );
                assert!(
                    evidence.iter().all(|s| *s < c.seq),
                    "{what}: commit seq {} not after its evidence {evidence:?}",
                    c.seq
                );
                let now = self.now();
                let commit = ok(
                    self.kb_of(what).log(c.version..=c.version),
                    format_args!("{what}: the commit log"),
                );
                assert_eq!(
                    commit
                        .iter()
                        .map(|c| (c.seq, c.time_ns))
                        .collect::<Vec<_>>(),
                    vec![(c.seq, now)],
                    "{what}: the commit's seq and time"
                );
                self.kb.push(now, c.seq, changes);
                if self.durability == Durability::Sync {
                    self.ack(Some(c.seq));
                    self.model.events_acked = self.model.events.len();
                }
            }
            Expected::NotFound => match got {
                Err(KbError::NotFound { .. }) => {}
                other => panic!("{what}: expected NotFound, got {other:?}"),
            },
            Expected::UnknownVersion { version, latest } => match got {
                Err(KbError::UnknownVersion {
                    version: v,
                    latest: l,
                }) if (v, l) == (version, latest) => {}
                other => {
                    panic!("{what}: expected UnknownVersion({version}, {latest}), got {other:?}")
                }
            },
        }
        let v = ok(self.kb_of(what).version(), format_args!("{what}: version"));
        assert_eq!(v, self.kb.latest(), "{what}: the knowledge base's version");
    }

    fn sync(&mut self, what: &str) {
        let last = ok(self.rec().sync(), format_args!("{what}: sync"));
        self.ack(last.map(|s| s.0));
        self.model.events_acked = self.model.events.len();
        self.model.working_acked = self.model.working.len() - 1;
    }

    /// A time picked from `pick`: from just before the clock's start to now.
    fn time_of(&self, pick: u8) -> u64 {
        let span = u128::from(self.now() - T0 + 2);
        let off = u64::try_from(span * u128::from(pick) / 255).unwrap_or(0);
        (T0 - 1).saturating_add(off)
    }

    /// Every as-of read of the knowledge base equals the model's: at every version, and
    /// around every commit time.
    fn check_kb(&self, what: &str) {
        let kb = self.kb_of(what);
        let latest = self.kb.latest();
        assert_eq!(
            ok(kb.version(), format_args!("{what}: version")),
            latest,
            "{what}: the knowledge base's version"
        );
        for v in 0..=latest {
            let got = ok(
                kb.snapshot(AsOf::Version(v)),
                format_args!("{what}: snapshot at version {v}"),
            );
            assert_facts(
                &got,
                &self.kb.facts(v),
                &format!("{what}: as of version {v}"),
            );
        }
        for v in 1..=latest {
            let t = self.kb.times[usize::try_from(v).unwrap_or(usize::MAX)];
            for probe in [t - 1, t, t + 1] {
                let at = self.kb.version_at(probe);
                let got = ok(
                    kb.snapshot(AsOf::Time(probe)),
                    format_args!("{what}: snapshot at time {probe}"),
                );
                let want = self.kb.facts(at);
                assert_facts(
                    &got,
                    &want,
                    &format!("{what}: at time {probe} (version {at})"),
                );
                for key in KEYS {
                    let one = ok(
                        kb.get_as_of(key, AsOf::Time(probe)),
                        format_args!("{what}: {key} at time {probe}"),
                    );
                    same_fact(
                        one.as_ref(),
                        want.get(key),
                        &format!("{what}: {key} at time {probe}"),
                    );
                }
            }
        }
    }

    /// The events the log holds (up to `until`), against the model's: after a crash
    /// (`crashed`), a prefix of them that keeps every acknowledged one, which the model
    /// keeps; after prunings, a suffix of those kept.
    fn check_events(&mut self, until: Option<u64>, crashed: bool, what: &str) {
        let mut query = Query::new().types([RecordType::Event]);
        if let Some(t) = until {
            query = query.until(t);
        }
        let replay = ok(
            Replay::open(self.dir, &query),
            format_args!("{what}: replay"),
        );
        let mut got = Vec::new();
        let mut seqs = Vec::new();
        for r in replay {
            let r = ok(r, format_args!("{what}: a replayed record"));
            let Body::Event(e) = r.body else {
                panic!("{what}: seq {} is not an event", r.seq);
            };
            let payload = match e.payload {
                Payload::Raw(b) => b,
                Payload::None => Vec::new(),
                Payload::Json(j) => panic!("{what}: seq {}: a JSON payload {j}", r.seq),
            };
            got.push(KeptEvent {
                kind: e.kind,
                ts: r.ts_ns,
                payload,
                values: e.values,
                seq: None,
            });
            seqs.push(r.seq);
        }
        if !crashed {
            self.evidence_retained(&seqs, until, what);
        }
        let strip = |e: &KeptEvent| KeptEvent {
            seq: None,
            ..e.clone()
        };
        let model: Vec<KeptEvent> = self.model.events[self.model.events_start..]
            .iter()
            .filter(|e| until.is_none_or(|t| e.ts <= t))
            .map(strip)
            .collect();
        // Where the log's events start among the model's: at the model's start, or
        // later after a pruning.
        let first = got.first().map(|g| {
            model.iter().position(|m| m == g).unwrap_or_else(|| {
                panic!("{what}: the log holds an event the model does not: {g:?}")
            })
        });
        let from = first.unwrap_or(0);
        if from > 0 {
            assert!(
                self.pruned_now(what),
                "{what}: {from} events missing from the start, and the log was not pruned"
            );
        }
        let end = from + got.len();
        assert!(end <= model.len(), "{what}: more events than the model");
        assert_eq!(got[..], model[from..end], "{what}: the events");
        if until.is_none() {
            if got.is_empty() && self.pruned_now(what) {
                // Every event kept may have gone with the segments pruned, and none
                // of them is left to locate the log's start among the model's.
                self.model.events_start = self.model.events.len();
                return;
            }
            if crashed {
                assert!(
                    self.model.events_start + end >= self.model.events_acked,
                    "{what}: a crash lost acknowledged events ({} kept, {} acknowledged)",
                    self.model.events_start + end,
                    self.model.events_acked
                );
                self.model.events.truncate(self.model.events_start + end);
            } else {
                assert_eq!(end, model.len(), "{what}: the log lost the last events");
            }
            self.model.events_start += from;
        }
    }

    /// Every observation the model holds from the retained log's first seq on (up to
    /// `until`) is among the seqs `got` of the events the log returned.
    fn evidence_retained(&mut self, got: &[u64], until: Option<u64>, what: &str) {
        let segments = ok(
            blackbox_log::list_segments(self.dir),
            format_args!("{what}: list the segments"),
        );
        let first = segments.first().map_or(0, |s| s.first_seq);
        for e in &self.model.events[self.model.events_start..] {
            if let Some(seq) = e.seq
                && seq >= first
                && until.is_none_or(|t| e.ts <= t)
            {
                assert!(
                    got.contains(&seq),
                    "{what}: the observation at seq {seq} is missing (the log starts at {first})"
                );
            }
        }
    }

    /// Whether the log starts past seq 0 now.
    fn pruned_now(&mut self, what: &str) -> bool {
        let segments = ok(
            blackbox_log::list_segments(self.dir),
            format_args!("{what}: list the segments"),
        );
        let pruned = segments.first().is_some_and(|s| s.first_seq > 0);
        self.pruned |= pruned;
        pruned
    }

    fn state_at(&mut self, pick: u8, what: &str) {
        self.sync(what);
        let t = self.time_of(pick);
        let got = blackbox_replay::state_at(self.dir, t, None);
        // Where the retained log starts, read by the log's own reader.
        let earliest = if self.pruned_now(what) {
            let reader = ok(LogReader::open(self.dir), format_args!("{what}: reader"));
            let mut records = ok(reader.records(..), format_args!("{what}: read"));
            records
                .next()
                .map(|r| ok(r, format_args!("{what}: the first record")).ts_ns())
        } else {
            None
        };
        match (got, earliest) {
            (
                Err(blackbox_replay::Error::PrunedBefore {
                    at_ns, earliest_ns, ..
                }),
                Some(e),
            ) => {
                assert_eq!((at_ns, earliest_ns), (t, e), "{what}: the pruned start");
                assert!(t < e, "{what}: state at {t} refused, the log starts at {e}");
            }
            (Err(e), _) => panic!("{what}: state at {t}: {e}"),
            (Ok(state), earliest) => {
                assert!(
                    earliest.is_none_or(|e| t >= e),
                    "{what}: state at {t}, before the retained log's start {earliest:?}"
                );
                let working: BTreeMap<String, Value> = state.working.clone().into_iter().collect();
                assert_eq!(
                    &working,
                    self.model.memory_at(t),
                    "{what}: the working memory at {t}"
                );
                let at = self.kb.version_at(t);
                assert_eq!(state.kb_version, at, "{what}: the kb version at {t}");
                assert_facts(
                    &state.kb,
                    &self.kb.facts(at),
                    &format!("{what}: the kb at {t}"),
                );
            }
        }
    }

    fn crash(&mut self, keep: u64, what: &str) {
        // A barrier: every message sent is handled (not synced), so no seal is under way.
        ok(self.rec().stats(), format_args!("{what}: stats"));
        let image = crash::take(self.dir, &self.storage, &self.baseline, keep);
        drop(self.rec.take());
        crash::put(self.dir, image);
        self.open(what);
        let last = self.rec().recovery().last_seq.map(|s| s.0);
        assert!(
            last >= self.acked_seq,
            "{what}: the crash lost acknowledged records: the log ends at {last:?}, {:?} was durable",
            self.acked_seq
        );
        self.evidence.retain(|s| Some(*s) <= last);
        self.kb.keep_up_to(last);
        self.check_events(None, true, what);
        // The working memory restored is the model's after some of its changes, every
        // acknowledged one among them; later changes were lost.
        let restored = self.rec().working().snapshot();
        let k = (self.model.working_acked..self.model.working.len())
            .rev()
            .find(|&k| self.model.working[k].1 == restored)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: the working memory restored, {restored:?}, is none of the model's since its change {}",
                    self.model.working_acked
                )
            });
        self.model.working.truncate(k + 1);
        self.check_kb(what);
    }

    fn reopen(&mut self, what: &str) {
        let rec = self.rec.take().expect("the recorder is open between steps");
        ok(rec.close(), format_args!("{what}: close"));
        drop(rec);
        self.open(what);
        assert_eq!(
            self.rec().recovery().torn_bytes_cut,
            0,
            "{what}: a clean reopen cut bytes"
        );
        self.model.events_acked = self.model.events.len();
        self.model.working_acked = self.model.working.len() - 1;
        self.check_events(None, false, what);
        assert_eq!(
            &self.rec().working().snapshot(),
            self.model.memory(),
            "{what}: the working memory restored"
        );
        self.check_kb(what);
    }
}
