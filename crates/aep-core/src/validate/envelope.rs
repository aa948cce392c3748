//! The envelope rules of AEP-0001 §5–§6 and §8.1–§8.2, written out one by one so each
//! rejection names its rule (the envelope schema would only say "invalid").

use super::Violation;
use crate::envelope::CORE_ATTRIBUTES;
use crate::event_type::{is_valid_type, scope_of, CATEGORIES};
use crate::sequence::Position;
use crate::types::{
    ATTENTION_ANSWERED, ATTENTION_RESOLVED, ATTENTION_ROUTED, ATTENTION_TIMEOUT, CONTROL_ACCEPTED, CONTROL_REJECTED,
};
use crate::{Capture, Scope, Severity};
use regex::Regex;
use serde_json::{Map, Value};
use std::sync::LazyLock;

const EVENT_IS_OBJECT: &str = "AEP-0001 §5 (an Event is one JSON object)";
const NEVER_NULL: &str = "AEP-0001 §5.1 (absent attributes are omitted, never null)";
const SCOPE: &str = "AEP-0001 §5.2 (session-scoped and agent-scoped Events)";
const COMMAND_SEQ: &str = "AEP-0004 §2.2 (commands omit seq)";
const ROUTED_SEQ: &str = "AEP-0002 §7.3 (attention.routed omits seq)";
const EXTENSION: &str = "AEP-0001 §5.4 (extension attributes)";
const TYPE_GRAMMAR: &str = "AEP-0001 §6 (type grammar)";
const CATEGORY: &str = "AEP-0002 §3 (closed category set)";
const SEVERITY: &str = "AEP-0001 §8.1 (severity)";
const CAPTURE: &str = "AEP-0001 §8.2 (capture)";
const ACK_CAUSE: &str = "AEP-0004 §3 (an ack's cause is the command id)";
const LIFECYCLE_SUBJECT: &str = "AEP-0002 §7.1 (attention lifecycle subject is the request id)";

static TRACEPARENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$").expect("static regex"));

/// RFC 3339 `date-time` (timezone required) and RFC 3986 `uri`, as the envelope schema's
/// `format`s say: the jsonschema crate's format checkers, so the rules are not re-implemented.
static RFC3339: LazyLock<jsonschema::Validator> = LazyLock::new(|| format_checker("date-time"));
static URI: LazyLock<jsonschema::Validator> = LazyLock::new(|| format_checker("uri"));

fn format_checker(format: &str) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&serde_json::json!({ "type": "string", "format": format }))
        .expect("a one-keyword format schema compiles")
}

/// The attributes of an Event that passed the envelope checks, borrowed from it; what the
/// payload and stream checks need.
#[derive(Debug)]
pub(super) struct Facts<'a> {
    pub(super) id: &'a str,
    pub(super) ty: &'a str,
    pub(super) source: &'a str,
    pub(super) session: Option<&'a str>,
    pub(super) run: Option<&'a str>,
    pub(super) subject: Option<&'a str>,
    pub(super) cause: Option<&'a str>,
    /// `(epoch, seq)` for the Events that carry a `seq`; `epoch` defaults to 0 (§5.1 #12).
    pub(super) position: Option<Position>,
    /// Defaults to `metadata` when absent (AEP-0001 §8.2d).
    pub(super) capture: Capture,
    pub(super) data: Option<&'a Value>,
}

