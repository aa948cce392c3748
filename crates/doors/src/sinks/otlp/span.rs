//! The pure AEP Events → OTLP spans mapping (the span synthesis AEP-0005 §3.1 leaves to an
//! additive exporter mode), named after the OpenTelemetry GenAI conventions: Events in (already
//! down-leveled to the exporter's ceiling), finished spans out; no I/O, no clock.
//!
//! **One trace per run.** A run has a start and an end and is what a person asked for; a
//! session can live for days (the TUI) and a days-long trace breaks trace views and their
//! retention limits. What ties a session's runs together is `gen_ai.conversation.id` (the
//! session), which agent timelines key on.
//!
//! - `invoke_agent {agent}`: the run, `run.started` → `run.finished` / `run.failed` /
//!   `run.cancelled`, with the model and provider, the tokens and the cost; `error.type` when it did not
//!   finish (the failure's reason, `cancelled`).
//! - `execute_tool {tool}`: each tool call, its parent the run's span, `tool.requested` →
//!   `tool.completed` / `tool.failed` / `tool.denied` (status and `error.type`); arguments and
//!   results only when the capture ceiling left them in the Event.
//! - Approvals and control (`attention.*`, `control.*`, `error.raised`): span events of the
//!   run's span.
//! - No `chat {model}` spans: neither the hooks nor the hub give a model call its own start and
//!   end, only the run's totals.
//!
//! Identifiers are derived (SHA-256) from the session, the run and the request's Event id, so a
//! tool's span finds its parent after a restart, and a span delivered twice (at-least-once) is
//! the same span. Only what is remembered between a start and its end (its time, the run's
//! model and span events) is in memory, bounded; a span whose start was not seen (a restart in
//! between) starts at its end minus the `duration_ms` the end carries, else at its end, and says
//! so (`aep.span.start_unknown`). Spans still open when their session ends, or pushed out of a
//! full memory, are ended then with `error.type = unfinished`.

