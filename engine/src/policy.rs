//! Retention policy: which events the recorder keeps, and how.
//!
//! A [`Policy`] maps event kinds (dotted names such as `sensor.imu.accel`, see
//! [`validate_kind`]) to a [`Tier`] through an ordered list of glob [`Rule`]s: the first
//! rule whose glob matches a kind decides its tier, and kinds that no rule matches get the
//! policy's default tier. An optional [`IncidentPolicy`] names the kinds that trigger an
//! incident capture and bounds its pre-roll and post-roll.
//!
//! Policies are plain data. Hosts build them in Rust with [`Policy::builder`], or load them
//! from a TOML file with [`Policy::from_toml_file`]:
//!
//! ```toml
//! default = "full"              # tier of kinds that no rule matches: "full" or "drop"
//!
//! [[rules]]
//! match = "debug.*"             # glob over the dotted kind; first match wins
//! tier = "drop"
//!
//! [[rules]]
//! match = "sensor.*"
//! tier = "summary"
//! window = "1s"
//!
//! [[rules]]
//! match = "trajectory.*"
//! tier = "sample"
//! every = 10                    # or: rate = 0.1
//!
//! [[rules]]
//! match = "log.debug.*"
//! tier = "drop"
//! preroll = true                # dropped, but kept in the pre-roll ring: a backtrace
//!
//! [incident]
//! triggers = ["failure.*", "takeover.*"]
//! preroll = "30s"               # default 30s
//! postroll = "10s"              # default 10s
//! preroll_bytes_max = "64MiB"   # default 64MiB; a bare integer counts bytes
//! ```
//!
//! # Globs
//!
//! Patterns use `globset` syntax with `*` free to cross dots, because a kind is one name
//! rather than a path: `*` matches any run of characters including dots (`sensor.*`
//! matches `sensor.imu.accel`), `?` matches one character, `[...]` is a character class
//! and `{a,b}` an alternation. Matching is case-sensitive, and `\` escapes the next
//! character on every platform. A pattern that is empty or contains whitespace or `/`
//! can never match a valid kind, so such a pattern is refused as a mistake.
//!
//! # Refused policies
//!
//! A policy that does not parse, has an unknown key, names an unknown tier, or has an
//! invalid glob, duration, size or tier parameter is refused with a [`PolicyError`] that
//! carries the file, the 1-based line of the offending value and the reason.
//!
//! # Example
//!
//! ```
//! use blackbox::policy::{IncidentPolicy, Policy, Sampling, Tier};
//!
//! # fn main() -> Result<(), blackbox::policy::PolicyError> {
//! let built = Policy::builder()
//!     .rule("debug.*", Tier::Drop)
//!     .rule("sensor.*", Tier::Summary { window_ns: 1_000_000_000 })
//!     .rule("trajectory.*", Tier::Sample(Sampling::Every(10)))
//!     .incident(IncidentPolicy::new(&["failure.*"]))
//!     .build()?;
//!
//! let parsed = Policy::from_toml_str(
//!     r#"
//!     [[rules]]
//!     match = "debug.*"
//!     tier = "drop"
//!     [[rules]]
//!     match = "sensor.*"
//!     tier = "summary"
//!     window = "1s"
//!     [[rules]]
//!     match = "trajectory.*"
//!     tier = "sample"
//!     every = 10
//!     [incident]
//!     triggers = ["failure.*"]
//!     "#,
//! )?;
//! assert_eq!(built, parsed);
//!
//! let class = parsed.classify("sensor.imu.accel");
//! assert_eq!(class.tier, Tier::Summary { window_ns: 1_000_000_000 });
//! assert_eq!(class.rule_index, Some(1));
//! assert!(parsed.classify("failure.motor").trigger);
//! # Ok(())
//! # }
//! ```

use std::cell::RefCell;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

use blackbox_log::Shown;
use globset::{Candidate, Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

const NS_PER_SEC: u64 = 1_000_000_000;

/// The longest kind [`validate_kind`] accepts, in bytes.
pub const KIND_BYTES_MAX: usize = 128;
// `KindError::LENGTH` spells the bound out so that it can be a `&'static str`.
const _: () = assert!(KIND_BYTES_MAX == 128);

/// The largest policy file [`Policy::from_toml_file`] reads, in bytes. A policy is a short
/// hand-written file; the bound keeps a wrong path (a log segment, a device) from being
/// read into memory whole.
pub const POLICY_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// How events of a kind are kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Tier {
    /// Every event is kept.
    Full,
    /// A deterministic share of the events is kept; each kept record carries its weight.
    Sample(Sampling),
    /// One summary record per window per kind (count and per-value min, max, mean, sum,
    /// last); the events themselves are not kept. `window_ns` is greater than 0.
    Summary {
        /// The summary window, in nanoseconds.
        window_ns: u64,
    },
    /// Nothing is kept; the events are only counted.
    Drop,
}

impl Tier {
    /// The tier's name as written in a policy file: `"full"`, `"sample"`, `"summary"` or
    /// `"drop"`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Tier::Full => "full",
            Tier::Sample(_) => "sample",
            Tier::Summary { .. } => "summary",
            Tier::Drop => "drop",
        }
    }
}

/// Which share of a sampled kind's events is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Keep 1 event in N (N at least 1); a kept record stands for N events.
    Every(u64),
    /// Keep a fraction p of the events (0 < p <= 1); a kept record stands for 1/p events.
    Rate(f64),
}

impl Sampling {
    /// How many events one kept record stands for: N for [`Sampling::Every`], 1/p for
    /// [`Sampling::Rate`].
    #[must_use]
    pub fn weight(&self) -> f64 {
        match *self {
            // Precision is lost only above 2^53, far beyond any useful sampling interval.
            Sampling::Every(n) => n as f64,
            Sampling::Rate(p) => 1.0 / p,
        }
    }
}

