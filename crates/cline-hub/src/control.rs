//! AEP commands → hub commands (design record, "The hub control tap"; AEP-0004 §5; AEP-0008).
//! Pure: what a command asks for, or why it is refused; the session facts (which request,
//! which run is active) are checked by the caller against the session lane.
//!
//! - `control.attention.respond` (subject = the `attention.requested` id): `answer.option`
//!   `approve`/`deny`, or text per AEP-0008 (an option's id or label, trimmed and
//!   case-insensitive, is that option; any other text denies, the text as the reason: free text
//!   never grants a permission) → hub `approval.respond {approvalId, approved, reason?}`.
//! - `control.cancel {scope: "run"}` → hub `run.abort {sessionId, reason}`. Scope `session` is
//!   refused: the hub has no session stop (`session.delete` destroys records, `session.detach`
//!   abandons them; neither is a cancel).
//! - `x.cline.control.send_input {text ≤ 4000 chars, delivery: queue|steer}` → hub
//!   `session.send_input {prompt, delivery}`. `immediate` is refused: on an idle session it starts
//!   the agent, which is operating it, not controlling it.

use crate::ack::{Nack, NackReason};
use crate::attention::{Answer, APPROVE, DENY};
use aep_core::types::{CONTROL_ATTENTION_RESPOND, CONTROL_CANCEL, RUN_CANCELLED};
use aep_core::{Capture, Severity};
use cline_hooks::{Link, Mapped};
use serde_json::{json, Map, Value};

pub const RESPOND: &str = CONTROL_ATTENTION_RESPOND;
pub const CANCEL: &str = CONTROL_CANCEL;
pub const SEND_INPUT: &str = cline_hooks::types::CONTROL_SEND_INPUT;
/// What the daemon declares with the control gate on (`control.accepts`, AEP-0004 §4.2).
pub const ACCEPTS: [&str; 3] = [RESPOND, CANCEL, SEND_INPUT];
/// The longest `send_input` text, in characters.
pub const MAX_INPUT_CHARS: usize = 4000;

/// `session.send_input`'s `delivery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// After the current turn.
    Queue,
    /// Ahead of the queued prompts.
    Steer,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Queue => "queue",
            Delivery::Steer => "steer",
        }
    }
}

/// A command this adapter can actuate, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Respond {
        /// The `attention.requested` Event id the command answers.
        request: String,
        answer: Answer,
    },
    Cancel {
        /// The run the sender named; absent means the session's active run.
        run: Option<String>,
        reason: Option<String>,
    },
    SendInput {
        text: String,
        delivery: Delivery,
    },
}

fn invalid(detail: impl Into<String>) -> Nack {
    Nack::new(NackReason::Invalid, detail)
}

fn refused(detail: impl Into<String>) -> Nack {
    Nack::new(NackReason::Refused, detail)
}

/// Parses a command Event of one of the [`ACCEPTS`] types.
pub fn parse(command: &Value) -> Result<Command, Nack> {
    let ty = command.get("type").and_then(Value::as_str).unwrap_or_default();
    let data = command.get("data").unwrap_or(&Value::Null);
    match ty {
        RESPOND => {
            let request = command
                .get("subject")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    invalid("control.attention.respond needs `subject`: the attention.requested Event id")
                })?;
            let answer = data
                .get("answer")
                .ok_or_else(|| invalid("control.attention.respond needs `data.answer` with `option` or `text`"))?;
            Ok(Command::Respond {
                request: request.to_string(),
                answer: answer_from(answer)?,
            })
        }
        CANCEL => match data.get("scope").and_then(Value::as_str) {
            Some("run") => Ok(Command::Cancel {
                run: command.get("run").and_then(Value::as_str).map(str::to_string),
                reason: optional_text(data, "reason")?,
            }),
            Some("session") => Err(refused(
                "scope session: the Cline hub has no session stop; cancel the session's run (scope run)",
            )),
            _ => Err(invalid("control.cancel needs `data.scope`: run")),
        },
        SEND_INPUT => {
            let text = match data.get("text") {
                Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
                _ => {
                    return Err(invalid(
                        "x.cline.control.send_input needs `data.text`, a non-empty string",
                    ))
                }
            };
            let chars = text.chars().count();
            if chars > MAX_INPUT_CHARS {
                return Err(invalid(format!(
                    "`data.text` has {chars} characters; send at most {MAX_INPUT_CHARS}"
                )));
            }
            let delivery = match data.get("delivery") {
                None => Delivery::Queue,
                Some(v) => match v.as_str() {
                    Some("queue") => Delivery::Queue,
                    Some("steer") => Delivery::Steer,
                    Some("immediate") => {
                        return Err(refused(
                            "delivery immediate would start the agent on an idle session; use queue or steer",
                        ))
                    }
                    _ => return Err(invalid("`data.delivery` is queue or steer")),
                },
            };
            Ok(Command::SendInput { text, delivery })
        }
        other => Err(Nack::new(
            NackReason::Unsupported,
            format!("{other} is not one of {}", ACCEPTS.join(", ")),
        )),
    }
}