use super::record::{any, epoch_nanos};
use aep_core::types::{
    ERROR_RAISED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED,
    TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::{Event as SpanEvent, SpanKind};
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{Span, Status};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// Runs remembered between their start and their end, at most; beyond it the oldest is ended.
pub const MAX_OPEN_RUNS: usize = 10_000;
/// Tool calls remembered between their request and their result, at most.
pub const MAX_OPEN_TOOLS: usize = 10_000;
/// Span events kept on one run's span; later ones are counted as dropped.
pub const MAX_SPAN_EVENTS: usize = 128;

/// A finished span and the agent it belongs to (the resource's `service.name` by default).
#[derive(Debug, Clone)]
pub struct Finished {
    pub agent: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
struct OpenRun {
    /// Insertion order, for pushing the oldest out.
    order: u64,
    start: u64,
    agent: String,
    attributes: Vec<KeyValue>,
    events: Vec<SpanEvent>,
    dropped_events: u32,
}

#[derive(Debug, Clone)]
struct OpenTool {
    order: u64,
    start: u64,
    run: String,
    agent: String,
    /// The tool's name, for the span's.
    name: String,
    attributes: Vec<KeyValue>,
}

/// What is remembered between starts and ends. Cloned before a batch and kept only when the
/// collector has the batch, so a retried batch gives the same spans again.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    next: u64,
    /// (session, run) → the run's span so far.
    runs: HashMap<(String, String), OpenRun>,
    /// (session, the request's Event id) → the tool call's span so far.
    tools: HashMap<(String, String), OpenTool>,
    /// session → the model and the provider its `session.started` named.
    models: BTreeMap<String, (Option<String>, Option<String>)>,
}

impl Spans {
    /// Spans remembered as open (runs, tool calls).
    pub fn open(&self) -> (usize, usize) {
        (self.runs.len(), self.tools.len())
    }

    /// One Event: the spans it ends, if any, pushed onto `out`. The Annex's families, one
    /// helper each: what a family starts is remembered, what it ends is pushed.
    pub fn feed(&mut self, event: &Value, out: &mut Vec<Finished>) {
        let Some(e) = Fed::read(event) else {
            return;
        };
        match e.ty {
            SESSION_STARTED => self.session_started(&e),
            RUN_STARTED => self.run_started(e, out),
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => self.run_ended(e, out),
            TOOL_REQUESTED => self.tool_requested(e, out),
            TOOL_COMPLETED | TOOL_FAILED | TOOL_DENIED => self.tool_ended(e, out),
            SESSION_ENDED => self.session_ended(&e, out),
            ty if ty.starts_with("attention.") || ty.starts_with("control.") || ty == ERROR_RAISED => self.run_event(e),
            _ => {}
        }
    }

    /// `session.started`: the model and provider it names, for the session's runs.
    fn session_started(&mut self, e: &Fed<'_>) {
        let named = |k: &str| e.data.get(k).and_then(Value::as_str).map(str::to_string);
        let (model, provider) = (named("gen_ai.request.model"), named("cline.provider"));
        if (model.is_some() || provider.is_some()) && self.models.len() < MAX_OPEN_RUNS {
            self.models.insert(e.session.into(), (model, provider));
        }
    }

    /// `run.started`: the run's span opened, with the model (its own, else the session's).
    fn run_started(&mut self, e: Fed<'_>, out: &mut Vec<Finished>) {
        let Some(run) = e.run else { return };
        let session = e.session;
        let mut attributes = vec![kv_str("aep.session_id", session), kv_str("aep.run_id", &run)];
        let (known_model, provider) = self.models.get(session).cloned().unwrap_or_default();
        let model = e
            .data
            .get("gen_ai.request.model")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(known_model);
        if let Some(model) = model {
            attributes.push(kv_str("gen_ai.request.model", &model));
        }
        if let Some(provider) = provider {
            attributes.push(kv_str("gen_ai.provider.name", &provider));
        }
        if let Some(trigger) = e.data.get("trigger").and_then(Value::as_str) {
            attributes.push(kv_str("aep.run.trigger", trigger));
        }
        self.next += 1;
        let open = OpenRun {
            order: self.next,
            start: e.time,
            agent: e.agent,
            attributes,
            events: Vec::new(),
            dropped_events: 0,
        };
        self.runs.insert((session.into(), run), open);
        self.bound(e.time, out);
    }

    /// A run's terminal: its span ended, with its tool calls still open; `error.type` the
    /// failure's reason, or `cancelled`.
    fn run_ended(&mut self, e: Fed<'_>, out: &mut Vec<Finished>) {
        let Some(run) = e.run else { return };
        let error = match e.ty {
            RUN_FAILED => Some(
                e.data
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string(),
            ),
            RUN_CANCELLED => Some("cancelled".to_string()),
            _ => None,
        };
        let open = self.runs.remove(&(e.session.to_string(), run.clone()));
        self.close_tools_of(e.session, &run, e.time, out);
        out.push(run_span(e.session, &run, open, e.agent, e.time, &e.data, error));
    }

    /// `tool.requested`: the tool call's span opened, keyed by the request's Event id.
    fn tool_requested(&mut self, e: Fed<'_>, out: &mut Vec<Finished>) {
        let Some(run) = e.run else { return };
        let mut attributes = tool_attributes(&e.data, e.id);
        if let Some(args) = e.data.get("args") {
            attributes.push(kv_str("gen_ai.tool.call.arguments", &json_text(args)));
        }
        self.next += 1;
        let open = OpenTool {
            order: self.next,
            start: e.time,
            run,
            agent: e.agent,
            name: tool_name(&e.data).to_string(),
            attributes,
        };
        self.tools.insert((e.session.into(), e.id.into()), open);
        self.bound(e.time, out);
    }

    /// A tool call's result: its span ended (found by the `cause`, the request's id); a denial
    /// is also a span event of the run's span.
    fn tool_ended(&mut self, e: Fed<'_>, out: &mut Vec<Finished>) {
        let (session, ty, id) = (e.session, e.ty, e.id);
        let request = e.cause.unwrap_or(id);
        let open = self.tools.remove(&(session.to_string(), request.to_string()));
        let Some(run) = e.run.or_else(|| open.as_ref().map(|t| t.run.clone())) else {
            return;
        };
        let error = match ty {
            TOOL_FAILED => Some(failure_type(&e.data)),
            TOOL_DENIED => Some("denied".to_string()),
            _ => None,
        };
        if ty == TOOL_DENIED {
            self.span_event(session, &run, ty, id, e.time, &e.data);
        }
        let message = match ty {
            TOOL_FAILED => e
                .data
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string),
            TOOL_DENIED => {
                let by = e.data.get("by").and_then(Value::as_str).unwrap_or("someone");
                Some(match e.data.get("rule").and_then(Value::as_str) {
                    Some(rule) => format!("denied by {by} rule {rule}"),
                    None => format!("denied by {by}"),
                })
            }
            _ => None,
        };
        let end = ToolEnd {
            session,
            run: &run,
            request,
            time: e.time,
            data: &e.data,
            error,
            message,
        };
        out.push(tool_span(end, open, e.agent));
    }

    /// `session.ended`: its runs still open (and their tool calls) ended, `unfinished`.
    fn session_ended(&mut self, e: &Fed<'_>, out: &mut Vec<Finished>) {
        let session = e.session;
        self.models.remove(session);
        let runs: Vec<String> = self
            .runs
            .keys()
            .filter(|(s, _)| s == session)
            .map(|(_, r)| r.clone())
            .collect();
        for run in runs {
            let open = self.runs.remove(&(session.to_string(), run.clone()));
            self.close_tools_of(session, &run, e.time, out);
            let agent = open
                .as_ref()
                .map(|o| o.agent.clone())
                .unwrap_or_else(|| e.agent.clone());
            out.push(run_span(
                session,
                &run,
                open,
                agent,
                e.time,
                &json!({}),
                Some("unfinished".into()),
            ));
        }
    }

    /// Approvals, control and errors: span events of their run's span (a command names no run:
    /// the session's latest).
    fn run_event(&mut self, e: Fed<'_>) {
        let run = e.run.or_else(|| self.latest_run(e.session));
        if let Some(run) = run {
            self.span_event(e.session, &run, e.ty, e.id, e.time, &e.data);
        }
    }

    /// The session's most recently started open run (a command names no run).
    fn latest_run(&self, session: &str) -> Option<String> {
        self.runs
            .iter()
            .filter(|((s, _), _)| s == session)
            .max_by_key(|(_, open)| open.order)
            .map(|((_, r), _)| r.clone())
    }

    fn span_event(&mut self, session: &str, run: &str, ty: &str, id: &str, time: u64, data: &Value) {
        let Some(open) = self.runs.get_mut(&(session.to_string(), run.to_string())) else {
            return;
        };
        if open.events.len() >= MAX_SPAN_EVENTS {
            open.dropped_events += 1;
            return;
        }
        let mut attributes = vec![kv_str("aep.event_id", id)];
        // The scalar members only: what an approval asked, answered or why, never a document.
        if let Some(members) = data.as_object() {
            for (key, value) in members {
                if matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
                    attributes.push(kv(key, value));
                }
            }
        }
        open.events.push(SpanEvent {
            time_unix_nano: time,
            name: ty.to_string(),
            attributes,
            dropped_attributes_count: 0,
        });
    }

    /// Tool calls of a run that ended without their result: ended with it.
    fn close_tools_of(&mut self, session: &str, run: &str, time: u64, out: &mut Vec<Finished>) {
        let requests: Vec<String> = self
            .tools
            .iter()
            .filter(|((s, _), t)| s == session && t.run == run)
            .map(|((_, r), _)| r.clone())
            .collect();
        for request in requests {
            let open = self.tools.remove(&(session.to_string(), request.clone()));
            let agent = open.as_ref().map(|t| t.agent.clone()).unwrap_or_default();
            out.push(tool_span(
                ToolEnd {
                    session,
                    run,
                    request: &request,
                    time,
                    data: &json!({}),
                    error: Some("unfinished".into()),
                    message: Some("the run ended before the tool's result".into()),
                },
                open,
                agent,
            ));
        }
    }

    /// Memory bounded: the oldest open run or tool call beyond the bound is ended now.
    fn bound(&mut self, time: u64, out: &mut Vec<Finished>) {
        while self.runs.len() > MAX_OPEN_RUNS {
            let Some(key) = self.runs.iter().min_by_key(|(_, o)| o.order).map(|(k, _)| k.clone()) else {
                break;
            };
            let open = self.runs.remove(&key);
            let agent = open.as_ref().map(|o| o.agent.clone()).unwrap_or_default();
            out.push(run_span(
                &key.0,
                &key.1,
                open,
                agent,
                time,
                &json!({}),
                Some("unfinished".into()),
            ));
        }
        while self.tools.len() > MAX_OPEN_TOOLS {
            let Some(key) = self.tools.iter().min_by_key(|(_, t)| t.order).map(|(k, _)| k.clone()) else {
                break;
            };
            let open = self.tools.remove(&key);
            let (run, agent) = open
                .as_ref()
                .map(|t| (t.run.clone(), t.agent.clone()))
                .unwrap_or_default();
            out.push(tool_span(
                ToolEnd {
                    session: &key.0,
                    run: &run,
                    request: &key.1,
                    time,
                    data: &json!({}),
                    error: Some("unfinished".into()),
                    message: Some("too many tool calls open at once to remember this one".into()),
                },
                open,
                agent,
            ));
        }
    }
}