/// One policy rule: kinds matching `pattern` (a glob, see the [module docs](self)) get
/// `tier`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The glob over the dotted kind.
    pub pattern: String,
    /// The tier of the kinds it matches.
    pub tier: Tier,
    /// For a drop rule: its events still go to the pre-roll ring, so an incident writes
    /// the last seconds of them (a backtrace); without a trigger none reach the disk.
    /// Always false for other tiers (their events are in the ring already).
    pub preroll: bool,
}

/// Incident capture: which kinds trigger it, and how much is kept around the trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentPolicy {
    /// Globs over the dotted kind; an event whose kind matches one starts an incident.
    pub triggers: Vec<String>,
    /// How far back the in-memory ring of non-`full` events reaches, in nanoseconds.
    pub preroll_ns: u64,
    /// How long every event stays `full` after a trigger, in nanoseconds.
    pub postroll_ns: u64,
    /// The pre-roll ring's memory bound, in bytes.
    pub preroll_bytes_max: u64,
}

impl IncidentPolicy {
    /// The pre-roll when none is given: 30 seconds.
    pub const DEFAULT_PREROLL_NS: u64 = 30 * NS_PER_SEC;
    /// The post-roll when none is given: 10 seconds.
    pub const DEFAULT_POSTROLL_NS: u64 = 10 * NS_PER_SEC;
    /// The pre-roll ring's memory bound when none is given: 64 MiB.
    pub const DEFAULT_PREROLL_BYTES_MAX: u64 = 64 * 1024 * 1024;

    /// An incident policy with these trigger globs and the default pre-roll (30 s),
    /// post-roll (10 s) and pre-roll memory bound (64 MiB). The globs are checked by
    /// [`PolicyBuilder::build`].
    #[must_use]
    pub fn new(triggers: &[&str]) -> IncidentPolicy {
        IncidentPolicy {
            triggers: triggers.iter().map(|t| (*t).to_owned()).collect(),
            preroll_ns: Self::DEFAULT_PREROLL_NS,
            postroll_ns: Self::DEFAULT_POSTROLL_NS,
            preroll_bytes_max: Self::DEFAULT_PREROLL_BYTES_MAX,
        }
    }
}

/// A compiled policy: the first rule whose glob matches a kind decides its tier; kinds
/// that no rule matches get the default tier.
///
/// Two policies are equal when their default tier, rules and incident policy are equal;
/// the compiled matchers follow from those.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Tier,
    rules: Vec<Rule>,
    /// The rules' globs, in rule order, so a glob's index in the set is its rule's index.
    rule_globs: GlobSet,
    incident: Option<IncidentPolicy>,
    /// The incident triggers' globs; empty without an incident policy.
    trigger_globs: GlobSet,
}

/// What the policy says about one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// The kind's tier.
    pub tier: Tier,
    /// The index into [`Policy::rules`] of the rule that decided the tier; `None` when no
    /// rule matched and the default tier applies.
    pub rule_index: Option<usize>,
    /// Whether the kind matches an incident trigger.
    pub trigger: bool,
    /// Whether the kind is a drop-tier kind kept in the pre-roll ring
    /// ([`Rule::preroll`]).
    pub preroll: bool,
}

impl PartialEq for Policy {
    fn eq(&self, other: &Policy) -> bool {
        self.default == other.default
            && self.rules == other.rules
            && self.incident == other.incident
    }
}

impl Default for Policy {
    /// Every kind is kept in full; no rules, no incident capture.
    fn default() -> Policy {
        Policy {
            default: Tier::Full,
            rules: Vec::new(),
            rule_globs: GlobSet::empty(),
            incident: None,
            trigger_globs: GlobSet::empty(),
        }
    }
}

