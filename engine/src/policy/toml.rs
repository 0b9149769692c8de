//! A policy as TOML: read from a file or a string, with errors that name the line, and
//! printed back ([`Policy::to_toml`]) as the log records it.

use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

use ::toml::Spanned;
use blackbox_log::{Compression, Shown};
use serde::Deserialize;

use super::units::{SIZE_EXPECTED, duration_text, parse_duration, parse_size};
use super::{
    IncidentPolicy, NO_TRIGGERS, Policy, PolicyError, Sampling, Tier, check_preroll, check_rate,
    check_window, compile_kind_glob,
};

/// The largest policy file [`Policy::from_toml_file`] reads, in bytes. A policy is a short
/// hand-written file; the bound keeps a wrong path (a log segment, a device) from being
/// read into memory whole.
pub const POLICY_FILE_BYTES_MAX: u64 = 1024 * 1024;

impl Policy {
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
        let file: PolicyToml = ::toml::from_str(text).map_err(|err| PolicyError {
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
            retention: self.retention.map(|r| RetentionOut {
                max_bytes: r.max_bytes.map(|b| format!("{b}B")),
                max_age: r.max_age_ns.map(duration_text),
                pinned_max_bytes: format!("{}B", r.pinned_max_bytes),
            }),
            log: self.compression.map(|c| match c {
                Compression::Off => LogOut {
                    compression: "off",
                    level: None,
                },
                Compression::Zstd { level } => LogOut {
                    compression: "zstd",
                    level: Some(level),
                },
            }),
        };
        // Strings, booleans, numbers and tables of them: the serializer cannot fail.
        ::toml::to_string(&out).unwrap_or_default()
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

/// The 1-based line of a byte offset in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    line_of_bytes(text.as_bytes(), offset)
}

pub(super) fn line_of_bytes(bytes: &[u8], offset: usize) -> usize {
    let before = bytes.get(..offset).unwrap_or(bytes);
    before.iter().filter(|&&b| b == b'\n').count() + 1
}

// The TOML text `Policy::to_toml` writes.

#[derive(serde::Serialize)]
pub(super) struct PolicyOut<'a> {
    default: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rules: Vec<RuleOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incident: Option<IncidentOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retention: Option<RetentionOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log: Option<LogOut>,
}

#[derive(serde::Serialize)]
pub(super) struct RetentionOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_bytes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_age: Option<String>,
    pinned_max_bytes: String,
}

#[derive(serde::Serialize)]
pub(super) struct LogOut {
    compression: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<i32>,
}

#[derive(serde::Serialize)]
pub(super) struct RuleOut<'a> {
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
pub(super) struct IncidentOut<'a> {
    triggers: &'a [String],
    preroll: String,
    postroll: String,
    preroll_bytes_max: String,
}

// The TOML file's shape. Fields whose problems need a place in the file are `Spanned`, so
// the errors found after parsing can name a line too.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyToml {
    default: Option<Spanned<String>>,
    #[serde(default)]
    rules: Vec<Spanned<RuleToml>>,
    incident: Option<Spanned<IncidentToml>>,
    retention: Option<Spanned<RetentionToml>>,
    log: Option<Spanned<LogToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetentionToml {
    max_bytes: Option<Spanned<SizeToml>>,
    max_age: Option<Spanned<String>>,
    pinned_max_bytes: Option<Spanned<SizeToml>>,
}

impl RetentionToml {
    fn into_retention(
        self,
        located: &Located<'_>,
        span: &Range<usize>,
    ) -> Result<blackbox_log::Retention, PolicyError> {
        let size = |key: &str, value: &Spanned<SizeToml>| {
            let bytes = match value.get_ref() {
                SizeToml::Text(text) => parse_size(text),
                SizeToml::Bytes(bytes) => u64::try_from(*bytes)
                    .map_err(|_| format!("size {bytes} is negative: {SIZE_EXPECTED}")),
            };
            bytes.map_err(|reason| located.at(&value.span(), format!("invalid {key}: {reason}")))
        };
        let retention = blackbox_log::Retention {
            max_bytes: self
                .max_bytes
                .as_ref()
                .map(|v| size("max_bytes", v))
                .transpose()?,
            max_age_ns: self
                .max_age
                .as_ref()
                .map(|v| {
                    parse_duration(v.get_ref()).map_err(|reason| {
                        located.at(&v.span(), format!("invalid max_age: {reason}"))
                    })
                })
                .transpose()?,
            pinned_max_bytes: self
                .pinned_max_bytes
                .as_ref()
                .map(|v| size("pinned_max_bytes", v))
                .transpose()?
                .unwrap_or(0),
        };
        if !retention.is_bounded() {
            return Err(located.at(
                span,
                "[retention] needs max_bytes or max_age: without either nothing is ever pruned"
                    .to_owned(),
            ));
        }
        Ok(retention)
    }
}

/// The `[log]` section: the log's per-block compression.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogToml {
    compression: Option<Spanned<String>>,
    level: Option<Spanned<i64>>,
}

/// The zstd level of `compression = "zstd"` without a `level`.
const DEFAULT_ZSTD_LEVEL: i32 = 3;

impl LogToml {
    fn compression(&self, located: &Located<'_>) -> Result<Compression, PolicyError> {
        let level_only = |span: &Range<usize>| {
            located.at(
                span,
                "level applies only to compression = \"zstd\"".to_owned(),
            )
        };
        let Some(name) = &self.compression else {
            return match &self.level {
                Some(level) => Err(level_only(&level.span())),
                None => Ok(Compression::Off),
            };
        };
        match name.get_ref().as_str() {
            "off" => match &self.level {
                Some(level) => Err(level_only(&level.span())),
                None => Ok(Compression::Off),
            },
            "zstd" => {
                let (level, span) = match &self.level {
                    Some(level) => (*level.get_ref(), level.span()),
                    None => (i64::from(DEFAULT_ZSTD_LEVEL), name.span()),
                };
                let level = i32::try_from(level).unwrap_or(i32::MAX);
                let compression = Compression::Zstd { level };
                compression
                    .validate()
                    .map_err(|reason| located.at(&span, reason))?;
                Ok(compression)
            }
            other => Err(located.at(
                &name.span(),
                format!(
                    "unknown compression {}: expected \"zstd\" or \"off\"",
                    Shown(other)
                ),
            )),
        }
    }
}

// `match` and `tier` are optional here so that a missing one is reported in this
// module's words, with the line of its rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleToml {
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
pub(super) struct IncidentToml {
    triggers: Option<Spanned<Vec<Spanned<String>>>>,
    preroll: Option<Spanned<String>>,
    postroll: Option<Spanned<String>>,
    preroll_bytes_max: Option<Spanned<SizeToml>>,
}

/// A size as written in TOML: a string with a unit, or a bare integer of bytes.
pub(super) enum SizeToml {
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

pub(super) const TIER_EXPECTED: &str = "expected full, sample, summary or drop";

/// Turns positions in the TOML text into errors with a line.
pub(super) struct Located<'a> {
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

        if let Some(retention) = self.retention {
            let span = retention.span();
            builder = builder.retention(retention.into_inner().into_retention(&located, &span)?);
        }

        if let Some(log) = &self.log {
            builder = builder.compression(log.get_ref().compression(&located)?);
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
    use super::*;

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
}
