//! The pure approval → `attention.*` mapping (design record, "The approval loop as
//! `attention.*`"; AEP-0002 §5.3 and §7).
//!
//! Hub facts in, [`Mapped`] events out: no I/O, no clock, no ids. Which request an answer
//! belongs to, and when, is the [`crate::Approvals`] table's job.
//!
//! Capture (AEP-0003 §9.1, ceiling of the `attention` category):
//! - `metadata`: structure only. The prompt is synthesized from the tool name in the form the
//!   hops use (`"cline requests permission: <tool>"`, AEP-0003 §9.2), option labels are their
//!   ids, and the tool correlation rides as vendor fields (`cline.tool_name`,
//!   `cline.tool_call_id`, `cline.approval_id`: names and opaque ids, metadata by AEP-0002 §5.1).
//! - `redacted`: the prompt adds the tool input (`inputJson`) through the redaction pipeline
//!   (AEP-0003 §9.4); labels are words; a deny reason is `answer.text`, redacted.
//! - `full`: the input verbatim, and as `context {tool, input}` (annotated `full`).
//! - `none`: envelope only.

use crate::frame::ApprovalRequested;
use aep_core::redact::Redactor;
use aep_core::types::{ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT};
use aep_core::{Capture, CapturePolicy, Severity};
use cline_hooks::{Link, Mapped};
use serde_json::{json, Map, Value};

/// The permissive option (AEP-0008: never chosen by unmatched text).
pub const APPROVE: &str = "approve";
/// The refusing option.
pub const DENY: &str = "deny";

/// What the mapping needs besides the hub facts.
pub struct AttentionContext<'a> {
    pub capture: &'a CapturePolicy,
    pub redactor: &'a Redactor,
    /// The control gate is on: requests can be answered through AEP (`respond_via` lists
    /// `control`, AEP-0008 §2), not only in Cline's own UI (`oob`).
    pub control: bool,
}

/// An answer, as applied: the option and any accompanying text (a deny reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub option: &'static str,
    pub text: Option<String>,
}

impl Answer {
    pub fn approved(&self) -> bool {
        self.option == APPROVE
    }
}

/// How an answer reached the agent (`attention.answered.via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Through an AEP command this adapter actuated.
    Control,
    /// Anywhere else: Cline's UI, another hub client.
    Oob,
}

/// `attention.resolved.resolution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Answered,
    Dismissed,
}

fn level(ctx: &AttentionContext, ty: &str) -> Capture {
    ctx.capture.ceiling(ty)
}

fn mapped(ty: &str, level: Capture, subject: Option<String>, data: Map<String, Value>) -> Mapped {
    Mapped {
        ty: ty.to_string(),
        subject,
        step: None,
        severity: None,
        capture: level,
        data: (level > Capture::None).then_some(data),
        link: Link::None,
    }
}

/// `approval.requested` → `attention.requested {kind: permission}`, severity notice, subject =
/// the tool name (the first event of the request names what it is about; later ones name the
/// request, AEP-0002 §7.1).
pub fn requested(approval: &ApprovalRequested, ctx: &AttentionContext) -> Mapped {
    let level = level(ctx, ATTENTION_REQUESTED);
    let tool = approval.tool_name.as_deref().filter(|t| !t.is_empty());
    let synthesized = format!("cline requests permission: {}", tool.unwrap_or("a tool"));
    let input = approval.input_json.as_deref().filter(|i| !i.is_empty());
    let parsed = input.map(|i| serde_json::from_str::<Value>(i).unwrap_or_else(|_| Value::String(i.to_string())));
    let prompt = match (level, &parsed) {
        (Capture::Redacted, Some(input)) => format!("{synthesized} {}", one_line(&ctx.redactor.redact_value(input))),
        (Capture::Full, Some(input)) => format!("{synthesized} {}", one_line(input)),
        _ => synthesized,
    };
    let labels = if level >= Capture::Redacted {
        ["Approve", "Deny"]
    } else {
        [APPROVE, DENY]
    };
    let via = if ctx.control {
        json!(["control", "oob"])
    } else {
        json!(["oob"])
    };
    let mut data = Map::new();
    data.insert("kind".into(), json!("permission"));
    data.insert("prompt".into(), json!(prompt));
    data.insert(
        "options".into(),
        json!([{"id": APPROVE, "label": labels[0]}, {"id": DENY, "label": labels[1]}]),
    );
    data.insert("respond_via".into(), via);
    if level == Capture::Full {
        let mut context = json!({ "tool": tool });
        if let Some(input) = parsed {
            context["input"] = input;
        }
        data.insert("context".into(), context);
    }
    data.insert("cline.approval_id".into(), json!(approval.approval_id));
    if let Some(tool) = tool {
        data.insert("cline.tool_name".into(), json!(tool));
    }
    if let Some(call) = approval.tool_call_id.as_deref().filter(|c| !c.is_empty()) {
        data.insert("cline.tool_call_id".into(), json!(call));
    }
    let mut m = mapped(ATTENTION_REQUESTED, level, tool.map(str::to_string), data);
    m.step = approval.iteration.map(|i| i.to_string());
    m.severity = Some(Severity::Notice);
    m
}

