//! What the command says on bad input: one sentence that fits on a screen and says what
//! is wrong, whatever the input.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{blackbox, fails, ok, record, s};

/// A 74 KB name (an argument may hold at most 128 KiB), and the first 128 characters a message may show of it.
fn long_name() -> (String, String) {
    let name: String = (0..40_000)
        .map(|i| if i % 7 == 0 { 'x' } else { 'é' })
        .collect();
    let shown: String = name.chars().take(128).collect();
    (name, shown)
}

/// The stderr of a failed run: one short line that shows the start of `shown`, cut.
fn cut_in(out: &std::process::Output, shown: &str, what: &str) {
    let err = fails(out);
    assert!(err.len() < 2048, "{what}: {} bytes of error", err.len());
    assert!(
        err.contains(&format!("{shown:?}…")) || err.contains(&format!("{shown}…")),
        "{what}: {err}"
    );
}

#[test]
fn long_names_are_cut_in_messages() {
    // Guards a past bug: a bad name was echoed whole: a 100 KB source printed 100 KB to
    // stderr.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let d = s(&dir);
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    let (name, shown) = long_name();
    let lines = [
        (
            "a source",
            format!("{{\"kind\":\"a.b\",\"source\":\"{name}\"}}"),
        ),
        (
            "a value name",
            format!("{{\"kind\":\"a.b\",\"values\":{{\"{name}\":1}}}}"),
        ),
        (
            "a value that is not a number",
            format!("{{\"kind\":\"a.b\",\"values\":{{\"{name}\":\"x\"}}}}"),
        ),
        (
            "an unknown field",
            format!("{{\"kind\":\"a.b\",\"{name}\":1}}"),
        ),
        ("an unknown op", format!("{{\"op\":\"{name}\"}}")),
        (
            "an unknown field of an op",
            format!("{{\"op\":\"sync\",\"{name}\":1}}"),
        ),
        ("a kind", format!("{{\"kind\":\"{name}\"}}")),
    ];
    for (what, line) in lines {
        cut_in(&record(&dir, &format!("{line}\n"), &[]), &shown, what);
    }
    let args: [(&str, Vec<&str>); 6] = [
        (
            "kb put's key",
            vec!["kb", "put", &name, "1", "--evidence", "0", "--dir", d],
        ),
        ("kb get's key", vec!["kb", "get", &name, "--dir", d]),
        ("a time", vec!["replay", "--dir", d, "--since", &name]),
        (
            "a duration",
            vec!["replay", "--dir", d, "--around", "0", "--window", &name],
        ),
        ("a digest", vec!["verify", "--dir", d, "--digest", &name]),
        ("a record type", vec!["replay", "--dir", d, "--type", &name]),
    ];
    for (what, a) in args {
        cut_in(&blackbox(&a), &shown, what);
    }
    // A policy file's tier and glob.
    for (what, toml) in [
        (
            "a policy's tier",
            format!("[[rules]]\nmatch = \"*\"\ntier = \"{name}\"\n"),
        ),
        (
            "a policy's glob",
            format!("[[rules]]\nmatch = \"{name}/\"\ntier = \"full\"\n"),
        ),
        (
            "an incident trigger",
            format!("[incident]\ntriggers = [\"{name}/\"]\n"),
        ),
    ] {
        let policy = tmp.path().join("policy.toml");
        std::fs::write(&policy, toml).unwrap();
        cut_in(
            &record(&dir, "{\"kind\":\"a.b\"}\n", &["--policy", s(&policy)]),
            &shown,
            what,
        );
    }
}

