//! The retention policy's public behaviour: the TOML shape of DESIGN §5 and the Rust
//! builder describe the same policies, classification follows the first matching rule,
//! and every refused policy says on which line and why.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

use blackbox::policy::{
    Classification, IncidentPolicy, KindError, POLICY_FILE_BYTES_MAX, Policy, PolicyError, Rule,
    Sampling, Tier, parse_duration, validate_kind,
};
use proptest::prelude::*;

const SECOND_NS: u64 = 1_000_000_000;

/// The example policy of DESIGN §5, verbatim.
const DESIGN_EXAMPLE: &str = r#"default = "full"              # tier of kinds that no rule matches

[[rules]]
match = "debug.*"             # glob over the dotted kind; first match wins
tier = "drop"

[[rules]]
match = "sensor.*"
tier = "summary"
window = "1s"

[[rules]]
match = "trajectory.*"
tier = "sample"
every = 10                    # or: rate = 0.1

[incident]
triggers = ["failure.*", "takeover.*"]
preroll = "30s"
postroll = "10s"
preroll_bytes_max = "64MiB"   # the ring's memory bound
"#;

fn design_example_built() -> Policy {
    Policy::builder()
        .default_tier(Tier::Full)
        .rule("debug.*", Tier::Drop)
        .rule(
            "sensor.*",
            Tier::Summary {
                window_ns: SECOND_NS,
            },
        )
        .rule("trajectory.*", Tier::Sample(Sampling::Every(10)))
        .incident(IncidentPolicy::new(&["failure.*", "takeover.*"]))
        .build()
        .unwrap()
}

#[test]
fn design_example_parses_to_the_expected_policy() {
    let policy = Policy::from_toml_str(DESIGN_EXAMPLE).unwrap();

    assert_eq!(policy.default_tier(), &Tier::Full);
    assert_eq!(
        policy.rules(),
        [
            Rule {
                pattern: "debug.*".to_owned(),
                tier: Tier::Drop,
                preroll: false,
            },
            Rule {
                pattern: "sensor.*".to_owned(),
                tier: Tier::Summary {
                    window_ns: SECOND_NS,
                },
                preroll: false,
            },
            Rule {
                pattern: "trajectory.*".to_owned(),
                tier: Tier::Sample(Sampling::Every(10)),
                preroll: false,
            },
        ]
    );
    assert_eq!(
        policy.incident(),
        Some(&IncidentPolicy {
            triggers: vec!["failure.*".to_owned(), "takeover.*".to_owned()],
            preroll_ns: 30 * SECOND_NS,
            postroll_ns: 10 * SECOND_NS,
            preroll_bytes_max: 64 * 1024 * 1024,
        })
    );
    assert_eq!(policy, design_example_built());
}

#[test]
fn design_example_classifies_kinds() {
    let policy = Policy::from_toml_str(DESIGN_EXAMPLE).unwrap();
    let cases: &[(&str, Tier, Option<usize>, bool)] = &[
        ("debug.x", Tier::Drop, Some(0), false),
        (
            "sensor.imu.accel",
            Tier::Summary {
                window_ns: SECOND_NS,
            },
            Some(1),
            false,
        ),
        (
            "trajectory.arm",
            Tier::Sample(Sampling::Every(10)),
            Some(2),
            false,
        ),
        ("action.grasp", Tier::Full, None, false),
        ("failure.motor", Tier::Full, None, true),
        ("takeover.operator", Tier::Full, None, true),
        // `*` after a dot needs the dot: the bare prefix is not matched.
        ("sensor", Tier::Full, None, false),
        // Matching is case-sensitive.
        ("Debug.x", Tier::Full, None, false),
        ("Failure.motor", Tier::Full, None, false),
    ];
    for (kind, tier, rule_index, trigger) in cases {
        assert_eq!(
            policy.classify(kind),
            Classification {
                tier: tier.clone(),
                rule_index: *rule_index,
                trigger: *trigger,
                preroll: false,
            },
            "{kind}"
        );
    }
}

#[test]
fn a_trigger_is_reported_whatever_the_kind_tier() {
    let policy = Policy::builder()
        .rule("failure.*", Tier::Sample(Sampling::Rate(0.5)))
        .incident(IncidentPolicy::new(&["*.motor"]))
        .build()
        .unwrap();
    assert_eq!(
        policy.classify("failure.motor"),
        Classification {
            tier: Tier::Sample(Sampling::Rate(0.5)),
            rule_index: Some(0),
            trigger: true,
            preroll: false,
        }
    );
    assert!(policy.classify("arm.motor").trigger);
    assert!(!policy.classify("failure.arm").trigger);
}

