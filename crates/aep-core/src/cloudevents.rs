//! The CloudEvents bridge (AEP-0005 §1, §2): an AEP Event as a CloudEvents 1.0 event in the
//! JSON format, structured mode, and back. The envelope is CE-isomorphic by design, so the
//! mapping is five rules and one table and loses nothing: `inverse(forward(e)) == e` modulo
//! member order (§5 rule 1). Pure: a JSON object in, a JSON object out.
//!
//! - [`forward`]: B1 constants, B2 pass-through, B3 `dev.aep.` type root, B4 the `aep*`
//!   attribute table (extension attributes verbatim), B5 `traceparent` unprefixed.
//! - [`inverse`]: the reverse for CE events under the `dev.aep.` root; unknown extension
//!   attributes are kept when their names are legal AEP extension names and dropped otherwise,
//!   each drop reported in [`Inbound::dropped`] (§2 rule 2). Foreign CE types are refused
//!   (§2 rule 3).
//! - [`check`]: CloudEvents 1.0 JSON-format validity of a forwarded event (§5 rule 2).

use crate::envelope::CORE_ATTRIBUTES;
use regex::Regex;
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// B3: the reverse-DNS root every AEP type is carried under.
pub const TYPE_ROOT: &str = "dev.aep.";
/// B1: the CloudEvents version.
pub const SPECVERSION: &str = "1.0";
/// B1: `datacontenttype` when `data` is present.
pub const CONTENT_TYPE: &str = "application/json";

/// B4/B5: AEP attribute → CE attribute. Absent AEP optionals produce nothing (defaults are not
/// materialized).
const TABLE: [(&str, &str); 11] = [
    ("aep", "aepversion"),
    ("agent", "aepagentid"),
    ("session", "aepsessionid"),
    ("run", "aeprunid"),
    ("step", "aepstep"),
    ("seq", "aepsequence"),
    ("epoch", "aepepoch"),
    ("cause", "aepcausationid"),
    ("severity", "aepseverity"),
    ("capture", "aepcapture"),
    ("traceparent", "traceparent"),
];

/// B2: copied verbatim both ways.
const PASS_THROUGH: [&str; 5] = ["id", "source", "subject", "time", "data"];

/// CloudEvents' own context attributes (core and the JSON format's members): an AEP extension
/// with one of these names, or with a name the table mints, would be read back as something
/// else, so it cannot cross losslessly.
const CE_CONTEXT: [&str; 10] = [
    "specversion",
    "id",
    "source",
    "type",
    "datacontenttype",
    "dataschema",
    "subject",
    "time",
    "data",
    "data_base64",
];

/// AEP-0001 §5.4 (and CloudEvents' attribute naming, which it follows).
static NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z0-9]{1,20}$").expect("static regex"));

/// Why an AEP Event cannot be forwarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardError {
    #[error("the Event has no `{0}` string (AEP-0001 §5.1): only a valid AEP Event can be bridged")]
    Missing(&'static str),
    #[error("extension attribute {0:?} is not a legal name (AEP-0001 §5.4): 1-20 characters of [a-z0-9]")]
    ExtensionName(String),
    #[error("extension attribute {0:?} is a name the CloudEvents mapping itself uses (AEP-0005 §1 B4): it would come back as another attribute; rename it")]
    ExtensionCollision(String),
    #[error("extension attribute {0:?} is not a string, integer or boolean (AEP-0001 §5.4)")]
    ExtensionValue(String),
}

/// Why a CloudEvent cannot be turned into an AEP Event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InverseError {
    #[error("specversion {0:?} is not CloudEvents 1.0")]
    SpecVersion(String),
    #[error("the CloudEvent has no `{0}` string (CloudEvents 1.0 requires it)")]
    Missing(&'static str),
    #[error(
        "type {0:?} is not under {TYPE_ROOT:?}: a foreign CloudEvent is out of the bridge's scope (AEP-0005 §2 rule 3)"
    )]
    Foreign(String),
    #[error("datacontenttype {0:?} is not {CONTENT_TYPE}: AEP payloads are JSON")]
    ContentType(String),
    #[error("the CloudEvent carries data_base64: AEP payloads are JSON, never binary")]
    Binary,
}