/// The run's trace: 16 bytes of SHA-256 over the session and the run.
pub fn trace_id(session: &str, run: &str) -> Vec<u8> {
    digest(&["trace", session, run])[..16].to_vec()
}

/// The run's span.
pub fn run_span_id(session: &str, run: &str) -> Vec<u8> {
    digest(&["run", session, run])[..8].to_vec()
}

/// A tool call's span, from the id of the Event that requested it.
pub fn tool_span_id(session: &str, request: &str) -> Vec<u8> {
    digest(&["tool", session, request])[..8].to_vec()
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in parts {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

fn run_span(
    session: &str,
    run: &str,
    open: Option<OpenRun>,
    agent: String,
    end: u64,
    data: &Value,
    error: Option<String>,
) -> Finished {
    let known = open.is_some();
    let open = open.unwrap_or_else(|| OpenRun {
        order: 0,
        start: start_from(end, data),
        agent: agent.clone(),
        attributes: vec![kv_str("aep.session_id", session), kv_str("aep.run_id", run)],
        events: Vec::new(),
        dropped_events: 0,
    });
    let agent = if open.agent.is_empty() { agent } else { open.agent };
    let mut attributes = vec![
        kv_str("gen_ai.operation.name", "invoke_agent"),
        kv_str("gen_ai.agent.name", &agent),
        kv_str("gen_ai.conversation.id", session),
    ];
    attributes.extend(open.attributes);
    usage(data, &mut attributes);
    if !known {
        attributes.push(kv("aep.span.start_unknown", &json!(true)));
    }
    let status = error_status(error, run_end_message(data), &mut attributes);
    Finished {
        span: Span {
            trace_id: trace_id(session, run),
            span_id: run_span_id(session, run),
            name: format!("invoke_agent {agent}"),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: open.start.min(end),
            end_time_unix_nano: end,
            attributes,
            events: open.events,
            dropped_events_count: open.dropped_events,
            status: Some(status),
            ..Default::default()
        },
        agent,
    }
}

/// A run's end in words: its `reason`, else who cancelled it and by which rule or budget.
fn run_end_message(data: &Value) -> Option<String> {
    let text = |key: &str| data.get(key).and_then(Value::as_str);
    if let Some(reason) = text("reason") {
        return Some(reason.to_string());
    }
    let by = text("by")?;
    Some(match (text("rule"), text("budget")) {
        (Some(rule), _) => format!("cancelled by {by} rule {rule}"),
        (None, Some(budget)) => format!("cancelled by {by} budget {budget}"),
        (None, None) => format!("cancelled by {by}"),
    })
}

/// What the fold reads of one Event: an Event without a session or a type is none of its
/// business (no span, no panic); `data` is `{}` when it is not an object.
struct Fed<'a> {
    session: &'a str,
    ty: &'a str,
    time: u64,
    agent: String,
    data: Value,
    run: Option<String>,
    id: &'a str,
    /// The request a tool's result answers.
    cause: Option<&'a str>,
}

impl<'a> Fed<'a> {
    fn read(event: &'a Value) -> Option<Self> {
        let text = |k: &str| event.get(k).and_then(Value::as_str);
        let (Some(session), Some(ty)) = (text("session"), text("type")) else {
            return None;
        };
        Some(Fed {
            session,
            ty,
            time: text("time").and_then(epoch_nanos).unwrap_or(0),
            agent: text("agent").unwrap_or("unknown_service").to_string(),
            data: event
                .get("data")
                .filter(|d| d.is_object())
                .cloned()
                .unwrap_or(json!({})),
            run: text("run").map(str::to_string),
            id: text("id").unwrap_or_default(),
            cause: text("cause"),
        })
    }
}

struct ToolEnd<'a> {
    session: &'a str,
    run: &'a str,
    request: &'a str,
    time: u64,
    data: &'a Value,
    error: Option<String>,
    message: Option<String>,
}