thread_local! {
    /// Scratch space for the indexes of the rules that match a kind. `GlobSet` reports
    /// matches only into a caller's vector; keeping one per thread makes `classify`
    /// allocation-free once a thread has classified its first kinds.
    static RULE_MATCHES: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl Policy {
    /// A builder for a policy whose default tier is [`Tier::Full`], with no rules and no
    /// incident capture.
    #[must_use]
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder {
            default: Tier::Full,
            rules: Vec::new(),
            incident: None,
        }
    }

    /// The tier of kinds that no rule matches.
    #[must_use]
    pub fn default_tier(&self) -> &Tier {
        &self.default
    }

    /// The rules, in the order they are tried.
    #[must_use]
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The incident capture settings, if incident capture is on.
    #[must_use]
    pub fn incident(&self) -> Option<&IncidentPolicy> {
        self.incident.as_ref()
    }

    /// What the policy says about `kind`: its tier, the rule that decided it, and whether
    /// it triggers an incident.
    ///
    /// Each glob set is searched once. Apart from a per-thread scratch vector that is
    /// allocated the first time a thread classifies a kind, this does not allocate.
    /// `kind` is not validated here; see [`validate_kind`].
    #[must_use]
    pub fn classify(&self, kind: &str) -> Classification {
        // Built from bytes, a candidate borrows the kind instead of copying it.
        let candidate = Candidate::from_bytes(kind.as_bytes());
        let rule_index = self.first_matching_rule(&candidate);
        let (tier, preroll) = match rule_index.and_then(|index| self.rules.get(index)) {
            Some(rule) => (rule.tier.clone(), rule.preroll),
            None => (self.default.clone(), false),
        };
        let trigger = self.trigger_globs.is_match_candidate(&candidate);
        Classification {
            tier,
            rule_index,
            trigger,
            preroll,
        }
    }

    /// The lowest index of a rule whose glob matches the candidate.
    fn first_matching_rule(&self, candidate: &Candidate<'_>) -> Option<usize> {
        if self.rule_globs.is_empty() {
            return None;
        }
        let with_scratch = |matches: &mut Vec<usize>| {
            // The set reports matches in ascending order, so the first is the first rule.
            self.rule_globs.matches_candidate_into(candidate, matches);
            matches.first().copied()
        };
        // The scratch vector is unavailable only while the thread is being torn down;
        // a fresh vector gives the same answer then.
        RULE_MATCHES
            .try_with(|scratch| {
                scratch
                    .try_borrow_mut()
                    .ok()
                    .map(|mut matches| with_scratch(&mut matches))
            })
            .ok()
            .flatten()
            .unwrap_or_else(|| with_scratch(&mut Vec::new()))
    }

    /// Parses and compiles a policy from TOML text (the shape is in the
    /// [module docs](self)).
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] with the 1-based line of the offending value (when it has one)
    /// and the reason, when the text is not valid TOML, has an unknown key, names an
    /// unknown tier, lacks a rule's `match` or `tier`, gives tier parameters that are
    /// missing, out of range or meant for another tier, or has an invalid glob, duration
    /// or size.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyToml = toml::from_str(text).map_err(|err| PolicyError {
            path: None,
            line: err.span().map(|span| line_of(text, span.start)),
            reason: err.message().to_owned(),
        })?;
        file.into_policy(text)
    }

    /// The policy as TOML text that [`Policy::from_toml_str`] reads back to a policy that
    /// classifies every kind the same: what the recorder writes into the log as the
    /// policy in force. Durations are written in the largest unit that keeps them exact,
    /// sizes in bytes. A default tier the TOML form cannot name (`sample` or `summary`,
    /// possible through the builder) is written as a last rule matching every kind; for
    /// any other policy the text reads back to an equal one.
    #[must_use]
    pub fn to_toml(&self) -> String {
        let (default, catch_all) = match &self.default {
            Tier::Full => ("full", None),
            Tier::Drop => ("drop", None),
            other => ("full", Some(other)),
        };
        let mut rules: Vec<RuleOut> = self
            .rules
            .iter()
            .map(|r| RuleOut::new(&r.pattern, &r.tier, r.preroll))
            .collect();
        if let Some(tier) = catch_all {
            rules.push(RuleOut::new("*", tier, false));
        }
        let out = PolicyOut {
            default,
            rules,
            incident: self.incident.as_ref().map(|i| IncidentOut {
                triggers: &i.triggers,
                preroll: duration_text(i.preroll_ns),
                postroll: duration_text(i.postroll_ns),
                preroll_bytes_max: format!("{}B", i.preroll_bytes_max),
            }),
        };
        // Strings, booleans, numbers and tables of them: the serializer cannot fail.
        toml::to_string(&out).unwrap_or_default()
    }

    /// Reads, parses and compiles the policy file at `path`. Files larger than
    /// [`POLICY_FILE_BYTES_MAX`] are refused.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] that names the file when it cannot be read, is too large or is not
    /// UTF-8, or for any of the reasons [`Policy::from_toml_str`] gives.
    pub fn from_toml_file(path: &Path) -> Result<Policy, PolicyError> {
        let in_file = |err: PolicyError| PolicyError {
            path: Some(path.to_path_buf()),
            ..err
        };
        let unreadable = |reason: String| PolicyError {
            path: Some(path.to_path_buf()),
            line: None,
            reason,
        };
        let file = std::fs::File::open(path)
            .map_err(|err| unreadable(format!("cannot open the file: {err}")))?;
        let mut bytes = Vec::new();
        // Reading one byte past the bound tells a file at the bound from a larger one.
        file.take(POLICY_FILE_BYTES_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| unreadable(format!("cannot read the file: {err}")))?;
        if bytes.len() as u64 > POLICY_FILE_BYTES_MAX {
            return Err(unreadable(format!(
                "the file is larger than {POLICY_FILE_BYTES_MAX} bytes; a policy file is \
                 a short TOML file"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|err| {
            let offset = err.utf8_error().valid_up_to();
            PolicyError {
                path: Some(path.to_path_buf()),
                line: Some(line_of_bytes(err.as_bytes(), offset)),
                reason: "the file is not valid UTF-8".to_owned(),
            }
        })?;
        Policy::from_toml_str(&text).map_err(in_file)
    }
}

/// Builds a [`Policy`] in Rust; [`PolicyBuilder::build`] checks and compiles it.
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    default: Tier,
    rules: Vec<Rule>,
    incident: Option<IncidentPolicy>,
}

impl PolicyBuilder {
    /// Sets the tier of kinds that no rule matches (by default [`Tier::Full`]).
    #[must_use]
    pub fn default_tier(mut self, tier: Tier) -> Self {
        self.default = tier;
        self
    }

    /// Appends a rule; rules are tried in the order they are added.
    #[must_use]
    pub fn rule(mut self, pattern: &str, tier: Tier) -> Self {
        self.rules.push(Rule {
            pattern: pattern.to_owned(),
            tier,
            preroll: false,
        });
        self
    }

    /// Appends a drop rule whose events still go to the pre-roll ring: they cost a
    /// counter (and a trip to the writer) until an incident is triggered, which writes
    /// the ring's last seconds of them as `preroll`; without a trigger none reach the
    /// disk and all count as `dropped`. Needs incident capture
    /// ([`PolicyBuilder::incident`]).
    #[must_use]
    pub fn drop_rule_with_preroll(mut self, pattern: &str) -> Self {
        self.rules.push(Rule {
            pattern: pattern.to_owned(),
            tier: Tier::Drop,
            preroll: true,
        });
        self
    }

    /// Turns incident capture on with these settings (replacing earlier ones).
    #[must_use]
    pub fn incident(mut self, incident: IncidentPolicy) -> Self {
        self.incident = Some(incident);
        self
    }

    /// Checks the policy and compiles its globs.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] without path or line whose reason names the rule (`rules[i]`, by
    /// index) or the part of the policy at fault, when a glob is invalid or can never
    /// match a kind, a [`Sampling::Every`] interval is 0, a [`Sampling::Rate`] is not in
    /// (0, 1], a [`Tier::Summary`] window is 0, or the incident policy has no triggers.
    pub fn build(self) -> Result<Policy, PolicyError> {
        let fail = |reason: String| PolicyError {
            path: None,
            line: None,
            reason,
        };
        check_tier(&self.default).map_err(|reason| fail(format!("default tier: {reason}")))?;

        let mut rule_globs = GlobSetBuilder::new();
        for (index, rule) in self.rules.iter().enumerate() {
            let in_rule = |reason: String| {
                fail(format!(
                    "rules[{index}] ({}): {reason}",
                    Shown(&rule.pattern)
                ))
            };
            rule_globs.add(compile_kind_glob(&rule.pattern).map_err(in_rule)?);
            check_tier(&rule.tier).map_err(in_rule)?;
            if rule.preroll {
                check_preroll(&rule.tier, self.incident.is_some()).map_err(in_rule)?;
            }
        }
        let rule_globs = rule_globs
            .build()
            .map_err(|err| fail(format!("cannot compile the rules' globs: {err}")))?;

        let mut trigger_globs = GlobSetBuilder::new();
        if let Some(incident) = &self.incident {
            if incident.triggers.is_empty() {
                return Err(fail(NO_TRIGGERS.to_owned()));
            }
            for (index, trigger) in incident.triggers.iter().enumerate() {
                let glob = compile_kind_glob(trigger).map_err(|reason| {
                    fail(format!(
                        "incident triggers[{index}] ({}): {reason}",
                        Shown(trigger)
                    ))
                })?;
                trigger_globs.add(glob);
            }
        }
        let trigger_globs = trigger_globs
            .build()
            .map_err(|err| fail(format!("cannot compile the incident triggers: {err}")))?;

        Ok(Policy {
            default: self.default,
            rules: self.rules,
            rule_globs,
            incident: self.incident,
            trigger_globs,
        })
    }
}

const NO_TRIGGERS: &str =
    "incident capture needs at least one trigger glob, like triggers = [\"failure.*\"]";

/// Compiles one rule or trigger glob with the policy's matching semantics.
/// Compiles a kind glob as the policy does: a kind is one dotted name, so `*` crosses
/// dots, and `\` escapes on every platform. Refuses globs that can match no kind
/// (empty, with whitespace or `/`). Replay's `--kind` filters use the same rules.
///
/// # Errors
///
/// What is wrong with the glob, in a sentence that names it.
pub fn compile_kind_glob(pattern: &str) -> Result<Glob, String> {
    let shown = Shown(pattern);
    if pattern.is_empty() {
        return Err("empty glob: it can never match a kind".to_owned());
    }
    if pattern.chars().any(char::is_whitespace) {
        return Err(format!(
            "glob {shown} contains whitespace, which no kind does"
        ));
    }
    if pattern.contains('/') {
        return Err(format!(
            "glob {shown} contains '/': kinds are dotted names, like \"sensor.*\""
        ));
    }
    GlobBuilder::new(pattern)
        // A kind is one name, not a path: `*` crosses dots and nothing is a separator.
        .literal_separator(false)
        .case_insensitive(false)
        // globset's default for escapes differs between Unix and Windows; a policy file
        // must mean the same everywhere.
        .backslash_escape(true)
        .build()
        .map_err(|err| format!("invalid glob {shown}: {}", err.kind()))
}

/// Checks that a rule with `preroll` can use it.
fn check_preroll(tier: &Tier, has_incident: bool) -> Result<(), String> {
    if *tier != Tier::Drop {
        return Err(format!(
            "preroll applies only to drop rules, not to a {} rule: sampled-out and \
             summarized events are in the pre-roll ring already",
            tier.name()
        ));
    }
    if !has_incident {
        return Err(
            "preroll = true keeps events for an incident's pre-roll: add an [incident] \
             section with triggers"
                .to_owned(),
        );
    }
    Ok(())
}

/// Checks a tier's parameters.
fn check_tier(tier: &Tier) -> Result<(), String> {
    match *tier {
        Tier::Full | Tier::Drop => Ok(()),
        Tier::Sample(Sampling::Every(n)) => check_every(n),
        Tier::Sample(Sampling::Rate(p)) => check_rate(p),
        Tier::Summary { window_ns } => check_window(window_ns),
    }
}

fn check_every(n: u64) -> Result<(), String> {
    if n == 0 {
        return Err("every must be at least 1 (keep 1 in N events), got 0".to_owned());
    }
    // The policy's TOML form (`Policy::to_toml`, written into the log) holds integers
    // as i64.
    if i64::try_from(n).is_err() {
        return Err(format!("every must be at most {}, got {n}", i64::MAX));
    }
    Ok(())
}

fn check_rate(p: f64) -> Result<(), String> {
    // Written so that NaN fails too.
    if !(p > 0.0 && p <= 1.0) {
        return Err(format!(
            "rate must be greater than 0 and at most 1 (the fraction kept), got {p}"
        ));
    }
    Ok(())
}

fn check_window(window_ns: u64) -> Result<(), String> {
    if window_ns == 0 {
        return Err("summary window must be greater than 0".to_owned());
    }
    Ok(())
}

/// A policy that cannot be used, and where its problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The policy file, when the policy came from one.
    pub path: Option<PathBuf>,
    /// The 1-based line in the TOML text, when the problem has a place.
    pub line: Option<usize>,
    /// What is wrong, in one sentence.
    pub reason: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("policy")?;
        if let Some(path) = &self.path {
            write!(f, " {}", path.display())?;
        }
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for PolicyError {}

/// Checks that `kind` is a valid event kind.
///
/// A kind is a dotted name such as `sensor.imu.accel`:
///
/// - it is 1 to [`KIND_BYTES_MAX`] (128) bytes long;
/// - it is one or more segments separated by single dots, so it neither starts nor ends
///   with a dot and has no `..`;
/// - each segment is non-empty and made only of ASCII letters, digits, `_` and `-` (so
///   no whitespace).
///
/// # Errors
///
/// A [`KindError`] naming the kind and the first of these rules it breaks.
pub fn validate_kind(kind: &str) -> Result<(), KindError> {
    let broken = |rule: &'static str| {
        Err(KindError {
            kind: kind.to_owned(),
            rule,
        })
    };
    if kind.is_empty() || kind.len() > KIND_BYTES_MAX {
        return broken(KindError::LENGTH);
    }
    if kind.starts_with('.') || kind.ends_with('.') {
        return broken(KindError::EDGE_DOT);
    }
    let mut previous_dot = false;
    for byte in kind.bytes() {
        match byte {
            b'.' if previous_dot => return broken(KindError::EMPTY_SEGMENT),
            b'.' => previous_dot = true,
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' => previous_dot = false,
            _ => return broken(KindError::CHARACTER),
        }
    }
    Ok(())
}

