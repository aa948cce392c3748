//! Cline's other generation: the 2.x `--json` stream (`cline@2.18`: flat say/ask records,
//! `task_started` first, `{"type": "error"}` last when it failed), read into the same facts and
//! events as 3.x's ([`super::v3`]). It is kept apart, as `cline-hooks` keeps 2.x's payloads in
//! its own `legacy.rs`, so neither generation's reader is lost in the other's. Real streams are
//! in `tests/data/cline2/`.
//!
//! 2.x ends its runs without a `run_result`, so its terminals are read from the records that
//! end them: say `completion_result` → the run finished (`completed`); ask `api_req_failed`, or
//! the final `error` record when no terminal came before it → the run failed (`api_req_failed`,
//! `error`). The model is each record's `modelInfo` (provider `openai`, 2.x's
//! OpenAI-compatible one, reads `openai-compatible` as in 3.x); say `error_retry` is an `error`
//! event (`name: "error_retry"`) and is counted in the summary's `retries` (its last one,
//! `failed: true`, says the retries are exhausted and is not a retry); say `api_req_retried` is
//! consumed. `task_started` names the session (2.x's hooks key sessions by the same task id)
//! and starts no run by itself: it has no `ts`, and the run's time is the first timed record's.
//! 2.x prints no token counts (`api_req_started` is printed before its usage is known and never
//! again), so the summary says where they are ([`LEGACY_USAGE_NOTE`]). A command (say
//! `command`) is an `execute_command` call (its id made from the record's line, 2.x names none)
//! that ends at the next `api_req_started`, whose request text opens with the command's result
//! and verdict (`Command executed successfully (exit code 0).` / `Command failed with exit code
//! N.`), read by the same rule as 2.x's hooks; ask `command_output` (the output as it runs) is
//! consumed. A file tool (say `tool`) is a call the same way, named by the 2.x tool behind what
//! its record shows ([`legacy_tool_name`]); a file tool that failed unshown is told by its
//! failed result alone. Tools 2.18 was not seen to show stay `unknown`.

use super::{epoch_ms, Ctx, Fact, Pending, ResolvedCall, RunEnd, Sink};
use crate::event::Body;
use crate::record::Legacy;
use crate::tools::ToolKind;
use crate::StreamError;
use cline_hooks::outcome::outcome;
use serde_json::Value;
use std::borrow::Cow;

/// Where a Cline 2.x run's usage is, since its stream has none.
pub const LEGACY_USAGE_NOTE: &str = "Cline 2.x streams carry no token counts: they are in its task history on disk \
($CLINE_DIR/data/state/taskHistory.json per task, data/tasks/<taskId>/ui_messages.json per request); \
`aep-cline usage` reads them";

/// What reading a 2.x run keeps from one record to the next.
#[derive(Debug, Default)]
pub(super) struct State {
    /// A Cline 2.x record was seen.
    pub(super) seen: bool,
    /// The run was ended by one of its records (see the module docs).
    ended: bool,
    /// The first record time (epoch ms), for the run's duration.
    pub(super) first_ms: Option<i64>,
    /// `error_retry` records that were retries (the summary's `retries`).
    pub(super) retries: u64,
    /// The 2.x call (a command or a file tool) running now (its call id in `pending`), until its
    /// result is told.
    call: Option<String>,
}

impl<S: Sink> Ctx<'_, '_, S> {
    /// `task_started`: the task id names the session (2.x's hooks key sessions by it).
    pub(super) fn task_started(&mut self, task_id: Option<String>) {
        let s = &mut *self.state;
        s.legacy.seen = true;
        if s.session.is_none() {
            s.session = task_id;
        }
    }

    /// `{"type": "error", "message"}`, the last line of a failed run.
    pub(super) fn error_record(&mut self, message: Option<Cow<'_, str>>) -> Result<(), StreamError> {
        self.state.legacy.seen = true;
        // After `api_req_failed` it restates that error: the run has failed already.
        if self.state.legacy.ended {
            return Ok(());
        }
        self.event(Body::Error {
            name: None,
            message: message.as_deref().unwrap_or_default().to_string(),
            recoverable: Some(false),
        })?;
        self.legacy_end("error")
    }