#[test]
fn a_repeated_key_in_kb_json_is_told_as_such_without_the_quoting_hint() {
    // Guards a past bug: a repeated key in `kb put`'s VALUE_JSON said "quote strings as
    // JSON, e.g. '"left"'", which does not apply.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let d = s(&dir);
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    let put = |value: &str, extra: &[&str]| {
        let mut args = vec!["kb", "put", "door", value, "--evidence", "0", "--dir", d];
        args.extend_from_slice(extra);
        fails(&blackbox(&args))
    };
    for err in [
        put(r#"{"a": 1, "a": 2}"#, &[]),
        put("1", &["--conditions", r#"{"l": 1, "l": 2}"#]),
    ] {
        assert!(
            err.contains("\"a\" appears twice") || err.contains("\"l\" appears twice"),
            "{err}"
        );
        assert!(!err.contains("quote strings"), "{err}");
    }
    // A bare word is not JSON: the hint applies there.
    let err = put("left", &[]);
    assert!(err.contains("quote strings as JSON"), "{err}");
}

#[test]
fn an_empty_out_is_said_to_need_a_value() {
    // Guards a past bug: `export --out ''` said "--out needs a value: one of ;".
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    let err = fails(&blackbox(&["export", "--dir", s(&dir), "--out", ""]));
    assert!(err.contains("--out needs a value"), "{err}");
    assert!(!err.contains("one of"), "{err}");
}

#[test]
fn a_time_past_what_nanoseconds_hold_is_called_so() {
    // Guards a past bug: `--since 9999-12-31T23:59:59Z` was called "not a valid time".
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    // u64::MAX ns after the epoch, by hand: 18446744073 s is 213503 days (to
    // 2554-07-21) and 84873 s (23:34:33).
    for t in [
        "9999-12-31T23:59:59Z",
        "3000-01-01T00:00:00Z",
        "2554-07-21T23:34:34Z",
    ] {
        let err = fails(&blackbox(&["replay", "--dir", s(&dir), "--since", t]));
        assert!(
            err.contains("past the last time") && err.contains("2554-07-21T23:34:33"),
            "{t}: {err}"
        );
        assert!(!err.contains("not a valid time"), "{t}: {err}");
    }
    // The last time that fits is a time.
    ok(&blackbox(&[
        "replay",
        "--dir",
        s(&dir),
        "--since",
        "2554-07-21T23:34:33Z",
    ]));
}

#[test]
fn kb_history_says_what_each_commit_did() {
    // Guards a past bug: after `kb refute door '"ajar"'`, `kb history door` showed
    // `v2 … rejected door = "closed"`, as if the held value had been rejected.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let d = s(&dir);
    ok(&record(
        &dir,
        "{\"kind\":\"a.b\"}\n{\"kind\":\"a.c\"}\n",
        &[],
    ));
    ok(&blackbox(&[
        "kb",
        "put",
        "door",
        "\"closed\"",
        "--evidence",
        "0",
        "--dir",
        d,
    ]));
    ok(&blackbox(&[
        "kb",
        "refute",
        "door",
        "\"ajar\"",
        "--evidence",
        "1",
        "--reason",
        "seen shut",
        "--dir",
        d,
    ]));
    let text = ok(&blackbox(&["kb", "history", "door", "--dir", d]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains(r#"assert door = "closed""#), "{text}");
    // The rejected value is named as what the commit refuted; the held one as what
    // the key holds after it.
    let (_, after) = lines[1]
        .split_once(r#"refute door = "ajar": rejected; then "#)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(after.starts_with(r#"door = "closed""#), "{text}");
    let json = common::json_lines(&ok(&blackbox(&[
        "kb", "history", "door", "--dir", d, "--json",
    ])));
    assert_eq!(json[1]["op"], r#"refute door = "ajar""#, "{json:?}");
    assert_eq!(json[1]["fact"]["value"], "closed", "{json:?}");
}

#[test]
fn around_the_most_negative_incident_number_is_an_error_not_a_panic() {
    // Guards a past bug: `--around incident:-9223372036854775808` negated i64::MIN,
    // which panics in a debug build.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    for n in [
        "-9223372036854775808",
        "-9223372036854775807",
        "9223372036854775807",
    ] {
        let around = format!("incident:{n}");
        let err = fails(&blackbox(&[
            "replay",
            "--dir",
            s(&dir),
            "--around",
            &around,
        ]));
        assert!(err.contains("the log holds 0 incidents"), "{around}: {err}");
    }
}
