//! The pure hook → AEP mapping (AEP-0002 Annex A, pinned by `mappings/cline.json`).
//!
//! Payload and capture policy in, events out: no I/O, no clock, no ids. What needs memory
//! (run ids, tool pairing, delegation pairs, first sight of a session) is the
//! [`crate::session::SessionTracker`]'s job; each [`Mapped`] says through its [`Link`] what
//! the tracker must do with it.
//!
//! Content follows the capture ceiling of the event's category (AEP-0003 §9.1): at
//! `metadata` only names, ids, counts, durations and digests (digests are computed over the
//! ORIGINAL content, AEP-0003 §9.3); at `redacted` free text passes the redaction pipeline
//! (AEP-0003 §9.4); at `full` it is verbatim; at `none` there is no `data` at all.

use crate::outcome::outcome;
use crate::payload::HookPayload;
use aep_core::digest::digest;
use aep_core::redact::Redactor;
use aep_core::types::{
    DELEGATION_SUBAGENT_STARTED, DELEGATION_SUBAGENT_STOPPED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED,
    SESSION_COMPACTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use aep_core::{Capture, CapturePolicy, EventType, Severity};
use serde_json::{json, Map, Value};

/// What the mapping needs besides the payload.
pub struct MapContext<'a> {
    pub capture: &'a CapturePolicy,
    pub redactor: &'a Redactor,
}

/// What the tracker must do with a mapped event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Nothing: the event stands alone.
    None,
    /// `run.started`: open a run for the payload's agent.
    OpenRun,
    /// A run terminal: close the agent's open run (at most one terminal per run).
    CloseRun,
    /// `tool.requested`: remember the call id so its result can point back.
    ToolRequested { call_id: String },
    /// `tool.completed` / `tool.failed`: `cause` = the matching request.
    ToolResolved { call_id: String },
    /// `tool.requested` without a call id (Cline 2.x gives none): its result is paired by tool
    /// name and order.
    ToolRequestedByName { tool: String },
    /// `tool.completed` / `tool.failed` without a call id: `cause` = the oldest pending request
    /// of that tool.
    ToolResolvedByName { tool: String },
    /// `delegation.subagent.started` for this child agent.
    DelegationStarted { child: String },
    /// `delegation.subagent.stopped` for this child agent.
    DelegationStopped { child: String },
    /// `session.ended`: open runs are closed first, and at most one is emitted.
    SessionEnded,
}

/// One event, before identity: the pin's `{type, data, subject?, step?}` plus the envelope
/// facts the mapping decides (severity, the capture level honored).
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    pub ty: String,
    pub subject: Option<String>,
    pub step: Option<String>,
    pub severity: Option<Severity>,
    pub capture: Capture,
    /// `None` only at capture `none` (envelope only, AEP-0001 §8.2).
    pub data: Option<Map<String, Value>>,
    pub link: Link,
}

impl Mapped {
    /// The pin's view: `{type, data, subject?, step?}`.
    pub fn pin_view(&self) -> Value {
        let mut v = json!({"type": self.ty, "data": self.data.clone().map(Value::Object).unwrap_or(Value::Null)});
        if let Some(s) = &self.subject {
            v["subject"] = json!(s);
        }
        if let Some(s) = &self.step {
            v["step"] = json!(s);
        }
        v
    }
}

/// Builds one event's data at the ceiling of its category.
struct Builder<'a> {
    ty: String,
    level: Capture,
    ctx: &'a MapContext<'a>,
    data: Map<String, Value>,
}

impl<'a> Builder<'a> {
    fn new(ty: &str, ctx: &'a MapContext<'a>) -> Self {
        Builder {
            ty: ty.to_string(),
            level: ctx.capture.ceiling(ty),
            ctx,
            data: Map::new(),
        }
    }

    fn meta(mut self, key: &str, value: Value) -> Self {
        self.data.insert(key.to_string(), value);
        self
    }

