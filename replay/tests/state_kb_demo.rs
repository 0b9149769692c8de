#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

//! `blackbox state`, `blackbox kb` and `blackbox demo`, run as real processes against
//! expectations computed by hand: every field of DESIGN §8's contracts for these
//! subcommands, and their refusals.
//!
//! Log timestamps come from the recorder's wall clock, so the times these tests read
//! "at" are taken from what `blackbox replay --json` and `blackbox kb log --json`
//! report. Confidences follow the adjudication rule of `docs/ARCHITECTURE.md` with the
//! documented constants, computed by hand without decay; everything a key holds ages
//! (half-life one day) when a later commit changes the key, so each expected number may
//! be lower by the decay over the time between the commits, and no more.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Output;

use common::{Recording, blackbox, fails, json_lines, ok, record, replay_json, s};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------
// Adjudication, by hand (docs/ARCHITECTURE.md "Adjudication").

/// `DEFAULT_HALF_LIFE_NS`: one day.
const HALF_LIFE_NS: f64 = 86_400e9;

/// `0.5^(age / half_life)`: what every claim a key holds is multiplied by as it ages.
fn decay(age_ns: u64) -> f64 {
    0.5f64.powf(age_ns as f64 / HALF_LIFE_NS)
}

/// Noisy-OR: `1 − Π(1 − k)`.
fn noisy_or(claims: &[f64]) -> f64 {
    1.0 - claims.iter().map(|k| 1.0 - k).product::<f64>()
}

#[test]
fn the_adjudication_constants_are_the_documented_ones() {
    use blackbox::kb::adjudicate as a;
    assert_eq!(a::CONFIRMED_AT, 0.8);
    assert_eq!(a::REJECTED_BELOW, 0.2);
    assert_eq!(a::REFUTATION_FACTOR, 0.1);
    assert_eq!(a::DEFAULT_HALF_LIFE_NS as f64, HALF_LIFE_NS);
    assert_eq!(a::PROVENANCE_KEPT, 32);
    assert_eq!(a::CLAIMS_KEPT, 32);
    assert_eq!(a::RIVALS_KEPT, 8);
    assert_eq!(a::REFUTED_KEPT, 16);
    // The hand formulas agree with the library's.
    assert!((noisy_or(&[0.6, 0.8]) - a::support(&[0.6, 0.8])).abs() < 1e-15);
    assert!((noisy_or(&[0.6, 0.8]) - 0.92).abs() < 1e-15);
    assert_eq!(decay(86_400_000_000_000), 0.5);
    assert!(
        (0.8 * decay(10_000_000_000) - a::effective(0.8, 10_000_000_000, a::DEFAULT_HALF_LIFE_NS))
            .abs()
            < 1e-15
    );
}

// ---------------------------------------------------------------------------------
// Helpers.

