//! A log the recorder wrote, pruned at its front by the log's disk budget: `stats`,
//! `verify` and reads give the same totals as the whole log and say what was pruned.
//! The oracle is a copy of the log left whole.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use blackbox::{Config, Event, LogOptions, ManualClock, Recorder};
use blackbox_log::{Log, LogReader, Retention, Seq};
use common::{blackbox, ok, s};

const START_NS: u64 = 1_767_225_600_000_000_000;

/// Writes a log of a few dozen segments through the recorder, in two sessions; returns
/// the digest after the first.
fn write_log(dir: &Path) -> String {
    let clock = ManualClock::new(START_NS);
    let mut first_digest = None;
    for _session in 0..2 {
        let config = Config::new()
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(1_000_000_000)
            .log_options(LogOptions::new().segment_bytes_max(8 << 10));
        let recorder = Recorder::open(dir, config).unwrap();
        for i in 0..3000u32 {
            let kind = ["a.x", "b.y", "c.z"][(i % 3) as usize];
            let payload = [u8::try_from(i % 256).unwrap(); 48];
            recorder.record(&Event::new(kind).raw(&payload)).unwrap();
            clock.advance_ns(5_000_000);
        }
        recorder.close().unwrap();
        first_digest.get_or_insert_with(|| {
            LogReader::open(dir)
                .unwrap()
                .digest()
                .unwrap()
                .unwrap()
                .to_string()
        });
    }
    first_digest.unwrap()
}

fn copy_files(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn stats_and_verify_after_pruning_match_the_whole_log() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let pruned = tmp.path().join("pruned");
    let early = write_log(&whole);
    copy_files(&whole, &pruned);
    let (mut log, _) = Log::open(
        &pruned,
        LogOptions::new()
            .segment_bytes_max(8 << 10)
            .retention(Retention {
                max_bytes: Some(64 << 10),
                max_age_ns: None,
                pinned_max_bytes: 0,
            }),
    )
    .unwrap();
    let prune_seq = log.prune().unwrap().unwrap();
    let (_, record) = log.take_pruned().pop().unwrap();
    log.close().unwrap();
    let first = record.last_seq + 1;
    assert!(first > 1000, "pruned only up to {}", record.last_seq);

    let a = blackbox_replay::stats(&whole, None).unwrap();
    let b = blackbox_replay::stats(&pruned, None).unwrap();
    // The running totals are the whole log's: they are cumulative.
    assert_eq!(b.kinds, a.kinds);
    assert_eq!(a.kinds["a.x"].seen, 2000);
    // What the pruned log holds: from the cut to the prune record.
    assert_eq!(b.last_seq, Some(prune_seq.0));
    assert_eq!(b.first_seq, Some(first));
    assert_eq!(b.records, prune_seq.0 + 1 - first);
    let ts_at = |dir: &Path, seq: u64| {
        LogReader::open(dir)
            .unwrap()
            .records(Seq(seq)..=Seq(seq))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .ts_ns()
    };
    assert_eq!(b.first_ts_ns, Some(ts_at(&whole, first)));
    assert_eq!(b.pruned_up_to_seq, Some(record.last_seq));
    assert_eq!(a.first_seq, Some(0));
    assert_eq!(a.pruned_up_to_seq, None);

    // Reads start at the cut: every event the pruned log returns is the whole log's.
    let whole_rows = common::replay_json(&whole, &[]);
    let pruned_rows = common::replay_json(&pruned, &[]);
    assert!(!pruned_rows.is_empty());
    let from_cut: Vec<&serde_json::Value> = whole_rows
        .iter()
        .filter(|r| r["seq"].as_u64().unwrap() >= first)
        .collect();
    let (prune_row, pruned_rows) = pruned_rows.split_last().unwrap();
    assert_eq!(prune_row["type"], "prune");
    assert_eq!(prune_row["seq"], prune_seq.0);
    assert_eq!(prune_row["pruned_last_seq"], record.last_seq);
    assert_eq!(prune_row["reasons"], serde_json::json!(["max_bytes"]));
    assert_eq!(pruned_rows.len(), from_cut.len());
    for (a, b) in pruned_rows.iter().zip(&from_cut) {
        assert_eq!(&a, b, "seq {}", a["seq"]);
    }
    // `--type prune`, as the guide has it, lists the prune record alone.
    let only = common::replay_json(&pruned, &["--type", "prune"]);
    assert_eq!(only.len(), 1);
    assert_eq!(&only[0], prune_row);
    ok(&blackbox(&["digest", "--dir", s(&pruned)]));
    let at = blackbox_replay::format_time(a.last_ts_ns.unwrap());
    assert_eq!(
        ok(&blackbox(&[
            "state",
            "--dir",
            s(&pruned),
            "--at",
            &at,
            "--json"
        ])),
        ok(&blackbox(&[
            "state",
            "--dir",
            s(&whole),
            "--at",
            &at,
            "--json"
        ]))
    );

    // `verify` says where the log was cut, and when.
    let text = ok(&blackbox(&["verify", "--dir", s(&pruned)]));
    assert!(
        text.contains(&format!("pruned up to seq {}", record.last_seq)),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&blackbox(&["verify", "--dir", s(&pruned), "--json"]))).unwrap();
    assert_eq!(json["pruned"]["up_to_seq"], record.last_seq);
    assert_eq!(json["pruned"]["at_ns"], ts_at(&pruned, prune_seq.0));
    // A digest of the whole log taken before the cut is pruned there, not tampered.
    let early_seq: u64 = early.split(':').next().unwrap().parse().unwrap();
    assert!(early_seq < record.last_seq);
    let text = ok(&blackbox(&[
        "verify",
        "--dir",
        s(&pruned),
        "--digest",
        &early,
    ]));
    assert!(
        text.contains(&format!("digest {early} is older than the cut")),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&blackbox(&[
        "verify",
        "--dir",
        s(&pruned),
        "--digest",
        &early,
        "--json",
    ])))
    .unwrap();
    assert_eq!(json["digest_matched"], false);
    assert_eq!(json["digest_pruned"], true);
}