fn optional_text(data: &Value, key: &str) -> Result<Option<String>, Nack> {
    match data.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
        Some(_) => Err(invalid(format!("`data.{key}` must be a string"))),
    }
}

/// An `answer` against the request's options `approve` / `deny` (labels `Approve` / `Deny`),
/// following AEP-0008.
pub fn answer_from(answer: &Value) -> Result<Answer, Nack> {
    let Value::Object(answer) = answer else {
        return Err(invalid("`data.answer` must be an object with `option` or `text`"));
    };
    if answer.contains_key("values") {
        return Err(invalid(
            "this is a permission request: answer with `option` approve or deny (or `text`), not form `values`",
        ));
    }
    let text = match answer.get("text") {
        None => None,
        Some(Value::String(t)) => Some(t.clone()).filter(|t| !t.trim().is_empty()),
        Some(_) => return Err(invalid("`answer.text` must be a string")),
    };
    match answer.get("option") {
        Some(Value::String(o)) if o == APPROVE => Ok(Answer { option: APPROVE, text }),
        Some(Value::String(o)) if o == DENY => Ok(Answer { option: DENY, text }),
        Some(other) => Err(invalid(format!(
            "unknown option {other}: this request offers approve and deny"
        ))),
        None => match text {
            None => Err(invalid("`data.answer` needs `option` (approve or deny) or `text`")),
            // AEP-0008: text naming an option is that option (the word is the decision).
            Some(t) if t.trim().eq_ignore_ascii_case(APPROVE) => Ok(Answer {
                option: APPROVE,
                text: None,
            }),
            Some(t) if t.trim().eq_ignore_ascii_case(DENY) => Ok(Answer {
                option: DENY,
                text: None,
            }),
            // Unmatched text on a permission request never grants: it denies, with the text
            // as the reason.
            Some(t) => Ok(Answer {
                option: DENY,
                text: Some(t),
            }),
        },
    }
}

/// A command for the hub: its name, the session it addresses and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct HubCommand {
    pub name: &'static str,
    pub session_id: String,
    pub payload: Value,
}

/// `approval.respond {approvalId, approved, reason?}`; the answer's text rides as the reason.
pub fn approval_respond(session: &str, approval_id: &str, answer: &Answer) -> HubCommand {
    let mut payload = json!({"approvalId": approval_id, "approved": answer.approved()});
    if let Some(text) = &answer.text {
        payload["reason"] = json!(text);
    }
    HubCommand {
        name: "approval.respond",
        session_id: session.to_string(),
        payload,
    }
}

/// `run.abort {sessionId, reason}`. The real hub answers `{applied: true}` even for an idle or
/// unknown session, so the caller checks that a run is active first.
pub fn run_abort(session: &str, reason: Option<&str>, command_id: &str) -> HubCommand {
    let reason = reason
        .map(str::to_string)
        .unwrap_or_else(|| format!("cancelled through AEP control (command {command_id})"));
    HubCommand {
        name: "run.abort",
        session_id: session.to_string(),
        payload: json!({"sessionId": session, "reason": reason}),
    }
}

/// `session.send_input {prompt, delivery}`. With a `delivery` the real hub queues the prompt
/// and replies at once; without one it would reply only when the run ends.
pub fn send_input(session: &str, text: &str, delivery: Delivery) -> HubCommand {
    HubCommand {
        name: "session.send_input",
        session_id: session.to_string(),
        payload: json!({"prompt": text, "delivery": delivery.as_str()}),
    }
}

/// The outcome of a `send_input` the hub took: `x.cline.input.sent {delivery}` (the text is not
/// echoed: instruction text on the stream would need the redacted gate, and the hook
/// `prompt_submit` observes its consumption).
pub fn input_sent(delivery: Delivery, level: Capture) -> Mapped {
    let mut data = Map::new();
    data.insert("delivery".into(), json!(delivery.as_str()));
    Mapped {
        ty: cline_hooks::types::INPUT_SENT.into(),
        subject: None,
        step: None,
        severity: None,
        capture: level,
        data: (level > Capture::None).then_some(data),
        link: Link::None,
    }
}

/// The terminal of a run cancelled through control: `run.cancelled {by: "control"}`.
pub fn run_cancelled_by_control(level: Capture) -> Mapped {
    let mut data = Map::new();
    data.insert("by".into(), json!("control"));
    Mapped {
        ty: RUN_CANCELLED.into(),
        subject: None,
        step: None,
        severity: Some(Severity::Notice),
        capture: level,
        data: (level > Capture::None).then_some(data),
        link: Link::CloseRun,
    }
}
