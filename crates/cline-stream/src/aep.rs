//! `--aep`: the same run as AEP 0.1 events, for users who run Cline headless without hooks.
//!
//! | stream                                    | AEP                                           |
//! |-------------------------------------------|-----------------------------------------------|
//! | first record of a run                     | `run.started {trigger: "user"}`               |
//! | `iteration_start`                         | `step` of the events that follow              |
//! | tool `content_start`                      | `tool.requested` (subject = tool name)        |
//! | tool `content_end`, success               | `tool.completed` (cause = `tool.requested`)   |
//! | tool `content_end`, failure               | `tool.failed {error: {type: <kind>}}`         |
//! | nested `error`, legacy error              | `error.raised {error: {type}, fatal}`         |
//! | `run_result` `completed`                  | `run.finished` with `gen_ai.usage.*`, `cost`  |
//! | `run_result` `aborted`                    | `run.cancelled` (usage and cost too)          |
//! | `run_result` any other reason             | `run.failed {reason}`                         |
//! | `run_aborted` with no terminal yet        | `run.cancelled`                               |
//!
//! Capture is `metadata` (AEP-0003 §9.1 default): ids, names, digests, counts; no free text
//! (AEP-0001 §8.2). Messages and reasoning have no AEP 0.1 type (the `message.*` sub-profile is
//! reserved), so they are not projected. A tool call is one AEP tool call however many commands
//! or files it names: AEP's tool identity is the call (`tool.call_id`).
//!
//! The stream is its own emitter, apart from the hooks daemon: its `source` is the session's
//! with `/stream` appended, so when the caller puts it on a session the daemon also emits
//! (`--session`), the two streams stay distinct sessions that share a name, each with its own
//! positions (AEP-0001 §5.2: consumers and validators key sessions by `(source, session)`).
//!
//! Cline 3.0.65 writes no session id into the stream, so the session is the first
//! `sessionId`/`session_id`/`id` seen, else a fresh ULID for this stream. `taskId` is Cline's
//! conversation id, not the session (see the cline README). `gen_ai.usage.input_tokens` counts
//! every input token once (uncached + cached, OpenTelemetry's meaning); the cache classes ride
//! beside it as `gen_ai.usage.cache_read.input_tokens` and
//! `gen_ai.usage.cache_creation.input_tokens`.

use crate::normalize::{Fact, Origin, ResolvedCall, RunEnd};
use crate::price::Pricing;
use crate::usage::TokenClasses;
use crate::{Body, PriceTable};
use aep_core::sequence::{MemorySequencer, Sequencer};
use aep_core::types::{
    ERROR_RAISED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED, TOOL_COMPLETED, TOOL_FAILED, TOOL_REQUESTED,
};
use aep_core::{digest::digest, id, source, Capture, Envelope, EnvelopeError};
use regex::Regex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::LazyLock;

/// The `agent` of every event (AEP-0001 §5 attribute 7).
const AGENT: &str = "cline";
/// What follows the session in this emitter's `source`, setting it apart from the daemon's.
pub const SOURCE_SUFFIX: &str = "/stream";

/// An RFC 3339 date-time with a zone, as the envelope's `time` requires (AEP-0001 §5).
static RFC3339: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$").expect("static regex")
});

/// The run in progress.
struct OpenRun {
    id: String,
    /// The `run.started` event's id: the terminal's `cause` (AEP-0002 §2).
    started: String,
}

/// Turns facts into envelopes; one per stream.
pub(crate) struct Projector<'p> {
    host: String,
    prices: &'p PriceTable,
    session: Option<String>,
    sequencer: MemorySequencer,
    run: Option<OpenRun>,
    step: Option<u64>,
    /// `tool.requested` event id by call id, for the completion's `cause`.
    requested: HashMap<String, String>,
    last_time: Option<String>,
}

impl<'p> Projector<'p> {
    pub fn new(host: &str, prices: &'p PriceTable, session: Option<String>) -> Self {
        Projector {
            host: host.to_string(),
            prices,
            session,
            sequencer: MemorySequencer::new(0),
            run: None,
            step: None,
            requested: HashMap::new(),
            last_time: None,
        }
    }

