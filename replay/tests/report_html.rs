//! `blackbox report`, looked at as a person would: the demo's incident report and the
//! log's overview rendered by a headless Chromium (`--dump-dom`, `--screenshot`), with no
//! console message, every section present, and the demo's numbers as the command's other
//! readers give them (`replay --json`, `state --json`, `stats --json`, `digest`), the
//! window's accounting folded here by hand from the accounting records.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::browser;
use common::{blackbox, fails, ok, replay_json, s};
use serde_json::Value;

/// The counters of the accounting table, in its columns' order.
const COUNTERS: [&str; 8] = [
    "seen",
    "kept",
    "sampled_out",
    "summarized",
    "dropped",
    "overflow",
    "preroll",
    "lost",
];

/// The cells of the table row that follows `marker` in `dom`, as text.
fn row_cells(dom: &str, marker: &str) -> Vec<String> {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no row {marker} in the page"));
    let row = &dom[start..start + dom[start..].find("</tr>").unwrap()];
    row.split("<td")
        .skip(1)
        .map(|cell| {
            let inner = &cell[cell.find('>').unwrap() + 1..];
            // Strip the tags inside the cell.
            let mut text = String::new();
            let mut in_tag = false;
            for ch in inner.chars() {
                match ch {
                    '<' => in_tag = true,
                    '>' => in_tag = false,
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text.trim().to_owned()
        })
        .collect()
}

/// The section of the page with this id.
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let marker = format!("<section id=\"{id}\"");
    let start = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("no section {id} in the page"));
    let end = dom[start..].find("</section>").unwrap();
    &dom[start..start + end]
}

/// Running totals per kind folded from accounting records (a snapshot replaces them,
/// another record updates the kinds it lists).
fn fold(totals: &mut BTreeMap<String, Value>, record: &Value) {
    if record["snapshot"] == true {
        totals.clear();
    }
    for (kind, c) in record["kinds"].as_object().unwrap() {
        totals.insert(kind.clone(), c.clone());
    }
}

