//! A session's timeline, as `aep-cline show` prints it and the dashboard draws it: one entry per
//! thing that happened, pairs merged (a run with its end, a tool call with its result, an
//! approval with its answer and resolution, a command with its ack). Content (arguments,
//! results, prompts, messages) appears only where the log holds it: the capture level decided
//! that when the Event was written, and nothing here adds any.
//!
//! A fold: each Event is read once into what it is ([`event::Happening`], from the type
//! constants), then one function per family builds or completes its entry, with the open pairs
//! indexed by what their ends name (a run's id, the `tool.requested` a result is caused by, the
//! request an answer is about, the command an ack is caused by). Pure: no I/O.

mod event;

use super::numbers;
use super::summary::short_id;
use event::{Ack, Delegation, Happening, RunEnd, ToolEnd};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// `session`, `run`, `tool`, `approval`, `command`, `input`, `compaction`, `delegation`, `other`.
    pub kind: &'static str,
    pub time: String,
    /// The Event that opened the entry.
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// What it is about: the tool's name, the run's trigger, the Event type for `other`.
    pub name: String,
    /// `started`, `ended`, `running`, `finished`, `failed`, `cancelled`, `requested`,
    /// `completed`, `denied`, `pending`, `approved`, `rejected`, `dismissed`, `timeout`,
    /// `accepted`, `sent`, ...
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Structured facts: `by`, `reason`, `error_type`, `via`, `option`, `waited_ms`, `short`, ...
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub detail: Map<String, Value>,
    /// Content, only what the log holds: `args`, `result`, `prompt`, `message`, `summary`, `text`.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub content: Map<String, Value>,
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

impl Entry {
    fn new(kind: &'static str, e: &Value, name: &str, status: &str) -> Self {
        Entry {
            kind,
            time: s(e, "time").unwrap_or_default().to_string(),
            id: s(e, "id").unwrap_or_default().to_string(),
            run: s(e, "run").map(str::to_string),
            name: name.to_string(),
            status: status.to_string(),
            duration_ms: None,
            detail: Map::new(),
            content: Map::new(),
        }
    }

    fn detail(&mut self, key: &str, value: Option<&Value>) {
        if let Some(v) = value.filter(|v| !v.is_null()) {
            self.detail.insert(key.to_string(), v.clone());
        }
    }

    fn content(&mut self, key: &str, value: Option<&Value>) {
        if let Some(v) = value.filter(|v| !v.is_null()) {
            self.content.insert(key.to_string(), v.clone());
        }
    }
}

/// Builds the timeline of one session's Events, in log order.
pub fn timeline<'a>(events: impl IntoIterator<Item = &'a Value>) -> Vec<Entry> {
    let mut fold = Fold::default();
    for event in events {
        fold.add(&Seen::of(event));
    }
    fold.out
}

/// One Event as the fold reads it: what it is, and the attributes every family looks at.
struct Seen<'a> {
    is: Happening<'a>,
    event: &'a Value,
    data: &'a Value,
    subject: Option<&'a str>,
    cause: Option<&'a str>,
}

impl<'a> Seen<'a> {
    fn of(event: &'a Value) -> Self {
        Seen {
            is: Happening::of(event),
            event,
            data: event.get("data").unwrap_or(&Value::Null),
            subject: s(event, "subject"),
            cause: s(event, "cause"),
        }
    }

    /// A tool Event's tool: `data.tool.name`, else its subject.
    fn tool_name(&self) -> &'a str {
        self.data
            .get("tool")
            .and_then(|t| s(t, "name"))
            .or(self.subject)
            .unwrap_or("tool")
    }
}

/// The timeline so far, and where each open pair's entry is: run id, `tool.requested` id,
/// attention id, command id.
#[derive(Default)]
struct Fold {
    out: Vec<Entry>,
    runs: HashMap<String, usize>,
    tools: HashMap<String, usize>,
    asks: HashMap<String, usize>,
    commands: HashMap<String, usize>,
}