/// Checks the envelope of `event` and returns its attributes. The attributes are checked in
/// their §5.1 order, so an Event with several faults is always told the same first one.
pub(super) fn check(event: &Value) -> Result<Facts<'_>, Violation> {
    let Some(obj) = event.as_object() else {
        return Err(Violation::new(
            EVENT_IS_OBJECT,
            format!("got {}; send one JSON object per Event", json_kind(event)),
        ));
    };
    check_no_null(obj)?;
    check_version(obj)?;
    let id = string(obj, 2, "id", true)?.unwrap_or_default();
    let ty = string(obj, 3, "type", true)?.unwrap_or_default();
    check_type(ty)?;
    let subject = string(obj, 4, "subject", false)?;
    check_time(obj)?;
    let source = checked_source(obj)?;
    string(obj, 7, "agent", true)?;
    let session = string(obj, 8, "session", false)?;
    let run = string(obj, 9, "run", false)?;
    string(obj, 10, "step", false)?;
    let seq = non_negative(obj, 11, "seq")?;
    let epoch = non_negative(obj, 12, "epoch")?;
    let cause = string(obj, 13, "cause", false)?;
    check_traceparent(obj)?;
    check_severity(obj)?;
    let capture = capture_of(obj)?;
    let data = data_of(obj)?;

    check_scope(obj, ty, session.is_some(), seq.is_some())?;
    check_extensions(obj)?;
    check_correlation(ty, subject, cause)?;

    Ok(Facts {
        id,
        ty,
        source,
        session,
        run,
        subject,
        cause,
        position: seq.map(|seq| Position {
            epoch: epoch.unwrap_or(0),
            seq,
        }),
        capture,
        data,
    })
}

/// AEP-0001 §5.1: an absent core attribute is omitted, never `null`.
fn check_no_null(obj: &Map<String, Value>) -> Result<(), Violation> {
    for (name, value) in obj {
        if value.is_null() && CORE_ATTRIBUTES.contains(&name.as_str()) {
            return Err(Violation::new(
                NEVER_NULL,
                format!("`{name}` is null; omit the attribute instead"),
            ));
        }
    }
    Ok(())
}

/// §5.1 #1: `aep` is the one envelope version this validator speaks.
fn check_version(obj: &Map<String, Value>) -> Result<(), Violation> {
    let aep = string(obj, 1, "aep", true)?.unwrap_or_default();
    if aep != crate::AEP_VERSION {
        return Err(Violation::new(
            attribute_rule(1, "aep"),
            format!(
                "unsupported envelope version {aep:?}; this validator speaks AEP {:?} only",
                crate::AEP_VERSION
            ),
        ));
    }
    Ok(())
}

/// §5.1 #5: `time` is an RFC 3339 timestamp with a timezone.
fn check_time(obj: &Map<String, Value>) -> Result<(), Violation> {
    let time = string(obj, 5, "time", true)?.unwrap_or_default();
    if !RFC3339.is_valid(&Value::from(time)) {
        return Err(Violation::new(
            attribute_rule(5, "time"),
            format!("{time:?} is not an RFC 3339 timestamp with a timezone, e.g. 2026-07-03T10:15:04.221Z"),
        ));
    }
    Ok(())
}

/// §5.1 #6: `source` is a URI.
fn checked_source(obj: &Map<String, Value>) -> Result<&str, Violation> {
    let source = string(obj, 6, "source", true)?.unwrap_or_default();
    if !URI.is_valid(&Value::from(source)) {
        return Err(Violation::new(
            attribute_rule(6, "source"),
            format!("{source:?} is not a URI; use aep://{{host}}/agent/{{agent}}/session/{{session}}"),
        ));
    }
    Ok(source)
}

/// §5.1 #14: `traceparent`, when present, is a W3C traceparent.
fn check_traceparent(obj: &Map<String, Value>) -> Result<(), Violation> {
    if let Some(traceparent) = string(obj, 14, "traceparent", false)? {
        if !TRACEPARENT.is_match(traceparent) {
            return Err(Violation::new(
                attribute_rule(14, "traceparent"),
                format!("{traceparent:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lowercase)"),
            ));
        }
    }
    Ok(())
}

/// AEP-0001 §8.1: `severity`, when present, is one of the six levels.
fn check_severity(obj: &Map<String, Value>) -> Result<(), Violation> {
    if let Some(severity) = obj.get("severity") {
        let known = severity.as_str().and_then(|s| s.parse::<Severity>().ok());
        if known.is_none() {
            return Err(Violation::new(
                SEVERITY,
                format!("unknown severity {severity}; use debug, info, notice, warning, error or critical"),
            ));
        }
    }
    Ok(())
}