#[test]
fn first_matching_rule_wins() {
    let text = r#"
        [[rules]]
        match = "sensor.imu.*"
        tier = "full"

        [[rules]]
        match = "sensor.*"
        tier = "drop"

        [[rules]]
        match = "*.accel"
        tier = "sample"
        rate = 0.25
    "#;
    let policy = Policy::from_toml_str(text).unwrap();
    let rule_of = |kind: &str| {
        let class = policy.classify(kind);
        (class.rule_index, class.tier)
    };
    // All three rules match; the first one decides.
    assert_eq!(rule_of("sensor.imu.accel"), (Some(0), Tier::Full));
    // The second and the third match; the second decides.
    assert_eq!(rule_of("sensor.lidar.accel"), (Some(1), Tier::Drop));
    assert_eq!(
        rule_of("arm.accel"),
        (Some(2), Tier::Sample(Sampling::Rate(0.25)))
    );
    assert_eq!(rule_of("arm.velocity"), (None, Tier::Full));

    // The order, not the specificity, decides: reversed, the broad rule shadows the rest.
    let reversed = Policy::builder()
        .rule("*", Tier::Drop)
        .rule("sensor.imu.accel", Tier::Full)
        .build()
        .unwrap();
    assert_eq!(reversed.classify("sensor.imu.accel").rule_index, Some(0));
}

#[test]
fn glob_syntax_covers_one_character_classes_and_alternatives() {
    let policy = Policy::builder()
        .rule("arm?.pose", Tier::Drop)
        .rule("cam[0-3].frame", Tier::Sample(Sampling::Every(30)))
        .rule("{lidar,radar}.*", Tier::Summary { window_ns: 5 })
        .rule("a.\\*", Tier::Drop)
        .build()
        .unwrap();
    let rule_of = |kind: &str| policy.classify(kind).rule_index;
    assert_eq!(rule_of("arm1.pose"), Some(0));
    assert_eq!(rule_of("arm.pose"), None);
    assert_eq!(rule_of("arm12.pose"), None);
    assert_eq!(rule_of("cam2.frame"), Some(1));
    assert_eq!(rule_of("cam7.frame"), None);
    assert_eq!(rule_of("radar.sweep.raw"), Some(2));
    assert_eq!(rule_of("sonar.sweep"), None);
    // An escaped `*` is a literal star, which no valid kind holds.
    assert_eq!(rule_of("a.b"), None);
}

#[test]
fn builder_and_toml_agree() {
    let text = r#"
        default = "drop"

        [[rules]]
        match = "control.*"
        tier = "full"

        [[rules]]
        match = "camera.*.frame"
        tier = "sample"
        rate = 0.1

        [[rules]]
        match = "joint.?.torque"
        tier = "sample"
        every = 1

        [[rules]]
        match = "battery.*"
        tier = "summary"
        window = "1.5m"

        [incident]
        triggers = ["estop", "failure.*"]
        preroll = "2m"
        postroll = "500ms"
        preroll_bytes_max = 1048576
    "#;
    let built = Policy::builder()
        .default_tier(Tier::Drop)
        .rule("control.*", Tier::Full)
        .rule("camera.*.frame", Tier::Sample(Sampling::Rate(0.1)))
        .rule("joint.?.torque", Tier::Sample(Sampling::Every(1)))
        .rule(
            "battery.*",
            Tier::Summary {
                window_ns: 90 * SECOND_NS,
            },
        )
        .incident(IncidentPolicy {
            preroll_ns: 120 * SECOND_NS,
            postroll_ns: SECOND_NS / 2,
            preroll_bytes_max: 1 << 20,
            ..IncidentPolicy::new(&["estop", "failure.*"])
        })
        .build()
        .unwrap();
    let parsed = Policy::from_toml_str(text).unwrap();
    assert_eq!(parsed, built);
    for kind in [
        "control.arm",
        "camera.left.frame",
        "camera.frame",
        "joint.3.torque",
        "battery.level",
        "estop",
        "misc",
    ] {
        assert_eq!(parsed.classify(kind), built.classify(kind), "{kind}");
    }
    assert_eq!(parsed.classify("misc").tier, Tier::Drop);
}

#[test]
fn default_policy_keeps_everything_in_full() {
    let policy = Policy::default();
    assert_eq!(policy.default_tier(), &Tier::Full);
    assert!(policy.rules().is_empty());
    assert_eq!(policy.incident(), None);
    assert_eq!(
        policy.classify("failure.motor"),
        Classification {
            tier: Tier::Full,
            rule_index: None,
            trigger: false,
            preroll: false,
        }
    );
    assert_eq!(Policy::builder().build().unwrap(), policy);
}

#[test]
fn empty_and_comment_only_toml_is_the_default_policy() {
    assert_eq!(Policy::from_toml_str("").unwrap(), Policy::default());
    assert_eq!(
        Policy::from_toml_str("# nothing to say\n\n").unwrap(),
        Policy::default()
    );
}

#[test]
fn incident_settings_left_out_take_their_defaults() {
    let policy = Policy::from_toml_str("[incident]\ntriggers = [\"failure.*\"]\n").unwrap();
    assert_eq!(
        policy.incident(),
        Some(&IncidentPolicy::new(&["failure.*"]))
    );
    let defaults = IncidentPolicy::new(&[]);
    assert_eq!(defaults.preroll_ns, 30 * SECOND_NS);
    assert_eq!(defaults.postroll_ns, 10 * SECOND_NS);
    assert_eq!(defaults.preroll_bytes_max, 64 * 1024 * 1024);
}

