//! Shipping to a real S3 API server (moto) and verifying what was shipped: every test
//! checks the store against the local segment files, hashed here.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;

use blackbox_ship::{Action, Error, Manifest, Remote, ShipOptions, ship_to, verify_remote};
use common::moto::Moto;
use common::{
    Faulty, Stop, delete_object, local_digest_of_sealed, make_log, object, put_object, s3,
    sealed_hashes, segment_files,
};
use object_store::ObjectStore;
use object_store::path::Path;

const EVENTS: u64 = 1_500;
const SEGMENT_BYTES: u64 = 8 << 10;

fn remote(store: Arc<dyn ObjectStore>, prefix: &str) -> Remote {
    Remote::with_store(
        store,
        Path::from(prefix),
        format!("s3://test/{prefix}"),
        true,
    )
}

/// The store under `prefix` holds exactly the sealed segments, byte for byte (by their
/// blake3, computed from the local files), and a manifest that lists them in order.
fn assert_shipped(
    store: &dyn ObjectStore,
    prefix: &str,
    expected: &[(String, String)],
) -> Manifest {
    let manifest =
        Manifest::parse(&object(store, &format!("{prefix}/manifest.json")).unwrap()).unwrap();
    let listed: Vec<(String, String)> = manifest
        .segments
        .iter()
        .map(|s| (s.name.clone(), s.blake3.clone()))
        .collect();
    assert_eq!(
        listed, expected,
        "the manifest lists every sealed segment with its blake3"
    );
    for (name, hash) in expected {
        let bytes = object(store, &format!("{prefix}/segments/{name}")).unwrap();
        assert_eq!(&blake3::hash(&bytes).to_hex().to_string(), hash, "{name}");
    }
    manifest
}

#[test]
fn ships_every_sealed_segment_once_and_a_second_pass_uploads_nothing() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), EVENTS, SEGMENT_BYTES);
    let expected = sealed_hashes(dir.path());
    assert!(
        expected.len() >= 5,
        "the log has {} sealed segments",
        expected.len()
    );

    let store = Faulty::new(s3(&moto, "fleet"), Stop::Never);
    let remote = remote(store.clone(), "robot-1");
    let mut lines = Vec::new();
    let report = ship_to(dir.path(), &remote, &ShipOptions::default(), |s| {
        lines.push(s.name.clone())
    })
    .unwrap();
    assert_eq!(report.count(Action::Uploaded), expected.len());
    assert_eq!(lines.len(), expected.len(), "one call per sealed segment");
    let active = segment_files(dir.path()).last().unwrap().0.clone();
    let active = &active;
    assert!(
        !lines.contains(active),
        "the active segment {active} is not shipped"
    );
    let manifest = assert_shipped(&*s3(&moto, "fleet"), "robot-1", &expected);
    assert_eq!(manifest.log.first_seq, 0);
    assert_eq!(
        manifest.log.start_link,
        "0".repeat(64),
        "a log shipped from its start starts at the genesis link"
    );
    for (name, _) in &expected {
        assert_eq!(
            store.counts.uploads_of(&format!("robot-1/segments/{name}")),
            1,
            "{name}"
        );
    }

    let again = Faulty::new(s3(&moto, "fleet"), Stop::Never);
    let report = ship_to(
        dir.path(),
        &remote_of(&again, "robot-1"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(report.count(Action::AlreadyShipped), expected.len());
    let uploads: usize = again.counts.uploads.lock().unwrap().values().sum();
    assert_eq!(
        uploads, 0,
        "a second pass uploads nothing, manifest included"
    );
}

fn remote_of(store: &Arc<Faulty>, prefix: &str) -> Remote {
    remote(store.clone(), prefix)
}

#[test]
fn multipart_uploads_ship_the_same_bytes() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), EVENTS, SEGMENT_BYTES);
    let expected = sealed_hashes(dir.path());
    let options = ShipOptions {
        multipart_threshold: 1,
        part_bytes: 3 << 10,
        ..ShipOptions::default()
    };
    let store = Faulty::new(s3(&moto, "fleet"), Stop::Never);
    ship_to(dir.path(), &remote_of(&store, "robot-1"), &options, |_| {}).unwrap();
    assert_shipped(&*s3(&moto, "fleet"), "robot-1", &expected);
    // Parts of 3 KiB: every segment of about 8 KiB went up in several requests.
    let per_segment = 1 + 2 + 2 + 1; // head, start, parts..., complete, head, manifest
    assert!(
        store
            .counts
            .requests
            .load(std::sync::atomic::Ordering::SeqCst)
            >= expected.len() * per_segment,
        "multipart uploads take several requests per segment"
    );
}

