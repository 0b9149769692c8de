//! Payloads are 8-byte aligned, so an rkyv archive appended as a payload can be
//! accessed in place, without a copy, with rkyv's own validation (which checks
//! alignment). Odd-sized records in between must not shift the alignment.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType};

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, PartialEq)]
struct Pose {
    x: f64,
    y: f64,
    stamp_ns: u64,
    frame: String,
}

#[test]
fn rkyv_archives_are_read_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(
        dir.path(),
        LogOptions::new()
            .durability(Durability::Buffered)
            .segment_bytes_max(4096),
    )
    .unwrap();
    let mut poses = Vec::new();
    for i in 0..200u64 {
        let pose = Pose {
            x: i as f64 * 0.5,
            y: -(i as f64),
            stamp_ns: i * 1_000,
            frame: format!("arm-{i}"),
        };
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&pose).unwrap();
        log.append(Record::new(RecordType(7), i, &bytes)).unwrap();
        // An odd-sized record between archives.
        log.append(Record::new(RecordType(8), i, &vec![1u8; (i % 13) as usize]))
            .unwrap();
        poses.push(pose);
    }
    log.close().unwrap();

    let reader = LogReader::open(dir.path()).unwrap();
    let mut read = 0;
    for r in reader.records(..).unwrap() {
        let r = r.unwrap();
        if r.record_type() != RecordType(7) {
            continue;
        }
        assert_eq!(r.payload().as_ptr() as usize % 8, 0);
        let archived = rkyv::access::<ArchivedPose, rkyv::rancor::Error>(r.payload()).unwrap();
        let want = &poses[read];
        assert_eq!(archived.x, want.x);
        assert_eq!(archived.y, want.y);
        assert_eq!(archived.stamp_ns, want.stamp_ns);
        assert_eq!(archived.frame.as_str(), want.frame);
        read += 1;
    }
    assert_eq!(read, poses.len());
}