    /// Free text gated at `redacted`: redacted at `redacted`, verbatim at `full`.
    fn text(mut self, key: &str, text: Option<&str>) -> Self {
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            match self.level {
                Capture::Redacted => {
                    self.data
                        .insert(key.to_string(), Value::String(self.ctx.redactor.redact_text(text)));
                }
                Capture::Full => {
                    self.data.insert(key.to_string(), Value::String(text.to_string()));
                }
                Capture::None | Capture::Metadata => {}
            }
        }
        self
    }

    /// Free text nested in an object of `data` (`error.message`), which is made when absent.
    fn nested_text(mut self, object: &str, key: &str, text: Option<&str>) -> Self {
        let value = Builder {
            ty: String::new(),
            level: self.level,
            ctx: self.ctx,
            data: Map::new(),
        }
        .text(key, text)
        .data
        .remove(key);
        if let Some(value) = value {
            if let Value::Object(obj) = self.data.entry(object).or_insert_with(|| json!({})) {
                obj.insert(key.to_string(), value);
            }
        }
        self
    }

    /// Content with a redacted twin: `{name}_redacted` at `redacted`, `{name}` at `full`.
    fn content(mut self, name: &str, value: &Value, wrap: fn(Value) -> Value) -> Self {
        if value.is_null() {
            return self;
        }
        match self.level {
            Capture::Redacted => {
                let redacted = wrap(self.ctx.redactor.redact_value(value));
                self.data.insert(format!("{name}_redacted"), redacted);
            }
            Capture::Full => {
                self.data.insert(name.to_string(), wrap(value.clone()));
            }
            Capture::None | Capture::Metadata => {}
        }
        self
    }

    fn done(self, link: Link) -> Mapped {
        Mapped {
            ty: self.ty,
            subject: None,
            step: None,
            severity: None,
            capture: self.level,
            data: (self.level != Capture::None).then_some(self.data),
            link,
        }
    }
}

/// `tool.requested.args` must be an object: other inputs are wrapped (AEP-0002 §3).
fn object_only(v: Value) -> Value {
    match v {
        Value::Object(_) => v,
        other => json!({ "value": other }),
    }
}

/// `tool.completed.result` is an object or a string: other outputs are wrapped.
fn object_or_string(v: Value) -> Value {
    match v {
        Value::Object(_) | Value::String(_) => v,
        other => json!({ "value": other }),
    }
}

fn with(mut m: Mapped, subject: Option<&str>, step: Option<u64>) -> Mapped {
    m.subject = subject.filter(|s| !s.is_empty()).map(str::to_string);
    m.step = step.map(|s| s.to_string());
    m
}

/// The Annex A mapping of one hook payload: one helper per hook family, each pure.
pub fn map_hook(p: &HookPayload, ctx: &MapContext) -> Vec<Mapped> {
    match p.hook_name.as_str() {
        "agent_start" | "agent_resume" => run_start(p, ctx),
        "agent_end" | "agent_abort" | "agent_error" => run_end(p, ctx),
        "tool_call" => vec![tool_requested(p, ctx)],
        "tool_result" => vec![tool_resolved(p, ctx)],
        "prompt_submit" => {
            let mut m = Builder::new(crate::types::PROMPT_SUBMITTED, ctx).done(Link::None);
            m.severity = Some(Severity::Debug);
            vec![m]
        }
        "Notification" if p.legacy.is_some() => vec![notification(p, ctx)],
        "pre_compact" => vec![session_compacted(p, ctx)],
        "session_shutdown" => {
            // Vendor free-text reasons do not enter the `session.ended` enum.
            vec![Builder::new(SESSION_ENDED, ctx)
                .meta("reason", json!("normal"))
                .done(Link::SessionEnded)]
        }
        other => vec![Builder::new(&fallback_type(other), ctx).done(Link::None)],
    }
}

/// The child agent a payload speaks for, when it names a parent: its runs are a delegation's
/// (Annex A.9).
fn child_agent(p: &HookPayload) -> Option<&str> {
    p.parent_agent_id
        .as_deref()
        .filter(|s| !s.is_empty())
        .and(p.agent_id.as_deref())
}

/// `agent_start` / `agent_resume`: `run.started`, after the child's
/// `delegation.subagent.started` when a subagent starts.
fn run_start(p: &HookPayload, ctx: &MapContext) -> Vec<Mapped> {
    let trigger = if p.hook_name == "agent_start" { "user" } else { "resume" };
    let run = Builder::new(RUN_STARTED, ctx)
        .meta("trigger", json!(trigger))
        .done(Link::OpenRun);
    match child_agent(p) {
        // Only a start opens the delegation pair; a resumed child continues it.
        Some(c) if p.hook_name == "agent_start" => vec![
            delegation(
                DELEGATION_SUBAGENT_STARTED,
                c,
                Link::DelegationStarted { child: c.to_string() },
                ctx,
            ),
            run,
        ],
        _ => vec![run],
    }
}

/// `agent_end` / `agent_abort` / `agent_error`: the run's terminal, then the child's
/// `delegation.subagent.stopped` when a subagent ends.
fn run_end(p: &HookPayload, ctx: &MapContext) -> Vec<Mapped> {
    let terminal = match p.hook_name.as_str() {
        "agent_end" => run_finished(p, ctx),
        "agent_abort" => run_cancelled_by_user(p, ctx),
        _ => run_failed(p, ctx),
    };
    match child_agent(p) {
        Some(c) => vec![terminal, delegation_stopped(c, ctx)],
        None => vec![terminal],
    }
}

