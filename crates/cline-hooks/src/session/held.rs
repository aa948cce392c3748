//! Cline 2.x's `TaskCancel`, held instead of applied, and the model failure it may stand for.
//!
//! Apart from the rest of planning because it is one vendor quirk with its own timing (see the
//! [`crate::session`] docs): 2.x fires a cancel after every completed run and a cancel after a
//! model request that failed for good, so a cancel waits until the session says which it was.
//! Pure like the tracker: the caller decides when the hold time has passed.

use super::{Planned, SessionTracker};
use crate::mapping::Mapped;
use crate::payload::HookPayload;
use crate::usage::Usage;
use aep_core::types::RUN_FAILED;
use serde_json::{json, Value};

/// A Cline 2.x `TaskCancel` not applied yet (see the [`crate::session`] docs).
#[derive(Debug, Clone)]
pub(super) struct HeldCancel {
    agent: String,
    event: Mapped,
    at: Option<i64>,
    /// What the run had used when the cancel came (read for the `TaskCancel` hook): its
    /// terminal carries it when the cancel is applied.
    usage: Option<Usage>,
}

/// What a 2.x `Notification {source: "api_req_failed"}` said of the failure: its `message` is the
/// provider error's JSON (`status`, `details.type`), the same text as the task's `ask:
/// api_req_failed` message in its `ui_messages.json` (which the daemon's reconciler reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    status: Option<u64>,
    kind: Option<String>,
}

impl ApiFailure {
    fn of(payload: &HookPayload) -> Option<ApiFailure> {
        let n = payload.legacy.as_ref()?.notification.as_ref()?;
        if n.source.as_deref() != Some("api_req_failed") {
            return None;
        }
        Some(ApiFailure::said(n.message.as_deref().unwrap_or_default()))
    }

    /// The failure 2.x's error text `message` describes; a text that is not its JSON says
    /// neither status nor type.
    pub fn said(message: &str) -> ApiFailure {
        let said: Value = serde_json::from_str(message).unwrap_or_default();
        let token = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                .map(str::to_string)
        };
        ApiFailure {
            status: said.get("status").and_then(Value::as_u64),
            kind: token(said.pointer("/details/type")).or_else(|| token(said.pointer("/error/type"))),
        }
    }

    /// A run's `run.cancelled` (the held `TaskCancel`'s, or one the daemon synthesized) as the
    /// failure it was.
    pub fn fail(&self, mut event: Mapped) -> Mapped {
        event.ty = RUN_FAILED.to_string();
        event.severity = Some(aep_core::Severity::Error);
        if let Some(data) = event.data.as_mut() {
            data.remove("by");
            data.insert("reason".to_string(), json!("api_req_failed"));
            let kind = match (&self.kind, self.status) {
                (Some(kind), _) => kind.clone(),
                (None, Some(status)) => format!("http_{status}"),
                (None, None) => "api_req_failed".to_string(),
            };
            let mut error = json!({"type": kind});
            if let Some(status) = self.status {
                error["status"] = json!(status);
            }
            data.insert("error".to_string(), error);
        }
        event
    }
}

impl SessionTracker {
    /// Whether a Cline 2.x `TaskCancel` is held (see the [`crate::session`] docs): the caller
    /// releases it with [`SessionTracker::release_held`] once it has waited long enough for the
    /// completion.
    pub fn holds_cancel(&self) -> bool {
        self.held.is_some()
    }

    /// Cline 2.x's own record of the task says its model request failed for good (its `ask:
    /// api_req_failed`), read by the caller when the `Notification` that says so is late or lost:
    /// a held cancel is then that failure, as if the `Notification` had come.
    pub fn note_api_failure(&mut self, failure: ApiFailure) {
        self.api_failed.get_or_insert(failure);
    }

    /// Applies the held `TaskCancel`: `run.cancelled {by: "user"}` for its run if that is still
    /// open (nothing when it closed meanwhile).
    pub fn release_held(&mut self, new_id: &mut dyn FnMut() -> String) -> Vec<Planned> {
        let Some(held) = self.held.take() else {
            return Vec::new();
        };
        let event = self.cancel_or_failure(held.event);
        self.close_run(&held.agent, event, held.at, held.usage.as_ref(), new_id)
            .into_iter()
            .collect()
    }

    /// A held 2.x cancel: the user's, or the run's model failure (see the [`crate::session`]
    /// docs).
    fn cancel_or_failure(&mut self, event: Mapped) -> Mapped {
        match self.api_failed.take() {
            Some(failure) => failure.fail(event),
            None => event,
        }
    }

    /// What a hook of `agent` (its 2.x hook name `legacy`) does to a held cancel: the run's
    /// `TaskComplete` drops it (the trailing cancel of a success), a `Notification` or another
    /// `TaskCancel` keeps it held, any other hook applies it first.
    pub(super) fn settle_held(
        &mut self,
        legacy: Option<&str>,
        agent: &str,
        new_id: &mut dyn FnMut() -> String,
    ) -> Option<Planned> {
        let held = self.held.take()?;
        match legacy {
            // The completion of the run the cancel was about: 2.x's trailing cancel.
            Some("TaskComplete") if held.agent == agent => None,
            Some("Notification" | "TaskCancel") => {
                self.held = Some(held);
                None
            }
            _ => {
                let event = self.cancel_or_failure(held.event);
                self.close_run(&held.agent, event, held.at, held.usage.as_ref(), new_id)
            }
        }
    }

    /// Notes a 2.x `Notification` that says the open run's model request failed for good.
    pub(super) fn note_notification(&mut self, payload: &HookPayload) {
        if payload.legacy_hook() != Some("Notification") {
            return;
        }
        if let Some(failure) = ApiFailure::of(payload) {
            self.api_failed = Some(failure);
        }
    }

    /// Holds `agent`'s 2.x `TaskCancel` (its mapped terminal `event`, hook time `at`, the run's
    /// `usage` then), unless its run is closed already (the completion came first) or a cancel
    /// is held already.
    pub(super) fn hold_cancel(&mut self, agent: String, event: Option<Mapped>, at: Option<i64>, usage: Option<&Usage>) {
        let closed = !self.runs.contains_key(&agent) && self.closed.contains(&agent);
        if !closed && self.held.is_none() {
            if let Some(event) = event {
                let usage = usage.cloned();
                self.held = Some(HeldCancel {
                    agent,
                    event,
                    at,
                    usage,
                });
            }
        }
    }
}