/// AEP-0001 §8.2: `capture` is one of the four levels, `metadata` when absent (§8.2d).
fn capture_of(obj: &Map<String, Value>) -> Result<Capture, Violation> {
    match obj.get("capture") {
        None => Ok(Capture::default()),
        Some(capture) => capture.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| {
            Violation::new(
                CAPTURE,
                format!("unknown capture level {capture}; use none, metadata, redacted or full"),
            )
        }),
    }
}

/// §5.1 #17: `data`, when present, is a JSON object.
fn data_of(obj: &Map<String, Value>) -> Result<Option<&Value>, Violation> {
    let data = obj.get("data");
    if let Some(data) = data {
        if !data.is_object() {
            return Err(Violation::new(
                attribute_rule(17, "data"),
                format!("`data` is {}; the payload is a JSON object", json_kind(data)),
            ));
        }
    }
    Ok(data)
}

fn attribute_rule(number: u8, name: &str) -> String {
    format!("AEP-0001 §5.1 #{number} ({name})")
}

/// A string attribute: present when `required`, and never empty (the envelope schema's
/// `minLength: 1`).
fn string<'a>(
    obj: &'a Map<String, Value>,
    number: u8,
    name: &str,
    required: bool,
) -> Result<Option<&'a str>, Violation> {
    let Some(value) = obj.get(name) else {
        if required {
            return Err(Violation::new(
                attribute_rule(number, name),
                format!("the required attribute `{name}` is missing"),
            ));
        }
        return Ok(None);
    };
    match value.as_str() {
        Some("") => Err(Violation::new(
            attribute_rule(number, name),
            format!("`{name}` is empty; give it a value or omit it"),
        )),
        Some(s) => Ok(Some(s)),
        None => Err(Violation::new(
            attribute_rule(number, name),
            format!("`{name}` is {}; it must be a string", json_kind(value)),
        )),
    }
}

/// `seq` and `epoch`: integers >= 0. A JSON number written with a fraction or an exponent
/// is not an integer here, whatever its value.
fn non_negative(obj: &Map<String, Value>, number: u8, name: &str) -> Result<Option<u64>, Violation> {
    let Some(value) = obj.get(name) else {
        return Ok(None);
    };
    value.as_u64().map(Some).ok_or_else(|| {
        Violation::new(
            attribute_rule(number, name),
            format!("`{name}` is {value}; it must be an integer >= 0"),
        )
    })
}

fn check_type(ty: &str) -> Result<(), Violation> {
    if is_valid_type(ty) {
        return Ok(());
    }
    // Well formed apart from its first segment: the category is outside the closed set.
    let unknown_category = match ty.split_once('.') {
        Some((first, rest)) => {
            first != "x"
                && !first.is_empty()
                && first
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && is_valid_type(&format!("agent.{rest}"))
        }
        None => false,
    };
    if unknown_category {
        return Err(Violation::new(
            CATEGORY,
            format!(
                "{ty:?} has no registered category; use one of {}, or a vendor type x.{{vendor}}.…",
                CATEGORIES.join(", ")
            ),
        ));
    }
    Err(Violation::new(
        TYPE_GRAMMAR,
        crate::TypeError(ty.to_string()).to_string(),
    ))
}

