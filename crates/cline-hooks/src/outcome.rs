//! How a tool call ended, read from what Cline reports about it: the one rule both lanes use
//! (the `tool_result` hook's `ToolCallRecord` here, a `cline --json` tool `content_end` in
//! `cline-stream`), so one call is `tool.completed` or `tool.failed` whichever lane saw it.
//!
//! Cline 3.x rarely fails a tool call through the typed `ToolCallRecord.error`: its built-in
//! tools catch their own errors and report them in the OUTPUT, as `{query, result, error,
//! success: false}` items (one per command or file, or one object), and a refused approval
//! comes back as `output: {error: "... -- NOT a tool or system failure. ..."}` (with the typed
//! `error` set to `"[object Object]"` in the hook payload). So the output decides first.
//!
//! Cline 2.x (and the VS Code extension's core) says `success: true` for every tool that did not
//! throw, a command that exited 2 included: only its result text says `Command failed with exit
//! code 2.`. So a result text that opens with one of the failure lines that core writes
//! ([`reported_failure`]) is a failure whatever the flag says. No 3.x output opens with them.
//!
//! [`FailureKind`] is the `error.type` of `tool.failed` (AEP-0002 §5 `error_info.type`, a
//! metadata-level machine token): a small closed set, told apart by the texts Cline 3.0.65
//! (`@cline/core` and `@cline/shared` 0.0.86) writes.

use aep_core::Severity;
use serde_json::Value;

/// What kind of failure ended a tool call: `tool.failed`'s `error.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// `denied`: the tool did not run because its approval was not granted: denied by a
    /// person, cancelled while pending (a run abort), or impossible (`requires approval in a
    /// TTY session` on a non-TTY). Cline appends `TOOL_REJECTION_SUFFIX` ("NOT a tool or system
    /// failure. Clarify with user before proceeding.", `@cline/shared` `llms/tools`) to every
    /// rejected approval, after a reason that is free text from whoever rejected it, so the
    /// suffix is the only reliable mark, and it cannot tell a person's no from the runtime's.
    /// That is why this is `tool.failed {error.type: "denied"}` and not `tool.denied`: AEP-0002
    /// §4.1 reserves `tool.denied` for blocks with no human loop, and Annex A.9 splits on the
    /// record's error. The approval itself, when the hub tap sees it, is `attention.*`.
    Denied,
    /// `aborted`: the tool was stopped because its run was aborted (`Command was aborted`).
    Aborted,
    /// `timeout`: the tool ran out of time (`... timed out after <n>ms`).
    Timeout,
    /// `exit_code`: a command ran and exited non-zero (`Command exited with code <n>`).
    ExitCode,
    /// `tool_error`: any other failure (an edit that did not apply, a file that cannot be
    /// read, an exception); also the typed `ToolCallRecord.error` of Annex A.9's pin.
    ToolError,
}

/// Cline's `TOOL_REJECTION_SUFFIX`, as far as it is needed to recognize it.
const REJECTION_MARK: &str = "NOT a tool or system failure";

/// Cline 2.x's `formatResponse.toolDenied()`.
const LEGACY_DENIED: &str = "The user denied this operation";

/// Cline 2.x's `formatResponse.toolError()` opening (the error follows inside `<error>`).
const LEGACY_TOOL_ERROR: &str = "The tool execution failed with the following error:";

/// The first lines of a Cline 2.x tool result that report a failure (`execute_command`'s exit
/// code or signal, `toolError`, `toolDenied`).
const LEGACY_FAILURE_LINES: [&str; 4] = [
    "Command failed with exit code",
    "Command terminated by signal",
    LEGACY_TOOL_ERROR,
    LEGACY_DENIED,
];