#[test]
fn the_demo_incident_report_renders_with_the_demo_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let demo = ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "7"]));
    // The demo ends by writing its report and saying where.
    let written = tmp.path().join("flight-report.html");
    assert!(
        demo.contains(&format!("Report: {}", written.display())),
        "{demo}"
    );
    assert!(written.is_file());

    let page = tmp.path().join("incident.html");
    let said = ok(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--incident",
        "1",
        "--out",
        s(&page),
    ]));
    assert!(said.starts_with("wrote "), "{said}");
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: no script, nothing fetched.
    assert!(!html.contains("<script"), "the page holds a script");
    for fetch in ["src=", "http://", "https://", "@import", "url("] {
        assert!(
            !html.contains(fetch),
            "the page may fetch something: {fetch}"
        );
    }

    let (dom, console) = browser::dump_dom(&page);
    assert!(console.is_empty(), "console messages: {console:?}");

    // The incident, its window as the report draws it: a quarter of its span around it.
    let incidents = replay_json(&dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let inc = &incidents[0];
    let n = |v: &Value| v.as_u64().unwrap();
    let (pre, trigger, post) = (
        n(&inc["preroll_start_ns"]),
        n(&inc["trigger_ts_ns"]),
        n(&inc["postroll_end_ns"]),
    );
    let margin = (post - pre) / 4;
    let (since, until) = (pre - margin, post + margin);
    let range = [
        "--since".to_owned(),
        since.to_string(),
        "--until".to_owned(),
        until.to_string(),
    ];
    let range: Vec<&str> = range.iter().map(String::as_str).collect();
    assert!(dom.contains(&format!("seq {}", inc["trigger_seq"])));

    // Timeline: a lane per kind with events in the window, and the knowledge base's.
    let mut event_args = range.clone();
    event_args.extend(["--type", "event"]);
    let events = replay_json(&dir, &event_args);
    let kinds: BTreeSet<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.len() >= 8, "{kinds:?}");
    let timeline = section(&dom, "timeline");
    for kind in &kinds {
        assert!(
            timeline.contains(&format!("data-kind=\"{kind}\"")),
            "no lane for {kind}"
        );
    }
    assert_eq!(
        timeline.matches("class=\"lane\" data-kind=").count(),
        kinds.len(),
        "one lane per kind with events in the window"
    );
    assert!(timeline.contains("class=\"trigger\""));
    assert!(
        timeline.contains("class=\"preroll-band\"") && timeline.contains("class=\"postroll-band\"")
    );

    // Values: a plot per kind and value name carried in the window.
    let plots = section(&dom, "plots");
    let mut named: BTreeSet<(String, String)> = BTreeSet::new();
    for e in &events {
        for name in e["values"].as_object().unwrap().keys() {
            named.insert((e["kind"].as_str().unwrap().to_owned(), name.clone()));
        }
    }
    assert!(named.len() >= 4, "{named:?}");
    for (kind, name) in &named {
        assert!(
            plots.contains(&format!("<code>{kind}</code> · {name}")),
            "no plot of {kind} {name}"
        );
    }
    assert!(plots.matches("<svg class=\"plot\"").count() >= named.len());

    // Knowledge base: each commit in the window has its row; the facts at the trigger
    // are the state's.
    let mut kb_args = range.clone();
    kb_args.extend(["--type", "kb"]);
    let commits = replay_json(&dir, &kb_args);
    assert!(!commits.is_empty());
    let kb = section(&dom, "kb");
    for c in &commits {
        assert!(kb.contains(&format!("id=\"commit-{}\"", c["seq"])), "{c}");
    }
    let state: Value = serde_json::from_str(&ok(&blackbox(&[
        "state",
        "--dir",
        s(&dir),
        "--at",
        &trigger.to_string(),
        "--json",
    ])))
    .unwrap();
    let facts = state["kb"].as_object().unwrap();
    assert!(!facts.is_empty());
    let mut contested = 0;
    for (key, fact) in facts {
        let cells = row_cells(kb, &format!("data-key=\"{key}\""));
        assert_eq!(cells[1], fact["value"].to_string(), "{key}");
        for seq in fact["provenance"].as_array().unwrap() {
            assert!(kb.contains(&format!("id=\"rec-{seq}\"")), "cited seq {seq}");
        }
        // A contested fact shows what contests it, with its evidence.
        let rivals = fact["rivals"].as_array().unwrap();
        assert_eq!(cells[5].is_empty(), rivals.is_empty(), "{key}: {cells:?}");
        for rival in rivals {
            assert!(
                cells[5].contains(&rival["value"].to_string()),
                "{key}: {cells:?}"
            );
            for seq in rival["provenance"].as_array().unwrap() {
                assert!(
                    kb.contains(&format!("id=\"rec-{seq}\"")),
                    "rival's seq {seq}"
                );
            }
        }
        contested += usize::from(!rivals.is_empty());
    }
    assert!(
        contested > 0,
        "the demo's facts at the trigger include a contested one"
    );
    // Every cited record's row says what the log holds at its seq (those before the
    // window are read one by one, by seq).
    let cited: Vec<&str> = kb
        .split("<tr id=\"rec-")
        .skip(1)
        .filter_map(|row| row.split('"').next())
        .collect();
    assert!(!cited.is_empty());
    let mut before_window = 0;
    for seq in cited {
        let record = replay_json(
            &dir,
            &["--from-seq", seq, "--to-seq", seq, "--type", "event"],
        );
        assert_eq!(record.len(), 1, "seq {seq}: {record:?}");
        let cells = row_cells(kb, &format!("id=\"rec-{seq}\""));
        assert_eq!(
            cells[2],
            record[0]["kind"].as_str().unwrap(),
            "seq {seq}: {cells:?}"
        );
        before_window += usize::from(record[0]["ts_ns"].as_u64().unwrap() < since);
    }
    assert!(before_window > 0, "no record cited before the window");
    // Working memory at the trigger.
    let working = section(&dom, "working");
    for (key, value) in state["working"].as_object().unwrap() {
        let cells = row_cells(working, &format!("<code>{key}</code>"));
        assert_eq!(cells[0], value.to_string(), "{key}");
    }

    // Accounting: between the last accounting record before the window and the first
    // at or after its end, folded here from the records.
    let records = replay_json(&dir, &["--type", "accounting", "--log-order"]);
    let mut start = BTreeMap::new();
    let mut end = BTreeMap::new();
    let mut found_end = false;
    for r in &records {
        let ts = n(&r["ts_ns"]);
        if ts < since {
            fold(&mut start, r);
        }
        fold(&mut end, r);
        if ts >= until {
            found_end = true;
            break;
        }
    }
    assert!(
        found_end,
        "the demo writes accounting records after its incident"
    );
    let accounting = section(&dom, "accounting");
    let mut rows = 0;
    for (kind, e) in &end {
        let diff: Vec<u64> = COUNTERS
            .iter()
            .map(|c| n(&e[*c]) - start.get(kind).map_or(0, |s: &Value| n(&s[*c])))
            .collect();
        if diff.iter().all(|&d| d == 0) {
            continue;
        }
        rows += 1;
        let cells = row_cells(accounting, &format!("<tr data-kind=\"{kind}\""));
        let shown: Vec<u64> = cells[1..].iter().map(|c| c.parse().unwrap()).collect();
        assert_eq!(shown, diff, "{kind}");
    }
    assert!(rows >= 8);
    // Not in the log as events: what was sampled out, summarized, dropped or lost, but
    // for what the pre-roll ring wrote in full anyway.
    let total = |c: &str| -> u64 {
        end.iter()
            .map(|(kind, e)| n(&e[c]) - start.get(kind).map_or(0, |s: &Value| n(&s[c])))
            .sum()
    };
    let missing = total("sampled_out")
        + total("summarized")
        + total("dropped")
        + total("overflow")
        + total("lost")
        - total("preroll");
    assert!(total("preroll") > 0);
    assert!(
        accounting.contains(&format!(
            "{missing} of {} events seen are not in the log as events.",
            total("seen")
        )),
        "{accounting}"
    );

    // Integrity: the digest the command gives.
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]));
    let integrity = section(&dom, "integrity");
    assert!(integrity.contains(digest.trim()), "{}", digest.trim());
    assert!(integrity.contains("intact"));
    assert!(integrity.contains(&format!("--incident 1 --out {}", page.display())));

    // And as a picture.
    let png = tmp.path().join("incident.png");
    let console = browser::screenshot(&page, &png, 1280, 2400);
    assert!(console.is_empty(), "console messages: {console:?}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 50_000,
        "a nearly blank screenshot: {} bytes",
        bytes.len()
    );
}

