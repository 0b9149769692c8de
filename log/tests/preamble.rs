//! The segment preamble: records that open every new segment, so a segment can be read
//! alone by a layer whose records refer to definitions (the recorder's dictionary).
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use blackbox_log::{Log, LogOptions, LogReader, Record, RecordType, Seq};

const DICT: RecordType = RecordType(9);

#[test]
fn every_new_segment_starts_with_the_preamble_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new().segment_bytes_max(4096)).unwrap();
    let mut versions_seen = 0u8;
    for seq in 0..400u64 {
        if seq % 100 == 0 {
            versions_seen += 1;
            let version = vec![versions_seen; 10];
            log.set_segment_preamble(vec![(DICT, version)]).unwrap();
        }
        log.append(Record::new(RecordType(1), seq * 7, &[0u8; 60]))
            .unwrap();
    }
    log.close().unwrap();

    let reader = LogReader::open(dir.path()).unwrap();
    let segments = blackbox_log::list_segments(dir.path()).unwrap();
    assert!(segments.len() > 5);
    let mut last_version = 0u8;
    for (i, s) in segments.iter().enumerate() {
        let first = reader
            .records(Seq(s.first_seq)..)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        if i == 0 {
            assert_eq!(
                first.record_type(),
                RecordType(1),
                "the first segment has none"
            );
            continue;
        }
        assert_eq!(first.record_type(), DICT, "segment {}", s.path.display());
        let version = first.payload()[0];
        assert!(first.payload().iter().all(|&b| b == version));
        assert!(
            version >= last_version,
            "an older preamble after a newer one"
        );
        last_version = version;
        // Stamped no earlier than the record before it and no later than the next.
        let next = reader
            .records(Seq(s.first_seq + 1)..)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert!(first.ts_ns() <= next.ts_ns());
    }
    assert!(last_version >= 3);
    blackbox_log::verify(dir.path(), None, None).unwrap();
}

#[test]
fn an_oversized_preamble_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new().record_bytes_max(100)).unwrap();
    assert!(
        log.set_segment_preamble(vec![(DICT, vec![0; 101])])
            .is_err()
    );
}