/// A kind that [`validate_kind`] refuses, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindError {
    /// The refused kind.
    pub kind: String,
    /// The rule it breaks, one of the `KindError` constants.
    pub rule: &'static str,
}

impl KindError {
    /// The kind is empty or longer than [`KIND_BYTES_MAX`] bytes.
    pub const LENGTH: &'static str = "a kind is 1 to 128 bytes long";
    /// The kind starts or ends with a dot.
    pub const EDGE_DOT: &'static str = "a kind neither starts nor ends with a dot";
    /// The kind has two dots in a row.
    pub const EMPTY_SEGMENT: &'static str =
        "segments are separated by single dots and are never empty";
    /// The kind has a byte other than an ASCII letter, digit, `_`, `-` or `.`.
    pub const CHARACTER: &'static str =
        "segments are made only of ASCII letters, digits, '_' and '-'";
}

impl fmt::Display for KindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A kind can come from untrusted input of any length; show a bounded prefix.
        write!(
            f,
            "invalid kind {}: {}",
            blackbox_log::Shown(&self.kind),
            self.rule
        )
    }
}

impl std::error::Error for KindError {}

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", NS_PER_SEC),
    ("m", 60 * NS_PER_SEC),
    ("h", 3_600 * NS_PER_SEC),
];
const DURATION_EXPECTED: &str =
    "expected a number and a unit (ns, us, ms, s, m or h), like \"30s\", \"100ms\" or \"1.5s\"";

