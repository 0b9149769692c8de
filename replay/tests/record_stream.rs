//! `blackbox record`'s live stream (DESIGN §8): events sent with `"ack": true` answered
//! with their seq, and knowledge-base operations (`kb.put`, `kb.refute`, `kb.retract`,
//! `kb.revert`) committed while the recorder runs, in log order, and answered.
//!
//! Guards a past gap: a host feeding `record` could not learn an event's seq, nor write
//! a fact while it ran; facts came only from `kb put` afterwards, stamped with the time
//! that command ran. The oracles are the log as `replay` shows it and the replies and
//! versions computed here by hand.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;

use common::{Recording, blackbox, json_lines, ok, record, replay_json, s};
use serde_json::{Value, json};

fn ts_ns(r: &Value) -> u64 {
    r["ts_ns"].as_u64().unwrap()
}

fn record_at(records: &[Value], seq: u64) -> &Value {
    records
        .iter()
        .find(|r| r["seq"] == seq)
        .unwrap_or_else(|| panic!("no record at seq {seq}"))
}

#[test]
fn an_acked_event_is_answered_with_its_seq_and_kept_whatever_its_tier() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let policy = tmp.path().join("policy.toml");
    fs::write(&policy, "[[rules]]\nmatch = \"noise.*\"\ntier = \"drop\"\n").unwrap();
    let input = r#"{"kind":"noise.hum","values":{"db":40}}
{"kind":"noise.hum","values":{"db":41},"ack":true}
{"kind":"action.grasp","ack":true,"payload":{"object":"cup"}}
{"kind":"action.lift","ack":false}
"#;
    let out = ok(&record(&dir, input, &["--policy", s(&policy)]));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3, "two acks and the summary: {out}");
    let records = replay_json(&dir, &[]);
    for (reply, line, kind) in [(&lines[0], 2, "noise.hum"), (&lines[1], 3, "action.grasp")] {
        assert_eq!(reply.as_object().unwrap().len(), 2, "{reply}");
        assert_eq!(reply["line"], line);
        let r = record_at(&records, reply["seq"].as_u64().unwrap());
        assert_eq!(
            (r["type"].as_str(), r["kind"].as_str()),
            (Some("event"), Some(kind))
        );
    }
    // The acked event of the drop tier is the only one of its kind in the log.
    let hums: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "noise.hum")
        .collect();
    assert_eq!(hums.len(), 1, "{hums:?}");
    assert_eq!(hums[0]["values"]["db"], 41.0);
    let summary = &lines[2];
    assert_eq!(summary["events"], 4);
    assert_eq!(
        (
            &summary["kinds"]["noise.hum"]["kept"],
            &summary["kinds"]["noise.hum"]["dropped"]
        ),
        (&json!(1), &json!(1))
    );
}

