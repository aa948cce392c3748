//! Cline 2.x's own record of a task as evidence for the reconciler ([`crate::lane::reconcile`]):
//! how its run ended and when, as `cline_usage::task_record` reads it from the task's
//! `ui_messages.json`, put in the reconciler's terms. A completed run finished (`normal`); a
//! model request 2.x gave up on failed the run with the provider's error, as the hook mapping
//! writes the `Notification {source: "api_req_failed"}` of the same run (`error`); nothing
//! deciding is not known (`run.cancelled {by: shutdown}`). The end is at the task's last message.
//!
//! Unlike 3.x's status, a completion here does not end a live session (2.x's TUI takes feedback
//! on a completed task): the reconciler weighs it once the process is gone.

use crate::lane::reconcile::{Detected, End, RunOutcome};
use cline_hooks::session::ApiFailure;
use cline_usage::task_record::{self, TaskEnd, TaskOutcome};
use std::path::Path;

/// The end Cline 2.x recorded for task `task` in data folder `data_dir`: `None` when the task
/// has no readable record there (not a 2.x task, another data folder, a file that cannot be
/// read or is not the JSON 2.x writes: said in the log, and the end is judged without it).
pub fn read(data_dir: &Path, task: &str) -> Option<End> {
    match task_record::read_end(data_dir, task) {
        Ok(record) => record.map(end_of),
        Err(problem) => {
            tracing::warn!(%task, %problem, "Cline 2.x's record of the task was not read; its end is judged without it");
            None
        }
    }
}

/// The record in the reconciler's terms.
fn end_of(record: TaskEnd) -> End {
    let (run, reason) = match record.outcome {
        TaskOutcome::Completed => (RunOutcome::Finished, Some("normal")),
        TaskOutcome::ApiFailed { text } => (RunOutcome::ApiFailed(ApiFailure::said(&text)), Some("error")),
        TaskOutcome::Open => (RunOutcome::Shutdown, None),
    };
    End {
        time: record.last_ts.and_then(aep_core::time::millis_of_epoch_ms),
        detected: Detected::Store,
        reason,
        run,
        unread: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The storage 2.18 left for a captured case (`crates/cline-usage/tests/data/cline2/`).
    fn captured(case: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cline-usage/tests/data/cline2")
            .join(case)
    }

    #[test]
    fn a_completed_task_finished_at_its_last_message() {
        let end = read(&captured("a-cmd"), "1796103184924").unwrap();
        assert_eq!(
            (end.run, end.detected, end.reason),
            (RunOutcome::Finished, Detected::Store, Some("normal"))
        );
        // `ask: resume_task`, 2.x's last message once the CLI let the task go.
        assert_eq!(end.time.as_deref(), Some("2026-12-01T05:33:07.963Z"));
        let failed_command = read(&captured("c-cmdfail"), "1796103200033").unwrap();
        assert_eq!(
            failed_command.run,
            RunOutcome::Finished,
            "a failing command is not a failed run"
        );
    }

    #[test]
    fn a_model_failure_fails_the_run_with_the_providers_error() {
        let end = read(&captured("d-error500"), "1796103205397").unwrap();
        assert_eq!(end.reason, Some("error"));
        let RunOutcome::ApiFailed(failure) = &end.run else {
            panic!("{end:?}")
        };
        // As the hook mapping writes the `Notification {source: api_req_failed}` of the same run.
        let event = failure.fail(cline_hooks::Mapped {
            ty: "run.cancelled".into(),
            subject: None,
            step: None,
            severity: None,
            capture: aep_core::Capture::Metadata,
            data: serde_json::json!({"by": "shutdown"}).as_object().cloned(),
            link: cline_hooks::Link::CloseRun,
        });
        assert_eq!(event.ty, "run.failed");
        assert_eq!(
            serde_json::Value::Object(event.data.unwrap()),
            serde_json::json!({"reason": "api_req_failed", "error": {"type": "server_error", "status": 500}})
        );
        assert_eq!(end.time.as_deref(), Some("2026-12-01T05:33:46.823Z"));
    }

    #[test]
    fn an_unreadable_record_is_no_evidence() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks").join("17");
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(read(dir.path(), "17"), None, "missing");
        std::fs::write(folder.join("ui_messages.json"), b"[{\"ts\":1,\"say\":\"completion_").unwrap();
        assert_eq!(read(dir.path(), "17"), None, "cut off mid-write");
        assert_eq!(read(&captured("a-cmd"), "../a-cmd/tasks/1796103184924"), None);
    }
}
