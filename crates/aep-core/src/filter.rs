//! The `attr-match` filter dialect (AEP-0003 §6), the one every endpoint must support.
//!
//! A filter is parsed once, when a subscriber asks for it, and then asked about every Event
//! fan-out considers for that subscriber, so [`Filter::parse`] does all the checking and
//! [`Filter::matches`] only compares borrowed values: it never allocates.

use crate::envelope::CORE_ATTRIBUTES;
use crate::Severity;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

/// The protocol's error code for every filter refusal (AEP-0003 §6.5).
pub const INVALID_FILTER: &str = "invalid-filter";

/// The core attributes a filter may name (AEP-0003 §6.2 rule 1); the rest of
/// [`CORE_ATTRIBUTES`] (`time`, `seq`, `aep`, `traceparent`, `data`) are refused.
const FILTERABLE: [&str; 12] = [
    "id", "type", "subject", "source", "agent", "session", "run", "step", "epoch", "cause", "severity", "capture",
];

/// `p.*` (AEP-0003 §6.2 rule 3): one or more dot-terminated segments, then the star.
static TYPE_PATTERN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([a-z0-9_-]+\.)+\*$").expect("static regex"));

/// Why a filter was refused; every variant is answered with [`INVALID_FILTER`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("a filter must be a JSON object of attribute predicates (AEP-0003 §6.1), got {0}: send {{}} to match every Event")]
    NotAnObject(&'static str),
    #[error("`{0}` is not filterable (AEP-0003 §6.2 rule 1): filter on id, type, subject, source, agent, session, run, step, epoch, cause, severity, capture or an extension attribute; resume positions go in `from`")]
    NotFilterable(String),
    #[error("`{0}` is neither a filterable attribute nor a legal extension attribute name (AEP-0003 §6.2 rule 1, AEP-0001 §5.4): extension names are 1-20 characters of [a-z0-9]")]
    UnknownKey(String),
    #[error("the inclusion array on `{0}` is empty (AEP-0003 §6.1): list at least one value, or omit the key")]
    EmptyInclusion(String),
    #[error(
        "the predicate on `{0}` must be a string, an integer, a boolean or a non-empty array of them (AEP-0003 §6.1)"
    )]
    NotScalar(String),
    #[error("{value} on `{key}`: `*` patterns are only legal on `type` (AEP-0003 §6.2 rule 3); match the exact value instead")]
    GlobOutsideType { key: String, value: String },
    #[error("{0} is not a type pattern (AEP-0003 §6.2 rule 3): use an exact type or a prefix ending in `.*` such as \"attention.*\"; a bare \"*\" is not a pattern, omit the key instead")]
    TypePattern(String),
    #[error("`{0}` is not a severity comparison (AEP-0003 §6.1): use gte, lte or both")]
    SeverityOperator(String),
    #[error("{0} is not a severity level (AEP-0001 §8.1): use debug, info, notice, warning, error or critical")]
    SeverityLevel(String),
    #[error("an empty severity comparison compares nothing (AEP-0003 §6.1): give gte, lte or both")]
    EmptySeverityComparison,
}

impl FilterError {
    /// The error code to send back (`error{code}` frame, SSE/HTTP refusal).
    pub fn code(&self) -> &'static str {
        INVALID_FILTER
    }
}

/// A parsed `attr-match` filter: a conjunction of predicates. The default (`{}`) matches
/// every Event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    predicates: Vec<Predicate>,
}

