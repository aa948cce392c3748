//! Recovery: the tracker's state rebuilt from the events a session already logged.
//!
//! Apart from planning because it reads the other way round (finished Events in, state out,
//! nothing planned), so a daemon restart continues runs instead of orphaning them.

use super::{SessionTracker, AGENT_EXTENSION};
use crate::timestamp::epoch_ms;
use aep_core::types::{
    DELEGATION_SUBAGENT_STARTED, DELEGATION_SUBAGENT_STOPPED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED,
    SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use serde_json::Value;

impl SessionTracker {
    /// Replays one logged event (in log order) into the state.
    pub fn recover(&mut self, event: &Value) {
        let s = |k: &str| event.get(k).and_then(Value::as_str);
        let ty = s("type").unwrap_or("");
        let id = s("id").unwrap_or("").to_string();
        match ty {
            SESSION_STARTED => {
                self.started = true;
                // Logged at `redacted` and above only; redaction writes the home as `~`, which
                // is no folder a rule can match.
                if let Some(cwd) = event
                    .pointer("/data/cwd")
                    .and_then(Value::as_str)
                    .filter(|c| c.starts_with('/'))
                {
                    self.workspace = Some(cwd.to_string());
                }
            }
            SESSION_ENDED => {
                self.started = true;
                self.ended = true;
            }
            RUN_STARTED => {
                self.started = true;
                // No `clineagent`: the payloads named no agent (Cline 2.x, the fixtures).
                if let (agent, Some(run)) = (s(AGENT_EXTENSION).unwrap_or(""), s("run")) {
                    self.start_run(agent, run.to_string(), id, s("time").and_then(epoch_ms));
                }
            }
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => {
                if let Some(run) = s("run") {
                    let agent = self.runs.iter().find(|(_, r)| r.id == run).map(|(a, _)| a.clone());
                    if let Some(agent) = agent {
                        self.runs.remove(&agent);
                        self.closed.insert(agent);
                    }
                }
            }
            TOOL_REQUESTED => match event.pointer("/data/tool/call_id").and_then(Value::as_str) {
                Some(call) => {
                    self.tools.insert(call.to_string(), id);
                }
                None => {
                    if let Some(tool) = tool_name(event) {
                        self.push_by_name(tool.to_string(), id);
                    }
                }
            },
            TOOL_COMPLETED | TOOL_FAILED | TOOL_DENIED => {
                match event.pointer("/data/tool/call_id").and_then(Value::as_str) {
                    Some(call) => {
                        self.tools.remove(call);
                        // A denied call's result, when Cline reports it after a restart, is no
                        // second terminal.
                        match ty {
                            TOOL_DENIED => self.denied.insert(call.to_string()),
                            _ => self.denied.remove(call).then_some(String::new()),
                        };
                    }
                    None => {
                        if let Some(tool) = tool_name(event) {
                            self.pop_by_name(tool);
                        }
                    }
                }
            }
            DELEGATION_SUBAGENT_STARTED => {
                if let Some(child) = s("subject") {
                    self.delegations.insert(child.to_string(), id);
                }
            }
            DELEGATION_SUBAGENT_STOPPED => {
                if let Some(child) = s("subject") {
                    self.delegations.remove(child);
                }
            }
            _ => {}
        }
    }
}

/// A logged tool event's tool name: `data.tool.name`, else its `subject` (at capture `none`).
fn tool_name(event: &Value) -> Option<&str> {
    event
        .pointer("/data/tool/name")
        .or_else(|| event.get("subject"))
        .and_then(Value::as_str)
}
