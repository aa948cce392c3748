//! One constant per core Event type of AEP 0.1 (AEP-0002's registry, one schema each in
//! `conformance/schemas/types/`), so every crate names a type the same way and a typo is a
//! compile error, not an Event no view recognises. Vendor types (`x.cline.*`) are the
//! adapter's: `cline-hooks` names them.

pub const AGENT_HEALTH: &str = "agent.health";
pub const AGENT_HEARTBEAT: &str = "agent.heartbeat";
pub const AGENT_IDLE: &str = "agent.idle";
pub const AGENT_PRESENCE: &str = "agent.presence";
pub const ASSESSMENT_EVALUATION_RECORDED: &str = "assessment.evaluation.recorded";
pub const ASSESSMENT_FEEDBACK_RECEIVED: &str = "assessment.feedback.received";
pub const ASSESSMENT_GUARDRAIL_RECORDED: &str = "assessment.guardrail.recorded";
pub const ATTENTION_ANSWERED: &str = "attention.answered";
pub const ATTENTION_REQUESTED: &str = "attention.requested";
pub const ATTENTION_RESOLVED: &str = "attention.resolved";
pub const ATTENTION_ROUTED: &str = "attention.routed";
pub const ATTENTION_TIMEOUT: &str = "attention.timeout";
pub const CONTROL_ACCEPTED: &str = "control.accepted";
pub const CONTROL_ATTENTION_RESPOND: &str = "control.attention.respond";
pub const CONTROL_CANCEL: &str = "control.cancel";
pub const CONTROL_PAUSE: &str = "control.pause";
pub const CONTROL_REJECTED: &str = "control.rejected";
pub const CONTROL_RESUME: &str = "control.resume";
pub const DELEGATION_SUBAGENT_STARTED: &str = "delegation.subagent.started";
pub const DELEGATION_SUBAGENT_STOPPED: &str = "delegation.subagent.stopped";
pub const ERROR_RAISED: &str = "error.raised";
pub const PROGRESS_ARTIFACT_PRODUCED: &str = "progress.artifact.produced";
pub const PROGRESS_STATUS: &str = "progress.status";
pub const PROGRESS_TASK_COMPLETED: &str = "progress.task.completed";
pub const PROGRESS_TASK_PLANNED: &str = "progress.task.planned";
pub const RESOURCE_CITATION_RECORDED: &str = "resource.citation.recorded";
pub const RESOURCE_RETRIEVAL_REQUESTED: &str = "resource.retrieval.requested";
pub const RESOURCE_RETRIEVAL_RERANKED: &str = "resource.retrieval.reranked";
pub const RESOURCE_RETRIEVAL_RETURNED: &str = "resource.retrieval.returned";
pub const RUN_CANCELLED: &str = "run.cancelled";
pub const RUN_FAILED: &str = "run.failed";
pub const RUN_FINISHED: &str = "run.finished";
pub const RUN_STARTED: &str = "run.started";
pub const RUN_STEP_FINISHED: &str = "run.step.finished";
pub const RUN_STEP_STARTED: &str = "run.step.started";
pub const SESSION_COMPACTED: &str = "session.compacted";
pub const SESSION_ENDED: &str = "session.ended";
pub const SESSION_STARTED: &str = "session.started";
pub const STATE_DELTA: &str = "state.delta";
pub const STATE_SNAPSHOT: &str = "state.snapshot";
pub const TOOL_COMPLETED: &str = "tool.completed";
pub const TOOL_DENIED: &str = "tool.denied";
pub const TOOL_FAILED: &str = "tool.failed";
pub const TOOL_REQUESTED: &str = "tool.requested";

/// A type's last segment: the outcome a terminal names (`finished` of `run.finished`,
/// `accepted` of `control.accepted`).
pub fn outcome(ty: &str) -> &str {
    ty.rsplit_once('.').map_or(ty, |(_, last)| last)
}

/// Every core type, in name order.
pub const ALL: [&str; 44] = [
    AGENT_HEALTH,
    AGENT_HEARTBEAT,
    AGENT_IDLE,
    AGENT_PRESENCE,
    ASSESSMENT_EVALUATION_RECORDED,
    ASSESSMENT_FEEDBACK_RECEIVED,
    ASSESSMENT_GUARDRAIL_RECORDED,
    ATTENTION_ANSWERED,
    ATTENTION_REQUESTED,
    ATTENTION_RESOLVED,
    ATTENTION_ROUTED,
    ATTENTION_TIMEOUT,
    CONTROL_ACCEPTED,
    CONTROL_ATTENTION_RESPOND,
    CONTROL_CANCEL,
    CONTROL_PAUSE,
    CONTROL_REJECTED,
    CONTROL_RESUME,
    DELEGATION_SUBAGENT_STARTED,
    DELEGATION_SUBAGENT_STOPPED,
    ERROR_RAISED,
    PROGRESS_ARTIFACT_PRODUCED,
    PROGRESS_STATUS,
    PROGRESS_TASK_COMPLETED,
    PROGRESS_TASK_PLANNED,
    RESOURCE_CITATION_RECORDED,
    RESOURCE_RETRIEVAL_REQUESTED,
    RESOURCE_RETRIEVAL_RERANKED,
    RESOURCE_RETRIEVAL_RETURNED,
    RUN_CANCELLED,
    RUN_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    RUN_STEP_FINISHED,
    RUN_STEP_STARTED,
    SESSION_COMPACTED,
    SESSION_ENDED,
    SESSION_STARTED,
    STATE_DELTA,
    STATE_SNAPSHOT,
    TOOL_COMPLETED,
    TOOL_DENIED,
    TOOL_FAILED,
    TOOL_REQUESTED,
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_constants_are_the_registrys_types() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../conformance/schemas/types");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .into_string()
                    .ok()?
                    .strip_suffix(".schema.json")
                    .map(str::to_string)
            })
            .collect();
        on_disk.sort();
        assert_eq!(super::ALL.to_vec(), on_disk);
        assert!(super::ALL.iter().all(|t| crate::event_type::is_valid_type(t)));
        assert_eq!(super::outcome(super::RUN_FINISHED), "finished");
        assert_eq!(super::outcome(super::CONTROL_REJECTED), "rejected");
        assert_eq!(super::outcome("plain"), "plain");
    }
}
