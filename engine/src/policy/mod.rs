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
//!
//! [log]
//! compression = "zstd"          # or "off"; without [log], the LogOptions' setting
//! level = 3                     # zstd level, default 3
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

mod kind;
mod toml;
mod units;

pub use self::toml::POLICY_FILE_BYTES_MAX;
pub use kind::{KIND_BYTES_MAX, KindError, validate_kind};
pub use units::{parse_duration, parse_size};

use std::cell::RefCell;
use std::fmt;
use std::path::PathBuf;

use blackbox_log::{Compression, Shown};
use globset::{Candidate, Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use units::NS_PER_SEC;

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
    /// The disk budget (`[retention]`), if the log is bounded.
    retention: Option<blackbox_log::Retention>,
    /// The log's block compression, when the policy sets it.
    compression: Option<Compression>,
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
            && self.retention == other.retention
            && self.compression == other.compression
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
            retention: None,
            compression: None,
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
            retention: None,
            compression: None,
        }
    }

    /// The log's per-block compression the policy sets (its `[log]` section), which the
    /// recorder opens the log with; `None`: the policy leaves it to
    /// [`LogOptions`](blackbox_log::LogOptions).
    #[must_use]
    pub fn compression(&self) -> Option<Compression> {
        self.compression
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

    /// The disk budget (`[retention]`: `max_bytes`, `max_age`, `pinned_max_bytes`),
    /// if the log is bounded: the log prunes its oldest segments after every seal
    /// (`blackbox_log::Retention`), and incident windows are pinned. Under `max_bytes`
    /// the log writes segments of at most an eighth of it, never below 64 KiB
    /// (`blackbox_log::LogOptions::effective_segment_bytes_max`), so a budget smaller
    /// than the configured segment size still prunes.
    #[must_use]
    pub fn retention(&self) -> Option<blackbox_log::Retention> {
        self.retention
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
}

/// Builds a [`Policy`] in Rust; [`PolicyBuilder::build`] checks and compiles it.
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    default: Tier,
    rules: Vec<Rule>,
    incident: Option<IncidentPolicy>,
    retention: Option<blackbox_log::Retention>,
    compression: Option<Compression>,
}

impl PolicyBuilder {
    /// Bounds the log's disk (see [`Policy::retention`]).
    #[must_use]
    pub fn retention(mut self, retention: blackbox_log::Retention) -> Self {
        self.retention = Some(retention);
        self
    }

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

    /// Sets the log's per-block compression (by default the policy leaves it to the
    /// log's options).
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
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
        if let Some(compression) = self.compression {
            compression
                .validate()
                .map_err(|reason| fail(format!("log: {reason}")))?;
        }

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
            retention: self.retention,
            compression: self.compression,
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

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

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
