//! What one Event is to the timeline, read once from its `type` (the constants of
//! `aep_core::types`, never a cut of the name): the timeline's fold then matches on a closed
//! set, and each family's entry is built in one place. Pure: no I/O, never a panic on input.

use aep_core::types::{
    ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT, CONTROL_ACCEPTED, CONTROL_REJECTED,
    DELEGATION_SUBAGENT_STARTED, DELEGATION_SUBAGENT_STOPPED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, RUN_STARTED,
    SESSION_COMPACTED, SESSION_ENDED, SESSION_STARTED, TOOL_COMPLETED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use serde_json::Value;

/// Cline's own types the timeline shows (`x.cline.*`: `cline_hooks::types`, beside the core
/// registry in `aep_core::types`).
use cline_hooks::types::{INPUT_SENT, PROMPT_SUBMITTED};

/// The subject a budget's notice names ([`crate::budget::watch`] writes it).
const BUDGET_SUBJECT: &str = "budget";

/// What one Event is to the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Happening<'a> {
    SessionStarted,
    SessionEnded,
    RunStarted,
    RunEnded(RunEnd),
    ToolRequested,
    ToolEnded(ToolEnd),
    /// A budget's notice: an `attention.requested` that asks nobody (`respond_via: ["oob"]`).
    BudgetNotice,
    Asked,
    Answered,
    /// An `attention.resolved`, or its `attention.timeout` (`true`).
    AskClosed {
        timeout: bool,
    },
    CommandAcked(Ack),
    InputSent,
    PromptSubmitted,
    Compacted,
    Delegation(Delegation),
    /// Any other type, named as it is (`""` when the Event has none).
    Other(&'a str),
}

/// A run's terminal (AEP-0002: one per run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Finished,
    Failed,
    Cancelled,
}

/// A tool call's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolEnd {
    Completed,
    Failed,
    Denied,
}

/// A command's ack (AEP-0004: one per command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    Accepted,
    Rejected,
}

/// A subagent's start or stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delegation {
    Started,
    Stopped,
}

impl RunEnd {
    /// The entry's status: the outcome the terminal names.
    pub fn status(self) -> &'static str {
        match self {
            RunEnd::Finished => "finished",
            RunEnd::Failed => "failed",
            RunEnd::Cancelled => "cancelled",
        }
    }
}

impl ToolEnd {
    pub fn status(self) -> &'static str {
        match self {
            ToolEnd::Completed => "completed",
            ToolEnd::Failed => "failed",
            ToolEnd::Denied => "denied",
        }
    }
}

impl Ack {
    pub fn status(self) -> &'static str {
        match self {
            Ack::Accepted => "accepted",
            Ack::Rejected => "rejected",
        }
    }
}

impl Delegation {
    pub fn status(self) -> &'static str {
        match self {
            Delegation::Started => "started",
            Delegation::Stopped => "stopped",
        }
    }
}

impl<'a> Happening<'a> {
    /// Reads an Event's `type` (and, for an `attention.requested`, whether it is a budget's
    /// notice: its subject, and a `data.budget` object).
    pub fn of(event: &'a Value) -> Self {
        let ty = event.get("type").and_then(Value::as_str).unwrap_or_default();
        match ty {
            SESSION_STARTED => Happening::SessionStarted,
            SESSION_ENDED => Happening::SessionEnded,
            RUN_STARTED => Happening::RunStarted,
            RUN_FINISHED => Happening::RunEnded(RunEnd::Finished),
            RUN_FAILED => Happening::RunEnded(RunEnd::Failed),
            RUN_CANCELLED => Happening::RunEnded(RunEnd::Cancelled),
            TOOL_REQUESTED => Happening::ToolRequested,
            TOOL_COMPLETED => Happening::ToolEnded(ToolEnd::Completed),
            TOOL_FAILED => Happening::ToolEnded(ToolEnd::Failed),
            TOOL_DENIED => Happening::ToolEnded(ToolEnd::Denied),
            ATTENTION_REQUESTED if is_budget_notice(event) => Happening::BudgetNotice,
            ATTENTION_REQUESTED => Happening::Asked,
            ATTENTION_ANSWERED => Happening::Answered,
            ATTENTION_RESOLVED => Happening::AskClosed { timeout: false },
            ATTENTION_TIMEOUT => Happening::AskClosed { timeout: true },
            CONTROL_ACCEPTED => Happening::CommandAcked(Ack::Accepted),
            CONTROL_REJECTED => Happening::CommandAcked(Ack::Rejected),
            INPUT_SENT => Happening::InputSent,
            PROMPT_SUBMITTED => Happening::PromptSubmitted,
            SESSION_COMPACTED => Happening::Compacted,
            DELEGATION_SUBAGENT_STARTED => Happening::Delegation(Delegation::Started),
            DELEGATION_SUBAGENT_STOPPED => Happening::Delegation(Delegation::Stopped),
            other => Happening::Other(other),
        }
    }
}

/// A budget's notice names the subject `budget` and carries its numbers in `data.budget`; a
/// request without them is shown as the approval it says it is.
fn is_budget_notice(event: &Value) -> bool {
    event.get("subject").and_then(Value::as_str) == Some(BUDGET_SUBJECT)
        && event
            .get("data")
            .and_then(|d| d.get("budget"))
            .is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_type_is_read_once_and_the_statuses_are_the_types_outcomes() {
        for (ty, status) in [
            (RUN_FINISHED, RunEnd::Finished.status()),
            (RUN_FAILED, RunEnd::Failed.status()),
            (RUN_CANCELLED, RunEnd::Cancelled.status()),
            (TOOL_COMPLETED, ToolEnd::Completed.status()),
            (TOOL_FAILED, ToolEnd::Failed.status()),
            (TOOL_DENIED, ToolEnd::Denied.status()),
            (CONTROL_ACCEPTED, Ack::Accepted.status()),
            (CONTROL_REJECTED, Ack::Rejected.status()),
            (DELEGATION_SUBAGENT_STARTED, Delegation::Started.status()),
            (DELEGATION_SUBAGENT_STOPPED, Delegation::Stopped.status()),
        ] {
            // The words people read are the last segment of each type (`run.finished`).
            assert_eq!(aep_core::types::outcome(ty), status);
        }
        let notice = json!({"type": ATTENTION_REQUESTED, "subject": "budget", "data": {"budget": {}}});
        assert_eq!(Happening::of(&notice), Happening::BudgetNotice);
        let odd = json!({"type": ATTENTION_REQUESTED, "subject": "budget", "data": {"budget": 3}});
        assert_eq!(Happening::of(&odd), Happening::Asked);
        assert_eq!(Happening::of(&json!({"type": 7})), Happening::Other(""));
        assert_eq!(
            Happening::of(&json!({"type": "progress.status"})),
            Happening::Other("progress.status")
        );
    }
}