/// `agent_end`: `run.finished`, its summary the turn's output text (free text, `redacted`+).
fn run_finished(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let summary = p
        .turn
        .as_ref()
        .and_then(|t| t.get("outputText"))
        .and_then(Value::as_str);
    with(
        Builder::new(RUN_FINISHED, ctx)
            .text("summary", summary)
            .done(Link::CloseRun),
        None,
        p.iteration,
    )
}

/// `agent_abort`: `run.cancelled {by: "user"}`, the vendor's reason as free text.
fn run_cancelled_by_user(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let b = Builder::new(RUN_CANCELLED, ctx)
        .meta("by", json!("user"))
        .text("reason", p.reason.as_deref());
    let mut m = with(b.done(Link::CloseRun), None, p.iteration);
    m.severity = Some(Severity::Notice);
    m
}

/// `agent_error`: `run.failed`. Cline sends the thrown error's `name` (its class: `Error` for a
/// provider's refusal on 3.0.65, `ContextWindowOverflowError`, ...), `message` and `stack`. The
/// name is the vendor's type and, as pinned, the reason; with no name the reason is AEP's own
/// token `error` (AEP-0002 §5) and no type is invented. The message is free text (`redacted`+).
/// The stack has no home in `error_info` and is not emitted.
fn run_failed(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let error = p.error.clone().unwrap_or_default();
    let name = error.name.as_deref().filter(|n| !n.is_empty());
    let mut b = Builder::new(RUN_FAILED, ctx).meta("reason", json!(name.unwrap_or("error")));
    if let Some(name) = name {
        b = b.meta("error", json!({"type": name}));
    }
    let b = b.nested_text("error", "message", error.message.as_deref());
    let mut m = with(b.done(Link::CloseRun), None, p.iteration);
    m.severity = Some(Severity::Error);
    m
}

/// `tool_call`: `tool.requested`, its args digested at `metadata` (over the original,
/// AEP-0003 §9.3) and carried at `redacted`+; paired by call id, else by tool name.
fn tool_requested(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let call = p.tool_call.clone().unwrap_or_default();
    let name = call.name.clone().unwrap_or_default();
    let mut b = Builder::new(TOOL_REQUESTED, ctx).meta("tool", tool_ref(&name, call.id.as_deref()));
    if !call.input.is_null() {
        b = b.meta("args_digest", json!(digest(&call.input)));
    }
    let b = b.content("args", &call.input, object_only);
    let link = match call.id.clone().filter(|id| !id.is_empty()) {
        Some(call_id) => Link::ToolRequested { call_id },
        None => Link::ToolRequestedByName { tool: name.clone() },
    };
    with(b.done(link), Some(&name), p.iteration)
}

/// `tool_result`: `tool.failed` when the outcome is a failure, else `tool.completed` with its
/// result digested and carried like the args; either resolves the call's request.
fn tool_resolved(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let rec = p.tool_result.clone().unwrap_or_default();
    let name = rec.name.clone().unwrap_or_default();
    let link = match rec.id.clone().filter(|id| !id.is_empty()) {
        Some(call_id) => Link::ToolResolved { call_id },
        None => Link::ToolResolvedByName { tool: name.clone() },
    };
    let duration = rec
        .duration_ms
        .filter(|d| d.is_finite() && *d >= 0.0)
        .map(|d| d.round() as u64);
    // One rule with the `cline --json` lane: a failure the output reports is a failure.
    let failure = outcome(Some(&rec.output), rec.error.as_deref()).failure;
    let mut b = match &failure {
        Some(f) => Builder::new(TOOL_FAILED, ctx)
            .meta("tool", tool_ref(&name, rec.id.as_deref()))
            .meta("error", json!({"type": f.kind.as_str()}))
            .nested_text("error", "message", f.message.as_deref()),
        None => {
            let mut b = Builder::new(TOOL_COMPLETED, ctx).meta("tool", tool_ref(&name, rec.id.as_deref()));
            if !rec.output.is_null() {
                b = b.meta("result_digest", json!(digest(&rec.output)));
            }
            b.content("result", &rec.output, object_or_string)
        }
    };
    if let Some(d) = duration {
        b = b.meta("duration_ms", json!(d));
    }
    let mut m = with(b.done(link), Some(&name), p.iteration);
    m.severity = failure.map(|f| f.kind.severity());
    m
}