/// `blackbox kb SUB ARGS... --dir DIR EXTRA...`.
fn kb(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["kb"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--dir", s(dir)]);
    blackbox(&all)
}

/// `blackbox kb ... --json`, which must succeed: its lines as JSON.
fn kb_json(dir: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = args.to_vec();
    all.push("--json");
    json_lines(&ok(&kb(dir, &all)))
}

/// A `kb` write: checks `{"version", "outcome"}` (and the commit's seq) and returns the
/// commit record's seq.
fn kb_write(dir: &Path, args: &[&str], version: u64, outcome: &str) -> u64 {
    let lines = kb_json(dir, args);
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    let w = &lines[0];
    assert_eq!(w["version"], version, "{args:?}: {w}");
    assert_eq!(w["outcome"], outcome, "{args:?}: {w}");
    w["seq"].as_u64().unwrap_or_else(|| panic!("a seq: {w}"))
}

/// `kb get KEY EXTRA... --json`: the fact.
fn kb_get(dir: &Path, key: &str, extra: &[&str]) -> Value {
    let mut args = vec!["get", key];
    args.extend_from_slice(extra);
    let lines = kb_json(dir, &args);
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines.into_iter().next().unwrap()
}

/// `kb get` that finds nothing: exit code 1 and `not found`.
fn kb_get_not_found(dir: &Path, key: &str, extra: &[&str]) -> String {
    let mut args = vec!["get", key];
    args.extend_from_slice(extra);
    let out = kb(dir, &args);
    let err = fails(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not found"), "{err}");
    err
}

/// `kb log --json` as text: what "nothing committed" compares.
fn kb_log_text(dir: &Path) -> String {
    ok(&kb(dir, &["log", "--json"]))
}

/// Version → commit time (ns), from `kb log --json`.
fn commit_times(dir: &Path) -> BTreeMap<u64, u64> {
    kb_json(dir, &["log"])
        .iter()
        .map(|c| {
            (
                c["version"].as_u64().unwrap(),
                c["time_ns"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `kb history KEY --json`: version → the fact after it (null when the key had none).
fn history(dir: &Path, key: &str) -> BTreeMap<u64, Value> {
    kb_json(dir, &["history", key])
        .into_iter()
        .map(|h| (h["version"].as_u64().unwrap(), h["fact"].clone()))
        .collect()
}

/// Asserts that `actual` is `expected`, a hand computation without decay, where each
/// number that adjudication ages may be lower by the decay over `age_max_ns` and no
/// more: in `[x · 0.5^(age/h), x]`. That is every non-integer number but a value (under
/// `value` or `conditions`): a claim ages by that factor at most, and a noisy-OR of
/// claims each aged by `d` is at least `d` times theirs.
fn assert_aged(actual: &Value, expected: &Value, age_max_ns: u64) {
    fn walk(actual: &Value, expected: &Value, d: f64, path: &str) {
        match (actual, expected) {
            (Value::Object(a), Value::Object(e)) => {
                assert_eq!(
                    a.keys().collect::<Vec<_>>(),
                    e.keys().collect::<Vec<_>>(),
                    "the fields of {path}"
                );
                for (k, e) in e {
                    if k == "value" || k == "conditions" {
                        assert_eq!(&a[k], e, "{path}.{k}");
                    } else {
                        walk(&a[k], e, d, &format!("{path}.{k}"));
                    }
                }
            }
            (Value::Array(a), Value::Array(e)) => {
                assert_eq!(
                    a.len(),
                    e.len(),
                    "the length of {path}: {actual} against {expected}"
                );
                for (i, (a, e)) in a.iter().zip(e).enumerate() {
                    walk(a, e, d, &format!("{path}[{i}]"));
                }
            }
            (Value::Number(a), Value::Number(e)) if e.is_f64() => {
                let (a, e) = (a.as_f64().unwrap(), e.as_f64().unwrap());
                assert!(
                    e * d - 1e-12 <= a && a <= e + 1e-12,
                    "{path}: {a} not in [{}, {e}]",
                    e * d
                );
            }
            _ => assert_eq!(actual, expected, "{path}"),
        }
    }
    walk(actual, expected, decay(age_max_ns), "fact");
}

/// Asserts a fact as the command prints it, with every contract field, against a hand
/// computation (see [`assert_aged`]).
fn assert_fact(actual: &Value, expected: &Value, age_max_ns: u64) {
    for field in [
        "key",
        "value",
        "confidence",
        "evidence_count",
        "status",
        "conditions",
        "provenance",
        "version",
    ] {
        assert!(
            actual.get(field).is_some(),
            "the contract field {field} is missing: {actual}"
        );
    }
    assert_aged(actual, expected, age_max_ns);
}

fn conf(fact: &Value) -> f64 {
    fact["confidence"].as_f64().unwrap()
}

/// The per-kind counters as `record`, `replay` and `state` print them.
fn counters(seen: u64, kept: u64, sampled_out: u64, dropped: u64) -> Value {
    json!({"seen": seen, "kept": kept, "sampled_out": sampled_out, "summarized": 0,
           "dropped": dropped, "overflow": 0, "preroll": 0, "lost": 0})
}

/// Records six events and returns their seqs (evidence to cite).
fn evidence_log(dir: &Path) -> Vec<u64> {
    let input: String = (0..6)
        .map(|i| format!("{{\"kind\":\"observation.door\",\"payload\":{{\"i\":{i}}}}}\n"))
        .collect();
    ok(&record(dir, &input, &[]));
    let seqs: Vec<u64> = replay_json(dir, &["--type", "event"])
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 6);
    seqs
}

/// The record of `records` of type `ty` satisfying `pred`, exactly one.
fn the<'a>(records: &'a [Value], ty: &str, pred: impl Fn(&Value) -> bool) -> &'a Value {
    let found: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == ty && pred(r))
        .collect();
    assert_eq!(found.len(), 1, "one {ty} record: {found:?}");
    found[0]
}

fn ts(r: &Value) -> u64 {
    r["ts_ns"].as_u64().unwrap()
}

fn seq(r: &Value) -> u64 {
    r["seq"].as_u64().unwrap()
}

// ---------------------------------------------------------------------------------
// 1. `blackbox state --at T`.

/// What `state --at T` must show, read independently off the replayed records: the
/// last checkpoint at or before T with the working-memory deltas after it (at or before
/// T) applied in log order, the last accounting record at or before T, and the last kb
/// version.
fn from_records(records: &[Value], t: u64) -> (Value, Value, Value, Value, u64) {
    let upto = |ty: &str| records.iter().rfind(|r| r["type"] == ty && ts(r) <= t);
    let checkpoint = upto("checkpoint");
    let accounting = upto("accounting");
    let version = upto("kb").map_or(0, |r| r["commit"]["version"].as_u64().unwrap());
    let mut working = checkpoint.map_or(json!({}), |c| c["working"].clone());
    let after = checkpoint.map_or(0, |c| seq(c) + 1);
    for d in records
        .iter()
        .filter(|r| r["type"] == "working" && seq(r) >= after && ts(r) <= t)
    {
        let memory = working.as_object_mut().unwrap();
        for k in d["del"].as_array().unwrap() {
            memory.remove(k.as_str().unwrap());
        }
        for (k, v) in d["set"].as_object().unwrap() {
            memory.insert(k.clone(), v.clone());
        }
    }
    (
        working,
        checkpoint.map_or(Value::Null, |c| c["seq"].clone()),
        // Each accounting record lists the kinds that changed since the one before.
        Value::Object(
            records
                .iter()
                .filter(|r| r["type"] == "accounting" && ts(r) <= t)
                .flat_map(|r| r["kinds"].as_object().unwrap().clone())
                .collect(),
        ),
        accounting.map_or(Value::Null, |a| a["seq"].clone()),
        version,
    )
}

fn state_json(dir: &Path, t: u64) -> Value {
    let text = ok(&blackbox(&[
        "state",
        "--dir",
        s(dir),
        "--at",
        &t.to_string(),
        "--json",
    ]));
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 1, "one JSON object: {text}");
    let state = lines.into_iter().next().unwrap();
    for field in ["at", "working", "kb", "kinds"] {
        assert!(state.get(field).is_some(), "{field} missing: {state}");
    }
    assert_eq!(state["at"], blackbox_replay::format_time(t));
    assert_eq!(
        blackbox_replay::parse_time(state["at"].as_str().unwrap()).unwrap(),
        t
    );
    assert_eq!(state["at_ns"], t);
    state
}

/// Checks `state --at t` against the records, and returns it.
fn check_state(dir: &Path, records: &[Value], t: u64) -> Value {
    let state = state_json(dir, t);
    let (working, checkpoint_seq, kinds, accounting_seq, version) = from_records(records, t);
    assert_eq!(state["working"], working, "working at {t}: {state}");
    assert_eq!(state["checkpoint_seq"], checkpoint_seq, "at {t}: {state}");
    assert_eq!(state["kinds"], kinds, "kinds at {t}: {state}");
    assert_eq!(state["accounting_seq"], accounting_seq, "at {t}: {state}");
    assert_eq!(state["kb_version"], version, "kb version at {t}: {state}");
    state
}

#[test]
fn state_at_t_is_the_memory_then_the_kb_as_of_t_and_the_last_accounting() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let policy = tmp.path().join("policy.toml");
    fs::write(
        &policy,
        "[[rules]]\nmatch = \"debug.*\"\ntier = \"drop\"\n\n\
         [[rules]]\nmatch = \"trajectory.*\"\ntier = \"sample\"\nevery = 2\n",
    )
    .unwrap();
    let policy_args = ["--policy", s(&policy)];

    // Run 1: events of every tier, working memory, a checkpoint, one more event.
    let run1 = [
        r#"{"kind":"action.grasp","source":"arm","values":{"force":3.5}}"#,
        r#"{"kind":"trajectory.point","payload":0}"#,
        r#"{"kind":"trajectory.point","payload":1}"#,
        r#"{"kind":"trajectory.point","payload":2}"#,
        r#"{"kind":"debug.tick"}"#,
        r#"{"kind":"debug.tick"}"#,
        r#"{"op":"set","key":"a","value":1}"#,
        r#"{"op":"set","key":"b","value":{"x":[1,2]}}"#,
        r#"{"op":"set","key":"tmp","value":true}"#,
        r#"{"op":"del","key":"tmp"}"#,
        r#"{"op":"checkpoint"}"#,
        r#"{"kind":"action.lift","payload":{"height_m":0.15}}"#,
    ]
    .join("\n");
    let summary = json_lines(&ok(&record(&dir, &run1, &policy_args)))
        .pop()
        .unwrap();
    // Hand-computed totals after run 1: sampling keeps 1 in 2 (the first of each two).
    let h1 = json!({
        "action.grasp": counters(1, 1, 0, 0),
        "action.lift": counters(1, 1, 0, 0),
        "debug.tick": counters(2, 0, 0, 2),
        "trajectory.point": counters(3, 2, 1, 0),
    });
    assert_eq!(summary["kinds"], h1);
    let m1 = json!({"a": 1, "b": {"x": [1, 2]}});

    let events = replay_json(&dir, &["--type", "event"]);
    let grasp = seq(&events[0]);
    let lift = seq(events.iter().find(|e| e["kind"] == "action.lift").unwrap());
    let (g, l) = (grasp.to_string(), lift.to_string());

    // Knowledge-base commits between the runs.
    kb_write(
        &dir,
        &[
            "put",
            "cup.mass_kg",
            "0.31",
            "--confidence",
            "0.6",
            "--evidence",
            &g,
            "--conditions",
            r#"{"object":"cup"}"#,
            "--author",
            "scale",
            "--message",
            "first weighing",
        ],
        1,
        "created",
    );
    kb_write(
        &dir,
        &[
            "put",
            "cup.mass_kg",
            "0.31",
            "--confidence",
            "0.8",
            "--evidence",
            &l,
        ],
        2,
        "corroborated",
    );
    kb_write(
        &dir,
        &[
            "put",
            "grip.force_n",
            "12.5",
            "--confidence",
            "0.9",
            "--evidence",
            &format!("{g},{l}"),
        ],
        3,
        "created",
    );

    // Run 2: more working memory, the second checkpoint, then one more event.
    let run2 = [
        r#"{"op":"set","key":"b","value":2}"#,
        r#"{"op":"set","key":"c","value":"new"}"#,
        r#"{"op":"checkpoint"}"#,
        r#"{"kind":"action.place"}"#,
    ]
    .join("\n");
    ok(&record(&dir, &run2, &policy_args));
    let m2 = json!({"a": 1, "b": 2, "c": "new"});
    let mut h2 = h1.clone();
    h2["action.place"] = counters(1, 1, 0, 0);
    let place = seq(&replay_json(&dir, &["--type", "event", "--kind", "action.place"])[0]);
    kb_write(
        &dir,
        &[
            "refute",
            "grip.force_n",
            "12.5",
            "--evidence",
            &place.to_string(),
            "--reason",
            "it slipped",
        ],
        4,
        "rejected",
    );

    let records = replay_json(&dir, &[]);
    let times = commit_times(&dir);
    let kb_ts = |v: u64| {
        let r = the(&records, "kb", |r| r["commit"]["version"] == v);
        assert_eq!(ts(r), times[&v], "the commit's time is its record's");
        ts(r)
    };
    let (t1, t2, t3, t4) = (kb_ts(1), kb_ts(2), kb_ts(3), kb_ts(4));
    let c1 = the(&records, "checkpoint", |r| {
        r["working"] == m1 && seq(r) < lift
    });
    let c2 = the(&records, "checkpoint", |r| {
        r["working"] == m2 && seq(r) < place
    });
    // Every checkpoint between the two carries the first one's memory (the kb writes
    // and run 2 restore it and checkpoint it on close); the accounting records, each
    // listing the kinds that changed since the one before, fold to run 1's totals at
    // every accounting record between the end of run 1 and the second checkpoint, and
    // to run 2's at the end.
    let mut folded = serde_json::Map::new();
    for r in &records {
        if r["type"] == "accounting" {
            for (kind, c) in r["kinds"].as_object().unwrap() {
                folded.insert(kind.clone(), c.clone());
            }
        }
        if seq(r) <= seq(c1) || seq(r) >= seq(c2) {
            continue;
        }
        if r["type"] == "checkpoint" {
            assert_eq!(r["working"], m1, "{r}");
        }
        if r["type"] == "accounting" && seq(r) > lift {
            assert_eq!(Value::Object(folded.clone()), h1, "{r}");
        }
    }
    assert_eq!(Value::Object(folded), h2);

    // The facts, by hand. Version 2: the noisy-OR of 0.8 and 0.6 (aged between the
    // commits) is 1 − 0.2 · 0.4 = 0.92, and the fact takes the conditions of its
    // strongest claim, the second, which has none. Version 4: one refutation, × 0.1.
    let fact = |key: &str,
                value: Value,
                confidence: f64,
                claims: Value,
                status: &str,
                conditions: Value,
                provenance: Value,
                v: u64,
                created: u64| {
        json!({"key": key, "value": value, "confidence": confidence, "claims": claims,
               "evidence_count": claims.as_array().unwrap().len(), "status": status,
               "conditions": conditions, "provenance": provenance, "refutations": 0,
               "counter_evidence": [], "version": v, "created": created, "rivals": [],
               "refuted": []})
    };
    let cup = json!({"object": "cup"});
    let cup_v1 = fact(
        "cup.mass_kg",
        json!(0.31),
        0.6,
        json!([0.6]),
        "hypothesis",
        cup.clone(),
        json!([grasp]),
        1,
        1,
    );
    let cup_v2 = fact(
        "cup.mass_kg",
        json!(0.31),
        noisy_or(&[0.8, 0.6]),
        json!([0.8, 0.6]),
        "confirmed",
        json!({}),
        json!([grasp, lift]),
        2,
        1,
    );
    let cup_v2_age = t2 - t1;
    let grip_v3 = fact(
        "grip.force_n",
        json!(12.5),
        0.9,
        json!([0.9]),
        "confirmed",
        json!({}),
        json!([grasp, lift]),
        3,
        3,
    );
    let mut grip_v4 = fact(
        "grip.force_n",
        json!(12.5),
        0.09,
        json!([0.9]),
        "rejected",
        json!({}),
        json!([grasp, lift]),
        4,
        3,
    );
    grip_v4["refutations"] = json!(1);
    grip_v4["counter_evidence"] = json!([place]);
    let grip_v4_age = t4 - t3;

    // Before any record: nothing at all.
    for t in [0, ts(&records[0]) - 1] {
        let state = state_json(&dir, t);
        assert_eq!(
            state,
            json!({"at": blackbox_replay::format_time(t), "at_ns": t, "working": {},
                   "checkpoint_seq": null, "working_seq": null, "kb": {}, "kb_version": 0,
                   "kinds": {}, "accounting_seq": null}),
        );
    }
    let human = ok(&blackbox(&["state", "--dir", s(&dir), "--at", "0"]));
    assert!(
        human.contains("working memory (empty: no checkpoint or change at or before this time):"),
        "{human}"
    );
    assert!(human.contains("knowledge base (version 0):"), "{human}");
    assert!(
        human.contains("accounting: no accounting record at or before this time"),
        "{human}"
    );

    // At the first checkpoint: its memory, no knowledge yet.
    let state = check_state(&dir, &records, ts(c1));
    assert_eq!(state["working"], m1);
    assert_eq!(state["checkpoint_seq"], seq(c1));
    assert_eq!(state["kb"], json!({}));

    // Just before the first commit: run 1's totals, still no knowledge.
    let state = check_state(&dir, &records, t1 - 1);
    assert_eq!(state["working"], m1);
    assert_eq!(state["kinds"], h1);
    assert_eq!(state["kb"], json!({}));
    assert_eq!(state["kb_version"], 0);

    // At the first commit, and at the second.
    let state = check_state(&dir, &records, t1);
    assert_eq!(state["kb_version"], 1);
    assert_eq!(state["kb"].as_object().unwrap().len(), 1);
    assert_fact(&state["kb"]["cup.mass_kg"], &cup_v1, 0);
    assert_eq!(state["kinds"], h1);

    let state = check_state(&dir, &records, t2);
    assert_eq!(state["working"], m1);
    assert_eq!(state["kinds"], h1);
    assert_eq!(state["kb_version"], 2);
    assert_eq!(state["kb"].as_object().unwrap().len(), 1);
    assert_fact(&state["kb"]["cup.mass_kg"], &cup_v2, cup_v2_age);
    // The same fact as `kb get --at`.
    assert_eq!(
        kb_get(&dir, "cup.mass_kg", &["--at", &t2.to_string()]),
        state["kb"]["cup.mass_kg"]
    );
    // And for people.
    let human = ok(&blackbox(&[
        "state",
        "--dir",
        s(&dir),
        "--at",
        &t2.to_string(),
    ]));
    assert!(
        human.contains(&format!("state at {}", blackbox_replay::format_time(t2))),
        "{human}"
    );
    assert!(
        human.contains(&format!(
            "working memory (the checkpoint at seq {}):",
            state["checkpoint_seq"]
        )),
        "{human}"
    );
    assert!(human.contains("\n  a = 1\n"), "{human}");
    assert!(human.contains("\n  b = {\"x\":[1,2]}\n"), "{human}");
    assert!(!human.contains("tmp"), "{human}");
    assert!(human.contains("knowledge base (version 2):"), "{human}");
    assert!(
        human.contains("  cup.mass_kg = 0.31  confidence 0.920, confirmed, evidence 2"),
        "{human}"
    );
    assert!(
        human.contains(&format!(
            "accounting (running totals at seq {}):",
            state["accounting_seq"]
        )),
        "{human}"
    );
    assert!(
        human.contains(
            "  trajectory.point: seen 3 kept 2 sampled_out 1 summarized 0 dropped 0 overflow 0 preroll 0"
        ),
        "{human}"
    );
    assert!(
        human.contains(
            "  debug.tick: seen 2 kept 0 sampled_out 0 summarized 0 dropped 2 overflow 0 preroll 0"
        ),
        "{human}"
    );

    // Run 2's changes, each at its own time: before the first, still the first
    // checkpoint's memory; at each, the memory it made, before the second checkpoint
    // holds it.
    let deltas: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "working" && seq(r) > seq(c1) && seq(r) < seq(c2))
        .collect();
    assert_eq!(deltas.len(), 2, "{deltas:?}");
    assert_eq!(deltas[0]["set"], json!({"b": 2}));
    assert_eq!(deltas[1]["set"], json!({"c": "new"}));
    let state = check_state(&dir, &records, ts(deltas[0]) - 1);
    assert_eq!(state["working"], m1);
    let state = check_state(&dir, &records, ts(deltas[0]));
    assert_eq!(state["working"], json!({"a": 1, "b": 2}));
    assert_eq!(state["working_seq"], seq(deltas[0]));
    let human = ok(&blackbox(&[
        "state",
        "--dir",
        s(&dir),
        "--at",
        &ts(deltas[0]).to_string(),
    ]));
    assert!(
        human.contains(&format!(
            "working memory (the checkpoint at seq {} and the changes up to seq {}):",
            state["checkpoint_seq"],
            seq(deltas[0])
        )),
        "{human}"
    );
    let state = check_state(&dir, &records, ts(deltas[1]));
    assert_eq!(state["working"], m2);

    // Just before the second checkpoint: run 2's memory, every fact committed so far.
    let state = check_state(&dir, &records, ts(c2) - 1);
    if ts(deltas[1]) < ts(c2) {
        assert_eq!(state["working"], m2);
    }
    assert_eq!(state["kinds"], h1);
    assert_eq!(state["kb_version"], 3);
    assert_eq!(state["kb"].as_object().unwrap().len(), 2);
    assert_fact(&state["kb"]["cup.mass_kg"], &cup_v2, cup_v2_age);
    assert_fact(&state["kb"]["grip.force_n"], &grip_v3, 0);
    // The same, asked in RFC 3339.
    let rfc = blackbox_replay::format_time(ts(c2) - 1);
    let same: Value = serde_json::from_str(&ok(&blackbox(&[
        "state",
        "--dir",
        s(&dir),
        "--at",
        &rfc,
        "--json",
    ])))
    .unwrap();
    assert_eq!(same, state);

    // At the second checkpoint: its memory.
    let state = check_state(&dir, &records, ts(c2));
    assert_eq!(state["working"], m2);
    assert_eq!(state["checkpoint_seq"], seq(c2));
    assert_eq!(state["kinds"], h1);
    assert_eq!(state["kb_version"], 3);

    // After everything: the refutation, run 2's totals.
    let end = ts(records.last().unwrap()) + 1_000_000_000;
    let state = check_state(&dir, &records, end);
    assert_eq!(state["working"], m2);
    assert_eq!(state["kinds"], h2);
    assert_eq!(state["kb_version"], 4);
    assert_fact(&state["kb"]["cup.mass_kg"], &cup_v2, cup_v2_age);
    assert_fact(&state["kb"]["grip.force_n"], &grip_v4, grip_v4_age);
    let human = ok(&blackbox(&[
        "state",
        "--dir",
        s(&dir),
        "--at",
        &end.to_string(),
    ]));
    assert!(human.contains("\n  c = \"new\"\n"), "{human}");
    assert!(
        human.contains("  grip.force_n = 12.5  confidence 0.090, rejected, evidence 1"),
        "{human}"
    );
    assert!(
        human.contains(
            "  action.place: seen 1 kept 1 sampled_out 0 summarized 0 dropped 0 overflow 0 preroll 0"
        ),
        "{human}"
    );
}