/// An attribute the inverse could not carry into the envelope (AEP-0005 §2 rule 2: dropped
/// with a diagnostic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub name: String,
    pub reason: DropReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Not 1-20 characters of `[a-z0-9]` (AEP-0001 §5.4).
    IllegalName,
    /// An AEP core attribute's name: an extension may not reuse it.
    CoreName,
    /// Not a string, integer or boolean.
    NotScalar,
    /// A CloudEvents context attribute with no AEP home (`dataschema`).
    NoHome,
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self.reason {
            DropReason::IllegalName => "is not a legal AEP extension name (AEP-0001 §5.4)",
            DropReason::CoreName => "reuses an AEP core attribute's name",
            DropReason::NotScalar => "is not a string, integer or boolean",
            DropReason::NoHome => "is a CloudEvents attribute the AEP envelope has no place for",
        };
        write!(f, "CloudEvents attribute {:?} dropped: it {why}", self.name)
    }
}

/// The inverse's result: the AEP Event and what could not ride it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub event: Map<String, Value>,
    pub dropped: Vec<Dropped>,
}

/// AEP Event → CloudEvent (AEP-0005 §1).
pub fn forward(event: &Map<String, Value>) -> Result<Map<String, Value>, ForwardError> {
    let ty = string(event, "type").ok_or(ForwardError::Missing("type"))?;
    string(event, "id").ok_or(ForwardError::Missing("id"))?;
    string(event, "source").ok_or(ForwardError::Missing("source"))?;
    let mut ce = Map::with_capacity(event.len() + 2);
    ce.insert("specversion".into(), Value::from(SPECVERSION));
    for (name, value) in event {
        let name = name.as_str();
        if name == "type" {
            ce.insert("type".into(), Value::String(format!("{TYPE_ROOT}{ty}")));
        } else if PASS_THROUGH.contains(&name) {
            ce.insert(name.into(), value.clone());
        } else if let Some((_, to)) = TABLE.iter().find(|(from, _)| *from == name) {
            ce.insert((*to).into(), value.clone());
        } else {
            if !NAME.is_match(name) {
                return Err(ForwardError::ExtensionName(name.into()));
            }
            if CE_CONTEXT.contains(&name) || TABLE.iter().any(|(_, to)| *to == name) {
                return Err(ForwardError::ExtensionCollision(name.into()));
            }
            if !is_scalar(value) {
                return Err(ForwardError::ExtensionValue(name.into()));
            }
            ce.insert(name.into(), value.clone());
        }
    }
    if event.contains_key("data") {
        ce.insert("datacontenttype".into(), Value::from(CONTENT_TYPE));
    }
    Ok(ce)
}

/// CloudEvent → AEP Event (AEP-0005 §2).
pub fn inverse(ce: &Map<String, Value>) -> Result<Inbound, InverseError> {
    match ce.get("specversion") {
        Some(Value::String(v)) if v == SPECVERSION => {}
        Some(other) => {
            return Err(InverseError::SpecVersion(
                other.as_str().unwrap_or_default().to_string(),
            ))
        }
        None => return Err(InverseError::Missing("specversion")),
    }
    let ty = string(ce, "type").ok_or(InverseError::Missing("type"))?;
    let aep_type = ty
        .strip_prefix(TYPE_ROOT)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| InverseError::Foreign(ty.to_string()))?;
    string(ce, "id").ok_or(InverseError::Missing("id"))?;
    string(ce, "source").ok_or(InverseError::Missing("source"))?;
    if ce.contains_key("data_base64") {
        return Err(InverseError::Binary);
    }
    let mut event = Map::with_capacity(ce.len());
    let mut dropped = Vec::new();
    for (name, value) in ce {
        let name = name.as_str();
        match name {
            "specversion" => {}
            "type" => {
                event.insert("type".into(), Value::from(aep_type));
            }
            "datacontenttype" => {
                let media = value.as_str().unwrap_or_default();
                let essence = media.split(';').next().unwrap_or_default().trim();
                if !essence.eq_ignore_ascii_case(CONTENT_TYPE) {
                    return Err(InverseError::ContentType(media.to_string()));
                }
            }
            _ if PASS_THROUGH.contains(&name) => {
                event.insert(name.into(), value.clone());
            }
            _ => {
                if let Some((from, _)) = TABLE.iter().find(|(_, to)| *to == name) {
                    event.insert((*from).into(), value.clone());
                    continue;
                }
                let reason = if CE_CONTEXT.contains(&name) {
                    Some(DropReason::NoHome)
                } else if !NAME.is_match(name) {
                    Some(DropReason::IllegalName)
                } else if CORE_ATTRIBUTES.contains(&name) {
                    Some(DropReason::CoreName)
                } else if !is_scalar(value) {
                    Some(DropReason::NotScalar)
                } else {
                    None
                };
                match reason {
                    Some(reason) => dropped.push(Dropped {
                        name: name.to_string(),
                        reason,
                    }),
                    None => {
                        event.insert(name.into(), value.clone());
                    }
                }
            }
        }
    }
    Ok(Inbound { event, dropped })
}

