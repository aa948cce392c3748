//! The hub's WebSocket frames as Cline 3.0.65 (`@cline/core` 0.0.86) speaks them, verified on
//! the real hub (`shared/cline/hub/hub-frames.jsonl`).
//!
//! Every frame is one JSON text message `{kind, ...}`. `command`, `reply` and `event` carry an
//! `envelope` with `version: "v1"`; `stream.subscribe` is bare. The client picks its own
//! `clientId` and repeats it in `client.register`'s payload. Facts the tap relies on:
//! - `stream.subscribe` gets no reply. With `sinceSequence` the hub replays the events after it;
//!   on every subscribe it also re-sends each approval still pending (without `sequence` when
//!   it predates the replay), so a fresh or resumed subscription never misses one.
//! - Replies carry `ok` and either `payload` or `error {code, message}`.
//! - The hub does not check the envelope `version` (a `v2` register is answered, echoed as
//!   `v2`), so the version check is the client's: [`parse`] refuses a frame of another version.
//! - Non-JSON and unknown frames sent to the hub are silently ignored by it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The hub protocol version this client speaks (discovery `protocolVersion`, envelope `version`).
pub const PROTOCOL_VERSION: &str = "v1";
/// What the tap registers as (design record, "Gates").
pub const CLIENT_TYPE: &str = "aep-adapter-cline";
/// The WebSocket subprotocol that carries the hub's bearer token: `cline-hub-auth.<token>`.
pub const AUTH_SUBPROTOCOL_PREFIX: &str = "cline-hub-auth.";

/// A frame the hub sent, by `kind`.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Reply(Reply),
    Event(HubEvent),
    /// A `kind` this client does not handle (a newer hub); ignored, never an error.
    Other {
        kind: String,
    },
}

/// The hub's answer to one command.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    pub request_id: String,
    pub ok: bool,
    #[serde(default)]
    pub payload: Option<Value>,
    #[serde(default)]
    pub error: Option<HubError>,
}

/// A refusal by the hub, e.g. `{code: "approval_not_found", message: "Unknown approval: …"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HubError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

/// One broadcast event. Hub-wide events (`hub.client.registered`) carry no `sessionId`, and the
/// pending approvals re-sent at subscribe carry no `sequence`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubEvent {
    pub event: String,
    #[serde(default)]
    pub event_id: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    /// Milliseconds since the epoch, the hub's clock.
    #[serde(default)]
    pub timestamp: Option<u64>,
    #[serde(default)]
    pub sequence: Option<u64>,
    #[serde(default)]
    pub payload: Value,
}

/// `approval.requested`: the hub holds a tool call until a client answers it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequested {
    pub approval_id: String,
    pub session_id: String,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub iteration: Option<u64>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The tool input as a JSON string (content: never at capture `metadata`).
    #[serde(default)]
    pub input_json: Option<String>,
}

/// `approval.resolved`: `{approved: true}`, `{approved: false, reason}`, or, when a `run.abort`
/// cancelled the wait, `{approved: false, cancelled: true, reason}`. It carries no `sessionId`
/// of its own; the envelope's names the session.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolved {
    pub approval_id: String,
    pub approved: bool,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default)]
    pub reason: Option<String>,
}

/// Why a frame from the hub could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the hub sent a frame that is not JSON ({0}); it is ignored")]
    NotJson(String),
    #[error("the hub sent a frame without a string `kind`; it is ignored")]
    NoKind,
    #[error("the hub sent a `{kind}` frame whose envelope does not parse ({detail}); it is ignored")]
    BadEnvelope { kind: String, detail: String },
    #[error(
        "the hub speaks protocol version {found:?}, this client speaks {PROTOCOL_VERSION:?}: update aep-cline or \
         run a Cline hub of the supported version (CLI 3.0.65)"
    )]
    Version { found: String },
}