/// `attention.answered {answer, via}`, subject = the request Event's id.
pub fn answered(answer: &Answer, via: Via, request_event: &str, ctx: &AttentionContext) -> Mapped {
    let level = level(ctx, ATTENTION_ANSWERED);
    let mut body = json!({ "option": answer.option });
    if let Some(text) = answer.text.as_deref().filter(|t| !t.is_empty()) {
        match level {
            Capture::Redacted => body["text"] = json!(ctx.redactor.redact_text(text)),
            Capture::Full => body["text"] = json!(text),
            Capture::None | Capture::Metadata => {}
        }
    }
    let mut data = Map::new();
    data.insert("answer".into(), body);
    data.insert(
        "via".into(),
        json!(match via {
            Via::Control => "control",
            Via::Oob => "oob",
        }),
    );
    mapped(ATTENTION_ANSWERED, level, Some(request_event.to_string()), data)
}

/// The policy's part in a request or its answer (metadata: the operator's rule name, never
/// what was asked): `by: "policy"` (the responder label, AEP-0002 §5.3) and
/// `cline.policy_rule` on an answer; `cline.policy_rule` and `cline.policy_answer` on a
/// request the policy decided. Nothing at capture `none`.
pub fn by_policy(m: &mut Mapped, rule: &str, decided: Option<&str>) {
    let Some(data) = m.data.as_mut() else { return };
    match decided {
        Some(answer) => {
            data.insert("cline.policy_answer".into(), json!(answer));
        }
        None => {
            data.insert("by".into(), json!("policy"));
        }
    }
    data.insert("cline.policy_rule".into(), json!(rule));
}

/// A request a person has until `expires_at` (RFC 3339, AEP-0002 §5.3) to answer, after which
/// the policy answers `answer` (`cline.policy_timeout {after_s, answer, rule}`; metadata).
/// Nothing at capture `none`.
pub fn expires(m: &mut Mapped, expires_at: &str, after_s: u64, answer: &str, rule: &str) {
    let Some(data) = m.data.as_mut() else { return };
    data.insert("expires_at".into(), json!(expires_at));
    data.insert(
        "cline.policy_timeout".into(),
        json!({"after_s": after_s, "answer": answer, "rule": rule}),
    );
}

/// `attention.resolved {resolution, latency_ms?}`, subject = the request Event's id.
pub fn resolved(
    resolution: Resolution,
    latency_ms: Option<u64>,
    request_event: &str,
    ctx: &AttentionContext,
) -> Mapped {
    let level = level(ctx, ATTENTION_RESOLVED);
    let mut data = Map::new();
    data.insert(
        "resolution".into(),
        json!(match resolution {
            Resolution::Answered => "answered",
            Resolution::Dismissed => "dismissed",
        }),
    );
    if let Some(ms) = latency_ms {
        data.insert("latency_ms".into(), json!(ms));
    }
    mapped(ATTENTION_RESOLVED, level, Some(request_event.to_string()), data)
}

/// `attention.timeout {after_ms}`, subject = the request Event's id: nobody answered in time
/// (AEP-0002 §7); what then applies is the requester's.
pub fn timeout(after_ms: u64, request_event: &str, ctx: &AttentionContext) -> Mapped {
    let level = level(ctx, ATTENTION_TIMEOUT);
    let mut data = Map::new();
    data.insert("after_ms".into(), json!(after_ms));
    mapped(ATTENTION_TIMEOUT, level, Some(request_event.to_string()), data)
}

/// JSON on one line, as a prompt carries it.
fn one_line(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
