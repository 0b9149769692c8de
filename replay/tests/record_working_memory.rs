//! `blackbox record` and the working memory's size limit: a `set` the memory refuses is
//! the error of the line that asked for it.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{fails, json_lines, ok, record, replay_json};
use serde_json::{Value, json};

/// The log's record limit by default (`docs/FORMAT.md`): the largest checkpoint.
const RECORD_BYTES_MAX: usize = 16 << 20;
/// The working memory's limit: what one record holds, less the 16 bytes a delta record
/// adds around the memory's JSON (`docs/ARCHITECTURE.md`, "Working memory").
const MEMORY_BYTES_MAX: usize = RECORD_BYTES_MAX - 16;

/// The memory of the last checkpoint in the log.
fn last_checkpoint(dir: &std::path::Path) -> Value {
    let checkpoints = replay_json(dir, &["--type", "checkpoint"]);
    checkpoints.last().unwrap()["working"].clone()
}

/// Guards the working memory's limit arriving through `record` (issue 9, point 16): a
/// `set` that would make the memory too large to checkpoint is refused by the recorder;
/// `record` reports it as the error of its line, naming the line, the key and the
/// limit, and with `--skip-invalid` skips that line only: the memory keeps what it had
/// and the lines after it are recorded.
#[test]
fn record_refuses_a_set_past_the_memory_limit_as_its_lines_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let huge = json!({"op": "set", "key": "map", "value": "x".repeat(RECORD_BYTES_MAX)});
    let input = format!(
        "{}\n{huge}\n{}\n",
        json!({"op": "set", "key": "goal", "value": "cup"}),
        json!({"kind": "cmd.a"}),
    );

    let err = fails(&record(&dir, &input, &[]));
    assert!(
        err.contains("line 2")
            && err.contains("\"map\"")
            && err.contains(&MEMORY_BYTES_MAX.to_string()),
        "{err}"
    );
    // What came before the refused line is kept whole.
    assert_eq!(last_checkpoint(&dir), json!({"goal": "cup"}));

    let out = record(&dir, &input, &["--skip-invalid"]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 2 skipped"), "{stderr}");
    let summary = json_lines(&stdout).pop().unwrap();
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["kinds"]["cmd.a"]["seen"], 1, "{summary}");
    assert_eq!(last_checkpoint(&dir), json!({"goal": "cup"}));
}
