//! Hook payloads as Cline writes them to a hook's stdin (`@cline/shared` 0.0.86,
//! `dist/hooks/events.d.ts`). Real captures from CLI 3.0.65 are in `tests/data/`.
//!
//! Only the typed fields are read. Unknown fields and the legacy mirrors (`preToolUse`,
//! `postToolUse`, `taskStart`, ...: parameters as JSON strings) are tolerated and ignored.
//! A Cline 2.x payload (PascalCase `hookName`, the legacy objects only) is read by
//! [`crate::legacy`] into this same shape.

use serde::Deserialize;
use serde_json::Value;

/// One hook firing. Every field is optional here so that a payload from a newer or older
/// Cline still maps; [`HookPayload::parse`] checks the two fields identity needs.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HookPayload {
    #[serde(rename = "hookName")]
    pub hook_name: String,
    #[serde(rename = "clineVersion", default)]
    pub cline_version: Option<String>,
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The conversation id (`conv_...` on CLI 3.0.65).
    #[serde(rename = "taskId", default)]
    pub task_id: Option<String>,
    #[serde(rename = "sessionContext", default)]
    pub session_context: Option<SessionContext>,
    #[serde(rename = "workspaceRoots", default)]
    pub workspace_roots: Vec<String>,
    #[serde(rename = "workspaceInfo", default)]
    pub workspace_info: Option<WorkspaceInfo>,
    #[serde(rename = "userId", default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub parent_agent_id: Option<String>,
    #[serde(default)]
    pub iteration: Option<u64>,
    #[serde(default)]
    pub tool_call: Option<ToolCall>,
    #[serde(default)]
    pub tool_result: Option<ToolCallRecord>,
    #[serde(default)]
    pub turn: Option<Value>,
    #[serde(default)]
    pub error: Option<HookError>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(rename = "preCompact", default)]
    pub pre_compact: Option<PreCompact>,
    /// The model the task uses (Cline 2.x's `model.slug`; 3.x's payloads name none).
    #[serde(skip)]
    pub model: Option<String>,
    /// Set when the payload came from Cline 2.x ([`crate::legacy::normalize`]).
    #[serde(skip)]
    pub legacy: Option<Legacy>,
    /// The optional fields that had the wrong type and were read as absent (their paths;
    /// never their values, which may be secrets).
    #[serde(skip)]
    pub dropped: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SessionContext {
    /// The hub's session id (`<ms>_<suffix>`), shared by hook and hub events.
    #[serde(rename = "rootSessionId", default)]
    pub root_session_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkspaceInfo {
    #[serde(rename = "rootPath", default)]
    pub root_path: Option<String>,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(rename = "latestGitCommitHash", default)]
    pub latest_git_commit_hash: Option<String>,
    #[serde(rename = "latestGitBranchName", default)]
    pub latest_git_branch_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCall {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub input: Value,
}

/// `ToolCallRecord`: its `error` splits `tool.completed` from `tool.failed`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallRecord {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub input: Value,
    #[serde(default)]
    pub output: Value,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(rename = "durationMs", default)]
    pub duration_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct HookError {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PreCompact {
    #[serde(rename = "compactionStrategy", default)]
    pub compaction_strategy: Option<String>,
    #[serde(rename = "tokensIn", default)]
    pub tokens_in: Option<u64>,
    #[serde(rename = "tokensOut", default)]
    pub tokens_out: Option<u64>,
    #[serde(rename = "contextJsonPath", default)]
    pub context_json_path: Option<String>,
    #[serde(rename = "contextRawPath", default)]
    pub context_raw_path: Option<String>,
}

/// What only a 2.x payload says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Legacy {
    /// The 2.x hook name, as fired (`TaskCancel`).
    pub hook: String,
    /// A `Notification` hook's object.
    pub notification: Option<Notification>,
}

/// `notification`: Cline tells the user something (`task_complete` after `attempt_completion`,
/// `user_attention` when it waits for an answer, such as `resume_task` or `api_req_failed`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Notification {
    #[serde(default)]
    pub event: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(rename = "sourceType", default)]
    pub source_type: Option<String>,
    /// Free text (a completion result, an API error's JSON): `redacted`+ only.
    #[serde(default)]
    pub message: Option<String>,
    #[serde(rename = "requiresUserAction", default)]
    pub requires_user_action: Option<bool>,
    #[serde(rename = "waitingForUserInput", default)]
    pub waiting_for_user_input: Option<bool>,
}

/// Why a body is not a hook payload we can place on a session.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Syntax only: serde_json's syntax messages name a place, never the content.
    #[error("hook payload is not JSON: {0}; Cline writes one JSON object to the hook's stdin")]
    Json(#[from] serde_json::Error),
    /// A field of the wrong type. Only its path is said: the value may be a secret.
    #[error("hook payload field `{0}` does not have the type Cline gives it; is this a Cline hook payload?")]
    Field(String),
    #[error("hook payload is not a JSON object (got {0}); Cline writes one JSON object to the hook's stdin")]
    NotObject(&'static str),
    #[error("hook payload has no hookName: not a Cline hook payload")]
    NoHookName,
    #[error(
        "hook payload has neither sessionContext.rootSessionId nor taskId: cannot tell which session it belongs to"
    )]
    NoSession,
    /// Reading or mapping it panicked: a bug of ours, which costs this one hook only.
    #[error("aep-cline failed on this hook payload ({0}); it is set aside, the others go on: please report this bug with the payload")]
    Panicked(String),
}