/// Parses one text frame from the hub.
pub fn parse(text: &str) -> Result<Incoming, FrameError> {
    let value: Value = serde_json::from_str(text).map_err(|e| FrameError::NotJson(e.to_string()))?;
    let kind = value.get("kind").and_then(Value::as_str).ok_or(FrameError::NoKind)?;
    let envelope = || {
        let envelope = value.get("envelope").cloned().unwrap_or(Value::Null);
        match envelope.get("version").and_then(Value::as_str) {
            Some(v) if v != PROTOCOL_VERSION => Err(FrameError::Version { found: v.to_string() }),
            _ => Ok(envelope),
        }
    };
    let bad = |e: serde_json::Error| FrameError::BadEnvelope {
        kind: kind.to_string(),
        detail: e.to_string(),
    };
    match kind {
        "reply" => Ok(Incoming::Reply(serde_json::from_value(envelope()?).map_err(bad)?)),
        "event" => Ok(Incoming::Event(serde_json::from_value(envelope()?).map_err(bad)?)),
        other => Ok(Incoming::Other {
            kind: other.to_string(),
        }),
    }
}

impl HubEvent {
    /// The typed payload of this event, or why it does not fit.
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, FrameError> {
        serde_json::from_value(self.payload.clone()).map_err(|e| FrameError::BadEnvelope {
            kind: self.event.clone(),
            detail: e.to_string(),
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CommandEnvelope<'a> {
    version: &'static str,
    command: &'a str,
    request_id: &'a str,
    client_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    payload: &'a Value,
}

/// A `command` frame.
pub fn command(command: &str, request_id: &str, client_id: &str, session_id: Option<&str>, payload: &Value) -> String {
    json!({
        "kind": "command",
        "envelope": CommandEnvelope {
            version: PROTOCOL_VERSION,
            command,
            request_id,
            client_id,
            session_id,
            payload,
        },
    })
    .to_string()
}

/// `client.register` as the tap: its own `clientId` in envelope and payload, and no advertised
/// capabilities, so the hub never routes a capability request (a tool to execute) to it.
pub fn register(request_id: &str, client_id: &str) -> String {
    let payload = json!({
        "clientId": client_id,
        "clientType": CLIENT_TYPE,
        "displayName": "aep-cline (AEP adapter)",
        "transport": "native",
        "capabilities": [],
    });
    command("client.register", request_id, client_id, None, &payload)
}

/// `stream.subscribe` to every session; `since` resumes after the last sequence seen.
pub fn subscribe(client_id: &str, since: Option<u64>) -> String {
    let mut frame = json!({"kind": "stream.subscribe", "clientId": client_id});
    if let Some(since) = since {
        frame["sinceSequence"] = json!(since);
    }
    frame.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_are_not_errors_and_other_versions_are() {
        assert_eq!(
            parse(r#"{"kind":"zigzag"}"#),
            Ok(Incoming::Other { kind: "zigzag".into() })
        );
        assert!(matches!(
            parse(r#"{"kind":"event","envelope":{"version":"v2","event":"x"}}"#),
            Err(FrameError::Version { found }) if found == "v2"
        ));
        assert!(matches!(parse("not json"), Err(FrameError::NotJson(_))));
        assert_eq!(parse(r#"{"envelope":{}}"#), Err(FrameError::NoKind));
        assert!(matches!(
            parse(r#"{"kind":"reply","envelope":{"version":"v1","ok":"yes"}}"#),
            Err(FrameError::BadEnvelope { .. })
        ));
    }

    #[test]
    fn register_names_the_client_twice_and_asks_for_nothing() {
        let frame: Value = serde_json::from_str(&register("r1", "aep-1")).unwrap();
        assert_eq!(frame["envelope"]["clientId"], "aep-1");
        assert_eq!(frame["envelope"]["payload"]["clientId"], "aep-1");
        assert_eq!(frame["envelope"]["payload"]["clientType"], CLIENT_TYPE);
        assert_eq!(frame["envelope"]["payload"]["capabilities"], json!([]));
        assert_eq!(frame["envelope"]["version"], "v1");
        assert!(frame["envelope"].get("sessionId").is_none());
        let sub: Value = serde_json::from_str(&subscribe("aep-1", Some(41))).unwrap();
        assert_eq!(
            sub,
            json!({"kind": "stream.subscribe", "clientId": "aep-1", "sinceSequence": 41})
        );
        let fresh: Value = serde_json::from_str(&subscribe("aep-1", None)).unwrap();
        assert!(fresh.get("sinceSequence").is_none());
    }
}