#[test]
fn rules_may_be_written_as_an_inline_array() {
    let policy = Policy::from_toml_str(
        r#"rules = [{ match = "debug.*", tier = "drop" }, { match = "*", tier = "sample", every = 4 }]"#,
    )
    .unwrap();
    assert_eq!(policy.classify("debug.x").tier, Tier::Drop);
    assert_eq!(
        policy.classify("any.thing").tier,
        Tier::Sample(Sampling::Every(4))
    );
}

/// Each case: a policy text, the 1-based line the error must name, and a piece of the
/// reason that names the problem.
const BAD_POLICIES: &[(&str, usize, &str)] = &[
    // TOML syntax.
    ("default = \"full\n", 1, "invalid basic string"),
    (
        "default = \"full\"\n\n[[rules]\nmatch = \"a\"\n",
        3,
        "unclosed array table",
    ),
    ("default = full\n", 1, "invalid boolean"),
    (
        "[[rules]]\nmatch = \"a\"\nmatch = \"b\"\ntier = \"full\"\n",
        3,
        "duplicate key",
    ),
    // Unknown keys, at the top, in a rule and in the incident table.
    (
        "default = \"full\"\ndefaults = \"drop\"\n",
        2,
        "unknown field `defaults`",
    ),
    (
        "[[rules]]\nmatch = \"a.*\"\ntier = \"drop\"\nwindows = \"1s\"\n",
        4,
        "unknown field `windows`",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npre_roll = \"1s\"\n",
        3,
        "unknown field `pre_roll`",
    ),
    ("[sampling]\nx = 1\n", 1, "unknown field `sampling`"),
    // Wrong shapes and types.
    (
        "[rules]\nmatch = \"a\"\ntier = \"full\"\n",
        1,
        "expected a sequence",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = \"10\"\n",
        4,
        "invalid type: string \"10\"",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = 2.5\n",
        4,
        "invalid type: floating point `2.5`",
    ),
    (
        "[[rules]]\nmatch = 3\ntier = \"full\"\n",
        2,
        "invalid type: integer `3`",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\nwindow = 1\n",
        4,
        "invalid type: integer `1`",
    ),
    // Unknown tiers.
    (
        "default = \"full\"\n[[rules]]\nmatch = \"a.*\"\ntier = \"fulll\"\n",
        4,
        "unknown tier \"fulll\": expected full, sample, summary or drop",
    ),
    (
        "default = \"keep\"\n",
        1,
        "unknown tier \"keep\": expected full, sample, summary or drop",
    ),
    (
        "default = \"sample\"\n",
        1,
        "the default tier takes no parameters",
    ),
    ("default = \"summary\"\n", 1, "match = \"*\""),
    // Missing `match` or `tier`: the line of the rule's header.
    (
        "default = \"full\"\n\n[[rules]]\ntier = \"drop\"\n",
        3,
        "rule has no match pattern",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"full\"\n\n[[rules]]\nmatch = \"b\"\n",
        5,
        "rule has no tier",
    ),
    // Globs.
    (
        "[[rules]]\nmatch = \"a[b\"\ntier = \"drop\"\n",
        2,
        "invalid glob \"a[b\": unclosed character class",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"drop\"\n[[rules]]\nmatch = \"{a,b\"\ntier = \"drop\"\n",
        5,
        "invalid glob \"{a,b\"",
    ),
    (
        "[[rules]]\nmatch = \"\"\ntier = \"drop\"\n",
        2,
        "empty glob",
    ),
    (
        "[[rules]]\nmatch = \"sensor/*\"\ntier = \"drop\"\n",
        2,
        "contains '/'",
    ),
    (
        "[[rules]]\nmatch = \"debug.* \"\ntier = \"drop\"\n",
        2,
        "whitespace",
    ),
    // Sampling parameters.
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = 0\n",
        4,
        "every must be at least 1",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = -3\n",
        4,
        "every must be at least 1 (keep 1 in N events), got -3",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nrate = 0\n",
        4,
        "rate must be greater than 0 and at most 1",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nrate = 1.5\n",
        4,
        "rate must be greater than 0 and at most 1 (the fraction kept), got 1.5",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nrate = -0.1\n",
        4,
        "rate must be greater than 0",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nrate = nan\n",
        4,
        "got NaN",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = 10\nrate = 0.1\n",
        5,
        "every or rate, not both",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nrate = 0.1\n\nevery = 10\n",
        6,
        "every or rate, not both",
    ),
    (
        "[[rules]]\nmatch = \"a\"\n\ntier = \"sample\"\n",
        4,
        "a sample rule needs every = N",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"full\"\nevery = 10\n",
        4,
        "every applies only to sample rules, not to a full rule",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\nwindow = \"1s\"\nrate = 0.5\n",
        5,
        "rate applies only to sample rules, not to a summary rule",
    ),
    // Summary windows.
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\n",
        3,
        "a summary rule needs a window",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"sample\"\nevery = 2\nwindow = \"1s\"\n",
        5,
        "window applies only to summary rules, not to a sample rule",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"drop\"\nwindow = \"1s\"\n",
        4,
        "window applies only to summary rules, not to a drop rule",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\nwindow = \"5x\"\n",
        4,
        "invalid window: duration \"5x\" has an unknown unit \"x\"",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\nwindow = \"1\"\n",
        4,
        "invalid window: duration \"1\" has no unit",
    ),
    (
        "[[rules]]\nmatch = \"a\"\ntier = \"summary\"\nwindow = \"0s\"\n",
        4,
        "summary window must be greater than 0",
    ),
    // Incident capture.
    (
        "\n[incident]\npreroll = \"30s\"\n",
        2,
        "incident capture needs at least one trigger glob",
    ),
    (
        "[incident]\ntriggers = []\n",
        2,
        "incident capture needs at least one trigger glob",
    ),
    (
        "[incident]\ntriggers = [\n  \"failure.*\",\n  \"takeover.[\",\n]\n",
        4,
        "invalid glob \"takeover.[\"",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npreroll = \"30\"\n",
        3,
        "invalid preroll: duration \"30\" has no unit",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npostroll = \"-1s\"\n",
        3,
        "invalid postroll: duration \"-1s\" is negative",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npreroll = \"99999999999h\"\n",
        3,
        "invalid preroll: duration \"99999999999h\" is too large",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npreroll_bytes_max = \"64mb\"\n",
        3,
        "invalid preroll_bytes_max: size \"64mb\" has an unknown unit \"mb\"",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npreroll_bytes_max = -1\n",
        3,
        "invalid preroll_bytes_max: size -1 is negative",
    ),
    (
        "[incident]\ntriggers = [\"a\"]\npreroll_bytes_max = true\n",
        3,
        "expected a size like \"64MiB\"",
    ),
];