impl PayloadError {
    /// The error for a panic caught while a hook was read or mapped (`std::panic::catch_unwind`).
    pub fn panicked(panic: Box<dyn std::any::Any + Send>) -> Self {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        PayloadError::Panicked(message)
    }
}

impl HookPayload {
    /// The workspace folder: `workspaceInfo.rootPath`, else the first of `workspaceRoots`.
    pub fn workspace(&self) -> Option<&str> {
        self.workspace_info
            .as_ref()
            .and_then(|i| i.root_path.as_deref())
            .or(self.workspace_roots.first().map(String::as_str))
            .filter(|w| !w.is_empty())
    }

    /// The AEP session: `sessionContext.rootSessionId`, which the hub also speaks, else the
    /// `taskId` (the public fixtures and older Clines carry no session context).
    pub fn session_key(&self) -> Option<&str> {
        self.session_context
            .as_ref()
            .and_then(|c| c.root_session_id.as_deref())
            .filter(|s| !s.is_empty())
            .or(self.task_id.as_deref().filter(|s| !s.is_empty()))
    }

    /// The 2.x hook name, when the payload came from Cline 2.x.
    pub fn legacy_hook(&self) -> Option<&str> {
        self.legacy.as_ref().map(|l| l.hook.as_str())
    }

    /// The agent the hook is about (runs are tracked per agent: a subagent has its own).
    pub fn agent(&self) -> &str {
        self.agent_id.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_key_prefers_the_root_session_id() {
        let p = HookPayload::parse(
            br#"{"hookName":"agent_start","taskId":"conv_1","sessionContext":{"rootSessionId":"17_ab"},"extra":{"x":1},"preToolUse":{"toolName":"t","parameters":{"a":"[1]"}}}"#,
        )
        .unwrap();
        assert_eq!(p.session_key(), Some("17_ab"));
        let p = HookPayload::parse(br#"{"hookName":"agent_start","taskId":"conv_1","sessionContext":{}}"#).unwrap();
        assert_eq!(p.session_key(), Some("conv_1"));
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        assert!(matches!(HookPayload::parse(b"{nope"), Err(PayloadError::Json(_))));
        assert!(matches!(
            HookPayload::parse(b"[1]"),
            Err(PayloadError::NotObject("an array"))
        ));
        assert!(matches!(
            HookPayload::parse(b"{\"taskId\":\"t\"}"),
            Err(PayloadError::NoHookName)
        ));
        assert!(matches!(
            HookPayload::parse(b"{\"hookName\":\"agent_start\"}"),
            Err(PayloadError::NoSession)
        ));
        // A field that places the hook, of the wrong type, is refused, not guessed at; only
        // its path is said (the value may be a secret).
        for (body, field) in [
            (&br#"{"hookName":"tool_call","taskId":7}"#[..], "taskId"),
            (
                br#"{"hookName":"tool_call","taskId":"t","sessionContext":"AKIAJ7EXAMPLEKEY1234"}"#,
                "sessionContext",
            ),
            (
                br#"{"hookName":"tool_call","taskId":"t","sessionContext":{"rootSessionId":1}}"#,
                "sessionContext.rootSessionId",
            ),
            (br#"{"hookName":"tool_call","taskId":"t","agent_id":["a"]}"#, "agent_id"),
        ] {
            match HookPayload::parse(body) {
                Err(e @ PayloadError::Field(_)) => {
                    let e = e.to_string();
                    assert!(e.contains(&format!("`{field}`")) && !e.contains("AKIA"), "{e}");
                }
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_optional_field_of_the_wrong_type_is_read_as_absent_and_named() {
        let p = HookPayload::parse(
            br#"{"hookName":"tool_result","taskId":"t","iteration":"one","userId":5,
                "tool_result":{"id":"c1","name":"read_file","durationMs":"AKIAJ7EXAMPLEKEY1234"},
                "workspaceRoots":["/w",3],"preCompact":"now"}"#,
        )
        .unwrap();
        assert_eq!((p.iteration, p.user_id.as_deref()), (None, None));
        assert_eq!(p.workspace(), Some("/w"), "the first root, without workspaceInfo");
        let record = p.tool_result.unwrap();
        assert_eq!(
            (record.id.as_deref(), record.name.as_deref(), record.duration_ms),
            (Some("c1"), Some("read_file"), None),
            "the rest of the object is kept"
        );
        assert_eq!(p.workspace_roots, ["/w"]);
        assert!(p.pre_compact.is_none());
        let mut dropped = p.dropped.clone();
        dropped.sort();
        assert_eq!(
            dropped,
            [
                "iteration",
                "preCompact",
                "tool_result.durationMs",
                "userId",
                "workspaceRoots[1]"
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_before_the_object_is_ignored() {
        let p = HookPayload::parse(b"\xEF\xBB\xBF{\"hookName\":\"agent_start\",\"taskId\":\"t\"}").unwrap();
        assert_eq!(p.session_key(), Some("t"));
        assert!(matches!(
            HookPayload::parse(b"\xEF\xBB\xBF\xEF\xBB\xBF{}"),
            Err(PayloadError::Json(_))
        ));
    }
}
