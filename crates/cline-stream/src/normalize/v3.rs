//! Cline 3.x's records, the `cline --json` stream of the current CLI (3.0.65): `hook_event`,
//! `agent_event` (its nested `event` drives the mapping), `run_result` and `run_aborted`. They
//! are read apart from 2.x's ([`super::legacy`]), as `cline-hooks` keeps its generations apart,
//! so neither generation's reader is lost in the other's.
//!
//! Decisions on records the issue does not name (Cline 3.0.65 emits them):
//! - `run_aborted` → an `aborted` event (reason, message), and the summary's `aborted`; it
//!   follows `run_result` (`finishReason: "aborted"`), so AEP closes the run once, at
//!   `run_result`, and the echo adds no second terminal.
//! - nested `content_update` → consumed: it streams a running tool's output chunks, and the
//!   tool's `content_end` carries the whole output and the verdict.
//! - nested `error` → an `error` event (`name`, `message`, `recoverable`). 3.0.65 raises one
//!   after a failed tool ("1 tool call(s) failed: …", `recoverable: true`); it is reported
//!   as is, because it is what the agent saw.

use super::{Ctx, Fact, Pending, ResolvedCall, RunEnd, Sink};
use crate::event::Body;
use crate::record::{Nested, RunResult};
use crate::summary::Abort;
use crate::StreamError;
use cline_hooks::outcome::{error_text, outcome};
use serde_json::Value;
use std::borrow::Cow;

impl<S: Sink> Ctx<'_, '_, S> {
    /// `hook_event`: lifecycle bookkeeping that the hooks surface reports itself. Only the
    /// subagents are kept track of, so that a `done`'s totals go to the agent they are for.
    pub(super) fn hook(
        &mut self,
        event: Option<Cow<'_, str>>,
        agent: Option<Cow<'_, str>>,
        parent: Option<Cow<'_, str>>,
    ) {
        let parented = parent.as_deref().is_some_and(|p| !p.is_empty());
        if let (Some("agent_start"), Some(agent), true) = (event.as_deref(), agent, parented) {
            self.state.subagents_running.push(agent.into_owned());
        } else if !parented {
            // The lead speaks again: spawn_agent waits for its subagent, so any still
            // listed ended without a `done` (aborted) and the next `done` is the lead's.
            self.state.subagents_running.clear();
        }
    }

    /// `agent_event`: its nested `event` is the record; without one it is unknown.
    pub(super) fn agent_event(&mut self, nested: Option<Nested<'_>>) -> Result<(), StreamError> {
        match nested {
            None => self.unknown("agent_event", "the record has no nested event", None, None),
            Some(mut nested) => self.nested(&mut nested),
        }
    }

    /// `run_result`, the terminal record: the run's totals, model and outcome. Calls still
    /// waiting are reported unfinished first, since the run ended before they did.
    pub(super) fn run_result(&mut self, r: RunResult<'_>) -> Result<(), StreamError> {
        self.flush_pending()?;
        let s = &mut *self.state;
        if r.usage.is_some() {
            s.usage = r.usage;
        }
        s.model = r.model.clone().or(s.model.take());
        s.finish_reason = r.finish_reason.as_deref().map(str::to_string);
        s.iterations = r.iterations.or(s.iterations);
        s.duration_ms = r.duration_ms;
        s.text = r.text.as_deref().map(str::to_string);
        let end = RunEnd {
            finish_reason: s.finish_reason.clone(),
            duration_ms: r.duration_ms,
            usage: s.total_usage(),
            model: r.model,
        };
        self.fact(Fact::RunEnded(&end))
    }

    /// `run_aborted`, the echo after an aborted `run_result` (see the module docs).
    pub(super) fn run_aborted(
        &mut self,
        reason: Option<Cow<'_, str>>,
        message: Option<Cow<'_, str>>,
    ) -> Result<(), StreamError> {
        let abort = Abort {
            reason: reason.map(Cow::into_owned),
            message: message.map(Cow::into_owned),
        };
        self.state.aborted = Some(abort.clone());
        self.fact(Fact::Aborted)?;
        self.event(Body::Aborted {
            reason: abort.reason,
            message: abort.message,
        })
    }