#[test]
fn the_overview_lists_every_kind_incident_and_the_disk_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "3"]));
    let page = tmp.path().join("overview.html");
    ok(&blackbox(&["report", "--dir", s(&dir), "--out", s(&page)]));
    let (dom, console) = browser::dump_dom(&page);
    assert!(console.is_empty(), "console messages: {console:?}");
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let rates = section(&dom, "rates");
    let events = replay_json(&dir, &["--type", "event"]);
    let mut per_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &events {
        *per_kind.entry(e["kind"].as_str().unwrap()).or_default() += 1;
    }
    for (kind, count) in &per_kind {
        assert!(rates.contains(&format!("data-kind=\"{kind}\"")), "{kind}");
        let cells = row_cells(rates, &format!("<tr><td><code>{kind}</code></td>"));
        assert_eq!(cells[1], count.to_string(), "{kind}");
    }
    let incidents = section(&dom, "incidents");
    assert!(incidents.contains("href=\"#incident-1\""));
    assert!(incidents.contains("id=\"incident-1\""));
    let disk = section(&dom, "disk");
    assert!(disk.contains(&format!(
        "{} bytes in {} segment",
        stats["bytes"], stats["segments"]
    )));
    let accounting = section(&dom, "accounting");
    for (kind, c) in stats["kinds"].as_object().unwrap() {
        let cells = row_cells(accounting, &format!("<tr data-kind=\"{kind}\""));
        assert_eq!(cells[1], c["seen"].to_string(), "{kind}");
    }
}

#[test]
fn a_console_error_is_seen_by_the_check() {
    // The check that a page logs nothing can fail: a page with a failing script.
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>x</p><script>undefined_fn();</script></body></html>",
    )
    .unwrap();
    let (_, console) = browser::dump_dom(&page);
    assert!(
        console.iter().any(|l| l.contains("undefined_fn")),
        "{console:?}"
    );
}