/// A CloudEvents 1.0 JSON-format rule a CloudEvent breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid CloudEvents 1.0 event: {0}")]
pub struct Invalid(pub String);

/// Checks a CloudEvent against CloudEvents 1.0 and its JSON format: the required attributes,
/// attribute names, and each attribute's type (strings, booleans, integers of 32 bits).
pub fn check(ce: &Map<String, Value>) -> Result<(), Invalid> {
    if ce.get("specversion").and_then(Value::as_str) != Some(SPECVERSION) {
        return Err(Invalid("specversion must be \"1.0\"".into()));
    }
    for required in ["id", "source", "type"] {
        if string(ce, required).is_none_or(str::is_empty) {
            return Err(Invalid(format!("`{required}` must be a non-empty string")));
        }
    }
    for (name, value) in ce {
        match name.as_str() {
            "data" => {}
            "data_base64" => {
                if !value.is_string() {
                    return Err(Invalid("data_base64 must be a string".into()));
                }
            }
            "subject" | "datacontenttype" | "dataschema" | "time" => {
                if string(ce, name).is_none_or(str::is_empty) {
                    return Err(Invalid(format!("`{name}` must be a non-empty string")));
                }
            }
            _ if !NAME.is_match(name) => {
                return Err(Invalid(format!(
                    "attribute name {name:?} is not 1-20 characters of [a-z0-9]"
                )))
            }
            _ => match value {
                Value::String(_) | Value::Bool(_) => {}
                Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {}
                _ => {
                    return Err(Invalid(format!(
                        "attribute `{name}` is {value}: extension values are strings, booleans or 32-bit integers"
                    )))
                }
            },
        }
    }
    if ce.contains_key("data") && ce.contains_key("data_base64") {
        return Err(Invalid("data and data_base64 are mutually exclusive".into()));
    }
    Ok(())
}

fn string<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    object.get(name).and_then(Value::as_str)
}