fn tool_span(end: ToolEnd<'_>, open: Option<OpenTool>, agent: String) -> Finished {
    let known = open.is_some();
    let (start, agent, name, mut attributes) = match open {
        Some(t) => (
            t.start,
            if t.agent.is_empty() { agent } else { t.agent },
            t.name,
            t.attributes,
        ),
        None => (
            start_from(end.time, end.data),
            agent,
            tool_name(end.data).to_string(),
            tool_attributes(end.data, end.request),
        ),
    };
    if let Some(result) = end.data.get("result") {
        attributes.push(kv_str("gen_ai.tool.call.result", &json_text(result)));
    }
    usage(end.data, &mut attributes);
    if !known {
        attributes.push(kv("aep.span.start_unknown", &json!(true)));
    }
    let status = error_status(end.error, end.message, &mut attributes);
    Finished {
        span: Span {
            trace_id: trace_id(end.session, end.run),
            span_id: tool_span_id(end.session, end.request),
            parent_span_id: run_span_id(end.session, end.run),
            name: format!("execute_tool {name}"),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: start.min(end.time),
            end_time_unix_nano: end.time,
            attributes,
            status: Some(status),
            ..Default::default()
        },
        agent,
    }
}

/// A tool Event's tool name (`tool` when it names none).
fn tool_name(data: &Value) -> &str {
    data.pointer("/tool/name").and_then(Value::as_str).unwrap_or("tool")
}