    /// Appends the envelopes `fact` means to `out`.
    pub fn project(
        &mut self,
        origin: &Origin<'_>,
        fact: Fact<'_>,
        out: &mut Vec<Envelope>,
    ) -> Result<(), EnvelopeError> {
        match fact {
            Fact::Activity => self.ensure_run(origin, out),
            Fact::Iteration(i) => {
                self.ensure_run(origin, out)?;
                self.step = Some(i);
                Ok(())
            }
            Fact::ToolRequested { call_id, tool, input } => {
                self.ensure_run(origin, out)?;
                self.tool_requested(origin, Some(call_id), tool, input, out)
            }
            Fact::ToolResolved(call) => {
                self.ensure_run(origin, out)?;
                self.tool_resolved(origin, call, out)
            }
            Fact::Event(event) => match &event.body {
                Body::Error { name, recoverable, .. } => {
                    self.ensure_run(origin, out)?;
                    let mut data = json!({"error": {"type": name.as_deref().unwrap_or("Error")}});
                    if let Some(recoverable) = recoverable {
                        data["fatal"] = Value::Bool(!recoverable);
                    }
                    self.emit(origin, ERROR_RAISED, None, None, data, out).map(drop)
                }
                _ => Ok(()),
            },
            Fact::RunEnded(end) => {
                self.ensure_run(origin, out)?;
                self.run_ended(origin, end, out)
            }
            // 3.0.65 writes run_aborted after run_result: the run is closed already.
            Fact::Aborted => match &self.run {
                Some(_) => self.terminal(origin, RUN_CANCELLED, json!({}), out),
                None => Ok(()),
            },
        }
    }

    fn ensure_run(&mut self, origin: &Origin<'_>, out: &mut Vec<Envelope>) -> Result<(), EnvelopeError> {
        if self.run.is_some() {
            return Ok(());
        }
        let run = id::new_id();
        self.run = Some(OpenRun {
            id: run,
            started: String::new(),
        });
        let started = self.emit(origin, RUN_STARTED, None, None, json!({"trigger": "user"}), out)?;
        if let Some(run) = &mut self.run {
            run.started = started;
        }
        Ok(())
    }

    fn tool_requested(
        &mut self,
        origin: &Origin<'_>,
        call_id: Option<&str>,
        tool: &str,
        input: Option<&Value>,
        out: &mut Vec<Envelope>,
    ) -> Result<(), EnvelopeError> {
        let mut data = json!({"tool": tool_ref(tool, call_id)});
        if let Some(input) = input {
            data["args_digest"] = Value::String(digest(input));
        }
        let id = self.emit(origin, TOOL_REQUESTED, Some(tool), None, data, out)?;
        if let Some(call_id) = call_id {
            self.requested.insert(call_id.to_string(), id);
        }
        Ok(())
    }

    fn tool_resolved(
        &mut self,
        origin: &Origin<'_>,
        call: &ResolvedCall,
        out: &mut Vec<Envelope>,
    ) -> Result<(), EnvelopeError> {
        let call_id = call.call_id.as_deref();
        if !call.requested {
            // The content_start was missed: its content_end restated the input.
            self.tool_requested(origin, call_id, &call.tool, call.input.as_ref(), out)?;
        }
        let cause = call_id.and_then(|c| self.requested.remove(c));
        let mut data = json!({"tool": tool_ref(&call.tool, call_id)});
        if let Some(ms) = call.duration_ms {
            data["duration_ms"] = json!(ms);
        }
        let ty = match &call.failure {
            None => {
                if let Some(output) = call.output.as_ref().filter(|o| !o.is_null()) {
                    data["result_digest"] = Value::String(digest(output));
                }
                TOOL_COMPLETED
            }
            Some(failure) => {
                data["error"] = json!({"type": failure.kind.as_str()});
                TOOL_FAILED
            }
        };
        self.emit(origin, ty, Some(&call.tool), cause, data, out).map(drop)
    }

    fn run_ended(&mut self, origin: &Origin<'_>, end: &RunEnd, out: &mut Vec<Envelope>) -> Result<(), EnvelopeError> {
        let mut data = Map::new();
        if let Some(ms) = end.duration_ms {
            data.insert("duration_ms".into(), json!(ms));
        }
        if let Some(usage) = &end.usage {
            let classes = TokenClasses::from_cline(usage);
            if let Some(input) = classes.total_input() {
                data.insert("gen_ai.usage.input_tokens".into(), json!(input));
            }
            data.insert("gen_ai.usage.output_tokens".into(), json!(classes.output()));
            data.insert(
                "gen_ai.usage.cache_read.input_tokens".into(),
                json!(classes.cached_input()),
            );
            data.insert(
                "gen_ai.usage.cache_creation.input_tokens".into(),
                json!(classes.cache_creation()),
            );
            let model = end.model.as_ref();
            let provider = model.and_then(|m| m.provider.as_deref());
            if let Pricing::Priced(cost) = self
                .prices
                .cost(provider, model.and_then(|m| m.id.as_deref()), &classes)
            {
                data.insert(
                    "cost".into(),
                    json!({
                        "currency": cost.currency,
                        "total": cost.total,
                        "prompt": cost.uncached_input,
                        "cache": cost.cached_input,
                        "completion": cost.output,
                    }),
                );
            }
        }
        let ty = match end.finish_reason.as_deref() {
            None | Some("completed") => RUN_FINISHED,
            Some("aborted" | "cancelled") => RUN_CANCELLED,
            Some(reason) => {
                data.insert("reason".into(), json!(reason));
                data.insert("error".into(), json!({"type": reason}));
                RUN_FAILED
            }
        };
        self.terminal(origin, ty, Value::Object(data), out)
    }