/// Parses a duration such as `"30s"`, `"5m"`, `"100ms"`, `"250us"`, `"10ns"`, `"1h"` or
/// `"1.5s"` into nanoseconds.
///
/// The number is a non-negative decimal, with an optional fraction, directly followed by
/// one of the units `ns`, `us` (or `µs`), `ms`, `s`, `m` or `h`; there is no whitespace.
/// A fraction must come to a whole number of nanoseconds.
///
/// # Errors
///
/// A sentence naming the text and what was expected, when the unit is missing or
/// unknown, the number is malformed or negative, the value is not a whole number of
/// nanoseconds, or it exceeds `u64::MAX` nanoseconds (about 584 years).
pub fn parse_duration(text: &str) -> Result<u64, String> {
    parse_quantity(
        text,
        "duration",
        DURATION_UNITS,
        false,
        DURATION_EXPECTED,
        "nanoseconds",
    )
}

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];
const SIZE_EXPECTED: &str = "expected a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB, \
     KB, MB, GB or TB), like \"64MiB\" or \"512\"";

/// Parses a size such as `"64MiB"`, `"1KiB"`, `"10MB"`, `"512B"`, `"512"` or `"1GiB"` into
/// bytes.
///
/// The number is a non-negative decimal, with an optional fraction, directly followed by
/// an optional unit: `B`, the binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or the
/// decimal `KB`, `MB`, `GB`, `TB` (powers of 1000). Units are case-sensitive. A bare
/// number counts bytes. A fraction must come to a whole number of bytes.
///
/// # Errors
///
/// A sentence naming the text and what was expected, when the unit is unknown, the
/// number is malformed or negative, the value is not a whole number of bytes, or it
/// exceeds `u64::MAX` bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    parse_quantity(text, "size", SIZE_UNITS, true, SIZE_EXPECTED, "bytes")
}

/// Parses `<digits>[.<digits>]<unit>` exactly, in integer arithmetic.
fn parse_quantity(
    text: &str,
    what: &str,
    units: &[(&str, u64)],
    unit_optional: bool,
    expected: &str,
    base_unit: &str,
) -> Result<u64, String> {
    /// More fraction digits than this cannot come to a whole base unit with any of the
    /// units above, and the bound keeps the arithmetic inside `u128`.
    const FRACTION_DIGITS_MAX: usize = 18;
    /// `u64::MAX` has 20 digits.
    const INTEGER_DIGITS_MAX: usize = 20;

    // The text comes from a user: messages show at most its start.
    let shown = Shown(text);
    if text.is_empty() {
        return Err(format!("empty {what}: {expected}"));
    }
    if text.starts_with('-') {
        return Err(format!("{what} {shown} is negative: {expected}"));
    }
    let number_len = text
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_len);
    if number.is_empty() {
        return Err(format!(
            "{what} {shown} does not start with a number: {expected}"
        ));
    }
    let multiplier = if unit.is_empty() && unit_optional {
        1
    } else if unit.is_empty() {
        return Err(format!("{what} {shown} has no unit: {expected}"));
    } else {
        match units.iter().find(|(name, _)| *name == unit) {
            Some(&(_, multiplier)) => multiplier,
            None => {
                return Err(format!(
                    "{what} {shown} has an unknown unit {}: {expected}",
                    Shown(unit)
                ));
            }
        }
    };

    let (integer, fraction) = match number.split_once('.') {
        Some((integer, fraction)) => (integer, fraction),
        None => (number, ""),
    };
    let has_dot = number.len() != integer.len();
    if integer.is_empty() || (has_dot && fraction.is_empty()) || fraction.contains('.') {
        return Err(format!(
            "{what} {shown} has a malformed number {}: {expected}",
            Shown(number)
        ));
    }
    let too_large = || {
        format!(
            "{what} {shown} is too large: at most {} {base_unit}",
            u64::MAX
        )
    };
    let integer = integer.trim_start_matches('0');
    if integer.len() > INTEGER_DIGITS_MAX {
        return Err(too_large());
    }
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > FRACTION_DIGITS_MAX {
        return Err(format!(
            "{what} {shown} is not a whole number of {base_unit}"
        ));
    }
    // Both parts are ASCII digits within the bounds above, so they parse and the
    // products below stay far inside u128.
    let integer_value: u128 = if integer.is_empty() {
        0
    } else {
        integer.parse().map_err(|_| too_large())?
    };
    let (fraction_value, fraction_scale): (u128, u128) = if fraction.is_empty() {
        (0, 1)
    } else {
        let value = fraction
            .parse()
            .map_err(|_| format!("{what} {shown} has a malformed number {}", Shown(number)))?;
        let exponent = u32::try_from(fraction.len()).map_err(|_| too_large())?;
        (value, 10u128.pow(exponent))
    };
    let multiplier = u128::from(multiplier);
    let fraction_scaled = fraction_value * multiplier;
    if fraction_scaled % fraction_scale != 0 {
        return Err(format!(
            "{what} {shown} is not a whole number of {base_unit}"
        ));
    }
    let total = integer_value * multiplier + fraction_scaled / fraction_scale;
    u64::try_from(total).map_err(|_| too_large())
}