/// AEP-0001 §5.2: agent-scoped Events carry no session; foreign-emitter Events (commands,
/// `attention.routed`) carry a session but no `seq`; everything else carries both.
fn check_scope(obj: &Map<String, Value>, ty: &str, has_session: bool, has_seq: bool) -> Result<(), Violation> {
    match scope_of(ty) {
        Scope::Agent => {
            if let Some(attr) = ["session", "run", "step", "seq"]
                .into_iter()
                .find(|a| obj.contains_key(*a))
            {
                return Err(Violation::new(
                    SCOPE,
                    format!("agent-scoped `{ty}` carries `{attr}`; agent.* Events describe the emitter, omit it"),
                ));
            }
        }
        Scope::ForeignEmitter => {
            if !has_session {
                return Err(Violation::new(
                    SCOPE,
                    format!("`{ty}` is addressed to a session but has no `session`; name the target session"),
                ));
            }
            if has_seq {
                let rule = if ty == ATTENTION_ROUTED {
                    ROUTED_SEQ
                } else {
                    COMMAND_SEQ
                };
                return Err(Violation::new(
                    rule,
                    format!("`{ty}` carries `seq`; its emitter does not own the session's order, omit it"),
                ));
            }
        }
        Scope::Session => {
            for (present, attr) in [(has_session, "session"), (has_seq, "seq")] {
                if !present {
                    return Err(Violation::new(
                        SCOPE,
                        format!("session-scoped `{ty}` has no `{attr}`; session-scoped Events carry session and seq"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// AEP-0001 §5.4: names `[a-z0-9]{1,20}` (a core name is the core attribute itself), values
/// string, integer or boolean.
fn check_extensions(obj: &Map<String, Value>) -> Result<(), Violation> {
    for (name, value) in obj {
        if CORE_ATTRIBUTES.contains(&name.as_str()) {
            continue;
        }
        let name_ok =
            (1..=20).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !name_ok {
            return Err(Violation::new(
                EXTENSION,
                format!("extension attribute name {name:?} must be 1 to 20 characters of [a-z0-9]; rename it"),
            ));
        }
        let scalar = match value {
            Value::String(_) | Value::Bool(_) => true,
            Value::Number(n) => n.is_i64() || n.is_u64(),
            _ => false,
        };
        if !scalar {
            return Err(Violation::new(
                EXTENSION,
                format!(
                    "extension attribute `{name}` is {}; values are strings, integers or booleans only",
                    json_kind(value)
                ),
            ));
        }
    }
    Ok(())
}

/// The correlation attributes some types cannot do without.
fn check_correlation(ty: &str, subject: Option<&str>, cause: Option<&str>) -> Result<(), Violation> {
    let after_request = matches!(
        ty,
        ATTENTION_ROUTED | ATTENTION_ANSWERED | ATTENTION_RESOLVED | ATTENTION_TIMEOUT
    );
    if after_request && subject.is_none() {
        return Err(Violation::new(
            LIFECYCLE_SUBJECT,
            format!("`{ty}` has no `subject`; set it to the id of the attention.requested Event"),
        ));
    }
    if matches!(ty, CONTROL_ACCEPTED | CONTROL_REJECTED) && cause.is_none() {
        return Err(Violation::new(
            ACK_CAUSE,
            format!("`{ty}` has no `cause`; set it to the id of the command it acknowledges"),
        ));
    }
    Ok(())
}

/// How a value reads in an error message.
pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a float",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::super::validate_event;
    use serde_json::{json, Value};

    fn event() -> Value {
        json!({
            "aep": "0.1", "id": "01J", "type": "progress.status", "time": "2026-07-03T10:00:00+02:00",
            "source": "aep://h/agent/a/session/s1", "agent": "a", "session": "s1", "seq": 0
        })
    }

    fn with(attr: &str, value: Value) -> Value {
        let mut e = event();
        e[attr] = value;
        e
    }

    fn rule_of(e: &Value) -> String {
        validate_event(e).expect_err(&e.to_string()).rule
    }

    #[test]
    fn a_minimal_event_with_an_offset_timezone_passes() {
        assert_eq!(validate_event(&event()), Ok(()));
    }

    #[test]
    fn extension_values_are_scalars_and_never_floats() {
        assert_eq!(validate_event(&with("acmezone", json!("eu"))), Ok(()));
        assert_eq!(validate_event(&with("acmeshard", json!(-3))), Ok(()));
        assert_eq!(validate_event(&with("acmeflag", json!(true))), Ok(()));
        for bad in [json!(1.5), json!(2.0), json!(null), json!([1])] {
            assert!(rule_of(&with("acmeval", bad)).starts_with("AEP-0001 §5.4"));
        }
        assert!(rule_of(&with("", json!("v"))).starts_with("AEP-0001 §5.4"));
        assert!(rule_of(&with("Acme", json!("v"))).starts_with("AEP-0001 §5.4"));
    }

    #[test]
    fn core_attributes_are_never_null() {
        for attr in ["subject", "run", "epoch", "data", "severity"] {
            assert!(
                rule_of(&with(attr, Value::Null)).starts_with("AEP-0001 §5.1 ("),
                "{attr}"
            );
        }
    }

    #[test]
    fn each_attribute_rejection_names_its_number() {
        let missing = |attr: &str| {
            let mut e = event();
            e.as_object_mut().unwrap().remove(attr);
            rule_of(&e)
        };
        assert!(missing("aep").starts_with("AEP-0001 §5.1 #1 "));
        assert!(missing("id").starts_with("AEP-0001 §5.1 #2 "));
        assert!(missing("type").starts_with("AEP-0001 §5.1 #3 "));
        assert!(missing("time").starts_with("AEP-0001 §5.1 #5 "));
        assert!(missing("source").starts_with("AEP-0001 §5.1 #6 "));
        assert!(missing("agent").starts_with("AEP-0001 §5.1 #7 "));
        for (attr, value, number) in [
            ("id", json!(""), 2),
            ("id", json!(7), 2),
            ("subject", json!(""), 4),
            ("time", json!("2026-07-03T10:00:00"), 5),
            ("time", json!("2026-07-03"), 5),
            ("time", json!("yesterday"), 5),
            ("source", json!("not a uri"), 6),
            ("run", json!(1), 9),
            ("step", json!(""), 10),
            ("seq", json!(1.0), 11),
            ("seq", json!("1"), 11),
            ("epoch", json!(-1), 12),
            ("cause", json!(""), 13),
            (
                "traceparent",
                json!("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
                14,
            ),
            ("data", json!([1]), 17),
        ] {
            let rule = rule_of(&with(attr, value.clone()));
            assert!(
                rule.starts_with(&format!("AEP-0001 §5.1 #{number} ")),
                "{attr}={value}: {rule}"
            );
        }
        assert!(rule_of(&with("capture", json!("everything"))).starts_with("AEP-0001 §8.2"));
        assert!(rule_of(&with("severity", json!(3))).starts_with("AEP-0001 §8.1"));
    }

    #[test]
    fn an_event_is_an_object() {
        for not_object in [json!(null), json!([event()]), json!("{}"), json!(1)] {
            assert!(rule_of(&not_object).starts_with("AEP-0001 §5 ("));
        }
    }

    #[test]
    fn foreign_emitter_events_need_a_session() {
        let mut cmd = with("type", json!("control.pause"));
        cmd.as_object_mut().unwrap().remove("seq");
        assert_eq!(validate_event(&cmd), Ok(()));
        cmd.as_object_mut().unwrap().remove("session");
        assert!(rule_of(&cmd).starts_with("AEP-0001 §5.2"));
    }

    #[test]
    fn acks_need_a_cause_and_lifecycle_events_a_subject() {
        let ack = with("type", json!("control.accepted"));
        assert!(rule_of(&ack).starts_with("AEP-0004 §3"));
        let mut ack = with("cause", json!("CMD1"));
        ack["type"] = json!("control.accepted");
        assert_eq!(validate_event(&ack), Ok(()));
        let resolved = with("type", json!("attention.resolved"));
        assert!(rule_of(&resolved).starts_with("AEP-0002 §7.1"));
    }

    #[test]
    fn vendor_types_pass_with_any_payload() {
        let mut e = with("type", json!("x.cline.prompt.submitted"));
        assert_eq!(validate_event(&e), Ok(()));
        e["data"] = json!({"n": [1, {"a": null}]});
        assert_eq!(validate_event(&e), Ok(()));
    }
}