#[test]
fn bad_policies_are_refused_with_line_and_reason() {
    for &(text, line, reason) in BAD_POLICIES {
        let err = Policy::from_toml_str(text).unwrap_err();
        assert_eq!(err.line, Some(line), "{text:?}: {err}");
        assert!(
            err.reason.contains(reason),
            "{text:?}: {err:?} does not say {reason:?}"
        );
        assert_eq!(err.path, None);
        assert_eq!(
            err.to_string(),
            format!("policy line {line}: {}", err.reason)
        );
    }
}

#[test]
fn an_unknown_tier_names_the_expected_ones_exactly() {
    let err = Policy::from_toml_str("[[rules]]\nmatch = \"x.*\"\ntier = \"fulll\"\n").unwrap_err();
    assert_eq!(
        err,
        PolicyError {
            path: None,
            line: Some(3),
            reason: "unknown tier \"fulll\": expected full, sample, summary or drop".to_owned(),
        }
    );
}

#[test]
fn lines_count_crlf_line_endings_too() {
    let err =
        Policy::from_toml_str("default = \"full\"\r\n[[rules]]\r\nmatch = \"a[\"\r\n").unwrap_err();
    assert_eq!(err.line, Some(3), "{err}");
}

#[test]
fn builder_refuses_invalid_rules_and_names_them() {
    let cases: Vec<(Result<Policy, PolicyError>, &str)> = vec![
        (
            Policy::builder()
                .rule("a", Tier::Full)
                .rule("b", Tier::Sample(Sampling::Every(0)))
                .build(),
            "rules[1] (\"b\"): every must be at least 1",
        ),
        (
            Policy::builder()
                .rule("a", Tier::Sample(Sampling::Rate(0.0)))
                .build(),
            "rules[0] (\"a\"): rate must be greater than 0 and at most 1",
        ),
        (
            Policy::builder()
                .rule("a", Tier::Sample(Sampling::Rate(1.000_001)))
                .build(),
            "rate must be greater than 0 and at most 1",
        ),
        (
            Policy::builder()
                .rule("a", Tier::Sample(Sampling::Rate(f64::NAN)))
                .build(),
            "got NaN",
        ),
        (
            Policy::builder()
                .rule("a", Tier::Summary { window_ns: 0 })
                .build(),
            "rules[0] (\"a\"): summary window must be greater than 0",
        ),
        (
            Policy::builder().rule("a[", Tier::Drop).build(),
            "rules[0] (\"a[\"): invalid glob \"a[\"",
        ),
        (Policy::builder().rule("", Tier::Drop).build(), "empty glob"),
        (
            Policy::builder()
                .default_tier(Tier::Sample(Sampling::Every(0)))
                .build(),
            "default tier: every must be at least 1",
        ),
        (
            Policy::builder().incident(IncidentPolicy::new(&[])).build(),
            "incident capture needs at least one trigger glob",
        ),
        (
            Policy::builder()
                .incident(IncidentPolicy::new(&["failure.*", "x/y"]))
                .build(),
            "incident triggers[1] (\"x/y\"): glob \"x/y\" contains '/'",
        ),
    ];
    for (built, reason) in cases {
        let err = built.unwrap_err();
        assert_eq!((&err.path, err.line), (&None, None), "{err}");
        assert!(
            err.reason.contains(reason),
            "{err:?} does not say {reason:?}"
        );
    }

    // Parameters at their bounds are accepted.
    let policy = Policy::builder()
        .default_tier(Tier::Sample(Sampling::Rate(1.0)))
        .rule("a", Tier::Sample(Sampling::Every(1)))
        .rule("b", Tier::Sample(Sampling::Rate(f64::MIN_POSITIVE)))
        .rule("c", Tier::Summary { window_ns: 1 })
        .build()
        .unwrap();
    assert_eq!(policy.classify("z").tier, Tier::Sample(Sampling::Rate(1.0)));
}