    fn nested(&mut self, n: &mut Nested<'_>) -> Result<(), StreamError> {
        let Some(ty) = n.ty.as_deref() else {
            return self.unknown("agent_event", "the nested event has no type", None, None);
        };
        match ty {
            "iteration_start" => match n.iteration {
                Some(i) => self.fact(Fact::Iteration(i)),
                None => Ok(()),
            },
            // Totals come from run_result; content_update streams output that content_end restates.
            "iteration_end" | "usage" | "content_update" => Ok(()),
            "done" => {
                if let Some(usage) = n.usage {
                    match self.state.subagents_running.pop() {
                        Some(agent) => {
                            self.state.subagents.insert(agent, usage);
                        }
                        None => self.state.usage = Some(usage),
                    }
                }
                Ok(())
            }
            "content_start" => self.content_start(n),
            "content_end" => self.content_end(n),
            "error" => self.nested_error(n),
            other => self.unknown(
                format!("agent_event.{other}"),
                format!("no mapping for nested event type {other:?}"),
                n.tool_name.take().map(Cow::into_owned),
                n.tool_call_id.take().map(Cow::into_owned),
            ),
        }
    }

    /// A tool's input is kept until its `content_end`; a text block's delta is consumed
    /// (3.0.65 streams text as repeated `content_start` records; `content_end` has it whole).
    fn content_start(&mut self, n: &mut Nested<'_>) -> Result<(), StreamError> {
        if n.content_type.as_deref() != Some("tool") {
            return Ok(());
        }
        let Some(call_id) = n.tool_call_id.take().map(Cow::into_owned) else {
            return self.unknown(
                "content_start.tool",
                "a tool content_start without toolCallId cannot be matched with its content_end",
                n.tool_name.take().map(Cow::into_owned),
                None,
            );
        };
        let tool = n.tool_name.take().map(Cow::into_owned);
        let already = self.state.pending.get(&call_id).is_some_and(|p| p.requested);
        let requested = already || tool.is_some();
        if let (Some(name), false) = (&tool, already) {
            self.fact(Fact::ToolRequested {
                call_id: &call_id,
                tool: name,
                input: n.input.as_ref(),
            })?;
        }
        let pending = Pending {
            tool,
            input: n.input.take(),
            requested,
            line: self.line,
            ts: self.ts.map(str::to_string),
        };
        self.state.pending.insert(call_id, pending);
        Ok(())
    }

    fn content_end(&mut self, n: &mut Nested<'_>) -> Result<(), StreamError> {
        match n.content_type.as_deref() {
            Some("text") => self.text_block(n, |text| Body::AgentMessage { text }),
            Some("reasoning" | "thinking") => self.text_block(n, |text| Body::Reasoning { text }),
            Some("tool") => self.tool_end(n),
            Some(other) => self.unknown(
                format!("content_end.{other}"),
                format!("no mapping for content type {other:?}"),
                None,
                None,
            ),
            None => self.unknown("content_end", "the content_end has no contentType", None, None),
        }
    }

