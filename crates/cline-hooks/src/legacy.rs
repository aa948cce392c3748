//! Cline's other generation: the hook payloads of the 2.x CLI (`cline@2.18.0`) and of the VS Code
//! extension whose core it shares (the payloads say `clineVersion: "3.82.0"`). Real captures are
//! in `tests/data/cline2/` (see its README for where they were taken).
//!
//! A 2.x payload names its hook in PascalCase (`TaskStart` ... `Notification`, the hook file's
//! name), carries the task id (epoch milliseconds) as its only identity, a `timestamp` in epoch
//! milliseconds, and exactly one of the objects 3.x keeps only as legacy mirrors (`taskStart`,
//! `preToolUse {toolName, parameters}`, `postToolUse {toolName, parameters, result, success,
//! executionTimeMs}`, ...); no `sessionContext`, no `agent_id`, no typed `tool_call` or
//! `tool_result`. [`normalize`] turns it into the [`HookPayload`] the 3.x mapping already reads
//! (so both generations give the same AEP events from one mapping), and keeps what only 2.x has
//! in [`crate::payload::Legacy`]: the hook's own name (the tracker treats 2.x's `TaskCancel` apart, see
//! [`crate::session`]) and the `notification`.

use crate::payload::{HookPayload, Legacy, Notification, PayloadError, PreCompact, ToolCall, ToolCallRecord};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The hooks 2.x fires (`dist/cli.mjs`: the hook file names it looks for), and the 3.x hook each
/// one is. `Notification` has no 3.x twin; it keeps its name.
const HOOKS: [(&str, &str); 9] = [
    ("TaskStart", "agent_start"),
    ("TaskResume", "agent_resume"),
    ("TaskCancel", "agent_abort"),
    ("TaskComplete", "agent_end"),
    ("PreToolUse", "tool_call"),
    ("PostToolUse", "tool_result"),
    ("UserPromptSubmit", "prompt_submit"),
    ("PreCompact", "pre_compact"),
    ("Notification", "Notification"),
];

/// Whether `hook_name` is a 2.x hook (PascalCase: 3.x names are snake_case, so the two never meet).
pub fn is_legacy(hook_name: &str) -> bool {
    HOOKS.iter().any(|(name, _)| *name == hook_name)
}

#[derive(Debug, Default, Deserialize)]
struct Raw {
    #[serde(rename = "hookName")]
    hook_name: String,
    #[serde(rename = "clineVersion", default)]
    cline_version: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "taskId", default)]
    task_id: Option<String>,
    #[serde(rename = "workspaceRoots", default)]
    workspace_roots: Vec<String>,
    #[serde(rename = "userId", default)]
    user_id: Option<String>,
    #[serde(default)]
    model: Option<RawModel>,
    #[serde(rename = "preToolUse", default)]
    pre_tool_use: Option<RawTool>,
    #[serde(rename = "postToolUse", default)]
    post_tool_use: Option<RawTool>,
    #[serde(rename = "taskComplete", default)]
    task_complete: Option<RawTaskEnd>,
    #[serde(rename = "preCompact", default)]
    pre_compact: Option<PreCompact>,
    #[serde(default)]
    notification: Option<Notification>,
}

/// `preToolUse` / `postToolUse`. Cline serializes them from protobuf (`toJSON`), which leaves
/// out default values: a `postToolUse` without `success` said `false`, one without `result`
/// said `""`.
#[derive(Debug, Default, Deserialize)]
struct RawTool {
    #[serde(rename = "toolName", default)]
    tool_name: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    success: Option<bool>,
    /// An int64: a number, or a string of digits as protobuf's JSON may write it.
    #[serde(rename = "executionTimeMs", default)]
    execution_time_ms: Option<Value>,
}