#[test]
fn kb_operations_in_the_stream_are_committed_in_log_order_and_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut rec = Recording::start(&dir, &[]);
    // Line 1: an observation, acknowledged.
    rec.send(&[r#"{"kind":"observation.door","ack":true,"values":{"open":1}}"#.to_owned()]);
    let seen = rec.reply();
    assert_eq!(seen["line"], 1);
    let seen_seq = seen["seq"].as_u64().unwrap();
    // Line 2: a fact citing line 1; line 3: an event after it.
    rec.send(&[
        r#"{"op":"kb.put","key":"door","value":"open","confidence":0.7,"conditions":{"floor":2},"evidence":["line:1"],"reason":"seen open","author":"planner"}"#.to_owned(),
    ]);
    let put = rec.reply();
    rec.send(&[r#"{"kind":"decision.enter","ack":true}"#.to_owned()]);
    let decided = rec.reply();
    // Lines 5-8: a refutation citing a seq, a retraction, a revert to version 1.
    rec.send(&[
        r#"{"kind":"observation.door","ack":true,"values":{"open":0}}"#.to_owned(),
        format!(
            r#"{{"op":"kb.refute","key":"door","value":"open","evidence":["line:4",{seen_seq}],"message":"seen shut"}}"#
        ),
        r#"{"op":"kb.retract","key":"door","evidence":["line:4"],"message":"door removed"}"#
            .to_owned(),
        r#"{"op":"kb.revert","version":1,"evidence":["line:4"],"message":"undo"}"#.to_owned(),
    ]);
    let shut = rec.reply();
    let refuted = rec.reply();
    let retracted = rec.reply();
    let reverted = rec.reply();
    let (rest, status, stderr) = rec.finish();
    assert!(status.success(), "{stderr}");
    let summary: Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(
        (summary["ops"].as_u64(), summary["refused"].as_u64()),
        (Some(4), Some(0))
    );

    // Versions 1 to 4, one per op, in the order sent.
    for (reply, line, version, outcome) in [
        (&put, 2, 1, "created"),
        (&refuted, 5, 2, "rejected"),
        (&retracted, 6, 3, "retracted"),
        (&reverted, 7, 4, "reverted"),
    ] {
        assert_eq!(reply["line"], line, "{reply}");
        assert_eq!(reply["version"], version, "{reply}");
        assert_eq!(reply["outcome"], outcome, "{reply}");
    }
    assert_eq!(decided["line"], 3);
    assert_eq!(shut["line"], 4);

    // Each commit is the log record the reply names, in its place between the events,
    // citing the seqs its lines referred to.
    let records = replay_json(&dir, &[]);
    let seq = |r: &Value| r["seq"].as_u64().unwrap();
    let shut_seq = seq(&shut);
    for (reply, evidence) in [
        (&put, json!([seen_seq])),
        (&refuted, json!([shut_seq, seen_seq])),
        (&retracted, json!([shut_seq])),
        (&reverted, json!([shut_seq])),
    ] {
        let r = record_at(&records, seq(reply));
        assert_eq!(r["type"], "kb", "{r}");
        assert_eq!(r["commit"]["version"], reply["version"], "{r}");
        let mut cited: Vec<u64> = r["commit"]["provenance"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        cited.sort_unstable();
        let mut want: Vec<u64> = serde_json::from_value(evidence).unwrap();
        want.sort_unstable();
        assert_eq!(cited, want, "{r}");
    }
    assert_eq!(
        record_at(&records, seq(&put))["commit"]["author"],
        "planner"
    );
    assert!(seen_seq < seq(&put) && seq(&put) < seq(&decided));
    assert!(seq(&decided) < shut_seq && shut_seq < seq(&refuted));
    assert!(seq(&refuted) < seq(&retracted) && seq(&retracted) < seq(&reverted));

    // `kb get --at` the decision's time finds the fact; at the observation's time, none.
    let get_at = |t: u64| {
        blackbox(&[
            "kb",
            "get",
            "door",
            "--dir",
            s(&dir),
            "--at",
            &t.to_string(),
            "--json",
        ])
    };
    let at_decision: Value =
        serde_json::from_str(&ok(&get_at(ts_ns(record_at(&records, seq(&decided)))))).unwrap();
    assert_eq!(at_decision["value"], "open");
    assert_eq!(at_decision["conditions"], json!({"floor": 2}));
    assert_eq!(at_decision["confidence"], 0.7);
    let before = get_at(ts_ns(record_at(&records, seen_seq)));
    assert!(!before.status.success());
    assert!(String::from_utf8_lossy(&before.stderr).contains("not found"));
}

#[test]
fn a_refused_kb_operation_is_answered_with_its_error_and_recording_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input = r#"{"kind":"observation.a","ack":true}
{"kind":"observation.b"}
{"op":"kb.put","key":"","value":1,"evidence":["line:1"]}
{"op":"kb.put","key":"k","value":1,"confidence":1.5,"evidence":["line:1"]}
{"op":"kb.put","key":"k","value":1,"evidence":[999]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:2"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:7"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:99"]}
{"op":"kb.put","key":"k","value":1}
{"op":"kb.revert","version":5,"evidence":["line:1"]}
{"op":"kb.retract","key":"nothing","evidence":["line:1"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:1"],"confidance":0.9}
{"op":"kb.put","value":1,"evidence":["line:1"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:1"],"message":"a","reason":"b"}
{"op":"kb.put","key":"k","value":1,"evidence":"line:1"}
{"op":"kb.put","key":"k","key":"j","value":1,"evidence":["line:1"]}
{"op":"kb.forget","key":"k"}
{"op":"kb.put","key":"k","value":1,"evidence":["line:1"]}
{"kind":"observation.c"}
"#;
    let out = record(&dir, input, &[]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&stdout);
    // Lines 3-17 refused, each with the words that say why; line 18 committed.
    let why = [
        (3, "is empty"),
        (4, "confidence: 1.5"),
        (5, "seq 999 is not in the log"),
        (6, "line 2 has no seq"),
        (7, "not an earlier line"),
        (8, "not an earlier line"),
        (9, "at least one log record"),
        (
            10,
            "version: 5 is not a knowledge-base version (there is no commit yet)",
        ),
        (11, "\"nothing\" has no fact"),
        (12, "unknown field \"confidance\""),
        (13, "needs a \"key\""),
        (14, "not both"),
        (15, "\"evidence\" must be an array"),
        (16, "the key \"key\" appears twice"),
        (17, "unknown op \"kb.forget\""),
    ];
    assert_eq!(lines.len(), 1 + why.len() + 2, "{stdout}");
    assert_eq!(lines[0], json!({"line": 1, "seq": lines[0]["seq"]}));
    for (reply, (line, words)) in lines[1..].iter().zip(why) {
        assert_eq!(reply["line"], line, "{reply}");
        let error = reply["error"].as_str().unwrap_or_else(|| panic!("{reply}"));
        assert!(error.contains(words), "line {line}: {error}");
        assert!(
            stderr.contains(&format!("blackbox: line {line} refused: {error}")),
            "{stderr}"
        );
    }
    let committed = &lines[why.len() + 1];
    assert_eq!(
        (
            &committed["line"],
            &committed["version"],
            &committed["outcome"]
        ),
        (&json!(18), &json!(1), &json!("created")),
        "a refused op commits nothing: the first to pass is version 1"
    );
    let summary = &lines[why.len() + 2];
    assert_eq!(summary["refused"], why.len(), "{summary}");
    assert_eq!(summary["events"], 3, "{summary}");
    let records = replay_json(&dir, &["--type", "kb"]);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        replay_json(&dir, &["--type", "event"]).last().unwrap()["kind"],
        "observation.c",
        "recording went on after the refusals"
    );
}

/// An acked event that is refused is answered with its error before the run stops, so a
/// host waiting for the reply is not left waiting; with --skip-invalid the run goes on.
#[test]
fn a_refused_acked_event_is_answered_with_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input = "{\"kind\":\"Bad Kind\",\"ack\":true}\n{\"kind\":\"ok.event\",\"ack\":true}\n";
    let out = record(&dir, input, &[]);
    assert!(!out.status.success());
    let lines = json_lines(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["line"], 1);
    assert!(
        lines[0]["error"].as_str().unwrap().contains("Bad Kind"),
        "{lines:?}"
    );

    let dir2 = tmp.path().join("log2");
    let lines = json_lines(&ok(&record(&dir2, input, &["--skip-invalid"])));
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["line"], 1);
    assert!(lines[0]["error"].is_string());
    assert_eq!(lines[1]["line"], 2);
    assert!(lines[1]["seq"].is_u64());
    assert_eq!(lines[2]["skipped"], 1);
}

/// Guards a past bug: a `kb.put` whose commit record was larger than the log's record
/// limit stopped the whole run. It is refused, its size and the limit named, and the
/// recording goes on.
#[test]
fn a_kb_commit_larger_than_a_log_record_is_refused_and_recording_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    // The default record limit is 16 MiB: a value of 17 MiB cannot fit a commit.
    let big = "x".repeat(17 << 20);
    let input = format!(
        "{{\"kind\":\"observation.a\",\"ack\":true}}\n\
         {{\"op\":\"kb.put\",\"key\":\"big\",\"value\":\"{big}\",\"evidence\":[\"line:1\"]}}\n\
         {{\"op\":\"kb.put\",\"key\":\"k\",\"value\":1,\"evidence\":[\"line:1\"]}}\n\
         {{\"kind\":\"observation.c\"}}\n"
    );
    let out = record(&dir, &input, &[]);
    let stdout = ok(&out);
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(lines[1]["line"], 2);
    let error = lines[1]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", lines[1]));
    assert!(
        error.contains("record limit of 16777216 bytes") && error.contains("nothing was committed"),
        "{error}"
    );
    let size: u64 = error
        .split(" bytes")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the size is named: {error}"));
    assert!(size > 17 << 20, "{error}");
    assert_eq!(
        (
            &lines[2]["line"],
            &lines[2]["version"],
            &lines[2]["outcome"]
        ),
        (&json!(3), &json!(1), &json!("created")),
        "{stdout}"
    );
    assert_eq!(lines[3]["refused"], 1, "{stdout}");
    assert_eq!(lines[3]["events"], 2, "{stdout}");
    assert_eq!(replay_json(&dir, &["--type", "kb"]).len(), 1);
}

/// Guards a past bug: a number beyond the range of a 64-bit float (`1e999`) was refused
/// as "not valid JSON (at column N)", naming neither the number nor its field, and the
/// host waiting for the line's reply got none. Each is refused naming its field, and
/// answered.
#[test]
fn a_number_out_of_range_is_refused_naming_its_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input = r#"{"kind":"observation.a","ack":true}
{"kind":"observation.b","values":{"force":1e999},"ack":true}
{"op":"kb.put","key":"k","value":1,"confidence":1e999,"evidence":["line:1"]}
{"op":"kb.put","key":"k","value":{"mass":[1,-1e999]},"evidence":["line:1"]}
{"op":"set","key":"k","value":1E+400}
{"kind":"observation.c","payload":{"x":{"y":2e308}}}
{"op":"kb.put","key":"k","value":1,"evidence":["line:1"]}
"#;
    let out = record(&dir, input, &["--skip-invalid"]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&stdout);
    // The field, and the column where the number ends.
    let why = [
        (2, "values.force", 47),
        (3, "confidence", 53),
        (4, "value.mass[1]", 50),
        (5, "value", 36),
        (6, "payload.x.y", 49),
    ];
    assert_eq!(lines.len(), 1 + why.len() + 2, "{stdout}");
    for (reply, (line, field, column)) in lines[1..].iter().zip(why) {
        assert_eq!(reply["line"], line, "{reply}");
        let error = reply["error"].as_str().unwrap_or_else(|| panic!("{reply}"));
        assert!(
            error.starts_with(&format!(
                "{field}: the number ending at column {column} is out of range"
            )),
            "line {line}: {error}"
        );
        assert!(stderr.contains(&format!("line {line} ")), "{stderr}");
    }
    assert_eq!(lines[why.len() + 1]["version"], 1, "{stdout}");
    let summary = &lines[why.len() + 2];
    assert_eq!(
        (&summary["events"], &summary["refused"], &summary["skipped"]),
        (&json!(1), &json!(2), &json!(3)),
        "{summary}"
    );
}

/// Guards a past bug: with `--skip-invalid`, a line that was not UTF-8, or not JSON, got
/// no reply even when it asked for one, and a host waiting for it waited for ever. A
/// line that asks for a reply is answered, read through a lossy decoding when it is not
/// UTF-8; once any line of the run asked for a reply, every refused line is answered,
/// since what a garbled line asked for cannot be told.
#[test]
fn refused_lines_are_answered_once_replies_are_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"kind\":\"observation.\xff\",\"ack\":true}\n");
    input.extend_from_slice(b"{\"kind\":\"observation.a\",\"ack\":true}\n");
    input.extend_from_slice(b"this is not json\n");
    input.extend_from_slice(b"\xfe\xff\n");
    input.extend_from_slice(b"{\"kind\":\"observation.b\"}\n");
    input.extend_from_slice(
        b"{\"op\":\"kb.put\",\"key\":\"k\",\"value\":1,\"evidence\":[\"line:2\"]}\n",
    );
    let out = common::record_bytes(&dir, &input, &["--skip-invalid"]);
    let stdout = ok(&out);
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 6, "{stdout}");
    for (reply, (line, words)) in [lines[0].clone(), lines[2].clone(), lines[3].clone()]
        .iter()
        .zip([(1, "not UTF-8"), (3, "not valid JSON"), (4, "not UTF-8")])
    {
        assert_eq!(reply["line"], line, "{reply}");
        let error = reply["error"].as_str().unwrap_or_else(|| panic!("{reply}"));
        assert!(error.contains(words), "line {line}: {error}");
    }
    assert_eq!(lines[1]["line"], 2, "{stdout}");
    assert!(lines[1]["seq"].is_u64(), "{stdout}");
    assert_eq!(
        (&lines[4]["line"], &lines[4]["version"]),
        (&json!(6), &json!(1))
    );
    assert_eq!(lines[5]["skipped"], 3, "{stdout}");

    // A run where no line asks for a reply gets none: only the summary.
    let quiet = tmp.path().join("quiet");
    let lines = json_lines(&ok(&common::record_bytes(
        &quiet,
        b"this is not json\n\xfe\n{\"kind\":\"observation.b\"}\n",
        &["--skip-invalid"],
    )));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["skipped"], 2);
}

/// Guards a past bug: `"line:+1"` was read as line 1, since Rust's integer parsing takes
/// a leading '+'. A line reference is `line:` and plain decimal digits.
#[test]
fn a_line_reference_is_plain_decimal_digits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input = r#"{"kind":"observation.a","ack":true}
{"op":"kb.put","key":"k","value":1,"evidence":["line:+1"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line: 1"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:"]}
{"op":"kb.put","key":"k","value":1,"evidence":["line:1"]}
"#;
    let stdout = ok(&record(&dir, input, &[]));
    let lines = json_lines(&stdout);
    assert_eq!(lines.len(), 6, "{stdout}");
    for (reply, (line, reference)) in
        lines[1..4]
            .iter()
            .zip([(2, "line:+1"), (3, "line: 1"), (4, "line:")])
    {
        assert_eq!(reply["line"], line, "{reply}");
        let error = reply["error"].as_str().unwrap_or_else(|| panic!("{reply}"));
        assert!(
            error.contains(&format!("evidence \"{reference}\" is neither a seq")),
            "line {line}: {error}"
        );
    }
    assert_eq!(
        (&lines[4]["line"], &lines[4]["version"]),
        (&json!(5), &json!(1))
    );
}
