//! `blackbox ship` and `blackbox verify --dir URL` through the binary, against a real
//! S3 API server (moto) and a directory.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;
#[path = "../../ship/tests/common/moto.rs"]
mod moto;

use std::path::Path;
use std::process::{Output, Stdio};

use common::{bin, blackbox, fails, ok, record, s, segment_files};
use moto::Moto;

/// Runs `blackbox ARGS` with the environment an AWS tool reads to reach `moto`.
fn blackbox_s3(moto: &Moto, args: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in moto.env() {
        cmd.env(k, v);
    }
    cmd.output().expect("run blackbox")
}

/// A recorded log of several sealed segments and an active one.
fn recorded_log(dir: &Path) -> Vec<String> {
    recorded_log_of(dir, 3_000)
}

/// A recorded log of `events` events (at least 3000: several sealed segments).
fn recorded_log_of(dir: &Path, events: usize) -> Vec<String> {
    let input: String = (0..events)
        .map(|i| format!("{{\"kind\":\"sensor.imu\",\"values\":{{\"ax\":{i}}}}}\n"))
        .collect();
    ok(&record(dir, &input, &["--segment-bytes", "16KiB"]));
    let names: Vec<String> = segment_files(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    names
}

/// `blackbox digest` of the sealed segments alone (a copy of every file but the last).
fn digest_of_sealed(dir: &Path, names: &[String]) -> String {
    let copy = tempfile::tempdir().unwrap();
    for name in &names[..names.len() - 1] {
        std::fs::copy(dir.join(name), copy.path().join(name)).unwrap();
    }
    ok(&blackbox(&["digest", "--dir", s(copy.path())]))
        .trim()
        .to_owned()
}

#[test]
fn ship_to_s3_then_verify_remotely_with_the_local_digest() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    let sealed = &names[..names.len() - 1];

    let out = ok(&blackbox_s3(
        &moto,
        &["ship", "--dir", s(&log), "--to", "s3://fleet/robot-7"],
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), sealed.len() + 1, "{out}");
    for (line, name) in lines.iter().zip(sealed) {
        assert!(
            line.starts_with(&format!("shipped {name} (seqs ")),
            "{line}"
        );
    }
    assert!(
        lines[sealed.len()].starts_with(&format!("shipped {} segments", sealed.len())),
        "{out}"
    );
    assert!(
        !out.contains(names.last().unwrap().as_str()),
        "the active segment is not shipped: {out}"
    );

    let again = ok(&blackbox_s3(
        &moto,
        &["ship", "--dir", s(&log), "--to", "s3://fleet/robot-7"],
    ));
    for (line, name) in again.lines().zip(sealed) {
        assert!(line.starts_with(&format!("skipped {name} ")), "{line}");
    }
    assert!(again.contains("shipped 0 segments"), "{again}");

    let verified = ok(&blackbox_s3(
        &moto,
        &["verify", "--dir", "s3://fleet/robot-7"],
    ));
    let last = verified
        .lines()
        .find_map(|l| l.strip_prefix("last: "))
        .unwrap_or_else(|| panic!("no digest in {verified}"));
    assert_eq!(last, digest_of_sealed(&log, &names));
    // The local log holds the prefix the remote digest names.
    ok(&blackbox(&["verify", "--dir", s(&log), "--digest", last]));
}