#[test]
fn policy_file_errors_name_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retention.toml");
    std::fs::write(
        &path,
        "default = \"full\"\n\n[[rules]]\nmatch = \"debug.*\"\ntier = \"fulll\"\n",
    )
    .unwrap();
    let err = Policy::from_toml_file(&path).unwrap_err();
    assert_eq!(err.path.as_deref(), Some(path.as_path()));
    assert_eq!(err.line, Some(5));
    assert_eq!(
        err.to_string(),
        format!(
            "policy {} line 5: unknown tier \"fulll\": expected full, sample, summary or drop",
            path.display()
        )
    );

    std::fs::write(&path, DESIGN_EXAMPLE).unwrap();
    assert_eq!(
        Policy::from_toml_file(&path).unwrap(),
        design_example_built()
    );
}

#[test]
fn unreadable_policy_files_are_refused_with_their_path() {
    let dir = tempfile::tempdir().unwrap();

    let missing = dir.path().join("missing.toml");
    let err = Policy::from_toml_file(&missing).unwrap_err();
    assert_eq!(err.path.as_deref(), Some(missing.as_path()));
    assert_eq!(err.line, None);
    assert!(err.reason.contains("cannot open the file"), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("policy {}: cannot open", missing.display())),
        "{err}"
    );

    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, b"default = \"full\"\n# \xff\xfe\n").unwrap();
    let err = Policy::from_toml_file(&binary).unwrap_err();
    assert_eq!(
        (err.line, err.reason.as_str()),
        (Some(2), "the file is not valid UTF-8")
    );

    let large = dir.path().join("large.toml");
    let comment = "#".repeat(usize::try_from(POLICY_FILE_BYTES_MAX).unwrap() + 1);
    std::fs::write(&large, comment).unwrap();
    let err = Policy::from_toml_file(&large).unwrap_err();
    assert!(err.reason.contains("larger than"), "{err}");
}

#[test]
fn policy_error_display_leaves_out_what_is_unknown() {
    let err = |path: Option<&str>, line: Option<usize>| PolicyError {
        path: path.map(PathBuf::from),
        line,
        reason: "why".to_owned(),
    };
    assert_eq!(
        err(Some("p.toml"), Some(3)).to_string(),
        "policy p.toml line 3: why"
    );
    assert_eq!(err(Some("p.toml"), None).to_string(), "policy p.toml: why");
    assert_eq!(err(None, Some(3)).to_string(), "policy line 3: why");
    assert_eq!(err(None, None).to_string(), "policy: why");
}

#[test]
fn validate_kind_accepts_and_refuses_a_table_of_cases() {
    let max = "a".repeat(128);
    let too_long = "a".repeat(129);
    let dotted_max = ["ab"; 43].join(".");
    assert_eq!(dotted_max.len(), 128);
    let accepted: &[&str] = &[
        "a",
        "Z",
        "0",
        "_",
        "-",
        "action.grasp",
        "sensor.imu.accel",
        "robot_1.arm-left.JOINT_3",
        "a.b.c.d.e.f",
        "1.2.3",
        "--.__",
        &max,
        &dotted_max,
    ];
    for kind in accepted {
        assert_eq!(validate_kind(kind), Ok(()), "{kind}");
    }

    let refused: &[(&str, &str)] = &[
        ("", KindError::LENGTH),
        (&too_long, KindError::LENGTH),
        (".", KindError::EDGE_DOT),
        (".a", KindError::EDGE_DOT),
        ("a.", KindError::EDGE_DOT),
        ("a..b", KindError::EMPTY_SEGMENT),
        ("a...b", KindError::EMPTY_SEGMENT),
        ("a b", KindError::CHARACTER),
        (" a", KindError::CHARACTER),
        ("a\t", KindError::CHARACTER),
        ("a\n", KindError::CHARACTER),
        ("a/b", KindError::CHARACTER),
        ("a*", KindError::CHARACTER),
        ("a:b", KindError::CHARACTER),
        ("capteur.température", KindError::CHARACTER),
        ("a\0", KindError::CHARACTER),
    ];
    for &(kind, rule) in refused {
        assert_eq!(
            validate_kind(kind),
            Err(KindError {
                kind: kind.to_owned(),
                rule,
            }),
            "{kind:?}"
        );
    }
}