/// Stops a pass at request k (before it is sent, or after it reached the store with
/// its answer lost), for every k of a clean pass, then resumes: the end state is one
/// clean pass's, a segment in the manifest when the pass stopped is not uploaded
/// again, and no segment is recorded before it is whole in the store.
fn stop_anywhere_and_resume(options: &ShipOptions) {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 700, SEGMENT_BYTES);
    let expected = sealed_hashes(dir.path());
    assert!(
        expected.len() >= 3,
        "the log has {} sealed segments",
        expected.len()
    );
    let plain = s3(&moto, "fleet");

    let clean = Faulty::new(plain.clone(), Stop::Never);
    ship_to(dir.path(), &remote_of(&clean, "clean"), options, |_| {}).unwrap();
    let requests = clean
        .counts
        .requests
        .load(std::sync::atomic::Ordering::SeqCst);
    let clean_manifest = object(&*plain, "clean/manifest.json").unwrap();

    for k in 1..=requests {
        for stop in [Stop::Before(k), Stop::After(k)] {
            let prefix = format!("{stop:?}").replace(['(', ')'], "-");
            let killed = Faulty::new(plain.clone(), stop);
            let stopped = ship_to(dir.path(), &remote_of(&killed, &prefix), options, |_| {});
            assert!(stopped.is_err(), "{stop:?}: the pass was stopped");

            // Whatever the manifest holds now is whole in the store.
            let shipped: Vec<String> = match object(&*plain, &format!("{prefix}/manifest.json")) {
                None => Vec::new(),
                Some(bytes) => {
                    let m = Manifest::parse(&bytes).unwrap();
                    let names: Vec<(String, String)> = m
                        .segments
                        .iter()
                        .map(|s| (s.name.clone(), s.blake3.clone()))
                        .collect();
                    assert_eq!(names, expected[..names.len()], "{stop:?}");
                    for (name, hash) in &names {
                        let bytes = object(&*plain, &format!("{prefix}/segments/{name}")).unwrap();
                        assert_eq!(
                            &blake3::hash(&bytes).to_hex().to_string(),
                            hash,
                            "{stop:?}: {name}"
                        );
                    }
                    names.into_iter().map(|(n, _)| n).collect()
                }
            };

            let resumed = Faulty::new(plain.clone(), Stop::Never);
            let report =
                ship_to(dir.path(), &remote_of(&resumed, &prefix), options, |_| {}).unwrap();
            for outcome in &report.segments {
                let uploads = resumed
                    .counts
                    .uploads_of(&format!("{prefix}/segments/{}", outcome.name));
                let expected_uploads = match outcome.action {
                    Action::Uploaded => 1,
                    Action::Adopted | Action::AlreadyShipped => 0,
                };
                assert_eq!(
                    uploads, expected_uploads,
                    "{stop:?}: {} {:?}",
                    outcome.name, outcome.action
                );
                if shipped.contains(&outcome.name) {
                    assert_eq!(
                        outcome.action,
                        Action::AlreadyShipped,
                        "{stop:?}: {}",
                        outcome.name
                    );
                }
            }
            assert_eq!(
                object(&*plain, &format!("{prefix}/manifest.json")).unwrap(),
                clean_manifest,
                "{stop:?}: the resumed manifest is a clean pass's"
            );
            assert_shipped(&*plain, &prefix, &expected);
        }
    }
}

#[test]
fn a_pass_stopped_at_any_request_resumes_to_one_clean_pass() {
    stop_anywhere_and_resume(&ShipOptions::default());
}