    /// The run's one terminal (AEP-0002 §2), cause-linked to its `run.started`.
    fn terminal(
        &mut self,
        origin: &Origin<'_>,
        ty: &str,
        data: Value,
        out: &mut Vec<Envelope>,
    ) -> Result<(), EnvelopeError> {
        let cause = self.run.as_ref().map(|r| r.started.clone()).filter(|s| !s.is_empty());
        self.emit(origin, ty, None, cause, data, out)?;
        self.run = None;
        self.step = None;
        self.requested.clear();
        Ok(())
    }

    /// Builds, checks and appends one session-scoped event; returns its id.
    fn emit(
        &mut self,
        origin: &Origin<'_>,
        ty: &str,
        subject: Option<&str>,
        cause: Option<String>,
        data: Value,
        out: &mut Vec<Envelope>,
    ) -> Result<String, EnvelopeError> {
        let session = self
            .session
            .get_or_insert_with(|| origin.session.map(str::to_string).unwrap_or_else(id::new_id))
            .clone();
        // The records' own times, never earlier than the last one (AEP-0001 §5: a stream's
        // times do not run backwards); the processing time only when no record had a time yet.
        let time = match (origin.ts.filter(|ts| RFC3339.is_match(ts)), &self.last_time) {
            (Some(ts), Some(last)) if before(ts, last) => last.clone(),
            (Some(ts), _) => ts.to_string(),
            (None, Some(last)) => last.clone(),
            (None, None) => id::now_rfc3339(),
        };
        self.last_time = Some(time.clone());
        let event_id = id::new_id();
        let mut e = Envelope::new(
            event_id.clone(),
            ty,
            time,
            format!("{}{SOURCE_SUFFIX}", source::session_source(&self.host, AGENT, &session)),
            AGENT,
        )?;
        let position = self.sequencer.next(&session);
        e.session = Some(session);
        e.seq = Some(position.seq);
        e.epoch = (position.epoch > 0).then_some(position.epoch);
        e.run = self.run.as_ref().map(|r| r.id.clone());
        e.step = self.step.map(|s| s.to_string());
        e.subject = subject.map(str::to_string);
        e.cause = cause;
        e.capture = Some(Capture::Metadata);
        e.data = match data {
            Value::Object(map) => Some(map),
            _ => None,
        };
        e.check()?;
        out.push(e);
        Ok(event_id)
    }
}

