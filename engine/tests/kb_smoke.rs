#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use blackbox::{AsOf, Conditions, Config, Event, Outcome, Provenance, Recorder, Status};
use serde_json::json;

#[test]
fn smoke() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    let seq = rec
        .record_evidence(&Event::new("obs.button").json(r#"{"moved":"left"}"#))
        .unwrap();
    let kb = rec.kb().unwrap();
    let c = kb
        .assert(
            "button.red",
            json!("left"),
            0.6,
            &Conditions::new(),
            Provenance::new([seq]),
        )
        .unwrap();
    assert_eq!((c.version, c.outcome), (1, Outcome::Created));
    let c2 = kb
        .assert(
            "button.red",
            json!("left"),
            0.6,
            &Conditions::new(),
            Provenance::new([seq]),
        )
        .unwrap();
    assert_eq!((c2.version, c2.outcome), (2, Outcome::Corroborated));
    let err = kb
        .assert(
            "button.red",
            json!("x"),
            0.6,
            &Conditions::new(),
            Provenance::new([blackbox::Seq(10_000)]),
        )
        .unwrap_err();
    assert!(err.to_string().contains("evidence"), "{err}");
    let f = kb
        .get_as_of("button.red", AsOf::Version(1))
        .unwrap()
        .unwrap();
    assert!((f.confidence - 0.6).abs() < 1e-12);
    assert_eq!(f.status, Status::Hypothesis);
    let r = kb
        .refute("button.red", &json!("left"), Provenance::new([seq]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    rec.close().unwrap();
    drop(rec);
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    let kb = rec.kb().unwrap();
    assert_eq!(kb.version().unwrap(), 3);
    let before = kb.view().dump().unwrap();
    kb.rebuild().unwrap();
    assert_eq!(before, kb.view().dump().unwrap());
}
