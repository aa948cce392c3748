//! The AEP Event envelope (AEP-0001 §5): sixteen context attributes, extension attributes and
//! `data`. Absent optionals are omitted, never `null` (§5.1).

use crate::event_type::{is_valid_type, scope_of, Scope};
use crate::{Capture, Severity};
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The only protocol version this crate speaks.
pub const AEP_VERSION: &str = "0.1";

/// The core attribute names; an extension may not reuse one (AEP-0001 §5.4).
pub(crate) const CORE_ATTRIBUTES: [&str; 17] = [
    "aep",
    "id",
    "type",
    "subject",
    "time",
    "source",
    "agent",
    "session",
    "run",
    "step",
    "seq",
    "epoch",
    "cause",
    "traceparent",
    "severity",
    "capture",
    "data",
];

static EXT_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z0-9]{1,20}$").expect("static regex"));
static TRACEPARENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$").expect("static regex"));

/// An extension attribute value: string, integer or boolean; never a float or a structure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExtValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

/// Why an envelope was refused at the producing boundary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("{0}")]
    Type(#[from] crate::TypeError),
    #[error("extension attribute {0:?} is not a legal name (AEP-0001 §5.4): use 1-20 characters of [a-z0-9]")]
    ExtensionName(String),
    #[error("extension attribute {0:?} collides with a core attribute (AEP-0001 §5.4): pick a vendor-prefixed name")]
    ExtensionCollision(String),
    #[error("{ty} must carry `{attr}` (AEP-0001 §5.2)")]
    Missing { ty: String, attr: &'static str },
    #[error("{ty} must not carry `{attr}` (AEP-0001 §5.2, AEP-0004 §2.2)")]
    Forbidden { ty: String, attr: &'static str },
    #[error("attribute `{0}` must not be empty (AEP-0001 §5)")]
    Empty(&'static str),
    #[error("traceparent {0:?} is not a W3C traceparent (AEP-0001 §5)")]
    Traceparent(String),
}

/// One AEP Event. Build it with [`Envelope::new`], set the optionals, then [`Envelope::check`]
/// (or [`Envelope::to_line`], which checks) before it leaves the process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub aep: String,
    pub id: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub subject: Option<String>,
    pub time: String,
    pub source: String,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub traceparent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub severity: Option<Severity>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub capture: Option<Capture>,
    /// Extension attributes; only reachable through [`Envelope::set_extension`], which refuses
    /// illegal names.
    #[serde(flatten)]
    extensions: BTreeMap<String, ExtValue>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Envelope {
    /// A new Event with the required attributes; `ty` is checked against the §6 grammar.
    pub fn new(
        id: impl Into<String>,
        ty: &str,
        time: impl Into<String>,
        source: impl Into<String>,
        agent: impl Into<String>,
    ) -> Result<Self, EnvelopeError> {
        if !is_valid_type(ty) {
            return Err(crate::TypeError(ty.to_string()).into());
        }
        Ok(Envelope {
            aep: AEP_VERSION.to_string(),
            id: id.into(),
            ty: ty.to_string(),
            subject: None,
            time: time.into(),
            source: source.into(),
            agent: agent.into(),
            session: None,
            run: None,
            step: None,
            seq: None,
            epoch: None,
            cause: None,
            traceparent: None,
            severity: None,
            capture: None,
            extensions: BTreeMap::new(),
            data: None,
        })
    }

    /// Sets an extension attribute, refusing an illegal or colliding name (AEP-0001 §5.4).
    pub fn set_extension(&mut self, name: &str, value: ExtValue) -> Result<(), EnvelopeError> {
        if CORE_ATTRIBUTES.contains(&name) {
            return Err(EnvelopeError::ExtensionCollision(name.to_string()));
        }
        if !EXT_NAME.is_match(name) {
            return Err(EnvelopeError::ExtensionName(name.to_string()));
        }
        self.extensions.insert(name.to_string(), value);
        Ok(())
    }

    pub fn extensions(&self) -> &BTreeMap<String, ExtValue> {
        &self.extensions
    }

    /// Checks everything the producer controls: the type grammar, the scope rules of
    /// AEP-0001 §5.2, non-empty strings, the traceparent form and extension names.
    pub fn check(&self) -> Result<(), EnvelopeError> {
        if !is_valid_type(&self.ty) {
            return Err(crate::TypeError(self.ty.clone()).into());
        }
        for (attr, value) in [
            ("id", &self.id),
            ("source", &self.source),
            ("agent", &self.agent),
            ("time", &self.time),
        ] {
            if value.is_empty() {
                return Err(EnvelopeError::Empty(attr));
            }
        }
        for (attr, value) in [
            ("subject", &self.subject),
            ("session", &self.session),
            ("run", &self.run),
            ("step", &self.step),
            ("cause", &self.cause),
        ] {
            if value.as_deref() == Some("") {
                return Err(EnvelopeError::Empty(attr));
            }
        }
        let ty = || self.ty.clone();
        match scope_of(&self.ty) {
            Scope::Agent => {
                for (attr, present) in [
                    ("session", self.session.is_some()),
                    ("run", self.run.is_some()),
                    ("step", self.step.is_some()),
                    ("seq", self.seq.is_some()),
                ] {
                    if present {
                        return Err(EnvelopeError::Forbidden { ty: ty(), attr });
                    }
                }
            }
            Scope::ForeignEmitter => {
                if self.session.is_none() {
                    return Err(EnvelopeError::Missing {
                        ty: ty(),
                        attr: "session",
                    });
                }
                if self.seq.is_some() {
                    return Err(EnvelopeError::Forbidden { ty: ty(), attr: "seq" });
                }
            }
            Scope::Session => {
                if self.session.is_none() {
                    return Err(EnvelopeError::Missing {
                        ty: ty(),
                        attr: "session",
                    });
                }
                if self.seq.is_none() {
                    return Err(EnvelopeError::Missing { ty: ty(), attr: "seq" });
                }
            }
        }
        if let Some(tp) = &self.traceparent {
            if !TRACEPARENT.is_match(tp) {
                return Err(EnvelopeError::Traceparent(tp.clone()));
            }
        }
        for name in self.extensions.keys() {
            if CORE_ATTRIBUTES.contains(&name.as_str()) {
                return Err(EnvelopeError::ExtensionCollision(name.clone()));
            }
            if !EXT_NAME.is_match(name) {
                return Err(EnvelopeError::ExtensionName(name.clone()));
            }
        }
        Ok(())
    }

    /// The Event as one JSON line (no trailing newline), after [`Envelope::check`].
    pub fn to_line(&self) -> Result<String, EnvelopeError> {
        self.check()?;
        Ok(serde_json::to_string(self).expect("an Envelope always serializes"))
    }

    /// The Event as a JSON value (unchecked).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an Envelope always serializes")
    }

    /// The effective capture level (default `metadata`, AEP-0001 §8.2).
    pub fn capture_or_default(&self) -> Capture {
        self.capture.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(ty: &str) -> Envelope {
        Envelope::new(
            "01J",
            ty,
            "2026-07-03T10:00:00Z",
            "aep://h/agent/cline/session/s",
            "cline",
        )
        .unwrap()
    }

    #[test]
    fn absent_optionals_are_omitted_and_order_is_stable() {
        let mut e = event("run.started");
        e.session = Some("s".into());
        e.seq = Some(0);
        e.set_extension("clinever", ExtValue::Str("3".into())).unwrap();
        e.data = Some(json!({"trigger": "user"}).as_object().unwrap().clone());
        let line = e.to_line().unwrap();
        assert_eq!(
            line,
            r#"{"aep":"0.1","id":"01J","type":"run.started","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/cline/session/s","agent":"cline","session":"s","seq":0,"clinever":"3","data":{"trigger":"user"}}"#
        );
        assert!(!line.contains("null"));
        let back: Envelope = serde_json::from_str(&line).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn extensions_are_refused_at_the_boundary() {
        let mut e = event("run.started");
        assert!(matches!(
            e.set_extension("acme_ext", ExtValue::Int(1)),
            Err(EnvelopeError::ExtensionName(_))
        ));
        assert!(matches!(
            e.set_extension("abcdefghijklmnopqrstu", ExtValue::Int(1)),
            Err(EnvelopeError::ExtensionName(_))
        ));
        assert!(matches!(
            e.set_extension("session", ExtValue::Int(1)),
            Err(EnvelopeError::ExtensionCollision(_))
        ));
        assert!(e.set_extension("acmeregion", ExtValue::Bool(true)).is_ok());
    }

    #[test]
    fn scope_rules_are_enforced() {
        let mut e = event("run.started");
        assert!(matches!(e.check(), Err(EnvelopeError::Missing { attr: "session", .. })));
        e.session = Some("s".into());
        assert!(matches!(e.check(), Err(EnvelopeError::Missing { attr: "seq", .. })));
        let mut cmd = event("control.cancel");
        cmd.session = Some("s".into());
        assert!(cmd.check().is_ok());
        cmd.seq = Some(1);
        assert!(matches!(cmd.check(), Err(EnvelopeError::Forbidden { attr: "seq", .. })));
        let mut hb = event("agent.heartbeat");
        assert!(hb.check().is_ok());
        hb.run = Some("r".into());
        assert!(matches!(hb.check(), Err(EnvelopeError::Forbidden { attr: "run", .. })));
        assert!(Envelope::new("1", "tool", "t", "s", "a").is_err());
    }
}