    /// `text`, falling back to `content`; an empty block emits nothing.
    fn text_block(&mut self, n: &mut Nested<'_>, body: fn(String) -> Body) -> Result<(), StreamError> {
        let kind = n.content_type.as_deref().unwrap_or_default().to_string();
        let text = match n.text.take().filter(|t| !t.is_empty()) {
            Some(text) => Some(text.into_owned()),
            None => match n.content.take() {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s),
                Some(_) => {
                    return self.unknown(
                        format!("content_end.{kind}"),
                        "the block has no text and a content that is not a string",
                        None,
                        None,
                    )
                }
            },
        };
        match text {
            Some(text) if !text.trim().is_empty() => self.event(body(text)),
            _ => Ok(()),
        }
    }

    /// Resolves a tool call, even when its `content_start` was missed, if the `content_end`
    /// restates toolName and input.
    fn tool_end(&mut self, n: &mut Nested<'_>) -> Result<(), StreamError> {
        let call_id = n.tool_call_id.take().map(Cow::into_owned);
        let pending = call_id.as_ref().and_then(|id| self.state.pending.remove(id));
        let restated_input = n.input.take().filter(|v| !v.is_null());
        let restated_tool = n.tool_name.take().map(Cow::into_owned);
        let (tool, input, requested) = match pending {
            Some(p) => (p.tool.or(restated_tool), p.input.or(restated_input), p.requested),
            None => match (restated_tool, restated_input) {
                (Some(tool), Some(input)) => (Some(tool), Some(input), false),
                (tool, _) => {
                    return self.unknown(
                        "content_end.tool",
                        "the tool call ended without its content_start, and its content_end does not restate toolName and input",
                        tool,
                        call_id,
                    )
                }
            },
        };
        let Some(tool) = tool else {
            return self.unknown(
                "content_end.tool",
                "neither the tool call's content_start nor its content_end names the tool",
                None,
                call_id,
            );
        };
        let end_error = n.error.as_ref().and_then(error_text);
        let outcome = outcome(n.output.as_ref(), end_error.as_deref());
        let call = ResolvedCall {
            call_id,
            tool,
            input,
            output: n.output.take(),
            requested,
            failure: outcome.failure.clone(),
            duration_ms: n.duration_ms,
        };
        self.resolved(call, outcome)
    }

    fn nested_error(&mut self, n: &mut Nested<'_>) -> Result<(), StreamError> {
        let error = n.error.take().unwrap_or(Value::Null);
        let Some(message) = error_text(&error) else {
            return self.unknown("agent_event.error", "the error event carries no error", None, None);
        };
        let name = error.get("name").and_then(Value::as_str).map(str::to_string);
        self.event(Body::Error {
            name,
            message,
            recoverable: n.recoverable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agent, events, run, types};
    use serde_json::Value;

    #[test]
    fn lifecycle_records_are_consumed() {
        assert!(types(&[
            r#"{"type":"hook_event","hookEventName":"agent_start","taskId":"conv_1"}"#,
            &agent(r#"{"type":"iteration_start","iteration":1}"#),
            &agent(r#"{"type":"usage","inputTokens":1,"totalInputTokens":1}"#),
            &agent(r#"{"type":"iteration_end","iteration":1}"#),
            &agent(r#"{"type":"done","reason":"completed"}"#),
            r#"{"type":"run_result","finishReason":"completed"}"#,
        ])
        .is_empty());
    }

    #[test]
    fn a_missing_nested_event_or_type_is_unknown() {
        let e = events(&[
            r#"{"type":"agent_event"}"#,
            &agent("{}"),
            &agent(r#"{"type":"compaction"}"#),
        ]);
        assert_eq!(e[0]["type"], "unknown");
        assert_eq!(e[0]["record"], "agent_event");
        assert_eq!(e[1]["reason"], "the nested event has no type");
        assert_eq!(e[2]["record"], "agent_event.compaction");
    }

    #[test]
    fn text_streams_as_content_start_and_resolves_at_content_end() {
        let e = events(&[
            &agent(r#"{"type":"content_start","contentType":"text","text":"Done: ","accumulated":"Done: "}"#),
            &agent(r#"{"type":"content_start","contentType":"text","text":"hi.","accumulated":"Done: hi."}"#),
            &agent(r#"{"type":"content_end","contentType":"text","text":"Done: hi."}"#),
        ]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0]["type"], "agent_message");
        assert_eq!(e[0]["text"], "Done: hi.");
        assert_eq!(e[0]["line"], 3);
        assert_eq!(e[0]["ts"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn text_falls_back_to_content_and_empty_text_emits_nothing() {
        let e = events(&[
            &agent(r#"{"type":"content_end","contentType":"text","content":"from content"}"#),
            &agent(r#"{"type":"content_end","contentType":"text","text":"","content":"empty text falls back"}"#),
            &agent(r#"{"type":"content_end","contentType":"text","text":""}"#),
            &agent(r#"{"type":"content_end","contentType":"text","text":"  \n"}"#),
            &agent(r#"{"type":"content_end","contentType":"text"}"#),
            &agent(r#"{"type":"content_end","contentType":"reasoning","text":""}"#),
        ]);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0]["text"], "from content");
        assert_eq!(e[1]["text"], "empty text falls back");
    }

    #[test]
    fn reasoning_and_thinking_blocks_are_reasoning_other_blocks_unknown() {
        let e = events(&[
            &agent(r#"{"type":"content_end","contentType":"reasoning","text":"hmm"}"#),
            &agent(r#"{"type":"content_end","contentType":"thinking","content":"ponder"}"#),
            &agent(r#"{"type":"content_end","contentType":"image"}"#),
            &agent(r#"{"type":"content_end","contentType":"text","content":[{"type":"text"}]}"#),
        ]);
        assert_eq!(
            (e[0]["type"].as_str(), e[0]["text"].as_str()),
            (Some("reasoning"), Some("hmm"))
        );
        assert_eq!(
            (e[1]["type"].as_str(), e[1]["text"].as_str()),
            (Some("reasoning"), Some("ponder"))
        );
        assert_eq!(e[2]["record"], "content_end.image");
        assert_eq!(e[3]["type"], "unknown");
    }

    #[test]
    fn a_batch_is_one_event_per_command_with_its_own_verdict() {
        let (c, summary, _) = run(&[
            &agent(
                r#"{"type":"content_start","contentType":"tool","toolName":"run_commands","toolCallId":"c1","input":{"commands":["ok","bad"]}}"#,
            ),
            &agent(r#"{"type":"content_update","contentType":"tool","toolCallId":"c1","update":{"chunk":"x"}}"#),
            &agent(
                r#"{"type":"content_end","contentType":"tool","toolName":"run_commands","toolCallId":"c1","output":[{"success":true},{"success":false,"error":"exit 1"}],"durationMs":9}"#,
            ),
        ]);
        let e: Vec<Value> = c.events.iter().map(|e| serde_json::to_value(e).unwrap()).collect();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0]["target"].as_str(), e[0]["success"].as_bool()),
            (Some("ok"), Some(true))
        );
        assert_eq!(
            (e[1]["target"].as_str(), e[1]["success"].as_bool()),
            (Some("bad"), Some(false))
        );
        assert_eq!(e[1]["error"], "exit 1");
        assert_eq!(e[1]["duration_ms"], 9);
        assert_eq!(e[1]["call_id"], "c1");
        assert_eq!(c.facts, ["requested c1", "resolved c1 ok=false requested=true"]);
        assert_eq!(summary.events["command"], 2);
    }

    #[test]
    fn a_batch_whose_outputs_do_not_line_up_shares_the_call_verdict() {
        let e = events(&[
            &agent(
                r#"{"type":"content_start","contentType":"tool","toolName":"read_files","toolCallId":"r","input":{"files":["a","b"]}}"#,
            ),
            &agent(
                r#"{"type":"content_end","contentType":"tool","toolCallId":"r","output":{"results":[{"success":true}]}}"#,
            ),
        ]);
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|e| e["type"] == "read" && e["success"] == true));
    }

    #[test]
    fn a_patch_is_one_write_per_file() {
        let patch = r#"*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.rs\n@@\n-1\n+2\n*** End Patch"#;
        let start = format!(
            r#"{{"type":"content_start","contentType":"tool","toolName":"apply_patch","toolCallId":"p","input":{{"input":"{patch}"}}}}"#
        );
        let e = events(&[
            &agent(&start),
            &agent(r#"{"type":"content_end","contentType":"tool","toolCallId":"p","output":{"success":true}}"#),
        ]);
        let targets: Vec<&str> = e.iter().map(|e| e["target"].as_str().unwrap()).collect();
        assert_eq!(targets, ["a.txt", "b.rs"]);
        assert!(e.iter().all(|e| e["type"] == "write"));
    }

    #[test]
    fn a_missed_content_start_resolves_from_the_restated_end() {
        let (c, _, _) = run(&[&agent(
            r#"{"type":"content_end","contentType":"tool","toolName":"read_file","toolCallId":"x","input":{"path":"src/main.rs"},"output":"fn main(){}"}"#,
        )]);
        assert_eq!(c.events.len(), 1);
        let e = serde_json::to_value(&c.events[0]).unwrap();
        assert_eq!(
            (e["type"].as_str(), e["target"].as_str()),
            (Some("read"), Some("src/main.rs"))
        );
        assert_eq!(c.facts, ["resolved x ok=true requested=false"]);
        // Without the restated input it cannot be reported as a read.
        let e = events(&[&agent(
            r#"{"type":"content_end","contentType":"tool","toolName":"read_file","toolCallId":"y","output":"…"}"#,
        )]);
        assert_eq!(
            (e[0]["type"].as_str(), e[0]["tool"].as_str()),
            (Some("unknown"), Some("read_file"))
        );
        assert_eq!(e[0]["call_id"], "y");
    }

    #[test]
    fn an_unknown_tool_is_unknown_and_output_error_is_a_failure() {
        let e = events(&[
            &agent(
                r#"{"type":"content_end","contentType":"tool","toolName":"browser_action","toolCallId":"b","input":{"url":"x"}}"#,
            ),
            &agent(
                r#"{"type":"content_start","contentType":"tool","toolName":"run_commands","toolCallId":"c","input":{"commands":["echo"]}}"#,
            ),
            &agent(
                r#"{"type":"content_end","contentType":"tool","toolName":"run_commands","toolCallId":"c","output":{"error":"needs approval"},"error":"{\"error\":\"needs approval\"}","durationMs":1}"#,
            ),
        ]);
        assert_eq!(
            (e[0]["type"].as_str(), e[0]["record"].as_str()),
            (Some("unknown"), Some("tool.browser_action"))
        );
        assert_eq!(
            (e[1]["success"].as_bool(), e[1]["error"].as_str()),
            (Some(false), Some("needs approval"))
        );
    }

    #[test]
    fn nested_errors_and_run_aborted_are_reported() {
        let (c, summary, _) = run(&[
            &agent(r#"{"type":"error","error":{"name":"Error","message":"1 tool call(s) failed"},"recoverable":true}"#),
            &agent(r#"{"type":"error"}"#),
            r#"{"type":"run_result","finishReason":"aborted"}"#,
            r#"{"type":"run_aborted","reason":"external_abort","message":"aborted by another client"}"#,
        ]);
        let e: Vec<Value> = c.events.iter().map(|e| serde_json::to_value(e).unwrap()).collect();
        assert_eq!(e[0]["type"], "error");
        assert_eq!(
            (e[0]["name"].as_str(), e[0]["recoverable"].as_bool()),
            (Some("Error"), Some(true))
        );
        assert_eq!(e[1]["type"], "unknown");
        assert_eq!(
            (e[2]["type"].as_str(), e[2]["reason"].as_str()),
            (Some("aborted"), Some("external_abort"))
        );
        assert_eq!(c.facts, ["ended Some(\"aborted\")", "aborted"]);
        assert_eq!(
            summary.aborted.unwrap().message.as_deref(),
            Some("aborted by another client")
        );
    }

    #[test]
    fn usage_is_the_last_record_carrying_it_never_a_sum() {
        let (_, s, _) = run(&[
            &agent(r#"{"type":"done","usage":{"inputTokens":123,"outputTokens":45,"cacheReadTokens":100}}"#),
            r#"{"type":"run_result","finishReason":"completed","usage":{"inputTokens":246,"outputTokens":90,"cacheReadTokens":200,"cacheWriteTokens":0}}"#,
        ]);
        let t = s.tokens.unwrap();
        assert_eq!((t.uncached_input(), t.cached_input(), t.output()), (Some(46), 200, 90));
        // A stream cut before run_result keeps the last cumulative total it saw.
        let (_, s, _) = run(&[
            &agent(r#"{"type":"done","usage":{"inputTokens":100,"outputTokens":1,"cacheReadTokens":0}}"#),
            &agent(r#"{"type":"done","usage":{"inputTokens":300,"outputTokens":2,"cacheReadTokens":0}}"#),
        ]);
        assert_eq!(s.tokens.unwrap().uncached_input(), Some(300));
    }

    #[test]
    fn a_subagents_own_totals_are_added_to_the_leads() {
        // A real spawn_agent run (CLI 3.0.65): the lead made two calls of 1000 in (800 cached)
        // / 10 out, the subagent one of 200 / 3; run_result's aggregateUsage says 2000 / 20.
        let real: Vec<&str> = include_str!("../../tests/data/json-stream-spawn.jsonl")
            .lines()
            .collect();
        let (_, s, _) = run(&real);
        let t = s.tokens.unwrap();
        assert_eq!((t.total_input(), t.cached_input(), t.output()), (Some(2200), 1600, 23));
        let sub = s.subagents.unwrap();
        assert_eq!(sub.count, 1);
        assert_eq!((sub.tokens.total_input(), sub.tokens.output()), (Some(200), 3));
        // Without subagents there is nothing to say.
        let (_, s, _) = run(&[r#"{"type":"run_result","usage":{"inputTokens":5,"outputTokens":1}}"#]);
        assert!(s.subagents.is_none());
        // A subagent that ended without its `done` does not take the lead's.
        let (_, s, _) = run(&[
            r#"{"type":"hook_event","hookEventName":"agent_start","agentId":"sub","parentAgentId":"lead"}"#,
            r#"{"type":"hook_event","hookEventName":"tool_result","agentId":"lead"}"#,
            &agent(r#"{"type":"done","usage":{"inputTokens":7,"outputTokens":1}}"#),
        ]);
        assert!(s.subagents.is_none());
        assert_eq!(s.tokens.unwrap().total_input(), Some(7));
    }
}