fn tool_attributes(data: &Value, request: &str) -> Vec<KeyValue> {
    let name = tool_name(data);
    let call = data.pointer("/tool/call_id").and_then(Value::as_str).unwrap_or(request);
    vec![
        kv_str("gen_ai.operation.name", "execute_tool"),
        kv_str("gen_ai.tool.name", name),
        kv_str("gen_ai.tool.call.id", call),
        kv_str("gen_ai.tool.type", "function"),
    ]
}

/// The `gen_ai.*` members (tokens) and the cost, as attributes.
fn usage(data: &Value, attributes: &mut Vec<KeyValue>) {
    if let Some(members) = data.as_object() {
        for (key, value) in members {
            if key.starts_with("gen_ai.") && !value.is_object() && !value.is_array() {
                attributes.push(kv(key, value));
            }
        }
    }
    if let Some(total) = data.pointer("/cost/total").filter(|v| v.is_number()) {
        attributes.push(kv("aep.cost.total", total));
        if let Some(currency) = data.pointer("/cost/currency").filter(|v| v.is_string()) {
            attributes.push(kv("aep.cost.currency", currency));
        }
    }
}

/// A failed tool's `error.type`: the error's own type or code, else `tool_error`.
fn failure_type(data: &Value) -> String {
    ["/error/type", "/error/code"]
        .iter()
        .find_map(|p| data.pointer(p).and_then(Value::as_str))
        .unwrap_or("tool_error")
        .to_string()
}