/// `model {provider, slug}`.
#[derive(Debug, Default, Deserialize)]
struct RawModel {
    #[serde(default)]
    slug: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawTaskEnd {
    #[serde(rename = "taskMetadata", default)]
    task_metadata: Option<RawTaskMetadata>,
}

#[derive(Debug, Default, Deserialize)]
struct RawTaskMetadata {
    #[serde(default)]
    result: Option<String>,
}

/// The 2.x payload `value` (its `hookName` is one [`is_legacy`] knows) as the [`HookPayload`]
/// the mapping reads.
pub fn normalize(mut value: Value) -> Result<HookPayload, PayloadError> {
    let (raw, dropped) = crate::tolerant::tolerant::<Raw>(&mut value)?;
    let hook_name = HOOKS
        .iter()
        .find(|(name, _)| *name == raw.hook_name)
        .map(|(_, as3)| as3.to_string())
        .unwrap_or_else(|| raw.hook_name.clone());
    let mut p = HookPayload {
        hook_name,
        cline_version: raw.cline_version,
        timestamp: raw.timestamp.map(|t| rfc3339_of_epoch_ms(&t).unwrap_or(t)),
        task_id: raw.task_id,
        workspace_roots: raw.workspace_roots,
        user_id: raw.user_id,
        pre_compact: raw.pre_compact,
        model: raw.model.and_then(|m| m.slug).filter(|m| !m.is_empty()),
        dropped,
        ..HookPayload::default()
    };
    match raw.hook_name.as_str() {
        // 2.x gives no call id: the tracker pairs a result with its request by tool name and
        // order (2.x runs one tool at a time).
        "PreToolUse" => {
            let tool = raw.pre_tool_use.unwrap_or_default();
            p.tool_call = Some(ToolCall {
                id: None,
                name: tool.tool_name,
                input: tool.parameters.map_or(Value::Null, Value::Object),
            });
        }
        "PostToolUse" => {
            let tool = raw.post_tool_use.unwrap_or_default();
            let result = tool.result.unwrap_or_default();
            // `success` is false only when the tool threw (a failure the tool reported itself,
            // such as a command's exit code, comes with `success: true` and is in the result
            // text, which `crate::outcome` reads): that is what the typed error means in 3.x.
            let error =
                (!tool.success.unwrap_or(false)).then(|| first_line(&result).unwrap_or("the tool failed").to_string());
            p.tool_result = Some(ToolCallRecord {
                id: None,
                name: tool.tool_name,
                input: tool.parameters.map_or(Value::Null, Value::Object),
                output: if result.is_empty() {
                    Value::Null
                } else {
                    Value::String(result)
                },
                error,
                duration_ms: tool.execution_time_ms.as_ref().and_then(number),
            });
        }
        "TaskComplete" => {
            let result = raw.task_complete.and_then(|t| t.task_metadata).and_then(|m| m.result);
            p.turn = result.map(|r| serde_json::json!({ "outputText": r }));
        }
        _ => {}
    }
    p.legacy = Some(Legacy {
        hook: raw.hook_name,
        notification: raw.notification,
    });
    Ok(p)
}

fn first_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// 2.x stamps `timestamp` as epoch milliseconds (`"1796103185048"`); the rest of the lane reads
/// RFC 3339 (3.x's `Date.toISOString()`). `None` when it is not a plausible epoch-ms string,
/// or lies past year 9999: the payload then keeps its text, which the lane reads as no time
/// (the event takes the firing time).
fn rfc3339_of_epoch_ms(t: &str) -> Option<String> {
    if t.is_empty() || t.len() > 16 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    aep_core::time::millis_of_epoch_ms(t.parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn epoch_ms_becomes_rfc3339() {
        assert_eq!(
            rfc3339_of_epoch_ms("1796103185048").as_deref(),
            Some("2026-12-01T05:33:05.048Z")
        );
        // In year 9999 still a time; at its very end jiff stops (so that any offset still gives
        // a civil time in 9999), and past it there is none.
        assert_eq!(
            rfc3339_of_epoch_ms("253383811200000").as_deref(),
            Some("9999-06-01T00:00:00.000Z")
        );
        for bad in [
            "",
            "253402300799999",
            "17961031850481234567",
            "2026-12-01T02:53:05Z",
            "-1",
            "12a",
            "253402300800000",
            "9999999999999999",
        ] {
            assert_eq!(rfc3339_of_epoch_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_tool_that_threw_has_a_typed_error_and_defaults_are_absent_fields() {
        let p = normalize(json!({"hookName": "PostToolUse", "taskId": "1", "timestamp": "not-ms",
            "postToolUse": {"toolName": "read_file", "parameters": {"path": "x"}, "result": "boom\nmore", "executionTimeMs": "12"}}))
        .unwrap();
        let rec = p.tool_result.unwrap();
        assert_eq!(rec.error.as_deref(), Some("boom"));
        assert_eq!(rec.duration_ms, Some(12.0));
        assert_eq!(
            p.timestamp.as_deref(),
            Some("not-ms"),
            "kept as sent, then read as no time"
        );
        let p = normalize(json!({"hookName": "PostToolUse", "taskId": "1", "postToolUse": {}})).unwrap();
        let rec = p.tool_result.unwrap();
        assert_eq!(
            (rec.error.as_deref(), rec.output),
            (Some("the tool failed"), Value::Null)
        );
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_not_echoed() {
        let p = normalize(json!({"hookName": "PreToolUse", "taskId": "1", "preToolUse": {"toolName": "read_file", "parameters": "sk-SECRET"}}))
            .unwrap();
        assert_eq!(p.dropped, ["preToolUse.parameters"]);
        assert_eq!(p.tool_call.unwrap().name.as_deref(), Some("read_file"));
        let err = normalize(json!({"hookName": "PreToolUse", "taskId": 1}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`taskId`"), "{err}");
    }

    #[test]
    fn a_timestamp_past_year_9999_is_no_time_and_no_panic() {
        let p = normalize(json!({"hookName": "TaskStart", "taskId": "1", "timestamp": "9999999999999999"})).unwrap();
        assert_eq!(p.timestamp.as_deref(), Some("9999999999999999"));
        assert_eq!(crate::timestamp::epoch_ms("9999999999999999"), None);
    }
}
