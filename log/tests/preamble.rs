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

#[test]
fn the_size_limit_counts_the_records_after_a_preamble_larger_than_it() {
    // Guards a past bug: a segment rolled once its size with the preamble passed the
    // limit, so a preamble larger than the limit (a recorder's dictionary of many
    // names) made a segment of every record: 200 events, 204 segments of 6 MB.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new().segment_bytes_max(4096)).unwrap();
    log.set_segment_preamble(vec![(DICT, vec![7u8; 64 << 10])])
        .unwrap();
    for seq in 0..200u64 {
        log.append(Record::new(RecordType(1), seq, &[1u8; 100]))
            .unwrap();
    }
    log.close().unwrap();

    let reader = LogReader::open(dir.path()).unwrap();
    let segments = blackbox_log::list_segments(dir.path()).unwrap();
    // By hand: each append is a block of its own, 72 bytes of header and a frame of
    // about 112: some 20 records in 4096 bytes, 10 segments, not one per record.
    assert!(
        (5..=12).contains(&segments.len()),
        "{} segments",
        segments.len()
    );
    for (i, s) in segments.iter().enumerate() {
        let end = segments
            .get(i + 1)
            .map_or(Seq(200 + 7), |n| Seq(n.first_seq));
        let records: Vec<_> = reader
            .records(Seq(s.first_seq)..end)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let own = records
            .iter()
            .filter(|r| r.record_type() == RecordType(1))
            .count();
        assert!(own * 100 <= 4096, "segment {i} holds {own} records");
        if i + 1 < segments.len() {
            assert!(own >= 15, "segment {i} holds only {own} records");
        }
        // Every segment but the first opens with the preamble, whole.
        if i > 0 {
            assert_eq!(records[0].record_type(), DICT);
            assert_eq!(records[0].payload().len(), 64 << 10);
        }
        let bytes = std::fs::metadata(&s.path).unwrap().len();
        assert!(
            bytes <= (64 << 10) + 4096 + 4096,
            "segment {i}: {bytes} bytes"
        );
    }
}

#[test]
fn records_pushed_onto_the_preamble_and_cut_from_it_open_the_next_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(
        dir.path(),
        LogOptions::new()
            .segment_bytes_max(4096)
            .record_bytes_max(100),
    )
    .unwrap();
    let (a, b) = (RecordType(2), RecordType(3));
    log.set_segment_preamble(vec![(DICT, vec![1])]).unwrap();
    log.push_segment_preamble(a, vec![2]).unwrap();
    log.push_segment_preamble(b, vec![3]).unwrap();
    // Over the record limit, or the log's own type: refused, the preamble unchanged.
    assert!(log.push_segment_preamble(a, vec![0; 101]).is_err());
    assert!(
        log.push_segment_preamble(blackbox_log::retention::PRUNE_RECORD_TYPE, vec![])
            .is_err()
    );
    // Each phase fills a few segments; the preamble changes between phases.
    let mut ts = 0;
    let mut phase = |log: &mut Log| {
        for _ in 0..100 {
            log.append(Record::new(RecordType(1), ts, &[0u8; 90]))
                .unwrap();
            ts += 1;
        }
        blackbox_log::list_segments(dir.path()).unwrap()
    };
    let first = phase(&mut log);
    log.truncate_segment_preamble(1);
    log.push_segment_preamble(b, vec![4]).unwrap();
    let second = phase(&mut log);
    log.truncate_segment_preamble(9);
    let third = phase(&mut log);
    log.close().unwrap();
    assert!(first.len() > 2 && second.len() > first.len() + 1 && third.len() > second.len() + 1);

    // By hand: what each segment opens with, by the phase that started it.
    let reader = LogReader::open(dir.path()).unwrap();
    let opening = |seq: u64, n: usize| -> Vec<(u16, Vec<u8>)> {
        reader
            .records(Seq(seq)..)
            .unwrap()
            .take(n)
            .map(|r| {
                let r = r.unwrap();
                (r.record_type().0, r.payload().to_vec())
            })
            .collect()
    };
    let all = blackbox_log::list_segments(dir.path()).unwrap();
    for (i, segment) in all.iter().enumerate().skip(1) {
        let want: Vec<(u16, Vec<u8>)> = if first.iter().any(|s| s.first_seq == segment.first_seq) {
            vec![(9, vec![1]), (2, vec![2]), (3, vec![3])]
        } else {
            // A truncate past the end keeps it all.
            vec![(9, vec![1]), (3, vec![4])]
        };
        let got = opening(segment.first_seq, want.len() + 1);
        assert_eq!(&got[..want.len()], &want[..], "segment {i}");
        assert_eq!(got[want.len()].0, 1, "segment {i}: the preamble is longer");
    }
}