#[test]
fn read_commands_take_a_shipped_logs_url_and_answer_as_the_local_log_does() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    ok(&blackbox_s3(
        &moto,
        &["ship", "--dir", s(&log), "--to", "s3://fleet/robot-7"],
    ));
    let digest = digest_of_sealed(&log, &names);
    let last = digest.split(':').next().unwrap();
    let url = "s3://fleet/robot-7";

    let remote = ok(&blackbox_s3(&moto, &["replay", "--dir", url, "--json"]));
    let local = ok(&blackbox(&[
        "replay",
        "--dir",
        s(&log),
        "--json",
        "--to-seq",
        last,
    ]));
    assert!(remote.lines().count() > 1_000, "{}", remote.lines().count());
    assert_eq!(remote, local, "the shipped prefix, record for record");
    assert_eq!(
        ok(&blackbox_s3(&moto, &["digest", "--dir", url])).trim(),
        digest
    );
    let middle: serde_json::Value =
        serde_json::from_str(remote.lines().nth(remote.lines().count() / 2).unwrap()).unwrap();
    let at = middle["ts_ns"].as_u64().unwrap().to_string();
    assert_eq!(
        ok(&blackbox_s3(
            &moto,
            &["state", "--dir", url, "--at", &at, "--json"]
        )),
        ok(&blackbox(&[
            "state",
            "--dir",
            s(&log),
            "--at",
            &at,
            "--json"
        ])),
    );
    let stats = ok(&blackbox_s3(&moto, &["stats", "--dir", url]));
    assert!(
        stats.contains(&format!("(seq 0..={last})"))
            && stats.contains(&format!("segments  {}", names.len() - 1)),
        "{stats}"
    );
    // What writes to a log, or needs it on this machine, says so.
    let err = fails(&blackbox_s3(
        &moto,
        &[
            "report",
            "--dir",
            url,
            "--out",
            s(&dir.path().join("r.html")),
        ],
    ));
    assert!(err.contains("is a shipped log"), "{err}");
    let err = fails(&blackbox_s3(
        &moto,
        &["kb", "put", "k", "1", "--evidence", "1", "--dir", url],
    ));
    assert!(err.contains("never written"), "{err}");
}

#[test]
fn a_tampered_shipped_segment_fails_remote_verify_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    let shipped = dir.path().join("shipped");
    let url = format!("file://{}", shipped.display());
    ok(&blackbox(&["ship", "--dir", s(&log), "--to", &url]));
    ok(&blackbox(&["verify", "--dir", &url]));

    let victim = &names[1];
    let object = shipped.join("segments").join(victim);
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&object, bytes).unwrap();
    let err = fails(&blackbox(&["verify", "--dir", &url]));
    assert!(err.contains(&format!("segment {victim}: ")), "{err}");
    assert!(err.contains("it was changed after it was shipped"), "{err}");

    std::fs::remove_file(&object).unwrap();
    let err = fails(&blackbox(&["verify", "--dir", &url]));
    assert!(err.contains(&format!("segment {victim}: ")), "{err}");
}

#[test]
fn ship_and_verify_refuse_a_url_they_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    recorded_log(&log);
    let err = fails(&blackbox(&[
        "ship",
        "--dir",
        s(&log),
        "--to",
        "gs://bucket/robot",
    ]));
    assert!(err.contains("cannot use gs://bucket/robot"), "{err}");
    let err = fails(&blackbox(&[
        "ship",
        "--dir",
        s(&log),
        "--to",
        "s3:///robot",
    ]));
    assert!(err.contains("names no bucket"), "{err}");
    let missing = dir.path().join("nothing-shipped-here");
    let err = fails(&blackbox(&[
        "verify",
        "--dir",
        &format!("file://{}", missing.display()),
    ]));
    assert!(err.contains("there is no such directory"), "{err}");
    assert!(!missing.exists(), "verify creates nothing");
}