impl FailureKind {
    /// The kind a failure's text names; [`FailureKind::ToolError`] when it names none. The
    /// rejection mark is checked first: the reason before it is anyone's text (for example
    /// "abort during approval").
    pub fn of(message: Option<&str>) -> FailureKind {
        let Some(m) = message else {
            return FailureKind::ToolError;
        };
        if m.contains(REJECTION_MARK) {
            FailureKind::Denied
        } else if m.contains("was aborted") {
            FailureKind::Aborted
        } else if m.contains("timed out after") {
            FailureKind::Timeout
        } else if m.starts_with(LEGACY_DENIED) {
            FailureKind::Denied
        } else if m.contains("exited with code") || m.contains("failed with exit code") {
            FailureKind::ExitCode
        } else {
            FailureKind::ToolError
        }
    }

    /// `error.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Denied => "denied",
            FailureKind::Aborted => "aborted",
            FailureKind::Timeout => "timeout",
            FailureKind::ExitCode => "exit_code",
            FailureKind::ToolError => "tool_error",
        }
    }

    /// The `tool.failed` severity (AEP-0001 §8.1): `notice` when nothing is wrong with the
    /// tool (a refused approval is a decision, an abort follows a cancel, which is `notice`
    /// too), `warning` when the tool itself failed.
    pub fn severity(self) -> Severity {
        match self {
            FailureKind::Denied | FailureKind::Aborted => Severity::Notice,
            FailureKind::Timeout | FailureKind::ExitCode | FailureKind::ToolError => Severity::Warning,
        }
    }
}

/// Why a call (or one item of a batch call) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// Cline's text, when it gave one: free text, `error.message` at `redacted`+ only.
    pub message: Option<String>,
}