/// Records 1500 events of 200 bytes under a 48 KiB budget with a trigger after event
/// 500; runs `release_at(i, trigger)` after each event. Returns the trigger's seq and
/// time.
fn record_incident(dir: &Path, mut after: impl FnMut(u64, Seq)) -> (Seq, u64) {
    use blackbox::Clock;
    use blackbox::policy::{IncidentPolicy, Policy};
    let clock = ManualClock::new(START_NS);
    let step = 1_000_000;
    let policy = Policy::builder()
        .incident(IncidentPolicy {
            preroll_ns: 50 * step,
            postroll_ns: 80 * step,
            ..IncidentPolicy::new(&["fail.*"])
        })
        .retention(Retention {
            max_bytes: Some(48 << 10),
            max_age_ns: None,
            pinned_max_bytes: 256 << 10,
        })
        .build()
        .unwrap();
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .policy(policy)
        .log_options(LogOptions::new().segment_bytes_max(8 << 10));
    let recorder = Recorder::open(dir, config).unwrap();
    let mut trigger = (Seq(0), 0);
    for i in 0..1500u64 {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        if i == 500 {
            clock.advance_ns(step / 2);
            trigger = (
                recorder.record_evidence(&Event::new("fail.now")).unwrap(),
                clock.now_ns(),
            );
        }
        clock.advance_ns(step);
        if i % 50 == 0 {
            recorder.sync().unwrap();
        }
        after(i, trigger.0);
    }
    recorder.close().unwrap();
    trigger
}

#[test]
fn release_lets_a_running_recorder_prune_an_incident_window() {
    let tmp = tempfile::tempdir().unwrap();
    // Not released: the trigger is still in the log at the end.
    let kept = tmp.path().join("kept");
    let (trigger, _) = record_incident(&kept, |_, _| {});
    assert!(LogReader::open(&kept).unwrap().structure().unwrap()[0].first_seq < trigger.0);
    // Released from another process while the recorder runs: the window goes.
    let released = tmp.path().join("released");
    let (trigger, _) = record_incident(&released, |i, trigger| {
        if i == 900 {
            let text = ok(&blackbox(&[
                "release",
                "--dir",
                s(&released),
                &trigger.0.to_string(),
            ]));
            assert!(
                text.contains(&format!("released incident {}", trigger.0)),
                "{text}"
            );
        }
    });
    let first = LogReader::open(&released).unwrap().structure().unwrap()[0].first_seq;
    assert!(
        first > trigger.0,
        "the window is still there (log starts at {first})"
    );
    // The request was taken.
    assert_eq!(
        fs::read_dir(released.join(blackbox::RELEASE_DIR))
            .unwrap()
            .count(),
        0
    );
    // A seq that is no incident's trigger is refused, naming how to find one.
    let err = common::fails(&blackbox(&["release", "--dir", s(&released), "3"]));
    assert!(err.contains("no incident whose trigger is seq 3"), "{err}");
}

