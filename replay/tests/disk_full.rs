//! `blackbox record` on a real full disk: a small tmpfs mounted for the test. Without a
//! budget, the command stops with the log's one sentence and exit 1, every event it
//! acknowledged is in the log, the log verifies, and once the disk has room it records
//! on. With a budget larger than the disk, it records every line: the log prunes for
//! room, on the record.
//!
//! Mounting needs root (CI runs as root in a container); where `mount -t tmpfs` is
//! refused, the test says why on stderr and checks nothing. The file layer's own
//! tests (`log/tests/disk_full.rs`, `engine/tests/disk_full.rs`) run everywhere.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{blackbox, fails, json_lines, ok, record, s};

/// A tmpfs of a given size, unmounted on drop.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) at `at`; `Err` with the
    /// reason when this process may not.
    fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { at: at.to_owned() })
    }

    /// Gives the tmpfs a new size.
    fn resize(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
    }
}

/// `n` event lines of about 250 bytes, every 50th sent with `"ack": true`.
fn lines(n: u64) -> String {
    (0..n)
        .map(|i| {
            let ack = if i % 50 == 49 { ",\"ack\":true" } else { "" };
            format!(
                "{{\"kind\":\"obs.x\",\"payload\":{{\"i\":{i},\"pad\":\"{}\"}}{ack}}}\n",
                "x".repeat(200)
            )
        })
        .collect()
}

/// The `i` of every `obs.x` event in the log, in log order.
fn recorded(dir: &Path) -> Vec<u64> {
    common::replay_json(dir, &[])
        .iter()
        .filter(|v| v["kind"] == "obs.x")
        .map(|v| v["payload"]["i"].as_u64().unwrap())
        .collect()
}

#[test]
fn record_on_a_full_tmpfs_says_so_keeps_what_it_acknowledged_and_records_on_once_there_is_room() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&tmp.path().join("disk"), "256k") {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("skipped: a tmpfs cannot be mounted here ({why})");
            return;
        }
    };
    let dir = disk.at.join("flight");
    let out = record(&dir, &lines(4000), &[]);
    let stderr = fails(&out);
    assert_eq!(out.status.code(), Some(1));
    let prefix = format!("blackbox: the disk holding {} is full: ", dir.display());
    let rest = stderr
        .trim_end()
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{stderr}"));
    let (bytes, tail) = rest.split_once(' ').unwrap();
    assert!(bytes.parse::<u64>().unwrap() > 0, "{stderr}");
    assert_eq!(
        tail, "bytes of records could not be written; nothing acknowledged is lost",
        "{stderr}"
    );
    // Every acknowledged event is there, and the events are the first ones, in order.
    let acks = json_lines(&String::from_utf8(out.stdout).unwrap());
    assert!(
        !acks.is_empty(),
        "some events were acknowledged before the disk filled"
    );
    let last_acked_line = acks.last().unwrap()["line"].as_u64().unwrap();
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
    let found = recorded(&dir);
    assert!(
        found.len() as u64 >= last_acked_line,
        "{} < {last_acked_line}",
        found.len()
    );
    assert_eq!(found, (0..found.len() as u64).collect::<Vec<_>>());

    // Room again: the same log records on.
    disk.resize("4m");
    ok(&record(
        &dir,
        "{\"kind\":\"obs.x\",\"payload\":{\"i\":-1}}\n",
        &[],
    ));
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}

#[test]
fn record_on_a_full_tmpfs_under_a_larger_budget_prunes_and_records_every_line() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&tmp.path().join("disk"), "512k") {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("skipped: a tmpfs cannot be mounted here ({why})");
            return;
        }
    };
    let policy = tmp.path().join("policy.toml");
    std::fs::write(&policy, "[retention]\nmax_bytes = \"1GiB\"\n").unwrap();
    let dir = disk.at.join("flight");
    let n = 4000;
    ok(&record(
        &dir,
        &lines(n),
        &["--policy", s(&policy), "--segment-bytes", "32KiB"],
    ));
    let verified = ok(&blackbox(&["verify", "--dir", s(&dir)]));
    assert!(verified.contains("pruned up to seq"), "{verified}");
    // The newest events, to the last, without a gap.
    let found = recorded(&dir);
    let first = found[0];
    assert!(first > 0);
    assert_eq!(found, (first..n).collect::<Vec<_>>());
    let prunes = common::replay_json(&dir, &["--type", "prune"]);
    assert!(!prunes.is_empty());
    for p in &prunes {
        assert_eq!(p["reasons"], serde_json::json!(["disk_full"]), "{p}");
    }
}
