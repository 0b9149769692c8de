//! MCAP out and in, read by the readers users have: `export --format mcap` read back
//! by the Python `mcap` reader and the Rust `mcap` crate, every message, channel and
//! schema against what `blackbox replay --json` says the log holds; an MCAP file
//! written by the Python `mcap` writer imported with `import --mcap` and round-tripped;
//! a damaged file refused with its offset, what was recorded before kept.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox::{
    Conditions, Config, Durability, Event, IncidentPolicy, ManualClock, Policy, Provenance,
    Recorder, Tier,
};
use common::{blackbox, fails, ok, replay_json, s};
use serde_json::{Value, json};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_750_000_000 * SEC;

/// A log with mixed JSON payloads (object, number, string, array), raw payloads, a
/// summarized kind, an incident and knowledge-base commits, on a manual clock.
fn mixed_log(dir: &Path) {
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: SEC / 2,
            postroll_ns: SEC / 4,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let clock = ManualClock::new(T0);
    let r = Recorder::open(
        dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(SEC)
            .durability(Durability::Buffered),
    )
    .unwrap();
    let payloads = [
        r#"{"object":"cup","force_n":12.5}"#,
        "42",
        r#""text""#,
        "[1,2,3]",
    ];
    for tick in 0..300u64 {
        let t = tick * SEC / 100;
        if t.is_multiple_of(SEC) {
            r.sync().unwrap();
        }
        clock.set_ns(T0 + t);
        let ax = (tick as f64 * 0.1).sin();
        r.record(
            &Event::new("sensor.imu")
                .source("wrist")
                .values(&[("ax", ax), ("az", -9.8)]),
        )
        .unwrap();
        if tick % 10 == 0 {
            let p = payloads[(tick / 10) as usize % payloads.len()];
            r.record(
                &Event::new("action.grasp")
                    .source("arm")
                    .json(p)
                    .values(&[("force_n", tick as f64)])
                    .event_time_ns(T0 + t - 7),
            )
            .unwrap();
        }
        if tick % 25 == 0 {
            let bytes = [0u8, 255, tick.to_le_bytes()[0], b'"', b'\n', 1];
            r.record(&Event::new("camera.frame").raw(&bytes)).unwrap();
        }
        if tick == 200 {
            let seq = r
                .record_evidence(&Event::new("failure.slip").json(r#"{"force_n":12.5}"#))
                .unwrap();
            let kb = r.kb().unwrap();
            kb.assert(
                "grip.force_n",
                json!(15.0),
                0.7,
                &Conditions::new(),
                Provenance::new([seq]).author("test"),
            )
            .unwrap();
            kb.refute("grip.force_n", &json!(12.5), Provenance::new([seq]))
                .unwrap();
        }
    }
    clock.set_ns(T0 + 3 * SEC);
    r.close().unwrap();
}

/// The topic `export --format mcap` puts a record of `replay --json` on, if any.
fn topic_of(record: &Value) -> Option<String> {
    let kind = record["kind"].as_str();
    match record["type"].as_str()? {
        "event" => Some(format!("/{}", kind?)),
        "summary" => Some(format!("/{}/summary", kind?)),
        "incident" => Some("/blackbox/incidents".to_owned()),
        "kb" => Some("/blackbox/kb".to_owned()),
        "accounting" => Some("/blackbox/accounting".to_owned()),
        _ => None,
    }
}

/// A raw payload's bytes: from the hex `replay --json` prints.
fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Standard base64 decoding (the test's own, not the exporter's encoder).
fn unbase64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|&c| c != b'=').collect();
        let mut n = 0u32;
        for (i, &c) in data.iter().enumerate() {
            n |= value(c) << (18 - 6 * i);
        }
        for i in 0..data.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)).to_le_bytes()[0]);
        }
    }
    out
}

/// What each topic should hold, from `replay --json`: (log_time, publish_time, the
/// record) in log order.
fn expected_topics(records: &[Value]) -> BTreeMap<String, Vec<(u64, u64, Value)>> {
    let mut by_topic: BTreeMap<String, Vec<(u64, u64, Value)>> = BTreeMap::new();
    for r in records {
        let Some(topic) = topic_of(r) else { continue };
        let written = r["written_ns"].as_u64().unwrap();
        let log_time = match r["type"].as_str().unwrap() {
            "event" => r["recorded_ns"].as_u64().unwrap(),
            "summary" => r["window_start_ns"].as_u64().unwrap(),
            "incident" => r["trigger_ts_ns"].as_u64().unwrap(),
            _ => written,
        };
        by_topic
            .entry(topic)
            .or_default()
            .push((log_time, written, r.clone()));
    }
    by_topic
}