#[test]
fn kind_error_display_names_the_kind_and_the_rule() {
    let err = validate_kind("a..b").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid kind \"a..b\": segments are separated by single dots and are never empty"
    );
    let err = validate_kind("say \"hi\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid kind \"say \\\"hi\\\"\": segments are made only of ASCII letters, digits, '_' and '-'"
    );
    // A huge kind from untrusted input is shown by a bounded prefix.
    let huge = "x".repeat(100_000);
    let shown = validate_kind(&huge).unwrap_err().to_string();
    assert!(shown.len() < 300, "{shown}");
    assert!(
        shown.contains("(100000 bytes): a kind is 1 to 128 bytes long"),
        "{shown}"
    );
}

#[test]
fn tier_names_and_sample_weights() {
    assert_eq!(Tier::Full.name(), "full");
    assert_eq!(Tier::Sample(Sampling::Every(3)).name(), "sample");
    assert_eq!(Tier::Summary { window_ns: 1 }.name(), "summary");
    assert_eq!(Tier::Drop.name(), "drop");
    assert_eq!(Sampling::Every(1).weight(), 1.0);
    assert_eq!(Sampling::Every(10).weight(), 10.0);
    assert_eq!(Sampling::Rate(1.0).weight(), 1.0);
    assert_eq!(Sampling::Rate(0.25).weight(), 4.0);
    assert!((Sampling::Rate(0.1).weight() - 10.0).abs() < 1e-9);
}

// Counts this test binary's allocations per thread, so a test can show that `classify`
// does not allocate. Each test runs on its own thread, so other tests do not disturb the
// count.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    // The counter has a const initializer and no destructor, so touching it never
    // allocates; during thread teardown it may be gone, and then nothing is counted.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

// SAFETY: every method forwards to the system allocator with the caller's arguments,
// so this allocator keeps all of `System`'s guarantees; counting touches no memory the
// allocator hands out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn classify_does_not_allocate_once_warm() {
    // Globs of every shape globset treats differently: literal, prefix, suffix,
    // extension, and general regex.
    let policy = Policy::builder()
        .rule("debug.trace", Tier::Drop)
        .rule("debug.*", Tier::Drop)
        .rule("*.raw", Tier::Sample(Sampling::Every(100)))
        .rule("*imu.accel", Tier::Summary { window_ns: 7 })
        .rule(
            "sensor.[a-z]mu.*",
            Tier::Summary {
                window_ns: SECOND_NS,
            },
        )
        .rule("{lidar,radar}.*.scan", Tier::Sample(Sampling::Rate(0.5)))
        .rule("*", Tier::Full)
        .incident(IncidentPolicy::new(&["failure.*", "*.estop", "takeover"]))
        .build()
        .unwrap();
    let kinds = [
        "debug.trace",
        "debug.x",
        "camera.raw",
        "sensor.imu.accel",
        "sensor.gmu.gyro",
        "lidar.front.scan",
        "failure.motor",
        "arm.estop",
        "takeover",
        "action.grasp",
    ];
    for kind in kinds {
        let _ = policy.classify(kind);
    }

    let before = ALLOCATIONS.with(Cell::get);
    let mut kept = 0_usize;
    for _ in 0..1_000 {
        for kind in kinds {
            let class = policy.classify(kind);
            kept += usize::from(class.rule_index.is_some()) + usize::from(class.trigger);
        }
    }
    let after = ALLOCATIONS.with(Cell::get);
    assert_eq!(after - before, 0, "classify allocated");
    assert_eq!(kept, 13_000);
}

/// A model of the glob subset `*` and `?` over literal bytes, written independently of
/// globset: `*` matches any run of bytes (dots included), `?` one byte.
fn model_glob_match(pattern: &[u8], kind: &[u8]) -> bool {
    match pattern.split_first() {
        None => kind.is_empty(),
        Some((b'*', rest)) => (0..=kind.len()).any(|skip| {
            kind.get(skip..)
                .is_some_and(|tail| model_glob_match(rest, tail))
        }),
        Some((&first, rest)) => match kind.split_first() {
            Some((&k, kind_rest)) if first == b'?' || first == k => {
                model_glob_match(rest, kind_rest)
            }
            _ => false,
        },
    }
}

fn kind_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec("[ab]{1,3}", 1..4).prop_map(|segments| segments.join("."))
}

