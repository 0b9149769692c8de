//! The event record's layout, byte by byte (docs/FORMAT.md, "Event records"): the
//! expected bytes are written out by hand here, not produced by the encoder.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use blackbox::codec::{self, Encoding, EventRecord, Payload, WrittenTier};
use blackbox::{Config, Event, Recorder};

fn record(kind: u32) -> EventRecord {
    EventRecord {
        recorded_ns: 1_000,
        weight: 1.0,
        event_time_ns: None,
        payload: Payload::from_slice(b"abc"),
        values: vec![],
        kind,
        source: 0,
        tier: WrittenTier::Full as u8,
        encoding: Encoding::Raw as u8,
    }
}

#[test]
fn a_plain_event_is_an_eight_byte_header_and_its_payload() {
    // kind 7, flags: tier full (0), encoding raw (2 << 2 = 8), no optional field; zero
    // byte; no values; then the payload. The recorded time is the log's timestamp.
    let expected = [7, 0, 0, 0, 8, 0, 0, 0, b'a', b'b', b'c'];
    assert_eq!(record(7).to_bytes(1_000), expected);
    let v = codec::decode_event(&expected, 1_000).unwrap();
    assert_eq!(
        (
            v.kind,
            v.source,
            v.tier,
            v.encoding,
            v.recorded_ns,
            v.weight
        ),
        (7, 0, WrittenTier::Full, Encoding::Raw, 1_000, 1.0)
    );
    assert_eq!(
        (v.event_time_ns, v.values.len(), v.payload),
        (None, 0, &b"abc"[..])
    );
    // Read under another stamp, the same bytes say the event was recorded then.
    assert_eq!(codec::decode_event(&expected, 5).unwrap().recorded_ns, 5);
}

#[test]
fn every_optional_field_is_stored_in_its_place_when_present() {
    let mut r = record(0x0001_0000);
    r.source = 3;
    r.event_time_ns = Some(0x0102_0304_0506_0708);
    r.recorded_ns = 900; // pre-roll: before the record's stamp
    r.weight = 2.5;
    r.tier = WrittenTier::Preroll as u8;
    r.encoding = Encoding::Json as u8;
    r.values = vec![(5, -1.0), (65_536, 0.5)];
    r.payload = Payload::from_slice(b"{}");
    let mut expected = vec![0x00, 0x00, 0x01, 0x00]; // kind 65 536
    expected.push(0b1111_0110); // all four fields, encoding json (1 << 2), tier preroll (2)
    expected.push(0);
    expected.extend_from_slice(&[2, 0]); // two values
    expected.extend_from_slice(&[3, 0, 0, 0]); // source
    expected.extend_from_slice(&[8, 7, 6, 5, 4, 3, 2, 1]); // event time
    expected.extend_from_slice(&[0x84, 0x03, 0, 0, 0, 0, 0, 0]); // recorded: 900
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x04, 0x40]); // 2.5
    expected.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0xbf]); // 5: -1.0
    expected.extend_from_slice(&[0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f]); // 65 536: 0.5
    expected.extend_from_slice(b"{}");
    assert_eq!(r.to_bytes(1_000), expected);
    let v = codec::decode_event(&expected, 1_000).unwrap();
    assert_eq!(
        (v.kind, v.source, v.tier, v.encoding),
        (65_536, 3, WrittenTier::Preroll, Encoding::Json)
    );
    assert_eq!(
        (v.event_time_ns, v.recorded_ns, v.weight),
        (Some(0x0102_0304_0506_0708), 900, 2.5)
    );
    assert_eq!(
        v.values.iter().collect::<Vec<_>>(),
        vec![(5, -1.0), (65_536, 0.5)]
    );
    assert_eq!(v.payload, b"{}");
    assert_eq!(v.to_record(), r);
}

#[test]
fn damaged_and_hostile_event_records_are_refused_with_a_sentence() {
    let mut full = record(7);
    full.source = 3;
    full.event_time_ns = Some(1);
    full.weight = 3.0;
    full.values = vec![(4, 1.0)];
    full.payload = Payload::new();
    full.encoding = Encoding::None as u8;
    let bytes = full.to_bytes(2_000);
    assert_eq!(bytes.len(), 8 + 4 + 8 + 8 + 8 + 12);
    // Every cut short of the whole is refused (nothing is read past the end).
    for cut in 0..bytes.len() {
        let err = codec::decode_event(&bytes[..cut], 2_000).unwrap_err();
        assert!(
            err.starts_with("the record ends inside its "),
            "{cut}: {err}"
        );
    }
    assert!(codec::decode_event(&bytes, 2_000).is_ok());
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: [(&str, Edit); 7] = [
        ("kind id 0", Box::new(|b| b[0..4].copy_from_slice(&[0; 4]))),
        (
            "kind id 65537",
            Box::new(|b| b[0..4].copy_from_slice(&65_537u32.to_le_bytes())),
        ),
        (
            "source id 0",
            Box::new(|b| b[8..12].copy_from_slice(&[0; 4])),
        ),
        (
            "value name id 0",
            Box::new(|b| b[36..40].copy_from_slice(&[0; 4])),
        ),
        ("encoding 3", Box::new(|b| b[4] |= 0b1100)),
        ("reserved byte", Box::new(|b| b[5] = 1)),
        ("payload on none", Box::new(|b| b.push(1))),
    ];
    for (what, edit) in cases {
        let mut b = bytes.clone();
        edit(&mut b);
        assert!(codec::decode_event(&b, 2_000).is_err(), "{what}");
    }
    // A value count past the limit is refused before the values are looked at, and a
    // count the record cannot hold is refused as a short record.
    let mut b = bytes.clone();
    b[6..8].copy_from_slice(&1025u16.to_le_bytes());
    let err = codec::decode_event(&b, 2_000).unwrap_err();
    assert!(err.contains("1025 values, more than 1024"), "{err}");
    b[6..8].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(codec::decode_event(&b, 2_000).is_err());
    b[6..8].copy_from_slice(&2u16.to_le_bytes());
    let err = codec::decode_event(&b, 2_000).unwrap_err();
    assert!(err.contains("values (12 of 24 bytes)"), "{err}");
}

#[test]
fn a_recorded_100_byte_event_takes_108_bytes_of_record() {
    // Through the recorder: a full-tier event without source, event time, weight or
    // values is its 8-byte header and its payload; the log's frame adds 16 bytes.
    let dir = tempfile::tempdir().unwrap();
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    for _ in 0..10 {
        rec.record(&Event::new("probe").raw(&[0xa5; 100])).unwrap();
    }
    rec.close().unwrap();
    let reader = blackbox::LogReader::open(dir.path()).unwrap();
    let mut events = 0;
    for r in reader.records(..).unwrap() {
        let r = r.unwrap();
        if r.record_type() == codec::EVENT {
            assert_eq!(r.payload().len(), 108);
            assert_eq!(r.payload()[8..], [0xa5; 100]);
            events += 1;
        }
    }
    assert_eq!(events, 10);
}