/// An exported event message says what `replay --json` says of its record.
fn assert_event_message(message: &Value, record: &Value) {
    for field in [
        "seq",
        "kind",
        "tier",
        "source",
        "hash",
        "event_time_ns",
        "values",
    ] {
        assert_eq!(message[field], record[field], "{field} of {record}");
    }
    match record["encoding"].as_str().unwrap() {
        "raw" => {
            let bytes = unbase64(message["payload_base64"].as_str().unwrap());
            assert_eq!(
                bytes,
                unhex(record["payload"].as_str().unwrap()),
                "{record}"
            );
        }
        _ => assert_eq!(message["payload"], record["payload"], "{record}"),
    }
}

#[test]
fn an_mcap_export_reads_back_in_python_and_rust_as_the_log_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    mixed_log(&dir);
    let records = replay_json(&dir, &[]);
    let expected = expected_topics(&records);
    // The oracle holds every kind of channel the export writes.
    for topic in [
        "/action.grasp",
        "/camera.frame",
        "/failure.slip",
        "/sensor.imu",
        "/sensor.imu/summary",
        "/blackbox/incidents",
        "/blackbox/kb",
        "/blackbox/accounting",
    ] {
        assert!(expected.contains_key(topic), "the log has no {topic}");
    }
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]));
    for compression in ["zstd", "lz4", "none"] {
        let out = tmp.path().join(format!("{compression}.mcap"));
        ok(&blackbox(&[
            "export",
            "--dir",
            s(&dir),
            "--format",
            "mcap",
            "--compression",
            compression,
            "--include-unweighted",
            "--out",
            s(&out),
        ]));
        // The Python reader.
        let py: Value =
            serde_json::from_str(&common::python::run("mcap_read.py", &[&out])).unwrap();
        let total: usize = expected.values().map(Vec::len).sum();
        assert_eq!(py["statistics"]["message_count"], json!(total));
        let compressions = if compression == "none" {
            json!([""])
        } else {
            json!([compression])
        };
        assert_eq!(py["compressions"], compressions);
        let channels = py["channels"].as_object().unwrap();
        assert_eq!(
            channels.keys().cloned().collect::<Vec<_>>(),
            expected.keys().cloned().collect::<Vec<_>>()
        );
        for (topic, want) in &expected {
            let c = &channels[topic];
            assert_eq!(c["encoding"], "json", "{topic}");
            assert_eq!(c["schema_encoding"], "jsonschema", "{topic}");
            assert_eq!(c["schema_is_json"], true, "{topic}");
            assert_eq!(
                py["statistics"]["channel_message_counts"][topic],
                json!(want.len())
            );
            let got = py["messages"][topic].as_array().unwrap();
            assert_eq!(got.len(), want.len(), "{topic}");
            for (g, (log_time, publish_time, record)) in got.iter().zip(want) {
                assert_eq!(g[0], json!(log_time), "{topic} {record}");
                assert_eq!(g[1], json!(publish_time), "{topic} {record}");
                let message = &g[2];
                match record["type"].as_str().unwrap() {
                    "event" => assert_event_message(message, record),
                    "summary" => {
                        assert_eq!(message["count"], record["count"]);
                        assert_eq!(message["values"], record["values"]);
                        assert_eq!(message["window_end_ns"], record["window_end_ns"]);
                    }
                    "incident" => {
                        assert_eq!(message["trigger_seq"], record["trigger_seq"]);
                        assert_eq!(message["postroll_end_ns"], record["postroll_end_ns"]);
                    }
                    "kb" => assert_eq!(message["commit"], record["commit"]),
                    "accounting" => assert_eq!(message["kinds"], record["kinds"]),
                    other => panic!("{other} on {topic}"),
                }
                assert_eq!(message["seq"], record["seq"]);
            }
        }
        let meta = &py["metadata"].as_array().unwrap()[0];
        assert_eq!(meta["name"], "blackbox");
        assert_eq!(meta["metadata"]["log_digest"].as_str(), Some(digest.trim()));
        let query: Value =
            serde_json::from_str(meta["metadata"]["query"].as_str().unwrap()).unwrap();
        assert_eq!(query["include_unweighted"], true);

        // The Rust crate: every message in file order, its channel and schema.
        let bytes = std::fs::read(&out).unwrap();
        let mut got: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for m in mcap::MessageStream::new(&bytes).unwrap() {
            let m = m.unwrap();
            let schema = m.channel.schema.as_ref().unwrap();
            assert_eq!(schema.encoding, "jsonschema");
            assert!(schema.name.starts_with("blackbox."), "{}", schema.name);
            got.entry(m.channel.topic.clone())
                .or_default()
                .push((m.log_time, m.publish_time));
        }
        let want: BTreeMap<String, Vec<(u64, u64)>> = expected
            .iter()
            .map(|(t, v)| (t.clone(), v.iter().map(|(l, p, _)| (*l, *p)).collect()))
            .collect();
        assert_eq!(got, want);
        let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
        assert_eq!(summary.stats.unwrap().message_count, total as u64);
        assert!(!summary.chunk_indexes.is_empty());
        assert_eq!(summary.metadata_indexes.len(), 1);

        // The manifest, and the check of the file against it and against the log.
        let manifest: Value = serde_json::from_slice(
            &std::fs::read(tmp.path().join(format!("{compression}.mcap.manifest.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["format"], "mcap");
        assert_eq!(manifest["file"]["messages"], json!(total));
        let events = records.iter().filter(|r| r["type"] == "event").count();
        assert_eq!(manifest["file"]["rows"], json!(events));
        ok(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));
    }
    // A changed byte is seen.
    let out = tmp.path().join("zstd.mcap");
    let mut bytes = std::fs::read(&out).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&out, &bytes).unwrap();
    let err = fails(&blackbox(&["export", "--check", s(&out)]));
    assert!(err.contains("not the file its manifest describes"), "{err}");
}

/// The rows `mcap_write.py` printed: what it wrote, in file order.
fn write_python_mcap(path: &Path, compression: &str) -> Vec<Value> {
    let out = common::python::run("mcap_write.py", &[&path, &T0.to_string(), &compression]);
    common::json_lines(&out)
}

/// The kind a topic imports as (GUIDE: the leading `/` dropped, `/` read as `.`).
fn kind_of(topic: &str) -> String {
    topic[1..].replace('/', ".")
}

/// `replay --json`'s events say what the Python writer wrote: kind, log time, publish
/// time, payload and source.
fn assert_imported(events: &[Value], written: &[Value]) {
    assert_eq!(events.len(), written.len());
    for (e, w) in events.iter().zip(written) {
        assert_eq!(
            e["kind"].as_str(),
            Some(kind_of(w["topic"].as_str().unwrap()).as_str())
        );
        assert_eq!(e["ts_ns"], w["log_time"], "{e}");
        assert_eq!(e["event_time_ns"], w["publish_time"], "{e}");
        assert_eq!(e["tier"], "full");
        let data = w["data"].as_str().unwrap();
        if w["encoding"] == "json" {
            let payload: Value = serde_json::from_str(data).unwrap();
            assert_eq!(e["payload"], payload, "{e}");
            assert_eq!(e["source"], w["schema"]);
            // The top-level numbers are the values.
            for (name, v) in payload.as_object().unwrap() {
                if v.is_number() {
                    assert_eq!(e["values"][name].as_f64(), v.as_f64(), "{e}");
                } else {
                    assert!(e["values"].get(name).is_none(), "{e}");
                }
            }
        } else {
            assert_eq!(e["encoding"], "raw");
            assert_eq!(e["payload"].as_str(), Some(data));
            let source = format!(
                "{}:{}",
                w["encoding"].as_str().unwrap(),
                w["schema"].as_str().unwrap()
            );
            assert_eq!(e["source"].as_str(), Some(source.as_str()));
        }
    }
}

#[test]
fn an_mcap_file_from_the_python_writer_imports_and_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    for compression in ["zstd", "lz4", "none"] {
        let file = tmp.path().join(format!("in-{compression}.mcap"));
        let written = write_python_mcap(&file, compression);
        let dir = tmp.path().join(format!("log-{compression}"));
        let said = ok(&blackbox(&[
            "import",
            "--mcap",
            s(&file),
            "--dir",
            s(&dir),
            "--json",
        ]));
        let said: Value = serde_json::from_str(&said).unwrap();
        assert_eq!(said["messages"], json!(written.len()));
        let events = replay_json(&dir, &["--type", "event"]);
        assert_imported(&events, &written);

        // Back out to MCAP: every message at its log time, with its payload.
        let out = tmp.path().join(format!("out-{compression}.mcap"));
        ok(&blackbox(&[
            "export",
            "--dir",
            s(&dir),
            "--format",
            "mcap",
            "--out",
            s(&out),
        ]));
        let py: Value =
            serde_json::from_str(&common::python::run("mcap_read.py", &[&out])).unwrap();
        let mut by_topic: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for w in &written {
            let topic = format!("/{}", kind_of(w["topic"].as_str().unwrap()));
            by_topic.entry(topic).or_default().push(w);
        }
        for (topic, ws) in &by_topic {
            let got = py["messages"][topic].as_array().unwrap();
            assert_eq!(got.len(), ws.len(), "{topic}");
            for (g, w) in got.iter().zip(ws) {
                assert_eq!(g[0], w["log_time"], "{topic}");
                let data = w["data"].as_str().unwrap();
                if w["encoding"] == "json" {
                    assert_eq!(
                        g[2]["payload"],
                        serde_json::from_str::<Value>(data).unwrap()
                    );
                } else {
                    let bytes = unbase64(g[2]["payload_base64"].as_str().unwrap());
                    assert_eq!(bytes, unhex(data), "{topic}");
                }
            }
        }
    }
}