    /// A Cline 2.x run's terminal, read from the record that ends it (see the module docs).
    fn legacy_end(&mut self, reason: &str) -> Result<(), StreamError> {
        let s = &mut *self.state;
        s.legacy.ended = true;
        s.finish_reason = Some(reason.to_string());
        s.duration_ms = match (s.legacy.first_ms, self.ts.and_then(epoch_ms)) {
            (Some(start), Some(end)) => u64::try_from(end - start).ok(),
            _ => None,
        };
        let end = RunEnd {
            finish_reason: s.finish_reason.clone(),
            duration_ms: s.duration_ms,
            usage: None,
            model: s.model.clone(),
        };
        self.fact(Fact::RunEnded(&end))
    }

    /// Cline 2.x say/ask records, mapped conservatively.
    pub(super) fn legacy(&mut self, l: Legacy<'_>) -> Result<(), StreamError> {
        if matches!(l.ty.as_deref(), Some("say" | "ask")) {
            self.state.legacy.seen = true;
            if let Some(mut model) = l.model.clone() {
                // 2.x's provider `openai` is its OpenAI-compatible one (any server; OpenAI itself
                // is `openai-native`): 3.x calls it `openai-compatible`, and so do prices.
                if model.provider.as_deref() == Some("openai") {
                    model.provider = Some("openai-compatible".into());
                }
                self.state.model = Some(model);
            }
        }
        if l.partial {
            // A streaming fragment: the complete record that follows restates it.
            return Ok(());
        }
        let text = l.text.as_deref().unwrap_or_default();
        let has_text = !text.trim().is_empty();
        let body = match (l.ty.as_deref(), l.say.as_deref(), l.ask.as_deref()) {
            (Some("say"), Some("completion_result"), _) => {
                if has_text {
                    self.state.text = Some(text.to_string());
                    self.event(Body::AgentMessage { text: text.to_string() })?;
                }
                return self.legacy_end("completed");
            }
            (Some("say"), Some("text"), _) => has_text.then(|| Body::AgentMessage { text: text.to_string() }),
            (Some("ask"), _, Some("followup")) => {
                let question = followup_question(text);
                (!question.trim().is_empty()).then_some(Body::AgentMessage { text: question })
            }
            (Some("say"), Some("reasoning"), _) => has_text.then(|| Body::Reasoning { text: text.to_string() }),
            (Some("ask"), _, Some("api_req_failed")) => {
                self.event(Body::Error {
                    name: None,
                    message: text.to_string(),
                    recoverable: Some(false),
                })?;
                return self.legacy_end("api_req_failed");
            }
            (Some("say"), Some("error" | "api_req_failed"), _) => Some(Body::Error {
                name: None,
                message: text.to_string(),
                recoverable: None,
            }),
            (Some("say"), Some("error_retry"), _) => {
                // `{attempt, maxAttempts, delaySeconds, failed?, errorMessage}`.
                let retry: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                let exhausted = retry.get("failed").and_then(Value::as_bool).unwrap_or(false);
                if !exhausted {
                    self.state.legacy.retries += 1;
                }
                let message = retry
                    .get("errorMessage")
                    .and_then(Value::as_str)
                    .unwrap_or(text)
                    .to_string();
                Some(Body::Error {
                    name: Some("error_retry".into()),
                    message,
                    recoverable: Some(!exhausted),
                })
            }
            (Some("say"), Some("api_req_retried"), _) => None,
            (Some("say"), Some("command"), _) => {
                let input = serde_json::json!({ "command": text });
                return self.legacy_call("execute_command", input);
            }
            (Some("say"), Some("tool"), _) => return self.legacy_tool(text),
            // The command's output as it runs: its result comes whole with the next request.
            (Some("ask"), _, Some("command_output")) => None,
            (Some("say"), Some("api_req_started"), _) => return self.legacy_request(text),
            (Some("say"), Some(say), _) => {
                return self.unknown(
                    format!("say.{say}"),
                    format!("no mapping for legacy say {say:?}"),
                    None,
                    None,
                )
            }
            (Some("ask"), _, Some(ask)) => {
                return self.unknown(
                    format!("ask.{ask}"),
                    format!("no mapping for legacy ask {ask:?}"),
                    None,
                    None,
                )
            }
            (Some(ty), _, _) => return self.unknown(ty, format!("no mapping for record type {ty:?}"), None, None),
            (None, _, _) => return self.unknown("untyped", "the record has no type", None, None),
        };
        match body {
            Some(body) => self.event(body),
            None => Ok(()),
        }
    }
}