impl Fold {
    fn add(&mut self, e: &Seen<'_>) {
        match e.is {
            Happening::SessionStarted | Happening::SessionEnded => self.session(e),
            Happening::RunStarted => self.run_started(e),
            Happening::RunEnded(end) => self.run_ended(e, end),
            Happening::ToolRequested => self.tool_requested(e),
            Happening::ToolEnded(end) => self.tool_ended(e, end),
            Happening::BudgetNotice => self.budget_notice(e),
            Happening::Asked => self.asked(e),
            Happening::Answered => self.answered(e),
            Happening::AskClosed { timeout } => self.ask_closed(e, timeout),
            Happening::CommandAcked(ack) => self.command_acked(e, ack),
            Happening::InputSent | Happening::PromptSubmitted => self.input(e),
            Happening::Compacted => self.compacted(e),
            Happening::Delegation(edge) => self.delegation(e, edge),
            Happening::Other(ty) => self.out.push(Entry::new("other", e.event, ty, "")),
        }
    }

    /// The entry at `at`, else a new one from `make` (an end whose start is not in the log).
    fn at_or_new(&mut self, at: Option<usize>, make: impl FnOnce() -> Entry) -> &mut Entry {
        let i = at.unwrap_or_else(|| {
            self.out.push(make());
            self.out.len() - 1
        });
        &mut self.out[i]
    }