#[test]
fn a_damaged_mcap_file_stops_the_import_at_its_offset_and_keeps_what_was_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("in.mcap");
    let written = write_python_mcap(&file, "zstd");
    let bytes = std::fs::read(&file).unwrap();

    // Truncated: the messages of the chunks read whole are kept, in order.
    let cut = tmp.path().join("cut.mcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let dir = tmp.path().join("cut-log");
    let err = fails(&blackbox(&["import", "--mcap", s(&cut), "--dir", s(&dir)]));
    let at = format!("{} is not a readable MCAP file (at byte ", cut.display());
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("truncated"), "{err}");
    let events = replay_json(&dir, &["--type", "event"]);
    assert!(
        !events.is_empty() && events.len() < written.len(),
        "{}",
        events.len()
    );
    assert!(
        err.contains(&format!(
            "the {} messages recorded before it are kept",
            events.len()
        )),
        "{err}"
    );
    assert_imported(&events, &written[..events.len()]);
    ok(&blackbox(&["verify", "--dir", s(&dir)]));

    // A byte changed inside the last chunk's records (uncompressed, so that the CRC is
    // what finds it): none of that chunk's messages is recorded.
    let plain = tmp.path().join("plain.mcap");
    assert_eq!(write_python_mcap(&plain, "none"), written);
    let bytes = std::fs::read(&plain).unwrap();
    let last_chunk = find_last(&bytes, 0x06);
    let mut bad = bytes.clone();
    bad[last_chunk + 60] ^= 0x01;
    let crc = tmp.path().join("crc.mcap");
    std::fs::write(&crc, &bad).unwrap();
    let dir = tmp.path().join("crc-log");
    let err = fails(&blackbox(&["import", "--mcap", s(&crc), "--dir", s(&dir)]));
    assert!(err.contains("CRC does not match"), "{err}");
    let events = replay_json(&dir, &["--type", "event"]);
    assert!(events.len() < written.len());
    assert_imported(&events, &written[..events.len()]);

    // Not an MCAP file at all.
    let text = tmp.path().join("notes.mcap");
    std::fs::write(&text, "these are not the bytes of an MCAP file\n").unwrap();
    let err = fails(&blackbox(&[
        "import",
        "--mcap",
        s(&text),
        "--dir",
        s(&tmp.path().join("x")),
    ]));
    assert!(
        err.contains("does not start with the MCAP magic bytes"),
        "{err}"
    );
    assert!(err.contains("at byte 8"), "{err}");
    assert!(
        !tmp.path().join("x").exists(),
        "a refused file created a log"
    );
}

/// The offset of the last chunk record (opcode 0x06): found by walking the records
/// after the magic (opcode, u64 length, body), not by searching for a byte.
fn find_last(bytes: &[u8], opcode: u8) -> usize {
    let mut at = 8;
    let mut last = None;
    while at + 9 <= bytes.len() {
        let op = bytes[at];
        let len = u64::from_le_bytes(bytes[at + 1..at + 9].try_into().unwrap());
        if op == opcode {
            last = Some(at);
        }
        if op == 0x02 {
            break; // the footer
        }
        at += 9 + usize::try_from(len).unwrap();
    }
    last.unwrap()
}
