//! The GUIDE's Python example (`docs/examples/agent.py`), run as a user would run it
//! against the built `blackbox`: an agent loop that writes facts live through `record`'s
//! stream, each citing an acknowledged observation, and `kb get --at` each decision's
//! time finds the fact the agent had learned by then.
//!
//! Guards a past gap: facts came only from `kb put` after the recorder had exited,
//! stamped with the time that command ran, so `kb get --at` a decision's time said "not
//! found". The oracle is what the script itself printed (the values it put, the seqs it
//! was given) and values computed here by hand; the log's timestamps come from `replay`.
//!
//! Needs `python3` (standard library only) on the PATH.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{blackbox, ok, replay_json, s};
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn ts_ns(r: &Value) -> u64 {
    r["ts_ns"].as_u64().unwrap()
}

/// `kb get KEY --at T --json`: the fact, or `None` when the command says "not found".
fn kb_get_at(dir: &Path, key: &str, at_ns: u64) -> Option<Value> {
    let out = blackbox(&[
        "kb",
        "get",
        key,
        "--dir",
        s(dir),
        "--at",
        &at_ns.to_string(),
        "--json",
    ]);
    if out.status.success() {
        Some(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not found"), "{stderr}");
        None
    }
}

#[test]
fn the_guides_python_agent_writes_facts_live_and_kb_get_at_each_decision_finds_them() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let out = Command::new("python3")
        .arg(workspace().join("docs/examples/agent.py"))
        .arg(&dir)
        .env("BLACKBOX", env!("CARGO_BIN_EXE_blackbox"))
        .output()
        .expect("run python3 (the test needs it on the PATH)");
    let stdout = ok(&out);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, decisions) = lines.split_last().unwrap();
    assert_eq!(summary["refused"], 0, "{summary}");
    assert_eq!(summary["skipped"], 0, "{summary}");

    // What the script decided, by hand: three objects, each weighed, learned, lifted with
    // a grip force of m * 9.8 * 4 rounded to 0.01 N.
    let expected = [
        ("cup", 0.31, 12.15),
        ("plate", 0.52, 20.38),
        ("bowl", 0.27, 10.58),
    ];
    assert_eq!(decisions.len(), expected.len(), "{stdout}");
    let records = replay_json(&dir, &[]);
    let by_seq: BTreeMap<u64, &Value> = records
        .iter()
        .map(|r| (r["seq"].as_u64().unwrap(), r))
        .collect();
    for (i, (d, (name, mass_kg, grip_n))) in decisions.iter().zip(expected).enumerate() {
        let key = format!("{name}.mass_kg");
        assert_eq!(d["key"], key);
        assert_eq!(d["value"], json!(mass_kg));
        assert_eq!(d["version"], i + 1, "versions count the commits: {d}");
        assert_eq!(d["outcome"], "created");
        // The acknowledged seqs are those of the events the script sent.
        let observed = by_seq[&d["observed_seq"].as_u64().unwrap()];
        assert_eq!(observed["kind"], "observation.load");
        assert_eq!(observed["payload"], json!({"object": name}));
        let decided = by_seq[&d["decided_seq"].as_u64().unwrap()];
        assert_eq!(decided["kind"], "decision.lift");
        assert_eq!(
            decided["payload"],
            json!({"object": name, "kb_version": i + 1})
        );

        // When it observed, the agent did not know the fact yet; when it decided, it
        // did, with the observation as its evidence.
        assert_eq!(kb_get_at(&dir, &key, ts_ns(observed)), None, "{key}");
        let fact = kb_get_at(&dir, &key, ts_ns(decided))
            .unwrap_or_else(|| panic!("{key} not found at its decision's time"));
        assert_eq!(fact["value"], json!(mass_kg), "{fact}");
        assert_eq!(fact["status"], "confirmed", "{fact}");
        assert_eq!(fact["provenance"], json!([observed["seq"]]), "{fact}");

        // And the working memory at the decision is the one the agent had then.
        let state = json_of(&blackbox(&[
            "state",
            "--dir",
            s(&dir),
            "--at",
            &ts_ns(decided).to_string(),
            "--json",
        ]));
        assert_eq!(
            state["working"],
            json!({"goal": {"task": "lift", "object": name}, "grip_force_n": grip_n}),
            "{state}"
        );
    }

    // The bowl, re-weighed, was refuted after its decision: rejected now, held then.
    let now = kb_get_at(&dir, "bowl.mass_kg", u64::MAX).unwrap();
    assert_eq!(now["status"], "rejected", "{now}");
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

/// The GUIDE shows the example file verbatim, so that what it shows is what this test
/// runs.
#[test]
fn the_guide_quotes_the_python_example_verbatim() {
    let guide = std::fs::read_to_string(workspace().join("docs/GUIDE.md")).unwrap();
    let agent = std::fs::read_to_string(workspace().join("docs/examples/agent.py")).unwrap();
    assert!(
        guide.contains(&format!("```python\n{agent}```\n")),
        "docs/GUIDE.md must quote docs/examples/agent.py whole, in a ```python block"
    );
}
