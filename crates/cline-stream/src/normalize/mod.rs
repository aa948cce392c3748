//! The mapping from `cline --json` records to normalized events, and the facts the AEP
//! projection needs beside them. No I/O, no clock: a record goes in, facts come out through a
//! [`Sink`].
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
//!
//! Cline 2.x's records (flat say/ask, `task_started`, a final `error`) are read in [`legacy`],
//! into the same facts and events.
//!
//! Some models fold their reasoning into the visible text; then there is no `reasoning`
//! event, by design: the normalizer does not guess at text.

use crate::event::{Body, Event, ToolEvent};
use crate::record::{self, ModelRef, Nested, Record};
use crate::summary::{Abort, Lines, ModelSummary, SubagentSummary, Summary};
use crate::tools::{self, ToolKind};
use crate::usage::{ClineUsage, TokenClasses};
use crate::{price, PriceTable, StreamError};
use cline_hooks::outcome::{error_text, outcome, Failure, Outcome};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

mod legacy;

pub use legacy::LEGACY_USAGE_NOTE;

/// Where a fact came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    pub ts: Option<&'a str>,
    /// The session id captured so far (the first `sessionId`/`session_id`/`id` seen).
    pub session: Option<&'a str>,
}

/// What a record meant, once dispatched and matched with what came before.
#[derive(Debug)]
pub(crate) enum Fact<'a> {
    /// A record of the run arrived (every record but `run_aborted`).
    Activity,
    /// `iteration_start`: the agent loop's step number.
    Iteration(u64),
    /// A tool call's `content_start`.
    ToolRequested {
        call_id: &'a str,
        tool: &'a str,
        input: Option<&'a Value>,
    },
    /// A tool call's `content_end`.
    ToolResolved(&'a ResolvedCall),
    /// A normalized event.
    Event(&'a Event),
    /// `run_result`.
    RunEnded(&'a RunEnd),
    /// `run_aborted`.
    Aborted,
}

/// A finished tool call.
#[derive(Debug)]
pub(crate) struct ResolvedCall {
    pub call_id: Option<String>,
    pub tool: String,
    pub input: Option<Value>,
    pub output: Option<Value>,
    /// Whether [`Fact::ToolRequested`] was sent for it (false when `content_start` was missed).
    pub requested: bool,
    /// `None`: it succeeded.
    pub failure: Option<Failure>,
    pub duration_ms: Option<u64>,
}

/// The terminal `run_result`.
#[derive(Debug)]
pub(crate) struct RunEnd {
    pub finish_reason: Option<String>,
    pub duration_ms: Option<u64>,
    pub usage: Option<ClineUsage>,
    pub model: Option<ModelRef>,
}

/// Receives facts; the event writer and the AEP projection are sinks.
pub(crate) trait Sink {
    fn fact(&mut self, origin: &Origin<'_>, fact: Fact<'_>) -> Result<(), StreamError>;
}

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}; the line was skipped")]
pub struct LineError {
    /// 1-based.
    pub line: u64,
    pub reason: String,
}

/// A tool call seen at `content_start`, waiting for its `content_end`.
#[derive(Debug)]
struct Pending {
    tool: Option<String>,
    input: Option<Value>,
    requested: bool,
    line: u64,
    ts: Option<String>,
}

/// The stateful mapping; one per stream.
#[derive(Debug, Default)]
pub(crate) struct Normalizer {
    pending: HashMap<String, Pending>,
    session: Option<String>,
    /// Last aggregation: the last record carrying usage wins (the lead agent's totals).
    usage: Option<ClineUsage>,
    /// Subagents started and not yet done, innermost last: the next `done` is the last one's.
    subagents_running: Vec<String>,
    /// Each subagent's own totals (its last `done`), by agent id. Cline's `aggregateUsage`
    /// leaves them out, so they are added to the lead's.
    subagents: BTreeMap<String, ClineUsage>,
    model: Option<ModelRef>,
    finish_reason: Option<String>,
    iterations: Option<u64>,
    duration_ms: Option<u64>,
    text: Option<String>,
    aborted: Option<Abort>,
    events: BTreeMap<&'static str, u64>,
    records: u64,
    /// What a Cline 2.x run is read with.
    legacy: legacy::State,
}

impl Normalizer {
    /// Maps one non-empty line. A line that is not a record is an error for the caller to
    /// report; the normalizer's state is untouched by it.
    pub fn push(&mut self, line: u64, text: &str, sink: &mut impl Sink) -> Result<(), PushError> {
        let parsed = record::parse(text).map_err(|e| {
            PushError::Malformed(LineError {
                line,
                reason: e.to_string(),
            })
        })?;
        self.records += 1;
        if self.session.is_none() {
            self.session = parsed.session;
        }
        let ts = parsed.ts;
        if self.legacy.first_ms.is_none() {
            self.legacy.first_ms = ts.as_deref().and_then(epoch_ms);
        }
        let mut ctx = Ctx {
            state: self,
            line,
            ts: ts.as_deref(),
            sink,
        };
        if !matches!(
            parsed.record,
            Record::RunAborted { .. } | Record::TaskStarted { .. } | Record::Error { .. }
        ) {
            ctx.fact(Fact::Activity)?;
        }
        match parsed.record {
            Record::Hook { event, agent, parent } => {
                let parented = parent.as_deref().is_some_and(|p| !p.is_empty());
                if let (Some("agent_start"), Some(agent), true) = (event.as_deref(), agent, parented) {
                    ctx.state.subagents_running.push(agent.into_owned());
                } else if !parented {
                    // The lead speaks again: spawn_agent waits for its subagent, so any still
                    // listed ended without a `done` (aborted) and the next `done` is the lead's.
                    ctx.state.subagents_running.clear();
                }
            }
            Record::Agent(None) => ctx.unknown("agent_event", "the record has no nested event", None, None)?,
            Record::Agent(Some(mut nested)) => ctx.nested(&mut nested)?,
            Record::RunResult(r) => {
                ctx.flush_pending()?;
                let s = &mut *ctx.state;
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
                ctx.fact(Fact::RunEnded(&end))?;
            }
            Record::RunAborted { reason, message } => {
                let abort = Abort {
                    reason: reason.map(Cow::into_owned),
                    message: message.map(Cow::into_owned),
                };
                ctx.state.aborted = Some(abort.clone());
                ctx.fact(Fact::Aborted)?;
                ctx.event(Body::Aborted {
                    reason: abort.reason,
                    message: abort.message,
                })?;
            }
            Record::TaskStarted { task_id } => ctx.task_started(task_id),
            Record::Error { message } => ctx.error_record(message)?,
            Record::Legacy(legacy) => ctx.legacy(legacy)?,
        }
        Ok(())
    }

    /// Ends the stream: tool calls still waiting are reported unfinished, and the summary is
    /// computed.
    pub fn finish(mut self, lines: Lines, prices: &PriceTable, sink: &mut impl Sink) -> Result<Summary, StreamError> {
        let mut ctx = Ctx {
            state: &mut self,
            line: lines.total,
            ts: None,
            sink,
        };
        ctx.flush_pending()?;
        let tokens = self.total_usage().as_ref().map(TokenClasses::from_cline);
        let subagents = (!self.subagents.is_empty()).then(|| SubagentSummary {
            count: self.subagents.len() as u64,
            tokens: TokenClasses::from_cline(&self.subagents.values().fold(ClineUsage::default(), |a, u| sum(&a, u))),
            counted: "each subagent's own totals (its last `done` record, between its parented agent_start and that done) are added to the lead's: Cline's aggregateUsage leaves them out",
        });
        let provider = self.model.as_ref().and_then(|m| m.provider.as_deref());
        let model_id = self.model.as_ref().and_then(|m| m.id.as_deref());
        let (cost, cost_note) = match &tokens {
            None if self.legacy.seen => (None, Some(LEGACY_USAGE_NOTE.to_string())),
            None => (
                None,
                Some("the stream carried no usage totals (no run_result)".to_string()),
            ),
            Some(classes) => match prices.cost(provider, model_id, classes) {
                price::Pricing::Priced(cost) => (Some(cost), None),
                price::Pricing::Unknown(why) => (None, Some(why)),
            },
        };
        let model = self.model.as_ref().map(|m| ModelSummary {
            id: m.id.clone(),
            provider: m.provider.clone(),
            openrouter_id: m.id.as_deref().and_then(|id| prices.resolve(provider, id)),
        });
        Ok(Summary {
            session: self.session,
            model,
            finish_reason: self.finish_reason,
            aborted: self.aborted,
            iterations: self.iterations,
            duration_ms: self.duration_ms,
            text: self.text,
            events: self.events.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            lines: Lines {
                records: self.records,
                ..lines
            },
            retries: self.legacy.retries,
            tokens,
            subagents,
            cost,
            cost_note,
        })
    }

    /// The lead's totals plus every subagent's.
    fn total_usage(&self) -> Option<ClineUsage> {
        let lead = self.usage?;
        Some(self.subagents.values().fold(lead, |a, u| sum(&a, u)))
    }
}

/// Two usage records added, count by count (absent + absent stays absent).
fn sum(a: &ClineUsage, b: &ClineUsage) -> ClineUsage {
    let add = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
    };
    ClineUsage {
        input_tokens: add(a.input_tokens, b.input_tokens),
        output_tokens: add(a.output_tokens, b.output_tokens),
        cache_read_tokens: add(a.cache_read_tokens, b.cache_read_tokens),
        cache_write_tokens: add(a.cache_write_tokens, b.cache_write_tokens),
        total_cost: match (a.total_cost, b.total_cost) {
            (None, None) => None,
            (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
        },
    }
}

/// An RFC 3339 time as epoch milliseconds.
fn epoch_ms(ts: &str) -> Option<i64> {
    aep_core::time::epoch_ms(ts, true)
}

/// Why [`Normalizer::push`] failed.
#[derive(Debug)]
pub(crate) enum PushError {
    Malformed(LineError),
    Sink(StreamError),
}

impl From<StreamError> for PushError {
    fn from(e: StreamError) -> Self {
        PushError::Sink(e)
    }
}

/// One record's mapping in progress.
struct Ctx<'s, 't, S: Sink> {
    state: &'s mut Normalizer,
    line: u64,
    ts: Option<&'t str>,
    sink: &'s mut S,
}

impl<S: Sink> Ctx<'_, '_, S> {
    fn fact(&mut self, fact: Fact<'_>) -> Result<(), StreamError> {
        let origin = Origin {
            ts: self.ts,
            session: self.state.session.as_deref(),
        };
        self.sink.fact(&origin, fact)
    }

    fn event(&mut self, body: Body) -> Result<(), StreamError> {
        self.event_at(self.line, self.ts.map(str::to_string), body)
    }

    fn event_at(&mut self, line: u64, ts: Option<String>, body: Body) -> Result<(), StreamError> {
        *self.state.events.entry(body.type_name()).or_default() += 1;
        let event = Event { line, ts, body };
        self.fact(Fact::Event(&event))
    }

    fn unknown(
        &mut self,
        record: impl Into<String>,
        reason: impl Into<String>,
        tool: Option<String>,
        call_id: Option<String>,
    ) -> Result<(), StreamError> {
        self.event(Body::Unknown {
            record: record.into(),
            reason: reason.into(),
            tool,
            call_id,
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

    /// A tool call's end, told as one tool event per target (a batch's items each with its
    /// own verdict when the output gives them).
    fn resolved(&mut self, call: ResolvedCall, outcome: Outcome) -> Result<(), StreamError> {
        self.fact(Fact::ToolResolved(&call))?;
        let Some(kind) = ToolKind::of(&call.tool) else {
            return self.unknown(
                format!("tool.{}", call.tool),
                format!("no normalized kind for tool {:?}", call.tool),
                Some(call.tool),
                call.call_id,
            );
        };
        let targets = tools::targets(kind, &call.tool, call.input.as_ref());
        let per_item = outcome.items.as_ref().filter(|items| items.len() == targets.len());
        for (i, target) in targets.into_iter().enumerate() {
            let failure = match per_item {
                Some(items) => &items[i],
                None => &outcome.failure,
            };
            let (success, error) = (failure.is_none(), failure.as_ref().and_then(|f| f.message.clone()));
            self.event(Body::Tool(ToolEvent {
                kind,
                tool: call.tool.clone(),
                call_id: call.call_id.clone(),
                target,
                success: Some(success),
                error,
                duration_ms: call.duration_ms,
            }))?;
        }
        Ok(())
    }

    /// Tool calls that never ended (the run or the stream ended first): reported with
    /// `success: null`, at the line of their `content_start`.
    fn flush_pending(&mut self) -> Result<(), StreamError> {
        let mut waiting: Vec<(String, Pending)> = self.state.pending.drain().collect();
        waiting.sort_by_key(|(_, p)| p.line);
        for (call_id, p) in waiting {
            let Some(tool) = p.tool else {
                self.event_at(
                    p.line,
                    p.ts,
                    Body::Unknown {
                        record: "content_start.tool".into(),
                        reason: "the tool call never ended and never named its tool".into(),
                        tool: None,
                        call_id: Some(call_id),
                    },
                )?;
                continue;
            };
            let Some(kind) = ToolKind::of(&tool) else {
                self.event_at(
                    p.line,
                    p.ts,
                    Body::Unknown {
                        record: format!("tool.{tool}"),
                        reason: format!("no normalized kind for tool {tool:?} (the call never ended)"),
                        tool: Some(tool),
                        call_id: Some(call_id),
                    },
                )?;
                continue;
            };
            for target in tools::targets(kind, &tool, p.input.as_ref()) {
                let body = Body::Tool(ToolEvent {
                    kind,
                    tool: tool.clone(),
                    call_id: Some(call_id.clone()),
                    target,
                    success: None,
                    error: None,
                    duration_ms: None,
                });
                self.event_at(p.line, p.ts.clone(), body)?;
            }
        }
        Ok(())
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
    use super::*;

    /// Collects normalized events and the facts' names.
    #[derive(Default)]
    pub(super) struct Collect {
        pub(super) events: Vec<Event>,
        pub(super) facts: Vec<String>,
    }

    impl Sink for Collect {
        fn fact(&mut self, _: &Origin<'_>, fact: Fact<'_>) -> Result<(), StreamError> {
            match fact {
                Fact::Event(e) => self.events.push(e.clone()),
                Fact::Activity => {}
                Fact::Iteration(i) => self.facts.push(format!("iteration {i}")),
                Fact::ToolRequested { call_id, .. } => self.facts.push(format!("requested {call_id}")),
                Fact::ToolResolved(c) => self.facts.push(format!(
                    "resolved {} ok={} requested={}",
                    c.call_id.as_deref().unwrap_or("-"),
                    c.failure.is_none(),
                    c.requested
                )),
                Fact::RunEnded(r) => self.facts.push(format!("ended {:?}", r.finish_reason)),
                Fact::Aborted => self.facts.push("aborted".into()),
            }
            Ok(())
        }
    }

    pub(super) fn run(lines: &[&str]) -> (Collect, Summary, Vec<LineError>) {
        let mut n = Normalizer::default();
        let mut sink = Collect::default();
        let mut malformed = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            match n.push(i as u64 + 1, l, &mut sink) {
                Ok(()) => {}
                Err(PushError::Malformed(e)) => malformed.push(e),
                Err(PushError::Sink(e)) => panic!("{e}"),
            }
        }
        let lines = Lines {
            total: lines.len() as u64,
            records: 0,
            malformed: malformed.len() as u64,
        };
        let summary = n.finish(lines, &PriceTable::bundled(), &mut sink).unwrap();
        (sink, summary, malformed)
    }

    pub(super) fn events(lines: &[&str]) -> Vec<Value> {
        run(lines)
            .0
            .events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect()
    }

    fn types(lines: &[&str]) -> Vec<String> {
        run(lines)
            .0
            .events
            .iter()
            .map(|e| e.body.type_name().to_string())
            .collect()
    }

    fn agent(event: &str) -> String {
        format!(r#"{{"type":"agent_event","ts":"2026-01-01T00:00:00Z","event":{event}}}"#)
    }

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
    fn a_tool_that_never_ends_is_reported_unfinished() {
        let e = events(&[
            &agent(
                r#"{"type":"content_start","contentType":"tool","toolName":"execute_command","toolCallId":"c","input":{"command":"sleep 100"}}"#,
            ),
            r#"{"type":"run_result","finishReason":"aborted"}"#,
        ]);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0]["target"], "sleep 100");
        assert_eq!(e[0]["success"], Value::Null);
        assert_eq!(e[0]["line"], 1);
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
    fn malformed_lines_are_errors_with_line_numbers_and_the_stream_goes_on() {
        let (c, summary, bad) = run(&[
            "{not json",
            &agent(r#"{"type":"content_end","contentType":"text","text":"still here"}"#),
            r#"{"type":"agent_event","event":{"type":"content_end","durationMs":"slow"}}"#,
            "[]",
        ]);
        assert_eq!(c.events.len(), 1);
        assert_eq!(bad.iter().map(|e| e.line).collect::<Vec<_>>(), [1, 3, 4]);
        assert!(
            bad[0].to_string().starts_with("line 1: key must be a string"),
            "{}",
            bad[0]
        );
        assert!(bad[0].to_string().ends_with("the line was skipped"));
        assert!(bad[1].reason.contains("invalid type"), "{}", bad[1].reason);
        assert_eq!((summary.lines.records, summary.lines.malformed), (1, 3));
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

    #[test]
    fn an_unpriced_model_has_a_null_cost_and_a_note() {
        let (_, s, _) = run(&[
            r#"{"type":"run_result","finishReason":"completed","usage":{"inputTokens":246,"outputTokens":90,"cacheReadTokens":200},"model":{"id":"fake-model","provider":"openai-compatible"}}"#,
        ]);
        assert!(s.cost.is_none());
        assert!(s.cost_note.unwrap().contains("fake-model"));
        let json = serde_json::to_value(Summary {
            cost: None,
            ..run(&[]).1
        })
        .unwrap();
        assert_eq!(json["cost"], Value::Null);
        let (_, s, _) = run(&[
            r#"{"type":"run_result","usage":{"inputTokens":1000000,"outputTokens":0},"model":{"id":"claude-sonnet-4-20250514","provider":"anthropic"}}"#,
        ]);
        assert_eq!(s.cost.unwrap().total, 3.0);
        assert_eq!(
            s.model.unwrap().openrouter_id.as_deref(),
            Some("anthropic/claude-sonnet-4")
        );
    }

    #[test]
    fn the_first_session_id_is_kept_and_task_ids_are_ignored() {
        let (_, s, _) = run(&[
            r#"{"type":"hook_event","taskId":"conv_1"}"#,
            r#"{"type":"hook_event","sessionId":"1700_abc"}"#,
            r#"{"type":"hook_event","sessionId":"other"}"#,
        ]);
        assert_eq!(s.session.as_deref(), Some("1700_abc"));
    }
}
