//! Cline 2.x's own record of a task, as evidence for the reconciler ([`crate::lane::reconcile`]):
//! how the task's run ended and when, read from `<data>/tasks/<id>/ui_messages.json` (the
//! messages the user saw, in the order Cline appended them; `state/taskHistory.json`'s `ts` is
//! the same time as the deciding message, so the task's folder alone is read).
//!
//! The last deciding message says it: `say: completion_result` → the run finished; `ask:
//! api_req_failed` (2.x gave up on a 429 or 500: its text is the provider error's JSON, the
//! same as the `Notification {source: "api_req_failed"}` hook's) → it failed, with the error's
//! type and HTTP status as the hook mapping writes them; a later model request, retry or user
//! message opens the outcome again; nothing deciding → not known (`run.cancelled {by:
//! shutdown}`). 2.x writes no end time: the end is at the task's last message (`ts`, epoch ms).
//!
//! Unlike 3.x's status, a completion here does not end a live session (2.x's TUI takes feedback
//! on a completed task): the reconciler weighs it once the process is gone.

use crate::lane::reconcile::{Detected, End, RunOutcome};
use cline_hooks::session::ApiFailure;
use serde::Deserialize;
use std::path::Path;

/// The largest `ui_messages.json` read (a long task's is a few MiB).
pub const MAX_MESSAGES_FILE: u64 = 64 << 20;

/// One message of `ui_messages.json`, only what says how the task ended. A field of an
/// unexpected type is read as absent.
#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default, deserialize_with = "lenient")]
    ts: Option<i64>,
    #[serde(default, deserialize_with = "lenient")]
    say: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    ask: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    text: Option<String>,
}

fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// The end Cline 2.x recorded for task `task` in data folder `data_dir`: `None` when the task
/// has no readable record there (not a 2.x task, another data folder, a FIFO or a file larger
/// than [`MAX_MESSAGES_FILE`] where the file should be, or not the expected JSON).
pub fn read(data_dir: &Path, task: &str) -> Option<End> {
    if task.is_empty() || task.contains(['/', '\\']) || task.starts_with('.') {
        return None; // not a name 2.x gives a task: never a path out of the store
    }
    let path = data_dir.join("tasks").join(task).join("ui_messages.json");
    let mut bytes = Vec::new();
    if let Err(e) = cline_usage::vendor_file::read(&path, MAX_MESSAGES_FILE, &mut bytes) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(%task, path = %path.display(), error = %e, "Cline 2.x's record of the task was not read; its end is judged without it");
        }
        return None;
    }
    match serde_json::from_slice::<Vec<Message>>(&bytes) {
        Ok(messages) => Some(end_of(&messages)),
        Err(e) => {
            tracing::warn!(%task, path = %path.display(), error = %e, "Cline 2.x's record of the task is not the JSON it writes; its end is judged without it");
            None
        }
    }
}

/// What the messages say (see the module docs).
fn end_of(messages: &[Message]) -> End {
    let mut run = RunOutcome::Shutdown;
    for m in messages {
        match (m.say.as_deref(), m.ask.as_deref()) {
            (Some("completion_result"), _) => run = RunOutcome::Finished,
            (_, Some("api_req_failed")) => {
                run = RunOutcome::ApiFailed(ApiFailure::said(m.text.as_deref().unwrap_or_default()))
            }
            // The task went on: a model request, a retry, the user's answer.
            (Some("api_req_started" | "api_req_retried" | "user_feedback"), _) => run = RunOutcome::Shutdown,
            _ => {}
        }
    }
    let last = messages.iter().filter_map(|m| m.ts).max();
    End {
        time: last.and_then(aep_core::time::millis_of_epoch_ms),
        detected: Detected::Store,
        reason: match run {
            RunOutcome::Finished => Some("normal"),
            RunOutcome::ApiFailed(_) => Some("error"),
            _ => None,
        },
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

    fn messages(json: &str) -> End {
        end_of(&serde_json::from_str::<Vec<Message>>(json).unwrap())
    }

    #[test]
    fn what_comes_after_decides() {
        // Retried after the failure (the user's retry), then completed.
        let end = messages(
            r#"[{"ts":1,"type":"ask","ask":"api_req_failed","text":"{\"status\":429}"},
                {"ts":2,"type":"say","say":"api_req_retried"},
                {"ts":3,"type":"say","say":"completion_result","text":"done"}]"#,
        );
        assert_eq!(end.run, RunOutcome::Finished);
        // Resumed after its completion with new feedback, and then cut short.
        let end = messages(
            r#"[{"ts":1,"say":"completion_result"},{"ts":5,"ask":"resume_completed_task"},
                {"ts":9,"say":"user_feedback","text":"more"},{"ts":10,"say":"api_req_started","text":"{}"}]"#,
        );
        assert_eq!((end.run, end.reason), (RunOutcome::Shutdown, None));
        assert_eq!(end.time.as_deref(), Some("1970-01-01T00:00:00.010Z"));
        // A 429's text without `details`: the status alone.
        let end =
            messages(r#"[{"ts":4,"ask":"api_req_failed","text":"{\"status\":429,\"message\":\"429 Rate limit\"}"}]"#);
        assert_eq!(end.run, RunOutcome::ApiFailed(ApiFailure::said(r#"{"status":429}"#)));
        // Fields of the wrong type are read as absent; no message at all is no time.
        let end = messages(r#"[{"ts":"soon","say":7},{"ts":null,"ask":"api_req_failed","text":{"x":1}}]"#);
        assert_eq!(end.run, RunOutcome::ApiFailed(ApiFailure::said("")));
        assert_eq!(end.time, None);
        assert_eq!(messages("[]").time, None);
    }

    #[allow(unsafe_code)] // mkfifo, to make a FIFO where a file should be
    #[test]
    fn the_record_is_read_defensively() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks").join("17");
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(read(dir.path(), "17"), None, "missing");
        std::fs::write(folder.join("ui_messages.json"), b"{\"not\": \"a list\"}").unwrap();
        assert_eq!(read(dir.path(), "17"), None, "not the JSON 2.x writes");
        std::fs::write(folder.join("ui_messages.json"), b"[{\"ts\":1,\"say\":\"completion_").unwrap();
        assert_eq!(read(dir.path(), "17"), None, "cut off mid-write");
        assert_eq!(read(&captured("a-cmd"), "../a-cmd/tasks/1796103184924"), None);
        let fifo = dir.path().join("tasks").join("18");
        std::fs::create_dir_all(&fifo).unwrap();
        let path = std::ffi::CString::new(fifo.join("ui_messages.json").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert_eq!(read(dir.path(), "18"), None, "a FIFO is not read (nor waited on)");
        let big = dir.path().join("tasks").join("19");
        std::fs::create_dir_all(&big).unwrap();
        let file = std::fs::File::create(big.join("ui_messages.json")).unwrap();
        file.set_len(MAX_MESSAGES_FILE + 1).unwrap();
        assert_eq!(read(dir.path(), "19"), None, "larger than a record can be");
    }
}