/// An AEP extension value: string, integer (64-bit) or boolean (AEP-0001 §5.4).
fn is_scalar(value: &Value) -> bool {
    match value {
        Value::String(_) | Value::Bool(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn event() -> Map<String, Value> {
        object(
            json!({"aep": "0.1", "id": "e1", "type": "tool.requested", "time": "2026-07-03T10:14:00.000Z",
                      "source": "aep://h/agent/cline/session/s", "agent": "cline", "session": "s.1", "seq": 4,
                      "epoch": 0, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                      "clinehook": "abc", "data": {"tool": {"name": "Bash"}}}),
        )
    }

    #[test]
    fn the_five_rules_forward_and_back() {
        let ce = forward(&event()).unwrap();
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["type"], "dev.aep.tool.requested");
        assert_eq!(ce["datacontenttype"], "application/json");
        assert_eq!((&ce["aepsessionid"], &ce["aepsequence"]), (&json!("s.1"), &json!(4)));
        assert_eq!(ce["traceparent"], event()["traceparent"], "B5: unprefixed");
        assert_eq!(ce["clinehook"], "abc", "extensions pass verbatim");
        assert!(!ce.contains_key("aepseverity"), "absent optionals produce nothing");
        check(&ce).unwrap();
        let back = inverse(&ce).unwrap();
        assert_eq!((back.event, back.dropped), (event(), vec![]));
        let mut bare = event();
        bare.remove("data");
        assert!(!forward(&bare).unwrap().contains_key("datacontenttype"));
    }

    #[test]
    fn an_event_that_cannot_cross_losslessly_is_refused() {
        let with = |k: &str, v: Value| {
            let mut e = event();
            e.insert(k.into(), v);
            forward(&e)
        };
        assert_eq!(
            with("aepagentid", json!("x")),
            Err(ForwardError::ExtensionCollision("aepagentid".into()))
        );
        assert_eq!(
            with("specversion", json!("2")),
            Err(ForwardError::ExtensionCollision("specversion".into()))
        );
        assert_eq!(
            with("Bad_Name", json!(1)),
            Err(ForwardError::ExtensionName("Bad_Name".into()))
        );
        assert_eq!(
            with("acmeobj", json!({"a": 1})),
            Err(ForwardError::ExtensionValue("acmeobj".into()))
        );
        let mut no_type = event();
        no_type.remove("type");
        assert_eq!(forward(&no_type), Err(ForwardError::Missing("type")));
    }

    #[test]
    fn the_inverse_refuses_what_is_not_an_aep_cloudevent() {
        let ce = forward(&event()).unwrap();
        let with = |k: &str, v: Value| {
            let mut c = ce.clone();
            c.insert(k.into(), v);
            inverse(&c)
        };
        assert_eq!(
            with("type", json!("com.example.thing")),
            Err(InverseError::Foreign("com.example.thing".into()))
        );
        assert_eq!(
            with("type", json!("dev.aep.")),
            Err(InverseError::Foreign("dev.aep.".into()))
        );
        assert_eq!(
            with("specversion", json!("0.3")),
            Err(InverseError::SpecVersion("0.3".into()))
        );
        assert_eq!(
            with("datacontenttype", json!("text/plain")),
            Err(InverseError::ContentType("text/plain".into()))
        );
        assert!(with("datacontenttype", json!("application/json; charset=utf-8")).is_ok());
        assert_eq!(with("data_base64", json!("AA==")), Err(InverseError::Binary));
        let mut no_id = ce.clone();
        no_id.remove("id");
        assert_eq!(inverse(&no_id), Err(InverseError::Missing("id")));
    }

    #[test]
    fn unknown_attributes_are_kept_when_legal_and_dropped_with_a_reason_otherwise() {
        let mut ce = forward(&event()).unwrap();
        for (k, v) in [
            ("aepfuture", json!("x")),
            ("tracestate", json!("a=b")),
            ("dataschema", json!("https://s")),
            ("run", json!("r")),
            ("acme-x", json!(1)),
            ("acmelist", json!([1])),
        ] {
            ce.insert(k.into(), v);
        }
        let back = inverse(&ce).unwrap();
        assert_eq!(
            (&back.event["aepfuture"], &back.event["tracestate"]),
            (&json!("x"), &json!("a=b"))
        );
        let dropped: Vec<(&str, DropReason)> = back.dropped.iter().map(|d| (d.name.as_str(), d.reason)).collect();
        assert_eq!(
            dropped,
            [
                ("acme-x", DropReason::IllegalName),
                ("acmelist", DropReason::NotScalar),
                ("dataschema", DropReason::NoHome),
                ("run", DropReason::CoreName),
            ]
        );
        assert!(!back.event.contains_key("run"), "never mistaken for aeprunid");
        assert!(back.dropped[0].to_string().contains("acme-x"));
    }

    #[test]
    fn validity_wants_names_types_and_32_bit_integers() {
        let ce = forward(&event()).unwrap();
        let with = |k: &str, v: Value| {
            let mut c = ce.clone();
            c.insert(k.into(), v);
            check(&c)
        };
        assert!(with("aepsequence", json!(1u64 << 31)).is_err());
        assert!(with("aepsequence", json!(i32::MAX)).is_ok());
        assert!(with("Upper", json!("x")).is_err());
        assert!(with("id", json!("")).is_err());
        assert!(with("ext", json!(1.5)).is_err());
    }
}