impl<S: Sink> Ctx<'_, '_, S> {
    /// 2.x `say tool` (`{"tool": "readFile", "path": …}`): a file tool the agent runs. Its
    /// `tool` is what 2.x's UI shows; the call is named by the 2.x tool behind it
    /// ([`legacy_tool_name`]). Any other `tool`, or a text that names none, stays `unknown`.
    fn legacy_tool(&mut self, text: &str) -> Result<(), StreamError> {
        let said: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let Some(shown) = said.get("tool").and_then(Value::as_str) else {
            return self.unknown(
                "say.tool",
                "the tool record's text is not a JSON object naming its tool",
                None,
                None,
            );
        };
        let Some(tool) = legacy_tool_name(shown) else {
            return self.unknown(
                "say.tool",
                format!("no mapping for the 2.x tool record {shown:?}"),
                Some(shown.to_string()),
                None,
            );
        };
        // The tool's own parameters, as its XML call names them.
        let input: serde_json::Map<String, Value> = ["path", "regex"]
            .into_iter()
            .filter_map(|k| Some((k.to_string(), said.get(k).filter(|v| v.is_string())?.clone())))
            .collect();
        self.legacy_call(tool, Value::Object(input))
    }

    /// A 2.x tool call starts (`say command`, `say tool`). 2.x names no call id: one is made
    /// from the record's line, and a tool's result always comes before the next tool.
    fn legacy_call(&mut self, tool: &str, input: Value) -> Result<(), StreamError> {
        let call_id = format!("legacy-{}", self.line);
        self.fact(Fact::ToolRequested {
            call_id: &call_id,
            tool,
            input: Some(&input),
        })?;
        let pending = Pending {
            tool: Some(tool.into()),
            input: Some(input),
            requested: true,
            line: self.line,
            ts: self.ts.map(str::to_string),
        };
        self.state.pending.insert(call_id.clone(), pending);
        self.state.legacy.call = Some(call_id);
        Ok(())
    }

    /// 2.x `say api_req_started`: the next model request, whose text opens with the last tool's
    /// result (`[execute_command for '…'] Result:` then `Command executed successfully (exit
    /// code 0).` or `Command failed with exit code 2.`; `[read_file for 'input.txt'] Result:`
    /// then the file): the running call ends there, with the verdict the hooks read from the
    /// same text ([`cline_hooks::outcome::reported_failure`]). A file tool that fails before
    /// 2.x shows it (a file that is not there) has no `say tool`: its failed result alone is
    /// the call.
    fn legacy_request(&mut self, text: &str) -> Result<(), StreamError> {
        let request: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let request = request.get("request").and_then(Value::as_str).unwrap_or_default();
        let header = result_header(request);
        let result = request
            .split_once("] Result:")
            .map(|(_, after)| after.trim_start().to_string());
        let Some(call_id) = self.state.legacy.call.take() else {
            return match (header, result) {
                (Some((tool, target)), Some(result)) => self.legacy_failed_unshown(tool, target, result),
                _ => Ok(()),
            };
        };
        let Some(p) = self.state.pending.remove(&call_id) else {
            return Ok(());
        };
        let Some(result) = result else {
            // A request that tells no result (the run went on otherwise): the call stays open and
            // is reported without a verdict when the run ends.
            self.state.pending.insert(call_id.clone(), p);
            self.state.legacy.call = Some(call_id);
            return Ok(());
        };
        let output = Value::String(result);
        let outcome = outcome(Some(&output), None);
        let duration_ms = match (p.ts.as_deref().and_then(epoch_ms), self.ts.and_then(epoch_ms)) {
            (Some(start), Some(end)) => u64::try_from(end - start).ok(),
            _ => None,
        };
        // 2.x shows a write_to_file over an existing file and a replace_in_file alike
        // (`editedExistingFile`); the result names the tool that ran.
        let pending_tool = p.tool.unwrap_or_else(|| "execute_command".into());
        let tool = match header {
            Some((named, _)) if named != pending_tool && ToolKind::of(named) == ToolKind::of(&pending_tool) => {
                named.to_string()
            }
            _ => pending_tool,
        };
        let call = ResolvedCall {
            call_id: Some(call_id),
            tool,
            input: p.input,
            output: Some(output),
            requested: true,
            failure: outcome.failure.clone(),
            duration_ms,
        };
        self.resolved(call, outcome)
    }