impl Failure {
    fn from_text(message: Option<String>) -> Failure {
        Failure {
            kind: FailureKind::of(message.as_deref()),
            message,
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `None`: the call succeeded.
    pub failure: Option<Failure>,
    /// Per item of a batch output (an array, or `output.results`), when there is one; `None`
    /// for an item that succeeded.
    pub items: Option<Vec<Option<Failure>>>,
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        self.failure.is_none()
    }
}

/// The outcome of a call from its `output` and the typed `error` (`ToolCallRecord.error`, or a
/// `content_end`'s `error` as text). An output `error` or a typed `error` is a failure; else
/// the output's `success` flag decides; else a batch (an output array, or `output.results`)
/// succeeds when every item does; an output with none of these succeeded (Cline reports
/// failures, not successes). The message is the output's `error`, else the first failed
/// item's, else the typed `error`: on a refused approval the typed one is `"[object Object]"`
/// while the output names the reason.
pub fn outcome(output: Option<&Value>, error: Option<&str>) -> Outcome {
    let items = output
        .and_then(batch_items)
        .map(|items| items.iter().map(item_failure).collect::<Vec<_>>());
    let output_error = output.and_then(|o| o.get("error")).and_then(error_text);
    let typed_error = error.filter(|e| !e.is_empty()).map(str::to_string);
    let reported = output.and_then(result_text).and_then(reported_failure);
    let flag = output.and_then(|o| o.get("success")).and_then(Value::as_bool);
    let failed_item = items.as_ref().and_then(|items| items.iter().flatten().next());
    let failed = output_error.is_some()
        || typed_error.is_some()
        || reported.is_some()
        || match flag {
            Some(success) => !success,
            None => failed_item.is_some(),
        };
    let failure = failed.then(|| {
        let message = output_error
            .or(reported)
            .or_else(|| failed_item.and_then(|f| f.message.clone()))
            .or(typed_error);
        Failure::from_text(message)
    });
    Outcome { failure, items }
}

/// A tool's result text: the output itself when it is a string, else its `result`.
fn result_text(output: &Value) -> Option<&str> {
    output.as_str().or_else(|| output.get("result").and_then(Value::as_str))
}

/// The failure a result text reports, by its opening line (Cline 2.x, see the module docs): that
/// line is the message (what follows is the command's output), or, for `toolError`, the error.
pub fn reported_failure(text: &str) -> Option<String> {
    let text = text.trim_start();
    let line = text.lines().next()?.trim_end();
    if !LEGACY_FAILURE_LINES.iter().any(|l| line.starts_with(l)) {
        return None;
    }
    if line.starts_with(LEGACY_TOOL_ERROR) {
        let inner = text
            .split_once("<error>")
            .and_then(|(_, rest)| rest.split_once("</error>"))
            .map(|(error, _)| error.trim())
            .filter(|e| !e.is_empty());
        if let Some(error) = inner {
            return Some(error.to_string());
        }
    }
    Some(line.to_string())
}

fn batch_items(output: &Value) -> Option<&Vec<Value>> {
    output
        .as_array()
        .or_else(|| output.get("results").and_then(Value::as_array))
}

fn item_failure(item: &Value) -> Option<Failure> {
    let error = item.get("error").and_then(error_text);
    let ok = item.get("success").and_then(Value::as_bool).unwrap_or(true) && error.is_none();
    (!ok).then(|| Failure::from_text(error))
}

/// An error as text: a string, an object's `message`, or its JSON; `null`, `false` and `""`
/// are no error.
pub fn error_text(error: &Value) -> Option<String> {
    match error {
        Value::Null | Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => Some(match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None => error.to_string(),
        }),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind_of(output: Value, error: Option<&str>) -> Option<(FailureKind, Option<String>)> {
        outcome(Some(&output), error).failure.map(|f| (f.kind, f.message))
    }

    #[test]
    fn success_rules() {
        let ok = |output: Value| outcome(Some(&output), None).is_success();
        assert!(ok(json!({"success": true})));
        assert!(!ok(json!({"success": false})));
        assert!(ok(json!([{"query": "echo hi", "result": "hi\n", "success": true}])));
        assert!(!ok(
            json!({"results": [{"success": true}, {"error": {"message": "EACCES"}}]})
        ));
        assert!(ok(json!({"results": [{"success": true}, {"result": "ok"}]})));
        assert!(
            ok(json!({"success": true, "results": [{"success": false}]})),
            "the flag decides"
        );
        assert!(ok(json!("file contents")));
        assert!(ok(json!({"error": null, "result": 1})));
        assert!(outcome(None, None).is_success());
        assert!(
            outcome(Some(&Value::Null), Some("")).is_success(),
            "an empty error is none"
        );
    }

    #[test]
    fn a_batch_fails_when_an_item_does_and_the_first_failure_names_it() {
        let o = outcome(
            Some(&json!([{"success": true}, {"success": false, "error": "boom"}, {"error": "later"}])),
            None,
        );
        let f = o.failure.as_ref().unwrap();
        assert_eq!((f.kind, f.message.as_deref()), (FailureKind::ToolError, Some("boom")));
        let items = o.items.unwrap();
        assert_eq!(items[0], None);
        assert_eq!(items[1].as_ref().unwrap().message.as_deref(), Some("boom"));
        assert_eq!(items[2].as_ref().unwrap().message.as_deref(), Some("later"));
    }

    #[test]
    fn the_output_error_wins_over_the_flag_and_the_typed_error() {
        assert_eq!(
            kind_of(json!({"error": "requires approval", "success": true}), None),
            Some((FailureKind::ToolError, Some("requires approval".into())))
        );
        assert_eq!(
            kind_of(json!("x"), Some("it broke")),
            Some((FailureKind::ToolError, Some("it broke".into())))
        );
    }

    // The outputs below are Cline 3.0.65's, as captured (tests/data).

    #[test]
    fn a_command_that_exits_non_zero_is_an_exit_code() {
        let output = json!([{"query": "echo out; exit 3", "result": "[Command exited with code 3]\nout\n", "error": "Command exited with code 3", "success": false}]);
        assert_eq!(
            kind_of(output, None),
            Some((FailureKind::ExitCode, Some("Command exited with code 3".into())))
        );
    }

    #[test]
    fn a_killed_command_is_aborted() {
        let output = json!([{"query": "sleep 20; echo never", "result": "", "error": "Command failed: Command was aborted", "success": false}]);
        assert_eq!(kind_of(output, None).unwrap().0, FailureKind::Aborted);
        assert_eq!(FailureKind::Aborted.severity(), Severity::Notice);
    }

    #[test]
    fn a_timed_out_command_is_a_timeout() {
        let output = json!([{"query": "sleep 99", "result": "", "error": "Command failed: Command timed out after 30000ms", "success": false}]);
        assert_eq!(kind_of(output, None).unwrap().0, FailureKind::Timeout);
    }

    #[test]
    fn an_edit_that_does_not_apply_is_a_tool_error() {
        let output = json!({"query": "edit:/home/dev/proj/notes.txt", "result": "", "error": "Editor operation failed: No replacement performed: text not found in /home/dev/proj/notes.txt.", "success": false});
        assert_eq!(kind_of(output, None).unwrap().0, FailureKind::ToolError);
        assert_eq!(FailureKind::ToolError.severity(), Severity::Warning);
    }

    #[test]
    fn a_refused_approval_is_denied_whatever_its_reason_says() {
        for reason in [
            "Tool \"run_commands\" requires approval in a TTY session",
            "denied by probe",
            "abort during approval",
        ] {
            let text = format!("{reason} -- NOT a tool or system failure. Clarify with user before proceeding.");
            let (kind, message) = kind_of(json!({"error": text}), Some("[object Object]")).unwrap();
            assert_eq!(kind, FailureKind::Denied, "{reason}");
            assert_eq!(
                message.as_deref(),
                Some(text.as_str()),
                "the output names it, not the typed error"
            );
        }
        assert_eq!(FailureKind::Denied.as_str(), "denied");
        assert_eq!(FailureKind::Denied.severity(), Severity::Notice);
    }

    #[test]
    fn the_typed_error_alone_is_a_tool_error() {
        // Annex A.9's pin: output null, error set.
        assert_eq!(
            kind_of(Value::Null, Some("EACCES: permission denied")),
            Some((FailureKind::ToolError, Some("EACCES: permission denied".into())))
        );
        assert_eq!(FailureKind::of(None), FailureKind::ToolError);
    }

    // Cline 2.18's texts (tests/data/cline2): `success` is true in each.

    #[test]
    fn a_legacy_result_text_that_reports_a_failure_is_one() {
        let exit2 = json!("Command failed with exit code 2.\nOutput:\nls: cannot access '/nonexistent-aep-dir'");
        assert_eq!(
            kind_of(exit2, None),
            Some((FailureKind::ExitCode, Some("Command failed with exit code 2.".into())))
        );
        assert!(outcome(
            Some(&json!("Command executed successfully (exit code 0).\nOutput:\nhi")),
            None
        )
        .is_success());
        let error = json!("The tool execution failed with the following error:\n<error>\nFile not found: x\n</error>");
        assert_eq!(
            kind_of(error, None),
            Some((FailureKind::ToolError, Some("File not found: x".into())))
        );
        assert_eq!(
            kind_of(json!("The user denied this operation."), None).unwrap().0,
            FailureKind::Denied
        );
        assert_eq!(
            kind_of(
                json!({"result": "Command terminated by signal SIGKILL.", "success": true}),
                None
            )
            .unwrap()
            .0,
            FailureKind::ToolError
        );
        // Only the opening line counts: output that merely mentions it is not a failure.
        assert!(outcome(Some(&json!("log:\nCommand failed with exit code 1")), None).is_success());
    }

    #[test]
    fn error_texts() {
        assert_eq!(error_text(&json!("x")), Some("x".into()));
        assert_eq!(error_text(&json!({"message": "m", "code": 1})), Some("m".into()));
        assert_eq!(error_text(&json!({"code": 1})), Some(r#"{"code":1}"#.into()));
        assert_eq!(error_text(&json!(7)), Some("7".into()));
        for none in [json!(null), json!(false), json!("")] {
            assert_eq!(error_text(&none), None);
        }
    }
}
