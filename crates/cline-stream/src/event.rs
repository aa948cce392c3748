//! The normalized event schema: what `aep-cline stream` writes, one JSON object per line.
//!
//! Every event carries `type`, `line` (the 1-based line of the `cline --json` record it came
//! from) and `ts` (that record's time, RFC 3339, or `null`), in that order, then the fields of
//! its type. Field names are stable; a field that is not known is `null`, never left out.
//!
//! | `type` | fields |
//! |---|---|
//! | `agent_message` | `text` |
//! | `reasoning` | `text` |
//! | `command`, `read`, `write`, `search`, `list`, `skill` | `tool`, `call_id`, `target`, `success`, `error`, `duration_ms` |
//! | `error` | `name`, `message`, `recoverable` |
//! | `aborted` | `reason`, `message` |
//! | `unknown` | `record`, `reason`, `tool`, `call_id` |

use crate::tools::ToolKind;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// One normalized event (see the module docs for the schema).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The 1-based line of the source record.
    pub line: u64,
    /// The source record's time (RFC 3339), if it had one.
    pub ts: Option<String>,
    pub body: Body,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Text the agent showed the user (`agent_message`).
    AgentMessage { text: String },
    /// The model's reasoning, when the provider streams it apart from the text (`reasoning`).
    Reasoning { text: String },
    /// One command, file, query or skill of a tool call (`command`, `read`, ...).
    Tool(ToolEvent),
    /// An error the agent reported (`error`).
    Error {
        name: Option<String>,
        message: String,
        recoverable: Option<bool>,
    },
    /// The run was aborted (`aborted`).
    Aborted {
        reason: Option<String>,
        message: Option<String>,
    },
    /// A record, block or tool the normalizer has no mapping for (`unknown`): reported rather
    /// than dropped, so a new Cline version shows up instead of vanishing.
    Unknown {
        /// What was seen: `agent_event`, `agent_event.<type>`, `content_end.<contentType>`,
        /// `tool.<toolName>`, `say.<say>`, `ask.<ask>`, or the record's own `type`.
        record: String,
        /// Why it has no mapping, for a human.
        reason: String,
        tool: Option<String>,
        call_id: Option<String>,
    },
}

/// One target of a tool call. A call that ran two commands is two `command` events with the
/// same `call_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEvent {
    pub kind: ToolKind,
    /// Cline's `toolName`.
    pub tool: String,
    /// Cline's `toolCallId`.
    pub call_id: Option<String>,
    /// The command line, path, query or skill name; `None` when the input names none.
    pub target: Option<String>,
    /// `None` when the call never finished (the stream ended or the run ended first).
    pub success: Option<bool>,
    pub error: Option<String>,
    /// The whole call's duration, on each of its events.
    pub duration_ms: Option<u64>,
}

impl Body {
    /// The event's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Body::AgentMessage { .. } => "agent_message",
            Body::Reasoning { .. } => "reasoning",
            Body::Tool(t) => t.kind.as_str(),
            Body::Error { .. } => "error",
            Body::Aborted { .. } => "aborted",
            Body::Unknown { .. } => "unknown",
        }
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", self.body.type_name())?;
        m.serialize_entry("line", &self.line)?;
        m.serialize_entry("ts", &self.ts)?;
        match &self.body {
            Body::AgentMessage { text } | Body::Reasoning { text } => m.serialize_entry("text", text)?,
            Body::Tool(t) => {
                m.serialize_entry("tool", &t.tool)?;
                m.serialize_entry("call_id", &t.call_id)?;
                m.serialize_entry("target", &t.target)?;
                m.serialize_entry("success", &t.success)?;
                m.serialize_entry("error", &t.error)?;
                m.serialize_entry("duration_ms", &t.duration_ms)?;
            }
            Body::Error {
                name,
                message,
                recoverable,
            } => {
                m.serialize_entry("name", name)?;
                m.serialize_entry("message", message)?;
                m.serialize_entry("recoverable", recoverable)?;
            }
            Body::Aborted { reason, message } => {
                m.serialize_entry("reason", reason)?;
                m.serialize_entry("message", message)?;
            }
            Body::Unknown {
                record,
                reason,
                tool,
                call_id,
            } => {
                m.serialize_entry("record", record)?;
                m.serialize_entry("reason", reason)?;
                m.serialize_entry("tool", tool)?;
                m.serialize_entry("call_id", call_id)?;
            }
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(body: Body) -> String {
        serde_json::to_string(&Event {
            line: 3,
            ts: None,
            body,
        })
        .unwrap()
    }

    #[test]
    fn field_order_and_nulls_are_stable() {
        assert_eq!(
            line(Body::AgentMessage { text: "hi".into() }),
            r#"{"type":"agent_message","line":3,"ts":null,"text":"hi"}"#
        );
        assert_eq!(
            line(Body::Tool(ToolEvent {
                kind: ToolKind::Command,
                tool: "run_commands".into(),
                call_id: Some("c1".into()),
                target: Some("echo hi".into()),
                success: Some(true),
                error: None,
                duration_ms: Some(57),
            })),
            r#"{"type":"command","line":3,"ts":null,"tool":"run_commands","call_id":"c1","target":"echo hi","success":true,"error":null,"duration_ms":57}"#
        );
        assert_eq!(
            line(Body::Error {
                name: None,
                message: "m".into(),
                recoverable: Some(true)
            }),
            r#"{"type":"error","line":3,"ts":null,"name":null,"message":"m","recoverable":true}"#
        );
        assert_eq!(
            line(Body::Aborted {
                reason: Some("external_abort".into()),
                message: None
            }),
            r#"{"type":"aborted","line":3,"ts":null,"reason":"external_abort","message":null}"#
        );
        assert_eq!(
            line(Body::Unknown {
                record: "agent_event".into(),
                reason: "r".into(),
                tool: None,
                call_id: None
            }),
            r#"{"type":"unknown","line":3,"ts":null,"record":"agent_event","reason":"r","tool":null,"call_id":null}"#
        );
    }
}
