//! A simulated fleet on a real S3 API server (moto): a hundred robots' logs shipped
//! under one prefix, three of them damaged in three ways, the fleet listed and
//! verified side by side. The oracle is each local log (its digest computed here from
//! copies of its sealed segment files) and the damage the test did.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use blackbox_ship::{Error, Remote, ShipOptions, list_fleet, ship_to, verify_fleet};
use common::moto::Moto;
use common::{delete_object, local_digest_of_sealed, make_log, object, put_object, s3};
use object_store::path::Path;

const ROBOTS: usize = 100;
const SEGMENT_BYTES: u64 = 8 << 10;

#[test]
fn a_fleet_of_a_hundred_logs_is_shipped_listed_and_verified_robot_by_robot() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let store = s3(&moto, "fleet");
    let fleet = Remote::with_store(store.clone(), Path::from("logs"), "s3://fleet/logs", true);
    let dirs = tempfile::tempdir().unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..ROBOTS {
        let name = format!("robot-{i:03}");
        let dir = dirs.path().join(&name);
        // Logs of different lengths: no two robots hold the same log.
        make_log(&dir, 250 + 7 * i as u64, SEGMENT_BYTES);
        ship_to(&dir, &fleet.child(&name), &ShipOptions::default(), |_| {}).unwrap();
        expected.insert(name, local_digest_of_sealed(&dir));
    }
    // Something else beside the robots: an object directly under the fleet's prefix
    // is not a robot.
    put_object(&*store, "logs/README", b"fleet of the test".to_vec());

    // Three robots damaged: a byte of a segment changed, a segment deleted, the
    // manifest deleted.
    let changed = "logs/robot-017/segments/00000000000000000000.bbx";
    let mut bytes = object(&*store, changed).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    put_object(&*store, changed, bytes);
    let manifest =
        String::from_utf8(object(&*store, "logs/robot-063/manifest.json").unwrap()).unwrap();
    let second =
        serde_json::from_str::<serde_json::Value>(&manifest).unwrap()["segments"][1]["name"]
            .as_str()
            .unwrap()
            .to_owned();
    delete_object(&*store, &format!("logs/robot-063/segments/{second}"));
    delete_object(&*store, "logs/robot-088/manifest.json");

    let logs = list_fleet(&fleet).unwrap();
    let names: Vec<&str> = logs.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        expected.keys().map(String::as_str).collect::<Vec<_>>(),
        "every robot, in order, the robot whose manifest is gone among them"
    );
    let done = AtomicUsize::new(0);
    let results = verify_fleet(&logs, None, 4, |_, _| {
        done.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(done.load(Ordering::Relaxed), ROBOTS);
    assert_eq!(results.len(), ROBOTS);
    for ((name, digest), (log, result)) in expected.iter().zip(logs.iter().zip(&results)) {
        assert_eq!(&log.name, name);
        match name.as_str() {
            "robot-017" => {
                let err = result.as_ref().unwrap_err();
                assert!(
                    matches!(err, Error::Mismatch { segment, .. } if segment == "00000000000000000000.bbx"),
                    "{err}"
                );
            }
            "robot-063" => {
                let err = result.as_ref().unwrap_err();
                assert!(
                    matches!(err, Error::Mismatch { segment, .. } if *segment == second),
                    "{err}"
                );
            }
            "robot-088" => {
                let err = result.as_ref().unwrap_err();
                assert!(matches!(err, Error::Manifest { .. }), "{err}");
            }
            _ => {
                let report = result.as_ref().unwrap();
                assert_eq!(report.log.last.as_ref(), Some(digest), "{name}");
            }
        }
    }
    // One request lists the fleet: the listing is delimited, not a walk of every object.
    let counted = common::Faulty::new(store, common::Stop::Never);
    let fleet = Remote::with_store(counted.clone(), Path::from("logs"), "s3://fleet/logs", true);
    assert_eq!(list_fleet(&fleet).unwrap().len(), ROBOTS);
    assert_eq!(counted.counts.requests.load(Ordering::SeqCst), 1);
}