#[test]
fn exporting_a_whole_incident_releases_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let out = tmp.path().join("incident.jsonl");
    let (trigger, _) = record_incident(&dir, |i, _| {
        if i == 900 {
            let (stdout, stderr) = {
                let o = blackbox(&[
                    "export",
                    "--dir",
                    s(&dir),
                    "--around",
                    "incident",
                    "--out",
                    s(&out),
                ]);
                assert!(o.status.success(), "{o:?}");
                (
                    String::from_utf8(o.stdout).unwrap(),
                    String::from_utf8(o.stderr).unwrap(),
                )
            };
            assert!(stderr.contains("released incident"), "{stdout}{stderr}");
        }
    });
    // The exported file holds the window; the log no longer does.
    assert!(fs::read_to_string(&out).unwrap().lines().count() > 100);
    let first = LogReader::open(&dir).unwrap().structure().unwrap()[0].first_seq;
    assert!(
        first > trigger.0,
        "the window is still there (log starts at {first})"
    );
}

/// A log with knowledge-base commits (a snapshot written by hand at version 5, two
/// commits after it), then events enough for many segments; the copy pruned by the
/// log's budget holds none of the commit records, only the snapshot and the commits
/// after it that every segment's preamble carries.
fn write_kb_log(dir: &Path) {
    let clock = ManualClock::new(START_NS);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .log_options(LogOptions::new().segment_bytes_max(8 << 10));
    let recorder = Recorder::open(dir, config).unwrap();
    let mut evidence = Vec::new();
    for i in 0..8 {
        evidence.push(
            recorder
                .record_evidence(&Event::new("seen.door").values(&[("i", f64::from(i))]))
                .unwrap(),
        );
        clock.advance_ns(1_000_000_000);
    }
    let kb = recorder.kb().unwrap();
    let none = blackbox::Conditions::default();
    let cite = |i: usize| blackbox::Provenance::new([evidence[i]]);
    let values = ["open", "closed", "ajar", "open", "shut"];
    for (i, v) in values.iter().enumerate() {
        kb.assert(
            "door",
            serde_json::json!(v),
            0.3 + 0.1 * i as f64,
            &none,
            cite(i),
        )
        .unwrap();
        clock.advance_ns(1_000_000_000);
    }
    kb.write_snapshot().unwrap();
    for i in 5..7 {
        kb.assert("door", serde_json::json!("wide"), 0.5, &none, cite(i))
            .unwrap();
        clock.advance_ns(1_000_000_000);
    }
    for i in 0..3000u32 {
        let payload = [u8::try_from(i % 256).unwrap(); 48];
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        clock.advance_ns(5_000_000);
    }
    recorder.close().unwrap();
}