fn error_status(error: Option<String>, message: Option<String>, attributes: &mut Vec<KeyValue>) -> Status {
    match error {
        None => Status::default(),
        Some(kind) => {
            attributes.push(kv_str("error.type", &kind));
            Status {
                message: message.unwrap_or_else(|| kind.clone()),
                code: StatusCode::Error as i32,
            }
        }
    }
}

/// A span whose start was not seen: its end minus the duration the end carries, else its end.
fn start_from(end: u64, data: &Value) -> u64 {
    data.get("duration_ms")
        .and_then(Value::as_u64)
        .map(|ms| end.saturating_sub(ms.saturating_mul(1_000_000)))
        .unwrap_or(end)
}

fn json_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn kv(key: &str, value: &Value) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(any(value)),
        ..Default::default()
    }
}

fn kv_str(key: &str, value: &str) -> KeyValue {
    kv(key, &Value::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;

    fn ev(ty: &str, id: &str, run: Option<&str>, time: &str, data: Value) -> Value {
        let mut e = json!({"type": ty, "id": id, "session": "s1", "agent": "cline", "time": time, "data": data});
        if let Some(run) = run {
            e["run"] = json!(run);
        }
        e
    }

    fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a V> {
        span.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    fn s(v: Option<&V>) -> &str {
        match v {
            Some(V::StringValue(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    fn feed(spans: &mut Spans, events: &[Value]) -> Vec<Span> {
        let mut out = Vec::new();
        for e in events {
            spans.feed(e, &mut out);
        }
        out.into_iter().map(|f| f.span).collect()
    }

    #[test]
    fn a_run_is_a_trace_its_tools_children_of_invoke_agent() {
        let mut spans = Spans::default();
        let out = feed(
            &mut spans,
            &[
                ev(
                    "session.started",
                    "e0",
                    None,
                    "2026-12-03T10:00:00Z",
                    json!({"gen_ai.request.model": "m1", "cline.provider": "openai-compatible"}),
                ),
                ev(
                    "run.started",
                    "e1",
                    Some("r1"),
                    "2026-12-03T10:00:01Z",
                    json!({"trigger": "user"}),
                ),
                ev(
                    "tool.requested",
                    "e2",
                    Some("r1"),
                    "2026-12-03T10:00:02Z",
                    json!({"tool": {"name": "execute_command", "call_id": "c1"}, "args": {"command": "ls"}}),
                ),
                ev(
                    "attention.requested",
                    "e3",
                    Some("r1"),
                    "2026-12-03T10:00:02.5Z",
                    json!({"kind": "approval"}),
                ),
                json!({"type": "tool.completed", "id": "e4", "cause": "e2", "session": "s1", "run": "r1", "agent": "cline",
                    "time": "2026-12-03T10:00:03Z", "data": {"tool": {"name": "execute_command", "call_id": "c1"}, "duration_ms": 1000}}),
                ev(
                    "run.finished",
                    "e5",
                    Some("r1"),
                    "2026-12-03T10:00:04Z",
                    json!({"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5, "cost": {"total": 0.5, "currency": "USD"}}),
                ),
            ],
        );
        assert_eq!(out.len(), 2);
        let (tool, run) = (&out[0], &out[1]);
        assert_eq!(run.name, "invoke_agent cline");
        assert_eq!(tool.name, "execute_tool execute_command");
        assert_eq!(tool.trace_id, run.trace_id);
        assert_eq!(tool.trace_id.len(), 16);
        assert_eq!(tool.parent_span_id, run.span_id);
        assert!(run.parent_span_id.is_empty(), "the run is the root");
        assert_eq!(run.end_time_unix_nano - run.start_time_unix_nano, 3_000_000_000);
        assert_eq!(tool.end_time_unix_nano - tool.start_time_unix_nano, 1_000_000_000);
        assert_eq!(s(attr(run, "gen_ai.conversation.id")), "s1");
        assert_eq!(s(attr(run, "gen_ai.request.model")), "m1");
        assert_eq!(s(attr(run, "gen_ai.provider.name")), "openai-compatible");
        assert_eq!(attr(run, "gen_ai.usage.input_tokens"), Some(&V::IntValue(10)));
        assert_eq!(attr(run, "aep.cost.total"), Some(&V::DoubleValue(0.5)));
        assert_eq!(s(attr(tool, "gen_ai.tool.call.id")), "c1");
        assert_eq!(s(attr(tool, "gen_ai.tool.call.arguments")), r#"{"command":"ls"}"#);
        assert_eq!(run.events.len(), 1);
        assert_eq!(run.events[0].name, "attention.requested");
        assert_eq!(run.status.as_ref().unwrap().code, StatusCode::Unset as i32);
        assert!(attr(run, "aep.span.start_unknown").is_none());
        assert_eq!(spans.open(), (0, 0), "nothing left remembered");
    }

    #[test]
    fn failures_denials_and_cancels_carry_error_type() {
        let mut spans = Spans::default();
        let out = feed(
            &mut spans,
            &[
                ev("run.started", "e1", Some("r1"), "2026-12-03T10:00:01Z", json!({})),
                ev(
                    "tool.requested",
                    "e2",
                    Some("r1"),
                    "2026-12-03T10:00:02Z",
                    json!({"tool": {"name": "a"}}),
                ),
                json!({"type": "tool.failed", "id": "e3", "cause": "e2", "session": "s1", "run": "r1", "agent": "cline",
                    "time": "2026-12-03T10:00:03Z", "data": {"tool": {"name": "a"}, "error": {"message": "boom"}}}),
                ev(
                    "tool.requested",
                    "e4",
                    Some("r1"),
                    "2026-12-03T10:00:04Z",
                    json!({"tool": {"name": "b"}}),
                ),
                json!({"type": "tool.denied", "id": "e5", "cause": "e4", "session": "s1", "run": "r1", "agent": "cline",
                    "time": "2026-12-03T10:00:05Z", "data": {"tool": {"name": "b"}, "by": "policy", "rule": "no-rm"}}),
                ev(
                    "tool.requested",
                    "e6",
                    Some("r1"),
                    "2026-12-03T10:00:06Z",
                    json!({"tool": {"name": "c"}}),
                ),
                ev(
                    "run.cancelled",
                    "e7",
                    Some("r1"),
                    "2026-12-03T10:00:07Z",
                    json!({"by": "user"}),
                ),
            ],
        );
        let names: Vec<_> = out.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "execute_tool a",
                "execute_tool b",
                "execute_tool c",
                "invoke_agent cline"
            ]
        );
        let error = |s: &Span| {
            attr(s, "error.type").map(|v| match v {
                V::StringValue(s) => s.clone(),
                _ => unreachable!(),
            })
        };
        assert_eq!(error(&out[0]).as_deref(), Some("tool_error"));
        assert_eq!(out[0].status.as_ref().unwrap().message, "boom");
        assert_eq!(error(&out[1]).as_deref(), Some("denied"));
        assert_eq!(out[1].status.as_ref().unwrap().message, "denied by policy rule no-rm");
        assert_eq!(error(&out[2]).as_deref(), Some("unfinished"), "ended with its run");
        assert_eq!(error(&out[3]).as_deref(), Some("cancelled"));
        assert_eq!(out[3].status.as_ref().unwrap().message, "cancelled by user");
        assert!(out
            .iter()
            .all(|s| s.status.as_ref().unwrap().code == StatusCode::Error as i32));
        assert_eq!(
            out[3].events.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["tool.denied"]
        );
    }

    #[test]
    fn an_end_without_its_start_keeps_its_ids_and_says_so() {
        let mut before = Spans::default();
        let full = feed(
            &mut before,
            &[
                ev("run.started", "e1", Some("r1"), "2026-12-03T10:00:01Z", json!({})),
                ev(
                    "run.finished",
                    "e5",
                    Some("r1"),
                    "2026-12-03T10:00:04Z",
                    json!({"duration_ms": 3000}),
                ),
            ],
        );
        // A restart between start and end: the same ids, the start from duration_ms.
        let mut after = Spans::default();
        let alone = feed(
            &mut after,
            &[ev(
                "run.finished",
                "e5",
                Some("r1"),
                "2026-12-03T10:00:04Z",
                json!({"duration_ms": 3000}),
            )],
        );
        assert_eq!(alone[0].trace_id, full[0].trace_id);
        assert_eq!(alone[0].span_id, full[0].span_id);
        assert_eq!(alone[0].start_time_unix_nano, full[0].start_time_unix_nano);
        assert_eq!(attr(&alone[0], "aep.span.start_unknown"), Some(&V::BoolValue(true)));
        assert_ne!(trace_id("s1", "r1"), trace_id("s1", "r2"));
        assert_ne!(tool_span_id("ab", "c"), tool_span_id("a", "bc"));
    }

    #[test]
    fn a_session_end_closes_what_is_open_and_memory_is_bounded() {
        let mut spans = Spans::default();
        let out = feed(
            &mut spans,
            &[
                ev("run.started", "e1", Some("r1"), "2026-12-03T10:00:01Z", json!({})),
                ev(
                    "tool.requested",
                    "e2",
                    Some("r1"),
                    "2026-12-03T10:00:02Z",
                    json!({"tool": {"name": "a"}}),
                ),
                ev("session.ended", "e3", None, "2026-12-03T10:00:09Z", json!({})),
            ],
        );
        assert_eq!(out.len(), 2);
        assert_eq!(spans.open(), (0, 0));
        let mut out = Vec::new();
        for i in 0..MAX_OPEN_RUNS + 5 {
            spans.feed(
                &ev(
                    "run.started",
                    &format!("e{i}"),
                    Some(&format!("r{i}")),
                    "2026-12-03T10:00:01Z",
                    json!({}),
                ),
                &mut out,
            );
        }
        assert_eq!(spans.open().0, MAX_OPEN_RUNS);
        assert_eq!(out.len(), 5, "the oldest were ended, not forgotten");
        assert_eq!(s(attr(&out[0].span, "aep.run_id")), "r0");
    }

    #[test]
    fn span_events_are_bounded_and_keep_scalars_only() {
        let mut spans = Spans::default();
        let mut events = vec![ev("run.started", "e1", Some("r1"), "2026-12-03T10:00:01Z", json!({}))];
        for i in 0..MAX_SPAN_EVENTS + 3 {
            events.push(ev(
                "attention.requested",
                &format!("a{i}"),
                Some("r1"),
                "2026-12-03T10:00:02Z",
                json!({"kind": "approval", "form": {"fields": []}}),
            ));
        }
        events.push(ev("run.finished", "e9", Some("r1"), "2026-12-03T10:00:03Z", json!({})));
        let out = feed(&mut spans, &events);
        assert_eq!(out[0].events.len(), MAX_SPAN_EVENTS);
        assert_eq!(out[0].dropped_events_count, 3);
        let keys: Vec<_> = out[0].events[0].attributes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["aep.event_id", "kind"]);
    }

    #[test]
    fn hostile_events_give_no_span_and_no_panic() {
        let mut spans = Spans::default();
        let out = feed(
            &mut spans,
            &[
                json!(null),
                json!({"type": "run.finished"}),
                json!({"type": "run.finished", "session": "s1"}),
                json!({"type": "tool.completed", "session": "s1", "data": "text"}),
                json!({"type": "run.finished", "session": "s1", "run": "r", "time": "yesterday",
                    "data": {"duration_ms": u64::MAX}}),
            ],
        );
        assert_eq!(out.len(), 1, "only the last names a run");
        assert_eq!(out[0].start_time_unix_nano, 0);
        assert_eq!(out[0].end_time_unix_nano, 0);
    }
}
