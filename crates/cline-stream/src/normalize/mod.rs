//! The mapping from `cline --json` records to normalized events, and the facts the AEP
//! projection needs beside them. No I/O, no clock: a record goes in, facts come out through a
//! [`Sink`].
//!
//! Cline's two generations print different records, each read in its own module: [`v3`], the
//! current CLI's (`agent_event`, `run_result`, ...), and [`legacy`], 2.x's (flat say/ask,
//! `task_started`, a final `error`). Both are read into the same facts and events; what they
//! share is here: the facts, the normalizer's state and its dispatch on the record's type, a
//! tool call's end told as one event per target, the calls a run left unfinished, and the
//! summary.
//!
//! Some models fold their reasoning into the visible text; then there is no `reasoning`
//! event, by design: the normalizer does not guess at text.

use crate::event::{Body, Event, ToolEvent};
use crate::record::{self, ModelRef, Record};
use crate::summary::{Abort, Lines, ModelSummary, SubagentSummary, Summary};
use crate::tools::{self, ToolKind};
use crate::usage::{ClineUsage, TokenClasses};
use crate::{price, PriceTable, StreamError};
use cline_hooks::outcome::{Failure, Outcome};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

mod legacy;
mod v3;

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
            Record::Hook { event, agent, parent } => ctx.hook(event, agent, parent),
            Record::Agent(nested) => ctx.agent_event(nested)?,
            Record::RunResult(r) => ctx.run_result(r)?,
            Record::RunAborted { reason, message } => ctx.run_aborted(reason, message)?,
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

    pub(super) fn types(lines: &[&str]) -> Vec<String> {
        run(lines)
            .0
            .events
            .iter()
            .map(|e| e.body.type_name().to_string())
            .collect()
    }

    pub(super) fn agent(event: &str) -> String {
        format!(r#"{{"type":"agent_event","ts":"2026-01-01T00:00:00Z","event":{event}}}"#)
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