/// Whether RFC 3339 time `a` is before `b` (either unreadable: no).
fn before(a: &str, b: &str) -> bool {
    match (aep_core::time::parse(a, true), aep_core::time::parse(b, true)) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

fn tool_ref(name: &str, call_id: Option<&str>) -> Value {
    match call_id {
        Some(call_id) => json!({"name": name, "call_id": call_id}),
        None => json!({"name": name}),
    }
}

#[cfg(test)]
mod tests {
    use crate::{run, Format, PriceTable};
    use aep_core::validate::{validate_event, StreamValidator};
    use serde_json::Value;

    fn aep(stream: &str) -> Vec<Value> {
        aep_on(stream, None)
    }

    fn aep_on(stream: &str, session: Option<&str>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        let prices = PriceTable::bundled();
        let format = Format::Aep {
            host: "test-host".into(),
            session: session.map(str::to_string),
        };
        run(stream.as_bytes(), &mut out, &format, &prices, &mut |e| {
            bad.push(e.clone())
        })
        .unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        let events: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut validator = StreamValidator::new();
        for e in &events {
            validate_event(e).unwrap_or_else(|v| panic!("{v}: {e}"));
            validator.push(e).unwrap_or_else(|v| panic!("{v}: {e}"));
        }
        events
    }

    fn types(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    const REAL: &str = include_str!("../tests/data/json-stream.jsonl");
    const CANCEL: &str = include_str!("../tests/data/json-stream-hook-cancel.jsonl");
    const DENIED: &str = include_str!("../tests/data/json-stream-autoapprove-false.jsonl");

    #[test]
    fn a_real_run_projects_to_a_cause_linked_sequenced_run() {
        let e = aep(REAL);
        assert_eq!(
            types(&e),
            ["run.started", "tool.requested", "tool.completed", "run.finished"]
        );
        let session = e[0]["session"].as_str().unwrap();
        assert_eq!(session.len(), 26, "a minted ULID: the stream carries no session id");
        for (i, ev) in e.iter().enumerate() {
            assert_eq!(ev["seq"], i as u64);
            assert_eq!(ev["session"], session);
            assert_eq!(ev["run"], e[0]["run"]);
            assert_eq!(ev["agent"], "cline");
            assert_eq!(ev["capture"], "metadata");
            assert_eq!(
                ev["source"],
                format!("aep://test-host/agent/cline/session/{session}/stream")
            );
        }
        assert_eq!(e[0]["time"], "2026-11-30T02:36:39.893Z");
        assert_eq!(e[0]["data"], serde_json::json!({"trigger": "user"}));
        assert_eq!(e[1]["subject"], "run_commands");
        assert_eq!(e[1]["step"], "1");
        assert_eq!(
            e[1]["data"]["tool"],
            serde_json::json!({"name": "run_commands", "call_id": "call_eee56f574f"})
        );
        assert_eq!(
            e[1]["data"]["args_digest"],
            aep_core::digest::digest(&serde_json::json!({"commands": ["echo hi"]}))
        );
        assert_eq!(e[2]["cause"], e[1]["id"]);
        assert_eq!(e[2]["data"]["duration_ms"], 57);
        assert!(e[2]["data"]["result_digest"].is_string());
        let finished = &e[3]["data"];
        assert_eq!(e[3]["cause"], e[0]["id"]);
        assert_eq!(finished["duration_ms"], 397);
        assert_eq!(finished["gen_ai.usage.input_tokens"], 246);
        assert_eq!(finished["gen_ai.usage.cache_read.input_tokens"], 200);
        assert_eq!(finished["gen_ai.usage.output_tokens"], 90);
        assert!(
            finished.get("cost").is_none(),
            "fake-model has no price: cost is absent, not 0"
        );
    }

    #[test]
    fn an_aborted_run_has_one_terminal() {
        let e = aep(CANCEL);
        assert_eq!(types(&e), ["run.started", "run.cancelled"]);
    }

    #[test]
    fn a_denied_tool_fails_and_the_nested_error_is_raised() {
        let e = aep(DENIED);
        assert_eq!(
            types(&e),
            [
                "run.started",
                "tool.requested",
                "tool.failed",
                "error.raised",
                "run.finished"
            ]
        );
        assert_eq!(
            e[2]["data"]["error"]["type"], "denied",
            "an approval a non-TTY cannot give, told apart from a failing tool"
        );
        assert_eq!(
            e[3]["data"],
            serde_json::json!({"error": {"type": "Error"}, "fatal": false})
        );
        assert_eq!(e[3]["step"], "1");
    }

    /// A tool call of the stream, as its `content_start` and `content_end`.
    fn tool_call(id: &str, tool: &str, input: &Value, end: Value) -> String {
        let start = serde_json::json!({"type": "agent_event", "event": {"type": "content_start", "contentType": "tool", "toolName": tool, "toolCallId": id, "input": input}});
        let mut end_event =
            serde_json::json!({"type": "content_end", "contentType": "tool", "toolName": tool, "toolCallId": id});
        end_event
            .as_object_mut()
            .unwrap()
            .extend(end.as_object().unwrap().clone());
        let end = serde_json::json!({"type": "agent_event", "event": end_event});
        format!("{start}\n{end}\n")
    }

    #[test]
    fn a_failure_the_output_reports_has_its_kind() {
        // content_end outputs of real Cline 3.0.65 runs (the abort's is the hub's tool.finished).
        for (output, kind) in [
            (
                r#"[{"query":"echo out; exit 3","result":"[Command exited with code 3]\nout\n","error":"Command exited with code 3","success":false}]"#,
                "exit_code",
            ),
            (
                r#"[{"query":"sleep 20; echo never","result":"","error":"Command failed: Command was aborted","success":false}]"#,
                "aborted",
            ),
            (
                r#"{"query":"edit:/home/dev/proj/notes.txt","result":"","error":"Editor operation failed: No replacement performed: text not found in /home/dev/proj/notes.txt.","success":false}"#,
                "tool_error",
            ),
            (
                r#"{"error":"denied by probe -- NOT a tool or system failure. Clarify with user before proceeding."}"#,
                "denied",
            ),
        ] {
            let output: Value = serde_json::from_str(output).unwrap();
            let e = aep(&tool_call(
                "c1",
                "run_commands",
                &serde_json::json!({}),
                serde_json::json!({"output": output}),
            ));
            assert_eq!(types(&e), ["run.started", "tool.requested", "tool.failed"], "{kind}");
            assert_eq!(
                e[2]["data"]["error"],
                serde_json::json!({"type": kind}),
                "no message at metadata"
            );
        }
    }

    /// One rule for both lanes: the same real call is the same event from the hooks and the
    /// stream.
    #[test]
    fn the_hooks_and_the_stream_agree_on_a_real_call() {
        use aep_core::redact::{RedactOptions, Redactor};
        use aep_core::{Capture, CapturePolicy};
        use cline_hooks::mapping::{map_hook, MapContext};
        use cline_hooks::HookPayload;
        let policy = CapturePolicy::new(Capture::Metadata);
        let redactor = Redactor::new(RedactOptions::default()).unwrap();
        let ctx = MapContext {
            capture: &policy,
            redactor: &redactor,
        };
        for dir in [
            "hooks-local",
            "hooks-exit-code",
            "hooks-aborted",
            "hooks-edit-failed",
            "hooks-denied",
        ] {
            let path = format!(
                "{}/../cline-hooks/tests/data/{dir}/tool_result-global.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let payload: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let hooks = map_hook(&HookPayload::from_value(payload.clone()).unwrap(), &ctx).remove(0);
            let rec = &payload["tool_result"];
            let mut end = serde_json::json!({"output": rec["output"], "durationMs": rec["durationMs"]});
            if let Some(error) = rec.get("error") {
                end["error"] = error.clone();
            }
            let stream = aep(&tool_call(
                rec["id"].as_str().unwrap(),
                rec["name"].as_str().unwrap(),
                &rec["input"],
                end,
            ));
            let hooks_data = Value::Object(hooks.data.unwrap());
            assert_eq!(stream[2]["type"], hooks.ty, "{dir}");
            assert_eq!(stream[2]["data"]["error"], hooks_data["error"], "{dir}");
            assert_eq!(stream[2]["data"]["tool"], hooks_data["tool"], "{dir}");
        }
    }

    #[test]
    fn a_missed_start_still_requests_before_it_completes() {
        let e = aep(concat!(
            r#"{"type":"agent_event","ts":"2026-01-01T00:00:00Z","event":{"type":"content_end","contentType":"tool","toolName":"read_file","toolCallId":"x","input":{"path":"a"},"output":"text"}}"#,
            "\n",
            r#"{"type":"run_result","finishReason":"max_iterations","sessionId":"late","usage":{"inputTokens":1000000,"outputTokens":0},"model":{"id":"gpt-4o","provider":"openai"}}"#,
        ));
        assert_eq!(
            types(&e),
            ["run.started", "tool.requested", "tool.completed", "run.failed"]
        );
        assert_eq!(e[2]["cause"], e[1]["id"]);
        assert_eq!(e[3]["data"]["reason"], "max_iterations");
        assert_eq!(e[3]["data"]["cost"]["total"], 2.5);
        assert_eq!(e[3]["data"]["cost"]["currency"], "USD");
        assert_ne!(e[3]["session"], "late", "the session is fixed by the first event");
    }

    #[test]
    fn a_session_id_in_the_stream_is_used() {
        let e = aep(r#"{"type":"hook_event","sessionId":"1700_abc","ts":"2026-01-01T00:00:00+02:00"}"#);
        assert_eq!(e[0]["session"], "1700_abc");
        assert_eq!(e[0]["time"], "2026-01-01T00:00:00+02:00");
    }

    #[test]
    fn a_session_given_by_the_caller_wins_over_the_stream() {
        let e = aep_on(
            r#"{"type":"hook_event","sessionId":"1700_abc"}"#,
            Some("1796007203184_6l7jh"),
        );
        assert!(!e.is_empty());
        assert!(e.iter().all(|ev| ev["session"] == "1796007203184_6l7jh"), "{e:?}");
        assert_eq!(
            e[0]["source"], "aep://test-host/agent/cline/session/1796007203184_6l7jh/stream",
            "its own emitter beside the daemon's"
        );
    }

    #[test]
    fn a_second_run_in_one_stream_is_a_new_run() {
        let two = format!("{REAL}\n{REAL}");
        let e = aep(&two);
        assert_eq!(e.len(), 8);
        assert_ne!(e[0]["run"], e[4]["run"]);
        assert_eq!(e[7]["seq"], 7);
    }
}