/// The 1-based line of a byte offset in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    line_of_bytes(text.as_bytes(), offset)
}

fn line_of_bytes(bytes: &[u8], offset: usize) -> usize {
    let before = bytes.get(..offset).unwrap_or(bytes);
    before.iter().filter(|&&b| b == b'\n').count() + 1
}

// The TOML text `Policy::to_toml` writes.

#[derive(serde::Serialize)]
struct PolicyOut<'a> {
    default: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rules: Vec<RuleOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incident: Option<IncidentOut<'a>>,
}

#[derive(serde::Serialize)]
struct RuleOut<'a> {
    #[serde(rename = "match")]
    pattern: &'a str,
    tier: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preroll: bool,
}

impl<'a> RuleOut<'a> {
    fn new(pattern: &'a str, tier: &Tier, preroll: bool) -> RuleOut<'a> {
        let mut rule = RuleOut {
            pattern,
            tier: tier.name(),
            every: None,
            rate: None,
            window: None,
            preroll,
        };
        match *tier {
            Tier::Sample(Sampling::Every(n)) => rule.every = Some(n),
            Tier::Sample(Sampling::Rate(p)) => rule.rate = Some(p),
            Tier::Summary { window_ns } => rule.window = Some(duration_text(window_ns)),
            Tier::Full | Tier::Drop => {}
        }
        rule
    }
}

#[derive(serde::Serialize)]
struct IncidentOut<'a> {
    triggers: &'a [String],
    preroll: String,
    postroll: String,
    preroll_bytes_max: String,
}

/// A duration in the largest unit [`parse_duration`] reads that keeps it exact.
fn duration_text(ns: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("h", 3_600 * NS_PER_SEC),
        ("m", 60 * NS_PER_SEC),
        ("s", NS_PER_SEC),
        ("ms", 1_000_000),
        ("us", 1_000),
    ];
    for (unit, size) in UNITS {
        if ns != 0 && ns.is_multiple_of(size) {
            return format!("{}{unit}", ns / size);
        }
    }
    format!("{ns}ns")
}

// The TOML file's shape. Fields whose problems need a place in the file are `Spanned`, so
// the errors found after parsing can name a line too.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyToml {
    default: Option<Spanned<String>>,
    #[serde(default)]
    rules: Vec<Spanned<RuleToml>>,
    incident: Option<Spanned<IncidentToml>>,
}

// `match` and `tier` are optional here so that a missing one is reported in this
// module's words, with the line of its rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleToml {
    #[serde(rename = "match")]
    pattern: Option<Spanned<String>>,
    tier: Option<Spanned<String>>,
    every: Option<Spanned<i64>>,
    rate: Option<Spanned<f64>>,
    window: Option<Spanned<String>>,
    preroll: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IncidentToml {
    triggers: Option<Spanned<Vec<Spanned<String>>>>,
    preroll: Option<Spanned<String>>,
    postroll: Option<Spanned<String>>,
    preroll_bytes_max: Option<Spanned<SizeToml>>,
}

/// A size as written in TOML: a string with a unit, or a bare integer of bytes.
enum SizeToml {
    Text(String),
    Bytes(i64),
}