/// `pre_compact`: `session.compacted`. The vendor exposes only the pre moment (Annex A
/// deviation). The context dump paths have no annotated home in `session.compacted`, so they
/// are not emitted at all: an unannotated field would ride every hop as metadata (AEP-0002 §5.1).
fn session_compacted(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let pc = p.pre_compact.clone().unwrap_or_default();
    let mut b = Builder::new(SESSION_COMPACTED, ctx);
    if let Some(s) = pc.compaction_strategy {
        b = b.meta("strategy", json!(s));
    }
    if let Some(t) = pc.tokens_in {
        b = b.meta("gen_ai.usage.input_tokens", json!(t));
    }
    if let Some(t) = pc.tokens_out {
        b = b.meta("gen_ai.usage.output_tokens", json!(t));
    }
    b.done(Link::None)
}

/// The vendor event of Cline 2.x's `Notification` hook (it has no AEP twin): what Cline told
/// the user. Its `event`, `source` and `source_type` are Cline's own tokens (`user_attention`,
/// `api_req_failed`, `ask`), kept at `metadata` when they look like tokens; its `message` (a
/// completion result, an API error) is free text, `redacted`+. `info` when Cline waits for the
/// user, `debug` otherwise (a `task_complete` repeats the run's end).
pub const NOTIFICATION: &str = crate::types::NOTIFICATION_SENT;