#[test]
fn a_multipart_pass_stopped_at_any_request_resumes_to_one_clean_pass() {
    stop_anywhere_and_resume(&ShipOptions {
        multipart_threshold: 1,
        part_bytes: 4 << 10,
        ..ShipOptions::default()
    });
}

#[test]
fn an_uploaded_segment_missing_from_the_manifest_is_adopted_not_uploaded_again() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 700, SEGMENT_BYTES);
    let expected = sealed_hashes(dir.path());
    let plain = s3(&moto, "fleet");
    // The first segment is in the store (as a pass stopped before the manifest left
    // it), the manifest is not.
    let first = &segment_files(dir.path())[0].0.clone();
    put_object(
        &*plain,
        &format!("robot/segments/{first}"),
        std::fs::read(dir.path().join(first)).unwrap(),
    );
    let store = Faulty::new(plain.clone(), Stop::Never);
    let report = ship_to(
        dir.path(),
        &remote_of(&store, "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(report.segments[0].action, Action::Adopted);
    assert_eq!(
        store.counts.uploads_of(&format!("robot/segments/{first}")),
        0
    );
    assert_eq!(report.count(Action::Uploaded), expected.len() - 1);
    assert_shipped(&*plain, "robot", &expected);

    // An object of the right size but other bytes is replaced.
    let dir2 = tempfile::tempdir().unwrap();
    make_log(dir2.path(), 700, SEGMENT_BYTES);
    let mut bytes = std::fs::read(dir2.path().join(first)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    put_object(&*plain, &format!("robot2/segments/{first}"), bytes);
    let store = Faulty::new(plain.clone(), Stop::Never);
    let report = ship_to(
        dir2.path(),
        &remote_of(&store, "robot2"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(report.segments[0].action, Action::Uploaded);
    assert_shipped(&*plain, "robot2", &sealed_hashes(dir2.path()));
}

#[test]
fn a_manifest_of_another_log_is_refused() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    make_log(a.path(), 700, SEGMENT_BYTES);
    make_log(b.path(), 800, SEGMENT_BYTES + 1024);
    let plain = s3(&moto, "fleet");
    ship_to(
        a.path(),
        &remote(plain.clone(), "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    let before = object(&*plain, "robot/manifest.json").unwrap();
    let err = ship_to(
        b.path(),
        &remote(plain.clone(), "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::ForeignLog { .. }), "{err}");
    assert!(err.to_string().contains("belongs to another log"), "{err}");
    assert_eq!(
        object(&*plain, "robot/manifest.json").unwrap(),
        before,
        "the manifest is left as it was"
    );

    // A log with nothing sealed to ship is refused too: its active segment is one the
    // manifest holds sealed (every log starts at seq 0 from the same link).
    let c = tempfile::tempdir().unwrap();
    make_log(c.path(), 20, SEGMENT_BYTES);
    assert_eq!(segment_files(c.path()).len(), 1, "only the active segment");
    let err = ship_to(
        c.path(),
        &remote(plain.clone(), "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::ForeignLog { .. }), "{err}");
    assert!(err.to_string().contains("is its active one"), "{err}");
    assert_eq!(object(&*plain, "robot/manifest.json").unwrap(), before);
}

#[test]
fn a_manifest_changed_by_another_shipper_during_a_pass_is_not_overwritten() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 700, SEGMENT_BYTES);
    let plain = s3(&moto, "fleet");
    // A first pass ships the log, and the last segment's entry is then taken out
    // of the manifest, so that the next pass has something to add.
    ship_to(
        dir.path(),
        &remote(plain.clone(), "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    let mut m = Manifest::parse(&object(&*plain, "robot/manifest.json").unwrap()).unwrap();
    m.segments.pop();
    put_object(&*plain, "robot/manifest.json", m.to_bytes());
    // Between this pass's read of the manifest and its write, another shipper writes
    // the manifest (other bytes: an e-tag is the content's hash).
    let mut theirs = m.clone();
    theirs.segments.pop();
    let other = theirs.to_bytes();
    let writer = plain.clone();
    let store = Faulty::with_hook(
        plain.clone(),
        Box::new(move || {
            // From another thread: the hook runs inside the shipper's runtime.
            std::thread::spawn(move || put_object(&*writer, "robot/manifest.json", other))
                .join()
                .unwrap();
        }),
    );
    let err = ship_to(
        dir.path(),
        &remote_of(&store, "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    assert_eq!(
        object(&*plain, "robot/manifest.json").unwrap(),
        theirs.to_bytes(),
        "the other shipper's manifest stays"
    );
}

#[test]
fn remote_verify_passes_with_the_local_digest_and_names_a_tampered_segment() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), EVENTS, SEGMENT_BYTES);
    let files = segment_files(dir.path());
    let plain = s3(&moto, "fleet");
    for prefix in ["intact", "changed", "deleted", "gap"] {
        ship_to(
            dir.path(),
            &remote(plain.clone(), prefix),
            &ShipOptions::default(),
            |_| {},
        )
        .unwrap();
    }

    let report = verify_remote(&remote(plain.clone(), "intact"), None, None).unwrap();
    let last = report.log.last.unwrap();
    // The last shipped seq is the one before the active segment's first, by its name.
    let active_first: u64 = files
        .last()
        .unwrap()
        .0
        .trim_end_matches(".bbx")
        .parse()
        .unwrap();
    assert_eq!(last.seq, active_first - 1);
    assert_eq!(last, local_digest_of_sealed(dir.path()));
    // The local log holds the prefix the remote digest names.
    blackbox_log::verify(dir.path(), None, Some(&last)).unwrap();
    assert_eq!(report.log.segments, files.len() - 1);

    let victim = &files[files.len() / 2].0;
    let mut bytes = object(&*plain, &format!("changed/segments/{victim}")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    put_object(&*plain, &format!("changed/segments/{victim}"), bytes);
    let err = verify_remote(&remote(plain.clone(), "changed"), None, None).unwrap_err();
    assert!(matches!(err, Error::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains(victim.as_str()), "{err}");

    delete_object(&*plain, &format!("deleted/segments/{victim}"));
    let err = verify_remote(&remote(plain.clone(), "deleted"), None, None).unwrap_err();
    assert!(err.to_string().contains(victim.as_str()), "{err}");
    assert!(err.to_string().contains("no object"), "{err}");

    let mut m = Manifest::parse(&object(&*plain, "gap/manifest.json").unwrap()).unwrap();
    let at = m.segments.iter().position(|s| &s.name == victim).unwrap();
    m.segments.remove(at);
    put_object(&*plain, "gap/manifest.json", m.to_bytes());
    let err = verify_remote(&remote(plain.clone(), "gap"), None, None).unwrap_err();
    assert!(matches!(err, Error::Manifest { .. }), "{err}");
    let next = &files[files.len() / 2 + 1].0;
    assert!(
        err.to_string().contains(next.as_str()),
        "the gap is named by the segment after it: {err}"
    );
}

#[test]
fn a_changed_object_with_a_matching_manifest_entry_fails_the_logs_own_verify() {
    // Someone who rewrites an object and its manifest entry's blake3 and size together
    // is caught by the chain.
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 700, SEGMENT_BYTES);
    let files = segment_files(dir.path());
    let plain = s3(&moto, "fleet");
    ship_to(
        dir.path(),
        &remote(plain.clone(), "robot"),
        &ShipOptions::default(),
        |_| {},
    )
    .unwrap();
    let victim = &files[1].0;
    let mut bytes = object(&*plain, &format!("robot/segments/{victim}")).unwrap();
    // A byte in the middle of the blocks (past the 96-byte header).
    let at = 96 + (bytes.len() - 96) / 3;
    bytes[at] ^= 0x40;
    let hash = blake3::hash(&bytes).to_hex().to_string();
    put_object(&*plain, &format!("robot/segments/{victim}"), bytes);
    let mut m = Manifest::parse(&object(&*plain, "robot/manifest.json").unwrap()).unwrap();
    m.segments[1].blake3 = hash;
    put_object(&*plain, "robot/manifest.json", m.to_bytes());
    let err = verify_remote(&remote(plain.clone(), "robot"), None, None).unwrap_err();
    assert!(matches!(err, Error::Verify { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("s3://test/robot/segments/{victim}")),
        "{err}"
    );
}