proptest! {
    #[test]
    fn classify_agrees_with_trying_rules_in_order(
        patterns in prop::collection::vec("[ab.*?]{1,6}", 0..6),
        triggers in prop::collection::vec("[ab.*?]{1,4}", 1..3),
        kinds in prop::collection::vec(kind_strategy(), 1..20),
    ) {
        let mut builder = Policy::builder().default_tier(Tier::Drop);
        for (index, pattern) in patterns.iter().enumerate() {
            let every = u64::try_from(index).unwrap() + 1;
            builder = builder.rule(pattern, Tier::Sample(Sampling::Every(every)));
        }
        let policy = builder
            .incident(IncidentPolicy::new(&triggers.iter().map(String::as_str).collect::<Vec<_>>()))
            .build()
            .unwrap();
        for kind in &kinds {
            prop_assert_eq!(validate_kind(kind), Ok(()));
            let expected_rule = patterns
                .iter()
                .position(|pattern| model_glob_match(pattern.as_bytes(), kind.as_bytes()));
            let expected_trigger = triggers
                .iter()
                .any(|trigger| model_glob_match(trigger.as_bytes(), kind.as_bytes()));
            let class = policy.classify(kind);
            prop_assert_eq!(class.rule_index, expected_rule, "kind {}", kind);
            prop_assert_eq!(class.trigger, expected_trigger, "kind {}", kind);
            let expected_tier = match expected_rule {
                Some(index) => policy.rules()[index].tier.clone(),
                None => Tier::Drop,
            };
            prop_assert_eq!(class.tier, expected_tier);
        }
    }

    #[test]
    fn whole_durations_parse_exactly_or_are_refused_as_too_large(
        value in any::<u64>().prop_map(|v| v >> (v % 64)),
        unit in prop::sample::select(vec![
            ("ns", 1_u64),
            ("us", 1_000),
            ("ms", 1_000_000),
            ("s", SECOND_NS),
            ("m", 60 * SECOND_NS),
            ("h", 3_600 * SECOND_NS),
        ]),
    ) {
        let (suffix, multiplier) = unit;
        let parsed = parse_duration(&format!("{value}{suffix}"));
        match value.checked_mul(multiplier) {
            Some(ns) => prop_assert_eq!(parsed, Ok(ns)),
            None => prop_assert!(parsed.unwrap_err().contains("too large")),
        }
    }
}

/// Guards DESIGN §5's `preroll = true` on a drop rule (a backtrace on failure): the TOML
/// key and the builder give the same policy, the kind is classified as a pre-roll drop,
/// and the key is refused, with its line, on another tier or without incident capture.
#[test]
fn a_drop_rule_may_keep_its_events_in_the_preroll_ring() {
    let text = r#"
[[rules]]
match = "log.debug.*"
tier = "drop"
preroll = true

[[rules]]
match = "debug.*"
tier = "drop"
preroll = false

[incident]
triggers = ["failure.*"]
"#;
    let parsed = Policy::from_toml_str(text).unwrap();
    let built = Policy::builder()
        .drop_rule_with_preroll("log.debug.*")
        .rule("debug.*", Tier::Drop)
        .incident(IncidentPolicy::new(&["failure.*"]))
        .build()
        .unwrap();
    assert_eq!(parsed, built);
    assert!(parsed.rules()[0].preroll);
    let class = parsed.classify("log.debug.motor");
    assert_eq!((class.tier.clone(), class.preroll), (Tier::Drop, true));
    assert!(!parsed.classify("debug.tick").preroll);
    assert!(!parsed.classify("action.grasp").preroll);

    let on_sample = "[[rules]]\nmatch = \"traj.*\"\ntier = \"sample\"\nevery = 2\npreroll = true\n\n[incident]\ntriggers = [\"failure.*\"]\n";
    let err = Policy::from_toml_str(on_sample).unwrap_err();
    assert_eq!(err.line, Some(5), "{err}");
    assert!(err.reason.contains("only to drop rules"), "{err}");

    let no_incident = "[[rules]]\nmatch = \"log.*\"\ntier = \"drop\"\npreroll = true\n";
    let err = Policy::from_toml_str(no_incident).unwrap_err();
    assert_eq!(err.line, Some(4), "{err}");
    assert!(err.reason.contains("[incident]"), "{err}");
    let err = Policy::builder()
        .drop_rule_with_preroll("log.*")
        .build()
        .unwrap_err();
    assert!(err.reason.contains("rules[0]"), "{err}");

    let not_bool = "[[rules]]\nmatch = \"log.*\"\ntier = \"drop\"\npreroll = \"yes\"\n";
    let err = Policy::from_toml_str(not_bool).unwrap_err();
    assert_eq!(err.line, Some(4), "{err}");
}

/// A tier with random parameters, as the builder accepts them.
fn tier_strategy() -> impl Strategy<Value = Tier> {
    prop_oneof![
        Just(Tier::Full),
        Just(Tier::Drop),
        (1..=i64::MAX as u64).prop_map(|n| Tier::Sample(Sampling::Every(n))),
        (1..=u64::MAX).prop_map(|bits| {
            // A rate in (0, 1], any double there.
            let p = (bits as f64) / (u64::MAX as f64);
            Tier::Sample(Sampling::Rate(p.max(f64::MIN_POSITIVE)))
        }),
        (1..=u64::MAX).prop_map(|window_ns| Tier::Summary { window_ns }),
    ]
}