fn notification(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let n = p
        .legacy
        .as_ref()
        .and_then(|l| l.notification.clone())
        .unwrap_or_default();
    let token = |t: &Option<String>| {
        t.clone()
            .filter(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    };
    let waits = n.requires_user_action.unwrap_or(false) || n.waiting_for_user_input.unwrap_or(false);
    let mut b = Builder::new(NOTIFICATION, ctx);
    for (key, value) in [
        ("event", token(&n.event)),
        ("source", token(&n.source)),
        ("source_type", token(&n.source_type)),
    ] {
        if let Some(v) = value {
            b = b.meta(key, json!(v));
        }
    }
    let mut m = b
        .meta("requires_user_action", json!(waits))
        .text("message", n.message.as_deref())
        .done(Link::None);
    m.severity = Some(if waits { Severity::Info } else { Severity::Debug });
    m
}

/// A `delegation.subagent.*` event: subject = the child agent, no step (Annex A.9).
fn delegation(ty: &str, child: &str, link: Link, ctx: &MapContext) -> Mapped {
    with(Builder::new(ty, ctx).done(link), Some(child), None)
}

/// `delegation.subagent.stopped` for `child`: after its run's terminal, or when a new start of
/// the same child supersedes a delegation that never stopped.
pub fn delegation_stopped(child: &str, ctx: &MapContext) -> Mapped {
    delegation(
        DELEGATION_SUBAGENT_STOPPED,
        child,
        Link::DelegationStopped {
            child: child.to_string(),
        },
        ctx,
    )
}

/// `tool.denied {tool, by: policy, rule?}` for a `tool_call` payload a policy blocked before
/// it ran (AEP-0002 §4.1: no human loop). Linked like a `tool_result`: it resolves the call.
pub fn tool_denied(p: &HookPayload, rule: Option<&str>, ctx: &MapContext) -> Option<Mapped> {
    if p.hook_name != "tool_call" {
        return None;
    }
    let call = p.tool_call.clone().unwrap_or_default();
    let name = call.name.clone().unwrap_or_default();
    Some(tool_denied_call(&name, call.id.as_deref(), rule, p.iteration, ctx))
}

/// `tool.denied {tool, by: "policy", rule}` for the call `call_id` of tool `name`: a tool call a
/// guard blocked, with or without its hook at hand (a person's deny of a call the hook held).
pub fn tool_denied_call(
    name: &str,
    call_id: Option<&str>,
    rule: Option<&str>,
    iteration: Option<u64>,
    ctx: &MapContext,
) -> Mapped {
    let mut b = Builder::new(TOOL_DENIED, ctx)
        .meta("tool", tool_ref(name, call_id))
        .meta("by", json!("policy"));
    if let Some(rule) = rule {
        b = b.meta("rule", json!(rule));
    }
    let link = match call_id.filter(|id| !id.is_empty()) {
        Some(call_id) => Link::ToolResolved {
            call_id: call_id.to_string(),
        },
        None => Link::ToolResolvedByName { tool: name.to_string() },
    };
    let mut m = with(b.done(link), Some(name), iteration);
    m.severity = Some(Severity::Notice);
    m
}

fn tool_ref(name: &str, call_id: Option<&str>) -> Value {
    let mut tool = json!({ "name": name });
    if let Some(id) = call_id.filter(|s| !s.is_empty()) {
        tool["call_id"] = json!(id);
    }
    tool
}

/// An unknown hook name becomes `x.cline.<name with _ as .>` (the pin). The name is lowered and
/// every character outside `[a-z0-9_]` becomes `_`; empty segments are dropped. A name of one
/// segment would give `x.cline.<name>`, which the §6 grammar rejects (a vendor type needs a
/// category and a name), so it becomes `x.cline.hook.<name>`.
pub fn fallback_type(hook_name: &str) -> String {
    let cleaned: String = hook_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let segments: Vec<&str> = cleaned.split('_').filter(|s| !s.is_empty()).collect();
    let ty = match segments.len() {
        0 => crate::types::HOOK_UNKNOWN.to_string(),
        1 => format!("x.cline.hook.{}", segments[0]),
        _ => format!("x.cline.{}", segments.join(".")),
    };
    if EventType::parse(&ty).is_ok() {
        ty
    } else {
        crate::types::HOOK_UNKNOWN.to_string()
    }
}

/// `session.started`'s digest of the workspace root: metadata, like the other digests.
pub const WORKSPACE_DIGEST: &str = "cline.workspace_digest";

/// `session.started`, the first time a session is seen: the home the spec allows for what
/// the design record names but the pins do not. `client {name: "cline", version}` (the version
/// is empty on CLI 3.0.65 and then omitted), the model when the payload names it (Cline 2.x:
/// `gen_ai.request.model`), the opaque `userId` and the git commit hash as
/// metadata-level vendor fields, and the branch name (user content) as the session `label` and
/// the workspace root as `cwd`, both `redacted`-gated by the schema.
pub fn session_started(p: &HookPayload, ctx: &MapContext) -> Mapped {
    let mut client = json!({"name": "cline"});
    if let Some(v) = p.cline_version.as_deref().filter(|v| !v.is_empty()) {
        client["version"] = json!(v);
    }
    let info = p.workspace_info.clone().unwrap_or_default();
    let mut b = Builder::new(SESSION_STARTED, ctx).meta("client", client);
    if let Some(user) = p.user_id.as_deref().filter(|u| !u.is_empty()) {
        b = b.meta("cline.user_id", json!(user));
    }
    if let Some(commit) = info.latest_git_commit_hash.as_deref().filter(|c| !c.is_empty()) {
        b = b.meta("cline.git_commit", json!(commit));
    }
    if let Some(model) = p.model.as_deref() {
        b = b.meta("gen_ai.request.model", json!(model));
    }
    let cwd = info
        .root_path
        .as_deref()
        .or(p.workspace_roots.first().map(String::as_str));
    // A digest of the workspace root (AEP-0003 §9.3) tells sessions of one workspace apart
    // from others at `metadata` without saying which folder it is.
    if let Some(root) = cwd.filter(|c| !c.is_empty()) {
        b = b.meta(WORKSPACE_DIGEST, json!(digest(&json!(root))));
    }
    b.text("label", info.latest_git_branch_name.as_deref())
        .text("cwd", cwd)
        .done(Link::None)
}

/// `run.cancelled {by: "shutdown"}` for a run still open when its session ends: Cline 3.0.65
/// fires `session_shutdown` without `agent_abort` when a hook cancels a run.
pub fn run_cancelled_by_shutdown(ctx: &MapContext) -> Mapped {
    let mut m = Builder::new(RUN_CANCELLED, ctx)
        .meta("by", json!("shutdown"))
        .done(Link::CloseRun);
    m.severity = Some(Severity::Notice);
    m
}

/// `run.cancelled` with no `by`, for a run still open when its agent starts another: Cline
/// never said how it ended, only that it did (an agent runs one run at a time), and none of
/// `by`'s values (user, control, policy, shutdown) is known to be true, so none is claimed
/// (`by` is optional, AEP-0002 §5). Cancelled, not failed: nothing says it failed.
pub fn run_superseded(ctx: &MapContext) -> Mapped {
    let mut m = Builder::new(RUN_CANCELLED, ctx).done(Link::CloseRun);
    m.severity = Some(Severity::Notice);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_types_are_always_valid() {
        assert_eq!(fallback_type("some_future_hook"), "x.cline.some.future.hook");
        assert_eq!(fallback_type("precompact"), "x.cline.hook.precompact");
        assert_eq!(fallback_type("PreCompact"), "x.cline.hook.precompact");
        assert_eq!(fallback_type("a__b"), "x.cline.a.b");
        assert_eq!(fallback_type("weird-name!"), "x.cline.weird.name");
        assert_eq!(fallback_type("__"), "x.cline.hook.unknown");
        assert_eq!(fallback_type("ünïcode"), "x.cline.n.code");
    }
}