    /// A failed result that no `say tool` announced (2.18 shows a read only once the file was
    /// read): the call, requested and failed at once, for the file tools whose result header
    /// names the path. A success without an announcement is left alone: 2.x shows every tool it
    /// ran.
    fn legacy_failed_unshown(&mut self, tool: &str, target: Option<&str>, result: String) -> Result<(), StreamError> {
        let output = Value::String(result);
        let outcome = outcome(Some(&output), None);
        let path_tool = matches!(
            ToolKind::of(tool),
            Some(ToolKind::Read | ToolKind::Write | ToolKind::List)
        );
        if outcome.failure.is_none() || !path_tool {
            return Ok(());
        }
        let call = ResolvedCall {
            call_id: Some(format!("legacy-{}", self.line)),
            tool: tool.to_string(),
            input: Some(serde_json::json!({ "path": target })),
            output: Some(output),
            requested: false,
            failure: outcome.failure.clone(),
            duration_ms: None,
        };
        self.resolved(call, outcome)
    }
}

/// The 2.x tool behind a `say tool` record's `tool` (what 2.x's UI shows), as 2.18 wrote them
/// (`tests/data/cline2/b-files`, `e-edit`); any other is not guessed at.
///
/// Names are 2.x's own, not 3.x's (`read_files`, `editor`): 2.x's hooks name the same call
/// so (the stream and the hooks lane give the AEP tool one subject), its results too
/// (`[read_file for '…'] Result:`), and `execute_command` is named so already; the normalized
/// `type` (`read`, `write`, `list`, `search`) is where the generations meet.
fn legacy_tool_name(shown: &str) -> Option<&'static str> {
    Some(match shown {
        "readFile" => "read_file",
        "newFileCreated" => "write_to_file",
        // Or write_to_file over an existing file: the result says which (legacy_request).
        "editedExistingFile" => "replace_in_file",
        "listFilesTopLevel" => "list_files",
        "searchFiles" => "search_files",
        _ => return None,
    })
}

/// A 2.x tool result's header, `[NAME for 'TARGET'] Result:` (`TARGET` unquoted), at the start
/// of a request.
fn result_header(request: &str) -> Option<(&str, Option<&str>)> {
    let (head, _) = request.strip_prefix('[')?.split_once("] Result:")?;
    Some(match head.split_once(" for ") {
        Some((name, target)) => (name, Some(target.trim_matches('\''))),
        None => (head, None),
    })
}