#[test]
fn a_store_given_as_a_plain_path_verifies_and_other_readers_say_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    let shipped = dir.path().join("shipped");
    // `ship --to` takes a plain path: `verify --dir` takes the same path.
    ok(&blackbox(&["ship", "--dir", s(&log), "--to", s(&shipped)]));
    let verified = ok(&blackbox(&["verify", "--dir", s(&shipped)]));
    assert!(verified.contains("is intact"), "{verified}");
    let last = verified
        .lines()
        .find_map(|l| l.strip_prefix("last: "))
        .unwrap_or_else(|| panic!("no digest in {verified}"));
    assert_eq!(last, digest_of_sealed(&log, &names));
    let err = fails(&blackbox(&["replay", "--dir", s(&shipped)]));
    assert!(err.contains("it is where a log was shipped"), "{err}");
    let url = format!("file://{}", shipped.display());
    assert!(err.contains(&format!("as {url}")), "{err}");
    // ... and given so, they read it.
    let last_seq = last.split(':').next().unwrap();
    assert_eq!(
        ok(&blackbox(&["replay", "--dir", &url, "--json"])),
        ok(&blackbox(&[
            "replay",
            "--dir",
            s(&log),
            "--json",
            "--to-seq",
            last_seq
        ])),
        "the shipped records"
    );

    // A manifest edited to disagree with its objects (the last segment said to hold
    // more records than it does) fails every read that meets that segment, rather than
    // ending early with exit 0.
    let manifest_path = shipped.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let segments = manifest["segments"].as_array_mut().unwrap();
    let lied = segments.last_mut().unwrap();
    let more = lied["last_seq"].as_u64().unwrap() + 1_000;
    lied["last_seq"] = more.into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    for args in [
        vec!["replay", "--dir", &url],
        vec!["digest", "--dir", &url],
        vec!["stats", "--dir", &url],
    ] {
        let err = fails(&blackbox(&args));
        assert!(
            err.contains("is not what the log's manifest lists for it")
                && err.contains(&format!("blackbox verify --dir {url}`")),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn ship_to_s3_without_credentials_says_which_variables_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    recorded_log(&log);
    // No credentials, and the instance metadata service (asked for them in their
    // stead) is a closed loopback port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let mut cmd = bin();
    cmd.args(["ship", "--dir", s(&log), "--to", "s3://fleet/robot"])
        .stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("AWS_METADATA_ENDPOINT", &endpoint)
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env("AWS_REGION", "us-east-1");
    let err = fails(&cmd.output().unwrap());
    assert!(
        err.contains("cannot read manifest s3://fleet/robot/manifest.json"),
        "{err}"
    );
    assert!(
        err.contains("no AWS credentials are set in the environment")
            && err.contains("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        "{err}"
    );
}

#[test]
fn fleet_verify_prints_one_line_per_robot_and_fails_naming_the_damaged_ones() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    let mut digests = Vec::new();
    for (i, robot) in ["robot-a", "robot-b", "robot-c"].iter().enumerate() {
        let log = dir.path().join(robot);
        let names = recorded_log_of(&log, 3_000 + 500 * i);
        let digest = digest_of_sealed(&log, &names);
        ok(&blackbox_s3(
            &moto,
            &[
                "ship",
                "--dir",
                s(&log),
                "--to",
                &format!("s3://fleet/logs/{robot}"),
            ],
        ));
        ok(&blackbox(&[
            "ship",
            "--dir",
            s(&log),
            "--to",
            s(&local.join(robot)),
        ]));
        digests.push((*robot, digest));
    }

    let out = ok(&blackbox_s3(&moto, &["fleet", "verify", "s3://fleet/logs"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, (robot, digest)) in lines.iter().zip(&digests) {
        assert!(line.starts_with(&format!("{robot}: intact: ")), "{line}");
        assert!(line.ends_with(&format!(", last {digest}")), "{line}");
    }
    assert_eq!(lines[3], "fleet s3://fleet/logs: all 3 logs intact");
    let err = fails(&blackbox_s3(
        &moto,
        &["fleet", "verify", "s3://fleet/logs/robot-b"],
    ));
    assert!(err.contains("it is one shipped log, not a fleet"), "{err}");

    // The same fleet in a directory, robot-b's second segment changed.
    let segments = local.join("robot-b").join("segments");
    let mut objects: Vec<_> = std::fs::read_dir(&segments)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    objects.sort();
    let mut bytes = std::fs::read(&objects[1]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&objects[1], bytes).unwrap();
    let out = blackbox(&["fleet", "verify", s(&local), "--json"]);
    let err = fails(&out);
    assert!(
        err.contains("1 of the 3 logs under") && err.ends_with("failed verification: robot-b\n"),
        "{err}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    for (row, (robot, digest)) in rows.iter().zip(&digests) {
        assert_eq!(row["robot"], *robot);
        if *robot == "robot-b" {
            assert_eq!(row["intact"], false);
            let name = objects[1].file_name().unwrap().to_string_lossy();
            assert!(
                row["error"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("segment {name}: ")),
                "{row}"
            );
        } else {
            assert_eq!(row["intact"], true);
            assert_eq!(row["last"], *digest);
        }
    }
    assert_eq!(rows[3]["logs"], 3);
    assert_eq!(rows[3]["intact"], 2);
    assert_eq!(rows[3]["failed"], serde_json::json!(["robot-b"]));
}

/// The segment names the manifest of a directory store lists (none before it exists).
fn manifest_names(shipped: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(shipped.join("manifest.json")) else {
        return Vec::new();
    };
    let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    manifest["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

/// A `blackbox ship --follow` child, killed if the test fails before it stops it.
struct Follower(Option<std::process::Child>);

impl Follower {
    fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().unwrap()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn follow_ships_each_segment_as_it_is_sealed_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let first = recorded_log(&log);
    let shipped = dir.path().join("shipped");
    let mut follower = Follower(Some(
        bin()
            .args([
                "ship",
                "--dir",
                s(&log),
                "--to",
                s(&shipped),
                "--follow",
                "--interval",
                "20ms",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // More records seal more segments while it follows.
    let all = recorded_log(&log);
    assert!(all.len() > first.len(), "{first:?} {all:?}");
    let sealed = &all[..all.len() - 1];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while manifest_names(&shipped) != sealed {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower did not ship {sealed:?} within 120 s; the manifest lists {:?}",
            manifest_names(&shipped)
        );
        assert!(
            follower.child().try_wait().unwrap().is_none(),
            "the follower exited early"
        );
        // Between two looks at the manifest: the condition waited for is its content.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = i32::try_from(follower.child().id()).unwrap();
    // SAFETY: kill only sends a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = follower.0.take().unwrap().wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in sealed {
        assert_eq!(
            stdout.matches(&format!("shipped {name} ")).count(),
            1,
            "{name} shipped once: {stdout}"
        );
    }
    assert!(
        !stdout.contains(all.last().unwrap().as_str()),
        "the active segment is not shipped: {stdout}"
    );
    assert!(
        stdout
            .trim_end()
            .ends_with("every sealed segment found was shipped"),
        "{stdout}"
    );
}

/// Guards `record --ship-to` (issue 17): the recorder ships its sealed segments from its
/// own thread, and once more at close: the store then holds every segment file of the
/// log but the last (the oracle: the files in the log's directory), verifies, and
/// `record` says on stderr through which seq.
#[test]
fn record_ship_to_ships_every_sealed_segment_by_its_close() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = (tmp.path().join("log"), tmp.path().join("store"));
    let names = recorded_log_shipping(&dir, &store);
    assert_eq!(manifest_names(&store), names[..names.len() - 1]);
    let said = ok(&blackbox(&["verify", "--dir", s(&store)]));
    let last = said.lines().find_map(|l| l.strip_prefix("last: ")).unwrap();
    assert_eq!(digest_of_sealed(&dir, &names), last.trim());
}

/// Records 3000 events into 16 KiB segments with `--ship-to STORE`; returns the
/// segment files' names, and checks what `record` said of shipping.
fn recorded_log_shipping(dir: &Path, store: &Path) -> Vec<String> {
    let input: String = (0..3_000)
        .map(|i| format!("{{\"kind\":\"sensor.imu\",\"values\":{{\"ax\":{i}}}}}\n"))
        .collect();
    let out = record(
        dir,
        &input,
        &["--segment-bytes", "16KiB", "--ship-to", s(store)],
    );
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("blackbox: shipping: shipped through seq"),
        "{stderr}"
    );
    segment_files(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}
