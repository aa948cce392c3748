//! Cline 2.x's own record of how a task's run ended, read from `<data>/tasks/<id>/ui_messages.json`
//! (the messages the user saw, in the order Cline appended them; `state/taskHistory.json`'s `ts`
//! is the same time as the deciding message, so the task's folder alone is read). The daemon's
//! reconciler weighs it as evidence; this module knows only the file.
//!
//! The last deciding message says it: `say: completion_result` → the run completed; `ask:
//! api_req_failed` (2.x gave up on a 429 or 500; its text is the provider error's JSON) → it
//! failed; a later model request, retry or user message opens the outcome again; nothing
//! deciding → not known. 2.x writes no end time: the end is at the task's last message (`ts`,
//! epoch ms).

use crate::problem::{Problem, ProblemKind};
use serde::Deserialize;
use std::path::Path;

/// The largest `ui_messages.json` read (a long task's is a few MiB).
pub const MAX_MESSAGES_FILE: u64 = 64 << 20;

/// How the task's last run ended, as its messages say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// `say: completion_result`, with nothing after it that opened the run again.
    Completed,
    /// `ask: api_req_failed`: 2.x gave up on a model request; `text` is the provider error as
    /// 2.x wrote it (JSON, or empty when the field was missing or not text).
    ApiFailed { text: String },
    /// Nothing decides (the task went on, or never got that far).
    Open,
}

/// What the record says: the outcome and the task's last message time (epoch ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    pub outcome: TaskOutcome,
    pub last_ts: Option<i64>,
}

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

/// The end Cline 2.x recorded for task `task` in data folder `data_dir`: `Ok(None)` when there
/// is no record (no such file, or `task` is not a name 2.x gives a task: never a path out of
/// the store); a [`Problem`] when the file is there and cannot be read (a FIFO or a file larger
/// than [`MAX_MESSAGES_FILE`] where it should be) or is not the JSON 2.x writes.
pub fn read_end(data_dir: &Path, task: &str) -> Result<Option<TaskEnd>, Problem> {
    if !crate::is_plain_id(task) {
        return Ok(None);
    }
    let path = data_dir.join("tasks").join(task).join("ui_messages.json");
    let mut bytes = Vec::new();
    match crate::vendor_file::read(&path, MAX_MESSAGES_FILE, &mut bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Problem::new(path, ProblemKind::Unreadable(e.to_string()))),
    }
    end_of(&bytes)
        .map(Some)
        .map_err(|e| Problem::new(path, ProblemKind::Corrupt(e.to_string())))
}