impl<'de> Deserialize<'de> for SizeToml {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<SizeToml, D::Error> {
        struct SizeVisitor;
        impl serde::de::Visitor<'_> for SizeVisitor {
            type Value = SizeToml;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size like \"64MiB\" or an integer number of bytes")
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<SizeToml, E> {
                Ok(SizeToml::Text(value.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<SizeToml, E> {
                Ok(SizeToml::Bytes(value))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

const TIER_EXPECTED: &str = "expected full, sample, summary or drop";

/// Turns positions in the TOML text into errors with a line.
struct Located<'a> {
    text: &'a str,
}

impl Located<'_> {
    fn at(&self, span: &Range<usize>, reason: String) -> PolicyError {
        PolicyError {
            path: None,
            line: Some(line_of(self.text, span.start)),
            reason,
        }
    }
}

impl PolicyToml {
    fn into_policy(self, text: &str) -> Result<Policy, PolicyError> {
        let located = Located { text };
        let mut builder = Policy::builder();

        if let Some(default) = &self.default {
            let tier = match default.get_ref().as_str() {
                "full" => Tier::Full,
                "drop" => Tier::Drop,
                name @ ("sample" | "summary") => {
                    return Err(located.at(
                        &default.span(),
                        format!(
                            "default = {name:?} is not supported: the default tier takes no \
                             parameters, so it is \"full\" or \"drop\"; to {name} every \
                             other kind, add a last rule with match = \"*\" and tier = {name:?}"
                        ),
                    ));
                }
                name => {
                    return Err(located.at(
                        &default.span(),
                        format!("unknown tier {}: {TIER_EXPECTED}", Shown(name)),
                    ));
                }
            };
            builder = builder.default_tier(tier);
        }

        let has_incident = self.incident.is_some();
        for rule in self.rules {
            let span = rule.span();
            let rule = rule.into_inner();
            let Some(pattern) = &rule.pattern else {
                return Err(located.at(
                    &span,
                    "rule has no match pattern: add match = \"<glob over the kind>\"".to_owned(),
                ));
            };
            compile_kind_glob(pattern.get_ref())
                .map_err(|reason| located.at(&pattern.span(), reason))?;
            let tier = rule.tier(&located, &span)?;
            match &rule.preroll {
                Some(preroll) if *preroll.get_ref() => {
                    check_preroll(&tier, has_incident)
                        .map_err(|reason| located.at(&preroll.span(), reason))?;
                    builder = builder.drop_rule_with_preroll(pattern.get_ref());
                }
                _ => builder = builder.rule(pattern.get_ref(), tier),
            }
        }

        if let Some(incident) = self.incident {
            let span = incident.span();
            builder = builder.incident(incident.into_inner().into_incident(&located, &span)?);
        }

        // Everything with a place in the file was checked above; what remains (compiling
        // the glob sets) has no line to name.
        builder.build()
    }
}

impl RuleToml {
    /// The rule's tier, with its parameters checked against the tier.
    fn tier(&self, located: &Located<'_>, rule_span: &Range<usize>) -> Result<Tier, PolicyError> {
        let Some(tier) = &self.tier else {
            return Err(located.at(
                rule_span,
                format!("rule has no tier: add tier = \"...\", {TIER_EXPECTED}"),
            ));
        };
        let name = tier.get_ref().as_str();
        if !matches!(name, "full" | "sample" | "summary" | "drop") {
            return Err(located.at(
                &tier.span(),
                format!("unknown tier {}: {TIER_EXPECTED}", Shown(name)),
            ));
        }
        // Parameters meant for another tier are refused rather than ignored: they show
        // that the rule does not do what its author meant.
        if name != "sample" {
            for (key, span) in [
                ("every", self.every.as_ref().map(Spanned::span)),
                ("rate", self.rate.as_ref().map(Spanned::span)),
            ] {
                if let Some(span) = span {
                    return Err(located.at(
                        &span,
                        format!("{key} applies only to sample rules, not to a {name} rule"),
                    ));
                }
            }
        }
        if name != "summary"
            && let Some(window) = &self.window
        {
            return Err(located.at(
                &window.span(),
                format!("window applies only to summary rules, not to a {name} rule"),
            ));
        }

        match name {
            "full" => Ok(Tier::Full),
            "drop" => Ok(Tier::Drop),
            "sample" => match (&self.every, &self.rate) {
                (Some(every), Some(rate)) => {
                    let later = if every.span().start > rate.span().start {
                        every.span()
                    } else {
                        rate.span()
                    };
                    Err(located.at(
                        &later,
                        "a sample rule takes every or rate, not both".to_owned(),
                    ))
                }
                (Some(every), None) => {
                    let n = u64::try_from(*every.get_ref())
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| {
                            located.at(
                                &every.span(),
                                format!(
                                    "every must be at least 1 (keep 1 in N events), got {}",
                                    every.get_ref()
                                ),
                            )
                        })?;
                    Ok(Tier::Sample(Sampling::Every(n)))
                }
                (None, Some(rate)) => {
                    let p = *rate.get_ref();
                    check_rate(p).map_err(|reason| located.at(&rate.span(), reason))?;
                    Ok(Tier::Sample(Sampling::Rate(p)))
                }
                (None, None) => Err(located.at(
                    &tier.span(),
                    "a sample rule needs every = N (keep 1 in N events) or rate = p (keep \
                     a fraction p of them)"
                        .to_owned(),
                )),
            },
            _ => {
                let Some(window) = &self.window else {
                    return Err(located.at(
                        &tier.span(),
                        "a summary rule needs a window, like window = \"1s\"".to_owned(),
                    ));
                };
                let window_ns = parse_duration(window.get_ref()).map_err(|reason| {
                    located.at(&window.span(), format!("invalid window: {reason}"))
                })?;
                check_window(window_ns).map_err(|reason| located.at(&window.span(), reason))?;
                Ok(Tier::Summary { window_ns })
            }
        }
    }
}

impl IncidentToml {
    fn into_incident(
        self,
        located: &Located<'_>,
        incident_span: &Range<usize>,
    ) -> Result<IncidentPolicy, PolicyError> {
        let Some(triggers) = self.triggers else {
            return Err(located.at(incident_span, NO_TRIGGERS.to_owned()));
        };
        if triggers.get_ref().is_empty() {
            return Err(located.at(&triggers.span(), NO_TRIGGERS.to_owned()));
        }
        let mut incident = IncidentPolicy::new(&[]);
        for trigger in triggers.into_inner() {
            compile_kind_glob(trigger.get_ref())
                .map_err(|reason| located.at(&trigger.span(), reason))?;
            incident.triggers.push(trigger.into_inner());
        }
        let duration = |key: &str, value: &Spanned<String>| {
            parse_duration(value.get_ref())
                .map_err(|reason| located.at(&value.span(), format!("invalid {key}: {reason}")))
        };
        if let Some(preroll) = &self.preroll {
            incident.preroll_ns = duration("preroll", preroll)?;
        }
        if let Some(postroll) = &self.postroll {
            incident.postroll_ns = duration("postroll", postroll)?;
        }
        if let Some(size) = &self.preroll_bytes_max {
            let bytes = match size.get_ref() {
                SizeToml::Text(text) => parse_size(text),
                SizeToml::Bytes(bytes) => u64::try_from(*bytes)
                    .map_err(|_| format!("size {bytes} is negative: {SIZE_EXPECTED}")),
            };
            incident.preroll_bytes_max = bytes.map_err(|reason| {
                located.at(&size.span(), format!("invalid preroll_bytes_max: {reason}"))
            })?;
        }
        Ok(incident)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

    #[test]
    fn parse_duration_accepts_each_unit_and_fractions() {
        let cases: &[(&str, u64)] = &[
            ("0s", 0),
            ("10ns", 10),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("100ms", 100_000_000),
            ("30s", 30 * NS_PER_SEC),
            ("5m", 300 * NS_PER_SEC),
            ("1h", 3_600 * NS_PER_SEC),
            ("1.5s", 1_500_000_000),
            ("0.5ms", 500_000),
            ("1.000000001s", 1_000_000_001),
            ("1.50000000000000000000000000s", 1_500_000_000),
            ("007s", 7 * NS_PER_SEC),
            ("0.25h", 900 * NS_PER_SEC),
            ("18446744073709551615ns", u64::MAX),
            ("18446744073.709551615s", u64::MAX),
        ];
        for &(text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn parse_duration_refuses_malformed_text_and_says_what_was_expected() {
        let cases: &[(&str, &str)] = &[
            ("5", "has no unit"),
            ("5x", "unknown unit \"x\""),
            ("5 s", "unknown unit \" s\""),
            ("5S", "unknown unit \"S\""),
            ("5sec", "unknown unit \"sec\""),
            ("-1s", "is negative"),
            ("", "empty duration"),
            ("s", "does not start with a number"),
            (" 5s", "does not start with a number"),
            ("+5s", "does not start with a number"),
            ("1.5.2s", "malformed number \"1.5.2\""),
            (".5s", "malformed number \".5\""),
            ("5.s", "malformed number \"5.\""),
            ("1.5ns", "not a whole number of nanoseconds"),
            ("0.0000000001s", "not a whole number of nanoseconds"),
            (
                "0.1234567890123456789h",
                "not a whole number of nanoseconds",
            ),
            ("18446744073709551616ns", "too large"),
            ("18446744073.709551616s", "too large"),
            ("5124096h", "too large"),
            ("999999999999999999999999999999h", "too large"),
        ];
        for &(text, needle) in cases {
            let err = parse_duration(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(
                err.contains("expected") || needle.contains("whole") || needle.contains("large"),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn parse_size_accepts_each_unit() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("1KiB", 1024),
            ("64MiB", 64 << 20),
            ("1GiB", 1 << 30),
            ("2TiB", 2 << 40),
            ("10KB", 10_000),
            ("10MB", 10_000_000),
            ("3GB", 3_000_000_000),
            ("1TB", 1_000_000_000_000),
            ("1.5KiB", 1536),
            ("0.5MB", 500_000),
            ("18446744073709551615", u64::MAX),
            ("0.5KiB", 512),
            ("16777215TiB", 16_777_215 << 40),
        ];
        for &(text, expected) in cases {
            assert_eq!(parse_size(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn parse_size_refuses_malformed_text_and_says_what_was_expected() {
        let cases: &[(&str, &str)] = &[
            ("", "empty size"),
            ("5x", "unknown unit \"x\""),
            ("64mib", "unknown unit \"mib\""),
            ("64 MiB", "unknown unit \" MiB\""),
            ("64M", "unknown unit \"M\""),
            ("-1", "is negative"),
            ("-1KiB", "is negative"),
            ("MiB", "does not start with a number"),
            ("1.5.2MiB", "malformed number \"1.5.2\""),
            ("1.5", "not a whole number of bytes"),
            ("1.5B", "not a whole number of bytes"),
            ("18446744073709551616", "too large"),
            ("16777216TiB", "too large"),
            ("99999999999999999999999", "too large"),
        ];
        for &(text, needle) in cases {
            let err = parse_size(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn line_of_counts_newlines_before_the_offset() {
        let text = "a\nbb\n\nccc";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 1), 1);
        assert_eq!(line_of(text, 2), 2);
        assert_eq!(line_of(text, 5), 3);
        assert_eq!(line_of(text, 6), 4);
        assert_eq!(line_of(text, text.len()), 4);
        // An offset past the end (which a parser should never report) is clamped.
        assert_eq!(line_of(text, 1000), 4);
    }

    #[test]
    fn globs_cross_dots_and_are_case_sensitive() {
        let cases: &[(&str, &str, bool)] = &[
            ("sensor.*", "sensor.imu.accel", true),
            ("sensor.*", "sensor", false),
            ("sensor*", "sensor", true),
            ("*.accel", "sensor.imu.accel", true),
            ("*.imu.*", "sensor.imu.accel", true),
            ("sensor.?mu.accel", "sensor.imu.accel", true),
            ("sensor.[a-i]mu.*", "sensor.imu.accel", true),
            ("sensor.[!i]mu.*", "sensor.imu.accel", false),
            ("{sensor,debug}.*", "debug.x", true),
            ("Sensor.*", "sensor.imu", false),
            ("**", "a.b.c", true),
            ("a.\\*", "a.*", true),
        ];
        for &(pattern, kind, expected) in cases {
            let glob = compile_kind_glob(pattern).unwrap().compile_matcher();
            assert_eq!(glob.is_match(kind), expected, "{pattern} vs {kind}");
        }
    }

    #[test]
    fn compile_glob_refuses_globs_that_cannot_match_a_kind() {
        let cases: &[(&str, &str)] = &[
            ("", "empty glob"),
            ("sensor/*", "contains '/'"),
            ("debug.* ", "whitespace"),
            ("a[b", "invalid glob \"a[b\": unclosed character class"),
            ("a{b", "unclosed alternate group"),
            ("[z-a]", "invalid range"),
            ("a\\", "dangling"),
        ];
        for &(pattern, needle) in cases {
            let err = compile_kind_glob(pattern).unwrap_err();
            assert!(err.contains(needle), "{pattern:?}: {err}");
        }
    }
}