    fn session(&mut self, e: &Seen<'_>) {
        let data = e.data;
        if e.is == Happening::SessionStarted {
            let mut entry = Entry::new("session", e.event, "session", "started");
            entry.detail("client", data.get("client"));
            entry.detail("model", data.get("gen_ai.request.model"));
            entry.content("cwd", data.get("cwd"));
            entry.content("label", data.get("label"));
            self.out.push(entry);
        } else {
            let mut entry = Entry::new("session", e.event, "session", "ended");
            entry.detail("reason", data.get("reason"));
            entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64);
            self.out.push(entry);
        }
    }

    fn run_started(&mut self, e: &Seen<'_>) {
        let trigger = s(e.data, "trigger").unwrap_or("user");
        let mut entry = Entry::new("run", e.event, trigger, "running");
        entry.content("prompt", e.data.get("prompt"));
        if let Some(run) = s(e.event, "run") {
            self.runs.insert(run.to_string(), self.out.len());
        }
        self.out.push(entry);
    }

    /// A run's terminal, on its `run.started` entry (or alone when the log lacks that).
    fn run_ended(&mut self, e: &Seen<'_>, end: RunEnd) {
        let (data, status) = (e.data, end.status());
        let at = s(e.event, "run").and_then(|r| self.runs.remove(r));
        let entry = self.at_or_new(at, || Entry::new("run", e.event, "run", status));
        entry.status = status.to_string();
        entry.detail("ended", e.event.get("time"));
        entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64).or(entry.duration_ms);
        entry.detail("by", data.get("by"));
        entry.detail("reason", data.get("reason"));
        entry.detail("error_type", data.get("error").and_then(|x| x.get("type")));
        // A run a guard stopped: the rule, or the budget.
        entry.detail("rule", data.get("rule"));
        entry.detail("budget", data.get("budget").and_then(|b| b.get("name")));
        if data.get("by").and_then(Value::as_str) == Some("control") {
            entry.detail("command", e.event.get("cause"));
        }
        run_numbers(entry, data);
        entry.content("summary", data.get("summary"));
        entry.content("message", data.get("error").and_then(|x| x.get("message")));
        if end == RunEnd::Cancelled {
            entry.content("reason", data.get("reason"));
            entry.detail.remove("reason");
        }
    }

    fn tool_requested(&mut self, e: &Seen<'_>) {
        let mut entry = Entry::new("tool", e.event, e.tool_name(), "requested");
        entry.detail("call_id", e.data.get("tool").and_then(|t| t.get("call_id")));
        entry.content("args", e.data.get("args").or(e.data.get("args_redacted")));
        self.tools.insert(entry.id.clone(), self.out.len());
        self.out.push(entry);
    }

    /// A tool call's outcome, on the entry of the `tool.requested` it is caused by.
    fn tool_ended(&mut self, e: &Seen<'_>, end: ToolEnd) {
        let (data, status) = (e.data, end.status());
        let at = e.cause.and_then(|c| self.tools.remove(c));
        let entry = self.at_or_new(at, || Entry::new("tool", e.event, e.tool_name(), status));
        entry.status = status.to_string();
        entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64);
        entry.detail("error_type", data.get("error").and_then(|x| x.get("type")));
        // Which guard refused it, and why: the operator's own words (metadata).
        entry.detail("by", data.get("by"));
        entry.detail("rule", data.get("rule"));
        entry.detail("line", data.get("cline.policy_line"));
        entry.detail("reason", data.get("cline.policy_reason"));
        entry.content("result", data.get("result").or(data.get("result_redacted")));
        entry.content("message", data.get("error").and_then(|x| x.get("message")));
    }

    /// A budget's notice asks nobody (`respond_via: ["oob"]`, resolved `auto` at once): shown
    /// as what it is, its numbers in one place.
    fn budget_notice(&mut self, e: &Seen<'_>) {
        let b = &e.data["budget"];
        let name = format!("{} budget", s(b, "name").unwrap_or("a"));
        let status = match (s(b, "action"), b.get("threshold").and_then(Value::as_f64)) {
            (Some(action), _) => action.to_string(),
            (None, Some(t)) => format!("{}%", (t * 100.0).round() as u32),
            (None, None) => "notice".to_string(),
        };
        let mut entry = Entry::new("budget", e.event, &name, &status);
        if let (Some(cost), Some(limit)) = (
            b.get("cost").and_then(Value::as_f64),
            b.get("limit").and_then(Value::as_f64),
        ) {
            let currency = s(b, "currency").unwrap_or("USD");
            entry.detail.insert(
                "spent".into(),
                Value::String(format!(
                    "{}/{} {currency}",
                    crate::views::numbers::figure(cost),
                    crate::views::numbers::figure(limit)
                )),
            );
        }
        entry.detail("workspace", b.get("workspace"));
        entry.detail("not_cancelled", b.get("not_cancelled"));
        self.out.push(entry);
    }

    fn asked(&mut self, e: &Seen<'_>) {
        let data = e.data;
        let mut entry = Entry::new("approval", e.event, e.subject.unwrap_or("approval"), "pending");
        let id = entry.id.clone();
        entry.detail.insert("short".into(), Value::String(short_id(&id)));
        entry.detail("kind", data.get("kind"));
        entry.detail("respond_via", data.get("respond_via"));
        entry.detail("policy_rule", data.get("cline.policy_rule"));
        entry.content("prompt", data.get("prompt"));
        self.asks.insert(id, self.out.len());
        self.out.push(entry);
    }

    /// An answer, on its request's entry (its subject); an answer to nothing shown is dropped.
    fn answered(&mut self, e: &Seen<'_>) {
        let Some(&i) = e.subject.and_then(|x| self.asks.get(x)) else {
            return;
        };
        let (data, entry) = (e.data, &mut self.out[i]);
        let option = data.get("answer").and_then(|a| a.get("option"));
        entry.detail("option", option);
        entry.detail("via", data.get("via"));
        entry.detail("by", data.get("by"));
        entry.detail("policy_rule", data.get("cline.policy_rule"));
        entry.detail("answered_by_command", e.event.get("cause"));
        entry.content("answer", data.get("answer").and_then(|a| a.get("text")));
        entry.status = match option.and_then(Value::as_str) {
            Some("approve") => "approved".into(),
            Some("deny") => "denied".into(),
            _ => "answered".into(),
        };
    }

    /// A request's resolution or timeout, which closes its entry; an answer's status stays.
    fn ask_closed(&mut self, e: &Seen<'_>, timeout: bool) {
        let Some(i) = e.subject.and_then(|x| self.asks.remove(x)) else {
            return;
        };
        let (data, entry) = (e.data, &mut self.out[i]);
        let waited = data.get("latency_ms").or(data.get("after_ms"));
        entry.detail("waited_ms", waited);
        entry.detail("resolution", data.get("resolution"));
        if timeout {
            entry.status = "timeout".into();
        } else if entry.status == "pending" {
            entry.status = s(data, "resolution").unwrap_or("resolved").to_string();
        }
    }

    /// A command's ack: one entry per command (its cause), a later ack only sets its status.
    fn command_acked(&mut self, e: &Seen<'_>, ack: Ack) {
        let status = ack.status();
        if let Some(&i) = e.cause.and_then(|c| self.commands.get(c)) {
            self.out[i].status = status.to_string();
            return;
        }
        let mut entry = Entry::new("command", e.event, "command", status);
        entry.detail("command", e.event.get("cause"));
        entry.detail("reason", e.data.get("reason"));
        entry.content("detail", e.data.get("detail"));
        if let Some(c) = e.cause {
            self.commands.insert(c.to_string(), self.out.len());
        }
        self.out.push(entry);
    }

    /// What a person sent the agent (`x.cline.input.sent`) or Cline took as a prompt.
    fn input(&mut self, e: &Seen<'_>) {
        if e.is == Happening::PromptSubmitted {
            self.out.push(Entry::new("input", e.event, "prompt", "submitted"));
            return;
        }
        let mut entry = Entry::new("input", e.event, "input", "sent");
        entry.detail("delivery", e.data.get("delivery"));
        entry.detail("command", e.event.get("cause"));
        self.out.push(entry);
    }

    fn compacted(&mut self, e: &Seen<'_>) {
        let mut entry = Entry::new("compaction", e.event, "compaction", "compacted");
        entry.detail("strategy", e.data.get("strategy"));
        self.out.push(entry);
    }

    fn delegation(&mut self, e: &Seen<'_>, edge: Delegation) {
        let name = e.subject.unwrap_or("subagent");
        self.out.push(Entry::new("delegation", e.event, name, edge.status()));
    }
}