/// A random policy through the builder: rules of every tier (drop rules with or
/// without the pre-roll ring), any default tier, incident capture with random lengths.
fn policy_strategy() -> impl Strategy<Value = Policy> {
    (
        tier_strategy(),
        prop::collection::vec(("[ab.*?]{1,6}", tier_strategy(), any::<bool>()), 0..6),
        prop::option::of((
            prop::collection::vec("[ab.*?]{1,4}", 1..3),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        )),
    )
        .prop_map(|(default, rules, incident)| {
            let mut builder = Policy::builder().default_tier(default);
            let with_incident = incident.is_some();
            for (pattern, tier, preroll) in rules {
                builder = if preroll && with_incident && tier == Tier::Drop {
                    builder.drop_rule_with_preroll(&pattern)
                } else {
                    builder.rule(&pattern, tier)
                };
            }
            if let Some((triggers, preroll_ns, postroll_ns, preroll_bytes_max)) = incident {
                let triggers: Vec<&str> = triggers.iter().map(String::as_str).collect();
                builder = builder.incident(IncidentPolicy {
                    preroll_ns,
                    postroll_ns,
                    preroll_bytes_max,
                    ..IncidentPolicy::new(&triggers)
                });
            }
            builder.build().unwrap()
        })
}

proptest! {
    /// The policy the recorder writes into the log reads back as the policy in force:
    /// equal to it when its default tier is one the TOML form names (full or drop), and
    /// classifying every kind the same in any case (a sample or summary default is
    /// written as a last rule matching every kind). The oracle is the builder's policy
    /// itself and `classify` on it, not the text.
    #[test]
    fn a_policy_written_as_toml_reads_back_as_the_same_policy(
        policy in policy_strategy(),
        kinds in prop::collection::vec(kind_strategy(), 1..20),
    ) {
        let text = policy.to_toml();
        let back = Policy::from_toml_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        if matches!(policy.default_tier(), Tier::Full | Tier::Drop) {
            prop_assert_eq!(&back, &policy, "{}", text);
        }
        prop_assert_eq!(back.incident(), policy.incident());
        for kind in &kinds {
            let (a, b) = (policy.classify(kind), back.classify(kind));
            prop_assert_eq!((&a.tier, a.trigger, a.preroll), (&b.tier, b.trigger, b.preroll), "kind {} in\n{}", kind, text);
        }
    }
}

/// A hand-written check of the text itself: the DESIGN §5 example comes out with its
/// rules in order, its durations in their own units and its size in bytes.
#[test]
fn the_design_example_is_written_as_readable_toml() {
    let text = design_example_built().to_toml();
    let expected = r#"default = "full"

[[rules]]
match = "debug.*"
tier = "drop"

[[rules]]
match = "sensor.*"
tier = "summary"
window = "1s"

[[rules]]
match = "trajectory.*"
tier = "sample"
every = 10

[incident]
triggers = ["failure.*", "takeover.*"]
preroll = "30s"
postroll = "10s"
preroll_bytes_max = "67108864B"
"#;
    assert_eq!(text, expected);
}

/// `every` above i64's range cannot be written in the policy's TOML form (which the
/// recorder writes into the log): the builder refuses it, naming the bound.
#[test]
fn the_builder_refuses_an_every_the_toml_form_cannot_hold() {
    let err = Policy::builder()
        .rule("a.*", Tier::Sample(Sampling::Every(u64::MAX)))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("every must be at most 9223372036854775807"),
        "{err}"
    );
}

#[test]
fn the_retention_table_sets_the_disk_budget_and_reads_back() {
    let text = r#"
default = "full"

[retention]
max_bytes = "1GiB"
max_age = "168h"
pinned_max_bytes = "256MiB"
"#;
    let policy = Policy::from_toml_str(text).unwrap();
    let r = policy.retention().unwrap();
    assert_eq!(r.max_bytes, Some(1 << 30));
    assert_eq!(r.max_age_ns, Some(7 * 24 * 3600 * SECOND_NS));
    assert_eq!(r.pinned_max_bytes, 256 << 20);
    let back = Policy::from_toml_str(&policy.to_toml()).unwrap();
    assert_eq!(back, policy);
    assert_eq!(back.retention(), Some(r));
    // Without the table the log is unbounded.
    assert_eq!(
        Policy::from_toml_str("default = \"full\"\n")
            .unwrap()
            .retention(),
        None
    );
    // A table that bounds nothing, a negative size and an unknown key are refused,
    // with the line.
    let refused = |text: &str| Policy::from_toml_str(text).unwrap_err();
    let e = refused("[retention]\npinned_max_bytes = \"1MiB\"\n");
    assert!(e.reason.contains("max_bytes or max_age"), "{e}");
    let e = refused("[retention]\nmax_bytes = -5\n");
    assert_eq!(e.line, Some(2));
    assert!(e.reason.contains("max_bytes"), "{e}");
    let e = refused("[retention]\nmax_bytes = \"1GiB\"\nmax_files = 3\n");
    assert!(e.reason.contains("max_files"), "{e}");
}
