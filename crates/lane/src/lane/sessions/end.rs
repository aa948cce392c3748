//! Ending a session no hook ended: the reconciler found it over, the hub said so, or a person
//! ended it. One synthesized `session_shutdown` through the mapping, its terminals rewritten to
//! what the evidence shows, so every way a session ends writes the same Events.

use super::{IngestError, SessionState, Sessions};
use crate::lane::reconcile::{Detected, End, RunOutcome};
use aep_core::types::{RUN_FAILED, RUN_FINISHED, SESSION_ENDED};
use cline_hooks::mapping::MapContext;
use cline_hooks::HookPayload;
use std::time::Instant;

impl Sessions {
    /// A person ends a session the reconciler could not decide (`aep-cline end`, a
    /// `control.cancel {scope: "session"}`): its open runs are `run.cancelled {by: "control"}`,
    /// then `session.ended`, now, each caused by `command`. `false` when it had ended already.
    pub fn end_by_person(&self, session: &str, command: &str, reason: Option<&str>) -> Result<bool, IngestError> {
        self.with(session, |state| {
            if state.ended.is_some() || state.tracker.has_ended() {
                return Ok(false);
            }
            let end = End {
                time: None,
                detected: Detected::Person,
                run: RunOutcome::CancelledByUser,
                reason: None,
                unread: None,
            };
            self.end_now_with(session, state, &end, Some((command, reason)))?;
            Ok(true)
        })
    }

    /// Ends a session no hook will end, as `end` says: each open run gets the terminal the
    /// evidence shows (else `run.cancelled {by: "shutdown"}`), pending approvals are dismissed,
    /// then `session.ended` says `end`'s reason, else `killed` (a run was cut short) or
    /// `normal`. Every Event carries `end.time` (else now) and `data.detected`: how and when the
    /// daemon found out.
    pub(super) fn end_now(&self, session: &str, state: &mut SessionState, end: &End) -> Result<(), IngestError> {
        self.end_now_with(session, state, end, None)
    }

    fn end_now_with(
        &self,
        session: &str,
        state: &mut SessionState,
        end: &End,
        command: Option<(&str, Option<&str>)>,
    ) -> Result<(), IngestError> {
        state.tracker.set_hosted(false);
        let now = aep_core::id::now_rfc3339();
        let time = end.time.clone().unwrap_or_else(|| now.clone());
        let shutdown = serde_json::json!({
            "hookName": "session_shutdown",
            "taskId": session,
            "timestamp": time,
            "sessionContext": {"rootSessionId": session},
        });
        let payload = HookPayload::from_value(shutdown).expect("a well-formed synthetic payload");
        let ctx = MapContext {
            capture: &self.capture,
            redactor: &self.redactor,
        };
        let usage = crate::lane::run_usage::read(&payload, &state.tracker, state.cline_data.as_deref());
        let mut planned = state
            .tracker
            .plan_with(&payload, &ctx, &usage, &mut aep_core::id::new_id);
        let cut_short = planned.iter().any(|p| p.event.link == cline_hooks::Link::CloseRun);
        let mut detected = serde_json::json!({"by": end.detected.as_str(), "at": now});
        if let Some(unread) = &end.unread {
            detected["unread"] = unread.to_json();
        }
        for p in &mut planned {
            if p.event.link == cline_hooks::Link::CloseRun {
                outcome(&mut p.event, &end.run, command);
            } else if p.event.ty == SESSION_ENDED {
                if let Some(data) = p.event.data.as_mut() {
                    let reason = end.reason.unwrap_or(if cut_short { "killed" } else { "normal" });
                    data.insert("reason".into(), reason.into());
                    data.insert("detected".into(), detected.clone());
                }
            } else {
                continue;
            }
            if let Some((id, _)) = command {
                p.cause = Some(id.to_string()); // AEP-0004 §6
            }
        }
        self.dismiss_before_end(&mut planned, state);
        self.commit(session, state, &planned, None, &time)?;
        state.ended = Some(Instant::now());
        state.held = None; // the plan applied it
        self.store_unread.lock().remove(session);
        Ok(())
    }
}

/// Turns a synthesized run terminal (`run.cancelled {by: "shutdown"}`) into what the evidence
/// says the run did. `command`: the command that ended it, with its reason.
fn outcome(event: &mut cline_hooks::Mapped, run: &RunOutcome, command: Option<(&str, Option<&str>)>) {
    let Some(data) = event.data.as_mut() else { return };
    if let Some((_, said)) = command {
        data.insert("by".into(), "control".into());
        if let Some(text) = said.filter(|_| event.capture >= aep_core::Capture::Redacted) {
            data.insert("reason".into(), text.into());
        }
        return;
    }
    match run {
        RunOutcome::Shutdown => {}
        RunOutcome::CancelledByUser => {
            data.insert("by".into(), "user".into());
        }
        RunOutcome::Finished => {
            data.remove("by");
            event.ty = RUN_FINISHED.into();
            event.severity = None;
        }
        RunOutcome::ApiFailed(failure) => *event = failure.fail(event.clone()),
        RunOutcome::Failed { status, exit_code } => {
            data.remove("by");
            data.insert("reason".into(), status.clone().into());
            let mut error = serde_json::json!({"type": format!("cline_status_{status}")});
            if let Some(code) = exit_code {
                error["exit_code"] = (*code).into();
            }
            data.insert("error".into(), error);
            event.ty = RUN_FAILED.into();
            event.severity = Some(aep_core::Severity::Error);
        }
    }
}