#[test]
fn kb_history_on_a_pruned_log_says_from_which_version_it_is_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let pruned = tmp.path().join("pruned");
    write_kb_log(&whole);
    // The copy has no view (`DIR/kb`): the commands rebuild the knowledge base from the
    // retained log.
    pruned_copy(&whole, &pruned, 64 << 10);
    let commits = |dir: &Path| {
        LogReader::open(dir)
            .unwrap()
            .records(..)
            .unwrap()
            .filter(|r| r.as_ref().unwrap().record_type() == blackbox::kb::KB_RECORD)
            .count()
    };
    assert_eq!(commits(&whole), 7);
    assert_eq!(commits(&pruned), 0, "a commit record was not pruned");

    let history = |dir: &Path| ok(&blackbox(&["kb", "history", "--dir", s(dir), "door"]));
    let (whole_history, pruned_history) = (history(&whole), history(&pruned));
    let mut lines = pruned_history.lines();
    assert_eq!(
        lines.next(),
        Some("history complete from version 5 (the log was pruned before it)")
    );
    let at_snapshot = lines.next().unwrap();
    assert!(
        at_snapshot.starts_with("v5  ") && at_snapshot.contains("snapshot"),
        "{at_snapshot}"
    );
    // The versions after the snapshot read as in the whole log's history.
    let after: Vec<&str> = whole_history
        .lines()
        .filter(|l| l.starts_with("v6 ") || l.starts_with("v7 "))
        .collect();
    assert_eq!(lines.collect::<Vec<_>>(), after);
    assert!(!whole_history.contains("history complete"));
    // The state at the snapshot's version is the whole log's.
    let get = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["kb", "get", "--dir", s(dir), "door"];
        args.extend_from_slice(extra);
        blackbox(&args)
    };
    assert_eq!(ok(&get(&pruned, &[])), ok(&get(&whole, &[])));
    assert_eq!(
        ok(&get(&pruned, &["--as-of", "5"])),
        ok(&get(&whole, &["--as-of", "5"]))
    );
    // Before it: a clear refusal, not an empty answer.
    let refused = common::fails(&get(&pruned, &["--as-of", "2"]));
    assert!(
        refused.contains(
            "version 2 is before the knowledge base's history: it is complete from version 5 only"
        ),
        "{refused}"
    );
    ok(&get(&whole, &["--as-of", "2"]));
    // By time too, the time said as the command takes it (version 2's commit was
    // made 9 s after the start).
    let early = blackbox_replay::format_time(START_NS + 9_500_000_000);
    let refused = common::fails(&get(&pruned, &["--at", &early]));
    assert!(
        refused.contains(&format!(
            "{early} is before the knowledge base's history: it is complete from version 5 only"
        )),
        "{refused}"
    );
}

#[test]
fn replay_shows_the_knowledge_base_snapshots_and_carried_commits_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    write_kb_log(tmp.path());
    let types = |extra: &[&str]| -> Vec<String> {
        common::replay_json(tmp.path(), extra)
            .iter()
            .map(|r| r["type"].as_str().unwrap().to_owned())
            .filter(|t| t.starts_with("kb"))
            .collect()
    };
    // By default: the seven commits, nothing the preambles repeat.
    assert_eq!(types(&[]), vec!["kb"; 7]);
    let snapshots = common::replay_json(tmp.path(), &["--type", "kb-snapshot"]);
    // After version 1 (the log had none), the one written at version 5, and one in
    // each segment's preamble after it.
    let versions: Vec<u64> = snapshots
        .iter()
        .map(|r| r["snapshot"]["version"].as_u64().unwrap())
        .collect();
    assert_eq!(&versions[..2], [1, 5]);
    assert!(versions.len() > 10, "{versions:?}");
    assert!(versions[2..].iter().all(|&v| v == 5), "{versions:?}");
    let carried = common::replay_json(tmp.path(), &["--type", "kb-carried"]);
    assert!(!carried.is_empty());
    for r in &carried {
        let v = r["commit"]["version"].as_u64().unwrap();
        assert!(v == 6 || v == 7, "{r}");
        assert!(r["commit"]["seq"].as_u64().unwrap() < r["seq"].as_u64().unwrap());
    }
    let text = ok(&blackbox(&[
        "replay",
        "--dir",
        s(tmp.path()),
        "--type",
        "kb-snapshot",
    ]));
    assert!(
        text.contains("knowledge base as of version 5 (1 fact)"),
        "{text}"
    );
}

/// Writes, through the recorder, working-memory changes (sets, a checkpoint, changes
/// after it, then 300 changes of one key), then 1500 events of 200 bytes and no change.
fn record_memory(dir: &Path, retention: Option<Retention>) {
    use blackbox::policy::Policy;
    let clock = ManualClock::new(START_NS);
    let step = 1_000_000;
    let mut policy = Policy::builder();
    if let Some(r) = retention {
        policy = policy.retention(r);
    }
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(20 * step)
        .checkpoint_interval_ns(None)
        .policy(policy.build().unwrap())
        .log_options(LogOptions::new().segment_bytes_max(8 << 10));
    let recorder = Recorder::open(dir, config).unwrap();
    let event = |i: u64| {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        clock.advance_ns(step);
        if i.is_multiple_of(50) {
            recorder.sync().unwrap();
        }
    };
    let w = recorder.working();
    w.set("a", serde_json::json!(1)).unwrap();
    w.set("c", serde_json::json!("s")).unwrap();
    event(0);
    recorder.checkpoint().unwrap();
    w.set("a", serde_json::json!(2)).unwrap();
    w.remove("c");
    event(1);
    for i in 0..300 {
        w.set("n", serde_json::json!(i)).unwrap();
        event(2 + i);
    }
    for i in 0..1500 {
        event(1000 + i);
    }
    recorder.close().unwrap();
}