/// Cline 2.x wrote a followup as JSON `{"question": …, "options": […]}`; the question is the
/// message. Plain text passes through.
fn followup_question(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("question").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{events, run};
    use serde_json::Value;

    #[test]
    fn legacy_records_are_handled_conservatively() {
        let e = events(&[
            r#"{"type":"say","say":"text","text":"hello","ts":1700000000000}"#,
            r#"{"type":"say","say":"text","text":"hel","partial":true}"#,
            r#"{"type":"say","say":"text","text":""}"#,
            r#"{"type":"say","say":"completion_result","text":"all done"}"#,
            r#"{"type":"ask","ask":"followup","text":"{\"question\":\"Which file?\",\"options\":[\"a\"]}"}"#,
            r#"{"type":"ask","ask":"followup","text":"plain question"}"#,
            r#"{"type":"say","say":"reasoning","text":"thinking…"}"#,
            r#"{"type":"say","say":"error","text":"oops"}"#,
            r#"{"type":"say","say":"api_req_failed","text":"429"}"#,
            r#"{"type":"ask","ask":"api_req_failed","text":"500"}"#,
            r#"{"type":"say","say":"tool","text":"{\"tool\":\"listCodeDefinitionNames\"}"}"#,
            r#"{"type":"ask","ask":"command","text":"npm test"}"#,
            r#"{"type":"mystery"}"#,
            r#"{"say":"text","text":"no type"}"#,
        ]);
        let got: Vec<(String, String)> = e
            .iter()
            .map(|e| {
                let detail = e.get("text").or(e.get("message")).or(e.get("record")).unwrap();
                (
                    e["type"].as_str().unwrap().to_string(),
                    detail.as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = [
            ("agent_message", "hello"),
            ("agent_message", "all done"),
            ("agent_message", "Which file?"),
            ("agent_message", "plain question"),
            ("reasoning", "thinking…"),
            ("error", "oops"),
            ("error", "429"),
            ("error", "500"),
            ("unknown", "say.tool"),
            ("unknown", "ask.command"),
            ("unknown", "mystery"),
            ("unknown", "untyped"),
        ];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert_eq!(e[0]["ts"], "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn a_2x_tool_record_whose_text_names_no_tool_is_unknown_and_opens_no_call() {
        let request =
            r#"{"type":"say","say":"api_req_started","text":"{\"request\":\"[read_file for 'a'] Result:\\nx\"}"}"#;
        for text in [
            r#""not json""#,
            r#""[1]""#,
            r#""{\"path\":\"a\"}""#,
            r#""{\"tool\":7,\"path\":\"a\"}""#,
            "null",
        ] {
            let record = format!(r#"{{"type":"say","say":"tool","text":{text}}}"#);
            let (c, _, bad) = run(&[&record, request]);
            assert!(bad.is_empty(), "{text}: {bad:?}");
            let e: Vec<Value> = c.events.iter().map(|e| serde_json::to_value(e).unwrap()).collect();
            assert_eq!(e.len(), 1, "{text}: {e:?}");
            assert_eq!(
                (e[0]["record"].as_str(), e[0]["reason"].as_str()),
                (
                    Some("say.tool"),
                    Some("the tool record's text is not a JSON object naming its tool")
                ),
                "{text}"
            );
            assert!(c.facts.is_empty(), "{text}: {:?}", c.facts);
        }
        // A path that is not a string names no target; the call is still told.
        let e = events(&[
            r#"{"type":"say","say":"tool","text":"{\"tool\":\"readFile\",\"path\":5}"}"#,
            request,
        ]);
        assert_eq!(
            (
                e[0]["type"].as_str(),
                e[0]["target"].as_str(),
                e[0]["success"].as_bool()
            ),
            (Some("read"), None, Some(true))
        );
    }

    #[test]
    fn a_2x_edit_is_named_by_the_tool_its_result_names() {
        let edit = r#"{"type":"say","say":"tool","text":"{\"tool\":\"editedExistingFile\",\"path\":\"a.txt\"}"}"#;
        let result = |tool: &str| {
            format!(
                r#"{{"type":"say","say":"api_req_started","text":"{{\"request\":\"[{tool} for 'a.txt'] Result:\\nThe content was successfully saved to a.txt.\"}}"}}"#
            )
        };
        for (named, want) in [
            ("write_to_file", "write_to_file"),
            ("replace_in_file", "replace_in_file"),
            // Not the same kind of tool: not this call's result, the shown name stays.
            ("read_file", "replace_in_file"),
        ] {
            let e = events(&[edit, &result(named)]);
            assert_eq!(e.len(), 1, "{named}: {e:?}");
            assert_eq!(
                (e[0]["type"].as_str(), e[0]["tool"].as_str(), e[0]["target"].as_str()),
                (Some("write"), Some(want), Some("a.txt")),
                "{named}"
            );
        }
    }

    #[test]
    fn a_2x_result_alone_is_a_call_only_when_a_file_tool_failed() {
        let request = |r: &str| {
            format!(
                r#"{{"type":"say","say":"api_req_started","text":{}}}"#,
                serde_json::to_string(&serde_json::json!({ "request": r }).to_string()).unwrap()
            )
        };
        let failed = "[read_file for 'gone.txt'] Result:\nThe tool execution failed with the following error:\n<error>\nno such file\n</error>";
        let (c, _, _) = run(&[&request(failed)]);
        let e = serde_json::to_value(&c.events[0]).unwrap();
        assert_eq!(
            (e["type"].as_str(), e["target"].as_str(), e["success"].as_bool()),
            (Some("read"), Some("gone.txt"), Some(false))
        );
        assert_eq!(c.facts, ["resolved legacy-1 ok=false requested=false"]);
        for quiet in [
            "[read_file for 'a'] Result:\n1 | text",
            "[execute_command for 'x'] Result:\nCommand failed with exit code 2.",
            "[browser_action for 'x'] Result:\nThe tool execution failed with the following error:",
            "<task>\nhi\n</task>",
        ] {
            assert!(events(&[&request(quiet)]).is_empty(), "{quiet}");
        }
    }
}
