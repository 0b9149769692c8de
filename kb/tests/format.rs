//! `docs/FORMAT.md` ("Knowledge-base commits") against the code: its example decodes as
//! a commit record, its numbers follow the documented rule (by hand), and a fact is
//! written with its fields in the order the table lists them.

use blackbox_kb::{CommitRecord, Fact, Rival};

fn format_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FORMAT.md");
    std::fs::read_to_string(path).expect("docs/FORMAT.md is readable")
}

/// The section of FORMAT.md on knowledge-base commits.
fn section(doc: &str) -> &str {
    let start = doc
        .find("### Knowledge-base commits")
        .expect("the section is there");
    let rest = &doc[start..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    &rest[..end]
}

/// `1 − Π(1 − k)`, times 0.1 per refutation.
fn by_hand(claims: &[f64], refutations: u64) -> f64 {
    let support = 1.0 - claims.iter().map(|k| 1.0 - k).product::<f64>();
    (0..refutations).fold(support, |c, _| c * 0.1)
}

fn check(value: &str, confidence: f64, claims: &[f64], refutations: u64) {
    assert!(
        (confidence - by_hand(claims, refutations)).abs() < 1e-12,
        "{value}: confidence {confidence}, the claims {claims:?} and {refutations} refutations give {}",
        by_hand(claims, refutations)
    );
}

#[test]
fn the_documented_commit_decodes_and_its_numbers_follow_the_rule() {
    let doc = format_md();
    let section = section(&doc);
    let start = section.find("```json\n").expect("an example") + "```json\n".len();
    let end = start + section[start..].find("```").expect("the example ends");
    let record: CommitRecord =
        serde_json::from_str(&section[start..end]).expect("the example is a commit record");
    let fact: &Fact = record.changes[0].fact.as_ref().expect("a fact");
    check("the fact", fact.confidence, &fact.claims, fact.refutations);
    let others: Vec<&Rival> = fact.rivals.iter().chain(&fact.refuted).collect();
    assert_eq!(
        others.len(),
        2,
        "the example shows a rival and a refuted value"
    );
    for r in others {
        check(&r.value.to_string(), r.confidence, &r.claims, r.refutations);
    }
}

#[test]
fn a_fact_is_written_with_its_fields_in_the_documented_order() {
    let doc = format_md();
    let section = section(&doc);
    let table = &section[section
        .find("A fact (`blackbox_kb::Fact`)")
        .expect("the fact's table")..];
    let documented: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    let rival = Rival {
        value: serde_json::json!("right"),
        confidence: 0.05,
        claims: vec![0.5],
        evidence_count: 1,
        conditions: Default::default(),
        provenance: vec![9],
        refutations: 1,
        counter_evidence: vec![16],
    };
    let fact = Fact {
        key: "k".to_owned(),
        value: serde_json::json!(1),
        confidence: 0.05,
        claims: vec![0.5],
        evidence_count: 1,
        status: blackbox_kb::Status::Rejected,
        conditions: Default::default(),
        provenance: vec![1],
        refutations: 1,
        counter_evidence: vec![2],
        created: 1,
        updated: 2,
        rivals: vec![rival.clone()],
        refuted: vec![rival],
    };
    let text = serde_json::to_string(&fact).expect("a fact serializes");
    let top: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).expect("and reads back");
    assert_eq!(top.len(), documented.len(), "{text}");
    let mut positions: Vec<(usize, &str)> = documented
        .iter()
        .map(|f| {
            // The first occurrence is the fact's own: its rivals come after its fields.
            let at = [format!("{{\"{f}\":"), format!(",\"{f}\":")]
                .iter()
                .filter_map(|p| text.find(p.as_str()))
                .min()
                .unwrap_or_else(|| panic!("{f} is not written: {text}"));
            (at, *f)
        })
        .collect();
    positions.sort_unstable();
    let written: Vec<&str> = positions.into_iter().map(|(_, f)| f).collect();
    assert_eq!(written, documented);
}