// ---------------------------------------------------------------------------------
// 2. `blackbox kb`.

#[test]
fn kb_writes_adjudicate_and_every_read_shows_every_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e: Vec<String> = ev.iter().map(u64::to_string).collect();

    // door.state: created, corroborated, contested twice, then superseded by its rival:
    // open 0.6, then 1 − 0.4 · 0.6 = 0.76; closed 0.4, then 1 − 0.6 · 0.5 = 0.7 < 0.76,
    // then 1 − 0.6 · 0.5 · 0.4 = 0.88 > 0.76.
    let put = |args: &[&str], version: u64, outcome: &str| {
        let mut all = vec!["put"];
        all.extend_from_slice(args);
        kb_write(&dir, &all, version, outcome)
    };
    put(
        &[
            "door.state",
            r#""open""#,
            "--confidence",
            "0.6",
            "--evidence",
            &e[0],
            "--author",
            "alice",
            "--message",
            "saw it open",
        ],
        1,
        "created",
    );
    put(
        &[
            "door.state",
            r#""open""#,
            "--confidence",
            "0.4",
            "--evidence",
            &e[1],
        ],
        2,
        "corroborated",
    );
    put(
        &[
            "door.state",
            r#""closed""#,
            "--confidence",
            "0.4",
            "--evidence",
            &e[2],
        ],
        3,
        "contested",
    );
    put(
        &[
            "door.state",
            r#""closed""#,
            "--confidence",
            "0.5",
            "--evidence",
            &e[3],
        ],
        4,
        "contested",
    );
    put(
        &[
            "door.state",
            r#""closed""#,
            "--confidence",
            "0.6",
            "--evidence",
            &e[4],
        ],
        5,
        "superseded",
    );
    // arm.reach: a stronger different claim supersedes at once; the first value stays as
    // its rival.
    put(
        &[
            "arm.reach",
            "0.8",
            "--confidence",
            "0.3",
            "--evidence",
            &e[0],
        ],
        6,
        "created",
    );
    put(
        &[
            "arm.reach",
            "0.9",
            "--confidence",
            "0.95",
            "--evidence",
            &e[1],
        ],
        7,
        "superseded",
    );
    // room: a fact with conditions.
    put(
        &[
            "room",
            r#""kitchen""#,
            "--confidence",
            "0.85",
            "--conditions",
            r#"{"level":1}"#,
            "--evidence",
            &e[5],
        ],
        8,
        "created",
    );
    // lamp: a weaker claim stays as an open contradiction.
    put(
        &[
            "lamp",
            r#""on""#,
            "--confidence",
            "0.7",
            "--evidence",
            &e[0],
        ],
        9,
        "created",
    );
    put(
        &[
            "lamp",
            r#""off""#,
            "--confidence",
            "0.3",
            "--evidence",
            &e[1],
        ],
        10,
        "contested",
    );

    let keys = |facts: &[Value]| -> Vec<String> {
        facts
            .iter()
            .map(|f| f["key"].as_str().unwrap().to_owned())
            .collect()
    };
    let contradictions = kb_json(&dir, &["contradictions"]);
    assert_eq!(
        keys(&contradictions),
        ["arm.reach", "door.state", "lamp"],
        "{contradictions:?}"
    );
    let lamp_now = &contradictions[2];
    assert_eq!(lamp_now["status"], "contested");
    let lamp_rivals = json!([{"value": "off", "confidence": 0.3, "claims": [0.3],
        "evidence_count": 1, "conditions": {}, "provenance": [ev[1]]}]);
    assert_eq!(lamp_now["rivals"], lamp_rivals);
    let human = ok(&kb(&dir, &["contradictions"]));
    assert_eq!(human.lines().count(), 3, "{human}");
    assert!(
        human.contains("; contradicted by \"off\" (confidence 0.300, evidence 1)"),
        "{human}"
    );
    assert_eq!(
        keys(&kb_json(
            &dir,
            &["matching", "--context", r#"{"level":1,"zone":"a"}"#]
        )),
        ["arm.reach", "door.state", "lamp", "room"]
    );
    assert_eq!(
        keys(&kb_json(&dir, &["matching", "--context", r#"{"level":2}"#])),
        ["arm.reach", "door.state", "lamp"],
        "room holds only on level 1"
    );
    assert!(kb_json(&dir, &["rejected"]).is_empty());

    // Refutations: of a rival (removes it), of the current value (rejects it), of a key
    // without a fact (a failed hypothesis, remembered).
    let refute = |args: &[&str], version: u64, outcome: &str| {
        let mut all = vec!["refute"];
        all.extend_from_slice(args);
        kb_write(&dir, &all, version, outcome)
    };
    refute(
        &[
            "lamp",
            r#""off""#,
            "--evidence",
            &e[2],
            "--reason",
            "it is lit",
        ],
        11,
        "refuted",
    );
    assert_eq!(
        keys(&kb_json(&dir, &["contradictions"])),
        ["arm.reach", "door.state"]
    );
    refute(
        &[
            "door.state",
            r#""closed""#,
            "--evidence",
            &e[5],
            "--reason",
            "it was open after all",
        ],
        12,
        "rejected",
    );
    refute(
        &[
            "ghost",
            r#""boo""#,
            "--evidence",
            &e[0],
            "--reason",
            "no such thing",
        ],
        13,
        "rejected",
    );
    // Every value ever rejected: the lamp's refuted rival too.
    let rejected: Vec<(String, Value, Value)> = kb_json(&dir, &["rejected"])
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["value"].clone(),
                r["version"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rejected,
        [
            ("door.state".to_owned(), json!("closed"), json!(12)),
            ("ghost".to_owned(), json!("boo"), json!(13)),
            ("lamp".to_owned(), json!("off"), json!(11)),
        ]
    );
    // The refutation gave the door back to "open", its rival; the ghost is rejected.
    assert_eq!(
        keys(&kb_json(&dir, &["matching", "--context", r#"{"level":1}"#])),
        ["arm.reach", "door.state", "lamp", "room"],
        "rejected facts do not match"
    );
    // Retract.
    let retracted = kb_write(
        &dir,
        &["retract", "room", "--evidence", &e[1], "--reason", "moved"],
        14,
        "retracted",
    );
    kb_get_not_found(&dir, "room", &[]);

    // The commit log: one line per commit, every field.
    let kb_records = replay_json(&dir, &["--type", "kb"]);
    assert_eq!(kb_records.len(), 14);
    let log = kb_json(&dir, &["log"]);
    assert_eq!(log[13]["seq"], retracted);
    assert_eq!(log.len(), 14);
    let times: BTreeMap<u64, u64> = log
        .iter()
        .map(|c| {
            (
                c["version"].as_u64().unwrap(),
                c["time_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    let age = |from: u64, to: u64| times[&to] - times[&from];
    for (i, c) in log.iter().enumerate() {
        let v = i as u64 + 1;
        assert_eq!(c["version"], v);
        // The commit's seq is its kb record's.
        let record = the(&kb_records, "kb", |r| r["commit"]["version"] == v);
        assert_eq!(c["seq"], seq(record));
        assert_eq!(
            blackbox_replay::parse_time(c["time"].as_str().unwrap()).unwrap(),
            times[&v]
        );
        if v > 1 {
            assert!(times[&v] >= times[&(v - 1)], "commit times never decrease");
        }
    }
    let mut first = log[0].clone();
    let first_changes = first.as_object_mut().unwrap().remove("changes").unwrap();
    for f in ["seq", "time", "time_ns"] {
        first.as_object_mut().unwrap().remove(f);
    }
    assert_eq!(
        first,
        json!({"version": 1, "author": "alice", "message": "saw it open", "provenance": [ev[0]],
               "op": "assert", "key": "door.state", "value": "open", "confidence": 0.6,
               "outcome": "created"})
    );
    assert_eq!(
        first_changes,
        json!([{"key": "door.state", "fact": {"key": "door.state", "value": "open",
                "confidence": 0.6, "claims": [0.6], "evidence_count": 1,
                "status": "hypothesis", "conditions": {}, "provenance": [ev[0]],
                "created": 1, "updated": 1}}])
    );
    assert_eq!(log[7]["conditions"], json!({"level": 1}));
    assert_eq!(log[10]["op"], "refute");
    assert_eq!(log[10]["message"], "it is lit");
    assert_eq!(log[13]["op"], "retract");
    assert_eq!(log[13]["changes"], json!([{"key": "room", "fact": null}]));
    let human = ok(&kb(&dir, &["log"]));
    assert_eq!(human.lines().count(), 14, "{human}");
    assert!(
        human.lines().next().unwrap().contains(&format!(
            "alice: assert door.state = \"open\" (0.6) -> created  evidence {}  \"saw it open\"",
            ev[0]
        )),
        "{human}"
    );
    assert!(
        human.contains(&format!(
            "blackbox: retract room -> retracted  evidence {}  \"moved\"",
            ev[1]
        )),
        "{human}"
    );

    // door.state's history: one entry per version that changed it, each by hand,
    // without decay (each number may be lower by the decay over the commits' span).
    let door = history(&dir, "door.state");
    assert_eq!(
        door.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 12]
    );
    let span = age(1, 14);
    let value_json = |value: &str, claims: &[f64], prov: &[u64]| {
        json!({"value": value, "confidence": noisy_or(claims), "claims": claims,
               "evidence_count": claims.len(), "conditions": {}, "provenance": prov})
    };
    let door_fact = |v: u64, held: Value, status: &str, rivals: Value, refuted: Value| {
        let mut f = json!({"key": "door.state", "refutations": 0, "counter_evidence": [],
            "status": status, "version": v, "created": 1, "rivals": rivals,
            "refuted": refuted});
        for (k, x) in held.as_object().unwrap() {
            f[k] = x.clone();
        }
        f
    };
    let open1 = value_json("open", &[0.6], &ev[..1]);
    assert_fact(
        &door[&1],
        &door_fact(1, open1, "hypothesis", json!([]), json!([])),
        0,
    );
    let open2 = value_json("open", &[0.6, 0.4], &ev[..2]);
    assert!((noisy_or(&[0.6, 0.4]) - 0.76).abs() < 1e-12);
    assert_fact(
        &door[&2],
        &door_fact(2, open2.clone(), "hypothesis", json!([]), json!([])),
        span,
    );
    // A weaker different claim: a rival; the fact only ages.
    let closed3 = value_json("closed", &[0.4], &ev[2..3]);
    assert_fact(
        &door[&3],
        &door_fact(3, open2.clone(), "contested", json!([closed3]), json!([])),
        span,
    );
    // The rival again: 1 − 0.6 · 0.5 = 0.7, which does not beat 0.76.
    let closed4 = value_json("closed", &[0.5, 0.4], &ev[2..4]);
    assert_fact(
        &door[&4],
        &door_fact(4, open2.clone(), "contested", json!([closed4]), json!([])),
        span,
    );
    // Once more: 1 − 0.6 · 0.5 · 0.4 = 0.88 beats it, and the rival becomes the fact,
    // with its own claims and evidence; "open" is now its rival.
    let closed5 = value_json("closed", &[0.6, 0.5, 0.4], &ev[2..5]);
    assert!((noisy_or(&[0.6, 0.5, 0.4]) - 0.88).abs() < 1e-12);
    assert_fact(
        &door[&5],
        &door_fact(
            5,
            closed5.clone(),
            "contested",
            json!([open2.clone()]),
            json!([]),
        ),
        span,
    );
    // One counterexample rejects it (× 0.1 = 0.088): "open" (0.76) takes the key back,
    // no longer contested; "closed" is remembered as refuted.
    let mut closed12 = closed5;
    closed12["confidence"] = json!(noisy_or(&[0.6, 0.5, 0.4]) * 0.1);
    closed12["refutations"] = json!(1);
    closed12["counter_evidence"] = json!([ev[5]]);
    assert_fact(
        &door[&12],
        &door_fact(12, open2, "hypothesis", json!([]), json!([closed12])),
        span,
    );

    let arm = history(&dir, "arm.reach");
    assert_eq!(arm.keys().copied().collect::<Vec<_>>(), [6, 7]);
    let arm_fact = |v: u64, value: f64, c: f64, status: &str, p: u64, rivals: Value| {
        json!({"key": "arm.reach", "value": value, "confidence": c, "claims": [c],
               "evidence_count": 1, "status": status, "conditions": {}, "provenance": [p],
               "refutations": 0, "counter_evidence": [], "version": v, "created": 6,
               "rivals": rivals, "refuted": []})
    };
    assert_fact(
        &arm[&6],
        &arm_fact(6, 0.8, 0.3, "hypothesis", ev[0], json!([])),
        0,
    );
    let arm_rival = json!([{"value": 0.8, "confidence": 0.3, "claims": [0.3],
        "evidence_count": 1, "conditions": {}, "provenance": [ev[0]]}]);
    assert_fact(
        &arm[&7],
        &arm_fact(7, 0.9, 0.95, "contested", ev[1], arm_rival),
        span,
    );

    let lamp = history(&dir, "lamp");
    assert_eq!(lamp.keys().copied().collect::<Vec<_>>(), [9, 10, 11]);
    let lamp_fact = |v: u64, status: &str, rivals: Value, refuted: Value| {
        json!({"key": "lamp", "value": "on", "confidence": 0.7, "claims": [0.7],
               "evidence_count": 1, "status": status, "conditions": {},
               "provenance": [ev[0]], "refutations": 0, "counter_evidence": [],
               "version": v, "created": 9, "rivals": rivals, "refuted": refuted})
    };
    assert_fact(
        &lamp[&9],
        &lamp_fact(9, "hypothesis", json!([]), json!([])),
        0,
    );
    assert_fact(
        &lamp[&10],
        &lamp_fact(10, "contested", lamp_rivals.clone(), json!([])),
        span,
    );
    // The refuted rival: 0.3 × 0.1, remembered beside the fact.
    let mut off = lamp_rivals[0].clone();
    off["confidence"] = json!(0.03);
    off["refutations"] = json!(1);
    off["counter_evidence"] = json!([ev[2]]);
    assert_fact(
        &lamp[&11],
        &lamp_fact(11, "hypothesis", json!([]), json!([off])),
        span,
    );

    let ghost = history(&dir, "ghost");
    assert_fact(
        &ghost[&13],
        &json!({"key": "ghost", "value": "boo", "confidence": 0.0, "claims": [],
                "evidence_count": 0, "status": "rejected", "conditions": {},
                "provenance": [], "refutations": 1, "counter_evidence": [ev[0]],
                "version": 13, "created": 13, "rivals": [], "refuted": []}),
        0,
    );

    let room = history(&dir, "room");
    assert_eq!(room.keys().copied().collect::<Vec<_>>(), [8, 14]);
    let room_v8 = json!({"key": "room", "value": "kitchen", "confidence": 0.85,
        "claims": [0.85], "evidence_count": 1, "status": "confirmed",
        "conditions": {"level": 1}, "provenance": [ev[5]], "refutations": 0,
        "counter_evidence": [], "version": 8, "created": 8, "rivals": [], "refuted": []});
    assert_fact(&room[&8], &room_v8, 0);
    assert_eq!(
        room[&14],
        Value::Null,
        "retracted: no fact, the history stays"
    );

    // History's other fields, and for people.
    let door_lines = kb_json(&dir, &["history", "door.state"]);
    let outcomes: Vec<&str> = door_lines
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "created",
            "corroborated",
            "contested",
            "contested",
            "superseded",
            "rejected"
        ]
    );
    for h in &door_lines {
        let v = h["version"].as_u64().unwrap();
        assert_eq!(h["time_ns"], times[&v]);
        assert_eq!(h["time"], blackbox_replay::format_time(times[&v]));
    }
    let human = ok(&kb(&dir, &["history", "door.state"]));
    let lines: Vec<&str> = human.lines().collect();
    assert_eq!(lines.len(), 6, "{human}");
    for (l, (v, o)) in lines.iter().zip([1, 2, 3, 4, 5, 12].iter().zip(&outcomes)) {
        assert!(l.starts_with(&format!("v{v}  ")), "{l}");
        assert!(l.contains(o), "{l}");
    }
    assert!(
        lines[5].contains(
            "door.state = \"open\"  confidence 0.760, hypothesis, evidence 2, v12; refuted: \"closed\" (confidence 0.088, evidence 3, refuted once)"
        ),
        "{human}"
    );
    let human = ok(&kb(&dir, &["history", "room"]));
    assert_eq!(human.lines().count(), 2, "{human}");
    assert!(
        human.lines().nth(1).unwrap().contains("(no fact)"),
        "{human}"
    );
    let err = fails(&kb(&dir, &["history", "nothing.here"]));
    assert!(err.contains("not found"), "{err}");

    // get: now, as of a version, as of a time, in a context.
    let now = kb_get(&dir, "door.state", &[]);
    assert_eq!(now, door[&12]);
    for v in [1u64, 2, 3, 4, 5] {
        assert_eq!(
            kb_get(&dir, "door.state", &["--as-of", &v.to_string()]),
            door[&v]
        );
    }
    // As of versions that did not change the key: its fact after the last one that did.
    assert_eq!(kb_get(&dir, "door.state", &["--as-of", "11"]), door[&5]);
    assert_eq!(
        kb_get(&dir, "door.state", &["--at", &times[&2].to_string()]),
        door[&2]
    );
    assert_eq!(
        kb_get(&dir, "door.state", &["--at", &(times[&2] - 1).to_string()]),
        door[&1]
    );
    assert_eq!(
        kb_get(
            &dir,
            "door.state",
            &["--at", &blackbox_replay::format_time(times[&4])]
        ),
        door[&4]
    );
    kb_get_not_found(&dir, "door.state", &["--at", &(times[&1] - 1).to_string()]);
    kb_get_not_found(&dir, "room", &["--as-of", "7"]);
    assert_eq!(
        kb_get(
            &dir,
            "room",
            &["--as-of", "8", "--context", r#"{"level":1,"zone":"a"}"#]
        ),
        room[&8]
    );
    let err = kb_get_not_found(
        &dir,
        "room",
        &["--as-of", "8", "--context", r#"{"level":2}"#],
    );
    assert!(
        err.contains(r#"{"level":1}"#),
        "names the conditions: {err}"
    );
    kb_get_not_found(&dir, "room", &["--as-of", "8", "--context", "{}"]);
    assert_eq!(
        kb_get(&dir, "arm.reach", &["--context", r#"{"level":2}"#]),
        arm[&7]
    );
    let human = ok(&kb(&dir, &["get", "room", "--as-of", "8"]));
    assert_eq!(
        human,
        format!(
            "room = \"kitchen\"  confidence 0.850, confirmed, evidence 1, v8, where {{\"level\":1}}\n"
        )
    );

    // diff: the facts that differ, before and after.
    let diff = kb_json(&dir, &["diff", "1", "5"]);
    assert_eq!(
        diff,
        [json!({"key": "door.state", "before": door[&1], "after": door[&5]})]
    );
    let diff = kb_json(&dir, &["diff", "5", "8"]);
    assert_eq!(
        diff,
        [
            json!({"key": "arm.reach", "before": null, "after": arm[&7]}),
            json!({"key": "room", "before": null, "after": room[&8]}),
        ]
    );
    let diff = kb_json(&dir, &["diff", "13", "14"]);
    assert_eq!(
        diff,
        [json!({"key": "room", "before": room[&8], "after": null})]
    );
    assert!(kb_json(&dir, &["diff", "6", "6"]).is_empty());
    let human = ok(&kb(&dir, &["diff", "5", "8"]));
    assert_eq!(human.lines().count(), 2, "{human}");
    assert!(
        human.contains("room: (no fact)  ->  room = \"kitchen\""),
        "{human}"
    );
}

#[test]
fn kb_put_twice_citing_the_same_evidence_does_not_confirm() {
    // Guards a past bug: the same observation cited twice counted twice, and a
    // hypothesis at 0.7 became a confirmed fact at 0.805.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e: Vec<String> = ev.iter().map(u64::to_string).collect();
    fn put(evidence: &str) -> Vec<&str> {
        vec![
            "put",
            "door",
            r#""open""#,
            "--confidence",
            "0.7",
            "--evidence",
            evidence,
        ]
    }
    kb_write(&dir, &put(&e[0]), 1, "created");
    kb_write(&dir, &put(&e[0]), 2, "duplicate");
    let human = ok(&kb(&dir, &put(&e[0])));
    assert!(
        human.starts_with("version 3: duplicate (commit record at seq "),
        "{human}"
    );
    assert!(
        human.contains("already counted for this value"),
        "says why: {human}"
    );
    let door = kb_get(&dir, "door", &[]);
    assert_eq!(door["confidence"], 0.7);
    assert_eq!(door["status"], "hypothesis");
    assert_eq!(door["evidence_count"], 1);
    assert_eq!(door["version"], 1, "a duplicate changes nothing");
    // The duplicates are in the commit log, with no change.
    let log = kb_json(&dir, &["log"]);
    assert_eq!(log.len(), 3);
    assert_eq!(log[1]["outcome"], "duplicate");
    assert_eq!(log[1]["changes"], json!([]));
    // A new observation does count: 1 − 0.3 · 0.3 = 0.91 (less what the first claim
    // aged in between).
    kb_write(&dir, &put(&e[1]), 4, "corroborated");
    let door = kb_get(&dir, "door", &[]);
    let times = commit_times(&dir);
    let d = decay(times[&4] - times[&1]);
    assert!(
        noisy_or(&[0.7 * d, 0.7]) - 1e-12 <= conf(&door) && conf(&door) <= 0.91 + 1e-12,
        "{door}"
    );
    assert_eq!(door["status"], "confirmed");
}

#[test]
fn kb_rejected_lists_every_value_ever_rejected_with_the_commit_that_rejected_it() {
    // Guards a past bug: `kb rejected` listed only current facts whose status was
    // rejected, so a refuted value forgot its refutation once the key moved on.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e: Vec<String> = ev.iter().map(u64::to_string).collect();
    let put = |key: &str, value: &str, c: &str, evidence: &str, v: u64, outcome: &str| {
        kb_write(
            &dir,
            &["put", key, value, "--confidence", c, "--evidence", evidence],
            v,
            outcome,
        );
    };
    put("door", r#""open""#, "0.9", &e[0], 1, "created");
    put("door", r#""closed""#, "0.5", &e[1], 2, "contested");
    kb_write(
        &dir,
        &[
            "refute",
            "door",
            r#""open""#,
            "--evidence",
            &e[2],
            "--reason",
            "it was shut",
        ],
        3,
        "rejected",
    );
    kb_write(
        &dir,
        &[
            "refute",
            "ghost",
            r#""boo""#,
            "--evidence",
            &e[3],
            "--reason",
            "no such thing",
        ],
        4,
        "rejected",
    );
    // The keys move on: another value wins the door, the ghost is withdrawn.
    put("door", r#""ajar""#, "0.95", &e[4], 5, "superseded");
    // A value the door never held is remembered as refuted too.
    kb_write(
        &dir,
        &[
            "refute",
            "door",
            r#""jammed""#,
            "--evidence",
            &e[5],
            "--reason",
            "it moved",
        ],
        6,
        "rejected",
    );
    kb_write(
        &dir,
        &[
            "retract",
            "ghost",
            "--evidence",
            &e[5],
            "--reason",
            "moved on",
        ],
        7,
        "retracted",
    );
    let times = commit_times(&dir);
    let rejected = kb_json(&dir, &["rejected"]);
    let listed: Vec<(Value, Value, Value)> = rejected
        .iter()
        .map(|r| (r["key"].clone(), r["value"].clone(), r["version"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (json!("door"), json!("open"), json!(3)),
            (json!("door"), json!("jammed"), json!(6)),
            (json!("ghost"), json!("boo"), json!(4)),
        ]
    );
    assert_eq!(rejected[0]["time_ns"], times[&3]);
    assert_eq!(rejected[0]["refutations"], 1);
    assert!((conf(&rejected[0]) - 0.09).abs() < 1e-3, "{}", rejected[0]);
    assert_eq!(rejected[2]["confidence"], 0.0);
    let human = ok(&kb(&dir, &["rejected"]));
    assert_eq!(human.lines().count(), 3, "{human}");
    assert!(
        human.contains("door = \"open\"  rejected by v3 at "),
        "{human}"
    );
    // The current facts still say what a refutation did to them.
    let door = kb_get(&dir, "door", &[]);
    assert_eq!(door["value"], "ajar");
    let refuted: Vec<&Value> = door["refuted"]
        .as_array()
        .unwrap_or_else(|| panic!("a refuted list: {door}"))
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(refuted, [&json!("open"), &json!("jammed")]);
}

#[test]
fn kb_revert_appends_a_commit_restoring_a_version_and_rebuild_restores_the_view() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e: Vec<String> = ev.iter().map(u64::to_string).collect();
    kb_write(
        &dir,
        &["put", "a", "1", "--confidence", "0.6", "--evidence", &e[0]],
        1,
        "created",
    );
    kb_write(
        &dir,
        &["put", "b", r#""x""#, "--evidence", &e[1]],
        2,
        "created",
    );
    kb_write(
        &dir,
        &["put", "a", "2", "--confidence", "0.9", "--evidence", &e[2]],
        3,
        "superseded",
    );
    kb_write(
        &dir,
        &["put", "c", "true", "--evidence", &e[3]],
        4,
        "created",
    );
    kb_write(
        &dir,
        &["retract", "b", "--evidence", &e[4], "--reason", "gone"],
        5,
        "retracted",
    );
    let before_a = history(&dir, "a");
    let before_b = history(&dir, "b");

    let seq6 = kb_write(
        &dir,
        &[
            "revert",
            "2",
            "--evidence",
            &e[5],
            "--reason",
            "back to v2",
            "--author",
            "ops",
        ],
        6,
        "reverted",
    );
    // Version 2's state, each restored fact changed by version 6.
    let with_version = |f: &Value, v: u64| {
        let mut f = f.clone();
        f["version"] = json!(v);
        f
    };
    let a = kb_get(&dir, "a", &[]);
    assert_eq!(a, with_version(&before_a[&1], 6));
    assert_eq!(a["value"], 1);
    assert_eq!(a["confidence"], 0.6);
    assert_eq!(a["created"], 1);
    assert_eq!(a["provenance"], json!([ev[0]]));
    let b = kb_get(&dir, "b", &[]);
    assert_eq!(b, with_version(&before_b[&2], 6));
    kb_get_not_found(&dir, "c", &[]);
    // Nothing erased: every version stays in the history, the revert is a new one.
    let after_a = history(&dir, "a");
    assert_eq!(after_a.keys().copied().collect::<Vec<_>>(), [1, 3, 6]);
    assert_eq!(after_a[&1], before_a[&1]);
    assert_eq!(after_a[&3], before_a[&3]);
    assert_eq!(
        history(&dir, "b").keys().copied().collect::<Vec<_>>(),
        [2, 5, 6]
    );
    let c = history(&dir, "c");
    assert_eq!(c.keys().copied().collect::<Vec<_>>(), [4, 6]);
    assert_eq!(c[&6], Value::Null);
    assert_eq!(kb_get(&dir, "a", &["--as-of", "3"])["value"], 2);
    let log = kb_json(&dir, &["log"]);
    assert_eq!(log.len(), 6);
    let r = &log[5];
    assert_eq!(r["seq"], seq6);
    assert_eq!(r["op"], "revert");
    assert_eq!(r["target"], 2);
    assert_eq!(r["outcome"], "reverted");
    assert_eq!(r["author"], "ops");
    assert_eq!(r["message"], "back to v2");
    assert_eq!(r["provenance"], json!([ev[5]]));
    let changed: Vec<&str> = r["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["a", "b", "c"]);
    assert!(ok(&kb(&dir, &["log"])).contains("ops: revert to v2 -> reverted"));
    assert_eq!(
        kb_json(&dir, &["diff", "5", "6"]),
        [
            json!({"key": "a", "before": before_a[&3], "after": a}),
            json!({"key": "b", "before": null, "after": b}),
            json!({"key": "c", "before": history(&dir, "c")[&4], "after": null}),
        ]
    );

    // Rebuild: the reads do not change.
    let snapshot = |dir: &Path| {
        (
            kb_log_text(dir),
            ok(&kb(dir, &["history", "a", "--json"])),
            ok(&kb(dir, &["get", "b", "--json"])),
        )
    };
    let before = snapshot(&dir);
    assert_eq!(
        kb_json(&dir, &["rebuild"]),
        [json!({"rebuilt": true, "commits": 6})]
    );
    assert_eq!(snapshot(&dir), before);
    // Losing the view loses nothing: rebuild it from the log.
    let view = dir.join("kb");
    assert!(view.is_dir(), "the writer's view lives in DIR/kb");
    fs::remove_dir_all(&view).unwrap();
    assert_eq!(
        ok(&kb(&dir, &["rebuild"])),
        "rebuilt the knowledge base from the log: 6 commits\n"
    );
    assert!(view.is_dir());
    assert_eq!(snapshot(&dir), before);
    // And a writer whose view is gone catches up from the log before it commits: the
    // restored fact holds e0, so a claim citing it again is a duplicate, one citing
    // another observation counts.
    fs::remove_dir_all(&view).unwrap();
    kb_write(
        &dir,
        &["put", "a", "1", "--confidence", "0.5", "--evidence", &e[0]],
        7,
        "duplicate",
    );
    kb_write(
        &dir,
        &["put", "a", "1", "--confidence", "0.5", "--evidence", &e[1]],
        8,
        "corroborated",
    );
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}

#[test]
fn kb_refuses_bad_input_naming_the_field_and_commits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e0 = ev[0].to_string();
    kb_write(&dir, &["put", "k", "1", "--evidence", &e0], 1, "created");
    let committed = kb_log_text(&dir);

    let cases: &[(&[&str], i32, &[&str])] = &[
        (&["put", "k", "2"], 2, &["--evidence"]),
        (&["put", "k", "2", "--evidence", "x"], 2, &["--evidence"]),
        (
            &["put", "k", "2", "--evidence", "99999"],
            1,
            &["evidence", "99999", "nothing was committed"],
        ),
        (
            &["put", "k", "2", "--evidence", &e0, "--confidence", "1.5"],
            1,
            &["confidence", "1.5"],
        ),
        (
            &["put", "k", "2", "--evidence", &e0, "--confidence=-0.1"],
            1,
            &["confidence", "-0.1"],
        ),
        (
            &["put", "k", "2", "--evidence", &e0, "--confidence", "NaN"],
            1,
            &["confidence"],
        ),
        (&["put", "", "2", "--evidence", &e0], 1, &["key", "empty"]),
        (
            &["put", "a\u{1}b", "2", "--evidence", &e0],
            1,
            &["key", "control character"],
        ),
        (
            &["put", "a\tb", "2", "--evidence", &e0],
            1,
            &["key", "control character"],
        ),
        (
            &["put", "k", "two", "--evidence", &e0],
            1,
            &["VALUE_JSON", "not valid JSON"],
        ),
        (
            &["put", "k", "2", "--evidence", &e0, "--conditions", "[1]"],
            1,
            &["--conditions", "JSON object"],
        ),
        (
            &[
                "put",
                "k",
                "2",
                "--evidence",
                &e0,
                "--conditions",
                "{\"a\":",
            ],
            1,
            &["--conditions", "not valid JSON"],
        ),
        (
            &["refute", "k", "1", "--evidence", "99999", "--reason", "r"],
            1,
            &["evidence", "99999"],
        ),
        (&["refute", "k", "1", "--evidence", &e0], 2, &["--reason"]),
        (
            &[
                "retract",
                "nothing.here",
                "--evidence",
                &e0,
                "--reason",
                "r",
            ],
            1,
            &["not found"],
        ),
        (
            &["revert", "99", "--evidence", &e0, "--reason", "r"],
            1,
            &["version", "99"],
        ),
        (
            &["revert", "0", "--evidence", &e0, "--reason", "r"],
            1,
            &["version", "0"],
        ),
        (&["revert", "1", "--reason", "r"], 2, &["--evidence"]),
        (&["get", "nothing.here"], 1, &["not found"]),
        (&["get", "k", "--context", "[1]"], 1, &["--context"]),
        (&["get", "k", "--as-of", "1", "--at", "5"], 2, &["--at"]),
        (&["get", "k", "--as-of", "99"], 1, &["version", "99"]),
        (
            &["matching", "--context", "level"],
            1,
            &["--context", "not valid JSON"],
        ),
    ];
    for (args, code, names) in cases {
        let out = kb(&dir, args);
        let err = fails(&out);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        for n in *names {
            assert!(err.contains(n), "{args:?}: the error names {n}: {err}");
        }
        assert_eq!(kb_log_text(&dir), committed, "{args:?} committed something");
    }
    // The knowledge base is as it was.
    let k = kb_get(&dir, "k", &[]);
    assert_eq!(k["value"], 1);
    assert_eq!(k["version"], 1);
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}

#[test]
fn kb_writes_need_the_writer_lock_and_reads_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let ev = evidence_log(&dir);
    let e0 = ev[0].to_string();
    kb_write(
        &dir,
        &["put", "k", r#""v""#, "--evidence", &e0],
        1,
        "created",
    );
    let fact = kb_get(&dir, "k", &[]);
    let committed = kb_log_text(&dir);

    let mut writer = Recording::start(&dir, &[]);
    writer.send(&[r#"{"kind":"a.b"}"#.to_owned()]);
    let synced = writer.sync();
    let pid = writer.child.id();
    let err = fails(&kb(&dir, &["put", "k", r#""w""#, "--evidence", &e0]));
    assert!(err.contains("locked"), "{err}");
    assert!(
        err.contains(&format!("pid {pid}")),
        "names the holder: {err}"
    );
    let err = fails(&kb(
        &dir,
        &["revert", "1", "--evidence", &e0, "--reason", "r"],
    ));
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    let err = fails(&kb(&dir, &["rebuild"]));
    assert!(err.contains(&format!("pid {pid}")), "{err}");
    // Reads take no lock, and see what the writer made durable.
    assert_eq!(kb_get(&dir, "k", &[]), fact);
    assert_eq!(kb_log_text(&dir), committed);
    assert_eq!(kb_json(&dir, &["history", "k"]).len(), 1);
    let evidence = replay_json(&dir, &["--kind", "a.b"]);
    assert_eq!(evidence.len(), 1);
    let cited = seq(&evidence[0]);
    assert!(cited <= synced);
    let (_, status, stderr) = writer.finish();
    assert!(status.success(), "{stderr}");

    // The writer gone, the write goes through, and may cite what it recorded.
    kb_write(
        &dir,
        &[
            "put",
            "k",
            r#""w""#,
            "--confidence",
            "0.9",
            "--evidence",
            &synced.to_string(),
        ],
        2,
        "superseded",
    );
}

// ---------------------------------------------------------------------------------
// 3. `blackbox demo`.

fn demo(dir: &Path, seed: &str) -> String {
    ok(&blackbox(&["demo", "--dir", s(dir), "--seed", seed]))
}

fn incident(dir: &Path) -> Value {
    let incidents = replay_json(dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 1, "one incident: {incidents:?}");
    incidents.into_iter().next().unwrap()
}

#[test]
fn demo_records_an_incident_and_reviews_it_from_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&dir, "7");
    ok(&blackbox(&["verify", "--dir", s(&dir)]));

    let inc = incident(&dir);
    assert_eq!(inc["kind"], "failure.gripper_slip");
    assert_eq!(inc["trigger_kind"], "failure.gripper_slip");
    let trigger_seq = inc["trigger_seq"].as_u64().unwrap();
    let trigger_ts = inc["trigger_ts_ns"].as_u64().unwrap();
    let from = inc["preroll_start_ns"].as_u64().unwrap();
    let to = inc["postroll_end_ns"].as_u64().unwrap();
    // The demo's policy: 2 s of pre-roll, 1 s of post-roll.
    assert_eq!(trigger_ts - from, 2_000_000_000);
    assert_eq!(to - trigger_ts, 1_000_000_000);
    assert_eq!(
        blackbox_replay::parse_time(inc["preroll_start"].as_str().unwrap()).unwrap(),
        from
    );

    // The review: the incident, the timeline, the tier table, the kb changes, verify.
    assert!(
        out.contains(&format!(
            "INCIDENT  failure.gripper_slip at {}",
            blackbox_replay::format_time(trigger_ts)
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "trigger seq {trigger_seq}, marker seq {}",
            inc["seq"]
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "({} events recovered from the ring)",
            inc["preroll_events"]
        )),
        "{out}"
    );
    assert!(out.contains("Timeline around the incident"), "{out}");
    let trigger_line = out
        .lines()
        .find(|l| l.ends_with("<- trigger"))
        .unwrap_or_else(|| panic!("the trigger in the timeline: {out}"));
    assert!(
        trigger_line.contains(&format!("seq {trigger_seq:>6}")),
        "{trigger_line}"
    );
    assert!(
        trigger_line.contains("failure.gripper_slip"),
        "{trigger_line}"
    );
    assert!(out.contains("What each tier kept and dropped"), "{out}");
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let kinds = stats["kinds"].as_object().unwrap();
    assert!(kinds.len() >= 10, "{kinds:?}");
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("What each tier kept and dropped"))
        .take_while(|l| !l.starts_with("Knowledge-base changes"))
        .collect();
    for (kind, c) in kinds {
        let row = table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(kind.as_str()))
            .unwrap_or_else(|| panic!("a row for {kind}: {out}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        let expected: Vec<String> = [
            "seen",
            "kept",
            "sampled_out",
            "summarized",
            "dropped",
            "preroll",
        ]
        .iter()
        .map(|f| c[*f].to_string())
        .collect();
        assert_eq!(cells[1..], expected, "{row}");
    }
    // Every tier at work.
    assert!(kinds["debug.tick"]["dropped"].as_u64().unwrap() > 0);
    assert!(kinds["sensor.imu"]["summarized"].as_u64().unwrap() > 0);
    assert!(kinds["trajectory.arm"]["sampled_out"].as_u64().unwrap() > 0);
    assert_eq!(
        kinds["sensor.imu"]["preroll"].as_u64().unwrap()
            + kinds["trajectory.arm"]["preroll"].as_u64().unwrap(),
        inc["preroll_events"].as_u64().unwrap()
    );
    assert!(out.contains("Knowledge-base changes"), "{out}");
    let log = kb_json(&dir, &["log"]);
    assert!(log.len() >= 4, "{log:?}");
    for c in &log {
        let v = c["version"].as_u64().unwrap();
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("  v{v} ")))
            .unwrap_or_else(|| panic!("v{v} in the review: {out}"));
        assert!(row.contains(c["outcome"].as_str().unwrap()), "{row}");
    }
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]));
    assert!(
        out.contains(&format!("digest {}", digest.trim())),
        "the review's digest is the log's: {out}"
    );
    assert!(out.contains("Verify: intact"), "{out}");
    assert!(
        out.contains("fact grip.force_n = 12.5"),
        "believed at the trigger: {out}"
    );

    // What the robot learnt: the slip rejected the grip force, a firmer one replaced it.
    let grip = kb_json(&dir, &["history", "grip.force_n"]);
    let outcomes: Vec<&str> = grip
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes[0], "created");
    assert_eq!(
        outcomes[outcomes.len() - 2..],
        ["rejected", "superseded"],
        "{outcomes:?}"
    );
    let rejected = &grip[grip.len() - 2]["fact"];
    assert_eq!(rejected["value"], 12.5);
    assert_eq!(rejected["status"], "rejected");
    let replaced = &grip[grip.len() - 1]["fact"];
    assert_eq!(replaced["value"], 15.0);
    assert_eq!(replaced["confidence"], 0.6);
    assert_eq!(replaced["status"], "hypothesis");
    let human = ok(&kb(&dir, &["history", "grip.force_n"]));
    let lines: Vec<&str> = human.lines().collect();
    assert!(lines[lines.len() - 2].contains("rejected"), "{human}");
    assert!(lines[lines.len() - 1].contains("superseded"), "{human}");
    // The refutation cites the slip's observation, recorded after the trigger.
    let refutation = log.iter().find(|c| c["op"] == "refute").unwrap();
    assert!(refutation["provenance"][0].as_u64().unwrap() > trigger_seq);

    // Around the incident: the pre-roll, the trigger, then the post-roll.
    let window = replay_json(
        &dir,
        &[
            "--type",
            "event",
            "--since",
            &from.to_string(),
            "--until",
            &to.to_string(),
        ],
    );
    let at = window
        .iter()
        .position(|r| seq(r) == trigger_seq)
        .unwrap_or_else(|| panic!("the trigger is in the window"));
    let trigger = &window[at];
    assert_eq!(trigger["kind"], "failure.gripper_slip");
    assert_eq!(trigger["tier"], "full");
    let tiers = |rs: &[Value], tier: &str| rs.iter().filter(|r| r["tier"] == tier).count();
    let (before, after) = window.split_at(at);
    assert_eq!(
        tiers(before, "preroll") as u64,
        inc["preroll_events"].as_u64().unwrap()
    );
    assert_eq!(tiers(after, "preroll"), 0, "no pre-roll after the trigger");
    assert_eq!(
        tiers(before, "postroll"),
        0,
        "no post-roll before the trigger"
    );
    assert!(tiers(after, "postroll") > 0);
    for r in before.iter().filter(|r| r["tier"] == "preroll") {
        let t = r["recorded_ns"].as_u64().unwrap();
        assert!((from..=trigger_ts).contains(&t), "{r}");
    }
    for r in after.iter().filter(|r| r["tier"] == "postroll") {
        let t = ts(r);
        assert!(t >= trigger_ts && t <= to, "{r}");
    }
    // The pre-roll comes back in order, written right before the trigger.
    let pre: Vec<u64> = before
        .iter()
        .filter(|r| r["tier"] == "preroll")
        .map(|r| r["recorded_ns"].as_u64().unwrap())
        .collect();
    assert!(pre.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        before.last().unwrap()["tier"],
        "preroll",
        "written right before the trigger"
    );
}

/// The events of a demo log with their recorded times relative to the run's start (its
/// first event's): what a seed determines.
fn demo_events(dir: &Path) -> (u64, Vec<Value>) {
    let all = replay_json(dir, &["--type", "event"]);
    let recorded = |r: &Value| r["recorded_ns"].as_u64().unwrap();
    let t0 = recorded(&all[0]);
    let events = all
        .iter()
        .map(|r| {
            json!([
                r["kind"],
                r["tier"],
                r["source"],
                r["payload"],
                r["values"],
                r["weight"],
                recorded(r) - t0
            ])
        })
        .collect();
    (t0, events)
}

#[test]
fn demo_with_the_same_seed_repeats_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    fs::create_dir(&two).unwrap(); // an empty directory is welcome
    let out1 = demo(&one, "42");
    let out2 = demo(&two, "42");
    let moment = |out: &str| {
        let l = out.lines().find(|l| l.starts_with("INCIDENT")).unwrap();
        l[l.find('(').unwrap()..l.find(')').unwrap()].to_owned()
    };
    assert_eq!(moment(&out1), moment(&out2));
    assert!(moment(&out1).ends_with("s into the run"), "{out1}");
    // The same events, recorded at the same times relative to the run's start.
    let ((t1, ev1), (t2, ev2)) = (demo_events(&one), demo_events(&two));
    assert_eq!(ev1.len(), ev2.len());
    assert!(ev1 == ev2, "the same seed gives the same events");
    // The same incident at the same moment.
    let (i1, i2) = (incident(&one), incident(&two));
    for f in ["kind", "preroll_events"] {
        assert_eq!(i1[f], i2[f], "{f}");
    }
    for f in ["trigger_ts_ns", "preroll_start_ns", "postroll_end_ns"] {
        assert_eq!(
            i1[f].as_u64().unwrap() - t1,
            i2[f].as_u64().unwrap() - t2,
            "{f}"
        );
    }
    // The same knowledge-base decisions (seqs, evidence seqs and times aside).
    let decisions = |dir: &Path| -> Vec<Value> {
        kb_json(dir, &["log"])
            .into_iter()
            .map(|mut c| {
                let o = c.as_object_mut().unwrap();
                for f in ["seq", "time", "time_ns", "provenance"] {
                    o.remove(f);
                }
                for ch in o["changes"].as_array_mut().unwrap() {
                    if let Some(f) = ch["fact"].as_object_mut() {
                        f.remove("provenance");
                    }
                }
                c
            })
            .collect()
    };
    let d1 = decisions(&one);
    assert!(d1.len() >= 6, "{d1:?}");
    assert_eq!(d1, decisions(&two));
}

/// `--seed` repeats a run down to the records: the same trigger seq, the same commits
/// at the same seqs, and every event stamped with the time it was recorded (the demo's
/// barriers let the writer catch up with the simulated clock, and dictionary records
/// fall right before the first event that needs them).
#[test]
fn demo_with_the_same_seed_repeats_the_seqs_and_timestamps() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    demo(&one, "42");
    demo(&two, "42");
    for dir in [&one, &two] {
        // On a simulated clock nothing delays a write: an event is stamped with the
        // time it was recorded, except the pre-roll, written when the trigger comes.
        for r in replay_json(dir, &["--type", "event"]) {
            if r["tier"] != "preroll" {
                assert_eq!(r["ts_ns"], r["recorded_ns"], "{r}");
            }
        }
    }
    assert_eq!(incident(&one)["trigger_seq"], incident(&two)["trigger_seq"]);
    let strip = |dir: &Path| -> Vec<Value> {
        kb_json(dir, &["log"])
            .into_iter()
            .map(|mut c| {
                let o = c.as_object_mut().unwrap();
                o.remove("time");
                o.remove("time_ns");
                c
            })
            .collect()
    };
    assert_eq!(strip(&one), strip(&two));
}

#[test]
fn demo_refuses_a_directory_that_holds_anything_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("busy");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "mine").unwrap();
    let out = blackbox(&["demo", "--dir", s(&dir), "--seed", "1"]);
    let err = fails(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("is not empty"), "{err}");
    assert!(
        err.contains("new or empty directory"),
        "says what to do: {err}"
    );
    assert!(out.stdout.is_empty(), "nothing recorded");
    let entries: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["notes.txt"]);
    assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "mine");

    // An existing log is no place for a demo either.
    let log = tmp.path().join("log");
    ok(&record(&log, "{\"kind\":\"a.b\"}\n", &[]));
    let digest = ok(&blackbox(&["digest", "--dir", s(&log)]));
    let err = fails(&blackbox(&["demo", "--dir", s(&log)]));
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(ok(&blackbox(&["digest", "--dir", s(&log)])), digest);
}

/// The demo simulates 21 s in less time than that: its log once ran into the future, so
/// `replay --since -1m` right after it found nothing of its incident. Its records now
/// end by the time it finishes, and a relative window finds the incident.
#[test]
fn the_demos_log_ends_by_the_time_it_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "3"]));
    let finished = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let last = u128::from(stats["last_ts_ns"].as_u64().unwrap());
    assert!(
        last <= finished,
        "last record at {last}, finished at {finished}"
    );
    let incidents = replay_json(&dir, &["--since", "-10m", "--type", "incident"]);
    assert_eq!(incidents.len(), 1, "{incidents:?}");
}