#[derive(Debug, Clone, PartialEq)]
struct Predicate {
    attribute: String,
    /// The AEP-0001 default applied when the Event omits the attribute (AEP-0003 §6.2 rule 5).
    default: Option<Actual<'static>>,
    test: Test,
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    /// Equality or inclusion: any alternative matches (AEP-0003 §6.2 rule 2).
    AnyOf(Vec<Alternative>),
    /// Inclusive bounds in the AEP-0001 §8.1 order (AEP-0003 §6.2 rule 4).
    SeverityRange {
        gte: Option<Severity>,
        lte: Option<Severity>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Alternative {
    Str(String),
    Int(i128),
    Bool(bool),
    /// `p.*`, stored as `p.`: matches types strictly longer than and starting with it.
    TypePrefix(String),
}

/// An attribute value as matching sees it, borrowed from the Event.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Actual<'a> {
    Str(&'a str),
    Int(i128),
    Bool(bool),
    /// Floats, `null`, structures: never equal to a filter scalar.
    Other,
}

impl Filter {
    /// Parses and checks a filter; anything the grammar does not allow is refused (fail
    /// closed, AEP-0003 §6.2 rule 1), never read as match-all.
    pub fn parse(filter: &Value) -> Result<Filter, FilterError> {
        let Value::Object(members) = filter else {
            return Err(FilterError::NotAnObject(json_kind(filter)));
        };
        let predicates = members
            .iter()
            .map(|(key, predicate)| Predicate::parse(key, predicate))
            .collect::<Result<_, _>>()?;
        Ok(Filter { predicates })
    }

    /// Whether `event` satisfies every predicate. A non-object is not an Event and never
    /// matches.
    pub fn matches(&self, event: &Value) -> bool {
        event.is_object() && self.predicates.iter().all(|predicate| predicate.matches(event))
    }
}

impl Predicate {
    fn parse(key: &str, predicate: &Value) -> Result<Predicate, FilterError> {
        let default = match key {
            "severity" => Some(Actual::Str(Severity::default().as_str())),
            "capture" => Some(Actual::Str(crate::Capture::default().as_str())),
            "epoch" => Some(Actual::Int(0)),
            _ if FILTERABLE.contains(&key) => None,
            _ if CORE_ATTRIBUTES.contains(&key) => return Err(FilterError::NotFilterable(key.to_string())),
            _ if is_extension_name(key) => None,
            _ => return Err(FilterError::UnknownKey(key.to_string())),
        };
        let test = match predicate {
            Value::Object(comparison) if key == "severity" => parse_severity_range(comparison)?,
            Value::Array(alternatives) if alternatives.is_empty() => {
                return Err(FilterError::EmptyInclusion(key.to_string()))
            }
            Value::Array(alternatives) => Test::AnyOf(
                alternatives
                    .iter()
                    .map(|alternative| parse_alternative(key, alternative))
                    .collect::<Result<_, _>>()?,
            ),
            scalar => Test::AnyOf(vec![parse_alternative(key, scalar)?]),
        };
        Ok(Predicate {
            attribute: key.to_string(),
            default,
            test,
        })
    }

    fn matches(&self, event: &Value) -> bool {
        let actual = match event.get(self.attribute.as_str()) {
            Some(value) => Actual::of(value),
            None => match self.default {
                Some(default) => default,
                None => return false, // AEP-0003 §6.2 rule 5
            },
        };
        match &self.test {
            Test::AnyOf(alternatives) => alternatives.iter().any(|alternative| alternative.matches(actual)),
            Test::SeverityRange { gte, lte } => {
                let Actual::Str(level) = actual else {
                    return false;
                };
                let Some(level) = severity_named(level) else {
                    return false;
                };
                gte.is_none_or(|gte| level >= gte) && lte.is_none_or(|lte| level <= lte)
            }
        }
    }
}

impl Alternative {
    fn matches(&self, actual: Actual<'_>) -> bool {
        match (self, actual) {
            (Alternative::Str(expected), Actual::Str(value)) => expected == value,
            (Alternative::Int(expected), Actual::Int(value)) => *expected == value,
            (Alternative::Bool(expected), Actual::Bool(value)) => *expected == value,
            (Alternative::TypePrefix(prefix), Actual::Str(ty)) => ty.len() > prefix.len() && ty.starts_with(prefix),
            _ => false,
        }
    }
}

impl<'a> Actual<'a> {
    fn of(value: &'a Value) -> Actual<'a> {
        match value {
            Value::String(s) => Actual::Str(s),
            Value::Bool(b) => Actual::Bool(*b),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .map_or(Actual::Other, Actual::Int),
            _ => Actual::Other,
        }
    }
}

fn parse_alternative(key: &str, value: &Value) -> Result<Alternative, FilterError> {
    match value {
        Value::String(s) if s.contains('*') => {
            if key != "type" {
                return Err(FilterError::GlobOutsideType {
                    key: key.to_string(),
                    value: value.to_string(),
                });
            }
            if !TYPE_PATTERN.is_match(s) {
                return Err(FilterError::TypePattern(value.to_string()));
            }
            Ok(Alternative::TypePrefix(s.trim_end_matches('*').to_string()))
        }
        Value::String(s) => Ok(Alternative::Str(s.clone())),
        Value::Bool(b) => Ok(Alternative::Bool(*b)),
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .map(Alternative::Int)
            .ok_or_else(|| FilterError::NotScalar(key.to_string())),
        _ => Err(FilterError::NotScalar(key.to_string())),
    }
}

fn parse_severity_range(comparison: &serde_json::Map<String, Value>) -> Result<Test, FilterError> {
    if comparison.is_empty() {
        return Err(FilterError::EmptySeverityComparison);
    }
    let (mut gte, mut lte) = (None, None);
    for (operator, level) in comparison {
        let bound = level
            .as_str()
            .and_then(severity_named)
            .ok_or_else(|| FilterError::SeverityLevel(level.to_string()))?;
        match operator.as_str() {
            "gte" => gte = Some(bound),
            "lte" => lte = Some(bound),
            _ => return Err(FilterError::SeverityOperator(operator.clone())),
        }
    }
    Ok(Test::SeverityRange { gte, lte })
}

/// A severity by name, without the allocation `FromStr`'s error message costs.
fn severity_named(name: &str) -> Option<Severity> {
    Severity::ALL.into_iter().find(|level| level.as_str() == name)
}

/// AEP-0001 §5.4: 1-20 characters of `[a-z0-9]` (core names are checked before this).
fn is_extension_name(key: &str) -> bool {
    (1..=20).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(filter: Value) -> FilterError {
        Filter::parse(&filter).expect_err(&format!("{filter} must be refused"))
    }

    #[test]
    fn malformed_filters_are_refused_with_a_named_problem() {
        assert_eq!(refused(json!([])), FilterError::NotAnObject("an array"));
        assert_eq!(refused(json!(null)), FilterError::NotAnObject("null"));
        assert_eq!(refused(json!({"seq": 5})), FilterError::NotFilterable("seq".into()));
        assert_eq!(
            refused(json!({"acme_ext": 1})),
            FilterError::UnknownKey("acme_ext".into())
        );
        assert_eq!(
            refused(json!({"abcdefghijklmnopqrstu": 1})),
            FilterError::UnknownKey("abcdefghijklmnopqrstu".into())
        );
        assert_eq!(refused(json!({"agent": null})), FilterError::NotScalar("agent".into()));
        assert_eq!(refused(json!({"epoch": 1.5})), FilterError::NotScalar("epoch".into()));
        assert_eq!(
            refused(json!({"agent": [["a"]]})),
            FilterError::NotScalar("agent".into())
        );
        assert_eq!(
            refused(json!({"agent": {"gte": "a"}})),
            FilterError::NotScalar("agent".into())
        );
        assert_eq!(
            refused(json!({"type": ["tool.*", "*"]})),
            FilterError::TypePattern("\"*\"".into())
        );
        for pattern in ["attention*", "*.requested", "tool.*.x", "Tool.*", ".*"] {
            assert_eq!(
                refused(json!({"type": pattern})),
                FilterError::TypePattern(format!("{pattern:?}"))
            );
        }
        assert_eq!(refused(json!({"severity": {}})), FilterError::EmptySeverityComparison);
        assert_eq!(
            refused(json!({"severity": {"gte": "fatal"}})),
            FilterError::SeverityLevel("\"fatal\"".into())
        );
        assert_eq!(
            refused(json!({"severity": {"lte": 3}})),
            FilterError::SeverityLevel("3".into())
        );
        assert_eq!(
            refused(json!({"severity": [{"gte": "info"}]})),
            FilterError::NotScalar("severity".into())
        );
        assert_eq!(refused(json!({"severity": {"gt": "info"}})).code(), "invalid-filter");
    }

    #[test]
    fn matching_compares_exactly_without_coercion() {
        let filter = Filter::parse(&json!({"epoch": 1, "acmeflag": true})).unwrap();
        assert!(filter.matches(&json!({"type": "run.started", "epoch": 1, "acmeflag": true})));
        assert!(!filter.matches(&json!({"type": "run.started", "epoch": "1", "acmeflag": true})));
        assert!(!filter.matches(&json!({"type": "run.started", "epoch": 1.0, "acmeflag": true})));
        assert!(!filter.matches(&json!({"type": "run.started", "epoch": 1, "acmeflag": "true"})));
        assert!(!filter.matches(&json!({"type": "run.started", "epoch": 1})));
    }

    #[test]
    fn type_prefixes_need_a_further_segment_and_defaults_apply() {
        let filter = Filter::parse(&json!({"type": "attention.*", "capture": "metadata"})).unwrap();
        assert!(filter.matches(&json!({"type": "attention.requested"})));
        assert!(!filter.matches(&json!({"type": "attention."})));
        assert!(!filter.matches(&json!({"type": "attention"})));
        assert!(!filter.matches(&json!({"type": "attention.requested", "capture": "full"})));
        let exact = Filter::parse(&json!({"type": "attention.requested"})).unwrap();
        assert!(!exact.matches(&json!({"type": "attention.requested.more"})));
    }

    #[test]
    fn severity_ranges_are_inclusive_and_ignore_unknown_levels() {
        let band = Filter::parse(&json!({"severity": {"gte": "notice", "lte": "error"}})).unwrap();
        assert!(band.matches(&json!({"severity": "notice"})));
        assert!(band.matches(&json!({"severity": "error"})));
        assert!(!band.matches(&json!({"severity": "critical"})));
        assert!(!band.matches(&json!({"severity": "fatal"})));
        assert!(!band.matches(&json!({"severity": 4})));
        let exact = Filter::parse(&json!({"severity": ["info", "debug"]})).unwrap();
        assert!(exact.matches(&json!({"type": "tool.completed"})));
    }

    #[test]
    fn non_objects_never_match() {
        assert!(!Filter::default().matches(&json!("tool.completed")));
        assert!(Filter::default().matches(&json!({})));
    }
}
