//! A session's timeline, as `aep-cline show` prints it and the dashboard draws it: one entry per
//! thing that happened, pairs merged (a run with its end, a tool call with its result, an
//! approval with its answer and resolution, a command with its ack). Content (arguments,
//! results, prompts, messages) appears only where the log holds it: the capture level decided
//! that when the Event was written, and nothing here adds any.

use super::summary::short_id;
use aep_core::types::{
    ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT, CONTROL_ACCEPTED, CONTROL_REJECTED,
    DELEGATION_SUBAGENT_STARTED, DELEGATION_SUBAGENT_STOPPED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED,
    SESSION_COMPACTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
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
    let mut out: Vec<Entry> = Vec::new();
    // Where an open pair's entry is: run id, tool.requested id, attention id, command id.
    let mut runs: HashMap<String, usize> = HashMap::new();
    let mut tools: HashMap<String, usize> = HashMap::new();
    let mut asks: HashMap<String, usize> = HashMap::new();
    let mut commands: HashMap<String, usize> = HashMap::new();
    for e in events {
        let ty = s(e, "type").unwrap_or_default();
        let data = e.get("data").unwrap_or(&Value::Null);
        let subject = s(e, "subject");
        let cause = s(e, "cause");
        match ty {
            SESSION_STARTED => {
                let mut entry = Entry::new("session", e, "session", "started");
                entry.detail("client", data.get("client"));
                entry.detail("model", data.get("gen_ai.request.model"));
                entry.content("cwd", data.get("cwd"));
                entry.content("label", data.get("label"));
                out.push(entry);
            }
            SESSION_ENDED => {
                let mut entry = Entry::new("session", e, "session", "ended");
                entry.detail("reason", data.get("reason"));
                entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64);
                out.push(entry);
            }
            RUN_STARTED => {
                let trigger = s(data, "trigger").unwrap_or("user");
                let mut entry = Entry::new("run", e, trigger, "running");
                entry.content("prompt", data.get("prompt"));
                if let Some(run) = s(e, "run") {
                    runs.insert(run.to_string(), out.len());
                }
                out.push(entry);
            }
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => {
                let status = aep_core::types::outcome(ty);
                let at = s(e, "run").and_then(|r| runs.remove(r));
                let entry = match at {
                    Some(i) => &mut out[i],
                    None => {
                        out.push(Entry::new("run", e, "run", status));
                        out.last_mut().expect("just pushed")
                    }
                };
                entry.status = status.to_string();
                entry.detail("ended", e.get("time"));
                entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64).or(entry.duration_ms);
                entry.detail("by", data.get("by"));
                entry.detail("reason", data.get("reason"));
                entry.detail("error_type", data.get("error").and_then(|x| x.get("type")));
                if data.get("by").and_then(Value::as_str) == Some("control") {
                    entry.detail("command", e.get("cause"));
                }
                // The same names and meanings as the session's header (`views::summary`):
                // input is what was not read from the cache, money as everywhere.
                let count = |k: &str| data.get(k).and_then(Value::as_u64);
                let cache_read = count("gen_ai.usage.cache_read.input_tokens");
                if let Some(all) = count("gen_ai.usage.input_tokens") {
                    let fresh = all.saturating_sub(cache_read.unwrap_or(0));
                    entry
                        .detail
                        .insert("input".into(), Value::String(crate::views::numbers::tokens(fresh)));
                }
                if let Some(n) = cache_read.filter(|n| *n > 0) {
                    entry
                        .detail
                        .insert("cache_read".into(), Value::String(crate::views::numbers::tokens(n)));
                }
                if let Some(n) = count("gen_ai.usage.output_tokens") {
                    entry
                        .detail
                        .insert("output".into(), Value::String(crate::views::numbers::tokens(n)));
                }
                if let Some(total) = data.pointer("/cost/total").and_then(Value::as_f64) {
                    let currency = data.pointer("/cost/currency").and_then(Value::as_str).unwrap_or("USD");
                    entry.detail.insert(
                        "cost".into(),
                        Value::String(crate::views::numbers::money(total, currency)),
                    );
                }
                entry.content("summary", data.get("summary"));
                entry.content("message", data.get("error").and_then(|x| x.get("message")));
                if ty == RUN_CANCELLED {
                    entry.content("reason", data.get("reason"));
                    entry.detail.remove("reason");
                }
            }
            TOOL_REQUESTED => {
                let name = data
                    .get("tool")
                    .and_then(|t| s(t, "name"))
                    .or(subject)
                    .unwrap_or("tool");
                let mut entry = Entry::new("tool", e, name, "requested");
                entry.detail("call_id", data.get("tool").and_then(|t| t.get("call_id")));
                entry.content("args", data.get("args").or(data.get("args_redacted")));
                tools.insert(entry.id.clone(), out.len());
                out.push(entry);
            }
            TOOL_COMPLETED | TOOL_FAILED | TOOL_DENIED => {
                let status = aep_core::types::outcome(ty);
                let name = data
                    .get("tool")
                    .and_then(|t| s(t, "name"))
                    .or(subject)
                    .unwrap_or("tool");
                let at = cause.and_then(|c| tools.remove(c));
                let entry = match at {
                    Some(i) => &mut out[i],
                    None => {
                        out.push(Entry::new("tool", e, name, status));
                        out.last_mut().expect("just pushed")
                    }
                };
                entry.status = status.to_string();
                entry.duration_ms = data.get("duration_ms").and_then(Value::as_u64);
                entry.detail("error_type", data.get("error").and_then(|x| x.get("type")));
                entry.content("result", data.get("result").or(data.get("result_redacted")));
                entry.content("message", data.get("error").and_then(|x| x.get("message")));
            }
            // A budget's notice asks nobody (`respond_via: ["oob"]`, resolved `auto` at once):
            // shown as what it is, its numbers in one place.
            ATTENTION_REQUESTED if subject == Some("budget") && data.get("budget").is_some_and(Value::is_object) => {
                let b = &data["budget"];
                let name = format!("{} budget", s(b, "name").unwrap_or("a"));
                let status = match (s(b, "action"), b.get("threshold").and_then(Value::as_f64)) {
                    (Some(action), _) => action.to_string(),
                    (None, Some(t)) => format!("{}%", (t * 100.0).round() as u32),
                    (None, None) => "notice".to_string(),
                };
                let mut entry = Entry::new("budget", e, &name, &status);
                if let (Some(cost), Some(limit)) = (
                    b.get("cost").and_then(Value::as_f64),
                    b.get("limit").and_then(Value::as_f64),
                ) {
                    let currency = s(b, "currency").unwrap_or("USD");
                    entry.detail.insert(
                        "spent".into(),
                        Value::String(format!("{cost:.2}/{limit:.2} {currency}")),
                    );
                }
                entry.detail("workspace", b.get("workspace"));
                entry.detail("not_cancelled", b.get("not_cancelled"));
                out.push(entry);
            }
            ATTENTION_REQUESTED => {
                let mut entry = Entry::new("approval", e, subject.unwrap_or("approval"), "pending");
                let id = entry.id.clone();
                entry.detail.insert("short".into(), Value::String(short_id(&id)));
                entry.detail("kind", data.get("kind"));
                entry.detail("respond_via", data.get("respond_via"));
                entry.detail("policy_rule", data.get("cline.policy_rule"));
                entry.content("prompt", data.get("prompt"));
                asks.insert(id, out.len());
                out.push(entry);
            }
            ATTENTION_ANSWERED => {
                if let Some(&i) = subject.and_then(|x| asks.get(x)) {
                    let entry = &mut out[i];
                    let option = data.get("answer").and_then(|a| a.get("option"));
                    entry.detail("option", option);
                    entry.detail("via", data.get("via"));
                    entry.detail("by", data.get("by"));
                    entry.detail("policy_rule", data.get("cline.policy_rule"));
                    entry.detail("answered_by_command", e.get("cause"));
                    entry.content("answer", data.get("answer").and_then(|a| a.get("text")));
                    entry.status = match option.and_then(Value::as_str) {
                        Some("approve") => "approved".into(),
                        Some("deny") => "denied".into(),
                        _ => "answered".into(),
                    };
                }
            }
            ATTENTION_RESOLVED | ATTENTION_TIMEOUT => {
                if let Some(i) = subject.and_then(|x| asks.remove(x)) {
                    let entry = &mut out[i];
                    let waited = data.get("latency_ms").or(data.get("after_ms"));
                    entry.detail("waited_ms", waited);
                    entry.detail("resolution", data.get("resolution"));
                    if ty == ATTENTION_TIMEOUT {
                        entry.status = "timeout".into();
                    } else if entry.status == "pending" {
                        entry.status = s(data, "resolution").unwrap_or("resolved").to_string();
                    }
                }
            }
            CONTROL_ACCEPTED | CONTROL_REJECTED => {
                let status = aep_core::types::outcome(ty);
                let at = cause.and_then(|c| commands.get(c).copied());
                match at {
                    Some(i) => out[i].status = status.to_string(),
                    None => {
                        let mut entry = Entry::new("command", e, "command", status);
                        entry.detail("command", e.get("cause"));
                        entry.detail("reason", data.get("reason"));
                        entry.content("detail", data.get("detail"));
                        if let Some(c) = cause {
                            commands.insert(c.to_string(), out.len());
                        }
                        out.push(entry);
                    }
                }
            }
            "x.cline.input.sent" => {
                let mut entry = Entry::new("input", e, "input", "sent");
                entry.detail("delivery", data.get("delivery"));
                entry.detail("command", e.get("cause"));
                out.push(entry);
            }
            "x.cline.prompt.submitted" => out.push(Entry::new("input", e, "prompt", "submitted")),
            SESSION_COMPACTED => {
                let mut entry = Entry::new("compaction", e, "compaction", "compacted");
                entry.detail("strategy", data.get("strategy"));
                out.push(entry);
            }
            DELEGATION_SUBAGENT_STARTED | DELEGATION_SUBAGENT_STOPPED => out.push(Entry::new(
                "delegation",
                e,
                subject.unwrap_or("subagent"),
                aep_core::types::outcome(ty),
            )),
            other => out.push(Entry::new("other", e, other, "")),
        }
    }
    out
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
}