/// What the messages of one `ui_messages.json` say (see the module docs).
pub fn end_of(bytes: &[u8]) -> Result<TaskEnd, serde_json::Error> {
    let messages: Vec<Message> = serde_json::from_slice(bytes)?;
    let mut outcome = TaskOutcome::Open;
    for m in &messages {
        match (m.say.as_deref(), m.ask.as_deref()) {
            (Some("completion_result"), _) => outcome = TaskOutcome::Completed,
            (_, Some("api_req_failed")) => {
                outcome = TaskOutcome::ApiFailed {
                    text: m.text.clone().unwrap_or_default(),
                }
            }
            // The task went on: a model request, a retry, the user's answer.
            (Some("api_req_started" | "api_req_retried" | "user_feedback"), _) => outcome = TaskOutcome::Open,
            _ => {}
        }
    }
    Ok(TaskEnd {
        outcome,
        last_ts: messages.iter().filter_map(|m| m.ts).max(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The storage 2.18 left for a captured case (`tests/data/cline2/`).
    fn captured(case: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/cline2")
            .join(case)
    }

    #[test]
    fn a_completed_task_completed_at_its_last_message() {
        let end = read_end(&captured("a-cmd"), "1796103184924").unwrap().unwrap();
        assert_eq!(end.outcome, TaskOutcome::Completed);
        // `ask: resume_task`, 2.x's last message once the CLI let the task go.
        assert_eq!(end.last_ts, Some(1796103187963));
        let failed_command = read_end(&captured("c-cmdfail"), "1796103200033").unwrap().unwrap();
        assert_eq!(
            failed_command.outcome,
            TaskOutcome::Completed,
            "a failing command is not a failed run"
        );
        let failed = read_end(&captured("d-error500"), "1796103205397").unwrap().unwrap();
        assert!(
            matches!(&failed.outcome, TaskOutcome::ApiFailed { text } if text.contains("500")),
            "{failed:?}"
        );
    }

    fn messages(json: &str) -> TaskEnd {
        end_of(json.as_bytes()).unwrap()
    }

    #[test]
    fn what_comes_after_decides() {
        // Retried after the failure (the user's retry), then completed.
        let end = messages(
            r#"[{"ts":1,"type":"ask","ask":"api_req_failed","text":"{\"status\":429}"},
                {"ts":2,"type":"say","say":"api_req_retried"},
                {"ts":3,"type":"say","say":"completion_result","text":"done"}]"#,
        );
        assert_eq!(end.outcome, TaskOutcome::Completed);
        // Resumed after its completion with new feedback, and then cut short.
        let end = messages(
            r#"[{"ts":1,"say":"completion_result"},{"ts":5,"ask":"resume_completed_task"},
                {"ts":9,"say":"user_feedback","text":"more"},{"ts":10,"say":"api_req_started","text":"{}"}]"#,
        );
        assert_eq!((end.outcome, end.last_ts), (TaskOutcome::Open, Some(10)));
        let end = messages(r#"[{"ts":4,"ask":"api_req_failed","text":"{\"status\":429}"}]"#);
        assert_eq!(
            end.outcome,
            TaskOutcome::ApiFailed {
                text: r#"{"status":429}"#.into()
            }
        );
        // Fields of the wrong type are read as absent; no message at all is no time.
        let end = messages(r#"[{"ts":"soon","say":7},{"ts":null,"ask":"api_req_failed","text":{"x":1}}]"#);
        assert_eq!(end.outcome, TaskOutcome::ApiFailed { text: String::new() });
        assert_eq!(end.last_ts, None);
        assert_eq!(messages("[]").last_ts, None);
    }

    #[test]
    fn the_record_is_read_defensively() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("tasks").join("17");
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(read_end(dir.path(), "17"), Ok(None), "missing");
        std::fs::write(folder.join("ui_messages.json"), b"{\"not\": \"a list\"}").unwrap();
        assert!(
            matches!(
                read_end(dir.path(), "17"),
                Err(Problem {
                    kind: ProblemKind::Corrupt(_),
                    ..
                })
            ),
            "not the JSON 2.x writes"
        );
        std::fs::write(folder.join("ui_messages.json"), b"[{\"ts\":1,\"say\":\"completion_").unwrap();
        assert!(read_end(dir.path(), "17").is_err(), "cut off mid-write");
        for name in ["../a-cmd/tasks/1796103184924", "", ".", "..", "a\\b", "a\0b"] {
            assert_eq!(read_end(&captured("a-cmd"), name), Ok(None), "{name:?}");
        }
        let fifo = dir.path().join("tasks").join("18");
        std::fs::create_dir_all(&fifo).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(fifo.join("ui_messages.json"))
            .status()
            .unwrap()
            .success());
        assert!(
            matches!(
                read_end(dir.path(), "18"),
                Err(Problem {
                    kind: ProblemKind::Unreadable(_),
                    ..
                })
            ),
            "a FIFO is not read (nor waited on)"
        );
        let big = dir.path().join("tasks").join("19");
        std::fs::create_dir_all(&big).unwrap();
        let file = std::fs::File::create(big.join("ui_messages.json")).unwrap();
        file.set_len(MAX_MESSAGES_FILE + 1).unwrap();
        assert!(read_end(dir.path(), "19").is_err(), "larger than a record can be");
    }
}