/// The stamp of the first record of the log in `dir`, which was pruned.
fn cut_ns(dir: &Path) -> u64 {
    let reader = LogReader::open(dir).unwrap();
    let first_seq = reader.structure().unwrap()[0].first_seq;
    assert!(first_seq > 0, "nothing was pruned");
    reader
        .records(Seq(first_seq)..)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .ts_ns()
}

/// `state_at` on the pruned log `pruned` at a time before its cut: an error naming the
/// earliest time it answers for, from the library and from the command.
fn refused_before_cut(pruned: &Path, at: u64) {
    let earliest = blackbox_replay::format_time(cut_ns(pruned));
    let err = blackbox_replay::state_at(pruned, at, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&earliest), "{err}");
    let text = common::fails(&blackbox(&[
        "state",
        "--dir",
        s(pruned),
        "--at",
        &blackbox_replay::format_time(at),
    ]));
    assert!(text.contains(&earliest), "{text}");
}

#[test]
fn state_at_after_the_cut_is_the_whole_logs_and_before_it_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    record_memory(&whole, None);
    // The whole log pruned: the records after the cut are the whole log's.
    let pruned = tmp.path().join("pruned");
    pruned_copy(&whole, &pruned, 48 << 10);
    // The same run under the budget, pruned by the recorder as it wrote.
    let bounded = tmp.path().join("bounded");
    record_memory(
        &bounded,
        Some(Retention {
            max_bytes: Some(48 << 10),
            max_age_ns: None,
            pinned_max_bytes: 0,
        }),
    );
    let step = 1_000_000;
    // Both start in the stretch without changes: their first record is stamped after
    // the last change (event 301, at START + 301 steps).
    let cut = cut_ns(&pruned).max(cut_ns(&bounded));
    assert!(cut_ns(&pruned) > START_NS + 320 * step);
    assert!(cut_ns(&bounded) > START_NS + 320 * step);
    let end_ns = START_NS + 1803 * step;
    for at in [cut, cut + 1, cut + 7 * step, (cut + end_ns) / 2, end_ns] {
        let a = blackbox_replay::state_at(&whole, at, None).unwrap();
        // By hand: what the host set.
        assert_eq!(
            serde_json::Value::Object(a.working.clone()),
            serde_json::json!({"a": 2, "n": 299}),
            "at {at}"
        );
        let b = blackbox_replay::state_at(&pruned, at, None).unwrap();
        assert_eq!(b.working, a.working, "at {at}");
        assert_eq!(b.kinds, a.kinds, "at {at}");
        assert!(a.kinds["a.x"].seen > 0);
        let c = blackbox_replay::state_at(&bounded, at, None).unwrap();
        assert_eq!(c.working, a.working, "at {at}");
    }
    // Before the cut the retained log cannot tell: an error naming when it can.
    for dir in [&pruned, &bounded] {
        let cut = cut_ns(dir);
        refused_before_cut(dir, cut - 1);
        refused_before_cut(dir, START_NS + 100 * step);
    }
    // The whole log answers there.
    blackbox_replay::state_at(&whole, cut - 1, None).unwrap();
}

/// Copies the log in `whole` to `pruned` (without its view) and prunes the copy through
/// the log, under a budget of `max_bytes` and 8 KiB segments.
fn pruned_copy(whole: &Path, pruned: &Path, max_bytes: u64) {
    copy_files(whole, pruned);
    let (mut log, _) = Log::open(
        pruned,
        LogOptions::new()
            .segment_bytes_max(8 << 10)
            .retention(Retention {
                max_bytes: Some(max_bytes),
                max_age_ns: None,
                pinned_max_bytes: 0,
            }),
    )
    .unwrap();
    log.prune().unwrap().unwrap();
    log.close().unwrap();
}