#[test]
fn bad_requests_are_refused_with_one_sentence_and_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "5"]));
    let out = tmp.path().join("r.html");
    let err = fails(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--incident",
        "4",
        "--out",
        s(&out),
    ]));
    assert!(
        err.contains("--incident 4") && err.contains("holds 1 incident"),
        "{err}"
    );
    let err = fails(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--window",
        "5s",
        "--out",
        s(&out),
    ]));
    assert!(err.contains("--window"), "{err}");
    let inside = dir.join("r.html");
    let err = fails(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--out",
        s(&inside),
    ]));
    assert!(err.contains("refusing to write"), "{err}");
    let err = fails(&blackbox(&[
        "report",
        "--dir",
        s(&tmp.path().join("nope")),
        "--out",
        s(&out),
    ]));
    assert!(err.contains("does not exist"), "{err}");
    // A window outside the log's span: an hour before its first record, after its last.
    let records = replay_json(&dir, &["--log-order"]);
    let ts = |r: &Value| r["ts_ns"].as_u64().unwrap();
    let hour = 3_600_000_000_000u64;
    let (first, last) = (ts(&records[0]), ts(&records[records.len() - 1]));
    for (t, side) in [(first - hour, "before"), (last + hour, "after")] {
        let err = fails(&blackbox(&[
            "report",
            "--dir",
            s(&dir),
            "--around",
            &t.to_string(),
            "--out",
            s(&out),
        ]));
        assert!(
            err.contains(&format!("lies {side}")) && err.contains("give --around a time between"),
            "{err}"
        );
    }
    assert!(!out.exists() && !inside.exists());
    let err = fails(&blackbox(&["report", "--dir", s(&dir), "--out", "-"]));
    assert!(err.contains("--out FILE.html"), "{err}");

    // The demo refuses to write its report over a file beside the log.
    let taken = tmp.path().join("again-report.html");
    std::fs::write(&taken, "precious").unwrap();
    let err = fails(&blackbox(&["demo", "--dir", s(&tmp.path().join("again"))]));
    assert!(err.contains("again-report.html exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "precious");
    assert!(!tmp.path().join("again").exists());
}

#[test]
fn verify_checks_the_whole_log_and_a_damaged_log_gets_no_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "9"]));
    let verified: Value =
        serde_json::from_str(&ok(&blackbox(&["verify", "--dir", s(&dir), "--json"]))).unwrap();
    let page = tmp.path().join("r.html");
    ok(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--incident",
        "1",
        "--verify",
        "--out",
        s(&page),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    let integrity = section(&html, "integrity");
    assert!(
        integrity.contains(&format!(
            "{} records in {} segment",
            verified["records"], verified["segments"]
        )),
        "{integrity}"
    );
    assert!(integrity.contains("--verify --out"), "{integrity}");
    ok(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--incident",
        "1",
        "--out",
        s(&page),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(section(&html, "integrity").contains("intact where read"));

    // A byte changed in the middle of the log's one segment.
    let segment = common::segment_files(&dir).pop().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&segment, &bytes).unwrap();
    let name = segment.file_name().unwrap().to_string_lossy().into_owned();
    for extra in [&[][..], &["--verify"][..]] {
        let fresh = tmp.path().join("after-damage.html");
        let mut args = vec![
            "report",
            "--dir",
            s(&dir),
            "--incident",
            "1",
            "--out",
            s(&fresh),
        ];
        args.extend_from_slice(extra);
        let err = fails(&blackbox(&args));
        assert!(err.contains(&name), "{err}");
        assert!(!fresh.exists(), "a report of a damaged log was written");
    }
}

#[test]
fn values_a_plot_cannot_scale_and_a_keyed_log_still_render_with_working_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("keyed");
    let key = tmp.path().join("chain.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    // A flat series of huge values (a time in ns), and a series spanning 1e300.
    let mut lines = String::new();
    for _ in 0..3 {
        lines.push_str("{\"kind\":\"clock.t\",\"values\":{\"now_ns\":1.7e18}}\n");
    }
    lines.push_str("{\"kind\":\"wide.v\",\"values\":{\"v\":-1e300}}\n");
    lines.push_str("{\"kind\":\"wide.v\",\"values\":{\"v\":1e300}}\n");
    let out = common::record(&dir, &lines, &["--key-file", s(&key)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = tmp.path().join("k.html");
    ok(&blackbox(&[
        "report",
        "--dir",
        s(&dir),
        "--key-file",
        s(&key),
        "--around",
        "now",
        "--window",
        "10m",
        "--out",
        s(&page),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    for bad in ["NaN", "inf\"", "=\"-inf"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    let (_, console) = browser::dump_dom(&page);
    assert!(console.is_empty(), "console messages: {console:?}");
    // The page's verify command names the key, and works.
    let integrity = section(&html, "integrity");
    let start = integrity.find("blackbox verify --dir ").unwrap();
    let end = start + integrity[start..].find("</code>").unwrap();
    let command = &integrity[start..end];
    assert!(command.contains("--key-file"), "{command}");
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    ok(&blackbox(&args));
}
