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
}