/// A run's tokens and cost, with the same names and meanings as the session's header
/// (`views::summary`): input is what was not read from the cache, money as everywhere.
fn run_numbers(entry: &mut Entry, data: &Value) {
    let count = |k: &str| data.get(k).and_then(Value::as_u64);
    let cache_read = count("gen_ai.usage.cache_read.input_tokens");
    if let Some(all) = count("gen_ai.usage.input_tokens") {
        let fresh = all.saturating_sub(cache_read.unwrap_or(0));
        entry
            .detail
            .insert("input".into(), Value::String(numbers::tokens(fresh)));
    }
    if let Some(n) = cache_read.filter(|n| *n > 0) {
        entry
            .detail
            .insert("cache_read".into(), Value::String(numbers::tokens(n)));
    }
    if let Some(n) = count("gen_ai.usage.output_tokens") {
        entry.detail.insert("output".into(), Value::String(numbers::tokens(n)));
    }
    if let Some(total) = data.pointer("/cost/total").and_then(Value::as_f64) {
        let currency = data.pointer("/cost/currency").and_then(Value::as_str).unwrap_or("USD");
        entry
            .detail
            .insert("cost".into(), Value::String(numbers::money(total, currency)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pairs_are_merged_and_content_shown_only_where_logged() {
        let events = vec![
            json!({"type": "session.started", "id": "E0", "time": "t0", "data": {"client": {"name": "cline"}}}),
            json!({"type": "run.started", "id": "E1", "run": "R1", "time": "t1", "data": {"trigger": "user"}}),
            json!({"type": "tool.requested", "id": "E2", "run": "R1", "time": "t2", "subject": "run_commands",
                   "data": {"tool": {"name": "run_commands", "call_id": "c1"}, "args_digest": "d"}}),
            json!({"type": "attention.requested", "id": "01JREQUESTXYZ9AB", "run": "R1", "time": "t3", "subject": "run_commands",
                   "data": {"kind": "permission", "prompt": "cline requests permission: run_commands"}}),
            json!({"type": "control.accepted", "id": "E4", "time": "t4", "cause": "CMD1"}),
            json!({"type": "attention.answered", "id": "E5", "time": "t5", "subject": "01JREQUESTXYZ9AB", "cause": "CMD1",
                   "data": {"answer": {"option": "approve"}, "via": "control"}}),
            json!({"type": "attention.resolved", "id": "E6", "time": "t6", "subject": "01JREQUESTXYZ9AB",
                   "data": {"resolution": "answered", "latency_ms": 1500}}),
            json!({"type": "tool.completed", "id": "E7", "run": "R1", "time": "t7", "cause": "E2",
                   "data": {"tool": {"name": "run_commands"}, "duration_ms": 12, "result_redacted": "ok"}}),
            json!({"type": "run.cancelled", "id": "E8", "run": "R1", "time": "t8", "cause": "CMD2", "data": {"by": "control"}}),
            json!({"type": "control.rejected", "id": "E9", "time": "t9", "cause": "CMD3", "data": {"reason": "refused"}}),
        ];
        let t = timeline(&events);
        let kinds: Vec<(&str, &str)> = t.iter().map(|e| (e.kind, e.status.as_str())).collect();
        assert_eq!(
            kinds,
            [
                ("session", "started"),
                ("run", "cancelled"),
                ("tool", "completed"),
                ("approval", "approved"),
                ("command", "accepted"),
                ("command", "rejected")
            ]
        );
        let tool = &t[2];
        assert_eq!((tool.name.as_str(), tool.duration_ms), ("run_commands", Some(12)));
        assert_eq!(tool.content.get("result"), Some(&json!("ok")));
        assert!(!tool.content.contains_key("args"), "no args in the log, none shown");
        let approval = &t[3];
        assert_eq!(approval.detail["short"], "xyz9ab");
        assert_eq!(approval.detail["via"], "control");
        assert_eq!(approval.detail["waited_ms"], 1500);
        assert_eq!(t[1].detail["by"], "control");
        assert_eq!(t[5].detail["reason"], "refused");
    }

    /// A budget's notice is a budget line with its numbers, never an "approval".
    #[test]
    fn a_budget_notice_is_shown_as_a_budget() {
        let events = vec![
            json!({"type": "attention.requested", "id": "N1", "run": "R1", "time": "t1", "subject": "budget",
                   "data": {"kind": "other", "respond_via": ["oob"], "prompt": "80% of the run budget used (1.62 of 2.00 USD)",
                            "budget": {"name": "run", "limit": 2.0, "cost": 1.62, "currency": "USD", "threshold": 0.8}}}),
            json!({"type": "attention.resolved", "id": "N2", "time": "t1", "subject": "N1", "data": {"resolution": "auto"}}),
            json!({"type": "attention.requested", "id": "N3", "run": "R1", "time": "t2", "subject": "budget",
                   "data": {"kind": "other", "budget": {"name": "day", "limit": 2.0, "cost": 2.05, "currency": "USD",
                            "threshold": 1.0, "action": "cancel"}}}),
        ];
        let t = timeline(&events);
        let lines: Vec<(&str, &str, &str)> = t.iter().map(|e| (e.kind, e.name.as_str(), e.status.as_str())).collect();
        assert_eq!(
            lines,
            [("budget", "run budget", "80%"), ("budget", "day budget", "cancel")]
        );
        assert_eq!(t[0].detail["spent"], "1.62/2.00 USD");
        assert_eq!(t[1].detail["spent"], "2.05/2.00 USD");
    }

    /// A refused call and the run a guard ended name the guard, its rule, line and reason.
    #[test]
    fn a_denial_names_its_rule_line_and_reason() {
        let events = vec![
            json!({"type": "run.started", "id": "E1", "run": "R1", "time": "t1", "data": {"trigger": "user"}}),
            json!({"type": "tool.requested", "id": "E2", "run": "R1", "time": "t2", "subject": "run_commands",
                   "data": {"tool": {"name": "run_commands"}}}),
            json!({"type": "tool.denied", "id": "E3", "run": "R1", "time": "t3", "cause": "E2",
                   "data": {"tool": {"name": "run_commands"}, "by": "policy", "rule": "no-push",
                            "cline.policy_line": 12, "cline.policy_reason": "pushes go through review"}}),
            json!({"type": "run.cancelled", "id": "E4", "run": "R1", "time": "t4", "cause": "E3",
                   "data": {"by": "policy", "rule": "no-push"}}),
        ];
        let t = timeline(&events);
        let kinds: Vec<(&str, &str)> = t.iter().map(|e| (e.kind, e.status.as_str())).collect();
        assert_eq!(kinds, [("run", "cancelled"), ("tool", "denied")]);
        let tool = &t[1];
        assert_eq!(tool.detail["by"], "policy");
        assert_eq!(tool.detail["rule"], "no-push");
        assert_eq!(tool.detail["line"], 12);
        assert_eq!(tool.detail["reason"], "pushes go through review");
        assert_eq!(
            (t[0].detail["by"].as_str(), t[0].detail["rule"].as_str()),
            (Some("policy"), Some("no-push"))
        );
    }

    /// A run's tokens and cost read as the header reads them: input without the cache's share,
    /// money as `$0.43` (#32: `input 46 cache read 200` above, `input_tokens=246` below).
    #[test]
    fn a_runs_numbers_have_the_headers_names_and_meanings() {
        let events = vec![
            json!({"type": "run.started", "id": "E1", "run": "R1", "time": "t1", "data": {"trigger": "user"}}),
            json!({"type": "run.finished", "id": "E2", "run": "R1", "time": "t2", "data": {
                "gen_ai.usage.input_tokens": 246, "gen_ai.usage.cache_read.input_tokens": 200,
                "gen_ai.usage.output_tokens": 90, "cost": {"currency": "USD", "total": 0.426}}}),
        ];
        let t = timeline(&events);
        let run = &t[0];
        assert_eq!(run.detail["input"], "46");
        assert_eq!(run.detail["cache_read"], "200");
        assert_eq!(run.detail["output"], "90");
        assert_eq!(run.detail["cost"], "$0.43");
        assert!(!run.detail.contains_key("gen_ai.usage.input_tokens"));
    }

    /// Every family of Event, matched and unmatched, as JSON: the bytes `show --json`, the
    /// dashboard and the fleet print, pinned (field order included).
    #[test]
    fn every_family_prints_the_same_bytes() {
        let events = vec![
            json!({"type": "session.started", "id": "S0", "time": "t0", "data": {"client": {"name": "cline"},
                   "gen_ai.request.model": "m", "cwd": "/w", "label": "l"}}),
            json!({"type": "run.started", "id": "R0", "run": "R1", "time": "t1", "data": {"prompt": "hi"}}),
            json!({"type": "tool.requested", "id": "T0", "run": "R1", "time": "t2", "subject": "read_files",
                   "data": {"tool": {"call_id": "c1"}, "args": {"path": "a"}}}),
            json!({"type": "tool.requested", "id": "T1", "run": "R1", "time": "t2",
                   "data": {"tool": {"name": "write"}, "args_redacted": "[r]"}}),
            json!({"type": "tool.failed", "id": "T2", "run": "R1", "time": "t3", "cause": "T0",
                   "data": {"duration_ms": 4, "error": {"type": "io", "message": "boom"}}}),
            json!({"type": "tool.denied", "id": "T3", "run": "R1", "time": "t3", "cause": "nobody", "subject": "rm"}),
            json!({"type": "tool.completed", "id": "T4", "time": "t3", "data": {"result": {"ok": true}}}),
            json!({"type": "attention.requested", "id": "A0", "run": "R1", "time": "t4", "subject": "write",
                   "data": {"kind": "permission", "respond_via": ["control"], "cline.policy_rule": "p1", "prompt": "may I"}}),
            json!({"type": "attention.answered", "id": "A1", "time": "t5", "subject": "A0", "cause": "CMD1",
                   "data": {"answer": {"option": "deny", "text": "no"}, "via": "control", "by": "me", "cline.policy_rule": "p1"}}),
            json!({"type": "attention.resolved", "id": "A2", "time": "t6", "subject": "A0", "data": {"after_ms": 7, "resolution": "answered"}}),
            json!({"type": "attention.requested", "id": "A3", "time": "t6", "data": {}}),
            json!({"type": "attention.answered", "id": "A4", "time": "t6", "subject": "A3", "data": {"answer": {"option": "later"}}}),
            json!({"type": "attention.timeout", "id": "A5", "time": "t7", "subject": "A3", "data": {"after_ms": 9}}),
            json!({"type": "attention.requested", "id": "A6", "time": "t7", "subject": "x"}),
            json!({"type": "attention.resolved", "id": "A7", "time": "t7", "subject": "A6", "data": {"resolution": "dismissed"}}),
            json!({"type": "attention.requested", "id": "A8", "time": "t7", "subject": "y"}),
            json!({"type": "attention.resolved", "id": "A9", "time": "t7", "subject": "A8"}),
            json!({"type": "attention.answered", "id": "A10", "time": "t7", "subject": "nobody"}),
            json!({"type": "attention.resolved", "id": "A11", "time": "t7", "subject": "nobody"}),
            json!({"type": "attention.requested", "id": "B0", "time": "t8", "subject": "budget", "data": {"budget": {}}}),
            json!({"type": "attention.requested", "id": "B1", "time": "t8", "subject": "budget",
                   "data": {"budget": {"name": "day", "cost": 1.0, "limit": 2.0, "workspace": "/w",
                            "not_cancelled": "not cancelled: the hub tap is off", "action": "notice"}}}),
            json!({"type": "attention.requested", "id": "B2", "time": "t8", "subject": "budget", "data": {"budget": 3}}),
            json!({"type": "control.accepted", "id": "C0", "time": "t9", "cause": "CMD1", "data": {"detail": "d"}}),
            json!({"type": "control.rejected", "id": "C1", "time": "t9", "cause": "CMD1"}),
            json!({"type": "control.rejected", "id": "C2", "time": "t9", "data": {"reason": "r"}}),
            json!({"type": "control.accepted", "id": "C3", "time": "t9"}),
            json!({"type": "x.cline.input.sent", "id": "I0", "time": "t10", "cause": "CMD4", "data": {"delivery": "steer"}}),
            json!({"type": "x.cline.prompt.submitted", "id": "I1", "run": "R1", "time": "t10"}),
            json!({"type": "session.compacted", "id": "K0", "time": "t11", "data": {"strategy": "summary"}}),
            json!({"type": "delegation.subagent.started", "id": "D0", "run": "R1", "time": "t12", "subject": "helper"}),
            json!({"type": "delegation.subagent.stopped", "id": "D1", "run": "R1", "time": "t13"}),
            json!({"type": "run.finished", "id": "R2", "run": "R1", "time": "t14", "data": {"duration_ms": 50,
                   "summary": "done", "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.cache_read.input_tokens": 0,
                   "cost": {"total": 2.5, "currency": "EUR"}}}),
            json!({"type": "run.started", "id": "R3", "run": "R2", "time": "t15", "data": {"trigger": "resume"}}),
            json!({"type": "run.failed", "id": "R4", "run": "R2", "time": "t16",
                   "data": {"error": {"type": "api", "message": "rate limited"}, "reason": "r"}}),
            json!({"type": "run.cancelled", "id": "R5", "run": "R9", "time": "t17", "cause": "CMD5",
                   "data": {"by": "user", "reason": "stop", "duration_ms": 3}}),
            json!({"type": "run.started", "id": "R6", "time": "t18"}),
            json!({"type": "run.cancelled", "id": "R7", "time": "t18", "cause": "CMD6", "data": {"by": "control"}}),
            json!({"type": "progress.status", "id": "P0", "run": "R1", "time": "t19"}),
            json!({"id": "P1", "time": "t19", "data": 5}),
            json!({"type": "session.ended", "id": "S1", "time": "t20", "data": {"reason": "exit", "duration_ms": 99}}),
        ];
        let printed = serde_json::to_string_pretty(&timeline(&events)).unwrap();
        assert_eq!(
            printed,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/timeline.json"))
        );
    }

    /// The families seen once (inputs, compactions, subagents, the rest) are one entry each,
    /// an ack after the first only sets its command's status, and a timeout wins over an answer.
    #[test]
    fn single_events_are_one_entry_each_and_late_ends_complete_theirs() {
        let events = vec![
            json!({"type": "x.cline.input.sent", "id": "I0", "time": "t1", "cause": "CMD1", "data": {"delivery": "queue"}}),
            json!({"type": "x.cline.prompt.submitted", "id": "I1", "time": "t1"}),
            json!({"type": "session.compacted", "id": "K0", "time": "t2", "data": {"strategy": "auto"}}),
            json!({"type": "delegation.subagent.started", "id": "D0", "time": "t3", "subject": "helper"}),
            json!({"type": "delegation.subagent.stopped", "id": "D1", "time": "t4"}),
            json!({"type": "progress.status", "id": "P0", "time": "t5"}),
            json!({"type": "control.accepted", "id": "C0", "time": "t6", "cause": "CMD2"}),
            json!({"type": "control.rejected", "id": "C1", "time": "t6", "cause": "CMD2"}),
            json!({"type": "attention.requested", "id": "A0", "time": "t7", "subject": "write"}),
            json!({"type": "attention.answered", "id": "A1", "time": "t7", "subject": "A0", "data": {"answer": {"option": "approve"}}}),
            json!({"type": "attention.timeout", "id": "A2", "time": "t8", "subject": "A0", "data": {"after_ms": 30000}}),
            json!({"type": "attention.answered", "id": "A3", "time": "t8", "subject": "nothing shown"}),
        ];
        let t = timeline(&events);
        let lines: Vec<(&str, &str, &str)> = t.iter().map(|e| (e.kind, e.name.as_str(), e.status.as_str())).collect();
        assert_eq!(
            lines,
            [
                ("input", "input", "sent"),
                ("input", "prompt", "submitted"),
                ("compaction", "compaction", "compacted"),
                ("delegation", "helper", "started"),
                ("delegation", "subagent", "stopped"),
                ("other", "progress.status", ""),
                ("command", "command", "rejected"),
                ("approval", "write", "timeout"),
            ]
        );
        assert_eq!(
            (t[0].detail["delivery"].as_str(), t[0].detail["command"].as_str()),
            (Some("queue"), Some("CMD1"))
        );
        assert_eq!(t[2].detail["strategy"], "auto");
        assert_eq!(
            (t[7].detail["option"].as_str(), t[7].detail["waited_ms"].as_u64()),
            (Some("approve"), Some(30000))
        );
    }
}
